"""Writing files so that a kill, a full disk or a read-only folder never leaves a torn one.

``write_atomic`` (and ``open_atomic``, for content written piece by piece) writes
a temporary file beside the target and renames it into place: readers see the
old or the new content, never a mix.  ``append_lines``
adds whole lines to a log with a single ``write`` and one ``fsync``; a short
write (a disk that filled up mid-line) is undone by cutting the file back to
where the lines started, so the log never holds a torn line in its middle.
A killed process loses nothing a ``write`` finished (the kernel holds it); the
``fsync`` is what survives a power loss, so a run syncs once per batch of
lines, not once per line.  Both turn
ENOSPC and a read-only folder into one ``DiskError`` that names the path and
says what to do.
"""
from __future__ import annotations

import contextlib
import errno
import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import BinaryIO

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


@contextlib.contextmanager
def open_atomic(path: str | os.PathLike, *, sync: bool = True) -> Iterator[BinaryIO]:
    """A binary handle whose bytes become ``path`` only when the block ends without an error.

    They go to a temporary file beside ``path``, are fsynced (unless ``sync=False``) and renamed into
    place; an error (a full disk, a kill, a bad record) leaves ``path`` as it was and no temporary file
    behind.  ENOSPC and a read-only or forbidden folder become one ``DiskError`` naming ``path``.
    """
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "wb") as fh:
            yield fh
            fh.flush()
            if sync:
                os.fsync(fh.fileno())
        os.replace(tmp, path)
    except OSError as err:
        _discard(tmp)
        if err.errno in (errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM):
            raise disk_error(path, err) from None
        raise
    except BaseException:
        _discard(tmp)
        raise


def write_atomic(path: str | os.PathLike, data: str | bytes, *, sync: bool = True) -> None:
    """Write a whole file (text as UTF-8) so readers see the old or the new content, never a mix.

    ``sync=False`` skips the ``fsync``: still whole against a kill, but a power loss may leave the file empty
    (for files that can be written again, such as a run's prompt files)."""
    with open_atomic(path, sync=sync) as fh:
        fh.write(data.encode("utf-8") if isinstance(data, str) else data)


def append_lines(path: str | os.PathLike, lines: Sequence[bytes], *, sync: bool = True) -> None:
    """Append complete lines (each ending in a newline) with a single write, then one fsync.

    A short or failed write is cut back off, so a full disk leaves the log as
    it was before these lines; the error then names the path.
    """
    if not lines:
        return
    if not all(line.endswith(b"\n") for line in lines):
        raise ValueError("append_lines takes complete lines, each ending in a newline")
    payload = b"".join(lines)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    except OSError as err:
        raise disk_error(path, err) from None
    start = os.fstat(fd).st_size
    try:
        written = os.write(fd, payload)
        if written != len(payload):
            raise OSError(errno.ENOSPC, f"short write: {written} of {len(payload)} bytes")
        if sync:
            os.fsync(fd)
    except OSError as err:
        try:
            os.ftruncate(fd, start)
        except OSError:
            pass
        raise disk_error(path, err) from None
    finally:
        os.close(fd)


def append_line(path: str | os.PathLike, line: bytes) -> None:
    """Append one complete line (ending in a newline) and fsync it (``append_lines`` of one line)."""
    append_lines(path, [line])


def load_yaml(text: str) -> object:
    """YAML the project ships (task tables, the data catalogue), parsed by libyaml where PyYAML has it: the
    pure-Python parser took about a second of every dry run over these files.  Users' configs keep
    ``yaml.safe_load``, whose errors the config loader words."""
    import yaml

    return yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))  # noqa: S506 (a safe loader)


def _discard(path: Path) -> None:
    try:
        path.unlink()
    except OSError:
        pass


__all__ = ["DiskError", "append_line", "append_lines", "disk_error", "load_yaml", "open_atomic", "write_atomic"]
