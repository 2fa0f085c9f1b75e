"""METIS partitioning with several balance constraints: :func:`metis_parts`.

Two bindings, tried in this order (:func:`metis_binding` tells which one runs):

* ``cmeel-metis``: the METIS 5.2.1 C library of the ``cmeel-metis`` wheel,
  called through ``ctypes``. It takes several balance constraints
  (``ncon > 1``) but has 32-bit indices, so it refuses graphs with 2**31 or
  more nodes or (symmetrized) edges.
* ``pymetis``: 64-bit indices, but its wrapper fixes ``ncon = 1``: given a
  ``[num_nodes, ncon]`` weight matrix it would silently balance one
  constraint, so :func:`metis_parts` refuses ``ncon > 1`` with it.

Up to 8 parts both bisect recursively (pymetis's default, the METIS manual's
advice), k-way above. Measured here (``pytest -m slow -s
tests/test_partition.py -k binding_figures``, 2 cores) on a 200k-node
``power_law_graph`` (4.0M edges, 10 % training mask) in 4 parts: one
constraint, cmeel-metis cut 0.177 of the edges, nodes/train/in-edges max/mean
1.000/1.010/1.153, 2.4 s; pymetis cut 0.177, 1.000/1.020/1.160, 2.6 s (the
same METIS 5 code). Three constraints (nodes, training nodes, in-degree),
which only cmeel-metis takes: cut 0.216, 1.018/1.015/1.016, 2.5 s. The
bindings cut and run alike, so the one that balances several constraints
comes first.

Example:
    >>> rowptr, col = torch.tensor([0, 1, 2, 3, 4]), torch.tensor([1, 0, 3, 2])
    >>> parts = metis_parts(rowptr, col, 2)
    >>> bool(parts[0] == parts[1]), bool(parts[2] == parts[3])
    (True, True)
"""

from __future__ import annotations

import ctypes
import functools
import importlib.metadata
import logging
import time
from typing import Any

import numpy as np
import torch
from torch import Tensor

from pyg_orch.kernels import power_law, reorder

log = logging.getLogger(__name__)

#: The bindings :func:`metis_parts` tries, first to last.
BINDINGS = ("cmeel-metis", "pymetis")
_INT32_MAX = 2**31 - 1
_METIS_NOPTIONS = 40
_METIS_OPTION_SEED = 9
_METIS_OK = 1
# Up to this many parts, METIS bisects recursively; k-way above.
_RECURSIVE_PARTS = 8


@functools.cache
def _cmeel_library() -> Any:
    # The METIS C library of cmeel-metis, or None when the wheel is missing.
    try:
        dist = importlib.metadata.distribution("cmeel-metis")
    except importlib.metadata.PackageNotFoundError:
        return None
    lib = dist.locate_file("cmeel.prefix/lib")
    # libmetis.so links libGKlib.so without an rpath that finds it.
    ctypes.CDLL(str(lib / "libGKlib.so"), mode=ctypes.RTLD_GLOBAL)
    metis = ctypes.CDLL(str(lib / "libmetis.so"))
    metis.METIS_PartGraphKway.restype = ctypes.c_int
    metis.METIS_PartGraphRecursive.restype = ctypes.c_int
    metis.METIS_SetDefaultOptions.restype = ctypes.c_int
    return metis


@functools.cache
def _pymetis() -> Any:
    try:
        import pymetis
    except ImportError:
        return None
    return pymetis


def _available() -> tuple[str, ...]:
    # The installed bindings, in BINDINGS order.
    found = {"cmeel-metis": _cmeel_library, "pymetis": _pymetis}
    return tuple(name for name in BINDINGS if found[name]() is not None)


def metis_binding(ncon: int = 1) -> str:
    """The binding :func:`metis_parts` runs for ``ncon`` balance constraints.

    Args:
        ncon: the number of balance constraints (weight columns).

    Returns:
        ``"cmeel-metis"`` or ``"pymetis"``, the first installed one of
        :data:`BINDINGS` that balances ``ncon`` constraints.

    Raises:
        ImportError: neither binding is installed.
        ValueError: ``ncon > 1`` and only ``pymetis`` is installed.

    Example:
        >>> metis_binding() in BINDINGS
        True
    """
    available = _available()
    if not available:
        raise ImportError(
            "METIS partitioning needs a METIS binding: pip install cmeel-metis "
            "(several balance constraints) or pip install pymetis (one), or "
            'pip install "pyg_orch[partition]"'
        )
    if ncon > 1 and "cmeel-metis" not in available:
        raise ValueError(
            f"{ncon} balance constraints (balance, balance_edges, node types) "
            "need the cmeel-metis binding: pymetis, the one installed, balances "
            "only one constraint and would silently ignore the others; pip "
            "install cmeel-metis, or partition with balance=None, "
            "balance_edges=False on a homogeneous graph"
        )
    return available[0]


