"""The started workers' side of a pool: claims, and a pool started before the command loads."""

from __future__ import annotations

import concurrent.futures
import gc
import multiprocessing
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import assembler.run.workers as pool_workers
from assembler.run.local import run_assembly
from assembler.run.options import RunOptions

DATA = Path(__file__).resolve().parent.parent.parent / "data"
SAMPLE = DATA / "sample" / "lanes.jsonl"


@pytest.fixture
def no_early_pool_left() -> Iterator[None]:
    """Every test here ends with no early pool and no worker left, whatever it did."""
    yield
    pool_workers.end_early()
    assert not multiprocessing.active_children()


def test_the_command_claims_nothing_while_a_dead_worker_holds_the_lock(monkeypatch: pytest.MonkeyPatch) -> None:
    """A worker killed inside its claim leaves the lock held: the command does not wait forever
    (the pool is broken then, and the run ends with WorkerError); a free lock claims as usual."""
    monkeypatch.setattr(pool_workers.Claims, "COMMAND_WAIT_SECONDS", 0.05)
    claims = pool_workers.Claims(4)
    first = claims.send()
    claims.send()
    held, released = threading.Event(), threading.Event()

    def hold() -> None:  # as a worker killed inside its claim would, until the end of the test
        with claims.states.get_lock():
            held.set()
            released.wait()

    holder = threading.Thread(target=hold)
    holder.start()
    held.wait()
    assert not claims.claim(first, pool_workers.Claims.TAKEN_BACK)
    claims.take_back_all()  # returns, changes nothing
    assert list(claims.states.get_obj()) == [pool_workers.Claims.SENT] * 2 + [0, 0]
    released.set()
    holder.join()
    free = pool_workers.Claims(4)
    slot = free.send()
    assert free.claim(slot, pool_workers.Claims.STARTED)
    assert not free.claim(slot, pool_workers.Claims.TAKEN_BACK)  # a worker had it first
    assert [free.send() for _ in range(4)] == [1, 2, 3, 0]  # slots are reused in turn


def test_a_run_takes_the_early_pool_of_its_size_and_starts_no_other(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, no_early_pool_left: object
) -> None:
    pool_workers.start_early(2)
    started = pool_workers._EARLY
    assert started is not None and len(started.executor._processes or {}) == 1  # spawned now

    def no_second_pool(*_: object, **__: object) -> None:
        raise AssertionError("a run with an early pool of its size started another")

    monkeypatch.setattr(concurrent.futures, "ProcessPoolExecutor", no_second_pool)
    pooled, alone = tmp_path / "pooled.jsonl", tmp_path / "alone.jsonl"
    run_assembly([str(SAMPLE)], str(pooled), RunOptions(workers=2, chunk_size=4))
    assert pool_workers._EARLY is None  # taken, and shut down by the run
    run_assembly([str(SAMPLE)], str(alone), RunOptions(workers=1))
    assert pooled.read_bytes() == alone.read_bytes()


def test_an_early_pool_of_another_size_is_not_taken_and_is_ended(no_early_pool_left: object) -> None:
    pool_workers.start_early(2)
    assert pool_workers.take_early(2, pool_workers.claim_slots(2)) is None  # three processes asked
    assert pool_workers.take_early(1, pool_workers.claim_slots(1) + 1) is None  # more claims than it has
    pool_workers.end_early()
    assert pool_workers._EARLY is None and not multiprocessing.active_children()


def test_a_started_worker_froze_what_it_loaded(no_early_pool_left: object) -> None:
    pool = pool_workers.start_pool(1, pool_workers.claim_slots(1))
    try:
        assert pool.executor.submit(gc.get_freeze_count).result() > 0
        assert pool.executor.submit(gc.isenabled).result()
    finally:
        pool_workers.shut_down(pool.executor)


START_METHODS = """
import sys, threading
from assembler.run.workers import start_method
print(start_method())
stop = threading.Event()
thread = threading.Thread(target=stop.wait)
thread.start()
print(start_method())
stop.set()
thread.join()
import numpy
print(start_method())
"""


