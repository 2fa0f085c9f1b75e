"""Numba's threading layer in a plain venv, in forked workers and in threads.

Numba picks its layer once per process, so every case runs in a fresh
interpreter. ``NUMBA_THREADING_LAYER`` stands in for a machine without TBB
(e.g. aarch64, which has no tbb wheel): there Numba runs GNU OpenMP, which
forked DataLoader workers do not survive, or ``workqueue``, which aborts when
two threads run a parallel kernel at once.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from importlib.metadata import PackageNotFoundError, version

import pytest

# Small enough for 2 cores; still several batches per worker.
HOT_WORKERS = """
import torch
from torch_geometric.nn import GraphSAGE
from torch_geometric.utils import scatter

from pyg_orch import OrchModel, OrchNeighborLoader
from pyg_orch.datasets import load_cora

data = load_cora()
loader = OrchNeighborLoader(data, num_neighbors=[5, 5], batch_size=300,
                            hot_ratio=0.2, num_workers=2)
OrchModel(GraphSAGE(data.num_features, 8, 2, 7), loader)
mean = scatter(data.x[data.edge_index[0]], data.edge_index[1], 0,
               data.num_nodes, "mean")
batches = 0
for batch in loader:
    expected = mean[batch.n_id[batch.hot_index]]
    assert batch.hot_index.numel() and torch.allclose(batch.hot_agg, expected,
                                                      atol=1e-6)
    batches += 1
print(batches)
"""

CONCURRENT_THREADS = """
import threading

import numpy as np

from pyg_orch.kernels.aggregate import aggregate

rng = np.random.default_rng(0)
nodes, edges = 20_000, 200_000
colptr = np.zeros(nodes + 1, np.int64)
colptr[1:] = np.cumsum(np.bincount(rng.integers(0, nodes, edges), minlength=nodes))
row = rng.integers(0, nodes, edges)
x = rng.standard_normal((nodes, 32), dtype=np.float32)
every = np.arange(nodes)


def mean():
    return aggregate(colptr, row, x, every, "mean", np.empty_like(x))


expected = mean()
same = []


def work():
    same.extend(np.array_equal(mean(), expected) for _ in range(20))


threads = [threading.Thread(target=work) for _ in range(2)]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()
print(len(same), all(same))
"""


def _python(code: str, layer: str | None = None) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    # As a user's shell has it: nothing that points the loader at libtbb.
    env.pop("LD_LIBRARY_PATH", None)
    env.pop("NUMBA_THREADING_LAYER", None)
    if layer is not None:
        env["NUMBA_THREADING_LAYER"] = layer
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True, text=True, env=env, timeout=300,
    )  # fmt: skip


def test_numba_runs_tbb_once_pyg_orch_is_imported():
    try:
        version("tbb")
    except PackageNotFoundError:
        pytest.skip("the tbb package is not installed")
    result = _python("""
        import numba
        import numpy as np

        import pyg_orch
        from pyg_orch.kernels.aggregate import gather_rows

        x = np.ones((8, 2), np.float32)
        gather_rows(x, np.arange(8), np.empty_like(x))
        print(numba.threading_layer())
    """)  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["tbb"]


@pytest.mark.slow  # trains in a subprocess whose workers fork
def test_cli_trains_with_hot_vertices_and_worker_processes():
    result = subprocess.run(
        [sys.executable, "-m", "pyg_orch", "train", "--hot-ratio", "0.2",
         "--num-workers", "2", "--epochs", "1", "--num-neighbors", "5", "5",
         "--hidden-channels", "16", "--no-progress"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "test accuracy:" in result.stdout


def test_hot_batches_from_worker_processes_under_gnu_openmp():
    # Cora's 2,708 nodes at batch 300: 10 batches, all with hot vertices.
    result = _python(HOT_WORKERS, "omp")
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["10"]


def test_two_threads_run_kernels_at_once_under_workqueue():
    result = _python(CONCURRENT_THREADS, "workqueue")
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["40", "True"]
