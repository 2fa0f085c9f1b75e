"""Fast synthetic power-law graphs: homogeneous and ogbn-mag-shaped.

:func:`power_law_graph` generates an undirected Chung-Lu graph with learnable,
homophilous labels, :func:`power_law_hetero_graph` a heterogeneous graph with
ogbn-mag's node and edge types (``MAG_NODES``, ``MAG_RELATIONS``) scaled.
Both run the Numba kernels of ``pyg_orch.kernels.power_law`` in plain threads
over fixed-size chunks, so the output depends only on the seed, never on the
core count.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import torch
from torch_geometric.data import Data, HeteroData

from pyg_orch.datasets.splits import random_split_masks
from pyg_orch.kernels.power_law import (
    alias_table,
    count_rows,
    fill_edge_index,
    fill_features,
    fill_rows,
    merge_rows,
    sample_pairs,
    sort_unique_rows,
)

# Work is cut into fixed-size chunks (independent of the thread count) so the
# output only depends on the seed, never on how many cores ran it.
_EDGE_CHUNK = 1 << 21
_ROW_CHUNK = 1 << 16
# Duplicate pairs between hubs are dropped, so sampling is topped up until the
# edge count lands within this relative tolerance of the target.
_EDGE_TOLERANCE = 0.02
_MAX_ROUNDS = 6
_MAX_CSR_SLICES = 4
# Per-dimension noise std relative to sqrt(num_features) for unit-variance
# centroids: nearest-centroid accuracy on raw features stays well below 100%
# while averaging over homophilous neighbours recovers most of the signal.
_FEATURE_NOISE = 0.5
# power_law_hetero_graph's: twice as much, so a paper's own features classify
# it poorly and its neighbours (of every type) carry most of the signal.
_HETERO_FEATURE_NOISE = 1.0


# --------------------------------------------------------------------------
# Synthetic power-law graphs: orchestration
# --------------------------------------------------------------------------


def _num_threads() -> int:
    affinity = getattr(os, "sched_getaffinity", None)
    return len(affinity(0)) if affinity else os.cpu_count() or 1


def _run_tasks(task: Callable[[int], object], count: int) -> None:
    if count <= 1 or _num_threads() == 1:
        for index in range(count):
            task(index)
        return
    # The numba kernels release the GIL, so plain threads run them in parallel
    # without touching numba's threading layer (fork-safety).
    with ThreadPoolExecutor(min(_num_threads(), count)) as pool:
        list(pool.map(task, range(count)))


def _run_chunks(work: Callable[[int, int], object], total: int, chunk: int) -> None:
    bounds = [(lo, min(lo + chunk, total)) for lo in range(0, total, chunk)]
    _run_tasks(lambda index: work(*bounds[index]), len(bounds))


def _symmetric_csr(src: np.ndarray, dst: np.ndarray, num_nodes: int):
    """CSR holding both directions of every non-loop pair (unsorted, repeats)."""
    # Each thread scatters its own slice of pairs into private slots of every
    # row (row v holds slice 0's entries, then slice 1's, ...), so threads
    # never write the same place and need no atomics. Few slices: each costs
    # a full-length cursor array.
    num_slices = min(_num_threads(), _MAX_CSR_SLICES)
    cuts = np.linspace(0, len(src), num_slices + 1).astype(np.int64)
    slices = [(lo, hi) for lo, hi in zip(cuts[:-1], cuts[1:], strict=True)]
    counts = np.zeros((len(slices), num_nodes), np.int64)

    def count(t: int) -> None:
        lo, hi = slices[t]
        count_rows(src[lo:hi], dst[lo:hi], counts[t])

    _run_tasks(count, len(slices))
    indptr = np.zeros(num_nodes + 1, np.int64)
    np.cumsum(counts.sum(axis=0), out=indptr[1:])
    cursors = np.cumsum(counts, axis=0)
    cursors -= counts
    cursors += indptr[:-1]
    cols = np.empty(indptr[-1], np.int32)

    def fill(t: int) -> None:
        lo, hi = slices[t]
        fill_rows(src[lo:hi], dst[lo:hi], cursors[t], cols)

    _run_tasks(fill, len(slices))
    return indptr, cols


def _rank_weights(num_nodes: int, avg_degree: float, exponent: float) -> np.ndarray:
    """Power-law weights ``(r + r0)^(-1/(exponent-1))`` by rank ``r``.

    The offset ``r0 >= 1`` caps the largest expected degree near the Chung-Lu
    natural cutoff ``sqrt(num_nodes * avg_degree)``; without it the top hub of
    a large graph would expect more neighbours than there are nodes.
    """
    a = 1.0 / (exponent - 1.0)
    target = math.sqrt(num_nodes / avg_degree)  # max weight / mean weight

    def ratio(r0: float) -> float:
        lo, hi = r0 - 0.5, num_nodes + r0 - 0.5  # midpoint-rule integral bounds
        total = (
            math.log(hi / lo) if a == 1.0 else (hi ** (1 - a) - lo ** (1 - a)) / (1 - a)
        )
        return num_nodes * r0 ** (-a) / total

    lo, hi = 1.0, float(num_nodes) * 1e6
    if ratio(lo) > target:
        for _ in range(100):  # bisection in log space; ratio falls with r0
            mid = math.sqrt(lo * hi)
            lo, hi = (mid, hi) if ratio(mid) > target else (lo, mid)
    return (np.arange(num_nodes, dtype=np.float64) + lo) ** (-a)


class _EdgeSampler:
    """Weighted endpoint sampler with per-class alias tables for homophily.

    ``table`` draws any node by weight; segment ``c`` of ``class_table`` draws
    by weight within class ``c``, or among all nodes when no node has class
    ``c`` (only drawn when the class is another node type's: see ``sample``).
    """

    def __init__(
        self,
        weights: np.ndarray,
        labels: np.ndarray,
        homophily: float,
        num_classes: int | None = None,
    ):
        num_nodes = len(weights)
        if num_classes is None:
            num_classes = int(labels.max()) + 1
        self.homophily = float(homophily)
        whole = np.array([0, num_nodes], np.int64)
        self.table = alias_table(weights, np.arange(num_nodes), labels, whole)
        # Class-sorted copy: segment c of `class_table` draws within class c.
        class_ids = np.argsort(labels, kind="stable")
        sizes = np.bincount(labels, minlength=num_classes)
        if not sizes.all():
            segments = np.split(class_ids, np.cumsum(sizes)[:-1])
            sizes = np.where(sizes > 0, sizes, num_nodes)
            class_ids = np.concatenate(
                [ids if len(ids) else np.arange(num_nodes) for ids in segments]
            )
        self.class_ptr = np.zeros(num_classes + 1, np.int64)
        np.cumsum(sizes, out=self.class_ptr[1:])
        self.class_table = alias_table(
            weights[class_ids], class_ids, class_ids, self.class_ptr
        )

    def sample(
        self,
        key: np.uint64,
        start: int,
        count: int,
        target: _EdgeSampler | None = None,
    ):
        """Draws ``count`` pairs; pair ``i`` depends on ``key`` and ``start + i``.

        The first end is drawn by weight. Without ``target``, the second is too,
        within the first's class with probability ``homophily``. With
        ``target`` (another node type's sampler, same number of classes), the
        second is a node of ``target`` drawn within the first's class whatever
        the homophily: mixing in class-blind pairs is up to the caller.
        """
        homophily, class_table, class_ptr = (
            (self.homophily, self.class_table, self.class_ptr)
            if target is None
            else (1.0, target.class_table, target.class_ptr)
        )
        if len(class_ptr) != len(self.class_ptr):
            raise ValueError("target must have as many classes as the source")
        src = np.empty(count, np.int32)
        dst = np.empty(count, np.int32)

        def work(lo: int, hi: int) -> None:
            sample_pairs(
                key, start + lo, src[lo:hi], dst[lo:hi], homophily, self.table,
                class_table, class_ptr,
            )  # fmt: skip

        _run_chunks(work, count, _EDGE_CHUNK)
        return src, dst


class _RowSets:
    """Per-node sorted neighbour sets: row v is ``cols[indptr[v]:][:counts[v]]``."""

    def __init__(self, src: np.ndarray, dst: np.ndarray, num_nodes: int):
        self.indptr, self.cols = _symmetric_csr(src, dst, num_nodes)
        self.counts = np.empty(num_nodes, np.int64)
        _run_chunks(self._dedup, num_nodes, _ROW_CHUNK)

    def _dedup(self, lo: int, hi: int) -> None:
        sort_unique_rows(self.indptr, self.cols, self.counts, lo, hi)

    def add(self, src: np.ndarray, dst: np.ndarray) -> None:
        # Merging sorted rows is linear, so a top-up never re-sorts old rows.
        add_ptr, add_cols = _symmetric_csr(src, dst, len(self.counts))
        out_ptr = np.zeros_like(self.indptr)
        np.cumsum(self.counts + np.diff(add_ptr), out=out_ptr[1:])
        out_cols = np.empty(out_ptr[-1], np.int32)

        def work(lo: int, hi: int) -> None:
            merge_rows(
                self.indptr, self.cols, self.counts, add_ptr, add_cols, out_ptr,
                out_cols, lo, hi,
            )  # fmt: skip

        _run_chunks(work, len(self.counts), _ROW_CHUNK)
        self.indptr, self.cols = out_ptr, out_cols

    def edge_index(self) -> np.ndarray:
        new_ptr = np.zeros_like(self.indptr)
        np.cumsum(self.counts, out=new_ptr[1:])
        out = np.empty((2, int(new_ptr[-1])), np.int64)

        def work(lo: int, hi: int) -> None:
            fill_edge_index(self.indptr, self.cols, new_ptr, out, lo, hi)

        _run_chunks(work, len(self.counts), _ROW_CHUNK)
        return out


def _sample_edges(
    sampler: _EdgeSampler, num_nodes: int, num_directed: int, key: np.uint64
) -> np.ndarray:
    drawn = max(num_directed // 2, 1)
    rows = _RowSets(*sampler.sample(key, 0, drawn), num_nodes)
    found = int(rows.counts.sum())
    for _ in range(_MAX_ROUNDS):
        if found >= num_directed * (1 - _EDGE_TOLERANCE):
            break
        # Pairs between hubs repeat and vanish in the dedup, so top up. Extra
        # pairs collide more often than the average one did, hence the margin;
        # at most doubling per round bounds the work when the target is out of
        # reach (e.g. tiny classes with homophily 1).
        unique_per_pair = max(found / (2 * drawn), 1e-3)
        extra = math.ceil((num_directed - found) / 2 / unique_per_pair * 1.15)
        extra = min(extra, drawn)
        rows.add(*sampler.sample(key, drawn, extra))
        drawn += extra
        previous, found = found, int(rows.counts.sum())
        if found - previous < 0.1 * extra:
            break  # saturated: almost every new pair was already there
    return rows.edge_index()


def _node_features(
    labels: np.ndarray,
    num_features: int,
    seed_seq: np.random.SeedSequence,
    noise: float = _FEATURE_NOISE,
) -> np.ndarray:
    num_classes = int(labels.max()) + 1
    centroid_seq, noise_seq = seed_seq.spawn(2)
    centroids = np.random.default_rng(centroid_seq).standard_normal(
        (num_classes, num_features), dtype=np.float32
    )
    sigma = noise * math.sqrt(num_features)
    key = np.uint64(noise_seq.generate_state(1, np.uint64)[0])
    x = np.empty((len(labels), num_features), np.float32)

    def work(lo: int, hi: int) -> None:
        fill_features(key, labels, centroids, sigma, x, lo, hi)

    _run_chunks(work, len(labels), _ROW_CHUNK)
    return x


def _check_generator_args(
    num_nodes: int,
    avg_degree: float,
    num_features: int,
    num_classes: int,
    exponent: float,
    homophily: float,
) -> None:
    if not 2 <= num_nodes < 2**31:
        raise ValueError(f"num_nodes must be in [2, 2**31), got {num_nodes}")
    if not 0 < avg_degree <= (num_nodes - 1) / 2:
        raise ValueError(
            f"avg_degree must be in (0, (num_nodes - 1) / 2], got {avg_degree}"
        )
    if num_features < 1 or num_classes < 1:
        raise ValueError("num_features and num_classes must be positive")
    if exponent <= 1:
        raise ValueError(f"exponent must be > 1, got {exponent}")
    if not 0 <= homophily <= 1:
        raise ValueError(f"homophily must be in [0, 1], got {homophily}")


def power_law_graph(
    num_nodes: int,
    avg_degree: float = 20.0,
    num_features: int = 100,
    num_classes: int = 10,
    exponent: float = 2.1,
    homophily: float = 0.8,
    seed: int = 0,
    split: Sequence[float] = (0.6, 0.2, 0.2),
) -> Data:
    """Generates an undirected Chung-Lu power-law graph with learnable labels.

    Node ``i`` gets a power-law weight (random rank ``r``, weight
    ``(r + r0)^(-1/(exponent-1))`` with ``r0 >= 1`` capping the top hub near
    ``sqrt(num_nodes * avg_degree)`` neighbours) and a uniform random class.
    Each sampled pair picks its first endpoint by weight and, with probability
    ``homophily``, its second by weight within the first's class, otherwise by
    weight among all nodes. Self loops and duplicates are dropped and sampling
    is topped up until about ``num_nodes * avg_degree`` directed edges remain.
    Features are a random class centroid plus Gaussian noise strong enough
    that features alone classify imperfectly.

    Args:
        num_nodes: Number of nodes (< 2**31).
        avg_degree: Target mean degree; the graph stores both directions, so
            ``edge_index`` has about ``num_nodes * avg_degree`` columns.
        num_features: Feature dimension.
        num_classes: Number of classes.
        exponent: Power-law exponent of the degree distribution (> 1).
        homophily: Probability that an edge is drawn inside a class.
        seed: Seed; the output depends on nothing else (not the core count).
        split: Train/val/test fractions of the random split masks.

    Returns:
        ``Data`` with float32 ``x``, int64 ``y``, int64 ``edge_index`` sorted by
        (source, target), symmetric and without self loops or duplicates, and
        split masks.

    Raises:
        ValueError: For out-of-range arguments.

    Example:
        >>> data = power_law_graph(10_000, avg_degree=10, seed=1)
        >>> data.is_undirected(), data.has_self_loops()
        (True, False)
    """
    _check_generator_args(
        num_nodes, avg_degree, num_features, num_classes, exponent, homophily
    )
    weight_seq, label_seq, edge_seq, feature_seq = np.random.SeedSequence(seed).spawn(4)
    weights = _rank_weights(num_nodes, avg_degree, exponent)
    # Shuffle ranks over ids so hubs are spread over the whole id range.
    weights = weights[np.random.default_rng(weight_seq).permutation(num_nodes)]
    labels = np.random.default_rng(label_seq).integers(0, num_classes, num_nodes)
    sampler = _EdgeSampler(weights, labels, homophily)
    key = np.uint64(edge_seq.generate_state(1, np.uint64)[0])
    edge_index = _sample_edges(sampler, num_nodes, round(num_nodes * avg_degree), key)
    del sampler
    x = _node_features(labels, num_features, feature_seq)
    train, val, test = random_split_masks(num_nodes, split, seed)
    return Data(
        x=torch.from_numpy(x),
        y=torch.from_numpy(labels.astype(np.int64)),
        edge_index=torch.from_numpy(edge_index),
        train_mask=train,
        val_mask=val,
        test_mask=test,
    )


# ogbn-mag's node and edge counts (OGB's statistics), which
# power_law_hetero_graph scales.
MAG_NODES = {
    "paper": 736_389,
    "author": 1_134_649,
    "institution": 8_740,
    "field_of_study": 59_965,
}
MAG_RELATIONS = {
    ("author", "affiliated_with", "institution"): 1_043_998,
    ("author", "writes", "paper"): 7_145_660,
    ("paper", "cites", "paper"): 5_416_271,
    ("paper", "has_topic", "field_of_study"): 7_505_078,
}


def _mag_sizes(counts: dict, scale: float) -> dict:
    return {key: max(round(count * scale), 1) for key, count in counts.items()}


def _hetero_structure(scale: float, exponent: float, seed: int) -> HeteroData:
    rng = np.random.default_rng(seed)
    data = HeteroData()
    weights = {}
    for node_type, num_nodes in _mag_sizes(MAG_NODES, scale).items():
        data[node_type].num_nodes = num_nodes
        weights[node_type] = rng.permutation(_rank_weights(num_nodes, 10.0, exponent))
        weights[node_type] /= weights[node_type].sum()
    for (src, relation, dst), num_edges in _mag_sizes(MAG_RELATIONS, scale).items():
        edge_index = torch.from_numpy(
            np.stack(
                [
                    rng.choice(weights[src].size, num_edges, p=weights[src]),
                    rng.choice(weights[dst].size, num_edges, p=weights[dst]),
                ]
            )  # fmt: skip
        )
        data[src, relation, dst].edge_index = edge_index
        data[dst, f"rev_{relation}", src].edge_index = edge_index.flip(0)
    return data


def _typed_edges(
    source: _EdgeSampler,
    target: _EdgeSampler,
    num_edges: int,
    seed_seq: np.random.SeedSequence,
) -> np.ndarray:
    """``num_edges`` weighted pairs from ``source``'s nodes to ``target``'s.

    Each pair lands within its source's class with probability
    ``source.homophily`` and is class-blind otherwise. Sorted by (source,
    target), so the order tells nothing of which was which; duplicates kept.
    """
    count_seq, *key_seqs = seed_seq.spawn(4)
    within_key, src_key, dst_key = (
        np.uint64(seq.generate_state(1, np.uint64)[0]) for seq in key_seqs
    )
    num_within = int(
        np.random.default_rng(count_seq).binomial(num_edges, source.homophily)
    )
    num_blind = num_edges - num_within
    # The kernel draws class-blind ends from the first end's own table, so the
    # class-blind pairs join two independent first ends instead.
    src_within, dst_within = source.sample(within_key, 0, num_within, target)
    src_blind = source.sample(src_key, 0, num_blind)[0]
    dst_blind = target.sample(dst_key, 0, num_blind)[0]
    num_targets = target.table.shape[0]
    keys = np.concatenate([src_within, src_blind]).astype(np.int64) * num_targets
    keys += np.concatenate([dst_within, dst_blind])
    keys.sort()
    return np.stack(np.divmod(keys, num_targets))


def power_law_hetero_graph(
    scale: float = 1.0,
    exponent: float = 2.1,
    seed: int = 0,
    *,
    num_features: int = 0,
    num_classes: int = 16,
    homophily: float = 0.5,
) -> HeteroData:
    """Generates an ogbn-mag-shaped heterogeneous graph with power-law degrees.

    ogbn-mag's four node types and four relations, each with
    ``scale`` times its node and edge counts (1.9M nodes and 21.1M edges at
    ``scale=1``), plus the reverse of every relation (``rev_<relation>``), as
    :class:`~torch_geometric.transforms.ToUndirected` would add them. Both
    ends of each edge are drawn Chung-Lu style: by power-law weights of the
    nodes of their type, hubs spread over the id range. Duplicate edges are
    kept.

    With ``num_features=0`` (the default) only the structure is generated: it
    is what samplers read. With ``num_features > 0`` the graph is learnable,
    like :func:`power_law_graph`'s: every node of every type gets a uniform
    random latent class, and with probability ``homophily`` an edge's
    destination is drawn (still by weight) among the nodes of its type in its
    source's class (among all of them when the type has none of that class),
    otherwise among all nodes of its type. Every type gets features ``x``: its
    own random class centroids plus Gaussian noise twice as strong as
    :func:`power_law_graph`'s, so a paper's own features classify it poorly
    and its neighbours of every type carry most of the signal a GNN can use.
    Papers get their classes as labels ``y`` and random 60/20/20 split masks.
    Edges come sorted by (source, destination), and differ from the
    structure-only graph's of the same seed.

    Args:
        scale: fraction of ogbn-mag's size, in ``(0, 1]`` or above.
        exponent: power-law exponent of the degree distributions (> 1).
        seed: seed; the output depends on nothing else (not the core count).
        num_features: feature dimension of every node type; 0 generates the
            structure only (no classes, features, labels or masks).
        num_classes: number of classes (ignored when ``num_features=0``).
        homophily: probability that an edge is drawn within its source's class
            (ignored when ``num_features=0``); ``1 / num_classes`` of the
            other edges land in it by chance.

    Returns:
        A :class:`~torch_geometric.data.HeteroData` with ``num_nodes`` per type
        and eight int64 ``edge_index`` edge types; with ``num_features > 0``
        also float32 ``x`` ``[num_nodes, num_features]`` on every type, and
        int64 ``y`` and boolean ``train_mask``/``val_mask``/``test_mask`` on
        ``"paper"``.

    Raises:
        ValueError: For out-of-range arguments.

    Example:
        >>> data = power_law_hetero_graph(scale=0.001)
        >>> data["paper"].num_nodes, len(data.edge_types)
        (736, 8)
        >>> data = power_law_hetero_graph(scale=0.001, num_features=32)
        >>> paper = data["paper"]
        >>> tuple(paper.x.shape), paper.y.dtype, int(paper.train_mask.sum())
        ((736, 32), torch.int64, 441)
        >>> tuple(data["author"].x.shape)
        (1135, 32)
        >>> src, dst = data["paper", "cites", "paper"].edge_index
        >>> bool((paper.y[src] == paper.y[dst]).float().mean() > 0.4)
        True
    """
    if not scale > 0:
        raise ValueError(f"scale must be > 0, got {scale}")
    if not exponent > 1:
        raise ValueError(f"exponent must be > 1, got {exponent}")
    if num_features < 0:
        raise ValueError(f"num_features must be >= 0, got {num_features}")
    if num_features == 0:
        return _hetero_structure(scale, exponent, seed)
    if num_classes < 1:
        raise ValueError(f"num_classes must be positive, got {num_classes}")
    if not 0 <= homophily <= 1:
        raise ValueError(f"homophily must be in [0, 1], got {homophily}")
    node_seq, edge_seq = np.random.SeedSequence(seed).spawn(2)
    data = HeteroData()
    samplers = {}
    node_sizes = _mag_sizes(MAG_NODES, scale)
    for (node_type, num_nodes), seq in zip(
        node_sizes.items(), node_seq.spawn(len(node_sizes)), strict=True
    ):
        weight_seq, label_seq, feature_seq = seq.spawn(3)
        weights = _rank_weights(num_nodes, 10.0, exponent)
        weights = weights[np.random.default_rng(weight_seq).permutation(num_nodes)]
        labels = np.random.default_rng(label_seq).integers(0, num_classes, num_nodes)
        samplers[node_type] = _EdgeSampler(weights, labels, homophily, num_classes)
        store = data[node_type]
        store.num_nodes = num_nodes
        store.x = torch.from_numpy(
            _node_features(labels, num_features, feature_seq, _HETERO_FEATURE_NOISE)
        )
        if node_type == "paper":
            store.y = torch.from_numpy(labels)
            store.train_mask, store.val_mask, store.test_mask = random_split_masks(
                num_nodes, seed=seed
            )
    edge_sizes = _mag_sizes(MAG_RELATIONS, scale)
    for ((src, relation, dst), num_edges), seq in zip(
        edge_sizes.items(), edge_seq.spawn(len(edge_sizes)), strict=True
    ):
        edge_index = torch.from_numpy(
            _typed_edges(samplers[src], samplers[dst], num_edges, seq)
        )
        data[src, relation, dst].edge_index = edge_index
        data[dst, f"rev_{relation}", src].edge_index = edge_index.flip(0)
    return data
