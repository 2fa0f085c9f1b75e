"""Runs one benchmark configuration in a fresh spawned process."""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def run_spawned(function: Callable[..., T], *args: object) -> T:
    """Returns ``function(*args)``, computed in a fresh spawned process.

    A fresh process gives each configuration its own peak RSS, device memory
    and caches; spawned, not forked, because CUDA and OpenMP thread pools do
    not survive a fork.

    Args:
        function: a module-level function (the child imports it by name).
        *args: its arguments, pickled to the child.

    Returns:
        What ``function`` returned, pickled back.

    Example:
        >>> import math
        >>> run_spawned(math.factorial, 5)
        120
    """
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        result = pool.apply(function, args)
        # Let the worker exit by itself before leaving the `with`, which would
        # terminate it: a SIGTERM during its exit cut it short before it
        # unregistered the semaphores it made (tqdm's lock, in presampling),
        # and the resource tracker warned at shutdown that they had leaked.
        pool.close()
        pool.join()
    return result
