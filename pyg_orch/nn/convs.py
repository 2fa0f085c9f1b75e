"""What pyg_orch knows of PyG's convs: the aggregation a hot cache can serve.

Shared by the homogeneous and heterogeneous model wrappers.
"""

from __future__ import annotations

import copy
import inspect
import warnings
from collections.abc import Collection

import torch
import torch.nn.functional as F
from torch import Tensor
from torch_geometric.nn import GCNConv, GINConv, GraphConv, Linear, SAGEConv

# The CSR adjacency is how the wrappers aggregate; torch's "beta" notice about
# it would repeat for every batch.
warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta")

# PyG aggregation names -> the hot cache's kinds.
_KINDS = {"mean": "mean", "add": "sum", "sum": "sum", "max": "max"}
# Aggregations torch.sparse.mm fuses (no message row per edge); others go
# through PyG's edge-wise message passing.
FUSED = {"mean", "add", "sum"}


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


def reads_edge_value(conv: torch.nn.Module, name: str) -> bool:
    """Whether ``conv`` takes the edge value ``name`` and uses it.

    ``name`` is ``"edge_weight"`` or ``"edge_attr"``. ``GATConv`` (as PyG's
    other attention convs) ignores ``edge_attr`` without its edge projection
    ``lin_edge``, that is without ``edge_dim``.

    Example:
        >>> from torch_geometric.nn import GATConv
        >>> reads_edge_value(GraphConv(4, 4), "edge_weight")
        True
        >>> reads_edge_value(GATConv(4, 4), "edge_attr")
        False
        >>> reads_edge_value(GATConv(4, 4, edge_dim=2), "edge_attr")
        True
    """
    if name not in inspect.signature(conv.forward).parameters:
        return False
    return name != "edge_attr" or getattr(conv, "lin_edge", conv) is not None


# Convs whose computation around the aggregation conv_output repeats.
_OWN_FORMULA = (SAGEConv, GraphConv, GINConv)


# Every hook dict of a MessagePassing: a conv with any but the caller's own
# runs through PyG's own forward and propagate.
_HOOKS = ("_forward_hooks", "_forward_pre_hooks") + tuple(
    f"_{stage}_forward{when}_hooks"
    for stage in ("propagate", "message", "aggregate", "message_and_aggregate")
    for when in ("_pre", "")
)


def takes_adjacency(conv: torch.nn.Module) -> bool:
    """Whether ``conv`` aggregates a sparse adjacency exactly as its edges.

    So do convs whose aggregation of raw messages is a sum or mean that PyG
    computes as one sparse product (``SAGEConv``, ``GraphConv``,
    ``GINConv``). Others, such as ``GATConv``, treat a sparse adjacency as a
    set of edges: adding self loops coalesces it, which merges an edge that
    the graph repeats, while the plain model counts each copy.

    Example:
        >>> from torch_geometric.nn import GATConv
        >>> takes_adjacency(SAGEConv(8, 4)), takes_adjacency(GATConv(8, 4))
        (True, False)
    """
    aggr = getattr(conv, "aggr", None)
    return isinstance(aggr, str) and aggr in FUSED and cache_kind(conv) is not None


def fused_kind(conv: torch.nn.Module, own_hooks: Collection = ()) -> str | None:
    """The aggregation ``OrchModel`` computes itself for ``conv``, or ``None``.

    For these convs the wrappers aggregate with
    :func:`~pyg_orch.aggregation.aggregate_neighbours` and apply the conv's
    own layers with :func:`conv_output`, instead of calling the conv (whose
    ``propagate`` would go through ``torch.sparse.mm``). Subclasses, convs
    with hooks (but ``own_hooks``, the caller's) and convs being explained
    keep PyG's own path, so that everything they observe still happens.

    Example:
        >>> fused_kind(SAGEConv(8, 4)), fused_kind(GCNConv(8, 4))
        ('mean', None)
    """
    if type(conv) not in _OWN_FORMULA or conv.explain:
        return None
    for name in _HOOKS:
        if any(hook not in own_hooks for hook in getattr(conv, name).values()):
            return None
    kind = cache_kind(conv)
    return kind if kind in ("sum", "mean", "max") else None


def conv_output(conv: torch.nn.Module, aggregation: Tensor, x_dst: Tensor) -> Tensor:
    """What ``conv`` computes from its neighbour ``aggregation`` and root rows.

    The part of the conv's ``forward`` after ``propagate``, for the convs of
    :func:`fused_kind`.

    Example:
        >>> conv = GraphConv(2, 3)
        >>> x, edges = torch.ones(2, 2), torch.tensor([[0], [1]])
        >>> agg = torch.tensor([[0.0, 0.0], [1.0, 1.0]])
        >>> torch.allclose(conv_output(conv, agg, x), conv(x, edges))
        True
    """
    if isinstance(conv, SAGEConv):
        if not conv.root_weight:
            out = conv.lin_l(aggregation)
        else:
            out = _sum_of_linears(conv.lin_l, aggregation, conv.lin_r, x_dst)
        return F.normalize(out, p=2.0, dim=-1) if conv.normalize else out
    if isinstance(conv, GraphConv):
        return _sum_of_linears(conv.lin_rel, aggregation, conv.lin_root, x_dst)
    # eps is a float32 [1] buffer, which would widen bfloat16 rows to float32.
    return conv.nn(aggregation + (1 + conv.eps).to(x_dst.dtype) * x_dst)


