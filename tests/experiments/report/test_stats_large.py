"""Large cells: resampling through the counts of distinct values gives the direct methods' answers, fast.

These are the descriptive resampling statistics (``experiments.inference.resampling``): intervals of
seconds and tokens, and the sign flip of the sharp null; scores' intervals come from the valid tests.

The expected values come from the definitions, not from the code under test: a percentile bootstrap of a mean
of n 0/1 values is the quantile of Binomial(n, p)/n (computed with scipy's binomial quantiles), and a sign-flip
test of k differences of +1 and m of -1 (the rest 0) is a two-sided binomial test on k of k + m.
"""
import numpy as np
import pytest
from scipy import stats

from experiments.inference import resampling as ours
from experiments.inference.resampling import LARGE_N, sign_flip_p_value
from experiments.inference.resampling import bootstrap_delta as paired_delta
from experiments.inference.resampling import bootstrap_mean as mean_interval


def test_below_large_n_nothing_changes_and_above_it_the_fast_path_is_taken(monkeypatch):
    rng = np.random.default_rng(1)
    small = rng.integers(0, 2, LARGE_N).astype(float)
    assert ours._few_distinct(small) is None
    assert ours._few_distinct(np.concatenate([small, [1.0]])) is not None
    continuous = rng.random(5 * LARGE_N)  # every value distinct: the direct draws stay
    assert ours._few_distinct(continuous) is None


@pytest.mark.parametrize("n, p", [(5_000, 0.3), (200_000, 0.71)])
def test_bootstrap_interval_of_a_large_0_1_sample_is_the_binomial_quantile(n, p):
    x = np.zeros(n)
    x[: int(n * p)] = 1.0
    mi = mean_interval(x)
    lo, hi = stats.binom.ppf([0.025, 0.975], n, x.mean()) / n
    se = np.sqrt(p * (1 - p) / n)  # Monte Carlo error of a 2.5% quantile of 10,000 draws is a small share of this
    assert mi.mean == pytest.approx(100 * x.mean(), abs=0.01)
    assert abs(mi.lo / 100 - lo) < 0.1 * se + 1 / n and abs(mi.hi / 100 - hi) < 0.1 * se + 1 / n


def test_sign_flip_p_value_of_large_samples_is_the_binomial_test():
    d = np.zeros(20_000)
    d[:560] = 1.0
    d[560:1_060] = -1.0  # 560 positive, 500 negative, the rest ties
    exact = stats.binomtest(560, 1_060, 0.5).pvalue
    assert sign_flip_p_value(d) == pytest.approx(exact, abs=0.01)
    assert sign_flip_p_value(np.concatenate([d, d])) < exact  # twice the evidence, same effect: smaller p


def test_paired_delta_of_a_large_cell_matches_the_direct_bootstrap():
    rng = np.random.default_rng(7)
    a = (rng.random(8_000) < 0.6).astype(float)
    b = np.where(rng.random(8_000) < 0.9, a, 1 - a)  # 10% of the pairs flip
    pd = paired_delta(a, b)
    d = b - a
    direct = d[rng.integers(0, len(d), size=(2_000, len(d)))].mean(axis=1)  # the definition, with other draws
    lo, hi = np.quantile(direct, [0.025, 0.975])
    se = d.std() / np.sqrt(len(d))
    assert pd.n == 8_000 and pd.delta == pytest.approx(100 * d.mean(), abs=0.01)
    assert abs(pd.lo / 100 - lo) < 0.2 * se and abs(pd.hi / 100 - hi) < 0.2 * se


def test_stratified_average_over_tasks_uses_the_same_draws_per_large_task():
    rng = np.random.default_rng(3)
    a = (rng.random(6_000) < 0.5).astype(float)
    b = (rng.random(6_000) < 0.55).astype(float)
    strata = ["t1"] * 3_000 + ["t2"] * 3_000
    pd = paired_delta(a, b, strata=strata)
    per_task = [(b[:3_000] - a[:3_000]).mean(), (b[3_000:] - a[3_000:]).mean()]
    assert pd.delta == pytest.approx(100 * np.mean(per_task), abs=0.01)
    assert pd.lo < pd.delta < pd.hi and pd.hi - pd.lo < 2 * 100 * 1.96 * np.sqrt(0.5 / 3_000)


def _flip_normal_p(x, two_sided):
    """Under random signs the mean of x has variance sum(x^2) / n^2: at large n its tail is the normal one."""
    z = x.mean() / (np.sqrt((x ** 2).sum()) / len(x))
    return 2 * stats.norm.sf(abs(z)) if two_sided else stats.norm.sf(z)


def test_sign_flip_p_value_of_a_large_continuous_sample_is_the_normal_tail():
    rng = np.random.default_rng(3)
    d = rng.normal(0.0, 1.0, 2_000)  # latencies or token counts: every value distinct
    d = d - d.mean() + 0.03  # a mean of 0.03 SD: z about 1.3
    assert ours._few_distinct(np.abs(d)) is None
    expected = _flip_normal_p(d, two_sided=True)
    assert 0.01 < expected < 0.5
    assert sign_flip_p_value(d) == pytest.approx(expected, abs=0.015)


