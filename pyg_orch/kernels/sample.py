"""Numba kernels for layered uniform neighbour sampling over a CSC graph.

The kernels are serial on purpose: one call samples one mini-batch, and the
parallelism comes from running several calls at once (DataLoader worker
processes, pipeline threads). ``nogil=True`` lets threads overlap, and a serial
kernel is safe to call after ``fork`` whatever Numba threading layer is active.
"""

import numpy as np
from numba import njit

from pyg_orch.kernels.random import splitmix64

_TO_UNIT = 1.0 / 9007199254740992.0  # 2**-53

# Floyd's algorithm costs ~k*k/2 comparisons, selection sampling one random
# draw per neighbour; Floyd wins while k*k stays below a few times the degree.
_FLOYD_FACTOR = 8


@njit(cache=True, nogil=True, inline="always")
def _next_random(state: np.ndarray) -> np.uint64:
    state[0] += np.uint64(1)
    return splitmix64(state[0])


@njit(cache=True, nogil=True, inline="always")
def _random_below(state: np.ndarray, bound: int) -> int:
    # 53 random bits scaled to [0, bound); the bias is below 2**-40 for any
    # degree a graph in memory can have.
    unit = np.float64(_next_random(state) >> np.uint64(11)) * _TO_UNIT
    return min(int(unit * bound), bound - 1)


@njit(cache=True, nogil=True)
def num_picks(fanout: int, degree: int, replace: bool) -> int:
    """Number of neighbours sampled for a node of ``degree`` with ``fanout``."""
    if fanout < 0:
        return degree
    if replace:
        return fanout if degree > 0 else 0
    return min(fanout, degree)


@njit(cache=True, nogil=True, inline="always")
def _hop_picks(
    colptr: np.ndarray, node: int, fanout: int, replace: bool, skip: np.ndarray
) -> int:
    if skip.shape[0] > 0 and skip[node]:
        return 0
    return num_picks(fanout, colptr[node + 1] - colptr[node], replace)


@njit(cache=True, nogil=True)
def pick_neighbors(
    degree: int, count: int, replace: bool, state: np.ndarray, out: np.ndarray
) -> None:
    """Writes ``count`` uniform picks from ``range(degree)`` into ``out[:count]``.

    Without replacement the picks are distinct; ``count == degree`` takes all.
    """
    if count == degree and not replace:
        for j in range(count):
            out[j] = j
    elif replace:
        for j in range(count):
            out[j] = _random_below(state, degree)
    elif count * count <= _FLOYD_FACTOR * degree:
        _floyd_sample(degree, count, state, out)
    else:
        _selection_sample(degree, count, state, out)


@njit(cache=True, nogil=True)
def _floyd_sample(degree: int, count: int, state: np.ndarray, out: np.ndarray):
    # Floyd (1987): a uniform k-subset in k draws.
    for n, j in enumerate(range(degree - count, degree)):
        candidate = _random_below(state, j + 1)
        for m in range(n):
            if out[m] == candidate:
                candidate = j
                break
        out[n] = candidate


@njit(cache=True, nogil=True)
def _selection_sample(degree: int, count: int, state: np.ndarray, out: np.ndarray):
    # Knuth's algorithm S: one pass, each position kept with probability
    # (still needed) / (still left).
    chosen = 0
    for j in range(degree):
        if _random_below(state, degree - j) < count - chosen:
            out[chosen] = j
            chosen += 1
            if chosen == count:
                break


@njit(cache=True, nogil=True)
def _grow(array: np.ndarray, needed: int) -> np.ndarray:
    if needed <= array.shape[0]:
        return array
    bigger = np.empty(max(needed, 2 * array.shape[0]), dtype=array.dtype)
    bigger[: array.shape[0]] = array
    return bigger


