"""Every contact of pyg_orch with PyG's distributed internals, in one package.

PyG's ``torch_geometric.distributed`` (tested with ``TESTED_PYG``) runs
here without pyg-lib.

* :mod:`~pyg_orch.distributed.engine.fixes` holds
  :func:`~pyg_orch.distributed.engine.fixes.install`, called by ``import
  pyg_orch.distributed``, which registers pyg-lib's four ops
  (:mod:`~pyg_orch.distributed.pyg_lib_ops`) and works around PyG's bugs,
  each only while PyG has it, each in its own function.
* :mod:`~pyg_orch.distributed.engine.sampler` holds
  :class:`~pyg_orch.distributed.engine.sampler.OrchDistNeighborSampler`,
  PyG's sampler with pyg_orch's changes.
* :mod:`~pyg_orch.distributed.engine.books` gives PyG's stores and sampler
  a range-numbered partition's boundaries where they keep maps of the
  whole graph.
* :mod:`~pyg_orch.distributed.engine.memory` finds every tensor PyG's
  stores hold, for the memory benchmark.

Every name of the first two is importable from here.
"""

from pyg_orch.distributed.engine.fixes import (
    STACK_LEVEL_MODULES,
    TESTED_PYG,
    check_pyg_version,
    defaultdict_load_bug,
    empty_relation_bug,
    empty_type_features_bug,
    fill_empty_features,
    fix_early_requests,
    fix_empty_relations,
    fix_empty_types,
    fix_hetero_columns,
    fix_negative_sampling,
    fix_partition_load,
    fix_rpc_under_torchrun,
    fix_stack_level,
    install,
    negative_endpoint_bug,
    plain_dicts,
    stack_level_bug,
    use_type_ids,
)
from pyg_orch.distributed.engine.sampler import (
    LastHopFanout,
    OrchDistNeighborSampler,
    SamplingFailed,
    mark_last_hop,
)

__all__ = [
    "STACK_LEVEL_MODULES",
    "TESTED_PYG",
    "LastHopFanout",
    "OrchDistNeighborSampler",
    "SamplingFailed",
    "check_pyg_version",
    "defaultdict_load_bug",
    "empty_relation_bug",
    "empty_type_features_bug",
    "fill_empty_features",
    "fix_early_requests",
    "fix_empty_relations",
    "fix_empty_types",
    "fix_hetero_columns",
    "fix_negative_sampling",
    "fix_partition_load",
    "fix_rpc_under_torchrun",
    "fix_stack_level",
    "install",
    "mark_last_hop",
    "negative_endpoint_bug",
    "plain_dicts",
    "stack_level_bug",
    "use_type_ids",
]
