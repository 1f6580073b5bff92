"""A plugin retriever that breaks the search contract, driven through `retrieve`, `run` and `curve`: one line naming
its class, the query's position and the rule; no bad record written; the same run finishes once it is fixed.
And the corpus order: a retriever that answers in index order gets chance recall at any --limit."""
from __future__ import annotations

import csv
import gzip
import json
from collections.abc import Sequence

import pytest
import yaml
from typer.testing import CliRunner

from experiments.cli.app import app
from indexes.types import Chunk
from retrievers.base import Hit, Retriever

HERE = __name__
runner = CliRunner()
FLAW: str | None = None  # how Broken breaks the contract; set by the tests, None: it keeps it
N = 200  # questions in the synthetic file, each with one passage of its own


class Broken(Retriever):
    """Answers in index order (the first k chunks, scores k, k-1, ...), then breaks the contract as ``FLAW`` says."""

    calls_model = False

    def index(self, chunks: Sequence[Chunk]) -> Broken:
        self.chunks = list(chunks)
        return self

    def search(self, queries: Sequence[str], k: int) -> list[list[Hit]]:
        good = [[Hit(c, float(k - r), r) for r, c in enumerate(self.chunks[:k])] for _ in queries]
        flaw = FLAW
        if flaw == "first_only":
            return good[:1]
        if flaw == "flat":
            return good[0]  # type: ignore[return-value]
        if flaw == "tuples":
            return [[(h.chunk.chunk_id, h.score) for h in hits] for hits in good]  # type: ignore[misc]
        if flaw in ("none_score", "nan"):
            bad = None if flaw == "none_score" else float("nan")
            return [[Hit(h.chunk, bad, h.rank) for h in hits] for hits in good]  # type: ignore[arg-type]
        if flaw == "too_many":
            return [hits + [Hit(hits[0].chunk, 0.0, len(hits))] for hits in good]
        if flaw == "unsorted":
            return [[Hit(h.chunk, float(h.rank), h.rank) for h in hits] for hits in good]
        if flaw == "foreign":
            alien = Chunk("alien#0", "alien", 0, 0, 5, "alien", "")
            return [[Hit(alien, h.score, h.rank) if h.rank == 0 else h for h in hits] for hits in good]
        return good


# each flaw, and the rule its one line must name
RULES = {
    "first_only": "query 1 of 6: search returned 1 lists for 6 queries; one list per query",
    "flat": "query 0 of 6: expected a list of hits for each query, got a Hit",
    "tuples": "query 0 of 6, hit 0: expected Hit(chunk, score, rank), got tuple",
    "none_score": "query 0 of 6, hit 0: score must be a finite float, got None",
    "nan": "query 0 of 6, hit 0: score must be a finite float, got nan",
    "too_many": "query 0 of 6: 3 hits for k=2; at most k",
    "unsorted": "query 0 of 6, hit 1: score 1 is above rank 0's 0; scores must not increase with rank",
    "foreign": "query 0 of 6, hit 0: its chunk 'alien#0' is not one of the",
}


def litm_file(folder, n: int = N):
    """``n`` questions in Lost in the Middle's format, question i answered (``zq{i}x``) by its one passage only,
    listed in question order as the published files are."""
    path = folder / "qa.jsonl.gz"
    with gzip.open(path, "wt", encoding="utf-8") as f:
        for i in range(n):
            ctx = {"title": f"Item {i}", "text": f"item {i} has the code zq{i}x", "hasanswer": True, "isgold": True}
            f.write(json.dumps({"question": f"what is the code of item {i}?", "answers": [f"zq{i}x"],
                                "ctxs": [ctx]}) + "\n")
    return path


@pytest.fixture
def flaw(monkeypatch, request):
    import sys

    monkeypatch.setattr(sys.modules[HERE], "FLAW", request.param)
    return request.param


def one_error_line(result) -> str:
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    (line,) = [ln for ln in result.output.splitlines() if ln.startswith("error:")]
    return line


