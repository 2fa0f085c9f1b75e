"""Data-parallel training, the graph replicated once per machine.

Every rank trains the same model on its own shard of the training seeds and
:class:`~torch.nn.parallel.DistributedDataParallel` averages the gradients, so
the replicas stay identical. The graph is replicated per *machine*, not per
rank: local rank 0 of each machine builds the CSC adjacency, the features and
the static hot values once and writes them to files in ``/dev/shm``; the other
local ranks map the same pages (:func:`torch.from_file` with ``shared=True``).
That works with ``torchrun``, whose ranks are separate processes rather than
forks of one parent. The hot set is chosen once, on global rank 0, and
broadcast, so every rank stops expanding the same vertices.

Example:
    >>> seeds = torch.arange(10)
    >>> [shard_seeds(seeds, rank, 3, epoch=0, seed=0).numel() for rank in range(3)]
    [4, 3, 3]
"""

from __future__ import annotations

import fcntl
import glob
import json
import multiprocessing.util
import os
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch import Tensor
from torch.nn.parallel import DistributedDataParallel
from torch_geometric.data import Data
from torch_geometric.nn.models.basic_gnn import BasicGNN

from pyg_orch.hot.cache import HotCache
from pyg_orch.loading.node_loader import OrchNeighborLoader
from pyg_orch.nn.model import OrchModel
from pyg_orch.sampling import OrchNeighborSampler

__all__ = [
    "DistributedContext",
    "SharedGraph",
    "batches_per_rank",
    "broadcast_hot",
    "distributed_loader",
    "exit_without_teardown",
    "init_distributed",
    "remove_orphans",
    "shard_seeds",
    "share_graph",
    "share_tensors",
    "wrap_model",
]

#: Where the per-machine shared tensors live (a tmpfs on Linux).
SHM_DIR = Path("/dev/shm")
#: The start of every file name pyg_orch puts there.
SHM_PREFIX = "pyg_orch-"


def _as_index(input_nodes: Tensor) -> Tensor:
    if input_nodes.dtype == torch.bool:
        return input_nodes.nonzero().view(-1)
    return input_nodes.to(torch.long).view(-1)


def shard_seeds(
    input_nodes: Tensor, rank: int, world_size: int, epoch: int, seed: int
) -> Tensor:
    """This rank's shard of the training seeds for ``epoch``.

    Like :class:`torch.utils.data.DistributedSampler`, every rank draws the
    same permutation (from ``seed + epoch``, so it changes every epoch) and
    takes every ``world_size``-th entry from position ``rank``. Nothing is
    padded and nothing dropped: the shards are disjoint, their union is the
    training set, and their sizes differ by at most one.
    :func:`batches_per_rank` then gives every rank the same number of batches.

    Args:
        input_nodes: the training nodes, as indices or a boolean mask.
        rank: this process's global rank.
        world_size: the number of ranks.
        epoch: the epoch; each one reshuffles.
        seed: the seed every rank shares.

    Returns:
        The node ids of this rank's shard, in this epoch's random order.

    Example:
        >>> seeds = torch.arange(7)
        >>> shards = [shard_seeds(seeds, r, 2, epoch=1, seed=0) for r in range(2)]
        >>> sorted(torch.cat(shards).tolist())
        [0, 1, 2, 3, 4, 5, 6]
    """
    if world_size < 1 or not 0 <= rank < world_size:
        raise ValueError(f"need 0 <= rank < world_size, got {rank}, {world_size}")
    nodes = _as_index(input_nodes)
    generator = torch.Generator()
    generator.manual_seed(seed + epoch)
    order = torch.randperm(nodes.numel(), generator=generator)
    return nodes[order[rank::world_size]]


