"""Where a worker pool starts to pay: ``--workers 1`` against ``--workers 2`` by input size.

    python -m benchmarks.workers_threshold                       # 250 .. 10,000 typical queries, 3 rounds
    python -m benchmarks.workers_threshold --queries 500,2000 --rounds 1

Each point is ``assembler assemble IN -o OUT -q --workers W`` in its own process, wall time from
outside (interpreter start and imports included), the two settings alternated within a round so
that a neighbour's load hits both; outputs compared byte for byte. Inputs are the first N records
of the typical stream of ``benchmarks/scaling.py`` (same seed). Prints a Markdown table: input
bytes, median and best wall time of each setting, and the ratio of the medians.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections.abc import Sequence

from benchmarks.harness import SCRATCH, cli_command, run_measured, same_bytes
from benchmarks.scaling import typical_file


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", default="250,500,1000,2000,5000,10000")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    scratch = SCRATCH / "workers"
    scratch.mkdir(parents=True, exist_ok=True)
    lines = [
        "| queries | input MiB | 1 worker s (median, best) | 2 workers s (median, best) | 1 / 2 (medians) |",
        "|---:|---:|---:|---:|---:|",
    ]
    for n in (int(part) for part in args.queries.split(",") if part):
        source = typical_file(n, scratch)
        times: dict[int, list[float]] = {1: [], 2: []}
        for _ in range(args.rounds):
            for workers in (1, 2):
                out = scratch / f"out-{n}-{workers}.jsonl"
                measured = run_measured(cli_command([str(source)], str(out), workers=workers))
                if measured.returncode != 0:
                    raise SystemExit(f"--workers {workers} failed on {source}: {measured.stderr}")
                times[workers].append(measured.seconds)
                print(f"queries={n} workers={workers} seconds={measured.seconds:.2f}", file=sys.stderr, flush=True)
        if not same_bytes(scratch / f"out-{n}-1.jsonl", scratch / f"out-{n}-2.jsonl"):
            raise SystemExit(f"outputs differ on {source}")
        one, two = statistics.median(times[1]), statistics.median(times[2])
        lines.append(
            f"| {n:,} | {source.stat().st_size / 2**20:.1f} | {one:.2f} ({min(times[1]):.2f}) "
            f"| {two:.2f} ({min(times[2]):.2f}) | {one / two:.2f}× |"
        )
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
