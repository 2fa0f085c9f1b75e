"""pyg_orch.distributed.engine and pyg_lib_ops: PyG's engine without pyg-lib.

The expected values of the deterministic cases are those of pyg-lib's C++
tests (test/csrc/sampler/test_dist_neighbor.cpp, test_dist_relabel.cpp,
test_dist_merge_outputs.cpp); the random cases are checked by invariants.
"""

import inspect
import subprocess
import sys
import textwrap

import pytest
import torch

import pyg_orch.distributed  # noqa: F401  (installs the engine)
from pyg_orch.distributed import engine, pyg_lib_ops
from pyg_orch.distributed.engine import fixes

pyg = torch.ops.pyg
REL = "paper__to__paper"


def cycle_graph(num_nodes: int = 6):
    # pyg-lib's test/csrc/graph.h: node i's neighbours are i - 1 and i + 1.
    rowptr = torch.arange(0, 2 * num_nodes + 1, 2)
    col1 = torch.arange(-1, num_nodes - 1) % num_nodes
    col2 = torch.arange(1, num_nodes + 1) % num_nodes
    return rowptr, torch.stack([col1, col2], dim=1).flatten()


def test_dist_neighbor_sample_all_neighbours():
    seed = torch.arange(2, 4)
    node, edge, cumsum = pyg.dist_neighbor_sample(*cycle_graph(), seed, -1)
    assert node.tolist() == [2, 3, 1, 3, 2, 4]
    assert edge.tolist() == [4, 5, 6, 7]
    assert cumsum == [2, 4, 6]


@pytest.mark.parametrize("replace", [False, True])
def test_dist_neighbor_sample_one_and_two(replace):
    # pyg-lib's expected picks come from its own generator: only their shape
    # is checked, and that every pick is one of the seed's CSC positions.
    rowptr, col = cycle_graph()
    fanout = 2 if replace else 1
    node, edge, cumsum = pyg.dist_neighbor_sample(
        rowptr, col, torch.arange(2, 4), fanout, replace=replace
    )
    assert cumsum == [2, 2 + fanout, 2 + 2 * fanout]
    assert node[:2].tolist() == [2, 3]
    for i, seed in enumerate([2, 3]):
        picks = edge[i * fanout : (i + 1) * fanout]
        assert all(2 * seed <= e < 2 * seed + 2 for e in picks.tolist())
    assert torch.equal(node[2:], col[edge])


def test_dist_neighbor_sample_disjoint():
    node, edge, cumsum = pyg.dist_neighbor_sample(
        *cycle_graph(), torch.arange(2, 4), 2, disjoint=True
    )
    expected = torch.tensor([0, 2, 1, 3, 0, 1, 0, 3, 1, 2, 1, 4]).view(-1, 2)
    assert torch.equal(node, expected)
    assert edge.tolist() == [4, 5, 6, 7]
    assert cumsum == [2, 4, 6]


def test_dist_neighbor_sample_temporal():
    rowptr, col = cycle_graph()
    col = col.view(-1, 2).sort(dim=1)[0].flatten()  # sorted by time = node id
    node, edge, cumsum = pyg.dist_neighbor_sample(
        rowptr, col, torch.arange(2, 4), 2, node_time=torch.arange(6),
        disjoint=True, temporal_strategy="uniform",
    )  # fmt: skip
    assert torch.equal(node, torch.tensor([0, 2, 1, 3, 0, 1, 1, 2]).view(-1, 2))
    assert edge.tolist() == [4, 6]
    assert cumsum == [2, 3, 4]


def test_dist_neighbor_sample_refuses_what_it_does_not_do():
    rowptr, col = cycle_graph()
    with pytest.raises(NotImplementedError, match="edge_weight"):
        pyg.dist_neighbor_sample(rowptr, col, torch.arange(2), 1, None, None, None,
                                 torch.ones(12))  # fmt: skip
    with pytest.raises(ValueError, match="disjoint"):
        pyg.dist_neighbor_sample(rowptr, col, torch.arange(2), 1,
                                 node_time=torch.arange(6))  # fmt: skip


