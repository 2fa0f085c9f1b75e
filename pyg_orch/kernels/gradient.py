"""Numba kernels: the gradient of :func:`~pyg_orch.kernels.aggregate.aggregate`.

The forward aggregation reads, for each destination row ``i``, the source rows
``col[rowptr[i]:rowptr[i + 1]]``. Its gradient with respect to a source row
``u`` sums the (scaled) gradient rows of the destinations that read ``u``.
The kernels compute it from the transposed edges, one source row per loop
iteration: every gradient row is written once, whole (no zero-filled buffer,
no scatter with read-modify-writes of random rows), while the destinations'
gradient rows it reads are few and stay in cache. Each sum runs in
destination order, so results never depend on the thread count.

Numeric choices match the forward's: sums in the gradient's dtype (float32
for bfloat16, rounded once per row as it is stored); ``"mean"``
divides a row's gradient by its degree; ``"max"`` splits a row's gradient
evenly among the sources at its maximum, as the backward of PyG's edge-wise
``scatter(..., reduce="max")`` (``torch.scatter_reduce`` with ``"amax"``)
does (relu outputs make such ties common). Like torch's, it also counts the
zero that scatter starts from when the maximum is zero: a share of the
gradient that reaches no source; and a NaN maximum, which no source equals,
gives every source NaN, as torch's ``0 * (grad / 0)`` does.
"""

from __future__ import annotations

import numpy as np
from numba import njit, parallel_chunksize, prange, types
from numba.extending import overload

from pyg_orch.kernels.aggregate import AGGREGATIONS
from pyg_orch.kernels.half_width import HALF_WIDTH_BITS, as_float, narrow_row
from pyg_orch.kernels.threading_layer import parallel_kernel

__all__ = ["aggregate_gradient"]

_SUM, _MEAN, _MAX = (AGGREGATIONS[k] for k in ("sum", "mean", "max"))
# Source rows per scheduling chunk: small enough that hubs balance.
_CHUNK = 64


@njit(cache=True, nogil=True)
def _transpose(rowptr: np.ndarray, col: np.ndarray, num_src: int):
    # Counting sort of the edges by source: for source u, the destinations
    # reading it are rows[srcptr[u]:srcptr[u + 1]], in increasing order.
    srcptr = np.zeros(num_src + 1, np.int64)
    for e in range(col.shape[0]):
        srcptr[col[e] + 1] += 1
    for u in range(num_src):
        srcptr[u + 1] += srcptr[u]
    fill = srcptr[:-1].copy()
    rows = np.empty(col.shape[0], np.int64)
    for i in range(rowptr.shape[0] - 1):
        for e in range(rowptr[i], rowptr[i + 1]):
            u = col[e]
            rows[fill[u]] = i
            fill[u] += 1
    return srcptr, rows


@parallel_kernel(cache=True, nogil=True)
def _scale_kernel(rowptr, col, grad_out, x, out, scaled) -> None:
    # The share of a max's gradient every source at the maximum receives;
    # torch also counts the zero its scatter starts from.
    for i in prange(grad_out.shape[0]):
        lo, hi = rowptr[i], rowptr[i + 1]
        g, s, o = grad_out[i], scaled[i], out[i]
        for f in range(g.shape[0]):
            s[f] = 1.0 if as_float(o[f]) == 0.0 else 0.0
        for e in range(lo, hi):
            source = x[col[e]]
            for f in range(g.shape[0]):
                if as_float(source[f]) == as_float(o[f]):
                    s[f] += 1.0
        for f in range(g.shape[0]):
            s[f] = as_float(g[f]) / s[f]


def _reciprocal(row, count):  # pragma: no cover - replaced by the overload
    """1 / count in the dtype of ``row``'s elements."""
    return 1.0 / count


@overload(_reciprocal, inline="always")
def _reciprocal_overload(row, count):
    # float32 rows multiply by a float32 share: a float64 one would make the
    # loop over the row run in float64, at half the vector width.
    if row.dtype == types.float64:
        return lambda row, count: 1.0 / count
    return lambda row, count: np.float32(1.0) / np.float32(count)


@njit(cache=True, nogil=True, inline="always")
def _gradient_row(
    srcptr, rows, rowptr, scaled, code, x, out, grad_root, active, u, o
) -> None:
    # Source u's gradient into the float row o. For a mean, scaled is the
    # output's gradient, divided by each row's degree here as it is read
    # (half the bytes of a scaled float32 copy, for bfloat16 gradients).
    if u < grad_root.shape[0]:
        root = grad_root[u]
        for f in range(o.shape[0]):
            o[f] = as_float(root[f])
    else:
        o[:] = 0.0
    for p in range(srcptr[u], srcptr[u + 1]):
        i = rows[p]
        s = scaled[i]
        if code == _MAX:
            xu, top = x[u], out[i]
            for f in range(o.shape[0]):
                if as_float(xu[f]) == as_float(top[f]):
                    o[f] += as_float(s[f])
                else:
                    # torch adds 0 * share: NaN where the share is not finite
                    # (a NaN maximum, which no source equals).
                    o[f] += 0.0 * as_float(s[f])
        elif code == _MEAN:
            share = _reciprocal(o, max(rowptr[i + 1] - rowptr[i], 1))
            for f in range(o.shape[0]):
                o[f] += as_float(s[f]) * share
        else:
            for f in range(o.shape[0]):
                o[f] += as_float(s[f])
    if active.shape[0] > 0:
        # A relu's backward: no gradient where its output is not positive.
        # A select, not a conditional store, which LLVM did not vectorise
        # over half-width rows.
        a = active[u]
        for f in range(o.shape[0]):
            o[f] = np.float32(0.0) if as_float(a[f]) <= 0.0 else o[f]


