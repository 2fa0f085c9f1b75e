"""The hot part of a loader's checkpoint, checked before it is restored.

:meth:`~pyg_orch.hot.vertices.HotVertices.state` saves the hot ratio, the
hot set and the cache's computed values; :func:`check_hot_state` checks them
against the graph (each key's type and range) before
:meth:`~pyg_orch.hot.vertices.HotVertices.restore` changes anything.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from pyg_orch.checks import checkpoint_key as _key
from pyg_orch.checks import describe as _describe
from pyg_orch.hot.cache import AGGREGATIONS, CACHE_MODES, check_hot_values
from pyg_orch.hot.choice import GIVEN, HOT_METHODS

#: The keys of the hot part of a loader's checkpoint.
HOT_STATE_KEYS = (
    "hot_ratio", "hot_nodes", "hot_counts", "hot_method", "cache_mode", "cache_values",
)  # fmt: skip


def check_hot_state(
    state: dict[str, Any], num_nodes: int, features: Any, chosen_mode: str | None
) -> None:
    """Raises a :class:`ValueError` naming the key unless the hot part fits.

    Args:
        state: a loader's checkpoint, its keys checked.
        num_nodes: the graph's nodes.
        features: the loader's features (the values' width), or ``None``.
        chosen_mode: the ``cache`` argument the loader was built with.

    Example:
        >>> state = {"hot_nodes": torch.tensor([5]), "hot_counts": torch.zeros(0),
        ...          "hot_method": "degree", "cache_mode": "static",
        ...          "cache_values": {}}
        >>> check_hot_state(state, 4, None, None)
        Traceback (most recent call last):
        ...
        ValueError: checkpoint key 'hot_nodes' holds node ids outside [0, 4) (the graph's nodes)
    """  # noqa: E501 - a doctest's output is one line
    num_hot = _check_hot_set(state, num_nodes)
    mode = state["cache_mode"]
    _check_cache(mode, state["cache_values"], num_hot, features, chosen_mode)


def _check_hot_set(state: dict[str, Any], num_nodes: int) -> int | None:
    # The number of hot vertices, None without a hot set.
    nodes = state["hot_nodes"]
    if nodes is None:
        for key in ("hot_counts", "hot_method", "cache_mode", "cache_values"):
            if not _empty(state[key]):
                raise ValueError(
                    f"{_key(key)} must be empty without hot vertices (hot_nodes "
                    f"is None), got {_describe(state[key])}"
                )
        return None
    if not (
        isinstance(nodes, Tensor) and nodes.dtype == torch.long and nodes.ndim == 1
    ):
        raise ValueError(
            f"{_key('hot_nodes')} must be None or a 1-D torch.long tensor of node "
            f"ids, got {_describe(nodes)}"
        )
    if nodes.numel() and (nodes.min() < 0 or nodes.max() >= num_nodes):
        raise ValueError(
            f"{_key('hot_nodes')} holds node ids outside [0, {num_nodes}) (the "
            f"graph's nodes)"
        )
    if nodes.unique().numel() != nodes.numel():
        raise ValueError(f"{_key('hot_nodes')} holds a node id twice")
    counts = state["hot_counts"]
    if not (
        isinstance(counts, Tensor)
        and counts.dim() == 1
        and counts.numel() in (0, num_nodes)
    ):
        raise ValueError(
            f"{_key('hot_counts')} must be a 1-D tensor of one score per node "
            f"({num_nodes}), or empty, got {_describe(counts)}"
        )
    if not _one_of(state["hot_method"], (*HOT_METHODS, GIVEN)):
        raise ValueError(
            f"{_key('hot_method')} must be one of {(*HOT_METHODS, GIVEN)}, got "
            f"{_describe(state['hot_method'])}"
        )
    return nodes.numel()


def _check_cache(
    mode: Any, values: Any, num_hot: int | None, x: Tensor | None, chosen: str | None
) -> None:
    if num_hot is not None and not _one_of(mode, CACHE_MODES):
        raise ValueError(
            f"{_key('cache_mode')} must be one of {CACHE_MODES}, got {_describe(mode)}"
        )
    # Without hot vertices a loader serves nothing, as a static one would.
    if chosen not in (None, mode or "static"):
        raise ValueError(
            f"{_key('cache_mode')} is {mode!r}, but this loader was built with "
            f"cache={chosen!r}: build it with the cache mode of the saved one, or "
            f"leave cache unset"
        )
    if num_hot is None:
        return  # nothing cached: checked empty with the hot set
    if not isinstance(values, dict) or not all(kind in AGGREGATIONS for kind in values):
        raise ValueError(
            f"{_key('cache_values')} must be a dict of hot values by kind, one "
            f"of {AGGREGATIONS}, got {_describe(values)}"
        )
    for kind, value in values.items():
        check_hot_values(value, num_hot, x, _key(f"cache_values.{kind}"))


def _empty(value: Any) -> bool:
    return value is None or (isinstance(value, dict) and not value)


def _one_of(value: Any, options: tuple[str, ...]) -> bool:
    return isinstance(value, str) and value in options
