"""The ``pyg-orch`` command line (also ``python -m pyg_orch``).

Each subcommand is one entry of :data:`COMMANDS`: a function that adds the
subcommand's options to its parser and a function that runs it and returns the
exit status. Options of ``train`` are named after the fields of
:class:`~pyg_orch.train_config.TrainConfig` (``--batch-size`` -> ``batch_size``) and
defined in :mod:`pyg_orch.options`, which the examples and the benchmarks share,
so a new setting only needs a field there and an entry in that module.

Example:
    >>> from pyg_orch.cli import main
    >>> main(["train", "--epochs", "2", "--no-progress"])  # doctest: +SKIP
    dataset: cora | nodes 2708 | edges 10556 | features 1433 | classes 7 | ...
    ...
    run          s/epoch train  s 1st epoch  s eval total  best val (epoch)    test
    hot ratio 0          0.254        1.020          0.31        0.7600 (2)  0.7980
    test accuracy: 0.7980
    0
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pyg_orch import __version__
from pyg_orch.dataset_names import dataset_kind

# torch, PyG and the training code load when a command runs (or its parser is
# built), not before: a misspelt --dataset is reported at once.
if TYPE_CHECKING:
    import torch

    from pyg_orch.train import TrainResult
    from pyg_orch.train_config import TrainConfig

__all__ = ["COMMANDS", "build_parser", "main"]

PROG = "pyg-orch"


def _add_train_options(parser: argparse.ArgumentParser) -> None:
    from pyg_orch.options import (
        add_execution_options,
        add_hot_options,
        add_option,
        add_training_options,
    )
    from pyg_orch.train_config import TrainConfig

    defaults = TrainConfig()
    data = parser.add_argument_group("data")
    add_option(data, "dataset", defaults.dataset)
    add_option(data, "root", defaults.root)
    add_training_options(parser.add_argument_group("model and training"), defaults)
    hot = parser.add_argument_group("hot/cold split")
    add_hot_options(hot, defaults)
    hot.add_argument(
        "--compare",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="also run with --hot-ratio 0, the same seed and data, and print a "
        "row for each run (default: on when the run has hot vertices)",
    )
    execution = parser.add_argument_group("execution")
    add_execution_options(execution, defaults)
    execution.add_argument(
        "--save-model",
        metavar="PATH",
        default=None,
        help="save the trained PyG model's weights at its best validation epoch "
        "to PATH (torch.save of its state_dict; load it with "
        "model.load_state_dict(torch.load(PATH))) (default: not saved)",
    )


def _ratio(hot_ratio: float | str) -> str:
    return hot_ratio if isinstance(hot_ratio, str) else f"{hot_ratio:g}"


def _header(config: TrainConfig, data: Any, device: torch.device) -> str:
    from pyg_orch.train import pipeline_arguments
    from pyg_orch.train_config import MODELS

    splits = "/".join(
        str(int(data[key].sum())) for key in ("train_mask", "val_mask", "test_mask")
    )
    pipeline = pipeline_arguments(config, device)
    cache = f", cache {config.cache}" if config.cache else ""
    device_cache = ""
    if pipeline["device"] is not None:
        device_cache = f", device cache {pipeline['device_cache']} bytes"
    stored = ""
    if dataset_kind(config.dataset) in ("planetoid", "ogb"):
        from pyg_orch.datasets import default_root

        stored = f" | stored in {config.root or default_root()}"
    return (
        f"dataset: {config.dataset} | nodes {data.num_nodes} | "
        f"edges {data.num_edges} | features {data.num_features} | "
        f"classes {int(data.y.max()) + 1} | train/val/test {splits}{stored}\n"
        f"model: {MODELS[config.model].__name__}, {len(config.num_neighbors)} "
        f"layers, hidden "
        f"{config.hidden_channels}, fan-out "
        f"{','.join(map(str, config.num_neighbors))}, batch {config.batch_size}, "
        f"{config.epochs} epochs, hot ratio {_ratio(config.ratio)} "
        f"({config.hot_method}{cache})\n"
        f"device: {device}, prefetch {pipeline['prefetch']} batches{device_cache}"
    )


def _run_name(config: TrainConfig, result: TrainResult) -> str:
    chosen = " (auto)" if config.ratio == "auto" else ""
    return f"hot ratio {result.hot_ratio:g}{chosen}"


def _table(rows: list[tuple[str, TrainResult]]) -> str:
    """One row per run: times, a batch's nodes, best val and test accuracy."""
    width = max(len("run"), *(len(name) for name, _ in rows))
    lines = [
        f"{'run':<{width}}  {'s/epoch train':>13}  {'s 1st epoch':>11}  "
        f"{'s eval total':>12}  {'nodes/batch':>11}  {'hot/batch':>9}  "
        f"{'best val (epoch)':>16}  {'test':>6}"
    ]
    for name, result in rows:
        best = f"{result.best_val_acc:.4f} ({result.best_epoch})"
        lines.append(
            f"{name:<{width}}  {result.seconds_per_epoch:>13.3f}  "
            f"{result.first_epoch_seconds:>11.3f}  "
            f"{result.eval_seconds:>12.2f}  {result.batch_stats['nodes']:>11.0f}  "
            f"{result.batch_stats['hot']:>9.0f}  {best:>16}  {result.test_acc:>6.4f}"
        )
    return "\n".join(lines)


