"""``OrchModel``: runs a PyG ``BasicGNN`` on hot/cold mini-batches."""

from __future__ import annotations

import copy
import time
import warnings
from typing import Any

import torch
from torch import Tensor
from torch_geometric.data import Data
from torch_geometric.nn import GCNConv, GINConv, GraphConv, SAGEConv
from torch_geometric.nn.conv.gcn_conv import gcn_norm
from torch_geometric.nn.models.basic_gnn import BasicGNN
from torch_geometric.sampler.utils import to_csc
from tqdm.auto import tqdm

from pyg_orch.kernels.aggregate import aggregate, gcn_inverse_sqrt_degree
from pyg_orch.loader import OrchNeighborLoader
from pyg_orch.validation import check_model_arguments

# The CSR adjacency is the point of this module; torch's "beta" notice about it
# would repeat for every batch.
warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta")

# PyG aggregation names -> the hot cache's kinds.
_KINDS = {"mean": "mean", "add": "sum", "sum": "sum", "max": "max"}
# Aggregations torch.sparse.mm fuses (no message row per edge); others go
# through PyG's edge-wise message passing.
_FUSED = {"mean", "add", "sum"}


def cache_kind(conv: torch.nn.Module) -> str | None:
    """The hot-cache aggregation that serves ``conv`` exactly, or ``None``.

    A conv qualifies when its neighbour aggregation is parameter-free on the
    raw input: then the cache holds that aggregation over the full
    neighbourhood and the current weights are applied on the device.

    Example:
        >>> cache_kind(SAGEConv(8, 4)), cache_kind(GCNConv(8, 4))
        ('mean', 'gcn')
    """
    if isinstance(conv, GCNConv):
        plain = conv.normalize and conv.add_self_loops and not conv.improved
        return "gcn" if plain else None
    if isinstance(conv, SAGEConv) and conv.project:
        return None
    if isinstance(conv, SAGEConv | GraphConv | GINConv):
        return _KINDS.get(conv.aggr) if isinstance(conv.aggr, str) else None
    return None


def _csr(
    src: Tensor, dst: Tensor, weight: Tensor | None, num_dst: int, num_src: int
) -> Tensor:
    """A ``[num_dst, num_src]`` CSR adjacency, duplicates kept as entries."""
    if dst.numel() > 1 and bool((dst[1:] < dst[:-1]).any()):
        order = torch.argsort(dst, stable=True)
        src, dst = src[order], dst[order]
        weight = weight[order] if weight is not None else None
    crow = torch.zeros(num_dst + 1, dtype=torch.long, device=dst.device)
    torch.cumsum(torch.bincount(dst, minlength=num_dst), 0, out=crow[1:])
    if weight is None:
        weight = torch.ones(src.numel(), device=src.device)
    return torch.sparse_csr_tensor(
        crow, src, weight, (num_dst, num_src), check_invariants=False
    )


def _without_hooks(module: torch.nn.Module) -> torch.nn.Module:
    """A deep copy of ``module`` without the hooks registered on it."""
    # Hooks are bound methods of their owners: copying them would copy those.
    memo = {
        id(value): type(value)()
        for part in module.modules()
        for name, value in vars(part).items()
        if "hooks" in name and isinstance(value, dict)
    }
    return copy.deepcopy(module, memo)


def _synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _cold_rows(num_rows: int, hot_index: Tensor) -> Tensor:
    cold = torch.ones(num_rows, dtype=torch.bool, device=hot_index.device)
    cold[hot_index] = False
    return cold


