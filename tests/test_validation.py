"""Bad inputs fail at construction, with an error naming the argument and the fix."""

import copy
import inspect

import numpy as np
import pytest
import torch
from conftest import random_graph
from torch_geometric.data import HeteroData
from torch_geometric.loader import NeighborLoader
from torch_geometric.nn import GraphSAGE

import pyg_orch.loading.arguments
import pyg_orch.loading.orch_loader
from pyg_orch import (
    HotSet,
    OrchLinkNeighborLoader,
    OrchModel,
    OrchNeighborLoader,
    OrchNeighborSampler,
)

NUM_NODES = 40
GRAPH = random_graph(NUM_NODES, 200)


def graph(**changes):
    """A copy of GRAPH with attributes replaced (or deleted, for ``None``)."""
    data = copy.copy(GRAPH)
    for key, value in changes.items():
        if value is None:
            del data[key]
        else:
            data[key] = value
    return data


def loader(data=None, num_neighbors=(5, 5), **kwargs):
    kwargs.setdefault("batch_size", 8)
    return OrchNeighborLoader(
        GRAPH if data is None else data, list(num_neighbors), **kwargs
    )


def hetero():
    data = HeteroData()
    data["a"].x = torch.randn(3, 8)
    data["a", "to", "a"].edge_index = torch.tensor([[0, 1], [1, 2]])
    return data


def weights(edge, value):
    """Unit weights for GRAPH's edges but ``value`` at ``edge``."""
    w = torch.ones(EDGES.size(1))
    w[edge] = value
    return w


def weighted_hetero(value):
    """``hetero()`` with weights ``w``: 1, then ``value``."""
    data = hetero()
    data["a", "to", "a"].w = torch.tensor([1.0, value])
    return data


def bad_x(value, row=3):
    x = GRAPH.x.clone()
    x[row, 1] = value
    return x


def case(case_id, build, error, argument, pattern, marks=()):
    """One bad input: ``build()`` must raise ``error`` naming ``argument``."""
    return pytest.param(build, error, argument, pattern, id=case_id, marks=marks)


EDGES = GRAPH.edge_index
SAGE = GraphSAGE(8, 16, num_layers=3, out_channels=4)
PLAIN_SAMPLER = OrchNeighborSampler(GRAPH, [5, 5, 5])

