"""Numba kernels of the synthetic power-law graph generator.

Every random draw is addressed by a counter (``splitmix64(key + k)``), so the
output depends only on the seed, never on chunking or the number of threads.
"""

import math

import numpy as np
from numba import njit

from pyg_orch.kernels.random import splitmix64

_LOW_32 = np.uint64(0xFFFFFFFF)
_LOW_24 = np.uint64(0xFFFFFF)
_TO_UNIT_24 = np.float32(1.0 / 16777216.0)  # 2**-24
_TWO_PI_24 = np.float32(2.0 * math.pi / 16777216.0)


@njit(cache=True, nogil=True)
def build_alias(weights: np.ndarray, prob: np.ndarray, alias: np.ndarray) -> None:
    # Vose's alias method; alias entries are positions within `weights`.
    size = weights.shape[0]
    scaled = weights * (size / weights.sum())
    small = np.empty(size, np.int64)
    large = np.empty(size, np.int64)
    num_small = 0
    num_large = 0
    for i in range(size):
        if scaled[i] < 1.0:
            small[num_small] = i
            num_small += 1
        else:
            large[num_large] = i
            num_large += 1
    while num_small > 0 and num_large > 0:
        num_small -= 1
        s = small[num_small]
        g = large[num_large - 1]
        prob[s] = scaled[s]
        alias[s] = g
        scaled[g] = (scaled[g] + scaled[s]) - 1.0
        if scaled[g] < 1.0:
            num_large -= 1
            small[num_small] = g
            num_small += 1
    # Leftovers are exactly 1 up to rounding: they alias themselves.
    for i in range(num_large):
        prob[large[i]] = 1.0
        alias[large[i]] = large[i]
    for i in range(num_small):
        prob[small[i]] = 1.0
        alias[small[i]] = small[i]


@njit(cache=True, nogil=True)
def alias_table(
    weights: np.ndarray, ids: np.ndarray, tags: np.ndarray, class_ptr: np.ndarray
) -> np.ndarray:
    """Packs one alias table per `class_ptr` segment into 16-byte records.

    Record k is ``[threshold << 32 | tag(k), id(alias) << 32 | tag(alias)]`` so
    a draw and the tag of its outcome cost one cache miss.
    """
    table = np.empty((weights.shape[0], 2), np.uint64)
    prob = np.empty(weights.shape[0])
    alias = np.empty(weights.shape[0], np.int64)
    for c in range(class_ptr.shape[0] - 1):
        lo, hi = class_ptr[c], class_ptr[c + 1]
        if hi > lo:
            build_alias(weights[lo:hi], prob[lo:hi], alias[lo:hi])
            alias[lo:hi] += lo
    for k in range(weights.shape[0]):
        # Clamped: rounding in Vose's loop can leave prob a hair outside [0, 1].
        threshold = np.uint64(min(max(prob[k], 0.0), 1.0) * 4294967295.0)
        table[k, 0] = (threshold << np.uint64(32)) | np.uint64(tags[k])
        a = alias[k]
        table[k, 1] = (np.uint64(ids[a]) << np.uint64(32)) | np.uint64(tags[a])
    return table


@njit(cache=True, nogil=True, inline="always")
def alias_draw(bits: np.uint64, lo: int, size: int, table: np.ndarray):
    # High 32 bits pick the bucket, low 32 bits flip its biased coin. Returns
    # (bucket or alias id, tag of the outcome).
    k = lo + int(((bits >> np.uint64(32)) * np.uint64(size)) >> np.uint64(32))
    head = table[k, 0]
    if (bits & _LOW_32) <= (head >> np.uint64(32)):
        return k, int(head & _LOW_32)
    tail = table[k, 1]
    return int(tail >> np.uint64(32)), int(tail & _LOW_32)


@njit(cache=True, nogil=True)
def sample_pairs(
    key: np.uint64,
    start: int,
    src: np.ndarray,
    dst: np.ndarray,
    homophily: float,
    table: np.ndarray,
    class_table: np.ndarray,
    class_ptr: np.ndarray,
) -> None:
    # `table` is tagged with labels (bucket k is node k); `class_table` is
    # tagged with node ids, so a class draw's tag is the node itself.
    num_nodes = table.shape[0]
    threshold = np.uint64(homophily * 4294967296.0)
    for i in range(src.shape[0]):
        # Three draws per pair, addressed by the global pair index, so any
        # chunking or thread count reproduces the same graph.
        counter = key + np.uint64(3 * (start + i))
        u, c = alias_draw(splitmix64(counter), 0, num_nodes, table)
        coin = splitmix64(counter + np.uint64(1)) & _LOW_32
        bits = splitmix64(counter + np.uint64(2))
        if coin < threshold:
            lo = class_ptr[c]
            _, v = alias_draw(bits, lo, class_ptr[c + 1] - lo, class_table)
        else:
            v, _ = alias_draw(bits, 0, num_nodes, table)
        src[i] = u
        dst[i] = v


