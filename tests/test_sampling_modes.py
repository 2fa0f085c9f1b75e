"""Heterogeneous, weighted, temporal and disjoint sampling against references.

Distributions are checked with chi-square tests against plain torch (weighted
picks) or a plain filter of the graph (temporal ones); full neighbourhoods
(fan-out -1) against plain-Python searches and plain PyG on the whole graph.
"""

import numba
import numpy as np
import pytest
import torch
from conftest import random_graph
from scipy.stats import chi2_contingency, chisquare
from test_sampling import reference_full_neighbourhood
from torch_geometric.data import Data, HeteroData
from torch_geometric.nn import SAGEConv, to_hetero
from torch_geometric.sampler import NodeSamplerInput

from pyg_orch import OrchLinkNeighborLoader, OrchNeighborLoader, OrchNeighborSampler
from pyg_orch.kernels import threading_layer

ROUNDS = 3000


def star(degree: int, **attributes: torch.Tensor) -> Data:
    """Node 0 with in-neighbours 1..degree (edge i from node i + 1)."""
    edge_index = torch.stack([torch.arange(1, degree + 1), torch.zeros(degree).long()])
    return Data(edge_index=edge_index, num_nodes=degree + 1, **attributes)


def picked(sampler: OrchNeighborSampler, rounds: int, **seed_input) -> torch.Tensor:
    """How often each node is picked as a neighbour of node 0."""
    counts = torch.zeros(sampler.num_nodes, dtype=torch.long)
    seed = NodeSamplerInput(input_id=None, node=torch.tensor([0]), **seed_input)
    torch.manual_seed(0)
    for _ in range(rounds):
        out = sampler.sample_from_nodes(seed)
        counts += torch.bincount(out.node[out.row], minlength=sampler.num_nodes)
    return counts


def test_weighted_picks_without_replacement_match_torch_multinomial():
    weight = torch.tensor([8.0, 4.0, 2.0, 1.0, 1.0, 0.5, 0.5, 3.0])
    sampler = OrchNeighborSampler(star(8, weight=weight), [3], weight_attr="weight")
    ours = picked(sampler, ROUNDS)[1:]
    torch.manual_seed(1)
    reference = torch.zeros(8, dtype=torch.long)
    for _ in range(ROUNDS):
        reference[torch.multinomial(weight, 3, replacement=False)] += 1
    assert ours.sum() == reference.sum() == 3 * ROUNDS
    assert chi2_contingency(np.stack([ours, reference])).pvalue > 1e-3


def test_weighted_picks_with_replacement_are_proportional():
    weight = torch.tensor([5.0, 1.0, 1.0, 3.0, 0.0])
    data = star(5, weight=weight)
    sampler = OrchNeighborSampler(data, [4], weight_attr="weight", replace=True)
    ours = picked(sampler, ROUNDS)[1:]
    assert ours[4] == 0  # a zero weight is never drawn
    expected = 4 * ROUNDS * weight[:4] / weight.sum()
    assert chisquare(ours[:4].numpy(), expected.numpy()).pvalue > 1e-3


def test_weighted_chi_square_can_fail():
    # The reference test must notice uniform picks where weights differ.
    weight = torch.tensor([8.0, 4.0, 2.0, 1.0, 1.0, 0.5, 0.5, 3.0])
    uniform = picked(OrchNeighborSampler(star(8), [3]), ROUNDS)[1:]
    reference = torch.zeros(8, dtype=torch.long)
    for _ in range(ROUNDS):
        reference[torch.multinomial(weight, 3, replacement=False)] += 1
    assert chi2_contingency(np.stack([uniform, reference])).pvalue < 1e-6


def multinomial_refuses(graph, fanouts, replace):
    """The first node whose in-edge weights torch.multinomial refuses to draw.

    A node is drawn from by weight unless its in-edges are all taken (fan-out
    -1, or at least its in-degree without replacement).
    """
    for k in fanouts:
        for node in range(graph.num_nodes):
            weight = graph.w[graph.edge_index[1] == node]
            if k <= 0 or weight.numel() == 0 or (not replace and k >= weight.numel()):
                continue
            try:
                torch.multinomial(weight, k, replacement=replace)
            except RuntimeError:
                return node
    return None


