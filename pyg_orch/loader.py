"""Deprecated: pyg_orch.loader's names moved to :mod:`pyg_orch.loading.node_loader`,
:mod:`pyg_orch.loading.epoch`, :mod:`pyg_orch.loading.stats`; this path goes in
pyg_orch 0.2.
"""

from pyg_orch._moved import moved

__getattr__ = moved(__name__)
