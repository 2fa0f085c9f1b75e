"""Hot values are served to one model and exact against plain PyG, or refused."""

import pytest
import torch
from conftest import random_graph
from torch_geometric.nn import GAT, GCN, GIN, GraphSAGE

from pyg_orch import OrchModel, OrchNeighborLoader

HOT_MODELS = {"sage": GraphSAGE, "gin": GIN}
# Every aggregation and option of the convs OrchModel aggregates itself.
VARIANTS = {
    "sage": lambda *a, **k: GraphSAGE(*a, **k),
    "gin": lambda *a, **k: GIN(*a, **k),
    "sage_max": lambda *a, **k: GraphSAGE(*a, aggr="max", **k),
    "sage_sum": lambda *a, **k: GraphSAGE(*a, aggr="sum", **k),
    "sage_normalized_no_root": lambda *a, **k: GraphSAGE(
        *a, normalize=True, root_weight=False, **k
    ),
    "gin_train_eps": lambda *a, **k: GIN(*a, train_eps=True, **k),
}


def graph(seed: int = 5):
    data = random_graph(400, 4000, seed=seed)
    data.edge_attr = None
    return data


def hot_loader(data, ratio=0.3, num_neighbors=(-1, -1), **kwargs):
    torch.manual_seed(0)
    return OrchNeighborLoader(
        data, list(num_neighbors), batch_size=64, hot_ratio=ratio, **kwargs
    )


@pytest.mark.parametrize("name", list(VARIANTS))
def test_hot_batches_at_full_fanout_equal_the_plain_model_on_the_whole_graph(name):
    # At fan-out -1 a batch holds every seed's whole neighbourhood, so the
    # seeds' outputs and gradients are those of plain PyG on the whole graph.
    data = graph()
    torch.manual_seed(1)
    model = VARIANTS[name](data.num_features, 16, num_layers=3, out_channels=4)
    loader = hot_loader(data, num_neighbors=(-1, -1, -1))
    orch = OrchModel(model, loader)
    for batch in list(loader)[:3]:
        assert batch.hot_index.numel() > 0
        model.zero_grad()
        orch(batch).square().sum().backward()
        grads = [p.grad.clone() for p in model.parameters()]
        model.zero_grad()
        seeds = batch.n_id[: batch.batch_size]
        expected = model(data.x, data.edge_index)[seeds]
        expected.square().sum().backward()
        torch.testing.assert_close(orch(batch), expected, atol=1e-5, rtol=1e-4)
        for grad, parameter in zip(grads, model.parameters(), strict=True):
            torch.testing.assert_close(grad, parameter.grad, atol=1e-4, rtol=1e-3)


@pytest.mark.filterwarnings("ignore:OrchModel. in training mode")
@pytest.mark.parametrize(
    "options",
    [
        {},
        {"dropout": 0.5},
        {"act_first": True, "dropout": 0.3},
        {"act": "elu"},
        {"norm": "batch_norm"},
        {"aggr": "max", "dropout": 0.2},
    ],
    ids=["plain", "dropout", "act_first", "elu", "batch_norm", "max_dropout"],
)
def test_a_conv_with_hooks_runs_through_pyg_and_gives_the_same_numbers(options):
    # OrchModel aggregates known convs itself (and applies a ReLU between two
    # of them in the next aggregation), which skips MessagePassing's hooks: a
    # conv with any keeps PyG's path, and no number changes, in training mode
    # (dropout draws the same masks) and in its gradients.
    data = graph()
    torch.manual_seed(1)
    model = GraphSAGE(data.num_features, 16, num_layers=3, out_channels=4, **options)
    loader = hot_loader(data, num_neighbors=(5, 5, 5))
    orch = OrchModel(model, loader).train()
    batch = next(iter(loader))

    def outputs_and_gradients():
        model.zero_grad()
        torch.manual_seed(2)
        out = orch(batch)
        out.square().sum().backward()
        return out, [p.grad.clone() for p in model.parameters()]

    fused, fused_grads = outputs_and_gradients()
    seen = []
    for conv in model.convs:
        conv.register_forward_hook(lambda module, inputs, output: seen.append(1))
    pyg, pyg_grads = outputs_and_gradients()
    assert len(seen) == 3, "the hooked convs did not run through PyG"
    torch.testing.assert_close(pyg, fused, atol=1e-5, rtol=1e-5)
    for grad, expected in zip(fused_grads, pyg_grads, strict=True):
        torch.testing.assert_close(grad, expected, atol=1e-5, rtol=1e-4)


