"""Convert the five shared conformance fixtures into a lane dump and expected packages.

Run from the repository root: ``python scripts/build_conformance.py``. Reads
``../shared/conformance/*.json`` (relative to the repository root) and writes
``data/conformance/lanes.jsonl`` and ``data/conformance/expected.jsonl``; refuses, writing
nothing, when the fixtures are missing or a file would shrink (``--force`` replaces it anyway).

Every JSON number is kept as the exact token text of the fixture file. The expected
package is re-emitted compact with keys in the contract's wire order (§1.3, §9); a key
without a known order is an error.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT.parent / "shared" / "conformance"
OUT = ROOT / "data" / "conformance"

sys.path.insert(0, str(Path(__file__).resolve().parent))
from guard import require_inputs, write_lines  # noqa: E402


class Raw(str):
    """A JSON number token, kept as its exact source text."""


# type name -> key -> child type ("" = scalar, "x[]" = list of x, "[]" = list of scalars,
# "sorted" = object of scalars with keys in ascending order). Dict order = wire order.
WIRE: dict[str, dict[str, str]] = {
    "package": {
        "items": "item[]",
        "citations": "citation_entry[]",
        "budget": "budget",
        "omitted": "omitted_entry[]",
        "omitted_total": "",
        "omitted_by_reason": "sorted",
        "plan": "plan",
    },
    "item": {
        "candidate_id": "",
        "kind": "",
        "fused_rank": "",
        "lane_ranks": "lane_rank[]",
        "citation_refs": "ref[]",
        "corroboration": "corroboration",
        "contradicts": "[]",
        "bytes": "",
        "estimated_tokens": "",
        "association": "association",
        "passage": "passage",
        "community": "community",
    },
    "lane_rank": {"lane": "", "rank": ""},
    "ref": {"source": "", "paragraph": ""},
    "corroboration": {"sources": "[]", "attributions": "ref[]"},
    "association": {
        "subject": "",
        "label": "",
        "object": "",
        "weight": "",
        "count": "",
        "attributions": "attribution[]",
    },
    "attribution": {
        "source": "",
        "weight": "",
        "count": "",
        "paragraph": "",
        "section": "",
        "locator": "locator",
    },
    "locator": {"kind": "", "value": ""},
    "passage": {"source": "", "paragraph": "", "score": "", "text": "", "lanes": "passage_lanes"},
    "passage_lanes": {"bm25": "lane_evidence", "vector": "lane_evidence"},
    "lane_evidence": {"rank": "", "score": ""},
    "community": {
        "community": "",
        "score": "",
        "text": "",
        "paragraph": "",
        "level": "",
        "parent": "",
        "concept_count": "",
        "members": "member[]",
        "members_truncated": "",
    },
    "member": {"name": "", "strength": ""},
    "citation_entry": {"source": "", "paragraph": "", "citation": "citation"},
    "citation": {"text": "", "source": "", "section": "", "locator": "locator"},
    "budget": {"items_used": "", "bytes_used": "", "tokens_used": "", "limits": "limits"},
    "limits": {"max_items": "", "max_bytes": "", "max_tokens": ""},
    "omitted_entry": {"candidate_id": "", "kind": "", "reason": "", "duplicate_of": ""},
    "plan": {"lanes": "plan_lanes", "selection": "selection", "reranker": "reranker"},
    "plan_lanes": {
        name: "lane_plan" for name in ("resolve", "query", "activate", "passages", "communities", "citations")
    },
    "lane_plan": {"ran": "", "reason": "", "floor": ""},
    "selection": {"dedup_dropped": "", "contradiction_groups": "", "diversity_tier_width": ""},
    "reranker": {"configured": "", "ran": "", "model": "", "reason": ""},
}


def load(path: Path) -> Any:
    text = path.read_text(encoding="utf-8")
    return json.loads(text, parse_float=Raw, parse_int=Raw)


def scalar(value: Any, where: str) -> str:
    if isinstance(value, Raw):
        return str(value)
    if value is None or isinstance(value, (bool, str)):
        return json.dumps(value, ensure_ascii=False)
    raise SystemExit(f"{where}: expected a scalar, got {type(value).__name__}")


def dump(value: Any, kind: str | None = None, where: str = "$") -> str:
    """Compact JSON; ``kind=None`` keeps the input key order, else the WIRE order."""
    if kind == "":
        return scalar(value, where)
    if isinstance(value, list):
        child = None if kind is None else kind.removesuffix("[]")
        if kind is not None and not kind.endswith("[]"):
            raise SystemExit(f"{where}: unexpected array for {kind}")
        parts = [dump(v, child, f"{where}[{i}]") for i, v in enumerate(value)]
        return "[" + ",".join(parts) + "]"
    if isinstance(value, dict):
        if kind is None:
            keys = list(value)
        elif kind == "sorted":
            keys = sorted(value)
        else:
            order = WIRE.get(kind)
            if order is None:
                raise SystemExit(f"{where}: object where {kind!r} was expected")
            unknown = set(value) - set(order)
            if unknown:
                raise SystemExit(f"{where}: no wire order for keys {sorted(unknown)} in {kind}")
            keys = [k for k in order if k in value]
        parts = []
        for k in keys:
            child = None if kind is None else ("" if kind == "sorted" else WIRE[kind][k])
            v = value[k]
            text = "null" if v is None and child else dump(v, child, f"{where}.{k}")
            parts.append(json.dumps(k, ensure_ascii=False) + ":" + text)
        return "{" + ",".join(parts) + "}"
    return scalar(value, where)


def quarters(text: str) -> int:
    """Quarter-tokens (§8.2): one per ASCII code point, four per other code point."""
    return sum(1 if ord(c) < 128 else 4 for c in text)


def check(stem: str, package: dict[str, Any]) -> None:
    """The byte and token accounting of §8.2/§8.3 must hold on the re-emitted text."""
    stripped = []
    for i, item in enumerate(package["items"]):
        text = dump(item, "item")
        span = f',"bytes":{item["bytes"]},"estimated_tokens":{item["estimated_tokens"]}'
        if text.count(span) != 1:
            raise SystemExit(f"{stem}: item {i}: span {span!r} not found exactly once")
        text = text.replace(span, "")
        if len(text.encode()) != int(item["bytes"]):
            raise SystemExit(f"{stem}: item {i}: {len(text.encode())} bytes != {item['bytes']}")
        if -(-quarters(text) // 4) != int(item["estimated_tokens"]):
            raise SystemExit(f"{stem}: item {i}: estimated_tokens mismatch")
        stripped.append(text)
    items = "[" + ",".join(stripped) + "]"
    citations = dump(package["citations"], "citation_entry[]")
    used = len(items.encode()) + len(citations.encode())
    if used != int(package["budget"]["bytes_used"]):
        raise SystemExit(f"{stem}: bytes_used {package['budget']['bytes_used']} != {used}")
    if -(-quarters(items + citations) // 4) != int(package["budget"]["tokens_used"]):
        raise SystemExit(f"{stem}: tokens_used mismatch")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--force", action="store_true", help="replace the committed files even if smaller")
    force = parser.parse_args().force
    require_inputs("build_conformance.py", [FIXTURES], "the shared conformance fixtures")
    paths = sorted(FIXTURES.glob("*.json"))
    lanes_lines, expected_lines = [], []
    for path in paths:
        stem = path.stem
        fixture = load(path)
        line = {"query_id": stem, **{k: fixture[k] for k in ("context", "request", "lanes")}}
        lanes_lines.append(dump(line))
        package = dump(fixture["expected_response"], "package", stem)
        if json.loads(package) != json.loads(path.read_text(encoding="utf-8"))["expected_response"]:
            raise SystemExit(f"{stem}: package content changed")
        check(stem, fixture["expected_response"])
        expected_lines.append('{"query_id":' + json.dumps(stem) + ',"package":' + package + "}")
        print(f"OK {stem}")
    write_lines("build_conformance.py", OUT / "lanes.jsonl", lanes_lines, force=force)
    write_lines("build_conformance.py", OUT / "expected.jsonl", expected_lines, force=force)


if __name__ == "__main__":
    main()
