"""Docs that run: every shell command in README.md and docs/*.md is checked, and every command block is run.

- **Every ``ctxcomp`` command** the docs show, in a command block or inline (tables hold synopses such as
  ``ctxcomp run CONFIG.yaml [--out DIR] [--dry-run]``), names a command that exists and only options that
  command takes: a flag that no longer exists fails here, with the file and line.
- **Every command block** (```` ```bash ````, or a plain block of commands) runs, line by line with ``set -e``,
  in a sandbox: a temporary working directory holding the repository's ``experiments/`` and ``benchmarks/``,
  stand-in data where this machine has none (``testkit.stand_in_data``), a ``nq-open-oracle.jsonl.gz`` of the
  shared file's first 300 questions (``ctxcomp build sweep`` has no limit), and a small finished run for
  ``RUN_DIR`` / ``RUN_B``.  A block that cannot run in CI says why
  in the doc source, on the line before it: ``<!-- docs-test: skip (REASON) -->`` with a reason that starts
  with one of ``SKIP_REASONS`` (network, GPU, cluster, a server, an install, hours, a browser).
- **What CI changes** to keep the suite's time small, each said here (``REWRITES``): a shipped config's
  ``ctxcomp run`` gets ``--dry-run`` (and the offline overrides of ``testkit.stand_in_data``), ``ctxcomp data
  get`` is not run (it downloads; its names are checked), sizes shrink (``--limit 2``, ``--n 2``), and a curve
  reads with the model-free ``extractive`` reader.
"""
from __future__ import annotations

import gzip
import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
ORACLE_QUESTIONS = 300
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
SKIP = re.compile(r"^\s*<!--\s*docs-test:\s*skip\s*\((?P<reason>[^)]*)\)\s*-->\s*$")
SKIP_REASONS = ("network", "GPU", "cluster", "server", "install", "hours", "browser", "the suite", "run by")
SHELL_LANGS = ("bash", "sh", "shell", "console")
COMMAND_WORDS = re.compile(r"^(ctxcomp|python|pip|bash|export|\.venv/|ray|vllm|nice|CTXCOMP_|CUDA_|[A-Z_]+=)")

# (pattern, replacement, why): applied to each command line of a block before it runs
REWRITES: list[tuple[str, str, str]] = [
    (r"\bRUN_DIR\b", "{run}", "a small finished run"),
    (r"\bRUN_B\b", "{run_b}", "a second small run"),
    (r"(?<![\w./-])/tmp/", "{tmp}/", "the sandbox, not the machine's /tmp"),
    (r"--limit \d+", "--limit 2", "two questions"),
    (r"(ctxcomp build (?:kv|m4le)\b.*)--n \d+", r"\1--n 2", "two examples"),
    (r"(ctxcomp curve\b.*)--reader smollm2", r"\1--reader extractive", "the model-free reader"),
]


@dataclass(frozen=True)
class Block:
    """One command block of a doc: where it is, its command lines (continuations joined), and why it is skipped."""

    path: Path
    line: int
    commands: tuple[str, ...]
    skip: str | None

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(REPO)}:{self.line}"


def blocks() -> list[Block]:
    out = []
    for path in DOCS:
        lines = path.read_text(encoding="utf-8").splitlines()
        i = 0
        while i < len(lines):
            fence = re.match(r"^\s*```(\w*)\s*$", lines[i])
            if not fence:
                i += 1
                continue
            end = next(j for j in range(i + 1, len(lines)) if re.match(r"^\s*```\s*$", lines[j]))
            commands = _commands(lines[i + 1:end])
            if commands and (fence[1] in SHELL_LANGS or (fence[1] == "" and COMMAND_WORDS.match(commands[0]))):
                before = next((lines[k] for k in range(i - 1, -1, -1) if lines[k].strip()), "")
                marker = SKIP.match(before)
                out.append(Block(path, i + 1, tuple(commands), marker["reason"].strip() if marker else None))
            i = end + 1
    return out


