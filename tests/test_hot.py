"""Hot-vertex selection, hot-aware sampling and the loader's hot part."""

import pytest
import torch
from conftest import random_graph
from test_sampling import check_batch, in_degree
from torch_geometric.loader import NeighborLoader
from torch_geometric.utils import scatter

from pyg_orch import HotSet, OrchNeighborLoader, OrchNeighborSampler
from pyg_orch.hot.choice import (
    frontier_size,
    presample_counts,
    select_hot,
    top_fraction,
)
from pyg_orch.hot.tuning import AUTO_MARGIN, AUTO_RATIOS, choose_hot_ratio
from pyg_orch.loading.stats import STATS_HISTORY


def power_law(num_nodes=2000, seed=0):
    from pyg_orch.datasets import power_law_graph

    data = power_law_graph(num_nodes, avg_degree=10, num_features=8, seed=seed)
    data.edge_attr = torch.arange(data.num_edges, dtype=torch.float)
    return data


def test_presample_counts_frontier_appearances_and_is_seeded():
    data = power_law()
    sampler = OrchNeighborSampler(data, num_neighbors=[5, 3])
    seeds = data.train_mask.nonzero().view(-1)
    counts = presample_counts(sampler, seeds, batch_size=100, seed=7, progress=False)
    assert torch.equal(
        counts, presample_counts(sampler, seeds, 100, seed=7, progress=False)
    )
    assert not torch.equal(
        counts, presample_counts(sampler, seeds, 100, seed=8, progress=False)
    )
    # Every seed is in exactly one batch's hop 0; hop-1 nodes add to that.
    assert (counts[seeds] >= 1).all()
    assert counts.sum() > seeds.numel()
    twice = presample_counts(sampler, seeds, 100, epochs=2, seed=7, progress=False)
    assert (twice[seeds] >= 2).all()


def test_presample_leaves_the_global_random_state_alone():
    data = power_law(500)
    sampler = OrchNeighborSampler(data, num_neighbors=[3, 3])
    torch.manual_seed(0)
    before = torch.rand(1)
    torch.manual_seed(0)
    presample_counts(sampler, torch.arange(100), 10, progress=False)
    assert torch.equal(torch.rand(1), before)


def test_top_fraction_and_degree_method():
    counts = torch.tensor([5, 0, 9, 5, 1, 0])
    assert top_fraction(counts, 0.5).tolist() == [0, 2, 3]
    assert top_fraction(counts, 1.0).tolist() == [0, 2, 3, 4]  # zeros never hot
    assert top_fraction(counts, 0.0).numel() == 0
    data = power_law()
    sampler = OrchNeighborSampler(data, num_neighbors=[5, 3])
    hot = select_hot(sampler, torch.arange(10), 0.1, "degree")
    degree = in_degree(data)
    assert hot.nodes.numel() == 200
    assert degree[hot.nodes].min() >= degree[~hot.mask(data.num_nodes)].max()
    assert torch.equal(hot.counts, degree)


def test_last_hop_skips_hot_nodes_and_earlier_hops_do_not():
    data = power_law()
    fanouts = [5, 4, 3]
    torch.manual_seed(0)
    loader = OrchNeighborLoader(
        data, num_neighbors=fanouts, batch_size=64, hot_ratio=0.2, shuffle=True
    )
    loader.serve("mean")
    for batch in list(loader)[:5]:
        check_batch_with_hot(batch, data, fanouts, loader.cache.mask)


def check_batch_with_hot(batch, data, fanouts, hot):
    """A valid batch whose last hop skipped exactly the hot frontier nodes."""
    check_batch(batch, data, fanouts, hot=hot)
    nodes_per_hop = batch.num_sampled_nodes
    # The hot part: every hot frontier node, and nothing else.
    frontier = batch.n_id[: frontier_size(nodes_per_hop)]
    assert torch.equal(batch.hot_index, hot[frontier].nonzero().view(-1))


