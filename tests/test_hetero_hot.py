"""Hot nodes on heterogeneous graphs, checked against plain PyG.

The references are plain PyG models run on the whole graph (fan-out ``-1``
makes a batch exact, so its seeds' outputs are the whole-graph outputs' rows)
and aggregations computed here with ``torch_geometric.utils.scatter``: none
of them goes through pyg_orch's hooks, caches or kernels.
"""

import copy
import math

import pytest
import torch
from torch import nn
from torch.testing import assert_close
from torch_geometric.nn import (
    GAT,
    GIN,
    GINConv,
    GraphConv,
    GraphSAGE,
    HeteroConv,
    Linear,
    SAGEConv,
    to_hetero,
)
from torch_geometric.nn.models.basic_gnn import BasicGNN
from torch_geometric.utils import scatter

from pyg_orch import OrchModel, OrchNeighborLoader
from pyg_orch.datasets import power_law_hetero_graph

BATCH = 64
HIDDEN, OUT = 16, 4


@pytest.fixture(scope="module")
def data():
    return power_law_hetero_graph(scale=0.002, num_features=8, seed=3)


# Models -------------------------------------------------------------------


class GraphConvGNN(BasicGNN):
    """A ``BasicGNN`` of ``GraphConv`` layers (PyG ships none)."""

    supports_edge_weight = False
    supports_edge_attr = False

    def init_conv(self, in_channels, out_channels, **kwargs):
        return GraphConv(in_channels, out_channels, **kwargs)


# The bottom conv of each relation of the mixed HeteroConv model, and its
# aggregation of raw source features.
MIXED = {
    "affiliated_with": ("sage", "mean"),
    "rev_affiliated_with": ("gin", "sum"),
    "writes": ("sage", "mean"),
    "rev_writes": ("graph", "mean"),
    "cites": ("graph", "sum"),
    "rev_cites": ("gin", "sum"),
    "has_topic": ("graph", "max"),
    "rev_has_topic": ("sage", "max"),
}


def mixed_conv(relation):
    kind, aggr = MIXED[relation]
    if kind == "sage":
        return SAGEConv((-1, -1), HIDDEN, aggr=aggr)
    if kind == "graph":
        return GraphConv((-1, -1), HIDDEN, aggr=aggr)
    mlp = nn.Sequential(Linear(-1, HIDDEN), nn.ReLU(), Linear(HIDDEN, HIDDEN))
    return GINConv(mlp, train_eps=True)


class HeteroConvNet(nn.Module):
    """Two ``HeteroConv`` layers mixing SAGEConv, GraphConv and GINConv."""

    def __init__(self, metadata, pre_linear=False):
        super().__init__()
        node_types, edge_types = metadata
        self.pre = (
            nn.ModuleDict({t: Linear(-1, 8) for t in node_types})
            if pre_linear
            else None
        )
        self.conv1 = HeteroConv(
            {et: mixed_conv(et[1]) for et in edge_types}, aggr="sum"
        )
        self.conv2 = HeteroConv(
            {et: mixed_conv(et[1]) for et in edge_types}, aggr="mean"
        )
        self.lin = nn.ModuleDict({t: Linear(HIDDEN, OUT) for t in node_types})

    def forward(self, x_dict, edge_index_dict):
        if self.pre is not None:
            x_dict = {t: self.pre[t](x) for t, x in x_dict.items()}
        x_dict = self.conv1(x_dict, edge_index_dict)
        x_dict = {t: x.relu() for t, x in x_dict.items()}
        x_dict = self.conv2(x_dict, edge_index_dict)
        return {t: self.lin[t](x) for t, x in x_dict.items()}


def sage(metadata):
    return to_hetero(GraphSAGE((-1, -1), HIDDEN, 2, OUT), metadata)


def sage_max(metadata):
    return to_hetero(GraphSAGE((-1, -1), HIDDEN, 2, OUT, aggr="max"), metadata)


def gin(metadata):
    return to_hetero(GIN(-1, HIDDEN, 2, OUT), metadata)


def graph_conv(metadata):
    return to_hetero(GraphConvGNN((-1, -1), HIDDEN, 2, OUT), metadata)


def hetero_conv(metadata):
    return HeteroConvNet(metadata)


def gat(metadata):
    return to_hetero(GAT((-1, -1), HIDDEN, 2, OUT, add_self_loops=False), metadata)


MODELS = [sage, sage_max, gin, graph_conv, hetero_conv]


def build(make, data, seed=0):
    """The model, its lazy parameters initialised, and a hook-free copy of it."""
    torch.manual_seed(seed)
    model = make(data.metadata())
    with torch.no_grad():
        model(data.x_dict, data.edge_index_dict)
    return model, copy.deepcopy(model)


# Helpers -------------------------------------------------------------------


def hot_by_type(loader):
    """The loader's hot nodes per node type, as local ids of that type."""
    layout = loader.node_sampler.layout
    offsets = layout.graph[6].tolist()
    nodes = loader.hot.nodes
    return {
        node_type: nodes[(nodes >= offsets[k]) & (nodes < offsets[k + 1])] - offsets[k]
        for k, node_type in enumerate(layout.node_types)
    }


