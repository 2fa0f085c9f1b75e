"""Batches per second of the Numba sampler against torch-sparse's and pyg-lib's.

Samples the same seed batches with each sampler that is installed, on a
200,000-node power-law graph (the features are never read): pyg_orch's
(what ``OrchNeighborLoader(hot_ratio=0)`` samples with), PyG's own
``NeighborLoader``'s sampler (through :mod:`pyg_orch.backend` where neither
compiled package is installed, else through that package), and the compiled
packages' ops. The default run
takes about half a minute on 2 CPU cores. With ``--hetero``, on an
ogbn-mag-shaped heterogeneous graph instead (seed papers), against
torch-sparse's heterogeneous sampler and pyg_orch's own homogeneous sampler
on the same edges (``to_homogeneous()``); its full size takes a few minutes.

PyG itself has no sampler of its own: it needs pyg-lib (not on PyPI),
torch-sparse or, after ``import pyg_orch``, pyg_orch's backend; the table says
which samples for it, and which compiled package is missing.
``pip install -e ".[torch-sparse]"`` adds torch-sparse (built from source:
about 11 minutes, and it needs torch-scatter to import).
"""

from __future__ import annotations

import argparse
import importlib
import itertools
from collections.abc import Callable

import numba
import torch
from torch_geometric.data import Data
from torch_geometric.loader import NeighborLoader
from torch_geometric.sampler import NodeSamplerInput

from pyg_orch.benchmark.graph import (
    BENCHMARK_DEFAULTS,
    add_graph_arguments,
    benchmark_graph,
)
from pyg_orch.benchmark.timing import median_ms, time_calls
from pyg_orch.datasets import power_law_hetero_graph
from pyg_orch.kernels.threading_layer import numba_threads
from pyg_orch.options import add_option, positive_float, positive_int
from pyg_orch.sampling import OrchNeighborSampler


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Adds this benchmark's options to ``parser``."""
    add_graph_arguments(parser, num_nodes=200_000, num_features=1)
    add_option(parser, "num_neighbors", list(BENCHMARK_DEFAULTS.num_neighbors))
    add_option(
        parser,
        "batch_size",
        BENCHMARK_DEFAULTS.batch_size,
        help="seed nodes per sampled batch",
    )
    parser.add_argument(
        "--batches",
        type=positive_int,
        default=50,
        help="timed batches per sampler (default: %(default)s)",
    )
    parser.add_argument(
        "--hetero",
        action="store_true",
        help="sample the ogbn-mag-shaped heterogeneous graph of "
        "pyg_orch.datasets.power_law_hetero_graph instead (default: off)",
    )
    parser.add_argument(
        "--scale",
        type=positive_float,
        default=1.0,
        help="with --hetero: fraction of ogbn-mag's size; 1 is 1.9M nodes and "
        "21M edges, 42M with reverses (default: %(default)s)",
    )


# Compiled samplers PyG can use: module to import, op, and the arguments after
# (colptr, row, seed, fanouts) that PyG passes for a CSC graph, directional
# sampling without replacement.
_EXTENSIONS = {
    "torch-sparse": (
        "torch_sparse",
        ("torch_sparse", "neighbor_sample"),
        (False, True),
        {},
    ),
    "pyg-lib": ("pyg_lib", ("pyg", "neighbor_sample"), (), {"csc": True}),
}


def _compiled_op(module: str, namespace: str, name: str) -> Callable | None:
    """``torch.ops.<namespace>.<name>`` once ``module`` is imported, or ``None``."""
    try:
        importlib.import_module(module)
        return getattr(getattr(torch.ops, namespace), name)
    except (ImportError, OSError, AttributeError, RuntimeError):
        return None


def _extension_sampler(sampler: OrchNeighborSampler, name: str) -> Callable | None:
    """The compiled sampler ``name`` on ``sampler``'s graph, or ``None`` if absent."""
    module, (namespace, op_name), extra, keywords = _EXTENSIONS[name]
    op = _compiled_op(module, namespace, op_name)
    if op is None:
        return None
    fanouts = list(sampler.num_neighbors.get_mapped_values())
    return lambda seed: op(
        sampler.colptr, sampler.row, seed, fanouts, *extra, **keywords
    )


# PyG's own sampler's row.
_PYG_ROW = "PyG NeighborLoader's sampler"


