"""What made a run and what it used, kept beside its logs so a number in a paper can be traced to its making.

``manifest.json`` holds one entry per session that wrote the run (a first run, then each ``--resume``): ctxcomp's
version and, from a checkout, its git commit and whether the tree was dirty; ctxcomp's prompt and scoring
versions (``core.versions``); the versions of the libraries that compute outputs; each data file's path, size
and sha256; the machine (CPU model and flags, cores, threads, GPUs and driver); the command line.  The driver
writes it under the run's lock; ``ctxcomp show RUN --manifest`` prints it and ``ctxcomp compare`` warns when two
runs differ in a version that can change outputs (:func:`version_differences`).

``cache_keys.jsonl`` lists the generation and embedding cache entries the run read or wrote, one line per unit of
work and cache (``{"cache", "folder", "keys"}``), so ``ctxcomp cache info --run`` can count them and
``ctxcomp cache clear --run`` remove them; a torn last line (a kill) only loses that unit's keys.

The facts about the session itself (command line, source, machine) are gathered in ``experiments.data.session``.
"""
from __future__ import annotations

import hashlib
import json
import os
import platform
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from core.caches import CacheUse
from core.files import append_lines, write_atomic
from core.paths import cache_root
from core.versions import OUTPUT_PACKAGES, output_versions, package_version
from experiments.data.records import RunFileError
from experiments.data.session import (
    _now,
    command_line,
    ctxcomp_source,
    machine,
    threads_used,
)

MANIFEST = "manifest.json"
CACHE_KEYS = "cache_keys.jsonl"
FORMAT = 1
_CHUNK = 1 << 20
_ENV = ("CTXCOMP_", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "CUDA_VISIBLE_DEVICES", "HF_HUB_OFFLINE")


# -- one session's record -----------------------------------------------------------------------------------

