"""Readers of real datasets: the packaged Cora, Planetoid, npz files and OGB.

Every loader returns a :class:`torch_geometric.data.Data` with ``x`` (float32),
``y`` (int64, 1-D), ``edge_index`` (int64, ``[2, E]``) and boolean
``train_mask``/``val_mask``/``test_mask``. Cora ships inside the package, so the
default dataset never needs the network; a failed download of another dataset
says which files to put where. Also here: :func:`default_root`, where datasets
are stored by default.
"""

from __future__ import annotations

import contextlib
import functools
import http.client
import os
import tempfile
from collections.abc import Sequence
from importlib.resources import files
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor
from torch_geometric.data import Data

from pyg_orch.dataset_names import PLANETOID_NAMES
from pyg_orch.datasets.splits import random_split_masks

PathLike = str | os.PathLike[str]

_NPZ_LAYOUT = (
    "expected an .npz with 'edge_index' int64 [2, E], 'y' int64 [N] and either "
    "dense 'x' float32 [N, F] or CSR parts 'x_data', 'x_indices', 'x_indptr', "
    "'x_shape'"
)
_CSR_KEYS = ("x_data", "x_indices", "x_indptr", "x_shape")


def default_root() -> Path:
    """Returns the directory where datasets are stored by default.

    ``$PYG_ORCH_HOME`` when set, otherwise ``~/.cache/pyg_orch``.

    Returns:
        The dataset root directory (not created).

    Example:
        >>> root = default_root()  # e.g. PosixPath('/home/me/.cache/pyg_orch')
        >>> data = load_cora(root)  # same as load_cora()
    """
    env = os.environ.get("PYG_ORCH_HOME")
    if env:
        return Path(env).expanduser()
    return Path.home() / ".cache" / "pyg_orch"


def _resolve_root(root: PathLike | None) -> Path:
    return default_root() if root is None else Path(root).expanduser()


# --------------------------------------------------------------------------
# Planetoid / Cora
# --------------------------------------------------------------------------


def _copy_packaged_cora(raw_dir: Path) -> None:
    # Planetoid writes `processed/` next to `raw/`, and the installed package
    # may be read-only, so the shipped raw files are copied to a writable root.
    packaged = files("pyg_orch") / "data" / "Cora" / "raw"
    raw_dir.mkdir(parents=True, exist_ok=True)
    for item in packaged.iterdir():
        target = raw_dir / item.name
        if not item.name.startswith("ind.cora.") or target.exists():
            continue
        # Write-then-rename so a concurrent loader never sees a partial file.
        fd, tmp = tempfile.mkstemp(dir=raw_dir, prefix=f".{item.name}.")
        with os.fdopen(fd, "wb") as handle:
            handle.write(item.read_bytes())
        os.replace(tmp, target)


def _download_errors() -> tuple[type[BaseException], ...]:
    """The exceptions that mean a download failed rather than a bug.

    Offline, PyG's fsspec/aiohttp download raises ``ClientConnectorDNSError``
    and OGB's urllib one ``URLError``, both ``OSError`` subclasses like
    ``socket.gaierror``, ``TimeoutError`` and fsspec's ``FileNotFoundError``
    for an HTTP 404. Other HTTP statuses and cut-off bodies raise
    ``aiohttp.ClientError`` or ``http.client.HTTPException``, which are not.
    """
    errors: list[type[BaseException]] = [OSError, http.client.HTTPException]
    try:
        from aiohttp import ClientError
    except ImportError:  # aiohttp only comes with fsspec's HTTP support
        pass
    else:
        errors.append(ClientError)
    return tuple(errors)


def _reason(error: BaseException) -> str:
    return f"{type(error).__name__}: {error}"


def _planetoid_help(
    name: str, raw_dir: Path, files: Sequence[str], url: str, reason: str
) -> str:
    missing = [file for file in files if not (raw_dir / file).exists()]
    return (
        f"could not download the raw files of {name} ({reason}); put "
        f"{', '.join(missing)} into {raw_dir} (each file is at {url}/<file name>, "
        f"e.g. {url}/{missing[0]})"
    )


