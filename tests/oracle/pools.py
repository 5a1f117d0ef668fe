"""Deterministic synthetic lane-dump records for tests and benchmarks.

``generate_records(n, seed=..., profile=...)`` uses ``random.Random(seed)`` only
(no network, no data sets). Every record follows docs/lane-dump.md: a unique
``query_id``, a ``context``, a ``request`` with ``origins`` and the ``lanes``
object; citations are only emitted for locators whose paragraph text was
generated.
"""

from __future__ import annotations

import json
import random
import struct
from collections.abc import Iterable, Iterator
from typing import Any

Json = Any
Locator = tuple[str, int]

PROFILES = ("typical", "worst")


def _words(text: str) -> tuple[str, ...]:
    """Whitespace-separated vocabulary."""
    return tuple(text.split())


EN_NOUNS = _words(
    "brewery river harvest cellar village festival market archive temple "
    "harbor orchard railway library workshop garden bridge valley council "
    "ledger furnace vineyard mill lantern storm merchant scholar engineer "
    "committee museum county canal forest ferry granary school chapel "
    "quarry tannery press theatre lighthouse foundry estate dairy kiln "
    "warehouse monastery observatory cooperative"
)
EN_ADJECTIVES = _words(
    "old northern quiet famous small coastal rebuilt seasonal private "
    "public wooden modern remote busy ancient local eastern flooded "
    "prosperous forgotten crowded narrow royal humble"
)
EN_VERBS = _words(
    "supplies records borders replaced funded describes hosts inspired "
    "connects manages restored documents serves follows acquired taxed "
    "photographed mapped abandoned expanded licensed criticized praised "
    "outlived rivaled absorbed"
)
EN_UNITS = ("barrels", "tons", "households", "visitors", "acres", "pages", "workers")
EN_TAILS = (
    "in the spring of each year",
    "according to the parish records",
    "after the great flood",
    "since the end of the war",
    "despite repeated objections",
    "for nearly two centuries",
    "under the supervision of the guild",
    "with the help of volunteers",
    "as noted in later surveys",
    "without any public announcement",
)
JA_NOUNS = _words(
    "酒蔵 杜氏 米 水源 町役場 祭り 市場 資料館 神社 港 果樹園 "
    "鉄道 図書館 工房 庭園 橋 谷 議会 帳簿 炉 葡萄畑 製粉所 "
    "灯籠 嵐 商人 学者 技師 委員会 博物館 運河"
)
JA_PREDICATES = _words(
    "を管理している について記録している に隣接している を再建した "
    "に資金を提供した を説明している を毎年開催している に影響を与えた "
    "とつながっている を修復した"
)
JA_PREFIXES = _words("古い 北部の 静かな 有名な 小さな 海沿いの 地元の 新しい 遠くの")
JA_TAILS = _words(
    "と伝えられている。 と記録にある。 ことが知られている。 という説もある。 と後の調査で確認された。 とされる。"
)
EN_ENTITIES = (
    "Aoba Brewery",
    "Kiri River",
    "Takase",
    "North Mill",
    "Harbor Council",
    "Old Archive",
    "Mori Family",
    "East Canal",
    "Lantern Guild",
    "Sato Works",
    "Valley Museum",
    "Ueda",
)
JA_ENTITIES = (
    "青嶺酒造",
    "雲居県",
    "霧沢町",
    "高瀬",
    "北製粉所",
    "港湾議会",
    "旧資料館",
    "森家",
    "東運河",
    "灯籠組合",
    "佐藤工房",
    "谷博物館",
    "上田",
)
LABELS = (
    "is_a",
    "located_in",
    "founded_by",
    "produces",
    "杜氏",
    "part_of",
    "owned_by",
    "所在地",
    "supplies",
    "successor_of",
    "employs",
    "創業者",
)
CONTEXTS = ("sake", "harbor-docs", "archive", "酒蔵資料")
SOURCE_STEMS = _words(
    "docs/kura docs/harbor notes/mill records/1890 records/1921 wiki/canal "
    "docs/festival letters/ueda survey/valley docs/guild 資料/酒蔵 資料/港"
)
HIRAGANA = "あいうえおかきくけこさしすせそたちつてとなにぬねのはひふへほまみむめもやゆよらりるれろわをん"
LOWERCASE = "abcdefghijklmnopqrstuvwxyz"


