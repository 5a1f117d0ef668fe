"""The U7 rules R1-R8 and the spec's edge cases E1-E23 (``shared/spec/lexery-u7.md``), one by one."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from assembler.assess import AssessOptions, assess_batch, assess_run, format_timestamp, result_lines
from assembler.errors import InputError

NOW = datetime(2026, 4, 9, 12, 0, tzinfo=UTC)
STAMP = "2026-04-09T12:00:00.000Z"


def clock() -> datetime:
    return NOW


def hits(*paths: str | None, **extra: Any) -> list[dict[str, Any]]:
    """RawHits with the given citation paths (``None``: no ``citation_path`` key)."""
    made = []
    for i, path in enumerate(paths):
        hit: dict[str, Any] = {"r2_key": f"acts/k/{i}.json", "json_path": "$.text", "score": 0.5, **extra}
        if path is not None:
            hit["citation_path"] = path
        made.append(hit)
    return made


def n_hits(count: int) -> list[dict[str, Any]]:
    return hits(*(f"ст. {i}" for i in range(count)))


def assess(options: AssessOptions | None = None, **fields: Any) -> dict[str, Any]:
    return assess_run({"run_id": "r", **fields}, clock=clock, options=options or AssessOptions())


def cm(mode: str) -> dict[str, Any]:
    return {"routing_flags": {"context_mode": mode}}


MEM = [{"id": "m1"}]
DOCS = [{"doc_id": "d", "text": "t", "score": 1.0, "r2_key": "k", "json_path": "$"}]


# --- the spec's worked example (section 6) and the output shape ---------------------------------


def test_worked_example_of_section_6() -> None:
    result = assess(
        raw_hits=hits("ст. 36", "ст. 36", "ст. 40 ч. 1"),
        query_profile=cm("mixed"),
        retrieval_trace={"meta": {"coverage_gap": "none"}},
    )
    assert result == {
        "mode": "mixed",
        "source_counts": {"law": 3, "memory": 0, "history": 0, "doc": 0},
        "coverage_gap_status": "none",
        "unresolved_gaps": [],
        "support_level": "strong",
        "required_citation_refs": ["ст. 36", "ст. 40 ч. 1"],
        "version": 1,
        "assembled_at": STAMP,
    }
    assert list(result) == [
        "mode",
        "source_counts",
        "coverage_gap_status",
        "unresolved_gaps",
        "support_level",
        "required_citation_refs",
        "version",
        "assembled_at",
    ]


# --- E1-E23 -------------------------------------------------------------------------------------


def test_e1_only_run_id() -> None:
    result = assess()
    assert result["source_counts"] == {"law": 0, "memory": 0, "history": 0, "doc": 0}
    assert (result["mode"], result["coverage_gap_status"], result["support_level"]) == ("memory_only", "none", "weak")
    assert result["unresolved_gaps"] == [] and result["required_citation_refs"] == []


def test_e1_every_field_null_is_the_same_as_absent() -> None:
    nulls = dict.fromkeys(
        [
            "raw_hits",
            "retrieval_trace",
            "memory_items",
            "memory_summaries",
            "history",
            "doc_snippets",
            "query_profile",
            "doclist_trace",
            "clarification",
        ]
    )
    assert assess(**nulls) == assess()


def test_e2_memory_only() -> None:
    result = assess(raw_hits=[], memory_items=[{"id": "a"}, {"id": "b"}], query_profile=cm("memory"))
    assert (result["mode"], result["support_level"]) == ("memory_only", "partial")
    assert result["source_counts"]["memory"] == 2


def test_e3_docs_only() -> None:
    result = assess(raw_hits=[], doc_snippets=DOCS * 3)
    assert (result["mode"], result["support_level"], result["required_citation_refs"]) == ("docs_only", "partial", [])


def test_e4_law_with_memory_is_mixed_and_strong() -> None:
    result = assess(raw_hits=n_hits(4), memory_items=MEM)
    assert (result["mode"], result["support_level"]) == ("mixed", "strong")


def test_e5_mixed_correction() -> None:
    result = assess(raw_hits=n_hits(2), query_profile=cm("mixed"))
    assert (result["mode"], result["support_level"]) == ("mixed", "partial")


def test_e6_no_correction_without_law() -> None:
    assert assess(raw_hits=[], memory_items=MEM, query_profile=cm("mixed"))["mode"] == "memory_only"


def test_e7_raw_hits_win_over_the_trace() -> None:
    result = assess(raw_hits=hits("a", "b"), retrieval_trace={"hits": hits("c", "d", "e", "f", "g")})
    assert result["source_counts"]["law"] == 2
    assert result["required_citation_refs"] == ["a", "b"]


def test_e8_trace_hits_when_raw_hits_missing() -> None:
    result = assess(retrieval_trace={"hits": hits("c", "d", "e", "f", "g")})
    assert result["source_counts"]["law"] == 5
    assert result["required_citation_refs"] == ["c", "d", "e", "f", "g"]


def test_e8_raw_hits_null_falls_to_the_trace() -> None:
    assert assess(raw_hits=None, retrieval_trace={"hits": n_hits(5)})["source_counts"]["law"] == 5


def test_e9_present_but_empty_raw_hits_win() -> None:
    result = assess(raw_hits=[], retrieval_trace={"hits": n_hits(5)})
    assert result["source_counts"]["law"] == 0
    assert (result["support_level"], result["required_citation_refs"]) == ("weak", [])


def test_e9_fall_through_option() -> None:
    options = AssessOptions(empty_raw_hits_fall_through=True)
    result = assess(options, raw_hits=[], retrieval_trace={"hits": n_hits(5)})
    assert result["source_counts"]["law"] == 5
    assert result["support_level"] == "strong"
    assert assess(options, raw_hits=hits("x"), retrieval_trace={"hits": n_hits(5)})["source_counts"]["law"] == 1
    assert assess(options, raw_hits=[])["source_counts"]["law"] == 0


def test_e10_doclist_status_wins() -> None:
    result = assess(
        raw_hits=n_hits(5),
        doclist_trace={"corpus_gap_status": "likely_missing_act"},
        retrieval_trace={"meta": {"coverage_gap": "none"}},
    )
    assert result["coverage_gap_status"] == "likely_missing_act"
    assert result["unresolved_gaps"] == ["coverage_gap:likely_missing_act"]
    assert result["support_level"] == "partial"


def test_e11_retrieval_meta_when_doclist_has_no_status() -> None:
    result = assess(retrieval_trace={"meta": {"coverage_gap": "weak_evidence"}}, doclist_trace={"reason_code": None})
    assert result["coverage_gap_status"] == "weak_evidence"
    assert "coverage_gap:weak_evidence" in result["unresolved_gaps"]


def test_e12_doclist_none_is_present_and_stops_the_chain() -> None:
    result = assess(
        raw_hits=n_hits(3),
        doclist_trace={"corpus_gap_status": "none"},
        retrieval_trace={"meta": {"coverage_gap": "weak_evidence"}},
    )
    assert (result["coverage_gap_status"], result["unresolved_gaps"], result["support_level"]) == ("none", [], "strong")


@pytest.mark.parametrize("blank", ["", "   ", "\t\u3000\ufeff"])
def test_r4_a_blank_status_is_not_present(blank: str) -> None:
    result = assess(doclist_trace={"corpus_gap_status": blank}, retrieval_trace={"meta": {"coverage_gap": blank}})
    assert result["coverage_gap_status"] == "none"
    result = assess(doclist_trace={"corpus_gap_status": blank}, retrieval_trace={"meta": {"coverage_gap": "x"}})
    assert result["coverage_gap_status"] == "x"


def test_r4_status_is_copied_verbatim_untrimmed() -> None:
    result = assess(doclist_trace={"corpus_gap_status": " Likely_Missing_Act "})
    assert result["coverage_gap_status"] == " Likely_Missing_Act "
    assert result["unresolved_gaps"] == ["coverage_gap: Likely_Missing_Act "]


def test_e13_reason_code_without_status() -> None:
    result = assess(
        raw_hits=[],
        doclist_trace={"reason_code": "ACT_FOUND_IN_CATALOG_NOT_INDEXED"},
        retrieval_trace={"meta": {"coverage_gap": "none"}},
    )
    assert result["coverage_gap_status"] == "none"
    assert result["unresolved_gaps"] == ["doclist:ACT_FOUND_IN_CATALOG_NOT_INDEXED"]
    assert result["support_level"] == "weak"


@pytest.mark.parametrize(
    "code",
    [
        "ACT_FOUND_IN_CATALOG_NOT_INDEXED",
        "ACT_NOT_FOUND_IN_CATALOG",
        "AMBIGUOUS_ACT_MATCH",
        "ACT_FOUND_BUT_ARTICLE_NOT_RETRIEVED",
        "some_future_code",
    ],
)
def test_e14_every_reason_code_is_passed_through(code: str) -> None:
    assert assess(doclist_trace={"reason_code": code})["unresolved_gaps"] == [f"doclist:{code}"]


def test_e15_ambiguous_match_with_pending_clarification() -> None:
    result = assess(doclist_trace={"reason_code": "AMBIGUOUS_ACT_MATCH"}, clarification={"status": "pending"})
    assert result["unresolved_gaps"] == ["doclist:AMBIGUOUS_ACT_MATCH", "clarification_pending"]


def test_e16_answered_clarification_keeps_the_doclist_marker() -> None:
    result = assess(doclist_trace={"reason_code": "AMBIGUOUS_ACT_MATCH"}, clarification={"status": "answered"})
    assert result["unresolved_gaps"] == ["doclist:AMBIGUOUS_ACT_MATCH"]


@pytest.mark.parametrize("status", ["answered", "PENDING", "Pending", " pending", "asked", None])
def test_r5_only_exactly_pending_is_pending(status: str | None) -> None:
    assert "clarification_pending" not in assess(clarification={"status": status})["unresolved_gaps"]


def test_r5_marker_order_is_coverage_doclist_clarification() -> None:
    result = assess(
        clarification={"status": "pending"},
        doclist_trace={"reason_code": "AMBIGUOUS_ACT_MATCH", "corpus_gap_status": "out_of_scope"},
    )
    assert result["unresolved_gaps"] == [
        "coverage_gap:out_of_scope",
        "doclist:AMBIGUOUS_ACT_MATCH",
        "clarification_pending",
    ]


def test_e17_reason_codes_do_not_affect_support() -> None:
    result = assess(raw_hits=n_hits(5), doclist_trace={"reason_code": "AMBIGUOUS_ACT_MATCH"})
    assert result["support_level"] == "strong"
    result = assess(raw_hits=n_hits(5), clarification={"status": "pending"})
    assert result["support_level"] == "strong"


def test_e18_first_six_distinct_paths_in_hit_order() -> None:
    paths = ["ст. 8", "ст. 1", "ст. 8", "ст. 2", "ст. 3", "ст. 1", "ст. 4", "ст. 5", "ст. 6", "ст. 7"]
    result = assess(raw_hits=hits(*paths))
    assert result["source_counts"]["law"] == 10
    assert result["required_citation_refs"] == ["ст. 8", "ст. 1", "ст. 2", "ст. 3", "ст. 4", "ст. 5"]


def test_e19_null_and_blank_paths_are_skipped_but_counted() -> None:
    result = assess(raw_hits=[*hits(None, "", "  \n"), {"citation_path": None}, *hits("ст. 9")])
    assert result["source_counts"]["law"] == 5
    assert result["required_citation_refs"] == ["ст. 9"]


def test_e20_metadata_citation_path_is_the_fallback() -> None:
    result = assess(raw_hits=[{"metadata": {"citation_path": "ст. 185 примітка 1"}}, {"metadata": None}])
    assert result["required_citation_refs"] == ["ст. 185 примітка 1"]


def test_r7_the_field_wins_over_metadata_and_a_blank_field_falls_back() -> None:
    result = assess(
        raw_hits=[
            {"citation_path": "ст. 1", "metadata": {"citation_path": "ст. 2"}},
            {"citation_path": "   ", "metadata": {"citation_path": "ст. 3"}},
        ]
    )
    assert result["required_citation_refs"] == ["ст. 1", "ст. 3"]


def test_e21_history_does_not_change_mode() -> None:
    result = assess(raw_hits=n_hits(3), history=[{"role": "user", "content": "?"}] * 4)
    assert (result["mode"], result["support_level"]) == ("law", "strong")
    assert result["source_counts"]["history"] == 4


def test_e22_history_alone_is_not_evidence() -> None:
    result = assess(history=[{"role": "user", "content": "?"}] * 6)
    assert (result["support_level"], result["mode"]) == ("weak", "memory_only")


def test_e22_history_option_counts_it() -> None:
    options = AssessOptions(history_is_evidence=True)
    assert assess(options, history=[{"role": "user", "content": "?"}])["support_level"] == "partial"
    assert assess(options)["support_level"] == "weak"


@pytest.mark.parametrize("status", ["partial_coverage", "NONE", "None", "Weak_Evidence"])
def test_e23_unexpected_status_passes_through(status: str) -> None:
    result = assess(raw_hits=n_hits(3), retrieval_trace={"meta": {"coverage_gap": status}})
    assert result["coverage_gap_status"] == status
    assert result["unresolved_gaps"] == [f"coverage_gap:{status}"]
    assert result["support_level"] == "partial"


# --- R2 counts ----------------------------------------------------------------------------------


def test_r2_memory_is_items_plus_summaries() -> None:
    result = assess(memory_items=MEM * 2, memory_summaries=[{"summary_text": "s"}] * 3, doc_snippets=DOCS)
    assert result["source_counts"] == {"law": 0, "memory": 5, "history": 0, "doc": 1}


def test_r1_hits_are_counted_without_dedup_or_filter() -> None:
    assert assess(raw_hits=hits("x", "x", None, "x"))["source_counts"]["law"] == 4


# --- R6 thresholds at their boundaries ----------------------------------------------------------


@pytest.mark.parametrize(("law", "level"), [(0, "weak"), (1, "partial"), (2, "partial"), (3, "strong"), (10, "strong")])
def test_r6_law_count_boundary(law: int, level: str) -> None:
    assert assess(raw_hits=n_hits(law))["support_level"] == level


@pytest.mark.parametrize("gap", ["weak_evidence", "likely_missing_act", "out_of_scope", "partial_coverage"])
def test_r6_any_gap_stops_strong(gap: str) -> None:
    assert assess(raw_hits=n_hits(10), retrieval_trace={"meta": {"coverage_gap": gap}})["support_level"] == "partial"
    assert assess(raw_hits=n_hits(10), doclist_trace={"corpus_gap_status": gap})["support_level"] == "partial"


def test_r6_gap_none_explicit_or_defaulted_allows_strong() -> None:
    assert assess(raw_hits=n_hits(3), retrieval_trace={"meta": {"coverage_gap": "none"}})["support_level"] == "strong"
    assert assess(raw_hits=n_hits(3), retrieval_trace={"meta": {}})["support_level"] == "strong"


def test_r6_weak_needs_no_evidence_at_all() -> None:
    assert assess(doc_snippets=DOCS)["support_level"] == "partial"
    assert assess(memory_summaries=[{"summary_text": "s"}])["support_level"] == "partial"
    assert assess(retrieval_trace={"meta": {"coverage_gap": "weak_evidence"}})["support_level"] == "weak"


# --- R3 the decision table, and the alternative reading -----------------------------------------

TABLE = [
    # law, memory, docs, context_mode, mode
    (2, 0, 0, "law", "law"),
    (2, 0, 0, "memory", "law"),
    (2, 0, 0, None, "law"),
    (2, 0, 0, "mixed", "mixed"),
    (2, 1, 0, "law", "mixed"),
    (2, 0, 1, None, "mixed"),
    (2, 1, 1, "memory", "mixed"),
    (0, 1, 0, "mixed", "memory_only"),
    (0, 0, 1, "mixed", "docs_only"),
    (0, 0, 1, None, "docs_only"),
    (0, 1, 1, None, "memory_only"),
    (0, 0, 0, "mixed", "memory_only"),
]


@pytest.mark.parametrize(("law", "memory", "docs", "mode", "expected"), TABLE)
def test_r3_decision_table(law: int, memory: int, docs: int, mode: str | None, expected: str) -> None:
    result = assess(
        raw_hits=n_hits(law),
        memory_items=MEM * memory,
        doc_snippets=DOCS * docs,
        query_profile=cm(mode) if mode else None,
    )
    assert result["mode"] == expected


@pytest.mark.parametrize(
    ("law", "memory", "docs", "mode", "expected"),
    [
        (2, 1, 0, "law", "law"),  # differs from the table: law present, memory ignored
        (2, 0, 1, None, "law"),  # differs
        (2, 1, 0, "mixed", "mixed"),  # the correction still applies
        (2, 0, 0, "mixed", "mixed"),
        (0, 1, 1, None, "mixed"),  # differs: no law, memory and docs
        (0, 0, 1, None, "docs_only"),
        (0, 1, 0, "mixed", "memory_only"),
        (0, 0, 0, None, "memory_only"),
    ],
)
def test_r3_law_first_reading(law: int, memory: int, docs: int, mode: str | None, expected: str) -> None:
    result = assess(
        AssessOptions(mode_rule="law_first"),
        raw_hits=n_hits(law),
        memory_items=MEM * memory,
        doc_snippets=DOCS * docs,
        query_profile=cm(mode) if mode else None,
    )
    assert result["mode"] == expected


def test_r3_history_never_affects_mode() -> None:
    history = [{"role": "user", "content": "x"}]
    for law, memory, docs, mode, expected in TABLE:
        result = assess(
            raw_hits=n_hits(law),
            memory_items=MEM * memory,
            doc_snippets=DOCS * docs,
            history=history,
            query_profile=cm(mode) if mode else None,
        )
        assert result["mode"] == expected


def test_r3_context_mode_path_routing_flags_first_then_top_level() -> None:
    assert assess(raw_hits=n_hits(1), query_profile={"context_mode": "mixed"})["mode"] == "mixed"
    profile = {"context_mode": "mixed", "routing_flags": {"context_mode": "law"}}
    assert assess(raw_hits=n_hits(1), query_profile=profile)["mode"] == "law"
    profile = {"context_mode": "mixed", "routing_flags": {"context_mode": None}}
    assert assess(raw_hits=n_hits(1), query_profile=profile)["mode"] == "mixed"
    assert assess(raw_hits=n_hits(1), query_profile=cm("Mixed"))["mode"] == "law"


# --- R7 the cap of six, duplicates, blanks, options ---------------------------------------------


def test_r7_cap_of_six_with_duplicates_and_blanks() -> None:
    paths = ["a", "", "a", None, " b ", "b", "  ", "c", "d", "e", "e", "f", "g", "h"]
    result = assess(raw_hits=hits(*paths))
    assert result["required_citation_refs"] == ["a", "b", "c", "d", "e", "f"]
    assert result["source_counts"]["law"] == len(paths)


def test_r7_exactly_six_and_fewer() -> None:
    assert assess(raw_hits=n_hits(6))["required_citation_refs"] == [f"ст. {i}" for i in range(6)]
    assert assess(raw_hits=n_hits(7))["required_citation_refs"] == [f"ст. {i}" for i in range(6)]
    assert assess(raw_hits=n_hits(5))["required_citation_refs"] == [f"ст. {i}" for i in range(5)]


def test_r7_exact_string_dedup_by_default() -> None:
    result = assess(raw_hits=hits("ст. 36", "Ст. 36", "ст.  36", "ст. 36 ", "ст. 36–1", "ст. 36-1"))
    assert result["required_citation_refs"] == ["ст. 36", "Ст. 36", "ст.  36", "ст. 36–1", "ст. 36-1"]


def test_r7_normalized_dedup_keeps_the_first_spelling() -> None:
    options = AssessOptions(normalize_citation_refs=True)
    result = assess(options, raw_hits=hits("Ст. 36", "ст. 36", "ст.\u00a0\u00a036", "ст. 36–1", "ст. 36-1", "ст. 37"))
    assert result["required_citation_refs"] == ["Ст. 36", "ст. 36–1", "ст. 37"]
    composed, decomposed = "ст. 36 й", "ст. 36 \u0438\u0306"  # NFC-equal spellings
    assert assess(options, raw_hits=hits(decomposed, composed))["required_citation_refs"] == [decomposed]
    assert assess(raw_hits=hits(decomposed, composed))["required_citation_refs"] == [decomposed, composed]


def test_r7_act_qualified_refs() -> None:
    options = AssessOptions(qualify_citation_refs=True)
    raw = [
        {"citation_path": "ст. 36", "rada_nreg": "322-08"},
        {"citation_path": "ст. 36", "rada_nreg": "2341-14"},
        {"citation_path": "ст. 36", "rada_nreg": "322-08"},
        {"citation_path": "ст. 36"},
        {"citation_path": "ст. 40", "rada_nreg": " "},
    ]
    assert assess(options, raw_hits=raw)["required_citation_refs"] == [
        "322-08 ст. 36",
        "2341-14 ст. 36",
        "ст. 36",
        "ст. 40",
    ]
    assert assess(raw_hits=raw)["required_citation_refs"] == ["ст. 36", "ст. 40"]


@pytest.mark.parametrize(
    ("selectors", "path"),
    [
        ({"article_number": "36"}, "ст. 36"),
        ({"article_number": "36", "article_part_number": "1"}, "ст. 36 ч. 1"),
        ({"article_number": "36", "article_part_number": "1", "point_number": "2"}, "ст. 36 ч. 1 п. 2"),
        ({"point_number": "5", "subpoint_number": "3"}, "п. 5 пп. 3"),
        ({"article_number": "185", "note_number": "1"}, "ст. 185 примітка 1"),
        ({"article_part_number": "1", "paragraph_number": "2"}, None),  # no article, no point: nothing
        ({"note_number": "2"}, "примітка 2"),
        ({"unit_type": "point", "unit_number": "7"}, "п. 7"),
        ({"article_number": "3", "unit_type": "subpoint", "unit_number": "4"}, "ст. 3 пп. 4"),
        ({"article_number": " 12 ", "paragraph_number": "3"}, "ст. 12 абз. 3"),
        ({"article_number": 36}, None),  # non-strings are ignored, as the bridge reads them
        ({"metadata": {"article_number": "9", "point_number": "1"}}, "ст. 9 п. 1"),
        ({"article_number": "9", "metadata": {"article_number": "8"}}, "ст. 9"),
        ({"citation_path": "ст. 1", "article_number": "2"}, "ст. 1"),
    ],
)
def test_r7_built_paths_from_selectors(selectors: dict[str, Any], path: str | None) -> None:
    result = assess(AssessOptions(build_citation_paths=True), raw_hits=[selectors])
    assert result["required_citation_refs"] == ([] if path is None else [path])
    assert assess(raw_hits=[selectors])["required_citation_refs"] == (["ст. 1"] if "citation_path" in selectors else [])


def test_r7_refs_only_from_the_chosen_hit_list() -> None:
    result = assess(raw_hits=hits(None), retrieval_trace={"hits": hits("ст. 1")})
    assert result["required_citation_refs"] == []


# --- R8 version, assembled_at, the clock --------------------------------------------------------


def test_r8_timestamp_formats() -> None:
    assert format_timestamp(datetime(2026, 4, 9, 12, 0, 1, 987654, tzinfo=UTC)) == "2026-04-09T12:00:01.987Z"
    kyiv = timezone(timedelta(hours=3))
    assert format_timestamp(datetime(2026, 4, 9, 15, 0, tzinfo=kyiv)) == "2026-04-09T12:00:00.000Z"
    assert format_timestamp(datetime(2026, 4, 9, 12, 0)) == "2026-04-09T12:00:00.000Z"


def test_r8_clock_is_read_once_per_batch() -> None:
    calls: list[int] = []

    def counting() -> datetime:
        calls.append(1)
        return NOW + timedelta(seconds=len(calls))

    frame = assess_batch([{"run_id": "a"}, {"run_id": "b"}, {"run_id": "c"}], clock=counting)
    assert len(calls) == 1
    assert frame["assembled_at"].to_list() == ["2026-04-09T12:00:01.000Z"] * 3
    assert frame["version"].to_list() == [1, 1, 1]


def test_r8_default_clock_is_now() -> None:
    before = datetime.now(UTC) - timedelta(seconds=1)
    stamp = assess_run({"run_id": "r"})["assembled_at"]
    assert datetime.fromisoformat(stamp) >= before


# --- the clarification resume flow ---------------------------------------------------------------


def test_clarification_resume_flow() -> None:
    asked = {
        "run_id": "run-42",
        "raw_hits": hits("ст. 21"),
        "doclist_trace": {"reason_code": "AMBIGUOUS_ACT_MATCH", "corpus_gap_status": "weak_evidence"},
        "clarification": {"status": "pending"},
    }
    first = assess_run(asked, clock=clock)
    assert first["unresolved_gaps"] == [
        "coverage_gap:weak_evidence",
        "doclist:AMBIGUOUS_ACT_MATCH",
        "clarification_pending",
    ]
    assert first["support_level"] == "partial"
    # The user answered; ORCH refreshed the DocList trace (act resolved) and retrieval found more.
    resumed = {
        **asked,
        "raw_hits": hits("ст. 21", "ст. 22", "ст. 23"),
        "doclist_trace": {"corpus_gap_status": "none"},
        "clarification": {"status": "answered"},
    }
    later = NOW + timedelta(minutes=5)
    second = assess_run(resumed, clock=lambda: later)
    assert second["unresolved_gaps"] == []
    assert second["support_level"] == "strong"
    assert second["required_citation_refs"] == ["ст. 21", "ст. 22", "ст. 23"]
    assert second["assembled_at"] == "2026-04-09T12:05:00.000Z"
    # Answered but the trace not refreshed: U7 keeps the doclist marker (U8 filters it), no pending.
    stale = assess_run({**asked, "clarification": {"status": "answered"}}, clock=clock)
    assert stale["unresolved_gaps"] == ["coverage_gap:weak_evidence", "doclist:AMBIGUOUS_ACT_MATCH"]
    # Recomputed from scratch every time: the first result is unchanged by the second.
    assert assess_run(asked, clock=clock) == first


# --- batch --------------------------------------------------------------------------------------


def test_batch_keeps_input_order_and_lines() -> None:
    contexts = [{"run_id": f"r{i}", "raw_hits": n_hits(i)} for i in range(5)][::-1]
    frame = assess_batch(contexts, clock=clock)
    assert frame["run_id"].to_list() == ["r4", "r3", "r2", "r1", "r0"]
    assert frame["support_level"].to_list() == ["strong", "strong", "partial", "partial", "weak"]
    lines = result_lines(frame)
    assert lines[2] == (
        '{"run_id":"r2","evidence_assembly":{"mode":"law","source_counts":{"law":2,"memory":0,"history":0,"doc":0},'
        '"coverage_gap_status":"none","unresolved_gaps":[],"support_level":"partial",'
        f'"required_citation_refs":["ст. 0","ст. 1"],"version":1,"assembled_at":"{STAMP}"}}}}'
    )


def test_batch_of_nothing() -> None:
    frame = assess_batch([], clock=clock)
    assert frame.height == 0
    assert result_lines(frame) == []


def test_batch_rejects_a_repeated_run_id() -> None:
    with pytest.raises(InputError) as caught:
        assess_batch([{"run_id": "a"}, {"run_id": "b"}, {"run_id": "a"}])
    assert str(caught.value) == "<memory>:3: run_id 'a' field run_id: duplicate run_id (each run may appear once)"
