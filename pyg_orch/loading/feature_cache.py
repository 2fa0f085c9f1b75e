"""Features on the device: a loader's device caches and its copies to them.

:class:`FeatureCache` keeps the raw feature rows of the most often gathered
vertices on the device. The functions below size the device caches
(:func:`device_budget`, :func:`build_feature_cache`) and split a batch between
them: :func:`gather_features` gathers on the CPU what they lack,
:func:`to_device` completes the batch on the device from what they hold (the
hot values too, from the :class:`~pyg_orch.HotCache`).
"""

from __future__ import annotations

import torch
from torch import Tensor
from torch_geometric.data import Data

from pyg_orch.hot.cache import HotCache, gather, row_bytes
from pyg_orch.hot.choice import out_degree
from pyg_orch.hot.relation_cache import RelationCache

# Share of free GPU memory a device_cache="auto" takes; the rest is left to
# training (activations, gradients, the allocator's slack).
_AUTO_DEVICE_SHARE = 0.5


class FeatureCache:
    """Raw features of the most often gathered vertices, kept on the device.

    A batch then only gathers and copies the rows of the other vertices.
    Vertices are ranked by out-degree: with uniform neighbour sampling, a
    vertex is drawn about as often as it is somebody's in-neighbour.

    Args:
        x: all raw features (CPU).
        nodes: global ids of the vertices to keep.
        device: where to keep their rows.

    Example:
        >>> cache = FeatureCache(torch.arange(6.0).view(3, 2), torch.tensor([2]),
        ...                      "cpu")
        >>> [t.tolist() for t in cache.split(torch.tensor([2, 0]))]
        [[0], [0], [1]]
    """

    def __init__(self, x: Tensor, nodes: Tensor, device: torch.device | str):
        self.nodes = nodes
        self.slot = torch.full((x.size(0),), -1, dtype=torch.long)
        self.slot[nodes] = torch.arange(nodes.numel())
        self.values = x[nodes].to(device)

    def reload(self, x: Tensor) -> None:
        """Copies the kept rows again from ``x``, whose values changed.

        Example:
            >>> x = torch.zeros(3, 2)
            >>> cache = FeatureCache(x, torch.tensor([2]), "cpu")
            >>> cache.reload(x + 1)
            >>> cache.values.tolist()
            [[1.0, 1.0]]
        """
        self.values.copy_(x[self.nodes])

    @property
    def num_rows(self) -> int:
        """Rows kept on the device."""
        return self.values.size(0)

    def split(self, n_id: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """Positions of cached rows in ``n_id``, their slots, and the others."""
        slots = self.slot[n_id]
        cached = slots >= 0
        cached_index = cached.nonzero().view(-1)
        return cached_index, slots[cached_index], (~cached).nonzero().view(-1)


def device_budget(device_cache: int | str, device: torch.device | None) -> int:
    """Bytes of ``device`` memory the device caches may take.

    Args:
        device_cache: bytes, or ``"auto"``: half of the free GPU memory
            (nothing on another device). Checked by
            :func:`~pyg_orch.loading.arguments.check_device_cache`.
        device: where batches are delivered (set when ``"auto"``).

    Example:
        >>> device_budget(1024, None), device_budget("auto", torch.device("cpu"))
        (1024, 0)
    """
    if device_cache != "auto":
        return device_cache
    if device.type != "cuda":
        return 0
    return int(torch.cuda.mem_get_info(device)[0] * _AUTO_DEVICE_SHARE)


def build_feature_cache(
    x: Tensor, row: Tensor, budget: int, device: torch.device | None
) -> FeatureCache | None:
    """The :class:`FeatureCache` of the vertices of highest out-degree that fits.

    Args:
        x: all raw features (CPU).
        row: CSC row (source) indices of the graph: they give the out-degrees.
        budget: bytes of ``device`` memory the cached rows may take.
        device: where to keep them.

    Returns:
        The cache, or ``None`` when not one row fits.

    Example:
        >>> x = torch.arange(6.0).view(3, 2)
        >>> cache = build_feature_cache(x, torch.tensor([1, 1, 0]), 8, "cpu")
        >>> cache.values.tolist()
        [[2.0, 3.0]]
    """
    num_rows = min(budget // max(row_bytes(x), 1), x.size(0))
    if num_rows == 0:
        return None
    counts = out_degree(row, x.size(0))
    order = torch.sort(counts, descending=True, stable=True).indices
    return FeatureCache(x, order[:num_rows], device)


def gather_features(batch: Data, x: Tensor, feature_cache: FeatureCache | None) -> None:
    """Gathers the feature rows of ``batch`` that ``feature_cache`` lacks.

    Into page-locked buffers (under CUDA): ``batch.x`` without a cache, else
    ``x_cold`` (the rows not cached), their positions ``x_cold_index``, and
    the positions and slots of the cached rows, from which :func:`to_device`
    assembles ``x`` on the device.

    Example:
        >>> x = torch.arange(6.0).view(3, 2)
        >>> batch = Data(n_id=torch.tensor([2, 0]))
        >>> gather_features(batch, x, FeatureCache(x, torch.tensor([2]), "cpu"))
        >>> batch.x_cold.tolist(), batch.x_cold_index.tolist()
        ([[0.0, 1.0]], [1])
    """
    if feature_cache is None:
        batch.x = gather(x, batch.n_id)
        return
    cached_index, cached_slot, cold_index = feature_cache.split(batch.n_id)
    batch.x_cold = gather(x, batch.n_id[cold_index])
    batch.x_cold_index = cold_index
    batch.x_cached_index, batch.x_cached_slot = cached_index, cached_slot


def to_device(
    batch: Data,
    device: torch.device | str,
    hot_cache: HotCache | RelationCache | None,
    feature_cache: FeatureCache | None,
) -> Data:
    """Copies ``batch`` to ``device`` and completes it from the caches there.

    ``hot_agg`` comes from the device values of ``hot_cache`` where the batch
    holds ``hot_slot`` (each relation's, on a heterogeneous batch), and ``x``
    is assembled from ``x_cold`` and the rows of ``feature_cache`` where
    :func:`gather_features` split it.

    Example:
        >>> x = torch.arange(6.0).view(3, 2)
        >>> features = FeatureCache(x, torch.tensor([2]), "cpu")
        >>> batch = Data(n_id=torch.tensor([2, 0]))
        >>> gather_features(batch, x, features)
        >>> to_device(batch, "cpu", None, features).x.tolist()
        [[4.0, 5.0], [0.0, 1.0]]
    """
    batch = batch.to(device, non_blocking=True)
    if isinstance(hot_cache, RelationCache):
        hot_cache.to_device(batch)
    elif "hot_slot" in batch:
        batch.hot_agg = hot_cache.device_values()[batch.hot_slot]
        del batch.hot_slot
    if "x_cold" in batch:
        x = batch.x_cold.new_empty(batch.num_nodes, batch.x_cold.size(1))
        x[batch.x_cold_index] = batch.x_cold
        x[batch.x_cached_index] = feature_cache.values[batch.x_cached_slot]
        for key in ("x_cold_index", "x_cold", "x_cached_index", "x_cached_slot"):
            del batch[key]
        batch.x = x
    return batch
