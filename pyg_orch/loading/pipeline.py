"""The pipeline: the CPU prepares the next batches while the device trains.

Two kinds of background thread, both named ``pyg_orch-*``:

- a *producer* samples, gathers and copies batches ``i+1 .. i+k`` while the
  training loop (the *consumer*) trains on batch ``i`` (:class:`Pipeline`);
- a *refresher* recomputes the hot values (re-sampled aggregates or layer-0
  embeddings) for the next super-batch
  (:class:`~pyg_orch.hot.refresher.HotRefresher`).

The consumer checks the staleness bound (see :mod:`pyg_orch.hot.refresher`)
on every batch: it blocks rather than use older hot values.

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

import torch
from torch import Tensor

from pyg_orch.hot.refresher import POLL_SECONDS, THREAD_PREFIX, Failure, HotRefresher


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
                item = self._queue.get(timeout=POLL_SECONDS)
                break
            except queue.Empty:
                if self.refresher is not None:
                    self.refresher.raise_failure()
                if not self._thread.is_alive() and self._queue.empty():
                    raise RuntimeError("the pyg_orch producer thread stopped") from None
        self.stats.wait_seconds += time.perf_counter() - tick
        if isinstance(item, Failure):
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
                self._thread.join(timeout=POLL_SECONDS)
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
            item = Failure(error)
        while not stop.is_set():
            try:
                out.put(item, timeout=POLL_SECONDS)
                break
            except queue.Full:
                continue
        if isinstance(item, Failure):
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
