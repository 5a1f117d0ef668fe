"""Plain per-query reference implementation of the evidence-package contract.

Written only from ``shared/spec/evidence-contract.md`` and ``docs/lane-dump.md``.
It is deliberately straightforward: Python sets of character bigrams, a
pairwise near-duplicate loop, dicts and lists, one query at a time. It is the
oracle the vectorized package is tested against and the benchmark baseline.
"""

from __future__ import annotations

import json
import math
import unicodedata
from dataclasses import dataclass, field
from typing import Any

import numpy as np

NUL = "\u0000"
RRF_K = 60.0
NEAR_DUPLICATE_DICE_THRESHOLD = 0.9
MAX_LISTED_OMITTED = 20
DEFAULT_SEARCH_LIMIT = 5
MAX_SEARCH_LIMIT = 200
# field: (default, ceiling); None = no ceiling (usize::MAX).
BUDGET_LIMITS: dict[str, tuple[int, int | None]] = {
    "max_items": (40, 1000),
    "max_bytes": (65536, 1048576),
    "max_tokens": (4000, None),
}
NO_ANCHORS = "no anchors resolved from 'origins'"
LANE_NAMES = ("graph_query", "graph_activate", "passages", "communities", "citations")
PLAN_LANE_ORDER = ("resolve", "query", "activate", "passages", "communities", "citations")

Json = Any
Locator = tuple[str, int]


# ---------------------------------------------------------------------------
# JSON text (§1.6)
# ---------------------------------------------------------------------------


def _shortest_digits(text: str) -> tuple[str, int]:
    """Split a positive decimal like ``1.5e-05`` into digits and point position kk."""
    mantissa, _, exponent_text = text.partition("e")
    exponent = int(exponent_text) if exponent_text else 0
    int_part, _, frac_part = mantissa.partition(".")
    digits = int_part + frac_part
    point = len(int_part) + exponent
    stripped = digits.lstrip("0")
    point -= len(digits) - len(stripped)
    return stripped.rstrip("0"), point


def _layout(negative: bool, digits: str, kk: int, hi: int, lo: int) -> str:
    """Apply the Ryu/zmij layout to digits d1..dn with value 0.d1..dn * 10**kk."""
    n = len(digits)
    if n <= kk <= hi:
        body = digits + "0" * (kk - n) + ".0"
    elif 0 < kk < n and kk <= hi:
        body = digits[:kk] + "." + digits[kk:]
    elif lo < kk <= 0:
        body = "0." + "0" * (-kk) + digits
    else:
        exponent = kk - 1
        mantissa = digits[0] + ("." + digits[1:] if n > 1 else "")
        sign = "-" if exponent < 0 else "+"
        body = mantissa + "e" + sign + str(abs(exponent))
    return ("-" if negative else "") + body


def format_f64(value: float) -> str:
    """Serialize an f64 the way serde_json 1.0.151 (zmij) does."""
    if math.isnan(value) or math.isinf(value):
        return "null"
    negative = math.copysign(1.0, value) < 0
    if value == 0.0:
        return "-0.0" if negative else "0.0"
    digits, kk = _shortest_digits(repr(abs(value)))
    return _layout(negative, digits, kk, 16, -5)


def format_f32(value: float | np.float32) -> str:
    """Serialize an f32 the way serde_json 1.0.151 (zmij) does."""
    x = np.float32(value)
    if np.isnan(x) or np.isinf(x):
        return "null"
    negative = bool(np.signbit(x))
    if x == 0:
        return "-0.0" if negative else "0.0"
    text = np.format_float_scientific(np.abs(x), unique=True)
    digits, kk = _shortest_digits(text)
    return _layout(negative, digits, kk, 13, -6)


