"""The C allocator: freed memory kept for the next batch, not handed back.

torch allocates CPU tensors with ``malloc``. glibc serves a request above its
mmap threshold (128 KiB, rising to at most 32 MiB as such blocks are freed)
with a fresh mapping from the kernel and unmaps it at ``free``. A training
step allocates and frees tensors of tens of megabytes each (a batch's
features, every layer's output and its gradient), so every step has the
kernel fault in and zero every page of them again. On a 2-core VM that was
most of the time outside the products: filling a fresh 59,659 x 256 float32
tensor (a bottom layer's output) took 31 ms, the same fill of reused memory
3 ms, and a product writing into it 87 ms against 53.

:func:`keep_freed_memory` raises glibc's mmap and trim thresholds to
:data:`KEEP_BYTES`: blocks below it come from the heap and stay there when
freed, so the next batch reuses them already mapped. ``OrchModel`` and
pyg_orch's loaders call it when they are built, as PyTorch's own CPU
launcher (``torch.backends.xeon.run_cpu``) swaps in a caching allocator. The
price is memory: the process keeps its peak heap (a step's largest working
set) instead of returning it between batches. Other C libraries than glibc
(macOS, Windows, musl) are left as they are.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import platform
import threading

__all__ = [
    "KEEP_BYTES",
    "allocator_status",
    "keep_freed_memory",
    "keeps_freed_memory",
]

#: Blocks below this size are taken from and freed to the heap (1 GiB).
KEEP_BYTES = 1 << 30

# glibc's mallopt parameters (malloc.h).
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3

_lock = threading.Lock()
_kept = False
_log = logging.getLogger(__name__)


def keep_freed_memory() -> bool:
    """Makes glibc keep freed blocks below :data:`KEEP_BYTES` for reuse.

    Process-wide and once: later calls return at once. Forked workers
    inherit it.

    Returns:
        ``True`` if the process now keeps freed memory; ``False`` with another
        C library than glibc, or where glibc refused the setting.

    Example:
        >>> keep_freed_memory() == (platform.libc_ver()[0] == "glibc")
        True
        >>> keeps_freed_memory() == keep_freed_memory()
        True
    """
    global _kept
    with _lock:
        if _kept or platform.libc_ver()[0] != "glibc":
            return _kept
        libc = ctypes.CDLL(ctypes.util.find_library("c"))
        # The trim threshold first: were only the mmap one set, freed blocks
        # at the heap's top would still be handed back.
        _kept = bool(
            libc.mallopt(_M_TRIM_THRESHOLD, KEEP_BYTES)
            and libc.mallopt(_M_MMAP_THRESHOLD, KEEP_BYTES)
        )
        if _kept:
            _log.info(
                "pyg_orch: glibc keeps freed blocks below %d MiB for reuse",
                KEEP_BYTES >> 20,
            )
        return _kept


def keeps_freed_memory() -> bool:
    """Whether :func:`keep_freed_memory` took effect in this process.

    Example:
        >>> isinstance(keeps_freed_memory(), bool)
        True
    """
    return _kept


def allocator_status() -> str:
    """What the process's allocator does with freed blocks, for benchmark output.

    Example:
        >>> allocator_status().startswith(("glibc keeps", "the C library"))
        True
    """
    if _kept:
        return (
            f"glibc keeps freed blocks below {KEEP_BYTES >> 20} MiB for reuse "
            f"(pyg_orch.allocator)"
        )
    return "the C library's default (freed large blocks go back to the OS)"
