"""PyG's distributed neighbour sampler, with hot vertices and global edge ids.

:class:`OrchDistNeighborSampler` is PyG's
:class:`~torch_geometric.distributed.DistNeighborSampler` with three changes:

* the last hop does not expand hot vertices (their bottom-layer aggregates are
  replicated on every machine by
  :class:`~pyg_orch.distributed.hot_store.HotFeatureStore`);
* every sampled edge's ``e_id`` is its id in the whole graph (within its
  edge type). PyG's sampler returns an edge's position in the CSC of the
  partition that sampled it, so edge features were read at the wrong rows;
* it counts the one-hop requests it sends to other partitions.
"""

from __future__ import annotations

import traceback
from typing import Any

import torch
from torch import Tensor
from torch_geometric.distributed import DistNeighborSampler
from torch_geometric.sampler import SamplerOutput

from pyg_orch.distributed.hot_store import HotFeatureStore


class LastHopFanout(int):
    """The fan-out of the last hop, marked as such.

    PyG's ``node_sample`` loops over the hops and passes each hop's fan-out to
    ``sample_one_hop``, but not the hop's index; the mark tells the last hop
    apart, whose hot vertices are not expanded.

    Example:
        >>> fanout = LastHopFanout(5)
        >>> fanout + 1, isinstance(fanout, LastHopFanout)
        (6, True)
    """


def mark_last_hop(num_neighbors: Any) -> Any:
    """``num_neighbors`` (a list, or a dict of lists) with the last fan-outs marked.

    Example:
        >>> [type(f).__name__ for f in mark_last_hop([10, 5])]
        ['int', 'LastHopFanout']
    """
    if isinstance(num_neighbors, dict):
        return {key: mark_last_hop(value) for key, value in num_neighbors.items()}
    fanouts = [int(fanout) for fanout in num_neighbors]
    if fanouts:
        fanouts[-1] = LastHopFanout(fanouts[-1])
    return fanouts


def _part(values: Tensor | None, mask: Tensor) -> Tensor | None:
    # A per-seed tensor's rows of the masked seeds; PyG passes empty tensors
    # (or None) where it has no seed times or subgraph ids.
    if values is None or values.numel() != mask.numel():
        return values
    return values[mask]


class SamplingFailed:
    """What the sampler puts into the loader's channel when a batch fails.

    PyG's event loop only logs an exception of an asynchronous sampling task,
    and the loader would wait for the batch forever; this carries the
    traceback to the loader, which raises it.

    Example:
        >>> SamplingFailed("Traceback ...").message
        'Traceback ...'
    """

    def __init__(self, message: str):
        self.message = message


class OrchDistNeighborSampler(DistNeighborSampler):
    """:class:`~torch_geometric.distributed.DistNeighborSampler` for pyg_orch.

    Takes PyG's arguments. Hot vertices come from the feature store when it is
    a :class:`~pyg_orch.distributed.hot_store.HotFeatureStore` that holds them.

    Example:
        >>> OrchDistNeighborSampler.__name__  # what PyG's loaders look for
        'DistNeighborSampler'
    """

    def __init__(self, current_ctx: Any, data: Any, num_neighbors: Any, **kwargs: Any):
        super().__init__(current_ctx, data, mark_last_hop(num_neighbors), **kwargs)
        store = self.feature_store
        self.hot_store = store if isinstance(store, HotFeatureStore) else None
        if self.hot_store is not None and self.hot_store.hot_cache is not None:
            if self.temporal:
                raise NotImplementedError(
                    "hot vertices of a partitioned graph are not served in "
                    "temporal sampling yet: partition the graph with hot_ratio=0"
                )

    async def _sample_from(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return await super()._sample_from(*args, **kwargs)
        except Exception:
            if self.channel is None:
                raise  # the synchronous loader gets it from run_task
            self.channel.put(SamplingFailed(traceback.format_exc()))
            return None

    def _hot_mask(self, edge_type: Any) -> Tensor | None:
        if self.hot_store is None:
            return None
        return self.hot_store.hot_mask(None if edge_type is None else edge_type[2])

    async def sample_one_hop(
        self,
        srcs: Tensor,
        one_hop_num: int,
        seed_time: Tensor | None = None,
        src_batch: Tensor | None = None,
        edge_type: Any = None,
    ) -> SamplerOutput:
        """PyG's one hop; at the last hop, hot vertices get no neighbours."""
        last = isinstance(one_hop_num, LastHopFanout)
        one_hop_num = int(one_hop_num)
        hot_mask = self._hot_mask(edge_type) if last else None
        cold = None if hot_mask is None else ~hot_mask[srcs]
        if cold is None or bool(cold.all()):
            return await self._count_and_sample(
                srcs, one_hop_num, seed_time, src_batch, edge_type
            )
        per_node = torch.zeros(srcs.numel(), dtype=torch.long)
        if bool(cold.any()):
            out = await self._count_and_sample(
                srcs[cold], one_hop_num, _part(seed_time, cold),
                _part(src_batch, cold), edge_type,
            )  # fmt: skip
            per_node[cold] = torch.as_tensor(out.metadata[0], dtype=torch.long)
        else:
            empty = torch.empty(0, dtype=torch.long)
            batch = empty if self.disjoint else None
            out = SamplerOutput(node=empty, row=None, col=None, edge=empty, batch=batch)
        out.metadata = (per_node.tolist(),)
        return out

    async def _count_and_sample(
        self,
        srcs: Tensor,
        one_hop_num: int,
        seed_time: Tensor | None,
        src_batch: Tensor | None,
        edge_type: Any,
    ) -> SamplerOutput:
        if self.hot_store is not None:
            node_type = None if edge_type is None else edge_type[2]
            owners = self.graph_store.get_partition_ids_from_nids(
                srcs, node_type
            ).unique()
            remote = int((owners != self.graph_store.partition_idx).sum())
            self.hot_store.traffic.add(sampling_rpcs=remote)
        return await super().sample_one_hop(
            srcs, one_hop_num, seed_time, src_batch, edge_type
        )

    def _sample_one_hop(
        self,
        input_nodes: Tensor,
        num_neighbors: int,
        seed_time: Tensor | None = None,
        edge_type: Any = None,
    ) -> SamplerOutput:
        # Runs on the partition that owns input_nodes, for itself or over RPC:
        # its CSC positions become ids of the whole graph here.
        out = super()._sample_one_hop(
            input_nodes, int(num_neighbors), seed_time, edge_type
        )
        edge_ids = self.graph_store.get_edge_id(edge_type=edge_type, layout="coo")
        out.edge = edge_ids[out.edge] - self._edge_offset(edge_type)
        return out

    def _edge_offset(self, edge_type: Any) -> int:
        # PyG's heterogeneous partitions keep an edge's id in the homogeneous
        # numbering (edge types one after another, in the data's order); its
        # features, and the user, know it by its id within its edge type.
        if edge_type is None:
            return 0
        offset = 0
        for other in self.graph_store.meta["edge_types"]:
            if tuple(other) == tuple(edge_type):
                return offset
            offset += self.graph_store.edge_pb[tuple(other)].numel()
        raise KeyError(f"edge type {edge_type} is not in this partition")


# PyG's NodeLoader and LinkLoader recognise a distributed sampler by its class
# name (filter_fn: ``node_sampler.__class__.__name__ == 'DistNeighborSampler'``).
OrchDistNeighborSampler.__name__ = "DistNeighborSampler"
