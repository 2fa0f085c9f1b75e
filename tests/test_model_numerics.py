"""OrchModel's norms and float64 models against the plain PyG model."""

import numpy as np
import pytest
import torch
from conftest import random_graph
from torch_geometric.nn import GCN, GIN, GraphSAGE
from torch_geometric.nn.conv.gcn_conv import gcn_norm
from torch_geometric.nn.norm import GraphSizeNorm, MeanSubtractionNorm
from torch_geometric.sampler.utils import to_csc
from torch_geometric.utils import scatter

from pyg_orch import OrchModel, OrchNeighborLoader
from pyg_orch.kernels.aggregate import aggregate, gcn_inverse_sqrt_degree

# Norms whose statistics span the rows of a layer, also in eval mode.
ROW_SPANNING_NORMS = {
    "layer_norm": ("layer_norm", None),  # PyG's default mode is "graph"
    "graph_norm": ("graph_norm", None),
    "instance_norm": ("instance_norm", None),
    "pair_norm": ("pair_norm", None),
    "mean_subtraction_norm": (MeanSubtractionNorm(), None),
    "graph_size_norm": (GraphSizeNorm(), None),
    "batch_norm_without_running_stats": (
        "batch_norm",
        {"track_running_stats": False},
    ),
}
# Norms that, in eval mode, normalise every node on its own.
PER_NODE_NORMS = {
    "none": (None, None),
    "batch_norm": ("batch_norm", None),
    "layer_norm_node": ("layer_norm", {"mode": "node"}),
    "diff_group_norm": ("diff_group_norm", {"groups": 3}),
}
TRAINING_STATISTICS = "ignore:OrchModel. in training mode"


def graph(dtype: torch.dtype = torch.float32):
    data = random_graph(300, 2400, seed=7)
    data.edge_attr = None
    data.x = data.x.to(dtype)
    return data


def sage(norm=None, norm_kwargs=None):
    torch.manual_seed(0)
    return GraphSAGE(8, 16, num_layers=2, out_channels=4, norm=norm,
                     norm_kwargs=norm_kwargs, dropout=0.0)  # fmt: skip


@pytest.mark.parametrize("name", list(ROW_SPANNING_NORMS))
def test_norms_with_statistics_over_the_rows_are_refused_at_construction(name):
    model = sage(*ROW_SPANNING_NORMS[name])
    norm = type(model.norms[0]).__name__
    with pytest.raises(NotImplementedError, match=rf"the norm {norm}\(.*'node'"):
        OrchModel(model)
    loader = OrchNeighborLoader(graph(), [-1, -1], batch_size=40)
    with pytest.raises(NotImplementedError, match=rf"the norm {norm}\("):
        OrchModel(model, loader)


@pytest.mark.filterwarnings(TRAINING_STATISTICS)
@pytest.mark.parametrize("name", list(PER_NODE_NORMS))
def test_per_node_norms_equal_the_plain_model_in_eval_mode(name):
    data = graph()
    loader = OrchNeighborLoader(data, [-1, -1], batch_size=40, shuffle=True)
    model = sage(*PER_NODE_NORMS[name])
    for batch in list(loader)[:3]:  # running statistics away from their start
        model(batch.x, batch.edge_index)
    model.eval()
    orch = OrchModel(model, loader)
    with torch.no_grad():
        for batch in list(loader)[:3]:
            expected = model(batch.x, batch.edge_index)[: batch.batch_size]
            torch.testing.assert_close(orch(batch), expected, rtol=0, atol=1e-5)
        expected = model(data.x, data.edge_index)
    # Small chunks: a norm over the rows present would see other rows.
    got = orch.inference(data, batch_size=64)
    torch.testing.assert_close(got, expected, rtol=0, atol=1e-5)


@pytest.mark.filterwarnings(TRAINING_STATISTICS)
def test_inference_leaves_a_model_wrapped_in_eval_mode_in_eval_mode():
    # Else its batch norms would normalise the next plain call with batch
    # statistics.
    data = graph()
    model = sage("batch_norm").eval()
    OrchModel(model).inference(data)
    assert not model.training


def test_batch_norm_warns_that_training_statistics_cover_the_computed_rows():
    with pytest.warns(UserWarning, match=r"in training mode, BatchNorm.*eval mode"):
        OrchModel(sage("batch_norm"))


@pytest.mark.parametrize("model_class", [GraphSAGE, GCN, GIN])
def test_float64_models_match_the_plain_float64_model(model_class):
    data = graph(torch.float64)
    torch.manual_seed(0)
    model = model_class(8, 16, num_layers=2, out_channels=4).double()
    loader = OrchNeighborLoader(data, [-1, -1], batch_size=40)
    orch = OrchModel(model, loader)
    parameters = list(model.parameters())
    for batch in list(loader)[:3]:
        got = orch(batch)
        expected = model(batch.x, batch.edge_index)[: batch.batch_size]
        assert got.dtype == torch.float64
        torch.testing.assert_close(got, expected, rtol=0, atol=1e-10)
        got_grads = torch.autograd.grad(got.square().sum(), parameters)
        grads = torch.autograd.grad(expected.square().sum(), parameters)
        for got_grad, grad in zip(got_grads, grads, strict=True):
            torch.testing.assert_close(got_grad, grad, rtol=0, atol=1e-10)
    model.eval()
    with torch.no_grad():
        expected = model(data.x, data.edge_index)
    got = orch.inference(data, batch_size=64)
    assert got.dtype == torch.float64
    torch.testing.assert_close(got, expected, rtol=0, atol=1e-10)


