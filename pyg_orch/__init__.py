"""pyg_orch: fast sample-based GNN training for PyTorch Geometric.

Follows NeutronOrch (PVLDB 2024): frequently sampled ("hot") vertices get their
bottom-layer aggregation from the CPU while the device trains the rest.

``import pyg_orch`` makes it PyG's sampling backend where pyg-lib and
torch-sparse are absent (:mod:`pyg_orch.backend`). The public names load on
first use, so that ``pyg-orch --help`` and its
argument checks answer before torch and PyG are imported.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyg_orch import backend as _backend
from pyg_orch.lazy_names import lazy_names

if TYPE_CHECKING:
    from pyg_orch.backend import backend_status
    from pyg_orch.hot.cache import HotCache
    from pyg_orch.hot.choice import HotSet, select_hot
    from pyg_orch.hot.refresher import HotRefresher
    from pyg_orch.loading.feature_cache import FeatureCache
    from pyg_orch.loading.link_loader import OrchLinkNeighborLoader
    from pyg_orch.loading.node_loader import OrchNeighborLoader
    from pyg_orch.loading.pipeline import Pipeline
    from pyg_orch.nn.model import OrchModel
    from pyg_orch.sampling import OrchNeighborSampler

__version__ = "0.1.0.dev0"

# Each public name and the module that defines it.
_EXPORTS = {
    "FeatureCache": "pyg_orch.loading.feature_cache",
    "HotCache": "pyg_orch.hot.cache",
    "backend_status": "pyg_orch.backend",
    "HotRefresher": "pyg_orch.hot.refresher",
    "HotSet": "pyg_orch.hot.choice",
    "OrchLinkNeighborLoader": "pyg_orch.loading.link_loader",
    "OrchModel": "pyg_orch.nn.model",
    "OrchNeighborLoader": "pyg_orch.loading.node_loader",
    "OrchNeighborSampler": "pyg_orch.sampling",
    "Pipeline": "pyg_orch.loading.pipeline",
    "select_hot": "pyg_orch.hot.choice",
}

__all__ = [
    "FeatureCache",
    "HotCache",
    "HotRefresher",
    "HotSet",
    "OrchLinkNeighborLoader",
    "OrchModel",
    "OrchNeighborLoader",
    "OrchNeighborSampler",
    "Pipeline",
    "__version__",
    "backend_status",
    "select_hot",
]

# PyG's own samplers and ClusterData run on pyg_orch's kernels where pyg-lib
# and torch-sparse are absent, from when torch_geometric is imported.
_backend.install()


__getattr__, __dir__ = lazy_names("pyg_orch", _EXPORTS, globals())
