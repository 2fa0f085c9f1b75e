"""The options shared by ``pyg-orch train``, the examples and the benchmarks."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from pyg_orch.benchmark.__main__ import build_parser as build_benchmark_parser
from pyg_orch.cli import build_parser, main
from pyg_orch.options import (
    EXECUTION_OPTIONS,
    HOT_OPTIONS,
    TRAINING_OPTIONS,
    bytes_or_auto,
    config_from_args,
    hot_ratio,
    parse_fanouts,
)
from pyg_orch.train_config import TrainConfig

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
# Defaults the examples change for graphs larger than Cora; the rest are shared.
EXAMPLE_DEFAULTS = {"batch_size": 1024, "epochs": 20, "eval_every": 5, "hot_ratio": 0.0}


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    action = next(
        action
        for action in parser._actions
        if isinstance(action, argparse._SubParsersAction)
    )
    return action.choices


def _train_parser() -> argparse.ArgumentParser:
    return _subparsers(build_parser())["train"]


@pytest.fixture
def examples_common(monkeypatch):
    monkeypatch.syspath_prepend(str(EXAMPLES))
    import _common

    return _common


def _undocumented(parser: argparse.ArgumentParser) -> list[str]:
    """The options whose help line does not give their default."""
    return [
        action.option_strings[-1]
        for action in parser._actions
        if action.option_strings
        and not isinstance(action, argparse._HelpAction | argparse._VersionAction)
        and "(default: " not in (action.help or "")
    ]


def test_every_train_option_shows_its_default():
    parser = _train_parser()
    assert _undocumented(parser) == []
    text = parser.format_help()
    assert "(default: cora)" in text and "gat (GAT)" in text
    assert "'auto'" in text and "0.05-0.25" in text


@pytest.mark.parametrize(
    "name", ["sampler", "aggregate", "epoch", "accuracy", "pipeline", "gpu", "ddp"]
)
def test_every_benchmark_option_shows_its_default(name):
    parser = _subparsers(build_benchmark_parser())[name]
    assert _undocumented(parser) == []
    assert "takes" in parser.description  # how long the default run takes


def test_every_example_option_shows_its_default(examples_common):
    parser = examples_common.build_parser("doc")
    examples_common.add_root_option(parser, "folder")
    assert _undocumented(parser) == []


def test_cli_and_examples_share_options_and_defaults(examples_common):
    cli = vars(build_parser().parse_args(["train"]))
    example = vars(examples_common.build_parser("doc").parse_args([]))
    shared = (*TRAINING_OPTIONS, *HOT_OPTIONS, *EXECUTION_OPTIONS, "progress")
    for name in shared:
        assert example[name] == EXAMPLE_DEFAULTS.get(name, cli[name]), name
    # The CLI shows the hot split by default (None: 0.2, or 0 for gcn); the
    # examples on real datasets train plain batches unless asked.
    assert cli["hot_ratio"] is None and example["hot_ratio"] == 0.0
    assert cli["device"] == example["device"] == "auto"
    args = examples_common.build_parser("doc").parse_args(["--eval-every", "2"])
    assert args.eval_every == 2


def test_hot_ratio_auto_and_pipeline_options_parse():
    args = build_parser().parse_args(
        ["train", "--hot-ratio", "auto", "--cache", "resample", "--prefetch", "2"]
    )
    assert (args.hot_ratio, args.cache, args.prefetch) == ("auto", "resample", 2)
    config = config_from_args(args)
    assert config.hot_ratio == "auto" and config.prefetch == 2
    assert hot_ratio("0.25") == 0.25
    assert bytes_or_auto("1e6") == 1_000_000
    assert parse_fanouts(["4,", "-1"]) == [4, -1]


@pytest.mark.parametrize(
    ("argv", "option"),
    [
        (["--hot-ratio", "1.5"], "--hot-ratio"),
        (["--hot-ratio", "often"], "--hot-ratio"),
        (["--hot-method", "bogus"], "--hot-method"),
        (["--cache", "bogus"], "--cache"),
        (["--model", "gatv2"], "--model"),
        (["--prefetch", "-1"], "--prefetch"),
        (["--device-cache", "-5"], "--device-cache"),
        (["--batch-size", "0"], "--batch-size"),
        (["--seed", "x"], "--seed"),
    ],
)
def test_bad_train_values_exit_2_naming_the_option(capsys, argv, option):
    with pytest.raises(SystemExit) as exit_info:
        main(["train", *argv])
    assert exit_info.value.code == 2
    assert f"argument {option}" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "option"),
    [
        (["epoch", "--hot-method", "bogus"], "--hot-method"),
        (["epoch", "--hot-ratios", "0.1", "2"], "--hot-ratios"),
        (["aggregate", "--hot-ratio", "auto"], "--hot-ratio"),
        (["pipeline", "--caches", "embedding"], "--caches"),
        (["gpu", "--device-cache", "lots"], "--device-cache"),
        (["accuracy", "--models", "gatv2"], "--models"),
    ],
)
def test_bad_benchmark_values_exit_2_naming_the_option(capsys, argv, option):
    with pytest.raises(SystemExit) as exit_info:
        build_benchmark_parser().parse_args(argv)
    assert exit_info.value.code == 2
    assert f"argument {option}" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "option"),
    [
        (["--cache", "static", "--hot-ratio", "0"], "--cache"),  # no hot vertices
        (["--model", "gcn", "--hot-ratio", "auto"], "--hot-ratio"),
        (["--model", "gat", "--hot-ratio", "0.2", "--cache", "static"], "--cache"),
        (["--num-workers", "2", "--prefetch", "2"], "--num-workers"),
    ],
)
def test_combinations_the_run_cannot_use_exit_2(capsys, argv, option):
    assert main(["train", *argv, "--no-progress"]) == 2
    captured = capsys.readouterr()
    assert option in captured.err
    assert captured.out == ""


def test_examples_refuse_what_the_cli_refuses(examples_common, capsys):
    parser = examples_common.build_parser("doc")
    with pytest.raises(SystemExit) as exit_info:
        examples_common.parse_args(parser, ["--cache", "resample"])
    assert exit_info.value.code == 2
    assert "--cache" in capsys.readouterr().err


def test_examples_resolve_the_pipeline(examples_common):
    parser = examples_common.build_parser("doc")
    args = examples_common.parse_args(parser, ["--device", "cpu", "--prefetch", "1"])
    assert args.pipeline == {"prefetch": 1, "device": None, "device_cache": 0}
    assert args.config == TrainConfig(**EXAMPLE_DEFAULTS, device="cpu", prefetch=1)
