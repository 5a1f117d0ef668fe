"""Peak RSS of ``assembler assemble`` streaming large inputs: bounded by the chunk, not the input.

    python -m benchmarks.memory                       # 100k and 1M queries, chunk sweep at 100k
    python -m benchmarks.memory --queries 20000 --chunk-sizes 2048 --out /tmp/mem   # quick

Inputs are JSON Lines files of small realistic records on the scratch directory
(``/tmp/assembler-bench``, or ``ASSEMBLER_BENCH_DIR``): ``write_replicated_jsonl`` trims
typical-profile records to about 2 to 4 KB (6 activations, 3 passages, citations) and repeats
2,000 distinct ones with fresh query ids. Each run is ``assembler assemble IN -o OUT -q`` in its own
process; its peak RSS is ``/usr/bin/time``'s maximum RSS (or the sampled process-tree sum if
larger), and its RSS is sampled every half second for the curve. Writes
``docs/perf/memory.{csv,md,png}``.
"""

from __future__ import annotations

import argparse
import csv
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.harness import ROOT, SCRATCH, cli_command, machine_info, run_measured
from tests.oracle.pools import write_replicated_jsonl

SEED = 9001
GIB = 2**30


def _ints(text: str) -> list[int]:
    return [int(part) for part in text.split(",") if part]


def default_chunk_size() -> int:
    """The command line's ``--chunk-size`` default."""
    from assembler.run.options import DEFAULT_CHUNK_SIZE

    return DEFAULT_CHUNK_SIZE


def small_file(n: int, scratch: Path) -> Path:
    path = scratch / f"small-{SEED}-{n}.jsonl"
    if not path.exists():
        tmp = path.with_suffix(".tmp")
        write_replicated_jsonl(str(tmp), n, seed=SEED)
        tmp.rename(path)
    return path


def run_point(n: int, chunk: int | None, scratch: Path) -> tuple[dict[str, Any], list[tuple[float, int]]]:
    source = small_file(n, scratch)
    out = scratch / f"small-{n}-chunk{chunk or 'default'}.out.jsonl"
    measured = run_measured(cli_command([str(source)], str(out), chunk_size=chunk), sample_every=0.5)
    if measured.returncode != 0:
        raise SystemExit(f"assembler failed on {source}: {measured.stderr}")
    with open(out, "rb") as handle:
        lines = sum(1 for _ in handle)
    if lines != n:
        raise SystemExit(f"{out} has {lines} lines, expected {n}")
    row = {
        "queries": n,
        "chunk_size": chunk or f"default ({default_chunk_size()})",
        "input_MiB": round(source.stat().st_size / 2**20),
        "output_MiB": round(out.stat().st_size / 2**20),
        "seconds": round(measured.seconds, 1),
        "cpu_seconds": measured.cpu_seconds,
        "queries_per_s": round(n / measured.seconds),
        "peak_rss_MiB": round(measured.peak_rss / 2**20, 1),
        "under_1GiB": measured.peak_rss < GIB,
    }
    out.unlink()
    print(" ".join(f"{k}={v}" for k, v in row.items()), file=sys.stderr, flush=True)
    return row, measured.samples


def write_outputs(
    rows: list[dict[str, Any]], curves: dict[str, list[tuple[float, int]]], out_dir: Path, command: str, info: Any
) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    with open(out_dir / "memory.csv", "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    md = [
        "<!-- written by benchmarks/memory.py; do not edit by hand -->",
        f"Command: `{command}`  ",
        f"Machine: {info}",
        "",
        "| queries | chunk size | input MiB | output MiB | wall s | CPU s | queries/s | peak RSS MiB | under 1 GiB |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|:---:|",
    ]
    for r in rows:
        md.append(
            f"| {r['queries']:,} | {r['chunk_size']} | {r['input_MiB']:,} | {r['output_MiB']:,} | {r['seconds']:,} "
            f"| {r['cpu_seconds']} | {r['queries_per_s']:,} | {r['peak_rss_MiB']:,.0f} "
            f"| {'yes' if r['under_1GiB'] else 'NO'} |"
        )
    (out_dir / "memory.md").write_text("\n".join(md) + "\n")

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(10, 5))
    for label, samples in curves.items():
        if samples:
            end = samples[-1][0] or 1.0
            ax.plot([t / end for t, _ in samples], [rss / 2**20 for _, rss in samples], label=label)
    ax.axhline(1024, color="tab:red", linestyle="--", label="1 GiB")
    ax.set_xlabel("fraction of the run")
    ax.set_ylabel("RSS (MiB), sampled every 0.5 s")
    ax.set_ylim(bottom=0)
    ax.grid(True, alpha=0.3)
    ax.legend()
    ax.set_title("assembler assemble, streamed: RSS over the run")
    fig.tight_layout()
    fig.savefig(out_dir / "memory.png", dpi=100)
    plt.close(fig)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.memory", description=__doc__.split("\n")[0])
    parser.add_argument("--queries", type=_ints, default=[100_000, 1_000_000], help="input sizes, default chunk")
    parser.add_argument(
        "--chunk-sizes", type=_ints, default=[2048], help="chunk sizes swept on the smallest input (default 2048)"
    )
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "perf")
    parser.add_argument("--scratch", type=Path, default=SCRATCH)
    parser.add_argument("--keep-inputs", action="store_true", help="keep the generated inputs in the scratch dir")
    args = parser.parse_args(argv)
    args.scratch.mkdir(parents=True, exist_ok=True)
    command = ("python -m benchmarks.memory " + " ".join(argv if argv is not None else sys.argv[1:])).strip()
    info = machine_info()
    started = time.perf_counter()
    rows: list[dict[str, Any]] = []
    curves: dict[str, list[tuple[float, int]]] = {}
    smallest = min(args.queries)
    points: list[tuple[int, int | None]] = [(n, None) for n in sorted(args.queries)]  # the CLI's default
    points += [(smallest, c) for c in args.chunk_sizes]
    for n, chunk in points:
        row, samples = run_point(n, chunk, args.scratch)
        rows.append(row)
        curves[f"{n:,} queries, chunk {chunk or 'default'}"] = samples
        info["minutes"] = round((time.perf_counter() - started) / 60, 1)
        write_outputs(rows, curves, args.out, command, info)  # after every point: a long run may be cut short
    if not args.keep_inputs:
        for n in args.queries:
            small_file(n, args.scratch).unlink()
    info["loadavg_end"] = machine_info()["loadavg"]
    info["minutes"] = round((time.perf_counter() - started) / 60, 1)
    write_outputs(rows, curves, args.out, command, info)
    print(f"wrote {args.out / 'memory.csv'}, memory.md, memory.png", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
