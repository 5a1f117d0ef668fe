"""Query files (BEIR ``queries.jsonl`` or TSV ``qid<TAB>text``) and compressed inputs made plain.

Shared by ``lanes from-runs``, ``lanes build --queries`` and the evaluation harness's qrels
input, so that every command reads a query file by one rule (docs/runs.md, "Queries"):

* **BEIR** (the first non-blank line begins with ``{``): one JSON object a line, ``_id`` (a
  non-blank string, or an integer, read as its decimal text) and ``text`` (a non-blank string);
  other keys (``metadata``, ``title``) are ignored.
* **TSV**: ``qid<TAB>text`` a line, no header; the query id is the text before the first tab,
  the query everything after it (a later tab stays in the query).

Blank lines are skipped; a query id may appear once. Every input may be gzip- or zstd-compressed:
the magic bytes decide, not the name (:func:`~assembler.run.io.open_input`, :func:`plain_path`).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import tempfile
from collections.abc import Callable, Iterator
from typing import Literal

from assembler.contract.jsoninput import read_json
from assembler.contract.wire import ShapeError
from assembler.errors import InputError, RecordError, UsageError, encodable
from assembler.run.io import DEFAULT_MAX_RECORD_BYTES, Oversized, open_input, stream_lines
from assembler.run.paths import shown as shown_path

__all__ = [
    "QueriesFormat",
    "Reject",
    "describe_trec_line",
    "input_lines",
    "plain_path",
    "read_queries",
]

QueriesFormat = Literal["beir", "tsv"]
Reject = Callable[[RecordError, str], None]
"""What a reader does with a bad line in ``skip`` mode: the error and the line's text."""


@contextlib.contextmanager
def plain_path(path: str | os.PathLike[str]) -> Iterator[str]:
    """A path whose bytes are the input's, uncompressed: the file itself, or for a gzip or zstd
    file (by its magic bytes, :func:`~assembler.run.io.open_input`) a decompressed copy in the
    temporary folder (removed on leaving), for readers that scan or seek."""
    with contextlib.ExitStack() as stack:
        stream = stack.enter_context(open_input(os.fspath(path), json_lines=False))
        if stream.compression is None:
            stack.close()
            yield os.fspath(path)
            return
        try:
            handle, name = tempfile.mkstemp(prefix="assembler-", suffix=".plain")
            stack.callback(_remove, name)
            with os.fdopen(handle, "wb") as out:
                shutil.copyfileobj(stream, out, 1 << 20)
        except OSError as exc:  # the copy: a compressed stream that cannot be read is a UsageError already
            raise UsageError(f"cannot decompress {shown_path(path)}: {exc.strerror or exc}") from None
        stream.close()
        yield name


