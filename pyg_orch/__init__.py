"""pyg_orch: fast sample-based GNN training for PyTorch Geometric.

Follows NeutronOrch (PVLDB 2024): frequently sampled ("hot") vertices get their
bottom-layer aggregation from the CPU while the device trains the rest.
"""

from pyg_orch.cache import FeatureCache, HotCache
from pyg_orch.hotness import HotSet, select_hot
from pyg_orch.link_loader import OrchLinkNeighborLoader
from pyg_orch.loader import OrchNeighborLoader
from pyg_orch.model import OrchModel
from pyg_orch.pipeline import HotRefresher, Pipeline
from pyg_orch.sampling import OrchNeighborSampler

__version__ = "0.1.0.dev0"

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