@pytest.mark.parametrize("replace", [False, True])
@pytest.mark.parametrize("fanout", [-1, 0, 1, 3, 50])
def test_dist_neighbor_sample_invariants(replace, fanout):
    generator = torch.Generator().manual_seed(fanout + 7)
    num_nodes = 40
    dst = torch.randint(num_nodes, (300,), generator=generator).sort()[0]
    src = torch.randint(num_nodes, (300,), generator=generator)
    rowptr = torch.zeros(num_nodes + 1, dtype=torch.long)
    rowptr[1:] = torch.bincount(dst, minlength=num_nodes).cumsum(0)
    seed = torch.tensor([0, 5, 5, 17, 39])
    torch.manual_seed(0)
    node, edge, cumsum = pyg.dist_neighbor_sample(rowptr, src, seed, fanout,
                                                  replace=replace)  # fmt: skip
    assert torch.equal(node[: len(seed)], seed) and cumsum[0] == len(seed)
    assert torch.equal(node[len(seed) :], src[edge])  # every edge is real
    for i, s in enumerate(seed.tolist()):
        picks = edge[cumsum[i] - len(seed) : cumsum[i + 1] - len(seed)].tolist()
        degree = int(rowptr[s + 1] - rowptr[s])
        assert all(rowptr[s] <= e < rowptr[s + 1] for e in picks)
        if fanout < 0:
            assert picks == list(range(rowptr[s], rowptr[s + 1]))  # all
        elif replace:
            assert len(picks) == (fanout if degree else 0)
        else:
            assert len(picks) == min(fanout, degree)
            assert len(set(picks)) == len(picks)  # no duplicates


@pytest.mark.parametrize("disjoint", [False, True])
def test_relabel_neighborhood(disjoint):
    row, col = pyg.relabel_neighborhood(
        torch.arange(2, 4), torch.tensor([1, 3, 2, 4]), [2, 2], 6,
        torch.tensor([0, 0, 1, 1]) if disjoint else None, False, disjoint,
    )  # fmt: skip
    assert row.tolist() == [0, 0, 1, 1]
    assert col.tolist() == ([2, 3, 4, 5] if disjoint else [2, 1, 0, 3])


@pytest.mark.parametrize(("csc", "disjoint"), [(False, False), (True, False),
                                               (False, True)])  # fmt: skip
def test_hetero_relabel_neighborhood(csc, disjoint):
    row, col = pyg.hetero_relabel_neighborhood(
        ["paper"], [("paper", "to", "paper")], {"paper": torch.arange(2, 4)},
        {"paper": torch.tensor([1, 3, 2, 4])}, {REL: [[2], [2]]}, {"paper": 6},
        {"paper": torch.tensor([0, 0, 1, 1])} if disjoint else None, csc, disjoint,
    )  # fmt: skip
    sources, neighbours = [0, 0, 1, 1], [2, 3, 4, 5] if disjoint else [2, 1, 0, 3]
    if csc:
        sources, neighbours = neighbours, sources
    assert row[REL].tolist() == sources and col[REL].tolist() == neighbours


MERGE_NODES = [[2, 7, 8], [0, 1, 4, 5, 6], [3, 9, 10]]
MERGE_EDGES = [[17, 18], [14, 15, 16], [19, 20]]


@pytest.mark.parametrize("case", ["two", "all", "disjoint"])
def test_merge_sampler_outputs(case):
    nodes, edges = [list(n) for n in MERGE_NODES], [list(e) for e in MERGE_EDGES]
    cumsum = [[1, 3], [2, 4, 5], [1, 3]]
    if case == "all":
        nodes[2].append(11)
        edges[2].append(21)
        cumsum[2] = [1, 4]
    batch = torch.arange(4) if case == "disjoint" else None
    node, edge, out_batch, counts = pyg.merge_sampler_outputs(
        [torch.tensor(n) for n in nodes], [torch.tensor(e) for e in edges],
        cumsum, [1, 1, 0, 2], [0, 1, 0, 0], 3, -1 if case == "all" else 2,
        batch, case == "disjoint",
    )  # fmt: skip
    extra = [11] if case == "all" else []
    assert node.tolist() == [4, 5, 6, 7, 8, 9, 10] + extra
    assert edge.tolist() == [14, 15, 16, 17, 18, 19, 20] + [e + 10 for e in extra]
    assert counts == [2, 1, 2, 3 if case == "all" else 2]
    if case == "disjoint":
        assert out_batch.tolist() == [0, 0, 1, 2, 2, 3, 3]
    else:
        assert out_batch is None


