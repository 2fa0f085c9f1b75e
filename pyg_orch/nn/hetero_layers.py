"""Running a heterogeneous PyG model on hot/cold batches, layer by layer.

``to_hetero`` models and models built from ``HeteroConv`` call one conv per
relation and layer, then combine the relations' outputs per node type.
:class:`HeteroLayers` hooks every relation conv: before it runs, its inputs
are cut to what its layer needs (the bipartite ``(x_src, x_dst[:num_dst])``
of the hops still needed, on that layer's edges, as the homogeneous wrapper
does); in the bottom layer, the aggregation of each hot destination row is
replaced by the relation's cached aggregate (full-neighbourhood or
re-sampled), to which the conv applies its current weights; or, in embedding
mode, the conv's output of each hot row of the last frontier hop is replaced
by the relation's embedding, computed on the CPU from a weight snapshot.
"""

from __future__ import annotations

import inspect
from typing import Any

import torch
from torch import Tensor
from torch.nn.parameter import is_lazy
from torch_geometric.data import HeteroData
from torch_geometric.nn.conv import GCNConv, GraphConv, MessagePassing, SAGEConv

from pyg_orch.aggregation import HALF_WIDTHS, aggregate_neighbours
from pyg_orch.loading.graph_inputs import edge_values
from pyg_orch.nn.convs import (
    cache_kind,
    conv_output,
    csr_adjacency,
    fused_kind,
    reads_edge_value,
    row_pointers,
    sort_by_destination,
    takes_adjacency,
)
from pyg_orch.nn.hetero_forward import EdgeType, HeteroForward
from pyg_orch.nn.whole_graph import WholeGraph


def relation_of(name: str) -> EdgeType | None:
    """The edge type a relation conv's module name ends in, or ``None``.

    ``to_hetero`` names a relation's conv ``'src__rel__dst'``, ``HeteroConv``
    ``'<src___rel___dst>'``.

    Example:
        >>> relation_of("convs.0.paper__cites__paper")
        ('paper', 'cites', 'paper')
        >>> relation_of("convs.1.convs.<author___writes___paper>")
        ('author', 'writes', 'paper')
        >>> relation_of("lin") is None
        True
    """
    key = name.rsplit(".", 1)[-1]
    if key.startswith("<") and key.endswith(">"):
        parts = key[1:-1].split("___")
    else:
        parts = key.split("__")
    return (parts[0], parts[1], parts[2]) if len(parts) == 3 else None


def relation_convs(model: torch.nn.Module) -> list[tuple[EdgeType, MessagePassing]]:
    """Every relation conv of ``model`` with its edge type, layer by layer.

    Example:
        >>> from torch_geometric.nn import GraphSAGE, to_hetero
        >>> metadata = (["a"], [("a", "to", "a")])
        >>> model = to_hetero(GraphSAGE(4, 8, num_layers=2), metadata)
        >>> [edge_type for edge_type, _ in relation_convs(model)]
        [('a', 'to', 'a'), ('a', 'to', 'a')]
    """
    return [
        (relation, module)
        for name, module in model.named_modules()
        if isinstance(module, MessagePassing)
        and (relation := relation_of(name)) is not None
    ]


_ROWS_DIFFER = (
    "the model combined a relation conv's output with a tensor of other rows. "
    "OrchModel cuts each layer's convs to the rows the layer outputs; a "
    "module applied to the layer's input gets those rows too, but only once "
    "a conv of the layer took that input, as in `conv(x, edge_index) + "
    "lin(x)` (PyG's order), not `lin(x) + conv(x, edge_index)`; a residual "
    "`x + conv(x, edge_index)` gets none. Call the convs first and pass the "
    "input through a module, or train the plain model on the loader's "
    "batches with hot_ratio=0"
)


