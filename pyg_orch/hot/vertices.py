"""A loader's hot vertices: their set, their cache, and what it serves.

:mod:`pyg_orch.hot.choice` holds how hot vertices are chosen; a loader's
:class:`HotVertices` is where they are chosen for it and kept: the
:class:`~pyg_orch.hot.choice.HotSet`, its :class:`~pyg_orch.HotCache`, the
serving a model declares (:meth:`HotVertices.serve`), the hot part of each
batch, the refreshes of re-sampled or embedded values, and the choice of
``hot_ratio="auto"``. The loader owns it; the sampler only reads its mask.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor
from torch_geometric.data import Data
from torch_geometric.sampler.base import SubgraphType

from pyg_orch.checks import checkpoint_key
from pyg_orch.hot.cache import (
    HotCache,
    hot_row_bytes,
)
from pyg_orch.hot.choice import (
    HotRatio,
    HotSet,
    as_hot_set,
    check_hot_ratio,
    check_type_ratios,
    select_hot,
    top_by_type,
)
from pyg_orch.hot.options import HotOptions
from pyg_orch.hot.refresher import HotRefresher, cache_refresher, refresh_once
from pyg_orch.hot.relation_cache import RelationCache
from pyg_orch.hot.serving import (
    annotate_batch,
    apply_serving,
    check_served,
    next_version,
    served_kind,
)
from pyg_orch.hot.state import check_hot_state
from pyg_orch.hot.tuning import (
    AUTO_RATIOS,
    HotRatioTuning,
    tune_ratio,
)
from pyg_orch.sampling import OrchNeighborSampler


class HotVertices:
    """The hot vertices of one loader, their cache, and what it serves.

    Args:
        sampler: the loader's sampler; :meth:`use` sets its ``hot_mask``, so
            that it does not expand hot vertices in the last hop.
        features: the loader's node features (``None`` without any); on a
            heterogeneous graph, a dict of them per node type.
        device: where the loader delivers batches (``None``: the CPU).
        options: the loader's hot settings.
        num_neighbors: the loader's fan-outs.
        edge_weight: the graph's ``edge_weight``, which the ``weighted_``
            aggregations multiply the rows by (``None``: it has none); on a
            heterogeneous graph, a dict of them per edge type.

    Attributes:
        options: the hot settings.
        mode: the ``cache`` setting (``None``: static unless the model needs
            embedding mode).
        super_batch: batches served by one re-sampled or embedded buffer.
        staleness: the staleness bound.
        fanout: neighbours sampled per hot vertex by a refresh.
        ratio: the hot ratio; ``"auto"`` until :meth:`tune` chooses it.
        hot: the :class:`~pyg_orch.hot.choice.HotSet`, or ``None``.
        cache: its :class:`~pyg_orch.HotCache`, or ``None``.
        tuning: what ``hot_ratio="auto"`` measured, once :meth:`tune` ran.
        version: the version of the latest :meth:`serve` (0 before).
        device_bytes: device memory reserved for the static hot values.

    Example:
        >>> from pyg_orch import OrchNeighborSampler
        >>> from pyg_orch.datasets import load_cora
        >>> data = load_cora()
        >>> options = HotOptions(0.1, "degree")
        >>> hot = HotVertices(OrchNeighborSampler(data, [5]), data.x, None,
        ...                   options, [5])
        >>> hot.choose(torch.arange(64), 64)
        >>> hot.cache.num_hot, hot.staleness, hot.fanout
        (271, 15, 5)
        >>> version = hot.serve("mean")
        >>> hot.served == ("mean", version)
        True
    """

    def __init__(
        self,
        sampler: Any,
        features: Tensor | dict[str, Tensor] | None,
        device: torch.device | None,
        options: HotOptions,
        num_neighbors: Any,
        edge_weight: Tensor | dict[Any, Tensor] | None = None,
    ) -> None:
        self.sampler, self.features, self.device = sampler, features, device
        self.edge_weight = edge_weight
        self.options = options
        self.ratio, self.mode = options.hot_ratio, options.cache
        self.super_batch = options.super_batch
        self.staleness = options.staleness_bound
        self.fanout = options.fanout(num_neighbors)
        self.hot: HotSet | None = None
        self.cache: HotCache | RelationCache | None = None
        self.tuning: HotRatioTuning | None = None
        self.version = 0
        self.device_bytes = 0
        # The scores hot_ratio="auto" chooses among the candidate ratios by.
        self._scores: HotSet | None = None

    def choose(
        self,
        input_nodes: Any,
        batch_size: int,
        input_type: str | None = None,
        neg_sampling: Any = None,
    ) -> None:
        """Chooses the hot set, or takes the given one, and builds its cache.

        On a heterogeneous graph, node ids (of ``hot`` and of the hot set)
        are numbered as the sampler's kernel numbers the nodes of all types
        (see :func:`~pyg_orch.hot.choice.presample_counts`).

        The hot set is ``options.hot`` if given, else chosen by
        ``options.hot_method`` (``presample`` samples ``presample_epochs``
        epochs of the seeds).

        Args:
            input_nodes: the training seeds (``presample`` samples them):
                nodes, or an :class:`~torch_geometric.sampler.EdgeSamplerInput`
                for link prediction.
            batch_size: seeds per batch for ``presample``.
            input_type: the seeds' node type on a heterogeneous graph.
            neg_sampling: the negatives sampled with seed edges.

        Raises:
            NotImplementedError: the sampler cannot leave hot vertices out.
            ValueError: no features to aggregate, a ``cache`` mode without
                hot vertices, or a ``hot`` set of another graph.

        Example:
            >>> from pyg_orch import OrchNeighborSampler
            >>> from pyg_orch.datasets import load_cora
            >>> data = load_cora()
            >>> options = HotOptions(hot=torch.tensor([3, 1]))
            >>> hot = HotVertices(OrchNeighborSampler(data, [5]), data.x, None,
            ...                   options, [5])
            >>> hot.choose(torch.arange(8), 8)
            >>> hot.hot.nodes.tolist(), hot.hot.method
            ([1, 3], 'given')
        """
        hot, auto = self.options.hot, self.ratio == "auto"
        if auto or hot is not None or _positive(self.ratio):
            check_support(self.sampler, self.features)
        if auto or (hot is None and _positive(self.ratio)):
            chosen = select_hot(
                self.sampler,
                input_nodes,
                max(AUTO_RATIOS) if auto else self.ratio,
                self.options.hot_method,
                batch_size=batch_size,
                epochs=self.options.presample_epochs,
                # Deterministic under torch.manual_seed, and without drawing
                # from the global generator, so a hot ratio leaves the
                # shuffles and initialisations of a seeded run unchanged.
                seed=torch.initial_seed(),
                input_type=input_type,
                ranges=_type_ranges(self.sampler, self.features),
                neg_sampling=neg_sampling,
            )
            if auto:
                # Scored now; the ratio is chosen when OrchModel wraps the model.
                self._scores = chosen
            else:
                self.use(chosen)
        elif hot is not None:
            self.use(as_hot_set(hot, self.sampler.layout.num_nodes))
        elif self.mode not in (None, "static"):
            raise ValueError(
                f"cache={self.mode!r} needs hot vertices: set hot_ratio > 0 or hot"
            )

    def check_ratio(self, ratio: Any, name: str) -> None:
        """Raises a :class:`ValueError` naming ``name`` unless ``ratio`` fits.

        A fraction, or on a heterogeneous graph also a dict of fractions by
        node type, naming only types that can be hot.

        Example:
            >>> hot = HotVertices(None, None, None, HotOptions(), [5])
            >>> hot.check_ratio({"paper": 0.2}, "r")
            Traceback (most recent call last):
            ...
            ValueError: r is a dict of fractions per node type, which fits a heterogeneous graph only: give one fraction
        """  # noqa: E501 - a doctest's output is one line
        ranges = (
            _type_ranges(self.sampler, self.features)
            if self.sampler is not None
            else None
        )
        if ranges is not None:
            check_type_ratios(ratio, list(ranges), name)
        elif isinstance(ratio, dict):
            raise ValueError(
                f"{name} is a dict of fractions per node type, which fits a "
                f"heterogeneous graph only: give one fraction"
            )
        else:
            check_hot_ratio(ratio, name=name)

    def use(self, hot: HotSet | None) -> None:
        """Builds the hot cache for ``hot`` (none for ``None``), tells the sampler.

        Example:
            >>> from pyg_orch import OrchNeighborSampler
            >>> from pyg_orch.datasets import load_cora
            >>> data = load_cora()
            >>> sampler = OrchNeighborSampler(data, [5])
            >>> hot = HotVertices(sampler, data.x, None, HotOptions(), [5])
            >>> hot.use(HotSet(torch.tensor([0]), torch.zeros(0), "given"))
            >>> int(sampler.hot_mask.sum()), hot.cache.mode
            (1, 'static')
        """
        self.hot = hot
        if hot is None:
            self.cache, self.sampler.hot_mask = None, None
            return
        sampler = self.sampler
        if sampler.is_hetero:
            self.cache = _relation_cache(
                sampler, self.features, hot.nodes, self.edge_weight or {}
            )
        else:
            self.cache = HotCache(
                sampler.colptr, sampler.row, self.features, hot.nodes,
                edge_weight=self.edge_weight, edge_perm=sampler.perm,
            )  # fmt: skip
        self.cache.mode = self.mode or "static"
        self.cache.mode_chosen = self.mode is not None
        if 0 < self.cache.value_bytes() <= self.device_bytes:
            self.cache.device = self.device
        sampler.hot_mask = self.cache.mask

    def reserve_device(self, budget: int) -> int:
        """Puts the static hot values on the device if they fit in ``budget``.

        Then a batch's hot rows are gathered there, not copied. For
        ``hot_ratio="auto"`` it reserves room for the largest candidate.

        Returns:
            The bytes reserved.

        Example:
            >>> from pyg_orch import OrchNeighborSampler
            >>> from pyg_orch.datasets import load_cora
            >>> data = load_cora()
            >>> hot = HotVertices(OrchNeighborSampler(data, [5]), data.x,
            ...                   torch.device("cpu"), HotOptions(0.1, "degree"), [5])
            >>> hot.choose(torch.arange(64), 64)
            >>> reserved = hot.reserve_device(10**9)  # bytes of 271 rows of 1433
            >>> reserved == 271 * 1433 * 4, hot.cache.device
            (True, device(type='cpu'))
        """
        if self.mode not in (None, "static") or self.features is None:
            return 0
        if self.ratio != "auto":
            size = self.cache.value_bytes() if self.cache is not None else 0
        elif isinstance(self.features, Tensor):
            rows = round(max(AUTO_RATIOS) * self.features.size(0))
            size = rows * hot_row_bytes(self.features)
        else:
            return 0  # (a heterogeneous "auto" ratio reserves nothing)
        if size == 0 or size > budget:
            return 0
        self.device_bytes = size
        if self.cache is not None:
            self.cache.device = self.device
        return size

    def serve(
        self, kind: str | dict[Any, str], snapshot: Callable[[], Any] | None = None
    ) -> int:
        """Sets the cache up for ``kind``; what ``loader.serve`` does.

        On a heterogeneous graph ``kind`` is a dict: the aggregation of each
        relation into a type with hot nodes.

        See :meth:`~pyg_orch.OrchNeighborLoader.serve`.

        Returns:
            The serving's version, unique in the process.

        Example:
            >>> hot = HotVertices(None, None, None, HotOptions(), [5])
            >>> hot.serve("mean")
            Traceback (most recent call last):
            ...
            ValueError: this loader has no hot vertices (hot_ratio=0 and no hot set): there are no hot values to serve
        """  # noqa: E501 - a doctest's output is one line
        apply_serving(self.cache, kind, snapshot)
        self.version = next_version()
        return self.version

    @property
    def served(self) -> tuple[str | None, int] | None:
        """The kind and version served, as batches carry them (``None``: no cache)."""
        return None if self.cache is None else (served_kind(self.cache), self.version)

    @property
    def dynamic(self) -> bool:
        """Whether the hot values are re-made during an epoch (a refresher runs)."""
        return self.cache is not None and self.cache.mode != "static"

    def check_ready(self) -> None:
        """Raises a :class:`RuntimeError` unless batches can be drawn."""
        check_served(self.cache, self.ratio)

    def annotate(self, batch: Data) -> None:
        """Adds the hot part to a filtered batch (see :func:`.annotate_batch`)."""
        annotate_batch(self.cache, self.version, batch)

    def refresher(
        self, base_seed: int, start: int, started: dict[int, tuple[int, Any]]
    ) -> HotRefresher | None:
        """An epoch's refresher (see :func:`.cache_refresher`)."""
        return cache_refresher(
            self.cache, self.fanout, self.super_batch, self.staleness,
            base_seed, start, started,
        )  # fmt: skip

    def refresh_once(self) -> tuple[float, Tensor | None]:
        """One hot refresh, timed (see :func:`~pyg_orch.hot.refresher.refresh_once`).

        Example:
            >>> HotVertices(None, None, None, HotOptions(), [5]).refresh_once()
            (0.0, None)
        """
        return refresh_once(self.cache, self.fanout, self.super_batch)

    def tune(
        self,
        serve: Callable[[], Any],
        measure: Callable[[int], tuple[float, float]],
        ratios: tuple[float, ...],
        batches: int,
        overlap: bool,
    ) -> HotRatioTuning:
        """Chooses ``hot_ratio="auto"``, kept in :attr:`tuning` (:func:`.tune_ratio`).

        Args:
            serve: prepares the cache for the model.
            measure: ``measure(batches)``: median CPU and device seconds per
                batch over ``batches`` batches, at the current hot set.
            ratios: the candidates.
            batches: timed batches per candidate.
            overlap: whether CPU and device work run at once (a pipeline).
        """

        def use(ratio: float) -> None:
            self.use(self._top(ratio))
            if self.cache is not None:
                serve()

        self.tuning = tune_ratio(use, measure, ratios, batches, overlap)
        self.ratio = self.tuning.chosen
        return self.tuning

    def _top(self, ratio: float) -> HotSet | None:
        if ratio == 0:
            return None
        scores = self._scores.counts
        nodes = top_by_type(scores, ratio, _type_ranges(self.sampler, self.features))
        return HotSet(nodes, scores, self._scores.method)

    def state(self) -> dict[str, Any]:
        """The hot part of a loader's checkpoint: ratio, hot set, cache values.

        Raises:
            RuntimeError: ``hot_ratio="auto"`` is not chosen yet.

        Example:
            >>> HotVertices(None, None, None, HotOptions(), [5]).state()
            {'hot_ratio': 0.0, 'hot_nodes': None, 'hot_counts': None, 'hot_method': None, 'cache_mode': None, 'cache_values': {}}
        """  # noqa: E501 - a doctest's output is one line
        if self.ratio == "auto":
            raise RuntimeError(
                "hot_ratio='auto' is chosen when OrchModel(model, loader) wraps "
                "the model: wrap it before state_dict()"
            )
        cache, hot = self.cache, self.hot
        return {
            "hot_ratio": self.ratio,
            "hot_nodes": hot.nodes if hot is not None else None,
            "hot_counts": hot.counts if hot is not None else None,
            "hot_method": hot.method if hot is not None else None,
            "cache_mode": cache.mode if cache is not None else None,
            "cache_values": cache.computed() if cache is not None else {},
        }

    def check_state(self, state: dict[str, Any], num_nodes: int) -> None:
        """Raises a :class:`ValueError` naming the key unless the hot part fits.

        The saved ``hot_ratio`` in every form the constructor takes (a
        fraction, or a dict by node type), then the hot set and cache values
        (:func:`~pyg_orch.hot.state.check_hot_state`). Changes nothing.
        """
        self.check_ratio(state["hot_ratio"], checkpoint_key("hot_ratio"))
        check_hot_state(state, num_nodes, self.features, self.mode)

    def restore(self, state: dict[str, Any]) -> None:
        """Takes the hot set and cache values of a checked :meth:`state`.

        A model serving the loader goes on serving the restored cache.

        Example:
            >>> from pyg_orch import OrchNeighborSampler
            >>> from pyg_orch.datasets import load_cora
            >>> data = load_cora()
            >>> hot = HotVertices(OrchNeighborSampler(data, [5]), data.x, None,
            ...                   HotOptions(0.1, "degree"), [5])
            >>> hot.choose(torch.arange(64), 64)
            >>> state = hot.state()
            >>> hot.restore({**state, "hot_nodes": state["hot_nodes"][:3]})
            >>> hot.hot.nodes.numel(), hot.cache.num_hot
            (3, 3)
        """
        cache = self.cache
        served = None if cache is None else (cache.kind, cache.snapshot)
        self.ratio = state["hot_ratio"]
        nodes, counts = state["hot_nodes"], state["hot_counts"]
        self.use(None if nodes is None else HotSet(nodes, counts, state["hot_method"]))
        if self.cache is not None:
            self.cache.mode = state["cache_mode"]
            self.cache.restore(state["cache_values"])
            if served is not None and served[0] is not None:
                # The model serving the loader goes on serving the restored
                # cache, as the same serving (version): it checks batches
                # against it.
                apply_serving(self.cache, *served)


