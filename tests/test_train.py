"""Tests of the training job (pyg_orch.train) and the ``pyg-orch`` command line."""

import dataclasses
import math
import os
import re
import subprocess
import sys
import time

import pytest
import torch
from torch_geometric.nn import GraphSAGE

from pyg_orch import OrchModel
from pyg_orch.cli import build_parser, main
from pyg_orch.datasets import load_cora
from pyg_orch.train import (
    accuracy,
    build_model,
    evaluate,
    make_train_loader,
    resolve_device,
    train,
)
from pyg_orch.train_config import TrainConfig

# Small settings that still exercise sampling, trimming and evaluation.
SMALL = {
    "num_neighbors": (5, 5),
    "batch_size": 64,
    "hidden_channels": 32,
    "epochs": 2,
}
# The result table's header and a row: run, s/epoch train, s 1st epoch,
# s eval total, best val (epoch), test.
TABLE_HEADER = re.compile(
    r"^run +s/epoch train +s 1st epoch +s eval total +nodes/batch +hot/batch "
    r"+best val \(epoch\) +test$",
    re.M,
)
HOT_SPLIT = re.compile(
    r"^hot vertices: (\d+) of 2708 nodes; a training batch took the bottom-layer "
    r"aggregates of (\d+) of its (\d+) frontier nodes \((\d+)%\) from their cache",
    re.M,
)


def _row(name: str) -> str:
    seconds = r"\d+\.\d{3} +\d+\.\d{3} +\d+\.\d{2}"
    nodes = r"(\d+) +(\d+)"
    return rf"^{name} +{seconds} +{nodes} +[01]\.\d{{4}} \(\d+\) +[01]\.\d{{4}}$"


def test_cli_train_with_no_option_shows_the_hot_split_beside_hot_0(capsys):
    status = main(["train", "--epochs", "2", "--no-progress", "--seed", "0"])
    out = capsys.readouterr().out
    assert status == 0
    lines = out.strip().splitlines()
    assert lines[0].startswith("dataset: cora | nodes 2708 | edges 10556")
    assert "train/val/test 140/500/1000 | stored in " in lines[0]
    assert "hot ratio 0.2 (presample)" in lines[1]
    assert any(line.startswith("device: cpu, prefetch 0 batches") for line in lines)
    # The hot vertices and their share of the batch, as the loader counted.
    num_hot, hot, frontier, share = map(int, HOT_SPLIT.search(out).groups())
    assert num_hot == round(0.2 * 2708) and 0 < hot < frontier
    assert share == round(100 * hot / frontier)
    assert TABLE_HEADER.fullmatch(lines[-4])
    hot_row = re.fullmatch(_row("hot ratio 0.2"), lines[-3])
    plain_row = re.fullmatch(_row("hot ratio 0"), lines[-2])
    assert int(hot_row[2]) == hot and int(plain_row[2]) == 0
    assert int(hot_row[1]) < int(plain_row[1])  # the hot split samples fewer nodes
    assert re.fullmatch(r"test accuracy: [01]\.\d{4}", lines[-1])
    assert lines[-1].endswith(lines[-3][-6:])  # the main run's test accuracy