class HeteroLayers:
    """Hooks a heterogeneous model's relation convs to run it on hot/cold batches.

    Args:
        model: a ``to_hetero`` model or a model of ``HeteroConv`` layers.

    Attributes:
        bottom: the bottom layer's conv of each relation.

    Raises:
        TypeError: ``model`` has no relation convs.
        NotImplementedError: a ``GCNConv`` relation conv.

    Example:
        >>> from torch_geometric.nn import GraphSAGE, to_hetero
        >>> metadata = (["a"], [("a", "to", "a")])
        >>> layers = HeteroLayers(to_hetero(GraphSAGE(4, 8, num_layers=2), metadata))
        >>> list(layers.bottom)
        [('a', 'to', 'a')]
    """

    def __init__(self, model: torch.nn.Module) -> None:
        convs = relation_convs(model)
        if not convs:
            raise TypeError(
                f"OrchModel wraps a torch_geometric.nn BasicGNN, a to_hetero "
                f"model or a model of HeteroConv layers; {type(model).__name__} "
                f"has no conv per relation"
            )
        _refuse_gcn(convs)
        self.model = model
        self.edge_keywords = edge_keywords(model)
        self.bottom: dict[EdgeType, MessagePassing] = {}
        for relation, conv in convs:
            self.bottom.setdefault(relation, conv)
            conv.register_forward_pre_hook(self._trim, with_kwargs=True)
            conv.register_forward_hook(self._finish)
            conv.register_aggregate_forward_hook(self._inject_hot_rows)
            conv.register_message_and_aggregate_forward_hook(self._inject_hot_rows)
        for module in _modules_beside(model, [conv for _, conv in convs]):
            module.register_forward_pre_hook(self._cut_beside)
        self._forward: HeteroForward | None = None
        # (hot rows or None for all rows, their values) of the conv running.
        self._hot_rows: tuple[Tensor | None, Tensor] | None = None
        # (hot rows, their outputs) that replace the running conv's output.
        self._embedded_rows: tuple[Tensor, Tensor] | None = None
        # The output of the conv running, where _trim computed it itself.
        self._output: Tensor | None = None
        # Each relation's CSC form, built by the first inference on a graph.
        self._whole_graphs: dict[EdgeType, WholeGraph] = {}

    def edge_values(
        self, data: HeteroData, device: torch.device
    ) -> dict[str, dict[EdgeType, Tensor]]:
        """The edge values of ``data`` the model takes, by name and relation."""
        values: dict[str, dict[EdgeType, Tensor]] = {}
        for relation, store in zip(data.edge_types, data.edge_stores, strict=True):
            for name in self.edge_keywords:
                if store.get(name) is not None:
                    value = store[name].to(device, non_blocking=True)
                    values.setdefault(name, {})[relation] = value
        return values

    def hot_kinds(self, data: Any) -> dict[EdgeType, str | None]:
        """The hot values each relation's bottom conv needs on ``data``.

        Its cache kind, weighted (``"weighted_<kind>"``) where the conv is
        given the relation's ``edge_weight`` and reads it (``GraphConv``),
        ``None`` where no hot value serves it exactly: a conv whose messages
        depend on weights, or that reads the relation's ``edge_attr``.

        Raises:
            NotImplementedError: an ``edge_weight`` the conv reads requires
                grad (hot values are aggregated with it once, as constants).
        """
        kinds = {}
        for relation, conv in self.bottom.items():
            store = edge_values(data, relation)
            kind = cache_kind(conv)
            given = self.read_edge_values(data, relation, conv)
            if kind is None or "edge_attr" in given:
                kinds[relation] = None
            elif "edge_weight" in given:
                if store["edge_weight"].requires_grad:
                    raise NotImplementedError(
                        f"data[{relation}].edge_weight requires grad, but hot "
                        f"values are aggregated with it once, as constants: the "
                        f"weights of hot nodes' edges would get no gradient. "
                        f"Use hot_ratio=0 to learn edge weights"
                    )
                kinds[relation] = f"weighted_{kind}"
            else:
                kinds[relation] = kind
        return kinds

    def read_edge_values(self, data: Any, relation: EdgeType, conv: Any) -> set[str]:
        """The edge values of ``data[relation]`` that ``conv`` is given and reads."""
        store = edge_values(data, relation)
        return {
            name
            for name in self.edge_keywords
            if store.get(name) is not None and reads_edge_value(conv, name)
        }

    def forward_batch(self, batch: HeteroData, device: torch.device) -> Any:
        """The model's output for the seed nodes of a heterogeneous batch.

        Args:
            batch: a batch of :class:`~pyg_orch.OrchNeighborLoader` (or
                :class:`~pyg_orch.OrchLinkNeighborLoader`), directional.
            device: where the model's parameters are.

        Returns:
            For node batches, the seed type's rows ``[batch_size, C]``; for
            link batches, the rows of each seed type's seeds, by node type.
        """
        check_edge_values(self.model, self.edge_keywords, batch)
        nodes, edges = _per_hop_counts(batch)
        hot_index, hot_agg = {}, {}
        if getattr(batch, "hot_kind", None) is not None:
            hot_index = {
                t: store.hot_index.to(device, non_blocking=True)
                for t, store in zip(batch.node_types, batch.node_stores, strict=True)
                if "hot_index" in store
            }
            hot_agg = {
                r: store.hot_agg.to(device, non_blocking=True)
                for r, store in zip(batch.edge_types, batch.edge_stores, strict=True)
                if "hot_agg" in store
            }
        x = {
            t: self._as_input(v.to(device, non_blocking=True))
            for t, v in batch.x_dict.items()
        }
        edge_index = {
            r: v.to(device, non_blocking=True) for r, v in batch.edge_index_dict.items()
        }
        values = self.edge_values(batch, device)
        embedded = getattr(batch, "hot_kind", None) == "embedding"
        out = self.run(
            x, edge_index, nodes, edges, hot_index, hot_agg, values, embedded
        )
        return _seed_rows(batch, out, nodes)

    @torch.no_grad()
    def inference(self, data: HeteroData, device: torch.device) -> Any:
        """The model's output on the whole graph, every aggregation exact.

        Each relation conv aggregates over every node's whole neighbourhood
        with the Numba kernels, one layer at a time (no message row per edge).
        A model with a relation conv the kernels cannot aggregate for (its
        messages depend on weights) runs as the plain model on the whole
        graph instead. Each relation's CSC form is built on the first call
        and kept while its ``edge_index`` stays the same tensor; so is the
        bottom layer's aggregate of each relation's raw source features,
        which does not depend on the weights, while that ``x`` stays the same
        tensor, unchanged in place (one ``[num_dst, F]`` aggregate per
        relation is kept in memory between calls).
        """
        check_edge_values(self.model, self.edge_keywords, data)
        edge_index = {r: v.to(device) for r, v in data.edge_index_dict.items()}
        x = {t: self._as_input(v.to(device)) for t, v in data.x_dict.items()}
        values = self.edge_values(data, device)
        convs = relation_convs(self.model)
        if any(cache_kind(conv) is None for _, conv in convs):
            return self._call(x, edge_index, values)
        self._forward = HeteroForward(0, {}, {}, edge_index, x, {}, {}, values, data)
        try:
            return self._call(x, edge_index, values)
        finally:
            self._forward, self._hot_rows = None, None

    def _as_input(self, x: Tensor) -> Tensor:
        # Half-width features (the loader's feature_dtype) as the convs read
        # them: as they are under autocast (the kernels aggregate them in
        # float32, PyG's layers take them), else in the parameters' dtype.
        if x.dtype not in HALF_WIDTHS or torch.is_autocast_enabled(x.device.type):
            return x
        return x.to(next(self.model.parameters()).dtype)

    def _call(
        self,
        x: dict[str, Tensor],
        edge_index: dict[EdgeType, Tensor],
        values: dict[str, dict[EdgeType, Tensor]],
    ) -> Any:
        # model(x, edge_index) given the edge values by the keywords it takes.
        keywords = {self.edge_keywords[name]: v for name, v in values.items()}
        return self.model(x, edge_index, **keywords)

    def run(
        self,
        x: dict[str, Tensor],
        edge_index: dict[EdgeType, Tensor],
        nodes: dict[str, list[int]],
        edges: dict[EdgeType, list[int]],
        hot_index: dict[str, Tensor],
        hot_agg: dict[EdgeType, Tensor],
        edge_values: dict[str, dict[EdgeType, Tensor]] | None = None,
        embedded: bool = False,
    ) -> Any:
        """``model(x, edge_index)`` with every relation conv cut to its layer.

        Args:
            x: the batch's features per node type.
            edge_index: the batch's edges per relation.
            nodes: sampled nodes per hop, per node type.
            edges: sampled edges per hop, per relation.
            hot_index: the hot frontier rows per node type.
            hot_agg: their aggregates per relation into their type.
            edge_values: the batch's edge values the model takes, by name
                (``edge_weight``, ``edge_attr``) and relation.
            embedded: ``hot_agg`` holds the bottom convs' outputs of the hot
                rows (embedding mode), not their aggregates.

        Returns:
            The model's output.

        Raises:
            ValueError: a relation conv is not called once per layer, or a hot
                relation's bottom conv does not read the raw features.
        """
        num_layers = max((len(hops) for hops in edges.values()), default=0)
        self._check_served(hot_index, hot_agg)
        values = edge_values or {}
        self._forward = HeteroForward(
            num_layers, nodes, edges, edge_index, x, hot_index, hot_agg, values,
            embedded=embedded,
        )  # fmt: skip
        try:
            out = self._call(x, edge_index, values)
            calls = self._forward.calls
        except RuntimeError as error:
            if "must match the size" not in str(error):
                raise
            raise ValueError(_ROWS_DIFFER) from error
        finally:
            self._forward, self._hot_rows, self._output = None, None, None
            self._embedded_rows = None
        wrong = {r: n for r, n in calls.items() if n != num_layers}
        if wrong:
            raise ValueError(
                f"OrchModel needs each relation conv called once per layer "
                f"({num_layers}, one per sampled hop); these were called "
                f"otherwise: {wrong}"
            )
        return out

    def _check_served(
        self, hot_index: dict[str, Tensor], hot_agg: dict[EdgeType, Tensor]
    ) -> None:
        # Every relation into a type with hot rows needs their aggregates.
        for relation in self.bottom:
            index = hot_index.get(relation[2])
            if index is not None and index.numel() and relation not in hot_agg:
                raise ValueError(
                    f"this batch has hot {relation[2]!r} rows but no hot values "
                    f"for relation {relation}, which the model aggregates: the "
                    f"loader serves the model wrapped with it last; wrap this "
                    f"model with OrchModel(model, loader) before drawing batches"
                )

    def _trim(self, conv: torch.nn.Module, args: tuple, kwargs: dict) -> Any:
        forward = self._forward
        if forward is None:
            return None  # the model run by itself: untouched
        # Positional from here on: x, edge_index, then the conv's other inputs.
        kwargs = dict(kwargs)
        x = args[0] if args else kwargs.pop("x")
        edge_index = args[1] if len(args) > 1 else kwargs.pop("edge_index")
        rest = args[2:]
        relation = forward.relation(edge_index)
        given = forward.given_values(relation, conv, (*rest, *kwargs.values()))
        layer = forward.calls.get(relation, 0)
        forward.calls[relation] = layer + 1
        x_src, x_dst = x if isinstance(x, tuple | list) else (x, x)
        if forward.whole is not None:
            weight = (
                given.get("edge_weight")
                if reads_edge_value(conv, "edge_weight")
                else None
            )
            self._whole_neighbourhood(conv, relation, x_src, x_dst, weight)
            # Every row's aggregate is given: the conv aggregates no edge.
            no_edge = edge_index.new_empty(0)
            edges = _edges(conv, no_edge, no_edge, x_src, x_dst.size(0), kwargs, given)
            rest, kwargs = _cut_values(rest, kwargs, lambda value: value[:0])
            return ((x_src, x_dst), edges, *rest), kwargs
        if layer >= forward.num_layers:
            return None  # refused by run() once the model returns
        source, _, target = relation
        hops = forward.num_layers - layer
        num_src = sum(forward.nodes[source][: hops + 1])
        num_dst = sum(forward.nodes[target][:hops])
        num_edges = sum(forward.edges[relation][:hops])
        src, dst = edge_index[:, :num_edges]
        keep: Tensor | slice = slice(None)
        if layer == 0 and relation in forward.hot_agg:
            self._check_bottom(conv, relation, (x_src, x_dst), forward)
            # Hot rows come from the cache: their sampled edges are not needed.
            keep = forward.cold_mask(target, num_dst)[dst]
            src, dst = src[keep], dst[keep]
            hot = (forward.hot_index[target], forward.hot_agg[relation])
            if forward.embedded:
                self._embedded_rows = hot  # replace the output's rows
            else:
                self._hot_rows = hot  # replace the aggregation's rows
        forward.took(x_dst, num_dst)
        forward.took(x_src, sum(forward.nodes[source][:hops]))
        inputs = (_rows(x_src, num_src), _rows(x_dst, num_dst))
        kind = None if given else self._fused_kind(conv, x_dst)
        if kind is not None:
            self._output = _fused_relation(
                conv, kind, inputs, x_src is x_dst, (src, dst), self._hot_rows
            )
            self._hot_rows = None
            # PyG's forward runs on no rows; _finish returns the output.
            kwargs["size"] = (0, 0)
            rest, kwargs = _cut_values(rest, kwargs, lambda value: value[:0])
            no_rows = tuple(rows.new_empty((0, rows.size(1))) for rows in inputs)
            return (no_rows, edge_index.new_empty((2, 0)), *rest), kwargs
        edges = _edges(conv, src, dst, inputs[0], num_dst, kwargs, given)
        rest, kwargs = _cut_values(rest, kwargs, lambda value: value[:num_edges][keep])
        return (inputs, edges, *rest), kwargs

    def _cut_beside(self, module: torch.nn.Module, args: tuple) -> tuple | None:
        # A module of a layer's input beside its convs gets the rows they output.
        forward = self._forward
        if forward is None or forward.whole is not None or not args:
            return None
        cut = forward.beside(args[0])
        return None if cut is args[0] else (cut, *args[1:])

    def _whole_neighbourhood(
        self,
        conv: Any,
        relation: EdgeType,
        x_src: Tensor,
        x_dst: Tensor,
        edge_weight: Tensor | None,
    ) -> None:
        # Every destination row is "hot": its aggregate over the whole
        # neighbourhood comes from the Numba kernel; that of the graph's own
        # features is kept for later calls.
        whole = self._forward.whole
        layout = self._whole_graphs.setdefault(relation, WholeGraph())
        keep = x_src is whole[relation[0]].get("x")
        agg = layout.aggregate(
            whole[relation], x_src, cache_kind(conv), edge_weight, x_dst.size(0), keep
        )
        self._hot_rows = (None, agg.to(x_dst.device))

    def _check_bottom(
        self, conv: Any, relation: EdgeType, x: tuple, forward: HeteroForward
    ) -> None:
        # The cache holds aggregates of raw features for the bottom conv (or
        # its outputs on raw features: embeddings, which read x_dst too).
        source, _, target = relation
        raw = x[0] is forward.x[source] and (
            not forward.embedded or x[1] is forward.x.get(target)
        )
        if conv is not self.bottom[relation] or not raw:
            raise ValueError(
                f"the hot cache holds aggregates of the raw features of "
                f"{relation[0]!r} for relation {relation}'s bottom conv, but "
                f"that conv does not take batch.x_dict[{relation[0]!r}] as it "
                f"is (a layer before it transforms the features?): aggregate "
                f"raw features in the bottom layer, or use hot_ratio=0"
            )

    def _inject_hot_rows(self, module: Any, inputs: Any, output: Tensor) -> Any:
        # Replaces the aggregation of the hot rows by their cached aggregates.
        if self._hot_rows is None:
            return None
        hot_index, hot_value = self._hot_rows
        if hot_index is None:
            return hot_value.to(output.dtype)  # every row: nothing to keep
        return output.index_copy(0, hot_index, hot_value.to(output.dtype))

    def _fused_kind(self, conv: Any, x_dst: Any) -> str | None:
        # The aggregation _trim computes itself for conv: a SAGEConv or
        # GraphConv (GINConv's nn may hold a norm that refuses no rows) with
        # no hooks but these and root rows given.
        if not isinstance(conv, SAGEConv | GraphConv) or not isinstance(x_dst, Tensor):
            return None
        if any(is_lazy(parameter) for parameter in conv.parameters()):
            return None
        hooks = (self._trim, self._finish, self._inject_hot_rows)
        return fused_kind(conv, own_hooks=hooks)

    def _finish(self, module: Any, inputs: Any, output: Any) -> Tensor | None:
        # The output _trim computed, in place of PyG's on no rows, with the
        # embedded hot rows in place of theirs.
        computed, self._output, self._hot_rows = self._output, None, None
        output = output if computed is None else computed
        embedded, self._embedded_rows = self._embedded_rows, None
        if embedded is None:
            return output
        hot_index, hot_output = embedded
        return output.index_copy(0, hot_index, hot_output.to(output.dtype))


