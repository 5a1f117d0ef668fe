"""Streaming runs (run_assembly, convert): byte-exact output, chunking, stop/skip, Parquet, nothing lost."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import pyarrow.parquet as pq
import pytest

from assembler.errors import InputError, UsageError
from assembler.pipeline import REASONS
from assembler.run.local import convert, run_assembly
from assembler.run.options import RunOptions
from assembler.run.outputs import package_line

if TYPE_CHECKING:
    from tests.conftest import JsonlWriter, Line, RecordFactory

DATA = Path(__file__).resolve().parent.parent.parent / "data"
CONFORMANCE = DATA / "conformance" / "lanes.jsonl"
EXPECTED = DATA / "conformance" / "expected.jsonl"
SAMPLE = DATA / "sample" / "lanes.jsonl"


def assembled(inputs: list[Path], output: Path, **options: Any) -> bytes:
    """Run an assembly and return the output file's bytes."""
    run_assembly([str(path) for path in inputs], str(output), RunOptions(**options))
    return output.read_bytes()


def bad_record(make_record: RecordFactory, query_id: str) -> dict[str, Any]:
    """A record whose first passage score is a string."""
    record = make_record(query_id)
    record["lanes"]["passages"][0]["score"] = "high"
    return record


def passage_hits(count: int) -> list[dict[str, Any]]:
    """``count`` passages with unrelated texts (no near-duplicates among them)."""
    words = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet"]
    return [
        {
            "source": f"p{i}.md",
            "paragraph": i,
            "score": 0.5,
            "text": " ".join(words[i:] + words[:i]) + f" {i * 7919}",
            "lanes": {"bm25": {"rank": i + 1, "score": 0.5}},
        }
        for i in range(count)
    ]


# --- output ----------------------------------------------------------------------------------------


def test_conformance_output_is_byte_identical(tmp_path: Path) -> None:
    assert assembled([CONFORMANCE], tmp_path / "out.jsonl") == EXPECTED.read_bytes()


def test_output_order_is_input_order(tmp_path: Path) -> None:
    reversed_input = tmp_path / "reversed.jsonl"
    reversed_input.write_bytes(b"".join(reversed(CONFORMANCE.read_bytes().splitlines(keepends=True))))
    out = assembled([reversed_input], tmp_path / "out.jsonl")
    assert out.splitlines() == list(reversed(EXPECTED.read_bytes().splitlines()))


def test_several_inputs_are_assembled_in_order(tmp_path: Path) -> None:
    out = assembled([CONFORMANCE, SAMPLE], tmp_path / "out.jsonl")
    ids = [json.loads(line)["query_id"] for line in out.splitlines()]
    conformance_ids = [json.loads(line)["query_id"] for line in CONFORMANCE.read_text().splitlines()]
    sample_ids = [json.loads(line)["query_id"] for line in SAMPLE.read_text().splitlines()]
    assert ids == conformance_ids + sample_ids


@pytest.mark.parametrize("source", [CONFORMANCE, SAMPLE], ids=["conformance", "sample"])
def test_chunk_size_does_not_change_the_output(tmp_path: Path, source: Path) -> None:
    outputs = {size: assembled([source], tmp_path / f"out{size}.jsonl", chunk_size=size) for size in (1, 2, 1000)}
    assert outputs[1] == outputs[2] == outputs[1000]
    assert outputs[1].count(b"\n") == len(source.read_bytes().splitlines())


def test_chunk_bytes_do_not_change_the_output(tmp_path: Path) -> None:
    chunks: list[int] = []
    run_assembly([str(SAMPLE)], str(tmp_path / "default.jsonl"))
    run_assembly([str(SAMPLE)], str(tmp_path / "small.jsonl"), RunOptions(chunk_bytes=20_000), progress=chunks.append)
    assert (tmp_path / "small.jsonl").read_bytes() == (tmp_path / "default.jsonl").read_bytes()
    assert len(chunks) > 1 and sum(chunks) == 30  # 30 queries in chunks of about 20 kB of input


