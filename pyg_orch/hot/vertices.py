"""A loader's hot vertices: their set, their cache, and what it serves.

:mod:`pyg_orch.hot.choice` holds how hot vertices are chosen; a loader's
:class:`HotVertices` is where they are chosen for it and kept: the
:class:`~pyg_orch.hot.choice.HotSet`, its :class:`~pyg_orch.HotCache`, the
serving a model declares (:meth:`HotVertices.serve`), the hot part of each
batch, the refreshes of re-sampled or embedded values, and the choice of
``hot_ratio="auto"``. The loader owns it; the sampler only reads its mask.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor
from torch_geometric.data import Data
from torch_geometric.sampler.base import SubgraphType

from pyg_orch.hot.cache import (
    AGGREGATIONS,
    HotCache,
    check_resampled,
    hot_row_bytes,
)
from pyg_orch.hot.choice import (
    HotRatio,
    HotSet,
    as_hot_set,
    check_hot_ratio,
    check_type_ratios,
    frontier_size,
    select_hot,
    top_by_type,
)
from pyg_orch.hot.refresher import (
    HotRefresher,
    check_saved_weights,
    refresh_seed,
)
from pyg_orch.hot.relation_cache import RelationCache
from pyg_orch.hot.tuning import (
    AUTO_RATIOS,
    AUTO_ROUNDS,
    HotRatioTuning,
    choose_hot_ratio,
    median_seconds,
)
from pyg_orch.sampling import OrchNeighborSampler

# Versions of serve, unique in the process: a batch's hot_version names the
# serving, whichever loader made it.
_SERVINGS = itertools.count(1)


class HotVertices:
    """The hot vertices of one loader, their cache, and what it serves.

    Args:
        sampler: the loader's sampler; :meth:`use` sets its ``hot_mask``, so
            that it does not expand hot vertices in the last hop.
        features: the loader's node features (``None`` without any); on a
            heterogeneous graph, a dict of them per node type.
        device: where the loader delivers batches (``None``: the CPU).
        ratio: the ``hot_ratio`` argument (a fraction, or ``"auto"``; on a
            heterogeneous graph also a dict of fractions per node type).
        mode: the ``cache`` argument: a cache mode, or ``None`` (static
            unless the model needs embedding mode).
        super_batch: batches served by one re-sampled or embedded buffer.
        num_neighbors: the loader's fan-outs.
        staleness: most training steps between the making of hot values and
            their use; ``None``: ``2 * super_batch - 1``.
        fanout: neighbours sampled per hot vertex by a refresh; ``None``:
            the largest of ``num_neighbors``.
        edge_weight: the graph's ``edge_weight``, which the ``weighted_``
            aggregations multiply the rows by (``None``: it has none).

    Attributes:
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
        >>> hot = HotVertices(OrchNeighborSampler(data, [5]), data.x, ratio=0.1,
        ...                   mode=None, super_batch=8, num_neighbors=[5])
        >>> hot.choose(None, "degree", torch.arange(64), 64, 1)
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
        device: torch.device | None = None,
        *,
        ratio: HotRatio,
        mode: str | None,
        super_batch: int,
        num_neighbors: Any,
        staleness: int | None = None,
        fanout: int | None = None,
        edge_weight: Tensor | None = None,
    ) -> None:
        self.sampler, self.features, self.device = sampler, features, device
        self.edge_weight = edge_weight
        self.ratio, self.mode = ratio, mode
        self.super_batch = super_batch
        self.staleness = 2 * super_batch - 1 if staleness is None else staleness
        self.fanout = _default_fanout(num_neighbors, fanout)
        self.hot: HotSet | None = None
        self.cache: HotCache | RelationCache | None = None
        self.tuning: HotRatioTuning | None = None
        self.version = 0
        self.device_bytes = 0
        # The scores hot_ratio="auto" chooses among the candidate ratios by.
        self._scores: HotSet | None = None

    def choose(
        self,
        hot: HotSet | Tensor | None,
        method: str,
        input_nodes: Any,
        batch_size: int,
        presample_epochs: int,
        input_type: str | None = None,
        neg_sampling: Any = None,
    ) -> None:
        """Chooses the hot set, or takes the given one, and builds its cache.

        On a heterogeneous graph, node ids (of ``hot`` and of the hot set)
        are numbered as the sampler's kernel numbers the nodes of all types
        (see :func:`~pyg_orch.hot.choice.presample_counts`).

        Args:
            hot: the ``hot`` argument: a hot set to use, or ``None``.
            method: ``"presample"`` or ``"degree"``.
            input_nodes: the training seeds (``presample`` samples them):
                nodes, or an :class:`~torch_geometric.sampler.EdgeSamplerInput`
                for link prediction.
            batch_size: seeds per batch for ``presample``.
            presample_epochs: epochs sampled by ``presample``.
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
            >>> hot = HotVertices(OrchNeighborSampler(data, [5]), data.x, ratio=0.0,
            ...                   mode=None, super_batch=8, num_neighbors=[5])
            >>> hot.choose(torch.tensor([3, 1]), "presample", torch.arange(8), 8, 1)
            >>> hot.hot.nodes.tolist(), hot.hot.method
            ([1, 3], 'given')
        """
        auto = self.ratio == "auto"
        if auto or hot is not None or _positive(self.ratio):
            self._check_support()
        if auto or (hot is None and _positive(self.ratio)):
            chosen = select_hot(
                self.sampler,
                input_nodes,
                max(AUTO_RATIOS) if auto else self.ratio,
                method,
                batch_size=batch_size,
                epochs=presample_epochs,
                # Deterministic under torch.manual_seed, and without drawing
                # from the global generator, so a hot ratio leaves the
                # shuffles and initialisations of a seeded run unchanged.
                seed=torch.initial_seed(),
                input_type=input_type,
                ranges=self._ranges(),
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

    def _check_support(self) -> None:
        sampler = self.sampler
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
        if self.features is None or (
            isinstance(self.features, dict) and not self.features
        ):
            raise ValueError(
                "hot vertices need node features data.x to aggregate; give the "
                "graph an x or set hot_ratio=0"
            )
        if sampler.is_hetero and self.mode not in (None, "static"):
            raise NotImplementedError(
                f"cache={self.mode!r} is not supported on heterogeneous graphs "
                f"yet: their hot values are static, exact full-neighbourhood "
                f"aggregates per relation. Leave cache unset (or 'static')"
            )

    def _ranges(self) -> dict[str, tuple[int, int]] | None:
        # On a heterogeneous graph, the node types that can be hot (those
        # with incoming relations, all of whose sources have features) and
        # the range of their ids in the kernel's numbering.
        sampler = self.sampler
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
            if node_type in incoming
            and all(src in self.features for src in incoming[node_type])
        }

    def check_ratio(self, ratio: Any, name: str) -> None:
        """Raises a :class:`ValueError` naming ``name`` unless ``ratio`` fits.

        A fraction, or on a heterogeneous graph also a dict of fractions by
        node type, naming only types that can be hot.

        Example:
            >>> HotVertices(None, None, ratio=0.0, mode=None, super_batch=8,
            ...             num_neighbors=[5]).check_ratio({"paper": 0.2}, "r")
            Traceback (most recent call last):
            ...
            ValueError: r is a dict of fractions per node type, which fits a heterogeneous graph only: give one fraction
        """  # noqa: E501 - a doctest's output is one line
        ranges = self._ranges() if self.sampler is not None else None
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
            >>> hot = HotVertices(sampler, data.x, ratio=0.0, mode=None,
            ...                   super_batch=8, num_neighbors=[5])
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
            self.cache = _relation_cache(sampler, self.features, hot.nodes)
            sampler.hot_mask = self.cache.mask
            return
        self.cache = HotCache(
            sampler.colptr, sampler.row, self.features, hot.nodes,
            edge_weight=self.edge_weight, edge_perm=sampler.perm,
        )  # fmt: skip
        self.cache.mode = self.mode or "static"
        self.cache.mode_chosen = self.mode is not None
        if 0 < hot.nodes.numel() * hot_row_bytes(self.features) <= self.device_bytes:
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
            ...                   torch.device("cpu"), ratio=0.1, mode=None,
            ...                   super_batch=8, num_neighbors=[5])
            >>> hot.choose(None, "degree", torch.arange(64), 64, 1)
            >>> reserved = hot.reserve_device(10**9)  # bytes of 271 rows of 1433
            >>> reserved == 271 * 1433 * 4, hot.cache.device
            (True, device(type='cpu'))
        """
        if self.mode not in (None, "static") or not isinstance(self.features, Tensor):
            return 0  # (heterogeneous hot values stay on the CPU)
        if self.ratio == "auto":
            rows = round(max(AUTO_RATIOS) * self.features.size(0))
        else:
            rows = self.cache.num_hot if self.cache is not None else 0
        size = rows * hot_row_bytes(self.features)
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
            >>> hot = HotVertices(None, None, ratio=0.0, mode=None, super_batch=8,
            ...                   num_neighbors=[5])
            >>> hot.serve("mean")
            Traceback (most recent call last):
            ...
            ValueError: this loader has no hot vertices (hot_ratio=0 and no hot set): there are no hot values to serve
        """  # noqa: E501 - a doctest's output is one line
        self._apply_serving(kind, snapshot)
        self.version = next(_SERVINGS)
        return self.version

    def _apply_serving(self, kind: Any, snapshot: Callable[[], Any] | None) -> None:
        # Sets the cache up for `kind`; the version is serve's to give.
        cache = self.cache
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
            self._serve_embedding(cache, snapshot)
        else:
            self._serve_aggregation(cache, kind)

    @staticmethod
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

    @staticmethod
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

    @property
    def served(self) -> tuple[str | None, int] | None:
        """The kind and version served, as batches carry them (``None``: no cache)."""
        return None if self.cache is None else (self.cache.kind, self.version)

    @property
    def dynamic(self) -> bool:
        """Whether the hot values are re-made during an epoch (a refresher runs)."""
        return self.cache is not None and self.cache.mode != "static"

    def check_ready(self) -> None:
        """Raises a :class:`RuntimeError` unless batches can be drawn.

        Example:
            >>> HotVertices(None, None, ratio="auto", mode=None, super_batch=8,
            ...             num_neighbors=[5]).check_ready()
            Traceback (most recent call last):
            ...
            RuntimeError: hot_ratio='auto' is chosen from measurements of the model: wrap it with OrchModel(model, loader) before iterating
        """  # noqa: E501 - a doctest's output is one line
        if self.ratio == "auto":
            raise RuntimeError(
                "hot_ratio='auto' is chosen from measurements of the model: wrap "
                "it with OrchModel(model, loader) before iterating"
            )
        if self.cache is not None and self.cache.kind is None:
            raise RuntimeError(
                "this loader has hot vertices, whose last hop is not sampled: "
                "their bottom-layer input is in batch.hot_agg, which only "
                "OrchModel uses. Wrap the model with OrchModel(model, loader) "
                "before iterating, or set hot_ratio=0 for a plain NeighborLoader"
            )

    def annotate(self, batch: Data) -> None:
        """Adds the hot part to a filtered batch: ``hot_index`` and its values.

        The values are ``hot_agg`` where the static values are on the CPU;
        otherwise ``hot_slot``, their rows in the refresher's buffer for the
        batch or on the device. ``hot_kind`` and ``hot_version`` name the
        serving. Nothing without hot vertices.

        Example:
            >>> from pyg_orch import OrchNeighborSampler
            >>> from pyg_orch.datasets import load_cora
            >>> data = load_cora()
            >>> hot = HotVertices(OrchNeighborSampler(data, [5]), data.x, ratio=0.0,
            ...                   mode=None, super_batch=8, num_neighbors=[5])
            >>> hot.use(HotSet(torch.tensor([7]), torch.zeros(0), "given"))
            >>> version = hot.serve("sum")
            >>> batch = Data(n_id=torch.tensor([3, 7, 9]), num_sampled_nodes=[2, 1])
            >>> hot.annotate(batch)
            >>> batch.hot_index.tolist(), batch.hot_agg.shape, batch.hot_kind
            ([1], torch.Size([1, 1433]), 'sum')
        """
        cache = self.cache
        if cache is None:
            return
        if isinstance(cache, RelationCache):
            cache.annotate(batch)
            batch.hot_kind, batch.hot_version = "relations", self.version
            return
        frontier = batch.n_id[: frontier_size(batch.num_sampled_nodes)]
        if cache.mode == "static" and cache.device is None:
            batch.hot_index, batch.hot_agg = cache.lookup(frontier)
        else:
            # The values come from the refresher's buffer for this batch,
            # or from the device (see cache.to_device).
            batch.hot_index, batch.hot_slot = self._find(batch, frontier)
        batch.hot_kind, batch.hot_version = cache.kind, self.version

    def _find(self, batch: Data, frontier: Tensor) -> tuple[Tensor, Tensor]:
        if self.cache.mode != "embedding":
            return self.cache.find(frontier)
        # An embedding is a constant, so its row gets no gradient: only the
        # hot nodes the last hop did not expand take one. The others have
        # their sampled neighbours and are computed, with gradients, on the
        # device.
        start = frontier_size(batch.num_sampled_nodes[:-1])
        hot_index, hot_slot = self.cache.find(frontier[start:])
        return hot_index + start, hot_slot

    def refresher(
        self, base_seed: int, start: int, started: dict[int, tuple[int, Any]]
    ) -> HotRefresher | None:
        """The refresher of an epoch's hot values (``None`` for static ones).

        Args:
            base_seed: the epoch's refresh seed.
            start: the first batch of the epoch to produce.
            started: the epoch's hot buffers started and still needed
                (see :class:`~pyg_orch.loading.epoch.EpochPlan`), kept up to date.

        Raises:
            RuntimeError: embedding mode before a model serves the loader.
            ValueError: saved weights that do not fit the served layer.

        Example:
            >>> from pyg_orch import OrchNeighborSampler
            >>> from pyg_orch.datasets import load_cora
            >>> data = load_cora()
            >>> hot = HotVertices(OrchNeighborSampler(data, [5]), data.x, ratio=0.0,
            ...                   mode="resample", super_batch=2, num_neighbors=[5])
            >>> hot.use(HotSet(torch.tensor([7]), torch.zeros(0), "given"))
            >>> version = hot.serve("mean")
            >>> refresher = hot.refresher(base_seed=0, start=0, started={})
            >>> refresher.on_step(0)
            >>> refresher.values(0).values.shape
            torch.Size([1, 1433])
            >>> refresher.close()
        """
        cache = self.cache
        if cache is None or cache.mode == "static":
            return None
        fanout, kind = self.fanout, cache.kind
        if cache.mode == "resample":
            snapshot = None

            def compute(version: int, _: Any) -> Tensor:
                seed = refresh_seed(base_seed, version)
                return cache.resample(fanout, seed, kind=kind)

        else:
            if cache.snapshot is None:
                raise RuntimeError(
                    "cache='embedding' needs the model: wrap it with "
                    "OrchModel(model, loader) before iterating"
                )
            # The refresher's payloads are the layer's weights, not layers, so
            # that a checkpoint can save those of the buffers started. One
            # layer computes them all, in the refresher thread.
            layer = cache.snapshot()
            check_saved_weights(layer, started)

            def snapshot() -> dict[str, Tensor]:
                return cache.snapshot().state_dict()

            def compute(version: int, weights: dict[str, Tensor]) -> Tensor:
                layer.load_state_dict(weights)
                return cache.embed(layer, fanout, refresh_seed(base_seed, version))

        return HotRefresher(
            compute,
            self.super_batch,
            self.staleness,
            snapshot,
            seed=base_seed,
            first_version=start // self.super_batch,
            started=started,
        )

    def refresh_once(self) -> tuple[float, Tensor | None]:
        """One hot refresh, timed: seconds per batch of its super-batch, values.

        ``(0.0, None)`` for static values, which are never refreshed.

        Example:
            >>> HotVertices(None, None, ratio=0.0, mode=None, super_batch=8,
            ...             num_neighbors=[5]).refresh_once()
            (0.0, None)
        """
        cache = self.cache
        if cache is None or cache.mode == "static":
            return 0.0, None
        tick = time.perf_counter()
        if cache.mode == "resample":
            values = cache.resample(self.fanout, 0)
        else:
            values = cache.embed(cache.snapshot(), self.fanout, 0)
        return (time.perf_counter() - tick) / self.super_batch, values

    def tune(
        self,
        serve: Callable[[], Any],
        measure: Callable[[int], tuple[float, float]],
        ratios: tuple[float, ...],
        batches: int,
        overlap: bool,
    ) -> HotRatioTuning:
        """Chooses ``hot_ratio="auto"`` from measurements at each candidate.

        See :meth:`~pyg_orch.OrchNeighborLoader.tune_hot_ratio`.

        Args:
            serve: prepares the cache for the model.
            measure: ``measure(batches)``: median CPU and device seconds per
                batch over ``batches`` batches, at the current hot set.
            ratios: the candidates.
            batches: timed batches per candidate.
            overlap: whether CPU and device work run at once (a pipeline).

        Returns:
            The measurements and the choice, also kept in :attr:`tuning`.

        Example:
            >>> from pyg_orch import OrchNeighborSampler
            >>> from pyg_orch.datasets import load_cora
            >>> data = load_cora()
            >>> hot = HotVertices(OrchNeighborSampler(data, [5]), data.x,
            ...                   ratio="auto", mode=None, super_batch=8,
            ...                   num_neighbors=[5])
            >>> hot.choose(None, "degree", torch.arange(64), 64, 1)
            >>> def measure(batches):  # CPU time falls with the hot set
            ...     num_hot = hot.cache.num_hot if hot.cache else 0
            ...     return 1.0 - num_hot / 2708, 0.9
            >>> hot.tune(lambda: hot.serve("mean"), measure, (0.0, 0.1, 0.2),
            ...          batches=1, overlap=True).chosen
            0.1
        """
        # A discarded round first: one-off costs (kernel compilation, lazy
        # initialisation, allocator growth) would otherwise land on the first.
        measure(1)
        # Rounds visit every candidate in turn, so that a slow spell of a
        # shared machine spreads over all of them; medians over rounds.
        rounds: list[list[tuple[float, float]]] = [[] for _ in ratios]
        for _ in range(AUTO_ROUNDS):
            for measured, ratio in zip(rounds, ratios, strict=True):
                self.use(self._top(ratio))
                if self.cache is not None:
                    serve()
                measured.append(measure(batches))
        cpu = [median_seconds([c for c, _ in measured]) for measured in rounds]
        device = [median_seconds([d for _, d in measured]) for measured in rounds]
        chosen = choose_hot_ratio(list(ratios), cpu, device, overlap)
        self.use(self._top(chosen))
        if self.cache is not None:
            serve()
        self.ratio = chosen
        self.tuning = HotRatioTuning(list(ratios), cpu, device, overlap, chosen)
        return self.tuning

    def _top(self, ratio: float) -> HotSet | None:
        if ratio == 0:
            return None
        scores = self._scores.counts
        nodes = top_by_type(scores, ratio, self._ranges())
        return HotSet(nodes, scores, self._scores.method)

    def state(self) -> dict[str, Any]:
        """The hot part of a loader's checkpoint: ratio, hot set, cache values.

        Raises:
            RuntimeError: ``hot_ratio="auto"`` is not chosen yet.

        Example:
            >>> HotVertices(None, None, ratio=0.0, mode=None, super_batch=8,
            ...             num_neighbors=[5]).state()
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

    def restore(self, state: dict[str, Any]) -> None:
        """Takes the hot set and cache values of a checked :meth:`state`.

        A model serving the loader goes on serving the restored cache.

        Example:
            >>> from pyg_orch import OrchNeighborSampler
            >>> from pyg_orch.datasets import load_cora
            >>> data = load_cora()
            >>> hot = HotVertices(OrchNeighborSampler(data, [5]), data.x, ratio=0.1,
            ...                   mode=None, super_batch=8, num_neighbors=[5])
            >>> hot.choose(None, "degree", torch.arange(64), 64, 1)
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
                self._apply_serving(*served)


def _positive(ratio: HotRatio) -> bool:
    # Whether hot_ratio asks for hot vertices (other than "auto").
    if isinstance(ratio, dict):
        return any(value > 0 for value in ratio.values())
    return ratio != "auto" and ratio > 0


def _relation_cache(
    sampler: OrchNeighborSampler, features: dict[str, Tensor], hot_nodes: Tensor
) -> RelationCache:
    layout = sampler.layout
    relations = {
        edge_type: (
            sampler.colptr_dict[sampler.to_rel_type[edge_type]],
            sampler.row_dict[sampler.to_rel_type[edge_type]],
        )
        for edge_type in layout.edge_types
    }
    offsets = torch.from_numpy(layout.graph[6])
    return RelationCache(layout.node_types, offsets, relations, features, hot_nodes)


def _default_fanout(num_neighbors: Any, fanout: int | None) -> int:
    # Checked by check_hot_fanout; None means the largest fan-out.
    if fanout is not None:
        return fanout
    if isinstance(num_neighbors, dict):
        return -1  # per-edge-type fan-outs: hot vertices need a homogeneous graph
    fanouts = list(getattr(num_neighbors, "values", num_neighbors))
    return -1 if -1 in fanouts else max(max(fanouts, default=1), 1)