@njit(cache=True, nogil=True)
def sample_layers(
    colptr: np.ndarray,
    row: np.ndarray,
    seed: np.ndarray,
    fanouts: np.ndarray,
    replace: bool,
    random_seed: int,
    node_map: np.ndarray,
    skip_last_hop: np.ndarray,
):
    """Samples a layered neighbourhood of ``seed``, hop by hop, as PyG orders it.

    Args:
        colptr: CSC column pointers, ``int64[num_nodes + 1]``.
        row: CSC row (source) indices, ``int[num_edges]``.
        seed: global ids of the seed nodes (hop 0), duplicates allowed.
        fanouts: neighbours per node and hop; ``-1`` takes all, ``0`` none.
        replace: sample with replacement.
        random_seed: seed of the kernel's own random stream.
        node_map: ``int64[num_nodes]`` scratch filled with ``-1``; it is
            restored to ``-1`` before returning.
        skip_last_hop: ``bool[num_nodes]`` marking nodes not to expand in the
            last hop (hot nodes, whose bottom-layer input comes from a cache),
            or an empty array to expand every node.

    Returns:
        ``(node, local_row, local_col, edge, nodes_per_hop, edges_per_hop)``:
        global ids of the sampled nodes (seeds first, then hop 1, ...), each
        sampled edge as local source / local destination / CSC position, and
        the count of new nodes per hop (``len(fanouts) + 1`` entries) and of
        edges per hop (``len(fanouts)`` entries).
    """
    state = np.empty(1, dtype=np.uint64)
    state[0] = np.uint64(random_seed)
    num_hops = fanouts.shape[0]
    nodes_per_hop = np.zeros(num_hops + 1, dtype=np.int64)
    edges_per_hop = np.zeros(num_hops, dtype=np.int64)

    node = np.empty(max(2 * seed.shape[0], 16), dtype=np.int64)
    num_nodes = seed.shape[0]
    node[:num_nodes] = seed
    for i in range(num_nodes):
        if node_map[seed[i]] < 0:
            node_map[seed[i]] = i
    nodes_per_hop[0] = num_nodes

    max_fanout = 0
    for fanout in fanouts:
        max_fanout = max(max_fanout, fanout)
    picks = np.empty(max(max_fanout, 16), dtype=np.int64)
    local_row = np.empty(16, dtype=np.int64)
    local_col = np.empty(16, dtype=np.int64)
    edge = np.empty(16, dtype=np.int64)
    num_edges = 0

    hop_begin = 0
    for hop in range(num_hops):
        hop_end = num_nodes
        hop_edges = 0
        skip = skip_last_hop if hop == num_hops - 1 else skip_last_hop[:0]
        # Counted first so that every output grows once per hop.
        counts = np.empty(hop_end - hop_begin, dtype=np.int64)
        for dst in range(hop_begin, hop_end):
            counts[dst - hop_begin] = _hop_picks(
                colptr, node[dst], fanouts[hop], replace, skip
            )
            hop_edges += counts[dst - hop_begin]
        local_row = _grow(local_row, num_edges + hop_edges)
        local_col = _grow(local_col, num_edges + hop_edges)
        edge = _grow(edge, num_edges + hop_edges)
        node = _grow(node, num_nodes + hop_edges)

        for dst in range(hop_begin, hop_end):
            start = colptr[node[dst]]
            degree = colptr[node[dst] + 1] - start
            count = counts[dst - hop_begin]
            picks = _grow(picks, count)
            pick_neighbors(degree, count, replace, state, picks)
            for j in range(count):
                position = start + picks[j]
                src = row[position]
                local = node_map[src]
                if local < 0:
                    local = num_nodes
                    node_map[src] = local
                    node[num_nodes] = src
                    num_nodes += 1
                local_row[num_edges] = local
                local_col[num_edges] = dst
                edge[num_edges] = position
                num_edges += 1
        nodes_per_hop[hop + 1] = num_nodes - hop_end
        edges_per_hop[hop] = hop_edges
        hop_begin = hop_end

    for i in range(num_nodes):
        node_map[node[i]] = -1
    return (
        node[:num_nodes],
        local_row[:num_edges],
        local_col[:num_edges],
        edge[:num_edges],
        nodes_per_hop,
        edges_per_hop,
    )
