"""Clustered paired statistics: questions on one document move together.

Expected values come from definitions computed here, not from the code under test: the cluster bootstrap by
index draws of whole clusters, the cluster sign flip by enumerating every sign pattern of the cluster sums, and
coverage by simulating documents with a known within-document correlation.
"""
from __future__ import annotations

import itertools

import numpy as np
import pytest

from experiments.data.records import Prediction
from experiments.inference.paired import mean_interval, paired_delta
from experiments.inference.verdicts import noninferiority_test
from experiments.report.cells import compute_cells, item_scores, paired_vs


def _clustered(rng, documents, per_document, rho, scale=0.3, mean=0.0):
    """Paired differences of ``documents`` x ``per_document`` questions whose within-document correlation is rho."""
    shared = rng.normal(0, np.sqrt(rho), documents).repeat(per_document)
    d = mean + scale * (shared + rng.normal(0, np.sqrt(1 - rho), documents * per_document))
    return d, [f"doc{i // per_document}" for i in range(documents * per_document)]


def test_examples_with_their_own_document_get_exactly_the_unclustered_numbers():
    rng = np.random.default_rng(0)
    a, b = rng.integers(0, 2, 80).astype(float), rng.integers(0, 2, 80).astype(float)
    ids = [f"q{i}" for i in range(80)]
    strata = ["t1"] * 40 + ["t2"] * 40
    assert paired_delta(a, b, clusters=ids) == paired_delta(a, b)
    assert paired_delta(a, b, strata=strata, clusters=ids) == paired_delta(a, b, strata=strata)
    assert mean_interval(b, clusters=ids) == mean_interval(b)
    assert noninferiority_test(a, b, 5.0, clusters=ids) == noninferiority_test(a, b, 5.0)
    # a cluster key reused in two strata is two clusters (one per task), still singletons here
    assert paired_delta(a, b, strata=strata, clusters=[str(i % 40) for i in range(80)]) == \
        paired_delta(a, b, strata=strata)


def test_the_cluster_bootstrap_agrees_with_resampling_whole_clusters_by_hand():
    rng = np.random.default_rng(4)
    d, clusters = _clustered(rng, 12, 5, 0.6, mean=0.1)
    pd = paired_delta(np.zeros(len(d)), d, clusters=clusters)
    sums, sizes = d.reshape(12, 5).sum(axis=1), np.full(12, 5.0)
    drawn = np.random.default_rng(99).integers(0, 12, size=(40_000, 12))  # the definition, other draws
    means = sums[drawn].sum(axis=1) / sizes[drawn].sum(axis=1)
    means = d.mean() + (means - d.mean()) * np.sqrt(12 / 11)
    lo, hi = 100 * np.quantile(means, [0.025, 0.975])
    se = 100 * means.std()
    assert (pd.n, pd.n_clusters) == (60, 12)
    assert pd.delta == pytest.approx(100 * d.mean(), abs=0.01)
    assert abs(pd.lo - lo) < 0.08 * se and abs(pd.hi - hi) < 0.08 * se
    # much wider than the interval that treats the 60 questions as independent
    plain = paired_delta(np.zeros(len(d)), d)
    assert pd.hi - pd.lo > 1.5 * (plain.hi - plain.lo)


def test_the_cluster_sign_flip_is_the_exact_test_of_the_cluster_sums():
    rng = np.random.default_rng(5)
    d, clusters = _clustered(rng, 10, 3, 0.5, mean=0.15)
    sums = d.reshape(10, 3).sum(axis=1)
    patterns = np.array(list(itertools.product((1, -1), repeat=10)))
    exact = np.mean(np.abs(patterns @ sums) >= abs(sums.sum()) - 1e-12)
    # differences of unbounded values (not scores) keep the descriptive cluster sign flip
    assert paired_delta(np.zeros(len(d)), d, clusters=clusters).p_value == pytest.approx(exact, abs=1e-4)


def test_clustered_intervals_cover_the_true_delta_and_unclustered_ones_do_not():
    """50 documents x 4 questions, within-document correlation 0.5, true delta 0 (seeded): the clustered 95%
    interval covers at least 93% of the time; the one that treats questions as independent falls far below."""
    rng = np.random.default_rng(2026)
    covered = []
    for _ in range(700):
        d, clusters = _clustered(rng, 50, 4, 0.5)
        mi = mean_interval(d, clusters=clusters, n_resamples=1_000)
        covered.append(mi.lo <= 0 <= mi.hi)
    plain = []
    for _ in range(200):
        d, _ = _clustered(rng, 50, 4, 0.5)
        mi = mean_interval(d, n_resamples=1_000)
        plain.append(mi.lo <= 0 <= mi.hi)
    assert np.mean(covered) >= 0.93, np.mean(covered)
    assert np.mean(plain) < 0.85, np.mean(plain)  # about 0.77 (docs/metrics.md, 10^4 trials)


def _pred(task, id_, h, score, cluster="", kind="full"):
    return Prediction(task=task, id=id_, config_hash=h, compressor=kind, compressor_kind=kind, reader="r",
                      prediction="", metric="qa_f1", score=score, cluster=cluster)


def test_cells_count_documents_and_pair_over_them():
    rng = np.random.default_rng(8)
    d, clusters = _clustered(rng, 8, 3, 0.7, mean=-0.1)
    full = rng.random(24) * 0.5 + 0.4
    arm = np.clip(full + d, 0, 1)
    preds = [_pred("t", f"q{i}", "F", full[i], clusters[i]) for i in range(24)]
    preds += [_pred("t", f"q{i}", "A", arm[i], clusters[i], kind="truncate") for i in range(24)]
    cells = {c.config_hash: c for c in compute_cells(preds)}
    assert (cells["F"].n, cells["F"].n_clusters) == (24, 8)
    items = item_scores(preds)
    order = sorted(range(24), key=lambda i: f"q{i}")  # paired in id order
    by_hand = paired_delta(full[order], arm[order], clusters=[clusters[i] for i in order])
    assert cells["A"].paired == paired_vs(items[("t", "F")], items[("t", "A")]) == by_hand
    assert cells["A"].clusters_paired == 8
