"""Command-line options shared by ``pyg-orch train``, the examples and the benchmarks.

Each option is defined once here: its flag, type, choices, unit and help line.
A script adds whole groups with :func:`add_training_options`,
:func:`add_hot_options` and :func:`add_execution_options`, or single options
with :func:`add_option`. Defaults come from a
:class:`~pyg_orch.train_config.TrainConfig` (its fields are the option names), so a
script changes a default by passing its own config, never an option's meaning;
every help line ends in the default. Values are checked as they are parsed:
a bad one exits with status 2 and a message naming the option.

Example:
    >>> parser = argparse.ArgumentParser()
    >>> add_hot_options(parser, TrainConfig())
    >>> args = parser.parse_args(["--hot-ratio", "auto", "--cache", "resample"])
    >>> args.hot_ratio, args.cache, args.prefetch
    ('auto', 'resample', None)
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from pyg_orch.hot.cache import CACHE_MODES
from pyg_orch.hot.choice import HOT_METHODS, check_hot_ratio
from pyg_orch.nn.model_checks import PRECISIONS
from pyg_orch.train_config import MODELS, TrainConfig

__all__ = [
    "EXECUTION_OPTIONS",
    "HOT_OPTIONS",
    "TRAINING_OPTIONS",
    "add_execution_options",
    "add_graph_options",
    "add_hot_options",
    "add_option",
    "add_rank_options",
    "add_training_options",
    "bytes_or_auto",
    "config_from_args",
    "hot_fraction",
    "hot_ratio",
    "non_negative_int",
    "parse_fanouts",
    "positive_int",
]

#: Options of the model and its training, in help order.
TRAINING_OPTIONS = (
    "model",
    "num_neighbors",
    "hidden_channels",
    "dropout",
    "batch_size",
    "epochs",
    "lr",
    "weight_decay",
    "eval_batch_size",
    "eval_every",
    "precision",
)
#: Options of the hot/cold split and the pipeline that feeds it.
HOT_OPTIONS = ("hot_ratio", "hot_method", "cache", "prefetch", "device_cache")
#: Where and how the run executes (``--no-progress`` comes with them).
EXECUTION_OPTIONS = ("device", "num_workers", "seed")

# What options are added to: a parser or one of its argument groups.
_Container = argparse.ArgumentParser | argparse._ArgumentGroup


def _int_at_least(value: str, minimum: int) -> int:
    try:
        number = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expects an integer, got {value!r}") from None
    if number < minimum:
        raise argparse.ArgumentTypeError(f"must be >= {minimum}, got {number}")
    return number


def positive_int(value: str) -> int:
    """Parses an integer >= 1 (a batch size, a number of epochs).

    Raises:
        argparse.ArgumentTypeError: not an integer, or < 1.

    Example:
        >>> positive_int("64")
        64
    """
    return _int_at_least(value, 1)


def positive_float(value: str) -> float:
    """Parses a number > 0 (a scale).

    Raises:
        argparse.ArgumentTypeError: not a number, or not > 0.

    Example:
        >>> positive_float("0.5")
        0.5
    """
    try:
        number = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expects a number, got {value!r}") from None
    if not number > 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {number}")
    return number


def non_negative_int(value: str) -> int:
    """Parses an integer >= 0 (a seed, a number of workers).

    Raises:
        argparse.ArgumentTypeError: not an integer, or < 0.

    Example:
        >>> non_negative_int("0")
        0
    """
    return _int_at_least(value, 0)


def _checked_hot_ratio(value: str, allow_auto: bool) -> float | str:
    try:
        ratio: float | str = float(value)
    except ValueError:
        ratio = value  # "auto", or text that check_hot_ratio refuses
    try:
        check_hot_ratio(ratio, "the hot ratio", allow_auto=allow_auto)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None
    return ratio


def hot_ratio(value: str) -> float | str:
    """Parses a hot ratio: a fraction of the vertices in [0, 1], or ``"auto"``.

    Raises:
        argparse.ArgumentTypeError: anything else (the message says what fits).

    Example:
        >>> hot_ratio("0.2"), hot_ratio("auto")
        (0.2, 'auto')
    """
    return _checked_hot_ratio(value, allow_auto=True)


def hot_fraction(value: str) -> float:
    """Parses a hot ratio where ``"auto"`` cannot be measured: a fraction in [0, 1].

    Raises:
        argparse.ArgumentTypeError: anything else.

    Example:
        >>> hot_fraction("0.1")
        0.1
    """
    return _checked_hot_ratio(value, allow_auto=False)


def bytes_or_auto(value: str) -> int | str:
    """Parses a number of bytes >= 0 (``2e9`` too) or ``"auto"``.

    Raises:
        argparse.ArgumentTypeError: anything else.

    Example:
        >>> bytes_or_auto("2e9"), bytes_or_auto("auto")
        (2000000000, 'auto')
    """
    if value == "auto":
        return value
    try:
        number = int(float(value))
    except (ValueError, OverflowError):
        number = -1
    if number < 0:
        raise argparse.ArgumentTypeError(
            f"expects a number of bytes >= 0 or 'auto', got {value!r}"
        )
    return number


def parse_fanouts(values: Sequence[str]) -> list[int]:
    """Parses ``--num-neighbors`` values: space- and/or comma-separated ints.

    Args:
        values: the strings after ``--num-neighbors``.

    Returns:
        The fan-outs, one per layer.

    Raises:
        argparse.ArgumentTypeError: a value is not an integer.

    Example:
        >>> parse_fanouts(["15", "10", "5"])
        [15, 10, 5]
        >>> parse_fanouts(["15,10,5"])
        [15, 10, 5]
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
    return fanouts


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