def test_hot_batches_are_valid_and_carry_full_neighbourhood_means(cora):
    torch.manual_seed(0)
    loader = OrchNeighborLoader(
        cora, num_neighbors=[10, 5], batch_size=50, hot_ratio=0.2, shuffle=True
    )
    loader.serve("mean")
    full_mean = scatter(cora.x[cora.edge_index[0]], cora.edge_index[1], 0,
                        cora.num_nodes, "mean")  # fmt: skip
    for batch in loader:
        check_batch_with_hot(batch, cora, [10, 5], loader.cache.mask)
        hot_nodes = batch.n_id[batch.hot_index]
        assert torch.allclose(batch.hot_agg, full_mean[hot_nodes], atol=1e-6)


def test_hot_ratio_zero_gives_plain_neighbor_loader_batches():
    data = random_graph(300, 2000, seed=5)
    orch = OrchNeighborLoader(data, num_neighbors=[4, 3], batch_size=30, shuffle=True)
    plain = NeighborLoader(
        data,
        num_neighbors=[4, 3],
        batch_size=30,
        shuffle=True,
        neighbor_sampler=OrchNeighborSampler(data, num_neighbors=[4, 3]),
    )
    torch.manual_seed(9)
    ours = list(orch)
    torch.manual_seed(9)
    theirs = list(plain)
    for a, b in zip(ours, theirs, strict=True):
        assert set(a.keys()) == set(b.keys())
        for key in b.keys():
            assert torch.equal(torch.as_tensor(a[key]), torch.as_tensor(b[key]))
    assert orch.cache is None


def test_fewer_last_hop_nodes_with_hot_vertices():
    data = power_law(5000, seed=2)
    sizes = {}
    for ratio in (0.0, 0.2):
        torch.manual_seed(0)
        loader = OrchNeighborLoader(
            data, num_neighbors=[10, 5, 5], batch_size=128, hot_ratio=ratio
        )
        if ratio > 0:
            loader.serve("mean")
        list(loader)
        sizes[ratio] = sum(b.nodes_per_hop[-1] for b in loader.stats.batches)
    assert sizes[0.2] < 0.9 * sizes[0.0]


def test_stats_describe_each_batch(cora):
    loader = OrchNeighborLoader(
        cora, num_neighbors=[5, 5], batch_size=500, hot_ratio=0.1
    )
    loader.serve("mean")
    batches = list(loader)
    assert len(loader.stats.batches) == loader.stats.count == len(batches)
    for batch, stats in zip(batches, loader.stats.batches, strict=True):
        assert stats.nodes_per_hop == batch.num_sampled_nodes
        assert stats.edges_per_hop == batch.num_sampled_edges
        assert stats.num_hot == batch.hot_index.numel()
        x_bytes = batch.x.numel() * 4
        assert stats.bytes_gathered == x_bytes + batch.hot_agg.numel() * 4
        assert stats.sample_seconds > 0 and stats.gather_seconds > 0
    mean = loader.stats.mean()
    assert mean["nodes"] == sum(b.num_nodes for b in batches) / len(batches)
    loader.stats.reset()
    assert list(loader.stats.batches) == [] and loader.stats.count == 0


def test_given_hot_sets(cora):
    mask = torch.zeros(cora.num_nodes, dtype=torch.bool)
    mask[[0, 5, 7]] = True
    for hot in (
        mask,
        torch.tensor([7, 0, 5, 5]),
        HotSet(torch.tensor([0, 5, 7]), torch.zeros(0), "x"),
    ):
        loader = OrchNeighborLoader(cora, num_neighbors=[3], batch_size=10, hot=hot)
        assert loader.cache.hot_nodes.tolist() == [0, 5, 7]
    with pytest.raises(ValueError, match="another graph"):
        OrchNeighborLoader(
            cora, num_neighbors=[3], hot=torch.zeros(5, dtype=torch.bool)
        )
    with pytest.raises(ValueError, match="another graph"):
        OrchNeighborLoader(cora, num_neighbors=[3], hot=torch.tensor([cora.num_nodes]))


