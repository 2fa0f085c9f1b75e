"""PyG's ``DistNeighborSampler`` with pyg_orch's changes.

:class:`OrchDistNeighborSampler`: hot vertices not expanded at the last
hop, edge ids of the whole graph, the edges' ``edge_weight`` fetched beside
PyG's ``edge_attr``, remote answers matched to the partitions that sent them
(PyG's matching is wrong with 3 parts or more,
``OrchDistNeighborSampler.sample_one_hop``), and failures raised instead of
hanging the loader. PyG's own classes keep their meaning of an edge id (its
position in the CSC of the partition that sampled it), which PyG's own tests
assert.
"""

from __future__ import annotations

import functools
import traceback
from typing import Any

import torch
from torch import Tensor
from torch_geometric.distributed import DistNeighborSampler
from torch_geometric.distributed.event_loop import to_asyncio_future
from torch_geometric.distributed.rpc import rpc_async
from torch_geometric.sampler import SamplerOutput

from pyg_orch.distributed.engine.books import (
    edge_start,
    edge_type_offsets,
    local_columns,
)
from pyg_orch.distributed.engine.fixes import fill_empty_features


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
        # A HotFeatureStore (of pyg_orch.distributed.hot_store) brings the
        # hot vertices and counts the remote traffic; PyG's own store, none.
        store = self.feature_store
        self.hot_store = store if hasattr(store, "hot_slots") else None
        if self.hot_store is not None and self.hot_store.hot_cache is not None:
            if self.temporal:
                raise NotImplementedError(
                    "hot vertices of a partitioned graph are not served in "
                    "temporal sampling yet: partition the graph with hot_ratio=0"
                )

    def init_sampler_instance(self) -> None:
        """PyG's, with a range-numbered part's columns cut to its own nodes."""
        super().init_sampler_instance()
        # (Temporal sampling reads times by column: those keep every column.)
        temporal = self.node_time is not None or self.edge_time is not None
        self._column_starts = (
            {} if temporal else local_columns(self._sampler, self.graph_store)
        )

    async def _sample_from(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return await super()._sample_from(*args, **kwargs)
        except Exception:
            if self.channel is None:
                raise  # the synchronous loader gets it from run_task
            self.channel.put(SamplingFailed(traceback.format_exc()))
            return None

    async def _collate_fn(self, output: Any) -> Any:
        # PyG's features, then what PyG's sampler does not fetch: the nodes'
        # labels where each part holds its own (partition_graph's parts),
        # and the edges' edge_weight, as output.edge_weight (a dict by edge
        # type on a heterogeneous graph), for the loader's batch.
        output = await super()._collate_fn(output)
        if self.is_hetero:
            fill_empty_features(output.metadata, self.feature_store)
        store = self.hot_store
        if store is None:
            return output
        await self._collate_labels(output, store)
        if output.edge is None:
            return output
        edges = output.edge if self.is_hetero else {None: output.edge}
        weights = {}
        for edge_type, edge in edges.items():
            if "edge_weight" in store.edge_values(edge_type):
                future = store.lookup_rows(edge, "edge_weight", False, edge_type)
                weights[edge_type] = await to_asyncio_future(future)
        if weights:
            output.edge_weight = weights if self.is_hetero else weights[None]
        return output

    async def _collate_labels(self, output: Any, store: Any) -> None:
        # The labels of the batch's nodes (of the seeds' type), each from
        # the part that owns it, where PyG reads them (metadata[-2]).
        node_type = self.input_type if self.is_hetero else None
        if isinstance(node_type, tuple) or not store.holds("y", node_type):
            return  # edge-level seeds, or no labels
        nodes = output.node[node_type] if self.is_hetero else output.node
        future = store.lookup_rows(nodes, "y", True, node_type)
        labels = await to_asyncio_future(future)
        *rest, feats, _, edge_feats = output.metadata
        labels = {node_type: labels} if self.is_hetero else labels
        output.metadata = (*rest, feats, labels, edge_feats)

    def _hot_slots(self, edge_type: Any) -> Any:
        if self.hot_store is None:
            return None
        return self.hot_store.hot_slots(None if edge_type is None else edge_type[2])

    async def sample_one_hop(
        self,
        srcs: Tensor,
        one_hop_num: int,
        seed_time: Tensor | None = None,
        src_batch: Tensor | None = None,
        edge_type: Any = None,
    ) -> SamplerOutput:
        """One hop across the partitions; at the last hop, hot vertices get none."""
        last = isinstance(one_hop_num, LastHopFanout)
        one_hop_num = int(one_hop_num)
        hot_slots = self._hot_slots(edge_type) if last else None
        cold = None if hot_slots is None else ~hot_slots.is_hot(srcs)
        if cold is None or bool(cold.all()):
            return await self._across_partitions(
                srcs, one_hop_num, seed_time, src_batch, edge_type
            )
        per_node = torch.zeros(srcs.numel(), dtype=torch.long)
        if bool(cold.any()):
            out = await self._across_partitions(
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

    async def _across_partitions(
        self,
        srcs: Tensor,
        one_hop_num: int,
        seed_time: Tensor | None,
        src_batch: Tensor | None,
        edge_type: Any,
    ) -> SamplerOutput:
        # PyG's DistNeighborSampler.sample_one_hop, but each remote answer is
        # kept with the partition it came from. PyG's matches the i-th answer
        # to the i-th partition after its own, which is wrong once a
        # partition in between has none of the seeds (3 parts or more): the
        # merge then read another partition's neighbours, or past them.
        graph = self.graph_store
        node_type = None if edge_type is None else edge_type[2]
        owners = graph.get_partition_ids_from_nids(srcs, node_type)
        orders = torch.zeros(owners.numel(), dtype=torch.long)
        outputs: list[SamplerOutput | None] = [None] * graph.meta["num_parts"]
        requests = []
        for step in range(graph.num_partitions):
            part = (graph.partition_idx + step) % graph.num_partitions
            mask = owners == part
            part_srcs = srcs[mask]
            orders[mask] = torch.arange(part_srcs.numel())
            if part_srcs.numel() == 0:
                continue
            part_time = seed_time[mask] if self.temporal else None
            if part == graph.partition_idx:
                outputs[part] = self._sample_one_hop(
                    part_srcs, one_hop_num, part_time, edge_type
                )
                continue
            request = rpc_async(
                self.rpc_router.get_to_worker(part), self.rpc_sample_callee_id,
                args=(part_srcs, one_hop_num, part_time, edge_type),
            )  # fmt: skip
            requests.append((part, request))
        if self.hot_store is not None:
            self.hot_store.traffic.add(sampling_rpcs=len(requests))
        if requests:
            futures = [request for _, request in requests]
            answers = await to_asyncio_future(torch.futures.collect_all(futures))
            for (part, _), answer in zip(requests, answers, strict=True):
                outputs[part] = answer.wait()
        if owners.unique().numel() == 1:
            return self._get_sampler_output(
                outputs, srcs.numel(), int(owners[0]), src_batch
            )
        return self._merge_sampler_outputs(
            owners, orders, outputs, one_hop_num, src_batch
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
        key = None if edge_type is None else tuple(edge_type)
        start = self._column_starts.get(key)
        columns = input_nodes if start is None else input_nodes - start
        out = super()._sample_one_hop(columns, int(num_neighbors), seed_time, edge_type)
        if start is not None:  # the output starts with the seeds
            out.node[: input_nodes.numel()] = input_nodes
        edge_ids = self.graph_store.get_edge_id(edge_type=edge_type, layout="coo")
        if edge_ids is None:  # a range-numbered part: its book knows them
            out.edge = out.edge + edge_start(self.graph_store, edge_type)
        else:
            out.edge = edge_ids[out.edge] - self._edge_offset(edge_type)
        return out

    @functools.cached_property
    def _edge_offsets(self) -> dict[Any, int]:
        # PyG's heterogeneous partitions keep an edge's id in the homogeneous
        # numbering; its features, and the user, know it by its id within
        # its edge type. Computed once: every hop of every batch subtracts it.
        return edge_type_offsets(self.graph_store)

    def _edge_offset(self, edge_type: Any) -> int:
        return self._edge_offsets[None if edge_type is None else tuple(edge_type)]


# PyG's NodeLoader and LinkLoader recognise a distributed sampler by its class
# name (filter_fn: ``node_sampler.__class__.__name__ == 'DistNeighborSampler'``).
OrchDistNeighborSampler.__name__ = "DistNeighborSampler"
