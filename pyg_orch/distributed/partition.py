"""Partitions a graph for PyG's distributed training: :func:`partition_graph`.

METIS balances several constraints at once, as DGL's ``partition_graph(...,
balance_ntypes=..., balance_edges=True)`` asks it to: the nodes, the training
nodes and the in-edges of every part (on a heterogeneous graph, the nodes of
every node type). The parts are written in PyG's own on-disk format, by PyG's
own :class:`~torch_geometric.distributed.Partitioner` given our node->part
assignment, so :class:`~torch_geometric.distributed.LocalGraphStore` and
:class:`~torch_geometric.distributed.LocalFeatureStore` load them as they are.
NeutronOrch's hot vertices, replicated on every machine, go to ``hot.pt``.
:func:`split_seeds` splits the training seeds evenly over the trainers, each
rank's own part's seeds first.

Example:
    >>> import tempfile
    >>> from torch_geometric.data import Data
    >>> data = Data(edge_index=torch.tensor([[0, 1, 2, 3], [1, 0, 3, 2]]),
    ...             x=torch.randn(4, 2), num_nodes=4)
    >>> with tempfile.TemporaryDirectory() as root:
    ...     info = partition_graph(data, 2, root, balance=None)
    >>> info.num_nodes, info.edge_cut
    ((2, 2), 0)
"""

from __future__ import annotations

import json
import shutil
import uuid
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor
from torch_geometric.data import Data, HeteroData

from pyg_orch.distributed.engine.books import RangeBook
from pyg_orch.distributed.metis import metis_binding, metis_edge_parts
from pyg_orch.distributed.ranges import Numbering, bounds_of, rows_of, write_parts
from pyg_orch.hot.cache import HotCache
from pyg_orch.hot.choice import top_by_type

#: The aggregations ``hot.pt`` can hold: ``"gcn"`` only where a relation's
#: source and destination types are equal, the ``weighted_`` kinds (a
#: ``GraphConv`` given the graph's ``edge_weight``) only where the graph, or
#: the relation, has an ``edge_weight``.
HOT_KINDS = (
    "mean", "sum", "max", "gcn", "weighted_mean", "weighted_sum", "weighted_max",
)  # fmt: skip
#: The kinds ``hot.pt`` holds by default: what GraphSAGE's bottom layer needs.
#: Each kind costs every machine ``num_hot x F`` floats; a model that needs
#: another is refused, naming ``hot_kinds``.
DEFAULT_HOT_KINDS = ("mean",)
#: How nodes can be assigned to parts.
PART_METHODS = ("metis", "random")
#: The version of ``hot.pt``'s layout (2: it names its partitioning).
HOT_VERSION = 2
#: The name of the file, in the root and in each part, that names the
#: partitioning the files come from.
IDENTITY_FILE = "orch.json"
# What a partition root holds: PyG's files, the splits and the hot vertices.
_WRITTEN = ("META.json", "node_map", "node_map.pt", "edge_map", "edge_map.pt")
_EXTRA = ("split.pt", "hot.pt", IDENTITY_FILE)
#: The node masks whose ids ``split.pt`` holds.
SPLITS = ("train_mask", "val_mask", "test_mask")


@dataclass(frozen=True)
class PartitionInfo:
    """What :func:`partition_graph` wrote.

    Attributes:
        root: the partition's directory.
        num_parts: the number of parts.
        binding: the METIS binding that ran (see
            :func:`~pyg_orch.distributed.metis.metis_binding`), or
            ``"random"`` for ``method="random"``.
        num_nodes: nodes per part (all node types together).
        num_edges: edges per part: the in-edges of its nodes, as PyG assigns them.
        num_train: training nodes per part (zeros with ``balance=None``).
        edge_cut: edges whose two ends lie in different parts.
        num_hot: hot vertices written to ``hot.pt`` (0: no file).

    Example:
        >>> info = PartitionInfo(Path("p"), 1, "pymetis", (3,), (4,), (1,), 0, 0)
        >>> info.edge_cut
        0
    """

    root: Path
    num_parts: int
    binding: str
    num_nodes: tuple[int, ...]
    num_edges: tuple[int, ...]
    num_train: tuple[int, ...]
    edge_cut: int
    num_hot: int


