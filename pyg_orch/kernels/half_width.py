"""Numba helpers: half-width floats as the kernels read and write them.

NumPy has no bfloat16, so half-width tensors reach the kernels as their bits
(:data:`HALF_WIDTH_BITS`): bfloat16 as ``uint16``, float16 as ``int16``. The
kernels widen each value to float32 as they read it (:func:`as_float`), sum in
float32, and round a finished float32 row to bfloat16 bits once as they
store it (:func:`narrow_row`), exactly as torch's ``.to(torch.bfloat16)``
rounds (to nearest, ties to even).

Example:
    >>> import torch
    >>> row = np.array([1.0, 1 / 3, -2.5e-3, 3e38], np.float32)
    >>> bits = np.empty(4, np.uint16)
    >>> narrow_row(row, bits)
    >>> narrowed = torch.from_numpy(bits).view(torch.bfloat16)
    >>> narrowed.tolist()
    [1.0, 0.333984375, -0.00250244140625, 3.00405527047391e+38]
    >>> torch.equal(narrowed, torch.from_numpy(row).to(torch.bfloat16))
    True
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic, overload

__all__ = ["HALF_WIDTH_BITS", "as_float", "narrow_row"]

#: How half-width features reach the kernels, which NumPy has no dtype for:
#: as their bits, bfloat16 as ``uint16`` and float16 as ``int16`` (e.g.
#: ``x.view(torch.uint16).numpy()``). The kernels widen each value to
#: float32 as they read it and accumulate in float32.
HALF_WIDTH_BITS = {"bfloat16": np.dtype(np.uint16), "float16": np.dtype(np.int16)}

# bfloat16's quiet NaN: rounding would turn some NaN payloads into infinity.
_BF16_NAN = np.uint16(0x7FC0)


@intrinsic
def _widen_bits(typingctx, bits):
    """float32 of half-width bits: bfloat16 for ``uint16``, float16 for ``int16``.

    bfloat16 is the upper half of a float32, so its bits shifted up are that
    float32; float16 is extended by LLVM's ``fpext`` (one instruction with
    F16C). Both vectorise.
    """
    if bits not in (types.uint16, types.int16):
        return None

    def codegen(context, builder, signature, args):
        bits_value = args[0]
        if signature.args[0] == types.int16:
            half = builder.bitcast(bits_value, ir.HalfType())
            return builder.fpext(half, ir.FloatType())
        wide = builder.shl(
            builder.zext(bits_value, ir.IntType(32)), ir.Constant(ir.IntType(32), 16)
        )
        return builder.bitcast(wide, ir.FloatType())

    return types.float32(bits), codegen


def as_float(v):  # pragma: no cover - replaced by the overload in kernels
    """The float a feature element stands for: itself, or its widened bits."""
    return v


@overload(as_float, inline="always")
def _as_float_overload(v):
    if isinstance(v, types.Float):
        return lambda v: v
    return lambda v: _widen_bits(v)


@njit(cache=True, nogil=True, inline="always")
def narrow_row(row: np.ndarray, bits: np.ndarray) -> None:
    """Rounds a float32 row to bfloat16, written as its bits into ``bits``.

    Round to nearest, ties to even, on the float32's bits: add half of the
    dropped part (one less when the kept part is even), keep the upper half.
    """
    wide = row.view(np.uint32)
    for f in range(row.shape[0]):
        word = wide[f]
        rounded = (word + np.uint32(0x7FFF) + ((word >> 16) & np.uint32(1))) >> 16
        bits[f] = _BF16_NAN if row[f] != row[f] else np.uint16(rounded)