def _f32(x: float) -> float:
    """Round to the nearest f32 value (kept as a Python float)."""
    value: float = struct.unpack("<f", struct.pack("<f", x))[0]
    return value


def _english_sentence(rng: random.Random) -> str:
    subject = f"The {rng.choice(EN_ADJECTIVES)} {rng.choice(EN_NOUNS)}"
    obj = f"the {rng.choice(EN_ADJECTIVES)} {rng.choice(EN_NOUNS)}"
    if rng.random() < 0.3:
        obj += f" of {rng.choice(EN_ENTITIES)}"
    sentence = f"{subject} {rng.choice(EN_VERBS)} {obj} {rng.choice(EN_TAILS)}"
    if rng.random() < 0.3:
        sentence += f" (about {rng.randint(2, 9800)} {rng.choice(EN_UNITS)} in {rng.randint(1700, 2024)})"
    return sentence + "."


def _japanese_sentence(rng: random.Random) -> str:
    subject = rng.choice(JA_PREFIXES) + rng.choice(JA_NOUNS)
    obj = rng.choice(JA_PREFIXES) + rng.choice(JA_NOUNS)
    if rng.random() < 0.3:
        obj = rng.choice(JA_ENTITIES) + "の" + obj
    if rng.random() < 0.3:
        subject = f"{rng.randint(1700, 2024)}年、" + subject
    return f"{subject}は{obj}{rng.choice(JA_PREDICATES)}{rng.choice(JA_TAILS)}"


def make_text(rng: random.Random, lang: str) -> str:
    """A passage-like text of 150 to 600 characters in English or Japanese."""
    target = rng.randint(150, 600)
    parts: list[str] = []
    length = 0
    while length < target:
        sentence = _english_sentence(rng) if lang == "en" else _japanese_sentence(rng)
        parts.append(sentence)
        length += len(sentence) + (1 if lang == "en" else 0)
    text = (" " if lang == "en" else "").join(parts)
    return text[:600]


def mutate(rng: random.Random, text: str) -> str:
    """Copy ``text`` with one or two characters replaced (a planted near-duplicate)."""
    chars = list(text)
    for _ in range(rng.randint(1, 2)):
        pos = rng.randrange(len(chars))
        alphabet = LOWERCASE if ord(chars[pos]) < 128 else HIRAGANA
        replacement = rng.choice(alphabet)
        while replacement == chars[pos]:
            replacement = rng.choice(alphabet)
        chars[pos] = replacement
    return "".join(chars)


class _Record:
    """Builder state for one record: its sources, paragraph texts and language."""

    def __init__(self, rng: random.Random, lang: str) -> None:
        self.rng = rng
        self.lang = lang
        count = rng.randint(3, 6)
        stems = rng.sample(SOURCE_STEMS, count)
        self.sources = [f"{stem}.md" for stem in stems]
        self.texts: dict[Locator, str] = {}

    def text_lang(self) -> str:
        if self.lang == "mixed":
            return self.rng.choice(("en", "ja"))
        return self.lang

    def paragraph_text(self, loc: Locator) -> str:
        if loc not in self.texts:
            self.texts[loc] = make_text(self.rng, self.text_lang())
        return self.texts[loc]

    def entity(self) -> str:
        pool = JA_ENTITIES if self.text_lang() == "ja" else EN_ENTITIES
        return self.rng.choice(pool)

    def attribution(self) -> dict[str, Json]:
        rng = self.rng
        source = rng.choice(self.sources)
        paragraph = None if rng.random() < 0.25 else rng.randint(0, 2)
        locator = None
        if rng.random() < 0.5:
            locator = {"kind": "page", "value": str(rng.randint(1, 40))}
        section = None if rng.random() < 0.7 else rng.choice(("Intro", "History", "沿革"))
        weight = round(rng.uniform(0.05, 3.0), rng.choice((1, 2, 3, 6)))
        if rng.random() < 0.05:
            weight = -weight
        return {
            "source": source,
            "weight": weight,
            "count": rng.randint(1, 4),
            "paragraph": paragraph,
            "section": section,
            "locator": locator,
        }

    def association(self, subject: str, label: str, obj: str) -> dict[str, Json]:
        rng = self.rng
        attributions = [self.attribution() for _ in range(rng.choice((0, 0, 1, 1, 1, 2, 3)))]
        weight = round(rng.uniform(0.1, 2.5), rng.choice((1, 3, 8)))
        return {
            "subject": subject,
            "label": label,
            "object": obj,
            "weight": weight,
            "count": max(1, len(attributions)),
            "attributions": attributions,
        }

    def passage(self, loc: Locator, text: str, rank: int) -> dict[str, Json]:
        rng = self.rng
        shape = rng.random()
        lanes: dict[str, Json] = {}
        if shape < 0.6 or shape >= 0.85:
            lanes["bm25"] = {"rank": rank, "score": _f32(rng.uniform(0.5, 12.0))}
        if shape >= 0.6:
            lanes["vector"] = {"rank": rank, "score": _f32(rng.uniform(0.2, 0.95))}
        return {
            "source": loc[0],
            "paragraph": loc[1],
            "score": _f32(1.0 / (60.0 + rank) + rng.uniform(0.0, 1e-4)),
            "text": text,
            "lanes": lanes,
        }


