"""Contradiction groups (contract section 5): units, ``contradicts`` texts and their measurements.

The stage is tested on survivor frames against a plain Python statement of the rule, end to end
against the reference oracle (``tests/oracle/reference.py``) on groups of 2 to 50 members, and on one
record of 20,000 facts sharing one ``(subject, label)``: the bug this stage was rewritten for (its
members' ``contradicts`` texts were built by a pairwise join, quadratic in the group's size).
"""

from __future__ import annotations

import json
from typing import Any, Literal

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from assembler import assemble_batch
from assembler.contract.jsontext import escape_string, measure
from assembler.selection import get_policy
from assembler.stages.admission import GROUP_EXCEEDS_BUDGET
from assembler.stages.groups import EAGER_GROUP_SIZE, group_contradictions, materialize_contradicts
from tests.oracle.reference import assemble_reference

SEP = "\x00"
GENEROUS_OVERRIDES = {"max_items": 1000, "max_bytes": 1048576, "max_tokens": 10**9}

# (q, kind, subject, label, object, weight): one survivor per row, in survivor order per q.
Row = tuple[int, str, str, str, str, float]


def survivors(rows: list[Row]) -> pl.DataFrame:
    """A survivor frame as the policies hand it to the stage; ``position`` is the order per q."""
    data: dict[str, list[Any]] = {k: [] for k in ("q", "position", "kind", "subject", "label", "weight")}
    data |= {"candidate_id": [], "id_json": []}
    counts: dict[int, int] = {}
    for q, kind, subject, label, obj, weight in rows:
        data["q"].append(q)
        data["position"].append(counts.get(q, 0))
        counts[q] = counts.get(q, 0) + 1
        data["kind"].append(kind)
        data["subject"].append(subject if kind == "association" else None)
        data["label"].append(label if kind == "association" else None)
        data["weight"].append(weight if kind == "association" else None)
        cid = SEP.join((kind, subject, label, obj)) if kind == "association" else f"{kind}{SEP}{obj}"
        data["candidate_id"].append(cid)
        data["id_json"].append(escape_string(cid))
    return pl.DataFrame(
        data,
        schema={
            "q": pl.UInt32,
            "position": pl.Int64,
            "kind": pl.String,
            "subject": pl.String,
            "label": pl.String,
            "weight": pl.Float64,
            "candidate_id": pl.String,
            "id_json": pl.String,
        },
    )


def plain_rule(
    rows: list[Row], disagreement: Literal["label", "sign"] = "label"
) -> tuple[dict[int, list[list[str]]], dict[tuple[int, str], list[str]], dict[int, int]]:
    """The rule as stated, in plain Python: units (candidate ids) per q, contradicts, group counts."""
    units: dict[int, list[list[str]]] = {}
    contradicts: dict[tuple[int, str], list[str]] = {}
    groups: dict[int, int] = {}
    for q in sorted({row[0] for row in rows}):
        mine = [row for row in rows if row[0] == q]
        ids = [SEP.join(row[1:5]) if row[1] == "association" else f"{row[1]}{SEP}{row[4]}" for row in mine]
        buckets: dict[tuple[str, str], list[int]] = {}
        for i, row in enumerate(mine):
            if row[1] == "association":
                buckets.setdefault((row[2], row[3]), []).append(i)
        placed: set[int] = set()
        for i, row in enumerate(mine):
            if i in placed:
                continue
            bucket = buckets.get((row[2], row[3]), [i]) if row[1] == "association" else [i]
            weights = [mine[m][5] for m in bucket]
            atomic = disagreement == "label" or (min(weights) < 0 < max(weights))
            if len(bucket) >= 2 and atomic:
                units.setdefault(q, []).append([ids[m] for m in bucket])
                groups[q] = groups.get(q, 0) + 1
                for m in bucket:
                    contradicts[q, ids[m]] = sorted(ids[o] for o in bucket if o != m)
            else:  # a singleton, or (sign mode) the members of a one-sided bucket, at the first one's place
                units.setdefault(q, []).extend([ids[m]] for m in bucket)
            placed.update(bucket)
    return units, contradicts, groups


