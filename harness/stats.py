"""Statistics of repeated measurements: per-case summaries and two-sample comparisons.

Everything a benchmark figure needs to be decided on: the median with a
distribution-free confidence interval, spread (IQR, MAD, stdev), Tukey outliers
(marked, never dropped), the relative standard error of the median that the
adaptive profiling window stops on (:mod:`harness.run.window`), and the change
between two sample sets with its confidence interval and a verdict
(``faster`` / ``slower`` / ``no significant change``), which ``compare`` gates on.

Numbers come from numpy (quantiles, medians, the bootstrap's random
resampling); the binomial tail of the order-statistic interval is exact integer
arithmetic (:func:`math.comb`). ``scipy.stats`` has the same pieces
(``binom``, ``median_abs_deviation``, ``bootstrap``) but takes about a second
to import, which every pytest run would pay, so it is not used. Which method
is used and why:

* **CI of the median**: the order-statistic interval ``[x_(l), x_(n+1-l)]``
  with ``l`` the largest rank whose binomial tail ``P(Bin(n, 1/2) < l)`` is at
  most ``(1 - level) / 2`` (Conover, *Practical Nonparametric Statistics*,
  3rd ed., §3.2; also Hollander, Wolfe & Chicken §3.6). Exact coverage for any
  continuous distribution, no bootstrap. For ``n < 6`` no interval reaches
  95 %; the widest one, ``[min, max]``, is returned with its real coverage
  (``1 - 2^(1-n)``), stated in :attr:`SampleStats.ci_level`.
* **Standard error of the median**: McKean & Schrader (1984), "A comparison of
  methods for studentizing the sample median", *Comm. Statist.* 13(6):
  ``SE = (x_(n-c+1) - x_(c)) / (2 z)``, ``c = round((n + 1)/2 - z sqrt(n/4))``,
  ``z = 1.96``; distribution-free, one sort, cheap enough to evaluate after
  every step.
* **Change between two sample sets**: a two-sample percentile bootstrap
  (Efron & Tibshirani 1993, ch. 13) of ``median(new) / median(base) - 1`` (or
  of the difference, for shares such as the bubble ratio), with a fixed seed
  so a comparison is reproducible (numpy's ``default_rng``; the same interval
  ``scipy.stats.bootstrap(..., method="percentile")`` gives).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

__all__ = [
    "Z95",
    "Change",
    "SampleStats",
    "compare_samples",
    "median_ci",
    "median_ci_reach",
    "median_rel_se",
    "summarize",
]

#: z for a two-sided 95 % interval, used by the McKean-Schrader standard error.
Z95 = 1.959963984540054

#: Bootstrap resamples for :func:`compare_samples` (the percentile interval's
#: Monte-Carlo error at 95 % is about 0.3 points of coverage at this count).
BOOTSTRAP_RESAMPLES = 4000

#: Seed of every bootstrap: one comparison of two files always gives one answer.
BOOTSTRAP_SEED = 20240

#: Fewest samples on each side for a significance test: below it the percentile bootstrap
#: of a median is far too confident (measured on identical distributions with 2 % noise:
#: "significant" at 95 % in 29 % of pairs with 2 samples a side, 11 % with 3, 3 % with 5).
MIN_SAMPLES = 5


@dataclass(frozen=True)
class SampleStats:
    """Summary of one set of samples (e.g. a case's step times, ns).

    All location and spread fields are in the samples' unit (ns for times,
    a share for bubble ratios).

    Attributes:
        n: number of samples.
        median, mean, stdev, min, max: the usual figures (``stdev`` is the
            sample standard deviation, ``ddof=1``; 0 for ``n < 2``).
        q1, q3, iqr: first and third quartiles (linear interpolation, numpy's
            default) and their difference.
        mad: median absolute deviation from the median (unscaled).
        ci_low, ci_high: confidence interval of the median (order statistics,
            see the module docstring).
        ci_level: the interval's real coverage (0.95 or above for ``n >= 6``;
            ``1 - 2^(1-n)`` below that; 0 for ``n = 1``).
        rel_err: standard error of the median over the median (McKean-Schrader),
            0 when the median is 0.
        outliers: indices (into the samples, in the order given) of samples
            outside Tukey's fences ``[q1 - 1.5 iqr, q3 + 1.5 iqr]``; kept in
            every other figure, only marked.
    """

    n: int
    median: float
    mean: float
    stdev: float
    min: float
    max: float
    q1: float
    q3: float
    iqr: float
    mad: float
    ci_low: float
    ci_high: float
    ci_level: float
    rel_err: float
    outliers: tuple[int, ...] = ()

    @property
    def ci_reach(self) -> float:
        """How far the median's confidence interval reaches, relative to the median: the larger side's
        distance, ``max(median - ci_low, ci_high - median) / median`` (0 when the median is 0)."""
        return max(self.median - self.ci_low, self.ci_high - self.median) / self.median if self.median else 0.0

    @property
    def ci_level_differs(self) -> bool:
        """Whether the interval's real coverage (``ci_level``) is other than the 95 % asked for, as the
        number of samples makes it (:func:`median_ci`): then it is worth saying."""
        return not 0.95 <= self.ci_level < 0.96

    @property
    def iqr_over_median(self) -> float:
        """``iqr / median`` (0 when the median is 0): the spread the unstable flag reads."""
        return self.iqr / self.median if self.median else 0.0

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (``outliers`` as a list)."""
        out = asdict(self)
        out["outliers"] = list(self.outliers)
        return out