@pytest.mark.parametrize("replace", [False, True])
@pytest.mark.parametrize("seed", range(6))
def test_weights_are_refused_exactly_where_torch_multinomial_refuses(seed, replace):
    graph = random_graph(60, 240, seed=seed)
    generator = torch.Generator().manual_seed(seed)
    # Many zeros: some neighbourhoods keep no positive weight.
    keep = torch.rand(graph.num_edges, generator=generator) < 0.1 + 0.1 * seed
    graph.w = torch.rand(graph.num_edges, generator=generator) * keep
    fanouts = [3, 2]
    refused = multinomial_refuses(graph, fanouts, replace)
    build = lambda: OrchNeighborLoader(  # noqa: E731
        graph, fanouts, batch_size=8, weight_attr="w", replace=replace
    )
    if refused is None:
        build()
        return
    with pytest.raises(ValueError, match=rf"weight_attr: node {refused} has"):
        build()


def test_past_the_positive_weights_zero_weights_are_drawn_uniformly():
    weight = torch.tensor([0.0, 0.0, 2.0, 0.0, 0.0, 1.0])
    sampler = OrchNeighborSampler(star(6, weight=weight), [4], weight_attr="weight")
    ours = picked(sampler, ROUNDS)[1:]
    # Both positive ones every time, then two of the four zeros.
    assert ours[2] == ours[5] == ROUNDS
    zeros = ours[[0, 1, 3, 4]]
    assert zeros.sum() == 2 * ROUNDS
    assert chisquare(zeros.numpy()).pvalue > 1e-3


@pytest.mark.parametrize("level", ["node", "edge"])
def test_temporal_uniform_picks_only_earlier_neighbours(level):
    degree, seed_time = 30, 17
    time = torch.randperm(degree, generator=torch.Generator().manual_seed(3))
    if level == "node":
        data = star(degree, time=torch.cat([torch.tensor([seed_time]), time]))
    else:
        data = star(degree, edge_time=time)
    attr = "time" if level == "node" else "edge_time"
    sampler = OrchNeighborSampler(data, [5], time_attr=attr)
    counts = picked(sampler, ROUNDS, time=torch.tensor([seed_time]))[1:]
    valid = time <= seed_time
    assert counts[~valid].sum() == 0
    expected = np.full(int(valid.sum()), 5 * ROUNDS / int(valid.sum()))
    assert chisquare(counts[valid].numpy(), expected).pvalue > 1e-3


def test_temporal_last_takes_the_latest_earlier_neighbours():
    degree, seed_time = 30, 17
    time = torch.randperm(degree, generator=torch.Generator().manual_seed(4))
    data = star(degree, edge_time=time)
    sampler = OrchNeighborSampler(
        data, [4], time_attr="edge_time", temporal_strategy="last"
    )
    seed = NodeSamplerInput(None, torch.tensor([0]), time=torch.tensor([seed_time]))
    out = sampler.sample_from_nodes(seed)
    picked_times = sorted(time[out.node[out.row] - 1].tolist())
    assert picked_times == [14, 15, 16, 17]


def test_disjoint_subgraphs_are_each_seeds_own_neighbourhood():
    data = random_graph(120, 500, seed=6)
    seeds = torch.tensor([3, 50, 3, 99])
    sampler = OrchNeighborSampler(data, [-1, -1], disjoint=True)
    out = sampler.sample_from_nodes(NodeSamplerInput(None, seeds))
    for subgraph, seed in enumerate(seeds.tolist()):
        order, edges = reference_full_neighbourhood(data, [seed], hops=2)
        mine = (out.batch == subgraph).nonzero().view(-1)
        assert sorted(out.node[mine].tolist()) == sorted(order)
        in_subgraph = out.batch[out.col] == subgraph
        assert (out.batch[out.row] == out.batch[out.col]).all()
        found = zip(
            out.node[out.row[in_subgraph]].tolist(),
            out.node[out.col[in_subgraph]].tolist(),
            strict=True,
        )
        assert set(found) == edges


