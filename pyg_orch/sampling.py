"""A Numba neighbour sampler that plugs into PyG's ``NeighborSampler``."""

from __future__ import annotations

import contextlib
import threading
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import Tensor
from torch_geometric import typing as pyg_typing
from torch_geometric.sampler import (
    EdgeSamplerInput,
    HeteroSamplerOutput,
    NegativeSampling,
    NeighborSampler,
    SamplerOutput,
)
from torch_geometric.sampler.base import SubgraphType

from pyg_orch.kernels.sample import sample_layers

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


_EMPTY_MASK = np.zeros(0, dtype=np.bool_)

# Arguments that PyG's neighbour loaders hand on to their NeighborSampler.
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


@contextlib.contextmanager
def drawing_from(generator: torch.Generator) -> Iterator[None]:
    """Makes samplers called in this thread draw their seeds from ``generator``.

    Outside of it they draw from torch's global generator, as PyG's samplers
    do. Each iteration of a loader's pipeline has its own generator, set
    around each of its sampler calls, so two iterations (in one thread or in
    two) never draw from each other's stream.

    Example:
        >>> with drawing_from(torch.Generator().manual_seed(0)):
        ...     pass
    """
    previous = getattr(_scratch, "generator", None)
    _scratch.generator = generator
    try:
        yield
    finally:
        _scratch.generator = previous


@contextlib.contextmanager
def _pyg_lib_gates_open() -> Iterator[None]:
    # PyG's NeighborSampler refuses edge times and weights unless pyg-lib is
    # recent enough; this sampler handles both, so its constructor may pass.
    flags = ("WITH_EDGE_TIME_NEIGHBOR_SAMPLE", "WITH_WEIGHTED_NEIGHBOR_SAMPLE")
    saved = {flag: getattr(pyg_typing, flag) for flag in flags}
    for flag in flags:
        setattr(pyg_typing, flag, True)
    try:
        with warnings.catch_warnings():
            # PyG warns that sampling without pyg-lib is deprecated; this
            # class is the sampler that makes pyg-lib unnecessary.
            warnings.filterwarnings("ignore", message=".*without a 'pyg-lib'")
            yield
    finally:
        for flag, value in saved.items():
            setattr(pyg_typing, flag, value)


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
        >>> layout = KernelGraph.of(OrchNeighborSampler(data, [1]))
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
            return cls._build(sampler, [None], [None], {None: None}, stores)
        rel = sampler.to_rel_type
        stores = {
            "colptr": sampler.colptr_dict,
            "row": sampler.row_dict,
            "node_time": sampler.node_time or {},
            "edge_time": sampler.edge_time or {},
            "edge_weight": getattr(sampler, "edge_weight", None) or {},
        }
        return cls._build(
            sampler, list(sampler.node_types), sampler.edge_types, rel, stores
        )

    @classmethod
    def _build(
        cls,
        sampler: NeighborSampler,
        node_types: list[Any],
        edge_types: list[Any],
        rel: dict[Any, Any],
        stores: dict[str, dict],
    ) -> KernelGraph:
        keys = [rel[k] for k in edge_types]
        type_index = {node_type: i for i, node_type in enumerate(node_types)}
        num_nodes = [_num_nodes(sampler, node_type) for node_type in node_types]
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