def hot_by_degree(data, ratio):
    """The hot nodes per type of a degree-method loader of paper seeds."""
    loader = OrchNeighborLoader(
        data, [4, 3], input_nodes="paper", batch_size=BATCH, hot_ratio=ratio,
        hot_method="degree",
    )  # fmt: skip
    return hot_by_type(loader)


def in_degree(data, node_type):
    """In-degree of every node of ``node_type``, summed over its relations."""
    degree = torch.zeros(data[node_type].num_nodes, dtype=torch.long)
    for edge_type in data.edge_types:
        if edge_type[2] == node_type:
            dst = data[edge_type].edge_index[1]
            degree += torch.bincount(dst, minlength=degree.numel())
    return degree


def relation_degree(data, edge_type):
    dst = data[edge_type].edge_index[1]
    return torch.bincount(dst, minlength=data[edge_type[2]].num_nodes)


def frontier(store):
    return store.n_id[: sum(store.num_sampled_nodes[:-1])]


def check_close(got, want):
    """Equal up to float32 rounding of sums in another order."""
    scale = max(1.0, float(want.detach().abs().max())) if want.numel() else 1.0
    assert_close(got, want, atol=1e-5 * scale, rtol=1e-4)


def check_gradients(model, reference):
    """Each parameter's gradient equals the reference's; most are non-zero.

    The tolerance is relative to the largest gradient entry of the parameter:
    sum aggregations over hubs make some gradients large, and float32 sums
    in another order differ by a few units in the last place of those.
    """
    expected = dict(reference.named_parameters())
    nonzero = 0
    for name, parameter in model.named_parameters():
        want = expected[name].grad
        got = parameter.grad
        want = torch.zeros_like(parameter) if want is None else want
        got = torch.zeros_like(parameter) if got is None else got
        scale = max(1.0, float(want.detach().abs().max()))
        assert_close(
            got, want, atol=1e-4 * scale, rtol=1e-3, msg=lambda m, n=name: f"{n}: {m}"
        )
        nonzero += bool(want.abs().sum() > 0)
    assert nonzero >= len(expected) // 3


def check_exact(orch, model, reference, batch, data):
    """The seeds' outputs and every gradient equal the whole-graph model's."""
    out = orch(batch)
    whole = reference(data.x_dict, data.edge_index_dict)["paper"]
    expected = whole[batch["paper"].n_id[:BATCH]]
    assert out.shape == (BATCH, OUT)
    check_close(out, expected)
    out.pow(2).sum().backward()
    expected.pow(2).sum().backward()
    check_gradients(model, reference)


# 1. Exactness with fan-out -1 -----------------------------------------------


# Every model hot in every type runs with the README's pytest; the per-type
# and cold variants (seconds each) run with the slow tests.
@pytest.mark.parametrize(
    "hot_ratio",
    [
        0.3,
        pytest.param({"paper": 0.3}, marks=pytest.mark.slow),
        pytest.param(0.0, marks=pytest.mark.slow),
    ],
    ids=["all", "papers", "none"],
)
@pytest.mark.parametrize("make", MODELS, ids=lambda f: f.__name__)
def test_exact_forward_and_gradients_against_whole_graph(data, make, hot_ratio):
    model, reference = build(make, data)
    loader = OrchNeighborLoader(
        data, [-1, -1], input_nodes="paper", batch_size=BATCH, hot_ratio=hot_ratio
    )
    orch = OrchModel(model, loader)
    torch.manual_seed(1)
    batch = next(iter(loader))
    paper = batch["paper"]
    if hot_ratio:
        # Hot papers in hop 1, whose last hop is not sampled, come from the
        # cache: the test would pass vacuously without them.
        assert (paper.hot_index >= paper.num_sampled_nodes[0]).any()
        assert paper.hot_index.numel() > 0
        hot_authors = batch["author"].get("hot_index")
        only_papers = isinstance(hot_ratio, dict)
        assert (hot_authors is None) == only_papers
    else:
        assert "hot_index" not in paper and loader.hot is None

    check_exact(orch, model, reference, batch, data)


@pytest.mark.parametrize("make", MODELS, ids=lambda f: f.__name__)
def test_bf16_forward_and_gradients_match_the_whole_graph_under_autocast(data, make):
    model, reference = build(make, data)
    loader = OrchNeighborLoader(
        data, [-1, -1], input_nodes="paper", batch_size=BATCH, hot_ratio=0.2
    )
    orch = OrchModel(model, loader, precision="bf16")
    batch = next(iter(loader))
    assert batch["paper"].hot_index.numel() > 0
    out = orch(batch)
    assert out.dtype == torch.bfloat16
    # The plain model on the whole graph under the same autocast: against
    # float64 both are off by as much (up to a fifth of the largest entry of
    # a weight's gradient, for sums over hubs), so float64 tells nothing.
    with torch.autocast("cpu", dtype=torch.bfloat16):
        whole = reference(data.x_dict, data.edge_index_dict)["paper"]
    expected = whole[batch["paper"].n_id[:BATCH]]
    scale = float(expected.abs().max())
    assert_close(out.float(), expected.float(), atol=2**-7 * scale, rtol=2**-7)

    out.float().pow(2).sum().backward()
    expected.float().pow(2).sum().backward()
    for (name, got), want in zip(
        model.named_parameters(), reference.parameters(), strict=True
    ):
        if want.grad is None:
            assert got.grad is None or not got.grad.any(), name
            continue
        assert_close(
            got.grad, want.grad, atol=2**-6 * float(want.grad.abs().max()), rtol=0,
            msg=lambda message, name=name: f"{name}: {message}",
        )  # fmt: skip


