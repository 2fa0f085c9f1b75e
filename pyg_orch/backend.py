"""pyg_orch as PyG's sampling backend where pyg-lib and torch-sparse are absent.

PyG's own classes sample, cluster and partition through compiled packages
that pip cannot install: :class:`~torch_geometric.sampler.NeighborSampler`
(and so :class:`~torch_geometric.loader.NeighborLoader` and
:class:`~torch_geometric.loader.LinkNeighborLoader`) calls pyg-lib's or
torch-sparse's ops, :class:`~torch_geometric.loader.ClusterData` (and so
:class:`~torch_geometric.distributed.Partitioner`) their METIS, and
``torch_geometric.distributed`` four more ops of pyg-lib. ``import pyg_orch``
calls :func:`install`; where neither package is installed, PyG's classes then
run unchanged on pyg_orch's kernels:

* the four sampling ops are defined under pyg-lib's and torch-sparse's names
  and schemas (:mod:`pyg_orch.sample_ops`), and PyG's sampler module (only
  it) sees them as installed: no global ``torch_geometric.typing`` flag
  changes, so PyG's other ops (``segment_matmul``, ``index_sort``, ...) keep
  their own paths;
* ``ClusterData`` partitions with pyg_orch's METIS
  (:func:`~pyg_orch.distributed.metis.metis_edge_parts`);
* ``torch_geometric.distributed`` gets its ops and fixes
  (:func:`~pyg_orch.distributed.engine.fixes.install`) when it is imported.

Each step runs once torch_geometric (or its distributed package) is imported,
so ``import pyg_orch`` stays fast; with pyg-lib or torch-sparse installed,
pyg_orch replaces nothing of theirs. :func:`~pyg_orch.backend_status` says
what provides what.
"""

from __future__ import annotations

import importlib.abc
import importlib.util
import logging
import sys
import threading
from collections.abc import Callable
from types import ModuleType
from typing import Any

log = logging.getLogger(__name__)

# The compiled packages PyG samples and partitions with.
NATIVE = ("pyg_lib", "torch_sparse")
# What PyG's sampler module reads of torch_geometric.typing, as pyg_orch's
# ops provide it.
SAMPLING_FLAGS = {
    "WITH_PYG_LIB": True,
    "WITH_TORCH_SPARSE": True,
    "WITH_EDGE_TIME_NEIGHBOR_SAMPLE": True,
    "WITH_WEIGHTED_NEIGHBOR_SAMPLE": True,
}

# The schemas of pyg-lib 0.4 (csrc/sampler/neighbor.cpp) and torch-sparse 0.6
# (csrc/neighbor_sample.cpp, types inferred from its C++ signatures).
SCHEMAS = {
    ("pyg", "neighbor_sample"): (
        "neighbor_sample(Tensor rowptr, Tensor col, Tensor seed, int[] "
        "num_neighbors, Tensor? node_time = None, Tensor? edge_time = None, "
        "Tensor? seed_time = None, Tensor? edge_weight = None, bool csc = False, "
        "bool replace = False, bool directed = True, bool disjoint = False, "
        "str temporal_strategy = 'uniform', bool return_edge_id = True) -> "
        "(Tensor, Tensor, Tensor, Tensor?, int[], int[])"
    ),
    ("pyg", "hetero_neighbor_sample"): (
        "hetero_neighbor_sample(str[] node_types, (str, str, str)[] edge_types, "
        "Dict(str, Tensor) rowptr_dict, Dict(str, Tensor) col_dict, Dict(str, "
        "Tensor) seed_dict, Dict(str, int[]) num_neighbors_dict, Dict(str, "
        "Tensor)? node_time_dict = None, Dict(str, Tensor)? edge_time_dict = "
        "None, Dict(str, Tensor)? seed_time_dict = None, Dict(str, Tensor)? "
        "edge_weight_dict = None, bool csc = False, bool replace = False, bool "
        "directed = True, bool disjoint = False, str temporal_strategy = "
        "'uniform', bool return_edge_id = True) -> (Dict(str, Tensor), "
        "Dict(str, Tensor), Dict(str, Tensor), Dict(str, Tensor)?, Dict(str, "
        "int[]), Dict(str, int[]))"
    ),
    ("torch_sparse", "neighbor_sample"): (
        "neighbor_sample(Tensor colptr, Tensor row, Tensor input_node, int[] "
        "num_neighbors, bool replace, bool directed) -> (Tensor, Tensor, Tensor, "
        "Tensor)"
    ),
    ("torch_sparse", "hetero_neighbor_sample"): (
        "hetero_neighbor_sample(str[] node_types, (str, str, str)[] edge_types, "
        "Dict(str, Tensor) colptr_dict, Dict(str, Tensor) row_dict, Dict(str, "
        "Tensor) input_node_dict, Dict(str, int[]) num_neighbors_dict, int "
        "num_hops, bool replace, bool directed) -> (Dict(str, Tensor), "
        "Dict(str, Tensor), Dict(str, Tensor), Dict(str, Tensor))"
    ),
}
# The function of pyg_orch.sample_ops behind each op.
IMPLEMENTATIONS = {
    ("pyg", "neighbor_sample"): "neighbor_sample",
    ("pyg", "hetero_neighbor_sample"): "hetero_neighbor_sample",
    ("torch_sparse", "neighbor_sample"): "induced_neighbor_sample",
    ("torch_sparse", "hetero_neighbor_sample"): "induced_hetero_neighbor_sample",
}

