"""The pipeline: the CPU prepares the next batches while the device trains.

Two kinds of background thread, both named ``pyg_orch-*``:

- a *producer* samples, gathers and copies batches ``i+1 .. i+k`` while the
  training loop (the *consumer*) trains on batch ``i`` (:class:`Pipeline`);
- a *refresher* recomputes the hot values (re-sampled aggregates or layer-0
  embeddings) for the next super-batch (:class:`HotRefresher`).

Staleness is counted in training steps: batch ``t`` is handed to the training
loop after ``t`` steps. Hot values made at step ``c`` (re-sampled then, or
computed from a weight snapshot taken then) may be used by batch ``t`` only if
``t - c <= staleness``. The refresher starts each buffer late enough for that
to hold, and the consumer checks it on every batch: it blocks rather than use
older values.

Failures: an exception in a thread is raised in the training loop at the next
batch. :meth:`~pyg_orch.Pipeline.close` (also on garbage collection) stops and
joins every thread.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch import Tensor

# How often a blocked thread wakes up to see whether it should stop.
_POLL_SECONDS = 0.05

THREAD_PREFIX = "pyg_orch-"


def refresh_seed(base_seed: int, version: int) -> int:
    """The sampler seed of hot buffer ``version``, independent of the others.

    Example:
        >>> refresh_seed(0, 1) != refresh_seed(0, 2)
        True
    """
    state = np.random.SeedSequence([base_seed, version]).generate_state(1, np.uint64)
    return int(state[0] >> np.uint64(2))


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


class _Failure:
    """A worker's exception, passed to the consumer."""

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


@dataclass
class PipelineStats:
    """What the consumer saw.

    Attributes:
        steps: batches handed to the training loop.
        wait_seconds: time the training loop waited for batches.
        staleness: steps between each hot buffer's start and its use, per batch
            (empty without a refresher).

    Example:
        >>> pipeline = Pipeline([1, 2], lambda i, job: (job, None), prefetch=0)
        >>> _ = list(pipeline)
        >>> pipeline.stats.steps
        2
    """

    steps: int = 0
    wait_seconds: float = 0.0
    staleness: list[int] = field(default_factory=list)


