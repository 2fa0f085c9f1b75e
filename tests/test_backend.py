"""PyG's own classes sample and partition through pyg_orch after ``import pyg_orch``.

Checked against PyG on the whole graph (fan-out -1 makes a batch exact), with
PyG's classes unchanged and no global ``torch_geometric.typing`` flag set.
PyG's own test files for these classes run in tests/test_pyg_loader_suite.py
and tests/test_pyg_distributed_suite.py.
"""

import os
import subprocess
import sys
import textwrap
import types
import warnings
from pathlib import Path

import pytest
import torch
import torch_geometric.typing as pyg_typing
from torch_geometric.data import Data, HeteroData
from torch_geometric.loader import ClusterData, ClusterLoader, NeighborLoader
from torch_geometric.nn import GraphSAGE, HeteroConv, HeteroLinear, SAGEConv, to_hetero
from torch_geometric.sampler import NeighborSampler

import pyg_orch
from pyg_orch import OrchNeighborSampler
from pyg_orch.datasets import load_dataset

ROOT = Path(__file__).parents[1]


def _power_law_graph(num_nodes: int, seed: int) -> Data:
    generator = torch.Generator().manual_seed(seed)
    weight = torch.arange(1, num_nodes + 1, dtype=torch.float) ** -0.8
    src = torch.multinomial(weight, 8 * num_nodes, True, generator=generator)
    dst = torch.randint(num_nodes, (8 * num_nodes,), generator=generator)
    x = torch.randn(num_nodes, 16, generator=generator)
    return Data(x=x, edge_index=torch.stack([src, dst]), num_nodes=num_nodes)


def test_no_global_flag_is_set_and_pyg_lib_ops_paths_stay_off():
    # The flags PyG's other ops read are as PyG found them: pyg-lib and
    # torch-sparse are absent here.
    for flag in ("WITH_PYG_LIB", "WITH_TORCH_SPARSE", "WITH_METIS", "WITH_SEGMM",
                 "WITH_GMM", "WITH_INDEX_SORT", "WITH_EDGE_TIME_NEIGHBOR_SAMPLE",
                 "WITH_WEIGHTED_NEIGHBOR_SAMPLE", "WITH_SAMPLED_OP"):  # fmt: skip
        assert getattr(pyg_typing, flag) is False, flag
    assert pyg_orch.backend_status()["neighbor_sample"] == "pyg_orch"


def test_building_samplers_writes_no_flag(monkeypatch):
    # Not even for a moment: another thread could read it meanwhile.
    writes = []

    class Recording(types.ModuleType):
        def __setattr__(self, name, value):
            writes.append(name)
            super().__setattr__(name, value)

    monkeypatch.setattr(pyg_typing, "__class__", Recording)
    data = _power_law_graph(50, 0)
    data.edge_time = torch.arange(data.num_edges)
    data.weight = torch.rand(data.num_edges) + 0.1
    OrchNeighborSampler(data, [2], time_attr="edge_time")
    OrchNeighborSampler(data, [2], weight_attr="weight")
    NeighborSampler(data, [2], time_attr="edge_time")
    NeighborSampler(data, [2], weight_attr="weight")
    assert writes == []


def test_to_hetero_heterolinear_and_heteroconv_still_work():
    # They read WITH_PYG_LIB / WITH_SEGMM for pyg-lib's segment_matmul: the
    # backend must leave them on torch's path, which gives the plain result.
    torch.manual_seed(0)
    x = torch.randn(10, 8)
    type_vec = torch.tensor([0, 1, 0, 2, 1, 1, 0, 2, 2, 0])
    lin = HeteroLinear(8, 4, num_types=3)
    expected = torch.stack(
        [x[i] @ lin.weight[int(t)] + lin.bias[int(t)] for i, t in enumerate(type_vec)]
    )
    torch.testing.assert_close(lin(x, type_vec), expected)

    data = HeteroData()
    data["a"].x, data["b"].x = torch.randn(6, 8), torch.randn(5, 8)
    data["a", "to", "b"].edge_index = torch.tensor([[0, 1, 5], [0, 4, 2]])
    data["b", "to", "a"].edge_index = torch.tensor([[0, 4, 2], [0, 1, 5]])
    conv = HeteroConv({t: SAGEConv((8, 8), 4) for t in data.edge_types})
    out = conv(data.x_dict, data.edge_index_dict)
    plain = conv.convs[("a", "to", "b")](
        (data["a"].x, data["b"].x), data["a", "to", "b"].edge_index
    )
    torch.testing.assert_close(out["b"], plain)
    model = to_hetero(GraphSAGE(-1, 8, 2, 4), data.metadata())
    assert model(data.x_dict, data.edge_index_dict)["a"].shape == (6, 4)


