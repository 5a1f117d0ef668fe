"""What a batch run is asked to do: one options object for the local, pooled and Ray engines."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Literal

from assembler.contract.request import check_overrides
from assembler.errors import UsageError
from assembler.run.io import DEFAULT_MAX_RECORD_BYTES, check_max_record_bytes
from assembler.run.paths import output_format
from assembler.selection import CONTRACT, SelectionPolicy, get_policy

if TYPE_CHECKING:
    from assembler.stages.reorder import Reranker

__all__ = [
    "DEFAULT_CHUNK_BYTES",
    "DEFAULT_CHUNK_SIZE",
    "DEFAULT_MAX_RECORD_BYTES",
    "OnError",
    "OutputFormat",
    "RunOptions",
]

OnError = Literal["stop", "skip"]
OutputFormat = Literal["jsonl", "parquet"]
# Measured: 256 typical queries per chunk peak at ~0.4 GB RSS and run faster than 2048 (1.2 GB);
# see docs/performance.md.
DEFAULT_CHUNK_SIZE = 256
DEFAULT_CHUNK_BYTES = 4 * 2**20
"""A chunk also ends once it holds this many bytes of lines (JSON Lines) or of decoded rows
(Parquet, Arrow's ``nbytes``): a chunk in memory takes about twenty times its text, so 256 records
of 200 passages (50 MB of JSON) would hold a gigabyte. 4 MiB ends a chunk of typical records
(about 17.5 kB each) near 240 queries, and measured fastest with two workers on records of 200
passages (docs/performance.md, "Memory")."""


@dataclass(frozen=True)
class RunOptions:
    """How to assemble a run; every engine takes the same object.

    ``output_format`` is ``"jsonl"`` or ``"parquet"``; ``None`` (the default) takes it from the
    output's extension, case-insensitively, and refuses an extension that names no format
    (:func:`~assembler.run.paths.output_format`).
    ``overrides`` (``max_items``/``max_bytes``/``max_tokens``) replace every request's budget.
    With ``on_error="stop"`` the first bad record ends the run and no output is left; with
    ``"skip"`` rejected records go to ``errors_path`` with their reasons. ``assess`` adds a support
    assessment beside each package (JSON Lines only). A chunk ends at ``chunk_size`` queries or
    ``chunk_bytes`` bytes of input (``None``: queries only); a record of more than
    ``max_record_bytes`` (a JSON line, or a Parquet row decoded) is a record error. ``workers`` is the number
    of processes of the local engine (``None``: chosen from the input's size, at most one per
    usable CPU); ``policy`` is a policy object or a registered name (stored as the object: :attr:`selection_policy`).

    >>> RunOptions(policy="quality").selection_policy.name
    'quality'
    >>> RunOptions(chunk_size=0)
    Traceback (most recent call last):
    ...
    assembler.errors.UsageError: chunk_size must be at least 1, got 0
    """

    output_format: OutputFormat | None = None
    overrides: Mapping[str, int] = field(default_factory=dict)
    on_error: OnError = "stop"
    errors_path: str | None = None
    chunk_size: int = DEFAULT_CHUNK_SIZE
    chunk_bytes: int | None = DEFAULT_CHUNK_BYTES
    policy: str | SelectionPolicy = CONTRACT
    assess: bool = False
    reranker: Reranker | None = None
    workers: int | None = 1
    max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES

    @property
    def selection_policy(self) -> SelectionPolicy:
        """The policy object (a name given is looked up once, at construction)."""
        return get_policy(self.policy)

    def __post_init__(self) -> None:
        object.__setattr__(self, "policy", get_policy(self.policy))
        object.__setattr__(self, "overrides", check_overrides(self.overrides))
        if self.output_format not in ("jsonl", "parquet", None):
            raise UsageError(f"output_format must be 'jsonl', 'parquet' or None, got {self.output_format!r}")
        if self.on_error not in ("stop", "skip"):
            raise UsageError(f"on_error must be 'stop' or 'skip', got {self.on_error!r}")
        for name in ("chunk_size", "chunk_bytes", "workers"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
                raise UsageError(f"{name} must be at least 1, got {value!r}")
        check_max_record_bytes(self.max_record_bytes)
        if self.assess and self.output_format == "parquet":
            raise UsageError("an assessment is written beside each package in JSON Lines only, not in Parquet output")
        if self.reranker is not None and self.workers not in (1, None):
            raise UsageError(
                "a reranker runs in one process (one HTTP client and circuit breaker serve the whole run): "
                f"workers must be 1, got {self.workers}"
            )

    def writing(self, output: str | os.PathLike[str]) -> RunOptions:
        """These options with the format ``output`` is written in (:attr:`output_format`, else by its
        extension: :class:`UsageError` when that names no format)."""
        return replace(self, output_format=output_format(output, self.output_format))
