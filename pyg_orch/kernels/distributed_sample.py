"""Numba kernels for PyG's distributed sampler, with pyg-lib's semantics.

PyG's ``DistNeighborSampler`` samples one hop at a time: each machine samples
the seeds it owns (:func:`dist_sample_one_hop`), the outputs of the machines
are put back in seed order (:func:`merge_outputs`), and after the last hop the
sampled nodes, duplicates included, are numbered into a subgraph
(:func:`relabel`). These are pyg-lib's ``dist_neighbor_sample``,
``merge_sampler_outputs``, ``relabel_neighborhood`` and
``hetero_relabel_neighborhood`` on NumPy arrays; the torch ops that call them
are registered by ``pyg_orch.distributed.engine``.

All arrays are int64. Like :mod:`pyg_orch.kernels.sample`, the kernels are
serial and release the GIL.
"""

import numpy as np
from numba import njit, types
from numba.typed import Dict

from pyg_orch.kernels.sample import _temporal_end, num_picks, pick_neighbors

# What limits a temporal hop: nothing, the neighbours' times or the edges'.
NO_TIME, NODE_TIME, EDGE_TIME = 0, 1, 2

_KEY = types.UniTuple(types.int64, 3)


@njit(cache=True, nogil=True)
def _sample_one_hop(
    colptr, row, seed, fanout, seed_time, node_time, edge_time, time_kind,
    replace, last, random_seed,
):  # fmt: skip
    state = np.empty(1, dtype=np.uint64)
    state[0] = np.uint64(random_seed)
    num_seeds = seed.shape[0]
    cumsum = np.empty(num_seeds + 1, dtype=np.int64)
    cumsum[0] = num_seeds
    total = 0
    for i in range(num_seeds):
        degree = colptr[seed[i] + 1] - colptr[seed[i]]
        total += degree if fanout < 0 or not replace else fanout
    node = np.empty(num_seeds + total, dtype=np.int64)
    batch = np.empty(num_seeds + total, dtype=np.int64)
    edge = np.empty(total, dtype=np.int64)
    node[:num_seeds] = seed
    batch[:num_seeds] = np.arange(num_seeds)
    picks = np.empty(16, dtype=np.int64)
    filled = 0
    for i in range(num_seeds):
        start, end = colptr[seed[i]], colptr[seed[i] + 1]
        if time_kind != NO_TIME and end > start and fanout != 0:
            end = _temporal_end(row, start, end, seed_time[i], node_time, edge_time)
            if last and fanout >= 0:
                start = max(start, end - fanout)
            if end - start > 1:
                if time_kind == EDGE_TIME:
                    first, final = edge_time[start], edge_time[end - 1]
                else:
                    first, final = node_time[row[start]], node_time[row[end - 1]]
                if first > final:
                    raise ValueError("Found invalid non-sorted temporal neighborhood")
        degree = end - start
        count = num_picks(fanout, degree, replace)
        if count > picks.shape[0]:
            picks = np.empty(max(count, 2 * picks.shape[0]), dtype=np.int64)
        # A fanout of -1 takes every neighbour once, with replacement too.
        pick_neighbors(degree, count, replace and fanout >= 0, state, picks)
        for j in range(count):
            position = start + picks[j]
            node[num_seeds + filled] = row[position]
            batch[num_seeds + filled] = i
            edge[filled] = position
            filled += 1
        cumsum[i + 1] = num_seeds + filled
    size = num_seeds + filled
    return node[:size], batch[:size], edge[:filled], cumsum


