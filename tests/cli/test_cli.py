"""The command line: exit statuses, one-line errors, no partial output, skip/errors files, formats."""

from __future__ import annotations

import argparse
import io
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow.parquet as pq
import pytest

import assembler
from assembler.cli import main
from assembler.selection import policies

if TYPE_CHECKING:
    from tests.conftest import JsonlWriter, Line, RecordFactory

DATA = Path(__file__).resolve().parent.parent.parent / "data"
CONFORMANCE = DATA / "conformance" / "lanes.jsonl"
EXPECTED = DATA / "conformance" / "expected.jsonl"
SAMPLE = DATA / "sample" / "lanes.jsonl"
ASSEMBLER = Path(sys.executable).parent / "assembler"
SECRET = "SECRET-MARKER-5c1d-never-log-me"
SCORE_RULE = "must be a number, got a string"


def run_cli(capsys: pytest.CaptureFixture[str], *args: str | Path) -> tuple[int, str, str]:
    """``assembler ARGS`` in-process: (exit status, stdout, stderr)."""
    status = main([str(arg) for arg in args])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def bad_record(make_record: RecordFactory, query_id: str, text: str = "fine") -> dict[str, Any]:
    """A record rejected for its string score (field ``lanes.passages[0].score``)."""
    record = make_record(query_id)
    record["lanes"]["passages"][0].update(score="high", text=text)
    return record


def error_line(path: Path, line: int, query_id: str, field: str, rule: str) -> str:
    return f"assembler: error: {path}:{line}: query_id {query_id!r} field {field}: {rule}\n"


def assert_single_error_line(err: str, expected: str) -> None:
    assert "Traceback" not in err
    assert err.count("\n") == 1, err
    assert err == expected


def packages(text: str) -> list[dict[str, Any]]:
    return [json.loads(line)["package"] for line in text.splitlines()]


# --- bad input stops the run: exit 2, one line, nothing left behind -----------------------------


def test_bad_first_record_exits_2_with_one_line_and_no_output(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, write_jsonl: JsonlWriter, make_record: RecordFactory
) -> None:
    source = write_jsonl("in.jsonl", [bad_record(make_record, "x"), make_record("ok")])
    out = tmp_path / "out.jsonl"
    status, stdout, err = run_cli(capsys, "assemble", source, "-o", out)
    assert status == 2
    assert stdout == ""
    assert_single_error_line(err, error_line(source, 1, "x", "lanes.passages[0].score", SCORE_RULE))
    assert not out.exists()
    assert os.listdir(tmp_path) == ["in.jsonl"]


@pytest.mark.parametrize(("output", "count", "bad"), [("out.jsonl", 9, 6), ("out.parquet", 5, 3)])
def test_bad_record_after_written_chunks_leaves_no_output(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    write_jsonl: JsonlWriter,
    make_record: RecordFactory,
    output: str,
    count: int,
    bad: int,
) -> None:
    lines: list[Line] = [make_record(f"q{i}") for i in range(count)]
    lines[bad] = bad_record(make_record, f"q{bad}")
    source = write_jsonl("in.jsonl", lines)
    status, _, err = run_cli(capsys, "assemble", source, "-o", tmp_path / output, "--chunk-size", "2")
    assert status == 2
    assert_single_error_line(err, error_line(source, bad + 1, f"q{bad}", "lanes.passages[0].score", SCORE_RULE))
    assert os.listdir(tmp_path) == ["in.jsonl"]  # no output, no temporary file


def test_existing_output_survives_a_failed_run(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, write_jsonl: JsonlWriter, make_record: RecordFactory
) -> None:
    source = write_jsonl("in.jsonl", [make_record("a"), bad_record(make_record, "b")])
    out = tmp_path / "out.jsonl"
    out.write_text("previous run\n")
    status, _, _ = run_cli(capsys, "assemble", source, "-o", out, "--chunk-size", "1")
    assert status == 2
    assert out.read_text() == "previous run\n"
    assert sorted(os.listdir(tmp_path)) == ["in.jsonl", "out.jsonl"]


def test_invalid_utf8_line_exits_2_naming_the_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, write_jsonl: JsonlWriter, make_record: RecordFactory
) -> None:
    source = write_jsonl("in.jsonl", [make_record("a"), b'{"query_id":"b\xff"}'])
    status, _, err = run_cli(capsys, "assemble", source, "-o", tmp_path / "out.jsonl")
    assert status == 2
    assert err.startswith(f"assembler: error: {source}:2:")
    assert "invalid UTF-8" in err
    assert "query_id" not in err
    assert "Traceback" not in err
    assert os.listdir(tmp_path) == ["in.jsonl"]


def test_secret_candidate_text_never_reaches_an_error_message(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, write_jsonl: JsonlWriter, make_record: RecordFactory
) -> None:
    source = write_jsonl("in.jsonl", [make_record("a"), bad_record(make_record, "b", text=SECRET)])
    status, _, err = run_cli(capsys, "assemble", source, "-o", tmp_path / "out.jsonl")
    assert status == 2
    assert "lanes.passages[0].score" in err
    assert SECRET not in err

    errors = tmp_path / "rejects.jsonl"
    status, _, err = run_cli(
        capsys, "assemble", source, "-o", tmp_path / "out.jsonl", "--on-error", "skip", "--errors", errors
    )
    assert status == 0
    assert SECRET not in err
    (entry,) = [json.loads(line) for line in errors.read_text().splitlines()]
    assert SECRET in entry["record"]
    assert all(SECRET not in str(entry[key]) for key in ("file", "line", "query_id", "field", "rule"))


