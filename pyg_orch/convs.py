"""What pyg_orch knows of PyG's convs: the aggregation a hot cache can serve.

Shared by the homogeneous and heterogeneous model wrappers.
"""

from __future__ import annotations

import warnings

import torch
from torch import Tensor
from torch_geometric.nn import GCNConv, GINConv, GraphConv, SAGEConv

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


def csr_adjacency(
    src: Tensor, dst: Tensor, weight: Tensor, num_dst: int, num_src: int
) -> Tensor:
    """A ``[num_dst, num_src]`` CSR adjacency, duplicates kept as entries.

    ``weight`` holds the entries, in the dtype of the features they multiply.
    """
    if dst.numel() > 1 and bool((dst[1:] < dst[:-1]).any()):
        order = torch.argsort(dst, stable=True)
        src, dst, weight = src[order], dst[order], weight[order]
    crow = torch.zeros(num_dst + 1, dtype=torch.long, device=dst.device)
    torch.cumsum(torch.bincount(dst, minlength=num_dst), 0, out=crow[1:])
    return torch.sparse_csr_tensor(
        crow, src, weight, (num_dst, num_src), check_invariants=False
    )


def cold_rows(num_rows: int, hot_index: Tensor) -> Tensor:
    """``True`` for each of ``num_rows`` rows but those of ``hot_index``."""
    cold = torch.ones(num_rows, dtype=torch.bool, device=hot_index.device)
    cold[hot_index] = False
    return cold
