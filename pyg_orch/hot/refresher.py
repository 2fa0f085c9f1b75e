"""Re-made hot values: the refresher thread and its staleness bound.

In ``cache="resample"`` and ``cache="embedding"`` modes the hot values are
re-made for every ``super_batch`` batches by a background thread named
``pyg_orch-refresh`` (:class:`HotRefresher`): re-sampled aggregates, or the
bottom layer's outputs from a snapshot of its weights
(:func:`cache_refresher` builds one for a loader's cache).

Staleness is counted in training steps: batch ``t`` is handed to the training
loop after ``t`` steps. Hot values made at step ``c`` may be used by batch
``t`` only if ``t - c <= staleness``. The refresher starts each buffer late
enough for that to hold, and the loader's pipeline
(:class:`~pyg_orch.loading.pipeline.Pipeline`) checks it on every batch: it
blocks rather than use older values.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch
from torch import Tensor

from pyg_orch.checks import checkpoint_key as _key
from pyg_orch.hot.cache import HotCache
from pyg_orch.sampling import derived_seed

if TYPE_CHECKING:
    pass

# How often a blocked thread wakes up to see whether it should stop.
POLL_SECONDS = 0.05

THREAD_PREFIX = "pyg_orch-"


def refresh_seed(base_seed: int, version: int) -> int:
    """The sampler seed of hot buffer ``version``, independent of the others.

    Example:
        >>> refresh_seed(0, 1) != refresh_seed(0, 2)
        True
    """
    return derived_seed(base_seed, version)


@dataclass
class HotValues:
    """One buffer of hot values and the training step it was made at.

    Attributes:
        version: the super-batch it serves.
        created: training steps done when it was started.
        values: ``[num_hot, C]``, in the hot set's order.

    Example:
        >>> HotValues(version=2, created=9, values=torch.zeros(3, 4)).created
        9
    """

    version: int
    created: int
    values: Tensor


class Failure:
    """A worker thread's exception, passed to the consumer, who raises it.

    Example:
        >>> Failure(ValueError("boom")).error.args
        ('boom',)
    """

    def __init__(self, error: BaseException) -> None:
        self.error = error


class HotRefresher:
    """Hot values recomputed by a worker thread, within a staleness bound.

    Buffer ``k`` serves the batches ``k * super_batch .. (k + 1) * super_batch
    - 1``. It is started at training step ``max(0, (k + 1) * super_batch - 1 -
    staleness)``, so its last use is at most ``staleness`` steps after it was
    made, and never before buffer ``k - 1`` is in use (double buffering).

    Args:
        compute: ``compute(version, payload) -> Tensor``, run in the worker.
        super_batch: batches served by one buffer (``P``).
        staleness: most training steps between a buffer's start and its last
            use; at least ``super_batch - 1``.
        snapshot: called in the training thread when a buffer is started; its
            result is the ``payload`` (e.g. a copy of the current weights).
        seed: the base seed ``compute`` draws from, kept for reproduction.
        first_version: the first buffer to make (``start // super_batch`` for
            a pipeline resumed at batch ``start``).
        started: the buffers started and still needed, ``version -> (step,
            payload)``, kept up to date here so that a checkpoint can save
            them. Those it holds at construction (a resumed epoch's, started
            before the interruption) are made first, from the step and payload
            they were started with, as in the uninterrupted run.

    Example:
        >>> refresher = HotRefresher(lambda k, _: torch.full((1,), k),
        ...                          super_batch=2, staleness=1)
        >>> refresher.on_step(0)
        >>> refresher.values(1).values.tolist()
        [0]
        >>> refresher.close()
    """

    def __init__(
        self,
        compute: Callable[[int, Any], Tensor],
        super_batch: int,
        staleness: int,
        snapshot: Callable[[], Any] | None = None,
        seed: int | None = None,
        first_version: int = 0,
        started: dict[int, tuple[int, Any]] | None = None,
    ) -> None:
        check_staleness(super_batch, staleness)
        self.super_batch, self.staleness, self.seed = super_batch, staleness, seed
        self._compute, self._snapshot = compute, snapshot
        self._requests: queue.Queue = queue.Queue()
        self._buffers: dict[int, HotValues] = {}
        self._changed = threading.Condition()
        self.started = {} if started is None else started
        for version, (step, payload) in sorted(self.started.items()):
            self._requests.put((version, step, payload))
        self._next_version = max([first_version, *(v + 1 for v in self.started)])
        self._error: BaseException | None = None
        self._closed = False
        self._thread = threading.Thread(
            target=self._run, name=f"{THREAD_PREFIX}refresh", daemon=True
        )
        self._thread.start()

    def start_step(self, version: int) -> int:
        """The training step at which buffer ``version`` is started."""
        return max(0, (version + 1) * self.super_batch - 1 - self.staleness)

    def on_step(self, step: int) -> None:
        """Starts the buffers due at training ``step``; called by the consumer."""
        self.raise_failure()
        for version in [v for v in self.started if v < step // self.super_batch]:
            del self.started[version]  # no batch from this step on reads it
        # At most the buffer in use and the next one exist at a time.
        newest = step // self.super_batch + 1
        while (
            self._next_version <= newest and self.start_step(self._next_version) <= step
        ):
            payload = self._snapshot() if self._snapshot is not None else None
            self.started[self._next_version] = (step, payload)
            self._requests.put((self._next_version, step, payload))
            self._next_version += 1

    def values(self, batch_index: int) -> HotValues:
        """The buffer for batch ``batch_index``; blocks until it is made."""
        version = batch_index // self.super_batch
        with self._changed:
            self._changed.wait_for(
                lambda: version in self._buffers or self._error or self._closed
            )
            self.raise_failure()
            if self._closed:
                raise RuntimeError("the hot refresher was closed")
            for old in [v for v in self._buffers if v < version]:
                del self._buffers[old]
            return self._buffers[version]

    def raise_failure(self) -> None:
        """Raises the worker's exception, if it had one."""
        if self._error is not None:
            raise RuntimeError("the pyg_orch hot refresher failed") from self._error

    def close(self) -> None:
        """Stops and joins the worker thread."""
        with self._changed:
            self._closed = True
            self._changed.notify_all()
        self._requests.put(None)
        self._thread.join()

    def _run(self) -> None:
        while True:
            request = self._requests.get()
            if request is None or self._closed:
                return
            version, step, payload = request
            try:
                values = self._compute(version, payload)
            except BaseException as error:  # noqa: BLE001 - handed to the consumer
                with self._changed:
                    self._error = error
                    self._changed.notify_all()
                return
            with self._changed:
                self._buffers[version] = HotValues(version, step, values)
                self._changed.notify_all()


