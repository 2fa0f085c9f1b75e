"""Neighbour aggregation of a mini-batch layer, with its gradient.

:func:`aggregate_neighbours` is what ``OrchModel`` computes in place of a
PyG conv's ``propagate`` for the convs it knows (see
:func:`pyg_orch.nn.convs.fused_kind`): on the CPU, the Numba kernels of
:mod:`pyg_orch.kernels.aggregate` (forward, over the destinations' rows) and
:mod:`pyg_orch.kernels.gradient` (backward, every gradient row written once);
on other devices, torch's own sparse and scatter operations.

It also returns the destinations' own rows ``x[:num_dst]``, whose gradient its
backward adds into the sources' gradient as it writes it, where PyG's slice
would allocate a second zero-filled gradient of all source rows, and autograd
add the two.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor
from torch_geometric.utils import scatter

from pyg_orch.kernels.aggregate import aggregate
from pyg_orch.kernels.gradient import aggregate_gradient

__all__ = ["HALF_WIDTHS", "aggregate_neighbours", "kernel_array", "sum_dtype"]

#: Feature dtypes stored in half width, whose bits the kernels read.
HALF_WIDTHS = (torch.bfloat16, torch.float16)
_BITS = {torch.bfloat16: torch.uint16, torch.float16: torch.int16}


def sum_dtype(dtype: torch.dtype) -> torch.dtype:
    """What the kernels aggregate features of ``dtype`` in: float32 for half widths.

    Example:
        >>> sum_dtype(torch.bfloat16), sum_dtype(torch.float64)
        (torch.float32, torch.float64)
    """
    return torch.float32 if dtype in HALF_WIDTHS else dtype


def kernel_array(tensor: Tensor) -> np.ndarray:
    """``tensor`` as the Numba kernels read it: a NumPy view, no copy.

    NumPy has no bfloat16, so half-width features are viewed as their bits
    (:data:`~pyg_orch.kernels.half_width.HALF_WIDTH_BITS`), which the kernels
    widen to float32.

    Example:
        >>> kernel_array(torch.ones(2, dtype=torch.bfloat16))
        array([16256, 16256], dtype=uint16)
    """
    bits = _BITS.get(tensor.dtype)
    return (tensor if bits is None else tensor.view(bits)).numpy()


class _Aggregate(torch.autograd.Function):
    # forward(x, rowptr, col, kind, num_dst, hot_index, hot_value, relu, dtype)
    #   -> (aggregation [num_dst, F], x[:num_dst]) in dtype, of relu(x) if relu

    @staticmethod
    def forward(ctx, x, rowptr, col, kind, num_dst, hot_index, hot_value, relu, dtype):
        # The previous layer's relu, here so that its gradient is applied as
        # the sources' gradient rows are written (no pass of its own). The
        # kernel applies it as it reads the rows, except for max, whose
        # backward compares the relu'd values.
        in_kernel = relu and kind != "max"
        x = torch.relu(x) if relu and not in_kernel else x.contiguous()
        out = x.new_empty(num_dst, x.size(1), dtype=dtype)
        aggregate(
            rowptr.numpy(), col.numpy(), kernel_array(x.detach()),
            np.arange(num_dst), kind, kernel_array(out), relu=in_kernel,
        )  # fmt: skip
        if hot_index is not None:
            # Hot rows have no edges here: their value is given.
            out[hot_index] = hot_value.to(out.dtype)
        ctx.kind, ctx.num_src, ctx.relu = kind, x.size(0), relu
        ctx.x_dtype = x.dtype
        # An output left unused (the root rows, where another node type's
        # are the root) gets no zero-filled gradient.
        ctx.set_materialize_grads(False)
        # Unrectified x masks the relu's gradient as well: both are <= 0 at once.
        ctx.save_for_backward(rowptr, col, x if relu or kind == "max" else None, out)
        root = x[:num_dst]
        return out, (torch.relu(root) if in_kernel else root).to(dtype)

    @staticmethod
    def backward(ctx, grad_out, grad_root):
        if not ctx.needs_input_grad[0]:
            return (None,) * 9
        rowptr, col, x, out = ctx.saved_tensors
        if grad_out is None:
            grad_out = torch.zeros_like(out)
        # Every row is written: no zero fill.
        grad_x = grad_out.new_empty(ctx.num_src, grad_out.size(1), dtype=ctx.x_dtype)
        root = None if grad_root is None else kernel_array(grad_root.contiguous())
        x = None if x is None else kernel_array(x.detach())
        maximum = ctx.kind == "max"
        aggregate_gradient(
            rowptr.numpy(), col.numpy(), kernel_array(grad_out.contiguous()),
            ctx.kind, kernel_array(grad_x), root,
            x if maximum else None,
            kernel_array(out.detach()) if maximum else None,
            x if ctx.relu else None,
        )  # fmt: skip
        return grad_x, None, None, None, None, None, None, None, None


def aggregate_neighbours(
    x: Tensor,
    rowptr: Tensor,
    col: Tensor,
    kind: str,
    hot_index: Tensor | None = None,
    hot_value: Tensor | None = None,
    relu: bool = False,
) -> tuple[Tensor, Tensor]:
    """The ``kind`` aggregation of each destination's sources, and its own rows.

    Destination ``i`` (one of the first ``num_dst = rowptr.numel() - 1`` rows
    of ``x``) aggregates ``x[col[rowptr[i]:rowptr[i + 1]]]`` as PyG's
    ``scatter`` does: ``"sum"``, ``"mean"``, or ``"max"``; a row without
    sources gets zeros. Differentiable with respect to ``x``.

    Args:
        x: ``[S, F]`` source rows, float32 or float64; the destinations are
            its first ``num_dst`` rows. Half-width rows (bfloat16, float16)
            are aggregated in float32, and their own rows returned in it;
            except that on the CPU, bfloat16 rows that require grad, or any
            float32 sums under a bfloat16 ``torch.autocast``, are returned
            in bfloat16 (each row summed in float32, rounded once), with
            gradients in ``x``'s dtype, so a bfloat16 step casts no
            activation.
        rowptr: int64 ``[num_dst + 1]`` pointers into ``col``.
        col: int64 ``[E]`` source row of each edge, grouped by destination.
        kind: ``"sum"``, ``"mean"`` or ``"max"``.
        hot_index: rows whose aggregation is given (they must have no edges).
        hot_value: their ``[H, F]`` aggregations, constants for autograd.
        relu: aggregate ``relu(x)`` instead (the previous layer's activation,
            applied and differentiated here).

    Returns:
        ``(aggregation [num_dst, F], x[:num_dst])``, of ``relu(x)`` if
        ``relu``.

    Example:
        >>> x = torch.tensor([[1.0], [2.0], [4.0]], requires_grad=True)
        >>> rowptr, col = torch.tensor([0, 2, 3]), torch.tensor([1, 2, 0])
        >>> agg, root = aggregate_neighbours(x, rowptr, col, "mean")
        >>> agg[:, 0].tolist(), root.shape
        ([3.0, 1.0], torch.Size([2, 1]))
        >>> agg.sum().backward()
        >>> x.grad[:, 0].tolist()
        [1.0, 0.5, 0.5]
    """
    if x.device.type != "cpu":
        if x.dtype in HALF_WIDTHS:  # torch's sparse product, in float32
            x = x.float()
        return _torch_aggregate(x, rowptr, col, kind, hot_index, hot_value, relu)
    if x.dtype == torch.float16 and x.requires_grad:
        x = x.float()  # the kernels write float16 gradients in no other way
    return _Aggregate.apply(
        x, rowptr, col, kind, rowptr.numel() - 1, hot_index, hot_value, relu,
        _output_dtype(x),
    )  # fmt: skip


def _output_dtype(x: Tensor) -> torch.dtype:
    # bfloat16 activations, or features for a bfloat16 step, stay bfloat16:
    # the next products read them as they are, and their gradients come back
    # in it. Otherwise the sums' own dtype.
    dtype = sum_dtype(x.dtype)
    if dtype != torch.float32:
        return dtype
    autocast_bf16 = (
        torch.is_autocast_enabled("cpu")
        and torch.get_autocast_dtype("cpu") == torch.bfloat16
    )
    activation = x.dtype == torch.bfloat16 and x.requires_grad
    return torch.bfloat16 if autocast_bf16 or activation else dtype


def _torch_aggregate(x, rowptr, col, kind, hot_index, hot_value, relu=False):
    # Off the CPU: torch's CSR product for sum and mean, PyG's scatter for
    # max (torch.sparse.mm has no max reduction there).
    x = torch.relu(x) if relu else x
    num_dst = rowptr.numel() - 1
    if kind == "max":
        dst = torch.repeat_interleave(
            torch.arange(num_dst, device=x.device), rowptr.diff()
        )
        out = scatter(x[col], dst, dim=0, dim_size=num_dst, reduce="max")
    else:
        ones = x.new_ones(col.numel())
        adjacency = torch.sparse_csr_tensor(
            rowptr, col, ones, (num_dst, x.size(0)), check_invariants=False
        )
        out = torch.sparse.mm(adjacency, x)
        if kind == "mean":
            out = out / rowptr.diff().clamp(min=1).unsqueeze(1).to(out.dtype)
    if hot_index is not None:
        out = out.index_copy(0, hot_index, hot_value.to(out.dtype))
    return out, x[:num_dst]
