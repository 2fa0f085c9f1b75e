"""What a loader exposes of its hot vertices, and the serving contract.

A model declares what the hot values are for (:meth:`HotServing.serve`); each
batch names the serving it was made for, so a model refuses values made for
another.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pyg_orch.hot.cache import (
    HotCache,
)
from pyg_orch.hot.choice import (
    HotRatio,
    HotSet,
)
from pyg_orch.hot.vertices import HotVertices


class HotServing:
    """What a loader with hot vertices exposes of them (a mixin).

    The loader sets ``self._hot_vertices``, its :class:`HotVertices`.

    Example:
        >>> from pyg_orch import OrchLinkNeighborLoader
        >>> from pyg_orch.datasets import load_cora
        >>> loader = OrchLinkNeighborLoader(load_cora(), [5], batch_size=64,
        ...                                 hot_ratio=0.1, hot_method="degree")
        >>> isinstance(loader, HotServing), loader.hot_ratio, loader.cache.num_hot
        (True, 0.1, 271)
    """

    _hot_vertices: HotVertices

    @property
    def hot(self) -> HotSet | None:
        """The hot vertices (:class:`~pyg_orch.hot.choice.HotSet`), or ``None``."""
        return self._hot_vertices.hot

    @property
    def cache(self) -> HotCache | None:
        """The hot vertices' :class:`~pyg_orch.HotCache`, or ``None``."""
        return self._hot_vertices.cache

    @property
    def hot_ratio(self) -> HotRatio:
        """The fraction of vertices made hot (``"auto"`` until it is chosen)."""
        return self._hot_vertices.ratio

    def serve(
        self, kind: str | dict[Any, str], snapshot: Callable[[], Any] | None = None
    ) -> int:
        """Declares what the batches' hot values are for (``OrchModel`` calls it).

        A hot loader yields no batch until it is served: a model that ignored
        ``hot_index`` and ``hot_agg`` would train on hot vertices whose last
        hop was never sampled. ``kind`` is the aggregation the consuming
        model's bottom layer applies to raw features (``"mean"``, ``"sum"``
        or ``"max"``), or ``"embedding"``: the hot rows hold the bottom
        layer's whole output, computed on the CPU from ``snapshot()``, a copy
        of the layer taken between optimizer steps. Each batch carries
        ``hot_kind`` and ``hot_version`` (the serving it was made for), so a
        model can refuse values made for another.

        Args:
            kind: one of :data:`~pyg_orch.hot.cache.AGGREGATIONS` or
                ``"embedding"``; on a heterogeneous graph, a dict of
                aggregations by relation into a type with hot nodes.
            snapshot: for ``"embedding"``: returns the current bottom layer.

        Returns:
            The serving's version.

        Raises:
            ValueError: no hot vertices, or an unknown ``kind``.
            NotImplementedError: ``kind`` does not fit an explicitly chosen
                ``cache`` mode.

        Example:
            >>> from pyg_orch.datasets import load_cora
            >>> from pyg_orch import OrchNeighborLoader
            >>> loader = OrchNeighborLoader(load_cora(), [5], batch_size=64,
            ...                             hot_ratio=0.1)
            >>> version = loader.serve("mean")
            >>> next(iter(loader)).hot_kind
            'mean'
        """
        return self._hot_vertices.serve(kind, snapshot)
