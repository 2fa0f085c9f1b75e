"""Random train/validation/test node splits.

:func:`random_split_masks` draws the seeded disjoint masks that the npz reader
and the synthetic generators attach to their graphs, from fractions checked
by a private helper that also keeps rounding from leaving nodes out.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import torch
from torch import Tensor


def _split_sizes(num_nodes: int, split: Sequence[float]) -> tuple[int, int, int]:
    if len(split) != 3 or any(f < 0 for f in split) or sum(split) > 1 + 1e-9:
        raise ValueError(
            f"split must be three non-negative fractions summing to <= 1, "
            f"got {tuple(split)}"
        )
    num_train = int(split[0] * num_nodes)
    num_val = int(split[1] * num_nodes)
    if math.isclose(sum(split), 1.0):
        # Rounding must not leave nodes out of a split meant to cover them all.
        return num_train, num_val, num_nodes - num_train - num_val
    return num_train, num_val, int(split[2] * num_nodes)


def random_split_masks(
    num_nodes: int, split: Sequence[float] = (0.6, 0.2, 0.2), seed: int = 0
) -> tuple[Tensor, Tensor, Tensor]:
    """Draws disjoint random train/val/test node masks.

    Args:
        num_nodes: Number of nodes.
        split: Train, validation and test fractions; when they sum to 1 every
            node lands in exactly one mask.
        seed: Seed of the permutation; equal seeds give equal masks.

    Returns:
        Boolean ``train_mask``, ``val_mask`` and ``test_mask`` of length
        ``num_nodes``.

    Raises:
        ValueError: If ``split`` is not three non-negative fractions with a sum
            of at most 1.

    Example:
        >>> train, val, test = random_split_masks(10, (0.6, 0.2, 0.2), seed=0)
        >>> int(train.sum()), int(val.sum()), int(test.sum())
        (6, 2, 2)
    """
    num_train, num_val, num_test = _split_sizes(num_nodes, split)
    perm = torch.from_numpy(np.random.default_rng(seed).permutation(num_nodes))
    bounds = np.cumsum([0, num_train, num_val, num_test])
    masks = []
    for lo, hi in zip(bounds[:-1], bounds[1:], strict=True):
        mask = torch.zeros(num_nodes, dtype=torch.bool)
        mask[perm[lo:hi]] = True
        masks.append(mask)
    return masks[0], masks[1], masks[2]
