"""Records in: every raw record validated once, a query id repeated anywhere in the input refused."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping

from assembler.errors import InputError, RecordError, UsageError
from assembler.run.io import RawRecord, unexpected_error
from assembler.stages.lanes import LaneRecord, parse_record, record_id, repeated_query_id

__all__ = ["iter_records", "stop_at_first"]


def iter_records(
    raws: Iterable[RawRecord],
    reject: Callable[[RawRecord, RecordError], None],
    overrides: Mapping[str, int] | None = None,
    seen: set[str] | None = None,
) -> Iterator[tuple[RawRecord, LaneRecord]]:
    """Validated records; each bad one (including a repeated query id) is handed to ``reject``.

    Whatever fails while one record is validated is that record's error: an unexpected exception
    becomes a :class:`RecordError` whose rule names the exception's type only (never its message,
    which could quote the payload). Only :class:`UsageError` and ``MemoryError`` end the run.
    ``seen`` holds the query ids accepted before (earlier batches of one run); it is updated.
    """
    seen = set() if seen is None else seen
    overrides = dict(overrides or {})
    for raw in raws:
        if raw.error is not None:
            reject(raw, raw.error)
            continue
        try:
            record = parse_record(raw.value, file=raw.file, line=raw.line, overrides=overrides)
        except InputError as exc:
            reject(raw, exc.error)
            continue
        except (UsageError, MemoryError):
            raise
        except Exception as exc:
            reject(raw, unexpected_error(raw.file, raw.line, record_id(raw.value), exc, "validating"))
            continue
        repeated = repeated_query_id(record, seen)
        if repeated is not None:
            reject(raw, repeated)
            continue
        yield raw, record


def stop_at_first(_raw: RawRecord, error: RecordError) -> None:
    """A ``reject`` that ends the run at the first bad record."""
    raise InputError(error)
