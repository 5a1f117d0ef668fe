"""Budgeted evidence assembly: fuse retrieval lanes into byte-exact evidence packages, in batch."""

from assembler.errors import InputError, RecordError, UsageError
from assembler.io import read_raw
from assembler.pipeline import BatchResult, assemble, assemble_batch, assemble_records
from assembler.policy import CONTRACT, SelectionPolicy, get_policy
from assembler.request import Limits
from assembler.stream import RunSummary, convert, run_assembly

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
