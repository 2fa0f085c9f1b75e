"""The benchmarks run end to end on tiny settings and print their tables."""

from pyg_orch.benchmark.__main__ import main
from pyg_orch.sampling import pyg_backend_available


def test_sampler_benchmark_prints_a_row_per_sampler(capsys):
    assert main(["sampler", "--num-nodes", "3000", "--batches", "3"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("power-law graph: 3,000 nodes")
    numba_row = next(line for line in lines if line.startswith("pyg_orch (Numba)"))
    milliseconds, per_second = map(float, numba_row.split()[2:4])
    assert milliseconds > 0 and abs(per_second * milliseconds / 1000 - 1) < 0.02
    if not pyg_backend_available():
        assert "torch-sparse: not installed, so not measured (no ratio)." in lines


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


def test_epoch_benchmark_prints_every_configuration(capsys):
    argv = ["epoch", "--num-nodes", "3000", "--avg-degree", "8", "--batches", "2"]
    assert (
        main([*argv, "--warmup", "1", "--batch-size", "64", "--hidden-channels", "16"])
        == 0
    )
    lines = capsys.readouterr().out.splitlines()
    rows = [line for line in lines if line.startswith(("PyG", "pyg_orch"))]
    assert [row.split("  ")[0] for row in rows] == [
        "PyG NeighborLoader + GraphSAGE (trim_to_layer)",
        "pyg_orch hot_ratio=0",
        "pyg_orch hot_ratio=0.1",
        "pyg_orch hot_ratio=0.2",
    ]
    assert rows[0].split()[-2:] == ["1.00x", "1.00x"]


def test_accuracy_benchmark_prints_a_row_per_model(capsys):
    argv = ["accuracy", "--models", "sage", "gcn", "--seeds", "0", "--epochs", "1"]
    assert main([*argv, "--num-neighbors", "5", "5", "--hidden-channels", "16"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split(" | ")[:2] for line in lines if line.startswith("| cora")] == [
        ["| cora", "sage"],
        ["| cora", "gcn"],
    ]


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


def test_gpu_benchmark_runs_on_the_cpu_too(capsys):
    argv = ["gpu", "--num-nodes", "3000", "--avg-degree", "8", "--batches", "3"]
    argv += ["--warmup", "1", "--batch-size", "64", "--hidden-channels", "16"]
    assert main([*argv, "--modes", "static", "--device-cache", "100000"]) == 0
    lines = capsys.readouterr().out.splitlines()
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


def test_ddp_benchmark_prints_one_and_two_ranks(capsys):
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
