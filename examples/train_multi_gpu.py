"""Data-parallel GraphSAGE with torch.distributed: one process per GPU (or CPU).

Usage:
    torchrun --standalone --nproc_per_node=2 examples/train_multi_gpu.py --epochs 1
    torchrun --nnodes=2 --node_rank=0 --master_addr=HOST --nproc_per_node=8 \\
        examples/train_multi_gpu.py   # and --node_rank=1 on the second machine

Each rank trains on its own shard of the training nodes (reshuffled every
epoch) and DistributedDataParallel averages the gradients: nccl on GPUs, gloo
without them. The graph (CSC, features, labels) and the static hot values are
built once per machine, by its local rank 0, and shared with the other local
ranks through /dev/shm; the hot set is chosen once, on rank 0. Without
torchrun the script runs as a single rank. See docs/distributed.md.
"""

from __future__ import annotations

import argparse
import os
import socket
import time
from collections.abc import Sequence

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch_geometric.nn import GraphSAGE

from pyg_orch import distributed as pd
from pyg_orch.datasets import load_cora
from pyg_orch.nn.convs import cache_kind
from pyg_orch.options import add_option, add_rank_options
from pyg_orch.train import evaluate
from pyg_orch.train_config import TrainConfig


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The command-line options: those of ``pyg-orch train`` that apply here."""
    defaults = TrainConfig(
        epochs=10, batch_size=64, num_neighbors=(10, 5), hidden_channels=64, lr=0.01,
        hot_ratio=0.0,
    )
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for name in ("epochs", "num_neighbors", "hidden_channels", "lr", "seed"):
        add_option(parser, name, getattr(defaults, name))
    add_rank_options(parser, defaults.batch_size, defaults.hot_ratio)
    add_option(parser, "eval_batch_size", defaults.eval_batch_size)
    add_option(parser, "hot_method", defaults.hot_method)
    add_option(parser, "device_cache", 0)
    parser.add_argument(
        "--backend",
        default=None,
        help="torch.distributed backend (default: nccl with GPUs, else gloo)",
    )
    return parser.parse_args(argv)


def _single_process_env() -> None:
    # Started without torchrun: a world of one on this machine.
    if "RANK" not in os.environ:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        os.environ.update(
            RANK="0", WORLD_SIZE="1", LOCAL_RANK="0", LOCAL_WORLD_SIZE="1",
            MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port),
        )  # fmt: skip


def main(argv: Sequence[str] | None = None) -> None:
    """Trains, then evaluates on rank 0."""
    args = parse_args(argv)
    _single_process_env()
    context = pd.init_distributed(args.backend)
    try:
        _train(args, context)
    finally:
        dist.destroy_process_group()


def _train(args: argparse.Namespace, context: pd.DistributedContext) -> None:
    rank = context.rank
    graph = pd.share_graph(load_cora, context)
    data = graph.data
    num_classes = int(data.y.max()) + 1
    torch.manual_seed(args.seed)
    module = GraphSAGE(
        data.num_features,
        args.hidden_channels,
        num_layers=len(args.num_neighbors),
        out_channels=num_classes,
    )
    hot, values = None, None
    if args.hot_ratio > 0:
        hot, values = pd.broadcast_hot(
            graph, context, args.num_neighbors, data.train_mask, args.hot_ratio,
            kind=cache_kind(module.convs[0]) or "mean", hot_method=args.hot_method,
            batch_size=args.batch_size, seed=args.seed,
        )  # fmt: skip
    model = pd.wrap_model(module, context)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    sampler = graph.sampler(args.num_neighbors)
    extra = {}
    if context.device.type == "cuda":
        extra = {"device": context.device, "device_cache": args.device_cache}
    for epoch in range(args.epochs):
        loader = pd.distributed_loader(
            graph, context, args.num_neighbors, data.train_mask, epoch,
            args.batch_size, seed=args.seed, hot=hot, hot_values=values,
            sampler=sampler, **extra,
        )  # fmt: skip
        start, total, steps = time.perf_counter(), 0.0, 0
        model.train()
        for batch in loader:
            batch = batch.to(context.device)
            optimizer.zero_grad()
            out = model(batch)
            loss = F.cross_entropy(out, batch.y[: batch.batch_size])
            loss.backward()
            optimizer.step()
            total, steps = total + float(loss.detach()), steps + 1
        print(
            f"rank {rank}/{context.world_size} epoch {epoch + 1}: {steps} steps, "
            f"loss {total / max(steps, 1):.4f}, "
            f"{time.perf_counter() - start:.2f} s",
            flush=True,
        )
    dist.barrier()
    if rank == 0:
        model.eval()
        val, test = evaluate(model.module, data, args.eval_batch_size)
        print(f"val accuracy: {val:.4f}")
        print(f"test accuracy: {test:.4f}")


if __name__ == "__main__":
    main()
