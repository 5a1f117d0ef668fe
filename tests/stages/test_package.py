"""Package out (contract sections 8.2 and 9): item texts and their measurements, omission entries,
the package order of items, citations and omissions, and the package texts of a batch, on
hand-built fragments.

The expected texts are serialized from plain dicts by ``tests.oracle.reference.to_json`` (its own
emitter: ordered keys, contract float layout) and measured by hand or by
``tests.oracle.reference.measure``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from assembler.contract.request import Limits
from assembler.stages.package import (
    DUPLICATE_PASSAGE,
    MAX_LISTED_OMISSIONS,
    QUERY_SCHEMA,
    admitted_items,
    build_items,
    cited_entries,
    omitted_entries,
    package_texts,
)
from tests.oracle.key_order import ITEM_KEYS, PACKAGE_KEYS
from tests.oracle.reference import measure as reference_measure
from tests.oracle.reference import to_json

SEP = "\x00"
STAMP = re.compile(r',"bytes":(\d+),"estimated_tokens":(\d+)')
ITEM_COLUMNS = (
    "id_json",
    "kind",
    "fused_rank",
    "lane_ranks_json",
    "citation_refs_json",
    "corroboration_sources_json",
    "contradicts_json",
    "contradicts_bytes",
    "contradicts_quarters",
    "payload_json",
)
MEASURE_COLUMNS = ("fused_rank", "contradicts_bytes", "contradicts_quarters")


def attribution(source: str, paragraph: int | None) -> dict[str, Any]:
    return {"source": source, "weight": 1.0, "count": 1, "paragraph": paragraph, "section": None, "locator": None}


ASSOCIATION: dict[str, Any] = {
    "candidate_id": f"association{SEP}猫{SEP}is_a{SEP}哺乳類",
    "kind": "association",
    "fused_rank": 3,
    "lane_ranks": [{"lane": "graph_activate", "rank": 2}, {"lane": "graph_query", "rank": 1}],
    "citation_refs": [{"source": "a.md", "paragraph": 0}, {"source": "b.md", "paragraph": 4}],
    "corroboration": {
        "sources": ["a.md", "b.md", "z.md"],
        "attributions": [{"source": "a.md", "paragraph": 0}, {"source": "b.md", "paragraph": 4}],
    },
    "contradicts": [f"association{SEP}猫{SEP}is_a{SEP}犬", f"association{SEP}猫{SEP}is_a{SEP}魚"],
    "association": {
        "subject": "猫",
        "label": "is_a",
        "object": "哺乳類",
        "weight": -2.5,
        "count": 2,
        "attributions": [attribution("a.md", 0), attribution("b.md", 4), attribution("z.md", None)],
    },
}
PASSAGE: dict[str, Any] = {
    "candidate_id": f"passage{SEP}ctx{SEP}docs/kura.md{SEP}0",
    "kind": "passage",
    "fused_rank": 1,
    "lane_ranks": [{"lane": "passage_bm25", "rank": 1}],
    "citation_refs": [],
    "passage": {
        "source": "docs/kura.md",
        "paragraph": 0,
        "score": np.float32(0.86304635),
        "text": 'quote " backslash \\ tab \t 蔵元 😀',
        "lanes": {"bm25": {"rank": 1, "score": np.float32(0.86304635)}},
    },
}
COMMUNITY: dict[str, Any] = {
    "candidate_id": f"community{SEP}ctx{SEP}community:L0-3{SEP}5",
    "kind": "community",
    "fused_rank": 2,
    "lane_ranks": [{"lane": "community", "rank": 1}],
    "citation_refs": [],
    "community": {"community": "L0-3", "score": np.float32(0.5), "text": "summary", "paragraph": 5},
}


def columns_of(item: dict[str, Any]) -> dict[str, Any]:
    """The fragment columns ``build_items`` reads, serialized from an item dict."""
    corroboration = item.get("corroboration")
    contradicts = item.get("contradicts")
    return {
        "id_json": to_json(item["candidate_id"]),
        "kind": item["kind"],
        "fused_rank": item["fused_rank"],
        "lane_ranks_json": to_json(item["lane_ranks"]),
        "citation_refs_json": to_json(item["citation_refs"]),
        "corroboration_sources_json": None if corroboration is None else to_json(corroboration["sources"]),
        "contradicts_json": None if contradicts is None else to_json(contradicts),
        "contradicts_bytes": None if contradicts is None else reference_measure(contradicts)[0],
        "contradicts_quarters": None if contradicts is None else reference_measure(contradicts)[1],
        "payload_json": to_json(item[item["kind"]]),
    }


def items_frame(items: Sequence[dict[str, Any]]) -> pl.DataFrame:
    rows = [columns_of(item) for item in items]
    return pl.DataFrame(
        {name: [row[name] for row in rows] for name in ITEM_COLUMNS},
        schema={name: pl.Int64 if name in MEASURE_COLUMNS else pl.String for name in ITEM_COLUMNS},
    )


def stamped(item: dict[str, Any]) -> str:
    """The served item text: measured without the two keys, then stamped before the payload."""
    item_bytes, item_quarters = reference_measure(item)
    out: dict[str, Any] = {}
    for key, value in item.items():
        if key == item["kind"]:
            out["bytes"] = item_bytes
            out["estimated_tokens"] = (item_quarters + 3) // 4
        out[key] = value
    return to_json(out)


# ---------------------------------------------------------------------------
# build_items
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("item", [ASSOCIATION, PASSAGE, COMMUNITY], ids=["association", "passage", "community"])
def test_the_item_text_is_the_contract_item_in_wire_key_order(item: dict[str, Any]) -> None:
    [row] = build_items(items_frame([item])).to_dicts()
    assert row["item_json"] == stamped(item)
    assert (row["item_bytes"], row["item_quarters"]) == reference_measure(item)


def test_keys_follow_the_item_declaration_order() -> None:
    [text] = build_items(items_frame([ASSOCIATION]))["item_json"].to_list()
    keys = list(json.loads(text))
    assert keys == [key for key in ITEM_KEYS if key not in ("passage", "community")]
    assert list(json.loads(text)["corroboration"]) == ["sources", "attributions"]


def test_corroboration_and_contradicts_are_omitted_when_null() -> None:
    item = {key: value for key, value in ASSOCIATION.items() if key not in ("corroboration", "contradicts")}
    [text] = build_items(items_frame([item]))["item_json"].to_list()
    assert '"corroboration"' not in text and '"contradicts"' not in text
    assert text == stamped(item)


def test_corroboration_attributions_repeat_the_citation_refs() -> None:
    [text] = build_items(items_frame([ASSOCIATION]))["item_json"].to_list()
    parsed = json.loads(text)
    assert parsed["corroboration"]["attributions"] == parsed["citation_refs"]


def test_an_empty_corroboration_source_list_is_still_written() -> None:
    # Present-but-empty is not null: the key stays (an association always has sources when it has one).
    frame = items_frame([ASSOCIATION]).with_columns(corroboration_sources_json=pl.lit("[]"))
    [text] = build_items(frame)["item_json"].to_list()
    assert '"corroboration":{"sources":[],"attributions":[' in text


def test_measurements_count_utf8_bytes_and_quarter_tokens_of_the_unstamped_text() -> None:
    # NUL is written as the six ASCII characters \u0000; 😀 is 4 UTF-8 bytes and 4 quarters; 蔵 is 3 and 4.
    [row] = build_items(items_frame([PASSAGE])).to_dicts()
    unstamped = STAMP.sub("", row["item_json"])
    assert row["item_bytes"] == len(unstamped.encode("utf-8"))
    assert row["item_quarters"] == sum(1 if ord(c) < 128 else 4 for c in unstamped)
    assert "\\u0000" in unstamped and SEP not in unstamped
    assert row["item_bytes"] != row["item_quarters"]  # non-ASCII weighs differently in each


def test_the_stamp_holds_the_measurements_and_removing_it_gives_back_exactly_that_many_bytes() -> None:
    for row in build_items(items_frame([ASSOCIATION, PASSAGE, COMMUNITY])).to_dicts():
        [match] = STAMP.finditer(row["item_json"])
        assert int(match.group(1)) == row["item_bytes"]
        assert int(match.group(2)) == (row["item_quarters"] + 3) // 4
        without = row["item_json"].replace(match.group(0), "")
        assert len(without.encode("utf-8")) == row["item_bytes"]


@pytest.mark.parametrize("text", ["", "a", "abc", "abcd", "abcde", "日", "a日", "😀😀"])
def test_estimated_tokens_round_the_quarters_up(text: str) -> None:
    # The same item around texts of different weight: quarters grow by the text's weight.
    base = {**COMMUNITY, "community": {**COMMUNITY["community"], "text": ""}}
    grown = {**COMMUNITY, "community": {**COMMUNITY["community"], "text": text}}
    rows = build_items(items_frame([base, grown])).to_dicts()
    quarters = [row["item_quarters"] for row in rows]
    assert quarters[1] - quarters[0] == sum(1 if ord(c) < 128 else 4 for c in text)
    stamps = [STAMP.search(row["item_json"]) for row in rows]
    assert [int(match.group(2)) for match in stamps if match] == [(q + 3) // 4 for q in quarters]


def test_rows_keep_their_order_and_other_columns_and_no_helper_column_leaks() -> None:
    frame = items_frame([COMMUNITY, ASSOCIATION, PASSAGE]).with_columns(keep=pl.Series([7, 8, 9]))
    built = build_items(frame)
    assert built["keep"].to_list() == [7, 8, 9]
    assert built["kind"].to_list() == ["community", "association", "passage"]
    assert set(built.columns) == {*frame.columns, "item_json", "item_bytes", "item_quarters"}


def test_an_empty_frame_builds_no_items() -> None:
    built = build_items(items_frame([]))
    assert built.height == 0 and "item_json" in built.columns


# ---------------------------------------------------------------------------
# Omission entries, admitted items and cited entries: rows in package order
# ---------------------------------------------------------------------------

DECISION_SCHEMA = {
    "q": pl.UInt32,
    "fused_rank": pl.Int64,
    "walk_step": pl.Int64,
    "admitted": pl.Boolean,
    "id_json": pl.String,
    "kind": pl.String,
    "reason": pl.String,
    "duplicate_of_json": pl.String,
    "item_json": pl.String,
}


def passage_id(index: int) -> str:
    return f"passage{SEP}c{SEP}s{SEP}{index}"


def decision(
    q: int,
    fused_rank: int,
    walk_step: int | None,
    reason: str | None,
    duplicate_of: str | None = None,
) -> dict[str, Any]:
    """One decisions row: admitted when walked without a reason."""
    return {
        "q": q,
        "fused_rank": fused_rank,
        "walk_step": walk_step,
        "admitted": walk_step is not None and reason is None,
        "id_json": to_json(passage_id(fused_rank)),
        "kind": "passage",
        "reason": reason,
        "duplicate_of_json": None if duplicate_of is None else to_json(duplicate_of),
        "item_json": f"item{q}.{fused_rank}" if walk_step is not None else None,
    }


def decisions_frame(rows: Sequence[dict[str, Any]]) -> pl.DataFrame:
    return pl.DataFrame(list(rows), schema=DECISION_SCHEMA)


def test_an_omission_entry_has_id_kind_and_reason_in_that_order() -> None:
    [text] = omitted_entries(decisions_frame([decision(0, 1, 0, "budget_exceeded")]))["entry_json"].to_list()
    assert text == to_json({"candidate_id": passage_id(1), "kind": "passage", "reason": "budget_exceeded"})


def test_a_duplicate_entry_names_what_it_duplicates_last() -> None:
    kept = passage_id(0)
    [text] = omitted_entries(decisions_frame([decision(0, 1, None, DUPLICATE_PASSAGE, kept)]))["entry_json"].to_list()
    assert text == to_json(
        {"candidate_id": passage_id(1), "kind": "passage", "reason": "duplicate_passage", "duplicate_of": kept}
    )


def test_only_a_candidate_dropped_before_the_walk_names_what_it_duplicates() -> None:
    # A walked candidate is refused on its own account: no duplicate_of even if the column is set.
    [text] = omitted_entries(decisions_frame([decision(0, 1, 0, "budget_exceeded", passage_id(0))]))[
        "entry_json"
    ].to_list()
    assert '"duplicate_of"' not in text


def test_omissions_list_duplicates_in_fused_order_then_refusals_in_walk_order_per_query() -> None:
    rows = [
        decision(1, 1, 1, None),
        decision(0, 5, 0, "budget_exceeded"),
        decision(0, 2, None, DUPLICATE_PASSAGE, passage_id(1)),
        decision(0, 4, 2, "contradiction_group_exceeds_budget"),
        decision(0, 1, 1, None),
        decision(1, 3, 0, "budget_exceeded"),
        decision(0, 3, None, DUPLICATE_PASSAGE, passage_id(1)),
        decision(1, 2, None, "evidence_in_passage", passage_id(9)),
    ]
    omitted = omitted_entries(decisions_frame(rows))
    assert omitted.columns == ["q", "reason", "entry_json"]
    listed = [(q, json.loads(text)["candidate_id"]) for q, text in omitted.select("q", "entry_json").iter_rows()]
    ranks = [(q, int(name.rsplit(SEP, 1)[1])) for q, name in listed]
    assert ranks == [(0, 2), (0, 3), (0, 5), (0, 4), (1, 2), (1, 3)]
    assert omitted["reason"].to_list()[:3] == [DUPLICATE_PASSAGE, DUPLICATE_PASSAGE, "budget_exceeded"]


def test_admitted_items_are_listed_in_walk_order_per_query() -> None:
    rows = [
        decision(1, 1, 0, None),
        decision(0, 3, 0, None),
        decision(0, 1, 2, None),
        decision(0, 2, 1, "budget_exceeded"),
    ]
    items = admitted_items(decisions_frame(rows)).collect()
    assert items.rows() == [(0, "item0.3"), (0, "item0.1"), (1, "item1.1")]


def test_citations_are_listed_by_source_then_paragraph_ties_in_commit_order() -> None:
    citations = pl.DataFrame(
        {
            "source": ["b.md", "a.md", "a.md", "a.md", "c.md", "a.md"],
            "paragraph": [0, 10, 2, 2, 1, 2],
            "entry_json": ["b0", "a10", "a2-first", "a2-second", "c1", "a2-other-query"],
        }
    )
    # Paragraphs compare as numbers (10 after 2); query 1 commits nothing.
    cited = cited_entries(citations, [[0, 1, 3, 2], [], [5, 4]]).collect()
    assert cited.rows() == [(0, "a2-second"), (0, "a2-first"), (0, "a10"), (0, "b0"), (2, "a2-other-query"), (2, "c1")]


# ---------------------------------------------------------------------------
# package_texts
# ---------------------------------------------------------------------------

LANES_PLAN = to_json(
    {
        "resolve": {"ran": True},
        "query": {"ran": False, "reason": "no 'labels' given"},
        "activate": {"ran": True},
        "passages": {"ran": True},
        "communities": {"ran": False, "reason": "include_communities was false"},
        "citations": {"ran": True},
    }
)
RERANKER_PLAN = to_json({"configured": False, "ran": False, "reason": "not_configured"})
CITATION = {
    "source": "a.md",
    "paragraph": 0,
    "citation": {"text": "t", "source": "a.md", "section": None, "locator": None},
}


def omission(index: int, reason: str) -> tuple[str, dict[str, Any]]:
    entry = {"candidate_id": passage_id(index), "kind": "passage", "reason": reason}
    return reason, entry


@dataclass(frozen=True)
class Query:
    """Everything one query's package text is made of, already serialized or counted."""

    items: Sequence[str]
    citations: Sequence[str]
    items_used: int
    bytes_used: int
    tokens_used: int
    limits: Limits
    omitted: Sequence[tuple[str, str]]  # (reason, entry text) in package order
    lanes_plan: str = LANES_PLAN
    dedup_dropped: int = 2
    contradiction_groups: int = 1
    tier_width: int = 3
    reranker_plan: str = RERANKER_PLAN


