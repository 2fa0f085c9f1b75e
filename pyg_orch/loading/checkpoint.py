"""Checks of :class:`~pyg_orch.OrchNeighborLoader` checkpoints, by key.

``loader.state_dict()`` records what identifies the graph and the loader
(:func:`loader_identity`); ``loader.load_state_dict()`` runs
:func:`check_state` before it changes anything. A checkpoint of another graph,
of a loader built with other arguments, or edited by hand is then refused with
a :class:`ValueError` that names the key and both values, instead of serving
another graph's hot values or failing in a thread in the middle of the epoch.
"""

from __future__ import annotations

import hashlib
from typing import Any, Protocol

import torch
from torch import Tensor

from pyg_orch.checks import checkpoint_key as _key
from pyg_orch.checks import is_int
from pyg_orch.hot.cache import AGGREGATIONS, CACHE_MODES, check_hot_values
from pyg_orch.hot.choice import HOT_METHODS


class CheckpointedLoader(Protocol):
    """What :func:`loader_identity` and :func:`check_state` read of a loader.

    :class:`~pyg_orch.loading.orch_loader.OrchLoader` has it; the checks
    take any object that does, so that they sit below the loaders.

    Example:
        >>> from pyg_orch import OrchNeighborLoader
        >>> from pyg_orch.datasets import load_cora
        >>> loader: CheckpointedLoader = OrchNeighborLoader(load_cora(), [5])
        >>> loader.num_inputs
        2708
    """

    data: Any
    features: Tensor | None
    batch_size: int
    prefetch: int
    device: torch.device | None

    @property
    def graph_sampler(self) -> Any: ...

    @property
    def num_inputs(self) -> int: ...

    @property
    def super_batch(self) -> int: ...

    @property
    def staleness(self) -> int: ...

    @property
    def hot_fanout(self) -> int: ...

    def seed_identity(self) -> dict[str, Any]: ...


#: The keys of a loader's state, and of the epoch position it holds.
STATE_KEYS = (
    "identity", "hot_ratio", "hot_nodes", "hot_counts", "hot_method",
    "cache_mode", "cache_values", "position",
)  # fmt: skip
POSITION_KEYS = ("jobs", "generator_state", "refresh_seed", "next", "refreshes")
# Rows a fingerprint reads from each tensor: enough to tell graphs apart, few
# enough that checkpointing a billion-edge graph costs nothing.
_FINGERPRINT_ROWS = 64
# How a hot set not chosen by the loader is marked (see hotness.as_hot_set).
_GIVEN = "given"