BAD_INPUTS = [
    # Arguments of the loader itself.
    case("hot_ratio above 1", lambda: loader(hot_ratio=1.5), ValueError,
         "hot_ratio", r"in \[0, 1\] or 'auto', got 1.5; 0 turns"),
    case("hot_ratio a word", lambda: loader(hot_ratio="half"), ValueError,
         "hot_ratio", r"got 'half'"),
    case("hot_method unknown", lambda: loader(hot_ratio=0.2, hot_method="random"),
         ValueError, "hot_method", r"must be one of \('presample', 'degree'\)"),
    case("presample_epochs a float", lambda: loader(presample_epochs=1.5),
         ValueError, "presample_epochs", r"must be an int >= 1 .*got 1.5"),
    case("presample_epochs 0", lambda: loader(presample_epochs=0), ValueError,
         "presample_epochs", r"must be an int >= 1 .*got 0"),
    case("cache unknown", lambda: loader(hot_ratio=0.2, cache="lazy"), ValueError,
         "cache", r"must be one of \('static', 'resample', 'embedding'\) or None"),
    case("cache without hot vertices", lambda: loader(cache="resample"), ValueError,
         "cache", r"cache='resample' needs hot vertices: set hot_ratio > 0"),
    case("super_batch 0", lambda: loader(super_batch=0), ValueError,
         "super_batch", r"must be >= 1, got 0"),
    case("super_batch a string", lambda: loader(super_batch="8"), ValueError,
         "super_batch", r"must be an int >= 1, got '8'"),
    case("staleness below super_batch - 1",
         lambda: loader(super_batch=4, staleness=2), ValueError,
         "staleness", r"at least super_batch - 1 = 3 .*raise staleness"),
    case("staleness a float", lambda: loader(staleness=2.5), ValueError,
         "staleness", r"must be an int, got 2.5"),
    case("prefetch negative", lambda: loader(prefetch=-1), ValueError,
         "prefetch", r"must be an int >= 0, got -1"),
    case("prefetch a float", lambda: loader(prefetch=1.5), ValueError,
         "prefetch", r"must be an int >= 0, got 1.5"),
    case("hot_fanout 0", lambda: loader(hot_fanout=0), ValueError,
         "hot_fanout", r"must be >= 1 or -1 \(all neighbours\), got 0"),
    case("hot_fanout a string", lambda: loader(hot_fanout="5"), ValueError,
         "hot_fanout", r"must be an int, got '5'"),
    case("device_cache negative", lambda: loader(device="cpu", device_cache=-5),
         ValueError, "device_cache", r"bytes >= 0 or 'auto'.*got -5"),
    case("device_cache negative, no device", lambda: loader(device_cache=-5),
         ValueError, "device_cache", r"bytes >= 0 or 'auto'.*got -5"),
    case("device_cache True", lambda: loader(device="cpu", device_cache=True),
         ValueError, "device_cache", r"got True"),
    case("device_cache without device", lambda: loader(device_cache=1000),
         ValueError, "device", r"device_cache keeps data .*also pass device="),
    case("device unknown", lambda: loader(device="gpu"), ValueError,
         "device", r"a name such as 'cuda'.*got 'gpu'"),
    case("device a missing GPU", lambda: loader(device="cuda:99"), ValueError,
         "device", r"device='cuda:99', but this machine has \d+ CUDA device"),
    case("batch_size 0", lambda: loader(batch_size=0), ValueError,
         "batch_size", r"must be an int >= 1 \(seed nodes per mini-batch\), got 0"),
    case("batch_size None", lambda: loader(batch_size=None), ValueError,
         "batch_size", r"got None"),
    case("batch_size a float", lambda: loader(batch_size=2.5), ValueError,
         "batch_size", r"got 2.5"),
    case("num_workers with prefetch", lambda: loader(prefetch=2, num_workers=1),
         ValueError, "num_workers", r"num_workers=1 cannot be combined with "
         r"prefetch.*Set num_workers=0"),
    case("num_workers with device", lambda: loader(device="cpu", num_workers=2),
         ValueError, "num_workers", r"Set num_workers=0"),
    case("check_finite not a bool", lambda: loader(check_finite="yes"), ValueError,
         "check_finite", r"must be True or False, got 'yes'"),
    # num_neighbors.
    case("num_neighbors empty", lambda: loader(num_neighbors=[]), ValueError,
         "num_neighbors", r"at least one fan-out .*got \[\]"),
    case("num_neighbors below -1", lambda: loader(num_neighbors=[5, -2]),
         ValueError, "num_neighbors", r"one int per hop.*got -2 at hop 1"),
    case("num_neighbors a float", lambda: loader(num_neighbors=[5, 2.5]),
         ValueError, "num_neighbors", r"got 2.5 at hop 1"),
    case("num_neighbors a bool", lambda: loader(num_neighbors=[True]),
         ValueError, "num_neighbors", r"got True at hop 0"),
    case("num_neighbors a string",
         lambda: OrchNeighborLoader(GRAPH, "15,10", batch_size=8), ValueError,
         "num_neighbors", r"must be a list with one fan-out per hop.*got '15,10'"),
    case("num_neighbors a dict on Data",
         lambda: OrchNeighborLoader(GRAPH, {("v", "to", "v"): [5]}, batch_size=8),
         ValueError, "num_neighbors", r"is a dict .*give a homogeneous Data graph"),
    # The graph: edge_index.
    case("edge_index missing", lambda: loader(graph(edge_index=None)), ValueError,
         "edge_index", r"data has no edge_index: give the graph its edges"),
    case("edge_index not a tensor",
         lambda: loader(graph(edge_index=EDGES.tolist())), TypeError,
         "edge_index", r"an integer tensor of shape \[2, num_edges\], got list"),
    case("edge_index float", lambda: loader(graph(edge_index=EDGES.float())),
         TypeError, "edge_index", r"integer node ids .*got torch.float32.*\.long\(\)"),
    case("edge_index three rows",
         lambda: loader(graph(edge_index=torch.zeros(3, 4, dtype=torch.long))),
         ValueError, "edge_index", r"shape \[2, num_edges\].*got \[3, 4\]$"),
    case("edge_index transposed", lambda: loader(graph(edge_index=EDGES.t())),
         ValueError, "edge_index", r"got \[\d+, 2\]; it looks transposed"),
    case("edge_index 1-D", lambda: loader(graph(edge_index=EDGES[0])),
         ValueError, "edge_index", r"shape \[2, num_edges\]"),
    case("edge_index id too large",
         lambda: loader(graph(edge_index=torch.tensor([[0, NUM_NODES], [1, 2]]))),
         ValueError, "edge_index", rf"node id {NUM_NODES}, but the graph has "
         rf"{NUM_NODES} nodes .*in \[0, {NUM_NODES}\)"),
    case("edge_index id negative",
         lambda: loader(graph(edge_index=torch.tensor([[0, -1], [1, 2]]))),
         ValueError, "edge_index", r"negative node id -1"),
    case("edge_index on the meta device",
         lambda: loader(graph(edge_index=EDGES.to("meta"))), ValueError,
         "edge_index", r"on the meta device, so it has a shape but no node ids"),
    # input_nodes.
    case("input_nodes id too large",
         lambda: loader(input_nodes=torch.tensor([0, NUM_NODES])), ValueError,
         "input_nodes", rf"node id {NUM_NODES}, outside \[0, {NUM_NODES}\)"),
    case("input_nodes id negative", lambda: loader(input_nodes=torch.tensor([-1, 3])),
         ValueError, "input_nodes", r"node id -1, outside"),
    case("input_nodes as a list out of range", lambda: loader(input_nodes=[0, 99]),
         ValueError, "input_nodes", r"node id 99"),
    case("input_nodes float", lambda: loader(input_nodes=torch.tensor([0.0, 1.0])),
         TypeError, "input_nodes", r"integer node ids or be a boolean mask, got "
         r"torch.float32"),
    case("input_nodes mask too short",
         lambda: loader(input_nodes=torch.ones(10, dtype=torch.bool)), ValueError,
         "input_nodes", rf"boolean mask of 10 entries, but the graph has {NUM_NODES}"),
    case("input_nodes mask too long",
         lambda: loader(input_nodes=torch.ones(NUM_NODES + 1, dtype=torch.bool)),
         ValueError, "input_nodes", rf"mask of {NUM_NODES + 1} entries"),
    case("input_nodes 2-D", lambda: loader(input_nodes=torch.zeros(2, 2).long()),
         ValueError, "input_nodes", r"1-D tensor of node ids, got shape \[2, 2\]"),
    case("input_nodes a list of bools", lambda: loader(input_nodes=[True, False]),
         TypeError, "input_nodes", r"list of booleans"),
    case("input_nodes a string", lambda: loader(input_nodes="train"), TypeError,
         "input_nodes", r"tensor of node ids or a boolean mask .*got str"),
    case("input_nodes mask 2-D",
         lambda: loader(input_nodes=torch.ones(NUM_NODES, 1, dtype=torch.bool)),
         ValueError, "input_nodes", rf"mask of shape \[{NUM_NODES}, 1\], but a "
         r"mask must be 1-D .*input_nodes.view\(-1\)"),
    case("input_nodes uint8",
         lambda: loader(input_nodes=torch.ones(NUM_NODES, dtype=torch.uint8)),
         TypeError, "input_nodes", r"torch.uint8 tensor, which could be a mask or "
         r"node ids: pass input_nodes.bool\(\) .*input_nodes.long\(\)"),
    # Features.
    case("x integer, hot", lambda: loader(graph(x=GRAPH.x.long()), hot_ratio=0.2),
         TypeError, "data.x", r"float32 .* got torch.int64 .*data.x.float\(\)"),
    case("x float64, hot", lambda: loader(graph(x=GRAPH.x.double()), hot=HotSet(
         torch.tensor([0]), torch.zeros(0), "given")), TypeError, "data.x",
         r"got torch.float64"),
    case("x a vector, hot", lambda: loader(graph(x=GRAPH.x[:, 0]), hot_ratio=0.2),
         TypeError, "data.x", rf"\[num_nodes, num_features\] .*shape \[{NUM_NODES}\]"),
    case("x off the CPU, hot",
         lambda: loader(graph(x=torch.empty(NUM_NODES, 8, device="meta")),
                        hot_ratio=0.2),
         ValueError, "data.x", r"is on meta, .*data.x.cpu\(\)"),
    case("x off the CPU, device gather",
         lambda: loader(graph(x=torch.empty(NUM_NODES, 8, device="meta")),
                        device="cpu"),
         ValueError, "data.x", r"is on meta"),
    case("x with too few rows", lambda: loader(graph(x=GRAPH.x[:-1],
                                                     num_nodes=NUM_NODES)),
         ValueError, "data.x", rf"one row per node: the graph has {NUM_NODES} "
         rf"nodes, x has shape \[{NUM_NODES - 1}, 8\]"),
    case("x missing, hot", lambda: loader(graph(x=None, num_nodes=NUM_NODES),
                                          hot_ratio=0.2),
         ValueError, "data.x", r"hot vertices need node features data.x"),
    case("x NaN, check_finite",
         lambda: loader(graph(x=bad_x(float("nan"))), check_finite=True),
         ValueError, "data.x", r"holds 1 NaN or infinite value\(s\), the first in "
         r"row 3.*nan_to_num.*check_finite=False"),
    case("x inf, check_finite",
         lambda: loader(graph(x=bad_x(float("-inf"), row=NUM_NODES - 1)),
                        check_finite=True),
         ValueError, "data.x", rf"first in row {NUM_NODES - 1}"),
    case("x 3-D, hot",
         lambda: loader(graph(x=GRAPH.x.view(NUM_NODES, 2, 4)), hot_ratio=0.2),
         TypeError, "data.x", rf"2-D \[num_nodes, num_features\] matrix for hot "
         rf"vertices .*got shape \[{NUM_NODES}, 2, 4\]; reshape it with data.x = "
         r"data.x.flatten\(1\)"),
    case("x a vector, device gather",
         lambda: loader(graph(x=GRAPH.x[:, 0]), device="cpu"), TypeError, "data.x",
         rf"2-D .* for device= .*got shape \[{NUM_NODES}\]; .*data.x.view\(-1, 1\)"),
    case("x requiring grad, hot",
         lambda: loader(graph(x=GRAPH.x.clone().requires_grad_()), hot_ratio=0.2),
         ValueError, "data.x", r"requires grad, but hot vertices read it outside "
         r"autograd.*data.x = data.x.detach\(\)"),
    case("x requiring grad, device gather",
         lambda: loader(graph(x=GRAPH.x.clone().requires_grad_()), device="cpu"),
         ValueError, "data.x", r"requires grad, but device= read it .*detach\(\)"),
    case("x float8, device gather",
         lambda: loader(graph(x=GRAPH.x.to(torch.float8_e4m3fn)), device="cpu"),
         TypeError, "data.x",
         r"torch.float8_e4m3fn, which device= cannot gather .*torch.bfloat16"),
    case("x a NumPy array torch cannot view",
         lambda: loader(graph(x=GRAPH.x.numpy().astype(">f4"))), TypeError,
         "data.x", r"NumPy array torch cannot view in place \(.*byte order.*\): "
         r"convert it, e.g. data.x = np.ascontiguousarray"),
    # A given hot set.
    case("hot mask of another graph",
         lambda: loader(hot=torch.zeros(5, dtype=torch.bool)), ValueError,
         "hot", rf"hot is a mask of 5 entries but the graph has {NUM_NODES} "
         r"nodes; was it made for another graph\?"),
    case("hot ids of another graph", lambda: loader(hot=torch.tensor([NUM_NODES])),
         ValueError, "hot", rf"hot holds node ids outside \[0, {NUM_NODES}\)"),
    case("hot float", lambda: loader(hot=torch.tensor([1.0])), TypeError,
         "hot", r"HotSet, a tensor of node ids or a boolean mask .*torch.float32"),
    case("hot a list", lambda: loader(hot=[1, 2]), TypeError,
         "hot", r"got list"),
    case("hot mask 2-D",
         lambda: loader(hot=torch.ones(NUM_NODES, 1, dtype=torch.bool)), ValueError,
         "hot", rf"hot must be 1-D .*got shape \[{NUM_NODES}, 1\]; flatten a mask "
         r"with hot.view\(-1\)"),
    case("hot uint8", lambda: loader(hot=torch.ones(NUM_NODES, dtype=torch.uint8)),
         TypeError, "hot", r"torch.uint8 tensor.*pass hot.bool\(\) .*hot.long\(\)"),
    # Heterogeneous graphs.
    case("hot_ratio dict naming an unknown node type",
         lambda: OrchNeighborLoader(hetero(), [2], input_nodes="a",
                                    hot_ratio={"b": 0.2}),
         ValueError, "hot_ratio", r"names node type 'b', which cannot be hot.*\['a'\]"),
    case("hot_ratio dict with a bad fraction",
         lambda: OrchNeighborLoader(hetero(), [2], input_nodes="a",
                                    hot_ratio={"a": 1.5}),
         ValueError, "hot_ratio['a']", r"fraction of the vertices in \[0, 1\]"),
    case("hot_ratio dict on a homogeneous graph",
         lambda: loader(hot_ratio={"a": 0.2}), ValueError, "hot_ratio",
         r"dict of fractions per node type, which fits a HeteroData graph"),
    # Sampling options a hot vertex's cached whole neighbourhood cannot follow.
    case("hot with temporal sampling",
         lambda: loader(graph(time=torch.arange(NUM_NODES)), time_attr="time",
                        hot_ratio=0.2),
         NotImplementedError, "time_attr", r"hot vertices do not support time_attr"),
    case("hot with weighted sampling",
         lambda: loader(graph(w=torch.rand(EDGES.size(1))), weight_attr="w",
                        hot_ratio=0.2),
         NotImplementedError, "weight_attr", r"support weight_attr.*hot_ratio=0"),
    case("hot with disjoint subgraphs", lambda: loader(disjoint=True, hot_ratio=0.2),
         NotImplementedError, "disjoint", r"hot vertices do not support disjoint"),
    case("hot with induced subgraphs",
         lambda: loader(subgraph_type="induced", hot_ratio=0.2),
         NotImplementedError, "subgraph_type", r"subgraph_type other than"),
    # Sampling weights (weight_attr), which torch.multinomial refuses too.
    case("weight_attr negative", lambda: loader(weight_attr="w", replace=True,
                                                data=graph(w=weights(3, -5.0))),
         ValueError, "weight_attr", r"finite and >= 0, but edge 3 has weight -5.0"),
    case("weight_attr NaN", lambda: loader(weight_attr="w",
                                           data=graph(w=weights(7, float("nan")))),
         ValueError, "weight_attr", r"edge 7 has weight nan"),
    case("weight_attr inf", lambda: loader(weight_attr="w",
                                           data=graph(w=weights(0, float("inf")))),
         ValueError, "weight_attr", r"edge 0 has weight inf"),
    case("weight_attr all zero where drawn", lambda: loader(
             weight_attr="w", replace=True, data=graph(w=torch.zeros(EDGES.size(1)))),
         ValueError, "weight_attr", r"in-edges, all of weight 0, but the fan-out 5 "
         r"draws from them by weight with replacement"),
    case("weight_attr negative, heterogeneous", lambda: OrchNeighborLoader(
             weighted_hetero(-1.0), [2], input_nodes="a", batch_size=2,
             weight_attr="w"), ValueError, "weight_attr",
         r"edge 1 of edge type \('a', 'to', 'a'\) has weight -1.0"),
    case("weight_attr negative, link loader", lambda: OrchLinkNeighborLoader(
             graph(w=weights(3, -1.0)), [5], batch_size=8, weight_attr="w"),
         ValueError, "weight_attr", r"edge 3 has weight -1.0"),
    case("edge_label_index left out on HeteroData", lambda: OrchLinkNeighborLoader(
             hetero(), [2], batch_size=2), ValueError, "edge_label_index",
         r"name the edge type .* such as \('a', 'to', 'a'\)"),
    # OrchModel.
    case("model layers != num_neighbors", lambda: OrchModel(SAGE, loader()),
         ValueError, "num_neighbors", r"num_neighbors=\[5, 5\] samples 2 hops, but "
         r"the model has 3 layers \(num_layers=3\).*one fan-out per layer"),
    case("model layers != num_neighbors, auto ratio",
         lambda: OrchModel(SAGE, loader(hot_ratio="auto")), ValueError,
         "num_neighbors", r"the model has 3 layers"),
    case("model not a BasicGNN", lambda: OrchModel(torch.nn.Linear(8, 4), loader()),
         TypeError, "BasicGNN", r"OrchModel wraps a torch_geometric.nn BasicGNN, a "
         r"to_hetero model or a model of HeteroConv layers; Linear has no conv"),
    case("model with jumping knowledge",
         lambda: OrchModel(GraphSAGE(8, 16, num_layers=2, jk="cat")),
         NotImplementedError, "jk", r"jumping knowledge .*build the model with "
         r"jk=None"),
    case("loader a plain NeighborLoader",
         lambda: OrchModel(SAGE, NeighborLoader(GRAPH, [5, 5, 5], batch_size=8,
                                               neighbor_sampler=PLAIN_SAMPLER)),
         TypeError, "loader", r"must be an OrchNeighborLoader .*got NeighborLoader"),
]  # fmt: skip


