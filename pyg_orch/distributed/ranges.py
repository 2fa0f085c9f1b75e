"""Range-numbered parts: each part owns one contiguous range of ids per type.

DistDGL's layout. :func:`~pyg_orch.distributed.partition.partition_graph`
renumbers the nodes so that the nodes of part 0 come first, then those of
part 1, and so on (per node type on a
:class:`~torch_geometric.data.HeteroData`, each type keeping its order
within a part), and the edges so that each part's edges (the in-edges of its
nodes) come together, sorted by destination as PyG's sampler reads them.
A part is then known by ``num_parts + 1`` boundaries
(:class:`~pyg_orch.distributed.engine.books.RangeBook`), where PyG keeps a
map of every node and edge on every machine, and a global id's row is the id
minus its part's first id. The user's original ids are written beside the
parts (``part_i/orig_ids.pt``, :func:`original_ids`).

:func:`write_parts` writes the parts in PyG's own format, which PyG's
``LocalGraphStore.from_partition`` and ``LocalFeatureStore.from_partition``
load as they are, one part's rows at a time: the features are read by rows
(a memory-mapped array is never read whole).

Example:
    >>> order = node_order(torch.tensor([1, 0, 1, 0]), 2)
    >>> order.perm.tolist(), order.bounds.tolist()
    ([1, 3, 0, 2], [0, 2, 4])
"""

from __future__ import annotations

import json
import mmap
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor
from torch_geometric.data import Data, HeteroData
from torch_geometric.distributed.utils import as_str

from pyg_orch.kernels.reorder import counting_order

#: The file in each part folder that holds the part's original ids.
ORIG_FILE = "orig_ids.pt"
#: The edge values written beside each part's edges, by edge id.
EDGE_VALUES = ("edge_attr", "edge_weight")
# The rows read from a memory-mapped array at a time.
_CHUNK_BYTES = 16 * 2**20


@dataclass(frozen=True)
class Order:
    """A renumbering: ``perm[new] = old``, and each part's ``[bounds[p], bounds[p+1])``.

    Example:
        >>> order = Order(torch.tensor([2, 0, 1]), torch.tensor([0, 1, 3]))
        >>> order.new_ids().tolist()
        [1, 2, 0]
    """

    perm: Tensor
    bounds: Tensor

    def new_ids(self) -> Tensor:
        """``new[old]``: each original id's new id."""
        new = torch.empty_like(self.perm)
        new[self.perm] = torch.arange(self.perm.numel())
        return new

    def part(self, pid: int) -> slice:
        """The new ids of part ``pid``, as a slice."""
        return slice(int(self.bounds[pid]), int(self.bounds[pid + 1]))


def node_order(parts: Tensor, num_parts: int) -> Order:
    """The new numbering of nodes assigned to ``parts``: by part, stable.

    Example:
        >>> node_order(torch.tensor([1, 1, 0]), 2).perm.tolist()
        [2, 0, 1]
    """
    perm = torch.argsort(parts, stable=True)
    return Order(perm, _bounds(parts, num_parts))


def edge_order(dst: Tensor, num_dst: int, key: Tensor | None) -> tuple[Tensor, Tensor]:
    """The new order of edges whose new destinations are ``dst``, and columns.

    Sorted by destination (then by ``key``, the edges' or their sources'
    times, as PyG's temporal sampler reads a column), so every part's edges
    are one range, in the order PyG's sampler reads them. Counted, not
    compared: one array of ``len(dst)``
    (:func:`~pyg_orch.kernels.reorder.counting_order`).

    Returns:
        ``(perm, colptr)``: ``perm[new] = old``, and the CSC column pointers
        of the ``num_dst`` destinations in the new order.

    Example:
        >>> perm, colptr = edge_order(torch.tensor([2, 0, 1]), 3, None)
        >>> perm.tolist(), colptr.tolist()
        ([1, 2, 0], [0, 1, 2, 3])
    """
    if key is None:
        perm = torch.from_numpy(counting_order(dst.numpy(), num_dst))
    else:
        by_time = torch.argsort(key, stable=True)
        perm = by_time[counting_order(dst[by_time].numpy(), num_dst)]
    colptr = torch.zeros(num_dst + 1, dtype=torch.long)
    colptr[1:] = torch.bincount(dst, minlength=num_dst).cumsum(0)
    return perm, colptr


def _bounds(parts: Tensor, num_parts: int) -> Tensor:
    counts = torch.bincount(parts, minlength=num_parts)
    return torch.cat([counts.new_zeros(1), counts.cumsum(0)])