def test_install_is_idempotent():
    engine.install()
    engine.install()
    assert pyg_lib_ops.register_ops() == []
    assert engine.fix_stack_level() == []
    assert engine.fix_partition_load() is False
    assert engine.fix_negative_sampling() is False
    assert engine.fix_hetero_columns() is False
    assert engine.fix_empty_types() is False
    assert all(pyg_lib_ops.op_defined(name) for name in pyg_lib_ops.SCHEMAS)


def test_install_keeps_an_op_already_defined():
    # Stands for pyg-lib (or anyone) having defined one op first.
    script = textwrap.dedent("""
        import torch
        lib = torch.library.Library("pyg", "FRAGMENT")
        lib.define("relabel_neighborhood(Tensor seed, Tensor x, int[] n, int m, "
                   "Tensor? batch=None, bool csc=False, bool disjoint=False) "
                   "-> (Tensor, Tensor)")
        lib.impl("relabel_neighborhood", lambda *a: (a[0], a[0]), "CPU")
        import pyg_orch.distributed
        from pyg_orch.distributed import pyg_lib_ops
        assert pyg_lib_ops.register_ops() == []
        out = torch.ops.pyg.relabel_neighborhood(torch.tensor([7]), torch.tensor([1]),
                                                 [1], 2)
        assert out[0].tolist() == [7], out
        assert pyg_lib_ops.op_defined("dist_neighbor_sample")
        print("kept")
    """)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True,
                            text=True, timeout=300)  # fmt: skip
    assert result.returncode == 0 and "kept" in result.stdout, result.stderr[-3000:]


def test_pyg_still_misspells_stack_level():
    # When this fails, PyG fixed `warn(..., stack_level=2)` in the modules of
    # engine.STACK_LEVEL_MODULES: delete engine.fix_stack_level and this test.
    for name in engine.STACK_LEVEL_MODULES:
        module = sys.modules[name]
        assert engine.stack_level_bug(module), f"PyG fixed stack_level in {name}"
        assert getattr(module.warn, "pyg_orch_fixed", False), name
        assert "stack_level=" in inspect.getsource(module), name


def test_pyg_version_is_tested():
    assert engine.check_pyg_version()


