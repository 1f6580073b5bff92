"""Issue 50 (part A) for ``plan``: it sizes to the power asked (the expected power, not a 90% upper bound of
the pilot's spread), and it reads the task's pool from its source, never from a pilot's ``limit``."""
from __future__ import annotations

import numpy as np
import yaml
from scipy import stats

from experiments.design.forecast import _pools
from experiments.inference import exact
from experiments.inference.power import needed, pilot


def _true_power(n: int, discordant: float, margin: float = 5.0) -> float:
    """The exact test's power at n at a true difference of 0: its rejection region's trinomial probability,
    summed cell by cell (by definition, not by the plan's code path)."""
    loss, gain = np.nonzero(exact.rejection_table(n, -margin / 100, 0.025))
    return float(stats.multinomial.pmf(np.stack([loss, gain, n - loss - gain], 1), n,
                                       [discordant / 2, discordant / 2, 1 - discordant]).sum())


def test_a_plan_asks_the_n_that_gives_the_power_not_twice_it():
    """A 40-question pilot in which 4 answers changed (2 lost, 2 gained), at its truth (10% discordant, Δ = 0):
    the n planned for 80% power gives at least 0.8 on the truth, and n / 1.3 gives less -- within 1.3x of the
    n that gives it.  The old plan took the pilot's discordance at its 90% upper bound (18%) and asked about
    1.8x that n."""
    full = [1.0] * 2 + [0.0] * 2 + [1.0] * 18 + [0.0] * 18
    arm = [0.0] * 2 + [1.0] * 2 + [1.0] * 18 + [0.0] * 18
    plan = needed(pilot(full, arm), 5.0, delta=0.0, power=0.8)
    n = int(plan.n_clusters)
    assert _true_power(n, 0.10) >= 0.8
    assert _true_power(int(n / 1.3), 0.10) < 0.8


def test_a_pilots_limit_does_not_shrink_the_pool(tmp_path, shared_data):
    """A pilot of 6 questions of natural_question (20 documents in the file) must be able to size a study of
    the file: the pool is the source's, whatever ``limit`` kept (the old plan read "pool holds 6 documents")."""
    source = shared_data / "leval" / "natural_question.jsonl"
    config = {"name": "pilot", "readers": ["extractive"], "compressors": ["full"],
              "tasks": [{"name": "natural_question", "path": str(source), "limit": 6}]}
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
    documents, largest = _pools(tmp_path)["natural_question"]
    assert documents == 20  # the file's documents (two of its 21 lines share one), not the 6 a pilot read
    assert largest >= 2


def test_a_run_records_its_pools_bound_before_any_score_and_its_report_reads_it(tmp_path, shared_data):
    """A run of 6 natural_question questions records in grid.json the file's 20 documents and its largest
    document (10 questions), and the report's cells take that bound, not the sample's (1 question a document):
    the report room cannot read the config's data itself (it sits below ``run``), so the run writes it."""
    from experiments import evaluate
    from experiments.report.cells import load_run

    source = shared_data / "leval" / "natural_question.jsonl"
    config = {"name": "pools", "readers": ["extractive"], "compressors": ["full", {"name": "truncate",
              "params": {"max_tokens": 64}}], "tasks": [{"name": "natural_question", "path": str(source), "limit": 6}]}
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
    evaluate(str(tmp_path / "c.yaml"), str(tmp_path / "run"))
    tasks = {t["key"]: t for t in yaml.safe_load((tmp_path / "run" / "grid.json").read_text())["tasks"]}
    assert tasks["natural_question"]["pool_documents"] == 20
    assert tasks["natural_question"]["largest_document"] == 10
    assert load_run(tmp_path / "run").largest == {"natural_question": 10}


def test_a_swept_tasks_pool_bound_counts_every_item_a_question_makes(shared_data):
    """A Lost in the Middle sweep scores each question once per position (and once more closed-book or with
    the oracle): the file holds one item a question, but a document of the run holds that many, so the bound
    recorded for the report is the file's largest document times them (the file's 1 was below every swept
    document: the report's test refused it)."""
    from experiments.run.config import parse_config
    from experiments.run.examples import source_pools

    litm = str(shared_data / "lost_in_the_middle" / "nq-open-oracle.jsonl.gz")
    config = parse_config({"name": "b", "readers": ["extractive"], "compressors": ["full"], "tasks": [
        {"name": "nq_multidoc", "path": litm, "sample": {"n": 4, "seed": 0},
         "sweep": {"positions": [0, 2, 4], "num_docs": 5, "distractors": {"method": "random"}}},
        {"name": "nq_multidoc", "label": "cb", "path": litm, "limit": 4,
         "sweep": {"positions": [0, 4], "num_docs": 5, "closed_book": True, "oracle": True,
                   "distractors": {"method": "random"}}}]})
    assert source_pools(config) == {"nq_multidoc": (2655, 3), "cb": (2655, 4)}


def test_a_round_robin_sample_bounds_a_document_by_what_it_deals(tmp_path, shared_data):
    """A sample of 6 by document from financial_qa (6 documents: 8, 8, 8, 10, 10 and 24 questions; three of its
    lines share one page) deals one question to each, whatever the scores: grid.json bounds a document's sum by
    1 question, not the pool's 24; a sample of 12 by 2; a plain sample (``by: none``) by the pool's largest
    document; and ``plan`` still sizes from the pool's 24, since the study it sizes may deal more."""
    from collections import Counter

    from experiments import evaluate
    from experiments.data.sampling import dealt_bound
    from experiments.run.examples import source_pools

    source = str(shared_data / "leval" / "financial_qa.jsonl")
    sizes = [8, 8, 8, 10, 10, 24]
    assert [dealt_bound(sizes, n) for n in (1, 6, 7, 12, 13, 48, 49, 53, 57, 68, 99)] == [1, 1, 2, 2, 3, 8, 9, 10, 13, 24, 24]
    tasks = [{"name": "financial_qa", "label": label, "path": source, "sample": sample}
             for label, sample in (("six", {"n": 6}), ("twelve", {"n": 12}), ("plain", {"n": 6, "by": "none"}))]
    config = {"name": "dealt", "readers": ["extractive"], "compressors": ["full"], "tasks": tasks}
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
    evaluate(str(tmp_path / "c.yaml"), str(tmp_path / "run"))
    recorded = {t["key"]: t["largest_document"] for t in
                yaml.safe_load((tmp_path / "run" / "grid.json").read_text())["tasks"]}
    assert recorded == {"six": 1, "twelve": 2, "plain": 24}
    rows = [yaml.safe_load(line) for line in (tmp_path / "run" / "predictions.jsonl").read_text().splitlines()]
    for key, bound in recorded.items():  # never below what the run dealt a document
        assert max(Counter(r["cluster"] for r in rows if r["task"] == key).values()) <= bound
    from experiments.run.config import parse_config

    assert {k: v[1] for k, v in source_pools(parse_config(config)).items()} == {"six": 24, "twelve": 24, "plain": 24}
