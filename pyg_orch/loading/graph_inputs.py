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


def with_feature_dtype(data: Any, feature_dtype: torch.dtype | None) -> Any:
    """``data``, or a shallow copy of it whose ``x`` is in ``feature_dtype``.

    Raises:
        TypeError: ``feature_dtype`` is not a float dtype pyg_orch stores.
        NotImplementedError: ``data`` is a ``HeteroData``.

    Example:
        >>> data = Data(x=torch.ones(2, 3))
        >>> with_feature_dtype(data, torch.bfloat16).x.dtype, data.x.dtype
        (torch.bfloat16, torch.float32)
    """
    check_feature_dtype(feature_dtype, data)
    x = feature_tensor(getattr(data, "x", None))
    if feature_dtype is None or x is None or x.dtype == feature_dtype:
        return data
    data = copy.copy(data)
    data.x = x.to(feature_dtype)
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
