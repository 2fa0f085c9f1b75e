"""A partition's feature store that holds the hot vertices of the whole graph.

NeutronOrch's hot vertices are the ones most batches reach. On a partitioned
graph they are also the ones whose rows most often live on another machine: a
hub has neighbours in every partition.
:func:`~pyg_orch.distributed.partition.partition_graph` writes their rows and
their bottom-layer aggregates over the whole graph (``hot.pt``) beside PyG's
partition files, and every machine loads them: a hot
vertex's row is served locally, so it never crosses the network, and its last
hop is not sampled at all (the aggregate stands in for it).
"""

from __future__ import annotations

import contextlib
import json
import os.path as osp
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch import Tensor
from torch_geometric.distributed import LocalFeatureStore, LocalGraphStore
from torch_geometric.distributed.rpc import rpc_async

from pyg_orch.distributed.engine import use_type_ids
from pyg_orch.distributed.engine.books import (
    RangeIndex,
    contiguous_start,
    drop_edge_ranges,
    range_books,
)
from pyg_orch.distributed.partition import HOT_VERSION, IDENTITY_FILE
from pyg_orch.distributed.ranges import EDGE_VALUES, PartitionIds
from pyg_orch.distributed.traffic import RemoteTraffic
from pyg_orch.hot.cache import HotCache
from pyg_orch.hot.relation_cache import RelationCache
from pyg_orch.hot.slots import HotSlots

#: The name of the hot vertices' file in a partition folder.
HOT_FILE = "hot.pt"


