"""What a loader reads of its graph: features and edge weights, as kernels take them.

NumPy features (an :class:`numpy.memmap` too) are viewed in place; strided
ones are copied once, as the kernels read C-contiguous rows; half-width
features are converted once (:func:`with_feature_dtype`).
"""

from __future__ import annotations

import copy
from typing import Any

import torch
from torch import Tensor
from torch_geometric.data import Data, HeteroData

from pyg_orch.checks import check_feature_dtype, feature_tensor


def hot_features(data: Any) -> Tensor | dict[str, Tensor] | None:
    """The raw features hot aggregates read: ``data.x``, or ``x`` per node type.

    NumPy features are viewed in place; strided ones are copied once, as the
    kernels read C-contiguous rows. Node types without features are left out.

    Example:
        >>> from torch_geometric.data import HeteroData
        >>> data = HeteroData()
        >>> data["paper"].x = torch.ones(3, 2)
        >>> data["author"].num_nodes = 4
        >>> list(hot_features(data))
        ['paper']
    """
    if not hasattr(data, "node_types") or isinstance(data, Data):
        x = feature_tensor(getattr(data, "x", None))
        return x.contiguous() if x is not None else None
    return {
        node_type: feature_tensor(store.x).contiguous()
        for node_type, store in zip(data.node_types, data.node_stores, strict=True)
        if getattr(store, "x", None) is not None
    }


def graph_edge_weight(data: Any) -> Tensor | dict[Any, Tensor] | None:
    """The graph's ``edge_weight``: by edge type on a ``HeteroData``.

    ``None`` where the graph has none (a remote graph, or no relation with
    one).

    Example:
        >>> graph_edge_weight(Data(edge_weight=torch.ones(2))).tolist()
        [1.0, 1.0]
        >>> data = HeteroData()
        >>> data["a", "to", "a"].edge_weight = torch.ones(2)
        >>> graph_edge_weight(data)
        {('a', 'to', 'a'): tensor([1., 1.])}
    """
    if isinstance(data, Data):
        return getattr(data, "edge_weight", None)
    if not isinstance(data, HeteroData):
        return None
    weights = {
        edge_type: store.edge_weight
        for edge_type, store in zip(data.edge_types, data.edge_stores, strict=True)
        if store.get("edge_weight") is not None
    }
    return weights or None


def edge_values(data: Any, edge_type: Any = None) -> dict[str, Tensor]:
    """The edge values (``edge_weight``, ``edge_attr``, ...) a loader's graph has.

    Of ``data`` (a ``Data``), of its relation ``edge_type`` (a
    ``HeteroData``), or, for a partitioned graph's ``(feature_store,
    graph_store)``, what its feature store holds of them (a
    :class:`~pyg_orch.distributed.hot_store.HotFeatureStore`'s
    ``edge_values``; none for another store).

    Example:
        >>> list(edge_values(Data(edge_weight=torch.ones(2))))
        ['edge_weight']
    """
    if isinstance(data, HeteroData):
        return data[edge_type].to_dict() if edge_type in data.edge_types else {}
    if isinstance(data, Data):
        return data.to_dict()
    held = getattr(data[0], "edge_values", None) if isinstance(data, tuple) else None
    return held(edge_type) if held is not None else {}


class GraphSources:
    """The graph tensors a loader derived values from, and its copies of them.

    A user may change ``data.x`` or an ``edge_weight`` in place between
    epochs (``mul_``, ``copy_``, an optimizer's step): PyG's batches read the
    tensors as they are, so what the loader derived from them (hot
    aggregates, a converted or contiguous copy of the features, rows kept on
    the device) must follow. :meth:`sync` notices a change by the tensor's
    version, copies the tensor into the loader's copies of it and names it,
    so that the loader makes the rest again. A tensor replaced on the graph
    (``data.x = other``) is refused: the loader's copies and caches were made
    for the old one.

    Example:
        >>> data = Data(x=torch.ones(2, 2))
        >>> half = data.x.bfloat16()
        >>> sources = GraphSources()
        >>> sources.track("data.x", data, "x", half)
        >>> sources.sync()
        []
        >>> _ = data.x.mul_(3)
        >>> sources.sync(), half[0].tolist()
        (['data.x'], [3.0, 3.0])
    """

    def __init__(self) -> None:
        # [name, owner, key, tensor, its version when read, its copies]
        self._tracked: list[list[Any]] = []

    def track(self, name: str, owner: Any, key: str, *copies: Any) -> None:
        """Follows ``owner[key]`` (named ``name``) and the loader's ``copies``.

        A NumPy array (a memmap, say) has no version: it is not followed.
        """
        tensor = owner.get(key) if hasattr(owner, "get") else None
        if not isinstance(tensor, Tensor):
            return
        kept: dict[int, Tensor] = {}
        for copy_ in copies:
            if isinstance(copy_, Tensor) and copy_ is not tensor:
                kept[id(copy_)] = copy_
        entry = [name, owner, key, tensor, tensor._version, list(kept.values())]
        self._tracked.append(entry)

    def sync(self) -> list[str]:
        """Copies each changed tensor into its copies; names those that changed.

        Raises:
            ValueError: a followed tensor was replaced on the graph.
        """
        changed = []
        for entry in self._tracked:
            name, owner, key, tensor, version, copies = entry
            if owner.get(key) is not tensor:
                raise ValueError(
                    f"{name} was replaced by another tensor after the loader "
                    f"was built, but the loader keeps values made from the "
                    f"old one (hot aggregates, a copy of the features): change "
                    f"{name} in place ({name}.copy_(new)), or build a new loader"
                )
            if tensor._version == version:
                continue
            with torch.no_grad():
                for copy_ in copies:
                    copy_.copy_(tensor)
            entry[4] = tensor._version
            changed.append(name)
        return changed


