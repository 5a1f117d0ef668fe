"""The exception tree and its documentation (docs/errors.md)."""

from __future__ import annotations

import doctest
from pathlib import Path

import pytest

from assembler import AssemblerError, InputError, RecordError, UsageError, assemble_batch
from assembler.assess import RunRecordError
from assembler.cli import main
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