def to_json(value: Json) -> str:
    """Compact JSON text; dict order is kept, np.float32 is written as f32."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, np.float32):
        return format_f32(value)
    if isinstance(value, float):
        return format_f64(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, list):
        return "[" + ",".join(to_json(v) for v in value) + "]"
    if isinstance(value, dict):
        parts = [json.dumps(k, ensure_ascii=False) + ":" + to_json(v) for k, v in value.items()]
        return "{" + ",".join(parts) + "}"
    raise TypeError(f"cannot serialize {type(value).__name__}")


def quarter_tokens(text: str) -> int:
    """ASCII code points weigh 1 quarter-token, every other code point 4."""
    return sum(1 if ord(c) < 128 else 4 for c in text)


def measure(value: Json) -> tuple[int, int]:
    """UTF-8 byte length and quarter-tokens of the compact JSON of ``value``."""
    text = to_json(value)
    return len(text.encode("utf-8")), quarter_tokens(text)


def tokens_from_quarters(quarters: int) -> int:
    """Ceiling division by four."""
    return (quarters + 3) // 4


def overhead(count: int) -> int:
    """Bytes of the brackets and commas of a compact array with ``count`` elements."""
    return 2 if count == 0 else count + 1


# ---------------------------------------------------------------------------
# Near-duplicate text (§6)
# ---------------------------------------------------------------------------


def normalize_entry(s: str) -> str:
    """Lowercase per code point, NFKC, lowercase again, fold katakana to hiragana."""
    lowered = "".join(c.lower() for c in s)
    composed = unicodedata.normalize("NFKC", lowered)
    lowered_again = "".join(c.lower() for c in composed)
    folded = []
    for c in lowered_again:
        if 0x30A1 <= ord(c) <= 0x30F6:
            folded.append(chr(ord(c) - 0x60))
        else:
            folded.append(c)
    return "".join(folded)


def bigrams(s: str) -> set[str]:
    """Set of adjacent code-point pairs; one code point ``c`` gives ``{cc}``."""
    if len(s) == 1:
        return {s + s}
    return {s[i : i + 2] for i in range(len(s) - 1)}


def is_near_duplicate(a: set[str], b: set[str]) -> bool:
    """Dice(a, b) >= 0.9, both-empty counts as a match, with the size-bound shortcut."""
    denom = len(a) + len(b)
    if denom == 0:
        return True
    if 2.0 * min(len(a), len(b)) / denom < NEAR_DUPLICATE_DICE_THRESHOLD:
        return False
    shared = len(a & b)
    return 2.0 * shared / denom >= NEAR_DUPLICATE_DICE_THRESHOLD


def near_duplicate_reference(texts: list[str]) -> list[int | None]:
    """For passages in fused order: index of the first kept passage each duplicates, or None."""
    return reference_walk([bigrams(normalize_entry(t)) for t in texts])


def reference_walk(sets: list[set[str]]) -> list[int | None]:
    """The pairwise loop over prepared bigram sets: first kept match per passage, or None."""
    kept: list[int] = []
    result: list[int | None] = []
    for i, own in enumerate(sets):
        match: int | None = None
        for k in kept:
            if is_near_duplicate(sets[k], own):
                match = k
                break
        result.append(match)
        if match is None:
            kept.append(i)
    return result


# ---------------------------------------------------------------------------
# Wire objects (§1.3), rebuilt in declaration order with typed floats
# ---------------------------------------------------------------------------


def _f64(value: Json) -> float:
    return float(value)


def _f32(value: Json) -> np.float32:
    return np.float32(float(value))


def wire_locator(loc: Json) -> Json:
    """``Locator`` or null."""
    if loc is None:
        return None
    return {"kind": loc["kind"], "value": loc["value"]}


def wire_attribution(a: Json) -> dict[str, Json]:
    """``AttributionOut``."""
    return {
        "source": a["source"],
        "weight": _f64(a["weight"]),
        "count": a["count"],
        "paragraph": a.get("paragraph"),
        "section": a.get("section"),
        "locator": wire_locator(a.get("locator")),
    }


def wire_association(a: Json) -> dict[str, Json]:
    """``AssociationOut``."""
    return {
        "subject": a["subject"],
        "label": a["label"],
        "object": a["object"],
        "weight": _f64(a["weight"]),
        "count": a["count"],
        "attributions": [wire_attribution(x) for x in (a.get("attributions") or [])],
    }


def wire_passage(p: Json) -> dict[str, Json]:
    """``PassageHit`` with its ``PassageLanes``."""
    lanes_in = p.get("lanes") or {}
    lanes: dict[str, Json] = {}
    for name in ("bm25", "vector"):
        ev = lanes_in.get(name)
        if ev is not None:
            lanes[name] = {"rank": ev["rank"], "score": _f32(ev["score"])}
    return {
        "source": p["source"],
        "paragraph": p["paragraph"],
        "score": _f32(p["score"]),
        "text": p["text"],
        "lanes": lanes,
    }


def wire_community(c: Json) -> dict[str, Json]:
    """``CommunityHit``; optional keys omitted when absent, members when empty."""
    out: dict[str, Json] = {
        "community": c["community"],
        "score": _f32(c["score"]),
        "text": c["text"],
        "paragraph": c["paragraph"],
    }
    for key in ("level", "parent", "concept_count"):
        if c.get(key) is not None:
            out[key] = c[key]
    members = c.get("members") or []
    if members:
        out["members"] = [{"name": m["name"], "strength": _f64(m["strength"])} for m in members]
    if c.get("members_truncated"):
        out["members_truncated"] = True
    return out


def wire_citation(c: Json) -> dict[str, Json]:
    """``Citation``."""
    return {
        "text": c["text"],
        "source": c["source"],
        "section": c.get("section"),
        "locator": wire_locator(c.get("locator")),
    }


# ---------------------------------------------------------------------------
# Candidates (§2)
# ---------------------------------------------------------------------------


@dataclass
class Candidate:
    """One lane entry normalized into a selection candidate."""

    kind: str
    canonical_key: str
    candidate_id: str
    source: str | None
    lane: str
    lane_rank: int
    origins: set[Locator]
    payload: dict[str, Json]


def _attribution_beats(a: dict[str, Json], b: dict[str, Json]) -> bool:
    """True if attribution ``a`` is strictly greater than ``b`` in the primary order."""
    wa, wb = abs(a["weight"]), abs(b["weight"])
    if wa != wb:
        return bool(wa > wb)
    if a["source"] != b["source"]:
        return bool(a["source"] < b["source"])
    pa, pb = a["paragraph"], b["paragraph"]
    if (pa is None) != (pb is None):
        return pa is not None
    if pa is not None and pb is not None and pa != pb:
        return bool(pa < pb)
    return False


def primary_attribution(attributions: list[dict[str, Json]]) -> dict[str, Json] | None:
    """Maximum attribution (§2.3); on a complete tie the later one wins."""
    best: dict[str, Json] | None = None
    for a in attributions:
        if best is None or not _attribution_beats(best, a):
            best = a
    return best


def association_candidate(assoc: dict[str, Json], lane: str, rank: int) -> Candidate:
    """Candidate for a graph query association or an activation's inner association."""
    key = NUL.join([assoc["subject"], assoc["label"], assoc["object"]])
    primary = primary_attribution(assoc["attributions"])
    origins: set[Locator] = set()
    for a in assoc["attributions"]:
        if a["paragraph"] is not None:
            origins.add((a["source"], a["paragraph"]))
    return Candidate(
        kind="association",
        canonical_key=key,
        candidate_id="association" + NUL + key,
        source=None if primary is None else primary["source"],
        lane=lane,
        lane_rank=rank,
        origins=origins,
        payload=assoc,
    )


