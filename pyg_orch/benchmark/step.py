"""The training step of one batch: pyg_orch's aggregation against PyG's, profiled.

Times the forward, backward and Adam step of GraphSAGE on the same batches of
the power-law graph, interleaved batch by batch so that every way sees the
same machine: ``OrchModel`` aggregating with pyg_orch's kernels, and the same
``OrchModel`` with every conv run through PyG's ``propagate``
(``torch.sparse.mm`` on a CSR adjacency; a conv with a hook takes that path).
With ``--precisions fp32 bf16`` it also times ``OrchModel(precision="bf16")``
on the same batches in bfloat16, and prints the CPU's bfloat16 support.
Then profiles pyg_orch's steps with the torch profiler and splits their time
into matrix products (the floor: the same products in any implementation),
aggregation, casts, the optimizer and the rest. The default run takes about
two minutes on 2 CPU cores, most of it choosing the hot vertices.

With ``--hetero`` it does the same for the epoch benchmark's heterogeneous
task (``HeteroConv(SAGEConv)`` on the ogbn-mag-shaped graph, wrapped in
``OrchModel``): the relation convs aggregated by pyg_orch's kernels against
the same convs through PyG's ``propagate``."""

from __future__ import annotations

import argparse
import copy
import itertools
import time
from collections.abc import Callable
from typing import Any

import torch
from torch.profiler import ProfilerActivity, profile, record_function
from torch_geometric.data import Data

from pyg_orch.allocator import allocator_status
from pyg_orch.benchmark.bf16_support import bf16_support
from pyg_orch.benchmark.graph import (
    BENCHMARK_DEFAULTS,
    add_graph_arguments,
    add_scale_argument,
    benchmark_graph,
)
from pyg_orch.benchmark.plot import BarChart
from pyg_orch.benchmark.tasks import (
    configuration,
    graph,
    graph_sage,
    loader_arguments,
    loss,
)
from pyg_orch.benchmark.timing import median_ms
from pyg_orch.loading.node_loader import OrchNeighborLoader
from pyg_orch.nn.hetero_layers import relation_convs
from pyg_orch.nn.model import OrchModel
from pyg_orch.options import add_option, hot_fraction, positive_int

# Profiler rows by what they are: the products, pyg_orch's aggregation (and
# what runs inside it), the casts, the optimizer's step (all it runs).
_PRODUCTS = ("aten::mm", "aten::addmm", "aten::addmm_", "aten::bmm")
_AGGREGATION = ("_Aggregate", "_AggregateBackward")
_CASTS = ("aten::copy_", "aten::_to_copy")
_OPTIMIZER = "optimizer step"
_CATEGORIES = ("products", "aggregation", "casts", "optimizer", "rest")


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
        "--precisions",
        nargs="+",
        choices=["fp32", "bf16"],
        default=["fp32"],
        help="OrchModel precisions, each step timed on the same batches in turn "
        "(default: fp32)",
    )
    parser.add_argument(
        "--rounds",
        type=positive_int,
        default=3,
        help="passes over the batches (default: %(default)s)",
    )
    parser.add_argument(
        "--hetero",
        action="store_true",
        help="the step of the epoch benchmark's heterogeneous task instead: "
        "HeteroConv(SAGEConv) on the ogbn-mag-shaped graph, fp32 (default: off)",
    )
    add_scale_argument(parser)


def saved_name(args: argparse.Namespace) -> str:
    """The name ``--save`` gives this run's table: ``step``, ``step_bf16``...

    Example:
        >>> saved_name(argparse.Namespace(precisions=["fp32", "bf16"]))
        'step_bf16'
        >>> saved_name(argparse.Namespace(precisions=["fp32"], hetero=True))
        'step_hetero'
    """
    if getattr(args, "hetero", False):
        return "step_hetero"
    narrow = [p for p in args.precisions if p != "fp32"]
    return "_".join(["step", *narrow])


