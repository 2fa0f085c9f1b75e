"""OrchModel against the plain PyG model and a plain-torch reference."""

import pytest
import torch
from conftest import random_graph
from references import MODEL_KINDS, assert_matches_reference, plain_aggregate
from torch_geometric.nn import GAT, GCN, GIN, GraphSAGE

from pyg_orch import OrchModel, OrchNeighborLoader

MODELS = {"sage": GraphSAGE, "gcn": GCN, "gin": GIN}


def build(name: str, in_channels: int, seed: int = 0):
    torch.manual_seed(seed)
    return MODELS[name](in_channels, 16, num_layers=3, out_channels=5, dropout=0.0)


def graph():
    data = random_graph(300, 3000, seed=11)
    data.edge_attr = None
    return data


@pytest.mark.parametrize("name", list(MODELS))
def test_without_hot_vertices_it_equals_the_plain_model(name, cora):
    for data in (graph(), cora):
        loader = OrchNeighborLoader(data, num_neighbors=[8, 4, 2], batch_size=40)
        model = build(name, data.num_features)
        orch = OrchModel(model, loader)
        torch.manual_seed(0)
        for batch in list(loader)[:4]:
            expected = model(batch.x, batch.edge_index)[: batch.batch_size]
            assert torch.allclose(orch(batch), expected, atol=1e-5)


# GCN is refused with hot vertices (see test_hot_serving.py).
@pytest.mark.parametrize("name", ["sage", "gin"])
def test_hot_forward_and_gradients_match_a_plain_torch_reference(name, cora):
    for data in (graph(), cora):
        torch.manual_seed(1)
        loader = OrchNeighborLoader(
            data, num_neighbors=[6, 4, 3], batch_size=32, hot_ratio=0.3
        )
        model = build(name, data.num_features, seed=2)
        orch = OrchModel(model, loader)
        for batch in list(loader)[:3]:
            assert batch.hot_index.numel() > 0
            assert_matches_reference(orch, model, name, batch, data, atol=1e-4)


@pytest.mark.parametrize("name", ["sage", "gin"])
def test_hot_rows_of_the_bottom_aggregation_are_full_neighbourhood(name, cora):
    torch.manual_seed(3)
    loader = OrchNeighborLoader(
        cora, num_neighbors=[5, 5], batch_size=64, hot_ratio=0.2
    )
    model = MODELS[name](cora.num_features, 8, num_layers=2, out_channels=7)
    orch = OrchModel(model, loader)
    seen = []
    model.convs[0].register_message_and_aggregate_forward_hook(
        lambda module, inputs, output: seen.append(output)
    )
    batch = next(iter(loader))
    orch(batch)
    full = plain_aggregate(MODEL_KINDS[name], cora.x, *cora.edge_index, cora.num_nodes)
    hot = batch.hot_index
    assert torch.allclose(seen[0][hot], full[batch.n_id[hot]], atol=1e-5)


def test_inference_equals_full_graph_forward(cora):
    for name in MODELS:
        model = build(name, cora.num_features).eval()
        expected = model(cora.x, cora.edge_index)
        assert torch.allclose(OrchModel(model).inference(cora), expected, atol=1e-4)


def test_convs_with_weighted_messages_switch_to_the_embedding_mode(cora):
    loader = OrchNeighborLoader(
        cora, num_neighbors=[5, 5], batch_size=64, hot_ratio=0.1
    )
    gat = GAT(cora.num_features, 8, num_layers=2, out_channels=7)
    with pytest.warns(UserWarning, match="cache='embedding'"):
        OrchModel(gat, loader)
    assert loader.cache.mode == "embedding"
    chosen = OrchNeighborLoader(
        cora, num_neighbors=[5, 5], batch_size=64, hot_ratio=0.1, cache="static"
    )
    with pytest.raises(NotImplementedError, match="cache='embedding'"):
        OrchModel(gat, chosen)
    plain = OrchNeighborLoader(cora, num_neighbors=[5, 5], batch_size=64)
    batch = next(iter(plain))
    gat.eval()
    expected = gat(batch.x, batch.edge_index)[: batch.batch_size]
    assert torch.allclose(OrchModel(gat, plain)(batch), expected, atol=1e-5)