def _symmetric(src: Tensor, dst: Tensor, num_nodes: int) -> tuple[Tensor, Tensor]:
    # The CSR of the undirected graph without self loops nor duplicate edges,
    # in the memory of one copy of its adjacency (32-bit where it fits), by
    # the power-law generator's row kernels.
    src_np, dst_np = src.to(torch.long).numpy(), dst.to(torch.long).numpy()
    counts = np.zeros(num_nodes, dtype=np.int64)
    power_law.count_rows(src_np, dst_np, counts)
    indptr = np.zeros(num_nodes + 1, dtype=np.int64)
    np.cumsum(counts, out=indptr[1:])
    dtype = np.int32 if num_nodes <= _INT32_MAX else np.int64
    adjacency = np.empty(int(indptr[-1]), dtype=dtype)
    power_law.fill_rows(src_np, dst_np, indptr[:-1].copy(), adjacency)
    power_law.sort_unique_rows(indptr, adjacency, counts, 0, num_nodes)
    xadj = reorder.compact_rows(indptr, adjacency, counts)
    return torch.from_numpy(xadj), torch.from_numpy(adjacency[: int(xadj[-1])])


def _weights(node_weights: Tensor | None, num_nodes: int) -> Tensor | None:
    # [num_nodes, ncon] int64 weights, None for unit weights.
    if node_weights is None:
        return None
    if node_weights.dim() == 1:
        node_weights = node_weights.unsqueeze(1)
    if node_weights.dim() != 2 or node_weights.size(0) != num_nodes:
        raise ValueError(
            f"node_weights must be [num_nodes] or [num_nodes, ncon] with "
            f"num_nodes={num_nodes}, got shape {list(node_weights.shape)}"
        )
    if node_weights.is_floating_point() and not torch.equal(
        node_weights, node_weights.round()
    ):
        raise ValueError("node_weights must be integers")
    node_weights = node_weights.to(torch.long)
    if bool((node_weights < 0).any()):
        raise ValueError("node_weights must be non-negative")
    if bool((node_weights.sum(0) > _INT32_MAX).any()):
        raise ValueError("node_weights sum past 2**31 - 1 in a column, METIS's limit")
    return node_weights


def metis_parts(
    rowptr: Tensor,
    col: Tensor,
    num_parts: int,
    *,
    node_weights: Tensor | None = None,
    seed: int = 0,
) -> Tensor:
    """Assigns every node of a graph to one of ``num_parts`` parts with METIS.

    The graph may be directed, with self loops: METIS partitions its
    symmetrized version without self loops, minimizing the edges cut while
    keeping every weight column balanced within METIS's default tolerance
    (max/mean at most 1.03 per column on the graphs measured above).

    Args:
        rowptr: CSR row pointers, ``int64[num_nodes + 1]``.
        col: CSR column indices.
        num_parts: the number of parts, at least 1.
        node_weights: non-negative integer weights, ``[num_nodes]`` (one
            balance constraint) or ``[num_nodes, ncon]`` (``ncon``
            constraints, each balanced on its own); ``None``: one per node.
        seed: METIS's random seed (the result depends on nothing else).

    Returns:
        The part of every node, ``int64[num_nodes]``.

    Raises:
        ValueError: bad arguments; a graph too big for 32-bit METIS; several
            constraints with only ``pymetis`` installed.
        ImportError: no METIS binding installed.
        RuntimeError: METIS returned an error.

    Example:
        >>> rowptr = torch.tensor([0, 1, 2, 3, 4])
        >>> col = torch.tensor([1, 0, 3, 2])
        >>> weights = torch.tensor([[1, 1], [1, 0], [1, 1], [1, 0]])
        >>> parts = metis_parts(rowptr, col, 2, node_weights=weights)
        >>> sorted(parts.tolist())
        [0, 0, 1, 1]
    """
    if rowptr.dim() != 1 or rowptr.numel() < 1 or int(rowptr[-1]) != col.numel():
        raise ValueError(
            "rowptr and col must be a CSR: rowptr[num_nodes + 1] ending at len(col)"
        )
    num_nodes = rowptr.numel() - 1
    row = torch.repeat_interleave(torch.arange(num_nodes), rowptr.diff())
    return metis_edge_parts(
        row, col, num_nodes, num_parts, node_weights=node_weights, seed=seed
    )


