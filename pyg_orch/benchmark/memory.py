"""What a partitioned graph costs each machine in memory, against the whole graph
divided by the parts.

For each graph size and number of parts it partitions a power-law graph with
100 features (``partition_graph``, hot vertices replicated), loads every part
in a fresh process as a rank does (``load_partition``) and sums the bytes of
every tensor the rank's two stores hold, each storage once, by kind: feature
rows and edge values, labels, the part's edges, node and edge ids, maps (node
or edge -> part, id -> row) and the hot replica. A tensor as long as the
whole graph's node or edge count is full-length: it does not shrink with more
machines. ``ratio`` is a rank's bytes without the hot replica over the whole
graph's (``x`` and ``edge_index``) divided by the parts: 1.00 would be a
perfect split. The last lines give the bytes per local node (features, ids)
and per local edge (edges, edge ids) of each graph, which a formula for
larger graphs multiplies.
"""

from __future__ import annotations

import argparse
import pickle
import subprocess
import sys
import tempfile

from pyg_orch.options import add_option, positive_int

# The table's columns: (header, width).
_COLUMNS = (
    ("nodes", 10), ("parts", 6), ("rank", 5), ("features", 9), ("labels", 7),
    ("edges", 7), ("sampler", 8), ("ids", 6), ("maps", 6), ("other", 6),
    ("hot", 6), ("total MB", 9), ("whole/P", 8), ("ratio", 6), ("full MB", 8),
)  # fmt: skip
# The kinds of the table's columns, in its order.
_SHOWN = ("features", "labels", "edges", "sampler", "ids", "maps", "other", "hot")
# The kinds that grow with a part's nodes, and with its edges.
_NODE_KINDS, _EDGE_KINDS = ("features", "labels", "ids"), ("edges", "sampler")
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
    from pyg_orch.datasets import power_law_graph
    from pyg_orch.distributed import partition_graph

    print(
        f"power-law graphs, {args.num_features} float32 features, mean in-degree "
        f"{args.avg_degree:g}; {args.method} parts, hot ratio {args.hot_ratio:g}; "
        f"MB of the tensors each rank's stores hold",
        flush=True,
    )
    print(_row(tuple(name for name, _ in _COLUMNS)), flush=True)
    constants = []
    for num_nodes in args.num_nodes:
        data = power_law_graph(
            num_nodes, avg_degree=args.avg_degree, num_features=args.num_features,
            seed=args.seed,
        )  # fmt: skip
        whole = data.x.numel() * data.x.element_size() + data.edge_index.numel() * 8
        per_node, per_edge = [], []
        for parts in args.parts:
            with tempfile.TemporaryDirectory() as root:
                partition_graph(
                    data, parts, root, hot_ratio=args.hot_ratio, method=args.method,
                    seed=args.seed,
                )  # fmt: skip
                for rank in range(parts):
                    measured = _measured_in_a_fresh_process(root, rank, parts)
                    kinds = measured["kinds"]
                    total = sum(kinds.values())
                    ratio = (total - kinds["hot"]) / (whole / parts)
                    full = _full_length(
                        measured["tensors"], data.num_nodes, data.num_edges
                    )
                    print(_row((
                        f"{num_nodes:,}", parts, rank,
                        *(f"{kinds[kind] / _MB:.1f}" for kind in _SHOWN),
                        f"{total / _MB:.1f}", f"{whole / parts / _MB:.1f}",
                        f"{ratio:.2f}", f"{full / _MB:.1f}",
                    )), flush=True)  # fmt: skip
                    node_bytes = sum(kinds[kind] for kind in _NODE_KINDS)
                    edge_bytes = sum(kinds[kind] for kind in _EDGE_KINDS)
                    per_node.append(node_bytes / max(measured["nodes"], 1))
                    per_edge.append(edge_bytes / max(measured["edges"], 1))
        constants.append((num_nodes, per_node, per_edge))
    for num_nodes, per_node, per_edge in constants:
        print(
            f"{num_nodes:,} nodes: bytes per local node (features, labels, ids) "
            f"{min(per_node):.1f}-{max(per_node):.1f}, per local edge (edges, "
            f"sampler) "
            f"{min(per_edge):.1f}-{max(per_edge):.1f}",
            flush=True,
        )