def passage_candidate(hit: dict[str, Json], context: str, rank: int) -> Candidate:
    """Candidate for a passage hit."""
    lanes = hit["lanes"]
    if "bm25" in lanes and "vector" in lanes:
        lane = "passage_fused"
    elif "vector" in lanes:
        lane = "passage_vector"
    else:
        lane = "passage_bm25"
    key = NUL.join([context, hit["source"], str(hit["paragraph"])])
    return Candidate(
        kind="passage",
        canonical_key=key,
        candidate_id="passage" + NUL + key,
        source=hit["source"],
        lane=lane,
        lane_rank=rank,
        origins={(hit["source"], hit["paragraph"])},
        payload=hit,
    )


def community_candidate(hit: dict[str, Json], context: str, rank: int) -> Candidate:
    """Candidate for a community hit (self-citing, source ``community:{id}``)."""
    source = "community:" + hit["community"]
    key = NUL.join([context, source, str(hit["paragraph"])])
    return Candidate(
        kind="community",
        canonical_key=key,
        candidate_id="community" + NUL + key,
        source=source,
        lane="community",
        lane_rank=rank,
        origins={(source, hit["paragraph"])},
        payload=hit,
    )


# ---------------------------------------------------------------------------
# Fusion (§3, §4)
# ---------------------------------------------------------------------------