@functools.cache
def _planetoid_class() -> type:
    # Built on first use: importing torch_geometric.datasets is slow.
    from torch_geometric.datasets import Planetoid
    from torch_geometric.io import fs

    class _Planetoid(Planetoid):
        """PyG's Planetoid whose failed download says what to fetch by hand.

        It fetches only the missing raw files (of the public split), each one
        whole or not at all.
        """

        def download(self) -> None:
            raw_dir = Path(self.raw_dir)
            for name in self.raw_file_names:
                target = raw_dir / name
                if target.exists():
                    continue  # e.g. put there by hand after an offline attempt
                # A file cut off mid-download must not pass for a whole one.
                partial = raw_dir / f".{name}.part"
                try:
                    fs.cp(f"{self.url}/{name}", str(partial))
                except _download_errors() as error:
                    partial.unlink(missing_ok=True)
                    message = _planetoid_help(
                        self.name, raw_dir, self.raw_file_names, self.url,
                        _reason(error),
                    )  # fmt: skip
                    raise FileNotFoundError(message) from error
                partial.replace(target)

    return _Planetoid


def _planetoid(root: Path, name: str) -> Data:
    data = _planetoid_class()(str(root), name)[0]
    return Data(
        x=data.x,
        y=data.y,
        edge_index=data.edge_index,
        train_mask=data.train_mask,
        val_mask=data.val_mask,
        test_mask=data.test_mask,
    )


def load_cora(root: PathLike | None = None) -> Data:
    """Loads Cora from the raw files embedded in the package (no download).

    Args:
        root: Directory holding ``Cora/raw`` and ``Cora/processed``; defaults to
            :func:`default_root`.

    Returns:
        Cora with 2708 nodes, 10556 directed edges, 1433 features, 7 classes
        and the public 140/500/1000 split masks.

    Example:
        >>> data = load_cora("/tmp/pyg_orch")
        >>> int(data.train_mask.sum()), data.num_nodes
        (140, 2708)
    """
    root = _resolve_root(root)
    _copy_packaged_cora(root / "Cora" / "raw")
    return _planetoid(root, "Cora")


def load_planetoid(name: str, root: PathLike | None = None) -> Data:
    """Loads a Planetoid citation graph (Cora, CiteSeer or PubMed).

    Cora comes from the embedded files; CiteSeer and PubMed are read from
    ``<root>/<Name>/raw`` and downloaded there by PyG when missing.

    Args:
        name: ``"Cora"``, ``"CiteSeer"`` or ``"PubMed"`` (case-insensitive).
        root: Dataset root; defaults to :func:`default_root`.

    Returns:
        The graph with its public split masks.

    Raises:
        ValueError: For any other name.
        FileNotFoundError: If raw files are missing and cannot be downloaded
            (e.g. offline); the message names the files, the folder to put
            them in and their URL.

    Example:
        >>> data = load_planetoid("citeseer", "/tmp/pyg_orch")  # doctest: +SKIP
        >>> data.num_nodes  # doctest: +SKIP
        3327
    """
    canonical = PLANETOID_NAMES.get(name.lower())
    if canonical is None:
        raise ValueError(
            f"unknown Planetoid dataset {name!r}; expected one of "
            f"{sorted(PLANETOID_NAMES.values())}"
        )
    if canonical == "Cora":
        return load_cora(root)
    return _planetoid(_resolve_root(root), canonical)


# --------------------------------------------------------------------------
# npz files
# --------------------------------------------------------------------------


def _require(arrays: dict[str, np.ndarray], key: str, path: PathLike) -> np.ndarray:
    if key not in arrays:
        raise ValueError(f"{path}: missing key {key!r}; {_NPZ_LAYOUT}")
    return arrays[key]


def _csr_to_dense(arrays: dict[str, np.ndarray], path: PathLike) -> np.ndarray:
    missing = [key for key in _CSR_KEYS if key not in arrays]
    if missing:
        raise ValueError(f"{path}: missing key {missing[0]!r}; {_NPZ_LAYOUT}")
    shape = tuple(int(s) for s in arrays["x_shape"])
    indptr = arrays["x_indptr"].astype(np.int64)
    indices, values = arrays["x_indices"], arrays["x_data"]
    consistent = (
        len(shape) == 2
        and indptr.shape == (shape[0] + 1,)
        and indices.shape == values.shape == (indptr[-1],)
        and (indices.size == 0 or 0 <= indices.min() <= indices.max() < shape[1])
    )
    if not consistent:
        raise ValueError(f"{path}: inconsistent CSR feature parts; {_NPZ_LAYOUT}")
    rows = np.repeat(np.arange(shape[0]), np.diff(indptr))
    x = np.zeros(shape, dtype=np.float32)
    # add.at sums repeated (row, col) entries, matching scipy's CSR semantics.
    np.add.at(x, (rows, indices), values.astype(np.float32))
    return x


