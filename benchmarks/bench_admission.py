"""The admission walk: every query of a chunk stepped side by side against one query at a time.

Walk frames are captured from the pipeline itself (``assemble_batch`` on generated records, the
frame ``admit_units`` hands to ``admit``), so their shapes are the real ones: a typical chunk
(256 queries of typical pools, about 25 units each), a worst-case chunk (64 queries of 200-passage
pools) and a few worst-case queries (4 queries, about 200 units each: the shape where one NumPy
step per walk position has only 4 lanes).

* ``reference``: ``admit(..., method="per_query")``, the per-query Python walk, unchanged from
  before the vectorized walk (commit 723c3ab's ``admit``);
* ``across``: ``admit(..., method="across")``, one NumPy step per walk position;
* ``auto``: ``admit(...)``, the default, which picks one by the walk's shape.

Each outcome is asserted equal to the reference's before timing.

    python -m pytest benchmarks/bench_admission.py --benchmark-only --benchmark-timer time.process_time
    python -m benchmarks.bench_admission          # the same comparison as a small table, no pytest
    python -m benchmarks.bench_admission --sweep  # both walks on 8 to 128 queries: where they cross
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Sequence
from functools import cache
from typing import Any

import polars as pl
import pytest

from assembler import assemble_batch
from assembler.contract.request import Limits
from assembler.selection import base
from assembler.stages.admission import SETUP_COST_ROWS, STEP_COST_ROWS, Admission, admit
from tests.oracle.pools import generate_records

#: name: (profile, queries, seed)
SHAPES: dict[str, tuple[str, int, int]] = {
    "typical chunk, 256 queries": ("typical", 256, 8101),
    "worst-case chunk, 64 queries": ("worst", 64, 8103),
    "worst-case, 4 queries": ("worst", 4, 8105),
}
METHODS = ("reference", "across", "auto")

WalkArgs = tuple[pl.DataFrame, list[Limits], list[int], list[int]]


@cache
def captured_walk(profile: str, queries: int, seed: int) -> WalkArgs:
    """The arguments the pipeline passes to ``admit`` when it assembles these records in one chunk."""
    seen: list[WalkArgs] = []
    original: Callable[..., Admission] = getattr(base, "admit")  # noqa: B009 (the module global admit_units calls)

    def spy(walk: pl.DataFrame, limits: Sequence[Limits], cb: Sequence[int], cq: Sequence[int], **kw: Any) -> Admission:
        seen.append((walk, list(limits), list(cb), list(cq)))
        return original(walk, limits, cb, cq, **kw)

    setattr(base, "admit", spy)  # noqa: B010
    try:
        assemble_batch(generate_records(queries, seed=seed, profile=profile))
    finally:
        setattr(base, "admit", original)  # noqa: B010
    (args,) = seen
    return args


def runner(method: str, args: WalkArgs) -> Callable[[], Admission]:
    walk, limits, cb, cq = args
    if method == "reference":
        return lambda: admit(walk, limits, cb, cq, method="per_query")
    if method == "across":
        return lambda: admit(walk, limits, cb, cq, method="across")
    return lambda: admit(walk, limits, cb, cq)


def shape_info(args: WalkArgs) -> dict[str, int]:
    walk = args[0]
    units = walk.select("q", "unit").unique().height
    steps = walk.group_by("q").agg(pl.col("unit").n_unique())["unit"].max()
    assert isinstance(steps, int)
    return {"queries": len(args[1]), "rows": walk.height, "units": units, "walk_positions": steps}


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("shape", list(SHAPES))
def test_admission_walk(benchmark: Any, shape: str, method: str) -> None:
    args = captured_walk(*SHAPES[shape])
    run = runner(method, args)
    assert run() == runner("reference", args)()
    benchmark.group = f"admission walk, {shape}"
    benchmark.extra_info.update(impl=method, **shape_info(args))
    benchmark.pedantic(run, rounds=30, warmup_rounds=2)


def fastest_cpu(run: Callable[[], Admission], rounds: int = 30) -> tuple[float, float]:
    """Fastest and median CPU seconds of ``rounds`` calls."""
    times = []
    for _ in range(rounds):
        started = time.process_time()
        run()
        times.append(time.process_time() - started)
    times.sort()
    return times[0], times[len(times) // 2]


def sweep() -> None:
    """Both walks on captured walks of 8 to 128 queries, and the one ``admit`` picks."""
    print("| profile | queries | rows | walk positions | rows per position | per query ms | across ms | auto picks |")
    print("|---|---:|---:|---:|---:|---:|---:|---|")
    for profile, queries in [("worst", n) for n in (8, 16, 24, 32)] + [("typical", n) for n in (16, 32, 64, 128)]:
        args = captured_walk(profile, queries, 9000 + queries)
        info = shape_info(args)
        rows, steps = info["rows"], info["walk_positions"]
        per_query = fastest_cpu(runner("reference", args), 25)[0]
        across = fastest_cpu(runner("across", args), 25)[0]
        pick = "across" if rows >= SETUP_COST_ROWS + STEP_COST_ROWS * steps else "per query"
        print(
            f"| {profile} | {queries} | {rows} | {steps} | {rows / steps:.0f} | {1e3 * per_query:.2f} "
            f"| {1e3 * across:.2f} | {pick} |"
        )


def main(argv: Sequence[str] | None = None) -> int:
    """Print the fastest and median CPU time of each method on each shape (30 rounds)."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench_admission", description=__doc__.split("\n")[0])
    parser.add_argument("--sweep", action="store_true", help="where the two walks cross, by walk shape")
    if parser.parse_args(argv).sweep:
        sweep()
        return 0
    print("| walk | queries | rows | units | walk positions | method | min CPU ms | median CPU ms | vs reference |")
    print("|---|---:|---:|---:|---:|---|---:|---:|---:|")
    for shape, spec in SHAPES.items():
        args = captured_walk(*spec)
        info = shape_info(args)
        expected = runner("reference", args)()
        best: dict[str, float] = {}
        for method in METHODS:
            run = runner(method, args)
            assert run() == expected
            fastest, median = fastest_cpu(run)
            best[method] = fastest
            print(
                f"| {shape} | {info['queries']} | {info['rows']} | {info['units']} | {info['walk_positions']} "
                f"| {method} | {1e3 * fastest:.2f} | {1e3 * median:.2f} | {best['reference'] / fastest:.2f}× |"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
