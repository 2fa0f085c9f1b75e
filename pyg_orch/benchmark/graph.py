"""The synthetic graph the benchmarks run on, and their training settings."""

from __future__ import annotations

import argparse
import time

from torch_geometric.data import Data

from pyg_orch.datasets import power_law_graph
from pyg_orch.options import add_graph_options, add_option, positive_float
from pyg_orch.train_config import TrainConfig

#: The training options' defaults in the benchmarks: those of ``pyg-orch
#: train``, with batches of 1024 seeds for graphs of a million nodes.
BENCHMARK_DEFAULTS = TrainConfig(batch_size=1024)


def add_scale_argument(parser: argparse.ArgumentParser) -> None:
    """Adds ``--scale``, the ogbn-mag-shaped graph's size for ``--hetero``."""
    parser.add_argument(
        "--scale",
        type=positive_float,
        default=1.0,
        help="with --hetero: fraction of ogbn-mag's size; 1 is 1.9M nodes and "
        "42M edges with reverses (default: %(default)s)",
    )


def add_graph_arguments(
    parser: argparse.ArgumentParser, num_nodes: int = 1_000_000, num_features: int = 100
) -> None:
    """Adds the graph's options (and ``--seed``) to a benchmark's ``parser``.

    Example:
        >>> parser = argparse.ArgumentParser()
        >>> add_graph_arguments(parser)
        >>> parser.parse_args([]).avg_degree
        20.0
    """
    add_graph_options(parser, num_nodes, num_features)
    add_option(parser, "seed", 0)


def benchmark_graph(args: argparse.Namespace) -> tuple[Data, str]:
    """The power-law graph of ``args`` and a line that describes it.

    Uses ``args.num_nodes``, ``args.avg_degree``, ``args.num_features`` and
    ``args.seed``.

    Example:
        >>> args = argparse.Namespace(num_nodes=1000, avg_degree=4.0,
        ...                           num_features=8, seed=0)
        >>> data, line = benchmark_graph(args)
        >>> line.startswith("power-law graph: 1,000 nodes")
        True
    """
    start = time.perf_counter()
    data = power_law_graph(
        args.num_nodes,
        avg_degree=args.avg_degree,
        num_features=args.num_features,
        seed=args.seed,
    )
    return data, (
        f"power-law graph: {data.num_nodes:,} nodes, {data.num_edges:,} edges, "
        f"{data.num_features} features (built in {time.perf_counter() - start:.1f} s)"
    )
