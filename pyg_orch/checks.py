"""The ground checks every wing shares: integers, index ranges, features, devices.

Each raises an error that names the argument and says how to fix it, once, at
construction: none runs per batch, and none costs more than one pass over the
data. The checks of one object's arguments live beside that object (the
loader's in :mod:`pyg_orch.loading.arguments`, the model's in
:mod:`pyg_orch.nn.model_checks`); what more than one of them needs is here.
"""

from __future__ import annotations

import warnings
from numbers import Integral
from typing import Any

import numpy as np
import torch
from torch import Tensor

# Elements per chunk of the opt-in NaN/inf scan: bounds its temporary mask.
_FINITE_CHUNK = 1 << 24


def is_int(value: Any) -> bool:
    """Whether ``value`` is an integer (a NumPy one too), not a bool.

    Example:
        >>> is_int(3), is_int(True), is_int(3.0)
        (True, False, False)
    """
    return isinstance(value, Integral) and not isinstance(value, bool)


def shape_of(tensor: Tensor) -> list[int]:
    """A tensor's shape as a plain list, as error messages show it.

    Example:
        >>> shape_of(torch.zeros(2, 3))
        [2, 3]
    """
    return list(tensor.shape)


def check_not_uint8(tensor: Tensor, name: str) -> None:
    """Refuses a ``uint8`` tensor, which could be a mask or node ids.

    torch once used uint8 masks: a 0/1 uint8 tensor is ambiguous, and PyG
    reads it as the node ids 0 and 1.

    Example:
        >>> check_not_uint8(torch.ones(2, dtype=torch.uint8), "hot")
        Traceback (most recent call last):
        ...
        TypeError: hot is a torch.uint8 tensor, which could be a mask or node ids: pass hot.bool() for a mask over the nodes or hot.long() for node ids
    """  # noqa: E501 - a doctest's output is one line
    if tensor.dtype == torch.uint8:
        raise TypeError(
            f"{name} is a torch.uint8 tensor, which could be a mask or node ids: "
            f"pass {name}.bool() for a mask over the nodes or {name}.long() for "
            f"node ids"
        )


def id_range(ids: Tensor, name: str) -> tuple[int, int]:
    """The smallest and largest id of ``ids`` (named ``name``), in one pass.

    Example:
        >>> id_range(torch.tensor([4, 1, 7]), "input_nodes")
        (1, 7)
    """
    if ids.is_meta:
        raise ValueError(
            f"{name} is on the meta device, so it has a shape but no node ids: "
            f"give the loader its real values (on the CPU)"
        )
    low, high = torch.aminmax(ids)
    return int(low), int(high)


#: The dtypes ``feature_dtype`` may name, half widths and float32.
FEATURE_DTYPES = (torch.bfloat16, torch.float16, torch.float32)


def check_feature_dtype(feature_dtype: Any) -> None:
    """Checks the loader's ``feature_dtype`` (``None`` or a float dtype).

    Raises:
        TypeError: it is not ``None`` or one of :data:`FEATURE_DTYPES`.

    Example:
        >>> check_feature_dtype(torch.int8)
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
            f"x has shape {shape_of(x)}"
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
            f"{reader} (its kernels read it row by row), got shape {shape_of(x)}; "
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


def checkpoint_key(name: str) -> str:
    """How an error names a key of a loader's checkpoint.

    Example:
        >>> checkpoint_key("hot_ratio")
        "checkpoint key 'hot_ratio'"
    """
    return f"checkpoint key {name!r}"


def describe(value: Any) -> str:
    """How an error shows a value it refuses: a tensor's dtype and shape.

    Example:
        >>> describe(torch.zeros(2, 3)), describe("lazy")
        ('a torch.float32 tensor of shape (2, 3)', "'lazy'")
    """
    if isinstance(value, Tensor):
        return f"a {value.dtype} tensor of shape {tuple(value.shape)}"
    return repr(value) if len(repr(value)) <= 80 else type(value).__name__


def check_keys(mapping: Any, keys: tuple[str, ...], where: str) -> None:
    """Raises a :class:`ValueError` unless ``mapping`` is a dict of ``keys``.

    Example:
        >>> check_keys({"a": 1, "c": 2}, ("a", "b"), "the checkpoint")
        Traceback (most recent call last):
        ...
        ValueError: the checkpoint lacks the keys ['b'] and has unknown keys ['c']; was it saved by state_dict() of this version of pyg_orch?
    """  # noqa: E501 - a doctest's output is one line
    if not isinstance(mapping, dict):
        raise ValueError(
            f"{where} must be a dict (from a loader's state_dict()), got "
            f"{type(mapping).__name__}"
        )
    missing = [key for key in keys if key not in mapping]
    unknown = [key for key in mapping if key not in keys]
    wrong = [
        f"{what} {found}"
        for what, found in (("lacks the keys", missing), ("has unknown keys", unknown))
        if found
    ]
    if wrong:
        raise ValueError(
            f"{where} {' and '.join(wrong)}; was it saved by "
            f"state_dict() of this version of pyg_orch?"
        )


def check_index(value: Any, end: int, key: str, what: str = "") -> None:
    """Raises a :class:`ValueError` naming checkpoint ``key`` unless ``0 <= value < end``.

    Example:
        >>> check_index(3, 2, "position.next")
        Traceback (most recent call last):
        ...
        ValueError: checkpoint key 'position.next' must be an int in [0, 2), got 3
    """  # noqa: E501 - a doctest's output is one line
    if not is_int(value) or not 0 <= value < end:
        raise ValueError(
            f"{checkpoint_key(key)} must be an int in [0, {end}){what}, got {value!r}"
        )
