"""What a partitioned graph costs each rank: remote rows, bytes and RPCs per batch,
for 1, 2 and 4 parts (processes on this machine), METIS against random
parts, and hot vertices replicated on every part or not.

Each row partitions one power-law graph (partition_graph), starts one process
per part (spawn_ranks) and trains GraphSAGE on every rank's share of the
training seeds for a few batches (no DDP: each rank steps its own model, so
the row measures loading, not gradient traffic). Remote rows are node feature
rows fetched from other parts. The last table sets the measured cut of remote
rows against the one the formula S = H*rho_hot / (H*rho_hot +
(1-H)*rho_cold) predicts, from H (the share of the hot-0 run's row accesses
that land on the hot vertices) and rho (the chance such an access is remote)
measured in that run.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from pyg_orch.benchmark.graph import add_graph_arguments, benchmark_graph
from pyg_orch.options import add_option, positive_int

#: How the parts are made, one row each (random only with several parts).
_METHODS = ("metis", "random")
# The tables' columns and their widths.
_ROWS = (
    ("parts", 5), ("method", 8), ("hot", 6), ("seeds/s", 10), ("rows/batch", 12),
    ("MB/batch", 10), ("RPCs/batch", 12), ("balance", 9), ("rows cut", 10),
)  # fmt: skip
_PREDICTIONS = (
    ("parts", 5), ("method", 8), ("hot", 6), ("H", 7), ("rho_hot", 9),
    ("rho_cold", 10), ("predicted", 11), ("measured", 10),
)  # fmt: skip


def _columns(columns: tuple, values: tuple | None = None) -> str:
    # One table line: the headers, or the values, right-aligned.
    cells = [name for name, _ in columns] if values is None else values
    return "".join(
        f"{cell!s:>{width}}" for cell, (_, width) in zip(cells, columns, strict=True)
    )


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Adds this benchmark's options to ``parser``."""
    add_graph_arguments(parser, num_nodes=100_000)
    add_option(parser, "num_neighbors", [10, 5])
    add_option(parser, "batch_size", 256, help="seed nodes per batch, per rank")
    parser.add_argument(
        "--parts", type=positive_int, nargs="+", default=[1, 2, 4],
        help="the numbers of parts measured (default: 1 2 4)",
    )  # fmt: skip
    parser.add_argument(
        "--hot-ratios", type=float, nargs="+", default=[0.0, 0.1, 0.2],
        help="the hot ratios measured (default: 0 0.1 0.2)",
    )  # fmt: skip
    parser.add_argument(
        "--concurrency", type=positive_int, default=2,
        help="batches each rank samples at once (PyG's concurrency; default: 2)",
    )  # fmt: skip
    parser.add_argument(
        "--sync", action="store_true",
        help="sample in the training thread (async_sampling=False; default: off)",
    )  # fmt: skip
    parser.add_argument(
        "--batches", type=positive_int, default=8,
        help="timed batches per rank, after one warm-up batch (default: 8)",
    )  # fmt: skip


