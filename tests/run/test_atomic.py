"""``AtomicFile``: the one rule for writing outputs (rename for regular files, stream into FIFOs
and devices, write through symlinks, fsync, modes, stale temporary files, write failures)."""

from __future__ import annotations

import errno
import fcntl
import os
import re
import stat
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from assembler.errors import OutputError, UsageError
from assembler.run.atomic import AtomicFile, commit_together, host_tag, remove_stale_temps, temp_name, temp_pattern

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


def test_temporary_names_carry_the_host_and_the_pid(tmp_path: Path) -> None:
    with AtomicFile(str(tmp_path / "out.jsonl")) as out:
        name = Path(out.write_path).name
        match = temp_pattern("out.jsonl").fullmatch(name)
        assert match is not None and int(match["pid"]) == os.getpid() and match["host"] == host_tag()


def test_temporaries_beside_an_output_are_named_as_its_own_and_streams_have_none(tmp_path: Path) -> None:
    """The part files of a pool: beside the output's temporary (a symlink's target's folder), named
    for the output (so removed like its temporary once the run is dead); nothing is created."""
    target = tmp_path / "real"
    target.mkdir()
    link = tmp_path / "out.jsonl"
    link.symlink_to(target / "out.jsonl")
    with AtomicFile(str(link)) as out:
        beside = out.temporary_beside()
        assert beside is not None and Path(beside).parent == target
        match = temp_pattern("out.jsonl").fullmatch(Path(beside).name)
        assert match is not None and int(match["pid"]) == os.getpid() and match["host"] == host_tag()
        assert beside != out.temporary_beside() and beside != out.write_path
        assert os.listdir(target) == [Path(out.write_path).name]
    with AtomicFile("-") as streamed:
        assert streamed.temporary_beside() is None


def test_stale_temporary_files_of_dead_runs_are_removed(tmp_path: Path) -> None:
    dead, alive = dead_pid(), os.getppid()
    stale = tmp_path / temp_name("out.jsonl", pid=dead)
    live = tmp_path / temp_name("out.jsonl", pid=alive)
    other_output = tmp_path / temp_name("other.jsonl", pid=dead)
    not_ours = tmp_path / ".out.jsonl.k3j_x9a2.tmp"  # mkstemp's pattern: whose it is cannot be told
    similar = tmp_path / (temp_name("out.jsonl", pid=dead) + ".bak")
    earlier = tmp_path / f".out.jsonl.{dead}.0123abcd.tmp"  # an earlier version's name: no host, no lock
    for path in (stale, live, other_output, not_ours, similar, earlier):
        path.write_text("")
    with AtomicFile(str(tmp_path / "out.jsonl")) as out:
        out.commit()
    assert not stale.exists()
    assert live.exists() and other_output.exists() and not_ours.exists() and similar.exists() and earlier.exists()
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


# --- temporary files of other hosts, namespaces and live runs are never removed -----------------------

HOLD_LOCK = """
import fcntl, os, sys, time
fd = os.open(sys.argv[1], os.O_RDWR)
fcntl.flock(fd, fcntl.LOCK_EX)
print("locked", flush=True)
time.sleep(120)
"""


