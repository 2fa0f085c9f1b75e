"""Property-based tests: the sampler, the kernels and the hot cache on random
small graphs drawn by hypothesis.

Graphs have 1 to a few dozen nodes, possibly no edges, self loops, duplicate
edges, and an int32 or int64 ``edge_index``; fan-outs include 0 and -1. Every
test is derandomized and keeps no example database, so each run (and CI) sees
the same examples. ``test_fuzz`` runs :data:`FUZZ_EXAMPLES` larger examples
of all properties together; it is marked ``slow`` and prints how many cases it
ran (``pytest -m slow -s``).
"""

from types import SimpleNamespace

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from references import aggregation_reference, assert_aggregation_matches
from torch_geometric.data import Data
from torch_geometric.sampler import NodeSamplerInput
from torch_geometric.sampler.utils import to_csc

from pyg_orch import HotCache, OrchNeighborLoader, OrchNeighborSampler
from pyg_orch.hot.choice import frontier_size
from pyg_orch.kernels.aggregate import (
    AGGREGATIONS,
    aggregate,
    gather_rows,
    gcn_inverse_sqrt_degree,
)

KINDS = sorted(AGGREGATIONS)
#: Examples of the slow fuzz test (4,000 took 142 s on 2 cores; sized so that
#: .ci/run stays under 30 minutes).
FUZZ_EXAMPLES = 2000


def profile(max_examples: int):
    """Reproducible settings: a fixed seed per test and no example database."""
    return settings(
        max_examples=max_examples,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )


# ---------------------------------------------------------------------------
# Strategies


