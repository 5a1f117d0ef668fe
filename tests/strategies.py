"""Hypothesis strategies: small random lane-dump records that collide on purpose.

Small alphabets make the interesting cases common: the same triple in both graph lanes,
several objects under one (subject, label), shared sources, near-identical passage texts,
unresolvable locators, and budgets that bind.
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

NAMES = st.sampled_from(["猫", "cat", "dog", "s", "Σα"])
LABELS = st.sampled_from(["is_a", "rel", "杜氏"])
SOURCES = st.sampled_from(["a.md", "b.md", "docs/c.md", "z.txt"])
PARAGRAPHS = st.integers(min_value=0, max_value=3)
WEIGHTS = st.sampled_from([1.0, -1.0, 0.5, 2.5, -3.0, 1e-7, 1e16])
TEXTS = st.sampled_from(
    [
        "the quick brown fox jumps over the lazy dog",
        "the quick brown fox jumps over the lazy dogs",
        "青嶺酒造は雲居県霧沢町の蔵元である。",
        "青嶺酒造は雲居県霧沢町の蔵元である",
        "ｱｲｳｴｵ",
        "あいうえお",
        "",
        "a",
        "x y",
        "x  y",
        'quote " and \\ backslash\n',
    ]
)


@st.composite
def attributions(draw: st.DrawFn) -> dict[str, Any]:
    return {
        "source": draw(SOURCES),
        "weight": draw(WEIGHTS),
        "count": draw(st.integers(0, 3)),
        "paragraph": draw(st.none() | PARAGRAPHS),
        "section": draw(st.none() | st.just("intro")),
        "locator": draw(st.none() | st.just({"kind": "page", "value": "1"})),
    }


@st.composite
def associations(draw: st.DrawFn) -> dict[str, Any]:
    return {
        "subject": draw(NAMES),
        "label": draw(LABELS),
        "object": draw(NAMES),
        "weight": draw(WEIGHTS),
        "count": draw(st.integers(0, 5)),
        "attributions": draw(st.lists(attributions(), max_size=3)),
    }


@st.composite
def passages(draw: st.DrawFn) -> dict[str, Any]:
    lanes: dict[str, Any] = {}
    if draw(st.booleans()):
        lanes["bm25"] = {"rank": draw(st.integers(1, 9)), "score": draw(st.floats(0, 30, width=32))}
    if draw(st.booleans()):
        lanes["vector"] = {"rank": draw(st.integers(1, 9)), "score": draw(st.floats(-1, 1, width=32))}
    return {
        "source": draw(SOURCES),
        "paragraph": draw(PARAGRAPHS),
        "score": draw(st.floats(0, 30, width=32)),
        "text": draw(TEXTS),
        "lanes": lanes,
    }


@st.composite
def communities(draw: st.DrawFn) -> dict[str, Any]:
    hit: dict[str, Any] = {
        "community": draw(st.sampled_from(["L0-1", "L0-2", "L1-0"])),
        "score": draw(st.floats(0, 1, width=32)),
        "text": draw(TEXTS),
        "paragraph": draw(PARAGRAPHS),
    }
    if draw(st.booleans()):
        hit["level"] = 0
        hit["members"] = [{"name": "cat", "strength": 0.25}]
        hit["members_truncated"] = draw(st.booleans())
    return hit


@st.composite
def lane_records(draw: st.DrawFn, query_id: str = "q") -> dict[str, Any]:
    """One lane-dump record with every lane drawn."""
    activations = [
        {"strength": draw(WEIGHTS), "path": ["cat"], "association": a}
        for a in draw(st.lists(associations(), max_size=6))
    ]
    query = draw(st.lists(associations(), max_size=4))
    # Copy some activations into the query lane so the same triple arrives from both graph lanes.
    query += [a["association"] for a in activations[: draw(st.integers(0, 2))]]
    cited = {
        (a["source"], a["paragraph"])
        for x in query + [v["association"] for v in activations]
        for a in x["attributions"]
        if a["paragraph"] is not None
    }
    resolved = sorted(draw(st.sets(st.sampled_from(sorted(cited)))) if cited else set())
    citations = [
        {"source": s, "paragraph": p, "citation": {"text": draw(TEXTS), "source": s, "section": None, "locator": None}}
        for s, p in resolved
    ]
    budget = draw(
        st.fixed_dictionaries(
            {},
            optional={
                "max_items": st.integers(0, 12),
                "max_bytes": st.integers(0, 4000),
                "max_tokens": st.integers(0, 1200),
            },
        )
    )
    request: dict[str, Any] = {"origins": draw(st.lists(NAMES, max_size=2)), "budget": budget}
    if draw(st.booleans()):
        request["labels"] = ["is_a"]
    if draw(st.booleans()):
        request["include_communities"] = True
    if draw(st.booleans()):
        request["rerank"] = {}
    return {
        "query_id": query_id,
        "context": draw(st.sampled_from(["ctx", "酒"])),
        "request": request,
        "lanes": {
            "graph_query": query,
            "graph_activate": activations if draw(st.booleans()) or activations else None,
            "passages": draw(st.lists(passages(), max_size=7)),
            "communities": draw(st.none() | st.lists(communities(), max_size=3)),
            "citations": citations,
        },
    }


@st.composite
def lane_batches(draw: st.DrawFn, max_size: int = 4) -> list[dict[str, Any]]:
    """Several records with distinct query ids."""
    count = draw(st.integers(1, max_size))
    return [draw(lane_records(query_id=f"q{i}")) for i in range(count)]
