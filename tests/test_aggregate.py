"""The aggregation kernels against PyG's own aggregations on the whole graph."""

import multiprocessing
from importlib.metadata import PackageNotFoundError, version

import numba
import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch_geometric.data import Data
from torch_geometric.nn.conv.gcn_conv import gcn_norm
from torch_geometric.sampler.utils import to_csc
from torch_geometric.utils import scatter

from pyg_orch.kernels.aggregate import (
    AGGREGATIONS,
    aggregate,
    gather_rows,
    gcn_inverse_sqrt_degree,
)
from pyg_orch.kernels.half_width import narrow_row
from pyg_orch.kernels.threading_layer import numba_threads

KINDS = sorted(AGGREGATIONS)
# Relative to the same aggregation of |x|: the natural scale of a rounding
# error in a float32 sum (see the module docstring).
TOLERANCE = 1e-5


def skewed_graph(num_nodes: int, num_edges: int, seed: int) -> torch.Tensor:
    """``edge_index`` with a hub, isolated nodes, self loops and duplicates."""
    generator = torch.Generator().manual_seed(seed)
    # The last tenth of the nodes never receive or send an edge.
    active = num_nodes - num_nodes // 10
    weights = torch.arange(1, active + 1, dtype=torch.float).pow(-1.2)
    dst = torch.multinomial(weights, num_edges, replacement=True, generator=generator)
    src = torch.randint(active, (num_edges,), generator=generator)
    hub = torch.randint(active, (1,), generator=generator)
    dst[: num_edges // 4] = hub  # a quarter of all edges point at one hub
    loops = torch.arange(0, active, 7)
    extra = torch.stack([torch.cat([loops, loops[:5]]), torch.cat([loops, loops[:5]])])
    edge_index = torch.cat([torch.stack([src, dst]), extra, extra[:, :3]], dim=1)
    order = torch.randperm(edge_index.size(1), generator=generator)
    return edge_index[:, order]


def csc(edge_index: torch.Tensor, num_nodes: int, row_dtype) -> tuple:
    """CSC of ``edge_index`` keeping each column's edges in their given order."""
    order = torch.sort(edge_index[1], stable=True).indices
    counts = torch.bincount(edge_index[1], minlength=num_nodes)
    colptr = torch.cat([torch.zeros(1, dtype=torch.long), counts.cumsum(0)])
    row = edge_index[0, order].numpy().astype(row_dtype)
    return colptr.numpy(), row


def reference(edge_index: torch.Tensor, x: torch.Tensor, kind: str) -> torch.Tensor:
    """PyG's aggregation of ``x`` (in float64) for every node of the graph."""
    x = x.double()
    num_nodes = x.size(0)
    if kind == "gcn":
        edge_index, weight = gcn_norm(
            edge_index, None, num_nodes, improved=False, dtype=torch.float64
        )
        message = x[edge_index[0]] * weight.unsqueeze(1)
        return scatter(message, edge_index[1], 0, dim_size=num_nodes, reduce="sum")
    return scatter(x[edge_index[0]], edge_index[1], 0, dim_size=num_nodes, reduce=kind)


def run(colptr, row, x, nodes, kind, norm=None) -> np.ndarray:
    out = np.full((len(nodes), x.shape[1]), np.nan, np.float32)
    assert aggregate(colptr, row, x, nodes, kind, out, norm) is out
    return out


def assert_matches(out, edge_index, x, kind, nodes) -> None:
    nodes = torch.as_tensor(nodes, dtype=torch.long)
    expected = reference(edge_index, x, kind)[nodes]
    out = torch.from_numpy(out).double()
    if kind == "max":
        # No rounding in a maximum: exact.
        torch.testing.assert_close(out, expected, rtol=0, atol=0)
        return
    scale = reference(edge_index, x.abs(), kind)[nodes]
    excess = (out - expected).abs() - (TOLERANCE * scale + 1e-7)
    assert (excess <= 0).all(), f"{kind}: error over tolerance by {excess.max():.3g}"


@pytest.fixture(scope="module")
def graph():
    num_nodes = 400
    edge_index = skewed_graph(num_nodes, 6000, seed=1)
    # 37 features: the vector loop's remainder path runs too.
    x = torch.randn(num_nodes, 37, generator=torch.Generator().manual_seed(2))
    return edge_index, x


def test_the_test_graph_has_every_awkward_feature(graph):
    edge_index, x = graph
    in_degree = torch.bincount(edge_index[1], minlength=x.size(0))
    assert (in_degree == 0).sum() >= 40
    assert in_degree.max() >= 1500
    assert (edge_index[0] == edge_index[1]).sum() > 0
    assert torch.unique(edge_index, dim=1).size(1) < edge_index.size(1)


@pytest.mark.parametrize("row_dtype", [np.int32, np.int64])
@pytest.mark.parametrize("kind", KINDS)
def test_every_node_matches_pyg_on_the_whole_graph(graph, kind, row_dtype):
    edge_index, x = graph
    colptr, row = csc(edge_index, x.size(0), row_dtype)
    nodes = np.arange(x.size(0))
    out = run(colptr, row, x.numpy(), nodes, kind)
    assert_matches(out, edge_index, x, kind, nodes)


@pytest.mark.parametrize("kind", KINDS)
def test_node_subsets_unsorted_repeated_and_empty(graph, kind):
    edge_index, x = graph
    colptr, row = csc(edge_index, x.size(0), np.int64)
    hub = int(torch.bincount(edge_index[1]).argmax())
    rng = np.random.default_rng(3)
    nodes = np.concatenate([rng.integers(0, x.size(0), 150), [hub, hub, 399, 0]])
    norm = gcn_inverse_sqrt_degree(colptr, row)
    for subset in (nodes, nodes[::-1].copy(), nodes.astype(np.int32), nodes[:0]):
        out = run(colptr, row, x.numpy(), subset, kind, norm)
        assert out.shape == (len(subset), x.size(1))
        assert_matches(out, edge_index, x, kind, subset)


@pytest.mark.parametrize("kind", KINDS)
def test_pyg_built_csc_is_accepted_as_is(kind):
    generator = torch.Generator().manual_seed(4)
    num_nodes = 300
    edge_index = torch.randint(num_nodes - 20, (2, 3000), generator=generator)
    edge_index = torch.cat([edge_index, edge_index[:, :50]], dim=1)  # duplicates
    x = torch.randn(num_nodes, 16, generator=generator)
    colptr, row, _ = to_csc(Data(x=x, edge_index=edge_index), device="cpu")
    out = run(colptr.numpy(), row.numpy(), x.numpy(), np.arange(num_nodes), kind)
    assert_matches(out, edge_index, x, kind, np.arange(num_nodes))


def test_gcn_inverse_sqrt_degree_is_gcn_norms_degree(graph):
    edge_index, x = graph
    colptr, row = csc(edge_index, x.size(0), np.int32)
    loops, weight = gcn_norm(edge_index, None, x.size(0))
    degree = scatter(torch.ones_like(weight), loops[1], 0, dim_size=x.size(0))
    scale = gcn_inverse_sqrt_degree(colptr, row)
    assert scale.dtype == np.float32
    torch.testing.assert_close(torch.from_numpy(scale), degree.pow(-0.5))


def test_results_do_not_depend_on_the_thread_count(graph):
    edge_index, x = graph
    colptr, row = csc(edge_index, x.size(0), np.int64)
    nodes = np.arange(x.size(0))[::-1].copy()
    results = {}
    for threads in {1, numba.config.NUMBA_NUM_THREADS}:
        with numba_threads(threads):
            results[threads] = [run(colptr, row, x.numpy(), nodes, k) for k in KINDS]
    first, *others = results.values()
    for other in others:
        for a, b in zip(first, other, strict=True):
            np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("index_dtype", [np.int32, np.int64])
def test_gather_rows_equals_indexing(index_dtype):
    x = torch.randn(500, 37, generator=torch.Generator().manual_seed(5)).numpy()
    index = np.random.default_rng(6).integers(0, 500, 1000).astype(index_dtype)
    for subset in (index, index[:0]):
        out = np.empty((len(subset), 37), np.float32)
        assert gather_rows(x, subset, out) is out
        np.testing.assert_array_equal(out, x[subset])


def test_writes_into_a_tensors_buffer():
    x = torch.randn(50, 8)
    out = torch.empty(3, 8)
    gather_rows(x.numpy(), np.array([4, 0, 4]), out.numpy())
    torch.testing.assert_close(out, x[[4, 0, 4]], rtol=0, atol=0)


def test_bad_arguments_are_refused(graph):
    edge_index, x = graph
    colptr, row = csc(edge_index, x.size(0), np.int64)
    xs, nodes = x.numpy(), np.arange(3)
    out = np.empty((3, x.size(1)), np.float32)
    with pytest.raises(ValueError, match="kind"):
        aggregate(colptr, row, xs, nodes, "min", out)
    with pytest.raises(ValueError, match="float32"):
        aggregate(colptr, row, xs.astype(np.float16), nodes, "sum", out)
    with pytest.raises(ValueError, match="out"):
        aggregate(colptr, row, xs, nodes, "sum", out[:2])
    with pytest.raises(ValueError, match="nodes"):
        aggregate(colptr, row, xs, np.array([x.size(0)]), "sum", out[:1])
    with pytest.raises(ValueError, match="x must be C-contiguous"):
        aggregate(colptr, row, xs[:, ::2], nodes, "sum", out)
    with pytest.raises(ValueError, match="row"):
        aggregate(colptr, row.astype(np.float32), xs, nodes, "sum", out)
    with pytest.raises(ValueError, match="gcn_norm"):
        aggregate(colptr, row, xs, nodes, "gcn", out, np.ones(3, np.float32))
    with pytest.raises(ValueError, match="index"):
        gather_rows(xs, np.array([-1]), out[:1])


@pytest.mark.parametrize("kind", ["sum", "mean"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, "bfloat16"])
def test_relu_is_applied_to_the_rows_as_they_are_read(graph, kind, dtype):
    edge_index, x = graph
    x = x.clone()
    x[::3, ::2] = float("nan")  # torch.relu keeps NaN
    colptr, row = csc(edge_index, x.size(0), np.int64)
    if dtype == "bfloat16":
        x = x.bfloat16()
        rows, sum_dtype = x.view(torch.uint16).numpy(), np.float32
    else:
        rows, sum_dtype = x.numpy().astype(dtype), dtype
    nodes = np.arange(x.size(0))
    out = np.empty((len(nodes), x.size(1)), sum_dtype)
    aggregate(colptr, row, rows, nodes, kind, out, relu=True)
    expected = reference(edge_index, torch.relu(x.double()), kind)
    torch.testing.assert_close(
        torch.from_numpy(out).double(), expected, rtol=1e-5, atol=1e-5, equal_nan=True
    )


@pytest.mark.parametrize("kind", ["max", "gcn"])
def test_relu_is_refused_for_max_and_gcn(graph, kind):
    edge_index, x = graph
    colptr, row = csc(edge_index, x.size(0), np.int64)
    out = np.empty((3, x.size(1)), np.float32)
    with pytest.raises(ValueError, match="relu=True: for kind 'sum' or 'mean' only"):
        aggregate(colptr, row, x.numpy(), np.arange(3), kind, out, relu=True)


@st.composite
def small_graphs(draw):
    num_nodes = draw(st.integers(1, 12))
    node = st.integers(0, num_nodes - 1)
    edges = draw(st.lists(st.tuples(node, node), max_size=40))
    nodes = draw(st.lists(node, max_size=15))
    width = draw(st.sampled_from([1, 3, 16, 17]))
    seed = draw(st.integers(0, 2**32 - 1))
    return num_nodes, edges, nodes, width, seed


@settings(max_examples=60, deadline=None)
@given(small_graphs(), st.sampled_from(KINDS), st.sampled_from([np.int32, np.int64]))
def test_small_random_graphs_match_pyg(example, kind, row_dtype):
    num_nodes, edges, nodes, width, seed = example
    edge_index = torch.tensor(edges, dtype=torch.long).reshape(-1, 2).t()
    x = torch.from_numpy(
        np.random.default_rng(seed).standard_normal((num_nodes, width), np.float32)
    )
    colptr, row = csc(edge_index, num_nodes, row_dtype)
    nodes = np.array(nodes, dtype=np.int64)
    out = run(colptr, row, x.numpy(), nodes, kind)
    assert_matches(out, edge_index, x, kind, nodes)


def _aggregate_in_child(args) -> np.ndarray:
    return run(*args)


def test_a_forked_worker_can_run_the_parallel_kernel(graph):
    # DataLoader workers fork after the parent used the kernels; GNU OpenMP
    # crashes there, TBB does not.
    try:
        version("tbb")
    except PackageNotFoundError:
        pytest.skip("the tbb package (fork-safe threading layer) is not installed")
    edge_index, x = graph
    colptr, row = csc(edge_index, x.size(0), np.int64)
    args = (colptr, row, x.numpy(), np.arange(50), "mean")
    expected = run(*args)
    assert numba.threading_layer() == "tbb"
    with multiprocessing.get_context("fork").Pool(1) as pool:
        result = pool.apply_async(_aggregate_in_child, (args,)).get(timeout=120)
    np.testing.assert_array_equal(result, expected)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(
    "dtype, bits",
    [
        (torch.bfloat16, torch.uint16),
        # Its kernels compile for 11 s: with the slow tests.
        pytest.param(torch.float16, torch.int16, marks=pytest.mark.slow),
    ],
)
def test_half_width_bits_aggregate_like_their_float32_values(kind, dtype, bits):
    # The kernel widens each value as it reads it and sums in the same order:
    # bit for bit what it computes from the same values stored in float32.
    edge_index = skewed_graph(300, 3000, seed=4)
    colptr, row = csc(edge_index, 300, np.int64)
    x = torch.randn(300, 37, generator=torch.Generator().manual_seed(4)).to(dtype)
    nodes = np.arange(300)
    half = np.empty((300, 37), np.float32)
    aggregate(colptr, row, x.view(bits).numpy(), nodes, kind, half)
    wide = np.empty((300, 37), np.float32)
    aggregate(colptr, row, x.float().numpy(), nodes, kind, wide)
    np.testing.assert_array_equal(half, wide)
    assert_matches(half, edge_index, x.float(), kind, nodes)


def test_other_feature_dtypes_are_refused_with_the_half_width_hint():
    colptr, row = np.array([0, 1]), np.array([0])
    with pytest.raises(ValueError, match=r"x.view\(torch.uint16\)"):
        aggregate(colptr, row, np.ones((1, 2), np.int32), np.array([0]), "sum",
                  np.empty((1, 2), np.float32))  # fmt: skip


def test_bf16_rounding_is_torchs_bit_for_bit():
    # Every float32 bit pattern class: random words (normals, subnormals,
    # infinities, NaNs), exact ties, and the largest values that round up.
    generator = np.random.default_rng(0)
    words = generator.integers(0, 2**32, 200_000, dtype=np.uint64).astype(np.uint32)
    ties = (generator.integers(0, 2**16, 1000, dtype=np.uint32) << 16) | 0x8000
    edges = np.array([0x7F7FFFFF, 0x7F7F8000, 0xFF7FFFFF, 0x00008000, 0x80000001],
                     np.uint32)  # fmt: skip
    row = np.concatenate([words, ties, edges]).view(np.float32)
    bits = np.empty(row.shape, np.uint16)
    narrow_row(row, bits)
    ours = torch.from_numpy(bits).view(torch.bfloat16)
    expected = torch.from_numpy(row).to(torch.bfloat16)
    nan = torch.isnan(expected)
    assert torch.equal(torch.isnan(ours), nan)
    assert torch.equal(ours[~nan].view(torch.int16), expected[~nan].view(torch.int16))


@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("first", [True, False])
def test_max_passes_a_nan_on_in_any_edge_order(weighted, first):
    # torch's amax (PyG's scatter max) gives NaN to every node that reads a
    # NaN, whether it comes first or last among the node's in-edges.
    x = torch.tensor([[1.0, float("nan")], [2.0, 0.5], [float("nan"), 3.0]])
    edge_index = torch.tensor([[0, 1, 2, 1], [1, 2, 0, 0]])
    if not first:
        edge_index = edge_index.flip(1)
    weight = torch.tensor([0.5, 2.0, 1.0, 3.0])
    colptr, row = csc(edge_index, 3, np.int64)
    order = torch.sort(edge_index[1], stable=True).indices
    out = np.empty((3, 2), np.float32)
    aggregate(colptr, row, x.numpy(), np.arange(3), "max", out,
              edge_weight=weight[order].numpy() if weighted else None)  # fmt: skip
    message = x[edge_index[0]] * (weight.view(-1, 1) if weighted else 1)
    expected = scatter(message, edge_index[1], 0, dim_size=3, reduce="max")
    torch.testing.assert_close(torch.from_numpy(out), expected, equal_nan=True)
