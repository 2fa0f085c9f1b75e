"""Determinism, checkpoint and resume, and a long run that leaks nothing."""

import copy
import gc
import itertools
import os
import re
import resource
import threading

import pytest
import torch
import torch.nn.functional as F
from torch_geometric.nn import GAT, GraphSAGE

from pyg_orch import OrchModel, OrchNeighborLoader
from pyg_orch.datasets import power_law_graph
from pyg_orch.hot.refresher import THREAD_PREFIX


@pytest.fixture(scope="module")
def graph():
    return power_law_graph(3000, avg_degree=8, num_features=16, seed=1)


def make_loader(graph, **kwargs):
    arguments = {
        "num_neighbors": [6, 4],
        "input_nodes": graph.train_mask,
        "batch_size": 128,
        "shuffle": True,
        "hot_ratio": 0.2,
        **kwargs,
    }
    return OrchNeighborLoader(graph, **arguments)


def fingerprint(batch):
    hot = batch.hot_agg if "hot_agg" in batch else torch.zeros(0)
    return batch.n_id.clone(), batch.edge_index.clone(), hot.clone()


def same(first, second):
    return len(first) == len(second) and all(
        all(torch.equal(a, b) for a, b in zip(x, y, strict=True))
        for x, y in zip(first, second, strict=True)
    )


@pytest.mark.parametrize(
    "kwargs",
    [{"prefetch": 2}, {"prefetch": 2, "cache": "resample", "super_batch": 2}],
    ids=["static", "resample"],
)
def test_a_resumed_run_yields_the_batches_of_an_uninterrupted_one(
    graph, kwargs, tmp_path
):
    torch.manual_seed(0)
    loader = served(make_loader(graph, **kwargs))
    with loader:
        uninterrupted = [fingerprint(batch) for batch in loader]
    assert len(uninterrupted) > 6

    torch.manual_seed(0)
    loader = served(make_loader(graph, **kwargs))
    with loader:
        iterator = iter(loader)
        first = [fingerprint(next(iterator)) for _ in range(5)]
        torch.save(loader.state_dict(), tmp_path / "loader.pt")
    assert same(first, uninterrupted[:5])

    # A fresh process would build the loader again: nothing is presampled or
    # aggregated, the hot set and the cache come from the checkpoint.
    torch.manual_seed(123)
    resumed = make_loader(graph, **{**kwargs, "hot_ratio": 0.0, "cache": None})
    state = torch.load(tmp_path / "loader.pt")
    resumed.load_state_dict(state)
    served(resumed)
    assert torch.equal(resumed.hot.nodes, loader.hot.nodes)
    assert resumed.cache.computed().keys() == loader.cache.computed().keys()
    with resumed:
        rest = [fingerprint(batch) for batch in resumed]
    assert same(rest, uninterrupted[5:])
    # The next epoch starts afresh.
    assert resumed.state_dict()["position"] is None


@pytest.mark.parametrize(
    "form",
    [{"hot_ratio": 1}, {"hot_ratio": 0}, {"hot_ratio": 0.0, "hot": torch.arange(50)}],
    ids=["int-one", "int-zero", "given-hot-set"],
)
def test_every_hot_argument_form_round_trips_and_resumes(graph, form):
    torch.manual_seed(0)
    with served(make_loader(graph, prefetch=1, **form)) as loader:
        uninterrupted = [fingerprint(batch) for batch in loader]
    torch.manual_seed(0)
    with served(make_loader(graph, prefetch=1, **form)) as loader:
        iterator = iter(loader)
        first = [fingerprint(next(iterator)) for _ in range(3)]
        state = loader.state_dict()
    loader.load_state_dict(state)  # a loader takes its own checkpoint
    resumed = make_loader(graph, prefetch=1, hot_ratio=0.0)
    resumed.load_state_dict(state)
    assert resumed.hot_ratio == form["hot_ratio"]
    with served(resumed):
        rest = [fingerprint(batch) for batch in resumed]
    assert same(first + rest, uninterrupted)


def served(loader):
    # A hot loader yields batches once a model serves it.
    if loader.cache is not None:
        OrchModel(GraphSAGE(16, 32, num_layers=2), loader)
    return loader


def mid_epoch_state(loader, batches=3):
    with loader:
        for _ in itertools.islice(loader, batches):
            pass
        return loader.state_dict()