def check_sampling_weights(
    colptr: Tensor,
    weight: Tensor,
    perm: Tensor | None,
    fanouts: list[int],
    replace: bool,
    edge_type: Any = None,
) -> None:
    """Refuses sampling weights (``weight_attr``) that define no distribution.

    As :func:`torch.multinomial` refuses them, and PyG documents weights as
    non-negative: every weight must be finite and ``>= 0``, and a node whose
    in-edges are drawn from by weight (some hop's fan-out ``k > 0`` with
    ``replace=True``, or ``k`` below its in-degree without) must have an
    edge of positive weight. A node whose in-edges are all taken (fan-out
    ``-1``, or at least its in-degree, without replacement) is taken whole,
    whatever its weights, as PyG takes it. (Without replacement, a node with
    fewer positive weights than ``k`` gives all of those, then zero-weight
    neighbours drawn uniformly: see
    :func:`~pyg_orch.kernels.sample.pick_weighted`.)

    Args:
        colptr: CSC column pointers ``[N + 1]``.
        weight: the weights in CSC order ``[E]``.
        perm: the CSC permutation (``row[e]`` is edge ``perm[e]``), or
            ``None`` for the identity.
        fanouts: the fan-out of each hop.
        replace: whether neighbours are drawn with replacement.
        edge_type: the edge type, on a heterogeneous graph.

    Raises:
        ValueError: naming ``weight_attr``, the first offending edge (or
            node) and the rule.

    Example:
        >>> check_sampling_weights(torch.tensor([0, 2]), torch.tensor([1.0, -5.0]),
        ...                        None, [1], True)
        Traceback (most recent call last):
        ...
        ValueError: weight_attr: sampling weights must be finite and >= 0, but edge 1 has weight -5.0; fix or drop that edge's weight
    """  # noqa: E501 - a doctest's output is one line
    where = "" if edge_type is None else f" of edge type {edge_type}"
    weight = weight.detach()  # checked in its own dtype: no copy of E values
    bad = (~torch.isfinite(weight)) | (weight < 0)
    if bool(bad.any()):
        edges = bad.nonzero().view(-1)
        ids = edges if perm is None else perm[edges]
        first = int(ids.argmin())
        raise ValueError(
            f"weight_attr: sampling weights must be finite and >= 0, but edge "
            f"{int(ids[first])}{where} has weight {float(weight[edges[first]])}; "
            f"fix or drop that edge's weight"
        )
    degree = colptr.diff()
    positive = torch.zeros(weight.numel() + 1, dtype=torch.long)
    torch.cumsum((weight > 0).long(), 0, out=positive[1:])
    positive = positive[colptr[1:]] - positive[colptr[:-1]]
    for k in fanouts:
        if k <= 0:
            continue  # nothing drawn (0) or everything taken (-1)
        drawn = (degree > 0) if replace else (degree > k)
        invalid = drawn & (positive == 0)
        if bool(invalid.any()):
            node = int(invalid.nonzero()[0])
            raise ValueError(
                f"weight_attr: node {node}{where} has {int(degree[node])} "
                f"in-edges, all of weight 0, but the fan-out {k} draws from "
                f"them by weight {'with' if replace else 'without'} "
                f"replacement: weights that sum to 0 define no distribution "
                f"(torch.multinomial refuses them too). Give one of its edges a "
                f"positive weight, or sample with fan-out -1"
            )