def render(queries: Sequence[Query]) -> list[str]:
    """The package texts of a batch of queries, through the columnar rule."""
    frame = pl.DataFrame(
        {
            "q": range(len(queries)),
            **{
                name: [getattr(query, name) for query in queries]
                for name in QUERY_SCHEMA
                if name not in ("q", "max_items", "max_bytes", "max_tokens")
            },
            **{
                name: [getattr(query.limits, name) for query in queries]
                for name in ("max_items", "max_bytes", "max_tokens")
            },
        },
        schema=QUERY_SCHEMA,
    )
    items = pl.DataFrame(
        [(q, text) for q, query in enumerate(queries) for text in query.items],
        schema={"q": pl.UInt32, "item_json": pl.String},
        orient="row",
    )
    citations = pl.DataFrame(
        [(q, text) for q, query in enumerate(queries) for text in query.citations],
        schema={"q": pl.UInt32, "entry_json": pl.String},
        orient="row",
    )
    omitted = pl.DataFrame(
        [(q, reason, text) for q, query in enumerate(queries) for reason, text in query.omitted],
        schema={"q": pl.UInt32, "reason": pl.String, "entry_json": pl.String},
        orient="row",
    )
    texts = package_texts(frame.lazy(), items.lazy(), citations.lazy(), omitted).collect()["package"]
    assert texts.dtype == pl.String and texts.len() == len(queries)
    return texts.to_list()


