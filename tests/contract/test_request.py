"""Request validation (contract section 10) and budget resolution (section 8.1), one rule per test."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from assembler.contract.request import DEFAULT_LIMITS, Limits, parse_request, resolve_limits
from assembler.errors import RecordError
from assembler.stages.lanes import parse_record

if TYPE_CHECKING:
    from tests.conftest import RecordFactory, Rejector

OVER_LIMIT = "{} carries 1001 items, past the per-request limit of 1000; split the request"


def with_request(make_record: RecordFactory, query_id: str = "bad", **fields: Any) -> dict[str, Any]:
    """A valid record whose request has ``fields`` set (``...`` as a value deletes the key)."""
    record = make_record(query_id)
    for key, value in fields.items():
        if value is ...:
            record["request"].pop(key, None)
        else:
            record["request"][key] = value
    return record


def assert_error(error: RecordError, field: str, rule: str, query_id: str | None = "bad") -> None:
    assert error.query_id == query_id
    assert error.field == field
    assert rule in error.rule, error.rule


# --- rejected -------------------------------------------------------------------------------------


def test_missing_origins_is_rejected(make_record: RecordFactory, reject: Rejector) -> None:
    error = reject(with_request(make_record, origins=...))
    assert_error(error, "request.origins", "is required")


def test_origins_number_is_rejected(make_record: RecordFactory, reject: Rejector) -> None:
    error = reject(with_request(make_record, origins=5))
    assert_error(error, "request.origins", "must be a string or an array of strings")


def test_origins_non_string_element_names_its_index(make_record: RecordFactory, reject: Rejector) -> None:
    error = reject(with_request(make_record, origins=["a", 5, "c"]))
    assert_error(error, "request.origins[1]", "must be a string")


def test_origins_null_is_rejected(make_record: RecordFactory, reject: Rejector) -> None:
    error = reject(with_request(make_record, origins=None))
    assert_error(error, "request.origins", "is required")


def test_origins_over_1000_items_is_over_limit(make_record: RecordFactory, reject: Rejector) -> None:
    error = reject(with_request(make_record, origins=[f"o{i}" for i in range(1001)]))
    assert_error(error, "request.origins", OVER_LIMIT.format("origins"))


def test_labels_over_1000_items_is_over_limit(make_record: RecordFactory, reject: Rejector) -> None:
    error = reject(with_request(make_record, labels=[f"l{i}" for i in range(1001)]))
    assert_error(error, "request.labels", OVER_LIMIT.format("labels"))


def test_labels_non_string_element_names_its_index(make_record: RecordFactory, reject: Rejector) -> None:
    error = reject(with_request(make_record, labels=["a", None]))
    assert_error(error, "request.labels[1]", "must be a string, got null")


def test_budget_string_is_rejected(make_record: RecordFactory, reject: Rejector) -> None:
    error = reject(with_request(make_record, budget="x"))
    assert_error(error, "request.budget", "must be an object")


def test_rerank_number_is_rejected(make_record: RecordFactory, reject: Rejector) -> None:
    error = reject(with_request(make_record, rerank=5))
    assert_error(error, "request.rerank", "must be an object")


def test_rerank_model_number_is_rejected(make_record: RecordFactory, reject: Rejector) -> None:
    error = reject(with_request(make_record, rerank={"model": 5}))
    assert_error(error, "request.rerank.model", "must be a string")


def test_negative_search_limit_is_rejected(make_record: RecordFactory, reject: Rejector) -> None:
    error = reject(with_request(make_record, search_limit=-1))
    assert_error(error, "request.search_limit", "got -1")
    assert "from 0" in error.rule


def test_negative_budget_max_items_is_rejected(make_record: RecordFactory, reject: Rejector) -> None:
    error = reject(with_request(make_record, budget={"max_items": -1}))
    assert_error(error, "request.budget.max_items", "got -1")


def test_fractional_budget_max_bytes_is_rejected(make_record: RecordFactory, reject: Rejector) -> None:
    error = reject(with_request(make_record, budget={"max_bytes": 1.0}))
    assert_error(error, "request.budget.max_bytes", "must be a non-negative integer, got the number 1.0")


def test_boolean_search_limit_is_rejected(make_record: RecordFactory, reject: Rejector) -> None:
    error = reject(with_request(make_record, search_limit=True))
    assert_error(error, "request.search_limit", "got a boolean")


def test_boolean_budget_max_tokens_is_rejected(make_record: RecordFactory, reject: Rejector) -> None:
    error = reject(with_request(make_record, budget={"max_tokens": False}))
    assert_error(error, "request.budget.max_tokens", "got a boolean")


def test_include_communities_null_is_rejected(make_record: RecordFactory, reject: Rejector) -> None:
    error = reject(with_request(make_record, include_communities=None))
    assert_error(error, "request.include_communities", "null is not allowed")


def test_include_communities_integer_is_rejected(make_record: RecordFactory, reject: Rejector) -> None:
    error = reject(with_request(make_record, include_communities=1))
    assert_error(error, "request.include_communities", "must be a boolean")


def test_text_fallback_query_number_is_rejected(make_record: RecordFactory, reject: Rejector) -> None:
    error = reject(with_request(make_record, text_fallback_query=3))
    assert_error(error, "request.text_fallback_query", "must be a string")


def test_request_not_an_object_is_rejected(make_record: RecordFactory, reject: Rejector) -> None:
    record = make_record("bad")
    record["request"] = ["origins"]
    assert_error(reject(record), "request", "must be an object")


def test_shape_error_is_reported_before_the_over_limit_check(make_record: RecordFactory, reject: Rejector) -> None:
    error = reject(with_request(make_record, origins=[f"o{i}" for i in range(1001)], budget="x"))
    assert_error(error, "request.budget", "must be an object")


def test_duplicate_request_key_is_rejected(reject: Rejector) -> None:
    bad = '{"query_id":"bad","context":"c","request":{"origins":5,"origins":["a"]},"lanes":{}}'
    error = reject(bad)
    assert error.query_id == "bad"
    assert error.field.startswith("request")


# --- accepted edge cases ----------------------------------------------------------------------------


def test_bare_string_origins_is_a_one_element_list() -> None:
    assert parse_request({"origins": "a"}).origins == ("a",)


def test_empty_origins_is_valid() -> None:
    request = parse_request({"origins": []})
    assert request.origins == ()
    assert request.canonical_query == ""


def test_exactly_1000_origins_and_labels_are_accepted() -> None:
    cues = [f"c{i}" for i in range(1000)]
    request = parse_request({"origins": cues, "labels": cues})
    assert len(request.origins) == 1000
    assert len(request.labels) == 1000


def test_bare_string_labels_and_null_labels() -> None:
    assert parse_request({"origins": [], "labels": "杜氏"}).labels == ("杜氏",)
    assert parse_request({"origins": [], "labels": None}).labels == ()


def test_rerank_null_means_no_rerank() -> None:
    request = parse_request({"origins": [], "rerank": None})
    assert request.rerank_requested is False
    assert request.rerank_model is None


def test_rerank_model_null_is_a_rerank_without_model_pin() -> None:
    request = parse_request({"origins": [], "rerank": {"model": None}})
    assert request.rerank_requested is True
    assert request.rerank_model is None


def test_empty_rerank_object_requests_rerank() -> None:
    assert parse_request({"origins": [], "rerank": {}}).rerank_requested is True


def test_budget_null_takes_the_defaults(make_record: RecordFactory) -> None:
    record = with_request(make_record, budget=None)
    assert parse_record(record).limits == DEFAULT_LIMITS


def test_budget_max_items_null_takes_the_default_40(make_record: RecordFactory) -> None:
    record = with_request(make_record, budget={"max_items": None, "max_bytes": 100})
    assert parse_record(record).limits == Limits(max_items=40, max_bytes=100, max_tokens=4000)


def test_zero_budget_values_are_valid(make_record: RecordFactory) -> None:
    record = with_request(make_record, budget={"max_items": 0, "max_bytes": 0, "max_tokens": 0})
    assert parse_record(record).limits == Limits(0, 0, 0)


def test_unknown_request_keys_are_ignored() -> None:
    request = parse_request({"origins": ["a"], "future_knob": {"x": [1]}, "budget": {"max_items": 3, "zzz": "y"}})
    assert request.origins == ("a",)
    assert request.budget == {"max_items": 3}


def test_include_communities_defaults_to_false() -> None:
    assert parse_request({"origins": []}).include_communities is False


def test_search_limit_default_zero_and_ceiling() -> None:
    assert parse_request({"origins": []}).search_limit == 5
    assert parse_request({"origins": [], "search_limit": None}).search_limit == 5
    assert parse_request({"origins": [], "search_limit": 0}).search_limit == 0
    assert parse_request({"origins": [], "search_limit": 500}).search_limit == 200


def test_text_fallback_query_is_the_canonical_query_even_when_empty() -> None:
    assert parse_request({"origins": ["a", "b"]}).canonical_query == "a; b"
    assert parse_request({"origins": ["a"], "text_fallback_query": ""}).canonical_query == ""


def test_budget_ceilings_clamp_request_values() -> None:
    limits = resolve_limits({"max_items": 5000, "max_bytes": 10**9, "max_tokens": 10**12})
    assert limits == Limits(max_items=1000, max_bytes=1048576, max_tokens=10**12)


def test_overrides_replace_request_budget_then_ceilings_apply() -> None:
    assert resolve_limits({"max_items": 3}, {"max_items": 1}).max_items == 1
    assert resolve_limits({"max_items": 3}, {"max_items": 5000}).max_items == 1000
    assert resolve_limits({"max_bytes": 7}, {"max_items": 2}) == Limits(2, 7, 4000)


# --- budget overrides (the API's and the flags') ----------------------------------------------------


def test_overrides_past_a_u64_are_refused_naming_the_override() -> None:
    import pytest

    from assembler.contract.request import check_overrides
    from assembler.errors import UsageError

    cases = [
        (10**5000, "must be an integer from 0 to 18446744073709551615, got an integer of about 5,000 digits"),
        (2**64, "must be an integer from 0 to 18446744073709551615, got 18446744073709551616"),
        (-(10**5000), "must be a non-negative integer, got an integer of about 5,000 digits"),
        (-1, "must be a non-negative integer, got -1"),
        (1.5, "must be a non-negative integer, got the number 1.5"),
        (None, "must be a non-negative integer, got null"),
    ]
    for value, rule in cases:
        with pytest.raises(UsageError) as caught:
            check_overrides({"max_tokens": value})
        assert str(caught.value) == f"budget override max_tokens {rule}"
    assert check_overrides({"max_tokens": 2**64 - 1}) == {"max_tokens": 2**64 - 1}


def test_an_int_subclass_override_is_taken_as_its_number_whatever_it_overrides() -> None:
    from assembler.contract.request import check_overrides

    class Hostile(int):
        def __index__(self) -> int:
            raise RuntimeError("index")

        def __repr__(self) -> str:
            raise RuntimeError("repr")

        def __lt__(self, other: object) -> bool:
            raise RuntimeError("lt")

    checked = check_overrides({"max_items": Hostile(7)})
    assert checked == {"max_items": 7} and type(checked["max_items"]) is int


def test_a_request_budget_too_long_to_print_is_a_record_error(make_record: RecordFactory) -> None:
    import pytest

    from assembler.errors import InputError

    record = with_request(make_record, budget={"max_bytes": -(10**5000)})
    with pytest.raises(InputError) as caught:
        parse_record(record)
    assert_error(caught.value.error, "request.budget.max_bytes", "got an integer of about 5,000 digits")
