"""What a partitioned graph costs each machine in memory, against the whole graph
divided by the parts, and what partitioning it costs.

For each graph size and number of parts it partitions a power-law graph with
100 features (``partition_graph``, hot vertices replicated), loads every part
in a fresh process as a rank does (``load_partition``, and the CSC PyG's
sampler builds of it) and sums the bytes of every tensor the rank holds, each
storage once, by kind: feature rows and edge values, labels, the part's
edges, the sampler's CSC, node and edge ids, maps (node or edge -> part, id
-> row), anything else, and the hot replica. A tensor as long as the whole
graph's node or edge count is full-length: it does not shrink with more
machines. ``ratio`` is a rank's bytes without the hot replica over the whole
graph's (``x`` and ``edge_index``) divided by the parts: 1.00 would be a
perfect split. The last lines give the bytes per local node and per local
edge of each graph, which a formula for larger graphs multiplies, and
``partition_graph``'s peak resident memory (2 parts, in a fresh process)
above the loaded graph, METIS's own call apart.
"""

from __future__ import annotations

import argparse
import pickle
import subprocess
import sys
import tempfile
from typing import Any

from pyg_orch.options import add_option, positive_int

# The table's columns: (header, width).
_COLUMNS = (
    ("nodes", 10), ("parts", 6), ("rank", 5), ("features", 9), ("labels", 7),
    ("edges", 7), ("sampler", 8), ("ids", 6), ("maps", 6), ("other", 6),
    ("hot", 6), ("total MB", 9), ("whole/P", 8), ("ratio", 6), ("full MB", 8),
)  # fmt: skip
# The kinds of the table's columns, in its order.
_SHOWN = ("features", "labels", "edges", "sampler", "ids", "maps", "other", "hot")
# What grows with a part's nodes besides its features, and with its edges.
_NODE_KINDS, _EDGE_KINDS = ("labels", "ids", "sampler", "maps", "other"), ("edges",)
# The graphs the measured constants are projected to: (name, nodes, edges,
# float32 features), and the machines and hot ratios of the projection.
_TARGETS = (
    ("ogbn-papers100M", 111_059_956, 1_615_685_872, 128),
    ("1B nodes, 10B edges", 1_000_000_000, 10_000_000_000, 128),
)
_MACHINES, _HOT_RATIOS = (4, 16, 64), (0.0, 0.01, 0.1)
# Bytes of a hot vertex's id (int64) in the replica, beside its rows.
_HOT_ID_BYTES = 8
_GB = 2**30
_MB = 2**20


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Adds this benchmark's options to ``parser``."""
    parser.add_argument(
        "--num-nodes", type=positive_int, nargs="+", default=[1_000_000],
        help="the graphs' node counts (default: 1000000)",
    )  # fmt: skip
    parser.add_argument(
        "--parts", type=positive_int, nargs="+", default=[2, 4, 8],
        help="the numbers of parts measured (default: 2 4 8)",
    )  # fmt: skip
    parser.add_argument(
        "--avg-degree", type=float, default=20.0,
        help="mean in-degree of the power-law graphs (default: 20)",
    )  # fmt: skip
    parser.add_argument(
        "--num-features", type=positive_int, default=100,
        help="float32 features per node (default: 100)",
    )  # fmt: skip
    parser.add_argument(
        "--hot-ratio", type=float, default=0.1,
        help="the hot vertices partition_graph replicates (default: 0.1)",
    )  # fmt: skip
    parser.add_argument(
        "--method", choices=("metis", "random"), default="metis",
        help="how nodes are assigned to parts (default: metis)",
    )  # fmt: skip
    parser.add_argument(
        "--plot", default=None, metavar="PNG",
        help="also draw the projected memory per machine into this PNG file",
    )  # fmt: skip
    add_option(parser, "seed", 0)


