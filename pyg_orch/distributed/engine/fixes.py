"""PyG's distributed engine without pyg-lib, its bugs worked around.

:func:`install`, called by ``import pyg_orch.distributed``:

* registers pyg-lib's four ops (:mod:`~pyg_orch.distributed.pyg_lib_ops`);
* works around PyG's bugs, each only while PyG has it, each in its own
  function, with a detector that ``tests/test_engine.py`` asserts (it fails
  when PyG fixes the bug): ``warn(..., stack_level=2)``, a ``TypeError`` on
  every construction of ``DistNeighborSampler``, ``DistNeighborLoader(
  dist_sampler=...)`` and ``DistLinkNeighborLoader``
  (:func:`fix_stack_level`); edge features saved as a ``defaultdict``,
  which ``torch.load(weights_only=True)`` refuses since torch 2.6
  (:func:`fix_partition_load`); negatives drawn without the ``endpoint``
  argument PyG 2.8 added (:func:`fix_negative_sampling`); heterogeneous
  CSCs without the columns of the last nodes (:func:`fix_hetero_columns`),
  or without any column when a part holds no edge of a relation
  (:func:`fix_empty_relations`); a part without a node of a type
  (:func:`fix_empty_types`); an RPC start that waits forever under
  ``torchrun`` (:func:`fix_rpc_under_torchrun`); a request that reaches a
  peer before its sampler is registered (:func:`fix_early_requests`).

The sampler's own fixes are applied by
:class:`~pyg_orch.distributed.engine.sampler.OrchDistNeighborSampler`
through :func:`fill_empty_features`.
"""

import collections
import functools
import importlib
import inspect
import io
import os
import pickle
import time
import warnings
from collections.abc import Callable
from typing import Any

import torch
import torch_geometric
import torch_geometric.distributed.dist_loader as _dist_loader
import torch_geometric.distributed.dist_neighbor_sampler as _dist_sampler
import torch_geometric.distributed.rpc as _dist_rpc
import torch_geometric.typing
from torch import Tensor
from torch_geometric.data.graph_store import EdgeLayout
from torch_geometric.distributed import (
    LocalFeatureStore,
    LocalGraphStore,
    Partitioner,
)

from pyg_orch.distributed.pyg_lib_ops import register_ops, warm_up

# The PyG versions this module is tested with; on others it warns once.
TESTED_PYG = ("2.8.0", "2.8.1")

# The modules of PyG 2.8.0-2.8.1 that call warn(..., stack_level=2).
STACK_LEVEL_MODULES = (
    "torch_geometric.distributed.dist_neighbor_sampler",
    "torch_geometric.distributed.dist_neighbor_loader",
    "torch_geometric.distributed.dist_link_neighbor_loader",
)

_version_warned = False
# What torchrun sets to make its workers' stores clients of its own.
_AGENT_STORE = "TORCHELASTIC_USE_AGENT_STORE"
# How long a request waits for its callee to be registered, in seconds.
_REGISTRATION_WAIT = 30.0


def _wrap_once(owner: Any, name: str, wrap: Callable[[Any], Any]) -> bool:
    # Replaces owner.name with wrap(owner.name), marked, unless a previous
    # install did: every fix of this module goes through here.
    current = getattr(owner, name)
    if getattr(current, "pyg_orch_fixed", False):
        return False
    wrapped = wrap(current)
    wrapped.pyg_orch_fixed = True
    setattr(owner, name, wrapped)
    return True


def stack_level_bug(module: Any) -> bool:
    """Whether ``module`` calls ``warn(..., stack_level=...)`` (PyG 2.8.0-2.8.1).

    Example:
        >>> import torch_geometric.distributed.dist_neighbor_loader as loader
        >>> stack_level_bug(loader)
        True
    """
    try:
        source = inspect.getsource(module)
    except (OSError, TypeError):
        return False
    return "stack_level=" in source


