"""``plan.lanes`` (contract section 9.4): which lanes ran and why the others did not, derived from
the request and the lane dump, or taken from ``plan_lanes``.

Every case is checked against the table of section 9.4 and against
``tests.oracle.reference.plan_lanes`` (an independent derivation of the same table).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings

from assembler.stages.lanes import PLAN_LANE_NAMES, parse_record
from assembler.stages.plan import derive_lane_plans, lanes_plan_text
from tests.oracle.reference import plan_lanes as reference_plan_lanes
from tests.oracle.reference import to_json
from tests.strategies import lane_records

RAN = {"ran": True}
NO_ANCHORS = {"ran": False, "reason": "no anchors resolved from 'origins'"}


def raw(request: dict[str, Any], context: str = "ctx", **lanes: Any) -> dict[str, Any]:
    """A lane-dump record; lanes not given are absent."""
    return {"query_id": "q", "context": context, "request": request, "lanes": lanes}


def plans(record: dict[str, Any]) -> dict[str, dict[str, object]]:
    """The derived plans, checked against the reference derivation and the wire text on the way."""
    parsed = parse_record(record)
    # A given entry keeps its validated nulls (``reason: None``); null means absent on the wire.
    derived = {
        name: {key: value for key, value in plan.items() if value is not None}
        for name, plan in derive_lane_plans(parsed).items()
    }
    expected = reference_plan_lanes(record)
    assert derived == expected
    assert lanes_plan_text(parsed) == to_json(expected)
    return derived


# ---------------------------------------------------------------------------
# Each lane, each row of the table
# ---------------------------------------------------------------------------


def test_key_order_is_the_contracts() -> None:
    text = lanes_plan_text(parse_record(raw({"origins": []})))
    assert list(json.loads(text)) == ["resolve", "query", "activate", "passages", "communities", "citations"]
    assert tuple(json.loads(text)) == PLAN_LANE_NAMES


def test_everything_ran() -> None:
    record = raw(
        {"origins": ["x"], "labels": ["l"], "include_communities": True},
        graph_query=[],
        graph_activate=[],
        passages=[],
        communities=[],
        citations=[],
    )
    assert plans(record) == {name: RAN for name in PLAN_LANE_NAMES}
    text = lanes_plan_text(parse_record(record))
    assert text == (
        '{"resolve":{"ran":true},"query":{"ran":true},"activate":{"ran":true},'
        '"passages":{"ran":true},"communities":{"ran":true},"citations":{"ran":true}}'
    )


def test_empty_origins_mean_resolve_and_the_graph_lanes_did_not_run() -> None:
    result = plans(raw({"origins": [], "labels": ["l"]}, graph_activate=[], passages=[]))
    assert result["resolve"] == {"ran": False, "reason": "origins was empty"}
    # No anchors comes before "no labels": labels are given but nothing was anchored.
    assert result["query"] == NO_ANCHORS
    assert result["activate"] == NO_ANCHORS


def test_resolve_ran_even_when_nothing_resolved() -> None:
    result = plans(raw({"origins": ["unknown"]}, passages=[]))
    assert result["resolve"] == RAN
    assert result["query"] == NO_ANCHORS
    assert result["activate"] == NO_ANCHORS


@pytest.mark.parametrize("activate", [None, "absent"])
def test_a_null_or_absent_activate_list_means_no_anchors(activate: str | None) -> None:
    lanes: dict[str, Any] = {"passages": []}
    if activate is None:
        lanes["graph_activate"] = None
    result = plans(raw({"origins": ["x"], "labels": ["l"]}, **lanes))
    assert result["query"] == NO_ANCHORS
    assert result["activate"] == NO_ANCHORS


def test_an_empty_activate_list_means_anchors_resolved() -> None:
    result = plans(raw({"origins": ["x"]}, graph_activate=[], passages=[]))
    assert result["activate"] == RAN


@pytest.mark.parametrize("labels", [None, [], "absent"])
def test_the_query_lane_needs_labels(labels: Any) -> None:
    request: dict[str, Any] = {"origins": ["x"]}
    if labels != "absent":
        request["labels"] = labels
    result = plans(raw(request, graph_activate=[], passages=[]))
    assert result["query"] == {"ran": False, "reason": "no 'labels' given"}
    assert result["activate"] == RAN


def test_a_bare_string_origin_and_label_count_as_one_each() -> None:
    result = plans(raw({"origins": "x", "labels": "l"}, graph_activate=[], passages=[]))
    assert result["resolve"] == RAN and result["query"] == RAN


def test_a_zero_search_limit_is_checked_before_the_missing_passages() -> None:
    result = plans(raw({"origins": [], "search_limit": 0}, passages=None))
    assert result["passages"] == {"ran": False, "reason": "the requested limit is 0"}


def test_a_zero_search_limit_wins_even_with_hits_in_the_dump() -> None:
    result = plans(raw({"origins": [], "search_limit": 0}, passages=[]))
    assert result["passages"] == {"ran": False, "reason": "the requested limit is 0"}


@pytest.mark.parametrize("passages", [None, "absent"])
def test_missing_passages_mean_the_query_had_no_searchable_term(passages: str | None) -> None:
    lanes: dict[str, Any] = {} if passages == "absent" else {"passages": None}
    assert plans(raw({"origins": []}, **lanes))["passages"] == {
        "ran": False,
        "reason": "the query yields no searchable terms",
    }


def test_passages_ran_with_zero_hits() -> None:
    assert plans(raw({"origins": []}, passages=[]))["passages"] == RAN


@pytest.mark.parametrize("include", [False, "absent"])
def test_communities_not_requested(include: Any) -> None:
    request: dict[str, Any] = {"origins": []}
    if include != "absent":
        request["include_communities"] = include
    # Even a communities list in the dump does not make the lane run when it was not requested.
    for communities in (None, []):
        result = plans(raw(request, passages=[], communities=communities))
        assert result["communities"] == {"ran": False, "reason": "include_communities was false"}


def test_requested_communities_without_a_list_are_the_missing_artifact_degrade() -> None:
    result = plans(raw({"origins": [], "include_communities": True}, context="酒蔵", passages=[]))
    reason = result["communities"]["reason"]
    assert result["communities"]["ran"] is False
    assert reason == (
        "no communities artifact for '酒蔵': context '酒蔵::communities' does not exist"
        " \u2014 run `taguru communities` to build it"
    )
    text = lanes_plan_text(parse_record(raw({"origins": [], "include_communities": True}, context="酒蔵")))
    assert "does not exist — run `taguru communities` to build it" in text  # the dash is raw U+2014


def test_a_context_name_with_quotes_is_escaped_in_the_reason_text() -> None:
    record = raw({"origins": [], "include_communities": True}, context='a"b\\c', passages=[])
    plans(record)
    text = lanes_plan_text(parse_record(record))
    assert "no communities artifact for 'a\\\"b\\\\c'" in text
    assert json.loads(text)["communities"]["reason"].startswith("no communities artifact for 'a\"b\\c'")


def test_requested_communities_with_zero_hits_ran() -> None:
    assert plans(raw({"origins": [], "include_communities": True}, communities=[]))["communities"] == RAN


@pytest.mark.parametrize("citations", [None, [], "absent"])
def test_citations_always_ran(citations: Any) -> None:
    lanes = {} if citations == "absent" else {"citations": citations}
    assert plans(raw({"origins": []}, **lanes))["citations"] == RAN


# ---------------------------------------------------------------------------
# Given plan_lanes
# ---------------------------------------------------------------------------


def test_given_entries_replace_the_derived_ones_and_the_rest_are_derived() -> None:
    record = raw({"origins": ["x"], "include_communities": True}, graph_activate=[], passages=[])
    manifest = (
        "context 'ctx::communities' holds no 'communities:manifest' record"
        " \u2014 run `taguru communities` to (re)build the artifact"
    )
    record["plan_lanes"] = {
        "communities": {"ran": False, "reason": manifest},
        "resolve": {"ran": False, "reason": "r"},
    }
    result = plans(record)
    assert result["communities"] == {"ran": False, "reason": manifest}
    assert result["resolve"] == {"ran": False, "reason": "r"}
    # The graph lanes still follow the dump, not the given resolve entry.
    assert result["activate"] == RAN
    assert result["query"] == {"ran": False, "reason": "no 'labels' given"}
    text = lanes_plan_text(parse_record(record))
    assert text.startswith('{"resolve":{"ran":false,"reason":"r"},"query":')  # contract key order, not given order


def test_a_given_entry_may_say_a_lane_ran_that_the_dump_would_not() -> None:
    record = raw({"origins": []})
    record["plan_lanes"] = {"passages": {"ran": True}, "query": {"ran": True}}
    result = plans(record)
    assert result["passages"] == RAN and result["query"] == RAN
    assert result["activate"] == NO_ANCHORS


def test_a_given_null_entry_falls_back_to_the_derived_one() -> None:
    record = raw({"origins": []}, passages=[])
    record["plan_lanes"] = {"passages": None, "resolve": {"ran": True, "reason": None}}
    result = plans(record)
    assert result["passages"] == RAN
    assert result["resolve"] == RAN  # a null reason is absent
    assert derive_lane_plans(parse_record(record))["resolve"]["ran"] is True
    assert '"resolve":{"ran":true},' in lanes_plan_text(parse_record(record))


def test_a_given_floor_is_written_as_f32() -> None:
    record = raw({"origins": []}, passages=[])
    record["plan_lanes"] = {"passages": {"ran": True, "floor": 0.1}}
    plans(record)
    assert '"passages":{"ran":true,"floor":0.1}' in lanes_plan_text(parse_record(record))


def test_derived_plans_are_fresh_dicts() -> None:
    record = raw({"origins": []}, passages=[])
    record["plan_lanes"] = {"passages": {"ran": True}}
    parsed = parse_record(record)
    first = derive_lane_plans(parsed)
    first["passages"]["ran"] = False
    first["citations"]["ran"] = False
    assert derive_lane_plans(parsed)["passages"] == RAN
    assert derive_lane_plans(parsed)["citations"] == RAN


# ---------------------------------------------------------------------------
# Random dumps
# ---------------------------------------------------------------------------


@settings(max_examples=150, deadline=None)
@given(lane_records())
def test_random_dumps_plan_like_the_reference(record: dict[str, Any]) -> None:
    plans(record)


def test_cached_derived_texts_follow_the_context_and_never_stand_in_for_given_entries() -> None:
    # A derived plan's text is cached by what it is derived from; the context is part of that.
    first = lanes_plan_text(parse_record(raw({"origins": [], "include_communities": True}, context="a")))
    second = lanes_plan_text(parse_record(raw({"origins": [], "include_communities": True}, context="b")))
    assert "'a::communities'" in first and "'b::communities'" in second
    derived = lanes_plan_text(parse_record(raw({"origins": []}, passages=[])))
    given = raw({"origins": []}, passages=[])
    given["plan_lanes"] = {"passages": {"ran": True, "floor": -0.0}}
    assert '"passages":{"ran":true,"floor":-0.0}' in lanes_plan_text(parse_record(given))
    assert '"passages":{"ran":true},' in derived
    assert lanes_plan_text(parse_record(raw({"origins": []}, passages=[]))) == derived