def _hot_split(result: TrainResult, num_nodes: int) -> str:
    """What the hot vertices did in the run of ``result``."""
    if result.num_hot == 0:
        return "no hot vertices (hot ratio 0): plain NeighborLoader batches"
    stats = result.batch_stats
    share = stats["hot"] / max(stats["frontier"], 1)
    return (
        f"hot vertices: {result.num_hot} of {num_nodes} nodes; a training batch "
        f"took the bottom-layer aggregates of {stats['hot']:.0f} of its "
        f"{stats['frontier']:.0f} frontier nodes ({share:.0%}) from their "
        f"cache and sampled no last hop for them"
    )


def _compilation(result: TrainResult) -> str:
    """Whether the run compiled pyg_orch's Numba kernels, measured."""
    if result.compiled_kernels == 0:
        return (
            "pyg_orch's Numba kernels came from their on-disk cache (compiled "
            "by an earlier run); s/epoch counts the epochs after the first"
        )
    return (
        f"this run compiled {result.compiled_kernels} of pyg_orch's Numba "
        f"functions ({result.compile_seconds:.1f} s, once per install: later "
        f"runs load them from Numba's cache); s/epoch counts the epochs after "
        f"the first"
    )


def _run_train(args: argparse.Namespace) -> int:
    import torch

    from pyg_orch.options import config_from_args
    from pyg_orch.train import load_data, resolve_device, train
    from pyg_orch.train_config import MODELS

    try:
        config = config_from_args(args)
        device = resolve_device(config.device)
        data = load_data(config)
    except (ValueError, FileNotFoundError) as error:
        return _fail(args.command, error)
    print(_header(config, data, device), flush=True)
    result = train(config, progress=args.progress, data=data)
    if result.tuning is not None:
        print(f"hot ratio auto -> {result.hot_ratio:g} chosen from:", flush=True)
        print(result.tuning.table(), flush=True)
    rows = [(_run_name(config, result), result)]
    if args.compare and result.num_hot:
        # The same run, seed and data without hot vertices, for comparison.
        plain = dataclasses.replace(config, hot_ratio=0.0, cache=None)
        rows.append(("hot ratio 0", train(plain, progress=args.progress, data=data)))
    print(_hot_split(result, data.num_nodes), flush=True)
    print(_compilation(result), flush=True)
    print(_table(rows), flush=True)
    print(f"test accuracy: {result.test_acc:.4f}", flush=True)
    if args.save_model is not None:
        torch.save(result.best_state, args.save_model)
        print(
            f"saved the {MODELS[config.model].__name__} weights of epoch "
            f"{result.best_epoch} (best validation) to {args.save_model}",
            flush=True,
        )
    return 0


#: Subcommands: name -> (help, add options to the parser, run it -> exit status).
COMMANDS: dict[
    str,
    tuple[
        str,
        Callable[[argparse.ArgumentParser], None],
        Callable[[argparse.Namespace], int],
    ],
] = {
    "train": (
        "train a GNN with sampled mini-batches and report test accuracy",
        _add_train_options,
        _run_train,
    ),
}


class _Version(argparse.Action):
    # --version: the version, then which package samples and partitions for
    # PyG's own classes (pyg_orch's backend, pyg-lib or torch-sparse).
    def __call__(self, parser: Any, namespace: Any, values: Any, option: Any = None):
        from pyg_orch.backend import status_lines

        print(f"{PROG} {__version__}\n{status_lines()}")
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    """Builds the ``pyg-orch`` argument parser with one subparser per command.

    Returns:
        The parser; ``parse_args`` sets ``command`` and ``run`` (the function
        that executes the command).

    Example:
        >>> args = build_parser().parse_args(["train", "--epochs", "3"])
        >>> args.command, args.epochs
        ('train', 3)
    """
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Fast sample-based GNN training for PyTorch Geometric.",
    )
    parser.add_argument(
        "--version", action=_Version, nargs=0,
        help="print the version and what samples for PyG (pyg_orch.backend_status())",
    )  # fmt: skip
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    subparsers.required = True
    for name, (help_text, add_options, run) in COMMANDS.items():
        sub = subparsers.add_parser(name, help=help_text, description=help_text)
        add_options(sub)
        sub.set_defaults(run=run)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Runs ``pyg-orch``.

    Args:
        argv: the arguments after the program name (``None``: ``sys.argv``).

    Returns:
        The exit status: 0 on success, 2 for invalid options or a dataset that
        cannot be loaded (an error message naming the option goes to stderr).
        ``argparse`` itself exits with status 2 on unparsable arguments.

    Example:
        >>> main(["train", "--epochs", "2", "--no-progress"])  # doctest: +SKIP
        0
    """
    argv = sys.argv[1:] if argv is None else argv
    try:
        _check_dataset_early(argv)
    except (ValueError, FileNotFoundError) as error:
        return _fail(argv[0], error)
    args = build_parser().parse_args(argv)
    return args.run(args)


def _check_dataset_early(argv: list[str]) -> None:
    # Before torch and PyG load (seconds): the name of --dataset, if given.
    for index, token in enumerate(argv):
        if token.startswith("--dataset="):
            dataset_kind(token.split("=", 1)[1])
        elif token == "--dataset" and index + 1 < len(argv):
            dataset_kind(argv[index + 1])


def _fail(command: str, error: Exception) -> int:
    print(f"{PROG} {command}: error: {error}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    raise SystemExit(main())
