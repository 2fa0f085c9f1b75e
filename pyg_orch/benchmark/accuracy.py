"""Test accuracy with and without hot vertices: datasets x models x seeds.

Trains each dataset and model with ``pyg-orch train``'s code at hot ratio 0 and
at ``--hot-ratio``, once per seed. The default run (Cora, GraphSAGE and GCN,
3 seeds of 30 epochs) takes about a minute on 2 CPU cores.
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import time

from pyg_orch.datasets import load_dataset
from pyg_orch.options import add_option, hot_fraction, non_negative_int
from pyg_orch.train import MODELS, TrainConfig, train


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


def _accuracies(data, config: TrainConfig, seeds: list[int]) -> list[float]:
    return [
        train(dataclasses.replace(config, seed=seed), False, data).test_acc
        for seed in seeds
    ]


def _cell(values: list[float]) -> str:
    spread = statistics.stdev(values) if len(values) > 1 else 0.0
    return f"{100 * statistics.mean(values):.2f} ± {100 * spread:.2f}"


def run(args: argparse.Namespace) -> None:
    """Trains every dataset x model at hot ratio 0 and ``--hot-ratio``."""
    print(
        f"fan-outs {args.num_neighbors}, batch {args.batch_size}, hidden "
        f"{args.hidden_channels}, {args.epochs} epochs, Adam 0.003, dropout 0.5, "
        f"test accuracy at the best validation epoch, full-neighbourhood "
        f"evaluation; seeds {args.seeds}; hot method {args.hot_method}",
        flush=True,
    )
    ratio = f"{args.hot_ratio:g}"
    print(f"| dataset | model | hot 0 | hot {ratio} | difference | minutes |")
    print("|---|---|---|---|---|---|")
    for name in args.datasets:
        data = load_dataset(name, root=args.root, seed=0)
        for model in args.models:
            start = time.perf_counter()
            config = TrainConfig(
                dataset=name,
                model=model,
                num_neighbors=tuple(args.num_neighbors),
                batch_size=args.batch_size,
                hidden_channels=args.hidden_channels,
                epochs=args.epochs,
                hot_method=args.hot_method,
            )
            plain = _accuracies(data, config, args.seeds)
            # OrchModel refuses GCN with hot vertices (batch-degree norms).
            hot_cell, difference = "refused", "-"
            if model != "gcn":
                config.hot_ratio = args.hot_ratio
                hot = _accuracies(data, config, args.seeds)
                hot_cell = _cell(hot)
                gain = 100 * (statistics.mean(hot) - statistics.mean(plain))
                difference = f"{gain:+.2f}"
            minutes = (time.perf_counter() - start) / 60
            print(
                f"| {name.rsplit('/', 1)[-1]} | {model} | {_cell(plain)} | "
                f"{hot_cell} | {difference} | {minutes:.1f} |",
                flush=True,
            )
