"""Numba's threading layer: get TBB where pip put it, run kernels only where safe.

Numba picks its threading layer lazily, at the first parallel kernel call:
TBB if ``libtbb`` loads, else GNU OpenMP, else its own ``workqueue``. Only TBB
is safe for pyg_orch everywhere:

- GNU OpenMP does not survive ``fork()``: a forked ``DataLoader`` worker that
  runs a parallel kernel is killed ("fork() called from a process already
  using GNU OpenMP") or hangs.
- ``workqueue`` aborts when two threads run parallel kernels at once, and
  pyg_orch's pipelines run kernels on their own threads.

The ``tbb`` wheel installs ``libtbb`` into ``<prefix>/lib``, which the dynamic
loader searches in a conda env but not in a ``python -m venv`` or for
``pip install --user``, so there Numba silently falls back to OpenMP.
:func:`load_tbb` loads it by path first (``pyg_orch.kernels`` calls it on
import, before any kernel runs), and :func:`parallel_kernel` keeps each kernel
safe under whatever layer Numba still ends up with (aarch64 has no TBB wheel).

Example:
    >>> import numba
    >>> import numpy as np
    >>> from pyg_orch.kernels.aggregate import gather_rows
    >>> x = np.ones((4, 2), np.float32)
    >>> float(gather_rows(x, np.arange(4), np.empty_like(x)).sum())
    8.0
    >>> numba.threading_layer() in ("tbb", "omp", "workqueue")
    True
"""

from __future__ import annotations

import ctypes
import functools
import importlib.metadata
import os
import site
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numba

__all__ = [
    "kernel_pair",
    "load_tbb",
    "numba_threads",
    "parallel_kernel",
    "parallel_mode",
    "with_threads",
]

#: The file Numba's TBB layer links against, per platform.
_TBB_NAMES = {
    "linux": "libtbb.so.12",
    "darwin": "libtbb.12.dylib",
    "win32": "tbb12.dll",
}

# Set in a child of fork(): there only a fork-safe layer may start threads.
_forked = False
# The layer this process runs (inherited by a forked child), once known.
_layer: str | None = None
# workqueue is not thread-safe: one parallel kernel at a time.
_workqueue_lock = threading.Lock()


def load_tbb() -> str | None:
    """Loads ``libtbb`` by path so that Numba's TBB threading layer finds it.

    Does nothing if the library already loads by name (a conda env, a system
    package, ``LD_LIBRARY_PATH``) or is not installed: then Numba picks its
    layer as usual. Loaded with ``RTLD_GLOBAL``, the library satisfies
    Numba's later ``dlopen("libtbb.so.12")`` and its ``tbbpool`` extension.
    Must run before the first parallel kernel call, when Numba picks its
    layer for good. Never raises.

    Returns:
        The path loaded, or ``None`` when nothing needed or could be loaded.

    Example:
        >>> path = load_tbb()  # None: pyg_orch.kernels did it on import
        >>> path is None
        True
    """
    name = _TBB_NAMES.get(sys.platform)
    if name is None or _loads(name):
        return None
    for path in _tbb_candidates(name):
        if path.is_file() and _loads(str(path), ctypes.RTLD_GLOBAL):
            return str(path)
    return None


def _loads(name: str, mode: int = ctypes.DEFAULT_MODE) -> bool:
    try:
        ctypes.CDLL(name, mode=mode)
    except OSError:
        return False
    return True


def _tbb_candidates(name: str) -> Iterator[Path]:
    """Where ``name`` may lie: the tbb wheel's own file list, then prefixes."""
    try:
        files = importlib.metadata.distribution("tbb").files or []
    except importlib.metadata.PackageNotFoundError:
        files = []
    for file in files:
        if file.name == name:
            yield Path(file.locate()).resolve()
    # Wheels installed without a RECORD, or TBB from another installer.
    folder = "Library/bin" if sys.platform == "win32" else "lib"
    for prefix in (sys.prefix, sys.base_prefix, site.USER_BASE):
        if prefix:
            yield Path(prefix) / folder / name


def _mark_forked() -> None:
    global _forked
    _forked = True


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_mark_forked)


def _threading_layer() -> str:
    global _layer
    if _layer is None:
        numba.get_num_threads()  # starts the layer, as the first kernel would
        _layer = numba.threading_layer()
    return _layer


