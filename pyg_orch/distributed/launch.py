"""Runs one process per partition on this machine, and never waits forever.

:func:`spawn_ranks` is what the tests, the benchmark and the example use to run
a partitioned job on one machine (``torchrun`` does it across machines). It
watches the ranks: when one fails or dies, the others are stopped and the
error names the rank; past ``timeout`` every rank is stopped and the error
names the ranks still running. No rank outlives the call.
"""

from __future__ import annotations

import contextlib
import faulthandler
import os
import pickle
import random
import signal
import socket
import time
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import torch.distributed as dist
import torch.multiprocessing as mp

# How often the parent looks at its ranks, in seconds.
_POLL = 0.05
# How long a failure waits for a rank's death to show, in seconds.
_GRACE = 1.0
# The signal on which a rank prints every thread's stack (not on Windows).
_STACKS = getattr(signal, "SIGUSR1", None)
# Where Linux keeps the ephemeral port range; free ports are taken above this.
_PORT_RANGE = "/proc/sys/net/ipv4/ip_local_port_range"
_LOWEST_PORT = 10000


def ephemeral_ports() -> tuple[int, int]:
    """The range of ports the kernel gives outgoing connections (inclusive).

    Read from Linux's ``ip_local_port_range``; elsewhere the IANA range.

    Example:
        >>> low, high = ephemeral_ports()
        >>> 1024 < low <= high < 65536
        True
    """
    try:
        low, high = Path(_PORT_RANGE).read_text().split()
        return int(low), int(high)
    except (OSError, ValueError):
        return 49152, 65535


def free_port() -> int:
    """A TCP port of 127.0.0.1 that no process listens on now, outside
    :func:`ephemeral_ports`.

    A store's port in the ephemeral range can be taken before its owner
    listens on it: a peer that connects first may be given that very port
    for its own end (a TCP self-connect), and then waits on itself forever.

    Example:
        >>> port = free_port()
        >>> 0 < port < ephemeral_ports()[0]
        True
    """
    low, _ = ephemeral_ports()
    choose = random.SystemRandom()  # leaves the users' seeded generators alone
    for _ in range(100):
        port = choose.randrange(_LOWEST_PORT, low)
        if _port_is_free(port):
            return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))  # all taken: the kernel's choice
        return sock.getsockname()[1]


def agreed_port() -> int:
    """A free port for PyG's RPC, chosen by rank 0 and sent to every rank.

    PyG's distributed loaders default to ``MASTER_PORT + 1``, which nothing
    reserves: under ``torchrun --standalone`` the ranks then wait for each
    other's RPC store forever. Call it after ``init_process_group``, on
    every rank; pass the result as the loaders' ``master_port``, with
    ``master_addr`` the address rank 0 runs on (``MASTER_ADDR``).

    Example:
        >>> agreed_port()  # doctest: +SKIP
        41237
    """
    port = [free_port() if dist.get_rank() == 0 else 0]
    dist.broadcast_object_list(port, src=0)
    return int(port[0])


@contextlib.contextmanager
def process_group(backend: str = "gloo", **kwargs: Any) -> Iterator[None]:
    """The default process group, for the code inside; destroyed safely after it.

    ``torch.distributed.init_process_group(backend, **kwargs)``, then, when
    the block ends, ``destroy_process_group()``, in the order torch's
    teardown needs. A :class:`~torch.nn.parallel.DistributedDataParallel`
    module holds the group: if the group's last reference goes with the
    module, torch destroys ``ProcessGroupGloo`` holding the GIL and joins its
    worker threads, while a worker still releasing the last collective's
    tensors (``all_gather_object``'s) waits for the GIL: a deadlock at the
    return of the function that held the module (rare, more likely under
    load). Destroyed here, after the block's frames are gone, the group's
    last reference is the Python one, whose destructor releases the GIL.
    So create DDP modules inside the block, in a function called from it
    (as below), and keep none after it: an exception's frames are cleared
    before the group goes.

    Example:
        >>> def train(rank, world_size):  # doctest: +SKIP
        ...     with process_group("gloo", rank=rank, world_size=world_size):
        ...         return fit(...)  # builds and drops the DDP module
    """
    dist.init_process_group(backend, **kwargs)
    try:
        yield
    except BaseException as error:
        # The traceback holds the frames, and their DDP modules, alive.
        traceback.clear_frames(error.__traceback__)
        raise
    finally:
        dist.destroy_process_group()


def _run_rank(
    target: Callable[..., Any],
    rank: int,
    world_size: int,
    environment: dict[str, str],
    args: tuple[Any, ...],
    results: Any,
) -> None:
    os.environ.update(environment, RANK=str(rank), WORLD_SIZE=str(world_size))
    if _STACKS is not None:  # the parent asks for them when the job runs late
        faulthandler.register(_STACKS, all_threads=True)
    try:
        value = target(rank, world_size, *args)
    except BaseException:
        results.put((rank, False, traceback.format_exc()))
        raise SystemExit(1) from None
    # Pickled by value: a tensor sent as shared memory would vanish with
    # the process that made it.
    results.put((rank, True, pickle.dumps(value)))


