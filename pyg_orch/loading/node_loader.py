"""``OrchNeighborLoader``: PyG's ``NeighborLoader`` with a hot/cold split.

A thin shell, as PyG's ``NeighborLoader`` is over ``NodeLoader`` and
``NeighborSampler``: it samples seed nodes with
:class:`~pyg_orch.OrchNeighborSampler`; everything else it shares with the
link loader (:class:`~pyg_orch.loading.orch_loader.OrchLoader`): the hot
vertices (:class:`~pyg_orch.hot.vertices.HotVertices`), the device caches
(:mod:`pyg_orch.loading.feature_cache`), the pipeline's batches
(:class:`~pyg_orch.loading.producer.BatchProducer`), the epochs and the
position a checkpoint saves (:class:`~pyg_orch.loading.epoch.Epochs`).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor
from torch_geometric.loader import NeighborLoader

from pyg_orch.hot.choice import HotRatio, HotSet
from pyg_orch.hot.options import HotOptions
from pyg_orch.loading.checkpoint import fingerprint
from pyg_orch.loading.orch_loader import OrchLoader


class OrchNeighborLoader(OrchLoader, NeighborLoader):
    r"""A drop-in :class:`~torch_geometric.loader.NeighborLoader` with hot vertices.

    It takes every argument of :class:`~torch_geometric.loader.NeighborLoader`,
    samples with :class:`~pyg_orch.OrchNeighborSampler` (no ``pyg-lib`` or
    ``torch-sparse`` needed) and yields the same
    :class:`~torch_geometric.data.Data` mini-batches. With ``hot_ratio=0`` (the
    default) the batches are exactly those of a ``NeighborLoader``.

    With ``hot_ratio > 0`` it chooses the hot vertices once (the frontier
    nodes most often sampled, or of highest degree), caches their bottom-layer
    input in a :class:`~pyg_orch.HotCache`, and stops expanding them in the
    last hop. Each batch then also holds ``hot_index`` (local positions of the
    hot frontier nodes) and ``hot_agg`` (their cached values), which
    :class:`~pyg_orch.OrchModel` feeds into the bottom layer. The values depend
    on ``cache``:

    - ``"static"``: the full-neighbourhood aggregation, computed once; exact.
    - ``"resample"``: the aggregation over ``hot_fanout`` sampled neighbours,
      re-sampled for every ``super_batch`` batches by a background thread.
    - ``"embedding"``: the bottom layer's output, computed on the CPU from a
      snapshot of its weights, for convs whose messages depend on weights
      (``OrchModel`` picks this mode for them).

    Re-sampled aggregates and snapshots are never used more than
    ``staleness`` training steps (batches) after they were made.

    With ``prefetch=k`` a background thread samples, gathers and copies the
    next ``k`` batches while the current one trains; with ``device`` set,
    batches arrive on that device (copied on a side CUDA stream from
    page-locked buffers), and ``device_cache`` keeps the static hot
    aggregates and the raw features of the most often gathered vertices
    there. Use the loader as a context
    manager, or call :meth:`close`, to stop its threads early. Building a
    loader makes the process keep freed memory for the next batch
    (:func:`~pyg_orch.allocator.keep_freed_memory`).

    Args:
        data: the graph, a :class:`~torch_geometric.data.Data` or
            :class:`~torch_geometric.data.HeteroData` object. Its features
            ``x`` may be a NumPy array (an :class:`numpy.memmap` too), which
            is read in place.
        num_neighbors: neighbours to sample per node, one entry per hop
            (``-1``: all of them).
        hot_ratio: fraction of all vertices to make hot, in ``[0, 1]``; on a
            heterogeneous graph, of each node type's vertices, or a dict of
            fractions per node type (see :mod:`pyg_orch.hot.relation_cache`).
        hot_method: ``"presample"`` (count frontier appearances over
            ``presample_epochs`` sampled epochs) or ``"degree"`` (in-degree).
        hot: a precomputed hot set (a :class:`~pyg_orch.hot.choice.HotSet`, node
            ids, or a boolean mask) to use instead of choosing one; on a
            heterogeneous graph, ids number the node types back to back, in
            the sampler's order (see
            :func:`~pyg_orch.hot.choice.presample_counts`).
        presample_epochs: epochs sampled by ``presample``.
        cache: ``"static"``, ``"resample"`` or ``"embedding"``; ``None``
            means static unless the model needs embedding mode.
        super_batch: batches served by one re-sampled or embedded buffer.
        staleness: most training steps between the making of hot values and
            their use, at least ``super_batch - 1``; ``None``: ``2 *
            super_batch - 1``, which lets the next buffer be made while the
            current one serves.
        hot_fanout: neighbours sampled per hot vertex in ``resample`` and
            ``embedding`` modes; ``None``: the largest of ``num_neighbors``.
        prefetch: batches prepared ahead by a background thread (0: none).
        device: the device batches are delivered to (``None``: left on the
            CPU, as ``NeighborLoader`` does).
        device_cache: bytes of ``device`` memory for the device caches, or
            ``"auto"``: half of the free GPU memory (nothing on a CPU). The
            static hot aggregates go there first, when they fit, then the raw
            feature rows of the vertices of highest out-degree.
        check_finite: also check once, at construction, that ``data.x``
            holds no NaN or infinite value (one pass over the features).
        feature_dtype: ``torch.bfloat16`` or ``torch.float16`` keeps the
            features and the device caches in half width (half the bytes
            gathered and copied), and the hot aggregates in
            :func:`~pyg_orch.hot.cache.hot_value_dtype` (float32 for float16,
            whose range a hub's sum passes); a float32 ``OrchModel``
            computes in float32 from them. ``data.x`` is converted once (a
            copy, ``data`` is left as it is; on a ``HeteroData`` each node
            type's ``x``): give it already converted to hold the features
            once. ``None``: ``data.x``'s own dtype.
        **kwargs: any other argument of
            :class:`~torch_geometric.loader.NeighborLoader` and of
            :class:`torch.utils.data.DataLoader` (``input_nodes``,
            ``batch_size``, ``shuffle``, ``replace``, ``num_workers``, ...).

    Example:
        >>> from pyg_orch.datasets import load_cora
        >>> data = load_cora()
        >>> from torch_geometric.nn import GraphSAGE
        >>> from pyg_orch import OrchModel
        >>> loader = OrchNeighborLoader(data, num_neighbors=[10, 5],
        ...                             input_nodes=data.train_mask,
        ...                             batch_size=32, hot_ratio=0.2)
        >>> model = OrchModel(GraphSAGE(data.num_features, 16, num_layers=2),
        ...                   loader)  # serves the loader: mean aggregates
        >>> batch = next(iter(loader))
        >>> batch.batch_size, batch.hot_agg.size(1) == data.num_features
        (32, True)
        >>> with OrchNeighborLoader(data, [10, 5], batch_size=32, hot_ratio=0.2,
        ...                         cache="resample", prefetch=2) as loader:
        ...     model = OrchModel(model.model, loader)
        ...     sum(batch.batch_size for batch in loader)
        2708
    """

    def __init__(
        self,
        data: Any,
        num_neighbors: Any,
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
    ) -> None:
        options = HotOptions(
            hot_ratio, hot_method, hot, presample_epochs, cache, super_batch,
            staleness, hot_fanout,
        )  # fmt: skip
        data = self._prepare(
            data, num_neighbors, options, prefetch=prefetch, device=device,
            device_cache=device_cache, check_finite=check_finite,
            feature_dtype=feature_dtype, kwargs=kwargs,
        )  # fmt: skip
        super().__init__(data, num_neighbors, **kwargs)
        self._start(
            data, self.node_sampler, num_neighbors, options, prefetch, device_cache,
            input_nodes=self.input_data.node, input_type=self.input_data.input_type,
        )  # fmt: skip

    def _sample(self, index: Tensor | list[int]) -> Any:
        return self.node_sampler.sample_from_nodes(self.input_data[index])

    @property
    def num_inputs(self) -> int:
        """The number of seed nodes an epoch visits."""
        return self.input_data.node.numel()

    def seed_identity(self) -> dict[str, Any]:
        """The seed nodes' number and fingerprint, for a checkpoint.

        Example:
            >>> from pyg_orch.datasets import load_cora
            >>> OrchNeighborLoader(load_cora(), [5]).seed_identity()["num_inputs"]
            2708
        """
        return {
            "num_inputs": self.num_inputs,
            "input_nodes": fingerprint(self.input_data.node),
        }
