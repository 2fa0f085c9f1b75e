"""Checks of the loaders' arguments, run once at construction.

Each check raises an error that names the argument and says how to fix it,
before any sampling work is done, instead of a kernel error at the first
batch. None of them runs per batch, and none costs more than one pass over
the edges (``edge_index`` ids are range-checked with a min/max).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor
from torch_geometric.data import Data, HeteroData
from torch_geometric.sampler.base import NumNeighbors

from pyg_orch.checks import (
    check_device,
    check_features,
    check_not_uint8,
    id_range,
    is_int,
    shape_of,
)
from pyg_orch.hot.choice import check_hot_ratio
from pyg_orch.hot.options import HotOptions


def check_num_neighbors(num_neighbors: Any, allow_no_hops: bool = False) -> None:
    """Checks the fan-outs of a homogeneous graph: one int per hop, each >= -1.

    A :class:`~torch_geometric.sampler.base.NumNeighbors` holding a list is
    accepted too.

    Args:
        num_neighbors: neighbours to sample per node, one entry per hop
            (``-1``: all of them, ``0``: none).

    Raises:
        ValueError: not a list, empty, or an entry that is not an int >= -1.

    Example:
        >>> check_num_neighbors([15, 10, -1])
        >>> check_num_neighbors([10, -2])
        Traceback (most recent call last):
        ...
        ValueError: num_neighbors must hold one int per hop: >= 1, 0 (no neighbours) or -1 (all of them); got -2 at hop 1
    """  # noqa: E501 - a doctest's output is one line
    is_wrapped = isinstance(num_neighbors, NumNeighbors)
    values = num_neighbors.values if is_wrapped else num_neighbors
    if isinstance(values, dict):
        raise ValueError(
            "num_neighbors is a dict (fan-outs per edge type), which is for "
            "heterogeneous graphs (HeteroData); give a homogeneous Data graph a "
            "list with one fan-out per hop, e.g. num_neighbors=[15, 10]"
        )
    if not isinstance(values, list | tuple):
        raise ValueError(
            f"num_neighbors must be a list with one fan-out per hop, e.g. "
            f"[15, 10], got {num_neighbors!r}"
        )
    if len(values) == 0 and not allow_no_hops:
        raise ValueError(
            "num_neighbors must hold at least one fan-out (one per hop, e.g. "
            "[15, 10] for a 2-layer model), got []"
        )
    for hop, value in enumerate(values):
        if not is_int(value) or value < -1:
            raise ValueError(
                f"num_neighbors must hold one int per hop: >= 1, 0 (no "
                f"neighbours) or -1 (all of them); got {value!r} at hop {hop}"
            )


def check_batch_size(batch_size: Any) -> None:
    """Checks that ``batch_size`` is an int >= 1.

    Args:
        batch_size: seed nodes per mini-batch.

    Raises:
        ValueError: it is not.

    Example:
        >>> check_batch_size(512)
        >>> check_batch_size(0)
        Traceback (most recent call last):
        ...
        ValueError: batch_size must be an int >= 1 (seed nodes per mini-batch), got 0
    """
    if not is_int(batch_size) or batch_size < 1:
        raise ValueError(
            f"batch_size must be an int >= 1 (seed nodes per mini-batch), got "
            f"{batch_size!r}"
        )


def check_device_cache(device_cache: Any) -> None:
    """Checks that ``device_cache`` is a number of bytes >= 0 or ``"auto"``.

    Args:
        device_cache: the byte budget of the device caches.

    Raises:
        ValueError: it is neither.

    Example:
        >>> check_device_cache("auto")
        >>> check_device_cache(-1)
        Traceback (most recent call last):
        ...
        ValueError: device_cache must be a number of bytes >= 0 or 'auto' (half the free GPU memory), got -1; 0 turns the device caches off
    """  # noqa: E501 - a doctest's output is one line
    if device_cache == "auto" or (is_int(device_cache) and device_cache >= 0):
        return
    raise ValueError(
        f"device_cache must be a number of bytes >= 0 or 'auto' (half the free "
        f"GPU memory), got {device_cache!r}; 0 turns the device caches off"
    )


def check_heterogeneous(data: Any, hot_ratio: Any) -> bool:
    """Whether ``data`` is heterogeneous; checks ``hot_ratio`` for it.

    A dict ``hot_ratio`` (fractions per node type) fits heterogeneous graphs
    only; its node types are checked against the graph by the loader.

    Args:
        data: the graph.
        hot_ratio: the loader's ``hot_ratio``.

    Returns:
        ``True`` for a heterogeneous graph.

    Raises:
        ValueError: a dict ``hot_ratio`` on a homogeneous graph, or one whose
            values are not fractions.

    Example:
        >>> check_heterogeneous(Data(num_nodes=3), hot_ratio=0.2)
        False
        >>> check_heterogeneous(HeteroData(), hot_ratio={"paper": 0.2})
        True
        >>> check_heterogeneous(Data(num_nodes=3), hot_ratio={"paper": 0.2})
        Traceback (most recent call last):
        ...
        ValueError: hot_ratio is a dict of fractions per node type, which fits a HeteroData graph; data is a homogeneous Data graph: give one fraction (e.g. hot_ratio=0.2)
    """  # noqa: E501 - a doctest's output is one line
    hetero = isinstance(data, HeteroData)
    if isinstance(hot_ratio, dict):
        if not hetero:
            raise ValueError(
                "hot_ratio is a dict of fractions per node type, which fits a "
                "HeteroData graph; data is a homogeneous Data graph: give one "
                "fraction (e.g. hot_ratio=0.2)"
            )
        for node_type, value in hot_ratio.items():
            check_hot_ratio(value, name=f"hot_ratio[{node_type!r}]")
    else:
        check_hot_ratio(hot_ratio, allow_auto=True)
    return hetero


def check_graph(data: Data) -> int:
    """Checks ``data.edge_index``: present, integer, ``[2, E]``, ids in range.

    A graph given as a sparse ``adj_t`` (or ``adj``) instead is left to PyG.
    Costs one min/max pass over the edges.

    Args:
        data: a homogeneous graph.

    Returns:
        The number of nodes.

    Raises:
        ValueError: no ``edge_index``, the wrong shape, ids outside
            ``[0, num_nodes)``, or on the meta device (no ids at all).
        TypeError: ``edge_index`` is not an integer tensor.

    Example:
        >>> check_graph(Data(edge_index=torch.tensor([[0, 1], [1, 2]]), num_nodes=3))
        3
        >>> check_graph(Data(edge_index=torch.tensor([[0, 3], [1, 2]]), num_nodes=3))
        Traceback (most recent call last):
        ...
        ValueError: data.edge_index holds node id 3, but the graph has 3 nodes (data.num_nodes): ids must be in [0, 3). Set data.num_nodes or drop the edges to missing nodes
    """  # noqa: E501 - a doctest's output is one line
    edge_index = data.edge_index
    if edge_index is None:
        if "adj_t" in data or "adj" in data:
            return data.num_nodes
        raise ValueError(
            "data has no edge_index: give the graph its edges as data.edge_index, "
            "an integer tensor of shape [2, num_edges] (sources in row 0, "
            "destinations in row 1; torch.empty(2, 0, dtype=torch.long) for a "
            "graph without edges)"
        )
    if not isinstance(edge_index, Tensor):
        raise TypeError(
            f"data.edge_index must be an integer tensor of shape [2, num_edges], "
            f"got {type(edge_index).__name__}"
        )
    if edge_index.dtype not in (torch.int64, torch.int32):
        raise TypeError(
            f"data.edge_index must hold integer node ids (torch.long or "
            f"torch.int), got {edge_index.dtype}; convert it with "
            f"data.edge_index = data.edge_index.long()"
        )
    if edge_index.dim() != 2 or edge_index.size(0) != 2:
        hint = (
            "; it looks transposed: pass data.edge_index.t().contiguous()"
            if edge_index.dim() == 2 and edge_index.size(1) == 2
            else ""
        )
        raise ValueError(
            f"data.edge_index must have shape [2, num_edges] (sources, "
            f"destinations), got {shape_of(edge_index)}{hint}"
        )
    num_nodes = data.num_nodes
    if edge_index.numel() > 0:
        low, high = id_range(edge_index, "data.edge_index")
        if low < 0:
            raise ValueError(
                f"data.edge_index holds the negative node id {low}: ids must be "
                f"in [0, num_nodes) = [0, {num_nodes})"
            )
        if high >= num_nodes:
            raise ValueError(
                f"data.edge_index holds node id {high}, but the graph has "
                f"{num_nodes} nodes (data.num_nodes): ids must be in [0, "
                f"{num_nodes}). Set data.num_nodes or drop the edges to missing "
                f"nodes"
            )
    return num_nodes


def check_input_nodes(input_nodes: Any, num_nodes: int) -> None:
    """Checks seed nodes: integer ids in ``[0, num_nodes)`` or a full mask.

    An empty sequence means no seeds, as for ``NeighborLoader``.

    Args:
        input_nodes: ``None`` (every node), node ids, or a 1-D boolean mask
            with one entry per node.
        num_nodes: nodes of the graph.

    Raises:
        TypeError: neither integer ids nor a boolean mask, or ``uint8``
            (which may be meant as either).
        ValueError: ids out of range or on the meta device, or a mask of the
            wrong shape.

    Example:
        >>> check_input_nodes(torch.tensor([0, 2]), num_nodes=3)
        >>> check_input_nodes(torch.ones(2, dtype=torch.bool), num_nodes=3)
        Traceback (most recent call last):
        ...
        ValueError: input_nodes is a boolean mask of 2 entries, but the graph has 3 nodes: give one entry per node (e.g. data.train_mask) or the seed ids
    """  # noqa: E501 - a doctest's output is one line
    if input_nodes is None:
        return
    nodes = input_nodes
    if not isinstance(nodes, Tensor):
        try:
            nodes = torch.as_tensor(nodes)
        except (TypeError, ValueError, RuntimeError):
            raise TypeError(
                f"input_nodes must be a tensor of node ids or a boolean mask over "
                f"the nodes, got {type(input_nodes).__name__}"
            ) from None
        if nodes.dtype == torch.bool:
            raise TypeError(
                "input_nodes is a list of booleans, which NeighborLoader reads as "
                "node ids 0 and 1; pass a boolean mask as a tensor "
                "(torch.tensor(mask)) or give the seed ids"
            )
    if nodes.dim() == 1 and nodes.numel() == 0:
        # No seeds, as NeighborLoader takes them (torch makes [] a float32).
        return
    check_not_uint8(nodes, "input_nodes")
    if nodes.dtype == torch.bool:
        if nodes.dim() != 1:
            # PyG would take the flattened (row, column) pairs of nonzero().
            raise ValueError(
                f"input_nodes is a boolean mask of shape {shape_of(nodes)}, but a "
                f"mask must be 1-D with one entry per node: flatten it with "
                f"input_nodes.view(-1)"
            )
        if nodes.numel() != num_nodes:
            raise ValueError(
                f"input_nodes is a boolean mask of {nodes.numel()} entries, but "
                f"the graph has {num_nodes} nodes: give one entry per node (e.g. "
                f"data.train_mask) or the seed ids"
            )
        return
    if nodes.is_floating_point() or nodes.is_complex():
        raise TypeError(
            f"input_nodes must hold integer node ids or be a boolean mask, got "
            f"{nodes.dtype}; convert ids with input_nodes.long()"
        )
    if nodes.dim() != 1:
        raise ValueError(
            f"input_nodes must be a 1-D tensor of node ids, got shape "
            f"{shape_of(nodes)}; flatten it with input_nodes.view(-1)"
        )
    low, high = id_range(nodes, "input_nodes")
    if low < 0 or high >= num_nodes:
        bad = low if low < 0 else high
        raise ValueError(
            f"input_nodes holds node id {bad}, outside [0, {num_nodes}) (the "
            f"graph has {num_nodes} nodes); was it made for another graph?"
        )


def check_prefetch(prefetch: Any) -> None:
    """Checks ``prefetch``: batches prepared ahead, an int >= 0.

    Example:
        >>> check_prefetch(-1)
        Traceback (most recent call last):
        ...
        ValueError: prefetch must be an int >= 0, got -1
    """
    if not is_int(prefetch) or prefetch < 0:
        raise ValueError(f"prefetch must be an int >= 0, got {prefetch!r}")


def check_num_workers(
    num_workers: Any, prefetch: int, device: Any, cache: str | None
) -> None:
    """Checks that DataLoader worker processes come without pyg_orch's threads.

    ``prefetch``, ``device`` and the ``resample`` and ``embedding`` cache modes
    run in threads of the main process, which worker processes would bypass.

    Example:
        >>> check_num_workers(2, prefetch=0, device=None, cache="static")
        >>> check_num_workers(2, prefetch=2, device=None, cache=None)
        Traceback (most recent call last):
        ...
        ValueError: num_workers=2 cannot be combined with prefetch, device or the resample and embedding cache modes: they run in pyg_orch's own threads, not in DataLoader worker processes. Set num_workers=0
    """  # noqa: E501 - a doctest's output is one line
    threads = prefetch > 0 or device is not None or cache in ("resample", "embedding")
    if is_int(num_workers) and num_workers > 0 and threads:
        raise ValueError(
            f"num_workers={num_workers} cannot be combined with prefetch, device "
            f"or the resample and embedding cache modes: they run in pyg_orch's "
            f"own threads, not in DataLoader worker processes. Set num_workers=0"
        )


def check_loader_arguments(
    data: Any,
    num_neighbors: Any,
    options: HotOptions,
    prefetch: int = 0,
    device: Any = None,
    device_cache: int | str = 0,
    check_finite: bool = False,
    no_hops: bool = False,
    **kwargs: Any,
) -> None:
    """Checks the arguments of a loader, all at once.

    Called first thing by :class:`~pyg_orch.OrchNeighborLoader` and
    :class:`~pyg_orch.OrchLinkNeighborLoader`, with the same arguments; the
    hot settings were checked when ``options`` was made. The cheap
    checks of single values come first, then those of the graph (one pass
    over its edges, seeds and, with ``check_finite``, features). A
    heterogeneous graph that PyG's own backend will sample is left to PyG.
    Checks that need the built sampler (a given hot set's size and range,
    ``data.x`` present for hot vertices, the sampling options hot vertices
    need) or the device (``device_cache`` needs ``device``) stay in the
    loader.

    Args:
        data: the graph.
        num_neighbors: fan-outs, one per hop.
        options: the hot settings, checked.
        prefetch: an int >= 0.
        device: ``None`` or a device this machine has.
        device_cache: bytes >= 0 or ``"auto"``.
        check_finite: whether to scan ``data.x`` for NaN and inf.
        no_hops: whether ``num_neighbors=[]`` (the seeds alone, no hop) is
            allowed without hot vertices, as the link loader allows it.
        **kwargs: the loader's other arguments; ``input_nodes``,
            ``batch_size`` and ``num_workers`` are checked.

    Raises:
        ValueError: a value out of range, or a graph that does not fit.
        TypeError: a tensor of the wrong dtype, or a hot set of a wrong type.
        NotImplementedError: a heterogeneous graph where that cannot work.

    Example:
        >>> data = Data(x=torch.ones(3, 2), edge_index=torch.tensor([[0, 1], [1, 2]]))
        >>> from pyg_orch.hot.options import HotOptions
        >>> check_loader_arguments(data, [2, 2], HotOptions(hot_ratio=0.5), batch_size=2)
        >>> check_loader_arguments(data, [2, 2], HotOptions(),
        ...                        input_nodes=torch.tensor([0, 3]))
        Traceback (most recent call last):
        ...
        ValueError: input_nodes holds node id 3, outside [0, 3) (the graph has 3 nodes); was it made for another graph?
    """  # noqa: E501 - a doctest's output is one line
    hetero = check_heterogeneous(data, options.hot_ratio)
    check_prefetch(prefetch)
    device = check_device(device)
    check_device_cache(device_cache)
    if device_cache != 0 and device is None:
        raise ValueError(
            "device_cache keeps data on the training device: also pass "
            "device=... (e.g. device='cuda')"
        )
    if "batch_size" in kwargs:
        check_batch_size(kwargs["batch_size"])
    check_num_workers(kwargs.get("num_workers", 0), prefetch, device, options.cache)
    if not isinstance(check_finite, bool):
        raise ValueError(f"check_finite must be True or False, got {check_finite!r}")
    if hetero or not isinstance(data, Data):
        return  # PyG checks heterogeneous and remote graphs
    check_num_neighbors(num_neighbors, allow_no_hops=no_hops and not options.wants_hot)
    if no_hops and data.edge_index is None and not num_neighbors:
        num_nodes = data.num_nodes  # seed edges alone: no graph to sample
    else:
        num_nodes = check_graph(data)
    check_input_nodes(kwargs.get("input_nodes"), num_nodes)
    check_features(
        data.x,
        num_nodes,
        on_cpu=device is not None,
        aggregated=options.wants_hot,
        check_finite=check_finite,
    )
