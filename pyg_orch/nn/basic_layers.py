"""A ``BasicGNN``'s layers, each computed only for the rows the next one needs.

:class:`BasicLayers` is the homogeneous twin of
:class:`~pyg_orch.nn.hetero_layers.HeteroLayers`: ``OrchModel`` hands it a
batch's features, edges and hot values, and it runs the wrapped model's convs
on trimmed rows, aggregating ``SAGEConv``, ``GraphConv`` and ``GINConv`` with
pyg_orch's kernels and feeding the hot rows' given aggregates into the bottom
layer.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor
from torch_geometric.data import Data
from torch_geometric.nn import GCNConv
from torch_geometric.nn.conv.gcn_conv import gcn_norm
from torch_geometric.nn.models.basic_gnn import BasicGNN
from tqdm.auto import tqdm

from pyg_orch.aggregation import aggregate_neighbours
from pyg_orch.kernels.aggregate import aggregate
from pyg_orch.nn.convs import (
    cache_kind,
    cold_rows,
    conv_output,
    csr_adjacency,
    fused_kind,
    row_pointers,
    sort_by_destination,
    takes_adjacency,
)
from pyg_orch.nn.whole_graph import WholeGraph


class BasicLayers:
    """Runs a ``BasicGNN``'s layers on trimmed rows, hot rows given.

    Args:
        model: the wrapped ``BasicGNN``; hooks on its convs put given
            aggregations in place of the hot rows' (PyG's message passing).

    Attributes:
        kinds: the hot-cache aggregation that serves each conv
            (:func:`~pyg_orch.nn.convs.cache_kind`), ``None`` where none does.

    Example:
        >>> from torch_geometric.nn import GraphSAGE
        >>> layers = BasicLayers(GraphSAGE(4, 8, num_layers=2))
        >>> layers.kinds
        ['mean', 'mean']
    """

    def __init__(self, model: BasicGNN) -> None:
        self.model = model
        self.kinds = [cache_kind(conv) for conv in model.convs]
        # The hot rows and their values while a conv runs through PyG.
        self._hot_rows: tuple[Tensor, Tensor] | None = None
        # The graph inference() aggregates over, built once per graph.
        self._whole_graph = WholeGraph()
        for conv in model.convs:
            conv.register_aggregate_forward_hook(self._inject_hot_rows)
            conv.register_message_and_aggregate_forward_hook(self._inject_hot_rows)

    def run(
        self,
        x: Tensor,
        edge_index: tuple[Tensor, Tensor],
        per_hop: tuple[list[int], list[int]],
        hot: tuple[Tensor, Tensor] | None,
        embedded: bool,
        edge_values: dict[str, Tensor],
    ) -> Tensor:
        """Every layer on a batch, each only for the rows the next one needs.

        Args:
            x: the batch's features (on the model's device).
            edge_index: the batch's ``(src, dst)``, hop by hop.
            per_hop: ``num_sampled_nodes`` and ``num_sampled_edges``.
            hot: ``(hot_index, hot values)`` of the bottom layer, or ``None``.
            embedded: the hot values are the bottom layer's whole output.
            edge_values: the batch's ``edge_weight`` / ``edge_attr`` the
                convs take.

        Returns:
            The last layer's rows, the seed nodes first.
        """
        src, dst = edge_index
        nodes_per_hop, edges_per_hop = per_hop
        gcn_weight = self._gcn_weights(
            src, dst, x.size(0), edge_values.get("edge_weight")
        )
        num_layers = self.model.num_layers
        relu = False  # the previous layer's relu is this layer's to apply
        for layer in range(num_layers):
            num_dst = sum(nodes_per_hop[: num_layers - layer])
            num_edges = sum(edges_per_hop[: num_layers - layer])
            num_src = sum(nodes_per_hop[: num_layers - layer + 1])
            # A slice of all rows would cost a gradient of all rows in backward.
            x = x[:num_src] if x.size(0) != num_src else x
            edges = (src[:num_edges], dst[:num_edges])
            # Trimmed with the edges, as PyG's trim_to_layer trims them.
            values = {name: v[:num_edges] for name, v in edge_values.items()}
            if layer == 0 and embedded:
                x = self._embedded_layer(x, num_dst, edges, gcn_weight, hot)
            else:
                layer_hot = hot if layer == 0 else None
                x = self._layer(
                    layer, x, num_dst, edges, gcn_weight, layer_hot, relu, values
                )
            relu = self._defers_relu(layer, bool(edge_values))
            x = self._between_layers(layer, x, act=not relu)
        return x

    def _inject_hot_rows(
        self, module: Any, inputs: Any, output: Tensor
    ) -> Tensor | None:
        # Replaces the aggregation of the hot rows by their cached aggregates.
        if self._hot_rows is None:
            return None
        hot_index, hot_value = self._hot_rows
        return output.index_copy(0, hot_index, hot_value.to(output.dtype))

    def _gcn_weights(
        self, src: Tensor, dst: Tensor, num_nodes: int, edge_weight: Tensor | None
    ):
        # GCN normalises by degrees of the whole batch graph, as the plain
        # model does when it runs untrimmed on the batch.
        if "gcn" not in self.kinds:
            return None
        edge_index, weight = gcn_norm(
            torch.stack([src, dst]),
            edge_weight,
            num_nodes,
            dtype=next(self.model.parameters()).dtype,
        )
        return edge_index, weight

    def _layer(
        self,
        layer: int,
        x: Tensor,
        num_dst: int,
        edges: tuple[Tensor, Tensor],
        gcn_weight: Any,
        hot: tuple[Tensor, Tensor] | None,
        relu: bool = False,
        edge_values: dict[str, Tensor] | None = None,
    ) -> Tensor:
        # relu: x is the previous layer's output before its relu (only for a
        # conv aggregated here, see _defers_relu). edge_values: the layer's
        # edge_weight / edge_attr, which PyG's message passing takes.
        conv = self.model.convs[layer]
        if self.kinds[layer] == "gcn":
            return self._gcn_layer(conv, x, num_dst, gcn_weight, hot)
        kind = None if edge_values else self.fused_kind(conv)
        if kind is not None:
            return _fused_conv(conv, kind, x, num_dst, edges, hot, relu)
        return self._conv(conv, x, num_dst, edges, hot, edge_values or {})

    def fused_kind(self, conv: torch.nn.Module) -> str | None:
        return fused_kind(conv, own_hooks=(self._inject_hot_rows,))

    def _defers_relu(self, layer: int, edge_values: bool) -> bool:
        # Whether the relu after `layer` is left to the next layer's
        # aggregation, which takes its gradient as it writes the sources'
        # (no pass over the rows of its own): when the activation is a plain
        # ReLU, no norm comes between (dropout commutes with it) and the next
        # conv is aggregated here (so not with edge values, which PyG's
        # message passing takes).
        model = self.model
        if edge_values or layer == model.num_layers - 1:
            return False
        if type(model.act) is not torch.nn.ReLU:
            return False
        if model.act._forward_hooks or model.act._forward_pre_hooks:
            return False
        if type(model.norms[layer]) is not torch.nn.Identity:
            return False
        return self.fused_kind(model.convs[layer + 1]) is not None

    def _embedded_layer(self, x, num_dst, edges, gcn_weight, hot) -> Tensor:
        # The hot rows' whole output is given: computed without neighbours
        # (a hot value of None), then replaced.
        hot_index, hot_output = hot
        out = self._layer(0, x, num_dst, edges, gcn_weight, (hot_index, None))
        return out.index_copy(0, hot_index, hot_output.to(out.dtype))

    def _conv(self, conv, x, num_dst, edges, hot, edge_values) -> Tensor:
        src, dst = edges
        if hot is not None:
            # Hot rows come from the cache: their sampled edges are not needed.
            cold = cold_rows(num_dst, hot[0])[dst]
            src, dst = src[cold], dst[cold]
            edge_values = {name: v[cold] for name, v in edge_values.items()}
        # Under autocast, torch's sparse product would get bfloat16, which it
        # lacks on the CPU: PyG's message passing then (slower, but exact),
        # as with edge values, which it takes as the plain model passes them.
        autocast = torch.is_autocast_enabled(x.device.type)
        if takes_adjacency(conv) and not (autocast or edge_values):
            ones = x.new_ones(src.numel())
            adjacency, size = csr_adjacency(src, dst, ones, num_dst, x.size(0)), None
        else:
            adjacency, size = torch.stack([src, dst]), (x.size(0), num_dst)
        self._hot_rows = hot if hot is not None and hot[1] is not None else None
        try:
            return conv((x, x[:num_dst]), adjacency, size=size, **edge_values)
        finally:
            self._hot_rows = None

    def _gcn_layer(self, conv: GCNConv, x, num_dst, gcn_weight, hot) -> Tensor:
        (src, dst), weight = gcn_weight
        keep = dst < num_dst
        if hot is not None:
            keep &= cold_rows(num_dst, hot[0])[dst.clamp(max=num_dst - 1)]
        adjacency = csr_adjacency(
            src[keep], dst[keep], weight[keep], num_dst, x.size(0)
        )
        # Under autocast lin's output is half width, and torch's sparse product
        # has no bfloat16 on the CPU: it runs in the adjacency's dtype.
        with torch.autocast(x.device.type, enabled=False):
            out = torch.sparse.mm(adjacency, conv.lin(x).to(adjacency.dtype))
        if hot is not None and hot[1] is not None:
            out = out.index_copy(0, hot[0], conv.lin(hot[1]).to(out.dtype))
        return out + conv.bias if conv.bias is not None else out

    def _between_layers(self, layer: int, x: Tensor, act: bool = True) -> Tensor:
        model = self.model
        if layer == model.num_layers - 1:
            return model.lin(x) if hasattr(model, "lin") else x
        act = model.act if act else None
        if act is not None and model.act_first:
            x = act(x)
        x = model.norms[layer](x)
        if act is not None and not model.act_first:
            x = act(x)
        return model.dropout(x)

    @torch.no_grad()
    def inference(
        self,
        x: Tensor,
        data: Data,
        edge_weight: Tensor | None,
        batch_size: int,
        progress: bool,
    ) -> Tensor:
        """Exact full-neighbourhood outputs of every node, layer by layer.

        Each layer's aggregation over every node's whole neighbourhood comes
        from the Numba kernels, ``batch_size`` nodes at a time, and the layer's
        weights are applied on the model's device (see
        :meth:`~pyg_orch.OrchModel.inference`).

        Args:
            x: every node's features on the CPU, C-contiguous, in the model's
                dtype.
            data: the whole graph.
            edge_weight: the graph's ``edge_weight`` the convs read, or
                ``None``.
            batch_size: nodes per chunk.
            progress: show a tqdm bar over layers.

        Returns:
            ``[num_nodes, out_channels]`` on the CPU.
        """
        device = next(self.model.parameters()).device
        for layer in tqdm(range(self.model.num_layers), disable=not progress):
            colptr, row, kind, norm, weight = self._whole_graph.arguments(
                data, self.kinds[layer], edge_weight, x.numpy().dtype
            )
            chunks = []
            for nodes in torch.arange(data.num_nodes).split(batch_size):
                agg = torch.empty(nodes.numel(), x.size(1), dtype=x.dtype)
                aggregate(
                    colptr.numpy(), row.numpy(), x.numpy(), nodes.numpy(), kind,
                    agg.numpy(), norm, edge_weight=weight,
                )  # fmt: skip
                rows = x[nodes].to(device)
                out = self.given_aggregation(layer, rows, agg.to(device))
                chunks.append(out.cpu())
            x = torch.cat(chunks)
        return x

    def given_aggregation(self, layer: int, x: Tensor, agg: Tensor) -> Tensor:
        """Layer ``layer`` (and what follows it) for rows whose aggregation is given.

        What layer-wise inference runs: every row is "hot", its neighbour
        aggregation ``agg`` computed over the whole graph, so no edges are
        needed.

        Args:
            layer: the layer's index.
            x: the rows' input, on the model's device.
            agg: their aggregation of the layer's kind, on the same device.
        """
        device = x.device
        no_edges = torch.zeros(0, dtype=torch.long, device=device)
        everything = torch.arange(x.size(0), device=device)
        empty_gcn = ((no_edges, no_edges), x.new_zeros(0))
        out = self._layer(
            layer, x, x.size(0), (no_edges, no_edges), empty_gcn, (everything, agg)
        )
        return self._between_layers(layer, out)


def _fused_conv(
    conv, kind: str, x: Tensor, num_dst: int, edges, hot, relu: bool = False
) -> Tensor:
    # The conv's aggregation by pyg_orch's own kernels, then its layers.
    src, dst = edges
    hot_index = hot_value = None
    if hot is not None:
        # Hot rows come from the cache: their sampled edges are not needed.
        hot_index, hot_value = hot
        cold = cold_rows(num_dst, hot_index)[dst]
        src, dst = src[cold], dst[cold]
        if hot_value is None:  # their whole output is given later
            hot_index = None
    src, dst = sort_by_destination(src, dst)
    aggregation, x_dst = aggregate_neighbours(
        x, row_pointers(dst, num_dst), src, kind, hot_index, hot_value, relu
    )
    return conv_output(conv, aggregation, x_dst)
