"""Every quality rule switched to its contract setting gives the contract's packages, byte for byte.

``QualityPolicy`` keeps each of its five rules behind a constructor field; with all five at the
contract's setting the policy must be the contract policy: on the conformance fixtures, on
generated pools, on random hypothesis pools, and with a reorder. The remaining fields
(``fact_lag``, ``statement_share``, ``guard``) only tune rule 2, so they are varied to show
they are inert once it is off. Each rule switched back on alone must change some package, or
the comparison would prove nothing.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from assembler.errors import UsageError
from assembler.pipeline import assemble_records
from assembler.run.outputs import package_line
from assembler.selection import CONTRACT
from assembler.selection.quality import QualityPolicy
from assembler.stages.lanes import LaneRecord, parse_record
from tests.oracle.pools import generate_records
from tests.selection.test_selection import act, assoc, passage, record
from tests.strategies import lane_batches

DATA = Path(__file__).resolve().parent.parent.parent / "data" / "conformance"
FIXTURES = [json.loads(line) for line in (DATA / "lanes.jsonl").read_text(encoding="utf-8").splitlines()]
EXPECTED = (DATA / "expected.jsonl").read_text(encoding="utf-8").splitlines(keepends=True)

CONTRACT_SETTINGS = QualityPolicy(
    name="quality-as-contract",
    identity=False,  # rule 1 off: an association citing a pooled passage stays
    passages_first=False,  # rule 2 off: fused order
    signs=False,  # rule 3 off: every (subject, label) bucket of two or more is a group
    words=False,  # rule 4 off: the bigram Dice rule alone
    tiers=True,  # rule 5 off: the contract's diversity tiers
)
RULES_ON = {
    "identity": True,
    "passages_first": True,
    "signs": True,
    "words": True,
    "tiers": False,
}
GENERATED = [parse_record(raw) for raw in generate_records(60, seed=23)] + [
    parse_record(raw) for raw in generate_records(2, seed=5, profile="worst")
]
# Rule 4 never decides on the generated pools: templated text about two entities is its case.
TEMPLATED = parse_record(
    record(
        {
            "passages": [passage("for.md", "For Love may refer to:"), passage("to.md", "To Love may refer to:")],
            "graph_activate": [act(assoc("Love", "is_a", "song", ("for.md", 0, 1.0)))],
        }
    )
)


def reversals(records: list[LaneRecord]) -> dict[str, list[int]]:
    """A reversing permutation of every query's survivors (what the contract policy walks)."""
    walked = assemble_records(records).decisions.filter(pl.col("walk_step").is_not_null())
    counts = dict(walked.group_by("q").len().iter_rows())
    return {r.query_id: list(range(counts.get(q, 0)))[::-1] for q, r in enumerate(records)}


def packages(records: list[LaneRecord], policy: Any = CONTRACT, **kwargs: Any) -> list[str]:
    return assemble_records(records, policy=policy, **kwargs).packages


def test_the_fixtures_reproduce_the_expected_packages() -> None:
    result = assemble_records([parse_record(raw) for raw in FIXTURES], policy=CONTRACT_SETTINGS)
    lines = [package_line(q, p) for q, p in zip(result.query_ids, result.packages, strict=True)]
    assert lines == EXPECTED


@pytest.mark.parametrize("index", range(len(FIXTURES)), ids=[raw["query_id"] for raw in FIXTURES])
def test_each_fixture_alone_reproduces_its_expected_package(index: int) -> None:
    result = assemble_records([parse_record(FIXTURES[index])], policy=CONTRACT_SETTINGS)
    assert package_line(result.query_ids[0], result.packages[0]) == EXPECTED[index]


def test_generated_pools_match_the_contract_policy() -> None:
    assert packages(GENERATED, CONTRACT_SETTINGS) == packages(GENERATED)


def test_the_decisions_match_too() -> None:
    ours = assemble_records(GENERATED, policy=CONTRACT_SETTINGS)
    theirs = assemble_records(GENERATED)
    columns = ["q", "fused_rank", "unit", "tier", "walk_step", "admitted", "reason", "bytes_after", "tokens_after"]
    assert (
        ours.decisions.select(columns)
        .sort("q", "fused_rank")
        .equals(theirs.decisions.select(columns).sort("q", "fused_rank"))
    )
    assert ours.summaries.equals(theirs.summaries)


@pytest.mark.parametrize(
    "tuning",
    [{"fact_lag": None}, {"fact_lag": -2}, {"statement_share": None}, {"statement_share": 5.0}, {"guard": False}],
    ids=str,
)
def test_rule_2_tuning_is_inert_once_rule_2_is_off(tuning: dict[str, Any]) -> None:
    assert packages(GENERATED, replace(CONTRACT_SETTINGS, **tuning)) == packages(GENERATED)


def test_a_reorder_is_applied_the_same_way() -> None:
    reorders = reversals(GENERATED)
    reordered = packages(GENERATED, reorders=reorders)
    assert reordered != packages(GENERATED)  # the reorder takes effect
    assert packages(GENERATED, CONTRACT_SETTINGS, reorders=reorders) == reordered
    # An invalid permutation (one index short) is refused by both alike.
    short = {qid: order[1:] for qid, order in reorders.items()}
    for policy in (CONTRACT_SETTINGS, CONTRACT):
        with pytest.raises(UsageError, match="must be a permutation of the query's survivors: has"):
            packages(GENERATED, policy, reorders=short)


def test_the_templated_pool_matches_the_contract_policy() -> None:
    assert packages([TEMPLATED], CONTRACT_SETTINGS) == packages([TEMPLATED])


@pytest.mark.parametrize("rule", sorted(RULES_ON))
def test_each_rule_switched_back_on_changes_some_package(rule: str) -> None:
    policy = replace(CONTRACT_SETTINGS, **{rule: RULES_ON[rule]})
    pool = [*GENERATED, TEMPLATED]
    assert packages(pool, policy) != packages(pool)


@settings(max_examples=60, deadline=None)
@given(lane_batches(), st.booleans())
def test_random_pools_match_the_contract_policy(batch: list[dict[str, Any]], reverse: bool) -> None:
    records = [parse_record(raw) for raw in batch]
    reorders = reversals(records) if reverse else None
    assert packages(records, CONTRACT_SETTINGS, reorders=reorders) == packages(records, reorders=reorders)
