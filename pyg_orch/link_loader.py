"""``OrchLinkNeighborLoader``: PyG's ``LinkNeighborLoader`` on the Numba sampler."""

from __future__ import annotations

import inspect
from typing import Any

from torch_geometric.loader import LinkNeighborLoader

from pyg_orch.sampling import OrchNeighborSampler

# LinkNeighborLoader's parameters, to read arguments given by position.
_PARAMETERS = inspect.signature(LinkNeighborLoader.__init__)


class OrchLinkNeighborLoader(LinkNeighborLoader):
    r"""A drop-in :class:`~torch_geometric.loader.LinkNeighborLoader`.

    It takes every argument of
    :class:`~torch_geometric.loader.LinkNeighborLoader`, samples with
    :class:`~pyg_orch.OrchNeighborSampler` (no ``pyg-lib`` or
    ``torch-sparse`` needed) and yields the same mini-batches: homogeneous or
    heterogeneous graphs, ``edge_label`` and ``edge_label_time``, binary and
    triplet negative sampling (``neg_sampling``), temporal and weighted
    sampling, disjoint subgraphs.

    Args:
        data: the graph, a :class:`~torch_geometric.data.Data` or
            :class:`~torch_geometric.data.HeteroData` object.
        num_neighbors: neighbours to sample per node, one entry per hop (a
            dict of them per edge type on a heterogeneous graph).
        *args: the other arguments of
            :class:`~torch_geometric.loader.LinkNeighborLoader`, by position.
        **kwargs: the other arguments of
            :class:`~torch_geometric.loader.LinkNeighborLoader` and of
            :class:`torch.utils.data.DataLoader`, by name.

    Example:
        >>> import torch
        >>> from torch_geometric.data import Data
        >>> edge_index = torch.tensor([[0, 1, 2, 3], [1, 2, 3, 0]])
        >>> data = Data(edge_index=edge_index, num_nodes=4)
        >>> loader = OrchLinkNeighborLoader(data, num_neighbors=[2],
        ...                                 batch_size=2, neg_sampling="binary")
        >>> batch = next(iter(loader))
        >>> batch.edge_label_index.size(1), batch.edge_label.tolist()
        (4, [1.0, 1.0, 0.0, 0.0])
    """

    def __init__(self, data: Any, num_neighbors: Any, *args: Any, **kwargs: Any):
        arguments = _PARAMETERS.bind(self, data, num_neighbors, *args, **kwargs)
        arguments = {**arguments.arguments, **arguments.arguments.get("kwargs", {})}
        if arguments.get("neighbor_sampler") is None:
            kwargs["neighbor_sampler"] = OrchNeighborSampler.for_loader(
                data, num_neighbors, arguments
            )
        super().__init__(data, num_neighbors, *args, **kwargs)
