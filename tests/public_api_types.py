"""The public API as users call it, for a type checker (``.ci/run`` runs mypy).

``mypy --follow-imports=silent tests/public_api_types.py`` checks these calls
against pyg_orch's signatures and reports only errors in this file: a hint
that refuses what the API accepts (``hot_ratio="auto"``, a dict of ratios)
or promises a wrong return type fails here. Nothing here runs in the tests.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor
from torch_geometric.data import Data, HeteroData
from torch_geometric.nn import GraphSAGE

from pyg_orch import (
    HotSet,
    OrchLinkNeighborLoader,
    OrchModel,
    OrchNeighborLoader,
    OrchNeighborSampler,
    select_hot,
)
from pyg_orch.datasets import (
    load_cora,
    load_dataset,
    power_law_graph,
    power_law_hetero_graph,
)


def node_classification() -> float:
    data: Data = load_cora()
    for ratio in (0.0, 0.2, 1, "auto"):
        OrchNeighborLoader(data, [10, 5], batch_size=64, hot_ratio=ratio)
    loader = OrchNeighborLoader(
        data, num_neighbors=[10, 5], input_nodes=data.train_mask, batch_size=64,
        shuffle=True, hot_ratio=0.2, hot_method="degree", prefetch=2,
        feature_dtype=torch.bfloat16,
    )  # fmt: skip
    model = OrchModel(GraphSAGE(data.num_features, 16, num_layers=2), loader)
    optimizer = torch.optim.Adam(model.parameters())
    for batch in loader:
        out: Tensor = model(batch)
        F.cross_entropy(out, batch.y[: batch.batch_size]).backward()
        optimizer.step()
    state = loader.state_dict()
    loader.load_state_dict(state)
    hot: HotSet | None = loader.hot
    assert hot is not None
    prediction: Tensor = model.inference(data)
    return float((prediction.argmax(1) == data.y).float().mean())


def heterogeneous() -> None:
    data: HeteroData = power_law_hetero_graph(scale=0.01, num_features=8)
    OrchNeighborLoader(
        data, [4, 3], input_nodes="paper", batch_size=64,
        hot_ratio={"paper": 0.2, "author": 0.1},
    )  # fmt: skip
    OrchLinkNeighborLoader(
        data, [4, 3], edge_label_index=("paper", "cites", "paper"),
        batch_size=64, hot_ratio={"paper": 0.2},
    )  # fmt: skip


def other_names() -> None:
    data = power_law_graph(1000, avg_degree=8, num_features=4)
    sampler = OrchNeighborSampler(data, [5])
    chosen: HotSet = select_hot(sampler, torch.arange(100), 0.2, method="degree")
    assert chosen.nodes.numel() > 0
    load_dataset("cora")
