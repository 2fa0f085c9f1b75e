"""Test accuracy with and without hot vertices: datasets x models x seeds.

Trains each dataset and model with ``pyg-orch train``'s code at hot ratio 0 and
at ``--hot-ratio``, once per seed. With ``--precision bf16`` it compares
float32 with that precision instead (``pyg-orch train --precision``), both at
``--hot-ratio`` (hot ratio 0 for GCN). The default run (Cora, GraphSAGE and GCN,
3 seeds of 30 epochs) takes about a minute on 2 CPU cores. With ``--hetero``,
it classifies the papers of the ogbn-mag-shaped graph with learnable labels
instead: plain PyG (``NeighborLoader`` and a ``HeteroConv(SAGEConv)`` model,
see :mod:`pyg_orch.benchmark.tasks`) against pyg_orch at ``--hot-ratio``,
or with ``--precision bf16`` pyg_orch in float32 against pyg_orch in that
precision (``OrchModel``'s ``precision``), both at ``--hot-ratio``.
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import time
from collections.abc import Callable

import torch
from torch_geometric.data import HeteroData

from pyg_orch.benchmark.tasks import HETERO_CONVS, configuration, loss
from pyg_orch.datasets import load_dataset, power_law_hetero_graph
from pyg_orch.hot.cache import CACHE_MODES
from pyg_orch.nn.model import OrchModel
from pyg_orch.options import add_option, hot_fraction, non_negative_int, positive_float
from pyg_orch.train import train
from pyg_orch.train_config import MODELS, TrainConfig


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Adds this benchmark's options to ``parser``."""
    defaults = TrainConfig()
    parser.add_argument(
        "--datasets",
        nargs="+",
        default=["cora"],
        help="dataset names or .npz paths, as for pyg-orch train --dataset "
        "(default: cora)",
    )
    add_option(parser, "root", defaults.root)
    parser.add_argument(
        "--models",
        nargs="+",
        default=["sage", "gcn"],
        choices=MODELS,
        help="the PyG models; gcn runs at hot ratio 0 only (default: sage gcn)",
    )
    add_option(
        parser,
        "hot_ratio",
        0.2,
        type=hot_fraction,
        help="the hot ratio compared with 0, in [0, 1]",
    )
    add_option(parser, "hot_method", defaults.hot_method)
    parser.add_argument(
        "--seeds",
        type=non_negative_int,
        nargs="+",
        default=[0, 1, 2],
        help="one run per seed; the table gives mean ± standard deviation "
        "(default: 0 1 2)",
    )
    for name in ("epochs", "num_neighbors", "batch_size", "hidden_channels"):
        add_option(parser, name, getattr(defaults, name))
    parser.add_argument(
        "--precision",
        choices=["fp32", "bf16"],
        default="fp32",
        help="bf16: compare fp32 with bf16 training (features in bf16, "
        "autocast), both at --hot-ratio, instead of hot ratio 0 with "
        "--hot-ratio (default: fp32)",
    )
    parser.add_argument(
        "--hetero",
        action="store_true",
        help="classify the papers of pyg_orch.datasets.power_law_hetero_graph "
        "(learnable labels, 128 features) instead (default: off)",
    )
    parser.add_argument(
        "--conv",
        choices=HETERO_CONVS,
        default="sage",
        help="with --hetero: the relation convs, HeteroConv(SAGEConv) or "
        "HeteroConv(GATConv) (default: %(default)s)",
    )
    parser.add_argument(
        "--cache",
        choices=CACHE_MODES,
        default=None,
        help="with --hetero: pyg_orch's hot cache mode (default: static, or "
        "embedding where a relation conv aggregates with weights)",
    )
    parser.add_argument(
        "--scale",
        type=positive_float,
        default=0.02,
        help="with --hetero: the graph's fraction of ogbn-mag's size "
        "(default: %(default)s)",
    )


def _accuracies(data, config: TrainConfig, seeds: list[int]) -> list[float]:
    return [
        train(dataclasses.replace(config, seed=seed), False, data).test_acc
        for seed in seeds
    ]


