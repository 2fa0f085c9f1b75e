"""The training step of one batch: pyg_orch's aggregation against PyG's, profiled.

Times the forward, backward and Adam step of GraphSAGE on the same batches of
the power-law graph two ways, interleaved batch by batch so that both see the
same machine: ``OrchModel`` aggregating with pyg_orch's kernels, and the same
``OrchModel`` with every conv run through PyG's ``propagate``
(``torch.sparse.mm`` on a CSR adjacency; a conv with a hook takes that path).
Then profiles pyg_orch's steps with the torch profiler and splits their time
into matrix products (the floor: the same products in any implementation),
aggregation, and the rest. The default run takes about two minutes on 2 CPU
cores, most of it choosing the hot vertices.
"""

from __future__ import annotations

import argparse
import itertools
import time
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch.profiler import ProfilerActivity, profile
from torch_geometric.data import Data

from pyg_orch.benchmark.graph import (
    BENCHMARK_DEFAULTS,
    add_graph_arguments,
    benchmark_graph,
)
from pyg_orch.benchmark.plot import BarChart
from pyg_orch.benchmark.tasks import graph_sage, loader_arguments
from pyg_orch.benchmark.timing import median_ms
from pyg_orch.loading.node_loader import OrchNeighborLoader
from pyg_orch.nn.model import OrchModel
from pyg_orch.options import add_option, hot_fraction, positive_int

# Profiler rows by what they are: the products, pyg_orch's aggregation.
_PRODUCTS = ("aten::mm", "aten::addmm", "aten::addmm_", "aten::bmm")
_AGGREGATION = ("_Aggregate", "_AggregateBackward")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Adds this benchmark's options to ``parser``."""
    add_graph_arguments(parser)
    for name in ("num_neighbors", "batch_size", "hidden_channels"):
        default = getattr(BENCHMARK_DEFAULTS, name)
        add_option(parser, name, list(default) if name == "num_neighbors" else default)
    add_option(parser, "hot_ratio", 0.2, type=hot_fraction)
    add_option(parser, "hot_method", BENCHMARK_DEFAULTS.hot_method)
    parser.add_argument(
        "--batches",
        type=positive_int,
        default=8,
        help="batches, each timed once per way (default: %(default)s)",
    )
    parser.add_argument(
        "--rounds",
        type=positive_int,
        default=3,
        help="passes over the batches (default: %(default)s)",
    )


def run(args: argparse.Namespace) -> BarChart:
    """Builds the graph and batches, times both ways, profiles, prints."""
    data, description = benchmark_graph(args)
    torch.manual_seed(args.seed)
    loader = OrchNeighborLoader(
        data, hot_ratio=args.hot_ratio, hot_method=args.hot_method,
        **loader_arguments(data, args),
    )  # fmt: skip
    model = OrchModel(graph_sage(data, args), loader)
    batches = list(itertools.islice(loader, args.batches + 1))
    print(
        f"{description}; GraphSAGE hidden {args.hidden_channels}, fan-outs "
        f"{args.num_neighbors}, batch {args.batch_size}, hot ratio {args.hot_ratio:g}; "
        f"{len(batches) - 1} batches x {args.rounds} rounds, each way once per batch "
        f"in turn (after one warm-up batch); {torch.get_num_threads()} threads"
    )
    step = _step(model)
    ways = {
        "pyg_orch aggregation (Numba)": lambda: None,
        "PyG propagate (torch.sparse.mm)": lambda: _hook_convs(model),
    }
    milliseconds = _interleaved(ways, step, batches, args.rounds)
    pyg_orch, pyg = milliseconds.values()
    for name, ms in milliseconds.items():
        print(f"{name:<34}{ms:>9.1f} ms per train step{ms / pyg_orch:>8.2f}x")
    print(f"pyg_orch's step takes {pyg_orch / pyg:.2f}x the time of PyG's path")
    shares = _profile(step, batches[1:])
    return BarChart(
        "train step (median ms)", list(milliseconds), {"ms": [pyg_orch, pyg]},
        f"ms per step; products {shares['products']:.0%} of pyg_orch's",
    )  # fmt: skip


def _step(model: OrchModel) -> Callable[[Data], None]:
    optimizer = torch.optim.Adam(model.parameters(), lr=0.003)

    def step(batch: Data) -> None:
        optimizer.zero_grad()
        out = model(batch)
        F.cross_entropy(out, batch.y[: batch.batch_size]).backward()
        optimizer.step()

    return step


def _hook_convs(model: OrchModel) -> list:
    # A conv with a forward hook runs through PyG's propagate.
    return [
        conv.register_forward_hook(lambda module, inputs, output: None)
        for conv in model.model.convs
    ]


def _interleaved(ways, step, batches, rounds) -> dict[str, float]:
    seconds: dict[str, list[float]] = {name: [] for name in ways}
    for setup in ways.values():  # warm-up, compiles the kernels
        _timed(setup, step, batches[0])
    for _ in range(rounds):
        for batch in batches[1:]:
            for name, setup in ways.items():
                seconds[name].append(_timed(setup, step, batch))
    return {name: median_ms(values) for name, values in seconds.items()}


def _timed(setup, step, batch) -> float:
    hooks = setup() or []
    try:
        start = time.perf_counter()
        step(batch)
        return time.perf_counter() - start
    finally:
        for hook in hooks:
            hook.remove()


def _profile(step, batches) -> dict[str, float]:
    # Self CPU time of every operator over pyg_orch's steps, by kind.
    with profile(activities=[ProfilerActivity.CPU]) as profiler:
        for batch in batches:
            step(batch)
    events = profiler.key_averages()
    total = sum(event.self_cpu_time_total for event in events)
    per_step = total / 1000 / len(batches)
    groups = {"products": _PRODUCTS, "aggregation": _AGGREGATION}
    shares = {
        kind: sum(e.self_cpu_time_total for e in events if e.key in names) / total
        for kind, names in groups.items()
    }
    shares["rest"] = 1 - sum(shares.values())
    print(
        f"profile of pyg_orch's steps ({len(batches)} batches): {per_step:.1f} ms of "
        f"operator time per step"
    )
    for kind, share in shares.items():
        print(f"  {kind:<12}{share * per_step:>9.1f} ms {share:>6.0%}")
    print("  the largest operators (self CPU time per step):")
    for event in sorted(events, key=lambda e: -e.self_cpu_time_total)[:8]:
        ms = event.self_cpu_time_total / 1000 / len(batches)
        print(
            f"    {event.key:<36}{ms:>9.1f} ms {event.count // len(batches):>4} calls"
        )
    print(
        f"products: {', '.join(_PRODUCTS)} (the linear layers, forward and "
        f"backward): the floor of any implementation at these sizes, "
        f"{shares['products'] * per_step:.1f} ms per step"
    )
    return shares