def bf16_features(make, data, precision):
    """A model served by a loader of bfloat16 features, and a hot batch."""
    model, reference = build(make, data)
    loader = OrchNeighborLoader(
        data, [-1, -1], input_nodes="paper", batch_size=BATCH, hot_ratio=0.2,
        feature_dtype=torch.bfloat16,
    )  # fmt: skip
    orch = OrchModel(model, loader, precision=precision)
    batch = next(iter(loader))
    assert all(x.dtype == torch.bfloat16 for x in batch.x_dict.values())
    assert batch["paper"].hot_index.numel() > 0
    assert data["paper"].x.dtype == torch.float32  # the user's graph as it was
    widened = {t: x.to(torch.bfloat16).float() for t, x in data.x_dict.items()}
    return model, reference, orch, batch, widened


@pytest.mark.parametrize("make", [sage, hetero_conv], ids=lambda f: f.__name__)
def test_bf16_features_match_the_whole_graph_under_autocast(data, make):
    _, reference, orch, batch, widened = bf16_features(make, data, "bf16")
    out = orch(batch).float()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        whole = reference(widened, data.edge_index_dict)["paper"]
    expected = whole[batch["paper"].n_id[:BATCH]].float()
    scale = float(expected.abs().max())
    assert_close(out, expected, atol=2**-7 * scale, rtol=2**-7)


def test_bf16_features_in_an_fp32_model_match_the_widened_features(data):
    _, reference, orch, batch, widened = bf16_features(sage, data, "fp32")
    out = orch(batch)
    assert out.dtype == torch.float32
    with torch.no_grad():
        whole = reference(widened, data.edge_index_dict)
    # The hot aggregates are kept in bfloat16: their rounding, no more.
    expected = whole["paper"][batch["paper"].n_id[:BATCH]]
    scale = float(expected.abs().max())
    assert_close(out, expected, atol=2**-7 * scale, rtol=2**-7)
    # Inference aggregates the widened features themselves.
    inferred = orch.inference(with_bf16_x(data))
    for node_type, value in whole.items():
        check_close(inferred[node_type], value)


def with_bf16_x(data):
    half = data.clone()
    for store in half.node_stores:
        store.x = store.x.to(torch.bfloat16)
    return half


def test_a_bf16_step_on_bf16_features_casts_no_activation(data):
    # As on one node type (test_precision.py): what a step casts is the
    # weights and their gradients, the logits and a few scalars, never a
    # layer's rows.
    model, _, orch, batch, _ = bf16_features(sage, data, "bf16")

    def step():
        orch(batch).float().square().mean().backward()

    step()
    with torch.profiler.profile(record_shapes=True) as profiler:
        step()
    cast = sum(
        math.prod(event.input_shapes[0])
        for event in profiler.events()
        if event.name == "aten::_to_copy" and event.input_shapes
    )
    weights = sum(t.numel() for t in [*model.parameters(), *model.buffers()])
    allowed = 2 * weights + 2 * BATCH * OUT + 16
    assert cast <= allowed
    assert batch["paper"].x.numel() > allowed  # one cast of the features would tell


def test_device_cache_serves_the_same_hot_values_from_the_device(data):
    # CPU as the device: the GPU path runs the same code.
    def loader_and_model(**kwargs):
        torch.manual_seed(3)
        loader = OrchNeighborLoader(
            data, [4, 3], input_nodes="paper", batch_size=BATCH, shuffle=True,
            hot_ratio=0.2, hot_method="degree", device="cpu", **kwargs,
        )  # fmt: skip
        return loader, OrchModel(build(sage, data)[0], loader)

    loader, plain_model = loader_and_model()
    plain = list(loader)
    assert loader.cache.device is None
    value_bytes = sum(
        cache.hot_nodes.numel() * data[source].x[0].nbytes
        for (source, _, _), cache in loader.cache.caches.items()
    )
    for budget, on_device in [(value_bytes - 1, False), (value_bytes, True)]:
        loader, model = loader_and_model(device_cache=budget)
        assert (loader.cache.device is not None) == on_device
        for got, want in zip(loader, plain, strict=True):
            for edge_type in data.edge_types:
                assert "hot_slot" not in got[edge_type]
                if "hot_agg" in want[edge_type]:
                    assert torch.equal(got[edge_type].hot_agg, want[edge_type].hot_agg)
        assert torch.equal(model(got), plain_model(want))
        # Before the move to the device: each relation's rows there, or values.
        unmoved = loader._make_batch(next(iter(loader.batch_sampler)))
        key = "hot_slot" if on_device else "hot_agg"
        assert {r for r in unmoved.edge_types if key in unmoved[r]} == set(
            loader.cache.caches
        )
    # The served rows are the hot papers' full-neighbourhood means.
    cites = ("paper", "cites", "paper")
    src, dst = data[cites].edge_index
    size = data["paper"].num_nodes
    means = scatter(data["paper"].x[src], dst, dim=0, dim_size=size, reduce="mean")
    ids = got["paper"].n_id[got["paper"].hot_index]
    check_close(got[cites].hot_agg, means[ids])


# 2. Sampled fan-outs: hot nodes are not expanded in the last hop -------------