def other_graph(name, graph):
    if name == "smaller":
        return power_law_graph(500, avg_degree=8, num_features=16, seed=1)
    # As large as `graph`: only the fingerprints tell them apart.
    other = copy.copy(graph)
    if name == "other-edges":
        source, target = graph.edge_index
        other.edge_index = torch.stack([(source + 1) % graph.num_nodes, target])
    else:
        other.x = graph.x + 1
    return other


@pytest.mark.parametrize(
    ("name", "kwargs", "refused"),
    [
        ("smaller", {}, "'identity.num_nodes' is 500, but this loader's is 3000"),
        ("smaller", {"hot_ratio": 0.0, "prefetch": 2}, "'identity.num_nodes' is 500"),
        ("other-edges", {}, "'identity.edges'"),
        ("other-features", {"prefetch": 2}, "'identity.x'"),
    ],
    ids=["smaller-graph", "smaller-graph-no-hot", "other-edges", "other-features"],
)
def test_a_checkpoint_of_another_graph_is_refused_at_load(graph, name, kwargs, refused):
    torch.manual_seed(0)
    state = mid_epoch_state(served(make_loader(other_graph(name, graph), **kwargs)))
    loader = served(make_loader(graph, **kwargs))
    hot = loader.hot
    with pytest.raises(ValueError, match=refused):
        loader.load_state_dict(state)
    # Refused before anything changed.
    assert loader.hot is hot
    assert loader.state_dict()["position"] is None


NUM_CLASSES = 10


def start_training(graph, conv, **kwargs):
    loader = make_loader(graph, **kwargs)
    model = OrchModel(conv(16, 32, num_layers=2, out_channels=NUM_CLASSES), loader)
    return loader, model, torch.optim.Adam(model.parameters(), lr=0.01)


def train(loader, model, optimizer, batches=None):
    # Losses and batches of `batches` training steps (None: the epoch's rest).
    losses, seen = [], []
    for batch in itertools.islice(loader, batches):
        optimizer.zero_grad()
        loss = F.cross_entropy(model(batch), batch.y[: batch.batch_size])
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
        seen.append(fingerprint(batch))
    return losses, seen


def interrupted_and_resumed(graph, conv, kwargs, stop, order, path):
    torch.manual_seed(0)
    loader, model, optimizer = start_training(graph, conv, **kwargs)
    with loader:
        train(loader, model, optimizer, stop)
        torch.save(
            {
                "loader": loader.state_dict(),
                "model": model.state_dict(),
                "optimizer": optimizer.state_dict(),
            },
            path,
        )
    # A fresh process: another seed, a new model, the checkpoint loaded.
    torch.manual_seed(123)
    state = torch.load(path)
    loader = make_loader(graph, **kwargs)
    gnn = conv(16, 32, num_layers=2, out_channels=NUM_CLASSES)
    if order == "load-then-wrap":
        loader.load_state_dict(state["loader"])
        model = OrchModel(gnn, loader)
    else:
        model = OrchModel(gnn, loader)
        loader.load_state_dict(state["loader"])
    model.load_state_dict(state["model"])
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    optimizer.load_state_dict(state["optimizer"])
    with loader:
        return train(loader, model, optimizer)


@pytest.mark.filterwarnings("ignore:OrchModel. the bottom layer")
@pytest.mark.parametrize("order", ["load-then-wrap", "wrap-then-load"])
@pytest.mark.parametrize(
    ("conv", "kwargs", "stop"),
    [
        (GAT, {}, 5),
        (GAT, {"cache": "embedding", "super_batch": 2, "prefetch": 2}, 4),
        (GraphSAGE, {"prefetch": 2}, 5),
        (GraphSAGE, {"cache": "resample", "super_batch": 2, "prefetch": 2}, 5),
    ],
    ids=["embedding", "embedding-prefetch", "static", "resample"],
)
def test_a_resumed_epoch_trains_exactly_as_the_uninterrupted_one(
    graph, conv, kwargs, stop, order, tmp_path
):
    torch.manual_seed(0)
    loader, model, optimizer = start_training(graph, conv, **kwargs)
    with loader:
        losses, batches = train(loader, model, optimizer)
    assert len(losses) > stop + 2

    rest_losses, rest_batches = interrupted_and_resumed(
        graph, conv, kwargs, stop, order, tmp_path / "checkpoint.pt"
    )
    assert same(rest_batches, batches[stop:])
    assert rest_losses == losses[stop:]