def rank_bytes(root: str, rank: int, parts: int) -> dict:
    """Loads part ``rank`` as a rank does; the bytes of its stores' tensors.

    With them, the CSC that PyG's sampler builds of the part's edges (the
    kind ``"sampler"``), cut to the part's columns as pyg_orch's
    distributed sampler cuts it.

    Returns:
        ``{"kinds": {kind: bytes}, "tensors": [(path, shape, bytes)],
        "nodes": local nodes, "edges": local edges}``.
    """
    from torch_geometric.sampler import NeighborSampler

    from pyg_orch.distributed import load_partition
    from pyg_orch.distributed.engine.books import local_columns
    from pyg_orch.distributed.engine.memory import KINDS, store_tensors

    feature_store, graph_store = load_partition(root, rank, parts)
    sampler = NeighborSampler((feature_store, graph_store), num_neighbors=[1])
    local_columns(sampler, graph_store)
    tensors = store_tensors(feature_store, graph_store, sampler)
    kinds = dict.fromkeys(KINDS, 0)
    for tensor in tensors:
        kinds[tensor.kind] += tensor.bytes
    edge_index = graph_store.get_edge_index(edge_type=None, layout="coo")
    return {
        "kinds": kinds,
        "tensors": [(t.path, t.shape, t.bytes) for t in tensors],
        "nodes": feature_store.get_global_id(None).numel(),
        "edges": edge_index.size(1),
        "hot_nodes": getattr(feature_store.hot_cache, "num_hot", 0),
    }


def _measured_in_a_fresh_process(root: str, rank: int, parts: int) -> dict:
    # A rank's process holds nothing else: the bytes are its stores' alone.
    call = f"rank_bytes({root!r}, {rank}, {parts})"
    script = (
        "import pickle, sys\n"
        "from pyg_orch.benchmark.memory import rank_bytes\n"
        f"sys.stdout.buffer.write(pickle.dumps({call}))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, check=True, timeout=1800
    )
    return pickle.loads(result.stdout)


def _status(key: str) -> int:
    # A line of /proc/self/status, in bytes (VmRSS: now, VmHWM: the peak).
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(key):
                return int(line.split()[1]) * 1024
    raise KeyError(key)


def _reset_peak() -> None:
    # Linux's peak resident size (VmHWM) starts again from the current one.
    with open("/proc/self/clear_refs", "w") as clear_refs:
        clear_refs.write("5")


def partition_peak(graph_path: str, root: str, parts: int, options: dict) -> dict:
    """``partition_graph``'s peak resident memory above the loaded graph.

    Loads the graph saved at ``graph_path``, then partitions it into
    ``root``, with Linux's peak resident size reset after the load; METIS's
    own call is measured apart (its peak above the memory before it).

    Returns:
        ``{"peak": bytes above the loaded graph, "metis": bytes}``.
    """
    import torch

    import pyg_orch.distributed.partition as partition

    data = torch.load(graph_path, weights_only=False)
    base = _status("VmRSS")
    peaks, metis = [], {}
    run_metis = partition.metis_edge_parts

    def measured_metis(*args: object, **kwargs: object) -> object:
        peaks.append(_status("VmHWM"))
        before = _status("VmRSS")
        _reset_peak()
        parts_of = run_metis(*args, **kwargs)
        metis["bytes"] = _status("VmHWM") - before
        peaks.append(_status("VmHWM"))
        _reset_peak()
        return parts_of

    partition.metis_edge_parts = measured_metis
    _reset_peak()
    partition.partition_graph(data, parts, root, **options)
    peaks.append(_status("VmHWM"))
    return {"peak": max(peaks) - base, "metis": metis.get("bytes", 0)}


def _peak_in_a_fresh_process(graph_path: str, parts: int, options: dict) -> dict:
    # The partitioning's own process: its peak is the partitioning's.
    with tempfile.TemporaryDirectory() as root:
        call = f"partition_peak({graph_path!r}, {root!r}, {parts}, {options!r})"
        script = (
            "import pickle, sys\n"
            "from pyg_orch.benchmark.memory import partition_peak\n"
            f"sys.stdout.buffer.write(pickle.dumps({call}))\n"
        )
        result = subprocess.run(
            [sys.executable, "-c", script], capture_output=True, check=True,
            timeout=3600,
        )  # fmt: skip
    return pickle.loads(result.stdout)


