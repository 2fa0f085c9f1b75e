"""Runs PyG's own examples unchanged but for one added line, ``import pyg_orch``.

Where pip cannot install pyg-lib or torch-sparse, PyG's Cluster-GCN and
distributed examples stop at their first ``ClusterData`` or
``NeighborSampler``; ``import pyg_orch`` gives them their backend
(:mod:`pyg_orch.backend`). This script lays out a graph (a name or an
``.npz`` file, as ``pyg-orch train --dataset`` takes) where the example reads
its dataset, copies the example with ``import pyg_orch`` added after its
imports, and runs it:

* ``cluster_gcn``: PyG 2.8.0's ``examples/cluster_gcn_reddit.py`` on a
  Reddit-shaped layout (``reddit_data.npz``, ``reddit_graph.npz``);
* ``distributed``: PyG 2.6.0's ``examples/distributed/pyg/partition_graph.py``
  then ``node_ogb_cpu.py`` (two ranks on this machine) on an
  ogbn-products-shaped layout (OGB's CSV files; the features reduced to
  products' 100 by PCA, as the example's model reads 100).

The examples run from ``tests/pyg_examples``, where they are vendored
unchanged, or from a PyG checkout (``--pyg``). ``--orch`` runs the same script
with PyG's neighbour loaders replaced by pyg_orch's (``OrchNeighborLoader``,
``OrchDistNeighborLoader``), to compare.

Example:
    python examples/pyg_examples.py cluster_gcn \
        --dataset ../shared/datasets/amazon_photo.npz
"""

from __future__ import annotations

import argparse
import gzip
import os
import re
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import scipy.sparse as sp
import torch

from pyg_orch.datasets import load_dataset

# The example file, the dataset it reads, and the loaders --orch replaces.
CLUSTER_GCN = "examples/cluster_gcn_reddit.py"
PARTITION = "examples/distributed/pyg/partition_graph.py"
TRAIN = "examples/distributed/pyg/node_ogb_cpu.py"
ORCH_LOADERS = {
    "NeighborLoader": ("pyg_orch", "OrchNeighborLoader"),
    "DistNeighborLoader": ("pyg_orch.distributed", "OrchDistNeighborLoader"),
}
PRODUCTS_FEATURES = 100
# PyG's examples, vendored unchanged, by PyG version.
VENDORED = Path(__file__).parents[1] / "tests" / "pyg_examples"


def with_pyg_orch(source: str, orch: bool) -> str:
    """``source`` with ``import pyg_orch`` after its imports (and pyg_orch's loaders).

    Example:
        >>> print(with_pyg_orch("import torch\\n\\nx = 1\\n", orch=False))
        import torch
        import pyg_orch  # the one added line
        <BLANKLINE>
        x = 1
        <BLANKLINE>
    """
    lines = source.splitlines()
    last_import = max(
        i for i, line in enumerate(lines) if re.match(r"(from \S+ )?import ", line)
    )
    added = ["import pyg_orch  # the one added line"]
    if orch:
        for pyg_name, (module, orch_name) in ORCH_LOADERS.items():
            if re.search(rf"\b{pyg_name}\(", source):
                added.append(f"from {module} import {orch_name} as {pyg_name}")
    end = last_import + 1
    while lines[end - 1].rstrip().endswith(("(", ",")) or lines[end - 1].startswith(
        " "
    ):  # a parenthesised import runs on
        end += 1
    return "\n".join([*lines[:end], *added, *lines[end:]]) + "\n"


def lay_out_reddit(dataset: str, root: Path, seed: int) -> None:
    """Writes ``dataset``'s graph as PyG's ``Reddit`` reads it, under ``root/raw``."""
    data = load_dataset(dataset, seed=seed)
    raw = root / "raw"
    raw.mkdir(parents=True)
    node_types = 1 * data.train_mask + 2 * data.val_mask + 3 * data.test_mask
    np.savez(
        raw / "reddit_data.npz",
        feature=data.x.numpy(),
        label=data.y.numpy(),
        node_types=node_types.numpy(),
    )
    row, col = data.edge_index.numpy()
    adjacency = sp.coo_matrix(
        (np.ones(len(row), np.float32), (row, col)), shape=(data.num_nodes,) * 2
    )
    sp.save_npz(raw / "reddit_graph.npz", adjacency)


def lay_out_products(dataset: str, dataset_dir: Path, seed: int) -> None:
    """Writes ``dataset``'s graph as ogbn-products' OGB files in ``dataset_dir``."""
    data = load_dataset(dataset, seed=seed)
    folder = dataset_dir / "ogbn_products"
    (folder / "raw").mkdir(parents=True)
    split = folder / "split" / "sales_ranking"
    split.mkdir(parents=True)
    (folder / "RELEASE_v1.txt").write_text("laid out by pyg_orch's examples\n")
    torch.manual_seed(seed)
    centred = data.x - data.x.mean(0)
    _, _, basis = torch.pca_lowrank(centred, q=PRODUCTS_FEATURES, center=False)
    x = (centred @ basis).numpy()
    row, col = data.edge_index
    once = row < col  # OGB stores each undirected edge once and adds its reverse
    edges = torch.stack([row[once], col[once]], 1).numpy()
    _write(folder / "raw" / "edge.csv.gz", edges)
    _write(folder / "raw" / "node-feat.csv.gz", x)
    _write(folder / "raw" / "node-label.csv.gz", data.y.numpy()[:, None])
    _write(folder / "raw" / "num-node-list.csv.gz", np.array([[data.num_nodes]]))
    _write(folder / "raw" / "num-edge-list.csv.gz", np.array([[len(edges)]]))
    for name, mask in (("train", data.train_mask), ("valid", data.val_mask),
                       ("test", data.test_mask)):  # fmt: skip
        _write(split / f"{name}.csv.gz", mask.nonzero().numpy())