def test_run_summary_counts(tmp_path: Path) -> None:
    summary = run_assembly([str(CONFORMANCE)], str(tmp_path / "out.jsonl"))
    packages = [json.loads(line)["package"] for line in EXPECTED.read_text().splitlines()]
    assert summary.queries == 5
    assert summary.items == sum(len(package["items"]) for package in packages)
    assert summary.omitted == {
        reason: sum(package["omitted_by_reason"].get(reason, 0) for package in packages) for reason in REASONS
    }
    assert summary.rejected == 0
    assert summary.line().startswith("assembled 5 queries: ")


def test_parquet_output_has_package_and_summary_columns(tmp_path: Path) -> None:
    out = tmp_path / "out.parquet"
    run_assembly([str(CONFORMANCE)], str(out), RunOptions(output_format="parquet", chunk_size=2))
    rows = pq.read_table(out).to_pylist()
    expected = [json.loads(line) for line in EXPECTED.read_text().splitlines()]
    assert [row["query_id"] for row in rows] == [line["query_id"] for line in expected]
    for row, text in zip(rows, EXPECTED.read_text().splitlines(), strict=True):
        assert f'{{"query_id":{json.dumps(row["query_id"])},"package":{row["package"]}}}' == text
        package = json.loads(row["package"])
        budget = package["budget"]
        assert (row["items_used"], row["bytes_used"], row["tokens_used"]) == (
            budget["items_used"],
            budget["bytes_used"],
            budget["tokens_used"],
        )
        assert row["items_used"] == len(package["items"])
        assert row["omitted_total"] == package["omitted_total"] == len(package["omitted"])
        for reason in REASONS:
            assert row[f"omitted_{reason}"] == package["omitted_by_reason"].get(reason, 0), reason
        assert row["search_limit_cuts"] == 0
    assert sum(row["omitted_duplicate_passage"] for row in rows) == 1
    assert sum(row["omitted_budget_exceeded"] for row in rows) == 3


def test_search_limit_cut_is_counted_in_the_summary_row(tmp_path: Path, write_jsonl: JsonlWriter) -> None:
    record: dict[str, Any] = {
        "query_id": "cut",
        "context": "c",
        "request": {"origins": [], "text_fallback_query": "q", "search_limit": 5},
        "lanes": {"passages": passage_hits(7)},
    }
    source = write_jsonl("in.jsonl", [record])
    out = tmp_path / "out.parquet"
    summary = run_assembly([str(source)], str(out), RunOptions(output_format="parquet"))
    (row,) = pq.read_table(out).to_pylist()
    assert row["search_limit_cuts"] == 2
    assert summary.search_limit_cuts == 2
    package = json.loads(row["package"])
    fused = sorted(entry["candidate_id"] for entry in package["items"] + package["omitted"])
    assert fused == [f"passage\x00c\x00p{i}.md\x00{i}" for i in range(5)]


# --- bad input: stop -------------------------------------------------------------------------------


@pytest.mark.parametrize("output_format", ["jsonl", "parquet"])
def test_bad_record_mid_file_stops_and_leaves_no_output(
    tmp_path: Path, write_jsonl: JsonlWriter, make_record: RecordFactory, output_format: Literal["jsonl", "parquet"]
) -> None:
    lines: list[Line] = [make_record(f"q{i}") for i in range(6)]
    lines[4] = bad_record(make_record, "q4")
    source = write_jsonl("in.jsonl", lines)
    out = tmp_path / f"out.{output_format}"
    with pytest.raises(InputError) as caught:
        run_assembly([str(source)], str(out), RunOptions(output_format=output_format, chunk_size=2))
    assert (caught.value.error.line, caught.value.error.query_id) == (5, "q4")
    assert caught.value.error.field == "lanes.passages[0].score"
    assert os.listdir(tmp_path) == ["in.jsonl"]


def test_missing_second_input_leaves_no_output(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="cannot read"):
        run_assembly(
            [str(CONFORMANCE), str(tmp_path / "missing.jsonl")], str(tmp_path / "out.jsonl"), RunOptions(chunk_size=1)
        )
    assert os.listdir(tmp_path) == []


