"""The Numba sampler against the graph, PyG's conventions and exact references."""

import numpy as np
import pytest
import torch
from conftest import random_graph
from scipy.stats import chisquare
from torch_geometric.data import Data
from torch_geometric.nn import GraphSAGE
from torch_geometric.sampler import NodeSamplerInput

from pyg_orch import OrchNeighborLoader, OrchNeighborSampler
from pyg_orch.kernels.sample import (
    _pick_parallel,
    _pick_serial,
    _sample_layers,
)


def edge_keys(edge_index: torch.Tensor, num_nodes: int) -> torch.Tensor:
    return edge_index[0].long() * num_nodes + edge_index[1].long()


def in_degree(data: Data) -> torch.Tensor:
    return torch.bincount(data.edge_index[1].long(), minlength=data.num_nodes)


def check_batch(
    batch: Data,
    data: Data,
    fanouts: list[int],
    replace: bool = False,
    hot: torch.Tensor | None = None,
):
    """Asserts everything a valid layered NeighborLoader batch must satisfy.

    ``hot`` marks nodes the last hop must not expand.
    """
    n_id, local = batch.n_id, batch.edge_index
    nodes_per_hop, edges_per_hop = batch.num_sampled_nodes, batch.num_sampled_edges
    assert len(nodes_per_hop) == len(fanouts) + 1
    assert len(edges_per_hop) == len(fanouts)
    assert sum(nodes_per_hop) == n_id.numel() == batch.num_nodes
    assert sum(edges_per_hop) == local.size(1)

    # Every sampled edge exists in the graph, and e_id names that very edge.
    sampled = torch.stack([n_id[local[0]], n_id[local[1]]])
    assert torch.isin(
        edge_keys(sampled, data.num_nodes), edge_keys(data.edge_index, data.num_nodes)
    ).all()
    assert torch.equal(data.edge_index[:, batch.e_id].long(), sampled)
    if data.edge_attr is not None:
        assert torch.equal(batch.edge_attr, data.edge_attr[batch.e_id])

    # Nodes past the seeds appear once, each in the hop that found it first.
    assert n_id[batch.batch_size :].unique().numel() == n_id.numel() - batch.batch_size
    assert not torch.isin(n_id[batch.batch_size :], n_id[: batch.batch_size]).any()

    node_bounds = np.cumsum([0, *nodes_per_hop])
    edge_bounds = np.cumsum([0, *edges_per_hop])
    degree = in_degree(data)
    for hop, fanout in enumerate(fanouts):
        src, dst = local[:, edge_bounds[hop] : edge_bounds[hop + 1]]
        # Hop h's edges point into hop h-1's nodes and come from hops <= h.
        assert ((dst >= node_bounds[hop]) & (dst < node_bounds[hop + 1])).all()
        assert (src < node_bounds[hop + 2]).all()
        if nodes_per_hop[hop + 1] > 0:
            found = torch.zeros(n_id.numel(), dtype=torch.bool)
            found[src] = True
            assert found[node_bounds[hop + 1] : node_bounds[hop + 2]].all()
        # Each destination gets exactly as many picks as the fan-out allows.
        frontier = torch.arange(node_bounds[hop], node_bounds[hop + 1])
        picks = torch.bincount(dst - node_bounds[hop], minlength=frontier.numel())
        frontier_degree = degree[n_id[frontier]]
        if fanout < 0:
            expected = frontier_degree
        elif replace:
            expected = torch.where(frontier_degree > 0, fanout, 0)
        else:
            expected = frontier_degree.clamp(max=fanout)
        if hot is not None and hop == len(fanouts) - 1:
            expected[hot[n_id[frontier]]] = 0
        assert torch.equal(picks, expected)
        if not replace:
            keys = batch.e_id[edge_bounds[hop] : edge_bounds[hop + 1]] * n_id.numel()
            assert (keys + dst).unique().numel() == dst.numel()


@pytest.mark.parametrize("replace", [False, True])
@pytest.mark.parametrize("fanouts", [[5, 3], [15, 10, 5], [-1, 2], [0, 4], [3, 0]])
def test_batches_are_valid_on_random_graphs(fanouts, replace):
    data = random_graph(500, 4000, seed=len(fanouts) + replace)
    loader = OrchNeighborLoader(
        data, num_neighbors=fanouts, batch_size=37, shuffle=True, replace=replace
    )
    for batch in loader:
        check_batch(batch, data, fanouts, replace)