def _keyword_fixed(warn: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(warn)
    def fixed_warn(*args: Any, stack_level: int | None = None, **kwargs: Any):
        if stack_level is not None:
            kwargs.setdefault("stacklevel", stack_level + 1)
        return warn(*args, **kwargs)

    return fixed_warn


def fix_stack_level() -> list[str]:
    """Maps ``stack_level`` to ``stacklevel`` in the modules that misspell it.

    Replaces the module attribute ``warn`` of the three modules of
    ``STACK_LEVEL_MODULES`` whose source still calls ``warn(...,
    stack_level=2)``; the rest of PyG and ``warnings`` are untouched.

    Returns:
        The modules changed by this call (none on a second call).

    Example:
        >>> fix_stack_level()  # import pyg_orch.distributed fixed them
        []
    """
    fixed = []
    for name in STACK_LEVEL_MODULES:
        module = importlib.import_module(name)
        if hasattr(module, "warn") and stack_level_bug(module):
            if _wrap_once(module, "warn", _keyword_fixed):
                fixed.append(name)
    return fixed


def negative_endpoint_bug() -> bool:
    """Whether PyG's distributed sampler calls ``neg_sample`` without ``endpoint``.

    PyG 2.8's ``neg_sample`` takes which end of the edges it draws for
    (``"src"`` or ``"dst"``, to pick ``NegativeSampling``'s weights), but
    ``DistNeighborSampler.edge_sample`` still calls it without: every link
    batch with negatives fails with a ``TypeError``.

    Example:
        >>> negative_endpoint_bug()
        True
    """
    parameter = inspect.signature(_dist_sampler.neg_sample).parameters.get("endpoint")
    if parameter is None or parameter.default is not inspect.Parameter.empty:
        return False
    return "endpoint" not in inspect.getsource(_dist_sampler.DistNeighborSampler)


def _endpoint_filled(neg_sample: Callable[..., Tensor]) -> Callable[..., Tensor]:
    @functools.wraps(neg_sample)
    def filled(
        seed: Tensor, neg_sampling: Any, num_nodes: int, seed_time: Any,
        node_time: Any, endpoint: str | None = None,
    ) -> Tensor:  # fmt: skip
        if endpoint is None:
            weights = (neg_sampling.src_weight, neg_sampling.dst_weight)
            if any(weight is not None for weight in weights):
                raise NotImplementedError(
                    "PyG's distributed sampler does not say which end of the "
                    "edges a negative is drawn for, so NegativeSampling's "
                    "src_weight/dst_weight cannot be applied: draw negatives "
                    "uniformly (no weights)"
                )
            endpoint = "dst"  # unweighted: both ends draw alike
        return neg_sample(seed, neg_sampling, num_nodes, seed_time, node_time, endpoint)

    return filled


def fix_negative_sampling() -> bool:
    """Lets PyG's distributed link sampling draw negatives.

    See :func:`negative_endpoint_bug`.

    Replaces the module attribute ``neg_sample`` of
    ``torch_geometric.distributed.dist_neighbor_sampler`` only, with one whose
    ``endpoint`` is optional: unweighted negatives are drawn as PyG draws
    them; weighted ones are refused.

    Returns:
        Whether this call replaced it (not on a second call).

    Example:
        >>> fix_negative_sampling()  # import pyg_orch.distributed did
        False
    """
    if not negative_endpoint_bug():
        return False
    return _wrap_once(_dist_sampler, "neg_sample", _endpoint_filled)


def _padded(colptr: Tensor, num_nodes: int) -> Tensor:
    # Column pointers for num_nodes columns: the missing last ones empty.
    missing = num_nodes + 1 - colptr.numel()
    if missing <= 0:
        return colptr
    return torch.cat([colptr, colptr[-1:].expand(missing)])


def _all_columns(init: Callable[..., None]) -> Callable[..., None]:
    @functools.wraps(init)
    def init_sampler_instance(self: Any) -> None:
        init(self)
        if not self.is_hetero:
            return
        sampler = self._sampler
        for edge_type in sampler.edge_types:
            relation = sampler.to_rel_type[edge_type]
            colptr = sampler.colptr_dict[relation]
            num_nodes = sampler.num_nodes[edge_type[-1]]
            sampler.colptr_dict[relation] = _padded(colptr, num_nodes)

    return init_sampler_instance


def fix_hetero_columns() -> bool:
    """Gives every node of a partitioned heterogeneous graph its CSC column.

    PyG's ``GraphStore`` builds a ``LocalGraphStore``'s heterogeneous CSC
    with as many columns as the largest destination id with an edge in this
    partition (a "hotfix" in ``_edge_to_layout``), so a node past it, one
    without in-edges here, has no column: the sampler reads past the
    column pointers. ``DistNeighborSampler.init_sampler_instance`` is
    wrapped to pad each relation's pointers to all its destination nodes
    (the padded columns are empty, as their nodes' in-edges here are).

    Returns:
        Whether this call wrapped it (not on a second call).

    Example:
        >>> fix_hetero_columns()  # import pyg_orch.distributed did
        False
    """
    return _wrap_once(
        _dist_sampler.DistNeighborSampler, "init_sampler_instance", _all_columns
    )


def _empty_types_mapped(set_index: Callable[..., None]) -> Callable[..., None]:
    @functools.wraps(set_index)
    def set_global_id_to_index(self: Any, group_name: Any) -> None:
        global_id = self.get_global_id(group_name)
        if global_id is not None and global_id.numel() == 0:
            self._global_id_to_index[group_name] = global_id.new_full((0,), -1)
            return
        set_index(self, group_name)

    return set_global_id_to_index


def fix_empty_types() -> bool:
    """Lets a partition hold no node of a type.

    ``LocalFeatureStore`` maps global ids to rows through ``global_id.max()``,
    which fails on an empty tensor: a heterogeneous partition without a node
    of some type (a small type METIS put in other parts) could not be loaded
    (``max(): Expected reduction dim to be specified``). The map of a type
    without nodes here is empty.

    Returns:
        Whether this call wrapped it (not on a second call).

    Example:
        >>> fix_empty_types()  # import pyg_orch.distributed did
        False
    """
    return _wrap_once(LocalFeatureStore, "_set_global_id_to_index", _empty_types_mapped)


def _hetero_part(edge_index: Tensor, size: tuple[int, int]) -> LocalGraphStore:
    # A heterogeneous part holding one relation with edge_index.
    store = LocalGraphStore()
    store.meta = {"is_hetero": True}
    store.put_edge_index(
        edge_index, edge_type=("a", "to", "b"), layout="coo", size=size
    )
    return store


def empty_relation_bug() -> bool:
    """Whether a heterogeneous part with no edge of a relation fails to load.

    PyG's ``GraphStore._edge_to_layout`` counts a heterogeneous
    ``LocalGraphStore``'s CSC columns as the largest destination with an
    edge plus one (a "hotfix"), which is ``max()`` of an empty tensor when a
    part holds no edge of the relation: every sampler built on the part
    fails (``max(): Expected reduction dim to be specified``).

    Example:
        >>> empty_relation_bug()
        True
    """
    store = _hetero_part(torch.empty(2, 0, dtype=torch.long), (2, 2))
    method = LocalGraphStore._edge_to_layout
    pygs = getattr(method, "__wrapped__", method)  # PyG's own, also once fixed
    try:
        pygs(store, store.get_all_edge_attrs()[0], EdgeLayout.CSC)
    except RuntimeError:
        return True
    return False


def _empty_relations_laid_out(edge_to_layout: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(edge_to_layout)
    def laid_out(self: Any, attr: Any, layout: Any, store: bool = False) -> Any:
        row, col = self.get_edge_index(attr)
        if col.numel() or EdgeLayout(layout) != EdgeLayout.CSC:
            return edge_to_layout(self, attr, layout, store)
        # No edge of the relation here: no column yet (the sampler's
        # fix_hetero_columns gives every destination its empty one).
        return row, torch.zeros(1, dtype=col.dtype), None

    return laid_out


def fix_empty_relations() -> bool:
    """Lets a heterogeneous part hold no edge of a relation.

    See :func:`empty_relation_bug` (a rare relation, or one into a small
    type, in 2 or more parts). A relation without edges in this part is laid
    out as an empty CSC (or CSR), as every other relation's missing columns
    are by :func:`fix_hetero_columns`.

    Returns:
        Whether this call wrapped ``LocalGraphStore._edge_to_layout`` (not on
        a second call).

    Example:
        >>> fix_empty_relations()  # import pyg_orch.distributed did
        False
    """
    if not empty_relation_bug():
        return False
    return _wrap_once(LocalGraphStore, "_edge_to_layout", _empty_relations_laid_out)


def _own_rpc_store(init_rpc: Callable[..., None]) -> Callable[..., None]:
    @functools.wraps(init_rpc)
    def init_rpc_with_own_store(*args: Any, **kwargs: Any) -> None:
        saved = os.environ.pop(_AGENT_STORE, None)
        try:
            init_rpc(*args, **kwargs)
        finally:
            if saved is not None:
                os.environ[_AGENT_STORE] = saved

    return init_rpc_with_own_store


def fix_rpc_under_torchrun() -> bool:
    """Lets PyG's loaders start their RPC under ``torchrun``.

    ``torchrun`` sets ``TORCHELASTIC_USE_AGENT_STORE=True``, which makes every
    TCP rendezvous in its workers a client of a store the agent is supposed
    to host, at the given address; the agent hosts none for PyG's RPC, so
    ``DistLoader`` waited for it forever. PyG's ``init_rpc``, as
    ``DistLoader`` calls it, runs without that variable: rank 0 hosts the
    RPC's store, as outside ``torchrun``.

    Returns:
        Whether this call wrapped it (not on a second call).

    Example:
        >>> fix_rpc_under_torchrun()  # import pyg_orch.distributed did
        False
    """
    return _wrap_once(_dist_loader, "init_rpc", _own_rpc_store)


def _waiting_for_registration(call: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(call)
    def rpc_async_call(call_id: int, *args: Any, **kwargs: Any) -> Any:
        deadline = time.monotonic() + _REGISTRATION_WAIT
        while _dist_rpc._rpc_call_pool.get(call_id) is None:
            if time.monotonic() > deadline:
                break  # PyG's own error then: nothing registered under call_id
            time.sleep(0.01)
        return call(call_id, *args, **kwargs)

    return rpc_async_call


def fix_early_requests() -> bool:
    """Lets a request that arrives before its callee is registered wait for it.

    A rank may send its first sampling request as soon as it has registered
    its own sampler, before a slower peer has registered its; PyG's callee
    then looks the call up, finds nothing and fails with ``'NoneType' object
    has no attribute 'rpc_async'``. The entry point of PyG's requests waits up
    to 30 s for the registration instead.

    Returns:
        Whether this call wrapped it (not on a second call).

    Example:
        >>> fix_early_requests()  # import pyg_orch.distributed did
        False
    """
    return _wrap_once(_dist_rpc, "_rpc_async_call", _waiting_for_registration)


def defaultdict_load_bug() -> bool:
    """Whether ``torch.load(weights_only=True)`` refuses a ``defaultdict``.

    Example:
        >>> isinstance(defaultdict_load_bug(), bool)
        True
    """
    buffer = io.BytesIO()
    torch.save(collections.defaultdict(dict, a={}), buffer)
    buffer.seek(0)
    try:
        torch.load(buffer, weights_only=True)
    except pickle.UnpicklingError:
        return True
    return False


def plain_dicts(value: Any) -> Any:
    """``value`` with every ``dict`` in it (a ``defaultdict`` too) a plain one.

    Example:
        >>> type(plain_dicts(collections.defaultdict(dict, a={})))
        <class 'dict'>
    """
    if isinstance(value, dict):
        return {key: plain_dicts(item) for key, item in value.items()}
    return value


def _saves_plain_dicts(generate: Callable[..., None]) -> Callable[..., None]:
    @functools.wraps(generate)
    def generate_partition(self: Any, *args: Any, **kwargs: Any) -> None:
        generate(self, *args, **kwargs)
        for part in range(self.num_parts):
            path = os.path.join(self.root, f"part_{part}", "edge_feats.pt")
            if os.path.exists(path):  # written just now by PyG itself
                feats = torch.load(path, weights_only=False)
                if isinstance(feats, collections.defaultdict):
                    torch.save(plain_dicts(feats), path)

    return generate_partition


def fix_partition_load() -> bool:
    """Makes PyG's ``Partitioner`` write edge features ``torch.load`` reads.

    ``Partitioner.generate_partition`` saves each part's edge features as a
    ``defaultdict``, which ``torch.load(weights_only=True)`` (PyG's
    ``fs.torch_load``, so ``LocalFeatureStore.from_partition``) refuses
    since torch 2.6 whatever its allow-list. Only where torch refuses one,
    ``generate_partition`` is wrapped to save them again as plain dicts.

    Returns:
        Whether this call wrapped it (not on a second call).

    Example:
        >>> fix_partition_load()  # import pyg_orch.distributed did
        False
    """
    if not defaultdict_load_bug():
        return False
    return _wrap_once(Partitioner, "generate_partition", _saves_plain_dicts)


def check_pyg_version() -> bool:
    """Whether PyG's version is one of ``TESTED_PYG``; warns once if not.

    Example:
        >>> check_pyg_version()
        True
    """
    global _version_warned
    tested = torch_geometric.__version__ in TESTED_PYG
    if not tested and not _version_warned:
        _version_warned = True
        warnings.warn(
            f"pyg_orch.distributed is tested with PyG {', '.join(TESTED_PYG)}, "
            f"not {torch_geometric.__version__}: its patches of "
            "torch_geometric.distributed may not fit",
            stacklevel=2,
        )
    return tested


def install() -> None:
    """Makes ``torch_geometric.distributed`` work without pyg-lib; idempotent.

    Warns once on an untested PyG version, registers the missing ops (not
    when pyg-lib is installed) and warms their kernels up, and applies each
    fix of this module whose bug PyG still has.

    Example:
        >>> from pyg_orch.distributed.pyg_lib_ops import op_defined
        >>> install()
        >>> op_defined("dist_neighbor_sample")
        True
    """
    check_pyg_version()
    register_ops()
    fix_stack_level()
    fix_partition_load()
    fix_negative_sampling()
    fix_hetero_columns()
    fix_empty_types()
    fix_empty_relations()
    fix_rpc_under_torchrun()
    fix_early_requests()
    warm_up()


def use_type_ids(store: Any, path: str) -> None:
    """Makes a heterogeneous ``LocalFeatureStore`` find rows by their type's ids.

    PyG's heterogeneous partitions know a node by its id within its type
    (``node_map``, the sampler), but ``LocalFeatureStore.from_partition``
    registers each row under its id in the homogeneous numbering
    (``node_feats.pt``'s ``"global_id"``): every node type but the first
    read wrong rows. The rows are registered under ``"id"`` here.

    Args:
        store: the feature store of a heterogeneous partition.
        path: its ``part_i/node_feats.pt``.

    Example:
        >>> import tempfile
        >>> from torch_geometric.distributed import LocalFeatureStore
        >>> store = LocalFeatureStore()
        >>> with tempfile.NamedTemporaryFile(suffix=".pt") as file:
        ...     torch.save({"author": {"id": torch.tensor([4, 2])}}, file.name)
        ...     use_type_ids(store, file.name)
        >>> store.get_global_id("author").tolist()
        [4, 2]
    """
    for node_type, feats in torch.load(path, weights_only=True).items():
        store.put_global_id(feats["id"], group_name=node_type)


def empty_type_features_bug() -> bool:
    """Whether PyG gives a type without sampled nodes or edges no features.

    ``DistNeighborSampler._collate_fn`` fetches no rows for a node (edge)
    type of which a heterogeneous batch holds none, and leaves that type's
    ``x`` (``edge_attr``) unset, where PyG's ``NeighborLoader`` on one
    machine gives it an empty ``[0, F]`` tensor: a model then reads
    ``None`` (hot vertices make such batches common, as they cut the last
    hop).

    Example:
        >>> empty_type_features_bug()
        True
    """
    source = inspect.getsource(_dist_sampler.DistNeighborSampler._collate_fn)
    return "nfeats[ntype] = None" in source


def fill_empty_features(metadata: tuple, feature_store: Any) -> None:
    """Gives every type a heterogeneous batch holds none of its empty rows.

    See :func:`empty_type_features_bug`: ``metadata`` is the sampler
    output's, whose last three entries are the node features, labels and
    edge features by type; a ``None`` there becomes the store's rows of that
    type cut to none (its width and dtype), where the store holds some.

    Example:
        >>> store = LocalFeatureStore()
        >>> store.put_tensor(torch.ones(3, 2), group_name="paper", attr_name="x")
        True
        >>> metadata = (None, {"paper": None}, None, {})
        >>> fill_empty_features(metadata, store)
        >>> metadata[1]["paper"].shape
        torch.Size([0, 2])
    """
    node_feats, _, edge_feats = metadata[-3:]
    held = {(a.group_name, a.attr_name) for a in feature_store.get_all_tensor_attrs()}
    for feats, name in ((node_feats, "x"), (edge_feats, "edge_attr")):
        for group, rows in (feats or {}).items():
            if rows is None and (group, name) in held:
                rows = feature_store.get_tensor(group_name=group, attr_name=name)
                feats[group] = rows[:0]
