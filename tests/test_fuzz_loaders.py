"""Every loader of every command, fed hostile JSON through the real command line.

Each loader (a file a command reads: ``assemble``'s lane dump and policy config, ``convert``'s and
``explain``'s lane dump, ``assess``'s run contexts, ``evaluate``'s eval file, lane dump, policy
config, thresholds, sources, citations, answers and BEIR queries, ``evaluate compare``'s artifacts,
``lanes build``'s corpus, eval file, BEIR queries, triples, summaries and contexts, and ``lanes
from-runs``' corpus, queries, JSON run and triples) gets a valid input with one hostile change: deep
nesting, huge integers, NaN and infinities, numbers past an f64, lone surrogates, repeated keys,
invalid UTF-8, truncated lines, wrong top-level types, control characters in ids, empty files. The
command runs in-process (``assembler.cli.main``) and must end with status 0 or 2 (3 for a thresholds
file that is valid and violated), print exactly one line ``assembler: error: ...`` and no traceback
when it fails, and leave no output file behind.

The named cases run for every loader; Hypothesis then draws a few more mutations per loader (a
fixed sequence under ``CI=true``, tests/conftest.py).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from assembler.cli import main

ROOT = Path(__file__).resolve().parent.parent
EVAL_DATA = ROOT / "tests" / "evaluate" / "data"
LANE_LINES = (ROOT / "data" / "conformance" / "lanes.jsonl").read_text(encoding="utf-8").splitlines()[:2]
RUN_LINES = (ROOT / "data" / "assess" / "sample.jsonl").read_text(encoding="utf-8").splitlines()[:2]
EVAL_LINES = (EVAL_DATA / "eval.jsonl").read_text(encoding="utf-8").splitlines()[:3]
EVAL_LANES = (EVAL_DATA / "lanes.jsonl").read_text(encoding="utf-8").splitlines()
SOURCES_LINES = (EVAL_DATA / "sources.jsonl").read_text(encoding="utf-8").splitlines()
CITATIONS_LINES = (EVAL_DATA / "citations.jsonl").read_text(encoding="utf-8").splitlines()
ANSWERS_LINES = ['{"case_id":"ja-002","answers":["青嶺"]}', '{"case_id":"ja-003","answers":["高瀬"]}']
QUERIES_LINES = ['{"_id":"ja-002","text":"青嶺酒造の代表銘柄は何か"}', '{"_id":"ja-003","text":"青嶺酒造の杜氏は誰か"}']
QRELS = "ja-002 0 corpus/long_dense.md 1\nja-003 0 corpus/aliases.md 1\n"
POLICY_CONFIG = {"assembler_policy_config": 1, "policy": {"name": "fuzzed", "fact_lag": 1, "statement_share": 0.4}}
THRESHOLDS = {"taguru_evaluate_thresholds": 1, "aggregate": {"passage.failure_rate": {"max": 1}}}
RETRIEVAL = {
    "corpus": [
        '{"source":"a.md","paragraph":0,"text":"Alpha beta gamma","title":"Alpha"}',
        '{"source":"b.md","paragraph":0,"text":"delta beta"}',
    ],
    "eval": ['{"taguru_eval":1}', '{"case_id":"q1","query":"beta gamma","cues":["Alpha"]}'],
    "triples": ['{"subject":"Alpha","label":"is","object":"beta","weight":1,"source":"a.md","paragraph":0}'],
    "summaries": ['{"community":"c1","text":"Alpha and beta","members":[{"name":"Alpha","strength":1}]}'],
    "contexts": ['{"case_id":"q1","context":"corpus"}'],
}

BEIR_CORPUS = ['{"_id":"d1","title":"Alpha","text":"Alpha beta gamma"}', '{"_id":"d2","title":"","text":"delta beta"}']
BEIR_QUERIES = ['{"_id":"q1","text":"beta gamma"}', '{"_id":"q2","text":"delta"}']
JSON_RUN = {"q1": {"d1": 2.5, "d2": 1.0}, "q2": {"d2": 3.0}}


def _from_runs(d: Path) -> list[str]:
    return [
        "lanes",
        "from-runs",
        "--run",
        f"bm25={d / 'run.json'}",
        "--corpus",
        str(d / "beir-corpus.jsonl"),
        "--queries",
        str(d / "beir-queries.jsonl"),
        "--triples",
        str(d / "triples.jsonl"),
        "-o",
        str(d / "out"),
        "-q",
    ]


def _build_from_queries(d: Path) -> list[str]:
    args = [
        "lanes",
        "build",
        "-o",
        str(d / "out"),
        "--no-dense",
        "--no-cache",
        "-q",
        "--corpus",
        str(d / "corpus.jsonl"),
    ]
    return [*args, "--queries", str(d / "beir-queries.jsonl"), "--triples", str(d / "triples.jsonl")]


FUZZ = settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@dataclass(frozen=True)
class Loader:
    """One file one command reads: its valid content (lines, or one document) and the command."""

    name: str
    file: str
    valid: list[str] | dict[str, Any]
    argv: Callable[[Path], list[str]]
    outputs: tuple[str, ...] = ("out",)
    id_key: str = "query_id"

    @property
    def is_document(self) -> bool:
        return isinstance(self.valid, dict)


def _eval_run(*extra: str) -> Callable[[Path], list[str]]:
    def argv(d: Path) -> list[str]:
        return [
            "evaluate",
            "--eval",
            str(d / "eval.jsonl"),
            "--lanes",
            str(d / "lanes.jsonl"),
            "--out",
            str(d / "out"),
            *extra,
        ]

    return argv


def _lanes_build(d: Path) -> list[str]:
    args = ["lanes", "build", "-o", str(d / "out"), "--no-dense", "--no-cache", "-q"]
    return args + [part for name in RETRIEVAL for part in (f"--{name}", str(d / f"{name}.jsonl"))]


LOADERS = [
    Loader("assemble", "in.jsonl", LANE_LINES, lambda d: ["assemble", str(d / "in.jsonl"), "-o", str(d / "out"), "-q"]),
    Loader(
        "assemble --policy-config",
        "config.json",
        POLICY_CONFIG,
        lambda d: [
            "assemble",
            str(d / "in.jsonl"),
            "-o",
            str(d / "out"),
            "-q",
            "--policy",
            "quality",
            "--policy-config",
            str(d / "config.json"),
        ],
    ),
    Loader(
        "convert",
        "in.jsonl",
        LANE_LINES,
        lambda d: ["convert", str(d / "in.jsonl"), "-o", str(d / "out.parquet")],
        outputs=("out.parquet",),
    ),
    Loader(
        "explain",
        "in.jsonl",
        LANE_LINES,
        lambda d: ["explain", str(d / "in.jsonl"), "--query-id", "evidence_budget_constrained"],
        outputs=(),
    ),
    Loader(
        "assess",
        "runs.jsonl",
        RUN_LINES,
        lambda d: ["assess", str(d / "runs.jsonl"), "-o", str(d / "out")],
        id_key="run_id",
    ),
    Loader("evaluate --eval", "eval.jsonl", EVAL_LINES, _eval_run(), id_key="case_id"),
    Loader("evaluate --lanes", "lanes.jsonl", EVAL_LANES, _eval_run()),
    Loader(
        "evaluate --policy-config",
        "config.json",
        POLICY_CONFIG,
        _eval_run("--assembly", "--policy", "quality", "--policy-config", "CONFIG"),
    ),
    Loader("evaluate --thresholds", "thresholds.json", THRESHOLDS, _eval_run("--thresholds", "THRESHOLDS")),
    Loader("evaluate --sources", "sources.jsonl", SOURCES_LINES, _eval_run("--sources", "SOURCES"), id_key="source"),
    Loader(
        "evaluate --citations",
        "citations.jsonl",
        CITATIONS_LINES,
        _eval_run("--citations", "CITATIONS"),
        id_key="source",
    ),
    Loader("evaluate --answers", "answers.jsonl", ANSWERS_LINES, _eval_run("--answers", "ANSWERS"), id_key="case_id"),
    Loader(
        "evaluate --queries",
        "queries.jsonl",
        QUERIES_LINES,
        lambda d: [
            "evaluate",
            "--qrels",
            str(d / "qrels.txt"),
            "--queries",
            str(d / "queries.jsonl"),
            "--lanes",
            str(d / "lanes.jsonl"),
            "--out",
            str(d / "out"),
        ],
        id_key="_id",
    ),
    Loader(
        "evaluate compare",
        "base.json",
        {},
        lambda d: ["evaluate", "compare", str(d / "base.json"), str(d / "head.json"), "--out", str(d / "out")],
    ),
    *(
        Loader(
            f"lanes build --{name}",
            f"{name}.jsonl",
            lines,
            _lanes_build,
            id_key={"eval": "case_id", "contexts": "case_id", "summaries": "community"}.get(name, "source"),
        )
        for name, lines in RETRIEVAL.items()
    ),
]
LOADERS += [
    Loader("lanes build --queries", "beir-queries.jsonl", BEIR_QUERIES, _build_from_queries, id_key="_id"),
    Loader("lanes from-runs --corpus", "beir-corpus.jsonl", BEIR_CORPUS, _from_runs, id_key="_id"),
    Loader("lanes from-runs --queries", "beir-queries.jsonl", BEIR_QUERIES, _from_runs, id_key="_id"),
    Loader("lanes from-runs --run (JSON)", "run.json", JSON_RUN, _from_runs),
    Loader("lanes from-runs --triples", "triples.jsonl", RETRIEVAL["triples"], _from_runs, id_key="subject"),
]
LOADER_IDS = [loader.name for loader in LOADERS]


@pytest.fixture(scope="module")
def artifact(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A real ``evaluate`` artifact (the valid input of ``evaluate compare``)."""
    folder = tmp_path_factory.mktemp("artifact")
    out = folder / "evaluation.json"
    argv = ["evaluate", "--eval", str(EVAL_DATA / "eval.jsonl"), "--lanes", str(EVAL_DATA / "lanes.jsonl")]
    assert main([*argv, "--out", str(out)]) == 0
    value: dict[str, Any] = json.loads(out.read_text(encoding="utf-8"))
    return value


