"""The JSON text rules of the evidence contract (section 1.6), in exactly one place.

Every byte the package emits is produced by the functions in this module: string escapes,
the f64/f32 float layout of serde_json 1.0.151, and the content measurements (UTF-8 bytes and
quarter-tokens) that budget accounting is built on. Nothing else in the package formats JSON.

>>> format_f64(1e16), format_f64(0.00001), format_f64(-0.0), format_f64(2.5)
('1e+16', '0.00001', '-0.0', '2.5')
>>> format_f32(0.86304635), format_f32(1e-6), format_f32(3.4028234663852886e38)
('0.86304635', '0.000001', '3.4028235e+38')
>>> escape_string('a"b\\x01')
'"a\\\\"b\\\\u0001"'
>>> measure('{"text":"日"}')
(14, 15)
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from functools import lru_cache

import numpy as np
import polars as pl

__all__ = [
    "escape_string",
    "format_f32",
    "format_f64",
    "json_array",
    "measure",
    "quarters",
    "quarters_expr",
    "to_f32",
    "tokens_from_quarters",
    "utf8_bytes_expr",
]

# (HI, LO) decimal-exponent bounds of the positional layout (contract section 1.6).
_F64_BOUNDS = (16, -5)
_F32_BOUNDS = (13, -6)

_escape = json.JSONEncoder(ensure_ascii=False).encode


def escape_string(text: str) -> str:
    """The quoted JSON string as serde_json writes it (non-ASCII raw, lowercase ``\\u00xx``)."""
    return _escape(text)


def _layout(digits: str, kk: int, bounds: tuple[int, int]) -> str:
    """Place the shortest digit string ``0.d1..dn x 10^kk`` the way zmij/Ryu does."""
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


def utf8_bytes_expr(column: str) -> pl.Expr:
    """Polars expression: the UTF-8 byte length of a string column."""
    return pl.col(column).str.len_bytes().cast(pl.Int64)


def quarters_expr(column: str) -> pl.Expr:
    """Polars expression: quarter-tokens of a string column (code points + 3 per non-ASCII)."""
    chars = pl.col(column).str.len_chars().cast(pl.Int64)
    non_ascii = pl.col(column).str.count_matches(r"[^\x00-\x7F]").cast(pl.Int64)
    return chars + 3 * non_ascii
