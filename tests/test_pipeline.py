"""Property tests over random pools: the seed's invariants I1-I6, and byte equality with the
plain per-query reference implementation (tests/oracle/reference.py, written independently from
the contract)."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from assembler import assemble_batch
from tests.oracle.pools import generate_records
from tests.oracle.reference import assemble_reference
from tests.strategies import lane_batches, lane_records

PROPERTY = settings(max_examples=150, deadline=None)
CONFORMANCE_LINES = (
    (Path(__file__).resolve().parent.parent / "data" / "conformance" / "lanes.jsonl")
    .read_text(encoding="utf-8")
    .splitlines()
)


def fused_count(record: dict[str, Any]) -> int:
    """Distinct candidate ids of a record (passage/community lists cut to search_limit)."""
    lanes = record["lanes"]
    limit = min(record["request"].get("search_limit", 5), 200)
    ids = {("a", a["subject"], a["label"], a["object"]) for a in lanes["graph_query"] or []}
    ids |= {
        ("a", x["association"]["subject"], x["association"]["label"], x["association"]["object"])
        for x in lanes["graph_activate"] or []
    }
    ids |= {("p", h["source"], h["paragraph"]) for h in (lanes["passages"] or [])[:limit]}
    ids |= {("c", h["community"], h["paragraph"]) for h in (lanes["communities"] or [])[:limit]}
    return len(ids)


@PROPERTY
@given(lane_batches())
def test_batch_equals_the_reference_byte_for_byte(records: list[dict[str, Any]]) -> None:
    result = assemble_batch(records)
    assert result.packages == [assemble_reference(record) for record in records]


@PROPERTY
@given(lane_records(), st.randoms(use_true_random=False))
def test_invariants_hold(record: dict[str, Any], rnd: random.Random) -> None:
    text = assemble_batch([record]).packages[0]
    package = json.loads(text)
    items, budget, limits = package["items"], package["budget"], package["budget"]["limits"]
    # I1: no orphan citations, both ways.
    refs = {(r["source"], r["paragraph"]) for item in items for r in item["citation_refs"]}
    entries = [(c["source"], c["paragraph"]) for c in package["citations"]]
    assert set(entries) == refs and len(entries) == len(set(entries))
    # I2: budgets are hard ceilings, except the documented 4-byte / 1-token empty floor.
    assert budget["items_used"] == len(items) <= limits["max_items"]
    if items:
        assert budget["bytes_used"] <= limits["max_bytes"] and budget["tokens_used"] <= limits["max_tokens"]
    else:
        assert (budget["bytes_used"], budget["tokens_used"]) == (4, 1)
    # I6 and the count rule: every fused candidate is either admitted or counted as omitted.
    assert len(items) + package["omitted_total"] == fused_count(record)
    assert sum(package["omitted_by_reason"].values()) == package["omitted_total"]
    assert len(package["omitted"]) == min(20, package["omitted_total"])
    # I4: corroboration names every distinct attribution source of the association.
    for item in items:
        if item["kind"] == "association" and item["association"]["attributions"]:
            sources = sorted({a["source"] for a in item["association"]["attributions"]})
            assert item["corroboration"]["sources"] == sources
            assert item["corroboration"]["attributions"] == item["citation_refs"]
        else:
            assert "corroboration" not in item
    # I5: a contradiction group is admitted whole or omitted whole.
    admitted = {item["candidate_id"] for item in items}
    for item in items:
        assert set(item.get("contradicts", [])) <= admitted
    # I3: byte-identical when the pool arrives in another order (lane order in the record,
    # citation lookup order, position in the batch); lane ranks themselves are input.
    shuffled = json.loads(json.dumps(record))
    shuffled["lanes"] = dict(reversed(list(shuffled["lanes"].items())))
    rnd.shuffle(shuffled["lanes"]["citations"])
    other = {**json.loads(json.dumps(record)), "query_id": "other"}
    assert assemble_batch([other, shuffled]).packages[1] == text


@PROPERTY
@given(lane_batches(), st.randoms(use_true_random=False))
def test_fusion_is_deterministic_regardless_of_pool_order(records: list[dict[str, Any]], rnd: random.Random) -> None:
    """`selection_is_deterministic_regardless_of_pool_order`, on the candidate frame itself."""
    from assembler.stages.fuse import fuse
    from assembler.stages.lanes import build_batch, parse_record

    batch = build_batch([parse_record(record) for record in records])
    order = list(range(batch.candidates.height))
    rnd.shuffle(order)
    forward, dropped = fuse(batch.candidates, batch.origins, batch.citations)
    shuffled, dropped_shuffled = fuse(batch.candidates[order], batch.origins, batch.citations)
    columns = ["q", "candidate_id", "fused_rank", "lane", "lane_rank", "lane_ranks_json", "citation_refs_json"]
    assert forward.select(columns).equals(shuffled.select(columns))
    assert dropped.sort("q").equals(dropped_shuffled.sort("q"))


@PROPERTY
@given(lane_records(), st.randoms(use_true_random=False))
def test_reordering_the_activate_pool_keeps_every_invariant(record: dict[str, Any], rnd: random.Random) -> None:
    """Lane order is rank; a different order is a different (valid) input with the same rules."""
    if record["lanes"]["graph_activate"]:
        rnd.shuffle(record["lanes"]["graph_activate"])
    package = json.loads(assemble_batch([record]).packages[0])
    assert len(package["items"]) + package["omitted_total"] == fused_count(record)


def test_generated_typical_and_worst_pools_equal_the_reference() -> None:
    records = generate_records(60, seed=7) + generate_records(3, seed=8, profile="worst")
    for index, record in enumerate(records):
        record["query_id"] = f"r{index}"
    assert assemble_batch(records).packages == [assemble_reference(record) for record in records]


@PROPERTY
@given(lane_records(), st.permutations(list(range(12))))
def test_reorders_equal_the_reference(record: dict[str, Any], order: list[int]) -> None:
    """A permutation of the survivors reorders admission exactly as the contract says; anything
    else (here: the full 12 indices, of the wrong length unless the pool has 12 survivors) is the
    caller's UsageError naming the query and the rule."""
    from assembler import UsageError

    package = json.loads(assemble_batch([record]).packages[0])
    survivors = (
        len(package["items"]) + package["omitted_total"] - package["omitted_by_reason"].get("duplicate_passage", 0)
    )
    permutation = [i for i in order if i < survivors] + list(range(len(order), survivors))
    result = assemble_batch([record], reorders={record["query_id"]: permutation})
    assert result.packages[0] == assemble_reference(record, reorder=permutation)
    if survivors != len(order):
        with pytest.raises(UsageError, match=rf"reorders\['q'\] .*has 12 indices for {survivors} survivors"):
            assemble_batch([record], reorders={record["query_id"]: order})


