"""The hot cache of a heterogeneous graph: one aggregate per hot node and relation.

A heterogeneous model's bottom layer (``to_hetero`` or ``HeteroConv``) runs
one conv per relation ``(source, relation, destination)`` and then combines
their outputs per destination node. So a hot node of type ``t`` needs one
full-neighbourhood aggregate of raw source features per relation into ``t``,
each fed to that relation's conv with its current weights: exact, as the
homogeneous static cache is. :class:`RelationCache` holds one
:class:`~pyg_orch.HotCache` per such relation and the per-type hot sets they
share. In the ``resample`` and ``embedding`` modes the refresher re-makes
every relation's values at once (:meth:`RelationCache.resample`,
:meth:`RelationCache.embed`), each relation from its own seed.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor
from torch_geometric.data import HeteroData

from pyg_orch.hot.cache import HotCache, gather
from pyg_orch.hot.choice import served_rows
from pyg_orch.sampling import derived_seed

EdgeType = tuple[str, str, str]


def relation_key(edge_type: EdgeType) -> str:
    """The name of a relation's module, as ``to_hetero`` names it.

    Example:
        >>> relation_key(("author", "writes", "paper"))
        'author__writes__paper'
    """
    return "__".join(edge_type)


class RelationCache:
    """Full-neighbourhood aggregates per hot node and incoming relation.

    Hot nodes are numbered as the sampler's kernel numbers the nodes of all
    types: node ``i`` of type ``node_types[k]`` is ``offsets[k] + i``.

    Args:
        node_types: the graph's node types, in the sampler's order.
        offsets: ``int64[len(node_types) + 1]``, where each type's ids start.
        relations: ``{edge_type: (colptr, row)}``, the CSC graph of each
            relation the sampler expands.
        features: raw features per node type (types without any are absent).
        hot_nodes: ids of the hot nodes, in the numbering above.
        edge_weights: ``{edge_type: (edge_weight, perm)}``, each relation's
            ``edge_weight`` in the order of its edges and the CSC
            permutation of its ``row`` (``None``: the identity), for the
            ``weighted_`` kinds (GraphConv given an ``edge_weight``).

    Attributes:
        caches: one :class:`~pyg_orch.HotCache` per relation into a node type
            with hot nodes.
        kind: the aggregation each relation's bottom conv needs, by edge type
            (``None`` until a model serves the loader).

    Raises:
        ValueError: hot nodes of a type that a relation without source
            features points to.

    Example:
        >>> colptr, row = torch.tensor([0, 2, 2]), torch.tensor([0, 1])
        >>> cache = RelationCache(
        ...     ["a", "b"], torch.tensor([0, 2, 4]),
        ...     {("a", "to", "b"): (colptr, row)},
        ...     {"a": torch.tensor([[1.0], [3.0]]), "b": torch.zeros(2, 1)},
        ...     hot_nodes=torch.tensor([2]))
        >>> cache.serve({("a", "to", "b"): "mean"})
        >>> cache.caches[("a", "to", "b")].values().tolist()
        [[2.0]]

        What the re-made modes serve, the sum over all sources re-sampled,
        and a conv's output on them:

        >>> cache.mode = "resample"
        >>> cache.serve({("a", "to", "b"): "sum"})
        >>> cache.resample(fanout=-1, seed=0)[("a", "to", "b")].tolist()
        [[4.0]]
        >>> from torch_geometric.nn import SAGEConv
        >>> conv = SAGEConv((1, 1), 1, aggr="sum", bias=False, root_weight=False)
        >>> _ = conv.lin_l.weight.data.fill_(2.0)
        >>> layers = torch.nn.ModuleDict({"a__to__b": conv})
        >>> cache.embed(layers, fanout=-1, seed=0)[("a", "to", "b")].tolist()
        [[8.0]]
    """

    def __init__(
        self,
        node_types: list[str],
        offsets: Tensor,
        relations: dict[EdgeType, tuple[Tensor, Tensor]],
        features: dict[str, Tensor],
        hot_nodes: Tensor,
        edge_weights: dict[EdgeType, tuple[Tensor, Tensor | None]] | None = None,
    ) -> None:
        self.node_types, self.offsets = node_types, offsets
        self.hot_nodes = hot_nodes.to(torch.long)
        hot = self.hot_nodes.sort().values
        self.hot_by_type = {
            node_type: hot[(hot >= offsets[k]) & (hot < offsets[k + 1])] - offsets[k]
            for k, node_type in enumerate(node_types)
        }
        self.caches: dict[EdgeType, HotCache] = {}
        for edge_type, (colptr, row) in relations.items():
            hot = self.hot_by_type[edge_type[2]]
            if hot.numel() == 0:
                continue
            if edge_type[0] not in features:
                raise ValueError(
                    f"hot nodes of type {edge_type[2]!r} need the raw features "
                    f"of every type pointing to them, but {edge_type[0]!r} (of "
                    f"relation {edge_type}) has no x: give it one, or set its "
                    f"destination's hot ratio to 0 (hot_ratio={{"
                    f"{edge_type[2]!r}: 0.0, ...}})"
                )
            weight, perm = (edge_weights or {}).get(edge_type, (None, None))
            same_type = edge_type[0] == edge_type[2]
            self.caches[edge_type] = HotCache(
                colptr, row, features[edge_type[0]], hot, weight, perm,
                target_x=None if same_type else features.get(edge_type[2]),
                same_type=same_type,
            )  # fmt: skip
        # Every relation into a type shares its hot nodes, hence its slots.
        self.slots = {dst: cache.slot for (_, _, dst), cache in self.caches.items()}
        # Each relation's aggregation, or "embedding"; None until served.
        self.kind: dict[EdgeType, str] | str | None = None
        self._mask: Tensor | None = None
        # How the values are made (set by HotVertices), whether the user
        # chose it, and in embedding mode what snapshots the relations'
        # bottom convs (set by the model).
        self.mode, self.mode_chosen, self.snapshot = "static", False, None
        self._device: torch.device | None = None

    @classmethod
    def from_values(
        cls,
        num_nodes: dict[str, int],
        hot_nodes: dict[str, Tensor],
        values: dict[EdgeType, dict[str, Tensor]],
    ) -> RelationCache:
        """A static cache of values computed elsewhere, without the graph.

        A partition of a heterogeneous graph holds only its part of the
        edges, so its hot values were computed on the whole graph when it was
        partitioned (see :meth:`~pyg_orch.HotCache.from_values`).

        Args:
            num_nodes: number of nodes of each type of the whole graph.
            hot_nodes: ids of the hot nodes by type, within their type.
            values: by relation, its aggregates by kind, in the order of its
                destination type's ``hot_nodes``.

        Example:
            >>> cache = RelationCache.from_values(
            ...     {"a": 2, "b": 3}, {"b": torch.tensor([1])},
            ...     {("a", "to", "b"): {"mean": torch.tensor([[2.0]])}})
            >>> cache.serve({("a", "to", "b"): "mean"})
            >>> cache.caches[("a", "to", "b")].values().tolist(), cache.num_hot
            ([[2.0]], 1)
        """
        node_types = list(num_nodes)
        counts = torch.tensor([num_nodes[t] for t in node_types])
        offsets = torch.cat([counts.new_zeros(1), counts.cumsum(0)])
        empty = torch.empty(0, dtype=torch.long)
        hot = torch.cat([
            hot_nodes.get(t, empty) + offsets[k] for k, t in enumerate(node_types)
        ])  # fmt: skip
        cache = cls(node_types, offsets, {}, {}, hot)
        for edge_type, by_kind in values.items():
            dst = edge_type[2]
            cache.caches[edge_type] = HotCache.from_values(
                hot_nodes[dst], num_nodes[dst], by_kind
            )
        cache.slots = {dst: c.slot for (_, _, dst), c in cache.caches.items()}
        return cache

    @property
    def mask(self) -> Tensor:
        """``bool[offsets[-1]]``: the hot nodes, as the sampler reads them.

        Made on first use: a machine of a partitioned graph, which holds
        only its part, never reads it.
        """
        if self._mask is None:
            self._mask = torch.zeros(int(self.offsets[-1]), dtype=torch.bool)
            self._mask[self.hot_nodes] = True
        return self._mask

    @property
    def device(self) -> torch.device | None:
        """Where the static values are also kept (``None``: the CPU only).

        Set when they fit the loader's ``device_cache``; batches then carry
        each relation's ``hot_slot``, its rows there.
        """
        return self._device

    @device.setter
    def device(self, device: torch.device | None) -> None:
        self._device = device
        for cache in self.caches.values():
            cache.device = device

    def value_bytes(self) -> int:
        """Bytes of the values of every relation: what ``device`` would hold.

        Example:
            >>> colptr, row = torch.tensor([0, 2, 2]), torch.tensor([0, 1])
            >>> cache = RelationCache(
            ...     ["a", "b"], torch.tensor([0, 2, 4]),
            ...     {("a", "to", "b"): (colptr, row)},
            ...     {"a": torch.ones(2, 3), "b": torch.zeros(2, 1)},
            ...     hot_nodes=torch.tensor([2]))
            >>> cache.value_bytes()  # one hot row of 3 float32 sums
            12
        """
        return sum(cache.value_bytes() for cache in self.caches.values())

    @property
    def num_hot(self) -> int:
        """Number of hot nodes, of all types."""
        return self.hot_nodes.numel()

    @property
    def relations(self) -> list[EdgeType]:
        """The relations into a node type with hot nodes, each with a cache."""
        return list(self.caches)

    def serve(self, kinds: dict[EdgeType, str]) -> None:
        """Sets each relation's aggregation and computes its values now.

        Args:
            kinds: ``"mean"``, ``"sum"`` or ``"max"`` per relation of
                :attr:`relations`, or ``"weighted_<kind>"`` of the rows
                times the relation's ``edge_weight``.

        Raises:
            ValueError: a relation without a kind, or an unknown kind.
        """
        missing = [edge_type for edge_type in self.caches if edge_type not in kinds]
        if missing:
            raise ValueError(
                f"the hot cache needs the aggregation of every relation into a "
                f"type with hot nodes; none given for {missing}"
            )
        for edge_type, cache in self.caches.items():
            kind = kinds[edge_type]
            if kind.removeprefix("weighted_") not in ("mean", "sum", "max"):
                raise ValueError(
                    f"relation {edge_type}: kind must be 'mean', 'sum' or 'max', "
                    f"or one of them weighted ('weighted_sum'), got {kind!r}"
                )
            cache.kind = kind
            if self.mode == "static":
                cache.values()
                if self.device is not None:
                    cache.device_values()
        self.kind = {edge_type: kinds[edge_type] for edge_type in self.caches}
        self.snapshot = None

    def resample(
        self, fanout: int, seed: int, kind: dict[EdgeType, str] | None = None
    ) -> dict[EdgeType, Tensor]:
        """Each relation's aggregation of every hot node over sampled neighbours.

        What ``resample`` mode serves (see :meth:`~pyg_orch.HotCache.resample`),
        each relation drawing from its own seed.

        Args:
            fanout: sources sampled per hot node and relation (``-1``: all).
            seed: the seed of this buffer.
            kind: each relation's aggregation (the served ones if ``None``).

        The class's example re-samples a cache.
        """
        kinds = self.kind if kind is None else kind
        return {
            edge_type: cache.resample(fanout, derived_seed(seed, k), kinds[edge_type])
            for k, (edge_type, cache) in enumerate(self.caches.items())
        }

    def embed(
        self, layers: torch.nn.ModuleDict, fanout: int, seed: int
    ) -> dict[EdgeType, Tensor]:
        """Each relation's bottom conv output for its hot nodes, on sampled sources.

        What ``embedding`` mode serves (see :meth:`~pyg_orch.HotCache.embed`):
        ``layers[relation_key(edge_type)]`` run on up to ``fanout`` sampled
        sources of each hot node, each relation drawing from its own seed.
        Relations without a layer (the model has no conv for them) get none.
        The class's example embeds with a ``SAGEConv``.
        """
        return {
            edge_type: cache.embed(
                layers[relation_key(edge_type)], fanout, derived_seed(seed, k)
            )
            for k, (edge_type, cache) in enumerate(self.caches.items())
            if relation_key(edge_type) in layers
        }

    def annotate(self, batch: HeteroData) -> None:
        """Adds the hot part to a batch: hot rows per type, their values per relation.

        ``batch[t].hot_index`` holds the local positions of the hot frontier
        nodes of type ``t``; ``batch[relation].hot_agg`` their aggregates over
        that relation, in the same order, or with the values on the
        :attr:`device` ``batch[relation].hot_slot``, their rows there (see
        :meth:`to_device`).
        """
        for node_type, slot in self.slots.items():
            if node_type not in batch.node_types:
                continue
            store = batch[node_type]
            start, end = served_rows(store.num_sampled_nodes, self.mode)
            slots = slot[store.n_id[start:end]]
            hot_index = (slots >= 0).nonzero().view(-1)
            store.hot_index = hot_index + start
            hot_slots = slots[hot_index]
            for edge_type, cache in self.caches.items():
                if edge_type[2] != node_type:
                    continue
                if self.mode == "static" and self.device is None:
                    batch[edge_type].hot_agg = gather(cache.values(), hot_slots)
                else:
                    batch[edge_type].hot_slot = hot_slots

    def to_device(self, batch: HeteroData) -> None:
        """Puts each relation's ``hot_agg`` in a batch moved to :attr:`device`.

        Its rows of the values kept there, by the ``hot_slot`` that
        :meth:`annotate` left in place of it.
        """
        for edge_type, store in zip(batch.edge_types, batch.edge_stores, strict=True):
            if "hot_slot" in store:
                values = self.caches[edge_type].device_values()
                store.hot_agg = values[store.hot_slot]
                del store.hot_slot

    def drop_values(self) -> None:
        """Forgets every relation's values.

        See :meth:`~pyg_orch.HotCache.drop_values`.
        """
        for cache in self.caches.values():
            cache.drop_values()

    def computed(self) -> dict[str, Any]:
        """Nothing: static values are exact and recomputed from the graph."""
        return {}

    def restore(self, values: dict[str, Any]) -> None:
        """Takes saved values: none, as :meth:`computed` saves none."""
        if values:
            raise ValueError(
                "a heterogeneous hot cache saves no values (they are "
                "recomputed from the graph), but cache_values is not empty"
            )


def fill_relations(batch: HeteroData, values: dict[EdgeType, Tensor]) -> None:
    """Puts each relation's rows of a re-made buffer in an annotated batch.

    ``batch[relation].hot_agg`` from ``values[relation]`` at the ``hot_slot``
    that :meth:`RelationCache.annotate` left; a relation without values (no
    conv of the model reads it) gets none.

    Example:
        >>> batch = HeteroData()
        >>> batch["a", "to", "b"].hot_slot = torch.tensor([1])
        >>> fill_relations(batch, {("a", "to", "b"): torch.tensor([[1.0], [2.0]])})
        >>> batch["a", "to", "b"].hot_agg.tolist()
        [[2.0]]
    """
    for edge_type, store in zip(batch.edge_types, batch.edge_stores, strict=True):
        if "hot_slot" in store:
            if edge_type in values:
                store.hot_agg = gather(values[edge_type], store.hot_slot)
            del store.hot_slot
