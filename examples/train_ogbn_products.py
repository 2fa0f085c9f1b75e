"""Train GraphSAGE on ogbn-products with OrchNeighborLoader and OrchModel.

Usage:
    python examples/train_ogbn_products.py --root ~/data/ogb --hot-ratio 0.2

The dataset comes through OGB's own PygNodePropPredDataset, which downloads it
into ROOT/ogbn_products on first use (about 1.4 GB; OGB asks before it
downloads) and processes it once. Training samples --num-neighbors around the
training nodes; evaluation is exact full-neighbourhood inference
(OrchModel.inference) scored by OGB's Evaluator on train, valid and test.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from _common import Task, add_root_option, build_parser, ogb_scorer, parse_args, run
from ogb.nodeproppred import PygNodePropPredDataset

from pyg_orch.datasets import pyg_pickle_classes

NAME = "ogbn-products"
FOLDER = "ogbn_products"


def load_task(root: str) -> Task:
    """Loads ogbn-products (downloading and processing it when needed).

    Args:
        root: the folder that holds (or receives) ``ogbn_products``.

    Returns:
        The graph with OGB's sales-ranking split and Evaluator.
    """
    with torch.serialization.safe_globals(pyg_pickle_classes()):
        dataset = PygNodePropPredDataset(name=NAME, root=root)
        split = dataset.get_idx_split()
    return Task(NAME, dataset[0], split, dataset.num_classes, ogb_scorer(NAME))


def main(argv: Sequence[str] | None = None) -> None:
    """Loads ogbn-products, trains and prints the summary; ``argv``: the options."""
    parser = build_parser(__doc__, epochs=20)
    add_root_option(parser, FOLDER)
    args = parse_args(parser, argv)
    run(load_task(args.root), args)


if __name__ == "__main__":
    main()
