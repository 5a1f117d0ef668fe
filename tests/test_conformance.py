"""The five contract fixtures reproduce byte for byte, as text."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from assembler import assemble_batch
from assembler.run.outputs import package_line

DATA = Path(__file__).resolve().parent.parent / "data" / "conformance"
FIXTURES = DATA / "fixtures"  # the shared fixtures, committed verbatim
RECORDS = [json.loads(line) for line in (DATA / "lanes.jsonl").read_text(encoding="utf-8").splitlines()]
EXPECTED = (DATA / "expected.jsonl").read_text(encoding="utf-8").splitlines(keepends=True)
IDS = [record["query_id"] for record in RECORDS]


@pytest.mark.parametrize("index", range(len(RECORDS)), ids=IDS)
def test_fixture_package_text_is_byte_identical(index: int) -> None:
    result = assemble_batch([RECORDS[index]])
    assert package_line(result.query_ids[0], result.packages[0]) == EXPECTED[index]


def test_all_fixtures_in_one_batch_match_each_alone() -> None:
    result = assemble_batch(RECORDS)
    assert [package_line(q, p) for q, p in zip(result.query_ids, result.packages, strict=True)] == EXPECTED


@pytest.mark.parametrize("query_id", IDS)
def test_committed_expectation_matches_the_shared_fixture(query_id: str) -> None:
    """data/conformance is a faithful conversion of the shared fixtures (same values)."""
    fixture = json.loads((FIXTURES / f"{query_id}.json").read_text(encoding="utf-8"))
    line = json.loads(EXPECTED[IDS.index(query_id)])
    assert line["package"] == fixture["expected_response"]


def test_item_bytes_equal_the_item_text_without_its_own_measurement_keys() -> None:
    """Section 8.2: removing `,"bytes":N,"estimated_tokens":M` leaves exactly N bytes."""
    import re

    for package in assemble_batch(RECORDS).packages:
        for match in re.finditer(r',"bytes":(\d+),"estimated_tokens":(\d+)', package):
            start = package.rfind('{"candidate_id"', 0, match.start())
            depth, end = 0, start
            for end in range(start, len(package)):
                depth += {"{": 1, "}": -1}.get(package[end], 0)
                if depth == 0:
                    break
            item = package[start : end + 1].replace(match.group(0), "")
            assert len(item.encode("utf-8")) == int(match.group(1))
