"""The static hot cache: bottom-layer aggregates of the hot vertices."""

from __future__ import annotations

import torch
from torch import Tensor

from pyg_orch.kernels import aggregate as kernels

AGGREGATIONS = ("mean", "sum", "max", "gcn")


class HotCache:
    r"""Full-neighbourhood aggregates of raw features for the hot vertices.

    For a hot vertex :math:`v` the cache holds :math:`a_v`, the parameter-free
    bottom-layer aggregation over *all* in-neighbours of :math:`v` (``mean``,
    ``sum``, ``max``, or ``gcn``: the sum normalised as
    :func:`~torch_geometric.nn.conv.gcn_conv.gcn_norm` would on the whole
    graph, self loop included). The device applies the current weights to
    :math:`a_v`, so nothing in it ever goes stale. Each kind is computed once,
    on first request, by a parallel Numba kernel.

    The cache is owned by :class:`~pyg_orch.OrchNeighborLoader`; the model
    wrapper only asks it which kind to serve.

    Args:
        colptr: CSC column pointers of the graph, ``int64[num_nodes + 1]``.
        row: CSC row (source) indices.
        x: raw node features, ``float32[num_nodes, F]``.
        hot_nodes: global ids of the hot vertices.

    Example:
        >>> colptr, row = torch.tensor([0, 2, 3, 3]), torch.tensor([1, 2, 0])
        >>> x = torch.tensor([[1.0], [2.0], [4.0]])
        >>> cache = HotCache(colptr, row, x, hot_nodes=torch.tensor([0]))
        >>> cache.values("mean").tolist()
        [[3.0]]
    """

    def __init__(self, colptr: Tensor, row: Tensor, x: Tensor, hot_nodes: Tensor):
        num_nodes = colptr.numel() - 1
        self.colptr, self.row, self.x = colptr, row, x.contiguous()
        self.hot_nodes = hot_nodes.to(torch.long)
        self.slot = torch.full((num_nodes,), -1, dtype=torch.long)
        self.slot[self.hot_nodes] = torch.arange(self.hot_nodes.numel())
        self.mask = self.slot >= 0
        self.kind = "mean"
        self._values: dict[str, Tensor] = {}

    @property
    def num_hot(self) -> int:
        """Number of hot vertices."""
        return self.hot_nodes.numel()

    def values(self, kind: str | None = None) -> Tensor:
        """The aggregates of every hot vertex, in ``hot_nodes`` order.

        Args:
            kind: one of :data:`AGGREGATIONS`; the cache's ``kind`` if ``None``.

        Returns:
            ``float32[num_hot, F]``, computed on first request.
        """
        kind = self.kind if kind is None else kind
        if kind not in AGGREGATIONS:
            raise ValueError(f"kind must be one of {AGGREGATIONS}, got {kind!r}")
        if kind not in self._values:
            self._values[kind] = self._aggregate(kind)
        return self._values[kind]

    def _aggregate(self, kind: str) -> Tensor:
        out = torch.empty(self.num_hot, self.x.size(1), dtype=self.x.dtype)
        gcn_norm = (
            kernels.gcn_inverse_sqrt_degree(self.colptr.numpy(), self.row.numpy())
            if kind == "gcn"
            else None
        )
        kernels.aggregate(
            self.colptr.numpy(),
            self.row.numpy(),
            self.x.numpy(),
            self.hot_nodes.numpy(),
            kind,
            out.numpy(),
            gcn_norm,
        )
        return out

    def lookup(self, frontier: Tensor) -> tuple[Tensor, Tensor]:
        """Finds the hot vertices of a frontier and gathers their aggregates.

        Args:
            frontier: global ids of a batch's frontier nodes.

        Returns:
            ``(hot_index, hot_agg)``: local positions of the hot frontier
            nodes, and their aggregates of the cache's ``kind``.
        """
        slots = self.slot[frontier]
        hot_index = (slots >= 0).nonzero().view(-1)
        values = self.values()
        # Page-locked when a GPU will take the batch: the copy can then be async.
        hot_agg = torch.empty(
            hot_index.numel(),
            values.size(1),
            dtype=values.dtype,
            pin_memory=torch.cuda.is_available(),
        )
        kernels.gather_rows(values.numpy(), slots[hot_index].numpy(), hot_agg.numpy())
        return hot_index, hot_agg
