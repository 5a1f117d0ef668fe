"""Every error the library raises on purpose, in one tree, each with the command's exit status.

``AssemblerError`` (exit status 2)
  ``UsageError``: how the tool was called (a missing file, an option out of range, a bad combination).
  ``InputError``: a malformed input record; carries a :class:`RecordError` naming where and why.

A :class:`RecordError` is the description of one broken rule of one record (file, line, record
id, field, rule): the value the errors file of ``on_error="skip"`` holds, and what an
``InputError`` says. Messages never carry candidate text or any other payload value beyond the
record's id, so they are safe to log; library messages name API arguments, never command-line
flags (the command line words its own).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import ClassVar

__all__ = [
    "AssemblerError",
    "InputError",
    "OutputError",
    "RecordError",
    "UsageError",
    "counted",
    "install_hint",
    "one_line",
    "shown",
    "shown_path",
    "unexpected_rule",
]


def _extra_requirements(extra: str, seen: frozenset[str] = frozenset()) -> list[str]:
    """The packages an extra of the installed ``assembler`` asks for, extras within it expanded."""
    from importlib import metadata

    try:
        requires = metadata.requires("assembler") or []
    except metadata.PackageNotFoundError:
        return []
    found: list[str] = []
    for line in requires:
        requirement, _, marker = line.partition(";")
        if marker.replace("'", '"').split() != ["extra", "==", f'"{extra}"']:
            continue
        requirement = requirement.strip()
        nested = re.fullmatch(r"assembler\[([^\]]+)\]", requirement)
        if nested is None:
            found.append(requirement)
            continue
        for inner in nested.group(1).split(","):
            if inner.strip() not in seen:
                found += _extra_requirements(inner.strip(), seen | {extra})
    return found


def install_hint(extra: str) -> str:
    """How to install an optional extra, as a message says it: from a checkout by the extra's name,
    anywhere else by the packages it holds (``pip install 'assembler[x]'`` works only where the
    package comes from an index, which a checkout or a wheel file is not).

    >>> install_hint("plot").startswith("install the 'plot' extra: python -m pip install -e '.[plot]'")
    True
    """
    packages = " ".join(f"'{requirement}'" for requirement in _extra_requirements(extra))
    anywhere = f", or python -m pip install {packages}" if packages else ""
    return f"install the '{extra}' extra: python -m pip install -e '.[{extra}]' in a checkout{anywhere}"


SHOWN_LIMIT = 80
"""How many characters of an input key or id a message echoes before ``…(N more)``."""

PATH_LIMIT = 200
"""How many characters of a file name a message shows before ``…(N more)``: a real path is
rarely longer, and the rest of the message (the reason) must still fit on the line."""

MESSAGE_LIMIT = 1000
"""The longest line the command prints for one message (its prefix aside), whatever the message:
the last bound, for a caller that forgot to shorten what it echoes."""

# C0/C1 controls, DEL, lone surrogates, and the invisible format characters that reorder or hide
# text on a terminal (zero-width, bidirectional overrides and isolates, line/paragraph separators).
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff\ud800-\udfff]")


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def shown(text: str, limit: int | None = SHOWN_LIMIT) -> str:
    """Input text made safe to echo in a message: control, invisible and unencodable characters
    escaped (``\\x1b``, ``\\ud800``), and at most ``limit`` characters of it, then ``…(N more)``.

    A message may name an input key or a record id; the input must neither drive the terminal
    (an escape sequence) nor make one stderr line as long as a huge key.

    >>> shown("\\x1b[2Jlane"), shown("k" * 100)[-15:]
    ('\\\\x1b[2Jlane', 'kkkkk…(20 more)')
    """
    rest = 0
    if limit is not None and len(text) > limit:
        text, rest = text[:limit], len(text) - limit
    text = _UNSAFE.sub(_escape, text)
    return f"{text}…({rest} more)" if rest else text


def shown_path(path: str | bytes | os.PathLike[str], limit: int | None = PATH_LIMIT) -> str:
    """A file name as messages show it: every byte that is not UTF-8 as ``\\xNN`` (a POSIX name is
    any bytes; :func:`os.fsdecode` holds such a byte as a surrogate), control and invisible
    characters escaped as :func:`shown` does (a name holding a newline or an escape sequence must
    neither forge a second line nor drive the terminal), and at most ``limit`` characters.

    >>> shown_path(os.fsdecode(b"bad\\xff.jsonl")), shown_path("a\\nassembler: error: b\\x1b[2J")
    ('bad\\\\xff.jsonl', 'a\\\\x0aassembler: error: b\\\\x1b[2J')
    """
    raw = os.fspath(path)
    if isinstance(raw, bytes):
        text = raw.decode("utf-8", "backslashreplace")
    else:
        try:
            text = os.fsencode(raw).decode("utf-8", "backslashreplace")
        except UnicodeEncodeError:  # a surrogate that is no undecodable byte: shown() escapes it
            text = raw
    return shown(text, limit)


def one_line(message: str, limit: int = MESSAGE_LIMIT) -> str:
    """``message`` as one bounded line, whatever its caller did: every control character (a newline
    included), invisible character and lone surrogate escaped, then at most ``limit`` characters.

    The last line of defence of everything the command prints on stderr; the callers still escape
    and shorten what they echo (:func:`shown`, :func:`shown_path`), so that a long id does not push
    the reason of the message past the limit.

    >>> one_line("bad id\\nassembler: error: forged"), one_line("x" * 30, limit=10)
    ('bad id\\\\x0aassembler: error: forged', 'xxxxxxxxxx…(20 more)')
    """
    text = _UNSAFE.sub(_escape, message)
    if len(text) > limit:
        return f"{text[:limit]}…({len(text) - limit} more)"
    return text


def encodable(text: str) -> str:
    """``text`` with every lone surrogate written as ``\\udXXX``: always valid UTF-8 (and JSON) text."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text