@pytest.mark.parametrize("n", [300, pytest.param(3_000, marks=pytest.mark.slow)])  # 3,000: ~40 CPU s of simulation
def test_noninferiority_at_either_side_of_the_exact_limit_keeps_its_level(n):
    """At 300 pairs the exact test decides, above ``EXACT_MAX_N`` the betting test: each p-value is at least
    the normal tail of the z-test (both are valid, the z-test is not), and both sides agree on the verdict
    when the evidence is strong."""
    from experiments.inference.paired import EXACT_MAX_N
    from experiments.inference.verdicts import NOT_WORSE, noninferiority_test

    positive, negative = int(0.32 * n), int(0.31 * n)  # arm - full: +1, -1, the rest ties
    full = np.zeros(n)
    full[positive:positive + negative] = 1.0
    arm = np.zeros(n)
    arm[:positive] = 1.0
    test = noninferiority_test(full, arm, 1.0)
    d = arm - full
    z = (d.mean() + 0.01) / (d.std() / np.sqrt(n))
    assert test.p >= stats.norm.sf(z) - 1e-3
    assert test.method == ("exact" if n <= EXACT_MAX_N else "betting")
    strong = noninferiority_test(full, arm, 20.0)
    assert strong.verdict == NOT_WORSE


def _direct_bootstrap(x, rng, resamples=2_000):
    """The percentile bootstrap by its definition: index draws of the whole sample, other draws than ours."""
    means = np.concatenate([x[rng.integers(0, len(x), size=(200, len(x)))].mean(axis=1)
                            for _ in range(resamples // 200)])
    return np.quantile(means, [0.025, 0.975])


def test_a_large_continuous_sample_resamples_through_its_normal_limit_and_matches_the_definition():
    rng = np.random.default_rng(11)
    latencies = rng.random(20_000) * 2.0  # every value distinct, no value dominant: Berry-Esseen ratio ~ 0.009
    assert ours._few_distinct(latencies) is None and ours._normal_limit(latencies)
    mi = mean_interval(latencies)
    lo, hi = _direct_bootstrap(latencies, rng)
    se = latencies.std() / np.sqrt(len(latencies))
    assert abs(mi.lo / 100 - lo) < 0.15 * se and abs(mi.hi / 100 - hi) < 0.15 * se
    other = latencies + rng.normal(0.004, 0.3, len(latencies))  # a paired arm 0.004 s slower on average
    d = other - latencies
    pd = paired_delta(latencies, other)  # x 100, so that the rounding to 2 decimals is below the tolerance
    dlo, dhi = _direct_bootstrap(d, rng)
    dse = d.std() / np.sqrt(len(d))
    assert abs(pd.lo / 100 - dlo) < 0.15 * dse and abs(pd.hi / 100 - dhi) < 0.15 * dse
    assert pd.p_value == pytest.approx(_flip_normal_p(d, two_sided=True), abs=0.01)


def test_a_large_sample_with_a_dominant_outlier_keeps_the_direct_draws():
    """One call that took 2,000 s among 20,000 of about a second: whether a resample holds it decides its mean,
    so the bootstrap distribution is a Poisson mixture, far from normal, and the interval must be lopsided."""
    rng = np.random.default_rng(5)
    x = np.append(rng.random(20_000), 2_000.0)
    assert not ours._normal_limit(x)
    mi = mean_interval(x)
    lo, hi = _direct_bootstrap(x, rng)
    assert mi.lo / 100 == pytest.approx(lo, abs=0.004) and mi.hi / 100 == pytest.approx(hi, abs=0.02)
    assert (mi.hi - mi.mean) > 1.5 * (mi.mean - mi.lo)  # a normal interval would be symmetric


def test_strata_of_large_continuous_samples_mix_the_normal_and_direct_draws():
    rng = np.random.default_rng(2)
    a = rng.random(12_000)
    b = a + rng.random(12_000) * 0.4 - 0.19  # 0.01 slower on average, uniform spread
    b[11_999] += 500.0  # the second task has a dominant outlier: its draws stay direct
    strata = ["t1"] * 6_000 + ["t2"] * 6_000
    assert ours._normal_limit((b - a)[:6_000]) and not ours._normal_limit((b - a)[6_000:])
    pd = paired_delta(a, b, strata=strata, scale=1.0)  # seconds as they are: the outlier moves the mean by 0.04
    d1, d2 = (b - a)[:6_000], (b - a)[6_000:]
    draws = [(d1[rng.integers(0, 6_000, size=(200, 6_000))].mean(axis=1)
              + d2[rng.integers(0, 6_000, size=(200, 6_000))].mean(axis=1)) / 2 for _ in range(10)]
    lo, hi = np.quantile(np.concatenate(draws), [0.025, 0.975])
    assert pd.delta == pytest.approx((d1.mean() + d2.mean()) / 2, abs=0.01)
    assert pd.lo == pytest.approx(lo, abs=0.006) and pd.hi == pytest.approx(hi, abs=0.03)
