"""A graph changed in place after the loader read it: batches see the change.

A user rescales ``data.x`` or reweighs ``edge_weight`` in place between
epochs. Plain PyG's batches read the tensors as they are; so must pyg_orch's,
hot vertices included: their cached aggregates, the loader's own copies of
the features (converted, made contiguous, kept on the device) are made again.
The references are plain PyG models on the whole changed graph.
"""

import copy

import pytest
import torch
from conftest import random_graph
from torch.testing import assert_close
from torch_geometric.nn import GraphConv, GraphSAGE, HeteroConv

from pyg_orch import OrchModel, OrchNeighborLoader
from pyg_orch.datasets import power_law_hetero_graph

NUM_NODES, BATCH = 300, 64


def check_close(got, want):
    """Equal up to float32 rounding of sums in another order."""
    scale = max(1.0, float(want.abs().max()))
    assert_close(got, want, atol=1e-5 * scale, rtol=1e-4)


def outputs(orch, loader):
    """Every seed's output over one epoch, by node id."""
    rows = {}
    with torch.no_grad():
        for batch in loader:
            seeds = batch.n_id[: batch.batch_size].tolist()
            rows.update(zip(seeds, orch(batch), strict=True))
    return torch.stack([rows[node] for node in sorted(rows)])


# The loader's own copies of the features: none (it reads data.x), a
# contiguous copy of a strided x, and the rows it keeps on the device.
LOADERS = {
    "plain": {},
    "strided": {},
    "device_cache": {"device": "cpu", "device_cache": 10**6, "prefetch": 1},
}


@pytest.mark.parametrize("loader_kind", list(LOADERS))
def test_features_changed_in_place_reach_hot_and_cold_rows(loader_kind):
    data = random_graph(NUM_NODES, 3000, seed=3)
    if loader_kind == "strided":
        data.x = torch.randn(NUM_NODES, 16)[:, ::2]  # a view kernels cannot read
    torch.manual_seed(0)
    model = GraphSAGE(8, 16, num_layers=2, out_channels=4).eval()
    loader = OrchNeighborLoader(
        data, [-1, -1], batch_size=BATCH, hot_ratio=0.3, hot_method="degree",
        **LOADERS[loader_kind],
    )  # fmt: skip
    orch = OrchModel(model, loader)
    outputs(orch, loader)  # an epoch on the graph as it was
    data.x.mul_(3).add_(1)  # as a user rescales features between epochs
    with torch.no_grad():
        expected = model(data.x, data.edge_index)
    check_close(outputs(orch, loader), expected)
    check_close(orch.inference(data), expected)


def test_features_changed_in_place_reach_a_half_width_loader():
    data = random_graph(NUM_NODES, 3000, seed=3)
    loader = OrchNeighborLoader(
        data, [-1, -1], batch_size=NUM_NODES, hot_ratio=0.3, hot_method="degree",
        feature_dtype=torch.bfloat16,
    )  # fmt: skip
    loader.serve("mean")
    next(iter(loader))
    data.x.mul_(3).add_(1)
    batch = next(iter(loader))
    half = data.x.bfloat16()
    assert torch.equal(batch.x, half[batch.n_id])
    src, dst = data.edge_index
    mean = torch.zeros(NUM_NODES, 8).index_add_(0, dst, half[src].float())
    mean /= torch.bincount(dst, minlength=NUM_NODES).clamp(min=1).view(-1, 1)
    hot = batch.n_id[batch.hot_index]
    check_close(batch.hot_agg.float(), mean[hot].bfloat16().float())


@pytest.mark.parametrize("hot_ratio", [0.0, 0.3])
def test_features_changed_in_place_reach_a_half_width_hetero_loader(hot_ratio):
    data = power_law_hetero_graph(scale=0.002, num_features=8, seed=3)
    loader = OrchNeighborLoader(
        data, [-1, -1], input_nodes="paper", batch_size=BATCH, hot_ratio=hot_ratio,
        hot_method="degree", feature_dtype=torch.bfloat16,
    )  # fmt: skip
    if hot_ratio:
        loader.serve({r: "sum" for r in loader.cache.relations})
    next(iter(loader))
    data["author"].x.mul_(3).add_(1)
    batch = next(iter(loader))
    half = {t: x.bfloat16() for t, x in data.x_dict.items()}
    for node_type in batch.node_types:
        assert torch.equal(batch[node_type].x, half[node_type][batch[node_type].n_id])
    if not hot_ratio:
        return
    relation = ("author", "writes", "paper")
    src, dst = data[relation].edge_index
    total = torch.zeros(data["paper"].num_nodes, 8)
    total.index_add_(0, dst, half["author"][src].float())
    papers = batch["paper"]
    hot = papers.n_id[papers.hot_index]
    assert hot.numel() > 0
    check_close(batch[relation].hot_agg.float(), total[hot].bfloat16().float())