def check_edge_values(
    model: torch.nn.Module, keywords: dict[str, str], data: HeteroData
) -> None:
    """Refuses edge values of ``data`` that a relation conv would read unseen.

    The model runs as ``model(x_dict, edge_index_dict, **values)``, with
    the batch's ``edge_weight`` and ``edge_attr`` dicts under the
    keywords its ``forward`` takes (:func:`edge_keywords`). A value its
    forward has no keyword for would be left out, though a relation conv
    takes it, and the outputs would differ from a call given it.

    Raises:
        NotImplementedError: naming the relation, the value and the conv.

    Example:
        >>> from torch_geometric.nn import GraphSAGE, to_hetero
        >>> data = HeteroData()
        >>> data["a"].x = torch.ones(2, 4)
        >>> data["a", "to", "a"].edge_index = torch.tensor([[0], [1]])
        >>> model = to_hetero(GraphSAGE(4, 8, num_layers=2), data.metadata())
        >>> check_edge_values(model, edge_keywords(model), data)
    """
    for relation, conv in relation_convs(model):
        store = data[relation]
        for name in ("edge_weight", "edge_attr"):
            if name in keywords or store.get(name) is None:
                continue
            if reads_edge_value(conv, name):
                raise NotImplementedError(
                    f"data[{relation}].{name} would not reach {conv}, which "
                    f"takes it: {type(model).__name__}.forward takes "
                    f"no {name}_dict (nor {name}) keyword, by which "
                    f"OrchModel would hand it the batch's {name} of every "
                    f"relation. Add one that passes them on to the convs "
                    f"(as to_hetero and HeteroConv do), or delete {name} "
                    f"from the graph if the model should not read it"
                )