def check_staleness(super_batch: int, staleness: int) -> None:
    """Raises a :class:`ValueError` naming the argument if the pair is invalid.

    Example:
        >>> check_staleness(super_batch=4, staleness=3)
    """
    if isinstance(super_batch, bool) or not isinstance(super_batch, int):
        raise ValueError(f"super_batch must be an int >= 1, got {super_batch!r}")
    if super_batch < 1:
        raise ValueError(f"super_batch must be >= 1, got {super_batch}")
    if isinstance(staleness, bool) or not isinstance(staleness, int):
        raise ValueError(f"staleness must be an int, got {staleness!r}")
    if staleness < super_batch - 1:
        raise ValueError(
            f"staleness must be at least super_batch - 1 = {super_batch - 1} (a "
            f"buffer serves super_batch batches), got {staleness}; lower "
            f"super_batch or raise staleness"
        )


def check_saved_weights(layer: torch.nn.Module, refreshes: dict[int, Any]) -> None:
    """Raises a :class:`ValueError` unless the saved snapshots fit ``layer``.

    Args:
        layer: a snapshot of the bottom layer of the model serving the loader.
        refreshes: a position's ``refreshes`` in embedding mode.

    Example:
        >>> layer = torch.nn.Linear(2, 2)
        >>> check_saved_weights(layer, {0: (0, torch.nn.Linear(2, 2).state_dict())})
        >>> check_saved_weights(layer, {1: (0, torch.nn.Linear(3, 2).state_dict())})
        Traceback (most recent call last):
        ...
        ValueError: checkpoint key 'position.refreshes[1]' holds weights that do not fit the bottom layer of the model serving this loader (...); wrap the model of the saved run
    """  # noqa: E501 - a doctest's output is one line
    for version, (_, weights) in refreshes.items():
        try:
            layer.load_state_dict(weights)
        except RuntimeError as error:
            raise ValueError(
                f"{_key(f'position.refreshes[{version}]')} holds weights that do "
                f"not fit the bottom layer of the model serving this loader "
                f"({error}); wrap the model of the saved run"
            ) from None


def cache_refresher(
    cache: HotCache | Any | None,
    fanout: int,
    super_batch: int,
    staleness: int,
    base_seed: int,
    start: int,
    started: dict[int, tuple[int, Any]],
) -> HotRefresher | None:
    """The refresher of an epoch's hot values (``None`` for static ones).

    Args:
        cache: the loader's hot cache, served.
        fanout: neighbours sampled per hot vertex.
        super_batch: batches served by one buffer.
        staleness: the staleness bound.
        base_seed: the epoch's refresh seed.
        start: the first batch of the epoch to produce.
        started: the epoch's hot buffers started and still needed
            (see :class:`~pyg_orch.loading.epoch.EpochPlan`), kept up to date.

    Raises:
        RuntimeError: embedding mode before a model serves the loader.
        ValueError: saved weights that do not fit the served layer.

    Example:
        >>> from pyg_orch import HotSet, OrchNeighborSampler
        >>> from pyg_orch.hot.options import HotOptions
        >>> from pyg_orch.hot.vertices import HotVertices
        >>> from pyg_orch.datasets import load_cora
        >>> data = load_cora()
        >>> options = HotOptions(cache="resample", super_batch=2)
        >>> hot = HotVertices(OrchNeighborSampler(data, [5]), data.x, None,
        ...                   options, [5])
        >>> hot.use(HotSet(torch.tensor([7]), torch.zeros(0), "given"))
        >>> version = hot.serve("mean")
        >>> refresher = hot.refresher(base_seed=0, start=0, started={})
        >>> refresher.on_step(0)
        >>> refresher.values(0).values.shape
        torch.Size([1, 1433])
        >>> refresher.close()
    """
    if cache is None or cache.mode == "static":
        return None
    kind = cache.kind
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
        super_batch,
        staleness,
        snapshot,
        seed=base_seed,
        first_version=start // super_batch,
        started=started,
    )


def refresh_once(
    cache: HotCache | Any | None, fanout: int, super_batch: int
) -> tuple[float, Tensor | None]:
    """One hot refresh, timed: seconds per batch of its super-batch, values.

    ``(0.0, None)`` for static values, which are never refreshed.

    Example:
        >>> refresh_once(None, fanout=5, super_batch=8)
        (0.0, None)
    """
    if cache is None or cache.mode == "static":
        return 0.0, None
    tick = time.perf_counter()
    if cache.mode == "resample":
        values = cache.resample(fanout, 0)
    else:
        values = cache.embed(cache.snapshot(), fanout, 0)
    return (time.perf_counter() - tick) / super_batch, values
