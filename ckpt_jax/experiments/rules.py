"""Decision rules shared by the experiments: a confidence interval against a stated margin.

A claim of *no effect* (no clustering, no launch memory) is reproduced only when the data
could have shown an effect and did not: the confidence interval of the effect must lie wholly
inside an equivalence margin fixed before the run (two one-sided tests, TOST: each side is a
one-sided test at level α, which is a (1 − 2α) two-sided interval inside the margin). A
claim of a *law* (an exponent equal to 2) is tested the same way, the margin around the law.
A claim of an *effect* (a heavier tail) is the mirror image: the interval must lie wholly
beyond the margin.

Three outcomes, never two:

* the interval lies inside the margin → ``reproduced``;
* it lies wholly outside → ``not reproduced`` (the data exclude the claim);
* it straddles a margin's edge, or is undefined → ``inconclusive`` (this run is too small
  or too noisy to decide; the power numbers say how much larger a run would need to be).

Power uses the normal approximation with the interval's standard error ``se``.
"""

from __future__ import annotations

import math
from statistics import NormalDist

from .framework import INCONCLUSIVE, NOT_REPRODUCED, PARTIALLY, REPRODUCED

__all__ = [
    "CONFIDENCE",
    "POWER",
    "interval_verdict",
    "equivalence_power",
    "smallest_supported_margin",
    "smallest_detectable_effect",
    "launches_needed",
    "launches_to_decide",
    "combine",
    "COMBINATION_RULE",
]

CONFIDENCE = 0.90  # two-sided interval of every rule: each one-sided test at α = 0.05
POWER = 0.80  # the power at which "smallest detectable" and "needed" sizes are quoted

_NORMAL = NormalDist()


def _z(probability: float) -> float:
    return _NORMAL.inv_cdf(probability)


def _one_sided_z(confidence: float) -> float:
    """z of each one-sided test of a two-sided ``confidence`` interval (1.645 at 0.90)."""
    return _z(1 - (1 - confidence) / 2)


def interval_verdict(low: float, high: float, margin_low: float = -math.inf, margin_high: float = math.inf) -> str:
    """Three-way verdict of the interval [low, high] against the region (margin_low, margin_high).

    Args:
      low, high: the confidence interval of the effect (``low ≤ high``).
      margin_low, margin_high: the region where the claim holds (−inf / inf for a one-sided
        claim). Both edges are exclusive: an interval touching an edge is inconclusive.

    Returns:
      ``REPRODUCED`` if the interval lies inside the region, ``NOT_REPRODUCED`` if it lies
      wholly outside it (above ``margin_high`` or below ``margin_low``), ``INCONCLUSIVE``
      if it straddles an edge or is NaN.

    >>> interval_verdict(-0.01, 0.02, -0.05, 0.05)
    'reproduced'
    >>> interval_verdict(0.03, 0.08, -0.05, 0.05)
    'inconclusive'
    >>> interval_verdict(0.06, 0.08, -0.05, 0.05)
    'not reproduced'
    """
    low, high = float(low), float(high)
    if math.isnan(low) or math.isnan(high):
        return INCONCLUSIVE
    if low > high:
        raise ValueError(f"interval must have low <= high, got [{low}, {high}]")
    if margin_low < low and high < margin_high:
        return REPRODUCED
    if high < margin_low or low > margin_high:
        return NOT_REPRODUCED
    return INCONCLUSIVE


def equivalence_power(
    se: float, margin_low: float, margin_high: float, true_effect: float = 0.0, confidence: float = CONFIDENCE
) -> float:
    """Probability that the interval lands inside (margin_low, margin_high) if the effect is
    ``true_effect``: the power of the equivalence conclusion (TOST, normal approximation)."""
    if not se > 0:
        return float("nan")
    z = _one_sided_z(confidence)
    upper = _NORMAL.cdf((margin_high - true_effect) / se - z) if math.isfinite(margin_high) else 1.0
    lower = _NORMAL.cdf((true_effect - margin_low) / se - z) if math.isfinite(margin_low) else 1.0
    return max(0.0, upper + lower - 1.0)


def smallest_supported_margin(
    se: float, two_sided: bool = True, confidence: float = CONFIDENCE, power: float = POWER
) -> float:
    """The narrowest margin (distance from the claimed value to each edge) that a run with
    standard error ``se`` concludes "reproduced" with probability ``power`` when the claim
    holds exactly. A margin narrower than this makes ``inconclusive`` the likely outcome."""
    if not se > 0:
        return float("nan")
    tail = (1 + power) / 2 if two_sided else power
    return (_one_sided_z(confidence) + _z(tail)) * se


def smallest_detectable_effect(se: float, margin: float, confidence: float = CONFIDENCE, power: float = POWER) -> float:
    """The smallest effect (distance from the claimed value) that this run declares
    "not reproduced" with probability ``power``: the interval must clear the margin."""
    if not se > 0:
        return float("nan")
    return margin + (_one_sided_z(confidence) + _z(power)) * se


def launches_needed(
    se: float,
    launches: int,
    margin: float,
    two_sided: bool = True,
    confidence: float = CONFIDENCE,
    power: float = POWER,
) -> int:
    """Ensemble size at which ``margin`` becomes the smallest supported margin, scaling the
    standard error as 1/√launches (independent launches)."""
    supported = smallest_supported_margin(se, two_sided, confidence, power)
    if not (supported > 0 and margin > 0):
        return -1
    return int(math.ceil(launches * (supported / margin) ** 2))


def launches_to_decide(
    se: float, launches: int, distance: float, confidence: float = CONFIDENCE, power: float = POWER
) -> int:
    """Ensemble size at which an effect whose estimate lies ``distance`` inside the margin's
    edge gets an interval clear of that edge with probability ``power`` (if the estimate is
    the truth), scaling the standard error as 1/√launches."""
    if not (se > 0 and distance > 0):
        return -1
    return int(math.ceil(launches * ((_one_sided_z(confidence) + _z(power)) * se / distance) ** 2))


def combine(outcomes) -> str:
    """One verdict from the verdicts of the parts (cells, sub-claims) of a claim that must all hold.

    * every part reproduced → reproduced;
    * some part reproduced (wholly or partially) and some not (wholly or partially) → partially;
    * some part not reproduced and none reproduced, even in part → not reproduced;
    * otherwise (nothing failed, something undecided) → inconclusive.
    """
    outcomes = list(outcomes)
    if outcomes and all(o == REPRODUCED for o in outcomes):
        return REPRODUCED
    held = any(o in (REPRODUCED, PARTIALLY) for o in outcomes)
    failed = any(o in (NOT_REPRODUCED, PARTIALLY) for o in outcomes)
    if held and failed:
        return PARTIALLY
    if failed:
        return NOT_REPRODUCED
    return INCONCLUSIVE


COMBINATION_RULE = (
    "reproduced if every part is reproduced; partially if some part is reproduced (wholly or in part) "
    "and some is not; not reproduced if some part is not reproduced and none is, even in part; "
    "inconclusive otherwise (nothing failed, but something could not be decided at this size)"
)