def _row(values: tuple) -> str:
    cells = zip(values, _COLUMNS, strict=True)
    return "".join(f"{value!s:>{width}}" for value, (_, width) in cells)


def _full_length(tensors: list, num_nodes: int, num_edges: int) -> int:
    # Bytes of the tensors with a dimension of the whole graph's length.
    return sum(
        size
        for _, shape, size in tensors
        if any(dim in (num_nodes, num_nodes + 1, num_edges) for dim in shape)
    )


def run(args: argparse.Namespace) -> None:
    """Partitions each graph into each number of parts and measures every rank."""
    import torch

    from pyg_orch.datasets import power_law_graph
    from pyg_orch.distributed import partition_graph

    print(
        f"power-law graphs, {args.num_features} float32 features, mean in-degree "
        f"{args.avg_degree:g}; {args.method} parts, hot ratio {args.hot_ratio:g}; "
        f"MB of the tensors each rank's stores hold",
        flush=True,
    )
    print(_row(tuple(name for name, _ in _COLUMNS)), flush=True)
    constants, peaks = [], []
    options = {"hot_ratio": args.hot_ratio, "method": args.method, "seed": args.seed}
    for num_nodes in args.num_nodes:
        data = power_law_graph(
            num_nodes, avg_degree=args.avg_degree, num_features=args.num_features,
            seed=args.seed,
        )  # fmt: skip
        whole = data.x.numel() * data.x.element_size() + data.edge_index.numel() * 8
        with tempfile.TemporaryDirectory() as folder:
            torch.save(data, f"{folder}/graph.pt")
            peak = _peak_in_a_fresh_process(f"{folder}/graph.pt", 2, options)
        peaks.append((num_nodes, whole, peak))
        measured_ranks = []
        for parts in args.parts:
            with tempfile.TemporaryDirectory() as root:
                partition_graph(data, parts, root, **options)
                for rank in range(parts):
                    measured = _measured_in_a_fresh_process(root, rank, parts)
                    measured_ranks.append(measured)
                    print(_rank_row(measured, num_nodes, parts, rank, data, whole),
                          flush=True)  # fmt: skip
        constants.append((num_nodes, _constants(measured_ranks, args.num_features)))
    for num_nodes, measured in constants:
        print(
            f"{num_nodes:,} nodes, bytes per local node: features "
            f"{_span(measured['feature'])} a feature, other {_span(measured['node'])}; "
            f"per local edge {_span(measured['edge'])}; per hot node "
            f"{_span(measured['hot'])}",
            flush=True,
        )  # fmt: skip
    for num_nodes, whole, peak in peaks:
        print(
            f"{num_nodes:,} nodes: partition_graph into 2 parts peaks "
            f"{peak['peak'] / _MB:.0f} MB above the loaded graph "
            f"({whole / _MB:.0f} MB), {peak['peak'] / whole:.2f}x its bytes; "
            f"METIS's own call {peak['metis'] / _MB:.0f} MB "
            f"({peak['metis'] / whole:.2f}x)",
            flush=True,
        )
    model = {key: max(values) for key, values in constants[-1][1].items()}
    projected = _project(model, args.num_features)
    if args.plot:
        _plot(projected, args.plot)


def _rank_row(
    measured: dict, num_nodes: int, parts: int, rank: int, data: Any, whole: int
) -> str:
    # One rank's line of the table.
    kinds = measured["kinds"]
    total = sum(kinds.values())
    ratio = (total - kinds["hot"]) / (whole / parts)
    full = _full_length(measured["tensors"], data.num_nodes, data.num_edges)
    return _row((
        f"{num_nodes:,}", parts, rank,
        *(f"{kinds[kind] / _MB:.1f}" for kind in _SHOWN),
        f"{total / _MB:.1f}", f"{whole / parts / _MB:.1f}",
        f"{ratio:.2f}", f"{full / _MB:.1f}",
    ))  # fmt: skip


