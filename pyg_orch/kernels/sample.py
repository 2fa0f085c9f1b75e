"""Numba kernels for layered neighbour sampling over CSC graphs, as pyg-lib does.

One kernel covers what PyG's samplers do: homogeneous graphs (one node type,
one edge type) and heterogeneous ones (several, concatenated), uniform or
weighted picks, with or without replacement, disjoint subgraphs (one per
seed), and temporal sampling (only neighbours no later than the seed's time,
``uniform`` among them or the ``last`` ones).

Each hop picks the neighbours of its destinations in parallel (Numba's
``prange``), each destination from its own random stream, keyed by the call's
seed, the hop, the edge type and the destination's place: the batch does not
depend on the number of threads. The picks then join the batch serially, in
order, which numbers the new nodes as a serial sampler does. ``nogil=True``
lets pipeline threads overlap calls; in a forked child under a threading layer
that is not fork-safe the kernel runs its serial twin
(:func:`~pyg_orch.kernels.threading_layer.parallel_kernel`).
"""

import numpy as np
from numba import njit, prange, types
from numba.typed import Dict

from pyg_orch.kernels.prefetch import prefetch
from pyg_orch.kernels.random import splitmix64
from pyg_orch.kernels.threading_layer import kernel_pair, with_threads

_TO_UNIT = 1.0 / 9007199254740992.0  # 2**-53

# Destinations per parallel task: enough to amortise a task, few enough that
# a hop of a thousand destinations spreads over the threads.
_DESTINATIONS_PER_TASK = 32

# Floyd's algorithm costs ~k*k/2 comparisons, selection sampling one random
# draw per neighbour; Floyd wins while k*k stays below a few times the degree.
_FLOYD_FACTOR = 8


@njit(cache=True, nogil=True, inline="always")
def _next_random(state: np.ndarray) -> np.uint64:
    state[0] += np.uint64(1)
    return splitmix64(state[0])


@njit(cache=True, nogil=True, inline="always")
def substream(seed: np.uint64, index: int) -> np.uint64:
    """The start of ``seed``'s ``index``-th random stream.

    Streams of different indices start 64 well-mixed bits apart.
    """
    return splitmix64(seed ^ splitmix64(np.uint64(index)))


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


@njit(cache=True, nogil=True, inline="always")
def _random_unit(state: np.ndarray) -> float:
    # Uniform in the open interval (0, 1): its logarithm is finite.
    return (np.float64(_next_random(state) >> np.uint64(11)) + 0.5) * _TO_UNIT


@njit(cache=True, nogil=True)
def pick_weighted(
    weight: np.ndarray,
    count: int,
    replace: bool,
    state: np.ndarray,
    out: np.ndarray,
    keys: np.ndarray,
) -> None:
    """Writes ``count`` picks from ``range(len(weight))``, each by its weight.

    With replacement every pick is an independent draw proportional to the
    weights (``torch.multinomial(weight, count, True)``); without, the picks
    are successive draws without replacement, drawn as the ``count`` largest
    keys ``log(u) / w`` (Efraimidis and Spirakis, 2006), as pyg-lib does;
    when fewer than ``count`` weights are positive, those come first and
    the rest are drawn uniformly from the zero-weight ones.
    ``keys`` is scratch of at least ``len(weight)`` entries.
    """
    degree = weight.shape[0]
    if replace:
        total = 0.0
        for j in range(degree):
            total += weight[j]
            keys[j] = total
        for n in range(count):
            out[n] = min(
                np.searchsorted(keys[:degree], _random_unit(state) * total, "right"),
                degree - 1,
            )
        return
    positive = 0
    for j in range(degree):
        random_key = np.log(_random_unit(state))
        if weight[j] > 0:
            keys[j] = random_key / weight[j]
            positive += 1
        else:
            keys[j] = -np.inf
    order = np.argsort(keys[:degree])
    for n in range(min(count, positive)):
        out[n] = order[degree - 1 - n]
    # A weight of 0 is never drawn while others are left; past them, the
    # zero-weight neighbours (first in `order`) are drawn uniformly.
    zeros = degree - positive
    for n in range(count - positive):
        pick = n + int(_random_unit(state) * (zeros - n))
        order[n], order[pick] = order[pick], order[n]
        out[positive + n] = order[n]


