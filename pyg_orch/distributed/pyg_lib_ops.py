"""pyg-lib's four distributed ops, from Python: what PyG's engine calls.

``torch_geometric.distributed`` samples through four compiled ops of pyg-lib,
``torch.ops.pyg.dist_neighbor_sample``, ``relabel_neighborhood``,
``hetero_relabel_neighborhood`` and ``merge_sampler_outputs``.
:func:`register_ops` defines them with ``torch.library`` under pyg-lib's names
and schemas, backed by :mod:`pyg_orch.kernels.distributed_sample`, unless
pyg-lib is installed or the ops are already defined.
"""

import importlib.util
import threading
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
import torch_geometric.typing

from pyg_orch.kernels import distributed_sample as kernels

# pyg-lib's schemas (csrc/sampler/neighbor.cpp, dist_relabel.cpp,
# dist_merge_outputs.cpp), without the "pyg::" prefix.
SCHEMAS = {
    "dist_neighbor_sample": (
        "dist_neighbor_sample(Tensor rowptr, Tensor col, Tensor seed, int "
        "num_neighbors, Tensor? node_time = None, Tensor? edge_time = None, "
        "Tensor? seed_time = None, Tensor? edge_weight = None, bool csc = False, "
        "bool replace = False, bool directed = True, bool disjoint = False, "
        "str temporal_strategy = 'uniform') -> (Tensor, Tensor, int[])"
    ),
    "relabel_neighborhood": (
        "relabel_neighborhood(Tensor seed, Tensor sampled_nodes_with_duplicates, "
        "int[] num_sampled_neighbors_per_node, int num_nodes, Tensor? batch = None, "
        "bool csc = False, bool disjoint = False) -> (Tensor, Tensor)"
    ),
    "hetero_relabel_neighborhood": (
        "hetero_relabel_neighborhood(str[] node_types, (str, str, str)[] "
        "edge_types, Dict(str, Tensor) seed_dict, Dict(str, Tensor) "
        "sampled_nodes_with_duplicates_dict, Dict(str, int[][]) "
        "num_sampled_neighbors_per_node_dict, Dict(str, int) num_nodes_dict, "
        "Dict(str, Tensor)? batch_dict = None, bool csc = False, bool disjoint = "
        "False) -> (Dict(str, Tensor), Dict(str, Tensor))"
    ),
    "merge_sampler_outputs": (
        "merge_sampler_outputs(Tensor[] node_ids, Tensor[] edge_ids, "
        "int[][] cumsum_neighbors_per_node, int[] partition_ids, int[] "
        "partition_orders, int num_partitions, int num_neighbors, Tensor? "
        "batch, bool disjoint) -> (Tensor, Tensor, Tensor?, int[])"
    ),
}

_lock = threading.Lock()
_library: torch.library.Library | None = None  # kept alive: it owns the ops


def _numpy(tensor: torch.Tensor | None) -> np.ndarray | None:
    return None if tensor is None else tensor.detach().cpu().numpy()


def _random_seed() -> int:
    # From torch's generator, so that torch.manual_seed makes a run repeat.
    return int(torch.randint(0, 2**62, (1,)))


def dist_neighbor_sample(
    rowptr: torch.Tensor,
    col: torch.Tensor,
    seed: torch.Tensor,
    num_neighbors: int,
    node_time: torch.Tensor | None = None,
    edge_time: torch.Tensor | None = None,
    seed_time: torch.Tensor | None = None,
    edge_weight: torch.Tensor | None = None,
    csc: bool = False,
    replace: bool = False,
    directed: bool = True,
    disjoint: bool = False,
    temporal_strategy: str = "uniform",
) -> tuple[torch.Tensor, torch.Tensor, list[int]]:
    """``torch.ops.pyg.dist_neighbor_sample``: one hop, as pyg-lib samples it.

    ``(rowptr, col)`` is the compressed graph (CSC when PyG calls it); the
    returned nodes start with the seeds, then each seed's sampled
    neighbours (``[n, 2]`` rows of ``(seed index, node)`` when
    ``disjoint``), the edges are positions in ``col``, and
    ``cumsum[i]:cumsum[i + 1]`` are seed ``i``'s neighbours. ``edge_weight``
    and undirected sampling are refused.

    Example:
        >>> node, edge, cumsum = dist_neighbor_sample(
        ...     torch.tensor([0, 1, 2]), torch.tensor([1, 0]), torch.tensor([0]), -1)
        >>> node.tolist(), edge.tolist(), cumsum
        ([0, 1], [0], [1, 2])
    """
    if edge_weight is not None:
        raise NotImplementedError(
            "pyg_orch's dist_neighbor_sample does not sample by edge_weight "
            "(PyG's DistNeighborSampler never passes one)"
        )
    if not directed:
        raise NotImplementedError("Undirected subgraphs not yet supported")
    if temporal_strategy not in ("uniform", "last"):
        raise ValueError("No valid temporal strategy found")
    if (node_time is not None or edge_time is not None) and not disjoint:
        raise ValueError("Temporal sampling needs to create disjoint subgraphs")
    for name, time in (("node_time", node_time), ("edge_time", edge_time),
                       ("seed_time", seed_time)):  # fmt: skip
        if time is not None and time.is_floating_point():
            raise TypeError(f"'{name}' must hold integers, as pyg-lib's does")
    num_nodes = rowptr.numel() - 1
    if seed.numel() and not (0 <= int(seed.min()) and int(seed.max()) < num_nodes):
        # The kernel does not check its indices: an id past the graph would
        # read (and write) outside its arrays.
        raise IndexError(
            f"dist_neighbor_sample: seed ids must be in [0, {num_nodes}) (the "
            f"graph's nodes), got ids in [{int(seed.min())}, {int(seed.max())}]"
        )
    node, batch, edge, cumsum = kernels.dist_sample_one_hop(
        _numpy(rowptr), _numpy(col), _numpy(seed), num_neighbors,
        replace=replace, seed_time=_numpy(seed_time), node_time=_numpy(node_time),
        edge_time=_numpy(edge_time), last=temporal_strategy == "last",
        random_seed=_random_seed(),
    )  # fmt: skip
    if disjoint:
        node = np.stack([batch, node], axis=1)
    dtype = seed.dtype
    return (
        torch.from_numpy(node).to(dtype),
        torch.from_numpy(edge).to(dtype),
        cumsum.tolist(),
    )