def _rank(
    rank: int, world_size: int, root: Path, args: argparse.Namespace, hot_masks: dict
) -> dict:
    import torch.nn.functional as F
    from torch_geometric.distributed import DistContext
    from torch_geometric.nn import GraphSAGE

    import pyg_orch.distributed as pd
    from pyg_orch import OrchModel

    torch.set_num_threads(max(1, (os.cpu_count() or 1) // world_size))
    stores = pd.load_partition(root, rank, world_size)
    owner = stores[1].node_pb
    seeds = pd.split_seeds(pd.load_splits(root)["train_mask"], owner, rank, world_size)
    context = DistContext(
        rank=rank, global_rank=rank, world_size=world_size,
        global_world_size=world_size, group_name="benchmark-partitioned",
    )  # fmt: skip
    loader = pd.OrchDistNeighborLoader(
        stores, list(args.num_neighbors), current_ctx=context, input_nodes=seeds,
        batch_size=args.batch_size, shuffle=True, drop_last=True,
        concurrency=args.concurrency, async_sampling=not args.sync,
        master_port=int(os.environ["MASTER_PORT"]) + 1,
    )  # fmt: skip
    x = stores[0].get_tensor(group_name=None, attr_name="x")
    torch.manual_seed(args.seed)
    module = GraphSAGE(
        x.size(1), 64, num_layers=len(args.num_neighbors),
        out_channels=args.num_classes,
    )  # fmt: skip
    model = OrchModel(module, loader)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.003)
    accesses = {ratio: torch.zeros(4) for ratio in hot_masks}
    # The masks are over the user's ids; the batches hold the partition's.
    original = pd.original_ids(root)
    seconds, batches = 0.0, 0
    iterator = iter(loader)
    for index in range(args.batches + 1):
        if index == 1:  # the first batch warms the kernels and the RPC agents up
            loader.traffic.reset()
            start = time.perf_counter()
        batch = next(iterator)
        optimizer.zero_grad()
        F.cross_entropy(model(batch), batch.y[: batch.batch_size]).backward()
        optimizer.step()
        if index:
            batches += 1
            remote = owner[batch.n_id] != rank
            for ratio, mask in hot_masks.items():
                hot = mask[original[batch.n_id]]
                accesses[ratio] += _access_counts(hot, remote)
    seconds = time.perf_counter() - start
    del iterator
    return {
        "seconds": seconds, "batches": batches, "seeds": batches * args.batch_size,
        "traffic": loader.traffic.per_batch(), "accesses": accesses,
    }  # fmt: skip


def _access_counts(hot: Tensor, remote: Tensor) -> Tensor:
    # Row accesses: hot, hot and remote, cold, cold and remote.
    counts = [hot.sum(), (hot & remote).sum(), (~hot).sum(), (~hot & remote).sum()]
    return torch.stack(counts).double()


def _measure(
    data: Any, parts: int, method: str, hot_ratio: float, args: Any, hot_masks: dict
) -> dict:
    import pyg_orch.distributed as pd

    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        pd.partition_graph(
            data, parts, root, method=method, hot_ratio=hot_ratio, seed=args.seed
        )
        ranks = pd.spawn_ranks(_rank, parts, (root, args, hot_masks), timeout=1800)
    times = [result["seconds"] for result in ranks]
    return {
        "seeds_per_s": sum(r["seeds"] for r in ranks) / max(times),
        "rows": statistics.mean(r["traffic"]["rows"] for r in ranks),
        "bytes": statistics.mean(r["traffic"]["bytes"] for r in ranks),
        "rpcs": statistics.mean(
            r["traffic"]["feature_rpcs"] + r["traffic"]["sampling_rpcs"] for r in ranks
        ),
        "balance": max(times) / statistics.mean(times),
        "accesses": {q: sum(r["accesses"][q] for r in ranks) for q in hot_masks},
    }  # fmt: skip


def predicted_cut(accesses: torch.Tensor) -> tuple[float, float, float, float]:
    """``(H, rho_hot, rho_cold, S)`` from counts of hot, hot remote, cold, cold remote.

    Example:
        >>> [round(v, 3) for v in predicted_cut(torch.tensor([60., 30., 40., 8.]))]
        [0.6, 0.5, 0.2, 0.789]
    """
    hot, hot_remote, cold, cold_remote = (float(value) for value in accesses)
    share = hot / max(hot + cold, 1.0)
    rho_hot, rho_cold = hot_remote / max(hot, 1.0), cold_remote / max(cold, 1.0)
    saved = share * rho_hot
    return share, rho_hot, rho_cold, saved / max(saved + (1 - share) * rho_cold, 1e-12)


def run(args: argparse.Namespace) -> None:
    """Partitions the graph for each row, runs its ranks, prints the tables."""
    from torch_geometric.sampler.utils import to_csc

    from pyg_orch.hot.choice import in_degree, top_fraction

    data, description = benchmark_graph(args)
    # (Each rank holds its own part's labels only.)
    args.num_classes = int(data.y.max()) + 1
    colptr = to_csc(data, device="cpu")[0]
    degree = in_degree(colptr)
    hot_masks = {}
    for ratio in args.hot_ratios:
        mask = torch.zeros(data.num_nodes, dtype=torch.bool)
        mask[top_fraction(degree, ratio)] = True
        hot_masks[ratio] = mask
    print(
        f"{description}; fan-outs {args.num_neighbors}, batch {args.batch_size} per "
        f"rank, GraphSAGE hidden 64; {args.batches} timed batches per rank after "
        f"one warm-up; one process per part, {os.cpu_count()} cores shared; "
        f"{'synchronous sampling' if args.sync else 'asynchronous sampling'}, "
        f"concurrency {args.concurrency}",
        flush=True,
    )
    print(_columns(_ROWS), flush=True)
    measured = {}
    for parts in args.parts:
        for method in _METHODS if parts > 1 else _METHODS[:1]:
            for ratio in args.hot_ratios:
                row = _measure(data, parts, method, ratio, args, hot_masks)
                measured[parts, method, ratio] = row
                base = measured[parts, method, args.hot_ratios[0]]["rows"]
                versus = f"{1 - row['rows'] / base:.0%}" if base else "-"
                values = (
                    parts, method, f"{ratio:g}", f"{row['seeds_per_s']:.0f}",
                    f"{row['rows']:.1f}", f"{row['bytes'] / 1e6:.2f}",
                    f"{row['rpcs']:.1f}", f"{row['balance']:.2f}", versus,
                )  # fmt: skip
                print(_columns(_ROWS, values), flush=True)
    _print_prediction(measured, args)


def _print_prediction(measured: dict, args: argparse.Namespace) -> None:
    zero = args.hot_ratios[0]
    print(
        f"\nremote rows saved by hot vertices: measured (against hot {zero:g}) and "
        f"predicted by S = H*rho_hot / (H*rho_hot + (1-H)*rho_cold), H and rho "
        f"measured on the hot-{zero:g} batches"
    )
    print(_columns(_PREDICTIONS))
    for (parts, method, ratio), row in measured.items():
        if parts == 1 or ratio == zero:
            continue
        base = measured[parts, method, zero]
        share, rho_hot, rho_cold, saved = predicted_cut(base["accesses"][ratio])
        cut = 1 - row["rows"] / base["rows"] if base["rows"] else float("nan")
        values = (
            parts, method, f"{ratio:g}", f"{share:.2f}", f"{rho_hot:.2f}",
            f"{rho_cold:.2f}", f"{saved:.0%}", f"{cut:.0%}",
        )  # fmt: skip
        print(_columns(_PREDICTIONS, values))
    print(
        "measured cuts can exceed the prediction: a hot vertex's last hop is not "
        "sampled, so its neighbours' rows are not fetched at all."
    )
