"""Shared part of the training examples: the options, the training loop, the report.

Not a script of its own: ``train_ogbn_products.py``, ``train_ogbn_papers100m.py``
and ``train_synthetic.py`` import it (Python puts ``examples/`` on the path when
one of them runs). Each loads its graph into a :class:`Task` and calls
:func:`run`, which trains GraphSAGE on :class:`pyg_orch.OrchNeighborLoader`
mini-batches with :class:`pyg_orch.OrchModel`, evaluates every
``--eval-steps`` epochs and prints a summary ending in ``test accuracy: X.XXXX``.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
from torch import Tensor
from torch_geometric import seed_everything
from torch_geometric.data import Data
from torch_geometric.nn import GraphSAGE
from tqdm import tqdm

from pyg_orch import OrchModel, OrchNeighborLoader
from pyg_orch.datasets import default_root
from pyg_orch.hotness import check_hot_ratio
from pyg_orch.train import resolve_device
from pyg_orch.train import train_epoch as run_train_epoch

SPLITS = ("train", "valid", "test")
CACHE_MODES = ("static", "resample", "embedding")
#: Fan-outs per layer when only ``--num-layers`` is given (the last repeats).
DEFAULT_FANOUTS = (15, 10, 5)

#: ``score(y_true, y_pred)``: the accuracy of 1-D predicted labels.
Scorer = Callable[[Tensor, Tensor], float]


@dataclass
class Task:
    """A graph to train on and how to score it.

    Attributes:
        name: shown in the output, e.g. ``"ogbn-products"``.
        data: the graph on the CPU: ``x``, ``edge_index`` and labels ``y``
            (``[N]`` or ``[N, 1]``; only the split nodes' labels are read).
        split: node ids of ``"train"``, ``"valid"`` and ``"test"``.
        num_classes: number of output classes.
        score: the accuracy of a split's predictions.
        full_eval: evaluate with exact layer-wise full-neighbourhood inference
            (:meth:`pyg_orch.OrchModel.inference`, which holds one
            ``[N, hidden]`` tensor per layer); otherwise with sampled
            neighbourhoods (``--num-neighbors``) around the split nodes only.
    """

    name: str
    data: Data
    split: dict[str, Tensor]
    num_classes: int
    score: Scorer
    full_eval: bool = True


@dataclass
class RunResult:
    """The outcome of one run: the evaluation with the best validation accuracy.

    Attributes:
        epoch: the (1-based) epoch of that evaluation.
        accs: accuracy of each split at that epoch.
        seconds_per_epoch: mean wall time of an epoch's training (no evaluation).
        hot_ratio: the hot ratio used (the one chosen, for ``--hot-ratio auto``).
    """

    epoch: int
    accs: dict[str, float]
    seconds_per_epoch: float
    hot_ratio: float


def accuracy(y_true: Tensor, y_pred: Tensor) -> float:
    """The fraction of predictions equal to their label.

    Args:
        y_true: labels, 1-D.
        y_pred: predicted labels, 1-D.

    Returns:
        The accuracy (``nan`` for empty inputs).
    """
    if y_true.numel() == 0:
        return float("nan")
    return float((y_true == y_pred).float().mean())


def ogb_scorer(name: str) -> Scorer:
    """Scores with OGB's own :class:`ogb.nodeproppred.Evaluator` for ``name``.

    Args:
        name: the OGB dataset name, e.g. ``"ogbn-products"``.

    Returns:
        A :data:`Scorer` that passes ``[n, 1]`` labels to ``Evaluator.eval``.
    """
    from ogb.nodeproppred import Evaluator

    evaluator = Evaluator(name)

    def score(y_true: Tensor, y_pred: Tensor) -> float:
        result = evaluator.eval(
            {"y_true": y_true.view(-1, 1), "y_pred": y_pred.view(-1, 1)}
        )
        return float(result["acc"])

    return score


# --------------------------------------------------------------------------
# Options
# --------------------------------------------------------------------------


def _positive_int(value: str) -> int:
    number = int(value)
    if number < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {number}")
    return number


def _hot_ratio(value: str) -> float | str:
    ratio: float | str = value if value == "auto" else float(value)
    try:
        check_hot_ratio(ratio, "--hot-ratio", allow_auto=True)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None
    return ratio


def _bytes_or_auto(value: str) -> int | str:
    if value == "auto":
        return value
    number = int(float(value))  # accepts 2e9 as well as 2000000000
    if number < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0 or 'auto', got {value}")
    return number


def build_parser(doc: str, epochs: int = 20) -> argparse.ArgumentParser:
    """The options every example shares; the script adds its data options.

    Args:
        doc: the script's module docstring (description and usage line).
        epochs: the default of ``--epochs``.

    Returns:
        The parser; read it with :func:`parse_args`.
    """
    parser = argparse.ArgumentParser(
        description=doc, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add = parser.add_argument
    add(
        "--device",
        default="cuda" if torch.cuda.is_available() else "cpu",
        help="cpu, cuda, cuda:<index> or auto (default: %(default)s)",
    )
    add("--epochs", type=_positive_int, default=epochs, help="default: %(default)s")
    add(
        "--runs",
        type=_positive_int,
        default=1,
        help="independent runs, seeded SEED, SEED+1, ...; the summary gives "
        "their mean and standard deviation (default: %(default)s)",
    )
    add(
        "--num-layers",
        type=_positive_int,
        default=None,
        help="GNN layers (default: one per --num-neighbors value)",
    )
    add(
        "--num-neighbors",
        type=int,
        nargs="+",
        default=None,
        metavar="K",
        help="fan-out per layer, -1 for all neighbours; a single value with "
        "--num-layers L serves every layer (default: 15 10 5, cut or padded "
        "with 5 to --num-layers)",
    )
    add(
        "--batch-size",
        type=_positive_int,
        default=1024,
        help="training seed nodes per batch (default: %(default)s)",
    )
    add(
        "--eval-batch-size",
        type=_positive_int,
        default=4096,
        help="nodes per evaluation chunk or batch (default: %(default)s)",
    )
    add("--hidden-channels", type=_positive_int, default=256, help="default: 256")
    add("--lr", type=float, default=0.003, help="Adam's learning rate (default: 0.003)")
    add("--dropout", type=float, default=0.5, help="default: %(default)s")
    add(
        "--eval-steps",
        type=_positive_int,
        default=5,
        help="evaluate every this many epochs, and after the last one "
        "(default: %(default)s)",
    )
    add("--seed", type=int, default=0, help="default: %(default)s")
    orch = parser.add_argument_group("pyg_orch")
    orch.add_argument(
        "--hot-ratio",
        type=_hot_ratio,
        default=0.2,
        help="fraction of the vertices made hot (0: plain NeighborLoader "
        "batches), or 'auto' to measure and choose one (default: %(default)s)",
    )
    orch.add_argument(
        "--cache",
        choices=CACHE_MODES,
        default=None,
        help="how hot values are made (default: static, or embedding when the "
        "bottom layer needs it); needs hot vertices",
    )
    orch.add_argument(
        "--prefetch",
        type=int,
        default=None,
        help="batches prepared ahead on a background thread (default: 4 on "
        "CUDA; 0 on the CPU, where training already keeps the cores busy)",
    )
    orch.add_argument(
        "--device-cache",
        type=_bytes_or_auto,
        default="auto",
        help="bytes of GPU memory for the hot aggregates and the most gathered "
        "feature rows, or 'auto' (half of the free memory); CUDA only "
        "(default: %(default)s)",
    )
    return parser


def add_root_option(parser: argparse.ArgumentParser, folder: str) -> None:
    """Adds ``--root``, the folder that holds the dataset's folder.

    Args:
        parser: from :func:`build_parser`.
        folder: the dataset's folder name, e.g. ``"ogbn_products"``.
    """
    parser.add_argument(
        "--root",
        default=str(default_root()),
        help=f"the folder holding {folder} (default: %(default)s)",
    )


def _fanouts(args: argparse.Namespace, parser: argparse.ArgumentParser) -> list[int]:
    fanouts, layers = args.num_neighbors, args.num_layers
    if fanouts is None:
        last = len(DEFAULT_FANOUTS) - 1
        layers = layers or len(DEFAULT_FANOUTS)
        return [DEFAULT_FANOUTS[min(i, last)] for i in range(layers)]
    if any(k < 1 and k != -1 for k in fanouts):
        parser.error(f"--num-neighbors values must be >= 1 or -1, got {fanouts}")
    if layers is None:
        return list(fanouts)
    if len(fanouts) == 1:
        return fanouts * layers
    if len(fanouts) != layers:
        parser.error(f"--num-neighbors gives {len(fanouts)} fan-outs, not {layers}")
    return list(fanouts)


def parse_args(
    parser: argparse.ArgumentParser, argv: Sequence[str] | None = None
) -> argparse.Namespace:
    """Parses and completes the options.

    Sets ``num_neighbors`` (one fan-out per layer), ``num_layers``, ``device``
    (a :class:`torch.device`) and ``prefetch``.

    Args:
        parser: from :func:`build_parser`, with the script's own options.
        argv: the arguments (``None``: ``sys.argv[1:]``).

    Returns:
        The options.
    """
    args = parser.parse_args(argv)
    args.num_neighbors = _fanouts(args, parser)
    args.num_layers = len(args.num_neighbors)
    try:
        args.device = resolve_device(args.device)
    except ValueError as error:
        parser.error(str(error))
    if args.cache is not None and args.hot_ratio == 0:
        parser.error("--cache needs hot vertices: set --hot-ratio > 0 or auto")
    if not 0 <= args.dropout < 1:
        parser.error(f"--dropout must be in [0, 1), got {args.dropout}")
    if args.prefetch is None:
        args.prefetch = 4 if args.device.type == "cuda" else 0
    return args


# --------------------------------------------------------------------------
# Training and evaluation
# --------------------------------------------------------------------------


def make_loader(
    data: Data, nodes: Tensor, args: argparse.Namespace, train: bool
) -> OrchNeighborLoader:
    """An :class:`~pyg_orch.OrchNeighborLoader` around ``nodes``.

    Batches are delivered to ``args.device`` only when it is a CUDA device; on
    the CPU they stay where ``NeighborLoader`` leaves them.

    Args:
        data: the graph.
        nodes: the seed nodes.
        args: the options.
        train: the shuffled training loader, with the hot vertices and the
            device cache; otherwise an evaluation loader in node order.

    Returns:
        The loader (a context manager that stops its threads on exit).
    """
    cuda = args.device.type == "cuda"
    hot = {}
    if train:
        cache = args.cache if args.hot_ratio != 0 else None
        hot = {"hot_ratio": args.hot_ratio, "cache": cache}
        hot["device_cache"] = args.device_cache if cuda else 0
    return OrchNeighborLoader(
        data,
        num_neighbors=args.num_neighbors,
        input_nodes=nodes,
        batch_size=args.batch_size if train else args.eval_batch_size,
        shuffle=train,
        prefetch=args.prefetch,
        device=args.device if cuda else None,
        **hot,
    )


def train_epoch(
    model: OrchModel,
    loader: OrchNeighborLoader,
    optimizer: torch.optim.Optimizer,
    desc: str,
) -> float:
    """One pass over the training batches, with a tqdm bar.

    Args:
        model: the wrapped GraphSAGE.
        loader: the training loader.
        optimizer: the optimizer of ``model``'s parameters.
        desc: the progress bar's label.

    Returns:
        The mean loss over the seed nodes.
    """
    bar = tqdm(loader, desc=desc, total=len(loader), unit="batch", leave=False)
    return run_train_epoch(model, bar, optimizer)


@torch.no_grad()
def predict(
    model: OrchModel, task: Task, args: argparse.Namespace
) -> dict[str, Tensor]:
    """Predicted labels of every split's nodes.

    Args:
        model: the wrapped GraphSAGE.
        task: the graph, its split and ``full_eval``.
        args: the options (``eval_batch_size``, and for sampled evaluation the
            loader's).

    Returns:
        For each split, the predicted labels of its nodes, in split order.
    """
    model.eval()
    if task.full_eval:
        pred = model.inference(task.data, args.eval_batch_size).argmax(dim=-1)
        return {name: pred[nodes] for name, nodes in task.split.items()}
    nodes = torch.cat([task.split[name] for name in SPLITS])
    with make_loader(task.data, nodes, args, train=False) as loader:
        bar = tqdm(loader, desc="evaluate", unit="batch", leave=False)
        pred = torch.cat([model(batch).argmax(dim=-1).cpu() for batch in bar])
    sizes = [task.split[name].numel() for name in SPLITS]
    return dict(zip(SPLITS, pred.split(sizes), strict=True))


def evaluate(
    model: OrchModel, task: Task, args: argparse.Namespace
) -> dict[str, float]:
    """The accuracy of every split.

    Args:
        model: the wrapped GraphSAGE.
        task: the graph, its split, labels and scorer.
        args: the options.

    Returns:
        ``{"train": ..., "valid": ..., "test": ...}``.
    """
    labels = task.data.y.view(-1)
    pred = predict(model, task, args)
    return {name: task.score(labels[task.split[name]], pred[name]) for name in SPLITS}


def train_run(task: Task, args: argparse.Namespace, run: int) -> RunResult:
    """Trains a fresh GraphSAGE, seeded with ``args.seed + run``.

    Args:
        task: what to train on.
        args: the options.
        run: the run's index, from 0.

    Returns:
        The evaluation with the best validation accuracy (the first on ties).
    """
    seed_everything(args.seed + run)
    gnn = GraphSAGE(
        task.data.num_features,
        args.hidden_channels,
        num_layers=args.num_layers,
        out_channels=task.num_classes,
        dropout=args.dropout,
    ).to(args.device)
    best: RunResult | None = None
    seconds = 0.0
    with make_loader(task.data, task.split["train"], args, train=True) as loader:
        # With --hot-ratio auto, wrapping the model measures and picks a ratio.
        model = OrchModel(gnn, loader)
        optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
        for epoch in range(1, args.epochs + 1):
            tick = time.perf_counter()
            loss = train_epoch(model, loader, optimizer, f"run {run + 1} epoch {epoch}")
            seconds += time.perf_counter() - tick
            if epoch % args.eval_steps and epoch != args.epochs:
                continue
            accs = evaluate(model, task, args)
            tqdm.write(
                f"run {run + 1:02d} epoch {epoch:03d}: loss {loss:.4f}, "
                + ", ".join(f"{name} {accs[name]:.4f}" for name in SPLITS)
            )
            if best is None or accs["valid"] > best.accs["valid"]:
                best = RunResult(epoch, accs, 0.0, float(loader.hot_ratio))
    best.seconds_per_epoch = seconds / args.epochs
    return best


def _mean_std(values: list[float]) -> str:
    if len(values) == 1:
        return f"{values[0]:.4f}"
    return f"{statistics.mean(values):.4f} ± {statistics.stdev(values):.4f}"


def summary(task: Task, args: argparse.Namespace, results: list[RunResult]) -> str:
    """The final report: one line per run, then the mean over runs.

    Args:
        task: what was trained on.
        args: the options.
        results: one per run.

    Returns:
        Lines ending in ``test accuracy: X.XXXX`` (``± std`` with several runs).
    """
    lines = [
        f"{task.name}: {len(results)} run(s) of GraphSAGE, {args.num_layers} "
        f"layers, fan-outs {args.num_neighbors}, device {args.device}"
    ]
    for run, result in enumerate(results, 1):
        lines.append(
            f"run {run}: best valid {result.accs['valid']:.4f} at epoch "
            f"{result.epoch}, test {result.accs['test']:.4f}, hot ratio "
            f"{result.hot_ratio:g}, {result.seconds_per_epoch:.2f} s per epoch"
        )
    for name in SPLITS:
        values = [result.accs[name] for result in results]
        lines.append(f"{name} accuracy: {_mean_std(values)}")
    return "\n".join(lines)


def run(task: Task, args: argparse.Namespace) -> list[RunResult]:
    """Trains ``args.runs`` times and prints the summary.

    Args:
        task: what to train on.
        args: the options from :func:`parse_args`.

    Returns:
        One result per run.
    """
    data, sizes = task.data, {name: task.split[name].numel() for name in SPLITS}
    print(
        f"{task.name}: {data.num_nodes:,} nodes, {data.num_edges:,} edges, "
        f"{data.num_features} features, {task.num_classes} classes; split "
        + "/".join(f"{sizes[name]:,}" for name in SPLITS),
        flush=True,
    )
    results = [train_run(task, args, run) for run in range(args.runs)]
    print(summary(task, args, results), flush=True)
    return results