@pytest.mark.parametrize(("build", "error", "argument", "pattern"), BAD_INPUTS)
def test_bad_input_fails_at_construction_naming_the_argument(
    build, error, argument, pattern
):
    with pytest.raises(error, match=pattern) as info:
        build()
    assert argument in str(info.value)


def test_there_are_many_genuinely_different_cases():
    assert len(BAD_INPUTS) >= 30
    assert len({param.id for param in BAD_INPUTS}) == len(BAD_INPUTS)


def served(batches):
    """``batches``, with a model wrapped around it: a hot loader yields only then."""
    if batches.cache is not None:
        OrchModel(GraphSAGE(8, 16, num_layers=2), batches)
    return batches


def first_batch(data, **kwargs):
    torch.manual_seed(0)
    return next(iter(served(loader(data, **kwargs))))


@pytest.mark.parametrize("hot_ratio", [0.0, 0.2])
def test_valid_edge_inputs_still_pass(hot_ratio):
    mask = torch.zeros(NUM_NODES, dtype=torch.bool)
    mask[::3] = True
    ids = mask.nonzero().view(-1)
    int32_graph = graph(edge_index=EDGES.int())
    expected = first_batch(GRAPH, input_nodes=mask, hot_ratio=hot_ratio)
    for data, nodes in [
        (int32_graph, mask),
        (GRAPH, ids),
        (GRAPH, ids.int()),
        (int32_graph, ids.tolist()),
        (GRAPH, ids.numpy()),
    ]:
        batch = first_batch(data, input_nodes=nodes, hot_ratio=hot_ratio)
        assert torch.equal(batch.n_id, expected.n_id)
        assert torch.equal(batch.x, expected.x)
    # Fan-outs of every kind, a graph without edges, the remaining options.
    assert first_batch(GRAPH, num_neighbors=(-1, 0), hot_ratio=hot_ratio).batch_size
    edgeless = graph(edge_index=torch.empty(2, 0, dtype=torch.long))
    assert first_batch(edgeless, hot_ratio=0.0).num_edges == 0
    loader(GRAPH, hot_ratio=hot_ratio, check_finite=True, device="cpu", prefetch=1)