class HotFeatureStore(LocalFeatureStore):
    """PyG's :class:`~torch_geometric.distributed.LocalFeatureStore`, hot rows local.

    It owns the replicated hot part of the graph: the hot vertices' ids, their
    feature rows and their cached aggregates (a static
    :class:`~pyg_orch.hot.cache.HotCache`). The sampler reads :meth:`hot_slots`
    to stop expanding them at the last hop; the loader reads ``hot_cache``.
    It also counts what it fetches from other partitions (``traffic``).

    Example:
        >>> store = HotFeatureStore()
        >>> store.hot_cache is None, store.traffic.rows
        (True, 0)
    """

    def __init__(self) -> None:
        super().__init__()
        self.hot_ratio: float | dict[str, float] = 0.0
        self.hot_cache: HotCache | RelationCache | None = None
        # The hot nodes' rows, and each node's slot in them (-1: cold), by
        # node type (None on a homogeneous graph).
        self.hot_x: dict[Any, Tensor] = {}
        self.hot_slot: dict[Any, HotSlots] = {}
        self.traffic = RemoteTraffic()
        # "range" on a range-numbered partition (partition_graph's), whose
        # ids are the partition's own: see get_global_id.
        self.numbering: str | None = None

    @classmethod
    def from_partition(cls, root: str, pid: int) -> HotFeatureStore:
        """Loads part ``pid`` of the partition in ``root``, with its hot vertices.

        The hot vertices (``hot.pt``) are loaded when ``root`` holds them.
        ``partition_graph`` writes each part's labels beside its features
        (``"y"``, served by :meth:`lookup_rows`); PyG's ``labels``, as
        long as the whole graph, stay ``None``.

        Raises:
            ValueError: ``hot.pt`` comes from another partitioning, or from
                another version of pyg_orch.
        """
        store = super().from_partition(root, pid)
        if store.meta["is_hetero"]:
            use_type_ids(store, osp.join(root, f"part_{pid}", "node_feats.pt"))
        path = osp.join(root, HOT_FILE)
        if osp.exists(path):
            hot = torch.load(path, weights_only=True)
            store.load_hot(hot, path, _partition_id(root))
        return store

    def load_hot(
        self, hot: dict[str, Any], path: str, partition_id: str | None
    ) -> None:
        """Takes the hot part written by ``partition_graph`` (``hot.pt``).

        Args:
            hot: what ``hot.pt`` holds.
            path: where it was read, for the messages.
            partition_id: the id of the partitioning this store's part
                comes from (its ``orch.json``; ``None``: a partitioning
                PyG's own ``Partitioner`` wrote, which has no hot vertices).

        Raises:
            ValueError: ``hot.pt`` has another layout version, or comes from
                another partitioning than this part.
        """
        if hot.get("version") != HOT_VERSION:
            raise ValueError(
                f"{path} has layout version {hot.get('version')!r}, but this "
                f"pyg_orch reads version {HOT_VERSION}: partition the "
                f"graph again with this version's partition_graph"
            )
        if hot["partition_id"] != partition_id:
            raise ValueError(
                f"{path} comes from another partitioning than this part (their "
                f"partition ids differ: {hot['partition_id']} in {HOT_FILE}, "
                f"{partition_id} in {IDENTITY_FILE}): copy the whole folder of "
                f"one partitioning to every machine, or partition the graph "
                f"again into an empty folder"
            )
        pb = self.node_feat_pb
        hetero = self.meta["is_hetero"]
        num_nodes = {t: ids.numel() for t, ids in pb.items()} if hetero else pb.numel()
        self.hot_ratio = hot["hot_ratio"]
        self.hot_x = hot["x"]
        if hetero:
            self.hot_cache = RelationCache.from_values(
                num_nodes, hot["node"], hot["values"]
            )
            self.hot_slot = {
                t: HotSlots(ids, num_nodes[t]) for t, ids in hot["node"].items()
            }
        else:
            self.hot_cache = HotCache.from_values(
                hot["node"][None], num_nodes, hot["values"][None]
            )
            self.hot_slot = {None: HotSlots(hot["node"][None], num_nodes)}
        self.hot_cache.mode_chosen = True  # a partition's values are static

    def get_global_id(self, group_name: Any) -> Tensor | None:
        """PyG's, as :class:`~pyg_orch.distributed.ranges.PartitionIds` on range-numbered parts.

        Example:
            >>> HotFeatureStore().get_global_id(None) is None
            True
        """  # noqa: E501 - the summary names the class
        ids = super().get_global_id(group_name)
        if ids is None or self.numbering != "range":
            return ids
        return ids.as_subclass(PartitionIds)

    def _set_global_id_to_index(self, group_name: Any) -> None:
        # A range of ids (every part of a range-numbered partition) is
        # mapped to its rows by a subtraction, not a tensor as long as the
        # largest id.
        global_id = self.get_global_id(group_name)
        start = None if global_id is None else contiguous_start(global_id)
        if start is None:
            super()._set_global_id_to_index(group_name)
            return
        self._global_id_to_index[group_name] = RangeIndex(start, global_id.numel())

    def hot_slots(self, node_type: str | None = None) -> HotSlots | None:
        """Each node's row among the hot ones (of ``node_type``); ``None`` without.

        Example:
            >>> HotFeatureStore().hot_slots() is None
            True
        """
        return self.hot_slot.get(node_type)

    def lookup_features(
        self, index: Tensor, is_node_feat: bool = True, input_type: Any = None
    ) -> torch.futures.Future:
        """PyG's lookup, with the hot rows served from this machine's copy."""
        key = input_type if self.meta["is_hetero"] else None
        if not is_node_feat or key not in self.hot_slot or key not in self.hot_x:
            return self._lookup_and_count(index, is_node_feat, input_type)
        slots = self.hot_slot[key][index]
        hot = slots >= 0
        hot_rows = self.hot_x[key][slots[hot]]
        result: torch.futures.Future = torch.futures.Future()
        if bool(hot.all()):
            result.set_result(hot_rows)
            return result

        def combine(cold: torch.futures.Future) -> None:
            try:
                cold_rows = cold.wait()
                rows = cold_rows.new_empty(index.numel(), cold_rows.size(1))
                rows[hot] = hot_rows.to(cold_rows.dtype)
                rows[~hot] = cold_rows
            except Exception as error:  # handed to the waiting sampler
                result.set_exception(error)
            else:
                result.set_result(rows)

        cold = self._lookup_and_count(index[~hot], is_node_feat, input_type)
        cold.add_done_callback(combine)
        return result

    def edge_values(self, edge_type: Any = None) -> dict[str, Tensor]:
        """The edge values (``edge_attr``, ``edge_weight``) of the graph's edges.

        This part's rows of each, by name: what a batch carries of its
        edges (see :meth:`lookup_rows`).

        Example:
            >>> HotFeatureStore().edge_values()
            {}
        """
        if not self.meta:
            return {}
        group = self._group(False, edge_type)
        attrs = self.get_all_tensor_attrs()
        held = {attr.attr_name for attr in attrs if attr.group_name == group}
        return {
            name: self.get_tensor(group_name=group, attr_name=name)
            for name in EDGE_VALUES
            if name in held
        }

    def holds(self, name: str, group: Any) -> bool:
        """Whether this part holds rows ``name`` of ``group`` (a type, or None).

        Example:
            >>> HotFeatureStore().holds("y", None)
            False
        """
        attrs = self.get_all_tensor_attrs()
        return any(a.group_name == group and a.attr_name == name for a in attrs)

    def lookup_rows(
        self, index: Tensor, name: str, is_node_feat: bool, input_type: Any = None
    ) -> torch.futures.Future:
        """Rows ``name`` of the nodes (edges) ``index`` of ``input_type``, by id.

        PyG's distributed sampler fetches only ``x`` and ``edge_attr``; this
        fetches another attribute as it does: this part's from its own
        rows, the others' from their owners over RPC, one request per
        owner. The labels (``"y"``) and the ``edge_weight`` come this way.

        Returns:
            A future of the rows, in ``index`` order.
        """
        group = self._group(is_node_feat, input_type)
        owner = self._owners(is_node_feat, input_type)[index]
        local = owner == self.partition_idx
        own = self.get_tensor_from_global_id(
            index=index[local], group_name=group, attr_name=name
        )
        rows = own.new_empty((index.numel(), *own.shape[1:]))
        rows[local] = own
        parts = owner[~local].unique().tolist()
        requests = [
            rpc_async(
                self.rpc_router.get_to_worker(part), self.rpc_call_id,
                args=(index[owner == part], is_node_feat, input_type, name),
            )
            for part in parts
        ]  # fmt: skip
        self.traffic.add(
            bytes=int((~local).sum()) * own[:1].numel() * own.element_size(),
            feature_rpcs=len(requests),
        )
        result: torch.futures.Future = torch.futures.Future()

        def combine(answers: torch.futures.Future) -> None:
            try:
                for part, answer in zip(parts, answers.wait(), strict=True):
                    rows[owner == part] = answer.wait()
            except Exception as error:  # handed to the waiting sampler
                result.set_exception(error)
            else:
                result.set_result(rows)

        torch.futures.collect_all(requests).add_done_callback(combine)
        return result

    def _rpc_local_feature_get(
        self,
        index: Tensor,
        is_node_feat: bool = True,
        input_type: Any = None,
        attr_name: str | None = None,
    ) -> Tensor:
        # PyG's callee of feature requests, which also answers for another
        # attribute than x and edge_attr (lookup_rows' requests).
        if attr_name is None:
            return super()._rpc_local_feature_get(index, is_node_feat, input_type)
        group = self._group(is_node_feat, input_type)
        return self.get_tensor_from_global_id(
            index=index, group_name=group, attr_name=attr_name
        )

    def _lookup_and_count(
        self, index: Tensor, is_node_feat: bool, input_type: Any
    ) -> torch.futures.Future:
        owner = self._owners(is_node_feat, input_type)[index]
        remote_owners = owner[owner != self.partition_idx]
        rows = remote_owners.numel()
        future = super().lookup_features(index, is_node_feat, input_type)
        if rows:
            self.traffic.add(
                rows=rows if is_node_feat else 0,
                bytes=rows * self._row_bytes(is_node_feat, input_type),
                feature_rpcs=remote_owners.unique().numel(),
            )
        return future

    def _row_bytes(self, is_node_feat: bool, input_type: Any) -> int:
        # Bytes of one feature row.
        name = "x" if is_node_feat else "edge_attr"
        group = self._group(is_node_feat, input_type)
        tensor = self.get_tensor(group_name=group, attr_name=name)
        return tensor[0].numel() * tensor.element_size()

    def _group(self, is_node_feat: bool, input_type: Any) -> Any:
        # The group PyG files a node (edge) type's rows under.
        if self.meta["is_hetero"]:
            return input_type
        return None if is_node_feat else (None, None)

    def _owners(self, is_node_feat: bool, input_type: Any) -> Any:
        # The book (or map) of the parts of a node (edge) type's ids.
        owners = self.node_feat_pb if is_node_feat else self.edge_feat_pb
        return owners[input_type] if self.meta["is_hetero"] else owners


