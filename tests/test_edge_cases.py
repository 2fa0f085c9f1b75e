"""Awkward graphs, each checked against a plain reference.

The graphs: isolated nodes, self loops, duplicate edges, a directed graph
(edges one way only), no edges at all, a single node (with and without self
loops), an int32 ``edge_index``, and a star whose hub has an in-degree of one
million. For each, the references are:

- sampling: every sampled edge exists, ``e_id`` names it, each destination gets
  ``min(fanout, degree)`` picks (``check_batch`` of ``test_sampling``), and
  fan-out ``-1`` reaches exactly the nodes and edges of a plain breadth-first
  search;
- the loader: the batches of PyG's own ``NeighborLoader`` handed the same
  sampler;
- the model: the plain model on the batch (no hot vertices), or a plain-torch
  scatter reference in which hot rows aggregate over the whole graph;
- the kernels: ``torch_geometric.utils.scatter`` and ``gcn_norm`` on the whole
  graph, in float64.
"""

import numpy as np
import pytest
import torch
from references import (
    assert_aggregation_matches,
    assert_matches_reference,
    plain_aggregate,
)
from test_sampling import check_batch
from torch_geometric.data import Data
from torch_geometric.loader import NeighborLoader
from torch_geometric.nn import GCN, GIN, GraphSAGE
from torch_geometric.nn.conv.gcn_conv import gcn_norm
from torch_geometric.sampler import NodeSamplerInput
from torch_geometric.sampler.utils import to_csc
from torch_geometric.utils import scatter

from pyg_orch import HotCache, OrchModel, OrchNeighborLoader, OrchNeighborSampler
from pyg_orch.hot.choice import frontier_size
from pyg_orch.kernels.aggregate import aggregate, gcn_inverse_sqrt_degree

WIDTH = 4
MODELS = {"sage": GraphSAGE, "gcn": GCN, "gin": GIN}
# OrchModel refuses GCN with hot vertices (tests/test_hot_serving.py).
HOT_MODELS = ["sage", "gin"]
# The bottom-layer aggregation of each model, as the hot cache computes it.
KINDS = ["sum", "mean", "max", "gcn"]


def with_features(edge_index: torch.Tensor, num_nodes: int, seed: int = 0) -> Data:
    generator = torch.Generator().manual_seed(seed)
    return Data(
        x=torch.randn(num_nodes, WIDTH, generator=generator),
        edge_index=edge_index,
        edge_attr=torch.arange(edge_index.size(1), dtype=torch.float),
        num_nodes=num_nodes,
    )


def random_edges(num_nodes: int, num_edges: int, seed: int) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return torch.randint(num_nodes, (2, num_edges), generator=generator)


def isolated_nodes() -> Data:
    # Nodes 25..39 neither send nor receive an edge; no self loops.
    edge_index = random_edges(25, 120, seed=1)
    edge_index = edge_index[:, edge_index[0] != edge_index[1]]
    return with_features(edge_index, 40)


def self_loops() -> Data:
    loops = torch.arange(0, 30, 3)
    loops = torch.cat([loops, loops[:4]])  # some nodes loop twice
    edge_index = torch.cat([random_edges(30, 100, seed=2), loops.repeat(2, 1)], 1)
    return with_features(edge_index[:, torch.randperm(edge_index.size(1))], 30)


def duplicate_edges() -> Data:
    edge_index = random_edges(30, 80, seed=3)
    # The first 30 edges twice more, the next 20 once more.
    edge_index = torch.cat([edge_index, edge_index[:, :30], edge_index[:, :50]], 1)
    return with_features(edge_index[:, torch.randperm(edge_index.size(1))], 30)


def directed() -> Data:
    # Only low -> high ids: no edge has its reverse, node 0 has no in-edges.
    edge_index = random_edges(40, 200, seed=4)
    low, high = edge_index.min(0).values, edge_index.max(0).values
    edge_index = torch.stack([low, high])[:, low != high].unique(dim=1)
    return with_features(edge_index, 40)


def no_edges() -> Data:
    return with_features(torch.zeros(2, 0, dtype=torch.long), 12)


def single_node() -> Data:
    return with_features(torch.zeros(2, 0, dtype=torch.long), 1)


def single_node_with_loops() -> Data:
    return with_features(torch.zeros(2, 3, dtype=torch.long), 1)