@dataclass
class Fused:
    """A group of candidates sharing one candidate_id."""

    rep: Candidate
    lane_ranks: dict[str, int] = field(default_factory=dict)
    origins: set[Locator] = field(default_factory=set)
    score: float = 0.0
    fused_rank: int = 0


def fuse(pool: list[Candidate]) -> list[Fused]:
    """Exact-key dedup and reciprocal-rank fusion, sorted, with 1-based fused_rank."""
    groups: dict[str, Fused] = {}
    for c in pool:
        g = groups.get(c.candidate_id)
        if g is None:
            g = Fused(rep=c)
            groups[c.candidate_id] = g
        elif (c.lane_rank, c.lane) < (g.rep.lane_rank, g.rep.lane):
            g.rep = c
        best = g.lane_ranks.get(c.lane)
        if best is None or c.lane_rank < best:
            g.lane_ranks[c.lane] = c.lane_rank
        g.origins |= c.origins
    fused = list(groups.values())
    for g in fused:
        g.score = 0.0
        for lane in sorted(g.lane_ranks):
            g.score += 1.0 / (RRF_K + g.lane_ranks[lane])
    fused.sort(key=lambda g: (-g.score, g.rep.kind, g.rep.canonical_key))
    for i, g in enumerate(fused):
        g.fused_rank = i + 1
    return fused


# ---------------------------------------------------------------------------
# Limits and plan
# ---------------------------------------------------------------------------


def resolve_limits(budget: Json, overrides: dict[str, int] | None) -> dict[str, int]:
    """Defaults and ceilings (§8.1); ``overrides`` replace the request fields first."""
    fields: dict[str, Json] = dict(budget) if isinstance(budget, dict) else {}
    if overrides:
        fields.update(overrides)
    limits: dict[str, int] = {}
    for name in ("max_items", "max_bytes", "max_tokens"):
        default, ceiling = BUDGET_LIMITS[name]
        value = fields.get(name)
        resolved = default if value is None else int(value)
        limits[name] = resolved if ceiling is None else min(resolved, ceiling)
    return limits


def resolve_search_limit(request: dict[str, Json]) -> int:
    """``clamp(search_limit, 5, 200)``: absent/null → 5, then capped at 200."""
    value = request.get("search_limit")
    resolved = DEFAULT_SEARCH_LIMIT if value is None else int(value)
    return min(resolved, MAX_SEARCH_LIMIT)


def _as_list(value: Json) -> list[str]:
    """A bare string is a one-element list; absent/null is empty."""
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    return list(value)


def _ran(ran: bool, reason: str | None = None) -> dict[str, Json]:
    out: dict[str, Json] = {"ran": ran}
    if reason is not None:
        out["reason"] = reason
    return out