class AssemblerError(Exception):
    """The base of the library's errors; ``exit_status`` is what the command line returns for it."""

    exit_status: ClassVar[int] = 2


class OutputError(AssemblerError):
    """An output could not be created or written (disk full, permission denied, I/O error): exit 1."""

    exit_status: ClassVar[int] = 1


class WorkerError(AssemblerError):
    """A worker process of the pool ended abruptly (killed, or out of memory): exit 1, nothing written."""

    exit_status: ClassVar[int] = 1


class UsageError(AssemblerError):
    """A problem with how the tool was called (missing file, bad option value or combination)."""


@dataclass(frozen=True)
class RecordError:
    """One broken rule of one input record.

    ``line`` is the 1-based line of a JSON Lines file or the 1-based row of a Parquet file.
    ``field`` is the path inside the record (``lanes.passages[3].score``); ``""`` for the record.
    ``query_id`` is the record's id, shown under :attr:`id_name`. A lone surrogate (possible in
    JSON text, never encodable) is kept as its escape ``\\udXXX`` so that every error can be
    written as UTF-8; the printed form also escapes control characters and shortens a long id or
    field (:func:`shown`).

    >>> str(RecordError("in.jsonl", 7, "q7", "request.budget.max_items", "must be a non-negative integer"))
    "in.jsonl:7: query_id 'q7' field request.budget.max_items: must be a non-negative integer"
    """

    id_name: ClassVar[str] = "query_id"

    file: str
    line: int
    query_id: str | None
    field: str
    rule: str

    def __post_init__(self) -> None:
        for name in ("file", "query_id", "field", "rule"):
            value = getattr(self, name)
            if isinstance(value, str):
                object.__setattr__(self, name, encodable(value))

    def __str__(self) -> str:
        details = []
        if self.query_id is not None:
            details.append(f"{self.id_name} '{shown(self.query_id)}'")
        if self.field:
            details.append(f"field {shown(self.field, limit=None)}")
        where = " ".join([f"{shown(self.file, limit=PATH_LIMIT)}:{self.line}:", *details])
        return f"{where} {self.rule}" if not details else f"{where}: {self.rule}"

    def as_dict(self) -> dict[str, object]:
        """A JSON-ready mapping, as written to the errors file."""
        return {
            "file": self.file,
            "line": self.line,
            self.id_name: self.query_id,
            "field": self.field,
            "rule": self.rule,
        }


def unexpected_rule(exc: BaseException, doing: str) -> str:
    """The last-resort rule of a record whose reading failed in an unforeseen way: it names the
    exception's type only (its message might quote the payload).

    >>> unexpected_rule(KeyError("secret"), "validating")
    'unexpected KeyError while validating the record'
    """
    return f"unexpected {type(exc).__name__} while {doing} the record"


class InputError(AssemblerError):
    """Raised for a malformed input record; carries the structured :class:`RecordError`."""

    def __init__(self, error: RecordError) -> None:
        super().__init__(str(error))
        self.error = error


def counted(count: int, noun: str, plural: str | None = None) -> str:
    """A count and its noun, singular for exactly one (``plural``: when not ``noun`` + ``s``).

    >>> counted(1, "query", "queries"), counted(2, "query", "queries"), counted(0, "item")
    ('1 query', '2 queries', '0 items')
    """
    return f"{count} {noun if count == 1 else plural or noun + 's'}"