def pyg_orch_backend_row() -> str:
    """What samples for PyG's own ``NeighborLoader`` in this process.

    Example:
        >>> pyg_orch_backend_row()
        "sampled by pyg_orch's backend (torch.ops.pyg.neighbor_sample)"
    """
    from pyg_orch.backend import backend_status

    provider = backend_status()["neighbor_sample"]
    if provider == "pyg_orch":
        return "sampled by pyg_orch's backend (torch.ops.pyg.neighbor_sample)"
    return f"sampled by {provider}"


def _sampling(sampler: object) -> Callable[[torch.Tensor], object]:
    # One batch of a sampler, as a loader asks for it.
    return lambda seed: sampler.sample_from_nodes(NodeSamplerInput(None, seed))


def saved_name(args: argparse.Namespace) -> str:
    """The name ``--save`` gives this run's table: ``sampler`` or ``sampler_hetero``.

    Example:
        >>> saved_name(argparse.Namespace(hetero=True))
        'sampler_hetero'
    """
    return "sampler_hetero" if args.hetero else "sampler"


def _cycling(sample: Callable, seeds: list[torch.Tensor]) -> Callable[[], object]:
    # One call samples the next seed batch, round and round.
    queue = itertools.cycle(seeds)
    return lambda: sample(next(queue))


def run(args: argparse.Namespace) -> None:
    """Builds the graph, times each available sampler and prints the table."""
    if args.hetero:
        run_hetero(args)
        return
    data, description = benchmark_graph(args)
    print(
        f"{description}; fan-outs "
        f"{args.num_neighbors}, batch {args.batch_size}, {args.batches} batches, "
        f"{torch.get_num_threads()} threads ({numba.get_num_threads()} for Numba)"
    )
    sampler = OrchNeighborSampler(data, num_neighbors=args.num_neighbors)
    generator = torch.Generator().manual_seed(args.seed)
    seeds = [
        torch.randint(data.num_nodes, (args.batch_size,), generator=generator)
        for _ in range(args.batches)
    ]

    # PyG's own loader samples with PyG's own NeighborSampler.
    pyg_sampler = NeighborLoader(data, args.num_neighbors, batch_size=1).node_sampler
    candidates = {
        "pyg_orch (Numba)": _sampling(sampler),
        "pyg_orch (Numba), 1 thread": _on_one_thread(_sampling(sampler)),
        _PYG_ROW: _sampling(pyg_sampler),
        **{name: _extension_sampler(sampler, name) for name in _EXTENSIONS},
    }
    print(
        f"{'sampler':<34}{'ms/batch':>10}{'batches/s':>12}{'vs torch-sparse':>18}"
        f"{'vs pyg_orch':>13}"
    )
    results = {}
    for _round in range(2):  # interleaved: a busy spell slows every row alike
        for name, sample in candidates.items():
            if sample is not None:
                timed = time_calls(_cycling(sample, seeds), args.batches)
                results.setdefault(name, []).extend(timed)
    medians = {name: median_ms(times) for name, times in results.items()}
    reference, ours = medians.get("torch-sparse"), medians["pyg_orch (Numba)"]
    for name, milliseconds in medians.items():
        ratio = f"{reference / milliseconds:.1f}x" if reference else "n/a"
        print(
            f"{name:<34}{milliseconds:>10.2f}{1000 / milliseconds:>12.1f}"
            f"{ratio:>18}{milliseconds / ours:>12.2f}x"
        )
    print(f"{_PYG_ROW}: {pyg_orch_backend_row()}")
    for name in ("torch-sparse", "pyg-lib"):
        if name not in results:
            print(_not_installed(name))


# What each compiled sampler would need, for the table's closing lines.
_INSTALL = {
    "torch-sparse": 'pip install -e ".[torch-sparse]" (built from source, about '
    "11 minutes; it also needs torch-scatter)",
    "pyg-lib": "a pyg-lib wheel for this torch from data.pyg.org (not on PyPI)",
}


def _not_installed(name: str) -> str:
    return (
        f"{name}: not installed, so not measured and no ratio. To compare: "
        f"{_INSTALL[name]}."
    )


def _torch_sparse_hetero(sampler: OrchNeighborSampler) -> Callable | None:
    """torch-sparse's heterogeneous sampler on ``sampler``'s graph, if installed."""
    op = _compiled_op("torch_sparse", "torch_sparse", "hetero_neighbor_sample")
    if op is None:
        return None
    fanouts = sampler.num_neighbors.get_mapped_values(sampler.edge_types)
    num_hops = sampler.num_neighbors.num_hops
    return lambda seed: op(
        sampler.node_types, sampler.edge_types, sampler.colptr_dict,
        sampler.row_dict, {"paper": seed}, fanouts, num_hops, False, True,
    )  # fmt: skip


