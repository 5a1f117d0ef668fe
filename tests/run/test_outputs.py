"""The JSON Lines output of packages (assembler/run/outputs.py)."""

from __future__ import annotations

import polars as pl
from hypothesis import given
from hypothesis import strategies as st

from assembler.contract.jsontext import escape_string
from assembler.errors import counted
from assembler.run.batch import BudgetNote
from assembler.run.outputs import RunSummary, output_lines, package_line

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


def test_counts_of_one_are_said_in_the_singular() -> None:
    assert [counted(n, "query", "queries") for n in (0, 1, 2)] == ["0 queries", "1 query", "2 queries"]
    assert counted(1, "rejected record") == "1 rejected record"
    line = RunSummary(queries=1, items=1, search_limit_cuts=1, rejected=1).line()
    assert line == "assembled 1 query: 1 item admitted, omitted 0, 1 search-limit cut, 1 rejected"


def test_budget_notes_add_up_per_key_and_per_field() -> None:
    summary = RunSummary()
    summary.add_budget_notes([BudgetNote(("max_item",), ("max_bytes",)), BudgetNote(("max_item", "maxbytes"), ())])
    summary.add_budget_notes([BudgetNote((), ("max_bytes", "max_items"))])
    assert summary.ignored_budget_keys == {"max_item": 2, "maxbytes": 1}
    assert summary.clamped_budgets == {"max_bytes": 2, "max_items": 1}
    assert summary.warnings()[1:] == [
        "budget key 'maxbytes' is not a budget field (ignored in 1 record; fields: max_items, max_bytes, max_tokens)",
        "budget max_items above the ceiling 1000 clamped to it in 1 record",
        "budget max_bytes above the ceiling 1048576 clamped to it in 2 records",
    ]
    assert RunSummary().warnings() == []