# --- usage errors ----------------------------------------------------------------------------------


def test_missing_input_file_exits_2_with_a_clear_message(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    missing = tmp_path / "missing.jsonl"
    status, _, err = run_cli(capsys, "assemble", missing, "-o", tmp_path / "out.jsonl")
    assert status == 2
    assert err == f"assembler: error: cannot read {missing}: No such file or directory\n"
    assert os.listdir(tmp_path) == []


def test_unknown_policy_exits_2(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    status, _, err = run_cli(capsys, "assemble", CONFORMANCE, "-o", tmp_path / "out.jsonl", "--policy", "greedy")
    assert status == 2
    assert err.startswith("assembler: error: unknown policy 'greedy'")
    assert "Traceback" not in err
    assert os.listdir(tmp_path) == []


def test_parquet_to_stdout_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    status, stdout, err = run_cli(capsys, "assemble", CONFORMANCE, "--format", "parquet")
    assert status == 2
    assert stdout == ""
    assert "needs -o FILE" in err


@pytest.mark.parametrize("flags", [["--chunk-size", "0"], ["--max-items", "-1"], ["--on-error", "ignore"]])
def test_bad_flag_values_exit_2(capsys: pytest.CaptureFixture[str], tmp_path: Path, flags: list[str]) -> None:
    with pytest.raises(SystemExit) as caught:
        main(["assemble", str(CONFORMANCE), "-o", str(tmp_path / "out.jsonl"), *flags])
    assert caught.value.code == 2
    assert "Traceback" not in capsys.readouterr().err
    assert os.listdir(tmp_path) == []


def test_output_that_is_a_folder_exits_2(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    folder = tmp_path / "out"
    folder.mkdir()
    try:
        status, _, err = run_cli(capsys, "assemble", CONFORMANCE, "-o", folder)
    except OSError as exc:
        raise AssertionError(f"uncaught {exc!r}") from exc
    assert status == 2
    assert err.startswith("assembler: error:")
    assert os.listdir(tmp_path) == ["out"]
    assert os.listdir(folder) == []


# --- --on-error skip -------------------------------------------------------------------------------


def skip_input(write_jsonl: JsonlWriter, make_record: RecordFactory) -> Path:
    """8 lines: 5 good, 3 rejected (bad score at line 2, invalid JSON at line 5, duplicate id at line 7)."""
    lines: list[Line] = [make_record(f"q{i}") for i in range(8)]
    lines[1] = bad_record(make_record, "q1")
    lines[4] = '{"query_id": "q4", '
    lines[6] = make_record("q0")
    return write_jsonl("in.jsonl", lines)


def test_skip_writes_good_records_and_default_errors_file(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, write_jsonl: JsonlWriter, make_record: RecordFactory
) -> None:
    source = skip_input(write_jsonl, make_record)
    texts = source.read_text().splitlines()
    out = tmp_path / "out.jsonl"
    status, _, err = run_cli(capsys, "assemble", source, "-o", out, "--on-error", "skip", "--chunk-size", "2")
    assert status == 0
    default_errors = tmp_path / "out.jsonl.errors.jsonl"
    assert sorted(os.listdir(tmp_path)) == ["in.jsonl", "out.jsonl", "out.jsonl.errors.jsonl"]
    good = [json.loads(line)["query_id"] for line in out.read_text().splitlines()]
    assert good == ["q0", "q2", "q3", "q5", "q7"]
    rejected = [json.loads(line) for line in default_errors.read_text().splitlines()]
    assert len(good) + len(rejected) == len(texts)
    assert [(r["file"], r["line"], r["query_id"], r["field"]) for r in rejected] == [
        (str(source), 2, "q1", "lanes.passages[0].score"),
        (str(source), 5, None, ""),
        (str(source), 7, "q0", "query_id"),
    ]
    assert [r["rule"].split(" ")[0] for r in rejected] == ["must", "invalid", "duplicate"]
    assert [r["record"] for r in rejected] == [texts[1], texts[4], texts[6]]
    assert "assembled 5 queries" in err
    assert "3 rejected" in err
    assert f"3 rejected records written to {default_errors}" in err


def test_skip_honours_errors_path(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, write_jsonl: JsonlWriter, make_record: RecordFactory
) -> None:
    source = skip_input(write_jsonl, make_record)
    errors = tmp_path / "elsewhere.jsonl"
    out = tmp_path / "out.jsonl"
    status, _, _ = run_cli(capsys, "assemble", source, "-o", out, "--on-error", "skip", "--errors", errors)
    assert status == 0
    assert sorted(os.listdir(tmp_path)) == ["elsewhere.jsonl", "in.jsonl", "out.jsonl"]
    assert len(errors.read_text().splitlines()) == 3
    assert len(out.read_text().splitlines()) == 5


def test_skip_with_every_record_good_leaves_an_empty_errors_file(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    out = tmp_path / "out.jsonl"
    status, _, _ = run_cli(capsys, "assemble", CONFORMANCE, "-o", out, "--on-error", "skip")
    assert status == 0
    assert out.read_bytes() == EXPECTED.read_bytes()
    assert (tmp_path / "out.jsonl.errors.jsonl").read_text() == ""


def test_skip_survives_a_lone_surrogate_query_id(
    tmp_path: Path, write_jsonl: JsonlWriter, make_record: RecordFactory
) -> None:
    bad = json.dumps(make_record("PLACEHOLDER")).replace("PLACEHOLDER", "\\ud800")
    source = write_jsonl("in.jsonl", [make_record("good"), bad])
    out = tmp_path / "out.jsonl"
    result = subprocess.run(
        [str(ASSEMBLER), "assemble", str(source), "-o", str(out), "--on-error", "skip"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert "Traceback" not in result.stderr
    assert result.returncode == 0
    assert len(out.read_text().splitlines()) == 1


# --- output ----------------------------------------------------------------------------------------


def test_conformance_output_file_is_byte_identical(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    status, stdout, err = run_cli(capsys, "assemble", CONFORMANCE, "-o", out)
    assert status == 0
    assert stdout == ""
    assert out.read_bytes() == EXPECTED.read_bytes()
    assert err.startswith("assembled 5 queries: 8 items admitted")
    assert os.listdir(tmp_path) == ["out.jsonl"]


def test_dash_output_writes_packages_to_stdout(capsys: pytest.CaptureFixture[str]) -> None:
    status, stdout, _ = run_cli(capsys, "assemble", CONFORMANCE, "-o", "-", "-q")
    assert status == 0
    assert stdout.encode() == EXPECTED.read_bytes()


def test_dash_input_reads_standard_input(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(CONFORMANCE.read_bytes()), encoding="utf-8"))
    out = tmp_path / "out.jsonl"
    status, _, _ = run_cli(capsys, "assemble", "-", "-o", out, "-q")
    assert status == 0
    assert out.read_bytes() == EXPECTED.read_bytes()


def test_empty_input_gives_an_empty_output(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    source = tmp_path / "empty.jsonl"
    source.write_bytes(b"")
    out = tmp_path / "out.parquet"
    status, _, err = run_cli(capsys, "assemble", source, "-o", out)
    assert status == 0
    assert err.splitlines()[-1].startswith("assembled 0 queries")
    assert pq.read_table(out).num_rows == 0


def test_quiet_prints_nothing_on_stderr(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    status, _, err = run_cli(capsys, "assemble", CONFORMANCE, "-o", tmp_path / "out.jsonl", "--quiet")
    assert (status, err) == (0, "")


@pytest.mark.parametrize("how", [["--format", "parquet"], []], ids=["flag", "extension"])
def test_parquet_output_matches_jsonl_packages(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, how: list[str]
) -> None:
    out = tmp_path / ("out.parquet" if not how else "out.bin")
    status, _, _ = run_cli(capsys, "assemble", CONFORMANCE, "-o", out, *how)
    assert status == 0
    table = pq.read_table(out)
    assert table.num_rows == 5
    expected = [json.loads(line) for line in EXPECTED.read_text().splitlines()]
    assert table.column("query_id").to_pylist() == [line["query_id"] for line in expected]
    texts = [line.split(',"package":', 1)[1][:-1] for line in EXPECTED.read_text().splitlines()]
    assert table.column("package").to_pylist() == texts
    assert table.column("items_used").to_pylist() == [len(line["package"]["items"]) for line in expected]
    assert table.column("bytes_used").to_pylist() == [line["package"]["budget"]["bytes_used"] for line in expected]
    assert table.column("tokens_used").to_pylist() == [line["package"]["budget"]["tokens_used"] for line in expected]
    assert table.column("omitted_total").to_pylist() == [line["package"]["omitted_total"] for line in expected]


def test_max_items_override_is_echoed_in_every_package(capsys: pytest.CaptureFixture[str]) -> None:
    status, stdout, _ = run_cli(capsys, "assemble", CONFORMANCE, "--max-items", "1", "-q")
    assert status == 0
    found = packages(stdout)
    assert len(found) == 5
    assert all(package["budget"]["limits"]["max_items"] == 1 for package in found)
    assert all(package["budget"]["items_used"] <= 1 for package in found)


def test_max_items_override_is_clamped_to_the_ceiling(capsys: pytest.CaptureFixture[str]) -> None:
    status, stdout, _ = run_cli(capsys, "assemble", CONFORMANCE, "--max-items", "5000", "--max-bytes", "7", "-q")
    assert status == 0
    limits = [package["budget"]["limits"] for package in packages(stdout)]
    assert limits == [{"max_items": 1000, "max_bytes": 7, "max_tokens": 4000}] * 5


def test_no_input_and_no_data_on_stdin_assembles_the_shipped_sample(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    with open(os.devnull, encoding="utf-8") as nothing:  # as a terminal, CI or a scheduler give
        monkeypatch.setattr(sys, "stdin", nothing)
        status, stdout, err = run_cli(capsys, "assemble")
    assert status == 0
    assert len(stdout.splitlines()) == 30
    assert "no INPUT given" in err
    assert any(line.startswith("assembled 30 queries") for line in err.splitlines())


def test_chunk_size_flag_gives_identical_bytes(capsys: pytest.CaptureFixture[str]) -> None:
    outputs = []
    for size in ("1", "2", "1000"):
        status, stdout, _ = run_cli(capsys, "assemble", CONFORMANCE, SAMPLE, "--chunk-size", size, "-q")
        assert status == 0
        outputs.append(stdout)
    assert outputs[0] == outputs[1] == outputs[2]
    assert outputs[0].encode().startswith(EXPECTED.read_bytes())
    assert len(outputs[0].splitlines()) == 35


# --- convert ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("source", [CONFORMANCE, SAMPLE], ids=["conformance", "sample"])
def test_convert_round_trip_assembles_identically(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, source: Path
) -> None:
    parquet, back = tmp_path / "lanes.parquet", tmp_path / "back.jsonl"
    assert run_cli(capsys, "convert", source, "-o", parquet)[0] == 0
    assert run_cli(capsys, "convert", parquet, "-o", back)[0] == 0
    outputs = []
    for form in (source, parquet, back):
        status, stdout, _ = run_cli(capsys, "assemble", form, "-q")
        assert status == 0
        outputs.append(stdout)
    assert outputs[0] == outputs[1] == outputs[2]
    assert len(outputs[0].splitlines()) == len(source.read_text().splitlines())


def test_convert_bad_record_exits_2_without_output(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, write_jsonl: JsonlWriter, make_record: RecordFactory
) -> None:
    source = write_jsonl("in.jsonl", [make_record("a"), bad_record(make_record, "b")])
    parquet = tmp_path / "lanes.parquet"
    status, _, err = run_cli(capsys, "convert", source, "-o", parquet, "--chunk-size", "1")
    assert status == 2
    assert_single_error_line(err, error_line(source, 2, "b", "lanes.passages[0].score", SCORE_RULE))
    assert os.listdir(tmp_path) == ["in.jsonl"]


def test_convert_reports_its_counts(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    status, _, err = run_cli(capsys, "convert", SAMPLE, "-o", tmp_path / "lanes.parquet")
    assert status == 0
    assert err == "converted 30 records, 0 rejected\n"


# --- explain ---------------------------------------------------------------------------------------


def test_explain_names_both_near_duplicate_candidates(capsys: pytest.CaptureFixture[str]) -> None:
    status, stdout, _ = run_cli(capsys, "explain", CONFORMANCE, "--query-id", "evidence_duplicate_passage")
    assert status == 0
    assert stdout.startswith("query evidence_duplicate_passage: 2 fused candidates")
    assert "near-duplicate drops: 1\n" in stdout
    drop = "  #2 passage | dup-corpus | b.md | 0  -> kept passage | dup-corpus | a.md | 0"
    assert drop in stdout.splitlines()
    assert "omitted 1 (duplicate_passage 1)" in stdout


def test_explain_names_each_candidate_once_and_prints_omissions_as_text(capsys: pytest.CaptureFixture[str]) -> None:
    status, stdout, _ = run_cli(capsys, "explain", SAMPLE, "--query-id", "ja-005")
    assert status == 0
    fused = [line for line in stdout.splitlines() if line.startswith("     1  ")]
    assert fused == ["     1  association | 高瀬 | 出身 | 南部杜氏  [graph_activate#4, graph_query#1]"]
    assert stdout.rstrip().endswith("omitted 1 (duplicate_passage 1)")
    assert "{" not in stdout


def test_explain_unknown_query_id_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    status, stdout, err = run_cli(capsys, "explain", CONFORMANCE, "--query-id", "no_such_query")
    assert status == 2
    assert stdout == ""
    assert err == f"assembler: error: query_id 'no_such_query' is not in {CONFORMANCE}\n"


def test_explain_bad_input_exits_2(
    capsys: pytest.CaptureFixture[str], write_jsonl: JsonlWriter, make_record: RecordFactory
) -> None:
    source = write_jsonl("in.jsonl", [make_record("a"), bad_record(make_record, "b")])
    status, _, err = run_cli(capsys, "explain", source, "--query-id", "a")
    assert status == 2
    assert_single_error_line(err, error_line(source, 2, "b", "lanes.passages[0].score", SCORE_RULE))


# --- real processes --------------------------------------------------------------------------------


def test_installed_command_bad_record_exits_2_without_traceback(
    tmp_path: Path, write_jsonl: JsonlWriter, make_record: RecordFactory
) -> None:
    lines: list[Line] = [make_record(f"q{i}") for i in range(5)]
    lines[3] = bad_record(make_record, "q3")
    source = write_jsonl("in.jsonl", lines)
    out = tmp_path / "out.jsonl"
    result = subprocess.run(
        [str(ASSEMBLER), "assemble", str(source), "-o", str(out), "--chunk-size", "2"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 2
    assert result.stdout == ""
    assert_single_error_line(result.stderr, error_line(source, 4, "q3", "lanes.passages[0].score", SCORE_RULE))
    assert os.listdir(tmp_path) == ["in.jsonl"]


def test_python_m_assembler_writes_the_conformance_bytes(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    result = subprocess.run(
        [sys.executable, "-m", "assembler", "assemble", str(CONFORMANCE), "-o", str(out)],
        capture_output=True,
        text=True,
        check=False,
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    assert out.read_bytes() == EXPECTED.read_bytes()
    assert result.stderr.startswith("assembled 5 queries")


def test_no_input_with_stdin_from_a_file_assembles_stdin_not_the_sample(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    with open(CONFORMANCE, encoding="utf-8") as redirected:  # assembler assemble < lanes.jsonl
        monkeypatch.setattr(sys, "stdin", redirected)
        status, stdout, err = run_cli(capsys, "assemble", "-q")
    assert status == 0
    assert stdout.encode() == (DATA / "conformance" / "expected.jsonl").read_bytes()
    assert "no INPUT given" not in err


def test_version_flag_prints_the_package_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as caught:
        main(["--version"])
    assert caught.value.code == 0
    assert capsys.readouterr().out == f"assembler {assembler.__version__}\n"


def test_convert_refuses_an_output_extension_it_cannot_read_as_a_format(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    status, _, err = run_cli(capsys, "convert", CONFORMANCE, "-o", tmp_path / "lanes.csv")
    assert status == 2 and "give --format parquet or --format jsonl" in err
    assert not (tmp_path / "lanes.csv").exists()
    status, _, _ = run_cli(capsys, "convert", CONFORMANCE, "-o", tmp_path / "lanes.csv", "--format", "jsonl")
    assert status == 0 and (tmp_path / "lanes.csv").read_bytes() == CONFORMANCE.read_bytes()


def test_the_progress_total_counts_records_of_every_input(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    from assembler.cli.assemble import count_records

    parquet = tmp_path / "lanes.parquet"
    assert run_cli(capsys, "convert", SAMPLE, "-o", parquet)[0] == 0
    blank_lines = tmp_path / "blank.jsonl"
    blank_lines.write_bytes(CONFORMANCE.read_bytes().replace(b"\n", b"\n\n"))
    assert count_records([str(SAMPLE), str(parquet), str(blank_lines)]) == 30 + 30 + 5
    assert count_records(["-"]) is None  # standard input cannot be counted ahead
    assert count_records([str(tmp_path / "missing.jsonl")]) is None  # the run reports it


def subparser(path: list[str]) -> argparse.ArgumentParser:
    from assembler.cli.commands import _parser

    parser = _parser(every=True)
    for name in path:
        choices = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices
        parser = choices[name]
    return parser


@pytest.mark.parametrize("command", [["assemble"], ["explain"], ["evaluate"], ["evaluate", "sweep"]], ids=" ".join)
def test_the_policy_flag_lists_the_policy_names(command: list[str]) -> None:
    (policy,) = [a for a in subparser(command)._actions if a.dest == "policy"]
    assert all(name in str(policy.help) for name in policies())


def test_evaluate_usage_shows_eval_and_lanes_as_required(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["evaluate", "--help"])
    usage = capsys.readouterr().out.split("\n\n")[0]
    assert "--eval EVAL.jsonl --lanes LANES" in usage and "[--eval" not in usage


@pytest.mark.parametrize(("given", "expected"), [(None, "0 1 None"), ("2", "0 2 2")])
def test_the_command_runs_polars_on_one_thread_unless_told(given: str | None, expected: str, tmp_path: Path) -> None:
    """The command sizes Polars' thread pool before Polars loads (``POLARS_THREADS``), leaves a
    ``POLARS_MAX_THREADS`` the user set alone, and gives its caller the environment back."""
    env = {name: value for name, value in os.environ.items() if name != "POLARS_MAX_THREADS"}
    if given is not None:
        env["POLARS_MAX_THREADS"] = given
    script = (
        "import os\n"
        "from assembler.cli import main\n"
        f"status = main(['assemble', {str(SAMPLE)!r}, '-o', {str(tmp_path / 'out.jsonl')!r}, '-q'])\n"
        "import polars\n"
        "print(status, polars.thread_pool_size(), os.environ.get('POLARS_MAX_THREADS'))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, check=True)
    assert done.stdout.split("\n")[0] == expected


# What OPENBLAS_NUM_THREADS says as NumPy loads (OpenBLAS reads it then), and after the command.
BLAS_AT_NUMPY = """
import importlib.abc, os, sys

class AtNumPy(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "numpy":
            print("loading", os.environ.get("OPENBLAS_NUM_THREADS"))
            sys.meta_path.remove(self)
        return None

sys.meta_path.insert(0, AtNumPy())
from assembler.cli import main
status = main({argv!r})
print("after", os.environ.get("OPENBLAS_NUM_THREADS"))
"""


@pytest.mark.parametrize(
    ("command", "given", "expected"),
    [
        ("assemble", None, ["loading 1", "after None"]),
        ("assemble", "2", ["loading 2", "after 2"]),
        ("lanes build", None, ["loading None", "after None"]),
    ],
)
def test_the_command_runs_openblas_on_one_thread_but_for_lanes_build(
    command: str, given: str | None, expected: list[str], tmp_path: Path
) -> None:
    """OpenBLAS starts its threads as NumPy loads: the command sets ``OPENBLAS_NUM_THREADS=1``
    first (unless set), except for ``lanes build`` and its dense matrices; the caller gets its
    environment back."""
    env = {name: value for name, value in os.environ.items() if name != "OPENBLAS_NUM_THREADS"}
    if given is not None:
        env["OPENBLAS_NUM_THREADS"] = given
    missing = str(tmp_path / "missing.jsonl")  # lanes build loads its modules, then refuses the input
    argv = {
        "assemble": ["assemble", str(SAMPLE), "-o", str(tmp_path / "out.jsonl"), "-q"],
        "lanes build": ["lanes", "build", "--corpus", missing, "--eval", missing, "-o", str(tmp_path / "lanes.jsonl")],
    }[command]
    script = BLAS_AT_NUMPY.format(argv=argv)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, check=True)
    assert done.stdout.splitlines() == expected


HOSTILE_NAME = "in\n\x1b[31mX\x1b[0massembler: error: forged.jsonl"
ESCAPED_NAME = "in\\x0a\\x1b[31mX\\x1b[0massembler: error: forged.jsonl"


def test_a_missing_input_named_with_a_newline_and_escapes_is_one_escaped_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    status, _, err = run_cli(capsys, "assemble", tmp_path / HOSTILE_NAME, "-o", tmp_path / "out.jsonl")
    assert status == 2
    assert err == f"assembler: error: cannot read {tmp_path}/{ESCAPED_NAME}: No such file or directory\n"


def test_an_output_in_a_missing_folder_named_with_control_characters_is_one_escaped_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    status, _, err = run_cli(capsys, "assemble", CONFORMANCE, "-o", tmp_path / HOSTILE_NAME / "out.jsonl")
    assert status == 2
    assert err.count("\n") == 1 and "\x1b" not in err
    assert err.startswith(f"assembler: error: cannot write {tmp_path}/{ESCAPED_NAME}/out.jsonl: ")


def test_a_huge_file_name_is_shortened_in_the_message(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    status, _, err = run_cli(capsys, "assemble", "n" * 100_000, "-o", tmp_path / "out.jsonl")
    assert status == 2
    assert err.count("\n") == 1 and len(err) < 400 and err.endswith(": File name too long\n")


def test_an_unrecognized_argument_with_control_characters_is_one_escaped_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as stopped:
        main(["assemble", "--bogus\x1b[2J\nassembler:error:forged"])  # no space: argparse reads it as a flag
    assert stopped.value.code == 2
    err = capsys.readouterr().err
    assert "\x1b" not in err and "\nassembler:error:forged" not in err
    assert err == (
        "assembler: error: unrecognized arguments: --bogus\\x1b[2J\\x0aassembler:error:forged "
        "(see `assembler assemble --help`)\n"
    )


def test_the_errors_file_named_with_control_characters_is_shown_escaped(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, write_jsonl: JsonlWriter, make_record: RecordFactory
) -> None:
    lanes = write_jsonl("in.jsonl", [make_record("q1"), bad_record(make_record, "q2")])
    errors = tmp_path / "bad\x1b[2J\nname.jsonl"
    out = tmp_path / "out.jsonl"
    status, _, err = run_cli(capsys, "assemble", lanes, "-o", out, "--on-error", "skip", "--errors", errors)
    assert status == 0 and errors.is_file()
    assert f"1 rejected record written to {tmp_path}/bad\\x1b[2J\\x0aname.jsonl\n" in err and "\x1b" not in err


def test_the_entry_point_stays_a_function_after_the_commands_load() -> None:
    """Loading the commands' module must not replace ``assembler.cli.main`` (what the console
    script's entry point ``script`` runs) with a module of the same name."""
    import assembler.cli
    import assembler.cli.commands

    assert callable(assembler.cli.main) and not isinstance(assembler.cli.main, type(assembler.cli))
    assert callable(assembler.cli.script)


# --- the executable's exit, without the interpreter's teardown --------------------------------------


@pytest.mark.parametrize(
    ("arguments", "asked"),
    [
        (["assemble", "in.jsonl", "--workers", "2"], 2),
        (["assemble", "--workers=3", "in.jsonl"], 3),
        (["assemble", "in.jsonl"], 1),
        (["assemble", "--work", "2"], 1),  # abbreviated: the parser takes it, no early start
        (["assemble", "--workers", "two"], 1),  # the parser refuses it
        (["assemble", "--workers"], 1),
    ],
)
def test_asked_workers_reads_the_flag_before_the_parser_exists(arguments: list[str], asked: int) -> None:
    from assembler.cli import asked_workers

    assert asked_workers(arguments) == asked


def test_the_executable_delivers_every_byte_to_a_pipe_and_its_status(tmp_path: Path) -> None:
    """The process ends at once after the command: what it wrote to a pipe is all there."""
    to_file = tmp_path / "out.jsonl"
    done = subprocess.run([str(ASSEMBLER), "assemble", str(SAMPLE), "-o", str(to_file), "-q"], capture_output=True)
    piped = subprocess.run([str(ASSEMBLER), "assemble", str(SAMPLE), "-o", "-", "-q"], capture_output=True)
    assert done.returncode == piped.returncode == 0 and done.stderr == piped.stderr == b""
    assert piped.stdout == to_file.read_bytes() and len(piped.stdout) > 2**16  # more than a pipe holds
    missing = subprocess.run([str(ASSEMBLER), "assemble", str(tmp_path / "none.jsonl"), "-o", "x"], capture_output=True)
    assert missing.returncode == 2 and missing.stderr.startswith(b"assembler: error: cannot read ")


def _script_with(command_body: str) -> subprocess.CompletedProcess[str]:
    """``assembler.cli.script()`` in a fresh interpreter, its ``main`` replaced by ``command_body``."""
    program = "import atexit, threading, time\nfrom pathlib import Path\nimport assembler.cli\n\n"
    program += "def command(**_):\n" + "".join(f"    {line}\n" for line in command_body.splitlines())
    program += "\nassembler.cli.main = command\nassembler.cli.script()\n"
    return subprocess.run([sys.executable, "-c", program], capture_output=True, text=True)


def test_the_executable_runs_the_exit_handlers_before_it_ends(tmp_path: Path) -> None:
    handled = tmp_path / "handled"
    done = _script_with(f"atexit.register(Path({str(handled)!r}).write_text, 'handled')\nreturn 3")
    assert (done.returncode, done.stderr) == (3, "") and handled.read_text() == "handled"


def test_the_executable_waits_for_a_thread_that_is_no_daemon(tmp_path: Path) -> None:
    threaded = tmp_path / "threaded"
    write_late = f"lambda: (time.sleep(0.3), Path({str(threaded)!r}).write_text('threaded'))"
    done = _script_with(f"threading.Thread(target={write_late}).start()\nreturn 4")
    assert (done.returncode, done.stderr) == (4, "") and threaded.read_text() == "threaded"


def test_the_executable_with_workers_leaves_no_resource_behind(tmp_path: Path) -> None:
    """A pool's claims and queues are released by the exit handlers: no resource tracker warning
    of leaked semaphores, and the same bytes as one process."""
    outputs = []
    for workers in ("1", "2"):
        out = tmp_path / f"out-{workers}.jsonl"
        command = [str(ASSEMBLER), "assemble", str(SAMPLE), "-o", str(out), "-q", "--chunk-size", "4"]
        done = subprocess.run([*command, "--workers", workers], capture_output=True, text=True)
        assert (done.returncode, done.stderr) == (0, "")
        outputs.append(out.read_bytes())
    assert outputs[0] == outputs[1]


# --- what a run does that its packages do not say -----------------------------------------------------


def test_a_budget_key_that_is_no_budget_field_warns_once_per_run_with_its_count(
    capsys: pytest.CaptureFixture[str], write_jsonl: JsonlWriter, make_record: RecordFactory, tmp_path: Path
) -> None:
    records = [make_record(f"q{i}") for i in range(5)]
    for record in records[:4]:
        record["request"]["budget"] = {"max_item": 1}
    source = write_jsonl("in.jsonl", records)
    status, _, err = run_cli(capsys, "assemble", source, "-o", tmp_path / "out.jsonl", "--chunk-size", "1", "-q")
    assert status == 0
    assert err == (
        "assembler: warning: budget key 'max_item' is not a budget field "
        "(ignored in 4 records; fields: max_items, max_bytes, max_tokens)\n"
    )


def test_a_budget_above_its_ceiling_warns_once_per_field(
    capsys: pytest.CaptureFixture[str], write_jsonl: JsonlWriter, make_record: RecordFactory, tmp_path: Path
) -> None:
    records = [make_record(f"q{i}") for i in range(3)]
    records[0]["request"]["budget"] = {"max_bytes": 10**9}
    source = write_jsonl("in.jsonl", records)
    status, _, err = run_cli(capsys, "assemble", source, "-o", tmp_path / "out.jsonl", "--max-items", "5000")
    assert status == 0
    warnings = [line for line in err.splitlines() if line.startswith("assembler: warning:")]
    assert warnings == [  # in the contract's order of the fields
        "assembler: warning: budget max_items above the ceiling 1000 clamped to it in 3 records",
        "assembler: warning: budget max_bytes above the ceiling 1048576 clamped to it in 1 record",
    ]


@pytest.mark.parametrize("name", ["out.csv", "out.jsonl.gz", "packages.txt"])
def test_assemble_refuses_an_output_extension_that_names_no_format(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, name: str
) -> None:
    status, _, err = run_cli(capsys, "assemble", CONFORMANCE, "-o", tmp_path / name)
    assert status == 2
    assert_single_error_line(
        err,
        f"assembler: error: cannot tell the format of -o {tmp_path / name} from its extension (.parquet/.pq for "
        "Parquet, .jsonl/.ndjson/.json for JSON Lines): give --format parquet or --format jsonl"
        + ("; outputs are written uncompressed" if name.endswith(".gz") else "")
        + "\n",
    )
    assert os.listdir(tmp_path) == []
    status, _, _ = run_cli(capsys, "assemble", CONFORMANCE, "-o", tmp_path / name, "--format", "jsonl", "-q")
    assert status == 0 and (tmp_path / name).read_bytes() == EXPECTED.read_bytes()


def test_assemble_writes_parquet_for_an_upper_case_extension_and_jsonl_without_an_extension(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    status, _, _ = run_cli(capsys, "assemble", CONFORMANCE, "-o", tmp_path / "out.PARQUET", "-q")
    assert status == 0 and pq.read_table(tmp_path / "out.PARQUET").num_rows == 5
    assert run_cli(capsys, "assemble", CONFORMANCE, "-o", tmp_path / "packages", "-q")[0] == 0
    assert (tmp_path / "packages").read_bytes() == EXPECTED.read_bytes()
    assert run_cli(capsys, "assemble", CONFORMANCE, "-o", os.devnull, "-q")[0] == 0


@pytest.mark.parametrize("text", [b"", b"\n  \n\t\n"], ids=["empty", "blank"])
def test_an_input_without_records_warns_that_it_held_none(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: bytes
) -> None:
    source = tmp_path / "in.jsonl"
    source.write_bytes(text)
    status, _, err = run_cli(capsys, "assemble", source, "-o", tmp_path / "out.jsonl", "-q")
    assert (status, err) == (0, f"assembler: warning: {source} held no records\n")
    assert (tmp_path / "out.jsonl").read_bytes() == b""
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(text)))
    status, _, err = run_cli(capsys, "assemble", "-", source, "-o", tmp_path / "out.jsonl", "-q")
    assert (status, err) == (0, f"assembler: warning: the inputs standard input, {source} held no records\n")


def test_an_input_whose_records_were_all_rejected_did_hold_records(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, write_jsonl: JsonlWriter, make_record: RecordFactory
) -> None:
    source = write_jsonl("in.jsonl", [bad_record(make_record, "x")])
    status, _, err = run_cli(capsys, "assemble", source, "-o", tmp_path / "out.jsonl", "--on-error", "skip")
    assert status == 0 and "held no records" not in err
    assert "1 rejected record written to" in err


def test_packages_are_not_written_to_a_terminal(tmp_path: Path) -> None:
    import select

    controller, terminal = os.openpty()
    try:
        done = subprocess.run(
            [sys.executable, "-m", "assembler", "assemble"],
            stdin=subprocess.DEVNULL,  # no data on standard input: the shipped sample
            stdout=terminal,
            stderr=subprocess.PIPE,
            cwd=tmp_path,
            timeout=300,
        )
        printed = select.select([controller], [], [], 0)[0]
    finally:
        os.close(terminal)
        os.close(controller)
    assert done.returncode == 2
    assert done.stderr.decode() == (
        "assembler: error: not writing packages to a terminal: give -o FILE (such as -o packages.jsonl), or pipe them\n"
    )
    assert printed == []


def test_search_limit_cuts_name_the_request_field_that_keeps_more(
    capsys: pytest.CaptureFixture[str], write_jsonl: JsonlWriter, make_record: RecordFactory, tmp_path: Path
) -> None:
    record = make_record("q1")
    first = record["lanes"]["passages"][0]
    record["lanes"]["passages"] = [{**first, "paragraph": i, "source": f"p{i}.md"} for i in range(7)]
    source = write_jsonl("in.jsonl", [record])
    status, _, err = run_cli(capsys, "assemble", source, "-o", tmp_path / "out.jsonl")
    assert status == 0
    summary, hint = err.splitlines()
    assert summary.startswith("assembled 1 query: ") and summary.endswith(", 2 search-limit cuts, 0 rejected")
    assert hint == (
        "assembler: warning: search_limit cut 2 passage or community hits (request.search_limit: default 5, at most "
        "200): set a higher search_limit in the lane dump's requests to keep them (lanes build and lanes from-runs "
        "write it with --search-limit)"
    )
    record["request"]["search_limit"] = 7
    write_jsonl("in.jsonl", [record])
    status, _, err = run_cli(capsys, "assemble", source, "-o", tmp_path / "out.jsonl")
    assert status == 0 and err.count("\n") == 1 and ", 0 search-limit cuts," in err


def test_counts_of_one_are_singular_in_every_summary_line(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    one = tmp_path / "one.jsonl"
    one.write_text(CONFORMANCE.read_text(encoding="utf-8").splitlines()[0] + "\n", encoding="utf-8")
    status, _, err = run_cli(capsys, "assemble", one, "-o", tmp_path / "out.jsonl")
    assert status == 0 and err.startswith("assembled 1 query: ")
    status, _, err = run_cli(capsys, "convert", one, "-o", tmp_path / "lanes.parquet")
    assert (status, err) == (0, "converted 1 record, 0 rejected\n")


def test_an_input_named_in_upper_case_parquet_is_read_as_parquet(tmp_path: Path) -> None:
    """Inputs are named by the output's rule (extensions in any case): ``LANES.PARQUET`` was read
    as JSON Lines and refused with "name it .parquet"."""
    lanes = tmp_path / "LANES.PARQUET"
    converted = subprocess.run(
        [sys.executable, "-m", "assembler", "convert", str(SAMPLE), "-o", str(lanes)], capture_output=True, text=True
    )
    assert converted.returncode == 0, converted.stderr
    out = tmp_path / "out.jsonl"
    run = subprocess.run(
        [sys.executable, "-m", "assembler", "assemble", str(lanes), "-o", str(out)], capture_output=True, text=True
    )
    assert run.returncode == 0, run.stderr
    assert len(out.read_bytes().splitlines()) == 30


def test_packages_asked_for_with_o_dash_are_written_to_a_terminal(tmp_path: Path) -> None:
    """``-o -`` names standard output: a user who asks for the packages on the screen gets them."""
    controller, terminal = os.openpty()
    try:
        done = subprocess.Popen(
            [sys.executable, "-m", "assembler", "assemble", str(CONFORMANCE), "-o", "-", "-q"],
            stdin=subprocess.DEVNULL,
            stdout=terminal,
            stderr=subprocess.PIPE,
            cwd=tmp_path,
        )
        os.close(terminal)
        printed = bytearray()
        while True:
            try:
                chunk = os.read(controller, 65536)
            except OSError:  # the terminal's other end closed: the command has ended
                break
            if not chunk:
                break
            printed += chunk
        _, err = done.communicate(timeout=300)
    finally:
        os.close(controller)
    assert done.returncode == 0, err
    assert printed.count(b"\n") == len(CONFORMANCE.read_bytes().splitlines())


def test_convert_to_parquet_says_which_budget_keys_it_drops(
    capsys: pytest.CaptureFixture[str], write_jsonl: JsonlWriter, make_record: RecordFactory, tmp_path: Path
) -> None:
    """The Parquet schema has no place for a key that is no budget field: it is dropped, as
    assemble ignores it, and said once with its count (a budget above a ceiling is kept as given,
    so it is not called clamped)."""
    records = [make_record(f"q{i}") for i in range(3)]
    records[0]["request"]["budget"] = {"max_item": 1, "max_bytes": 10**9}
    records[1]["request"]["budget"] = {"max_item": 2}
    source = write_jsonl("in.jsonl", records)
    status, _, err = run_cli(capsys, "convert", source, "-o", tmp_path / "lanes.parquet")
    assert status == 0
    assert [line for line in err.splitlines() if "warning" in line] == [
        "assembler: warning: budget key 'max_item' is not a budget field "
        "(ignored in 2 records; fields: max_items, max_bytes, max_tokens)"
    ]
    assert pq.read_table(tmp_path / "lanes.parquet").num_rows == 3