def _refuse_gcn(convs: list[tuple[EdgeType, MessagePassing]]) -> None:
    # GCNConv takes no (x_src, x_dst) pair, and its normalisation needs the
    # degrees of the whole batch graph, not of the rows a layer outputs.
    gcn = [relation for relation, conv in convs if isinstance(conv, GCNConv)]
    if gcn:
        raise NotImplementedError(
            f"OrchModel runs each relation conv of a heterogeneous model on "
            f"the rows its layer needs, as a bipartite (x_src, x_dst) pair, "
            f"which GCNConv refuses (and its normalisation needs the degrees "
            f"of the whole batch graph); these relations have one: {gcn}. Use "
            f"GraphConv or SAGEConv there, or train the plain model on the "
            f"loader's batches with hot_ratio=0"
        )


def _modules_beside(
    model: torch.nn.Module, convs: list[MessagePassing]
) -> list[torch.nn.Module]:
    # The model's modules but the model itself, its relation convs and theirs.
    inside = {id(module) for conv in convs for module in conv.modules()}
    return [
        module
        for module in model.modules()
        if module is not model and id(module) not in inside
    ]


def _per_hop_counts(
    batch: HeteroData,
) -> tuple[dict[str, list[int]], dict[EdgeType, list[int]]]:
    # Sampled nodes per hop of each type and edges per hop of each relation.
    try:
        nodes = {
            t: list(store.num_sampled_nodes)
            for t, store in zip(batch.node_types, batch.node_stores, strict=True)
        }
        edges = {
            r: list(store.num_sampled_edges)
            for r, store in zip(batch.edge_types, batch.edge_stores, strict=True)
        }
    except (AttributeError, KeyError, TypeError):
        raise ValueError(
            "OrchModel needs directional batches with per-hop counts "
            "(num_sampled_nodes, num_sampled_edges) from OrchNeighborLoader or "
            "OrchLinkNeighborLoader; this batch has none (induced subgraph?)"
        ) from None
    return nodes, edges