def expect_rule(line: str, flaw: str, queries: int = 6) -> None:
    assert line.startswith(f"error: retriever {HERE}:Broken broke the retriever contract at "), line
    assert RULES[flaw].replace("of 6", f"of {queries}") in line, line


@pytest.mark.parametrize("flaw", list(RULES), indirect=True)
def test_retrieve_stops_on_a_broken_search_in_one_line(tmp_path, flaw):
    path = litm_file(tmp_path)
    got = runner.invoke(app, ["retrieve", "--litm", str(path), "--retriever", f"{HERE}:Broken", "-k", "2",
                              "--limit", "6", "--json", "--out", str(tmp_path / "hits.jsonl")])
    expect_rule(one_error_line(got), flaw)


def _curve(path, out, limit: int = 6, ks: str = "1,2"):
    return runner.invoke(app, ["curve", "--litm", str(path), "--retriever", f"{HERE}:Broken", "--reader",
                               "extractive", "--ks", ks, "--limit", str(limit), "--out", str(out), "--plain"])


def _predictions(out) -> list[dict]:
    path = out / "predictions.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


@pytest.mark.parametrize("flaw", list(RULES), indirect=True)
def test_curve_stops_on_a_broken_search_and_resumes_once_the_plugin_is_fixed(tmp_path, flaw, monkeypatch):
    import sys

    path, out = litm_file(tmp_path), tmp_path / "curve"
    expect_rule(one_error_line(_curve(path, out)), flaw)
    assert _predictions(out) == []  # nothing written from a broken search
    monkeypatch.setattr(sys.modules[HERE], "FLAW", None)
    fixed = _curve(path, out)
    assert fixed.exit_code == 0, fixed.output
    assert len(_predictions(out)) == 12  # six questions at two ks


def _config(path, open_domain: bool) -> dict:
    if open_domain:  # the curve as a config: one batched search for every question
        return {"name": "c", "tasks": [{"name": "nq_multidoc", "path": str(path), "limit": 6,
                                        "open_domain": {"retriever": f"{HERE}:Broken", "depth": 2}}],
                "compressors": [{"name": "top_k", "params": {"k": [2]}}], "readers": ["extractive"]}
    return {"name": "r", "tasks": [{"name": "nq_multidoc", "synthetic": {"kind": "multidoc_qa", "n": 3, "num_docs": 4,
                                                                        "words_per_doc": 20, "seed": 0}}],
            "compressors": ["full", {"name": "retrieval", "params": {"retriever": f"{HERE}:Broken", "top_n": 2}}],
            "readers": ["extractive"]}


@pytest.mark.parametrize("flaw", list(RULES), indirect=True)
@pytest.mark.parametrize("open_domain", [True, False], ids=["open-domain", "retrieval-compressor"])
def test_run_stops_on_a_broken_search_and_resumes_once_the_plugin_is_fixed(tmp_path, flaw, open_domain, monkeypatch):
    import sys

    if flaw == "first_only" and not open_domain:
        pytest.skip("the retrieval compressor searches one query at a time: its first list is all there is")
    config, out = tmp_path / "c.yaml", tmp_path / "run"
    config.write_text(yaml.safe_dump(_config(litm_file(tmp_path), open_domain)))
    line = one_error_line(runner.invoke(app, ["run", str(config), "--out", str(out)]))
    if open_domain:
        expect_rule(line, flaw)
    else:  # one query per example, searched over all of the example's chunks (k = their number)
        assert line.startswith(f"error: retriever {HERE}:Broken broke the retriever contract at query 0 of 1"), line
    before = _predictions(out)
    assert all(p["compressor"] == "full" for p in before)  # only the records of what kept the contract
    monkeypatch.setattr(sys.modules[HERE], "FLAW", None)
    fixed = runner.invoke(app, ["run", str(config), "--out", str(out)])
    assert fixed.exit_code == 0, fixed.output
    assert len(_predictions(out)) == 6


def test_index_must_return_the_retriever(tmp_path, monkeypatch):
    monkeypatch.setattr(Broken, "index", lambda self, chunks: None)
    got = runner.invoke(app, ["retrieve", "--litm", str(litm_file(tmp_path, 4)), "--retriever", f"{HERE}:Broken",
                              "--json"])
    assert f"error: retriever {HERE}:Broken broke the retriever contract at index: index must return the " \
           "retriever itself (self), got NoneType" in one_error_line(got)


