"""Public names a package loads on first use (PEP 562).

``pyg_orch`` answers ``pyg-orch --help`` before torch is imported, and
``pyg_orch.distributed`` loads PyG's engine without the rest of pyg_orch:
both list their public names with the module that defines each, and
:func:`lazy_names` gives them the module-level ``__getattr__`` and
``__dir__`` that import that module when a name is first read.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any


def lazy_names(
    package: str, exports: dict[str, str], namespace: dict[str, Any]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``__getattr__`` and ``__dir__`` for ``package``, whose names live in ``exports``.

    Args:
        package: the package's name, for the error message.
        exports: each public name and the module that defines it.
        namespace: the package's ``globals()``; a name read once is stored
            there, so the next lookup skips the hook.

    Example:
        >>> namespace = {}
        >>> getattr_, dir_ = lazy_names("p", {"sqrt": "math"}, namespace)
        >>> getattr_("sqrt")(4.0), dir_()
        (2.0, ['sqrt'])
    """

    def __getattr__(name: str) -> Any:
        if name not in exports:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(exports[name]), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted({*namespace, *exports})

    return __getattr__, __dir__
