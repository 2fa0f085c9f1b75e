"""What identifies a loader in its checkpoint, and the check of a checkpoint.

``loader.state_dict()`` records what identifies the graph and the loader
(:func:`loader_identity`) beside the hot part
(:meth:`~pyg_orch.hot.vertices.HotVertices.state`) and the epoch position
(:meth:`~pyg_orch.loading.epoch.Epochs.position`); ``loader.load_state_dict()``
runs :func:`check_state` before it changes anything: the identity here, the
hot part by :meth:`~pyg_orch.hot.vertices.HotVertices.check_state`, the
position by :func:`~pyg_orch.loading.epoch.check_position`, each beside what
it checks. A checkpoint of another graph,
of a loader built with other arguments, or edited by hand is then refused with
a :class:`ValueError` that names the key and both values, instead of serving
another graph's hot values or failing in a thread in the middle of the epoch.
"""

from __future__ import annotations

import hashlib
from typing import Any, Protocol

import torch
from torch import Tensor

from pyg_orch.checks import check_keys
from pyg_orch.checks import checkpoint_key as _key
from pyg_orch.hot.state import HOT_STATE_KEYS
from pyg_orch.loading.epoch import check_position


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


#: The keys of a loader's state (its identity, the hot part, the position).
STATE_KEYS = ("identity", *HOT_STATE_KEYS, "position")
# Rows a fingerprint reads from each tensor: enough to tell graphs apart, few
# enough that checkpointing a billion-edge graph costs nothing.
_FINGERPRINT_ROWS = 64


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
    check_keys(state, STATE_KEYS, "the checkpoint")
    _check_identity(state["identity"], loader_identity(loader))
    hot_vertices.check_state(state, loader.data.num_nodes)
    if state["position"] is not None:
        check_position(
            state["position"],
            pipelined=loader.prefetch > 0 or loader.device is not None,
            batch_size=loader.batch_size,
            num_inputs=loader.num_inputs,
            super_batch=loader.super_batch,
            mode=state["cache_mode"],
        )


def _check_identity(saved: Any, identity: dict[str, Any]) -> None:
    check_keys(saved, tuple(identity), _key("identity"))
    for key, value in identity.items():
        if type(saved[key]) is not type(value) or saved[key] != value:
            raise ValueError(
                f"{_key(f'identity.{key}')} is {saved[key]!r}, but this loader's "
                f"is {value!r}: the checkpoint was saved by a loader of another "
                f"graph or with other arguments; build this one with the graph "
                f"and the arguments of the saved one"
            )
