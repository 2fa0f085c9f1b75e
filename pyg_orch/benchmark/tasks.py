"""The training tasks the epoch benchmark times: plain PyG against pyg_orch.

Each task builds its graph, the plain PyG configuration (PyG's loader handed
pyg_orch's sampler at ``hot_ratio=0``, as PyG cannot sample here without
compiled extensions, and the model with ``trim_to_layer``) and the pyg_orch
one at a hot ratio, and the loss of a batch:

- ``node``: GraphSAGE node classification on the homogeneous power-law graph;
- ``hetero``: :class:`HeteroGNN` (``HeteroConv`` of ``SAGEConv``, as
  ``to_hetero(GraphSAGE)`` computes it, or of ``GATConv``) classifying the
  papers of the ogbn-mag-shaped graph of
  :func:`~pyg_orch.datasets.power_law_hetero_graph`;
- ``link``: GraphSAGE link prediction (dot products, binary negatives) on the
  homogeneous power-law graph.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from contextlib import nullcontext
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor
from torch_geometric.data import Data, HeteroData
from torch_geometric.loader import LinkNeighborLoader, NeighborLoader
from torch_geometric.nn import GATConv, GraphSAGE, HeteroConv, Linear, SAGEConv
from torch_geometric.utils import trim_to_layer

from pyg_orch.benchmark.graph import benchmark_graph
from pyg_orch.datasets import power_law_hetero_graph
from pyg_orch.loading.link_loader import OrchLinkNeighborLoader
from pyg_orch.loading.node_loader import OrchNeighborLoader
from pyg_orch.nn.model import OrchModel
from pyg_orch.nn.model_checks import PRECISIONS
from pyg_orch.sampling import OrchNeighborSampler

#: What each task's plain PyG row is called.
BASELINES = {
    "node": "PyG NeighborLoader + GraphSAGE (trim_to_layer)",
    "hetero": "PyG NeighborLoader + HeteroConv(SAGEConv) (trim)",
    "link": "PyG LinkNeighborLoader + GraphSAGE (trim_to_layer)",
}
# Seed edges of the link task: a fixed random subset, so that presampling
# them costs a few hundred batches whatever the graph's size.
_LINK_SEEDS = 100_000

Configuration = tuple[Any, torch.nn.Module, Callable[[Any], Any]]


def loader_arguments(data: Data, args: argparse.Namespace) -> dict:
    """What the baseline and pyg_orch share: seeds, fan-outs and batches."""
    return {
        "num_neighbors": args.num_neighbors,
        "input_nodes": data.train_mask,
        "batch_size": args.batch_size,
        "shuffle": True,
        # Filtered in the training process, where the benchmark times it.
        "filter_per_worker": False,
    }


def graph_sage(
    data: Data, args: argparse.Namespace, out: int | None = None
) -> GraphSAGE:
    """The benchmarks' GraphSAGE: one layer per fan-out, ``args.hidden_channels``.

    ``out`` output channels; ``None``: one per class of ``data.y``.
    """
    return GraphSAGE(
        data.num_features,
        args.hidden_channels,
        num_layers=len(args.num_neighbors),
        out_channels=int(data.y.max()) + 1 if out is None else out,
    )


def baseline(
    data: Data, args: argparse.Namespace, precision: str = "fp32"
) -> Configuration:
    """PyG's ``NeighborLoader`` and ``GraphSAGE`` with ``trim_to_layer``.

    With a ``precision`` other than ``"fp32"``, the forward runs under
    ``torch.autocast`` in it: the one-line mixed precision of plain PyG.
    Returns the loader, the model and the forward function of a batch.
    """
    # PyG cannot sample here without pyg-lib or torch-sparse: hand it ours.
    sampler = OrchNeighborSampler(data, num_neighbors=args.num_neighbors)
    loader = NeighborLoader(
        data, neighbor_sampler=sampler, **loader_arguments(data, args)
    )
    model = graph_sage(data, args)

    def forward(batch: Data) -> Tensor:
        with _autocast(precision, batch.x.device.type):
            return _trimmed(model, batch)[: batch.batch_size]

    return loader, model, forward


def _autocast(precision: str, device_type: str) -> Any:
    # Plain PyG's one-line mixed precision, or nothing for fp32.
    dtype = PRECISIONS[precision]
    return torch.autocast(device_type, dtype=dtype) if dtype else nullcontext()


def graph(task: str, args: argparse.Namespace) -> tuple[Any, str]:
    """The task's graph and a line that describes it."""
    if task != "hetero":
        return benchmark_graph(args)
    start = time.perf_counter()
    data = power_law_hetero_graph(
        args.scale, num_features=args.num_features, seed=args.seed
    )
    return data, (
        f"ogbn-mag-shaped graph (scale {args.scale:g}): {data.num_nodes:,} nodes "
        f"of {len(data.node_types)} types, {data.num_edges:,} edges of "
        f"{len(data.edge_types)} types, {args.num_features} features (built in "
        f"{time.perf_counter() - start:.1f} s)"
    )


