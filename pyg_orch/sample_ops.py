"""pyg-lib's and torch-sparse's neighbour-sampling ops, from pyg_orch's kernel.

PyG's :class:`~torch_geometric.sampler.NeighborSampler` samples through
``torch.ops.pyg.neighbor_sample`` and ``hetero_neighbor_sample`` (pyg-lib) and,
for induced subgraphs, ``torch.ops.torch_sparse.neighbor_sample`` and
``hetero_neighbor_sample``. This module implements the four, backed by
:func:`~pyg_orch.kernels.sample.sample_layers`;
:func:`pyg_orch.backend.register_ops` defines them with ``torch.library``
under those names and schemas where neither package defines them.

The ops take the graph's CSC tensors on every call; the kernel's layout of them
(:class:`~pyg_orch.kernel_graph.KernelGraph`) is built once per graph and kept
while those tensors live and are not changed in place.
"""

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from torch import Tensor

from pyg_orch.kernel_graph import (
    EMPTY_MASK,
    KernelGraph,
    kernel_seed_times,
    kernel_seeds,
    node_map,
    split_by,
)
from pyg_orch.kernels.sample import sample_layers
from pyg_orch.sampling import generator_of_thread

_lock = threading.Lock()
# Layouts of recent graphs, by the identity and version of their tensors.
_layouts: OrderedDict[tuple, tuple[list, KernelGraph]] = OrderedDict()
_CACHED_GRAPHS = 8


def neighbor_sample(
    rowptr: Tensor,
    col: Tensor,
    seed: Tensor,
    num_neighbors: list[int],
    node_time: Tensor | None = None,
    edge_time: Tensor | None = None,
    seed_time: Tensor | None = None,
    edge_weight: Tensor | None = None,
    csc: bool = False,
    replace: bool = False,
    directed: bool = True,
    disjoint: bool = False,
    temporal_strategy: str = "uniform",
    return_edge_id: bool = True,
) -> tuple[Tensor, Tensor, Tensor, Tensor | None, list[int], list[int]]:
    """``torch.ops.pyg.neighbor_sample``: a layered neighbourhood, as pyg-lib samples.

    ``(rowptr, col)`` is the graph compressed by the nodes that are expanded
    (CSC when ``csc``, as PyG calls it). Returns ``(row, col, node, edge,
    nodes_per_hop, edges_per_hop)``: local edges (``col`` the expanded end
    when ``csc``), the nodes (seeds first; ``[n, 2]`` rows of ``(subgraph,
    node)`` when ``disjoint``), the edges' positions in ``col``, and the
    per-hop counts. ``directed=False`` returns every edge among the sampled
    nodes.

    Example:
        >>> row, col, node, edge, nodes, edges = neighbor_sample(
        ...     torch.tensor([0, 2, 2, 2]), torch.tensor([1, 2]), torch.tensor([0]),
        ...     [-1], csc=True)
        >>> node.tolist(), row.tolist(), col.tolist(), nodes, edges
        ([0, 1, 2], [1, 2], [0, 0], [1, 2], [2])
    """
    layout = _layout(
        [rowptr, col, node_time, edge_time, edge_weight],
        [_seed_bound(seed, None, rowptr.numel() - 1)],
        lambda least: KernelGraph.build(
            [None], [None], {None: None},
            _stores({None: rowptr}, {None: col}, {None: node_time},
                    {None: edge_time}, {None: edge_weight}),
            [max(rowptr.numel() - 1, least[0])],
        ),
    )  # fmt: skip
    times = None if seed_time is None else {None: seed_time}
    node, batch, nodes_per_hop, row, col_, edge, edges_per_hop = _sample(
        layout, {None: seed}, times, {None: node_time},
        np.asarray([num_neighbors], dtype=np.int64),
        (replace, disjoint, temporal_strategy, not directed),
    )  # fmt: skip
    if not csc:
        row, col_ = col_, row
    dtype = rowptr.dtype
    node_out = torch.from_numpy(node).to(dtype)
    if disjoint:
        node_out = torch.stack([torch.from_numpy(batch).to(dtype), node_out], dim=1)
    return (
        torch.from_numpy(row).to(dtype),
        torch.from_numpy(col_).to(dtype),
        node_out,
        torch.from_numpy(edge).to(dtype) if return_edge_id else None,
        nodes_per_hop[0].tolist(),
        edges_per_hop[0].tolist(),
    )


