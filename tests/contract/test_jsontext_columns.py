"""The column form of the float rule (``format_f64_array``, ``format_f32_array``) against the scalar one.

``format_f64``/``format_f32`` define the bytes; the column functions must give exactly their text
for every element: on every number of the committed data, on random bit patterns (Hypothesis),
and on the edges of the layout (powers of ten and their neighbours, subnormals, zeros, NaN and
the infinities). The misfit path (texts of a formatter with another layout) is exercised with
numpy's texts, which lay out ``1e-05`` and ``1e+15`` differently from the contract.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from assembler.contract.jsontext import (
    _F32_BOUNDS,
    _F64_BOUNDS,
    _LAYOUT_PATTERNS,
    _fit_layout,
    _layout,
    _layout_column,
    format_f32,
    format_f32_array,
    format_f64,
    format_f64_array,
)

ROOT = Path(__file__).resolve().parents[2]
DATA_FILES = sorted(
    [ROOT / "data/conformance/lanes.jsonl", ROOT / "data/sample/lanes.jsonl", *ROOT.glob("data/eval/*/lanes.jsonl")]
)


def _numbers(node: Any, key: str = "") -> Iterator[tuple[str, float]]:
    """Every JSON number of a parsed record with the key it sits under (booleans are not numbers)."""
    if isinstance(node, dict):
        for name, child in node.items():
            yield from _numbers(child, name)
    elif isinstance(node, list):
        for child in node:
            yield from _numbers(child, key)
    elif isinstance(node, int | float) and not isinstance(node, bool):
        yield key, float(node)


def _committed_numbers() -> list[tuple[str, float]]:
    found: list[tuple[str, float]] = []
    for path in DATA_FILES:
        with path.open(encoding="utf-8") as handle:
            for line in handle:
                found.extend(_numbers(json.loads(line)))
    return found


def _f64_from_bits(bits: list[int]) -> npt.NDArray[np.float64]:
    return np.array(bits, dtype=np.uint64).view(np.float64)


def _f32_from_bits(bits: list[int]) -> npt.NDArray[np.float32]:
    return np.array(bits, dtype=np.uint32).view(np.float32)


def _assert_columns_agree(values: npt.NDArray[np.floating[Any]]) -> None:
    """The column formatter of the values' kind (f64 or f32) writes what the scalar one writes."""
    one, column = (format_f32, format_f32_array) if values.dtype == np.float32 else (format_f64, format_f64_array)
    expected = [one(value) for value in values.tolist()]
    got = column(values).to_list()
    wrong = [
        (value.hex(), want, have)
        for value, want, have in zip(values.tolist(), expected, got, strict=True)
        if want != have
    ]
    assert not wrong, wrong[:10]


def _edges(kind: type[np.floating[Any]], exponents: range, specials: list[float]) -> npt.NDArray[Any]:
    """Powers of ten, the layout's bounds and the specials, each with its two neighbours, both signs."""
    info = np.finfo(kind)
    with np.errstate(over="ignore"):
        centres = [kind(f"1e{k}") for k in exponents] + [kind(x) for x in specials]
    centres += [info.max, info.tiny, info.smallest_subnormal, kind(0)]
    array = np.array(centres, dtype=kind)
    array = array[np.isfinite(array)]
    with np.errstate(over="ignore"):  # the neighbour above the largest float is inf, kept on purpose
        out = np.concatenate([array, np.nextafter(array, kind(np.inf)), np.nextafter(array, kind(0))])
    out = np.concatenate([out, -out, np.array([np.nan, -np.nan, np.inf, -np.inf], dtype=kind)])
    return out


# Around the f64 bounds (kk = 16, -5) and the f32 bounds (kk = 13, -6), and values whose shortest
# digits round up to the next power of ten (9.999999999999999e22 is written 1e+23).
F64_EDGES = _edges(np.float64, range(-330, 310), [1.5e-5, 1.5e-6, 9.5e15, 1.25e16, 9.999999999999999e22, 2.5])
F32_EDGES = _edges(np.float32, range(-46, 40), [1.5e-6, 1.5e-7, 9.5e12, 1.25e13, 0.86304635, 3.4028235e38])


