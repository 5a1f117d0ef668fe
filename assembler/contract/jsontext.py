"""The JSON text rules of the evidence contract (section 1.6), in exactly one place.

Every byte the package emits is produced by the functions in this module: string escapes,
the f64/f32 float layout of serde_json 1.0.151, and the content measurements (UTF-8 bytes and
quarter-tokens) that budget accounting is built on. Nothing else in the package formats JSON.

The float rule: the shortest digits that round-trip (f32-shortest for f32), placed by
``_layout`` between the kind's exponent bounds (``_F64_BOUNDS``, ``_F32_BOUNDS``); NaN and the
infinities are ``null``, zero keeps its sign. ``format_f64``/``format_f32`` apply it to one
value; ``format_f64_array``/``format_f32_array`` are its column form (polars writes the shortest
digits of the whole column, texts already in ``_layout``'s form are kept, the rest are re-laid
out by ``_layout_column``, the same branches as ``_layout`` in polars expressions).

>>> format_f64(1e16), format_f64(0.00001), format_f64(-0.0), format_f64(2.5)
('1e+16', '0.00001', '-0.0', '2.5')
>>> format_f32(0.86304635), format_f32(1e-6), format_f32(3.4028234663852886e38)
('0.86304635', '0.000001', '3.4028235e+38')
>>> format_f64_array(np.array([1e16, 0.00001, -0.0, 2.5, np.nan])).to_list()
['1e+16', '0.00001', '-0.0', '2.5', 'null']
>>> escape_string('a"b\\x01')
'"a\\\\"b\\\\u0001"'
>>> measure('{"text":"日"}')
(14, 15)
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Iterable
from functools import lru_cache
from typing import Any

import numpy as np
import numpy.typing as npt
import polars as pl
import pyarrow as pa

from assembler.contract.arrow import numpy_series, sorted_unique

__all__ = [
    "escape_string",
    "format_f32",
    "format_f32_array",
    "format_f64",
    "format_f64_array",
    "json_array",
    "json_text",
    "measure",
    "quarters",
    "quarters_expr",
    "quarters_of",
    "to_f32",
    "tokens_from_quarters",
    "utf8_buffer",
    "utf8_bytes_expr",
    "writer_agrees",
]

# (HI, LO) decimal-exponent bounds of the positional layout (contract section 1.6).
_F64_BOUNDS = (16, -5)
_F32_BOUNDS = (13, -6)

_escape = json.JSONEncoder(ensure_ascii=False).encode


def escape_string(text: str) -> str:
    """The quoted JSON string as serde_json writes it (non-ASCII raw, lowercase ``\\u00xx``)."""
    return _escape(text)


def _layout(digits: str, kk: int, bounds: tuple[int, int]) -> str:
    """Place the shortest digit string ``0.d1..dn x 10^kk`` the way zmij/Ryu does.

    Positional while ``lo < kk <= hi`` (an integer keeps ``.0``), otherwise ``d.ddde±x``:

    >>> _layout("15", -4, _F64_BOUNDS), _layout("15", -5, _F64_BOUNDS), _layout("1", 17, _F64_BOUNDS)
    ('0.000015', '1.5e-6', '1e+16')
    """
    hi, lo = bounds
    n = len(digits)
    if n <= kk <= hi:
        return digits + "0" * (kk - n) + ".0"
    if 0 < kk < n and kk <= hi:
        return digits[:kk] + "." + digits[kk:]
    if lo < kk <= 0:
        return "0." + "0" * (-kk) + digits
    exponent = kk - 1
    mantissa = digits[0] + ("." + digits[1:] if n > 1 else "")
    return f"{mantissa}e{'+' if exponent >= 0 else '-'}{abs(exponent)}"


def _split_scientific(text: str) -> tuple[str, int]:
    """Digits and decimal-point position of a shortest repr such as ``1.5e-05`` or ``0.001``."""
    mantissa, _, exp_text = text.partition("e")
    exponent = int(exp_text) if exp_text else 0
    whole, _, frac = mantissa.partition(".")
    digits = (whole + frac).lstrip("0")
    leading = len(whole + frac) - len((whole + frac).lstrip("0"))
    kk = len(whole) + exponent - leading
    digits = digits.rstrip("0") or "0"
    return digits, kk


@lru_cache(maxsize=65536)
def _format_finite(value: float, is_f32: bool) -> str:
    magnitude = abs(value)
    if is_f32:
        shortest = np.format_float_scientific(np.float32(magnitude), unique=True, trim="-")
        bounds = _F32_BOUNDS
    else:
        shortest = repr(magnitude)
        bounds = _F64_BOUNDS
    digits, kk = _split_scientific(shortest)
    return ("-" if value < 0 else "") + _layout(digits, kk, bounds)


def _format(value: float, is_f32: bool) -> str:
    if math.isnan(value) or math.isinf(value):
        return "null"
    if value == 0.0:
        return "-0.0" if math.copysign(1.0, value) < 0 else "0.0"
    return _format_finite(value, is_f32)


def format_f64(value: float) -> str:
    """An f64 field (``weight``, ``strength``) as serde_json writes it."""
    # From 1e-4 up, Python's repr already has the same digits and layout (positional below
    # 1e16, then "1e+16" style); only smaller magnitudes need the layout rewritten.
    if 1e-4 <= abs(value) < math.inf:
        return repr(value)
    return _format(value, False)


def format_f32(value: float) -> str:
    """An f32 field (every ``score``) as serde_json writes it; ``value`` must already be f32."""
    return _format(value, True)


# The column form. Polars' Float -> String cast writes the shortest round-trip digits of each
# value (f32-shortest for Float32; tests/contract/test_jsontext_columns.py and
# benchmarks/float_formats.py hold them to the scalar functions' digits), in a layout of its own
# that polars does not promise to keep: a text already in the contract's layout is kept as is,
# any other is re-laid out.


def _layout_pattern(bounds: tuple[int, int]) -> str:
    """An anchored regex matching exactly the texts ``_format`` writes for finite values.

    One alternative per branch of ``_layout`` (exponents up to 399 cover every f64), plus zero.
    """
    hi, lo = bounds
    whole = rf"[1-9]\d{{0,{hi - 1}}}\.(?:0|\d*[1-9])"  # 0 < kk <= hi
    fraction = rf"0\.0{{0,{-lo - 1}}}[1-9](?:\d*[1-9])?"  # lo < kk <= 0
    up = "|".join(str(x) for x in range(hi, 400))  # kk > hi
    down = "|".join(str(x) for x in range(1 - lo, 400))  # kk <= lo
    scientific = rf"[1-9](?:\.\d*[1-9])?e(?:\+(?:{up})|-(?:{down}))"
    return rf"^-?(?:0\.0|{whole}|{fraction}|{scientific})$"


_LAYOUT_PATTERNS = {_F64_BOUNDS: _layout_pattern(_F64_BOUNDS), _F32_BOUNDS: _layout_pattern(_F32_BOUNDS)}

# Sign, whole digits, fraction digits, exponent of any plain decimal text ("1e16", "1.5e-05", ".5").
_DECIMAL_PARTS = r"^(-?)(\d*)(?:\.(\d*))?(?:[eE]([+-]?\d+))?$"


def _layout_column(values: pl.Series, texts: pl.Series, bounds: tuple[int, int]) -> pl.Series:
    """``_format`` on a column: ``texts`` are any shortest round-trip decimal texts of ``values``.

    The digits and point position are read as ``_split_scientific`` reads them, then placed by
    the branches of ``_layout``; non-finite values are ``null``, zero keeps the text's sign.
    """
    hi, lo = bounds
    zeros = pl.lit("0" * max(hi, -lo))
    frame = pl.DataFrame({"value": values, "parts": texts.str.extract_groups(_DECIMAL_PARTS)}).unnest("parts")
    frame = frame.rename({"1": "sign", "2": "whole", "3": "fraction", "4": "exponent"})
    frame = frame.with_columns(
        both=pl.col("whole") + pl.col("fraction").fill_null(""),
        exponent=pl.col("exponent").cast(pl.Int32).fill_null(0),
    )
    frame = frame.with_columns(stripped=pl.col("both").str.strip_chars_start("0"))
    frame = frame.with_columns(
        digits=pl.col("stripped").str.strip_chars_end("0"),
        kk=pl.col("whole").str.len_bytes().cast(pl.Int32)
        + pl.col("exponent")
        - (pl.col("both").str.len_bytes().cast(pl.Int32) - pl.col("stripped").str.len_bytes().cast(pl.Int32)),
    )
    frame = frame.with_columns(n=pl.col("digits").str.len_bytes().cast(pl.Int32))
    digits, n, kk = pl.col("digits"), pl.col("n"), pl.col("kk")
    cut = kk.clip(0, None)
    exponent = kk - 1
    scientific = (
        digits.str.slice(0, 1)
        + pl.when(n > 1).then("." + digits.str.slice(1)).otherwise(pl.lit(""))
        + pl.when(exponent >= 0).then(pl.lit("e+")).otherwise(pl.lit("e-"))
        + exponent.abs().cast(pl.String)
    )
    body = (
        pl.when((n <= kk) & (kk <= hi))
        .then(digits + zeros.str.slice(0, (kk - n).clip(0, None)) + ".0")
        .when((kk > 0) & (kk < n) & (kk <= hi))
        .then(digits.str.slice(0, cut) + "." + digits.str.slice(cut))
        .when((lo < kk) & (kk <= 0))
        .then("0." + zeros.str.slice(0, (-kk).clip(0, None)) + digits)
        .otherwise(scientific)
    )
    value = pl.col("value")
    text = (
        pl.when(value.is_nan() | value.is_infinite())
        .then(pl.lit("null"))
        .when(value == 0)
        .then(pl.col("sign") + "0.0")
        .otherwise(pl.col("sign") + body)
    )
    return frame.select(text.alias(texts.name)).to_series()


def _fit_layout(values: pl.Series, texts: pl.Series, bounds: tuple[int, int]) -> pl.Series:
    """Keep the shortest-digit ``texts`` already in the contract's layout, re-lay out the others (in place)."""
    misfits = (~texts.str.contains(_LAYOUT_PATTERNS[bounds])).arg_true()  # a null text stays null
    if misfits.len():
        texts.scatter(misfits, _layout_column(values.gather(misfits), texts.gather(misfits), bounds))
    return texts


