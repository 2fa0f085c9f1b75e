"""Tiny OGB node-property datasets in OGB's own on-disk format (test helper).

OGB skips its download when the dataset folder has the ``RELEASE_v1.txt``
marker (without it, it asks whether to update, on stdin) and ``raw/`` holds the
dataset's ``raw_file_names``. Processing then reads the node and edge counts,
the features, the labels and the dataset's additional node files, and
``get_idx_split`` reads ``split/<split>/{train,valid,test}.csv.gz``; the names
come from ``ogb/nodeproppred/master.csv``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

OGB_NODES = 30


def write_csv_gz(path: Path, values) -> None:
    """Writes ``values`` as OGB does: gzipped CSV without header or index."""
    pd.DataFrame(np.asarray(values)).to_csv(
        path, header=False, index=False, compression="gzip"
    )


def _dataset_folder(root: Path, name: str, split: str) -> Path:
    folder = root / name.replace("-", "_")
    (folder / "raw").mkdir(parents=True)
    (folder / "split" / split).mkdir(parents=True)
    (folder / "RELEASE_v1.txt").write_text("tiny local copy\n")
    return folder


def _write_split(folder: Path, split: str, perm: np.ndarray, cuts: list[int]) -> None:
    parts = np.split(perm, cuts)
    for name, part in zip(("train", "valid", "test"), parts, strict=True):
        write_csv_gz(folder / "split" / split / f"{name}.csv.gz", part)


def _write_csv_dataset(folder: Path, tiny: dict[str, np.ndarray]) -> None:
    raw = folder / "raw"
    num_nodes = len(tiny["x"])
    write_csv_gz(raw / "edge.csv.gz", tiny["edges"])
    write_csv_gz(raw / "node-feat.csv.gz", tiny["x"])
    write_csv_gz(raw / "num-node-list.csv.gz", [num_nodes])
    write_csv_gz(raw / "num-edge-list.csv.gz", [len(tiny["edges"])])
    write_csv_gz(raw / "node-label.csv.gz", tiny["y"][:, None])


def tiny_arxiv(root: Path) -> dict[str, np.ndarray]:
    """Lays out a 30-node ogbn-arxiv (CSV files, split ``time``, 18/6/6).

    Args:
        root: the dataset root (``ogbn_arxiv`` is created in it).

    Returns:
        ``edges`` ``[E, 2]``, ``x``, ``y`` and ``perm`` (the split order).
    """
    rng = np.random.default_rng(0)
    folder = _dataset_folder(root, "ogbn-arxiv", "time")
    nodes = np.arange(OGB_NODES)
    tiny = {
        "edges": np.stack([nodes, (nodes * 7 + 3) % 30], 1),
        "x": rng.standard_normal((OGB_NODES, 4)).astype(np.float32),
        "y": rng.integers(0, 40, OGB_NODES),
        "perm": rng.permutation(OGB_NODES),
    }
    _write_csv_dataset(folder, tiny)
    write_csv_gz(folder / "raw" / "node_year.csv.gz", np.full(OGB_NODES, 2020))
    _write_split(folder, "time", tiny["perm"], [18, 24])
    return tiny


def tiny_products(root: Path, num_nodes: int = 48) -> dict[str, np.ndarray]:
    """Lays out an ogbn-products (CSV files, split ``sales_ranking``, 60/20/20).

    Each undirected edge is stored once, as OGB does; processing adds the
    reverse direction (``add_inverse_edge``).

    Args:
        root: the dataset root (``ogbn_products`` is created in it).
        num_nodes: nodes of the graph.

    Returns:
        ``edges`` ``[E, 2]``, ``x``, ``y`` (47 classes) and ``perm``.
    """
    rng = np.random.default_rng(1)
    folder = _dataset_folder(root, "ogbn-products", "sales_ranking")
    nodes = np.arange(num_nodes)
    tiny = {
        "edges": np.concatenate(
            [
                np.stack([nodes, (nodes + 1) % num_nodes], 1),
                np.stack([nodes, (nodes * 5 + 2) % num_nodes], 1),
            ]
        ),
        "x": rng.standard_normal((num_nodes, 8)).astype(np.float32),
        "y": rng.integers(0, 47, num_nodes),
        "perm": rng.permutation(num_nodes),
    }
    _write_csv_dataset(folder, tiny)
    _write_split(folder, "sales_ranking", tiny["perm"], _cuts(num_nodes))
    return tiny


def tiny_papers100m(
    root: Path, num_nodes: int = 60, compressed: bool = True
) -> dict[str, np.ndarray]:
    """Lays out an ogbn-papers100M (binary ``.npz`` files, split ``time``).

    ``raw/data.npz`` holds ``edge_index`` ``[2, E]``, ``num_nodes_list``,
    ``num_edges_list``, ``node_feat`` and ``node_year``; ``raw/node-label.npz``
    holds ``node_label`` ``[N, 1]`` float with NaN for the nodes outside the
    split (a fifth of them).

    Args:
        root: the dataset root (``ogbn_papers100M`` is created in it).
        num_nodes: nodes of the graph.
        compressed: write the archives deflated (``np.savez_compressed``);
            otherwise stored (``np.savez``).

    Returns:
        ``edge_index``, ``x``, ``y`` (float, NaN outside the split) and ``perm``
        (its first 80 % are the split nodes, 60/20/20).
    """
    rng = np.random.default_rng(2)
    folder = _dataset_folder(root, "ogbn-papers100M", "time")
    nodes = np.arange(num_nodes)
    src = np.concatenate([nodes, nodes])
    dst = np.concatenate([(nodes * 3 + 1) % num_nodes, (nodes * 11 + 5) % num_nodes])
    tiny = {
        "edge_index": np.stack([src, dst]).astype(np.int64),
        "x": rng.standard_normal((num_nodes, 128)).astype(np.float32),
        "y": rng.integers(0, 172, num_nodes).astype(np.float32),
        "perm": rng.permutation(num_nodes),
    }
    labelled = tiny["perm"][: num_nodes * 4 // 5]
    tiny["y"][np.setdiff1d(nodes, labelled)] = np.nan
    save = np.savez_compressed if compressed else np.savez
    save(
        folder / "raw" / "data.npz",
        edge_index=tiny["edge_index"],
        num_nodes_list=np.array([num_nodes], np.int64),
        num_edges_list=np.array([src.size], np.int64),
        node_feat=tiny["x"],
        node_year=np.full((num_nodes, 1), 2020, np.int64),
    )
    save(folder / "raw" / "node-label.npz", node_label=tiny["y"][:, None])
    _write_split(folder, "time", labelled, _cuts(labelled.size))
    return tiny


def _cuts(num_nodes: int) -> list[int]:
    return [num_nodes * 3 // 5, num_nodes * 4 // 5]