@pytest.mark.parametrize("hot_ratio", [0.0, 0.2])
def test_a_numpy_integer_batch_size_is_taken_as_an_int(hot_ratio):
    # DataLoader itself refuses anything but an int.
    batch = first_batch(GRAPH, batch_size=np.int64(8), hot_ratio=hot_ratio)
    assert torch.equal(batch.n_id, first_batch(GRAPH, hot_ratio=hot_ratio).n_id)
    assert batch.batch_size == 8


@pytest.mark.parametrize("hot_ratio", [0.0, 0.2])
def test_an_empty_input_nodes_list_means_no_seeds_as_in_neighbor_loader(hot_ratio):
    plain = NeighborLoader(
        GRAPH, [5, 5, 5], input_nodes=[], neighbor_sampler=PLAIN_SAMPLER
    )
    assert list(plain) == []
    assert list(served(loader(input_nodes=[], hot_ratio=hot_ratio))) == []


def test_features_are_scanned_only_when_asked_and_only_where_used():
    nan = graph(x=bad_x(float("nan")))
    assert first_batch(nan).x.isnan().any()  # check_finite is opt-in
    # Integer features (e.g. ids for an embedding) stay fine without hot vertices.
    assert first_batch(graph(x=GRAPH.x.long()), device="cpu").x.dtype == torch.long