def test_last_hop_expands_only_cold_nodes(data):
    fanouts = [4, 3]
    loader = OrchNeighborLoader(
        data, fanouts, input_nodes="paper", batch_size=BATCH, hot_ratio=0.3,
        hot_method="degree", shuffle=True,
    )  # fmt: skip
    model, _ = build(sage, data)
    OrchModel(model, loader)
    hot = hot_by_type(loader)
    degree = {et: relation_degree(data, et) for et in data.edge_types}
    hot_last = cold_last = hot_earlier = 0
    torch.manual_seed(2)
    for _, batch in zip(range(3), loader, strict=False):
        for node_type in batch.node_types:
            store = batch[node_type]
            # hot_index: exactly the frontier nodes of the hot set.
            is_hot = torch.isin(frontier(store), hot[node_type])
            assert torch.equal(store.hot_index, is_hot.nonzero().view(-1))
        for edge_type in batch.edge_types:
            dst_store = batch[edge_type[2]]
            first, last = batch[edge_type].num_sampled_edges
            dst = batch[edge_type].edge_index[1]
            hop0, hop1, _ = dst_store.num_sampled_nodes
            hot_local = dst_store.hot_index
            # Last hop: its destinations are hop-1 nodes, never hot ones.
            last_dst = dst[first:]
            assert ((last_dst >= hop0) & (last_dst < hop0 + hop1)).all()
            assert not torch.isin(last_dst, hot_local).any()
            # Every cold hop-1 node has min(fan-out, degree) edges, hot ones 0.
            count = torch.bincount(last_dst - hop0, minlength=hop1)
            want = degree[edge_type][dst_store.n_id[hop0 : hop0 + hop1]]
            want = want.clamp(max=fanouts[1])
            hot1 = hot_local[hot_local >= hop0] - hop0
            want[hot1] = 0
            assert torch.equal(count, want)
            hot_last += int((degree[edge_type][dst_store.n_id[hop0 + hot1]] > 0).sum())
            cold_last += int(want.sum())
            # Hop 1: every hop-0 node, hot or cold, keeps min(fan-out, degree).
            first_dst = dst[:first]
            assert (first_dst < hop0).all()
            count = torch.bincount(first_dst, minlength=hop0)
            want = degree[edge_type][dst_store.n_id[:hop0]].clamp(max=fanouts[0])
            assert torch.equal(count, want)
            hot0 = hot_local[hot_local < hop0]
            hot_earlier += int(count[hot0].sum())
    # Hot nodes with neighbours were left unexpanded in the last hop, cold
    # ones expanded, and hot seeds kept their hop-1 edges.
    assert hot_last > 0 and cold_last > 0 and hot_earlier > 0


def test_hot_values_are_full_neighbourhood_aggregates(data):
    # Each relation's hot_agg is the aggregate of the raw source features over
    # the whole neighbourhood, with the aggregation of that relation's conv.
    loader = OrchNeighborLoader(
        data, [4, 3], input_nodes="paper", batch_size=BATCH, hot_ratio=0.3,
        hot_method="degree",
    )  # fmt: skip
    model, _ = build(hetero_conv, data)
    OrchModel(model, loader)
    torch.manual_seed(3)
    batch = next(iter(loader))
    checked = set()
    for edge_type in batch.edge_types:
        src_type, relation, dst_type = edge_type
        store = batch[dst_type]
        nodes = frontier(store)[store.hot_index]
        src, dst = data[edge_type].edge_index
        full = scatter(
            data[src_type].x[src], dst, 0, data[dst_type].num_nodes,
            reduce=MIXED[relation][1],
        )  # fmt: skip
        check_close(batch[edge_type].hot_agg, full[nodes])
        if nodes.numel():
            checked.add(MIXED[relation][1])
    assert checked == {"mean", "sum", "max"}


# 3. Per-type hot sets --------------------------------------------------------


def test_dict_ratio_makes_only_the_named_types_hot(data):
    for method in ("degree", "presample"):
        loader = OrchNeighborLoader(
            data, [4, 3], input_nodes="paper", batch_size=BATCH,
            hot_ratio={"paper": 0.2}, hot_method=method,
        )  # fmt: skip
        hot = hot_by_type(loader)
        limit = round(0.2 * data["paper"].num_nodes)
        if method == "degree":
            assert hot["paper"].numel() == limit
        else:
            assert 0 < hot["paper"].numel() <= limit
        assert all(hot[t].numel() == 0 for t in data.node_types if t != "paper")


def test_float_ratio_makes_every_eligible_type_hot(data):
    ratio = 0.2
    hot = hot_by_degree(data, ratio)
    for node_type in data.node_types:
        degree = in_degree(data, node_type)
        want = min(round(ratio * degree.numel()), int((degree > 0).sum()))
        assert want > 0
        assert hot[node_type].numel() == want, node_type
    # presample counts frontier appearances: at most the fraction of each
    # type, and some of each type that shows up in frontiers (institutions,
    # two hops from papers, are only ever in the last hop).
    loader = OrchNeighborLoader(
        data, [4, 3], input_nodes="paper", batch_size=BATCH, hot_ratio=ratio
    )
    hot = hot_by_type(loader)
    for node_type in data.node_types:
        assert hot[node_type].numel() <= round(ratio * data[node_type].num_nodes)
    for node_type in ("paper", "author", "field_of_study"):
        assert hot[node_type].numel() > 0, node_type


