"""The reference oracle reproduces the conformance fixtures and the contract's text rules."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.oracle.key_order import ITEM_KEYS, ORDERS, PACKAGE_KEYS
from tests.oracle.pools import generate_records
from tests.oracle.reference import (
    assemble_reference,
    bigrams,
    format_f32,
    format_f64,
    near_duplicate_reference,
    normalize_entry,
)

# The five shared fixtures, committed verbatim (data/conformance/SOURCE.md): a clean clone has them.
CONFORMANCE = Path(__file__).resolve().parent.parent / "data" / "conformance" / "fixtures"
FIXTURES = sorted(CONFORMANCE.glob("*.json"))
assert FIXTURES, f"no conformance fixtures found in {CONFORMANCE}"
STAMP = re.compile(r',"bytes":(\d+),"estimated_tokens":(\d+)')


def fixture_record(path: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """Lane-dump record and expected package of one conformance fixture."""
    data = json.loads(path.read_text(encoding="utf-8"))
    record = {
        "query_id": path.stem,
        "context": data["context"],
        "request": data["request"],
        "lanes": data["lanes"],
    }
    return record, data["expected_response"]


# ---------------------------------------------------------------------------
# A tiny raw-JSON scanner: spans of values exactly as written.
# ---------------------------------------------------------------------------


def _value_end(text: str, i: int) -> int:
    """Index just past the JSON value starting at ``i``."""
    if text[i] == '"':
        j = i + 1
        while text[j] != '"':
            j += 2 if text[j] == "\\" else 1
        return j + 1
    if text[i] in "[{":
        depth = 0
        j = i
        while True:
            c = text[j]
            if c == '"':
                j = _value_end(text, j)
                continue
            if c in "[{":
                depth += 1
            elif c in "]}":
                depth -= 1
                if depth == 0:
                    return j + 1
            j += 1
    j = i
    while j < len(text) and text[j] not in ",]}":
        j += 1
    return j


def raw_members(obj: str) -> list[tuple[str, str]]:
    """(key, raw value text) pairs of a compact JSON object, in written order."""
    assert obj[0] == "{" and obj[-1] == "}"
    out: list[tuple[str, str]] = []
    i = 1
    while obj[i] != "}":
        key_end = _value_end(obj, i)
        key = json.loads(obj[i:key_end])
        assert obj[key_end] == ":"
        value_end = _value_end(obj, key_end + 1)
        out.append((key, obj[key_end + 1 : value_end]))
        i = value_end
        if obj[i] == ",":
            i += 1
    return out


def raw_elements(arr: str) -> list[str]:
    """Raw element texts of a compact JSON array."""
    assert arr[0] == "[" and arr[-1] == "]"
    out: list[str] = []
    i = 1
    while arr[i] != "]":
        end = _value_end(arr, i)
        out.append(arr[i:end])
        i = end
        if arr[i] == ",":
            i += 1
    return out


def quarters(text: str) -> int:
    return sum(1 if ord(c) < 128 else 4 for c in text)


def assert_in_order(keys: list[str], declared: tuple[str, ...]) -> None:
    """``keys`` are declared keys, written in declaration order."""
    assert all(k in declared for k in keys), (keys, declared)
    positions = [declared.index(k) for k in keys]
    assert positions == sorted(positions), (keys, declared)


def check_object_order(raw: str, kind: str) -> None:
    """Recursively check the key order of a wire object of the given kind."""
    members = raw_members(raw)
    keys = [k for k, _ in members]
    assert len(keys) == len(set(keys))
    assert_in_order(keys, ORDERS[kind])
    children = {
        "budget": {"limits": "limits"},
        "plan": {"lanes": "lanes", "selection": "selection", "reranker": "reranker"},
        "association": {},
        "citation_entry": {"citation": "citation"},
        "citation": {"locator": "locator"},
        "attribution": {"locator": "locator"},
        "passage": {"lanes": "passage_lanes"},
        "passage_lanes": {"bm25": "lane_evidence", "vector": "lane_evidence"},
        "corroboration": {},
    }.get(kind, {})
    for key, value in members:
        if kind == "lanes":
            check_object_order(value, "lane_plan")
        elif key in children and value != "null":
            check_object_order(value, children[key])
        elif kind == "association" and key == "attributions":
            for element in raw_elements(value):
                check_object_order(element, "attribution")
        elif kind == "community" and key == "members":
            for element in raw_elements(value):
                check_object_order(element, "member")
        elif kind == "corroboration" and key == "attributions":
            for element in raw_elements(value):
                check_object_order(element, "locator_ref")


def check_text_facts(text: str) -> None:
    """Key order, per-item bytes/tokens, and bytes_used/tokens_used from the raw text."""
    top = raw_members(text)
    assert [k for k, _ in top] == list(PACKAGE_KEYS)
    raw = dict(top)
    stripped_items: list[str] = []
    for item in raw_elements(raw["items"]):
        members = raw_members(item)
        keys = [k for k, _ in members]
        assert_in_order(keys, ITEM_KEYS)
        payload_keys = [k for k in keys if k in ("association", "passage", "community")]
        assert payload_keys == [keys[-1]]
        assert keys[-3:-1] == ["bytes", "estimated_tokens"]
        check_object_order(dict(members)[keys[-1]], keys[-1])
        for element in raw_elements(dict(members)["lane_ranks"]):
            check_object_order(element, "lane_rank")
        for element in raw_elements(dict(members)["citation_refs"]):
            check_object_order(element, "locator_ref")
        if "corroboration" in keys:
            check_object_order(dict(members)["corroboration"], "corroboration")
        spans = STAMP.findall(item)
        assert len(spans) == 1
        n, m = int(spans[0][0]), int(spans[0][1])
        bare = STAMP.sub("", item, count=1)
        assert len(bare.encode("utf-8")) == n
        assert (quarters(bare) + 3) // 4 == m
        stripped_items.append(bare)
    for entry in raw_elements(raw["citations"]):
        check_object_order(entry, "citation_entry")
    for entry in raw_elements(raw["omitted"]):
        check_object_order(entry, "omitted")
    check_object_order(raw["budget"], "budget")
    check_object_order(raw["plan"], "plan")
    items_array = "[" + ",".join(stripped_items) + "]"
    budget = json.loads(raw["budget"])
    counted = items_array + raw["citations"]
    assert budget["bytes_used"] == len(counted.encode("utf-8"))
    assert budget["tokens_used"] == (quarters(counted) + 3) // 4
    by_reason = json.loads(raw["omitted_by_reason"])
    assert list(by_reason) == sorted(by_reason)
    assert sum(by_reason.values()) == json.loads(raw["omitted_total"])


# ---------------------------------------------------------------------------
# Conformance fixtures
# ---------------------------------------------------------------------------


def test_all_five_fixtures_are_present() -> None:
    assert len(FIXTURES) == 5


@pytest.mark.parametrize("path", FIXTURES, ids=[p.stem for p in FIXTURES])
def test_fixture_package_matches(path: Path) -> None:
    record, expected = fixture_record(path)
    text = assemble_reference(record)
    assert json.loads(text) == expected


@pytest.mark.parametrize("path", FIXTURES, ids=[p.stem for p in FIXTURES])
def test_fixture_text_facts(path: Path) -> None:
    record, expected = fixture_record(path)
    text = assemble_reference(record)
    check_text_facts(text)
    assert "\\u0000" in text or not expected["items"]


def test_fixture_overrides_reproduce_the_budget_fixture() -> None:
    record, expected = fixture_record(CONFORMANCE / "evidence_budget_constrained.json")
    record["request"] = {"origins": record["request"]["origins"]}
    assert json.loads(assemble_reference(record, overrides={"max_items": 2})) == expected


def test_mixed_lanes_worked_numbers() -> None:
    record, _ = fixture_record(CONFORMANCE / "evidence_mixed_lanes.json")
    text = assemble_reference(record)
    assert text.startswith('{"items":[{"candidate_id":"association\\u0000')
    assert ',"bytes":550,"estimated_tokens":142,' in text
    assert ',"bytes":367,"estimated_tokens":99,' in text
    assert '"score":0.86304635' in text
    assert '"budget":{"items_used":2,"bytes_used":1142,"tokens_used":303,' in text


# ---------------------------------------------------------------------------
# §6 near-duplicate edge cases
# ---------------------------------------------------------------------------


def test_empty_vs_empty_is_a_duplicate() -> None:
    assert near_duplicate_reference(["", ""]) == [None, 0]


def test_empty_vs_non_empty_is_not() -> None:
    assert near_duplicate_reference(["", "a"]) == [None, None]


def test_ab_vs_ba_is_not() -> None:
    assert near_duplicate_reference(["ab", "ba"]) == [None, None]


def test_single_vs_double_space_is_not() -> None:
    assert near_duplicate_reference(["x y", "x  y"]) == [None, None]


def test_half_width_katakana_equals_hiragana() -> None:
    assert normalize_entry("ｱｲｳ") == normalize_entry("あいう") == "あいう"
    assert near_duplicate_reference(["ｱｲｳ", "あいう"]) == [None, 0]


def test_a_vs_aa_is_identical() -> None:
    assert bigrams("a") == bigrams("aa")
    assert near_duplicate_reference(["a", "aa"]) == [None, 0]


def test_one_char_pairs_match_iff_same_normalized_char() -> None:
    assert near_duplicate_reference(["A", "a", "b"]) == [None, 0, None]


def test_aa_vs_bb_is_not() -> None:
    assert near_duplicate_reference(["aa", "bb"]) == [None, None]


def test_first_kept_match_wins_and_dropped_are_not_targets() -> None:
    base = "the quick brown fox jumps over the lazy dog"
    texts = [base, base + "s", base + "s!", "completely different words here"]
    assert near_duplicate_reference(texts) == [None, 0, 0, None]


def test_contract_fox_example() -> None:
    kept = "the quick brown fox jumps"
    assert near_duplicate_reference([kept, "the quick brown fox jump"]) == [None, 0]


def test_normalize_entry_per_code_point_lowercase() -> None:
    assert normalize_entry("İ") == "i\u0307"
    assert normalize_entry("ΟΔΟΣ") == "οδοσ"
    assert normalize_entry("\u3000a\u00a0") == " a "
    assert normalize_entry("カタカナ") == "かたかな"


def test_bigrams_are_a_set() -> None:
    assert bigrams("") == set()
    assert bigrams("abab") == {"ab", "ba"}


# ---------------------------------------------------------------------------
# §1.6 float layout
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (1e16, "1e+16"),
        (1e15, "1000000000000000.0"),
        (1e-7, "1e-7"),
        (0.00001, "0.00001"),
        (0.000015, "0.000015"),
        (-0.0, "-0.0"),
        (0.0, "0.0"),
        (10000000.0, "10000000.0"),
        (1.0, "1.0"),
        (12.34, "12.34"),
        (0.8630463480949402, "0.8630463480949402"),
        (1.7976931348623157e308, "1.7976931348623157e+308"),
        (5e-324, "5e-324"),
        (float("nan"), "null"),
        (float("inf"), "null"),
    ],
)
def test_f64_layout(value: float, text: str) -> None:
    assert format_f64(value) == text


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (1.5e13, "1.5e+13"),
        (1e12, "1000000000000.0"),
        (1e-7, "1e-7"),
        (3.4028235e38, "3.4028235e+38"),
        (0.000001, "0.000001"),
        (-0.0, "-0.0"),
        (10000000.0, "10000000.0"),
        (0.86304635, "0.86304635"),
        (0.8630463480949402, "0.86304635"),
        (0.54696476, "0.54696476"),
        (-2.5, "-2.5"),
        (float("-inf"), "null"),
    ],
)
def test_f32_layout(value: float, text: str) -> None:
    assert format_f32(np.float32(value)) == text


def test_f32_score_written_in_f32_form_in_the_package() -> None:
    record, _ = fixture_record(CONFORMANCE / "evidence_mixed_lanes.json")
    hit = record["lanes"]["passages"][0]
    hit["score"] = 0.8630463480949402  # the f64 widening of the same f32
    text = assemble_reference(record)
    assert '"score":0.86304635,"text"' in text
    assert "0.8630463480949402" not in text


# ---------------------------------------------------------------------------
# Behaviour on generated pools
# ---------------------------------------------------------------------------


def _fused_count(record: dict[str, Any]) -> int:
    """Distinct candidate ids in the (search-limit cut) pool, computed independently."""
    lanes = record["lanes"]
    request = record["request"]
    limit = request.get("search_limit")
    limit = min(5 if limit is None else limit, 200)
    ids: set[tuple[str, ...]] = set()
    for a in lanes.get("graph_query") or []:
        ids.add(("a", a["subject"], a["label"], a["object"]))
    for act in lanes.get("graph_activate") or []:
        a = act["association"]
        ids.add(("a", a["subject"], a["label"], a["object"]))
    for p in (lanes.get("passages") or [])[:limit]:
        ids.add(("p", p["source"], str(p["paragraph"])))
    for c in (lanes.get("communities") or [])[:limit]:
        ids.add(("c", c["community"], str(c["paragraph"])))
    return len(ids)


TYPICAL = generate_records(150, seed=7)
WORST = generate_records(3, seed=11, profile="worst")


def test_generator_is_deterministic_and_valid() -> None:
    again = generate_records(150, seed=7)
    assert json.dumps(TYPICAL, sort_keys=True) == json.dumps(again, sort_keys=True)
    ids = [r["query_id"] for r in TYPICAL]
    assert len(set(ids)) == len(ids) and ids[0] == "syn-000001"
    for record in TYPICAL + WORST:
        assert isinstance(record["context"], str)
        assert "origins" in record["request"]
        assert set(record["lanes"]) <= {
            "graph_query",
            "graph_activate",
            "passages",
            "communities",
            "citations",
        }
        texts = {(p["source"], p["paragraph"]) for p in record["lanes"]["passages"]}
        assert texts  # passages always run here
        for p in record["lanes"]["passages"]:
            assert 150 <= len(p["text"]) <= 600
    for record in WORST:
        assert len(record["lanes"]["passages"]) == 200
        assert record["request"]["search_limit"] == 200


@pytest.mark.parametrize("index", range(0, 150, 3))
def test_generated_typical_invariants(index: int) -> None:
    record = TYPICAL[index]
    text = assemble_reference(record)
    check_text_facts(text)
    package = json.loads(text)
    limits = package["budget"]["limits"]
    assert len(package["items"]) + package["omitted_total"] == _fused_count(record)
    assert len(package["items"]) <= limits["max_items"]
    if package["items"]:
        assert package["budget"]["bytes_used"] <= limits["max_bytes"]
        assert package["budget"]["tokens_used"] <= limits["max_tokens"]
    else:
        assert (package["budget"]["bytes_used"], package["budget"]["tokens_used"]) == (4, 1)
    refs = {(r["source"], r["paragraph"]) for i in package["items"] for r in i["citation_refs"]}
    cits = [(c["source"], c["paragraph"]) for c in package["citations"]]
    assert set(cits) == refs and cits == sorted(cits)


@pytest.mark.parametrize("index", range(3))
def test_generated_worst_invariants(index: int) -> None:
    record = WORST[index]
    text = assemble_reference(record)
    check_text_facts(text)
    package = json.loads(text)
    assert package["omitted_by_reason"].get("duplicate_passage", 0) > 0
    assert len(package["items"]) + package["omitted_total"] == _fused_count(record)


def test_zero_budget_is_an_empty_package() -> None:
    record = TYPICAL[1]
    for overrides in ({"max_items": 0}, {"max_bytes": 1}, {"max_tokens": 0}):
        package = json.loads(assemble_reference(record, overrides=overrides))
        assert package["items"] == [] and package["citations"] == []
        assert package["budget"]["bytes_used"] == 4
        assert package["budget"]["tokens_used"] == 1
        assert package["omitted_total"] == _fused_count(record)


def test_invalid_reorder_is_ignored_and_valid_one_keeps_membership() -> None:
    record = TYPICAL[2]
    generous = {"max_items": 1000, "max_bytes": 1048576, "max_tokens": 10**9}
    base = assemble_reference(record, overrides=generous)
    survivors = len(json.loads(base)["items"])
    assert survivors >= 2
    for bad in ([0, 1], [*range(survivors), 99], [0] * survivors, [survivors] * survivors):
        assert assemble_reference(record, overrides=generous, reorder=bad) == base
    reversed_text = assemble_reference(record, overrides=generous, reorder=list(range(survivors))[::-1])
    ids = [i["candidate_id"] for i in json.loads(base)["items"]]
    reversed_ids = [i["candidate_id"] for i in json.loads(reversed_text)["items"]]
    assert sorted(ids) == sorted(reversed_ids)


def test_plan_derivation_and_given_plan_lanes() -> None:
    record, _ = fixture_record(CONFORMANCE / "evidence_mixed_lanes.json")
    record["request"] = {"origins": "青嶺酒造", "labels": ["杜氏"], "search_limit": 0}
    lanes = json.loads(assemble_reference(record))["plan"]["lanes"]
    assert lanes["query"] == {"ran": True}
    assert lanes["passages"] == {"ran": False, "reason": "the requested limit is 0"}
    record["request"] = {"origins": ["x"], "include_communities": True}
    record["lanes"] = dict(record["lanes"], passages=None, communities=[])
    lanes = json.loads(assemble_reference(record))["plan"]["lanes"]
    assert lanes["passages"] == {"ran": False, "reason": "the query yields no searchable terms"}
    assert lanes["communities"] == {"ran": True}
    record["plan_lanes"] = {"citations": {"ran": True}, "resolve": {"ran": False, "reason": "r"}}
    text = assemble_reference(record)
    assert '"plan":{"lanes":{"resolve":{"ran":false,"reason":"r"},"query":' in text