def _difference(before: list[float], after: list[float]) -> str:
    # Points of mean accuracy gained from before to after.
    return f"{100 * (statistics.mean(after) - statistics.mean(before)):+.2f}"


def _cell(values: list[float]) -> str:
    spread = statistics.stdev(values) if len(values) > 1 else 0.0
    return f"{100 * statistics.mean(values):.2f} ± {100 * spread:.2f}"


def saved_name(args: argparse.Namespace) -> str:
    """The name ``--save`` gives this run's table.

    ``accuracy[_hetero[_gat][_<cache>]][_bf16]``.

    Example:
        >>> saved_name(argparse.Namespace(hetero=True))
        'accuracy_hetero'
        >>> saved_name(argparse.Namespace(hetero=True, conv="gat", cache="embedding"))
        'accuracy_hetero_gat_embedding'
    """
    parts = ["accuracy"]
    if args.hetero:
        parts.append("hetero")
        conv, cache = getattr(args, "conv", "sage"), getattr(args, "cache", None)
        parts += [conv] if conv != "sage" else []
        parts += [cache] if cache is not None else []
    precision = getattr(args, "precision", "fp32")
    parts += [precision] if precision != "fp32" else []
    return "_".join(parts)


def run(args: argparse.Namespace) -> None:
    """Trains every dataset x model at hot ratio 0 and ``--hot-ratio``."""
    if args.hetero:
        run_hetero(args)
        return
    print(
        f"fan-outs {args.num_neighbors}, batch {args.batch_size}, hidden "
        f"{args.hidden_channels}, {args.epochs} epochs, Adam 0.003, dropout 0.5, "
        f"test accuracy at the best validation epoch, full-neighbourhood "
        f"evaluation; seeds {args.seeds}; hot method {args.hot_method}",
        flush=True,
    )
    if args.precision == "fp32":
        ratio = f"{args.hot_ratio:g}"
        header = ["hot 0", f"hot {ratio}", "difference"]
        _table(args, header, _hot_cells)
    else:
        header = ["hot ratio", "fp32", args.precision, "difference"]
        _table(args, header, _precision_cells)


def _table(
    args: argparse.Namespace,
    header: list[str],
    cells: Callable[[object, TrainConfig, argparse.Namespace], list[str]],
) -> None:
    # One row per dataset x model: its name, ``cells`` and the minutes taken.
    print("| " + " | ".join(["dataset", "model", *header, "minutes"]) + " |")
    print("|" + "---|" * (len(header) + 3))
    for name in args.datasets:
        data = load_dataset(name, root=args.root, seed=0)
        for model in args.models:
            start = time.perf_counter()
            row = cells(data, _config(args, name, model), args)
            minutes = (time.perf_counter() - start) / 60
            print(
                f"| {name.rsplit('/', 1)[-1]} | {model} | {' | '.join(row)} | "
                f"{minutes:.1f} |",
                flush=True,
            )


def _hot_cells(data, config: TrainConfig, args: argparse.Namespace) -> list[str]:
    # Hot ratio 0 against --hot-ratio.
    plain = _accuracies(data, config, args.seeds)
    # OrchModel refuses GCN with hot vertices (batch-degree norms).
    if config.model == "gcn":
        return [_cell(plain), "refused", "-"]
    config.hot_ratio = args.hot_ratio
    hot = _accuracies(data, config, args.seeds)
    return [_cell(plain), _cell(hot), _difference(plain, hot)]


def _precision_cells(data, config: TrainConfig, args: argparse.Namespace) -> list[str]:
    # fp32 against --precision, both at --hot-ratio (0 for GCN).
    config.hot_ratio = 0.0 if config.model == "gcn" else args.hot_ratio
    wide = _accuracies(data, config, args.seeds)
    config.precision = args.precision
    narrow = _accuracies(data, config, args.seeds)
    return [
        f"{config.hot_ratio:g}",
        _cell(wide),
        _cell(narrow),
        _difference(wide, narrow),
    ]