def _check_npz(x: np.ndarray, y: np.ndarray, edges: np.ndarray, path: PathLike) -> None:
    num_nodes = y.shape[0] if y.ndim == 1 else -1
    if num_nodes < 0 or x.ndim != 2 or x.shape[0] != num_nodes:
        raise ValueError(
            f"{path}: 'x' has shape {x.shape} and 'y' {y.shape}; {_NPZ_LAYOUT}"
        )
    if edges.ndim != 2 or edges.shape[0] != 2:
        raise ValueError(f"{path}: 'edge_index' has shape {edges.shape}; {_NPZ_LAYOUT}")
    if edges.size and (edges.min() < 0 or edges.max() >= num_nodes):
        raise ValueError(
            f"{path}: 'edge_index' refers to nodes outside [0, {num_nodes})"
        )


def load_npz(
    path: PathLike, split: Sequence[float] = (0.6, 0.2, 0.2), seed: int = 0
) -> Data:
    """Loads a node-classification graph from an ``.npz`` file.

    The file holds ``edge_index`` int64 ``[2, E]``, ``y`` int64 ``[N]`` and
    features as dense ``x`` float32 ``[N, F]`` or as CSR parts ``x_data``,
    ``x_indices``, ``x_indptr`` and ``x_shape`` (densified here).

    Args:
        path: The ``.npz`` file.
        split: Train/val/test fractions of the random split.
        seed: Seed of the random split.

    Returns:
        The graph with dense float32 ``x`` and seeded split masks.

    Raises:
        ValueError: If a key is missing or the arrays' shapes disagree.

    Example:
        >>> data = load_npz("amazon_photo.npz", seed=1)  # doctest: +SKIP
        >>> data.x.shape  # doctest: +SKIP
        torch.Size([7650, 745])
    """
    with np.load(path, allow_pickle=False) as npz:
        arrays = {key: npz[key] for key in npz.files}
    edges = _require(arrays, "edge_index", path)
    y = _require(arrays, "y", path)
    x = arrays["x"] if "x" in arrays else _csr_to_dense(arrays, path)
    _check_npz(x, y, edges, path)
    train, val, test = random_split_masks(y.shape[0], split, seed)
    return Data(
        x=torch.from_numpy(np.ascontiguousarray(x, dtype=np.float32)),
        y=torch.from_numpy(y.astype(np.int64)),
        edge_index=torch.from_numpy(edges.astype(np.int64)),
        train_mask=train,
        val_mask=val,
        test_mask=test,
    )


# --------------------------------------------------------------------------
# OGB
# --------------------------------------------------------------------------


def _ogb_name(name: str, root: Path) -> str:
    """Returns OGB's spelling of ``name``, checked before anything downloads."""
    import ogb.nodeproppred
    import pandas as pd

    master = Path(ogb.nodeproppred.__file__).with_name("master.csv")
    meta = pd.read_csv(master, index_col=0, keep_default_na=False)
    names = {known.lower(): known for known in meta.columns}
    if name.lower() not in names:
        raise ValueError(f"unknown OGB dataset {name!r}; expected one of {list(names)}")
    name = names[name.lower()]
    info = meta[name]
    if info["is hetero"] == "True" or int(info["num tasks"]) != 1:
        raise ValueError(f"{name} is heterogeneous or multi-task; unsupported")
    dir_name = name.replace("-", "_")
    folder = root / f"{dir_name}_pyg"
    folder = folder if folder.exists() else root / dir_name
    release = folder / f"RELEASE_v{info['version']}.txt"
    # OGB calls input() ("Will you update the dataset now?") when the folder
    # exists without its RELEASE file; fail loudly instead of blocking.
    if folder.is_dir() and not release.exists():
        raise FileNotFoundError(
            f"{folder} exists but has no {release.name}; remove the folder to "
            "let OGB download the current release"
        )
    return name