def test_pyg_neighbor_loader_batches_match_the_whole_graph():
    data = load_dataset("Cora")
    torch.manual_seed(0)
    model = GraphSAGE(data.num_features, 16, 2, 7).eval()
    with torch.no_grad():
        full = model(data.x, data.edge_index)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # PyG's "without pyg-lib" warning
        loader = NeighborLoader(data, [-1, -1], batch_size=300, shuffle=True)
    assert type(loader) is NeighborLoader
    seen = 0
    for batch in loader:
        with torch.no_grad():
            out = model(batch.x, batch.edge_index)[: batch.batch_size]
        torch.testing.assert_close(out, full[batch.n_id[: batch.batch_size]])
        seen += batch.batch_size
    assert seen == data.num_nodes


def test_pyg_hetero_neighbor_loader_batches_match_the_whole_graph():
    torch.manual_seed(0)
    data = HeteroData()
    data["paper"].x = torch.randn(40, 8)
    data["author"].x = torch.randn(25, 8)
    data["topic"].x = torch.randn(7, 8)  # no edge reaches the last topics
    writes = torch.stack([torch.randint(25, (90,)), torch.randint(40, (90,))])
    data["author", "writes", "paper"].edge_index = writes
    data["paper", "rev_writes", "author"].edge_index = writes.flip(0)
    data["paper", "cites", "paper"].edge_index = torch.randint(40, (2, 120))
    of = torch.stack([torch.randint(4, (30,)), torch.randint(40, (30,))])
    data["topic", "of", "paper"].edge_index = of
    data["paper", "rev_of", "topic"].edge_index = of.flip(0)
    model = to_hetero(GraphSAGE((-1, -1), 16, 2, 3), data.metadata()).eval()
    with torch.no_grad():
        full = model(data.x_dict, data.edge_index_dict)
    loader = NeighborLoader(data, [-1, -1], batch_size=9, input_nodes="paper")
    for batch in loader:
        with torch.no_grad():
            out = model(batch.x_dict, batch.edge_index_dict)["paper"]
        size = batch["paper"].batch_size
        torch.testing.assert_close(
            out[:size], full["paper"][batch["paper"].n_id[:size]]
        )
    # Seeds of a type no edge type reaches (topic 6 has no edge).
    topics = NeighborLoader(data, [-1], batch_size=7, input_nodes="topic")
    assert next(iter(topics))["topic"].n_id[:7].tolist() == list(range(7))


def test_pyg_sampler_is_temporal_weighted_and_induced_through_the_backend():
    data = _power_law_graph(200, 0)
    data.time = torch.arange(200)
    data.weight = torch.rand(data.num_edges) + 0.1
    seeds = torch.arange(0, 200, 7)
    timed = NeighborLoader(data, [5, 5], batch_size=len(seeds), input_nodes=seeds,
                           time_attr="time")  # fmt: skip
    batch = next(iter(timed))
    # Every node of a seed's subgraph is no later than its seed.
    assert bool((batch.time <= batch.time[: len(seeds)][batch.batch]).all())
    weighted = NeighborLoader(data, [3], batch_size=10, weight_attr="weight")
    assert next(iter(weighted)).num_sampled_edges[0] <= 30
    induced = NeighborLoader(data, [-1], batch_size=20, subgraph_type="induced")
    batch = next(iter(induced))
    expected = data.subgraph(batch.n_id)
    assert batch.edge_index.size(1) == expected.edge_index.size(1)


def test_a_graph_changed_in_place_is_sampled_as_it_is_now():
    # The ops keep the kernel's layout of a graph's tensors while they are
    # unchanged: an in-place change must show in the next batch.
    rowptr, col = (
        {"a__to__b": torch.tensor([0, 1, 2])},
        {"a__to__b": torch.tensor([0, 1])},
    )
    args = (["a", "b"], [("a", "to", "b")], rowptr, col, {"b": torch.tensor([0])},
            {"a__to__b": [-1]})  # fmt: skip
    before = torch.ops.pyg.hetero_neighbor_sample(*args, csc=True)[2]["a"]
    col["a__to__b"][0] = 3
    after = torch.ops.pyg.hetero_neighbor_sample(*args, csc=True)[2]["a"]
    assert before.tolist() == [0] and after.tolist() == [3]


