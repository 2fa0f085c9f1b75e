"""``OrchModel``: runs a PyG ``BasicGNN`` on hot/cold mini-batches."""

from __future__ import annotations

import time
import warnings
from collections.abc import Mapping
from typing import Any

import torch
from torch import Tensor
from torch_geometric.data import Data, HeteroData
from torch_geometric.nn.models.basic_gnn import BasicGNN

from pyg_orch.aggregation import HALF_WIDTHS
from pyg_orch.allocator import keep_freed_memory
from pyg_orch.loading.graph_inputs import edge_values
from pyg_orch.loading.node_loader import OrchNeighborLoader
from pyg_orch.loading.orch_loader import OrchLoader
from pyg_orch.nn.basic_layers import BasicLayers
from pyg_orch.nn.convs import reads_edge_value, weight_snapshot, without_hooks
from pyg_orch.nn.hetero_embedding import serve_relations
from pyg_orch.nn.hetero_layers import HeteroLayers
from pyg_orch.nn.model_checks import (
    PRECISIONS,
    check_dtype,
    check_hot_convs,
    check_model_arguments,
    check_norms,
    check_precision,
    hot_kind,
)


def _synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


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
            products run in bfloat16, and pyg_orch's aggregations sum in
            float32 and store bfloat16, so no layer's rows are cast.
            ``"fp16"`` does so in float16, on CUDA only (train it with a
            ``torch.amp.GradScaler``). :meth:`inference` stays in the model's
            dtype. Heterogeneous models aggregate as the plain one does.

    The batch's ``edge_weight`` and ``edge_attr`` reach the convs as the
    wrapped model's ``forward`` passes them (its ``supports_edge_weight`` and
    ``supports_edge_attr``; ``edge_attr`` only where a conv reads it), trimmed
    with each layer's edges: GCN normalises with the weights, other convs
    then run through PyG's message passing. With hot vertices a ``GraphConv``
    bottom layer is served the weighted aggregates (exact); a bottom conv
    reading ``edge_attr`` is refused. A heterogeneous model gets the batch's
    ``edge_weight`` / ``edge_attr`` dicts by the keywords its ``forward``
    takes (:func:`~pyg_orch.nn.hetero_layers.edge_keywords`); an edge value a
    relation conv would read without such a keyword is refused.

    A bottom conv whose messages depend on weights (``GATConv``,
    ``SAGEConv(project=True)``, ...) cannot be served exactly: unless the
    loader's ``cache`` was set explicitly, the wrapper then switches it to
    ``"embedding"`` mode and warns. Hot rows of the bottom layer's output are
    then computed on the CPU from a snapshot of its weights, at most
    ``loader.staleness`` training steps old, and treated as constants.

    A heterogeneous model runs through hooks on its relation convs (see
    :mod:`pyg_orch.nn.hetero_layers`): each computes only the rows its layer
    needs, and in the bottom layer each hot node's aggregation over each
    relation is its cached full-neighbourhood aggregate of that relation,
    exact as above (weighted where a ``GraphConv`` reads the relation's
    ``edge_weight``), or re-sampled with ``cache="resample"``. Where a
    relation's bottom conv aggregates with weights (``GATConv``) or reads
    ``edge_attr``, every hot relation is served as in embedding mode above:
    its bottom conv's output for the hot nodes of the last frontier hop.

    Raises:
        TypeError: ``model`` is neither a ``BasicGNN`` nor has a conv per
            relation, or the loader's features
            have another dtype than its parameters (see
            :func:`~pyg_orch.nn.model_checks.check_dtype`).
        NotImplementedError: the loader's explicitly chosen ``cache`` mode
            cannot serve the bottom conv, ``jk`` is set, or a norm's
            statistics span the rows of a layer (see
            :func:`~pyg_orch.nn.model_checks.check_norms`).

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
        loader: OrchLoader | None = None,
        precision: str = "fp32",
    ):
        check_model_arguments(model, loader)
        super().__init__()
        keep_freed_memory()  # each step reuses the last one's memory
        # A heterogeneous model runs through hooks on its relation convs.
        self._hetero = None if isinstance(model, BasicGNN) else HeteroLayers(model)
        check_precision(precision, model)
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
        # A homogeneous model's layers, computed on trimmed rows.
        self._layers = None if self._hetero is not None else BasicLayers(model)
        self.kinds = [] if self._layers is None else self._layers.kinds
        # The batch's edge values the convs take, as the model's forward
        # passes them (model(x, edge_index, edge_weight=..., edge_attr=...)).
        self.edge_inputs = _edge_inputs(model)
        # A hook-free copy of the bottom conv, the model of its snapshots,
        # when the loader runs in embedding mode.
        self._bottom_template: torch.nn.Module | None = None
        # The loader serving this model made its embeddings for that version.
        self._hot_version: int | None = None
        if loader is not None and loader.hot_ratio == "auto":
            loader.tune_hot_ratio(self._serve_from, self.step_seconds)
        elif loader is not None and loader.cache is not None:
            self._serve_from(loader)

    def _serve_from(self, loader: OrchLoader) -> None:
        if self._hetero is not None:
            self._hot_version = serve_relations(self._hetero, loader)
            return
        check_hot_convs(self.model)
        conv, cache = self.model.convs[0], loader.cache
        chosen = cache.mode_chosen and cache.mode == "embedding"
        embedding = self.kinds[0] is None or chosen
        values = edge_values(loader.data)
        edge_names = [name for name in self.edge_inputs if name in values]
        kind = hot_kind(self.model, self.kinds[0], edge_names, embedding)
        if "edge_weight" in edge_names and values["edge_weight"].requires_grad:
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
        self._bottom_template = without_hooks(conv).cpu()
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

    def _bottom_snapshot(self) -> torch.nn.Module:
        # A CPU copy of the bottom conv's current weights (weight_snapshot).
        return weight_snapshot(self._bottom_template, self.model.convs[0])

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
        bottom = self._layers.fused_kind(self.model.convs[0])
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
        x = self._layers.run(
            x, (src, dst), (nodes_per_hop, edges_per_hop), hot, embedded, edge_values
        )
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
        needed = hot_kind(self.model, self.kinds[0], edge_names, embedding)
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
                device = self.device
                x, edges = data.x.to(device, self.dtype), data.edge_index.to(device)
                values = {name: v.to(device) for name, v in edge_values.items()}
                return self.model(x, edges, **values).cpu()
            if None in self.kinds:
                loader = OrchNeighborLoader(data, [-1], batch_size=batch_size)
                return self.model.inference(loader, self.device, progress_bar=progress)
            weight = edge_values.get("edge_weight")
            x = data.x.to(self.dtype).contiguous()
            return self._layers.inference(x, data, weight, batch_size, progress)
        finally:
            self.train(training)


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
