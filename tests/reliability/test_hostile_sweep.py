"""The hostile sweep: a table of bad inputs over every command form of ``ctxcomp``, each run through the real
entry point (``experiments.cli.app.main``) in this process, and a sample of them again in a subprocess.

For every case that must be refused: the documented exit code (2), one line on stderr starting with ``error:``
(the last line, and the only one of its kind: news the command printed while it worked, such as "… continuing
it", may come before it), no traceback, and nothing made or changed outside the case's run directory (and the
cache).  A few cases
are hostile but valid (labels and names with ``../``, ``/``, NUL, 300 characters; a torn last line a kill
left): those must succeed and keep every file inside the run directory.  The counts go to the suite's figures
(``hostile_sweep``), which ``docs/reliability.md`` quotes.
"""
from __future__ import annotations

import copy
import gzip
import os
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Callable

import pytest
import yaml

from experiments.data.store import write_jsonl
from tests.support.in_process_cli import run_main

GOOD_LB = Path(__file__).resolve().parent / "bad_inputs" / "good.jsonl"

BASE: dict[str, Any] = {
    "name": "sweep",
    "tasks": [{"name": "nq_multidoc", "synthetic": {"kind": "multidoc_qa", "n": 3, "num_docs": 3,
                                                     "words_per_doc": 20, "seed": 0}}],
    "compressors": ["full"],
    "readers": ["extractive"],
    "batch_size": 4,
}


def cfg(*edits: tuple[str, Any]) -> Callable[[SimpleNamespace], dict]:
    """A config: BASE with each ``(dotted.key, value)`` set (a value of DROP removes the key)."""

    def make(p: SimpleNamespace) -> dict:
        data = copy.deepcopy(BASE)
        for dotted, value in edits:
            value = _resolve(value, p)
            *parents, last = dotted.split(".")
            node: Any = data
            for key in parents:
                node = node[int(key)] if isinstance(node, list) else node[key]
            if value is DROP:
                del node[last]
            elif isinstance(node, list):
                node[int(last)] = value
            else:
                node[last] = value
        return data

    return make


DROP = object()


def _resolve(value: Any, p: SimpleNamespace) -> Any:
    """``value`` with every callable inside it called with the sandbox (paths known only when a case runs)."""
    if callable(value):
        return _resolve(value(p), p)
    if isinstance(value, dict):
        return {k: _resolve(v, p) for k, v in value.items()}
    if isinstance(value, list):
        return [_resolve(v, p) for v in value]
    return value


def retrieval(**params: Any) -> list[dict]:
    return [{"name": "retrieval", "params": {"retriever": "bm25", "top_n": 2, "chunk_size": 20, **params}}]


def openai(**params: Any) -> list[dict]:
    return [{"name": "openai", "params": {"model": "m", "base_url": "http://127.0.0.1:9/v1", **params}}]


def data_task(path: Callable[[SimpleNamespace], Any], name: str = "hotpotqa") -> Callable[[SimpleNamespace], list]:
    return lambda p: [{"name": name, "path": str(path(p))}]


def bad_data(id: str, name: str, content: bytes, needles: tuple[str, ...] | str) -> "Case":
    """``ctxcomp run`` on a config whose one task reads ``content`` from the file ``name``."""
    return C(id, *R, config=cfg(("tasks", data_task(lambda p: p.case / name))), files={name: content},
             needles=needles)


@dataclass(frozen=True)
class Case:
    """One bad input: the arguments (``{placeholders}`` filled from the sandbox), the files it needs, and what
    must happen.  ``code`` 2 (a refusal) or 0 (hostile but valid: it must succeed and stay inside)."""

    id: str
    args: tuple[str, ...]
    needles: tuple[str, ...] = ()
    code: int = 2
    config: Callable[[SimpleNamespace], Any] | None = None  # written to {cfg} (a dict as YAML, str or bytes as is)
    files: dict[str, bytes] = field(default_factory=dict)  # written into {case}/NAME
    run: Callable[[Path], None] | None = None  # applied to {run}, a fresh copy of a finished run
    stdin: str | None = None
    env: dict[str, str] = field(default_factory=dict)  # set while the case runs ({placeholders} filled)
    disk: str | None = None  # the run directory {out} lies on a 2 MB tmpfs: "full" (96 kB left), "full-run"
    # (a finished run, then not a byte left) or "ro" (a finished run, then remounted read-only)


def C(id: str, *args: str, needles: tuple[str, ...] | str = (), **kw: Any) -> Case:
    return Case(id, tuple(args), (needles,) if isinstance(needles, str) else tuple(needles), **kw)


def in_log(name: str, line: bytes, at: int = 1) -> Callable[[Path], None]:
    """Put ``line`` after line ``at`` of the run's log ``name`` (a corrupt line in the middle)."""

    def corrupt(run: Path) -> None:
        lines = (run / name).read_bytes().splitlines(keepends=True)
        (run / name).write_bytes(b"".join(lines[:at]) + line + b"".join(lines[at:]))

    return corrupt


def replace(name: str, data: bytes | None) -> Callable[[Path], None]:
    """Overwrite (or, with None, delete) one file of the run; a name ending in / becomes a directory."""

    def corrupt(run: Path) -> None:
        target = run / name.rstrip("/")
        if target.is_dir():
            shutil.rmtree(target)
        else:
            target.unlink(missing_ok=True)
        if name.endswith("/"):
            target.mkdir()
        elif data is not None:
            target.write_bytes(data)

    return corrupt


def torn_tail(run: Path) -> None:
    with open(run / "predictions.jsonl", "ab") as fh:
        fh.write(b'{"task": "nq_multidoc", "id": "cut-by-a-ki')


def lock_held(run: Path) -> None:
    import fcntl

    fh = open(run / ".lock", "w")
    fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
    _HELD.append(fh)


_HELD: list = []

BAD_LINE = b'{"task": "nq_multidoc", "id": "x"}\n'
NON_UTF8 = b'{"task": "\xff\xfe"}\n'
HOSTILE = ["../../../escaped", "/etc/escaped", "nul\x00byte", "x" * 300, "..", "<b>|bold|</b>"]

RUN = "{run}"
R = ("run", "{cfg}", "--out", "{out}")  # the run command with a config
PLUGINS = "tests.reliability.bad_inputs.plugins:"


