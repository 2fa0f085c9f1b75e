"""Re-made hot values on heterogeneous graphs: ``resample`` and ``embedding``.

References are plain PyG models on the whole graph (fan-out ``-1`` makes a
batch exact) and plain PyG convs run on the whole graph with the weights a
step had; none goes through pyg_orch's hooks, caches or kernels.
"""

import itertools
import random
import time

import pytest
import torch
from test_hetero_hot import (
    BATCH,
    HIDDEN,
    OUT,
    SkipGNN,
    build,
    check_close,
    gat,
    sage,
)
from torch import nn
from torch_geometric.nn import (
    GATConv,
    GCNConv,
    HeteroConv,
    Linear,
    SAGEConv,
    to_hetero,
)

from pyg_orch import OrchModel, OrchNeighborLoader
from pyg_orch.datasets import power_law_hetero_graph


@pytest.fixture(scope="module")
def data():
    return power_law_hetero_graph(scale=0.002, num_features=8, seed=3)


class HeteroGAT(nn.Module):
    """Two ``HeteroConv`` layers of ``GATConv``, self loops within a type."""

    def __init__(self, metadata):
        super().__init__()
        node_types, edge_types = metadata

        def layer(out, heads):
            return HeteroConv(
                {
                    et: GATConv((-1, -1), out, heads, add_self_loops=et[0] == et[2])
                    for et in edge_types
                },
                aggr="sum",
            )

        self.conv1, self.conv2 = layer(HIDDEN, 2), layer(HIDDEN, 1)
        self.lin = nn.ModuleDict({t: Linear(HIDDEN, OUT) for t in node_types})

    def forward(self, x_dict, edge_index_dict):
        x_dict = self.conv1(x_dict, edge_index_dict)
        x_dict = {t: x.relu() for t, x in x_dict.items()}
        x_dict = self.conv2(x_dict, edge_index_dict)
        return {t: self.lin[t](x) for t, x in x_dict.items()}


def hetero_gat(metadata):
    return HeteroGAT(metadata)


def bottom_convs(model):
    """The bottom conv of each relation, found by PyG's module names."""
    modules = dict(model.named_modules())
    convs = {}
    for name, module in modules.items():
        key = name.rsplit(".", 1)[-1].strip("<>").replace("___", "__")
        if isinstance(module, GATConv) and key.count("__") == 2:
            convs.setdefault(tuple(key.split("__")), module)
    return convs


def loader_of(data, cache, **kwargs):
    return OrchNeighborLoader(
        data, input_nodes="paper", batch_size=BATCH, shuffle=True, hot_ratio=0.2,
        hot_method="degree", cache=cache, **kwargs,
    )  # fmt: skip


def skip_gat(metadata):
    # PyG's heterogeneous tutorial GAT: each layer is conv(x) + lin(x).
    def conv(out):
        return GATConv((-1, -1), out, add_self_loops=False)

    return to_hetero(SkipGNN(conv), metadata, aggr="sum")


CASES = [
    (gat, "embedding"),
    (hetero_gat, "embedding"),
    (sage, "resample"),
    (skip_gat, "embedding"),
]
IDS = ["to_hetero-gat", "hetero_conv-gat", "to_hetero-sage-resample", "skip-gat"]


# 1. Exact at staleness 0 ----------------------------------------------------


@pytest.mark.parametrize(("make", "cache"), CASES, ids=IDS)
def test_staleness_0_gives_the_whole_graph_model_at_every_step(data, make, cache):
    model, reference = build(make, data)
    loader = loader_of(
        data, cache, num_neighbors=[-1, -1], super_batch=1, staleness=0,
        hot_fanout=-1, prefetch=2,
    )  # fmt: skip
    orch = OrchModel(model, loader)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    served = []
    with loader:
        for step, batch in enumerate(loader):
            if step == 3:
                break
            paper = batch["paper"]
            served.append(paper.hot_index.numel())
            out = orch(batch)
            reference.load_state_dict(model.state_dict())
            with torch.no_grad():
                whole = reference(data.x_dict, data.edge_index_dict)["paper"]
            check_close(out, whole[paper.n_id[:BATCH]])
            optimizer.zero_grad()
            out.pow(2).mean().backward()
            optimizer.step()
    # Hot papers were served: the check above is not vacuous.
    assert sum(served) > 0


