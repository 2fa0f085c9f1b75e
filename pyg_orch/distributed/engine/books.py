"""Partition books of range-numbered parts, where PyG keeps maps.

PyG's distributed stores map every node and edge of the whole graph to its
part (``node_pb``, ``edge_pb``; the feature store's ``node_feat_pb`` and
``edge_feat_pb``) and every global id to its row (``_global_id_to_index``,
as long as the largest id): tensors as long as the graph, on every machine.
On range-numbered parts (see :mod:`pyg_orch.distributed.ranges`) a
:class:`RangeBook` of ``num_parts + 1`` boundaries answers the first, as
DGL's ``RangePartitionBook`` does, and a :class:`RangeIndex` (a subtraction)
the second. Both are indexed as the tensors they replace, so PyG's code
reads them unchanged; :func:`range_books` loads a partition's stores with
them, without reading PyG's maps from disk.

Example:
    >>> book = RangeBook(torch.tensor([0, 3, 5]))
    >>> book[torch.tensor([0, 2, 3, 4])].tolist()
    [0, 0, 1, 1]
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import Any
from unittest import mock

import torch
import torch_geometric.distributed.local_feature_store as pyg_feature_store
import torch_geometric.distributed.local_graph_store as pyg_graph_store
from torch import Tensor
from torch_geometric.distributed.partition import load_partition_info
from torch_geometric.distributed.utils import as_str

# Patching PyG's module globals is serialized.
_PATCH_LOCK = threading.Lock()


class RangeBook:
    """The part of each id, for parts that own ``[bounds[p], bounds[p+1])``.

    Args:
        bounds: ``num_parts + 1`` increasing boundaries, from 0.

    Example:
        >>> book = RangeBook(torch.tensor([0, 2, 2, 5]))
        >>> book[torch.tensor([1, 2, 4])].tolist(), book.numel()
        ([0, 2, 2], 5)
    """

    def __init__(self, bounds: Tensor):
        self.bounds = bounds.to(torch.long)
        # Each part's end, searched for every id the sampler looks up.
        self._ends = self.bounds[1:].contiguous()

    def __getitem__(self, ids: Tensor) -> Tensor:
        return torch.searchsorted(self._ends, torch.as_tensor(ids), right=True)

    def numel(self) -> int:
        """The number of ids: the whole graph's nodes (edges) of the type."""
        return int(self.bounds[-1])

    def dim(self) -> int:
        """1, as the map it replaces."""
        return 1

    def __len__(self) -> int:
        return self.numel()

    def __repr__(self) -> str:
        return f"RangeBook(bounds={self.bounds.tolist()})"


class RangeIndex:
    """Rows of the global ids ``[start, start + count)``: the id minus ``start``.

    An id outside the range gives -1, as PyG's map does.

    Example:
        >>> RangeIndex(10, 3)[torch.tensor([10, 12, 13])].tolist()
        [0, 2, -1]
    """

    def __init__(self, start: int, count: int):
        self.start, self.count = start, count

    def __getitem__(self, ids: Tensor) -> Tensor:
        rows = torch.as_tensor(ids) - self.start
        return rows.masked_fill_((rows < 0) | (rows >= self.count), -1)

    def __repr__(self) -> str:
        return f"RangeIndex(start={self.start}, count={self.count})"


def contiguous_start(global_id: Tensor) -> int | None:
    """The first id of ``global_id`` when it is one increasing range, else None.

    Example:
        >>> contiguous_start(torch.tensor([4, 5, 6])), contiguous_start(torch.tensor([1, 3]))
        (4, None)
    """  # noqa: E501 - a doctest's line
    if global_id.numel() == 0:
        return 0
    start = int(global_id[0])
    if int(global_id[-1]) - start + 1 != global_id.numel():
        return None
    return start if bool((global_id.diff() == 1).all()) else None