def test_checks_run_once_at_construction_not_per_batch(monkeypatch):
    calls = {"arguments": 0, "graph": 0}

    def counted(name, function):
        def wrapper(*args, **kwargs):
            calls[name] += 1
            return function(*args, **kwargs)

        return wrapper

    monkeypatch.setattr(
        pyg_orch.loading.orch_loader,
        "check_loader_arguments",
        counted("arguments", pyg_orch.loading.arguments.check_loader_arguments),
    )
    monkeypatch.setattr(
        pyg_orch.loading.arguments,
        "check_graph",
        counted("graph", pyg_orch.loading.arguments.check_graph),
    )
    for kwargs in ({}, {"hot_ratio": 0.2, "prefetch": 2}):
        calls.update(arguments=0, graph=0)
        with served(loader(**kwargs)) as batches:
            assert sum(batch.batch_size for batch in batches) == NUM_NODES
            assert sum(batch.batch_size for batch in batches) == NUM_NODES
        assert calls == {"arguments": 1, "graph": 1}


def test_every_public_check_has_an_example():
    module = pyg_orch.loading.arguments
    public = [
        name
        for name, value in vars(module).items()
        if inspect.isfunction(value)
        and not name.startswith("_")
        and value.__module__ == module.__name__
    ]
    assert len(public) >= 8
    assert [n for n in public if "Example" not in inspect.getdoc(vars(module)[n])] == []


