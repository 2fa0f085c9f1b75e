"""The hot settings of a loader, held once: :class:`HotOptions`.

The eight arguments that say which vertices are hot and how their values are
made travel together, as PyG's ``NegativeSampling`` and ``NumNeighbors`` do,
and are checked once, when they are gathered. The defaults that depend on
others (the staleness bound, the refresh fan-out) are computed here only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from pyg_orch.checks import check_not_uint8, is_int, shape_of
from pyg_orch.hot.cache import CACHE_MODES
from pyg_orch.hot.choice import HotRatio, HotSet, check_hot_method
from pyg_orch.hot.refresher import check_staleness


@dataclass(frozen=True, eq=False)
class HotOptions:
    """Which vertices are hot, and how their bottom-layer values are made.

    The arguments of the loaders of the same names; see
    :class:`~pyg_orch.OrchNeighborLoader`. Checked at construction.

    Attributes:
        hot_ratio: fraction of the vertices to make hot, ``"auto"``, or on a
            heterogeneous graph a dict of fractions per node type.
        hot_method: ``"presample"`` or ``"degree"``.
        hot: a given hot set, or ``None``.
        presample_epochs: epochs sampled by ``presample``.
        cache: the cache mode, or ``None`` (static unless the model needs
            embedding mode).
        super_batch: batches served by one re-sampled or embedded buffer.
        staleness: the most training steps between the making of hot values
            and their use, or ``None`` for :attr:`staleness_bound`'s default.
        hot_fanout: neighbours sampled per hot vertex by a refresh, or
            ``None`` for the largest fan-out.

    Example:
        >>> options = HotOptions(hot_ratio=0.2, cache="resample", super_batch=4)
        >>> options.staleness_bound, options.fanout([10, 5]), options.wants_hot
        (7, 10, True)
        >>> HotOptions(super_batch=4, staleness=2)
        Traceback (most recent call last):
        ...
        ValueError: staleness must be at least super_batch - 1 = 3 (a buffer serves super_batch batches), got 2; lower super_batch or raise staleness
    """  # noqa: E501 - a doctest's output is one line

    hot_ratio: HotRatio = 0.0
    hot_method: str = "presample"
    hot: HotSet | Tensor | None = None
    presample_epochs: int = 1
    cache: str | None = None
    super_batch: int = 8
    staleness: int | None = None
    hot_fanout: int | None = None

    def __post_init__(self) -> None:
        check_hot_method(self.hot_method)
        check_hot_type(self.hot)
        check_presample_epochs(self.presample_epochs)
        if self.cache is not None and self.cache not in CACHE_MODES:
            raise ValueError(
                f"cache must be one of {CACHE_MODES} or None, got {self.cache!r}"
            )
        # A bad super_batch is named before staleness is looked at.
        check_staleness(self.super_batch, self.staleness_bound)
        check_hot_fanout(self.hot_fanout)

    @property
    def staleness_bound(self) -> int:
        """The staleness bound (``staleness`` if given, else ``2 * super_batch - 1``).

        The default lets the next buffer be made while the current one serves.
        """
        if self.staleness is not None:
            return self.staleness
        return 2 * self.super_batch - 1 if is_int(self.super_batch) else -1

    @property
    def wants_hot(self) -> bool:
        """Whether hot vertices are asked for (a ratio other than 0, or a set)."""
        return self.hot is not None or self.hot_ratio != 0

    @property
    def dynamic(self) -> bool:
        """Whether a cache mode that re-makes values during an epoch is asked for."""
        return self.cache in ("resample", "embedding")

    def fanout(self, num_neighbors: Any) -> int:
        """Neighbours a refresh samples per hot vertex (-1: all of them).

        ``hot_fanout``, else the largest of the loader's fan-outs.
        """
        if self.hot_fanout is not None:
            return self.hot_fanout
        if isinstance(num_neighbors, dict):
            return -1  # per-edge-type fan-outs: hot vertices need a homogeneous graph
        fanouts = list(getattr(num_neighbors, "values", num_neighbors))
        return -1 if -1 in fanouts else max(max(fanouts, default=1), 1)


def check_presample_epochs(presample_epochs: Any) -> None:
    """Checks that ``presample_epochs`` is an int >= 1.

    Args:
        presample_epochs: epochs sampled by ``hot_method="presample"``.

    Raises:
        ValueError: it is not.

    Example:
        >>> check_presample_epochs(2)
        >>> check_presample_epochs(0)
        Traceback (most recent call last):
        ...
        ValueError: presample_epochs must be an int >= 1 (sampled epochs that count how often each vertex is in a frontier), got 0
    """  # noqa: E501 - a doctest's output is one line
    if not is_int(presample_epochs) or presample_epochs < 1:
        raise ValueError(
            f"presample_epochs must be an int >= 1 (sampled epochs that count "
            f"how often each vertex is in a frontier), got {presample_epochs!r}"
        )


def check_hot_type(hot: Any) -> None:
    """Checks that a given hot set is a ``HotSet``, node ids or a boolean mask.

    A tensor must be 1-D and neither floating point nor ``uint8`` (which may
    be meant as a mask or as ids). Its size and id range are checked against
    the graph when the loader takes it.

    Args:
        hot: the ``hot`` argument of the loader.

    Raises:
        TypeError: it is none of those, or ``uint8``.
        ValueError: a tensor that is not 1-D.

    Example:
        >>> check_hot_type(torch.tensor([0, 5]))
        >>> check_hot_type(torch.tensor([0.5]))
        Traceback (most recent call last):
        ...
        TypeError: hot must be a HotSet, a tensor of node ids or a boolean mask over the nodes, got a tensor of torch.float32
    """  # noqa: E501 - a doctest's output is one line
    if hot is None or isinstance(hot, HotSet):
        return
    if isinstance(hot, Tensor):
        if hot.dtype == torch.bool or not (hot.is_floating_point() or hot.is_complex()):
            check_not_uint8(hot, "hot")
            if hot.dim() != 1:
                raise ValueError(
                    f"hot must be 1-D (node ids, or a boolean mask with one entry "
                    f"per node), got shape {shape_of(hot)}; flatten a mask with "
                    f"hot.view(-1)"
                )
            return
        got = f"a tensor of {hot.dtype}"
    else:
        got = type(hot).__name__
    raise TypeError(
        f"hot must be a HotSet, a tensor of node ids or a boolean mask over the "
        f"nodes, got {got}"
    )


def check_hot_fanout(hot_fanout: Any) -> None:
    """Checks ``hot_fanout``: ``None`` (the largest fan-out), >= 1 or -1.

    Example:
        >>> check_hot_fanout(-1)
        >>> check_hot_fanout(0)
        Traceback (most recent call last):
        ...
        ValueError: hot_fanout must be >= 1 or -1 (all neighbours), got 0
    """
    if hot_fanout is None:
        return
    if not is_int(hot_fanout):
        raise ValueError(f"hot_fanout must be an int, got {hot_fanout!r}")
    if hot_fanout == 0 or hot_fanout < -1:
        raise ValueError(
            f"hot_fanout must be >= 1 or -1 (all neighbours), got {hot_fanout}"
        )