def test_batches_are_valid_on_cora(cora):
    fanouts = [15, 10, 5]
    loader = OrchNeighborLoader(
        cora, num_neighbors=fanouts, input_nodes=cora.train_mask, batch_size=32
    )
    cora = cora.clone()
    cora.edge_attr = torch.arange(cora.num_edges, dtype=torch.float)
    loader.data = cora
    batches = list(loader)
    assert sum(b.batch_size for b in batches) == int(cora.train_mask.sum())
    for batch in batches:
        check_batch(batch, cora, fanouts)
        assert torch.equal(batch.x, cora.x[batch.n_id])


def reference_full_neighbourhood(data: Data, seeds: list[int], hops: int):
    """Plain-Python breadth-first sampling with fan-out -1, in PyG's order."""
    neighbours: dict[int, list[int]] = {}
    for src, dst in data.edge_index.t().tolist():
        neighbours.setdefault(dst, []).append(src)
    order, local = list(seeds), {}
    for position, node in enumerate(seeds):
        local.setdefault(node, position)
    edges, begin = set(), 0
    for _ in range(hops):
        end = len(order)
        for dst_position in range(begin, end):
            for src in neighbours.get(order[dst_position], []):
                if src not in local:
                    local[src] = len(order)
                    order.append(src)
                edges.add((src, order[dst_position]))
        begin = end
    return order, edges


def test_all_neighbours_match_a_plain_reference():
    data = random_graph(300, 1500, seed=3)
    seeds = torch.tensor([5, 17, 5, 250, 0])
    sampler = OrchNeighborSampler(data, num_neighbors=[-1, -1])
    out = sampler.sample_from_nodes(NodeSamplerInput(input_id=None, node=seeds))
    order, edges = reference_full_neighbourhood(data, seeds.tolist(), hops=2)
    assert set(out.node.tolist()) == set(order)
    assert out.node[:5].tolist() == seeds.tolist()
    sampled = set(
        zip(out.node[out.row].tolist(), out.node[out.col].tolist(), strict=True)
    )
    # Duplicate seeds are sampled once per position, as pyg-lib does.
    assert sampled == edges


def star_graph(degree: int) -> Data:
    """Node 0 with ``degree`` in-neighbours 1..degree."""
    edge_index = torch.stack([torch.arange(1, degree + 1), torch.zeros(degree).long()])
    return Data(edge_index=edge_index, num_nodes=degree + 1)


def pick_counts(data: Data, node: int, fanout: int, replace: bool, rounds: int):
    """How often each in-neighbour of ``node`` is picked over ``rounds`` batches."""
    sampler = OrchNeighborSampler(data, num_neighbors=[fanout], replace=replace)
    counts = torch.zeros(data.num_nodes, dtype=torch.long)
    seed = NodeSamplerInput(input_id=None, node=torch.tensor([node]))
    torch.manual_seed(12345)
    for _ in range(rounds):
        out = sampler.sample_from_nodes(seed)
        counts += torch.bincount(out.node[out.row], minlength=data.num_nodes)
    return counts[data.edge_index[0, data.edge_index[1] == node]]


def assert_uniform(counts: torch.Tensor, picks: int) -> None:
    assert counts.sum() == picks
    expected = np.full(counts.numel(), picks / counts.numel())
    assert chisquare(counts.numpy(), expected).pvalue > 1e-3


@pytest.mark.parametrize(
    "degree,fanout,replace",
    [(50, 5, False), (50, 40, False), (1000, 15, False), (30, 10, True)],
)
def test_picks_are_uniform(degree, fanout, replace):
    # (50, 5) runs Floyd's algorithm, (50, 40) selection sampling.
    counts = pick_counts(star_graph(degree), 0, fanout, replace, rounds=4000)
    assert_uniform(counts, 4000 * fanout)


def test_picks_are_uniform_on_coras_hub(cora):
    hub = int(torch.bincount(cora.edge_index[1]).argmax())
    counts = pick_counts(cora, hub, fanout=10, replace=False, rounds=3000)
    assert_uniform(counts, 3000 * 10)


def test_pick_test_detects_a_biased_sampler():
    # The chi-square test above must be able to fail: move a fifth of the picks
    # of the last ten neighbours to the first ten, as a biased sampler would.
    counts = pick_counts(star_graph(50), 0, 5, False, rounds=4000)
    counts[:10] += 80
    counts[-10:] -= 80
    with pytest.raises(AssertionError):
        assert_uniform(counts, 4000 * 5)


