"""Train a heterogeneous GraphSAGE on ogbn-mag with OrchNeighborLoader.

Usage:
    python examples/train_ogbn_mag.py --root ~/data/ogb

ogbn-mag is a heterogeneous academic graph: papers, authors, institutions and
fields of study, joined by four relations (author writes paper, paper cites
paper, paper has topic field of study, author is affiliated with institution).
The task is a paper's venue (349 classes), split by year (train before 2018,
valid 2018, test 2019). The dataset comes through OGB's own
PygNodePropPredDataset, which downloads it into ROOT/ogbn_mag on first use
(OGB asks before it downloads) and processes it once.

The graph becomes a PyG HeteroData made undirected (T.ToUndirected(merge=True):
every relation gets its reverse, so every node type receives messages). Only
papers have features; every other node type gets the mean of its neighbours'
features, filled in type by type (authors and fields of study from their
papers, then institutions from their authors). PyG's torch_geometric.nn.to_hetero
turns --model (GraphSAGE by default) into one network per relation, which
OrchModel wraps. OrchNeighborLoader samples --num-neighbors per relation
around the training papers, with its Numba sampler (neither pyg-lib nor
torch-sparse is needed). With --hot-ratio, that fraction of every node type
is hot: the last hop does not expand hot nodes, and OrchModel feeds each hot
node's exact full-neighbourhood aggregate per relation to the bottom layer.
Evaluation samples around the train, valid and test papers and is scored by
OGB's Evaluator.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

import torch
import torch_geometric.transforms as T
from _common import (
    SPLITS,
    RunResult,
    Task,
    add_root_option,
    build_parser,
    fit,
    make_loader,
    ogb_scorer,
    parse_args,
    run,
)
from ogb.nodeproppred import PygNodePropPredDataset
from torch import Tensor
from torch_geometric import seed_everything
from torch_geometric.data import Data, HeteroData
from torch_geometric.nn import to_hetero

from pyg_orch import OrchModel
from pyg_orch.datasets import pyg_pickle_classes
from pyg_orch.train import build_model

NAME = "ogbn-mag"
FOLDER = "ogbn_mag"
#: The node type with features, labels and the split.
PAPER = "paper"
#: --model choices: those whose layers pass messages between two node types.
HETERO_MODELS = ("sage", "gin")
# Edges whose source rows fill_features gathers at once (128 MB of 128 floats).
_EDGE_CHUNK = 1 << 18


def to_heterodata(graph: Data) -> HeteroData:
    """OGB's ogbn-mag graph as an undirected PyG HeteroData with every type's ``x``.

    Args:
        graph: ``PygNodePropPredDataset('ogbn-mag')[0]``: a ``Data`` object
            holding ``num_nodes_dict``, ``edge_index_dict``, ``x_dict`` and
            ``y_dict`` (papers only).

    Returns:
        The graph with ``x`` on every node type (see :func:`fill_features`)
        and ``y`` (``[N]``) on the papers.
    """
    data = HeteroData()
    for node_type, num_nodes in graph.num_nodes_dict.items():
        data[node_type].num_nodes = num_nodes
    for node_type, x in graph.x_dict.items():
        data[node_type].x = x
    data[PAPER].y = graph.y_dict[PAPER].view(-1)
    for edge_type, edge_index in graph.edge_index_dict.items():
        data[edge_type].edge_index = edge_index
    # merge=True keeps paper-cites-paper a single (now undirected) relation and
    # adds rev_* relations for the others.
    data = T.ToUndirected(merge=True)(data)
    fill_features(data)
    return data


def fill_features(data: HeteroData) -> None:
    """Gives each node type without ``x`` the mean ``x`` of its in-neighbours.

    Round by round: a type whose in-neighbours (over all relations into it)
    include nodes with features gets the mean of those features, and a later
    round can use it. Each round reads only features from earlier rounds, so
    the relations' order does not matter. A node without such neighbours, or
    a type that none reaches, gets zeros.

    Args:
        data: the graph, changed in place; at least one node type has ``x``.
    """
    missing = [t for t in data.node_types if "x" not in data[t]]
    while missing:
        filled: dict[str, Tensor] = {}
        for node_type in missing:
            num_nodes = data[node_type].num_nodes
            total, count = None, torch.zeros(num_nodes)
            for (src, _, dst), edge_index in data.edge_index_dict.items():
                if dst != node_type or "x" not in data[src]:
                    continue
                x = data[src].x
                if total is None:
                    total = torch.zeros(num_nodes, x.size(-1), dtype=x.dtype)
                # A chunk of edges at a time: one row per edge at once would
                # take 3.6 GB for ogbn-mag's 7M authorships of 128 floats.
                for chunk in edge_index.split(_EDGE_CHUNK, dim=1):
                    total.index_add_(0, chunk[1], x[chunk[0]])
                count += torch.bincount(edge_index[1], minlength=num_nodes)
            if total is not None:
                filled[node_type] = total / count.clamp(min=1).unsqueeze(-1)
        if not filled:
            # Types no featured node reaches: zeros, so the model still runs.
            width = next(store.x.size(-1) for store in data.node_stores if "x" in store)
            filled = {t: torch.zeros(data[t].num_nodes, width) for t in missing}
        for node_type, x in filled.items():
            data[node_type].x = x
        missing = [t for t in missing if t not in filled]


def load_task(root: str) -> Task:
    """Loads ogbn-mag (downloading and processing it when needed).

    Args:
        root: the folder that holds (or receives) ``ogbn_mag``.

    Returns:
        The heterogeneous graph with OGB's time split of the papers and its
        Evaluator.
    """
    with torch.serialization.safe_globals(pyg_pickle_classes()):
        dataset = PygNodePropPredDataset(name=NAME, root=root)
        split = dataset.get_idx_split()
    return Task(
        NAME,
        to_heterodata(dataset[0]),
        {name: split[name][PAPER] for name in SPLITS},
        dataset.num_classes,
        ogb_scorer(NAME),
        full_eval=False,
        input_type=PAPER,
    )


def train_run(task: Task, args: argparse.Namespace, run: int) -> RunResult:
    """Trains a fresh heterogeneous ``--model``, seeded with ``--seed`` + ``run``.

    Args:
        task: the heterogeneous graph (``input_type`` set).
        args: the options.
        run: the run's index, from 0.

    Returns:
        The evaluation with the best validation accuracy.
    """
    config = args.config
    seed_everything(config.seed + run)
    data = task.data
    # Every node type has features of the papers' width, so the layers need
    # no lazy initialisation.
    gnn = build_model(config, data[task.input_type].num_features, task.num_classes)
    gnn = to_hetero(gnn, data.metadata(), aggr="sum").to(args.device)
    train = task.split["train"]
    with make_loader(data, train, args, True, task.input_type) as loader:
        return fit(OrchModel(gnn, loader), loader, task, args, run)


def main(argv: Sequence[str] | None = None) -> None:
    """Loads ogbn-mag, trains and prints the summary; ``argv``: the options."""
    parser = build_parser(
        __doc__,
        epochs=10,
        changes={
            "model": {
                "choices": HETERO_MODELS,
                "help": "the PyG model, made heterogeneous by to_hetero: sage "
                "(GraphSAGE) or gin (GIN); gcn and gat add self-loops, which "
                "relations between two node types do not have",
            },
            "hot_ratio": {
                "help": "fraction of each node type's vertices made hot, in "
                "[0, 1] (the cache is static: exact full-neighbourhood "
                "aggregates per relation)",
            },
        },
    )
    add_root_option(parser, FOLDER)
    args = parse_args(parser, argv)
    run(load_task(args.root), args, train_run)


if __name__ == "__main__":
    main()
