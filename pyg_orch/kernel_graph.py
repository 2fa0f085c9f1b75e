"""A graph as pyg_orch's sampling kernel reads it: one layout, whoever samples.

:class:`KernelGraph` lays out the CSC graphs of all edge types back to back,
for :func:`~pyg_orch.kernels.sample.sample_layers`; the helpers turn seeds
and their times into the kernel's arguments and split its outputs by type.
Both :class:`~pyg_orch.sampling.OrchNeighborSampler` and the ops PyG's own
sampler calls (:mod:`pyg_orch.sample_ops`) sample through it.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import Tensor
from torch_geometric.sampler import NeighborSampler

# Each thread keeps one global-to-local map per graph size: the kernel restores
# it to -1 before it returns, so reuse is safe and saves an O(num_nodes) fill
# per batch.
_scratch = threading.local()


def node_map(num_nodes: int) -> np.ndarray:
    """This thread's reusable global-to-local map (all -1) for ``num_nodes``.

    The sampler kernel restores every entry it sets, so the map stays all -1
    between calls and one per thread and graph size is enough. It holds
    ``int32`` (a batch has fewer than 2**31 nodes of a type): half the bytes
    of the random reads that dominate sampling a large graph.

    Example:
        >>> node_map(4).tolist()
        [-1, -1, -1, -1]
    """
    maps = _scratch.__dict__.setdefault("maps", {})
    if num_nodes not in maps:
        maps[num_nodes] = np.full(num_nodes, -1, dtype=np.int32)
    return maps[num_nodes]


EMPTY_MASK = np.zeros(0, dtype=np.bool_)


@dataclass
class KernelGraph:
    """A sampler's graph as :func:`~pyg_orch.kernels.sample.sample_layers` reads it.

    The CSC graphs of all edge types back to back, numbered node and edge
    types, and the times and weights of the types that have them. On a
    heterogeneous graph the sampler's own per-type tensors are replaced by
    views of the concatenated ones, so the graph is held once; on a
    homogeneous one nothing is copied.

    Attributes:
        node_types: the node types, in the sampler's order (``[None]`` for a
            homogeneous graph).
        edge_types: the edge types the kernel expands, in the sampler's
            order (``[None]`` for a homogeneous graph).
        graph: the kernel's ``graph`` argument.
        times: ``(node_time, node_timed, edge_time, edge_timed)``, the
            kernel's ``times`` without the seeds' times.
        weights: the kernel's ``weights`` argument.

    Example:
        >>> import torch
        >>> from torch_geometric.data import Data
        >>> data = Data(edge_index=torch.tensor([[1, 2], [0, 0]]), num_nodes=3)
        >>> from torch_geometric.sampler import NeighborSampler
        >>> layout = KernelGraph.of(NeighborSampler(data, [1]))
        >>> layout.num_nodes, layout.graph[0].tolist()
        (3, [0, 2, 2, 2])
    """

    node_types: list[Any]
    edge_types: list[Any]
    graph: tuple
    times: tuple
    weights: tuple

    @property
    def num_nodes(self) -> int:
        """The number of nodes of all types, the size of the kernel's node map."""
        return int(self.graph[6][-1])

    @property
    def time_dtype(self) -> np.dtype:
        """The dtype the kernel compares times in."""
        return self.times[0].dtype

    @classmethod
    def of(cls, sampler: NeighborSampler) -> KernelGraph:
        """The graph of ``sampler``, homogeneous or heterogeneous."""
        if not sampler.is_hetero:
            stores = {
                "colptr": {None: sampler.colptr},
                "row": {None: sampler.row},
                "node_time": {None: sampler.node_time},
                "edge_time": {None: sampler.edge_time},
                "edge_weight": {None: sampler.edge_weight},
            }
            return cls.build([None], [None], {None: None}, stores,
                             [_num_nodes(sampler, None)])  # fmt: skip
        rel = sampler.to_rel_type
        stores = {
            "colptr": sampler.colptr_dict,
            "row": sampler.row_dict,
            "node_time": sampler.node_time or {},
            "edge_time": sampler.edge_time or {},
            "edge_weight": getattr(sampler, "edge_weight", None) or {},
        }
        num_nodes = [_num_nodes(sampler, t) for t in sampler.node_types]
        return cls.build(
            list(sampler.node_types), sampler.edge_types, rel, stores, num_nodes
        )

    @classmethod
    def build(
        cls,
        node_types: list[Any],
        edge_types: list[Any],
        rel: dict[Any, Any],
        stores: dict[str, dict],
        num_nodes: list[int],
    ) -> KernelGraph:
        """The graph from its tensors, as PyG's sampler (or pyg-lib's op) holds them.

        Args:
            node_types: the node types (``[None]`` for a homogeneous graph).
            edge_types: the edge types (``[None]`` likewise).
            rel: each edge type's key in the stores of edge tensors.
            stores: ``"colptr"``, ``"row"``, ``"edge_time"``,
                ``"edge_weight"`` (by ``rel`` key) and ``"node_time"`` (by
                node type), each a dict of CSC tensors; a missing or
                ``None`` entry has none.
            num_nodes: the nodes of each node type.

        Example:
            >>> layout = KernelGraph.build(
            ...     [None], [None], {None: None},
            ...     {"colptr": {None: torch.tensor([0, 1, 1])},
            ...      "row": {None: torch.tensor([1])}, "node_time": {},
            ...      "edge_time": {}, "edge_weight": {}}, [2])
            >>> layout.num_nodes
            2
        """
        keys = [rel[k] for k in edge_types]
        type_index = {node_type: i for i, node_type in enumerate(node_types)}
        row_sizes = [stores["row"][key].numel() for key in keys]
        colptr, colptr_start = _back_to_back(stores["colptr"], keys, torch.int64)
        row, row_start = _back_to_back(stores["row"], keys, torch.int64, row_sizes)
        # Times compare in one dtype: int64 (exact for any timestamp) unless
        # some time is a float.
        times = [*stores["node_time"].values(), *stores["edge_time"].values()]
        floating = any(t is not None and t.is_floating_point() for t in times)
        time_dtype = torch.float64 if floating else torch.int64
        node_time, node_offset = _back_to_back(
            stores["node_time"], node_types, time_dtype, num_nodes
        )
        edge_time, _ = _back_to_back(stores["edge_time"], keys, time_dtype, row_sizes)
        edge_weight, _ = _back_to_back(
            stores["edge_weight"], keys, torch.float64, row_sizes
        )

        def endpoint(position: int) -> np.ndarray:
            if edge_types == [None]:
                return np.zeros(1, dtype=np.int64)
            return np.array([type_index[k[position]] for k in edge_types], np.int64)

        def present(store: dict, names: list[Any]) -> np.ndarray:
            return np.array([store.get(n) is not None for n in names], np.bool_)

        graph = (
            colptr, row, colptr_start[:-1], row_start, endpoint(0), endpoint(2),
            node_offset,
        )  # fmt: skip
        return cls(
            node_types,
            edge_types,
            graph,
            (
                node_time,
                present(stores["node_time"], node_types),
                edge_time,
                present(stores["edge_time"], keys),
            ),
            (edge_weight, present(stores["edge_weight"], keys)),
        )


