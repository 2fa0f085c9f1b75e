"""Cluster-GCN with PyG's own ClusterData and ClusterLoader against full-batch training.

PyG's ``ClusterData`` partitions the graph with METIS (pyg_orch's, through
:mod:`pyg_orch.backend`, where neither pyg-lib nor torch-sparse is
installed) and ``ClusterLoader`` trains on groups of parts, as PyG's
``examples/cluster_gcn_reddit.py`` does: a 2-layer GCN, 128 hidden channels,
dropout 0.5, Adam at 0.005, ``--parts-per-batch`` parts a batch. The same
model trains full-batch on the same split with the same optimiser, once per
seed; each side reports the test accuracy at its best validation epoch, on
the whole graph. The default run (Cora, 3 seeds) takes about a minute on 2
CPU cores; ``--datasets path/amazon_photo.npz`` runs a seeded split of Amazon
Photo.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
import torch.nn.functional as F
from torch_geometric.data import Data
from torch_geometric.loader import ClusterData, ClusterLoader
from torch_geometric.nn import GCN

from pyg_orch.datasets import load_dataset
from pyg_orch.options import add_option, non_negative_int, positive_int
from pyg_orch.train_config import TrainConfig


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Adds this benchmark's options to ``parser``."""
    parser.add_argument(
        "--datasets", nargs="+", default=["cora"],
        help="dataset names or .npz paths, as for pyg-orch train --dataset "
        "(default: cora)",
    )  # fmt: skip
    add_option(parser, "root", TrainConfig().root)
    parser.add_argument(
        "--seeds", type=non_negative_int, nargs="+", default=[0, 1, 2],
        help="one run per seed, each its own split for .npz graphs "
        "(default: 0 1 2)",
    )  # fmt: skip
    parser.add_argument(
        "--epochs", type=positive_int, default=200,
        help="epochs of each side (default: %(default)s)",
    )  # fmt: skip
    parser.add_argument(
        "--nodes-per-part", type=positive_int, default=150,
        help="ClusterData's num_parts is the graph's nodes over this, as "
        "PyG's Reddit example's 1500 parts of 233k nodes (default: %(default)s)",
    )  # fmt: skip
    parser.add_argument(
        "--parts-per-batch", type=positive_int, default=20,
        help="ClusterLoader's batch_size, as in PyG's example (default: %(default)s)",
    )  # fmt: skip


def _accuracy(model: GCN, data: Data, mask_name: str) -> float:
    model.eval()
    with torch.no_grad():
        predicted = model(data.x, data.edge_index).argmax(dim=-1)
    mask = data[mask_name]
    return float((predicted[mask] == data.y[mask]).float().mean())


def _best_test(model: GCN, data: Data, epoch_steps, epochs: int) -> float:
    # The test accuracy at the epoch of best validation accuracy.
    optimizer = torch.optim.Adam(model.parameters(), lr=0.005)
    best_val, best_test = -1.0, 0.0
    for _ in range(epochs):
        model.train()
        for batch in epoch_steps():
            optimizer.zero_grad()
            out = model(batch.x, batch.edge_index)
            mask = batch.train_mask
            if bool(mask.any()):
                F.cross_entropy(out[mask], batch.y[mask]).backward()
                optimizer.step()
        val = _accuracy(model, data, "val_mask")
        if val > best_val:
            best_val, best_test = val, _accuracy(model, data, "test_mask")
    return best_test


def _model(data: Data, seed: int) -> GCN:
    torch.manual_seed(seed)
    return GCN(data.num_features, 128, 2, int(data.y.max()) + 1, dropout=0.5)


def run(args: argparse.Namespace) -> None:
    """Trains each dataset and seed full-batch and with Cluster-GCN; prints a table."""
    print(
        f"GCN 128 hidden, dropout 0.5, Adam 0.005, {args.epochs} epochs; "
        f"ClusterData parts of about {args.nodes_per_part} nodes, "
        f"{args.parts_per_batch} parts a batch; test accuracy at the best "
        f"validation epoch; seeds {args.seeds}",
        flush=True,
    )
    print(f"{'dataset':<16} {'seed':>4} {'full-batch':>10} {'Cluster-GCN':>11} "
          f"{'difference':>10} {'parts':>6} {'seconds':>8}")  # fmt: skip
    for name in args.datasets:
        differences = []
        for seed in args.seeds:
            data = load_dataset(name, args.root, seed=seed)
            start = time.perf_counter()
            full = _best_test(_model(data, seed), data, lambda d=data: [d], args.epochs)
            num_parts = max(2, data.num_nodes // args.nodes_per_part)
            parts = ClusterData(data, num_parts, log=False)
            loader = ClusterLoader(parts, batch_size=args.parts_per_batch, shuffle=True)
            torch.manual_seed(seed)
            cluster = _best_test(
                _model(data, seed), data, lambda d=loader: d, args.epochs
            )
            differences.append(100 * (cluster - full))
            print(
                f"{name[-16:]:<16} {seed:>4} {100 * full:>10.2f} "
                f"{100 * cluster:>11.2f} "
                f"{differences[-1]:>+10.2f} {num_parts:>6} "
                f"{time.perf_counter() - start:>8.1f}",
                flush=True,
            )
        print(
            f"{name[-16:]:<16} mean difference {statistics.mean(differences):+.2f} "
            f"points, largest {max(differences, key=abs):+.2f}",
            flush=True,
        )
