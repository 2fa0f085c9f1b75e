"""Features in half width (``feature_dtype``): bfloat16 and float16.

The reference is plain PyG in float32 on the whole graph, fed the same
half-width values widened to float32. The only other rounding is that of
the hot aggregates, stored in bfloat16 for bfloat16 features and in float32
for float16 ones (whose range a hub's sum passes).
"""

import pytest
import torch
from conftest import random_graph
from torch_geometric.data import Data
from torch_geometric.nn import GCN, GIN, GraphSAGE

from pyg_orch import HotCache, OrchModel, OrchNeighborLoader
from pyg_orch.hot.cache import hot_value_dtype

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
        assert batch.x.dtype == dtype
        assert batch.hot_agg.dtype == hot_value_dtype(dtype)
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


def hub_graph(high):
    """A hub with 4,000 in-neighbours among 4,100 nodes, features in [10, high].

    The hub's sum of float16 features passes float16's largest value, 65504.
    """
    generator = torch.Generator().manual_seed(2)
    num_nodes = 4100
    hub = torch.stack([torch.arange(1, 4001), torch.zeros(4000, dtype=torch.long)])
    rest = torch.randint(num_nodes, (2, 8000), generator=generator)
    x = 10 + (high - 10) * torch.rand(num_nodes, 8, generator=generator)
    return Data(x=x, edge_index=torch.cat([hub, rest], 1), num_nodes=num_nodes)


@pytest.mark.parametrize("dtype", HALF)
@pytest.mark.parametrize(
    "make",
    [
        lambda: GIN(8, 16, num_layers=2, out_channels=4),
        lambda: GraphSAGE(8, 16, num_layers=2, out_channels=4),
        lambda: GraphSAGE(8, 16, num_layers=2, out_channels=4, aggr="max"),
    ],
    ids=["sum", "mean", "max"],
)
@pytest.mark.parametrize("high", [30, 100])
def test_hub_aggregates_stay_finite_and_exact_in_half_width(dtype, make, high):
    data = hub_graph(high)
    torch.manual_seed(1)
    model = make().eval()
    half = OrchNeighborLoader(
        data, [-1, -1], batch_size=512, hot_ratio=0.3, hot_method="degree",
        feature_dtype=dtype,
    )  # fmt: skip
    orch = OrchModel(model, half)
    assert 0 in half.hot.nodes  # the hub is hot
    with torch.no_grad():
        expected = model(data.x.to(dtype).float(), data.edge_index)
        assert expected.isfinite().all()
        batch = next(iter(half))
        assert 0 in batch.n_id[batch.hot_index]
        out = orch(batch)
    assert out.isfinite().all()
    tolerance = TOLERANCE[dtype]
    scale = float(expected.abs().max())
    torch.testing.assert_close(
        out, expected[batch.n_id[:512]], atol=tolerance * scale, rtol=tolerance
    )


def test_hot_values_stay_float32_where_half_width_would_overflow():
    # bfloat16 has float32's range but rounds to 8 bits: a sum within half a
    # bfloat16 step of float32's largest would become inf.
    colptr, row = torch.tensor([0, 4, 4, 4, 4, 4]), torch.tensor([1, 2, 3, 4])
    x = torch.full((5, 2), 2.0**126)
    x[4] = (2 - 2**-7) * 2.0**125  # the sum: 3.3995e38, float32's largest 3.4028e38
    x = x.to(torch.bfloat16)
    expected = x.float()[1:].sum(0)
    assert expected.isfinite().all() and expected.to(torch.bfloat16).isinf().all()
    cache = HotCache(colptr, row, x, hot_nodes=torch.tensor([0, 1]))
    values = cache.values("sum")
    assert values.dtype == torch.float32
    torch.testing.assert_close(values[0], expected)
    safe = HotCache(colptr, row, x / 8, hot_nodes=torch.tensor([0, 1]))
    assert safe.values("sum").dtype == torch.bfloat16
    assert safe.values("sum").isfinite().all()
