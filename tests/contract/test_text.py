"""``normalize_entries`` (the column form) equals ``normalize_entry`` text by text."""

from __future__ import annotations

import functools
import sys
import unicodedata
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from assembler.contract import text
from assembler.contract.text import normalize_entries, normalize_entry


def split(points: np.ndarray, lengths: np.ndarray) -> list[str]:
    out, start = [], 0
    for length in lengths.tolist():
        out.append(points[start : start + length].tobytes().decode("utf-32-le"))
        start += length
    return out


def column_form(texts: list[str]) -> list[str]:
    points, lengths = normalize_entries(texts)
    assert points.dtype == np.uint32 and lengths.dtype == np.int64
    assert int(lengths.sum()) == points.size
    return split(points, lengths)


# Code points where normalization is not per code point: combining marks after a base, Hangul
# jamo that compose, kana voicing marks (combining and half-width), Indic vowel signs that
# compose with the vowel before, ligatures and squared words that expand, final sigma, dotted
# capital I (two code points lowercased), full-width and half-width forms, NUL.
TRICKY = (
    "aeAE \u0301\u0308\u0323\u0345ΣσςİIıﬁﬃ㌔㍿…½ⅫＡｚ１ｶｷﾞﾟゔヴかが\u3099\u309aカ\u309bｱイヶ"
    "ᄀᄁ\u1161\u1162\u11a8\u11a9가각ㄱㅏ\u09c7\u09be\u09d7\u0b47\u0b3e\u0b56\u0bc6\u0bbe\u0cbf\u0cd5"
    "\u0d46\u0d3e\u0dd9\u0dcf\u1025\u102e\u1b05\u1b35\u0f71\u0f72\u0f73\u0344\u2126\u212b\x00日本"
)


@settings(max_examples=400)
@given(st.lists(st.text(alphabet=st.sampled_from(TRICKY), max_size=12) | st.text(max_size=12), max_size=8))
def test_the_column_form_equals_normalize_entry_text_by_text(texts: list[str]) -> None:
    assert column_form(texts) == [normalize_entry(t) for t in texts]


@pytest.mark.parametrize(
    "texts",
    [
        [],
        [""],
        ["", "", ""],
        ["ABC", "", "x"],  # ASCII only: lowercase
        ["a\x00", "\x00", "\x00\x00"],  # trailing NULs are code points like any other
        ["ｱｯﾌﾟﾙ", "リンゴ", "ΟΔΟΣ", "İstanbul", "ﬁne…", "か\u3099", "가\u11a8", "ㄱㅏ", "日本語"],
        ["plain", "é", "e\u0301", "plain"],  # the decomposed text takes the string path, the others not
    ],
)
def test_the_column_form_of_edge_cases(texts: list[str]) -> None:
    assert column_form(texts) == [normalize_entry(t) for t in texts]


def test_a_lone_surrogate_fails_as_the_string_path_does() -> None:
    """Bigrams are taken from UTF-32; a lone surrogate has none, so the column form refuses it too."""
    with pytest.raises(UnicodeEncodeError):
        normalize_entry("a\ud800").encode("utf-32-le")
    with pytest.raises(UnicodeEncodeError):
        normalize_entries(["ok", "a\ud800", "日本"])


@functools.cache
def composing_pairs() -> dict[int, set[int]]:
    """Second code point (combining class 0) -> first code points of the two-code-point canonical
    decompositions that end with it."""
    firsts: dict[int, set[int]] = {}
    for code in range(sys.maxunicode + 1):
        mapping = unicodedata.decomposition(chr(code))
        if mapping and not mapping.startswith("<"):
            parts = [int(part, 16) for part in mapping.split()]
            if len(parts) == 2 and unicodedata.combining(chr(parts[1])) == 0:
                firsts.setdefault(parts[1], set()).add(parts[0])
    return firsts


def test_the_listed_backward_starters_are_unicodes() -> None:
    """The starters that compose with the code point before them, listed for Unicode 14.0 to
    15.1, equal the ones computed from this Python's tables (and the lazy fallback computes them)."""
    computed = set(composing_pairs()) | set(range(0x1161, 0x1176)) | set(range(0x11A8, 0x11C3))
    assert text._computed_backward_starters() == computed
    if unicodedata.unidata_version in text._BACKWARD_STARTERS_VERSIONS:
        listed = set(text._BACKWARD_STARTERS_LISTED) | set(range(0x1161, 0x1176)) | set(range(0x11A8, 0x11C3))
        assert listed == computed


def test_every_code_point_the_table_takes_keeps_its_normalization_next_to_composing_starters() -> None:
    """Every assigned code point the table takes, each between starters that begin canonical
    compositions (Latin, kana, Hangul jamo and syllables, Indic vowels): the column form of the
    whole string (the table's values, concatenated) equals ``normalize_entry`` of it."""
    assigned = [
        code
        for code in range(sys.maxunicode + 1)
        if code != 0x03A3 and unicodedata.category(chr(code)) not in ("Cn", "Co", "Cs")
    ]  # capital sigma aside: it makes normalize_entry lowercase code point by code point (slow)
    column_form([chr(code) for code in assigned])  # fills the table
    table = text._POINT_TABLE
    taken = [code for code in assigned if table[code] != text._ONE_TEXT]
    assert len(taken) > 100_000
    probes = {"a", "か", "ᄀ", "가", "\u0915"}  # Latin, kana, Hangul L jamo and LV syllable, Devanagari
    probes |= {chr(min(firsts)) for firsts in composing_pairs().values()}  # one per composing starter
    body = "".join(chr(code) for code in taken)
    for probe in sorted(probes):
        if table[ord(probe)] == text._ONE_TEXT:
            continue
        mixed = probe + probe.join(body) + probe
        assert column_form([mixed]) == [normalize_entry(mixed)], hex(ord(probe))


def test_threads_filling_the_table_at_once_agree() -> None:
    """Code points first met by several threads at once: each writes the same entry."""
    fresh = ["".join(chr(code) for code in range(start, start + 40)) for start in range(0x13A0, 0x13F0, 8)]
    expected = [normalize_entry(t) for t in fresh]
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda _: column_form(fresh), range(8)))
    assert all(result == expected for result in results)