CASES: list[Case] = [
    # -- run: the config file itself ---------------------------------------------------------------
    C("run/config-missing", "run", "{case}/nope.yaml", "--out", "{out}", needles="not found"),
    C("run/config-is-dir", "run", "{case}", "--out", "{out}", needles="not a run directory"),
    C("run/config-empty", *R, config=lambda p: b"", needles="tasks"),
    C("run/config-non-utf8", *R, config=lambda p: b"name: \xff\xfe\n", needles="UTF-8"),
    C("run/config-binary", *R, config=lambda p: bytes(range(256)) * 4, needles="{cfg}"),
    C("run/config-huge-scalar", *R, config=lambda p: "x" * 3_000_000, needles="mapping"),
    C("run/config-a-list", *R, config=lambda p: "- a\n- b\n", needles="mapping"),
    C("run/config-malformed-yaml", *R, config=lambda p: "tasks: [a\nreaders: {b\n", needles="invalid YAML"),
    C("run/config-tab-indent", *R, config=lambda p: "tasks:\n\t- x\n", needles="invalid YAML"),
    C("run/config-unknown-key", *R, config=cfg(("batch_sise", 3)), needles="batch_sise"),
    C("run/config-two-problems", *R, config=cfg(("batch_size", "big"), ("save_prompts", "maybe")),
      needles=("batch_size", "save_prompts")),
    C("run/no-tasks", *R, config=cfg(("tasks", DROP)), needles="tasks"),
    C("run/empty-tasks", *R, config=cfg(("tasks", [])), needles="tasks"),
    C("run/empty-readers", *R, config=cfg(("readers", [])), needles="readers"),
    C("run/tasks-a-string", *R, config=cfg(("tasks", "nq_multidoc")), needles="tasks"),
    C("run/batch-size-0", *R, config=cfg(("batch_size", 0)), needles="batch_size"),
    C("run/batch-size-neg", *R, config=cfg(("batch_size", -4)), needles="batch_size"),
    C("run/batch-size-big", *R, config=cfg(("batch_size", "big")), needles="batch_size"),
    C("run/name-a-list", *R, config=cfg(("name", [1, 2])), needles="name"),
    C("run/output-dir-nul", "run", "{cfg}", config=cfg(("output_dir", "runs/a\x00b")), needles="output_dir"),
    C("run/output-dir-a-file", "run", "{cfg}", config=cfg(("output_dir", lambda p: str(p.case / "afile"))),
      files={"afile": b"x"}, needles="afile"),
    C("run/out-is-a-file", "run", "{cfg}", "--out", "{case}/afile", config=cfg(), files={"afile": b"x"},
      needles="afile"),
    C("run/out-under-a-file", "run", "{cfg}", "--out", "{case}/afile/run", config=cfg(), files={"afile": b"x"},
      needles="afile"),
    # -- run: tasks ----------------------------------------------------------------------------------
    C("run/unknown-task", *R, config=cfg(("tasks.0.name", "nq_multidocc")), needles="nq_multidocc"),
    C("run/task-no-source", *R, config=cfg(("tasks.0.synthetic", DROP)), needles="exactly one of"),
    C("run/task-two-sources", *R, config=cfg(("tasks.0.path", "x.jsonl")), needles="exactly one of"),
    C("run/synthetic-n-0", *R, config=cfg(("tasks.0.synthetic.n", 0)), needles="synthetic.n"),
    C("run/synthetic-n-str", *R, config=cfg(("tasks.0.synthetic.n", "ten")), needles="synthetic.n"),
    C("run/synthetic-kind", *R, config=cfg(("tasks.0.synthetic.kind", "bogus")), needles="kind"),
    C("run/limit-0", *R, config=cfg(("tasks.0.limit", 0)), needles="limit"),
    C("run/limit-neg", *R, config=cfg(("tasks.0.limit", -1)), needles="limit"),
    C("run/limit-str", *R, config=cfg(("tasks.0.limit", "ten")), needles="limit"),
    C("run/max-new-tokens-0", *R, config=cfg(("tasks.0.max_new_tokens", 0)), needles="max_new_tokens"),
    C("run/duplicate-tasks", *R, config=cfg(("tasks", lambda p: BASE["tasks"] * 2)), needles="more than once"),
    C("run/data-missing-file", *R, config=cfg(("tasks", data_task(lambda p: p.case / "nope.jsonl"))),
      needles="not found"),
    C("run/data-a-dir", *R, config=cfg(("tasks", data_task(lambda p: p.case))), needles="is a directory"),
    bad_data("run/data-empty", "e.jsonl", b"", "holds no records"),
    bad_data("run/data-blank-lines", "e.jsonl", b"\n\n\n", "holds no records"),
    bad_data("run/data-garbage", "g.jsonl", b"\x00\x01garbage\x02\n", "g.jsonl:1"),
    bad_data("run/data-non-utf8", "g.jsonl", b'{"input": "\xff"}\n', "UTF-8"),
    bad_data("run/data-malformed-line2", "g.jsonl", GOOD_LB.read_bytes().splitlines(keepends=True)[0] + b"{not json\n",
             "g.jsonl:2"),
    bad_data("run/data-missing-field", "g.jsonl", b'{"input": "q", "answers": ["a"], "_id": "1"}\n', "context"),
    bad_data("run/data-wrong-type", "g.jsonl", b'{"input": "q", "context": "c d", "answers": "a", "_id": "1"}\n',
             "answers"),
    bad_data("run/data-gz-not-gzip", "g.jsonl.gz", b"this is not gzip\n", "g.jsonl.gz"),
    bad_data("run/data-gz-truncated", "g.jsonl.gz", gzip.compress(GOOD_LB.read_bytes())[:60], "g.jsonl.gz"),
    bad_data("run/data-json-not-array", "g.json", b'{"a": 1}', "array"),
    bad_data("run/data-json-array-of-ints", "g.json", b"[1, 2]", "g.json:1"),
    bad_data("run/data-huge-garbage-line", "g.jsonl", b"{" + b"x" * 4_000_000 + b"\n", "g.jsonl:1"),
    C("run/data-path-nul", *R, config=cfg(("tasks", [{"name": "hotpotqa", "path": "a\x00b.jsonl"}])),
      needles="NUL"),
    C("run/corpus-path-nul", *R, config=cfg(("tasks.0.open_domain", {"corpus": "c\x00.jsonl"})), needles="NUL"),
    C("run/api-key-file-nul", *R, config=cfg(("readers", openai(api_key_file="k\x00.txt"))), needles="api_key_file"),
    C("run/data-unknown-name", *R, config=cfg(("tasks", [{"name": "hotpotqa", "data": "leval/nope"}])),
      needles="unknown data name"),
    C("run/data-not-fetched", *R, config=cfg(("tasks", [{"name": "nq_multidoc",
                                                         "data": "lost_in_the_middle/nq-open-oracle"}])),
      needles="ctxcomp data get"),
    C("run/sweep-positions-str", *R, config=cfg(("tasks.0.sweep", {"positions": "abc"})), needles="positions"),
    C("run/sweep-position-outside", *R, config=cfg(("tasks.0.sweep", {"positions": [0, 99]})), needles="99"),
    C("run/sweep-position-negative", *R, config=cfg(("tasks.0.sweep", {"positions": [-1]})), needles="-1"),
    C("run/open-domain-depth-0", *R, config=cfg(("tasks.0.open_domain", {"depth": 0})), needles="depth"),
    C("run/open-domain-retriever", *R, config=cfg(("tasks.0.open_domain", {"retriever": "bm52"})), needles="bm52"),
    # -- run: compressors and their values ---------------------------------------------------------
    C("run/unknown-compressor", *R, config=cfg(("compressors", ["retreival"])), needles="retreival"),
    C("run/compressor-no-name", *R, config=cfg(("compressors", [{"params": {}}])), needles="name"),
    C("run/compressor-params-int", *R, config=cfg(("compressors", [{"name": "full", "params": 3}])),
      needles="params"),
    C("run/top_n-0", *R, config=cfg(("compressors", retrieval(top_n=0))), needles=("top_n", "retrieval")),
    C("run/top_n-negative", *R, config=cfg(("compressors", retrieval(top_n=-3))), needles="top_n"),
    C("run/top_n-in-grid", *R, config=cfg(("compressors", retrieval(top_n=[2, 0]))), needles="top_n"),
    C("run/chunk_size-big", *R, config=cfg(("compressors", retrieval(chunk_size="big"))), needles="chunk_size"),
    C("run/chunk_size-float", *R, config=cfg(("compressors", retrieval(chunk_size=1.5))), needles="chunk_size"),
    C("run/k1-abc", *R, config=cfg(("compressors", retrieval(retriever={"name": "bm25", "params": {"k1": "abc"}}))),
      needles=("k1", "bm25")),
    C("run/k3-unknown", *R, config=cfg(("compressors", retrieval(retriever={"name": "bm25", "params": {"k3": 1}}))),
      needles="k3"),
    C("run/nested-list-wrong-type", *R, config=cfg(("compressors", retrieval(
        retriever={"name": "bm25", "params": {"k1": [1.2, "high"]}}))), needles=("k1", "'high'")),
    C("run/nested-zip-not-a-list", *R, config=cfg(("compressors", retrieval(
        retriever={"name": "bm25", "params": {"k1": 1.2}, "zip": ["k1"]}))), needles=("zip", "k1")),
    C("run/hybrid-retrievers-a-string", *R, config=cfg(("compressors", retrieval(
        retriever={"name": "hybrid", "params": {"retrievers": "bm25"}}))), needles="retrievers"),
    C("run/metric-unknown", *R, config=cfg(("tasks.0.metric", "litm_qa_emm")), needles=("tasks.0.metric", "litm_qa_em")),
    C("run/metric-a-list", *R, config=cfg(("tasks.0.metric", ["qa_f1"])), needles="tasks.0.metric"),
    C("run/dry-run-bad-mode", "run", "{cfg}", "--dry-run=later", config=cfg(), needles="--dry-run"),
    C("run/retriever-unknown", *R, config=cfg(("compressors", retrieval(retriever="bm52"))), needles="bm52"),
    C("run/chunker-unknown", *R, config=cfg(("compressors", retrieval(chunker="lngbench"))), needles="lngbench"),
    C("run/truncate-no-max", *R, config=cfg(("compressors", ["truncate"])), needles="max_tokens"),
    C("run/truncate-max-neg", *R, config=cfg(("compressors", [{"name": "truncate", "params": {"max_tokens": -5}}])),
      needles="max_tokens"),
    C("run/zip-not-list", *R, config=cfg(("compressors", [{"name": "retrieval", "zip": ["top_n"],
                                                           "params": {"top_n": 3}}])), needles="zip"),
    C("run/zip-unequal", *R, config=cfg(("compressors", [{"name": "retrieval", "zip": ["top_n", "chunk_size"],
                                                          "params": {"top_n": [1, 2], "chunk_size": [20]}}])),
      needles="zip"),
    C("run/top_k-negative", *R, config=cfg(("compressors", [{"name": "top_k", "params": {"k": [-1]}}])), needles="k"),
    C("run/top_k-empty", *R, config=cfg(("compressors", [{"name": "top_k", "params": {"k": []}}])), needles="k"),
    C("run/top_k-text", *R, config=cfg(("compressors", [{"name": "top_k", "params": {"k": "x"}}])), needles="k"),
    C("run/compressor-unknown-task", *R, config=cfg(("compressors", [{"name": "full", "tasks": ["nope"]}])),
      needles="nope"),
    C("run/contrast-unknown-arm", *R, config=cfg(("contrasts", [{"arm": "nope", "against": "full"}])), code=0,
      needles="warning: contrast 'nope'"),  # contrasts are reports only: said at once, and in report.md
    # -- run: readers --------------------------------------------------------------------------------
    C("run/unknown-reader", *R, config=cfg(("readers", ["opneai"])), needles="opneai"),
    C("run/reader-param-typo", *R, config=cfg(("readers", openai(temprature=0))), needles="temprature"),
    C("run/base-url-empty-port", *R, config=cfg(("readers", openai(base_url="http://127.0.0.1:/v1"))),
      needles=("base_url", "port")),
    C("run/base-url-no-scheme", *R, config=cfg(("readers", openai(base_url="localhost"))), needles="base_url"),
    C("run/base-url-port-text", *R, config=cfg(("readers", openai(base_url="http://h:port/v1"))),
      needles="base_url"),
    C("run/base-url-userinfo", *R, config=cfg(("readers", openai(base_url="http://u:pw@127.0.0.1:9/v1"))),
      needles="base_url"),
    C("run/api-key-in-config", *R, config=cfg(("readers", openai(api_key="sk-0123456789abcdef"))),
      needles="secret"),
    C("run/api-key-file-missing", *R, config=cfg(("readers", openai(api_key_file="/nonexistent/k.txt"))),
      needles="k.txt"),
    C("run/api-key-file-a-dir", *R, config=cfg(("readers", openai(api_key_file=lambda p: str(p.case)))),
      needles="API key file"),
    C("run/api-key-file-empty", *R, config=cfg(("readers", openai(api_key_file=lambda p: str(p.case / "k")))),
      files={"k": b""}, needles=("API key file", "empty")),
    C("run/api-key-file-in-run", *R, config=cfg(("readers", openai(api_key_file=lambda p: str(p.out / "k")))),
      needles="inside the run directory"),
    C("run/timeout-negative", *R, config=cfg(("readers", openai(timeout_s=-1))), needles="timeout_s"),
    C("run/concurrency-0", *R, config=cfg(("readers", openai(concurrency=0))), needles="concurrency"),
    C("run/temperature-str", *R, config=cfg(("readers", openai(temperature="hot"))), needles="temperature"),
    C("run/max-context-0", *R, config=cfg(("readers", openai(max_context=0))), needles="max_context"),
    C("run/retry-negative", *R, config=cfg(("readers", openai(retry={"max_retries": -1}))), needles="max_retries"),
    C("run/retry-unknown", *R, config=cfg(("readers", openai(retry={"tries": 3}))), needles="tries"),
    C("run/reader-import-path", *R, config=cfg(("readers", ["nosuchpkg.mod:Reader"])), needles="nosuchpkg"),
    # -- run: plugins and the cache -------------------------------------------------------------------
    C("run/plugin-raises", *R, config=cfg(("compressors", retrieval(retriever={"name": PLUGINS + "Picky",
                                                                               "params": {"depth": 1}}))),
      needles=(PLUGINS + "Picky", "params {{'depth': 1}}", "ValueError in __init__: depth must be at least 2")),
    C("run/plugin-abstract", *R, config=cfg(("compressors", retrieval(retriever=PLUGINS + "Half"))),
      needles=(PLUGINS + "Half", "abstract method(s) search")),
    C("run/plugin-not-found", *R, config=cfg(("compressors", retrieval(retriever="nosuchplugin:Thing"))),
      needles=("nosuchplugin", "working directory")),
    C("run/cache-dir-a-file", *R, config=cfg(), files={"afile": b"x"}, env={"CTXCOMP_CACHE_DIR": "{case}/afile"},
      needles=("{case}/afile", "CTXCOMP_CACHE_DIR")),
    C("run/cache-dir-under-a-file", *R, config=cfg(), files={"afile": b"x"},
      env={"CTXCOMP_CACHE_DIR": "{case}/afile/cache"}, needles=("{case}/afile", "CTXCOMP_CACHE_DIR")),
    # -- run: the command line ------------------------------------------------------------------------
    C("run/set-no-key", *R, "--set", "=3", config=cfg(), needles="--set"),
    C("run/set-no-equals", *R, "--set", "batch_size", config=cfg(), needles="--set"),
    C("run/set-bad-yaml", *R, "--set", "tasks.0.limit=[1", config=cfg(), needles="not valid YAML"),
    C("run/set-unknown-key", *R, "--set", "nosuchkey=3", config=cfg(), needles="nosuchkey"),
    C("run/set-index-out", *R, "--set", "tasks.9.limit=3", config=cfg(), needles="tasks.9"),
    C("run/set-index-text", *R, "--set", "tasks.x.limit=3", config=cfg(), needles="tasks.x"),
    C("run/set-through-a-value", *R, "--set", "batch_size.x=3", config=cfg(), needles="batch_size"),
    C("run/set-output-dir-nul", "run", "{cfg}", "--set", 'output_dir="a\\0b"', config=cfg(), needles="NUL"),
    C("run/set-wrong-type", *R, "--set", "batch_size=big", config=cfg(), needles="batch_size"),
    C("run/set-empty-segment", *R, "--set", "tasks..limit=3", config=cfg(), needles="--set"),
    C("run/executor-bogus", *R, "--executor", "slurm", config=cfg(), needles="--executor"),
    C("run/workers-local", *R, "--workers", "2", config=cfg(), needles="--workers"),
    C("run/workers-text", *R, "--workers", "two", config=cfg(), needles="--workers"),
    C("run/ray-address-empty", *R, "--executor", "ray", "--ray-address", " ", config=cfg(), needles="--ray-address"),
    C("run/unknown-option", *R, "--bogus", config=cfg(), needles="--bogus"),
    C("run/out-without-value", "run", "{cfg}", "--out", config=cfg(), needles="--out"),
    C("run/no-config", "run", needles="CONFIG"),
    C("run/config-and-resume", "run", "{cfg}", "--resume", RUN, config=cfg(), needles="--resume"),
    C("run/another-config-in-folder", "run", "{cfg}", "--out", RUN, config=cfg(("tasks.0.synthetic.n", 4)),
      needles="another config"),
    C("run/folder-locked", "run", "--resume", RUN, run=lock_held, needles="another ctxcomp process"),
    # -- run: hostile but valid ------------------------------------------------------------------------
    C("run/label-parent-steps", *R, config=cfg(("tasks.0.label", HOSTILE[0])), code=0),
    C("run/label-absolute", *R, config=cfg(("compressors", [{"name": "full", "label": HOSTILE[1]}])), code=0),
    C("run/label-nul", *R, config=cfg(("compressors", [{"name": "full", "label": HOSTILE[2]}])), code=0),
    C("run/label-300-chars", *R, config=cfg(("tasks.0.label", HOSTILE[3]),
                                            ("compressors", [{"name": "full", "label": HOSTILE[3]}])), code=0),
    C("run/label-dotdot-html", *R, config=cfg(("tasks.0.label", HOSTILE[4]),
                                              ("compressors", [{"name": "full", "label": HOSTILE[5]}])), code=0),
    C("run/name-parent-steps", "run", "{cfg}", config=cfg(("name", "../../../escaped")), code=0),
    C("run/name-300-chars", "run", "{cfg}", config=cfg(("name", "n" * 300)), code=0),
    # -- run --resume ---------------------------------------------------------------------------------
    C("resume/missing", "run", "--resume", "{case}/nope", needles="nope"),
    C("resume/a-file", "run", "--resume", "{case}/afile", files={"afile": b"x"}, needles="afile"),
    C("resume/empty-dir", "run", "--resume", "{case}", needles="no config.yaml"),
    # how a run is carried out (batch_size) may change on resume; what it computes may not
    C("resume/set-too", "run", "--resume", RUN, "--set", "tasks.0.limit=2", needles="tasks.0.limit"),
    C("resume/config-missing", "run", "--resume", RUN, run=replace("config.yaml", None), needles="config.yaml"),
    C("resume/config-garbage", "run", "--resume", RUN, run=replace("config.yaml", b"tasks: [\x00\x01"),
      needles="config.yaml"),
    C("resume/config-not-mapping", "run", "--resume", RUN, run=replace("config.yaml", b"- 1\n"), needles="mapping"),
    C("resume/config-invalid", "run", "--resume", RUN, run=replace("config.yaml", b"tasks: []\nreaders: []\n"),
      needles="config.yaml"),
    C("resume/grid-garbage", "run", "--resume", RUN, run=replace("grid.json", b"{garbage"), needles="grid.json"),
    C("resume/grid-a-list", "run", "--resume", RUN, run=replace("grid.json", b"[1, 2]"), needles="grid.json"),
    C("resume/preds-garbage", "run", "--resume", RUN, run=in_log("predictions.jsonl", b"garbage\n"),
      needles="predictions.jsonl:2"),
    C("resume/preds-blank", "run", "--resume", RUN, run=in_log("predictions.jsonl", b"\n"),
      needles="predictions.jsonl:2"),
    C("resume/preds-no-keys", "run", "--resume", RUN, run=in_log("predictions.jsonl", BAD_LINE),
      needles=("predictions.jsonl:2", "missing field")),
    C("resume/preds-non-utf8", "run", "--resume", RUN, run=in_log("predictions.jsonl", NON_UTF8),
      needles="predictions.jsonl:2"),
    C("resume/preds-a-list", "run", "--resume", RUN, run=in_log("predictions.jsonl", b"[1, 2]\n"),
      needles="predictions.jsonl:2"),
    C("resume/preds-wrong-type", "run", "--resume", RUN, run=in_log("predictions.jsonl", b'{"task": 3, "id": [], '
                                                                    b'"config_hash": {}}\n'),
      needles="predictions.jsonl:2"),
    C("resume/preds-a-dir", "run", "--resume", RUN, run=replace("predictions.jsonl/", None),
      needles="predictions.jsonl"),
    C("resume/traces-garbage", "run", "--resume", RUN, run=in_log("traces.jsonl", b"garbage\n"),
      needles="traces.jsonl:2"),
    C("resume/failures-no-keys", "run", "--resume", RUN, run=replace("failures.jsonl", BAD_LINE + BAD_LINE),
      needles="failures.jsonl:1"),
    C("resume/torn-tail", "run", "--resume", RUN, run=torn_tail, code=0),
    # -- report ------------------------------------------------------------------------------------------
    C("report/missing", "report", "{case}/nope", needles="nope"),
    C("rescore/unknown-metric", "rescore", RUN, "--metric", "qa_f2", needles=("qa_f2", "qa_f1")),
    C("rescore/unknown-task", "rescore", RUN, "--task", "nope", needles="nope"),
    C("rescore/not-a-run", "rescore", "{case}", needles="predictions.jsonl"),
    C("report/a-file", "report", "{case}/afile", files={"afile": b"x"}, needles="afile"),
    C("report/empty-dir", "report", "{case}", needles="predictions.jsonl"),
    C("report/preds-garbage", "report", RUN, run=in_log("predictions.jsonl", b"garbage\n"),
      needles="predictions.jsonl:2"),
    C("report/preds-blank", "report", RUN, run=in_log("predictions.jsonl", b"\n"), needles="predictions.jsonl:2"),
    C("report/preds-no-keys", "report", RUN, run=in_log("predictions.jsonl", BAD_LINE),
      needles=("predictions.jsonl:2", "missing field")),
    C("report/preds-a-dir", "report", RUN, run=replace("predictions.jsonl/", None), needles="predictions.jsonl"),
    C("report/failures-garbage", "report", RUN, run=replace("failures.jsonl", b"garbage\n{}\n"),
      needles="failures.jsonl:1"),
    C("report/judgements-garbage", "report", RUN, run=replace("judgements.jsonl", b"garbage\n{}\n"),
      needles="judgements.jsonl:1"),
    C("report/grid-garbage", "report", RUN, run=replace("grid.json", b"{garbage"), needles="grid.json"),
    C("report/config-garbage", "report", RUN, run=replace("config.yaml", b"tasks: [\n"), code=0),  # logs suffice
    C("report/unknown-option", "report", RUN, "--plot", needles="--plot"),
    C("report/torn-tail", "report", RUN, "--no-plots", run=torn_tail, code=0),
    # -- show --------------------------------------------------------------------------------------------
    C("show/missing", "show", "{case}/nope", "--id", "x", needles="nope"),
    C("show/no-id", "show", RUN, needles="--id"),
    C("show/manifest-garbage", "show", RUN, "--manifest", run=replace("manifest.json", b"{not json"),
      needles="manifest.json"),
    C("show/manifest-not-a-run", "show", "{case}", "--manifest", needles="{case}"),
    C("show/unknown-id", "show", RUN, "--id", "no-such-id", needles="no-such-id"),
    C("show/empty-id", "show", RUN, "--id", "", needles="id"),
    C("show/unknown-config", "show", RUN, "--id", "{first_id}", "--config", "zzzz", needles="zzzz"),
    C("show/preds-garbage", "show", RUN, "--id", "{first_id}", run=in_log("predictions.jsonl", b"garbage\n"),
      needles="predictions.jsonl:2"),
    C("show/traces-no-keys", "show", RUN, "--id", "{first_id}", run=in_log("traces.jsonl", BAD_LINE),
      needles="traces.jsonl:2"),
    C("show/prompts-gone", "show", RUN, "--id", "{first_id}", run=replace("prompts/", None), code=0,
      needles="is missing"),
    C("show/torn-tail", "show", RUN, "--id", "{first_id}", run=torn_tail, code=0),
    # -- view --------------------------------------------------------------------------------------------
    C("view/missing", "view", "{case}/nope", needles="nope"),
    C("view/empty-dir", "view", "{case}", needles="predictions.jsonl"),
    C("view/against-missing", "view", RUN, "--against", "{case}/nope", needles="nope"),
    C("view/out-missing-folder", "view", RUN, "--out", "{case}/no/such/view.html", needles="no/such"),
    C("view/out-a-dir", "view", RUN, "--out", "{case}", needles="{case}"),
    C("view/preds-garbage", "view", RUN, run=in_log("predictions.jsonl", b"garbage\n"),
      needles="predictions.jsonl:2"),
    C("view/config-garbage", "view", RUN, run=replace("config.yaml", b"\xff\xfe"), code=0),
    # -- compare -----------------------------------------------------------------------------------------
    C("compare/a-missing", "compare", "{case}/nope", RUN, needles="nope"),
    C("compare/b-missing", "compare", RUN, "{case}/nope", needles="nope"),
    C("compare/a-file", "compare", "{case}/afile", RUN, files={"afile": b"x"}, needles="afile"),
    C("compare/one-arg", "compare", RUN, needles="run_b"),
    C("compare/preds-no-keys", "compare", RUN, RUN, run=in_log("predictions.jsonl", BAD_LINE),
      needles="predictions.jsonl:2"),
    C("compare/torn-tail", "compare", RUN, RUN, run=torn_tail, code=0),
    # -- judge ---------------------------------------------------------------------------------------------
    C("judge/missing-run", "judge", "{case}/nope", "--judge", "extractive", needles="nope"),
    C("judge/no-judge", "judge", RUN, needles="--judge"),
    C("judge/unknown-reader", "judge", RUN, "--judge", "opnai", needles="opnai"),
    C("judge/file-missing", "judge", RUN, "--judge", "{case}/j.yaml", needles="j.yaml"),
    C("judge/file-bad-yaml", "judge", RUN, "--judge", "{case}/j.yaml", files={"j.yaml": b"name: [openai\n"},
      needles="j.yaml"),
    C("judge/file-a-list", "judge", RUN, "--judge", "{case}/j.yaml", files={"j.yaml": b"- openai\n"},
      needles="j.yaml"),
    C("judge/file-non-utf8", "judge", RUN, "--judge", "{case}/j.yaml", files={"j.yaml": b"name: \xff\n"},
      needles="j.yaml"),
    C("judge/file-params-a-list", "judge", RUN, "--judge", "{case}/j.yaml",
      files={"j.yaml": b"name: extractive\nparams: [1]\n"}, needles="params"),
    C("judge/param-no-key", "judge", RUN, "--judge", "extractive", "--judge-param", "=3", needles="key"),
    C("judge/param-unknown", "judge", RUN, "--judge", "openai", "--judge-param", "model=m",
      "--judge-param", "temprature=0", needles="temprature"),
    C("judge/param-empty-port", "judge", RUN, "--judge", "openai", "--judge-param", "model=m",
      "--judge-param", "base_url=http://127.0.0.1:/v1", needles="base_url"),
    C("judge/protocol-bogus", "judge", RUN, "--judge", "extractive", "--protocol", "elo", needles="elo"),
    C("judge/against-missing", "judge", RUN, "--judge", "extractive", "--against", "{case}/nope", needles="nope"),
    C("judge/against-unknown-arm", "judge", RUN, "--judge", "extractive", "--against", "arm:nope", needles="nope"),
    C("judge/preds-garbage", "judge", RUN, "--judge", "extractive", "--protocol", "score",
      run=in_log("predictions.jsonl", b"garbage\n"), needles="predictions.jsonl:2"),
    C("judge/judgements-garbage", "judge", RUN, "--judge", "extractive", "--protocol", "score",
      run=replace("judgements.jsonl", b"garbage\n{}\n"), needles="judgements.jsonl:1"),
    # -- score ---------------------------------------------------------------------------------------------
    C("score/missing", "score", "{case}/nope.jsonl", "--dataset", "hotpotqa", needles="nope.jsonl"),
    C("score/a-dir", "score", "{case}", "--dataset", "hotpotqa", needles="{case}"),
    C("score/empty", "score", "{case}/p.jsonl", "--dataset", "hotpotqa", files={"p.jsonl": b""}, needles="p.jsonl"),
    C("score/binary", "score", "{case}/p.jsonl", "--dataset", "hotpotqa", files={"p.jsonl": bytes(range(256))},
      needles="p.jsonl"),
    C("score/malformed", "score", "{case}/p.jsonl", "--dataset", "hotpotqa", files={"p.jsonl": b"{x\n"},
      needles="p.jsonl:1"),
    C("score/missing-field", "score", "{case}/p.jsonl", "--dataset", "hotpotqa",
      files={"p.jsonl": b'{"answers": ["a"]}\n'}, needles="pred"),
    C("score/answers-a-number", "score", "{case}/p.jsonl", "--dataset", "hotpotqa",
      files={"p.jsonl": b'{"pred": "a", "answers": 3}\n'}, needles="answers"),
    C("score/length-str-for-e", "score", "{case}/p.jsonl", "--dataset", "hotpotqa", "--e",
      files={"p.jsonl": b'{"pred": "a", "answers": ["a"], "length": "long"}\n'}, needles="length"),
    C("score/unknown-dataset", "score", str(GOOD_LB), "--dataset", "hotpotqaa", needles="hotpotqaa"),
    C("score/unknown-metric", "score", str(GOOD_LB), "--dataset", "hotpotqa", "--metric", "f2", needles="f2"),
    C("score/no-dataset", "score", str(GOOD_LB), needles="--dataset"),
    # -- chunk ---------------------------------------------------------------------------------------------
    C("chunk/missing", "chunk", "{case}/nope.txt", needles="nope.txt"),
    C("chunk/a-dir", "chunk", "{case}", needles="{case}"),
    C("chunk/empty", "chunk", "{case}/e.txt", files={"e.txt": b""}, needles="empty"),
    C("chunk/stdin-empty", "chunk", "-", stdin="", needles="empty"),
    C("chunk/non-utf8", "chunk", "{case}/b.txt", files={"b.txt": b"ok \xff\xfe bad"}, needles="UTF-8"),
    C("chunk/unknown-chunker", "chunk", str(GOOD_LB), "--chunker", "lngbench", needles="lngbench"),
    C("chunk/size-0", "chunk", str(GOOD_LB), "--size", "0", needles="size"),
    C("chunk/size-negative", "chunk", str(GOOD_LB), "--size", "-5", needles="size"),
    C("chunk/size-text", "chunk", str(GOOD_LB), "--size", "big", needles="--size"),
    C("chunk/overlap-negative", "chunk", str(GOOD_LB), "--chunker", "words", "--overlap", "-1", needles="overlap"),
    C("chunk/overlap-too-big", "chunk", str(GOOD_LB), "--chunker", "words", "--size", "5", "--overlap", "5",
      needles="overlap"),
    C("chunk/compat-words", "chunk", str(GOOD_LB), "--chunker", "words", "--compat", needles="--compat"),
    C("chunk/import-path", "chunk", str(GOOD_LB), "--chunker", "nosuchpkg.mod:Chunker", needles="nosuchpkg"),
    # -- retrieve ------------------------------------------------------------------------------------------
    C("retrieve/corpus-missing", "retrieve", "{case}/c.jsonl", "{queries}", needles="c.jsonl"),
    C("retrieve/queries-missing", "retrieve", "{corpus}", "{case}/q.jsonl", needles="q.jsonl"),
    C("retrieve/corpus-a-dir", "retrieve", "{case}", "{queries}", needles="{case}"),
    C("retrieve/corpus-empty", "retrieve", "{case}/c.jsonl", "{queries}", files={"c.jsonl": b""}, needles="c.jsonl"),
    C("retrieve/corpus-malformed", "retrieve", "{case}/c.jsonl", "{queries}", files={"c.jsonl": b"{x\n"},
      needles="c.jsonl:1"),
    C("retrieve/corpus-no-text", "retrieve", "{case}/c.jsonl", "{queries}", files={"c.jsonl": b'{"id": "a"}\n'},
      needles="text"),
    C("retrieve/corpus-text-a-list", "retrieve", "{case}/c.jsonl", "{queries}",
      files={"c.jsonl": b'{"id": "a", "text": ["x"]}\n'}, needles="text"),
    C("retrieve/queries-no-query", "retrieve", "{corpus}", "{case}/q.jsonl", files={"q.jsonl": b'{"id": "a"}\n'},
      needles="query"),
    C("retrieve/queries-non-utf8", "retrieve", "{corpus}", "{case}/q.jsonl", files={"q.jsonl": NON_UTF8},
      needles="q.jsonl"),
    C("retrieve/k-0", "retrieve", "{corpus}", "{queries}", "-k", "0", needles="-k"),
    C("retrieve/k-negative", "retrieve", "{corpus}", "{queries}", "-k", "-3", needles="-k"),
    C("retrieve/limit-0", "retrieve", "{corpus}", "{queries}", "--limit", "0", needles="--limit"),
    C("retrieve/out-missing-folder", "retrieve", "{corpus}", "{queries}", "--out", "{case}/no/hits.jsonl",
      needles="does not exist"),
    C("retrieve/out-a-dir", "retrieve", "{corpus}", "{queries}", "--out", "{case}", needles="{case}"),
    C("retrieve/unknown-retriever", "retrieve", "{corpus}", "{queries}", "--retriever", "bm52", needles="bm52"),
    C("retrieve/k1-abc", "retrieve", "{corpus}", "{queries}", "--retriever-param", "k1=abc", needles="k1"),
    C("retrieve/param-no-key", "retrieve", "{corpus}", "{queries}", "--retriever-param", "=abc", needles="key"),
    C("retrieve/executor-bogus", "retrieve", "{corpus}", "{queries}", "--executor", "slurm", needles="--executor"),
    C("retrieve/shards-bm25", "retrieve", "{corpus}", "{queries}", "--shards", "{case}/s", needles="dense"),
    C("retrieve/litm-and-corpus", "retrieve", "{corpus}", "{queries}", "--litm", "{litm}", needles="--litm"),
    C("retrieve/nothing", "retrieve", needles="CORPUS"),
    C("retrieve/litm-malformed", "retrieve", "--litm", "{case}/l.jsonl", files={"l.jsonl": b"{x\n"},
      needles="l.jsonl"),
    C("retrieve/litm-gz-truncated", "retrieve", "--litm", "{case}/l.jsonl.gz",
      files={"l.jsonl.gz": gzip.compress(b'{"question": "q"}\n' * 50)[:30]}, needles="l.jsonl.gz"),
    C("retrieve/litm-no-ctxs", "retrieve", "--litm", "{case}/l.jsonl",
      files={"l.jsonl": b'{"question": "q", "answers": ["a"]}\n'}, needles="ctxs"),
    # -- curve ---------------------------------------------------------------------------------------------
    C("curve/no-litm", "curve", "--out", "{out}", needles="--litm"),
    C("curve/litm-missing", "curve", "--litm", "{case}/nope.jsonl", "--reader", "extractive", "--out", "{out}",
      needles="nope.jsonl"),
    C("curve/ks-text", "curve", "--litm", "{litm}", "--ks", "a,b", "--out", "{out}", needles="--ks"),
    C("curve/ks-zero", "curve", "--litm", "{litm}", "--ks", "0,1", "--out", "{out}", needles="--ks"),
    C("curve/ks-negative", "curve", "--litm", "{litm}", "--ks", "-1", "--out", "{out}", needles="--ks"),
    C("curve/ks-empty", "curve", "--litm", "{litm}", "--ks", ",", "--out", "{out}", needles="--ks"),
    C("curve/limit-0", "curve", "--litm", "{litm}", "--limit", "0", "--out", "{out}", needles="--limit"),
    C("curve/unknown-retriever", "curve", "--litm", "{litm}", "--retriever", "bm52", "--reader", "extractive",
      "--out", "{out}", needles="bm52"),
    C("curve/unknown-reader", "curve", "--litm", "{litm}", "--reader", "extractiv", "--out", "{out}",
      needles="extractiv"),
    C("curve/k1-abc", "curve", "--litm", "{litm}", "--retriever-param", "k1=abc", "--reader", "extractive",
      "--out", "{out}", needles="k1"),
    C("curve/config-missing", "curve", "--config", "{case}/nope.yaml", "--out", "{out}", needles="nope.yaml"),
    C("curve/config-no-open-domain", "curve", "--config", "{cfg}", "--out", "{out}", config=cfg(),
      needles="open-domain"),
    C("curve/out-a-file", "curve", "--litm", "{litm}", "--reader", "extractive", "--out", "{case}/afile",
      files={"afile": b"x"}, needles="afile"),
    C("curve/shards-bm25", "curve", "--litm", "{litm}", "--reader", "extractive", "--shards", "{case}/s",
      "--out", "{out}", needles="dense"),
    # -- build kv | sweep | m4le -----------------------------------------------------------------------------
    C("build/kv-n-0", "build", "kv", "--n", "0", "--out", "{out}/kv.jsonl", needles="--n"),
    C("build/kv-n-negative", "build", "kv", "--n", "-2", "--out", "{out}/kv.jsonl", needles="--n"),
    C("build/kv-num-keys-0", "build", "kv", "--n", "2", "--num-keys", "0", "--out", "{out}/kv.jsonl",
      needles="num_keys"),
    C("build/kv-positions-text", "build", "kv", "--n", "2", "--positions", "x", "--out", "{out}/kv.jsonl",
      needles="--positions"),
    C("build/kv-position-outside", "build", "kv", "--n", "2", "--num-keys", "5", "--positions", "9",
      "--out", "{out}/kv.jsonl", needles="position 9"),
    C("build/kv-position-negative", "build", "kv", "--n", "2", "--num-keys", "5", "--positions", "-1",
      "--out", "{out}/kv.jsonl", needles="position -1"),
    C("build/kv-out-a-dir", "build", "kv", "--n", "2", "--out", "{case}", needles="{case}"),
    C("build/kv-out-under-a-file", "build", "kv", "--n", "2", "--out", "{case}/afile/kv.jsonl",
      files={"afile": b"x"}, needles="afile"),
    C("build/sweep-litm-missing", "build", "sweep", "--litm", "{case}/nope.jsonl", "--out", "{out}",
      needles="nope.jsonl"),
    C("build/sweep-position-outside", "build", "sweep", "--litm", "{litm}", "--num-docs", "3", "--positions", "5",
      "--out", "{out}", needles="--positions"),
    C("build/sweep-num-docs-0", "build", "sweep", "--litm", "{litm}", "--num-docs", "0", "--positions", "0",
      "--out", "{out}", needles="--num-docs"),
    C("build/sweep-distractors-bogus", "build", "sweep", "--litm", "{litm}", "--num-docs", "3",
      "--positions", "0", "--distractors", "nearest", "--out", "{out}", needles="nearest"),
    C("build/sweep-retriever-unknown", "build", "sweep", "--litm", "{litm}", "--num-docs", "9", "--positions", "0",
      "--retriever", "bm52", "--out", "{out}", needles="bm52"),
    C("build/sweep-litm-malformed", "build", "sweep", "--litm", "{case}/l.jsonl", "--out", "{out}",
      files={"l.jsonl": b"{x\n"}, needles="l.jsonl"),
    C("build/m4le-source-missing", "build", "m4le", "--source", "{case}/nope.jsonl", "--out", "{out}/m.jsonl",
      needles="nope.jsonl"),
    C("build/m4le-target-text", "build", "m4le", "--source", "{litm}", "--target-words", "many",
      "--out", "{out}/m.jsonl", needles="--target-words"),
    C("build/m4le-target-0", "build", "m4le", "--source", "{litm}", "--target-words", "0", "--n", "1",
      "--out", "{out}/m.jsonl", needles="target"),
    C("build/m4le-ability-bogus", "build", "m4le", "--source", "{litm}", "--ability", "telepathy", "--n", "1",
      "--out", "{out}/m.jsonl", needles="telepathy"),
    C("build/m4le-n-0", "build", "m4le", "--source", "{litm}", "--n", "0", "--out", "{out}/m.jsonl", needles="--n"),
    C("build/m4le-source-not-gzip", "build", "m4le", "--source", "{case}/s.jsonl.gz", "--out", "{out}/m.jsonl",
      files={"s.jsonl.gz": b"plain text"}, needles="gzip"),
    C("build/m4le-source-empty", "build", "m4le", "--source", "{case}/e.jsonl", "--out", "{out}/m.jsonl",
      files={"e.jsonl": b""}, needles="e.jsonl"),
    C("build/unknown-form", "build", "graph", needles="graph"),
    # -- data list | get ------------------------------------------------------------------------------------
    C("data/get-unknown", "data", "get", "leval/nope", needles="leval/nope"),
    C("data/get-nothing", "data", "get", needles="names"),
    C("data/list-dir-a-file", "data", "list", "--dir", "{case}/afile", files={"afile": b"x"}, needles="afile"),
    C("data/unknown-form", "data", "remove", needles="remove"),
    # -- list, quickstart, the app ----------------------------------------------------------------------------
    C("list/unknown-kind", "list", "retreivers", needles="retreivers"),
    C("list/config-missing", "list", "--config", "{case}/nope.yaml", needles="nope.yaml"),
    C("list/config-and-kind", "list", "readers", "--config", "{cfg}", config=cfg(), needles="--config"),
    C("list/config-plugin-raises-import", "list", "--config", "{cfg}",
      config=cfg(("compressors", retrieval(retriever="nosuchplugin:Thing"))), needles="nosuchplugin"),
    C("cache/clear-no-run", "cache", "clear", needles="--run"),
    C("cache/clear-not-a-run", "cache", "clear", "--run", "{case}/nope", needles="nope"),
    C("cache/info-not-a-run", "cache", "info", "--run", "{case}", needles="{case}"),
    C("cache/clear-keys-garbage", "cache", "clear", "--run", RUN, run=replace("cache_keys.jsonl", b"\x00garbage\n"),
      needles="recorded no cache entries"),
    C("list/extra-arg", "list", "tasks", "readers", needles="readers"),
    C("quickstart/unknown-reader", "quickstart", "--reader", "opneai", "--out", "{out}", needles="opneai"),
    C("quickstart/set-no-key", "quickstart", "--set", "=3", "--out", "{out}", needles="--set"),
    C("app/unknown-command", "rnu", needles="rnu"),
    # -- full and read-only disks (a 2 MB tmpfs) -----------------------------------------------------------------
    C("disk/run-full", *R, config=cfg(("tasks.0.synthetic.n", 40)), disk="full", needles="the disk is full"),
    C("disk/resume-full", "run", "--resume", "{out}", disk="full-run", needles="the disk is full"),
    C("disk/report-full", "report", "{out}", disk="full-run", needles="the disk is full"),
    C("disk/judge-full", "judge", "{out}", "--judge", "extractive", "--protocol", "score", disk="full-run",
      needles="the disk is full"),
    C("disk/run-read-only", *R, config=cfg(), disk="ro", needles="read-only"),
    C("disk/resume-read-only", "run", "--resume", "{out}", disk="ro", needles="read-only"),
    C("disk/report-read-only", "report", "{out}", disk="ro", needles="read-only"),
    C("disk/judge-read-only", "judge", "{out}", "--judge", "extractive", "--protocol", "score", disk="ro",
      needles="read-only"),
    C("disk/view-read-only", "view", "{out}", disk="ro", needles="read-only"),
    C("disk/build-kv-full", "build", "kv", "--n", "400", "--out", "{out}/kv.jsonl.gz", disk="full",
      needles="the disk is full"),
    C("disk/build-kv-read-only", "build", "kv", "--n", "2", "--out", "{out}/kv.jsonl", disk="ro",
      needles="read-only"),
]


