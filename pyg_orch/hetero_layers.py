"""Deprecated: pyg_orch.hetero_layers's names moved to
:mod:`pyg_orch.nn.hetero_layers`; this path goes in pyg_orch 0.2.
"""

from pyg_orch._moved import moved

__getattr__ = moved(__name__)