def fingerprint(*tensors: Tensor) -> str:
    """A cheap digest of tensors: their shapes, dtypes and evenly spaced rows.

    Example:
        >>> fingerprint(torch.arange(100)) == fingerprint(torch.arange(100))
        True
        >>> fingerprint(torch.arange(100)) == fingerprint(torch.arange(1, 101))
        False
    """
    digest = hashlib.blake2b(digest_size=16)
    for tensor in tensors:
        size = tensor.size(0)
        count = min(size, _FINGERPRINT_ROWS)
        index = torch.arange(count) * (size - 1) // max(count - 1, 1)
        rows = tensor[index].contiguous()
        digest.update(f"{tuple(tensor.shape)} {tensor.dtype}".encode())
        digest.update(rows.view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()


def loader_identity(loader: CheckpointedLoader) -> dict[str, Any]:
    """What a checkpoint of ``loader`` must match: graph, seeds and batching.

    The sizes of the graph, fingerprints of its edges (CSC), features and
    input nodes (see :func:`fingerprint`), and the arguments the batches and
    hot values depend on.

    Example:
        >>> from pyg_orch import OrchNeighborLoader
        >>> from pyg_orch.datasets import load_cora
        >>> identity = loader_identity(OrchNeighborLoader(load_cora(), [5],
        ...                                               batch_size=64))
        >>> identity["num_nodes"], identity["num_neighbors"]
        (2708, [5])
    """
    sampler, x = loader.graph_sampler, loader.features
    return {
        "num_nodes": int(loader.data.num_nodes),
        "num_edges": int(loader.data.num_edges),
        "edges": fingerprint(*_csc(sampler)),
        "x_shape": list(x.shape) if x is not None else None,
        "x_dtype": str(x.dtype) if x is not None else None,
        "x": fingerprint(x) if x is not None else None,
        **loader.seed_identity(),
        "batch_size": loader.batch_size,
        "num_neighbors": list(sampler.num_neighbors.values),
        "replace": sampler.replace,
        "super_batch": loader.super_batch,
        "staleness": loader.staleness,
        "hot_fanout": loader.hot_fanout,
    }


def _csc(sampler: Any) -> list[Tensor]:
    # A homogeneous graph has one CSC; a heterogeneous one (sampled by PyG's
    # backend) one per edge type.
    if isinstance(getattr(sampler, "colptr", None), Tensor):
        return [sampler.colptr, sampler.row]
    return [
        part
        for edge_type in sorted(sampler.colptr_dict)
        for part in (sampler.colptr_dict[edge_type], sampler.row_dict[edge_type])
    ]


def check_state(state: Any, loader: CheckpointedLoader, hot_vertices: Any) -> None:
    """Raises a :class:`ValueError` naming the key unless ``state`` fits ``loader``.

    Checks the keys, the type and range of every value, and that the
    checkpoint was made for ``loader``'s graph and arguments. Changes nothing,
    so a refused checkpoint leaves the loader as it was.

    Args:
        state: what ``load_state_dict`` was given.
        loader: the loader to restore.
        hot_vertices: its :class:`~pyg_orch.hot.vertices.HotVertices`, which checks
            the saved ``hot_ratio`` and knows the ``cache`` argument
            ``loader`` was built with.

    Example:
        >>> from pyg_orch import OrchNeighborLoader
        >>> from pyg_orch.datasets import load_cora
        >>> loader = OrchNeighborLoader(load_cora(), [5], batch_size=64)
        >>> hot_vertices = loader._hot_vertices
        >>> check_state({**loader.state_dict(), "hot_ratio": 2.0}, loader, hot_vertices)
        Traceback (most recent call last):
        ...
        ValueError: checkpoint key 'hot_ratio' must be a fraction of the vertices in [0, 1], got 2.0; 0 turns the hot/cold split off
    """  # noqa: E501 - a doctest's output is one line
    _check_keys(state, STATE_KEYS, "the checkpoint")
    _check_identity(state["identity"], loader_identity(loader))
    # Every form the constructor takes: a fraction, or a dict by node type.
    hot_vertices.check_ratio(state["hot_ratio"], _key("hot_ratio"))
    num_hot = _check_hot_set(state, loader.data.num_nodes)
    mode = state["cache_mode"]
    chosen = hot_vertices.mode
    _check_cache(mode, state["cache_values"], num_hot, loader.features, chosen)
    if state["position"] is not None:
        _check_position(state["position"], loader, mode)


def _check_keys(mapping: Any, keys: tuple[str, ...], where: str) -> None:
    if not isinstance(mapping, dict):
        raise ValueError(
            f"{where} must be a dict (from OrchNeighborLoader.state_dict()), got "
            f"{type(mapping).__name__}"
        )
    missing = [key for key in keys if key not in mapping]
    unknown = [key for key in mapping if key not in keys]
    wrong = [
        f"{what} {found}"
        for what, found in (("lacks the keys", missing), ("has unknown keys", unknown))
        if found
    ]
    if wrong:
        raise ValueError(
            f"{where} {' and '.join(wrong)}; was it saved by "
            f"OrchNeighborLoader.state_dict() of this version of pyg_orch?"
        )


def _check_identity(saved: Any, identity: dict[str, Any]) -> None:
    _check_keys(saved, tuple(identity), _key("identity"))
    for key, value in identity.items():
        if type(saved[key]) is not type(value) or saved[key] != value:
            raise ValueError(
                f"{_key(f'identity.{key}')} is {saved[key]!r}, but this loader's "
                f"is {value!r}: the checkpoint was saved by a loader of another "
                f"graph or with other arguments; build this one with the graph "
                f"and the arguments of the saved one"
            )


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
    if not _one_of(state["hot_method"], (*HOT_METHODS, _GIVEN)):
        raise ValueError(
            f"{_key('hot_method')} must be one of {(*HOT_METHODS, _GIVEN)}, got "
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


def _check_position(position: Any, loader: CheckpointedLoader, mode: Any) -> None:
    _check_keys(position, POSITION_KEYS, _key("position"))
    dynamic = mode in ("resample", "embedding")
    if not (loader.prefetch > 0 or loader.device is not None or dynamic):
        raise ValueError(
            f"{_key('position')} holds an unfinished epoch, but this loader runs "
            f"without its pipeline (prefetch=0, no device, static hot values): "
            f"its batches come from the global generator, as NeighborLoader's, "
            f"and cannot resume mid-epoch. Build it with the prefetch and device "
            f"of the saved one"
        )
    jobs = position["jobs"]
    _check_jobs(jobs, loader.batch_size, loader.num_inputs)
    _check_int(position["next"], len(jobs), "position.next", " (the epoch's batches)")
    try:
        torch.Generator().set_state(position["generator_state"])
    except (TypeError, RuntimeError) as error:
        raise ValueError(
            f"{_key('position.generator_state')} is not the state of a "
            f"torch.Generator ({error})"
        ) from None
    _check_int(position["refresh_seed"], 2**62, "position.refresh_seed")
    _check_refreshes(position["refreshes"], position["next"], loader.super_batch, mode)


def _check_int(value: Any, end: int, key: str, what: str = "") -> None:
    if not is_int(value) or not 0 <= value < end:
        raise ValueError(
            f"{_key(key)} must be an int in [0, {end}){what}, got {value!r}"
        )


def _check_jobs(jobs: Any, batch_size: int | None, num_inputs: int) -> None:
    # Each batch holds indices into the loader's input nodes; a loader given
    # a batch_sampler has no batch_size.
    most = num_inputs if batch_size is None else batch_size
    if not (
        isinstance(jobs, list)
        and jobs
        and all(isinstance(job, list) and 0 < len(job) <= most for job in jobs)
    ):
        raise ValueError(
            f"{_key('position.jobs')} must be a non-empty list of batches, each a "
            f"non-empty list of at most {most} seed indices (the batch size)"
        )
    for job in jobs:
        for index in job:
            if not is_int(index) or not 0 <= index < num_inputs:
                raise ValueError(
                    f"{_key('position.jobs')} holds the seed index {index!r}, but "
                    f"this loader has {num_inputs} input nodes"
                )


def _check_refreshes(refreshes: Any, start: int, super_batch: int, mode: Any) -> None:
    # The hot buffers started before the interruption that the rest of the
    # epoch reads: those of the batch at `start` and the next super-batch.
    if not isinstance(refreshes, dict):
        raise ValueError(
            f"{_key('position.refreshes')} must be a dict, got {_describe(refreshes)}"
        )
    if refreshes and mode not in ("resample", "embedding"):
        raise ValueError(
            f"{_key('position.refreshes')} holds re-made hot buffers, but "
            f"cache_mode is {mode!r}, which makes none"
        )
    first = start // super_batch
    for version, started in refreshes.items():
        key = f"position.refreshes[{version!r}]"
        if not is_int(version) or version not in (first, first + 1):
            raise ValueError(
                f"{_key(key)}: the batch at position.next={start} reads hot "
                f"buffer {first} or {first + 1}, with super_batch={super_batch}"
            )
        if not (isinstance(started, tuple) and len(started) == 2):
            raise ValueError(
                f"{_key(key)} must be a pair (step, weights), got {_describe(started)}"
            )
        _check_int(started[0], start, key + "[0]", " (steps before position.next)")
        weights = started[1]
        if mode == "resample" and weights is not None:
            raise ValueError(f"{_key(key + '[1]')} must be None in resample mode")
        if mode == "embedding" and not (
            isinstance(weights, dict)
            and all(isinstance(value, Tensor) for value in weights.values())
        ):
            raise ValueError(
                f"{_key(key + '[1]')} must be the bottom layer's state_dict() in "
                f"embedding mode, got {_describe(weights)}"
            )


def _empty(value: Any) -> bool:
    return value is None or (isinstance(value, dict) and not value)


def _one_of(value: Any, options: tuple[str, ...]) -> bool:
    return isinstance(value, str) and value in options


def _describe(value: Any) -> str:
    if isinstance(value, Tensor):
        return f"a {value.dtype} tensor of shape {tuple(value.shape)}"
    return repr(value) if len(repr(value)) <= 80 else type(value).__name__