def _format_column(values: pl.Series, bounds: tuple[int, int]) -> pl.Series:
    return _fit_layout(values, values.cast(pl.String), bounds)


def _float_series(values: npt.NDArray[Any] | pl.Series, dtype: type[pl.Float32] | type[pl.Float64]) -> pl.Series:
    series = values if isinstance(values, pl.Series) else pl.Series("", np.asarray(values))
    return series.cast(dtype)


def format_f64_array(values: npt.NDArray[Any] | pl.Series) -> pl.Series:
    """``format_f64`` of every element, as a String series of the same length (null stays null).

    >>> format_f64_array(pl.Series([1e15, 1e-6, -1.5e300, None, float("inf")])).to_list()
    ['1000000000000000.0', '1e-6', '-1.5e+300', None, 'null']
    """
    return _format_column(_float_series(values, pl.Float64), _F64_BOUNDS)


def format_f32_array(values: npt.NDArray[Any] | pl.Series) -> pl.Series:
    """``format_f32`` of every element; the values must already be f32 (float32, or float64 holding f32s).

    >>> format_f32_array(np.array([0.86304635, 1e-6, 1e13, -0.0], dtype=np.float32)).to_list()
    ['0.86304635', '0.000001', '1e+13', '-0.0']
    """
    return _format_column(_float_series(values, pl.Float32), _F32_BOUNDS)