def stage(rows: list[Row], disagreement: Literal["label", "sign"] = "label") -> tuple[pl.DataFrame, pl.DataFrame]:
    """The stage, then every group's texts built (as the policy does for the admitted ones)."""
    frame, counts = group_contradictions(survivors(rows), disagreement=disagreement)
    eager = frame["contradicts_bytes"].is_not_null() & (frame["unit_size"] <= EAGER_GROUP_SIZE)
    assert frame["contradicts_json"].is_not_null().equals(eager)  # small groups built, large ones measured
    return materialize_contradicts(frame), counts


def units_of(frame: pl.DataFrame) -> dict[int, list[list[str]]]:
    out: dict[int, list[list[str]]] = {}
    for (q, _), part in frame.group_by("q", "unit", maintain_order=True):
        out.setdefault(int(q), []).append(part["candidate_id"].to_list())
    return out


def check_against_plain_rule(rows: list[Row], disagreement: Literal["label", "sign"] = "label") -> None:
    frame, counts = stage(rows, disagreement)
    units, contradicts, groups = plain_rule(rows, disagreement)
    assert frame.height == len(rows)
    assert frame.select("q", "unit", "position").rows() == sorted(frame.select("q", "unit", "position").rows())
    assert units_of(frame) == units
    assert dict(counts.iter_rows()) == groups
    for q, cid, size, text, n_bytes, n_quarters in frame.select(
        "q", "candidate_id", "unit_size", "contradicts_json", "contradicts_bytes", "contradicts_quarters"
    ).iter_rows():
        if (q, cid) in contradicts:
            others = contradicts[q, cid]
            expected = "[" + ",".join(escape_string(other) for other in others) + "]"
            assert (text, n_bytes, n_quarters, size) == (expected, *measure(expected), len(others) + 1)
        else:
            assert (text, n_bytes, n_quarters, size) == (None, None, None, 1)


def a(subject: str, label: str, obj: str, weight: float = 1.0, q: int = 0) -> Row:
    return (q, "association", subject, label, obj, weight)


def p(name: str, q: int = 0) -> Row:
    return (q, "passage", "", "", name, 0.0)


# --- the stage on survivor frames --------------------------------------------------------------


def test_every_candidate_outside_a_bucket_of_two_is_a_unit_of_its_own() -> None:
    rows = [p("x"), a("s", "l", "o1"), a("s", "m", "o2"), a("t", "l", "o3"), p("y")]
    frame, counts = stage(rows)
    assert frame["unit"].to_list() == [0, 1, 2, 3, 4]
    assert frame["unit_size"].to_list() == [1] * 5
    assert frame["contradicts_json"].null_count() == 5
    assert counts.height == 0
    check_against_plain_rule(rows)


def test_a_group_stands_at_its_first_members_position() -> None:
    rows = [p("x"), a("s", "l", "o1"), p("y"), a("t", "l", "o2"), a("s", "l", "o3"), p("z")]
    frame, counts = stage(rows)
    assert frame.select("position", "unit").rows() == [(0, 0), (1, 1), (4, 1), (2, 2), (3, 3), (5, 4)]
    assert dict(counts.iter_rows()) == {0: 1}
    check_against_plain_rule(rows)


def test_reordered_survivors_move_the_group_to_its_new_first_member() -> None:
    rows = [a("s", "l", "o1"), p("x"), a("s", "l", "o2"), p("y")]
    base = survivors(rows)
    moved = base.with_columns(position=pl.Series([3, 0, 1, 2], dtype=pl.Int64)).sort("q", "position")
    frame, _ = group_contradictions(moved)
    assert frame.select("candidate_id", "unit").rows() == [
        (f"passage{SEP}x", 0),
        (f"association{SEP}s{SEP}l{SEP}o2", 1),
        (f"association{SEP}s{SEP}l{SEP}o1", 1),
        (f"passage{SEP}y", 2),
    ]