def hetero_graph(seed: int = 0) -> HeteroData:
    """Papers cite papers, authors write papers, papers have topics."""
    generator = torch.Generator().manual_seed(seed)
    sizes = {"paper": 60, "author": 40, "topic": 8}
    data = HeteroData()
    for node_type, size in sizes.items():
        data[node_type].x = torch.randn(size, 6, generator=generator)

    def edges(src: str, dst: str, count: int) -> torch.Tensor:
        return torch.stack([
            torch.randint(sizes[src], (count,), generator=generator),
            torch.randint(sizes[dst], (count,), generator=generator),
        ]).unique(dim=1)  # fmt: skip

    data["paper", "cites", "paper"].edge_index = edges("paper", "paper", 200)
    data["author", "writes", "paper"].edge_index = edges("author", "paper", 150)
    data["paper", "written_by", "author"].edge_index = data[
        "author", "writes", "paper"
    ].edge_index.flip(0)
    data["paper", "about", "topic"].edge_index = edges("paper", "topic", 80)
    data["topic", "rev_about", "paper"].edge_index = data[
        "paper", "about", "topic"
    ].edge_index.flip(0)
    return data


class Encoder(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = SAGEConv((-1, -1), 16)
        self.conv2 = SAGEConv((-1, -1), 8)

    def forward(self, x, edge_index):
        return self.conv2(self.conv1(x, edge_index).relu(), edge_index)


def test_full_hetero_batches_give_the_whole_graph_output():
    # Fan-out -1 makes a 2-hop batch exact for a 2-layer model: the seeds'
    # outputs equal those of plain PyG on the whole graph.
    data = hetero_graph()
    torch.manual_seed(0)
    model = to_hetero(Encoder(), data.metadata(), aggr="sum")
    full = model(data.x_dict, data.edge_index_dict)["paper"]
    loader = OrchNeighborLoader(
        data, num_neighbors=[-1, -1], input_nodes=("paper", torch.arange(60)),
        batch_size=16,
    )  # fmt: skip
    for batch in loader:
        out = model(batch.x_dict, batch.edge_index_dict)["paper"]
        size = batch["paper"].batch_size
        assert torch.allclose(out[:size], full[batch["paper"].n_id[:size]], atol=1e-5)


def test_hetero_batches_respect_fanouts_per_edge_type():
    data = hetero_graph(1)
    fanouts = {edge_type: [2, 1] for edge_type in data.edge_types}
    fanouts["paper", "cites", "paper"] = [3, 0]
    loader = OrchNeighborLoader(
        data, fanouts, input_nodes=("paper", torch.arange(60)), batch_size=10
    )
    for batch in loader:
        for edge_type in data.edge_types:
            store = batch[edge_type]
            src, _, dst = edge_type
            # Every sampled edge is an edge of the graph, named by e_id.
            sampled = torch.stack([
                batch[src].n_id[store.edge_index[0]],
                batch[dst].n_id[store.edge_index[1]],
            ])  # fmt: skip
            assert torch.equal(data[edge_type].edge_index[:, store.e_id], sampled)
            # No destination gets more picks than its hop's fan-out.
            per_hop = batch.num_sampled_edges_dict[edge_type]
            assert len(per_hop) == 2
            start = 0
            for hop, count in enumerate(per_hop):
                hop_dst = store.edge_index[1, start : start + count]
                if count:
                    assert torch.bincount(hop_dst).max() <= fanouts[edge_type][hop]
                start += count
        for node_type, per_hop in batch.num_sampled_nodes_dict.items():
            assert sum(per_hop) == batch[node_type].num_nodes


def _hetero_samples(data, threads: int, hot=None) -> list:
    # Four batches' sampler outputs at a fixed seed, on this many threads.
    sampler = OrchNeighborSampler(data, [10, 5])
    sampler.hot_mask = hot
    torch.manual_seed(3)
    outputs = []
    with threading_layer.numba_threads(threads):
        for seeds in torch.randperm(data["paper"].num_nodes)[:256].split(64):
            seed = NodeSamplerInput(None, seeds, input_type="paper")
            out = sampler.sample_from_nodes(seed)
            outputs.append((out.node, out.row, out.col, out.edge))
    return outputs


def _same(first: list, second: list) -> bool:
    return all(
        x.keys() == y.keys() and all(torch.equal(x[key], y[key]) for key in x)
        for a, b in zip(first, second, strict=True)
        for x, y in zip(a, b, strict=True)
    )


@pytest.mark.skipif(numba.config.NUMBA_NUM_THREADS < 2, reason="needs 2 threads")
def test_hetero_batches_do_not_depend_on_the_number_of_threads(mag, monkeypatch):
    # Each destination draws from its own stream, whichever thread picks it;
    # the serial twin (a forked child under GNU OpenMP) draws the same.
    hot = torch.zeros(sum(mag.num_nodes_dict.values()), dtype=torch.bool)
    hot[::7] = True
    for mask in (None, hot):
        two = _hetero_samples(mag, 2, mask)
        assert sum(row.numel() for out in two for row in out[1].values()) > 1000
        assert _same(_hetero_samples(mag, 1, mask), two)
        with monkeypatch.context() as patch:
            patch.setattr(threading_layer, "parallel_mode", lambda: "serial")
            assert _same(_hetero_samples(mag, 2, mask), two)
        other = None if mask is not None else hot
        assert not _same(_hetero_samples(mag, 2, other), two)


def test_hetero_picks_are_uniform():
    data = HeteroData()
    data["author"].num_nodes = 40
    data["paper"].num_nodes = 1
    data["author", "writes", "paper"].edge_index = torch.stack(
        [torch.arange(40), torch.zeros(40, dtype=torch.long)]
    )
    sampler = OrchNeighborSampler(data, [6])
    counts = torch.zeros(40, dtype=torch.long)
    seed = NodeSamplerInput(None, torch.tensor([0]), input_type="paper")
    torch.manual_seed(0)
    for _ in range(ROUNDS):
        out = sampler.sample_from_nodes(seed)
        edge_type = ("author", "writes", "paper")
        counts += torch.bincount(out.node["author"][out.row[edge_type]], minlength=40)
    assert chisquare(counts.numpy(), np.full(40, 6 * ROUNDS / 40)).pvalue > 1e-3


def test_full_link_batches_give_the_whole_graph_output():
    data = random_graph(150, 700, seed=8)
    data.x = torch.randn(150, 5, generator=torch.Generator().manual_seed(0))
    torch.manual_seed(0)
    model = Encoder()
    full = model(data.x, data.edge_index)
    loader = OrchLinkNeighborLoader(
        data, num_neighbors=[-1, -1], batch_size=32, neg_sampling="binary"
    )
    for batch in loader:
        out = model(batch.x, batch.edge_index)
        ends = batch.n_id[batch.edge_label_index]
        assert torch.allclose(out[batch.edge_label_index], full[ends], atol=1e-5)
        # Negative pairs are drawn too, labelled 0.
        assert batch.edge_label.sum() == batch.edge_label.numel() // 2


def test_hetero_trim_to_layer_equals_untrimmed_output():
    # The per-type, per-hop counts are what trim_to_layer needs to drop the
    # nodes and edges a layer's output no longer reaches.
    from torch_geometric.nn import HeteroConv
    from torch_geometric.utils import trim_to_layer

    data = hetero_graph(2)
    torch.manual_seed(0)
    convs = [
        HeteroConv({edge_type: SAGEConv((-1, -1), 8) for edge_type in data.edge_types})
        for _ in range(2)
    ]
    loader = OrchNeighborLoader(
        data, [4, 3], input_nodes=("paper", torch.arange(60)), batch_size=12
    )
    for batch in loader:
        x, edge_index = batch.x_dict, batch.edge_index_dict
        full = convs[1](convs[0](x, edge_index), edge_index)["paper"]
        for layer, conv in enumerate(convs):
            x, edge_index, _ = trim_to_layer(
                layer, batch.num_sampled_nodes_dict, batch.num_sampled_edges_dict,
                x, edge_index,
            )  # fmt: skip
            x = conv(x, edge_index)
        size = batch["paper"].batch_size
        assert torch.allclose(x["paper"][:size], full[:size], atol=1e-5)