# -- the harness -------------------------------------------------------------------------------------------

@dataclass
class Outcome:
    code: int
    stdout: str
    stderr: str

    @property
    def lines(self) -> list[str]:
        return [ln for ln in self.stderr.splitlines() if ln.strip()]

    @property
    def kind(self) -> str:
        """traceback, exit-0, one-line, multi-line or silent (exit non-zero with no ``error:`` line).

        One-line: the last line of stderr is the only one that starts with ``error:`` and nothing follows it;
        news the command printed while it worked may come before it (``… continuing it``)."""
        if "Traceback" in self.stderr:
            return "traceback"
        if self.code == 0:
            return "exit-0"
        errors = [ln for ln in self.lines if ln.startswith("error:")]
        if len(errors) == 1 and self.lines[-1] == errors[0]:
            return "one-line"
        return "multi-line" if self.lines else "silent"


def invoke(args: list[str], stdin: str | None = None) -> Outcome:
    """``ctxcomp ARGS`` in this process (``tests.support.in_process_cli``)."""
    return Outcome(*run_main(args, stdin))


def _tree(root: Path, skip: Path) -> dict[Path, tuple[int, int]]:
    """Every file (size, mtime) and folder under ``root`` except ``skip``."""
    found: dict[Path, tuple[int, int]] = {}
    for folder, dirs, files in os.walk(root):
        here = Path(folder)
        dirs[:] = [d for d in dirs if here / d != skip]
        for d in dirs:
            found[here / d] = (-1, 0)
        for f in files:
            try:
                st = (here / f).lstat()
            except OSError:
                continue
            found[here / f] = (st.st_size, st.st_mtime_ns)
    return found


