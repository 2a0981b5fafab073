"""The verdict rules (`ckpt_jax.experiments.rules`) and each experiment's use of them, on
synthetic inputs: an interval inside the margin → reproduced, straddling an edge →
inconclusive, wholly outside → not reproduced."""

import math

import numpy as np
import pytest

from ckpt_jax.experiments import (
    INCONCLUSIVE,
    NOT_REPRODUCED,
    PARTIALLY,
    REPRODUCED,
    bursts,
    jitter,
    memory,
    no_clustering,
    rules,
    verdict,
)

# The four outcomes by their initials, so the tables below read as tables.
R, N, P, I = REPRODUCED, NOT_REPRODUCED, PARTIALLY, INCONCLUSIVE  # noqa: E741


@pytest.mark.parametrize(
    "low, high, margin_low, margin_high, expected",
    [
        (-0.01, 0.01, -0.05, 0.05, R),  # inside
        (0.03, 0.08, -0.05, 0.05, I),  # straddles the upper edge
        (-0.08, -0.03, -0.05, 0.05, I),  # straddles the lower edge
        (-0.08, 0.08, -0.05, 0.05, I),  # wider than the margin
        (0.06, 0.08, -0.05, 0.05, N),  # wholly above
        (-0.08, -0.06, -0.05, 0.05, N),  # wholly below
        (-0.05, 0.01, -0.05, 0.05, I),  # touching an edge is not inside
        (0.05, 0.06, -0.05, 0.05, I),  # nor outside
        (0.5, 9.0, 0.0, math.inf, R),  # one-sided: above a floor
        (-0.5, 0.5, 0.0, math.inf, I),
        (-0.5, -0.1, 0.0, math.inf, N),
        (float("nan"), 0.1, -1.0, 1.0, I),  # undefined interval
    ],
)
def test_interval_verdict(low, high, margin_low, margin_high, expected):
    assert rules.interval_verdict(low, high, margin_low, margin_high) == expected


def test_interval_verdict_rejects_reversed_interval():
    with pytest.raises(ValueError, match="low <= high"):
        rules.interval_verdict(0.2, 0.1, -1, 1)


@pytest.mark.parametrize(
    "parts, expected",
    [
        ([R, R, R], R),
        ([R, I], I),
        ([I, I], I),
        ([R, N], P),
        ([R, I, N], P),
        ([P, R], P),
        ([N, N], N),
        ([N, I], N),
        ([P], P),
        ([], I),
    ],
)
def test_combine(parts, expected):
    assert rules.combine(parts) == expected


def test_power_numbers_agree_with_each_other():
    se = 0.01
    supported = rules.smallest_supported_margin(se)
    # At the smallest supported margin the equivalence conclusion has exactly the quoted power.
    assert rules.equivalence_power(se, -supported, supported) == pytest.approx(rules.POWER, abs=1e-9)
    one_sided = rules.smallest_supported_margin(se, two_sided=False)
    assert rules.equivalence_power(se, -one_sided, math.inf) == pytest.approx(rules.POWER, abs=1e-9)
    # A margin much wider than the noise is supported almost surely; one far narrower, never.
    assert rules.equivalence_power(se, -1.0, 1.0) > 0.999
    assert rules.equivalence_power(se, -1e-4, 1e-4) == 0.0
    # An effect at the smallest detectable size is flagged "outside" with the quoted power:
    # the lower end of its interval, effect − z·se, clears the margin with that probability.
    margin = 0.02
    effect = rules.smallest_detectable_effect(se, margin)
    z = 1.6448536269514722  # one-sided 5 %
    from statistics import NormalDist

    assert NormalDist().cdf((effect - margin) / se - z) == pytest.approx(rules.POWER, abs=1e-9)
    # Halving the standard error needs four times the launches.
    assert rules.launches_needed(se, 100, supported / 2) == 400
    # An estimate 0.01 inside the edge, with se 0.01 from 100 launches: (z_α + z_power)² · 100.
    assert rules.launches_to_decide(0.01, 100, 0.01) == math.ceil(100 * (1.6448536269514722 + 0.8416212335729143) ** 2)
    assert rules.launches_to_decide(0.01, 100, 0.0) == -1
    assert math.isnan(rules.smallest_supported_margin(0.0))


def _simulated_outcomes(decide, truth, se, margin_low, margin_high, trials=4000, seed=0):
    """Fraction of synthetic normal intervals centred at ``truth`` decided each way."""
    rng = np.random.default_rng(seed)
    z = 1.6448536269514722
    estimates = truth + se * rng.standard_normal(trials)
    outcomes = [decide(e - z * se, e + z * se) for e in estimates]
    return {kind: outcomes.count(kind) / trials for kind in (R, I, N)}


def test_equivalence_power_matches_simulation():
    se, margin = 0.008, 0.02
    simulated = _simulated_outcomes(memory.cell_verdict, 0.0, se, -margin, margin)
    assert simulated[R] == pytest.approx(rules.equivalence_power(se, -margin, margin), abs=0.03)


