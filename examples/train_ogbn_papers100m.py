"""Train GraphSAGE on ogbn-papers100M with node features memory-mapped from disk.

Usage:
    python examples/train_ogbn_papers100m.py --root ~/data/ogb --hot-ratio 0.2

ogbn-papers100M has 111M nodes with 128 features each: 57 GB as float32, more
than most machines hold. This script reads OGB's raw files directly instead of
going through PygNodePropPredDataset, which would load (and save again) the
whole graph:

    ROOT/ogbn_papers100M/raw/data.npz        edge_index, num_nodes_list, node_feat, ...
    ROOT/ogbn_papers100M/raw/node-label.npz  node_label (NaN for unlabelled nodes)
    ROOT/ogbn_papers100M/split/time/{train,valid,test}.csv.gz

(the layout of OGB's papers100M-bin.zip, unzipped into ROOT and renamed as OGB
itself does). The first run streams node_feat out of data.npz into
raw/node_feat.npy, a chunk at a time; every run then maps that file, so feature
rows are read from disk (or the page cache) only when a batch gathers them. The
edges and the labels of the split nodes are loaded into memory.

Evaluation samples --num-neighbors around the train, valid and test nodes
(exact full-neighbourhood inference would hold one [111M, hidden] tensor per
layer; pass --full-eval on a machine with that much memory) and is scored by
OGB's Evaluator.
"""

from __future__ import annotations

import os
import warnings
import zipfile
from collections.abc import Sequence
from pathlib import Path
from typing import IO

import numpy as np
import pandas as pd
import torch
from _common import (
    SPLITS,
    Task,
    add_root_option,
    build_parser,
    ogb_scorer,
    parse_args,
    run,
)
from torch import Tensor
from torch_geometric.data import Data
from tqdm import tqdm

NAME = "ogbn-papers100M"
FOLDER = "ogbn_papers100M"  # OGB's folder name: the dashes become underscores
#: Bytes of node_feat read from the archive at a time.
CHUNK_BYTES = 1 << 26


def _ogb_meta() -> pd.Series:
    """OGB's facts about ogbn-papers100M (url, number of classes, ...)."""
    import ogb.nodeproppred

    master = Path(ogb.nodeproppred.__file__).with_name("master.csv")
    return pd.read_csv(master, index_col=0, keep_default_na=False)[NAME]


def _read_npy_header(member: IO[bytes]) -> tuple[tuple[int, ...], np.dtype]:
    """Reads the header of a ``.npy`` stream and leaves it at the first element.

    Args:
        member: the open ``.npy`` member of an ``.npz`` archive.

    Returns:
        The array's shape and dtype.

    Raises:
        ValueError: for a format version or a memory order this does not read.
    """
    version = np.lib.format.read_magic(member)
    readers = {
        (1, 0): np.lib.format.read_array_header_1_0,
        (2, 0): np.lib.format.read_array_header_2_0,
    }
    if version not in readers:
        raise ValueError(f".npy format version {version} is not supported")
    shape, fortran_order, dtype = readers[version](member)
    if fortran_order and len(shape) > 1:
        raise ValueError("Fortran-ordered arrays are not supported")
    return shape, dtype


def _read_into(member: IO[bytes], buffer: np.ndarray) -> None:
    """Fills ``buffer`` from ``member``; raises :class:`EOFError` if it ends first."""
    view, filled = memoryview(buffer).cast("B"), 0
    while filled < len(view):
        count = member.readinto(view[filled:])
        if not count:
            raise EOFError(f"the archive member ended after {filled} bytes")
        filled += count