@dataclass(frozen=True)
class _Option:
    """One option: its help text and the ``add_argument`` keywords besides it."""

    help: str
    arguments: dict[str, Any] = field(default_factory=dict)
    # What a default of None means, shown as the default.
    when_none: str = "none"


_MODEL_NAMES = ", ".join(f"{name} ({cls.__name__})" for name, cls in MODELS.items())

_OPTIONS: dict[str, _Option] = {
    "dataset": _Option(
        "cora, citeseer, pubmed, ogbn-*, power-law/synthetic, or a path to an "
        ".npz file",
    ),
    "root": _Option(
        "dataset download/cache directory",
        when_none="$PYG_ORCH_HOME or ~/.cache/pyg_orch",
    ),
    "model": _Option(
        f"the PyG model: {_MODEL_NAMES}; gcn only with --hot-ratio 0",
        {"choices": tuple(MODELS)},
    ),
    "num_neighbors": _Option(
        "fan-out per layer, space- or comma-separated, -1 = all neighbours; "
        "also sets the number of layers",
        {"nargs": "+", "action": _FanoutAction, "metavar": "N"},
    ),
    "hidden_channels": _Option(
        "hidden layer width", {"type": positive_int, "metavar": "WIDTH"}
    ),
    "dropout": _Option(
        "dropout probability between layers, in [0, 1)",
        {"type": float, "metavar": "P"},
    ),
    "batch_size": _Option(
        "training seed nodes per batch", {"type": positive_int, "metavar": "NODES"}
    ),
    "epochs": _Option(
        "passes over the training nodes", {"type": positive_int, "metavar": "EPOCHS"}
    ),
    "lr": _Option("Adam learning rate, > 0", {"type": float}),
    "weight_decay": _Option("Adam weight decay (L2 penalty), >= 0", {"type": float}),
    "eval_batch_size": _Option(
        "nodes per evaluation batch", {"type": positive_int, "metavar": "NODES"}
    ),
    "eval_every": _Option(
        "evaluate every this many epochs, and after the last one",
        {"type": positive_int, "metavar": "EPOCHS"},
    ),
    "precision": _Option(
        "train under autocast in bf16 (features kept in bf16 too) or fp16 "
        "(CUDA only, with a grad scaler), float32 master weights; evaluation "
        "stays fp32",
        {"choices": list(PRECISIONS)},
    ),
    "hot_ratio": _Option(
        "fraction of the vertices made hot, in [0, 1] (0: none, plain "
        "NeighborLoader batches; NeutronOrch sweeps 0.05-0.25; README's 'When it "
        "pays' says when it helps), or "
        "'auto' to time the ratios 0-0.3 (medians of 3 rounds) and keep the one "
        "with the cheapest batch, a larger one only if at least 5%% cheaper than "
        "the best smaller one (the table is printed)",
        {"type": hot_ratio, "metavar": "RATIO"},
        when_none="0.2, or 0 with --model gcn",
    ),
    "hot_method": _Option(
        "how hot vertices are chosen: presample (the frontier nodes most often "
        "sampled) or degree (highest in-degree)",
        {"choices": HOT_METHODS},
    ),
    "cache": _Option(
        "how hot values are made: static (exact full-neighbourhood aggregation, "
        "once), resample (re-sampled in the background) or embedding (bottom "
        "layer outputs, for GAT); needs hot vertices",
        {"choices": CACHE_MODES},
        when_none="static, or embedding for gat",
    ),
    "prefetch": _Option(
        "batches prepared ahead by a background thread (0: none)",
        {"type": non_negative_int, "metavar": "BATCHES"},
        when_none="4 on CUDA, 0 on the CPU",
    ),
    "device_cache": _Option(
        "bytes of GPU memory for the hot aggregates and the most gathered "
        "feature rows (e.g. 2e9), or 'auto' for half of the free memory; used "
        "on CUDA only",
        {"type": bytes_or_auto, "metavar": "BYTES"},
    ),
    "device": _Option("auto (CUDA if available), cpu, cuda or cuda:<index>"),
    "num_workers": _Option(
        "DataLoader worker processes (0: batches made in the main process)",
        {"type": non_negative_int, "metavar": "WORKERS"},
    ),
    "seed": _Option(
        "random seed of the graph or split, the model, shuffling and sampling",
        {"type": non_negative_int},
    ),
}


