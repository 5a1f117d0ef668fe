"""JSON text in: the one guarded reader every input of every command goes through.

:func:`parse_json` reads a document as the server's serde_json would: no NaN or infinities, no
number past an f64 or integer longer than Python converts, no nesting deeper than
:data:`~assembler.contract.wire.MAX_DEPTH`; repeated keys are remembered (a lane dump, the
contract's own format, refuses only a repeated *known* field, as serde does). :func:`read_json` is
the strict form for every other input (eval files, retrieval inputs, policy configs, thresholds,
artifacts): it also refuses any repeated key and any lone surrogate escape, anywhere, and names
the field of every refusal, so that what one command accepts the others read, and every refusal
is one ``field: rule`` (:class:`~assembler.contract.wire.ShapeError`), never a ``RecursionError``
or a ``ValueError`` of the interpreter.
"""

from __future__ import annotations

import json
import math
import re
import sys
from collections.abc import Callable, Iterable
from itertools import accumulate
from typing import Any

from assembler.contract.wire import (
    DUPLICATE_FIELD_RULE,
    LONE_SURROGATE_RULE,
    MAX_DEPTH,
    OUT_OF_RANGE_RULE,
    TOO_DEEP_RULE,
    DuplicateKeys,
    ShapeError,
    join_path,
    key_path,
    long_integer_rule,
    non_finite_rule,
    object_pairs,
)

__all__ = [
    "LONE_SURROGATE_KEY_RULE",
    "NumberRefused",
    "check_strict",
    "first_bad",
    "locate_refused_number",
    "nesting_depth",
    "parse_json",
    "read_json",
    "syntax_rule",
    "too_deep",
]

LONE_SURROGATE_KEY_RULE = "the key is not valid Unicode (lone surrogate escape)"


class NumberRefused(ValueError):
    """A number JSON text may spell but the contract refuses: NaN, an infinity, one past f64, or an
    integer longer than Python converts. The message is the rule."""


def _refuse_constant(name: str) -> Any:
    raise NumberRefused(f"{name} is not a JSON number")


def _parse_float(text: str) -> float:
    value = float(text)
    if math.isinf(value):
        raise NumberRefused("number out of range")
    return value


_KEEP = b'"[]{}'
_DELETE = bytes(sorted(set(range(256)) - set(_KEEP)))
_SQUARE = bytes.maketrans(b"{}", b"[]")
_STEP = {ord("["): 1, ord("]"): -1}


def nesting_depth(text: str) -> int:
    """The deepest nesting of arrays and objects in JSON text (brackets inside strings ignored;
    valid or not: an unclosed bracket counts as open to the end).

    Bytes operations in C only: escaped backslashes and quotes go, then everything but brackets
    and quotes; what remains inside quotes goes; the innermost ``[]`` pairs are removed round
    after round (one round per level). Text that does not balance is measured bracket by bracket.

    >>> nesting_depth('{"a":[[1],"]]]\\"["]}'), nesting_depth('[' * 200), nesting_depth('[[]')
    (3, 200, 2)
    """
    data = text.encode("utf-8", "surrogatepass")
    if b"\\" in data:  # escaped backslashes first, then escaped quotes: neither delimits a string
        data = data.replace(b"\\\\", b"").replace(b'\\"', b"")
    data = data.translate(_SQUARE, _DELETE).replace(b'""', b"")  # strings holding no bracket vanish
    if b'"' in data:
        data = b"".join(data.split(b'"')[::2])  # what lies outside strings
    rest = data
    for depth in range(MAX_DEPTH + 2):
        if not rest:
            return depth
        shorter = rest.replace(b"[]", b"")
        if len(shorter) == len(rest):
            break  # brackets that do not balance
        rest = shorter
    return max(accumulate(map(_STEP.__getitem__, data), initial=0))


def too_deep(text: str) -> bool:
    """Whether JSON text nests deeper than :data:`~assembler.contract.wire.MAX_DEPTH`.

    Text with at most that many opening brackets in all cannot be (two counts answer it); only
    other text is scanned (:func:`nesting_depth`).
    """
    return text.count("[") + text.count("{") > MAX_DEPTH and nesting_depth(text) > MAX_DEPTH


