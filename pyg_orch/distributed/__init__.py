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

from typing import TYPE_CHECKING

from pyg_orch.distributed.engine import OrchDistNeighborSampler, install
from pyg_orch.lazy_names import lazy_names

if TYPE_CHECKING:
    from pyg_orch.distributed.hot_store import (
        HotFeatureStore,
        load_partition,
    )
    from pyg_orch.distributed.launch import (
        agreed_port,
        process_group,
        spawn_ranks,
    )
    from pyg_orch.distributed.loaders import (
        OrchDistLinkNeighborLoader,
        OrchDistNeighborLoader,
    )
    from pyg_orch.distributed.metis import (
        metis_binding,
        metis_parts,
    )
    from pyg_orch.distributed.partition import (
        PartitionInfo,
        partition_graph,
        split_seeds,
    )
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

# Each public name and the module that defines it: loaded on first use, so that
# the engine (which torch_geometric.distributed needs, pyg_orch.backend) loads
# without the rest of pyg_orch.
_EXPORTS = {
    "DistributedContext": "pyg_orch.distributed.replicated",
    "HotFeatureStore": "pyg_orch.distributed.hot_store",
    "OrchDistLinkNeighborLoader": "pyg_orch.distributed.loaders",
    "OrchDistNeighborLoader": "pyg_orch.distributed.loaders",
    "PartitionIds": "pyg_orch.distributed.ranges",
    "PartitionInfo": "pyg_orch.distributed.partition",
    "SharedGraph": "pyg_orch.distributed.replicated",
    "agreed_port": "pyg_orch.distributed.launch",
    "batches_per_rank": "pyg_orch.distributed.replicated",
    "broadcast_hot": "pyg_orch.distributed.replicated",
    "distributed_loader": "pyg_orch.distributed.replicated",
    "exit_without_teardown": "pyg_orch.distributed.replicated",
    "init_distributed": "pyg_orch.distributed.replicated",
    "load_partition": "pyg_orch.distributed.hot_store",
    "load_splits": "pyg_orch.distributed.ranges",
    "metis_binding": "pyg_orch.distributed.metis",
    "metis_parts": "pyg_orch.distributed.metis",
    "original_ids": "pyg_orch.distributed.ranges",
    "partition_graph": "pyg_orch.distributed.partition",
    "partition_ids": "pyg_orch.distributed.ranges",
    "process_group": "pyg_orch.distributed.launch",
    "remove_orphans": "pyg_orch.distributed.replicated",
    "shard_seeds": "pyg_orch.distributed.replicated",
    "share_graph": "pyg_orch.distributed.replicated",
    "share_tensors": "pyg_orch.distributed.replicated",
    "spawn_ranks": "pyg_orch.distributed.launch",
    "split_seeds": "pyg_orch.distributed.partition",
    "wrap_model": "pyg_orch.distributed.replicated",
}


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


__getattr__, __dir__ = lazy_names("pyg_orch.distributed", _EXPORTS, globals())


install()