def test_cli_train_at_hot_ratio_0_prints_one_run(capsys):
    argv = ["train", "--epochs", "1", "--no-progress", "--hot-ratio", "0"]
    assert main([*argv, "--num-neighbors", "5", "5"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert "no hot vertices (hot ratio 0)" in lines[-5]
    assert TABLE_HEADER.fullmatch(lines[-3])
    assert re.fullmatch(_row("hot ratio 0"), lines[-2])


def test_cli_hot_ratio_auto_prints_the_chosen_ratio(capsys):
    argv = ["train", "--hot-ratio", "auto", "--prefetch", "2", "--cache", "resample"]
    argv += ["--epochs", "1", "--num-neighbors", "5", "5", "--batch-size", "32"]
    assert main([*argv, "--hidden-channels", "16", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "hot ratio auto (presample, cache resample)" in out
    assert "device: cpu, prefetch 2 batches" in out
    chosen = re.search(r"^hot ratio auto -> ([\d.]+) chosen from:$", out, re.M)
    assert chosen is not None, out
    # The table that decided, the chosen ratio starred, and the rule.
    assert re.search(rf"^{chosen[1]} \* +[\d.]+ +[\d.]+ +[\d.]+$", out, re.M), out
    assert "medians of 3 rounds" in out
    assert re.search(_row(rf"hot ratio {chosen[1]} \(auto\)"), out, re.M), out


def test_cli_accepts_space_and_comma_fanouts():
    parser = build_parser()
    spaced = parser.parse_args(["train", "--num-neighbors", "15", "10", "5"])
    commas = parser.parse_args(["train", "--num-neighbors", "15,10,5"])
    assert spaced.num_neighbors == commas.num_neighbors == [15, 10, 5]


def test_cli_defaults_match_train_config():
    args = build_parser().parse_args(["train"])
    defaults = TrainConfig()
    for field in dataclasses.fields(TrainConfig):
        assert getattr(args, field.name) == getattr(defaults, field.name), field.name
    assert args.progress is True and args.compare is True
    # The job's default hot ratio, and none for a model that cannot use it.
    assert defaults.ratio == 0.2 and TrainConfig(model="gcn").ratio == 0


def test_train_returns_sane_values(cora):
    result = train(TrainConfig(epochs=3, device="cpu"), progress=False, data=cora)
    assert result.epochs_run == 3
    assert len(result.losses) == 3 and all(loss > 0 for loss in result.losses)
    assert [epoch for epoch, _ in result.val_accs] == [1, 2, 3]
    assert result.best_val_acc == max(acc for _, acc in result.val_accs)
    assert 1 <= result.best_epoch <= 3
    assert 0.3 < result.test_acc <= 1.0  # chance is ~0.14 on 7 classes
    assert result.seconds_per_epoch > 0 and result.total_seconds > 0
    assert result.device == "cpu"


def test_eval_every_evaluates_last_epoch(cora):
    config = TrainConfig(**{**SMALL, "epochs": 3}, eval_every=2)
    result = train(config, progress=False, data=cora)
    assert [epoch for epoch, _ in result.val_accs] == [2, 3]


def test_train_is_deterministic_under_seed(cora):
    config = TrainConfig(**SMALL, seed=3)
    first = train(config, progress=False, data=cora)
    second = train(config, progress=False, data=cora)
    assert first.losses == second.losses
    assert first.val_accs == second.val_accs
    assert first.test_acc == second.test_acc


@pytest.mark.parametrize("model", ["sage", "gcn", "gin", "gat"])
def test_evaluation_equals_full_batch_forward(cora, model):
    torch.manual_seed(0)
    network = build_model(
        TrainConfig(model=model, hidden_channels=64), cora.num_features, 7
    )
    # Several chunks, so that nodes are computed in different pieces.
    val, test = evaluate(OrchModel(network), cora, batch_size=1000)
    network.eval()
    with torch.no_grad():
        full = network(cora.x, cora.edge_index)
    assert val == accuracy(full, cora.y, cora.val_mask)
    assert test == accuracy(full, cora.y, cora.test_mask)


def test_hot_ratio_without_compare(capsys, cora):
    argv = ["train", "--epochs", "2", "--no-progress", "--hot-ratio", "0.3"]
    assert main([*argv, "--no-compare", "--model", "gin"]) == 0
    out = capsys.readouterr().out
    assert "hot ratio 0.3 (presample)" in out
    lines = out.strip().splitlines()
    assert TABLE_HEADER.fullmatch(lines[-3])
    assert re.fullmatch(_row("hot ratio 0.3"), lines[-2])
    assert lines[-1].endswith(lines[-2][-6:])
    hot = train(TrainConfig(**SMALL, hot_ratio=0.3, hot_method="degree"), False, cora)
    assert 0.0 <= hot.test_acc <= 1.0


def test_accuracy_handles_empty_mask():
    logits = torch.tensor([[1.0, 0.0]])
    assert math.isnan(accuracy(logits, torch.tensor([0]), torch.tensor([False])))


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_cuda_without_cuda_names_device_option(cora):
    with pytest.raises(ValueError, match="--device cpu"):
        resolve_device("cuda")
    with pytest.raises(ValueError, match=r"device \(--device\)"):
        train(TrainConfig(device="cuda"), progress=False, data=cora)


def test_auto_device_resolves():
    expected = "cuda" if torch.cuda.is_available() else "cpu"
    assert resolve_device("auto").type == expected


def test_unknown_device_is_rejected():
    with pytest.raises(ValueError, match="--device"):
        resolve_device("tpu")


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"batch_size": 0}, "batch_size"),
        ({"num_neighbors": ()}, "num_neighbors"),
        ({"num_neighbors": (10, 0)}, "num_neighbors"),
        ({"num_neighbors": "15,10"}, "num_neighbors"),
        ({"epochs": 0}, "epochs"),
        ({"hidden_channels": 0}, "hidden_channels"),
        ({"lr": 0.0}, "lr"),
        ({"dropout": 1.0}, "dropout"),
        ({"eval_every": 0}, "eval_every"),
        ({"eval_batch_size": 0}, "eval_batch_size"),
        ({"num_workers": -1}, "num_workers"),
        ({"model": "gatv2"}, "model"),
        ({"hot_ratio": 1.5}, "hot_ratio"),
        ({"hot_method": "random"}, "hot_method"),
        ({"cache": "resample", "hot_ratio": 0}, "cache"),
        ({"cache": "lazy", "hot_ratio": 0.2}, "cache"),
        ({"cache": "embedding", "hot_ratio": 0.2}, "cache"),
        ({"prefetch": -1}, "prefetch"),
        ({"device_cache": -1}, "device_cache"),
        ({"num_workers": 2, "cache": "resample", "hot_ratio": 0.2}, "num_workers"),
        ({"precision": "bf32"}, "precision"),
    ],
)
def test_bad_config_names_the_argument(kwargs, name):
    with pytest.raises(ValueError, match=rf"^{name} \("):
        TrainConfig(**kwargs)


