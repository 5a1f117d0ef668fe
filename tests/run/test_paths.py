"""``assembler.run.paths``: no output is an input or another output; file names shown safely."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from assembler.errors import OutputError, UsageError
from assembler.errors import shown as escaped
from assembler.run.paths import check_output, format_by_extension, output_format, refuse_same_files, shown


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


# --- standard streams are compared by what their descriptors are ------------------------------------


@contextmanager
def descriptor_on(descriptor: int, path: Path, flags: int) -> Iterator[None]:
    """Descriptor 0 or 1 opened on ``path`` for the block (as ``< path``, ``1<> path``)."""
    saved = os.dup(descriptor)
    opened = os.open(path, flags)
    try:
        os.dup2(opened, descriptor)
        yield
    finally:
        os.dup2(saved, descriptor)
        os.close(saved)
        os.close(opened)


def test_stdin_that_is_the_output_file_is_refused(tmp_path: Path) -> None:
    lanes = tmp_path / "in.jsonl"
    lanes.write_text("{}\n")
    with descriptor_on(0, lanes, os.O_RDONLY), pytest.raises(UsageError) as caught:
        refuse_same_files({"input": ["-"]}, {"-o": str(lanes)})
    assert str(caught.value) == f"-o {lanes} is the same file as input - (standard input): refusing to overwrite it"


@pytest.mark.parametrize("flags", [os.O_RDWR, os.O_WRONLY | os.O_APPEND], ids=["1<>", ">>"])
def test_stdout_that_is_an_input_file_is_refused(tmp_path: Path, flags: int) -> None:
    lanes = tmp_path / "in.jsonl"
    lanes.write_text("{}\n")
    with descriptor_on(1, lanes, flags), pytest.raises(UsageError) as caught:
        refuse_same_files({"input": [str(lanes)]}, {"-o": "-"})
    assert str(caught.value) == f"-o - (standard output) is the same file as input {lanes}: refusing to overwrite it"


def test_stdout_that_is_another_output_file_is_refused(tmp_path: Path) -> None:
    errors = tmp_path / "errors.jsonl"
    errors.write_text("")
    with descriptor_on(1, errors, os.O_WRONLY), pytest.raises(UsageError, match="is the same file as -o -"):
        refuse_same_files({"input": []}, {"-o": "-", "--errors": str(errors)})


def test_stdin_and_stdout_on_one_file_are_refused(tmp_path: Path) -> None:
    lanes = tmp_path / "in.jsonl"
    lanes.write_text("{}\n")
    same = r"^-o - \(standard output\) is the same file as input - \(standard input\)"
    with (
        descriptor_on(0, lanes, os.O_RDONLY),
        descriptor_on(1, lanes, os.O_WRONLY | os.O_APPEND),
        pytest.raises(UsageError, match=same),
    ):
        refuse_same_files({"input": ["-"]}, {"-o": "-"})


def test_standard_streams_on_pipes_or_devices_pass(tmp_path: Path) -> None:
    lanes = tmp_path / "in.jsonl"
    lanes.write_text("{}\n")
    read_end, write_end = os.pipe()
    try:
        with (
            descriptor_on(0, Path(f"/proc/self/fd/{read_end}"), os.O_RDONLY),
            descriptor_on(1, Path(os.devnull), os.O_WRONLY),
        ):
            refuse_same_files({"input": ["-", str(lanes)]}, {"-o": "-", "--metrics-out": os.devnull})
    finally:
        os.close(read_end)
        os.close(write_end)


def test_two_outputs_on_dev_null_are_not_the_same_file() -> None:
    refuse_same_files({"input": [os.devnull]}, {"-o": os.devnull, "--errors": os.devnull})


# --- every output can be written, checked before any work --------------------------------------------


def test_an_output_in_a_missing_folder_is_refused(tmp_path: Path) -> None:
    target = tmp_path / "nope" / "metrics.prom"
    with pytest.raises(UsageError, match=rf"^cannot write {target}: folder {tmp_path / 'nope'} does not exist$"):
        refuse_same_files({}, {"-o": str(tmp_path / "out.jsonl"), "--metrics-out": str(target)})


def test_a_missing_folder_passes_when_the_writer_makes_it(tmp_path: Path) -> None:
    refuse_same_files({}, {"--out-dir": [str(tmp_path / "new" / "runs" / "a.json")]}, makes_folders=True)


def test_a_file_where_a_folder_should_be_is_refused_naming_it(tmp_path: Path) -> None:
    (tmp_path / "sweep").mkdir()
    (tmp_path / "sweep" / "runs").write_text("")
    target = tmp_path / "sweep" / "runs" / "a.json"
    with pytest.raises(UsageError, match=rf"^cannot write {target}: {tmp_path / 'sweep' / 'runs'} is not a folder$"):
        refuse_same_files({}, {"--out-dir": [str(target)]}, makes_folders=True)


def test_a_symlink_loop_is_refused(tmp_path: Path) -> None:
    loop = tmp_path / "out.jsonl"
    loop.symlink_to(loop)
    with pytest.raises(UsageError, match=rf"^cannot write {loop}: too many levels of symbolic links$"):
        check_output(loop)


def test_a_folder_as_output_is_refused(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="it is a folder"):
        check_output(tmp_path)


def test_a_file_this_user_may_not_write_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``os.access`` decides (as root it allows every mode: see the command's test as ``nobody``)."""
    target = tmp_path / "out.jsonl"
    target.write_text("keep\n")
    target.chmod(0o444)
    real_access = os.access
    monkeypatch.setattr(os, "access", lambda path, mode: False if Path(path) == target else real_access(path, mode))
    with pytest.raises(
        UsageError, match=rf"^refusing to replace {target}: this user may not write to it \(mode 0444\)$"
    ):
        check_output(target)


def test_a_folder_this_user_may_not_write_is_an_output_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real_access = os.access
    monkeypatch.setattr(os, "access", lambda path, mode: False if Path(path) == tmp_path else real_access(path, mode))
    with pytest.raises(OutputError, match=rf"^cannot write {tmp_path / 'out.jsonl'}: Permission denied$") as caught:
        refuse_same_files({}, {"-o": str(tmp_path / "out.jsonl")})
    assert caught.value.exit_status == 1


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("out.parquet", "parquet"),
        ("OUT.PARQUET", "parquet"),
        ("out.pq", "parquet"),
        ("out.JSONL", "jsonl"),
        ("out.ndjson", "jsonl"),
        ("out.json", "jsonl"),
        ("-", "jsonl"),
        (os.devnull, "jsonl"),
        ("dir.v2/packages", "jsonl"),  # no extension: no other format claimed
        ("out.csv", None),
        ("out.jsonl.gz", None),
        ("out.zst", None),
        ("out.", None),
    ],
)
def test_the_output_format_is_read_from_the_extension_in_any_case(name: str, expected: str | None) -> None:
    assert format_by_extension(name) == expected


def test_an_output_format_given_wins_over_the_extension_and_none_names_the_output() -> None:
    assert output_format("out.csv", "jsonl") == "jsonl"
    assert output_format("out.jsonl", "parquet") == "parquet"
    with pytest.raises(
        UsageError, match=r"^cannot tell the format of -o out\.csv from its extension .*: give --format x$"
    ):
        output_format("out.csv", label="-o", option="--format x")
    with pytest.raises(UsageError, match=r"give output_format='jsonl' or 'parquet'; outputs are written uncompressed$"):
        output_format("out.jsonl.gz")
    with pytest.raises(UsageError, match=r"format of output bad\\x1b\[2J\.csv "):
        output_format("bad\x1b[2J.csv")