def test_a_locked_temporary_file_is_not_removed_even_when_its_pid_is_dead_here(tmp_path: Path) -> None:
    """A run in another pid namespace (a container sharing the folder) whose pid means nothing
    here: it holds its lock, so its file stays; once it is gone, the file is stale."""
    held = tmp_path / temp_name("out.jsonl", pid=dead_pid())
    held.write_text("partial\n")
    holder = subprocess.Popen([sys.executable, "-c", HOLD_LOCK, str(held)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "locked\n"
        assert remove_stale_temps(str(tmp_path / "out.jsonl")) == []
        with AtomicFile(str(tmp_path / "out.jsonl")) as out:
            out.commit()
        assert held.exists()
    finally:
        holder.kill()
        holder.wait()
    assert remove_stale_temps(str(tmp_path / "out.jsonl")) == [str(held)]


def test_a_temporary_file_of_another_host_is_never_removed(tmp_path: Path) -> None:
    other = "0123456789ab" if host_tag() != "0123456789ab" else "ba9876543210"
    foreign = tmp_path / temp_name("out.jsonl", pid=dead_pid(), host=other)
    foreign.write_text("")
    assert remove_stale_temps(str(tmp_path / "out.jsonl")) == []
    assert foreign.exists()


def test_an_unlocked_temporary_file_of_this_host_and_a_dead_pid_is_removed(tmp_path: Path) -> None:
    stale = tmp_path / temp_name("out.jsonl", pid=dead_pid())
    stale.write_text("")
    assert remove_stale_temps(str(tmp_path / "out.jsonl")) == [str(stale)]


def test_the_writer_holds_its_temporary_files_lock(tmp_path: Path) -> None:
    with AtomicFile(str(tmp_path / "out.jsonl")) as out:
        fd = os.open(out.write_path, os.O_RDONLY)
        try:
            with pytest.raises(BlockingIOError):
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        finally:
            os.close(fd)
        out.commit()


def test_the_host_tag_names_the_boot_the_host_and_the_pid_namespace() -> None:
    assert re.fullmatch(r"[0-9a-f]{12}", host_tag())


def test_a_long_output_name_still_gets_a_temporary_file(tmp_path: Path) -> None:
    target = tmp_path / ("x" * 240 + ".jsonl")
    with AtomicFile(str(target)) as out:
        assert len(os.fsencode(Path(out.write_path).name)) <= 255
        assert temp_pattern(target.name).fullmatch(Path(out.write_path).name)
        out.handle.write("x\n")
        out.commit()
    assert target.read_text() == "x\n"


# --- the outputs of a run land together -------------------------------------------------------------


def test_outputs_committed_together_land_only_at_the_end(tmp_path: Path) -> None:
    first, second = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    with commit_together():
        for path in (first, second):
            with AtomicFile(str(path)) as out:
                out.handle.write(f"{path.name}\n")
                out.commit()
        assert not first.exists() and not second.exists()
    assert first.read_text() == "a.jsonl\n" and second.read_text() == "b.jsonl\n"
    assert leftovers(tmp_path) == [] and [p.name for p in tmp_path.iterdir() if p.suffix == ".old"] == []


def test_an_error_after_a_commit_replaces_nothing(tmp_path: Path) -> None:
    first = tmp_path / "a.jsonl"
    first.write_text("old\n")
    with pytest.raises(RuntimeError), commit_together():
        with AtomicFile(str(first)) as out:
            out.handle.write("new\n")
            out.commit()
        raise RuntimeError("the second output failed")
    assert first.read_text() == "old\n"
    assert leftovers(tmp_path) == []


@pytest.mark.parametrize("existed", [True, False], ids=["replaced", "new"])
def test_a_failed_last_rename_puts_the_earlier_outputs_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, existed: bool
) -> None:
    first, second = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    if existed:
        first.write_text("old a\n")
    second.write_text("old b\n")
    real_replace = os.replace

    def replace(source: str, destination: str) -> None:
        if Path(destination) == second:
            raise OSError(errno.EIO, "Input/output error")
        real_replace(source, destination)

    monkeypatch.setattr(os, "replace", replace)
    with pytest.raises(OutputError, match=rf"^cannot write {second}: Input/output error$"), commit_together():
        for path in (first, second):
            with AtomicFile(str(path)) as out:
                out.handle.write("new\n")
                out.commit()
    assert first.read_text() == "old a\n" if existed else not first.exists()
    assert second.read_text() == "old b\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == (["a.jsonl", "b.jsonl"] if existed else ["b.jsonl"])


def test_a_nested_block_lands_with_the_outer_one(tmp_path: Path) -> None:
    first = tmp_path / "a.jsonl"
    with commit_together():
        with commit_together(), AtomicFile(str(first)) as out:
            out.commit()
        assert not first.exists()
    assert first.exists()


# --- outputs that must not be replaced ----------------------------------------------------------------


def test_a_symlink_loop_is_refused_and_stays_a_link(tmp_path: Path) -> None:
    loop = tmp_path / "out.jsonl"
    loop.symlink_to(loop)
    with pytest.raises(UsageError, match="too many levels of symbolic links"):
        AtomicFile(str(loop))
    assert loop.is_symlink() and leftovers(tmp_path) == []
