"""``OrchModel``: runs a PyG ``BasicGNN`` on hot/cold mini-batches."""

from __future__ import annotations

import copy
import time
import warnings
from collections.abc import Mapping
from typing import Any

import torch
from torch import Tensor
from torch_geometric.data import Data, HeteroData
from torch_geometric.nn import GCNConv
from torch_geometric.nn.conv.gcn_conv import gcn_norm
from torch_geometric.nn.models.basic_gnn import BasicGNN
from torch_geometric.nn.norm import BatchNorm, DiffGroupNorm, InstanceNorm, LayerNorm
from tqdm.auto import tqdm

from pyg_orch.aggregation import HALF_WIDTHS, aggregate_neighbours
from pyg_orch.convs import (
    FUSED,
    cache_kind,
    cold_rows,
    conv_output,
    csr_adjacency,
    fused_kind,
    reads_edge_value,
    row_pointers,
    sort_by_destination,
)
from pyg_orch.hetero_layers import HeteroLayers
from pyg_orch.kernels.aggregate import aggregate
from pyg_orch.loader import OrchNeighborLoader
from pyg_orch.validation import check_model_arguments
from pyg_orch.whole_graph import WholeGraph

#: The ``torch.autocast`` dtype of ``OrchModel``'s forward for each
#: ``precision`` (``None`` for none), with float32 master weights.
PRECISIONS = {"fp32": None, "bf16": torch.bfloat16, "fp16": torch.float16}

# Norms that normalise each row on its own, whatever other rows are present.
_ROW_NORMS = (
    torch.nn.Identity,
    torch.nn.LayerNorm,
    torch.nn.RMSNorm,
    torch.nn.GroupNorm,
)
# Norms with running statistics: row by row in eval mode, over the rows
# present in training mode (and in eval mode without track_running_stats).
_RUNNING_NORMS = (BatchNorm, torch.nn.BatchNorm1d, DiffGroupNorm, InstanceNorm)