def _remove(name: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(name)


def input_lines(path: str | os.PathLike[str]) -> Iterator[tuple[int, bytes]]:
    """``(line number, bytes)`` of every non-blank line (``\\r\\n`` endings accepted), opened as every
    JSON Lines input is (:func:`~assembler.run.io.open_input`: gzip and zstd read, a file that
    cannot be lines refused)."""
    with open_input(os.fspath(path)) as stream:
        try:
            for number, line in stream_lines(stream, max_bytes=DEFAULT_MAX_RECORD_BYTES):
                if isinstance(line, Oversized):  # skipped without being kept: memory stays bounded
                    raise UsageError(f"{shown_path(path)}:{number}: line is {line.size} bytes, over {line.limit}")
                yield number, line
        except OSError as exc:
            raise UsageError(f"cannot read {shown_path(path)}: {exc.strerror or exc}") from None


_INTEGER = re.compile(r"[+-]?\d+")
_NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")
BEIR_QRELS_HEADER = ("query-id", "corpus-id", "score")


def describe_trec_line(text: str) -> str | None:
    """What a whitespace-separated line looks like, when it is a TREC run or qrels line: lets a
    reader say "this is a run, not a qrels file" (and back) instead of a field error.

    >>> describe_trec_line("q1 Q0 d7 1 12.5 bm25"), describe_trec_line("q1 0 d7 1")
    ('a TREC run line (qid Q0 docid rank score tag)', 'a TREC qrels line (qid 0 docid relevance)')
    >>> describe_trec_line("query-id\\tcorpus-id\\tscore"), describe_trec_line("q1\\twho is it")
    ('the header of a BEIR qrels file (query-id, corpus-id, score)', None)
    """
    fields = text.split()
    if tuple(fields) == BEIR_QRELS_HEADER:
        return "the header of a BEIR qrels file (query-id, corpus-id, score)"
    if len(fields) == 6 and _INTEGER.fullmatch(fields[3]) and _NUMBER.fullmatch(fields[4]):
        return "a TREC run line (qid Q0 docid rank score tag)"
    if len(fields) == 4 and fields[1] in ("0", "Q0") and _INTEGER.fullmatch(fields[3]):
        return "a TREC qrels line (qid 0 docid relevance)"
    return None


def _sniff(path: str | os.PathLike[str]) -> tuple[QueriesFormat, str | None]:
    """The format of a query file by its first non-blank line, and that line's text."""
    for _, raw in input_lines(path):
        text = raw.decode("utf-8", "replace")
        return ("beir" if text.lstrip().startswith("{") else "tsv"), text
    return "tsv", None


def _unencodable(text: str) -> bool:
    return encodable(text) != text


def read_queries(
    path: str | os.PathLike[str], *, format: QueriesFormat | None = None, reject: Reject | None = None
) -> list[tuple[str, str]]:
    """``(query id, query text)`` in file order (module docstring for both formats).

    A bad line raises :class:`~assembler.errors.InputError` (``file:line: query_id 'q' field
    text: rule``), or with ``reject`` is handed to it and skipped. A file with no line, or whose
    first line is a TREC run or qrels line (a file given in the wrong place), is a
    :class:`~assembler.errors.UsageError`.
    """
    name = shown_path(path)
    detected, first = _sniff(path)
    chosen = format or detected
    if chosen == "tsv" and first is not None and (kind := describe_trec_line(first)) is not None:
        raise UsageError(f"{name} is not a query file: its first line is {kind}")

    def refuse(number: int, query_id: str | None, field: str, rule: str, text: str) -> None:
        error = RecordError(name, number, query_id, field, rule)
        if reject is None:
            raise InputError(error)
        reject(error, text)

    out: list[tuple[str, str]] = []
    seen: dict[str, int] = {}
    id_field, text_field = ("_id", "text") if chosen == "beir" else ("qid", "text")
    for number, raw in input_lines(path):
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            refuse(number, None, "", f"invalid UTF-8 at byte {exc.start} of the line", raw.decode("utf-8", "replace"))
            continue
        found = _beir_query(text) if chosen == "beir" else _tsv_query(text)
        if isinstance(found, RecordError):
            refuse(number, found.query_id, found.field, found.rule, text)
            continue
        query_id, query = found
        if query_id in seen:
            refuse(number, query_id, id_field, f"repeated query id (first at line {seen[query_id]})", text)
            continue
        if _unencodable(query_id) or _unencodable(query):
            field = id_field if _unencodable(query_id) else text_field
            refuse(number, None, field, "holds a lone surrogate (not valid Unicode)", text)
            continue
        seen[query_id] = number
        out.append((query_id, query))
    if first is None:
        raise UsageError(f"{name}: no queries: expected BEIR queries (JSON Lines of _id, text) or qid<TAB>text lines")
    return out


def _problem(query_id: str | None, field: str, rule: str) -> RecordError:
    return RecordError("", 0, query_id, field, rule)


def _beir_query(text: str) -> tuple[str, str] | RecordError:
    try:
        value = read_json(text)  # the strict reader of every input: numbers, depth, repeated keys, lone surrogates
    except ShapeError as exc:
        return _problem(None, exc.path, exc.rule)
    if not isinstance(value, dict):
        return _problem(None, "", "must be a JSON object")
    query_id = value.get("_id")
    if type(query_id) is int:
        query_id = str(query_id)
    if not isinstance(query_id, str) or not query_id.strip():
        return _problem(None, "_id", "must be a non-blank string or an integer")
    query = value.get("text")
    if not isinstance(query, str) or not query.strip():
        return _problem(query_id, "text", "must be a non-blank string")
    return query_id, query


def _tsv_query(text: str) -> tuple[str, str] | RecordError:
    query_id, tab, query = text.partition("\t")
    if not tab:
        kind = describe_trec_line(text)
        rule = f"is {kind}, not qid<TAB>text" if kind else "must be qid<TAB>text (no tab in the line)"
        return _problem(None, "", rule)
    if not query_id.strip():
        return _problem(None, "qid", "must not be blank")
    if not query.strip():
        return _problem(query_id, "text", "must not be blank")
    return query_id, query