def _written(before: dict, after: dict) -> list[Path]:
    """Paths made, changed or removed (a folder counts when it is new or gone)."""
    return [p for p, st in after.items() if p not in before or (st[0] >= 0 and before[p] != st)] + \
        [p for p in before if p not in after]


@pytest.fixture(scope="module")
def sandbox(tmp_path_factory, rel):
    """Inputs every case may read, a finished run to copy, and the environment of a user's shell."""
    from experiments.data.synthetic import make_multidoc_qa
    from experiments.protocols.litm import litm_qa_record

    root = tmp_path_factory.mktemp("sweep")
    inputs = root / "inputs"
    inputs.mkdir()
    questions = make_multidoc_qa(6, num_docs=4, words_per_doc=30, seed=1)
    litm = write_jsonl([litm_qa_record(q) for q in questions], inputs / "qa.jsonl")
    corpus = write_jsonl([{"id": f"d{i}", "text": f"passage {i} about city {i}"} for i in range(6)],
                         inputs / "corpus.jsonl")
    queries = write_jsonl([{"id": "q1", "query": "city 3", "answers": ["3"]}], inputs / "queries.jsonl")
    work = root / "deep" / "er" / "still" / "work"  # a name with three parent steps still lands in the sandbox
    work.mkdir(parents=True)
    (root / "data").mkdir()
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv("OPENAI_API_KEY", raising=False)
        for key, value in dict(CTXCOMP_CACHE_DIR=str(root / "cache"), CTXCOMP_DATA_DIR=str(root / "data"),
                               CTXCOMP_NO_PROGRESS="1", MPLBACKEND="Agg", COLUMNS="200").items():
            mp.setenv(key, value)
        mp.chdir(work)
        config = inputs / "finished.yaml"
        config.write_text(yaml.safe_dump(cfg(("compressors", ["full"] + retrieval(top_n=1)))(None)))
        done = invoke(["run", str(config), "--out", str(inputs / "finished")])
        assert done.code == 0, done.stderr
        first_id = next(iter((inputs / "finished" / "predictions.jsonl").read_text().splitlines()))
        yield SimpleNamespace(root=root, inputs=inputs, finished=inputs / "finished", litm=litm, corpus=corpus,
                              queries=queries, first_id=yaml.safe_load(first_id)["id"], work=work,
                              mount=rel.mount_tmpfs, unmount=rel.unmount)


