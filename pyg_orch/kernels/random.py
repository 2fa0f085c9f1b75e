"""Counter-based random numbers for the Numba kernels."""

import numpy as np
from numba import njit

GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MIX_1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX_2 = np.uint64(0x94D049BB133111EB)


@njit(cache=True, nogil=True, inline="always")
def splitmix64(counter: np.uint64) -> np.uint64:
    """The ``counter``-th output of a splitmix64 stream: 64 well-mixed bits.

    Counter-based, so any draw can be addressed directly, which keeps parallel
    or chunked kernels reproducible whatever the number of threads.
    """
    z = counter * GOLDEN
    z = (z ^ (z >> np.uint64(30))) * _MIX_1
    z = (z ^ (z >> np.uint64(27))) * _MIX_2
    return z ^ (z >> np.uint64(31))