def test_bf16_training_keeps_features_in_bf16_and_learns(cora):
    # Under autocast (bfloat16 products, float32 master weights) with bfloat16
    # features; evaluation in float32. Cora's public split, as the fp32 run.
    config = TrainConfig(precision="bf16", epochs=3, hot_ratio=0.2)
    result = train(config, progress=False, data=cora)
    assert result.losses[-1] < result.losses[0]
    assert result.test_acc > 0.5
    config.hot_ratio = 0.0  # a loader without its model yields plain batches
    batch = next(iter(make_train_loader(cora, config)))
    assert batch.x.dtype == torch.bfloat16
    assert cora.x.dtype == torch.float32


def test_fp16_training_on_the_cpu_is_refused_by_option(cora):
    with pytest.raises(
        ValueError, match=r"precision \(--precision\) fp16 needs a CUDA"
    ):
        train(TrainConfig(precision="fp16", device="cpu"), progress=False, data=cora)


def test_train_revalidates_changed_config(cora):
    config = TrainConfig()
    config.batch_size = 0
    with pytest.raises(ValueError, match="batch_size"):
        train(config, progress=False, data=cora)


def _exit_status(argv: list[str]) -> int:
    # argparse exits on values it cannot parse; main returns 2 for the rest.
    try:
        return main(argv)
    except SystemExit as exit_info:
        return exit_info.code


@pytest.mark.parametrize(
    ("argv", "option"),
    [
        (["--num-neighbors", ","], "--num-neighbors"),
        (["--device", "cuda:99"], "--device"),
        (["--dataset", "no-such-dataset"], "no-such-dataset"),
    ],
)
def test_cli_bad_options_exit_2(capsys, argv, option):
    if argv[1] == "cuda:99" and torch.cuda.device_count() >= 100:
        pytest.skip("has 100 CUDA devices")
    assert _exit_status(["train", *argv, "--no-progress"]) == 2
    captured = capsys.readouterr()
    assert option in captured.err
    assert "test accuracy" not in captured.out


