"""Tiny OGB node-property datasets in OGB's own on-disk format (test helper).

OGB skips its download when the dataset folder has the ``RELEASE_v<version>.txt``
marker (without it, it asks whether to update, on stdin) and ``raw/`` holds the
dataset's ``raw_file_names``. Processing then reads the node and edge counts,
the features, the labels and the dataset's additional node files, and
``get_idx_split`` reads ``split/<split>/{train,valid,test}.csv.gz`` (one
folder per labelled node type on a heterogeneous graph); the names and the
version come from ``ogb/nodeproppred/master.csv``.
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


def _dataset_folder(root: Path, name: str, split: str, version: int = 1) -> Path:
    # ``version``: master.csv's "version" of the dataset, which names the marker.
    folder = root / name.replace("-", "_")
    (folder / "raw").mkdir(parents=True)
    (folder / "split" / split).mkdir(parents=True)
    (folder / f"RELEASE_v{version}.txt").write_text("tiny local copy\n")
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


#: ogbn-mag's node types and relations, as its ``raw/`` folder names them.
MAG_NODE_TYPES = ("author", "field_of_study", "institution", "paper")
MAG_RELATIONS = (
    ("author", "affiliated_with", "institution"),
    ("author", "writes", "paper"),
    ("paper", "cites", "paper"),
    ("paper", "has_topic", "field_of_study"),
)


def _write_header_row(path: Path, row: dict[str, object]) -> None:
    # OGB's per-node-type tables: a header of node types and one row (one graph).
    pd.DataFrame([row]).to_csv(path, index=False, compression="gzip")


def tiny_mag(
    root: Path, num_papers: int = 40, num_features: int = 8
) -> dict[str, object]:
    """Lays out an ogbn-mag (heterogeneous CSV files, split ``time``, 60/20/20).

    The layout of OGB's ``mag.zip`` (release 2): ``raw/num-node-dict.csv.gz``
    and ``raw/nodetype-has-label.csv.gz`` (a header of node types, one row),
    ``raw/triplet-type-list.csv.gz``, per relation
    ``raw/relations/<head>___<relation>___<tail>/`` with ``edge.csv.gz``
    (``[E, 2]``), ``num-edge-list.csv.gz`` and ``edge_reltype.csv.gz``,
    ``raw/node-feat/paper/{node-feat,node_year}.csv.gz``,
    ``raw/node-label/paper/node-label.csv.gz``, and
    ``split/time/nodetype-has-split.csv.gz`` with
    ``split/time/paper/{train,valid,test}.csv.gz``. Only papers have features,
    years and labels (349 classes); train papers are from before 2018, valid
    ones from 2018 and test ones from 2019, as in OGB's time split.

    Args:
        root: the dataset root (``ogbn_mag`` is created in it).
        num_papers: paper nodes; there are 3/4 as many authors, 1/4 as many
            fields of study and 1/10 as many institutions (at least 2).
        num_features: feature columns of a paper (OGB's has 128).

    Returns:
        ``num_nodes`` (per node type), ``edges`` (per relation triple,
        ``[E, 2]``), ``x`` (paper features), ``y`` (paper labels), ``year``
        and ``perm`` (the split order of the papers).
    """
    rng = np.random.default_rng(3)
    folder = _dataset_folder(root, "ogbn-mag", "time", version=2)
    raw = folder / "raw"
    num_nodes = {
        "author": max(num_papers * 3 // 4, 2),
        "field_of_study": max(num_papers // 4, 2),
        "institution": max(num_papers // 10, 2),
        "paper": num_papers,
    }
    papers = np.arange(num_papers)
    authors = np.arange(num_nodes["author"])
    edges = {
        # Every paper has a first author, every other one a second; every
        # author has an institution: no node type is left without edges.
        ("author", "affiliated_with", "institution"): np.stack(
            [authors, authors % num_nodes["institution"]], 1
        ),
        ("author", "writes", "paper"): np.concatenate(
            [
                np.stack([papers % num_nodes["author"], papers], 1),
                np.stack([(papers * 5 + 1) % num_nodes["author"], papers], 1)[::2],
            ]
        ),
        ("paper", "cites", "paper"): np.stack(
            [papers, (papers * 7 + 3) % num_papers], 1
        ),
        ("paper", "has_topic", "field_of_study"): np.stack(
            [papers, papers % num_nodes["field_of_study"]], 1
        ),
    }
    perm = rng.permutation(num_papers)
    cuts = _cuts(num_papers)
    year = np.empty(num_papers, np.int64)
    years = ([2015, 2016, 2017], [2018], [2019])
    for part, choices in zip(np.split(perm, cuts), years, strict=True):
        year[part] = rng.choice(choices, part.size)
    tiny: dict[str, object] = {
        "num_nodes": num_nodes,
        "edges": edges,
        "x": rng.standard_normal((num_papers, num_features)).astype(np.float32),
        "y": rng.integers(0, 349, num_papers),
        "year": year,
        "perm": perm,
    }
    _write_header_row(raw / "num-node-dict.csv.gz", num_nodes)
    has_label = {name: name == "paper" for name in MAG_NODE_TYPES}
    _write_header_row(raw / "nodetype-has-label.csv.gz", has_label)
    write_csv_gz(raw / "triplet-type-list.csv.gz", MAG_RELATIONS)
    for reltype, triplet in enumerate(MAG_RELATIONS):
        relation = raw / "relations" / "___".join(triplet)
        relation.mkdir(parents=True)
        write_csv_gz(relation / "edge.csv.gz", edges[triplet])
        write_csv_gz(relation / "num-edge-list.csv.gz", [len(edges[triplet])])
        write_csv_gz(
            relation / "edge_reltype.csv.gz", np.full(len(edges[triplet]), reltype)
        )
    (raw / "node-feat" / "paper").mkdir(parents=True)
    write_csv_gz(raw / "node-feat" / "paper" / "node-feat.csv.gz", tiny["x"])
    write_csv_gz(raw / "node-feat" / "paper" / "node_year.csv.gz", year[:, None])
    (raw / "node-label" / "paper").mkdir(parents=True)
    write_csv_gz(raw / "node-label" / "paper" / "node-label.csv.gz", tiny["y"][:, None])
    _write_header_row(
        folder / "split" / "time" / "nodetype-has-split.csv.gz", has_label
    )
    (folder / "split" / "time" / "paper").mkdir()
    _write_split(folder, "time/paper", perm, cuts)
    return tiny


def _cuts(num_nodes: int) -> list[int]:
    return [num_nodes * 3 // 5, num_nodes * 4 // 5]
