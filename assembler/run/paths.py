"""File names in messages, and the checks every output passes before any work.

Every command (and the Python API functions that write files) calls :func:`refuse_same_files`
before any work, for two rules:

* **No output is an input or another output.** Writing packages over the lane dump they are read
  from, or the errors file over the packages, would destroy data and still exit 0. Two paths are
  "the same file" when they resolve to the same path (``./a`` and ``a``, a symlink and its target)
  or, for existing files, when they have the same device and inode (hard links). ``-`` is the
  standard stream itself: standard input for an input, standard output for an output, compared by
  the device and inode of descriptor 0 or 1 when that is a regular file (``< in.jsonl``,
  ``1<>in.jsonl``, ``>> in.jsonl``), as ``cat`` refuses "input file is output file". A terminal, a
  pipe, ``/dev/null`` or any other character device is never the same file as anything.
* **Every output can be written** (:func:`check_output`): its folder exists and may be written, it
  is not a folder, not a symbolic-link loop, and an existing file may be written by this user (as
  ``>``, ``sort -o`` and ``cp`` refuse a write-protected file). Without these checks a missing
  ``--metrics-out`` folder was found after the run, once the packages had been replaced.

And the format an output is written in (:func:`output_format`): the one asked for, else the one
its extension names, else a refusal: a name such as ``out.csv`` got JSON Lines.

>>> shown("in.jsonl"), shown(os.fsdecode(b"bad\\xff.jsonl"))
('in.jsonl', 'bad\\\\xff.jsonl')
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from assembler.errors import OutputError, UsageError, shown_path

__all__ = [
    "COMPRESSED_SUFFIXES",
    "JSONL_SUFFIXES",
    "PARQUET_SUFFIXES",
    "PathGroup",
    "check_output",
    "format_by_extension",
    "output_format",
    "refuse_same_files",
    "shown",
]

STDIO = "-"

PathGroup = Mapping[str, "str | os.PathLike[str] | Sequence[str | os.PathLike[str]] | None"]
"""Labelled paths: ``{label: path}`` or ``{label: [paths]}``; ``None`` (not given) is skipped."""


def shown(path: str | bytes | os.PathLike[str]) -> str:
    """A file name as messages show it (:func:`assembler.errors.shown_path`: non-UTF-8 bytes as
    ``\\xNN``, control characters escaped, at most 200 characters)."""
    return shown_path(path)


@dataclass(frozen=True)
class _Named:
    """One labelled input or output, and what tells whether two of them are one file."""

    label: str
    name: str  # as messages show it
    stream: int | None  # the descriptor of ``-`` (0 for an input, 1 for an output)
    resolved: str | None  # the resolved path; None for a stream or a character device
    inode: tuple[int, int] | None  # (device, inode) of an existing file


def _named(label: str, path: str, descriptor: int) -> _Named:
    if path == STDIO:
        stream = "standard input" if descriptor == 0 else "standard output"
        try:
            info = os.fstat(descriptor)
        except OSError:  # closed
            return _Named(label, f"- ({stream})", descriptor, None, None)
        inode = (info.st_dev, info.st_ino) if stat.S_ISREG(info.st_mode) else None
        return _Named(label, f"- ({stream})", descriptor, None, inode)
    try:
        info = os.stat(path)
    except OSError:
        return _Named(label, shown(path), None, os.path.realpath(path), None)
    if stat.S_ISCHR(info.st_mode):  # /dev/null, a terminal: many writers and readers are fine
        return _Named(label, shown(path), None, None, None)
    return _Named(label, shown(path), None, os.path.realpath(path), (info.st_dev, info.st_ino))


def _flatten(group: PathGroup, descriptor: int) -> list[_Named]:
    named: list[_Named] = []
    for label, value in group.items():
        if value is None:
            continue
        paths = [value] if isinstance(value, str | os.PathLike) else list(value)
        named.extend(_named(label, os.fspath(path), descriptor) for path in paths)
    return named


def _same(first: _Named, second: _Named) -> bool:
    if first.stream is not None and first.stream == second.stream:
        return False  # two outputs on standard output share one stream: nothing is renamed over the other
    if first.inode is not None and second.inode is not None:
        return first.inode == second.inode
    return first.resolved is not None and first.resolved == second.resolved


def refuse_same_files(inputs: PathGroup, outputs: PathGroup, *, makes_folders: bool = False) -> None:
    """Raise :class:`~assembler.errors.UsageError` if an output is the same file as an input or as
    another output (the message names both by their labels), then check that every output can be
    written (:func:`check_output`; ``makes_folders``: the writer creates missing folders).

    The labels are the caller's words: argument names for the Python API (``output``,
    ``errors_path``), flag names on the command line (``-o``, ``--errors``).

    >>> refuse_same_files({"inputs": ["a.jsonl"]}, {"output": "./a.jsonl"})
    Traceback (most recent call last):
    ...
    assembler.errors.UsageError: output ./a.jsonl is the same file as inputs a.jsonl: refusing to overwrite it
    >>> refuse_same_files({"inputs": "-"}, {"output": "-", "errors_path": "-"})
    """
    named_outputs = _flatten(outputs, 1)
    named_inputs = _flatten(inputs, 0)
    for index, output in enumerate(named_outputs):
        for other in named_inputs + named_outputs[:index]:
            if _same(output, other):
                raise UsageError(
                    f"{output.label} {output.name} is the same file as {other.label} {other.name}: "
                    "refusing to overwrite it"
                )
    for value in outputs.values():
        if value is None:
            continue
        for path in [value] if isinstance(value, str | os.PathLike) else list(value):
            check_output(os.fspath(path), makes_folders=makes_folders)


def _read_only(folder: str) -> bool:
    try:
        return bool(os.statvfs(folder).f_flag & os.ST_RDONLY)
    except OSError:
        return False


def check_output(path: str | os.PathLike[str], *, makes_folders: bool = False) -> None:
    """Refuse an output that could not be written, before any work.

    * a symbolic-link loop, a folder, or a path under a regular file: :class:`UsageError` (exit 2);
    * a missing folder (unless ``makes_folders``: then the nearest existing one is checked):
      :class:`UsageError`;
    * an existing file this user may not write (``os.access``; for root only a read-only file
      system refuses, as for ``cp``): :class:`UsageError`, ``refusing to replace``: nothing is
      replaced, as ``>``, ``sort -o`` and ``cp`` refuse;
    * a folder this user may not create files in, or a read-only file system:
      :class:`~assembler.errors.OutputError` (exit 1), as the write itself would fail.

    ``-`` (standard output) always passes. A regular file is replaced through a temporary file
    beside it (beside a symlink's target), so its folder must be writable; a FIFO or a device is
    written into, so only the file itself must be.
    """
    path = os.fspath(path)
    if path == STDIO:
        return
    try:
        info: os.stat_result | None = os.stat(path)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise UsageError(f"cannot write {shown(path)}: too many levels of symbolic links") from None
        info = None
    if info is not None:
        if stat.S_ISDIR(info.st_mode):
            raise UsageError(f"cannot write {shown(path)}: it is a folder")
        if not os.access(path, os.W_OK):
            if _read_only(path):
                raise OutputError(f"cannot write {shown(path)}: Read-only file system")
            raise UsageError(
                f"refusing to replace {shown(path)}: this user may not write to it "
                f"(mode {stat.S_IMODE(info.st_mode):04o})"
            )
        if not stat.S_ISREG(info.st_mode):  # FIFO, device, socket: streamed into, the folder is not written
            return
    target = os.path.realpath(path) if os.path.islink(path) else path
    folder = os.path.dirname(target) or "."
    existing = folder
    while makes_folders and not os.path.exists(existing) and os.path.dirname(existing) != existing:
        existing = os.path.dirname(existing) or "."
    if not os.path.exists(existing):
        raise UsageError(f"cannot write {shown(path)}: folder {shown(folder)} does not exist")
    if not os.path.isdir(existing):
        raise UsageError(f"cannot write {shown(path)}: {shown(existing)} is not a folder")
    if not os.access(existing, os.W_OK | os.X_OK):
        reason = "Read-only file system" if _read_only(existing) else "Permission denied"
        raise OutputError(f"cannot write {shown(path)}: {reason}")


PARQUET_SUFFIXES = (".parquet", ".pq")
JSONL_SUFFIXES = (".jsonl", ".ndjson", ".json")
COMPRESSED_SUFFIXES = (".gz", ".zst", ".zstd", ".bz2", ".xz")
"""Extensions of compressed files: their refusal adds that outputs are never compressed."""


def format_by_extension(path: str | os.PathLike[str]) -> Literal["jsonl", "parquet"] | None:
    """The output format an output's name says, compared case-insensitively: ``.parquet``/``.pq``
    are Parquet, ``.jsonl``/``.ndjson``/``.json`` JSON Lines. A name without an extension
    (``packages``, ``-``, ``/dev/null``) claims no other format and is JSON Lines, the default; a
    name whose extension names anything else (``out.csv``, ``out.jsonl.gz``) is ``None``.

    >>> [format_by_extension(name) for name in ("OUT.PARQUET", "out.Jsonl", "packages", "out.jsonl.gz", "out.csv")]
    ['parquet', 'jsonl', 'jsonl', None, None]
    """
    name = os.path.basename(os.fspath(path)).lower()
    if name.endswith(PARQUET_SUFFIXES):
        return "parquet"
    if name.endswith(JSONL_SUFFIXES) or not os.path.splitext(name)[1]:
        return "jsonl"
    return None


def output_format(
    path: str | os.PathLike[str],
    given: Literal["jsonl", "parquet"] | None = None,
    *,
    label: str = "output",
    option: str = "output_format='jsonl' or 'parquet'",
) -> Literal["jsonl", "parquet"]:
    """``given``, else :func:`format_by_extension` of ``path``, else :class:`UsageError` naming the
    output (``label``), the known extensions and how to ask for a format (``option``: the API
    argument, or the command line's flag).

    >>> output_format("out.csv")
    Traceback (most recent call last):
    ...
    assembler.errors.UsageError: cannot tell the format of output out.csv from its extension \
(.parquet/.pq for Parquet, .jsonl/.ndjson/.json for JSON Lines): give output_format='jsonl' or 'parquet'
    """
    if given is not None:
        return given
    found = format_by_extension(path)
    if found is not None:
        return found
    name = os.fspath(path)
    compressed = "; outputs are written uncompressed" if name.lower().endswith(COMPRESSED_SUFFIXES) else ""
    raise UsageError(
        f"cannot tell the format of {label} {shown(name)} from its extension "
        f"({'/'.join(PARQUET_SUFFIXES)} for Parquet, {'/'.join(JSONL_SUFFIXES)} for JSON Lines): "
        f"give {option}{compressed}"
    )
