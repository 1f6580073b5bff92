"""docs/plugins.md's benchmark, added from outside the project as a folder found by entry point and as a module named
by import path, runs through `run`, `--dry-run`, `report`, `view`, `rescore` and `score` with no project file touched."""
from __future__ import annotations

import importlib
import json
import re
import sys
from importlib.resources import files
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from core.errors import UserError
from experiments.cli.app import app
from experiments.scoring.registry import METRICS
from experiments.tasks.benchmark import BENCHMARKS, Benchmark, families
from experiments.tasks.specs import TASKS, TaskSpec, get_task

REPO = Path(__file__).resolve().parents[3]
# A record shape no built-in reads: {"qid", "doc", "ask", "gold"}
RECORDS = [{"qid": f"q{i}", "doc": f"The code of box {i} is {100 + i}. The sky is blue. Birds sing.",
            "ask": f"What is the code of box {i}?", "gold": str(100 + i)} for i in range(4)]


def _doc_package(root: Path) -> None:
    """docs/plugins.md's "Add a benchmark" folder, file for file, under ``root`` (nothing else is written)."""
    doc = (REPO / "docs" / "plugins.md").read_text(encoding="utf-8")
    blocks = dict(re.findall(r"```(?:python|yaml)\n# (toybench/[\w.]+)\n(.*?)```", doc, re.S))
    assert sorted(blocks) == ["toybench/__init__.py", "toybench/metrics.py", "toybench/tasks.yaml"]
    (root / "toybench").mkdir()
    for name, body in blocks.items():
        (root / name).write_text(body, encoding="utf-8")


@pytest.fixture
def fresh_registries(monkeypatch):
    """Registries that look for plugins again and forget them after the test; the plugin's modules are dropped."""
    for folder in files("experiments.tasks").iterdir():  # the built-in metrics register when their modules are
        if folder.joinpath("__init__.py").is_file():  # imported: imported first inside the patch, they would be
            for module in importlib.import_module(f"experiments.tasks.{folder.name}").BENCHMARK.metrics:  # forgotten
                importlib.import_module(module)  # after it by every later test of the process
    for registry in (BENCHMARKS, TASKS, METRICS):
        monkeypatch.setattr(registry, "_entries", dict(registry._entries))
        monkeypatch.setattr(registry, "_from_entry_points", set(registry._from_entry_points))
        monkeypatch.setattr(registry, "_entry_points_loaded", False)
    yield
    for name in [m for m in sys.modules if m == "toybench" or m.startswith("toybench.")]:
        del sys.modules[name]


def _entry_point(tmp_path, monkeypatch) -> str:
    _doc_package(tmp_path)
    dist = tmp_path / "toybench-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: toybench\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[ctxcomp.benchmarks]\ntoybench = toybench:BENCHMARK\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    return "toy_qa"