def parallel_mode() -> str:
    """How this process may run Numba's parallel kernels.

    Returns:
        ``"parallel"``: freely (TBB; OpenMP outside a forked child);
        ``"locked"``: one call at a time (``workqueue`` is not thread-safe);
        ``"serial"``: only compiled without threads (a forked child under a
        layer that is not fork-safe).

    Example:
        >>> parallel_mode() in ("parallel", "locked")  # this is no forked child
        True
    """
    layer = _threading_layer()
    if layer == "tbb":
        return "parallel"
    if _forked:
        return "serial"
    return "locked" if layer == "workqueue" else "parallel"


@contextmanager
def numba_threads(count: int) -> Iterator[None]:
    """Runs this thread's parallel kernels on ``count`` of Numba's threads.

    Numba's thread count is per calling thread; the count before is restored
    on leaving, also after an error.

    Args:
        count: threads, from 1 to ``numba.config.NUMBA_NUM_THREADS``.

    Example:
        >>> with numba_threads(1):
        ...     numba.get_num_threads()
        1
    """
    before = numba.get_num_threads()
    numba.set_num_threads(count)
    try:
        yield
    finally:
        numba.set_num_threads(before)


def kernel_pair(**options: Any) -> Callable[[Callable[..., Any]], tuple[Any, Any]]:
    """Compiles a ``prange`` kernel twice: with threads, and its serial twin.

    For a kernel called from another compiled one, which must pick at run time
    (as :func:`with_threads` says) whether it may start threads. Both compile
    lazily, on their first call; the twin has its own name, so it gets its own
    on-disk cache entry.

    Args:
        **options: other :func:`numba.njit` options (``cache``, ``nogil``...).

    Returns:
        A decorator that turns a Python function into ``(parallel, serial)``
        Numba dispatchers.

    Example:
        >>> import numpy as np
        >>> from numba import prange
        >>> def double(x):
        ...     for i in prange(x.shape[0]):
        ...         x[i] *= 2
        >>> parallel, serial = kernel_pair(nogil=True)(double)
        >>> x = np.arange(3.0)
        >>> parallel(x); serial(x)
        >>> x
        array([0., 4., 8.])
    """

    def decorate(func: Callable[..., Any]) -> tuple[Any, Any]:
        # Numba names cache files by qualname: a twin under the kernel's
        # name would overwrite, and later load, the parallel build.
        twin = type(func)(func.__code__, func.__globals__, func.__name__,
                          func.__defaults__, func.__closure__)  # fmt: skip
        twin.__qualname__ = f"{func.__qualname__}_serial"
        return (
            numba.njit(parallel=True, **options)(func),
            numba.njit(parallel=False, **options)(twin),
        )

    return decorate


def with_threads(kernel: Callable[..., Any]) -> Callable[..., Any]:
    """Calls ``kernel(*args, threads)``, ``threads`` as :func:`parallel_mode` says.

    For a compiled kernel whose last argument says whether it may start
    threads (it calls the parallel or the serial half of a
    :func:`kernel_pair`): ``False`` in a forked child under a layer that is
    not fork-safe, and one call at a time under ``workqueue``.

    Args:
        kernel: the compiled kernel.

    Returns:
        The kernel without its last argument.

    Example:
        >>> import numba
        >>> @numba.njit
        ... def threads_allowed(threads):
        ...     return threads
        >>> with_threads(threads_allowed)()  # this is no forked child
        True
    """

    @functools.wraps(kernel)
    def run(*args: Any) -> Any:
        mode = parallel_mode()
        if mode == "locked":
            with _workqueue_lock:
                return kernel(*args, True)
        return kernel(*args, mode == "parallel")

    return run


def parallel_kernel(**options: Any) -> Callable[[Callable[..., Any]], Callable]:
    """Like ``njit(parallel=True, **options)``, run as :func:`parallel_mode` says.

    In ``"serial"`` mode the kernel runs as a twin compiled without
    ``parallel`` (``prange`` runs as ``range``), built on first use
    (:func:`kernel_pair`). Results are the same in every mode when each
    iteration owns its output.

    Args:
        **options: other :func:`numba.njit` options (``cache``, ``nogil``...).

    Returns:
        A decorator that turns a Python function into the kernel.

    Example:
        >>> import numpy as np
        >>> from numba import prange
        >>> @parallel_kernel(nogil=True)
        ... def double(x):
        ...     for i in prange(x.shape[0]):
        ...         x[i] *= 2
        >>> x = np.arange(3.0)
        >>> double(x)
        >>> x
        array([0., 2., 4.])
    """

    def decorate(func: Callable[..., Any]) -> Callable[..., Any]:
        kernel, serial = kernel_pair(**options)(func)

        def run(*args: Any) -> Any:
            *args, threads = args
            return (kernel if threads else serial)(*args)

        return functools.wraps(func)(with_threads(run))

    return decorate