def hetero_neighbor_sample(
    node_types: list[str],
    edge_types: list[tuple[str, str, str]],
    rowptr_dict: dict[str, Tensor],
    col_dict: dict[str, Tensor],
    seed_dict: dict[str, Tensor],
    num_neighbors_dict: dict[str, list[int]],
    node_time_dict: dict[str, Tensor] | None = None,
    edge_time_dict: dict[str, Tensor] | None = None,
    seed_time_dict: dict[str, Tensor] | None = None,
    edge_weight_dict: dict[str, Tensor] | None = None,
    csc: bool = False,
    replace: bool = False,
    directed: bool = True,
    disjoint: bool = False,
    temporal_strategy: str = "uniform",
    return_edge_id: bool = True,
) -> tuple[dict, dict, dict, dict | None, dict, dict]:
    """``torch.ops.pyg.hetero_neighbor_sample``: :func:`neighbor_sample` per type.

    Edge types are keyed ``"src__rel__dst"``, node types by name; an edge
    type ``(a, r, b)`` expands ``b`` nodes into ``a`` neighbours when
    ``csc`` (``a`` into ``b`` otherwise).

    Example:
        >>> out = hetero_neighbor_sample(
        ...     ["u", "i"], [("u", "to", "i")], {"u__to__i": torch.tensor([0, 1])},
        ...     {"u__to__i": torch.tensor([0])}, {"i": torch.tensor([0])},
        ...     {"u__to__i": [-1]}, csc=True)
        >>> {k: v.tolist() for k, v in out[2].items()}
        {'u': [0], 'i': [0]}
    """
    rel = {edge_type: "__".join(edge_type) for edge_type in edge_types}
    # The kernel expands an edge type's last node type into its first.
    expanded = edge_types if csc else [(t[2], t[1], t[0]) for t in edge_types]
    kernel_rel = dict(zip(expanded, rel.values(), strict=True))
    node_time_dict = node_time_dict or {}
    # A type's ids end where the CSCs that expand it end.
    limits: dict[str, int] = {}
    for edge_type, key in kernel_rel.items():
        size = rowptr_dict[key].numel() - 1
        limits[edge_type[2]] = min(limits.get(edge_type[2], size), size)
    for node_type in seed_dict:
        if node_type not in node_types:
            raise ValueError(f"seed node type {node_type!r} is not in node_types")
    tensors = [
        *(rowptr_dict[r] for r in rel.values()),
        *(col_dict[r] for r in rel.values()),
        *(d.get(k) for d in (edge_time_dict or {}, edge_weight_dict or {})
          for k in rel.values()),
        *(node_time_dict.get(t) for t in node_types),
    ]  # fmt: skip
    layout = _layout(
        tensors,
        [_seed_bound(seed_dict.get(t), t, limits.get(t)) for t in node_types],
        lambda least: KernelGraph.build(
            list(node_types), expanded, kernel_rel,
            _stores(rowptr_dict, col_dict, node_time_dict, edge_time_dict or {},
                    edge_weight_dict or {}),
            _node_counts(node_types, expanded, kernel_rel, rowptr_dict, col_dict,
                         node_time_dict, least),
        ),
    )  # fmt: skip
    fanouts = [num_neighbors_dict.get(r, []) for r in rel.values()]
    hops = max((len(f) for f in fanouts), default=0)
    padded = np.asarray([f + [0] * (hops - len(f)) for f in fanouts], np.int64)
    node, batch, nodes_per_hop, row, col, edge, edges_per_hop = _sample(
        layout, seed_dict, seed_time_dict, node_time_dict,
        padded.reshape(len(fanouts), hops),
        (replace, disjoint, temporal_strategy, not directed),
    )  # fmt: skip
    if not csc:
        row, col = col, row
    keys = list(rel.values())
    edge_counts = edges_per_hop.sum(axis=1)
    node_out = split_by(node, nodes_per_hop.sum(axis=1), node_types)
    if disjoint:
        batches = split_by(batch, nodes_per_hop.sum(axis=1), node_types)
        node_out = {t: torch.stack([batches[t], node_out[t]], 1) for t in node_out}
    return (
        split_by(row, edge_counts, keys),
        split_by(col, edge_counts, keys),
        node_out,
        split_by(edge, edge_counts, keys) if return_edge_id else None,
        dict(zip(node_types, nodes_per_hop.tolist(), strict=True)),
        dict(zip(keys, edges_per_hop.tolist(), strict=True)),
    )


def induced_neighbor_sample(
    colptr: Tensor,
    row: Tensor,
    input_node: Tensor,
    num_neighbors: list[int],
    replace: bool,
    directed: bool,
) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """``torch.ops.torch_sparse.neighbor_sample``: ``(node, row, col, edge)``.

    What PyG calls for ``subgraph_type="induced"`` (``directed=False``).

    Example:
        >>> node, row, col, edge = induced_neighbor_sample(
        ...     torch.tensor([0, 1, 2]), torch.tensor([1, 0]), torch.tensor([0]),
        ...     [1], False, False)
        >>> node.tolist(), row.tolist(), col.tolist()
        ([0, 1], [1, 0], [0, 1])
    """
    out = neighbor_sample(
        colptr, row, input_node, num_neighbors, csc=True, replace=replace,
        directed=directed,
    )  # fmt: skip
    return out[2], out[0], out[1], out[3]