def dist_sample_one_hop(
    colptr: np.ndarray,
    row: np.ndarray,
    seed: np.ndarray,
    fanout: int,
    *,
    replace: bool = False,
    seed_time: np.ndarray | None = None,
    node_time: np.ndarray | None = None,
    edge_time: np.ndarray | None = None,
    last: bool = False,
    random_seed: int = 0,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Samples one hop of in-neighbours of each seed, as pyg-lib's distributed op.

    Nothing is deduplicated: a node sampled twice is listed twice.

    Args:
        colptr: CSC column pointers, int64 ``[N + 1]``.
        row: CSC sources, int64 ``[E]``.
        seed: int64 ``[S]`` nodes to expand, duplicates allowed.
        fanout: neighbours per seed; ``-1`` takes all of them.
        replace: sample with replacement (``fanout`` picks from any
            neighbourhood that is not empty).
        seed_time: int64 ``[S]``, each seed's time, for temporal sampling.
        node_time: int64 ``[N]`` node times: only neighbours no later than the
            seed's time are sampled (each neighbourhood sorted by them).
        edge_time: int64 ``[E]`` edge times, the same by edge (instead of
            ``node_time``).
        last: with a time, take the latest ``fanout`` neighbours instead of
            uniform ones (pyg-lib's ``temporal_strategy="last"``).
        random_seed: seed of the kernel's random stream.

    Returns:
        ``(node, batch, edge, cumsum)``: the seeds followed by the sampled
        neighbours, seed by seed; for each, the index of the seed that sampled
        it; for each sampled neighbour, its position in ``row`` (pyg-lib's
        edge id); and ``[S + 1]`` ends: seed ``i``'s neighbours are
        ``node[cumsum[i]:cumsum[i + 1]]`` (``cumsum[0] == S``).

    Example:
        >>> colptr = np.array([0, 2, 4, 6])  # a triangle, both directions
        >>> row = np.array([1, 2, 0, 2, 0, 1])
        >>> node, batch, edge, cumsum = dist_sample_one_hop(
        ...     colptr, row, np.array([2, 0]), -1)
        >>> node.tolist(), edge.tolist(), cumsum.tolist()
        ([2, 0, 0, 1, 1, 2], [4, 5, 0, 1], [2, 4, 6])
    """
    empty = np.empty(0, dtype=np.int64)
    if node_time is not None and edge_time is not None:
        raise ValueError("Only one of node-level or edge-level sampling is supported")
    time_kind = NO_TIME
    if node_time is not None:
        time_kind = NODE_TIME
        if seed_time is None:
            seed_time = _int64(node_time)[_int64(seed)]
    elif edge_time is not None:
        time_kind = EDGE_TIME
        if seed_time is None:
            raise ValueError("Seed time needs to be specified")
    return _sample_one_hop(
        _int64(colptr), _int64(row), _int64(seed), int(fanout),
        empty if seed_time is None else _int64(seed_time),
        empty if node_time is None else _int64(node_time),
        empty if edge_time is None else _int64(edge_time),
        time_kind, bool(replace), bool(last), int(random_seed),
    )  # fmt: skip


@njit(cache=True, nogil=True)
def _relabel(
    seed, seed_type, sampled, sampled_start, batch, counts, count_start,
    count_len, neighbour_type, source_type, disjoint,
):  # fmt: skip
    num_types = sampled_start.shape[0] - 1
    num_edge_types, num_layers = count_start.shape
    local = Dict.empty(key_type=_KEY, value_type=types.int64)
    size = np.zeros(num_types, dtype=np.int64)
    for i in range(seed.shape[0]):
        key = (seed_type[i], i if disjoint else 0, seed[i])
        if key not in local:
            local[key] = size[seed_type[i]]
            size[seed_type[i]] += 1
    # Each edge type's edges, layer after layer: where they go in the output.
    edge_start = np.zeros(num_edge_types + 1, dtype=np.int64)
    for k in range(num_edge_types):
        total = 0
        for layer in range(num_layers):
            start = count_start[k, layer]
            total += counts[start : start + count_len[k, layer]].sum()
        edge_start[k + 1] = edge_start[k] + total
    written = edge_start[:-1].copy()
    rows = np.empty(edge_start[-1], dtype=np.int64)
    cols = np.empty(edge_start[-1], dtype=np.int64)
    # The nodes of each type read so far, the sources of each edge type in
    # this layer, and where each type's sources of the next layer start.
    consumed = np.zeros(num_types, dtype=np.int64)
    source_begin = np.zeros(num_edge_types, dtype=np.int64)
    source_end = count_len[:, 0].copy()
    source_offset = np.zeros(num_types, dtype=np.int64)
    for layer in range(num_layers):
        for k in range(num_edge_types):
            kind = neighbour_type[k]
            for i in range(source_begin[k], source_end[k]):
                at = count_start[k, layer] + i - source_begin[k]
                end = consumed[kind] + counts[at]
                for j in range(consumed[kind], end):
                    at = sampled_start[kind] + j
                    key = (kind, batch[at] if disjoint else 0, sampled[at])
                    if key not in local:
                        local[key] = size[kind]
                        size[kind] += 1
                    rows[written[k]] = i
                    cols[written[k]] = local[key]
                    written[k] += 1
                consumed[kind] = end
        if layer < num_layers - 1:
            for k in range(num_edge_types):
                kind = source_type[k]
                source_offset[kind] = max(source_offset[kind], source_end[k])
            for k in range(num_edge_types):
                source_begin[k] = source_offset[source_type[k]]
                source_end[k] = source_begin[k] + count_len[k, layer + 1]
    return rows, cols, edge_start


def relabel(
    seeds: list[np.ndarray],
    sampled: list[np.ndarray],
    counts: list[list[np.ndarray]],
    neighbour_type: np.ndarray,
    source_type: np.ndarray,
    batch: list[np.ndarray] | None = None,
) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Numbers sampled nodes into a subgraph's edges, as pyg-lib's relabel ops.

    Node types and edge types are numbered. Every node gets its index within
    its type: the seeds first, then each new node in the order sampled; with
    ``batch``, a node is new once per subgraph. Layer by layer, each edge type
    in turn reads its sources' sampled neighbours from its neighbour type's
    list, in order: source ``i`` of the edge type in the layer sampled
    ``counts[k][layer][i]`` of them. The sources of an edge type are numbered
    on from where the sources of its source type ended in the layer before.

    Args:
        seeds: per node type, int64 seeds (the first sources).
        sampled: per node type, int64 sampled neighbours, duplicates included.
        counts: per edge type, per layer, int64 neighbours per source.
        neighbour_type: int64 ``[K]``, the node type each edge type samples.
        source_type: int64 ``[K]``, the node type each edge type expands.
        batch: per node type, the subgraph of each sampled neighbour; the
            seeds root subgraphs ``0, 1, ...`` in order of ``seeds``.

    Returns:
        ``(rows, cols)``: per edge type, each edge's source index and the
        index of its neighbour within their types (the caller swaps them for
        CSC).

    Example:
        >>> rows, cols = relabel(
        ...     [np.array([2, 3])], [np.array([1, 3, 2, 4])],
        ...     [[np.array([2, 2])]], np.array([0]), np.array([0]))
        >>> rows[0].tolist(), cols[0].tolist()
        ([0, 0, 1, 1], [2, 1, 0, 3])
    """
    seed_type = np.concatenate(
        [np.full(len(s), t, dtype=np.int64) for t, s in enumerate(seeds)]
    )
    sampled_start = np.cumsum([0] + [len(s) for s in sampled], dtype=np.int64)
    flat = [_int64(c) for layers in counts for c in layers]
    lengths = np.array([len(c) for c in flat], dtype=np.int64)
    num_layers = len(counts[0]) if counts else 0
    shape = (len(counts), num_layers)
    starts = np.cumsum(np.concatenate([[0], lengths[:-1]])).astype(np.int64)
    rows, cols, edge_start = _relabel(
        _concat(seeds), seed_type, _concat(sampled), sampled_start,
        _concat(batch) if batch is not None else np.empty(0, dtype=np.int64),
        _concat(flat), starts.reshape(shape), lengths.reshape(shape),
        _int64(neighbour_type), _int64(source_type), batch is not None,
    )  # fmt: skip
    bounds = list(zip(edge_start[:-1], edge_start[1:], strict=True))
    return [rows[a:b] for a, b in bounds], [cols[a:b] for a, b in bounds]


@njit(cache=True, nogil=True)
def _merge(node, node_start, edge, edge_start, cumsum, cumsum_start, partition,
           order, batch, disjoint):  # fmt: skip
    num_seeds = partition.shape[0]
    per_seed = np.empty(num_seeds, dtype=np.int64)
    for j in range(num_seeds):
        at = cumsum_start[partition[j]] + order[j]
        per_seed[j] = cumsum[at + 1] - cumsum[at]
    total = per_seed.sum()
    out_node = np.empty(total, dtype=np.int64)
    out_edge = np.empty(total, dtype=np.int64)
    out_batch = np.empty(total if disjoint else 0, dtype=np.int64)
    filled = 0
    for j in range(num_seeds):
        p = partition[j]
        first = cumsum[cumsum_start[p]]
        begin = cumsum[cumsum_start[p] + order[j]]
        count = per_seed[j]
        for n in range(count):
            out_node[filled + n] = node[node_start[p] + begin + n]
            out_edge[filled + n] = edge[edge_start[p] + begin - first + n]
            if disjoint:
                out_batch[filled + n] = batch[j]
        filled += count
    return out_node, out_edge, out_batch, per_seed


def merge_outputs(
    node: list[np.ndarray],
    edge: list[np.ndarray],
    cumsum: list[np.ndarray],
    partition: np.ndarray,
    order: np.ndarray,
    batch: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None, np.ndarray]:
    """Puts the one-hop samples of several partitions back in seed order.

    As pyg-lib's ``merge_sampler_outputs``: seed ``j`` was sampled by
    partition ``partition[j]`` as its ``order[j]``-th seed; its neighbours
    (not the seeds each partition's output starts with) and their edges are
    gathered seed by seed.

    Args:
        node: per partition, the output nodes of :func:`dist_sample_one_hop`
            (seeds first); empty for a partition that sampled nothing.
        edge: per partition, the output edges.
        cumsum: per partition, the output ``cumsum`` (empty if none).
        partition: int64 ``[S]``, the partition of each seed.
        order: int64 ``[S]``, each seed's index among its partition's seeds.
        batch: int64 ``[S]``, each seed's subgraph, for disjoint sampling.

    Returns:
        ``(node, edge, batch, counts)``: the neighbours and edges in seed
        order, their subgraphs (``None`` without ``batch``), and the number
        each seed sampled.

    Example:
        >>> node, edge, _, counts = merge_outputs(
        ...     [np.array([5, 7]), np.array([4, 6, 6])],
        ...     [np.array([10]), np.array([20, 21])],
        ...     [np.array([1, 2]), np.array([1, 3])],
        ...     partition=np.array([1, 0]), order=np.array([0, 0]))
        >>> node.tolist(), edge.tolist(), counts.tolist()
        ([6, 6, 7], [20, 21, 10], [2, 1])
    """
    cumsum_start = np.cumsum([0] + [len(c) for c in cumsum], dtype=np.int64)
    node_start = np.cumsum([0] + [len(n) for n in node], dtype=np.int64)
    edge_start = np.cumsum([0] + [len(e) for e in edge], dtype=np.int64)
    disjoint = batch is not None
    out_node, out_edge, out_batch, counts = _merge(
        _concat(node), node_start, _concat(edge), edge_start, _concat(cumsum),
        cumsum_start, _int64(partition), _int64(order),
        _int64(batch) if disjoint else np.empty(0, dtype=np.int64), disjoint,
    )  # fmt: skip
    return out_node, out_edge, out_batch if disjoint else None, counts


def _int64(values) -> np.ndarray:
    return np.ascontiguousarray(values, dtype=np.int64)


def _concat(arrays) -> np.ndarray:
    if len(arrays) == 0:
        return np.empty(0, dtype=np.int64)
    return np.concatenate([_int64(a).reshape(-1) for a in arrays])
