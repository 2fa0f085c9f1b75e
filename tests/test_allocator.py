"""The allocator keeps a step's freed memory for the next one."""

from __future__ import annotations

import json
import platform
import subprocess
import sys

import pytest

# In a fresh interpreter: minor page faults of each of 32 fills of a new
# 64 MiB tensor, before and after keep_freed_memory(). Kept memory takes some
# rounds to settle: torch asks for aligned blocks, a little larger than the
# block just freed, and small objects allocated beside it keep it from
# coalescing, so the heap grows a few times before a free block fits (9 rounds
# on one VM, more where other allocations interleave).
_FAULTS = """
import json, resource, torch
from pyg_orch import allocator

def faults():
    counts = []
    for _ in range(32):
        before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        torch.empty(16 << 20).fill_(1.0)
        counts.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
    return counts

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
    # in (fewer with huge pages), reused memory none. Once settled (the last
    # 8 fills), nearly every fill reuses; by default none does.
    assert result["kept"] is True
    pages = sorted(result["fresh"][-8:])[4]
    assert pages > 4000
    assert all(count > pages / 10 for count in result["fresh"][-8:])
    reused = sum(count < pages / 10 for count in result["reused"][-8:])
    assert reused >= 6, result["reused"]


@pytest.mark.slow
@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="glibc's mallopt")
def test_building_a_loader_keeps_freed_memory():
    assert _run(_LOADER) == "False True"
