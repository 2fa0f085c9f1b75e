"""A Numba neighbour sampler that plugs into PyG's ``NeighborSampler``."""

from __future__ import annotations

import contextlib
import threading
import warnings
from collections.abc import Iterator
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
    neighbor_sampler,
)
from torch_geometric.sampler.base import SubgraphType

from pyg_orch.kernel_graph import (
    EMPTY_MASK,
    KernelGraph,
    kernel_seed_times,
    kernel_seeds,
    node_map,
    split_by,
)
from pyg_orch.kernels.sample import sample_layers

# Each thread's generator, set by drawing_from.
_scratch = threading.local()

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
    # Where pyg_orch's backend applies, PyG's sampler module already sees
    # them provided (pyg_orch.backend); only beside a torch-sparse without
    # pyg-lib are the global flags opened, for the constructor alone.
    seen = neighbor_sampler.torch_geometric.typing
    flags = [
        flag
        for flag in ("WITH_EDGE_TIME_NEIGHBOR_SAMPLE", "WITH_WEIGHTED_NEIGHBOR_SAMPLE")
        if not getattr(seen, flag)
    ]
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
        if neg_sampling is not None and generator_of_thread() is not None:
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
            kernel_seeds(layout, seeds),
            self._kernel_fanouts(layout),
            (
                kernel_seed_times(
                    layout, seeds, times, self._node_times(), self.is_temporal
                ),
                *layout.times,
            ),
            layout.weights,
            (self.replace, self.disjoint, self.temporal_strategy == "last", induced),
            int(torch.randint(0, 2**62, (1,), generator=generator_of_thread())),
            node_map(layout.num_nodes),
            EMPTY_MASK if self.hot_mask is None else self.hot_mask.numpy(),
        )
        if hetero:
            return self._hetero_output(layout, *out)
        return self._homogeneous_output(*out)

    def _kernel_fanouts(self, layout: KernelGraph) -> np.ndarray:
        if layout.edge_types == [None]:
            return np.asarray([self.num_neighbors.get_mapped_values()], np.int64)
        fanouts = self.num_neighbors.get_mapped_values(layout.edge_types)
        rows = [fanouts[self.to_rel_type[k]] for k in layout.edge_types]
        hops = max((len(r) for r in rows), default=0)
        padded = [r + [0] * (hops - len(r)) for r in rows]
        return np.asarray(padded, dtype=np.int64).reshape(len(rows), hops)

    def _node_times(self) -> dict:
        # The node times by node type ({None: ...} on a homogeneous graph).
        if isinstance(self.node_time, dict):
            return self.node_time
        return {None: self.node_time}

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
        node_split = split_by(node, nodes_per_hop.sum(axis=1), node_types)
        edge_counts = edges_per_hop.sum(axis=1)
        row, col = (
            split_by(row, edge_counts, edge_types),
            split_by(col, edge_counts, edge_types),
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
            edge=by_edge_type(split_by(edge, edge_counts, edge_types)),
            batch=split_by(batch, nodes_per_hop.sum(axis=1), node_types)
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
            return torch.randint(
                num_nodes, (num_samples,), generator=generator_of_thread()
            )
        if weight is None or (num_nodes is not None and weight.numel() != num_nodes):
            return super().sample(num_samples, endpoint, num_nodes)  # PyG's error
        return torch.multinomial(
            weight, num_samples, replacement=True, generator=generator_of_thread()
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


def generator_of_thread() -> torch.Generator | None:
    """The generator :func:`drawing_from` set for this thread; ``None``: torch's global one.

    Example:
        >>> generator_of_thread() is None
        True
    """  # noqa: E501 - one line
    return getattr(_scratch, "generator", None)
