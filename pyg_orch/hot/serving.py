"""The serving contract: what a loader's hot values are made for.

A model declares what the hot values are for (``loader.serve(kind)``, see
:meth:`~pyg_orch.loading.orch_loader.OrchLoader.serve`); each batch names the
serving it was made for (its version), so a model refuses values made for
another.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

from torch import Tensor

from pyg_orch.hot.cache import AGGREGATIONS, HotCache, check_resampled
from pyg_orch.hot.choice import frontier_size
from pyg_orch.hot.relation_cache import RelationCache

# Versions of serve, unique in the process: a batch's hot_version names the
# serving, whichever loader made it.
_SERVINGS = itertools.count(1)


def next_version() -> int:
    """A new serving version, unique in the process.

    Example:
        >>> next_version() < next_version()
        True
    """
    return next(_SERVINGS)


def apply_serving(
    cache: HotCache | RelationCache | None,
    kind: Any,
    snapshot: Callable[[], Any] | None,
) -> None:
    """Sets ``cache`` up for ``kind`` (see :meth:`~pyg_orch.OrchNeighborLoader.serve`).

    Raises:
        ValueError: no cache, an unknown ``kind``, or embedding without
            ``snapshot``.
        NotImplementedError: ``kind`` does not fit an explicitly chosen mode.

    Example:
        >>> apply_serving(None, "mean", None)
        Traceback (most recent call last):
        ...
        ValueError: this loader has no hot vertices (hot_ratio=0 and no hot set): there are no hot values to serve
    """  # noqa: E501 - a doctest's output is one line
    if cache is None:
        raise ValueError(
            "this loader has no hot vertices (hot_ratio=0 and no hot set): "
            "there are no hot values to serve"
        )
    if isinstance(cache, RelationCache):
        if not isinstance(kind, dict):
            raise NotImplementedError(
                f"a heterogeneous graph's hot nodes are served per relation: "
                f"kind must be a dict of aggregations by edge type, got "
                f"{kind!r} (a bottom layer that aggregates with weights, "
                f"such as GATConv, needs cache='embedding', which "
                f"heterogeneous graphs do not support yet: set hot_ratio=0)"
            )
        cache.serve(kind)
    elif kind == "embedding":
        _serve_embedding(cache, snapshot)
    else:
        _serve_aggregation(cache, kind)


def _serve_embedding(cache: HotCache, snapshot: Any) -> None:
    if snapshot is None:
        raise ValueError("serve('embedding') needs the snapshot of the layer")
    if cache.mode_chosen and cache.mode != "embedding":
        raise NotImplementedError(
            f"the bottom layer aggregates with weights, so its hot rows need "
            f"layer outputs, but the loader was built with "
            f"cache={cache.mode!r}, which serves raw-feature aggregations; "
            f"build it with cache='embedding' (or leave cache unset)"
        )
    cache.mode, cache.kind, cache.snapshot = "embedding", "embedding", snapshot


def _serve_aggregation(cache: HotCache, kind: str) -> None:
    if kind not in AGGREGATIONS:
        raise ValueError(
            f"kind must be one of {AGGREGATIONS} or 'embedding', got {kind!r}"
        )
    if cache.mode == "embedding":
        if cache.mode_chosen:
            raise NotImplementedError(
                "the loader was built with cache='embedding', which serves "
                "layer outputs; serve it with kind='embedding' or build it "
                "with another cache mode"
            )
        cache.mode = "static"  # an earlier model had switched it
    if cache.mode == "resample":
        check_resampled(kind)  # before a refresher thread would fail on it
    cache.kind, cache.snapshot = kind, None
    if cache.mode == "static":
        # Computed now, not during the first batch: before any worker
        # process is forked, and outside the training time.
        cache.values()
        if cache.device is not None:
            cache.device_values()


def check_served(cache: HotCache | RelationCache | None, ratio: Any) -> None:
    """Raises a :class:`RuntimeError` unless batches can be drawn.

    Example:
        >>> check_served(None, "auto")
        Traceback (most recent call last):
        ...
        RuntimeError: hot_ratio='auto' is chosen from measurements of the model: wrap it with OrchModel(model, loader) before iterating
    """  # noqa: E501 - a doctest's output is one line
    if ratio == "auto":
        raise RuntimeError(
            "hot_ratio='auto' is chosen from measurements of the model: wrap "
            "it with OrchModel(model, loader) before iterating"
        )
    if cache is not None and cache.kind is None:
        raise RuntimeError(
            "this loader has hot vertices, whose last hop is not sampled: "
            "their bottom-layer input is in batch.hot_agg, which only "
            "OrchModel uses. Wrap the model with OrchModel(model, loader) "
            "before iterating, or set hot_ratio=0 for a plain NeighborLoader"
        )


def annotate_batch(
    cache: HotCache | RelationCache | None, version: int, batch: Any
) -> None:
    """Adds the hot part to a filtered batch: ``hot_index`` and its values.

    The values are ``hot_agg`` where the static values are on the CPU;
    otherwise ``hot_slot``, their rows in the refresher's buffer for the
    batch or on the device. ``hot_kind`` and ``hot_version`` name the
    serving. Nothing without hot vertices.

    Example:
        >>> import torch
        >>> from torch_geometric.data import Data
        >>> from pyg_orch import HotSet, OrchNeighborSampler
        >>> from pyg_orch.hot.options import HotOptions
        >>> from pyg_orch.hot.vertices import HotVertices
        >>> from pyg_orch.datasets import load_cora
        >>> data = load_cora()
        >>> hot = HotVertices(OrchNeighborSampler(data, [5]), data.x, None,
        ...                   HotOptions(), [5])
        >>> hot.use(HotSet(torch.tensor([7]), torch.zeros(0), "given"))
        >>> version = hot.serve("sum")
        >>> batch = Data(n_id=torch.tensor([3, 7, 9]), num_sampled_nodes=[2, 1])
        >>> hot.annotate(batch)
        >>> batch.hot_index.tolist(), batch.hot_agg.shape, batch.hot_kind
        ([1], torch.Size([1, 1433]), 'sum')
    """
    if cache is None:
        return
    if isinstance(cache, RelationCache):
        cache.annotate(batch)
        batch.hot_kind, batch.hot_version = "relations", version
        return
    frontier = batch.n_id[: frontier_size(batch.num_sampled_nodes)]
    if cache.mode == "static" and cache.device is None:
        batch.hot_index, batch.hot_agg = cache.lookup(frontier)
    else:
        # The values come from the refresher's buffer for this batch,
        # or from the device (see cache.to_device).
        batch.hot_index, batch.hot_slot = _find(cache, batch, frontier)
    batch.hot_kind, batch.hot_version = cache.kind, version


def _find(cache: HotCache, batch: Any, frontier: Tensor) -> tuple[Tensor, Tensor]:
    if cache.mode != "embedding":
        return cache.find(frontier)
    # An embedding is a constant, so its row gets no gradient: only the
    # hot nodes the last hop did not expand take one. The others have
    # their sampled neighbours and are computed, with gradients, on the
    # device.
    start = frontier_size(batch.num_sampled_nodes[:-1])
    hot_index, hot_slot = cache.find(frontier[start:])
    return hot_index + start, hot_slot