def test_duplicate_query_id_reports_the_second_occurrence(
    tmp_path: Path, write_jsonl: JsonlWriter, make_record: RecordFactory
) -> None:
    source = write_jsonl("in.jsonl", [make_record("a"), make_record("b"), make_record("a")])
    with pytest.raises(InputError) as caught:
        run_assembly([str(source)], str(tmp_path / "out.jsonl"))
    error = caught.value.error
    assert (error.file, error.line, error.query_id, error.field) == (str(source), 3, "a", "query_id")
    assert "duplicate query_id" in error.rule
    assert os.listdir(tmp_path) == ["in.jsonl"]


def test_duplicate_query_id_across_inputs_is_rejected(tmp_path: Path, write_jsonl: JsonlWriter) -> None:
    first = CONFORMANCE.read_text().splitlines()[0]
    second = write_jsonl("again.jsonl", [first])
    with pytest.raises(InputError) as caught:
        run_assembly([str(CONFORMANCE), str(second)], str(tmp_path / "out.jsonl"))
    assert (caught.value.error.file, caught.value.error.line) == (str(second), 1)


# --- bad input: skip -------------------------------------------------------------------------------


def test_skip_assembles_good_records_and_sets_aside_bad_ones_untouched(
    tmp_path: Path, write_jsonl: JsonlWriter, make_record: RecordFactory
) -> None:
    lines: list[Line] = [make_record(f"q{i}") for i in range(7)]
    lines[1] = "{not json"
    lines[3] = bad_record(make_record, "q3")
    lines[5] = make_record("q0")  # duplicate id
    source = write_jsonl("in.jsonl", lines)
    texts = source.read_text().splitlines()
    out, errors = tmp_path / "out.jsonl", tmp_path / "rejects.jsonl"
    summary = run_assembly([str(source)], str(out), RunOptions(on_error="skip", errors_path=str(errors), chunk_size=2))
    assert [json.loads(line)["query_id"] for line in out.read_text().splitlines()] == ["q0", "q2", "q4", "q6"]
    rejected = [json.loads(line) for line in errors.read_text().splitlines()]
    assert [(entry["line"], entry["query_id"], entry["field"]) for entry in rejected] == [
        (2, None, ""),
        (4, "q3", "lanes.passages[0].score"),
        (6, "q0", "query_id"),
    ]
    assert [entry["record"] for entry in rejected] == [texts[1], texts[3], texts[5]]
    assert all(entry["file"] == str(source) for entry in rejected)
    assert "invalid JSON" in rejected[0]["rule"]
    assert "must be a number" in rejected[1]["rule"]
    assert "duplicate query_id" in rejected[2]["rule"]
    assert summary.queries + summary.rejected == len(texts)
    assert (summary.queries, summary.rejected) == (4, 3)
    assert sorted(os.listdir(tmp_path)) == ["in.jsonl", "out.jsonl", "rejects.jsonl"]


def test_skip_without_an_errors_path_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="errors file"):
        run_assembly([str(CONFORMANCE)], str(tmp_path / "out.jsonl"), RunOptions(on_error="skip"))
    assert os.listdir(tmp_path) == []


def test_skip_sets_aside_a_lone_surrogate_query_id(
    tmp_path: Path, write_jsonl: JsonlWriter, make_record: RecordFactory
) -> None:
    bad = json.dumps(make_record("PLACEHOLDER")).replace("PLACEHOLDER", "\\ud800")
    source = write_jsonl("in.jsonl", [make_record("good"), bad])
    errors = tmp_path / "rejects.jsonl"
    summary = run_assembly(
        [str(source)], str(tmp_path / "out.jsonl"), RunOptions(on_error="skip", errors_path=str(errors))
    )
    assert (summary.queries, summary.rejected) == (1, 1)
    (entry,) = [json.loads(line) for line in errors.read_text().splitlines()]
    assert entry["record"] == bad
    assert "not valid Unicode" in entry["rule"]


