"""Choosing the hot vertices: the ones most often in a mini-batch's frontier."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import torch
from torch import Tensor
from torch_geometric.sampler import EdgeSamplerInput, NegativeSampling, NodeSamplerInput
from tqdm.auto import tqdm

from pyg_orch.sampling import OrchNeighborSampler

#: How hot vertices can be chosen.
HOT_METHODS = ("presample", "degree")
#: The method of a hot set given to the loader, not chosen by it.
GIVEN = "given"

# Below this many batches a progress bar is noise.
_PROGRESS_MIN_BATCHES = 50


#: What ``hot_ratio`` takes: a fraction of the vertices in ``[0, 1]``,
#: ``"auto"`` (chosen by measurement), or on a heterogeneous graph a dict of
#: fractions by node type.
HotRatio = float | Literal["auto"] | dict[str, float]


def check_hot_ratio(
    hot_ratio: float | str, name: str = "hot_ratio", allow_auto: bool = False
) -> None:
    """Raises a :class:`ValueError` naming ``name`` unless ``hot_ratio`` is in [0, 1].

    With ``allow_auto``, ``"auto"`` is accepted too.

    Example:
        >>> check_hot_ratio(0.2)
    """
    if allow_auto and hot_ratio == "auto":
        return
    if isinstance(hot_ratio, bool) or not (
        isinstance(hot_ratio, int | float) and 0.0 <= hot_ratio <= 1.0
    ):
        also = " or 'auto'" if allow_auto else ""
        raise ValueError(
            f"{name} must be a fraction of the vertices in [0, 1]{also}, got "
            f"{hot_ratio!r}; 0 turns the hot/cold split off"
        )


def check_hot_method(hot_method: str, name: str = "hot_method") -> None:
    """Raises a :class:`ValueError` naming ``name`` unless ``hot_method`` is known.

    Example:
        >>> check_hot_method("degree")
    """
    if hot_method not in HOT_METHODS:
        raise ValueError(f"{name} must be one of {HOT_METHODS}, got {hot_method!r}")


@dataclass
class HotSet:
    """The hot vertices of a graph and the scores they were chosen by.

    Attributes:
        nodes: global ids of the hot vertices, sorted by id.
        counts: one score per vertex of the graph (frontier appearances for
            ``presample``, in-degree for ``degree``), kept for inspection.
        method: how the scores were made.

    Example:
        >>> hot = HotSet(torch.tensor([2]), torch.tensor([0, 1, 5]), "degree")
        >>> hot.mask(3).tolist()
        [False, False, True]
    """

    nodes: Tensor
    counts: Tensor
    method: str

    def mask(self, num_nodes: int) -> Tensor:
        """A boolean mask over ``num_nodes`` vertices, ``True`` where hot."""
        mask = torch.zeros(num_nodes, dtype=torch.bool)
        mask[self.nodes] = True
        return mask


def as_hot_set(hot: HotSet | Tensor, num_nodes: int) -> HotSet:
    """The hot set a loader was given: a :class:`HotSet`, node ids or a mask.

    Node ids are deduplicated and sorted; a set not chosen by
    :func:`~pyg_orch.select_hot` has the method ``"given"`` and no scores.

    Args:
        hot: a :class:`HotSet`, node ids, or a boolean mask over the nodes.
        num_nodes: the graph's number of nodes.

    Raises:
        ValueError: a mask of another length, or ids outside the graph.

    Example:
        >>> hot = as_hot_set(torch.tensor([2, 0, 2]), num_nodes=3)
        >>> hot.nodes.tolist(), hot.method
        ([0, 2], 'given')
    """
    if isinstance(hot, HotSet):
        nodes = hot.nodes
    elif hot.dtype == torch.bool:
        if hot.numel() != num_nodes:
            raise ValueError(
                f"hot is a mask of {hot.numel()} entries but the graph has "
                f"{num_nodes} nodes; was it made for another graph?"
            )
        nodes = hot.nonzero().view(-1)
    else:
        nodes = hot.to(torch.long).unique()
    if nodes.numel() and (nodes.min() < 0 or nodes.max() >= num_nodes):
        raise ValueError(
            f"hot holds node ids outside [0, {num_nodes}); was it made for "
            f"another graph?"
        )
    counts = hot.counts if isinstance(hot, HotSet) else torch.zeros(0, dtype=torch.long)
    return HotSet(nodes, counts, hot.method if isinstance(hot, HotSet) else GIVEN)


def frontier_size(num_sampled_nodes: list[int]) -> int:
    """Nodes of hops ``0..L-1``: those whose bottom-layer output a batch needs.

    Example:
        >>> frontier_size([4, 10, 30])
        14
    """
    return sum(num_sampled_nodes[:-1])


def served_rows(num_sampled_nodes: list[int], mode: str) -> tuple[int, int]:
    """The frontier rows whose hot nodes a batch serves from the cache.

    The whole frontier for aggregates (static or re-sampled), which the
    device weighs with the current weights. An embedding is a constant, so
    its row gets no gradient: only the hot nodes of the last frontier hop,
    which the last hop did not expand, take one; the others have their
    sampled neighbours and are computed, with gradients, on the device.

    Returns:
        ``(start, end)``, a range of the batch's rows.

    Example:
        >>> served_rows([4, 10, 30], "static"), served_rows([4, 10, 30], "embedding")
        ((0, 14), (4, 14))
    """  # noqa: E501 - a doctest's line
    end = frontier_size(num_sampled_nodes)
    start = frontier_size(num_sampled_nodes[:-1]) if mode == "embedding" else 0
    return start, end


def presample_counts(
    sampler: OrchNeighborSampler,
    input_nodes: Tensor | EdgeSamplerInput,
    batch_size: int,
    epochs: int = 1,
    seed: int = 0,
    progress: bool = True,
    input_type: str | None = None,
    neg_sampling: NegativeSampling | None = None,
) -> Tensor:
    """Counts how often each vertex lands in a mini-batch's frontier.

    Runs ``sampler`` over shuffled batches of ``input_nodes`` for ``epochs``
    epochs, as training would, and counts frontier appearances (hops
    ``0..L-1``). The global random state is left untouched. On a
    heterogeneous graph the seeds are of ``input_type`` and the counts cover
    the nodes of every type, numbered as the sampler's kernel numbers them
    (each type's ids after those of the types before it). For link
    prediction the seeds are edges (with ``neg_sampling``'s negatives), as a
    :class:`~torch_geometric.loader.LinkNeighborLoader` samples them.

    Args:
        sampler: the sampler training will use, with no hot vertices set.
        input_nodes: global ids of the training seeds, or the seed edges.
        batch_size: seeds per batch.
        epochs: passes over ``input_nodes``.
        seed: seed of the shuffles and of the sampler's draws.
        progress: show a tqdm bar on large inputs.
        input_type: the seeds' node type on a heterogeneous graph.
        neg_sampling: the negatives sampled with seed edges.

    Returns:
        ``int64[num_nodes]`` frontier counts.

    Example:
        >>> from torch_geometric.data import Data
        >>> data = Data(edge_index=torch.tensor([[1, 2], [0, 0]]), num_nodes=3)
        >>> sampler = OrchNeighborSampler(data, num_neighbors=[2, 2])
        >>> presample_counts(sampler, torch.tensor([0]), batch_size=1).tolist()
        [1, 1, 1]
    """
    layout = sampler.layout
    offsets = dict(zip(layout.node_types, layout.graph[6].tolist(), strict=False))
    counts = torch.zeros(layout.num_nodes, dtype=torch.long)
    links = isinstance(input_nodes, EdgeSamplerInput)
    num_seeds = input_nodes.row.numel() if links else input_nodes.numel()
    num_batches = epochs * -(-num_seeds // batch_size)
    bar = tqdm(
        total=num_batches,
        desc="presample",
        unit="batch",
        # None: tqdm shows the bar on a terminal only, not in logs.
        disable=True if not progress or num_batches < _PROGRESS_MIN_BATCHES else None,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        for _ in range(epochs):
            for index in torch.randperm(num_seeds).split(batch_size):
                if links:
                    out = sampler.sample_from_edges(input_nodes[index], neg_sampling)
                else:
                    seeds = NodeSamplerInput(
                        None, input_nodes[index], input_type=input_type
                    )
                    out = sampler.sample_from_nodes(seeds)
                frontier = _frontier(out, offsets)
                counts += torch.bincount(frontier, minlength=counts.numel())
                bar.update()
    bar.close()
    return counts


def _frontier(out: Any, offsets: dict[Any, int]) -> Tensor:
    # The frontier's nodes in the kernel's numbering of all types.
    if not isinstance(out.node, dict):
        return out.node[: frontier_size(out.num_sampled_nodes)]
    return torch.cat(
        [
            nodes[: frontier_size(out.num_sampled_nodes[node_type])]
            + offsets[node_type]
            for node_type, nodes in out.node.items()
        ]
    )


def in_degree(colptr: Tensor) -> Tensor:
    """In-degree of every vertex from CSC column pointers.

    Example:
        >>> in_degree(torch.tensor([0, 2, 2, 3])).tolist()
        [2, 0, 1]
    """
    return colptr[1:] - colptr[:-1]


def node_in_degree(sampler: OrchNeighborSampler) -> Tensor:
    """In-degree of every node, over all relations on a heterogeneous graph.

    Numbered as :func:`~pyg_orch.hot.choice.presample_counts` numbers nodes.

    Example:
        >>> from torch_geometric.data import Data
        >>> data = Data(edge_index=torch.tensor([[1, 2], [0, 0]]), num_nodes=3)
        >>> node_in_degree(OrchNeighborSampler(data, [1])).tolist()
        [2, 0, 0]
    """
    if not sampler.is_hetero:
        return in_degree(sampler.colptr)
    layout = sampler.layout
    offsets = dict(zip(layout.node_types, layout.graph[6].tolist(), strict=False))
    degree = torch.zeros(layout.num_nodes, dtype=torch.long)
    for edge_type in sampler.edge_types:
        part = in_degree(sampler.colptr_dict[sampler.to_rel_type[edge_type]])
        start = offsets[edge_type[2]]
        degree[start : start + part.numel()] += part
    return degree


def out_degree(row: Tensor, num_nodes: int) -> Tensor:
    """Out-degree of every vertex from CSC row (source) indices.

    Example:
        >>> out_degree(torch.tensor([1, 1, 0]), num_nodes=3).tolist()
        [1, 2, 0]
    """
    return torch.bincount(row.to(torch.long), minlength=num_nodes)


def top_fraction(counts: Tensor, ratio: float) -> Tensor:
    """Ids of the ``ratio`` fraction of vertices with the highest positive counts.

    Ties go to the lower id, so the choice is deterministic; vertices with a
    zero count are never chosen, as caching them would save nothing.

    Example:
        >>> top_fraction(torch.tensor([3, 0, 7, 3]), ratio=0.5).tolist()
        [0, 2]
    """
    size = min(int(round(ratio * counts.numel())), int((counts > 0).sum()))
    # A stable descending sort keeps equal counts in id order.
    order = torch.sort(counts, descending=True, stable=True).indices
    return order[:size].sort().values


def select_hot(
    sampler: OrchNeighborSampler,
    input_nodes: Tensor,
    hot_ratio: float | dict[str, float],
    method: str = "presample",
    batch_size: int = 1,
    epochs: int = 1,
    seed: int = 0,
    progress: bool = True,
    input_type: str | None = None,
    ranges: dict[str, tuple[int, int]] | None = None,
    neg_sampling: NegativeSampling | None = None,
) -> HotSet:
    """Chooses the top ``hot_ratio`` fraction of vertices as the hot set.

    Args:
        sampler: the training sampler (``presample`` runs it).
        input_nodes: global ids of the training seeds, or the seed edges.
        hot_ratio: fraction of all vertices to make hot, in ``[0, 1]``; on a
            heterogeneous graph, of each node type's vertices, or a dict of
            such fractions per node type (missing types: 0).
        method: ``"presample"`` (frontier counts over ``epochs`` sampled
            epochs, as NeutronOrch does) or ``"degree"`` (in-degree, cheaper).
        batch_size: seeds per batch for ``presample``.
        epochs: sampled epochs for ``presample``.
        seed: seed for ``presample``.
        progress: show a tqdm bar for ``presample`` on large inputs.
        input_type: the seeds' node type on a heterogeneous graph.
        ranges: on a heterogeneous graph, the node types that may be hot and
            the ``[start, end)`` of their ids (see
            :func:`~pyg_orch.hot.choice.presample_counts`).
        neg_sampling: the negatives sampled with seed edges.

    Returns:
        The :class:`HotSet`, its ids numbered as
        :func:`~pyg_orch.hot.choice.presample_counts` numbers nodes.

    Example:
        >>> from torch_geometric.data import Data
        >>> data = Data(edge_index=torch.tensor([[1, 2, 0], [0, 0, 1]]),
        ...             num_nodes=3)
        >>> sampler = OrchNeighborSampler(data, num_neighbors=[2])
        >>> select_hot(sampler, torch.arange(3), 0.34, "degree").nodes.tolist()
        [0]
    """
    check_hot_method(method)
    if method == "presample":
        counts = presample_counts(
            sampler, input_nodes, batch_size, epochs, seed, progress, input_type,
            neg_sampling,
        )  # fmt: skip
    else:
        counts = node_in_degree(sampler)
    return HotSet(top_by_type(counts, hot_ratio, ranges), counts, method)


def top_by_type(
    counts: Tensor,
    ratio: float | dict[str, float],
    ranges: dict[str, tuple[int, int]] | None,
) -> Tensor:
    """:func:`top_fraction` of all nodes, or of each node type's range.

    Args:
        counts: one score per node.
        ratio: a fraction, or fractions per node type (missing types: 0).
        ranges: ``None`` on a homogeneous graph; else the ``[start, end)``
            ids of each node type that may be hot.

    Example:
        >>> counts = torch.tensor([5, 1, 0, 2, 9, 4])
        >>> top_by_type(counts, {"b": 0.34}, {"a": (0, 3), "b": (3, 6)}).tolist()
        [4]
    """
    if ranges is None:
        check_hot_ratio(ratio)
        return top_fraction(counts, ratio)
    ratios = check_type_ratios(ratio, list(ranges))
    chosen = [
        top_fraction(counts[start:end], ratios[node_type]) + start
        for node_type, (start, end) in ranges.items()
    ]
    return torch.cat(chosen) if chosen else torch.zeros(0, dtype=torch.long)


def check_type_ratios(
    ratio: float | dict[str, float], node_types: list[str], name: str = "hot_ratio"
) -> dict[str, float]:
    """A hot ratio per node type: ``ratio`` for each, or as the dict gives it.

    Raises:
        ValueError: a ratio outside ``[0, 1]``, or a dict naming a node type
            that cannot be hot.

    Example:
        >>> check_type_ratios({"paper": 0.2}, ["paper", "author"])
        {'paper': 0.2, 'author': 0.0}
        >>> check_type_ratios({"papers": 0.2}, ["paper"])
        Traceback (most recent call last):
        ...
        ValueError: hot_ratio names node type 'papers', which cannot be hot: the node types with incoming relations whose sources all have features x are ['paper']
    """  # noqa: E501 - a doctest's output is one line
    if not isinstance(ratio, dict):
        check_hot_ratio(ratio, name=name)
        return dict.fromkeys(node_types, float(ratio))
    for node_type, value in ratio.items():
        if node_type not in node_types:
            raise ValueError(
                f"{name} names node type {node_type!r}, which cannot be hot: "
                f"the node types with incoming relations whose sources all have "
                f"features x are {node_types}"
            )
        check_hot_ratio(value, name=f"{name}[{node_type!r}]")
    return {node_type: float(ratio.get(node_type, 0.0)) for node_type in node_types}