def render_one(query: Query) -> str:
    [text] = render([query])
    return text


def query_and_expected(
    omitted: Sequence[tuple[str, dict[str, Any]]], items: Sequence[dict[str, Any]] = (PASSAGE,)
) -> tuple[Query, str]:
    item_texts = [stamped(item) for item in items]
    citations = [to_json(CITATION)]
    limits = Limits(max_items=12, max_bytes=5000, max_tokens=900)
    query = Query(
        items=item_texts,
        citations=citations,
        items_used=len(items),
        bytes_used=1234,
        tokens_used=321,
        limits=limits,
        omitted=[(reason, to_json(entry)) for reason, entry in omitted],
    )
    by_reason: dict[str, int] = {}
    for reason, _ in omitted:
        by_reason[reason] = by_reason.get(reason, 0) + 1
    package = {
        "items": [f"@item{index}@" for index in range(len(item_texts))],
        "citations": [CITATION],
        "budget": {
            "items_used": len(items),
            "bytes_used": 1234,
            "tokens_used": 321,
            "limits": {"max_items": 12, "max_bytes": 5000, "max_tokens": 900},
        },
        "omitted": [entry for _, entry in omitted][:20],
        "omitted_total": len(omitted),
        "omitted_by_reason": {reason: by_reason[reason] for reason in sorted(by_reason)},
        "plan": {
            "lanes": json.loads(LANES_PLAN),
            "selection": {"dedup_dropped": 2, "contradiction_groups": 1, "diversity_tier_width": 3},
            "reranker": json.loads(RERANKER_PLAN),
        },
    }
    # The ready item texts go in verbatim, in place of their placeholders.
    text = to_json(package)
    for index, item_text in enumerate(item_texts):
        text = text.replace(f'"@item{index}@"', item_text, 1)
    return query, text