def graph_sources(
    user_data: Any, data: Any, features: Any, derived: bool
) -> GraphSources:
    """What a loader follows of the graph the user gave it (see :class:`GraphSources`).

    Args:
        user_data: the graph as the user gave it.
        data: the graph as the loader reads it (``x`` converted to
            ``feature_dtype``, a copy then).
        features: the features the loader's kernels read (contiguous copies
            of strided ones; by node type on a ``HeteroData``).
        derived: whether the loader derives values from the graph's ``x``
            and ``edge_weight`` (hot vertices, or features gathered for a
            device); the converted features of ``feature_dtype`` are
            followed in any case.

    Example:
        >>> data = Data(x=torch.ones(2, 2))
        >>> half = with_feature_dtype(data, torch.bfloat16)
        >>> sources = graph_sources(data, half, half.x, derived=False)
        >>> _ = data.x.add_(1)
        >>> sources.sync(), half.x[0].tolist()
        (['data.x'], [2.0, 2.0])
    """
    sources = GraphSources()
    if isinstance(user_data, HeteroData):
        if derived or data is not user_data:
            for node_type in user_data.node_types:
                sources.track(f"data[{node_type!r}].x", user_data[node_type], "x",
                              data[node_type].get("x"),
                              (features or {}).get(node_type))  # fmt: skip
        if derived:
            for edge_type in user_data.edge_types:
                sources.track(f"data[{edge_type}].edge_weight", user_data[edge_type],
                              "edge_weight")  # fmt: skip
    elif isinstance(data, Data) and (derived or data is not user_data):
        sources.track("data.x", user_data, "x", data.get("x"), features)
        if derived:
            sources.track("data.edge_weight", user_data, "edge_weight")
    return sources


def with_feature_dtype(data: Any, feature_dtype: torch.dtype | None) -> Any:
    """``data``, or a shallow copy of it whose ``x`` is in ``feature_dtype``.

    On a ``HeteroData``, each node type's ``x``.

    Raises:
        TypeError: ``feature_dtype`` is not a float dtype pyg_orch stores.

    Example:
        >>> data = Data(x=torch.ones(2, 3))
        >>> with_feature_dtype(data, torch.bfloat16).x.dtype, data.x.dtype
        (torch.bfloat16, torch.float32)
    """
    check_feature_dtype(feature_dtype)
    stores = data.node_stores if isinstance(data, HeteroData) else [data]
    features = [feature_tensor(getattr(store, "x", None)) for store in stores]
    if feature_dtype is None or all(
        x is None or x.dtype == feature_dtype for x in features
    ):
        return data
    data = copy.copy(data)
    stores = data.node_stores if isinstance(data, HeteroData) else [data]
    for store, x in zip(stores, features, strict=True):
        if x is not None:
            store.x = x.to(feature_dtype)
    return data


def loader_features(data: Any, read_by_kernels: bool) -> Tensor | None:
    """The features a loader keeps: ``data.x``, C-contiguous where kernels read it.

    NumPy features (an :class:`numpy.memmap`: features on disk) are viewed,
    not copied. The kernels of hot vertices and ``device=`` read C-contiguous
    rows, as :func:`hot_features` gives them; otherwise a strided view (e.g.
    the column slice ``x[:, :k]``) is not copied. A heterogeneous graph's
    ``x`` here is its global one, which no kernel reads (its hot vertices get
    :func:`hot_features`).

    Example:
        >>> x = torch.ones(3, 4)[:, :2]
        >>> loader_features(Data(x=x), True).is_contiguous()
        True
        >>> loader_features(Data(x=x), False).is_contiguous()
        False
    """
    if read_by_kernels and not isinstance(data, HeteroData):
        return hot_features(data)
    return feature_tensor(getattr(data, "x", None))
