"""Writing files so that a kill, a full disk or a read-only folder never leaves a torn one.

``write_atomic`` writes a temporary file beside the target and renames it into
place: readers see the old or the new content, never a mix.  ``append_line``
adds one line to a log with a single ``write`` and an ``fsync``; a short write
(a disk that filled up mid-line) is undone by cutting the file back to where
the line started, so the log never holds a torn line in its middle.  Both turn
ENOSPC and a read-only folder into one ``DiskError`` that names the path and
says what to do.
"""
from __future__ import annotations

import errno
import os
from pathlib import Path

from core.errors import UserError


class DiskError(UserError):
    """The disk refused a write: it is full, read-only, or the folder may not be written."""


def disk_error(path: str | os.PathLike, err: OSError) -> DiskError:
    """One line for an ``OSError`` of writing ``path``; what a user can do about it."""
    reason = {errno.ENOSPC: "the disk is full; free some space", errno.EDQUOT: "the disk quota is exhausted",
              errno.EROFS: "the file system is read-only; write elsewhere (--out)",
              errno.EACCES: "permission denied; write elsewhere (--out) or fix the folder's permissions",
              errno.EPERM: "permission denied; write elsewhere (--out) or fix the folder's permissions"}
    hint = reason.get(err.errno or 0, err.strerror or type(err).__name__)
    return DiskError(f"cannot write {path}: {hint}; nothing half-written was kept, so running the same command "
                     "again continues where it stopped")


def write_atomic(path: str | os.PathLike, data: str | bytes) -> None:
    """Write a whole file (text as UTF-8) so readers see the old or the new content, never a mix."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    payload = data.encode("utf-8") if isinstance(data, str) else data
    try:
        with open(tmp, "wb") as fh:
            fh.write(payload)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except OSError as err:
        _discard(tmp)
        if err.errno in (errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM):
            raise disk_error(path, err) from None
        raise


def append_line(path: str | os.PathLike, line: bytes) -> None:
    """Append one complete line (it must end in a newline) with a single write, then fsync.

    A short or failed write is cut back off, so a full disk leaves the log as
    it was before this line; the error then names the path.
    """
    if not line.endswith(b"\n"):
        raise ValueError("append_line takes one complete line, ending in a newline")
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    except OSError as err:
        raise disk_error(path, err) from None
    start = os.fstat(fd).st_size
    try:
        written = os.write(fd, line)
        if written != len(line):
            raise OSError(errno.ENOSPC, f"short write: {written} of {len(line)} bytes")
        os.fsync(fd)
    except OSError as err:
        try:
            os.ftruncate(fd, start)
        except OSError:
            pass
        raise disk_error(path, err) from None
    finally:
        os.close(fd)


def _discard(path: Path) -> None:
    try:
        path.unlink()
    except OSError:
        pass


__all__ = ["DiskError", "append_line", "disk_error", "write_atomic"]
