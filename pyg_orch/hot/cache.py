"""The hot vertices' bottom-layer values: :class:`HotCache`.

It holds them on the CPU (and, when they fit, on the device): the static
full-neighbourhood aggregates, re-sampled ones, or the bottom layer's
outputs, computed by the Numba kernels; and the dtype they are kept in
(:func:`hot_value_dtype`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from torch import Tensor

from pyg_orch.aggregation import HALF_WIDTHS, kernel_array, sum_dtype
from pyg_orch.hot.slots import HotSlots
from pyg_orch.kernels import aggregate as kernels
from pyg_orch.kernels.columns import pick_columns

#: The aggregations the cache computes, of raw features or (``weighted_``)
#: of raw features times the graph's ``edge_weight``, as ``GraphConv`` with
#: an ``edge_weight`` aggregates.
AGGREGATIONS = (
    "mean", "sum", "max", "gcn", "weighted_mean", "weighted_sum", "weighted_max",
)  # fmt: skip
_WEIGHTED = "weighted_"
#: How the hot values are made (once and exact, re-sampled per super-batch, or
#: the bottom layer's output from a weight snapshot).
CACHE_MODES = ("static", "resample", "embedding")
# Hot nodes per chunk of embedding computation: bounds the gathered rows.
_EMBED_CHUNK = 8192


class HotCache:
    r"""Full-neighbourhood aggregates of raw features for the hot vertices.

    For a hot vertex :math:`v` the cache holds :math:`a_v`, the parameter-free
    bottom-layer aggregation over *all* in-neighbours of :math:`v` (``mean``,
    ``sum``, ``max``, or ``gcn``: the sum normalised as
    :func:`~torch_geometric.nn.conv.gcn_conv.gcn_norm` would on the whole
    graph, self loop included). The device applies the current weights to
    :math:`a_v`, so nothing in it ever goes stale. Each kind is computed once,
    on first request, by a parallel Numba kernel.

    The cache is owned by :class:`~pyg_orch.OrchNeighborLoader`; the model
    wrapper only asks it which kind to serve.

    Half-width features (``bfloat16``, ``float16``) are summed in float32.
    Their aggregates are kept in ``bfloat16`` for ``bfloat16`` features
    (float32's range), and in float32 for ``float16`` features, whose range
    ends at 65504, which the sum over a hub's neighbours easily passes; and
    in float32 whenever narrowing would turn a finite value infinite (see
    :func:`~pyg_orch.hot.cache.hot_value_dtype`).

    Args:
        colptr: CSC column pointers of the graph, ``int64[num_nodes + 1]``.
        row: CSC row (source) indices.
        x: raw node features, ``float32[num_nodes, F]``.
        hot_nodes: global ids of the hot vertices.
        edge_weight: the graph's ``edge_weight`` ``[E]``, for the
            ``weighted_`` kinds; ``None`` without.
        edge_perm: the CSC permutation of the edges (PyG's ``to_csc``):
            ``row[e]`` is edge ``edge_perm[e]``; ``None``: the identity.
        slots: the hot nodes as a machine holding part of the graph finds
            them (``None``: a dense map over the graph's nodes).
        target_x: on a relation between two node types, the features of
            the destination type (what ``embed`` hands the layer beside the
            sources'); ``None`` for one type, or a type without features.
        same_type: whether ``row`` holds nodes of the hot nodes' own type
            (one node type); ``False`` on a relation between two.

    Example:
        >>> colptr, row = torch.tensor([0, 2, 3, 3]), torch.tensor([1, 2, 0])
        >>> x = torch.tensor([[1.0], [2.0], [4.0]])
        >>> cache = HotCache(colptr, row, x, hot_nodes=torch.tensor([0]))
        >>> cache.values("mean").tolist()
        [[3.0]]
    """

    def __init__(
        self,
        colptr: Tensor,
        row: Tensor,
        x: Tensor,
        hot_nodes: Tensor,
        edge_weight: Tensor | None = None,
        edge_perm: Tensor | None = None,
        *,
        slots: HotSlots | None = None,
        target_x: Tensor | None = None,
        same_type: bool = True,
    ):
        num_nodes = colptr.numel() - 1
        self.colptr, self.row, self.x = colptr, row, x.contiguous()
        self.target_x, self.same_type = target_x, same_type
        self.edge_weight, self.edge_perm = edge_weight, edge_perm
        self.hot_nodes = hot_nodes.to(torch.long)
        # Each node's row among the hot ones (-1: cold), and the hot nodes
        # as the sampler reads them: dense with the graph at hand; searched
        # (slots) on a machine that holds only a part of it.
        self.slot: Tensor | HotSlots
        self.mask: Tensor | None = None
        if slots is None:
            self.slot = torch.full((num_nodes,), -1, dtype=torch.long)
            self.slot[self.hot_nodes] = torch.arange(self.hot_nodes.numel())
            self.mask = self.slot >= 0
        else:
            self.slot = slots
        # The aggregation the consuming model's bottom layer needs, or
        # "embedding"; None until a model serves the loader (loader.serve).
        self.kind: str | None = None
        self.mode = "static"
        # Whether the user chose the mode (else a model may switch it), and
        # for embedding mode, what snapshots the bottom layer (set by the model).
        self.mode_chosen = False
        self.snapshot: Callable[[], Callable[[Tensor, Tensor], Tensor]] | None = None
        # Set by the loader when the static values fit in device memory.
        self.device: torch.device | None = None
        self._values: dict[str, Tensor] = {}
        self._device_values: dict[str, Tensor] = {}
        # False for a cache of values computed elsewhere (see from_values).
        self.has_graph = True

    @classmethod
    def from_values(
        cls, hot_nodes: Tensor, num_nodes: int, values: dict[str, Tensor]
    ) -> HotCache:
        """A static cache of values computed elsewhere, without the graph.

        A partition of a graph holds only its part of the edges, so the hot
        values it serves were computed on the whole graph when it was
        partitioned. Such a cache serves the kinds it was given and refuses
        every other: it has no graph to compute one from.

        Args:
            hot_nodes: global ids of the hot vertices, sorted.
            num_nodes: number of nodes of the whole graph.
            values: the aggregates by kind, each ``[num_hot, F]`` in
                ``hot_nodes`` order.

        Example:
            >>> cache = HotCache.from_values(torch.tensor([2]), 4,
            ...                              {"mean": torch.tensor([[0.5]])})
            >>> hot_index, hot_slot = cache.find(torch.tensor([1, 2]))
            >>> hot_index.tolist(), cache.values("mean")[hot_slot].tolist()
            ([1], [[0.5]])
        """
        if not values:
            raise ValueError("values must hold at least one kind of hot values")
        width = next(iter(values.values()))
        # No graph: column pointers of num_nodes empty columns, one element
        # of memory (an expanded view), only for the cache's size.
        colptr = torch.zeros(1, dtype=torch.long).expand(num_nodes + 1)
        slots = HotSlots(hot_nodes, num_nodes)
        empty = torch.empty(0, dtype=torch.long)
        cache = cls(colptr, empty, width[:0], hot_nodes, slots=slots)
        cache.restore(values)
        cache.has_graph = False
        return cache

    @property
    def num_hot(self) -> int:
        """Number of hot vertices."""
        return self.hot_nodes.numel()

    def value_bytes(self) -> int:
        """Bytes of the values of one kind: what ``device`` would hold."""
        return self.num_hot * hot_row_bytes(self.x)

    def values(self, kind: str | None = None) -> Tensor:
        """The aggregates of every hot vertex, in ``hot_nodes`` order.

        Args:
            kind: one of :data:`~pyg_orch.hot.cache.AGGREGATIONS`; the cache's
                ``kind`` if ``None``.

        Returns:
            ``float32[num_hot, F]``, computed on first request.
        """
        kind = self._kind(kind)
        if kind not in self._values:
            self._values[kind] = self._aggregate(kind)
        return self._values[kind]

    def _kind(self, kind: str | None) -> str:
        # The requested aggregation, or the served one.
        kind = self.kind if kind is None else kind
        if kind is None:
            raise RuntimeError(
                "no model serves this hot cache yet, so the aggregation its "
                "values need is unknown: wrap the model with OrchModel(model, "
                "loader) (or call loader.serve(kind))"
            )
        if kind not in AGGREGATIONS:
            raise ValueError(f"kind must be one of {AGGREGATIONS}, got {kind!r}")
        return kind

    def computed(self) -> dict[str, Tensor]:
        """The values computed so far, by kind (for a checkpoint).

        Example:
            >>> cache = HotCache(torch.tensor([0, 1]), torch.tensor([0]),
            ...                  torch.ones(1, 2), hot_nodes=torch.tensor([0]))
            >>> before = list(cache.computed())
            >>> before, list((cache.values("mean"), cache.computed())[1])
            ([], ['mean'])
        """
        return dict(self._values)

    def restore(self, values: dict[str, Tensor]) -> None:
        """Takes values saved by :meth:`computed` instead of computing them.

        Raises:
            ValueError: a value has the wrong shape or dtype for this cache.
        """
        for kind, value in values.items():
            check_hot_values(value, self.num_hot, self.x, f"saved {kind!r} hot values")
        self._values = dict(values)
        self._device_values = {}

    def drop_values(self) -> None:
        """Forgets the computed values: the graph they came from changed.

        Each kind is computed again on its next request. A cache of values
        computed elsewhere (:meth:`from_values`) keeps them: it has no graph.

        Example:
            >>> x = torch.ones(2, 1)
            >>> cache = HotCache(torch.tensor([0, 1, 1]), torch.tensor([1]), x,
            ...                  hot_nodes=torch.tensor([0]))
            >>> before = cache.values("sum").item()
            >>> _ = x.mul_(5)
            >>> cache.drop_values()
            >>> before, cache.values("sum").item()
            (1.0, 5.0)
        """
        if self.has_graph:
            self._values, self._device_values = {}, {}

    def device_values(self) -> Tensor:
        """The cache's ``kind`` values on its ``device`` (copied on first use)."""
        if self.kind not in self._device_values:
            self._device_values[self.kind] = self.values().to(self.device)
        return self._device_values[self.kind]

    def _aggregate(self, kind: str) -> Tensor:
        if not self.has_graph:
            raise ValueError(
                f"this hot cache holds values computed elsewhere "
                f"({sorted(self._values)}) and has no graph to compute "
                f"{kind!r} values from; serve one of those kinds (a partition's "
                f"hot values: partition the graph again with "
                f"partition_graph(..., hot_kinds=(..., {kind!r})))"
            )
        out = self._sums()
        gcn_norm = (
            kernels.gcn_inverse_sqrt_degree(self.colptr.numpy(), self.row.numpy())
            if kind == "gcn"
            else None
        )
        kernels.aggregate(
            self.colptr.numpy(),
            self.row.numpy(),
            kernel_array(self.x),
            self.hot_nodes.numpy(),
            kind.removeprefix(_WEIGHTED),
            out.numpy(),
            gcn_norm,
            edge_weight=self._edge_weight(kind),
        )
        return narrowed(out, self.x.dtype)

    def _edge_weight(self, kind: str) -> np.ndarray | None:
        # The weights a weighted kind multiplies the rows by.
        if not kind.startswith(_WEIGHTED):
            return None
        if self.edge_weight is None:
            raise ValueError(
                f"the {kind!r} hot values weigh each edge by the graph's "
                f"edge_weight, but this cache's graph has none"
            )
        weight = self.edge_weight.detach()
        return (weight if self.edge_perm is None else weight[self.edge_perm]).numpy()

    def _sums(self) -> Tensor:
        # The kernels' output: float32 for half-width features.
        dtype = sum_dtype(self.x.dtype)
        return torch.empty(self.num_hot, self.x.size(1), dtype=dtype)

    def find(self, frontier: Tensor) -> tuple[Tensor, Tensor]:
        """Local positions of the hot nodes of ``frontier`` and their slots.

        Example:
            >>> cache = HotCache(torch.tensor([0, 0, 0, 0]), torch.tensor([]),
            ...                  torch.zeros(3, 1), hot_nodes=torch.tensor([2]))
            >>> [t.tolist() for t in cache.find(torch.tensor([1, 2]))]
            [[1], [0]]
        """
        slots = self.slot[frontier]
        hot_index = (slots >= 0).nonzero().view(-1)
        return hot_index, slots[hot_index]

    def sample_neighborhood(
        self, nodes: Tensor, fanout: int, seed: int
    ) -> tuple[Tensor, Tensor]:
        """Samples up to ``fanout`` in-neighbours of each of ``nodes``.

        Args:
            nodes: distinct ids of hot-type nodes.
            fanout: neighbours per node (``-1``: all), without replacement.
            seed: the sampler's seed; the same seed gives the same sample.

        Returns:
            ``(n_id, edge_index)``: the ids of the subgraph's source nodes,
            each once (on one node type, ``nodes`` first, so that a source
            that is one of them is its row), and its edges, from a row of
            ``n_id`` to a position in ``nodes``.

        Example:
            >>> colptr, row = torch.tensor([0, 2, 3, 3]), torch.tensor([1, 2, 0])
            >>> cache = HotCache(colptr, row, torch.ones(3, 1),
            ...                  hot_nodes=torch.tensor([0]))
            >>> n_id, edge_index = cache.sample_neighborhood(torch.tensor([1, 0]), -1, 0)
            >>> n_id.tolist(), edge_index.tolist()
            ([1, 0, 2], [[1, 0, 2], [0, 1, 1]])
        """  # noqa: E501 - a doctest's line
        ptr, source = self._picks(nodes, fanout, seed)
        target = torch.repeat_interleave(torch.arange(nodes.numel()), ptr.diff())
        if not self.same_type:
            n_id, local = torch.unique(source, return_inverse=True)
            return n_id, torch.stack([local, target])
        n_id, local = first_then_rest(nodes, source)
        return n_id, torch.stack([local, target])

    def _picks(self, nodes: Tensor, fanout: int, seed: int) -> tuple[Tensor, Tensor]:
        # Each node's sampled in-neighbours: source[ptr[i]:ptr[i + 1]].
        ptr, source = pick_columns(
            self.colptr.numpy(), self.row.numpy(), nodes.numpy(), fanout, seed
        )
        return torch.from_numpy(ptr), torch.from_numpy(source).long()

    def resample(self, fanout: int, seed: int, kind: str | None = None) -> Tensor:
        """The ``kind`` aggregation of every hot vertex over sampled neighbours.

        What ``resample`` mode serves: up to ``fanout`` in-neighbours per hot
        vertex, drawn anew for every ``seed``, aggregated with ``kind``
        (``mean``, ``sum`` or ``max``; the cache's ``kind`` if ``None``), in
        ``hot_nodes`` order.

        Example:
            >>> colptr, row = torch.tensor([0, 2, 3, 3]), torch.tensor([1, 2, 0])
            >>> cache = HotCache(colptr, row, torch.tensor([[1.0], [2.0], [4.0]]),
            ...                  hot_nodes=torch.tensor([0]))
            >>> cache.resample(fanout=-1, seed=0, kind="mean").tolist()
            [[3.0]]
        """
        kind = self._kind(kind)
        check_resampled(kind)
        ptr, source = self._picks(self.hot_nodes, fanout, seed)
        out = self._sums()
        kernels.aggregate(
            ptr.numpy(),
            source.numpy(),
            kernel_array(self.x),
            np.arange(self.num_hot),
            kind,
            out.numpy(),
        )
        return narrowed(out, self.x.dtype)

    def embed(self, layer: Callable[..., Tensor], fanout: int, seed: int) -> Tensor:
        """``layer``'s output for every hot vertex on sampled neighbourhoods.

        What ``embedding`` mode serves: ``layer(x_sub, edge_index)`` on the
        subgraph of each hot vertex and up to ``fanout`` sampled in-neighbours
        (:meth:`sample_neighborhood`), computed without gradients, in chunks
        of hot vertices. On a relation between two node types the layer
        gets the pair ``(x_src, x_dst)``, as a relation's conv does.

        Example:
            >>> colptr, row = torch.tensor([0, 2, 3, 3]), torch.tensor([1, 2, 0])
            >>> cache = HotCache(colptr, row, torch.ones(3, 2),
            ...                  hot_nodes=torch.tensor([0, 1]))
            >>> cache.embed(lambda x, edges: x * 2, fanout=2, seed=0).tolist()
            [[2.0, 2.0], [2.0, 2.0]]
        """
        chunks = []
        with torch.no_grad():
            for index, nodes in enumerate(self.hot_nodes.split(_EMBED_CHUNK)):
                chunk_seed = seed + index * (1 << 40)
                n_id, edge_index = self.sample_neighborhood(nodes, fanout, chunk_seed)
                rows = _layer_input(self.x[n_id])
                if not self.same_type:
                    rows = (rows, self._targets(nodes))
                chunks.append(layer(rows, edge_index)[: nodes.numel()])
        return torch.cat(chunks) if chunks else self.x.new_zeros(0, self.x.size(1))

    def _targets(self, nodes: Tensor) -> Tensor | None:
        # The destinations' rows of a relation between two node types.
        return None if self.target_x is None else _layer_input(self.target_x[nodes])


def _layer_input(rows: Tensor) -> Tensor:
    # Half-width features reach the layer in float32.
    return rows.float() if rows.dtype in HALF_WIDTHS else rows


def first_then_rest(first: Tensor, rest: Tensor) -> tuple[Tensor, Tensor]:
    """The distinct ids of ``first`` then ``rest``, in that order, and ``rest``'s rows.

    ``first`` holds distinct ids; the ids of ``rest`` not among them follow,
    in ascending order.

    Returns:
        ``(ids, rows)``: ``ids[:len(first)] == first``, and
        ``ids[rows] == rest``.

    Example:
        >>> ids, rows = first_then_rest(torch.tensor([5, 2]), torch.tensor([7, 5, 7]))
        >>> ids.tolist(), rows.tolist()
        ([5, 2, 7], [2, 0, 2])
    """  # noqa: E501 - a doctest's line
    unique, inverse = torch.unique(torch.cat([first, rest]), return_inverse=True)
    place = torch.full((unique.numel(),), -1, dtype=torch.long)
    place[inverse[: first.numel()]] = torch.arange(first.numel())
    others = (place < 0).nonzero().view(-1)
    place[others] = torch.arange(first.numel(), unique.numel())
    ids = torch.empty_like(unique)
    ids[place] = unique
    return ids, place[inverse[first.numel() :]]


def check_resampled(kind: str) -> None:
    """Refuses a ``kind`` that ``cache="resample"`` cannot re-sample.

    Raises:
        NotImplementedError: GCN's normalised sum, or a weighted kind.

    Example:
        >>> check_resampled("mean")
    """
    if kind == "gcn" or kind.startswith(_WEIGHTED):
        raise NotImplementedError(
            f"cache='resample' re-samples mean, sum and max aggregations of "
            f"unweighted edges; {kind!r} (GCN's normalised sum, or a bottom "
            f"layer that reads the graph's edge_weight) is exact in "
            f"cache='static' mode: build the loader with cache='static' (or "
            f"leave cache unset)"
        )


def hot_value_dtype(feature_dtype: torch.dtype) -> torch.dtype:
    """The dtype hot aggregates of features of ``feature_dtype`` are kept in.

    The features' own, but float32 for ``float16``: its largest value is
    65504, which the sum over a hub's neighbours easily passes, while
    ``bfloat16`` has float32's range (see :func:`narrowed` for its edge).

    Example:
        >>> hot_value_dtype(torch.float16), hot_value_dtype(torch.bfloat16)
        (torch.float32, torch.bfloat16)
    """
    return torch.float32 if feature_dtype == torch.float16 else feature_dtype


def narrowed(values: Tensor, feature_dtype: torch.dtype) -> Tensor:
    """``values`` (the kernels' sums) in :func:`hot_value_dtype`, if that is safe.

    Narrowing never turns a finite value infinite: where it would (a value
    within half a bfloat16 step of float32's largest), ``values`` stay
    float32, as the float32 reference holds them.

    Example:
        >>> narrowed(torch.tensor([1.0, 3.4e38]), torch.bfloat16).dtype
        torch.float32
        >>> narrowed(torch.tensor([1.0, 3.0e38]), torch.bfloat16).dtype
        torch.bfloat16
    """
    dtype = hot_value_dtype(feature_dtype)
    if values.dtype == dtype:
        return values
    narrow = values.to(dtype)
    if bool((narrow.isinf() & values.isfinite()).any()):
        return values
    return narrow


def check_hot_values(values: Any, num_hot: int, x: Tensor, name: str) -> None:
    """Raises a :class:`ValueError` naming ``name`` unless ``values`` fit a cache.

    Hot values of a cache hold one row per hot vertex, in the features' width
    and the dtype :func:`narrowed` keeps them in; others were made for
    another graph or hot set.

    Args:
        values: the values to check.
        num_hot: the cache's number of hot vertices.
        x: the features the cache aggregates.
        name: what ``values`` are, for the message.

    Example:
        >>> check_hot_values(torch.zeros(2, 3), 2, torch.zeros(5, 3), "values")
        >>> check_hot_values(torch.zeros(2, 3), 4, torch.zeros(5, 3), "values")
        Traceback (most recent call last):
        ...
        ValueError: values must be a tensor of shape (4, 3) and dtype torch.float32 (4 hot vertices, 3 features), got (2, 3) torch.float32; were they saved for another graph or hot set?
    """  # noqa: E501 - a doctest's output is one line
    shape = (num_hot, x.size(1))
    dtypes = {hot_value_dtype(x.dtype), sum_dtype(x.dtype)}
    if isinstance(values, Tensor) and values.shape == shape and values.dtype in dtypes:
        return
    got = (
        f"{tuple(values.shape)} {values.dtype}"
        if isinstance(values, Tensor)
        else type(values).__name__
    )
    raise ValueError(
        f"{name} must be a tensor of shape {shape} and dtype "
        f"{' or '.join(sorted(map(str, dtypes)))} ({num_hot} "
        f"hot vertices, {x.size(1)} features), got {got}; were they saved for "
        f"another graph or hot set?"
    )


def gather(values: Tensor, slots: Tensor) -> Tensor:
    """``values[slots]`` into a new buffer, page-locked when CUDA is present.

    Page-locked memory lets the copy to the GPU run asynchronously.

    Example:
        >>> gather(torch.tensor([[1.0], [2.0]]), torch.tensor([1])).tolist()
        [[2.0]]
    """
    out = torch.empty(
        slots.numel(),
        values.size(1),
        dtype=values.dtype,
        pin_memory=torch.cuda.is_available(),
    )
    kernels.gather_rows(kernel_array(values), slots.numpy(), kernel_array(out))
    return out


def row_bytes(x: Tensor) -> int:
    """Bytes of one feature row of ``x``.

    Example:
        >>> row_bytes(torch.zeros(5, 3))
        12
    """
    return x[0].numel() * x.element_size()


def hot_row_bytes(x: Tensor) -> int:
    """Bytes of one hot vertex's aggregate of features ``x``.

    Example:
        >>> hot_row_bytes(torch.zeros(5, 3, dtype=torch.float16))
        12
    """
    return x[0].numel() * hot_value_dtype(x.dtype).itemsize
