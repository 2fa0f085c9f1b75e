"""What a partition's sampler and feature store ask of the other machines."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field


@dataclass
class RemoteTraffic:
    """Counts of remote work, summed over the batches drawn so far.

    The sampler's event loop and the feature store's RPC callbacks add to it
    from their own threads, so each addition takes a lock.

    Attributes:
        batches: batches counted.
        rows: node feature rows fetched from other partitions.
        bytes: bytes of those rows and of remote edge feature rows.
        feature_rpcs: feature lookups sent to other partitions.
        sampling_rpcs: one-hop sampling requests sent to other partitions.

    Example:
        >>> traffic = RemoteTraffic()
        >>> traffic.add(rows=3, bytes=48, feature_rpcs=1)
        >>> traffic.add(batches=1)
        >>> traffic.per_batch()["rows"]
        3.0
    """

    batches: int = 0
    rows: int = 0
    bytes: int = 0
    feature_rpcs: int = 0
    sampling_rpcs: int = 0
    _lock: threading.Lock = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self._lock = threading.Lock()

    def add(self, **counts: int) -> None:
        """Adds ``counts`` (by attribute name) to the totals."""
        with self._lock:
            for name, count in counts.items():
                setattr(self, name, getattr(self, name) + int(count))

    def per_batch(self) -> dict[str, float]:
        """Each total divided by the number of batches (0 before any batch)."""
        with self._lock:
            batches = max(self.batches, 1)
            return {
                name: getattr(self, name) / batches
                for name in ("rows", "bytes", "feature_rpcs", "sampling_rpcs")
            }

    def reset(self) -> None:
        """Sets every count back to 0."""
        with self._lock:
            self.batches = self.rows = self.bytes = 0
            self.feature_rpcs = self.sampling_rpcs = 0

    def __getstate__(self) -> dict:
        # A loader's worker processes get their own counts (and a new lock).
        return {name: value for name, value in vars(self).items() if name != "_lock"}

    def __setstate__(self, state: dict) -> None:
        vars(self).update(state)
        self._lock = threading.Lock()
