"""The contract's wire shapes, declared once: validation of input and emission in wire order.

Each shape is a tuple of :class:`Field` in declaration (= serialization) order (contract section
1.3). :func:`validate` checks a parsed JSON value against a shape the way the server's
deserializer would (unknown keys ignored, ``Option`` fields may be absent or null, integers must be
non-negative whole numbers in range, f32 fields are rounded from f64) and returns a clean dict that
holds only known fields. :func:`emit` writes a clean dict back as compact wire text.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Literal

from assembler.contract.jsontext import escape_string, format_f32, format_f64, to_f32
from assembler.errors import shown

__all__ = [
    "ACTIVATION",
    "ASSOCIATION",
    "CITATION",
    "CITATION_ENTRY",
    "COMMUNITY_HIT",
    "DUPLICATE_FIELD_RULE",
    "LONE_SURROGATE_RULE",
    "MAX_DEPTH",
    "OUT_OF_RANGE_RULE",
    "PASSAGE_HIT",
    "TOO_DEEP_RULE",
    "Field",
    "ListOf",
    "Shape",
    "ShapeError",
    "describe",
    "emit",
    "int_text",
    "key_path",
    "long_integer_rule",
    "non_finite_rule",
    "validate",
]

Scalar = Literal["str", "bool", "f64", "f32", "u32", "u64"]
Emit = Literal["always", "if_present", "if_nonempty", "if_true"]


@dataclass(frozen=True)
class ListOf:
    """A JSON array whose elements have one kind."""

    item: Kind


@dataclass(frozen=True)
class Field:
    """One field of a wire shape.

    ``required``: the key must be present and non-null on input. ``nullable``: ``null`` is a valid
    input value (Rust ``Option``). ``emit``: when the key is written on output.
    """

    name: str
    kind: Kind
    required: bool = True
    nullable: bool = False
    emit: Emit = "always"


Shape = tuple[Field, ...]
Kind = Scalar | ListOf | Shape

_U32_MAX = 2**32 - 1
_U64_MAX = 2**64 - 1
_SURROGATE = re.compile("[\ud800-\udfff]")

MAX_DEPTH = 128
"""The server's JSON nesting limit (serde_json's recursion limit): deeper documents are refused."""
TOO_DEEP_RULE = f"nesting deeper than {MAX_DEPTH} levels"
OUT_OF_RANGE_RULE = "number out of range (beyond what an f64 holds)"
DUPLICATE_FIELD_RULE = "duplicate field"
"""serde's rule for a key an object holds twice."""
LONE_SURROGATE_RULE = "is not valid Unicode (lone surrogate escape)"
"""A string holding a lone surrogate (a ``\\ud800`` escape): Rust strings cannot hold one."""


def non_finite_rule(value: float | str) -> str:
    """The rule for NaN or an infinity (a float, or the JSON token that spelled it): one wording
    for JSON Lines and Parquet.

    >>> non_finite_rule("NaN"), non_finite_rule(float("-inf"))
    ('must be a finite number (NaN is not a JSON number)', 'must be a finite number (-Infinity is not a JSON number)')
    """
    if isinstance(value, float):
        value = "NaN" if value != value else ("Infinity" if value > 0 else "-Infinity")
    return f"must be a finite number ({value} is not a JSON number)"


def long_integer_rule(limit: int) -> str:
    """The rule for an integer literal longer than Python converts (``sys.get_int_max_str_digits``)."""
    return f"integer with more than {limit} digits"


def key_path(path: str, key: str) -> str:
    """``path.key`` for a key that came from the input: escaped and shortened (:func:`shown`)."""
    key = shown(key)
    return f"{path}.{key}" if path else key


class ShapeError(ValueError):
    """A value does not have the declared shape; ``path`` names the field, ``rule`` the problem."""

    def __init__(self, path: str, rule: str) -> None:
        super().__init__(f"{path}: {rule}" if path else rule)
        self.path = path
        self.rule = rule


