"""``assembler assess`` and ``assembler assemble --assess``: exit codes, one-line errors, no partial output."""

from __future__ import annotations

import json
import os
import signal
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

import assembler.run.assess as run_module
from assembler.assess import assess_package
from assembler.cli import main
from assembler.errors import UsageError
from assembler.run.assess import run_assess

if TYPE_CHECKING:
    from tests.conftest import JsonlWriter, RecordFactory

DATA = Path(__file__).resolve().parents[2] / "data"
SAMPLE = DATA / "assess" / "sample.jsonl"
SAMPLE_EXPECTED = DATA / "assess" / "expected.jsonl"
CONFORMANCE = DATA / "conformance" / "lanes.jsonl"
CONFORMANCE_EXPECTED = DATA / "conformance" / "expected.jsonl"
NOW = "2026-04-09T12:00:00Z"
SECRET = "SECRET-MARKER-assess-never-log-me"
SUMMARY = "assessed 10 runs: strong 3, partial 6, weak 1; 0 rejected\n"


def run_cli(capsys: pytest.CaptureFixture[str], *args: str | Path) -> tuple[int, str, str]:
    status = main([str(arg) for arg in args])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def good(run_id: str) -> dict[str, Any]:
    return {"run_id": run_id, "raw_hits": [{"citation_path": f"ст. {len(run_id)}", "text": SECRET}]}


def bad(run_id: str) -> dict[str, Any]:
    return {"run_id": run_id, "raw_hits": [{"citation_path": 5, "text": SECRET}]}


BAD_RULE = "field raw_hits[0].citation_path: must be a string, got the integer 5"


def single_error(err: str) -> str:
    assert "Traceback" not in err
    assert err.count("\n") == 1, err
    assert err.startswith("assembler: error: ")
    return err


# --- assess: the sample, the clock ---------------------------------------------------------------