def load_partition(
    root: str | Path, rank: int, world_size: int
) -> tuple[HotFeatureStore, LocalGraphStore]:
    """This rank's ``(feature_store, graph_store)``, checked against the job.

    One process per partition: rank ``r`` of ``world_size`` loads part ``r``
    of the partition in ``root`` (see
    :func:`~pyg_orch.distributed.partition.partition_graph`), with its labels and its
    hot vertices.

    Raises:
        FileNotFoundError: ``root`` or one of this part's files is missing.
        ValueError: the partition has another number of parts than
            ``world_size``, or its files come from different partitionings.

    Example:
        >>> load_partition("/nonexistent", 0, 1)
        Traceback (most recent call last):
        ...
        FileNotFoundError: rank 0: /nonexistent/META.json is missing: partition the graph first, partition_graph(data, num_parts, '/nonexistent'), and pass that folder as root
    """  # noqa: E501 - a doctest's output is one line
    root = str(root)
    meta = _required(root, "META.json", rank)
    num_parts = json.loads(Path(meta).read_text())["num_parts"]
    if num_parts != world_size:
        raise ValueError(
            f"rank {rank}: the partition in {root} has {num_parts} parts, but the "
            f"job has world_size={world_size} processes; run one process per "
            f"part (world_size={num_parts}), or partition the graph again into "
            f"{world_size} parts"
        )
    if not 0 <= rank < world_size:
        raise ValueError(f"rank must be in [0, {world_size}), got {rank}")
    for name in ("graph.pt", "node_feats.pt"):
        _required(root, osp.join(f"part_{rank}", name), rank)
    _check_identity(root, rank)
    bounds = _identity(root).get("bounds")
    with range_books(bounds) if bounds else contextlib.nullcontext():
        graph_store = LocalGraphStore.from_partition(root, rank)
        feature_store = HotFeatureStore.from_partition(root, rank)
    if bounds:
        drop_edge_ranges(graph_store)
        feature_store.numbering = "range"
    # PyG's two stores each load the node -> part and edge -> part maps of
    # the whole graph: the feature store reads the graph store's instead.
    feature_store.node_feat_pb = graph_store.node_pb
    feature_store.edge_feat_pb = graph_store.edge_pb
    return feature_store, graph_store


