"""Loading a dataset by name, as the command line does.

:func:`load_dataset` maps a name (see :mod:`pyg_orch.dataset_names`) to the
reader of ``pyg_orch.datasets.readers`` or to a 100k-node synthetic
power-law graph.
"""

from __future__ import annotations

from torch_geometric.data import Data

from pyg_orch.dataset_names import dataset_kind
from pyg_orch.datasets.readers import PathLike, load_npz, load_ogb, load_planetoid
from pyg_orch.datasets.synthetic import power_law_graph

_SYNTHETIC_NUM_NODES = 100_000


def load_dataset(name: str, root: PathLike | None = None, seed: int = 0) -> Data:
    """Loads a dataset by name, as the command line does.

    Accepted names (case-insensitive): ``cora`` (embedded, no download),
    ``citeseer``, ``pubmed``, any path ending in ``.npz``, any ``ogbn-*``
    dataset, and ``power-law``/``synthetic`` (a 100k-node
    :func:`power_law_graph`).

    Args:
        name: Dataset name or ``.npz`` path.
        root: Dataset root for downloaded/processed files; defaults to
            :func:`default_root`.
        seed: Seed of random splits (npz) and of the synthetic graph.

    Returns:
        ``Data`` with ``x``, ``y``, ``edge_index`` and the three split masks.

    Raises:
        ValueError: For an unknown name (see
            :func:`~pyg_orch.dataset_names.dataset_kind`).
        FileNotFoundError: If an ``.npz`` path is not a file, or a dataset
            to download cannot be downloaded; the message says which files
            to put where.

    Example:
        >>> load_dataset("Cora").num_nodes
        2708
    """
    kind = dataset_kind(name)
    if kind == "npz":
        return load_npz(name, seed=seed)
    if kind == "planetoid":
        return load_planetoid(name.lower(), root)
    if kind == "ogb":
        return load_ogb(name, root)
    return power_law_graph(_SYNTHETIC_NUM_NODES, seed=seed)
