"""Budgeted evidence assembly: fuse retrieval lanes into byte-exact evidence packages, in batch."""

from assembler.contract.request import Limits
from assembler.errors import InputError, RecordError, UsageError
from assembler.pipeline import BatchResult, assemble, assemble_batch, assemble_records
from assembler.run.io import read_raw
from assembler.run.local import convert, run_assembly
from assembler.run.outputs import RunSummary
from assembler.selection import CONTRACT, SelectionPolicy, get_policy

__all__ = [
    "CONTRACT",
    "BatchResult",
    "InputError",
    "Limits",
    "RecordError",
    "RunSummary",
    "SelectionPolicy",
    "UsageError",
    "assemble",
    "assemble_batch",
    "assemble_records",
    "convert",
    "get_policy",
    "read_raw",
    "run_assembly",
]
__version__ = "0.1.0"
