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
from torch_geometric.data import HeteroData
from torch_geometric.sampler import NeighborSampler, SamplerOutput
from torch_geometric.sampler.base import SubgraphType

from pyg_orch.kernels.sample import sample_layers

# Each thread keeps one global-to-local map per graph size: the kernel restores
# it to -1 before it returns, so reuse is safe and saves an O(num_nodes) fill
# per batch.
_scratch = threading.local()


def node_map(num_nodes: int) -> np.ndarray:
    """This thread's reusable global-to-local map (all -1) for ``num_nodes``.

    The sampler kernel restores every entry it sets, so the map stays all -1
    between calls and one per thread and graph size is enough.

    Example:
        >>> node_map(4).tolist()
        [-1, -1, -1, -1]
    """
    maps = _scratch.__dict__.setdefault("maps", {})
    if num_nodes not in maps:
        maps[num_nodes] = np.full(num_nodes, -1, dtype=np.int64)
    return maps[num_nodes]


_EMPTY_MASK = np.zeros(0, dtype=np.bool_)


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


def pyg_backend_available() -> bool:
    """Whether PyG's own sampler can run: ``pyg-lib`` or ``torch-sparse`` is there.

    Example:
        >>> isinstance(pyg_backend_available(), bool)
        True
    """
    return pyg_typing.WITH_PYG_LIB or pyg_typing.WITH_TORCH_SPARSE


def _unsupported_option(data: Any, kwargs: dict[str, Any]) -> str | None:
    """Names the first option the Numba kernel does not handle, if any."""
    if isinstance(data, HeteroData) or isinstance(kwargs.get("num_neighbors"), dict):
        return "heterogeneous graphs (HeteroData)"
    if kwargs.get("time_attr") is not None:
        return "temporal sampling (time_attr)"
    if SubgraphType(kwargs.get("subgraph_type", "directional")) == (
        SubgraphType.induced
    ) or not kwargs.get("directed", True):
        return "induced subgraphs (subgraph_type='induced')"
    if kwargs.get("disjoint", False):
        return "disjoint subgraphs (disjoint=True)"
    if kwargs.get("weight_attr") is not None:
        return "weighted sampling (weight_attr)"
    return None


class OrchNeighborSampler(NeighborSampler):
    r"""PyG's :class:`~torch_geometric.sampler.NeighborSampler`, sampling with Numba.

    Takes the same arguments and returns the same
    :class:`~torch_geometric.sampler.SamplerOutput`: nodes in layered order
    (seeds, then hop 1, ...), local ``row``/``col`` edges, CSC edge positions
    that PyG maps to ``e_id`` through its edge permutation, and per-hop
    ``num_sampled_nodes`` / ``num_sampled_edges`` so that
    :func:`~torch_geometric.utils.trim_to_layer` works. It needs neither
    ``pyg-lib`` nor ``torch-sparse``.

    Homogeneous graphs are sampled uniformly, with or without replacement, with
    fan-out ``-1`` (all neighbours) and ``0``, into directional or bidirectional
    subgraphs. Batches are deterministic under :func:`torch.manual_seed`.
    Heterogeneous, temporal, induced, disjoint and weighted sampling fall back
    to PyG's own backend when ``pyg-lib`` or ``torch-sparse`` is installed and
    raise :class:`NotImplementedError` otherwise.

    Args:
        data: the graph, as for :class:`~torch_geometric.sampler.NeighborSampler`.
        num_neighbors: neighbours to sample per node, one entry per hop.
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
        unsupported = _unsupported_option(
            data, {"num_neighbors": num_neighbors, **kwargs}
        )
        if unsupported is not None and not pyg_backend_available():
            raise NotImplementedError(
                f"OrchNeighborSampler does not support {unsupported} yet, and "
                f"PyG's own sampler needs 'pyg-lib' or 'torch-sparse', which "
                f"are not installed. Drop that option or install one of them."
            )
        self.use_pyg_backend = unsupported is not None
        # Nodes the last hop does not expand (hot nodes); set by the loader.
        self.hot_mask: Tensor | None = None
        with warnings.catch_warnings():
            # PyG warns that sampling without pyg-lib is deprecated; this
            # class is the sampler that makes pyg-lib unnecessary.
            warnings.filterwarnings("ignore", message=".*without a 'pyg-lib'")
            super().__init__(data, num_neighbors, **kwargs)

    def _sample(
        self,
        seed: Tensor | dict,
        seed_time: Tensor | dict | None = None,
        **kwargs: Any,
    ) -> SamplerOutput:
        if self.use_pyg_backend:
            return super()._sample(seed, seed_time, **kwargs)
        fanouts = np.asarray(self.num_neighbors.get_mapped_values(), dtype=np.int64)
        generator = getattr(_scratch, "generator", None)
        random_seed = int(torch.randint(0, 2**62, (1,), generator=generator))
        node, row, col, edge, nodes_per_hop, edges_per_hop = sample_layers(
            self.colptr.numpy(),
            self.row.numpy(),
            seed.to(torch.long).numpy(),
            fanouts,
            self.replace,
            random_seed,
            node_map(self.colptr.numel() - 1),
            _EMPTY_MASK if self.hot_mask is None else self.hot_mask.numpy(),
        )
        row, col = torch.from_numpy(row), torch.from_numpy(col)
        if self.sample_direction == "backward":
            row, col = col, row
        return SamplerOutput(
            node=torch.from_numpy(node),
            row=row,
            col=col,
            edge=torch.from_numpy(edge),
            batch=None,
            num_sampled_nodes=nodes_per_hop.tolist(),
            num_sampled_edges=edges_per_hop.tolist(),
        )
