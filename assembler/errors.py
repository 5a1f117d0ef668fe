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

from dataclasses import dataclass
from typing import ClassVar

__all__ = ["AssemblerError", "InputError", "RecordError", "UsageError"]


class AssemblerError(Exception):
    """The base of the library's errors; ``exit_status`` is what the command line returns for it."""

    exit_status: ClassVar[int] = 2


class UsageError(AssemblerError):
    """A problem with how the tool was called (missing file, bad option value or combination)."""


@dataclass(frozen=True)
class RecordError:
    """One broken rule of one input record.

    ``line`` is the 1-based line of a JSON Lines file or the 1-based row of a Parquet file.
    ``field`` is the path inside the record (``lanes.passages[3].score``); ``""`` for the record.
    ``query_id`` is the record's id, shown under :attr:`id_name`.

    >>> str(RecordError("in.jsonl", 7, "q7", "request.budget.max_items", "must be a non-negative integer"))
    "in.jsonl:7: query_id 'q7' field request.budget.max_items: must be a non-negative integer"
    """

    id_name: ClassVar[str] = "query_id"

    file: str
    line: int
    query_id: str | None
    field: str
    rule: str

    def __str__(self) -> str:
        details = []
        if self.query_id is not None:
            details.append(f"{self.id_name} {self.query_id!r}")
        if self.field:
            details.append(f"field {self.field}")
        where = " ".join([f"{self.file}:{self.line}:", *details])
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


class InputError(AssemblerError):
    """Raised for a malformed input record; carries the structured :class:`RecordError`."""

    def __init__(self, error: RecordError) -> None:
        super().__init__(str(error))
        self.error = error
