"""The evidence request: validation (contract section 10) and budget resolution (section 8.1)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from assembler.contract.wire import (
    Field,
    ListOf,
    Shape,
    ShapeError,
    check_duplicates,
    check_number,
    check_string,
    check_uint,
    describe,
    int_text,
)
from assembler.errors import UsageError, shown

__all__ = [
    "DEFAULT_LIMITS",
    "LIMIT_CEILINGS",
    "MAX_INPUT_ITEMS",
    "REQUEST_FIELDS",
    "Limits",
    "Request",
    "build_request",
    "clamped_fields",
    "effective_search_limit",
    "ignored_budget_keys",
    "parse_request",
    "resolve_limits",
]

MAX_INPUT_ITEMS = 1000
U64_MAX = 2**64 - 1
"""The largest value of a budget field (a u64 on the server)."""
DEFAULT_SEARCH_LIMIT = 5
MAX_SEARCH_LIMIT = 200


@dataclass(frozen=True)
class Limits:
    """The resolved budget: every admitted package fits all three."""

    max_items: int
    max_bytes: int
    max_tokens: int


DEFAULT_LIMITS = Limits(max_items=40, max_bytes=65536, max_tokens=4000)
# max_tokens has no ceiling on the server (usize::MAX); None means unbounded here.
LIMIT_CEILINGS: dict[str, int | None] = {"max_items": 1000, "max_bytes": 1048576, "max_tokens": None}


@dataclass(frozen=True)
class Request:
    """The fields of an evidence request that selection and the plan depend on."""

    origins: tuple[str, ...]
    labels: tuple[str, ...]
    text_fallback_query: str | None
    search_limit: int
    include_communities: bool
    budget: dict[str, int]
    rerank_requested: bool
    rerank_model: str | None

    @property
    def canonical_query(self) -> str:
        """The passage/community/reranker query: the fallback text, else origins joined."""
        if self.text_fallback_query is not None:
            return self.text_fallback_query
        return "; ".join(self.origins)


def _cue_list(value: Any, path: str) -> tuple[str, ...]:
    if isinstance(value, str):
        return (check_string(value, path),)
    if not isinstance(value, list):
        raise ShapeError(path, "must be a string or an array of strings")
    return tuple(check_string(item, f"{path}[{i}]") for i, item in enumerate(value))


def _check_length(cues: tuple[str, ...], path: str) -> None:
    """The over_limit rule; checked after every shape rule, as the server does (section 10)."""
    if len(cues) > MAX_INPUT_ITEMS:
        raise ShapeError(
            path,
            f"{path.rsplit('.', 1)[-1]} carries {len(cues)} items, past the per-request limit "
            f"of {MAX_INPUT_ITEMS}; split the request",
        )


def _optional_uint(request: dict[str, Any], key: str, path: str) -> int | None:
    value = request.get(key)
    return None if value is None else check_uint(value, f"{path}.{key}")


REQUEST_FIELDS: Shape = (
    Field("origins", ListOf("str")),
    Field("labels", ListOf("str"), required=False, nullable=True),
    Field("text_fallback_query", "str", required=False, nullable=True),
    Field("search_limit", "u64", required=False, nullable=True),
    Field("include_communities", "bool", required=False),
    Field(
        "budget",
        tuple(Field(name, "u64", required=False, nullable=True) for name in vars(DEFAULT_LIMITS)),
        required=False,
        nullable=True,
    ),
    Field("rerank", (Field("model", "str", required=False, nullable=True),), required=False, nullable=True),
    Field("dice_floor", "f64", required=False, nullable=True),
    Field("semantic_floor", "f64", required=False, nullable=True),
    Field("resolve_limit", "u64", required=False, nullable=True),
    Field("activate_decay", "f64", required=False, nullable=True),
    Field("activate_limit", "u64", required=False, nullable=True),
)
"""The request's fields as a wire shape, for readers that need one declared type per field (the
columnar reader). ``origins`` and ``labels`` may also be a single string, and
``include_communities`` may be absent but not null: :func:`parse_request` is the full rule."""


def effective_search_limit(given: int | None) -> int:
    """The passage and community limit a request asks for: the default when unset, at most the ceiling."""
    return min(DEFAULT_SEARCH_LIMIT if given is None else given, MAX_SEARCH_LIMIT)


def build_request(
    *,
    origins: tuple[str, ...],
    labels: tuple[str, ...],
    text_fallback_query: str | None,
    search_limit: int | None,
    include_communities: bool,
    budget: dict[str, int],
    rerank: bool,
    rerank_model: str | None,
) -> Request:
    """A :class:`Request` from checked field values: the defaults and the search-limit ceiling."""
    return Request(
        origins=origins,
        labels=labels,
        text_fallback_query=text_fallback_query,
        search_limit=effective_search_limit(search_limit),
        include_communities=include_communities,
        budget=budget,
        rerank_requested=rerank,
        rerank_model=rerank_model,
    )


def parse_request(request: Any, path: str = "request") -> Request:
    """Validate a request body the way the server's deserializer does; unknown keys are ignored."""
    if not isinstance(request, dict):
        raise ShapeError(path, "must be an object")
    check_duplicates(request, (field.name for field in REQUEST_FIELDS), path)
    if request.get("origins") is None:
        raise ShapeError(f"{path}.origins", "is required (a string or an array of strings)")
    origins = _cue_list(request["origins"], f"{path}.origins")
    labels_value = request.get("labels")
    labels = () if labels_value is None else _cue_list(labels_value, f"{path}.labels")
    for key in ("dice_floor", "semantic_floor", "activate_decay"):
        if request.get(key) is not None:
            check_number(request[key], f"{path}.{key}")
    for key in ("resolve_limit", "activate_limit"):
        _optional_uint(request, key, path)
    fallback = request.get("text_fallback_query")
    if fallback is not None:
        check_string(fallback, f"{path}.text_fallback_query")
    search_limit = _optional_uint(request, "search_limit", path)
    include = request.get("include_communities", False)
    if not isinstance(include, bool):
        raise ShapeError(f"{path}.include_communities", "must be a boolean (null is not allowed)")
    budget: dict[str, int] = {}
    budget_value = request.get("budget")
    if budget_value is not None:
        if not isinstance(budget_value, dict):
            raise ShapeError(f"{path}.budget", "must be an object")
        check_duplicates(budget_value, vars(DEFAULT_LIMITS), f"{path}.budget")
        for key in ("max_items", "max_bytes", "max_tokens"):
            value = _optional_uint(budget_value, key, f"{path}.budget")
            if value is not None:
                budget[key] = value
    rerank_value = request.get("rerank")
    rerank_model = None
    if rerank_value is not None:
        if not isinstance(rerank_value, dict):
            raise ShapeError(f"{path}.rerank", "must be an object")
        check_duplicates(rerank_value, ("model",), f"{path}.rerank")
        if rerank_value.get("model") is not None:
            rerank_model = check_string(rerank_value["model"], f"{path}.rerank.model")
    _check_length(origins, f"{path}.origins")
    _check_length(labels, f"{path}.labels")
    return build_request(
        origins=origins,
        labels=labels,
        text_fallback_query=fallback,
        search_limit=search_limit,
        include_communities=include,
        budget=budget,
        rerank=rerank_value is not None,
        rerank_model=rerank_model,
    )


