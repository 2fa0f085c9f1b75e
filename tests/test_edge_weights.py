"""Edge weights and edge features reach the convs that take them.

The references are plain PyG models run on the whole graph with the same
``edge_weight`` / ``edge_attr`` (fan-out ``-1`` makes a batch exact for
convs whose aggregation does not depend on the batch, and a batch of every
node is the whole graph for GCN, whose normalisation does). None of them
goes through pyg_orch's caches, kernels or hooks.
"""

import pytest
import torch
from conftest import WeightedGraphConvGNN, random_graph
from torch.testing import assert_close
from torch_geometric.nn import GAT, GCN

from pyg_orch import OrchModel, OrchNeighborLoader

NUM_NODES, BATCH = 300, 64


@pytest.fixture(scope="module")
def data():
    graph = random_graph(NUM_NODES, 3000, seed=11)
    generator = torch.Generator().manual_seed(3)
    graph.edge_weight = torch.rand(graph.num_edges, generator=generator) * 2
    graph.edge_attr = torch.rand(graph.num_edges, 3, generator=generator)
    return graph


def whole_graph(model, data, **edge_values):
    with torch.no_grad():
        return model(data.x, data.edge_index, **edge_values)


def seeds_output(orch, loader):
    batch = next(iter(loader))
    with torch.no_grad():
        return batch.n_id[: batch.batch_size], orch(batch)


def test_gcn_uses_edge_weights_at_hot_0(data):
    torch.manual_seed(0)
    model = GCN(8, 16, num_layers=2, out_channels=4).eval()
    expected = whole_graph(model, data, edge_weight=data.edge_weight)
    unweighted = whole_graph(model, data)
    assert (expected - unweighted).abs().max() > 0.1  # the weights matter here
    # A batch of every node with every neighbour is the whole graph.
    loader = OrchNeighborLoader(data, [-1, -1], batch_size=NUM_NODES)
    seeds, out = seeds_output(OrchModel(model, loader), loader)
    assert_close(out, expected[seeds])
    # A smaller batch: GCN normalises by the batch's degrees, as plain PyG
    # does on the batch it is given with its edge weights.
    loader = OrchNeighborLoader(data, [3, 2], batch_size=BATCH)
    batch = next(iter(loader))
    with torch.no_grad():
        plain = model(batch.x, batch.edge_index, edge_weight=batch.edge_weight)
        assert_close(OrchModel(model, loader)(batch), plain[:BATCH])


@pytest.mark.parametrize("aggr", ["add", "mean", "max"])
@pytest.mark.parametrize("hot_ratio", [0.0, 0.3])
def test_graph_conv_uses_edge_weights_with_and_without_hot_nodes(data, aggr, hot_ratio):
    torch.manual_seed(0)
    model = WeightedGraphConvGNN(8, 16, num_layers=2, out_channels=4, aggr=aggr)
    loader = OrchNeighborLoader(
        data, [-1, -1], batch_size=BATCH, hot_ratio=hot_ratio, hot_method="degree"
    )
    orch = OrchModel(model, loader)
    batch = next(iter(loader))
    if hot_ratio:
        assert batch.hot_index.numel() > 0
        assert batch.hot_kind == f"weighted_{'sum' if aggr == 'add' else aggr}"
    out = orch(batch)
    out.square().sum().backward()
    grads = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    seeds = batch.n_id[:BATCH]
    expected = model(data.x, data.edge_index, edge_weight=data.edge_weight)[seeds]
    expected.square().sum().backward()
    assert_close(out, expected, atol=1e-5, rtol=1e-4)
    for grad, parameter in zip(grads, model.parameters(), strict=True):
        # Float32 rounding of sums in another order, relative to the largest.
        scale = float(parameter.grad.abs().max())
        assert_close(grad, parameter.grad, atol=1e-5 * scale, rtol=1e-4)
    unweighted = whole_graph(model, data)[seeds]
    assert (expected - unweighted).abs().max() > 0.1


