"""Budgeted evidence assembly: fuse retrieval lanes into byte-exact evidence packages, in batch."""

from assembler.errors import InputError, RecordError
from assembler.pipeline import BatchResult, assemble, assemble_batch, assemble_records
from assembler.request import Limits

__all__ = ["BatchResult", "InputError", "Limits", "RecordError", "assemble", "assemble_batch", "assemble_records"]
__version__ = "0.1.0"