def test_columns_agree_with_scalars_on_every_committed_number() -> None:
    """All numbers of the committed lane dumps as f64, and as f32 after rounding (every ``score`` among them)."""
    numbers = _committed_numbers()
    scores = [value for key, value in numbers if key == "score"]
    assert len(scores) > 1000  # the eval dumps are there: the test is not vacuous
    values = np.array([value for _, value in numbers], dtype=np.float64)
    _assert_columns_agree(values)
    _assert_columns_agree(np.array(scores, dtype=np.float64).astype(np.float32))
    _assert_columns_agree(values.astype(np.float32))


def test_columns_agree_with_scalars_at_the_layout_edges() -> None:
    _assert_columns_agree(F64_EDGES)
    _assert_columns_agree(F32_EDGES)


@settings(max_examples=150)
@given(
    st.lists(st.one_of(st.integers(0, 2**64 - 1), st.sampled_from(F64_EDGES.view(np.uint64).tolist())), max_size=200)
)
def test_f64_columns_agree_with_scalars_on_random_bit_patterns(bits: list[int]) -> None:
    _assert_columns_agree(_f64_from_bits(bits))


@settings(max_examples=150)
@given(
    st.lists(st.one_of(st.integers(0, 2**32 - 1), st.sampled_from(F32_EDGES.view(np.uint32).tolist())), max_size=200)
)
def test_f32_columns_agree_with_scalars_on_random_bit_patterns(bits: list[int]) -> None:
    _assert_columns_agree(_f32_from_bits(bits))


def test_null_elements_stay_null_and_the_length_is_kept() -> None:
    series = pl.Series("score", [0.5, None, -0.0, None], dtype=pl.Float32)
    out = format_f32_array(series)
    assert out.dtype == pl.String
    assert out.name == "score"
    assert out.to_list() == ["0.5", None, "-0.0", None]
    assert format_f64_array(pl.Series([None, 1e16], dtype=pl.Float64)).to_list() == [None, "1e+16"]
    assert format_f64_array(np.array([], dtype=np.float64)).to_list() == []


def test_f32_columns_accept_float64_holding_f32_values() -> None:
    values = np.array([0.86304635, 1e-6, 3.4028235e38, 1e-45], dtype=np.float32)
    assert format_f32_array(values.astype(np.float64)).to_list() == [format_f32(v) for v in values.tolist()]
    assert format_f32_array(pl.Series(values.astype(np.float64))).to_list() == [format_f32(v) for v in values.tolist()]


def test_f64_columns_widen_float32_input_exactly() -> None:
    values = np.array([0.86304635, 1e-7], dtype=np.float32)
    assert format_f64_array(values).to_list() == [format_f64(v) for v in values.tolist()]
    assert format_f64_array(values).to_list() == ["0.8630463480949402", "1.0000000116860974e-7"]


@pytest.mark.parametrize(
    ("values", "bounds", "scalar"),
    [(F64_EDGES, _F64_BOUNDS, format_f64), (F32_EDGES, _F32_BOUNDS, format_f32)],
    ids=["f64", "f32"],
)
def test_texts_of_another_layout_are_laid_out_again(
    values: npt.NDArray[Any], bounds: tuple[int, int], scalar: Any
) -> None:
    """A formatter with other layout rules (numpy's: ``1e-05``, ``1e+15``, ``nan``) still gives the contract's text.

    This is the path a polars release with another Float -> String layout would take.
    """
    foreign = pl.Series(values.astype(str))
    expected = [scalar(value) for value in values.tolist()]
    assert _layout_column(pl.Series(values), foreign, bounds).to_list() == expected
    assert _fit_layout(pl.Series(values), foreign.clone(), bounds).to_list() == expected
    assert foreign.str.contains(_LAYOUT_PATTERNS[bounds]).sum() < len(foreign)  # some texts did need the rewrite