@pytest.mark.parametrize(
    ("make", "edge_value"),
    [
        (lambda: GCN(8, 16, num_layers=2, out_channels=4), "edge_weight"),
        (lambda: WeightedGraphConvGNN(8, 16, 2, 4, aggr="max"), "edge_weight"),
        (lambda: GAT(8, 16, num_layers=2, out_channels=4, edge_dim=3), "edge_attr"),
    ],
    ids=["gcn", "graph_conv", "gat"],
)
def test_inference_uses_the_edge_values(data, make, edge_value):
    torch.manual_seed(0)
    model = make().eval()
    expected = whole_graph(model, data, **{edge_value: data[edge_value]})
    assert_close(OrchModel(model).inference(data), expected, atol=1e-5, rtol=1e-4)


def test_gat_uses_edge_features_at_hot_0(data):
    torch.manual_seed(0)
    model = GAT(8, 16, num_layers=2, out_channels=4, edge_dim=3).eval()
    expected = whole_graph(model, data, edge_attr=data.edge_attr)
    loader = OrchNeighborLoader(data, [-1, -1], batch_size=BATCH)
    seeds, out = seeds_output(OrchModel(model, loader), loader)
    assert_close(out, expected[seeds], atol=1e-5, rtol=1e-4)


def test_hot_nodes_refuse_a_bottom_layer_reading_edge_features(data):
    model = GAT(8, 16, num_layers=2, out_channels=4, edge_dim=3)
    loader = OrchNeighborLoader(data, [5, 5], batch_size=BATCH, hot_ratio=0.3)
    with pytest.raises(NotImplementedError, match=r"edge_attr.*hot_ratio=0"):
        OrchModel(model, loader)


def test_resample_mode_refuses_weighted_hot_values(data):
    model = WeightedGraphConvGNN(8, 16, num_layers=2, out_channels=4)
    loader = OrchNeighborLoader(
        data, [5, 5], batch_size=BATCH, hot_ratio=0.3, cache="resample"
    )
    with pytest.raises(NotImplementedError, match=r"'weighted_sum'.*cache='static'"):
        OrchModel(model, loader)


def test_unweighted_hot_values_are_refused_by_a_weighted_model(data):
    # A loader served for a model that ignores the weights (GraphConv without
    # supports_edge_weight), then fed to one that reads them.
    class UnweightedGraphConvGNN(WeightedGraphConvGNN):
        supports_edge_weight = False

    loader = OrchNeighborLoader(
        data, [-1, -1], batch_size=BATCH, hot_ratio=0.3, hot_method="degree"
    )
    OrchModel(UnweightedGraphConvGNN(8, 16, 2, 4), loader)
    batch = next(iter(loader))
    weighted = OrchModel(WeightedGraphConvGNN(8, 16, 2, 4))
    with pytest.raises(ValueError, match=r"'sum' aggregates.*needs 'weighted_sum'"):
        weighted(batch)


def test_learned_edge_weights_are_refused_with_hot_nodes(data):
    # Hot values are constants: the weights of hot edges would get no gradient.
    learned = data.clone()
    learned.edge_weight = data.edge_weight.clone().requires_grad_()
    loader = OrchNeighborLoader(learned, [5, 5], batch_size=BATCH, hot_ratio=0.3)
    model = WeightedGraphConvGNN(8, 16, num_layers=2, out_channels=4)
    with pytest.raises(NotImplementedError, match=r"requires grad.*hot_ratio=0"):
        OrchModel(model, loader)
    # At hot 0 they are learned as in plain PyG.
    loader = OrchNeighborLoader(learned, [-1, -1], batch_size=BATCH)
    batch = next(iter(loader))
    OrchModel(model, loader)(batch).sum().backward()
    seeds = batch.n_id[:BATCH]
    grad = learned.edge_weight.grad.clone()
    learned.edge_weight.grad = None
    model(learned.x, learned.edge_index, edge_weight=learned.edge_weight)[
        seeds
    ].sum().backward()
    assert_close(grad, learned.edge_weight.grad, atol=1e-5, rtol=1e-4)