def books(bounds: dict[str, dict[str, list[int]]], meta: dict) -> tuple[Any, Any]:
    """The node and edge books of a partition's boundaries (``orch.json``).

    Returns:
        ``(node_pb, edge_pb)``: a :class:`RangeBook` each, or dicts of them
        by node and edge type on a heterogeneous partition.

    Example:
        >>> bounds = {"node": {"": [0, 2, 3]}, "edge": {"": [0, 4, 5]}}
        >>> books(bounds, {"is_hetero": False})[1]
        RangeBook(bounds=[0, 4, 5])
    """

    def book(values: list[int]) -> RangeBook:
        return RangeBook(torch.tensor(values))

    if not meta["is_hetero"]:
        return book(bounds["node"][""]), book(bounds["edge"][""])
    nodes = {t: book(bounds["node"][as_str(t)]) for t in meta["node_types"]}
    edges = {
        tuple(e): book(bounds["edge"][as_str(tuple(e))]) for e in meta["edge_types"]
    }
    return nodes, edges


@contextlib.contextmanager
def range_books(bounds: dict[str, dict[str, list[int]]]) -> Iterator[None]:
    """Within it, PyG's stores load a partition with books, not maps.

    ``LocalGraphStore.from_partition`` and ``LocalFeatureStore.from_partition``
    read ``node_map`` and ``edge_map`` (a tensor as long as the whole
    graph's nodes, and one as long as its edges) through
    ``load_partition_info``; here they get :class:`RangeBook` objects of
    ``bounds`` instead, and the maps are never read.

    Example:
        >>> with range_books({"node": {"": [0, 1]}, "edge": {"": [0, 0]}}):
        ...     pass
    """

    def info(root: str, pid: int) -> tuple[Any, ...]:
        with mock.patch("torch_geometric.io.fs.torch_load", _no_map):
            meta, num_parts, idx, _, _ = load_partition_info(root, pid)
        node_pb, edge_pb = books(bounds, meta)
        return meta, num_parts, idx, node_pb, edge_pb

    with (
        _PATCH_LOCK,
        mock.patch.object(pyg_graph_store, "load_partition_info", info),
        mock.patch.object(pyg_feature_store, "load_partition_info", info),
    ):
        yield


def drop_edge_ranges(graph_store: Any) -> None:
    """Drops a range-numbered part's edge ids: its book knows them.

    Part ``p``'s edges, in the order its ``edge_index`` holds them, are the
    ids ``edge_pb.bounds[p]`` on (of each edge type): the sampler adds the
    first to an edge's position (:func:`edge_start`), where PyG's store
    keeps a tensor of them, 8 bytes per edge.

    Raises:
        ValueError: a part's edge ids are not its book's range.

    Example:
        >>> from torch_geometric.distributed import LocalGraphStore
        >>> store = LocalGraphStore()
        >>> store.edge_pb, store.partition_idx = RangeBook(torch.tensor([0, 2, 3])), 1
        >>> store.meta = {"is_hetero": False}
        >>> edge = dict(edge_type=None, layout="coo", size=(3, 3))
        >>> store.put_edge_index(torch.tensor([[0], [2]]), **edge)
        True
        >>> store.put_edge_id(torch.tensor([2]), **edge)
        True
        >>> drop_edge_ranges(store)
        >>> store.get_edge_id(edge_type=None, layout="coo") is None
        True
    """
    offsets = edge_type_offsets(graph_store)
    for attr in graph_store.get_all_edge_attrs():
        edge_ids = graph_store.get_edge_id(edge_type=attr.edge_type, layout="coo")
        start = edge_start(graph_store, attr.edge_type)
        # (A heterogeneous part's files number edges as PyG's do: edge types
        # one after another.)
        key = None if attr.edge_type is None else tuple(attr.edge_type)
        first = start + offsets[key]
        expected = torch.arange(first, first + edge_ids.numel())
        if not torch.equal(edge_ids, expected):
            raise ValueError(
                f"part {graph_store.partition_idx}'s edge ids of "
                f"{attr.edge_type} are not its range [{start}, ...): the "
                f"partition's files come from different partitionings; "
                f"partition the graph again"
            )
        graph_store.remove_edge_id(edge_type=attr.edge_type, layout="coo")