class WeightedHeteroConv(torch.nn.Module):
    """Two layers of ``HeteroConv(GraphConv)`` given every relation's weights."""

    def __init__(self, metadata):
        super().__init__()
        self.convs = torch.nn.ModuleList(
            HeteroConv({relation: GraphConv((-1, -1), 16) for relation in metadata[1]})
            for _ in range(2)
        )

    def forward(self, x_dict, edge_index_dict, edge_weight_dict):
        for index, conv in enumerate(self.convs):
            x_dict = conv(x_dict, edge_index_dict, edge_weight_dict=edge_weight_dict)
            if index == 0:
                x_dict = {key: x.relu() for key, x in x_dict.items()}
        return x_dict


def test_edge_weights_changed_in_place_reach_heterogeneous_hot_values():
    data = power_law_hetero_graph(scale=0.002, num_features=8, seed=3)
    generator = torch.Generator().manual_seed(5)
    for store in data.edge_stores:
        del store.edge_attr
        store.edge_weight = 0.1 + torch.rand(store.num_edges, generator=generator)
    torch.manual_seed(0)
    model = WeightedHeteroConv(data.metadata())
    with torch.no_grad():
        model(data.x_dict, data.edge_index_dict, data.edge_weight_dict)
    reference = copy.deepcopy(model)
    loader = OrchNeighborLoader(data, [-1, -1], input_nodes="paper", batch_size=BATCH,
                                hot_ratio=0.3, hot_method="degree")  # fmt: skip
    orch = OrchModel(model, loader)

    def paper_outputs():
        rows = {}
        with torch.no_grad():
            for batch in loader:
                assert batch["paper"].hot_index.numel() > 0
                seeds = batch["paper"].n_id[: batch["paper"].batch_size].tolist()
                rows.update(zip(seeds, orch(batch), strict=True))
        return torch.stack([rows[node] for node in sorted(rows)])

    paper_outputs()
    for store in data.edge_stores:
        store.edge_weight.mul_(3)  # a user reweighs every relation in place
    with torch.no_grad():
        expected = reference(data.x_dict, data.edge_index_dict, data.edge_weight_dict)
        check_close(paper_outputs(), expected["paper"])
        check_close(orch.inference(data)["paper"], expected["paper"])


def test_an_unchanged_graph_keeps_its_hot_values():
    data = random_graph(NUM_NODES, 3000, seed=3)
    loader = OrchNeighborLoader(data, [-1, -1], batch_size=BATCH, hot_ratio=0.3,
                                hot_method="degree")  # fmt: skip
    loader.serve("mean")
    next(iter(loader))
    values = loader.cache.values("mean")
    next(iter(loader))
    assert loader.cache.values("mean") is values  # not made again


def test_a_feature_tensor_replaced_after_the_loader_was_built_is_refused():
    data = random_graph(NUM_NODES, 3000, seed=3)
    loader = OrchNeighborLoader(data, [-1, -1], batch_size=BATCH, hot_ratio=0.3,
                                hot_method="degree")  # fmt: skip
    loader.serve("mean")
    data.x = data.x * 2  # a new tensor: the hot values were made from the old
    with pytest.raises(ValueError, match=r"data.x was replaced.*data.x.copy_\(new\)"):
        next(iter(loader))
    # Without anything made from it, the loader reads the new tensor as PyG does.
    plain = OrchNeighborLoader(data, [-1, -1], batch_size=BATCH)
    data.x = data.x * 2
    batch = next(iter(plain))
    assert torch.equal(batch.x, data.x[batch.n_id])
