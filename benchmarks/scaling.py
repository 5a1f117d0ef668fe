"""Scaling curves: time and peak memory against the number of queries and against pool size.

    python -m benchmarks.scaling                  # full sweep, writes docs/perf/scaling.{csv,md,png}
    python -m benchmarks.scaling --queries 1000,3000 --pool-sizes 10,50 --pool-queries 50 --out /tmp/s  # quick

Every point is a file-in, file-out run in its own process, measured from outside: wall time
(interpreter start and imports included), CPU seconds (user + system, all threads) and peak RSS
(``/usr/bin/time``'s maximum RSS, or the sampled sum over the process tree if larger). Two sweeps,
each with the vectorized CLI (``assembler assemble IN -o OUT``, default chunk size) and the
reference (``python -m benchmarks.harness reference IN -o OUT``), outputs compared byte for byte:

* queries: the first N records of one typical-profile stream (``iter_records``), N from 1k to 100k;
* pool size: ``sized_records(Q, passages=K)`` (worst-profile records cut to K passages), K from
  10 to 200 at a fixed Q.

(Not to be confused with ``benchmarks/ray_scaling.py``, which compares the local engine with Ray.)
"""

from __future__ import annotations

import argparse
import csv
import itertools
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.harness import ROOT, SCRATCH, cli_command, machine_info, reference_command, run_measured, same_bytes
from tests.oracle.pools import iter_records, sized_records, write_jsonl

QUERY_SEED = 7001
POOL_SEED = 7002
FIELDS = (
    "sweep",
    "queries",
    "passages",
    "impl",
    "seconds",
    "cpu_seconds",
    "queries_per_s",
    "ms_per_query",
    "peak_rss_MiB",
)


def _ints(text: str) -> list[int]:
    return [int(part) for part in text.split(",") if part]


def typical_file(n: int, scratch: Path) -> Path:
    """The first ``n`` typical records (seed QUERY_SEED) as JSON Lines, cached in ``scratch``."""
    path = scratch / f"typical-{QUERY_SEED}-{n}.jsonl"
    if not path.exists():
        tmp = path.with_suffix(".tmp")
        write_jsonl(iter_records(n, seed=QUERY_SEED, profile="typical"), str(tmp))
        tmp.rename(path)
    return path


def pool_file(queries: int, passages: int, scratch: Path) -> Path:
    path = scratch / f"pool-{POOL_SEED}-{queries}x{passages}.jsonl"
    if not path.exists():
        tmp = path.with_suffix(".tmp")
        write_jsonl(sized_records(queries, seed=POOL_SEED, passages=passages), str(tmp))
        tmp.rename(path)
    return path


def measure_point(sweep: str, source: Path, queries: int, passages: int, with_reference: bool) -> list[dict[str, Any]]:
    rows = []
    outputs = {}
    impls = ["vectorized-cli", "reference"] if with_reference else ["vectorized-cli"]
    for impl in impls:
        out = source.with_name(f"{source.stem}.{impl}.out")
        command = cli_command if impl == "vectorized-cli" else reference_command
        measured = run_measured(command([str(source)], str(out)))
        if measured.returncode != 0:
            raise SystemExit(f"{impl} failed on {source}: {measured.stderr}")
        outputs[impl] = out
        rows.append(
            {
                "sweep": sweep,
                "queries": queries,
                "passages": passages,
                "impl": impl,
                "seconds": round(measured.seconds, 3),
                "cpu_seconds": measured.cpu_seconds,
                "queries_per_s": round(queries / measured.seconds, 1),
                "ms_per_query": round(1e3 * measured.seconds / queries, 3),
                "peak_rss_MiB": round(measured.peak_rss / 2**20, 1),
            }
        )
        print(" ".join(f"{k}={v}" for k, v in rows[-1].items()), file=sys.stderr, flush=True)
    if with_reference and not same_bytes(outputs["vectorized-cli"], outputs["reference"]):
        raise SystemExit(f"outputs differ on {source}")
    for out in outputs.values():
        out.unlink()
    if with_reference:
        ratio = rows[1]["seconds"] / rows[0]["seconds"]
        rows[0]["speedup"] = rows[1]["speedup"] = round(ratio, 2)
    return rows


def _secs(row: dict[str, Any]) -> str:
    cpu = row.get("cpu_seconds")
    return f"{row['seconds']:.2f}" + (f" ({cpu:.2f})" if cpu is not None else "")