LOCATOR: Shape = (Field("kind", "str"), Field("value", "str"))
ATTRIBUTION: Shape = (
    Field("source", "str"),
    Field("weight", "f64"),
    Field("count", "u64"),
    Field("paragraph", "u32", required=False, nullable=True),
    Field("section", "str", required=False, nullable=True),
    Field("locator", LOCATOR, required=False, nullable=True),
)
ASSOCIATION: Shape = (
    Field("subject", "str"),
    Field("label", "str"),
    Field("object", "str"),
    Field("weight", "f64"),
    Field("count", "u64"),
    Field("attributions", ListOf(ATTRIBUTION)),
)
ACTIVATION: Shape = (
    Field("strength", "f64"),
    Field("path", ListOf("str")),
    Field("association", ASSOCIATION),
)
LANE_EVIDENCE: Shape = (Field("rank", "u64"), Field("score", "f32"))
PASSAGE_LANES: Shape = (
    Field("bm25", LANE_EVIDENCE, required=False, nullable=True, emit="if_present"),
    Field("vector", LANE_EVIDENCE, required=False, nullable=True, emit="if_present"),
)
PASSAGE_HIT: Shape = (
    Field("source", "str"),
    Field("paragraph", "u32"),
    Field("score", "f32"),
    Field("text", "str"),
    Field("lanes", PASSAGE_LANES),
)
COMMUNITY_MEMBER: Shape = (Field("name", "str"), Field("strength", "f64"))
COMMUNITY_HIT: Shape = (
    Field("community", "str"),
    Field("score", "f32"),
    Field("text", "str"),
    Field("paragraph", "u32"),
    Field("level", "u64", required=False, nullable=True, emit="if_present"),
    Field("parent", "str", required=False, nullable=True, emit="if_present"),
    Field("concept_count", "u64", required=False, nullable=True, emit="if_present"),
    Field("members", ListOf(COMMUNITY_MEMBER), required=False, nullable=True, emit="if_nonempty"),
    Field("members_truncated", "bool", required=False, nullable=True, emit="if_true"),
)
CITATION: Shape = (
    Field("text", "str"),
    Field("source", "str"),
    Field("section", "str", required=False, nullable=True),
    Field("locator", LOCATOR, required=False, nullable=True),
)
CITATION_ENTRY: Shape = (
    Field("source", "str"),
    Field("paragraph", "u32"),
    Field("citation", CITATION),
)

_JSON_TYPE = {dict: "an object", list: "an array", str: "a string", bool: "a boolean"}


def describe(value: Any) -> str:
    """A value as a refusal names it: ``null``, ``the integer 5``, ``the number 2.7``, ``an array``..."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return f"the integer {int_text(value)}"
    if isinstance(value, float):
        return f"the number {float.__repr__(value)}"  # a float subclass's own repr is not called
    return _JSON_TYPE.get(type(value), type(value).__name__)


class DuplicateKeys(dict[str, Any]):
    """A JSON object that repeated a key (the last value kept, as ``json`` does)."""

    duplicates: tuple[str, ...] = ()


def object_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """``json.loads`` hook that remembers repeated keys, for :func:`check_duplicates`."""
    value = dict(pairs)
    if len(value) == len(pairs):
        return value
    seen: set[str] = set()
    repeated: list[str] = []
    for key, _ in pairs:
        if key in seen:
            repeated.append(key)
        seen.add(key)
    marked = DuplicateKeys(value)
    marked.duplicates = tuple(repeated)
    return marked


def int_text(value: int) -> str:
    """An integer as a message shows it: its digits, or how many there are when that is many
    (an in-memory integer may be longer than ``str`` converts: its size is then estimated).

    >>> int_text(-5), int_text(10**50), int_text(10**5000)
    ('-5', '10000000000000000000…(51 digits)', 'an integer of about 5,000 digits')
    """
    value = int.__int__(value)  # the number itself, whatever an int subclass overrides
    if value.bit_length() > 4000 * 3:  # past ~3,600 digits: str() may refuse (sys.get_int_max_str_digits)
        return f"an integer of about {round(value.bit_length() * 0.30103, -2):,.0f} digits"
    text = str(value)
    return text if len(text) <= 40 else f"{text[:20]}…({len(text)} digits)"


def check_duplicates(value: dict[str, Any], known: Iterable[str], path: str) -> None:
    """Serde refuses a repeated *known* field (a repeated unknown key is ignored like any other)."""
    if isinstance(value, DuplicateKeys):
        names = set(known)
        for key in value.duplicates:
            if key in names:
                raise ShapeError(key_path(path, key), DUPLICATE_FIELD_RULE)


def check_string(value: Any, path: str) -> str:
    """A valid Unicode string (no lone surrogates: Rust strings cannot hold them)."""
    if not isinstance(value, str):
        raise ShapeError(path, f"must be a string, got {describe(value)}")
    if _SURROGATE.search(value):
        raise ShapeError(path, LONE_SURROGATE_RULE)
    return value


def check_uint(value: Any, path: str, maximum: int = _U64_MAX) -> int:
    """A non-negative whole JSON integer no larger than ``maximum``."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ShapeError(path, f"must be a non-negative integer, got {describe(value)}")
    if value < 0 or value > maximum:
        raise ShapeError(path, f"must be an integer from 0 to {maximum}, got {int_text(value)}")
    return value


