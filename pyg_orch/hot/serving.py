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

from pyg_orch.hot.cache import AGGREGATIONS, HotCache, check_resampled, gather
from pyg_orch.hot.choice import served_rows
from pyg_orch.hot.relation_cache import RelationCache, fill_relations

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
    if kind == "embedding":
        _serve_embedding(cache, snapshot)
    elif isinstance(cache, RelationCache):
        _serve_relations(cache, kind)
    else:
        _serve_aggregation(cache, kind)


def _serve_embedding(cache: HotCache | RelationCache, snapshot: Any) -> None:
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


def _serve_relations(cache: RelationCache, kinds: Any) -> None:
    if not isinstance(kinds, dict):
        raise ValueError(
            f"a heterogeneous graph's hot nodes are served per relation: kind "
            f"must be a dict of aggregations by edge type, or 'embedding', "
            f"got {kinds!r}"
        )
    _leave_embedding(cache)
    if cache.mode == "resample":
        for kind in kinds.values():
            check_resampled(kind)
    cache.serve(kinds)


def _serve_aggregation(cache: HotCache, kind: str) -> None:
    if kind not in AGGREGATIONS:
        raise ValueError(
            f"kind must be one of {AGGREGATIONS} or 'embedding', got {kind!r}"
        )
    _leave_embedding(cache)
    if cache.mode == "resample":
        check_resampled(kind)  # before a refresher thread would fail on it
    cache.kind, cache.snapshot = kind, None
    if cache.mode == "static":
        # Computed now, not during the first batch: before any worker
        # process is forked, and outside the training time.
        cache.values()
        if cache.device is not None:
            cache.device_values()


def _leave_embedding(cache: HotCache | RelationCache) -> None:
    # Aggregates are served: embedding mode ends, unless the user chose it.
    if cache.mode != "embedding":
        return
    if cache.mode_chosen:
        raise NotImplementedError(
            "the loader was built with cache='embedding', which serves layer "
            "outputs; serve it with kind='embedding' or build it with another "
            "cache mode"
        )
    cache.mode = "static"  # an earlier model had switched it


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
        batch.hot_kind, batch.hot_version = served_kind(cache), version
        return
    start, end = served_rows(batch.num_sampled_nodes, cache.mode)
    hot_index, hot_slot = cache.find(batch.n_id[start:end])
    batch.hot_index = hot_index + start
    if cache.mode == "static" and cache.device is None:
        batch.hot_agg = gather(cache.values(), hot_slot)
    else:
        # The values come from the refresher's buffer for this batch,
        # or from the device (see cache.to_device).
        batch.hot_slot = hot_slot
    batch.hot_kind, batch.hot_version = cache.kind, version


def served_kind(cache: HotCache | RelationCache) -> str | None:
    """What a batch's hot values are, as its ``hot_kind`` names them.

    The aggregation of a homogeneous cache (or ``"embedding"``); on a
    heterogeneous graph ``"relations"`` (aggregates per relation) or
    ``"embedding"`` (each relation's bottom conv output).

    Example:
        >>> import torch
        >>> cache = HotCache(torch.tensor([0, 0]), torch.tensor([], dtype=torch.long),
        ...                  torch.zeros(1, 1), hot_nodes=torch.tensor([0]))
        >>> cache.kind = "mean"
        >>> served_kind(cache)
        'mean'
    """
    if not isinstance(cache, RelationCache):
        return cache.kind
    if cache.kind is None:
        return None
    return "embedding" if cache.mode == "embedding" else "relations"


def fill_hot(batch: Any, values: Tensor | dict[Any, Tensor]) -> None:
    """Puts the batch's rows of a re-made buffer where ``annotate`` left slots.

    Example:
        >>> import torch
        >>> from torch_geometric.data import Data
        >>> batch = Data(hot_slot=torch.tensor([1]))
        >>> fill_hot(batch, torch.tensor([[1.0], [2.0]]))
        >>> batch.hot_agg.tolist(), "hot_slot" in batch
        ([[2.0]], False)
    """
    if isinstance(values, dict):
        fill_relations(batch, values)
        return
    batch.hot_agg = gather(values, batch.hot_slot)
    del batch.hot_slot