def test_the_package_text_is_compact_and_in_wire_key_order() -> None:
    query, expected = query_and_expected([omission(0, "budget_exceeded")])
    text = render_one(query)
    assert text == expected
    parsed = json.loads(text)
    assert tuple(parsed) == PACKAGE_KEYS
    assert list(parsed["budget"]) == ["items_used", "bytes_used", "tokens_used", "limits"]
    assert list(parsed["budget"]["limits"]) == ["max_items", "max_bytes", "max_tokens"]
    assert list(parsed["plan"]) == ["lanes", "selection", "reranker"]
    assert list(parsed["plan"]["selection"]) == ["dedup_dropped", "contradiction_groups", "diversity_tier_width"]


def test_item_texts_are_embedded_verbatim() -> None:
    query, _ = query_and_expected([], items=[PASSAGE, ASSOCIATION])
    text = render_one(query)
    assert text.startswith('{"items":[' + stamped(PASSAGE) + "," + stamped(ASSOCIATION) + '],"citations":[')
    assert "0.86304635" in text  # the f32 score as written, not widened


def test_nothing_omitted_gives_empty_list_zero_total_and_an_empty_reason_map() -> None:
    query, expected = query_and_expected([])
    text = render_one(query)
    assert text == expected
    assert '"omitted":[],"omitted_total":0,"omitted_by_reason":{},' in text