# 2. The staleness bound while training ---------------------------------------


def loss_of(out, batch):
    # The papers' classes, folded into the model's OUT outputs.
    papers = batch["paper"]
    return nn.functional.cross_entropy(out, papers.y[: papers.batch_size] % OUT)


def train(orch, loader, steps, on_step=lambda step, batch: None):
    optimizer = torch.optim.Adam(orch.parameters(), lr=0.05)
    with loader:
        for step, batch in enumerate(loader):
            if step == steps:
                break
            out = orch(batch)
            on_step(step, batch)
            optimizer.zero_grad()
            loss_of(out, batch).backward()
            optimizer.step()


@pytest.mark.parametrize("make", [gat, hetero_gat], ids=IDS[:2])
def test_every_embedding_comes_from_weights_at_most_staleness_steps_old(data, make):
    model, reference = build(make, data)
    loader = loader_of(
        data, "embedding", num_neighbors=[4, 3], super_batch=2, staleness=3,
        hot_fanout=-1, prefetch=2,
    )  # fmt: skip
    orch = OrchModel(model, loader)
    rng = random.Random(0)
    snapshot = loader.cache.snapshot

    def slow_snapshot():
        time.sleep(rng.random() * 0.01)
        return snapshot()

    loader.cache.snapshot = slow_snapshot
    states = []  # the weights after each number of steps
    ages = []

    def check(step, batch):
        # Which step's weights made each relation's hot rows: a plain PyG
        # conv on the whole relation with them gives the served values.
        states.append({k: v.clone() for k, v in model.state_dict().items()})
        time.sleep(rng.random() * 0.005)
        for relation, conv in bottom_convs(reference).items():
            store = batch[relation]
            if "hot_agg" not in store or store.hot_agg.numel() == 0:
                continue
            nodes = batch[relation[2]].n_id[batch[relation[2]].hot_index]
            made = None
            for at in range(step, max(-1, step - 4), -1):
                reference.load_state_dict(states[at])
                x = (data[relation[0]].x, data[relation[2]].x)
                with torch.no_grad():
                    want = conv(x, data[relation].edge_index)[nodes]
                if torch.allclose(store.hot_agg, want, atol=1e-5, rtol=1e-4):
                    made = at
                    break
            assert made is not None, (step, relation)
            ages.append(step - made)

    train(orch, loader, 12, check)
    assert len(ages) > 12
    assert max(ages) <= 3
    assert max(ages) > 0  # the weights did age: the bound was tested


