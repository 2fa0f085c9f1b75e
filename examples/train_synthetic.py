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
from pyg_orch.options import add_graph_options, positive_int


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
    add_graph_options(graph, num_nodes=100_000, num_features=100)
    graph.add_argument(
        "--num-classes",
        type=positive_int,
        default=10,
        help="label classes (default: %(default)s)",
    )
    args = parse_args(parser, argv)
    run(load_task(args), args)


if __name__ == "__main__":
    main()
