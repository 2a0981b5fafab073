"""Claim 11: the coupling function of identical two-level pairs, and its experiment.

The coupling function of a two-level pair (`coupling_function` with ``snapshot``) is checked
against a two-job event simulation written here in plain Python: job 1's time phase at job 0's
next firing, from the same solo launch.
"""

import math

import numpy as np
import pytest
from experiment_checks import check_experiment_result

import ckpt_jax as cj
from ckpt_jax.coupling import coupling_function, two_level_coupling
from ckpt_jax.experiments import EXPERIMENTS, PARTIALLY, REPRODUCED, asynchrony
from ckpt_jax.theory import two_level_pair_band

WRITE, SNAPSHOT = 1.0, 0.25


def reference_phase(delta, compute, write, snapshot, shared_rate, lone_rate):
    """Job 1's time phase at job 0's next firing, for two identical two-level jobs: job 0
    fires at t = 0, job 1 is where a lone job is P − δ after its firing. Drains run at
    ``lone_rate`` alone and ``shared_rate`` each when both drain; compute at speed 1."""
    lone_drain = write / lone_rate
    period = snapshot + max(compute, lone_drain)
    since = period - delta
    # Per job: snapshot left (None: not snapping), compute left, drain left (None: none).
    jobs = [[snapshot, compute, None] if snapshot > 0 else [None, compute, write]]
    if since < snapshot:
        jobs.append([snapshot - since, compute, None])
    else:
        into = since - snapshot
        left = write - lone_rate * into
        jobs.append([None, max(compute - into, 0.0), left if left > 0 else None])
    t = 0.0
    for _ in range(100):
        drains = [job[2] is not None and job[0] is None for job in jobs]
        rate = shared_rate if all(drains) else lone_rate
        steps = []
        for job, draining in zip(jobs, drains):
            if job[0] is not None:
                steps.append(job[0])
                continue
            if draining:
                steps.append(job[2] / rate)
            if job[1] > 0:
                steps.append(job[1])
        dt = min(steps)
        t += dt
        fired = False
        for i, (job, draining) in enumerate(zip(jobs, drains)):
            if job[0] is not None:
                job[0] -= dt
                if job[0] <= 1e-12:  # the snapshot ends: drain and compute start
                    jobs[i] = [None, compute, write]
                continue
            if draining:
                job[2] -= rate * dt
                if job[2] <= 1e-12:
                    job[2] = None
            if job[1] > 0:
                job[1] = max(job[1] - dt, 0.0) if job[1] - dt > 1e-12 else 0.0
            if job[1] == 0.0 and job[2] is None:  # fire (or stop waiting)
                jobs[i] = [snapshot, compute, None] if snapshot > 0 else [None, compute, write]
                fired |= i == 0
        if fired:
            job = jobs[1]
            if job[0] is not None:
                return job[0] + max(compute, lone_drain)
            return max(job[1], (job[2] or 0.0) / lone_rate)
    raise AssertionError("job 0 did not fire again")


def wrap(x, length):
    return x - length * np.round(x / length)


@pytest.mark.parametrize(
    "compute, coupled",
    [(2.5, False), (1.875, False), (1.5, True), (0.75, False)],
    ids=["keeps-up", "backs-up-pairwise", "band", "lone-backs-up"],
)
def test_two_level_coupling_against_event_simulation(compute, coupled):
    """f ≡ 1, s = 0.25 d: D(1) = 1, T_c = 1.75, D(2) = 2. Zero outside the band, non-zero in
    it, and equal to the plain-Python event simulation everywhere."""
    lower, upper = two_level_pair_band(WRITE, SNAPSHOT)
    assert (float(lower), float(upper)) == (1.0, 1.75)
    assert (lower < compute < upper) == coupled
    fleet = cj.Fleet([compute, compute], [WRITE, WRITE], throughput="shared", snapshot=SNAPSHOT, dtype=np.float64)
    period = SNAPSHOT + max(compute, WRITE)
    deltas = (np.arange(40) + 0.5) / 40 * period
    result = coupling_function(fleet, deltas)
    assert result.cycle_length == pytest.approx(period) and result.ok.all()
    expected = np.array([reference_phase(d, compute, WRITE, SNAPSHOT, 0.5, 1.0) for d in deltas])
    expected = wrap(expected - deltas, period)
    np.testing.assert_allclose(result.coupling, expected, rtol=0, atol=1e-12 * period)
    worst = np.abs(result.coupling).max() / period
    if coupled:
        assert worst > 1e-3
    else:
        assert worst <= 1e-12