def _commands(lines: list[str]) -> list[str]:
    """The logical command lines: continuations (a trailing backslash, an open quote) joined, comments and blank
    lines left out."""
    out, current = [], ""
    for line in lines:
        current += line.rstrip().removesuffix("\\") + ("\n" if not line.rstrip().endswith("\\") else " ")
        if line.rstrip().endswith("\\") or _open_quote(current):
            continue
        if current.strip() and not current.strip().startswith("#"):
            out.append(current.strip())
        current = ""
    return out


def _open_quote(text: str) -> bool:
    try:
        shlex.split(text, comments=True)
    except ValueError:  # "No closing quotation": the command goes on on the next line
        return True
    return False


def inline_commands() -> list[tuple[str, str]]:
    """(file:line, command) for every inline ``ctxcomp ...`` code span outside command blocks."""
    out = []
    for path in DOCS:
        in_block = False
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            if re.match(r"^\s*```", line):
                in_block = not in_block
                continue
            if not in_block:
                out += [(f"{path.relative_to(REPO)}:{n}", m) for m in re.findall(r"`(ctxcomp [^`]+)`", line)]
    return out


def _cli_options() -> dict[tuple[str, ...], set[str]]:
    """Every ctxcomp command path (``("build", "ruler")``) with the options it takes."""
    import typer
    import typer.main

    from experiments.cli.app import app

    out: dict[tuple[str, ...], set[str]] = {}

    def walk(command, path: tuple[str, ...]) -> None:
        if hasattr(command, "list_commands"):  # asked as click asks, so a group filled when listed (build) counts
            ctx = typer.Context(command)
            for name in command.list_commands(ctx):
                walk(command.get_command(ctx, name), (*path, name))
        out[path] = {o for p in command.params for o in (*getattr(p, "opts", ()), *getattr(p, "secondary_opts", ()))
                     if o.startswith("-")} | {"--help"}

    walk(typer.main.get_command(app), ())
    return out


def _check(command: str, options: dict[tuple[str, ...], set[str]], groups: set[tuple[str, ...]]) -> str | None:
    """What is wrong with a ctxcomp command line (a synopsis too), or None."""
    text = command.replace("\\|", "|")
    text = re.sub(r"\s#\s.*$", "", text)  # a trailing comment
    words = text.replace("[", " ").replace("]", " ").replace("|", " ").split()
    words = words[words.index("ctxcomp"):] if "ctxcomp" in words else words
    path: tuple[str, ...] = ()
    for word in words[1:]:
        if (*path, word) in options:
            path = (*path, word)
        elif not word.startswith("-"):
            break
    rest = words[1 + len(path):]
    if path in groups or not path:
        if rest and not rest[0].startswith("-"):
            return f"`ctxcomp {' '.join((*path, rest[0]))}` is not a command"
    taken = options[path] | options[()]
    unknown = [w.split("=")[0] for w in words[1:] if re.match(r"^--?[a-zA-Z]", w) and w.split("=")[0] not in taken]
    return f"`ctxcomp {' '.join(path)}` takes no {', '.join(unknown)}" if unknown else None


def test_every_ctxcomp_command_in_the_docs_names_a_command_and_options_that_exist():
    options = _cli_options()
    groups = {path[:-1] for path in options if path}
    shown = inline_commands() + [(b.where, c) for b in blocks() for c in b.commands if "ctxcomp " in c]
    assert len(shown) > 100
    wrong = [f"{where}: {problem} ({command})" for where, command in shown
             if (problem := _check(command, options, groups)) is not None]
    assert not wrong, "\n".join(wrong)


def test_the_check_names_a_command_or_a_flag_that_does_not_exist():
    options = _cli_options()
    groups = {path[:-1] for path in options if path}
    assert _check("ctxcomp run CONFIG.yaml [--out DIR] [--dry-run=exact]", options, groups) is None
    assert _check("ctxcomp run CONFIG.yaml --workerz 4", options, groups) == "`ctxcomp run` takes no --workerz"
    assert _check("ctxcomp build rulers --n 2", options, groups) == "`ctxcomp build rulers` is not a command"
    assert _check("ctxcomp judge RUN --protocol pairwise\\|score", options, groups) is None
    assert _commands(["ctxcomp run c.yaml \\", "  --set 'readers=[{name: openai,", "   params: {}}]'", "# out"]) == [
        "ctxcomp run c.yaml    --set 'readers=[{name: openai,\n   params: {}}]'"]


