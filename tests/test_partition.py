"""METIS with balance constraints and PyG's partition format (distributed wing)."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from torch_geometric.data import Data, HeteroData
from torch_geometric.distributed import LocalFeatureStore, LocalGraphStore
from torch_geometric.distributed.partition import load_partition_info
from torch_geometric.index import index2ptr
from torch_geometric.utils import scatter

from pyg_orch.datasets.synthetic import power_law_graph, power_law_hetero_graph
from pyg_orch.distributed import (
    metis,
    metis_binding,
    metis_parts,
    original_ids,
    partition_graph,
    split_seeds,
)
from pyg_orch.distributed.partition import HOT_KINDS
from pyg_orch.kernels import reorder

pytest.importorskip("pymetis")
if metis._cmeel_library() is None:
    pytest.skip("needs cmeel-metis", allow_module_level=True)


def _csr(edge_index: torch.Tensor, num_nodes: int) -> tuple[torch.Tensor, torch.Tensor]:
    order = torch.argsort(edge_index[0], stable=True)
    return index2ptr(edge_index[0, order], size=num_nodes), edge_index[1, order]


def _imbalance(parts: torch.Tensor, weight: torch.Tensor, num_parts: int) -> float:
    # max / mean of the weight per part.
    sums = torch.zeros(num_parts).index_add_(0, parts, weight.float())
    return float(sums.max() / sums.mean())


def _cut(parts: torch.Tensor, edge_index: torch.Tensor) -> float:
    return float((parts[edge_index[0]] != parts[edge_index[1]]).float().mean())


@pytest.fixture(scope="module")
def small() -> Data:
    data = power_law_graph(3000, avg_degree=8, num_features=4, seed=0)
    data.edge_attr = torch.randn(data.num_edges, 3)
    data.edge_weight = torch.rand(data.num_edges)
    return data


@pytest.fixture(scope="module")
def large() -> Data:
    # 200k nodes, 4M edges, a 10 % training mask.
    return power_law_graph(
        200_000, avg_degree=20, num_features=4, seed=0, split=(0.1, 0.1, 0.8)
    )


@pytest.fixture(scope="module")
def mag() -> HeteroData:
    # Each type and relation of its own width: PyG's to_homogeneous() pads
    # node features to the widest and cannot join edge features.
    data = power_law_hetero_graph(scale=0.01, num_features=4, seed=0)
    data["author"].x = torch.randn(data["author"].num_nodes, 7)
    for width, store in enumerate(data.edge_stores, start=1):
        store.edge_attr = torch.randn(store.num_edges, width)
        store.edge_weight = torch.rand(store.num_edges)
    return data


def test_homogeneous_parts_read_back(small, tmp_path):
    info = partition_graph(small, 3, tmp_path, hot_ratio=0.0)
    # The parts are range-numbered: new id -> the user's.
    nodes, edges = original_ids(tmp_path), original_ids(tmp_path, kind="edge")
    node_ids, edge_ids = [], []
    for pid in range(3):
        graph = LocalGraphStore.from_partition(str(tmp_path), pid)
        feats = LocalFeatureStore.from_partition(str(tmp_path), pid)
        meta, num_parts, _, node_map, edge_map = load_partition_info(str(tmp_path), pid)
        assert num_parts == 3 and meta["is_hetero"] is False
        assert torch.equal(node_map, graph.node_pb) and node_map.dtype == torch.int64
        ids = feats.get_global_id(None)
        assert bool((node_map[ids] == pid).all())
        # The part holds one range of ids, its own, not a view of more.
        start = sum(info.num_nodes[:pid])
        assert torch.equal(ids, torch.arange(start, start + info.num_nodes[pid]))
        assert ids.untyped_storage().nbytes() == ids.numel() * ids.element_size()
        assert torch.equal(original_ids(tmp_path, pid), nodes[ids])
        assert torch.equal(
            feats.get_tensor(group_name=None, attr_name="x"), small.x[nodes[ids]]
        )
        edge_index = graph.get_edge_index(edge_type=None, layout="coo")
        edge_id = graph.get_edge_id(edge_type=None, layout="coo")
        start = sum(info.num_edges[:pid])
        assert torch.equal(edge_id, torch.arange(start, start + info.num_edges[pid]))
        assert torch.equal(small.edge_index[:, edges[edge_id]], nodes[edge_index])
        # An edge lives in its destination's part, as PyG assigns it.
        assert bool((node_map[edge_index[1]] == pid).all())
        assert bool((edge_map[edge_id] == pid).all())
        for name in ("edge_attr", "edge_weight"):
            value = feats.get_tensor(group_name=(None, None), attr_name=name)
            assert torch.equal(value, small[name][edges[edge_id]])
        node_ids.append(ids)
        edge_ids.append(edge_id)
    assert torch.equal(torch.cat(node_ids).sort().values, torch.arange(small.num_nodes))
    assert torch.equal(torch.cat(edge_ids).sort().values, torch.arange(small.num_edges))
    assert [ids.numel() for ids in node_ids] == list(info.num_nodes)
    assert [ids.numel() for ids in edge_ids] == list(info.num_edges)
    assert torch.equal(nodes.sort().values, torch.arange(small.num_nodes))
    assert torch.equal(edges.sort().values, torch.arange(small.num_edges))
    assert not (tmp_path / "hot.pt").exists()


def test_hetero_parts_read_back(mag, tmp_path):
    info = partition_graph(mag, 2, tmp_path, balance={"paper": mag["paper"].train_mask})
    offsets, start = {}, 0
    for node_type in mag.node_types:
        offsets[node_type] = start
        start += mag[node_type].num_nodes
    seen = {t: [] for t in mag.node_types}
    edges = {e: [] for e in mag.edge_types}
    nodes = original_ids(tmp_path)
    originals = original_ids(tmp_path, kind="edge")
    for pid in range(2):
        graph = LocalGraphStore.from_partition(str(tmp_path), pid)
        feats = LocalFeatureStore.from_partition(str(tmp_path), pid)
        meta, _, _, node_map, edge_map = load_partition_info(str(tmp_path), pid)
        assert meta["is_hetero"] is True and meta["node_types"] == mag.node_types
        for node_type in mag.node_types:
            # PyG's feature store keeps the homogeneous ids of to_homogeneous().
            ids = feats.get_global_id(node_type) - offsets[node_type]
            assert bool((node_map[node_type][ids] == pid).all())
            x = feats.get_tensor(group_name=node_type, attr_name="x")
            assert torch.equal(x, mag[node_type].x[nodes[node_type][ids]])
            seen[node_type].append(ids)
        for edge_type in mag.edge_types:
            edge_index = graph.get_edge_index(edge_type=edge_type, layout="coo")
            local = feats.get_global_id(edge_type)
            original = originals[edge_type][local]
            src, _, dst = edge_type
            mapped = torch.stack([nodes[src][edge_index[0]], nodes[dst][edge_index[1]]])
            assert torch.equal(mag[edge_type].edge_index[:, original], mapped)
            assert bool((node_map[edge_type[2]][edge_index[1]] == pid).all())
            assert bool((edge_map[edge_type][local] == pid).all())
            for name in ("edge_attr", "edge_weight"):
                value = feats.get_tensor(group_name=edge_type, attr_name=name)
                assert torch.equal(value, mag[edge_type][name][original])
            edges[edge_type].append(local)
    for node_type, ids in seen.items():
        count = mag[node_type].num_nodes
        assert torch.equal(torch.cat(ids).sort().values, torch.arange(count))
    for edge_type, ids in edges.items():
        count = mag[edge_type].num_edges
        assert torch.equal(torch.cat(ids).sort().values, torch.arange(count))
    assert sum(info.num_train) == int(mag["paper"].train_mask.sum())


@pytest.mark.parametrize("num_parts", [4, 2])
@pytest.mark.slow  # builds and partitions a 200k-node graph (~25 s)
def test_balance_and_cut_on_200k_nodes(large, tmp_path, num_parts):
    start = time.perf_counter()
    info = partition_graph(large, num_parts, tmp_path)
    seconds = time.perf_counter() - start
    parts = torch.load(tmp_path / "node_map.pt")
    mean = large.num_edges / num_parts
    train = max(info.num_train) / (sum(info.num_train) / num_parts)
    edges = max(info.num_edges) / mean
    cut = info.edge_cut / large.num_edges
    nodes = max(info.num_nodes) * num_parts / large.num_nodes
    random_parts = torch.randint(
        num_parts, (large.num_nodes,), generator=torch.Generator().manual_seed(0)
    )
    random_cut = _cut(random_parts, large.edge_index)
    print(
        f"\n200k nodes, {large.num_edges} edges, {num_parts} parts ({info.binding}, "
        f"{seconds:.1f} s): train max/mean {train:.3f}, in-edges max/mean "
        f"{edges:.3f}, nodes max/mean {nodes:.3f}, "
        f"cut {cut:.3f} (random {random_cut:.3f})"
    )
    assert train <= 1.05 and edges <= 1.05
    assert cut <= 0.5 * random_cut
    train_mask = large.train_mask[original_ids(tmp_path)]
    assert _imbalance(parts, train_mask, num_parts) == pytest.approx(train)


def test_mag_balance_per_node_type(mag, tmp_path):
    info = partition_graph(mag, 2, tmp_path)
    figures = {}
    for node_type in mag.node_types:
        parts = torch.load(tmp_path / "node_map" / f"{node_type}.pt")
        figures[node_type] = _imbalance(parts, torch.ones(parts.numel()), 2)
    train = max(info.num_train) / (sum(info.num_train) / 2)
    print(f"\nmag scale 0.01, 2 parts: node max/mean {figures}, train {train:.3f}")
    assert max(figures.values()) <= 1.05 and train <= 1.05


def test_metis_parts_symmetrizes_directed_graph():
    # A one-way cycle with self loops: two halves joined by two edges.
    num_nodes = 8
    src = torch.arange(num_nodes)
    edge_index = torch.cat(
        [torch.stack([src, (src + 1) % num_nodes]), torch.stack([src, src])], 1
    )
    parts = metis_parts(*_csr(edge_index, num_nodes), 2)
    assert parts.dtype == torch.int64 and parts.shape == (num_nodes,)
    assert int((parts[edge_index[0]] != parts[edge_index[1]]).sum()) == 2
    assert metis_parts(*_csr(edge_index, num_nodes), 1).tolist() == [0] * num_nodes


def test_metis_seed_reproducible(small):
    rowptr, col = _csr(small.edge_index, small.num_nodes)
    first = metis_parts(rowptr, col, 3, seed=5)
    assert torch.equal(first, metis_parts(rowptr, col, 3, seed=5))


def test_pymetis_refuses_several_constraints(monkeypatch, small):
    monkeypatch.setattr(metis, "_available", lambda: ("pymetis",))
    rowptr, col = _csr(small.edge_index, small.num_nodes)
    assert metis_binding() == "pymetis"
    parts = metis_parts(rowptr, col, 2, node_weights=torch.ones(small.num_nodes))
    assert set(parts.tolist()) == {0, 1}
    weights = torch.ones(small.num_nodes, 2, dtype=torch.long)
    with pytest.raises(ValueError, match="balance.*pip install cmeel-metis"):
        metis_parts(rowptr, col, 2, node_weights=weights)
    with pytest.raises(ValueError, match="pip install cmeel-metis"):
        partition_graph(small, 2, "unused")


def test_no_binding(monkeypatch, small):
    monkeypatch.setattr(metis, "_available", lambda: ())
    rowptr, col = _csr(small.edge_index, small.num_nodes)
    with pytest.raises(ImportError, match="cmeel-metis.*pymetis"):
        metis_parts(rowptr, col, 2)


@pytest.mark.slow
def test_binding_figures(large, monkeypatch):
    # The figures in pyg_orch/distributed/metis.py's docstring:
    # pytest -m slow -s tests/test_partition.py -k binding_figures
    rowptr, col = _csr(large.edge_index, large.num_nodes)
    degree = torch.bincount(large.edge_index[1], minlength=large.num_nodes)
    columns = (
        torch.ones(large.num_nodes, dtype=torch.long),
        large.train_mask.long(),
        degree,
    )
    runs = [
        ("cmeel-metis", None),
        ("pymetis", None),
        ("cmeel-metis", torch.stack(columns, 1)),
    ]
    for name, weights in runs:
        monkeypatch.setattr(metis, "_available", lambda name=name: (name,))
        start = time.perf_counter()
        parts = metis_parts(rowptr, col, 4, node_weights=weights)
        seconds = time.perf_counter() - start
        balance = [f"{_imbalance(parts, column, 4):.3f}" for column in columns]
        print(
            f"\n{name}, {1 if weights is None else 3} constraints, 4 parts: cut "
            f"{_cut(parts, large.edge_index):.3f}, nodes/train/in-edges max/mean "
            f"{'/'.join(balance)}, {seconds:.1f} s"
        )


def test_split_seeds_even_disjoint_local_first():
    generator = torch.Generator().manual_seed(0)
    node_partition = torch.randint(3, (1000,), generator=generator)
    node_partition[:300] = 0  # part 0 owns too many training seeds
    seeds = torch.randperm(1000, generator=generator)[:503]
    shares = [split_seeds(seeds, node_partition, rank, 3) for rank in range(3)]
    assert [share.numel() for share in shares] == [167] * 3
    union = torch.cat(shares)
    assert union.unique().numel() == 501 and bool(torch.isin(union, seeds).all())
    for rank, share in enumerate(shares):
        own = int((node_partition[seeds] == rank).sum())
        local = min(own, 167)
        assert bool((node_partition[share[:local]] == rank).all())
        assert bool((node_partition[share[local:]] != rank).all())
        assert torch.equal(share, split_seeds(seeds, node_partition, rank, 3))
    shuffled = [split_seeds(seeds, node_partition, r, 3, seed=1) for r in range(3)]
    assert torch.equal(shuffled[0], split_seeds(seeds, node_partition, 0, 3, seed=1))
    assert torch.cat(shuffled).unique().numel() == 501
    # More parts than ranks: rank r owns the parts p with p % world_size == r.
    four = split_seeds(torch.arange(8), torch.arange(8) % 4, 0, 2)
    assert four.tolist() == [0, 2, 4, 6]


def test_hot_file_homogeneous(small, tmp_path):
    info = partition_graph(small, 2, tmp_path, hot_ratio=0.05, hot_kinds=HOT_KINDS)
    hot = torch.load(tmp_path / "hot.pt")
    assert set(hot) == {
        "version",
        "partition_id",
        "hot_ratio",
        "method",
        "num_nodes",
        "node",
        "x",
        "values",
    }
    assert (hot["version"], hot["hot_ratio"], hot["method"]) == (2, 0.05, "degree")
    assert hot["partition_id"] in (tmp_path / "orch.json").read_text()
    assert hot["num_nodes"] == small.num_nodes
    ids = hot["node"][None]
    assert ids.dtype == torch.int64 and torch.equal(ids, ids.sort().values)
    assert ids.numel() == info.num_hot == round(0.05 * small.num_nodes)
    ids = original_ids(tmp_path)[ids]  # the user's ids of the hot nodes
    degree = torch.bincount(small.edge_index[1], minlength=small.num_nodes)
    assert int(degree[ids].min()) >= int(
        degree[~torch.isin(torch.arange(small.num_nodes), ids)].max()
    )
    assert torch.equal(hot["x"][None], small.x[ids])
    values = hot["values"][None]
    assert set(values) == {"mean", "sum", "max", "gcn", "weighted_mean",
                           "weighted_sum", "weighted_max"}  # fmt: skip
    src, dst = small.edge_index
    weighted = small.x[src] * small.edge_weight.view(-1, 1)
    for kind in ("mean", "sum", "max"):
        for name, message in (("", small.x[src]), ("weighted_", weighted)):
            expected = scatter(
                message, dst, dim=0, dim_size=small.num_nodes, reduce=kind
            )
            torch.testing.assert_close(values[name + kind], expected[ids])
    partition_graph(small, 2, tmp_path / "two", hot_ratio=0.05,
                    hot_kinds=("mean", "weighted_sum"))  # fmt: skip
    two = torch.load(tmp_path / "two" / "hot.pt")["values"][None]
    assert set(two) == {"mean", "weighted_sum"}
    # By default only what GraphSAGE's bottom layer needs.
    partition_graph(small, 2, tmp_path / "default", hot_ratio=0.05)
    default = torch.load(tmp_path / "default" / "hot.pt")["values"][None]
    assert set(default) == {"mean"}
    unweighted = small.clone()
    del unweighted.edge_weight
    partition_graph(unweighted, 2, tmp_path / "plain", hot_ratio=0.05,
                    hot_kinds=("mean", "sum", "max", "gcn"))  # fmt: skip
    plain = torch.load(tmp_path / "plain" / "hot.pt")["values"][None]
    assert set(plain) == {"mean", "sum", "max", "gcn"}
    with pytest.raises(ValueError, match="weighted kinds, but the graph has no"):
        partition_graph(unweighted, 2, tmp_path / "refused", hot_ratio=0.05,
                        hot_kinds=("weighted_sum",))  # fmt: skip


def test_hot_file_hetero(mag, tmp_path):
    partition_graph(mag, 2, tmp_path, hot_ratio={"paper": 0.1, "author": 0.05},
                    hot_kinds=HOT_KINDS)  # fmt: skip
    hot = torch.load(tmp_path / "hot.pt")
    nodes = original_ids(tmp_path)
    assert hot["num_nodes"] == {t: mag[t].num_nodes for t in mag.node_types}
    assert hot["node"]["paper"].numel() == round(0.1 * mag["paper"].num_nodes)
    assert hot["node"]["institution"].numel() == 0
    for edge_type, values in hot["values"].items():
        src_type, _, dst_type = edge_type
        kinds = {"mean", "sum", "max", "weighted_mean", "weighted_sum", "weighted_max"}
        kinds |= {"gcn"} if src_type == dst_type else set()
        assert set(values) == kinds
        ids = nodes[dst_type][hot["node"][dst_type]]
        src, dst = mag[edge_type].edge_index
        x = mag[src_type].x
        expected = scatter(
            x[src], dst, dim=0, dim_size=mag[dst_type].num_nodes, reduce="mean"
        )
        torch.testing.assert_close(values["mean"], expected[ids])
    papers = nodes["paper"][hot["node"]["paper"]]
    assert torch.equal(hot["x"]["paper"], mag["paper"].x[papers])


def test_bad_inputs(small, mag, tmp_path):
    with pytest.raises(ValueError, match="num_parts"):
        partition_graph(small, 0, tmp_path)
    with pytest.raises(ValueError, match="balance='nope'.*balance=None"):
        partition_graph(small, 2, tmp_path, balance="nope")
    with pytest.raises(ValueError, match="balance has 3 entries"):
        partition_graph(small, 2, tmp_path, balance=torch.ones(3, dtype=torch.bool))
    with pytest.raises(ValueError, match="bool"):
        partition_graph(small, 2, tmp_path, balance=torch.ones(small.num_nodes))
    with pytest.raises(ValueError, match="node type 'papers'"):
        partition_graph(mag, 2, tmp_path, balance={"papers": mag["paper"].train_mask})
    with pytest.raises(ValueError, match="hot_ratio"):
        partition_graph(small, 2, tmp_path, hot_ratio=1.5)
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(ValueError, match="not empty.*META.json"):
        partition_graph(small, 2, tmp_path)
    with pytest.raises(ValueError, match="num_parts"):
        metis_parts(torch.tensor([0, 0]), torch.tensor([], dtype=torch.long), 0)
    with pytest.raises(ValueError, match="non-negative"):
        metis_parts(
            torch.tensor([0, 1, 2]),
            torch.tensor([1, 0]),
            2,
            node_weights=torch.tensor([1, -1]),
        )
    with pytest.raises(ValueError, match="rank"):
        split_seeds(torch.arange(4), torch.zeros(4, dtype=torch.long), 2, 2)
    with pytest.raises(ValueError, match="mask"):
        split_seeds(
            torch.ones(4, dtype=torch.bool), torch.zeros(4, dtype=torch.long), 0, 2
        )


def test_time_attributes_as_pyg_writes_them(tmp_path):
    edge_index = torch.tensor([[0, 1, 2, 3, 1], [1, 0, 3, 2, 2]])
    data = Data(edge_index=edge_index, x=torch.randn(4, 2), time=torch.arange(4))
    partition_graph(data, 2, tmp_path / "node", balance=None)
    feats = LocalFeatureStore.from_partition(str(tmp_path / "node"), 0)
    time = feats.get_tensor(group_name=None, attr_name="time")
    assert torch.equal(time, data.time[original_ids(tmp_path / "node")])
    data = Data(edge_index=edge_index, num_nodes=4, edge_time=torch.arange(5))
    partition_graph(data, 2, tmp_path / "edge", balance=None)
    for pid in range(2):
        feats = LocalFeatureStore.from_partition(str(tmp_path / "edge"), pid)
        graph = LocalGraphStore.from_partition(str(tmp_path / "edge"), pid)
        edge_id = graph.get_edge_id(edge_type=None, layout="coo")
        time = feats.get_tensor(group_name=(None, None), attr_name="edge_time")
        original = original_ids(tmp_path / "edge", kind="edge")[edge_id]
        assert torch.equal(time, data.edge_time[original])


def test_repartition_replaces_previous(small, tmp_path):
    partition_graph(small, 3, tmp_path, hot_ratio=0.01)
    (tmp_path / "notes.txt").write_text("kept")
    partition_graph(small, 2, tmp_path)
    assert sorted(p.name for p in tmp_path.glob("part_*")) == ["part_0", "part_1"]
    assert not (tmp_path / "hot.pt").exists() and (tmp_path / "notes.txt").exists()


def test_the_kernels_order_and_symmetrize_as_torch_does():
    # Against torch's own stable sort and unique, on edges with repeats and
    # self loops.
    generator = torch.Generator().manual_seed(0)
    src = torch.randint(50, (2000,), generator=generator)
    dst = torch.randint(50, (2000,), generator=generator)
    dst[:100] = src[:100]  # self loops
    order = reorder.counting_order(dst.numpy(), 50)
    assert torch.equal(torch.from_numpy(order), torch.argsort(dst, stable=True))
    xadj, adjacency = metis._symmetric(src, dst, 50)
    keep = src != dst
    pairs = torch.cat([
        torch.stack([src[keep], dst[keep]], 1), torch.stack([dst[keep], src[keep]], 1)
    ]).unique(dim=0)  # fmt: skip
    assert torch.equal(adjacency.long(), pairs[:, 1])
    assert torch.equal(xadj[1:].diff(prepend=xadj[:1]), torch.bincount(pairs[:, 0]))


_PEAK_SCRIPT = """
import sys, numpy as np, torch
from torch_geometric.data import Data
import pyg_orch.distributed
from pyg_orch.distributed import partition_graph
x = np.load(sys.argv[1], mmap_mode="r")
edge_index = torch.load(sys.argv[2])
data = Data(x=x, edge_index=edge_index, num_nodes=x.shape[0])
def status(key):
    for line in open("/proc/self/status"):
        if line.startswith(key):
            return int(line.split()[1]) * 1024
