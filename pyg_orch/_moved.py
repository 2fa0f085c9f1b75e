"""The module paths of pyg_orch 0.1's flat layout, kept for one release.

pyg_orch's modules moved into wings (:mod:`pyg_orch.hot`,
:mod:`pyg_orch.loading`, :mod:`pyg_orch.nn`, ...). Each old path is a thin
module whose names resolve, with a :class:`DeprecationWarning`, to where they
live now. The imports are by name, at use, so that these aliases stay outside
the layering they would otherwise cross.
"""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Callable
from typing import Any

#: Each old module path and the modules its names moved to.
MOVED = {
    "pyg_orch.basic_layers": ("pyg_orch.nn.basic_layers",),
    "pyg_orch.cache": ("pyg_orch.hot.cache", "pyg_orch.loading.feature_cache"),
    "pyg_orch.checkpoint": ("pyg_orch.loading.checkpoint", "pyg_orch.hot.refresher"),
    "pyg_orch.convs": ("pyg_orch.nn.convs",),
    "pyg_orch.epoch": ("pyg_orch.loading.epoch",),
    "pyg_orch.hetero_layers": ("pyg_orch.nn.hetero_layers",),
    "pyg_orch.hot": (
        "pyg_orch.hot.vertices",
        "pyg_orch.hot.serving",
        "pyg_orch.loading.graph_inputs",
    ),
    "pyg_orch.hotness": ("pyg_orch.hot.choice", "pyg_orch.hot.tuning"),
    "pyg_orch.link_loader": ("pyg_orch.loading.link_loader",),
    "pyg_orch.loader": (
        "pyg_orch.loading.node_loader",
        "pyg_orch.loading.epoch",
        "pyg_orch.loading.stats",
    ),
    "pyg_orch.model": ("pyg_orch.nn.model", "pyg_orch.nn.model_checks"),
    "pyg_orch.model_checks": ("pyg_orch.nn.model_checks",),
    "pyg_orch.pipeline": ("pyg_orch.loading.pipeline", "pyg_orch.hot.refresher"),
    "pyg_orch.producer": ("pyg_orch.loading.producer",),
    "pyg_orch.relation_cache": ("pyg_orch.hot.relation_cache",),
    "pyg_orch.stats": ("pyg_orch.loading.stats",),
    "pyg_orch.validation": (
        "pyg_orch.loading.arguments",
        "pyg_orch.checks",
        "pyg_orch.nn.model_checks",
    ),
    "pyg_orch.whole_graph": ("pyg_orch.nn.whole_graph",),
}


def moved(old: str) -> Callable[[str], Any]:
    """The module ``__getattr__`` of the old path ``old``.

    It finds a name in the modules ``old``'s names moved to and warns once
    per use that the path is deprecated.

    Example:
        >>> import pytest
        >>> with pytest.warns(DeprecationWarning, match="pyg_orch.hot.choice"):
        ...     HotSet = moved("pyg_orch.hotness")("HotSet")
        >>> HotSet.__module__
        'pyg_orch.hot.choice'
    """
    homes = MOVED[old]

    def __getattr__(name: str) -> Any:
        for home in homes:
            module = importlib.import_module(home)
            if name in vars(module):
                warnings.warn(
                    f"{old} is deprecated and goes in pyg_orch 0.2: import "
                    f"{name} from {home} (public names also from pyg_orch)",
                    DeprecationWarning,
                    stacklevel=2,
                )
                return vars(module)[name]
        raise AttributeError(f"module {old!r} has no attribute {name!r}")

    return __getattr__