@parallel_kernel(cache=True, nogil=True)
def _gather_kernel(
    srcptr, rows, rowptr, scaled, code, x, out, grad_root, active, grad_x
) -> None:
    for u in prange(grad_x.shape[0]):
        _gradient_row(
            srcptr, rows, rowptr, scaled, code, x, out, grad_root, active, u,
            grad_x[u],
        )  # fmt: skip


@parallel_kernel(cache=True, nogil=True)
def _gather_narrow_kernel(
    srcptr, rows, rowptr, scaled, code, x, out, grad_root, active, grad_x
) -> None:
    # bfloat16 grad_x: each row summed in a float32 row of its chunk's, then
    # rounded once as it is stored.
    num_src = grad_x.shape[0]
    for chunk in prange((num_src + _CHUNK - 1) // _CHUNK):
        summed = np.empty(grad_x.shape[1], np.float32)
        for u in range(chunk * _CHUNK, min(chunk * _CHUNK + _CHUNK, num_src)):
            _gradient_row(
                srcptr, rows, rowptr, scaled, code, x, out, grad_root, active, u,
                summed,
            )  # fmt: skip
            narrow_row(summed, grad_x[u])


def aggregate_gradient(
    rowptr: np.ndarray,
    col: np.ndarray,
    grad_out: np.ndarray,
    kind: str,
    grad_x: np.ndarray,
    grad_root: np.ndarray | None = None,
    x: np.ndarray | None = None,
    out: np.ndarray | None = None,
    relu_output: np.ndarray | None = None,
) -> np.ndarray:
    """Writes the gradient of a ``kind`` aggregation with respect to its sources.

    ``grad_x[u]`` becomes ``grad_root[u]`` (zero past its rows, or everywhere
    when ``None``) plus, for each edge ``e`` of each destination ``i`` with
    ``col[e] == u``, ``grad_out[i]``: divided by the row's degree for
    ``"mean"``, shared among the tied maxima for ``"max"``.

    Args:
        rowptr: int64 ``[M + 1]`` row pointers of the destinations.
        col: int32 or int64 ``[E]`` source row of each edge, in ``[0, S)``.
        grad_out: ``[M, F]`` C-contiguous float32 or float64 gradient of the
            aggregation's output, or bfloat16 bits
            (:data:`~pyg_orch.kernels.half_width.HALF_WIDTH_BITS`).
        kind: ``"sum"``, ``"mean"`` or ``"max"``.
        grad_x: ``[S, F]`` C-contiguous buffer of ``grad_out``'s dtype, every
            row of which is written (it need not be zeroed); for bfloat16
            bits, each row is summed in float32 and rounded once. The other
            arrays may be bfloat16 bits too.
        grad_root: ``[R, F]`` (``R <= S``) gradient of the sources' first
            ``R`` rows from elsewhere (the destinations' own rows), added.
        x: for ``"max"``: the ``[S, F]`` sources the forward aggregated.
        out: for ``"max"``: the ``[M, F]`` forward output.
        relu_output: ``[S, F]`` output of a relu that made the sources: the
            gradient is then taken through it too (zero where it is not
            positive), i.e. with respect to the relu's input.

    Returns:
        ``grad_x``.

    Raises:
        ValueError: for another ``kind``, or ``x`` / ``out`` missing for
            ``"max"``.

    Example:
        >>> rowptr = np.array([0, 2, 3])  # row 0 <- sources 0, 1; row 1 <- 1
        >>> col = np.array([0, 1, 1])
        >>> grad = np.ones((2, 1), np.float32)
        >>> aggregate_gradient(rowptr, col, grad, "mean",
        ...                    np.empty((3, 1), np.float32))[:, 0]
        array([0.5, 1.5, 0. ], dtype=float32)
    """
    if kind not in ("sum", "mean", "max"):
        raise ValueError(f"kind must be 'sum', 'mean' or 'max', got {kind!r}")
    if kind == "max" and (x is None or out is None):
        raise ValueError("kind='max' needs the forward's sources x and output out")
    empty = np.empty((0, grad_out.shape[1]), grad_out.dtype)
    # Never read when absent; grad_out's dtype keeps one specialisation.
    x, out = (empty, empty) if x is None or out is None else (x, out)
    grad_root = empty if grad_root is None else grad_root
    active = empty if relu_output is None else relu_output
    code = AGGREGATIONS[kind]
    scaled = grad_out
    if kind == "max":
        # Half-width gradients are shared out in float32.
        half = grad_out.dtype in HALF_WIDTH_BITS.values()
        scaled = np.empty(grad_out.shape, np.float32 if half else grad_out.dtype)
        _scale_kernel(rowptr, col, grad_out, x, out, scaled)
    srcptr, rows = _transpose(rowptr, col, grad_x.shape[0])
    narrow = grad_x.dtype == HALF_WIDTH_BITS["bfloat16"]
    kernel = _gather_narrow_kernel if narrow else _gather_kernel
    # The narrowing kernel's iterations are chunks of _CHUNK rows already.
    with parallel_chunksize(1 if narrow else _CHUNK):
        kernel(srcptr, rows, rowptr, scaled, code, x, out, grad_root, active, grad_x)
    return grad_x
