"""A Monte-Carlo estimate and its 95 % confidence interval, written once: `Estimate` (a mean
with its interval), `mean_ci` (of a sample of independent draws), `share_ci` (the same for a
share of time, whose interval stays inside [0, 1]) and `half_width` (the interval's half width
along an axis), for the designer, the assessment, the CLI's reports and figures and the
experiments."""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

__all__ = ["Z95", "Estimate", "mean_ci", "share_ci", "half_width"]

# The two-sided 95 % quantile of the normal distribution.
Z95 = 1.959963984540054


class Estimate(NamedTuple):
    """A Monte-Carlo mean with its 95% confidence interval (normal, over independent draws)."""

    mean: float
    low: float
    high: float

    @property
    def stderr(self) -> float:
        return (self.high - self.low) / (2 * Z95)

    def to_dict(self) -> dict:
        """``{"mean", "low", "high"}`` as plain floats (the JSON reports' shape)."""
        return {"mean": self.mean, "low": self.low, "high": self.high}


def half_width(samples, axis=None):
    """The 95 % interval's half width Z95 · s / √n of the mean of ``samples`` along ``axis``
    (all of them by default): s the sample standard deviation, n the draws; NaN for one draw."""
    samples = np.asarray(samples, np.float64)
    n = samples.size if axis is None else samples.shape[axis]
    if n < 2:
        return np.full(np.shape(samples.mean(axis=axis)), math.nan)[()]
    return Z95 * samples.std(axis=axis, ddof=1) / math.sqrt(n)


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
    logit(m) ± Z95 · se / (m (1 − m)), with m the mean and se its standard error. It is
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