class Pipeline(Iterator):
    """Produces batches on a background thread, ``prefetch`` ahead of training.

    Args:
        jobs: one entry per batch (e.g. the seed indices), in order.
        produce: ``produce(index, job) -> (batch, hot_created)``; runs in the
            producer thread (in the caller's with ``prefetch=0``) on a side
            CUDA stream when ``device`` is a GPU. ``hot_created`` is the
            training step the batch's hot values were made at, or ``None``.
        prefetch: batches prepared ahead (0: none, produce on demand).
        refresher: the hot refresher the batches read, if any; closed with
            the pipeline.
        device: where ``produce`` puts batches.
        start: the first batch to produce (to resume an interrupted epoch).

    Example:
        >>> pipeline = Pipeline([1, 2, 3], lambda i, job: (job * 10, None),
        ...                     prefetch=2)
        >>> list(pipeline)
        [10, 20, 30]
    """

    def __init__(
        self,
        jobs: Sequence[Any],
        produce: Callable[[int, Any], tuple[Any, int | None]],
        prefetch: int = 1,
        refresher: HotRefresher | None = None,
        device: torch.device | str | None = None,
        start: int = 0,
    ) -> None:
        self.jobs, self.produce, self.prefetch = jobs, produce, prefetch
        self.refresher = refresher
        self.stats = PipelineStats(steps=start)
        self._start = start
        device = torch.device(device) if device is not None else None
        self._device = device
        self._stream = (
            torch.cuda.Stream(device)
            if device is not None and device.type == "cuda"
            else None
        )
        self._queue: queue.Queue = queue.Queue(maxsize=max(prefetch, 1))
        self._stop = threading.Event()
        self._closed = False
        self._thread: threading.Thread | None = None
        if prefetch > 0:
            self._thread = threading.Thread(
                target=_produce_all,
                args=(jobs, start, produce, self._stream, self._queue, self._stop),
                name=f"{THREAD_PREFIX}prefetch",
                daemon=True,
            )
            self._thread.start()

    def __len__(self) -> int:
        return len(self.jobs) - self.start

    @property
    def start(self) -> int:
        """The batch this pipeline started at (0 unless resumed)."""
        return self._start

    def __next__(self) -> Any:
        step = self.stats.steps
        if self._closed or step == len(self.jobs):
            self.close()
            raise StopIteration
        try:
            if self.refresher is not None:
                self.refresher.on_step(step)
            batch, hot_created, event = self._next_item(step)
        except BaseException:
            self.close()
            raise
        if event is not None:
            # The copy ran on the side stream: train only after it is done,
            # and keep the allocator from reusing its memory before training
            # on the current stream is done with it.
            stream = torch.cuda.current_stream(self._device)
            stream.wait_event(event)
            _record_stream(batch, stream)
        if hot_created is not None:
            self._check_staleness(step, hot_created)
        self.stats.steps += 1
        return batch

    def _next_item(self, step: int) -> tuple[Any, int | None, Any]:
        if self._thread is None:
            return _produce_on(self._stream, self.produce, step, self.jobs[step])
        tick = time.perf_counter()
        while True:
            try:
                item = self._queue.get(timeout=_POLL_SECONDS)
                break
            except queue.Empty:
                if self.refresher is not None:
                    self.refresher.raise_failure()
                if not self._thread.is_alive() and self._queue.empty():
                    raise RuntimeError("the pyg_orch producer thread stopped") from None
        self.stats.wait_seconds += time.perf_counter() - tick
        if isinstance(item, _Failure):
            raise RuntimeError("the pyg_orch producer thread failed") from item.error
        return item

    def _check_staleness(self, step: int, hot_created: int) -> None:
        staleness = step - hot_created
        bound = self.refresher.staleness if self.refresher is not None else 0
        if staleness > bound:
            raise RuntimeError(
                f"batch {step} would use hot values made at step {hot_created}, "
                f"beyond the staleness bound {bound}; this is a pyg_orch bug"
            )
        self.stats.staleness.append(staleness)

    def close(self) -> None:
        """Stops and joins the pipeline's threads; safe to call twice."""
        if self._closed:
            return
        self._closed = True
        self._stop.set()
        if self.refresher is not None:
            self.refresher.close()
        if self._thread is not None and self._thread is not threading.current_thread():
            while self._thread.is_alive():
                _drain(self._queue)
                self._thread.join(timeout=_POLL_SECONDS)
            _drain(self._queue)

    def __del__(self) -> None:
        self.close()


def _produce_on(
    stream: Any, produce: Callable[[int, Any], Any], index: int, job: Any
) -> tuple[Any, int | None, Any]:
    """Runs ``produce`` (on ``stream`` if one is given): batch, hot step, event."""
    if stream is None:
        return (*produce(index, job), None)
    with torch.cuda.stream(stream):
        batch, hot_created = produce(index, job)
        event = torch.cuda.Event()
        event.record(stream)
    return batch, hot_created, event


def _produce_all(
    jobs: Sequence[Any],
    start: int,
    produce: Callable[[int, Any], Any],
    stream: Any,
    out: queue.Queue,
    stop: threading.Event,
) -> None:
    # Module-level, not a method: the thread must not keep the pipeline alive,
    # or dropping the iterator would never close it.
    for index in range(start, len(jobs)):
        if stop.is_set():
            return
        try:
            item = _produce_on(stream, produce, index, jobs[index])
        except BaseException as error:  # noqa: BLE001 - handed to the consumer
            item = _Failure(error)
        while not stop.is_set():
            try:
                out.put(item, timeout=_POLL_SECONDS)
                break
            except queue.Full:
                continue
        if isinstance(item, _Failure):
            return


def _record_stream(batch: Any, stream: Any) -> None:
    """Marks every CUDA tensor of ``batch`` (a tensor or a PyG batch) as used on
    ``stream``."""
    if isinstance(batch, Tensor):
        batch.record_stream(stream)
    elif hasattr(batch, "apply_"):
        batch.apply_(lambda tensor: tensor.record_stream(stream) or tensor)


def _drain(items: queue.Queue) -> None:
    while True:
        try:
            items.get_nowait()
        except queue.Empty:
            return
