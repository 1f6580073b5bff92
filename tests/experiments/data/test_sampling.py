"""Seeded, nested samples (``sample:``) and the cluster key every loader gives an example."""
from __future__ import annotations

import json
from collections import Counter
from dataclasses import replace

import pytest

from experiments.data.records import Example
from experiments.data.sampling import draw_sample, sample_order
from experiments.run.config import ConfigError, parse_config
from experiments.tasks.loading import load_examples


def _pool(documents: int = 7, per_document: tuple[int, ...] = (1, 5, 2, 3, 4, 1, 6)) -> list[Example]:
    out = []
    for d in range(documents):
        for q in range(per_document[d]):
            out.append(Example(id=f"d{d}-q{q}", task="t", query=f"q{q}", context=f"document {d}", answers=("a",),
                               cluster=f"doc{d}"))
    return out


@pytest.mark.parametrize("by", ["document", "none"])
def test_a_sample_is_a_prefix_of_every_larger_sample_of_the_same_seed(by):
    pool = _pool()
    for seed in range(5):
        samples = [[ex.id for ex in draw_sample(pool, n, seed=seed, by=by)] for n in range(len(pool) + 3)]
        for small, large in zip(samples, samples[1:]):
            assert large[: len(small)] == small
        assert sorted(samples[-1]) == sorted(ex.id for ex in pool)  # n beyond the pool: all of it, once each


def test_by_document_deals_round_robin_over_documents():
    pool = _pool()
    order = sample_order(pool, seed=3, by="document")
    clusters = [ex.cluster for ex in order]
    # the first 7 cover the 7 documents; a document appears a (k+1)-th time only once every document with
    # more than k questions has appeared k times
    assert len(set(clusters[:7])) == 7
    seen: Counter = Counter()
    sizes = Counter(ex.cluster for ex in pool)
    for c in clusters:
        seen[c] += 1
        assert all(seen[other] >= min(seen[c] - 1, sizes[other]) for other in sizes)


def test_a_sample_depends_on_the_seed_and_not_on_the_file_order():
    pool = _pool()
    shuffled = pool[::-1]
    assert [e.id for e in draw_sample(pool, 9, seed=1)] == [e.id for e in draw_sample(shuffled, 9, seed=1)]
    assert [e.id for e in draw_sample(pool, 9, seed=1)] != [e.id for e in draw_sample(pool, 9, seed=2)]
    plain = [e.cluster for e in draw_sample(pool, 7, seed=0, by="none")]
    assert len(set(plain)) < 7 or plain != [e.cluster for e in draw_sample(pool, 7, seed=0)]


def test_the_cluster_of_an_example_is_its_id_unless_given_and_survives_replace():
    ex = Example(id="q7", task="t", query="q", context="c", answers=("a",))
    assert ex.cluster == "q7"
    moved = replace(ex, id="q7@gold4")  # a sweep position stays in its question's cluster
    assert moved.cluster == "q7"


def test_leval_questions_on_one_document_share_a_cluster(tmp_path):
    lines = [{"instructions": ["q1", "q2", "q3"], "outputs": ["a", "b", "c"], "input": "the first document"},
             {"instructions": ["q4"], "outputs": ["d"], "input": "the second document"}]
    path = tmp_path / "leval_x.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in lines) + "\n")
    examples = load_examples(path, "leval")
    assert len({ex.cluster for ex in examples[:3]}) == 1
    assert examples[3].cluster != examples[0].cluster
    assert examples[0].cluster.startswith("doc:")


def test_leval_sample_by_document_on_the_real_file_spreads_over_documents(shared_data):
    pool = load_examples(shared_data / "leval" / "financial_qa.jsonl", "leval")
    documents = len({ex.cluster for ex in pool})
    first = pool[:6]
    sample = draw_sample(pool, 6, seed=0, by="document")
    assert documents >= 6
    assert len({ex.cluster for ex in sample}) == 6  # six questions, six documents
    assert len({ex.cluster for ex in first}) < 6  # `limit: 6` takes fewer documents than that