def test_what_needs_the_model_is_still_checked_when_iterating():
    # The cache mode OrchModel picks for GAT (embedding) runs in pyg_orch's own
    # threads: num_workers > 0 is only known to be wrong once the model is wrapped.
    from torch_geometric.nn import GAT

    batches = loader(hot_ratio=0.2, num_workers=1)
    with pytest.warns(UserWarning, match="embedding"):
        OrchModel(GAT(8, 16, num_layers=2, out_channels=4), batches)
    with pytest.raises(ValueError, match="num_workers=0"):
        iter(batches)


def test_fan_outs_wrapped_in_num_neighbors_pass():
    from torch_geometric.sampler.base import NumNeighbors

    batches = OrchNeighborLoader(GRAPH, NumNeighbors([5, 5]), batch_size=8)
    assert len(next(iter(batches)).num_sampled_nodes) == 3


def test_heterodata_passes_the_checks_with_or_without_hot_vertices():
    # The Numba sampler samples HeteroData, with hot nodes of any type.
    from pyg_orch.hot.options import HotOptions

    check = pyg_orch.loading.arguments.check_loader_arguments
    check(hetero(), [2], HotOptions(), input_nodes="a", batch_size=2)
    check(hetero(), [2], HotOptions(hot_ratio=0.1), input_nodes="a")
    check(hetero(), [2], HotOptions(hot_ratio={"a": 0.1}), input_nodes="a")
