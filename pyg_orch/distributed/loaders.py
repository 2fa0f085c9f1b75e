"""PyG's distributed loaders, with the hot vertices served on every machine.

:class:`OrchDistNeighborLoader` and :class:`OrchDistLinkNeighborLoader` take
the arguments of PyG's :class:`~torch_geometric.distributed.DistNeighborLoader`
and :class:`~torch_geometric.distributed.DistLinkNeighborLoader` and sample
with :class:`~pyg_orch.distributed.engine.sampler.OrchDistNeighborSampler`. Their
batches carry the hot part as a single machine's batches do (``hot_index``,
``hot_agg``, ``hot_kind``, ``hot_version``), so :class:`~pyg_orch.OrchModel`
serves them unchanged.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from torch import Tensor
from torch_geometric.distributed import DistLinkNeighborLoader, DistNeighborLoader

from pyg_orch.distributed.engine import OrchDistNeighborSampler, SamplingFailed
from pyg_orch.distributed.hot_store import HotFeatureStore
from pyg_orch.distributed.ranges import PartitionIds
from pyg_orch.distributed.traffic import RemoteTraffic
from pyg_orch.hot.cache import HotCache
from pyg_orch.hot.serving import (
    annotate_batch,
    apply_serving,
    check_served,
    next_version,
)

# The loaders' arguments that PyG hands on to the sampler it builds.
_SAMPLER_ARGUMENTS = (
    "replace", "subgraph_type", "disjoint", "temporal_strategy", "time_attr",
    "concurrency", "device",
)  # fmt: skip


def build_sampler(
    data: Any, num_neighbors: Any, current_ctx: Any, arguments: dict[str, Any]
) -> OrchDistNeighborSampler:
    """The sampler PyG's loader would build from ``arguments``, pyg_orch's kind.

    Example:
        >>> build_sampler.__name__
        'build_sampler'
    """
    sampler_arguments = {k: arguments[k] for k in _SAMPLER_ARGUMENTS if k in arguments}
    return OrchDistNeighborSampler(
        current_ctx, data, num_neighbors, **sampler_arguments
    )


def hot_cache_of(data: Any, hot_ratio: float | None) -> HotCache | None:
    """The hot cache a loader of ``data`` serves, checked against ``hot_ratio``.

    Args:
        data: the loader's ``(feature_store, graph_store)``.
        hot_ratio: ``None`` serves the hot vertices the partition holds;
            ``0`` serves none; any other value must be the ratio the graph
            was partitioned with.

    Raises:
        ValueError: ``hot_ratio`` is not the partition's.

    Example:
        >>> hot_cache_of((HotFeatureStore(), None), None) is None
        True
    """
    store = data[0]
    held = store.hot_ratio if isinstance(store, HotFeatureStore) else 0.0
    if hot_ratio is None or hot_ratio == held:
        return store.hot_cache if held else None
    if hot_ratio == 0:
        return None
    raise ValueError(
        f"hot_ratio={hot_ratio!r}, but the partition holds the hot vertices of "
        f"hot_ratio={held!r} (chosen when the graph was partitioned; a plain "
        f"LocalFeatureStore holds none): pass hot_ratio=None to use them, 0 "
        f"for none, or partition the graph again with "
        f"partition_graph(..., hot_ratio={hot_ratio!r}) and load it with "
        f"HotFeatureStore.from_partition"
    )


# The loaders' arguments that hold node ids (alone, or after a type).
_ID_ARGUMENTS = ("input_nodes", "edge_label_index")


def _partition_inputs(data: Any, kwargs: dict[str, Any]) -> dict[str, Any]:
    # On a range-numbered partition, ids must be the partition's (marked
    # PartitionIds): the user's original ids would be read as other nodes.
    # PyG gets them as plain tensors.
    if getattr(data[0], "numbering", None) != "range":
        return kwargs
    kwargs = dict(kwargs)
    for name in _ID_ARGUMENTS:
        value = kwargs.get(name)
        typed = isinstance(value, tuple) and len(value) == 2
        ids = value[1] if typed else value
        if not isinstance(ids, Tensor):
            continue
        if not isinstance(ids, PartitionIds):
            raise ValueError(
                f"{name} must hold this partition's node ids: partition_graph "
                f"numbered the nodes anew (each part one range), so a plain "
                f"tensor could be your original ids, read as other nodes. Map "
                f"original ids with pyg_orch.distributed.partition_ids(root, "
                f"ids), take the splits from pyg_orch.distributed."
                f"load_splits(root), or mark ids already in the partition's "
                f"numbering with ids.as_subclass(PartitionIds)"
            )
        ids = ids.as_subclass(Tensor)
        kwargs[name] = (value[0], ids) if typed else ids
    return kwargs


class _OrchDistLoader:
    # What both loaders add to PyG's: pyg_orch's sampler, the served hot cache
    # of the partition, the serving contract OrchModel drives, and the
    # batches' hot part. PyG's loader comes after it in the bases.
    cache: HotCache | None
    hot_ratio: float
    staleness = 0  # a partition's hot values are static: never stale
    features = None  # OrchModel checks the batches' dtype instead
    traffic: RemoteTraffic

    def __init__(
        self,
        data: Any,
        num_neighbors: Any,
        master_addr: str | None = None,
        master_port: int | str | None = None,
        current_ctx: Any = None,
        hot_ratio: float | None = None,
        **kwargs: Any,
    ):
        kwargs = _partition_inputs(data, kwargs)
        sampler = build_sampler(data, num_neighbors, current_ctx, kwargs)
        super().__init__(
            data, num_neighbors, master_addr, master_port, current_ctx,
            dist_sampler=sampler, **kwargs,
        )  # fmt: skip
        self.cache = hot_cache_of(self.data, hot_ratio)
        self.hot_ratio = 0.0 if self.cache is None else self.data[0].hot_ratio
        # PyG's own LocalFeatureStore counts nothing: an empty count then.
        self.traffic = getattr(data[0], "traffic", None) or RemoteTraffic()
        self._hot_version: int | None = None
        # PyG's loader made its own channel; the sampler must put into it.
        self.dist_sampler.channel = self.channel
        # filter_fn takes the sampler's output from the channel itself.
        self.transform_sampler_output = None

    def serve(self, kind: str, snapshot: Callable[[], Any] | None = None) -> int:
        """Declares the aggregation the batches' hot values are for.

        A partition's hot values were aggregated from raw features when the
        graph was partitioned, so only those kinds are served: a bottom layer
        that aggregates with weights (``"embedding"``) is refused.

        Raises:
            ValueError: no hot vertices, or a kind the partition does not hold.
            NotImplementedError: ``kind="embedding"``.
        """
        if kind == "embedding":
            raise NotImplementedError(
                "the bottom layer aggregates with weights (e.g. GATConv), so its "
                "hot rows would need layer outputs, but a partitioned graph's hot "
                "values are raw-feature aggregates computed when it was "
                "partitioned: load the partition with hot_ratio=0"
            )
        apply_serving(self.cache, kind, snapshot)
        self._hot_version = next_version()
        return self._hot_version

    def channel_get(self, out: Any) -> Any:
        """The next batch from the sampler, or its error raised here."""
        out = super().channel_get(out)
        if isinstance(out, SamplingFailed):
            raise RuntimeError(f"sampling a batch failed:\n{out.message}")
        return out

    def filter_fn(self, out: Any) -> Any:
        """PyG's batch, with the edges' ``edge_weight`` and the hot part added."""
        # The sampler's output: from the channel when it samples asynchronously.
        out = self.channel_get(out)
        batch = super().filter_fn(out)
        weights = getattr(out, "edge_weight", None)
        if isinstance(weights, dict):
            for edge_type, weight in weights.items():
                batch[edge_type].edge_weight = weight
        elif weights is not None:
            batch.edge_weight = weights
        check_served(self.cache, self.hot_ratio)
        annotate_batch(self.cache, self._hot_version, batch)
        self.traffic.add(batches=1)
        return batch


class OrchDistNeighborLoader(_OrchDistLoader, DistNeighborLoader):
    """PyG's :class:`~torch_geometric.distributed.DistNeighborLoader`, hot rows local.

    Args:
        data: ``(feature_store, graph_store)`` of this machine's partition;
            a :class:`~pyg_orch.distributed.hot_store.HotFeatureStore` brings
            the hot vertices.
        num_neighbors: fan-outs per hop (a list, or a dict by edge type).
        master_addr: address of the RPC master (``MASTER_ADDR`` if ``None``).
        master_port: its port (``MASTER_PORT + 1`` if ``None``).
        current_ctx: this process's
            :class:`~torch_geometric.distributed.DistContext`.
        hot_ratio: ``None`` serves the hot vertices the partition holds, ``0``
            none, any other value must be the partition's.
        **kwargs: every other argument of ``DistNeighborLoader``.

    Example:
        >>> issubclass(OrchDistNeighborLoader, DistNeighborLoader)
        True
    """


class OrchDistLinkNeighborLoader(_OrchDistLoader, DistLinkNeighborLoader):
    """PyG's ``DistLinkNeighborLoader`` with hot vertices.

    Takes the arguments of :class:`OrchDistNeighborLoader` but ``input_nodes``,
    and those of ``DistLinkNeighborLoader`` (``edge_label_index``,
    ``neg_sampling``, ...).

    Example:
        >>> issubclass(OrchDistLinkNeighborLoader, DistLinkNeighborLoader)
        True
    """
