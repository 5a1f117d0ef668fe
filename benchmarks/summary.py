"""The issue's targets against the measured figures, from the files the other scripts wrote.

python -m benchmarks.summary            # reads docs/perf/{ratios.json,memory.csv}, writes docs/perf/targets.md
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.harness import ROOT

GIB_MIB = 1024.0


def _verdict(achieved: float, target: float) -> str:
    if achieved >= target:
        return "met"
    return f"missed: {achieved / target:.0%} of target, {target / achieved:.1f}x short"


def _rows(ratios: dict[str, Any], group_prefix: str, impl: str) -> list[dict[str, Any]]:
    return [r for r in ratios["rows"] if r["group"].startswith(group_prefix) and r["impl"] == impl]


def targets(perf: Path) -> list[str]:
    lines = [
        "<!-- written by benchmarks/summary.py from ratios.json and memory.csv; do not edit by hand -->",
        "| target | measured | verdict |",
        "|---|---|---|",
    ]
    for name, clock in (("ratios.json", "wall"), ("ratios-cpu.json", "CPU")):
        path = perf / name
        if not path.exists():
            continue
        for kind in ("from texts", "pairwise"):
            impl = "vectorized" if kind == "from texts" else "vectorized-auto"
            rows = [r for r in _rows(json.loads(path.read_text()), f"kernel {kind}", impl) if "n=200" in r["group"]]
            if rows:
                worst = min(rows, key=lambda r: r["speedup"])
                spread = ", ".join(
                    f"{r['group'].split(kind, 1)[1].strip().replace('n=200 ', '')} {r['speedup']:.1f}x" for r in rows
                )
                lines.append(
                    f"| kernel at 200 passages ({kind}, {clock} time) ≥ 100x | {spread} "
                    f"| {_verdict(worst['speedup'], 100)} |"
                )
    ratios_path = perf / "ratios.json"
    if ratios_path.exists():
        ratios = json.loads(ratios_path.read_text())
        for label, prefix, target in (
            ("typical pools, 10,000 queries", "typical", 50),
            ("worst-case pools, 1,000 queries", "worst", 30),
        ):
            ways = (
                ("parsed dicts", "assemble_batch"),
                ("file in/out", "cli"),
                ("file in/out", "cli-1-worker"),
                ("file in/out", "run_assembly"),
            )
            for way, impl in ways:
                for r in _rows(ratios, f"end to end, {way}, {prefix}", impl):
                    cpu = f"; CPU-time ratio {r['cpu_speedup']:.1f}x" if "cpu_speedup" in r else ""
                    lines.append(
                        f"| {label} ≥ {target}x ({way}, {impl}, {r['group'].rsplit(' ', 1)[-1]}) "
                        f"| {r['speedup']:.1f}x wall{cpu} | {_verdict(r['speedup'], target)} |"
                    )
    memory_path = perf / "memory.csv"
    if memory_path.exists():
        with open(memory_path) as handle:
            for r in csv.DictReader(handle):
                peak = float(r["peak_rss_MiB"])
                verdict = "met" if peak < GIB_MIB else f"missed: {peak / GIB_MIB:.2f} GiB"
                lines.append(
                    f"| {int(r['queries']):,} queries streamed (chunk {r['chunk_size']}), peak RSS < 1 GiB "
                    f"| {peak:,.0f} MiB | {verdict} |"
                )
    return lines


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.2f} ms"


def kernel_table(perf: Path, size: int = 200) -> list[str]:
    """Times and speed-ups of every kernel implementation at ``size`` passages (CPU time)."""
    path = perf / "ratios-cpu.json"
    if not path.exists():
        return []
    rows = json.loads(path.read_text())["rows"]
    lines = [
        f"| pool ({size} passages) | from texts: reference | vectorized | rapidfuzz exact "
        "| pairwise: reference | auto | dense | sparse | rapidfuzz exact |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for lang in ("en", "ja"):
        for dup in ("nodup", "dup20%"):
            label = f"{lang} n={size} {dup}"

            def cell(kind: str, impl: str, label: str = label) -> str:
                for r in rows:
                    if " ".join(r["group"].split()) == f"kernel {kind} {label}" and r["impl"] == impl:
                        if impl == "reference":
                            return _ms(r["min_s"])
                        return f"{_ms(r['min_s'])} ({r['speedup']:.1f}×)"
                return "—"

            lines.append(
                f"| {lang} {dup} | {cell('from texts', 'reference')} | {cell('from texts', 'vectorized')} "
                f"| {cell('from texts', 'rapidfuzz-indel-exact')} | {cell('pairwise', 'reference')} "
                f"| {cell('pairwise', 'vectorized-auto')} | {cell('pairwise', 'vectorized-dense')} "
                f"| {cell('pairwise', 'vectorized-sparse')} | {cell('pairwise', 'rapidfuzz-indel-exact')} |"
            )
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.summary")
    parser.add_argument("--perf", type=Path, default=ROOT / "docs" / "perf")
    args = parser.parse_args(argv)
    text = "\n".join(targets(args.perf)) + "\n"
    (args.perf / "targets.md").write_text(text)
    kernel = "\n".join(kernel_table(args.perf)) + "\n"
    (args.perf / "kernel-200.md").write_text(kernel)
    print(text)
    print(kernel)
    return 0


if __name__ == "__main__":
    sys.exit(main())