def _sum_of_linears(first, x_first: Tensor, second, x_second: Tensor) -> Tensor:
    # first(x_first) + second(x_second). For plain linear layers the second
    # product is accumulated into the first's output by an in-place GEMM:
    # no output and no sum of their own (about a fifth of the two products'
    # time at a batch's sizes). The first product's output is not saved for
    # backward, so autograd allows it.
    if not (_plain_linear(first) and _plain_linear(second)):
        return first(x_first) + second(x_second)
    if torch.is_autocast_enabled(x_first.device.type):
        return first(x_first) + second(x_second)
    out = F.linear(x_first, first.weight, first.bias)
    out = out.addmm_(x_second, second.weight.t())
    return out if second.bias is None else out.add_(second.bias)


def _plain_linear(module: torch.nn.Module) -> bool:
    # A linear layer without hooks whose weight is initialised.
    if type(module) not in (Linear, torch.nn.Linear):
        return False
    if module._forward_hooks or module._forward_pre_hooks:
        return False
    return not isinstance(module.weight, torch.nn.parameter.UninitializedParameter)


def sort_by_destination(src: Tensor, dst: Tensor, *values: Tensor) -> tuple:
    """``(src, dst, *values)`` ordered by ``dst`` (stable), as given if already.

    Example:
        >>> sort_by_destination(torch.tensor([0, 1]), torch.tensor([2, 1]))
        (tensor([1, 0]), tensor([1, 2]))
    """
    if dst.numel() > 1 and bool((dst[1:] < dst[:-1]).any()):
        order = torch.argsort(dst, stable=True)
        return (src[order], dst[order], *(value[order] for value in values))
    return (src, dst, *values)


def row_pointers(dst: Tensor, num_dst: int) -> Tensor:
    """CSR row pointers ``[num_dst + 1]`` of edges sorted by ``dst``.

    Example:
        >>> row_pointers(torch.tensor([0, 0, 2]), num_dst=3)
        tensor([0, 2, 2, 3])
    """
    rowptr = torch.zeros(num_dst + 1, dtype=torch.long, device=dst.device)
    torch.cumsum(torch.bincount(dst, minlength=num_dst), 0, out=rowptr[1:])
    return rowptr


def csr_adjacency(
    src: Tensor, dst: Tensor, weight: Tensor, num_dst: int, num_src: int
) -> Tensor:
    """A ``[num_dst, num_src]`` CSR adjacency, duplicates kept as entries.

    ``weight`` holds the entries, in the dtype of the features they multiply.

    Example:
        >>> adjacency = csr_adjacency(torch.tensor([1, 0]), torch.tensor([0, 0]),
        ...                           torch.ones(2), num_dst=1, num_src=2)
        >>> adjacency.to_dense()
        tensor([[1., 1.]])
    """
    src, dst, weight = sort_by_destination(src, dst, weight)
    return torch.sparse_csr_tensor(
        row_pointers(dst, num_dst), src, weight, (num_dst, num_src),
        check_invariants=False,
    )  # fmt: skip


def cold_rows(num_rows: int, hot_index: Tensor) -> Tensor:
    """``True`` for each of ``num_rows`` rows but those of ``hot_index``.

    Example:
        >>> cold_rows(3, torch.tensor([1]))
        tensor([ True, False,  True])
    """
    cold = torch.ones(num_rows, dtype=torch.bool, device=hot_index.device)
    cold[hot_index] = False
    return cold


def without_hooks(module: torch.nn.Module) -> torch.nn.Module:
    """A deep copy of ``module`` without the hooks registered on it.

    The template of the weight snapshots that embedding mode computes with.

    Example:
        >>> conv = SAGEConv(4, 2)
        >>> _ = conv.register_forward_hook(lambda *args: None)
        >>> len(without_hooks(conv)._forward_hooks), len(conv._forward_hooks)
        (0, 1)
    """
    # Hooks are bound methods of their owners: copying them would copy those.
    memo = {
        id(value): type(value)()
        for part in module.modules()
        for name, value in vars(part).items()
        if "hooks" in name and isinstance(value, dict)
    }
    return copy.deepcopy(module, memo)


def weight_snapshot(
    template: torch.nn.Module, live: torch.nn.Module
) -> torch.nn.Module:
    """A CPU copy of ``template`` holding ``live``'s current weights, in eval mode.

    Taken between optimizer steps, in the training thread, for the hot
    refresher thread to compute with.

    Example:
        >>> live = SAGEConv(4, 2)
        >>> snapshot = weight_snapshot(without_hooks(live), live)
        >>> bool(snapshot.lin_l.weight.eq(live.lin_l.weight).all()), snapshot.training
        (True, False)
    """
    layer = copy.deepcopy(template)
    state = live.state_dict()
    layer.load_state_dict({key: v.detach().cpu() for key, v in state.items()})
    return layer.eval()
