"""Baseline truncation: the accounting of spec section 3.5, byte-identical to the assembler's."""

from __future__ import annotations

import json
import math
from typing import Any

from evalkit import passage
from hypothesis import given, settings
from hypothesis import strategies as st

from assembler import assemble
from assembler.contract.request import Limits
from assembler.contract.wire import PASSAGE_HIT, validate
from assembler.evaluate.baseline import cut, measure_hit, truncate, wrapper_text

KURA = {
    "source": "docs/kura.md",
    "paragraph": 0,
    "score": 0.86304635,
    "text": "青嶺酒造は雲居県霧沢町の蔵元である。杜氏は高瀬である。",
    "lanes": {"bm25": {"rank": 1, "score": 0.86304635}},
}


def clean(hit: dict[str, Any]) -> dict[str, Any]:
    """A hit as the lane reader hands it over (f32 scores, known fields only)."""
    return validate(PASSAGE_HIT, hit, "hit")


def test_the_spec_check_value_at_rank_one_and_two() -> None:
    hit = clean(KURA)
    assert measure_hit("sake", 0, hit) == (367, 99)
    assert measure_hit("sake", 1, hit) == (367, 99)
    text = wrapper_text("sake", 0, hit)
    assert text.startswith('{"candidate_id":"passage\\u0000sake\\u0000docs/kura.md\\u00000","kind":"passage"')
    assert '"score":0.86304635' in text and "0.8630463480949402" not in text


def test_zero_admitted_hits_cost_four_bytes_and_one_token() -> None:
    outcome = truncate("sake", [clean(KURA)], Limits(max_items=0, max_bytes=65536, max_tokens=4000))
    assert (outcome.kept, outcome.items_used, outcome.bytes_used, outcome.tokens_used) == ([], 0, 4, 1)
    assert outcome.omitted_total == 1


def test_a_hit_that_does_not_fit_is_skipped_and_the_walk_goes_on() -> None:
    big = clean(passage("big.md", 0, text="長" * 400))
    small = clean(passage("small.md", 0, text="短"))
    size_small = measure_hit("c", 1, small)[0]
    limits = Limits(max_items=40, max_bytes=size_small + 4, max_tokens=4000)
    outcome = truncate("c", [big, small], limits)
    assert outcome.kept == [1] and outcome.omitted_total == 1
    assert outcome.bytes_used == limits.max_bytes  # equality admits


def test_the_items_limit_keeps_the_first_hits() -> None:
    hits = [clean(passage(f"s{i}.md", i)) for i in range(5)]
    outcome = truncate("c", hits, Limits(max_items=2, max_bytes=65536, max_tokens=4000))
    assert outcome.kept == [0, 1] and outcome.omitted_total == 3


def test_cut_keeps_the_first_limit_hits() -> None:
    assert cut([1, 2, 3], 2) == [1, 2] and cut([1], 5) == [1]


# --- property: bytes and tokens recomputed from the serialized admitted hits --------------------

_TEXT = st.text(alphabet=st.characters(blacklist_categories=["Cs"], max_codepoint=0x2FFFF), min_size=0, max_size=60)
_SCORE = st.integers(min_value=0, max_value=800).map(lambda n: n / 8)  # exact in f32 and f64: same text


@st.composite
def hits(draw: st.DrawFn) -> list[dict[str, Any]]:
    count = draw(st.integers(min_value=0, max_value=12))
    out = []
    for i in range(count):
        lanes: dict[str, Any] = {}
        if draw(st.booleans()):
            lanes["bm25"] = {"rank": draw(st.integers(1, 50)), "score": draw(_SCORE)}
        if draw(st.booleans()):
            lanes["vector"] = {"rank": draw(st.integers(1, 50)), "score": draw(_SCORE)}
        out.append(
            {
                "source": draw(st.sampled_from(["a.md", "docs/蔵.md", 'q"uote\\.md', "tab\t.md"])),
                "paragraph": draw(st.integers(0, 2**32 - 1)) if i % 3 == 0 else i,
                "score": draw(_SCORE),
                "text": draw(_TEXT),
                "lanes": lanes,
            }
        )
    return out


