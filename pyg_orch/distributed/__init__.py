"""Training beyond one process: the distributed wing.

* :mod:`pyg_orch.distributed.replicated`: data-parallel training where every
  machine holds the whole graph once (shared memory per machine, DDP).
* :mod:`pyg_orch.distributed.engine`: PyG's ``torch_geometric.distributed``
  without pyg-lib; importing this package calls its :func:`install`.

Example:
    >>> import torch
    >>> from pyg_orch.distributed import shard_seeds
    >>> shard_seeds(torch.arange(6), rank=1, world_size=2, epoch=0, seed=0).numel()
    3
"""

from pyg_orch.distributed.engine import install
from pyg_orch.distributed.replicated import (
    DistributedContext,
    SharedGraph,
    batches_per_rank,
    broadcast_hot,
    distributed_loader,
    exit_without_teardown,
    init_distributed,
    remove_orphans,
    shard_seeds,
    share_graph,
    share_tensors,
    wrap_model,
)

__all__ = [
    "DistributedContext",
    "SharedGraph",
    "batches_per_rank",
    "broadcast_hot",
    "distributed_loader",
    "exit_without_teardown",
    "init_distributed",
    "install",
    "remove_orphans",
    "shard_seeds",
    "share_graph",
    "share_tensors",
    "wrap_model",
]

install()