class OrchNeighborSampler(NeighborSampler):
    r"""PyG's :class:`~torch_geometric.sampler.NeighborSampler`, sampling with Numba.

    Takes the same arguments and returns the same
    :class:`~torch_geometric.sampler.SamplerOutput` (or
    :class:`~torch_geometric.sampler.HeteroSamplerOutput`) as PyG does with
    ``pyg-lib``: nodes in layered order (seeds, then hop 1, ...; per node type
    on a :class:`~torch_geometric.data.HeteroData` graph), local ``row`` /
    ``col`` edges, CSC edge positions that PyG maps to ``e_id`` through its
    edge permutation, and per-hop ``num_sampled_nodes`` / ``num_sampled_edges``
    so that :func:`~torch_geometric.utils.trim_to_layer` works. It needs
    neither ``pyg-lib`` nor ``torch-sparse``.

    It samples homogeneous and heterogeneous graphs (fan-outs as a list, or a
    dict per edge type), uniformly or by ``weight_attr``, with or without
    replacement, with fan-out ``-1`` (all neighbours) and ``0``, into
    directional or bidirectional subgraphs, one per seed with
    ``disjoint=True``, and temporally with ``time_attr`` on nodes or edges
    (``temporal_strategy`` ``"uniform"`` or ``"last"``), with the same
    distributions as ``pyg-lib``; induced subgraphs
    (``subgraph_type="induced"``) as ``torch-sparse`` returns them. Batches are
    deterministic under :func:`torch.manual_seed`.

    Args:
        data: the graph, as for :class:`~torch_geometric.sampler.NeighborSampler`.
        num_neighbors: neighbours to sample per node, one entry per hop (a
            dict of them per edge type on a heterogeneous graph).
        **kwargs: any other argument of
            :class:`~torch_geometric.sampler.NeighborSampler`.

    Example:
        >>> import torch
        >>> from torch_geometric.data import Data
        >>> from torch_geometric.sampler import NodeSamplerInput
        >>> data = Data(edge_index=torch.tensor([[1, 2, 0], [0, 0, 1]]),
        ...             num_nodes=3)
        >>> sampler = OrchNeighborSampler(data, num_neighbors=[2, 1])
        >>> out = sampler.sample_from_nodes(
        ...     NodeSamplerInput(input_id=None, node=torch.tensor([0])))
        >>> out.node.tolist()[0], out.num_sampled_nodes[0]
        (0, 1)
    """

    def __init__(self, data: Any, num_neighbors: Any, **kwargs: Any) -> None:
        # Nodes the last hop does not expand (hot nodes); set by the loader.
        self.hot_mask: Tensor | None = None
        with _pyg_lib_gates_open():
            super().__init__(data, num_neighbors, **kwargs)
        self._check_options()
        self._layout: KernelGraph | None = None

    def _check_options(self) -> None:
        # Once, here, not per batch: what the kernel cannot do, as pyg-lib.
        if self.temporal_strategy not in ("uniform", "last"):
            raise ValueError(
                f"temporal_strategy must be 'uniform' or 'last', got "
                f"{self.temporal_strategy!r}"
            )
        if self.subgraph_type == SubgraphType.induced and self.disjoint:
            raise ValueError(
                "'disjoint' sampling is not supported with "
                "subgraph_type='induced', as in PyG: drop one of them"
            )
        if self.is_temporal and self.edge_weight is not None:
            raise ValueError(
                "weighted temporal sampling (weight_attr with time_attr) is not "
                "supported, as in pyg-lib: drop one of them"
            )
        if self.edge_weight is not None:
            self._check_weights()

    def _check_weights(self) -> None:
        # The weights of every edge type, each checked with its fan-outs.
        if not self.is_hetero:
            fanouts = self.num_neighbors.get_values()
            check_sampling_weights(
                self.colptr, self.edge_weight, self.perm, fanouts, self.replace
            )
            return
        fanouts = self.num_neighbors.get_values(self.edge_types)
        for rel_type, weight in self.edge_weight.items():
            edge_type = self.to_edge_type[rel_type]
            check_sampling_weights(
                self.colptr_dict[rel_type], weight, self.perm.get(edge_type),
                fanouts[edge_type], self.replace, edge_type,
            )  # fmt: skip

    @classmethod
    def for_loader(
        cls, data: Any, num_neighbors: Any, arguments: dict[str, Any]
    ) -> OrchNeighborSampler:
        """The sampler a PyG loader would build from its ``arguments``.

        Takes the sampling arguments of
        :class:`~torch_geometric.loader.NeighborLoader` or
        :class:`~torch_geometric.loader.LinkNeighborLoader` (``replace``,
        ``time_attr``, ...) out of ``arguments`` and shares the graph's memory
        when ``num_workers > 0``, as PyG's loaders do.

        Example:
            >>> import torch
            >>> from torch_geometric.data import Data
            >>> data = Data(edge_index=torch.tensor([[1], [0]]), num_nodes=2)
            >>> OrchNeighborSampler.for_loader(data, [2], {"replace": True}).replace
            True
        """
        options = {
            key: arguments[key] for key in _SAMPLER_ARGUMENTS if key in arguments
        }
        share_memory = arguments.get("num_workers", 0) > 0
        return cls(data, num_neighbors, share_memory=share_memory, **options)

    def sample_from_edges(
        self, inputs: EdgeSamplerInput, neg_sampling: NegativeSampling | None = None
    ) -> SamplerOutput | HeteroSamplerOutput:
        """PyG's edge sampling, its negatives drawn as the seeds are.

        Within :func:`drawing_from` (a loader's pipeline) the negatives come
        from that thread's generator, as the neighbours do, so that an epoch
        is the same whatever the threads' timing and resumes batch for batch;
        elsewhere from torch's global generator, as in PyG.

        Example:
            >>> from torch_geometric.data import Data
            >>> from torch_geometric.sampler import EdgeSamplerInput
            >>> data = Data(edge_index=torch.tensor([[0, 1, 2], [1, 2, 0]]),
            ...             num_nodes=3)
            >>> sampler = OrchNeighborSampler(data, [1])
            >>> seeds = EdgeSamplerInput(None, torch.tensor([0]), torch.tensor([1]))
            >>> def draw():
            ...     with drawing_from(torch.Generator().manual_seed(0)):
            ...         negatives = NegativeSampling("binary")
            ...         out = sampler.sample_from_edges(seeds, negatives)
            ...     return out.metadata[1].tolist()
            >>> draw() == draw()
            True
        """
        if neg_sampling is not None and _generator() is not None:
            neg_sampling = _DrawnNegatives(
                neg_sampling.mode,
                neg_sampling.amount,
                neg_sampling.src_weight,
                neg_sampling.dst_weight,
            )
        return super().sample_from_edges(inputs, neg_sampling)

    def __getstate__(self) -> dict[str, Any]:
        # The kernel's layout stays in its process; a worker rebuilds it.
        return {**self.__dict__, "_layout": None}

    @property
    def layout(self) -> KernelGraph:
        """The graph as the kernel reads it (built on first use, per process)."""
        if self._layout is None:
            self._layout = KernelGraph.of(self)
        return self._layout

    def _sample(
        self,
        seed: Tensor | dict,
        seed_time: Tensor | dict | None = None,
        **kwargs: Any,
    ) -> SamplerOutput | HeteroSamplerOutput:
        layout = self.layout
        hetero = isinstance(seed, dict)
        seeds = seed if hetero else {None: seed}
        times = seed_time if hetero or seed_time is None else {None: seed_time}
        induced = self.subgraph_type == SubgraphType.induced
        out = sample_layers(
            layout.graph,
            self._kernel_seeds(layout, seeds),
            self._kernel_fanouts(layout),
            (self._seed_times(layout, seeds, times), *layout.times),
            layout.weights,
            (self.replace, self.disjoint, self.temporal_strategy == "last", induced),
            int(torch.randint(0, 2**62, (1,), generator=_generator())),
            node_map(layout.num_nodes),
            _EMPTY_MASK if self.hot_mask is None else self.hot_mask.numpy(),
        )
        if hetero:
            return self._hetero_output(layout, *out)
        return self._homogeneous_output(*out)

    @staticmethod
    def _kernel_seeds(layout: KernelGraph, seeds: dict) -> tuple[np.ndarray, ...]:
        index = {node_type: i for i, node_type in enumerate(layout.node_types)}
        kinds = [np.full(s.numel(), index[t], dtype=np.int64) for t, s in seeds.items()]
        nodes = [s.to(torch.long).numpy() for s in seeds.values()]
        return _concatenate(kinds), _concatenate(nodes)

    def _kernel_fanouts(self, layout: KernelGraph) -> np.ndarray:
        if layout.edge_types == [None]:
            return np.asarray([self.num_neighbors.get_mapped_values()], np.int64)
        fanouts = self.num_neighbors.get_mapped_values(layout.edge_types)
        rows = [fanouts[self.to_rel_type[k]] for k in layout.edge_types]
        hops = max((len(r) for r in rows), default=0)
        padded = [r + [0] * (hops - len(r)) for r in rows]
        return np.asarray(padded, dtype=np.int64).reshape(len(rows), hops)

    def _seed_times(
        self, layout: KernelGraph, seeds: dict, times: dict | None
    ) -> np.ndarray:
        # Each disjoint subgraph's time: given, or its seed's node time.
        dtype = layout.time_dtype
        if not self.is_temporal:
            return np.zeros(0, dtype=dtype)
        if times is not None:
            return _concatenate([times[t].numpy().astype(dtype) for t in seeds])
        node_time = (
            self.node_time
            if isinstance(self.node_time, dict)
            else {None: self.node_time}
        )
        if node_time is None or any(node_time.get(t) is None for t in seeds):
            raise ValueError(
                "temporal sampling on edge times (time_attr on edges) needs the "
                "seeds' times: give the loader input_time (edge_label_time for "
                "links)"
            )
        return _concatenate(
            [
                node_time[t][s.to(torch.long)].numpy().astype(dtype)
                for t, s in seeds.items()
            ]
        )

    def _homogeneous_output(
        self, node, batch, nodes_per_hop, row, col, edge, edges_per_hop
    ) -> SamplerOutput:
        row, col = torch.from_numpy(row), torch.from_numpy(col)
        if self.sample_direction == "backward":
            row, col = col, row
        return SamplerOutput(
            node=torch.from_numpy(node),
            row=row,
            col=col,
            edge=torch.from_numpy(edge),
            batch=torch.from_numpy(batch) if self.disjoint else None,
            num_sampled_nodes=self._per_hop(nodes_per_hop[0].tolist()),
            num_sampled_edges=self._per_hop(edges_per_hop[0].tolist()),
        )

    def _per_hop(self, counts: Any) -> Any:
        # An induced subgraph's edges are not sampled hop by hop: PyG gives no
        # per-hop counts for it.
        return None if self.subgraph_type == SubgraphType.induced else counts

    def _hetero_output(
        self, layout, node, batch, nodes_per_hop, row, col, edge, edges_per_hop
    ) -> HeteroSamplerOutput:
        node_types, edge_types = layout.node_types, layout.edge_types
        node_split = _split(node, nodes_per_hop.sum(axis=1), node_types)
        edge_counts = edges_per_hop.sum(axis=1)
        row, col = (
            _split(row, edge_counts, edge_types),
            _split(col, edge_counts, edge_types),
        )
        if self.sample_direction == "backward":
            row, col = col, row
        restore = getattr(self, "to_restored_edge_type", None)
        if self.sample_direction != "backward":
            restore = None
        edge_types_out = [restore[k] if restore else k for k in edge_types]

        def by_edge_type(values: dict) -> dict:
            return dict(zip(edge_types_out, values.values(), strict=True))

        return HeteroSamplerOutput(
            node=node_split,
            row=by_edge_type(row),
            col=by_edge_type(col),
            edge=by_edge_type(_split(edge, edge_counts, edge_types)),
            batch=_split(batch, nodes_per_hop.sum(axis=1), node_types)
            if self.disjoint
            else None,
            num_sampled_nodes=self._per_hop(
                dict(zip(node_types, nodes_per_hop.tolist(), strict=True))
            ),
            num_sampled_edges=self._per_hop(
                dict(zip(edge_types_out, edges_per_hop.tolist(), strict=True))
            ),
        )


