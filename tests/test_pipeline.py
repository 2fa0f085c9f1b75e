"""The pipeline: prefetching, the hot refresher's staleness bound, failures."""

import dataclasses
import gc
import random
import threading
import time

import pytest
import torch
import torch.nn.functional as F
from conftest import random_graph
from torch_geometric.nn import GAT, GraphSAGE

from pyg_orch import OrchModel, OrchNeighborLoader
from pyg_orch.hot.choice import frontier_size
from pyg_orch.hot.refresher import THREAD_PREFIX, HotRefresher, refresh_seed
from pyg_orch.loading.pipeline import Pipeline


def pyg_orch_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith(THREAD_PREFIX)]


def jitter(rng: random.Random, most: float = 0.002) -> None:
    time.sleep(rng.random() * most)


@pytest.fixture(autouse=True)
def no_thread_outlives_a_test():
    yield
    gc.collect()
    assert pyg_orch_threads() == []


@pytest.mark.parametrize(
    ("super_batch", "staleness", "prefetch"),
    [(1, 0, 0), (1, 0, 3), (3, 2, 2), (3, 5, 4), (4, 9, 1), (2, 20, 3)],
)
def test_staleness_bound_holds_under_random_delays(super_batch, staleness, prefetch):
    rng = random.Random(super_batch * 100 + staleness)
    made_at: dict[int, int] = {}
    consumed = [0]

    def compute(version, _):
        made_at[version] = consumed[0]  # what the consumer had done by then
        jitter(rng)
        return torch.tensor([version])

    refresher = HotRefresher(compute, super_batch, staleness)

    def produce(index, job):
        jitter(rng)
        values = refresher.values(index)
        return (index, values.values.item()), values.created

    pipeline = Pipeline(list(range(200)), produce, prefetch, refresher)
    for step, (index, version) in enumerate(pipeline):
        assert index == step and version == step // super_batch
        # Measured independently of the pipeline's own bookkeeping.
        assert step - made_at[version] <= staleness
        jitter(rng)
        consumed[0] = step + 1
    assert len(pipeline.stats.staleness) == 200
    assert max(pipeline.stats.staleness) <= staleness
    # The bound is reached, so the check above is not vacuous.
    assert max(pipeline.stats.staleness) == staleness or staleness > 2 * super_batch


def resample_loader(graph, **kwargs):
    loader = OrchNeighborLoader(
        graph,
        num_neighbors=[4, 3],
        batch_size=16,
        shuffle=True,
        hot_ratio=0.2,
        cache="resample",
        hot_fanout=3,
        **kwargs,
    )
    loader.serve("mean")
    return loader


def test_resample_with_staleness_0_equals_a_synchronous_reference():
    graph = random_graph(300, 2400)
    torch.manual_seed(0)
    loader = resample_loader(graph, super_batch=1, staleness=0, prefetch=3)
    rng = random.Random(0)
    resample = loader.cache.resample

    def slow_resample(fanout, seed, kind):
        jitter(rng)
        return resample(fanout, seed, kind)

    loader.cache.resample = slow_resample
    torch.manual_seed(1)
    with loader:
        iterator = iter(loader)
        seed = iterator.refresher.seed
        batches = []
        for step, batch in enumerate(iterator):
            jitter(rng)
            frontier = batch.n_id[: frontier_size(batch.num_sampled_nodes)]
            hot_index, hot_slot = loader.cache.find(frontier)
            expected = resample(3, refresh_seed(seed, step))[hot_slot]
            assert torch.equal(batch.hot_index, hot_index)
            assert torch.equal(batch.hot_agg, expected)
            batches.append(batch)
    assert max(iterator.stats.staleness) == 0
    # The same seeds without prefetching give the same batches.
    torch.manual_seed(0)
    reference = resample_loader(graph, super_batch=1, staleness=0)
    torch.manual_seed(1)
    with reference:
        synchronous = list(reference)
    assert len(synchronous) == len(batches)
    for got, want in zip(batches, synchronous, strict=True):
        assert torch.equal(got.n_id, want.n_id)
        assert torch.equal(got.edge_index, want.edge_index)
        assert torch.equal(got.hot_agg, want.hot_agg)