def test_type_whose_source_has_no_features_cannot_be_hot(data):
    # institution -> author (rev_affiliated_with): authors' hot values would
    # need institution features.
    partial = copy.copy(data)
    del partial["institution"].x
    assert "x" in data["institution"]
    loader = OrchNeighborLoader(
        partial, [4, 3], input_nodes="paper", batch_size=BATCH, hot_ratio=0.2,
        hot_method="degree",
    )  # fmt: skip
    hot = hot_by_type(loader)
    assert hot["author"].numel() == 0
    for node_type in ("paper", "institution", "field_of_study"):
        assert hot[node_type].numel() > 0, node_type
    with pytest.raises(ValueError, match="author"):
        OrchNeighborLoader(
            partial, [4, 3], input_nodes="paper", batch_size=BATCH,
            hot_ratio={"author": 0.2}, hot_method="degree",
        )  # fmt: skip


def test_degree_method_picks_the_highest_in_degree_of_each_type(data):
    ratio = 0.25
    hot = hot_by_degree(data, ratio)
    for node_type in data.node_types:
        degree = in_degree(data, node_type).tolist()
        size = min(round(ratio * len(degree)), sum(d > 0 for d in degree))
        # Highest degree first, ties to the lower id.
        ranked = sorted(range(len(degree)), key=lambda i: (-degree[i], i))
        assert hot[node_type].tolist() == sorted(ranked[:size]), node_type
        cold = torch.ones(len(degree), dtype=torch.bool)
        cold[hot[node_type]] = False
        degree = torch.tensor(degree)
        assert degree[hot[node_type]].min() >= degree[cold].max()


# 4. Inference ----------------------------------------------------------------


@pytest.mark.parametrize("make", [sage, hetero_conv], ids=lambda f: f.__name__)
def test_inference_matches_the_whole_graph_forward(data, make):
    model, reference = build(make, data)
    loader = OrchNeighborLoader(
        data, [4, 3], input_nodes="paper", batch_size=BATCH, hot_ratio=0.3,
        hot_method="degree",
    )  # fmt: skip
    orch = OrchModel(model, loader)
    out = orch.inference(data)
    with torch.no_grad():
        expected = reference(data.x_dict, data.edge_index_dict)
    assert set(out) == set(expected) == set(data.node_types)
    for node_type, value in expected.items():
        check_close(out[node_type], value)


def test_inference_rebuilds_a_relation_only_for_new_or_changed_edges(data):
    model, reference = build(sage, data)
    orch = OrchModel(model)
    relation = ("paper", "cites", "paper")
    shuffled = data.clone()
    edge_index = data[relation].edge_index
    # Another graph whose edges may be allocated where the first one's were.
    shuffled[relation].edge_index = edge_index[:, ::2].flip(0).contiguous()
    changed = data.clone()
    changed[relation].edge_index = edge_index.clone()

    def check(graph):
        out = orch.inference(graph)
        with torch.no_grad():
            expected = reference(graph.x_dict, graph.edge_index_dict)
        for node_type, value in expected.items():
            check_close(out[node_type], value)

    for graph in (data, shuffled, data, changed):
        check(graph)
    sources = changed[relation].edge_index[0]
    sources.copy_(sources.flip(0))  # the same tensor, changed in place
    check(changed)


def test_later_inferences_reuse_raw_aggregates_until_the_features_change(data):
    model, reference = build(hetero_conv, data)
    orch = OrchModel(model)
    graph = data.clone()

    def check():
        out = orch.inference(graph)
        with torch.no_grad():
            expected = reference(graph.x_dict, graph.edge_index_dict)
        for node_type, value in expected.items():
            check_close(out[node_type], value)
        return out

    first, again = check(), check()
    assert all(torch.equal(first[t], again[t]) for t in first)
    graph["author"].x.mul_(-2)  # the same tensor, changed in place
    changed = check()
    assert not torch.equal(changed["paper"], first["paper"])
    graph["paper"].x = graph["paper"].x + 1  # another tensor
    check()
    # The weights change: the kept aggregates are of features alone.
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.mul_(0.5)
    reference.load_state_dict(model.state_dict())
    check()


# 5. Refusals -----------------------------------------------------------------


@pytest.mark.slow
def test_gat_without_hot_nodes_is_exact(data):
    # (With hot nodes: test_hetero_refresh.py.)
    model, reference = build(gat, data)
    loader = OrchNeighborLoader(data, [-1, -1], input_nodes="paper", batch_size=BATCH)
    orch = OrchModel(model, loader)
    torch.manual_seed(4)
    check_exact(orch, model, reference, next(iter(loader)), data)


def test_bottom_conv_on_transformed_features_is_refused(data):
    model, _ = build(lambda metadata: HeteroConvNet(metadata, pre_linear=True), data)
    loader = OrchNeighborLoader(
        data, [-1, -1], input_nodes="paper", batch_size=BATCH, hot_ratio=0.3,
        hot_method="degree",
    )  # fmt: skip
    orch = OrchModel(model, loader)
    batch = next(iter(loader))
    assert batch["paper"].hot_index.numel() > 0
    with pytest.raises(ValueError, match="raw features"):
        orch(batch)


