"""``ctxcomp retrieve`` and ``ctxcomp curve`` through embedding shards (``--shards``, ``--executor ray``).

Sharded retrieval must give the unsharded dense retriever's hits (MiniLM on
real Wikipedia passages, and a feature-hashing encoder), a curve's predictions
must not change with where the corpus was encoded, a SIGKILLed encode must
resume without encoding its finished shards again, and bad options are one line
before any work.  The Ray tests share one local Ray instance with 2 CPUs; if
Ray cannot start they fail, they are not skipped.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest
import typer
from typer.testing import CliRunner

from experiments.cli.curve import curve
from experiments.cli.retrieve import retrieve
from experiments.data.store import write_jsonl
from experiments.data.synthetic import make_multidoc_qa
from experiments.protocols.corpus import load_litm_corpus
from experiments.protocols.litm import litm_qa_record
from experiments.protocols.retrieval import Query
from indexes.chunking import passages_to_chunks
from indexes.vector import FaissIndex
from retrievers.shards import MANIFEST, ShardStore, encode_corpus, shard_folder_name
from tests.retrievers.test_shards import HashDense, corpus
from tests.support.float_bounds import assert_same_ranking_up_to_ties
from tests.support.kill import kill_after_shards

REPO = Path(__file__).resolve().parents[3]
HERE = "tests.experiments.run.test_encode_cli"
ORACLE = "lost_in_the_middle/nq-open-oracle.jsonl.gz"
MINILM_ID = "sentence-transformers/all-MiniLM-L6-v2"
VOLATILE = {"latency_s", "compress_s", "cached"}

app = typer.Typer()
app.command("retrieve")(retrieve)
app.command("curve")(curve)
cli = CliRunner()


class CountingDense(HashDense):
    """``HashDense`` that counts, across instances, the passages it encodes (and can be slowed down)."""

    passages = 0

    def __init__(self, dim: int = 64, delay_s: float = 0.0, use_title: bool = True) -> None:
        super().__init__(dim, delay_s, use_title)
        inner = self.encoder.encode_documents

        def encode_documents(texts):
            type(self).passages += len(texts)
            return inner(texts)

        self.encoder.encode_documents = encode_documents


COUNTING = f"{HERE}:CountingDense"


@pytest.fixture(autouse=True)
def _env(monkeypatch, tmp_path):
    monkeypatch.setenv("CTXCOMP_NO_PROGRESS", "1")
    monkeypatch.setenv("CTXCOMP_CACHE_DIR", str(tmp_path / "cache"))  # a cold embedding cache per test
    CountingDense.passages = 0


@pytest.fixture(scope="module")
def ray_instance():
    """A local Ray instance with 2 CPUs for the module's Ray tests; failing to start it fails them (without the
    ``ray`` extra they skip)."""
    ray = pytest.importorskip("ray", reason="the ray extra is not installed")

    ray.init(address="local", num_cpus=2, include_dashboard=False, logging_level="ERROR")
    yield ray
    ray.shutdown()


def write_corpus(folder: Path, chunks, queries) -> tuple[Path, Path]:
    c = write_jsonl([{"id": ch.doc_id, "text": ch.text, "title": ch.title} for ch in chunks], folder / "corpus.jsonl")
    q = write_jsonl([{"id": q.id, "query": q.text, "answers": list(q.answers)} for q in queries],
                    folder / "queries.jsonl")
    return c, q


@pytest.fixture(scope="module")
def wiki(shared_data, tmp_path_factory):
    """80 real Wikipedia passages (the first of NQ-open's oracle file, in file order: the first questions' own)
    and 16 questions they answer."""
    questions, passages = load_litm_corpus(shared_data / ORACLE)
    queries = [Query(f"q{i}", q.query, q.answers) for i, q in enumerate(questions[:16])]
    return write_corpus(tmp_path_factory.mktemp("wiki"), passages_to_chunks(passages[:80], "litm"), queries)


@pytest.fixture(scope="module")
def hashed(tmp_path_factory):
    """400 synthetic titled passages and 12 queries that name one passage each."""
    from experiments.protocols.retrieval import Query

    queries = [Query(f"q{i}", f"passage {i} topic t{i % 17} n{i}", (f"n{i}",)) for i in range(0, 400, 33)]
    return write_corpus(tmp_path_factory.mktemp("hashed"), corpus(400), queries)


def run_retrieve(files, out: Path, *extra: str) -> tuple[list[dict], dict]:
    res = cli.invoke(app, ["retrieve", str(files[0]), str(files[1]), "-k", "5", "--out", str(out), "--json", *extra])
    assert res.exit_code == 0, res.output
    return [json.loads(line) for line in out.read_text().splitlines()], json.loads(res.stdout.strip().splitlines()[-1])


def same_hits(a: list[dict], b: list[dict], tol: float) -> None:
    """The same hits up to near-ties: scores within ``tol`` of each other, and two hits may swap, or trade the
    last place, only where their scores are that close (which of two near-tied passages ranks first moves with
    the batch and the host's kernels, issue 48)."""
    assert [r["id"] for r in a] == [r["id"] for r in b]
    for x, y in zip(a, b):
        assert_same_ranking_up_to_ties([h["id"] for h in x["hits"]], [h["score"] for h in x["hits"]],
                                       [h["id"] for h in y["hits"]], [h["score"] for h in y["hits"]], tol / 2)


def stamps(folder: Path) -> dict[str, tuple[int, int]]:
    """Each shard file's (inode, mtime): a shard written again gets a new inode (written to a temporary, renamed)."""
    return {p.name: (p.stat().st_ino, p.stat().st_mtime_ns) for p in sorted(folder.glob("shard-*.npy"))}


def one_line_error(res) -> str:
    lines = [ln for ln in res.output.splitlines() if ln.strip()]
    assert res.exit_code == 2 and len(lines) == 1 and lines[0].startswith("error: "), res.output
    return lines[0]


# -- the retriever adopts a prebuilt index ------------------------------------------------------


def test_index_vectors_searches_exactly_as_index_does(tmp_path):
    chunks = corpus(150)
    store = encode_corpus(chunks, HashDense(dim=64), tmp_path / "emb", shard_size=40)
    adopted = HashDense(dim=64).index_vectors(chunks, store.to_index("flat"))
    direct = HashDense(dim=64).index(chunks)
    queries = ["topic t3 mentions w21", "passage 99 n99", "Title 7 topic t11", "nothing shared at all"]
    got, want = adopted.search(queries, 7), direct.search(queries, 7)
    assert [[(h.chunk, h.score, h.rank) for h in row] for row in got] == \
           [[(h.chunk, h.score, h.rank) for h in row] for row in want]
    assert got[1][0].chunk.doc_id == "p99" and adopted.texts_encoded == 4  # the queries only: documents came from the shards
    with pytest.raises(ValueError, match="150 vectors for 149 chunks"):
        HashDense(dim=64).index_vectors(chunks[:-1], store.to_index("flat"))
    l2 = FaissIndex(64, "flat", metric="l2")
    l2.add([str(i) for i in range(150)], store.vectors())
    with pytest.raises(ValueError, match="inner product"):
        HashDense(dim=64).index_vectors(chunks, l2)


# -- ctxcomp retrieve -----------------------------------------------------------------------------


@pytest.mark.slow
def test_sharded_minilm_retrieval_gives_the_unsharded_hits(wiki, tmp_path):
    plain, plain_summary = run_retrieve(wiki, tmp_path / "plain.jsonl", "--retriever", "minilm")
    sharded, summary = run_retrieve(wiki, tmp_path / "sharded.jsonl", "--retriever", "minilm",
                                    "--shards", str(tmp_path / "emb"), "--shard-size", "30")
    store = ShardStore.load(tmp_path / "emb")
    assert (store.shards, store.count, store.manifest["model_id"], store.manifest["dim"]) == (3, 80, MINILM_ID, 384)
    same_hits(plain, sharded, 1e-5)  # vectors encoded 30 at a time, not 80 at once: equal up to float rounding
    assert summary == plain_summary and summary["n"] == 16 and summary["recall@1"] >= 0.9
    before = stamps(tmp_path / "emb")
    again, _ = run_retrieve(wiki, tmp_path / "again.jsonl", "--retriever", "minilm",
                            "--shards", str(tmp_path / "emb"), "--shard-size", "30")
    assert stamps(tmp_path / "emb") == before and again == sharded  # whole shards are reused, never rewritten


def kill_after_three_shards(args: list[str], folder: Path) -> dict:
    """Run ``ctxcomp ARGS`` (a slowed encoder), SIGKILL it once three shards are on disk; the shards left."""
    kill_after_shards([sys.executable, "-m", "experiments.cli", *args, "--retriever-param", "delay_s=0.004"], folder)
    return stamps(folder)


def test_a_killed_sharded_retrieve_resumes_from_its_last_whole_shard(hashed, tmp_path):
    folder = tmp_path / "emb"
    args = ["retrieve", str(hashed[0]), str(hashed[1]), "-k", "5", "--retriever", COUNTING,
            "--shards", str(folder), "--shard-size", "40", "--out", str(tmp_path / "killed.jsonl")]
    survivors = kill_after_three_shards(args, folder)
    assert 3 <= len(survivors) < 10 and not (tmp_path / "killed.jsonl").exists()

    resumed, _ = run_retrieve(hashed, tmp_path / "resumed.jsonl", "--retriever", COUNTING,
                              "--shards", str(folder), "--shard-size", "40")
    assert CountingDense.passages == 40 * (10 - len(survivors))  # only the missing shards were encoded
    after = stamps(folder)
    assert len(after) == 10 and {k: after[k] for k in survivors} == survivors
    assert not list(folder.glob(".*.tmp"))
    CountingDense.passages = 0
    plain, _ = run_retrieve(hashed, tmp_path / "plain.jsonl", "--retriever", COUNTING)
    assert CountingDense.passages == 400
    same_hits(plain, resumed, 0.0)  # the same encoder, one shard or all at once: identical vectors
    assert [r["hits"][0]["id"] for r in resumed] == [f"p{i}" for i in range(0, 400, 33)]


def test_retrieve_encoding_options_are_one_line_before_any_work(hashed, tmp_path):
    base = ["retrieve", str(hashed[0]), str(hashed[1]), "--out", str(tmp_path / "out.jsonl")]
    cases = [
        (["--executor", "ray"], "need a dense retriever (contriever, minilm"),
        (["--shards", str(tmp_path / "emb")], "need a dense retriever"),
        (["--retriever", COUNTING, "--workers", "2"], "--workers need(s) --executor ray or --shards DIR"),
        (["--retriever", COUNTING, "--shard-size", "10"], "--shard-size need(s) --executor ray or --shards DIR"),
        (["--retriever", COUNTING, "--executor", "dask"], "--executor must be 'local' or 'ray', got 'dask'"),
        (["--retriever", COUNTING, "--shards", str(tmp_path / "emb"), "--shard-size", "0"], "--shard-size must be >= 1"),
        (["--retriever", COUNTING, "--shards", str(tmp_path / "emb"), "--ray-address", "auto"],
         "--ray-address need(s) --executor ray"),
        (["--retriever", COUNTING, "--executor", "ray", "--workers", "0"], "--workers must be >= 1"),
        (["--retriever", COUNTING, "--executor", "ray", "--ray-address", "127.0.0.1:1"],
         "cannot reach the Ray cluster at 127.0.0.1:1"),
        (["--retriever", COUNTING, "--executor", "ray", "--ray-address", "not an address"],
         "--ray-address must be 'auto', HOST:PORT or ray://HOST:PORT"),
        (["--retriever", "minilmm", "--executor", "ray"], "Did you mean 'minilm'"),
    ]
    for extra, needle in cases:
        line = one_line_error(cli.invoke(app, base + extra))
        assert needle in line, (extra, line)
    assert not (tmp_path / "out.jsonl").exists() and not (tmp_path / "emb").exists()
    assert not (tmp_path / "cache" / "shards").exists() and CountingDense.passages == 0


def test_a_folder_of_another_corpus_is_refused_in_one_line(hashed, tmp_path):
    encode_corpus(corpus(30), HashDense(dim=64), tmp_path / "emb", shard_size=40)
    res = cli.invoke(app, ["retrieve", str(hashed[0]), str(hashed[1]), "--retriever", COUNTING,
                           "--shards", str(tmp_path / "emb"), "--shard-size", "40"])
    assert "holds embedding shards of another corpus or encoder (count, fingerprint differ)" in one_line_error(res)


@pytest.mark.slow
def test_ray_encoded_minilm_retrieval_gives_the_local_hits(wiki, tmp_path, ray_instance):
    local, local_summary = run_retrieve(wiki, tmp_path / "local.jsonl", "--retriever", "minilm",
                                        "--shards", str(tmp_path / "local"), "--shard-size", "30")
    on_ray, summary = run_retrieve(wiki, tmp_path / "ray.jsonl", "--retriever", "minilm", "--executor", "ray",
                                   "--workers", "1", "--shard-size", "30")  # one actor: the real model loads once
    roots = list((tmp_path / "cache" / "shards").iterdir())  # default: a folder under $CTXCOMP_CACHE_DIR/shards
    assert len(roots) == 1 and roots[0].name.endswith(f"-{MINILM_ID.replace('/', '_')}-s30")
    store, mine = ShardStore.load(roots[0]), ShardStore.load(tmp_path / "local")
    assert store.manifest["fingerprint"] == mine.manifest["fingerprint"] and store.shards == 3
    assert roots[0].name == shard_folder_name(MINILM_ID, True, store.manifest["fingerprint"], 30)
    assert np.allclose(store.vectors(), mine.vectors(), atol=1e-5)  # bit-equal here; BLAS threads may move last bits
    same_hits(local, on_ray, 1e-5)
    assert summary == local_summary
    assert ray_instance.is_initialized()  # the pool closed its actors and left the test's instance running


# -- ctxcomp curve -------------------------------------------------------------------------------


def litm_file(folder: Path, n: int, num_docs: int, seed: int = 3) -> Path:
    return write_jsonl([litm_qa_record(q) for q in make_multidoc_qa(n, num_docs=num_docs, words_per_doc=30, seed=seed)],
                       folder / "qa.jsonl")


def run_curve(path: Path, out: Path, retriever: str, *extra: str) -> dict:
    res = cli.invoke(app, ["curve", "--litm", str(path), "--retriever", retriever, "--reader", "extractive",
                           "--ks", "1,3", "--out", str(out), *extra])
    assert res.exit_code == 0, res.output
    return predictions(out)


def predictions(out: Path) -> dict:
    records = {}
    for line in (out / "predictions.jsonl").read_text().splitlines():
        rec = json.loads(line)
        records[(rec["id"], rec["config_hash"])] = {k: v for k, v in rec.items() if k not in VOLATILE}
    return records


def same_predictions(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for key in a:
        x, y = dict(a[key]), dict(b[key])
        sx, sy = x.pop("chunk_scores"), y.pop("chunk_scores")
        assert x == y, key  # prediction, kept chunks, prompt hash, score, answer_in_context ...
        assert sx == pytest.approx(sy, abs=2e-4)  # retrieval scores, rounded to 4 places, agree


@pytest.mark.slow
def test_curve_predictions_do_not_change_with_local_shards(tmp_path):
    path = litm_file(tmp_path, n=6, num_docs=4)
    plain = run_curve(path, tmp_path / "plain", "minilm")
    sharded = run_curve(path, tmp_path / "sharded", "minilm", "--shards", str(tmp_path / "emb"), "--shard-size", "10")
    same_predictions(plain, sharded)
    assert ShardStore.load(tmp_path / "emb").shards == 3  # 24 passages, 10 a shard
    assert (tmp_path / "plain" / "config.yaml").read_text() == (tmp_path / "sharded" / "config.yaml").read_text()
    assert not (tmp_path / "plain" / "shards").exists()  # without the options nothing changes


@pytest.mark.slow
def test_curve_on_ray_writes_shards_in_the_run_directory_and_predicts_the_same(tmp_path, ray_instance):
    path = litm_file(tmp_path, n=10, num_docs=6)
    plain = run_curve(path, tmp_path / "plain", COUNTING)
    on_ray = run_curve(path, tmp_path / "ray", COUNTING, "--executor", "ray", "--workers", "2", "--shard-size", "16")
    same_predictions(plain, on_ray)
    assert plain == on_ray  # the same encoder everywhere: even the scores are equal
    folders = list((tmp_path / "ray" / "shards").iterdir())
    assert len(folders) == 1 and ShardStore.load(folders[0]).shards == 4  # 60 passages, 16 a shard
    assert (tmp_path / "plain" / "config.yaml").read_text() == (tmp_path / "ray" / "config.yaml").read_text()
    # run again: the run is done and every shard is there, so no encoder actor starts
    res = cli.invoke(app, ["curve", "--litm", str(path), "--retriever", COUNTING, "--reader", "extractive",
                           "--ks", "1,3", "--out", str(tmp_path / "ray"), "--executor", "ray", "--workers", "2",
                           "--shard-size", "16"])
    assert res.exit_code == 0 and "0 predicted, 20 already done" in res.output, res.output
    assert "4 of 4 already there" in res.output


def test_a_killed_curve_encode_resumes_and_predicts_as_an_unsharded_run(tmp_path):
    path = litm_file(tmp_path, n=40, num_docs=10)  # 400 passages
    out, folder = tmp_path / "run", tmp_path / "emb"
    args = ["curve", "--litm", str(path), "--retriever", COUNTING, "--reader", "extractive", "--ks", "1,3",
            "--out", str(out), "--shards", str(folder), "--shard-size", "40"]
    survivors = kill_after_three_shards(args, folder)
    assert 3 <= len(survivors) < 10 and not (out / "predictions.jsonl").exists()

    res = cli.invoke(app, args + ["--retriever-param", "delay_s=0.004"])  # the same command again
    assert res.exit_code == 0, res.output
    assert CountingDense.passages == 40 * (10 - len(survivors))
    after = stamps(folder)
    assert len(after) == 10 and {k: after[k] for k in survivors} == survivors
    sharded = predictions(out)
    plain = run_curve(path, tmp_path / "plain", COUNTING, "--retriever-param", "delay_s=0.004")
    assert sharded == plain and len(plain) == 80


def test_curve_encoding_options_are_one_line_before_any_work(tmp_path):
    path = litm_file(tmp_path, n=4, num_docs=3)
    out = tmp_path / "run"
    base = ["curve", "--litm", str(path), "--reader", "extractive", "--ks", "1", "--out", str(out)]
    for extra, needle in [
        (["--executor", "ray"], "need a dense retriever (contriever, minilm, sentence-transformers, openai, ...); "
                                "got 'bm25'"),
        (["--shards", str(tmp_path / "emb")], "need a dense retriever"),
        (["--retriever", COUNTING, "--workers", "2"], "--workers need(s) --executor ray or --shards DIR"),
        (["--retriever", COUNTING, "--executor", "ray", "--ray-address", "127.0.0.1:1"],
         "cannot reach the Ray cluster at 127.0.0.1:1"),
    ]:
        line = one_line_error(cli.invoke(app, base + extra))
        assert needle in line, (extra, line)
    assert not out.exists() and not (tmp_path / "emb").exists()

    config = tmp_path / "two.yaml"  # two dense indexes of one corpus: two encoders cannot share one folder
    task = {"name": "nq_multidoc", "path": str(path), "open_domain": {"retriever": COUNTING, "depth": 2}}
    config.write_text(json.dumps({
        "name": "two", "readers": ["extractive"], "compressors": [{"name": "top_k", "params": {"k": [1]}}],
        "tasks": [{**task, "label": "a"},
                  {**task, "label": "b", "open_domain": {"retriever": {"name": COUNTING, "params": {"dim": 32}},
                                                         "depth": 2}}]}))
    res = cli.invoke(app, ["curve", "--config", str(config), "--out", str(out), "--shards", str(tmp_path / "emb")])
    assert "the config has 2 dense open-domain indexes" in one_line_error(res)
    assert not out.exists() and not (tmp_path / "emb").exists()


def test_auto_gpus_packs_actors_evenly():
    from experiments.run.sharding import auto_gpus

    assert auto_gpus(0.0, None) == (None, 0.0) and auto_gpus(0.0, 3) == (3, 0.0)
    assert auto_gpus(8.0, None) == (8, 1.0) and auto_gpus(8.0, 4) == (4, 1.0)
    assert auto_gpus(2.0, 3) == (3, 0.5) and auto_gpus(1.0, 2) == (2, 0.5)


def test_manifest_names_the_folder(tmp_path):
    store = encode_corpus(corpus(12), HashDense(dim=16), tmp_path / "emb", shard_size=5)
    name = shard_folder_name(store.manifest["model_id"], True, store.manifest["fingerprint"], 5)
    assert name == f"{store.manifest['fingerprint'][:16]}-hash-16-s5"
    assert shard_folder_name("a/b c:d", False, "0" * 64, 50_000) == "0000000000000000-a_b_c_d-notitle"
    assert (tmp_path / "emb" / MANIFEST).is_file()
