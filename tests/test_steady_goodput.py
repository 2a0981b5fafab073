"""Goodput and waste are steady-state quantities (docs/model.md §1c): nothing fails at the
horizon H, so the work not yet covered by a checkpoint there is not lost. Checked on lone
jobs where T/H is large, against the renewal formula written out here (not the package's):
goodput = T / ((M + R)(e^{(T + D)/M} − 1)).

Every check here failed on the covered estimator 1 − useful / H, which counts the work
uncovered at H as lost (biased by about T/(2H), and minimised as if the failure rate were
1/M + 1/H)."""

import math

import jax
import numpy as np
import pytest

import ckpt_jax as cj
from ckpt_jax import assess, design

HOUR_S = 3600.0
# The lone job: M = 160 h, D = 60 s, R = 5 min (times in hours).
MTBF, WRITE, RESTART = 160.0, 60.0 / HOUR_S, 5.0 / 60.0


def renewal_goodput(interval, write, mtbf, restart):
    """The long-run goodput of a lone job checkpointing every ``interval`` (renewal-reward)."""
    return interval / ((mtbf + restart) * math.expm1((interval + write) / mtbf))


def renewal_optimum(write, mtbf, restart):
    """The interval that maximises `renewal_goodput`, by golden-section search on log T."""
    lo, hi = math.log(write), math.log(10 * mtbf)
    ratio = (math.sqrt(5) - 1) / 2
    for _ in range(200):
        a, b = hi - ratio * (hi - lo), lo + ratio * (hi - lo)
        if renewal_goodput(math.exp(a), write, mtbf, restart) > renewal_goodput(math.exp(b), write, mtbf, restart):
            hi = b
        else:
            lo = a
    return math.exp((lo + hi) / 2)


def test_a_lone_job_that_never_fails_has_goodput_t_over_t_plus_d():
    # The case: 600 GB at 10 GB/s every 10 h, assessed over 2 days. The covered
    # estimator said 0.8849 (the cycle in progress at H counted as lost).
    compute, write, horizon = 10.0, 600.0 / 10.0 / HOUR_S, 48.0
    fleet = cj.Fleet(np.array([compute]), np.array([write]))
    result = assess.assess(fleet, horizon=horizon, key=jax.random.key(0), n_draws=4)
    goodput = result.goodput["fleet"]
    # Without failures the waste is the time writing: 4 or 5 writes in 48 h.
    assert goodput.mean == pytest.approx(compute / (compute + write), abs=write / horizon)
    # The causes still sum to 1 per draw, and without a cap nothing is throttled.
    assert result.losses["fleet"]["throttling"].mean == pytest.approx(0.0, abs=1e-12)


def _lone(compute, n):
    return cj.Fleet(np.full((n, 1), compute), np.full((n, 1), WRITE), mtbf=MTBF, restart=RESTART)


def test_a_lone_jobs_waste_and_goodput_agree_with_the_renewal_formula_at_large_t_over_h():
    # T/H = 0.1: the covered estimator is biased by about T/(2H) = 0.05, far outside the
    # noise; the steady state's remaining bias, ~T²/(M·H) = 0.0015, is within it.
    compute, horizon, n_draws = 2.4, 24.0, 128
    formula = 1 - renewal_goodput(compute, WRITE, MTBF, RESTART)
    keys = jax.random.split(jax.random.key(7), n_draws)
    fleet = cj.Fleet(np.array([compute]), np.array([WRITE]), mtbf=MTBF, restart=RESTART)
    waste = design.fleet_waste(fleet, np.array([[compute]]), horizon=horizon, keys=keys, launch="random")[0]
    stderr = waste.std(ddof=1) / math.sqrt(n_draws)
    assert abs(waste.mean() - formula) < 4 * stderr, (waste.mean(), formula, stderr)
    # `assess` on the same job: the renewal goodput lies within twice its CI's half-width.
    result = assess.assess(fleet, horizon=horizon, key=jax.random.key(7), n_draws=64)
    goodput = result.goodput["fleet"]
    half = (goodput.high - goodput.low) / 2
    assert abs(goodput.mean - (1 - formula)) < 2 * half, (goodput, 1 - formula)


def test_steady_and_covered_waste_differ_by_the_uncovered_work():
    fleet = _lone(2.4, 8)
    state = cj.random_state(fleet, jax.random.key(3))
    out = cj.simulate(fleet, state, None, until=24.0, key=jax.random.key(4), save=cj.SaveAt(trace=False, jobs=True))
    jobs = out.jobs
    np.testing.assert_allclose(jobs.covered_waste, 1 - jobs.useful_work / 24.0, rtol=1e-12)
    np.testing.assert_allclose(jobs.waste, jobs.covered_waste - jobs.uncovered_work / 24.0, rtol=1e-12, atol=1e-15)
    # Blocking writes, no cap: the work done is the compute time, and none of it is counted twice.
    np.testing.assert_allclose(jobs.useful_work + jobs.lost_work + jobs.uncovered_work, jobs.compute_time, rtol=1e-12)
    assert np.all(np.asarray(jobs.uncovered_work) <= 2.4 * (1 + 1e-12))