def test_resampled_aggregates_are_means_of_sampled_neighbours():
    graph = random_graph(200, 1600)
    loader = resample_loader(graph)
    cache = loader.cache
    values = cache.resample(fanout=3, seed=5)
    n_id, (src, dst) = cache.sample_neighborhood(cache.hot_nodes, 3, seed=5)
    # Every sampled edge exists in the graph, at most 3 per hot node.
    edges = set(map(tuple, graph.edge_index.t().tolist()))
    sampled = zip(n_id[src].tolist(), n_id[dst].tolist(), strict=True)
    assert all(edge in edges for edge in sampled)
    assert torch.bincount(dst).max() <= 3
    expected = torch.zeros_like(values).index_add_(0, dst, graph.x[n_id[src]])
    count = torch.bincount(dst, minlength=values.size(0)).clamp(min=1)
    assert torch.allclose(values, expected / count.unsqueeze(1), atol=1e-5)
    assert not torch.equal(values, cache.resample(fanout=3, seed=6))


def train_steps(model, loader, optimizer, on_batch=None):
    model.train()
    for step, batch in enumerate(loader):
        if on_batch is not None:
            on_batch(step, batch)
        optimizer.zero_grad()
        F.cross_entropy(model(batch), batch.y[: batch.batch_size]).backward()
        optimizer.step()


def test_embedding_snapshots_respect_the_bound_while_training(cora):
    torch.manual_seed(0)
    loader = OrchNeighborLoader(
        cora, [5, 5], batch_size=64, hot_ratio=0.2, super_batch=2, staleness=3,
        prefetch=2,
    )  # fmt: skip
    gat = GAT(cora.num_features, 8, num_layers=2, out_channels=7)
    with pytest.warns(UserWarning, match="embedding"):
        model = OrchModel(gat, loader)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    rng = random.Random(1)
    snapshot = loader.cache.snapshot

    def slow_snapshot():
        jitter(rng, 0.01)
        return snapshot()

    loader.cache.snapshot = slow_snapshot
    with loader:
        iterator = iter(loader)
        train_steps(model, iterator, optimizer, lambda step, batch: jitter(rng))
    assert len(iterator.stats.staleness) == len(iterator) > 10
    assert max(iterator.stats.staleness) <= 3


def test_embedding_with_staleness_0_is_the_current_bottom_layer(cora):
    torch.manual_seed(0)
    loader = OrchNeighborLoader(
        cora, [5, 5], batch_size=128, hot_ratio=0.2, cache="embedding",
        super_batch=1, staleness=0, hot_fanout=-1, prefetch=2,
    )  # fmt: skip
    gat = GAT(cora.num_features, 8, num_layers=2, out_channels=7)
    model = OrchModel(gat, loader)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.05)
    hot_nodes = loader.cache.hot_nodes
    checked = []

    def check(step, batch):
        # Before this step's update, the weights are those of the snapshot.
        with torch.no_grad():
            full = gat.convs[0](cora.x, cora.edge_index)
        nodes = batch.n_id[batch.hot_index]
        slots = loader.cache.slot[nodes]
        assert torch.equal(hot_nodes[slots], nodes)
        assert torch.allclose(batch.hot_agg, full[nodes], atol=1e-5)
        checked.append(batch.hot_index.numel())

    with loader:
        train_steps(model, loader, optimizer, check)
    assert len(checked) == len(loader) and sum(checked) > 0


def test_embedding_rows_replace_the_bottom_output_of_unexpanded_hot_nodes(cora):
    loader = OrchNeighborLoader(
        cora, [5, 5], batch_size=64, hot_ratio=0.3, cache="embedding"
    )
    model = OrchModel(GraphSAGE(cora.num_features, 8, num_layers=2, out_channels=7))
    model._serve_from(loader)
    with loader:
        batch = next(iter(loader))
    hop_0 = batch.num_sampled_nodes[0]
    # Only hot nodes of the last frontier hop (not expanded) are replaced.
    assert batch.hot_index.numel() > 0 and batch.hot_index.min() >= hop_0
    seen = []
    model.model.convs[1].register_forward_pre_hook(
        lambda module, inputs: seen.append(inputs[0][0].clone())
    )
    model.eval()(batch)
    conv_out = seen[0]
    bottom = model.model.act(batch.hot_agg)
    assert torch.allclose(conv_out[batch.hot_index], bottom, atol=1e-6)