def parse_json(text: str) -> Any:
    """Parse one JSON document as serde_json would: no NaN/Infinity, no out-of-range numbers, no
    nesting deeper than :data:`~assembler.contract.wire.MAX_DEPTH`.

    Syntax errors raise ``json.JSONDecodeError``, refused numbers :class:`NumberRefused`, too deep
    a nesting :class:`~assembler.contract.wire.ShapeError` (all ``ValueError``). Repeated keys are
    remembered so that validation can refuse a repeated known field.
    """
    if too_deep(text):
        raise ShapeError("", TOO_DEEP_RULE)
    try:
        return json.loads(
            text, parse_constant=_refuse_constant, parse_float=_parse_float, object_pairs_hook=object_pairs
        )
    except (json.JSONDecodeError, NumberRefused):
        raise
    except RecursionError:  # the interpreter's own limit, reached under a deep call stack
        raise ShapeError("", TOO_DEEP_RULE) from None
    except ValueError:  # int() refused an integer literal: too many digits
        raise NumberRefused(long_integer_rule(sys.get_int_max_str_digits())) from None


def syntax_rule(exc: json.JSONDecodeError, text: str) -> str:
    """The rule of a syntax error, a whole sentence: ``invalid JSON at column C: what`` (``at line
    L column C`` when the document spans lines). ``what`` is the parser's message, completed where
    it breaks off (``Unterminated string starting at``), and saying so when the text ends before
    its object or array closes: a line cut short.

    >>> syntax_rule(json.JSONDecodeError("Expecting ',' delimiter", '{"a": 1', 7), '{"a": 1')
    "invalid JSON at column 8: Expecting ',' delimiter; the line ends before the object is closed (cut short?)"
    >>> syntax_rule(json.JSONDecodeError("Unterminated string starting at", '"b', 0), '"b')
    'invalid JSON at column 1: Unterminated string starting there: the line ends before its closing quote (cut short?)'
    """
    several = "\n" in text.rstrip("\r\n")
    where = f"line {exc.lineno} column {exc.colno}" if several else f"column {exc.colno}"
    return f"invalid JSON at {where}: {_syntax_what(exc, text, 'text' if several else 'line')}"


def _syntax_what(exc: json.JSONDecodeError, text: str, unit: str) -> str:
    """``exc.msg`` as a whole sentence (the position is said before it)."""
    if exc.msg.startswith("Unterminated string"):  # the text ended inside the string
        return f"Unterminated string starting there: the {unit} ends before its closing quote (cut short?)"
    if exc.msg.startswith("Invalid control character"):
        return "Invalid control character in a string (JSON writes it escaped, as \\n or \\u001b)"
    if exc.msg == "Extra data":
        return f"Extra data after the JSON value (one JSON value per {unit})"
    body = text.strip()
    if not body:
        return f"{exc.msg}: the text is empty"
    kind = {"{": ("object", "}"), "[": ("array", "]")}.get(body[0])
    if kind is not None and (not body.endswith(kind[1]) or not text[exc.pos :].strip()):  # ends open, or at the error
        return f"{exc.msg}; the {unit} ends before the {kind[0]} is closed (cut short?)"
    return exc.msg


# A ``\u`` escape of a surrogate: the only way a lone surrogate gets into text decoded from UTF-8.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
_SURROGATE = re.compile("[\ud800-\udfff]")


def read_json(text: str) -> Any:
    """:func:`parse_json` for every input that is not a lane dump, strictly: a repeated key and a
    lone surrogate escape (in a key or a string) are refused wherever they stand.

    Every refusal is a :class:`~assembler.contract.wire.ShapeError` whose ``path`` names the field
    (``""`` for the document itself) and whose ``rule`` says what is wrong: syntax (with its
    column), nesting, a refused number, a repeated key, a lone surrogate.

    >>> read_json('{"a": [1, {"b": 2, "b": 3}]}')
    Traceback (most recent call last):
    ...
    assembler.contract.wire.ShapeError: a[1].b: duplicate field
    >>> read_json('{"n": 1e999}')
    Traceback (most recent call last):
    ...
    assembler.contract.wire.ShapeError: n: number out of range (beyond what an f64 holds)
    """
    try:
        value = parse_json(text)
    except json.JSONDecodeError as exc:
        raise ShapeError("", syntax_rule(exc, text)) from None
    except NumberRefused:
        field, rule, _ = locate_refused_number(text)
        raise ShapeError(field, rule) from None
    if ("{" in text and _has_repeated_keys(value)) or _SURROGATE_ESCAPE.search(text):
        check_strict(value)
    return value