def test_the_public_decisions_frame_names_queries_and_hides_serialized_internals() -> None:
    from assembler.analysis import analyze

    records = [json.loads(line) for line in CONFORMANCE_LINES]
    result = assemble_batch(records, overrides={"max_items": 3})
    frame = result.decisions
    assert frame.columns[:3] == ["query_id", "q", "fused_rank"]
    assert set(frame["query_id"].unique()) == set(result.query_ids)
    assert not [name for name in frame.columns if name.endswith("_json") or name == "item_quarters"]
    # The analysis frame is the same shape plus the lane columns, not a second copy.
    candidates = analyze(records, overrides={"max_items": 3}).candidates
    assert candidates.drop("lane_entries", "dedup_merged", "contributions").equals(frame)


def test_api_overrides_are_refused_as_the_command_line_refuses_them() -> None:
    from assembler import UsageError

    record = json.loads(CONFORMANCE_LINES[0])
    for overrides, rule in (
        ({"max_items": -1}, "must be a non-negative integer, got -1"),
        ({"max_items": 2.7}, "must be a non-negative integer, got the number 2.7"),
        ({"max_itemz": 5}, "unknown budget override 'max_itemz'"),
    ):
        with pytest.raises(UsageError, match=rule.replace("(", r"\(")):
            assemble_batch([record], overrides=overrides)