def relabel_neighborhood(
    seed: torch.Tensor,
    sampled_nodes_with_duplicates: torch.Tensor,
    num_sampled_neighbors_per_node: list[int],
    num_nodes: int,
    batch: torch.Tensor | None = None,
    csc: bool = False,
    disjoint: bool = False,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``torch.ops.pyg.relabel_neighborhood``: a sampled subgraph's local edges.

    Source ``i`` (seeds, then nodes in the order they were expanded) sampled
    the next ``num_sampled_neighbors_per_node[i]`` of
    ``sampled_nodes_with_duplicates``; each gets its subgraph-local index.
    Returns ``(row, col)`` = ``(i, neighbour)``, swapped when ``csc``.

    Example:
        >>> relabel_neighborhood(torch.tensor([2, 3]), torch.tensor([1, 3, 2, 4]),
        ...                      [2, 2], 6)
        (tensor([0, 0, 1, 1]), tensor([2, 1, 0, 3]))
    """
    if disjoint:
        if batch is None:
            raise ValueError("Batch needs to be specified to create disjoint subgraphs")
        if batch.numel() != sampled_nodes_with_duplicates.numel():
            raise ValueError("Each node must belong to a subgraph")
    rows, cols = kernels.relabel(
        [_numpy(seed)], [_numpy(sampled_nodes_with_duplicates)],
        [[np.asarray(num_sampled_neighbors_per_node, dtype=np.int64)]],
        np.zeros(1, dtype=np.int64), np.zeros(1, dtype=np.int64),
        [_numpy(batch)] if disjoint else None,
    )  # fmt: skip
    return _edges(rows[0], cols[0], csc, seed.dtype)


def hetero_relabel_neighborhood(
    node_types: list[str],
    edge_types: list[tuple[str, str, str]],
    seed_dict: dict[str, torch.Tensor],
    sampled_nodes_with_duplicates_dict: dict[str, torch.Tensor],
    num_sampled_neighbors_per_node_dict: dict[str, list[list[int]]],
    num_nodes_dict: dict[str, int],
    batch_dict: dict[str, torch.Tensor] | None = None,
    csc: bool = False,
    disjoint: bool = False,
) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    """``torch.ops.pyg.hetero_relabel_neighborhood``, per edge type ``"a__r__b"``.

    As :func:`relabel_neighborhood`, layer by layer and edge type by edge
    type; ``num_sampled_neighbors_per_node_dict`` holds, per edge type, the
    counts of each layer. With ``csc``, an edge type ``(a, r, b)`` expands
    ``b`` nodes into ``a`` neighbours.

    Example:
        >>> rows, cols = hetero_relabel_neighborhood(
        ...     ["p"], [("p", "to", "p")], {"p": torch.tensor([2, 3])},
        ...     {"p": torch.tensor([1, 3, 2, 4])}, {"p__to__p": [[2, 2]]}, {"p": 6})
        >>> rows["p__to__p"].tolist(), cols["p__to__p"].tolist()
        ([0, 0, 1, 1], [2, 1, 0, 3])
    """
    if disjoint and batch_dict is None:
        raise ValueError("Batch needs to be specified to create disjoint subgraphs")
    del num_nodes_dict  # pyg-lib sizes its maps by it
    # pyg-lib numbers disjoint subgraphs' seeds in the order of seed_dict.
    order = list(seed_dict) + [t for t in node_types if t not in seed_dict]
    neighbour = [t[0] if csc else t[2] for t in edge_types]
    source = [t[2] if csc else t[0] for t in edge_types]
    rel = ["__".join(t) for t in edge_types]
    empty = torch.empty(0, dtype=torch.int64)
    rows, cols = kernels.relabel(
        [_numpy(seed_dict.get(t, empty)) for t in order],
        [_numpy(sampled_nodes_with_duplicates_dict[t]) for t in order],
        [num_sampled_neighbors_per_node_dict[r] for r in rel],
        np.array([order.index(t) for t in neighbour], dtype=np.int64),
        np.array([order.index(t) for t in source], dtype=np.int64),
        [_numpy(batch_dict[t]) for t in order] if disjoint else None,
    )
    dtype = next(iter(seed_dict.values())).dtype
    out_row, out_col = {}, {}
    for r, row, col in zip(rel, rows, cols, strict=True):
        out_row[r], out_col[r] = _edges(row, col, csc, dtype)
    return out_row, out_col


def merge_sampler_outputs(
    node_ids: list[torch.Tensor],
    edge_ids: list[torch.Tensor],
    cumsum_neighbors_per_node: list[list[int]],
    partition_ids: list[int],
    partition_orders: list[int],
    num_partitions: int,
    num_neighbors: int,
    batch: torch.Tensor | None = None,
    disjoint: bool = False,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None, list[int]]:
    """``torch.ops.pyg.merge_sampler_outputs``: partitions' hops in seed order.

    Example:
        >>> node, edge, _, counts = merge_sampler_outputs(
        ...     [torch.tensor([0, 5]), torch.tensor([1, 6])],
        ...     [torch.tensor([3]), torch.tensor([4])], [[1, 2], [1, 2]],
        ...     [1, 0], [0, 0], 2, -1, None, False)
        >>> node.tolist(), edge.tolist(), counts
        ([6, 5], [4, 3], [1, 1])
    """
    del num_partitions, num_neighbors  # the slot sizes of pyg-lib's buffers
    node, edge, out_batch, counts = kernels.merge_outputs(
        [_numpy(n) for n in node_ids], [_numpy(e) for e in edge_ids],
        cumsum_neighbors_per_node, np.asarray(partition_ids, dtype=np.int64),
        np.asarray(partition_orders, dtype=np.int64),
        _numpy(batch) if disjoint else None,
    )  # fmt: skip
    dtype = node_ids[0].dtype
    return (
        torch.from_numpy(node).to(dtype),
        torch.from_numpy(edge).to(dtype),
        None if out_batch is None else torch.from_numpy(out_batch).to(dtype),
        counts.tolist(),
    )


def _edges(row: np.ndarray, col: np.ndarray, csc: bool, dtype: torch.dtype):
    row_t, col_t = torch.from_numpy(row).to(dtype), torch.from_numpy(col).to(dtype)
    return (col_t, row_t) if csc else (row_t, col_t)


OPS: dict[str, Callable[..., Any]] = {
    "dist_neighbor_sample": dist_neighbor_sample,
    "relabel_neighborhood": relabel_neighborhood,
    "hetero_relabel_neighborhood": hetero_relabel_neighborhood,
    "merge_sampler_outputs": merge_sampler_outputs,
}


def op_defined(name: str) -> bool:
    """Whether ``torch.ops.pyg.<name>`` exists (pyg-lib's or ours).

    Example:
        >>> op_defined("no_such_op")
        False
    """
    try:
        getattr(torch.ops.pyg, name)
    except (AttributeError, RuntimeError):
        return False
    return True


def register_ops() -> list[str]:
    """Defines the four ops that are not defined yet, unless pyg-lib is there.

    Returns:
        The names defined by this call (none on a second call).

    Example:
        >>> register_ops()  # import pyg_orch.distributed registered them
        []
    """
    global _library
    if torch_geometric.typing.WITH_PYG_LIB or importlib.util.find_spec("pyg_lib"):
        return []  # never over a pyg-lib, even one PyG could not load
    with _lock:
        missing = [name for name in OPS if not op_defined(name)]
        if missing and _library is None:
            _library = torch.library.Library("pyg", "FRAGMENT")
        for name in missing:
            _library.define(SCHEMAS[name])
            # CompositeExplicitAutograd: also the ops without a tensor among
            # their arguments' top level (lists and dicts of tensors) dispatch.
            _library.impl(name, OPS[name], "CompositeExplicitAutograd")
        return missing


def warm_up() -> None:
    """Compiles the kernels (or loads them from Numba's cache) on a tiny graph.

    PyG waits 10 s for every worker after it starts; a kernel compiled on
    the first batch would be late for it.

    Example:
        >>> warm_up()
    """
    colptr, row = np.array([0, 1, 2]), np.array([1, 0])
    seed = np.array([0, 1])
    kernels.dist_sample_one_hop(colptr, row, seed, 1)
    kernels.dist_sample_one_hop(colptr, row, seed, 1, node_time=np.arange(2))
    kernels.relabel([seed], [row], [[np.ones(2, dtype=np.int64)]],
                    np.zeros(1, np.int64), np.zeros(1, np.int64))  # fmt: skip
    kernels.merge_outputs([seed], [row], [np.array([0, 1, 2])],
                          np.zeros(2, np.int64), np.arange(2))  # fmt: skip