def check_strict(value: Any) -> None:
    """Refuse a repeated key or a lone surrogate (in a key or a string) anywhere in a value
    :func:`parse_json` returned: the rules :func:`read_json` adds, for a reader that parsed the
    text itself (``ShapeError`` naming the first such field, in document order).

    >>> check_strict(parse_json('[{"k": "\\ud800"}]'))
    Traceback (most recent call last):
    ...
    assembler.contract.wire.ShapeError: [0].k: is not valid Unicode (lone surrogate escape)
    """
    found = _strict_problem(value, "")
    if found is not None:
        raise ShapeError(*found)


def _has_repeated_keys(value: Any) -> bool:
    """Whether any object of a parsed document repeated a key (bounded by MAX_DEPTH)."""
    if isinstance(value, dict):
        return isinstance(value, DuplicateKeys) or any(_has_repeated_keys(item) for item in value.values())
    if isinstance(value, list):
        return any(_has_repeated_keys(item) for item in value)
    return False


def _strict_problem(value: Any, path: str) -> tuple[str, str] | None:
    """``(field, rule)`` of the first repeated key or lone surrogate, in document order."""
    if isinstance(value, str):
        return (path, LONE_SURROGATE_RULE) if _SURROGATE.search(value) else None
    if isinstance(value, dict):
        repeated = set(value.duplicates) if isinstance(value, DuplicateKeys) else set()
        for key, item in value.items():
            if _SURROGATE.search(key):
                return key_path(path, key), LONE_SURROGATE_KEY_RULE
            if key in repeated:
                return key_path(path, key), DUPLICATE_FIELD_RULE
            found = _strict_problem(item, key_path(path, key))
            if found is not None:
                return found
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found = _strict_problem(item, join_path(path, f"[{index}]"))
            if found is not None:
                return found
    return None


# --- where a refused number stands ----------------------------------------------------------------


class _Refused:
    """Stands for a refused number in the second parse, with the rule it broke."""

    __slots__ = ("rule",)

    def __init__(self, rule: str) -> None:
        self.rule = rule


class _Pairs(list[tuple[str, Any]]):
    """An object of the second parse, every key kept (a refused number may sit under a repeated key)."""


def locate_refused_number(text: str, id_key: str | None = None) -> tuple[str, str, str | None]:
    """``(field, rule, id)`` of the first refused number of a document :func:`parse_json` refused
    for a number: parsed again with hooks that mark refused numbers instead of failing. ``id`` is
    the top-level object's string value under ``id_key`` (to name the record), if any.

    >>> locate_refused_number('{"id": "r1", "a": [0, NaN]}', "id")
    ('a[1]', 'must be a finite number (NaN is not a JSON number)', 'r1')
    """
    limit = sys.get_int_max_str_digits()

    def integer(digits: str) -> Any:
        if limit and len(digits) - digits.startswith("-") > limit:
            return _Refused(long_integer_rule(limit))
        return int(digits)

    def decimal_number(digits: str) -> Any:
        value = float(digits)
        return _Refused(OUT_OF_RANGE_RULE) if math.isinf(value) else value

    try:
        value = json.loads(
            text,
            parse_constant=lambda constant: _Refused(non_finite_rule(constant)),
            parse_float=decimal_number,
            parse_int=integer,
            object_pairs_hook=_Pairs,
        )
    except (ValueError, RecursionError):  # also broken elsewhere: the number problem without a field
        value = None
    found = first_bad(value, "", _refused_rule)
    ids = [item for key, item in value if key == id_key] if id_key is not None and isinstance(value, _Pairs) else []
    record_id = ids[-1] if ids and isinstance(ids[-1], str) else None
    field, rule = found if found is not None else ("", "a number cannot be read")
    return field, rule, record_id


def first_bad(value: Any, path: str, rule_of: Callable[[Any], str | None]) -> tuple[str, str] | None:
    """``(field, rule)`` of the first value (in document order) that ``rule_of`` refuses, walking
    objects (dicts, or the second parse's key/value pairs) and arrays; depth is bounded by the
    callers (:data:`MAX_DEPTH` for JSON, the schema for Parquet)."""
    rule = rule_of(value)
    if rule is not None:
        return path, rule
    if isinstance(value, _Pairs):
        items: Iterable[tuple[str, Any]] = ((key_path(path, key), item) for key, item in value)
    elif isinstance(value, dict):
        items = ((key_path(path, key), item) for key, item in value.items())
    elif isinstance(value, list):
        items = ((join_path(path, f"[{index}]"), item) for index, item in enumerate(value))
    else:
        return None
    for item_path, item in items:
        found = first_bad(item, item_path, rule_of)
        if found is not None:
            return found
    return None


def _refused_rule(value: Any) -> str | None:
    return value.rule if isinstance(value, _Refused) else None
