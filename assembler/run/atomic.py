"""Writers: every output lands whole or not at all, and never replaces what it should not.

A regular file is written to a temporary file beside it (``.NAME.<host>.<pid>.<hex>.tmp``, synced)
and renamed into place only when the run succeeds; a FIFO or a device is written straight into; a
symbolic link is written through to its target. The outputs of one run land together
(:func:`commit_together`): all are written and synced first, then renamed one after the other, and
if a rename fails the outputs renamed before it are put back. Write failures (a full disk, an I/O
error) are :class:`~assembler.errors.OutputError`, naming the output; an output that cannot be
written at all is refused before any work (:func:`assembler.run.paths.check_output`).

**Temporary files of a killed run** are removed by a later run writing the same output, and only
when they are provably dead: the name's ``<host>`` is this machine's and pid namespace's
(:func:`host_tag`: a hash of the boot id, the host name and the pid namespace), its pid is not a
live process here, and the exclusive ``flock`` its writer holds on it while it lives can be taken.
A run in another container sharing the folder, or on another host over NFS, has another
``<host>`` (and holds its lock), so its temporary file is never touched.
"""

from __future__ import annotations

import contextlib
import contextvars
import fcntl
import functools
import hashlib
import io
import os
import re
import secrets
import stat
import sys
from collections.abc import Iterator
from typing import IO, Any

from assembler.errors import OutputError, UsageError
from assembler.run.paths import check_output, shown
from assembler.run.signals import held_signals

__all__ = [
    "TEMP_SUFFIX",
    "AtomicFile",
    "commit_together",
    "host_tag",
    "remove_stale_temps",
    "temp_name",
    "temp_pattern",
]

STDIO = "-"


def _write_failure(name: str, exc: OSError) -> OutputError:
    return OutputError(f"cannot write {shown(name)}: {exc.strerror or exc}")


class _Sink(io.FileIO):
    """The raw file under an output's buffers: an ``OSError`` while writing (a full disk, an I/O
    error) becomes an :class:`OutputError` naming the output, whoever writes (the text layer, a
    Parquet writer). A broken pipe stays a ``BrokenPipeError`` (a reader that stopped early)."""

    shown_name = STDIO
    discarding = False

    def write(self, data: Any) -> int:
        if self.discarding:  # a run being cleaned up: its buffered bytes are not wanted
            return len(memoryview(data))
        try:
            return super().write(data) or 0
        except BrokenPipeError:
            raise
        except OSError as exc:
            raise _write_failure(self.shown_name, exc) from None


TEMP_SUFFIX = ".tmp"
OLD_SUFFIX = ".old"
_BUFFER = 1 << 20
_HOST_DIGITS = 12
_NAME_MAX = 255  # bytes of one file name on the usual file systems
_TEMP_EXTRA = len(".") + len(".") + _HOST_DIGITS + len(".4194304.") + 8 + len(TEMP_SUFFIX)


def _read(path: str) -> str:
    try:
        with open(path, encoding="ascii", errors="replace") as handle:
            return handle.read().strip()
    except OSError:
        return ""


@functools.cache
def host_tag() -> str:
    """Twelve hex digits naming this machine's boot and this pid namespace: a hash of the boot id
    (``/proc/sys/kernel/random/boot_id``), the host name and the pid namespace
    (``/proc/self/ns/pid``). A pid in a temporary file's name means something only where this is
    the same: another host (NFS), a reboot or another container has another tag."""
    try:
        namespace = os.readlink("/proc/self/ns/pid")
    except OSError:
        namespace = ""
    text = "\0".join((_read("/proc/sys/kernel/random/boot_id"), os.uname().nodename, namespace))
    return hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest()[:_HOST_DIGITS]


def _stem(name: str) -> str:
    """``name`` cut (by bytes) so that a temporary file's name stays within 255 bytes."""
    encoded = os.fsencode(name)
    room = _NAME_MAX - _TEMP_EXTRA
    return name if len(encoded) <= room else os.fsdecode(encoded[:room])


