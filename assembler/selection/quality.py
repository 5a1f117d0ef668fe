"""The quality selection policy (``--policy quality``): the contract's selection with the rules
that lose evidence at equal budget replaced. Opt-in; the contract policy stays the default.

Every difference from :class:`~assembler.selection.ContractPolicy` lives in this module, and each rule
can be switched off for ablation (``quality-no-identity``, ``quality-no-passages-first``,
``quality-facts-last``, ``quality-no-statement-test``, ``quality-no-source-guard``,
``quality-no-signs``, ``quality-no-words``, and ``quality-with-tiers`` for rule 5). The decision
record, with the measurements behind each rule, is ``docs/policies.md``.

1. **Evidence identity across kinds.** An association whose every resolved citation is a passage
   already in the pool adds no text the passage does not carry, yet pays for the same paragraph a
   second time (as its citation entry) and takes a second slot. It is omitted with reason
   ``evidence_in_passage``, ``duplicate_of`` naming the passage.
2. **Passages first; statements that add evidence join them.** RRF puts a rank-1 graph fact level
   with the rank-1 passage, so weak facts displace the passages that carry the answer. Passages
   lead, each kind in fused order. A graph fact joins them only if it cites a paragraph no pooled
   passage holds (it adds evidence) and it is a *statement*: its text at least
   :data:`STATEMENT_SHARE` of the pool's median passage length (an extracted observation, not a
   mention link or a one-word value). The n-th such fact follows the (n + :data:`FACT_LAG`)-th
   passage of the package head (as many entries as the item budget and the passages allow) and
   displaces the lowest-ranked passage behind it whose removal leaves the head serving as many
   distinct sources as before, so the head never serves fewer than the passages alone would; a
   fact that would cost a source waits behind the passages with every other fact and the
   community summaries.
3. **Contradictions need opposite signs.** A ``(subject, label)`` bucket is an atomic group only
   when its weights disagree in sign; other multi-valued relations are admitted member by member,
   kept next to each other.
4. **Near-duplicates need shared words too.** Where both texts have at least three words, a pair is
   a near-duplicate only if the Dice coefficient of their word sets is also at least 0.9, so
   templated text about different entities ("For Love may refer to:" / "To Love may refer to:")
   is kept while revisions of one text are still caught.
5. **Rank order, not tiers.** The contract's diversity tiers move a lower-ranked unit from a new
   source ahead of a better-ranked one from a source already seen; the quality policy admits in
   rank order (``plan.selection.diversity_tier_width`` reports 1: tiers of one unit). Source
   diversity then comes from the pool itself, as it does for the fixed-limit baseline.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import polars as pl

from assembler.contract.jsoninput import read_json
from assembler.contract.text import normalize_entry
from assembler.contract.wire import ShapeError, key_path
from assembler.errors import UsageError
from assembler.selection.base import Selection, SelectionInputs, admit_units, survivor_positions
from assembler.stages.groups import group_contradictions
from assembler.stages.neardup import (
    NEAR_DUPLICATE_DICE_THRESHOLD,
    PairTest,
    duplicate_positions,
    pool_walk,
    suppress,
)
from assembler.stages.package import DUPLICATE_PASSAGE

__all__ = [
    "CONFIG_VERSION",
    "EVIDENCE_IN_PASSAGE",
    "MIN_WORDS",
    "QUALITY_POLICIES",
    "QualityPolicy",
    "load_policy_config",
    "policy_from_config",
]

EVIDENCE_IN_PASSAGE = "evidence_in_passage"
MIN_WORDS = 3


def word_test(normalized: Sequence[str]) -> PairTest:
    """Rule 4's pair test: ``test(i, j)`` is True when either text has fewer than :data:`MIN_WORDS`
    distinct words or their word sets' Dice ``2.0 * shared / (|A| + |B|)`` reaches the threshold.

    Word sets are built on first use, so a pool costs what the pairs asked about cost.
    """
    sets: dict[int, frozenset[str]] = {}

    def words(index: int) -> frozenset[str]:
        found = sets.get(index)
        if found is None:
            found = sets[index] = frozenset(normalized[index].split())
        return found

    def test(i: int, j: int) -> bool:
        a, b = words(i), words(j)
        if len(a) < MIN_WORDS or len(b) < MIN_WORDS:
            return True
        return 2.0 * len(a & b) / (len(a) + len(b)) >= NEAR_DUPLICATE_DICE_THRESHOLD

    return test


def word_aware_positions(qs: npt.NDArray[np.int64], texts: Sequence[str]) -> npt.NDArray[np.int64]:
    """Rule 4 as a near-duplicate rule: the contract's bigram verdicts *and* the word verdicts."""
    targets = np.full(len(texts), -1, dtype=np.int64)
    starts = np.flatnonzero(np.r_[True, qs[1:] != qs[:-1]]) if qs.size else np.empty(0, dtype=np.int64)
    for start, end in zip(starts, np.r_[starts[1:], qs.size][: starts.size], strict=True):
        if end - start < 2:
            continue
        normalized = [normalize_entry(text) for text in texts[int(start) : int(end)]]
        walk = pool_walk(normalized, word_test(normalized))
        targets[start:end] = np.where(walk < 0, -1, walk + start)
    return targets


