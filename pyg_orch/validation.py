"""Input checks for ``OrchNeighborLoader`` and ``OrchModel``, run once at construction.

Each check raises an error that names the argument and says how to fix it,
before any sampling work is done, instead of a kernel error at the first
batch. None of them runs per batch, and none costs more than one pass over
the edges (``edge_index`` ids are range-checked with a min/max).
The value checks that already lived elsewhere (``check_hot_ratio``,
``check_staleness``, the loader's pipeline options, ...) are reused, not
repeated.
"""

from __future__ import annotations

import warnings
from numbers import Integral
from typing import Any

import numpy as np
import torch
from torch import Tensor
from torch_geometric.data import Data, HeteroData
from torch_geometric.sampler.base import NumNeighbors

from pyg_orch.cache import CACHE_MODES
from pyg_orch.hotness import HotSet, check_hot_method, check_hot_ratio
from pyg_orch.pipeline import check_staleness

# Elements per chunk of the opt-in NaN/inf scan: bounds its temporary mask.
_FINITE_CHUNK = 1 << 24


def _is_int(value: Any) -> bool:
    return isinstance(value, Integral) and not isinstance(value, bool)


def _shape(tensor: Tensor) -> list[int]:
    return list(tensor.shape)


def _check_not_uint8(tensor: Tensor, name: str) -> None:
    # torch once used uint8 masks: a 0/1 uint8 tensor is ambiguous, and PyG
    # reads it as the node ids 0 and 1.
    if tensor.dtype == torch.uint8:
        raise TypeError(
            f"{name} is a torch.uint8 tensor, which could be a mask or node ids: "
            f"pass {name}.bool() for a mask over the nodes or {name}.long() for "
            f"node ids"
        )


def _id_range(ids: Tensor, name: str) -> tuple[int, int]:
    # The smallest and largest id, by one min/max pass.
    if ids.is_meta:
        raise ValueError(
            f"{name} is on the meta device, so it has a shape but no node ids: "
            f"give the loader its real values (on the CPU)"
        )
    low, high = torch.aminmax(ids)
    return int(low), int(high)


def check_num_neighbors(num_neighbors: Any) -> None:
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
    if len(values) == 0:
        raise ValueError(
            "num_neighbors must hold at least one fan-out (one per hop, e.g. "
            "[15, 10] for a 2-layer model), got []"
        )
    for hop, value in enumerate(values):
        if not _is_int(value) or value < -1:
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
    if not _is_int(batch_size) or batch_size < 1:
        raise ValueError(
            f"batch_size must be an int >= 1 (seed nodes per mini-batch), got "
            f"{batch_size!r}"
        )


def check_presample_epochs(presample_epochs: Any) -> None:
    """Checks that ``presample_epochs`` is an int >= 1.

    Args:
        presample_epochs: epochs sampled by ``hot_method="presample"``.

    Raises:
        ValueError: it is not.

    Example:
        >>> check_presample_epochs(2)
        >>> check_presample_epochs(0)
        Traceback (most recent call last):
        ...
        ValueError: presample_epochs must be an int >= 1 (sampled epochs that count how often each vertex is in a frontier), got 0
    """  # noqa: E501 - a doctest's output is one line
    if not _is_int(presample_epochs) or presample_epochs < 1:
        raise ValueError(
            f"presample_epochs must be an int >= 1 (sampled epochs that count "
            f"how often each vertex is in a frontier), got {presample_epochs!r}"
        )


#: The dtypes ``feature_dtype`` may name, half widths and float32.
FEATURE_DTYPES = (torch.bfloat16, torch.float16, torch.float32)


