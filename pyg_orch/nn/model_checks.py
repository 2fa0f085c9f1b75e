"""``OrchModel``'s wrap-time checks: of its arguments, the wrapped model and its convs.

Each raises an error that names the argument or layer and the fix, once, when
the model is wrapped.
"""

from __future__ import annotations

import warnings
from typing import Any

import torch
from torch import Tensor
from torch_geometric.nn import GCNConv
from torch_geometric.nn.models.basic_gnn import BasicGNN
from torch_geometric.nn.norm import BatchNorm, DiffGroupNorm, InstanceNorm, LayerNorm

from pyg_orch.aggregation import HALF_WIDTHS
from pyg_orch.checks import is_int


def check_model_arguments(model: Any, loader: Any) -> None:
    """Checks that :class:`~pyg_orch.OrchModel` can run ``model`` on ``loader``.

    The loader must be an :class:`~pyg_orch.OrchNeighborLoader` that samples
    one hop per layer of the model. (Whether the model can be wrapped at all
    is checked by ``OrchModel`` itself.)

    Args:
        model: the model to wrap.
        loader: the loader, or ``None``.

    Raises:
        TypeError: ``loader`` is not an ``OrchNeighborLoader``.
        ValueError: its ``num_neighbors`` has not one fan-out per layer.

    Example:
        >>> from torch_geometric.nn import GraphSAGE
        >>> from torch_geometric.data import Data
        >>> from pyg_orch.loading.node_loader import OrchNeighborLoader
        >>> data = Data(x=torch.ones(3, 2), edge_index=torch.tensor([[0, 1], [1, 2]]))
        >>> loader = OrchNeighborLoader(data, [2, 2], batch_size=2)
        >>> check_model_arguments(GraphSAGE(2, 4, num_layers=3), loader)
        Traceback (most recent call last):
        ...
        ValueError: the loader's num_neighbors=[2, 2] samples 2 hops, but the model has 3 layers (num_layers=3): OrchModel needs one fan-out per layer. Build the loader with 3 fan-outs or the model with num_layers=2
    """  # noqa: E501 - a doctest's output is one line
    if loader is None:
        return
    sampler = getattr(loader, "node_sampler", getattr(loader, "link_sampler", None))
    if sampler is None or not hasattr(loader, "cache"):
        raise TypeError(
            f"loader must be an OrchNeighborLoader or OrchLinkNeighborLoader "
            f"(its hot cache feeds the bottom layer), got "
            f"{type(loader).__name__}; build it with "
            f"pyg_orch.OrchNeighborLoader(...), or pass loader=None"
        )
    num_layers = getattr(model, "num_layers", None)
    sampler_fanouts = getattr(sampler, "num_neighbors", None)
    fanouts = getattr(sampler_fanouts, "values", None)
    if not is_int(num_layers) or not isinstance(fanouts, list | tuple):
        return  # not a BasicGNN (OrchModel says so), or per-edge-type fan-outs
    if len(fanouts) != num_layers:
        raise ValueError(
            f"the loader's num_neighbors={list(fanouts)} samples {len(fanouts)} "
            f"hops, but the model has {num_layers} layers (num_layers="
            f"{num_layers}): OrchModel needs one fan-out per layer. Build the "
            f"loader with {num_layers} fan-outs or the model with num_layers="
            f"{len(fanouts)}"
        )


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


def check_precision(precision: Any, model: torch.nn.Module) -> None:
    """Checks ``OrchModel``'s ``precision`` against the model it wraps.

    Raises:
        ValueError: ``precision`` is not one of :data:`PRECISIONS`.
        TypeError: mixed precision for a model whose parameters are not
            float32 (its master weights).

    Example:
        >>> from torch_geometric.nn import GraphSAGE
        >>> check_precision("bf16", GraphSAGE(4, 8, num_layers=2))
        >>> check_precision("half", GraphSAGE(4, 8, num_layers=2))
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
    dtype = next(model.parameters()).dtype
    if dtype != torch.float32:
        raise TypeError(
            f"precision={precision!r} runs a float32 model under autocast (its "
            f"float32 parameters are the master weights), but the model's "
            f"parameters are {dtype}: use model.float()"
        )


def hot_kind(
    model: BasicGNN, kind: str | None, edge_names: list[str], embedding: bool
) -> str:
    """The hot values ``model``'s bottom layer needs, or a refusal.

    Its aggregation ``kind`` (see :func:`~pyg_orch.nn.convs.cache_kind`),
    weighted (``weighted_<kind>``) when the layer reads the graph's
    ``edge_weight``, or ``"embedding"``.

    Args:
        model: the wrapped model.
        kind: its bottom conv's cache kind.
        edge_names: the edge values the convs read (``edge_weight``,
            ``edge_attr``).
        embedding: the hot values are the bottom layer's outputs.

    Raises:
        NotImplementedError: edge values that no hot value serves exactly:
            edge features, or edge values in embedding mode.

    Example:
        >>> from torch_geometric.nn import GraphSAGE
        >>> hot_kind(GraphSAGE(4, 8, num_layers=2), "sum", ["edge_weight"], False)
        'weighted_sum'
    """
    if edge_names and (embedding or "edge_attr" in edge_names):
        raise NotImplementedError(
            f"hot vertices cannot serve this model exactly: its bottom "
            f"layer {model.convs[0]} reads the batch's "
            f"{' and '.join(edge_names)}, and hot vertices serve edge "
            f"values only as an edge_weight in a weighted sum, mean or max "
            f"(GraphConv), not in "
            f"{'embedding mode' if embedding else 'edge features'}. Use "
            f"hot_ratio=0, or a bottom conv such as GraphConv"
        )
    if embedding:
        return "embedding"
    return f"weighted_{kind}" if edge_names else kind
