"""``python -m pyg_orch.benchmark NAME``: run one benchmark and print its table."""

from __future__ import annotations

import argparse
import contextlib
import shlex
import sys
from pathlib import Path
from typing import TextIO

from pyg_orch.benchmark import (
    accuracy,
    aggregate,
    cluster,
    ddp,
    epoch,
    gpu,
    inference,
    memory,
    partitioned,
    pipeline,
    sampler,
    step,
)

BENCHMARKS = {
    "sampler": sampler,
    "aggregate": aggregate,
    "epoch": epoch,
    "step": step,
    "accuracy": accuracy,
    "cluster": cluster,
    "pipeline": pipeline,
    "inference": inference,
    "gpu": gpu,
    "ddp": ddp,
    "partitioned": partitioned,
    "memory": memory,
}


def build_parser() -> argparse.ArgumentParser:
    """The parser of ``python -m pyg_orch.benchmark``: one subcommand per benchmark.

    Returns:
        The parser; ``parse_args`` sets ``benchmark`` to the chosen name.

    Example:
        >>> build_parser().parse_args(["sampler", "--batches", "5"]).batches
        5
    """
    parser = argparse.ArgumentParser(
        prog="python -m pyg_orch.benchmark",
        description="Benchmarks of pyg_orch against plain PyG, measured in one run.",
    )
    commands = parser.add_subparsers(dest="benchmark", required=True)
    for name, module in BENCHMARKS.items():
        # The docstring's first paragraph says what it measures; the rest, how.
        summary = " ".join(module.__doc__.split("\n\n")[0].split())
        command = commands.add_parser(
            name,
            help=summary,
            description=module.__doc__,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        module.add_arguments(command)
        command.add_argument(
            "--save",
            type=Path,
            default=None,
            metavar="FOLDER",
            help="also write the printed table here, as NAME.txt, and the "
            "chart of the benchmarks that draw one as NAME.png "
            "(default: print only)",
        )
    return parser


def main(argv: list[str] | None = None) -> int:
    """Parses ``argv`` and runs the chosen benchmark.

    Args:
        argv: command-line arguments; ``sys.argv[1:]`` when ``None``.

    Returns:
        The process exit status.

    Example:
        >>> main(["sampler", "--num-nodes", "20000"])  # doctest: +SKIP
    """
    parser = build_parser()
    argv = sys.argv[1:] if argv is None else argv
    args = parser.parse_args(argv)
    if args.save is None:
        BENCHMARKS[args.benchmark].run(args)
        return 0
    args.save.mkdir(parents=True, exist_ok=True)
    shown = without_save(argv)
    module = BENCHMARKS[args.benchmark]
    # A variant of a benchmark (sampler --hetero) saves under its own name.
    name = module.saved_name(args) if hasattr(module, "saved_name") else args.benchmark
    with (args.save / f"{name}.txt").open("w") as table:
        print(f"$ python -m pyg_orch.benchmark {shlex.join(shown)}", file=table)
        with contextlib.redirect_stdout(_Tee(sys.stdout, table)):
            chart = BENCHMARKS[args.benchmark].run(args)
    if chart is not None:
        chart.save(args.save / f"{name}.png")
    return 0


def without_save(argv: list[str]) -> list[str]:
    """``argv`` less its ``--save FOLDER`` (or ``--save=FOLDER``): the command saved.

    Example:
        >>> without_save(["sampler", "--save=out", "--batches", "5"])
        ['sampler', '--batches', '5']
        >>> without_save(["sampler", "--save", "out"])
        ['sampler']
    """
    shown, skip = [], False
    for token in argv:
        if skip or token.startswith("--save="):
            skip = False
            continue
        skip = token == "--save"
        if not skip:
            shown.append(token)
    return shown


class _Tee:
    """Writes to two streams: the terminal and the saved table."""

    def __init__(self, *streams: TextIO) -> None:
        self.streams = streams

    def write(self, text: str) -> int:
        for stream in self.streams:
            stream.write(text)
        return len(text)

    def flush(self) -> None:
        for stream in self.streams:
            stream.flush()


if __name__ == "__main__":
    sys.exit(main())