def check_feature_dtype(feature_dtype: Any, data: Any) -> None:
    """Checks the loader's ``feature_dtype`` (``None`` or a float dtype).

    Raises:
        TypeError: it is not ``None`` or one of :data:`FEATURE_DTYPES`.
        NotImplementedError: ``data`` is heterogeneous.

    Example:
        >>> check_feature_dtype(torch.int8, None)
        Traceback (most recent call last):
        ...
        TypeError: feature_dtype must be None, torch.bfloat16, torch.float16 or torch.float32, got torch.int8
    """  # noqa: E501 - a doctest's output is one line
    if feature_dtype is None:
        return
    if feature_dtype not in FEATURE_DTYPES:
        raise TypeError(
            f"feature_dtype must be None, torch.bfloat16, torch.float16 or "
            f"torch.float32, got {feature_dtype!r}"
        )
    if isinstance(data, HeteroData):
        raise NotImplementedError(
            "feature_dtype is not supported on HeteroData yet: convert each "
            "node type's x yourself and use hot_ratio=0, or leave "
            "feature_dtype=None"
        )


def check_device(device: Any) -> torch.device | None:
    """Checks that ``device`` names a device that exists here.

    Args:
        device: ``None``, a :class:`torch.device` or its name.

    Returns:
        The :class:`torch.device`, or ``None``.

    Raises:
        ValueError: not a device name, or a CUDA device this machine lacks.

    Example:
        >>> check_device("cpu")
        device(type='cpu')
        >>> check_device("gpu")
        Traceback (most recent call last):
        ...
        ValueError: device must be None, a torch.device or a name such as 'cuda', 'cuda:1' or 'cpu', got 'gpu'
    """  # noqa: E501 - a doctest's output is one line
    if device is None:
        return None
    try:
        device = torch.device(device)
    except (RuntimeError, TypeError):
        raise ValueError(
            f"device must be None, a torch.device or a name such as 'cuda', "
            f"'cuda:1' or 'cpu', got {device!r}"
        ) from None
    if device.type == "cuda":
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if (device.index or 0) >= count:
            raise ValueError(
                f"device={str(device)!r}, but this machine has {count} CUDA "
                f"device(s); pass one that exists, or device=None to keep "
                f"batches on the CPU"
            )
    return device


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
    if device_cache == "auto" or (_is_int(device_cache) and device_cache >= 0):
        return
    raise ValueError(
        f"device_cache must be a number of bytes >= 0 or 'auto' (half the free "
        f"GPU memory), got {device_cache!r}; 0 turns the device caches off"
    )


def check_hot_type(hot: Any) -> None:
    """Checks that a given hot set is a ``HotSet``, node ids or a boolean mask.

    A tensor must be 1-D and neither floating point nor ``uint8`` (which may
    be meant as a mask or as ids). Its size and id range are checked against
    the graph when the loader takes it.

    Args:
        hot: the ``hot`` argument of the loader.

    Raises:
        TypeError: it is none of those, or ``uint8``.
        ValueError: a tensor that is not 1-D.

    Example:
        >>> check_hot_type(torch.tensor([0, 5]))
        >>> check_hot_type(torch.tensor([0.5]))
        Traceback (most recent call last):
        ...
        TypeError: hot must be a HotSet, a tensor of node ids or a boolean mask over the nodes, got a tensor of torch.float32
    """  # noqa: E501 - a doctest's output is one line
    if hot is None or isinstance(hot, HotSet):
        return
    if isinstance(hot, Tensor):
        if hot.dtype == torch.bool or not (hot.is_floating_point() or hot.is_complex()):
            _check_not_uint8(hot, "hot")
            if hot.dim() != 1:
                raise ValueError(
                    f"hot must be 1-D (node ids, or a boolean mask with one entry "
                    f"per node), got shape {_shape(hot)}; flatten a mask with "
                    f"hot.view(-1)"
                )
            return
        got = f"a tensor of {hot.dtype}"
    else:
        got = type(hot).__name__
    raise TypeError(
        f"hot must be a HotSet, a tensor of node ids or a boolean mask over the "
        f"nodes, got {got}"
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
            f"destinations), got {_shape(edge_index)}{hint}"
        )
    num_nodes = data.num_nodes
    if edge_index.numel() > 0:
        low, high = _id_range(edge_index, "data.edge_index")
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
    _check_not_uint8(nodes, "input_nodes")
    if nodes.dtype == torch.bool:
        if nodes.dim() != 1:
            # PyG would take the flattened (row, column) pairs of nonzero().
            raise ValueError(
                f"input_nodes is a boolean mask of shape {_shape(nodes)}, but a "
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
            f"{_shape(nodes)}; flatten it with input_nodes.view(-1)"
        )
    low, high = _id_range(nodes, "input_nodes")
    if low < 0 or high >= num_nodes:
        bad = low if low < 0 else high
        raise ValueError(
            f"input_nodes holds node id {bad}, outside [0, {num_nodes}) (the "
            f"graph has {num_nodes} nodes); was it made for another graph?"
        )


