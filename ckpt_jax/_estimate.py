"""A Monte-Carlo estimate and its 95 % confidence interval, written once: `Estimate` (a mean
with its interval), `mean_ci` (of a sample of independent draws), `share_ci` (the same for a
share of time, whose interval stays inside [0, 1]) and `half_width` (the interval's half width
along an axis), for the designer, the assessment, the CLI's reports and figures and the
experiments; and `effect`, the one rule by which a paired difference counts as a gain or a
loss rather than noise (`FLOOR`, the practical floor)."""

from __future__ import annotations

import functools
import math
from typing import NamedTuple

import numpy as np

__all__ = ["Z95", "FLOOR", "Estimate", "mean_ci", "share_ci", "half_width", "t95", "effect", "check_floor"]

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


# The practical floor of a difference, as a share of the fleet's GPU time: 0.01 % of it, a
# goodput change of 0.01 percentage points (2.4 GPU-hours a day on 1,000 GPUs). A difference
# below it is not worth acting on, however narrow its interval (float rounding, 1e-12, has
# an interval as narrow as itself).
FLOOR = 1e-4


def check_floor(floor, name: str = "floor") -> float:
    """``floor`` checked: a number in [0, 1) (a share of the fleet's GPU time)."""
    if isinstance(floor, bool) or not isinstance(floor, (int, float, np.integer, np.floating)):
        raise ValueError(f"{name} must be a number in [0, 1) (a share of the fleet's GPU time), got {floor!r}")
    floor = float(floor)
    if not 0 <= floor < 1:
        raise ValueError(f"{name} must be in [0, 1) (a share of the fleet's GPU time, 1e-4 = 0.01 %), got {floor!r}")
    return floor


def effect(estimate, floor: float = 0.0, exact: bool = False) -> int:
    """Whether a paired difference is an effect: +1 (positive) or −1 (negative) where its 95 %
    interval excludes 0 *and* its mean exceeds ``floor`` in magnitude, else 0 (within the
    noise, or not resolved: NaN bounds). ``exact``: every draw was the same (a replayed trace
    and a fixed launch: one draw, no noise), so the mean counts against the floor alone.
    ``estimate``: an `Estimate` or a ``{"mean", "low", "high"}`` dict (None bounds as NaN)."""
    if isinstance(estimate, dict):
        mean, low, high = (math.nan if estimate.get(k) is None else float(estimate[k]) for k in ("mean", "low", "high"))
    else:
        mean, low, high = (float(x) for x in estimate)
    if not math.isfinite(mean) or abs(mean) <= floor:
        return 0
    if exact:
        return 1 if mean > 0 else -1
    if low > 0:
        return 1
    if high < 0:
        return -1
    return 0
