"""What bounds the speed-ups: the parts of the kernel and of a query, timed one by one.

    python -m benchmarks.bounds --out docs/perf/bounds.md

All times are CPU seconds of this process (``time.process_time``, fastest of several runs), so
they hold up when other work shares the cores.

* Kernel, 200 passages: the reference's normalization, bigram sets and pairwise loop against the
  vectorized normalization, ``bigram_codes``, ``dice_matches`` and the walk; how many pairs the
  size-bound shortcut lets through; what one ``np.unique`` over the pool's codes costs (the
  vectorized kernel's global vocabulary step) next to 1/100 of the reference's loop.
* One query end to end: ``json.loads`` of a record next to the reference's whole assembly, which
  puts a ceiling on any file-to-file speed-up that parses JSON in Python.
* Reading against the whole run, in one process: a whole ``run_assembly`` of generated pools, next
  to the reading alone (the input's chunks, then the columnar reader: Arrow's JSON parse, the
  column checks and the candidate frames) and Arrow's parse alone. Whole over reading is what
  the run could gain with every stage after the reading free.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from assembler.contract.text import normalize_entry
from assembler.run.batch import JSON_LINE, read_tables
from assembler.run.local import run_assembly
from assembler.run.options import DEFAULT_CHUNK_BYTES, DEFAULT_CHUNK_SIZE, RunOptions
from assembler.stages.lanes_columnar import _parse as parse_lines
from assembler.stages.lanes_columnar import read_lane_lines
from assembler.stages.neardup import bigram_codes, dice_matches, survivor_walk
from benchmarks.bench_neardup import _seed, reference_walk
from benchmarks.harness import machine_info
from tests.oracle import reference as ref
from tests.oracle.pools import generate_records, generate_texts, iter_records, write_jsonl


def fastest(fn: Callable[[], Any], reps: int = 20) -> float:
    best = float("inf")
    for _ in range(reps):
        start = time.process_time()
        fn()
        best = min(best, time.process_time() - start)
    return best


def kernel_rows() -> list[str]:
    lines = [
        "| pool (200 passages) | ref normalize | ref bigram sets | ref pairwise loop | vec normalize "
        "| vec bigram_codes | vec dice_matches | vec walk | pairs past the size bound | vocabulary "
        "| np.unique of all codes | 1/100 of ref loop |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for lang in ("en", "ja"):
        for dup in (0.0, 0.2):
            texts = generate_texts(200, seed=_seed(lang, 200, dup), lang=lang, dup_rate=dup)
            norm_r = [ref.normalize_entry(t) for t in texts]
            norm_v = [normalize_entry(t) for t in texts]
            sets = [ref.bigrams(t) for t in norm_r]
            codes = [bigram_codes(t) for t in norm_v]
            matches = dice_matches(codes)
            everything = np.concatenate(codes)
            past = sum(
                1 for a, b in itertools.combinations(sets, 2) if 2 * min(len(a), len(b)) / (len(a) + len(b)) >= 0.9
            )
            loop = fastest(lambda sets=sets: reference_walk(sets))
            cells = [
                fastest(lambda texts=texts: [ref.normalize_entry(t) for t in texts]),
                fastest(lambda norm_r=norm_r: [ref.bigrams(t) for t in norm_r]),
                loop,
                fastest(lambda texts=texts: [normalize_entry(t) for t in texts]),
                fastest(lambda norm_v=norm_v: [bigram_codes(t) for t in norm_v]),
                fastest(lambda codes=codes: dice_matches(codes)),
                fastest(lambda matches=matches: survivor_walk(matches)),
            ]
            unique = fastest(lambda everything=everything: np.unique(everything, return_inverse=True))
            shown = " | ".join(f"{1e3 * c:.2f} ms" for c in cells)
            lines.append(
                f"| {lang} {'dup20%' if dup else 'nodup'} | {shown} | {past:,} of 19,900 | "
                f"{len(set().union(*sets)):,} | {1e3 * unique:.2f} ms | {1e3 * loop / 100:.2f} ms |"
            )
    return lines


def query_rows() -> list[str]:
    lines = [
        "| records | JSON bytes per query | json.loads per query | reference assembly per query "
        "| ceiling of a file-to-file speed-up that parses with json.loads |",
        "|---|---:|---:|---:|---:|",
    ]
    samples = (
        ("typical", list(iter_records(1000, seed=7001, profile="typical"))),
        ("worst", generate_records(100, seed=7003, profile="worst")),
    )
    for name, records in samples:
        texts = [json.dumps(r, ensure_ascii=False, separators=(",", ":")) for r in records]
        n = len(texts)
        parse = fastest(lambda texts=texts: [json.loads(t) for t in texts], 5) / n
        assemble = fastest(lambda records=records: [ref.assemble_reference(r) for r in records], 2) / n
        lines.append(
            f"| {name} | {sum(len(t.encode()) for t in texts) / n:,.0f} | {1e6 * parse:,.0f} µs "
            f"| {1e6 * assemble:,.0f} µs | {(parse + assemble) / parse:.0f}× |"
        )
    return lines


def _chunks(source: Path) -> list[list[bytes]]:
    """The input's lines, in the chunks a run cuts."""
    tables = read_tables([str(source)], DEFAULT_CHUNK_SIZE, DEFAULT_CHUNK_BYTES)
    return [table.column(JSON_LINE).to_pylist() for table in tables]