class SkipGNN(nn.Module):
    """PyG's heterogeneous tutorial shape: each layer is ``conv(x) + lin(x)``."""

    def __init__(self, conv, lin_first=False):
        super().__init__()
        self.convs = nn.ModuleList([conv(HIDDEN), conv(OUT)])
        self.lins = nn.ModuleList([Linear(-1, HIDDEN), Linear(-1, OUT)])
        self.lin_first = lin_first

    def forward(self, x, edge_index):
        for layer, (conv, lin) in enumerate(zip(self.convs, self.lins, strict=True)):
            if self.lin_first:
                x = lin(x) + conv(x, edge_index)
            else:
                x = conv(x, edge_index) + lin(x)
            x = x.relu() if layer == 0 else x
        return x


def skip_sage(metadata, lin_first=False):
    def conv(out):
        return SAGEConv((-1, -1), out)

    return to_hetero(SkipGNN(conv, lin_first), metadata, aggr="sum")


@pytest.mark.parametrize("hot_ratio", [0.0, 0.3])
def test_a_linear_of_each_layers_input_beside_its_convs_is_exact(data, hot_ratio):
    model, reference = build(skip_sage, data)
    loader = OrchNeighborLoader(
        data, [-1, -1], input_nodes="paper", batch_size=BATCH, hot_ratio=hot_ratio,
        hot_method="degree",
    )  # fmt: skip
    orch = OrchModel(model, loader)
    batch = next(iter(loader))
    assert bool(hot_ratio) == ("hot_index" in batch["paper"])
    check_exact(orch, model, reference, batch, data)


def test_a_linear_before_the_convs_of_its_layer_is_refused_naming_the_order(data):
    model, _ = build(lambda metadata: skip_sage(metadata, lin_first=True), data)
    loader = OrchNeighborLoader(data, [4, 3], input_nodes="paper", batch_size=BATCH)
    orch = OrchModel(model, loader)
    with pytest.raises(ValueError, match=r"conv\(x, edge_index\) \+ lin\(x\)"):
        orch(next(iter(loader)))


def test_a_projection_before_the_bottom_layer_keeps_every_row(data):
    # Its input is the raw x, which the bottom convs take only afterwards.
    model, reference = build(lambda m: HeteroConvNet(m, pre_linear=True), data)
    loader = OrchNeighborLoader(data, [-1, -1], input_nodes="paper", batch_size=BATCH)
    orch = OrchModel(model, loader)
    batch = next(iter(loader))
    expected = reference(data.x_dict, data.edge_index_dict)["paper"]
    check_close(orch(batch), expected[batch["paper"].n_id[:BATCH]])


def test_batch_served_for_another_model_is_refused(data):
    model_a, _ = build(sage, data, seed=0)
    model_b, _ = build(sage, data, seed=1)
    loader = OrchNeighborLoader(
        data, [4, 3], input_nodes="paper", batch_size=BATCH, hot_ratio=0.3,
        hot_method="degree",
    )  # fmt: skip
    orch_a = OrchModel(model_a, loader)
    orch_b = OrchModel(model_b, loader)
    batch = next(iter(loader))
    with pytest.raises(ValueError, match="another model"):
        orch_a(batch)
    assert orch_b(batch).shape == (BATCH, OUT)


# 6. Resume and prefetch ------------------------------------------------------


def test_state_dict_resumes_the_hot_set(data):
    kwargs = dict(num_neighbors=[4, 3], input_nodes="paper", batch_size=BATCH)
    loader = OrchNeighborLoader(data, hot_ratio=0.3, **kwargs)
    model, _ = build(sage, data)
    orch = OrchModel(model, loader)
    state = loader.state_dict()
    torch.manual_seed(5)
    batch = next(iter(loader))
    out = orch(batch)

    fresh = OrchNeighborLoader(data, hot_ratio=0.0, **kwargs)
    assert fresh.hot is None
    fresh.load_state_dict(state)
    assert torch.equal(fresh.hot.nodes, loader.hot.nodes)
    # The model as a checkpoint restores it: a new one, same weights.
    restored, _ = build(sage, data, seed=9)
    restored.load_state_dict(model.state_dict())
    orch_restored = OrchModel(restored, fresh)
    torch.manual_seed(5)
    again = next(iter(fresh))
    hot_types = [t for t in batch.node_types if "hot_index" in batch[t]]
    assert "paper" in hot_types
    assert hot_types == [t for t in again.node_types if "hot_index" in again[t]]
    for node_type in batch.node_types:
        assert torch.equal(again[node_type].n_id, batch[node_type].n_id)
    for node_type in hot_types:
        assert torch.equal(again[node_type].hot_index, batch[node_type].hot_index)
    assert batch["paper"].hot_index.numel() > 0
    for edge_type in batch.edge_types:
        if "hot_agg" in batch[edge_type]:
            assert torch.equal(again[edge_type].hot_agg, batch[edge_type].hot_agg)
    assert torch.equal(orch_restored(again), out)


def hetero_fingerprint(batch):
    parts = [batch[t].n_id for t in batch.node_types]
    parts += [batch[t].hot_index for t in batch.node_types if "hot_index" in batch[t]]
    parts += [batch[r].hot_agg for r in batch.edge_types if "hot_agg" in batch[r]]
    return [part.clone() for part in parts]