class _DrawnNegatives(NegativeSampling):
    # PyG's negative sampling, drawn from this thread's generator: PyG's
    # sample() draws from torch's global one, which the training thread
    # shares.
    def sample(
        self, num_samples: int, endpoint: str, num_nodes: int | None = None
    ) -> Tensor:
        weight = self.src_weight if endpoint == "src" else self.dst_weight
        if weight is None and num_nodes is not None:
            return torch.randint(num_nodes, (num_samples,), generator=_generator())
        if weight is None or (num_nodes is not None and weight.numel() != num_nodes):
            return super().sample(num_samples, endpoint, num_nodes)  # PyG's error
        return torch.multinomial(
            weight, num_samples, replacement=True, generator=_generator()
        )


def derived_seed(base_seed: int, index: int) -> int:
    """A seed for item ``index`` of a run seeded ``base_seed``, independent of the others.

    A batch (or a hot buffer) drawing from its own generator seeded so draws
    the same numbers whatever the other items drew, so a resumed epoch can
    start at any of them.

    Example:
        >>> derived_seed(0, 1) != derived_seed(0, 2), derived_seed(5, 1) == derived_seed(5, 1)
        (True, True)
    """  # noqa: E501 - one line
    state = np.random.SeedSequence([base_seed, index]).generate_state(1, np.uint64)
    return int(state[0] >> np.uint64(2))


def _generator() -> torch.Generator | None:
    # The generator drawing_from set for this thread, else torch's global one.
    return getattr(_scratch, "generator", None)


def _concatenate(arrays: list[np.ndarray]) -> np.ndarray:
    return np.concatenate(arrays) if arrays else np.zeros(0, dtype=np.int64)


def _split(values: np.ndarray, counts: np.ndarray, keys: list[Any]) -> dict:
    # Consecutive runs of values, one per key, as tensors.
    ends = np.cumsum(counts).tolist()
    starts = [0, *ends][:-1]
    return {
        key: torch.from_numpy(values[start:end])
        for key, start, end in zip(keys, starts, ends, strict=True)
    }