class OrchModel(torch.nn.Module):
    r"""Wraps a PyG :class:`~torch_geometric.nn.models.basic_gnn.BasicGNN`
    (:class:`~torch_geometric.nn.models.GraphSAGE`,
    :class:`~torch_geometric.nn.models.GCN`,
    :class:`~torch_geometric.nn.models.GIN`) for
    :class:`~pyg_orch.OrchNeighborLoader` batches.

    Layer :math:`l` is computed only for the rows layer :math:`l+1` needs
    (bipartite ``(x_src, x_dst)`` calls on a CSR adjacency, so no message row
    per edge is materialised). In the bottom layer, the aggregation of every
    hot frontier node is the cached full-neighbourhood aggregate ``hot_agg``
    of the batch; the wrapped model's current weights are applied to it, so
    forward pass and gradients are exact. Returns predictions for the seed
    nodes. The wrapped model keeps its parameters: optimise
    ``OrchModel.parameters()`` or the model's, they are the same.

    Args:
        model: the PyG model to wrap (``jk=None``).
        loader: the loader whose hot cache feeds the bottom layer; it is told
            which aggregation the bottom layer needs.

    A bottom conv whose messages depend on weights (``GATConv``,
    ``SAGEConv(project=True)``, ...) cannot be served exactly: unless the
    loader's ``cache`` was set explicitly, the wrapper then switches it to
    ``"embedding"`` mode and warns. Hot rows of the bottom layer's output are
    then computed on the CPU from a snapshot of its weights, at most
    ``loader.staleness`` training steps old, and treated as constants.

    Raises:
        TypeError: ``model`` is not a ``BasicGNN``.
        NotImplementedError: the loader's explicitly chosen ``cache`` mode
            cannot serve the bottom conv, or ``jk`` is set.

    Example:
        >>> from torch_geometric.nn import GraphSAGE
        >>> from pyg_orch.datasets import load_cora
        >>> data = load_cora()
        >>> loader = OrchNeighborLoader(data, num_neighbors=[10, 5],
        ...                             batch_size=64, hot_ratio=0.2)
        >>> model = OrchModel(GraphSAGE(data.num_features, 16, num_layers=2,
        ...                             out_channels=7), loader)
        >>> model(next(iter(loader))).shape
        torch.Size([64, 7])
    """

    def __init__(self, model: BasicGNN, loader: OrchNeighborLoader | None = None):
        check_model_arguments(model, loader)
        super().__init__()
        if not isinstance(model, BasicGNN):
            raise TypeError(
                f"OrchModel wraps a torch_geometric.nn BasicGNN (GraphSAGE, GCN, "
                f"GIN, ...), got {type(model).__name__}"
            )
        if model.jk_mode is not None:
            raise NotImplementedError(
                f"OrchModel does not support jumping knowledge yet "
                f"(jk={model.jk_mode!r}); build the model with jk=None"
            )
        self.model = model
        self.kinds = [cache_kind(conv) for conv in model.convs]
        # A hook-free copy of the bottom conv, the model of its snapshots,
        # when the loader runs in embedding mode.
        self._bottom_template: torch.nn.Module | None = None
        self._hot_rows: tuple[Tensor, Tensor] | None = None
        self._graph_key: tuple[int, int, int] | None = None
        self._graph: tuple[Tensor, Tensor, Any] = ()
        for conv in model.convs:
            conv.register_aggregate_forward_hook(self._inject_hot_rows)
            conv.register_message_and_aggregate_forward_hook(self._inject_hot_rows)
        if loader is not None and loader.hot_ratio == "auto":
            loader.tune_hot_ratio(self._serve_from, self.step_seconds)
        elif loader is not None and loader.cache is not None:
            self._serve_from(loader)

    def _serve_from(self, loader: OrchNeighborLoader) -> None:
        conv, cache = self.model.convs[0], loader.cache
        if self.kinds[0] is None and cache.mode != "embedding":
            if cache.mode_chosen:
                raise NotImplementedError(
                    f"the bottom layer {conv} cannot be served by "
                    f"cache={cache.mode!r}: its neighbour aggregation depends on "
                    f"weights. Use cache='embedding' (or leave cache unset)."
                )
            cache.mode = "embedding"
            warnings.warn(
                f"OrchModel: the bottom layer {conv} aggregates with weights, so "
                f"hot vertices use cache='embedding': its output, computed on "
                f"the CPU from a weight snapshot at most {loader.staleness} "
                f"training steps old",
                stacklevel=3,
            )
        if cache.mode == "embedding":
            self._bottom_template = _without_hooks(conv).cpu()
            cache.snapshot = self._bottom_snapshot
            return
        if cache.mode == "resample" and self.kinds[0] == "gcn":
            raise NotImplementedError(
                "cache='resample' serves mean, sum and max aggregations; GCN's "
                "normalised sum is exact with cache='static', use that"
            )
        cache.kind = self.kinds[0]
        if cache.mode == "static":
            # Computed now, not during the first batch: before any worker
            # process is forked, and outside the training time.
            cache.values()
            if cache.device is not None:
                cache.device_values()

    def _bottom_snapshot(self) -> torch.nn.Module:
        # A CPU copy of the bottom conv's current weights, for the refresher
        # thread: taken between optimizer steps, in the training thread.
        layer = copy.deepcopy(self._bottom_template)
        state = self.model.convs[0].state_dict()
        layer.load_state_dict({key: v.detach().cpu() for key, v in state.items()})
        return layer.eval()

    def step_seconds(self, batch: Data) -> float:
        """Seconds of one forward and backward pass on ``batch``, side-effect free.

        Used to choose ``hot_ratio="auto"``: gradients, buffers (e.g. batch
        norm statistics) and the random state are restored afterwards, and no
        parameter changes.
        """
        device = self.device
        grads = [p.grad for p in self.parameters()]
        buffers = [b.clone() for b in self.buffers()]
        with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
            _synchronize(device)
            tick = time.perf_counter()
            self(batch).float().sum().backward()
            _synchronize(device)
            seconds = time.perf_counter() - tick
        for parameter, grad in zip(self.parameters(), grads, strict=True):
            parameter.grad = grad
        for buffer, saved in zip(self.buffers(), buffers, strict=True):
            buffer.copy_(saved)
        return seconds

    def _inject_hot_rows(
        self, module: Any, inputs: Any, output: Tensor
    ) -> Tensor | None:
        # Replaces the aggregation of the hot rows by their cached aggregates.
        if self._hot_rows is None:
            return None
        hot_index, hot_value = self._hot_rows
        return output.index_copy(0, hot_index, hot_value.to(output.dtype))

    @property
    def device(self) -> torch.device:
        """The device of the wrapped model's parameters."""
        return next(self.model.parameters()).device

    def forward(self, batch: Data) -> Tensor:
        """Predictions for the seed nodes of ``batch``.

        Args:
            batch: a mini-batch of :class:`~pyg_orch.OrchNeighborLoader`
                (directional sampling, so it has per-hop counts), on any device.

        Returns:
            ``[batch.batch_size, out_channels]``.
        """
        device = self.device
        nodes_per_hop, edges_per_hop = batch.num_sampled_nodes, batch.num_sampled_edges
        if nodes_per_hop is None or len(nodes_per_hop) != self.model.num_layers + 1:
            raise ValueError(
                f"OrchModel needs directional batches sampled with one fan-out per "
                f"layer ({self.model.num_layers}); got per-hop node counts "
                f"{nodes_per_hop}"
            )
        x = batch.x.to(device, non_blocking=True)
        src, dst = batch.edge_index.to(device, non_blocking=True)
        hot = None
        if "hot_index" in batch and batch.hot_index.numel() > 0:
            hot = (
                batch.hot_index.to(device, non_blocking=True),
                batch.hot_agg.to(device, non_blocking=True),
            )
        gcn_weight = self._gcn_weights(src, dst, x.size(0))
        num_layers = self.model.num_layers
        for layer in range(num_layers):
            num_dst = sum(nodes_per_hop[: num_layers - layer])
            num_edges = sum(edges_per_hop[: num_layers - layer])
            x = x[: sum(nodes_per_hop[: num_layers - layer + 1])]
            edges = (src[:num_edges], dst[:num_edges])
            if layer > 0 or hot is None:
                x = self._layer(layer, x, num_dst, edges, gcn_weight, None)
            elif self._bottom_template is not None:
                x = self._embedded_layer(x, num_dst, edges, gcn_weight, hot)
            else:
                x = self._layer(layer, x, num_dst, edges, gcn_weight, hot)
            x = self._between_layers(layer, x)
        return x[: batch.batch_size]

    def _gcn_weights(self, src: Tensor, dst: Tensor, num_nodes: int):
        # GCN normalises by degrees of the whole batch graph, as the plain
        # model does when it runs untrimmed on the batch.
        if "gcn" not in self.kinds:
            return None
        edge_index, weight = gcn_norm(torch.stack([src, dst]), None, num_nodes)
        return edge_index, weight

    def _layer(
        self,
        layer: int,
        x: Tensor,
        num_dst: int,
        edges: tuple[Tensor, Tensor],
        gcn_weight: Any,
        hot: tuple[Tensor, Tensor] | None,
    ) -> Tensor:
        conv = self.model.convs[layer]
        if self.kinds[layer] == "gcn":
            return self._gcn_layer(conv, x, num_dst, gcn_weight, hot)
        return self._conv(conv, x, num_dst, edges, hot)

    def _embedded_layer(self, x, num_dst, edges, gcn_weight, hot) -> Tensor:
        # The hot rows' whole output is given: computed without neighbours
        # (a hot value of None), then replaced.
        hot_index, hot_output = hot
        out = self._layer(0, x, num_dst, edges, gcn_weight, (hot_index, None))
        return out.index_copy(0, hot_index, hot_output.to(out.dtype))

    def _conv(self, conv, x, num_dst, edges, hot) -> Tensor:
        src, dst = edges
        if hot is not None:
            # Hot rows come from the cache: their sampled edges are not needed.
            cold = _cold_rows(num_dst, hot[0])
            src, dst = src[cold[dst]], dst[cold[dst]]
        if isinstance(conv.aggr, str) and conv.aggr in _FUSED:
            adjacency, size = _csr(src, dst, None, num_dst, x.size(0)), None
        else:
            adjacency, size = torch.stack([src, dst]), (x.size(0), num_dst)
        self._hot_rows = hot if hot is not None and hot[1] is not None else None
        try:
            return conv((x, x[:num_dst]), adjacency, size=size)
        finally:
            self._hot_rows = None

    def _gcn_layer(self, conv: GCNConv, x, num_dst, gcn_weight, hot) -> Tensor:
        (src, dst), weight = gcn_weight
        keep = dst < num_dst
        if hot is not None:
            keep &= _cold_rows(num_dst, hot[0])[dst.clamp(max=num_dst - 1)]
        adjacency = _csr(src[keep], dst[keep], weight[keep], num_dst, x.size(0))
        out = torch.sparse.mm(adjacency, conv.lin(x))
        if hot is not None and hot[1] is not None:
            out = out.index_copy(0, hot[0], conv.lin(hot[1]))
        return out + conv.bias if conv.bias is not None else out

    def _between_layers(self, layer: int, x: Tensor) -> Tensor:
        model = self.model
        if layer == model.num_layers - 1:
            return model.lin(x) if hasattr(model, "lin") else x
        if model.act is not None and model.act_first:
            x = model.act(x)
        x = model.norms[layer](x)
        if model.act is not None and not model.act_first:
            x = model.act(x)
        return model.dropout(x)

    @torch.no_grad()
    def inference(
        self, data: Data, batch_size: int = 65536, progress: bool = False
    ) -> Tensor:
        """Exact full-neighbourhood outputs for every node, one layer at a time.

        Each layer aggregates the previous layer's output over every node's
        whole neighbourhood with the Numba kernels (no message row per edge),
        then applies the layer's weights on the model's device, ``batch_size``
        nodes at a time. Runs in eval mode. The graph's CSC form is built on
        the first call and kept while ``edge_index`` stays the same tensor.
        Models whose convs the kernels cannot aggregate use PyG's own
        layer-wise inference instead.

        Args:
            data: the whole graph, with CPU ``x`` and ``edge_index``.
            batch_size: nodes per chunk sent to the device.
            progress: show a tqdm bar over layers.

        Returns:
            ``[num_nodes, out_channels]`` on the CPU.

        Example:
            >>> from torch_geometric.nn import GCN
            >>> from pyg_orch.datasets import load_cora
            >>> data = load_cora()
            >>> model = OrchModel(GCN(data.num_features, 16, num_layers=2,
            ...                       out_channels=7))
            >>> model.inference(data).shape
            torch.Size([2708, 7])
        """
        training = self.training
        self.eval()
        try:
            if None in self.kinds:
                loader = OrchNeighborLoader(data, [-1], batch_size=batch_size)
                return self.model.inference(loader, self.device, progress_bar=progress)
            return self._numba_inference(data, batch_size, progress)
        finally:
            self.train(training)

    def _numba_inference(self, data: Data, batch_size: int, progress: bool) -> Tensor:
        colptr, row, gcn_norm_values = self._whole_graph(data)
        x = data.x.float().contiguous()
        for layer in tqdm(range(self.model.num_layers), disable=not progress):
            chunks = []
            for nodes in torch.arange(data.num_nodes).split(batch_size):
                agg = torch.empty(nodes.numel(), x.size(1))
                aggregate(
                    colptr.numpy(), row.numpy(), x.numpy(), nodes.numpy(),
                    self.kinds[layer], agg.numpy(), gcn_norm_values,
                )  # fmt: skip
                chunks.append(self._chunk(layer, x[nodes], agg).cpu())
            x = torch.cat(chunks)
        return x

    def _whole_graph(self, data: Data) -> tuple[Tensor, Tensor, Any]:
        # The CSC form of the graph (and GCN's degrees), built once: evaluation
        # runs on the same graph every epoch, and building sorts every edge.
        key = (data.edge_index.data_ptr(), data.num_edges, data.num_nodes)
        if self._graph_key != key:
            colptr, row, _ = to_csc(data, device="cpu")
            norm = (
                gcn_inverse_sqrt_degree(colptr.numpy(), row.numpy())
                if "gcn" in self.kinds
                else None
            )
            self._graph_key, self._graph = key, (colptr, row, norm)
        return self._graph

    def _chunk(self, layer: int, x: Tensor, agg: Tensor) -> Tensor:
        # Every row is "hot": its aggregation is given, so no edges are needed.
        device = self.device
        x, agg = x.to(device), agg.to(device)
        no_edges = torch.zeros(0, dtype=torch.long, device=device)
        everything = torch.arange(x.size(0), device=device)
        empty_gcn = ((no_edges, no_edges), torch.zeros(0, device=device))
        out = self._layer(
            layer, x, x.size(0), (no_edges, no_edges), empty_gcn, (everything, agg)
        )
        return self._between_layers(layer, out)
