"""Property tests: the columnar U7 batch equals a plain per-run oracle; refs stay capped, unique, present."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st

from assembler import assemble_batch
from assembler.assess import AssessOptions, assess_batch, assess_packages, result_lines
from assembler.contract.jsontext import escape_string
from tests.assess.u7_reference import js_trim, reference
from tests.strategies import lane_batches

PROPERTY = settings(max_examples=60, deadline=None)
NOW = datetime(2026, 4, 9, tzinfo=UTC)

PATHS = st.sampled_from(
    ["ст. 36", "ст. 36 ", "Ст. 36", "ст.  36", "ст. 36–1", "ст. 36-1", "п. 5", "", "   ", "\u3000ст. 1\ufeff", "x"]
)
STATUSES = st.sampled_from(["none", "None", "weak_evidence", "likely_missing_act", "", "  ", "partial_coverage"])
MODES = st.sampled_from(["law", "memory", "mixed", "Mixed"])


def maybe(strategy: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(st.none(), strategy)


@st.composite
def law_hits(draw: st.DrawFn) -> dict[str, Any]:
    hit: dict[str, Any] = {"score": 0.5}
    if draw(st.booleans()):
        hit["citation_path"] = draw(maybe(PATHS))
    if draw(st.booleans()):
        hit["metadata"] = draw(maybe(st.fixed_dictionaries({}, optional={"citation_path": maybe(PATHS)})))
    return hit


def objects(max_size: int) -> st.SearchStrategy[Any]:
    return maybe(st.lists(st.just({"k": 1}), max_size=max_size))


@st.composite
def run_contexts(draw: st.DrawFn, run_id: str) -> dict[str, Any]:
    hits = st.lists(law_hits(), max_size=9)
    optional = {
        "raw_hits": maybe(hits),
        "retrieval_trace": maybe(
            st.fixed_dictionaries(
                {},
                optional={"hits": maybe(hits), "meta": maybe(st.fixed_dictionaries({"coverage_gap": maybe(STATUSES)}))},
            )
        ),
        "memory_items": objects(2),
        "memory_summaries": objects(2),
        "history": objects(2),
        "doc_snippets": objects(2),
        "query_profile": maybe(
            st.fixed_dictionaries(
                {},
                optional={
                    "context_mode": maybe(MODES),
                    "routing_flags": maybe(st.fixed_dictionaries({"context_mode": maybe(MODES)})),
                },
            )
        ),
        "doclist_trace": maybe(
            st.fixed_dictionaries(
                {},
                optional={
                    "corpus_gap_status": maybe(STATUSES),
                    "reason_code": maybe(st.sampled_from(["AMBIGUOUS_ACT_MATCH", "ACT_NOT_FOUND_IN_CATALOG", " "])),
                },
            )
        ),
        "clarification": maybe(st.fixed_dictionaries({"status": maybe(st.sampled_from(["pending", "answered"]))})),
    }
    context: dict[str, Any] = draw(st.fixed_dictionaries({}, optional=optional))
    return {"run_id": run_id, **context}


@st.composite
def batches(draw: st.DrawFn) -> list[dict[str, Any]]:
    size = draw(st.integers(min_value=1, max_value=5))
    return [draw(run_contexts(f"r{i}")) for i in range(size)]


@PROPERTY
@given(batches(), st.booleans(), st.booleans(), st.booleans())
def test_batch_equals_the_plain_oracle_and_refs_are_capped_unique_present(
    contexts: list[dict[str, Any]], fall_through: bool, history: bool, normalize: bool
) -> None:
    options = AssessOptions(
        empty_raw_hits_fall_through=fall_through, history_is_evidence=history, normalize_citation_refs=normalize
    )
    frame = assess_batch(contexts, clock=lambda: NOW, options=options)
    rows = frame.drop("run_id", "version", "assembled_at").to_dicts()
    expected = [reference(c, fall_through=fall_through, history=history, normalize=normalize) for c in contexts]
    assert rows == expected
    lines = [json.loads(line) for line in result_lines(frame)]
    assert [line["run_id"] for line in lines] == [c["run_id"] for c in contexts]
    assert [{k: v for k, v in line["evidence_assembly"].items() if k in expected[0]} for line in lines] == expected
    for context, row in zip(contexts, rows, strict=True):
        refs = row["required_citation_refs"]
        assert len(refs) <= 6
        assert len(set(refs)) == len(refs)
        present = set()
        for hit in [*(context.get("raw_hits") or []), *((context.get("retrieval_trace") or {}).get("hits") or [])]:
            for value in (hit.get("citation_path"), (hit.get("metadata") or {}).get("citation_path")):
                if isinstance(value, str):
                    present.add(js_trim(value))
        assert set(refs) <= present
        assert all(ref and ref == js_trim(ref) for ref in refs)


@settings(max_examples=20, deadline=None)
@given(lane_batches(max_size=3))
def test_package_assessment_invariants(records: list[dict[str, Any]]) -> None:
    packages = assemble_batch(records).packages
    frame = assess_packages(packages)
    for text, row in zip(packages, frame.to_dicts(), strict=True):
        package = json.loads(text)
        items = package["items"]
        assert sum(row["items_by_kind"].values()) == len(items) == package["budget"]["items_used"]
        assert sum(row["items_by_lane"].values()) == sum(len(item["lane_ranks"]) for item in items)
        assert (row["support_level"] == "none") == (not items)
        refs = [(ref["source"], ref["paragraph"]) for ref in row["required_citation_refs"]]
        assert len(refs) <= 6 and len(set(refs)) == len(refs)
        present = {(r["source"], r["paragraph"]) for item in items for r in item["citation_refs"]}
        present |= {(i["passage"]["source"], i["passage"]["paragraph"]) for i in items if i["kind"] == "passage"}
        assert set(refs) <= present
        if len(present) <= 6:
            assert set(refs) == present
        for name, plan in package["plan"]["lanes"].items():
            assert any(gap.startswith(f"lane:{name}:") for gap in row["unresolved_gaps"]) == (not plan["ran"])


@settings(max_examples=200, deadline=None)
@given(st.text())
def test_polars_json_strings_are_escape_string(text: str) -> None:
    encoded = pl.DataFrame({"a": [text]}).select(pl.struct("a").struct.json_encode()).item()
    assert encoded == '{"a":' + escape_string(text) + "}"
