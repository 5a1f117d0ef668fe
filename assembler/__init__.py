"""Budgeted evidence assembly: fuse retrieval lanes into byte-exact evidence packages, in batch."""

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