def feature_tensor(x: Any) -> Tensor | None:
    """Node features as a tensor: a tensor as is, a NumPy array viewed in place.

    A NumPy array (an :class:`numpy.memmap` too: how large graphs keep their
    features on disk) becomes a tensor over the same memory, without a copy,
    so the loader's kernels read rows where they lie.

    Args:
        x: the features ``data.x``.

    Returns:
        A tensor, or ``None`` when ``x`` is neither a tensor nor an array.

    Raises:
        TypeError: an array torch cannot view (its dtype, byte order or
            strides).

    Example:
        >>> x = np.ones((3, 2), dtype=np.float32)
        >>> feature_tensor(x).data_ptr() == x.ctypes.data
        True
        >>> feature_tensor(np.ones(2, dtype=">f4"))
        Traceback (most recent call last):
        ...
        TypeError: data.x is a NumPy array torch cannot view in place (given numpy array has byte order different from the native byte order. Conversion between byte orders is currently not supported.): convert it, e.g. data.x = np.ascontiguousarray(data.x, dtype=np.float32)
    """  # noqa: E501 - a doctest's output is one line
    if isinstance(x, Tensor):
        return x
    if not isinstance(x, np.ndarray):
        return None
    try:
        with warnings.catch_warnings():
            # A read-only memmap warns that torch has no read-only tensors;
            # nothing in pyg_orch writes to data.x.
            warnings.filterwarnings("ignore", message=".*NumPy array is not writable")
            return torch.from_numpy(x)
    except (TypeError, ValueError) as error:
        raise TypeError(
            f"data.x is a NumPy array torch cannot view in place ({error}): "
            f"convert it, e.g. data.x = np.ascontiguousarray(data.x, "
            f"dtype=np.float32)"
        ) from None


def check_features(
    x: Any,
    num_nodes: int,
    on_cpu: bool = False,
    aggregated: bool = False,
    check_finite: bool = False,
) -> None:
    """Checks node features ``data.x`` for what the loader does with them.

    A NumPy array is checked as the tensor :func:`feature_tensor` makes of it.

    Args:
        x: the features, or ``None``.
        num_nodes: nodes of the graph.
        on_cpu: the loader gathers them on the CPU (``device=``), so they must
            be there, 2-D, not require grad, and of a dtype NumPy has.
        aggregated: hot vertices aggregate them with a float32 kernel (on the
            CPU, 2-D, not requiring grad).
        check_finite: also scan them for NaN and inf (one pass, in chunks).

    Raises:
        ValueError: the wrong number of rows, on a GPU when needed on the CPU,
            requiring grad where read outside autograd, or NaN/inf with
            ``check_finite``.
        TypeError: not a 2-D matrix, or of a dtype the kernels cannot read.

    Example:
        >>> check_features(torch.ones(3, 2), num_nodes=3, check_finite=True)
        >>> check_features(torch.tensor([[1.0], [float("nan")]]), 2, check_finite=True)
        Traceback (most recent call last):
        ...
        ValueError: data.x holds 1 NaN or infinite value(s), the first in row 1: clean the features (e.g. data.x = torch.nan_to_num(data.x)) or leave check_finite=False
    """  # noqa: E501 - a doctest's output is one line
    x = feature_tensor(x)
    if x is None:
        return
    if x.dim() == 0 or x.size(0) != num_nodes:
        raise ValueError(
            f"data.x must have one row per node: the graph has {num_nodes} nodes, "
            f"x has shape {_shape(x)}"
        )
    if on_cpu or aggregated:
        _check_cpu_readable(x, "hot vertices" if aggregated else "device=")
    if aggregated and x.dtype not in FEATURE_DTYPES:
        raise TypeError(
            f"data.x must be float32 (or bfloat16 / float16) for hot vertices "
            f"(their aggregates are computed by a float32 kernel), got "
            f"{x.dtype} features; convert them with data.x = data.x.float() or "
            f"set hot_ratio=0"
        )
    if on_cpu and not (_numpy_has(x.dtype) or x.dtype in FEATURE_DTYPES):
        raise TypeError(
            f"data.x is {x.dtype}, which device= cannot gather (its kernel reads "
            f"features through NumPy, which has no such type): store them as "
            f"torch.bfloat16, torch.float16 or torch.float32, or set device=None"
        )
    if check_finite and (x.is_floating_point() or x.is_complex()):
        _check_finite(x)


