"""docs/plugins.md's complete plugin, copied into an empty folder and run from there with no install, and what a
researcher sees when a plugin cannot be used: where its module was looked for, its own ValueError in one line,
the methods it misses, and ``ctxcomp list --config``."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DOC = REPO / "docs" / "plugins.md"
CTXCOMP = Path(sys.executable).with_name("ctxcomp")  # the console script: its sys.path[0] is bin/, not the folder


def doc_files() -> dict[str, str]:
    """The fenced blocks of docs/plugins.md whose first line names a file (``# tfidf.py``), by that name."""
    blocks = re.findall(r"```(?:python|yaml)\n# ([\w.]+)\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)
    return {name: body for name, body in blocks}


def ctxcomp(folder: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    """The installed ``ctxcomp`` in ``folder``, as a user runs it: no PYTHONPATH, a cache of its own."""
    if not CTXCOMP.exists():
        pytest.skip(f"no console script at {CTXCOMP} (pip install -e . makes it)")
    clean = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "CTXCOMP_DEBUG")}
    clean.update(CTXCOMP_CACHE_DIR=str(folder / ".cache"), CTXCOMP_NO_PROGRESS="1", HF_HUB_OFFLINE="1",
                 TRANSFORMERS_OFFLINE="1", MPLBACKEND="Agg", **env)
    return subprocess.run([str(CTXCOMP), *args], cwd=folder, env=clean, capture_output=True, text=True, timeout=300)


def test_the_documented_plugin_runs_from_its_own_folder(tmp_path):
    files = doc_files()
    assert {"tfidf.py", "tfidf.yaml"} <= set(files), sorted(files)
    for name, body in files.items():
        (tmp_path / name).write_text(body, encoding="utf-8")
    # the block's commands, as the page gives them
    commands = re.findall(r"^ctxcomp (.+)$", DOC.read_text(encoding="utf-8").split("## Run it from its folder")[1]
                          .split("##")[0], re.M)
    assert commands == ["list --config tfidf.yaml", "run tfidf.yaml --out runs/tfidf"]

    listed = ctxcomp(tmp_path, *commands[0].split())
    assert listed.returncode == 0, listed.stderr
    assert "tfidf:TfidfRetriever" in listed.stdout and str(tmp_path / "tfidf.py") in listed.stdout
    assert "max_ngram=1" in listed.stdout

    ran = ctxcomp(tmp_path, *commands[1].split())
    assert ran.returncode == 0, ran.stderr
    traces = [json.loads(line) for line in (tmp_path / "runs/tfidf/traces.jsonl").read_text().splitlines()]
    used = {t["compressor_identity"] for t in traces}
    assert any("tfidf(ngram<=2" in identity for identity in used), used
    assert len(traces) == 12  # six questions, two compressors


# plugins that cannot be used (one refuses its depth in __init__, one misses `search`), shared with the hostile sweep
BAD_PLUGINS = REPO / "tests" / "reliability" / "bad_inputs" / "plugins.py"


def _config(retriever: str) -> str:
    return ("name: p\ntasks: [{name: nq_multidoc, synthetic: {kind: multidoc_qa, n: 2, num_docs: 3, words_per_doc: 20}}]\n"
            f"compressors: [{{name: retrieval, params: {{retriever: {{name: '{retriever}', params: {{depth: 1}}}}, "
            "top_n: 1, chunk_size: 20}}]\nreaders: [extractive]\n")


@pytest.fixture
def bad_plugins(tmp_path):
    (tmp_path / "picky.py").write_text(BAD_PLUGINS.read_text())
    for name, retriever in (("raises", "picky:Picky"), ("half", "picky:Half"), ("nowhere", "nosuchmod:Picky")):
        (tmp_path / f"{name}.yaml").write_text(_config(retriever))
    return tmp_path


def test_a_plugin_that_raises_is_one_line_naming_it_and_its_section_and_debug_shows_the_traceback(bad_plugins):
    got = ctxcomp(bad_plugins, "run", "raises.yaml", "--out", "runs/a")
    assert got.returncode == 2 and "Traceback" not in got.stderr
    (line,) = [ln for ln in got.stderr.splitlines() if ln.startswith("error:")]
    assert line.startswith("error: compressor 'retrieval' > retriever 'picky:Picky' with params {'depth': 1}: "
                           "ValueError in __init__: depth must be at least 2, got 1"), line
    assert "--debug" in line

    debug = ctxcomp(bad_plugins, "--debug", "run", "raises.yaml", "--out", "runs/b")
    assert debug.returncode == 2
    assert "Traceback" in debug.stderr and "picky.py" in debug.stderr and 'raise ValueError(f"depth' in debug.stderr
    assert debug.stderr.strip().splitlines()[-1].startswith("error: compressor 'retrieval' > retriever 'picky:Picky'")


def test_a_missing_abstract_method_is_named_before_anything_runs(bad_plugins):
    got = ctxcomp(bad_plugins, "run", "half.yaml", "--out", "runs/h")
    assert got.returncode == 2 and "Traceback" not in got.stderr
    assert got.stderr.strip() == ("error: retriever 'picky:Half' (picky.Half) does not implement the abstract "
                                  "method(s) search of Retriever; define them in the class")
    assert not (bad_plugins / "runs/h").exists()  # refused by the checks, before the run directory is made


def test_a_module_found_nowhere_says_where_it_was_looked_for(bad_plugins):
    got = ctxcomp(bad_plugins, "run", "nowhere.yaml", "--out", "runs/n")
    assert got.returncode == 2 and "Traceback" not in got.stderr
    message = got.stderr.strip()
    assert "No module named 'nosuchmod'" in message
    assert f"the working directory {bad_plugins}" in message and "PYTHONPATH" in message and sys.prefix in message


def test_import_from_the_working_directory_leaves_sys_path_alone_when_nothing_is_found(tmp_path, monkeypatch):
    from core.errors import PluginError, UnknownComponentError
    from core.registry import import_target

    monkeypatch.chdir(tmp_path)
    before = list(sys.path)
    with pytest.raises(UnknownComponentError, match="working directory"):
        import_target("nosuchmod_anywhere:X", "thing 'x'")
    assert sys.path == before
    (tmp_path / "needs_dep.py").write_text("import nosuchdependency_xyz\nclass X: pass\n")
    with pytest.raises(PluginError, match="was found, but importing it failed: No module named 'nosuchdependency_xyz'"):
        import_target("needs_dep:X", "thing 'x'")


def test_list_config_names_task_files_and_nested_plugins_but_not_builtins(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from experiments.cli.app import app

    monkeypatch.chdir(tmp_path)
    (tmp_path / "short.yaml").write_text("name: short\nfamily: longbench\ncategory: single-doc qa\nlang: en\n"
                                         "metric: qa_f1\nmax_new_tokens: 8\nprompt: \"{context}\\nQ: {input}\\nA:\"\n")
    (tmp_path / "picky.py").write_text(BAD_PLUGINS.read_text())
    (tmp_path / "c.yaml").write_text(
        f"name: l\ntasks: [{{name: ./short.yaml, path: {REPO / 'tests/reliability/bad_inputs/good.jsonl'}}}]\n"
        "compressors: [full, {name: retrieval, params: {retriever: {name: 'picky:Picky', params: {depth: 2}}}}]\n"
        "readers: [extractive]\n")
    got = CliRunner().invoke(app, ["list", "--config", "c.yaml", "--plain"])
    assert got.exit_code == 0, got.output
    rows = [line for line in got.output.splitlines() if line.startswith("| ") and "---" not in line][1:]
    assert len(rows) == 2, rows
    assert rows[0].startswith("| task | ./short.yaml | task './short.yaml' | longbench, single-doc qa, metric=qa_f1 |")
    assert rows[0].endswith(f"| {tmp_path / 'short.yaml'} |")
    assert rows[1].startswith("| retriever | picky:Picky | compressor 'retrieval' / retriever 'picky:Picky' |")
    assert rows[1].endswith(f"| depth=1 | {tmp_path / 'picky.py'} |")


def test_the_documented_retriever_is_as_good_as_bm25_on_the_oracle_file(shared_data, tmp_path, monkeypatch):
    """The page's TF-IDF, run as the page gives it, indexes titles as the built-ins do: on the first 500 questions
    of nq-open-oracle its recall@20 is within 2 points of BM25's (without titles it is about 5 points below)."""
    from experiments.protocols.retrieval import litm_corpus_and_queries, retrieve_all
    from retrievers.contract import Checked
    from retrievers.metrics import recall_at_k
    from retrievers.registry import make_retriever

    (tmp_path / "tfidf.py").write_text(doc_files()["tfidf.py"], encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "tfidf", raising=False)
    chunks, queries = litm_corpus_and_queries(shared_data / "lost_in_the_middle" / "nq-open-oracle.jsonl.gz", 500)
    recall = {}
    for name in ("tfidf:TfidfRetriever", "bm25"):
        relevance = retrieve_all(Checked.index(make_retriever(name), chunks), queries, 20, progress=False)
        recall[name] = 100 * recall_at_k(relevance, [20])[20]
    print(f"\nrecall@20 on 500 questions: {recall}")
    assert abs(recall["tfidf:TfidfRetriever"] - recall["bm25"]) <= 2.0, recall