@st.composite
def graphs(draw, max_nodes: int = 12, max_edges: int = 40) -> Data:
    """A random graph: possibly one node, no edges, self loops, duplicates."""
    num_nodes = draw(st.integers(1, max_nodes))
    node = st.integers(0, num_nodes - 1)
    edges = draw(st.lists(st.tuples(node, node), max_size=max_edges))
    if edges and draw(st.booleans()):
        edges += draw(st.lists(st.sampled_from(edges), max_size=max_edges // 4))
    if draw(st.booleans()):
        edges += [(v, v) for v in draw(st.lists(node, max_size=4))]
    edges = draw(st.permutations(edges))
    dtype = draw(st.sampled_from([torch.int64, torch.int32]))
    width = draw(st.sampled_from([1, 3, 16, 17]))
    seed = draw(st.integers(0, 2**32 - 1))
    x = np.random.default_rng(seed).standard_normal((num_nodes, width), np.float32)
    edge_index = torch.tensor(edges, dtype=torch.long).reshape(-1, 2).t()
    return Data(
        x=torch.from_numpy(x),
        edge_index=edge_index.to(dtype).contiguous(),
        num_nodes=num_nodes,
    )


def node_lists(num_nodes: int, min_size: int = 0, max_size: int = 15):
    return st.lists(st.integers(0, num_nodes - 1), min_size=min_size, max_size=max_size)


fanout_lists = st.lists(st.sampled_from([-1, 0, 1, 2, 3, 5, 8]), min_size=1, max_size=3)


@st.composite
def sampling_cases(draw, max_nodes: int = 12, max_edges: int = 40):
    """A graph, seeds (duplicates allowed), fan-outs, replace, hot mask, seed."""
    data = draw(graphs(max_nodes, max_edges))
    seeds = draw(node_lists(data.num_nodes, min_size=1, max_size=8))
    fanouts = draw(fanout_lists)
    replace = draw(st.booleans())
    hot = None
    if draw(st.booleans()):
        hot = torch.tensor(
            draw(
                st.lists(
                    st.booleans(), min_size=data.num_nodes, max_size=data.num_nodes
                )
            )  # fmt: skip
        )
    return data, seeds, fanouts, replace, hot, draw(st.integers(0, 2**31 - 1))


# ---------------------------------------------------------------------------
# Plain references


def in_degree(data: Data) -> torch.Tensor:
    return torch.bincount(data.edge_index[1].long(), minlength=data.num_nodes)


def expected_picks(degree, fanout: int, replace: bool, skip) -> torch.Tensor:
    """Picks per frontier node: min(fanout, degree), fanout with replacement
    (when it has neighbours), the degree for -1, none for a skipped node."""
    if fanout < 0:
        picks = degree.clone()
    elif replace:
        picks = torch.where(degree > 0, fanout, 0)
    else:
        picks = degree.clamp(max=fanout)
    if skip is not None:
        picks[skip] = 0
    return picks


def check_sample(data, seeds, fanouts, replace, hot, out, perm) -> None:
    """Everything a layered sample of ``seeds`` must satisfy."""
    node, row, col = out.node, out.row, out.col
    nodes_per_hop, edges_per_hop = out.num_sampled_nodes, out.num_sampled_edges
    num_seeds = len(seeds)
    # Per-hop counts add up.
    assert len(nodes_per_hop) == len(fanouts) + 1
    assert len(edges_per_hop) == len(fanouts)
    assert nodes_per_hop[0] == num_seeds
    assert sum(nodes_per_hop) == node.numel()
    assert sum(edges_per_hop) == row.numel() == col.numel() == out.edge.numel()
    # Seeds first, as given; every later node once, never a seed.
    assert node[:num_seeds].tolist() == seeds
    later = node[num_seeds:]
    assert later.unique().numel() == later.numel()
    assert not torch.isin(later, torch.tensor(seeds)).any()
    # Every sampled edge exists and e_id names it.
    e_id = out.edge if perm is None else perm[out.edge]
    edge_index = data.edge_index.long()
    assert torch.equal(edge_index[0, e_id], node[row])
    assert torch.equal(edge_index[1, e_id], node[col])

    degree = in_degree(data)
    into = [[] for _ in range(data.num_nodes)]
    for e, v in enumerate(edge_index[1].tolist()):
        into[v].append(e)
    node_bounds = np.cumsum([0, *nodes_per_hop])
    edge_bounds = np.cumsum([0, *edges_per_hop])
    for hop, fanout in enumerate(fanouts):
        lo, hi = node_bounds[hop], node_bounds[hop + 1]
        edges = slice(edge_bounds[hop], edge_bounds[hop + 1])
        src, dst = row[edges], col[edges]
        # Hop h's edges point into hop h's frontier and come from hops <= h+1.
        assert ((dst >= lo) & (dst < hi)).all()
        assert (src < node_bounds[hop + 2]).all()
        # Layered order: hop h+1's new nodes are this hop's sources not seen
        # before, in the order they first appear.
        seen = set(node[:hi].tolist())
        new = []
        for s in node[src].tolist():
            if s not in seen:
                seen.add(s)
                new.append(s)
        assert node[hi : node_bounds[hop + 2]].tolist() == new
        # Exactly the allowed number of picks; hot nodes skip the last hop.
        frontier = node[lo:hi]
        skip = hot[frontier] if hot is not None and hop == len(fanouts) - 1 else None
        picks = torch.bincount(dst - lo, minlength=hi - lo)
        expected = expected_picks(degree[frontier], fanout, replace, skip)
        assert torch.equal(picks, expected)
        if replace:
            continue
        # Without replacement: no edge twice for a destination, and a node
        # that takes all its picks takes every one of its in-edges.
        hop_e_id = e_id[edges]
        for position in range(hi - lo):
            chosen = hop_e_id[dst == lo + position].tolist()
            assert len(set(chosen)) == len(chosen)
            if expected[position] == degree[frontier[position]]:
                assert sorted(chosen) == into[int(frontier[position])]


# ---------------------------------------------------------------------------
# The properties, each a function of one drawn case, shared with the fuzz test


def sampler_property(case) -> None:
    data, seeds, fanouts, replace, hot, seed = case
    sampler = OrchNeighborSampler(data, num_neighbors=fanouts, replace=replace)
    sampler.hot_mask = hot
    torch.manual_seed(seed)
    out = sampler.sample_from_nodes(
        NodeSamplerInput(input_id=None, node=torch.tensor(seeds))
    )
    check_sample(data, seeds, fanouts, replace, hot, out, sampler.perm)


def loader_property(case) -> None:
    data, _, fanouts, replace, hot, seed = case
    data = data.clone()
    data.edge_attr = torch.arange(data.num_edges, dtype=torch.float)
    torch.manual_seed(seed)
    loader = OrchNeighborLoader(
        data,
        num_neighbors=fanouts,
        batch_size=max(1, data.num_nodes // 3),
        shuffle=True,
        replace=replace,
        hot=hot,
    )
    mask = loader.cache.mask if loader.cache is not None else None
    if mask is not None:
        loader.serve("mean")
    inputs = []
    for batch in loader:
        seeds = batch.n_id[: batch.batch_size].tolist()
        check_sample(data, seeds, fanouts, replace, mask, sampler_output(batch), None)
        assert torch.equal(batch.edge_attr, data.edge_attr[batch.e_id])
        assert torch.equal(batch.x, data.x[batch.n_id])
        inputs += seeds
        if mask is not None:
            frontier = batch.n_id[: frontier_size(batch.num_sampled_nodes)]
            assert torch.equal(batch.hot_index, mask[frontier].nonzero().view(-1))
            full = aggregation_reference(data.edge_index, data.x, "mean")
            assert_close_float32(batch.hot_agg, full[batch.n_id[batch.hot_index]])
    assert sorted(inputs) == list(range(data.num_nodes))


def sampler_output(batch) -> SimpleNamespace:
    """A batch seen as a sampler output whose ``edge`` is already ``e_id``."""
    return SimpleNamespace(
        node=batch.n_id,
        row=batch.edge_index[0],
        col=batch.edge_index[1],
        edge=batch.e_id,
        num_sampled_nodes=batch.num_sampled_nodes,
        num_sampled_edges=batch.num_sampled_edges,
    )


def assert_close_float32(actual, expected) -> None:
    torch.testing.assert_close(actual.double(), expected, rtol=1e-5, atol=1e-5)


@st.composite
def aggregation_cases(draw, max_nodes: int = 12, max_edges: int = 40):
    data = draw(graphs(max_nodes, max_edges))
    nodes = draw(node_lists(data.num_nodes))
    return (
        data,
        nodes,
        draw(st.sampled_from(KINDS)),
        draw(st.sampled_from([np.int64, np.int32])),
        draw(st.booleans()),
        draw(st.booleans()),
    )


def aggregation_property(case) -> None:
    data, nodes, kind, nodes_dtype, pyg_csc, precomputed_norm = case
    if pyg_csc:
        # As the loader builds it (int32 colptr and row for int32 edges).
        colptr, row, _ = to_csc(data, device="cpu")
        colptr, row = colptr.numpy(), row.numpy()
    else:
        # Each column's edges in their given order.
        target = data.edge_index[1].long()
        order = torch.sort(target, stable=True).indices
        counts = torch.bincount(target, minlength=data.num_nodes)
        colptr = torch.cat([torch.zeros(1, dtype=torch.long), counts.cumsum(0)])
        colptr, row = colptr.numpy(), data.edge_index[0, order].numpy()
    norm = gcn_inverse_sqrt_degree(colptr, row) if precomputed_norm else None
    nodes = np.array(nodes, dtype=nodes_dtype)
    out = np.full((len(nodes), data.x.size(1)), np.nan, np.float32)
    assert aggregate(colptr, row, data.x.numpy(), nodes, kind, out, norm) is out
    assert_aggregation_matches(out, data.edge_index, data.x, kind, nodes)


@st.composite
def gather_cases(draw):
    num_rows = draw(st.integers(1, 30))
    width = draw(st.integers(1, 20))
    dtype = draw(st.sampled_from([np.float32, np.float64]))
    x = np.random.default_rng(draw(st.integers(0, 2**32 - 1))).standard_normal(
        (num_rows, width)
    )
    index = draw(node_lists(num_rows, max_size=40))
    index_dtype = draw(st.sampled_from([np.int64, np.int32]))
    return x.astype(dtype), np.array(index, dtype=index_dtype)


def gather_property(case) -> None:
    x, index = case
    out = np.full((index.shape[0], x.shape[1]), np.nan, x.dtype)
    assert gather_rows(x, index, out) is out
    np.testing.assert_array_equal(out, x[index])


@st.composite
def resample_cases(draw, max_nodes: int = 12, max_edges: int = 40):
    """A graph and distinct hot nodes in any order, a kind and a seed."""
    data = draw(graphs(max_nodes, max_edges))
    hot = draw(st.lists(st.integers(0, data.num_nodes - 1), unique=True, max_size=12))
    kind = draw(st.sampled_from(["mean", "sum", "max"]))
    return data, hot, kind, draw(st.integers(0, 2**62))


def resample_property(case) -> None:
    data, hot, kind, seed = case
    colptr, row, _ = to_csc(data, device="cpu")
    cache = HotCache(colptr, row, data.x, torch.tensor(hot, dtype=torch.long))
    cache.kind = kind
    static = cache.values()
    assert_aggregation_matches(static, data.edge_index, data.x, kind, hot)
    # All neighbours, or a fan-out no node exceeds: the full aggregation.
    torch.testing.assert_close(cache.resample(-1, seed), static)
    max_degree = int(in_degree(data).max()) if data.num_edges else 0
    torch.testing.assert_close(cache.resample(max(max_degree, 1), seed), static)


# ---------------------------------------------------------------------------
# The tests


@profile(max_examples=600)
@given(sampling_cases())
def test_sampler_returns_a_valid_layered_sample(case):
    sampler_property(case)


@profile(max_examples=150)
@given(sampling_cases())
def test_loader_batches_are_valid_with_hot_masks(case):
    loader_property(case)


@profile(max_examples=400)
@given(aggregation_cases())
def test_every_aggregation_kind_matches_plain_torch(case):
    aggregation_property(case)


@profile(max_examples=300)
@given(gather_cases())
def test_gather_rows_equals_indexing(case):
    gather_property(case)


@profile(max_examples=300)
@given(resample_cases())
def test_full_resample_equals_the_static_aggregation(case):
    resample_property(case)


@profile(max_examples=100)
@given(graphs(), st.sampled_from(KINDS))
def test_gcn_resample_is_refused_and_static_gcn_matches(data, kind):
    colptr, row, _ = to_csc(data, device="cpu")
    cache = HotCache(colptr, row, data.x, torch.arange(data.num_nodes))
    cache.kind = "gcn"
    with pytest.raises(NotImplementedError, match="static"):
        cache.resample(-1, 0)
    assert_aggregation_matches(
        cache.values(kind), data.edge_index, data.x, kind, range(data.num_nodes)
    )


@st.composite
def fuzz_cases(draw):
    """One case of one property, on larger graphs than the quick tests."""
    which = draw(st.sampled_from(["sampler", "loader", "aggregate", "gather",
                                  "resample"]))  # fmt: skip
    strategy = {
        "sampler": sampling_cases(max_nodes=40, max_edges=200),
        "loader": sampling_cases(max_nodes=40, max_edges=200),
        "aggregate": aggregation_cases(max_nodes=40, max_edges=200),
        "gather": gather_cases(),
        "resample": resample_cases(max_nodes=40, max_edges=200),
    }[which]
    return which, draw(strategy)


PROPERTIES = {
    "sampler": sampler_property,
    "loader": loader_property,
    "aggregate": aggregation_property,
    "gather": gather_property,
    "resample": resample_property,
}


@pytest.mark.slow
def test_fuzz():
    counts = dict.fromkeys(PROPERTIES, 0)

    @profile(max_examples=FUZZ_EXAMPLES)
    @given(fuzz_cases())
    def run(case):
        which, drawn = case
        counts[which] += 1
        PROPERTIES[which](drawn)

    run()
    total = sum(counts.values())
    detail = ", ".join(f"{name} {count}" for name, count in counts.items())
    print(f"fuzz cases: {total} ({detail})")
    assert total >= FUZZ_EXAMPLES // 2