def _import_path(tmp_path, monkeypatch) -> str:
    _doc_package(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    return "toybench:TOY_QA"


def _invoke(*args) -> str:
    result = CliRunner().invoke(app, [*map(str, args)])
    assert result.exit_code == 0, result.output
    return result.output


@pytest.mark.parametrize("add", [_entry_point, _import_path], ids=["entry_point", "import_path"])
def test_a_benchmark_from_outside_runs_through_every_command(add, tmp_path, monkeypatch, fresh_registries):
    task = add(tmp_path, monkeypatch)
    data = tmp_path / "toy.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in RECORDS), encoding="utf-8")
    config = tmp_path / "toy.yaml"
    config.write_text(yaml.safe_dump({"name": "toy", "tasks": [{"name": task, "path": str(data)}],
                                      "readers": ["extractive"], "compressors": ["full", {"name": "truncate", "params": {"max_tokens": 8}}]}))
    run_dir = tmp_path / "run"

    planned = _invoke("run", config, "--dry-run", "--out", run_dir, "--plain")
    assert task in planned and not (run_dir / "predictions.jsonl").exists()
    _invoke("run", config, "--out", run_dir, "--no-report")
    lines = [json.loads(line) for line in (run_dir / "predictions.jsonl").read_text().splitlines()]
    assert len(lines) == 8 and {line["metric"] for line in lines} == {"toy_digits"}
    _invoke("report", run_dir, "--no-plots")
    cells = json.loads((run_dir / "scores.json").read_text())["cells"]
    assert len(cells) == 2 and all(0 <= c["score"] <= 100 for c in cells)
    _invoke("view", run_dir)
    assert (run_dir / "view.html").is_file()
    said = _invoke("rescore", run_dir, "--no-plots", "--plain")
    assert "0 item score(s) differ" in said
    preds = tmp_path / "preds.jsonl"
    preds.write_text('{"pred": "the code is 101", "answers": ["101"]}\n{"pred": "none", "answers": ["102"]}\n')
    assert _invoke("score", preds, "--dataset", task).strip() == "50.0"
    assert get_task("toy_qa") == get_task(task)  # once known, by its short name too


def test_a_folders_benchmark_owns_its_family(tmp_path, monkeypatch, fresh_registries):
    """The family is the benchmark's: a task file may name it, the loader detects its records by their fields."""
    from experiments.tasks.loading import load_examples

    _entry_point(tmp_path, monkeypatch)
    assert "toy_records" in families() and get_task("toy_qa").metric == "toy_digits"
    data = tmp_path / "toy.jsonl"
    data.write_text(json.dumps(RECORDS[0]) + "\n", encoding="utf-8")
    assert [ex.answers for ex in load_examples(data)] == [("100",)]


def test_a_task_file_takes_every_field_a_built_in_uses(tmp_path):
    data = {"name": "mine", "family": "longbench_v2", "category": "multiple choice", "lang": "en",
            "metric": "longbench_v2_acc", "max_new_tokens": 16, "prompt": "$DOC$ $Q$",
            "variants": {"rag": "$DOC$", "followup": "$COT$"}, "followup_max_new_tokens": 4, "retrieved_chunks": True,
            "judge": "summary", "fixes": [["$Q$", "$Q$?"]], "first_line_only": True, "chat": False, "system": "Be brief.",
            "length_instruction": False, "length_sentence": "", "prompt_version": 3}
    path = tmp_path / "mine.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    spec = TaskSpec.from_file(path)
    assert (spec.judge, spec.retrieved_chunks, spec.followup_max_new_tokens, spec.prompt_version) == ("summary", True, 4, 3)
    assert spec.fixes == (("$Q$", "$Q$?"),) and spec.with_fixes().prompt == "$DOC$ $Q$?"
    path.write_text(yaml.safe_dump({**data, "fixes": ["one"]}), encoding="utf-8")
    with pytest.raises(UserError, match="fixes must be a list of \\[old, new\\] string pairs"):
        TaskSpec.from_file(path)


# A benchmark that makes its examples: its `generate:` section is checked by its own model, the file that section
# names goes into the run's manifest, and it offers a `ctxcomp build` command of its own
TOYGEN = '''
import random

import typer
from pydantic import BaseModel, ConfigDict, PositiveInt

from experiments.data.records import Example
from experiments.tasks.benchmark import Benchmark, Generator, RecordFormat
from experiments.tasks.specs import TaskSpec

SPEC = TaskSpec(name="toy_made", family="toy_made", category="toy qa", lang="en", metric="toy_digits", max_new_tokens=8,
                prompt="Read: {context}\\nQuestion: {input}\\nAnswer:", source=__name__)


class Params(BaseModel):
    model_config = ConfigDict(extra="forbid")
    n: PositiveInt
    seed: int = 0
    filler: str | None = None


def make(spec, params, limit, source):
    rng = random.Random(params.seed)
    filler = open(params.filler, encoding="utf-8").read() if params.filler else ""
    codes = [rng.randrange(100, 1000) for _ in range(params.n)][:limit]
    return [Example(id=f"made{i}", task=spec.name, query=f"What is the code of box {i}?", answers=(str(code),),
                    context=f"{filler} The code of box {i} is {code}.", source=source) for i, code in enumerate(codes)]


def build_toy(n: int = typer.Option(2, "--n", help="Examples."), out: str = typer.Option(..., "--out")) -> None:
    """Toy examples as a file."""
    typer.echo(f"{n} toy examples to {out}")


BENCHMARK = Benchmark(name="toygen", formats=(RecordFormat("toy_made", lambda record, where, task: []),),
                      tasks=lambda: (SPEC,), metrics=("toybench.metrics",),
                      generator=Generator(Params, make, reads=lambda params: (params.filler,)),
                      commands={"toy": build_toy})
'''


def _generating_plugin(tmp_path, monkeypatch) -> None:
    """The docs' toybench (for its metric) and ``toygen``, both found by entry point."""
    _entry_point(tmp_path, monkeypatch)
    (tmp_path / "toygen.py").write_text(TOYGEN, encoding="utf-8")
    dist = tmp_path / "toygen-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: toygen\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[ctxcomp.benchmarks]\ntoygen = toygen:BENCHMARK\n")


