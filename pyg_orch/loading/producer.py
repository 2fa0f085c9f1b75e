"""A loader's finished batches: sampled, with their hot values, on the device.

What the pipeline's producer thread runs for each batch, and what
``hot_ratio="auto"`` times: the loader's CPU batch, the hot values of the
refresher's buffer filled in, then the copy to the device, completed there
from the device caches (:func:`~pyg_orch.loading.feature_cache.to_device`).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Iterable

import torch
from torch_geometric.data import Data

from pyg_orch.hot.refresher import HotRefresher
from pyg_orch.hot.serving import fill_hot
from pyg_orch.hot.tuning import median_seconds
from pyg_orch.hot.vertices import HotVertices
from pyg_orch.loading.epoch import EpochPlan
from pyg_orch.loading.feature_cache import FeatureCache, to_device
from pyg_orch.loading.pipeline import Pipeline
from pyg_orch.sampling import derived_seed, drawing_from


class BatchProducer:
    """Makes a loader's finished batches, in its pipeline or timed.

    Args:
        make_batch: ``make_batch(seeds)``: the loader's CPU batch for a list
            of seed indices (sampled, filtered, with its hot part).
        hot: the loader's hot vertices; read, never changed.
        device: where batches are delivered (``None``: left on the CPU).
        feature_cache: the feature rows kept on ``device``, if any.
        prefetch: batches a pipeline prepares ahead (0: none).

    Example:
        >>> from pyg_orch.hot.options import HotOptions
        >>> from pyg_orch.loading.epoch import draw_epoch
        >>> hot = HotVertices(None, None, None, HotOptions(), [5])
        >>> producer = BatchProducer(lambda seeds: Data(seeds=torch.tensor(seeds)),
        ...                          hot, device=None, feature_cache=None, prefetch=1)
        >>> pipeline = producer.pipeline(draw_epoch([[0, 1], [2]]))
        >>> [batch.seeds.tolist() for batch in pipeline]
        [[0, 1], [2]]
    """

    def __init__(
        self,
        make_batch: Callable[[list[int]], Data],
        hot: HotVertices,
        device: torch.device | None,
        feature_cache: FeatureCache | None,
        prefetch: int,
    ) -> None:
        self.make_batch, self.hot = make_batch, hot
        self.device, self.feature_cache = device, feature_cache
        self.prefetch = prefetch

    def pipeline(self, epoch: EpochPlan) -> Pipeline:
        """A :class:`~pyg_orch.Pipeline` of ``epoch``'s batches, from its start."""
        # Each batch draws (neighbours, negatives) from its own generator,
        # seeded from the epoch's and its index: what it draws does not depend
        # on what the batches before it drew, so an epoch resumes at any batch.
        generator = torch.Generator()
        generator.set_state(epoch.generator_state)
        epoch_seed = int(torch.randint(0, 2**62, (1,), generator=generator))
        refresher = self.hot.refresher(epoch.refresh_seed, epoch.start, epoch.refreshes)
        # The refresher serves what the loader served when it started.
        produce = functools.partial(
            self._produce, refresher, self.hot.served, epoch_seed
        )
        return Pipeline(
            epoch.jobs, produce, self.prefetch, refresher, self.device, epoch.start
        )

    def _produce(
        self,
        refresher: HotRefresher | None,
        served: tuple[str | None, int] | None,
        epoch_seed: int,
        index: int,
        seeds: list[int],
    ) -> tuple[Data, int | None]:
        generator = torch.Generator().manual_seed(derived_seed(epoch_seed, index))
        with drawing_from(generator):
            batch = self.make_batch(seeds)
        created = None
        if refresher is not None:
            values = refresher.values(index)
            fill_hot(batch, values.values)
            batch.hot_kind, batch.hot_version = served
            created = values.created
        if self.device is not None:
            batch = self._to_device(batch)
        return batch, created

    def _to_device(self, batch: Data) -> Data:
        return to_device(batch, self.device, self.hot.cache, self.feature_cache)

    def time(
        self,
        batch_sampler: Iterable[list[int]],
        step_seconds: Callable[[Data], float],
        batches: int,
    ) -> tuple[float, float]:
        """Median CPU and device seconds per batch over ``batches`` batches.

        The CPU side is sampling, gathering, copying and the per-batch share
        of a hot refresh; the device side is ``step_seconds(batch)``. The
        batches are the same at every call (drawn under a fixed seed, without
        touching the global random state), after a warm-up one.

        Example:
            >>> from pyg_orch.hot.options import HotOptions
            >>> hot = HotVertices(None, None, None, HotOptions(), [5])
            >>> producer = BatchProducer(lambda seeds: Data(), hot, None, None, 0)
            >>> producer.time([[0, 1], [2], [3]], lambda batch: 0.5, batches=2)[1]
            0.5
        """
        cpu, device = [], []
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(0)  # the same batches for every candidate
            refresh_seconds, values = self.hot.refresh_once()
            for seeds in list(batch_sampler)[: batches + 1]:
                tick = time.perf_counter()
                batch = self.make_batch(seeds)
                if values is not None:
                    fill_hot(batch, values)
                if self.device is not None:
                    batch = self._to_device(batch)
                cpu.append(time.perf_counter() - tick + refresh_seconds)
                device.append(step_seconds(batch))
        # The first batch warms caches and kernels up.
        return median_seconds(cpu[1:]), median_seconds(device[1:])