@pytest.mark.parametrize(
    "hot_ratio",
    [0.3, 1, {"paper": 0.5, "author": 0.5}, {"paper": 1}, {"author": 0.0}],
    ids=["float", "int", "dict", "dict-int", "dict-zero"],
)
def test_every_hot_ratio_form_resumes_the_uninterrupted_epoch(data, hot_ratio):
    kwargs = dict(
        num_neighbors=[4, 3], input_nodes="paper", batch_size=BATCH, shuffle=True,
        prefetch=1,
    )  # fmt: skip

    def served(loader):
        OrchModel(build(sage, data)[0], loader)
        return loader

    torch.manual_seed(0)
    with served(OrchNeighborLoader(data, hot_ratio=hot_ratio, **kwargs)) as loader:
        uninterrupted = [hetero_fingerprint(batch) for batch in loader]
    assert len(uninterrupted) > 3
    torch.manual_seed(0)
    with served(OrchNeighborLoader(data, hot_ratio=hot_ratio, **kwargs)) as loader:
        iterator = iter(loader)
        first = [hetero_fingerprint(next(iterator)) for _ in range(2)]
        state = loader.state_dict()
    assert state["hot_ratio"] == hot_ratio
    # The same loader takes its own checkpoint, and a fresh one resumes it.
    loader.load_state_dict(state)
    torch.manual_seed(7)
    resumed = OrchNeighborLoader(data, hot_ratio=0.0, **kwargs)
    resumed.load_state_dict(state)
    assert resumed.hot_ratio == hot_ratio
    with served(resumed):
        rest = [hetero_fingerprint(batch) for batch in resumed]
    for got, want in zip(first + rest, uninterrupted, strict=True):
        assert all(torch.equal(a, b) for a, b in zip(got, want, strict=True))


@pytest.mark.parametrize(
    ("hot_ratio", "pattern"),
    [
        ({"papers": 0.5}, r"checkpoint key 'hot_ratio'.* names node type 'papers'"),
        ({"paper": 1.5}, r"checkpoint key 'hot_ratio'.*\['paper'\] must be a "),
        ("half", r"checkpoint key 'hot_ratio'.* must be a fraction"),
    ],
)
def test_a_checkpoint_with_a_bad_hot_ratio_is_refused_naming_the_key(
    data, hot_ratio, pattern
):
    loader = OrchNeighborLoader(
        data, [4, 3], input_nodes="paper", batch_size=BATCH, hot_ratio={"paper": 0.5}
    )
    state = loader.state_dict()
    with pytest.raises(ValueError, match=pattern):
        loader.load_state_dict({**state, "hot_ratio": hot_ratio})
    assert loader.hot_ratio == {"paper": 0.5}


def test_prefetch_yields_every_seed_once_and_exact_outputs(data):
    model, reference = build(sage, data)
    with torch.no_grad():
        expected = reference(data.x_dict, data.edge_index_dict)["paper"]
    torch.manual_seed(6)
    with OrchNeighborLoader(
        data, [-1, -1], input_nodes="paper", batch_size=BATCH, hot_ratio=0.3,
        hot_method="degree", shuffle=True, prefetch=2,
    ) as loader:  # fmt: skip
        orch = OrchModel(model, loader)
        seeds, hot = [], 0
        for batch in loader:
            paper = batch["paper"]
            with torch.no_grad():
                out = orch(batch)
            ids = paper.n_id[: paper.batch_size]
            check_close(out, expected[ids])
            seeds.append(ids)
            hot += paper.hot_index.numel()
    assert hot > 0
    seeds = torch.cat(seeds)
    assert torch.equal(seeds.sort().values, torch.arange(data["paper"].num_nodes))
    assert not torch.equal(seeds, torch.arange(data["paper"].num_nodes))


def test_edge_values_a_model_cannot_be_handed_are_refused(data):
    weighted = copy.copy(data)
    relation = ("paper", "cites", "paper")
    weighted[relation].edge_weight = torch.rand(weighted[relation].num_edges)
    loader = OrchNeighborLoader(
        weighted, [4, 3], input_nodes="paper", batch_size=BATCH, hot_ratio=0.0
    )
    batch = next(iter(loader))
    # HeteroConvNet's forward takes no edge_weight_dict, but its cites conv
    # (a GraphConv) reads one: run without it, the outputs would differ.
    orch = OrchModel(build(hetero_conv, data)[0], loader)
    with pytest.raises(NotImplementedError, match=r"cites.*edge_weight.*GraphConv"):
        orch(batch)
    with pytest.raises(NotImplementedError, match=r"edge_weight_dict"):
        orch.inference(weighted)
    # SAGEConv takes none: the weights are nothing to it, as in plain PyG.
    model, reference = build(sage, data)
    with torch.no_grad():
        expected = reference(weighted.x_dict, weighted.edge_index_dict)["paper"]
        out = OrchModel(model).inference(weighted)["paper"]
    assert_close(out, expected, atol=1e-5, rtol=1e-4)


# 6. Edge values ----------------------------------------------------------------


class WeightedGraphConvGNN(GraphConvGNN):
    """``GraphConvGNN`` handing each conv the relation's ``edge_weight``."""

    supports_edge_weight = True


