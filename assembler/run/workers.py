"""The started workers of a pool (``assemble --workers N``): how many a run takes, how they start,
claim chunks and end.

Stdlib only, so that the command line can start them before it loads NumPy, Arrow and Polars
(:func:`start_early`): each worker loads them too (about half a second), and started at the same
time as the command's own loading rather than after it, a worker is ready when the command reads
its first chunk. ``multiprocessing`` and its process pool load only when a pool starts (about
25 ms of CPU that a run in one process does not pay).
:func:`assembler.run.pool.run_pooled` takes such a pool when it is the size it needs
(:func:`take_early`), and else starts its own (:func:`start_pool`); the command line ends an early
pool that no run took (:func:`end_early`).
"""

from __future__ import annotations

import atexit
import importlib
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from assembler.run.environment import end_without_teardown, environment_defaults, frozen_once_loaded
from assembler.run.signals import TERMINAL, held_signals

if TYPE_CHECKING:
    from concurrent.futures import ProcessPoolExecutor

__all__ = [
    "BYTES_PER_WORKER",
    "IN_FLIGHT_PER_WORKER",
    "Claims",
    "StartedPool",
    "capped_workers",
    "claim_slots",
    "default_workers",
    "end_early",
    "input_size",
    "shut_down",
    "start_early",
    "start_pool",
    "take_early",
    "usable_cpus",
    "worker_claims",
]

IN_FLIGHT_PER_WORKER = 4
"""Chunks queued per started worker; beyond them the command assembles a chunk itself. The command
assembles a chunk in about the time a worker does and also reads and writes every chunk, so a
worker is given more than the one or two it finishes meanwhile, not to run dry. The command holds
at most this many more chunks (and results) than the workers' queues."""
PARENT_CHECK_SECONDS = 1.0
"""How often a worker checks that the process that started it is still alive."""
THREAD_VARIABLES = ("POLARS_MAX_THREADS", "OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")
"""The thread pools a worker would size to the whole machine (Polars, BLAS, OpenMP/Arrow): set to
the worker's share of the CPUs unless already set, so that N workers on N CPUs do not start N
threads each."""
WORKER_MODULE = "assembler.run.pool"
"""What a worker loads as it starts (its tasks' module, and the libraries behind it)."""
BYTES_PER_WORKER = 80 * 2**20
"""Input bytes each worker process needs before a pool pays for its start-up (about a second per
worker): a pool of two starts at 160 MiB (about 9,600 typical queries). Measured with ``python -m
benchmarks.workers_threshold`` (docs/performance.md, "Workers by input size"): two workers first
beat one between 2,000 and 5,000 typical queries (33 to 83 MiB), and only in the best rounds of a
loaded machine, so the threshold is twice that crossover."""


def input_size(paths: Sequence[str]) -> int | None:
    """The summed size in bytes of the input files; ``None`` when unknown (standard input, or a
    file that cannot be examined: reading it reports that)."""
    total = 0
    for path in paths:
        if path == "-":
            return None
        try:
            total += os.path.getsize(path)
        except OSError:
            return None
    return total


