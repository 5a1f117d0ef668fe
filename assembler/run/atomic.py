"""Writers: every output lands whole or not at all, and never replaces what it should not.

A regular file is written to a temporary file beside it (``.NAME.<pid>.<hex>.tmp``, synced) and
renamed into place only when the run succeeds; a FIFO or a device is written straight into; a
symbolic link is written through to its target. Temporary files left by a killed run are removed
by a later run writing the same output once their process is gone. Write failures (a full disk,
an I/O error) are :class:`~assembler.errors.OutputError`, naming the output.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import secrets
import stat
import sys
from typing import IO, Any

from assembler.errors import OutputError, UsageError
from assembler.run.paths import shown

__all__ = ["TEMP_SUFFIX", "AtomicFile", "remove_stale_temps", "temp_pattern"]

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
_BUFFER = 1 << 20


def temp_pattern(name: str) -> re.Pattern[str]:
    """The names of :class:`AtomicFile`'s temporary files for an output named ``name`` (no folder):
    ``.<name>.<pid>.<8 hex>.tmp``; the pid tells whether their writer still lives."""
    return re.compile(rf"\.{re.escape(name)}\.(\d+)\.[0-9a-f]{{8}}{re.escape(TEMP_SUFFIX)}")


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


def remove_stale_temps(target: str) -> list[str]:
    """Remove the temporary files a killed run left for ``target`` (only names of
    :func:`temp_pattern` for that output, and only when their process is dead); return them."""
    folder, name = os.path.split(target)
    pattern = temp_pattern(name)
    removed: list[str] = []
    try:
        entries = os.listdir(folder or ".")
    except OSError:
        return removed
    for entry in entries:
        match = pattern.fullmatch(entry)
        if match is None or _alive(int(match.group(1))):
            continue
        stale = os.path.join(folder, entry)
        try:
            os.unlink(stale)
        except OSError:
            continue
        removed.append(stale)
    return removed


class AtomicFile:
    """An output file, written so that a failed run never leaves a partial one.

    * A regular file (or a new one) is written to a temporary file beside it, flushed to disk
      (``fsync``) and renamed into place on :meth:`commit`; leaving the ``with`` block without
      ``commit`` (an error, Ctrl-C) removes the temporary. A new file gets the mode an ordinary
      file would (the umask applies); an overwritten one keeps its mode (and, where allowed, owner).
      Temporary files of a killed run for the same output are removed first.
    * A symlink is written through: the file it points to is replaced (beside the target), the
      link stays, as ``sort -o`` and ``cp`` do.
    * ``-`` (standard output), a FIFO, a character device and any other non-regular file are
      written straight through: nothing to rename, and streamed output cannot be taken back.

    ``handle`` is text (UTF-8, ``\\n``; a character that cannot be encoded, such as the surrogate
    of a non-UTF-8 file name, is written as a ``\\uXXXX``-style escape) or binary. A failure to
    create or write the file raises :class:`OutputError` naming :attr:`path`.
    """

    def __init__(self, path: str | os.PathLike[str], *, binary: bool = False) -> None:
        self.path = os.fspath(path)
        self._tmp: str | None = None
        self._target = self.path
        self._closed = False
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
        if not os.path.exists(folder):
            raise UsageError(f"cannot write {shown(self.path)}: folder {shown(folder)} does not exist")
        if not os.path.isdir(folder):
            raise UsageError(f"cannot write {shown(self.path)}: {shown(folder)} is not a folder")
        remove_stale_temps(target)
        name = os.path.basename(target)
        while True:
            tmp = os.path.join(folder, f".{name}.{os.getpid()}.{secrets.token_hex(4)}{TEMP_SUFFIX}")
            try:
                fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666)  # umask applies
            except FileExistsError:
                continue
            except OSError as exc:
                raise _write_failure(self.path, exc) from None
            break
        self._tmp = tmp
        try:
            if info is not None:
                _keep_mode(fd, info)
            return _Sink(fd, "wb", closefd=True)
        except BaseException:
            os.close(fd)
            os.unlink(tmp)
            raise

    @property
    def write_path(self) -> str:
        """Where bytes go now (the temporary file, or the destination when streaming)."""
        return self._tmp or self._target

    def commit(self) -> None:
        """Flush and move the finished file into place (a streamed output: flush it)."""
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
        self._close()
        try:
            os.replace(self._tmp, self._target)
        except OSError as exc:
            raise _write_failure(self.path, exc) from None
        self._tmp = None
        _sync_folder(os.path.dirname(self._target) or ".")

    def _close(self) -> None:
        self._closed = True
        with contextlib.suppress(OSError):  # discarding after a failed write: those bytes are not wanted
            self.handle.close()

    def discard(self) -> None:
        """Remove the temporary file (the destination is left as it was); a streamed output keeps
        what was written (best effort) and is closed."""
        if self._closed:
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