def test_contradicts_lists_the_other_members_in_string_order_of_their_ids() -> None:
    # '"' sorts before '#' as a string, but its escaped JSON text '\"' sorts after '#': the order is
    # that of the ids. Non-ASCII ids check the character offsets the texts are cut at.
    objects = ["z", 'a"', "a#", "日本", "é", "a", "a\u0001"]
    rows = [a("s", "l", obj) for obj in objects]
    frame, _ = stage(rows)
    by_object = dict(zip(objects, frame.sort("position")["contradicts_json"].to_list(), strict=True))
    others = sorted(SEP.join(("association", "s", "l", obj)) for obj in objects if obj != "z")
    assert by_object["z"] == "[" + ",".join(escape_string(cid) for cid in others) + "]"
    assert json.loads(by_object["z"]).index(f'association{SEP}s{SEP}l{SEP}a"') < json.loads(by_object["z"]).index(
        f"association{SEP}s{SEP}l{SEP}a#"
    )
    check_against_plain_rule(rows)


def test_group_counts_are_per_query_and_buckets_do_not_cross_queries() -> None:
    rows = [a("s", "l", "o1", q=0), a("s", "l", "o2", q=0), a("t", "l", "o1", q=0), a("t", "l", "o2", q=0)]
    rows += [a("s", "l", "o3", q=1), a("s", "l", "o4", q=2), a("s", "l", "o5", q=2), a("s", "l", "o6", q=2)]
    frame, counts = stage(rows)
    assert dict(counts.iter_rows()) == {0: 2, 2: 1}
    assert frame.filter(pl.col("q") == 1)["unit_size"].to_list() == [1]
    check_against_plain_rule(rows)


def test_sign_mode_groups_only_buckets_with_opposite_signs() -> None:
    rows = [
        a("s", "l", "o1", 1.0),
        p("x"),
        a("s", "l", "o2", 2.0),  # same sign as o1: no group, but placed with o1
        a("t", "l", "o3", 1.0),
        a("t", "l", "o4", -1.0),  # opposite signs: a group
        a("u", "l", "o5", 0.0),
        a("u", "l", "o6", 0.0),  # zero is no sign
    ]
    frame, counts = stage(rows, "sign")
    assert dict(counts.iter_rows()) == {0: 1}
    assert frame.select("position", "unit", "unit_size").rows() == [
        (0, 0, 1),
        (2, 1, 1),
        (1, 2, 1),
        (3, 3, 2),
        (4, 3, 2),
        (5, 4, 1),
        (6, 5, 1),
    ]
    check_against_plain_rule(rows, "sign")
    check_against_plain_rule(rows, "label")


def test_no_survivors_and_no_associations() -> None:
    frame, counts = stage([])
    assert frame.height == 0 and counts.height == 0
    frame, counts = stage([p("x"), p("y")])
    assert frame["unit"].to_list() == [0, 1] and counts.height == 0


def test_texts_are_built_only_for_the_rows_handed_over() -> None:
    rows = [a("s", "l", "o1"), a("s", "l", "o2"), a("t", "l", "o3"), a("t", "l", "o4"), p("x")]
    frame, _ = group_contradictions(survivors(rows))
    frame = frame.with_columns(contradicts_json=pl.lit(None, dtype=pl.String))  # as if larger than EAGER_GROUP_SIZE
    built = materialize_contradicts(frame.filter(pl.col("subject") == "t"))
    assert built["contradicts_json"].to_list() == [
        "[" + escape_string(f"association{SEP}t{SEP}l{SEP}o4") + "]",
        "[" + escape_string(f"association{SEP}t{SEP}l{SEP}o3") + "]",
    ]
    whole = materialize_contradicts(frame)
    assert whole.drop("contradicts_json").equals(frame.drop("contradicts_json"))
    assert whole["contradicts_json"].null_count() == 1