def edge_type_offsets(graph_store: Any) -> dict[Any, int]:
    """Each edge type's first id in PyG's homogeneous edge numbering.

    PyG's heterogeneous partition files number edges with the edge types one
    after another, in the data's order; ``{None: 0}`` on a homogeneous one.

    Example:
        >>> from torch_geometric.distributed import LocalGraphStore
        >>> store = LocalGraphStore()
        >>> store.meta = {"is_hetero": True, "edge_types": [["a", "to", "b"],
        ...                                                 ["b", "to", "a"]]}
        >>> store.edge_pb = {("a", "to", "b"): RangeBook(torch.tensor([0, 3])),
        ...                  ("b", "to", "a"): RangeBook(torch.tensor([0, 2]))}
        >>> edge_type_offsets(store)
        {None: 0, ('a', 'to', 'b'): 0, ('b', 'to', 'a'): 3}
    """
    offsets, offset = {None: 0}, 0
    if graph_store.meta["is_hetero"]:
        for edge_type in map(tuple, graph_store.meta["edge_types"]):
            offsets[edge_type] = offset
            offset += graph_store.edge_pb[edge_type].numel()
    return offsets


def edge_start(graph_store: Any, edge_type: Any) -> int:
    """The first edge id of this part (of ``edge_type``), from its book.

    Example:
        >>> from torch_geometric.distributed import LocalGraphStore
        >>> store = LocalGraphStore()
        >>> store.edge_pb, store.partition_idx = RangeBook(torch.tensor([0, 2, 3])), 1
        >>> store.meta = {"is_hetero": False}
        >>> edge_start(store, None)
        2
    """
    if graph_store.meta["is_hetero"]:
        book = graph_store.edge_pb[tuple(edge_type)]
    else:
        book = graph_store.edge_pb
    return int(book.bounds[graph_store.partition_idx])


def local_columns(sampler: Any, graph_store: Any) -> dict[Any, int]:
    """Cuts a range-numbered part's CSC column pointers to its own nodes.

    PyG's distributed sampler builds its part's CSC with a column for every
    node of the whole graph (``colptr`` as long as the graph, on every
    machine), though only this part's nodes have in-edges here. Their
    columns are one range: the pointers are cut to it, and the sampler
    subtracts the range's first id from its seeds
    (:class:`~pyg_orch.distributed.engine.sampler.OrchDistNeighborSampler`).

    Args:
        sampler: PyG's ``NeighborSampler`` a ``DistNeighborSampler`` holds
            (``_sampler``).
        graph_store: the part's graph store, with :class:`RangeBook` books.

    Returns:
        The first column's id by edge type (``None`` on a homogeneous
        graph); empty where the books are PyG's maps.

    Example:
        >>> from types import SimpleNamespace
        >>> from torch_geometric.distributed import LocalGraphStore
        >>> store = LocalGraphStore()
        >>> store.node_pb, store.partition_idx = RangeBook(torch.tensor([0, 2, 3])), 1
        >>> store.meta = {"is_hetero": False}
        >>> sampler = SimpleNamespace(colptr=torch.tensor([0, 0, 0, 4]))
        >>> local_columns(sampler, store), sampler.colptr.tolist()
        ({None: 2}, [0, 4])
    """
    node_pb, pid = graph_store.node_pb, graph_store.partition_idx
    if not graph_store.meta["is_hetero"]:
        if not isinstance(node_pb, RangeBook):
            return {}
        start, end = node_pb.bounds[pid : pid + 2].tolist()
        sampler.colptr = sampler.colptr[start : end + 1].clone()
        return {None: start}
    starts = {}
    for edge_type in sampler.edge_types:
        book = node_pb[edge_type[2]]
        if not isinstance(book, RangeBook):
            return {}
        relation = sampler.to_rel_type[edge_type]
        start, end = book.bounds[pid : pid + 2].tolist()
        colptr = sampler.colptr_dict[relation]
        sampler.colptr_dict[relation] = colptr[start : end + 1].clone()
        starts[edge_type] = start
    return starts


def _no_map(path: str, *args: Any, **kwargs: Any) -> None:
    # load_partition_info reads only the maps with torch_load: none is read.
    return None
