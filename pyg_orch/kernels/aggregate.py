"""Numba kernels: full-neighbourhood aggregation of raw features, row gathers.

The graph is PyG's CSC layout (``torch_geometric.sampler.utils.to_csc``, flow
source_to_target): the in-neighbours (sources) of node ``v`` are
``row[colptr[v]:colptr[v + 1]]``. Self loops and duplicate edges count as they
appear, exactly as PyG's aggregations over the graph's ``edge_index`` count
them; only ``"gcn"`` treats self loops specially, as ``gcn_norm`` does.

Numeric choices:

- Sums accumulate in the features' dtype (float32 or float64), like PyG's
  own ``scatter``/``index_add_``. A float64 accumulator for float32 features
  measured 1.35x slower here, and float32 keeps the error within
  ``~degree * 2**-24`` of the sum of absolute values (worst case; about
  ``sqrt(degree) * 2**-24`` typically), the same order as PyG's path.
- Half-width features (bfloat16, float16) arrive as their bits
  (:data:`~pyg_orch.kernels.half_width.HALF_WIDTH_BITS`) and are widened to
  float32 as they are read: half the bytes of the random row reads that
  bound these kernels, with float32 sums. The sums can be stored as
  bfloat16, each row rounded once (a bfloat16 training step's activations
  stay bfloat16, never cast).
- Every output row is owned by one loop iteration and summed in a fixed order
  (four neighbours at a time), so results never depend on the thread count.
  The order is not PyG's, so the two differ by rounding only.
- NaN passes on as in torch: a row that reads a NaN is NaN, whatever the
  edge order, also for ``"max"`` (``_max``, as ``scatter_reduce``'s
  ``"amax"``). ``"gcn"`` drops the graph's own self loops by giving them
  weight 0, so an inf in a node's own row there gives NaN.

Memory behaviour, which decides the speed: the kernels are bound by random
reads of feature rows, so they prefetch the rows a few edges ahead and the CSC
slices of the next few nodes, which keeps more cache misses in flight than the
out-of-order core finds on its own (about 1.6x here, on 2 cores).
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt
from llvmlite import ir
from numba import njit, parallel_chunksize, prange, types
from numba.core import cgutils
from numba.extending import intrinsic

from pyg_orch.kernels.half_width import HALF_WIDTH_BITS, as_float, narrow_row
from pyg_orch.kernels.threading_layer import parallel_kernel

__all__ = [
    "AGGREGATIONS",
    "aggregate",
    "gather_rows",
    "gcn_inverse_sqrt_degree",
]

#: Public kind names and the codes the kernel branches on (once per node).
AGGREGATIONS: dict[str, int] = {"sum": 0, "mean": 1, "max": 2, "gcn": 3}
_SUM, _MEAN, _MAX, _GCN = (AGGREGATIONS[k] for k in ("sum", "mean", "max", "gcn"))

# Prefetch distances, tuned on a 1M-node power-law graph with 100 features:
# rows `_ROW_AHEAD` edges ahead, `colptr` of node i + 4, `row` of node i + 2.
_ROW_AHEAD = 12
_COLPTR_AHEAD = 4
_SLICE_AHEAD = 2
# Nodes per scheduling chunk: small enough that hubs balance over threads.
_CHUNK = 64
# One prefetch per 64-byte cache line.
_LINE_BYTES = 64


@intrinsic
def _prefetch(typingctx, array, flat_index):
    """Hints the CPU to fetch ``array.flat[flat_index]`` into all cache levels.

    A hint only: never faults, has no effect on results. Numba exposes no
    prefetch, so this emits LLVM's ``llvm.prefetch`` (read, keep in cache).
    """
    sig = types.void(array, flat_index)

    def codegen(context, builder, signature, args):
        data = context.make_array(signature.args[0])(context, builder, args[0]).data
        address = builder.bitcast(builder.gep(data, [args[1]]), cgutils.voidptr_t)
        i32 = ir.IntType(32)
        prefetch = builder.module.declare_intrinsic(
            "llvm.prefetch",
            [cgutils.voidptr_t],
            ir.FunctionType(ir.VoidType(), [cgutils.voidptr_t, i32, i32, i32]),
        )
        builder.call(prefetch, [address, i32(0), i32(3), i32(1)])
        return context.get_dummy_value()

    return sig, codegen


@intrinsic
def _line_elements(typingctx, array):
    """Elements of ``array`` per cache line, a compile-time constant.

    (``array.itemsize`` is read at run time: a division per prefetched row.)
    """
    count = _LINE_BYTES * 8 // array.dtype.bitwidth

    def codegen(context, builder, signature, args):
        return context.get_constant(types.intp, count)

    return types.intp(array), codegen


@njit(cache=True, nogil=True, inline="always")
def _relu(v):
    # relu of v, a previous layer's activation applied as its rows are read,
    # so that no relu'd copy of them is ever written. NaN stays NaN, as in
    # torch.relu. (float32's zero unifies with float64 rows to float64's.)
    value = as_float(v)
    return np.float32(0.0) if value < 0 else value


@njit(cache=True, nogil=True, inline="always")
def _max(a, b):
    # torch's amax: a NaN on either side wins (Python's max keeps whichever
    # comes first when a comparison with NaN is false, so the result would
    # depend on the order of the edges).
    return a if a > b or a != a else b


@njit(cache=True, nogil=True, inline="always")
def _prefetch_row(x: np.ndarray, u: int, tail: bool) -> None:
    # One prefetch per line from the row's start; `tail` adds its last
    # element, for layouts where a misaligned row spills into one more line.
    # (A per-row alignment test instead measured 6% slower.)
    start = np.int64(u) * x.shape[1]
    for f in range(0, x.shape[1], _line_elements(x)):
        _prefetch(x, start + f)
    if tail:
        _prefetch(x, start + x.shape[1] - 1)


@njit(cache=True, nogil=True, inline="always")
def _prefetch_slices(colptr: np.ndarray, row: np.ndarray, nodes: np.ndarray, i: int):
    # The CSC lookups of a node are two dependent misses (colptr, then row)
    # before its first feature row can even be requested: start them early.
    if i + _COLPTR_AHEAD < nodes.shape[0]:
        _prefetch(colptr, nodes[i + _COLPTR_AHEAD])
    if i + _SLICE_AHEAD < nodes.shape[0]:
        _prefetch(row, colptr[nodes[i + _SLICE_AHEAD]])


@njit(cache=True, nogil=True, inline="always")
def _start_row(colptr, row, x, tail, v, o, value) -> tuple[int, int]:
    # Fills `o` with `value`, requests the first rows, returns the edge range.
    lo, hi = colptr[v], colptr[v + 1]
    for f in range(o.shape[0]):
        o[f] = value
    for e in range(lo, min(lo + _ROW_AHEAD, hi)):
        _prefetch_row(x, row[e], tail)
    return lo, hi


@njit(cache=True, nogil=True, inline="always")
def _prefetch_edges(row, x, tail, e: int, hi: int, count: int) -> None:
    # Requests the rows of edges e + _ROW_AHEAD .. + count, before hi.
    for p in range(e + _ROW_AHEAD, min(e + _ROW_AHEAD + count, hi)):
        _prefetch_row(x, row[p], tail)


@njit(cache=True, nogil=True, inline="always")
def _add_rows(o, xa, xb, xc, xd, rectify: bool) -> None:
    # o += the four rows (of their relus). The test of rectify stays outside
    # the loops: inside, it kept LLVM from vectorising the loop over
    # half-width rows (1.8x slower than float32 rows instead of faster).
    if rectify:
        for f in range(o.shape[0]):
            o[f] += (_relu(xa[f]) + _relu(xb[f])) + (_relu(xc[f]) + _relu(xd[f]))
    else:
        for f in range(o.shape[0]):
            o[f] += (as_float(xa[f]) + as_float(xb[f])) + (
                as_float(xc[f]) + as_float(xd[f])
            )


@njit(cache=True, nogil=True, inline="always")
def _add_row(o, xa, rectify: bool) -> None:
    if rectify:
        for f in range(o.shape[0]):
            o[f] += _relu(xa[f])
    else:
        for f in range(o.shape[0]):
            o[f] += as_float(xa[f])


# The per-row functions below are not inline="always": inlining them into the
# parallel loop measured 2-6% faster but doubled compile time (10 s per row
# dtype), which every fresh install and test run pays.
@njit(cache=True, nogil=True)
def _sum_row(colptr, row, x, tail, v, o, rectify) -> None:
    # Four neighbours per pass: a quarter of the read-modify-writes of `o`.
    lo, hi = _start_row(colptr, row, x, tail, v, o, np.float32(0.0))
    e = lo
    while e + 3 < hi:
        _prefetch_edges(row, x, tail, e, hi, 4)
        xa, xb, xc, xd = x[row[e]], x[row[e + 1]], x[row[e + 2]], x[row[e + 3]]
        _add_rows(o, xa, xb, xc, xd, rectify)
        e += 4
    for rest in range(e, hi):
        _add_row(o, x[row[rest]], rectify)


@njit(cache=True, nogil=True, inline="always")
def _gcn_weight(row: np.ndarray, e: int, v: int, scale: np.ndarray):
    # deg^-1/2 of the source of edge row[e] -> v; the graph's own self loops
    # are replaced by the one loop per node added in _gcn_row, so they weigh
    # nothing here.
    u = row[e]
    return np.float32(0.0) if u == v else scale[u]


@njit(cache=True, nogil=True)
def _gcn_row(colptr, row, x, tail, v, scale, o) -> None:
    # gcn_norm weighs edge u -> v by deg^-1/2[u] * deg^-1/2[v]; the common
    # factor deg^-1/2[v] is applied once at the end (7% faster, same result up
    # to rounding). A separate loop from _sum_row, as multiplying by 1 would
    # cost sum and mean 20% on cache-resident features.
    lo, hi = _start_row(colptr, row, x, tail, v, o, np.float32(0.0))
    e = lo
    while e + 3 < hi:
        _prefetch_edges(row, x, tail, e, hi, 4)
        xa, xb, xc, xd = x[row[e]], x[row[e + 1]], x[row[e + 2]], x[row[e + 3]]
        wa, wb = _gcn_weight(row, e, v, scale), _gcn_weight(row, e + 1, v, scale)
        wc, wd = _gcn_weight(row, e + 2, v, scale), _gcn_weight(row, e + 3, v, scale)
        for f in range(o.shape[0]):
            o[f] += (wa * as_float(xa[f]) + wb * as_float(xb[f])) + (
                wc * as_float(xc[f]) + wd * as_float(xd[f])
            )
        e += 4
    for rest in range(e, hi):
        xa = x[row[rest]]
        wa = _gcn_weight(row, rest, v, scale)
        for f in range(o.shape[0]):
            o[f] += wa * as_float(xa[f])
    # Plus the one self loop gcn_norm adds, then the common factor.
    w = scale[v]
    xv = x[v]
    for f in range(o.shape[0]):
        o[f] = w * (o[f] + w * as_float(xv[f]))


@njit(cache=True, nogil=True)
def _max_row(colptr, row, x, tail, v, o) -> None:
    # PyG's scatter max leaves a node without neighbours at zero.
    empty = colptr[v + 1] == colptr[v]
    start = np.float32(0.0 if empty else -np.inf)
    lo, hi = _start_row(colptr, row, x, tail, v, o, start)
    e = lo
    while e + 3 < hi:
        _prefetch_edges(row, x, tail, e, hi, 4)
        xa, xb, xc, xd = x[row[e]], x[row[e + 1]], x[row[e + 2]], x[row[e + 3]]
        for f in range(o.shape[0]):
            o[f] = _max(
                o[f],
                _max(
                    _max(as_float(xa[f]), as_float(xb[f])),
                    _max(as_float(xc[f]), as_float(xd[f])),
                ),
            )
        e += 4
    for rest in range(e, hi):
        xa = x[row[rest]]
        for f in range(o.shape[0]):
            o[f] = _max(o[f], as_float(xa[f]))


@njit(cache=True, nogil=True)
def _mean_row(colptr, row, x, tail, v, o, rectify) -> None:
    _sum_row(colptr, row, x, tail, v, o, rectify)
    # Divide, not multiply by 1/degree: PyG's mean rounds this way.
    degree = np.float32(colptr[v + 1] - colptr[v])
    if degree > 1:
        for f in range(o.shape[0]):
            o[f] /= degree


@njit(cache=True, nogil=True)
def _weighted_row(colptr, row, x, tail, v, weight, code, o) -> None:
    # Messages weight[e] * x[u] (GraphConv's with an edge_weight), summed,
    # averaged or maxed as PyG's scatter does. One loop for all three: it
    # serves hot caches and inference, built once, not the training step.
    empty = colptr[v + 1] == colptr[v]
    start = np.float32(-np.inf if code == _MAX and not empty else 0.0)
    lo, hi = _start_row(colptr, row, x, tail, v, o, start)
    for e in range(lo, hi):
        _prefetch_edges(row, x, tail, e, hi, 1)
        w, xa = weight[e], x[row[e]]
        if code == _MAX:
            for f in range(o.shape[0]):
                o[f] = _max(o[f], w * as_float(xa[f]))
        else:
            for f in range(o.shape[0]):
                o[f] += w * as_float(xa[f])
    degree = np.float32(hi - lo)
    if code == _MEAN and degree > 1:
        for f in range(o.shape[0]):
            o[f] /= degree


@njit(cache=True, nogil=True, inline="always")
def _aggregate_row(
    colptr, row, x, tail, v, code, scale, weight, weighted, rectify, o
) -> None:
    # Node v's aggregation into the float row o.
    if weighted:
        _weighted_row(colptr, row, x, tail, v, weight, code, o)
    elif code == _SUM:
        _sum_row(colptr, row, x, tail, v, o, rectify)
    elif code == _MEAN:
        _mean_row(colptr, row, x, tail, v, o, rectify)
    elif code == _MAX:
        _max_row(colptr, row, x, tail, v, o)
    else:
        _gcn_row(colptr, row, x, tail, v, scale, o)


@parallel_kernel(cache=True, nogil=True)
def _aggregate_kernel(
    colptr, row, x, tail, nodes, code, scale, weight, weighted, rectify, out
) -> None:
    for i in prange(nodes.shape[0]):
        _prefetch_slices(colptr, row, nodes, i)
        _aggregate_row(
            colptr, row, x, tail, nodes[i], code, scale, weight, weighted,
            rectify, out[i],
        )  # fmt: skip


@parallel_kernel(cache=True, nogil=True)
def _aggregate_narrow_kernel(
    colptr, row, x, tail, nodes, code, scale, weight, weighted, rectify, out
) -> None:
    # bfloat16 out: each row summed in a float32 row of its chunk's, then
    # rounded once as it is stored. Chunks of _CHUNK nodes, as the float
    # kernel's dynamic schedule hands them out.
    for chunk in prange((nodes.shape[0] + _CHUNK - 1) // _CHUNK):
        summed = np.empty(out.shape[1], np.float32)
        for i in range(chunk * _CHUNK, min(chunk * _CHUNK + _CHUNK, nodes.shape[0])):
            _prefetch_slices(colptr, row, nodes, i)
            _aggregate_row(
                colptr, row, x, tail, nodes[i], code, scale, weight, weighted,
                rectify, summed,
            )  # fmt: skip
            narrow_row(summed, out[i])


@parallel_kernel(cache=True, nogil=True)
def _gcn_scale_kernel(colptr, row, scale) -> None:
    for v in prange(scale.shape[0]):
        # gcn_norm's degree: in-edges that are not self loops, plus the one
        # self loop add_remaining_self_loops puts back, so never zero.
        degree = 1
        for e in range(colptr[v], colptr[v + 1]):
            if row[e] != v:
                degree += 1
        # Computed in float64 and rounded once to scale's dtype.
        scale[v] = 1.0 / np.sqrt(np.float64(degree))


@parallel_kernel(cache=True, nogil=True)
def _gather_kernel(x, index, out) -> None:
    width = x.shape[1]
    # No prefetching: reads and writes stream whole rows, and this already
    # runs at memory-copy speed (measured like torch.index_select).
    for i in prange(index.shape[0]):
        src = x[index[i]]
        dst = out[i]
        for f in range(width):
            dst[f] = src[f]


def gcn_inverse_sqrt_degree(
    colptr: np.ndarray, row: np.ndarray, dtype: npt.DTypeLike = np.float32
) -> np.ndarray:
    """Per-node ``deg^-1/2`` of PyG's ``gcn_norm`` on the whole graph.

    ``deg[v]`` counts the in-edges of ``v`` that are not self loops (duplicates
    included) plus one: ``add_remaining_self_loops`` drops every existing self
    loop and adds exactly one per node. Compute it once per graph and pass it
    to :func:`aggregate` as ``gcn_norm``.

    Args:
        colptr: CSC column pointers, int32 or int64 ``[N + 1]``.
        row: CSC sources, int32 or int64 ``[E]``.
        dtype: ``np.float32`` or ``np.float64``, the dtype of the features
            it will weigh.

    Returns:
        ``dtype`` ``[N]``, never zero or infinite.

    Example:
        >>> colptr = np.array([0, 2, 3, 3])  # in-edges 0->0, 1->0, 0->1
        >>> row = np.array([0, 1, 0])
        >>> gcn_inverse_sqrt_degree(colptr, row) ** -2
        array([2., 2., 1.], dtype=float32)
    """
    colptr, row = _check_csc(colptr, row)
    scale = np.empty(colptr.shape[0] - 1, _check_float(dtype, "dtype"))
    _gcn_scale_kernel(colptr, row, scale)
    return scale


def aggregate(
    colptr: np.ndarray,
    row: np.ndarray,
    x: np.ndarray,
    nodes: np.ndarray,
    kind: str,
    out: np.ndarray,
    gcn_norm: np.ndarray | None = None,
    relu: bool = False,
    edge_weight: np.ndarray | None = None,
) -> np.ndarray:
    """Aggregates the raw features of every in-neighbour of each of ``nodes``.

    ``out[i]`` is the ``kind`` aggregation over all in-edges of ``nodes[i]``
    in the whole graph, as PyG computes it from the graph's ``edge_index``:

    - ``"sum"``, ``"mean"``, ``"max"``: ``torch_geometric.utils.scatter`` of
      ``x[src]`` onto ``dst``; a node without in-edges gets zeros.
    - ``"gcn"``: ``gcn_norm`` (self loops replaced by one per node,
      ``improved=False``, unit weights) followed by a scatter-sum, i.e.
      GCNConv's propagation before its linear layer.

    Args:
        colptr: CSC column pointers, int32 or int64 ``[N + 1]``.
        row: CSC sources, int32 or int64 ``[E]``, each a row of ``x`` (not
            checked: that would cost a pass over all edges).
        x: float32 or float64 ``[S, F]`` source features, C-contiguous
            (``S`` may differ from ``N``, as on a relation between two node
            types, except for ``"gcn"``), or half-width features as their
            bits (:data:`~pyg_orch.kernels.half_width.HALF_WIDTH_BITS`),
            aggregated in float32.
        nodes: int64 or int32 ``[M]`` nodes to aggregate for, any order,
            repeats allowed.
        kind: one of :data:`~pyg_orch.kernels.aggregate.AGGREGATIONS`:
            ``"sum"``, ``"mean"``, ``"max"``, ``"gcn"``.
        out: ``[M, F]`` C-contiguous buffer of ``x``'s dtype (float32 for
            half-width bits) to write into (e.g. a pinned tensor's
            ``.numpy()``), or for float32 sums, bfloat16 bits
            (``uint16``): each row is then summed in float32 and rounded
            once as it is stored.
        gcn_norm: :func:`gcn_inverse_sqrt_degree` of the graph in ``out``'s
            dtype, for ``"gcn"``; computed on the spot (an O(E) pass) when
            ``None``.
        relu: aggregate ``relu(x)`` (``"sum"`` and ``"mean"`` only), as
            ``torch.relu`` computes it, without writing it anywhere.
        edge_weight: ``[E]`` weights in ``row``'s order (``"sum"``,
            ``"mean"`` and ``"max"`` only): each edge's message is its
            source row times its weight, as ``GraphConv`` weighs them with
            an ``edge_weight``; cast to ``out``'s dtype.

    Returns:
        ``out``.

    Raises:
        ValueError: for an unknown ``kind`` or arrays of the wrong dtype,
            shape or layout, ``nodes`` out of range, or ``relu`` with
            another ``kind``.

    Example:
        >>> colptr = np.array([0, 2, 3, 3])  # in-edges 1->0, 2->0, 0->1
        >>> row = np.array([1, 2, 0])
        >>> x = np.array([[1.0], [2.0], [4.0]], np.float32)
        >>> out = np.empty((3, 1), np.float32)
        >>> aggregate(colptr, row, x, np.array([0, 1, 2]), "mean", out)[:, 0]
        array([3., 1., 0.], dtype=float32)
    """
    if kind not in AGGREGATIONS:
        raise ValueError(f"kind must be one of {sorted(AGGREGATIONS)}, got {kind!r}")
    if relu and kind not in ("sum", "mean"):
        raise ValueError(f"relu=True: for kind 'sum' or 'mean' only, got {kind!r}")
    if edge_weight is not None and (kind == "gcn" or relu):
        raise ValueError(
            f"edge_weight: for kind 'sum', 'mean' or 'max' without relu only, "
            f"got kind={kind!r}, relu={relu}"
        )
    colptr, row = _check_csc(colptr, row)
    num_nodes = colptr.shape[0] - 1
    # A relation of a heterogeneous graph has other sources than targets;
    # GCN's symmetric normalisation needs one node set.
    _check_rows(x, num_nodes if kind == "gcn" else _num_rows(x))
    dtype = _sum_dtype(x.dtype)
    nodes = _check_index(nodes, num_nodes, "nodes")
    narrow = out.dtype == _BF16_BITS and dtype == np.float32
    _check_out(out, (nodes.shape[0], x.shape[1]), _BF16_BITS if narrow else dtype)
    if kind == "gcn":
        scale = (
            gcn_inverse_sqrt_degree(colptr, row, dtype)
            if gcn_norm is None
            else gcn_norm
        )
        if scale.dtype != dtype or scale.shape != (num_nodes,):
            raise ValueError(f"gcn_norm must be {dtype} [{num_nodes}], like out")
    else:
        # Never read; its dtype keeps one compiled specialisation per dtype.
        scale = np.empty(0, dtype)
    weight = _check_edge_weight(edge_weight, row.shape[0], dtype)
    tail = _rows_spill_a_line(x)
    # Dynamic chunks, not Numba's default of one static slice per thread:
    # hubs would unbalance that. (Set here: inside the kernel it blocks caching.)
    # The narrowing kernel's iterations are chunks of _CHUNK nodes already.
    kernel = _aggregate_narrow_kernel if narrow else _aggregate_kernel
    with parallel_chunksize(1 if narrow else _CHUNK):
        kernel(
            colptr, row, x, tail, nodes, AGGREGATIONS[kind], scale, weight,
            edge_weight is not None, relu, out,
        )  # fmt: skip
    return out


def gather_rows(x: np.ndarray, index: np.ndarray, out: np.ndarray) -> np.ndarray:
    """Copies ``x[index]`` into ``out`` in parallel: ``out[i] = x[index[i]]``.

    Args:
        x: ``[N, F]`` C-contiguous rows (float32 for features).
        index: int64 or int32 ``[M]`` rows to take, each in ``[0, N)``.
        out: ``[M, F]`` C-contiguous buffer of ``x``'s dtype (e.g. a pinned
            tensor's ``.numpy()``).

    Returns:
        ``out``.

    Raises:
        ValueError: for mismatched dtypes, shapes or layouts, or ``index`` out
            of range.

    Example:
        >>> x = np.arange(6, dtype=np.float32).reshape(3, 2)
        >>> gather_rows(x, np.array([2, 0]), np.empty((2, 2), np.float32))
        array([[4., 5.],
               [0., 1.]], dtype=float32)
    """
    _check_rows(x, _num_rows(x))
    index = _check_index(index, x.shape[0], "index")
    _check_out(out, (index.shape[0], x.shape[1]), x.dtype)
    _gather_kernel(x, index, out)
    return out


def _rows_spill_a_line(x: np.ndarray) -> bool:
    """Whether some row of ``x`` spans more cache lines than its width needs."""
    width = x.shape[1]
    address = x.ctypes.data
    if address % x.itemsize:
        return True
    # Rows start at offsets phase + u * F (in elements, modulo a line): the
    # largest of these is the worst case.
    line = _LINE_BYTES // x.itemsize
    phase = address % _LINE_BYTES // x.itemsize
    step = math.gcd(width, line)
    worst = line - step + phase % step
    return worst + width > line * -(-width // line)


_INDEX_DTYPES = (np.int32, np.int64)
_BF16_BITS = HALF_WIDTH_BITS["bfloat16"]
_FLOAT_DTYPES = (np.float32, np.float64)


def _check_csc(colptr: np.ndarray, row: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    if colptr.ndim != 1 or colptr.dtype not in _INDEX_DTYPES or len(colptr) < 1:
        raise ValueError("colptr must be int32 or int64 [N + 1]")
    if row.ndim != 1 or row.dtype not in (np.int32, np.int64):
        raise ValueError("row must be int32 or int64 [E]")
    if colptr[-1] > row.shape[0]:
        raise ValueError(f"colptr ends at {colptr[-1]} but row has {row.shape[0]}")
    # PyG's to_csc keeps an int32 edge_index's dtype in colptr; widening it
    # (N + 1 entries) keeps one compiled specialisation.
    return np.ascontiguousarray(colptr, dtype=np.int64), np.ascontiguousarray(row)


def _check_float(dtype: npt.DTypeLike, name: str) -> np.dtype:
    # The kernels are compiled for these two; PyG models run in either.
    if np.dtype(dtype) not in _FLOAT_DTYPES:
        raise ValueError(f"{name} must be float32 or float64, got {np.dtype(dtype)}")
    return np.dtype(dtype)


def _sum_dtype(dtype: np.dtype) -> np.dtype:
    # What features of `dtype` are aggregated in: their own float dtype, or
    # float32 for half-width bits.
    if dtype in HALF_WIDTH_BITS.values():
        return np.dtype(np.float32)
    if dtype not in _FLOAT_DTYPES:
        raise ValueError(
            f"x must be float32 or float64, or bfloat16 / float16 bits as "
            f"uint16 / int16 (x.view(torch.uint16).numpy()), got {dtype}"
        )
    return dtype


def _check_rows(x: np.ndarray, num_rows: int) -> None:
    if x.ndim != 2 or x.shape[0] != num_rows or not x.flags.c_contiguous:
        raise ValueError(f"x must be C-contiguous [{num_rows}, F]")


def _num_rows(x: np.ndarray) -> int:
    # Any number of rows, for checks of the layout only.
    return x.shape[0] if x.ndim == 2 else -1


def _check_edge_weight(
    edge_weight: np.ndarray | None, num_edges: int, dtype: np.dtype
) -> np.ndarray:
    # The weights in the sums' dtype; an empty array (never read) without.
    if edge_weight is None:
        return np.empty(0, dtype)
    if edge_weight.shape != (num_edges,):
        raise ValueError(
            f"edge_weight must be [{num_edges}], one weight per entry of row"
        )
    return np.ascontiguousarray(edge_weight, dtype=dtype)


def _check_index(index: np.ndarray, num_rows: int, name: str) -> np.ndarray:
    if index.ndim != 1 or index.dtype not in (np.int32, np.int64):
        raise ValueError(f"{name} must be int32 or int64 [M]")
    if index.shape[0] and (index.min() < 0 or index.max() >= num_rows):
        raise ValueError(f"{name} must lie in [0, {num_rows})")
    # One compiled specialisation; widening M indices costs next to M rows.
    return np.ascontiguousarray(index, dtype=np.int64)


def _check_out(out: np.ndarray, shape: tuple[int, int], dtype: np.dtype) -> None:
    if out.shape != shape or out.dtype != dtype or not out.flags.c_contiguous:
        raise ValueError(f"out must be C-contiguous {dtype} {list(shape)}")
