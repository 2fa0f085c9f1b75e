"""``OrchNeighborLoader``: PyG's ``NeighborLoader`` with a hot/cold split.

A thin shell, as PyG's ``NeighborLoader`` is over ``NodeLoader`` and
``NeighborSampler``: it samples with :class:`~pyg_orch.OrchNeighborSampler`
and hands each job to the object that does it. The hot set, its cache and
what it serves live in :class:`~pyg_orch.hot.vertices.HotVertices`; the device caches
in :mod:`pyg_orch.hot.cache`; the batches the pipeline yields in
:class:`~pyg_orch.loading.producer.BatchProducer`; the epochs and the position a
checkpoint saves in :class:`~pyg_orch.loading.epoch.Epochs`; the per-batch
statistics in :mod:`pyg_orch.loading.stats`.
"""

from __future__ import annotations

import copy
import functools
import time
from typing import Any

import torch
from torch import Tensor
from torch_geometric.data import Data, HeteroData
from torch_geometric.loader import NeighborLoader

from pyg_orch.hot.choice import HotRatio, HotSet
from pyg_orch.hot.serving import HotServing
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
    hot_features,
    loader_features,
    with_feature_dtype,
)
from pyg_orch.loading.producer import BatchProducer
from pyg_orch.loading.stats import LoaderStats, batch_stats
from pyg_orch.sampling import OrchNeighborSampler


class OrchNeighborLoader(HotServing, NeighborLoader):
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
        data: the graph, a :class:`~torch_geometric.data.Data` or
            :class:`~torch_geometric.data.HeteroData` object. Its features
            ``x`` may be a NumPy array (an :class:`numpy.memmap` too), which
            is read in place.
        num_neighbors: neighbours to sample per node, one entry per hop
            (``-1``: all of them).
        hot_ratio: fraction of all vertices to make hot, in ``[0, 1]``; on a
            heterogeneous graph, of each node type's vertices, or a dict of
            fractions per node type (see :mod:`pyg_orch.hot.relation_cache`).
        hot_method: ``"presample"`` (count frontier appearances over
            ``presample_epochs`` sampled epochs) or ``"degree"`` (in-degree).
        hot: a precomputed hot set (a :class:`~pyg_orch.hot.choice.HotSet`, node
            ids, or a boolean mask) to use instead of choosing one; on a
            heterogeneous graph, ids number the node types back to back, in
            the sampler's order (see
            :func:`~pyg_orch.hot.choice.presample_counts`).
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
        feature_dtype: ``torch.bfloat16`` or ``torch.float16`` keeps the
            features and the device caches in half width (half the bytes
            gathered and copied), and the hot aggregates in
            :func:`~pyg_orch.hot.cache.hot_value_dtype` (float32 for float16,
            whose range a hub's sum passes); a float32 ``OrchModel``
            computes in float32 from them. ``data.x`` is converted once (a
            copy, ``data`` is left as it is): give it already converted to
            hold the features once. ``None``: ``data.x``'s own dtype.
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
        hot_ratio: HotRatio = 0.0,
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
        feature_dtype: torch.dtype | None = None,
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
        data = with_feature_dtype(data, feature_dtype)
        if "batch_size" in kwargs:
            # A NumPy int passes the check, but DataLoader takes only an int.
            kwargs["batch_size"] = int(kwargs["batch_size"])
        if kwargs.get("neighbor_sampler") is None:
            kwargs["neighbor_sampler"] = OrchNeighborSampler.for_loader(
                data, num_neighbors, kwargs
            )
        # With a device, the loader gathers x itself (page-locked, and only
        # the rows the feature cache lacks): PyG filters a graph without it.
        self.features = loader_features(
            data, device is not None or hot is not None or hot_ratio != 0
        )
        self.device = torch.device(device) if device is not None else None
        if self.device is not None and self.features is not None:
            num_nodes = data.num_nodes
            data = copy.copy(data)
            del data.x
            data.num_nodes = num_nodes
        super().__init__(data, num_neighbors, **kwargs)
        self.hot_method = hot_method
        self.prefetch = prefetch
        self.stats = LoaderStats()
        budget = device_budget(device_cache, self.device)
        self._hot_vertices = HotVertices(
            self.node_sampler,
            hot_features(data) if isinstance(data, HeteroData) else self.features,
            self.device,
            ratio=hot_ratio,
            mode=cache,
            super_batch=super_batch,
            num_neighbors=num_neighbors,
            staleness=staleness,
            fanout=hot_fanout,
            edge_weight=graph_edge_weight(data),
        )
        self._hot_vertices.choose(
            hot,
            hot_method,
            self.input_data.node,
            self.batch_size,
            presample_epochs,
            self.input_data.input_type,
        )
        budget -= self._hot_vertices.reserve_device(budget)
        self.feature_cache: FeatureCache | None = (
            None
            if self.features is None
            else build_feature_cache(
                self.features, self.node_sampler.row, budget, self.device
            )
        )
        self._epochs = Epochs()
        self._producer = BatchProducer(
            self._make_batch,
            self._hot_vertices,
            self.device,
            self.feature_cache,
            prefetch,
        )

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
            gather_features(batch, self.features, self.feature_cache)
        self._hot_vertices.annotate(batch)
        sample_seconds = getattr(out, "sample_seconds", 0.0)
        self.stats.add(batch_stats(batch, sample_seconds, time.perf_counter() - tick))
        return batch

    def _make_batch(self, seeds: list[int]) -> Data:
        # One batch as the DataLoader makes it, in the calling thread.
        out = self.collate_fn(seeds)
        return out if self.filter_per_worker else self.filter_fn(out)