def _cited_locators(survivors: pl.DataFrame, citations: pl.DataFrame) -> pl.DataFrame:
    """Every resolved citation of every surviving association, with the passage of the pool at
    that locator (``passage_rank`` null where the pool has none)."""
    refs = (
        survivors.filter(pl.col("kind") == "association")
        .select("q", "fused_rank", "citation_ids")
        .explode("citation_ids")
        .drop_nulls("citation_ids")
        .join(citations, left_on=["q", "citation_ids"], right_on=["q", "citation_id"])
    )
    passages = survivors.filter(pl.col("kind") == "passage").select(
        "q",
        "source",
        "paragraph",
        pl.col("fused_rank").alias("passage_rank"),
        pl.col("candidate_id").alias("duplicate_of"),
        pl.col("id_json").alias("duplicate_of_json"),
    )
    return refs.join(passages, on=["q", "source", "paragraph"], how="left")


def fold_cited_passages(survivors: pl.DataFrame, citations: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Rule 1: ``(survivors without the folded associations, folded associations)``.

    ``folded`` has ``q``, ``fused_rank``, ``duplicate_of`` and ``duplicate_of_json`` (the passage
    with the best fused rank among those the association cites).
    """
    matched = _cited_locators(survivors, citations)
    covered = (
        matched.group_by("q", "fused_rank")
        .agg(pl.col("passage_rank").is_not_null().all().alias("covered"))
        .filter("covered")
        .select("q", "fused_rank")
    )
    folded = (
        matched.join(covered, on=["q", "fused_rank"])
        .sort("passage_rank")
        .group_by("q", "fused_rank")
        .agg(pl.col("duplicate_of").first(), pl.col("duplicate_of_json").first())
    )
    return survivors.join(covered, on=["q", "fused_rank"], how="anti"), folded


FACT_LAG = 3
"""The n-th graph fact offered among the passages follows the (n + 3)-th passage. Chosen on the
even-numbered cases of the evaluation sets, checked on the odd-numbered ones (docs/policies.md)."""

STATEMENT_SHARE = 0.4
"""A graph fact is a statement, worth a passage's place, when its text (subject, label and object)
is at least 0.4 times as long, in characters, as the median passage of its pool; shorter facts
are pointers (mention links, one-word values) and wait behind the passages. Chosen on the
even-numbered cases, checked on the odd-numbered ones (docs/policies.md)."""


def offered_early(survivors: pl.DataFrame, located: pl.DataFrame, statement_share: float | None) -> pl.DataFrame:
    """``(q, fused_rank)`` of the graph facts rule 2 offers among the passages: they cite a paragraph
    no pooled passage holds (they add evidence; ``located`` is :func:`_cited_locators`) and, unless
    ``statement_share`` is None, they are statements (:data:`STATEMENT_SHARE`)."""
    adds = located.filter(pl.col("passage_rank").is_null()).select("q", "fused_rank").unique()
    if statement_share is None:
        return adds
    median = (
        survivors.filter(pl.col("kind") == "passage").group_by("q").agg(median=pl.col("text").str.len_chars().median())
    )
    return (
        survivors.join(adds, on=["q", "fused_rank"])
        .join(median, on="q")  # a pool without passages has no measure, and nothing to join
        .filter(pl.col("text").str.len_chars() >= statement_share * pl.col("median"))
        .select("q", "fused_rank")
    )


Place = tuple[bool, int]
"""An entry of an order: ``(is_fact, index)`` into the passages or the facts offered early."""


def head_order(
    passage_sources: Sequence[str],
    fact_sources: Sequence[frozenset[str]],
    lag: int,
    head: int,
    guard: bool,
    offsets: Sequence[int] = (),
) -> list[Place]:
    """The order of the passages and the facts offered early (each list in fused order).

    The head is the first ``head`` passages. The n-th fact is placed right after the head's
    (n + ``lag``)-th passage and displaces one passage behind it: with ``guard`` the lowest-ranked
    one whose removal leaves the head serving at least as many distinct sources as before the
    fact came, and when there is none the fact waits; without ``guard`` the head's last passage.
    After the head come the passages it did not keep, in rank order, then the facts that wait.
    ``offsets`` (one per fact, default 0) add to ``lag`` fact by fact (a tuned per-lane offset).

    A fact citing a new source may take the last passage's place:

    >>> head_order(["a", "b", "a", "c"], [frozenset({"d"})], lag=1, head=4, guard=True)
    [(False, 0), (False, 1), (True, 0), (False, 2), (False, 3)]

    One citing a source the head holds displaces a passage of a source held twice:

    >>> head_order(["a", "b", "a", "c"], [frozenset({"a"})], lag=1, head=4, guard=True)
    [(False, 0), (False, 1), (True, 0), (False, 3), (False, 2)]

    and waits where every passage behind it is its source's only one:

    >>> head_order(["a", "b", "c", "d"], [frozenset({"a"})], lag=1, head=4, guard=True)
    [(False, 0), (False, 1), (False, 2), (False, 3), (True, 0)]
    >>> head_order(["a", "b", "c", "d"], [frozenset({"a"})], lag=1, head=4, guard=False)
    [(False, 0), (False, 1), (True, 0), (False, 2), (False, 3)]
    """
    order: list[Place] = [(False, index) for index in range(min(head, len(passage_sources)))]
    left = list(range(len(order), len(passage_sources)))
    waiting: list[int] = []

    def sources(place: Place) -> frozenset[str]:
        return fact_sources[place[1]] if place[0] else frozenset((passage_sources[place[1]],))

    for fact in range(len(fact_sources)):
        passages = [position for position, (is_fact, _) in enumerate(order) if not is_fact]
        # Passages before the fact; a negative lag can put it first.
        ahead = max(0, fact + 1 + lag + (offsets[fact] if offsets else 0))
        if ahead >= len(passages):
            # ``ahead`` only grows and no placement adds a passage to the head: every later fact
            # waits too (so the loop runs at most about ``head`` times, however many facts).
            waiting.extend(range(fact, len(fact_sources)))
            break
        last_fact = max((position for position, place in enumerate(order) if place[0]), default=-1)
        at = max(passages[ahead - 1] + 1 if ahead else 0, last_fact + 1)  # facts in the head keep their order
        trial = [*order[:at], (True, fact), *order[at:]]
        behind = [position for position in range(len(trial) - 1, at, -1) if not trial[position][0]]
        if guard:
            held = Counter(source for place in trial for source in sources(place))
            served = len({source for place in order for source in sources(place)})
            behind = [p for p in behind if len(held) - (held[passage_sources[trial[p][1]]] == 1) >= served]
        if not behind:
            waiting.append(fact)
            continue
        left.append(trial.pop(behind[0])[1])
        order = trial
    return [*order, *((False, index) for index in sorted(left)), *((True, fact) for fact in waiting)]


def passages_lead(
    survivors: pl.DataFrame,
    citations: pl.DataFrame,
    lag: int | None,
    head_items: Sequence[int],
    statement_share: float | None = STATEMENT_SHARE,
    guard: bool = True,
    lane_offsets: Mapping[str, int | None] | None = None,
) -> pl.DataFrame:
    """Rule 2: passages lead; the facts :func:`offered_early` join them as :func:`head_order`
    places them, with a head of ``min(passages, head_items[q])`` entries; every other fact and the
    community summaries come after. ``lag=None`` puts every fact after every passage.
    ``lane_offsets`` maps a fact's leading lane (``graph_query``, ``graph_activate``) to a change of
    ``lag`` for its facts, or to None: that lane's facts wait behind the passages."""
    if lag is None:
        return survivors.sort("q", pl.col("kind") != "passage", "fused_rank")
    offsets = dict(lane_offsets or {})
    located = _cited_locators(survivors, citations)
    early = offered_early(survivors, located, statement_share)
    if offsets:
        lanes = survivors.select("q", "fused_rank", "lane")
        early = (
            early.join(lanes, on=["q", "fused_rank"])
            .with_columns(offset=pl.col("lane").replace_strict(offsets, default=0, return_dtype=pl.Int64))
            .filter(pl.col("offset").is_not_null())  # a lane mapped to None: its facts wait
            .select("q", "fused_rank", "offset")
        )
    else:
        early = early.with_columns(offset=pl.lit(0, dtype=pl.Int64))
    early = early.with_columns(early=pl.lit(True))
    marked = survivors.join(early.drop("offset"), on=["q", "fused_rank"], how="left").with_columns(
        tier=pl.when(pl.col("kind") == "passage").then(0).when(pl.col("early").fill_null(False)).then(1).otherwise(2)
    )
    cited = located.join(early, on=["q", "fused_rank"]).group_by("q", "fused_rank").agg(cited=pl.col("source").unique())
    lists = (
        marked.filter(pl.col("tier") < 2)
        .join(early.select("q").unique(), on="q", how="semi")  # only queries with a fact to place
        .join(cited, on=["q", "fused_rank"], how="left")
        .join(early.select("q", "fused_rank", "offset"), on=["q", "fused_rank"], how="left")
        .sort("q", "fused_rank")
        .group_by("q", maintain_order=True)
        .agg(
            passage_ranks=pl.col("fused_rank").filter(pl.col("tier") == 0),
            passage_sources=pl.col("source").filter(pl.col("tier") == 0),
            fact_ranks=pl.col("fused_rank").filter(pl.col("tier") == 1),
            fact_sources=pl.col("cited").filter(pl.col("tier") == 1),
            fact_offsets=pl.col("offset").filter(pl.col("tier") == 1),
        )
    )
    qs: list[int] = []
    ranks: list[int] = []
    for q, passage_ranks, passage_sources, fact_ranks, fact_sources, fact_offsets in lists.iter_rows():
        facts = [frozenset(cited) for cited in fact_sources]
        order = head_order(passage_sources, facts, lag, head_items[q], guard, fact_offsets if offsets else ())
        qs += [q] * len(order)
        ranks += [fact_ranks[index] if is_fact else passage_ranks[index] for is_fact, index in order]
    places = pl.DataFrame(
        {"q": qs, "fused_rank": ranks, "place": range(len(qs))},
        schema={"q": marked.schema["q"], "fused_rank": marked.schema["fused_rank"], "place": pl.Int64},
    )
    return (
        marked.join(places, on=["q", "fused_rank"], how="left")
        .sort("q", pl.col("tier") == 2, "place", pl.col("kind") != "passage", "fused_rank", nulls_last=True)
        .drop("early", "tier", "place")
    )


@dataclass(frozen=True)
class QualityPolicy:
    """The quality rules, each switchable for ablation.

    ``lane_offsets`` holds ``(lane, offset)`` pairs: the facts a lane leads join the passages
    ``offset`` places later than ``fact_lag`` says (None: never early). A tuned setting
    (``assembler evaluate tune``) is applied with :meth:`from_config`.
    """

    name: str = "quality"
    identity: bool = True
    signs: bool = True
    words: bool = True
    passages_first: bool = True
    fact_lag: int | None = FACT_LAG
    statement_share: float | None = STATEMENT_SHARE
    guard: bool = True
    tiers: bool = False
    lane_offsets: tuple[tuple[str, int | None], ...] = ()

    @classmethod
    def from_config(cls, config: Mapping[str, Any], *, source: str = "config") -> QualityPolicy:
        """The policy a config object describes (the ``policy`` object of a tuned file, or a
        whole file: ``{"assembler_policy_config": 1, "policy": {...}, ...}``), checked strictly:
        an unknown key or a wrong type is a :class:`~assembler.errors.UsageError` naming
        ``source`` and the key."""
        return policy_from_config(config, source)

    def to_config(self) -> dict[str, Any]:
        """The settings as a config's ``policy`` object (every key; :meth:`from_config` reads it back)."""
        return {
            "base": "quality",
            "name": self.name,
            **{key: getattr(self, key) for key in _FLAGS},
            "fact_lag": self.fact_lag,
            "statement_share": self.statement_share,
            "lane_offsets": dict(self.lane_offsets),
        }

    def select(self, fused: pl.DataFrame, inputs: SelectionInputs) -> Selection:
        """Run the quality selection over a fused batch."""
        return self.select_suppressed(self.suppressed(fused), inputs)

    def suppressed(self, fused: pl.DataFrame) -> pl.DataFrame:
        """The fused batch with near-duplicates marked (rule 4): depends on ``words`` alone, so a
        search over the other settings computes it once (:mod:`assembler.evaluate.reselect`)."""
        return suppress(fused, word_aware_positions if self.words else duplicate_positions).with_columns(
            reason=pl.when(pl.col("duplicate_of").is_not_null()).then(pl.lit(DUPLICATE_PASSAGE))
        )

    def select_suppressed(self, marked: pl.DataFrame, inputs: SelectionInputs) -> Selection:
        """The rest of :meth:`select`, from :meth:`suppressed`'s frame."""
        survivors = marked.filter(pl.col("duplicate_of").is_null())
        if self.identity:
            survivors, folded = fold_cited_passages(survivors, inputs.citations)
            marked = (
                marked.join(folded, on=["q", "fused_rank"], how="left", suffix="_folded")
                .with_columns(
                    reason=pl.coalesce(
                        "reason",
                        pl.when(pl.col("duplicate_of_folded").is_not_null()).then(pl.lit(EVIDENCE_IN_PASSAGE)),
                    ),
                    duplicate_of=pl.coalesce("duplicate_of", "duplicate_of_folded"),
                    duplicate_of_json=pl.coalesce("duplicate_of_json", "duplicate_of_json_folded"),
                )
                .drop("duplicate_of_folded", "duplicate_of_json_folded")
            )
        if self.passages_first:
            heads = [limits.max_items for limits in inputs.limits]
            survivors = passages_lead(
                survivors,
                inputs.citations,
                self.fact_lag,
                heads,
                self.statement_share,
                self.guard,
                dict(self.lane_offsets),
            )
        orders = inputs.reorder(survivors) if inputs.reorder is not None else {}
        units, group_counts = group_contradictions(
            survivor_positions(survivors, orders), disagreement="sign" if self.signs else "label"
        )
        widths = None if self.tiers else [1] * len(inputs.tier_widths)
        return admit_units(marked, units, group_counts, inputs, widths)


QUALITY_POLICIES = (
    QualityPolicy(),
    QualityPolicy(name="quality-no-identity", identity=False),
    QualityPolicy(name="quality-facts-last", fact_lag=None),
    QualityPolicy(name="quality-no-statement-test", statement_share=None),
    QualityPolicy(name="quality-no-source-guard", guard=False),
    QualityPolicy(name="quality-no-passages-first", passages_first=False),
    QualityPolicy(name="quality-no-signs", signs=False),
    QualityPolicy(name="quality-no-words", words=False),
    QualityPolicy(name="quality-with-tiers", tiers=True),
)


# --- tuned settings: the policy config file ---------------------------------------------------------

CONFIG_VERSION = 1
"""``assembler_policy_config`` of the files :func:`load_policy_config` reads."""
_FLAGS = ("identity", "signs", "words", "passages_first", "guard", "tiers")
_POLICY_KEYS = ("base", "name", *_FLAGS, "fact_lag", "statement_share", "lane_offsets")
_FILE_KEYS = ("assembler_policy_config", "policy", "tuning")
LANES_WITH_FACTS = ("graph_activate", "graph_query")
"""The lanes whose facts ``lane_offsets`` can move."""


def _int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _problem(source: str, key: str, rule: str) -> UsageError:
    return UsageError(f"{source}: key {key}: {rule}")


def policy_from_config(config: Mapping[str, Any], source: str = "config") -> QualityPolicy:
    """:meth:`QualityPolicy.from_config`: unspecified settings keep the ``quality`` defaults."""
    if not isinstance(config, Mapping):
        raise UsageError(f"{source}: a policy config must be a JSON object")
    if "assembler_policy_config" in config or "policy" in config:
        unknown = sorted(set(config) - set(_FILE_KEYS))
        if unknown:
            raise _problem(source, key_path("", unknown[0]), f"unknown key (expected {', '.join(_FILE_KEYS)})")
        if config.get("assembler_policy_config") != CONFIG_VERSION:
            raise _problem(source, "assembler_policy_config", f"must be {CONFIG_VERSION}")
        if "tuning" in config and not isinstance(config["tuning"], Mapping):
            raise _problem(source, "tuning", "must be an object")
        policy = config.get("policy")
        if not isinstance(policy, Mapping):
            raise _problem(source, "policy", "must be an object")
        return policy_from_config(policy, source)
    unknown = sorted(set(config) - set(_POLICY_KEYS))
    if unknown:
        raise _problem(source, key_path("policy", unknown[0]), f"unknown key (expected {', '.join(_POLICY_KEYS)})")
    if config.get("base", "quality") != "quality":
        raise _problem(source, "policy.base", "must be 'quality' (the only tunable policy)")
    settings: dict[str, Any] = {}
    name = config.get("name", "quality-tuned")
    if not isinstance(name, str) or not name.strip():
        raise _problem(source, "policy.name", "must be a non-blank string")
    if name in {policy.name for policy in QUALITY_POLICIES} or name == "contract":
        raise _problem(source, "policy.name", f"{name!r} is a built-in policy's name; choose another")
    settings["name"] = name
    for flag in _FLAGS:
        if flag in config:
            if not isinstance(config[flag], bool):
                raise _problem(source, f"policy.{flag}", "must be true or false")
            settings[flag] = config[flag]
    if "fact_lag" in config:
        lag = config["fact_lag"]
        if lag is not None and not (_int(lag) and -50 <= lag <= 50):
            raise _problem(source, "policy.fact_lag", "must be an integer from -50 to 50, or null")
        settings["fact_lag"] = lag
    if "statement_share" in config:
        share = config["statement_share"]
        if share is not None and (isinstance(share, bool) or not isinstance(share, (int, float)) or not share > 0):
            raise _problem(source, "policy.statement_share", "must be a positive number, or null")
        try:
            settings["statement_share"] = None if share is None else float(share)
        except OverflowError:  # an integer of more than 308 digits
            reason = "must be a positive number a float can hold, or null"
            raise _problem(source, "policy.statement_share", reason) from None
    if "lane_offsets" in config:
        offsets = config["lane_offsets"]
        if not isinstance(offsets, Mapping):
            raise _problem(source, "policy.lane_offsets", "must be an object")
        pairs: list[tuple[str, int | None]] = []
        for lane in sorted(offsets):
            offset = offsets[lane]
            where = key_path("policy.lane_offsets", lane)
            if lane not in LANES_WITH_FACTS:
                raise _problem(source, where, f"unknown lane (expected {', '.join(LANES_WITH_FACTS)})")
            if offset is not None and not (_int(offset) and -50 <= offset <= 50):
                raise _problem(source, where, "must be an integer from -50 to 50, or null")
            pairs.append((lane, offset))
        settings["lane_offsets"] = tuple(pairs)
    return QualityPolicy(**settings)


def load_policy_config(path: str | Path) -> QualityPolicy:
    """The quality policy a config file (JSON, as ``assembler evaluate tune`` writes) describes.

    The file is read by the strict JSON reader every input goes through
    (:func:`~assembler.contract.jsoninput.read_json`): a syntax error, nesting past 128 levels, a
    refused number, a repeated key or a lone surrogate is a :class:`UsageError` naming the field.
    """
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"cannot read policy config {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise UsageError(f"{path}: a policy config must be UTF-8 JSON (invalid UTF-8 at byte {exc.start})") from None
    try:
        config = read_json(text)
    except ShapeError as exc:
        raise UsageError(f"{path}: key {exc.path}: {exc.rule}" if exc.path else f"{path}: {exc.rule}") from None
    if not isinstance(config, dict) or "assembler_policy_config" not in config:
        raise UsageError(f"{path}: key assembler_policy_config: missing (not a policy config file)")
    return policy_from_config(config, str(path))