def check_overrides(overrides: Mapping[str, object] | None) -> dict[str, int]:
    """Budget overrides as the API takes them: a mapping of ``max_items``/``max_bytes``/``max_tokens``
    to integers from 0 to 2**64 - 1 (the rule the request's own budget fields follow: u64).

    Whatever the mapping or its values are (a subclass whose methods raise, an integer too long
    to print), a bad override is a :class:`UsageError` naming it, never another exception.

    >>> check_overrides({"max_items": 5})
    {'max_items': 5}
    >>> check_overrides({"max_itemz": 5})
    Traceback (most recent call last):
    ...
    assembler.errors.UsageError: unknown budget override 'max_itemz' (known: max_items, max_bytes, max_tokens)
    >>> check_overrides({"max_tokens": 10**5000})  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    assembler.errors.UsageError: budget override max_tokens must be an integer from 0 to ...5,000 digits
    """
    if overrides is None:
        return {}
    if not isinstance(overrides, Mapping):
        raise UsageError(f"overrides must be a mapping of budget names to integers, got {type(overrides).__name__}")
    try:
        items = list(overrides.items())
    except Exception as exc:  # a mapping whose own methods raise: the caller's argument, not ours
        raise UsageError(f"overrides cannot be read: its items() raised {type(exc).__name__}") from None
    checked: dict[str, int] = {}
    known = ", ".join(LIMIT_CEILINGS)
    for key, value in items:
        name = str.__str__(key) if isinstance(key, str) else None  # a str subclass's characters
        if name is None:
            raise UsageError(f"a budget override is named by a string, got {type(key).__name__} (known: {known})")
        if name not in LIMIT_CEILINGS:
            raise UsageError(f"unknown budget override '{shown(name)}' (known: {known})")
        if isinstance(value, bool) or not isinstance(value, int):
            raise UsageError(f"budget override {name} must be a non-negative integer, got {describe(value)}")
        number = int.__int__(value)  # an int subclass is taken as its number, whatever it overrides
        if number < 0:
            raise UsageError(f"budget override {name} must be a non-negative integer, got {int_text(number)}")
        if number > U64_MAX:
            raise UsageError(f"budget override {name} must be an integer from 0 to {U64_MAX}, got {int_text(number)}")
        checked[name] = number
    return checked