def _shown(default: Any, option: _Option) -> str:
    if default is None:
        return option.when_none
    if isinstance(default, list | tuple):
        return " ".join(map(str, default))
    return str(default)


def add_option(parser: _Container, name: str, default: Any, **changes: Any) -> None:
    """Adds the shared option ``name`` (``--name-with-dashes``) with a default.

    Args:
        parser: the parser, or one of its argument groups.
        name: the option's destination, a field of
            :class:`~pyg_orch.train_config.TrainConfig` (``"batch_size"``).
        default: its default in this script; the help line ends with it.
        **changes: ``add_argument`` keywords that replace the shared ones
            (e.g. ``type=hot_fraction`` where ``"auto"`` cannot work, or a
            ``help`` that says more).

    Example:
        >>> parser = argparse.ArgumentParser()
        >>> add_option(parser, "batch_size", 1024)
        >>> parser.parse_args(["--batch-size", "64"]).batch_size
        64
    """
    option = _OPTIONS[name]
    arguments = {**option.arguments, **changes}
    text = arguments.pop("help", option.help)
    parser.add_argument(
        "--" + name.replace("_", "-"),
        dest=name,
        default=default,
        help=f"{text} (default: {_shown(default, option)})",
        **arguments,
    )


def _add_options(
    parser: _Container, names: Sequence[str], defaults: TrainConfig
) -> None:
    for name in names:
        add_option(parser, name, getattr(defaults, name))


def add_training_options(parser: _Container, defaults: TrainConfig) -> None:
    """Adds the model and training options, :data:`TRAINING_OPTIONS`.

    Args:
        parser: the parser, or one of its argument groups.
        defaults: the defaults of this script.

    Example:
        >>> parser = argparse.ArgumentParser()
        >>> add_training_options(parser, TrainConfig(epochs=5))
        >>> parser.parse_args(["--num-neighbors", "10,5"]).num_neighbors
        [10, 5]
    """
    _add_options(parser, TRAINING_OPTIONS, defaults)