@pytest.mark.parametrize("vectors,rule", [
    (lambda n: [[1.0, 0.0]] * n, "returned list; it must return a numpy array"),
    (lambda n: __import__("numpy").ones((n + 1, 2), "float32"), "returned shape (4, 2) for 3 texts"),
    (lambda n: __import__("numpy").ones((n, 2), "int64"), "returned dtype int64; it must return float32"),
    (lambda n: __import__("numpy").full((n, 2), float("nan"), "float32"), "a non-finite value in row 0 of 3"),
])
def test_an_encoders_vectors_are_checked(vectors, rule):
    from core.errors import PluginError
    from indexes.types import whole_chunk
    from retrievers.dense import DenseRetriever

    class BadEncoder:
        model_id = "bad"

        def encode_documents(self, texts):
            return vectors(len(texts))

        encode_queries = encode_documents

    chunks = [whole_chunk(f"d{i}", f"text {i}") for i in range(3)]
    with pytest.raises(PluginError, match=r"encoder .*BadEncoder \(bad\) ") as err:
        DenseRetriever(BadEncoder(), use_cache=False).index(chunks)
    assert rule in str(err.value)


# -- the corpus order ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("limit,k,bound", [(5, 5, 0.4), (40, 20, 0.3)])
def test_a_retriever_answering_in_index_order_gets_chance_recall_at_any_limit(tmp_path, limit, k, bound):
    """In file order this retriever would find every limited question's passage (recall 1.0, and 0.5 at limit 40,
    k 20).  Indexed in the seeded order, the k passages it returns are a fixed random set: each limited question's
    passage is among them with chance k/N (0.025, 0.1).  The bounds are far above chance and far below the leak, and
    the seed is fixed, so they cannot flake."""
    path = litm_file(tmp_path)
    got = runner.invoke(app, ["retrieve", "--litm", str(path), "--retriever", f"{HERE}:Broken", "-k", str(k),
                              "--limit", str(limit), "--json"])
    assert got.exit_code == 0, got.output
    summary = json.loads(got.stdout.strip().splitlines()[-1])
    assert summary["corpus_seed"] == 0 and summary["n"] == limit
    assert summary["recall@k"] <= bound
    out = tmp_path / "curve"
    curved = _curve(path, out, limit=limit, ks=f"1,{k}")
    assert curved.exit_code == 0, curved.output
    with open(out / "curve.csv", newline="") as f:
        recall = {int(r["k"]): float(r["recall"]) for r in csv.DictReader(f)}
    assert recall[k] == pytest.approx(100 * summary["recall@k"])  # the curve's index is in the same order
    assert {p["meta"]["corpus_seed"] for p in _predictions(out)} == {0}


def test_over_every_question_the_index_order_retriever_gets_exactly_chance(tmp_path):
    """With all N questions, each passage belongs to one question, so k passages in any order give recall k / N."""
    got = runner.invoke(app, ["retrieve", "--litm", str(litm_file(tmp_path)), "--retriever", f"{HERE}:Broken",
                              "-k", "20", "--json"])
    assert got.exit_code == 0, got.output
    assert json.loads(got.stdout.strip().splitlines()[-1])["recall@k"] == pytest.approx(20 / N)


@pytest.mark.parametrize("flaw", ["nan"], indirect=True)
def test_the_exact_dry_run_checks_the_plugin_it_runs(tmp_path, flaw):
    config = tmp_path / "c.yaml"
    config.write_text(yaml.safe_dump(_config(litm_file(tmp_path), open_domain=False)))
    line = one_error_line(runner.invoke(app, ["run", str(config), "--out", str(tmp_path / "run"), "--dry-run=exact"]))
    assert line.startswith(f"error: retriever {HERE}:Broken broke the retriever contract at query 0 of 1, hit 0: "
                           "score must be a finite float, got nan"), line