def induced_hetero_neighbor_sample(
    node_types: list[str],
    edge_types: list[tuple[str, str, str]],
    colptr_dict: dict[str, Tensor],
    row_dict: dict[str, Tensor],
    input_node_dict: dict[str, Tensor],
    num_neighbors_dict: dict[str, list[int]],
    num_hops: int,
    replace: bool,
    directed: bool,
) -> tuple[dict, dict, dict, dict]:
    """``torch.ops.torch_sparse.hetero_neighbor_sample``: ``(node, row, col, edge)``.

    Example:
        >>> node, row, col, edge = induced_hetero_neighbor_sample(
        ...     ["u", "i"], [("u", "to", "i")], {"u__to__i": torch.tensor([0, 1])},
        ...     {"u__to__i": torch.tensor([0])}, {"i": torch.tensor([0])},
        ...     {"u__to__i": [1]}, 1, False, False)
        >>> row["u__to__i"].tolist(), col["u__to__i"].tolist()
        ([0], [0])
    """
    del num_hops  # the fan-out lists say it
    out = hetero_neighbor_sample(
        node_types, edge_types, colptr_dict, row_dict, input_node_dict,
        num_neighbors_dict, csc=True, replace=replace, directed=directed,
    )  # fmt: skip
    return out[2], out[0], out[1], out[3]


def _stores(colptr, row, node_time, edge_time, edge_weight) -> dict[str, dict]:
    # Copies of the dicts: building a layout replaces their tensors by views.
    return {
        "colptr": dict(colptr), "row": dict(row), "node_time": dict(node_time),
        "edge_time": dict(edge_time), "edge_weight": dict(edge_weight),
    }  # fmt: skip


def _layout(
    tensors: list[Tensor | None],
    least: list[int],
    build: Callable[[list[int]], KernelGraph],
) -> KernelGraph:
    # The cached layout of these tensors, built anew when they are new or
    # changed, or when a seed lies past a type's nodes (a node without edges
    # the tensors do not show): each type then holds at least least[i] nodes.
    key = tuple(None if t is None else (id(t), t._version) for t in tensors)
    with _lock:
        hit = _layouts.get(key)
        if hit is not None and not all(
            ref() is t for ref, t in zip(hit[0], tensors, strict=True)
        ):
            hit = None
        if hit is not None:
            _layouts.move_to_end(key)
    if hit is not None:
        counts = np.diff(hit[1].graph[6])
        if all(c >= n for c, n in zip(counts.tolist(), least, strict=True)):
            return hit[1]
        least = [max(c, n) for c, n in zip(counts.tolist(), least, strict=True)]
    layout = build(least)
    refs = [(lambda: None) if t is None else weakref.ref(t) for t in tensors]
    with _lock:
        _layouts[key] = (refs, layout)
        while len(_layouts) > _CACHED_GRAPHS:
            _layouts.popitem(last=False)
    return layout


def _node_counts(node_types, edge_types, rel, rowptr, col, node_time, least):
    # Each type's nodes, as its CSCs, times and seeds tell (pyg-lib sizes
    # nothing by them; the kernel's node map needs them).
    counts = dict(zip(node_types, least, strict=True))
    for node_type, time in node_time.items():
        counts[node_type] = max(counts[node_type], time.numel())
    for edge_type in edge_types:
        key = rel[edge_type]
        counts[edge_type[2]] = max(counts[edge_type[2]], rowptr[key].numel() - 1)
        if col[key].numel():
            counts[edge_type[0]] = max(counts[edge_type[0]], int(col[key].max()) + 1)
    return [counts[t] for t in node_types]


def _seed_bound(seed: Tensor | None, node_type: Any, limit: int | None) -> int:
    # One past the largest seed id (0 without seeds). The kernel does not
    # check its indices: a seed past the CSC that expands it would read
    # another's, and a negative one outside the arrays.
    if seed is None or seed.numel() == 0:
        return 0
    low, high = int(seed.min()), int(seed.max())
    if low < 0 or (limit is not None and high >= limit):
        raise IndexError(
            f"neighbor_sample: seed ids of {node_type or 'the graph'} must be "
            f"in [0, {limit if limit is not None else 'inf'}), got ids in "
            f"[{low}, {high}]"
        )
    return high + 1


def _sample(layout, seeds, seed_times, node_time, fanouts, options):
    # The kernel's outputs for one call: node, batch, nodes per hop, row,
    # col, edge, edges per hop.
    replace, disjoint, strategy, induced = options
    if strategy not in ("uniform", "last"):
        raise ValueError(
            f"temporal_strategy must be 'uniform' or 'last', got {strategy!r}"
        )
    temporal = bool(layout.times[1].any() or layout.times[3].any())
    if temporal and not disjoint:
        raise ValueError("Temporal sampling needs to create disjoint subgraphs")
    return sample_layers(
        layout.graph,
        kernel_seeds(layout, seeds),
        fanouts,
        (kernel_seed_times(layout, seeds, seed_times, node_time, temporal),
         *layout.times),
        layout.weights,
        (replace, disjoint, strategy == "last", induced),
        int(torch.randint(0, 2**62, (1,), generator=generator_of_thread())),
        node_map(layout.num_nodes),
        EMPTY_MASK,
    )  # fmt: skip
