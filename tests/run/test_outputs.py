"""The JSON Lines output of packages (assembler/run/outputs.py)."""

from __future__ import annotations

import polars as pl
from hypothesis import given
from hypothesis import strategies as st

from assembler.contract.jsontext import escape_string
from assembler.run.outputs import output_lines, package_line

# Query ids are any text a record may hold (no lone surrogates: the contract refuses them);
# package texts are JSON, so they hold no newline.
ids = st.text(st.characters(blacklist_categories=("Cs",)))
packages = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\n\r"))


def _plain_line(query_id: str, package: str) -> str:
    return '{"query_id":' + escape_string(query_id) + ',"package":' + package + "}\n"


@given(st.lists(st.tuples(ids, packages), max_size=20))
def test_output_lines_are_the_plain_lines_encoded(rows: list[tuple[str, str]]) -> None:
    query_ids = [query_id for query_id, _ in rows]
    texts = pl.Series([package for _, package in rows], dtype=pl.String)
    expected = "".join(_plain_line(query_id, package) for query_id, package in rows)
    assert output_lines(query_ids, texts) == expected.encode("utf-8")


def test_output_lines_of_a_sliced_column_hold_only_its_rows() -> None:
    """The Arrow buffer of a slice starts inside its parent's: only the slice's bytes are written."""
    texts = pl.Series(["{}", '{"a":"é"}', "[]"], dtype=pl.String).slice(1, 1)
    assert output_lines(["q2"], texts) == '{"query_id":"q2","package":{"a":"é"}}\n'.encode()


def test_package_line_is_one_output_line() -> None:
    assert package_line('a"\u2028', "{}") == _plain_line('a"\u2028', "{}")