def _homogeneous_edges(data: Data | HeteroData) -> tuple[Tensor, Tensor, dict, int]:
    # The edges of the homogeneous view (PyG's to_homogeneous numbering) and
    # each node type's [start, end).
    if isinstance(data, Data):
        return data.edge_index[0], data.edge_index[1], {}, data.num_nodes
    ranges, start = {}, 0
    for node_type in data.node_types:
        ranges[node_type] = (start, start + data[node_type].num_nodes)
        start += data[node_type].num_nodes
    src, dst = [], []
    for src_type, _, dst_type in data.edge_types:
        edge_index = data[src_type, _, dst_type].edge_index
        src.append(edge_index[0] + ranges[src_type][0])
        dst.append(edge_index[1] + ranges[dst_type][0])
    empty = torch.zeros(0, dtype=torch.long)
    return torch.cat(src or [empty]), torch.cat(dst or [empty]), ranges, start


def _mask(value: Any, num_nodes: int, name: str) -> Tensor:
    if not isinstance(value, Tensor) or value.dtype != torch.bool or value.dim() != 1:
        raise ValueError(f"{name} must be a 1-D bool Tensor, a training mask")
    if value.numel() != num_nodes:
        raise ValueError(
            f"{name} has {value.numel()} entries, not one per node ({num_nodes})"
        )
    return value


def _train_masks(data: Data | HeteroData, balance: Any) -> dict[Any, Tensor]:
    # The training mask of every node type that has one (key None: homogeneous).
    if balance is None:
        return {}
    if isinstance(data, Data):
        if isinstance(balance, str):
            if balance not in data:
                raise ValueError(
                    f"balance={balance!r} is not an attribute of the data; pass "
                    "the name of a node mask, a bool Tensor, or balance=None"
                )
            return {None: _mask(data[balance], data.num_nodes, f"data.{balance}")}
        if isinstance(balance, Tensor):
            return {None: _mask(balance, data.num_nodes, "balance")}
        raise ValueError("balance must be a str, a bool Tensor or None on a Data")
    if isinstance(balance, str):
        masks = {
            node_type: _mask(data[node_type][balance], data[node_type].num_nodes,
                             f"data[{node_type!r}].{balance}")
            for node_type in data.node_types
            if balance in data[node_type]
        }  # fmt: skip
        if not masks:
            raise ValueError(
                f"balance={balance!r} is on no node type of the HeteroData; pass "
                "a dict node_type -> bool mask, or balance=None"
            )
        return masks
    if not isinstance(balance, dict):
        raise ValueError(
            "balance on a HeteroData must be a mask name, a dict node_type -> "
            "bool mask, or None"
        )
    for node_type in balance:
        if node_type not in data.node_types:
            raise ValueError(f"balance names node type {node_type!r}, not in the data")
    return {
        node_type: _mask(mask, data[node_type].num_nodes, f"balance[{node_type!r}]")
        for node_type, mask in balance.items()
    }


def _constraints(
    data: Data | HeteroData,
    masks: dict[Any, Tensor],
    ranges: dict,
    degree: Tensor,
    balance_edges: bool,
) -> tuple[Tensor, Tensor]:
    # METIS's weight columns, as DGL builds them, and the training indicator.
    num_nodes = degree.numel()
    if isinstance(data, Data):
        columns = [torch.ones(num_nodes, dtype=torch.long)]
        train = masks[None] if masks else torch.zeros(num_nodes, dtype=torch.bool)
    else:
        columns, train = [], torch.zeros(num_nodes, dtype=torch.bool)
        for start, end in ranges.values():
            column = torch.zeros(num_nodes, dtype=torch.long)
            column[start:end] = 1
            columns.append(column)
        for node_type, mask in masks.items():
            start, end = ranges[node_type]
            train[start:end] = mask
    if masks:
        columns.append(train.long())
    if balance_edges:
        columns.append(degree)
    # An all-zero column (a type without nodes) constrains nothing.
    columns = [column for column in columns if bool(column.any())]
    return torch.stack(columns, dim=1), train


def _prepare_root(root: Path) -> None:
    # An empty or missing root, or a previous partition's (its files removed).
    if root.exists() and not root.is_dir():
        raise ValueError(f"root {str(root)!r} is a file; pass a directory")
    if not root.exists() or not any(root.iterdir()):
        return
    if not (root / "META.json").exists():
        raise ValueError(
            f"root {str(root)!r} is not empty and holds no previous partition "
            "(no META.json); pass an empty or new directory"
        )
    for path in root.iterdir():
        if path.name in _WRITTEN + _EXTRA or path.name.startswith("part_"):
            if path.is_dir():
                shutil.rmtree(path)
            else:
                path.unlink()


