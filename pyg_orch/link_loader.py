"""Deprecated: pyg_orch.link_loader's names moved to
:mod:`pyg_orch.loading.link_loader`; this path goes in pyg_orch 0.2.
"""

from pyg_orch._moved import moved

__getattr__ = moved(__name__)