def derive_plan_lanes(record: dict[str, Json]) -> dict[str, dict[str, Json]]:
    """plan.lanes from the request and which lanes are present (§9.4, lane-dump.md)."""
    request = record["request"]
    lanes = record["lanes"]
    context = record["context"]
    origins = _as_list(request.get("origins"))
    labels = _as_list(request.get("labels"))
    anchors = isinstance(lanes.get("graph_activate"), list) and len(origins) > 0
    plan: dict[str, dict[str, Json]] = {}
    plan["resolve"] = _ran(False, "origins was empty") if not origins else _ran(True)
    if not anchors:
        plan["query"] = _ran(False, NO_ANCHORS)
    elif not labels:
        plan["query"] = _ran(False, "no 'labels' given")
    else:
        plan["query"] = _ran(True)
    plan["activate"] = _ran(True) if anchors else _ran(False, NO_ANCHORS)
    if resolve_search_limit(request) == 0:
        plan["passages"] = _ran(False, "the requested limit is 0")
    elif lanes.get("passages") is None:
        plan["passages"] = _ran(False, "the query yields no searchable terms")
    else:
        plan["passages"] = _ran(True)
    if not request.get("include_communities"):
        plan["communities"] = _ran(False, "include_communities was false")
    elif lanes.get("communities") is None:
        reason = (
            f"no communities artifact for '{context}': context '{context}::communities' "
            "does not exist \u2014 run `taguru communities` to build it"
        )
        plan["communities"] = _ran(False, reason)
    else:
        plan["communities"] = _ran(True)
    plan["citations"] = _ran(True)
    return plan


def plan_lanes(record: dict[str, Json]) -> dict[str, dict[str, Json]]:
    """Given ``plan_lanes`` entries (contract key order) or the derived ones."""
    derived = derive_plan_lanes(record)
    given = record.get("plan_lanes")
    if not isinstance(given, dict):
        return derived
    out: dict[str, dict[str, Json]] = {}
    for name in PLAN_LANE_ORDER:
        entry = given.get(name)
        if not isinstance(entry, dict):
            out[name] = derived[name]
            continue
        lane_plan: dict[str, Json] = {"ran": bool(entry["ran"])}
        if entry.get("reason") is not None:
            lane_plan["reason"] = entry["reason"]
        if entry.get("floor") is not None:
            lane_plan["floor"] = _f32(entry["floor"])
        out[name] = lane_plan
    return out


def reranker_plan(request: dict[str, Json]) -> dict[str, Json]:
    """No provider is configured in this offline setting (§11.4)."""
    if request.get("rerank") is None:
        return {"configured": False, "ran": False}
    return {"configured": False, "ran": False, "reason": "not_configured"}


# ---------------------------------------------------------------------------
# Items and admission (§5, §7, §8, §9)
# ---------------------------------------------------------------------------


def _valid_permutation(order: Json, length: int) -> bool:
    if not isinstance(order, list) or len(order) != length:
        return False
    seen: set[int] = set()
    for i in order:
        if isinstance(i, bool) or not isinstance(i, int) or i < 0 or i >= length or i in seen:
            return False
        seen.add(i)
    return True


def _citation_refs(g: Fused, lookup: dict[Locator, dict[str, Json]]) -> list[Locator]:
    if g.rep.kind != "association":
        return []
    return [loc for loc in sorted(g.origins) if loc in lookup]


def _item(g: Fused, contradicts: list[str], refs: list[Locator]) -> dict[str, Json]:
    """The item without ``bytes``/``estimated_tokens``, in wire key order."""
    item: dict[str, Json] = {
        "candidate_id": g.rep.candidate_id,
        "kind": g.rep.kind,
        "fused_rank": g.fused_rank,
        "lane_ranks": [{"lane": lane, "rank": g.lane_ranks[lane]} for lane in sorted(g.lane_ranks)],
        "citation_refs": [{"source": s, "paragraph": p} for s, p in refs],
    }
    if g.rep.kind == "association" and g.rep.payload["attributions"]:
        sources = sorted({a["source"] for a in g.rep.payload["attributions"]})
        item["corroboration"] = {
            "sources": sources,
            "attributions": [{"source": s, "paragraph": p} for s, p in refs],
        }
    if contradicts:
        item["contradicts"] = contradicts
    item[g.rep.kind] = g.rep.payload
    return item


def _stamp(item: dict[str, Json], item_bytes: int, item_quarters: int) -> dict[str, Json]:
    """Insert ``bytes`` and ``estimated_tokens`` before the payload key."""
    out: dict[str, Json] = {}
    for key, value in item.items():
        if key in ("association", "passage", "community"):
            out["bytes"] = item_bytes
            out["estimated_tokens"] = tokens_from_quarters(item_quarters)
        out[key] = value
    return out