def test_dist_neighbor_sampler_one_partition_takes_whole_neighbourhoods():
    # DistNeighborSampler over one partition (world size 1, in this process)
    # at fan-out -1 samples every in-edge of the nodes of hops 0 and 1; the
    # reference is plain torch over edge_index.
    import socket

    from torch_geometric.distributed import (
        DistContext,
        DistNeighborSampler,
        LocalFeatureStore,
        LocalGraphStore,
    )  # fmt: skip
    from torch_geometric.distributed.event_loop import ConcurrentEventLoop
    from torch_geometric.distributed.rpc import init_rpc, shutdown_rpc
    from torch_geometric.sampler import NodeSamplerInput

    generator = torch.Generator().manual_seed(3)
    num_nodes = 30
    key = torch.randperm(num_nodes * num_nodes, generator=generator)[:90]
    edge_index = torch.stack([key // num_nodes, key % num_nodes])
    feature_store = LocalFeatureStore.from_data(torch.arange(num_nodes))
    graph_store = LocalGraphStore.from_data(
        edge_id=None, edge_index=edge_index, num_nodes=num_nodes
    )
    graph_store.node_pb = torch.zeros(num_nodes, dtype=torch.long)
    graph_store.meta.update({"num_parts": 1})
    graph_store.partition_idx, graph_store.num_partitions = 0, 1
    context = DistContext(rank=0, global_rank=0, world_size=1,
                          global_world_size=1, group_name="engine-test")  # fmt: skip
    sampler = DistNeighborSampler(  # raises TypeError without fix_stack_level
        data=(feature_store, graph_store), current_ctx=context,
        num_neighbors=[-1, -1],
    )  # fmt: skip
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    init_rpc(current_ctx=context, master_addr="127.0.0.1", master_port=port)
    try:
        sampler.init_sampler_instance()
        sampler.register_sampler_rpc()
        sampler.event_loop = ConcurrentEventLoop(1)
        sampler.event_loop.start_loop()
        seed = torch.tensor([0, 7, 12])
        out = sampler.event_loop.run_task(
            coro=sampler.node_sample(NodeSamplerInput(input_id=None, node=seed))
        )
    finally:
        shutdown_rpc(graceful=False)

    # Reference: hop 1 adds the in-neighbours of the seeds, hop 2 theirs.
    src, dst = edge_index.tolist()
    hop0 = set(seed.tolist())
    hop1 = {s for s, d in zip(src, dst, strict=True) if d in hop0} - hop0
    expanded = hop0 | hop1
    edges = {(s, d) for s, d in zip(src, dst, strict=True) if d in expanded}
    nodes = expanded | {s for s, _ in edges}
    assert out.node[:3].tolist() == seed.tolist()
    assert set(out.node.tolist()) == nodes and len(out.node) == len(nodes)
    sampled = list(zip(out.node[out.row].tolist(), out.node[out.col].tolist(),
                       strict=True))  # fmt: skip
    assert len(sampled) == len(edges) and set(sampled) == edges
    # PyG's e_id: positions in the partition's CSC (sorted by destination),
    # which here is edge_index sorted by destination.
    order = torch.sort(edge_index[1] * num_nodes + edge_index[0])[1]
    csc = edge_index[:, order]
    assert torch.equal(csc[:, out.edge], torch.stack([out.node[out.row],
                                                      out.node[out.col]]))  # fmt: skip


def test_pyg_still_has_the_bugs_the_engine_works_around():
    # When one of these fails, PyG fixed that bug: delete the engine's fix
    # (and this line) rather than keep patching fixed code.
    import torch_geometric.distributed.dist_neighbor_sampler as dist_sampler

    assert engine.negative_endpoint_bug(), (
        "PyG passes endpoint: drop fix_negative_sampling"
    )
    assert engine.defaultdict_load_bug(), (
        "torch loads defaultdicts: drop fix_partition_load"
    )
    assert "init_sampler_instance" in inspect.getsource(
        dist_sampler.DistNeighborSampler
    )
    # PyG's heterogeneous CSC "hotfix" in GraphStore._edge_to_layout:
    from torch_geometric.data import graph_store

    hotfix = "num_cols = int(col.max()) + 1"
    assert hotfix in inspect.getsource(graph_store), "drop fix_hetero_columns"
    from torch_geometric.distributed import LocalFeatureStore

    mapping = inspect.getsource(LocalFeatureStore._set_global_id_to_index.__wrapped__)
    assert "int(global_id.max()) + 1" in mapping, "drop fix_empty_types"
    assert engine.empty_relation_bug(), "drop fix_empty_relations"
    assert engine.empty_type_features_bug(), "drop fill_empty_features"


def test_a_relation_without_edges_in_a_part_is_laid_out_empty():
    # A rare relation, or one into a small type: a part can hold none of its
    # edges; its CSC then has no column (fix_hetero_columns adds them).
    part = fixes._hetero_part(torch.empty(2, 0, dtype=torch.long), (3, 4))
    row, colptr, perm = part.csc()
    relation = ("a", "to", "b")
    assert row[relation].numel() == 0 and colptr[relation].tolist() == [0]
    # A relation with edges is laid out by PyG as before.
    part = fixes._hetero_part(torch.tensor([[2, 0], [1, 1]]), (3, 4))
    row, colptr, _ = part.csc()
    assert colptr[relation].tolist() == [0, 0, 2]
    assert sorted(row[relation].tolist()) == [0, 2]


def test_a_node_type_without_nodes_in_a_partition_loads(tmp_path):
    # A partition can own no node of a small type: PyG's store then failed
    # on the empty ids' max().
    from torch_geometric.distributed import LocalFeatureStore

    store = LocalFeatureStore()
    store.put_global_id(torch.tensor([4, 2]), "paper")
    store.put_global_id(torch.empty(0, dtype=torch.long), "author")
    assert store.get_global_id("author").numel() == 0
    assert store._global_id_to_index["paper"].tolist() == [-1, -1, 1, -1, 0]