@dataclass(frozen=True)
class Numbering:
    """The new numbering of a graph's nodes and edges, by type.

    The keys are ``None`` on a :class:`~torch_geometric.data.Data`, node
    types and edge types on a :class:`~torch_geometric.data.HeteroData`.
    Besides the orders, each node type's ``new_ids`` (``new[old]``) and each
    edge type's CSC ``colptr`` over its destinations' new ids: with
    ``edges[key].perm`` as the edge order, the graph's CSC in the new
    numbering, with no copy of the edges.

    Example:
        >>> data = Data(edge_index=torch.tensor([[0, 1], [1, 0]]), num_nodes=2)
        >>> numbering = Numbering.of(data, torch.tensor([1, 0]), 2)
        >>> numbering.nodes[None].perm.tolist(), numbering.colptr[None].tolist()
        ([1, 0], [0, 1, 2])
    """

    nodes: dict[Any, Order]
    new_ids: dict[Any, Tensor]
    edges: dict[Any, Order]
    colptr: dict[Any, Tensor]

    @classmethod
    def of(cls, data: Data | HeteroData, parts: Tensor, num_parts: int) -> Numbering:
        """Numbers ``data``'s nodes by ``parts`` (of its homogeneous view)."""
        nodes, start = {}, 0
        for key, store in _node_stores(data):
            count = store.num_nodes
            nodes[key] = node_order(parts[start : start + count], num_parts)
            start += count
        new_ids = {key: order.new_ids() for key, order in nodes.items()}
        edges, colptrs = {}, {}
        for key, store in _edge_stores(data):
            dst_key = None if key is None else key[2]
            dst = new_ids[dst_key][store.edge_index[1]]
            num_dst = new_ids[dst_key].numel()
            perm, colptr = edge_order(dst, num_dst, _time_key(data, key, store))
            del dst
            edges[key] = Order(perm, colptr[nodes[dst_key].bounds])
            colptrs[key] = colptr
        return cls(nodes, new_ids, edges, colptrs)

    def edge_index(self, data: Any, key: Any, ids: Tensor) -> tuple[Tensor, Tensor]:
        """The edges of new ids ``ids`` (of edge type ``key``), in new node ids.

        Example:
            >>> data = Data(edge_index=torch.tensor([[0, 1], [1, 0]]), num_nodes=2)
            >>> numbering = Numbering.of(data, torch.tensor([1, 0]), 2)
            >>> row, col = numbering.edge_index(data, None, torch.arange(2))
            >>> row.tolist(), col.tolist()
            ([1, 0], [0, 1])
        """
        store = data if key is None else data[key]
        src_key, dst_key = (None, None) if key is None else (key[0], key[2])
        old = self.edges[key].perm[ids]
        return (
            self.new_ids[src_key][store.edge_index[0][old]],
            self.new_ids[dst_key][store.edge_index[1][old]],
        )


def _node_stores(data: Data | HeteroData) -> list[tuple[Any, Any]]:
    if isinstance(data, Data):
        return [(None, data)]
    return [(node_type, data[node_type]) for node_type in data.node_types]


def _edge_stores(data: Data | HeteroData) -> list[tuple[Any, Any]]:
    if isinstance(data, Data):
        return [(None, data)]
    return [(edge_type, data[edge_type]) for edge_type in data.edge_types]


def _node_time(data: Any, store: Any) -> Tensor | None:
    # A node store's time, where PyG reads node-level time.
    if isinstance(data, Data):
        return data.time if "time" in data and data.is_node_attr("time") else None
    return store.get("time")


def _edge_time(data: Any, store: Any) -> Tensor | None:
    # An edge store's time, where PyG reads edge-level time.
    if "edge_time" in store:
        return store.edge_time
    if isinstance(data, Data):
        return data.time if "time" in data and data.is_edge_attr("time") else None
    return store.get("time")


def _time_key(data: Any, key: Any, store: Any) -> Tensor | None:
    # What orders a column for PyG's temporal sampler: the edges' times, or
    # their sources' (node-level time), as PyG's Partitioner sorts them.
    edge_time = _edge_time(data, store)
    if edge_time is not None:
        return edge_time
    source = data if key is None else data[key[0]]
    node_time = _node_time(data, source)
    return None if node_time is None else node_time[store.edge_index[0]]