# --- the hostile changes -------------------------------------------------------------------------

DEEP = "[" * 100_000 + "]" * 100_000
FRAGMENTS = [
    DEEP,
    '{"a":' * 200 + "1" + "}" * 200,
    "9" * 5000,
    "-" + "1" * 4301,
    "NaN",
    "Infinity",
    "-Infinity",
    "1e400",
    "1" + "0" * 400,
    "18446744073709551616",
    '"\\ud800"',
    '"a\\udfffb"',
    '"\\u001b[2J\\u0000\\u202e"',
    '{"k":1,"k":2}',
    "[]",
    "null",
    "true",
    "-1",
    "1.5",
    '""',
]
CONTROL_ID = "\x1b[2J\x00\u202e\u2028id\x85"


def _leaves(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path to a value of a parsed document (containers included), in document order."""
    paths = [path]
    if isinstance(value, dict):
        for key, item in value.items():
            paths += _leaves(item, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            paths += _leaves(item, (*path, index))
    return paths


_MARK = "\x00HOSTILE\x00"


def _replace(text: str, choice: int, fragment: str, kind: type | None = None) -> str:
    """The JSON text with the value at one path (``choice`` among them; among the strings or the
    numbers only, with ``kind``) replaced by ``fragment``."""
    value = json.loads(text)

    def at(path: tuple[Any, ...]) -> Any:
        target = value
        for step in path:
            target = target[step]
        return target

    paths = [path for path in _leaves(value)[1:] if kind is None or isinstance(at(path), kind)] or [()]
    path = paths[choice % len(paths)]
    if not path:
        return fragment
    target = value
    for step in path[:-1]:
        target = target[step]
    target[path[-1]] = _MARK
    return json.dumps(value, ensure_ascii=False).replace(json.dumps(_MARK), fragment)


def _repeat_key(text: str, choice: int) -> str:
    """The object with one of its top-level keys written twice (the second value different)."""
    value = json.loads(text)
    if not isinstance(value, dict) or not value:
        return text + text
    key = list(value)[choice % len(value)]
    body = json.dumps(value, ensure_ascii=False)
    return "{" + json.dumps(key) + ":" + json.dumps([0]) + "," + body[1:]


def _with_id(text: str, id_key: str) -> str:
    value = json.loads(text)
    if isinstance(value, dict):
        value[id_key] = CONTROL_ID
    return json.dumps(value, ensure_ascii=False)


Mutation = tuple[str, int, int]  # (kind, choice, fragment index)


def mutate(text: str, mutation: Mutation, id_key: str) -> bytes:
    """One hostile change to one valid line (or document)."""
    kind, choice, fragment = mutation
    if kind in ("value", "string", "number"):
        only = {"value": None, "string": str, "number": int | float}[kind]
        return _replace(text, choice, FRAGMENTS[fragment % len(FRAGMENTS)], only).encode("utf-8")
    if kind == "line":
        return FRAGMENTS[fragment % len(FRAGMENTS)].encode("utf-8")
    if kind == "repeated key":
        return _repeat_key(text, choice).encode("utf-8")
    if kind == "truncated":
        data = text.encode("utf-8")
        return data[: 1 + choice % max(1, len(data) - 1)]
    if kind == "invalid UTF-8":
        data = text.encode("utf-8")
        at = choice % len(data)
        return data[:at] + [b"\xff", b"\xc3", b"\xed\xa0\x80", b"\x80"][fragment % 4] + data[at:]
    if kind == "control characters in the id":
        return _with_id(text, id_key).encode("utf-8")
    if kind == "raw control character":
        data = text.encode("utf-8")
        at = choice % len(data)
        return data[:at] + b"\x00\x1b" + data[at:]
    assert kind == "empty", kind
    return b""


KINDS = [
    "value",
    "string",
    "number",
    "line",
    "repeated key",
    "truncated",
    "invalid UTF-8",
    "control characters in the id",
    "raw control character",
    "empty",
]
NAMED: list[tuple[str, Mutation]] = [
    ("nested 100,000 deep", ("line", 0, FRAGMENTS.index(DEEP))),
    ("nested 100,000 deep in a field", ("value", 1, FRAGMENTS.index(DEEP))),
    ("a 5,000-digit integer", ("number", 0, FRAGMENTS.index("9" * 5000))),
    ("NaN", ("number", 0, FRAGMENTS.index("NaN"))),
    ("-Infinity", ("value", 2, FRAGMENTS.index("-Infinity"))),
    ("1e400", ("number", 1, FRAGMENTS.index("1e400"))),
    ("an integer past an f64", ("number", 0, FRAGMENTS.index("1" + "0" * 400))),
    ("a lone surrogate in the first string", ("string", 0, FRAGMENTS.index('"\\ud800"'))),
    ("a lone surrogate in the second string", ("string", 1, FRAGMENTS.index('"\\ud800"'))),
    ("a lone surrogate in the last string", ("string", -1, FRAGMENTS.index('"a\\udfffb"'))),
    ("a repeated key", ("repeated key", 0, 0)),
    ("invalid UTF-8", ("invalid UTF-8", 5, 0)),
    ("a truncated line", ("truncated", 7, 0)),
    ("an array at the top", ("line", 0, FRAGMENTS.index("[]"))),
    ("a string at the top", ("line", 0, FRAGMENTS.index('""'))),
    ("control characters in the id", ("control characters in the id", 0, 0)),
    ("a raw control character", ("raw control character", 3, 0)),
    ("an empty file", ("empty", 0, 0)),
]


# --- running one loader --------------------------------------------------------------------------


def _write_inputs(folder: Path, loader: Loader, artifact: dict[str, Any], hostile: bytes) -> None:
    """The command's valid inputs, then the loader's file with the hostile change."""
    (folder / "in.jsonl").write_text("\n".join(LANE_LINES) + "\n", encoding="utf-8")
    (folder / "runs.jsonl").write_text("\n".join(RUN_LINES) + "\n", encoding="utf-8")
    shutil.copy(EVAL_DATA / "eval.jsonl", folder / "eval.jsonl")
    shutil.copy(EVAL_DATA / "lanes.jsonl", folder / "lanes.jsonl")
    for name, lines in RETRIEVAL.items():
        (folder / f"{name}.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (folder / "config.json").write_text(json.dumps(POLICY_CONFIG), encoding="utf-8")
    (folder / "qrels.txt").write_text(QRELS, encoding="utf-8")
    (folder / "beir-corpus.jsonl").write_text("\n".join(BEIR_CORPUS) + "\n", encoding="utf-8")
    (folder / "beir-queries.jsonl").write_text("\n".join(BEIR_QUERIES) + "\n", encoding="utf-8")
    (folder / "run.json").write_text(json.dumps(JSON_RUN), encoding="utf-8")
    for name in ("base.json", "head.json"):
        (folder / name).write_text(json.dumps(artifact, ensure_ascii=False, indent=2), encoding="utf-8")
    if loader.is_document:
        (folder / loader.file).write_bytes(hostile)
    else:
        assert isinstance(loader.valid, list)
        # The last valid line is replaced by its hostile form: no id is repeated by the change.
        kept = "".join(line + "\n" for line in loader.valid[:-1]).encode("utf-8")
        (folder / loader.file).write_bytes(kept + hostile + b"\n")


def _argv(loader: Loader, folder: Path) -> list[str]:
    places = {
        "CONFIG": "config.json",
        "THRESHOLDS": "thresholds.json",
        "SOURCES": "sources.jsonl",
        "CITATIONS": "citations.jsonl",
        "ANSWERS": "answers.jsonl",
    }
    return [str(folder / places[arg]) if arg in places else arg for arg in loader.argv(folder)]


def check_loader(
    loader: Loader, mutation: Mutation, folder: Path, artifact: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    valid = loader.valid if loader.is_document else loader.valid[-1]  # type: ignore[index]
    if loader.name == "evaluate compare":
        valid = artifact
    text = json.dumps(valid, ensure_ascii=False, indent=2) if isinstance(valid, dict) else valid
    hostile = mutate(text, mutation, loader.id_key)
    _write_inputs(folder, loader, artifact, hostile)
    before = {path.name for path in folder.iterdir()}
    capsys.readouterr()
    status = main(_argv(loader, folder))
    err = capsys.readouterr().err
    assert "Traceback" not in err
    allowed = {0, 2, 3} if loader.name == "evaluate --thresholds" else {0, 2}  # 3: valid and violated
    assert status in allowed, (status, err)
    if status == 2:
        assert err.count("\n") == 1 and err.startswith("assembler: error: "), err
        assert {path.name for path in folder.iterdir()} == before, "a failed run left a file behind"
        for output in loader.outputs:
            assert not (folder / output).exists()
    elif status == 0:
        read_back(loader, folder, capsys)


def read_back(loader: Loader, folder: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """What one command wrote, the command that reads it accepts whole: a lane dump (``lanes
    build``, ``convert``) is assembled with nothing rejected, an artifact (``evaluate``) compared."""
    if loader.name.startswith(("lanes build", "lanes from-runs")) or loader.name == "convert":
        written = folder / loader.outputs[0]
        argv = ["assemble", str(written), "-o", str(folder / "read-back.jsonl"), "-q"]
    elif loader.name.startswith("evaluate") and loader.name != "evaluate compare":
        argv = ["evaluate", "compare", str(folder / "out"), str(folder / "out"), "--out", str(folder / "read-back")]
    else:
        return
    status = main(argv)
    assert status == 0, capsys.readouterr().err


@pytest.mark.parametrize(("case", "mutation"), NAMED, ids=[name for name, _ in NAMED])
@pytest.mark.parametrize("loader", LOADERS, ids=LOADER_IDS)
def test_every_loader_refuses_each_named_hostile_input_in_one_line(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    artifact: dict[str, Any],
    loader: Loader,
    case: str,
    mutation: Mutation,
) -> None:
    check_loader(loader, mutation, tmp_path, artifact, capsys)


MUTATIONS = st.tuples(st.sampled_from(KINDS), st.integers(0, 10_000), st.integers(0, len(FRAGMENTS) - 1))


@pytest.mark.parametrize("loader", LOADERS, ids=LOADER_IDS)
@FUZZ
@given(mutation=MUTATIONS)
def test_every_loader_survives_drawn_hostile_inputs(
    tmp_path_factory: pytest.TempPathFactory,
    capsys: pytest.CaptureFixture[str],
    artifact: dict[str, Any],
    loader: Loader,
    mutation: Mutation,
) -> None:
    check_loader(loader, mutation, tmp_path_factory.mktemp("fuzz"), artifact, capsys)


# --- what the refusals say ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[" * 100_000 + "]" * 100_000, "config.json: nesting deeper than 128 levels"),
        (
            '{"assembler_policy_config": 1, "policy": {"fact_lag": ' + "9" * 5000 + "}}",
            "config.json: key policy.fact_lag: integer with more than 4300 digits",
        ),
        (
            '{"assembler_policy_config": 1, "policy": {"fact_lag": 1, "fact_lag": 2}}',
            "config.json: key policy.fact_lag: duplicate field",
        ),
        (
            '{"assembler_policy_config": 1, "policy": {"name": "\\ud800"}}',
            "config.json: key policy.name: is not valid Unicode (lone surrogate escape)",
        ),
        (
            '{"assembler_policy_config": 1,\n "policy": {"statement_share": NaN}}',
            "config.json: key policy.statement_share: must be a finite number (NaN is not a JSON number)",
        ),
        ('{"assembler_policy_config": 1,\n "policy": {', "config.json: invalid JSON at line 2 column 13: Expecting"),
    ],
)
def test_a_policy_config_refusal_names_the_key_and_the_rule(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, message: str
) -> None:
    """The policy config was read by plain ``json.loads``: 100,000 brackets were a RecursionError
    traceback, 5,000 digits a ValueError traceback, NaN and repeated keys were accepted."""
    config = tmp_path / "config.json"
    config.write_text(text, encoding="utf-8")
    lanes = ROOT / "data" / "conformance" / "lanes.jsonl"
    argv = ["assemble", str(lanes), "-o", str(tmp_path / "out"), "--policy", "quality", "--policy-config", str(config)]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"assembler: error: {tmp_path}/{message}"), err
    assert not (tmp_path / "out").exists()


def test_an_artifact_with_a_repeated_key_is_refused_naming_the_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], artifact: dict[str, Any]
) -> None:
    base = tmp_path / "base.json"
    text = json.dumps(artifact)
    base.write_text('{"taguru_evaluation": 1, ' + text[1:], encoding="utf-8")
    head = tmp_path / "head.json"
    head.write_text(text, encoding="utf-8")
    assert main(["evaluate", "compare", str(base), str(head), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err == f"assembler: error: BASE {base}: malformed evaluation.json: taguru_evaluation: duplicate field\n"


def test_a_sources_line_with_a_repeated_unknown_key_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--sources`` is not a lane dump: a repeated key is refused even where it is not read, as
    the eval file refuses it."""
    sources = tmp_path / "sources.jsonl"
    sources.write_text(SOURCES_LINES[0][:-1] + ',"note":1,"note":2}\n', encoding="utf-8")
    argv = _eval_run("--sources", str(sources))(tmp_path)
    argv = [arg.replace(str(tmp_path / "eval.jsonl"), str(EVAL_DATA / "eval.jsonl")) for arg in argv]
    argv = [arg.replace(str(tmp_path / "lanes.jsonl"), str(EVAL_DATA / "lanes.jsonl")) for arg in argv]
    assert main(argv) == 2
    assert capsys.readouterr().err == f"assembler: error: {sources}:1: field note: duplicate field\n"
