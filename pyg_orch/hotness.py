"""Deprecated: pyg_orch.hotness's names moved to :mod:`pyg_orch.hot.choice`,
:mod:`pyg_orch.hot.tuning`; this path goes in pyg_orch 0.2.
"""

from pyg_orch._moved import moved

__getattr__ = moved(__name__)
