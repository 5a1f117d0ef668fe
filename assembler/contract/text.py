"""Text rules of the contract: ``normalize_entry`` (near-duplicates, section 6; the evaluation's
matching), its column form ``normalize_entries`` and the Rust ``str::trim`` used before it.

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
import sys
import threading
import unicodedata
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from assembler.contract.arrow import sorted_unique

__all__ = ["is_blank", "normalize_entries", "normalize_entry", "trim"]

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


# --- column form -------------------------------------------------------------------------------
#
# NFKC of a string equals the NFKC of its pieces, concatenated, wherever a piece starts at a
# normalization boundary: a code point whose full compatibility decomposition begins with a
# starter (canonical combining class 0) that no canonical composition attaches to the code
# point before it. Lowercasing each code point, the second lowercasing and the katakana fold are
# per code point anyway. So a text whose every code point, once lowercased, is one such code
# point and normalizes alone to one code point, normalizes to the concatenation of its code
# points' ``normalize_entry``. ``normalize_entries`` keeps that per code point in a table, filled
# from ``normalize_entry`` itself as code points are met; any other text goes through
# ``normalize_entry`` whole. The rule has one definition, ``normalize_entry``.

# Starters that a canonical composition attaches to the code point before them: the second
# halves of two-code-point canonical decompositions with combining class 0, and the Hangul vowel
# and trailing consonant jamo. The same in Unicode 14.0, 15.0 and 15.1 (Python 3.11 to 3.13);
# other versions compute it (tests/contract/test_text.py checks the list against the tables).
_BACKWARD_STARTERS_VERSIONS = ("14.0.0", "15.0.0", "15.1.0")
_BACKWARD_STARTERS_LISTED = (
    0x09BE, 0x09D7, 0x0B3E, 0x0B56, 0x0B57, 0x0BBE, 0x0BD7, 0x0CC2, 0x0CD5, 0x0CD6, 0x0D3E, 0x0D57, 0x0DCF,
    0x0DDF, 0x0FB5, 0x0FB7, 0x102E, 0x1B35, 0x11127, 0x1133E, 0x11357, 0x114B0, 0x114BA, 0x114BD, 0x115AF,
    0x11930,
)  # fmt: skip
_HANGUL_JAMO_V = range(0x1161, 0x1176)
_HANGUL_JAMO_T = range(0x11A8, 0x11C3)


def _computed_backward_starters() -> frozenset[int]:
    """Code points of combining class 0 that a canonical composition attaches to the one before,
    from ``unicodedata`` (every code point's decomposition: about a third of a second)."""
    seconds = set()
    for code in range(sys.maxunicode + 1):
        mapping = unicodedata.decomposition(chr(code))
        if mapping and not mapping.startswith("<"):
            parts = mapping.split()
            if len(parts) == 2 and unicodedata.combining(chr(int(parts[1], 16))) == 0:
                seconds.add(int(parts[1], 16))
    return frozenset(seconds.union(_HANGUL_JAMO_V, _HANGUL_JAMO_T))


_BACKWARD_STARTERS: list[frozenset[int]] = []
_ONE_TEXT = 0xFFFFFFFF  # table mark: a text holding this code point is normalized whole
_UNSEEN = 0  # table mark: not looked at yet
# The marks as read after subtracting the 1 (both above any code point).
_ONE_TEXT_READ = np.uint32(_ONE_TEXT - 1)
_UNSEEN_READ = np.uint32(2**32 - 1)
# Per code point: 1 + its normalize_entry (one code point), _ONE_TEXT or _UNSEEN. Zero pages until
# written: a process touches the few pages of the scripts it meets.
_POINT_TABLE = np.zeros(sys.maxunicode + 1, dtype=np.uint32)
_FILL_LOCK = threading.Lock()


def _backward_starters() -> frozenset[int]:
    if not _BACKWARD_STARTERS:
        if unicodedata.unidata_version in _BACKWARD_STARTERS_VERSIONS:
            listed = frozenset(_BACKWARD_STARTERS_LISTED).union(_HANGUL_JAMO_V, _HANGUL_JAMO_T)
            _BACKWARD_STARTERS.append(listed)
        else:
            _BACKWARD_STARTERS.append(_computed_backward_starters())
    return _BACKWARD_STARTERS[0]


def _table_entry(code: int) -> int:
    """1 + ``normalize_entry(chr(code))`` where that is one code point and ``code``, lowercased,
    starts at a normalization boundary; else ``_ONE_TEXT``."""
    if 0xD800 <= code <= 0xDFFF:
        return _ONE_TEXT  # a lone surrogate: its text takes the string path (which cannot encode it)
    lowered = _lower_each(chr(code))
    if len(lowered) != 1:
        return _ONE_TEXT
    lead = unicodedata.normalize("NFKD", lowered)[0]
    if unicodedata.combining(lead) or ord(lead) in _backward_starters():
        return _ONE_TEXT
    normalized = normalize_entry(chr(code))
    return ord(normalized) + 1 if len(normalized) == 1 else _ONE_TEXT


def _fill(codes: npt.NDArray[np.uint32]) -> None:
    with _FILL_LOCK:
        for code in codes.tolist():
            if _POINT_TABLE[code] == _UNSEEN:
                _POINT_TABLE[code] = _table_entry(code)


def normalize_entries(texts: Sequence[str]) -> tuple[npt.NDArray[np.uint32], npt.NDArray[np.int64]]:
    """Every text's :func:`normalize_entry` as code points, all texts in turn in one array, and
    each normalized text's length: ``(points, lengths)``.

    Equal to ``normalize_entry`` text by text (section "column form" above); about eight times
    faster on Japanese text, since no text is normalized alone unless it holds a code point the
    table cannot take (a combining mark after its base, a ligature, a lone surrogate, ...).
    """
    lengths = np.fromiter(map(len, texts), dtype=np.int64, count=len(texts))
    joined = "".join(texts)
    if joined.isascii():
        return np.frombuffer(joined.lower().encode("ascii"), dtype=np.uint8).astype(np.uint32), lengths
    # The string's code points (np.array copies them as UTF-32; trailing NULs included).
    raw = np.array(joined).reshape(1).view(np.uint32)[: len(joined)]
    points = _POINT_TABLE.take(raw)
    points -= 1  # _UNSEEN_READ and _ONE_TEXT_READ are above any code point
    if int(points.max()) <= sys.maxunicode:
        return points, lengths
    unseen = points == _UNSEEN_READ
    if unseen.any():
        _fill(sorted_unique(raw[unseen]))
        points = _POINT_TABLE.take(raw)
        points -= 1
    whole = np.flatnonzero(points == _ONE_TEXT_READ)
    if whole.size == 0:
        return points, lengths
    # Texts holding such a code point: normalize_entry, spliced in.
    ends = np.cumsum(lengths)
    pieces: list[npt.NDArray[np.uint32]] = []
    start = 0
    lengths = lengths.copy()
    for i in sorted_unique(np.searchsorted(ends, whole, side="right")).tolist():
        pieces.append(points[start : ends[i] - lengths[i]])
        own = np.frombuffer(normalize_entry(texts[i]).encode("utf-32-le"), dtype=np.uint32)
        pieces.append(own)
        start = int(ends[i])
        lengths[i] = own.size
    pieces.append(points[start:])
    return np.concatenate(pieces), lengths
