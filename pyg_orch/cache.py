"""Deprecated: pyg_orch.cache's names moved to :mod:`pyg_orch.hot.cache`,
:mod:`pyg_orch.loading.feature_cache`; this path goes in pyg_orch 0.2.
"""

from pyg_orch._moved import moved

__getattr__ = moved(__name__)