def _check(data: Any, num_parts: Any, balance_edges: Any) -> None:
    if not isinstance(data, Data | HeteroData):
        raise ValueError(
            f"data must be a Data or HeteroData, got {type(data).__name__}"
        )
    if isinstance(num_parts, bool) or not isinstance(num_parts, int) or num_parts < 1:
        raise ValueError(f"num_parts must be an integer >= 1, got {num_parts!r}")
    if not isinstance(balance_edges, bool):
        raise ValueError(f"balance_edges must be a bool, got {balance_edges!r}")
    stores = data.edge_stores
    if not stores or any("edge_index" not in store for store in stores):
        raise ValueError("data needs an edge_index (on every edge type) to partition")


def partition_graph(
    data: Data | HeteroData,
    num_parts: int,
    root: str | Path,
    *,
    balance: str | Tensor | dict | None = "train_mask",
    balance_edges: bool = True,
    hot_ratio: float | dict[str, float] = 0.0,
    seed: int = 0,
    method: str = "metis",
    hot_kinds: tuple[str, ...] | None = None,
) -> PartitionInfo:
    """Partitions a graph with METIS and writes it in PyG's partition format.

    Every node gets a vector of METIS balance constraints, as DGL's
    ``partition_graph`` builds it: 1 (the node count; on a
    :class:`~torch_geometric.data.HeteroData`, one 0/1 column per node type),
    1 for a training node (when ``balance`` names the training mask), and
    its in-degree (with ``balance_edges``). METIS runs on the homogeneous
    view of the graph (``data.to_homogeneous()``'s numbering) and cuts as few
    edges as it can while keeping each column close to even (max/mean at
    most 1.03; 1.016 for training nodes and in-edges on a 200k-node
    power-law graph in 4 parts, see tests/test_partition.py).

    The parts are range-numbered (:mod:`~pyg_orch.distributed.ranges`, as
    DistDGL numbers them): the nodes of part 0 get the first ids (of each
    node type), then those of part 1, and so on; the edges likewise, each in
    its destination's part. Every id a job sees (``n_id``, ``e_id``, seeds,
    ``split.pt``, ``hot.pt``) is a new id;
    :func:`~pyg_orch.distributed.ranges.original_ids` maps them back to
    the user's. A machine then knows every node's part from ``num_parts + 1``
    boundaries (``orch.json``), where PyG's maps are as long as the graph.

    ``root`` holds PyG's partition format (``META.json``, ``node_map``,
    ``edge_map``, ``part_i/graph.pt``, ``node_feats.pt``,
    ``edge_feats.pt``), so ``LocalGraphStore.from_partition(root, i)`` and
    ``LocalFeatureStore.from_partition(root, i)`` load part ``i``: each
    node type's ``x`` in its own width (PyG pads every type to the widest),
    its labels ``y`` beside it, and by edge id each edge type's
    ``edge_attr`` and ``edge_weight`` (which PyG drops). Each part also
    holds its original ids (``orig_ids.pt``), and ``root/split.pt`` the ids
    of the nodes of ``train_mask``, ``val_mask`` and ``test_mask`` (by node
    type on a HeteroData), so that a rank finds its seeds without the whole
    graph. The features are read by rows, one part at a time: ``x`` may be
    a memory-mapped ``numpy`` array (``np.load(path, mmap_mode="r")``),
    never read whole.

    With ``hot_ratio > 0`` it also writes ``root/hot.pt``, the hot vertices
    every part replicates: the top ``hot_ratio`` fraction of the nodes by
    in-degree (of each node type's, on a HeteroData), their features, and
    their full-neighbourhood aggregates
    (:class:`~pyg_orch.hot.cache.HotCache`): ``{"version": 2,
    "partition_id" (the partitioning's, as in ``orch.json``), "hot_ratio",
    "method": "degree", "num_nodes", "node": {key: sorted global ids},
    "x": {key: rows}, "values": {edge_key: {kind: [num_hot, F]}}}``, with
    ``key = edge_key = None`` on a Data, the node type and the edge type
    on a HeteroData (relations whose source type has no ``x`` are left out).

    Args:
        data: the graph; node features ``x``, ``edge_attr`` and ``time``
            or ``edge_time`` are partitioned as PyG's Partitioner does.
        num_parts: the number of parts, at least 1.
        root: the directory to write; missing, empty, or a previous partition
            (whose files are replaced).
        balance: the training nodes to balance: the name of a bool node mask
            (on a HeteroData, of every node type that has it), a bool Tensor
            (a Data), a dict ``node_type -> mask`` (a HeteroData), or
            ``None`` not to balance training nodes.
        balance_edges: balance the in-edges of the parts too.
        hot_ratio: the fraction of the nodes to write as hot (0: no
            ``hot.pt``); on a HeteroData, of every node type's, or a dict of
            fractions per node type (missing types: 0).
        seed: METIS's seed (of the assignment, for ``method="random"``).
        method: ``"metis"``, or ``"random"``: every node in a part drawn
            uniformly, the baseline METIS's edge cut is measured against.
        hot_kinds: the aggregations ``hot.pt`` holds, among
            :data:`HOT_KINDS`: each costs every machine ``num_hot x F``
            floats; a model is served only the ones written (GraphSAGE's
            bottom layer needs ``"mean"``, GCN's ``"gcn"``, GIN's ``"sum"``,
            a ``GraphConv`` given the graph's ``edge_weight``
            ``"weighted_sum"``). ``None``: :data:`DEFAULT_HOT_KINDS`.

    Returns:
        A :class:`PartitionInfo` of what was written.

    Raises:
        ValueError: a bad argument, named in the message with its fix.
        ImportError: no METIS binding (``pip install cmeel-metis``).

    Example:
        >>> import tempfile
        >>> from torch_geometric.data import Data
        >>> from torch_geometric.distributed import LocalGraphStore
        >>> data = Data(edge_index=torch.tensor([[0, 1, 2, 3], [1, 0, 3, 2]]),
        ...             x=torch.randn(4, 2),
        ...             train_mask=torch.tensor([True, False, True, False]))
        >>> with tempfile.TemporaryDirectory() as root:
        ...     info = partition_graph(data, 2, root, hot_ratio=0.25)
        ...     store = LocalGraphStore.from_partition(root, 0)
        ...     hot = torch.load(f"{root}/hot.pt")
        >>> info.num_train, store.num_partitions, hot["node"][None].numel()
        ((1, 1), 2, 1)
    """
    _check(data, num_parts, balance_edges)
    if method not in PART_METHODS:
        raise ValueError(f"method must be one of {PART_METHODS}, got {method!r}")
    hot_kinds = _hot_kinds(data, hot_kinds)
    root = Path(root)
    masks = _train_masks(data, balance)
    src, dst, ranges, num_nodes = _homogeneous_edges(data)
    degree = torch.bincount(dst, minlength=num_nodes)
    weights, train = _constraints(data, masks, ranges, degree, balance_edges)
    hot = _hot_nodes(data, hot_ratio, ranges, degree)
    if method == "random":
        binding = "random"
        generator = torch.Generator().manual_seed(seed)
        parts = torch.randint(num_parts, (num_nodes,), generator=generator)
    else:
        binding = metis_binding(weights.size(1))
        parts = metis_edge_parts(
            src, dst, num_nodes, num_parts, node_weights=weights, seed=seed
        )
    _prepare_root(root)
    numbering = Numbering.of(data, parts, num_parts)
    write_parts(data, numbering, root)
    _save_splits(data, numbering, root)
    partition_id = _save_identity(root, num_parts, numbering)
    if hot is not None:
        _save_hot(data, hot, hot_ratio, hot_kinds, root, partition_id, numbering)

    def per_part(part: Tensor, weight: Tensor | None = None) -> tuple[int, ...]:
        counts = torch.bincount(part, weight, minlength=num_parts)
        return tuple(int(count) for count in counts.tolist())

    return PartitionInfo(
        root=root,
        num_parts=num_parts,
        binding=binding,
        num_nodes=per_part(parts),
        num_edges=per_part(parts[dst]),
        num_train=per_part(parts, train.double()),
        edge_cut=int((parts[src] != parts[dst]).sum()),
        num_hot=0 if hot is None else sum(ids.numel() for ids in hot.values()),
    )