def _citation_entry(loc: Locator, lookup: dict[Locator, dict[str, Json]]) -> dict[str, Json]:
    return {"source": loc[0], "paragraph": loc[1], "citation": lookup[loc]}


def _build_pool(record: dict[str, Json]) -> tuple[list[Candidate], dict[Locator, dict[str, Json]]]:
    """Normalize every lane entry into a candidate and build the citation lookup."""
    lanes = record["lanes"]
    for name in lanes:
        if name not in LANE_NAMES:
            raise ValueError(f"unknown lane {name!r}")
    context = record["context"]
    search_limit = resolve_search_limit(record["request"])
    pool: list[Candidate] = []
    for rank, assoc in enumerate(lanes.get("graph_query") or [], start=1):
        pool.append(association_candidate(wire_association(assoc), "graph_query", rank))
    for rank, act in enumerate(lanes.get("graph_activate") or [], start=1):
        inner = wire_association(act["association"])
        pool.append(association_candidate(inner, "graph_activate", rank))
    passages = (lanes.get("passages") or [])[:search_limit]
    for rank, hit in enumerate(passages, start=1):
        pool.append(passage_candidate(wire_passage(hit), context, rank))
    communities = (lanes.get("communities") or [])[:search_limit]
    for rank, hit in enumerate(communities, start=1):
        pool.append(community_candidate(wire_community(hit), context, rank))
    lookup: dict[Locator, dict[str, Json]] = {}
    for entry in lanes.get("citations") or []:
        loc = (entry["source"], entry["paragraph"])
        if loc not in lookup:
            lookup[loc] = wire_citation(entry["citation"])
    return pool, lookup