@njit(cache=True, nogil=True)
def _temporal_end(
    row: np.ndarray,
    start: int,
    end: int,
    seed_time: float,
    node_time: np.ndarray,
    edge_time: np.ndarray,
) -> int:
    # The end of the neighbours no later than seed_time, which PyG sorts to
    # the front of each neighbourhood (by source or edge time): bisected, as
    # in pyg-lib.
    low, high = start, end
    while low < high:
        middle = (low + high) // 2
        if edge_time.shape[0] > 0:
            time = edge_time[middle]
        else:
            time = node_time[row[middle]]
        if time <= seed_time:
            low = middle + 1
        else:
            high = middle
    return low


@njit(cache=True, nogil=True)
def _by_type(values: np.ndarray, runs: np.ndarray, run_type: np.ndarray, num_types):
    # Concatenates the runs of values (run i: values[runs[i]:runs[i + 1]], of
    # type run_type[i]) type by type, keeping their order within each type.
    out = np.empty_like(values)
    filled = 0
    for kind in range(num_types):
        for i in range(run_type.shape[0]):
            if run_type[i] == kind:
                size = runs[i + 1] - runs[i]
                out[filled : filled + size] = values[runs[i] : runs[i + 1]]
                filled += size
    return out


@njit(cache=True, nogil=True, inline="always")
def _edge_type(graph, k: int):
    # Edge type k's CSC graph: views into the concatenated arrays.
    colptr, row, colptr_start, row_start, _, dst_type, node_offset = graph
    num_columns = node_offset[dst_type[k] + 1] - node_offset[dst_type[k]]
    column = colptr[colptr_start[k] : colptr_start[k] + num_columns + 1]
    return column, row[row_start[k] : row_start[k + 1]]


@njit(cache=True, nogil=True, inline="always")
def _part(values: np.ndarray, present: np.ndarray, index: int, bounds: np.ndarray):
    # Type index's share of values concatenated by bounds, or empty.
    if not present[index]:
        return values[:0]
    return values[bounds[index] : bounds[index + 1]]


# How many destinations ahead the merge asks for the node map's entries of
# their picks.
_SOURCES_AHEAD = 2

# How many destinations ahead their column pointers, and then the start of
# their neighbourhoods, are prefetched.
_COLUMNS_AHEAD = 16
_ROWS_AHEAD = 8


@njit(cache=True, nogil=True, inline="always")
def _prefetch_ahead(column, row, dst_node, i, end):
    # The column pointers of a destination a little ahead, and the first
    # neighbours of one nearer, whose column pointers came in by now.
    if i + _COLUMNS_AHEAD < end:
        prefetch(column, dst_node[i + _COLUMNS_AHEAD])
    if i + _ROWS_AHEAD < end:
        start = column[dst_node[i + _ROWS_AHEAD]]
        if start < row.shape[0]:
            prefetch(row, start)


@njit(cache=True, nogil=True, inline="always")
def _prefetch_sources(node_map, base, source, first, picked, i):
    # The node map's entries of the picks of destination i + _SOURCES_AHEAD
    # (and, at the start, of those before it).
    for ahead in range(0 if i == 0 else i + _SOURCES_AHEAD, i + _SOURCES_AHEAD + 1):
        if ahead < picked.shape[0]:
            for j in range(first[ahead], first[ahead] + picked[ahead]):
                prefetch(node_map, base + source[j])


@njit(cache=True, nogil=True)
def _of_type(node_runs, begin: int, end: int, kind: int):
    # The nodes of runs [begin, end) of type kind, in order: their places in
    # the node list, and their index within their type's nodes.
    runs, run_type, run_local = node_runs
    total = 0
    for r in range(begin, end):
        if run_type[r] == kind:
            total += runs[r + 1] - runs[r]
    at = np.empty(total, dtype=np.int64)
    local = np.empty(total, dtype=np.int64)
    filled = 0
    for r in range(begin, end):
        if run_type[r] == kind:
            for place in range(runs[r], runs[r + 1]):
                at[filled] = place
                local[filled] = run_local[r] + place - runs[r]
                filled += 1
    return at, local


