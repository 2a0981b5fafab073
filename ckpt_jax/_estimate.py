"""A Monte-Carlo estimate and its 95 % confidence interval, written once: `Estimate` (a mean
with its interval), `mean_ci` (of a sample of independent draws), `share_ci` (the same for a
share of time, whose interval stays inside [0, 1]) and `half_width` (the interval's half width
along an axis), for the designer, the assessment, the CLI's reports and figures and the
experiments."""

from __future__ import annotations

import functools
import math
from typing import NamedTuple

import numpy as np

__all__ = ["Z95", "Estimate", "mean_ci", "share_ci", "half_width", "t95"]

# The two-sided 95 % quantile of the normal distribution (the limit of `t95` for many draws).
Z95 = 1.959963984540054


@functools.lru_cache(maxsize=256)
def t95(n: int) -> float:
    """The two-sided 95 % quantile of Student's t with n − 1 degrees of freedom: the factor of
    the 95 % interval of a mean of n independent, roughly normal draws (12.71 for 2 draws,
    2.36 for 8, 2.04 for 32, 1.96 in the limit). NaN for n < 2."""
    if n < 2:
        return math.nan
    from scipy import stats  # here, not at import: scipy.stats takes ~0.4 s to import

    return float(stats.t.ppf(0.975, n - 1))


class Estimate(NamedTuple):
    """A Monte-Carlo mean with its 95% confidence interval (Student's t over independent draws)."""

    mean: float
    low: float
    high: float

    @property
    def stderr(self) -> float:
        """The interval's width in normal standard errors, (high − low) / (2 · 1.96): the
        mean's standard error for many draws, somewhat larger for a few (the interval is
        Student's t, wider than the normal one)."""
        return (self.high - self.low) / (2 * Z95)

    def to_dict(self) -> dict:
        """``{"mean", "low", "high"}`` as plain floats (the JSON reports' shape)."""
        return {"mean": self.mean, "low": self.low, "high": self.high}


def half_width(samples, axis=None):
    """The 95 % interval's half width t95(n) · s / √n of the mean of ``samples`` along ``axis``
    (all of them by default): s the sample standard deviation, n the draws, `t95` Student's
    quantile (not the normal 1.96, which makes the interval of 8 draws 17 % too narrow); NaN
    for one draw."""
    samples = np.asarray(samples, np.float64)
    n = samples.size if axis is None else samples.shape[axis]
    if n < 2:
        return np.full(np.shape(samples.mean(axis=axis)), math.nan)[()]
    return t95(n) * samples.std(axis=axis, ddof=1) / math.sqrt(n)


def mean_ci(samples) -> Estimate:
    """The mean of ``samples`` (independent draws) with its 95 % interval (NaN bounds for one
    draw)."""
    samples = np.asarray(samples, np.float64)
    mean = float(samples.mean())
    half = float(half_width(samples))
    return Estimate(mean, mean - half, mean + half)


def share_ci(samples) -> Estimate:
    """The mean of ``samples``, independent draws of a share in [0, 1] (a goodput, a fraction
    of time), with a 95 % interval inside [0, 1].

    The interval is the normal one on the logit scale, back-transformed (the delta method):
    logit(m) ± t95(n) · se / (m (1 − m)), with m the mean and se its standard error. It is
    asymmetric near 0 and 1 and never leaves [0, 1], where `mean_ci`'s symmetric interval
    would (a goodput of 45 % ± 88 % from two draws). It is [m, m] where the draws agree
    (se = 0), and `mean_ci`'s interval clipped to [0, 1] where m is 0 or 1 or beyond (the
    shares of an assessment may stray past them by rounding, by 1e-12 or so). Like
    `mean_ci`, it is a large-sample interval: from a few draws it is wide, not exact. NaN
    bounds for one draw."""
    estimate = mean_ci(samples)
    mean, half = estimate.mean, (estimate.high - estimate.low) / 2
    if not math.isfinite(half):
        return estimate
    if half == 0 or not 0 < mean < 1:
        return Estimate(mean, min(max(estimate.low, 0.0), mean), max(min(estimate.high, 1.0), mean))
    centre, spread = math.log(mean / (1 - mean)), half / (mean * (1 - mean))
    expit = lambda x: 1 / (1 + math.exp(-x)) if x >= 0 else math.exp(x) / (1 + math.exp(x))  # noqa: E731
    return Estimate(mean, expit(centre - spread), expit(centre + spread))