def _table(rows: list[dict[str, Any]], sweep: str, key: str) -> list[str]:
    lines = [
        f"| {key} | vectorized s (CPU s) | vectorized q/s | vectorized peak RSS MiB "
        "| reference s (CPU s) | reference q/s | reference peak RSS MiB | speedup (wall) | speedup (CPU) |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    points = [r for r in rows if r["sweep"] == sweep]
    for value, group in itertools.groupby(points, key=lambda r: r[key]):
        by_impl = {r["impl"]: r for r in group}
        vec, ref = by_impl["vectorized-cli"], by_impl.get("reference")
        cells = [f"{value:,}", _secs(vec), f"{vec['queries_per_s']:,.0f}", f"{vec['peak_rss_MiB']:,.0f}"]
        if ref is None:
            cells += ["—", "—", "—", "—", "—"]
        else:
            cpu_ratio = "—"
            if ref.get("cpu_seconds") and vec.get("cpu_seconds"):
                cpu_ratio = f"{ref['cpu_seconds'] / vec['cpu_seconds']:.2f}×"
            cells += [
                _secs(ref),
                f"{ref['queries_per_s']:,.0f}",
                f"{ref['peak_rss_MiB']:,.0f}",
                f"{ref['seconds'] / vec['seconds']:.2f}×",
                cpu_ratio,
            ]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def write_outputs(rows: list[dict[str, Any]], out_dir: Path, command: str, info: dict[str, Any]) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    with open(out_dir / "scaling.csv", "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=[*FIELDS, "speedup"], extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
    md = [
        "<!-- written by benchmarks/scaling.py; do not edit by hand -->",
        f"Command: `{command}`  ",
        f"Machine: {info}",
        "",
        "Against the number of queries (typical pools, about 5 passages):",
        "",
        *_table(rows, "queries", "queries"),
        "",
        "Against pool size (worst-profile records cut to K passages, fixed query count):",
        "",
        *_table(rows, "pool", "passages"),
        "",
    ]
    (out_dir / "scaling.md").write_text("\n".join(md))
    plot(rows, out_dir / "scaling.png")


def plot(rows: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    fig, axes = plt.subplots(2, 2, figsize=(11, 8))
    styles = {"vectorized-cli": ("tab:blue", "o", "vectorized (CLI)"), "reference": ("tab:red", "s", "reference")}
    for col, (sweep, key, label) in enumerate(
        (("queries", "queries", "queries (typical pools)"), ("pool", "passages", "passages per query"))
    ):
        points = [r for r in rows if r["sweep"] == sweep]
        if not points:
            continue
        for impl, (color, marker, name) in styles.items():
            mine = [r for r in points if r["impl"] == impl]
            if not mine:
                continue
            xs = [r[key] for r in mine]
            scale = 1.0 if sweep == "queries" else 1e3 / mine[0]["queries"]
            y_wall = [r["seconds"] * scale for r in mine]
            axes[0][col].plot(xs, y_wall, marker=marker, color=color, label=f"{name}, wall")
            if all(r.get("cpu_seconds") for r in mine):
                y_cpu = [r["cpu_seconds"] * scale for r in mine]
                axes[0][col].plot(xs, y_cpu, marker=marker, color=color, linestyle="--", label=f"{name}, CPU")
            axes[1][col].plot(xs, [r["peak_rss_MiB"] for r in mine], marker=marker, color=color, label=name)
        queries = points[0]["queries"]
        axes[0][col].set_ylabel("seconds" if sweep == "queries" else f"ms per query ({queries} queries)")
        axes[1][col].set_ylabel("peak RSS (MiB)")
        for row in (0, 1):
            axes[row][col].set_xlabel(label)
            axes[row][col].grid(True, which="both", alpha=0.3)
            axes[row][col].legend()
        if sweep == "queries":
            plain = matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:,.0f}")
            for ax in (axes[0][col], axes[1][col]):
                ax.set_xscale("log")
                ax.xaxis.set_major_formatter(plain)
            axes[0][col].set_yscale("log")
            axes[0][col].yaxis.set_major_formatter(plain)
        axes[1][col].set_ylim(bottom=0)
    fig.suptitle("assembler: time and peak memory, file in / file out (2-core machine)")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.scaling", description=__doc__.split("\n")[0])
    parser.add_argument("--queries", type=_ints, default=[1000, 3000, 10000, 30000, 100000])
    parser.add_argument("--pool-sizes", type=_ints, default=[10, 25, 50, 100, 200])
    parser.add_argument("--pool-queries", type=int, default=300, help="queries per pool-size point (default 300)")
    parser.add_argument(
        "--reference-max-queries",
        type=int,
        default=100000,
        help="run the reference only up to this many queries in the query sweep (default 100000)",
    )
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "perf")
    parser.add_argument("--scratch", type=Path, default=SCRATCH)
    args = parser.parse_args(argv)
    args.scratch.mkdir(parents=True, exist_ok=True)
    command = "python -m benchmarks.scaling " + " ".join(argv if argv is not None else sys.argv[1:])
    info = machine_info()
    started = time.perf_counter()
    rows: list[dict[str, Any]] = []
    if args.queries:
        largest = typical_file(max(args.queries), args.scratch)
        for n in sorted(args.queries):
            source = largest
            if n != max(args.queries):
                source = args.scratch / f"typical-{QUERY_SEED}-{n}.jsonl"
                if not source.exists():
                    with open(largest, "rb") as src, open(source, "wb") as dst:
                        dst.writelines(itertools.islice(src, n))
            rows += measure_point("queries", source, n, 5, n <= args.reference_max_queries)
    for k in args.pool_sizes:
        rows += measure_point("pool", pool_file(args.pool_queries, k, args.scratch), args.pool_queries, k, True)
    info["loadavg_end"] = machine_info()["loadavg"]
    info["sweep_minutes"] = round((time.perf_counter() - started) / 60, 1)
    write_outputs(rows, args.out, command.strip(), info)
    print(f"wrote {args.out / 'scaling.csv'}, scaling.md, scaling.png", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
