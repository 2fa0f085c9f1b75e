"""The benchmarks run end to end on tiny settings and print their tables."""

from pyg_orch.benchmark.__main__ import main
from pyg_orch.sampling import _backend_available


def test_sampler_benchmark_prints_a_row_per_sampler(capsys):
    assert main(["sampler", "--num-nodes", "3000", "--batches", "3"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("power-law graph: 3,000 nodes")
    numba_row = next(line for line in lines if line.startswith("pyg_orch (Numba)"))
    milliseconds, per_second = map(float, numba_row.split()[2:4])
    assert milliseconds > 0 and abs(per_second * milliseconds / 1000 - 1) < 0.02
    if not _backend_available():
        assert "torch-sparse: not installed, so not measured (no ratio)." in lines
