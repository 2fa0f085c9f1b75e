"""``OrchLinkNeighborLoader``: PyG's ``LinkNeighborLoader`` with hot vertices."""

from __future__ import annotations

import inspect
from typing import Any

import torch
from torch import Tensor
from torch_geometric.data import HeteroData
from torch_geometric.loader import LinkNeighborLoader

from pyg_orch.hot.choice import HotRatio, HotSet
from pyg_orch.hot.options import HotOptions
from pyg_orch.loading.checkpoint import fingerprint
from pyg_orch.loading.orch_loader import OrchLoader

# LinkNeighborLoader's parameters, to read arguments given by position.
_PARAMETERS = inspect.signature(LinkNeighborLoader.__init__)


class OrchLinkNeighborLoader(OrchLoader, LinkNeighborLoader):
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
    bottom-layer values, which :class:`~pyg_orch.OrchModel` feeds to the
    bottom layer, and the model returns the seed nodes' embeddings for a link
    head. Everything the node loader has, the link loader has, through the
    same code (:class:`~pyg_orch.loading.orch_loader.OrchLoader`): the cache
    modes (``"static"``, exact; ``"resample"`` and ``"embedding"``, within
    ``staleness`` steps), ``hot_ratio="auto"``, the pipeline (``prefetch``,
    ``device`` and ``device_cache``), ``num_workers`` without the pipeline,
    and ``state_dict()`` / ``load_state_dict()``, which resume an epoch
    batch for batch, negatives included.

    Args:
        data: the graph, a :class:`~torch_geometric.data.Data` or
            :class:`~torch_geometric.data.HeteroData` object.
        num_neighbors: neighbours to sample per node, one entry per hop (a
            dict of them per edge type on a heterogeneous graph).
        *args: the other arguments of
            :class:`~torch_geometric.loader.LinkNeighborLoader`, by position.
        hot_ratio: fraction of the vertices to make hot, in ``[0, 1]`` (of
            each node type's on a heterogeneous graph, or a dict of fractions
            per node type), or ``"auto"``.
        hot_method: ``"presample"`` (frontier counts over sampled epochs of
            the seed edges) or ``"degree"``.
        hot: a precomputed hot set to use instead of choosing one.
        presample_epochs: epochs sampled by ``presample``.
        cache: ``"static"``, ``"resample"`` or ``"embedding"``, as in
            :class:`~pyg_orch.OrchNeighborLoader`.
        super_batch: batches served by one re-sampled or embedded buffer.
        staleness: most training steps between the making of hot values and
            their use (``None``: ``2 * super_batch - 1``).
        hot_fanout: neighbours sampled per hot vertex in ``resample`` and
            ``embedding`` modes (``None``: the largest of ``num_neighbors``).
        prefetch: batches prepared ahead by a background thread (0: none).
        device: the device batches are delivered to (``None``: the CPU).
        device_cache: bytes of ``device`` memory for the device caches, or
            ``"auto"``.
        check_finite: also check once that ``data.x`` holds no NaN or inf.
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
        cache: str | None = None,
        super_batch: int = 8,
        staleness: int | None = None,
        hot_fanout: int | None = None,
        prefetch: int = 0,
        device: torch.device | str | None = None,
        device_cache: int | str = 0,
        check_finite: bool = False,
        feature_dtype: torch.dtype | None = None,
        **kwargs: Any,
    ):
        options = HotOptions(
            hot_ratio, hot_method, hot, presample_epochs, cache, super_batch,
            staleness, hot_fanout,
        )  # fmt: skip
        bound = _PARAMETERS.bind(self, data, num_neighbors, *args, **kwargs)
        arguments = {**bound.arguments, **bound.arguments.get("kwargs", {})}
        _check_edge_label_index(data, arguments.get("edge_label_index"))
        data = self._prepare(
            data, num_neighbors, options, prefetch=prefetch, device=device,
            device_cache=device_cache, check_finite=check_finite,
            feature_dtype=feature_dtype, kwargs=kwargs, arguments=arguments,
            no_hops=True,  # seed edges alone, as in PyG
        )  # fmt: skip
        super().__init__(data, num_neighbors, *args, **kwargs)
        self._start(
            data, self.link_sampler, num_neighbors, options, prefetch, device_cache,
            input_nodes=self.input_data, neg_sampling=self.neg_sampling,
        )  # fmt: skip

    def _sample(self, index: Tensor | list[int]) -> Any:
        return self.link_sampler.sample_from_edges(
            self.input_data[index], neg_sampling=self.neg_sampling
        )

    @property
    def num_inputs(self) -> int:
        """The number of seed edges an epoch visits."""
        return self.input_data.row.numel()

    def seed_identity(self) -> dict[str, Any]:
        """The seed edges' number and fingerprint, and the negatives drawn.

        Example:
            >>> from pyg_orch.datasets import load_cora
            >>> loader = OrchLinkNeighborLoader(load_cora(), [5])
            >>> loader.seed_identity()["num_inputs"]
            10556
        """
        inputs, negatives = self.input_data, self.neg_sampling
        seeds = [inputs.row, inputs.col]
        seeds += [
            tensor for tensor in (inputs.label, inputs.time) if tensor is not None
        ]
        return {
            "num_inputs": self.num_inputs,
            "input_edges": fingerprint(*seeds),
            "neg_sampling": None
            if negatives is None
            else [str(negatives.mode.value), float(negatives.amount)],
        }


def _check_edge_label_index(data: Any, edge_label_index: Any) -> None:
    # PyG asserts this without a message: a heterogeneous graph's seed edges
    # must name their edge type.
    if isinstance(data, HeteroData) and edge_label_index is None:
        raise ValueError(
            f"edge_label_index must name the edge type of the seed edges on a "
            f"HeteroData graph: an edge type such as {data.edge_types[0]!r} "
            f"(all its edges), or (edge_type, edge_index) for some of them"
        )
