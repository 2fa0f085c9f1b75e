"""A partitioned graph on PyG's distributed engine, ranks on 127.0.0.1.

Each test partitions a graph with ``partition_graph``, runs one process per
partition with ``spawn_ranks`` and checks what the ranks return against the
whole graph: plain PyG models on ``data.x`` and ``data.edge_index``, and the
graph's own rows. Each spawns ranks (seconds of imports each): the README's
``pytest`` runs two, on one node type and on several; the rest are slow.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from unittest import mock

import partitioned_ranks as ranks
import pytest
import torch
from conftest import WeightedGraphConvGNN
from torch_geometric.data import Data
from torch_geometric.nn import GraphSAGE, to_hetero

from pyg_orch.datasets import load_cora
from pyg_orch.distributed import (
    OrchDistNeighborLoader,
    PartitionIds,
    load_partition,
    load_splits,
    original_ids,
    partition_graph,
    partition_ids,
    spawn_ranks,
)


@pytest.fixture(scope="module")
def graph() -> Data:
    """Cora with an edge feature per edge (its id) and 4 classes."""
    data = load_cora()
    data.edge_attr = torch.arange(data.num_edges, dtype=torch.float).view(-1, 1)
    data.y = data.y % 4
    return data


def _partition(graph: Data, tmp_path, num_parts: int, hot_ratio: float):
    root = tmp_path / f"parts{num_parts}_hot{hot_ratio}"
    partition_graph(graph, num_parts, root, balance=None, hot_ratio=hot_ratio)
    return root


def _model_state(graph: Data, num_layers: int) -> tuple[GraphSAGE, dict]:
    torch.manual_seed(0)
    model = GraphSAGE(
        graph.num_features, 16, num_layers=num_layers, out_channels=4
    ).eval()
    return model, {"in": graph.num_features, "weights": model.state_dict()}


def _check_batches(
    graph: Data, batches: list[dict], fanouts: list[int], root: Path
) -> None:
    # The batches' ids are the partition's; mapped back, the user's.
    nodes, edges = original_ids(root), original_ids(root, kind="edge")
    for batch in batches:
        n_id, e_id = nodes[batch["n_id"]], edges[batch["e_id"]]
        # Every sampled edge is a real edge of the whole graph, by its id.
        assert torch.equal(n_id[batch["edge_index"]], graph.edge_index[:, e_id])
        assert torch.equal(batch["x"], graph.x[n_id])
        assert torch.equal(batch["y"], graph.y[n_id])
        assert torch.equal(batch["edge_attr"], graph.edge_attr[e_id])
        in_degree = torch.bincount(batch["edge_index"][1], minlength=n_id.numel())
        assert int(in_degree.max()) <= max(fanouts)


# (parts, sampling worker processes per rank, hot ratio): 2 processes
# sampling in each rank, with hot vertices; and with -m slow each sampling in
# a worker process. Cold graphs: the hetero and edge-weight tests' cases at
# hot ratio 0; 3 parts: the rare-relation test's and PyG's distributed suite.
FAST = [(2, 0, 0.2)]
SLOW = [(2, 1, 0.2)]
CASES = [*FAST, *(pytest.param(*case, marks=pytest.mark.slow) for case in SLOW)]


@pytest.mark.parametrize("parts, workers, hot_ratio", CASES)
def test_batches_are_the_graph_and_outputs_the_whole_graph_model(
    graph, tmp_path, parts, workers, hot_ratio
):
    root = _partition(graph, tmp_path, parts, hot_ratio)
    model, state = _model_state(graph, 2)
    sampled = spawn_ranks(
        ranks.node_batches, parts, (root, [3, 2], workers), timeout=60
    )
    exact = spawn_ranks(
        ranks.node_batches, parts, (root, [-1, -1], workers, state), timeout=60
    )
    with torch.no_grad():
        reference = model(graph.x, graph.edge_index)
    seen = []
    for rank in range(parts):
        _check_batches(graph, sampled[rank]["batches"], [3, 2], root)
        for seeds, out in exact[rank]["outputs"]:
            seeds = original_ids(root)[seeds]
            torch.testing.assert_close(out, reference[seeds], atol=1e-5, rtol=1e-4)
            seen.append(seeds)
        if workers == 0:  # the sampler ran here: its columns are this part's
            assert sampled[rank]["columns"] == sampled[rank]["nodes"]
        hot = [b["hot"] for b in exact[rank]["batches"] if b["hot"] is not None]
        assert (sum(h.numel() for h in hot) > 0) == (hot_ratio > 0)
    assert torch.equal(torch.cat(seen).sort().values, torch.arange(graph.num_nodes))


@pytest.mark.slow  # the benchmark measures it on every run of its own
def test_hot_vertices_cut_remote_rows(graph, tmp_path):
    traffic = {}
    for hot_ratio in (0.0, 0.2):
        root = _partition(graph, tmp_path, 2, hot_ratio)
        results = spawn_ranks(ranks.node_batches, 2, (root, [10, 5], 0), timeout=60)
        traffic[hot_ratio] = sum(result["traffic"]["rows"] for result in results)
    assert traffic[0.2] < 0.6 * traffic[0.0], traffic


@pytest.mark.slow
def test_link_batches_are_real_edges(graph, tmp_path):
    root = _partition(graph, tmp_path, 2, 0.2)
    results = spawn_ranks(ranks.link_batches, 2, (root, [3, 2]), timeout=60)
    labelled = 0
    nodes, original_edges = original_ids(root), original_ids(root, kind="edge")
    for batches in results:
        for batch in batches:
            n_id, e_id = nodes[batch["n_id"]], original_edges[batch["e_id"]]
            assert torch.equal(n_id[batch["edge_index"]], graph.edge_index[:, e_id])
            assert torch.equal(batch["x"], graph.x[n_id])
            positive = batch["edge_label_index"][:, batch["edge_label"] == 1]
            pairs = n_id[positive]
            ids = pairs[0] * graph.num_nodes + pairs[1]
            edges = graph.edge_index[0] * graph.num_nodes + graph.edge_index[1]
            assert bool(torch.isin(ids, edges).all())
            labelled += positive.size(1)
    assert labelled == graph.num_edges


@pytest.mark.slow
@pytest.mark.parametrize("hot_ratio", [0.0, 0.3])
def test_edge_weights_are_carried_and_weigh_as_on_one_machine(
    graph, tmp_path, hot_ratio
):
    data = graph.clone()
    generator = torch.Generator().manual_seed(1)
    data.edge_weight = torch.rand(data.num_edges, generator=generator) * 3
    root = tmp_path / "weighted"
    # GraphConv's default aggregation, weighted: not among the default kinds.
    partition_graph(data, 2, root, balance=None, hot_ratio=hot_ratio,
                    hot_kinds=("weighted_sum",))  # fmt: skip
    torch.manual_seed(0)
    model = WeightedGraphConvGNN(data.num_features, 16, num_layers=2,
                                       out_channels=4).eval()  # fmt: skip
    state = {"in": data.num_features, "weights": model.state_dict()}
    with torch.no_grad():
        reference = model(data.x, data.edge_index, edge_weight=data.edge_weight)
        unweighted = model(data.x, data.edge_index)
    assert (reference - unweighted).abs().max() > 1  # the weights matter here
    results = spawn_ranks(ranks.weighted_outputs, 2, (root, state), timeout=60)
    seen = []
    nodes, edges = original_ids(root), original_ids(root, kind="edge")
    for result in results:
        for e_id, edge_weight in result["edges"]:
            assert torch.equal(edge_weight, data.edge_weight[edges[e_id]])
        for seeds, out in result["outputs"]:
            seeds = nodes[seeds]
            torch.testing.assert_close(out, reference[seeds], atol=1e-5, rtol=1e-4)
            seen.append(seeds)
    assert torch.equal(torch.cat(seen).sort().values, torch.arange(data.num_nodes))


def _hetero_outputs(data, root, num_parts: int, hot_ratio: float) -> list[dict]:
    # A to_hetero(GraphSAGE) on the partitioned graph, checked against the
    # same model on the whole graph; returns what the ranks returned.
    partition_graph(data, num_parts, root, balance=None, hot_ratio=hot_ratio)
    torch.manual_seed(0)
    model = to_hetero(
        GraphSAGE((-1, -1), 16, num_layers=2, out_channels=4), data.metadata()
    )
    with torch.no_grad():
        reference = model(data.x_dict, data.edge_index_dict)["paper"]
    state = {
        "metadata": data.metadata(), "weights": model.state_dict(),
        "x": data.x_dict, "edge_index": data.edge_index_dict,
    }  # fmt: skip
    results = spawn_ranks(
        ranks.hetero_outputs, num_parts, (root, state, "paper"), timeout=60
    )
    seen = []
    papers = original_ids(root)["paper"]
    for result in results:
        for seeds, out in result["outputs"]:
            seeds = papers[seeds]
            torch.testing.assert_close(out, reference[seeds], atol=1e-5, rtol=1e-4)
            seen.append(seeds)
        assert (result["hot"] > 0) == (hot_ratio > 0)
        # The sampler's columns of a relation: this part's destinations only.
        for edge_type, columns in result["columns"].items():
            assert columns == result["nodes"][edge_type[2]]
    papers = torch.arange(data["paper"].num_nodes)
    assert torch.equal(torch.cat(seen).sort().values, papers)
    return results


@pytest.mark.parametrize("hot_ratio", [pytest.param(0.0, marks=pytest.mark.slow), 0.2])
def test_hetero_outputs_equal_the_whole_graph_model(mag, tmp_path, hot_ratio):
    data = mag.clone()
    for edge_type in data.edge_types:
        del data[edge_type].edge_attr
    _hetero_outputs(data, tmp_path / "mag", 2, hot_ratio)


@pytest.mark.slow
def test_hetero_types_of_their_own_widths_are_served_their_own_rows(mag, tmp_path):
    # PyG's Partitioner pads every type's x to the widest. Every relation's
    # edge_weight is carried by edge id too (the model reads none of them).
    data = mag.clone()
    generator = torch.Generator().manual_seed(2)
    data["author"].x = torch.randn(data["author"].num_nodes, 11, generator=generator)
    for store in data.edge_stores:
        store.edge_weight = torch.rand(store.num_edges, generator=generator)
    results = _hetero_outputs(data, tmp_path / "widths", 2, 0.3)
    original = original_ids(tmp_path / "widths", kind="edge")
    checked = 0
    for result in results:
        for edges in result["edges"]:
            for edge_type, (e_id, edge_weight) in edges.items():
                e_id = original[edge_type][e_id]
                assert torch.equal(edge_weight, data[edge_type].edge_weight[e_id])
                checked += e_id.numel()
    assert checked > 0


@pytest.mark.slow
@pytest.mark.parametrize("num_parts", [2, 3])
def test_a_part_without_an_edge_of_a_rare_relation_samples_exactly(
    mag, tmp_path, num_parts
):
    data = mag.clone()
    for edge_type in data.edge_types:
        del data[edge_type].edge_attr
    rare = data.edge_types[0]  # two edges: some part holds none of them
    data[rare].edge_index = data[rare].edge_index[:, :2]
    _hetero_outputs(data, tmp_path / "rare", num_parts, 0.3)


# --------------------------------------------------------------------------
# Failures: a clear error naming the rank, in bounded time, nothing left
# --------------------------------------------------------------------------


def _ranks_alive() -> list[int]:
    """Spawned processes (ranks, not multiprocessing's resource tracker) of this one."""
    mine, ranks_alive = os.getpid(), []
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            parent = int((proc / "stat").read_text().rsplit(")", 1)[1].split()[1])
            command = (proc / "cmdline").read_bytes()
        except (OSError, IndexError):
            continue  # gone meanwhile
        if parent == mine and b"spawn_main" in command:
            ranks_alive.append(int(proc.name))
    return ranks_alive


@pytest.mark.slow
def test_a_killed_rank_stops_the_job_with_its_name(graph, tmp_path):
    root = _partition(graph, tmp_path, 2, 0.0)
    start = time.monotonic()
    with pytest.raises(RuntimeError, match=r"rank 1 of 2 was killed by signal 9"):
        spawn_ranks(ranks.killed_after_one_batch, 2, (root,), timeout=45)
    assert time.monotonic() - start < 45
    assert _ranks_alive() == []


@pytest.mark.slow
def test_ranks_that_hang_are_stopped_with_their_stacks(capfd):
    start = time.monotonic()
    with pytest.raises(TimeoutError, match=r"ranks \[0, 1\] of 2 did not finish"):
        spawn_ranks(ranks.waits_for_a_peer, 2, timeout=15)
    assert time.monotonic() - start < 30
    assert _ranks_alive() == []
    if hasattr(signal, "SIGUSR1"):  # where they waited, printed by the ranks
        assert capfd.readouterr().err.count("in waits_for_a_peer") == 2


@pytest.fixture
def cpu_hog():
    """Two busy processes beside the test, as a loaded CI machine has."""
    hogs = [
        subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)
    ]
    yield
    for hog in hogs:
        hog.kill()
        hog.wait()


