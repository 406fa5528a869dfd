"""Statistics of repeated measurements: hand-computed CIs, standard errors, summaries, two-sample changes."""

from __future__ import annotations

import math

import numpy as np
import pytest

from harness.stats import compare_samples, median_ci, median_rel_se, summarize


@pytest.mark.parametrize(("n", "ranks", "coverage"), [
    # 1 - 2 P(Bin(n, 1/2) <= l - 1), by hand:
    (5, (1, 5), 1 - 2 / 32),  # no 95% interval exists below n = 6: the widest one, with its real coverage
    (6, (1, 6), 1 - 2 / 64),
    (10, (2, 9), 1 - 2 * (1 + 10) / 1024),
    (20, (6, 15), 1 - 2 * (1 + 20 + 190 + 1140 + 4845 + 15504) / 2**20),
    (100, (40, 61), None),  # Conover's table: ranks 40 and 61 for n = 100
])
def test_median_ci_is_the_order_statistic_interval(n, ranks, coverage):
    values = [float(10 * i) for i in range(n, 0, -1)]  # any order
    low, high, level = median_ci(values)
    assert (low, high) == (10.0 * ranks[0], 10.0 * ranks[1])
    if coverage is not None:
        assert level == pytest.approx(coverage, abs=1e-15)
    assert level >= 0.95 or n < 6


def test_median_ci_of_one_and_two_samples_and_bad_input():
    assert median_ci([7.0]) == (7.0, 7.0, 0.0)
    assert median_ci([1.0, 3.0]) == (1.0, 3.0, 0.5)
    with pytest.raises(ValueError, match="at least one sample"):
        median_ci([])
    with pytest.raises(ValueError, match="between 0 and 1"):
        median_ci([1.0], level=1.0)


def test_median_ci_at_ten_thousand_samples_is_exact_and_quick():
    low, high, level = median_ci(list(range(1, 10_001)))
    assert (low, high) == (4902.0, 5099.0) and 0.95 <= level < 0.952


def test_mckean_schrader_standard_error_by_hand():
    # n = 5: c = round(3 - 1.96 * sqrt(5/4)) = round(0.81) = 1; SE = (x5 - x1) / (2 * 1.96)
    assert median_rel_se([10, 14, 12, 11, 13]) == pytest.approx((14 - 10) / (2 * 1.959963984540054) / 12)
    # n = 9: c = round(5 - 1.96 * 1.5) = round(2.06) = 2; SE = (x8 - x2) / (2 * 1.96)
    assert median_rel_se(list(range(1, 10))) == pytest.approx((8 - 2) / (2 * 1.959963984540054) / 5)
    assert median_rel_se([5, 5, 5, 5, 5]) == 0.0
    assert median_rel_se([3]) == math.inf  # nothing is known of the noise


def test_summarize_marks_outliers_and_keeps_them():
    s = summarize([1, 2, 3, 4, 100])
    assert (s.n, s.median, s.min, s.max, s.q1, s.q3, s.iqr, s.mad) == (5, 3.0, 1.0, 100.0, 2.0, 4.0, 2.0, 1.0)
    assert s.mean == 22.0  # the outlier is kept in every figure, only marked
    assert s.stdev == pytest.approx(43.617656975128774)
    assert s.outliers == (4,)
    assert (s.ci_low, s.ci_high, s.ci_level) == (1.0, 100.0, 1 - 2 / 32)
    assert s.iqr_over_median == pytest.approx(2 / 3)
    one = summarize([42])
    assert (one.n, one.median, one.stdev, one.iqr, one.rel_err, one.outliers) == (1, 42.0, 0.0, 0.0, 0.0, ())
    assert summarize([1, 2]).to_dict()["outliers"] == []


def _normal(mean, sd, n, seed):
    return list(np.random.default_rng(seed).normal(mean, sd, n))


def test_compare_samples_of_one_distribution_finds_no_change():
    change = compare_samples(_normal(100e6, 2e6, 20, 1), _normal(100e6, 2e6, 20, 2))
    assert change.verdict == "no significant change" and change.ci_low < 0 < change.ci_high
    assert change.method == "bootstrap" and change.confidence == 0.95


def test_compare_samples_finds_a_ten_percent_shift_with_it_inside_the_interval():
    change = compare_samples(_normal(100e6, 2e6, 20, 1), _normal(110e6, 2.2e6, 20, 2))
    assert change.verdict == "larger" and change.significant
    assert change.ci_low < 0.10 < change.ci_high and change.ci_low > 0.05
    faster = compare_samples(_normal(110e6, 2e6, 20, 1), _normal(100e6, 2e6, 20, 2))
    assert faster.verdict == "smaller"


def test_compare_samples_is_reproducible_and_wider_at_higher_confidence():
    a, b = _normal(100, 3, 12, 5), _normal(102, 3, 12, 6)
    assert compare_samples(a, b) == compare_samples(a, b)  # fixed seed
    c95, c99 = compare_samples(a, b), compare_samples(a, b, confidence=0.99)
    assert c99.ci_low <= c95.ci_low and c99.ci_high >= c95.ci_high


def test_compare_samples_exact_and_degenerate_cases():
    exact = compare_samples([30e6], [31.5e6], exact=True)  # sim: no noise, the change is the change
    assert (exact.estimate, exact.ci_low, exact.ci_high, exact.verdict) == (pytest.approx(0.05),) * 3 + ("larger",)
    assert compare_samples([5.0], [5.0], exact=True).verdict == "no significant change"
    assert compare_samples([5.0], [6.0]).verdict == "not enough samples"  # one timed step says nothing of noise
    assert compare_samples([1.0, 1.1, 0.9, 1.0], [2.0, 2.1, 1.9, 2.0, 2.0]).verdict == "not enough samples"  # 4 < MIN_SAMPLES
    same = compare_samples([2.0] * 5, [3.0] * 5)
    assert (same.verdict, same.method) == ("larger", "no spread")
    shares = compare_samples([0.10, 0.11, 0.10, 0.10, 0.11], [0.13, 0.14, 0.13, 0.13, 0.14], relative=False)
    assert shares.estimate == pytest.approx(0.03) and shares.verdict == "larger"
    with pytest.raises(ValueError, match="median of 0"):
        compare_samples([0.0, 0.0], [1.0, 2.0])
    with pytest.raises(ValueError, match="samples on both sides"):
        compare_samples([], [1.0])


def test_identical_distributions_are_rarely_called_significant_with_the_minimum_samples():
    # 200 seeded pairs of 5 samples each from one distribution (2 % noise): a 95 % test should call
    # about 5 % of them significant; the percentile bootstrap of a median runs a little hot at n = 5.
    from harness.stats import MIN_SAMPLES

    hits = sum(compare_samples(_normal(100, 2, MIN_SAMPLES, 2 * k), _normal(100, 2, MIN_SAMPLES, 2 * k + 1)).significant
               for k in range(200))
    assert hits / 200 <= 0.10
