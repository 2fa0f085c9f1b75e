"""``hot_ratio="auto"``: the ratio that hides the CPU's work under the device's.

The candidates (:data:`AUTO_RATIOS`) are timed in rounds
(:data:`AUTO_ROUNDS`), and :func:`choose_hot_ratio` keeps, on the medians,
the smallest ratio within :data:`AUTO_MARGIN` of the best.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

#: The ratios hot_ratio="auto" measures; NeutronOrch sweeps 0.05 to 0.25.
AUTO_RATIOS = (0.0, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3)


@dataclass
class HotRatioTuning:
    """What ``hot_ratio="auto"`` measured, per candidate ratio, and chose.

    Attributes:
        ratios: the candidate hot ratios.
        cpu_seconds: median CPU time per batch (sample, gather, copy, and the
            share of a hot refresh) at each ratio, over
            :data:`AUTO_ROUNDS` rounds.
        device_seconds: median device time per batch (forward and backward).
        overlap: whether the CPU work runs beside the device's (a pipeline).
        chosen: the chosen ratio.

    Example:
        >>> tuning = HotRatioTuning([0.0, 0.1], [0.03, 0.01], [0.02, 0.02],
        ...                         overlap=True, chosen=0.1)
        >>> print(tuning.table())
        hot_ratio  cpu ms  device ms  batch ms
        0            30.0       20.0      30.0
        0.1 *        10.0       20.0      20.0
        batch = max(cpu, device), medians of 3 rounds; a larger ratio is chosen only 5% cheaper than the best smaller one
    """  # noqa: E501 - a doctest's output is one line

    ratios: list[float]
    cpu_seconds: list[float]
    device_seconds: list[float]
    overlap: bool
    chosen: float

    def table(self) -> str:
        """The measurements, one line per ratio, the chosen one starred."""
        cost = "max(cpu, device)" if self.overlap else "cpu + device"
        lines = [f"{'hot_ratio':<9}{'cpu ms':>8}{'device ms':>11}{'batch ms':>10}"]
        for ratio, cpu, device in zip(
            self.ratios, self.cpu_seconds, self.device_seconds, strict=True
        ):
            name = f"{ratio:g}" + (" *" if ratio == self.chosen else "")
            batch = max(cpu, device) if self.overlap else cpu + device
            lines.append(
                f"{name:<9}{1000 * cpu:>8.1f}{1000 * device:>11.1f}"
                f"{1000 * batch:>10.1f}"
            )
        lines.append(
            f"batch = {cost}, medians of {AUTO_ROUNDS} rounds; a larger ratio "
            f"is chosen only {AUTO_MARGIN:.0%} cheaper than the best smaller one"
        )
        return "\n".join(lines)


#: How much cheaper per batch (a fraction) a larger hot ratio must measure
#: than the best smaller one to be chosen by ``hot_ratio="auto"``; below it,
#: the difference is within a shared machine's noise and the smaller ratio,
#: which costs less memory and setup, stays.
AUTO_MARGIN = 0.05
#: Rounds of measurements per candidate; each round visits every candidate,
#: and a candidate's time is the median over rounds.
AUTO_ROUNDS = 3


def choose_hot_ratio(
    ratios: list[float],
    cpu_seconds: list[float],
    device_seconds: list[float],
    overlap: bool = True,
    margin: float = AUTO_MARGIN,
) -> float:
    """The ratio with the cheapest batch, larger ones only by a clear margin.

    A batch costs ``max(cpu, device)`` with ``overlap`` (a pipeline runs the
    CPU and the device work at once, so the CPU work that fits under the
    device's is free) and ``cpu + device`` without. Walking up from the
    smallest ratio, a larger one is chosen only where it costs at least
    ``margin`` (a fraction, :data:`AUTO_MARGIN`) less than the choice so far.

    Example:
        >>> choose_hot_ratio([0.0, 0.1, 0.2], [3.0, 2.0, 1.0], [2.0, 2.0, 2.0])
        0.1
        >>> choose_hot_ratio([0.0, 0.1], [0.203, 0.2029], [0.0, 0.0])
        0.0
    """
    if not ratios:
        raise ValueError("choose_hot_ratio needs at least one candidate")
    costs = [
        max(cpu, device) if overlap else cpu + device
        for cpu, device in zip(cpu_seconds, device_seconds, strict=True)
    ]
    chosen = 0
    for index in range(1, len(ratios)):
        if costs[index] < costs[chosen] * (1 - margin):
            chosen = index
    return ratios[chosen]


def median_seconds(seconds: list[float]) -> float:
    """The median of ``seconds`` (0 for none).

    Example:
        >>> median_seconds([3.0, 1.0, 2.0])
        2.0
    """
    return statistics.median(seconds) if seconds else 0.0


def tune_ratio(
    use: Callable[[float], Any],
    measure: Callable[[int], tuple[float, float]],
    ratios: tuple[float, ...],
    batches: int,
    overlap: bool,
) -> HotRatioTuning:
    """Chooses ``hot_ratio="auto"`` from measurements at each candidate.

    See :meth:`~pyg_orch.OrchNeighborLoader.tune_hot_ratio`.

    Args:
        use: ``use(ratio)`` makes the hot set of ``ratio`` current and
            prepares its cache for the model.
        measure: ``measure(batches)``: median CPU and device seconds per
            batch over ``batches`` batches, at the current hot set.
        ratios: the candidates.
        batches: timed batches per candidate.
        overlap: whether CPU and device work run at once (a pipeline).

    Returns:
        The measurements and the choice, whose ratio is left in use.

    Example:
        >>> used = []
        >>> def measure(batches):  # CPU time falls with the hot ratio
        ...     return 1.0 - used[-1] if used else 1.0, 0.9
        >>> tune_ratio(used.append, measure, (0.0, 0.1, 0.2), batches=1,
        ...            overlap=True).chosen
        0.1
    """
    # A discarded round first: one-off costs (kernel compilation, lazy
    # initialisation, allocator growth) would otherwise land on the first.
    measure(1)
    # Rounds visit every candidate in turn, so that a slow spell of a
    # shared machine spreads over all of them; medians over rounds.
    rounds: list[list[tuple[float, float]]] = [[] for _ in ratios]
    for _ in range(AUTO_ROUNDS):
        for measured, ratio in zip(rounds, ratios, strict=True):
            use(ratio)
            measured.append(measure(batches))
    cpu = [median_seconds([c for c, _ in measured]) for measured in rounds]
    device = [median_seconds([d for _, d in measured]) for measured in rounds]
    chosen = choose_hot_ratio(list(ratios), cpu, device, overlap)
    use(chosen)
    return HotRatioTuning(list(ratios), cpu, device, overlap, chosen)
