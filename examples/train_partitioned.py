"""Trains GraphSAGE on a graph partitioned across processes or machines.

The graph is split once with METIS (``partition_graph``); then every process
loads only its part and samples mini-batches that reach into the others over
PyG's distributed engine (``torch_geometric.distributed``, RPC), while DDP
keeps the model replicas identical. The hot vertices (the top ``--hot-ratio``
by in-degree) are replicated on every part: their rows never cross the
network, and their last hop is not sampled.

On one machine, one process per part (spawned here):

    python examples/train_partitioned.py --parts 2

Across machines: partition once into a folder every machine can read (or
copy it to each), then start one process per part with torchrun:

    python examples/train_partitioned.py --parts 4 --root /shared/cora4 --partition-only
    torchrun --nnodes 4 --nproc-per-node 1 --node-rank $I --master-addr $HOST \\
        --master-port 29500 examples/train_partitioned.py --parts 4 --root /shared/cora4

The model's process group uses ``MASTER_PORT``; PyG's sampling RPC a port rank
0 picks and sends to the others (``agreed_port``). See docs/partitioned.md.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel
from torch_geometric.distributed import DistContext
from torch_geometric.nn import GraphSAGE

import pyg_orch.distributed as pd
from pyg_orch import OrchModel
from pyg_orch.datasets import load_dataset
from pyg_orch.nn.convs import cache_kind
from pyg_orch.options import add_option


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The command-line options."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--dataset", default="cora", help="dataset to partition (default: cora)"
    )
    parser.add_argument(
        "--parts", type=int, default=2, help="partitions, one process each (default: 2)"
    )
    parser.add_argument(
        "--root", default=None, help="partition folder (default: a temporary one)"
    )
    parser.add_argument(
        "--partition-only",
        action="store_true",
        help="partition, then exit (default: off)",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=3600.0,
        help="seconds the spawned ranks may take; past them each prints its "
        "stacks and is stopped (default: 3600)",
    )
    add_option(parser, "epochs", 10)
    add_option(parser, "num_neighbors", (10, 5))
    add_option(parser, "hidden_channels", 64)
    add_option(parser, "lr", 0.01)
    add_option(parser, "dropout", 0.5)
    add_option(parser, "seed", 0)
    add_option(
        parser, "batch_size", 64, help="training seed nodes per batch, per process"
    )
    add_option(
        parser, "hot_ratio", 0.1, help="share of the nodes replicated on every part"
    )
    return parser.parse_args(argv)  # fmt: skip


def partition(args: argparse.Namespace, root: Path) -> None:
    """Splits the dataset into ``args.parts`` parts in ``root``."""
    data = load_dataset(args.dataset)
    info = pd.partition_graph(
        data, args.parts, root, hot_ratio=args.hot_ratio, seed=args.seed
    )
    cut = info.edge_cut / max(sum(info.num_edges), 1)
    print(
        f"partitioned {args.dataset} into {info.num_parts} parts with "
        f"{info.binding}: nodes {list(info.num_nodes)}, training nodes "
        f"{list(info.num_train)}, edge cut {cut:.3f}, {info.num_hot} hot",
        flush=True,
    )


def _loader(
    stores, seeds, fanouts, context, port, **kwargs
) -> pd.OrchDistNeighborLoader:
    return pd.OrchDistNeighborLoader(
        stores, fanouts, current_ctx=context, input_nodes=seeds,
        master_port=port, concurrency=2, **kwargs,
    )  # fmt: skip


def accuracy(model: OrchModel, loader: pd.OrchDistNeighborLoader) -> float:
    """Accuracy over every rank's nodes of ``loader`` (a collective call)."""
    counts = torch.zeros(2)
    model.eval()
    with torch.no_grad():
        for batch in loader:
            predicted = model(batch).argmax(dim=-1)
            right = (predicted == batch.y[: batch.batch_size]).sum()
            counts += torch.tensor([float(right), batch.batch_size])
    dist.all_reduce(counts)
    return float(counts[0] / counts[1])


def train_rank(
    rank: int, world_size: int, args: argparse.Namespace, root: Path
) -> dict:
    """One process: its part, its share of the seeds, one DDP replica.

    The DDP replica lives in :func:`fit` only: the process group is
    destroyed after it is gone (see ``pyg_orch.distributed.process_group``).
    """
    with pd.process_group("gloo", rank=rank, world_size=world_size):
        return fit(rank, world_size, args, root)