def _constants(ranks: list[dict], num_features: int) -> dict[str, list[float]]:
    # Each rank's bytes: per local node and feature, per local node besides
    # its features, per local edge, per hot node.
    constants: dict[str, list[float]] = {"feature": [], "node": [], "edge": [],
                                         "hot": []}  # fmt: skip
    for measured in ranks:
        kinds, nodes = measured["kinds"], max(measured["nodes"], 1)
        constants["feature"].append(kinds["features"] / nodes / num_features)
        constants["node"].append(sum(kinds[k] for k in _NODE_KINDS) / nodes)
        constants["edge"].append(
            sum(kinds[k] for k in _EDGE_KINDS) / max(measured["edges"], 1)
        )
        constants["hot"].append(kinds["hot"] / max(measured["hot_nodes"], 1))
    return constants


def _span(values: list[float]) -> str:
    return f"{min(values):.1f}-{max(values):.1f}"


def _project(model: dict[str, float], num_features: int) -> list[tuple]:
    # GB per machine of each target graph: the measured constants (each
    # rank's largest, of the largest graph) times its nodes and edges. A hot
    # node's bytes beyond its id scale with the features.
    per_feature_hot = (model["hot"] - _HOT_ID_BYTES) / num_features
    print(
        f"projected GB per machine (constants of the largest graph: "
        f"{model['feature']:.1f} B a feature and {model['node']:.1f} B besides "
        f"per node, {model['edge']:.1f} B per edge, {_HOT_ID_BYTES} + "
        f"{per_feature_hot:.1f} x features B per hot node):"
    )
    header = ["graph", "machines", "whole GB", "whole/M"]
    header += [f"hot {ratio:g}" for ratio in _HOT_RATIOS]
    print(f"{header[0]:>22}" + "".join(f"{name:>10}" for name in header[1:]))
    rows = []
    for name, nodes, edges, features in _TARGETS:
        whole = nodes * features * model["feature"] + edges * 16
        for machines in _MACHINES:
            base = (
                nodes / machines * (features * model["feature"] + model["node"])
                + edges / machines * model["edge"]
            )
            hot = _HOT_ID_BYTES + features * per_feature_hot
            per_machine = [(base + ratio * nodes * hot) / _GB for ratio in _HOT_RATIOS]
            rows.append((name, machines, whole / _GB, per_machine))
            cells = [machines, f"{whole / _GB:.0f}", f"{whole / machines / _GB:.1f}"]
            cells += [f"{value:.1f}" for value in per_machine]
            line = "".join(f"{cell!s:>10}" for cell in cells)
            print(f"{name:>22}{line}", flush=True)
    return rows


def _plot(rows: list[tuple], path: str) -> None:
    # GB per machine against machines, one line per graph and hot ratio.
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(6.4, 4.0))
    for color, name in enumerate(dict.fromkeys(row[0] for row in rows)):
        mine = [row for row in rows if row[0] == name]
        machines = [row[1] for row in mine]
        styles = zip(_HOT_RATIOS, ("-", "--", ":"), strict=True)
        for k, (ratio, style) in enumerate(styles):
            axis.plot(machines, [row[3][k] for row in mine], marker="o",
                      color=f"C{color}", linestyle=style,
                      label=f"{name}, hot {ratio:g}")  # fmt: skip
    axis.set_xscale("log", base=2)
    axis.set_xticks(_MACHINES, [str(machines) for machines in _MACHINES])
    axis.set_yscale("log")
    axis.set_xlabel("machines")
    axis.set_ylabel("GB per machine (projected)")
    axis.legend(fontsize="small")
    figure.tight_layout()
    figure.savefig(path, dpi=120)