def _finite_or_refuse(value: float) -> None:
    """Refuse what JSON cannot spell (a Parquet or in-memory value): NaN, an infinity, an integer past f64.

    ``value - value`` is 0 for every finite number and NaN (truthy) for NaN and the infinities.
    """
    if type(value) is int:
        if value.bit_length() > 1000:
            try:
                float(value)
            except OverflowError:
                raise ShapeError("", OUT_OF_RANGE_RULE) from None
    elif value - value:
        raise ShapeError("", non_finite_rule(value))


def check_number(value: Any, path: str) -> float:
    """A finite JSON number (integer or decimal), as f64; NaN and the infinities are refused,
    from Parquet as JSON refuses them."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ShapeError(path, f"must be a number, got {describe(value)}")
    try:
        _finite_or_refuse(value)
    except ShapeError as exc:
        raise ShapeError(path, exc.rule) from None
    return float(value)


def _validate_kind(kind: Kind, value: Any, path: str) -> Any:
    if isinstance(kind, ListOf):
        if not isinstance(value, list):
            raise ShapeError(path, f"must be an array, got {describe(value)}")
        return [_validate_kind(kind.item, item, f"{path}[{i}]") for i, item in enumerate(value)]
    if isinstance(kind, tuple):
        return validate(kind, value, path)
    if kind == "str":
        return check_string(value, path)
    if kind == "bool":
        if not isinstance(value, bool):
            raise ShapeError(path, f"must be a boolean, got {describe(value)}")
        return value
    if kind == "f64":
        return check_number(value, path)
    if kind == "f32":
        return to_f32(check_number(value, path))
    if kind == "u32":
        return check_uint(value, path, _U32_MAX)
    return check_uint(value, path)


def validate(shape: Shape, value: Any, path: str) -> dict[str, Any]:
    """Check ``value`` against ``shape``; return a dict of its known fields (absent = missing)."""
    if not isinstance(value, dict):
        raise ShapeError(path, f"must be an object, got {describe(value)}")
    check_duplicates(value, (field.name for field in shape), path)
    clean: dict[str, Any] = {}
    for field in shape:
        field_path = f"{path}.{field.name}" if path else field.name
        if field.name not in value:
            if field.required:
                raise ShapeError(field_path, "is required but missing")
            continue
        item = value[field.name]
        if item is None:
            if field.nullable:
                clean[field.name] = None
                continue
            raise ShapeError(field_path, "must not be null")
        clean[field.name] = _validate_kind(field.kind, item, field_path)
    return clean


def _emit_kind(kind: Kind, value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(kind, ListOf):
        return "[" + ",".join(_emit_kind(kind.item, item) for item in value) + "]"
    if isinstance(kind, tuple):
        return emit(kind, value)
    if kind == "str":
        return escape_string(value)
    if kind == "bool":
        return "true" if value else "false"
    if kind == "f64":
        return format_f64(value)
    if kind == "f32":
        return format_f32(value)
    return str(value)


def emit(shape: Shape, value: dict[str, Any]) -> str:
    """Compact wire text of a clean dict, keys in declaration order, presence rules applied."""
    parts = []
    for field in shape:
        item = value.get(field.name)
        if field.emit == "if_present" and item is None:
            continue
        if field.emit == "if_nonempty" and not item:
            continue
        if field.emit == "if_true" and item is not True:
            continue
        parts.append(f'"{field.name}":{_emit_kind(field.kind, item)}')
    return "{" + ",".join(parts) + "}"


# --- Compiled shapes: validation and emission in one pass -----------------------------------------

Compiled = Callable[[Any], tuple[Any, str]]
"""Validate a parsed JSON value and write its wire text in one traversal: ``(clean, text)``.