def temp_pattern(name: str) -> re.Pattern[str]:
    """The names of :class:`AtomicFile`'s temporary files for an output named ``name`` (no folder):
    ``.<name>.<host>.<pid>.<8 hex>.tmp`` (groups ``host`` and ``pid``; a long name is cut)."""
    return re.compile(
        rf"\.{re.escape(_stem(name))}\.(?P<host>[0-9a-f]{{{_HOST_DIGITS}}})\.(?P<pid>\d+)\.[0-9a-f]{{8}}"
        + re.escape(TEMP_SUFFIX)
    )


def temp_name(name: str, *, pid: int | None = None, host: str | None = None, suffix: str = TEMP_SUFFIX) -> str:
    """A new temporary file name for the output ``name`` (no folder): this process's pid and
    :func:`host_tag` unless given."""
    pid = os.getpid() if pid is None else pid
    return f".{_stem(name)}.{host or host_tag()}.{pid}.{secrets.token_hex(4)}{suffix}"


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's live process
        return True
    return True


def _remove_if_unlocked(path: str) -> bool:
    """Remove ``path`` if its exclusive lock can be taken (no live writer holds it)."""
    for flags in (os.O_RDONLY, os.O_WRONLY):  # a temporary keeps its output's mode: maybe write-only
        try:
            fd = os.open(path, flags | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK)
            break
        except PermissionError:
            continue
        except OSError:
            return False
    else:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        locked = os.fstat(fd)
        now = os.stat(path, follow_symlinks=False)
        if (now.st_dev, now.st_ino) != (locked.st_dev, locked.st_ino):
            return False  # the name was given to another file meanwhile
        os.unlink(path)
    except OSError:  # held by a live writer, locks not supported here, or removed meanwhile
        return False
    finally:
        os.close(fd)
    return True


def remove_stale_temps(target: str) -> list[str]:
    """Remove the temporary files a killed run left for ``target``; return them.

    Only names of :func:`temp_pattern` for that output are looked at, and one is removed only when
    it is provably dead: its host tag is :func:`host_tag`, its pid is no live process, and its
    lock can be taken. Anything else (another host's, another container's, a live run's, a file
    system without locks, the names of earlier versions) is left."""
    folder, name = os.path.split(target)
    pattern = temp_pattern(name)
    removed: list[str] = []
    try:
        entries = os.listdir(folder or ".")
    except OSError:
        return removed
    here = host_tag()
    for entry in entries:
        match = pattern.fullmatch(entry)
        if match is None or match["host"] != here or _alive(int(match["pid"])):
            continue
        stale = os.path.join(folder, entry)
        if _remove_if_unlocked(stale):
            removed.append(stale)
    return removed


class _Landing:
    """The outputs committed within one :func:`commit_together` block, renamed at its end."""

    def __init__(self) -> None:
        self.files: list[AtomicFile] = []

    def land(self) -> None:
        """Rename every file into place; if one fails, put the ones renamed before it back as they
        were and remove the rest's temporary files. A signal meanwhile is acted on once all is done
        (held): the renames are not cut in the middle."""
        landed: list[tuple[AtomicFile, str | None, bool]] = []  # (file, its target's old content, existed)
        with held_signals():
            old: str | None = None
            try:
                for index, file in enumerate(self.files):
                    last = index == len(self.files) - 1
                    old, existed = (None, True) if last else file._keep_old()
                    file._land()
                    landed.append((file, old, existed))
                    old = None
            except BaseException:
                for file, kept, existed in reversed(landed):
                    file._put_back(kept, existed)
                if old is not None:  # kept for the file whose rename failed
                    with contextlib.suppress(OSError):
                        os.unlink(old)
                self.abandon()
                raise
            for _, kept, _ in landed:
                if kept is not None:
                    with contextlib.suppress(OSError):
                        os.unlink(kept)
            for file in self.files:
                file._finish()

    def abandon(self) -> None:
        for file in self.files:
            file._abandon()


_LANDING: contextvars.ContextVar[_Landing | None] = contextvars.ContextVar("assembler_landing", default=None)


