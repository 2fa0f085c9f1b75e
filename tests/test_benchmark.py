"""The benchmarks run end to end on tiny settings and print their tables."""

import argparse
import importlib.util
import os
import re
import sys
from pathlib import Path

import pytest
from conftest import assert_printed_ratio
from tqdm import tqdm

from pyg_orch.benchmark.__main__ import main
from pyg_orch.benchmark.spawned import run_spawned


def test_sampler_benchmark_prints_a_row_per_sampler(capsys):
    assert main(["sampler", "--num-nodes", "3000", "--batches", "3"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("power-law graph: 3,000 nodes")
    numba_row = next(line for line in lines if line.startswith("pyg_orch (Numba) "))
    milliseconds, per_second = map(float, numba_row.split()[2:4])
    assert milliseconds > 0
    assert_printed_ratio(per_second, 1000.0, milliseconds, 0.01, 0.1)
    one_thread = next(line for line in lines if line.startswith("pyg_orch (Numba), 1"))
    assert float(one_thread.split()[4]) > 0
    # PyG's own loader's sampler, through pyg_orch's backend, beside it.
    pyg_row = next(line for line in lines if line.startswith("PyG NeighborLoader's "))
    pyg_milliseconds, ratio = float(pyg_row.split()[3]), pyg_row.split()[-1]
    ratio = float(ratio.rstrip("x"))
    assert_printed_ratio(ratio, pyg_milliseconds, milliseconds, 0.01, 0.01)
    assert (
        "PyG NeighborLoader's sampler: sampled by pyg_orch's backend "
        "(torch.ops.pyg.neighbor_sample)" in lines
    )
    if importlib.util.find_spec("torch_sparse") is None:
        missing = next(line for line in lines if line.startswith("torch-sparse:"))
        assert "not installed, so not measured and no ratio" in missing
        assert 'pip install -e ".[torch-sparse]"' in missing


def test_every_option_of_every_benchmark_takes_both_spellings():
    from pyg_orch.benchmark.__main__ import build_parser

    parser = build_parser()
    commands = next(a for a in parser._actions if a.choices and "sampler" in a.choices)
    for name, command in commands.choices.items():
        for action in command._actions:
            long = [o for o in action.option_strings if o.startswith("--")]
            if not long or action.nargs == 0 or action.dest == "help":
                continue
            value = _a_value(action)
            spaced = parser.parse_args([name, long[0], *value])
            joined = parser.parse_args([name, f"{long[0]}={value[0]}", *value[1:]])
            assert getattr(spaced, action.dest) == getattr(joined, action.dest), (
                name,
                long[0],
            )


def _a_value(action):
    # A valid value for the option: a choice, its default, or a number.
    if action.choices:
        return [str(next(iter(action.choices)))]
    default = action.default
    if isinstance(default, list | tuple):
        default = default[0] if default else None
    for value in (default, 2, "out"):
        try:
            if value is not None and action.type is not None:
                action.type(str(value))
        except (ValueError, TypeError, argparse.ArgumentTypeError):
            continue
        if value is not None:
            return [str(value)]
    raise AssertionError(f"no value found for {action.option_strings}")


def test_save_with_an_equals_sign_saves_the_command_without_it(tmp_path, monkeypatch):
    from pyg_orch.benchmark import sampler

    monkeypatch.setattr(sampler, "run", lambda args: print("table"))
    assert main(["sampler", f"--save={tmp_path}", "--batches", "3"]) == 0
    saved = (tmp_path / "sampler.txt").read_text().splitlines()
    assert saved == ["$ python -m pyg_orch.benchmark sampler --batches 3", "table"]


def test_hetero_sampler_benchmark_compares_per_sampled_edge(capsys):
    argv = ["sampler", "--hetero", "--scale", "0.002", "--batches", "3"]
    assert main([*argv, "--batch-size", "64"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("ogbn-mag-shaped power-law graph (scale 0.002)")
    rows = {line.split("  ")[0]: line.split() for line in lines[2:-1]}
    hetero, homogeneous = rows["pyg_orch hetero"], rows["pyg_orch homogeneous"]
    per_edge = [float(row[-2]) for row in (hetero, homogeneous)]
    assert all(value > 0 for value in per_edge)
    ratio = next(line for line in lines if line.startswith("pyg_orch hetero /"))
    printed = float(ratio.rsplit(" ", 1)[1].rstrip("x"))
    assert_printed_ratio(printed, per_edge[0], per_edge[1], 0.1, 0.01)
    # The same batches on one of Numba's threads, and the speed-up printed.
    one_thread = float(rows["pyg_orch hetero, 1 thread"][4])
    threads = next(line for line in lines if line.startswith("pyg_orch hetero on "))
    printed = float(threads.split(": ")[1].split("x")[0])
    assert_printed_ratio(printed, one_thread, float(hetero[2]), 0.01, 0.01)


def test_aggregate_benchmark_times_the_kernel_on_bfloat16_and_float32(capsys):
    argv = ["aggregate", "--num-nodes", "3000", "--repeats", "2", "--copy-gb",
            "0.01", "--dtype", "bfloat16"]  # fmt: skip
    assert main(argv) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "x 2 B (bfloat16)" in lines[2]
    half = next(line for line in lines if line.startswith("pyg_orch kernel (Numba, b"))
    wide = next(line for line in lines if line.startswith("pyg_orch kernel (Numba) "))
    assert half.split()[-2:] == ["1.00x", "0.0e+00"]
    # float32 against bfloat16 features: bfloat16's rounding, no more.
    assert 0 < float(wide.split()[-1]) < 1e-2


def _profile_shares(lines: list[str], precision: str) -> dict[str, float]:
    # The categories of the profile of one precision's steps, in percent.
    start = next(
        i
        for i, line in enumerate(lines)
        if line.startswith(f"profile of pyg_orch's {precision}")
    )
    return {
        line.split()[0]: float(line.split()[-1].rstrip("%"))
        for line in lines[start + 1 : start + 6]
    }


def test_step_benchmark_times_both_ways_and_profiles(capsys):
    argv = ["step", "--num-nodes", "3000", "--batch-size", "64", "--batches", "2",
            "--rounds", "1", "--hidden-channels", "16"]  # fmt: skip
    assert main(argv) == 0
    lines = capsys.readouterr().out.splitlines()
    ours = next(line for line in lines if line.startswith("pyg_orch aggregation"))
    pyg = next(line for line in lines if line.startswith("PyG propagate"))
    assert ours.endswith("1.00x") and float(pyg.split()[-6]) > 0
    shares = _profile_shares(lines, "fp32")
    assert list(shares) == ["products", "aggregation", "casts", "optimizer", "rest"]
    assert shares["products"] > 0 and shares["aggregation"] > 0
    assert shares["optimizer"] > 0
    assert abs(sum(shares.values()) - 100) <= 3


def test_step_benchmark_profiles_the_heterogeneous_step(capsys):
    argv = ["step", "--hetero", "--scale", "0.002", "--batch-size", "32",
            "--batches", "2", "--rounds", "1", "--hidden-channels", "16",
            "--num-features", "8"]  # fmt: skip
    assert main(argv) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("ogbn-mag-shaped graph") and "HeteroConv" in lines[0]
    ours = next(line for line in lines if line.startswith("pyg_orch aggregation"))
    pyg = next(line for line in lines if line.startswith("PyG propagate"))
    assert ours.endswith("1.00x") and float(pyg.split()[-6]) > 0
    shares = _profile_shares(lines, "fp32")
    # The relation convs aggregate with the kernels.
    assert shares["products"] > 0 and shares["aggregation"] > 0


def test_step_benchmark_times_bf16_on_the_same_batches(capsys):
    argv = ["step", "--num-nodes", "3000", "--batch-size", "64", "--batches", "2",
            "--rounds", "1", "--hidden-channels", "16",
            "--precisions", "fp32", "bf16"]  # fmt: skip
    assert main(argv) == 0
    lines = capsys.readouterr().out.splitlines()
    support = next(line for line in lines if line.startswith("CPU capability"))
    assert re.search(r"bf16 products (native|emulated) here: .* takes [\d.]+x", support)
    bf16 = next(
        line for line in lines if line.startswith("pyg_orch aggregation (Numba), bf16")
    )
    assert float(bf16.split()[-6]) > 0
    shares = _profile_shares(lines, "bf16")
    assert shares["products"] > 0 and shares["aggregation"] > 0
    assert abs(sum(shares.values()) - 100) <= 3


def test_aggregate_benchmark_prints_a_row_per_way(capsys):
    argv = ["aggregate", "--num-nodes", "3000", "--repeats", "2", "--copy-gb", "0.01"]
    assert main(argv) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("power-law graph: 3,000 nodes")
    assert "top 20% by in-degree = 600 nodes" in lines[1]
    assert lines[2].startswith("bytes moved = (in-edges + hot nodes) x features x 4 B")
    rows = {
        name: line
        for line in lines
        for name in ("pyg_orch kernel", "torch index_select", "torch.sparse.mm (CSR)")
        if line.startswith(name)
    }
    assert len(rows) == 3
    for line in rows.values():
        milliseconds, bandwidth = map(float, line.split()[-4:-2])
        assert milliseconds > 0 and bandwidth > 0
        assert float(line.split()[-1]) < 1e-4  # every way agrees with the kernel
    assert sum(line.startswith("memory copy (") for line in lines) == 2
    assert sum(line.startswith("memory read (") for line in lines) == 1


@pytest.mark.slow  # each configuration runs in a spawned process
def test_epoch_benchmark_prints_every_configuration(capsys, slow_unregister):
    argv = ["epoch", "--num-nodes", "3000", "--avg-degree", "8", "--batches", "2",
            "--warmup", "1", "--batch-size", "64", "--hidden-channels", "16",
            "--num-neighbors", "5", "5", "--hot-ratios", "0", "0.2",
            "--precisions", "fp32", "bf16"]  # fmt: skip
    assert main(argv) == 0
    lines = capsys.readouterr().out.splitlines()
    rows = [line for line in lines if line.startswith(("PyG", "pyg_orch"))]
    names = [row.split("  ")[0] for row in rows]
    assert names == [
        "PyG NeighborLoader + GraphSAGE (trim_to_layer)",
        "pyg_orch hot_ratio=0",
        "pyg_orch hot_ratio=0.2",
        "PyG NeighborLoader + GraphSAGE, autocast bf16",
        "pyg_orch hot_ratio=0 bf16",
        "pyg_orch hot_ratio=0.2 bf16",
    ]
    assert rows[0].split()[-2:] == ["1.00x", "1.00x"]
    by_name = dict(zip(names, rows, strict=True))
    gathered = {name: float(row.split()[-5]) for name, row in by_name.items()}
    # The same batches, features and hot aggregates in half the bytes.
    half = gathered["pyg_orch hot_ratio=0.2 bf16"]
    assert half == pytest.approx(gathered["pyg_orch hot_ratio=0.2"] / 2, abs=0.1)
    # The bf16 rows against their own peer: plain PyG under the same autocast.
    against = next(line for line in lines if line.startswith("against plain PyG"))
    assert against.startswith("against plain PyG under autocast bf16 (its ")
    total = {name: float(row.split()[-11]) for name, row in by_name.items()}
    printed = float(against.rsplit(" ", 1)[1].rstrip("x"))
    assert against.count("pyg_orch") == 2
    assert_printed_ratio(printed, total[names[3]], total[names[5]], 0.1, 0.01)
    # Each hot child made tqdm's lock (presampling) and freed it.
    _check_children_unregistered(slow_unregister, semaphores=2)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("task", "graph", "baseline"),
    [
        ("--hetero", ["--scale", "0.002"],
         "PyG NeighborLoader + HeteroConv(SAGEConv) (trim)"),
        ("--link", ["--num-nodes", "3000", "--avg-degree", "8"],
         "PyG LinkNeighborLoader + GraphSAGE (trim_to_layer)"),
    ],
)  # fmt: skip
def test_epoch_benchmark_runs_the_hetero_and_link_tasks(capsys, task, graph, baseline):
    argv = ["epoch", task, *graph, "--num-features", "8", "--batches", "2"]
    argv += ["--warmup", "1", "--batch-size", "64", "--hidden-channels", "16"]
    assert main([*argv, "--num-neighbors", "5", "5", "--hot-ratios", "0", "0.2"]) == 0
    lines = capsys.readouterr().out.splitlines()
    rows = [line for line in lines if line.startswith(("PyG", "pyg_orch"))]
    assert [row.split("  ")[0] for row in rows] == [
        baseline,
        "pyg_orch hot_ratio=0",
        "pyg_orch hot_ratio=0.2",
    ]
    # The hot rows sample fewer nodes: the last hop skips hot vertices.
    nodes = [float(row.split()[-7]) for row in rows]
    assert nodes[0] == nodes[1] > nodes[2]


_SMALL_EPOCH = ["epoch", "--num-nodes", "3000", "--avg-degree", "8", "--batches",
                "2", "--warmup", "1", "--batch-size", "64", "--hidden-channels", "16",
                "--num-neighbors", "5", "5", "--hot-ratios", "0"]  # fmt: skip
# A Python with dgl installed (DGL 2.1 needs torch <= 2.2.1: its own venv).
DGL_PYTHON = os.environ.get("PYG_ORCH_DGL_PYTHON")


@pytest.mark.skipif(importlib.util.find_spec("dgl") is not None, reason="has dgl")
def test_epoch_benchmark_names_a_dgl_python_without_dgl():
    with pytest.raises(RuntimeError, match="--dgl-python .*No module named 'dgl'"):
        main([*_SMALL_EPOCH, "--dgl-python", sys.executable])


def test_epoch_benchmark_times_dgl_on_the_node_task_only():
    with pytest.raises(ValueError, match="--dgl-python: the node task only"):
        main([*_SMALL_EPOCH, "--link", "--dgl-python", sys.executable])


@pytest.mark.slow
@pytest.mark.skipif(not DGL_PYTHON, reason="PYG_ORCH_DGL_PYTHON names no Python")
def test_epoch_benchmark_times_dgl_on_the_same_graph(capsys):
    assert main([*_SMALL_EPOCH, "--dgl-python", DGL_PYTHON]) == 0
    lines = capsys.readouterr().out.splitlines()
    rows = {
        line.split("  ")[0]: line.split()
        for line in lines
        if line.startswith(("PyG", "pyg_orch", "DGL DataLoader"))
    }
    peer, orch = rows["DGL DataLoader + dgl.nn.SAGEConv"], rows["pyg_orch hot_ratio=0"]
    assert len(rows) == 3
    # DGL gathers its input nodes' 100 float32 features.
    nodes, gathered = float(peer[-7]), float(peer[-5])
    assert gathered == pytest.approx(nodes * 100 * 4 / 2**20, abs=0.1)
    against = next(line for line in lines if line.startswith("against DGL"))
    printed = float(against.rsplit(" ", 1)[1].rstrip("x"))
    # DGL's ms/batch over pyg_orch's, from the unrounded times.
    assert_printed_ratio(printed, float(peer[-11]), float(orch[-11]), 0.1, 0.01)


@pytest.mark.slow
@pytest.mark.parametrize(
    "precision, sides, conv",
    [
        ("fp32", ["plain PyG", "hot 0.2"], ["gat", "--cache", "embedding"]),
        ("bf16", ["hot 0.2 fp32", "hot 0.2 bf16"], ["sage"]),
    ],
)
def test_accuracy_benchmark_compares_two_sides_on_the_hetero_graph(
    capsys, precision, sides, conv
):
    argv = ["accuracy", "--hetero", "--scale", "0.002", "--seeds", "0", "1"]
    argv += ["--epochs", "2", "--num-neighbors", "5", "5", "--batch-size", "64"]
    argv += ["--precision", precision, "--conv", *conv]
    assert main([*argv, "--hidden-channels", "16"]) == 0
    lines = capsys.readouterr().out.splitlines()
    header = [line for line in lines if line.startswith("| dataset")]
    assert header == [
        f"| dataset | model | {' | '.join(sides)} | difference | minutes |"
    ]
    rows = [line for line in lines if line.startswith("| synthetic ogbn-mag")]
    assert len(rows) == 1, lines
    cells = rows[0].split("|")
    assert cells[2].strip() == conv[0]
    before, after = (float(cell.split("±")[0]) for cell in cells[3:5])
    # 16 classes: chance is 6.25 %; both learn from the labels' homophily
    # (one-head GAT barely does in 2 epochs of 16 hidden channels).
    bar = 12.5 if conv[0] == "sage" else 6.25
    assert before > bar and after > bar, rows[0]


@pytest.mark.parametrize(
    "precision, header, gcn_cells",
    [
        ("fp32", ["hot 0", "hot 0.2", "difference"], 3),
        ("bf16", ["hot ratio", "fp32", "bf16", "difference"], 4),
    ],
)
def test_accuracy_benchmark_prints_a_row_per_model(
    capsys, precision, header, gcn_cells
):
    argv = ["accuracy", "--models", "sage", "gcn", "--seeds", "0", "--epochs", "1"]
    argv += ["--num-neighbors", "5", "5", "--hidden-channels", "16"]
    assert main([*argv, "--precision", precision]) == 0
    lines = capsys.readouterr().out.splitlines()
    table = [line.strip("| ").split(" | ") for line in lines if line.startswith("|")]
    assert table[0] == ["dataset", "model", *header, "minutes"]
    rows = [row for row in table if row[0] == "cora"]
    assert [row[:2] for row in rows] == [["cora", "sage"], ["cora", "gcn"]]
    assert all(len(row) == len(table[0]) for row in rows)
    gcn = rows[1][2 : 2 + gcn_cells]
    if precision == "fp32":
        # OrchModel refuses GCN with hot vertices: only hot ratio 0 is trained.
        assert gcn[1:] == ["refused", "-"]
    else:
        assert gcn[0] == "0" and "±" in gcn[2]


def test_pipeline_benchmark_prints_each_mode_with_and_without_prefetch(capsys):
    argv = ["pipeline", "--num-nodes", "3000", "--avg-degree", "8", "--batches", "3"]
    assert main([*argv, "--warmup", "1", "--batch-size", "64"]) == 0
    lines = capsys.readouterr().out.splitlines()
    rows = [line for line in lines if line.startswith(("static", "resample"))]
    assert [row.split()[:2] for row in rows] == [
        ["static,", "prefetch=0"],
        ["static,", "prefetch=2"],
        ["resample,", "prefetch=0"],
        ["resample,", "prefetch=2"],
    ]
    for row in rows:
        milliseconds, cpu, train = map(float, row.split()[2:5])
        assert milliseconds > 0 and cpu > 0 and train > 0
        assert 0 <= float(row.split()[5].rstrip("%")) <= 100


@pytest.mark.parametrize(
    "graph", [["--num-nodes", "2000"], ["--hetero", "--scale", "0.002"]]
)
def test_inference_benchmark_times_both_ways(capsys, graph):
    assert main(["inference", *graph, "--repeats", "2"]) == 0
    rows = [
        line.split("|")[1:-1]
        for line in capsys.readouterr().out.splitlines()
        if line.startswith(("| plain", "| OrchModel"))
    ]
    assert [row[0].strip() for row in rows] == [
        "plain PyG forward on the whole graph",
        "OrchModel.inference",
    ]
    first, later, *ratios = (float(cell.strip().rstrip("x")) for cell in rows[1][1:])
    assert first > 0 and later > 0
    for ratio, numerator in zip(ratios, (first, float(rows[0][2])), strict=True):
        assert_printed_ratio(ratio, numerator, later, 0.1, 0.01)


@pytest.mark.slow  # each configuration runs in a spawned process
def test_gpu_benchmark_runs_on_the_cpu_too_in_bf16(capsys):
    argv = ["gpu", "--num-nodes", "3000", "--avg-degree", "8", "--batches", "3",
            "--warmup", "1", "--batch-size", "64", "--hidden-channels", "16",
            "--modes", "static", "--device-cache", "100000",
            "--precision", "bf16"]  # fmt: skip
    assert main(argv) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "precision bf16" in lines[0]
    rows = [line for line in lines if line.startswith(("PyG", "pyg_orch"))]
    assert [row.split("  ")[0] for row in rows] == [
        "PyG NeighborLoader + GraphSAGE (trim_to_layer)",
        "pyg_orch static",
        "pyg_orch static, device caches",
    ]
    assert rows[0].split()[-3] == "1.00x"
    assert int(rows[2].split()[-2].replace(",", "")) > 0  # feature rows cached
    assert lines[-1].startswith("No GPU: this ran on the CPU")


def test_save_writes_the_table_with_its_command_and_a_chart(tmp_path, capsys):
    argv = ["aggregate", "--num-nodes", "3000", "--repeats", "2", "--copy-gb", "0.01"]
    assert main([*argv, "--save", str(tmp_path)]) == 0
    printed = capsys.readouterr().out
    saved = (tmp_path / "aggregate.txt").read_text()
    assert saved.splitlines()[0] == "$ python -m pyg_orch.benchmark " + " ".join(argv)
    assert saved.split("\n", 1)[1] == printed
    assert (tmp_path / "aggregate.png").read_bytes()[:4] == b"\x89PNG"


@pytest.mark.slow
def test_ddp_benchmark_prints_one_and_two_ranks(capsys, slow_unregister):
    argv = ["ddp", "--num-nodes", "2000", "--avg-degree", "8", "--batch-size", "64"]
    argv += ["--hidden-channels", "16", "--epochs", "1", "--warmup", "0"]
    assert main(argv) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("power-law graph: 2,000 nodes")
    rows = [line.split() for line in lines if line[:5].strip().isdigit()]
    assert [row[0] for row in rows] == ["1", "2"]
    assert rows[0][-1] == "1.00x"
    # Both worlds run the same epoch: 2 ranks take half the steps each, or one more.
    assert int(rows[1][2]) in (-(-int(rows[0][2]) // 2), -(-int(rows[0][2]) // 2) + 1)
    assert all(float(row[3]) > 0 for row in rows)
    # A rank that presampled (tqdm's lock) freed it before its quick exit.
    _check_children_unregistered(slow_unregister, semaphores=2)


# Loaded through PYTHONPATH by the processes a test spawns: a child logs each
# semaphore it unregisters from the resource tracker and takes a second to do
# it, so a parent that kills its children instead of letting them exit (the
# resource tracker then warns of "leaked semaphore objects") is caught every
# time, not one run in a few.
SLOW_UNREGISTER = """
import multiprocessing
import time
from multiprocessing import resource_tracker

_unregister = resource_tracker.unregister


def unregister(name, rtype):
    if multiprocessing.parent_process() is None:
        return _unregister(name, rtype)
    with open({log!r}, "a") as log:
        print("unregistering", rtype, name, file=log, flush=True)
        time.sleep(1)
        _unregister(name, rtype)
        print("unregistered", rtype, name, file=log)


resource_tracker.unregister = unregister
"""


@pytest.fixture
def slow_unregister(tmp_path, monkeypatch) -> Path:
    """Loads ``SLOW_UNREGISTER`` in spawned children; returns its log."""
    log = tmp_path / "unregistered.txt"
    (tmp_path / "sitecustomize.py").write_text(SLOW_UNREGISTER.format(log=str(log)))
    path = [str(tmp_path), os.environ.get("PYTHONPATH", "")]
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, path)))
    return log


def _check_children_unregistered(log: Path, semaphores: int) -> None:
    """At least ``semaphores`` were unregistered, and each one to the end."""
    lines = log.read_text().splitlines() if log.exists() else []
    begun = [line for line in lines if line.startswith("unregistering semaphore")]
    assert len(begun) >= semaphores
    # No child was killed while it unregistered one: each line has its pair.
    assert lines == [
        pair for line in begun for pair in (line, line.replace("ing", "ed", 1))
    ]


def test_run_spawned_lets_the_child_clean_up(slow_unregister):
    # tqdm.write makes tqdm's multiprocessing lock, as presampling's bar does.
    run_spawned(tqdm.write, "")
    _check_children_unregistered(slow_unregister, semaphores=1)


@pytest.mark.slow  # partitions twice and loads every rank in a fresh process
def test_memory_benchmark_sums_every_ranks_tensors_by_kind(capsys):
    argv = ["memory", "--num-nodes", "4000", "--parts", "2", "--hot-ratio", "0.1",
            "--num-features", "16"]  # fmt: skip
    assert main(argv) == 0
    lines = capsys.readouterr().out.splitlines()
    header = next(line for line in lines if line.lstrip().startswith("nodes"))
    assert header.split() == ["nodes", "parts", "rank", "features", "labels", "edges",
                              "sampler", "ids", "maps", "other", "hot", "total", "MB",
                              "whole/P", "ratio", "full", "MB"]  # fmt: skip
    rows = [line.split() for line in lines if line.split()[:2] == ["4,000", "2"]]
    assert [row[2] for row in rows] == ["0", "1"]
    for row in rows:
        kinds = [float(value) for value in row[3:11]]
        # The total is the kinds' sum, each printed to 0.05 MB.
        assert abs(sum(kinds) - float(row[11])) <= 0.05 * 9
        # Features: each rank about half of the 4,000 rows of 16 float32.
        assert 0.05 < kinds[0] < 0.2
        # No map of the whole graph, and no tensor as long as it.
        assert kinds[5] == 0.0 and row[-1] == "0.0"
    # Per local node: 16 float32 features; an int64 label, id and column
    # pointer; per edge its two int64 ends; per hot node its id, row and mean.
    constants = next(line for line in lines if line.startswith("4,000 nodes, bytes"))
    assert constants == (
        "4,000 nodes, bytes per local node: features 4.0-4.0 a feature, other "
        "24.0-24.0; per local edge 16.0-16.0; per hot node 136.0-136.0"
    )
    assert any(line.startswith("4,000 nodes: partition_graph into 2") for line in lines)
    projected = [line.split() for line in lines if "ogbn-papers100M" in line]
    assert [row[1] for row in projected] == ["4", "16", "64"]


def test_cluster_benchmark_compares_cluster_gcn_with_full_batch(capsys):
    argv = ["cluster", "--seeds", "0", "--epochs", "5", "--nodes-per-part", "300"]
    assert main(argv) == 0
    lines = capsys.readouterr().out.splitlines()
    row = next(
        line.split() for line in lines if line.startswith("cora") and "mean" not in line
    )
    full, cluster, difference, parts = (
        float(row[2]),
        float(row[3]),
        float(row[4]),
        int(row[5]),
    )
    assert parts == 2708 // 300
    assert abs(difference - (cluster - full)) <= 0.011  # printed to 0.01
    assert 0 < full <= 100 and 0 < cluster <= 100
