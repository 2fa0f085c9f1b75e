"""``OrchNeighborLoader``: PyG's ``NeighborLoader`` with a hot/cold split."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor
from torch_geometric.data import Data
from torch_geometric.loader import NeighborLoader
from torch_geometric.sampler.base import SubgraphType

from pyg_orch.cache import HotCache
from pyg_orch.hotness import (
    HotSet,
    check_hot_method,
    check_hot_ratio,
    frontier_size,
    select_hot,
)
from pyg_orch.sampling import OrchNeighborSampler


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
    """

    nodes_per_hop: list[int]
    edges_per_hop: list[int]
    num_hot: int
    bytes_gathered: int
    sample_seconds: float
    gather_seconds: float


@dataclass
class LoaderStats:
    """Per-batch statistics of a loader, kept in the process that filters.

    With ``filter_per_worker=True`` batches are filtered in worker processes,
    so their statistics stay there.

    Attributes:
        batches: statistics of each batch since the last :meth:`reset`.
    """

    batches: list[BatchStats] = field(default_factory=list)

    def reset(self) -> None:
        """Forgets all batches."""
        self.batches.clear()

    def mean(self) -> dict[str, float]:
        """Mean nodes, edges, hot nodes, bytes and seconds per batch.

        Example:
            >>> stats = LoaderStats([BatchStats([2, 4], [4], 1, 64, 0.5, 0.25)])
            >>> stats.mean()["nodes"], stats.mean()["sample_seconds"]
            (6.0, 0.5)
        """
        count = max(len(self.batches), 1)
        total = {
            "nodes": sum(sum(b.nodes_per_hop) for b in self.batches),
            "edges": sum(sum(b.edges_per_hop) for b in self.batches),
            "hot": sum(b.num_hot for b in self.batches),
            "bytes_gathered": sum(b.bytes_gathered for b in self.batches),
            "sample_seconds": sum(b.sample_seconds for b in self.batches),
            "gather_seconds": sum(b.gather_seconds for b in self.batches),
        }
        return {key: value / count for key, value in total.items()}