# --- convert ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("source", [CONFORMANCE, SAMPLE], ids=["conformance", "sample"])
def test_convert_round_trip_gives_identical_packages(tmp_path: Path, source: Path) -> None:
    parquet, back = tmp_path / "lanes.parquet", tmp_path / "back.jsonl"
    n = len(source.read_bytes().splitlines())
    assert convert([str(source)], str(parquet), chunk_size=7).queries == n
    assert pq.read_metadata(parquet).num_rows == n
    assert convert([str(parquet)], str(back)).queries == n
    original = assembled([source], tmp_path / "a.jsonl")
    assert assembled([parquet], tmp_path / "b.jsonl") == original
    assert assembled([back], tmp_path / "c.jsonl") == original
    if source == CONFORMANCE:
        assert original == EXPECTED.read_bytes()


def test_convert_drops_unknown_keys_and_keeps_edge_values(
    tmp_path: Path, write_jsonl: JsonlWriter, make_record: RecordFactory
) -> None:
    record = make_record()
    record["request"].update(
        origins="a", rerank={"model": None}, budget={"max_items": None, "max_bytes": 900}, extra={"x": 1}
    )
    record["lanes"]["passages"][0]["extra"] = "ZZ-UNKNOWN"
    record["lanes"]["graph_activate"] = None
    source = write_jsonl("in.jsonl", [record])
    parquet = tmp_path / "lanes.parquet"
    convert([str(source)], str(parquet))
    assert assembled([parquet], tmp_path / "b.jsonl") == assembled([source], tmp_path / "a.jsonl")
    assert b"ZZ-UNKNOWN" not in parquet.read_bytes()


def test_convert_keeps_plan_lane_floor(tmp_path: Path, write_jsonl: JsonlWriter, make_record: RecordFactory) -> None:
    record = make_record()
    record["plan_lanes"] = {"passages": {"ran": True, "floor": 0.25}}
    source = write_jsonl("in.jsonl", [record])
    parquet = tmp_path / "lanes.parquet"
    convert([str(source)], str(parquet))
    original = assembled([source], tmp_path / "a.jsonl")
    assert b'"passages":{"ran":true,"floor":0.25}' in original
    assert assembled([parquet], tmp_path / "b.jsonl") == original


def test_convert_bad_record_stops_and_leaves_no_output(
    tmp_path: Path, write_jsonl: JsonlWriter, make_record: RecordFactory
) -> None:
    source = write_jsonl("in.jsonl", [make_record("a"), make_record("b"), bad_record(make_record, "c")])
    for name in ("lanes.parquet", "lanes.jsonl"):
        with pytest.raises(InputError) as caught:
            convert([str(source)], str(tmp_path / name), chunk_size=1)
        assert (caught.value.error.line, caught.value.error.query_id) == (3, "c")
    assert os.listdir(tmp_path) == ["in.jsonl"]


def test_convert_skip_keeps_good_rows_and_sets_aside_bad_ones(
    tmp_path: Path, write_jsonl: JsonlWriter, make_record: RecordFactory
) -> None:
    source = write_jsonl("in.jsonl", [make_record("a"), bad_record(make_record, "b"), make_record("c")])
    parquet, errors = tmp_path / "lanes.parquet", tmp_path / "errors.jsonl"
    summary = convert([str(source)], str(parquet), on_error="skip", errors_path=str(errors))
    assert (summary.queries, summary.rejected) == (2, 1)
    assert pq.read_table(parquet).column("query_id").to_pylist() == ["a", "c"]
    (entry,) = [json.loads(line) for line in errors.read_text().splitlines()]
    assert entry["record"] == source.read_text().splitlines()[1]


def test_assemble_batch_over_a_frame_read_from_parquet_equals_the_jsonl_run(tmp_path: Path) -> None:
    import polars as pl

    from assembler import assemble_batch

    parquet = tmp_path / "lanes.parquet"
    convert([str(CONFORMANCE)], str(parquet))
    result = assemble_batch(pl.read_parquet(parquet))
    expected = CONFORMANCE.with_name("expected.jsonl").read_text(encoding="utf-8")
    assert "".join(package_line(q, p) for q, p in zip(result.query_ids, result.packages, strict=True)) == expected


