"""Text rules of the contract: ``normalize_entry`` (near-duplicates, section 6; the evaluation's
matching) and the Rust ``str::trim`` used before it.

>>> normalize_entry("\\uff21\\uff50\\uff50\\uff4c\\uff45") == normalize_entry("apple")
True
>>> normalize_entry("リンゴ") == normalize_entry("りんご")
True
>>> normalize_entry("\\uff71\\uff6f\\uff8c\\uff9f\\uff99") == normalize_entry("あっぷる")
True
>>> normalize_entry("ΟΔΟΣ")
'οδοσ'
>>> trim("\\u3000 a b\\t\\n")
'a b'
"""

from __future__ import annotations

import re
import unicodedata

import numpy as np

__all__ = ["is_blank", "normalize_entry", "trim"]

# Unicode White_Space (what Rust's char::is_whitespace and str::trim use); Python's str.strip
# would also strip U+001C..U+001F, which are not White_Space.
_WHITE_SPACE = (
    "\t\n\x0b\x0c\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a"
    "\u2028\u2029\u202f\u205f\u3000"
)


def trim(text: str) -> str:
    """Strip leading and trailing Unicode White_Space."""
    return text.strip(_WHITE_SPACE)


def is_blank(text: str) -> bool:
    """Empty after :func:`trim`."""
    return not trim(text)


def _lower_each(text: str) -> str:
    # str.lower() applies the context-sensitive final-sigma rule; the contract lowercases every
    # code point on its own, which differs only where a capital sigma is present.
    return "".join(c.lower() for c in text) if "\u03a3" in text else text.lower()


_KATAKANA = re.compile("[\u30a1-\u30f6]")


def normalize_entry(text: str) -> str:
    """Taguru's ``normalize_entry``: lower, NFKC, lower, katakana folded to hiragana.

    >>> normalize_entry("\\uff21\\uff22 \\uff71\\uff72")
    'ab あい'
    """
    if text.isascii():
        return text.lower()  # NFKC leaves ASCII alone and it holds no katakana
    lowered = _lower_each(text)
    composed = unicodedata.normalize("NFKC", lowered)
    # Lowercasing each code point is idempotent (tests/stages/test_neardup.py checks every code point),
    # so the second pass only matters where NFKC changed something.
    folded = lowered if composed == lowered else _lower_each(composed)
    if _KATAKANA.search(folded) is None:
        return folded
    points = np.frombuffer(folded.encode("utf-32-le"), dtype=np.uint32).copy()
    np.subtract(points, 0x60, out=points, where=(points - 0x30A1) <= 0x30F6 - 0x30A1)
    return points.tobytes().decode("utf-32-le")