def _on_one_thread(sample: Callable) -> Callable:
    # The same sampling with Numba's parallel picks on one thread.
    def sample_on_one_thread(seed: torch.Tensor) -> object:
        with numba_threads(1):
            return sample(seed)

    return sample_on_one_thread


def _num_edges(out: object) -> int:
    # A sampler output's edges: pyg_orch's outputs, or torch-sparse's tuple.
    row = out.row if hasattr(out, "row") else out[1]
    return (
        sum(r.numel() for r in row.values()) if isinstance(row, dict) else row.numel()
    )


def run_hetero(args: argparse.Namespace) -> None:
    """Times heterogeneous sampling of seed papers and prints the table."""
    data = power_law_hetero_graph(args.scale, seed=args.seed)
    print(
        f"ogbn-mag-shaped power-law graph (scale {args.scale}): "
        f"{data.num_nodes:,} nodes of 4 types, {data.num_edges:,} edges of "
        f"{len(data.edge_types)} types; fan-outs {args.num_neighbors} per edge "
        f"type (homogeneous: per node), batch {args.batch_size} papers, "
        f"{args.batches} batches, {torch.get_num_threads()} threads "
        f"({numba.get_num_threads()} for Numba)"
    )
    hetero = OrchNeighborSampler(data, num_neighbors=args.num_neighbors)
    homogeneous_graph = data.to_homogeneous()
    # to_homogeneous puts each type's nodes after those of the types before.
    paper_start = sum(
        data[t].num_nodes for t in data.node_types[: data.node_types.index("paper")]
    )
    homogeneous = OrchNeighborSampler(
        Data(edge_index=homogeneous_graph.edge_index, num_nodes=data.num_nodes),
        num_neighbors=args.num_neighbors,
    )
    del homogeneous_graph
    generator = torch.Generator().manual_seed(args.seed)
    num_papers = data["paper"].num_nodes
    seeds = [
        torch.randint(num_papers, (args.batch_size,), generator=generator)
        for _ in range(args.batches)
    ]

    def pyg_orch_hetero(seed: torch.Tensor) -> object:
        inputs = NodeSamplerInput(None, seed, input_type="paper")
        return hetero.sample_from_nodes(inputs)

    def pyg_orch_homogeneous(seed: torch.Tensor) -> object:
        inputs = NodeSamplerInput(None, seed + paper_start)
        return homogeneous.sample_from_nodes(inputs)

    candidates = {
        "pyg_orch hetero": pyg_orch_hetero,
        "pyg_orch hetero, 1 thread": _on_one_thread(pyg_orch_hetero),
        "torch-sparse hetero": _torch_sparse_hetero(hetero),
        "pyg_orch homogeneous": pyg_orch_homogeneous,
    }
    results = {}
    for name, sample in candidates.items():
        if sample is None:
            continue
        edges = [_num_edges(sample(seed)) for seed in seeds[:5]]
        milliseconds = median_ms(time_calls(_cycling(sample, seeds), args.batches))
        results[name] = (milliseconds, sum(edges) / len(edges))
    _print_hetero_table(results)


def _print_hetero_table(results: dict[str, tuple[float, float]]) -> None:
    print(
        f"{'sampler':<27}{'ms/batch':>10}{'edges/batch':>13}{'ns/edge':>9}"
        f"{'vs torch-sparse':>17}"
    )
    reference = results.get("torch-sparse hetero")
    for name, (milliseconds, edges) in results.items():
        ratio = f"{reference[0] / milliseconds:.1f}x" if reference else "n/a"
        print(
            f"{name:<27}{milliseconds:>10.2f}{edges:>13,.0f}"
            f"{1e6 * milliseconds / edges:>9.1f}{ratio:>17}"
        )
    hetero, homogeneous = results["pyg_orch hetero"], results["pyg_orch homogeneous"]
    # Per-type fan-outs sample more edges than per-node ones: compare the
    # time per sampled edge.
    per_edge = (hetero[0] / hetero[1]) / (homogeneous[0] / homogeneous[1])
    print(f"pyg_orch hetero / homogeneous time per sampled edge: {per_edge:.2f}x")
    one_thread = results["pyg_orch hetero, 1 thread"][0]
    print(
        f"pyg_orch hetero on {numba.get_num_threads()} threads: "
        f"{one_thread / hetero[0]:.2f}x faster than on 1 (the same seed batches)"
    )
    if reference is None:
        print(_not_installed("torch-sparse"))
