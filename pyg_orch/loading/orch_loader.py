"""What both loaders share: the hot vertices, the pipeline, device caches, resume.

:class:`OrchLoader` is a mixin placed before PyG's loader class, as in
``class OrchNeighborLoader(OrchLoader, NeighborLoader)``: the node loader and
the link loader differ only in how a batch's seeds are sampled
(:meth:`OrchLoader._sample`) and what identifies them in a checkpoint
(:meth:`OrchLoader.seed_identity`). Everything else, the hot set and its
cache, the :class:`~pyg_orch.Pipeline` (``prefetch``, ``device``, re-sampled
and embedded hot values), the device caches, ``hot_ratio="auto"`` and
``state_dict()`` resume, is one code for both.
"""

from __future__ import annotations

import copy
import functools
import time
from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor
from torch_geometric.data import Data, HeteroData
from typing_extensions import Self

from pyg_orch.allocator import keep_freed_memory
from pyg_orch.hot.cache import HotCache
from pyg_orch.hot.choice import HotRatio, HotSet
from pyg_orch.hot.options import HotOptions
from pyg_orch.hot.tuning import AUTO_RATIOS, HotRatioTuning
from pyg_orch.hot.vertices import HotVertices
from pyg_orch.loading.arguments import check_loader_arguments
from pyg_orch.loading.checkpoint import check_state, loader_identity
from pyg_orch.loading.epoch import Epochs
from pyg_orch.loading.feature_cache import (
    FeatureCache,
    build_feature_cache,
    device_budget,
    gather_features,
)
from pyg_orch.loading.graph_inputs import (
    graph_edge_weight,
    graph_sources,
    hot_features,
    loader_features,
    with_feature_dtype,
)
from pyg_orch.loading.producer import BatchProducer
from pyg_orch.loading.stats import LoaderStats, batch_stats
from pyg_orch.sampling import OrchNeighborSampler