@pytest.mark.parametrize(
    ("text", "value", "expected"),
    [
        ("1e16", 1e16, "1e+16"),
        ("1E+16", 1e16, "1e+16"),
        ("100.", 100.0, "100.0"),
        (".5", 0.5, "0.5"),
        ("-0", -0.0, "-0.0"),
        ("0.000001", 1e-6, "1e-6"),
        ("00012.3400e-2", 0.1234, "0.1234"),
    ],
)
def test_any_plain_decimal_text_is_read_for_its_digits(text: str, value: float, expected: str) -> None:
    assert expected == format_f64(value)
    assert _layout_column(pl.Series([value]), pl.Series([text]), _F64_BOUNDS).to_list() == [expected]


@settings(max_examples=300)
@given(
    digits=st.from_regex(r"[1-9]([0-9]{0,15}[1-9])?", fullmatch=True),
    kk=st.integers(-330, 330),
    bounds=st.sampled_from([_F64_BOUNDS, _F32_BOUNDS]),
)
def test_layout_pattern_accepts_every_layout_text(digits: str, kk: int, bounds: tuple[int, int]) -> None:
    """The fast path keeps a text only if it matches the pattern: every ``_layout`` text must match."""
    pattern = _LAYOUT_PATTERNS[bounds]
    text = _layout(digits, kk, bounds)
    assert pl.Series([text, "-" + text]).str.contains(pattern).all()


@pytest.mark.parametrize(
    ("text", "bounds"),
    [
        ("1e-05", _F64_BOUNDS),  # zero-padded exponent
        ("1e-5", _F64_BOUNDS),  # positional range written in exponent form
        ("0.000001", _F64_BOUNDS),  # f64 writes 1e-6
        ("1e+15", _F64_BOUNDS),
        ("1e15", _F64_BOUNDS),
        ("10000000000000000.0", _F64_BOUNDS),
        ("1e+13", _F64_BOUNDS),
        ("10000000000000.0", _F32_BOUNDS),
        ("1e-6", _F32_BOUNDS),
        ("1.50", _F64_BOUNDS),
        ("1.", _F64_BOUNDS),
        ("100", _F64_BOUNDS),
        ("1.0e+16", _F64_BOUNDS),
        ("NaN", _F64_BOUNDS),
        ("inf", _F64_BOUNDS),
        ("null", _F64_BOUNDS),
    ],
)
def test_layout_pattern_rejects_texts_the_layout_never_writes(text: str, bounds: tuple[int, int]) -> None:
    assert not pl.Series([text]).str.contains(_LAYOUT_PATTERNS[bounds]).any()


def test_non_finite_and_zero_follow_the_scalar_rule() -> None:
    values = np.array([math.nan, math.inf, -math.inf, 0.0, -0.0])
    assert format_f64_array(values).to_list() == ["null", "null", "null", "0.0", "-0.0"]
    assert format_f32_array(values.astype(np.float32)).to_list() == ["null", "null", "null", "0.0", "-0.0"]


@pytest.mark.parametrize(
    ("written", "instead"),
    [
        ("1e+16", "10000000000000000.0"),  # f64: where positional notation ends
        ("1e-6", "0.000001"),  # f64: where it starts
        ("1e+13", "10000000000000.0"),  # f32: where positional notation ends
        ("0.000001", "1e-6"),  # f32: where it starts
        ("e+300", "e300"),  # far from both, f64
        ("e-45", "e-045"),  # f32's smallest subnormal
        ("e+38", "e38"),  # f32's largest numbers
        ("\u2028", "\\u2028"),  # a string escape
    ],
)
def test_the_writer_probe_refuses_a_writer_that_differs_on_one_edge(
    monkeypatch: pytest.MonkeyPatch, written: str, instead: str
) -> None:
    """The probe's few hundred values still catch a JSON writer that lays out one edge otherwise."""
    from assembler.contract import jsontext

    writer = jsontext.json_text
    monkeypatch.setattr(jsontext, "json_text", lambda value: writer(value).str.replace(written, instead, literal=True))
    assert not jsontext.writer_agrees.__wrapped__()
    monkeypatch.setattr(jsontext, "json_text", writer)
    assert jsontext.writer_agrees.__wrapped__()
