"""Check the column float formatters against the scalar ones on millions of random bit patterns.

``python -m benchmarks.float_formats --count 5000000 [--seed 0] [--chunk 500000]`` draws
``--count`` uniformly random 64-bit patterns viewed as f64 and as many 32-bit patterns viewed as
f32 (NaNs with any payload, infinities, subnormals and both zeros included as they come), formats
each chunk with ``format_f64_array``/``format_f32_array``, and its finite values with
``json_text`` (Polars' JSON writer, which writes the payload texts of the columnar reader), against
a list comprehension of ``format_f64``/``format_f32``, and compares every text. It prints one line per kind (values
checked, mismatches, seconds of each side) and the first mismatches as bit patterns, and exits 1
on any mismatch. The scalar side's cache is cleared per chunk, so its time is the uncached cost.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
import polars as pl

from assembler.contract import jsontext
from assembler.contract.jsontext import format_f32, format_f32_array, format_f64, format_f64_array, json_text


@dataclass
class Tally:
    """What one kind's check found."""

    kind: str
    checked: int = 0
    column_s: float = 0.0
    scalar_s: float = 0.0
    mismatches: list[tuple[str, str, str | None]] = field(default_factory=list)
    mismatch_count: int = 0


def _check_chunk(
    tally: Tally,
    values: npt.NDArray[Any],
    bits: npt.NDArray[Any],
    column: Callable[[npt.NDArray[Any]], pl.Series],
    scalar: Callable[[float], str],
) -> None:
    start = time.perf_counter()
    got = column(values).to_list()
    tally.column_s += time.perf_counter() - start
    jsontext._format_finite.cache_clear()
    floats = values.tolist()
    start = time.perf_counter()
    expected = [scalar(value) for value in floats]
    tally.scalar_s += time.perf_counter() - start
    tally.checked += len(expected)
    if got != expected:
        for i in np.flatnonzero(np.array(got, dtype=object) != np.array(expected, dtype=object)).tolist():
            tally.mismatch_count += 1
            if len(tally.mismatches) < 20:
                tally.mismatches.append((f"{int(bits[i]):#x}", expected[i], got[i]))


def _written(values: npt.NDArray[Any]) -> pl.Series:
    """The JSON writer's text of each value (its column type kept: Float64 or Float32)."""
    return pl.select(json_text(pl.lit(pl.Series(values)))).to_series()


def run(count: int, seed: int, chunk: int) -> list[Tally]:
    """Check ``count`` random f64 and ``count`` random f32 bit patterns, ``chunk`` at a time."""
    rng = np.random.default_rng(seed)
    f64, f32 = Tally("f64"), Tally("f32")
    written64, written32 = Tally("f64 JSON writer, finite"), Tally("f32 JSON writer, finite")
    for start in range(0, count, chunk):
        size = min(chunk, count - start)
        bits64 = rng.integers(0, 2**64, size, dtype=np.uint64, endpoint=False)
        _check_chunk(f64, bits64.view(np.float64), bits64, format_f64_array, format_f64)
        finite = np.isfinite(bits64.view(np.float64))
        _check_chunk(written64, bits64[finite].view(np.float64), bits64[finite], _written, format_f64)
        bits32 = rng.integers(0, 2**32, size, dtype=np.uint32, endpoint=False)
        _check_chunk(f32, bits32.view(np.float32), bits32, format_f32_array, format_f32)
        finite = np.isfinite(bits32.view(np.float32))
        _check_chunk(written32, bits32[finite].view(np.float32), bits32[finite], _written, format_f32)
    return [f64, f32, written64, written32]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=2_000_000, help="random bit patterns per kind (default 2000000)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the bit patterns (default 0)")
    parser.add_argument("--chunk", type=int, default=500_000, help="values formatted per call (default 500000)")
    args = parser.parse_args(argv)
    tallies = run(args.count, args.seed, args.chunk)
    for tally in tallies:
        ratio = tally.scalar_s / tally.column_s if tally.column_s else float("inf")
        print(
            f"{tally.kind}: {tally.checked} random bit patterns (seed {args.seed}), {tally.mismatch_count} mismatches; "
            f"columns {tally.column_s:.2f} s, scalar list comprehension {tally.scalar_s:.2f} s ({ratio:.1f}x)"
        )
        for bits, want, have in tally.mismatches:
            print(f"  {tally.kind} bits {bits}: scalar {want!r}, columns {have!r}")
    return 1 if any(tally.mismatch_count for tally in tallies) else 0


if __name__ == "__main__":
    sys.exit(main())