_lock = threading.RLock()
_libraries: dict[str, Any] = {}  # kept alive: the torch.library objects own the ops
_done: set[str] = set()


def native_backends() -> list[str]:
    """The compiled packages of ``NATIVE`` present in this environment.

    Example:
        >>> native_backends()  # pip cannot install them here
        []
    """
    present = []
    for name in NATIVE:
        try:
            found = name in sys.modules or importlib.util.find_spec(name) is not None
        except (ImportError, ValueError):  # a module without a spec
            found = True
        if found:
            present.append(name)
    return present


def install() -> None:
    """Gives PyG's classes pyg_orch's kernels; ``import pyg_orch`` calls it.

    Applies :func:`apply_sampling` now if torch_geometric is imported, else
    right after it is, then :func:`apply_distributed` once
    ``torch_geometric.distributed`` is imported too (PyG 2.8's own import
    imports it).

    Example:
        >>> install()
        >>> import torch_geometric
        >>> backend_status()["neighbor_sample"]
        'pyg_orch'
    """
    if "torch_geometric" in sys.modules:
        _after_torch_geometric()
    else:
        _after_import("torch_geometric", _after_torch_geometric)


def _after_torch_geometric() -> None:
    # The distributed package may load within torch_geometric's own import:
    # its fixes wait until torch_geometric is whole.
    apply_sampling()
    if "torch_geometric.distributed" in sys.modules:
        apply_distributed()
    else:
        _after_import("torch_geometric.distributed", apply_distributed)


def _after_import(name: str, action: Callable[[], None]) -> None:
    with _lock:
        finder = next((f for f in sys.meta_path if isinstance(f, _AfterImport)), None)
        if finder is None:
            finder = _AfterImport({})
            sys.meta_path.insert(0, finder)
        finder.actions[name] = action


def apply_sampling() -> None:
    """PyG's neighbour sampling and METIS through pyg_orch, unless a native package is there.

    Example:
        >>> apply_sampling()
        >>> import torch
        >>> from torch_geometric.data import Data
        >>> from torch_geometric.loader import NeighborLoader
        >>> data = Data(edge_index=torch.tensor([[1, 2], [0, 0]]), num_nodes=3)
        >>> next(iter(NeighborLoader(data, [-1], batch_size=1))).n_id.tolist()
        [0, 1, 2]
    """  # noqa: E501 - one line
    with _lock:
        if "sampling" in _done:
            return
        _done.add("sampling")
    if native_backends():
        return
    from torch_geometric.loader import cluster
    from torch_geometric.sampler import neighbor_sampler

    register_ops()
    neighbor_sampler.torch_geometric = _PackageView(
        sys.modules["torch_geometric"], SAMPLING_FLAGS
    )
    cluster.ClusterData._metis = _metis
    log.info(
        "pyg_orch samples and partitions for PyG's own classes: neither "
        "pyg-lib nor torch-sparse is installed (pyg_orch.backend_status())"
    )


def apply_distributed() -> None:
    """``torch_geometric.distributed`` with pyg-lib's ops and PyG's fixes.

    Example:
        >>> apply_distributed()
        >>> import torch
        >>> hasattr(torch.ops.pyg, "dist_neighbor_sample")
        True
    """
    with _lock:
        if "distributed" in _done:
            return
        _done.add("distributed")
    import pyg_orch.distributed  # noqa: F401  (installs on import)


def op_defined(namespace: str, name: str) -> bool:
    """Whether ``torch.ops.<namespace>.<name>`` exists (from any library).

    Example:
        >>> op_defined("aten", "add")
        True
    """
    import torch

    try:
        getattr(getattr(torch.ops, namespace), name)
    except (AttributeError, RuntimeError):
        return False
    return True