def _save_identity(root: Path, num_parts: int, numbering: Numbering) -> str:
    # One id per partitioning, in the root and in every part (and hot.pt): a
    # part copied from another partitioning (a stale copy on one machine) is
    # told apart. With it, each type's part boundaries.
    partition_id = uuid.uuid4().hex
    identity = json.dumps({
        "partition_id": partition_id, "num_parts": num_parts,
        "bounds": bounds_of(numbering),
    })  # fmt: skip
    for folder in [root, *(root / f"part_{pid}" for pid in range(num_parts))]:
        (folder / IDENTITY_FILE).write_text(identity)
    return partition_id


def _hot_kinds(data: Data | HeteroData, hot_kinds: Any) -> tuple[str, ...]:
    # The kinds hot.pt holds: by default every one the graph allows.
    weighted = [
        store for store in data.edge_stores if store.get("edge_weight") is not None
    ]
    if hot_kinds is None:
        return DEFAULT_HOT_KINDS
    unknown = [kind for kind in hot_kinds if kind not in HOT_KINDS]
    if unknown or not hot_kinds or isinstance(hot_kinds, str):
        raise ValueError(
            f"hot_kinds must be a tuple of one or more of {HOT_KINDS}, got "
            f"{hot_kinds!r}"
        )
    if not weighted and any(kind.startswith("weighted_") for kind in hot_kinds):
        raise ValueError(
            f"hot_kinds={hot_kinds!r} names weighted kinds, but the graph has no "
            f"edge_weight to weigh the edges by: leave them out, or give the "
            f"graph its edge_weight"
        )
    return tuple(hot_kinds)


