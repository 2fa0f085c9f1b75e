"""Lifts PyG's test skips for what pyg_orch now provides: pyg-lib, a sampler, METIS.

PyG's own tests skip without pyg-lib, a neighbour sampler or METIS, judged
when their modules load; ``import pyg_orch`` provides all three. The skips
with these reasons (and, where the harness sets ``DIST_TEST=1``, PyG's
``onlyDistributedTest``, whose reason is "Fast test run") are taken off every
collected test; a skip for any other reason (torch-sparse's own ops, CUDA)
stays, and the suite tests name each. Imported by the harnesses of
tests/pyg_loader and tests/pyg_distributed, which run PyG's classes unchanged.
"""

import os

import pytest

# The reasons of PyG's skips that mean "no pyg-lib / sampler / METIS".
LIFTED = (
    "No neighbor sampler installed",
    "Package pyg_lib not found",
    "'pyg-lib' does not support weighted neighbor sampling",
    "METIS not enabled",
)
# PyG's reason for onlyDistributedTest, which also wants pyg-lib installed.
DISTRIBUTED = "Fast test run"


def lifted(mark: pytest.Mark) -> bool:
    """Whether ``mark`` is one of PyG's skips for a missing pyg-lib or METIS."""
    if mark.name != "skipif":
        return False
    reason = mark.kwargs.get("reason")
    return reason in LIFTED or (
        reason == DISTRIBUTED and os.environ.get("DIST_TEST") == "1"
    )


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        item.own_markers = [m for m in item.own_markers if not lifted(m)]
