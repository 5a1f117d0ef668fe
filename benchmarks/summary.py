"""The current figures of docs/performance.md, written from the files the other benchmark steps wrote.

python -m benchmarks.summary            # reads docs/perf/{ratios-cpu.json,versus.md,memory.csv}
                                        # and rewrites the block between FIGURES_START and FIGURES_END

The block is generated, never edited by hand, so the page cannot drift from the measurements;
``tests/test_performance_page.py`` checks that it is what this module writes from the committed files.
"""

from __future__ import annotations

import argparse
import ast
import csv
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.harness import ROOT

PERF = ROOT / "docs" / "perf"
PAGE = ROOT / "docs" / "performance.md"
FIGURES_START = "<!-- figures: written by python -m benchmarks.summary; do not edit by hand -->"
FIGURES_END = "<!-- end of figures -->"
GIB_MIB = 1024.0


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.2f} ms"


def _measured(machine: dict[str, Any]) -> str:
    load = ", ".join(f"{value:g}" for value in machine.get("loadavg", []))
    return f"code {machine.get('code', '?')}, {machine.get('at', '?')}, load average {load}"


def kernel_table(perf: Path, size: int = 200) -> list[str]:
    """The near-duplicate kernel at ``size`` passages against the reference loop (CPU time)."""
    path = perf / "ratios-cpu.json"
    if not path.exists():
        return []
    ratios = json.loads(path.read_text())
    rows = ratios["rows"]

    def row(kind: str, label: str, impl: str) -> dict[str, Any] | None:
        for r in rows:
            if " ".join(r["group"].split()) == f"kernel {kind} {label}" and r["impl"] == impl:
                return r
        return None

    lines = [
        f"Near-duplicate kernel, {size} passages, CPU time, fastest round "
        f"(`python -m pytest benchmarks/bench_neardup.py --benchmark-only --benchmark-timer time.process_time "
        f"--ratios docs/perf/ratios-cpu`; {_measured(ratios['machine'])}):",
        "",
        "| pool | from texts: reference | from texts: `duplicate_positions` "
        "| pairwise: reference | pairwise: `dice_matches` |",
        "|---|---:|---:|---:|---:|",
    ]
    for lang in ("en", "ja"):
        for dup in ("nodup", "dup20%"):
            label = f"{lang} n={size} {dup}"
            cells = []
            for kind, impl in (("from texts", "vectorized"), ("pairwise", "vectorized-auto")):
                reference, fast = row(kind, label, "reference"), row(kind, label, impl)
                if reference is None or fast is None:
                    cells += ["—", "—"]
                    continue
                cells += [_ms(reference["min_s"]), f"{_ms(fast['min_s'])} (**{fast['speedup']:.1f}×**)"]
            lines.append(f"| {lang} {dup} | " + " | ".join(cells) + " |")
    return lines


def _header(path: Path) -> tuple[str, dict[str, Any], list[str]]:
    """The command, machine and table lines of a generated ``perf/*.md`` file."""
    text = path.read_text().splitlines() if path.exists() else []
    command = next((line for line in text if line.startswith("Command:")), "").removeprefix("Command: ").strip()
    machine_line = next((line for line in text if line.startswith("Machine:")), "")
    machine = ast.literal_eval(machine_line.removeprefix("Machine:").strip()) if machine_line else {}
    return command, machine, [line for line in text if line.startswith("|")]


def versus_table(perf: Path) -> list[str]:
    """The CPU per query against an older commit, as ``benchmarks/versus.py`` wrote it."""
    if not (perf / "versus.md").exists():
        return []
    command, machine, table = _header(perf / "versus.md")
    return [f"Whole runs against an older commit, CPU per query ({command}; {_measured(machine)}):", "", *table]


def memory_table(perf: Path) -> list[str]:
    """Peak RSS of long streamed runs (``benchmarks/memory.py``)."""
    path = perf / "memory.csv"
    if not path.exists():
        return []
    _, machine, _ = _header(perf / "memory.md")
    lines = [
        "Memory of streamed runs, whole process tree, default chunk and workers "
        f"(`python -m benchmarks.memory --queries 100000,1000000 --chunk-sizes ''`; {_measured(machine)}):",
        "",
        "| queries | input MiB | output MiB | CPU s | queries/s | peak RSS MiB |",
        "|---:|---:|---:|---:|---:|---:|",
    ]
    with open(path) as handle:
        for r in csv.DictReader(handle):
            lines.append(
                f"| {int(r['queries']):,} | {int(r['input_MiB']):,} | {int(r['output_MiB']):,} "
                f"| {float(r['cpu_seconds']):.1f} | {int(r['queries_per_s']):,} | {float(r['peak_rss_MiB']):,.0f} |"
            )
    return lines


def figures(perf: Path = PERF) -> str:
    """The generated block, markers included."""
    parts = [part for part in (kernel_table(perf), versus_table(perf), memory_table(perf)) if part]
    body = "\n\n".join("\n".join(part) for part in parts)
    return f"{FIGURES_START}\n{body}\n{FIGURES_END}"


def with_figures(page: str, block: str) -> str:
    """``page`` with its generated block replaced by ``block``."""
    start, end = page.index(FIGURES_START), page.index(FIGURES_END) + len(FIGURES_END)
    return page[:start] + block + page[end:]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.summary")
    parser.add_argument("--perf", type=Path, default=PERF)
    parser.add_argument("--page", type=Path, default=PAGE)
    args = parser.parse_args(argv)
    block = figures(args.perf)
    args.page.write_text(with_figures(args.page.read_text(), block))
    print(block)
    return 0


if __name__ == "__main__":
    sys.exit(main())
