"""Whole-graph inference: ``OrchModel.inference`` against the plain model's forward.

Evaluation runs the model on the same whole graph every epoch. The plain PyG
model makes a message row per edge each time; ``OrchModel.inference``
aggregates with the Numba kernels, on the CSC form of the graph (of each
relation, on a heterogeneous graph) that its first call builds and later
calls reuse. This prints the first call's time, the later calls' median and
the plain model's median, on the power-law graph with GraphSAGE, or with
``--hetero`` on the ogbn-mag-shaped graph with ``HeteroConv(SAGEConv)``.
Numba's kernels are loaded on a small graph first, so the first call's time
is that of a new graph, not of a new process. The default run takes about
a minute on 2 CPU cores.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

import torch
from torch_geometric.data import Data, HeteroData

from pyg_orch.benchmark.graph import add_graph_arguments, benchmark_graph
from pyg_orch.benchmark.tasks import HeteroGNN, graph_sage
from pyg_orch.benchmark.timing import median_ms, time_calls
from pyg_orch.datasets.synthetic import power_law_hetero_graph
from pyg_orch.nn.model import OrchModel
from pyg_orch.options import positive_float, positive_int


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Adds this benchmark's options to ``parser``."""
    add_graph_arguments(parser, num_nodes=200_000)
    parser.add_argument(
        "--hetero",
        action="store_true",
        help="the ogbn-mag-shaped heterogeneous graph instead (default: off)",
    )
    parser.add_argument(
        "--scale",
        type=positive_float,
        default=0.1,
        help="with --hetero: fraction of ogbn-mag's size (default: %(default)s)",
    )
    parser.add_argument(
        "--hidden-channels",
        type=positive_int,
        default=64,
        help="hidden width of the two-layer model (default: %(default)s)",
    )
    parser.add_argument(
        "--repeats",
        type=positive_int,
        default=5,
        help="timed later calls of each way (default: %(default)s)",
    )


def saved_name(args: argparse.Namespace) -> str:
    """The name ``--save`` gives this run's table.

    Example:
        >>> saved_name(argparse.Namespace(hetero=True))
        'inference_hetero'
    """
    return "inference_hetero" if args.hetero else "inference"


def run(args: argparse.Namespace) -> None:
    """Times the plain model's forward and ``OrchModel.inference`` on one graph."""
    torch.manual_seed(args.seed)
    data, line = _graph(args)
    print(f"{line}; two layers, hidden {args.hidden_channels}; "
          f"{torch.get_num_threads()} threads", flush=True)  # fmt: skip
    plain = _model(data, args).eval()
    small, _ = _graph(argparse.Namespace(**{**vars(args), "num_nodes": 1000,
                                            "scale": 0.001}))  # fmt: skip
    OrchModel(_model(small, args)).inference(small)  # Numba's kernels loaded
    orch = OrchModel(plain)
    first = median_ms(time_calls(lambda: orch.inference(data), 1, 0))
    later = median_ms(time_calls(lambda: orch.inference(data), args.repeats, 0))
    with torch.no_grad():
        whole = median_ms(time_calls(_plain_call(plain, data), args.repeats, 1))
    print(
        "| way | first call ms | later calls ms (median) | first / later "
        "| plain PyG / later |"
    )
    print("|---|---|---|---|---|")
    print(f"| plain PyG forward on the whole graph | | {whole:.1f} | | 1.00x |")
    print(f"| OrchModel.inference | {first:.1f} | {later:.1f} | {first / later:.2f}x "
          f"| {whole / later:.2f}x |", flush=True)  # fmt: skip


def _graph(args: argparse.Namespace) -> tuple[Data | HeteroData, str]:
    if not args.hetero:
        return benchmark_graph(args)
    data = power_law_hetero_graph(args.scale, num_features=128, seed=args.seed)
    return data, (
        f"ogbn-mag-shaped graph (scale {args.scale:g}): {data.num_nodes:,} nodes, "
        f"{data.num_edges:,} edges, 128 features; HeteroConv(SAGEConv)"
    )


def _model(data: Data | HeteroData, args: argparse.Namespace) -> torch.nn.Module:
    settings = argparse.Namespace(hidden_channels=args.hidden_channels,
                                  num_neighbors=[-1, -1])  # fmt: skip
    if not args.hetero:
        return graph_sage(data, settings)
    return HeteroGNN(data.metadata(), 128, args.hidden_channels,
                     int(data["paper"].y.max()) + 1, 2)  # fmt: skip


def _plain_call(model: torch.nn.Module, data: Data | HeteroData) -> Callable:
    if isinstance(data, HeteroData):
        return lambda: model(data.x_dict, data.edge_index_dict)
    return lambda: model(data.x, data.edge_index)