def spawn_ranks(
    target: Callable[..., Any],
    world_size: int,
    args: tuple[Any, ...] = (),
    *,
    timeout: float = 60.0,
) -> list[Any]:
    """Runs ``target(rank, world_size, *args)`` in ``world_size`` spawned processes.

    Each process gets the ``torchrun`` environment: ``RANK``, ``WORLD_SIZE``,
    ``MASTER_ADDR=127.0.0.1`` and a free ``MASTER_PORT`` (PyG's distributed
    loaders take ``MASTER_PORT + 1`` for their RPC, so both are free).
    ``target`` must be importable by name (a module-level function).

    Args:
        target: what each rank runs; its return value is sent back.
        world_size: number of processes.
        args: more arguments for ``target``.
        timeout: seconds the whole job may take.

    Returns:
        The ranks' return values, by rank.

    Raises:
        RuntimeError: a rank raised or died; the message names it and holds
            its traceback.
        TimeoutError: ranks were still running after ``timeout`` seconds.

    Example:
        >>> spawn_ranks(max, 2)  # max(rank, world_size) in two processes
        [2, 2]
    """
    if world_size < 1:
        raise ValueError(f"world_size must be at least 1, got {world_size}")
    context = mp.get_context("spawn")
    results = context.SimpleQueue()
    environment = {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(_port_pair())}
    processes = [
        context.Process(
            target=_run_rank,
            args=(target, rank, world_size, environment, args, results),
            daemon=False,
        )
        for rank in range(world_size)
    ]
    for process in processes:
        process.start()
    try:
        return _collect(processes, results, timeout)
    finally:
        _stop(processes)


def _port_pair() -> int:
    # A free port whose successor is free too (PyG's RPC takes port + 1).
    while not _port_is_free((port := free_port()) + 1):
        pass
    return port


def _port_is_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def _collect(processes: list[Any], results: Any, timeout: float) -> list[Any]:
    values: dict[int, Any] = {}
    failures: dict[int, str] = {}
    deadline = time.monotonic() + timeout
    while len(values) < len(processes):
        _receive(results, values, failures)
        deaths = _deaths(processes, values, failures, results)
        if failures or deaths:
            # A rank that dies takes its peers' requests down with it: give
            # the death a moment to show, so the error names it first.
            time.sleep(_GRACE)
            _receive(results, values, failures)
            deaths = _deaths(processes, values, failures, results)
            raise RuntimeError(_report(len(processes), deaths, failures))
        if time.monotonic() > deadline:
            waiting = [rank for rank in range(len(processes)) if rank not in values]
            _print_stacks([processes[rank] for rank in waiting])
            raise TimeoutError(
                f"ranks {waiting} of {len(processes)} did not finish within "
                f"{timeout:.0f} s; they were stopped (their threads' stacks "
                f"are printed above, on stderr). A rank that never joins the "
                f"others (a wrong MASTER_ADDR/MASTER_PORT or WORLD_SIZE) "
                f"waits for them this long: check the launch settings"
            )
        time.sleep(_POLL)
    return [values[rank] for rank in range(len(processes))]


def _print_stacks(processes: list[Any]) -> None:
    if _STACKS is None:
        return
    for process in processes:
        if process.is_alive():
            os.kill(process.pid, _STACKS)
            # faulthandler writes from the signal handler at once: one rank at
            # a time, so that ranks sharing stderr do not interleave stacks.
            time.sleep(_GRACE)


def _receive(results: Any, values: dict[int, Any], failures: dict[int, str]) -> None:
    while not results.empty():
        rank, succeeded, value = results.get()
        if succeeded:
            values[rank] = pickle.loads(value)
        else:
            failures[rank] = value


def _deaths(
    processes: list[Any], values: dict, failures: dict, results: Any
) -> dict[int, int]:
    # Ranks gone without a word: their exit codes.
    return {
        rank: process.exitcode
        for rank, process in enumerate(processes)
        if rank not in values and rank not in failures
        and process.exitcode is not None and results.empty()
    }  # fmt: skip


def _report(world_size: int, deaths: dict[int, int], failures: dict[int, str]) -> str:
    lines = []
    for rank, exitcode in sorted(deaths.items()):
        how = (
            f"was killed by signal {-exitcode}"
            if exitcode < 0
            else f"exited with code {exitcode}"
        )
        lines.append(f"rank {rank} of {world_size} {how} before it finished")
    for rank, message in sorted(failures.items()):
        after = " after that" if deaths else ""
        lines.append(f"rank {rank} of {world_size} failed{after}:\n{message}")
    lines.append(
        "The other ranks were stopped. Run the job again once the cause is "
        "fixed (a partitioned job cannot go on without every partition)."
    )
    return "\n".join(lines)


def _stop(processes: list[Any]) -> None:
    # Every rank is gone when this returns: asked first, then killed.
    for process in processes:
        if process.is_alive():
            process.terminate()
    for process in processes:
        process.join(timeout=5)
        if process.is_alive():
            process.kill()
            process.join()
