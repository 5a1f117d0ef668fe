"""Input errors: where a record is wrong and which rule it broke.

Errors never carry candidate text or any other payload value beyond the query id, so they are
safe to log.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["InputError", "RecordError", "UsageError"]


@dataclass(frozen=True)
class RecordError:
    """One broken rule of one input record.

    ``line`` is the 1-based line of a JSON Lines file or the 1-based row of a Parquet file.
    ``field`` is the path inside the record (``lanes.passages[3].score``); ``""`` for the record.
    """

    file: str
    line: int
    query_id: str | None
    field: str
    rule: str

    def __str__(self) -> str:
        details = []
        if self.query_id is not None:
            details.append(f"query_id {self.query_id!r}")
        if self.field:
            details.append(f"field {self.field}")
        where = " ".join([f"{self.file}:{self.line}:", *details])
        return f"{where} {self.rule}" if not details else f"{where}: {self.rule}"

    def as_dict(self) -> dict[str, object]:
        """A JSON-ready mapping, as written to the errors file."""
        return {
            "file": self.file,
            "line": self.line,
            "query_id": self.query_id,
            "field": self.field,
            "rule": self.rule,
        }


class InputError(Exception):
    """Raised for a malformed input record; carries the structured :class:`RecordError`."""

    def __init__(self, error: RecordError) -> None:
        super().__init__(str(error))
        self.error = error


class UsageError(Exception):
    """A problem with how the tool was called (missing file, bad flag value)."""