def _config(tmp_path, *tasks) -> Path:
    config = tmp_path / "made.yaml"
    config.write_text(yaml.safe_dump({"name": "made", "tasks": list(tasks), "readers": ["extractive"],
                                      "compressors": ["full"]}))
    return config


def test_a_plugin_generator_gets_its_own_generate_section_checked_and_runs(tmp_path, monkeypatch, fresh_registries):
    from experiments.run.config import ConfigError, load_config

    _generating_plugin(tmp_path, monkeypatch)
    filler = tmp_path / "filler.txt"
    filler.write_text("Birds sing.", encoding="utf-8")
    run_dir = tmp_path / "run"
    config = _config(tmp_path, {"name": "toy_made", "generate": {"n": 3, "seed": 1, "filler": str(filler)}})
    _invoke("run", config, "--out", run_dir, "--no-report")
    lines = [json.loads(line) for line in (run_dir / "predictions.jsonl").read_text().splitlines()]
    assert sorted(line["id"] for line in lines) == ["made0", "made1", "made2"]
    assert [line["score"] for line in lines] == [1.0] * 3  # the extractive reader finds each generated code
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert str(filler) in [d["path"] for d in manifest["sessions"][-1]["data"]]
    assert "generated" in json.loads((run_dir / "grid.json").read_text())["tasks"][0]

    with pytest.raises(ConfigError, match=r"tasks\.0\.generate\.n: Input should be greater than 0"):
        load_config(_config(tmp_path, {"name": "toy_made", "generate": {"n": 0}}))
    with pytest.raises(ConfigError, match=r"tasks\.0\.generate\.count: unknown key"):
        load_config(_config(tmp_path, {"name": "toy_made", "generate": {"n": 2, "count": 3}}))
    with pytest.raises(ConfigError, match=r"tasks\.0\.generate: .*benchmark toybench generates none"):
        load_config(_config(tmp_path, {"name": "toy_qa", "generate": {"n": 2}}))
    with pytest.raises(ConfigError, match=r"tasks\.0: .*write `generate:` where it says `ruler:`"):
        load_config(_config(tmp_path, {"name": "ruler_vt", "ruler": {"lengths": [1024]}}))
    # every run dir written before `generate:` saved an empty `ruler:` in each task: it still reads and reports
    held = load_config(_config(tmp_path, {"name": "toy_made", "generate": {"n": 2}, "ruler": None}))
    assert held.tasks[0].generate == {"n": 2}


def test_a_plugin_benchmark_offers_a_build_command(tmp_path, monkeypatch, fresh_registries):
    _generating_plugin(tmp_path, monkeypatch)
    listed = _invoke("build", "--help")
    assert all(name in listed for name in ("toy", "kv", "sweep", "m4le", "ruler"))
    assert _invoke("build", "toy", "--n", "3", "--out", "x.jsonl").strip() == "3 toy examples to x.jsonl"
    from experiments.tasks.benchmark import register_benchmark

    register_benchmark(Benchmark(name="toyclash", formats=(), tasks=lambda: (), commands={"kv": "toygen:build_toy"}))
    clash = CliRunner().invoke(app, ["build", "--help"])
    assert clash.exit_code == 2 and "`ctxcomp build kv` is offered by the benchmarks litm and toyclash" in clash.output