def test_prefetched_batches_equal_synchronous_ones_and_features_come_back(cora):
    def batches(**kwargs):
        torch.manual_seed(3)
        loader = OrchNeighborLoader(
            cora, [5, 5], batch_size=256, shuffle=True, hot_ratio=0.1, **kwargs
        )
        OrchModel(GraphSAGE(cora.num_features, 8, num_layers=2), loader)
        with loader:
            return loader, list(loader)

    _, plain = batches(device="cpu")
    hot_bytes = 271 * cora.num_features * 4  # 10 % of 2,708 nodes
    for kwargs, hot_on_device, feature_rows in [
        ({"prefetch": 3}, False, 0),
        ({"prefetch": 2, "device_cache": 400_000}, False, 69),
        ({"prefetch": 2, "device_cache": hot_bytes + 400_000}, True, 69),
    ]:
        loader, got_batches = batches(device="cpu", **kwargs)
        assert (loader.cache.device is not None) == hot_on_device
        rows = loader.feature_cache.num_rows if loader.feature_cache else 0
        assert rows == feature_rows
        for got, want in zip(got_batches, plain, strict=True):
            assert torch.equal(got.n_id, want.n_id)
            assert torch.equal(got.x, cora.x[got.n_id])
            assert torch.equal(got.hot_index, want.hot_index)
            assert torch.equal(got.hot_agg, want.hot_agg)
            assert not any(key in got for key in ("x_cold", "hot_slot"))


def test_feature_cache_holds_the_highest_out_degree_rows(cora):
    row_bytes = cora.num_features * 4
    loader = OrchNeighborLoader(
        cora, [5], batch_size=64, device="cpu", device_cache=100 * row_bytes + 3
    )
    cache = loader.feature_cache
    assert cache.num_rows == 100
    out_degree = torch.bincount(cora.edge_index[0], minlength=cora.num_nodes)
    cached = (cache.slot >= 0).nonzero().view(-1)
    assert out_degree[cached].min() >= out_degree[cache.slot < 0].max()
    assert torch.equal(cache.values[cache.slot[cached]], cora.x[cached])


class Boom(Exception):
    pass


def test_a_producer_exception_reaches_the_training_loop_within_one_batch(cora):
    loader = OrchNeighborLoader(cora, [5, 5], batch_size=64, prefetch=3)
    collate = loader.collate_fn
    calls = []

    def failing(index):
        calls.append(len(calls))
        if len(calls) == 6:
            raise Boom("sampling failed")
        return collate(index)

    loader.collate_fn = failing
    steps = 0
    with pytest.raises(RuntimeError, match="producer") as error:
        for _ in loader:
            steps += 1
    assert isinstance(error.value.__cause__, Boom)
    assert steps == 5
    assert pyg_orch_threads() == []


def test_a_refresher_exception_reaches_the_training_loop_within_one_batch(cora):
    loader = OrchNeighborLoader(
        cora, [5, 5], batch_size=32, hot_ratio=0.2, cache="resample",
        super_batch=1, staleness=0, prefetch=2,
    )  # fmt: skip
    resample = loader.cache.resample
    versions = []

    def failing(fanout, seed, kind):
        versions.append(seed)
        if len(versions) == 4:
            raise Boom("resampling failed")
        return resample(fanout, seed, kind)

    loader.serve("mean")
    loader.cache.resample = failing
    steps = 0
    with pytest.raises(RuntimeError, match="pyg_orch") as error:
        for _ in loader:
            steps += 1
    assert isinstance(error.value.__cause__.__cause__ or error.value.__cause__, Boom)
    # Buffer 3 serves batch 3: batches 0, 1 and 2 arrive, then the error.
    assert steps == 3
    assert pyg_orch_threads() == []


