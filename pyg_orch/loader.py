"""``OrchNeighborLoader``: PyG's ``NeighborLoader`` with a hot/cold split."""

from __future__ import annotations

import copy
import functools
import time
import weakref
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor
from torch_geometric.data import Data
from torch_geometric.loader import NeighborLoader
from torch_geometric.sampler.base import SubgraphType

from pyg_orch.cache import FeatureCache, HotCache, gather
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
from pyg_orch.sampling import OrchNeighborSampler
from pyg_orch.validation import check_loader_arguments

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

    Example:
        >>> EpochPlan([[0, 1], [2]], torch.Generator().get_state(), 7).start
        0
    """

    jobs: list[list[int]]
    generator_state: Tensor
    refresh_seed: int
    start: int = 0


@dataclass
class LoaderStats:
    """Per-batch statistics of a loader, kept in the process that filters.

    With ``filter_per_worker=True`` batches are filtered in worker processes,
    so their statistics stay there.

    Attributes:
        batches: statistics of each batch since the last :meth:`reset`.

    Example:
        >>> stats = LoaderStats([BatchStats([2, 4], [4], 1, 64, 0.5, 0.25)])
        >>> stats.reset()
        >>> stats.batches
        []
    """

    batches: list[BatchStats] = field(default_factory=list)

    def reset(self) -> None:
        """Forgets all batches."""
        self.batches.clear()

    def mean(self) -> dict[str, float]:
        """Mean nodes, edges, hot nodes, bytes and seconds per batch.

        Example:
            >>> stats = LoaderStats([BatchStats([2, 4], [4], 1, 64, 0.5, 0.25)])
            >>> stats.mean()["nodes"], stats.mean()["sample_seconds"]
            (6.0, 0.5)
        """
        count = max(len(self.batches), 1)
        total = {
            "nodes": sum(sum(b.nodes_per_hop) for b in self.batches),
            "edges": sum(sum(b.edges_per_hop) for b in self.batches),
            "hot": sum(b.num_hot for b in self.batches),
            "bytes_gathered": sum(b.bytes_gathered for b in self.batches),
            "sample_seconds": sum(b.sample_seconds for b in self.batches),
            "gather_seconds": sum(b.gather_seconds for b in self.batches),
        }
        return {key: value / count for key, value in total.items()}


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
        data: the graph, a :class:`~torch_geometric.data.Data` object.
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
        >>> loader = OrchNeighborLoader(data, num_neighbors=[10, 5],
        ...                             input_nodes=data.train_mask,
        ...                             batch_size=32, hot_ratio=0.2)
        >>> batch = next(iter(loader))
        >>> batch.batch_size, batch.hot_agg.size(1) == data.num_features
        (32, True)
        >>> with OrchNeighborLoader(data, [10, 5], batch_size=32, hot_ratio=0.2,
        ...                         cache="resample", prefetch=2) as loader:
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
        self.features: Tensor | None = getattr(data, "x", None)
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
        # Weak: dropping the iterator must close its threads.
        self._pipeline: weakref.ref[Pipeline] | None = None
        self._epoch: EpochPlan | None = None
        self._progress: PipelineStats | None = None
        self._resume: EpochPlan | None = None
        self._cache_mode = cache
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
        if not self.uses_pipeline:
            return super().__iter__()
        if self.num_workers > 0:
            raise ValueError(
                "prefetch, device and the resample and embedding cache modes run "
                "in pyg_orch's own threads, not in DataLoader worker processes: "
                "set num_workers=0"
            )
        self.close()
        epoch = self._resume or self._new_epoch()
        self._resume, self._epoch = None, epoch
        generator = torch.Generator()
        generator.set_state(epoch.generator_state)
        for _ in range(epoch.start):
            # Replays the sampler's one draw per batch already trained.
            torch.randint(0, 2**62, (1,), generator=generator)
        self.node_sampler.generator = generator
        refresher = self._refresher(epoch.refresh_seed, epoch.start)
        produce = functools.partial(self._produce, refresher)
        pipeline = Pipeline(
            epoch.jobs, produce, self.prefetch, refresher, self.device, epoch.start
        )
        self._pipeline = weakref.ref(pipeline)
        # The pipeline's counters, kept here: the position outlives the
        # iterator (a loop left early, a dropped iterator).
        self._progress = pipeline.stats
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

    def _refresher(self, base_seed: int, start: int) -> HotRefresher | None:
        cache = self.cache
        if cache is None or cache.mode == "static":
            return None
        fanout = self.hot_fanout
        if cache.mode == "resample":
            snapshot = None

            def compute(version: int, _: Any) -> Tensor:
                return cache.resample(fanout, refresh_seed(base_seed, version))

        else:
            if cache.snapshot is None:
                raise RuntimeError(
                    "cache='embedding' needs the model: wrap it with "
                    "OrchModel(model, loader) before iterating"
                )
            snapshot = cache.snapshot

            def compute(version: int, layer: Any) -> Tensor:
                return cache.embed(layer, fanout, refresh_seed(base_seed, version))

        return HotRefresher(
            compute,
            self.super_batch,
            self.staleness,
            snapshot,
            seed=base_seed,
            first_version=start // self.super_batch,
        )

    def _produce(
        self, refresher: HotRefresher | None, index: int, seeds: list[int]
    ) -> tuple[Data, int | None]:
        out = self.collate_fn(seeds)
        batch = out if self.filter_per_worker else self.filter_fn(out)
        created = None
        if refresher is not None:
            values = refresher.values(index)
            batch.hot_agg = gather(values.values, batch.hot_slot)
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
        """Stops the background threads of the current iteration, if any."""
        pipeline = self._pipeline() if self._pipeline is not None else None
        if pipeline is not None:
            pipeline.close()
        self._pipeline = None

    def state_dict(self) -> dict[str, Any]:
        """What it takes to resume training where it stopped.

        The hot set (ids, scores, method), the chosen ``hot_ratio``, the hot
        cache's mode, kind and computed values, and, when the current epoch
        runs through the :class:`~pyg_orch.Pipeline`, its position: the batch
        order, the seeds and the number of batches handed out. Save it with
        :func:`torch.save` next to the model's and optimizer's state dicts.
        Without a pipeline (``prefetch=0``, no ``device``, static cache), the
        position is ``None``: batches come from the global generator, as in
        ``NeighborLoader``, and a resumed run starts a new epoch.

        Returns:
            A dictionary of tensors and plain values.

        Example:
            >>> from pyg_orch.datasets import load_cora
            >>> loader = OrchNeighborLoader(load_cora(), [5], batch_size=512,
            ...                             hot_ratio=0.1, prefetch=1)
            >>> with loader:
            ...     batch = next(iter(loader))
            ...     state = loader.state_dict()
            >>> state["position"]["next"], state["hot_nodes"].numel()
            (1, 271)
        """
        position = None
        epoch, progress = self._epoch, self._progress
        if (
            epoch is not None
            and progress is not None
            and progress.steps < len(epoch.jobs)
        ):
            position = {
                "jobs": epoch.jobs,
                "generator_state": epoch.generator_state,
                "refresh_seed": epoch.refresh_seed,
                "next": progress.steps,
            }
        cache = self.cache
        return {
            "hot_ratio": self.hot_ratio,
            "hot_nodes": self.hot.nodes if self.hot is not None else None,
            "hot_counts": self.hot.counts if self.hot is not None else None,
            "hot_method": self.hot.method if self.hot is not None else None,
            "cache_mode": cache.mode if cache is not None else None,
            "cache_kind": cache.kind if cache is not None else None,
            "cache_values": cache.computed() if cache is not None else {},
            "position": position,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restores :meth:`state_dict`: the next iteration resumes there.

        The hot set and the cache's values are taken as saved (nothing is
        presampled or aggregated again); with a saved position, the next
        ``iter(loader)`` yields the rest of the interrupted epoch, batch for
        batch as the uninterrupted run would have. Build the loader with the
        same graph and arguments as the saved one.

        Args:
            state: a dictionary from :meth:`state_dict`.

        Raises:
            ValueError: the hot set was made for another graph.
        """
        self.hot_ratio = state["hot_ratio"]
        if state["hot_nodes"] is None:
            self._use_hot(None)
        else:
            num_nodes = self.node_sampler.colptr.numel() - 1
            saved = HotSet(state["hot_nodes"], state["hot_counts"], state["hot_method"])
            self._use_hot(_as_hot_set(saved, num_nodes))
            self.cache.mode, self.cache.kind = state["cache_mode"], state["cache_kind"]
            self.cache.restore(state["cache_values"])
        position = state["position"]
        self._resume = (
            None
            if position is None
            else EpochPlan(
                position["jobs"],
                position["generator_state"],
                position["refresh_seed"],
                position["next"],
            )
        )

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
        # Bidirectional subgraphs have no per-hop counts: one "hop" then.
        nodes_per_hop = getattr(batch, "num_sampled_nodes", None) or [batch.num_nodes]
        edges_per_hop = getattr(batch, "num_sampled_edges", None) or [batch.num_edges]
        self.stats.batches.append(
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


def _default_hot_fanout(num_neighbors: Any, hot_fanout: int | None) -> int:
    # Checked by check_hot_fanout; None means the largest fan-out.
    if hot_fanout is not None:
        return hot_fanout
    if isinstance(num_neighbors, dict):
        return -1  # per-edge-type fan-outs: hot vertices need a homogeneous graph
    fanouts = list(getattr(num_neighbors, "values", num_neighbors))
    return -1 if -1 in fanouts else max(max(fanouts, default=1), 1)


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


def _num_hot(batch: Data) -> int:
    return int(batch.hot_index.numel()) if "hot_index" in batch else 0


def _bytes_gathered(batch: Data) -> int:
    tensors = [batch.get(key) for key in ("x", "x_cold", "hot_agg")]
    return sum(t.numel() * t.element_size() for t in tensors if t is not None)
