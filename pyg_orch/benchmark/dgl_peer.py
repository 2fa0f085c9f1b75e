"""DGL on the epoch benchmark's graph: the peer a PyG user would pick instead.

DGL needs an older torch than pyg_orch (DGL 2.1, the newest on PyPI for
Python 3.11, needs torch <= 2.2.1), so it runs in its own Python: ``benchmark
epoch --dgl-python PATH`` writes the graph to a ``.npz`` file and runs this
file as a script with that interpreter. The script imports only torch, NumPy
and DGL, never pyg_orch, and prints its medians as one JSON line.

It trains what the PyG rows train: a GraphSAGE of ``dgl.nn.SAGEConv``
(mean, ReLU between layers, no dropout, as PyG's ``GraphSAGE`` defaults),
with DGL's ``NeighborSampler`` and ``DataLoader`` on the same seeds, fan-outs,
batch size and Adam settings; for ``--precisions ... bf16`` a second row runs
the model under ``torch.autocast`` in bfloat16. DGL samples every layer
afresh for all the nodes of the hops above it (blocks), so its edge count is
the sum over its blocks.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

#: The row's name in the epoch benchmark's table.
NAME = "DGL DataLoader + dgl.nn.SAGEConv"


def measure(
    python: str, data: Any, args: argparse.Namespace, precision: str = "fp32"
) -> dict:
    """Times DGL's training batches on this graph with ``python``.

    Args:
        python: an interpreter with ``dgl`` and ``torch`` installed.
        data: the graph (a PyG ``Data``): ``edge_index``, ``x``, ``y`` and
            ``train_mask``, the seeds.
        args: ``num_neighbors``, ``batch_size``, ``hidden_channels``,
            ``batches``, ``warmup`` and ``seed``.
        precision: ``"fp32"``, or ``"bf16"``: the model's forward pass
            (and so its backward) under ``torch.autocast("cpu",
            dtype=torch.bfloat16)``, DGL's own best on a CPU with native
            bfloat16 products.

    Returns:
        The fields of ``epoch.Measurement``: medians per batch, peak RSS.

    Raises:
        RuntimeError: if the DGL run fails (no ``dgl`` in ``python``, say).

    Example:
        >>> measure("/no/such/python", None, None)
        Traceback (most recent call last):
        ...
        RuntimeError: --dgl-python /no/such/python: no such file; ...
    """
    if not Path(python).is_file():
        raise RuntimeError(
            f"--dgl-python {python}: no such file; name the Python of an "
            "environment with dgl installed"
        )
    with tempfile.TemporaryDirectory() as folder:
        graph = Path(folder) / "graph.npz"
        np.savez(
            graph,
            src=data.edge_index[0].numpy(),
            dst=data.edge_index[1].numpy(),
            x=data.x.numpy(),
            y=data.y.numpy(),
            train=data.train_mask.nonzero().view(-1).numpy(),
        )
        threads = str(torch.get_num_threads())
        command = [python, __file__, str(graph), "--threads", threads]
        command += ["--precision", precision]
        command += ["--num-neighbors", *map(str, args.num_neighbors)]
        for name in ("batch_size", "hidden_channels", "batches", "warmup", "seed"):
            command += [f"--{name.replace('_', '-')}", str(getattr(args, name))]
        # DGL's sampler sizes its OpenMP pool from the environment.
        env = {**os.environ, "OMP_NUM_THREADS": threads}
        done = subprocess.run(command, capture_output=True, text=True, env=env)
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise RuntimeError(
            f"--dgl-python {python}: the DGL run failed ({last}); name the "
            "Python of an environment with dgl and its torch installed"
        )
    return json.loads(done.stdout.strip().splitlines()[-1])


class _GraphSAGE(torch.nn.Module):
    # PyG's GraphSAGE defaults in DGL: mean, ReLU between layers, no dropout.
    def __init__(self, conv: type, channels: list[int]) -> None:
        super().__init__()
        self.convs = torch.nn.ModuleList(
            conv(a, b, "mean") for a, b in zip(channels[:-1], channels[1:], strict=True)
        )

    def forward(self, blocks: list, h: torch.Tensor) -> torch.Tensor:
        for layer, (conv, block) in enumerate(zip(self.convs, blocks, strict=True)):
            h = conv(block, h)
            if layer < len(self.convs) - 1:
                h = F.relu(h)
        return h


def _time_batches(args: argparse.Namespace) -> dict:
    import dgl  # only in --dgl-python's environment

    arrays = np.load(args.graph)
    x, y = torch.from_numpy(arrays["x"]), torch.from_numpy(arrays["y"])
    src, dst = (torch.from_numpy(arrays[key]) for key in ("src", "dst"))
    torch.manual_seed(args.seed)
    start = time.perf_counter()
    # In-neighbour sampling reads the compressed sparse columns.
    graph = dgl.graph((src, dst), num_nodes=len(x)).formats("csc")
    # DGL lists fan-outs from the input layer up; PyG from the seeds down.
    sampler = dgl.dataloading.NeighborSampler(list(reversed(args.num_neighbors)))
    train = torch.from_numpy(arrays["train"])
    loader = dgl.dataloading.DataLoader(
        graph, train, sampler, batch_size=args.batch_size, shuffle=True
    )
    hidden = [args.hidden_channels] * (len(args.num_neighbors) - 1)
    channels = [x.size(1), *hidden, int(y.max()) + 1]
    model = _GraphSAGE(dgl.nn.SAGEConv, channels)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.003)
    # float32 master weights, products in bfloat16 under autocast.
    autocast = args.precision == "bf16"
    setup_s = time.perf_counter() - start
    batches = iter(loader)
    rows = []
    for step in range(args.warmup + args.batches):
        tick = time.perf_counter()
        input_nodes, seeds, blocks = next(batches)
        sampled = time.perf_counter()
        features, labels = x[input_nodes], y[seeds]
        gathered = time.perf_counter()
        optimizer.zero_grad()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            out = model(blocks, features)
        F.cross_entropy(out.float(), labels).backward()
        optimizer.step()
        done = time.perf_counter()
        if step >= args.warmup:
            edges = sum(block.num_edges() for block in blocks)
            rows.append((
                sampled - tick, gathered - sampled, done - gathered,
                len(input_nodes), edges, features.numel() * features.element_size(),
            ))  # fmt: skip
    medians = [statistics.median(column) for column in zip(*rows, strict=True)]
    return {
        "name": NAME if args.precision == "fp32" else f"{NAME}, autocast bf16",
        "sample_ms": 1000 * medians[0],
        "gather_ms": 1000 * medians[1],
        "train_ms": 1000 * medians[2],
        "nodes": medians[3],
        "edges": medians[4],
        "gathered_mb": medians[5] / 2**20,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "setup_s": setup_s,
        "versions": f"dgl {dgl.__version__}, torch {torch.__version__}",
    }


def _main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("graph")
    parser.add_argument("--threads", type=int, required=True)
    parser.add_argument("--num-neighbors", type=int, nargs="+", required=True)
    parser.add_argument("--precision", choices=["fp32", "bf16"], default="fp32")
    for name in ("batch-size", "hidden-channels", "batches", "warmup", "seed"):
        parser.add_argument(f"--{name}", type=int, required=True)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print(json.dumps(_time_batches(args)))


if __name__ == "__main__":
    _main()