def test_a_model_served_aggregates_ends_an_embedding_mode_it_did_not_choose(cora):
    loader = OrchNeighborLoader(cora, [5, 5], batch_size=64, hot_ratio=0.1)
    with pytest.warns(UserWarning, match="cache='embedding'"):
        OrchModel(GAT(cora.num_features, 8, num_layers=2, out_channels=7), loader)
    OrchModel(GraphSAGE(cora.num_features, 8, num_layers=2), loader)
    assert loader.cache.mode == "static"
    chosen = OrchNeighborLoader(
        cora, [5, 5], batch_size=64, hot_ratio=0.1, cache="embedding"
    )
    OrchModel(GraphSAGE(cora.num_features, 8, num_layers=2), chosen)
    assert chosen.cache.mode == "embedding"


@pytest.mark.parametrize("heads", [1, 2])
def test_gat_counts_every_copy_of_a_repeated_edge_as_the_plain_model(cora, heads):
    # PyG's GATConv coalesces a sparse adjacency when it adds self loops,
    # merging an edge the graph repeats: it must get the edges as they are.
    data = cora.clone()
    repeated = data.edge_index[:, :500]
    data.edge_index = torch.cat([data.edge_index, repeated, repeated.flip(0)], 1)
    torch.manual_seed(0)
    gat = GAT(cora.num_features, 8, num_layers=2, out_channels=7, heads=heads)
    expected = gat(data.x, data.edge_index)
    loader = OrchNeighborLoader(data, [-1, -1], batch_size=64)
    batch = next(iter(loader))
    out = OrchModel(gat, loader)(batch)
    torch.testing.assert_close(out, expected[batch.n_id[:64]], atol=1e-5, rtol=1e-4)


def test_rejects_what_it_cannot_wrap(cora):
    with pytest.raises(TypeError, match="BasicGNN"):
        OrchModel(torch.nn.Linear(3, 3))
    with pytest.raises(NotImplementedError, match="jk"):
        OrchModel(GraphSAGE(4, 8, num_layers=2, jk="cat"))
    loader = OrchNeighborLoader(cora, num_neighbors=[5, 5, 5], batch_size=8)
    with pytest.raises(ValueError, match="one fan-out per layer"):
        OrchModel(GraphSAGE(cora.num_features, 8, num_layers=2))(next(iter(loader)))


def test_norm_layers_and_act_first_follow_the_plain_model(cora):
    loader = OrchNeighborLoader(cora, num_neighbors=[6, 4], batch_size=50)
    torch.manual_seed(0)
    model = GraphSAGE(cora.num_features, 16, num_layers=2, out_channels=7,
                      norm="batch_norm", act_first=True)  # fmt: skip
    model.train()
    for batch in list(loader)[:3]:  # running statistics away from their start
        model(batch.x, batch.edge_index)
    model.eval()
    batch = next(iter(loader))
    expected = model(batch.x, batch.edge_index)[: batch.batch_size]
    assert torch.allclose(OrchModel(model, loader)(batch), expected, atol=1e-5)


def test_inference_rebuilds_its_graph_only_for_a_new_graph(cora):
    model = build("gcn", cora.num_features).eval()
    orch = OrchModel(model)
    flipped = cora.clone()
    flipped.edge_index = cora.edge_index.flip(0)[:, ::2].contiguous()
    for data in (cora, flipped, cora):
        expected = model(data.x, data.edge_index)
        assert torch.allclose(orch.inference(data), expected, atol=1e-4)


def test_the_plain_call_is_refused_naming_the_wrapped_call(cora):
    loader = OrchNeighborLoader(cora, [5, 5], batch_size=16)
    model = OrchModel(GraphSAGE(cora.num_features, 8, num_layers=2), loader)
    batch = next(iter(loader))
    for call in (
        lambda: model(batch.x, batch.edge_index),
        lambda: model(batch, edge_weight=None),
        lambda: model(batch.x),
        lambda: model({"paper": batch.x}, {}),
    ):
        with pytest.raises(TypeError, match=r"call model\(batch\).*model\.inference"):
            call()
    assert model(batch).shape == (16, 8)