def test_an_empty_package_renders_empty_arrays() -> None:
    query, _ = query_and_expected([], items=[])
    text = render_one(replace(query, citations=[], items_used=0, bytes_used=4, tokens_used=1))
    assert text.startswith('{"items":[],"citations":[],"budget":{"items_used":0,"bytes_used":4,"tokens_used":1,')


@pytest.mark.parametrize("count", [19, 20, 21, 45])
def test_the_omitted_list_is_capped_at_20_but_total_and_reasons_count_everything(count: int) -> None:
    reasons = ["duplicate_passage", "budget_exceeded", "contradiction_group_exceeds_budget"]
    omitted = [omission(i, reasons[i % 3]) for i in range(count)]
    query, expected = query_and_expected(omitted)
    text = render_one(query)
    assert text == expected
    parsed = json.loads(text)
    assert MAX_LISTED_OMISSIONS == 20
    assert len(parsed["omitted"]) == min(count, 20)
    assert parsed["omitted"] == [entry for _, entry in omitted[:20]]  # the first 20, in the given order
    assert parsed["omitted_total"] == count
    assert sum(parsed["omitted_by_reason"].values()) == count


def test_reasons_are_sorted_ascending_and_only_present_ones_appear() -> None:
    omitted = [omission(0, "evidence_in_passage"), omission(1, "budget_exceeded"), omission(2, "budget_exceeded")]
    text = render_one(query_and_expected(omitted)[0])
    assert '"omitted_by_reason":{"budget_exceeded":2,"evidence_in_passage":1},' in text