def _prepare(case: Case, sb: SimpleNamespace, index: int, mounts: list[Path]) -> SimpleNamespace | None:
    """The case's folder, files and run, and its placeholders; None when its tmpfs cannot be mounted.
    Mounts made are added to ``mounts`` at once, for the caller to undo whatever happens."""
    here = sb.root / "cases" / f"{index:03d}"
    here.mkdir(parents=True)
    p = SimpleNamespace(case=here, out=here / "out", run=here / "run", cfg=here / "c.yaml", litm=sb.litm,
                        corpus=sb.corpus, queries=sb.queries, first_id=sb.first_id, work=sb.work)
    for name, data in case.files.items():
        (here / name).write_bytes(data)
    if case.config is not None:
        made = case.config(p)
        p.cfg.write_bytes(made if isinstance(made, bytes) else
                          (made if isinstance(made, str) else yaml.safe_dump(made)).encode("utf-8"))
    if "{run}" in case.args or case.run is not None:
        shutil.copytree(sb.finished, p.run)
        if case.run is not None:
            case.run(p.run)
    if case.disk is not None:
        disk = here / "disk"
        if not sb.mount(disk):
            return None
        mounts.append(disk)
        p.out = disk / "out"
        if case.disk == "full":
            (disk / "filler").write_bytes(b"\0" * (2 * 1024 * 1024 - 96 * 1024))
        else:
            shutil.copytree(sb.finished, p.out)
            if case.disk == "full-run":
                try:
                    with open(disk / "filler", "wb") as fh:
                        while True:
                            fh.write(b"\0" * 4096)
                            fh.flush()
                except OSError:
                    pass  # the disk is full
            else:
                subprocess.run(["mount", "-o", "remount,ro", str(disk)], check=True)
    return p


