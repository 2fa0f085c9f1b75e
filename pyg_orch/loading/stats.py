"""Per-batch statistics of a loader: what each mini-batch cost the CPU side."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Any

from torch import Tensor
from torch_geometric.data import Data

# Per-batch statistics kept by LoaderStats: the totals cover every batch, this
# many of the latest are kept one by one, so a long run's memory stays flat.
STATS_HISTORY = 4096


@dataclass
class BatchStats:
    """What one mini-batch cost the CPU side.

    Attributes:
        nodes_per_hop: sampled nodes per hop (seeds first).
        edges_per_hop: sampled edges per hop.
        num_hot: hot frontier nodes served from the cache.
        bytes_gathered: bytes of features and hot aggregates copied.
        sample_seconds: time spent sampling.
        gather_seconds: time spent gathering features and aggregates.

    Example:
        >>> BatchStats([2, 4], [4], 1, 64, 0.5, 0.25).num_hot
        1
    """

    nodes_per_hop: list[int]
    edges_per_hop: list[int]
    num_hot: int
    bytes_gathered: int
    sample_seconds: float
    gather_seconds: float


def batch_stats(
    batch: Data, sample_seconds: float, gather_seconds: float
) -> BatchStats:
    """The statistics of a filtered mini-batch.

    Args:
        batch: the batch, with its hot part (``hot_index``) if it has one.
        sample_seconds: time spent sampling it.
        gather_seconds: time spent gathering its features and hot values.

    Example:
        >>> import torch
        >>> batch = Data(x=torch.zeros(3, 2), num_sampled_nodes=[1, 2],
        ...              num_sampled_edges=[2], hot_index=torch.tensor([0]))
        >>> stats = batch_stats(batch, 0.5, 0.25)
        >>> stats.nodes_per_hop, stats.num_hot, stats.bytes_gathered
        ([1, 2], 1, 24)
    """
    # A heterogeneous batch counts the nodes and edges of all types.
    node_stores = getattr(batch, "node_stores", [batch])
    edge_stores = getattr(batch, "edge_stores", [batch])
    # Bidirectional subgraphs have no per-hop counts: one "hop" then.
    nodes_per_hop = _per_hop(node_stores, "num_sampled_nodes") or [batch.num_nodes]
    edges_per_hop = _per_hop(edge_stores, "num_sampled_edges") or [batch.num_edges]
    # A homogeneous batch is its own node and edge store: each counted once.
    stores = {id(store): store for store in [*node_stores, *edge_stores]}
    tensors = [
        store.get(key)
        for store in stores.values()
        for key in ("x", "x_cold", "hot_agg")
    ]
    hot_index = [store.get("hot_index") for store in node_stores]
    return BatchStats(
        nodes_per_hop=nodes_per_hop,
        edges_per_hop=edges_per_hop,
        num_hot=sum(int(index.numel()) for index in hot_index if index is not None),
        bytes_gathered=sum(
            t.numel() * t.element_size() for t in tensors if isinstance(t, Tensor)
        ),
        sample_seconds=sample_seconds,
        gather_seconds=gather_seconds,
    )


def _per_hop(stores: list[Any], key: str) -> list[int] | None:
    # Per-hop counts summed over the stores (of all types), if they have any.
    counts = [store.get(key) for store in stores]
    counts = [list(c) for c in counts if c is not None]
    if not counts:
        return None
    hops = max(len(c) for c in counts)
    return [sum(c[hop] for c in counts if hop < len(c)) for hop in range(hops)]


class LoaderStats:
    """Per-batch statistics of a loader, kept in the process that filters.

    With ``filter_per_worker=True`` batches are filtered in worker processes,
    so their statistics stay there. Totals cover every batch since the last
    :meth:`reset`; only the latest ``history`` batches are kept one by one.

    Args:
        history: how many of the latest batches :attr:`batches` keeps.

    Attributes:
        batches: statistics of the latest batches, oldest first.
        count: batches since the last :meth:`reset`.

    Example:
        >>> stats = LoaderStats()
        >>> stats.add(BatchStats([2, 4], [4], 1, 64, 0.5, 0.25))
        >>> stats.count, stats.mean()["nodes"]
        (1, 6.0)
        >>> stats.reset()
        >>> list(stats.batches)
        []
    """

    def __init__(self, history: int = STATS_HISTORY) -> None:
        self.batches: deque[BatchStats] = deque(maxlen=history)
        self.count = 0
        self._totals = _stat_values(_NO_BATCH)

    def add(self, stats: BatchStats) -> None:
        """Counts one batch."""
        self.batches.append(stats)
        self.count += 1
        for key, value in _stat_values(stats).items():
            self._totals[key] += value

    def reset(self) -> None:
        """Forgets all batches."""
        self.batches.clear()
        self.count = 0
        self._totals = _stat_values(_NO_BATCH)

    def totals(self) -> dict[str, float]:
        """Nodes, frontier nodes, edges, hot nodes, bytes and seconds, summed.

        Example:
            >>> stats = LoaderStats()
            >>> stats.add(BatchStats([2, 4], [4], 1, 64, 0.5, 0.25))
            >>> stats.totals()["bytes_gathered"]
            64.0
        """
        return dict(self._totals)

    def mean(self) -> dict[str, float]:
        """Mean nodes, frontier nodes, edges, hot nodes, bytes and seconds per batch.

        Example:
            >>> stats = LoaderStats()
            >>> stats.add(BatchStats([2, 4], [4], 1, 64, 0.5, 0.25))
            >>> stats.mean()["nodes"], stats.mean()["sample_seconds"]
            (6.0, 0.5)
        """
        count = max(self.count, 1)
        return {key: value / count for key, value in self._totals.items()}


def _stat_values(stats: BatchStats) -> dict[str, float]:
    values = {
        "nodes": sum(stats.nodes_per_hop),
        # The nodes whose bottom-layer output is needed: every hop's but the last.
        "frontier": sum(stats.nodes_per_hop[:-1]),
        "edges": sum(stats.edges_per_hop),
        "hot": stats.num_hot,
        "bytes_gathered": stats.bytes_gathered,
        "sample_seconds": stats.sample_seconds,
        "gather_seconds": stats.gather_seconds,
    }
    return {key: float(value) for key, value in values.items()}


# The totals before the first batch: zero for every statistic.
_NO_BATCH = BatchStats([], [], 0, 0, 0.0, 0.0)