@pytest.mark.parametrize("stop", ["close", "exception", "interrupt", "dropped"])
def test_no_thread_is_left_running(cora, stop):
    loader = OrchNeighborLoader(
        cora, [5, 5], batch_size=16, hot_ratio=0.2, cache="resample", prefetch=4
    )
    loader.serve("mean")
    if stop == "close":
        iterator = iter(loader)
        next(iterator)
        assert len(pyg_orch_threads()) == 2
        loader.close()
    elif stop == "dropped":
        iterator = iter(loader)
        next(iterator)
        del iterator
        gc.collect()
    else:
        error = Boom if stop == "exception" else KeyboardInterrupt
        with pytest.raises(error), loader:
            for step, _ in enumerate(loader):
                if step == 2:
                    raise error()
    assert pyg_orch_threads() == []


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"cache": "lazy"}, "cache must be one of"),
        ({"super_batch": 0}, "super_batch must be >= 1"),
        ({"super_batch": 4, "staleness": 2}, "staleness must be at least"),
        ({"prefetch": -1}, "prefetch must be an int >= 0"),
        ({"hot_fanout": 0}, "hot_fanout must be >= 1 or -1"),
        ({"device_cache": 1000}, "also pass device"),
        ({"device": "cpu", "device_cache": -5}, "device_cache must be"),
        ({"hot_ratio": 0.0, "cache": "resample"}, "needs hot vertices"),
    ],
)
def test_bad_pipeline_options_name_the_argument(cora, kwargs, match):
    with pytest.raises(ValueError, match=match):
        OrchNeighborLoader(cora, [5, 5], batch_size=16, **{"hot_ratio": 0.1, **kwargs})


def test_pipeline_options_need_num_workers_0(cora):
    with pytest.raises(ValueError, match="num_workers=0"):
        OrchNeighborLoader(cora, [5], batch_size=16, prefetch=2, num_workers=1)


def test_resample_mode_rejects_gcn(cora):
    from torch_geometric.nn import GCN

    loader = OrchNeighborLoader(
        cora, [5, 5], batch_size=16, hot_ratio=0.1, cache="resample"
    )
    with pytest.raises(NotImplementedError, match="GCN with hot_ratio=0"):
        OrchModel(GCN(cora.num_features, 8, num_layers=2), loader)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"prefetch": 2},
        {"device": "cpu"},
        {"hot_ratio": 0.1, "cache": "resample", "super_batch": 2},
        {"hot_ratio": 0.1, "cache": "embedding", "prefetch": 1},
    ],
)
def test_a_second_iteration_leaves_the_first_one_whole(cora, kwargs):
    def epoch(interrupt: bool):
        torch.manual_seed(4)
        loader = OrchNeighborLoader(cora, [5, 5], batch_size=300, shuffle=True,
                                    **kwargs)  # fmt: skip
        if loader.cache is not None:
            model = GAT if kwargs["cache"] == "embedding" else GraphSAGE
            OrchModel(model(cora.num_features, 8, num_layers=2), loader)
        seen = []
        with loader:
            for step, batch in enumerate(loader):
                seen.append(batch.n_id)
                if interrupt and step == 1:
                    next(iter(loader))  # a peek
                    # An evaluation pass, whole, beside the open epoch.
                    assert sum(b.batch_size for b in loader) == cora.num_nodes
                    with pytest.raises(RuntimeError, match="2 iterations"):
                        evaluation = iter(loader)
                        next(evaluation)
                        loader.state_dict()
                    del evaluation
        return seen

    interrupted, whole = epoch(interrupt=True), epoch(interrupt=False)
    assert len(whole) == len(interrupted) == -(-cora.num_nodes // 300)
    for got, want in zip(interrupted, whole, strict=True):
        assert torch.equal(got, want)


@pytest.mark.slow
def test_gat_in_embedding_mode_trains_as_well_as_plain_gat_on_cora(cora):
    from pyg_orch.train import train
    from pyg_orch.train_config import TrainConfig

    def mean_accuracy(hot_ratio: float) -> float:
        config = TrainConfig(model="gat", hot_ratio=hot_ratio)
        runs = [
            train(dataclasses.replace(config, seed=seed), False, cora).test_acc
            for seed in range(3)
        ]
        return sum(runs) / len(runs)

    plain = mean_accuracy(0.0)
    with pytest.warns(UserWarning, match="embedding"):
        embedded = mean_accuracy(0.2)
    assert plain > 0.75
    assert embedded >= plain - 0.015
