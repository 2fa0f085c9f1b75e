"""A Numba kernel drawing each hot node's sources anew: :func:`pick_columns`.

What the hot refresher samples for ``cache="resample"`` and
``cache="embedding"``: up to a fan-out of in-neighbours per hot node, each
node from its own random stream, on one node type or on a relation between
two.
"""

import numpy as np
from numba import njit

from pyg_orch.kernels.sample import num_picks, pick_neighbors, substream


@njit(cache=True, nogil=True)
def pick_columns(
    colptr: np.ndarray, row: np.ndarray, nodes: np.ndarray, fanout: int, seed: int
) -> tuple[np.ndarray, np.ndarray]:
    """Up to ``fanout`` in-neighbours of each of ``nodes``, without replacement.

    Node ``i`` draws from its own stream of ``seed``; ``fanout=-1`` takes all
    of its in-neighbours, in the order of ``row``. ``row``'s entries may be
    ids of another node type than ``nodes`` (a relation between two types).

    Returns:
        ``(ptr, source)``: node ``i``'s picks are ``source[ptr[i]:ptr[i + 1]]``.

    Example:
        >>> colptr, row = np.array([0, 2, 3, 3]), np.array([1, 2, 2])
        >>> ptr, source = pick_columns(colptr, row, np.array([0, 2]), -1, 0)
        >>> ptr.tolist(), source.tolist()
        ([0, 2, 2], [1, 2])
    """
    count = nodes.shape[0]
    ptr = np.zeros(count + 1, dtype=np.int64)
    most = 0
    for i in range(count):
        picks = num_picks(fanout, colptr[nodes[i] + 1] - colptr[nodes[i]], False)
        ptr[i + 1] = ptr[i] + picks
        most = max(most, picks)
    source = np.empty(ptr[count], dtype=row.dtype)
    position = np.empty(most, dtype=np.int64)
    state = np.empty(1, dtype=np.uint64)
    for i in range(count):
        begin = colptr[nodes[i]]
        picks = ptr[i + 1] - ptr[i]
        state[0] = substream(np.uint64(seed), i)
        pick_neighbors(colptr[nodes[i] + 1] - begin, picks, False, state, position)
        for j in range(picks):
            source[ptr[i] + j] = row[begin + position[j]]
    return ptr, source
