"""Seconds per training epoch of data-parallel pyg_orch (DDP, gloo on CPU) with
1 and 2 ranks, on one power-law graph.

The machine's cores are split between the ranks; the graph is built once and
shared through /dev/shm. The default run, on a 100,000-node graph, takes a few
minutes on 2 CPU cores.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import tempfile
import time
from pathlib import Path

import torch
import torch.multiprocessing as mp

from pyg_orch.benchmark.graph import (
    BENCHMARK_DEFAULTS,
    add_graph_arguments,
    benchmark_graph,
)
from pyg_orch.options import (
    add_option,
    add_rank_options,
    non_negative_int,
    positive_int,
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Adds this benchmark's options to ``parser``."""
    add_graph_arguments(parser, num_nodes=100_000)
    add_option(parser, "num_neighbors", list(BENCHMARK_DEFAULTS.num_neighbors))
    add_option(parser, "hidden_channels", BENCHMARK_DEFAULTS.hidden_channels)
    add_rank_options(parser, BENCHMARK_DEFAULTS.batch_size, hot_ratio=0.1)
    parser.add_argument(
        "--ranks",
        type=positive_int,
        nargs="+",
        default=[1, 2],
        help="the world sizes measured, one row each (default: 1 2)",
    )
    add_option(parser, "epochs", 2, help="timed epochs per world size")
    parser.add_argument(
        "--warmup",
        type=non_negative_int,
        default=1,
        metavar="EPOCHS",
        help="untimed epochs before the timed ones (default: %(default)s)",
    )


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _build(args: argparse.Namespace):
    return benchmark_graph(args)[0]


def _worker(
    rank: int, world: int, port: int, threads: int, args: argparse.Namespace, out: str
) -> None:
    os.environ.update(
        MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank),
        WORLD_SIZE=str(world), LOCAL_RANK=str(rank), LOCAL_WORLD_SIZE=str(world),
    )  # fmt: skip
    import functools

    import torch.distributed as dist
    import torch.nn.functional as F
    from torch_geometric.nn import GraphSAGE

    from pyg_orch import distributed as pd
    from pyg_orch.nn.convs import cache_kind

    torch.set_num_threads(threads)
    context = pd.init_distributed("gloo")
    try:
        graph = pd.share_graph(functools.partial(_build, args), context)
        data = graph.data
        torch.manual_seed(args.seed)
        module = GraphSAGE(
            data.num_features, args.hidden_channels,
            num_layers=len(args.num_neighbors), out_channels=int(data.y.max()) + 1,
        )  # fmt: skip
        hot, values = None, None
        if args.hot_ratio > 0:
            hot, values = pd.broadcast_hot(
                graph, context, args.num_neighbors, data.train_mask, args.hot_ratio,
                kind=cache_kind(module.convs[0]) or "mean",
                batch_size=args.batch_size, seed=args.seed,
            )  # fmt: skip
        model = pd.wrap_model(module, context)
        optimizer = torch.optim.Adam(model.parameters(), lr=0.003)
        sampler = graph.sampler(args.num_neighbors)
        seconds, steps = [], 0
        for epoch in range(args.warmup + args.epochs):
            loader = pd.distributed_loader(
                graph, context, args.num_neighbors, data.train_mask, epoch,
                args.batch_size, seed=args.seed, hot=hot, hot_values=values,
                sampler=sampler,
            )  # fmt: skip
            dist.barrier()
            start = time.perf_counter()
            steps = 0
            for batch in loader:
                optimizer.zero_grad()
                loss = F.cross_entropy(model(batch), batch.y[: batch.batch_size])
                loss.backward()
                optimizer.step()
                steps += 1
            # The epoch ends when the slowest rank ends.
            elapsed = torch.tensor([time.perf_counter() - start])
            dist.all_reduce(elapsed, op=dist.ReduceOp.MAX)
            if epoch >= args.warmup:
                seconds.append(float(elapsed))
        if rank == 0:
            torch.save({"seconds": seconds, "steps": steps}, out)
        dist.barrier()
    except BaseException:
        dist.destroy_process_group()
        raise
    pd.exit_without_teardown()


def _measure(world: int, threads: int, args: argparse.Namespace) -> dict:
    with tempfile.TemporaryDirectory() as folder:
        out = str(Path(folder) / "result.pt")
        mp.spawn(_worker, args=(world, _free_port(), threads, args, out), nprocs=world)
        return torch.load(out)


def run(args: argparse.Namespace) -> None:
    """Builds the graph, times an epoch with each number of ranks, prints them."""
    _, description = benchmark_graph(args)
    cores = os.cpu_count() or 1
    print(
        f"{description}; fan-outs {args.num_neighbors}, batch {args.batch_size} per "
        f"rank, GraphSAGE hidden {args.hidden_channels}, hot_ratio "
        f"{args.hot_ratio:g}; median of {args.epochs} epochs after {args.warmup} "
        f"warm-up; gloo on CPU, {cores} cores split between the ranks",
        flush=True,
    )
    print(f"{'ranks':>5}{'threads/rank':>14}{'steps/rank':>12}{'s/epoch':>10}"
          f"{'speed-up':>10}")  # fmt: skip
    first = None
    for world in args.ranks:
        threads = max(1, cores // world)
        result = _measure(world, threads, args)
        epoch_s = statistics.median(result["seconds"])
        first = first or epoch_s
        print(
            f"{world:>5}{threads:>14}{result['steps']:>12}{epoch_s:>10.3f}"
            f"{first / epoch_s:>9.2f}x",
            flush=True,
        )
    print(
        f"speed-up: the {args.ranks[0]}-rank epoch time over this row's; an epoch "
        f"ends when its slowest rank ends; the graph is built once and shared "
        f"through /dev/shm."
    )
