"""Features in half width (``feature_dtype``): bfloat16 and float16.

The reference is plain PyG in float32 on the whole graph, fed the same
half-width values widened to float32. The only other rounding is that of
the hot aggregates, stored in half width too.
"""

import pytest
import torch
from conftest import random_graph
from torch_geometric.nn import GCN, GIN, GraphSAGE

from pyg_orch import OrchModel, OrchNeighborLoader

# float16's kernels compile for 11 s in a fresh install: with the slow tests.
HALF = [torch.bfloat16, pytest.param(torch.float16, marks=pytest.mark.slow)]
# Relative rounding of one stored value: 2**-8 (bfloat16), 2**-11 (float16).
TOLERANCE = {torch.bfloat16: 2e-2, torch.float16: 4e-3}


def graph():
    data = random_graph(400, 4000, seed=5)
    data.edge_attr = None
    return data


def loader(data, ratio=0.3, **kwargs):
    torch.manual_seed(0)
    return OrchNeighborLoader(data, [-1, -1], batch_size=64, hot_ratio=ratio, **kwargs)


@pytest.mark.parametrize("dtype", HALF)
@pytest.mark.parametrize("model_class", [GraphSAGE, GIN])
def test_half_width_batches_equal_plain_pyg_on_the_widened_features(dtype, model_class):
    data = graph()
    torch.manual_seed(1)
    model = model_class(data.num_features, 16, num_layers=2, out_channels=4)
    half = loader(data, feature_dtype=dtype)
    orch = OrchModel(model, half)
    assert data.x.dtype == torch.float32  # the user's graph is left as it is
    widened = data.x.to(dtype).float()
    for batch in list(half)[:3]:
        assert batch.x.dtype == batch.hot_agg.dtype == dtype
        assert batch.hot_index.numel() > 0
        model.zero_grad()
        out = orch(batch)
        assert out.dtype == torch.float32
        out.square().sum().backward()
        grads = [p.grad.clone() for p in model.parameters()]
        model.zero_grad()
        expected = model(widened, data.edge_index)[batch.n_id[: batch.batch_size]]
        expected.square().sum().backward()
        tolerance = TOLERANCE[dtype]
        torch.testing.assert_close(out, expected, atol=tolerance, rtol=tolerance)
        for grad, parameter in zip(grads, model.parameters(), strict=True):
            scale = float(parameter.grad.abs().max())
            torch.testing.assert_close(
                grad, parameter.grad, atol=tolerance * scale, rtol=tolerance
            )


def test_without_hot_vertices_half_width_is_plain_pyg_on_widened_features():
    # No hot aggregate is rounded: float32 sums of the same values.
    data = graph()
    torch.manual_seed(1)
    model = GraphSAGE(data.num_features, 16, num_layers=2, out_channels=4)
    half = loader(data, ratio=0.0, feature_dtype=torch.bfloat16)
    orch = OrchModel(model, half)
    batch = next(iter(half))
    expected = model(data.x.bfloat16().float(), data.edge_index)
    torch.testing.assert_close(
        orch(batch), expected[batch.n_id[:64]], atol=1e-5, rtol=1e-4
    )


def test_features_already_in_half_width_are_used_as_they_are():
    data = graph()
    data.x = data.x.bfloat16()
    plain = loader(data)
    model = GraphSAGE(data.num_features, 8, num_layers=2)
    OrchModel(model, plain)
    batch = next(iter(plain))
    assert plain.features.data_ptr() == data.x.data_ptr()
    assert batch.x.dtype == batch.hot_agg.dtype == torch.bfloat16


@pytest.mark.parametrize("model_class", [GCN, GIN])
def test_convs_pyg_aggregates_get_the_features_widened(model_class):
    data = graph()
    torch.manual_seed(1)
    model = model_class(data.num_features, 8, num_layers=2, out_channels=3)
    half = loader(data, ratio=0.0, feature_dtype=torch.bfloat16)
    batch = next(iter(half))
    out = OrchModel(model, half)(batch)
    expected = model(data.x.bfloat16().float(), data.edge_index)[batch.n_id[:64]]
    torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-4)


def test_device_gathers_half_width_rows():
    data = graph()
    half = loader(data, ratio=0.0, feature_dtype=torch.bfloat16, device="cpu")
    batch = next(iter(half))
    assert batch.x.dtype == torch.bfloat16
    assert torch.equal(batch.x, data.x.bfloat16()[batch.n_id])


def test_bad_feature_dtypes_are_refused_with_the_choices():
    with pytest.raises(TypeError, match="feature_dtype must be None, torch.bfloat16"):
        loader(graph(), feature_dtype=torch.int8)
    with pytest.raises(TypeError, match="feature_dtype must be"):
        loader(graph(), feature_dtype="bf16")
