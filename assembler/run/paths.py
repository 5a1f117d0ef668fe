"""File names in messages, and the rule that no output may be an input or another output.

Every command (and the Python API functions that write files) calls :func:`refuse_same_files`
before any work: writing packages over the lane dump they are read from, or the errors file over
the packages, would destroy data and still exit 0. Two paths are "the same file" when they resolve
to the same path (``./a`` and ``a``, a symlink and its target) or, for existing files, when they
have the same device and inode (hard links). ``-`` (standard input or output) is never the same
file as anything.

>>> shown("in.jsonl"), shown(os.fsdecode(b"bad\\xff.jsonl"))
('in.jsonl', 'bad\\\\xff.jsonl')
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

from assembler.errors import UsageError, shown_path

__all__ = ["PathGroup", "refuse_same_files", "shown"]

STDIO = "-"

PathGroup = Mapping[str, "str | os.PathLike[str] | Sequence[str | os.PathLike[str]] | None"]
"""Labelled paths: ``{label: path}`` or ``{label: [paths]}``; ``None`` (not given) is skipped."""


def shown(path: str | bytes | os.PathLike[str]) -> str:
    """A file name as messages show it (:func:`assembler.errors.shown_path`: non-UTF-8 bytes as
    ``\\xNN``, control characters escaped, at most 200 characters)."""
    return shown_path(path)


def _flatten(group: PathGroup) -> list[tuple[str, str]]:
    pairs: list[tuple[str, str]] = []
    for label, value in group.items():
        if value is None:
            continue
        paths = [value] if isinstance(value, str | os.PathLike) else list(value)
        pairs.extend((label, os.fspath(path)) for path in paths if os.fspath(path) != STDIO)
    return pairs


def _identity(path: str) -> tuple[str, tuple[int, int] | None]:
    """The resolved path, and ``(device, inode)`` when the file exists."""
    try:
        info = os.stat(path)
    except OSError:
        return os.path.realpath(path), None
    return os.path.realpath(path), (info.st_dev, info.st_ino)


def _same(first: tuple[str, tuple[int, int] | None], second: tuple[str, tuple[int, int] | None]) -> bool:
    if first[1] is not None and second[1] is not None:
        return first[1] == second[1]
    return first[0] == second[0]


def refuse_same_files(inputs: PathGroup, outputs: PathGroup) -> None:
    """Raise :class:`~assembler.errors.UsageError` if an output is the same file as an input or as
    another output; the message names both by their labels.

    The labels are the caller's words: argument names for the Python API (``output``,
    ``errors_path``), flag names on the command line (``-o``, ``--errors``).

    >>> refuse_same_files({"inputs": ["a.jsonl"]}, {"output": "./a.jsonl"})
    Traceback (most recent call last):
    ...
    assembler.errors.UsageError: output ./a.jsonl is the same file as inputs a.jsonl: refusing to overwrite it
    >>> refuse_same_files({"inputs": "-"}, {"output": "-", "errors_path": "e.jsonl"})
    """
    named_outputs = [(label, path, _identity(path)) for label, path in _flatten(outputs)]
    named_inputs = [(label, path, _identity(path)) for label, path in _flatten(inputs)]
    for index, (label, path, identity) in enumerate(named_outputs):
        for other_label, other_path, other in named_inputs + named_outputs[:index]:
            if _same(identity, other):
                raise UsageError(
                    f"{label} {shown(path)} is the same file as {other_label} {shown(other_path)}: "
                    "refusing to overwrite it"
                )