def test_trim_to_layer_equals_untrimmed_output(cora):
    torch.manual_seed(0)
    loader = OrchNeighborLoader(cora, num_neighbors=[10, 5, 3], batch_size=64)
    model = GraphSAGE(cora.num_features, 32, num_layers=3, out_channels=7).eval()
    for batch in list(loader)[:5]:
        full = model(batch.x, batch.edge_index)[: batch.batch_size]
        trimmed = model(
            batch.x,
            batch.edge_index,
            num_sampled_nodes_per_hop=batch.num_sampled_nodes,
            num_sampled_edges_per_hop=batch.num_sampled_edges,
        )[: batch.batch_size]
        assert torch.allclose(full, trimmed, atol=1e-5)


def batch_tensors(loader) -> list[tuple[torch.Tensor, ...]]:
    return [(b.n_id, b.edge_index, b.e_id, b.input_id) for b in loader]


def test_same_seed_gives_same_batches():
    data = random_graph(400, 3000, seed=1)
    loader = OrchNeighborLoader(data, num_neighbors=[6, 4], batch_size=50, shuffle=True)
    torch.manual_seed(7)
    first = batch_tensors(loader)
    torch.manual_seed(7)
    second = batch_tensors(loader)
    torch.manual_seed(8)
    other = batch_tensors(loader)
    for a, b in zip(first, second, strict=True):
        assert all(torch.equal(x, y) for x, y in zip(a, b, strict=True))
    assert not all(torch.equal(a[0], c[0]) for a, c in zip(first, other, strict=True))


@pytest.mark.parametrize("filter_per_worker", [True, False])
def test_worker_processes_give_valid_batches(filter_per_worker):
    data = random_graph(400, 3000, seed=2)
    fanouts = [5, 3]
    loader = OrchNeighborLoader(
        data,
        num_neighbors=fanouts,
        batch_size=40,
        shuffle=True,
        num_workers=2,
        filter_per_worker=filter_per_worker,
    )
    seen = []
    for batch in loader:
        check_batch(batch, data, fanouts)
        seen.append(batch.n_id[: batch.batch_size])
    assert torch.equal(torch.cat(seen).sort().values, torch.arange(data.num_nodes))


def test_int32_edge_index_and_bidirectional_subgraphs():
    data = random_graph(200, 1000, seed=4)
    data.edge_index = data.edge_index.int()
    loader = OrchNeighborLoader(data, num_neighbors=[4, 2], batch_size=20)
    for batch in loader:
        check_batch(batch, data, [4, 2])
    symmetric = random_graph(200, 1000, seed=5)
    symmetric.edge_index = torch.cat(
        [symmetric.edge_index, symmetric.edge_index.flip(0)], dim=1
    ).unique(dim=1)
    symmetric.edge_attr = None
    loader = OrchNeighborLoader(
        symmetric, num_neighbors=[3, 2], batch_size=20, subgraph_type="bidirectional"
    )
    batch = next(iter(loader))
    keys = edge_keys(batch.edge_index, batch.num_nodes)
    assert torch.isin(edge_keys(batch.edge_index.flip(0), batch.num_nodes), keys).all()


def test_kernel_is_cached_and_releases_the_gil():
    for kernel in (_sample_layers, _pick_parallel, _pick_serial):
        assert kernel.targetoptions["nogil"] is True
        assert kernel._cache.__class__.__name__ == "FunctionCache"
    assert _pick_parallel.targetoptions["parallel"]


def test_induced_subgraphs_hold_every_edge_among_the_sampled_nodes():
    data = random_graph(150, 900, seed=9)
    loader = OrchNeighborLoader(
        data, [3, 2], input_nodes=torch.tensor([4, 60, 7]), subgraph_type="induced"
    )
    batch = next(iter(loader))
    sampled = set(batch.n_id.tolist())
    expected = {
        (src, dst)
        for src, dst in data.edge_index.t().tolist()
        if src in sampled and dst in sampled
    }
    found = batch.n_id[batch.edge_index]
    assert set(zip(*found.tolist(), strict=True)) == expected
    assert found.size(1) == len(expected)
    assert torch.equal(data.edge_index[:, batch.e_id], found)
    assert "num_sampled_nodes" not in batch  # no per-hop counts, as in PyG


def test_prefetch_is_a_hint_that_changes_nothing():
    from numba import njit

    from pyg_orch.kernels.prefetch import prefetch

    @njit
    def total(values, index):
        result = 0
        for i in range(index.shape[0]):
            prefetch(values, index[(i + 1) % index.shape[0]])
            result += values[index[i]]
        return result

    values = np.arange(1000, dtype=np.int64)
    index = np.array([5, 999, 0, 17])
    assert total(values, index) == values[index].sum()
