"""Seconds per epoch on a GPU: PyG's baseline and pyg_orch's three cache modes,
with and without the device caches, and how busy the device was.

Each of the 7 configurations trains in its own process. The default run trains
a whole epoch of a 1M-node power-law graph in each: minutes on a GPU, more than
an hour on 2 CPU cores, where ``--num-nodes 100000 --batches 20`` takes about 2
minutes.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import torch
from torch_geometric.data import Data

from pyg_orch.benchmark.epoch import add_training_arguments
from pyg_orch.benchmark.graph import add_graph_arguments, benchmark_graph
from pyg_orch.benchmark.plot import BarChart
from pyg_orch.benchmark.spawned import run_spawned
from pyg_orch.benchmark.tasks import BASELINES, baseline, graph_sage, loader_arguments
from pyg_orch.benchmark.training import EpochTiming, timed_epoch
from pyg_orch.loading.node_loader import OrchNeighborLoader
from pyg_orch.nn.model import OrchModel
from pyg_orch.nn.model_checks import PRECISIONS
from pyg_orch.options import add_option, hot_fraction, positive_int
from pyg_orch.train import resolve_device

MODES = ("static", "resample", "embedding")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Adds this benchmark's options to ``parser``."""
    add_graph_arguments(parser)
    add_training_arguments(parser)
    add_option(
        parser,
        "hot_ratio",
        0.2,
        type=hot_fraction,
        help="fraction of the vertices made hot, in [0, 1]",
    )
    add_option(parser, "prefetch", 4)
    parser.add_argument(
        "--super-batch",
        type=positive_int,
        default=8,
        metavar="BATCHES",
        help="batches served by one re-sampled or embedded buffer "
        "(default: %(default)s)",
    )
    parser.add_argument(
        "--modes",
        nargs="+",
        choices=MODES,
        default=list(MODES),
        help="the cache modes measured (default: static resample embedding)",
    )
    add_option(parser, "device_cache", "auto")
    add_option(parser, "device", "auto")
    parser.add_argument(
        "--precision",
        choices=["fp32", "bf16"],
        default="fp32",
        help="bf16: the baseline under torch.autocast(bfloat16), pyg_orch with "
        "precision='bf16' and bfloat16 features, so that half the bytes are "
        "copied to the device (default: fp32)",
    )
    parser.add_argument(
        "--batches",
        type=positive_int,
        default=None,
        help="most batches per epoch (default: all of them)",
    )


@dataclass
class Row:
    """One configuration's epoch."""

    name: str
    timing: EpochTiming
    setup_s: float
    cached_rows: int


def _setup(data: Data, hot: torch.Tensor, mode: str | None, cached: bool, args):
    # The loader, the model and its forward function of one configuration.
    device = resolve_device(args.device)
    if mode is None:
        loader, model, forward = baseline(data, args, args.precision)
        return loader, model.to(device), forward
    loader = OrchNeighborLoader(
        data,
        hot=hot,
        cache=mode,
        super_batch=args.super_batch,
        prefetch=args.prefetch,
        device=device,
        device_cache=args.device_cache if cached else 0,
        feature_dtype=PRECISIONS[args.precision],
        **loader_arguments(data, args),
    )
    model = OrchModel(
        graph_sage(data, args).to(device), loader, precision=args.precision
    )
    return loader, model, model


def _measure(
    name: str, mode: str | None, cached: bool, path: str, args: argparse.Namespace
) -> Row:
    stored = torch.load(path)
    hot, data = stored.pop("hot"), Data(**stored)
    torch.manual_seed(args.seed)
    start = time.perf_counter()
    loader, model, forward = _setup(data, hot, mode, cached, args)
    setup_s = time.perf_counter() - start
    optimizer = torch.optim.Adam(model.parameters(), lr=0.003)
    device = resolve_device(args.device)
    timed_epoch(loader, forward, optimizer, device, max_batches=args.warmup)
    timing = timed_epoch(loader, forward, optimizer, device, args.batches)
    features = getattr(loader, "feature_cache", None)
    return Row(name, timing, setup_s, features.num_rows if features else 0)


def _in_child(name: str, mode, cached: bool, path: str, args) -> Row:
    # A fresh process per configuration: its own device memory and caches.
    return run_spawned(_measure, name, mode, cached, path, args)


def run(args: argparse.Namespace) -> BarChart:
    """Trains one epoch per configuration and prints the table."""
    device = resolve_device(args.device)
    data, description = benchmark_graph(args)
    torch.manual_seed(args.seed)
    hot = OrchNeighborLoader(
        data, hot_ratio=args.hot_ratio, **loader_arguments(data, args)
    ).hot.nodes
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU"
    print(
        f"{description}; fan-outs {args.num_neighbors}, batch {args.batch_size}, "
        f"GraphSAGE hidden {args.hidden_channels}; hot_ratio {args.hot_ratio:g}, "
        f"prefetch {args.prefetch}, super-batch {args.super_batch}; precision "
        f"{args.precision}; device "
        f"{name}; {'one epoch' if args.batches is None else f'{args.batches} batches'}"
        f" after {args.warmup} warm-up batches",
        flush=True,
    )
    configurations = [(BASELINES["node"], None, False)] + [
        (f"pyg_orch {mode}{', device caches' if cached else ''}", mode, cached)
        for mode in args.modes
        for cached in (False, True)
    ]
    with tempfile.TemporaryDirectory() as folder:
        path = str(Path(folder) / "graph.pt")
        torch.save({**data.to_dict(), "hot": hot}, path)
        del data
        rows = []
        for configuration in configurations:
            rows.append(_in_child(*configuration, path, args))
            _print_row(rows[-1], rows[0], header=len(rows) == 1)
    print(
        "epoch s: wall time of the epoch (or of --batches batches); speed-up: "
        "the baseline's over this row's; busy: training-step (device) time over "
        "wall time; cached rows: feature rows in the device cache."
    )
    if device.type != "cuda":
        print("No GPU: this ran on the CPU, so the GPU goals do not apply.")
    return BarChart(
        f"seconds per epoch ({name})",
        [row.name for row in rows],
        {"epoch s": [row.timing.wall_seconds for row in rows]},
        "s",
    )


def _print_row(row: Row, reference: Row, header: bool) -> None:
    if header:
        print(
            f"{'configuration':<48}{'epoch s':>9}{'ms/batch':>9}{'busy':>7}"
            f"{'speed-up':>9}{'cached rows':>12}{'setup s':>8}"
        )
    timing = row.timing
    print(
        f"{row.name:<48}{timing.wall_seconds:>9.2f}{timing.ms_per_batch:>9.1f}"
        f"{timing.busy:>7.0%}"
        f"{reference.timing.wall_seconds / timing.wall_seconds:>8.2f}x"
        f"{row.cached_rows:>12,}{row.setup_s:>8.1f}",
        flush=True,
    )