def test_the_omitted_order_is_the_given_order_not_sorted_by_reason() -> None:
    omitted = [omission(0, "duplicate_passage"), omission(1, "budget_exceeded"), omission(2, "duplicate_passage")]
    parsed = json.loads(render_one(query_and_expected(omitted)[0]))
    assert [entry["reason"] for entry in parsed["omitted"]] == [
        "duplicate_passage",
        "budget_exceeded",
        "duplicate_passage",
    ]


def test_limits_and_selection_numbers_are_written_as_given() -> None:
    query, _ = query_and_expected([])
    unbounded = replace(query, limits=Limits(0, 1_048_576, 2**64 - 1), tier_width=250, dedup_dropped=0)
    text = render_one(unbounded)
    assert '"limits":{"max_items":0,"max_bytes":1048576,"max_tokens":18446744073709551615}}' in text
    assert '"selection":{"dedup_dropped":0,"contradiction_groups":1,"diversity_tier_width":250}' in text


def test_each_query_gets_only_its_own_items_citations_and_omissions_in_query_order() -> None:
    # Rows of the four frames arrive grouped by query; the texts come back in the queries' order.
    first, first_expected = query_and_expected([omission(0, "budget_exceeded")], items=[PASSAGE])
    empty, _ = query_and_expected([], items=[])
    empty = replace(empty, citations=[], items_used=0, bytes_used=4, tokens_used=1)
    last, last_expected = query_and_expected([omission(i, "duplicate_passage") for i in range(25)], items=[COMMUNITY])
    texts = render([first, empty, last])
    assert texts[0] == first_expected and texts[2] == last_expected
    assert texts[1] == render_one(empty)
    assert texts[1].startswith('{"items":[],"citations":[],') and '"omitted":[],"omitted_total":0,' in texts[1]


def test_an_empty_batch_has_no_package_texts() -> None:
    assert render([]) == []


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from(["duplicate_passage", "budget_exceeded", "evidence_in_passage"]), max_size=30))
def test_any_omission_list_renders_like_the_reference_serializer(reasons: list[str]) -> None:
    omitted = [omission(i, reason) for i, reason in enumerate(reasons)]
    query, expected = query_and_expected(omitted)
    assert render_one(query) == expected


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.lists(st.sampled_from(["duplicate_passage", "budget_exceeded", "evidence_in_passage"]), max_size=25),
            st.lists(st.sampled_from([PASSAGE, ASSOCIATION, COMMUNITY]), max_size=3),
        ),
        max_size=6,
    )
)
def test_any_batch_renders_each_query_like_the_reference_serializer(
    batch: list[tuple[list[str], list[dict[str, Any]]]],
) -> None:
    cases = [
        query_and_expected([omission(i, reason) for i, reason in enumerate(reasons)], items=items)
        for reasons, items in batch
    ]
    assert render([query for query, _ in cases]) == [expected for _, expected in cases]
