"""Train GraphSAGE on Cora with OrchNeighborLoader in place of NeighborLoader.

python examples/drop_in_neighbor_loader.py --epochs 30
"""

import argparse

import torch
import torch.nn.functional as F
from torch_geometric.nn import GraphSAGE

from pyg_orch import OrchNeighborLoader
from pyg_orch.datasets import load_cora

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument(
    "--epochs", type=int, default=30, help="training epochs (default: %(default)s)"
)
parser.add_argument(
    "--seed", type=int, default=0, help="random seed (default: %(default)s)"
)
args = parser.parse_args()

torch.manual_seed(args.seed)
data = load_cora()
loader = OrchNeighborLoader(
    data,
    num_neighbors=[15, 10],
    input_nodes=data.train_mask,
    batch_size=64,
    shuffle=True,
)
model = GraphSAGE(data.num_features, 128, num_layers=2, out_channels=7, dropout=0.5)
optimizer = torch.optim.Adam(model.parameters(), lr=0.003)

for _ in range(args.epochs):
    model.train()
    for batch in loader:
        optimizer.zero_grad()
        out = model(batch.x, batch.edge_index)[: batch.batch_size]
        loss = F.cross_entropy(out, batch.y[: batch.batch_size])
        loss.backward()
        optimizer.step()

model.eval()
with torch.no_grad():
    pred = model(data.x, data.edge_index).argmax(dim=-1)
accuracy = (pred[data.test_mask] == data.y[data.test_mask]).float().mean()
print(f"test accuracy: {accuracy:.4f}")