def metis_edge_parts(
    src: Tensor,
    dst: Tensor,
    num_nodes: int,
    num_parts: int,
    *,
    node_weights: Tensor | None = None,
    seed: int = 0,
) -> Tensor:
    """:func:`metis_parts` of a graph given by its edges ``(src, dst)``.

    What :func:`~pyg_orch.distributed.partition.partition_graph` calls: the
    undirected adjacency METIS reads is built from the edges in one copy
    (Numba kernels), without sorting them first.

    Example:
        >>> src, dst = torch.tensor([0, 1, 2, 3]), torch.tensor([1, 0, 3, 2])
        >>> parts = metis_edge_parts(src, dst, 4, 2)
        >>> bool(parts[0] == parts[1]), bool(parts[2] == parts[3])
        (True, True)
    """
    if isinstance(num_parts, bool) or not isinstance(num_parts, int) or num_parts < 1:
        raise ValueError(f"num_parts must be an integer >= 1, got {num_parts!r}")
    if src.shape != dst.shape or src.dim() != 1:
        raise ValueError("src and dst must be 1-D and of one length: the edges")
    if dst.numel() and (int(dst.min()) < 0 or int(dst.max()) >= num_nodes):
        raise ValueError(f"dst (col) must hold node ids in [0, {num_nodes})")
    if src.numel() and (int(src.min()) < 0 or int(src.max()) >= num_nodes):
        raise ValueError(f"src must hold node ids in [0, {num_nodes})")
    weights = _weights(node_weights, num_nodes)
    ncon = 1 if weights is None else weights.size(1)
    binding = metis_binding(ncon)
    if num_parts == 1 or num_nodes <= 1:
        return torch.zeros(num_nodes, dtype=torch.long)
    start = time.perf_counter()
    xadj, adjncy = _symmetric(src, dst, num_nodes)
    if binding == "cmeel-metis":
        parts = _cmeel_parts(xadj, adjncy, num_parts, weights, seed)
    else:
        parts = _pymetis_parts(xadj, adjncy, num_parts, weights, seed)
    log.info(
        "METIS (%s): %d nodes, %d edges, %d constraints into %d parts in %.1f s",
        binding, num_nodes, adjncy.numel(), ncon, num_parts,
        time.perf_counter() - start,
    )  # fmt: skip
    return parts


def _int32(tensor: Tensor) -> np.ndarray:
    return np.ascontiguousarray(tensor.numpy(), dtype=np.int32)


def _pointer(array: np.ndarray) -> Any:
    return array.ctypes.data_as(ctypes.POINTER(ctypes.c_int32))


def _cmeel_parts(
    xadj: Tensor, adjncy: Tensor, num_parts: int, weights: Tensor | None, seed: int
) -> Tensor:
    num_nodes = xadj.numel() - 1
    if num_nodes > _INT32_MAX or adjncy.numel() > _INT32_MAX:
        raise ValueError(
            f"cmeel-metis has 32-bit indices: {num_nodes} nodes and "
            f"{adjncy.numel()} symmetrized edges exceed 2**31 - 1; partition "
            "with pymetis (64-bit, one balance constraint) instead"
        )
    metis = _cmeel_library()
    ncon = 1 if weights is None else weights.size(1)
    options = np.zeros(_METIS_NOPTIONS, dtype=np.int32)
    metis.METIS_SetDefaultOptions(_pointer(options))
    options[_METIS_OPTION_SEED] = seed % (_INT32_MAX + 1)
    arrays = {
        "nvtxs": np.array([num_nodes], dtype=np.int32),
        "ncon": np.array([ncon], dtype=np.int32),
        "xadj": _int32(xadj),
        "adjncy": _int32(adjncy),
        "nparts": np.array([num_parts], dtype=np.int32),
        "edgecut": np.zeros(1, dtype=np.int32),
        "part": np.zeros(num_nodes, dtype=np.int32),
    }
    vwgt = None
    if weights is not None:
        arrays["vwgt"] = _int32(weights.reshape(-1))  # kept alive for the call
        vwgt = _pointer(arrays["vwgt"])
    # Recursive bisection up to 8 parts, as pymetis and METIS's manual choose.
    partition = (
        metis.METIS_PartGraphRecursive
        if num_parts <= _RECURSIVE_PARTS
        else metis.METIS_PartGraphKway
    )
    status = partition(
        _pointer(arrays["nvtxs"]), _pointer(arrays["ncon"]), _pointer(arrays["xadj"]),
        _pointer(arrays["adjncy"]), vwgt, None, None, _pointer(arrays["nparts"]),
        None, None, _pointer(options), _pointer(arrays["edgecut"]),
        _pointer(arrays["part"]),
    )  # fmt: skip
    if status != _METIS_OK:
        raise RuntimeError(f"METIS partitioning failed with status {status}")
    return torch.from_numpy(arrays["part"].astype(np.int64))


def _pymetis_parts(
    xadj: Tensor, adjncy: Tensor, num_parts: int, weights: Tensor | None, seed: int
) -> Tensor:
    pymetis = _pymetis()
    result = pymetis.part_graph(
        num_parts,
        pymetis.CSRAdjacency(xadj.numpy(), adjncy.numpy()),
        vweights=None if weights is None else weights[:, 0].numpy(),
        recursive=num_parts <= _RECURSIVE_PARTS,
        options=pymetis.Options(seed=seed),
    )
    return torch.from_numpy(np.asarray(result.vertex_part, dtype=np.int64))