def _config(args: argparse.Namespace, dataset: str, model: str) -> TrainConfig:
    return TrainConfig(
        dataset=dataset,
        model=model,
        num_neighbors=tuple(args.num_neighbors),
        batch_size=args.batch_size,
        hidden_channels=args.hidden_channels,
        epochs=args.epochs,
        hot_ratio=0.0,  # each row sets the ratios it compares
        hot_method=args.hot_method,
    )


_CONV_NAMES = {"sage": "HeteroConv(SAGEConv)", "gat": "HeteroConv(GATConv)"}


def run_hetero(args: argparse.Namespace) -> None:
    """Plain PyG against pyg_orch on the heterogeneous graph, one row."""
    start = time.perf_counter()
    data = power_law_hetero_graph(args.scale, num_features=128, seed=0)
    print(
        f"ogbn-mag-shaped graph (scale {args.scale:g}, learnable labels): "
        f"{data.num_nodes:,} nodes, {data.num_edges:,} edges; "
        f"{_CONV_NAMES[args.conv]} on papers, cache {args.cache or 'unset'}; "
        f"fan-outs {args.num_neighbors}, batch {args.batch_size}, hidden "
        f"{args.hidden_channels}, {args.epochs} epochs, Adam 0.003, test accuracy "
        f"at the best validation epoch, whole-graph evaluation; seeds {args.seeds}; "
        f"hot method {args.hot_method}",
        flush=True,
    )
    settings = argparse.Namespace(
        num_neighbors=args.num_neighbors,
        batch_size=args.batch_size,
        hidden_channels=args.hidden_channels,
        hot_method=args.hot_method,
        conv=args.conv,
        cache=args.cache,
    )
    ratio = f"{args.hot_ratio:g}"
    if args.precision == "fp32":
        sides = {"plain PyG": (None, "fp32"), f"hot {ratio}": (args.hot_ratio, "fp32")}
    else:
        sides = {
            f"hot {ratio} fp32": (args.hot_ratio, "fp32"),
            f"hot {ratio} {args.precision}": (args.hot_ratio, args.precision),
        }
    before, after = (
        [
            _hetero_accuracy(data, settings, hot, seed, args.epochs, precision)
            for seed in args.seeds
        ]
        for hot, precision in sides.values()
    )
    names = " | ".join(sides)
    print(f"| dataset | model | {names} | difference | minutes |")
    print("|---|---|---|---|---|---|")
    print(
        f"| synthetic ogbn-mag | {args.conv} | {_cell(before)} | {_cell(after)} | "
        f"{_difference(before, after)} | {(time.perf_counter() - start) / 60:.1f} |",
        flush=True,
    )


def _hetero_accuracy(
    data: HeteroData,
    settings: argparse.Namespace,
    hot_ratio: float | None,
    seed: int,
    epochs: int,
    precision: str,
) -> float:
    # Test accuracy at the best validation epoch of one run.
    torch.manual_seed(seed)
    loader, model, forward = configuration(
        "hetero", data, settings, hot_ratio, precision
    )
    optimizer = torch.optim.Adam(model.parameters(), lr=0.003)
    papers = data["paper"]
    best_valid, best_test = -1.0, 0.0
    for _ in range(epochs):
        model.train()
        for batch in loader:
            optimizer.zero_grad()
            loss("hetero", forward(batch), batch).backward()
            optimizer.step()
        pred = _whole_graph_papers(model, data).argmax(dim=-1)
        valid, test = (
            float((pred[mask] == papers.y[mask]).float().mean())
            for mask in (papers.val_mask, papers.test_mask)
        )
        if valid > best_valid:
            best_valid, best_test = valid, test
    return best_test


@torch.no_grad()
def _whole_graph_papers(model: torch.nn.Module, data: HeteroData) -> torch.Tensor:
    # Exact whole-graph logits: pyg_orch's layer-wise inference, or the plain
    # model on the whole graph.
    model.eval()
    if isinstance(model, OrchModel):
        return model.inference(data)["paper"]
    return model(data.x_dict, data.edge_index_dict)["paper"]