def session_record(data_files: Iterable[str | os.PathLike], argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Everything about this process that can change a run's numbers, and the data files it reads."""
    return {
        "started": _now(),
        "command": command_line(sys.argv if argv is None else argv),
        "cwd": os.getcwd(),
        "ctxcomp": ctxcomp_source(),
        "versions": output_versions(),
        "packages": {name: package_version(name) for name in OUTPUT_PACKAGES},
        "python": platform.python_version(),
        "machine": machine(),
        "environment": {k: v for k, v in sorted(os.environ.items()) if k.startswith(_ENV)},
        "data": [file_digest(p) for p in dict.fromkeys(str(p) for p in data_files)],
    }


# -- data files ---------------------------------------------------------------------------------------------

def file_digest(path: str | os.PathLike) -> dict[str, Any]:
    """``{"path", "size", "sha256"}`` of a data file; the sha256 is computed once per (path, size, mtime) and kept
    in the cache root's ``file_hashes`` (a cache that cannot be written only means computing it again)."""
    path = Path(path)
    try:
        st = path.stat()
    except OSError as err:
        return {"path": str(path), "size": None, "sha256": None, "error": err.strerror or type(err).__name__}
    resolved = str(path.resolve())
    stamp = [st.st_size, st.st_mtime_ns]
    store = _hash_store()
    known = store.get(resolved) if store is not None else None
    if known is not None and json.loads(known)[:2] == stamp:
        sha = json.loads(known)[2]
    else:
        sha = _sha256(path, st.st_size)
        if store is not None:
            try:
                store.set(resolved, json.dumps([*stamp, sha]))
            except Exception:  # noqa: BLE001 - a cache that cannot be written: the digest is still right
                pass
    return {"path": str(path), "size": st.st_size, "sha256": sha}


_stores: dict[Path, Any] = {}


def _hash_store() -> Any:
    folder = cache_root() / "file_hashes"
    if folder not in _stores:
        try:
            import diskcache

            _stores[folder] = diskcache.Cache(str(folder))
        except Exception:  # noqa: BLE001 - an unwritable cache root: hash without keeping the result
            _stores[folder] = None
    return _stores[folder]


def _sha256(path: Path, size: int) -> str:
    from core.progress import progress_bar

    digest = hashlib.sha256()
    with open(path, "rb") as fh, progress_bar(size, f"sha256 {path.name}", unit="B", enabled=size > 1 << 30,
                                              leave=False) as bar:
        while chunk := fh.read(_CHUNK):
            digest.update(chunk)
            bar.update(len(chunk))
    return digest.hexdigest()


# -- manifest.json ------------------------------------------------------------------------------------------

def read_manifest(run_dir: str | os.PathLike) -> dict[str, Any]:
    """The run's manifest (``{"format", "sessions": [...]}``); an empty one for a run made before manifests."""
    path = Path(run_dir) / MANIFEST
    if not path.is_file():
        return {"format": FORMAT, "sessions": []}
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise RunFileError(f"{path}: not valid JSON ({err}); delete it and the next session writes a new one") from None
    if not isinstance(manifest, dict) or not isinstance(manifest.get("sessions"), list):
        raise RunFileError(f"{path}: not a run manifest (a JSON object with sessions); delete it and the next "
                           "session writes a new one")
    return manifest


def add_session(run_dir: str | os.PathLike, session: Mapping[str, Any]) -> list[str]:
    """Append this session to the manifest (written atomically, under the run's lock); what differs from the
    sessions before it in a version that can change outputs (empty for a first session)."""
    manifest = read_manifest(run_dir)
    earlier = manifest["sessions"]
    notes = version_differences(earlier[-1], session, "the run's last session", "this session") if earlier else []
    manifest["sessions"] = [*earlier, dict(session)]
    write_atomic(Path(run_dir) / MANIFEST, json.dumps(manifest, indent=2, ensure_ascii=False))
    return notes


def end_session(run_dir: str | os.PathLike, **facts: Any) -> None:
    """Add what is known only at the end (when it ended, the threads the libraries ended up using) to the last
    session."""
    manifest = read_manifest(run_dir)
    if not manifest["sessions"]:
        return
    last = manifest["sessions"][-1]
    last["ended"] = _now()
    last.setdefault("machine", {})["threads"] = threads_used()
    last.update(facts)
    write_atomic(Path(run_dir) / MANIFEST, json.dumps(manifest, indent=2, ensure_ascii=False))


def output_relevant(session: Mapping[str, Any]) -> dict[str, Any]:
    """The versions in a session that can change outputs: ctxcomp's prompt and scoring versions, each library's,
    and each data file's sha256 (by file name)."""
    out: dict[str, Any] = {f"ctxcomp {k} version": v for k, v in (session.get("versions") or {}).items()}
    out.update({name: v for name, v in (session.get("packages") or {}).items() if name in OUTPUT_PACKAGES})
    for item in session.get("data") or []:
        if isinstance(item, Mapping) and item.get("sha256"):
            out[f"data {Path(str(item.get('path'))).name}"] = str(item["sha256"])[:12]
    return out


def version_differences(a: Mapping[str, Any], b: Mapping[str, Any], name_a: str = "A",
                        name_b: str = "B") -> list[str]:
    """One line per output-relevant version two sessions do not share (a library installed in only one counts;
    a data file read by only one does not)."""
    va, vb = output_relevant(a), output_relevant(b)
    keys = [k for k in dict.fromkeys([*va, *vb]) if not (k.startswith("data ") and (k not in va or k not in vb))]
    return [f"{k}: {va.get(k) or 'not installed'} in {name_a}, {vb.get(k) or 'not installed'} in {name_b}"
            for k in keys if va.get(k) != vb.get(k)]


def run_version_warnings(run_a: str | os.PathLike, run_b: str | os.PathLike) -> list[str]:
    """What ``ctxcomp compare`` warns about: output-relevant versions that differ between the two runs' last
    sessions, a run whose own sessions differ, and one run without a manifest when the other has one."""
    notes = []
    manifests = {name: read_manifest(run)["sessions"] for name, run in (("A", run_a), ("B", run_b))}
    for name, run in (("A", run_a), ("B", run_b)):
        if not manifests[name] and any(manifests.values()):
            notes.append(f"run {name} ({run}) has no {MANIFEST} (made before ctxcomp kept one): the versions that "
                         "made it cannot be compared with the other run's")
    if manifests["A"] and manifests["B"]:
        differs = version_differences(manifests["A"][-1], manifests["B"][-1])
        if differs:
            notes.append("the runs were made by different versions, which alone can change outputs: "
                         + "; ".join(differs))
    for name, sessions in manifests.items():
        mixed = sorted({d.split(":", 1)[0] for s in sessions[:-1] for d in version_differences(s, sessions[-1])})
        if mixed:
            notes.append(f"run {name}'s sessions differ among themselves in {', '.join(mixed)} "
                         f"(`ctxcomp show {run_a if name == 'A' else run_b} --manifest`)")
    return notes


# -- cache_keys.jsonl ---------------------------------------------------------------------------------------

def append_cache_keys(run_dir: str | os.PathLike, entries: Iterable[CacheUse]) -> None:
    """Record the cache entries a unit used (``core.caches.LEDGER.take()``): one line per cache folder."""
    lines = [json.dumps({"cache": u.cache, "folder": u.folder, "keys": list(u.keys),
                         **({"unrecorded": u.unrecorded} if u.unrecorded else {})}, ensure_ascii=False).encode() + b"\n"
             for u in entries if u.keys or u.unrecorded]
    append_lines(Path(run_dir) / CACHE_KEYS, lines, sync=False)


@dataclass
class RunCacheUse:
    """The entries of one cache folder a run used: the keys it recorded, and how many it used unrecorded (a
    corpus indexed in one call of more than ``core.caches.MAX_KEYS_PER_CALL`` texts)."""

    keys: set[str] = field(default_factory=set)
    unrecorded: int = 0


def read_cache_keys(run_dir: str | os.PathLike) -> dict[tuple[str, str], RunCacheUse]:
    """The cache entries a run recorded, by (cache, folder); lines that do not parse (a torn tail) are skipped."""
    path = Path(run_dir) / CACHE_KEYS
    out: dict[tuple[str, str], RunCacheUse] = {}
    if not path.is_file():
        return out
    with open(path, "rb") as fh:
        for line in fh:
            try:
                item = json.loads(line)
                use = out.setdefault((str(item["cache"]), str(item["folder"])), RunCacheUse())
                use.keys.update(map(str, item["keys"]))
                use.unrecorded += int(item.get("unrecorded", 0))
            except (ValueError, KeyError, TypeError, AttributeError):
                continue
    return out


# -- reading it ---------------------------------------------------------------------------------------------

def describe_manifest(manifest: Mapping[str, Any]) -> str:
    """The manifest as a person reads it (``ctxcomp show RUN --manifest``): one block per distinct session, so a
    sequential run's looks (one session each, alike but for their times) read as one block; the file itself is
    the exact record."""
    groups: list[tuple[list[int], list[Mapping[str, Any]], list[str]]] = []
    for i, s in enumerate(manifest.get("sessions") or [], 1):
        body = _session_lines(s)
        if groups and groups[-1][2] == body:
            groups[-1][0].append(i)
            groups[-1][1].append(s)
        else:
            groups.append(([i], [s], body))
    blocks = []
    for numbers, sessions, body in groups:
        ended = sessions[-1].get("ended", "did not end (killed?)")
        name = (f"session {numbers[0]}" if len(numbers) == 1 else
                f"sessions {numbers[0]}-{numbers[-1]} ({len(numbers)} alike but for their times)")
        blocks.append("\n".join([f"{name}: {sessions[0].get('started')} -> {ended}", *body]))
    return "\n\n".join(blocks) or "no sessions recorded (a run made before ctxcomp kept a manifest)"


def _session_lines(s: Mapping[str, Any]) -> list[str]:
    """One session's block without its first line (its times)."""
    src, m = s.get("ctxcomp") or {}, s.get("machine") or {}
    commit = (f", commit {src['commit'][:12]}" + (f" (dirty: {len(src.get('changed') or [])} tracked file(s) "
                                                   "changed)" if src.get("dirty") else " (clean)")
              if src.get("commit") else ", not from a git checkout")
    threads = m.get("threads") or {}
    gpus_text = "; ".join(f"{g.get('name')} (driver {g.get('driver')})" for g in m.get("gpus") or []) or "none"
    lines = [
        f"  command: {' '.join(s.get('command') or [])}  (in {s.get('cwd')})",
        f"  ctxcomp: {src.get('version')}{commit}, from {src.get('path')}",
        "  versions: " + ", ".join(f"{k} {v}" for k, v in (s.get("versions") or {}).items()),
        "  packages: " + ", ".join(f"{k} {v}" for k, v in (s.get("packages") or {}).items() if v)
        + f"; python {s.get('python')}",
        f"  machine: {m.get('cpu')}, {m.get('cores')} cores ({m.get('cores_usable')} usable), "
        f"{m.get('memory_gb')} GB; {m.get('platform')}",
        f"  threads: torch {threads.get('torch')}, OMP_NUM_THREADS {threads.get('OMP_NUM_THREADS')}, "
        f"MKL_NUM_THREADS {threads.get('MKL_NUM_THREADS')}",
        f"  gpus: {gpus_text}",
        f"  cpu flags ({len(m.get('cpu_flags') or [])}): {' '.join(m.get('cpu_flags') or [])}",
        "  environment: " + (", ".join(f"{k}={v}" for k, v in (s.get("environment") or {}).items()) or "-"),
    ]
    data = s.get("data") or []
    lines.append(f"  data: {len(data)} file(s)" + ("" if data else " (hub or generated data)"))
    lines += [f"    {d.get('path')}: {d.get('size')} bytes, sha256 {d.get('sha256') or d.get('error')}" for d in data]
    return lines


__all__ = ["CACHE_KEYS", "MANIFEST", "RunCacheUse", "add_session", "append_cache_keys", "describe_manifest",
           "end_session", "file_digest", "output_relevant", "read_cache_keys", "read_manifest",
           "run_version_warnings", "session_record", "version_differences"]
