"""Deprecated: pyg_orch.checkpoint's names moved to :mod:`pyg_orch.loading.checkpoint`,
:mod:`pyg_orch.hot.refresher`; this path goes in pyg_orch 0.2.
"""

from pyg_orch._moved import moved

__getattr__ = moved(__name__)