class WeightedHeteroConv(nn.Module):
    """Two ``HeteroConv`` layers of ``GraphConv``, given ``edge_weight_dict``."""

    def __init__(self, metadata):
        super().__init__()
        self.convs = nn.ModuleList(
            HeteroConv(
                {et: GraphConv((-1, -1), size, aggr=aggr) for et in metadata[1]},
                aggr="sum",
            )
            for size, aggr in ((HIDDEN, "mean"), (OUT, "max"))
        )

    def forward(self, x_dict, edge_index_dict, edge_weight_dict):
        x_dict = self.convs[0](x_dict, edge_index_dict, edge_weight_dict)
        x_dict = {t: x.relu() for t, x in x_dict.items()}
        return self.convs[1](x_dict, edge_index_dict, edge_weight_dict)


def weighted_to_hetero(metadata):
    return to_hetero(WeightedGraphConvGNN((-1, -1), HIDDEN, 2, OUT), metadata)


def weighted_hetero_conv(metadata):
    return WeightedHeteroConv(metadata)


def gat_edge_features(metadata):
    gat = GAT((-1, -1), HIDDEN, 2, OUT, add_self_loops=False, edge_dim=3)
    return to_hetero(gat, metadata)


@pytest.fixture(scope="module")
def valued(data):
    """``data`` with a positive edge_weight and 3 edge features per relation."""
    generator = torch.Generator().manual_seed(5)
    valued = copy.copy(data)
    for relation in data.edge_types:
        count = data[relation].num_edges
        valued[relation].edge_weight = 0.1 + torch.rand(count, generator=generator)
        valued[relation].edge_attr = torch.randn(count, 3, generator=generator)
    return valued


def keywords(model, graph):
    """The edge values the plain model takes, under its forward's keywords."""
    if isinstance(model, WeightedHeteroConv):
        return {"edge_weight_dict": graph.edge_weight_dict}
    return {"edge_weight": graph.edge_weight_dict, "edge_attr": graph.edge_attr_dict}


@pytest.mark.parametrize("hot_ratio", [0.0, 0.2])
@pytest.mark.parametrize(
    "make", [weighted_to_hetero, weighted_hetero_conv, gat_edge_features],
    ids=lambda f: f.__name__,
)  # fmt: skip
def test_edge_values_are_exact_against_the_whole_graph(valued, make, hot_ratio):
    torch.manual_seed(0)
    model = make(valued.metadata())
    with torch.no_grad():
        model(valued.x_dict, valued.edge_index_dict, **keywords(model, valued))
    reference = copy.deepcopy(model)
    loader = OrchNeighborLoader(
        valued, [-1, -1], input_nodes="paper", batch_size=BATCH, hot_ratio=hot_ratio
    )
    if hot_ratio and make is gat_edge_features:
        # Attention weighs each message by weights, so the hot rows would be
        # embeddings, which are computed without the edge features it reads.
        with pytest.raises(
            NotImplementedError, match=r"reads \['edge_attr'\].*hot_ratio=0"
        ):
            OrchModel(model, loader)
        return
    orch = OrchModel(model, loader)
    batch = next(iter(loader))
    if hot_ratio:
        assert batch["paper"].hot_index.numel() > 0
    out = orch(batch)
    whole = reference(valued.x_dict, valued.edge_index_dict, **keywords(model, valued))
    expected = whole["paper"][batch["paper"].n_id[:BATCH]]
    check_close(out, expected)
    out.pow(2).sum().backward()
    expected.pow(2).sum().backward()
    check_gradients(model, reference)
    with torch.no_grad():
        inferred = orch.inference(valued)
    for node_type, value in whole.items():
        check_close(inferred[node_type], value)


# Relation convs aggregated by pyg_orch's kernels ----------------------------


def wrapped_sage(data, make=sage, precision="fp32"):
    """``to_hetero(GraphSAGE)``, wrapped with a hot loader, and a batch."""
    model, _ = build(make, data)
    loader = OrchNeighborLoader(
        data, [4, 3], input_nodes="paper", batch_size=BATCH, hot_ratio=0.3
    )
    return model, OrchModel(model, loader, precision), next(iter(loader))


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
@pytest.mark.parametrize("make", [sage, graph_conv], ids=lambda f: f.__name__)
def test_relations_aggregate_with_the_kernels_not_pyg_or_torch_sparse(
    data, make, precision
):
    # Under bf16 autocast too: PyG's scatter would aggregate bfloat16 rows
    # in bfloat16, the kernels accumulate them in float32.
    _, orch, batch = wrapped_sage(data, make, precision)
    with torch.profiler.profile() as profiler:
        orch(batch).float().sum().backward()
    names = {event.name for event in profiler.events()}
    assert {"_Aggregate", "_AggregateBackward"} <= names
    assert not any("sparse" in name for name in names)
    assert not names & {"aten::index_add_", "aten::scatter_reduce_"}


def test_a_relation_conv_with_a_forward_hook_runs_through_pyg(data):
    # The hook sees the conv's real inputs (not the no rows PyG's forward
    # gets on the kernels' path), and the outputs are those of that path.
    model, orch, batch = wrapped_sage(data)
    fused = orch(batch)
    seen = []
    conv = model.get_submodule("convs.0.author__writes__paper")
    handle = conv.register_forward_pre_hook(
        lambda module, args: seen.append(args[0][0].size(0))
    )
    try:
        through_pyg = orch(batch)
    finally:
        handle.remove()
    assert len(seen) == 1 and seen[0] > 0
    check_close(fused, through_pyg)