def configuration(
    task: str,
    data: Any,
    args: argparse.Namespace,
    hot_ratio: float | None,
    precision: str = "fp32",
) -> Configuration:
    """The loader, model and forward of ``task`` (``hot_ratio=None``: plain PyG).

    ``precision`` (node and hetero tasks): plain PyG under autocast, or
    pyg_orch with ``OrchModel``'s ``precision``, with the features kept in
    that dtype.
    """
    if task == "node":
        return (
            baseline(data, args, precision)
            if hot_ratio is None
            else _orch_node(data, args, hot_ratio, precision)
        )
    if task == "hetero":
        return _hetero(data, args, hot_ratio, precision)
    return _link(data, args, hot_ratio)


def loss(task: str, out: Any, batch: Any) -> Tensor:
    """The training loss of ``batch`` given the forward's output."""
    if task == "node":
        return F.cross_entropy(out.float(), batch.y[: batch.batch_size])
    if task == "hetero":
        papers = batch["paper"]
        return F.cross_entropy(out.float(), papers.y[: papers.batch_size])
    src, dst = batch.edge_label_index
    scores = (out[src] * out[dst]).sum(-1)
    return F.binary_cross_entropy_with_logits(scores, batch.edge_label)


def _orch_node(
    data: Data, args: argparse.Namespace, hot_ratio: float, precision: str
) -> Configuration:
    if precision != "fp32":
        # Held once, in half width, as feature_dtype's documentation advises.
        data.x = data.x.to(PRECISIONS[precision])
    loader = OrchNeighborLoader(
        data, hot_ratio=hot_ratio, hot_method=args.hot_method,
        feature_dtype=PRECISIONS[precision], **loader_arguments(data, args),
    )  # fmt: skip
    model = OrchModel(graph_sage(data, args), loader, precision=precision)
    return loader, model, model


def _hetero(
    data: HeteroData,
    args: argparse.Namespace,
    hot_ratio: float | None,
    precision: str = "fp32",
) -> Configuration:
    arguments = {
        "num_neighbors": args.num_neighbors,
        "input_nodes": ("paper", data["paper"].train_mask),
        "batch_size": args.batch_size,
        "shuffle": True,
        # Filtered in the training process, where the benchmark times it.
        "filter_per_worker": False,
    }
    papers = data["paper"]
    model = HeteroGNN(
        data.metadata(),
        papers.num_features,
        args.hidden_channels,
        int(papers.y.max()) + 1,
        len(args.num_neighbors),
        conv=getattr(args, "conv", "sage"),
    )
    if hot_ratio is None:
        sampler = OrchNeighborSampler(data, num_neighbors=args.num_neighbors)
        loader = NeighborLoader(data, neighbor_sampler=sampler, **arguments)

        def forward(batch: HeteroData) -> Tensor:
            with _autocast(precision, batch["paper"].x.device.type):
                out = _trimmed(model, batch)["paper"]
            return out[: batch["paper"].batch_size]

        return loader, model, forward
    loader = OrchNeighborLoader(
        data, hot_ratio=hot_ratio, hot_method=args.hot_method,
        cache=getattr(args, "cache", None), feature_dtype=PRECISIONS[precision],
        **arguments,
    )  # fmt: skip
    wrapped = OrchModel(model, loader, precision=precision)
    return loader, wrapped, wrapped


def _link(
    data: Data, args: argparse.Namespace, hot_ratio: float | None
) -> Configuration:
    generator = torch.Generator().manual_seed(args.seed)
    seeds = torch.randperm(data.num_edges, generator=generator)[:_LINK_SEEDS]
    arguments = {
        "edge_label_index": data.edge_index[:, seeds],
        "batch_size": args.batch_size,
        "neg_sampling": "binary",
        "shuffle": True,
        "filter_per_worker": False,
    }
    model = graph_sage(data, args, out=args.hidden_channels)
    if hot_ratio is None:
        sampler = OrchNeighborSampler(data, num_neighbors=args.num_neighbors)
        loader = LinkNeighborLoader(
            data, args.num_neighbors, neighbor_sampler=sampler, **arguments
        )

        def forward(batch: Data) -> Tensor:
            return _trimmed(model, batch)[: batch.num_sampled_nodes[0]]

        return loader, model, forward
    loader = OrchLinkNeighborLoader(
        data, args.num_neighbors, hot_ratio=hot_ratio, hot_method=args.hot_method,
        **arguments,
    )  # fmt: skip
    wrapped = OrchModel(model, loader)
    return loader, wrapped, wrapped