def test_a_policy_is_taken_by_name_or_as_an_object_everywhere(tmp_path: Path) -> None:
    from assembler import RunOptions, get_policy, run_assembly

    records = [json.loads(line) for line in CONFORMANCE_LINES]
    by_name = assemble_batch(records, policy="quality").packages
    assert by_name == assemble_batch(records, policy=get_policy("quality")).packages
    source = tmp_path / "lanes.jsonl"
    source.write_text("\n".join(CONFORMANCE_LINES) + "\n", encoding="utf-8")
    run_assembly(source, tmp_path / "out.jsonl", RunOptions(policy="quality"))  # one path, not a list
    lines = (tmp_path / "out.jsonl").read_text(encoding="utf-8").splitlines()
    assert [json.loads(line)["package"] for line in lines] == [json.loads(text) for text in by_name]


# --- the Python API's arguments: every bad one is an AssemblerError naming it --------------------


class _RaisingDict(dict[str, Any]):
    """A dict whose own methods raise (the storage behind them is a valid record)."""

    def items(self) -> Any:
        raise RuntimeError("items")

    def keys(self) -> Any:
        raise RuntimeError("keys")

    def __getitem__(self, key: str) -> Any:
        raise RuntimeError("getitem")

    def get(self, key: str, default: Any = None) -> Any:
        raise RuntimeError("get")


class _RaisingStr(str):
    """A string whose own methods raise (its characters are a valid id)."""

    def __str__(self) -> str:
        raise RuntimeError("str")

    def encode(self, encoding: str = "utf-8", errors: str = "strict") -> bytes:
        raise RuntimeError("encode")

    def __hash__(self) -> int:
        raise RuntimeError("hash")

    def __eq__(self, other: object) -> bool:
        raise RuntimeError("eq")


class _RaisingList(list[Any]):
    def __iter__(self) -> Any:
        raise RuntimeError("iter")

    def __len__(self) -> int:
        raise RuntimeError("len")


def _conformance_record() -> dict[str, Any]:
    record: dict[str, Any] = json.loads(CONFORMANCE_LINES[0])
    return record


def _record_error(records: list[Any]) -> Any:
    from assembler import InputError

    with pytest.raises(InputError) as caught:
        assemble_batch(records)
    return caught.value.error


def test_a_dict_subclass_whose_methods_raise_is_a_record_error_naming_the_field() -> None:
    record = _conformance_record()
    error = _record_error([{**record, "request": _RaisingDict(record["request"])}])
    assert (error.line, error.query_id, error.field) == (1, record["query_id"], "request")
    assert error.rule == "cannot be read: its _RaisingDict (a dict subclass) raised RuntimeError"
    whole = _record_error([_RaisingDict(record)])
    assert (whole.query_id, whole.field) == (record["query_id"], "")
    assert whole.rule.startswith("cannot be read: its _RaisingDict")


def test_a_str_subclass_whose_methods_raise_is_a_record_error_naming_the_field() -> None:
    record = _conformance_record()
    for field in ("query_id", "context"):
        error = _record_error([{**record, field: _RaisingStr(record[field])}])
        assert (error.field, error.rule) == (
            field,
            "cannot be read: its _RaisingStr (a str subclass) raised RuntimeError",
        )
        assert type(error.query_id) is str  # the id's characters, read without its methods
    broken = _record_error([{**record, "query_id": _RaisingStr("q"), "context": 5}])
    assert broken.field == "query_id" and "RuntimeError" in broken.rule


def test_a_list_subclass_whose_methods_raise_is_a_record_error_naming_the_field() -> None:
    record = _conformance_record()
    request = {**record["request"], "origins": _RaisingList(record["request"]["origins"])}
    error = _record_error([{**record, "request": request}])
    assert (error.field, error.rule) == (
        "request.origins",
        "cannot be read: its _RaisingList (a list subclass) raised RuntimeError",
    )