def _positive(ratio: HotRatio) -> bool:
    # Whether hot_ratio asks for hot vertices (other than "auto").
    if isinstance(ratio, dict):
        return any(value > 0 for value in ratio.values())
    return ratio != "auto" and ratio > 0


def _relation_cache(
    sampler: OrchNeighborSampler,
    features: dict[str, Tensor],
    hot_nodes: Tensor,
    edge_weight: dict[Any, Tensor],
) -> RelationCache:
    layout = sampler.layout
    relations = {
        edge_type: (
            sampler.colptr_dict[sampler.to_rel_type[edge_type]],
            sampler.row_dict[sampler.to_rel_type[edge_type]],
        )
        for edge_type in layout.edge_types
    }
    # Each relation's edge_weight in the order of the graph's edges, and the
    # CSC permutation that puts it in the order of its row.
    weights = {
        edge_type: (weight, (sampler.perm or {}).get(edge_type))
        for edge_type, weight in edge_weight.items()
    }
    offsets = torch.from_numpy(layout.graph[6])
    return RelationCache(
        layout.node_types, offsets, relations, features, hot_nodes, weights
    )


def check_support(sampler: Any, features: Any) -> None:
    """Raises unless ``sampler`` and ``features`` can have hot vertices.

    Example:
        >>> check_support(None, None)
        Traceback (most recent call last):
        ...
        NotImplementedError: hot vertices need OrchNeighborLoader's own Numba sampler, not a neighbor_sampler of your own; drop it or set hot_ratio=0
    """  # noqa: E501 - a doctest's output is one line
    if not isinstance(sampler, OrchNeighborSampler):
        raise NotImplementedError(
            "hot vertices need OrchNeighborLoader's own Numba sampler, not "
            "a neighbor_sampler of your own; drop it or set hot_ratio=0"
        )
    # A hot vertex's cached input is its whole neighbourhood, averaged
    # uniformly and at no time: what these options sample differs.
    unsupported = {
        "subgraph_type other than 'directional'": (
            sampler.subgraph_type != SubgraphType.directional
        ),
        "disjoint=True": sampler.disjoint and not sampler.is_temporal,
        "time_attr (temporal sampling)": sampler.is_temporal,
        "weight_attr (weighted sampling)": sampler.edge_weight is not None,
    }
    for option, used in unsupported.items():
        if used:
            raise NotImplementedError(
                f"hot vertices do not support {option}: their cached "
                f"bottom-layer input is the uniform aggregation of the "
                f"whole neighbourhood. Drop the option or set hot_ratio=0."
            )
    if features is None or (isinstance(features, dict) and not features):
        raise ValueError(
            "hot vertices need node features data.x to aggregate; give the "
            "graph an x or set hot_ratio=0"
        )


def _type_ranges(sampler: Any, features: Any) -> dict[str, tuple[int, int]] | None:
    # On a heterogeneous graph, the node types that can be hot (those
    # with incoming relations, all of whose sources have features) and
    # the range of their ids in the kernel's numbering.
    if not sampler.is_hetero:
        return None
    layout = sampler.layout
    offsets = layout.graph[6].tolist()
    incoming: dict[str, list[str]] = {}
    for src, _, dst in layout.edge_types:
        incoming.setdefault(dst, []).append(src)
    return {
        node_type: (offsets[k], offsets[k + 1])
        for k, node_type in enumerate(layout.node_types)
        if node_type in incoming and all(src in features for src in incoming[node_type])
    }
