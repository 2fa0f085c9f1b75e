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

import os

import pyg_orch.distributed  # noqa: F401  (registers the ops: before the flags)
import pytest
import torch
import torch_geometric.testing as testing
import torch_geometric.testing.decorators as decorators
import torch_geometric.typing as pyg_typing
from torch_geometric.loader.cluster import ClusterData

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


decorators.has_package = _has_package_or_pyg_lib
decorators.withMETIS = testing.withMETIS = _with_metis
ClusterData._metis = metis_cluster


@pytest.fixture(autouse=True)
def _seeded():
    # PyG's tests build random graphs from the unseeded global generator.
    # Every test starts from the same seed, so a failure repeats. Unseeded,
    # a case of test_dist_neighbor_sampler_temporal_hetero failed in one full
    # run and one of test_dist_link_neighbor_sampler_temporal_hetero in
    # another; neither failed again in 30 reruns of the link cases.
    torch.manual_seed(12345)
