"""The synthetic graph the benchmarks run on."""

from __future__ import annotations

import argparse
import time

from torch_geometric.data import Data

from pyg_orch.datasets import power_law_graph


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
    parser.add_argument("--num-nodes", type=int, default=num_nodes)
    parser.add_argument("--avg-degree", type=float, default=20.0)
    parser.add_argument("--num-features", type=int, default=num_features)
    parser.add_argument("--seed", type=int, default=0)


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
