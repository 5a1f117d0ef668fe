"""Contradiction groups, worst case per record: one record whose graph facts share one (subject, label).

Every fact of a ``grouped`` record has subject ``s`` and label ``l`` (distinct objects), so the
record holds one contradiction group of all its facts; a ``flat`` record has the same number of
facts with distinct labels (no group). Sizes: 100, 1,000, 5,000, 20,000 facts, default budget
(40 items, 65,536 bytes), so every group here is omitted whole with
``contradiction_group_exceeds_budget`` and the flat records admit what fits.

* ``pytest benchmarks/bench_groups.py --benchmark-only``: ``assemble_batch`` on the one record,
  one round per size and shape (the package is checked before timing).
* ``python -m benchmarks.bench_groups [--sizes 100,1000,5000,20000] [--timeout 300]``: each size
  and shape in a fresh subprocess (interpreter start and record building not timed), printing
  the wall seconds of ``assemble_batch`` and the subprocess's peak RSS (its own
  ``getrusage(RUSAGE_SELF).ru_maxrss``) as a markdown table. A run past ``--timeout`` seconds or
  ``--max-rss`` MiB is stopped and reported as such.
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import time
from typing import Any

import pytest

from assembler import assemble_batch
from benchmarks.harness import watched_child

SIZES = (100, 1_000, 5_000, 20_000)
SHAPES = ("grouped", "flat")


def group_record(facts: int, shape: str = "grouped") -> dict[str, Any]:
    """One lane-dump record of ``facts`` graph facts: one (subject, label) or all labels distinct."""
    graph = [
        {
            "subject": "s",
            "label": "l" if shape == "grouped" else f"l{i}",
            "object": f"o{i}",
            "weight": 1.0,
            "count": 1,
            "attributions": [
                {"source": f"d{i % 50}.md", "weight": 1.0, "count": 1, "paragraph": 0, "section": None, "locator": None}
            ],
        }
        for i in range(facts)
    ]
    return {
        "query_id": f"{shape}-{facts}",
        "context": "ctx",
        "request": {"origins": ["s"]},
        "lanes": {"graph_query": graph, "graph_activate": []},
    }


def assemble_one(record: dict[str, Any]) -> dict[str, Any]:
    """The package of the one record, parsed."""
    package: dict[str, Any] = json.loads(assemble_batch([record]).packages[0])
    return package


def check(package: dict[str, Any], facts: int, shape: str) -> None:
    """The expected outcome: the group omitted whole, or the flat record's first facts admitted."""
    selection = package["plan"]["selection"]
    assert package["omitted_total"] + len(package["items"]) == facts
    if shape == "grouped":
        assert selection["contradiction_groups"] == 1
        assert package["items"] == []
        assert package["omitted_by_reason"] == {"contradiction_group_exceeds_budget": facts}
    else:
        assert selection["contradiction_groups"] == 0
        assert 0 < len(package["items"]) <= 40


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("facts", SIZES)
def test_one_record(benchmark: Any, facts: int, shape: str) -> None:
    record = group_record(facts, shape)
    check(assemble_one(record), facts, shape)
    benchmark.group = f"one record, {facts} facts"
    benchmark.extra_info["impl"] = shape
    benchmark.pedantic(assemble_one, args=(record,), rounds=1, iterations=1)


def _child(facts: int, shape: str) -> None:
    record = group_record(facts, shape)
    start = time.perf_counter()
    package = assemble_one(record)
    elapsed = time.perf_counter() - start
    check(package, facts, shape)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
    print(json.dumps({"seconds": elapsed, "peak_rss_MiB": peak}))


def _measure(facts: int, shape: str, timeout: float, max_rss_mib: float) -> tuple[str, str]:
    """(wall seconds, peak RSS MiB) of one fresh subprocess, or why there is none."""
    command = [sys.executable, "-m", "benchmarks.bench_groups", "--child", str(facts), shape]
    result, why, peak = watched_child(command, timeout, max_rss_mib)
    if result is None:
        return why, peak
    return f"{result['seconds']:.2f}", f"{result['peak_rss_MiB']:.0f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)))
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per run before it is stopped")
    parser.add_argument("--max-rss", type=float, default=6144.0, help="MiB of RSS per run before it is stopped")
    parser.add_argument("--child", nargs=2, metavar=("FACTS", "SHAPE"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        _child(int(args.child[0]), args.child[1])
        return 0
    print("| facts | shape | seconds | peak RSS (MiB) |")
    print("|---:|---|---:|---:|")
    for facts in (int(n) for n in args.sizes.split(",")):
        for shape in ("flat", "grouped"):
            seconds, peak = _measure(facts, shape, args.timeout, args.max_rss)
            print(f"| {facts:,} | {shape} | {seconds} | {peak} |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