def _fill(text: str, p: SimpleNamespace) -> str:
    return text.format(**{k: str(v) for k, v in vars(p).items()})


def _check(case: Case, p: SimpleNamespace, got: Outcome, outside: list[Path]) -> list[str]:
    """What is wrong with the outcome of ``case`` (empty when it held)."""
    problems = []
    if case.code == 0:
        if got.code != 0 or "Traceback" in got.stderr or any(ln.startswith("error:") for ln in got.lines):
            problems.append(f"expected success, got exit {got.code}")
    else:
        if got.kind != "one-line":
            problems.append(got.kind)
        if got.code != case.code:
            problems.append(f"exit {got.code}, not {case.code}")
    missing = [n for n in (_fill(n, p) for n in case.needles) if n not in got.stderr + got.stdout * (case.code == 0)]
    if missing:
        problems.append(f"does not name {missing}")
    if outside:
        problems.append(f"wrote outside the run directory: {sorted(map(str, outside))[:5]}")
    return problems


@pytest.mark.slow
def test_every_bad_input_is_one_line_exit_2_and_writes_nothing_outside_the_run(sandbox, figures):
    counts = dict(tried=0, refused_expected=0, hostile_valid=0, one_line=0, one_line_after_news=0, traceback=0,
                  multi_line=0, exit_0_on_bad_input=0, silent=0, wrong_exit_code=0, written_outside=0,
                  skipped_no_tmpfs=0)
    forms: dict[str, int] = {}
    failures = []
    for index, case in enumerate(CASES):
        mounts: list[Path] = []
        try:
            p = _prepare(case, sandbox, index, mounts)
            if p is None:
                counts["skipped_no_tmpfs"] += 1
                continue
            args = [_fill(a, p) for a in case.args]
            before = _tree(sandbox.root, sandbox.root / "cache")
            with pytest.MonkeyPatch.context() as mp:
                for key, value in case.env.items():
                    mp.setenv(key, _fill(value, p))
                got = invoke(args, case.stdin)
            allowed = (p.out, p.run, p.work / "runs")
            outside = [w for w in _written(before, _tree(sandbox.root, sandbox.root / "cache"))
                       if not any(w == a or a in w.parents for a in allowed)]
        finally:
            while _HELD:
                _HELD.pop().close()
            for mnt in mounts:
                sandbox.unmount(mnt)
            shutil.rmtree(sandbox.root / "cases" / f"{index:03d}", ignore_errors=True)
            shutil.rmtree(sandbox.work / "runs", ignore_errors=True)
        counts["tried"] += 1
        forms[case.id.split("/")[0]] = forms.get(case.id.split("/")[0], 0) + 1
        if case.code == 0:
            counts["hostile_valid"] += 1
        else:
            counts["refused_expected"] += 1
            kind = got.kind.replace("-", "_").replace("exit_0", "exit_0_on_bad_input")
            counts[kind] += 1
            counts["one_line_after_news"] += kind == "one_line" and len(got.lines) > 1
            counts["wrong_exit_code"] += got.code not in (0, case.code)
        counts["written_outside"] += bool(outside)
        problems = _check(case, p, got, outside)
        if problems:
            failures.append(f"{case.id}: {'; '.join(problems)}\n    $ ctxcomp {' '.join(args)[:300]}\n"
                            + "\n".join(f"    | {ln[:400]}" for ln in (got.stderr or got.stdout).splitlines()[-6:]))
    figures["hostile_sweep"] = {**counts, "command_forms": forms}
    assert not failures, f"{len(failures)} of {counts['tried']} cases:\n" + "\n".join(failures)


