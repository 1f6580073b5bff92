"""The public data files ctxcomp knows by name, and where they lie on this machine.

``catalog.yaml`` beside this module lists each file: its name (``leval/financial_qa``), where it lies under
the data directory, the pinned URLs it is published at, its sha256 and size, and its licence.  A file whose
sha256 has not been established yet has none (``checked`` says so); it is fetched unchecked, and its digest
is printed so that it can be recorded once checked.  The data
directory is ``$CTXCOMP_DATA_DIR``, else ``<cache root>/data`` (``~/.cache/ctxcomp/data``), read at call
time.  :func:`local_file` is the one place a data name becomes a path; ``experiments.data.fetch``
downloads what is missing (``ctxcomp data get NAME``).
"""
from __future__ import annotations

import difflib
import functools
import os
import re
from dataclasses import dataclass
from pathlib import Path

from core.errors import UserError
from core.files import load_yaml
from core.paths import cache_root

CATALOG = Path(__file__).with_name("catalog.yaml")
_SHA256 = re.compile(r"^[0-9a-f]{64}$")


class MissingDataError(UserError):
    """A data file named in a config or a command is not in the data directory (or not the published one)."""


@dataclass(frozen=True)
class DataFile:
    """One published file: ``name`` as configs write it, ``file`` its place under the data directory."""

    name: str
    file: str
    urls: tuple[str, ...]
    sha256: str | None  # None: not recorded yet (``checked`` says why); a download is kept unchecked, its digest shown
    size: int | None
    licence: str
    about: str = ""
    checked: str = ""

    @property
    def verified(self) -> bool:
        """Whether downloads are checked against a recorded sha256 (and size)."""
        return self.sha256 is not None

    def path(self, root: str | os.PathLike | None = None) -> Path:
        """Where the file lies under ``root`` (default: the data directory), present or not."""
        return Path(root if root is not None else data_dir()) / self.file

    def get_command(self) -> str:
        return f"ctxcomp data get {self.name}"


def data_dir() -> Path:
    """``$CTXCOMP_DATA_DIR``, else ``<cache root>/data``."""
    explicit = os.environ.get("CTXCOMP_DATA_DIR")
    return Path(explicit).expanduser() if explicit else cache_root() / "data"


@functools.lru_cache(maxsize=None)
def _load(path: Path) -> dict[str, DataFile]:
    raw = load_yaml(path.read_text(encoding="utf-8")) or {}
    files = raw.get("files")
    if not isinstance(files, dict) or not files:
        raise ValueError(f"{path}: `files` must map data names to entries")
    out = {}
    for name, entry in files.items():
        size = entry.get("size")
        item = DataFile(name=name, file=entry["file"], urls=tuple(entry["urls"]), sha256=entry.get("sha256"),
                        size=None if size is None else int(size), licence=entry["licence"], about=entry.get("about", ""),
                        checked=entry.get("checked", ""))
        parts = Path(item.file).parts
        digest_ok = _SHA256.match(item.sha256) and item.size is not None if item.verified else bool(item.checked)
        if not digest_ok or not item.urls or Path(item.file).is_absolute() or ".." in parts:
            raise ValueError(f"{path}: entry {name!r} needs a relative file inside the data directory, "
                             "a lowercase hex sha256 with its size (or `checked` saying why there is none yet) "
                             "and at least one URL")
        out[name] = item
    return out


def catalog() -> dict[str, DataFile]:
    """Every known data file by name, in the catalog's order."""
    return _load(CATALOG)


def entry(name: str) -> DataFile:
    """The catalog entry for ``name``; an unknown name is one line with the closest known names."""
    files = catalog()
    if name in files:
        return files[name]
    stem = name.rsplit("/", 1)[-1].split(".")[0]
    close = [key for key in files if key.rsplit("/", 1)[-1] == stem] or \
        difflib.get_close_matches(name, list(files), n=3, cutoff=0.8)
    hint = f"; did you mean {', '.join(close)}?" if close else "; `ctxcomp data list` shows them all"
    raise MissingDataError(f"unknown data name {name!r}{hint}")


def known_data_name(name: str) -> str:
    """``name`` when the catalog knows it (a config check); otherwise the error of :func:`entry`."""
    return entry(name).name


def local_file(name: str, root: str | os.PathLike | None = None) -> Path:
    """The path of data file ``name`` in the data directory; one line naming ``ctxcomp data get`` when it is
    missing, or when its size is not the published file's (a truncated or edited copy)."""
    item = entry(name)
    path = item.path(root)
    if not path.is_file():
        where = "$CTXCOMP_DATA_DIR" if root is None and os.environ.get("CTXCOMP_DATA_DIR") else "the data directory"
        raise MissingDataError(f"data {name} is not in {where} ({path} is missing); fetch it with: "
                               f"{item.get_command()}")
    size = path.stat().st_size
    if item.size is not None and size != item.size:
        raise MissingDataError(f"{path} has {size} bytes, the published {name} has {item.size}; fetch it again "
                               f"with: {item.get_command()}")
    return path


__all__ = ["CATALOG", "DataFile", "MissingDataError", "catalog", "data_dir", "entry", "known_data_name", "local_file"]