def add_hot_options(parser: _Container, defaults: TrainConfig) -> None:
    """Adds the hot/cold split and pipeline options, :data:`HOT_OPTIONS`.

    Args:
        parser: the parser, or one of its argument groups.
        defaults: the defaults of this script.

    Example:
        >>> parser = argparse.ArgumentParser()
        >>> add_hot_options(parser, TrainConfig())
        >>> parser.parse_args(["--device-cache", "1e9"]).device_cache
        1000000000
    """
    _add_options(parser, HOT_OPTIONS, defaults)


def add_execution_options(parser: _Container, defaults: TrainConfig) -> None:
    """Adds :data:`EXECUTION_OPTIONS` and ``--no-progress`` (sets ``progress``).

    Args:
        parser: the parser, or one of its argument groups.
        defaults: the defaults of this script.

    Example:
        >>> parser = argparse.ArgumentParser()
        >>> add_execution_options(parser, TrainConfig())
        >>> args = parser.parse_args(["--no-progress"])
        >>> args.device, args.progress
        ('auto', False)
    """
    _add_options(parser, EXECUTION_OPTIONS, defaults)
    parser.add_argument(
        "--no-progress",
        dest="progress",
        action="store_false",
        help="do not show progress bars (default: shown)",
    )


def add_rank_options(parser: _Container, batch_size: int, hot_ratio: float) -> None:
    """Adds ``--batch-size`` and ``--hot-ratio`` as data-parallel ranks read them.

    The batch is per rank. The hot set is chosen once, on rank 0, and
    broadcast, so ``"auto"`` (which measures one process) is not offered.

    Args:
        parser: the parser, or one of its argument groups.
        batch_size: the default of ``--batch-size``.
        hot_ratio: the default of ``--hot-ratio``.

    Example:
        >>> parser = argparse.ArgumentParser()
        >>> add_rank_options(parser, batch_size=64, hot_ratio=0.1)
        >>> parser.parse_args(["--hot-ratio", "0.2"]).hot_ratio
        0.2
    """
    add_option(
        parser,
        "batch_size",
        batch_size,
        help="training seed nodes per batch, per rank",
    )
    add_option(
        parser,
        "hot_ratio",
        hot_ratio,
        type=hot_fraction,
        help="fraction of the vertices made hot, in [0, 1] (0: none); chosen "
        "once, on rank 0",
    )


def add_graph_options(parser: _Container, num_nodes: int, num_features: int) -> None:
    """Adds the options of a synthetic power-law graph.

    ``--num-nodes``, ``--avg-degree`` and ``--num-features``: the arguments of
    :func:`~pyg_orch.datasets.power_law_graph` (its seed is ``--seed``).

    Args:
        parser: the parser, or one of its argument groups.
        num_nodes: the default of ``--num-nodes``.
        num_features: the default of ``--num-features``.

    Example:
        >>> parser = argparse.ArgumentParser()
        >>> add_graph_options(parser, num_nodes=1000, num_features=8)
        >>> parser.parse_args([]).avg_degree
        20.0
    """
    parser.add_argument(
        "--num-nodes",
        type=positive_int,
        default=num_nodes,
        help="vertices of the power-law graph (default: %(default)s)",
    )
    parser.add_argument(
        "--avg-degree",
        type=float,
        default=20.0,
        help="mean degree: the graph has about NUM_NODES x this many directed "
        "edges (default: %(default)s)",
    )
    parser.add_argument(
        "--num-features",
        type=positive_int,
        default=num_features,
        help="feature columns per vertex (default: %(default)s)",
    )


def config_from_args(args: argparse.Namespace) -> TrainConfig:
    """The :class:`~pyg_orch.train_config.TrainConfig` of the parsed options.

    Options that are not config fields are left out; fields without an option
    keep their defaults.

    Args:
        args: what ``parse_args`` returned.

    Returns:
        The checked config.

    Raises:
        ValueError: a value or a combination the run cannot use; the message
            names the option.

    Example:
        >>> config_from_args(argparse.Namespace(epochs=3, runs=2)).epochs
        3
    """
    names = {field.name for field in dataclasses.fields(TrainConfig)}
    return TrainConfig(**{k: v for k, v in vars(args).items() if k in names})