#: The relation convs a :class:`HeteroGNN` is built of.
HETERO_CONVS = ("sage", "gat")


class HeteroGNN(torch.nn.Module):
    """A GNN on a heterogeneous graph, as PyG's hierarchical example builds it.

    One ``HeteroConv`` per layer (relations summed, ReLU between layers), of
    ``SAGEConv`` (``conv="sage"``: what ``to_hetero(GraphSAGE)`` computes) or
    of one-head ``GATConv`` with a linear of each node type's own features
    added (``conv="gat"``: ``conv(x, edge_index) + lin(x)``, PyG's
    heterogeneous GAT in its tutorial). It trims each layer with PyG's ``trim_to_layer``
    when given per-hop counts, as PyG's ``examples/hetero/hierarchical_sage.py``
    does; ``to_hetero`` models cannot (PyG 2.8's ``TrimToLayer`` refuses the
    pair of node counts of a relation between two node types).

    Example:
        >>> metadata = (["a", "b"], [("a", "to", "b"), ("b", "rev_to", "a")])
        >>> model = HeteroGNN(metadata, 4, 8, 2, num_layers=2, conv="gat")
        >>> x = {"a": torch.ones(3, 4), "b": torch.ones(2, 4)}
        >>> edges = torch.tensor([[0, 1], [1, 0]])
        >>> out = model(x, {("a", "to", "b"): edges, ("b", "rev_to", "a"): edges})
        >>> out["a"].shape, out["b"].shape
        (torch.Size([3, 2]), torch.Size([2, 2]))
    """

    def __init__(
        self,
        metadata: tuple[list[str], list[tuple[str, str, str]]],
        in_channels: int,
        hidden_channels: int,
        out_channels: int,
        num_layers: int,
        conv: str = "sage",
    ) -> None:
        super().__init__()
        if conv not in HETERO_CONVS:
            raise ValueError(f"conv must be one of {HETERO_CONVS}, got {conv!r}")
        sizes = [in_channels] + [hidden_channels] * (num_layers - 1) + [out_channels]
        self.convs = torch.nn.ModuleList(
            HeteroConv(
                {
                    edge_type: _relation_conv(conv, edge_type, size_in, size_out)
                    for edge_type in metadata[1]
                },
                aggr="sum",
            )
            for size_in, size_out in zip(sizes[:-1], sizes[1:], strict=True)
        )
        # The root linears: GATConv has no weight of a node's own features.
        self.lins = torch.nn.ModuleList(
            torch.nn.ModuleDict(
                {node_type: Linear(size_in, size_out) for node_type in metadata[0]}
                if conv == "gat"
                else {}
            )
            for size_in, size_out in zip(sizes[:-1], sizes[1:], strict=True)
        )

    def forward(
        self,
        x: dict[str, Tensor],
        edge_index: dict[tuple[str, str, str], Tensor],
        num_sampled_nodes: dict[str, list[int]] | None = None,
        num_sampled_edges: dict[tuple[str, str, str], list[int]] | None = None,
    ) -> dict[str, Tensor]:
        """Outputs per node type (trimmed to each layer when counts are given)."""
        for layer, conv in enumerate(self.convs):
            if num_sampled_nodes is not None:
                x, edge_index, _ = trim_to_layer(
                    layer, num_sampled_nodes, num_sampled_edges, x, edge_index
                )
            lins = self.lins[layer]
            x = {
                node_type: value + lins[node_type](x[node_type])
                if node_type in lins
                else value
                for node_type, value in conv(x, edge_index).items()
            }
            if layer < len(self.convs) - 1:
                x = {node_type: value.relu() for node_type, value in x.items()}
        return x


def _trimmed(model: torch.nn.Module, batch: Any) -> Any:
    # The plain model as PyG's examples run it on sampled batches.
    if isinstance(batch, HeteroData):
        return model(
            batch.x_dict,
            batch.edge_index_dict,
            batch.num_sampled_nodes_dict,
            batch.num_sampled_edges_dict,
        )
    return model(
        batch.x,
        batch.edge_index,
        num_sampled_nodes_per_hop=batch.num_sampled_nodes,
        num_sampled_edges_per_hop=batch.num_sampled_edges,
    )


def _relation_conv(
    conv: str, edge_type: tuple[str, str, str], size_in: int, size_out: int
) -> torch.nn.Module:
    if conv == "gat":
        return GATConv(size_in, size_out, add_self_loops=False)
    return SAGEConv(size_in, size_out)