def check_hot_convs(model: BasicGNN) -> None:
    """Refuses a model whose layers hot vertices cannot serve as plain PyG would.

    ``GCNConv`` normalises each edge by the degrees of its endpoints *in the
    sampled batch*, as plain PyG does on a mini-batch. A hot vertex's last hop
    is not sampled, so its degree there, and with it the normalisation of
    every edge it sends to the layers above, would differ from the batch
    with ``hot_ratio=0``: the outputs would be silently different.

    Raises:
        NotImplementedError: a layer is a ``GCNConv``.

    Example:
        >>> from torch_geometric.nn import GraphSAGE
        >>> check_hot_convs(GraphSAGE(8, 16, num_layers=2))
    """
    for layer, conv in enumerate(model.convs):
        if isinstance(conv, GCNConv):
            raise NotImplementedError(
                f"hot vertices cannot serve GCN exactly: layer {layer} "
                f"({conv}) normalises every edge by the degrees its endpoints "
                f"have in the sampled batch, and a hot vertex, whose last hop is "
                f"not sampled, has other degrees there than with hot_ratio=0. "
                f"Train GCN with hot_ratio=0, or use a conv whose aggregation "
                f"does not depend on the batch (GraphSAGE, GIN, GraphConv)"
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


def _row_wise(norm: torch.nn.Module) -> bool:
    return isinstance(norm, _ROW_NORMS) or (
        isinstance(norm, LayerNorm) and norm.mode == "node"
    )


def _running_statistics(norm: torch.nn.Module) -> bool:
    return isinstance(norm, _RUNNING_NORMS) and all(
        part.track_running_stats
        for part in norm.modules()
        if hasattr(part, "track_running_stats")
    )


def _norms(model: torch.nn.Module) -> list[torch.nn.Module]:
    # A BasicGNN's norms, or every norm layer of another (heterogeneous) model.
    if isinstance(model, BasicGNN):
        return list(model.norms)
    torch_norms = (
        torch.nn.modules.batchnorm._NormBase,
        torch.nn.LayerNorm,
        torch.nn.GroupNorm,
        torch.nn.RMSNorm,
    )
    return [
        module
        for module in model.modules()
        if isinstance(module, torch_norms)
        or type(module).__module__.startswith("torch_geometric.nn.norm")
    ]


def check_norms(model: torch.nn.Module) -> None:
    """Refuses norms whose output depends on which rows a layer computes.

    ``OrchModel`` computes each layer only for the rows the next layer needs,
    and :meth:`~pyg_orch.OrchModel.inference` in chunks of nodes. A norm with
    statistics over all rows of a layer (PyG's ``LayerNorm`` in its default
    ``mode="graph"``, ``GraphNorm``, ``InstanceNorm``, ``PairNorm``, ...)
    would silently differ from the plain model, so it is refused. Norms with
    running statistics (``BatchNorm``) are exact in eval mode; in training
    mode their statistics cover the rows computed, not every sampled row as
    in ``model(batch.x, batch.edge_index)``, which is warned about.

    Raises:
        NotImplementedError: a norm is not known to normalise each row on its
            own in eval mode.

    Example:
        >>> from torch_geometric.nn import GraphSAGE
        >>> check_norms(GraphSAGE(8, 16, num_layers=2, norm="layer_norm"))
        Traceback (most recent call last):
        ...
        NotImplementedError: OrchModel cannot wrap a model with the norm LayerNorm(16, affine=True, mode=graph): its statistics span the rows of a layer (also in eval mode), but OrchModel computes each layer only for the rows the next layer needs (and inference() in chunks of nodes), so its outputs would differ from the plain model's. Use a norm that normalises each node on its own: norm='batch_norm', norm='layer_norm' with norm_kwargs={'mode': 'node'}, or norm=None
    """  # noqa: E501 - a doctest's output is one line
    training_only = None
    for norm in _norms(model):
        if _row_wise(norm):
            continue
        if not _running_statistics(norm):
            raise NotImplementedError(
                f"OrchModel cannot wrap a model with the norm {norm}: its "
                f"statistics span the rows of a layer (also in eval mode), but "
                f"OrchModel computes each layer only for the rows the next "
                f"layer needs (and inference() in chunks of nodes), so its "
                f"outputs would differ from the plain model's. Use a norm that "
                f"normalises each node on its own: norm='batch_norm', "
                f"norm='layer_norm' with norm_kwargs={{'mode': 'node'}}, or "
                f"norm=None"
            )
        training_only = type(norm).__name__
    if training_only is not None:
        warnings.warn(
            f"OrchModel: in training mode, {training_only} normalises with the "
            f"statistics of the rows OrchModel computes (those the next layer "
            f"needs), not of every sampled row as model(batch.x, "
            f"batch.edge_index) does, so training outputs and running "
            f"statistics differ from the plain model's; eval mode is exact. "
            f"norm='layer_norm' with norm_kwargs={{'mode': 'node'}} does not "
            f"depend on the rows computed",
            stacklevel=3,
        )


def check_dtype(x: Tensor, model_dtype: torch.dtype, hot: bool) -> None:
    """Refuses features of another dtype than the model's parameters.

    Plain PyG fails on such a pair too, deep inside a conv; this says why.
    Half-width features (bfloat16, float16: ``feature_dtype`` of the loader)
    are the exception for a float32 model, which computes in float32 from
    them.

    Args:
        x: the features (``data.x`` or a batch's ``x``).
        model_dtype: the dtype of the model's parameters.
        hot: the features come with hot vertices, which need float32.

    Raises:
        TypeError: the dtypes differ.

    Example:
        >>> check_dtype(torch.ones(2, 3), torch.float64, hot=True)
        Traceback (most recent call last):
        ...
        TypeError: hot vertices need float32 features (their aggregates are computed by a float32 kernel), but the model's parameters are torch.float64: use model.float(), or hot_ratio=0 to run in torch.float64 end to end
    """  # noqa: E501 - a doctest's output is one line
    if x.dtype == model_dtype:
        return
    if x.dtype in HALF_WIDTHS and model_dtype == torch.float32:
        return
    if hot:
        raise TypeError(
            f"hot vertices need float32 features (their aggregates are "
            f"computed by a float32 kernel), but the model's parameters are "
            f"{model_dtype}: use model.float(), or hot_ratio=0 to run in "
            f"{model_dtype} end to end"
        )
    raise TypeError(
        f"the features are {x.dtype}, but the model's parameters are "
        f"{model_dtype}: convert one of them (data.x = data.x.to({model_dtype}) "
        f"or model.to({x.dtype}))"
    )


def check_precision(precision: Any, model: torch.nn.Module, hetero: bool) -> None:
    """Checks ``OrchModel``'s ``precision`` against the model it wraps.

    Raises:
        ValueError: ``precision`` is not one of :data:`PRECISIONS`.
        TypeError: mixed precision for a model whose parameters are not
            float32 (its master weights).
        NotImplementedError: mixed precision for a heterogeneous model.

    Example:
        >>> from torch_geometric.nn import GraphSAGE
        >>> check_precision("bf16", GraphSAGE(4, 8, num_layers=2), hetero=False)
        >>> check_precision("half", GraphSAGE(4, 8, num_layers=2), hetero=False)
        Traceback (most recent call last):
        ...
        ValueError: precision must be one of ['fp32', 'bf16', 'fp16'], got 'half'
    """
    if precision not in PRECISIONS:
        raise ValueError(
            f"precision must be one of {list(PRECISIONS)}, got {precision!r}"
        )
    if precision == "fp32":
        return
    if hetero:
        raise NotImplementedError(
            f"precision={precision!r} is not supported for heterogeneous models "
            f"yet: use precision='fp32'"
        )
    dtype = next(model.parameters()).dtype
    if dtype != torch.float32:
        raise TypeError(
            f"precision={precision!r} runs a float32 model under autocast (its "
            f"float32 parameters are the master weights), but the model's "
            f"parameters are {dtype}: use model.float()"
        )


class OrchModel(torch.nn.Module):
    r"""Wraps a PyG :class:`~torch_geometric.nn.models.basic_gnn.BasicGNN`
    (:class:`~torch_geometric.nn.models.GraphSAGE`,
    :class:`~torch_geometric.nn.models.GCN`,
    :class:`~torch_geometric.nn.models.GIN`), a
    :func:`~torch_geometric.nn.to_hetero` model or a model of
    :class:`~torch_geometric.nn.conv.HeteroConv` layers for
    :class:`~pyg_orch.OrchNeighborLoader` and
    :class:`~pyg_orch.OrchLinkNeighborLoader` batches.

    Layer :math:`l` is computed only for the rows layer :math:`l+1` needs,
    and no message row per edge is materialised: ``SAGEConv``, ``GraphConv``
    and ``GINConv`` aggregate with pyg_orch's Numba kernels, forward and
    backward (:func:`~pyg_orch.aggregation.aggregate_neighbours`); other
    convs get bipartite ``(x_src, x_dst)`` calls on a CSR adjacency. In the
    bottom layer, the aggregation of every hot frontier node is the cached
    full-neighbourhood aggregate ``hot_agg`` of the batch; the wrapped
    model's current weights are applied to it, so forward pass and gradients
    are exact. Returns predictions for the seed
    nodes. The wrapped model keeps its parameters: optimise
    ``OrchModel.parameters()`` or the model's, they are the same.

    Args:
        model: the PyG model to wrap (``jk=None``).
        loader: the loader whose hot cache feeds the bottom layer; it is told
            which aggregation the bottom layer needs.
        precision: ``"fp32"``; ``"bf16"`` runs the forward pass (and so the
            backward) under ``torch.autocast`` in bfloat16, the parameters
            staying float32 (master weights): the convs' and linear layers'
            products run in bfloat16, pyg_orch's aggregations in float32.
            ``"fp16"`` does so in float16, on CUDA only (train it with a
            ``torch.amp.GradScaler``). :meth:`inference` stays in the model's
            dtype.

    The batch's ``edge_weight`` and ``edge_attr`` reach the convs as the
    wrapped model's ``forward`` passes them (its ``supports_edge_weight`` and
    ``supports_edge_attr``; ``edge_attr`` only where a conv reads it), trimmed
    with each layer's edges: GCN normalises with the weights, other convs
    then run through PyG's message passing. With hot vertices a ``GraphConv``
    bottom layer is served the weighted aggregates (exact); a bottom conv
    reading ``edge_attr`` is refused. A heterogeneous model runs as
    ``model(x_dict, edge_index_dict)``: a relation's edge value its conv would
    read is refused.

    A bottom conv whose messages depend on weights (``GATConv``,
    ``SAGEConv(project=True)``, ...) cannot be served exactly: unless the
    loader's ``cache`` was set explicitly, the wrapper then switches it to
    ``"embedding"`` mode and warns. Hot rows of the bottom layer's output are
    then computed on the CPU from a snapshot of its weights, at most
    ``loader.staleness`` training steps old, and treated as constants.

    A heterogeneous model runs through hooks on its relation convs (see
    :mod:`pyg_orch.hetero_layers`): each computes only the rows its layer
    needs, and in the bottom layer each hot node's aggregation over each
    relation is its cached full-neighbourhood aggregate of that relation,
    exact as above. Relations whose bottom conv aggregates with weights are
    refused with hot nodes (heterogeneous graphs have no embedding mode yet).

    Raises:
        TypeError: ``model`` is neither a ``BasicGNN`` nor has a conv per
            relation, or the loader's features
            have another dtype than its parameters (see
            :func:`~pyg_orch.model.check_dtype`).
        NotImplementedError: the loader's explicitly chosen ``cache`` mode
            cannot serve the bottom conv, ``jk`` is set, or a norm's
            statistics span the rows of a layer (see
            :func:`~pyg_orch.model.check_norms`).

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

    def __init__(
        self,
        model: BasicGNN,
        loader: OrchNeighborLoader | None = None,
        precision: str = "fp32",
    ):
        check_model_arguments(model, loader)
        super().__init__()
        # A heterogeneous model runs through hooks on its relation convs.
        self._hetero = None if isinstance(model, BasicGNN) else HeteroLayers(model)
        check_precision(precision, model, self._hetero is not None)
        self.precision = precision
        if self._hetero is None and model.jk_mode is not None:
            raise NotImplementedError(
                f"OrchModel does not support jumping knowledge yet "
                f"(jk={model.jk_mode!r}); build the model with jk=None"
            )
        check_norms(model)
        self.model = model
        # In the model's mode, which inference() restores when it is done.
        self.training = model.training
        features = getattr(loader, "features", None)
        if isinstance(features, Tensor):
            # The loader's features: also a NumPy x, or one device= holds.
            check_dtype(features, self.dtype, hot=loader.hot_ratio != 0)
        convs = model.convs if self._hetero is None else []
        self.kinds = [cache_kind(conv) for conv in convs]
        # The batch's edge values the convs take, as the model's forward
        # passes them (model(x, edge_index, edge_weight=..., edge_attr=...)).
        self.edge_inputs = _edge_inputs(model)
        # A hook-free copy of the bottom conv, the model of its snapshots,
        # when the loader runs in embedding mode.
        self._bottom_template: torch.nn.Module | None = None
        # The loader serving this model made its embeddings for that version.
        self._hot_version: int | None = None
        self._hot_rows: tuple[Tensor, Tensor] | None = None
        self._whole_graph = WholeGraph()
        for conv in convs:
            conv.register_aggregate_forward_hook(self._inject_hot_rows)
            conv.register_message_and_aggregate_forward_hook(self._inject_hot_rows)
        if loader is not None and loader.hot_ratio == "auto":
            loader.tune_hot_ratio(self._serve_from, self.step_seconds)
        elif loader is not None and loader.cache is not None:
            self._serve_from(loader)

    def _serve_from(self, loader: OrchNeighborLoader) -> None:
        if self._hetero is not None:
            self._hot_version = loader.serve(_relation_kinds(self._hetero, loader))
            return
        check_hot_convs(self.model)
        conv, cache = self.model.convs[0], loader.cache
        embedding = self.kinds[0] is None or cache.mode == "embedding"
        edge_names = [name for name in self.edge_inputs if name in loader.data]
        kind = self._hot_kind(edge_names, embedding)
        if "edge_weight" in edge_names and loader.data.edge_weight.requires_grad:
            raise NotImplementedError(
                "the graph's edge_weight requires grad, but the hot values are "
                "aggregated with it once, as constants: the weights of hot "
                "vertices' edges would get no gradient. Use hot_ratio=0 to "
                "learn edge weights"
            )
        if not embedding:
            self._bottom_template = None
            self._hot_version = loader.serve(kind)
            return
        switched = cache.mode != "embedding"
        self._bottom_template = _without_hooks(conv).cpu()
        # Refuses an explicitly chosen cache mode that serves no layer output.
        self._hot_version = loader.serve("embedding", self._bottom_snapshot)
        if switched:
            warnings.warn(
                f"OrchModel: the bottom layer {conv} aggregates with weights, so "
                f"hot vertices use cache='embedding': its output, computed on "
                f"the CPU from a weight snapshot at most {loader.staleness} "
                f"training steps old",
                stacklevel=3,
            )

    def load_state_dict(
        self, state_dict: Mapping[str, Any], strict: bool = True, assign: bool = False
    ) -> Any:
        """Loads ``state_dict()`` of an ``OrchModel``, or of the plain model.

        An ``OrchModel``'s keys start with ``model.`` (the wrapped model is its
        ``model``); a checkpoint of the plain PyG model, whose keys do not, is
        loaded into the wrapped model. ``orch.model.state_dict()`` gives the
        plain model's weights, for serving without pyg_orch.

        Example:
            >>> from torch_geometric.nn import GraphSAGE
            >>> plain = GraphSAGE(4, 8, num_layers=2)
            >>> orch = OrchModel(GraphSAGE(4, 8, num_layers=2))
            >>> orch.load_state_dict(plain.state_dict())
            <All keys matched successfully>
            >>> GraphSAGE(4, 8, num_layers=2).load_state_dict(orch.model.state_dict())
            <All keys matched successfully>
        """
        if state_dict and not any(key.startswith("model.") for key in state_dict):
            return self.model.load_state_dict(state_dict, strict, assign)
        return super().load_state_dict(state_dict, strict, assign)

    def _hot_kind(self, edge_names: list[str], embedding: bool) -> str:
        # The hot values the bottom layer needs when it reads `edge_names`:
        # its aggregation, weighted by the edge_weight it reads, or
        # "embedding". Refuses what no hot value serves exactly.
        if edge_names and (embedding or "edge_attr" in edge_names):
            raise NotImplementedError(
                f"hot vertices cannot serve this model exactly: its bottom "
                f"layer {self.model.convs[0]} reads the batch's "
                f"{' and '.join(edge_names)}, and hot vertices serve edge "
                f"values only as an edge_weight in a weighted sum, mean or max "
                f"(GraphConv), not in "
                f"{'embedding mode' if embedding else 'edge features'}. Use "
                f"hot_ratio=0, or a bottom conv such as GraphConv"
            )
        if embedding:
            return "embedding"
        return f"weighted_{self.kinds[0]}" if edge_names else self.kinds[0]

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

    @property
    def dtype(self) -> torch.dtype:
        """The dtype of the wrapped model's parameters, which it computes in."""
        return next(self.model.parameters()).dtype

    def forward(self, batch: Data | HeteroData, *args: Any, **kwargs: Any) -> Tensor:
        """Predictions (or embeddings) for the seed nodes of ``batch``.

        Called as ``model(batch)`` with the whole mini-batch, where the plain
        model is called as ``model(batch.x, batch.edge_index)``: it reads the
        per-hop counts, the hot values and the edge values from the batch.

        Args:
            batch: a mini-batch of :class:`~pyg_orch.OrchNeighborLoader` or
                :class:`~pyg_orch.OrchLinkNeighborLoader` (directional
                sampling, so it has per-hop counts), on any device.
            *args: refused: a plain PyG call's other arguments.
            **kwargs: refused, as ``args``.

        Returns:
            ``[batch.batch_size, out_channels]`` for node batches; for link
            batches the rows of the seed nodes, which ``edge_label_index``
            indexes. On a heterogeneous graph: the seed type's rows, or for
            link batches a dict of each seed type's rows.

        Raises:
            TypeError: called as the plain model is, with features and edges.
        """
        if args or kwargs or not isinstance(batch, Data | HeteroData):
            got = ", ".join(
                [type(batch).__name__]
                + [type(arg).__name__ for arg in args]
                + [f"{key}=..." for key in kwargs]
            )
            raise TypeError(
                f"OrchModel takes the whole mini-batch: call model(batch) with a "
                f"batch of the loader (it reads x, edge_index, the per-hop counts "
                f"and the hot values from it), not model(batch.x, "
                f"batch.edge_index) as the plain model; got model({got}). For "
                f"the whole graph, call model.inference(data)"
            )
        autocast = PRECISIONS[self.precision]
        if autocast is None:
            return self._forward(batch)
        device_type = self.device.type
        if autocast is torch.float16 and device_type != "cuda":
            raise ValueError(
                f"precision='fp16' needs a CUDA device (float16 training needs a "
                f"grad scaler, and the CPU's autocast computes float16 slowly), "
                f"but the model is on {self.device}: use precision='bf16' there"
            )
        with torch.autocast(device_type, dtype=autocast):
            return self._forward(batch)

    def _forward(self, batch: Data) -> Tensor:
        device = self.device
        if self._hetero is not None:
            self._check_hetero_version(batch)
            return self._hetero.forward_batch(batch, device)
        nodes_per_hop, edges_per_hop = batch.num_sampled_nodes, batch.num_sampled_edges
        if nodes_per_hop is None or len(nodes_per_hop) != self.model.num_layers + 1:
            raise ValueError(
                f"OrchModel needs directional batches sampled with one fan-out per "
                f"layer ({self.model.num_layers}); got per-hop node counts "
                f"{nodes_per_hop}"
            )
        check_dtype(batch.x, self.dtype, hot="hot_index" in batch)
        x = batch.x.to(device, non_blocking=True)
        bottom = fused_kind(self.model.convs[0], own_hook=self._inject_hot_rows)
        if x.dtype in HALF_WIDTHS and bottom is None:
            # Only pyg_orch's aggregation reads half-width rows itself.
            x = x.to(self.dtype)
        src, dst = batch.edge_index.to(device, non_blocking=True)
        edge_values = {
            name: batch[name].to(device, non_blocking=True)
            for name in self.edge_inputs
            if batch.get(name) is not None
        }
        hot, embedded = None, False
        if "hot_index" in batch and batch.hot_index.numel() > 0:
            embedded = self._check_hot_values(batch, list(edge_values))
            hot = (
                batch.hot_index.to(device, non_blocking=True),
                batch.hot_agg.to(device, non_blocking=True),
            )
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
        # Link batches have no batch_size: their seeds are the hop-0 nodes.
        return x[: batch.batch_size if "batch_size" in batch else nodes_per_hop[0]]

    def _check_hetero_version(self, batch: Any) -> None:
        # Hot values are made for one model's relations: refuse others'.
        version = getattr(batch, "hot_version", None)
        if version is not None and version != self._hot_version:
            raise ValueError(
                "this batch's hot values were made for another model (a loader "
                "serves the model wrapped with it last): wrap this model with "
                "OrchModel(model, loader) before drawing its batches"
            )

    def _check_hot_values(self, batch: Data, edge_names: list[str]) -> bool:
        # Hot values are made for one model: refuse those made for another
        # rather than compute with them. Returns whether they are embeddings.
        check_hot_convs(self.model)  # also for a model wrapped without a loader
        kind, conv = batch.get("hot_kind"), self.model.convs[0]
        embedding = kind == "embedding" or self.kinds[0] is None
        needed = self._hot_kind(edge_names, embedding)
        if kind == "embedding":
            if batch.get("hot_version") != self._hot_version:
                raise ValueError(
                    "this batch's hot rows are bottom-layer outputs computed "
                    "from another model's weights (a loader serves the model "
                    "wrapped with it last): wrap this model with "
                    "OrchModel(model, loader) before drawing its batches"
                )
            return True
        if kind != needed:
            raise ValueError(
                f"this batch's hot values are {kind!r} aggregates, but this "
                f"model's bottom layer {conv} needs {needed!r} (a loader serves "
                f"the model wrapped with it last): wrap this model with "
                f"OrchModel(model, loader) before drawing its batches"
            )
        return False

    def _gcn_weights(
        self, src: Tensor, dst: Tensor, num_nodes: int, edge_weight: Tensor | None
    ):
        # GCN normalises by degrees of the whole batch graph, as the plain
        # model does when it runs untrimmed on the batch.
        if "gcn" not in self.kinds:
            return None
        edge_index, weight = gcn_norm(
            torch.stack([src, dst]), edge_weight, num_nodes, dtype=self.dtype
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
        kind = None if edge_values else self._fused_kind(conv)
        if kind is not None:
            return _fused_conv(conv, kind, x, num_dst, edges, hot, relu)
        return self._conv(conv, x, num_dst, edges, hot, edge_values or {})

    def _fused_kind(self, conv: torch.nn.Module) -> str | None:
        return fused_kind(conv, own_hook=self._inject_hot_rows)

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
        return self._fused_kind(model.convs[layer + 1]) is not None

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
        if (
            isinstance(conv.aggr, str)
            and conv.aggr in FUSED
            and not (autocast or edge_values)
        ):
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
        self, data: Data, batch_size: int = 65536, progress: bool = False
    ) -> Tensor:
        """Exact full-neighbourhood outputs for every node, one layer at a time.

        Each layer aggregates the previous layer's output over every node's
        whole neighbourhood with the Numba kernels (no message row per edge),
        then applies the layer's weights on the model's device, ``batch_size``
        nodes at a time, in the model's dtype (float32 or float64; ``x`` is
        converted to it). Runs in eval mode. The graph's CSC form is built on
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
            if self._hetero is not None:
                return self._hetero.inference(data, self.device)
            edge_values = {
                name: data[name]
                for name in self.edge_inputs
                if data.get(name) is not None
            }
            if None in self.kinds and edge_values:
                # PyG's layer-wise inference would leave the edge values out.
                return self._whole_graph_forward(data, edge_values)
            if None in self.kinds:
                loader = OrchNeighborLoader(data, [-1], batch_size=batch_size)
                return self.model.inference(loader, self.device, progress_bar=progress)
            return self._numba_inference(data, batch_size, progress)
        finally:
            self.train(training)

    def _whole_graph_forward(self, data: Data, edge_values: dict[str, Tensor]):
        device = self.device
        values = {name: v.to(device) for name, v in edge_values.items()}
        x, edge_index = data.x.to(device, self.dtype), data.edge_index.to(device)
        return self.model(x, edge_index, **values).cpu()

    def _numba_inference(self, data: Data, batch_size: int, progress: bool) -> Tensor:
        x = data.x.to(self.dtype).contiguous()
        weight = data.get("edge_weight") if "edge_weight" in self.edge_inputs else None
        for layer in tqdm(range(self.model.num_layers), disable=not progress):
            colptr, row, kernel_kind, norm, edge_weight = self._whole_graph.arguments(
                data, self.kinds[layer], weight, x.numpy().dtype
            )
            chunks = []
            for nodes in torch.arange(data.num_nodes).split(batch_size):
                agg = torch.empty(nodes.numel(), x.size(1), dtype=x.dtype)
                aggregate(
                    colptr.numpy(), row.numpy(), x.numpy(), nodes.numpy(),
                    kernel_kind, agg.numpy(), norm, edge_weight=edge_weight,
                )  # fmt: skip
                chunks.append(self._chunk(layer, x[nodes], agg).cpu())
            x = torch.cat(chunks)
        return x

    def _chunk(self, layer: int, x: Tensor, agg: Tensor) -> Tensor:
        # Every row is "hot": its aggregation is given, so no edges are needed.
        device = self.device
        x, agg = x.to(device), agg.to(device)
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


def _edge_inputs(model: torch.nn.Module) -> tuple[str, ...]:
    # The edge values a BasicGNN hands its convs (its supports_* flags); a
    # heterogeneous model is run as model(x_dict, edge_index_dict).
    if not isinstance(model, BasicGNN):
        return ()
    reads_attr = any(reads_edge_value(conv, "edge_attr") for conv in model.convs)
    flags = {
        "edge_weight": model.supports_edge_weight,
        "edge_attr": model.supports_edge_attr and reads_attr,
    }
    return tuple(name for name, supported in flags.items() if supported)


def _relation_kinds(layers: HeteroLayers, loader: Any) -> dict[Any, str]:
    # The cache kind of each hot relation's bottom conv; refuses a relation
    # that no kind serves exactly (heterogeneous graphs have no embedding mode).
    kinds = layers.kinds()
    relations = [r for r in loader.cache.relations if r in kinds]
    unserved = {
        r: type(layers.bottom[r]).__name__
        for r in relations
        if kinds[r] in (None, "gcn")
    }
    if unserved:
        raise NotImplementedError(
            f"hot nodes of a heterogeneous graph are served exactly for bottom "
            f"convs that aggregate raw features without weights (SAGEConv, "
            f"GraphConv, GINConv); these relations' are not: {unserved}. Use "
            f"hot_ratio=0, or hot_ratio={{node_type: 0.0}} for their "
            f"destination types"
        )
    return {r: kinds[r] for r in relations}