def test_sample_matches_the_committed_results(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    out = tmp_path / "results.jsonl"
    status, stdout, err = run_cli(capsys, "assess", SAMPLE, "--now", NOW, "-o", out)
    assert (status, stdout, err) == (0, "", SUMMARY)
    assert out.read_bytes() == SAMPLE_EXPECTED.read_bytes()


@pytest.mark.parametrize("now", [NOW, "2026-04-09T15:00:00+03:00", "2026-04-09T12:00:00", "2026-04-09T12:00:00.000Z"])
def test_now_in_any_iso_form_to_stdout(capsys: pytest.CaptureFixture[str], now: str) -> None:
    status, stdout, err = run_cli(capsys, "assess", SAMPLE, "--now", now)
    assert status == 0
    assert stdout == SAMPLE_EXPECTED.read_text(encoding="utf-8")
    assert err == SUMMARY


def test_without_now_the_clock_is_read_once(capsys: pytest.CaptureFixture[str]) -> None:
    status, stdout, _ = run_cli(capsys, "assess", SAMPLE)
    assert status == 0
    stamps = {json.loads(line)["evidence_assembly"]["assembled_at"] for line in stdout.splitlines()}
    assert len(stamps) == 1


def test_bad_now_is_a_usage_error(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    status, stdout, err = run_cli(capsys, "assess", SAMPLE, "--now", "yesterday", "-o", out)
    assert (status, stdout) == (2, "")
    assert single_error(err) == (
        "assembler: error: --now must be an ISO-8601 time such as 2026-04-09T12:00:00Z, got 'yesterday'\n"
    )
    assert os.listdir(tmp_path) == []


# --- assess: bad input stops the run, nothing left behind ----------------------------------------


def test_bad_record_exits_2_with_one_line_and_no_output(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, write_jsonl: JsonlWriter
) -> None:
    source = write_jsonl("runs.jsonl", [good("r1"), "", bad("r2"), good("r3")])
    out = tmp_path / "out.jsonl"
    status, stdout, err = run_cli(capsys, "assess", source, "-o", out)
    assert (status, stdout) == (2, "")
    assert single_error(err) == f"assembler: error: {source}:3: run_id 'r2' {BAD_RULE}\n"
    assert SECRET not in err
    assert sorted(os.listdir(tmp_path)) == ["runs.jsonl"]


def test_bad_record_after_written_chunks_leaves_no_output(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, write_jsonl: JsonlWriter
) -> None:
    lines = [good(f"r{i}") for i in range(9)]
    lines[6] = bad("r6")
    source = write_jsonl("runs.jsonl", lines)
    out = tmp_path / "out.jsonl"
    status, _, err = run_cli(capsys, "assess", source, "-o", out, "--chunk-size", "2")
    assert status == 2
    assert single_error(err) == f"assembler: error: {source}:7: run_id 'r6' {BAD_RULE}\n"
    assert sorted(os.listdir(tmp_path)) == ["runs.jsonl"]


@pytest.mark.parametrize(
    ("line", "message"),
    [
        (
            b'{"run_id": "x",',
            "invalid JSON at column 16: Expecting property name enclosed in double quotes; the line ends before the "
            "object is closed (cut short?)",
        ),
        (b'{"run_id": "\xff"}', "invalid UTF-8 at byte 12 of the line"),
        (b"[1]", "a run context must be a JSON object"),
        (b'{"raw_hits": []}', "field run_id: is required but missing"),
        (b'{"run_id": "r0"}', "run_id 'r0' field run_id: duplicate run_id (each run may appear once)"),
    ],
)
def test_each_kind_of_bad_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, write_jsonl: JsonlWriter, line: bytes, message: str
) -> None:
    source = write_jsonl("runs.jsonl", [good("r0"), line])
    status, stdout, err = run_cli(capsys, "assess", source, "-o", tmp_path / "out.jsonl")
    assert (status, stdout) == (2, "")
    assert single_error(err) == f"assembler: error: {source}:2: {message}\n"
    assert sorted(os.listdir(tmp_path)) == ["runs.jsonl"]


def test_skip_writes_good_results_and_rejects_untouched(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, write_jsonl: JsonlWriter
) -> None:
    bad_text = json.dumps(bad("r2"), ensure_ascii=False)
    source = write_jsonl("runs.jsonl", [good("r1"), bad_text, b"{oops", good("r1"), good("r4")])
    out = tmp_path / "out.jsonl"
    status, stdout, err = run_cli(capsys, "assess", source, "-o", out, "--on-error", "skip", "--now", NOW)
    assert (status, stdout) == (0, "")
    assert err == "assessed 2 runs: strong 0, partial 2, weak 0; 3 rejected\n"
    assert [json.loads(line)["run_id"] for line in out.read_text(encoding="utf-8").splitlines()] == ["r1", "r4"]
    errors = [json.loads(line) for line in (tmp_path / "out.jsonl.errors.jsonl").read_text("utf-8").splitlines()]
    assert [list(entry) for entry in errors] == [["file", "line", "run_id", "field", "rule", "record"]] * 3
    assert [(e["line"], e["run_id"], e["field"]) for e in errors] == [
        (2, "r2", "raw_hits[0].citation_path"),
        (3, None, ""),
        (4, "r1", "run_id"),
    ]
    assert errors[0]["record"] == bad_text
    assert errors[1]["record"] == "{oops"
    assert errors[2]["rule"] == "duplicate run_id (each run may appear once)"


def test_skip_with_an_explicit_errors_file(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, write_jsonl: JsonlWriter
) -> None:
    source = write_jsonl("runs.jsonl", [bad("r1")])
    rejected = tmp_path / "rejected.jsonl"
    status, stdout, _ = run_cli(capsys, "assess", source, "--on-error", "skip", "--errors", rejected)
    assert (status, stdout) == (0, "")
    assert json.loads(rejected.read_text("utf-8"))["run_id"] == "r1"


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("runs.parquet", "assess reads run contexts as JSON Lines, not Parquet: {path}"),
        ("missing.jsonl", "cannot read {path}: No such file or directory"),
    ],
)
def test_unreadable_inputs_are_usage_errors(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, name: str, message: str
) -> None:
    path = tmp_path / name
    status, stdout, err = run_cli(capsys, "assess", path, "-o", tmp_path / "out.jsonl")
    assert (status, stdout) == (2, "")
    assert single_error(err) == f"assembler: error: {message.format(path=path)}\n"
    assert not (tmp_path / "out.jsonl").exists()


