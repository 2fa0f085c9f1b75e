"""Small timing helpers shared by the benchmarks."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable


def time_calls(
    call: Callable[[], object], repeats: int, warmup: int = 2
) -> list[float]:
    """Seconds taken by each of ``repeats`` calls of ``call``, after ``warmup``.

    Example:
        >>> len(time_calls(lambda: sum(range(10)), repeats=3))
        3
    """
    for _ in range(warmup):
        call()
    seconds = []
    for _ in range(repeats):
        start = time.perf_counter()
        call()
        seconds.append(time.perf_counter() - start)
    return seconds


def median_ms(seconds: list[float]) -> float:
    """The median of ``seconds``, in milliseconds.

    Example:
        >>> median_ms([0.001, 0.003, 0.002])
        2.0
    """
    return 1000.0 * statistics.median(seconds)
