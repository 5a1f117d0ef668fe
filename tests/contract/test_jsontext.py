"""The JSON text rules of contract section 1.6."""

from __future__ import annotations

import math
import struct

import numpy as np
import polars as pl
import pytest
from hypothesis import given
from hypothesis import strategies as st

from assembler.contract.jsontext import (
    escape_string,
    format_f32,
    format_f64,
    measure,
    quarters,
    quarters_expr,
    quarters_of,
    to_f32,
    tokens_from_quarters,
)


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (1.0, "1.0"),
        (10000000.0, "10000000.0"),
        (1e15, "1000000000000000.0"),
        (1e16, "1e+16"),
        (12.34, "12.34"),
        (0.00001, "0.00001"),
        (0.000015, "0.000015"),
        (1e-6, "1e-6"),
        (1e-7, "1e-7"),
        (-2.5, "-2.5"),
        (0.0, "0.0"),
        (-0.0, "-0.0"),
        (math.nan, "null"),
        (math.inf, "null"),
        (5e-324, "5e-324"),
        (1.7976931348623157e308, "1.7976931348623157e+308"),
    ],
)
def test_f64_layout(value: float, text: str) -> None:
    assert format_f64(value) == text


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (0.86304635, "0.86304635"),
        (0.54696476, "0.54696476"),
        (1e-6, "0.000001"),
        (1e-7, "1e-7"),
        (1.5e13, "1.5e+13"),
        (1e12, "1000000000000.0"),
        (3.4028235e38, "3.4028235e+38"),
        (0.1, "0.1"),
        (-0.0, "-0.0"),
        (1e39, "null"),
    ],
)
def test_f32_layout(value: float, text: str) -> None:
    assert format_f32(to_f32(value)) == text


def test_f32_is_not_widened_to_f64_digits() -> None:
    """`content_metrics_does_not_widen_f32_to_f64_precision`: 10 characters, not 18."""
    assert format_f32(to_f32(0.86304635)) == "0.86304635"
    assert repr(to_f32(0.86304635)) == "0.8630463480949402"


def _digits(text: str) -> str:
    mantissa = text.lstrip("-").split("e")[0]
    return mantissa.replace(".", "").strip("0")


@given(st.floats(allow_nan=False, allow_infinity=False))
def test_f64_text_round_trips_with_the_shortest_digits(value: float) -> None:
    text = format_f64(value)
    assert float(text) == value
    assert _digits(text) == _digits(repr(value))


@given(st.integers(0, 2**32 - 1))
def test_f32_text_round_trips_to_the_same_f32(bits: int) -> None:
    value = struct.unpack("<f", struct.pack("<I", bits))[0]
    if math.isnan(value) or math.isinf(value):
        return
    text = format_f32(value)
    assert np.float32(float(text)) == np.float32(value)
    assert "e+0" not in text and "e-0" not in text


def test_string_escapes() -> None:
    assert escape_string('"\\/\b\t\n\f\r\x00\x1f\x7f\u2028日') == '"\\"\\\\/\\b\\t\\n\\f\\r\\u0000\\u001f\x7f\u2028日"'


def test_token_estimate_weighs_basic_latin_and_other_scalars() -> None:
    """`token_estimate_weighs_basic_latin_and_other_scalars_as_documented`."""
    assert tokens_from_quarters(quarters("abcd")) == 1
    assert tokens_from_quarters(quarters("日")) == 1
    assert tokens_from_quarters(quarters("a日")) == 2


def test_content_metrics_match_real_json_length() -> None:
    """`content_metrics_matches_real_json_length`: {"text":"hi"} is 13 bytes, 13 quarters."""
    assert measure('{"text":"hi"}') == (13, 13)
    # An escaped NUL is six ASCII characters: six bytes and six quarters.
    assert measure(escape_string("\x00")) == (8, 8)


@given(st.lists(st.text(alphabet=st.characters(blacklist_categories=("Cs",))), max_size=20))
def test_the_quarters_column_agrees_with_quarters_of_each_text(texts: list[str]) -> None:
    frame = pl.DataFrame({"text": texts}, schema={"text": pl.String})
    assert frame.select(quarters_expr("text")).to_series().to_list() == [quarters(text) for text in texts]


@given(st.lists(st.none() | st.text(alphabet=st.characters(blacklist_categories=("Cs",))), max_size=20))
def test_quarters_of_a_series_agrees_with_quarters_of_each_text(texts: list[str | None]) -> None:
    counted = quarters_of(pl.Series(texts, dtype=pl.String)).to_list()
    assert counted == [None if text is None else quarters(text) for text in texts]


@given(
    st.lists(st.none() | st.text(alphabet=st.characters(blacklist_categories=("Cs",))), max_size=12),
    st.lists(st.none() | st.text(alphabet=st.characters(blacklist_categories=("Cs",))), max_size=12),
    st.integers(min_value=0, max_value=6),
)
def test_quarters_of_reads_sliced_and_chunked_series(head: list[str | None], tail: list[str | None], skip: int) -> None:
    """The lead-byte count reads the series' UTF-8 buffer: its offset and chunks must not matter."""
    texts = pl.concat([pl.Series(head, dtype=pl.String), pl.Series(tail, dtype=pl.String)], rechunk=False)
    sliced = texts.slice(skip)
    expected = [None if text is None else quarters(text) for text in (head + tail)[skip:]]
    assert quarters_of(sliced).to_list() == expected
