"""The allocator keeps a step's freed memory for the next one."""

from __future__ import annotations

import json
import platform
import subprocess
import sys

import pytest

# In a fresh interpreter: minor page faults of filling a new 64 MiB tensor,
# the last 4 of 12 fills, before and after keep_freed_memory(). (The heap
# takes a few rounds to hold a free block that fits torch's aligned request.)
_FAULTS = """
import json, resource, torch
from pyg_orch import allocator

def faults():
    counts = []
    for _ in range(12):
        before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        torch.empty(16 << 20).fill_(1.0)
        counts.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
    return sum(counts[-4:])

fresh = faults()
kept = allocator.keep_freed_memory()
print(json.dumps({"fresh": fresh, "kept": kept, "reused": faults()}))
"""

_LOADER = """
from pyg_orch import OrchNeighborLoader, allocator
from pyg_orch.datasets import load_cora
before = allocator.keeps_freed_memory()
OrchNeighborLoader(load_cora(), [5], batch_size=8)
print(before, allocator.keeps_freed_memory())
"""


def _run(code: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip().splitlines()[-1]


# Each starts an interpreter: slow tests, as the backend's subprocess tests.
@pytest.mark.slow
@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="glibc's mallopt")
def test_a_freed_block_is_reused_without_page_faults():
    result = json.loads(_run(_FAULTS))
    # 64 MiB is 16,384 pages of 4 KiB: each fresh mapping faults most of them
    # in (fewer with huge pages), reused memory none.
    assert result["kept"] is True
    assert result["fresh"] > 4000
    assert result["reused"] < result["fresh"] / 10


@pytest.mark.slow
@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="glibc's mallopt")
def test_building_a_loader_keeps_freed_memory():
    assert _run(_LOADER) == "False True"
