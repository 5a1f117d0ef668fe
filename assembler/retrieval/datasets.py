"""Convert the real labelled data sets into eval files and lane dumps under ``data/eval/<set>/``.

Regenerate everything from the repository root (reads ``../shared``)::

    python -m assembler.retrieval.datasets --all

Per set it writes the retrieval inputs (``corpus.jsonl``, ``triples.jsonl``, ``summaries.jsonl``,
``contexts.jsonl``) to ``build/eval/<set>/`` (not committed), then ``data/eval/<set>/eval.jsonl``
(``taguru_eval: 1``), ``sources.jsonl``, ``citations.jsonl``, ``SOURCE.md``, and finally
``lanes.jsonl`` through the same code path as ``assembler lanes build``. ``--no-lanes`` stops
before the lanes (no ``retrieval`` extra needed). Every output is deterministic. A set whose raw
data has gold answers also gets ``answers.jsonl`` (``{"case_id", "answers"}`` per line, the
sidecar ``assembler evaluate --answers`` reads).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from assembler.contract.jsoninput import read_json
from assembler.contract.wire import ShapeError
from assembler.errors import UsageError, counted
from assembler.retrieval.inputs import Fact, Paragraph, Summary
from assembler.retrieval.text import MentionIndex, question_entities
from assembler.run.paths import shown

__all__ = ["SETS", "Converted", "convert", "join_sentences", "main", "write_inputs", "write_outputs"]

Json = dict[str, Any]
ROOT = Path(__file__).resolve().parents[2]
SHARED = ROOT.parent / "shared"
REGENERATE = "python -m assembler.retrieval.datasets --all"


@dataclass
class Converted:
    """One converted set: retrieval inputs, eval cases (JSON-ready) and the SOURCE note."""

    name: str
    title: str
    corpus: list[Paragraph]
    cases: list[Json]
    facts: list[Fact] = field(default_factory=list)
    summaries: list[Summary] = field(default_factory=list)
    contexts: dict[str, str] = field(default_factory=dict)
    source_note: str = ""
    answers: list[Json] = field(default_factory=list)
    """``{"case_id", "answers"}`` per case with gold answer strings (``answers.jsonl``)."""


def _read_json(path: Path, *, lines: bool = False) -> Any:
    """A raw data file through the strict JSON reader (:func:`read_json`, the rules of every
    input): one document, or with ``lines`` a JSON array or one document per non-blank line (a
    list of them). A refusal is a :class:`UsageError` naming the file, the line and the field."""
    text = path.read_text("utf-8")  # FileNotFoundError: main's "missing input"
    if lines and not text.lstrip().startswith("["):
        numbered = [(number, line) for number, line in enumerate(text.split("\n"), start=1) if line.strip()]
        return [_document(path, number, line) for number, line in numbered]
    return _document(path, None, text)


def _document(path: Path, number: int | None, text: str) -> Any:
    try:
        return read_json(text)
    except ShapeError as exc:
        where = shown(str(path)) if number is None else f"{shown(str(path))}:{number}"
        raise UsageError(f"{where}: {exc.path}: {exc.rule}" if exc.path else f"{where}: {exc.rule}") from None


def _dump(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def split_paragraphs(text: str) -> list[str]:
    """Blank-line-separated paragraphs (Taguru's rule): interior line breaks kept, 0-based."""
    blocks: list[list[str]] = [[]]
    for line in text.splitlines():
        if line.strip():
            blocks[-1].append(line)
        elif blocks[-1]:
            blocks.append([])
    return ["\n".join(block) for block in blocks if block]


_CLOSERS = "\"')\u201d\u2019]"


def _ends_sentence(text: str) -> bool:
    """Ends in Latin sentence punctuation, possibly inside closing quotes or brackets ('1990.',
    '"Souq."'); an opening quote a sentence splitter left at the end (' "'), or CJK text, does not."""
    end = len(text)
    while end and text[end - 1] in _CLOSERS:
        end -= 1
    return end > 0 and text[end - 1] in ".!?;:"


def join_sentences(sentences: Iterable[str]) -> str:
    """Sentences as one paragraph: a space between two where neither side has one (HotpotQA's
    sentences carry their leading space, 2WikiMultihopQA's and MuSiQue's do not); CJK text,
    which has no spaces between sentences, is joined as it is.

    >>> join_sentences(["Paris is a city.", "It is in France."])
    'Paris is a city. It is in France.'
    >>> join_sentences(["Paris is a city.", " It is in France."])
    'Paris is a city. It is in France.'
    >>> join_sentences(["東京は都市である。", "日本にある。"])
    '東京は都市である。日本にある。'
    """
    text = ""
    for sentence in sentences:
        if text and sentence and not text[-1].isspace() and not sentence[0].isspace() and _ends_sentence(text):
            text += " "
        text += sentence
    return text


def _answers(case_id: str, answers: Iterable[Any]) -> Json | None:
    """An ``answers.jsonl`` line: the distinct non-blank answer strings in order (numbers as
    text), or None when none is left."""
    texts = list(dict.fromkeys(str(answer).strip() for answer in answers if answer is not None))
    texts = [text for text in texts if text]
    return {"case_id": case_id, "answers": texts} if texts else None


_YES_NO = frozenset({"yes", "no"})
"""Answers of comparison questions: not spans, so a substring test of them means nothing."""


def _source(source: str, paragraph: int, relevance: int | None = None) -> Json:
    entry: Json = {"source": source, "paragraphs": [paragraph]}
    if relevance is not None:
        entry["relevance"] = relevance
    return entry


# ---------------------------------------------------------------- HotpotQA


HOTPOTQA_CASES = 100


def _spread(items: Sequence[Any], count: int) -> list[Any]:
    """``count`` items spread evenly in order: ``items[floor(j * len / count)]``."""
    count = min(count, len(items))
    return [items[j * len(items) // count] for j in range(count)]


def hotpotqa(
    shared: Path, size: int | None = None, *, input: Path | None = None, context: str | None = None
) -> Converted:
    """HotpotQA distractor, hard: the 200 questions' context paragraphs pooled into one corpus; cases spread.

    ``input`` reads another file of the format (one JSON object a line, or a JSON array:
    2WikiMultihopQA's and MuSiQue's distractor exports have the same ``context`` and
    ``supporting_facts`` fields); ``context`` names the corpus (default ``hotpotqa``). A title met
    again with another text becomes the title's next paragraph: (title, text) is the identity.
    """
    path = input or shared / "eval-data/hotpotqa/hotpot.jsonl"
    context = context or "hotpotqa"
    rows = _read_json(path, lines=True)
    corpus: dict[tuple[str, str], Paragraph] = {}
    numbers: dict[str, int] = {}
    for row in rows:
        for title, sentences in row["context"]:
            text = join_sentences(sentences)
            if (title, text) not in corpus:
                numbers[title] = numbers.get(title, -1) + 1
                corpus[(title, text)] = Paragraph(context, title, numbers[title], text, title=title)
    paragraphs = list(corpus.values())
    titles = {p.source for p in paragraphs}
    index = MentionIndex([p.text for p in paragraphs])
    cases = []
    answers = []
    for row in _spread(rows, size or HOTPOTQA_CASES):
        gold_answers = [row.get("answer"), *row.get("answer_aliases", [])] if row.get("answerable", True) else []
        spans = [a for a in gold_answers if a is not None and str(a).strip().lower() not in _YES_NO]
        if (line := _answers(row["_id"], spans)) is not None:
            answers.append(line)
        sentences = dict((title, s) for title, s in row["context"])
        number = {title: corpus[(title, join_sentences(s))].paragraph for title, s in row["context"]}
        gold = list(dict.fromkeys(title for title, _ in row["supporting_facts"] if title in sentences))
        cues = index.specific(question_entities(row["question"]), keep=titles)
        cases.append(
            {
                "case_id": row["_id"],
                "query": row["question"].strip(),
                "cues": cues,
                "expected_sources": [_source(title, number[title]) for title in gold],
                "expected_citations": [
                    {"source": title, "paragraph": number[title], "quote": sentences[title][index].strip()}
                    for title, index in row["supporting_facts"]
                    if title in sentences and index < len(sentences[title]) and sentences[title][index].strip()
                ],
            }
        )
    return Converted(
        "hotpotqa",
        f"hotpotqa-distractor-hard-{len(cases)}",
        paragraphs,
        cases,
        source_note=HOTPOTQA_NOTE,
        answers=answers,
    )


# ---------------------------------------------------------------- JSQuAD

JSQUAD_CASES = 100


def jsquad(
    shared: Path, size: int | None = None, *, input: Path | None = None, context: str | None = None
) -> Converted:
    """JSQuAD v1.3 validation: every paragraph of every article; the first question of spread paragraphs.
    ``input``: another file of the SQuAD format; ``context``: the corpus name (default ``jsquad``)."""
    data = _read_json(input or shared / "eval-data/jsquad/valid-v1.3.json")["data"]
    context = context or "jsquad"
    paragraphs: list[Paragraph] = []
    questions: list[tuple[Paragraph, Json]] = []
    for article in data:
        for number, item in enumerate(article["paragraphs"]):
            _, _, text = item["context"].partition(" [SEP] ")
            title = article["title"].replace("_", " ")
            paragraph = Paragraph(context, article["title"], number, text, title=title)
            paragraphs.append(paragraph)
            questions.append((paragraph, item["qas"][0]))
    index = MentionIndex([p.text for p in paragraphs])
    titles = sorted({p.name for p in paragraphs}, key=lambda t: (-len(t), t))
    cases = []
    answers = []
    for paragraph, qa in _spread(questions, size or JSQUAD_CASES):
        answer = qa["answers"][0]["text"]
        if (line := _answers(qa["id"], [a["text"] for a in qa["answers"]])) is not None:
            answers.append(line)
        cues = index.specific(question_entities(qa["question"], titles), keep=titles)
        case: Json = {
            "case_id": qa["id"],
            "query": qa["question"].strip(),
            "cues": cues,
            "expected_sources": [_source(paragraph.source, paragraph.paragraph)],
            "expected_citations": [{"source": paragraph.source, "paragraph": paragraph.paragraph}],
        }
        if answer.strip() and answer in paragraph.text:
            case["expected_citations"][0]["quote"] = answer.strip()
        cases.append(case)
    return Converted(
        "jsquad", f"jsquad-v1.3-valid-{len(cases)}", paragraphs, cases, source_note=JSQUAD_NOTE, answers=answers
    )


# ---------------------------------------------------------------- LoCoMo

LOCOMO_PER_CONVERSATION = 5
_TURN = re.compile(r"D:?(\d+):(\d+)")


def locomo(
    shared: Path, size: int | None = None, *, input: Path | None = None, context: str | None = None
) -> Converted:
    """LoCoMo: turns as paragraphs per session, observations as facts, session summaries as communities.
    ``input``: another file of the format; every conversation is its own context (its
    ``sample_id``), so ``context`` is refused."""
    if context is not None:
        raise ValueError("locomo names one context per conversation (its sample_id); context cannot be set")
    data = _read_json(input or shared / "eval-data/locomo/locomo10.json")
    corpus: list[Paragraph] = []
    facts: list[Fact] = []
    summaries: list[Summary] = []
    cases: list[Json] = []
    answers: list[Json] = []
    contexts: dict[str, str] = {}
    for conversation in data:
        context = conversation["sample_id"]
        dialogue = conversation["conversation"]
        turns: dict[str, Paragraph] = {}
        sessions = sorted(
            (int(m.group(1)), key) for key in dialogue if (m := re.fullmatch(r"session_(\d+)", key)) and dialogue[key]
        )
        for number, key in sessions:
            source = f"{context}/session_{number}"
            section = f"session {number}, {dialogue.get(f'{key}_date_time', '')}".strip(", ")
            speakers: dict[str, int] = {}
            for index, turn in enumerate(dialogue[key]):
                text = f"{turn['speaker']}: {turn['text']}"
                if turn.get("blip_caption"):
                    text += f" [shares a photo: {turn['blip_caption']}]"
                paragraph = Paragraph(context, source, index, text, section=section, locator=("dia_id", turn["dia_id"]))
                corpus.append(paragraph)
                turns[turn["dia_id"]] = paragraph
                speakers[turn["speaker"]] = speakers.get(turn["speaker"], 0) + 1
            summary = conversation["session_summary"].get(f"{key}_summary")
            if summary:
                members = tuple((name, float(count)) for name, count in sorted(speakers.items()))
                summaries.append(Summary(context, f"{context}/S{number}", summary, 0, 0, members))

        seen: dict[tuple[str, str], int] = {}

        def resolve(evidence: Iterable[str], turns: dict[str, Paragraph] = turns) -> list[Paragraph]:
            found = []
            for item in evidence:
                for m in _TURN.finditer(item):
                    paragraph = turns.get(f"D{int(m.group(1))}:{int(m.group(2))}")
                    if paragraph is not None and paragraph not in found:
                        found.append(paragraph)
            return found

        for key in sorted(conversation["observation"], key=lambda k: int(re.findall(r"\d+", k)[0])):
            for speaker, items in conversation["observation"][key].items():
                for text, evidence in items:
                    refs = resolve(evidence if isinstance(evidence, list) else [evidence])
                    ids = ",".join(ref.locator[1] for ref in refs if ref.locator) or "unattributed"
                    label = f"observation {ids}"
                    seen[(speaker, label)] = seen.get((speaker, label), 0) + 1
                    if seen[(speaker, label)] > 1:
                        label += f" #{seen[(speaker, label)]}"
                    found: list[Paragraph | None] = [*refs]
                    for ref in found or [None]:
                        facts.append(
                            Fact(
                                context,
                                speaker,
                                label,
                                text,
                                1.0,
                                ref.source if ref else None,
                                ref.paragraph if ref else None,
                            )
                        )
        eligible = []
        for index, qa in enumerate(conversation["qa"]):
            gold = resolve(qa.get("evidence") or [])
            if qa["category"] in (1, 2, 3, 4) and gold and str(qa["question"]).strip():
                eligible.append((index, qa, gold))
        for index, qa, gold in _spread(eligible, size // len(data) if size else LOCOMO_PER_CONVERSATION):
            case_id = f"{context}/q{index:03d}"
            contexts[case_id] = context
            if (line := _answers(case_id, [qa.get("answer")])) is not None:
                answers.append(line)
            cases.append(
                {
                    "case_id": case_id,
                    "query": qa["question"].strip(),
                    "cues": question_entities(qa["question"]),
                    "expected_sources": [_source(p.source, p.paragraph) for p in gold],
                    "expected_citations": [{"source": p.source, "paragraph": p.paragraph} for p in gold],
                }
            )
    return Converted(
        "locomo",
        f"locomo10-{len(cases)}",
        corpus,
        cases,
        facts,
        summaries,
        contexts,
        source_note=LOCOMO_NOTE,
        answers=answers,
    )


# ---------------------------------------------------------------- brewery (Taguru ADR 0001)

BREWERY_FILES = ("output_limit", "negation", "aliases", "short", "table_noisy")
BREWERY_TRIPLES = ("output_limit", "negation", "short")
Triple = tuple[str, str, str]

# Taguru tests/qa_recall.rs (transcribed in shared/spec/evaluate.md Appendix C.4): question, cues, needed triples.
BREWERY_QA: list[tuple[str, list[str], list[Triple]]] = [
    ("青嶺酒造の代表銘柄は?", ["青嶺酒造", "代表銘柄"], [("青嶺酒造", "代表銘柄", "青嶺")]),
    ("青嶺はどんな酒?", ["青嶺"], [("青嶺", "分類", "辛口の純米酒")]),
    ("杜氏は誰で、経験は?", ["青嶺酒造", "杜氏"], [("青嶺酒造", "杜氏", "高瀬"), ("高瀬", "経験年数", "30年以上")]),
    (
        "金賞の要因になった水は? 何が受賞した?",
        ["金賞"],
        [("金賞", "要因", "雲居山の伏流水"), ("青嶺", "受賞する", "金賞")],
    ),
    ("大量生産はしている?", ["青嶺酒造", "大量生産"], [("青嶺酒造", "行う", "大量生産")]),
    ("仕込み水は?", ["青嶺酒造", "仕込み水"], [("青嶺酒造", "仕込み水", "雲居山の伏流水")]),
    (
        "祭りでふるまわれる新酒の仕込み水は?",
        ["蔵開きの祭り"],
        [("蔵開きの祭り", "ふるまう", "新酒"), ("新酒", "仕込み水", "雲居山の伏流水")],
    ),
    ("青嶺酒蔵の銘柄は?", ["青嶺酒蔵"], [("青嶺酒造", "代表銘柄", "青嶺")]),
    ("１９０７年に何が?", ["１９０７年"], [("青嶺酒造", "創業年", "1907年")]),
    ("設立はいつ?", ["青嶺酒造", "設立年"], [("青嶺酒造", "創業年", "1907年")]),
    ("Aomine Brewery の所在地は?", ["Aomine Brewery"], [("青嶺酒造", "所在地", "霧沢町")]),
]

# Written for this project from the golden triples (and, for the last four, the two corpus files
# without triples): question, cues, needed triples, extra gold paragraphs.
BREWERY_WRITTEN: list[tuple[str, list[str], list[Triple], list[tuple[str, int]]]] = [
    ("月白屋の店主は誰か。", ["月白屋"], [("月白屋", "店主", "七海")], []),
    (
        "青嶺酒造の直営店はどこにあるか。",
        ["青嶺酒造"],
        [("青嶺酒造", "直営店", "月白屋"), ("月白屋", "所在地", "霧沢町の駅前")],
        [],
    ),
    (
        "月白屋の試飲会はどのくらいの頻度で開かれるか。",
        ["月白屋", "試飲会"],
        [("月白屋", "開く", "試飲会"), ("試飲会", "開催頻度", "毎月")],
        [],
    ),
    (
        "限定酒「青嶺 雫」はどんな酒で、いつ発売されるか。",
        ["青嶺 雫"],
        [("青嶺 雫", "分類", "斗瓶取りの大吟醸"), ("青嶺 雫", "発売時期", "毎年冬")],
        [],
    ),
    ("青嶺 雫は何本出荷されるか。", ["青嶺 雫"], [("青嶺 雫", "出荷数", "300本")], []),
    ("青嶺の輸出先はどこか。", ["青嶺"], [("青嶺", "輸出先", "台湾"), ("青嶺", "輸出先", "フランス")], []),
    ("海外向けの輸出は月白屋を通すか。", ["海外向けの輸出"], [("海外向けの輸出", "通す", "月白屋")], []),
    ("海外向けのラベルは何語で表記されるか。", ["海外向けのラベル"], [("海外向けのラベル", "表記", "英語表記")], []),
    ("青嶺酒造はどこと共同研究を行っているか。", ["青嶺酒造", "共同研究"], [("青嶺酒造", "共同研究", "雲居大学")], []),
    (
        "共同研究はいつ始まり、目的は何か。",
        ["共同研究"],
        [("共同研究", "開始年", "2019年"), ("共同研究", "目的", "新酵母の開発")],
        [],
    ),
    ("新酵母は何を高めるとされるか。", ["新酵母"], [("新酵母", "高める", "吟醸香")], []),
    ("六代目当主は造りに口を出すか。", ["六代目当主"], [("六代目当主", "口を出す", "造り")], []),
    (
        "六代目当主は何を担っているか。",
        ["六代目当主"],
        [("六代目当主", "担う", "経営"), ("六代目当主", "担う", "販売")],
        [],
    ),
    (
        "蔵人はいつ、どこに住み込むか。",
        ["蔵人"],
        [("蔵人", "住み込む場所", "蔵"), ("蔵人", "住み込む期間", "冬の仕込み期間")],
        [],
    ),
    (
        "麹造りは誰が監督し、誰が手作業で行うか。",
        ["麹造り"],
        [("高瀬", "監督する", "麹造り"), ("蔵人", "手作業で行う", "麹造り")],
        [],
    ),
    (
        "青嶺酒造はどの県にあるか。",
        ["青嶺酒造", "霧沢町"],
        [("青嶺酒造", "所在地", "霧沢町"), ("霧沢町", "所在する県", "雲居県")],
        [],
    ),
    ("山田錦の精米歩合は何パーセントか。", ["山田錦"], [("山田錦", "精米歩合", "50パーセント")], []),
    ("金賞を授与したのはどこか。", ["金賞"], [("金賞", "授与元", "全国新酒鑑評会")], []),
    (
        "蔵開きの祭りはいつ開かれるか。",
        ["蔵開きの祭り"],
        [("青嶺酒造", "開く", "蔵開きの祭り"), ("蔵開きの祭り", "開催時期", "毎年春")],
        [],
    ),
    ("霧沢町は何に力を入れているか。", ["霧沢町"], [("霧沢町", "力を入れる", "酒蔵観光")], []),
    ("高瀬はどこの出身か。", ["高瀬"], [("高瀬", "出身", "南部杜氏")], []),
    ("青嶺はどこに出荷されているか。", ["青嶺"], [("青嶺", "出荷先", "全国")], []),
    ("月白屋は何を扱っているか。", ["月白屋"], [("月白屋", "扱う", "青嶺の全銘柄"), ("月白屋", "扱う", "青嶺 雫")], []),
    ("青嶺酒造の業種は何か。", ["青嶺酒造"], [("青嶺酒造", "業種", "日本酒の蔵元")], []),
    ("蔵人たちから親方と呼ばれているのは誰か。", ["親方"], [], [("corpus/aliases.md", 0)]),
    ("高橋商店は青嶺の造りに関与しているか。", ["高橋商店"], [], [("corpus/aliases.md", 1)]),
    ("青嶺 純米酒の日本酒度と酸度はいくつか。", ["青嶺"], [], [("corpus/table_noisy.md", 1)]),
    ("青嶺 純米酒の使用酵母は何か。", ["青嶺"], [], [("corpus/table_noisy.md", 1)]),
]


def brewery(
    shared: Path, size: int | None = None, *, input: Path | None = None, context: str | None = None
) -> Converted:
    """The ADR 0001 brewery corpora with golden triples; Taguru's QA questions plus questions written here.
    ``input``: another ADR folder of the layout (``corpus/*.md``, ``golden/*.json``); ``context``:
    the corpus name (default ``brewery``)."""
    adr = input or shared / "taguru-data/adr/0001"
    context = context or "brewery"
    corpus = [
        Paragraph(context, f"corpus/{stem}.md", number, text)
        for stem in BREWERY_FILES
        for number, text in enumerate(split_paragraphs((adr / "corpus" / f"{stem}.md").read_text("utf-8")))
    ]
    facts = [
        Fact(
            context,
            t["subject"],
            t["label"],
            t["object"],
            1.0 if t["polarity"] == "positive" else -1.0,
            f"corpus/{stem}.md",
            t["paragraph"],
        )
        for stem in BREWERY_TRIPLES
        for t in _read_json(adr / "golden" / f"{stem}.json")["triples"]
    ]
    where: dict[Triple, list[tuple[str, int]]] = {}
    for fact in facts:
        assert fact.source is not None and fact.paragraph is not None
        spots = where.setdefault((fact.subject, fact.label, fact.object), [])
        if (fact.source, fact.paragraph) not in spots:
            spots.append((fact.source, fact.paragraph))

    def case(case_id: str, query: str, cues: list[str], needed: list[Triple], extra: list[tuple[str, int]]) -> Json:
        spots = list(dict.fromkeys([*(spot for triple in needed for spot in where[triple]), *extra]))
        primary = [s for s in spots if s[0] == "corpus/output_limit.md" or s in extra]
        entry: Json = {
            "case_id": case_id,
            "query": query,
            "cues": cues,
            "expected_sources": [_source(s, p, 2 if (s, p) in primary else 1) for s, p in spots],
        }
        if needed:
            entry["expected_associations"] = [{"subject": s, "label": la, "object": o} for s, la, o in needed]
        entry["expected_citations"] = [{"source": s, "paragraph": p} for s, p in spots]
        return entry

    cases = [case(f"qa-{i:02d}", q, cues, needed, []) for i, (q, cues, needed) in enumerate(BREWERY_QA, start=1)]
    cases += [
        case(f"written-{i:02d}", q, cues, needed, extra)
        for i, (q, cues, needed, extra) in enumerate(BREWERY_WRITTEN, start=1)
    ]
    return Converted("brewery", "brewery-adr0001", corpus, cases, facts, source_note=BREWERY_NOTE)


class Converter(Protocol):
    """A set's converter: the raw folder, the number of cases, and optionally another input and context."""

    def __call__(
        self, shared: Path, size: int | None = None, *, input: Path | None = None, context: str | None = None
    ) -> Converted: ...


SETS: dict[str, Converter] = {
    "brewery": brewery,
    "hotpotqa": hotpotqa,
    "jsquad": jsquad,
    "locomo": locomo,
}


def convert(
    name: str,
    shared: Path = SHARED,
    size: int | None = None,
    *,
    input: Path | None = None,
    context: str | None = None,
) -> Converted:
    """Read one raw set from ``shared`` and convert it (``size``: number of cases, default the committed one).

    ``input`` is any input file (folder, for ``brewery``) of the set's format in place of the
    shipped one; ``context`` renames its corpus context."""
    return SETS[name](shared, size, input=input, context=context)


# ---------------------------------------------------------------- writing


def _write(path: Path, lines: Iterable[str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")


def _paragraph_json(p: Paragraph) -> Json:
    out: Json = {"context": p.context, "source": p.source, "paragraph": p.paragraph, "text": p.text}
    if p.title is not None:
        out["title"] = p.title
    if p.section is not None:
        out["section"] = p.section
    if p.locator is not None:
        out["locator"] = {"kind": p.locator[0], "value": p.locator[1]}
    return out


def write_inputs(converted: Converted, work: Path) -> dict[str, Path]:
    """The retrieval inputs of ``assembler lanes build`` (docs/retrieval.md) under ``work``."""
    paths = {"corpus": work / "corpus.jsonl"}
    _write(paths["corpus"], (_dump(_paragraph_json(p)) for p in converted.corpus))
    if converted.facts:
        paths["triples"] = work / "triples.jsonl"
        _write(
            paths["triples"],
            (
                _dump({k: v for k, v in vars(f).items() if v is not None and not (k == "weight" and v == 1.0)})
                for f in converted.facts
            ),
        )
    if converted.summaries:
        paths["summaries"] = work / "summaries.jsonl"
        _write(
            paths["summaries"],
            (
                _dump(
                    {
                        "context": s.context,
                        "community": s.community,
                        "text": s.text,
                        "paragraph": s.paragraph,
                        "level": s.level,
                        "members": [{"name": n, "strength": v} for n, v in s.members],
                    }
                )
                for s in converted.summaries
            ),
        )
    if converted.contexts:
        paths["contexts"] = work / "contexts.jsonl"
        _write(paths["contexts"], (_dump({"case_id": c, "context": x}) for c, x in converted.contexts.items()))
    return paths


def write_outputs(converted: Converted, out: Path) -> dict[str, Path]:
    """``eval.jsonl``, ``sources.jsonl``, ``citations.jsonl``, ``SOURCE.md`` and, for a set with
    gold answers, ``answers.jsonl`` under ``out``."""
    paths = {name: out / name for name in ("eval.jsonl", "sources.jsonl", "citations.jsonl", "SOURCE.md")}
    _write(paths["eval.jsonl"], [_dump({"taguru_eval": 1, "name": converted.title}), *map(_dump, converted.cases)])
    if converted.answers:
        paths["answers.jsonl"] = out / "answers.jsonl"
        _write(paths["answers.jsonl"], map(_dump, converted.answers))
    counts: dict[tuple[str, str], int] = {}
    for p in converted.corpus:
        counts[(p.context, p.source)] = counts.get((p.context, p.source), 0) + 1
    _write(
        paths["sources.jsonl"],
        (_dump({"context": c, "source": s, "paragraphs": n}) for (c, s), n in sorted(counts.items())),
    )
    by_key = {(p.source, p.paragraph): p for p in converted.corpus}
    wanted = sorted({(c["source"], c["paragraph"]) for case in converted.cases for c in case["expected_citations"]})
    _write(
        paths["citations.jsonl"],
        (
            _dump(
                {
                    "context": by_key[key].context,
                    "source": key[0],
                    "paragraph": key[1],
                    "citation": {
                        "text": by_key[key].text,
                        "source": key[0],
                        "section": by_key[key].section,
                        "locator": {"kind": by_key[key].locator[0], "value": by_key[key].locator[1]}  # type: ignore[index]
                        if by_key[key].locator
                        else None,
                    },
                }
            )
            for key in wanted
        ),
    )
    stats = {
        "cases": len(converted.cases),
        "paragraphs": len(converted.corpus),
        "sources": len(counts),
        "contexts": len({p.context for p in converted.corpus}),
        "facts": len(converted.facts),
        "summaries": len(converted.summaries),
        "regenerate": REGENERATE,
        "per_context": len(converted.cases) // max(1, len({p.context for p in converted.corpus})),
        "answered": len(converted.answers),
    }
    _write(paths["SOURCE.md"], [converted.source_note.strip().format(**stats)])
    return paths


def build(
    names: Sequence[str],
    shared: Path,
    out: Path,
    work: Path,
    *,
    lanes: bool,
    cache_dir: Path | None,
    size: int | None = None,
    input: Path | None = None,
    context: str | None = None,
) -> None:
    """Convert, write, and (with ``lanes``) build the lane dumps of the named sets (``input`` and
    ``context``: see :func:`convert`; with one set only)."""
    for name in names:
        started = time.perf_counter()
        converted = convert(name, shared, size, input=input, context=context)
        inputs = write_inputs(converted, work / name)
        outputs = write_outputs(converted, out / name)
        line = f"{name}: {counted(len(converted.cases), 'case')}, {counted(len(converted.corpus), 'paragraph')}"
        if lanes:
            from assembler.retrieval.build import build_file

            build_file(
                inputs["corpus"],
                outputs["eval.jsonl"],
                out / name / "lanes.jsonl",
                triples=inputs.get("triples"),
                summaries=inputs.get("summaries"),
                contexts=inputs.get("contexts"),
                context=context or name,
                cache_dir=cache_dir,
                progress=True,
            )
            line += ", lanes built"
        print(f"{line} ({time.perf_counter() - started:.1f} s)", file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m assembler.retrieval.datasets --all`` (or ``--set NAME``...)."""
    parser = argparse.ArgumentParser(prog="python -m assembler.retrieval.datasets", description=__doc__.split("\n")[0])
    parser.add_argument("--all", action="store_true", help="every set: " + ", ".join(SETS))
    parser.add_argument("--set", action="append", choices=sorted(SETS), default=[], help="one set (repeatable)")
    parser.add_argument("--shared", type=Path, default=SHARED, help="the shared/ folder (default ../shared)")
    parser.add_argument("--out", type=Path, default=ROOT / "data" / "eval", help="committed outputs (data/eval)")
    parser.add_argument("--work", type=Path, default=ROOT / "build" / "eval", help="retrieval inputs (build/eval)")
    parser.add_argument("--cache-dir", type=Path, default=ROOT / "build" / "vectors", help="vector cache")
    parser.add_argument("--no-lanes", action="store_true", help="convert only; do not build lane dumps")
    parser.add_argument(
        "--cases",
        type=int,
        help="cases per set instead of the committed sizes (hotpotqa 100, jsquad 100, locomo 50; at most "
        "200, 1145, 1 500): for full runs, with --out outside data/",
    )
    parser.add_argument(
        "--input",
        type=Path,
        help="with one --set: convert this file of the set's format (brewery: an ADR folder) instead of the "
        "shipped one, e.g. a 2WikiMultihopQA or MuSiQue export for hotpotqa; write with --out outside data/",
    )
    parser.add_argument("--context", help="with one --set: the corpus context name (default the set's name)")
    args = parser.parse_args(argv)
    names = list(SETS) if args.all else list(dict.fromkeys(args.set))
    if not names:
        parser.error("name a set with --set NAME, or use --all")
    if (args.input is not None or args.context is not None) and len(names) != 1:
        parser.error("--input and --context need exactly one --set")
    if args.context is not None and names == ["locomo"]:
        parser.error("--context: locomo names one context per conversation (its sample_id)")
    try:
        build(
            names,
            args.shared,
            args.out,
            args.work,
            lanes=not args.no_lanes,
            cache_dir=args.cache_dir,
            size=args.cases,
            input=args.input,
            context=args.context,
        )
    except FileNotFoundError as exc:  # raised while reading, before any file of that set is written
        print(
            f"datasets: error: missing input {exc.filename} (the raw data sets under --shared); "
            "that set was not written",
            file=sys.stderr,
        )
        return 2
    except UsageError as exc:  # a raw file the strict JSON reader refuses
        print(f"datasets: error: {exc}", file=sys.stderr)
        return 2
    except ImportError as exc:
        print(
            f"datasets: error: {exc.name} is needed to build lanes: pip install 'assembler[retrieval]'", file=sys.stderr
        )
        return 2
    return 0


HOTPOTQA_NOTE = """
# HotpotQA (distractor, hard: {cases} of 200 questions)

## Origin and licence

`../shared/eval-data/hotpotqa/hotpot.jsonl`: 200 hard HotpotQA questions in the distractor
format (very likely the dev split), as redistributed by github AdelWang/MIGRES @ 1de6265
(`data/hotpot.json`). HotpotQA (Yang et al., 2018) is licensed **CC BY-SA 4.0**; these derived
files are under the same licence. The third-party field `reranked_ret_res` is ignored.

## What was derived, and how

* **Corpus** (one context, `hotpotqa`): every context paragraph of the 200 questions, pooled and
  de-duplicated by title: {paragraphs} paragraphs, {sources} sources. Source = the Wikipedia title,
  paragraph = 0 (each is the first paragraph of its article), text = its sentences joined
  verbatim; the title is indexed with the text. Every question is searched against the whole pool
  (harder than the per-question distractor setting).
* **Cases** ({cases}, `case_id` = HotpotQA `_id`): question `floor(j * 200 / {cases})` of the file
  for j = 0..{cases}-1 (the committed set is cut to keep the files small; `--cases 200` gives them
  all, see below). `query` = the question; `cues` = the named
  entities found in the question (capitalized runs and quoted titles) that are mentioned in 1 to
  max(3, 1 %) of the paragraphs or are a title; `expected_sources` = the supporting-fact titles
  (paragraph 0, relevance 1); `expected_citations` = one per supporting sentence, with the
  sentence as `quote` (sentence-level gold).
* **Lanes** (`lanes.jsonl`, built by `assembler lanes build`, see docs/retrieval.md): BM25 (word
  tokens) + multilingual-e5-small passages fused by RRF, 10 per query; the entity-mention graph
  lane (no triples in this data): (title, `mentions`, cue) for each of the top 20 fused paragraphs
  that mention a cue, at most 20; citations for every attribution.
* `sources.jsonl` = the corpus source list (preflight, `sources_count`); `citations.jsonl` = the
  text of every `expected_citations` locator (the citation lane offline).
* `answers.jsonl` = the gold answer of {answered} of the {cases} cases (`evaluate --answers`:
  answer-in-context); the yes/no answers of comparison questions are left out (not spans), so
  those cases have no answer-in-context score.

## Regenerate

`{regenerate}` (from the repository root, with the `retrieval` extra; reads `../shared`).

More cases for a full run, outside the committed tree:
`python -m assembler.retrieval.datasets --set <name> --cases N --out build/eval-full`.
"""

JSQUAD_NOTE = """
# JSQuAD v1.3 validation (Japanese, {cases} questions)

## Origin and licence

`../shared/eval-data/jsquad/valid-v1.3.json`: JSQuAD v1.3 validation split (JGLUE, Yahoo Japan),
github yahoojapan/JGLUE @ 6f071c0, `datasets/jsquad-v1.3/valid-v1.3.json`. Licence **CC BY-SA
4.0** (the LICENSE beside the raw file); these derived files are under the same licence.

## What was derived, and how

* **Corpus** (one context, `jsquad`): every paragraph of every article of the split:
  {paragraphs} paragraphs in {sources} sources. Source = the article title, paragraph = its 0-based
  position in the article, text = the context after `title [SEP] `; the title (underscores as
  spaces) is indexed with the text.
* **Cases** ({cases}, a subset to keep the files small): the first question of paragraph
  `floor(j * 1145 / {cases})` in file order, j = 0..{cases}-1, spread over all articles. `case_id` = the
  JSQuAD question id; `cues` = entities found in the question (article titles, quoted spans,
  katakana runs and kanji compounds of 3+ characters, Latin runs) mentioned in 1 to max(3, 1 %) of the paragraphs or
  being a title; `expected_sources` = the question's own paragraph; `expected_citations` = that
  paragraph with the first gold answer as `quote`.
* **Lanes**: BM25 over character bigrams + multilingual-e5-small, fused by RRF, 10 per query; the
  entity-mention graph lane: (title, `mentions`, cue) for each of the top 20 fused paragraphs that
  mention a cue, at most 20; citations for every attribution.
* `sources.jsonl` = the source list; `citations.jsonl` = the text of every expected citation.
* `answers.jsonl` = every distinct gold answer of each question ({answered} cases; `evaluate
  --answers`: answer-in-context).

## Regenerate

`{regenerate}` (from the repository root, with the `retrieval` extra; reads `../shared`).

More cases for a full run, outside the committed tree:
`python -m assembler.retrieval.datasets --set <name> --cases N --out build/eval-full`.
"""

LOCOMO_NOTE = """
# LoCoMo (10 conversations, {cases} questions) — NON-COMMERCIAL

## Origin and licence

`../shared/eval-data/locomo/locomo10.json`: LoCoMo (Maharana et al., 2024), github
snap-research/LoCoMo @ 3eb6f2c, `data/locomo10.json`. Licence **CC BY-NC 4.0: non-commercial use
only**. These derived files carry the same restriction. They live under `data/`, which is not
part of the package wheel; never ship them in anything published as part of the package.
Observations and session summaries are model-generated; the QA evidence labels are human-annotated.

## What was derived, and how

* **Corpus**: one context per conversation (`conv-26` ...; {contexts} contexts), {paragraphs}
  dialogue turns as paragraphs. Source = `<conversation>/session_<n>` ({sources} sessions),
  paragraph = the turn's 0-based position in the session, text = `speaker: text` plus
  `[shares a photo: <caption>]` when the turn shared an image; section = `session <n>, <date>`;
  locator = `{{"kind": "dia_id", "value": "D<n>:<k>"}}`.
* **Facts** ({facts} assertions): each observation is a triple (speaker, `observation <dia_ids>`,
  sentence) attributed to the turn(s) it cites (`#2`, `#3` appended when one speaker has several
  observations on the same turns). The label names the turns so that no two observations share
  (subject, label): the contract would otherwise treat all of a speaker's observations as one
  contradiction group. The graph lane activates from the speakers named in the question.
* **Communities** ({summaries}): each session summary is a community `<conversation>/S<n>`
  (members = the speakers, strength = their turn counts); requests set `include_communities`.
* **Cases** ({cases}): per conversation, the questions of categories 1-4 (adversarial category 5
  left out) with at least one evidence id that names an existing turn, {per_context} spread evenly
  in file order (a subset to keep the files small). `case_id` = `<conversation>/q<index in the
  file>`; `cues` = names found in the question; `expected_sources` and `expected_citations` =
  the evidence turns. Evidence ids are parsed leniently (`D8:6; D9:17`, `D:11:26`, `D30:05`);
  ids naming no turn are dropped. `build/eval/locomo/contexts.jsonl` maps each case to its
  conversation.
* **Lanes**: BM25 (word tokens) + multilingual-e5-small, fused by RRF, 10 passages per query
  within the conversation; observation graph (at most 20); up to 5 session summaries; citations.
* `answers.jsonl` = the gold answer of each question ({answered} cases; numbers written as text;
  `evaluate --answers`: answer-in-context). Many are free-form (category 3 inferences), which a
  substring test rarely finds even when the evidence is served.

## Regenerate

`{regenerate}` (from the repository root, with the `retrieval` extra; reads `../shared`).

More cases for a full run, outside the committed tree:
`python -m assembler.retrieval.datasets --set <name> --cases N --out build/eval-full`.
"""

BREWERY_NOTE = """
# Brewery (Taguru ADR 0001, Japanese, real graph lane)

## Origin and licence

`../shared/taguru-data/adr/0001/`: the public Taguru project (github t0k0sh1/taguru, **MIT**):
six short Japanese texts about the fictional brewery 青嶺酒造 and golden triples per text.

## What was derived, and how

* **Corpus** (one context, `brewery`): `corpus/{{output_limit,negation,aliases,short,table_noisy}}.md`
  split into blank-line paragraphs: {paragraphs} paragraphs, {sources} sources.
  `long_dense.md` is left out: its five paragraphs are byte-identical to paragraphs 0-4 of
  `output_limit.md`, and keeping both would make every gold paragraph ambiguous.
* **Facts** ({facts} assertions): the golden triples of `output_limit`, `negation` and `short`;
  weight +1 (positive) or -1 (negative polarity), attributed to (file, paragraph).
* **Cases** ({cases}): `qa-01`..`qa-11` are the 11 questions of Taguru's `tests/qa_recall.rs`
  (question, cues, needed triples, as transcribed in `shared/spec/evaluate.md` Appendix C.4;
  their `第N段落` sources are mapped to `output_limit.md` paragraph N-1). **`written-01`..`written-28`
  were written for this project from the golden triples** (the last four from `aliases.md` and
  `table_noisy.md`, which have none). `expected_associations` = the needed triples;
  `expected_sources` and `expected_citations` = every paragraph asserting a needed triple
  (relevance 2 in `output_limit.md` or a paragraph named directly, 1 for a corroborating file).
  The label alias 設立年 and the concept alias `Aomine Brewery` of the Taguru test are not
  modelled, so those cases have no anchor.
* **Lanes**: BM25 over character bigrams + multilingual-e5-small, fused by RRF, 10 per query;
  graph activation from the cues (resolved by normalized name, else bigram Dice >= 0.6), at most 20;
  citations for every attribution.

## Regenerate

`{regenerate}` (from the repository root, with the `retrieval` extra; reads `../shared`).
"""

if __name__ == "__main__":
    sys.exit(main())