def _read(source: Path) -> None:
    """The reading of a run: the input's chunks into the columnar reader's lanes."""
    for chunk in _chunks(source):
        read_lane_lines(chunk, sources=[str(source)] * len(chunk), line_numbers=range(1, len(chunk) + 1))


def _reading_row(name: str, n: int, seed: int, folder: str) -> str:
    source, output = Path(folder, f"{name}.jsonl"), Path(folder, f"{name}-out.jsonl")
    write_jsonl(generate_records(n, seed=seed, profile=name), str(source))
    options = RunOptions(workers=1)
    whole = fastest(lambda: run_assembly(source, output, options), 3)
    reading = fastest(lambda: _read(source), 3)
    chunks = _chunks(source)
    parsing = fastest(lambda: [parse_lines(chunk) for chunk in chunks], 3)
    return (
        f"| {name} | {n:,} | {1e3 * whole / n:.3f} ms | {1e3 * reading / n:.3f} ms "
        f"| {1e3 * parsing / n:.3f} ms | {whole / reading:.2f}× |"
    )


def reading_rows(typical: int, worst: int) -> list[str]:
    with tempfile.TemporaryDirectory() as folder:
        return [
            "| records | queries | whole run per query | reading per query | of which Arrow's parse "
            "| ceiling with every later stage free (whole / reading) |",
            "|---|---:|---:|---:|---:|---:|",
            _reading_row("typical", typical, 7001, folder),
            _reading_row("worst", worst, 7003, folder),
        ]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bounds", description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path)
    parser.add_argument("--typical", type=int, default=2000, help="typical queries of the reading rows (default 2000)")
    parser.add_argument("--worst", type=int, default=100, help="worst-case queries of the reading rows (default 100)")
    parser.add_argument("--only-reading", action="store_true", help="only the reading rows")
    args = parser.parse_args(argv)
    lines = [
        "<!-- written by benchmarks/bounds.py; do not edit by hand -->",
        f"Command: `{' '.join(['python -m benchmarks.bounds', *(sys.argv[1:] if argv is None else argv)])}`  ",
        f"Machine: {machine_info()}",
        "",
    ]
    if not args.only_reading:
        lines += ["Near-duplicate kernel, parts timed alone (CPU time, fastest of 20):", "", *kernel_rows(), ""]
        lines += ["One query (CPU time):", "", *query_rows(), ""]
    lines += ["Reading against the whole run, in one process (CPU time, fastest of 3):", ""]
    lines += [*reading_rows(args.typical, args.worst), ""]
    text = "\n".join(lines)
    print(text)
    if args.out:
        args.out.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
