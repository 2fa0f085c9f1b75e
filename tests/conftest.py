"""Shared fixtures: small graphs with known structure, and a printed-ratio check."""

import pytest
import torch
from torch_geometric.data import Data
from torch_geometric.nn import GraphConv
from torch_geometric.nn.models.basic_gnn import BasicGNN


def random_graph(num_nodes: int, num_edges: int, seed: int = 0) -> Data:
    """A random directed multigraph-free graph with skewed degrees and features.

    Destinations are drawn from a skewed distribution so that some nodes have
    many neighbours, some few and some none (isolated).
    """
    generator = torch.Generator().manual_seed(seed)
    weights = torch.arange(1, num_nodes + 1, dtype=torch.float).pow(-0.8)
    dst = torch.multinomial(weights, num_edges, replacement=True, generator=generator)
    src = torch.randint(num_nodes, (num_edges,), generator=generator)
    edge_index = torch.stack([src, dst])
    edge_index = edge_index[:, edge_index[0] != edge_index[1]]
    edge_index = torch.unique(edge_index, dim=1)
    edge_index = edge_index[:, torch.randperm(edge_index.size(1), generator=generator)]
    x = torch.randn(num_nodes, 8, generator=generator)
    return Data(
        x=x,
        edge_index=edge_index,
        edge_attr=torch.arange(edge_index.size(1), dtype=torch.float),
        num_nodes=num_nodes,
    )


class WeightedGraphConvGNN(BasicGNN):
    """A ``BasicGNN`` of ``GraphConv`` layers, which take an ``edge_weight``."""

    supports_edge_weight = True
    supports_edge_attr = False

    def init_conv(self, in_channels, out_channels, **kwargs):
        return GraphConv(in_channels, out_channels, **kwargs)


def assert_printed_ratio(
    ratio: float, numerator: float, denominator: float, step: float, ratio_step: float
) -> None:
    """``ratio`` is ``numerator / denominator`` as printed, up to their rounding.

    The two times are printed to ``step`` (0.1 for ``:.1f``) and the ratio,
    of the unrounded times, to ``ratio_step``: a check tighter than both
    roundings fails on a small ratio however right it is.
    """
    half, half_ratio = step / 2, ratio_step / 2
    low = (numerator - half) / (denominator + half) - half_ratio
    high = (numerator + half) / max(denominator - half, 1e-12) + half_ratio
    assert low <= ratio <= high, (ratio, numerator, denominator)


@pytest.fixture(scope="session")
def cora():
    from pyg_orch.datasets import load_cora

    return load_cora()


@pytest.fixture(scope="module")
def mag():
    """A small ogbn-mag-shaped heterogeneous graph with 8 features per type."""
    from pyg_orch.datasets import power_law_hetero_graph

    return power_law_hetero_graph(scale=0.002, num_features=8, seed=3)