def _check_cpu_readable(x: Tensor, reader: str) -> None:
    # The CPU kernels of hot vertices and device= read x's rows through
    # NumPy, outside autograd.
    if x.device.type != "cpu":
        raise ValueError(
            f"data.x is on {x.device}, but hot vertices and device= gather and "
            f"aggregate features on the CPU: keep data.x there (data.x = "
            f"data.x.cpu()); device= delivers each batch to the GPU"
        )
    if x.dim() != 2:
        fix = "data.x.view(-1, 1)" if x.dim() == 1 else "data.x.flatten(1)"
        raise TypeError(
            f"data.x must be a 2-D [num_nodes, num_features] matrix for "
            f"{reader} (its kernels read it row by row), got shape {_shape(x)}; "
            f"reshape it with data.x = {fix}, or set hot_ratio=0 and device=None"
        )
    if x.requires_grad:
        raise ValueError(
            f"data.x requires grad, but {reader} read it outside autograd, so "
            f"no gradient would reach it: pass data.x = data.x.detach() when the "
            f"features are not trained (e.g. they came out of a model run "
            f"without torch.no_grad()); keep trained node features in the model "
            f"(e.g. a torch.nn.Embedding), or set hot_ratio=0 and device=None"
        )


def _numpy_has(dtype: torch.dtype) -> bool:
    # Asks torch itself: the list of types NumPy lacks grows with torch.
    try:
        torch.empty(0, dtype=dtype).numpy()
    except TypeError:
        return False
    return True


