"""Milliseconds per training batch of PyG's NeighborLoader + GraphSAGE and of
pyg_orch at several hot ratios, on one power-law graph.

Splits each batch into sampling, gathering and training time, and reports the
peak memory of each configuration (each runs in its own process). The default
run, on a 1M-node graph, takes several minutes on 2 CPU cores (choosing the
hot vertices alone takes about 25 s per hot ratio).
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
import torch.nn.functional as F
from torch_geometric.data import Data
from torch_geometric.loader import NeighborLoader
from torch_geometric.nn import GraphSAGE

from pyg_orch.benchmark.graph import (
    BENCHMARK_DEFAULTS,
    add_graph_arguments,
    benchmark_graph,
)
from pyg_orch.benchmark.plot import BarChart
from pyg_orch.benchmark.spawned import run_spawned
from pyg_orch.loader import OrchNeighborLoader
from pyg_orch.model import OrchModel
from pyg_orch.options import add_option, hot_fraction, non_negative_int, positive_int
from pyg_orch.sampling import OrchNeighborSampler

BASELINE = "PyG NeighborLoader + GraphSAGE (trim_to_layer)"


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
    parser.add_argument(
        "--batches",
        type=positive_int,
        default=20,
        help="timed batches per configuration (default: %(default)s)",
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

    @property
    def total_ms(self) -> float:
        """Sample + gather + train."""
        return self.sample_ms + self.gather_ms + self.train_ms


def loader_arguments(data: Data, args: argparse.Namespace) -> dict:
    """What the baseline and pyg_orch share: seeds, fan-outs and batches."""
    return {
        "num_neighbors": args.num_neighbors,
        "input_nodes": data.train_mask,
        "batch_size": args.batch_size,
        "shuffle": True,
    }


def baseline(data: Data, args: argparse.Namespace):
    """PyG's ``NeighborLoader`` and ``GraphSAGE`` with ``trim_to_layer``.

    Returns the loader, the model and the forward function of a batch.
    """
    # PyG cannot sample here without pyg-lib or torch-sparse: hand it ours.
    sampler = OrchNeighborSampler(data, num_neighbors=args.num_neighbors)
    loader = NeighborLoader(
        data, neighbor_sampler=sampler, **loader_arguments(data, args)
    )
    model = graph_sage(data, args)

    def forward(batch: Data) -> torch.Tensor:
        return model(
            batch.x,
            batch.edge_index,
            num_sampled_nodes_per_hop=batch.num_sampled_nodes,
            num_sampled_edges_per_hop=batch.num_sampled_edges,
        )[: batch.batch_size]

    return loader, model, forward


def _orch(data: Data, args: argparse.Namespace, hot_ratio: float):
    loader = OrchNeighborLoader(
        data, hot_ratio=hot_ratio, hot_method=args.hot_method,
        **loader_arguments(data, args),
    )  # fmt: skip
    model = OrchModel(graph_sage(data, args), loader)
    return loader, model, model


def graph_sage(data: Data, args: argparse.Namespace) -> GraphSAGE:
    """The benchmarks' GraphSAGE: one layer per fan-out, ``args.hidden_channels``."""
    return GraphSAGE(
        data.num_features,
        args.hidden_channels,
        num_layers=len(args.num_neighbors),
        out_channels=int(data.y.max()) + 1,
    )


def _measure(
    name: str, hot_ratio: float | None, graph_path: str, args: argparse.Namespace
) -> Measurement:
    """Times sample / gather / train of each batch of one configuration.

    ``hot_ratio=None`` is the PyG baseline.
    """
    data = Data(**torch.load(graph_path))
    torch.manual_seed(args.seed)
    start = time.perf_counter()
    if hot_ratio is None:
        loader, model, forward = baseline(data, args)
    else:
        loader, model, forward = _orch(data, args, hot_ratio)
    setup_s = time.perf_counter() - start
    optimizer = torch.optim.Adam(model.parameters(), lr=0.003)
    rows: list[tuple[float, ...]] = []
    indices = iter(loader.batch_sampler)
    for step in range(args.warmup + args.batches):
        tick = time.perf_counter()
        out = loader.node_sampler.sample_from_nodes(loader.input_data[next(indices)])
        sampled = time.perf_counter()
        batch = loader.filter_fn(out)
        gathered = time.perf_counter()
        optimizer.zero_grad()
        loss = F.cross_entropy(forward(batch), batch.y[: batch.batch_size])
        loss.backward()
        optimizer.step()
        done = time.perf_counter()
        if step >= args.warmup:
            gathered_bytes = batch.x.numel() * batch.x.element_size()
            if "hot_agg" in batch:
                gathered_bytes += batch.hot_agg.numel() * batch.hot_agg.element_size()
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
    )


def _in_child(
    name: str, hot_ratio: float | None, graph_path: str, args: argparse.Namespace
) -> Measurement:
    # A fresh process per configuration, so that each peak RSS is its own.
    return run_spawned(_measure, name, hot_ratio, graph_path, args)


def run(args: argparse.Namespace) -> BarChart:
    """Builds the graph, measures each configuration and prints the table."""
    data, description = benchmark_graph(args)
    print(
        f"{description}; fan-outs {args.num_neighbors}, batch {args.batch_size}, "
        f"GraphSAGE hidden {args.hidden_channels}; medians of {args.batches} "
        f"batches after {args.warmup} warm-up; {torch.get_num_threads()} threads",
        flush=True,
    )
    configurations = [(BASELINE, None)] + [
        (f"pyg_orch hot_ratio={ratio:g}", ratio) for ratio in args.hot_ratios
    ]
    with tempfile.TemporaryDirectory() as folder:
        graph_path = str(Path(folder) / "graph.pt")
        torch.save(data.to_dict(), graph_path)
        del data
        results = [
            _in_child(name, ratio, graph_path, args) for name, ratio in configurations
        ]
    _print_table(results)
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