@pytest.mark.parametrize("ratio", [-0.1, 1.5, True])
def test_bad_hot_ratio_names_the_argument(cora, ratio):
    with pytest.raises(ValueError, match="hot_ratio"):
        OrchNeighborLoader(cora, num_neighbors=[3], hot_ratio=ratio)


def test_bad_hot_method_names_the_argument(cora):
    with pytest.raises(ValueError, match="hot_method"):
        OrchNeighborLoader(cora, num_neighbors=[3], hot_ratio=0.1, hot_method="x")


def test_hot_batches_from_worker_processes(cora):
    loader = OrchNeighborLoader(
        cora, num_neighbors=[5, 5], batch_size=300, hot_ratio=0.2, num_workers=2
    )
    loader.serve("mean")
    mean = scatter(cora.x[cora.edge_index[0]], cora.edge_index[1], 0,
                   cora.num_nodes, "mean")  # fmt: skip
    for batch in loader:
        check_batch_with_hot(batch, cora, [5, 5], loader.cache.mask)
        assert torch.allclose(
            batch.hot_agg, mean[batch.n_id[batch.hot_index]], atol=1e-6
        )


def test_loader_hot_set_is_seeded_and_leaves_the_random_stream_alone():
    data = power_law(3000, seed=4)

    def hot_nodes(seed):
        torch.manual_seed(seed)
        loader = OrchNeighborLoader(data, num_neighbors=[5, 5], batch_size=64,
                                    hot_ratio=0.1)  # fmt: skip
        return loader.hot.nodes, torch.rand(3)

    first, after_first = hot_nodes(3)
    again, after_again = hot_nodes(3)
    other, _ = hot_nodes(4)
    assert torch.equal(first, again) and not torch.equal(first, other)
    torch.manual_seed(3)
    assert torch.equal(after_first, torch.rand(3))
    assert torch.equal(after_first, after_again)


def test_choose_hot_ratio_hides_cpu_work_under_device_work():
    ratios = [0.0, 0.1, 0.2, 0.3]
    cpu = [5.0, 3.0, 2.0, 1.5]
    # The smallest ratio whose CPU time fits under the device time.
    assert choose_hot_ratio(ratios, cpu, [2.5, 2.5, 2.5, 2.5]) == 0.2
    # None fits: the shortest max(cpu, device).
    assert choose_hot_ratio(ratios, cpu, [1.0, 1.0, 1.0, 1.4]) == 0.3
    # Without a pipeline the times add up.
    assert choose_hot_ratio(ratios, cpu, [1.0, 2.0, 1.0, 3.0], overlap=False) == 0.2
    with pytest.raises(ValueError, match="at least one"):
        choose_hot_ratio([], [], [])


def test_a_larger_ratio_within_the_margin_of_noise_leaves_the_smaller_one():
    ratios = [0.0, 0.05, 0.1]
    # 0.05 wins by 0.1 ms of 203 and 0.1 by 4 %: both within AUTO_MARGIN.
    cpu = [0.2030, 0.2029, 0.195]
    assert AUTO_MARGIN == 0.05
    assert choose_hot_ratio(ratios, cpu, [0.0] * 3) == 0.0
    assert choose_hot_ratio(ratios, cpu, [0.0] * 3, overlap=False) == 0.0
    # A clear win (6 % below the choice so far) is taken.
    assert choose_hot_ratio(ratios, [0.2030, 0.2029, 0.19], [0.0] * 3) == 0.1