@contextlib.contextmanager
def commit_together() -> Iterator[None]:
    """The :class:`AtomicFile` outputs committed within the block land together at its end.

    Each :meth:`AtomicFile.commit` in the block writes and syncs its temporary file; when the block
    ends without an error, the files are renamed into place in commit order. The existing target
    of every file but the last is first kept under a hard link (``.NAME.<host>.<pid>.<hex>.old``),
    so that if a later rename fails the earlier outputs are put back as they were; an error or a
    signal in the block removes every temporary file and replaces nothing. What is left: a process
    killed (SIGKILL, power loss) between two renames keeps the ones done, and the ``.old`` file
    beside each holds its previous content; a target whose file system refuses hard links cannot
    be put back. Streamed outputs (standard output, FIFOs, devices) are written as they go and
    cannot be taken back. A block within another joins it: the outermost lands them all.
    """
    if _LANDING.get() is not None:
        yield
        return
    landing = _Landing()
    token = _LANDING.set(landing)
    try:
        yield
    except BaseException:
        landing.abandon()
        raise
    finally:
        _LANDING.reset(token)
    landing.land()


class AtomicFile:
    """An output file, written so that a failed run never leaves a partial one.

    * A regular file (or a new one) is written to a temporary file beside it, flushed to disk
      (``fsync``) and renamed into place on :meth:`commit` (within :func:`commit_together`: at the
      block's end, with the run's other outputs); leaving the ``with`` block without ``commit``
      (an error, Ctrl-C) removes the temporary. A new file gets the mode an ordinary file would
      (the umask applies); an overwritten one keeps its mode (and, where allowed, owner). Stale
      temporary files of killed runs for the same output are removed first
      (:func:`remove_stale_temps`); this one is locked (``flock``) while it lives.
    * A symlink is written through: the file it points to is replaced (beside the target), the
      link stays, as ``sort -o`` and ``cp`` do.
    * ``-`` (standard output), a FIFO, a character device and any other non-regular file are
      written straight through: nothing to rename, and streamed output cannot be taken back.

    An output that cannot be written (:func:`~assembler.run.paths.check_output`: a missing folder,
    a symlink loop, a write-protected file) is refused when it is opened. ``handle`` is text
    (UTF-8, ``\\n``; a character that cannot be encoded, such as the surrogate of a non-UTF-8 file
    name, is written as a ``\\uXXXX``-style escape) or binary. A failure to create or write the
    file raises :class:`OutputError` naming :attr:`path`.
    """

    def __init__(self, path: str | os.PathLike[str], *, binary: bool = False) -> None:
        self.path = os.fspath(path)
        self._tmp: str | None = None
        self._target = self.path
        self._closed = False
        self._waiting = False  # committed, to be renamed at the end of a commit_together block
        self._raw: _Sink | None = None
        self.handle: IO[Any]
        if self.path == STDIO:
            sys.stdout.flush()  # what was printed before comes first
            try:
                descriptor = sys.stdout.fileno()
            except (AttributeError, OSError, ValueError):  # a replaced sys.stdout (captured by a test)
                self._closed = True  # nothing of ours to close
                self.handle = sys.stdout.buffer if binary else sys.stdout
                return
            raw = _Sink(descriptor, "wb", closefd=False)
            raw.shown_name = "standard output"
        else:
            raw = self._open()
            raw.shown_name = self.path
        self._raw = raw
        buffered = io.BufferedWriter(raw, _BUFFER)
        self.handle = (
            buffered
            if binary
            else io.TextIOWrapper(buffered, encoding="utf-8", errors="backslashreplace", newline="\n")
        )

    def _open(self) -> _Sink:
        check_output(self.path)
        target = os.path.realpath(self.path) if os.path.islink(self.path) else self.path
        self._target = target
        try:
            info: os.stat_result | None = os.stat(target)
        except OSError:
            info = None
        if info is not None and stat.S_ISDIR(info.st_mode):
            raise UsageError(f"cannot write {shown(self.path)}: it is a folder")
        if info is not None and not stat.S_ISREG(info.st_mode):  # FIFO, device, socket: stream into it
            try:
                return _Sink(target, "wb")
            except OSError as exc:
                raise _write_failure(self.path, exc) from None
        folder = os.path.dirname(target) or "."
        remove_stale_temps(target)
        name = os.path.basename(target)
        while True:
            tmp = os.path.join(folder, temp_name(name))
            try:
                fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666)  # umask applies
            except FileExistsError:
                continue
            except OSError as exc:
                raise _write_failure(self.path, exc) from None
            break
        self._tmp = tmp
        try:
            with contextlib.suppress(OSError):  # no locks here (some network file systems): the name still guards it
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            if info is not None:
                _keep_mode(fd, info)
            return _Sink(fd, "wb", closefd=True)
        except BaseException:
            os.close(fd)
            os.unlink(tmp)
            raise

    def temporary_beside(self) -> str | None:
        """A new name for another temporary file beside this output's own, named as it is
        (:func:`temp_name`: this process's pid and host tag), so that a later run writing the same
        output removes it once this run is dead (:func:`remove_stale_temps`); ``None`` when the
        output streams (no temporary). Nothing is created."""
        if self._tmp is None:
            return None
        return os.path.join(os.path.dirname(self._tmp), temp_name(os.path.basename(self._target)))

    @property
    def write_path(self) -> str:
        """Where bytes go now (the temporary file, or the destination when streaming)."""
        return self._tmp or self._target

    def commit(self) -> None:
        """Flush and move the finished file into place (a streamed output: flush it). Within
        :func:`commit_together` the file is synced now and renamed at the block's end."""
        if self._closed:
            self.handle.flush()
            return
        try:
            self.handle.flush()
            if self._tmp is None:
                self._close()
                return
            os.fsync(self.handle.fileno())
        except BrokenPipeError:
            raise
        except OSError as exc:  # fsync, or a flush that failed before reaching the sink
            raise _write_failure(self.path, exc) from None
        landing = _LANDING.get()
        if landing is not None:
            self._waiting = True
            landing.files.append(self)
            return
        self._land()
        self._finish()

    def _land(self) -> None:
        """Rename the synced temporary file over the target (still open, so still locked)."""
        assert self._tmp is not None
        try:
            os.replace(self._tmp, self._target)
        except OSError as exc:
            raise _write_failure(self.path, exc) from None
        self._tmp = None

    def _finish(self) -> None:
        self._waiting = False
        self._close()
        _sync_folder(os.path.dirname(self._target) or ".")

    def _keep_old(self) -> tuple[str | None, bool]:
        """Before a rename that a later one may have to undo: a hard link to the target's present
        content, and whether the target exists."""
        old = os.path.join(os.path.dirname(self._target), temp_name(os.path.basename(self._target), suffix=OLD_SUFFIX))
        try:
            os.link(self._target, old, follow_symlinks=False)
        except FileNotFoundError:
            return None, False
        except OSError:  # no hard links here: this one cannot be put back
            return None, True
        return old, True

    def _put_back(self, old: str | None, existed: bool) -> None:
        """Undo :meth:`_land` (best effort): the kept content back, or a new target removed."""
        with contextlib.suppress(OSError):
            if old is not None:
                os.replace(old, self._target)
            elif not existed:
                os.unlink(self._target)

    def _abandon(self) -> None:
        self._waiting = False
        self.discard()

    def _close(self) -> None:
        self._closed = True
        with contextlib.suppress(OSError):  # discarding after a failed write: those bytes are not wanted
            self.handle.close()

    def discard(self) -> None:
        """Remove the temporary file (the destination is left as it was); a streamed output keeps
        what was written (best effort) and is closed. A file committed within
        :func:`commit_together` is left to the block."""
        if self._closed or self._waiting:
            return
        if self._tmp is None:
            with contextlib.suppress(Exception):  # the run's own error is the one reported
                self.handle.flush()
        if self._raw is not None:
            self._raw.discarding = True
        self._close()
        if self._tmp is None:
            return
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self._tmp)
        self._tmp = None

    def __enter__(self) -> AtomicFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.discard()


def _keep_mode(fd: int, info: os.stat_result) -> None:
    """Give a replacement the replaced file's mode (and owner, where this process may)."""
    os.fchmod(fd, stat.S_IMODE(info.st_mode))
    if (info.st_uid, info.st_gid) != (os.geteuid(), os.getegid()):
        with contextlib.suppress(OSError):
            os.fchown(fd, info.st_uid, info.st_gid)


def _sync_folder(folder: str) -> None:
    """Make the rename durable (best effort: not every file system lets a folder be opened)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
