"""The ``pyg-orch`` command line (also ``python -m pyg_orch``).

Each subcommand is one entry of :data:`COMMANDS`: a function that adds the
subcommand's options to its parser and a function that runs it and returns the
exit status. Options of ``train`` are named after the fields of
:class:`~pyg_orch.train.TrainConfig` (``--batch-size`` -> ``batch_size``), so a
new setting only needs a field there and one ``add_argument`` here.

Example:
    >>> from pyg_orch.cli import main
    >>> main(["train", "--epochs", "2", "--no-progress"])  # doctest: +SKIP
    dataset: cora | nodes 2708 | edges 10556 | features 1433 | classes 7 | ...
    ...
    test accuracy: 0.7980
    0
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from collections.abc import Callable, Sequence
from typing import Any

from pyg_orch import __version__
from pyg_orch.hotness import HOT_METHODS
from pyg_orch.train import (
    MODELS,
    TrainConfig,
    TrainResult,
    load_data,
    resolve_device,
    train,
)

__all__ = ["COMMANDS", "build_parser", "main", "parse_fanouts"]

PROG = "pyg-orch"


def parse_fanouts(values: Sequence[str]) -> tuple[int, ...]:
    """Parses ``--num-neighbors`` values: space- and/or comma-separated ints.

    Args:
        values: the strings after ``--num-neighbors``.

    Returns:
        The fan-outs, one per layer.

    Raises:
        argparse.ArgumentTypeError: a value is not an integer.

    Example:
        >>> parse_fanouts(["15", "10", "5"])
        (15, 10, 5)
        >>> parse_fanouts(["15,10,5"])
        (15, 10, 5)
    """
    fanouts = []
    for value in values:
        for part in value.split(","):
            if not part.strip():
                continue
            try:
                fanouts.append(int(part))
            except ValueError:
                raise argparse.ArgumentTypeError(
                    f"--num-neighbors expects integers, got {part!r}"
                ) from None
    return tuple(fanouts)


class _FanoutAction(argparse.Action):
    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        try:
            setattr(namespace, self.dest, parse_fanouts(values))
        except argparse.ArgumentTypeError as error:
            parser.error(str(error))


def _add_train_options(parser: argparse.ArgumentParser) -> None:
    defaults = TrainConfig()
    data = parser.add_argument_group("data")
    data.add_argument(
        "--dataset",
        default=defaults.dataset,
        help="cora, citeseer, pubmed, ogbn-*, power-law/synthetic, or a path to "
        "an .npz file",
    )
    data.add_argument(
        "--root",
        default=defaults.root,
        help="dataset download/cache directory (default: $PYG_ORCH_HOME or "
        "~/.cache/pyg_orch)",
    )
    model = parser.add_argument_group("model and training")
    model.add_argument(
        "--model",
        choices=sorted(MODELS),
        default=defaults.model,
        help=f"the PyG model: GraphSAGE, GCN or GIN (default: {defaults.model})",
    )
    model.add_argument(
        "--num-neighbors",
        nargs="+",
        action=_FanoutAction,
        default=defaults.num_neighbors,
        metavar="N",
        help="fan-out per layer, space- or comma-separated, -1 = all "
        "neighbours; also sets the number of layers (default: "
        f"{' '.join(map(str, defaults.num_neighbors))})",
    )
    _option(model, "--batch-size", int, defaults, "training seed nodes per batch")
    _option(model, "--hidden-channels", int, defaults, "hidden layer width")
    _option(model, "--epochs", int, defaults, "training epochs")
    _option(model, "--lr", float, defaults, "Adam learning rate")
    _option(model, "--dropout", float, defaults, "dropout probability")
    _option(model, "--weight-decay", float, defaults, "Adam weight decay")
    _option(model, "--seed", int, defaults, "random seed")
    hot = parser.add_argument_group("hot/cold split")
    _option(hot, "--hot-ratio", float, defaults, "fraction of vertices made hot")
    hot.add_argument(
        "--hot-method",
        choices=HOT_METHODS,
        default=defaults.hot_method,
        help=f"how hot vertices are chosen (default: {defaults.hot_method})",
    )
    hot.add_argument(
        "--compare",
        action="store_true",
        help="also run with --hot-ratio 0 and print both results",
    )
    run = parser.add_argument_group("execution")
    _option(run, "--device", str, defaults, "auto (CUDA if available), cpu or cuda")
    _option(run, "--num-workers", int, defaults, "DataLoader worker processes")
    _option(run, "--eval-batch-size", int, defaults, "nodes per evaluation batch")
    _option(run, "--eval-every", int, defaults, "evaluate every this many epochs")
    run.add_argument(
        "--no-progress",
        dest="progress",
        action="store_false",
        help="do not show the progress bar",
    )


def _option(
    group: Any, flag: str, kind: type, defaults: TrainConfig, help_text: str
) -> None:
    dest = flag.removeprefix("--").replace("-", "_")
    default = getattr(defaults, dest)
    group.add_argument(
        flag,
        type=kind,
        default=default,
        metavar=dest.upper(),
        help=f"{help_text} (default: {default})",
    )


def _config_from_args(args: argparse.Namespace) -> TrainConfig:
    names = {field.name for field in dataclasses.fields(TrainConfig)}
    return TrainConfig(**{k: v for k, v in vars(args).items() if k in names})


def _header(config: TrainConfig, data: Any, device: str) -> str:
    splits = "/".join(
        str(int(data[key].sum())) for key in ("train_mask", "val_mask", "test_mask")
    )
    return (
        f"dataset: {config.dataset} | nodes {data.num_nodes} | "
        f"edges {data.num_edges} | features {data.num_features} | "
        f"classes {int(data.y.max()) + 1} | train/val/test {splits}\n"
        f"model: {MODELS[config.model].__name__}, {len(config.num_neighbors)} "
        f"layers, hidden "
        f"{config.hidden_channels}, fan-out "
        f"{','.join(map(str, config.num_neighbors))}, batch {config.batch_size}, "
        f"{config.epochs} epochs, hot ratio {config.hot_ratio:g} "
        f"({config.hot_method})\n"
        f"device: {device}"
    )


def _summary(result: TrainResult) -> str:
    return (
        f"best val accuracy: {result.best_val_acc:.4f} (epoch {result.best_epoch}"
        f" of {result.epochs_run})\n"
        f"time per epoch: {result.seconds_per_epoch:.3f} s (training; "
        f"evaluation {result.eval_seconds:.2f} s, total {result.total_seconds:.2f} s)"
        f"\ntest accuracy: {result.test_acc:.4f}"
    )


def _run_train(args: argparse.Namespace) -> int:
    try:
        config = _config_from_args(args)
        device = resolve_device(config.device)
        data = load_data(config)
    except (ValueError, FileNotFoundError) as error:
        return _fail(args.command, error)
    print(_header(config, data, str(device)), flush=True)
    result = train(config, progress=args.progress, data=data)
    if args.compare:
        # The same run, seed and data without hot vertices, for comparison.
        plain = train(
            dataclasses.replace(config, hot_ratio=0.0),
            progress=args.progress,
            data=data,
        )
        print(_comparison(config, result, plain), flush=True)
    print(_summary(result), flush=True)
    return 0


def _comparison(config: TrainConfig, result: TrainResult, plain: TrainResult) -> str:
    rows = [(f"hot ratio {config.hot_ratio:g}", result), ("hot ratio 0", plain)]
    return "\n".join(
        f"{name:<16} test accuracy {r.test_acc:.4f}, best val {r.best_val_acc:.4f}, "
        f"{r.seconds_per_epoch:.3f} s per epoch"
        for name, r in rows
    )


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
    parser.add_argument("--version", action="version", version=__version__)
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
    args = build_parser().parse_args(argv)
    return args.run(args)


def _fail(command: str, error: Exception) -> int:
    print(f"{PROG} {command}: error: {error}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    raise SystemExit(main())
