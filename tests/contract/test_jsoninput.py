"""The guarded JSON reader's syntax errors (assembler/contract/jsoninput.py): whole sentences with
the position, saying when a line was cut short; the same text for a lane-dump line and for every
other input."""

from __future__ import annotations

from pathlib import Path

import pytest

from assembler.contract.jsoninput import read_json
from assembler.contract.wire import ShapeError
from assembler.run.io import line_record

LANE_LINE = (Path(__file__).resolve().parents[2] / "data" / "conformance" / "lanes.jsonl").read_text("utf-8")
LANE_LINE = LANE_LINE.split("\n")[0]
UNCLOSED = "Unterminated string starting there: the line ends before its closing quote (cut short?)"
EXTRA = "Extra data after the JSON value (one JSON value per line)"


def _rule(text: str) -> str:
    with pytest.raises(ShapeError) as caught:
        read_json(text)
    return caught.value.rule


@pytest.mark.parametrize(
    ("text", "rule"),
    [
        ('{"query_id": "q1", "context": "co', f"invalid JSON at column 31: {UNCLOSED}"),
        ('"abc', f"invalid JSON at column 1: {UNCLOSED}"),
        (
            '{"query_id": "q1", "weight": 0.',
            "invalid JSON at column 31: Expecting ',' delimiter; the line ends before the object is closed "
            "(cut short?)",
        ),
        (
            '[{"a": 1}, 2',
            "invalid JSON at column 13: Expecting ',' delimiter; the line ends before the array is closed (cut short?)",
        ),
        (
            '{"a": 1, "b":  ',
            "invalid JSON at column 16: Expecting value; the line ends before the object is closed (cut short?)",
        ),
        ("[1, 2] ]", f"invalid JSON at column 8: {EXTRA}"),
        ('{"a": 1}{"b": 2}', f"invalid JSON at column 9: {EXTRA}"),
        (
            '{"a": "x\x01"}',
            "invalid JSON at column 9: Invalid control character in a string (JSON writes it escaped, as \\n or "
            "\\u001b)",
        ),
        ("not json", "invalid JSON at column 1: Expecting value"),
        ("", "invalid JSON at column 1: Expecting value: the text is empty"),
        ('{"a" 1}', "invalid JSON at column 6: Expecting ':' delimiter"),
        (
            '{"assembler_policy_config": 1,\n "policy": {',
            "invalid JSON at line 2 column 13: Expecting property name enclosed in double quotes; the text ends before "
            "the object is closed (cut short?)",
        ),
    ],
)
def test_a_syntax_error_is_a_whole_sentence_with_its_column(text: str, rule: str) -> None:
    assert _rule(text) == rule
    if "\n" not in text:  # a lane-dump line reads the same words
        error = line_record("in.jsonl", 3, text.encode("utf-8")).error
        assert error is not None and error.rule == rule


def test_no_cut_of_a_real_line_ends_its_message_mid_sentence() -> None:
    """Every prefix of a lane-dump line: the rule names the column and ends as a sentence, never on
    the parser's dangling ``starting at``; a prefix that stops inside the record says it may be cut."""
    for end in range(1, len(LANE_LINE)):
        error = line_record("in.jsonl", 1, LANE_LINE[:end].encode("utf-8")).error
        assert error is not None
        assert error.rule.startswith("invalid JSON at column ")
        assert not error.rule.endswith(" at"), error.rule
        assert error.rule.endswith("(cut short?)"), (end, error.rule)