def _check_finite(x: Tensor) -> None:
    # In row chunks: a mask of the whole matrix could be gigabytes.
    if x.numel() == 0:
        return
    rows = max(1, _FINITE_CHUNK // max(1, x[0].numel()))
    if all(bool(torch.isfinite(chunk).all()) for chunk in x.split(rows)):
        return
    bad, first = 0, None
    for start in range(0, x.size(0), rows):
        finite = torch.isfinite(x[start : start + rows]).reshape(-1, x[0].numel())
        bad_rows = (~finite).any(dim=1).nonzero()
        if first is None and bad_rows.numel() > 0:
            first = start + int(bad_rows[0])
        bad += int((~finite).sum())
    raise ValueError(
        f"data.x holds {bad} NaN or infinite value(s), the first in row {first}: "
        f"clean the features (e.g. data.x = torch.nan_to_num(data.x)) or leave "
        f"check_finite=False"
    )


def check_pipeline_options(
    cache: str | None, super_batch: int, staleness: int, prefetch: int
) -> None:
    """Checks the cache mode, the super-batch, the staleness bound and prefetch.

    Example:
        >>> check_pipeline_options("resample", super_batch=4, staleness=3, prefetch=2)
        >>> check_pipeline_options("lazy", 4, 7, 0)
        Traceback (most recent call last):
        ...
        ValueError: cache must be one of ('static', 'resample', 'embedding') or None, got 'lazy'
    """  # noqa: E501 - a doctest's output is one line
    if cache is not None and cache not in CACHE_MODES:
        raise ValueError(f"cache must be one of {CACHE_MODES} or None, got {cache!r}")
    check_staleness(super_batch, staleness)
    if not _is_int(prefetch) or prefetch < 0:
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
    if _is_int(num_workers) and num_workers > 0 and threads:
        raise ValueError(
            f"num_workers={num_workers} cannot be combined with prefetch, device "
            f"or the resample and embedding cache modes: they run in pyg_orch's "
            f"own threads, not in DataLoader worker processes. Set num_workers=0"
        )


def check_hot_fanout(hot_fanout: Any) -> None:
    """Checks ``hot_fanout``: ``None`` (the largest fan-out), >= 1 or -1.

    Example:
        >>> check_hot_fanout(-1)
        >>> check_hot_fanout(0)
        Traceback (most recent call last):
        ...
        ValueError: hot_fanout must be >= 1 or -1 (all neighbours), got 0
    """
    if hot_fanout is None:
        return
    if not _is_int(hot_fanout):
        raise ValueError(f"hot_fanout must be an int, got {hot_fanout!r}")
    if hot_fanout == 0 or hot_fanout < -1:
        raise ValueError(
            f"hot_fanout must be >= 1 or -1 (all neighbours), got {hot_fanout}"
        )


def check_loader_arguments(
    data: Any,
    num_neighbors: Any,
    hot_ratio: float | str = 0.0,
    hot_method: str = "presample",
    hot: Any = None,
    presample_epochs: int = 1,
    cache: str | None = None,
    super_batch: int = 8,
    staleness: int | None = None,
    hot_fanout: int | None = None,
    prefetch: int = 0,
    device: Any = None,
    device_cache: int | str = 0,
    check_finite: bool = False,
    **kwargs: Any,
) -> None:
    """Checks the arguments of :class:`~pyg_orch.OrchNeighborLoader`, all at once.

    Called first thing by the loader, with the same arguments. The cheap
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
        hot_ratio: ``[0, 1]`` or ``"auto"``.
        hot_method: one of :data:`~pyg_orch.hotness.HOT_METHODS`.
        hot: ``None``, a :class:`~pyg_orch.hotness.HotSet`, node ids or a mask.
        presample_epochs: an int >= 1.
        cache: ``None`` or one of :data:`~pyg_orch.cache.CACHE_MODES`.
        super_batch: an int >= 1.
        staleness: ``None`` or an int >= ``super_batch - 1``.
        hot_fanout: ``None``, an int >= 1, or -1.
        prefetch: an int >= 0.
        device: ``None`` or a device this machine has.
        device_cache: bytes >= 0 or ``"auto"``.
        check_finite: whether to scan ``data.x`` for NaN and inf.
        **kwargs: the loader's other arguments; ``input_nodes``,
            ``batch_size`` and ``num_workers`` are checked.

    Raises:
        ValueError: a value out of range, or a graph that does not fit.
        TypeError: a tensor of the wrong dtype, or a hot set of a wrong type.
        NotImplementedError: a heterogeneous graph where that cannot work.

    Example:
        >>> data = Data(x=torch.ones(3, 2), edge_index=torch.tensor([[0, 1], [1, 2]]))
        >>> check_loader_arguments(data, [2, 2], batch_size=2, hot_ratio=0.5)
        >>> check_loader_arguments(data, [2, 2], input_nodes=torch.tensor([0, 3]))
        Traceback (most recent call last):
        ...
        ValueError: input_nodes holds node id 3, outside [0, 3) (the graph has 3 nodes); was it made for another graph?
    """  # noqa: E501 - a doctest's output is one line
    hetero = check_heterogeneous(data, hot_ratio)
    check_hot_method(hot_method)
    check_hot_type(hot)
    check_presample_epochs(presample_epochs)
    if staleness is None and _is_int(super_batch):
        staleness = 2 * super_batch - 1
    # A bad super_batch is named before staleness is looked at.
    check_pipeline_options(cache, super_batch, staleness, prefetch)
    check_hot_fanout(hot_fanout)
    device = check_device(device)
    check_device_cache(device_cache)
    if device_cache != 0 and device is None:
        raise ValueError(
            "device_cache keeps data on the training device: also pass "
            "device=... (e.g. device='cuda')"
        )
    if "batch_size" in kwargs:
        check_batch_size(kwargs["batch_size"])
    check_num_workers(kwargs.get("num_workers", 0), prefetch, device, cache)
    if not isinstance(check_finite, bool):
        raise ValueError(f"check_finite must be True or False, got {check_finite!r}")
    if hetero or not isinstance(data, Data):
        return  # PyG checks heterogeneous and remote graphs
    wants_hot = hot is not None or hot_ratio != 0
    check_num_neighbors(num_neighbors)
    num_nodes = check_graph(data)
    check_input_nodes(kwargs.get("input_nodes"), num_nodes)
    check_features(
        data.x,
        num_nodes,
        on_cpu=device is not None,
        aggregated=wants_hot,
        check_finite=check_finite,
    )


def check_model_arguments(model: Any, loader: Any) -> None:
    """Checks that :class:`~pyg_orch.OrchModel` can run ``model`` on ``loader``.

    The loader must be an :class:`~pyg_orch.OrchNeighborLoader` that samples
    one hop per layer of the model. (Whether the model can be wrapped at all
    is checked by ``OrchModel`` itself.)

    Args:
        model: the model to wrap.
        loader: the loader, or ``None``.

    Raises:
        TypeError: ``loader`` is not an ``OrchNeighborLoader``.
        ValueError: its ``num_neighbors`` has not one fan-out per layer.

    Example:
        >>> from torch_geometric.nn import GraphSAGE
        >>> from pyg_orch.loader import OrchNeighborLoader
        >>> data = Data(x=torch.ones(3, 2), edge_index=torch.tensor([[0, 1], [1, 2]]))
        >>> loader = OrchNeighborLoader(data, [2, 2], batch_size=2)
        >>> check_model_arguments(GraphSAGE(2, 4, num_layers=3), loader)
        Traceback (most recent call last):
        ...
        ValueError: the loader's num_neighbors=[2, 2] samples 2 hops, but the model has 3 layers (num_layers=3): OrchModel needs one fan-out per layer. Build the loader with 3 fan-outs or the model with num_layers=2
    """  # noqa: E501 - a doctest's output is one line
    if loader is None:
        return
    sampler = getattr(loader, "node_sampler", getattr(loader, "link_sampler", None))
    if sampler is None or not hasattr(loader, "cache"):
        raise TypeError(
            f"loader must be an OrchNeighborLoader or OrchLinkNeighborLoader "
            f"(its hot cache feeds the bottom layer), got "
            f"{type(loader).__name__}; build it with "
            f"pyg_orch.OrchNeighborLoader(...), or pass loader=None"
        )
    num_layers = getattr(model, "num_layers", None)
    sampler_fanouts = getattr(sampler, "num_neighbors", None)
    fanouts = getattr(sampler_fanouts, "values", None)
    if not _is_int(num_layers) or not isinstance(fanouts, list | tuple):
        return  # not a BasicGNN (OrchModel says so), or per-edge-type fan-outs
    if len(fanouts) != num_layers:
        raise ValueError(
            f"the loader's num_neighbors={list(fanouts)} samples {len(fanouts)} "
            f"hops, but the model has {num_layers} layers (num_layers="
            f"{num_layers}): OrchModel needs one fan-out per layer. Build the "
            f"loader with {num_layers} fan-outs or the model with num_layers="
            f"{len(fanouts)}"
        )