def _seed_rows(batch: HeteroData, out: Any, nodes: dict[str, list[int]]) -> Any:
    # The seed type's first batch_size rows, or each type's seeds (links).
    if not isinstance(out, dict):
        return out
    for node_type, store in zip(batch.node_types, batch.node_stores, strict=True):
        if "batch_size" in store and node_type in out:
            return out[node_type][: store.batch_size]
    return {
        node_type: value[: nodes[node_type][0]]
        for node_type, value in out.items()
        if nodes.get(node_type, [0])[0] > 0
    }


def _fused_relation(
    conv: Any,
    kind: str,
    inputs: tuple[Tensor, Tensor],
    same_type: bool,
    edges: tuple[Tensor, Tensor],
    hot: tuple[Tensor | None, Tensor] | None,
) -> Tensor:
    # The conv's output by pyg_orch's aggregation, as BasicLayers computes a
    # fused conv's. On a relation within one node type, the destinations'
    # rows are the sources' first rows, whose gradient the aggregation adds
    # as it writes the sources' (no zero-filled gradient of a slice).
    x_src, x_dst = inputs
    src, dst = sort_by_destination(*edges)
    hot_index, hot_value = hot if hot is not None else (None, None)
    aggregation, root = aggregate_neighbours(
        x_src, row_pointers(dst, x_dst.size(0)), src, kind, hot_index, hot_value
    )
    return conv_output(conv, aggregation, root if same_type else x_dst)