def default_workers(size: int | None, cpus: int, per_worker: int = BYTES_PER_WORKER) -> int:
    """Processes for a run that did not choose: one per ``per_worker`` bytes of input, at most
    ``cpus``, at least one; one when the size is unknown.

    >>> default_workers(None, 8), default_workers(10, 8, per_worker=4), default_workers(10**9, 8, per_worker=4)
    (1, 2, 8)
    """
    if size is None:
        return 1
    return max(1, min(cpus, size // per_worker))


def usable_cpus() -> int:
    """The CPUs this process may run on (its affinity mask), else the machine's count."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not on Linux
        return os.cpu_count() or 1


def capped_workers(asked: int) -> int:
    """The processes a run asked for, at most one per usable CPU: more only compete (and each costs
    an interpreter's start and memory)."""
    return min(asked, usable_cpus())


def claim_slots(started: int, in_flight: int = IN_FLIGHT_PER_WORKER) -> int:
    """The claims a pool of ``started`` workers needs: more than the chunks sent and not yet
    written (the workers' queues, as many more the command holds, and one).

    >>> claim_slots(1)
    9
    """
    return in_flight * started + in_flight + 1


class Claims:
    """Who assembles each chunk sent to the started workers: a worker, once it starts the chunk, or
    the command, once it takes the chunk back; whichever claims it first (shared memory, one lock).

    Chunks are numbered as they are sent and take slot ``number % slots``: a slot is reused only
    once its earlier chunk's result was taken, so ``slots`` must exceed the chunks held at once.
    """

    SENT, STARTED, TAKEN_BACK = 0, 1, 2
    COMMAND_WAIT_SECONDS = 5.0
    """How long the command waits for the lock (held for microseconds, unless a worker was killed
    holding it: then the command claims nothing, and the broken pool ends the run)."""

    def __init__(self, slots: int, method: str = "spawn") -> None:
        import multiprocessing

        self.states: Any = multiprocessing.get_context(method).Array("b", slots)
        self.sent = 0

    def send(self) -> int:
        """The slot of the next chunk sent. Written without the lock: the slot's earlier chunk is
        done, so no worker reads or writes it until this chunk is sent."""
        slot = self.sent % len(self.states)
        self.sent += 1
        self.states.get_obj()[slot] = self.SENT
        return slot

    def claim(self, slot: int, claimant: int) -> bool:
        """Mark a sent chunk ``STARTED`` (a worker) or ``TAKEN_BACK`` (the command), unless it was
        claimed already."""
        with self._locked(claimant == self.TAKEN_BACK) as states:
            if states is None or states[slot] != self.SENT:
                return False
            states[slot] = claimant
            return True

    def take_back_all(self) -> None:
        """Claim for the command every chunk no worker has started (the workers then skip them)."""
        with self._locked(True) as states:
            for slot in range(len(states) if states is not None else 0):
                if states[slot] == self.SENT:
                    states[slot] = self.TAKEN_BACK

    @contextmanager
    def _locked(self, command: bool) -> Iterator[Any]:
        """The states, under the lock (read and written directly: each access of the synchronized
        array would take the lock again), or ``None`` if the command could not have the lock. A
        worker waits for it as long as it takes."""
        lock = self.states.get_lock()
        locked = lock.acquire(timeout=self.COMMAND_WAIT_SECONDS if command else None)
        try:
            yield self.states.get_obj() if locked else None
        finally:
            if locked:
                lock.release()


@dataclass(frozen=True, eq=False)  # holds a live pool: compared by identity
class StartedPool:
    """A pool whose ``started`` workers have all been started, and the claims they share."""

    executor: ProcessPoolExecutor
    claims: Claims
    started: int


def start_method() -> str:
    """How a worker starts: ``fork`` on Linux while this process runs one thread and has loaded
    none of NumPy, Arrow and Polars (the command line's early pool, :func:`start_early`), else
    ``spawn`` (Polars and OpenBLAS run threads of their own, and forking them is unsafe).

    A forked worker skips a new interpreter's start and the spawn's start-up data, and is
    assembling about 0.1 s sooner; with it, no resource tracker process starts either (the pool's
    locks are unlinked as they are made)."""
    loaded = any(name in sys.modules for name in ("numpy", "pyarrow", "polars"))
    return "fork" if sys.platform == "linux" and threading.active_count() == 1 and not loaded else "spawn"


def start_pool(started: int, slots: int) -> StartedPool:
    """Start ``started`` workers now (:func:`start_method`), with ``slots`` claims; the thread
    pools of each get its share of the CPUs (the command is one of ``started + 1`` processes)
    unless the environment sizes them.

    Each worker is started by a task that does nothing (a spawning pool starts one per task while
    none is idle, a forking one all of them at its first task), within :func:`_spawning`; no later
    task starts one."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor
    from multiprocessing import resource_tracker

    method = start_method()
    if method == "spawn":
        # The claims and the pool's queues start multiprocessing's resource tracker, a process of
        # the group too: started here, it inherits the terminal's signals ignored (it ignores
        # SIGINT and SIGTERM itself), so that a hang-up or a Ctrl-\ leaves it to end with the command.
        with _spawning():
            resource_tracker.ensure_running()
    claims = Claims(slots, method)
    cpus_each = max(1, usable_cpus() // (started + 1))
    with environment_defaults(dict.fromkeys(THREAD_VARIABLES, str(cpus_each))):
        executor = ProcessPoolExecutor(
            started, mp_context=multiprocessing.get_context(method), initializer=_start_worker, initargs=(claims,)
        )
        with _spawning():
            for _ in range(started - len(executor._processes or {})):  # none when a stand-in has them
                executor.submit(_ready)
    return StartedPool(executor, claims, started)


def shut_down(executor: ProcessPoolExecutor) -> None:
    """Wait for the workers to exit. After a clean run they are idle; otherwise the command has
    taken back the chunks no worker started (a worker skips them) and the ones a worker started
    are finished, their results unwanted (a worker writes nothing). Terminating the workers
    instead could cut a result short in the results pipe, and Python's pool then waits for its rest
    forever. Either way the pool's own thread has reaped every worker on return."""
    executor.shutdown(wait=True)


_EARLY: StartedPool | None = None
"""The pool :func:`start_early` started and no run has taken yet."""


def start_early(asked: int) -> None:
    """Start the workers of a run that asked for ``asked`` processes (the command one of them,
    :func:`capped_workers`) now, before this process loads its libraries: the command line does
    this when ``--workers`` asks for more than one. Nothing when it asks for one."""
    global _EARLY
    workers = capped_workers(asked)
    started = workers - 1
    if started >= 1 and _EARLY is None:
        _EARLY = start_pool(started, claim_slots(started))


def take_early(started: int, slots: int) -> StartedPool | None:
    """The early pool, if it has ``started`` workers and at least ``slots`` claims (the run now
    owns it); ``None`` otherwise (an early pool of another size stays for :func:`end_early`)."""
    global _EARLY
    early = _EARLY
    if early is None or early.started != started or len(early.claims.states) < slots:
        return None
    _EARLY = None
    return early


def end_early() -> None:
    """End the early pool if no run took it (an input of one chunk, a usage error): its workers
    exit once they have loaded."""
    global _EARLY
    early, _EARLY = _EARLY, None
    if early is not None:
        shut_down(early.executor)


# --- in a started worker -------------------------------------------------------------------------------

_WORKER_CLAIMS: Claims | None = None
"""In a started worker: its pool's :class:`Claims` (set by :func:`_start_worker`)."""


def worker_claims() -> Claims:
    """In a started worker: its pool's :class:`Claims`."""
    assert _WORKER_CLAIMS is not None, "a worker task outside a started worker"
    return _WORKER_CLAIMS


def _ready() -> None:
    """The task that starts a worker: nothing to do."""


def _start_worker(claims: Claims) -> None:
    """Worker: keep the pool's claims, leave Ctrl-C and the terminal's other signals (a hang-up,
    Ctrl-\\) to the parent (which ends the pool: no traceback from each worker), end at SIGTERM
    (a forked worker has the command's handlers, which raise, a spawned one the default), exit if the
    parent dies without doing so (killed: the pool's queues would block forever), end without the
    interpreter's teardown (:func:`_end_now`), and load what its tasks need (frozen out of the
    garbage collector's way: :func:`~assembler.run.environment.frozen_once_loaded`)."""
    global _WORKER_CLAIMS
    _WORKER_CLAIMS = claims
    atexit.register(_end_now)
    for signum in TERMINAL:
        signal.signal(signum, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(PARENT_CHECK_SECONDS)
        os._exit(1)

    threading.Thread(target=watch, name="assembler-parent-watch", daemon=True).start()
    with frozen_once_loaded():
        importlib.import_module(WORKER_MODULE)


def _end_now() -> None:
    """A worker's exit handler: the other handlers, then the end, without the interpreter's
    teardown (:func:`~assembler.run.environment.end_without_teardown`), which the command would
    wait for at the end of every pooled run. By then the pool has stopped the worker and its result
    queue is flushed: multiprocessing does both before the interpreter exits."""
    atexit.unregister(_end_now)
    end_without_teardown(0)


@contextmanager
def _spawning() -> Iterator[None]:
    """While a worker is started: ignore Ctrl-C (SIGINT, and the terminal's SIGHUP and SIGQUIT),
    and hold back SIGTERM.

    An ignored signal stays ignored across ``exec`` and Python then leaves it so: a Ctrl-C while a
    new worker loads (before :func:`_start_worker` runs) gives no traceback from it. The window is
    a fork and exec plus sending the worker its start-up data; a Ctrl-C within it is lost. A
    SIGTERM within it is delivered at its end: raised in the middle, it would cut the start-up
    data short (the worker's ``EOFError`` traceback)."""
    with held_signals(ignore_interrupt=True):
        yield