class OrchNeighborLoader(NeighborLoader):
    r"""A drop-in :class:`~torch_geometric.loader.NeighborLoader` with hot vertices.

    It takes every argument of :class:`~torch_geometric.loader.NeighborLoader`,
    samples with :class:`~pyg_orch.OrchNeighborSampler` (no ``pyg-lib`` or
    ``torch-sparse`` needed) and yields the same
    :class:`~torch_geometric.data.Data` mini-batches. With ``hot_ratio=0`` (the
    default) the batches are exactly those of a ``NeighborLoader``.

    With ``hot_ratio > 0`` it chooses the hot vertices once (the frontier
    nodes most often sampled, or of highest degree), caches their
    full-neighbourhood bottom-layer aggregation in a :class:`~pyg_orch.HotCache`,
    and stops expanding them in the last hop. Each batch then also holds
    ``hot_index`` (local positions of the hot frontier nodes) and ``hot_agg``
    (their cached aggregates), which :class:`~pyg_orch.OrchModel` feeds into
    the bottom layer.

    Args:
        data: the graph, a :class:`~torch_geometric.data.Data` object.
        num_neighbors: neighbours to sample per node, one entry per hop
            (``-1``: all of them).
        hot_ratio: fraction of all vertices to make hot, in ``[0, 1]``.
        hot_method: ``"presample"`` (count frontier appearances over
            ``presample_epochs`` sampled epochs) or ``"degree"`` (in-degree).
        hot: a precomputed hot set (a :class:`~pyg_orch.hotness.HotSet`, node
            ids, or a boolean mask) to use instead of choosing one.
        presample_epochs: epochs sampled by ``presample``.
        **kwargs: any other argument of
            :class:`~torch_geometric.loader.NeighborLoader` and of
            :class:`torch.utils.data.DataLoader` (``input_nodes``,
            ``batch_size``, ``shuffle``, ``replace``, ``num_workers``, ...).

    Example:
        >>> from pyg_orch.datasets import load_cora
        >>> data = load_cora()
        >>> loader = OrchNeighborLoader(data, num_neighbors=[10, 5],
        ...                             input_nodes=data.train_mask,
        ...                             batch_size=32, hot_ratio=0.2)
        >>> batch = next(iter(loader))
        >>> batch.batch_size, batch.hot_agg.size(1) == data.num_features
        (32, True)
    """

    def __init__(
        self,
        data: Any,
        num_neighbors: Any,
        hot_ratio: float = 0.0,
        hot_method: str = "presample",
        hot: HotSet | Tensor | None = None,
        presample_epochs: int = 1,
        **kwargs: Any,
    ) -> None:
        check_hot_ratio(hot_ratio)
        check_hot_method(hot_method)
        if presample_epochs < 1:
            raise ValueError(f"presample_epochs must be >= 1, got {presample_epochs}")
        if kwargs.get("neighbor_sampler") is None:
            kwargs["neighbor_sampler"] = OrchNeighborSampler(
                data,
                num_neighbors,
                **{key: kwargs[key] for key in _SAMPLER_ARGUMENTS if key in kwargs},
                share_memory=kwargs.get("num_workers", 0) > 0,
            )
        super().__init__(data, num_neighbors, **kwargs)
        self.hot_ratio, self.hot_method = hot_ratio, hot_method
        self.stats = LoaderStats()
        self.hot: HotSet | None = None
        self.cache: HotCache | None = None
        if hot is not None or hot_ratio > 0:
            self._build_cache(hot, presample_epochs)

    def _build_cache(self, hot: HotSet | Tensor | None, presample_epochs: int) -> None:
        sampler = self.node_sampler
        if (
            not isinstance(sampler, OrchNeighborSampler)
            or sampler.use_pyg_backend
            or sampler.subgraph_type != SubgraphType.directional
        ):
            raise NotImplementedError(
                "hot vertices need OrchNeighborLoader's own Numba sampler with "
                "directional subgraphs (the default subgraph_type); drop the "
                "other sampling options or set hot_ratio=0."
            )
        if getattr(self.data, "x", None) is None:
            raise ValueError(
                "hot vertices need node features data.x to aggregate; give the "
                "graph an x or set hot_ratio=0"
            )
        num_nodes = sampler.colptr.numel() - 1
        if hot is None:
            self.hot = select_hot(
                sampler,
                self.input_data.node,
                self.hot_ratio,
                self.hot_method,
                batch_size=self.batch_size,
                epochs=presample_epochs,
                # Deterministic under torch.manual_seed, and without drawing
                # from the global generator, so a hot ratio leaves the
                # shuffles and initialisations of a seeded run unchanged.
                seed=torch.initial_seed(),
            )
        else:
            self.hot = _as_hot_set(hot, num_nodes)
        self.cache = HotCache(sampler.colptr, sampler.row, self.data.x, self.hot.nodes)
        sampler.hot_mask = self.cache.mask

    def collate_fn(self, index: Tensor | list[int]) -> Any:
        # NodeLoader.collate_fn with the sampling timed: with
        # filter_per_worker, filtering happens in here too.
        tick = time.perf_counter()
        out = self.node_sampler.sample_from_nodes(self.input_data[index])
        out.sample_seconds = time.perf_counter() - tick
        return self.filter_fn(out) if self.filter_per_worker else out

    def filter_fn(self, out: Any) -> Data:
        tick = time.perf_counter()
        batch = super().filter_fn(out)
        if self.cache is not None:
            frontier = batch.n_id[: frontier_size(batch.num_sampled_nodes)]
            batch.hot_index, batch.hot_agg = self.cache.lookup(frontier)
        # Bidirectional subgraphs have no per-hop counts: one "hop" then.
        nodes_per_hop = getattr(batch, "num_sampled_nodes", None) or [batch.num_nodes]
        edges_per_hop = getattr(batch, "num_sampled_edges", None) or [batch.num_edges]
        self.stats.batches.append(
            BatchStats(
                nodes_per_hop=list(nodes_per_hop),
                edges_per_hop=list(edges_per_hop),
                num_hot=_num_hot(batch),
                bytes_gathered=_bytes_gathered(batch),
                sample_seconds=getattr(out, "sample_seconds", 0.0),
                gather_seconds=time.perf_counter() - tick,
            )
        )
        return batch


# Arguments that NeighborLoader hands on to its NeighborSampler.
_SAMPLER_ARGUMENTS = (
    "replace",
    "subgraph_type",
    "disjoint",
    "temporal_strategy",
    "time_attr",
    "weight_attr",
    "is_sorted",
    "directed",
)


def _as_hot_set(hot: HotSet | Tensor, num_nodes: int) -> HotSet:
    if isinstance(hot, HotSet):
        nodes = hot.nodes
    elif hot.dtype == torch.bool:
        if hot.numel() != num_nodes:
            raise ValueError(
                f"hot is a mask of {hot.numel()} entries but the graph has "
                f"{num_nodes} nodes; was it made for another graph?"
            )
        nodes = hot.nonzero().view(-1)
    else:
        nodes = hot.to(torch.long).unique()
    if nodes.numel() and (nodes.min() < 0 or nodes.max() >= num_nodes):
        raise ValueError(
            f"hot holds node ids outside [0, {num_nodes}); was it made for "
            f"another graph?"
        )
    counts = hot.counts if isinstance(hot, HotSet) else torch.zeros(0, dtype=torch.long)
    return HotSet(nodes, counts, hot.method if isinstance(hot, HotSet) else "given")


def _num_hot(batch: Data) -> int:
    return int(batch.hot_index.numel()) if "hot_index" in batch else 0


def _bytes_gathered(batch: Data) -> int:
    tensors = [batch.x] + ([batch.hot_agg] if "hot_agg" in batch else [])
    return sum(t.numel() * t.element_size() for t in tensors if t is not None)
