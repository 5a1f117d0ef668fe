"""The exception tree and its documentation (docs/errors.md)."""

from __future__ import annotations

import doctest
import os
from pathlib import Path

import pytest

from assembler import AssemblerError, InputError, RecordError, UsageError, assemble_batch
from assembler.assess import RunRecordError
from assembler.cli import main
from assembler.errors import MESSAGE_LIMIT, PATH_LIMIT, one_line, shown_path
from assembler.evaluate import EvaluateError

DOCS = Path(__file__).resolve().parent.parent / "docs"


def test_every_deliberate_error_is_an_assembler_error_with_exit_status_2() -> None:
    for kind in (UsageError, InputError, EvaluateError):
        assert issubclass(kind, AssemblerError)
        assert kind.exit_status == 2


def test_the_documented_example_runs() -> None:
    failures, tried = doctest.testfile(str(DOCS / "errors.md"), module_relative=False)
    assert tried > 0 and failures == 0


def test_a_run_record_error_differs_only_in_the_name_of_its_id() -> None:
    error = RecordError("in.jsonl", 3, "r7", "raw_hits", "must be an array")
    run_error = RunRecordError.of(error)
    assert str(run_error) == str(error).replace("query_id 'r7'", "run_id 'r7'")
    assert run_error.as_dict() == {
        "file": "in.jsonl",
        "line": 3,
        "run_id": "r7",
        "field": "raw_hits",
        "rule": "must be an array",
    }


def test_the_duplicate_rule_has_one_wording_in_the_api_and_the_runs() -> None:
    record = {"query_id": "q", "context": "c", "request": {"origins": []}, "lanes": {}}
    with pytest.raises(InputError, match=r"duplicate query_id \(each query may appear once in the input\)"):
        assemble_batch([record, record])


def test_the_command_line_exits_with_the_errors_status(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["assemble", str(tmp_path / "missing.jsonl"), "-o", str(tmp_path / "out.jsonl")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("assembler: error: ") and "Traceback" not in err


def test_a_file_name_is_shown_with_its_control_characters_and_undecodable_bytes_escaped() -> None:
    assert shown_path("in\n\x1b[2J.jsonl") == "in\\x0a\\x1b[2J.jsonl"
    assert shown_path(os.fsdecode(b"bad\xff.jsonl")) == "bad\\xff.jsonl"
    assert shown_path(b"raw\xfe\n") == "raw\\xfe\\x0a"
    assert shown_path("\u202egnp.exe") == "\\u202egnp.exe"  # a bidirectional override reorders the line
    assert shown_path("a\ud800b") == "a\\ud800b"  # a surrogate no file system byte explains


def test_a_huge_file_name_is_cut_to_the_path_limit() -> None:
    text = shown_path("d/" + "n" * 10_000)
    assert text == "d/" + "n" * (PATH_LIMIT - 2) + f"…({10_002 - PATH_LIMIT} more)"


def test_one_line_escapes_every_control_character_and_bounds_the_length() -> None:
    text = one_line("first\nassembler: error: forged\r\x1b[31m" + "x" * 100_000)
    assert "\n" not in text and "\r" not in text and "\x1b" not in text
    assert len(text) <= MESSAGE_LIMIT + len("…(100000 more)")
    assert text.startswith("first\\x0aassembler: error: forged\\x0d\\x1b[31m")


def test_a_record_error_shows_a_hostile_file_name_on_one_line() -> None:
    error = RecordError("in\n\x1b[2J" + "f" * 500, 3, "q\n1", "lanes", "must be an object")
    text = str(error)
    assert "\n" not in text and "\x1b" not in text
    assert text.startswith("in\\x0a\\x1b[2J") and "…(" in text and "query_id 'q\\x0a1'" in text


@pytest.mark.parametrize(
    "message",
    ["two\nlines", "\x1b]0;title\x07", "x" * 50_000, "bad\x00byte"],
    ids=["newline", "terminal-title", "huge", "nul"],
)
def test_no_error_line_of_the_command_holds_a_control_character_or_is_unbounded(
    message: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # The last line of defence: whatever a caller puts in an error, the command prints one bounded line.
    def fail(*args: object, **kwargs: object) -> None:
        raise UsageError(message)

    monkeypatch.setattr("assembler.cli.assemble.run_assembly", fail)
    assert main(["assemble", str(DOCS.parent / "data" / "conformance" / "lanes.jsonl"), "-o", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("assembler: error: ")
    assert not any(ord(char) < 0x20 or ord(char) == 0x7F for char in err[:-1])
    assert len(err) < MESSAGE_LIMIT + 100
