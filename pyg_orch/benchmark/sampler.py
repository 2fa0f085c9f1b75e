"""Batches per second of the Numba sampler against torch-sparse's and pyg-lib's.

Samples the same seed batches with each sampler that is installed, on a
200,000-node power-law graph (the features are never read). The default run
takes about half a minute on 2 CPU cores.
"""

from __future__ import annotations

import argparse
import importlib
import itertools
from collections.abc import Callable

import torch
from torch_geometric.sampler import NodeSamplerInput

from pyg_orch.benchmark.graph import (
    BENCHMARK_DEFAULTS,
    add_graph_arguments,
    benchmark_graph,
)
from pyg_orch.benchmark.timing import median_ms, time_calls
from pyg_orch.options import add_option, positive_int
from pyg_orch.sampling import OrchNeighborSampler


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Adds this benchmark's options to ``parser``."""
    add_graph_arguments(parser, num_nodes=200_000, num_features=1)
    add_option(parser, "num_neighbors", list(BENCHMARK_DEFAULTS.num_neighbors))
    add_option(
        parser,
        "batch_size",
        BENCHMARK_DEFAULTS.batch_size,
        help="seed nodes per sampled batch",
    )
    parser.add_argument(
        "--batches",
        type=positive_int,
        default=50,
        help="timed batches per sampler (default: %(default)s)",
    )


# Compiled samplers PyG can use: module to import, op, and the arguments after
# (colptr, row, seed, fanouts) that PyG passes for a CSC graph, directional
# sampling without replacement.
_EXTENSIONS = {
    "torch-sparse": (
        "torch_sparse",
        ("torch_sparse", "neighbor_sample"),
        (False, True),
        {},
    ),
    "pyg-lib": ("pyg_lib", ("pyg", "neighbor_sample"), (), {"csc": True}),
}


def _extension_sampler(sampler: OrchNeighborSampler, name: str) -> Callable | None:
    """The compiled sampler ``name`` on ``sampler``'s graph, or ``None`` if absent."""
    module, (namespace, op_name), extra, keywords = _EXTENSIONS[name]
    try:
        importlib.import_module(module)
        op = getattr(getattr(torch.ops, namespace), op_name)
    except (ImportError, OSError, AttributeError, RuntimeError):
        return None
    fanouts = list(sampler.num_neighbors.get_mapped_values())
    return lambda seed: op(
        sampler.colptr, sampler.row, seed, fanouts, *extra, **keywords
    )


def run(args: argparse.Namespace) -> None:
    """Builds the graph, times each available sampler and prints the table."""
    data, description = benchmark_graph(args)
    print(
        f"{description}; fan-outs "
        f"{args.num_neighbors}, batch {args.batch_size}, {args.batches} batches, "
        f"{torch.get_num_threads()} threads"
    )
    sampler = OrchNeighborSampler(data, num_neighbors=args.num_neighbors)
    generator = torch.Generator().manual_seed(args.seed)
    seeds = [
        torch.randint(data.num_nodes, (args.batch_size,), generator=generator)
        for _ in range(args.batches)
    ]

    def batches(sample: Callable) -> Callable[[], object]:
        queue = itertools.cycle(seeds)
        return lambda: sample(next(queue))

    def numba_sample(seed: torch.Tensor) -> object:
        return sampler.sample_from_nodes(NodeSamplerInput(input_id=None, node=seed))

    candidates = {
        "pyg_orch (Numba)": numba_sample,
        **{name: _extension_sampler(sampler, name) for name in _EXTENSIONS},
    }
    print(f"{'sampler':<20}{'ms/batch':>10}{'batches/s':>12}{'vs torch-sparse':>18}")
    results = {}
    for name, sample in candidates.items():
        if sample is None:
            continue
        results[name] = median_ms(time_calls(batches(sample), args.batches))
    reference = results.get("torch-sparse")
    for name, milliseconds in results.items():
        ratio = f"{reference / milliseconds:.1f}x" if reference else "n/a"
        print(f"{name:<20}{milliseconds:>10.2f}{1000 / milliseconds:>12.1f}{ratio:>18}")
    for name in ("torch-sparse", "pyg-lib"):
        if name not in results:
            print(f"{name}: not installed, so not measured (no ratio).")
