"""Dataset loaders and a fast synthetic power-law graph generator.

Every loader returns a :class:`torch_geometric.data.Data` with ``x`` (float32),
``y`` (int64, 1-D), ``edge_index`` (int64, ``[2, E]``) and boolean
``train_mask``/``val_mask``/``test_mask``. Cora ships inside the package, so the
default dataset never needs the network.

The package re-exports its modules' public names: ``readers`` (Cora,
Planetoid, npz and OGB), ``splits`` (random split masks), ``synthetic`` (the
power-law generators) and ``dispatch`` (:func:`load_dataset`).
"""

# PathLike, pyg_pickle_classes and MAG_* are public but outside __all__ (so
# not in the API reference), as before the split; "X as X" re-exports them
# for type checkers.
from pyg_orch.datasets.dispatch import load_dataset
from pyg_orch.datasets.readers import PathLike as PathLike
from pyg_orch.datasets.readers import (
    default_root,
    load_cora,
    load_npz,
    load_ogb,
    load_planetoid,
)
from pyg_orch.datasets.readers import pyg_pickle_classes as pyg_pickle_classes
from pyg_orch.datasets.splits import random_split_masks
from pyg_orch.datasets.synthetic import MAG_NODES as MAG_NODES
from pyg_orch.datasets.synthetic import MAG_RELATIONS as MAG_RELATIONS
from pyg_orch.datasets.synthetic import power_law_graph, power_law_hetero_graph

__all__ = [
    "default_root",
    "load_cora",
    "load_dataset",
    "load_npz",
    "load_ogb",
    "load_planetoid",
    "power_law_graph",
    "power_law_hetero_graph",
    "random_split_masks",
]