class OrchLoader:
    """What :class:`~pyg_orch.OrchNeighborLoader` and
    :class:`~pyg_orch.OrchLinkNeighborLoader` share (a mixin).

    A loader calls :meth:`_prepare` before PyG's ``__init__`` and
    :meth:`_start` after it, and defines :meth:`_sample` and
    :meth:`seed_identity`.

    Example:
        >>> from pyg_orch import OrchLinkNeighborLoader
        >>> from pyg_orch.datasets import load_cora
        >>> loader = OrchLinkNeighborLoader(load_cora(), [5], batch_size=64,
        ...                                 hot_ratio=0.1, hot_method="degree")
        >>> isinstance(loader, OrchLoader), loader.hot_ratio, loader.cache.num_hot
        (True, 0.1, 271)
    """

    _hot_vertices: HotVertices
    # Set by PyG's loader classes.
    batch_size: int
    filter_per_worker: bool
    num_workers: int
    batch_sampler: Any

    def _prepare(
        self,
        data: Any,
        num_neighbors: Any,
        options: HotOptions,
        *,
        prefetch: int,
        device: torch.device | str | None,
        device_cache: int | str,
        check_finite: bool,
        feature_dtype: torch.dtype | None,
        kwargs: dict[str, Any],
        arguments: dict[str, Any] | None = None,
        no_hops: bool = False,
    ) -> Any:
        """Before PyG's ``__init__``: the arguments checked, the graph as read.

        Checks the arguments
        (:func:`~pyg_orch.loading.arguments.check_loader_arguments`), converts
        the features to ``feature_dtype``, gives ``kwargs`` the Numba sampler
        (built from ``arguments``, all the loader's arguments by name, where
        some came by position), and keeps the features the kernels read.
        With a device, the loader gathers ``x`` itself (page-locked, and only
        the rows the feature cache lacks), so PyG gets the graph without it.

        Returns:
            The graph to hand to PyG's loader.
        """
        given = arguments or kwargs
        # By name: a reordered signature cannot swap two checks.
        check_loader_arguments(
            data, num_neighbors, options, prefetch=prefetch, device=device,
            device_cache=device_cache, check_finite=check_finite, no_hops=no_hops,
            **{key: given[key] for key in _CHECKED if key in given},
        )  # fmt: skip
        # Each batch's tensors reuse the last batch's memory, already mapped.
        keep_freed_memory()
        user_data, data = data, with_feature_dtype(data, feature_dtype)
        if "batch_size" in kwargs:
            # A NumPy int passes the check, but DataLoader takes only an int.
            kwargs["batch_size"] = int(kwargs["batch_size"])
        if given.get("neighbor_sampler") is None:
            kwargs["neighbor_sampler"] = OrchNeighborSampler.for_loader(
                data, num_neighbors, given
            )
        self.features = loader_features(data, device is not None or options.wants_hot)
        self._hot_features = (
            hot_features(data) if isinstance(data, HeteroData) else self.features
        )
        # What the loader derives from the graph follows in-place changes.
        self._sources = graph_sources(
            user_data, data, self._hot_features,
            derived=options.wants_hot or device is not None,
        )  # fmt: skip
        self.device = torch.device(device) if device is not None else None
        if self.device is not None and self.features is not None:
            num_nodes = data.num_nodes
            data = copy.copy(data)
            del data.x
            data.num_nodes = num_nodes
        return data

    def _start(
        self,
        data: Any,
        sampler: Any,
        num_neighbors: Any,
        options: HotOptions,
        prefetch: int,
        device_cache: int | str,
        **seeds: Any,
    ) -> None:
        """After PyG's ``__init__``: the hot vertices, device caches, pipeline.

        Args:
            data: the graph PyG's loader got.
            sampler: the loader's sampler.
            num_neighbors: the fan-outs.
            options: the hot settings.
            prefetch: batches prepared ahead.
            device_cache: the device caches' budget.
            **seeds: what :meth:`~pyg_orch.hot.vertices.HotVertices.choose`
                presamples: ``input_nodes``, ``input_type``, ``neg_sampling``.
        """
        self.hot_method = options.hot_method
        self.prefetch = prefetch
        self.stats = LoaderStats()
        budget = device_budget(device_cache, self.device)
        self._hot_vertices = HotVertices(
            sampler,
            self._hot_features,
            self.device,
            options,
            num_neighbors,
            edge_weight=graph_edge_weight(data),
        )
        self._hot_vertices.choose(batch_size=self.batch_size, **seeds)
        budget -= self._hot_vertices.reserve_device(budget)
        self.feature_cache: FeatureCache | None = (
            None
            if self.features is None
            else build_feature_cache(self.features, sampler.row, budget, self.device)
        )
        self._epochs = Epochs()
        self._producer = BatchProducer(
            self._make_batch,
            self._hot_vertices,
            self.device,
            self.feature_cache,
            prefetch,
        )

    def _sample(self, index: Tensor | list[int]) -> Any:
        """The sampler's output for the seeds at ``index`` (PyG's collate)."""
        raise NotImplementedError

    def seed_identity(self) -> dict[str, Any]:
        """What identifies the seeds in a checkpoint: their number and fingerprint."""
        raise NotImplementedError

    @property
    def graph_sampler(self) -> Any:
        """The loader's sampler (PyG's ``node_sampler`` or ``link_sampler``)."""
        return self._hot_vertices.sampler

    @property
    def num_inputs(self) -> int:
        """The number of seeds (nodes or edges) an epoch visits."""
        raise NotImplementedError

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

    @property
    def tuning(self) -> HotRatioTuning | None:
        """What ``hot_ratio="auto"`` measured and chose, once it did."""
        return self._hot_vertices.tuning

    @property
    def super_batch(self) -> int:
        """Batches served by one re-sampled or embedded hot buffer."""
        return self._hot_vertices.super_batch

    @property
    def staleness(self) -> int:
        """Most training steps between the making of hot values and their use."""
        return self._hot_vertices.staleness

    @property
    def hot_fanout(self) -> int:
        """Neighbours sampled per hot vertex when its values are re-made."""
        return self._hot_vertices.fanout

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
        on the same ``batches`` batches after a warm-up one, in
        :data:`~pyg_orch.hot.tuning.AUTO_ROUNDS` rounds that each visit every
        candidate, and keeps the choice of
        :func:`~pyg_orch.hot.tuning.choose_hot_ratio` on the medians. Called by
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
        tuning = self._hot_vertices.tune(
            functools.partial(serve, self),
            functools.partial(self._producer.time, self.batch_sampler, step_seconds),
            ratios,
            batches,
            overlap=self.prefetch > 0,
        )
        self.stats.reset()
        return tuning

    @property
    def uses_pipeline(self) -> bool:
        """Whether iterating runs the :class:`~pyg_orch.loading.pipeline.Pipeline`."""
        return (
            self.prefetch > 0 or self.device is not None or self._hot_vertices.dynamic
        )

    def __iter__(self) -> Any:
        self._hot_vertices.check_ready()
        if not self.uses_pipeline:
            return super().__iter__()
        if self.num_workers > 0:
            raise ValueError(
                "prefetch, device and the resample and embedding cache modes run "
                "in pyg_orch's own threads, not in DataLoader worker processes: "
                "set num_workers=0"
            )
        epoch = self._epochs.next_plan(self.batch_sampler)
        pipeline = self._producer.pipeline(epoch)
        self._epochs.track(pipeline, epoch)
        return pipeline

    def close(self) -> None:
        """Stops the background threads of every open iteration, if any."""
        self._epochs.close()

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
            >>> from pyg_orch import OrchNeighborLoader
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
        hot = self._hot_vertices.state()
        return {
            "identity": loader_identity(self),
            **hot,
            "position": self._epochs.position(self.super_batch),
        }

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
        check_state(state, self, self._hot_vertices)
        self._hot_vertices.restore(state)
        self._epochs.resume(state["position"])

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()

    def collate_fn(self, index: Tensor | list[int]) -> Any:
        # PyG's collate_fn with the sampling timed: with filter_per_worker,
        # filtering happens in here too.
        tick = time.perf_counter()
        out = self._sample(index)
        out.sample_seconds = time.perf_counter() - tick
        return self.filter_fn(out) if self.filter_per_worker else out

    def filter_fn(self, out: Any) -> Data | HeteroData:
        tick = time.perf_counter()
        if self._sources.sync():  # the graph changed in place: remake its values
            if self.cache is not None:
                self.cache.drop_values()
            if self.feature_cache is not None:
                self.feature_cache.reload(self.features)
        batch = super().filter_fn(out)
        if self.device is not None and self.features is not None:
            gather_features(batch, self.features, self.feature_cache)
        self._hot_vertices.annotate(batch)
        sample_seconds = getattr(out, "sample_seconds", 0.0)
        self.stats.add(batch_stats(batch, sample_seconds, time.perf_counter() - tick))
        return batch

    def _make_batch(self, seeds: list[int]) -> Data | HeteroData:
        # One batch as the DataLoader makes it, in the calling thread.
        out = self.collate_fn(seeds)
        return out if self.filter_per_worker else self.filter_fn(out)


# The arguments besides the hot settings check_loader_arguments looks at.
_CHECKED = ("input_nodes", "batch_size", "num_workers")