def run(args: argparse.Namespace) -> BarChart:
    """Builds the graph and batches, times every way, profiles, prints."""
    if getattr(args, "hetero", False):
        return _run_hetero(args)
    data, description = benchmark_graph(args)
    torch.manual_seed(args.seed)
    loader = OrchNeighborLoader(
        data, hot_ratio=args.hot_ratio, hot_method=args.hot_method,
        **loader_arguments(data, args),
    )  # fmt: skip
    module = graph_sage(data, args)
    models = {  # wrapped before the loader's first batch
        precision: OrchModel(copy.deepcopy(module), loader, precision=precision)
        for precision in args.precisions
    }
    steps = {precision: _step(model) for precision, model in models.items()}
    batches = list(itertools.islice(loader, args.batches + 1))
    print(
        f"{description}; GraphSAGE hidden {args.hidden_channels}, fan-outs "
        f"{args.num_neighbors}, batch {args.batch_size}, hot ratio {args.hot_ratio:g}; "
        f"{len(batches) - 1} batches x {args.rounds} rounds, each way once per batch "
        f"in turn (after one warm-up batch); {torch.get_num_threads()} threads"
    )
    print(f"allocator: {allocator_status()}")
    if "bf16" in args.precisions:
        print(bf16_support())
        print(
            "bf16: OrchModel(precision='bf16') on the same batches, their "
            "features and hot values in bfloat16 (as feature_dtype=torch.bfloat16 "
            "gathers them)"
        )
    inputs = {"fp32": batches, "bf16": [_in_bf16(batch) for batch in batches]}
    ways = {
        f"pyg_orch aggregation (Numba){_tag(p)}": (_no_hooks, steps[p], inputs[p])
        for p in args.precisions
    }
    if "fp32" in steps:
        ways["PyG propagate (torch.sparse.mm)"] = (
            lambda: _hooked(models["fp32"].model.convs), steps["fp32"], batches,
        )  # fmt: skip
    return _report(ways, steps, inputs, args.rounds)


def _report(ways, steps, inputs, rounds: int) -> BarChart:
    # Times the ways interleaved, then profiles pyg_orch's step of each
    # precision; prints both.
    milliseconds = _interleaved(ways, rounds)
    first = next(iter(milliseconds.values()))
    for name, ms in milliseconds.items():
        print(f"{name:<34}{ms:>9.1f} ms per train step{ms / first:>8.2f}x")
    shares = {
        precision: _profile(step, inputs[precision][1:], precision)
        for precision, step in steps.items()
    }
    precision, products = next((p, s["products"]) for p, s in shares.items())
    return BarChart(
        "train step (median ms)", list(milliseconds),
        {"ms": list(milliseconds.values())},
        f"ms per step; products {products:.0%} of pyg_orch's {precision} step",
    )  # fmt: skip


def _run_hetero(args: argparse.Namespace) -> BarChart:
    # The heterogeneous step: the kernels' relation convs against PyG's.
    if args.precisions != ["fp32"]:
        raise ValueError("--hetero: fp32 only; leave --precisions out")
    data, description = graph("hetero", args)
    torch.manual_seed(args.seed)
    loader, model, forward = configuration("hetero", data, args, args.hot_ratio)
    step = _step(model, forward, "hetero")
    batches = list(itertools.islice(loader, args.batches + 1))
    print(
        f"{description}; HeteroConv(SAGEConv) hidden {args.hidden_channels}, "
        f"fan-outs {args.num_neighbors}, batch {args.batch_size}, hot ratio "
        f"{args.hot_ratio:g}; {len(batches) - 1} batches x {args.rounds} rounds, "
        f"each way once per batch in turn (after one warm-up batch); "
        f"{torch.get_num_threads()} threads"
    )
    print(f"allocator: {allocator_status()}")
    convs = [conv for _, conv in relation_convs(model.model)]
    ways = {
        "pyg_orch aggregation (Numba)": (_no_hooks, step, batches),
        "PyG propagate (torch.sparse.mm)": (lambda: _hooked(convs), step, batches),
    }
    return _report(ways, {"fp32": step}, {"fp32": batches}, args.rounds)


