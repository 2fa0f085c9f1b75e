"""``aggregate_neighbours`` against torch's sparse product and PyG's scatter.

References share nothing with the kernels: ``torch.sparse.mm`` on a CSR
adjacency (sum, mean), and PyG's edge-wise ``scatter`` (all kinds; its max
gradient is the one a plain PyG model gets), forward and gradients, on random
batches with hubs, duplicates, empty rows and relu ties.
"""

import numba
import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch_geometric.utils import scatter

from pyg_orch.aggregation import _torch_aggregate, aggregate_neighbours
from pyg_orch.kernels.gradient import aggregate_gradient
from pyg_orch.kernels.threading_layer import numba_threads

KINDS = ["sum", "mean", "max"]


def random_layer(seed: int, num_src=60, num_dst=25, num_edges=200, width=19):
    """Sources (relu'd: ties at zero), dst-sorted edges with a hub, empty rows."""
    generator = torch.Generator().manual_seed(seed)
    dst = torch.randint(num_dst - 3, (num_edges,), generator=generator)
    dst[: num_edges // 4] = 2  # a hub row
    src = torch.randint(num_src, (num_edges,), generator=generator)
    src[-5:] = src[:5]  # duplicate sources
    dst, order = torch.sort(dst, stable=True)
    x = torch.randn(num_src, width, generator=generator).relu()
    rowptr = torch.zeros(num_dst + 1, dtype=torch.long)
    rowptr[1:] = torch.bincount(dst, minlength=num_dst).cumsum(0)
    return x, rowptr, src[order], dst


def loss_weights(seed: int, num_dst: int, width: int):
    generator = torch.Generator().manual_seed(seed + 1)
    return torch.randn(2, num_dst, width, generator=generator, dtype=torch.float64)


def pyg_reference(x, rowptr, src, dst, kind, weights, relu=False):
    """Forward and gradient of a loss of (aggregation, root rows) by PyG.

    ``relu``: of ``relu(x)``'s, the gradient still with respect to ``x``.
    """
    x = x.detach().double().requires_grad_()
    sources = torch.relu(x) if relu else x
    num_dst = rowptr.numel() - 1
    agg = scatter(sources[src], dst, dim=0, dim_size=num_dst, reduce=kind)
    ((agg * weights[0]).sum() + (sources[:num_dst] * weights[1]).sum()).backward()
    return agg, x.grad


def ours(function, x, rowptr, src, kind, weights, *hot, relu=False):
    x = x.detach().clone().requires_grad_()
    hot = hot or (None, None)
    agg, root = function(x, rowptr, src, kind, *hot, relu)
    loss = (agg.double() * weights[0]).sum() + (root.double() * weights[1]).sum()
    loss.backward()
    return agg, x.grad


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_forward_and_gradient_match_pyg_scatter(kind, dtype):
    for seed in range(3):
        x, rowptr, src, dst = random_layer(seed)
        x = x.to(dtype)
        weights = loss_weights(seed, rowptr.numel() - 1, x.size(1))
        expected, expected_grad = pyg_reference(x, rowptr, src, dst, kind, weights)
        agg, grad = ours(aggregate_neighbours, x, rowptr, src, kind, weights)
        assert agg.dtype == grad.dtype == dtype
        torch.testing.assert_close(agg.double(), expected, rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(grad.double(), expected_grad, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("function", [aggregate_neighbours, _torch_aggregate])
def test_the_previous_layers_relu_is_applied_with_its_gradient(kind, function):
    # Sources before their relu: negative values, and ties at zero after it.
    for seed in range(3):
        x, rowptr, src, dst = random_layer(seed)
        x = (x - 0.5) * torch.randint(0, 2, x.shape, dtype=x.dtype)
        weights = loss_weights(seed, rowptr.numel() - 1, x.size(1))
        expected, expected_grad = pyg_reference(
            x, rowptr, src, dst, kind, weights, relu=True
        )
        agg, grad = ours(function, x, rowptr, src, kind, weights, relu=True)
        torch.testing.assert_close(agg.double(), expected, rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(grad.double(), expected_grad, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("kind", ["sum", "mean"])
def test_matches_torch_sparse_mm_forward_and_gradient(kind):
    x, rowptr, src, _ = random_layer(7)
    num_dst = rowptr.numel() - 1
    leaf = x.clone().requires_grad_()
    adjacency = torch.sparse_csr_tensor(
        rowptr, src, torch.ones(src.numel()), (num_dst, x.size(0))
    )
    expected = torch.sparse.mm(adjacency, leaf, "sum")
    if kind == "mean":
        expected = expected / rowptr.diff().clamp(min=1).unsqueeze(1)
    grad_out = torch.randn_like(expected)
    expected.backward(grad_out)
    mine = x.clone().requires_grad_()
    agg, _ = aggregate_neighbours(mine, rowptr, src, kind)
    agg.backward(grad_out)
    torch.testing.assert_close(agg, expected.detach())
    torch.testing.assert_close(mine.grad, leaf.grad)


@pytest.mark.parametrize("kind", KINDS)
def test_torch_path_of_other_devices_matches_pyg_on_cpu(kind):
    x, rowptr, src, dst = random_layer(3)
    weights = loss_weights(3, rowptr.numel() - 1, x.size(1))
    expected, expected_grad = pyg_reference(x, rowptr, src, dst, kind, weights)
    agg, grad = ours(_torch_aggregate, x, rowptr, src, kind, weights, None, None)
    torch.testing.assert_close(agg.double(), expected, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(grad.double(), expected_grad, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("function", [aggregate_neighbours, _torch_aggregate])
def test_hot_rows_take_their_given_values_as_constants(function):
    x, rowptr, src, dst = random_layer(5)
    num_dst = rowptr.numel() - 1
    hot_index = torch.tensor([2, 7])
    cold = torch.ones(num_dst, dtype=torch.bool)
    cold[hot_index] = False
    keep = cold[dst]
    cold_src, cold_dst = src[keep], dst[keep]
    cold_rowptr = torch.zeros(num_dst + 1, dtype=torch.long)
    cold_rowptr[1:] = torch.bincount(cold_dst, minlength=num_dst).cumsum(0)
    hot_value = torch.randn(2, x.size(1))
    weights = loss_weights(5, num_dst, x.size(1))
    expected, expected_grad = pyg_reference(
        x, cold_rowptr, cold_src, cold_dst, "mean", weights
    )
    expected[hot_index] = hot_value.double()
    agg, grad = ours(
        function, x, cold_rowptr, cold_src, "mean", weights, hot_index, hot_value
    )
    torch.testing.assert_close(agg.double(), expected, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(grad.double(), expected_grad, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("kind", KINDS)
def test_gradient_does_not_depend_on_the_thread_count(kind):
    x, rowptr, src, _ = random_layer(11, num_src=400, num_dst=150, num_edges=3000)
    x_np = x.numpy()
    out = np.empty((150, x.size(1)), np.float32)
    scatter_out, _ = aggregate_neighbours(x, rowptr, src, kind)
    out[:] = scatter_out.numpy()
    grad_out = np.random.default_rng(0).standard_normal(out.shape, np.float32)
    results = []
    for count in sorted({1, numba.get_num_threads()}):
        with numba_threads(count):
            grad_x = np.full(x_np.shape, np.nan, np.float32)  # every row written
            args = (x_np, out) if kind == "max" else (None, None)
            aggregate_gradient(
                rowptr.numpy(), src.numpy(), grad_out, kind, grad_x, None, *args
            )
            results.append(grad_x)
    assert not np.isnan(results[0]).any()
    np.testing.assert_array_equal(results[0], results[-1])


def test_no_gradient_is_computed_for_features_without_one():
    x, rowptr, src, _ = random_layer(2)
    weight = torch.randn(x.size(1), 3, requires_grad=True)
    agg, _ = aggregate_neighbours(x, rowptr, src, "mean")
    (agg @ weight).sum().backward()
    assert x.grad is None and weight.grad is not None


def test_bad_kind_and_missing_max_inputs_are_refused():
    rowptr, col = np.array([0, 1]), np.array([0])
    grad = np.ones((1, 2), np.float32)
    with pytest.raises(ValueError, match="kind must be"):
        aggregate_gradient(rowptr, col, grad, "gcn", np.empty((1, 2), np.float32))
    with pytest.raises(ValueError, match="needs the forward's sources"):
        aggregate_gradient(rowptr, col, grad, "max", np.empty((1, 2), np.float32))


@settings(max_examples=40, deadline=None)
@given(
    st.integers(1, 30),
    st.integers(1, 30),
    st.integers(0, 120),
    st.integers(1, 40),
    st.sampled_from(KINDS),
    st.booleans(),
    st.integers(0, 2**31 - 1),
)
def test_random_layers_match_pyg(num_src, num_dst, num_edges, width, kind, relu, seed):
    num_dst = min(num_dst, num_src)
    generator = torch.Generator().manual_seed(seed)
    dst = torch.sort(torch.randint(num_dst, (num_edges,), generator=generator))[0]
    src = torch.randint(num_src, (num_edges,), generator=generator)
    # Rounded to a few values: many exact ties for max (and zeros for relu).
    x = torch.randint(-2, 3, (num_src, width), generator=generator).float()
    x = x if relu else x.relu()
    rowptr = torch.zeros(num_dst + 1, dtype=torch.long)
    rowptr[1:] = torch.bincount(dst, minlength=num_dst).cumsum(0)
    weights = loss_weights(seed, num_dst, width)
    expected, expected_grad = pyg_reference(x, rowptr, src, dst, kind, weights, relu)
    agg, grad = ours(aggregate_neighbours, x, rowptr, src, kind, weights, relu=relu)
    torch.testing.assert_close(agg.double(), expected, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(grad.double(), expected_grad, rtol=1e-5, atol=1e-5)


def _bf16_reference(x, rowptr, src, dst, kind, grads, relu):
    # Exact (float64) aggregation and gradient of the same bfloat16 inputs,
    # and of their absolute values: the scale of each sum's rounding error.
    def run(x, grads, absolute):
        x = x.detach().double().requires_grad_()
        sources = torch.relu(x) if relu else x
        sources = sources.abs() if absolute else sources
        num_dst = rowptr.numel() - 1
        agg = scatter(sources[src], dst, dim=0, dim_size=num_dst, reduce=kind)
        torch.autograd.backward([agg, sources[:num_dst]], list(grads))
        return agg, x.grad

    grads = [g.double() for g in grads]
    expected, expected_grad = run(x, grads, absolute=False)
    scale, grad_scale = run(x, [g.abs() for g in grads], absolute=True)
    return expected, expected_grad, scale, grad_scale.abs()


def _within_bf16_rounding(ours, exact, scale):
    # One rounding of a float32 sum to bfloat16 (2**-8 relative at most),
    # plus float32's accumulation error over the sum of absolute terms.
    bound = 2**-8 * exact.abs() + 2**-16 * scale + 1e-30
    excess = (ours.double() - exact).abs() - bound
    assert excess.max() <= 0, f"{excess.max():.3g} past the bound"


@settings(max_examples=60, deadline=None)
@given(
    st.integers(1, 30),
    st.integers(1, 30),
    st.integers(0, 150),
    st.integers(1, 40),
    st.sampled_from(KINDS),
    st.booleans(),
    st.integers(0, 2**31 - 1),
)
def test_bf16_activations_and_gradients_match_float64(
    num_src, num_dst, num_edges, width, kind, relu, seed
):
    # bfloat16 rows that require grad (a bfloat16 step's activations): the
    # aggregation, its own rows and the gradient stay bfloat16, each value
    # within one bfloat16 rounding of the exact one.
    num_dst = min(num_dst, num_src)
    generator = torch.Generator().manual_seed(seed)
    dst = torch.sort(torch.randint(num_dst, (num_edges,), generator=generator))[0]
    src = torch.randint(num_src, (num_edges,), generator=generator)
    x = torch.randn(num_src, width, generator=generator).to(torch.bfloat16)
    rowptr = torch.zeros(num_dst + 1, dtype=torch.long)
    rowptr[1:] = torch.bincount(dst, minlength=num_dst).cumsum(0)
    grads = torch.randn(2, num_dst, width, generator=generator).to(torch.bfloat16)
    leaf = x.clone().requires_grad_()
    agg, root = aggregate_neighbours(leaf, rowptr, src, kind, relu=relu)
    assert agg.dtype == root.dtype == torch.bfloat16
    torch.autograd.backward([agg, root], list(grads))
    assert leaf.grad.dtype == torch.bfloat16
    expected, expected_grad, scale, grad_scale = _bf16_reference(
        x, rowptr, src, dst, kind, grads, relu
    )
    if kind == "max":  # the maximum is one of the inputs: exact
        assert torch.equal(agg.double(), expected)
    _within_bf16_rounding(agg, expected, scale)
    assert torch.equal(root, torch.relu(x[:num_dst]) if relu else x[:num_dst])
    _within_bf16_rounding(leaf.grad, expected_grad, grad_scale)


def test_float32_sums_are_stored_as_bf16_under_bf16_autocast():
    # Features (no grad) of a bfloat16 step: the products read the sums as
    # they are. Outside autocast, the sums stay float32.
    x, rowptr, src, _ = random_layer(0)
    wide, _ = aggregate_neighbours(x, rowptr, src, "mean")
    with torch.autocast("cpu", dtype=torch.bfloat16):
        narrow, root = aggregate_neighbours(x, rowptr, src, "mean")
    assert wide.dtype == torch.float32
    assert narrow.dtype == root.dtype == torch.bfloat16
    assert torch.equal(narrow, wide.to(torch.bfloat16))