@functools.lru_cache(maxsize=4096)
def _median_ci_ranks(n: int, level: float) -> tuple[int, int, float]:
    """1-based ranks ``(l, u)`` of the order-statistic CI of the median for ``n`` samples
    and its real coverage (see module docstring). Exact: ``P(Bin(n, 1/2) <= k)`` is
    ``sum(C(n, i) for i <= k) / 2^n`` in integers."""
    if n < 2:
        return 1, n, 0.0
    from fractions import Fraction

    total = 1 << n
    alpha = Fraction(1 - level).limit_denominator(10**12) / 2  # largest l with P(X <= l - 1) <= alpha
    limit_num, limit_den = alpha.numerator * total, alpha.denominator  # integers: 2^n does not fit a float
    l, tail, term = 0, 0, 1  # term = C(n, l)
    while l < n // 2 and (tail + term) * limit_den <= limit_num:  # tail + term = P(X <= l) * 2^n
        tail += term
        term = term * (n - l) // (l + 1)
        l += 1
    if l == 0:  # no interval reaches the level: the widest one, [min, max]
        return 1, n, 1.0 - 2.0 / total
    return l, n + 1 - l, 1.0 - 2 * tail / total  # int / int: exact, also past the float range


def median_ci(values: Sequence[float], level: float = 0.95) -> tuple[float, float, float]:
    """Distribution-free confidence interval of the median.

    Args:
        values: the samples (any order).
        level: wanted coverage, in (0, 1).

    Returns:
        ``(low, high, coverage)``: the order statistics ``x_(l)``, ``x_(n+1-l)``
        and the interval's real coverage (at least ``level`` when ``n`` allows,
        else the widest interval's, see :class:`SampleStats`).

    Raises:
        ValueError: no samples, or ``level`` outside (0, 1).
    """
    if not values:
        raise ValueError("median_ci needs at least one sample")
    if not 0 < level < 1:
        raise ValueError(f"confidence level must be between 0 and 1, got {level!r}")
    xs = sorted(values)
    l, u, coverage = _median_ci_ranks(len(xs), level)
    return float(xs[l - 1]), float(xs[u - 1]), coverage


def median_ci_reach(values: Sequence[float], level: float = 0.95) -> float:
    """How far the median's confidence interval (:func:`median_ci`) reaches from the sample median,
    relative to it: ``max(median - low, high - median) / median`` (0 when the median is 0), the
    ``±x %`` the summary shows (:attr:`SampleStats.ci_reach`).

    Raises:
        ValueError: no samples, or ``level`` outside (0, 1).
    """
    low, high, _ = median_ci(values, level)
    xs = sorted(values)
    half = len(xs) // 2
    median = xs[half] if len(xs) % 2 else (xs[half - 1] + xs[half]) / 2
    return max(median - low, high - median) / abs(median) if median else 0.0