def test_help(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["--help"])
    assert exit_info.value.code == 0
    assert "train" in capsys.readouterr().out
    with pytest.raises(SystemExit) as exit_info:
        main(["train", "--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    for option in ("--num-neighbors", "--batch-size", "--device", "--no-progress"):
        assert option in out


def test_python_dash_m_help():
    completed = subprocess.run(
        [sys.executable, "-m", "pyg_orch", "train", "--help"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr
    assert "usage: pyg-orch train" in completed.stdout


def test_gcn_with_hot_vertices_is_refused_by_name(capsys):
    argv = ["train", "--epochs", "1", "--no-progress", "--hot-ratio", "0.2"]
    assert main([*argv, "--model", "gcn"]) != 0
    assert "--hot-ratio 0 with gcn" in capsys.readouterr().err


def test_cli_saves_the_best_epochs_weights_for_the_plain_model(capsys, tmp_path):
    path = tmp_path / "sage.pt"
    argv = ["train", "--epochs", "2", "--no-progress", "--num-neighbors", "5", "5"]
    argv += ["--hidden-channels", "16", "--save-model", str(path)]
    assert main(argv) == 0
    out = capsys.readouterr().out
    epoch = int(re.search(r"GraphSAGE weights of epoch (\d) \(best", out)[1])
    best_test = float(re.search(r"^test accuracy: ([\d.]+)$", out, re.M)[1])
    # A plain PyG model takes the weights and scores what the run reported.
    data = load_cora()
    model = GraphSAGE(data.num_features, 16, num_layers=2, out_channels=7)
    model.load_state_dict(torch.load(path))
    model.eval()
    with torch.no_grad():
        prediction = model(data.x, data.edge_index).argmax(1)
    accuracy = (prediction == data.y)[data.test_mask].float().mean()
    assert 1 <= epoch <= 2
    assert float(accuracy) == pytest.approx(best_test, abs=1e-4)


def test_the_bars_rate_and_eta_leave_the_first_epoch_out(monkeypatch, capsys):
    # A first epoch of 2 s (as compiling kernels takes), then 0.02 s each:
    # counting the first, the rate would stay under 5 epochs/s and the ETA
    # after epoch 2 would be 8 epochs of about 1 s.
    import pyg_orch.train

    durations = iter([2.0] + [0.02] * 9)

    def epoch(*args):
        time.sleep(next(durations))
        return 0.0

    monkeypatch.setattr(pyg_orch.train, "train_epoch", epoch)
    monkeypatch.setattr(pyg_orch.train, "evaluate", lambda *args: (0.5, 0.5))
    train(TrainConfig(**{**SMALL, "epochs": 10}), progress=True)
    bars = capsys.readouterr().err.replace("\r", "\n").splitlines()
    assert any("epoch 1 compiles or loads pyg_orch's kernels" in bar for bar in bars)
    final = [bar for bar in bars if "10/10" in bar][-1]
    assert final.startswith("train: 100%")
    assert float(re.search(r"([\d.]+)epoch/s", final)[1]) > 5
    left = [re.search(r"<(\d\d):(\d\d)", bar) for bar in bars if "2/10" in bar]
    assert left and all(int(m[1]) * 60 + int(m[2]) <= 4 for m in left if m)


def test_compilations_are_counted_as_numba_reports_them():
    from numba import njit
    from numba.core import event

    from pyg_orch.train import own_compilations

    namespace = {"__name__": "pyg_orch.kernels.a_test_kernel"}
    exec("def add_one(x):\n    return x + 1", namespace)  # a pyg_orch function
    kernel = njit(namespace["add_one"])
    with event.install_recorder("numba:compile") as first:
        kernel(1)
    with event.install_recorder("numba:compile") as second:
        kernel(2)  # compiled already: no event
    count, seconds = own_compilations(first.buffer)
    assert count == 1 and seconds > 0
    assert own_compilations(second.buffer) == (0, 0.0)


@pytest.mark.full  # compiles every kernel once in a fresh cache (about a minute)
def test_the_compile_notice_tells_a_first_run_from_a_cached_one(tmp_path):
    environment = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "numba")}
    command = [sys.executable, "-m", "pyg_orch", "train", "--epochs", "2",
               "--no-progress", "--num-neighbors", "5", "5",
               "--no-compare"]  # fmt: skip
    notices = []
    for _ in range(2):
        result = subprocess.run(command, capture_output=True, text=True,
                                env=environment, timeout=600)  # fmt: skip
        assert result.returncode == 0, result.stderr
        notices.append(result.stdout)
    compiled = re.search(r"this run compiled (\d+) of pyg_orch's Numba", notices[0])
    assert compiled and int(compiled[1]) > 10, notices[0]
    assert "came from their on-disk cache" in notices[1], notices[1]


def test_seconds_per_epoch_leave_the_first_epoch_out(monkeypatch):
    # An epoch that takes 0.5 s the first time (as compiling kernels does)
    # and 0.01 s after.
    import pyg_orch.train

    durations = iter([0.5, 0.01, 0.01])

    def epoch(*args):
        time.sleep(next(durations))
        return 0.0

    monkeypatch.setattr(pyg_orch.train, "train_epoch", epoch)
    result = train(TrainConfig(**{**SMALL, "epochs": 3}), progress=False)
    assert result.first_epoch_seconds >= 0.5
    assert 0.01 <= result.seconds_per_epoch < 0.1


@pytest.mark.parametrize(
    ("dataset", "message"),
    [("coraa", "unknown dataset 'coraa'"), ("missing.npz", "does not exist")],
)
def test_a_bad_dataset_is_reported_before_torch_is_imported(dataset, message):
    # The check runs before torch and PyG load (seconds of imports).
    script = (
        "import sys\n"
        "from pyg_orch.cli import main\n"
        f"status = main(['train', '--dataset', {dataset!r}])\n"
        "print(status, 'torch' in sys.modules)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert result.stdout.split() == ["2", "False"], result.stderr
    assert message in result.stderr


def test_the_package_exports_load_on_first_use():
    import pyg_orch

    assert set(pyg_orch.__all__) == {*pyg_orch._EXPORTS, "__version__"}
    for name in pyg_orch._EXPORTS:
        assert getattr(pyg_orch, name).__name__ == name
    with pytest.raises(AttributeError, match="no attribute 'Missing'"):
        pyg_orch.Missing  # noqa: B018
