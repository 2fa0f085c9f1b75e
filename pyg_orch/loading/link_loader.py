"""``OrchLinkNeighborLoader``: PyG's ``LinkNeighborLoader`` with hot vertices."""

from __future__ import annotations

import inspect
from typing import Any

import torch
from torch import Tensor
from torch_geometric.data import Data, HeteroData
from torch_geometric.loader import LinkNeighborLoader

from pyg_orch.hot.choice import HotRatio, HotSet, check_hot_method
from pyg_orch.hot.serving import HotServing
from pyg_orch.hot.vertices import HotVertices
from pyg_orch.loading.arguments import (
    check_heterogeneous,
    check_hot_type,
    check_presample_epochs,
)
from pyg_orch.loading.graph_inputs import (
    graph_edge_weight,
    hot_features,
    with_feature_dtype,
)
from pyg_orch.sampling import OrchNeighborSampler

# LinkNeighborLoader's parameters, to read arguments given by position.
_PARAMETERS = inspect.signature(LinkNeighborLoader.__init__)


class OrchLinkNeighborLoader(HotServing, LinkNeighborLoader):
    r"""A drop-in :class:`~torch_geometric.loader.LinkNeighborLoader` with hot vertices.

    It takes every argument of
    :class:`~torch_geometric.loader.LinkNeighborLoader`, samples with
    :class:`~pyg_orch.OrchNeighborSampler` (no ``pyg-lib`` or
    ``torch-sparse`` needed) and yields the same mini-batches: homogeneous or
    heterogeneous graphs, ``edge_label`` and ``edge_label_time``, binary and
    triplet negative sampling (``neg_sampling``), temporal and weighted
    sampling, disjoint subgraphs.

    With ``hot_ratio > 0`` the last hop skips hot vertices, as in
    :class:`~pyg_orch.OrchNeighborLoader`: each batch carries their cached
    full-neighbourhood aggregates, which :class:`~pyg_orch.OrchModel` feeds
    to the bottom layer (exact, static values), and the model returns the
    seed nodes' embeddings for a link head.

    Args:
        data: the graph, a :class:`~torch_geometric.data.Data` or
            :class:`~torch_geometric.data.HeteroData` object.
        num_neighbors: neighbours to sample per node, one entry per hop (a
            dict of them per edge type on a heterogeneous graph).
        *args: the other arguments of
            :class:`~torch_geometric.loader.LinkNeighborLoader`, by position.
        hot_ratio: fraction of the vertices to make hot, in ``[0, 1]`` (of
            each node type's on a heterogeneous graph, or a dict of fractions
            per node type).
        hot_method: ``"presample"`` (frontier counts over sampled epochs of
            the seed edges) or ``"degree"``.
        hot: a precomputed hot set to use instead of choosing one.
        presample_epochs: epochs sampled by ``presample``.
        feature_dtype: ``torch.bfloat16`` or ``torch.float16`` keeps the
            features in half width, as in
            :class:`~pyg_orch.OrchNeighborLoader`.
        **kwargs: the other arguments of
            :class:`~torch_geometric.loader.LinkNeighborLoader` and of
            :class:`torch.utils.data.DataLoader`, by name.

    Example:
        >>> import torch
        >>> from torch_geometric.data import Data
        >>> edge_index = torch.tensor([[0, 1, 2, 3], [1, 2, 3, 0]])
        >>> data = Data(edge_index=edge_index, num_nodes=4)
        >>> loader = OrchLinkNeighborLoader(data, num_neighbors=[2],
        ...                                 batch_size=2, neg_sampling="binary")
        >>> batch = next(iter(loader))
        >>> batch.edge_label_index.size(1), batch.edge_label.tolist()
        (4, [1.0, 1.0, 0.0, 0.0])
        >>> from pyg_orch.datasets import load_cora
        >>> from torch_geometric.nn import GraphSAGE
        >>> from pyg_orch import OrchModel
        >>> cora = load_cora()
        >>> loader = OrchLinkNeighborLoader(cora, [10, 5], batch_size=128,
        ...                                 neg_sampling="binary", hot_ratio=0.2)
        >>> model = OrchModel(GraphSAGE(cora.num_features, 32, num_layers=2),
        ...                   loader)
        >>> batch = next(iter(loader))
        >>> z = model(batch)  # the seed nodes' embeddings
        >>> src, dst = batch.edge_label_index
        >>> (z[src] * z[dst]).sum(-1).shape
        torch.Size([256])
    """

    def __init__(
        self,
        data: Any,
        num_neighbors: Any,
        *args: Any,
        hot_ratio: HotRatio = 0.0,
        hot_method: str = "presample",
        hot: HotSet | Tensor | None = None,
        presample_epochs: int = 1,
        feature_dtype: torch.dtype | None = None,
        **kwargs: Any,
    ):
        _check_hot_arguments(data, hot_ratio, hot_method, hot, presample_epochs)
        data = with_feature_dtype(data, feature_dtype)
        arguments = _PARAMETERS.bind(self, data, num_neighbors, *args, **kwargs)
        arguments = {**arguments.arguments, **arguments.arguments.get("kwargs", {})}
        _check_edge_label_index(data, arguments.get("edge_label_index"))
        if arguments.get("neighbor_sampler") is None:
            kwargs["neighbor_sampler"] = OrchNeighborSampler.for_loader(
                data, num_neighbors, arguments
            )
        super().__init__(data, num_neighbors, *args, **kwargs)
        wants_hot = hot is not None or hot_ratio != 0
        self._hot_vertices = HotVertices(
            self.link_sampler,
            hot_features(data) if wants_hot else None,
            ratio=hot_ratio,
            mode=None,
            super_batch=1,
            num_neighbors=num_neighbors,
            edge_weight=graph_edge_weight(data),
        )
        self._hot_vertices.choose(
            hot,
            hot_method,
            self.input_data,
            self.batch_size,
            presample_epochs,
            neg_sampling=self.neg_sampling,
        )

    def __iter__(self) -> Any:
        self._hot_vertices.check_ready()
        return super().__iter__()

    def filter_fn(self, out: Any) -> Data | HeteroData:
        batch = super().filter_fn(out)
        self._hot_vertices.annotate(batch)
        return batch


def _check_edge_label_index(data: Any, edge_label_index: Any) -> None:
    # PyG asserts this without a message: a heterogeneous graph's seed edges
    # must name their edge type.
    if isinstance(data, HeteroData) and edge_label_index is None:
        raise ValueError(
            f"edge_label_index must name the edge type of the seed edges on a "
            f"HeteroData graph: an edge type such as {data.edge_types[0]!r} "
            f"(all its edges), or (edge_type, edge_index) for some of them"
        )


def _check_hot_arguments(
    data: Any, hot_ratio: Any, hot_method: str, hot: Any, presample_epochs: Any
) -> None:
    # The hot arguments' values; the rest is LinkNeighborLoader's to check.
    check_heterogeneous(data, hot_ratio)
    if hot_ratio == "auto":
        raise ValueError(
            "hot_ratio='auto' is measured by OrchNeighborLoader's pipeline; "
            "give OrchLinkNeighborLoader a fraction (e.g. hot_ratio=0.2)"
        )
    check_hot_method(hot_method)
    check_hot_type(hot)
    check_presample_epochs(presample_epochs)