def to_f32(value: float) -> float:
    """Round a parsed f64 to the nearest f32 (round-half-even), as serde does for f32 fields."""
    with np.errstate(over="ignore"):
        return float(np.float32(value))


def json_array(elements: Iterable[str]) -> str:
    """A compact JSON array of already-serialized elements."""
    return "[" + ",".join(elements) + "]"


def quarters(text: str) -> int:
    """Quarter-tokens of a text: 1 per ASCII code point, 4 per other code point."""
    ascii_count = len(text.encode("ascii", "ignore"))
    return ascii_count + 4 * (len(text) - ascii_count)


def measure(text: str) -> tuple[int, int]:
    """``(utf8_bytes, quarter_tokens)`` of a serialized fragment (contract section 8.2)."""
    return len(text.encode("utf-8")), quarters(text)


def tokens_from_quarters(total_quarters: int) -> int:
    """The token estimate: one ceiling over a sum of quarter-tokens."""
    return (total_quarters + 3) // 4


def json_text(value: pl.Expr) -> pl.Expr:
    """Polars expression: the compact JSON text of a value (null: ``null``), written by Polars'
    JSON writer, whose string escapes and f64/f32 layout are the rules above (:func:`writer_agrees`
    checks it once per process; the columnar reader writes its payload texts with it)."""
    return pl.struct(value.alias("v")).struct.json_encode().str.slice(5).str.strip_suffix("}")