def test_auto_tuning_takes_medians_of_rounds_that_visit_every_ratio():
    from pyg_orch.datasets import load_cora
    from pyg_orch.hot.options import HotOptions
    from pyg_orch.hot.vertices import HotVertices

    data = load_cora()
    options = HotOptions(hot_ratio="auto", hot_method="degree")
    hot = HotVertices(OrchNeighborSampler(data, [5]), data.x, None, options, [5])
    hot.choose(torch.arange(64), 64)
    visits = []
    # Rounds of (0, 0.1, 0.2): 0.1 is 3 % cheaper than 0 (within the margin),
    # 0.2 is 20 % cheaper but for one slow spell, which its median ignores.
    spells = iter([1.0, 0.97, 10.0, 1.0, 0.97, 0.8, 1.0, 0.97, 0.8])

    def measure(batches):
        visits.append(hot.cache.num_hot if hot.cache is not None else 0)
        return (next(spells) if len(visits) > 1 else 99.0), 0.0

    tuning = hot.tune(lambda: hot.serve("mean"), measure, (0.0, 0.1, 0.2), 1, True)
    # A warm-up, then three rounds of the three ratios in turn.
    assert len(visits) == 1 + 3 * 3
    assert visits[1:4] == visits[4:7] == visits[7:10]
    assert tuning.cpu_seconds == [1.0, 0.97, 0.8]
    assert tuning.chosen == 0.2
    assert "medians of 3 rounds" in tuning.table()


def test_auto_hot_ratio_is_chosen_when_the_model_is_wrapped():
    from torch_geometric.nn import GraphSAGE

    from pyg_orch import OrchModel

    data = power_law()
    loader = OrchNeighborLoader(
        data, [5, 3], batch_size=64, hot_ratio="auto", prefetch=2
    )
    assert loader.cache is None
    with pytest.raises(RuntimeError, match="OrchModel"):
        iter(loader)
    gnn = GraphSAGE(data.num_features, 8, num_layers=2, out_channels=2)
    before = {key: value.clone() for key, value in gnn.state_dict().items()}
    model = OrchModel(gnn, loader)
    tuning = loader.tuning
    assert tuning.ratios == list(AUTO_RATIOS) and tuning.chosen == loader.hot_ratio
    assert all(seconds > 0 for seconds in tuning.cpu_seconds + tuning.device_seconds)
    # Measuring trains nothing.
    assert all(torch.equal(before[k], v) for k, v in gnn.state_dict().items())
    assert all(parameter.grad is None for parameter in gnn.parameters())
    assert loader.stats.count == 0
    # The choice follows the measurements: hot vertices halve the device
    # time, and every ratio above 0.05 only ties with it.
    chosen = loader.tune_hot_ratio(
        model._serve_from, lambda batch: 0.5 if "hot_index" in batch else 1.0
    )
    assert chosen.chosen == 0.05 and loader.hot_ratio == 0.05
    assert loader.cache.num_hot == round(0.05 * data.num_nodes)
    assert "0.05 *" in chosen.table()
    with loader:
        batch = next(iter(loader))
    assert model(batch).shape == (batch.batch_size, 2)
    chosen = loader.tune_hot_ratio(model._serve_from, lambda batch: 1.0)
    assert chosen.chosen == 0.0 and loader.cache is None
    with loader:
        assert "hot_index" not in next(iter(loader))


def test_auto_hot_ratio_is_only_for_the_loader():
    data = power_law()
    with pytest.raises(ValueError, match="hot_ratio must be"):
        OrchNeighborLoader(data, [5, 3], batch_size=64, hot_ratio="fast")
    with pytest.raises(ValueError, match="hot_ratio must be"):
        select_hot(OrchNeighborSampler(data, [5]), torch.arange(10), "auto")


def test_stats_memory_stays_flat_over_a_long_run():
    data = random_graph(3000, 9000, seed=4)
    loader = OrchNeighborLoader(data, [2], batch_size=1)
    for _ in range(2):
        for _ in loader:
            pass
    stats = loader.stats
    assert stats.count == 6000
    assert len(stats.batches) == STATS_HISTORY < stats.count
    # Totals and means still cover every batch.
    assert stats.totals()["nodes"] >= 6000
    assert stats.mean()["nodes"] == stats.totals()["nodes"] / 6000
