"""Download a catalogued data file, check it against its recorded sha256, and only then put it in place.

The bytes stream into a hidden ``.NAME.PID.part`` file beside the target while their sha256 is computed;
a download whose length or digest is not the published file's is deleted and reported in one line, so the
data directory never holds a truncated or corrupt file under the real name.  A file already there is
checked the same way and kept when it matches.  When every URL fails (offline, a proxy, a moved file) the
one-line error names the URL and the path to put the file at by hand.  A catalogued file without a recorded
sha256 yet is kept unchecked, and its digest is returned (``Fetched.sha256``) so that it can be recorded.
"""
from __future__ import annotations

import errno
import hashlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from core.errors import UserError
from core.files import disk_error
from core.progress import progress_bar
from experiments.data.catalog import DataFile

CHUNK = 1 << 16
TIMEOUT_S = 60.0


class FetchError(UserError):
    """A data file could not be fetched, or what came was not the published file; nothing was kept."""


@dataclass(frozen=True)
class Fetched:
    """What ``fetch`` did: ``status`` is ``present`` (already there and verified) or ``downloaded``; ``sha256``:
    the file's digest, measured here when the catalogue has none to check it against."""

    item: DataFile
    path: Path
    status: Literal["present", "downloaded"]
    url: str | None = None
    sha256: str | None = None


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def verify(path: Path, item: DataFile) -> str | None:
    """None when ``path`` is the published file (or, without a recorded sha256, of its recorded size if any);
    otherwise what is wrong with it, in a few words."""
    size = path.stat().st_size
    if item.size is not None and size != item.size:
        return f"{size} bytes, not {item.size}"
    if item.sha256 is None:
        return None
    digest = sha256_file(path)
    return None if digest == item.sha256 else f"sha256 {digest[:12]}..., not {item.sha256[:12]}..."


def fetch(item: DataFile, root: str | os.PathLike, *, progress: bool = True, timeout: float = TIMEOUT_S) -> Fetched:
    """Make ``root/<item.file>`` the published file: keep it when it already verifies, else download it."""
    dest = Path(root) / item.file
    if dest.is_file() and verify(dest, item) is None:
        return Fetched(item, dest, "present", sha256=None if item.verified else sha256_file(dest))
    try:
        dest.parent.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise disk_error(dest.parent, err) from None
    reasons = []
    for url in item.urls:
        try:
            digest = _download(url, dest, item, progress=progress, timeout=timeout)
            return Fetched(item, dest, "downloaded", url, None if item.verified else digest)
        except _Refused as err:
            reason = " ".join(str(err).split())
            reasons.append(f"{url}: {reason}" if len(item.urls) > 1 else reason)
    raise FetchError(f"cannot fetch {item.name} ({'; '.join(reasons)}); nothing was kept. Download "
                     f"{item.urls[0]} by hand and put it at {dest}"
                     + (f" (sha256 {item.sha256})" if item.verified else " (no sha256 is recorded for it yet)"))


class _Refused(Exception):
    """One URL did not give the published file."""


def _download(url: str, dest: Path, item: DataFile, *, progress: bool, timeout: float) -> str:
    import httpx

    tmp = dest.with_name(f".{dest.name}.{os.getpid()}.part")
    try:
        with httpx.stream("GET", url, follow_redirects=True, timeout=timeout) as response:
            if response.status_code != 200:
                raise _Refused(f"HTTP {response.status_code} {response.reason_phrase}".strip())
            digest, got = _save(response, tmp, item, progress)
        if item.size is not None and got < item.size:
            raise _Refused(f"truncated download: {got} of {item.size} bytes")
        if item.sha256 is not None and digest != item.sha256:
            raise _Refused(f"corrupt download: sha256 {digest[:12]}..., the recorded one is {item.sha256[:12]}...")
        os.replace(tmp, dest)
        return digest
    except httpx.TransportError as err:
        raise _Refused(_transport_reason(err)) from None
    except OSError as err:
        if err.errno in (errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM):
            raise disk_error(dest, err) from None
        raise
    finally:
        tmp.unlink(missing_ok=True)


def _save(response, tmp: Path, item: DataFile, progress: bool) -> tuple[str, int]:
    """Stream the body into ``tmp``; (sha256, bytes).  More bytes than the published file stop at once."""
    digest, got = hashlib.sha256(), 0
    with open(tmp, "wb") as fh, progress_bar(item.size, item.name, unit="B", enabled=progress) as bar:
        bar.unit_scale, bar.unit_divisor = True, 1024
        for block in response.iter_bytes(CHUNK):
            got += len(block)
            if item.size is not None and got > item.size:
                raise _Refused(f"corrupt download: longer than the published {item.size} bytes")
            fh.write(block)
            digest.update(block)
            bar.update(len(block))
        fh.flush()
        os.fsync(fh.fileno())
    return digest.hexdigest(), got


def _transport_reason(err: Exception) -> str:
    import httpx

    if isinstance(err, httpx.ConnectError):
        return f"no connection, offline? {err or type(err).__name__}"
    if isinstance(err, httpx.TimeoutException):
        return f"timed out ({type(err).__name__})"
    if isinstance(err, httpx.RemoteProtocolError):
        return f"the connection broke off mid-download, truncated ({err})"
    return f"{type(err).__name__}: {err}"


__all__ = ["FetchError", "Fetched", "fetch", "sha256_file", "verify"]