def _asked(budget: Mapping[str, int], overrides: Mapping[str, int] | None) -> dict[str, int]:
    """Every budget field's value before the ceilings: the request's, replaced by ``overrides``, else the default."""
    merged = {**budget, **(overrides or {})}
    return {key: merged.get(key, default) for key, default in vars(DEFAULT_LIMITS).items()}


def resolve_limits(budget: dict[str, int], overrides: dict[str, int] | None = None) -> Limits:
    """Defaults, then overrides, then ceilings: ``min(value or default, ceiling)`` per field.

    ``overrides`` (the ``--max-*`` flags) replace the request's own values before the ceilings
    apply, so an override past a ceiling is clamped just like a request value would be.
    """
    resolved: dict[str, int] = {}
    for key, value in _asked(budget, overrides).items():
        ceiling = LIMIT_CEILINGS[key]
        resolved[key] = value if ceiling is None else min(value, ceiling)
    return Limits(**resolved)


def clamped_fields(budget: Mapping[str, int], overrides: Mapping[str, int] | None = None) -> list[str]:
    """The budget fields :func:`resolve_limits` clamps: asked (by the request or an override) above
    the contract's ceiling.

    >>> clamped_fields({"max_items": 5000, "max_bytes": 10}, {"max_bytes": 10**9})
    ['max_items', 'max_bytes']
    """
    asked = _asked(budget, overrides)
    return [key for key, ceiling in LIMIT_CEILINGS.items() if ceiling is not None and asked[key] > ceiling]


def ignored_budget_keys(request: Any) -> list[str]:
    """The keys of a request's ``budget`` object that are no budget field: :func:`parse_request`
    ignores them, as the server ignores unknown fields (a typo such as ``max_item`` is no budget).

    >>> ignored_budget_keys({"origins": [], "budget": {"max_item": 1, "max_bytes": 10}})
    ['max_item']
    """
    budget = request.get("budget") if isinstance(request, dict) else None
    if not isinstance(budget, dict):
        return []
    return [key for key in budget if key not in LIMIT_CEILINGS]