def test_every_resampled_buffer_is_used_within_the_bound(data):
    model, _ = build(sage, data)
    loader = loader_of(
        data, "resample", num_neighbors=[4, 3], super_batch=2, staleness=3,
        prefetch=2,
    )  # fmt: skip
    orch = OrchModel(model, loader)
    rng = random.Random(1)
    resample = loader.cache.resample
    steps_done, made = [0], []

    def slow_resample(*args, **kwargs):
        # Buffers are made one after another, in version order.
        made.append(steps_done[0])
        time.sleep(rng.random() * 0.01)
        return resample(*args, **kwargs)

    loader.cache.resample = slow_resample
    used = []

    def count(step, batch):
        used.append((step, made[step // 2]))
        steps_done[0] = step + 1

    train(orch, loader, 12, count)
    assert len(used) == 12
    assert all(step - at <= 3 for step, at in used), used


# 3. Modes, warnings, refusals -------------------------------------------------


def test_gat_switches_the_loader_to_embedding_mode_with_a_warning(data):
    model, _ = build(gat, data)
    loader = loader_of(data, None, num_neighbors=[4, 3])
    with pytest.warns(UserWarning, match="cache='embedding'"):
        OrchModel(model, loader)
    assert loader.cache.mode == "embedding"
    # A model served aggregates switches it back.
    OrchModel(build(sage, data)[0], loader)
    assert loader.cache.mode == "static"


def test_gat_is_refused_by_a_loader_built_to_serve_aggregates(data):
    model, _ = build(gat, data)
    loader = loader_of(data, "resample", num_neighbors=[4, 3])
    with pytest.raises(NotImplementedError, match="build it with cache='embedding'"):
        OrchModel(model, loader)


@pytest.mark.parametrize("hot_ratio", [0.0, 0.2])
def test_a_gcn_relation_is_refused_naming_it(data, hot_ratio):
    def layer(out):
        # GCNConv takes one node type: it runs on the citations only.
        return HeteroConv(
            {
                et: GCNConv(-1, out) if et[0] == et[2] else SAGEConv((-1, -1), out)
                for et in data.edge_types
            }
        )

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1, self.conv2 = layer(HIDDEN), layer(OUT)

        def forward(self, x, edge_index):
            x = self.conv1(x, edge_index)
            return self.conv2({t: v.relu() for t, v in x.items()}, edge_index)

    model, _ = build(lambda metadata: Model(), data)
    loader = OrchNeighborLoader(
        data, [4, 3], input_nodes="paper", batch_size=BATCH, hot_ratio=hot_ratio
    )
    with pytest.raises(NotImplementedError, match=r"GCNConv.*'paper', 'cites'"):
        OrchModel(model, loader)


def test_lazy_parameters_are_refused_before_a_snapshot(data):
    loader = loader_of(data, "embedding", num_neighbors=[4, 3])
    model = gat(data.metadata())  # never run: its parameters are lazy
    with pytest.raises(ValueError, match="run the model once first"):
        OrchModel(model, loader)


def test_resample_values_are_the_relation_aggregates_over_all_sources(data):
    loader = loader_of(data, "resample", num_neighbors=[4, 3])
    OrchModel(build(sage, data)[0], loader)
    cache = loader.cache
    values = cache.resample(fanout=-1, seed=0)
    for relation, value in values.items():
        hot = cache.caches[relation].hot_nodes
        src, dst = data[relation].edge_index
        whole = torch.zeros(data[relation[2]].num_nodes, value.size(1))
        whole.index_reduce_(
            0, dst, data[relation[0]].x[src], "mean", include_self=False
        )
        check_close(value, whole[hot])
    sampled = cache.resample(fanout=2, seed=0)
    assert any(not torch.equal(sampled[r], values[r]) for r in values)


# 4. Checkpoints ----------------------------------------------------------------


@pytest.mark.parametrize(("make", "cache"), CASES[::2], ids=IDS[::2])
def test_a_resumed_epoch_serves_what_the_uninterrupted_one_did(
    data, make, cache, tmp_path
):
    kwargs = dict(num_neighbors=[4, 3], super_batch=2, staleness=3, prefetch=1)

    def start(seed):
        model, _ = build(make, data, seed=seed)
        loader = loader_of(data, cache, **kwargs)
        orch = OrchModel(model, loader)
        return loader, orch, torch.optim.Adam(orch.parameters(), lr=0.05)

    def run(loader, orch, optimizer, stop=None):
        served = []
        for batch in itertools.islice(loader, stop):
            served.append([batch[r].hot_agg.clone() for r in batch.edge_types
                           if "hot_agg" in batch[r]])  # fmt: skip
            out = orch(batch)
            optimizer.zero_grad()
            loss_of(out, batch).backward()
            optimizer.step()
        return served

    torch.manual_seed(0)
    loader, orch, optimizer = start(0)
    with loader:
        uninterrupted = run(loader, orch, optimizer)
    assert len(uninterrupted) > 6

    torch.manual_seed(0)
    loader, orch, optimizer = start(0)
    with loader:
        iterator = iter(loader)
        first = run(iterator, orch, optimizer, stop=3)
        state = {
            "loader": loader.state_dict(),
            "model": orch.state_dict(),
            "optimizer": optimizer.state_dict(),
        }
    assert state["loader"]["position"]["refreshes"]
    torch.save(state, tmp_path / "checkpoint.pt")
    # As a fresh process would: another seed, a new model, the checkpoint.
    torch.manual_seed(123)
    state = torch.load(tmp_path / "checkpoint.pt")
    loader, orch, optimizer = start(7)
    loader.load_state_dict(state["loader"])
    orch.load_state_dict(state["model"])
    optimizer.load_state_dict(state["optimizer"])
    with loader:
        rest = run(loader, orch, optimizer)
    resumed = first + rest
    assert len(resumed) == len(uninterrupted)
    for got, want in zip(resumed, uninterrupted, strict=True):
        assert len(got) == len(want) > 0
        assert all(torch.equal(a, b) for a, b in zip(got, want, strict=True))