def _ogb_help(dataset: Any, reason: str) -> str:
    root = Path(dataset.original_root)
    unzipped = root / dataset.download_name
    release = f"RELEASE_v{dataset.meta_info['version']}.txt"
    return (
        f"{dataset.name} is not in {dataset.root} and could not be downloaded "
        f"({reason}); download {dataset.meta_info['url']}, unzip it in {root} and "
        f"rename the folder {unzipped} it makes to {dataset.root} (which then "
        f"holds {release}, raw/ and split/)"
    )


@functools.cache
def _ogb_class() -> type:
    from ogb.nodeproppred import PygNodePropPredDataset

    class _OgbDataset(PygNodePropPredDataset):
        """OGB's dataset whose failed download says what to fetch by hand."""

        def download(self) -> None:
            try:
                super().download()
            except (*_download_errors(), RuntimeError) as error:
                # (OGB raises RuntimeError for a download cut off midway.)
                # PyG made <root>/<name>/raw before downloading; left empty
                # and without its RELEASE file, OGB would ask on stdin next time.
                for folder in (Path(self.raw_dir), Path(self.root)):
                    with contextlib.suppress(OSError):
                        folder.rmdir()  # only if empty
                message = _ogb_help(self, _reason(error))
                raise FileNotFoundError(message) from error

    return _OgbDataset


def pyg_pickle_classes() -> list[type]:
    """The PyG classes OGB's processed files pickle.

    With torch >= 2.6, ``torch.load`` (which ``PygNodePropPredDataset`` calls)
    only unpickles allowlisted classes; wrap the dataset in
    ``torch.serialization.safe_globals(pyg_pickle_classes())``.

    Example:
        >>> "GlobalStorage" in [cls.__name__ for cls in pyg_pickle_classes()]
        True
    """
    from torch_geometric.data.data import DataEdgeAttr, DataTensorAttr
    from torch_geometric.data.storage import EdgeStorage, GlobalStorage, NodeStorage

    return [DataEdgeAttr, DataTensorAttr, GlobalStorage, NodeStorage, EdgeStorage]


def _index_mask(index: Tensor, num_nodes: int) -> Tensor:
    mask = torch.zeros(num_nodes, dtype=torch.bool)
    mask[index] = True
    return mask


def _flat_labels(y: Tensor) -> Tensor:
    y = y.view(-1)
    if y.is_floating_point():
        # papers100M marks unlabelled nodes with NaN.
        y = torch.nan_to_num(y, nan=-1.0)
    return y.long()


def load_ogb(name: str, root: PathLike | None = None) -> Data:
    """Loads a homogeneous single-task OGB node-property dataset.

    Uses :class:`ogb.nodeproppred.PygNodePropPredDataset`, which downloads the
    dataset into ``<root>/<name with _>`` unless it is already there. Edges are
    returned as OGB stores them (ogbn-arxiv stays directed).

    Args:
        name: An ``ogbn-*`` name, e.g. ``"ogbn-arxiv"`` or ``"ogbn-products"``
            (case-insensitive).
        root: Dataset root; defaults to :func:`default_root`.

    Returns:
        The graph with 1-D int64 ``y`` (-1 for unlabelled nodes) and masks from
        the official ``get_idx_split()``.

    Raises:
        ValueError: For unknown, heterogeneous or multi-task datasets.
        FileNotFoundError: If the dataset is missing and cannot be downloaded
            (e.g. offline); the message names the zip's URL and where to
            unpack it.

    Example:
        >>> data = load_ogb("ogbn-arxiv", "/tmp/pyg_orch")  # doctest: +SKIP
        >>> int(data.train_mask.sum())  # doctest: +SKIP
        90941
    """
    root = _resolve_root(root)
    name = _ogb_name(name, root)
    # ogb 1.3.6 calls torch.load() with torch>=2.6's weights_only default, which
    # refuses PyG's own storage classes unless they are allowlisted.
    with torch.serialization.safe_globals(pyg_pickle_classes()):
        dataset = _ogb_class()(name=name, root=str(root))
        data = dataset[0]
        split = dataset.get_idx_split()
    num_nodes = int(data.num_nodes)
    return Data(
        x=data.x.float(),
        y=_flat_labels(data.y),
        edge_index=data.edge_index.long(),
        train_mask=_index_mask(split["train"], num_nodes),
        val_mask=_index_mask(split["valid"], num_nodes),
        test_mask=_index_mask(split["test"], num_nodes),
    )