def _config(**task):
    return {"tasks": [{"name": "nq_multidoc", "synthetic": {"kind": "multidoc_qa", "n": 12}, **task}],
            "readers": ["extractive"]}


def test_a_task_takes_sample_and_refuses_it_beside_limit():
    config = parse_config(_config(sample={"n": 4, "seed": 2}))
    assert config.tasks[0].sample is not None and config.tasks[0].sample.by == "document"
    with pytest.raises(ConfigError, match="`limit`.*`sample`"):
        parse_config(_config(sample={"n": 4}, limit=3))
    with pytest.raises(ConfigError, match="sample.n"):
        parse_config(_config(sample={"n": 0}))
    with pytest.raises(ConfigError, match="sample.by"):
        parse_config(_config(sample={"n": 4, "by": "task"}))


def test_a_grown_sample_continues_the_same_run_and_a_shrunk_or_reseeded_one_does_not():
    small = parse_config(_config(sample={"n": 4, "seed": 2}))
    assert small.same_run(parse_config(_config(sample={"n": 8, "seed": 2})))
    assert not small.same_run(parse_config(_config(sample={"n": 3, "seed": 2})))
    assert not small.same_run(parse_config(_config(sample={"n": 8, "seed": 3})))


def test_a_run_grows_its_sample_in_place_and_asks_only_for_the_new_questions(tmp_path, shared_data):
    """Growing ``sample.n`` continues the run: the questions already predicted stay, only new ones are read,
    and each prediction of a shared document carries its cluster."""
    from experiments.run.driver import Runner

    def config(n):
        return parse_config({"name": "grow", "readers": ["extractive"], "compressors": ["full"], "tasks": [
            {"name": "financial_qa", "path": str(shared_data / "leval" / "financial_qa.jsonl"),
             "sample": {"n": n, "seed": 0}, "max_new_tokens": 16}]})

    run = tmp_path / "run"
    first = Runner(config(3), run, progress=False).run()
    ids3 = [json.loads(l)["id"] for l in (run / "predictions.jsonl").read_text().splitlines()]
    second = Runner(config(7), run, progress=False).run()
    recs = [json.loads(l) for l in (run / "predictions.jsonl").read_text().splitlines()]
    assert first.predicted == 3 and second.predicted == 4 and second.already_done == 3
    assert [r["id"] for r in recs[:3]] == ids3 and len({r["id"] for r in recs}) == 7
    assert all(r["cluster"].startswith("doc:") for r in recs)
    grid = json.loads((run / "grid.json").read_text())
    assert grid["tasks"][0]["sample"] == {"n": 7, "seed": 0, "by": "document", "deal": "round-robin"}


def test_a_sample_dealt_whole_takes_whole_documents_and_stays_nested():
    """``deal: whole`` (what ``--until-decided`` draws): the sample of n is whole documents until it holds n
    questions, a prefix of every larger one; ``by: none`` has no documents to keep whole."""
    pool = _pool()
    size = Counter(ex.cluster for ex in pool)
    samples = [draw_sample(pool, n, seed=1, deal="whole") for n in range(1, len(pool) + 1)]
    for n, drawn in enumerate(samples, start=1):
        held = Counter(ex.cluster for ex in drawn)
        assert all(held[d] == size[d] for d in held) and len(drawn) >= n
        assert len(drawn) - n < max(size.values())  # rounded up to the end of one document, no more
    for small, large in zip(samples, samples[1:]):
        assert [e.id for e in large[: len(small)]] == [e.id for e in small]
    with pytest.raises(ValueError, match="by='document'"):
        draw_sample(pool, 3, seed=1, by="none", deal="whole")
    with pytest.raises(ConfigError, match="deal: whole"):
        parse_config({"readers": ["extractive"], "compressors": ["full"], "tasks": [
            {"name": "nq_multidoc", "synthetic": {"kind": "multidoc_qa", "n": 4}, "sample": {"n": 2, "by": "none",
                                                                                               "deal": "whole"}}]})