def extract_npz_member(
    npz_path: Path, key: str, npy_path: Path, chunk_bytes: int = CHUNK_BYTES
) -> None:
    """Streams array ``key`` of an ``.npz`` archive into a float32 ``.npy`` file.

    The member is decompressed (when it is) and copied ``chunk_bytes`` at a
    time into a file opened with :func:`numpy.lib.format.open_memmap`, so the
    whole array is never in memory. The file is written under a temporary name
    and renamed when complete: an interrupted run leaves no partial
    ``npy_path`` behind.

    Args:
        npz_path: the archive.
        key: the array's name in it, e.g. ``"node_feat"``.
        npy_path: the ``.npy`` file to write.
        chunk_bytes: bytes read at a time.

    Raises:
        KeyError: the archive holds no array ``key``.
        ValueError: the member is not a C-ordered ``.npy`` array.
    """
    partial = npy_path.with_name(npy_path.name + ".partial")
    with zipfile.ZipFile(npz_path) as archive, archive.open(f"{key}.npy") as member:
        shape, dtype = _read_npy_header(member)
        out = np.lib.format.open_memmap(
            partial, mode="w+", dtype=np.float32, shape=shape
        )
        flat = out.reshape(-1)
        step = max(chunk_bytes // dtype.itemsize, 1)
        buffer = np.empty(min(step, flat.size), dtype)
        for start in tqdm(
            range(0, flat.size, step), desc=f"extract {key}", unit="chunk"
        ):
            chunk = buffer[: min(step, flat.size - start)]
            _read_into(member, chunk)
            flat[start : start + chunk.size] = chunk  # casts to float32
        out.flush()
        del flat, out
    os.replace(partial, npy_path)


def mapped_features(raw: Path, num_nodes: int) -> Tensor:
    """``node_feat`` as a tensor over a read-only memory map of ``node_feat.npy``.

    Extracts the file from ``data.npz`` first if it is not there yet.

    Args:
        raw: the ``raw`` folder holding ``data.npz``.
        num_nodes: the expected number of rows.

    Returns:
        The ``[num_nodes, F]`` float32 features; rows are read from disk on use.

    Raises:
        ValueError: ``node_feat.npy`` does not have ``num_nodes`` rows.
    """
    npy_path = raw / "node_feat.npy"
    if not npy_path.exists():
        extract_npz_member(raw / "data.npz", "node_feat", npy_path)
    features = np.load(npy_path, mmap_mode="r")
    if features.ndim != 2 or features.shape[0] != num_nodes:
        raise ValueError(
            f"{npy_path} has shape {features.shape}, not ({num_nodes}, F): "
            "delete it to extract it again"
        )
    with warnings.catch_warnings():
        # PyTorch has no read-only tensors and warns about the read-only map.
        # Nothing writes to x; a writable copy-on-write map would avoid the
        # warning but count the whole 57 GB against the memory commit limit.
        warnings.filterwarnings("ignore", "The given NumPy array is not writable")
        return torch.from_numpy(features)


def read_split(folder: Path) -> dict[str, Tensor]:
    """OGB's time split, as ``get_idx_split`` reads it.

    Args:
        folder: the dataset folder (``ROOT/ogbn_papers100M``).

    Returns:
        Node ids of ``"train"``, ``"valid"`` and ``"test"``.
    """
    path = folder / "split" / _ogb_meta()["split"]
    return {
        name: torch.tensor(
            pd.read_csv(path / f"{name}.csv.gz", header=None)[0].to_numpy(),
            dtype=torch.long,
        )
        for name in SPLITS
    }


def split_labels(raw: Path, split: dict[str, Tensor], num_nodes: int) -> Tensor:
    """Integer labels of the split nodes; -1 for every other node.

    Args:
        raw: the ``raw`` folder holding ``node-label.npz``.
        split: node ids per split.
        num_nodes: the number of nodes.

    Returns:
        ``[num_nodes]`` int64 labels.

    Raises:
        ValueError: a split node has no label (NaN).
    """
    with np.load(raw / "node-label.npz") as npz:
        labels = npz["node_label"].reshape(-1)
    nodes = torch.cat(list(split.values()))
    picked = labels[nodes.numpy()]
    if np.isnan(picked).any():
        raise ValueError("some train/valid/test nodes have no label")
    y = torch.full((num_nodes,), -1, dtype=torch.long)
    y[nodes] = torch.from_numpy(picked.astype(np.int64))
    return y


def load_task(root: str, full_eval: bool = False) -> Task:
    """Reads ogbn-papers100M from OGB's raw files, features memory-mapped.

    Args:
        root: the folder that holds ``ogbn_papers100M``.
        full_eval: evaluate with full-neighbourhood inference.

    Returns:
        The graph with OGB's time split and Evaluator.

    Raises:
        FileNotFoundError: the raw files are missing (the message says where
            to get them).
    """
    folder = Path(root).expanduser() / FOLDER
    raw = folder / "raw"
    if not (raw / "data.npz").exists():
        raise FileNotFoundError(
            f"{raw / 'data.npz'} not found: download {_ogb_meta()['url']} "
            f"(about 57 GB), unzip it into {folder.parent} and rename the "
            f"papers100M-bin folder to {FOLDER}"
        )
    with np.load(raw / "data.npz") as npz:  # reads only the members named
        num_nodes = int(npz["num_nodes_list"].sum())
        edge_index = torch.from_numpy(npz["edge_index"]).long()
    split = read_split(folder)
    data = Data(
        x=mapped_features(raw, num_nodes),
        edge_index=edge_index,
        y=split_labels(raw, split, num_nodes),
        num_nodes=num_nodes,
    )
    num_classes = int(_ogb_meta()["num classes"])
    return Task(NAME, data, split, num_classes, ogb_scorer(NAME), full_eval)


def main(argv: Sequence[str] | None = None) -> None:
    """Reads ogbn-papers100M, trains and prints the summary; ``argv``: the options."""
    parser = build_parser(__doc__, epochs=10)
    add_root_option(parser, FOLDER)
    parser.add_argument(
        "--full-eval",
        action="store_true",
        help="evaluate with exact full-neighbourhood inference, which needs "
        "memory for two [num_nodes, hidden] tensors (default: off, sampled)",
    )
    args = parse_args(parser, argv)
    try:
        task = load_task(args.root, args.full_eval)
    except FileNotFoundError as error:
        raise SystemExit(f"error: {error}") from None
    run(task, args)


if __name__ == "__main__":
    main()