# Each experiment's own rule, with its own named margin.


def test_no_clustering_cell_rule():
    margin = no_clustering.SLOPE_MARGIN  # negative: a shrink of ×2 per SHRINK_HORIZON cycles
    assert margin == pytest.approx(-np.log(no_clustering.SHRINK_FACTOR) / no_clustering.SHRINK_HORIZON)
    assert no_clustering.cell_verdict(-1e-5, 1e-5) == R  # flat
    assert no_clustering.cell_verdict(margin / 2, margin / 4) == R  # a slow, significant shrink inside the margin
    assert no_clustering.cell_verdict(1e-4, 1e-3) == R  # a growing gap is no clustering (one-sided)
    assert no_clustering.cell_verdict(2 * margin, 0.0) == I  # straddles the margin
    assert no_clustering.cell_verdict(3 * margin, 2 * margin) == N  # shrinks faster than the margin


def test_no_clustering_trend_on_synthetic_gaps():
    rng = np.random.default_rng(1)
    launches, cycles = 300, 200
    flat = 0.05 * np.exp(0.3 * rng.standard_normal((launches, cycles)))
    trend = no_clustering.shrink_trend(flat, 200, rng)
    assert trend["outcome"] == R and trend["slope_ci"][0] > no_clustering.SLOPE_MARGIN
    assert trend["detectable_shrink"] < 1 / no_clustering.SHRINK_FACTOR < trend["supported_shrink"] < 1
    # Clustering: the median gap shrinks ×100 over the run.
    shrinking = flat * np.exp(np.log(0.01) * np.arange(cycles) / cycles)
    assert no_clustering.shrink_trend(shrinking, 200, rng)["outcome"] == N
    # A dozen noisy launches over 30 cycles cannot tell.
    noisy = 0.05 * np.exp(1.0 * rng.standard_normal((12, 30)))
    assert no_clustering.shrink_trend(noisy, 200, rng)["outcome"] == I


def test_memory_cell_rule():
    margin = memory.MEMORY_MARGIN
    assert memory.cell_verdict(-margin / 2, margin / 2) == R
    assert memory.cell_verdict(margin / 2, 1.5 * margin) == I
    assert memory.cell_verdict(-1.5 * margin, -margin / 2) == I
    assert memory.cell_verdict(1.2 * margin, 2 * margin) == N  # a memory that stays
    assert memory.cell_verdict(-2 * margin, -1.2 * margin) == N  # anti-memory is memory too


def test_memory_bootstrap_interval_covers_the_mean():
    rng = np.random.default_rng(2)
    values = 0.01 + 0.1 * rng.standard_normal(2000)
    low, high, se = memory.bootstrap_interval(values, 400, rng)
    assert low < values.mean() < high
    assert se == pytest.approx(0.1 / np.sqrt(2000), rel=0.2)
    assert memory.cell_verdict(low, high) == R


def test_jitter_slope_rule():
    margin = jitter.SLOPE_MARGIN
    assert jitter.slope_verdict(1.95, 2.05) == R
    assert jitter.slope_verdict(2 - margin / 2, 2 + margin / 2) == R
    assert jitter.slope_verdict(1.7, 1.95) == I  # reaches below 2 − margin
    assert jitter.slope_verdict(1.0, 3.0) == I  # a fit too noisy to tell
    assert jitter.slope_verdict(0.9, 1.1) == N  # a drift (slope 1)
    assert jitter.slope_verdict(-0.1, 0.2) == N  # chaos (lifetime ~ log)
    assert jitter.slope_verdict(2.3, 2.6) == N
    assert jitter.slope_verdict(float("nan"), float("nan")) == I  # too few points to fit


def test_bursts_level_rule():
    margin = bursts.MIN_TAIL_RATIO
    assert bursts.level_verdict(2.5 * margin, 4 * margin) == R
    assert bursts.level_verdict(0.9 * margin, 1.5 * margin) == I
    assert bursts.level_verdict(1.0, 0.9 * margin) == N  # heavier, but not by the margin
    assert bursts.level_verdict(0.5, 0.8) == N


def test_verdict_accepts_inconclusive_and_checks_tables():
    entry = verdict(5, INCONCLUSIVE, "too small", sub_claim="5 memory", table=dict(columns=["a"], rows=[["1"]]))
    assert entry["verdict"] == INCONCLUSIVE and entry["sub_claim"] == "5 memory"
    assert verdict(7, REPRODUCED, "ok")["sub_claim"] == "7"
    with pytest.raises(ValueError, match="verdict must be one of"):
        verdict(5, "maybe", "no")
    with pytest.raises(ValueError, match="one cell per column"):
        verdict(5, REPRODUCED, "x", table=dict(columns=["a", "b"], rows=[["1"]]))
