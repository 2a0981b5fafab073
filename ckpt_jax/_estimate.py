"""A Monte-Carlo estimate and its 95 % confidence interval, written once: `Estimate` (a mean
with its interval), `mean_ci` (of a sample of independent draws) and `half_width` (the
interval's half width along an axis), for the designer, the assessment, the CLI's reports and
figures and the experiments."""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

__all__ = ["Z95", "Estimate", "mean_ci", "half_width"]

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