def test_two_level_coupling_batch_and_write_limit():
    """The batch measurement equals the single one; a write limit b ≤ f(2)/2 removes the band:
    the pair keeps its lag although every drain backs up (D = d/b = 2 > T)."""
    computes = np.array([1.5, 1.5])
    fleets = cj.Fleet(
        np.repeat(computes[:, None], 2, axis=1),
        WRITE,
        throughput="shared",
        snapshot=SNAPSHOT,
        write_limit=np.array([[math.inf], [0.5]]),
        dtype=np.float64,
    )
    phases = (np.arange(24) + 0.5) / 24
    batch = two_level_coupling(fleets, phases, n_cycles=2)
    pair = cj.Fleet([1.5, 1.5], [WRITE, WRITE], throughput="shared", snapshot=SNAPSHOT, dtype=np.float64)
    single = coupling_function(pair, batch.deltas[0], n_cycles=2)
    np.testing.assert_array_equal(batch.coupling[0], single.cycle_coupling)
    assert np.abs(batch.coupling[0, :, 0]).max() > 1e-3
    assert batch.period[1, 1] == pytest.approx(SNAPSHOT + 2.0)
    assert np.abs(batch.coupling[1]).max() <= 1e-12 * batch.period[1, 1]
    lower, upper = two_level_pair_band(WRITE, SNAPSHOT, write_limit=0.5)
    assert upper <= lower  # empty band


def test_two_level_coupling_rejects_bad_input():
    pair = cj.Fleet([1.5, 1.5], [WRITE, WRITE], snapshot=SNAPSHOT, dtype=np.float64)
    with pytest.raises(ValueError, match="deltas must lie in"):
        coupling_function(pair, [1.0, 1.8])  # P = 1.75
    with pytest.raises(ValueError, match="uncoupled"):
        coupling_function(pair, [1.0], history="uncoupled")
    blocking = cj.Fleet(np.full((1, 2), 1.5), np.full((1, 2), WRITE), dtype=np.float64)
    with pytest.raises(ValueError, match="two levels"):
        two_level_coupling(blocking, [0.5])
    batch = cj.Fleet(np.full((1, 2), 1.5), np.full((1, 2), WRITE), snapshot=SNAPSHOT, dtype=np.float64)
    with pytest.raises(ValueError, match="phases"):
        two_level_coupling(batch, [0.0, 0.5])


@pytest.mark.slow  # a whole experiment at smoke size; `reproduce --quick` runs it too
def test_asynchrony_smoke(tmp_path):
    assert asynchrony.EXPERIMENT in EXPERIMENTS
    result = asynchrony.run(tmp_path, size="smoke", progress=False)
    check_experiment_result(asynchrony, result, tmp_path, one_verdict_per_claim=False)
    by_part = {v["sub_claim"]: v for v in result["verdicts"]}
    assert set(by_part) == {"11a", "11b", "11c"}
    assert by_part["11a"]["verdict"] == REPRODUCED
    assert by_part["11a"]["measured"]["max_keep_up"] <= asynchrony.ZERO_TOL
    # Backup is necessary, not sufficient: some backed-up cells couple, some stay zero.
    assert by_part["11b"]["verdict"] == PARTIALLY
    measured = by_part["11b"]["measured"]
    assert 0 < measured["coupled_backed_up_cells"] < measured["backed_up_cells"]
    assert by_part["11c"]["verdict"] == REPRODUCED and by_part["11c"]["measured"]["mismatches"] == 0
    assert sorted(result["figures"]) == ["asynchrony_curves.png", "asynchrony_map.png"]