def int32_edges() -> Data:
    data = self_loops()
    data.edge_index = torch.cat([data.edge_index, data.edge_index[:, :10]], 1).int()
    data.edge_attr = torch.arange(data.edge_index.size(1), dtype=torch.float)
    return data


GRAPHS = {
    "isolated": isolated_nodes,
    "self_loops": self_loops,
    "duplicates": duplicate_edges,
    "directed": directed,
    "no_edges": no_edges,
    "single_node": single_node,
    "single_node_loops": single_node_with_loops,
    "int32": int32_edges,
}


def test_the_graphs_have_what_their_names_say():
    def loops(data):
        return int((data.edge_index[0] == data.edge_index[1]).sum())

    def degree(data):
        return torch.bincount(data.edge_index[1].long(), minlength=data.num_nodes)

    data = isolated_nodes()
    touched = torch.zeros(data.num_nodes, dtype=torch.bool)
    touched[data.edge_index.view(-1)] = True
    assert (~touched).sum() >= 15
    assert loops(self_loops()) >= 14
    data = duplicate_edges()
    assert data.edge_index.unique(dim=1).size(1) < data.edge_index.size(1)
    data = directed()
    keys = set(map(tuple, data.edge_index.t().tolist()))
    assert keys and not any((v, u) in keys for u, v in keys)
    assert degree(directed())[0] == 0
    assert no_edges().num_edges == 0 and single_node().num_nodes == 1
    assert loops(single_node_with_loops()) == 3
    assert int32_edges().edge_index.dtype == torch.int32


def in_edges(data: Data) -> dict[int, list[int]]:
    """Edge ids into each node, in edge order."""
    ids: dict[int, list[int]] = {v: [] for v in range(data.num_nodes)}
    for e, v in enumerate(data.edge_index[1].tolist()):
        ids[v].append(e)
    return ids


def reference_all_neighbours(data: Data, seeds: list[int], hops: int):
    """Plain breadth-first search with fan-out -1: per hop, the nodes first
    reached there (as a set) and the multiset of edge ids sampled."""
    into, src = in_edges(data), data.edge_index[0].tolist()
    seen, frontier = set(seeds), list(seeds)
    hop_nodes, hop_edges = [], []
    for _ in range(hops):
        new, edges = [], []
        for v in frontier:
            for e in into[v]:
                edges.append(e)
                if src[e] not in seen:
                    seen.add(src[e])
                    new.append(src[e])
        hop_nodes.append(set(new))
        hop_edges.append(sorted(edges))
        frontier = new
    return hop_nodes, hop_edges


FANOUTS = [[3, 2], [-1, -1], [-1, 0], [0, -1], [0, 0], [1]]


@pytest.mark.parametrize("replace", [False, True])
@pytest.mark.parametrize("fanouts", FANOUTS, ids=str)
@pytest.mark.parametrize("graph", list(GRAPHS))
def test_sampled_batches_are_valid(graph, fanouts, replace):
    data = GRAPHS[graph]()
    torch.manual_seed(0)
    loader = OrchNeighborLoader(
        data, num_neighbors=fanouts, batch_size=7, shuffle=True, replace=replace
    )
    seeds = []
    for batch in loader:
        check_batch(batch, data, fanouts, replace)
        assert torch.equal(batch.x, data.x[batch.n_id])
        seeds.append(batch.n_id[: batch.batch_size])
    assert torch.equal(torch.cat(seeds).sort().values, torch.arange(data.num_nodes))


