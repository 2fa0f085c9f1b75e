"""Training beyond one process: the distributed wing.

* :mod:`~pyg_orch.distributed.replicated`: data-parallel training where every
  machine holds the whole graph once (shared memory per machine, DDP).
* :mod:`~pyg_orch.distributed.partition` (with
  :mod:`~pyg_orch.distributed.metis`): a graph split across machines with
  METIS, in PyG's partition format, its hot vertices replicated; its parts
  range-numbered (:mod:`~pyg_orch.distributed.ranges`).
* :mod:`~pyg_orch.distributed.engine`: PyG's ``torch_geometric.distributed``
  without pyg-lib (:mod:`~pyg_orch.distributed.pyg_lib_ops`), its bugs worked
  around, and pyg_orch's sampler on it; importing this package calls
  :func:`~pyg_orch.distributed.engine.fixes.install`.
* :mod:`~pyg_orch.distributed.loaders`: PyG's distributed loaders with the hot
  vertices served on every machine
  (:mod:`~pyg_orch.distributed.hot_store`);
  :mod:`~pyg_orch.distributed.launch`
  runs one process per partition.

Example:
    >>> import torch
    >>> from pyg_orch.distributed import shard_seeds
    >>> shard_seeds(torch.arange(6), rank=1, world_size=2, epoch=0, seed=0).numel()
    3
"""

from pyg_orch.distributed.engine import OrchDistNeighborSampler, install
from pyg_orch.distributed.hot_store import HotFeatureStore, load_partition
from pyg_orch.distributed.launch import agreed_port, process_group, spawn_ranks
from pyg_orch.distributed.loaders import (
    OrchDistLinkNeighborLoader,
    OrchDistNeighborLoader,
)
from pyg_orch.distributed.metis import metis_binding, metis_parts
from pyg_orch.distributed.partition import PartitionInfo, partition_graph, split_seeds
from pyg_orch.distributed.ranges import (
    PartitionIds,
    load_splits,
    original_ids,
    partition_ids,
)
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
    "HotFeatureStore",
    "OrchDistLinkNeighborLoader",
    "OrchDistNeighborLoader",
    "OrchDistNeighborSampler",
    "PartitionIds",
    "PartitionInfo",
    "SharedGraph",
    "agreed_port",
    "batches_per_rank",
    "broadcast_hot",
    "distributed_loader",
    "exit_without_teardown",
    "init_distributed",
    "install",
    "load_partition",
    "load_splits",
    "metis_binding",
    "metis_parts",
    "original_ids",
    "partition_graph",
    "partition_ids",
    "process_group",
    "remove_orphans",
    "shard_seeds",
    "share_graph",
    "share_tensors",
    "spawn_ranks",
    "split_seeds",
    "wrap_model",
]

install()