@njit(cache=True, nogil=True)
def _pick_range(
    task, dst_node, dst_batch, csc, fanout, sampling, temporal_inputs, stream, out
):
    # Picks the neighbours of destinations [begin, end) of one task, each
    # from its own stream: their positions in row, and the neighbours there,
    # from first[i] on; their number in count[i] (0 for a skipped one).
    column, row, edge_weight = csc
    replace, last, skip = sampling
    seed_time, node_time, edge_time = temporal_inputs
    first, count, position, source = out
    temporal = node_time.shape[0] > 0 or edge_time.shape[0] > 0
    state = np.empty(1, dtype=np.uint64)
    picks = np.empty(16, dtype=np.int64)
    keys = np.empty(16, dtype=np.float64)
    begin = task * _DESTINATIONS_PER_TASK
    end = min(begin + _DESTINATIONS_PER_TASK, dst_node.shape[0])
    for i in range(begin, end):
        _prefetch_ahead(column, row, dst_node, i, end)
        count[i] = 0
        if skip[i]:
            continue
        start, stop = column[dst_node[i]], column[dst_node[i] + 1]
        if temporal:
            stop = _temporal_end(
                row, start, stop, seed_time[dst_batch[i]], node_time, edge_time
            )
            if last and fanout >= 0:
                start = max(start, stop - fanout)
        degree = stop - start
        picked = num_picks(fanout, degree, replace)
        if picked == 0:
            continue
        state[0] = substream(stream, i)
        picks = _grow(picks, picked)
        if edge_weight.shape[0] > 0 and (replace or picked < degree):
            keys = _grow(keys, degree)
            weight = edge_weight[start:stop]
            pick_weighted(weight, picked, replace, state, picks, keys)
        else:
            pick_neighbors(degree, picked, replace, state, picks)
        for j in range(picked):
            position[first[i] + j] = start + picks[j]
            source[first[i] + j] = row[start + picks[j]]
        count[i] = picked


@njit(cache=True, nogil=True)
def _induced_edges(graph, node, runs, run_type, run_local, node_map, num_hops):
    # Every edge among the sampled nodes, edge type by edge type, destination
    # by destination in the order they were sampled, as torch-sparse returns
    # them; node_map still maps the sampled nodes. All counted in hop 0.
    src_type, dst_type, node_offset = graph[4:]
    edges_per_hop = np.zeros((src_type.shape[0], max(num_hops, 1)), dtype=np.int64)
    local_row, local_col, edge = [0][:0], [0][:0], [0][:0]
    for k in range(src_type.shape[0]):
        column, row = _edge_type(graph, k)
        src_base = node_offset[src_type[k]]
        for r in range(runs.shape[0] - 1):
            if run_type[r] != dst_type[k]:
                continue
            for dst in range(runs[r], runs[r + 1]):
                for position in range(column[node[dst]], column[node[dst] + 1]):
                    local = node_map[src_base + row[position]]
                    if local >= 0:
                        local_row.append(local)
                        local_col.append(run_local[r] + dst - runs[r])
                        edge.append(position)
        edges_per_hop[k, 0] = len(edge) - edges_per_hop[:k, 0].sum()
    return (
        np.array(local_row, dtype=np.int64),
        np.array(local_col, dtype=np.int64),
        np.array(edge, dtype=np.int64),
        edges_per_hop,
    )