def _save_splits(data: Data | HeteroData, numbering: Numbering, root: Path) -> None:
    # The new ids of the masks' nodes, so that a rank finds its seeds without
    # the whole graph ({node_type: {mask: ids}} on a HeteroData).
    def ids(store: Any, key: Any) -> dict[str, Tensor]:
        perm = numbering.nodes[key].perm
        return {
            name: store[name][perm].nonzero().view(-1)
            for name in SPLITS
            if name in store
        }

    if isinstance(data, Data):
        splits: Any = ids(data, None)
    else:
        splits = {t: ids(data[t], t) for t in data.node_types if ids(data[t], t)}
    if splits:
        torch.save(splits, root / "split.pt")


def _hot_nodes(
    data: Data | HeteroData, hot_ratio: Any, ranges: dict, degree: Tensor
) -> dict[Any, Tensor] | None:
    # The hot ids per node type (key None: homogeneous) by in-degree (of the
    # homogeneous view: over all relations), None without.
    ratios = hot_ratio.values() if isinstance(hot_ratio, dict) else [hot_ratio]
    if isinstance(data, Data) and isinstance(hot_ratio, dict):
        raise ValueError("hot_ratio must be a float on a Data, not a dict")
    if all(
        isinstance(r, int | float) and not isinstance(r, bool) and r == 0
        for r in ratios
    ):
        return None
    if isinstance(data, Data):
        if not isinstance(data.x, Tensor | np.ndarray):
            raise ValueError("hot_ratio > 0 needs node features data.x to aggregate")
        return {None: top_by_type(degree, hot_ratio, None)}
    chosen = top_by_type(degree, hot_ratio, ranges)
    return {
        node_type: chosen[(chosen >= start) & (chosen < end)] - start
        for node_type, (start, end) in ranges.items()
    }


def _hot_values(
    data: Any, key: Any, x: Any, hot: Tensor, kinds: tuple[str, ...], numbering: Any
) -> dict[str, Tensor]:
    # The hot nodes' aggregates of x over the edges of type key (None on a
    # Data), of each kind the edges allow: on the CSC of the new numbering
    # (its columns the new ids, its rows the old ones, as x's), hot in new
    # ids.
    store = data if key is None else data[key]
    perm = numbering.edges[key].perm
    row = store.edge_index[0][perm]
    weight = store.get("edge_weight")
    if isinstance(x, np.ndarray):  # a memory map: read where the edges point
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", "The given NumPy array is not writable")
            x = torch.from_numpy(x)
    cache = HotCache(numbering.colptr[key], row, x, hot, weight, perm)
    allowed = [k for k in kinds if weight is not None or not k.startswith("weighted_")]
    return {kind: cache.values(kind) for kind in allowed}


