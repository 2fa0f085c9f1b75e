"""Shared part of the training examples: the options, the training loop, the report.

Not a script of its own: ``train_ogbn_products.py``, ``train_ogbn_papers100m.py``,
``train_ogbn_mag.py`` and ``train_synthetic.py`` import it (Python puts
``examples/`` on the path when one of them runs). Each loads its graph into a
:class:`Task` and calls :func:`run`, which trains ``--model`` (GraphSAGE by
default) on :class:`pyg_orch.OrchNeighborLoader` mini-batches with
:class:`pyg_orch.OrchModel`, evaluates every ``--eval-every`` epochs and prints
a summary ending in ``test accuracy: X.XXXX``. A heterogeneous graph
(``Task.input_type`` set) brings its own model through ``run``'s ``train_run``,
which hands it to :func:`fit`. The options are those of ``pyg-orch train``
(:mod:`pyg_orch.options`), with defaults for larger graphs.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor
from torch_geometric import seed_everything
from torch_geometric.data import Data, HeteroData
from tqdm import tqdm

from pyg_orch import OrchModel, OrchNeighborLoader
from pyg_orch.datasets import default_root
from pyg_orch.options import (
    HOT_OPTIONS,
    TRAINING_OPTIONS,
    add_execution_options,
    add_option,
    config_from_args,
    positive_int,
)
from pyg_orch.train import build_model, pipeline_arguments, resolve_device
from pyg_orch.train import train_epoch as run_train_epoch
from pyg_orch.train_config import MODELS, TrainConfig

SPLITS = ("train", "valid", "test")

#: ``score(y_true, y_pred)``: the accuracy of 1-D predicted labels.
Scorer = Callable[[Tensor, Tensor], float]


@dataclass
class Task:
    """A graph to train on and how to score it.

    Attributes:
        name: shown in the output, e.g. ``"ogbn-products"``.
        data: the graph on the CPU: ``x``, ``edge_index`` and labels ``y``
            (``[N]`` or ``[N, 1]``; only the split nodes' labels are read); or
            a :class:`~torch_geometric.data.HeteroData` graph whose
            ``input_type`` nodes have the labels.
        split: node ids of ``"train"``, ``"valid"`` and ``"test"`` (of the
            ``input_type`` nodes on a heterogeneous graph).
        num_classes: number of output classes.
        score: the accuracy of a split's predictions.
        full_eval: evaluate with exact layer-wise full-neighbourhood inference
            (:meth:`pyg_orch.OrchModel.inference`, which holds one
            ``[N, hidden]`` tensor per layer); otherwise with sampled
            neighbourhoods (``--num-neighbors``) around the split nodes only
            (always, on a heterogeneous graph).
        input_type: the node type of the split nodes when ``data`` is a
            :class:`~torch_geometric.data.HeteroData` graph, else ``None``.
    """

    name: str
    data: Data | HeteroData
    split: dict[str, Tensor]
    num_classes: int
    score: Scorer
    full_eval: bool = True
    input_type: str | None = None

    @property
    def labelled(self) -> Any:
        """The graph's store of the split nodes: ``data``, or its ``input_type``."""
        return self.data if self.input_type is None else self.data[self.input_type]


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


#: ``train_run(task, args, run)``: one seeded run, as :func:`train_run` does it.
TrainRun = Callable[[Task, argparse.Namespace, int], RunResult]


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


def build_parser(
    doc: str,
    epochs: int = 20,
    changes: Mapping[str, Mapping[str, Any]] | None = None,
) -> argparse.ArgumentParser:
    """The options every example shares; the script adds its data options.

    They are the options of ``pyg-orch train`` with defaults for graphs larger
    than Cora: batches of 1024 seeds, evaluation every 5 epochs.

    Args:
        doc: the script's module docstring (description and usage line).
        epochs: the default of ``--epochs``.
        changes: per training or hot option (``"hot_ratio"``), the
            :func:`~pyg_orch.options.add_option` keywords that differ in this
            script: a ``help`` that says more, fewer ``choices``.

    Returns:
        The parser; read it with :func:`parse_args`.
    """
    defaults = TrainConfig(
        batch_size=1024, epochs=epochs, eval_every=5, hot_ratio=0.0
    )
    changes = changes or {}
    parser = argparse.ArgumentParser(
        description=doc, formatter_class=argparse.RawDescriptionHelpFormatter
    )

    def add_group(title: str, names: Sequence[str]) -> argparse._ArgumentGroup:
        group = parser.add_argument_group(title)
        for name in names:
            add_option(group, name, getattr(defaults, name), **changes.get(name, {}))
        return group

    training = add_group("model and training", TRAINING_OPTIONS)
    training.add_argument(
        "--runs",
        type=positive_int,
        default=1,
        help="independent runs, seeded SEED, SEED+1, ...; the summary gives "
        "their mean and standard deviation (default: %(default)s)",
    )
    add_group("hot/cold split", HOT_OPTIONS)
    add_execution_options(parser.add_argument_group("execution"), defaults)
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


def parse_args(
    parser: argparse.ArgumentParser, argv: Sequence[str] | None = None
) -> argparse.Namespace:
    """Parses and checks the options.

    Sets ``config`` (the :class:`~pyg_orch.train_config.TrainConfig` of the shared
    options, which the training code reads), ``device`` (a
    :class:`torch.device`) and ``pipeline`` (the loaders' ``prefetch``,
    ``device`` and ``device_cache``).

    Args:
        parser: from :func:`build_parser`, with the script's own options.
        argv: the arguments (``None``: ``sys.argv[1:]``).

    Returns:
        The options.
    """
    args = parser.parse_args(argv)
    try:
        args.config = config_from_args(args)
        args.device = resolve_device(args.config.device)
    except ValueError as error:
        parser.error(str(error))
    args.pipeline = pipeline_arguments(args.config, args.device)
    return args


# --------------------------------------------------------------------------
# Training and evaluation
# --------------------------------------------------------------------------


def make_loader(
    data: Data | HeteroData,
    nodes: Tensor,
    args: argparse.Namespace,
    train: bool,
    input_type: str | None = None,
) -> OrchNeighborLoader:
    """An :class:`~pyg_orch.OrchNeighborLoader` around ``nodes``.

    Batches are delivered to ``args.device`` only when it is a CUDA device; on
    the CPU they stay where ``NeighborLoader`` leaves them.

    Args:
        data: the graph.
        nodes: the seed nodes.
        args: the options.
        train: the shuffled training loader, with the hot vertices, the
            worker processes and the device cache; otherwise an evaluation
            loader in node order.
        input_type: the node type of ``nodes`` on a heterogeneous graph.

    Returns:
        The loader (a context manager that stops its threads on exit).
    """
    config = args.config
    if train:
        extra = {
            "hot_ratio": config.hot_ratio,
            "hot_method": config.hot_method,
            "cache": config.cache,
            "num_workers": config.num_workers,
            "persistent_workers": config.num_workers > 0,
            **args.pipeline,
        }
    else:
        extra = {**args.pipeline, "device_cache": 0}
    return OrchNeighborLoader(
        data,
        num_neighbors=list(config.num_neighbors),
        input_nodes=nodes if input_type is None else (input_type, nodes),
        batch_size=config.batch_size if train else config.eval_batch_size,
        shuffle=train,
        **extra,
    )


def _seeds_on_top(batches: Iterable[HeteroData], input_type: str) -> Iterator[Any]:
    # pyg_orch.train.train_epoch reads the seeds' labels as batch.y and their
    # number as batch.batch_size: lift those of the seed node type to the top
    # of each heterogeneous batch, so the one training loop serves both kinds.
    for batch in batches:
        seeds = batch[input_type]
        batch.y, batch.batch_size = seeds.y, seeds.batch_size
        yield batch


def train_epoch(
    model: torch.nn.Module,
    loader: OrchNeighborLoader,
    optimizer: torch.optim.Optimizer,
    desc: str,
    progress: bool,
    input_type: str | None = None,
) -> float:
    """One pass over the training batches, with a tqdm bar.

    Args:
        model: the wrapped model: an :class:`~pyg_orch.OrchModel`, or any
            module whose ``model(batch)`` gives the seed nodes' logits.
        loader: the training loader.
        optimizer: the optimizer of ``model``'s parameters.
        desc: the progress bar's label.
        progress: show the bar.
        input_type: the seeds' node type when the batches are heterogeneous.

    Returns:
        The mean loss over the seed nodes.
    """
    bar = tqdm(
        loader,
        desc=desc,
        total=len(loader),
        unit="batch",
        leave=False,
        disable=not progress,
    )
    batches = bar if input_type is None else _seeds_on_top(bar, input_type)
    return run_train_epoch(model, batches, optimizer)


@torch.no_grad()
def predict(
    model: torch.nn.Module, task: Task, args: argparse.Namespace
) -> dict[str, Tensor]:
    """Predicted labels of every split's nodes.

    Args:
        model: the wrapped model (see :func:`train_epoch`); full-neighbourhood
            evaluation needs an :class:`~pyg_orch.OrchModel`.
        task: the graph, its split and ``full_eval``.
        args: the options (``eval_batch_size``, and for sampled evaluation the
            loader's).

    Returns:
        For each split, the predicted labels of its nodes, in split order.
    """
    model.eval()
    if task.full_eval:
        logits = model.inference(task.data, args.config.eval_batch_size)
        pred = logits.argmax(dim=-1)
        return {name: pred[nodes] for name, nodes in task.split.items()}
    nodes = torch.cat([task.split[name] for name in SPLITS])
    with make_loader(task.data, nodes, args, False, task.input_type) as loader:
        bar = tqdm(
            loader,
            desc="evaluate",
            unit="batch",
            leave=False,
            disable=not args.progress,
        )
        pred = torch.cat([model(batch).argmax(dim=-1).cpu() for batch in bar])
    sizes = [task.split[name].numel() for name in SPLITS]
    return dict(zip(SPLITS, pred.split(sizes), strict=True))


def evaluate(
    model: torch.nn.Module, task: Task, args: argparse.Namespace
) -> dict[str, float]:
    """The accuracy of every split.

    Args:
        model: the wrapped model.
        task: the graph, its split, labels and scorer.
        args: the options.

    Returns:
        ``{"train": ..., "valid": ..., "test": ...}``.
    """
    labels = task.labelled.y.view(-1)
    pred = predict(model, task, args)
    return {name: task.score(labels[task.split[name]], pred[name]) for name in SPLITS}


def train_run(task: Task, args: argparse.Namespace, run: int) -> RunResult:
    """Trains a fresh ``--model``, seeded with ``--seed`` + ``run``.

    Args:
        task: what to train on.
        args: the options.
        run: the run's index, from 0.

    Returns:
        The evaluation with the best validation accuracy (the first on ties).
    """
    config = args.config
    seed_everything(config.seed + run)
    gnn = build_model(config, task.data.num_features, task.num_classes)
    gnn = gnn.to(args.device)
    with make_loader(task.data, task.split["train"], args, train=True) as loader:
        # With --hot-ratio auto, wrapping the model measures and picks a ratio.
        return fit(OrchModel(gnn, loader), loader, task, args, run)


def fit(
    model: torch.nn.Module,
    loader: OrchNeighborLoader,
    task: Task,
    args: argparse.Namespace,
    run: int,
) -> RunResult:
    """Trains ``model`` for ``--epochs`` with Adam, evaluating as it goes.

    Args:
        model: the wrapped model, on ``args.device`` (see :func:`train_epoch`).
        loader: the training loader, from :func:`make_loader`.
        task: what to train on.
        args: the options.
        run: the run's index, from 0.

    Returns:
        The evaluation with the best validation accuracy (the first on ties).
    """
    config = args.config
    best: RunResult | None = None
    seconds = 0.0
    optimizer = torch.optim.Adam(
        model.parameters(), lr=config.lr, weight_decay=config.weight_decay
    )
    for epoch in range(1, config.epochs + 1):
        tick = time.perf_counter()
        desc = f"run {run + 1} epoch {epoch}"
        loss = train_epoch(
            model, loader, optimizer, desc, args.progress, task.input_type
        )
        seconds += time.perf_counter() - tick
        if epoch % config.eval_every and epoch != config.epochs:
            continue
        accs = evaluate(model, task, args)
        tqdm.write(
            f"run {run + 1:02d} epoch {epoch:03d}: loss {loss:.4f}, "
            + ", ".join(f"{name} {accs[name]:.4f}" for name in SPLITS)
        )
        if best is None or accs["valid"] > best.accs["valid"]:
            best = RunResult(epoch, accs, 0.0, float(loader.hot_ratio))
    best.seconds_per_epoch = seconds / config.epochs
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
    config = args.config
    lines = [
        f"{task.name}: {len(results)} run(s) of {MODELS[config.model].__name__}, "
        f"{len(config.num_neighbors)} layers, fan-outs {list(config.num_neighbors)}, "
        f"device {args.device}"
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


def run(
    task: Task, args: argparse.Namespace, train_run: TrainRun = train_run
) -> list[RunResult]:
    """Trains ``args.runs`` times and prints the summary.

    Args:
        task: what to train on.
        args: the options from :func:`parse_args`.
        train_run: one seeded run (a heterogeneous graph brings its own).

    Returns:
        One result per run.
    """
    data, sizes = task.data, {name: task.split[name].numel() for name in SPLITS}
    types = ""
    if isinstance(data, HeteroData):
        types = (
            f" ({len(data.node_types)} node types, {len(data.edge_types)} edge types)"
        )
    print(
        f"{task.name}: {data.num_nodes:,} nodes, {data.num_edges:,} edges{types}, "
        f"{task.labelled.num_features} features, {task.num_classes} classes; split "
        + "/".join(f"{sizes[name]:,}" for name in SPLITS),
        flush=True,
    )
    results = [train_run(task, args, run) for run in range(args.runs)]
    print(summary(task, args, results), flush=True)
    return results