def _graph_lanes(
    b: _Record, origins: list[str], labels: list[str], activations: int
) -> tuple[list[dict[str, Json]], list[dict[str, Json]]]:
    """Activate list (strength order) and query list (graph page order)."""
    rng = b.rng
    subjects = list(origins) + [b.entity() for _ in range(6)]
    triples: list[tuple[str, str, str]] = []
    seen: set[tuple[str, str, str]] = set()
    while len(triples) < activations:
        if triples and rng.random() < 0.05:
            # (subject, label) collision with a different object: contradiction group.
            subject, label, _ = rng.choice(triples)
        else:
            subject = rng.choice(subjects)
            label = rng.choice(labels) if labels and rng.random() < 0.4 else rng.choice(LABELS)
        triple = (subject, label, b.entity())
        if triple[0] == triple[2] or triple in seen:
            continue
        seen.add(triple)
        triples.append(triple)
    associations = {t: b.association(*t) for t in triples}
    strengths = sorted((round(rng.uniform(0.01, 1.0), 6) for _ in triples), reverse=True)
    activate = [
        {"strength": s, "path": [rng.choice(origins)], "association": associations[t]}
        for s, t in zip(strengths, triples, strict=True)
    ]
    query: list[dict[str, Json]] = []
    if labels:
        wanted = rng.randint(0, 4)
        matching = [t for t in triples if t[0] in origins and t[1] in labels]
        for t in matching[:wanted]:
            query.append(associations[t])  # also present in the activate lane
        while len(query) < wanted:
            t = (rng.choice(origins), rng.choice(labels), b.entity())
            if t[0] != t[2] and t not in seen:
                seen.add(t)
                query.append(b.association(*t))
        query.sort(key=lambda a: (-abs(a["weight"]), a["subject"], a["label"], a["object"]))
    return activate, query


