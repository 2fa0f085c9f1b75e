"""What kind of dataset a name names, told without importing torch.

:func:`~pyg_orch.datasets.load_dataset` dispatches on it, and the command
line checks ``--dataset`` with it before it imports anything heavy, so that a
misspelt name is reported at once.
"""

from __future__ import annotations

import os

__all__ = ["PLANETOID_NAMES", "SYNTHETIC_NAMES", "dataset_kind"]

#: Planetoid datasets by lower-case name, as PyG's ``Planetoid`` spells them.
PLANETOID_NAMES = {"cora": "Cora", "citeseer": "CiteSeer", "pubmed": "PubMed"}
#: Names of the synthetic power-law graph.
SYNTHETIC_NAMES = ("power-law", "synthetic")


def dataset_kind(name: str) -> str:
    """``"npz"``, ``"planetoid"``, ``"ogb"`` or ``"synthetic"`` for ``name``.

    Names are case-insensitive; a path ending in ``.npz`` must exist.

    Raises:
        ValueError: an unknown name.
        FileNotFoundError: an ``.npz`` path that is not a file.

    Example:
        >>> dataset_kind("Cora"), dataset_kind("ogbn-arxiv")
        ('planetoid', 'ogb')
        >>> dataset_kind("coraa")
        Traceback (most recent call last):
        ...
        ValueError: unknown dataset 'coraa'; expected one of: cora, citeseer, pubmed, power-law, synthetic, an ogbn-* name (e.g. ogbn-arxiv) or a path to an .npz file
    """  # noqa: E501 - a doctest's output is one line
    key = name.lower()
    if key.endswith(".npz"):
        if not os.path.isfile(name):
            raise FileNotFoundError(f"dataset file {name!r} does not exist")
        return "npz"
    if key in PLANETOID_NAMES:
        return "planetoid"
    if key.startswith("ogbn-"):
        return "ogb"
    if key in SYNTHETIC_NAMES:
        return "synthetic"
    raise ValueError(
        f"unknown dataset {name!r}; expected one of: cora, citeseer, pubmed, "
        "power-law, synthetic, an ogbn-* name (e.g. ogbn-arxiv) or a path to an "
        ".npz file"
    )