def independent_wrapper(context: str, index: int, hit: dict[str, Any]) -> str:
    """The section 3.5 wrapper, serialized with json.dumps only."""
    lanes = hit["lanes"]
    lane = (
        "passage_fused"
        if "bm25" in lanes and "vector" in lanes
        else "passage_vector"
        if "vector" in lanes
        else "passage_bm25"
    )
    wrapper = {
        "candidate_id": "\x00".join(("passage", context, hit["source"], str(hit["paragraph"]))),
        "kind": "passage",
        "fused_rank": index + 1,
        "lane_ranks": [{"lane": lane, "rank": index + 1}],
        "citation_refs": [],
        "passage": {key: hit[key] for key in ("source", "paragraph", "score", "text", "lanes")},
    }
    return json.dumps(wrapper, ensure_ascii=False, separators=(",", ":"))


def quarter_tokens(text: str) -> int:
    return sum(1 if ord(char) < 128 else 4 for char in text)


@settings(max_examples=150, deadline=None)
@given(
    raw=hits(),
    context=st.sampled_from(["sake", "ctx", "文脈"]),
    max_items=st.integers(0, 12),
    max_bytes=st.integers(1, 3000),
    max_tokens=st.integers(1, 800),
)
def test_truncation_equals_the_accounting_of_its_serialized_hits(
    raw: list[dict[str, Any]], context: str, max_items: int, max_bytes: int, max_tokens: int
) -> None:
    limits = Limits(max_items=max_items, max_bytes=max_bytes, max_tokens=max_tokens)
    cleaned = [clean(hit) for hit in raw]
    outcome = truncate(context, cleaned, limits)
    wrappers = [independent_wrapper(context, i, hit) for i, hit in enumerate(raw)]
    assert [wrapper_text(context, i, hit) for i, hit in enumerate(cleaned)] == wrappers
    items = "[" + ",".join(wrappers[i] for i in outcome.kept) + "]"
    assert outcome.bytes_used == len(items.encode("utf-8")) + len("[]")
    assert outcome.tokens_used == math.ceil((quarter_tokens(items) + 2) / 4)
    assert outcome.items_used == len(outcome.kept) <= max_items
    assert outcome.omitted_total == len(raw) - len(outcome.kept)
    assert outcome.kept == sorted(outcome.kept)
    if outcome.kept:
        assert outcome.bytes_used <= max_bytes and outcome.tokens_used <= max_tokens
    # Greedy, skip-and-continue: every skipped hit would have broken a limit at its turn.
    for index in range(len(raw)):
        if index in outcome.kept:
            continue
        before = [i for i in outcome.kept if i < index]
        trial = "[" + ",".join(wrappers[i] for i in [*before, index]) + "]"
        assert (
            len(before) + 1 > max_items
            or len(trial.encode("utf-8")) + 2 > max_bytes
            or math.ceil((quarter_tokens(trial) + 2) / 4) > max_tokens
        )


@settings(max_examples=60, deadline=None)
@given(raw=hits(), context=st.sampled_from(["sake", "文脈"]))
def test_each_wrapper_measures_like_the_assemblers_own_passage_item(raw: list[dict[str, Any]], context: str) -> None:
    """A passage-only package: an item at fused_rank r is the hit at lane rank r, same bytes and tokens."""
    distinct = {(hit["source"], hit["paragraph"]): hit for hit in reversed(raw)}  # first occurrence wins
    raw = [hit for hit in raw if distinct[(hit["source"], hit["paragraph"])] is hit]
    record = {
        "query_id": "q",
        "context": context,
        "request": {"origins": [], "search_limit": 200, "budget": {"max_items": 1000, "max_bytes": 1048576}},
        "lanes": {"passages": raw},
    }
    package = json.loads(assemble(record))
    cleaned = [clean(hit) for hit in raw]
    for item in package["items"]:
        rank = item["fused_rank"]
        assert item["lane_ranks"] == [{"lane": item["lane_ranks"][0]["lane"], "rank": rank}]
        assert measure_hit(context, rank - 1, cleaned[rank - 1]) == (item["bytes"], item["estimated_tokens"])
