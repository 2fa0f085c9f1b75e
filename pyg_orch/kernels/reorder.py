"""Numba kernels that reorder a graph's edges in the memory of one copy.

Partitioning a graph sorts its edges twice: by destination, to number each
part's edges as one range (:func:`counting_order`), and into the undirected
adjacency METIS reads (:func:`symmetric_fill`). torch's ``argsort`` and
``unique`` on ``E`` int64 keys take several times the edges' memory in
temporaries; these take one output array each. All serial; they release
the GIL.

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
def symmetric_degrees(src, dst, num_nodes):
    """Pointers of the undirected adjacency, duplicates still counted.

    ``pointers[u]:pointers[u + 1]`` will hold ``u``'s neighbours both ways,
    self loops left out (see :func:`symmetric_fill`).

    Example:
        >>> symmetric_degrees(np.array([0, 1]), np.array([1, 1]), 2).tolist()
        [0, 1, 2]
    """
    pointers = np.zeros(num_nodes + 1, dtype=np.int64)
    for e in range(src.shape[0]):
        if src[e] != dst[e]:
            pointers[src[e] + 1] += 1
            pointers[dst[e] + 1] += 1
    for u in range(num_nodes):
        pointers[u + 1] += pointers[u]
    return pointers


@njit(cache=True, nogil=True)
def symmetric_fill(src, dst, pointers, adjacency):
    """Fills the undirected adjacency: each node's neighbours sorted, once each.

    ``adjacency`` (``pointers[-1]`` entries, int32 or int64) receives both
    directions of every edge but self loops; each node's neighbours are
    then sorted and their repeats dropped, in place. Returns the new
    pointers: ``adjacency[:xadj[-1]]`` is the CSR METIS reads.

    Example:
        >>> src, dst = np.array([0, 1, 0]), np.array([1, 0, 2])
        >>> pointers = symmetric_degrees(src, dst, 3)
        >>> adjacency = np.empty(pointers[-1], dtype=np.int32)
        >>> xadj = symmetric_fill(src, dst, pointers, adjacency)
        >>> xadj.tolist(), adjacency[: xadj[-1]].tolist()
        ([0, 2, 3, 4], [1, 2, 0, 0])
    """
    num_nodes = pointers.shape[0] - 1
    fill = pointers[:-1].copy()
    for e in range(src.shape[0]):
        u, v = src[e], dst[e]
        if u != v:
            adjacency[fill[u]] = v
            fill[u] += 1
            adjacency[fill[v]] = u
            fill[v] += 1
    xadj = np.zeros(num_nodes + 1, dtype=np.int64)
    out = 0
    for u in range(num_nodes):
        segment = adjacency[pointers[u] : pointers[u + 1]]
        segment.sort()
        last = -1
        # out never passes the position read: the segments only shrink.
        for i in range(segment.shape[0]):
            v = segment[i]
            if v != last:
                adjacency[out] = v
                out += 1
                last = v
        xadj[u + 1] = out
    return xadj