def _save_hot(
    data: Data | HeteroData,
    hot: dict[Any, Tensor],
    hot_ratio: Any,
    hot_kinds: tuple[str, ...],
    root: Path,
    partition_id: str,
    numbering: Numbering,
) -> None:
    # The hot nodes by their new ids, sorted.
    hot = {key: numbering.new_ids[key][ids].sort().values for key, ids in hot.items()}
    old = {key: numbering.nodes[key].perm[ids] for key, ids in hot.items()}
    if isinstance(data, Data):
        values = {
            None: _hot_values(data, None, data.x, hot[None], hot_kinds, numbering)
        }
        num_nodes: Any = data.num_nodes
        x = {None: rows_of(data.x, old[None])}
    else:
        values, num_nodes = {}, {t: data[t].num_nodes for t in data.node_types}
        x = {t: rows_of(data[t].x, old[t]) for t in hot if "x" in data[t]}
        for edge_type in data.edge_types:
            src_type, _, dst_type = edge_type
            if "x" not in data[src_type]:
                continue
            # GCN's normalisation is for one node type's own edges.
            kinds = tuple(k for k in hot_kinds if k != "gcn" or src_type == dst_type)
            values[edge_type] = _hot_values(
                data, edge_type, data[src_type].x, hot[dst_type], kinds, numbering
            )
    torch.save(
        {
            "version": HOT_VERSION,
            "partition_id": partition_id,
            "hot_ratio": hot_ratio,
            "method": "degree",
            "num_nodes": num_nodes,
            "node": hot,
            "x": x,
            "values": values,
        },
        root / "hot.pt",
    )


def split_seeds(
    seeds: Tensor,
    node_partition: Tensor | RangeBook,
    rank: int,
    world_size: int,
    *,
    seed: int | None = None,
) -> Tensor:
    """This rank's share of the training seeds: the same count for every rank.

    DGL's ``node_split(force_even=True)``: every rank gets
    ``len(seeds) // world_size`` seeds (the last ``len(seeds) % world_size``
    left over are dropped), first the seeds of its own part (rank ``r`` owns
    the parts ``p`` with ``p % world_size == r``; part ``r`` when there are
    ``world_size`` parts), then, if it owns too few, seeds that other ranks
    own too many of. Every rank computes the same split without talking to
    the others: the shares are disjoint and cover all the kept seeds.

    Args:
        seeds: global node ids of the training seeds, 1-D.
        node_partition: the part of every node: the graph store's
            ``node_pb`` (a :class:`~pyg_orch.distributed.engine.books.RangeBook`
            on a range-numbered partition, PyG's ``node_map.pt`` otherwise).
        rank: this trainer's rank, in ``[0, world_size)``.
        world_size: the number of trainers.
        seed: ``None`` keeps the seeds' order (each share in the order of
            ``seeds``); an int shuffles them first, the same way on every
            rank, so other seeds are dropped and borrowed.

    Returns:
        This rank's seeds, its own part's first.

    Raises:
        ValueError: bad ranks, shapes, or seeds outside ``node_partition``.

    Example:
        >>> parts = torch.tensor([0, 0, 0, 1, 0])
        >>> [split_seeds(torch.arange(5), parts, r, 2).tolist() for r in range(2)]
        [[0, 1], [3, 2]]
    """
    if (
        isinstance(world_size, bool)
        or not isinstance(world_size, int)
        or world_size < 1
    ):
        raise ValueError(f"world_size must be an integer >= 1, got {world_size!r}")
    if (
        isinstance(rank, bool)
        or not isinstance(rank, int)
        or not 0 <= rank < world_size
    ):
        raise ValueError(f"rank must be an integer in [0, {world_size}), got {rank!r}")
    if seeds.dim() != 1 or seeds.is_floating_point() or seeds.dtype == torch.bool:
        raise ValueError("seeds must be a 1-D tensor of node ids (not a mask)")
    if node_partition.dim() != 1:
        raise ValueError("node_partition must be 1-D: the part of every node")
    if seeds.numel() and (
        int(seeds.min()) < 0 or int(seeds.max()) >= node_partition.numel()
    ):
        raise ValueError(f"seeds must be node ids in [0, {node_partition.numel()})")
    if seed is not None:
        generator = torch.Generator().manual_seed(seed)
        seeds = seeds[torch.randperm(seeds.numel(), generator=generator)]
    share = seeds.numel() // world_size
    owner = node_partition[seeds.long()].long() % world_size
    order = torch.argsort(owner, stable=True)
    seeds, owner = seeds[order], owner[order]
    counts = torch.bincount(owner, minlength=world_size)
    first = counts.cumsum(0) - counts
    keep = torch.arange(seeds.numel()) - first[owner] < share
    need = share - counts.clamp(max=share)
    start = int(need[:rank].sum())
    borrowed = seeds[~keep][start : start + int(need[rank])]
    return torch.cat([seeds[keep & (owner == rank)], borrowed])