@njit(cache=True, nogil=True)
def count_rows(src: np.ndarray, dst: np.ndarray, counts: np.ndarray) -> None:
    for i in range(src.shape[0]):
        if src[i] != dst[i]:
            counts[src[i]] += 1
            counts[dst[i]] += 1


@njit(cache=True, nogil=True)
def fill_rows(src: np.ndarray, dst: np.ndarray, cursor, cols: np.ndarray) -> None:
    for i in range(src.shape[0]):
        u, v = src[i], dst[i]
        if u != v:
            cols[cursor[u]] = v
            cursor[u] += 1
            cols[cursor[v]] = u
            cursor[v] += 1


@njit(cache=True, nogil=True, inline="always")
def sort_row(row: np.ndarray) -> None:
    # Most rows are short; insertion sort beats quicksort's call overhead there.
    if row.shape[0] > 24:
        row.sort()
        return
    for j in range(1, row.shape[0]):
        value = row[j]
        i = j - 1
        while i >= 0 and row[i] > value:
            row[i + 1] = row[i]
            i -= 1
        row[i + 1] = value


@njit(cache=True, nogil=True)
def sort_unique_rows(indptr, cols, counts, lo: int, hi: int) -> None:
    # In-row sort + unique: rows are short, so this beats a global pair sort.
    for v in range(lo, hi):
        row = cols[indptr[v] : indptr[v + 1]]
        sort_row(row)
        kept = 0
        for j in range(row.shape[0]):
            if kept == 0 or row[j] != row[kept - 1]:
                row[kept] = row[j]
                kept += 1
        counts[v] = kept


@njit(cache=True, nogil=True)
def merge_rows(indptr, cols, counts, add_ptr, add_cols, out_ptr, out_cols, lo, hi):
    # Sorted-unique union of each old row with its (sorted here) new entries.
    for v in range(lo, hi):
        old = cols[indptr[v] : indptr[v] + counts[v]]
        new = add_cols[add_ptr[v] : add_ptr[v + 1]]
        sort_row(new)
        out = out_cols[out_ptr[v] :]
        i = j = kept = 0
        while i < old.shape[0] or j < new.shape[0]:
            if j == new.shape[0] or (i < old.shape[0] and old[i] <= new[j]):
                value = old[i]
                i += 1
            else:
                value = new[j]
                j += 1
            if kept == 0 or out[kept - 1] != value:
                out[kept] = value
                kept += 1
        counts[v] = kept


@njit(cache=True, nogil=True)
def fill_edge_index(indptr, cols, new_ptr, out: np.ndarray, lo: int, hi: int):
    for v in range(lo, hi):
        # Locals, not re-reads: `out` may alias `new_ptr` as far as LLVM knows.
        src, start, stop = indptr[v], new_ptr[v], new_ptr[v + 1]
        for j in range(stop - start):
            out[0, start + j] = v
            out[1, start + j] = cols[src + j]


@njit(cache=True, nogil=True)
def fill_features(key, labels, centroids, sigma: float, x, lo: int, hi: int):
    # Box-Muller in float32 on counter-based bits (row i owns counters
    # [i*F, (i+1)*F)); 24-bit uniforms truncate the noise at 5.8 sigma.
    num_features = x.shape[1]
    scale = np.float32(sigma)
    for i in range(lo, hi):
        center = centroids[labels[i]]
        row = x[i]
        base = key + np.uint64(i) * np.uint64(num_features)
        for j in range(0, num_features, 2):
            bits = splitmix64(base + np.uint64(j))
            u1 = np.float32((bits >> np.uint64(40)) + np.uint64(1)) * _TO_UNIT_24
            angle = _TWO_PI_24 * np.float32(bits & _LOW_24)
            radius = scale * np.sqrt(np.float32(-2.0) * np.log(u1))
            row[j] = center[j] + radius * np.cos(angle)
            if j + 1 < num_features:
                row[j + 1] = center[j + 1] + radius * np.sin(angle)
