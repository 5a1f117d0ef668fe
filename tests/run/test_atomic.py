"""``AtomicFile``: the one rule for writing outputs (rename for regular files, stream into FIFOs
and devices, write through symlinks, fsync, modes, stale temporary files, write failures)."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from assembler.errors import OutputError, UsageError
from assembler.run.atomic import AtomicFile, remove_stale_temps, temp_pattern

DEV_FULL = Path("/dev/full")


def leftovers(folder: Path) -> list[str]:
    return sorted(entry.name for entry in folder.iterdir() if entry.name.endswith(".tmp"))


def dead_pid() -> int:
    """The pid of a process that has exited (and been reaped)."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


@pytest.fixture
def umask() -> Iterator[None]:
    previous = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(previous)


def test_a_fifo_is_written_into_not_replaced(tmp_path: Path) -> None:
    fifo = tmp_path / "out.jsonl"
    os.mkfifo(fifo)
    received: list[bytes] = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_bytes()))
    reader.start()
    with AtomicFile(str(fifo)) as out:
        out.handle.write("line\n")
        out.commit()
    reader.join(timeout=30)
    assert received == [b"line\n"]
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert leftovers(tmp_path) == []


def test_a_character_device_is_written_into_not_replaced(tmp_path: Path) -> None:
    device = tmp_path / "null"
    try:
        os.mknod(device, stat.S_IFCHR | 0o666, os.makedev(1, 3))  # a /dev/null of our own
        device.open("wb").close()
    except OSError as exc:
        pytest.skip(f"cannot make a character device here: {exc.strerror}")
    with AtomicFile(str(device), binary=True) as out:
        out.handle.write(b"x" * 100)
        out.commit()
    assert stat.S_ISCHR(os.lstat(device).st_mode)
    assert leftovers(tmp_path) == []


def test_a_symlink_is_written_through_to_its_target(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    target = tmp_path / "real" / "out.jsonl"
    target.write_text("old\n")
    target.chmod(0o640)
    link = tmp_path / "link.jsonl"
    link.symlink_to(target)
    with AtomicFile(str(link)) as out:
        out.handle.write("new\n")
        out.commit()
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert target.read_text() == "new\n"
    assert stat.S_IMODE(target.stat().st_mode) == 0o640
    assert leftovers(tmp_path) == [] and leftovers(tmp_path / "real") == []


def test_a_new_file_gets_the_mode_the_umask_gives(tmp_path: Path, umask: None) -> None:
    with AtomicFile(str(tmp_path / "out.jsonl")) as out:
        out.commit()
    assert stat.S_IMODE((tmp_path / "out.jsonl").stat().st_mode) == 0o644
    os.umask(0o077)
    with AtomicFile(str(tmp_path / "private.jsonl")) as out:
        out.commit()
    assert stat.S_IMODE((tmp_path / "private.jsonl").stat().st_mode) == 0o600


def test_an_overwritten_file_keeps_its_mode(tmp_path: Path, umask: None) -> None:
    target = tmp_path / "out.jsonl"
    target.write_text("old\n")
    target.chmod(0o664)
    with AtomicFile(str(target)) as out:
        out.handle.write("new\n")
        out.commit()
    assert target.read_text() == "new\n"
    assert stat.S_IMODE(target.stat().st_mode) == 0o664


def test_the_file_is_synced_before_the_rename(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    events: list[str] = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd: int) -> None:
        events.append("fsync")
        real_fsync(fd)

    def replace(source: str, destination: str) -> None:
        events.append("replace")
        real_replace(source, destination)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    with AtomicFile(str(tmp_path / "out.jsonl")) as out:
        out.handle.write("x\n")
        out.commit()
    assert events[:2] == ["fsync", "replace"]


def test_an_interrupted_write_leaves_no_temporary_file(tmp_path: Path) -> None:
    target = tmp_path / "out.jsonl"
    target.write_text("old\n")
    with pytest.raises(KeyboardInterrupt), AtomicFile(str(target)) as out:
        out.handle.write("partial\n" * 1000)
        raise KeyboardInterrupt
    assert target.read_text() == "old\n"
    assert leftovers(tmp_path) == []


def test_temporary_names_carry_the_pid(tmp_path: Path) -> None:
    with AtomicFile(str(tmp_path / "out.jsonl")) as out:
        name = Path(out.write_path).name
        match = temp_pattern("out.jsonl").fullmatch(name)
        assert match is not None and int(match.group(1)) == os.getpid()


def test_stale_temporary_files_of_dead_runs_are_removed(tmp_path: Path) -> None:
    dead, alive = dead_pid(), os.getppid()
    stale = tmp_path / f".out.jsonl.{dead}.0123abcd.tmp"
    live = tmp_path / f".out.jsonl.{alive}.0123abcd.tmp"
    other_output = tmp_path / f".other.jsonl.{dead}.0123abcd.tmp"
    not_ours = tmp_path / ".out.jsonl.k3j_x9a2.tmp"  # mkstemp's pattern: whose it is cannot be told
    similar = tmp_path / f".out.jsonl.{dead}.0123abcd.tmp.bak"
    for path in (stale, live, other_output, not_ours, similar):
        path.write_text("")
    with AtomicFile(str(tmp_path / "out.jsonl")) as out:
        out.commit()
    assert not stale.exists()
    assert live.exists() and other_output.exists() and not_ours.exists() and similar.exists()
    assert remove_stale_temps(str(tmp_path / "other.jsonl")) == [str(other_output)]


def test_a_full_device_is_an_output_error_naming_it() -> None:
    if not DEV_FULL.exists():
        pytest.skip("no /dev/full here")
    with pytest.raises(OutputError, match=r"^cannot write /dev/full: No space left on device$") as caught:  # noqa: SIM117
        with AtomicFile(str(DEV_FULL)) as out:
            out.handle.write("x" * 10)
            out.commit()
    assert caught.value.exit_status == 1
    assert stat.S_ISCHR(os.lstat(DEV_FULL).st_mode)


def unwritable_folder(tmp_path: Path) -> Path:
    """A folder where creating a file fails with EACCES, as root too (sysfs) or by its mode."""
    if os.geteuid() != 0:
        folder = tmp_path / "ro"
        folder.mkdir()
        folder.chmod(0o555)
        return folder
    folder = Path("/sys")
    try:
        os.close(os.open(folder / ".assembler-probe", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    except PermissionError:
        return folder
    except OSError as exc:
        pytest.skip(f"/sys refuses differently here: {exc.strerror}")
    os.unlink(folder / ".assembler-probe")
    pytest.skip("running as root with a writable /sys: no folder refuses writes")


def test_a_folder_that_refuses_writes_is_an_output_error(tmp_path: Path) -> None:
    target = unwritable_folder(tmp_path) / "out.jsonl"
    with pytest.raises(OutputError, match=f"^cannot write {target}: Permission denied$"):
        AtomicFile(str(target))


def test_a_path_under_a_regular_file_is_a_usage_error(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    with pytest.raises(UsageError, match="is not a folder"):
        AtomicFile(str(tmp_path / "file" / "out.jsonl"))