def test_a_propagate_hook_is_seen_as_without_orch_model():
    data = graph()
    model = GraphSAGE(data.num_features, 16, num_layers=2, out_channels=4)
    loader = hot_loader(data, num_neighbors=(5, 5))
    orch = OrchModel(model, loader)
    seen = []
    model.convs[1].register_message_and_aggregate_forward_hook(
        lambda module, inputs, output: seen.append(output.shape)
    )
    orch(next(iter(loader)))
    assert len(seen) == 1


def test_a_hot_loader_no_model_serves_refuses_to_yield_batches():
    loader = hot_loader(graph(), prefetch=0)
    with pytest.raises(RuntimeError, match=r"OrchModel\(model, loader\)"):
        iter(loader)
    with pytest.raises(RuntimeError, match="hot_ratio=0"):
        next(iter(hot_loader(graph(), prefetch=2)))
    plain = hot_loader(graph(), ratio=0.0)
    assert next(iter(plain)).batch_size == 64


def test_a_model_refuses_hot_values_served_for_another_aggregation():
    data = graph()
    loader = hot_loader(data)
    OrchModel(GraphSAGE(data.num_features, 8, num_layers=2), loader)  # mean
    batch = next(iter(loader))
    assert batch.hot_kind == "mean"
    gin = GIN(data.num_features, 8, num_layers=2)
    with pytest.raises(ValueError, match="'mean' aggregates.*needs 'sum'"):
        OrchModel(gin)(batch)
    # The model wrapped last takes the loader over: the first one then
    # refuses its batches instead of computing with another aggregation.
    sage = OrchModel(GraphSAGE(data.num_features, 8, num_layers=2), loader)
    gin_orch = OrchModel(gin, loader)
    batch = next(iter(loader))
    assert batch.hot_kind == "sum"
    with pytest.raises(ValueError, match="'sum' aggregates.*needs 'mean'"):
        sage(batch)
    expected = gin(data.x, data.edge_index)[batch.n_id[: batch.batch_size]]
    torch.testing.assert_close(gin_orch(batch), expected, atol=1e-4, rtol=1e-4)


def test_a_model_refuses_embeddings_made_from_another_models_weights():
    data = graph()
    loader = hot_loader(data, num_neighbors=(5, 5))
    with pytest.warns(UserWarning, match="embedding"):
        first = OrchModel(GAT(data.num_features, 8, num_layers=2), loader)
    with loader:
        batch = next(iter(loader))
    assert batch.hot_kind == "embedding"
    first(batch)
    with pytest.raises(ValueError, match="another model's weights"):
        OrchModel(GAT(data.num_features, 8, num_layers=2))(batch)


def test_gcn_with_hot_vertices_is_refused_and_exact_without():
    data = graph()
    model = GCN(data.num_features, 16, num_layers=2, out_channels=4)
    with pytest.raises(NotImplementedError, match="GCN.*hot_ratio=0"):
        OrchModel(model, hot_loader(data))
    # Without hot vertices it is plain PyG's GCN on the batch.
    loader = hot_loader(data, ratio=0.0, num_neighbors=(4, 3))
    orch = OrchModel(model, loader)
    for batch in list(loader)[:3]:
        expected = model(batch.x, batch.edge_index)[: batch.batch_size]
        torch.testing.assert_close(orch(batch), expected, atol=1e-5, rtol=1e-4)


def test_gcn_refuses_hot_batches_even_when_wrapped_without_the_loader():
    data = graph()
    loader = hot_loader(data)
    loader.serve("gcn")  # e.g. pyg_orch.distributed serving shared GCN values
    batch = next(iter(loader))
    gcn = OrchModel(GCN(data.num_features, 8, num_layers=2))
    with pytest.raises(NotImplementedError, match="GCN"):
        gcn(batch)
