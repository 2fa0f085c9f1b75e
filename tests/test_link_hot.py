"""Hot vertices in link prediction: OrchLinkNeighborLoader with OrchModel.

The reference is the plain PyG model on the whole graph: with fan-out -1 a
batch holds every neighbour, so each seed's embedding must equal the
whole-graph one, hot or not, and so must the gradients of a link loss.
"""

import pytest
import torch
import torch.nn.functional as F
from torch_geometric.nn import GIN, GraphSAGE, to_hetero

from pyg_orch import OrchLinkNeighborLoader, OrchModel

WRITES = ("author", "writes", "paper")


def link_loss(z_src, z_dst, label):
    return F.binary_cross_entropy_with_logits((z_src * z_dst).sum(-1), label)


def gradients(model):
    return [p.grad.clone() for p in model.parameters()]


@pytest.mark.parametrize("make", [GraphSAGE, GIN], ids=["sage", "gin"])
@pytest.mark.parametrize("hot_ratio", [pytest.param(0.0, marks=pytest.mark.slow), 0.3])
def test_link_batches_match_the_whole_graph_forward_and_gradients(
    cora, make, hot_ratio
):
    torch.manual_seed(0)
    model = make(cora.num_features, 16, num_layers=2)
    loader = OrchLinkNeighborLoader(
        cora, [-1, -1], batch_size=64, neg_sampling="binary", hot_ratio=hot_ratio
    )
    orch = OrchModel(model, loader)
    batch = next(iter(loader))
    if hot_ratio:
        assert batch.hot_index.numel() > 0
    src, dst = batch.edge_label_index
    z = orch(batch)
    assert z.size(0) == batch.num_sampled_nodes[0]
    link_loss(z[src], z[dst], batch.edge_label).backward()
    ours = gradients(model)
    model.zero_grad()
    whole = model(cora.x, cora.edge_index)[batch.n_id]
    link_loss(whole[src], whole[dst], batch.edge_label).backward()
    assert torch.allclose(z, whole[: z.size(0)], atol=1e-5)
    for mine, reference in zip(ours, gradients(model), strict=True):
        assert torch.allclose(mine, reference, atol=1e-5)


def test_bf16_link_batches_match_the_whole_graph_on_widened_features(cora):
    # Cora's features are 0/1: exact in bfloat16, so only the hot aggregates'
    # rounding separates the two.
    torch.manual_seed(0)
    model = GraphSAGE(cora.num_features, 16, num_layers=2)
    loader = OrchLinkNeighborLoader(
        cora, [-1, -1], batch_size=64, neg_sampling="binary", hot_ratio=0.3,
        feature_dtype=torch.bfloat16,
    )  # fmt: skip
    orch = OrchModel(model, loader)
    batch = next(iter(loader))
    assert batch.x.dtype == batch.hot_agg.dtype == torch.bfloat16
    z = orch(batch)
    whole = model(cora.x.bfloat16().float(), cora.edge_index)[batch.n_id]
    torch.testing.assert_close(z, whole[: z.size(0)], atol=2e-2, rtol=2e-2)


def test_hetero_link_batches_match_the_whole_graph(mag):
    torch.manual_seed(0)
    model = to_hetero(GraphSAGE(8, 16, num_layers=2), mag.metadata())
    loader = OrchLinkNeighborLoader(
        mag, [-1, -1], edge_label_index=(WRITES, mag[WRITES].edge_index),
        batch_size=32, neg_sampling="binary", hot_ratio=0.3,
    )  # fmt: skip
    orch = OrchModel(model, loader)
    batch = next(iter(loader))
    assert batch["paper"].hot_index.numel() > 0
    assert batch["author"].hot_index.numel() > 0
    z = orch(batch)
    whole = model(mag.x_dict, mag.edge_index_dict)
    for node_type in ("author", "paper"):
        seeds = batch[node_type].n_id[: z[node_type].size(0)]
        assert torch.allclose(z[node_type], whole[node_type][seeds], atol=1e-5)


def test_the_last_hop_skips_hot_seeds_neighbours(cora):
    loader = OrchLinkNeighborLoader(
        cora, [4, 3], batch_size=64, neg_sampling="binary", hot_ratio=0.3
    )
    OrchModel(GraphSAGE(cora.num_features, 8, num_layers=2), loader)
    for batch in loader:
        nodes, edges = batch.num_sampled_nodes, batch.num_sampled_edges
        last_hop_targets = batch.edge_index[1, edges[0] :]
        hot = torch.zeros(batch.num_nodes, dtype=torch.bool)
        hot[batch.hot_index] = True
        assert not hot[last_hop_targets].any()
        assert batch.hot_index.max() < nodes[0] + nodes[1]


def test_a_hot_link_loader_needs_its_model(cora):
    loader = OrchLinkNeighborLoader(cora, [4, 3], batch_size=64, hot_ratio=0.2)
    with pytest.raises(RuntimeError, match="OrchModel"):
        next(iter(loader))
    loader = OrchLinkNeighborLoader(cora, [4, 3], batch_size=64, hot_ratio="auto")
    with pytest.raises(RuntimeError, match="hot_ratio='auto'"):
        next(iter(loader))