def _pick_tasks(dst_node, dst_batch, csc, fanout, sampling, times, stream, out):
    # One hop's picks for one edge type, task by task in parallel.
    size = _DESTINATIONS_PER_TASK
    for task in prange((dst_node.shape[0] + size - 1) // size):
        _pick_range(
            task, dst_node, dst_batch, csc, fanout, sampling, times, stream,
            out,
        )  # fmt: skip


_pick_parallel, _pick_serial = kernel_pair(cache=True, nogil=True)(_pick_tasks)


@njit(cache=True, nogil=True)
def _sample_layers(
    graph,
    seeds,
    fanouts: np.ndarray,
    times,
    weights,
    options,
    random_seed: int,
    node_map: np.ndarray,
    skip_last_hop: np.ndarray,
    threads: bool,
):
    # sample_layers, with threads or not.
    row_start, src_type, dst_type, node_offset = graph[3:]
    seed_type, seed = seeds
    seed_time, node_times, node_timed, edge_times, edge_timed = times
    edge_weights, weighted = weights
    replace, disjoint, last, induced = options
    num_types = node_offset.shape[0] - 1
    num_edge_types, num_hops = fanouts.shape
    skip_none = skip_last_hop[:0]
    # Disjoint subgraphs key a node by (subgraph, node): a hash map.
    subgraph_map = Dict.empty(key_type=types.int64, value_type=types.int64)
    stride = node_offset[num_types]

    # Nodes come in runs of one type (the seeds of a type, then what one edge
    # type adds in one hop): run i starts at node runs[i], at index
    # run_local[i] of its type's list.
    max_runs = num_types + num_hops * num_edge_types + 1
    runs = np.zeros(max_runs + 1, dtype=np.int64)
    run_type = np.zeros(max_runs, dtype=np.int64)
    run_local = np.zeros(max_runs, dtype=np.int64)
    num_runs = 0
    type_size = np.zeros(num_types, dtype=np.int64)
    capacity = max(2 * seed.shape[0], 16)
    node = np.empty(capacity, dtype=np.int64)
    node_batch = np.empty(capacity if disjoint else 0, dtype=np.int64)
    num_nodes = seed.shape[0]
    for i in range(num_nodes):
        kind = seed_type[i]
        if i == 0 or kind != seed_type[i - 1]:
            runs[num_runs], run_type[num_runs] = i, kind
            run_local[num_runs] = type_size[kind]
            num_runs += 1
        key = node_offset[kind] + seed[i]
        node[i] = seed[i]
        if disjoint:
            node_batch[i] = i
            subgraph_map[i * stride + key] = type_size[kind]
        elif node_map[key] < 0:
            node_map[key] = type_size[kind]
        type_size[kind] += 1
    nodes_per_hop = np.zeros((num_types, num_hops + 1), dtype=np.int64)
    nodes_per_hop[:, 0] = type_size

    edges_per_hop = np.zeros((num_edge_types, num_hops), dtype=np.int64)
    local_row = np.empty(16, dtype=np.int64)
    local_col = np.empty(16, dtype=np.int64)
    edge = np.empty(16, dtype=np.int64)
    num_edges = 0

    hop_runs = 0
    for hop in range(num_hops):
        hop_runs_end = num_runs
        runs[num_runs] = num_nodes  # closes the hop's last run
        skip = skip_last_hop if hop == num_hops - 1 else skip_none
        for k in range(num_edge_types):
            fanout = fanouts[k, hop]
            src_kind, dst_kind = src_type[k], dst_type[k]
            runs[num_runs], run_type[num_runs] = num_nodes, src_kind
            run_local[num_runs] = type_size[src_kind]
            num_runs += 1
            if fanout == 0:
                continue
            column, row = _edge_type(graph, k)
            node_time = _part(node_times, node_timed, src_kind, node_offset)
            edge_time = _part(edge_times, edge_timed, k, row_start)
            edge_weight = _part(edge_weights, weighted, k, row_start)
            # The destinations this edge type expands, in order, and an upper
            # bound of each one's picks (time only narrows a neighbourhood):
            # every output grows once per edge type.
            dst_at, dst_local = _of_type(
                (runs, run_type, run_local), hop_runs, hop_runs_end, dst_kind
            )
            dst_node = node[dst_at]
            dst_batch = node_batch[dst_at] if disjoint else dst_at[:0]
            skip_dst = np.zeros(dst_at.shape[0], dtype=np.bool_)
            first = np.zeros(dst_at.shape[0] + 1, dtype=np.int64)
            for i in range(dst_at.shape[0]):
                if skip.shape[0] > 0:
                    skip_dst[i] = skip[node_offset[dst_kind] + dst_node[i]]
                degree = column[dst_node[i] + 1] - column[dst_node[i]]
                first[i + 1] = first[i] + num_picks(fanout, degree, replace)
            bound = first[dst_at.shape[0]]
            node = _grow(node, num_nodes + bound)
            if disjoint:
                node_batch = _grow(node_batch, num_nodes + bound)
            local_row = _grow(local_row, num_edges + bound)
            local_col = _grow(local_col, num_edges + bound)
            edge = _grow(edge, num_edges + bound)

            # The picks, in parallel: each destination from its own stream.
            picked = np.empty(dst_at.shape[0], dtype=np.int64)
            position = np.empty(bound, dtype=np.int64)
            source = np.empty(bound, dtype=np.int64)
            stream = substream(np.uint64(random_seed), hop * num_edge_types + k)
            pick = (
                dst_node,
                dst_batch,
                (column, row, edge_weight),
                fanout,
                (replace, last, skip_dst),
                (seed_time, node_time, edge_time),
                stream,
                (first, picked, position, source),
            )
            if threads:
                _pick_parallel(*pick)
            else:
                _pick_serial(*pick)

            # The picks join the batch in order: new nodes numbered as found.
            base = node_offset[src_kind]
            for i in range(dst_at.shape[0]):
                if not disjoint:
                    _prefetch_sources(node_map, base, source, first, picked, i)
                batch = dst_batch[i] if disjoint else 0
                for j in range(first[i], first[i] + picked[i]):
                    key = base + source[j]
                    if disjoint:
                        local = subgraph_map.get(batch * stride + key, -1)
                    else:
                        local = node_map[key]
                    if local < 0:
                        local = type_size[src_kind]
                        type_size[src_kind] += 1
                        if disjoint:
                            subgraph_map[batch * stride + key] = local
                            node_batch[num_nodes] = batch
                        else:
                            node_map[key] = local
                        node[num_nodes] = source[j]
                        num_nodes += 1
                    local_row[num_edges] = local
                    local_col[num_edges] = dst_local[i]
                    edge[num_edges] = position[j]
                    num_edges += 1
                edges_per_hop[k, hop] += picked[i]
        for kind in range(num_types):
            found = nodes_per_hop[kind, : hop + 1].sum()
            nodes_per_hop[kind, hop + 1] = type_size[kind] - found
        hop_runs = hop_runs_end
    runs[num_runs] = num_nodes
    if induced:
        local_row, local_col, edge, edges_per_hop = _induced_edges(
            graph, node, runs[: num_runs + 1], run_type, run_local, node_map, num_hops
        )
        num_edges = local_row.shape[0]

    if not disjoint:
        for r in range(num_runs):
            base = node_offset[run_type[r]]
            for i in range(runs[r], runs[r + 1]):
                node_map[base + node[i]] = -1
    node, node_batch = node[:num_nodes], node_batch[: num_nodes if disjoint else 0]
    local_row, local_col = local_row[:num_edges], local_col[:num_edges]
    edge = edge[:num_edges]
    if num_types > 1:
        node = _by_type(node, runs, run_type[:num_runs], num_types)
        if disjoint:
            node_batch = _by_type(node_batch, runs, run_type[:num_runs], num_types)
    if num_edge_types > 1:
        # Edges come in runs of one edge type: hop by hop, edge type by type.
        num_runs = edges_per_hop.size
        edge_runs = np.zeros(num_runs + 1, dtype=np.int64)
        edge_runs[1:] = np.cumsum(edges_per_hop.T.copy().reshape(-1))
        edge_run_type = np.arange(num_runs) % num_edge_types
        local_row = _by_type(local_row, edge_runs, edge_run_type, num_edge_types)
        local_col = _by_type(local_col, edge_runs, edge_run_type, num_edge_types)
        edge = _by_type(edge, edge_runs, edge_run_type, num_edge_types)
    return node, node_batch, nodes_per_hop, local_row, local_col, edge, edges_per_hop


_sample_with_threads = with_threads(_sample_layers)


def sample_layers(
    graph: tuple,
    seeds: tuple,
    fanouts: np.ndarray,
    times: tuple,
    weights: tuple,
    options: tuple,
    random_seed: int,
    node_map: np.ndarray,
    skip_last_hop: np.ndarray,
) -> tuple:
    """Samples a layered neighbourhood of the seeds, hop by hop, as pyg-lib does.

    Node types and edge types are numbered; their CSC graphs are concatenated.
    In each hop, each edge type in turn expands the nodes of its destination
    type found in the previous hop, and the neighbours it picks join the
    list of its source type. The picks run on Numba's threads, each
    destination from its own random stream: the result does not depend on
    the number of threads.

    Args:
        graph: ``(colptr, row, colptr_start, row_start, src_type, dst_type,
            node_offset)``: the CSC graphs of all edge types concatenated
            (edge type ``k``'s column pointers start at ``colptr[colptr_start
            [k]]`` and count positions in ``row[row_start[k]:row_start[k +
            1]]``), the source (neighbour) and destination type of each, and
            where each node type's ids start in ``node_map`` (``num_types +
            1`` entries).
        seeds: ``(seed_type, seed)``: the seed nodes (hop 0), grouped by type,
            duplicates allowed; with disjoint subgraphs, seed ``i`` roots
            subgraph ``i``.
        fanouts: ``int64[num_edge_types, num_hops]``; ``-1`` takes all, ``0``
            none.
        times: ``(seed_time, node_time, node_timed, edge_time, edge_timed)``
            for temporal sampling: each subgraph's time, node times
            concatenated by ``node_offset`` and edge times aligned with
            ``row`` (or empty), and which node and edge types have times.
        weights: ``(edge_weight, weighted)``: weights aligned with ``row`` (or
            empty), and which edge types are sampled by them.
        options: ``(replace, disjoint, last, induced)``: sample with
            replacement, one subgraph per seed, temporal strategy ``"last"``,
            and return every edge among the sampled nodes instead of the
            sampled ones (as torch-sparse does for ``subgraph_type="induced"``;
            not with disjoint subgraphs).
        random_seed: seed of the kernel's random streams (one per hop, edge
            type and destination).
        node_map: ``int32[num_nodes of all types]`` scratch filled with ``-1``,
            restored before returning (unused with disjoint subgraphs).
        skip_last_hop: ``bool[num_nodes of all types]`` marking nodes the last
            hop does not expand (hot nodes), or empty.

    Returns:
        ``(node, batch, nodes_per_hop, local_row, local_col, edge,
        edges_per_hop)``: the sampled nodes grouped by type (seeds first,
        then hop by hop), the subgraph of each (with disjoint subgraphs),
        ``int64[num_types, num_hops + 1]`` new nodes per type and hop; the
        sampled edges grouped by edge type, as source and destination index
        within their type's nodes and position in the edge type's ``row``,
        and ``int64[num_edge_types, num_hops]`` edges per type and hop.
    """
    return _sample_with_threads(
        graph, seeds, fanouts, times, weights, options, random_seed, node_map,
        skip_last_hop,
    )  # fmt: skip


def sample_homogeneous(
    colptr: np.ndarray,
    row: np.ndarray,
    seed: np.ndarray,
    fanouts: np.ndarray,
    replace: bool,
    random_seed: int,
    node_map: np.ndarray,
    skip_last_hop: np.ndarray,
) -> tuple[np.ndarray, ...]:
    """:func:`sample_layers` on one node type and one edge type, uniformly.

    Returns:
        ``(node, local_row, local_col, edge, nodes_per_hop, edges_per_hop)``
        as :func:`sample_layers` does, with one type each.

    Example:
        >>> colptr = np.array([0, 2, 3, 3])  # 0 <- {1, 2}, 1 <- {2}
        >>> row = np.array([1, 2, 2])
        >>> node_map = np.full(3, -1, dtype=np.int32)
        >>> node, *_ = sample_homogeneous(
        ...     colptr, row, np.array([0]), np.array([-1, -1]), False, 0,
        ...     node_map, np.zeros(0, dtype=np.bool_))
        >>> node.tolist()
        [0, 1, 2]
    """
    zero = np.zeros(1, dtype=np.int64)
    no = np.zeros(1, dtype=np.bool_)
    graph = (
        colptr,
        row,
        zero,
        np.array([0, row.shape[0]], dtype=np.int64),
        zero,
        zero,
        np.array([0, colptr.shape[0] - 1], dtype=np.int64),
    )
    no_time = np.zeros(0, dtype=np.int64)
    node, _, nodes_per_hop, local_row, local_col, edge, edges_per_hop = sample_layers(
        graph,
        (np.zeros(seed.shape[0], dtype=np.int64), seed),
        fanouts.reshape(1, -1),
        (no_time, no_time, no, no_time, no),
        (np.zeros(0, dtype=np.float64), no),
        (replace, False, False, False),
        random_seed,
        node_map,
        skip_last_hop,
    )
    return node, local_row, local_col, edge, nodes_per_hop[0], edges_per_hop[0]