def register_ops() -> list[str]:
    """Defines the sampling ops of ``SCHEMAS`` not defined yet; idempotent.

    Each runs its function of :mod:`pyg_orch.sample_ops`, imported on the
    first call (so defining them imports nothing of pyg_orch).

    Returns:
        The ops this call defined, as ``"namespace::name"``.

    Example:
        >>> register_ops() == [] or op_defined("pyg", "neighbor_sample")
        True
    """
    import torch

    defined = []
    with _lock:
        for (namespace, name), schema in SCHEMAS.items():
            if op_defined(namespace, name):
                continue
            if namespace not in _libraries:
                _libraries[namespace] = torch.library.Library(namespace, "FRAGMENT")
            _libraries[namespace].define(schema)
            # CompositeExplicitAutograd: the hetero ops have no tensor at
            # their arguments' top level (dicts of them), and still dispatch.
            _libraries[namespace].impl(
                name, _implementation(IMPLEMENTATIONS[namespace, name]),
                "CompositeExplicitAutograd",
            )  # fmt: skip
            defined.append(f"{namespace}::{name}")
    return defined


def _implementation(name: str) -> Callable[..., Any]:
    def run(*args: Any, **kwargs: Any) -> Any:
        from pyg_orch import sample_ops

        return getattr(sample_ops, name)(*args, **kwargs)

    return run


def backend_status() -> dict[str, str]:
    """What does each job of PyG's compiled backends in this process.

    Imports torch_geometric (which applies the backend). Each value is
    ``"pyg_orch"``, ``"pyg-lib"``, ``"torch-sparse"`` or ``"missing"``.

    Example:
        >>> status = backend_status()
        >>> status["neighbor_sample"], status["METIS (ClusterData, Partitioner)"]
        ('pyg_orch', 'pyg_orch')
    """
    import torch
    import torch_geometric.typing as flags
    from torch_geometric.loader import cluster

    native = native_backends()
    ours = not native and "sampling" in _done

    def provider(with_pyg_lib: bool, with_torch_sparse: bool) -> str:
        if ours:
            return "pyg_orch"
        if with_pyg_lib:
            return "pyg-lib"
        return "torch-sparse" if with_torch_sparse else "missing"

    dist = "missing"
    if hasattr(torch.ops.pyg, "dist_neighbor_sample"):
        dist = "pyg-lib" if flags.WITH_PYG_LIB else "pyg_orch"
    metis = (
        "pyg_orch"
        if cluster.ClusterData._metis is _metis
        else provider(flags.WITH_METIS, flags.WITH_TORCH_SPARSE)
    )
    return {
        "neighbor_sample": provider(flags.WITH_PYG_LIB, flags.WITH_TORCH_SPARSE),
        "hetero_neighbor_sample": provider(flags.WITH_PYG_LIB, flags.WITH_TORCH_SPARSE),
        "induced subgraphs": provider(False, flags.WITH_TORCH_SPARSE),
        "METIS (ClusterData, Partitioner)": metis,
        "distributed sampling ops": dist,
        "installed natively": ", ".join(native) or "none",
    }


def status_lines() -> str:
    """:func:`~pyg_orch.backend_status` as ``pyg-orch --version`` prints it.

    Example:
        >>> print(status_lines().splitlines()[0])
        PyG backend:
    """
    rows = [f"  {job}: {who}" for job, who in backend_status().items()]
    return "\n".join(["PyG backend:", *rows])


def _metis(self: Any, edge_index: Any, num_nodes: int) -> Any:
    # ClusterData._metis: one part per node, by pyg_orch's METIS (METIS
    # partitions the graph symmetrized, as torch-sparse's does).
    from pyg_orch.distributed.metis import metis_edge_parts

    src, dst = edge_index.cpu()
    parts = metis_edge_parts(src, dst, num_nodes, self.num_parts, seed=0)
    return parts.to(edge_index.device)


class _FlagView:
    # torch_geometric.typing with some flags of its own; the rest is PyG's.
    def __init__(self, module: ModuleType, flags: dict[str, bool]) -> None:
        self._module, self._flags = module, flags

    def __getattr__(self, name: str) -> Any:
        if name in self._flags:
            return self._flags[name]
        return getattr(self._module, name)


class _PackageView:
    # torch_geometric as one of PyG's modules sees it: its typing a view.
    def __init__(self, package: ModuleType, flags: dict[str, bool]) -> None:
        self._package, self.typing = package, _FlagView(package.typing, flags)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._package, name)


class _AfterImport(importlib.abc.MetaPathFinder):
    # Runs an action right after a module is imported, once.
    def __init__(self, actions: dict[str, Callable[[], None]]) -> None:
        self.actions = actions

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        if fullname not in self.actions:
            return None
        spec = None
        for finder in sys.meta_path:
            if finder is not self and hasattr(finder, "find_spec"):
                spec = finder.find_spec(fullname, path, target)
                if spec is not None:
                    break
        if spec is None or spec.loader is None:
            return spec
        action = self.actions.pop(fullname)
        exec_module = spec.loader.exec_module

        def exec_then_act(module: ModuleType) -> None:
            exec_module(module)
            action()

        spec.loader.exec_module = exec_then_act
        return spec
