"""A loader's pipeline epochs: what decides each, and the position a checkpoint saves.

An epoch that runs through the :class:`~pyg_orch.Pipeline` is drawn up front
(:func:`draw_epoch`): its batches, the sampler's generator and the hot
refresher's seed. :class:`Epochs` keeps the iterations started from such
plans, so that ``loader.state_dict()`` can save where the current one is
(:meth:`Epochs.position`) and ``loader.load_state_dict()`` can resume it
(:meth:`Epochs.resume`).
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor

from pyg_orch.checks import check_index, check_keys, is_int
from pyg_orch.checks import checkpoint_key as _key
from pyg_orch.checks import describe as _describe
from pyg_orch.loading.pipeline import Pipeline, PipelineStats


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


def draw_epoch(batch_sampler: Iterable[list[int]]) -> EpochPlan:
    """A new epoch's plan, drawn from torch's global generator.

    Drawn in the training thread, so a seeded run is reproducible whatever
    the thread timing: the batch order, the sampler's seeds and the
    refresher's seeds.

    Args:
        batch_sampler: the loader's batches of seed indices.

    Example:
        >>> _ = torch.manual_seed(0)
        >>> plan = draw_epoch([[0, 1], [2]])
        >>> _ = torch.manual_seed(0)
        >>> plan.refresh_seed == draw_epoch([[0, 1], [2]]).refresh_seed, plan.jobs
        (True, [[0, 1], [2]])
    """
    jobs = list(batch_sampler)
    generator = torch.Generator()
    generator.manual_seed(int(torch.randint(0, 2**62, (1,))))
    refresh_seed = int(torch.randint(0, 2**62, (1,)))
    return EpochPlan(jobs, generator.get_state(), refresh_seed)


class Epochs:
    """The pipeline iterations of one loader, and where the current one stands.

    Each iteration runs on its own, as ``NeighborLoader``'s do: a second
    ``iter(loader)`` (an evaluation pass, a peek) leaves the first alone.
    Iterations are kept weakly, so that dropping an iterator closes its
    threads; their plans and counters are kept beside them, so that the
    position outlives the iterator (a loop left early, a dropped one).

    Example:
        >>> epochs = Epochs()
        >>> plan = epochs.next_plan([[0, 1], [2]])
        >>> pipeline = Pipeline(plan.jobs, lambda i, job: (job, None), prefetch=0)
        >>> epochs.track(pipeline, plan)
        >>> next(pipeline)
        [0, 1]
        >>> epochs.position(super_batch=8)["next"]
        1
        >>> epochs.close()
    """

    def __init__(self) -> None:
        # The pipeline iterations started, with their epochs and counters.
        self._iterations: list[
            tuple[weakref.ref[Pipeline], EpochPlan, PipelineStats]
        ] = []
        # A loaded position not resumed yet.
        self._resume: EpochPlan | None = None

    def next_plan(self, batch_sampler: Iterable[list[int]]) -> EpochPlan:
        """The plan of the next iteration: a loaded position, else a new epoch."""
        epoch = self._resume or draw_epoch(batch_sampler)
        self._resume = None
        return epoch

    def track(self, pipeline: Pipeline, epoch: EpochPlan) -> None:
        """Keeps ``pipeline``, started for ``epoch``, for :meth:`position`."""
        self._iterations = [i for i in self._iterations if i[0]() is not None]
        self._iterations.append((weakref.ref(pipeline), epoch, pipeline.stats))

    def close(self) -> None:
        """Stops the background threads of every open iteration, if any."""
        for pipeline, _, _ in self._iterations:
            if pipeline() is not None:
                pipeline().close()
        self._iterations = []

    def position(self, super_batch: int) -> dict[str, Any] | None:
        """Where the current epoch stands, for a checkpoint (``None``: nowhere).

        The current epoch is a loaded position not resumed yet, else the one
        unfinished iteration still open, else the latest one left early.

        Args:
            super_batch: batches served by one hot buffer: the buffers the
                rest of the epoch reads are saved, not the older ones.

        Raises:
            RuntimeError: more than one iteration is open and unfinished.
        """
        if self._resume is not None:
            epoch, steps = self._resume, self._resume.start
        elif (current := self._current()) is not None:
            epoch, steps = current[0], current[1].steps
        else:
            return None
        first_needed = steps // super_batch
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

    def _current(self) -> tuple[EpochPlan, PipelineStats] | None:
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

    def resume(self, position: dict[str, Any] | None) -> None:
        """Makes the next iteration resume a checked :meth:`position`.

        Example:
            >>> epochs = Epochs()
            >>> position = {"jobs": [[0], [1]], "next": 1, "refresh_seed": 3,
            ...             "generator_state": torch.Generator().get_state(),
            ...             "refreshes": {}}
            >>> epochs.resume(position)
            >>> epochs.next_plan([[5]]).start
            1
        """
        self._resume = (
            None
            if position is None
            else EpochPlan(
                position["jobs"],
                position["generator_state"],
                position["refresh_seed"],
                position["next"],
                # A copy: the refresher updates it as the epoch goes on.
                dict(position["refreshes"]),
            )
        )


#: The keys of a checkpoint's epoch position.
POSITION_KEYS = ("jobs", "generator_state", "refresh_seed", "next", "refreshes")


def check_position(
    position: Any,
    *,
    pipelined: bool,
    batch_size: int | None,
    num_inputs: int,
    super_batch: int,
    mode: Any,
) -> None:
    """Raises a :class:`ValueError` naming the key unless a saved position fits.

    Args:
        position: a checkpoint's ``position``, not ``None``.
        pipelined: whether the loader runs its epochs through the pipeline.
        batch_size: its batch size (``None`` with a batch sampler).
        num_inputs: its seeds (nodes or edges).
        super_batch: batches served by one hot buffer.
        mode: the checkpoint's cache mode.

    Example:
        >>> check_position({"jobs": [[0]], "next": 0}, pipelined=True,
        ...                batch_size=1, num_inputs=1, super_batch=8, mode=None)
        Traceback (most recent call last):
        ...
        ValueError: checkpoint key 'position' lacks the keys ['generator_state', 'refresh_seed', 'refreshes']; was it saved by state_dict() of this version of pyg_orch?
    """  # noqa: E501 - a doctest's output is one line
    check_keys(position, POSITION_KEYS, _key("position"))
    if not (pipelined or mode in ("resample", "embedding")):
        raise ValueError(
            f"{_key('position')} holds an unfinished epoch, but this loader runs "
            f"without its pipeline (prefetch=0, no device, static hot values): "
            f"its batches come from the global generator, as NeighborLoader's, "
            f"and cannot resume mid-epoch. Build it with the prefetch and device "
            f"of the saved one"
        )
    jobs = position["jobs"]
    _check_jobs(jobs, batch_size, num_inputs)
    check_index(position["next"], len(jobs), "position.next", " (the epoch's batches)")
    try:
        torch.Generator().set_state(position["generator_state"])
    except (TypeError, RuntimeError) as error:
        raise ValueError(
            f"{_key('position.generator_state')} is not the state of a "
            f"torch.Generator ({error})"
        ) from None
    check_index(position["refresh_seed"], 2**62, "position.refresh_seed")
    _check_refreshes(position["refreshes"], position["next"], super_batch, mode)


def _check_jobs(jobs: Any, batch_size: int | None, num_inputs: int) -> None:
    # Each batch holds indices into the loader's input nodes; a loader given
    # a batch_sampler has no batch_size.
    most = num_inputs if batch_size is None else batch_size
    if not (
        isinstance(jobs, list)
        and jobs
        and all(isinstance(job, list) and 0 < len(job) <= most for job in jobs)
    ):
        raise ValueError(
            f"{_key('position.jobs')} must be a non-empty list of batches, each a "
            f"non-empty list of at most {most} seed indices (the batch size)"
        )
    for job in jobs:
        for index in job:
            if not is_int(index) or not 0 <= index < num_inputs:
                raise ValueError(
                    f"{_key('position.jobs')} holds the seed index {index!r}, but "
                    f"this loader has {num_inputs} input nodes"
                )


def _check_refreshes(refreshes: Any, start: int, super_batch: int, mode: Any) -> None:
    # The hot buffers started before the interruption that the rest of the
    # epoch reads: those of the batch at `start` and the next super-batch.
    if not isinstance(refreshes, dict):
        raise ValueError(
            f"{_key('position.refreshes')} must be a dict, got {_describe(refreshes)}"
        )
    if refreshes and mode not in ("resample", "embedding"):
        raise ValueError(
            f"{_key('position.refreshes')} holds re-made hot buffers, but "
            f"cache_mode is {mode!r}, which makes none"
        )
    first = start // super_batch
    for version, started in refreshes.items():
        key = f"position.refreshes[{version!r}]"
        if not is_int(version) or version not in (first, first + 1):
            raise ValueError(
                f"{_key(key)}: the batch at position.next={start} reads hot "
                f"buffer {first} or {first + 1}, with super_batch={super_batch}"
            )
        if not (isinstance(started, tuple) and len(started) == 2):
            raise ValueError(
                f"{_key(key)} must be a pair (step, weights), got {_describe(started)}"
            )
        check_index(started[0], start, key + "[0]", " (steps before position.next)")
        weights = started[1]
        if mode == "resample" and weights is not None:
            raise ValueError(f"{_key(key + '[1]')} must be None in resample mode")
        if mode == "embedding" and not (
            isinstance(weights, dict)
            and all(isinstance(value, Tensor) for value in weights.values())
        ):
            raise ValueError(
                f"{_key(key + '[1]')} must be the bottom layer's state_dict() in "
                f"embedding mode, got {_describe(weights)}"
            )