def batches_per_rank(num_seeds: int, world_size: int, batch_size: int) -> int:
    """The number of batches (and optimizer steps) every rank runs per epoch.

    The largest shard, cut into ``batch_size`` seeds, sets it; each rank then
    cuts its own shard into that many batches of near-equal size (at most
    ``batch_size`` seeds), so every rank runs the same number of steps and
    no rank waits in an all-reduce the others never enter.

    Example:
        >>> batches_per_rank(140, 2, 32)
        3
    """
    largest = -(-num_seeds // world_size)
    return max(1, -(-largest // batch_size))


@dataclass
class DistributedContext:
    """Where this process sits: global and local rank, sizes and device.

    Example:
        >>> DistributedContext(0, 1, 0, 1, torch.device("cpu")).is_local_leader
        True
    """

    rank: int
    world_size: int
    local_rank: int
    local_world_size: int
    device: torch.device

    @property
    def is_local_leader(self) -> bool:
        """Whether this rank builds the machine's shared tensors."""
        return self.local_rank == 0


def init_distributed(backend: str | None = None) -> DistributedContext:
    """Joins the process group ``torchrun`` (or the test) describes in the env.

    Reads ``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``, ``LOCAL_WORLD_SIZE``,
    ``MASTER_ADDR`` and ``MASTER_PORT``. The backend is ``nccl`` with CUDA and
    ``gloo`` without, unless given.

    Example:
        >>> context = init_distributed()  # doctest: +SKIP
    """
    rank = int(os.environ.get("RANK", 0))
    world_size = int(os.environ.get("WORLD_SIZE", 1))
    local_rank = int(os.environ.get("LOCAL_RANK", 0))
    local_world_size = int(os.environ.get("LOCAL_WORLD_SIZE", world_size))
    cuda = torch.cuda.is_available()
    backend = backend or ("nccl" if cuda else "gloo")
    if cuda and backend == "nccl":
        device = torch.device("cuda", local_rank)
        torch.cuda.set_device(device)
    else:
        device = torch.device("cpu")
    if not dist.is_initialized():
        dist.init_process_group(backend, rank=rank, world_size=world_size)
    return DistributedContext(rank, world_size, local_rank, local_world_size, device)


def _barrier(context: DistributedContext) -> None:
    if context.device.type == "cuda":
        dist.barrier(device_ids=[context.device.index])
    else:
        dist.barrier()


def _run_id(context: DistributedContext) -> str:
    # One name for the whole job, so every rank finds the same files.
    name = [uuid.uuid4().hex if context.rank == 0 else None]
    dist.broadcast_object_list(name, src=0)
    return str(name[0])


def share_tensors(
    tensors: dict[str, Tensor] | None,
    context: DistributedContext,
    name: str,
    folder: Path = SHM_DIR,
) -> dict[str, Tensor]:
    """Places tensors in one machine's shared memory, once per machine.

    The local leader passes ``tensors``; it writes each to
    ``folder/pyg_orch-{name}.{key}`` (mapped with :func:`torch.from_file`,
    ``shared=True``) and the shapes to ``folder/pyg_orch-{name}.json``.
    After a barrier the other local ranks (passing ``None``) map the same
    files; after a second barrier, when every rank has mapped them, the
    leader unlinks them, so nothing is left behind while every rank keeps
    its mapping. The leader unlinks them on an error too, and holds a lock
    on ``folder/pyg_orch-{name}.lock`` meanwhile: files whose lock nobody
    holds belong to a launch that died, and the next leader on the machine
    removes them first (:func:`remove_orphans`). The returned tensors are
    views of the shared pages: they count as shared, not private, memory.

    Example:
        >>> tensors = {"x": torch.ones(2, 2)}  # on the local leader, else None
        >>> shared = share_tensors(tensors, context, "run")  # doctest: +SKIP
    """
    stem = folder / f"{SHM_PREFIX}{name}"
    if not context.is_local_leader:
        _barrier(context)  # the leader has written the files
        shared = _map_files(stem)
        _barrier(context)  # every local rank has mapped them
        return shared
    if tensors is None:
        raise ValueError("the local leader must pass the tensors to share")
    remove_orphans(folder)
    with _owned_files(stem):
        shared = _write_files(tensors, stem)
        _barrier(context)
        _barrier(context)
    return shared


def remove_orphans(folder: Path = SHM_DIR) -> list[str]:
    """Removes the shared files of launches that died while sharing.

    A rank killed mid-share (out of memory, ``torchrun`` stopping the job)
    never reaches the unlink in :func:`share_tensors`, and tmpfs files
    outlive their processes. Each share's leader holds an ``flock`` on its
    ``.lock`` file, which the kernel drops however the process ends; a lock
    this call can take marks a dead share. Shares still running keep their
    lock and are left alone, even those of another container that shares
    ``/dev/shm`` (whose pids would not be visible here).

    Args:
        folder: where the shares live.

    Returns:
        The names of the shares removed.

    Example:
        >>> import tempfile
        >>> remove_orphans(Path(tempfile.mkdtemp()))  # default: /dev/shm
        []
    """
    removed = []
    for lock in sorted(folder.glob(f"{SHM_PREFIX}*.lock")):
        if _owner_is_gone(lock):
            stem = lock.with_suffix("")
            _unlink_share(stem)
            removed.append(stem.name)
    return removed


def _owner_is_gone(lock: Path) -> bool:
    try:
        fd = os.open(lock, os.O_RDWR)
    except OSError:  # gone already, or another user's
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    else:
        # Empty: its leader has just created it and is about to lock it.
        return os.fstat(fd).st_size > 0
    finally:
        os.close(fd)


@contextmanager
def _owned_files(stem: Path) -> Iterator[None]:
    """Holds the share's lock while its files exist; unlinks them on exit."""
    lock = os.open(f"{stem}.lock", os.O_CREAT | os.O_RDWR, 0o600)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
        os.write(lock, f"{os.getpid()}\n".encode())  # for whoever looks
        yield
    finally:
        _unlink_share(stem)
        os.close(lock)


def _unlink_share(stem: Path) -> None:
    for path in stem.parent.glob(f"{glob.escape(stem.name)}.*"):
        path.unlink(missing_ok=True)


def _write_files(tensors: dict[str, Tensor], stem: Path) -> dict[str, Tensor]:
    shared, meta = {}, {}
    for key, tensor in tensors.items():
        mapped = _map(Path(f"{stem}.{key}"), tensor.dtype, tensor.numel())
        mapped.copy_(tensor.reshape(-1))
        shared[key] = mapped.view(tensor.shape)
        meta[key] = [str(tensor.dtype).removeprefix("torch."), list(tensor.shape)]
    Path(f"{stem}.json").write_text(json.dumps(meta))
    return shared


def _map_files(stem: Path) -> dict[str, Tensor]:
    shared = {}
    for key, (dtype, shape) in json.loads(Path(f"{stem}.json").read_text()).items():
        numel = int(torch.Size(shape).numel())
        mapped = _map(Path(f"{stem}.{key}"), getattr(torch, dtype), numel)
        shared[key] = mapped.view(shape)
    return shared


def _map(path: Path, dtype: torch.dtype, numel: int) -> Tensor:
    if numel == 0:
        path.touch()
        return torch.empty(0, dtype=dtype)
    return torch.from_file(str(path), shared=True, size=numel, dtype=dtype)


@dataclass
class SharedGraph:
    """A graph whose CSC, features and labels every local rank shares.

    Attributes:
        data: a :class:`~torch_geometric.data.Data` with ``x``, ``y``, the
            masks, and ``edge_index`` sorted by target (views of shared
            memory).
        colptr: the CSC column pointers (shared).
        row: the CSC row indices (shared; ``data.edge_index[0]``).

    Example:
        >>> graph = share_graph(load_cora, context)  # doctest: +SKIP
        >>> graph.data.x.is_shared()  # doctest: +SKIP
    """

    data: Data
    colptr: Tensor
    row: Tensor

    def sampler(self, num_neighbors: list[int], **kwargs: Any) -> OrchNeighborSampler:
        """An :class:`~pyg_orch.OrchNeighborSampler` over the shared CSC.

        Example:
            >>> sampler = graph.sampler([10, 5])  # doctest: +SKIP
        """
        sampler = OrchNeighborSampler(
            self.data, num_neighbors, is_sorted=True, **kwargs
        )
        # The sampler's own colptr is a private copy: point it at the shared one.
        sampler.colptr, sampler.row = self.colptr, self.row
        return sampler


def share_graph(
    build: Any, context: DistributedContext, name: str | None = None
) -> SharedGraph:
    """Builds the graph on each machine's local rank 0 and shares it there.

    ``build()`` (called on local rank 0 only) returns a
    :class:`~torch_geometric.data.Data`; its edges are sorted into CSC order,
    and the CSC and every other tensor of the graph (``x``, ``y``, the masks,
    edge attributes in CSC order) go to shared memory through
    :func:`share_tensors`.

    Args:
        build: a function of no arguments that returns the graph.
        context: from :func:`init_distributed`.
        name: the files' name in ``/dev/shm``, after ``pyg_orch-``
            (default: a fresh one).

    Example:
        >>> from pyg_orch.datasets import load_cora
        >>> graph = share_graph(load_cora, context)  # doctest: +SKIP
    """
    name = name or _run_id(context)
    tensors = None
    if context.is_local_leader:
        data = build()
        num_nodes = data.num_nodes
        row, col = data.edge_index.to(torch.long)
        order = torch.argsort(col * num_nodes + row)
        row, col = row[order], col[order]
        colptr = torch.zeros(num_nodes + 1, dtype=torch.long)
        colptr[1:] = torch.cumsum(torch.bincount(col, minlength=num_nodes), 0)
        # One (2, E) buffer, so that row = edge_index[0] is a view of it.
        tensors = {"edge_index": torch.stack([row, col]), "colptr": colptr}
        for key, value in data.items():
            if key != "edge_index" and isinstance(value, Tensor):
                # Edge attributes follow their edges into CSC order.
                tensors[key] = value[order] if data.is_edge_attr(key) else value
        del data, row, col, order
    shared = share_tensors(tensors, context, name)
    colptr = shared.pop("colptr")
    data = Data(**shared)
    data.num_nodes = colptr.numel() - 1
    return SharedGraph(data, colptr, data.edge_index[0])


def broadcast_hot(
    graph: SharedGraph,
    context: DistributedContext,
    num_neighbors: list[int],
    input_nodes: Tensor,
    hot_ratio: float,
    kind: str = "mean",
    hot_method: str = "presample",
    batch_size: int = 512,
    seed: int = 0,
) -> tuple[Tensor, dict[str, Tensor]]:
    """Chooses the hot set once, on global rank 0, and shares its values.

    Rank 0 chooses the hot vertices over the whole training set (as a
    one-process :class:`~pyg_orch.OrchNeighborLoader` would) and broadcasts
    their ids, so every rank stops expanding the same vertices. The local
    leader of each machine then computes their static ``kind`` aggregates
    once and shares them through :func:`share_tensors`.

    Returns:
        The hot node ids and ``{kind: values}`` (shared memory), for
        :func:`distributed_loader`.

    Example:
        >>> hot, values = broadcast_hot(graph, context, [10, 5],
        ...                             graph.data.train_mask, 0.2)  # doctest: +SKIP
    """
    box: list[Any] = [None]
    if context.rank == 0:
        torch.manual_seed(seed)
        loader = OrchNeighborLoader(
            graph.data, num_neighbors, hot_ratio=hot_ratio, hot_method=hot_method,
            input_nodes=_as_index(input_nodes), batch_size=batch_size,
            neighbor_sampler=graph.sampler(num_neighbors),
        )  # fmt: skip
        box[0] = loader.hot.nodes if loader.hot is not None else torch.empty(0)
        del loader
    dist.broadcast_object_list(box, src=0)
    hot = box[0].to(torch.long)
    values = None
    if context.is_local_leader:
        cache = HotCache(graph.colptr, graph.row, graph.data.x, hot)
        values = {kind: cache.values(kind)}
    name = f"hot-{_run_id(context)}"
    return hot, share_tensors(values, context, name)


def distributed_loader(
    graph: SharedGraph,
    context: DistributedContext,
    num_neighbors: list[int],
    input_nodes: Tensor,
    epoch: int,
    batch_size: int,
    seed: int = 0,
    hot: Tensor | None = None,
    hot_values: dict[str, Tensor] | None = None,
    sampler: OrchNeighborSampler | None = None,
    **kwargs: Any,
) -> OrchNeighborLoader:
    """This rank's :class:`~pyg_orch.OrchNeighborLoader` for one epoch.

    Make one per epoch (it is cheap: the sampler and the shared graph are
    reused): the shard comes from :func:`shard_seeds` with ``epoch``, and it
    is cut into :func:`batches_per_rank` batches of near-equal size, so every
    rank runs the same number of steps. With ``hot`` and ``hot_values`` (from
    :func:`broadcast_hot`) the loader serves the shared static hot values
    instead of computing its own.

    Args:
        graph: from :func:`share_graph`.
        context: from :func:`init_distributed`.
        num_neighbors: fan-outs, one per layer.
        input_nodes: all training nodes (indices or mask); sharded here.
        epoch: the epoch, which picks the shuffle.
        batch_size: most seeds per batch.
        seed: the shuffle seed every rank shares.
        hot: the hot node ids, the same on every rank.
        hot_values: ``{kind: values}`` for ``hot``; the kind must be the
            bottom conv's (:func:`pyg_orch.nn.convs.cache_kind`).
        sampler: a sampler to reuse (default: ``graph.sampler(num_neighbors)``).
        **kwargs: other :class:`~pyg_orch.OrchNeighborLoader` arguments
            (``prefetch``, ``device``, ...), not ``batch_size``/``shuffle``.

    Example:
        >>> loader = distributed_loader(graph, context, [10, 5],
        ...                             graph.data.train_mask, epoch=0,
        ...                             batch_size=64)  # doctest: +SKIP
    """
    seeds = _as_index(input_nodes)
    shard = shard_seeds(seeds, context.rank, context.world_size, epoch, seed)
    batches = batches_per_rank(seeds.numel(), context.world_size, batch_size)
    positions = torch.arange(shard.numel()).tensor_split(batches)
    loader = OrchNeighborLoader(
        graph.data,
        num_neighbors,
        hot=hot if hot is not None and hot.numel() > 0 else None,
        cache="static" if hot is not None and hot.numel() > 0 else None,
        input_nodes=shard,
        batch_sampler=[batch.tolist() for batch in positions],
        neighbor_sampler=sampler or graph.sampler(num_neighbors),
        **kwargs,
    )
    if loader.cache is not None and hot_values:
        loader.cache.restore(hot_values)
        loader.serve(next(iter(hot_values)))
    return loader


def wrap_model(model: BasicGNN, context: DistributedContext) -> DistributedDataParallel:
    """``OrchModel(model)`` on this rank's device, wrapped in DDP.

    The rank's loader (from :func:`distributed_loader`) delivers the hot
    values with each batch, so the model needs no loader here. DDP
    broadcasts rank 0's initial parameters and averages the gradients of
    every step (gloo on CPU, nccl on CUDA).

    Example:
        >>> from torch_geometric.nn import GraphSAGE
        >>> ddp = wrap_model(GraphSAGE(1433, 64, num_layers=2, out_channels=7),
        ...                  context)  # doctest: +SKIP
    """
    orch = OrchModel(model).to(context.device)
    device_ids = [context.device.index] if context.device.type == "cuda" else None
    return DistributedDataParallel(orch, device_ids=device_ids)


def exit_without_teardown() -> None:
    """Ends a spawned rank at once, skipping the gloo process group's teardown.

    ``ProcessGroupGloo``'s destructor joins its worker threads while holding
    the GIL, and a worker still freeing the last collective's Python-owned
    tensors waits for the GIL: a deadlock, seen here in about one run in ten.
    A rank whose results are saved loses nothing by exiting without it.

    Call it last in a spawned rank's function, after its results are saved
    and a final :func:`torch.distributed.barrier`. The exit handler of
    ``multiprocessing`` still runs, as on a normal exit.

    Example:
        >>> dist.barrier()  # doctest: +SKIP
        >>> exit_without_teardown()  # doctest: +SKIP
    """
    sys.stdout.flush()
    sys.stderr.flush()
    # What a spawned process runs when its function returns: it unlinks the
    # semaphores this process made (tqdm's lock, when a rank presamples hot
    # vertices) and unregisters them, or the resource tracker warns of
    # "leaked semaphore objects" at shutdown.
    multiprocessing.util._exit_function()
    os._exit(0)