def test_a_run_does_not_import_pandas(tmp_path: Path) -> None:
    """pyarrow's ``pa.array``, ``pa.scalar`` and ``to_numpy`` import pandas (when it is installed)
    on first use: 0.13 to 0.3 s of every process's start, worker processes included."""
    script = (
        "import sys\n"
        "from assembler.run.local import run_assembly\n"
        "from assembler.run.options import RunOptions\n"
        f"run_assembly({str(SAMPLE)!r}, {str(tmp_path / 'a.jsonl')!r}, RunOptions(workers=1))\n"
        f"parquet = RunOptions(workers=1, output_format='parquet')\n"
        f"run_assembly({str(SAMPLE)!r}, {str(tmp_path / 'a.parquet')!r}, parquet)\n"
        "assert 'pandas' not in sys.modules, 'pandas was imported'\n"
    )
    subprocess.run([sys.executable, "-c", script], check=True, cwd=tmp_path)


def test_a_run_in_one_process_does_not_load_the_pools_modules(tmp_path: Path) -> None:
    """Guards the start-up: the pool's modules, its part files and ``multiprocessing`` load only for a
    pool; a run with ``workers=2`` loads them."""
    pooled = ("assembler.run.pool", "assembler.run.parts", "multiprocessing")
    script = (
        "import sys\n"
        "from assembler.run.local import run_assembly\n"
        "from assembler.run.options import RunOptions\n"
        "options = RunOptions(workers=int(sys.argv[1]), chunk_size=8)\n"
        f"run_assembly({str(SAMPLE)!r}, {str(tmp_path / 'a.jsonl')!r}, options)\n"
        f"print([name for name in {pooled!r} if name in sys.modules])\n"
    )

    def loaded(workers: int) -> str:
        done = subprocess.run(
            [sys.executable, "-c", script, str(workers)], check=True, cwd=tmp_path, capture_output=True
        )
        return done.stdout.decode().strip()

    assert loaded(1) == "[]"
    assert loaded(2) == str(list(pooled))


# --- what a run does that its packages do not say: counted in the summary ----------------------------


def budgeted(make_record: RecordFactory, query_id: str, budget: dict[str, Any]) -> dict[str, Any]:
    record = make_record(query_id)
    record["request"]["budget"] = budget
    return record


def test_budget_keys_that_are_no_budget_field_are_counted_once_per_run(
    tmp_path: Path, write_jsonl: JsonlWriter, make_record: RecordFactory
) -> None:
    records = [budgeted(make_record, f"q{i}", {"max_item": 1, "max_bytes": 900}) for i in range(5)]
    source = write_jsonl("in.jsonl", [*records, make_record("plain")])
    summary = run_assembly([str(source)], str(tmp_path / "out.jsonl"), RunOptions(chunk_size=2))
    assert summary.ignored_budget_keys == {"max_item": 5}
    assert summary.warnings() == [
        "budget key 'max_item' is not a budget field (ignored in 5 records; fields: max_items, max_bytes, max_tokens)"
    ]


def test_budgets_above_the_ceilings_are_counted_per_field_overrides_included(
    tmp_path: Path, write_jsonl: JsonlWriter, make_record: RecordFactory
) -> None:
    records = [budgeted(make_record, f"q{i}", {"max_bytes": 10**9}) for i in range(3)]
    source = write_jsonl("in.jsonl", [*records, budgeted(make_record, "big", {"max_items": 5000}), make_record("ok")])
    summary = run_assembly([str(source)], str(tmp_path / "out.jsonl"), RunOptions(chunk_size=2))
    assert summary.clamped_budgets == {"max_bytes": 3, "max_items": 1}
    assert "budget max_bytes above the ceiling 1048576 clamped to it in 3 records" in summary.warnings()
    overridden = run_assembly([str(source)], str(tmp_path / "o.jsonl"), RunOptions(overrides={"max_items": 1001}))
    assert overridden.clamped_budgets == {"max_bytes": 3, "max_items": 5}