def test_a_well_behaved_str_subclass_id_is_read_as_its_characters() -> None:
    class Tagged(str):
        pass

    record = _conformance_record()
    result = assemble_batch([{**record, "query_id": Tagged(record["query_id"]), "context": Tagged(record["context"])}])
    assert result.packages == assemble_batch([record]).packages
    assert [type(query_id) for query_id in result.query_ids] == [str]


def test_a_budget_too_long_to_print_is_a_record_error_and_an_override_a_usage_error() -> None:
    from assembler import UsageError

    record = _conformance_record()
    huge = {**record, "request": {**record["request"], "budget": {"max_items": 10**5000}}}
    error = _record_error([huge])
    assert error.field == "request.budget.max_items"
    assert error.rule == "must be an integer from 0 to 18446744073709551615, got an integer of about 5,000 digits"
    for value in (10**5000, -(10**5000), 2**64):
        with pytest.raises(UsageError, match=r"^budget override max_tokens must be"):
            assemble_batch([record], overrides={"max_tokens": value})
    top = json.loads(assemble_batch([record], overrides={"max_tokens": 2**64 - 1}).packages[0])
    assert top["budget"]["limits"]["max_tokens"] == 2**64 - 1


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"records": 5}, "records must be an iterable of lane-dump objects or a Polars frame, got int"),
        ({"overrides": [5]}, "overrides must be a mapping of budget names to integers, got list"),
        ({"overrides": _RaisingDict(max_items=1)}, "overrides cannot be read: its items() raised RuntimeError"),
        ({"overrides": {5: 1}}, "a budget override is named by a string, got int"),
        ({"reorders": [[0, 1]]}, "reorders must be a mapping of query ids to lists of survivor indices"),
        ({"reorders": _RaisingDict(q=[0])}, "reorders cannot be read: its items() raised RuntimeError"),
        ({"reorders": {5: [0]}}, "a key is int, not a query id"),
        ({"reorders": {"nobody": [0]}}, "reorders['nobody']: no query of the batch has this id"),
        ({"reorders": {"QID": 3}}, "reorders['QID']: must be a list of survivor indices (integers), got int"),
        ({"reorders": {"QID": "01"}}, "reorders['QID']: must be a list of survivor indices (integers), got str"),
        ({"reorders": {"QID": [0, "1"]}}, "reorders['QID'][1]: must be an integer (a survivor index), got str"),
        ({"reorders": {"QID": [True]}}, "reorders['QID'][0]: must be an integer (a survivor index), got bool"),
        ({"reorders": {"QID": [0, 0]}}, "reorders['QID'] must be a permutation of the query's survivors: has 2"),
    ],
)
def test_api_arguments_of_the_wrong_shape_are_usage_errors_naming_them(arguments: dict[str, Any], message: str) -> None:
    from assembler import UsageError

    record = _conformance_record()
    if type(arguments.get("reorders")) is dict:
        arguments = {
            "reorders": {
                key.replace("QID", record["query_id"]) if isinstance(key, str) else key: value
                for key, value in arguments["reorders"].items()
            }
        }
        message = message.replace("QID", record["query_id"])
    arguments = {"records": [record], **arguments}
    with pytest.raises(UsageError) as caught:
        assemble_batch(**arguments)
    assert message in str(caught.value)


def test_a_numpy_permutation_is_a_valid_reorder() -> None:
    import numpy as np

    record = _conformance_record()
    package = json.loads(assemble_batch([record]).packages[0])
    survivors = (
        len(package["items"]) + package["omitted_total"] - package["omitted_by_reason"].get("duplicate_passage", 0)
    )
    order = list(reversed(range(survivors)))
    expected = assemble_batch([record], reorders={record["query_id"]: order}).packages
    assert assemble_batch([record], reorders={record["query_id"]: np.array(order)}).packages == expected
