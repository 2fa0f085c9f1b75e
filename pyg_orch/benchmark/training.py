"""A timed training loop, shared by the pipeline and GPU benchmarks."""

from __future__ import annotations

import contextlib
import itertools
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch_geometric.data import Data


@dataclass
class EpochTiming:
    """Where the time of a (partial) epoch went.

    Attributes:
        batches: batches trained.
        wall_seconds: the whole loop.
        train_seconds: forward, backward and update (device time on a GPU,
            measured with CUDA events).
        cpu_seconds: sampling and gathering, wherever they ran.
    """

    batches: int
    wall_seconds: float
    train_seconds: float
    cpu_seconds: float

    @property
    def ms_per_batch(self) -> float:
        """Wall milliseconds per batch."""
        return 1000 * self.wall_seconds / max(self.batches, 1)

    @property
    def busy(self) -> float:
        """Share of the wall time the training step (the device) was busy."""
        return self.train_seconds / self.wall_seconds if self.wall_seconds else 0.0

    @property
    def overlap(self) -> float:
        """Share of the shorter of CPU and training work hidden under the other.

        0 when they ran one after the other, 1 when the shorter one was
        entirely hidden.

        Example:
            >>> EpochTiming(1, wall_seconds=3.0, train_seconds=2.0,
            ...             cpu_seconds=2.0).overlap
            0.5
        """
        shorter = min(self.cpu_seconds, self.train_seconds)
        if shorter <= 0:
            return 0.0
        hidden = self.cpu_seconds + self.train_seconds - self.wall_seconds
        return min(max(hidden / shorter, 0.0), 1.0)


def timed_epoch(
    loader: Any,
    forward: Callable[[Data], torch.Tensor],
    optimizer: torch.optim.Optimizer,
    device: torch.device,
    max_batches: int | None = None,
    cpu_seconds: Callable[[], float] | None = None,
) -> EpochTiming:
    """Trains on ``loader`` (at most ``max_batches`` batches) and times it.

    Args:
        loader: yields batches (on the CPU or on ``device``).
        forward: the model's predictions for a batch's seed nodes.
        optimizer: steps after every batch.
        device: where training runs; CPU batches are copied there.
        max_batches: stop after this many batches.
        cpu_seconds: the CPU time the loader spent (e.g. from its statistics);
            when ``None``, everything but training counts as CPU time, as in a
            loop without a pipeline.

    Returns:
        The timing.
    """
    cuda = device.type == "cuda"
    events: list[tuple[Any, Any]] = []
    train_seconds = 0.0
    batches = 0
    start = time.perf_counter()
    # A pyg_orch loader closes its threads when the loop is cut short.
    closing = loader if hasattr(loader, "__exit__") else contextlib.nullcontext()
    with closing:
        for batch in itertools.islice(loader, max_batches):
            batch = batch.to(device, non_blocking=True)
            begin = _mark(cuda)
            optimizer.zero_grad()
            out = forward(batch)
            F.cross_entropy(out, batch.y[: batch.batch_size]).backward()
            optimizer.step()
            end = _mark(cuda)
            if cuda:
                events.append((begin, end))
            else:
                train_seconds += end - begin
            batches += 1
    if cuda:
        torch.cuda.synchronize(device)
        train_seconds = sum(b.elapsed_time(e) for b, e in events) / 1000
    wall = time.perf_counter() - start
    cpu = cpu_seconds() if cpu_seconds is not None else wall - train_seconds
    return EpochTiming(batches, wall, train_seconds, cpu)


def _mark(cuda: bool) -> Any:
    if not cuda:
        return time.perf_counter()
    event = torch.cuda.Event(enable_timing=True)
    event.record()
    return event