def test_a_block_that_does_not_run_in_ci_says_why():
    reasons = [b for b in blocks() if b.skip is not None]
    bad = [f"{b.where}: {b.skip!r}" for b in reasons if not b.skip.startswith(SKIP_REASONS)]
    assert not bad, f"a skip reason starts with one of {SKIP_REASONS}:\n" + "\n".join(bad)
    assert len(reasons) < len(blocks())


RUNNABLE = [b for b in blocks() if b.skip is None]


@pytest.fixture(scope="module")
def sandbox(tmp_path_factory, shared_data):
    """A working directory where the docs' commands run as they are written, and what they refer to."""
    from experiments.report.write import write_report
    from experiments.run.config import parse_config
    from experiments.run.driver import Runner
    from readers.smollm2 import tokenizer_dir
    from testkit.stand_in_data import write_stand_in_data

    root = tmp_path_factory.mktemp("docs")
    for name in ("experiments", "benchmarks"):
        (root / name).symlink_to(REPO / name)
    write_stand_in_data(root)
    with gzip.open(shared_data / "lost_in_the_middle" / "nq-open-oracle.jsonl.gz", "rt") as fh:
        head = [next(fh) for _ in range(ORACLE_QUESTIONS)]
    with gzip.open(root / "nq-open-oracle.jsonl.gz", "wt") as fh:
        fh.writelines(head)
    (root / "tmp" / "lbv2").mkdir(parents=True)
    (root / "tmp" / "lbv2" / "data.json").symlink_to(root / "data" / "longbench_v2" / "data.json")
    runs = {}
    for name, compressors in (("run", ["full", "truncate-60"]), ("run_b", ["full"])):
        config = {"name": name, "tasks": [{"name": "nq_multidoc", "synthetic": {"kind": "multidoc_qa", "n": 3}}],
                  "readers": ["extractive"],
                  "compressors": [c if c == "full" else {"name": "truncate", "params": {"max_tokens": 60}}
                                  for c in compressors]}
        Runner(parse_config(config), root / "runs" / name, progress=False).run()
        write_report(root / "runs" / name, plots=False)
        runs[name] = root / "runs" / name
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
           "PYTHONPATH": str(REPO), "CTXCOMP_NO_PROGRESS": "1", "CTXCOMP_DATA_DIR": str(shared_data),
           "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TOK": str(tokenizer_dir())}  # a local tokenizer folder
    return root, {"run": str(runs["run"]), "run_b": str(runs["run_b"]), "tmp": str(root / "tmp")}, env


def ci_command(command: str, places: dict[str, str]) -> str | None:
    """The command as CI runs it (``REWRITES``; a shipped config's run as a dry run), or None when it is not run."""
    if re.match(r"^ctxcomp data get\b", command):
        return None  # downloads; its names are checked by the test above
    for pattern, replacement, _why in REWRITES:
        command = re.sub(pattern, replacement, command)
    shipped = re.match(r"^ctxcomp run (experiments/configs/(\w+)\.yaml)", command)
    if shipped and "--dry-run" not in command:
        command = re.sub(r"\s+#.*$", "", command) + " --dry-run"
    if shipped:
        from testkit.stand_in_data import OFFLINE_OVERRIDES

        overrides = OFFLINE_OVERRIDES.get(shipped[2], {})
        command += "".join(f" --set {shlex.quote(f'{k}={v}')}" for k, v in overrides.items() if k not in command)
    for name, value in places.items():
        command = command.replace(f"{{{name}}}", value)
    return command


@pytest.mark.slow
@pytest.mark.parametrize("block", RUNNABLE, ids=lambda b: b.where)
def test_every_command_block_runs(block, sandbox):
    root, places, env = sandbox
    for command in block.commands:
        run = ci_command(command, places)
        if run is None:
            continue
        done = subprocess.run(["bash", "-c", f"set -euo pipefail; {run}"], cwd=root, env=env, capture_output=True,
                              text=True, timeout=600)
        assert done.returncode == 0 and "Traceback" not in done.stderr, \
            f"{block.where}: `{run}` exited {done.returncode}:\n{done.stderr[-3000:]}"