def test_a_float64_model_is_refused_hot_batches_with_a_clear_error():
    loader = OrchNeighborLoader(graph(), [-1, -1], batch_size=40, hot_ratio=0.3)
    with pytest.raises(TypeError, match=r"hot vertices need float32.*model\.float"):
        OrchModel(sage().double(), loader)
    model = sage()
    orch = OrchModel(model, loader)
    batch = next(iter(loader))
    assert batch.hot_index.numel() > 0
    model.double()
    with pytest.raises(TypeError, match=r"hot vertices need float32.*model\.float"):
        orch(batch)


def test_features_of_another_dtype_than_the_model_are_refused_with_the_fix():
    loader = OrchNeighborLoader(graph(torch.float64), [-1, -1], batch_size=40)
    with pytest.raises(TypeError, match=r"features are torch.float64.*model.to"):
        OrchModel(sage(), loader)
    orch = OrchModel(sage())
    with pytest.raises(TypeError, match=r"features are torch.float64.*data.x.to"):
        orch(next(iter(loader)))
    # Also when the loader holds the features itself (device=) or as NumPy.
    data = graph(torch.float64)
    on_device = OrchNeighborLoader(data, [-1, -1], batch_size=40, device="cpu")
    data.x = data.x.numpy()
    as_numpy = OrchNeighborLoader(data, [-1, -1], batch_size=40)
    for other in (on_device, as_numpy):
        with pytest.raises(TypeError, match=r"features are torch.float64"):
            OrchModel(sage(), other)


@pytest.mark.parametrize("kind", ["sum", "mean", "max", "gcn"])
def test_the_kernels_aggregate_float64_features_in_float64(kind):
    data = graph(torch.float64)
    colptr, row, _ = to_csc(data, device="cpu")
    nodes = np.arange(data.num_nodes)[::-1].copy()
    out = np.empty((nodes.size, data.num_features))
    aggregate(colptr.numpy(), row.numpy(), data.x.numpy(), nodes, kind, out)
    if kind == "gcn":
        edge_index, weight = gcn_norm(
            data.edge_index, None, data.num_nodes, dtype=torch.float64
        )
        messages = data.x[edge_index[0]] * weight.unsqueeze(1)
        expected = scatter(messages, edge_index[1], 0, dim_size=data.num_nodes)
    else:
        src, dst = data.edge_index
        expected = scatter(data.x[src], dst, 0, dim_size=data.num_nodes, reduce=kind)
    expected = expected[torch.from_numpy(nodes)]
    torch.testing.assert_close(torch.from_numpy(out), expected, rtol=0, atol=1e-12)
    scale = gcn_inverse_sqrt_degree(colptr.numpy(), row.numpy(), np.float64)
    assert scale.dtype == np.float64


@pytest.mark.parametrize("aggr", ["max", "mean", "sum"])
@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_a_nan_feature_reaches_every_output_it_reaches_in_pyg(aggr, precision):
    # torch's scatter passes a NaN to every node that reads it, for max too
    # (amax), whatever the order of the edges.
    data = graph()
    source = int(torch.bincount(data.edge_index[0]).argmax())
    data.x[source, 3] = float("nan")
    torch.manual_seed(0)
    model = GraphSAGE(8, 16, num_layers=2, out_channels=4, aggr=aggr)
    loader = OrchNeighborLoader(data, [-1, -1], batch_size=data.num_nodes)
    orch = OrchModel(model, loader, precision=precision)
    batch = next(iter(loader))
    with torch.autocast("cpu", torch.bfloat16, enabled=precision == "bf16"):
        expected = model(data.x, data.edge_index)[batch.n_id[: batch.batch_size]]
        got = orch(batch)
    nan = expected.isnan()
    assert 1 < int(nan.any(1).sum()) < data.num_nodes
    assert torch.equal(got.isnan(), nan)
    if precision == "fp32":
        torch.testing.assert_close(got[~nan], expected[~nan], rtol=0, atol=1e-5)
        # The gradients' NaNs too: a NaN maximum gives its sources NaN.
        rows = ~nan.any(1)
        parameters = list(model.parameters())
        got_grads = torch.autograd.grad(got[rows].sum(), parameters)
        grads = torch.autograd.grad(expected[rows].sum(), parameters)
        for got_grad, grad in zip(got_grads, grads, strict=True):
            assert torch.equal(got_grad.isnan(), grad.isnan())
    with torch.no_grad():
        whole = model.eval()(data.x, data.edge_index)
    assert torch.equal(orch.inference(data).isnan(), whole.isnan())
