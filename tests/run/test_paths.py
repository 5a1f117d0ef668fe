"""``assembler.run.paths``: no output is an input or another output; file names shown safely."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from assembler.errors import UsageError
from assembler.errors import shown as escaped
from assembler.run.paths import refuse_same_files, shown


def test_an_output_equal_to_an_input_is_refused_naming_both(tmp_path: Path) -> None:
    source = tmp_path / "in.jsonl"
    source.write_text("{}\n")
    with pytest.raises(UsageError, match=r"^output .*in\.jsonl is the same file as inputs .*in\.jsonl"):
        refuse_same_files({"inputs": [str(source)]}, {"output": str(source)})


def test_dot_slash_and_bare_name_are_the_same_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    Path("a.jsonl").write_text("{}\n")
    with pytest.raises(UsageError, match="same file"):
        refuse_same_files({"inputs": "a.jsonl"}, {"output": "./a.jsonl"})


def test_a_new_output_under_two_spellings_is_the_same_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UsageError, match=r"^errors_path new\.jsonl is the same file as output \./new\.jsonl"):
        refuse_same_files({}, {"output": "./new.jsonl", "errors_path": "new.jsonl"})


def test_a_symlink_to_an_input_is_the_same_file(tmp_path: Path) -> None:
    (tmp_path / "in.jsonl").write_text("{}\n")
    (tmp_path / "link.jsonl").symlink_to(tmp_path / "in.jsonl")
    with pytest.raises(UsageError, match="same file"):
        refuse_same_files({"inputs": [tmp_path / "in.jsonl"]}, {"output": tmp_path / "link.jsonl"})


def test_a_hard_link_to_an_input_is_the_same_file(tmp_path: Path) -> None:
    (tmp_path / "in.jsonl").write_text("{}\n")
    os.link(tmp_path / "in.jsonl", tmp_path / "hard.jsonl")
    with pytest.raises(UsageError, match="same file"):
        refuse_same_files({"inputs": [tmp_path / "in.jsonl"]}, {"output": tmp_path / "hard.jsonl"})


def test_two_outputs_on_one_file_are_refused(tmp_path: Path) -> None:
    out = str(tmp_path / "out.jsonl")
    with pytest.raises(UsageError, match=r"^--errors .* is the same file as -o "):
        refuse_same_files({"input": []}, {"-o": out, "--errors": out})


def test_standard_io_is_never_the_same_file(tmp_path: Path) -> None:
    refuse_same_files({"inputs": ["-"]}, {"output": "-", "errors_path": "-"})


def test_distinct_files_pass(tmp_path: Path) -> None:
    (tmp_path / "in.jsonl").write_text("{}\n")
    refuse_same_files(
        {"inputs": [tmp_path / "in.jsonl"], "other": None},
        {"output": tmp_path / "out.jsonl", "errors_path": tmp_path / "out.jsonl.errors.jsonl", "metrics": None},
    )


def test_a_non_utf8_file_name_is_shown_escaped() -> None:
    assert shown(os.fsdecode(b"a\xff.jsonl")) == "a\\xff.jsonl"
    assert shown(b"a\xff.jsonl") == "a\\xff.jsonl"


@settings(max_examples=200)
@given(st.binary(min_size=1, max_size=30))
def test_every_shown_file_name_encodes_as_utf8(name: bytes) -> None:
    text = shown(os.fsdecode(name))
    text.encode("utf-8")  # never a surrogate: printable and writable into any UTF-8 file
    try:
        decoded = name.decode("utf-8")
    except UnicodeDecodeError:
        assert "\\x" in text
    else:  # a UTF-8 name is shown as it is, its control characters escaped
        assert text == escaped(decoded, limit=None)
        assert "\n" not in text and "\x1b" not in text
