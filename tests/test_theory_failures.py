"""Failures and checkpoint intervals (docs/model.md §1c, claim 10): the renewal formulas of
`ckpt_jax.theory` and the failure-aware reference integrator, checked against each other.

The two are independent code: the formulas are closed forms, the reference
(`reference.simulate_failures_reference`) steps the §1c rules event by event. A Monte-Carlo of
the reference with numpy-drawn Poisson failure times must give the formula's waste within its
Monte-Carlo error plus the finite-horizon bias bound (`renewal_waste_bounds`). The reference is
also checked by hand, against the failure-free reference integrator, and by conservation laws.
"""

import doctest
import math
import os
from decimal import Decimal, getcontext
from fractions import Fraction as Q

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from reference import simulate_failures_reference, simulate_reference

import ckpt_jax as cj

theory = cj.theory
Z_LIMIT = 4.0  # Monte-Carlo agreement: within 4 standard errors (plus the bias bound)
SETTINGS = settings(
    max_examples=int(os.environ.get("CKPT_FAILURE_EXAMPLES", 40)),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


def poisson_times(rng, mtbf, horizon):
    """Failure times of a Poisson process of rate 1/mtbf on [0, horizon], drawn by numpy."""
    times = []
    t = rng.exponential(mtbf)
    while t <= horizon:
        times.append(t)
        t += rng.exponential(mtbf)
    return times


# --- the reference, by hand ------------------------------------------------------------------


def test_single_job_by_hand():
    # T = 3, d = 1, R = 1/2. Failure at 2 (loses 2), down to 5/2; the failure at 9/4 falls in
    # the restart and is ignored. Compute to 11/2, write to 13/2 (saves 3), compute to 19/2,
    # write from 19/2: the failure at 10 abandons it (loses 3), down to 21/2, compute to 27/2,
    # write until H = 14 (3 uncovered).
    out = simulate_failures_reference([3], [1], 14, [[2, Q(9, 4), 10]], Q(1, 2))
    assert out["failure_times"] == [[2, 10]] and out["failures"] == [2]
    assert out["restart_times"] == [[Q(5, 2), Q(21, 2)]]
    assert out["fire_times"] == [[Q(11, 2), Q(19, 2), Q(27, 2)]]
    assert out["end_times"] == [[Q(13, 2)]]
    assert (out["useful_work"], out["lost_work"], out["uncovered_work"]) == ([3], [5], [3])
    assert (out["compute_time"], out["write_time"], out["down_time"]) == ([11], [2], [1])
    assert out["event_times"][-1] == 14


def test_failing_writer_frees_storage_for_the_other():
    # f = 1, T = 2, d = 1, both fire at 1 and drain at 1/2. Job 1 fails at 3/2: job 0 (3/4
    # left) drains alone at 1 and ends at 9/4. Job 1 is down until 5/2, computes until 9/2;
    # job 0 fires at 17/4 and drains alone (1/4) until 9/2, then both at 1/2: job 0 ends at 6,
    # job 1 (1/4 left) alone at 25/4.
    out = simulate_failures_reference([2, 2], [1, 1], 7, [[], [Q(3, 2)]], 1, phase=[0, 0], remaining=[1, 1])
    assert out["fire_times"] == [[1, Q(17, 4)], [1, Q(9, 2)]]
    assert out["end_times"] == [[Q(9, 4), 6], [Q(25, 4)]]
    assert out["useful_work"] == [3, 2]  # job 0: 1 (after t = 0) + 2; job 1: 2
    assert out["lost_work"] == [0, 1]
    assert out["write_time"] == [3, Q(9, 4)]
    assert out["down_time"] == [0, 1]


def test_failed_job_frees_power_for_the_other():
    # C = 1: two computing jobs run at 1/2. Job 1 fails at 1 (loses 1/2) and is down past H;
    # job 0 runs alone at 1 from then: 1/2 + 3/2 = T at 5/2, writes until H = 3.
    out = simulate_failures_reference([2, 2], [1, 1], 3, [[], [1]], 10, cap=1)
    assert out["fire_times"] == [[Q(5, 2)], []]
    assert out["compute_time"] == [Q(5, 2), 1] and out["down_time"] == [0, 2]
    assert out["lost_work"] == [0, Q(1, 2)] and out["uncovered_work"] == [2, 0]


def test_fcfs_failing_head_hands_storage_to_the_next():
    # fcfs, f = 1: both fire at 1 (job 0 first by index) and job 1 waits. Job 0 fails at 3/2
    # (1/2 drained, abandoned): job 1 drains from 3/2 and ends at 5/2. Job 1 waited 1/2 in its
    # write phase: that counts as writing time.
    out = simulate_failures_reference(
        [2, 2], [1, 1], 3, [[Q(3, 2)], []], 10, phase=[0, 0], remaining=[1, 1], storage_policy="fcfs"
    )
    assert out["end_times"] == [[], [Q(5, 2)]]
    assert out["write_time"] == [Q(1, 2), Q(3, 2)] and out["lost_work"] == [1, 0]


def test_maxmin_sizes_without_the_failed_job():
    # Sizes 1 and 3, C = 2: water-filling gives job 0 its full 1 and job 1 the other 1 (speed
    # 1/3). Job 0 fails at 1: job 1 alone gets 2 of its 3 (speed 2/3). T = 3: job 1 has done
    # 1/3 by t = 1, the remaining 8/3 at 2/3 take 4, so it fires at 5.
    out = simulate_failures_reference([3, 3], [1, 1], 6, [[1], []], 10, cap=2, size=[1, 3])
    assert out["fire_times"] == [[], [5]]
    assert out["compute_work"] == [1, 3]


def test_ties_completions_come_before_failures():
    # A write that ends at the failure instant is complete (nothing lost); a compute that ends
    # at the failure instant fires, and the failure abandons that new write (T lost).
    out = simulate_failures_reference([2], [1], 4, [[3]], 0)
    assert out["useful_work"] == [2] and out["lost_work"] == [0] and out["end_times"] == [[3]]
    out = simulate_failures_reference([2], [1], 4, [[2]], 0)
    assert out["fire_times"] == [[2, 4]] and out["lost_work"] == [2] and out["useful_work"] == [0]


def test_restart_zero_and_failure_at_the_restart_end():
    # R = 0: back to computing at the failure instant. A failure exactly at the end of a
    # restart hits (the down period is [t_f, t_f + R)); one just inside it is ignored.
    out = simulate_failures_reference([2], [1], 5, [[1, Q(3, 2)]], 0)
    assert out["failures"] == [2] and out["lost_work"] == [Q(3, 2)] and out["down_time"] == [0]
    assert out["fire_times"] == [[Q(7, 2)]]
    out = simulate_failures_reference([2], [1], 5, [[1, Q(19, 10), 2]], 1)
    assert out["failure_times"] == [[1, 2]] and out["down_time"] == [2]


def test_async_failure_loses_the_covered_cycle_and_the_progress_since():
    # alpha = 1/2, T = 2, d = 2, R = 1/2: the job fires at 2 and computes its next cycle at 1/2
    # while the write drains. The failure at 3 abandons the write (the cycle it covered, 2, is
    # lost) and the 1/2 done since; down to 7/2, the redo takes T = 2, firing at 11/2, and from
    # there it computes 1/4 by H = 6 while its write drains.
    out = simulate_failures_reference([2], [2], 6, [[3]], Q(1, 2), async_fraction=Q(1, 2))
    assert out["fire_times"] == [[2, Q(11, 2)]] and out["end_times"] == [[]]
    assert out["lost_work"] == [Q(5, 2)] and out["useful_work"] == [0]
    assert out["uncovered_work"] == [Q(9, 4)] and out["compute_work"] == [Q(19, 4)]
    assert (out["compute_time"], out["write_time"], out["down_time"]) == ([Q(11, 2)], [Q(3, 2)], [Q(1, 2)])


def test_async_failure_while_waiting_loses_two_cycles():
    # alpha = 1, T = 1, d = 2: fires at 1, its next cycle is done at 2 and it waits on the
    # drain. The failure at 5/2 (R = 0) loses both cycles; the redo fires at 7/2. Waiting is
    # neither computing time nor work.
    out = simulate_failures_reference([1], [2], 4, [[Q(5, 2)]], 0, async_fraction=1)
    assert out["fire_times"] == [[1, Q(7, 2)]] and out["lost_work"] == [2]
    assert out["compute_time"] == [Q(7, 2)] and out["compute_work"] == [Q(7, 2)]


def test_delayed_controller_sees_a_failure_tau_later():
    # C = 1, tau = 1/2: two computing jobs at 1/2. Job 1 fails at 1 and stays down past H, but
    # job 0 keeps speed 1/2 until the controller sees it at 3/2 (3/4 done), then runs at 1 and
    # fires at 11/4. Its firing's update would apply at 13/4, after H = 3.
    out = simulate_failures_reference([2, 2], [1, 1], 3, [[], [1]], 10, cap=1, delay=Q(1, 2))
    assert out["fire_times"] == [[Q(11, 4)], []] and out["lost_work"] == [0, Q(1, 2)]
    assert out["event_times"] == [1, Q(3, 2), Q(11, 4), 3]


def test_redo_has_the_lost_cycles_work():
    # Per-cycle work 3, 5/2, 3/2 (compute_work(i, k), k = 0 after the initial write). The job
    # drains its initial write until 1, computes 3 (fires at 4), writes until 5, computes 5/2
    # (fires at 15/2). The failure at 8 (R = 0) abandons that write: its cycle, 5/2, is lost
    # and redone with the same work, firing at 21/2.
    works = [3, Q(5, 2), Q(3, 2), 1]
    out = simulate_failures_reference(
        [2], [1], 11, [[8]], 0, phase=[1], remaining=[1], compute_work=lambda i, k: works[k]
    )
    assert out["fire_times"] == [[4, Q(15, 2), Q(21, 2)]] and out["end_times"] == [[5]]
    assert out["useful_work"] == [3] and out["lost_work"] == [Q(5, 2)]


def test_failure_times_must_increase():
    with pytest.raises(ValueError, match=r"failure_times\[0\]"):
        simulate_failures_reference([2], [1], 5, [[2, 1]], 0)
    with pytest.raises(ValueError, match=r"failure_times\[0\]"):
        simulate_failures_reference([2], [1], 5, [[1, 1]], 0)


# --- the reference, against the failure-free reference and conservation laws -----------------

GRID = st.integers(1, 16).map(lambda k: Q(k, 4))


@st.composite
def fleets(draw, with_failures, asynchronous=False):
    n_jobs = draw(st.integers(1, 4))
    compute = [draw(GRID) for _ in range(n_jobs)]
    write = [draw(GRID) for _ in range(n_jobs)]
    phase = [draw(st.integers(0, 1)) for _ in range(n_jobs)]
    remaining = [draw(st.integers(1, 4)) * (write[i] if phase[i] else compute[i]) / 4 for i in range(n_jobs)]
    cap = draw(st.sampled_from([None, Q(1, 2), Q(1), Q(3, 2), Q(2)]))
    throughput = draw(st.one_of(st.none(), st.lists(GRID, min_size=n_jobs, max_size=n_jobs)))
    horizon = draw(st.integers(4, 80).map(lambda k: Q(k, 4)))
    restart = [draw(st.integers(0, 8).map(lambda k: Q(k, 4))) for _ in range(n_jobs)]
    sized = draw(st.booleans())
    size = [draw(st.sampled_from([Q(1, 2), Q(1), Q(2), Q(3)])) for _ in range(n_jobs)] if sized else None
    power_policy = draw(st.sampled_from(["maxmin", "uniform"]))
    storage_policy = draw(st.sampled_from(["fair", "weighted", "fcfs"]))
    failure_times = [[] for _ in range(n_jobs)]
    if with_failures:
        grid_times = st.integers(0, int(horizon * 8)).map(lambda k: Q(k, 8))
        failure_times = [sorted(set(draw(st.lists(grid_times, max_size=6)))) for _ in range(n_jobs)]
    return dict(
        compute=compute,
        write=write,
        phase=phase,
        remaining=remaining,
        cap=cap,
        throughput=None if throughput is None else [None] + throughput,
        horizon=horizon,
        restart=restart,
        failure_times=failure_times,
        size=size,
        power_policy=power_policy,
        storage_policy=storage_policy,
        delay=draw(st.sampled_from([0, Q(1, 4), Q(1, 2), Q(3, 2)])),
        async_fraction=draw(st.sampled_from([0, Q(1, 4), 1])) if asynchronous else 0,
    )


@SETTINGS
@given(fleet=fleets(with_failures=False, asynchronous=True))
def test_without_failures_equals_the_reference_integrator(fleet):
    out = simulate_failures_reference(**fleet)
    horizon = fleet["horizon"]
    n_fires = int(horizon / min(fleet["compute"])) + 2  # more firings than fit before H
    fire_times, end_times, event_times = simulate_reference(
        fleet["compute"],
        fleet["write"],
        fleet["phase"],
        fleet["remaining"],
        n_fires,
        cap=fleet["cap"],
        throughput=fleet["throughput"],
        return_event_times=True,
        size=fleet["size"],
        power_policy=fleet["power_policy"],
        storage_policy=fleet["storage_policy"],
        delay=fleet["delay"],
        async_fraction=fleet["async_fraction"],
    )
    for i in range(len(fleet["compute"])):
        assert len(out["fire_times"][i]) < n_fires
        assert out["fire_times"][i] == [t for t in fire_times[i] if t <= horizon]
        assert out["end_times"][i] == [t for t in end_times[i] if t <= horizon]
        # Useful work: every completed write saves T_i, except that the first one of a job
        # that starts computing saves only the work it did after t = 0.
        head = fleet["compute"][i] - fleet["remaining"][i] if fleet["phase"][i] == 0 else 0
        saved = fleet["compute"][i] * len(out["end_times"][i]) - (head if out["end_times"][i] else 0)
        assert out["useful_work"][i] == saved
        assert out["lost_work"][i] == 0 and out["failures"][i] == 0 and out["down_time"][i] == 0
    assert [t for t in out["event_times"] if t < horizon] == [t for t in event_times if t < horizon]
    # Failure times beyond the horizon change nothing.
    later = dict(fleet, failure_times=[[horizon + 1] for _ in fleet["compute"]])
    assert simulate_failures_reference(**later) == out


@SETTINGS
@given(fleet=fleets(with_failures=True))
def test_with_failures_conserves_work_and_time(fleet):
    out = simulate_failures_reference(**fleet)
    horizon = fleet["horizon"]
    for i in range(len(fleet["compute"])):
        # Work: everything done is saved, lost, or still uncovered at H.
        assert out["useful_work"][i] + out["lost_work"][i] + out["uncovered_work"][i] == out["compute_work"][i]
        assert out["useful_work"][i] + out["lost_work"][i] <= out["compute_work"][i]
        assert out["compute_work"][i] <= out["compute_time"][i]  # speed <= 1
        # Time: computing, writing or down, all the time (blocking writes: no waiting).
        assert out["compute_time"][i] + out["write_time"][i] + out["down_time"][i] == horizon
        # Failures: the listed ones that hit, none inside a down period, each down for R_i
        # (or until H).
        hits, restart = out["failure_times"][i], fleet["restart"][i]
        assert set(hits) <= set(fleet["failure_times"][i]) and len(hits) == out["failures"][i]
        assert all(b >= a + restart for a, b in zip(hits, hits[1:]))
        ignored = [t for t in fleet["failure_times"][i] if t not in hits]
        assert all(any(a <= t < a + restart for a in hits) for t in ignored)
        assert out["down_time"][i] == sum(min(restart, horizon - a) for a in hits)
        # Only whole cycles are saved after a failure, and no write is completed while down.
        assert all(not any(a < t < a + restart for a in hits) for t in out["end_times"][i])


# --- the renewal formula against a Monte-Carlo of the reference ------------------------------


def monte_carlo(compute, write, mtbf, restart, horizon, n_draws, seed):
    """Waste and failure-compensator samples of one job alone (reference, float arithmetic)."""
    rng = np.random.default_rng(seed)
    waste, compensator = [], []
    for _ in range(n_draws):
        out = simulate_failures_reference(
            [compute], [write], horizon, [poisson_times(rng, mtbf, horizon)], restart, exact=False
        )
        waste.append(1 - out["useful_work"][0] / horizon)
        # Failures come at rate 1/M while up: E[failures − up time / M] = 0 at any horizon.
        compensator.append(out["failures"][0] - (horizon - out["down_time"][0]) / mtbf)
    return np.array(waste), np.array(compensator)


def check_renewal(compute, write, mtbf, restart, horizon, n_draws, seed):
    waste, compensator = monte_carlo(compute, write, mtbf, restart, horizon, n_draws, seed)
    long_run = float(theory.renewal_waste(compute, write, mtbf, restart))
    low, high = (float(x) for x in theory.renewal_waste_bounds(compute, write, mtbf, restart, horizon))
    error = waste.std(ddof=1) / math.sqrt(n_draws)
    mean = waste.mean()
    assert low - Z_LIMIT * error <= mean <= high + Z_LIMIT * error, (mean, long_run, low, high, error)
    compensator_error = compensator.std(ddof=1) / math.sqrt(n_draws)
    assert abs(compensator.mean()) <= Z_LIMIT * compensator_error
    return (mean - long_run) / error


RENEWAL_CASES = [
    # compute, write, mtbf, restart: moderate, heavy (L/M = 2.5, R = 0) and light failures
    (1.0, 0.1, 2.0, 0.3),
    (2.0, 0.5, 1.0, 0.0),
    (0.3, 0.05, 10.0, 1.0),
]


@pytest.mark.parametrize("case", RENEWAL_CASES)
def test_renewal_waste_matches_monte_carlo(case):
    # Long horizons, few draws: the bias bound (<= E[X]/H) stays well below the error.
    check_renewal(*case, horizon=2000.0, n_draws=16, seed=13)


@pytest.mark.parametrize("horizon, n_draws", [(20.0, 400), (200.0, 100)])
def test_renewal_bounds_hold_at_short_horizons(horizon, n_draws):
    # At short horizons the finite-H bias is comparable with the error: the bracket must hold.
    check_renewal(1.0, 0.25, 1.5, 0.5, horizon, n_draws, seed=7)


@pytest.mark.slow
@pytest.mark.parametrize(
    "case",
    RENEWAL_CASES
    + [
        (float(theory.optimal_interval(0.05, 5.0)), 0.05, 5.0, 0.5),  # at the optimum
        (0.5, 1.0, 3.0, 2.0),  # write longer than compute
    ],
)
def test_renewal_waste_matches_monte_carlo_long(case):
    check_renewal(*case, horizon=20000.0, n_draws=48, seed=31)


def test_cycle_moments_match_direct_draws():
    # The cycle itself, drawn directly (tries until one survives L = T + d), vectorised.
    compute, write, mtbf, restart = 1.0, 0.2, 1.5, 0.4
    length, rng, n = compute + write, np.random.default_rng(3), 200000
    cycle, open_ = np.zeros(n), np.ones(n, bool)
    while open_.any():
        idx = np.flatnonzero(open_)
        life = rng.exponential(mtbf, idx.size)
        survived = life >= length
        cycle[idx] += np.where(survived, length, life + restart)
        open_[idx[survived]] = False
    mean, variance = (float(x) for x in theory.renewal_cycle_moments(compute, write, mtbf, restart))
    assert abs(cycle.mean() - mean) <= Z_LIMIT * math.sqrt(variance / n)
    fourth = np.mean((cycle - cycle.mean()) ** 4)
    assert abs(cycle.var() - variance) <= Z_LIMIT * math.sqrt((fourth - variance**2) / n)


# --- failures while down (docs/model.md §1e): the formula against the engine ----------------


def engine_waste(compute, write, mtbf, restart, read, limit, n_fleets, horizon, seed, fail_while_down=True):
    """Waste and failure counts of one job alone over ``n_fleets`` independent failure draws of
    the engine (`cj.simulate`), with restart R and a recovery read r at the write limit b."""
    fleet = cj.Fleet(
        np.full((n_fleets, 1), compute),
        np.full((n_fleets, 1), write),
        mtbf=mtbf,
        restart=restart,
        recovery_read=read,
        write_limit=limit,
        fail_while_down=fail_while_down,
    )
    out = cj.simulate(
        fleet,
        cj.initial_state(fleet),
        n_fires=None,
        until=horizon,
        key=jax.random.key(seed),
        save=cj.SaveAt(trace=False, jobs=True),
    )
    assert bool(np.all(out.ok))
    return np.asarray(out.jobs.waste)[:, 0], np.asarray(out.jobs.failures)[:, 0]


def down_failure_z(compute, write, mtbf, restart, read, limit, n_fleets=1000, seed=0):
    """z of the engine's mean waste against the renewal formula with failures while down (at R
    plus the lone read r / b, and the write d / b), corrected for the finite horizon's bias
    (E N(H) = H/μ + (σ² − μ²)/(2μ²) + o(1), as `tests/test_failures.py` does), and z of the wrong
    model (M + R) and of the failure count (the clock never stops: E failures = H / M)."""
    rate = min(limit, 1.0)  # f = 1: a lone job writes and reads at min(b, f(1))
    write_time, recovery = write / rate, restart + read / rate
    horizon = 200 * (compute + write_time)
    waste, failures = engine_waste(compute, write, mtbf, restart, read, limit, n_fleets, horizon, seed)
    error = waste.std(ddof=1) / math.sqrt(n_fleets)

    def expected(fail_while_down):
        mean, variance = (
            float(x)
            for x in theory.renewal_cycle_moments(compute, write_time, mtbf, recovery, fail_while_down=fail_while_down)
        )
        return 1 - compute / mean - compute * (variance - mean**2) / (2 * mean**2 * horizon)

    count_z = (failures.mean() - horizon / mtbf) / math.sqrt(horizon / mtbf / n_fleets)
    return (waste.mean() - expected(True)) / error, (waste.mean() - expected(False)) / error, count_z


DOWN_CASES = [
    # compute, write, mtbf, restart, recovery read, write limit
    (10.0, 1.0, 20.0, 4.0, 0.0, 1.0),  # a restart of R/M = 0.2
    (10.0, 1.5, 20.0, 2.0, 3.0, 0.75),  # R = 2, then a read of 3 at b = 0.75 (4 long)
    (4.0, 0.5, 8.0, 6.0, 0.0, math.inf),  # R/M = 0.75: often hit while down
]


@pytest.mark.parametrize("case", DOWN_CASES)
def test_failures_while_down_match_the_renewal_formula(case):
    z, wrong, count_z = down_failure_z(*case)
    assert abs(z) < Z_LIMIT, (z, wrong)
    assert abs(wrong) > 2 * Z_LIMIT, (z, wrong)  # the test tells the two models apart
    assert abs(count_z) < Z_LIMIT, count_z


def test_failures_while_down_cycle_moments_match_direct_draws():
    # The cycle drawn directly: tries of L until one survives; after each failure a restart of R
    # that starts over at every failure within it.
    compute, write, mtbf, restart = 1.0, 0.2, 1.5, 0.4
    length, rng, n = compute + write, np.random.default_rng(4), 200000
    cycle, open_ = np.zeros(n), np.ones(n, bool)
    while open_.any():
        idx = np.flatnonzero(open_)
        life = rng.exponential(mtbf, idx.size)
        survived = life >= length
        cycle[idx] += np.where(survived, length, life)
        down = ~survived
        while down.any():
            j = np.flatnonzero(down)
            again = rng.exponential(mtbf, j.size)
            back = again >= restart
            cycle[idx[j]] += np.where(back, restart, again)
            down[j[back]] = False
        open_[idx[survived]] = False
    mean, variance = (
        float(x) for x in theory.renewal_cycle_moments(compute, write, mtbf, restart, fail_while_down=True)
    )
    assert mean == pytest.approx(mtbf * math.exp(restart / mtbf) * math.expm1(length / mtbf), rel=1e-12)
    assert abs(cycle.mean() - mean) <= Z_LIMIT * math.sqrt(variance / n)
    fourth = np.mean((cycle - cycle.mean()) ** 4)
    assert abs(cycle.var() - variance) <= Z_LIMIT * math.sqrt((fourth - variance**2) / n)
    # R = 0: the two models are one.
    for function in (theory.renewal_cycle_moments, theory.renewal_waste, theory.renewal_waste_bounds):
        args = (compute, write, mtbf, 0.0) + ((50.0,) if function is theory.renewal_waste_bounds else ())
        np.testing.assert_allclose(function(*args, fail_while_down=True), function(*args), rtol=1e-13)
    with pytest.raises(ValueError, match="fail_while_down must be True or False"):
        theory.renewal_waste(compute, write, mtbf, restart, fail_while_down="yes")


# --- the formula's own properties ------------------------------------------------------------


def test_renewal_limits_and_gradient():
    # No failures (M -> inf): waste -> d / (T + d). The formula's gradient is the finite one.
    assert float(theory.renewal_waste(3.0, 1.0, 1e12, 5.0)) == pytest.approx(0.25, rel=1e-9)
    assert float(theory.renewal_cycle_time(3.0, 1.0, 1e12, 0.0)) == pytest.approx(4.0, rel=1e-9)
    args = (1.3, 0.2, 2.5, 0.7)
    grad = jax.grad(theory.renewal_waste, argnums=(0, 1, 2, 3))(*args)
    for k in range(4):
        h = 1e-6
        up = list(args)
        up[k] += h
        down = list(args)
        down[k] -= h
        fd = (float(theory.renewal_waste(*up)) - float(theory.renewal_waste(*down))) / (2 * h)
        assert float(grad[k]) == pytest.approx(fd, rel=1e-7)
    batched = jax.jit(theory.renewal_waste)(jnp.array([1.0, 2.0]), 0.1, jnp.array([[5.0], [9.0]]), 0.0)
    assert batched.shape == (2, 2)


def exact_fraction(a):
    """The root x of log(1 − x) + x + a = 0 in (0, 1), by bisection in 60-digit decimals."""
    getcontext().prec = 60
    a, low, high = Decimal(a), Decimal(0), Decimal(1)
    for _ in range(200):
        mid = (low + high) / 2
        low, high = (mid, high) if (1 - mid).ln() + mid + a > 0 else (low, mid)
    return float((low + high) / 2)


@pytest.mark.parametrize("ratio", [1e-12, 1e-8, 1e-4, 0.01, 0.1, 0.19314718, 0.2, 0.5, 1.0, 3.0, 30.0])
def test_optimal_interval_solves_the_first_order_condition(ratio):
    mtbf = 7.0
    optimum = float(theory.optimal_interval(ratio * mtbf, mtbf))
    assert optimum == pytest.approx(mtbf * exact_fraction(ratio), rel=1e-13)
    # The restart time scales E[X] only: the minimiser does not move.
    assert float(theory.optimal_interval(ratio * mtbf, mtbf, 3.0)) == optimum


@pytest.mark.parametrize("write, mtbf, restart", [(0.01, 10.0, 0.0), (0.5, 2.0, 1.0), (3.0, 1.0, 0.2)])
def test_optimal_interval_is_the_argmin(write, mtbf, restart):
    optimum = float(theory.optimal_interval(write, mtbf, restart))
    best = float(theory.renewal_waste(optimum, write, mtbf, restart))
    grid = optimum * np.concatenate([1 - np.logspace(-6, -0.3, 20), 1 + np.logspace(-6, 0.5, 20)])
    assert (np.asarray(theory.renewal_waste(grid, write, mtbf, restart)) > best).all()
    # The derivative vanishes there (relative to the waste's curvature scale).
    slope = float(jax.grad(theory.renewal_waste)(optimum, write, mtbf, restart))
    assert abs(slope) * optimum <= 1e-9 * best
    # jax.grad of the optimum is the implicit-function derivative dT*/dd = (M − T*)/T*.
    derivative = float(jax.grad(theory.optimal_interval)(write, mtbf, restart))
    assert derivative == pytest.approx((mtbf - optimum) / optimum, rel=1e-12)


def test_young_and_daly_approach_the_optimum():
    ratios = np.logspace(-8, -1, 8)
    optimum = np.asarray(theory.optimal_interval(ratios, 1.0))
    young = np.abs(np.asarray(theory.young_interval(ratios, 1.0)) / optimum - 1)
    daly = np.abs(np.asarray(theory.daly_interval(ratios, 1.0)) / optimum - 1)
    # Young is first order: its relative error falls like √(2 d/M)/3 and vanishes as d/M -> 0.
    assert (np.diff(young) > 0).all()
    assert young == pytest.approx(np.sqrt(2 * ratios) / 3, rel=0.2)
    assert young[0] < 1e-4
    # Daly is higher order: closer than Young everywhere it applies (d < 2M), error O((d/M)^1.5).
    wide = np.array([1e-6, 1e-3, 0.1, 0.5, 1.0, 1.9])
    exact = np.asarray(theory.optimal_interval(wide, 1.0))
    assert (
        np.abs(np.asarray(theory.daly_interval(wide, 1.0)) - exact)
        < np.abs(np.asarray(theory.young_interval(wide, 1.0)) - exact)
    ).all()
    assert (daly <= ratios**1.5 + 1e-14).all()
    assert float(theory.daly_interval(3.0, 1.0)) == 1.0  # d >= 2M: T = M


def test_theory_docstring_examples():
    failures, _ = doctest.testmod(theory, verbose=False)
    assert failures == 0


# --- bad input -------------------------------------------------------------------------------

GOOD = dict(compute=1.0, write=0.1, mtbf=10.0, restart=0.5, horizon=100.0)
FUNCTIONS = {
    theory.renewal_waste: ("compute", "write", "mtbf", "restart"),
    theory.renewal_cycle_time: ("compute", "write", "mtbf", "restart"),
    theory.renewal_cycle_moments: ("compute", "write", "mtbf", "restart"),
    theory.renewal_waste_bounds: ("compute", "write", "mtbf", "restart", "horizon"),
    theory.optimal_interval: ("write", "mtbf", "restart"),
    theory.young_interval: ("write", "mtbf"),
    theory.daly_interval: ("write", "mtbf"),
}
CALLS = [(function, name) for function, names in FUNCTIONS.items() for name in names]


BAD = [0.0, -1.0, -math.inf, math.nan, math.inf, [1.0, -1.0], [1.0, math.nan], [math.nan, 1.0, 1.0]]


@pytest.mark.parametrize("function, name", CALLS)
@pytest.mark.parametrize("bad", BAD)
def test_bad_inputs_name_the_argument(function, name, bad):
    _check_bad_input(function, name, bad)


@pytest.mark.parametrize("function, name", CALLS)
@settings(max_examples=5)
@given(
    bad=st.one_of(
        st.floats(max_value=0.0),
        st.lists(st.sampled_from([1.0, -1.0, math.nan]), min_size=2).filter(lambda xs: not all(x == 1.0 for x in xs)),
    )
)
def test_bad_inputs_in_a_range_name_the_argument(function, name, bad):
    _check_bad_input(function, name, bad)


def _check_bad_input(function, name, bad):
    if name == "restart" and not isinstance(bad, list) and bad == 0.0:
        return  # R = 0 is allowed
    kwargs = {key: GOOD[key] for key in FUNCTIONS[function]}
    kwargs[name] = bad
    with pytest.raises(ValueError, match=rf"^{name} must be finite and"):
        function(**kwargs)


@pytest.mark.parametrize("bad", ["x", None, 1j])
def test_non_numbers_name_the_argument(bad):
    with pytest.raises(ValueError, match="^mtbf must be"):
        theory.renewal_waste(1.0, 0.1, bad, 0.0)
