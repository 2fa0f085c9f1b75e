"""pyg_orch: fast sample-based GNN training for PyTorch Geometric.

Follows NeutronOrch (PVLDB 2024): frequently sampled ("hot") vertices get their
bottom-layer aggregation from the CPU while the device trains the rest.

The public names load on first use, so that ``pyg-orch --help`` and its
argument checks answer before torch and PyG are imported.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
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
    "select_hot",
]


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'pyg_orch' has no attribute {name!r}")
    value = getattr(importlib.import_module(_EXPORTS[name]), name)
    globals()[name] = value  # the next lookup finds it without this hook
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS])
