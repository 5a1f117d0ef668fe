"""Build a small Japanese lane dump from the Taguru ADR 0001 brewery corpus.

Run from the repository root: ``python scripts/build_sample.py``. Reads
``../shared/taguru-data/adr/0001/{corpus,golden}`` (relative to the repository root) and
writes ``assembler/sample/lanes.jsonl`` (shipped in the package; ``data/sample`` links to it).
Refuses, writing nothing, when the corpus is missing or the result would be smaller than the
committed file (``--force`` replaces it anyway). The lanes emulate the server (see data/sample/SOURCE.md):
the graph is the golden triples, the passages lane is Okapi BM25 over character bigrams.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from guard import require_inputs, write_lines

ROOT = Path(__file__).resolve().parent.parent
ADR = ROOT.parent / "shared" / "taguru-data" / "adr" / "0001"
OUT = ROOT / "assembler" / "sample"  # shipped in the package; data/sample links here
CONTEXT = "brewery"
K1, B = 1.2, 0.75
ACTIVATE_LIMIT = 20
DECAY = 0.5

Json = dict[str, Any]

QUERIES: list[Json] = [
    {"origins": ["青嶺酒造"]},
    {
        "origins": ["青嶺酒造"],
        "labels": ["代表銘柄"],
        "text_fallback_query": "青嶺酒造の代表銘柄は何か",
    },
    {"origins": ["青嶺酒造"], "labels": ["杜氏"], "text_fallback_query": "青嶺酒造の杜氏は誰か"},
    {"origins": ["高瀬"]},
    {
        "origins": ["高瀬"],
        "labels": ["出身", "経験年数"],
        "text_fallback_query": "高瀬杜氏の出身と経験年数",
    },
    {
        "origins": ["蔵人"],
        "labels": ["住み込む場所"],
        "text_fallback_query": "蔵人はどこに住み込むか",
    },
    {
        "origins": ["六代目当主"],
        "labels": ["担う"],
        "text_fallback_query": "六代目当主は何を担うか",
    },
    {"origins": ["青嶺"], "labels": ["輸出先"], "text_fallback_query": "青嶺の輸出先はどこか"},
    {"origins": ["青嶺"], "labels": ["受賞する"]},
    {"origins": ["金賞"], "labels": ["要因"], "text_fallback_query": "金賞の要因は何か"},
    {"origins": ["霧沢町"], "text_fallback_query": "霧沢町はどの県にあるか"},
    {
        "origins": ["山田錦"],
        "labels": ["精米歩合"],
        "text_fallback_query": "山田錦の精米歩合は何パーセントか",
    },
    {"origins": ["月白屋"], "labels": ["店主"], "text_fallback_query": "月白屋の店主は誰か"},
    {"origins": ["月白屋"], "labels": ["扱う"]},
    {
        "origins": ["青嶺 雫"],
        "labels": ["出荷数"],
        "text_fallback_query": "青嶺 雫の出荷数は何本か",
    },
    {"origins": ["蔵開きの祭り"], "text_fallback_query": "蔵開きの祭りはいつ開かれるか"},
    {
        "origins": ["共同研究"],
        "labels": ["目的"],
        "text_fallback_query": "雲居大学との共同研究の目的は何か",
    },
    {"origins": ["新酵母"]},
    {"origins": ["海外向けの輸出"], "labels": ["通す"]},
    {"origins": ["雲居山の伏流水"]},
    {"origins": ["麹造り"], "text_fallback_query": "麹造りを監督するのは誰か"},
    {"origins": ["青嶺酒造", "高瀬"], "labels": ["杜氏", "役職"]},
    {"origins": ["青嶺酒造"], "text_fallback_query": "青嶺酒造の蔵人と杜氏", "search_limit": 10},
    {"origins": ["青嶺酒造"], "budget": {"max_items": 3}},
    {"origins": ["青嶺"], "text_fallback_query": "青嶺の特徴", "budget": {"max_tokens": 300}},
    {"origins": ["月白屋", "青嶺 雫"], "budget": {"max_bytes": 1500}},
    {"origins": ["青嶺酒造"], "include_communities": True},
    {"origins": ["高瀬"], "rerank": {"model": "m"}},
    {"origins": [], "text_fallback_query": "海外向けのラベルは英語表記か"},
    {"origins": ["高橋商店"], "text_fallback_query": "高橋商店とは"},
]


def paragraphs(path: Path) -> list[str]:
    """Blank-line-separated blocks, 0-based, inner line breaks kept."""
    blocks = re.split(r"\n[ \t]*\n", path.read_text(encoding="utf-8"))
    return [b.strip("\n") for b in blocks if b.strip()]


def terms(text: str) -> list[str]:
    """Character bigrams of every run of non-space characters; a one-char run is itself."""
    out: list[str] = []
    for run in text.split():
        out.extend([run] if len(run) == 1 else [run[i : i + 2] for i in range(len(run) - 1)])
    return out


def build_graph(golden: Path) -> list[Json]:
    """One association per distinct triple, one attribution per golden file (sorted files)."""
    triples: dict[tuple[str, str, str], list[Json]] = {}
    for path in sorted(golden.glob("*.json")):
        source = f"corpus/{path.stem}.md"
        for t in json.loads(path.read_text(encoding="utf-8")).get("triples", []):
            weight = 1.0 if t["polarity"] == "positive" else -1.0
            attribution = {
                "source": source,
                "weight": weight,
                "count": 1,
                "paragraph": t["paragraph"],
                "section": None,
                "locator": None,
            }
            triples.setdefault((t["subject"], t["label"], t["object"]), []).append(attribution)
    return [
        {
            "subject": s,
            "label": label,
            "object": o,
            "weight": sum(a["weight"] for a in atts) / len(atts),
            "count": len(atts),
            "attributions": atts,
        }
        for (s, label, o), atts in triples.items()
    ]


class Bm25:
    """Okapi BM25 (Lucene idf, k1=1.2, b=0.75) over (source, paragraph, text) documents."""

    def __init__(self, docs: list[tuple[str, int, str]]) -> None:
        self.docs = docs
        self.tf = [Counter(terms(text)) for _, _, text in docs]
        self.length = np.array([sum(c.values()) for c in self.tf], dtype=np.float64)
        self.df = Counter(t for c in self.tf for t in c)

    def search(self, query: str, limit: int) -> list[Json] | None:
        wanted = list(dict.fromkeys(terms(query)))
        if not wanted:
            return None
        n = len(self.docs)
        norm = K1 * (1 - B + B * self.length / self.length.mean())
        scores = np.zeros(n)
        for t in wanted:
            df = self.df.get(t, 0)
            if df:
                tf = np.array([c.get(t, 0) for c in self.tf], dtype=np.float64)
                idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
                scores += idf * tf * (K1 + 1) / (tf + norm)
        f32 = [float(np.float32(s)) for s in scores]
        order = sorted((i for i in range(n) if f32[i] > 0), key=lambda i: (-f32[i], self.docs[i][:2]))
        hits = []
        for rank, i in enumerate(order[:limit], 1):
            source, paragraph, text = self.docs[i]
            hits.append(
                {
                    "source": source,
                    "paragraph": paragraph,
                    "score": f32[i],
                    "text": text,
                    "lanes": {"bm25": {"rank": rank, "score": f32[i]}},
                }
            )
        return hits


def lanes(request: Json, graph: list[Json], index: Bm25, texts: dict[tuple[str, int], str]) -> Json:
    names = {a["subject"] for a in graph} | {a["object"] for a in graph}
    anchors = list(dict.fromkeys(o for o in request["origins"] if o in names))
    labels = request.get("labels", [])
    query: list[Json] | None = None
    activate: list[Json] | None = None
    if anchors:
        query = sorted(
            (a for a in graph if a["subject"] in anchors and a["label"] in labels),
            key=lambda a: (-abs(a["weight"]), a["subject"], a["label"], a["object"]),
        )
        touching = [
            (next(x for x in anchors if x in (a["subject"], a["object"])), i, a)
            for i, a in enumerate(graph)
            if a["subject"] in anchors or a["object"] in anchors
        ]
        touching.sort(key=lambda e: (-DECAY * abs(e[2]["weight"]), e[1]))
        activate = [
            {"strength": DECAY * abs(a["weight"]), "path": [anchor], "association": a}
            for anchor, _, a in touching[:ACTIVATE_LIMIT]
        ]
    canonical = request.get("text_fallback_query", "; ".join(request["origins"]))
    limit = min(request.get("search_limit", 5), 200)
    passages = index.search(canonical, limit) if limit else None
    wanted = sorted(
        {
            (att["source"], att["paragraph"])
            for a in (query or []) + [x["association"] for x in activate or []]
            for att in a["attributions"]
            if att["paragraph"] is not None
        }
    )
    citations = [
        {
            "source": s,
            "paragraph": p,
            "citation": {"text": texts[s, p], "source": s, "section": None, "locator": None},
        }
        for s, p in wanted
        if (s, p) in texts
    ]
    return {
        "graph_query": query,
        "graph_activate": activate,
        "passages": passages,
        "communities": None,
        "citations": citations,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--force", action="store_true", help="replace the committed sample even if smaller")
    force = parser.parse_args().force
    require_inputs("build_sample.py", [ADR / "corpus", ADR / "golden"], "the Taguru ADR 0001 brewery corpus")
    texts: dict[tuple[str, int], str] = {}
    for path in sorted((ADR / "corpus").glob("*.md")):
        for i, text in enumerate(paragraphs(path)):
            texts[f"corpus/{path.name}", i] = text
    graph = build_graph(ADR / "golden")
    for a in graph:
        for att in a["attributions"]:
            assert (att["source"], att["paragraph"]) in texts, att
    index = Bm25([(s, p, t) for (s, p), t in texts.items()])
    lines = []
    for n, request in enumerate(QUERIES, 1):
        line = {
            "query_id": f"ja-{n:03d}",
            "context": CONTEXT,
            "request": request,
            "lanes": lanes(request, graph, index, texts),
        }
        lines.append(json.dumps(line, ensure_ascii=False, separators=(",", ":")))
    write_lines("build_sample.py", OUT / "lanes.jsonl", lines, force=force)
    print(f"{len(lines)} queries, {len(graph)} associations, {len(texts)} paragraphs")


if __name__ == "__main__":
    main()