def _edges(
    conv: Any,
    src: Tensor,
    dst: Tensor,
    x_src: Tensor,
    num_dst: int,
    kwargs: dict,
    given: dict[str, Tensor],
) -> Tensor:
    # The edges as the conv aggregates them fastest: a sparse product for
    # the convs that take one exactly, an edge_index of the given size otherwise:
    # with edge values, which the product would leave out, and under
    # autocast, whose bfloat16 rows torch's sparse product lacks on the CPU
    # (PyG's message passing then, as the plain model computes).
    autocast = torch.is_autocast_enabled(x_src.device.type)
    if takes_adjacency(conv) and not (autocast or given):
        ones = x_src.new_ones(src.numel())
        return csr_adjacency(src, dst, ones, num_dst, x_src.size(0))
    kwargs["size"] = (x_src.size(0), num_dst)
    return torch.stack([src, dst])


def _cut_values(rest: tuple, kwargs: dict, cut: Any) -> tuple[tuple, dict]:
    # The conv's edge values (its other tensor inputs) cut as its edges were.
    def apply(value: Any) -> Any:
        return cut(value) if isinstance(value, Tensor) else value

    rest = tuple(apply(value) for value in rest)
    return rest, {name: apply(value) for name, value in kwargs.items()}


def edge_keywords(model: torch.nn.Module) -> dict[str, str]:
    """The keyword by which ``model.forward`` takes each edge value's dict.

    ``to_hetero`` models take ``edge_weight`` and ``edge_attr`` (dicts by
    edge type); models of ``HeteroConv`` layers, as PyG's examples write
    them, ``edge_weight_dict`` and ``edge_attr_dict``.

    Example:
        >>> from torch_geometric.nn import GraphSAGE, to_hetero
        >>> metadata = (["a"], [("a", "to", "a")])
        >>> edge_keywords(to_hetero(GraphSAGE(4, 8, num_layers=2), metadata))
        {'edge_weight': 'edge_weight', 'edge_attr': 'edge_attr'}
    """
    parameters = inspect.signature(model.forward).parameters
    keywords = {}
    for name in ("edge_weight", "edge_attr"):
        for keyword in (f"{name}_dict", name):
            if keyword in parameters:
                keywords[name] = keyword
                break
    return keywords


def _rows(x: Tensor, count: int) -> Tensor:
    # The first rows of x; x itself when that is all of them, which spares
    # the backward pass a zero-filled gradient of x's size per relation.
    return x if x.size(0) == count else x[:count]
