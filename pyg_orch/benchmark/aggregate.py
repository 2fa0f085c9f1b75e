"""Hot-node aggregation: the Numba kernel against plain torch and torch.sparse.mm.

Times one aggregation over the in-edges of the hot vertices each way, then the
machine's memory bandwidth for scale, on a 1M-node power-law graph. With
``--dtype bfloat16`` (or ``float16``) the kernel reads half-width features
and is also timed on the same features in float32. The default run takes
about a minute on 2 CPU cores.
"""

from __future__ import annotations

import argparse
import warnings
from collections.abc import Callable

import numba
import numpy as np
import torch
from numba import njit, prange
from torch import Tensor
from torch_geometric.sampler.utils import to_csc

from pyg_orch.benchmark.graph import add_graph_arguments, benchmark_graph
from pyg_orch.benchmark.plot import BarChart
from pyg_orch.benchmark.timing import median_ms, time_calls
from pyg_orch.kernels.aggregate import AGGREGATIONS, aggregate, gcn_inverse_sqrt_degree
from pyg_orch.options import add_option, hot_fraction, positive_int

_BYTES_PER_FLOAT = 4
#: --dtype's choices: the features' dtype in the kernel.
DTYPES = {
    "float32": torch.float32,
    "bfloat16": torch.bfloat16,
    "float16": torch.float16,
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Adds this benchmark's options to ``parser``."""
    add_graph_arguments(parser)
    add_option(
        parser,
        "hot_ratio",
        0.2,
        type=hot_fraction,
        help="fraction of the vertices aggregated: those of highest in-degree, "
        "in [0, 1]",
    )
    parser.add_argument(
        "--kind",
        choices=sorted(AGGREGATIONS),
        default="mean",
        help="the aggregation (default: %(default)s)",
    )
    parser.add_argument(
        "--dtype",
        choices=list(DTYPES),
        default="float32",
        help="the features' dtype in the kernel; half widths are also timed "
        "in float32 (default: %(default)s)",
    )
    parser.add_argument(
        "--repeats",
        type=positive_int,
        default=7,
        help="timed calls per way, after one warm-up call (default: %(default)s)",
    )
    parser.add_argument(
        "--copy-gb",
        type=float,
        default=1.0,
        help="gigabytes copied and read by the memory bandwidth test "
        "(default: %(default)s)",
    )


def saved_name(args: argparse.Namespace) -> str:
    """The name ``--save`` gives this run's table: ``aggregate_bfloat16``...

    Example:
        >>> saved_name(argparse.Namespace(dtype="float32"))
        'aggregate'
    """
    return "aggregate" if args.dtype == "float32" else f"aggregate_{args.dtype}"


@njit(parallel=True, cache=True, nogil=True)
def _parallel_copy(src: np.ndarray, dst: np.ndarray) -> None:
    for i in prange(src.shape[0]):
        dst[i] = src[i]


@njit(parallel=True, cache=True, nogil=True, fastmath=True)
def _parallel_sum(src: np.ndarray) -> float:
    # fastmath lets the reduction vectorise, so this runs at memory speed.
    total = np.float32(0.0)
    for i in prange(src.shape[0]):
        total += src[i]
    return total


def _memory_bandwidths(gigabytes: float, repeats: int) -> dict[str, float]:
    """GB/s of streaming copies (read + write bytes) and of a streaming read."""
    src = np.ones(int(gigabytes * 1e9) // _BYTES_PER_FLOAT, np.float32)
    dst = np.ones_like(src)
    threads = f"Numba prange, {numba.get_num_threads()} threads"
    ways = {
        "copy (np.copyto, 1 thread)": (2, lambda: np.copyto(dst, src)),
        f"copy ({threads})": (2, lambda: _parallel_copy(src, dst)),
        f"read ({threads})": (1, lambda: _parallel_sum(src)),
    }
    return {
        name: passes * src.nbytes / median_ms(time_calls(call, repeats)) / 1e6
        for name, (passes, call) in ways.items()
    }


def _hot_edges(
    colptr: Tensor, row: Tensor, hot: Tensor
) -> tuple[Tensor, Tensor, Tensor]:
    """CSR pointers, sources and destination positions of the hot in-edges."""
    degree = colptr[hot + 1] - colptr[hot]
    ptr = torch.zeros(hot.numel() + 1, dtype=torch.long)
    ptr[1:] = degree.cumsum(0)
    edge = torch.repeat_interleave(colptr[hot] - ptr[:-1], degree)
    edge += torch.arange(edge.numel())
    dst = torch.repeat_interleave(torch.arange(hot.numel()), degree)
    return ptr, row[edge].long(), dst


def _gcn_edges(
    ptr: Tensor, src: Tensor, dst: Tensor, hot: Tensor, scale: Tensor
) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """gcn_norm's hot in-edges: own self loops out, one per node in, weighted."""
    keep = src != hot[dst]
    loops = torch.arange(hot.numel())
    src = torch.cat([src[keep], hot])
    dst = torch.cat([dst[keep], loops])
    order = torch.sort(dst, stable=True).indices
    src, dst = src[order], dst[order]
    ptr = torch.zeros_like(ptr)
    ptr[1:] = torch.bincount(dst, minlength=hot.numel()).cumsum(0)
    return ptr, src, dst, scale[src] * scale[hot[dst]]


def _torch_way(
    x: Tensor, src: Tensor, dst: Tensor, weight: Tensor | None, kind: str, size: int
) -> Callable[[], Tensor]:
    """What PyG does: one message row per edge, then a scatter onto the nodes."""
    shape = (size, x.size(1))
    degree = torch.bincount(dst, minlength=size).clamp(min=1).unsqueeze(1).float()

    def call() -> Tensor:
        message = x.index_select(0, src)
        if kind == "max":
            index = dst.unsqueeze(1).expand_as(message)
            return x.new_zeros(shape).scatter_reduce_(
                0, index, message, "amax", include_self=False
            )
        if weight is not None:
            message.mul_(weight.unsqueeze(1))
        out = x.new_zeros(shape).index_add_(0, dst, message)
        return out.div_(degree) if kind == "mean" else out

    return call


def _sparse_way(
    x: Tensor, ptr: Tensor, src: Tensor, weight: Tensor, size: int
) -> Callable[[], Tensor]:
    """``torch.sparse.mm`` with a CSR matrix of the hot rows (built here, once)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "Sparse CSR tensor support is in beta")
        matrix = torch.sparse_csr_tensor(
            ptr, src, weight, (size, x.size(0)), check_invariants=False
        )
    return lambda: torch.sparse.mm(matrix, x)


def run(args: argparse.Namespace) -> BarChart:
    """Builds the graph, times each way of aggregating and prints the table."""
    data, description = benchmark_graph(args)
    colptr, row, _ = to_csc(data, device="cpu")
    x = data.x.contiguous()
    print(
        f"{description}; {numba.get_num_threads()} Numba / "
        f"{torch.get_num_threads()} torch threads"
    )
    num_hot = max(1, round(args.hot_ratio * data.num_nodes))
    hot = torch.sort(torch.topk(colptr[1:] - colptr[:-1], num_hot).indices).values
    ways, num_edges = _ways(colptr, row, x, hot, args.kind)
    dtype = DTYPES[args.dtype]
    if dtype != torch.float32:
        ways = {**_half_width_way(colptr, row, x.to(dtype), hot, args.kind), **ways}
    width = x.size(1)
    read = dtype.itemsize
    moved = num_edges * width * read + num_hot * width * _BYTES_PER_FLOAT
    print(
        f"hot set: top {args.hot_ratio:.0%} by in-degree = {num_hot:,} nodes (in id "
        f"order) with {num_edges:,} in-edges; kind {args.kind}; median of "
        f"{args.repeats} calls after a warm-up call, each way in turn"
    )
    if dtype == torch.float32:
        print(
            f"bytes moved = (in-edges + hot nodes) x features x 4 B = "
            f"({num_edges:,} + {num_hot:,}) x {width} x 4 B = {moved / 1e9:.2f} GB "
            f"(one row read per in-edge, one row write per hot node)"
        )
    else:
        print(
            f"bytes moved = in-edges x features x {read} B ({args.dtype}) + hot "
            f"nodes x features x 4 B = {num_edges:,} x {width} x {read} B + "
            f"{num_hot:,} x {width} x 4 B = {moved / 1e9:.2f} GB (one row read "
            f"per in-edge, one float32 row write per hot node); GB/s below counts "
            f"these bytes for every way, the float32 ones move "
            f"{(num_edges + num_hot) * width * 4 / 1e9:.2f} GB"
        )
    milliseconds = _print_table(ways, moved, args)
    return BarChart(
        f"hot aggregation ({args.kind}), {args.num_nodes:,} nodes",
        list(milliseconds),
        {"ms": list(milliseconds.values())},
        "ms per call (median)",
    )


def _half_width_way(
    colptr: Tensor, row: Tensor, x: Tensor, hot: Tensor, kind: str
) -> dict[str, Callable[[], Tensor]]:
    """The kernel on half-width features (read as their bits)."""
    bits = x.view(torch.uint16 if x.dtype == torch.bfloat16 else torch.int16)
    out = np.empty((hot.numel(), x.size(1)), np.float32)
    args = (colptr.numpy(), row.numpy(), bits.numpy(), hot.numpy())
    name = f"pyg_orch kernel (Numba, {str(x.dtype).removeprefix('torch.')})"
    return {name: lambda: torch.from_numpy(aggregate(*args, kind, out))}


def _ways(
    colptr: Tensor, row: Tensor, x: Tensor, hot: Tensor, kind: str
) -> tuple[dict[str, Callable[[], Tensor]], int]:
    """The ways to time, kernel first, and the number of hot in-edges."""
    scale = gcn_inverse_sqrt_degree(colptr.numpy(), row.numpy())
    out = np.empty((hot.numel(), x.size(1)), np.float32)
    kernel_args = (colptr.numpy(), row.numpy(), x.numpy(), hot.numpy())
    ways = {
        "pyg_orch kernel (Numba)": lambda: torch.from_numpy(
            aggregate(*kernel_args, kind, out, scale)
        )
    }
    ptr, src, dst = _hot_edges(colptr, row, hot)
    num_edges = src.numel()
    if kind == "gcn":
        ptr, src, dst, weight = _gcn_edges(ptr, src, dst, hot, torch.from_numpy(scale))
    else:
        degree = (ptr[1:] - ptr[:-1]).clamp(min=1).float()
        weight = torch.ones(num_edges) if kind == "sum" else 1.0 / degree[dst]
    # PyG's sum and mean scatter raw rows (the mean divides afterwards): only
    # GCN weighs messages. The weights always fill the CSR matrix.
    ways["torch index_select + index_add_"] = _torch_way(
        x, src, dst, weight if kind == "gcn" else None, kind, hot.numel()
    )
    if kind != "max":
        ways["torch.sparse.mm (CSR)"] = _sparse_way(x, ptr, src, weight, hot.numel())
    return ways, num_edges


def _print_table(
    ways: dict[str, Callable[[], Tensor]], moved: int, args: argparse.Namespace
) -> dict[str, float]:
    """Times every way, checks they agree, prints their rows and the copy rows.

    Returns the median milliseconds of each way.
    """
    results = {name: call().clone() for name, call in ways.items()}  # warm-up
    seconds: dict[str, list[float]] = {name: [] for name in ways}
    for _ in range(args.repeats):
        # A call of each way per round: drift on a shared machine hits all.
        for name, call in ways.items():
            seconds[name] += time_calls(call, 1, warmup=0)
    milliseconds = {name: median_ms(times) for name, times in seconds.items()}
    kernel_name = next(iter(ways))
    kernel = results[kernel_name]
    print(f"{'way':<34}{'ms':>10}{'GB/s':>8}{'torch/kernel':>14}{'max rel diff':>14}")
    for name, ms in milliseconds.items():
        ratio = f"{ms / milliseconds[kernel_name]:.2f}x"
        diff = (results[name] - kernel).abs().max() / kernel.abs().max().clamp(min=1)
        print(
            f"{name:<34}{ms:>10.1f}{moved / ms / 1e6:>8.1f}{ratio:>14}"
            f"{diff.item():>14.1e}"
        )
    kernel_bandwidth = moved / milliseconds[kernel_name] / 1e6
    for name, bandwidth in _memory_bandwidths(args.copy_gb, args.repeats).items():
        print(
            f"memory {name}: {bandwidth:.1f} GB/s (of {args.copy_gb:g} GB); "
            f"kernel at {kernel_bandwidth / bandwidth:.0%} of it"
        )
    print("max rel diff: max |way - kernel| / max |kernel|, over all outputs.")
    print(
        "Every way reads the same rows in the same order; above 100% of the "
        "streaming read, part of them come from cache."
    )
    if args.kind == "max":
        print("torch.sparse.mm: no max reduction, so not measured.")
    else:
        print("torch.sparse.mm: CSR matrix of the hot rows built once, outside timing.")
    return milliseconds