@given(
    st.lists(
        st.tuples(
            st.integers(0, 2),
            st.sampled_from(["association", "association", "association", "passage"]),
            st.sampled_from(["s", "t", "日"]),
            st.sampled_from(["l", "m"]),
            st.text(alphabet='ab"é\u0001日', max_size=3),
            st.sampled_from([-1.0, 0.0, 0.5, 2.0]),
        ),
        max_size=30,
    ),
    st.sampled_from(["label", "sign"]),
)
@settings(deadline=None)
def test_the_stage_follows_the_plain_rule(raw: list[Row], disagreement: Literal["label", "sign"]) -> None:
    # Candidate ids are unique per query (exact dedup comes first): keep each id's first row.
    seen: set[tuple[int, str, str, str, str]] = set()
    rows: list[Row] = []
    for row in raw:
        key = (row[0], row[1], row[2] if row[1] == "association" else "", row[3] if row[1] == "association" else "")
        if (*key, row[4]) not in seen:
            seen.add((*key, row[4]))
            rows.append(row)
    rows.sort(key=lambda row: row[0])
    check_against_plain_rule(rows, disagreement)


# --- end to end --------------------------------------------------------------------------------


def fact(subject: str, label: str, obj: str, weight: float = 1.0, source: str = "d.md") -> dict[str, Any]:
    return {
        "subject": subject,
        "label": label,
        "object": obj,
        "weight": weight,
        "count": 1,
        "attributions": [
            {"source": source, "weight": 1.0, "count": 1, "paragraph": 0, "section": None, "locator": None}
        ],
    }


def lane_record(graph: list[dict[str, Any]], query_id: str = "q", **request: Any) -> dict[str, Any]:
    return {
        "query_id": query_id,
        "context": "ctx",
        "request": {"origins": ["s"], "search_limit": 10, **request},
        "lanes": {
            "graph_query": graph,
            "graph_activate": [],
            "passages": [
                {
                    "source": "d.md",
                    "paragraph": 0,
                    "score": 1.0,
                    "text": "a passage about s",
                    "lanes": {"bm25": {"rank": 1, "score": 1.0}},
                }
            ],
            "citations": [
                {
                    "source": "d.md",
                    "paragraph": 0,
                    "citation": {"text": "cited", "source": "d.md", "section": None, "locator": None},
                }
            ],
        },
    }


def grouped_record(size: int, query_id: str = "q") -> dict[str, Any]:
    """A group of ``size`` (odd objects include non-ASCII and quotes) between two singletons."""
    graph = [fact("s", "before", "x")]
    graph += [fact("s", "l", "o" + str(i) + "é" * (i % 3 == 0) + '"' * (i % 5 == 0)) for i in range(size)]
    graph += [fact("s", "after", "y"), fact("t", "m", "y1", 1.0), fact("t", "m", "y2", -1.0)]
    return lane_record(graph, query_id)


@pytest.mark.parametrize("size", [2, 3, 7, 20, 41, 50])
@pytest.mark.parametrize("overrides", [None, GENEROUS_OVERRIDES, {"max_items": 5}], ids=["default", "generous", "5"])
def test_packages_equal_the_reference_byte_for_byte(size: int, overrides: dict[str, int] | None) -> None:
    record = grouped_record(size)
    package = assemble_batch([record], overrides=overrides).packages[0]
    assert package == assemble_reference(record, overrides=overrides)
    parsed = json.loads(package)
    assert parsed["plan"]["selection"]["contradiction_groups"] == 2
    if overrides is GENEROUS_OVERRIDES:  # the group is admitted: its texts were built
        assert sum("contradicts" in item for item in parsed["items"]) == size + 2


def test_a_batch_of_many_group_sizes_equals_the_reference() -> None:
    records = [grouped_record(size, f"q{size}") for size in range(2, 51)]
    for overrides in (None, GENEROUS_OVERRIDES):
        result = assemble_batch(records, overrides=overrides)
        assert list(result.packages) == [assemble_reference(r, overrides=overrides) for r in records]


