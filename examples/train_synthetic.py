"""Train GraphSAGE on a synthetic power-law graph: no download, no dataset.

Usage:
    python examples/train_synthetic.py --num-nodes 100000 --hot-ratio auto

The graph comes from pyg_orch.datasets.power_law_graph: a few hubs and many
low-degree vertices (the shape that makes hot vertices pay), homophilous
labels that features alone predict imperfectly, and a seeded 60/20/20 split.
Evaluation is exact full-neighbourhood inference (OrchModel.inference).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from _common import Task, accuracy, build_parser, parse_args, run

from pyg_orch.datasets import power_law_graph


def load_task(args: argparse.Namespace) -> Task:
    """Generates the graph the options describe.

    Args:
        args: the options (``num_nodes``, ``avg_degree``, ``num_features``,
            ``num_classes``, ``seed``).

    Returns:
        The graph with its split masks as node ids.
    """
    data = power_law_graph(
        args.num_nodes,
        avg_degree=args.avg_degree,
        num_features=args.num_features,
        num_classes=args.num_classes,
        seed=args.seed,
    )
    split = {
        name: data[f"{mask}_mask"].nonzero().view(-1)
        for name, mask in (("train", "train"), ("valid", "val"), ("test", "test"))
    }
    return Task("power-law graph", data, split, args.num_classes, accuracy)


def main(argv: Sequence[str] | None = None) -> None:
    """Generates the graph, trains and prints the summary; ``argv``: the options."""
    parser = build_parser(__doc__, epochs=10)
    graph = parser.add_argument_group("graph")
    graph.add_argument("--num-nodes", type=int, default=100_000, help="default: 100000")
    graph.add_argument(
        "--avg-degree", type=float, default=20.0, help="default: %(default)s"
    )
    graph.add_argument("--num-features", type=int, default=100, help="default: 100")
    graph.add_argument("--num-classes", type=int, default=10, help="default: 10")
    args = parse_args(parser, argv)
    run(load_task(args), args)


if __name__ == "__main__":
    main()
