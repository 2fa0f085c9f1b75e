"""Training beyond one process: the distributed wing.

* :mod:`pyg_orch.distributed.replicated`: data-parallel training where every
  machine holds the whole graph once (shared memory per machine, DDP).
* :mod:`pyg_orch.distributed.metis`: METIS with several balance constraints.
* :mod:`pyg_orch.distributed.partition`: a graph partitioned with them, in
  PyG's on-disk format, with its hot vertices; the seeds split per trainer.

Example:
    >>> import torch
    >>> from pyg_orch.distributed import shard_seeds
    >>> shard_seeds(torch.arange(6), rank=1, world_size=2, epoch=0, seed=0).numel()
    3
"""

from pyg_orch.distributed.metis import metis_binding, metis_parts
from pyg_orch.distributed.partition import PartitionInfo, partition_graph, split_seeds
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
    "PartitionInfo",
    "SharedGraph",
    "batches_per_rank",
    "broadcast_hot",
    "distributed_loader",
    "exit_without_teardown",
    "init_distributed",
    "metis_binding",
    "metis_parts",
    "partition_graph",
    "remove_orphans",
    "shard_seeds",
    "split_seeds",
    "share_graph",
    "share_tensors",
    "wrap_model",
]
