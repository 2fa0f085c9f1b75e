"""``OrchNeighborLoader``: PyG's ``NeighborLoader`` with a hot/cold split."""

from __future__ import annotations

import copy
import functools
import itertools
import time
import weakref
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor
from torch_geometric.data import Data
from torch_geometric.loader import NeighborLoader
from torch_geometric.sampler.base import SubgraphType

from pyg_orch.cache import AGGREGATIONS, FeatureCache, HotCache, gather
from pyg_orch.checkpoint import check_saved_weights, check_state, loader_identity
from pyg_orch.hotness import (
    AUTO_RATIOS,
    HotRatioTuning,
    HotSet,
    choose_hot_ratio,
    frontier_size,
    median_seconds,
    out_degree,
    select_hot,
    top_fraction,
)
from pyg_orch.pipeline import (
    HotRefresher,
    Pipeline,
    PipelineStats,
    refresh_seed,
)
from pyg_orch.sampling import OrchNeighborSampler, drawing_from
from pyg_orch.validation import check_loader_arguments, feature_tensor

# Share of free GPU memory a device_cache="auto" takes; the rest is left to
# training (activations, gradients, the allocator's slack).
_AUTO_DEVICE_SHARE = 0.5


@dataclass
class BatchStats:
    """What one mini-batch cost the CPU side.

    Attributes:
        nodes_per_hop: sampled nodes per hop (seeds first).
        edges_per_hop: sampled edges per hop.
        num_hot: hot frontier nodes served from the cache.
        bytes_gathered: bytes of features and hot aggregates copied.
        sample_seconds: time spent sampling.
        gather_seconds: time spent gathering features and aggregates.

    Example:
        >>> BatchStats([2, 4], [4], 1, 64, 0.5, 0.25).num_hot
        1
    """

    nodes_per_hop: list[int]
    edges_per_hop: list[int]
    num_hot: int
    bytes_gathered: int
    sample_seconds: float
    gather_seconds: float


@dataclass
class EpochPlan:
    """What decides an epoch's batches in the pipeline, drawn when it starts.

    Attributes:
        jobs: the seed indices of every batch, in order.
        generator_state: the sampler's generator state at the epoch's start.
        refresh_seed: the base seed of the hot refresher's buffers.
        start: the first batch to yield (non-zero when resumed).
        refreshes: the hot buffers started and still needed, ``version ->
            (step, weights)``: the training step each was started at, and the
            bottom layer's ``state_dict()`` it is computed from (``None`` in
            resample mode). Kept up to date by the refresher, so that a
            checkpoint resumes them as they were.

    Example:
        >>> EpochPlan([[0, 1], [2]], torch.Generator().get_state(), 7).start
        0
    """

    jobs: list[list[int]]
    generator_state: Tensor
    refresh_seed: int
    start: int = 0
    refreshes: dict[int, tuple[int, Any]] = field(default_factory=dict)


# Per-batch statistics kept by LoaderStats: the totals cover every batch, this
# many of the latest are kept one by one, so a long run's memory stays flat.
STATS_HISTORY = 4096


class LoaderStats:
    """Per-batch statistics of a loader, kept in the process that filters.

    With ``filter_per_worker=True`` batches are filtered in worker processes,
    so their statistics stay there. Totals cover every batch since the last
    :meth:`reset`; only the latest ``history`` batches are kept one by one.

    Args:
        history: how many of the latest batches :attr:`batches` keeps.

    Attributes:
        batches: statistics of the latest batches, oldest first.
        count: batches since the last :meth:`reset`.

    Example:
        >>> stats = LoaderStats()
        >>> stats.add(BatchStats([2, 4], [4], 1, 64, 0.5, 0.25))
        >>> stats.count, stats.mean()["nodes"]
        (1, 6.0)
        >>> stats.reset()
        >>> list(stats.batches)
        []
    """

    def __init__(self, history: int = STATS_HISTORY) -> None:
        self.batches: deque[BatchStats] = deque(maxlen=history)
        self.count = 0
        self._totals = _stat_values(_NO_BATCH)

    def add(self, stats: BatchStats) -> None:
        """Counts one batch."""
        self.batches.append(stats)
        self.count += 1
        for key, value in _stat_values(stats).items():
            self._totals[key] += value

    def reset(self) -> None:
        """Forgets all batches."""
        self.batches.clear()
        self.count = 0
        self._totals = _stat_values(_NO_BATCH)

    def totals(self) -> dict[str, float]:
        """Nodes, edges, hot nodes, bytes and seconds summed over all batches.

        Example:
            >>> stats = LoaderStats()
            >>> stats.add(BatchStats([2, 4], [4], 1, 64, 0.5, 0.25))
            >>> stats.totals()["bytes_gathered"]
            64.0
        """
        return dict(self._totals)

    def mean(self) -> dict[str, float]:
        """Mean nodes, edges, hot nodes, bytes and seconds per batch.

        Example:
            >>> stats = LoaderStats()
            >>> stats.add(BatchStats([2, 4], [4], 1, 64, 0.5, 0.25))
            >>> stats.mean()["nodes"], stats.mean()["sample_seconds"]
            (6.0, 0.5)
        """
        count = max(self.count, 1)
        return {key: value / count for key, value in self._totals.items()}


