"""``OrchNeighborLoader``: PyG's ``NeighborLoader`` on the Numba sampler."""

from __future__ import annotations

from typing import Any

from torch_geometric.loader import NeighborLoader

from pyg_orch.sampling import OrchNeighborSampler


class OrchNeighborLoader(NeighborLoader):
    r"""A drop-in :class:`~torch_geometric.loader.NeighborLoader` that samples with
    :class:`~pyg_orch.OrchNeighborSampler`.

    It takes every argument of :class:`~torch_geometric.loader.NeighborLoader`
    and yields the same :class:`~torch_geometric.data.Data` mini-batches
    (``n_id``, ``e_id``, ``batch_size``, ``num_sampled_nodes``,
    ``num_sampled_edges``, ...), without needing ``pyg-lib`` or
    ``torch-sparse``.

    Args:
        data: the graph, a :class:`~torch_geometric.data.Data` object.
        num_neighbors: neighbours to sample per node, one entry per hop
            (``-1``: all of them).
        **kwargs: any other argument of
            :class:`~torch_geometric.loader.NeighborLoader` and of
            :class:`torch.utils.data.DataLoader` (``input_nodes``,
            ``batch_size``, ``shuffle``, ``replace``, ``num_workers``, ...).

    Example:
        >>> from pyg_orch.datasets import load_cora
        >>> data = load_cora()
        >>> loader = OrchNeighborLoader(data, num_neighbors=[10, 5],
        ...                             input_nodes=data.train_mask,
        ...                             batch_size=32)
        >>> batch = next(iter(loader))
        >>> batch.batch_size, len(batch.num_sampled_nodes)
        (32, 3)
    """

    def __init__(self, data: Any, num_neighbors: Any, **kwargs: Any) -> None:
        if kwargs.get("neighbor_sampler") is None:
            kwargs["neighbor_sampler"] = OrchNeighborSampler(
                data,
                num_neighbors,
                **{key: kwargs[key] for key in _SAMPLER_ARGUMENTS if key in kwargs},
                share_memory=kwargs.get("num_workers", 0) > 0,
            )
        super().__init__(data, num_neighbors, **kwargs)


# Arguments that NeighborLoader hands on to its NeighborSampler.
_SAMPLER_ARGUMENTS = (
    "replace",
    "subgraph_type",
    "disjoint",
    "temporal_strategy",
    "time_attr",
    "weight_attr",
    "is_sorted",
    "directed",
)