@pytest.mark.parametrize("method", ["general", "clock", "fifo"])
def test_every_path_reports_the_same_uncovered_work(method):
    # Without failures the fast paths derive the uncovered work from their final state; the
    # general engine with failures that never come keeps the exact accounting.
    n = 8
    fleet = cj.Fleet(np.full((2, n), 10.0), np.full((2, n), 1.0), cap=6.0)
    state = cj.state_from_positions(fleet, np.linspace(0, 10.9, n)[None, :] * np.ones((2, 1)))
    save = cj.SaveAt(trace=False, jobs=True)
    out = cj.simulate(fleet, state, None, until=200.0, method=method, save=save)
    failing = cj.Fleet(np.full((2, n), 10.0), np.full((2, n), 1.0), cap=6.0, mtbf=1e12)
    exact = cj.simulate(failing, state, None, until=200.0, key=jax.random.key(0), save=save)
    for field in ("useful_work", "uncovered_work", "waste", "covered_waste"):
        np.testing.assert_allclose(getattr(out.jobs, field), getattr(exact.jobs, field), rtol=1e-12, atol=1e-12)


def test_without_failures_the_objective_prefers_rare_checkpoints_to_the_square_root_of_2dh():
    # The covered estimator acted as a failure at H: its minimum was at √(2dH).
    horizon, keys = 168.0, jax.random.split(jax.random.key(0), 4)
    fleet = cj.Fleet(np.array([1.0]), np.array([WRITE]), mtbf=1e12, restart=RESTART)
    root = math.sqrt(2 * WRITE * horizon)
    waste = design.fleet_waste(fleet, np.array([[root], [4 * root]]), horizon=horizon, keys=keys, launch="random")
    assert np.all(waste[1] < waste[0])
    # Steady state: the waste is the time writing, about D/T.
    np.testing.assert_allclose(waste[0], WRITE / root, rtol=0.2)


def test_a_lone_jobs_objective_prefers_the_renewal_optimum_to_the_horizon_biased_one():
    # The case over a week: the covered objective was lower at √(2D/(1/M + 1/H))
    # (1.65 h) than at the renewal formula's optimum (2.3 h), and the design went there.
    horizon, n_draws = 168.0, 256
    optimum = renewal_optimum(WRITE, MTBF, RESTART)
    biased = math.sqrt(2 * WRITE / (1 / MTBF + 1 / horizon))
    assert optimum / biased > 1.3
    fleet = cj.Fleet(np.array([1.0]), np.array([WRITE]), mtbf=MTBF, restart=RESTART)
    keys = jax.random.split(jax.random.key(2), n_draws)
    waste = design.fleet_waste(fleet, np.array([[optimum], [biased]]), horizon=horizon, keys=keys, launch="random")
    gain = waste[1] - waste[0]  # paired on common draws
    expected = renewal_goodput(optimum, WRITE, MTBF, RESTART) - renewal_goodput(biased, WRITE, MTBF, RESTART)
    stderr = gain.std(ddof=1) / math.sqrt(n_draws)
    assert gain.mean() > 0 and abs(gain.mean() - expected) < 4 * stderr, (gain.mean(), expected, stderr)


LONE_FILE = """time_unit = "h"
[storage]
peak = "10 GB/s"
[design]
horizon = "7 day"
[[groups]]
name = "job"
count = 1
gpus = 8
checkpoint = "600 GB"
mtbf = "{mtbf}"
restart = "5 min"
interval = "10 h"
"""


def _designed(tmp_path, mtbf):
    import json

    from ckpt_jax.cli import main

    fleet_file = tmp_path / "lone.toml"
    fleet_file.write_text(LONE_FILE.format(mtbf=mtbf))
    assert main(["design", str(fleet_file), "--no-progress", "--out", str(tmp_path / "out")]) == 0
    summary = json.loads((tmp_path / "out" / "design.json").read_text())
    return summary["intervals_in_time_unit"][0]["design"]


@pytest.mark.slow
def test_the_design_of_a_lone_job_lands_at_the_renewal_optimum(tmp_path):
    # `ckpt-jax design` on the lone job (M = 160 h, D = 60 s, R = 5 min, a week)
    # recommended 1.63 h; the renewal formula's optimum is about 2.3 h.
    optimum = renewal_optimum(WRITE, MTBF, RESTART)
    assert _designed(tmp_path, "160 h") == pytest.approx(optimum, rel=0.15)


@pytest.mark.slow
def test_the_design_of_a_job_that_never_fails_does_not_recommend_the_square_root_of_2dh(tmp_path):
    # With no failures the covered objective's optimum was √(2dH) = 2.37 h.
    assert _designed(tmp_path, "1e12 h") > 4 * math.sqrt(2 * WRITE * 168.0)


def test_compare_on_a_lone_job_agrees_with_the_renewal_formula(tmp_path):
    # `compare`'s scenarios go through the same goodput as `assess`: a lone job at T/H = 0.1
    # and 0.2 (doubling its interval), each goodput and their paired difference against the
    # renewal formula, within twice their CIs' half-widths. The covered estimator was off by
    # T/(2H) = 0.05 and 0.1.
    from ckpt_jax import fleetfile

    text = LONE_FILE.format(mtbf="160 h").replace('horizon = "7 day"', 'horizon = "24 h"')
    spec = fleetfile.loads(text.replace('interval = "10 h"', 'interval = "2.4 h"'), "lone.toml")
    ds = assess.compare(spec, {"twice": {"groups[*].interval": "4.8 h"}}, key=jax.random.key(5), n_draws=64)
    goodput = ds["goodput"].sel(group="fleet").values  # (scenario, statistic)
    difference = ds["goodput_difference"].sel(scenario="twice", group="fleet").values
    formula = [renewal_goodput(t, WRITE, MTBF, RESTART) for t in (2.4, 4.8)]
    for (mean, low, high), expected in zip(goodput, formula):
        assert abs(mean - expected) < (high - low), (mean, low, high, expected)
    mean, low, high = difference
    assert abs(mean - (formula[1] - formula[0])) < (high - low), (difference, formula)
