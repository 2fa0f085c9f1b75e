"""The whole graph as the aggregation kernel reads it, for layer-wise inference.

Evaluation runs on the same graph every epoch, and building the CSC form
sorts every edge: :class:`WholeGraph` builds it once per graph and derives
what each aggregation needs from it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from torch import Tensor
from torch_geometric.data import Data
from torch_geometric.nn.conv.gcn_conv import gcn_norm
from torch_geometric.sampler.utils import to_csc

from pyg_orch.kernels.aggregate import aggregate, gcn_inverse_sqrt_degree


class WholeGraph:
    """The arguments of :func:`~pyg_orch.kernels.aggregate.aggregate` for a graph.

    Kept while ``edge_index`` (and ``edge_weight``) stay the same tensors,
    unchanged in place. ``data`` may also be one relation of a
    ``HeteroData`` (its ``EdgeStorage``).

    Example:
        >>> import torch
        >>> data = Data(edge_index=torch.tensor([[1, 2], [0, 0]]), num_nodes=3)
        >>> colptr, row, kind, norm, weight = WholeGraph().arguments(
        ...     data, "mean", None, np.dtype(np.float32))
        >>> colptr.tolist(), row.tolist(), kind, norm, weight
        ([0, 2, 2, 2], [1, 2], 'mean', None, None)
    """

    def __init__(self) -> None:
        self._key: tuple[Any, ...] | None = None
        self._csc: tuple[Tensor, Tensor, Tensor | None] | None = None
        self._by_kind: dict[str, tuple] = {}
        # Aggregates of inputs that stay the same tensors (raw features).
        self._aggregates: dict[str, tuple[_Same, Tensor]] = {}

    def arguments(
        self, data: Data, kind: str, edge_weight: Tensor | None, dtype: np.dtype
    ) -> tuple:
        """``(colptr, row, kernel kind, gcn_norm, edge weights)`` for ``kind``.

        Args:
            data: the whole graph.
            kind: the layer's aggregation (``"sum"``, ``"mean"``, ``"max"``,
                ``"gcn"``).
            edge_weight: the graph's ``edge_weight`` the layer reads, or
                ``None``; with ``"gcn"``, PyG's ``gcn_norm`` weighs each edge
                (its self loops included) and the kernel sums.
            dtype: the features' NumPy dtype (GCN's degrees are in it).
        """
        key = (_Same(data.edge_index), data.size(), dtype, _Same(edge_weight))
        if self._key != key:
            self._key, self._csc, self._by_kind = key, None, {}
            self._aggregates = {}
        if kind not in self._by_kind:
            self._by_kind[kind] = self._arguments(data, kind, edge_weight, dtype)
        return self._by_kind[kind]

    def aggregate(
        self,
        data: Data,
        x: Tensor,
        kind: str,
        edge_weight: Tensor | None,
        num_dst: int,
        keep: bool = False,
    ) -> Tensor:
        """The ``kind`` aggregate of ``x``'s rows over each destination's whole neighbourhood.

        Args:
            data: the whole graph (or one relation of it).
            x: the source rows.
            kind: the layer's aggregation, as for :meth:`arguments`.
            edge_weight: the edge weights the layer reads, or ``None``.
            num_dst: number of destination rows.
            keep: ``x`` is the graph's own features: the aggregate is kept
                for later calls (:meth:`kept_aggregate`).

        Example:
            >>> import torch
            >>> data = Data(edge_index=torch.tensor([[1, 2], [0, 0]]), num_nodes=3)
            >>> x = torch.tensor([[1.0], [2.0], [4.0]])
            >>> WholeGraph().aggregate(data, x, "mean", None, 3).tolist()
            [[3.0], [0.0], [0.0]]
        """  # noqa: E501 - the summary line
        source = x.detach().cpu().contiguous()
        if edge_weight is not None:
            edge_weight = edge_weight.detach().cpu()
        colptr, row, kernel_kind, norm, weight = self.arguments(
            data, kind, edge_weight, source.numpy().dtype
        )

        def compute() -> Tensor:
            agg = torch.empty(num_dst, source.size(1), dtype=source.dtype)
            aggregate(
                colptr.numpy(), row.numpy(), source.numpy(),
                torch.arange(num_dst).numpy(), kernel_kind, agg.numpy(), norm,
                edge_weight=weight,
            )  # fmt: skip
            return agg

        return self.kept_aggregate(x, kernel_kind, compute) if keep else compute()

    def kept_aggregate(
        self, x: Tensor, kind: str, compute: Callable[[], Tensor]
    ) -> Tensor:
        """``compute()``, the ``kind`` aggregate of ``x``, kept between calls.

        Kept while ``x`` stays the same tensor, unchanged in place, and the
        graph's arguments are kept (:meth:`arguments`, called before): the
        aggregate of a graph's raw features does not depend on the weights,
        so later whole-graph inferences reuse it.

        Example:
            >>> import torch
            >>> graph, x = WholeGraph(), torch.ones(2, 1)
            >>> first = graph.kept_aggregate(x, "sum", lambda: x * 2)
            >>> graph.kept_aggregate(x, "sum", lambda: x * 3) is first
            True
            >>> graph.kept_aggregate(x.mul_(2), "sum", lambda: x * 3).tolist()
            [[6.0], [6.0]]
        """
        kept = self._aggregates.get(kind)
        if kept is None or kept[0] != _Same(x):
            kept = self._aggregates[kind] = (_Same(x), compute())
        return kept[1]

    def _arguments(self, data, kind, edge_weight, dtype) -> tuple:
        if kind == "gcn" and edge_weight is not None:
            edge_index, weight = gcn_norm(
                data.edge_index, edge_weight, data.num_nodes, dtype=edge_weight.dtype
            )
            normalised = Data(edge_index=edge_index, num_nodes=data.num_nodes)
            colptr, row, perm = to_csc(normalised, device="cpu")
            return colptr, row, "sum", None, _in_csc_order(weight, perm)
        colptr, row, perm = self._plain_csc(data)
        if edge_weight is not None:
            return colptr, row, kind, None, _in_csc_order(edge_weight, perm)
        norm = (
            gcn_inverse_sqrt_degree(colptr.numpy(), row.numpy(), dtype)
            if kind == "gcn"
            else None
        )
        return colptr, row, kind, norm, None

    def _plain_csc(self, data: Data) -> tuple[Tensor, Tensor, Tensor | None]:
        # One CSC form serves every kind of the model's layers.
        if self._csc is None:
            self._csc = to_csc(data, device="cpu")
        return self._csc


class _Same:
    # Equal to another _Same of the very tensor, unchanged since: holding the
    # tensor keeps its memory from being reused by another graph's edges,
    # which a stored data_ptr() would not tell apart.
    def __init__(self, tensor: Tensor | None) -> None:
        self.tensor = tensor
        self.version = None if tensor is None else tensor._version

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, _Same)
            and other.tensor is self.tensor
            and other.version == self.version
        )

    __hash__ = None  # type: ignore[assignment]


def _in_csc_order(weight: Tensor, perm: Tensor | None) -> np.ndarray:
    return (weight if perm is None else weight[perm]).detach().numpy()
