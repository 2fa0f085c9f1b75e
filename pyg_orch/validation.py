"""Deprecated: pyg_orch.validation's names moved to :mod:`pyg_orch.loading.arguments`,
:mod:`pyg_orch.checks`, :mod:`pyg_orch.nn.model_checks`; this path goes in pyg_orch
0.2.
"""

from pyg_orch._moved import moved

__getattr__ = moved(__name__)