def assemble_reference(
    record: dict[str, Json],
    *,
    overrides: dict[str, int] | None = None,
    reorder: list[int] | None = None,
) -> str:
    """Assemble one lane-dump record into the compact evidence-package text."""
    request = record["request"]
    limits = resolve_limits(request.get("budget"), overrides)
    pool, lookup = _build_pool(record)

    # Fusion and exact-key dedup.
    fused = fuse(pool)
    dedup_dropped = len(pool) - len(fused)

    # Near-duplicate passage suppression, in fused order.
    omitted: list[dict[str, Json]] = []
    by_reason: dict[str, int] = {}
    survivors: list[Fused] = []
    kept: list[tuple[Fused, set[str]]] = []
    for g in fused:
        if g.rep.kind != "passage":
            survivors.append(g)
            continue
        own = bigrams(normalize_entry(g.rep.payload["text"]))
        match: Fused | None = None
        for other, other_set in kept:
            if is_near_duplicate(other_set, own):
                match = other
                break
        if match is None:
            kept.append((g, own))
            survivors.append(g)
        else:
            omitted.append(
                {
                    "candidate_id": g.rep.candidate_id,
                    "kind": "passage",
                    "reason": "duplicate_passage",
                    "duplicate_of": match.rep.candidate_id,
                }
            )
            by_reason["duplicate_passage"] = by_reason.get("duplicate_passage", 0) + 1

    # Optional reorder (a valid permutation only).
    if reorder is not None and _valid_permutation(reorder, len(survivors)):
        survivors = [survivors[i] for i in reorder]

    # Contradiction groups by (subject, label), then admission units.
    buckets: dict[tuple[str, str], list[int]] = {}
    for i, g in enumerate(survivors):
        if g.rep.kind == "association":
            pair = (g.rep.payload["subject"], g.rep.payload["label"])
            buckets.setdefault(pair, []).append(i)
    units: list[list[int]] = []
    used: set[int] = set()
    for i, g in enumerate(survivors):
        if i in used:
            continue
        members = [i]
        if g.rep.kind == "association":
            bucket = buckets[(g.rep.payload["subject"], g.rep.payload["label"])]
            if len(bucket) >= 2:
                members = list(bucket)
        for m in members:
            used.add(m)
        units.append(members)
    contradiction_groups = sum(1 for u in units if len(u) > 1)
    contradicts: dict[int, list[str]] = {}
    for unit in units:
        if len(unit) > 1:
            for m in unit:
                others = [survivors[o].rep.candidate_id for o in unit if o != m]
                contradicts[m] = sorted(others)

    # Diversity tiering.
    tier_width = max(1, limits["max_items"] // 4)
    ordered_units: list[list[int]] = []
    seen: set[str] = set()
    for start in range(0, len(units), tier_width):
        tier = units[start : start + tier_width]
        recorded: set[str] = set()
        novel: list[list[int]] = []
        repeat: list[list[int]] = []
        for unit in tier:
            source = survivors[unit[0]].rep.source
            if source is None:
                novel.append(unit)
            elif source in seen or source in recorded:
                repeat.append(unit)
            else:
                novel.append(unit)
                recorded.add(source)
        seen |= recorded
        ordered_units.extend(novel)
        ordered_units.extend(repeat)

    # Greedy budgeted admission.
    items: list[dict[str, Json]] = []
    committed: set[Locator] = set()
    citations: list[dict[str, Json]] = []
    items_bytes = items_quarters = cit_bytes = cit_quarters = 0
    for unit in ordered_units:
        unit_items: list[dict[str, Json]] = []
        unit_bytes = unit_quarters = 0
        new_locs: list[Locator] = []
        new_bytes = new_quarters = 0
        for m in unit:
            g = survivors[m]
            refs = _citation_refs(g, lookup)
            item = _item(g, contradicts.get(m, []), refs)
            b, q = measure(item)
            unit_items.append(_stamp(item, b, q))
            unit_bytes += b
            unit_quarters += q
            for loc in refs:
                if loc in committed or loc in new_locs:
                    continue
                cb, cq = measure(_citation_entry(loc, lookup))
                new_locs.append(loc)
                new_bytes += cb
                new_quarters += cq
        n_items = len(items) + len(unit_items)
        n_cits = len(citations) + len(new_locs)
        total_bytes = overhead(n_items) + items_bytes + unit_bytes
        total_bytes += overhead(n_cits) + cit_bytes + new_bytes
        total_quarters = overhead(n_items) + items_quarters + unit_quarters
        total_quarters += overhead(n_cits) + cit_quarters + new_quarters
        fits = (
            n_items <= limits["max_items"]
            and total_bytes <= limits["max_bytes"]
            and tokens_from_quarters(total_quarters) <= limits["max_tokens"]
        )
        if fits:
            items.extend(unit_items)
            items_bytes += unit_bytes
            items_quarters += unit_quarters
            for loc in new_locs:
                committed.add(loc)
                citations.append(_citation_entry(loc, lookup))
            cit_bytes += new_bytes
            cit_quarters += new_quarters
        else:
            reason = "contradiction_group_exceeds_budget" if len(unit) > 1 else "budget_exceeded"
            for m in unit:
                g = survivors[m]
                omitted.append({"candidate_id": g.rep.candidate_id, "kind": g.rep.kind, "reason": reason})
                by_reason[reason] = by_reason.get(reason, 0) + 1

    citations.sort(key=lambda e: (e["source"], e["paragraph"]))
    bytes_used = overhead(len(items)) + items_bytes + overhead(len(citations)) + cit_bytes
    quarters_used = overhead(len(items)) + items_quarters + overhead(len(citations)) + cit_quarters

    package: dict[str, Json] = {
        "items": items,
        "citations": citations,
        "budget": {
            "items_used": len(items),
            "bytes_used": bytes_used,
            "tokens_used": tokens_from_quarters(quarters_used),
            "limits": {
                "max_items": limits["max_items"],
                "max_bytes": limits["max_bytes"],
                "max_tokens": limits["max_tokens"],
            },
        },
        "omitted": omitted[:MAX_LISTED_OMITTED],
        "omitted_total": len(omitted),
        "omitted_by_reason": {k: by_reason[k] for k in sorted(by_reason) if by_reason[k] > 0},
        "plan": {
            "lanes": plan_lanes(record),
            "selection": {
                "dedup_dropped": dedup_dropped,
                "contradiction_groups": contradiction_groups,
                "diversity_tier_width": tier_width,
            },
            "reranker": reranker_plan(request),
        },
    }
    return to_json(package)