Raises :class:`ShapeError` with a path *relative* to the value (``""`` for the value itself)."""

_encode_string = json.encoder.encode_basestring


def join_path(parent: str, child: str) -> str:
    """``lanes.passages[0]`` + ``score`` -> ``lanes.passages[0].score``; list steps join bare."""
    if not child:
        return parent
    if not parent:
        return child
    return parent + child if child.startswith("[") else f"{parent}.{child}"


def _compile_scalar(kind: Scalar) -> Compiled:
    if kind == "str":

        def string(value: Any) -> tuple[Any, str]:
            if type(value) is not str:
                raise ShapeError("", f"must be a string, got {describe(value)}")
            if _SURROGATE.search(value):
                raise ShapeError("", LONE_SURROGATE_RULE)
            return value, _encode_string(value)

        return string
    if kind == "bool":

        def boolean(value: Any) -> tuple[Any, str]:
            if type(value) is not bool:
                raise ShapeError("", f"must be a boolean, got {describe(value)}")
            return value, "true" if value else "false"

        return boolean
    if kind in ("f64", "f32"):
        is_f32 = kind == "f32"

        def number(value: Any) -> tuple[Any, str]:
            kind_of = type(value)
            if kind_of is not float and kind_of is not int:
                raise ShapeError("", f"must be a number, got {describe(value)}")
            if value - value or (kind_of is int and value.bit_length() > 1000):  # NaN, infinite, past f64?
                _finite_or_refuse(value)
            if is_f32:
                rounded = to_f32(value)
                return rounded, format_f32(rounded)
            as_float = float(value)
            return as_float, format_f64(as_float)

        return number
    maximum = _U32_MAX if kind == "u32" else _U64_MAX

    def integer(value: Any) -> tuple[Any, str]:
        if type(value) is not int:
            raise ShapeError("", f"must be a non-negative integer, got {describe(value)}")
        if value < 0 or value > maximum:
            raise ShapeError("", f"must be an integer from 0 to {maximum}, got {int_text(value)}")
        return value, str(value)

    return integer


def compile_kind(kind: Kind) -> Compiled:
    """The one-pass validator-emitter of a kind (scalar, list or shape)."""
    if isinstance(kind, ListOf):
        inner = compile_kind(kind.item)

        def array(value: Any) -> tuple[Any, str]:
            if type(value) is not list:
                raise ShapeError("", f"must be an array, got {describe(value)}")
            clean, texts = [], []
            for index, item in enumerate(value):
                try:
                    item_clean, item_text = inner(item)
                except ShapeError as exc:
                    raise ShapeError(join_path(f"[{index}]", exc.path), exc.rule) from None
                clean.append(item_clean)
                texts.append(item_text)
            return clean, "[" + ",".join(texts) + "]"

        return array
    if isinstance(kind, tuple):
        return _compile_shape(kind)
    return _compile_scalar(kind)


def _compile_shape(shape: Shape) -> Compiled:
    fields = [(f.name, f'"{f.name}":', compile_kind(f.kind), f.required, f.nullable, f.emit) for f in shape]
    names = tuple(f.name for f in shape)

    def obj(value: Any) -> tuple[Any, str]:
        if not isinstance(value, dict):
            raise ShapeError("", f"must be an object, got {describe(value)}")
        if type(value) is DuplicateKeys:
            check_duplicates(value, names, "")
        clean: dict[str, Any] = {}
        parts: list[str] = []
        for name, key, sub, required, nullable, mode in fields:
            item = value.get(name)
            if item is None:
                if name not in value:
                    if required:
                        raise ShapeError(name, "is required but missing")
                elif not nullable:
                    raise ShapeError(name, "must not be null")
                else:
                    clean[name] = None
                if mode == "always":
                    parts.append(key + "null")
                continue
            try:
                item_clean, item_text = sub(item)
            except ShapeError as exc:
                raise ShapeError(join_path(name, exc.path), exc.rule) from None
            clean[name] = item_clean
            if (mode == "if_nonempty" and not item_clean) or (mode == "if_true" and item_clean is not True):
                continue
            parts.append(key + item_text)
        return clean, "{" + ",".join(parts) + "}"

    return obj