def test_run_assess_api(tmp_path: Path, write_jsonl: JsonlWriter) -> None:
    source = write_jsonl("runs.jsonl", [good("a"), {"run_id": "b"}])
    out = tmp_path / "out.jsonl"
    summary = run_assess([str(source)], str(out), clock=lambda: datetime(2026, 1, 1, tzinfo=UTC))
    assert (summary.runs, summary.support, summary.rejected) == (2, {"strong": 0, "partial": 1, "weak": 1}, 0)
    assert '"assembled_at":"2026-01-01T00:00:00.000Z"' in out.read_text("utf-8")
    with pytest.raises(UsageError):
        run_assess([str(source)], str(out), on_error="skip")


def test_help_texts(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["assess", "--help"])
    text = capsys.readouterr().out
    assert "--now ISO8601" in text and "--on-error" in text and "--errors" in text
    with pytest.raises(SystemExit):
        main(["assemble", "--help"])
    assert "JSON Lines output only" in " ".join(capsys.readouterr().out.split())


# --- assemble --assess ---------------------------------------------------------------------------


def test_assemble_assess_keeps_package_bytes(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    status, _, _ = run_cli(capsys, "assemble", CONFORMANCE, "--assess", "-q", "-o", out)
    assert status == 0
    produced = out.read_text("utf-8").splitlines()
    expected = CONFORMANCE_EXPECTED.read_text("utf-8").splitlines()
    assert len(produced) == len(expected) == 5
    for line, plain in zip(produced, expected, strict=True):
        head = plain[:-1] + ',"assessment":'
        assert line.startswith(head)
        package_text = plain[plain.index(',"package":') + len(',"package":') : -1]
        assert json.loads(line[len(head) : -1]) == assess_package(package_text)


def test_assemble_without_assess_is_unchanged(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    assert run_cli(capsys, "assemble", CONFORMANCE, "-q", "-o", out)[0] == 0
    assert out.read_bytes() == CONFORMANCE_EXPECTED.read_bytes()


@pytest.mark.parametrize("flags", [["-o", "{dir}/out.parquet"], ["--format", "parquet", "-o", "{dir}/out.jsonl"]])
def test_assemble_assess_with_parquet_is_a_usage_error(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, flags: list[str]
) -> None:
    args = [flag.format(dir=tmp_path) for flag in flags]
    status, stdout, err = run_cli(capsys, "assemble", CONFORMANCE, "--assess", *args)
    assert (status, stdout) == (2, "")
    assert single_error(err) == (
        "assembler: error: --assess writes JSON Lines only; it cannot be combined with Parquet output\n"
    )
    assert os.listdir(tmp_path) == []


def test_assemble_assess_skips_bad_records(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, write_jsonl: JsonlWriter, make_record: RecordFactory
) -> None:
    broken = make_record("bad")
    broken["lanes"]["passages"][0]["score"] = "high"
    source = write_jsonl("in.jsonl", [make_record("a"), broken, make_record("b")])
    out = tmp_path / "out.jsonl"
    status, _, _ = run_cli(capsys, "assemble", source, "--assess", "-q", "--on-error", "skip", "-o", out)
    assert status == 0
    rows = [json.loads(line) for line in out.read_text("utf-8").splitlines()]
    assert [row["query_id"] for row in rows] == ["a", "b"]
    assert all(row["assessment"]["support_level"] == "partial" for row in rows)
    assert (tmp_path / "out.jsonl.errors.jsonl").exists()


def test_a_ctrl_c_while_a_chunk_is_assessed_is_raised_once_it_is_done(
    tmp_path: Path, write_jsonl: JsonlWriter, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As in ``assemble``: held while Polars assesses the chunk, then delivered; nothing is left."""
    finished: list[int] = []
    real = run_module.assess_parsed

    def interrupted(chunk: Any, *args: Any) -> Any:
        os.kill(os.getpid(), signal.SIGINT)
        result = real(chunk, *args)
        finished.append(len(chunk))
        return result

    monkeypatch.setattr(run_module, "assess_parsed", interrupted)
    source = write_jsonl("runs.jsonl", [good("a"), good("b")])
    out = tmp_path / "out.jsonl"
    with pytest.raises(KeyboardInterrupt):
        run_assess([str(source)], str(out))
    assert finished == [2]
    assert not out.exists()