@pytest.mark.filterwarnings("ignore:OrchModel. the bottom layer")
def test_saved_snapshots_that_do_not_fit_the_model_are_refused_at_the_first_batch(
    graph,
):
    torch.manual_seed(0)
    loader, _, _ = start_training(graph, GAT, super_batch=2, staleness=3)
    state = mid_epoch_state(loader)
    assert state["position"]["refreshes"]
    loader = make_loader(graph, super_batch=2, staleness=3)
    OrchModel(GAT(16, 8, num_layers=2, out_channels=NUM_CLASSES), loader)
    loader.load_state_dict(state)
    with pytest.raises(ValueError, match=r"'position.refreshes\[\d\]' holds weights"):
        next(iter(loader))


@pytest.fixture(scope="module")
def resample_state(graph):
    # Taken mid-epoch, with hot buffers started: every key has a value.
    torch.manual_seed(0)
    loader = served(make_loader(graph, cache="resample", super_batch=2, prefetch=2))
    state = mid_epoch_state(loader)
    assert state["position"]["refreshes"]
    return state


DELETE = object()


def edit_key(state, path, value):
    *parents, last = path
    for key in parents:
        state = state[key]
    if value is DELETE:
        del state[last]
    else:
        state[last] = value


@pytest.mark.parametrize(
    ("path", "value", "refused"),
    [
        pytest.param(
            ["position", "next"], 40, "'position.next' must be an int in [0, 15)",
            id="next-past-the-end",
        ),
        pytest.param(
            ["position", "next"], -1, "'position.next' must be an int in [0, 15)",
            id="next-negative",
        ),
        pytest.param(
            ["cache_mode"], "bogus", "'cache_mode' must be one of",
            id="bogus-cache-mode",
        ),
        pytest.param(
            ["position"], DELETE, "the checkpoint lacks the keys ['position']",
            id="missing-key",
        ),
        pytest.param(
            ["position", "jobs"], DELETE, "'position' lacks the keys ['jobs']",
            id="missing-position-key",
        ),
        pytest.param(["extra"], 1, "has unknown keys ['extra']", id="unknown-key"),
        pytest.param(
            ["identity"], {}, "'identity' lacks the keys", id="identity-keys"
        ),
        pytest.param(
            ["hot_ratio"], "0.2", "'hot_ratio' must be a fraction", id="hot-ratio"
        ),
        pytest.param(
            ["hot_nodes"], torch.tensor([3000]), "'hot_nodes' holds node ids outside",
            id="hot-node-range",
        ),
        pytest.param(
            ["hot_method"], 7, "'hot_method' must be one of", id="hot-method"
        ),
        pytest.param(
            ["cache_values", "mean"], torch.zeros(2, 16),
            "'cache_values.mean' must be a tensor of shape", id="cache-values-shape",
        ),
        pytest.param(
            ["position", "jobs", 0, 0], 1800,
            "'position.jobs' holds the seed index 1800", id="seed-index-range",
        ),
        pytest.param(
            ["position", "jobs", 0], [], "'position.jobs' must be", id="empty-batch"
        ),
        pytest.param(
            ["position", "generator_state"], torch.zeros(3),
            "'position.generator_state' is not", id="generator-state",
        ),
        pytest.param(
            ["position", "refresh_seed"], -1, "'position.refresh_seed' must be",
            id="refresh-seed",
        ),
        pytest.param(
            ["position", "refreshes"], {9: (0, None)}, "'position.refreshes[9]'",
            id="refresh-version",
        ),
        pytest.param(
            ["position", "refreshes", 1], (2, {}),
            "'position.refreshes[1][1]' must be None", id="refresh-weights",
        ),
    ],
)  # fmt: skip
def test_a_bad_checkpoint_key_is_refused_at_load_by_name(
    graph, resample_state, path, value, refused
):
    state = copy.deepcopy(resample_state)
    edit_key(state, path, value)
    loader = make_loader(graph, hot_ratio=0.0, super_batch=2, prefetch=2)
    with pytest.raises(ValueError, match=re.escape(refused)):
        loader.load_state_dict(state)
    # Refused before anything changed.
    assert loader.hot is None and loader.state_dict()["position"] is None


