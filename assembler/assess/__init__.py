"""Support assessment: how well the evidence supports an answer, and what is missing.

Two assessments, both deterministic and vectorized with Polars:

* run contexts (the Lexery U7 contract, docs/assess.md): :func:`assess_run` for
  one, :func:`assess_batch` for many, ``assembler.run.assess.run_assess`` for files (``assembler assess``);
* evidence packages (``assembler assemble --assess``): :func:`assess_package` /
  :func:`assess_packages`, computed from the package text alone, written beside the package.
"""

from assembler.assess.context import ParsedRun, RunRecordError, parse_context
from assembler.assess.packages import PACKAGE_VERSION, assess_package, assess_packages, assessed_line, assessment_texts
from assembler.assess.rules import (
    MAX_CITATION_REFS,
    STRONG_LAW_HITS,
    VERSION,
    AssessOptions,
    Clock,
    assess_batch,
    assess_parsed,
    assess_run,
    fixed_clock,
    format_timestamp,
    result_lines,
    utc_now,
)

__all__ = [
    "MAX_CITATION_REFS",
    "PACKAGE_VERSION",
    "STRONG_LAW_HITS",
    "VERSION",
    "AssessOptions",
    "Clock",
    "ParsedRun",
    "RunRecordError",
    "assess_batch",
    "assess_package",
    "assess_packages",
    "assess_parsed",
    "assess_run",
    "assessed_line",
    "assessment_texts",
    "fixed_clock",
    "format_timestamp",
    "parse_context",
    "result_lines",
    "utc_now",
]
