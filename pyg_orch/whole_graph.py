"""Deprecated: pyg_orch.whole_graph's names moved to :mod:`pyg_orch.nn.whole_graph`;
this path goes in pyg_orch 0.2.
"""

from pyg_orch._moved import moved

__getattr__ = moved(__name__)