@pytest.mark.parametrize(
    ("kwargs", "refused"),
    [
        ({"batch_size": 64}, "'identity.batch_size' is 128, but this loader's is 64"),
        ({"num_neighbors": [6, 3]}, "'identity.num_neighbors' is [6, 4], but"),
        ({"super_batch": 4}, "'identity.super_batch' is 2, but this loader's is 4"),
        ({"cache": "static"}, "'cache_mode' is 'resample', but this loader was"),
    ],
    ids=["batch-size", "fan-outs", "super-batch", "cache-mode"],
)
def test_a_checkpoint_of_a_loader_with_other_arguments_is_refused_at_load(
    graph, resample_state, kwargs, refused
):
    arguments = {"hot_ratio": 0.0, "super_batch": 2, "prefetch": 2, **kwargs}
    loader = make_loader(graph, **arguments)
    with pytest.raises(ValueError, match=re.escape(refused)):
        loader.load_state_dict(resample_state)


def test_a_position_is_refused_by_a_loader_without_its_pipeline(graph):
    torch.manual_seed(0)
    state = mid_epoch_state(served(make_loader(graph, prefetch=2)))
    loader = make_loader(graph, hot_ratio=0.0)
    with pytest.raises(ValueError, match="'position' holds an unfinished epoch"):
        loader.load_state_dict(state)


def test_a_loaded_position_is_saved_again_until_it_resumes(graph, resample_state):
    loader = make_loader(graph, hot_ratio=0.0, super_batch=2, prefetch=2)
    loader.load_state_dict(resample_state)
    again = loader.state_dict()["position"]
    assert again["next"] == resample_state["position"]["next"]
    assert again["refreshes"] == resample_state["position"]["refreshes"]


def test_without_a_pipeline_a_checkpoint_starts_a_new_epoch(graph):
    loader = served(make_loader(graph))
    next(iter(loader))
    assert loader.state_dict()["position"] is None


def train_epoch_losses(graph, seed, **kwargs):
    torch.manual_seed(seed)
    loader, model, optimizer = start_training(graph, GraphSAGE, **kwargs)
    with loader:
        return train(loader, model, optimizer)


@pytest.mark.parametrize(
    "kwargs",
    [{}, {"prefetch": 3}, {"prefetch": 2, "cache": "resample"}],
    ids=["plain", "prefetch", "resample"],
)
def test_a_fixed_seed_gives_identical_batches_and_losses(graph, kwargs):
    losses, batches = train_epoch_losses(graph, 7, **kwargs)
    again_losses, again_batches = train_epoch_losses(graph, 7, **kwargs)
    assert losses == again_losses
    assert same(batches, again_batches)
    other_losses, _ = train_epoch_losses(graph, 8, **kwargs)
    assert losses != other_losses


def resident_mib() -> float:
    with open("/proc/self/statm") as statm:
        pages = int(statm.read().split()[1])
    return pages * resource.getpagesize() / 2**20


@pytest.mark.slow
def test_fifty_epochs_keep_memory_flat_and_leak_no_thread_or_file():
    graph = power_law_graph(20_000, avg_degree=10, num_features=32, seed=2)
    torch.manual_seed(0)
    loader = make_loader(
        graph, batch_size=512, prefetch=2, cache="resample", super_batch=4
    )
    model = OrchModel(
        GraphSAGE(32, 64, num_layers=2, out_channels=int(graph.y.max()) + 1), loader
    )
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    threads = threading.active_count()
    files = len(os.listdir("/proc/self/fd"))
    resident = []
    for _ in range(50):
        with loader:
            for batch in loader:
                optimizer.zero_grad()
                F.cross_entropy(model(batch), batch.y[: batch.batch_size]).backward()
                optimizer.step()
        loader.stats.reset()
        gc.collect()
        resident.append(resident_mib())
    # Allocator pools settle during the first epochs; after that, growth over
    # 45 epochs must stay within 2 % (and 16 MiB) of what the process holds.
    warm = resident[4]
    assert max(resident[5:]) - warm <= max(0.02 * warm, 16), resident
    assert threading.active_count() == threads
    assert not [t for t in threading.enumerate() if t.name.startswith(THREAD_PREFIX)]
    assert len(os.listdir("/proc/self/fd")) == files
