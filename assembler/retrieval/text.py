"""Text helpers: the BM25 tokenizer, question entity extraction, mention matching.

Tokens: text is NFKC-normalized and lowercased; runs of CJK characters (kanji, hiragana,
katakana) become character bigrams (a one-character run is its own token), every other run of
letters and digits is a word token, English stopwords dropped.

>>> tokens("青嶺酒造の杜氏は誰か")
['青嶺', '嶺酒', '酒造', '造の', 'の杜', '杜氏', '氏は', 'は誰', '誰か']
>>> tokens("Which band released Counterparts in 1993?")
['band', 'released', 'counterparts', '1993']
>>> question_entities('Which Canadian rock band released a song called "Counterparts"?')
['Canadian', 'Counterparts']
>>> question_entities("日本で梅雨がないのは北海道とどこか。", ["梅雨"])
['梅雨', '北海道']
>>> question_entities("Van Gogh painted which café? When did de Gaulle meet von Braun?")
['Van Gogh', 'de Gaulle', 'von Braun']
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Collection, Iterable, Sequence

__all__ = [
    "MentionIndex",
    "has_cjk",
    "mentions",
    "question_entities",
    "same_name",
    "specific_entities",
    "tokens",
]


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


_CJK = "\u3041-\u3096\u30a1-\u30fa\u30fc\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\u3005\u3006"
_CJK_RUN = re.compile(f"[{_CJK}]+")
_TOKEN = re.compile(f"(?P<cjk>[{_CJK}]+)|(?P<word>(?:(?![{_CJK}])[^\\W_])+)")

STOPWORDS = _words(
    "a about above after again against all am an and any are as at be because been before being below "
    "between both but by can could did do does doing down during each few for from further had has have "
    "having he her here hers herself him himself his how i if in into is it its itself just me more most "
    "my myself no nor not now of off on once only or other our ours ourselves out over own same she "
    "should so some such than that the their theirs them themselves then there these they this those "
    "through to too under until up very was we were what when where which while who whom why will with "
    "would you your yours yourself yourselves"
)

# Capitalized words that open a question, not an entity.
_QUESTION_WORDS = _words(
    "what which who whom whose when where why how is are was were do does did in on at the a an of for "
    "from by to and or as if has have had can could would will should name what's who's since during "
    "between among after before both besides"
)
_CONNECTORS = frozenset({"of", "the", "de", "la", "le", "von", "van", "der", "du", "da", "del"})
_PARTICLES = _CONNECTORS - {"of", "the"}
"""Name particles: a leading one stays in the name when a capitalized word follows ("Van Gogh",
"de Gaulle", "von Trier"); "of" and "the" never open a name."""
_BREAKS = frozenset('"“”?!,;:()[]')
_WORD = re.compile(r"[^\s\"“”?!,;:()\[\]]+|[\"“”?!,;:()\[\]]")
_QUOTED = re.compile(r"\"([^\"]{2,80})\"|“([^”]{2,80})”|「([^」]{1,40})」|『([^』]{1,40})』")
_KATAKANA = re.compile("[\u30a1-\u30fa\u30fc\u30fb]{3,}")
_KANJI = re.compile("[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\u3005]{3,}")
_LATIN = re.compile(r"[A-Za-z0-9][A-Za-z0-9&.'_-]*[A-Za-z0-9]")


def _fold(text: str) -> str:
    return unicodedata.normalize("NFKC", text).lower()


def has_cjk(text: str) -> bool:
    """Whether the text has any kanji or kana."""
    return _CJK_RUN.search(text) is not None


def tokens(text: str) -> list[str]:
    """BM25 tokens: CJK character bigrams and word tokens (stopwords dropped)."""
    out: list[str] = []
    for match in _TOKEN.finditer(_fold(text)):
        run = match.group("cjk")
        if run is not None:
            out.extend([run] if len(run) == 1 else [run[i : i + 2] for i in range(len(run) - 1)])
        elif match.group("word") not in STOPWORDS:
            out.append(match.group("word"))
    return out


def _opens_name(run: Sequence[tuple[int, str]]) -> bool:
    """Whether the run starts with a name particle followed by a capitalized word."""
    return len(run) > 1 and run[0][1].lower() in _PARTICLES and run[1][1][:1].isupper()


def _english(text: str) -> list[tuple[int, str]]:
    found: list[tuple[int, str]] = []
    run: list[tuple[int, str]] = []

    def flush() -> None:
        while run and run[-1][1].lower() in _CONNECTORS:
            run.pop()
        while run and (run[0][1].lower() in _QUESTION_WORDS or run[0][1].lower() in _CONNECTORS):
            if _opens_name(run):
                break
            run.pop(0)
        if run:
            name = re.sub(r"(?:'s|\u2019s)$", "", " ".join(w for _, w in run))
            if len(name) > 1 and not name.isdigit():
                found.append((run[0][0], name))
        run.clear()

    matches = list(_WORD.finditer(text))
    for position, match in enumerate(matches):
        word = match.group()
        if word[0] in _BREAKS:
            flush()
            continue
        closes = word[-1] in ".'\u2019" and not re.fullmatch(r"(?:[A-Z]\.)+", word)
        word = word.rstrip(".'\u2019") if closes else word
        capital = bool(word) and (word[0].isupper() or (word[0].isdigit() and bool(run)))
        following = matches[position + 1].group() if position + 1 < len(matches) else ""
        particle = not run and not closes and word.lower() in _PARTICLES and following[:1].isupper()
        if capital or particle or (run and word.lower() in _CONNECTORS):
            run.append((match.start(), word))
        else:
            flush()
        if closes:
            flush()
    flush()
    return found


def _japanese(text: str, titles: Iterable[str]) -> list[tuple[int, str]]:
    found: list[tuple[int, str]] = []
    for title in titles:
        at = text.find(title)
        if at >= 0 and len(title) > 1:
            found.append((at, title))
    for pattern in (_KATAKANA, _KANJI, _LATIN):
        for match in pattern.finditer(text):
            word = match.group().strip("・")
            if len(word) > 1 and not word.startswith("何") and word.lower() not in STOPWORDS:
                found.append((match.start(), word))
    return found


def question_entities(text: str, titles: Iterable[str] = ()) -> list[str]:
    """Named things in a question, in order of appearance, each once.

    Quoted spans always count. English: maximal runs of capitalized words (inner ``of``/``the``/…
    allowed), question words dropped. Japanese: known titles found in the text, katakana runs and
    kanji compounds of three or more characters, Latin/digit runs.
    """
    found = [(m.start(), next(g for g in m.groups() if g).strip(" ?!.,")) for m in _QUOTED.finditer(text)]
    found += _japanese(text, titles) if has_cjk(text) else _english(text)
    out: list[str] = []
    seen: set[str] = set()
    for _, name in sorted(found, key=lambda item: (item[0], -len(item[1]))):
        name = name.strip()
        key = _fold(name)
        if key and key not in seen:
            seen.add(key)
            out.append(name)
    return out


def mentions(entity: str, text: str) -> int:
    """How often ``entity`` occurs in ``text`` (NFKC, case-folded; whole words for Latin names)."""
    needle, haystack = _fold(entity), _fold(text)
    if not needle:
        return 0
    if has_cjk(needle):
        return haystack.count(needle)
    return len(re.findall(rf"(?<!\w){re.escape(needle)}(?!\w)", haystack))


def same_name(a: str, b: str) -> bool:
    """Equal once folded as :func:`mentions` folds (NFKC, case), surrounding white space aside.

    >>> same_name("Aomine Brewery", " aomine brewery"), same_name("Aomine", "Aomine Brewery")
    (True, False)
    """
    return _fold(a).strip() == _fold(b).strip()


class MentionIndex:
    """The folded texts of a corpus, for document-frequency questions about entities."""

    def __init__(self, texts: Sequence[str]) -> None:
        self.folded = [_fold(text) for text in texts]

    def frequency(self, entity: str) -> int:
        """How many texts mention the entity (same matching as :func:`mentions`)."""
        needle = _fold(entity)
        if not needle:
            return 0
        if has_cjk(needle):
            return sum(1 for text in self.folded if needle in text)
        pattern = re.compile(rf"(?<!\w){re.escape(needle)}(?!\w)")
        return sum(1 for text in self.folded if needle in text and pattern.search(text))

    def specific(self, entities: Iterable[str], *, keep: Collection[str] = (), max_share: float = 0.01) -> list[str]:
        """The entities mentioned in at least one text but in at most ``max(3, max_share * len(texts))``
        of them (generic words such as "American" or 選挙協力 are dropped); names in ``keep`` need one."""
        ceiling = max(3, int(max_share * len(self.folded)))
        out = []
        for entity in entities:
            count = self.frequency(entity)
            if count and (count <= ceiling or entity in keep):
                out.append(entity)
        return out


def specific_entities(
    entities: Iterable[str], texts: Sequence[str], *, keep: Collection[str] = (), max_share: float = 0.01
) -> list[str]:
    """:meth:`MentionIndex.specific` over ``texts`` (folds them on every call: build an index to reuse)."""
    return MentionIndex(texts).specific(entities, keep=keep, max_share=max_share)