def _passages(b: _Record, count: int, dup_rate: float) -> list[dict[str, Json]]:
    """``count`` hits at distinct locators, some planted near-duplicates of earlier ones."""
    rng = b.rng
    hits: list[dict[str, Json]] = []
    used: set[Locator] = set()
    max_paragraph = max(6, count // len(b.sources) + 3)
    while len(hits) < count:
        loc = (rng.choice(b.sources), rng.randint(0, max_paragraph))
        if loc in used:
            continue
        used.add(loc)
        if hits and rng.random() < dup_rate:
            text = mutate(rng, rng.choice(hits)["text"])
            b.texts[loc] = text
        else:
            text = b.paragraph_text(loc)
        hits.append(b.passage(loc, text, len(hits) + 1))
    return hits


def _communities(b: _Record, count: int) -> list[dict[str, Json]]:
    rng = b.rng
    hits: list[dict[str, Json]] = []
    for rank in range(1, count + 1):
        level = rng.randint(0, 2)
        hit: dict[str, Json] = {
            "community": f"L{level}-{rng.randint(0, 30)}-{rank}",
            "score": _f32(rng.uniform(0.1, 9.0)),
            "text": make_text(rng, b.text_lang()),
            "paragraph": rng.randint(0, 50),
            "level": level,
        }
        if rng.random() < 0.5:
            hit["parent"] = f"L{level + 1}-{rng.randint(0, 9)}"
        hit["concept_count"] = rng.randint(2, 40)
        members = [{"name": b.entity(), "strength": round(rng.uniform(0.0, 1.0), 5)} for _ in range(rng.randint(0, 4))]
        if members:
            hit["members"] = members
        if rng.random() < 0.2:
            hit["members_truncated"] = True
        hits.append(hit)
    return hits


def _budget(rng: random.Random) -> dict[str, Json] | None:
    """Absent (defaults), generous (everything fits), or tight on one axis."""
    roll = rng.random()
    if roll < 0.4:
        return None
    if roll < 0.65:
        return {"max_items": 200, "max_bytes": 1048576, "max_tokens": 50000}
    if roll < 0.75:
        return {"max_items": rng.randint(0, 8)}
    if roll < 0.87:
        return {"max_bytes": rng.randint(800, 8000)}
    return {"max_tokens": rng.randint(150, 2000)}


def _record(rng: random.Random, index: int, profile: str) -> dict[str, Json]:
    worst = profile == "worst"
    lang = "mixed" if worst else rng.choice(("en", "ja", "en", "ja", "mixed"))
    b = _Record(rng, lang)
    context = rng.choice(CONTEXTS)
    origins = list(dict.fromkeys(b.entity() for _ in range(rng.randint(1, 3))))
    if not worst and rng.random() < 0.05:
        origins = []
    labels: list[str] = []
    if rng.random() < 0.5:
        labels = rng.sample(LABELS, rng.randint(1, 2))
    request: dict[str, Json] = {"origins": origins}
    if labels:
        request["labels"] = labels
    if rng.random() < 0.15:
        request["text_fallback_query"] = " ".join(rng.sample(EN_NOUNS, 3))
    search_limit = 200 if worst else 5
    if worst or rng.random() < 0.3:
        request["search_limit"] = search_limit
    include_communities = not worst and rng.random() < 0.2
    if include_communities:
        request["include_communities"] = True
    budget = None if worst else _budget(rng)
    if budget is not None:
        request["budget"] = budget
    if rng.random() < 0.1:
        request["rerank"] = {"model": "m"}

    lanes: dict[str, Json] = {}
    anchors = bool(origins) and rng.random() < 0.95
    if anchors:
        activate, query = _graph_lanes(b, origins, labels, rng.randint(16, 24))
        lanes["graph_query"] = query
        lanes["graph_activate"] = activate
    else:
        lanes["graph_query"] = None
        lanes["graph_activate"] = None
    dup_rate = 0.2 if worst else 0.15
    lanes["passages"] = _passages(b, search_limit, dup_rate)
    communities = None
    if include_communities and rng.random() < 0.7:
        communities = _communities(b, rng.randint(1, 3))
    lanes["communities"] = communities

    wanted: list[Locator] = []
    for act in lanes["graph_activate"] or []:
        for a in act["association"]["attributions"]:
            if a["paragraph"] is not None:
                wanted.append((a["source"], a["paragraph"]))
    for assoc in lanes["graph_query"] or []:
        for a in assoc["attributions"]:
            if a["paragraph"] is not None:
                wanted.append((a["source"], a["paragraph"]))
    citations: list[dict[str, Json]] = []
    for loc in sorted(set(wanted)):
        if rng.random() < 0.15:
            continue  # an unresolvable locator: no citation entry
        citations.append(
            {
                "source": loc[0],
                "paragraph": loc[1],
                "citation": {
                    "text": b.paragraph_text(loc),
                    "source": loc[0],
                    "section": None,
                    "locator": {"kind": "page", "value": str(loc[1] + 1)},
                },
            }
        )
    lanes["citations"] = citations
    return {
        "query_id": f"syn-{index:06d}",
        "context": context,
        "request": request,
        "lanes": lanes,
    }


def generate_records(n: int, *, seed: int, profile: str = "typical") -> list[dict[str, Json]]:
    """``n`` deterministic synthetic lane-dump records for ``profile`` typical or worst."""
    if profile not in PROFILES:
        raise ValueError(f"unknown profile {profile!r}; expected one of {PROFILES}")
    rng = random.Random(seed)
    return [_record(rng, i + 1, profile) for i in range(n)]


# ---------------------------------------------------------------------------
# Benchmark generators (added for benchmarks/; the functions above are unchanged)
# ---------------------------------------------------------------------------


def iter_records(n: int, *, seed: int, profile: str = "typical") -> Iterator[dict[str, Json]]:
    """The records of ``generate_records(n, seed=seed, profile=profile)``, one at a time.

    Same random sequence, so the first ``k`` records of any ``n >= k`` are the same: a large
    input can be written without holding it in memory, and smaller inputs are its prefixes.
    """
    if profile not in PROFILES:
        raise ValueError(f"unknown profile {profile!r}; expected one of {PROFILES}")
    rng = random.Random(seed)
    for i in range(n):
        yield _record(rng, i + 1, profile)


def generate_texts(n: int, *, seed: int, lang: str, dup_rate: float = 0.0) -> list[str]:
    """``n`` passage texts (150 to 600 characters, ``lang`` "en", "ja" or "mixed") for the kernel.

    With ``dup_rate`` > 0 each text after the first is, with that probability, a planted
    near-duplicate (one or two characters replaced) of an earlier one.
    """
    rng = random.Random(seed)
    texts: list[str] = []
    for _ in range(n):
        if texts and rng.random() < dup_rate:
            texts.append(mutate(rng, rng.choice(texts)))
        else:
            text_lang = rng.choice(("en", "ja")) if lang == "mixed" else lang
            texts.append(make_text(rng, text_lang))
    return texts


def sized_records(n: int, *, seed: int, passages: int) -> list[dict[str, Json]]:
    """Worst-profile records cut to ``passages`` passages (``search_limit`` set to match).

    Everything else (about 20 activations, query matches, citations, 20 % planted duplicates)
    stays as in the worst profile, so only the pool size changes across a sweep.
    """
    if not 0 < passages <= 200:
        raise ValueError("passages must be in 1..200")
    records = generate_records(n, seed=seed, profile="worst")
    for record in records:
        record["request"]["search_limit"] = passages
        record["lanes"]["passages"] = record["lanes"]["passages"][:passages]
    return records


def _referenced_locators(lanes: dict[str, Json]) -> set[Locator]:
    locators: set[Locator] = set()
    for act in lanes["graph_activate"] or []:
        locators.update((a["source"], a["paragraph"]) for a in act["association"]["attributions"])
    for assoc in lanes["graph_query"] or []:
        locators.update((a["source"], a["paragraph"]) for a in assoc["attributions"])
    return locators


def small_record(record: dict[str, Json]) -> dict[str, Json]:
    """A typical record trimmed to a small one (about 2 to 4 KB of JSON).

    At most 6 activations and 2 query matches, 3 passages and 1 community with texts cut to
    200 characters, only the citations still referenced (texts cut to 200 characters).
    """
    lanes = dict(record["lanes"])
    if lanes["graph_activate"] is not None:
        lanes["graph_activate"] = lanes["graph_activate"][:6]
        lanes["graph_query"] = (lanes["graph_query"] or [])[:2]
    lanes["passages"] = [{**hit, "text": hit["text"][:200]} for hit in (lanes["passages"] or [])[:3]]
    if lanes["communities"] is not None:
        lanes["communities"] = [{**hit, "text": hit["text"][:200]} for hit in lanes["communities"][:1]]
    wanted = _referenced_locators(lanes)
    lanes["citations"] = [
        {**entry, "citation": {**entry["citation"], "text": entry["citation"]["text"][:200]}}
        for entry in lanes["citations"]
        if (entry["source"], entry["paragraph"]) in wanted
    ]
    return {**record, "lanes": lanes}


def write_replicated_jsonl(path: str, n: int, *, seed: int, distinct: int = 2000) -> int:
    """Write ``n`` small records as JSON Lines: ``distinct`` different ones, repeated in turn
    with fresh query ids (``big-0000001``, ...). Returns the bytes written.

    Used for the 1,000,000-query memory run, where generating every record would take longer
    than assembling it; the run's memory does not depend on records being distinct.
    """
    templates: list[tuple[str, str]] = []
    for record in iter_records(min(n, distinct), seed=seed, profile="typical"):
        small = small_record(record)
        small["query_id"] = "\u0000"
        head, _, tail = json.dumps(small, ensure_ascii=False, separators=(",", ":")).partition('"\\u0000"')
        templates.append((head, tail))
    written = 0
    with open(path, "w", encoding="utf-8", newline="\n") as out:
        for i in range(n):
            head, tail = templates[i % len(templates)]
            line = f'{head}"big-{i + 1:07d}"{tail}\n'
            out.write(line)
            written += len(line.encode("utf-8"))
    return written


def write_jsonl(records: Iterable[dict[str, Json]], path: str) -> int:
    """Write records as compact JSON Lines (UTF-8, not ASCII-escaped); returns the record count."""
    count = 0
    with open(path, "w", encoding="utf-8", newline="\n") as out:
        for record in records:
            out.write(json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n")
            count += 1
    return count