def median_rel_se(values: Sequence[float]) -> float:
    """Relative standard error of the median, McKean & Schrader (1984) (see module doc).

    Returns ``inf`` for fewer than two samples (nothing is known of the noise)
    and 0 when the median is 0.
    """
    n = len(values)
    if n < 2:
        return math.inf
    xs = sorted(values)
    c = max(1, min(n // 2, round((n + 1) / 2 - Z95 * math.sqrt(n / 4))))
    half = n // 2
    median = xs[half] if n % 2 else (xs[half - 1] + xs[half]) / 2
    if median == 0:
        return 0.0
    return (xs[n - c] - xs[c - 1]) / (2 * Z95) / abs(median)


def summarize(values: Sequence[float], level: float = 0.95) -> SampleStats:
    """Every figure of :class:`SampleStats` for ``values``.

    Raises:
        ValueError: no samples.
    """
    import numpy as np

    if len(values) == 0:
        raise ValueError("summarize needs at least one sample")
    a = np.asarray(values, dtype=float)
    q1, median, q3 = (float(x) for x in np.percentile(a, [25, 50, 75]))
    iqr = q3 - q1
    low, high, coverage = median_ci(a.tolist(), level)
    lo_fence, hi_fence = q1 - 1.5 * iqr, q3 + 1.5 * iqr
    outliers = tuple(int(i) for i in np.flatnonzero((a < lo_fence) | (a > hi_fence)))
    rel = median_rel_se(a.tolist()) if len(a) > 1 else 0.0
    return SampleStats(
        n=len(a),
        median=median,
        mean=float(a.mean()),
        stdev=float(a.std(ddof=1)) if len(a) > 1 else 0.0,
        min=float(a.min()),
        max=float(a.max()),
        q1=q1,
        q3=q3,
        iqr=iqr,
        mad=float(np.median(np.abs(a - median))),
        ci_low=low,
        ci_high=high,
        ci_level=coverage,
        rel_err=rel,
        outliers=outliers,
    )


@dataclass(frozen=True)
class Change:
    """The change from a base sample set to a new one, with its confidence interval.

    Attributes:
        estimate: ``median(new) / median(base) - 1`` for ``relative=True``
            (0.05 = 5 % larger), else ``median(new) - median(base)`` in the
            samples' unit.
        ci_low, ci_high: the confidence interval of ``estimate``.
        confidence: its level (e.g. 0.95).
        verdict: ``"larger"``, ``"smaller"`` (the interval excludes 0 on that
            side) or ``"no significant change"``; ``"not enough samples"``
            when either set has fewer than :data:`MIN_SAMPLES` samples and is not exact
            (the interval is then unknown: ``-inf`` to ``inf``).
        method: how the interval was found (``"bootstrap"``, ``"exact"``).
    """

    estimate: float
    ci_low: float
    ci_high: float
    confidence: float
    verdict: str
    method: str

    @property
    def significant(self) -> bool:
        return self.verdict in ("larger", "smaller")


def _verdict(low: float, high: float) -> str:
    if low > 0:
        return "larger"
    if high < 0:
        return "smaller"
    return "no significant change"


def compare_samples(
    base: Sequence[float],
    new: Sequence[float],
    *,
    relative: bool = True,
    confidence: float = 0.95,
    exact: bool = False,
    seed: int = BOOTSTRAP_SEED,
    resamples: int = BOOTSTRAP_RESAMPLES,
) -> Change:
    """The change of the median from ``base`` to ``new``, with its CI and a verdict.

    Args:
        base, new: the two sample sets (e.g. per-step times in ns).
        relative: compare ``median(new) / median(base) - 1`` (step times);
            ``False`` compares ``median(new) - median(base)`` (shares).
        confidence: level of the interval, in (0, 1).
        exact: the samples carry no noise (the ``sim`` backend): the change is
            the medians' change, its interval that one point. Otherwise each side
            needs :data:`MIN_SAMPLES` samples for a test.
        seed, resamples: of the bootstrap (fixed: reproducible answers).

    Raises:
        ValueError: an empty sample set, ``confidence`` outside (0, 1), or a
            relative change from a base median of 0.
    """
    import numpy as np

    if not base or not new:
        raise ValueError("compare_samples needs samples on both sides")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be between 0 and 1, got {confidence!r}")
    b, n = np.asarray(base, dtype=float), np.asarray(new, dtype=float)
    mb, mn = float(np.median(b)), float(np.median(n))
    if relative and mb == 0:
        raise ValueError("a relative change from a median of 0 cannot be computed")
    point = mn / mb - 1 if relative else mn - mb
    if exact:
        tol = 1e-12
        verdict = "larger" if point > tol else "smaller" if point < -tol else "no significant change"
        return Change(point, point, point, confidence, verdict, "exact")
    if len(b) < MIN_SAMPLES or len(n) < MIN_SAMPLES:
        return Change(point, -math.inf, math.inf, confidence, "not enough samples", "none")
    if np.ptp(b) == 0 and np.ptp(n) == 0:  # no spread on either side: the bootstrap has nothing to resample
        verdict = "larger" if point > 0 else "smaller" if point < 0 else "no significant change"
        return Change(point, point, point, confidence, verdict, "no spread")
    rng = np.random.default_rng(seed)
    batch = max(1, min(resamples, 4_000_000 // (len(b) + len(n))))  # bounds memory at ~32 MB of resamples
    stats = []
    with np.errstate(divide="ignore", invalid="ignore"):
        for done in range(0, resamples, batch):
            k = min(batch, resamples - done)
            mx = np.median(b[rng.integers(0, len(b), (k, len(b)))], axis=1)
            my = np.median(n[rng.integers(0, len(n), (k, len(n)))], axis=1)
            stats.append(my / mx - 1 if relative else my - mx)
    alpha = (1 - confidence) / 2
    low, high = (float(x) for x in np.percentile(np.concatenate(stats), [100 * alpha, 100 * (1 - alpha)]))
    if not (math.isfinite(low) and math.isfinite(high)):  # a base median of 0 in some resample
        return Change(point, -math.inf, math.inf, confidence, "no significant change", "bootstrap")
    return Change(point, low, high, confidence, _verdict(low, high), "bootstrap")