@pytest.mark.parametrize("graph", list(GRAPHS))
def test_all_neighbours_equal_a_breadth_first_search(graph):
    data = GRAPHS[graph]()
    seeds = torch.tensor(sorted({0, data.num_nodes // 2, data.num_nodes - 1}))
    sampler = OrchNeighborSampler(data, num_neighbors=[-1, -1, -1])
    out = sampler.sample_from_nodes(NodeSamplerInput(input_id=None, node=seeds))
    hop_nodes, hop_edges = reference_all_neighbours(data, seeds.tolist(), hops=3)
    e_id = out.edge if sampler.perm is None else sampler.perm[out.edge]
    node_bounds = np.cumsum([0, *out.num_sampled_nodes])
    edge_bounds = np.cumsum([0, *out.num_sampled_edges])
    assert out.node[: seeds.numel()].tolist() == seeds.tolist()
    for hop in range(3):
        nodes = out.node[node_bounds[hop + 1] : node_bounds[hop + 2]]
        assert nodes.unique().numel() == nodes.numel()
        assert set(nodes.tolist()) == hop_nodes[hop]
        edges = e_id[edge_bounds[hop] : edge_bounds[hop + 1]]
        assert sorted(edges.tolist()) == hop_edges[hop]


def pyg_loader(data: Data, fanouts: list[int], **kwargs) -> NeighborLoader:
    sampler = OrchNeighborSampler(
        data, num_neighbors=fanouts, replace=kwargs.get("replace", False)
    )
    return NeighborLoader(data, fanouts, neighbor_sampler=sampler, **kwargs)


def assert_same_batches(ours, theirs) -> None:
    assert len(ours) == len(theirs)
    for a, b in zip(ours, theirs, strict=True):
        assert set(a.keys()) == set(b.keys())
        for key in b.keys():
            assert torch.equal(torch.as_tensor(a[key]), torch.as_tensor(b[key])), key


@pytest.mark.parametrize("replace", [False, True])
@pytest.mark.parametrize("graph", list(GRAPHS))
def test_loader_equals_pyg_neighbor_loader(graph, replace):
    data = GRAPHS[graph]()
    for fanouts in ([3, 2], [-1, 0]):
        kwargs = {"batch_size": 6, "shuffle": True, "replace": replace}
        torch.manual_seed(5)
        ours = list(OrchNeighborLoader(data, fanouts, **kwargs))
        torch.manual_seed(5)
        theirs = list(pyg_loader(data, fanouts, **kwargs))
        assert_same_batches(ours, theirs)


@pytest.mark.parametrize("graph", ["isolated", "single_node", "int32"])
def test_a_batch_larger_than_the_input_set(graph):
    data = GRAPHS[graph]()
    input_nodes = torch.tensor([0, data.num_nodes - 1, 0])[: data.num_nodes + 1]
    kwargs = {"input_nodes": input_nodes, "batch_size": 100, "shuffle": True}
    torch.manual_seed(1)
    ours = list(OrchNeighborLoader(data, [4, -1], **kwargs))
    torch.manual_seed(1)
    theirs = list(pyg_loader(data, [4, -1], **kwargs))
    assert len(ours) == 1 and ours[0].batch_size == input_nodes.numel()
    assert sorted(ours[0].input_id.tolist()) == list(range(input_nodes.numel()))
    assert_same_batches(ours, theirs)
    check_batch(ours[0], data, [4, -1])
    model = build("sage", num_layers=2)
    expected = model(ours[0].x, ours[0].edge_index)[: ours[0].batch_size]
    loader = OrchNeighborLoader(data, [4, -1], **kwargs)
    assert torch.allclose(OrchModel(model, loader)(ours[0]), expected, atol=1e-5)


def build(name: str, num_layers: int, seed: int = 0):
    torch.manual_seed(seed)
    return MODELS[name](WIDTH, 8, num_layers=num_layers, out_channels=3, dropout=0.0)


MODEL_FANOUTS = [[3, 2], [-1, -1], [0, 2], [2, 0]]


@pytest.mark.parametrize("fanouts", MODEL_FANOUTS, ids=str)
@pytest.mark.parametrize("name", list(MODELS))
@pytest.mark.parametrize("graph", list(GRAPHS))
def test_model_without_hot_vertices_equals_the_plain_model(graph, name, fanouts):
    data = GRAPHS[graph]()
    torch.manual_seed(2)
    loader = OrchNeighborLoader(data, num_neighbors=fanouts, batch_size=9)
    model = build(name, len(fanouts)).eval()
    orch = OrchModel(model, loader)
    for batch in loader:
        expected = model(batch.x, batch.edge_index)[: batch.batch_size]
        assert torch.allclose(orch(batch), expected, atol=1e-5)


def every_other_node(data: Data) -> torch.Tensor:
    return torch.arange(data.num_nodes) % 2 == 0


def all_nodes(data: Data) -> torch.Tensor:
    return torch.ones(data.num_nodes, dtype=torch.bool)


def assert_model_matches_reference(name, data, loader, num_layers) -> None:
    model = build(name, num_layers, seed=3).eval()
    orch = OrchModel(model, loader)
    for batch in loader:
        frontier = batch.n_id[: frontier_size(batch.num_sampled_nodes)]
        assert torch.equal(
            batch.hot_index, loader.cache.mask[frontier].nonzero().view(-1)
        )
        assert_matches_reference(orch, model, name, batch, data)


@pytest.mark.parametrize("hot", [every_other_node, all_nodes])
@pytest.mark.parametrize("fanouts", MODEL_FANOUTS, ids=str)
@pytest.mark.parametrize("name", HOT_MODELS)
@pytest.mark.parametrize("graph", list(GRAPHS))
def test_model_with_hot_vertices_matches_a_plain_reference(graph, name, fanouts, hot):
    data = GRAPHS[graph]()
    torch.manual_seed(4)
    loader = OrchNeighborLoader(
        data, num_neighbors=fanouts, batch_size=9, hot=hot(data)
    )
    assert_model_matches_reference(name, data, loader, len(fanouts))


@pytest.mark.parametrize("graph", list(GRAPHS))
def test_every_frontier_vertex_hot_leaves_the_last_hop_empty(graph):
    data = GRAPHS[graph]()
    loader = OrchNeighborLoader(data, [3, 2], batch_size=5, hot=all_nodes(data))
    loader.serve("mean")
    mean = plain_aggregate("mean", data.x, *data.edge_index, data.num_nodes)
    for batch in loader:
        check_batch(batch, data, [3, 2], hot=loader.cache.mask)
        assert batch.num_sampled_nodes[-1] == 0
        assert batch.num_sampled_edges[-1] == 0
        frontier = frontier_size(batch.num_sampled_nodes)
        assert batch.hot_index.tolist() == list(range(frontier))
        assert torch.allclose(batch.hot_agg, mean[batch.n_id[:frontier]], atol=1e-6)


@pytest.mark.parametrize("method", ["degree", "presample"])
@pytest.mark.parametrize("graph", list(GRAPHS))
def test_hot_ratio_one(graph, method):
    data = GRAPHS[graph]()
    torch.manual_seed(6)
    loader = OrchNeighborLoader(
        data, [3, 2], batch_size=9, hot_ratio=1.0, hot_method=method
    )
    # Every vertex with a positive score is hot: in-degree for "degree",
    # frontier appearances of the presampled epoch for "presample".
    assert torch.equal(loader.hot.nodes, loader.hot.counts.nonzero().view(-1))
    if method == "degree":
        degree = torch.bincount(data.edge_index[1].long(), minlength=data.num_nodes)
        assert torch.equal(loader.hot.counts, degree)
    else:
        # Every node is a seed of the presampled epoch, so in its frontier.
        assert loader.hot.nodes.numel() == data.num_nodes
    loader.serve("mean")
    for batch in loader:
        check_batch(batch, data, [3, 2], hot=loader.cache.mask)
    for name in HOT_MODELS:
        assert_model_matches_reference(name, data, loader, 2)


@pytest.mark.parametrize("graph", list(GRAPHS))
def test_inference_equals_the_full_graph_model(graph):
    data = GRAPHS[graph]()
    for name in MODELS:
        model = build(name, 2).eval()
        expected = model(data.x, data.edge_index)
        assert torch.allclose(OrchModel(model).inference(data), expected, atol=1e-5)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("graph", list(GRAPHS))
def test_aggregation_kernels_match_pyg(graph, kind):
    data = GRAPHS[graph]()
    # PyG's CSC as the loader builds it: int32 colptr and row for int32 edges.
    colptr, row, _ = to_csc(data, device="cpu")
    assert colptr.dtype == data.edge_index.dtype
    nodes = torch.cat([torch.arange(data.num_nodes), torch.arange(data.num_nodes)])
    for index in (nodes, nodes.flip(0).int(), nodes[:0]):
        out = np.full((index.numel(), WIDTH), np.nan, np.float32)
        aggregate(colptr.numpy(), row.numpy(), data.x.numpy(), index.numpy(), kind, out)
        assert_aggregation_matches(out, data.edge_index, data.x, kind, index)


@pytest.mark.parametrize("graph", list(GRAPHS))
def test_gcn_degrees_match_gcn_norm(graph):
    data = GRAPHS[graph]()
    colptr, row, _ = to_csc(data, device="cpu")
    edge_index, weight = gcn_norm(data.edge_index.long(), None, data.num_nodes)
    degree = scatter(torch.ones_like(weight), edge_index[1], 0, dim_size=data.num_nodes)
    scale = torch.from_numpy(gcn_inverse_sqrt_degree(colptr.numpy(), row.numpy()))
    torch.testing.assert_close(scale, degree.pow(-0.5))


@pytest.mark.parametrize("graph", list(GRAPHS))
def test_hot_cache_values_and_full_resample(graph):
    data = GRAPHS[graph]()
    colptr, row, _ = to_csc(data, device="cpu")
    # Hot nodes in no particular order: the cache keeps that order.
    hot = torch.randperm(data.num_nodes, generator=torch.Generator().manual_seed(0))
    cache = HotCache(colptr, row, data.x, hot[: max(1, data.num_nodes // 2)])
    for kind in KINDS:
        values = cache.values(kind)
        assert_aggregation_matches(
            values, data.edge_index, data.x, kind, cache.hot_nodes
        )
        if kind != "gcn":
            cache.kind = kind
            torch.testing.assert_close(cache.resample(-1, seed=3), values)


def test_resample_keeps_the_order_of_unsorted_hot_nodes():
    # Regression: resample built its CSC as if hot_nodes were sorted by id,
    # so unsorted hot nodes got each other's aggregates.
    edge_index = torch.tensor([[1, 2, 0, 3], [0, 0, 1, 2]])
    colptr, row, _ = to_csc(Data(edge_index=edge_index, num_nodes=4), device="cpu")
    x = torch.tensor([[1.0], [2.0], [4.0], [8.0]])
    cache = HotCache(colptr, row, x, hot_nodes=torch.tensor([2, 0, 1]))
    assert cache.values("mean").view(-1).tolist() == [8.0, 3.0, 1.0]
    resampled = cache.resample(fanout=-1, seed=0, kind="mean")
    assert resampled.view(-1).tolist() == [8.0, 3.0, 1.0]


def test_int32_edges_with_hot_vertices_and_inference():
    # Regression: PyG's to_csc keeps int32, and the kernels refused an int32
    # colptr, so hot_ratio > 0 and OrchModel.inference failed on int32 graphs.
    data = int32_edges()
    loader = OrchNeighborLoader(data, [3, 2], batch_size=8, hot_ratio=0.5)
    assert loader.node_sampler.colptr.dtype == torch.int32
    for name in MODELS:
        if name in HOT_MODELS:
            assert_model_matches_reference(name, data, loader, 2)
        model = build(name, 2).eval()
        expected = model(data.x, data.edge_index)
        assert torch.allclose(OrchModel(model).inference(data), expected, atol=1e-5)


# The star: leaves 1..LEAVES all point at hub 0, so the hub's in-degree is a
# million and every leaf has in-degree 0. Two features keep it at ~30 MB.
LEAVES = 1_000_000


@pytest.fixture(scope="module")
def star() -> Data:
    edge_index = torch.stack([torch.arange(1, LEAVES + 1), torch.zeros(LEAVES).long()])
    x = torch.randn(LEAVES + 1, 2, generator=torch.Generator().manual_seed(7))
    return Data(x=x, edge_index=edge_index, num_nodes=LEAVES + 1)


def sample(sampler: OrchNeighborSampler, seeds: list[int]):
    return sampler.sample_from_nodes(
        NodeSamplerInput(input_id=None, node=torch.tensor(seeds))
    )


def test_star_hub_sampling(star):
    leaves = [5, LEAVES]
    for fanout, replace in ((10, False), (10, True), (900_000, False)):
        sampler = OrchNeighborSampler(star, num_neighbors=[fanout], replace=replace)
        torch.manual_seed(0)
        out = sample(sampler, [0, *leaves])
        # Only the hub has in-neighbours: `fanout` picks, all leaves, each an
        # existing edge (the leaf's own, e_id = leaf - 1).
        assert out.num_sampled_edges == [fanout]
        assert (out.col == 0).all()
        sources = out.node[out.row]
        assert ((sources >= 1) & (sources <= LEAVES)).all()
        e_id = sampler.perm[out.edge] if sampler.perm is not None else out.edge
        assert torch.equal(star.edge_index[0, e_id], sources)
        assert torch.equal(star.edge_index[1, e_id], torch.zeros_like(sources))
        distinct = out.edge.unique().numel()
        assert distinct == fanout if not replace else distinct <= fanout
        # Leaves already among the seeds are not added again.
        assert out.num_sampled_nodes == [3, out.node.numel() - 3]
        assert out.node[3:].unique().numel() == out.node.numel() - 3
    sampler = OrchNeighborSampler(star, num_neighbors=[-1, 5])
    out = sample(sampler, [0])
    assert out.num_sampled_edges == [LEAVES, 0]
    assert out.num_sampled_nodes == [1, LEAVES, 0]
    assert torch.equal(out.node[1:].sort().values, torch.arange(1, LEAVES + 1))


def test_star_hub_aggregation(star):
    colptr, row, _ = to_csc(star, device="cpu")
    nodes = np.array([0, 1, LEAVES, 0])
    leaves = star.x[1:].double()
    degree = LEAVES + 1.0  # with the self loop gcn_norm adds
    hub = {
        "sum": leaves.sum(0),
        "mean": leaves.mean(0),
        "max": leaves.max(0).values,
        "gcn": leaves.sum(0) / degree**0.5 + star.x[0].double() / degree,
    }
    for kind in KINDS:
        out = np.empty((4, 2), np.float32)
        aggregate(colptr.numpy(), row.numpy(), star.x.numpy(), nodes, kind, out)
        out = torch.from_numpy(out).double()
        # Leaves have no in-neighbours: zeros, or (gcn) their own features.
        leaf = star.x[[1, LEAVES]].double() if kind == "gcn" else 0 * out[1:3]
        torch.testing.assert_close(out[1:3], leaf)
        torch.testing.assert_close(out[0], out[3], rtol=0, atol=0)
        if kind == "max":
            torch.testing.assert_close(out[0], hub[kind], rtol=0, atol=0)
        else:
            # float32 over a million terms: relative to the sum of |x|.
            bound = 1e-4 * (leaves.abs().sum(0) / (LEAVES if kind == "mean" else 1))
            assert ((out[0] - hub[kind]).abs() <= bound).all(), kind


@pytest.mark.parametrize("name", list(MODELS))
def test_star_model_with_and_without_a_hot_hub(star, name):
    # One layer with fan-out -1: the batch holds the hub's whole neighbourhood,
    # so the plain model on the batch, the hot hub (full-graph aggregate) and
    # the plain model on the whole graph all agree at the hub.
    torch.manual_seed(0)
    model = MODELS[name](2, 3, num_layers=1, dropout=0.0).eval()
    expected = model(star.x, star.edge_index)[[0, 7]]
    input_nodes = torch.tensor([0, 7])
    plain = OrchNeighborLoader(star, [-1], input_nodes=input_nodes, batch_size=2)
    batch = next(iter(plain))
    assert batch.num_sampled_edges == [LEAVES]
    on_batch = model(batch.x, batch.edge_index)[:2]
    assert torch.allclose(on_batch, expected, atol=1e-4, rtol=1e-4)
    # OrchModel sums the million leaves in another order than PyG: float32
    # rounding, relative to the sum (as the hot hub's check below).
    assert torch.allclose(
        OrchModel(model, plain)(batch), on_batch, atol=1e-4, rtol=1e-4
    )
    if name not in HOT_MODELS:
        return
    hot = OrchNeighborLoader(
        star, [-1], input_nodes=input_nodes, batch_size=2, hot=torch.tensor([0])
    )
    orch = OrchModel(model, hot)  # before iterating: it serves the loader
    batch = next(iter(hot))
    assert batch.num_sampled_edges == [0] and batch.hot_index.tolist() == [0]
    assert torch.allclose(orch(batch), expected, atol=1e-4, rtol=1e-4)


def test_star_hot_cache_resample(star):
    colptr, row, _ = to_csc(star, device="cpu")
    cache = HotCache(colptr, row, star.x, hot_nodes=torch.tensor([0, 3]))
    cache.kind = "max"
    torch.testing.assert_close(cache.resample(-1, seed=0), cache.values("max"))
    # Ten sampled leaves: the max of ten of the hub's in-neighbours.
    sampled = cache.resample(10, seed=1)
    assert (sampled[0] <= cache.values("max")[0]).all()
    assert torch.isin(sampled[0, 0], star.x[1:, 0])
    assert sampled[1].tolist() == [0.0, 0.0]