def test_workers_fork_only_from_one_thread_that_has_loaded_no_library() -> None:
    """The command line's early pool forks (Linux); once NumPy, Arrow or Polars is loaded, or
    another thread runs, a pool spawns."""
    methods = subprocess.run(
        [sys.executable, "-c", START_METHODS], capture_output=True, text=True, check=True
    ).stdout.split()
    assert methods == ["fork" if sys.platform == "linux" else "spawn", "spawn", "spawn"]
    assert pool_workers.start_method() == "spawn"  # this process has loaded them


def test_one_process_asked_starts_no_early_pool(no_early_pool_left: object) -> None:
    pool_workers.start_early(1)
    assert pool_workers._EARLY is None


def test_more_processes_than_cpus_start_one_worker_fewer_than_the_cpus(
    monkeypatch: pytest.MonkeyPatch, no_early_pool_left: object
) -> None:
    monkeypatch.setattr(pool_workers, "usable_cpus", lambda: 2)
    assert pool_workers.capped_workers(8) == 2 and pool_workers.capped_workers(1) == 1
    pool_workers.start_early(8)
    assert pool_workers._EARLY is not None and pool_workers._EARLY.started == 1


def test_a_command_with_workers_that_fails_early_leaves_no_worker(tmp_path: Path) -> None:
    """A usage error, or an input of one chunk, ends the workers started before the command loaded
    (they exit once loaded, no traceback)."""
    program = (
        "import multiprocessing, sys\nfrom assembler.cli import main\n"
        "status = main(sys.argv[1:])\nassert not multiprocessing.active_children()\nsys.exit(status)\n"
    )
    out = tmp_path / "out.jsonl"
    usage = [sys.executable, "-c", program, "assemble", str(SAMPLE), "-o", str(out), "--workers", "2", "--bogus"]
    failed = subprocess.run(usage, capture_output=True, text=True, timeout=60)
    assert failed.returncode == 2 and failed.stderr.count("\n") == 1 and "unrecognized arguments" in failed.stderr
    one_chunk = [sys.executable, "-c", program, "assemble", str(SAMPLE), "-o", str(out), "-q", "--workers=2"]
    done = subprocess.run(one_chunk, capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stderr) == (0, "") and len(out.read_text().splitlines()) == 30


@pytest.mark.parametrize(
    ("size", "cpus", "expected"),
    [
        (None, 8, 1),  # unknown size (standard input): one process
        (0, 8, 1),  # an empty input
        (99, 8, 1),  # less than one worker's worth
        (100, 8, 1),  # exactly one worker's worth: a pool of one is no pool
        (199, 8, 1),  # just short of two workers' worth
        (200, 8, 2),  # two workers' worth: the tie goes to the pool
        (799, 8, 7),
        (800, 8, 8),
        (10**12, 8, 8),  # never more than the CPUs
        (10**12, 1, 1),  # one CPU: one process, whatever the size
        (10**12, 0, 1),  # a CPU count of 0 cannot make zero processes
    ],
)
def test_default_workers_is_one_per_worker_share_of_bytes_within_one_and_the_cpus(
    size: int | None, cpus: int, expected: int
) -> None:
    assert pool_workers.default_workers(size, cpus, per_worker=100) == expected


@given(
    st.none() | st.integers(min_value=0, max_value=10**13),
    st.integers(min_value=0, max_value=10**13),
    st.integers(min_value=0, max_value=512),
    st.integers(min_value=1, max_value=10**9),
)
@settings(max_examples=200)
def test_default_workers_stays_within_bounds_and_grows_with_the_input(
    size: int | None, more: int, cpus: int, per_worker: int
) -> None:
    workers = pool_workers.default_workers(size, cpus, per_worker=per_worker)
    assert 1 <= workers <= max(1, cpus)
    if size is not None:
        assert pool_workers.default_workers(size + more, cpus, per_worker=per_worker) >= workers


def test_input_size_sums_the_files_and_is_unknown_for_standard_input(tmp_path: Path) -> None:
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    a.write_bytes(b"x" * 10)
    b.write_bytes(b"y" * 32)
    assert pool_workers.input_size([str(a), str(b)]) == 42
    assert pool_workers.input_size([]) == 0
    assert pool_workers.input_size([str(a), "-"]) is None
    assert pool_workers.input_size([str(a), str(tmp_path / "missing.jsonl")]) is None  # reading it reports the error
