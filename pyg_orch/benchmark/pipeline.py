"""Milliseconds per batch with and without prefetching, and the overlap achieved.

Trains a few batches in each cache mode with ``prefetch=0`` and with
``--prefetch``, on a 1M-node power-law graph, and reports how much of the
sampling and gathering hid under training. The default run takes about 2
minutes on 2 CPU cores.
"""

from __future__ import annotations

import argparse

import torch
from torch_geometric.data import Data

from pyg_orch.benchmark.epoch import add_training_arguments
from pyg_orch.benchmark.graph import add_graph_arguments, benchmark_graph
from pyg_orch.benchmark.plot import BarChart
from pyg_orch.benchmark.tasks import graph_sage, loader_arguments
from pyg_orch.benchmark.training import EpochTiming, timed_epoch
from pyg_orch.hot.choice import HotSet
from pyg_orch.loading.node_loader import OrchNeighborLoader
from pyg_orch.nn.model import OrchModel
from pyg_orch.options import add_option, hot_fraction, positive_int


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Adds this benchmark's options to ``parser``."""
    add_graph_arguments(parser)
    add_training_arguments(parser)
    add_option(
        parser,
        "hot_ratio",
        0.2,
        type=hot_fraction,
        help="fraction of the vertices made hot, in [0, 1] (0: no hot vertices, "
        "static rows only)",
    )
    parser.add_argument(
        "--caches",
        nargs="+",
        choices=("static", "resample"),
        default=["static", "resample"],
        help="the cache modes measured (default: static resample)",
    )
    add_option(
        parser,
        "prefetch",
        2,
        type=positive_int,
        help="batches prepared ahead in the prefetch rows",
    )
    parser.add_argument(
        "--batches",
        type=positive_int,
        default=20,
        help="timed batches per configuration (default: %(default)s)",
    )


def _measure(
    data: Data, hot: HotSet | None, cache: str, prefetch: int, args: argparse.Namespace
) -> EpochTiming:
    torch.manual_seed(args.seed)
    loader = OrchNeighborLoader(
        data,
        hot=hot,
        cache=cache if hot is not None else None,
        prefetch=prefetch,
        **loader_arguments(data, args),
    )
    model = OrchModel(graph_sage(data, args), loader)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.003)
    cpu = torch.device("cpu")
    timed_epoch(loader, model, optimizer, cpu, max_batches=args.warmup)
    loader.stats.reset()

    def cpu_seconds() -> float:
        # Sampling and gathering, in whichever thread ran them.
        totals = loader.stats.totals()
        return totals["sample_seconds"] + totals["gather_seconds"]

    return timed_epoch(loader, model, optimizer, cpu, args.batches, cpu_seconds)


def run(args: argparse.Namespace) -> BarChart:
    """Trains each configuration for a few batches and prints the table."""
    data, description = benchmark_graph(args)
    print(
        f"{description}; fan-outs {args.num_neighbors}, batch {args.batch_size}, "
        f"GraphSAGE hidden {args.hidden_channels}, hot_ratio {args.hot_ratio:g}; "
        f"{args.batches} batches after {args.warmup} warm-up; "
        f"{torch.get_num_threads()} threads",
        flush=True,
    )
    hot = None
    if args.hot_ratio > 0:
        torch.manual_seed(args.seed)
        loader = OrchNeighborLoader(
            data, hot_ratio=args.hot_ratio, **loader_arguments(data, args)
        )
        hot = loader.hot
    print(
        f"{'configuration':<34}{'ms/batch':>9}{'cpu ms':>8}{'train ms':>9}"
        f"{'overlap':>8}{'speed-up':>9}"
    )
    chart = BarChart("milliseconds per batch", [], {"ms per batch": []}, "ms")
    for cache in args.caches if hot is not None else ["static"]:
        without = None
        for prefetch in (0, args.prefetch):
            timing = _measure(data, hot, cache, prefetch, args)
            without = without or timing
            name = f"{cache}, prefetch={prefetch}"
            chart.labels.append(name)
            chart.series["ms per batch"].append(timing.ms_per_batch)
            print(
                f"{name:<34}{timing.ms_per_batch:>9.1f}"
                f"{1000 * timing.cpu_seconds / timing.batches:>8.1f}"
                f"{1000 * timing.train_seconds / timing.batches:>9.1f}"
                f"{timing.overlap:>8.0%}"
                f"{without.ms_per_batch / timing.ms_per_batch:>8.2f}x",
                flush=True,
            )
    print(
        "cpu ms: sampling and gathering per batch (in the producer thread with "
        "prefetch); overlap: share of the shorter of cpu and train work hidden "
        "under the other; speed-up: prefetch=0's ms/batch over this row's."
    )
    return chart
