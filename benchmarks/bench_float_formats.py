"""Float formatting: the column functions against a list comprehension of the scalar ones.

100,000 values per group (seed 0):

* ``f64 weights in [0, 1)``: uniform doubles (17 significant digits, the costly case for repr);
* ``f64 strengths, 6 decimals``: uniform in [0, 1) rounded to 6 decimals, like the lanes' strengths;
* ``f64 random bit patterns``: every exponent, subnormals, NaNs and infinities as they come;
* ``f32 scores in [0, 1)``: uniform doubles rounded to f32, like every ``score``;
* ``f32 random bit patterns``.

``reference`` is ``[format_f64(v) for v in floats]`` (or ``format_f32``) on a ready list of
Python floats with ``format_f32``'s digit cache cleared before each round (the uncached cost);
``columns`` is ``format_f64_array``/``format_f32_array`` on the numpy array. Both outputs are
asserted equal before timing.

``pytest benchmarks/bench_float_formats.py --benchmark-only``
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt
import polars as pl
import pytest

from assembler.contract import jsontext
from assembler.contract.jsontext import format_f32, format_f32_array, format_f64, format_f64_array

COUNT = 100_000


def _values(group: str) -> npt.NDArray[Any]:
    rng = np.random.default_rng(0)
    if group == "f64 weights in [0, 1)":
        return rng.random(COUNT)
    if group == "f64 strengths, 6 decimals":
        return np.round(rng.random(COUNT), 6)
    if group == "f64 random bit patterns":
        return rng.integers(0, 2**64, COUNT, dtype=np.uint64, endpoint=False).view(np.float64)
    if group == "f32 scores in [0, 1)":
        return rng.random(COUNT).astype(np.float32)
    return rng.integers(0, 2**32, COUNT, dtype=np.uint32, endpoint=False).view(np.float32)


GROUPS = (
    "f64 weights in [0, 1)",
    "f64 strengths, 6 decimals",
    "f64 random bit patterns",
    "f32 scores in [0, 1)",
    "f32 random bit patterns",
)


@pytest.mark.parametrize("impl", ["reference", "columns"])
@pytest.mark.parametrize("group", GROUPS)
def test_float_formats(benchmark: Any, group: str, impl: str) -> None:
    values = _values(group)
    floats = values.tolist()
    scalar: Callable[[float], str] = format_f32 if group.startswith("f32") else format_f64
    column: Callable[[npt.NDArray[Any]], pl.Series] = format_f32_array if group.startswith("f32") else format_f64_array
    assert column(values).to_list() == [scalar(value) for value in floats]
    benchmark.group = f"{group}, {COUNT:,} values"
    benchmark.extra_info["impl"] = impl

    def clear_cache() -> None:
        jsontext._format_finite.cache_clear()

    if impl == "reference":
        benchmark.pedantic(lambda: [scalar(value) for value in floats], setup=clear_cache, rounds=10)
    else:
        benchmark.pedantic(column, args=(values,), rounds=10, warmup_rounds=1)
