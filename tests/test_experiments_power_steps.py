"""Claim 12 (power steps): the experiment's smoke run, and its per-cycle step measurement
(`power_steps.CycleDrops`, inside the loop) against P(t) rebuilt from the trace of the same run."""

import jax
import numpy as np
import pytest
from experiment_checks import check_experiment_result

import ckpt_jax as cj
from ckpt_jax.experiments import EXPERIMENTS, power_steps


@pytest.mark.slow  # a whole experiment at smoke size; `reproduce --quick` runs it too
def test_power_steps_smoke(tmp_path):
    assert power_steps.EXPERIMENT in EXPERIMENTS
    result = power_steps.run(tmp_path, size="smoke", progress=False)
    check_experiment_result(power_steps, result, tmp_path, one_verdict_per_claim=False)
    assert [v["sub_claim"] for v in result["verdicts"]] == ["12a", "12b", "12c", "12d"]
    cells = result["numbers"]["cells"]
    assert {c["case"] for c in cells} == set(power_steps.CASES)
    for cell in cells:
        assert cell["mean"] >= 1 and abs(sum(cell["distribution"]) - 1) < 1e-9
        if cell["case"] != "independent":  # identical jobs launched apart never switch together
            assert cell["largest_drop"] == pytest.approx(1.0, abs=1e-9)


def _draw_from_trace(trace, n_jobs: int):
    """P(t) of a blocking fleet that starts with every job computing: N − (1 − p_idle) n_w(t),
    n_w from the trace's writes [fire, end). Returns (starts, levels) of its intervals."""
    fires, ends = trace.fire_times.ravel(), trace.end_times.ravel()
    times = np.concatenate([[0.0], fires, ends])
    change = np.concatenate([[0], np.ones_like(fires), -np.ones_like(ends)])
    instants, where = np.unique(times, return_inverse=True)
    writers = np.cumsum(np.bincount(where, weights=change))
    return instants, n_jobs - (1 - power_steps.IDLE_POWER) * writers


def _falls_by_cycle(starts, levels, stop, cycle_starts, window):
    """Per cycle [cycle_starts[c], cycle_starts[c + 1]), by brute force: the largest fall of P
    within ``window`` ending at an instant of the cycle, and the largest fall at one instant."""
    within, instant = [], []
    for c in range(len(cycle_starts) - 1):
        lo, hi = cycle_starts[c], cycle_starts[c + 1]
        best_within = best_instant = 0.0
        for j in range(1, len(starts)):
            if not (lo <= starts[j] < hi) or starts[j] >= stop:
                continue
            best_instant = max(best_instant, levels[j - 1] - levels[j])
            for i in range(j):
                if starts[i + 1] > starts[j] - window:  # level i held within the window
                    best_within = max(best_within, levels[i] - levels[j])
        within.append(best_within)
        instant.append(best_instant)
    return np.array(within), np.array(instant)


@pytest.mark.parametrize("load", [0.5, 2.0])
def test_cycle_drops_equal_the_trace(load):
    n_jobs, cycles, windows = 4, 8, (0.25, 0.1)
    fleet = power_steps._fleet([(n_jobs, load, r) for r in range(3)], n_jobs, two_level=False)
    u = np.asarray(jax.random.uniform(jax.random.key(7), fleet.compute.shape, dtype=fleet.dtype))
    state = cj.initial_state(fleet, phase=0, remaining=(1 - u) * np.asarray(fleet.compute))
    save = cj.SaveAt(trace=True, power=True, observers=(power_steps.CycleDrops(windows, cycles),))
    trace = cj.simulate(fleet, state, cycles, save=save, progress=False)
    assert trace.observed is not None
    drops = {k: np.asarray(v) for k, v in trace.observed["cycle_drops"].items()}
    assert not drops["overflow"].any()
    for b in range(3):
        one = trace[b]
        assert one.power is not None
        starts, levels = _draw_from_trace(one, n_jobs)
        stop = float(one.time)
        # Every instant at which P changes moves it by one job step; the power observer agrees.
        assert float(one.power.largest_drop) == pytest.approx(np.max(-np.diff(levels)), abs=1e-12)
        job0 = np.asarray(one.fire_times)[0]  # column c >= 1 starts at job 0's c-th firing
        assert np.allclose(drops["starts"][b, 1 : cycles + 1], job0, atol=1e-12)
        complete = np.flatnonzero(drops["complete"][b])
        complete = complete[complete < cycles]  # the trace keeps K firings: K − 1 whole cycles
        assert complete.size >= cycles - 2
        for w, window in enumerate(windows):
            within, instant = _falls_by_cycle(starts, levels, stop, job0, window)
            np.testing.assert_allclose(drops["within"][b, complete, w], within[complete - 1], atol=1e-12)
            np.testing.assert_allclose(drops["instant"][b, complete], instant[complete - 1], atol=1e-12)
        assert np.nanmax(drops["within"][b, :, 0]) > np.nanmax(drops["instant"][b])  # jobs pausing in turn


def test_independent_drops_count_the_pauses_within_the_window():
    rng = np.random.default_rng(0)
    # One job: each cycle it pauses once, one job step.
    assert np.all(power_steps.independent_drops(1, 1.0, 0.3, 0.1, 50, rng) == 1)
    # N jobs: whole job steps, at least one (every job pauses once a cycle), at most N.
    drops = power_steps.independent_drops(8, 1.0, 0.2, 0.125, 200, rng)
    assert np.all(drops == np.rint(drops)) and drops.min() >= 1 and drops.max() <= 8 and drops.max() > 1
    # Largest rise of a count within a window, by hand: 0 → 1 → 3 → 2 → 4 at t = 0, 1, 1.5, 4, 4.2.
    times = np.array([[0.0, 1.0, 1.5, 4.0, 4.2]])
    levels = np.array([[0, 1, 3, 2, 4]])
    lo = np.zeros(1)
    assert power_steps.largest_rises(times, levels, 0.4, lo)[0] == 2  # 1 → 3, or 2 → 4
    assert power_steps.largest_rises(times, levels, 1.2, lo)[0] == 3  # 0 → 3
    assert power_steps.largest_rises(times, levels, 3.0, lo)[0] == 3  # 1 → 4 at 4.2 (level 1 ends at 1.5 > 1.2)


def test_power_law_and_student_t():
    n = np.array([4, 8, 16, 32])
    fit = power_steps.power_law(n, 3 * n**0.25)
    assert fit["exponent"] == pytest.approx(0.25) and fit["prefactor"] == pytest.approx(3) and fit["se"] < 1e-9
    assert power_steps.student_t_quantile(0.95, 3) == pytest.approx(2.3534, abs=1e-3)