@functools.cache
def writer_agrees() -> bool:
    """Whether the installed Polars' JSON writer writes numbers and strings as the contract does,
    probed once per process on the layout's edge values and on every escape. If a Polars release
    changes its layout, the columnar reader (:mod:`assembler.stages.lanes_columnar`) takes no line
    and everything goes through the record path: slower, never wrong.

    The numbers: every power of ten from 1e-30 to 1e30 (both of the layout's switches between
    positional and exponent notation, for f64 and f32, lie within) and one in ten beyond, out to
    the smallest subnormal and the largest number, each with its two neighbours, both signs, as f64
    and as f32. Every power of ten from 1e-323 up, as before, cost each run's start about 7 ms more
    of CPU and decided nothing more about the layout."""
    exponents = sorted({*range(-30, 31), *range(-320, 309, 10)})
    tens = np.array([10.0**k for k in exponents])
    extremes = [5e-324, 2.2250738585072014e-308, 1.7976931348623157e308]
    f64 = np.concatenate([tens, np.nextafter(tens, 0), np.nextafter(tens, np.inf), extremes])
    f64 = np.concatenate([f64, -f64, [0.0, -0.0]])
    f32_extremes = np.array([1e-45, 1.1754944e-38, 3.4028235e38], dtype=np.float32)  # subnormal, normal, largest
    with np.errstate(over="ignore"):
        f32 = sorted_unique(np.concatenate([f64.astype(np.float32), f32_extremes, -f32_extremes]))
    f32 = f32[np.isfinite(f32)]
    texts = [chr(code) for code in range(0x80)] + ['a"b\\c', "\u2028\u00e9\U0001f600", ""]
    probes = (
        (numpy_series(f64), [format_f64(float(value)) for value in f64]),
        (numpy_series(f32), [format_f32(float(value)) for value in f32]),
        (pl.Series(texts, dtype=pl.String), [escape_string(text) for text in texts]),
    )
    return all(pl.select(json_text(pl.lit(values))).to_series().to_list() == expected for values, expected in probes)


def utf8_bytes_expr(column: str) -> pl.Expr:
    """Polars expression: the UTF-8 byte length of a string column."""
    return pl.col(column).str.len_bytes().cast(pl.Int64)


def quarters_of(texts: pl.Series) -> pl.Series:
    """Quarter-tokens of every text of a string series (null: null), as :func:`quarters` counts them.

    Code points come from Polars. A non-ASCII code point is one UTF-8 lead byte (0xC0 and above),
    counted per text in the series' UTF-8 buffer with NumPy: no Python string is made (a Polars
    regex was three to four times slower than Python's ASCII encoder per text, and that ten times
    slower than this). Chunks call this a few times each on small series, so it stays clear of
    eager Polars steps that cost a few hundred microseconds whatever the length.

    >>> quarters_of(pl.Series(["ab", "日本", None])).to_list()
    [2, 8, None]
    """
    chars = texts.str.len_chars().cast(pl.Int64).alias(texts.name)
    offsets, data = _utf8_arrays(texts)
    first, last = int(offsets[0]), int(offsets[-1])
    used = data[first:last]
    if not len(used) or used.max() < 0x80:
        return chars
    leads = np.flatnonzero(used >= 0xC0) + first
    return chars + numpy_series(3 * np.diff(np.searchsorted(leads, offsets)))


def utf8_buffer(texts: pl.Series) -> bytes:
    """The UTF-8 bytes of a string series' texts one after another (a null adds nothing), copied
    once out of its Arrow buffer.

    >>> utf8_buffer(pl.Series(["ab", None, "日"]))
    b'ab\\xe6\\x97\\xa5'
    """
    offsets, data = _utf8_arrays(texts)
    return data[offsets[0] : offsets[-1]].tobytes()


def _utf8_arrays(texts: pl.Series) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.uint8]]:
    """The Arrow offsets (one per text, plus the end) and UTF-8 buffer of a string series, as NumPy
    views (no copy of the texts)."""
    utf8 = texts.to_arrow(compat_level=pl.CompatLevel.oldest())  # large_string: int64 offsets
    if isinstance(utf8, pa.ChunkedArray):
        utf8 = utf8.combine_chunks()
    _, offset_buffer, data_buffer = utf8.buffers()
    offsets = np.frombuffer(offset_buffer, dtype=np.int64, count=len(utf8) + 1, offset=utf8.offset * 8)
    data = np.frombuffer(data_buffer, dtype=np.uint8) if data_buffer is not None else np.zeros(0, np.uint8)
    return offsets, data


def quarters_expr(column: str) -> pl.Expr:
    """Polars expression: quarter-tokens of a string column (code points + 3 per non-ASCII)."""
    chars = pl.col(column).str.len_chars().cast(pl.Int64)
    # What is left once the ASCII runs are removed (twice as fast as counting each non-ASCII match).
    non_ascii = pl.col(column).str.replace_all(r"[\x00-\x7F]+", "").str.len_chars().cast(pl.Int64)
    return chars + 3 * non_ascii