def rows_of(values: Any, ids: Tensor) -> Tensor:
    """``values[ids]`` of a tensor or a NumPy array, read by rows.

    A memory-mapped array (``np.load(path, mmap_mode="r")``) is read in
    chunks of rows, and the pages read are handed back to the kernel after
    each chunk, so the process never holds more of the file than one chunk.

    Example:
        >>> rows_of(np.arange(6).reshape(3, 2), torch.tensor([2, 0])).tolist()
        [[4, 5], [0, 1]]
    """
    if isinstance(values, Tensor):
        return values[ids]
    rows = np.empty((ids.numel(), *values.shape[1:]), dtype=values.dtype)
    index = ids.numpy()
    # A chunk spans at most _CHUNK_BYTES of the file where the ids increase
    # (as a part's do), else holds that many bytes of rows.
    span = max(_CHUNK_BYTES // max(values[:1].nbytes, 1), 1)
    increasing = bool(np.all(index[1:] >= index[:-1]))
    start = 0
    while start < index.size:
        end = start + span
        if increasing:
            end = int(np.searchsorted(index, index[start] + span, side="left"))
        end = max(end, start + 1)
        np.take(values, index[start:end], axis=0, out=rows[start:end])
        _release(values)
        start = end
    return torch.from_numpy(rows)


def _release(values: np.ndarray) -> None:
    # A memory map's pages read so far leave this process (they are read
    # again from the file where needed).
    mapping = getattr(values, "_mmap", None)
    if isinstance(values, np.memmap) and isinstance(mapping, mmap.mmap):
        mapping.madvise(mmap.MADV_DONTNEED)


def _rows(store: Any, names: tuple[str, ...], ids: Tensor) -> dict[str, Tensor]:
    # The rows ids of each of the store's tensors or arrays named in names.
    return {
        name: rows_of(store[name], ids)
        for name in names
        if isinstance(store.get(name), Tensor | np.ndarray)
    }


def write_parts(data: Data | HeteroData, numbering: Numbering, root: Path) -> None:
    """Writes the range-numbered parts of ``data`` in PyG's format.

    ``META.json``, ``node_map`` / ``edge_map`` (what PyG's loaders read;
    pyg_orch's read the boundaries in ``orch.json`` instead), and for each
    part ``graph.pt``, ``node_feats.pt``, ``edge_feats.pt`` and its
    original ids (``orig_ids.pt``).

    Example:
        >>> import tempfile
        >>> data = Data(edge_index=torch.tensor([[0, 1], [1, 0]]), num_nodes=2)
        >>> with tempfile.TemporaryDirectory() as root:
        ...     write_parts(data, Numbering.of(data, torch.tensor([1, 0]), 2),
        ...                 Path(root))
        ...     sorted(p.name for p in Path(root, "part_0").iterdir())
        ['edge_feats.pt', 'graph.pt', 'node_feats.pt', 'orig_ids.pt']
    """
    num_parts = next(iter(numbering.nodes.values())).bounds.numel() - 1
    node_offsets = _offsets({k: o.perm.numel() for k, o in numbering.nodes.items()})
    for pid in range(num_parts):
        # One file at a time: only its rows are in memory.
        path = root / f"part_{pid}"
        path.mkdir(parents=True, exist_ok=True)
        orig = {
            "node": _write_nodes(data, numbering, pid, path, node_offsets),
            "edge": _write_edges(data, numbering, pid, path),
        }
        torch.save(orig, path / ORIG_FILE)
    _write_maps(data, numbering, root, node_offsets)


def _write_nodes(
    data: Any, numbering: Numbering, pid: int, path: Path, offsets: dict
) -> dict[Any, Tensor]:
    # Part pid's node_feats.pt; returns its nodes' original ids.
    node_feats, orig = {}, {}
    for key, store in _node_stores(data):
        order = numbering.nodes[key]
        ids = torch.arange(order.part(pid).start, order.part(pid).stop)
        orig[key] = order.perm[ids]
        feats = {"global_id": ids + offsets[key], "id": ids,
                 "feats": _rows(store, ("x", "y"), orig[key])}  # fmt: skip
        node_time = _node_time(data, store)
        if node_time is not None:  # PyG's format: every node's, in each part
            feats["time"] = node_time[order.perm]
        node_feats[key] = feats
    if isinstance(data, Data):
        node_feats = node_feats[None]
        del node_feats["id"]
    torch.save(node_feats, path / "node_feats.pt")
    return orig


def _write_edges(
    data: Any, numbering: Numbering, pid: int, path: Path
) -> dict[Any, Tensor]:
    # Part pid's graph.pt and edge_feats.pt; returns its edges' original ids.
    offsets = _offsets({k: o.perm.numel() for k, o in numbering.edges.items()})
    sizes = {key: store.num_nodes for key, store in _node_stores(data)}
    graph, edge_feats, orig = {}, {}, {}
    for key, store in _edge_stores(data):
        order = numbering.edges[key]
        ids = torch.arange(order.part(pid).start, order.part(pid).stop)
        orig[key] = order.perm[ids]
        src_key, dst_key = (None, None) if key is None else (key[0], key[2])
        row, col = numbering.edge_index(data, key, ids)
        graph[key] = {"edge_id": ids + offsets[key], "row": row, "col": col,
                      "size": (sizes[src_key], sizes[dst_key])}  # fmt: skip
        feats: dict[str, Any] = {}
        values = _rows(store, EDGE_VALUES, orig[key])
        if values:
            feats.update(global_id=ids, feats=values)
        edge_time = _edge_time(data, store)
        if edge_time is not None:
            feats["edge_time"] = edge_time[orig[key]]
        if feats:
            edge_feats[key] = feats
    if isinstance(data, Data):
        graph, edge_feats = graph[None], edge_feats.get(None, {})
    torch.save(graph, path / "graph.pt")
    torch.save(edge_feats, path / "edge_feats.pt")
    return orig


def _offsets(counts: dict[Any, int]) -> dict[Any, int]:
    # Each type's first id in the homogeneous numbering (types in order).
    offsets, offset = {}, 0
    for key, count in counts.items():
        offsets[key], offset = offset, offset + count
    return offsets


def _write_maps(
    data: Data | HeteroData, numbering: Numbering, root: Path, node_offsets: dict
) -> None:
    # PyG's node -> part and edge -> part maps, and its META.json.
    def part_map(order: Order) -> Tensor:
        counts = order.bounds.diff()
        return torch.repeat_interleave(torch.arange(counts.numel()), counts)

    hetero = isinstance(data, HeteroData)
    if hetero:
        for folder, orders in (("node_map", numbering.nodes),
                               ("edge_map", numbering.edges)):  # fmt: skip
            os.makedirs(root / folder, exist_ok=True)
            for key, order in orders.items():
                torch.save(part_map(order), root / folder / f"{as_str(key)}.pt")
    else:
        torch.save(part_map(numbering.nodes[None]), root / "node_map.pt")
        torch.save(part_map(numbering.edges[None]), root / "edge_map.pt")
    meta = {
        "num_parts": next(iter(numbering.nodes.values())).bounds.numel() - 1,
        "node_types": data.node_types if hetero else None,
        "edge_types": data.edge_types if hetero else None,
        "node_offset": list(node_offsets.values()) if hetero else None,
        "is_hetero": hetero,
        "is_sorted": True,
    }
    (root / "META.json").write_text(json.dumps(meta))


def bounds_of(numbering: Numbering) -> dict[str, dict[str, list[int]]]:
    """Each type's part boundaries, by ``as_str`` of the type, for ``orch.json``.

    Example:
        >>> data = Data(edge_index=torch.tensor([[0, 1], [1, 0]]), num_nodes=2)
        >>> bounds_of(Numbering.of(data, torch.tensor([1, 0]), 2))
        {'node': {'': [0, 1, 2]}, 'edge': {'': [0, 1, 2]}}
    """
    return {
        "node": {as_str(k) if k else "": o.bounds.tolist()
                 for k, o in numbering.nodes.items()},
        "edge": {as_str(k) if k else "": o.bounds.tolist()
                 for k, o in numbering.edges.items()},
    }  # fmt: skip


def original_ids(root: str | Path, part: int | None = None, kind: str = "node") -> Any:
    """The user's ids of a range-numbered partition's nodes (or edges).

    ``original_ids(root, p)[i]`` is the original id of the node whose new id
    is part ``p``'s first plus ``i``: what a rank needs to map its own
    nodes' predictions back. ``original_ids(root)`` concatenates every
    part's: ``original_ids(root)[new_id]`` for any node, as long as the
    graph (a tool for the user, not held by the ranks). On a HeteroData, a
    dict by node (edge) type.

    Args:
        root: the partition's folder.
        part: a part, or ``None`` for all of them.
        kind: ``"node"`` or ``"edge"``.

    Raises:
        FileNotFoundError: the partition was not written by
            :func:`~pyg_orch.distributed.partition.partition_graph`.

    Example:
        >>> import tempfile
        >>> data = Data(edge_index=torch.tensor([[0, 1], [1, 0]]), num_nodes=2)
        >>> with tempfile.TemporaryDirectory() as root:
        ...     numbering = Numbering.of(data, torch.tensor([1, 0]), 2)
        ...     write_parts(data, numbering, Path(root))
        ...     original_ids(root, 0).tolist(), original_ids(root).tolist()
        ([1], [1, 0])
    """
    if kind not in ("node", "edge"):
        raise ValueError(f"kind must be 'node' or 'edge', got {kind!r}")
    if part is None:
        num_parts = json.loads((Path(root) / "META.json").read_text())["num_parts"]
        parts = [original_ids(root, p, kind) for p in range(num_parts)]
        if isinstance(parts[0], dict):
            return {key: torch.cat([ids[key] for ids in parts]) for key in parts[0]}
        return torch.cat(parts)
    path = Path(root) / f"part_{part}" / ORIG_FILE
    if not path.exists():
        raise FileNotFoundError(
            f"{path} is missing: the partition in {root} was not written by "
            f"pyg_orch's partition_graph, or part {part} is not there (PyG's "
            f"own Partitioner keeps the original ids: nothing to map)"
        )
    ids = torch.load(path, weights_only=True)[kind]
    return ids[None] if list(ids) == [None] else ids


class PartitionIds(Tensor):
    """Node ids in a range-numbered partition's numbering: what its loaders take.

    A plain tensor of ids could be the user's original ids as well as the
    partition's, and PyG's loaders would read either as the partition's; so
    pyg_orch's distributed loaders, on a partition loaded with
    :func:`~pyg_orch.distributed.hot_store.load_partition`, take only
    ``PartitionIds``: what :func:`partition_ids` maps, what
    :func:`load_splits` reads, what the feature store's ``get_global_id``
    gives, and what torch computes from them. Ids known to be the
    partition's already are marked with ``ids.as_subclass(PartitionIds)``.

    Example:
        >>> ids = torch.tensor([3, 1]).as_subclass(PartitionIds)
        >>> isinstance(ids[:1], PartitionIds)
        True
    """


def partition_ids(root: str | Path, ids: Tensor, node_type: str | None = None) -> Any:
    """The partition's ids of the user's (original) node ids ``ids``.

    Reads every part's original ids (a map as long as the graph's nodes of
    the type, for the time of the call).

    Args:
        root: the partition's folder.
        ids: original node ids (of ``node_type`` on a HeteroData), or a bool
            mask over them.
        node_type: the ids' node type on a HeteroData.

    Returns:
        :class:`PartitionIds`, in the order of ``ids``.

    Example:
        >>> import tempfile
        >>> data = Data(edge_index=torch.tensor([[0, 1], [1, 0]]), num_nodes=2)
        >>> with tempfile.TemporaryDirectory() as root:
        ...     write_parts(data, Numbering.of(data, torch.tensor([1, 0]), 2),
        ...                 Path(root))
        ...     partition_ids(root, torch.tensor([0, 1])).tolist()
        [1, 0]
    """
    original = original_ids(root)
    if isinstance(original, dict):
        if node_type not in original:
            raise ValueError(
                f"node_type must name a node type of the partition "
                f"({sorted(original)}), got {node_type!r}"
            )
        original = original[node_type]
    ids = torch.as_tensor(ids)
    if ids.dtype == torch.bool:
        ids = ids.nonzero().view(-1)
    new = torch.empty_like(original)
    new[original] = torch.arange(original.numel())
    return new[ids.long()].as_subclass(PartitionIds)


def load_splits(root: str | Path) -> dict[Any, Any]:
    """The ids of ``train_mask``, ``val_mask`` and ``test_mask``, as :class:`PartitionIds`.

    What ``partition_graph`` wrote to ``root/split.pt``: ``{mask: ids}``,
    or ``{node_type: {mask: ids}}`` on a HeteroData.

    Example:
        >>> load_splits("/nonexistent")
        Traceback (most recent call last):
        ...
        FileNotFoundError: /nonexistent/split.pt is missing: the graph had no train_mask, val_mask or test_mask when partition_graph wrote it
    """  # noqa: E501 - a doctest's output is one line
    path = Path(root) / "split.pt"
    if not path.exists():
        raise FileNotFoundError(
            f"{path} is missing: the graph had no train_mask, val_mask or "
            f"test_mask when partition_graph wrote it"
        )

    def marked(value: Any) -> Any:
        if isinstance(value, dict):
            return {key: marked(item) for key, item in value.items()}
        return value.as_subclass(PartitionIds)

    return marked(torch.load(path, weights_only=True))