def fit(rank: int, world_size: int, args: argparse.Namespace, root: Path) -> dict:
    """Trains this rank's replica and reports what it measured."""
    port = pd.agreed_port()  # PyG's sampling RPC
    stores = pd.load_partition(root, rank, world_size)
    # The splits' ids in the partition's numbering (partition_graph numbered
    # the nodes anew, each part one range; pd.original_ids maps them back).
    splits = pd.load_splits(root)
    owner = stores[1].node_pb
    context = DistContext(
        rank=rank, global_rank=rank, world_size=world_size,
        global_world_size=world_size, group_name="train-partitioned",
    )  # fmt: skip
    # Every rank the same number of seeds, so the same number of DDP steps.
    seeds = pd.split_seeds(splits["train_mask"], owner, rank, world_size)
    loader = _loader(
        stores, seeds, list(args.num_neighbors), context, port,
        batch_size=args.batch_size, shuffle=True,
    )  # fmt: skip
    # Every validation and test node once (the ones this rank's part owns),
    # with its whole neighbourhood, as one process's layer-wise inference.
    full = [-1] * len(args.num_neighbors)
    evaluated = {
        name: _loader(
            stores,
            splits[name][owner[splits[name]] == rank],
            full,
            context,
            port,
            batch_size=512,
        )  # fmt: skip
        for name in ("val_mask", "test_mask")
    }
    torch.manual_seed(args.seed)
    # Each part holds its own nodes' labels: the classes are all parts' own.
    num_classes = stores[0].get_tensor(group_name=None, attr_name="y").max() + 1
    dist.all_reduce(num_classes, op=dist.ReduceOp.MAX)
    num_classes = int(num_classes)
    num_features = stores[0].get_tensor(group_name=None, attr_name="x").size(1)
    module = GraphSAGE(
        num_features, args.hidden_channels,
        num_layers=len(args.num_neighbors), out_channels=num_classes,
        dropout=args.dropout,
    )  # fmt: skip
    model = DistributedDataParallel(OrchModel(module, loader))
    for eval_loader in evaluated.values():
        if eval_loader.cache is not None:
            eval_loader.serve(cache_kind(module.convs[0]))
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    best_val, test_at_best = -1.0, 0.0
    for epoch in range(args.epochs):
        start, total, steps = time.perf_counter(), 0.0, 0
        model.train()
        for batch in loader:
            optimizer.zero_grad()
            loss = F.cross_entropy(model(batch), batch.y[: batch.batch_size])
            loss.backward()
            optimizer.step()
            total, steps = total + loss.item(), steps + 1
        seconds = time.perf_counter() - start
        val = accuracy(model.module, evaluated["val_mask"])
        if val > best_val:  # the test accuracy of the best validation epoch
            best_val = val
            test_at_best = accuracy(model.module, evaluated["test_mask"])
        print(
            f"rank {rank}/{world_size} epoch {epoch + 1}: {steps} steps, "
            f"loss {total / max(steps, 1):.4f}, {seconds:.2f} s, val {val:.4f}",
            flush=True,
        )
    checksum = float(sum(p.detach().double().sum() for p in module.parameters()))
    checksums: list[float | None] = [None] * world_size
    dist.all_gather_object(checksums, checksum)
    traffic = loader.traffic.per_batch()
    dist.barrier()
    identical = len(set(checksums)) == 1
    return {"accuracy": test_at_best, "identical": identical, "traffic": traffic}


def main(argv: Sequence[str] | None = None) -> None:
    """Partitions if needed, then trains: under torchrun, or spawning the parts here."""
    args = parse_args(argv)
    with tempfile.TemporaryDirectory() as temporary:
        root = Path(args.root or temporary)
        under_torchrun = "RANK" in os.environ
        if not (root / "META.json").exists() or args.partition_only:
            if under_torchrun:
                raise SystemExit(
                    f"{root} holds no partition: run with --partition-only first"
                )
            partition(args, root)
        if args.partition_only:
            return
        if under_torchrun:
            results = [
                train_rank(
                    int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), args, root
                )
            ]
        else:
            results = pd.spawn_ranks(
                train_rank, args.parts, (args, root), timeout=args.timeout
            )
    first = results[0]
    print(f"remote feature rows per batch (rank 0): {first['traffic']['rows']:.1f}")
    print(f"replicas identical: {all(r['identical'] for r in results)}")
    print(f"test accuracy: {first['accuracy']:.4f}")


if __name__ == "__main__":
    main()