# the same cases in a real process: what the harness above sees is what a user's shell sees
SAMPLE = ["run/config-two-problems", "run/output-dir-nul", "run/data-gz-not-gzip", "run/label-nul",
          "resume/preds-blank", "judge/file-non-utf8", "compare/one-arg", "retrieve/out-a-dir", "run/plugin-raises"]


@pytest.mark.slow
def test_a_sample_of_the_sweep_gives_the_same_in_a_real_process(sandbox, cli):
    by_id = {case.id: case for case in CASES}
    for index, case in enumerate(by_id[i] for i in SAMPLE):
        seen = []
        for where in ("here", "there"):  # each in a fresh case folder, named alike
            p = _prepare(case, sandbox, 900 + index, [])
            try:
                args = [_fill(a, p) for a in case.args]
                if where == "here":
                    got = invoke(args, case.stdin)
                else:
                    done = cli.process(*args, CTXCOMP_CACHE_DIR=str(sandbox.root / "cache"),
                               CTXCOMP_DATA_DIR=str(sandbox.root / "data"))
                    got = Outcome(done.returncode, done.stdout, done.stderr)
            finally:
                shutil.rmtree(p.case, ignore_errors=True)
            seen.append(got)
        here, there = seen
        assert there.code == here.code == case.code, (case.id, there.stderr)
        if case.code == 0:
            assert not there.lines, (case.id, there.stderr)  # no warning either (a NUL in a plotted label)
        else:
            assert there.lines == here.lines and len(there.lines) == 1, (case.id, there.stderr, here.stderr)
