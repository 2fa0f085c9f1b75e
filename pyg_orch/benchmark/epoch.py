"""Milliseconds per training batch of plain PyG and of pyg_orch at several hot
ratios, on one graph.

Node classification with GraphSAGE on a power-law graph by default; with
``--hetero``, ``to_hetero(GraphSAGE)`` on the ogbn-mag-shaped graph; with
``--link``, link prediction (see :mod:`pyg_orch.benchmark.tasks`). Splits
each batch into sampling, gathering and training time, and reports the peak
memory of each configuration (each runs in its own process). With
``--dgl-python``, DGL trains the same model on the same graph in its own
environment (see :mod:`pyg_orch.benchmark.dgl_peer`), for a row beside them.
The default run, on a 1M-node graph, takes several minutes on 2 CPU cores
(choosing the hot vertices alone takes about 25 s per hot ratio).
"""

from __future__ import annotations

import argparse
import resource
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import torch

from pyg_orch.allocator import KEEP_BYTES, keeps_freed_memory
from pyg_orch.benchmark import dgl_peer
from pyg_orch.benchmark.bf16_support import bf16_support
from pyg_orch.benchmark.graph import (
    BENCHMARK_DEFAULTS,
    add_graph_arguments,
    add_scale_argument,
)
from pyg_orch.benchmark.plot import BarChart
from pyg_orch.benchmark.spawned import run_spawned
from pyg_orch.benchmark.tasks import (
    BASELINES,
    configuration,
    graph,
    loss,
)
from pyg_orch.loading.stats import batch_stats
from pyg_orch.options import (
    add_option,
    hot_fraction,
    non_negative_int,
    positive_int,
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Adds this benchmark's options to ``parser``."""
    add_graph_arguments(parser)
    add_training_arguments(parser)
    parser.add_argument(
        "--hot-ratios",
        type=hot_fraction,
        nargs="+",
        default=[0.0, 0.1, 0.2],
        metavar="RATIO",
        help="the hot ratio of each pyg_orch row, in [0, 1] (default: 0 0.1 0.2)",
    )
    add_option(parser, "hot_method", BENCHMARK_DEFAULTS.hot_method)
    task = parser.add_mutually_exclusive_group()
    task.add_argument(
        "--hetero",
        action="store_true",
        help="classify the papers of the ogbn-mag-shaped heterogeneous graph "
        "with to_hetero(GraphSAGE) instead (default: off)",
    )
    task.add_argument(
        "--link",
        action="store_true",
        help="train GraphSAGE for link prediction instead (default: off)",
    )
    add_scale_argument(parser)
    parser.add_argument(
        "--batches",
        type=positive_int,
        default=20,
        help="timed batches per configuration (default: %(default)s)",
    )
    parser.add_argument(
        "--precisions",
        nargs="+",
        choices=["fp32", "bf16"],
        default=["fp32"],
        metavar="PRECISION",
        help="node task: also time plain PyG under torch.autocast and pyg_orch "
        "with precision= and feature_dtype= in each of these: fp32 or bf16 "
        "(default: fp32)",
    )
    parser.add_argument(
        "--dgl-python",
        metavar="PYTHON",
        help="node task: also time DGL on the same graph, run by this Python "
        "interpreter (one with dgl installed, in its own environment: DGL 2.1 "
        "needs torch <= 2.2.1; see pyg_orch.benchmark.dgl_peer) (default: off)",
    )


def add_training_arguments(parser: argparse.ArgumentParser) -> None:
    """Adds the training options the epoch, pipeline and gpu benchmarks share."""
    add_option(parser, "num_neighbors", list(BENCHMARK_DEFAULTS.num_neighbors))
    add_option(parser, "batch_size", BENCHMARK_DEFAULTS.batch_size)
    add_option(parser, "hidden_channels", BENCHMARK_DEFAULTS.hidden_channels)
    parser.add_argument(
        "--warmup",
        type=non_negative_int,
        default=3,
        metavar="BATCHES",
        help="untimed batches before the timed ones (default: %(default)s)",
    )


@dataclass
class Measurement:
    """Medians per batch of one configuration, and its peak memory."""

    name: str
    sample_ms: float
    gather_ms: float
    train_ms: float
    nodes: float
    edges: float
    gathered_mb: float
    peak_rss_mb: float
    setup_s: float
    # Whether the process kept freed memory for reuse (pyg_orch.allocator).
    kept_freed_memory: bool = False

    @property
    def total_ms(self) -> float:
        """Sample + gather + train."""
        return self.sample_ms + self.gather_ms + self.train_ms


def _measure(
    name: str,
    hot_ratio: float | None,
    graph_path: str,
    args: argparse.Namespace,
    precision: str = "fp32",
) -> Measurement:
    """Times sample / gather / train of each batch of one configuration.

    ``hot_ratio=None`` is the PyG baseline.
    """
    data = torch.load(graph_path, weights_only=False)
    torch.manual_seed(args.seed)
    start = time.perf_counter()
    task = task_of(args)
    loader, model, forward = configuration(task, data, args, hot_ratio, precision)
    setup_s = time.perf_counter() - start
    optimizer = torch.optim.Adam(model.parameters(), lr=0.003)
    rows: list[tuple[float, ...]] = []
    indices = iter(loader.batch_sampler)
    for step in range(args.warmup + args.batches):
        tick = time.perf_counter()
        # Unfiltered: the loaders here filter in the training process.
        out = loader.collate_fn(next(indices))
        sampled = time.perf_counter()
        batch = loader.filter_fn(out)
        gathered = time.perf_counter()
        optimizer.zero_grad()
        loss(task, forward(batch), batch).backward()
        optimizer.step()
        done = time.perf_counter()
        if step >= args.warmup:
            gathered_bytes = batch_stats(batch, 0.0, 0.0).bytes_gathered
            rows.append((
                sampled - tick, gathered - sampled, done - gathered,
                batch.num_nodes, batch.num_edges, gathered_bytes,
            ))  # fmt: skip
    medians = [statistics.median(column) for column in zip(*rows, strict=True)]
    peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return Measurement(
        name,
        1000 * medians[0],
        1000 * medians[1],
        1000 * medians[2],
        medians[3],
        medians[4],
        medians[5] / 2**20,
        peak_kb / 1024,
        setup_s,
        keeps_freed_memory(),
    )


def task_of(args: argparse.Namespace) -> str:
    """The task ``args`` ask for: ``"node"``, ``"hetero"`` or ``"link"``.

    Example:
        >>> task_of(argparse.Namespace(hetero=False, link=True))
        'link'
    """
    if getattr(args, "hetero", False):
        return "hetero"
    return "link" if getattr(args, "link", False) else "node"


def saved_name(args: argparse.Namespace) -> str:
    """The name ``--save`` gives this run's table: ``epoch``, ``epoch_hetero``...

    A node-task run with precisions other than fp32 is ``epoch_bf16``.

    Example:
        >>> saved_name(argparse.Namespace(hetero=True, link=False))
        'epoch_hetero'
        >>> saved_name(argparse.Namespace(precisions=["fp32", "bf16"]))
        'epoch_bf16'
    """
    task = task_of(args)
    if task != "node":
        return f"epoch_{task}"
    narrow = [p for p in getattr(args, "precisions", ["fp32"]) if p != "fp32"]
    return "_".join(["epoch", *narrow])


def _in_child(
    name: str,
    hot_ratio: float | None,
    graph_path: str,
    args: argparse.Namespace,
    precision: str,
) -> Measurement:
    # A fresh process per configuration, so that each peak RSS is its own.
    return run_spawned(_measure, name, hot_ratio, graph_path, args, precision)


def _configurations(task: str, args: argparse.Namespace) -> list[tuple]:
    # (name, hot ratio, precision) of each row: plain PyG first.
    rows = []
    for precision in getattr(args, "precisions", ["fp32"]):
        tag = "" if precision == "fp32" else f" {precision}"
        baseline = (
            BASELINES[task]
            if precision == "fp32"
            else f"PyG NeighborLoader + GraphSAGE, autocast {precision}"
        )
        rows.append((baseline, None, precision))
        rows += [
            (f"pyg_orch hot_ratio={ratio:g}{tag}", ratio, precision)
            for ratio in args.hot_ratios
        ]
    return rows


def run(args: argparse.Namespace) -> BarChart:
    """Builds the graph, measures each configuration and prints the table."""
    task = task_of(args)
    if task != "node" and getattr(args, "precisions", ["fp32"]) != ["fp32"]:
        raise ValueError("--precisions other than fp32: the node task only")
    dgl_python = getattr(args, "dgl_python", None)
    if task != "node" and dgl_python:
        raise ValueError("--dgl-python: the node task only")
    data, description = graph(task, args)
    print(
        f"{description}; {task} task; fan-outs {args.num_neighbors}, batch "
        f"{args.batch_size}, GraphSAGE hidden {args.hidden_channels}; medians of "
        f"{args.batches} "
        f"batches after {args.warmup} warm-up; {torch.get_num_threads()} threads",
        flush=True,
    )
    if "bf16" in getattr(args, "precisions", ["fp32"]):
        print(bf16_support(), flush=True)
    configurations = _configurations(task, args)
    with tempfile.TemporaryDirectory() as folder:
        graph_path = str(Path(folder) / "graph.pt")
        torch.save(data, graph_path)
        peers = [
            _dgl_row(dgl_python, data, args, precision)
            for precision in (
                getattr(args, "precisions", ["fp32"]) if dgl_python else []
            )
        ]
        del data
        results = [
            _in_child(name, ratio, graph_path, args, precision)
            for name, ratio, precision in configurations
        ]
    _print_table(results + peers)
    _print_against_autocast(configurations, results)
    orch = [r for r in results if r.name.startswith("pyg_orch")]
    for peer in peers:
        _print_against(peer, orch, peer.name, "its")
    results += peers
    return BarChart(
        "milliseconds per batch (median)",
        [r.name for r in results],
        {
            "sample": [r.sample_ms for r in results],
            "gather": [r.gather_ms for r in results],
            "train": [r.train_ms for r in results],
        },
        "ms per batch",
    )


def _dgl_row(
    python: str, data, args: argparse.Namespace, precision: str
) -> Measurement:
    # Measured first, before the spawned children, in DGL's own interpreter.
    fields = dgl_peer.measure(python, data, args, precision)
    print(f"DGL row: {fields.pop('versions')}, run by {python}", flush=True)
    return Measurement(**fields)


def _print_against(
    peer: Measurement, rows: list[Measurement], name: str, whose: str
) -> None:
    ratios = ", ".join(f"{r.name} {peer.total_ms / r.total_ms:.2f}x" for r in rows)
    print(f"against {name} ({whose} ms/batch over the row's): {ratios}")


def _print_against_autocast(
    configurations: list[tuple], results: list[Measurement]
) -> None:
    # pyg_orch in a precision against plain PyG under autocast in it (the
    # first row of each precision).
    rows: dict[str, list[Measurement]] = {}
    for (_, _, precision), result in zip(configurations, results, strict=True):
        rows.setdefault(precision, []).append(result)
    for precision, (baseline, *orch) in rows.items():
        if precision != "fp32":
            name = f"plain PyG under autocast {precision}"
            _print_against(baseline, orch, name, "its")


def _print_table(results: list[Measurement]) -> None:
    baseline = results[0]
    header = (
        f"{'configuration':<48}{'ms/batch':>9}{'sample':>8}{'gather':>8}"
        f"{'train':>8}{'nodes':>9}{'edges':>9}{'MB gath.':>9}{'peak MB':>9}"
        f"{'setup s':>8}{'speed-up':>9}{'memory':>8}"
    )
    print(header)
    for r in results:
        print(
            f"{r.name:<48}{r.total_ms:>9.1f}{r.sample_ms:>8.1f}{r.gather_ms:>8.1f}"
            f"{r.train_ms:>8.1f}{r.nodes:>9.0f}{r.edges:>9.0f}{r.gathered_mb:>9.1f}"
            f"{r.peak_rss_mb:>9.0f}{r.setup_s:>8.1f}"
            f"{baseline.total_ms / r.total_ms:>8.2f}x"
            f"{r.peak_rss_mb / baseline.peak_rss_mb:>7.2f}x"
        )
    print(
        "speed-up: baseline ms/batch over this row's; memory: this row's peak RSS "
        "over the baseline's (each configuration runs in its own spawned process)."
    )
    kept = [r.name for r in results if r.kept_freed_memory]
    if kept:
        print(
            f"allocator: glibc keeps freed blocks below {KEEP_BYTES >> 20} MiB "
            f"for reuse (pyg_orch.allocator) in {', '.join(kept)}; the C "
            f"library's default in the others"
        )
