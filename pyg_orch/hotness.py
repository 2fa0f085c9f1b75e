"""Choosing the hot vertices: the ones most often in a mini-batch's frontier."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor
from torch_geometric.sampler import NodeSamplerInput
from tqdm.auto import tqdm

from pyg_orch.sampling import OrchNeighborSampler

HOT_METHODS = ("presample", "degree")

# Below this many batches a progress bar is noise.
_PROGRESS_MIN_BATCHES = 50


def check_hot_ratio(hot_ratio: float, name: str = "hot_ratio") -> None:
    """Raises a :class:`ValueError` naming ``name`` unless ``hot_ratio`` is in [0, 1].

    Example:
        >>> check_hot_ratio(0.2)
    """
    if isinstance(hot_ratio, bool) or not 0.0 <= hot_ratio <= 1.0:
        raise ValueError(
            f"{name} must be a fraction of the vertices in [0, 1], got "
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


def frontier_size(num_sampled_nodes: list[int]) -> int:
    """Nodes of hops ``0..L-1``: those whose bottom-layer output a batch needs.

    Example:
        >>> frontier_size([4, 10, 30])
        14
    """
    return sum(num_sampled_nodes[:-1])


def presample_counts(
    sampler: OrchNeighborSampler,
    input_nodes: Tensor,
    batch_size: int,
    epochs: int = 1,
    seed: int = 0,
    progress: bool = True,
) -> Tensor:
    """Counts how often each vertex lands in a mini-batch's frontier.

    Runs ``sampler`` over shuffled batches of ``input_nodes`` for ``epochs``
    epochs, as training would, and counts frontier appearances (hops
    ``0..L-1``). The global random state is left untouched.

    Args:
        sampler: the sampler training will use, with no hot vertices set.
        input_nodes: global ids of the training seeds.
        batch_size: seeds per batch.
        epochs: passes over ``input_nodes``.
        seed: seed of the shuffles and of the sampler's draws.
        progress: show a tqdm bar on large inputs.

    Returns:
        ``int64[num_nodes]`` frontier counts.

    Example:
        >>> from torch_geometric.data import Data
        >>> data = Data(edge_index=torch.tensor([[1, 2], [0, 0]]), num_nodes=3)
        >>> sampler = OrchNeighborSampler(data, num_neighbors=[2, 2])
        >>> presample_counts(sampler, torch.tensor([0]), batch_size=1).tolist()
        [1, 1, 1]
    """
    num_nodes = sampler.colptr.numel() - 1
    counts = torch.zeros(num_nodes, dtype=torch.long)
    num_batches = epochs * -(-input_nodes.numel() // batch_size)
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
            for seeds in input_nodes[torch.randperm(input_nodes.numel())].split(
                batch_size
            ):
                out = sampler.sample_from_nodes(
                    NodeSamplerInput(input_id=None, node=seeds)
                )
                frontier = out.node[: frontier_size(out.num_sampled_nodes)]
                counts += torch.bincount(frontier, minlength=num_nodes)
                bar.update()
    bar.close()
    return counts


def in_degree(colptr: Tensor) -> Tensor:
    """In-degree of every vertex from CSC column pointers.

    Example:
        >>> in_degree(torch.tensor([0, 2, 2, 3])).tolist()
        [2, 0, 1]
    """
    return colptr[1:] - colptr[:-1]


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
    hot_ratio: float,
    method: str = "presample",
    batch_size: int = 1,
    epochs: int = 1,
    seed: int = 0,
    progress: bool = True,
) -> HotSet:
    """Chooses the top ``hot_ratio`` fraction of vertices as the hot set.

    Args:
        sampler: the training sampler (``presample`` runs it).
        input_nodes: global ids of the training seeds.
        hot_ratio: fraction of all vertices to make hot, in ``[0, 1]``.
        method: ``"presample"`` (frontier counts over ``epochs`` sampled
            epochs, as NeutronOrch does) or ``"degree"`` (in-degree, cheaper).
        batch_size: seeds per batch for ``presample``.
        epochs: sampled epochs for ``presample``.
        seed: seed for ``presample``.
        progress: show a tqdm bar for ``presample`` on large inputs.

    Returns:
        The :class:`HotSet`.

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
            sampler, input_nodes, batch_size, epochs, seed, progress
        )
    else:
        counts = in_degree(sampler.colptr)
    return HotSet(top_fraction(counts, hot_ratio), counts, method)