@pytest.mark.parametrize(
    "overrides",
    [{"max_items": 10}, {"max_items": 30, "max_bytes": 20_000}, {"max_items": 1000, "max_tokens": 3000}],
    ids=["items", "bytes", "tokens"],
)
def test_a_refused_group_is_measured_exactly_without_its_text(overrides: dict[str, int]) -> None:
    size = EAGER_GROUP_SIZE + 8  # a smaller group has its texts built with its measurements
    record = grouped_record(size)
    tight = assemble_batch([record], overrides=overrides).selection.sort("fused_rank")
    loose = assemble_batch([record], overrides=GENEROUS_OVERRIDES).selection.sort("fused_rank")
    members = pl.col("unit_size") == size
    assert tight.filter(members)["reason"].to_list() == [GROUP_EXCEEDS_BUDGET] * size
    assert tight.filter(members)["item_json"].null_count() == size
    assert tight.filter(members)["contradicts_json"].null_count() == size
    assert loose.filter(members)["admitted"].all()
    assert loose.filter(members)["item_json"].null_count() == 0
    for column in ("item_bytes", "item_quarters", "unit", "unit_size"):
        assert tight[column].to_list() == loose[column].to_list(), column
    admitted = tight.filter(pl.col("admitted"))["fused_rank"].to_list()
    assert admitted
    assert (
        tight.filter(pl.col("fused_rank").is_in(admitted))["item_json"].to_list()
        == loose.filter(pl.col("fused_rank").is_in(admitted))["item_json"].to_list()
    )
    assert assemble_batch([record], overrides=overrides).packages[0] == assemble_reference(record, overrides=overrides)


def test_the_quality_policy_refuses_a_large_signed_group_whole() -> None:
    # Sources no pooled passage holds, so rule 1 (evidence identity) folds none of them.
    graph = [fact("s", "l", f"o{i}", 1.0 if i % 2 else -1.0, source="f.md") for i in range(200)]
    graph += [fact("t", "l", f"o{i}", 1.0, source="g.md") for i in range(3)]  # one-sided: three singletons
    result = assemble_batch([lane_record(graph)], policy=get_policy("quality"))
    package = json.loads(result.packages[0])
    assert package["plan"]["selection"]["contradiction_groups"] == 1
    assert package["omitted_by_reason"][GROUP_EXCEEDS_BUDGET] == 200
    admitted = {item["candidate_id"] for item in package["items"]}
    assert {f"association{SEP}t{SEP}l{SEP}o{i}" for i in range(3)} <= admitted
    assert all("contradicts" not in item for item in package["items"])


def test_large_group_is_not_materialized_quadratically() -> None:
    # 20,000 facts sharing one (subject, label): the pairwise join built 20,000 x 19,999 ids
    # (killed by the OS). The group can never fit 40 items, so no member's text is built.
    size = 20_000
    graph = [fact("s", "l", f"o{i}", source=f"d{i % 50}.md") for i in range(size)]
    graph.append(fact("s", "other", "alone"))
    result = assemble_batch([lane_record(graph)])
    package = json.loads(result.packages[0])
    assert package["plan"]["selection"]["contradiction_groups"] == 1
    assert package["omitted_by_reason"] == {GROUP_EXCEEDS_BUDGET: size}
    assert package["omitted_total"] == size
    assert sorted(item["candidate_id"] for item in package["items"]) == [
        f"association{SEP}s{SEP}other{SEP}alone",
        f"passage{SEP}ctx{SEP}d.md{SEP}0",
    ]
    members = result.selection.filter(pl.col("unit_size") == size)
    assert members.height == size
    assert members["item_json"].null_count() == size
    assert members["contradicts_json"].null_count() == size
    # Measured all the same: every member carries the 19,999 other ids, so its item is larger
    # than that array (brackets and commas included).
    id_bytes = members["id_json"].str.len_bytes().cast(pl.Int64)
    arrays = int(id_bytes.sum()) - id_bytes + size
    assert (members["item_bytes"] > arrays + len(',"contradicts":')).all()
    assert (members["item_quarters"] >= members["item_bytes"]).all()
