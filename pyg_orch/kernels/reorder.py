"""Numba kernels that reorder a graph's edges in the memory of one copy.

Partitioning a graph sorts its edges twice: by destination, to number each
part's edges as one range (:func:`counting_order`), and into the undirected
adjacency METIS reads (the power-law generator's row kernels, then
:func:`compact_rows`). torch's ``argsort`` and ``unique`` on ``E`` int64
keys take several times the edges' memory in temporaries; these take one
output array each. All serial; they release the GIL.

Example:
    >>> counting_order(np.array([2, 0, 2, 1]), 3).tolist()
    [1, 3, 0, 2]
"""

import numpy as np
from numba import njit


@njit(cache=True, nogil=True)
def counting_order(keys, num_keys):
    """The stable order of ``keys`` (each in ``[0, num_keys)``), by counting.

    ``keys[order]`` is sorted, equal keys in their first order: what
    ``argsort(keys, stable=True)`` gives, in one int64 array of ``len(keys)``
    and ``num_keys + 1`` counters.

    Example:
        >>> counting_order(np.array([1, 0, 1]), 2).tolist()
        [1, 0, 2]
    """
    starts = np.zeros(num_keys + 1, dtype=np.int64)
    for key in keys:
        starts[key + 1] += 1
    for key in range(num_keys):
        starts[key + 1] += starts[key]
    order = np.empty(keys.shape[0], dtype=np.int64)
    for i in range(keys.shape[0]):
        key = keys[i]
        order[starts[key]] = i
        starts[key] += 1
    return order


@njit(cache=True, nogil=True)
def compact_rows(indptr, cols, counts):
    """Packs each row's first ``counts[v]`` entries together, in place.

    After ``pyg_orch.kernels.power_law.sort_unique_rows`` a row keeps
    its unique entries at its start; this moves them next to each other and
    returns the new pointers: ``cols[:xadj[-1]]`` is the packed CSR.

    Example:
        >>> cols = np.array([1, 9, 0, 2, 9])
        >>> xadj = compact_rows(np.array([0, 2, 5]), cols, np.array([1, 2]))
        >>> xadj.tolist(), cols[: xadj[-1]].tolist()
        ([0, 1, 3], [1, 0, 2])
    """
    xadj = np.zeros(counts.shape[0] + 1, dtype=np.int64)
    out = 0
    for v in range(counts.shape[0]):
        start = indptr[v]
        # out never passes start: the rows only shrink.
        for j in range(counts[v]):
            cols[out + j] = cols[start + j]
        out += counts[v]
        xadj[v + 1] = out
    return xadj
