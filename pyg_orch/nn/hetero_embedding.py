"""Serving a heterogeneous model's hot nodes: aggregates or embeddings.

:func:`serve_relations` tells a loader what each hot relation's bottom conv
needs (its aggregate, static or re-sampled, or in embedding mode its
output); :class:`RelationSnapshots` takes the weight snapshots embedding mode
computes with.
"""

from __future__ import annotations

import warnings
from typing import Any

import torch
from torch.nn.parameter import is_lazy

from pyg_orch.hot.relation_cache import EdgeType, relation_key
from pyg_orch.nn.convs import weight_snapshot, without_hooks
from pyg_orch.nn.hetero_layers import HeteroLayers


class RelationSnapshots:
    """Snapshots of the weights of some relations' bottom convs.

    Calling it returns a ``ModuleDict`` of CPU copies of the convs, by
    :func:`~pyg_orch.hot.relation_cache.relation_key`, holding their current
    weights: the layers :meth:`~pyg_orch.hot.relation_cache.RelationCache.embed`
    runs. Called between optimizer steps, in the training thread.

    Example:
        >>> from torch_geometric.nn import SAGEConv
        >>> conv = SAGEConv((2, 2), 4)
        >>> snapshots = RelationSnapshots({("a", "to", "b"): conv})
        >>> list(snapshots()), snapshots()["a__to__b"] is conv
        (['a__to__b'], False)
    """

    def __init__(self, convs: dict[EdgeType, torch.nn.Module]) -> None:
        self.live = torch.nn.ModuleDict(
            {relation_key(relation): conv for relation, conv in convs.items()}
        )
        # Hook-free copies: the templates each snapshot is copied from.
        self.templates = torch.nn.ModuleDict(
            {key: without_hooks(conv).cpu() for key, conv in self.live.items()}
        )

    def __call__(self) -> torch.nn.ModuleDict:
        return weight_snapshot(self.templates, self.live)


def serve_relations(layers: HeteroLayers, loader: Any) -> int:
    """Serves ``loader``'s hot nodes to the model of ``layers``; returns the version.

    Each hot relation's bottom conv is served its aggregate (static or
    re-sampled, as the loader's ``cache`` says) where one serves it exactly;
    otherwise, or with ``cache="embedding"``, every hot relation is served its
    bottom conv's output from a weight snapshot (embedding mode, switched to
    with a warning unless chosen).

    Raises:
        NotImplementedError: edge values a hot relation's conv reads, in
            embedding mode; or a ``cache`` chosen that cannot serve.
        ValueError: lazy parameters of a hot relation's bottom conv not yet
            initialised, in embedding mode.

    Example:
        >>> from torch_geometric.nn import GraphSAGE, to_hetero
        >>> from pyg_orch import OrchNeighborLoader
        >>> from pyg_orch.datasets import power_law_hetero_graph
        >>> data = power_law_hetero_graph(scale=0.001, num_features=4)
        >>> loader = OrchNeighborLoader(data, [3, 2], input_nodes="paper",
        ...                             batch_size=8, hot_ratio=0.2, cache="resample")
        >>> model = to_hetero(GraphSAGE(4, 8, num_layers=2), data.metadata())
        >>> version = serve_relations(HeteroLayers(model), loader)
        >>> loader.cache.mode, sorted(set(loader.cache.kind.values()))
        ('resample', ['mean'])
    """
    cache = loader.cache
    kinds = layers.hot_kinds(loader.data)
    relations = [r for r in cache.relations if r in kinds]
    unserved = {r: type(layers.bottom[r]).__name__ for r in relations if not kinds[r]}
    if not unserved and not (cache.mode_chosen and cache.mode == "embedding"):
        return loader.serve({r: kinds[r] for r in relations})
    _check_embeddable(layers, loader.data, relations)
    switched = cache.mode != "embedding"
    snapshots = RelationSnapshots({r: layers.bottom[r] for r in relations})
    # Refuses an explicitly chosen cache mode that serves no layer output.
    version = loader.serve("embedding", snapshots)
    if switched:
        warnings.warn(
            f"OrchModel: the bottom convs of relations {unserved} aggregate with "
            f"weights, so hot nodes use cache='embedding': each relation's "
            f"output, computed on the CPU from a weight snapshot at most "
            f"{loader.staleness} training steps old",
            stacklevel=4,
        )
    return version


def _check_embeddable(
    layers: HeteroLayers, data: Any, relations: list[EdgeType]
) -> None:
    # An embedding is computed from the features alone, by initialised
    # weights: no edge value reaches it.
    for relation in relations:
        conv = layers.bottom[relation]
        if any(is_lazy(parameter) for parameter in conv.parameters()):
            raise ValueError(
                f"the bottom conv of relation {relation} has lazy parameters "
                f"not yet initialised, and embedding mode snapshots its "
                f"weights: run the model once first, e.g. with "
                f"torch.no_grad(): model(data.x_dict, data.edge_index_dict)"
            )
        read = layers.read_edge_values(data, relation, conv)
        if read:
            raise NotImplementedError(
                f"embedding mode computes relation {relation}'s hot outputs "
                f"without edge values, but its bottom conv reads "
                f"{sorted(read)}: use hot_ratio=0, or hot_ratio="
                f"{{{relation[2]!r}: 0.0}}"
            )
