"""``normalize_entry`` (spec section 2.6) and the Rust ``str::trim`` used before it.

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

import unicodedata

__all__ = ["is_blank", "normalize_entry", "trim"]

# Unicode White_Space (what Rust's char::is_whitespace and str::trim use); Python's str.strip
# would also strip U+001C..U+001F, which are not White_Space.
_WHITE_SPACE = (
    "\t\n\x0b\x0c\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a"
    "\u2028\u2029\u202f\u205f\u3000"
)
_KATAKANA_FIRST, _KATAKANA_LAST, _KANA_SHIFT = 0x30A1, 0x30F6, 0x60


def trim(text: str) -> str:
    """Strip leading and trailing Unicode White_Space."""
    return text.strip(_WHITE_SPACE)


def is_blank(text: str) -> bool:
    """Empty after :func:`trim`."""
    return not trim(text)


def _lower_each(text: str) -> str:
    # Character by character: no context rule such as the Greek final sigma.
    return "".join(char.lower() for char in text)


def normalize_entry(text: str) -> str:
    """Lowercase, NFKC, lowercase again, katakana folded to hiragana (callers trim first)."""
    folded = _lower_each(unicodedata.normalize("NFKC", _lower_each(text)))
    return "".join(
        chr(ord(char) - _KANA_SHIFT) if _KATAKANA_FIRST <= ord(char) <= _KATAKANA_LAST else char for char in folded
    )