def _tag(precision: str) -> str:
    return "" if precision == "fp32" else f", {precision}"


def _in_bf16(batch: Data) -> Data:
    # The batch as a loader with feature_dtype=torch.bfloat16 gives it.
    narrow = batch.clone()
    for name in ("x", "hot_agg"):
        if name in narrow and narrow[name].is_floating_point():
            narrow[name] = narrow[name].to(torch.bfloat16)
    return narrow


def _step(model: OrchModel, forward=None, task: str = "node") -> Callable:
    optimizer = torch.optim.Adam(model.parameters(), lr=0.003)
    forward = forward or model

    def step(batch: Any) -> None:
        optimizer.zero_grad()
        loss(task, forward(batch), batch).backward()
        with record_function(_OPTIMIZER):
            optimizer.step()

    return step


def _no_hooks() -> list:
    return []


def _hooked(convs) -> list:
    # A conv with a forward hook runs through PyG's propagate.
    return [
        conv.register_forward_hook(lambda module, inputs, output: None)
        for conv in convs
    ]


def _interleaved(ways, rounds) -> dict[str, float]:
    seconds: dict[str, list[float]] = {name: [] for name in ways}
    for setup, step, batches in ways.values():  # warm-up, compiles the kernels
        _timed(setup, step, batches[0])
    for _ in range(rounds):
        for index in range(1, len(next(iter(ways.values()))[2])):
            for name, (setup, step, batches) in ways.items():
                seconds[name].append(_timed(setup, step, batches[index]))
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


def _category(event) -> str:
    # An operator's kind: the optimizer's by where it ran; products and
    # casts by name; the aggregation's by where it ran; else the rest.
    if _ran_inside(event, (_OPTIMIZER,)):
        return "optimizer"
    if event.name in _PRODUCTS:
        return "products"
    if event.name in _CASTS:
        return "casts"
    return "aggregation" if _ran_inside(event, _AGGREGATION) else "rest"


def _ran_inside(event, names) -> bool:
    # Whether the event or one of its callers is named in names.
    while event is not None:
        if event.name in names:
            return True
        event = event.cpu_parent
    return False


def _profile(step, batches, precision: str) -> dict[str, float]:
    # Self CPU time of every operator over pyg_orch's steps, by kind.
    with profile(activities=[ProfilerActivity.CPU]) as profiler:
        for batch in batches:
            step(batch)
    events = [event for event in profiler.events() if event.device_type.name == "CPU"]
    total = sum(event.self_cpu_time_total for event in events)
    per_step = total / 1000 / len(batches)
    shares = dict.fromkeys(_CATEGORIES, 0.0)
    for event in events:
        shares[_category(event)] += event.self_cpu_time_total / total
    print(
        f"profile of pyg_orch's {precision} steps ({len(batches)} batches): "
        f"{per_step:.1f} ms of operator time per step"
    )
    for kind, share in shares.items():
        print(f"  {kind:<12}{share * per_step:>9.1f} ms {share:>7.1%}")
    print("  the largest operators (self CPU time per step):")
    averages = profiler.key_averages()
    for event in sorted(averages, key=lambda e: -e.self_cpu_time_total)[:8]:
        ms = event.self_cpu_time_total / 1000 / len(batches)
        print(
            f"    {event.key:<36}{ms:>9.1f} ms {event.count // len(batches):>4} calls"
        )
    print(
        f"products: {', '.join(_PRODUCTS)} (the linear layers, forward and "
        f"backward): the floor of any implementation at these sizes, "
        f"{shares['products'] * per_step:.1f} ms per step; casts: "
        f"{', '.join(_CASTS)} (every dtype conversion, and the copies of same "
        f"dtype)"
    )
    return shares