def _identity(folder: str) -> dict[str, Any]:
    # What orch.json holds; nothing in a partition PyG's Partitioner wrote.
    path = osp.join(folder, IDENTITY_FILE)
    return json.loads(Path(path).read_text()) if osp.exists(path) else {}


def _partition_id(folder: str) -> str | None:
    return _identity(folder).get("partition_id")


def _check_identity(root: str, rank: int) -> None:
    # The part and the root come from one partitioning, and so do every
    # rank's (when the ranks have joined a process group).
    identity = _partition_id(root)
    part = osp.join(root, f"part_{rank}")
    if _partition_id(part) != identity:
        raise ValueError(
            f"rank {rank}: {part} comes from another partitioning than "
            f"{root}/META.json (their {IDENTITY_FILE} differ): copy the whole "
            f"folder of one partitioning to every machine"
        )
    if not (dist.is_available() and dist.is_initialized()):
        return
    identities: list[str | None] = [None] * dist.get_world_size()
    dist.all_gather_object(identities, identity)
    others = [r for r, other in enumerate(identities) if other != identity]
    if others:
        raise ValueError(
            f"rank {rank}: ranks {others} loaded another partitioning than "
            f"{root} (their {IDENTITY_FILE} differ): copy the whole folder of "
            f"one partitioning to every machine"
        )


def _required(root: str, name: str, rank: int) -> str:
    path = osp.join(root, name)
    if not osp.exists(path):
        raise FileNotFoundError(
            f"rank {rank}: {path} is missing: partition the graph first, "
            f"partition_graph(data, num_parts, {root!r}), and pass that folder "
            f"as root"
        )
    return path
