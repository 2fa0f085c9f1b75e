"""Opens PyG's gates for its distributed tests, run without pyg-lib.

PyG runs ``test/distributed`` only with ``DIST_TEST=1`` and pyg-lib installed
(``onlyDistributedTest``), and its partitioning tests only where
``torch.ops.torch_sparse.partition`` works (``withMETIS``). Here pyg-lib's
four distributed ops come from ``pyg_orch.distributed`` (imported first: it
registers them only while pyg-lib looks absent), the single-machine
reference sampler of the sampler tests is pyg_orch's, and METIS is
pyg_orch's own binding (:func:`~pyg_orch.distributed.metis.metis_parts`),
routed into ``ClusterData._metis`` by :func:`metis_cluster`.

Loaded as a pytest plugin by ``pytest.ini`` beside it and, in the processes
the tests spawn (which run no plugin), by ``sitecustomize.py``. The flags it
sets are global to torch_geometric: the suite runs in a process of its own
(tests/test_pyg_distributed_suite.py).
"""

import functools
import os
import random
import time

import pytest
import torch
import torch_geometric.distributed.dist_loader as dist_loader
import torch_geometric.distributed.rpc as dist_rpc
import torch_geometric.testing as testing
import torch_geometric.testing.decorators as decorators
import torch_geometric.testing.distributed as testing_distributed
import torch_geometric.typing as pyg_typing
from torch_geometric.loader.cluster import ClusterData

import pyg_orch.distributed  # noqa: F401  (registers the ops: before the flags)
from pyg_orch.distributed.launch import ephemeral_ports
from pyg_orch.distributed.metis import metis_parts

os.environ["DIST_TEST"] = "1"
pyg_typing.WITH_PYG_LIB = True
pyg_typing.WITH_EDGE_TIME_NEIGHBOR_SAMPLE = True
pyg_typing.WITH_WEIGHTED_NEIGHBOR_SAMPLE = True
pyg_typing.WITH_METIS = True
decorators.WITH_PYG_LIB = True
decorators.WITH_METIS = True
_has_package = decorators.has_package


def _has_package_or_pyg_lib(package: str) -> bool:
    return package == "pyg_lib" or _has_package(package)


def metis_cluster(self: ClusterData, edge_index: torch.Tensor, num_nodes: int):
    """``ClusterData._metis`` through pyg_orch's METIS: one part per node."""

    row, col = edge_index.cpu()
    order = torch.argsort(row, stable=True)
    rowptr = torch.zeros(num_nodes + 1, dtype=torch.long)
    rowptr[1:] = torch.bincount(row, minlength=num_nodes).cumsum(0)
    parts = metis_parts(rowptr, col[order], self.num_parts, seed=0)
    return parts.to(edge_index.device)


def _with_metis(func):
    return func  # pyg_orch's METIS stands in for torch_sparse.partition


def outside_ephemeral(port: int) -> int:
    """``port``, or where every rank maps it when the kernel could hand it out.

    PyG's tests choose their RPC port with ``bind(("127.0.0.1", 0))``, from
    the range the kernel also gives outgoing connections. A rank that
    connects to rank 0's store before rank 0 listens may then be given that
    very port for its own end (a TCP self-connect): rank 0 cannot listen and
    exits, and the other rank waits on itself forever (seen once in a full
    run, in ``test_dist_link_neighbor_sampler_edge_level_temporal_hetero``).
    Every rank maps the port the same way, below that range.
    """
    low, high = ephemeral_ports()
    if not low <= port <= high:
        return port
    return _LOWEST_PORT + (port - low) % (low - _LOWEST_PORT)


def _remapping_port(init_rpc):
    @functools.wraps(init_rpc)
    def remapped(*args, **kwargs):
        if "master_port" in kwargs:
            kwargs["master_port"] = outside_ephemeral(int(kwargs["master_port"]))
        elif len(args) > 2:
            args = (*args[:2], outside_ephemeral(int(args[2])), *args[3:])
        return init_rpc(*args, **kwargs)

    return remapped


def bounded_run_mproc(mp_context, pargs, full_trace=False, timeout=5):
    """PyG's ``assert_run_mproc``, but never waiting on a rank forever.

    PyG's joins each rank without a limit: when one rank dies early, the
    others can wait for it for good. Here the test fails instead, naming the
    ranks, once a rank has failed and the others have not finished within
    ``_PEER_GRACE`` seconds, or after ``_TEST_LIMIT`` seconds in all.
    """
    manager = testing_distributed.Manager()
    queues = [manager.Queue() for _ in pargs]
    procs = [
        mp_context.Process(
            target=testing_distributed.ps_std_capture,
            args=[p.target, q, len(pargs), *p.args],
        )
        for p, q in zip(pargs, queues, strict=True)
    ]
    for proc in procs:
        proc.start()
    stuck = _wait(procs)
    for proc in stuck:
        proc.kill()
        proc.join()
    outputs = [
        _output(q, timeout if p not in stuck else 0)
        for p, q in zip(procs, queues, strict=True)
    ]
    for stdout, stderr in outputs:
        for text in (stdout, stderr):
            if text:
                print(text)
    if stuck:
        ranks = [procs.index(proc) for proc in stuck]
        exits = [proc.exitcode for proc in procs]
        pytest.fail(
            f"ranks {ranks} did not finish and were killed (exit codes "
            f"{exits}); their peers' output is above"
        )
    for proc, (_, stderr) in zip(procs, outputs, strict=True):
        if proc.exitcode != 0:
            pytest.fail(
                pytrace=full_trace,
                reason=stderr.splitlines()[-1]
                if stderr
                else f"exitcode {proc.exitcode}",
            )


def _wait(procs):
    # The ranks still running when the test must stop waiting for them.
    deadline = time.monotonic() + _TEST_LIMIT
    failed_at = None
    while any(proc.is_alive() for proc in procs):
        now = time.monotonic()
        if failed_at is None and any(proc.exitcode not in (None, 0) for proc in procs):
            failed_at = now
        if now > deadline or (failed_at is not None and now > failed_at + _PEER_GRACE):
            return [proc for proc in procs if proc.is_alive()]
        time.sleep(0.05)
    return []


def _output(queue, timeout):
    try:
        return queue.get(timeout=timeout) if timeout else queue.get_nowait()
    except Exception:  # a killed rank put nothing
        return "", ""


# PyG's slowest distributed test takes about 40 s here.
_TEST_LIMIT = 180.0
_PEER_GRACE = 30.0
_LOWEST_PORT = 10000

decorators.has_package = _has_package_or_pyg_lib
decorators.withMETIS = testing.withMETIS = _with_metis
ClusterData._metis = metis_cluster
dist_rpc.init_rpc = _remapping_port(dist_rpc.init_rpc)
dist_loader.init_rpc = _remapping_port(dist_loader.init_rpc)
testing_distributed.assert_run_mproc = bounded_run_mproc


@pytest.fixture(autouse=True)
def _seeded():
    # PyG's tests build random graphs from the unseeded global generator.
    # Every test starts from the same seed, so a failure repeats. Unseeded,
    # a case of test_dist_neighbor_sampler_temporal_hetero failed in one full
    # run and one of test_dist_link_neighbor_sampler_temporal_hetero in
    # another; neither failed again in 30 reruns of the link cases.
    torch.manual_seed(12345)
    random.seed(12345)  # FakeHeteroDataset's sizes