def _stat_values(stats: BatchStats) -> dict[str, float]:
    values = {
        "nodes": sum(stats.nodes_per_hop),
        "edges": sum(stats.edges_per_hop),
        "hot": stats.num_hot,
        "bytes_gathered": stats.bytes_gathered,
        "sample_seconds": stats.sample_seconds,
        "gather_seconds": stats.gather_seconds,
    }
    return {key: float(value) for key, value in values.items()}


# The totals before the first batch: zero for every statistic.
_NO_BATCH = BatchStats([], [], 0, 0, 0.0, 0.0)


class OrchNeighborLoader(NeighborLoader):
    r"""A drop-in :class:`~torch_geometric.loader.NeighborLoader` with hot vertices.

    It takes every argument of :class:`~torch_geometric.loader.NeighborLoader`,
    samples with :class:`~pyg_orch.OrchNeighborSampler` (no ``pyg-lib`` or
    ``torch-sparse`` needed) and yields the same
    :class:`~torch_geometric.data.Data` mini-batches. With ``hot_ratio=0`` (the
    default) the batches are exactly those of a ``NeighborLoader``.

    With ``hot_ratio > 0`` it chooses the hot vertices once (the frontier
    nodes most often sampled, or of highest degree), caches their bottom-layer
    input in a :class:`~pyg_orch.HotCache`, and stops expanding them in the
    last hop. Each batch then also holds ``hot_index`` (local positions of the
    hot frontier nodes) and ``hot_agg`` (their cached values), which
    :class:`~pyg_orch.OrchModel` feeds into the bottom layer. The values depend
    on ``cache``:

    - ``"static"``: the full-neighbourhood aggregation, computed once; exact.
    - ``"resample"``: the aggregation over ``hot_fanout`` sampled neighbours,
      re-sampled for every ``super_batch`` batches by a background thread.
    - ``"embedding"``: the bottom layer's output, computed on the CPU from a
      snapshot of its weights, for convs whose messages depend on weights
      (``OrchModel`` picks this mode for them).

    Re-sampled aggregates and snapshots are never used more than
    ``staleness`` training steps (batches) after they were made.

    With ``prefetch=k`` a background thread samples, gathers and copies the
    next ``k`` batches while the current one trains; with ``device`` set,
    batches arrive on that device (copied on a side CUDA stream from
    page-locked buffers), and ``device_cache`` keeps the static hot
    aggregates and the raw features of the most often gathered vertices
    there. Use the loader as a context
    manager, or call :meth:`close`, to stop its threads early.

    Args:
        data: the graph, a :class:`~torch_geometric.data.Data` object. Its
            features ``x`` may be a NumPy array (an :class:`numpy.memmap`
            too), which is read in place.
        num_neighbors: neighbours to sample per node, one entry per hop
            (``-1``: all of them).
        hot_ratio: fraction of all vertices to make hot, in ``[0, 1]``.
        hot_method: ``"presample"`` (count frontier appearances over
            ``presample_epochs`` sampled epochs) or ``"degree"`` (in-degree).
        hot: a precomputed hot set (a :class:`~pyg_orch.hotness.HotSet`, node
            ids, or a boolean mask) to use instead of choosing one.
        presample_epochs: epochs sampled by ``presample``.
        cache: ``"static"``, ``"resample"`` or ``"embedding"``; ``None``
            means static unless the model needs embedding mode.
        super_batch: batches served by one re-sampled or embedded buffer.
        staleness: most training steps between the making of hot values and
            their use, at least ``super_batch - 1``; ``None``: ``2 *
            super_batch - 1``, which lets the next buffer be made while the
            current one serves.
        hot_fanout: neighbours sampled per hot vertex in ``resample`` and
            ``embedding`` modes; ``None``: the largest of ``num_neighbors``.
        prefetch: batches prepared ahead by a background thread (0: none).
        device: the device batches are delivered to (``None``: left on the
            CPU, as ``NeighborLoader`` does).
        device_cache: bytes of ``device`` memory for the device caches, or
            ``"auto"``: half of the free GPU memory (nothing on a CPU). The
            static hot aggregates go there first, when they fit, then the raw
            feature rows of the vertices of highest out-degree.
        check_finite: also check once, at construction, that ``data.x``
            holds no NaN or infinite value (one pass over the features).
        **kwargs: any other argument of
            :class:`~torch_geometric.loader.NeighborLoader` and of
            :class:`torch.utils.data.DataLoader` (``input_nodes``,
            ``batch_size``, ``shuffle``, ``replace``, ``num_workers``, ...).

    Example:
        >>> from pyg_orch.datasets import load_cora
        >>> data = load_cora()
        >>> from torch_geometric.nn import GraphSAGE
        >>> from pyg_orch import OrchModel
        >>> loader = OrchNeighborLoader(data, num_neighbors=[10, 5],
        ...                             input_nodes=data.train_mask,
        ...                             batch_size=32, hot_ratio=0.2)
        >>> model = OrchModel(GraphSAGE(data.num_features, 16, num_layers=2),
        ...                   loader)  # serves the loader: mean aggregates
        >>> batch = next(iter(loader))
        >>> batch.batch_size, batch.hot_agg.size(1) == data.num_features
        (32, True)
        >>> with OrchNeighborLoader(data, [10, 5], batch_size=32, hot_ratio=0.2,
        ...                         cache="resample", prefetch=2) as loader:
        ...     model = OrchModel(model.model, loader)
        ...     sum(batch.batch_size for batch in loader)
        2708
    """

    def __init__(
        self,
        data: Any,
        num_neighbors: Any,
        hot_ratio: float = 0.0,
        hot_method: str = "presample",
        hot: HotSet | Tensor | None = None,
        presample_epochs: int = 1,
        cache: str | None = None,
        super_batch: int = 8,
        staleness: int | None = None,
        hot_fanout: int | None = None,
        prefetch: int = 0,
        device: torch.device | str | None = None,
        device_cache: int | str = 0,
        check_finite: bool = False,
        **kwargs: Any,
    ) -> None:
        # By name: a reordered signature cannot swap two checks.
        check_loader_arguments(
            data, num_neighbors, hot_ratio=hot_ratio, hot_method=hot_method,
            hot=hot, presample_epochs=presample_epochs, cache=cache,
            super_batch=super_batch, staleness=staleness, hot_fanout=hot_fanout,
            prefetch=prefetch, device=device, device_cache=device_cache,
            check_finite=check_finite, **kwargs,
        )  # fmt: skip
        if "batch_size" in kwargs:
            # A NumPy int passes the check, but DataLoader takes only an int.
            kwargs["batch_size"] = int(kwargs["batch_size"])
        staleness = 2 * super_batch - 1 if staleness is None else staleness
        if kwargs.get("neighbor_sampler") is None:
            kwargs["neighbor_sampler"] = OrchNeighborSampler(
                data,
                num_neighbors,
                **{key: kwargs[key] for key in _SAMPLER_ARGUMENTS if key in kwargs},
                share_memory=kwargs.get("num_workers", 0) > 0,
            )
        # With a device, the loader gathers x itself (page-locked, and only
        # the rows the feature cache lacks): PyG filters a graph without it.
        self.features = _features(
            data, device is not None or hot is not None or hot_ratio != 0
        )
        self.device = torch.device(device) if device is not None else None
        if self.device is not None and self.features is not None:
            num_nodes = data.num_nodes
            data = copy.copy(data)
            del data.x
            data.num_nodes = num_nodes
        super().__init__(data, num_neighbors, **kwargs)
        self.hot_ratio, self.hot_method = hot_ratio, hot_method
        self.super_batch, self.staleness = super_batch, staleness
        self.prefetch = prefetch
        self.hot_fanout = _default_hot_fanout(num_neighbors, hot_fanout)
        self.stats = LoaderStats()
        self.hot: HotSet | None = None
        self.cache: HotCache | None = None
        budget = self._device_budget(device_cache)
        self._hot_device_bytes = 0
        # The pipeline iterations started, with their epochs and counters.
        self._iterations: list[
            tuple[weakref.ref[Pipeline], EpochPlan, PipelineStats]
        ] = []
        self._resume: EpochPlan | None = None
        self._cache_mode = cache
        self._serve_version = 0
        self.tuning: HotRatioTuning | None = None
        if hot_ratio == "auto":
            # Scored now; the ratio is chosen when OrchModel wraps the model.
            self._check_hot_support()
            self._scores = self._choose_hot(max(AUTO_RATIOS), presample_epochs)
        elif hot is not None or hot_ratio > 0:
            self._check_hot_support()
            if hot is None:
                self._use_hot(self._choose_hot(hot_ratio, presample_epochs))
            else:
                self._use_hot(_as_hot_set(hot, self.node_sampler.colptr.numel() - 1))
        elif cache not in (None, "static"):
            raise ValueError(
                f"cache={cache!r} needs hot vertices: set hot_ratio > 0 or hot"
            )
        budget -= self._reserve_for_hot(budget)
        self.feature_cache = self._build_feature_cache(budget)

    def _check_hot_support(self) -> None:
        sampler = self.node_sampler
        if (
            not isinstance(sampler, OrchNeighborSampler)
            or sampler.use_pyg_backend
            or sampler.subgraph_type != SubgraphType.directional
        ):
            raise NotImplementedError(
                "hot vertices need OrchNeighborLoader's own Numba sampler with "
                "directional subgraphs (the default subgraph_type); drop the "
                "other sampling options or set hot_ratio=0."
            )
        if self.features is None:
            raise ValueError(
                "hot vertices need node features data.x to aggregate; give the "
                "graph an x or set hot_ratio=0"
            )

    def _choose_hot(self, hot_ratio: float, presample_epochs: int) -> HotSet:
        return select_hot(
            self.node_sampler,
            self.input_data.node,
            hot_ratio,
            self.hot_method,
            batch_size=self.batch_size,
            epochs=presample_epochs,
            # Deterministic under torch.manual_seed, and without drawing from
            # the global generator, so a hot ratio leaves the shuffles and
            # initialisations of a seeded run unchanged.
            seed=torch.initial_seed(),
        )

    def _use_hot(self, hot: HotSet | None) -> None:
        # Builds the hot cache for `hot` (none for None) and tells the sampler.
        sampler = self.node_sampler
        self.hot = hot
        if hot is None:
            self.cache, sampler.hot_mask = None, None
            return
        self.cache = HotCache(sampler.colptr, sampler.row, self.features, hot.nodes)
        self.cache.mode = self._cache_mode or "static"
        self.cache.mode_chosen = self._cache_mode is not None
        if 0 < hot.nodes.numel() * self._row_bytes() <= self._hot_device_bytes:
            self.cache.device = self.device
        sampler.hot_mask = self.cache.mask

    def serve(self, kind: str, snapshot: Callable[[], Any] | None = None) -> int:
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
            kind: one of :data:`~pyg_orch.cache.AGGREGATIONS` or
                ``"embedding"``.
            snapshot: for ``"embedding"``: returns the current bottom layer.

        Returns:
            The serving's version.

        Raises:
            ValueError: no hot vertices, or an unknown ``kind``.
            NotImplementedError: ``kind`` does not fit an explicitly chosen
                ``cache`` mode.

        Example:
            >>> from pyg_orch.datasets import load_cora
            >>> loader = OrchNeighborLoader(load_cora(), [5], batch_size=64,
            ...                             hot_ratio=0.1)
            >>> version = loader.serve("mean")
            >>> next(iter(loader)).hot_kind
            'mean'
        """
        self._apply_serving(kind, snapshot)
        self._serve_version = next(_SERVINGS)
        return self._serve_version

    def _apply_serving(self, kind: str, snapshot: Callable[[], Any] | None) -> None:
        # Sets the cache up for `kind`; the version is serve's to give.
        cache = self.cache
        if cache is None:
            raise ValueError(
                "this loader has no hot vertices (hot_ratio=0 and no hot set): "
                "there are no hot values to serve"
            )
        if kind == "embedding":
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

    def _serve_aggregation(self, cache: HotCache, kind: str) -> None:
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
        cache.kind, cache.snapshot = kind, None
        if cache.mode == "static":
            # Computed now, not during the first batch: before any worker
            # process is forked, and outside the training time.
            cache.values()
            if cache.device is not None:
                cache.device_values()

    def tune_hot_ratio(
        self,
        serve: Any,
        step_seconds: Any,
        ratios: tuple[float, ...] = AUTO_RATIOS,
        batches: int = 3,
    ) -> HotRatioTuning:
        """Chooses ``hot_ratio="auto"``: the ratio that hides CPU under device work.

        For each candidate ratio it builds the hot cache, then times the CPU
        side (sampling, gathering, copying, and the per-batch share of a hot
        refresh) and the device side (a forward and backward pass, no update)
        on the same ``batches`` batches after a warm-up one, and keeps the
        choice of :func:`~pyg_orch.hotness.choose_hot_ratio`. Called by
        :class:`~pyg_orch.OrchModel`; the result is kept in ``loader.tuning``.

        Args:
            serve: ``serve(loader)`` prepares the cache for the model (what
                ``OrchModel`` does when it wraps a model).
            step_seconds: ``step_seconds(batch)``, the device time of a batch.
            ratios: the candidates.
            batches: timed batches per candidate.

        Returns:
            The measurements and the choice.
        """
        cpu, device = [], []
        # A discarded round first: one-off costs (kernel compilation, lazy
        # initialisation, allocator growth) would otherwise land on the first.
        self._time_batches(step_seconds, 1)
        for ratio in ratios:
            self._use_hot(self._top(ratio))
            if self.cache is not None:
                serve(self)
            cpu_seconds, device_seconds = self._time_batches(step_seconds, batches)
            cpu.append(cpu_seconds)
            device.append(device_seconds)
        overlap = self.prefetch > 0
        chosen = choose_hot_ratio(list(ratios), cpu, device, overlap)
        self._use_hot(self._top(chosen))
        if self.cache is not None:
            serve(self)
        self.hot_ratio = chosen
        self.stats.reset()
        self.tuning = HotRatioTuning(list(ratios), cpu, device, overlap, chosen)
        return self.tuning

    def _top(self, ratio: float) -> HotSet | None:
        if ratio == 0:
            return None
        scores = self._scores.counts
        return HotSet(top_fraction(scores, ratio), scores, self._scores.method)

    def _time_batches(self, step_seconds: Any, batches: int) -> tuple[float, float]:
        cpu, device = [], []
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(0)  # the same batches for every candidate
            refresh_seconds, values = self._time_refresh()
            for seeds in list(self.batch_sampler)[: batches + 1]:
                tick = time.perf_counter()
                out = self.collate_fn(seeds)
                batch = out if self.filter_per_worker else self.filter_fn(out)
                if values is not None:
                    batch.hot_agg = gather(values, batch.hot_slot)
                    del batch.hot_slot
                if self.device is not None:
                    batch = self._to_device(batch)
                cpu.append(time.perf_counter() - tick + refresh_seconds)
                device.append(step_seconds(batch))
        # The first batch warms caches and kernels up.
        return median_seconds(cpu[1:]), median_seconds(device[1:])

    def _time_refresh(self) -> tuple[float, Tensor | None]:
        # One hot refresh, timed; its cost is shared by a super-batch.
        cache = self.cache
        if cache is None or cache.mode == "static":
            return 0.0, None
        tick = time.perf_counter()
        if cache.mode == "resample":
            values = cache.resample(self.hot_fanout, 0)
        else:
            values = cache.embed(cache.snapshot(), self.hot_fanout, 0)
        return (time.perf_counter() - tick) / self.super_batch, values

    def _device_budget(self, budget: int | str) -> int:
        # Checked by check_device_cache: bytes >= 0, or "auto" with a device.
        if budget != "auto":
            return budget
        if self.device.type != "cuda":
            return 0
        return int(torch.cuda.mem_get_info(self.device)[0] * _AUTO_DEVICE_SHARE)

    def _reserve_for_hot(self, budget: int) -> int:
        # The static hot aggregates go to the device when they fit: then a
        # batch's hot rows are gathered there, not copied. Returns the bytes
        # reserved (for the largest candidate of hot_ratio="auto").
        if self._cache_mode not in (None, "static") or self.features is None:
            return 0
        if self.hot_ratio == "auto":
            rows = round(max(AUTO_RATIOS) * self.features.size(0))
        else:
            rows = self.cache.num_hot if self.cache is not None else 0
        size = rows * self._row_bytes()
        if size == 0 or size > budget:
            return 0
        self._hot_device_bytes = size
        if self.cache is not None:
            self.cache.device = self.device
        return size

    def _row_bytes(self) -> int:
        return self.features[0].numel() * self.features.element_size()

    def _build_feature_cache(self, budget: int) -> FeatureCache | None:
        if self.features is None:
            return None
        num_rows = min(budget // max(self._row_bytes(), 1), self.features.size(0))
        if num_rows == 0:
            return None
        sampler = self.node_sampler
        counts = out_degree(sampler.row, sampler.colptr.numel() - 1)
        order = torch.sort(counts, descending=True, stable=True).indices
        return FeatureCache(self.features, order[:num_rows], self.device)

    @property
    def uses_pipeline(self) -> bool:
        """Whether iterating runs the :class:`~pyg_orch.pipeline.Pipeline`."""
        dynamic = self.cache is not None and self.cache.mode != "static"
        return self.prefetch > 0 or self.device is not None or dynamic

    def __iter__(self) -> Any:
        if self.hot_ratio == "auto":
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
        if not self.uses_pipeline:
            return super().__iter__()
        if self.num_workers > 0:
            raise ValueError(
                "prefetch, device and the resample and embedding cache modes run "
                "in pyg_orch's own threads, not in DataLoader worker processes: "
                "set num_workers=0"
            )
        epoch = self._resume or self._new_epoch()
        self._resume = None
        generator = torch.Generator()
        generator.set_state(epoch.generator_state)
        for _ in range(epoch.start):
            # Replays the sampler's one draw per batch already trained.
            torch.randint(0, 2**62, (1,), generator=generator)
        refresher = self._refresher(epoch)
        served = (self.cache.kind, self._serve_version) if self.cache else None
        produce = functools.partial(self._produce, refresher, served, generator)
        pipeline = Pipeline(
            epoch.jobs, produce, self.prefetch, refresher, self.device, epoch.start
        )
        # Each iteration runs on its own, as NeighborLoader's do: a second
        # iter(loader) (an evaluation pass, a peek) leaves the first alone.
        # Weak: dropping an iterator must close its threads. The epoch and
        # the pipeline's counters are kept beside it, for state_dict: the
        # position outlives the iterator (a loop left early, a dropped one).
        self._iterations = [i for i in self._iterations if i[0]() is not None]
        self._iterations.append((weakref.ref(pipeline), epoch, pipeline.stats))
        return pipeline

    def _new_epoch(self) -> EpochPlan:
        # Drawn here, in the training thread, so a seeded run is reproducible
        # whatever the thread timing: the batch order, the sampler's seeds
        # and the refresher's seeds.
        jobs = list(self.batch_sampler)
        generator = torch.Generator()
        generator.manual_seed(int(torch.randint(0, 2**62, (1,))))
        refresh_seed = int(torch.randint(0, 2**62, (1,)))
        return EpochPlan(jobs, generator.get_state(), refresh_seed)

    def _refresher(self, epoch: EpochPlan) -> HotRefresher | None:
        cache = self.cache
        if cache is None or cache.mode == "static":
            return None
        base_seed, fanout, kind = epoch.refresh_seed, self.hot_fanout, cache.kind
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
            check_saved_weights(layer, epoch.refreshes)

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
            first_version=epoch.start // self.super_batch,
            started=epoch.refreshes,
        )

    def _produce(
        self,
        refresher: HotRefresher | None,
        served: tuple[str, int] | None,
        generator: torch.Generator,
        index: int,
        seeds: list[int],
    ) -> tuple[Data, int | None]:
        with drawing_from(generator):
            out = self.collate_fn(seeds)
        batch = out if self.filter_per_worker else self.filter_fn(out)
        created = None
        if refresher is not None:
            values = refresher.values(index)
            batch.hot_agg = gather(values.values, batch.hot_slot)
            # The refresher serves what the loader served when it started.
            batch.hot_kind, batch.hot_version = served
            created = values.created
            del batch.hot_slot
        if self.device is not None:
            batch = self._to_device(batch)
        return batch, created

    def _to_device(self, batch: Data) -> Data:
        # Copies, then completes on the device what the caches there hold.
        batch = batch.to(self.device, non_blocking=True)
        if "hot_slot" in batch:
            batch.hot_agg = self.cache.device_values()[batch.hot_slot]
            del batch.hot_slot
        if "x_cold" in batch:
            x = batch.x_cold.new_empty(batch.num_nodes, batch.x_cold.size(1))
            x[batch.x_cold_index] = batch.x_cold
            x[batch.x_cached_index] = self.feature_cache.values[batch.x_cached_slot]
            for key in ("x_cold_index", "x_cold", "x_cached_index", "x_cached_slot"):
                del batch[key]
            batch.x = x
        return batch

    def close(self) -> None:
        """Stops the background threads of every open iteration, if any."""
        for pipeline, _, _ in self._iterations:
            if pipeline() is not None:
                pipeline().close()
        self._iterations = []

    def state_dict(self) -> dict[str, Any]:
        """What it takes to resume training where it stopped.

        What identifies the graph and the loader (sizes, fingerprints of the
        edges, features and input nodes, and the batching arguments), the
        hot set (ids, scores, method), the chosen ``hot_ratio``, the hot
        cache's mode and computed values, and, when the current epoch runs
        through the :class:`~pyg_orch.Pipeline`, its position: the batch
        order, the seeds, the number of batches handed out, and the hot
        buffers started for the rest of the epoch (in embedding mode, the
        bottom layer's weights they are computed from). Save it with
        :func:`torch.save` next to the model's and optimizer's state dicts.
        Without a pipeline (``prefetch=0``, no ``device``, static cache), the
        position is ``None``: batches come from the global generator, as in
        ``NeighborLoader``, and a resumed run starts a new epoch.

        Returns:
            A dictionary of tensors and plain values.

        Raises:
            RuntimeError: ``hot_ratio="auto"`` is not chosen yet.

        Example:
            >>> from pyg_orch.datasets import load_cora
            >>> loader = OrchNeighborLoader(load_cora(), [5], batch_size=512,
            ...                             hot_ratio=0.1, prefetch=1)
            >>> version = loader.serve("mean")  # what OrchModel(model, loader) does
            >>> with loader:
            ...     batch = next(iter(loader))
            ...     state = loader.state_dict()
            >>> state["position"]["next"], state["hot_nodes"].numel()
            (1, 271)
        """
        if self.hot_ratio == "auto":
            raise RuntimeError(
                "hot_ratio='auto' is chosen when OrchModel(model, loader) wraps "
                "the model: wrap it before state_dict()"
            )
        cache, hot = self.cache, self.hot
        return {
            "identity": loader_identity(self),
            "hot_ratio": self.hot_ratio,
            "hot_nodes": hot.nodes if hot is not None else None,
            "hot_counts": hot.counts if hot is not None else None,
            "hot_method": hot.method if hot is not None else None,
            "cache_mode": cache.mode if cache is not None else None,
            "cache_values": cache.computed() if cache is not None else {},
            "position": self._position(),
        }

    def _position(self) -> dict[str, Any] | None:
        # A loaded position not resumed yet is the one to save again.
        if self._resume is not None:
            epoch, steps = self._resume, self._resume.start
        elif (current := self._current_iteration()) is not None:
            epoch, steps = current[0], current[1].steps
        else:
            return None
        first_needed = steps // self.super_batch
        return {
            "jobs": epoch.jobs,
            "generator_state": epoch.generator_state,
            "refresh_seed": epoch.refresh_seed,
            "next": steps,
            "refreshes": {
                version: started
                for version, started in epoch.refreshes.items()
                if version >= first_needed
            },
        }

    def _current_iteration(self) -> tuple[EpochPlan, PipelineStats] | None:
        # The epoch a checkpoint resumes: the one unfinished iteration still
        # open, else the latest one left early (a loop broken out of).
        unfinished = [
            (pipeline() is not None, epoch, progress)
            for pipeline, epoch, progress in self._iterations
            if progress.steps < len(epoch.jobs)
        ]
        open_ones = [(epoch, steps) for alive, epoch, steps in unfinished if alive]
        if len(open_ones) > 1:
            raise RuntimeError(
                f"{len(open_ones)} iterations of this loader are open and "
                f"unfinished, and a checkpoint holds one epoch position: finish "
                f"or drop the other iterators (e.g. an evaluation pass) before "
                f"state_dict()"
            )
        if open_ones:
            return open_ones[0]
        return unfinished[-1][1:] if unfinished else None

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restores :meth:`state_dict`: the next iteration resumes there.

        The hot set and the cache's values are taken as saved (nothing is
        presampled or aggregated again); with a saved position, the next
        ``iter(loader)`` yields the rest of the interrupted epoch, batch for
        batch as the uninterrupted run would have, with the hot values it
        would have had (also in embedding mode, from the weights saved with
        the position). Build the loader with the same graph and arguments as
        the saved one (``hot_ratio=0`` too: the checkpoint brings the hot
        set). A model wrapped before keeps serving the loader; otherwise wrap
        it after loading, as the loader yields no hot batch until then.

        Args:
            state: a dictionary from :meth:`state_dict`.

        Raises:
            ValueError: naming the key: the checkpoint was saved for another
                graph or by a loader with other arguments, or a key is
                missing, unknown, or holds a value of the wrong type or range.
                Nothing is changed then.
        """
        check_state(state, self, self._cache_mode)
        cache = self.cache
        served = None if cache is None else (cache.kind, cache.snapshot)
        self.hot_ratio = state["hot_ratio"]
        nodes, counts = state["hot_nodes"], state["hot_counts"]
        self._use_hot(
            None if nodes is None else HotSet(nodes, counts, state["hot_method"])
        )
        if self.cache is not None:
            self.cache.mode = state["cache_mode"]
            self.cache.restore(state["cache_values"])
            if served is not None and served[0] is not None:
                # The model serving the loader goes on serving the restored
                # cache, as the same serving (version): it checks batches
                # against it.
                self._apply_serving(*served)
        self._resume = _epoch_plan(state["position"])

    def __enter__(self) -> OrchNeighborLoader:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()

    def collate_fn(self, index: Tensor | list[int]) -> Any:
        # NodeLoader.collate_fn with the sampling timed: with
        # filter_per_worker, filtering happens in here too.
        tick = time.perf_counter()
        out = self.node_sampler.sample_from_nodes(self.input_data[index])
        out.sample_seconds = time.perf_counter() - tick
        return self.filter_fn(out) if self.filter_per_worker else out

    def filter_fn(self, out: Any) -> Data:
        tick = time.perf_counter()
        batch = super().filter_fn(out)
        if self.device is not None and self.features is not None:
            self._gather_features(batch)
        if self.cache is not None:
            frontier = batch.n_id[: frontier_size(batch.num_sampled_nodes)]
            if self.cache.mode == "static" and self.cache.device is None:
                batch.hot_index, batch.hot_agg = self.cache.lookup(frontier)
            else:
                # The values come from the refresher's buffer for this batch,
                # or from the device (see _to_device).
                batch.hot_index, batch.hot_slot = self._find_hot(batch, frontier)
            batch.hot_kind, batch.hot_version = self.cache.kind, self._serve_version
        # Bidirectional subgraphs have no per-hop counts: one "hop" then.
        nodes_per_hop = getattr(batch, "num_sampled_nodes", None) or [batch.num_nodes]
        edges_per_hop = getattr(batch, "num_sampled_edges", None) or [batch.num_edges]
        self.stats.add(
            BatchStats(
                nodes_per_hop=list(nodes_per_hop),
                edges_per_hop=list(edges_per_hop),
                num_hot=_num_hot(batch),
                bytes_gathered=_bytes_gathered(batch),
                sample_seconds=getattr(out, "sample_seconds", 0.0),
                gather_seconds=time.perf_counter() - tick,
            )
        )
        return batch

    def _find_hot(self, batch: Data, frontier: Tensor) -> tuple[Tensor, Tensor]:
        if self.cache.mode != "embedding":
            return self.cache.find(frontier)
        # An embedding is a constant, so its row gets no gradient: only the
        # hot nodes the last hop did not expand take one. The others have
        # their sampled neighbours and are computed, with gradients, on the
        # device.
        start = frontier_size(batch.num_sampled_nodes[:-1])
        hot_index, hot_slot = self.cache.find(frontier[start:])
        return hot_index + start, hot_slot

    def _gather_features(self, batch: Data) -> None:
        # Into page-locked buffers (under CUDA), and only the rows the
        # feature cache does not hold; _to_device assembles x on the device.
        if self.feature_cache is None:
            batch.x = gather(self.features, batch.n_id)
            return
        cached_index, cached_slot, cold_index = self.feature_cache.split(batch.n_id)
        batch.x_cold = gather(self.features, batch.n_id[cold_index])
        batch.x_cold_index = cold_index
        batch.x_cached_index, batch.x_cached_slot = cached_index, cached_slot


def _features(data: Any, read_by_kernels: bool) -> Tensor | None:
    # NumPy features (an np.memmap: features on disk) are viewed, not copied.
    # The kernels of hot vertices and device= read C-contiguous rows, so a
    # strided view (e.g. the column slice x[:, :k]) is copied once, here.
    x = feature_tensor(getattr(data, "x", None))
    return x.contiguous() if x is not None and read_by_kernels else x


def _default_hot_fanout(num_neighbors: Any, hot_fanout: int | None) -> int:
    # Checked by check_hot_fanout; None means the largest fan-out.
    if hot_fanout is not None:
        return hot_fanout
    if isinstance(num_neighbors, dict):
        return -1  # per-edge-type fan-outs: hot vertices need a homogeneous graph
    fanouts = list(getattr(num_neighbors, "values", num_neighbors))
    return -1 if -1 in fanouts else max(max(fanouts, default=1), 1)


# Versions of loader.serve, unique in the process: a batch's hot_version names
# the serving, whichever loader made it.
_SERVINGS = itertools.count(1)


# Arguments that NeighborLoader hands on to its NeighborSampler.
_SAMPLER_ARGUMENTS = (
    "replace",
    "subgraph_type",
    "disjoint",
    "temporal_strategy",
    "time_attr",
    "weight_attr",
    "is_sorted",
    "directed",
)


def _as_hot_set(hot: HotSet | Tensor, num_nodes: int) -> HotSet:
    if isinstance(hot, HotSet):
        nodes = hot.nodes
    elif hot.dtype == torch.bool:
        if hot.numel() != num_nodes:
            raise ValueError(
                f"hot is a mask of {hot.numel()} entries but the graph has "
                f"{num_nodes} nodes; was it made for another graph?"
            )
        nodes = hot.nonzero().view(-1)
    else:
        nodes = hot.to(torch.long).unique()
    if nodes.numel() and (nodes.min() < 0 or nodes.max() >= num_nodes):
        raise ValueError(
            f"hot holds node ids outside [0, {num_nodes}); was it made for "
            f"another graph?"
        )
    counts = hot.counts if isinstance(hot, HotSet) else torch.zeros(0, dtype=torch.long)
    return HotSet(nodes, counts, hot.method if isinstance(hot, HotSet) else "given")


def _epoch_plan(position: dict[str, Any] | None) -> EpochPlan | None:
    # The epoch a checked position resumes.
    if position is None:
        return None
    return EpochPlan(
        position["jobs"],
        position["generator_state"],
        position["refresh_seed"],
        position["next"],
        # A copy: the refresher updates it as the epoch goes on.
        dict(position["refreshes"]),
    )


def _num_hot(batch: Data) -> int:
    return int(batch.hot_index.numel()) if "hot_index" in batch else 0


def _bytes_gathered(batch: Data) -> int:
    tensors = [batch.get(key) for key in ("x", "x_cold", "hot_agg")]
    return sum(t.numel() * t.element_size() for t in tensors if t is not None)
