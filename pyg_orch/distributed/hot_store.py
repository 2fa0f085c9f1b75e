"""A partition's feature store that holds the hot vertices of the whole graph.

NeutronOrch's hot vertices are the ones most batches reach. On a partitioned
graph they are also the ones whose rows most often live on another machine: a
hub has neighbours in every partition. :func:`~pyg_orch.distributed.partition_graph`
writes their rows and their bottom-layer aggregates over the whole graph
(``hot.pt``) beside PyG's partition files, and every machine loads them: a hot
vertex's row is served locally, so it never crosses the network, and its last
hop is not sampled at all (the aggregate stands in for it).
"""

from __future__ import annotations

import os.path as osp
from typing import Any

import torch
from torch import Tensor
from torch_geometric.distributed import LocalFeatureStore

from pyg_orch.distributed.traffic import RemoteTraffic
from pyg_orch.hot.cache import HotCache

#: The name of the hot vertices' file in a partition folder.
HOT_FILE = "hot.pt"
#: The name of the labels' file (``y``) in a partition folder.
LABEL_FILE = "label.pt"
#: The layout version of ``hot.pt`` this module reads.
HOT_FILE_VERSION = 1


class HotFeatureStore(LocalFeatureStore):
    """PyG's :class:`~torch_geometric.distributed.LocalFeatureStore`, hot rows local.

    It owns the replicated hot part of the graph: the hot vertices' ids, their
    feature rows and their cached aggregates (a static
    :class:`~pyg_orch.hot.cache.HotCache`). The sampler reads :meth:`hot_mask`
    to stop expanding them at the last hop; the loader reads ``hot_cache``.
    It also counts what it fetches from other partitions (``traffic``).

    Example:
        >>> store = HotFeatureStore()
        >>> store.hot_cache is None, store.traffic.rows
        (True, 0)
    """

    def __init__(self) -> None:
        super().__init__()
        self.hot_ratio = 0.0
        self.hot_cache: HotCache | None = None
        self.hot_x: Tensor | None = None
        self.traffic = RemoteTraffic()

    @classmethod
    def from_partition(cls, root: str, pid: int) -> HotFeatureStore:
        """Loads part ``pid`` of the partition in ``root``, with its hot vertices.

        The labels (``label.pt``) and the hot vertices (``hot.pt``) are
        loaded when ``root`` holds them.

        Raises:
            ValueError: ``hot.pt`` was written for another graph, or by another
                version of pyg_orch.
        """
        store = super().from_partition(root, pid)
        labels = osp.join(root, LABEL_FILE)
        if osp.exists(labels):
            # PyG's format has no labels; partition_graph writes them here.
            store.labels = torch.load(labels, weights_only=True)
        path = osp.join(root, HOT_FILE)
        if osp.exists(path):
            store.load_hot(torch.load(path, weights_only=True), path)
        return store

    def load_hot(self, hot: dict[str, Any], path: str) -> None:
        """Takes the hot part written by ``partition_graph`` (``hot.pt``)."""
        if hot.get("version") != HOT_FILE_VERSION:
            raise ValueError(
                f"{path} has layout version {hot.get('version')!r}, but this "
                f"pyg_orch reads version {HOT_FILE_VERSION}: partition the "
                f"graph again with this version's partition_graph"
            )
        if self.meta["is_hetero"]:
            raise NotImplementedError(
                f"{path}: hot vertices of a partitioned heterogeneous graph are "
                f"not served yet; partition it with hot_ratio=0"
            )
        num_nodes = self.node_feat_pb.numel()
        if hot["num_nodes"] != num_nodes:
            raise ValueError(
                f"{path} was written for a graph of {hot['num_nodes']} nodes, "
                f"but this partition's graph has {num_nodes}: the folder mixes "
                f"two partitionings; partition the graph again into an empty folder"
            )
        hot_nodes = hot["node"][None]
        self.hot_ratio = float(hot["hot_ratio"])
        self.hot_x = hot["x"][None]
        self.hot_cache = HotCache.from_values(hot_nodes, num_nodes, hot["values"][None])
        self.hot_cache.mode_chosen = True  # a partition's values are static

    def hot_mask(self, node_type: str | None = None) -> Tensor | None:
        """Whether each node of the whole graph is hot; ``None`` without hot nodes."""
        return None if self.hot_cache is None else self.hot_cache.mask

    def lookup_features(
        self, index: Tensor, is_node_feat: bool = True, input_type: Any = None
    ) -> torch.futures.Future:
        """PyG's lookup, with the hot rows served from this machine's copy."""
        if not is_node_feat or self.hot_cache is None:
            return self._lookup_and_count(index, is_node_feat, input_type)
        slots = self.hot_cache.slot[index]
        hot = slots >= 0
        hot_rows = self.hot_x[slots[hot]]
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

    def _lookup_and_count(
        self, index: Tensor, is_node_feat: bool, input_type: Any
    ) -> torch.futures.Future:
        owners = self.node_feat_pb if is_node_feat else self.edge_feat_pb
        if self.meta["is_hetero"]:
            owners = owners[input_type]
        remote = owners[index] != self.partition_idx
        rows = int(remote.sum())
        future = super().lookup_features(index, is_node_feat, input_type)
        if rows:
            self.traffic.add(
                rows=rows if is_node_feat else 0,
                bytes=rows * self._row_bytes(is_node_feat, input_type),
                feature_rpcs=owners[index][remote].unique().numel(),
            )
        return future

    def _row_bytes(self, is_node_feat: bool, input_type: Any) -> int:
        # Bytes of one feature row.
        if self.meta["is_hetero"]:
            group = input_type
        else:
            group = None if is_node_feat else (None, None)
        name = "x" if is_node_feat else "edge_attr"
        tensor = self.get_tensor(group_name=group, attr_name=name)
        return tensor[0].numel() * tensor.element_size()
