"""What one rank's partition stores hold in memory, tensor by tensor, by kind.

PyG's :class:`~torch_geometric.distributed.LocalFeatureStore` and
:class:`~torch_geometric.distributed.LocalGraphStore` keep their tensors in
attributes of their own (``_feat``, ``_edge_index``, ``node_pb``, ...);
:func:`store_tensors` walks them, each storage once, and :func:`kind_of`
sorts them into the kinds a partition's memory is made of.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from torch import Tensor

#: The kinds of a rank's tensors, in the order the benchmark prints them.
KINDS = ("features", "labels", "edges", "sampler", "ids", "maps", "hot", "other")
# Attribute names (of PyG's stores and pyg_orch's HotFeatureStore) -> kind,
# the first match of a tensor's path wins.
_KIND_OF_NAME = (
    ("NeighborSampler", "sampler"),
    ("hot", "hot"),
    ("labels", "labels"),
    ("'y')]", "labels"),
    ("_feat[", "features"),
    ("_edge_index", "edges"),
    ("_edge_id", "ids"),
    ("_global_id_to_index", "maps"),
    ("_global_id", "ids"),
    ("_pb", "maps"),
)
# How deep the walk follows attributes, dicts and lists.
_DEPTH = 6


@dataclass(frozen=True)
class StoreTensor:
    """One tensor a store holds: where, its shape and the bytes of its storage.

    Example:
        >>> StoreTensor("LocalGraphStore.node_pb", (4,), 32).kind
        'maps'
    """

    path: str
    shape: tuple[int, ...]
    bytes: int

    @property
    def kind(self) -> str:
        """Its kind, one of :data:`KINDS`."""
        return kind_of(self.path)


def kind_of(path: str) -> str:
    """The kind of the tensor at ``path`` (attribute names joined by dots).

    Example:
        >>> kind_of("HotFeatureStore._feat[(None, 'x')]")
        'features'
    """
    return next((kind for name, kind in _KIND_OF_NAME if name in path), "other")


def store_tensors(*stores: Any) -> list[StoreTensor]:
    """Every tensor the stores hold, each storage once, largest first.

    Args:
        *stores: a rank's ``(feature_store, graph_store)``, or any objects.

    Example:
        >>> import torch
        >>> from torch_geometric.distributed import LocalGraphStore
        >>> store = LocalGraphStore()
        >>> store.node_pb = torch.zeros(4, dtype=torch.long)
        >>> [(t.path, t.bytes) for t in store_tensors(store)]
        [('LocalGraphStore.node_pb', 32)]
    """
    found: list[StoreTensor] = []
    seen: set[tuple[int, int]] = set()
    for store in stores:
        _walk(store, type(store).__name__, seen, found, 0)
    return sorted(found, key=lambda tensor: -tensor.bytes)


def _walk(value: Any, path: str, seen: set, found: list, depth: int) -> None:
    if isinstance(value, Tensor):
        storage = value.untyped_storage()
        key = (storage.data_ptr(), storage.nbytes())
        if storage.nbytes() and key not in seen:
            seen.add(key)
            found.append(StoreTensor(path, tuple(value.shape), storage.nbytes()))
        return
    if depth >= _DEPTH:
        return
    if isinstance(value, dict):
        items = [(f"{path}[{key!r}]", item) for key, item in value.items()]
    elif isinstance(value, list | tuple):
        items = [(f"{path}[{i}]", item) for i, item in enumerate(value)]
    elif hasattr(value, "__dict__") and not isinstance(value, type):
        items = [(f"{path}.{key}", item) for key, item in vars(value).items()]
    else:
        return
    for item_path, item in items:
        _walk(item, item_path, seen, found, depth + 1)