@pytest.mark.slow
def test_ddp_jobs_end_without_a_teardown_deadlock_under_load(cpu_hog):
    # 20 rounds of what a DDP rank ends with (all_gather_object, barrier, the
    # group destroyed) under a CPU hog. Destroying the group while the DDP
    # module still held it deadlocked in the first rounds (torch joined
    # gloo's workers holding the GIL one of them waited for): the hang of
    # examples/train_partitioned.py.
    results = spawn_ranks(ranks.ddp_rounds, 2, (20,), timeout=120)
    assert results == [20, 20]


@pytest.mark.slow
def test_a_wrong_world_size_is_refused_by_every_rank(graph, tmp_path):
    root = _partition(graph, tmp_path, 2, 0.0)
    message = r"has 2 parts, but the job has world_size=3.*partition the graph again"
    with pytest.raises(RuntimeError, match=r"rank \d of 3 failed") as error:
        spawn_ranks(ranks.load_only, 3, (root,), timeout=45)
    assert re.search(message, str(error.value), re.DOTALL)


@pytest.mark.slow
def test_a_partition_of_another_graph_is_refused(graph, tmp_path):
    other = graph.clone()
    other.edge_index = other.edge_index[:, : other.num_edges // 2]
    other.edge_attr = other.edge_attr[: other.num_edges]
    first, second = _partition(graph, tmp_path, 2, 0.0), tmp_path / "other"
    partition_graph(other, 2, second, balance=None)
    # Each machine has a folder of its own: one of them holds another graph's.
    with pytest.raises(RuntimeError, match=r"ranks \[\d\] loaded another partitioning"):
        spawn_ranks(ranks.load_in_group, 2, ([first, second],), timeout=45)
    # A part copied over from another partitioning.
    shutil.rmtree(first / "part_1")
    shutil.copytree(second / "part_1", first / "part_1")
    with pytest.raises(ValueError, match="part_1 comes from another partitioning"):
        load_partition(first, 1, 2)


def test_missing_files_and_foreign_hot_vertices_are_named(graph, tmp_path):
    root = _partition(graph, tmp_path, 2, 0.2)
    # Another partitioning of the same graph: the same node count.
    partition_graph(graph, 2, tmp_path / "other", balance=None, hot_ratio=0.2,
                    method="random")  # fmt: skip
    shutil.copy(tmp_path / "other" / "hot.pt", root / "hot.pt")
    with pytest.raises(ValueError, match="hot.pt comes from another partitioning"):
        load_partition(root, 0, 2)
    (root / "part_1" / "graph.pt").unlink()
    with pytest.raises(
        FileNotFoundError, match=r"rank 1: .*part_1/graph.pt is missing"
    ):
        load_partition(root, 1, 2)


def test_only_the_hot_kinds_written_are_served(graph, tmp_path):
    root = tmp_path / "mean_only"
    partition_graph(graph, 2, root, balance=None, hot_ratio=0.2, hot_kinds=("mean",))
    cache = load_partition(root, 0, 2)[0].hot_cache
    assert cache.values("mean").shape == (cache.num_hot, graph.num_features)
    with pytest.raises(ValueError, match=r"hot_kinds=\(\.\.\., 'sum'\)"):
        cache.values("sum")


def test_original_ids_are_refused_and_mapped(graph, tmp_path):
    # partition_graph numbers the nodes anew: the user's ids, a plain tensor,
    # would be read as other nodes; they are refused, naming the fix, and
    # partition_ids maps them.
    from torch_geometric.distributed import DistContext

    root = _partition(graph, tmp_path, 2, 0.0)
    stores = load_partition(root, 0, 2)
    context = DistContext(
        rank=0, global_rank=0, world_size=2, global_world_size=2, group_name="t"
    )
    train = graph.train_mask.nonzero().view(-1)
    for seeds in (train, ("paper", train)):
        with pytest.raises(ValueError, match="input_nodes must hold this partition's"):
            OrchDistNeighborLoader(stores, [2], input_nodes=seeds, current_ctx=context)
    mapped = partition_ids(root, train)
    assert isinstance(mapped, PartitionIds)
    assert torch.equal(original_ids(root)[mapped], train)
    splits = load_splits(root)
    assert isinstance(splits["train_mask"], PartitionIds)
    assert torch.equal(mapped.sort().values, splits["train_mask"])
    assert torch.equal(partition_ids(root, graph.train_mask), mapped)
    assert isinstance(stores[0].get_global_id(None), PartitionIds)


def test_pyg_partitioner_output_loads_with_its_own_maps_and_ids(graph, tmp_path):
    # PyG's Partitioner numbers nothing anew: its maps stay tensors, its ids
    # the user's, plain tensors. (Its METIS needs pyg-lib or torch-sparse;
    # it is given the part of every node here.)
    from torch_geometric.distributed import Partitioner
    from torch_geometric.loader import ClusterData

    parts = torch.arange(graph.num_nodes) % 2
    root = tmp_path / "pyg"
    with mock.patch.object(ClusterData, "_metis", lambda *args: parts):
        Partitioner(Data(x=graph.x, edge_index=graph.edge_index), 2,
                    str(root)).generate_partition()  # fmt: skip
    feature_store, graph_store = load_partition(root, 0, 2)
    assert feature_store.numbering is None
    assert torch.equal(graph_store.node_pb, parts)
    ids = feature_store.get_global_id(None)
    assert type(ids) is torch.Tensor
    assert torch.equal(ids.sort().values, torch.arange(0, graph.num_nodes, 2))
    x = feature_store.get_tensor_from_global_id(index=ids, group_name=None,
                                                attr_name="x")  # fmt: skip
    assert torch.equal(x, graph.x[ids])