def test_a_rejected_record_budget_is_not_counted(
    tmp_path: Path, write_jsonl: JsonlWriter, make_record: RecordFactory
) -> None:
    bad = bad_record(make_record, "bad")
    bad["request"]["budget"] = {"max_item": 1, "max_bytes": 10**9}
    source = write_jsonl("in.jsonl", [bad, make_record("ok")])
    errors = tmp_path / "errors.jsonl"
    summary = run_assembly(
        [str(source)], str(tmp_path / "out.jsonl"), RunOptions(on_error="skip", errors_path=str(errors))
    )
    assert (summary.rejected, summary.ignored_budget_keys, summary.clamped_budgets) == (1, {}, {})


def test_budget_keys_are_shown_escaped_and_at_most_ten_are_named(
    tmp_path: Path, write_jsonl: JsonlWriter, make_record: RecordFactory
) -> None:
    hostile = "\x1b[2J" + "k" * 500
    records = [budgeted(make_record, "esc", {hostile: 1})]
    records += [budgeted(make_record, f"q{i}", {f"key{i}": 1}) for i in range(12)]
    source = write_jsonl("in.jsonl", records)
    summary = run_assembly([str(source)], str(tmp_path / "out.jsonl"))
    assert len(summary.ignored_budget_keys) == 10 and summary.other_ignored_budget_keys == 3
    first = next(iter(summary.ignored_budget_keys))
    assert first.startswith("\\x1b[2Jkkk") and first.endswith("…(424 more)")
    assert summary.warnings()[-1] == "budget keys beyond these 10 are not budget fields either (ignored in 3 records)"


def test_a_parquet_budget_field_that_is_null_is_absent_not_an_ignored_key(
    tmp_path: Path, make_record: RecordFactory
) -> None:
    import pyarrow as pa

    records = [budgeted(make_record, "typo", {"max_item": 1}), budgeted(make_record, "fine", {"max_items": 2})]
    source = tmp_path / "in.parquet"
    pq.write_table(pa.Table.from_pylist(records), source)  # one budget struct: both rows hold both fields
    summary = run_assembly([str(source)], str(tmp_path / "out.jsonl"))
    assert summary.queries == 2 and summary.ignored_budget_keys == {"max_item": 1}


@pytest.mark.parametrize("name", ["out.parquet", "out.PARQUET", "out.Pq"])
def test_an_output_named_parquet_in_any_case_is_written_as_parquet(tmp_path: Path, name: str) -> None:
    out = tmp_path / name
    run_assembly([str(CONFORMANCE)], str(out))
    assert pq.read_table(out).num_rows == 5


@pytest.mark.parametrize("name", ["out.csv", "out.jsonl.gz", "out.txt"])
def test_an_output_whose_extension_names_no_format_is_refused_unless_given(tmp_path: Path, name: str) -> None:
    out = tmp_path / name
    with pytest.raises(
        UsageError, match=rf"cannot tell the format of output .*{name} from its extension .*output_format"
    ):
        run_assembly([str(CONFORMANCE)], str(out))
    assert os.listdir(tmp_path) == []
    run_assembly([str(CONFORMANCE)], str(out), RunOptions(output_format="jsonl"))
    assert out.read_bytes() == EXPECTED.read_bytes()


def test_an_assessment_into_a_parquet_name_is_refused(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="JSON Lines only"):
        run_assembly([str(CONFORMANCE)], str(tmp_path / "out.parquet"), RunOptions(assess=True))


def test_convert_reads_the_output_format_by_the_same_rule(tmp_path: Path) -> None:
    convert([str(CONFORMANCE)], str(tmp_path / "lanes.PARQUET"))
    assert pq.read_table(tmp_path / "lanes.PARQUET").num_rows == 5
    with pytest.raises(UsageError, match="cannot tell the format of output"):
        convert([str(CONFORMANCE)], str(tmp_path / "lanes.csv"))
