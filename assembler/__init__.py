"""Budgeted evidence assembly: fuse retrieval lanes into byte-exact evidence packages, in batch.

The public API is imported on first use (``assembler.run_assembly``, ``from assembler import
assemble_batch``): ``import assembler`` itself loads neither Polars nor Arrow, so the command line
has its Ctrl-C handling in place before they load (:func:`assembler.cli.main`).
"""

from __future__ import annotations

import importlib
import typing

if typing.TYPE_CHECKING:
    from assembler.contract.request import Limits
    from assembler.errors import AssemblerError, InputError, RecordError, UsageError
    from assembler.pipeline import BatchResult, assemble, assemble_batch, assemble_records
    from assembler.run.io import read_raw
    from assembler.run.local import convert, run_assembly
    from assembler.run.options import RunOptions
    from assembler.run.outputs import RunSummary
    from assembler.selection import CONTRACT, QualityPolicy, SelectionPolicy, get_policy, policies

__all__ = [
    "CONTRACT",
    "AssemblerError",
    "BatchResult",
    "InputError",
    "Limits",
    "QualityPolicy",
    "RecordError",
    "RunOptions",
    "RunSummary",
    "SelectionPolicy",
    "UsageError",
    "assemble",
    "assemble_batch",
    "assemble_records",
    "convert",
    "get_policy",
    "policies",
    "read_raw",
    "run_assembly",
]
__version__ = "0.1.0"

_HOMES = {
    "Limits": "assembler.contract.request",
    "AssemblerError": "assembler.errors",
    "InputError": "assembler.errors",
    "RecordError": "assembler.errors",
    "UsageError": "assembler.errors",
    "BatchResult": "assembler.pipeline",
    "assemble": "assembler.pipeline",
    "assemble_batch": "assembler.pipeline",
    "assemble_records": "assembler.pipeline",
    "read_raw": "assembler.run.io",
    "convert": "assembler.run.local",
    "run_assembly": "assembler.run.local",
    "RunOptions": "assembler.run.options",
    "RunSummary": "assembler.run.outputs",
    "CONTRACT": "assembler.selection",
    "QualityPolicy": "assembler.selection",
    "SelectionPolicy": "assembler.selection",
    "get_policy": "assembler.selection",
    "policies": "assembler.selection",
}
"""Where each public name lives: the same names as ``__all__`` and the imports for type checkers
above (tests/test_layout.py checks that every name of ``__all__`` resolves)."""


def __getattr__(name: str) -> typing.Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'assembler' has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value  # found directly from now on
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