base = status("VmRSS")
open("/proc/self/clear_refs", "w").write("5")  # the peak starts from here
partition_graph(data, 2, sys.argv[3], balance=None)
print(status("VmHWM") - base)
"""


@pytest.mark.skipif(
    not Path("/proc/self/clear_refs").exists(), reason="needs Linux's clear_refs"
)
def test_memory_mapped_features_are_partitioned_without_being_read_whole(tmp_path):
    # 160 MB of features on disk, a graph of few edges: reading the features
    # whole would take more than their size; the parts are read by rows.
    num_nodes, width = 80_000, 512
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(num_nodes, width, generator=generator).numpy()
    np.save(tmp_path / "x.npy", x)
    edge_index = torch.randint(num_nodes, (2, 4 * num_nodes), generator=generator)
    torch.save(edge_index, tmp_path / "edges.pt")
    script = tmp_path / "peak.py"
    script.write_text(_PEAK_SCRIPT)
    root = tmp_path / "parts"
    result = subprocess.run(
        [sys.executable, str(script), str(tmp_path / "x.npy"),
         str(tmp_path / "edges.pt"), str(root)],
        capture_output=True, text=True, timeout=300, check=True,
    )  # fmt: skip
    peak = int(result.stdout.split()[-1])
    assert peak < x.nbytes, (peak, x.nbytes)
    nodes = original_ids(root)
    rows = [
        LocalFeatureStore.from_partition(str(root), pid).get_tensor(
            group_name=None, attr_name="x"
        )
        for pid in range(2)
    ]
    assert torch.equal(torch.cat(rows), torch.from_numpy(x)[nodes])