def _write(path: Path, values: np.ndarray) -> None:
    # OGB's CSV: no header, no index, gzipped.
    fmt = "%d" if values.dtype.kind in "iu" else "%.6g"
    with gzip.open(path, "wt") as file:
        np.savetxt(file, values, fmt=fmt, delimiter=",")


def _copy(pyg: Path, example: str, folder: Path, orch: bool) -> Path:
    target = folder / Path(example).name
    target.write_text(with_pyg_orch((pyg / example).read_text(), orch))
    return target


def _free_ports(count: int) -> list[int]:
    sockets = [socket.socket() for _ in range(count)]
    for s in sockets:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


def run_cluster_gcn(args: argparse.Namespace, work: Path) -> None:
    """PyG's Cluster-GCN example on the Reddit-shaped layout."""
    lay_out_reddit(args.dataset, work / "data" / "Reddit", args.seed)
    examples = work / "examples"
    examples.mkdir()
    script = _copy(args.pyg, CLUSTER_GCN, examples, args.orch)
    # The example reads '../data/Reddit', relative to where it runs.
    subprocess.run([sys.executable, script.name], cwd=examples, check=True)


def run_distributed(args: argparse.Namespace, work: Path) -> None:
    """PyG's partitioning and distributed training examples, two ranks here."""
    lay_out_products(args.dataset, work / "dataset" / "ogbn-products", args.seed)
    # ogb 1.3.6 reads the file it processed with torch.load's default, which
    # torch 2.6 made weights_only (it refuses PyG's Data): the file is this
    # run's own, so the examples run with torch's old default.
    env = {**os.environ, "TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD": "1"}
    partition = _copy(args.pyg, PARTITION, work, args.orch)
    train = _copy(args.pyg, TRAIN, work, args.orch)
    subprocess.run(
        [sys.executable, partition.name, "--dataset", "ogbn-products",
         "--root_dir", str(work), "--num_partitions", "2"],
        cwd=work, check=True, env=env,
    )  # fmt: skip
    ddp, train_port, test_port = _free_ports(3)
    ranks = [
        subprocess.Popen(
            [
                sys.executable,
                train.name,
                "--dataset",
                "ogbn-products",
                "--dataset_root_dir",
                str(work / "partitions/ogbn-products/2-parts"),
                "--num_nodes",
                "2",
                "--node_rank",
                str(rank),
                "--num_epochs",
                str(args.epochs),
                "--batch_size",
                str(args.batch_size),
                "--num_workers",
                "0",
                "--ddp_port",
                str(ddp),
                "--train_loader_port",
                str(train_port),
                "--test_loader_port",
                str(test_port),
            ],
            cwd=work,
            env=env,
        )  # fmt: skip
        for rank in range(2)
    ]
    codes = [rank.wait(timeout=args.timeout) for rank in ranks]
    if any(codes):
        raise SystemExit(f"node_ogb_cpu.py ranks exited with {codes}")


def main(argv: list[str] | None = None) -> None:
    """Parses the command line and runs one of PyG's examples."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("example", choices=["cluster_gcn", "distributed"])
    parser.add_argument(
        "--pyg", type=Path, default=None,
        help="a PyG checkout holding examples/ (2.8.0 for cluster_gcn, 2.6.0 "
        "for distributed: `git archive 2.6.0 examples`) (default: the copies "
        "in tests/pyg_examples)",
    )  # fmt: skip
    parser.add_argument(
        "--dataset", default="cora",
        help="the graph: a name or an .npz path, as pyg-orch train --dataset "
        "takes (default: %(default)s)",
    )  # fmt: skip
    parser.add_argument(
        "--seed", type=int, default=0,
        help="the split's seed for .npz graphs (default: %(default)s)",
    )  # fmt: skip
    parser.add_argument(
        "--epochs", type=int, default=20,
        help="distributed: node_ogb_cpu.py's (default: %(default)s)",
    )  # fmt: skip
    parser.add_argument(
        "--batch-size", type=int, default=1024,
        help="distributed: node_ogb_cpu.py's (it drops a rank's last partial "
        "batch: a rank needs at least this many training nodes) (default: "
        "%(default)s)",
    )  # fmt: skip
    parser.add_argument(
        "--timeout", type=float, default=3600,
        help="distributed: seconds the ranks may take (default: %(default)s)",
    )  # fmt: skip
    parser.add_argument(
        "--orch", action="store_true",
        help="with pyg_orch's neighbour loaders (default: PyG's)",
    )  # fmt: skip
    args = parser.parse_args(argv)
    if args.pyg is None:
        version = "2.8.0" if args.example == "cluster_gcn" else "2.6.0"
        args.pyg = VENDORED / version
    with tempfile.TemporaryDirectory() as folder:
        if args.example == "cluster_gcn":
            run_cluster_gcn(args, Path(folder))
        else:
            run_distributed(args, Path(folder))


if __name__ == "__main__":
    main()