def test_a_seed_past_the_graph_is_refused():
    with pytest.raises(IndexError, match=r"seed ids .* must be in \[0, 2\)"):
        torch.ops.pyg.neighbor_sample(
            torch.tensor([0, 1, 2]), torch.tensor([1, 0]), torch.tensor([2]), [1],
            csc=True,
        )  # fmt: skip


@pytest.mark.parametrize("num_parts", [4, 16])
def test_cluster_data_is_a_balanced_metis_partition(num_parts):
    data = load_dataset("Cora")  # a real graph: METIS finds its communities
    cluster = ClusterData(data, num_parts, log=False)
    part_of = torch.empty(data.num_nodes, dtype=torch.long)
    sizes = cluster.partition.partptr.diff()
    part_of[cluster.partition.node_perm] = torch.repeat_interleave(
        torch.arange(num_parts), sizes
    )
    # Every node in exactly one part: node_perm is a permutation.
    assert torch.equal(
        cluster.partition.node_perm.sort().values, torch.arange(data.num_nodes)
    )
    assert int(sizes.max()) <= 1.05 * data.num_nodes / num_parts
    src, dst = data.edge_index
    cut = int((part_of[src] != part_of[dst]).sum())
    generator = torch.Generator().manual_seed(0)
    random_parts = torch.randint(num_parts, (data.num_nodes,), generator=generator)
    random_cut = int((random_parts[src] != random_parts[dst]).sum())
    assert cut <= 0.5 * random_cut, (cut, random_cut)
    batch = next(iter(ClusterLoader(cluster, batch_size=2)))
    assert batch.num_nodes == int(sizes[:2].sum())


def _run_with_stand_in(package: str, tmp_path: Path) -> str:
    # A bare module named like the compiled package, ahead on the path.
    (tmp_path / package).mkdir()
    (tmp_path / package / "__init__.py").write_text("")
    script = textwrap.dedent("""
        import torch
        import pyg_orch
        import torch_geometric
        from torch_geometric.loader import cluster
        from torch_geometric.sampler import neighbor_sampler
        status = pyg_orch.backend_status()
        print(status["installed natively"])
        print(neighbor_sampler.torch_geometric is torch_geometric)
        print(cluster.ClusterData._metis.__module__)
        print(hasattr(torch.ops.pyg, "neighbor_sample"),
              hasattr(torch.ops.torch_sparse, "neighbor_sample"))
    """)
    result = subprocess.run(
        [sys.executable, "-W", "ignore", "-c", script], capture_output=True,
        text=True, timeout=300,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)])},
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


@pytest.mark.slow  # a fresh interpreter imports torch_geometric
@pytest.mark.parametrize("package", ["pyg_lib", "torch_sparse"])
def test_nothing_is_replaced_when_a_native_package_is_there(package, tmp_path):
    lines = _run_with_stand_in(package, tmp_path).split("\n")
    assert lines[0] == package
    assert lines[1] == "True"  # PyG's sampler reads PyG's own flags
    assert lines[2] == "torch_geometric.loader.cluster"
    assert lines[3] == "False False"  # no op of ours in their namespaces


@pytest.mark.slow  # a fresh interpreter imports torch_geometric
def test_the_backend_says_what_it_did_once_in_the_log():
    script = textwrap.dedent("""
        import logging
        logging.basicConfig(level=logging.INFO)
        import pyg_orch
        import torch_geometric
        import pyg_orch.backend
        pyg_orch.backend.install()
        pyg_orch.backend.apply_sampling()
    """)
    result = subprocess.run(
        [sys.executable, "-W", "error::UserWarning:pyg_orch", "-c", script],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stderr.count("pyg_orch samples and partitions") == 1


@pytest.mark.slow  # a fresh interpreter imports torch_geometric
def test_version_lists_the_backend():
    result = subprocess.run(
        [sys.executable, "-m", "pyg_orch", "--version"], capture_output=True,
        text=True, timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    assert "neighbor_sample: pyg_orch" in result.stdout
    assert "installed natively: none" in result.stdout
