"""Each node's row among the hot ones, without a tensor as long as the graph.

A cache with the whole graph at hand keeps a dense ``slot`` tensor (one
entry per node, -1 for a cold one): one read per lookup. A machine of a
partitioned graph holds only its part, yet its hot vertices are ids of the
whole graph; :class:`HotSlots` finds their rows by binary search in the
sorted hot ids instead, memory ``num_hot``, not ``num_nodes``.

Example:
    >>> slots = HotSlots(torch.tensor([2, 7]), num_nodes=10)
    >>> slots[torch.tensor([7, 3, 2])].tolist()
    [1, -1, 0]
"""

from __future__ import annotations

import torch
from torch import Tensor


class HotSlots:
    """Rows of the hot nodes among ``hot_nodes`` (sorted ids), -1 for the others.

    Indexed as the dense ``slot`` tensor it stands in for.

    Args:
        hot_nodes: the hot ids, sorted increasing.
        num_nodes: the number of ids (nodes of the graph, or of the type).

    Example:
        >>> slots = HotSlots(torch.tensor([1, 4]), num_nodes=6)
        >>> slots.is_hot(torch.tensor([4, 5])).tolist(), slots.numel()
        ([True, False], 6)
    """

    def __init__(self, hot_nodes: Tensor, num_nodes: int):
        hot_nodes = hot_nodes.to(torch.long)
        if hot_nodes.numel() > 1 and not bool((hot_nodes.diff() > 0).all()):
            raise ValueError("hot_nodes must be sorted increasing, without repeats")
        self.hot_nodes, self.num_nodes = hot_nodes, num_nodes

    def __getitem__(self, ids: Tensor) -> Tensor:
        ids = torch.as_tensor(ids, dtype=torch.long)
        if self.hot_nodes.numel() == 0:
            return torch.full_like(ids, -1)
        rows = torch.searchsorted(self.hot_nodes, ids)
        found = self.hot_nodes[rows.clamp(max=self.hot_nodes.numel() - 1)] == ids
        return rows.masked_fill_(~found, -1)

    def is_hot(self, ids: Tensor) -> Tensor:
        """Whether each of ``ids`` is hot."""
        return self[ids] >= 0

    def numel(self) -> int:
        """The number of ids, as the dense tensor's."""
        return self.num_nodes