def _back_to_back(
    store: dict[Any, Tensor | None],
    keys: list[Any],
    dtype: torch.dtype,
    sizes: list[int] | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """The tensors of ``store`` under ``keys`` back to back, and where each starts.

    A missing tensor takes ``sizes[i]`` zeros (nothing when every one is
    missing). Each tensor in ``store`` is replaced by its view of the result,
    so the data is held once; a single tensor of the right dtype is used as
    it is. The result is in shared memory when the tensors were.
    """
    parts = [store.get(key) for key in keys]
    sizes = [part.numel() for part in parts] if sizes is None else sizes
    bounds = np.zeros(len(keys) + 1, dtype=np.int64)
    bounds[1:] = np.cumsum(sizes)
    if all(part is None for part in parts):
        return np.zeros(0, dtype=_NUMPY[dtype]), bounds
    if len(parts) == 1 and parts[0].dtype == dtype and parts[0].is_contiguous():
        return parts[0].numpy(), bounds
    buffer = torch.zeros(int(bounds[-1]), dtype=dtype)
    if any(part is not None and part.is_shared() for part in parts):
        buffer.share_memory_()
    for key, part, start, end in zip(keys, parts, bounds[:-1], bounds[1:], strict=True):
        if part is not None:
            buffer[start:end] = part
            if part.dtype == dtype:  # a converted one stays as PyG has it
                store[key] = buffer[start:end]
    return buffer.numpy(), bounds


_NUMPY = {torch.int64: np.int64, torch.float64: np.float64}


def _num_nodes(sampler: NeighborSampler, node_type: Any) -> int:
    # Nodes of node_type: as the sampler counted them, else as its edges tell.
    counts = sampler.num_nodes
    if not isinstance(counts, dict):
        return int(counts) if counts is not None else sampler.colptr.numel() - 1
    if counts.get(node_type) is not None:
        return int(counts[node_type])
    found = 0
    for edge_type in sampler.edge_types:
        rel = sampler.to_rel_type[edge_type]
        if edge_type[2] == node_type:
            found = max(found, sampler.colptr_dict[rel].numel() - 1)
        row = sampler.row_dict[rel]
        if edge_type[0] == node_type and row.numel():
            found = max(found, int(row.max()) + 1)
    return found


def kernel_seeds(layout: KernelGraph, seeds: dict) -> tuple[np.ndarray, np.ndarray]:
    """The kernel's ``seeds``: each seed's node type index, and its id.

    Example:
        >>> layout = KernelGraph.build(
        ...     ["a", "b"], [], {}, {"colptr": {}, "row": {}, "node_time": {},
        ...     "edge_time": {}, "edge_weight": {}}, [2, 2])
        >>> [k.tolist() for k in kernel_seeds(layout, {"b": torch.tensor([1])})]
        [[1], [1]]
    """
    index = {node_type: i for i, node_type in enumerate(layout.node_types)}
    kinds = [np.full(s.numel(), index[t], dtype=np.int64) for t, s in seeds.items()]
    nodes = [s.to(torch.long).numpy() for s in seeds.values()]
    return _concatenate(kinds), _concatenate(nodes)


def kernel_seed_times(
    layout: KernelGraph,
    seeds: dict,
    times: dict | None,
    node_time: dict,
    temporal: bool,
) -> np.ndarray:
    """Each disjoint subgraph's time: given in ``times``, or its seed's node time.

    Empty when the sampling is not ``temporal``. ``node_time`` holds the
    node times by node type.

    Example:
        >>> layout = KernelGraph.build(
        ...     [None], [], {}, {"colptr": {}, "row": {},
        ...     "node_time": {None: torch.tensor([5, 7])}, "edge_time": {},
        ...     "edge_weight": {}}, [2])
        >>> kernel_seed_times(layout, {None: torch.tensor([1])}, None,
        ...                   {None: torch.tensor([5, 7])}, True).tolist()
        [7]
    """
    dtype = layout.time_dtype
    if not temporal:
        return np.zeros(0, dtype=dtype)
    if times is not None:
        return _concatenate([times[t].numpy().astype(dtype) for t in seeds])
    if any(node_time.get(t) is None for t in seeds):
        raise ValueError(
            "temporal sampling on edge times (time_attr on edges) needs the "
            "seeds' times: give the loader input_time (edge_label_time for "
            "links)"
        )
    return _concatenate(
        [node_time[t][s.to(torch.long)].numpy().astype(dtype) for t, s in seeds.items()]
    )


def _concatenate(arrays: list[np.ndarray]) -> np.ndarray:
    return np.concatenate(arrays) if arrays else np.zeros(0, dtype=np.int64)


def split_by(values: np.ndarray, counts: np.ndarray, keys: list[Any]) -> dict:
    """Consecutive runs of ``values``, ``counts[i]`` for ``keys[i]``, as tensors.

    Example:
        >>> split_by(np.arange(3), np.array([1, 2]), ["a", "b"])
        {'a': tensor([0]), 'b': tensor([1, 2])}
    """
    ends = np.cumsum(counts).tolist()
    starts = [0, *ends][:-1]
    return {
        key: torch.from_numpy(values[start:end])
        for key, start, end in zip(keys, starts, ends, strict=True)
    }
