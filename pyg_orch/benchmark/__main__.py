"""``python -m pyg_orch.benchmark NAME``: run one benchmark and print its table."""

from __future__ import annotations

import argparse
import sys

from pyg_orch.benchmark import accuracy, aggregate, epoch, gpu, pipeline, sampler

BENCHMARKS = {
    "sampler": sampler,
    "aggregate": aggregate,
    "epoch": epoch,
    "accuracy": accuracy,
    "pipeline": pipeline,
    "gpu": gpu,
}


def main(argv: list[str] | None = None) -> int:
    """Parses ``argv`` and runs the chosen benchmark.

    Args:
        argv: command-line arguments; ``sys.argv[1:]`` when ``None``.

    Returns:
        The process exit status.

    Example:
        >>> main(["sampler", "--num-nodes", "20000"])  # doctest: +SKIP
    """
    parser = argparse.ArgumentParser(
        prog="python -m pyg_orch.benchmark",
        description="Benchmarks of pyg_orch against plain PyG, measured in one run.",
    )
    commands = parser.add_subparsers(dest="benchmark", required=True)
    for name, module in BENCHMARKS.items():
        module.add_arguments(commands.add_parser(name, help=module.__doc__))
    args = parser.parse_args(argv)
    BENCHMARKS[args.benchmark].run(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
