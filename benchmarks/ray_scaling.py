"""Throughput of the local engine and of a local Ray instance with N workers (docs/scaling.md).

    python -m benchmarks.ray_scaling generate /tmp/scaling/typical20k.jsonl --queries 20000
    python -m benchmarks.ray_scaling local /tmp/scaling/typical20k.jsonl -o /tmp/scaling/local.jsonl
    python -m benchmarks.ray_scaling ray /tmp/scaling/typical20k.jsonl -o /tmp/scaling/ray2.jsonl --workers 2

Each run prints one JSON line: queries, wall seconds of the run, queries per second, CPU
milliseconds per query (every process: for Ray the driver, the instance and its workers, over both
runs, start-up included), and for Ray the seconds spent starting the instance (not counted in the
run) and a second, warm run (workers already started). The Ray instance listens on 127.0.0.1 only
and is stopped at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time
from collections.abc import Sequence
from typing import Any

from tests.oracle.pools import generate_records, write_jsonl


def _cpu_seconds() -> float:
    """CPU seconds of this process and of every live descendant (a Ray instance and its workers)."""
    parents: dict[int, int] = {}
    times: dict[int, float] = {}
    tick = os.sysconf("SC_CLK_TCK")
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as handle:
                fields = handle.read().rsplit(")", 1)[1].split()
        except OSError:
            continue  # gone meanwhile
        parents[int(entry)] = int(fields[1])
        times[int(entry)] = (int(fields[11]) + int(fields[12])) / tick
    total = _own_cpu_seconds()
    for pid in times:
        ancestor = parents.get(pid, 0)
        while ancestor > 1 and ancestor != os.getpid():
            ancestor = parents.get(ancestor, 0)
        if ancestor == os.getpid():
            total += times[pid]
    return total


def _own_cpu_seconds() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    return own.ru_utime + own.ru_stime


def run_local(inputs: Sequence[str], output: str, chunk_size: int) -> dict[str, Any]:
    from assembler.run.local import run_assembly
    from assembler.run.options import RunOptions

    cpu = _cpu_seconds()
    summary = run_assembly(inputs, output, RunOptions(chunk_size=chunk_size))
    cpu = _cpu_seconds() - cpu
    return {
        "engine": "local",
        "queries": summary.queries,
        "seconds": round(summary.seconds, 2),
        "queries_per_second": round(summary.queries / summary.seconds, 1),
        "cpu_ms_per_query": round(1000 * cpu / summary.queries, 3),
    }


def run_ray(inputs: Sequence[str], output: str, chunk_size: int, workers: int) -> dict[str, Any]:
    os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")  # 127.0.0.1 only
    import logging

    import ray

    from assembler.run.options import RunOptions
    from assembler.run.ray import run_ray_assembly

    cpu, driver = _cpu_seconds(), _own_cpu_seconds()
    started = time.perf_counter()
    ray.init(address="local", num_cpus=workers, include_dashboard=False, logging_level=logging.WARNING)
    startup = time.perf_counter() - started
    try:
        runs = [run_ray_assembly(inputs, output, RunOptions(chunk_size=chunk_size)) for _ in range(2)]
        cpu, driver = _cpu_seconds() - cpu, _own_cpu_seconds() - driver
    finally:
        ray.shutdown()
    cold, warm = runs
    return {
        "engine": "ray",
        "workers": workers,
        "queries": cold.queries,
        "startup_seconds": round(startup, 2),
        "seconds": round(cold.seconds, 2),
        "queries_per_second": round(cold.queries / cold.seconds, 1),
        "warm_seconds": round(warm.seconds, 2),
        "warm_queries_per_second": round(warm.queries / warm.seconds, 1),
        "cpu_ms_per_query": round(1000 * cpu / (cold.queries + warm.queries), 3),
        "driver_cpu_ms_per_query": round(1000 * driver / (cold.queries + warm.queries), 3),
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.ray_scaling")
    commands = parser.add_subparsers(dest="command", required=True)
    generate = commands.add_parser("generate", help="write generated lane dumps (tests/oracle/pools.py)")
    generate.add_argument("output")
    generate.add_argument("--queries", type=int, default=20000)
    generate.add_argument("--seed", type=int, default=7)
    generate.add_argument("--profile", default="typical")
    for name in ("local", "ray"):
        run = commands.add_parser(name, help=f"assemble with the {name} engine and time it")
        run.add_argument("inputs", nargs="+")
        run.add_argument("-o", "--output", required=True)
        run.add_argument("--chunk-size", type=int, default=2048)
        if name == "ray":
            run.add_argument("--workers", type=int, default=2, help="CPUs of the local Ray instance")
    args = parser.parse_args(argv)
    if args.command == "generate":
        count = write_jsonl(generate_records(args.queries, seed=args.seed, profile=args.profile), args.output)
        print(json.dumps({"generated": count, "bytes": os.path.getsize(args.output)}))
        return 0
    if args.command == "local":
        result = run_local(args.inputs, args.output, args.chunk_size)
    else:
        result = run_ray(args.inputs, args.output, args.chunk_size, args.workers)
    result["load_average_1m"] = round(os.getloadavg()[0], 2)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
