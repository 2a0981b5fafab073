"""Pairwise coupling functions (claim 8) and stagger lifetimes (claim 7)."""

import itertools

import jax
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ckpt_jax as cj
from ckpt_jax.coupling import coupling_function, stagger_lifetime

N_CYCLES = 3  # one shape for every call below, so the coupling loop compiles once
N_DELTAS = 11

_batched_section_map = jax.jit(jax.vmap(cj.maps.section_map, in_axes=(None, 0)))


def _deltas(length):
    return (np.arange(N_DELTAS) + 0.5) / N_DELTAS * length


def _section_map(fleet, deltas):
    u_next, info = _batched_section_map(fleet, np.asarray(deltas)[:, None])
    return np.asarray(u_next)[:, 0], np.asarray(info.status), np.asarray(info.return_time)


def _circle_distance(a, b, length):
    x = np.asarray(a) - np.asarray(b)
    return np.abs(x - length * np.round(x / length))


BASE_PAIRS = [
    # (compute, write, cap, throughput): identical and heterogeneous, capped or not.
    ([10.0, 10.0], [3.0, 3.0], None, "shared"),
    ([10.0, 10.0], [3.0, 3.0], 1.5, "shared"),
    ([10.0, 10.0], [4.0, 4.0], 0.5, "linear"),
    ([10.0, 7.0], [3.0, 2.0], 0.6, "linear"),
    ([10.0, 8.0], [3.0, 3.0], 1.5, "linear"),
    ([9.0, 6.0], [2.0, 3.0], 0.8, "sqrt"),
    ([9.0, 6.0], [2.0, 3.0], None, "degrading"),
]


@pytest.mark.parametrize("compute, write, cap, throughput", BASE_PAIRS)
def test_base_model_lag_equals_section_map(compute, write, cap, throughput):
    fleet = cj.Fleet(compute=compute, write=write, cap=cap, throughput=throughput)
    length = compute[1] + write[1]
    deltas = _deltas(length)
    result = coupling_function(fleet, deltas, N_CYCLES)
    expected, status, return_time = _section_map(fleet, deltas)
    assert np.all(status & ~8 == 0)  # ORDER_CHANGED may be flagged; the coordinates stay valid
    assert np.all(_circle_distance(result.lags[:, 1], expected, length) <= 1e-12 * length)
    np.testing.assert_allclose(result.return_times[:, 0], return_time, rtol=1e-13)
    np.testing.assert_array_equal(result.lags[:, 0], deltas)
    assert result.ok.all() and np.all(result.status == 0)
    # Wrapped onto the circle.
    assert np.all(np.abs(result.cycle_coupling) <= length / 2)
    assert np.all(np.abs(result.work_coupling) <= length / 2)


@pytest.mark.parametrize("compute, write, cap, throughput", BASE_PAIRS)
def test_base_model_pair_equals_uncoupled_pair(compute, write, cap, throughput):
    # For N = 2 the mixed phase gives each job its solo rates and a shared phase slows
    # both alike: the pair's map is the uncoupled one, identical or not (claims 1, 8a).
    fleet = cj.Fleet(compute=compute, write=write, cap=cap, throughput=throughput)
    length = compute[1] + write[1]
    result = coupling_function(fleet, _deltas(length), N_CYCLES)
    assert np.abs(result.cycle_coupling).max() <= 1e-12 * length
    if compute[0] == compute[1] and write[0] == write[1]:
        assert np.all(_circle_distance(result.solo_lags[:, 0], result.deltas, length) <= 1e-12 * length)
        assert np.abs(result.work_coupling).max() <= 1e-12 * length  # claim 1: P(δ) = δ


def test_work_drift_differs_only_where_solo_rates_differ():
    # With f(1) = 1, C >= 1 every job always progresses at the same work rate as its
    # partner; C < 1 throttles a lone computing job, so the constant work drift is wrong.
    deltas = _deltas(10.0)
    neutral = coupling_function(
        cj.Fleet(compute=[10.0, 7.0], write=[3.0, 3.0], cap=1.5, throughput="linear"), deltas, N_CYCLES
    )
    throttled = coupling_function(
        cj.Fleet(compute=[10.0, 7.0], write=[3.0, 3.0], cap=0.6, throughput="linear"), deltas, N_CYCLES
    )
    assert np.abs(neutral.work_coupling).max() <= 1e-12
    assert np.abs(throttled.work_coupling).max() > 0.1
    assert np.abs(throttled.coupling).max() <= 1e-12


@pytest.mark.parametrize(
    "variant",
    [dict(delay=2.0, cap=1.0), dict(delay=0.7, cap=0.6), dict(async_fraction=0.5, cap=1.5), dict(async_fraction=1.0)],
)
def test_return_times_match_simulate(variant):
    # Launches where job 1 computes are also plain `initial_state`s: the coupling loop
    # and `simulate` must then produce the same firing times (τ > 0: same history convention).
    fleet = cj.Fleet(compute=[6.0, 6.0], write=[2.0, 2.0], throughput="shared", **variant)
    deltas = np.linspace(0.3, 3.9, N_DELTAS)  # u <= T − α s d / f(1) for every variant above
    result = coupling_function(fleet, deltas, N_CYCLES)
    shape = (N_DELTAS, 2)
    batch = cj.Fleet(compute=np.full(shape, 6.0), write=np.full(shape, 2.0), throughput="shared", **variant)
    state = cj.initial_state(batch, phase=[1, 0], remaining=np.stack([np.full(N_DELTAS, 2.0), deltas], axis=1))
    trace = cj.simulate(batch, state, n_fires=N_CYCLES)
    assert bool(np.all(trace.ok))
    np.testing.assert_allclose(result.return_times, np.asarray(trace.fire_times)[:, 0, :], rtol=1e-12)


def test_uncoupled_history_keeps_identical_lags_and_is_a_no_op_at_zero_delay():
    deltas = _deltas(13.0)
    delayed = cj.Fleet(compute=[10.0, 10.0], write=[3.0, 3.0], cap=1.0, throughput="linear", delay=5.0)
    result = coupling_function(delayed, deltas, N_CYCLES, history="uncoupled")
    np.testing.assert_allclose(result.lags[:, 0], deltas, rtol=0, atol=1e-12)
    assert np.abs(result.coupling).max() > 0.1  # the delayed controller couples
    base = cj.Fleet(compute=[10.0, 10.0], write=[3.0, 3.0], cap=1.0, throughput="linear")
    a = coupling_function(base, deltas, N_CYCLES, history="uncoupled")
    b = coupling_function(base, deltas, N_CYCLES)
    np.testing.assert_array_equal(a.lags, b.lags)
    np.testing.assert_array_equal(a.return_times, b.return_times)


def test_delay_sign_depends_on_tau():
    # Claim 8b at two delays seen to differ (τ = 2 repels synchrony, τ = 8 attracts it).
    deltas = _deltas(13.0)
    signs = []
    for delay in (2.0, 8.0):
        fleet = cj.Fleet(compute=[10.0, 10.0], write=[3.0, 3.0], cap=1.0, throughput="linear", delay=delay)
        c = coupling_function(fleet, deltas, N_CYCLES, history="uncoupled").coupling
        signs.append(np.sign(c[deltas < 6.5].mean() - c[deltas > 6.5].mean()))
    assert signs == [1.0, -1.0]


@pytest.mark.parametrize("alpha, compute, write", [(0.5, 4.0, 1.0), (1.0, 1.0, 3.0), (0.25, 2.0, 3.0)])
def test_async_launch_is_a_solo_periodic_state(alpha, compute, write):
    # launch_carry puts job 1 where a job alone would be, including the waiting regime
    # (α d > T for (1.0, 1.0, 3.0)), so a job alone returns exactly to its lag: P0 = id.
    fleet = cj.Fleet(compute=[compute] * 2, write=[write] * 2, throughput="shared", async_fraction=alpha)
    length = compute + write
    result = coupling_function(fleet, _deltas(length), N_CYCLES)
    assert np.all(_circle_distance(result.solo_lags, result.lags[:, :-1], length) <= 1e-12 * length)
    np.testing.assert_allclose(
        result.solo_return_time, compute + (1 - alpha) * write if alpha * write < compute else write
    )


def test_async_short_writes_stay_neutral():
    fleet = cj.Fleet(compute=[4.0, 4.0], write=[1.0, 1.0], throughput="shared", async_fraction=0.5)
    result = coupling_function(fleet, _deltas(5.0), N_CYCLES)
    assert np.abs(result.cycle_coupling).max() <= 1e-12


def test_coupling_function_validates_input():
    pair = cj.Fleet(compute=[10.0, 10.0], write=[3.0, 3.0], cap=0.5)
    with pytest.raises(ValueError, match="N = 2"):
        coupling_function(cj.Fleet(compute=[1.0, 1.0, 1.0], write=[1.0, 1.0, 1.0]), [0.5])
    with pytest.raises(ValueError, match="batch shape"):
        coupling_function(cj.Fleet(compute=np.ones((2, 2)), write=np.ones((2, 2))), [0.5])
    with pytest.raises(ValueError, match="deltas"):
        coupling_function(pair, [0.0])
    with pytest.raises(ValueError, match="deltas"):
        coupling_function(pair, [13.5])
    with pytest.raises(ValueError, match="deltas"):
        coupling_function(pair, [[1.0]])
    with pytest.raises(ValueError, match="history"):
        coupling_function(pair, [1.0], history="burn-in")
    with pytest.raises(ValueError, match="C >= max w_i"):
        coupling_function(pair, [1.0], history="uncoupled")
    with pytest.raises(ValueError, match="n_cycles"):
        coupling_function(pair, [1.0], n_cycles=0)
    with pytest.raises(RuntimeError, match="max_events"):
        coupling_function(pair, _deltas(13.0), N_CYCLES, max_events=2)


# -- stagger_lifetime -----------------------------------------------------------


def _trace(windows):
    """(N, K) fire and end arrays from per-job lists of (start, end)."""
    fire = np.array([[w[0] for w in job] for job in windows], dtype=float)
    end = np.array([[w[1] for w in job] for job in windows], dtype=float)
    return fire, end


def test_lifetime_of_a_stagger_that_never_collides_is_censored():
    fire, end = _trace([[(0, 1), (4, 5), (8, 9)], [(2, 3), (6, 7), (10, 11)]])
    lifetime, censored = stagger_lifetime(fire, end)
    assert lifetime.shape == () and int(lifetime) == 3 and bool(censored)


def test_touching_windows_do_not_overlap():
    fire, end = _trace([[(0, 2), (4, 6), (8, 10)], [(2, 4), (6, 8), (10, 12)]])
    lifetime, censored = stagger_lifetime(fire, end)
    assert int(lifetime) == 3 and bool(censored)


def test_lifetime_counts_cycles_before_the_first_overlap():
    # Job 1 drifts towards job 0: its window 2 starts inside job 0's window 2.
    fire, end = _trace([[(0, 1), (4, 5), (8, 9), (12, 13)], [(2, 3), (5.5, 6.5), (8.5, 9.5), (12, 13)]])
    lifetime, censored = stagger_lifetime(fire, end)
    assert int(lifetime) == 2 and not bool(censored)
    # Simultaneous firings overlap at cycle 0.
    fire, end = _trace([[(0, 1), (4, 5)], [(0, 1), (4, 5)]])
    assert stagger_lifetime(fire, end)[0] == 0


def test_overlaps_after_the_observed_interval_are_censored():
    # Job 1's last window [9, 11) overlaps job 0's next (unrecorded) one only; job 0's
    # recorded windows end at 9, so nothing after t = 9 is known.
    fire, end = _trace([[(0, 1), (4, 5), (8, 9)], [(2, 3), (6, 7), (8.5, 9.5)]])
    lifetime, censored = stagger_lifetime(fire, end)
    assert int(lifetime) == 2 and not bool(censored)  # 8.5 < 9: seen
    fire, end = _trace([[(0, 1), (4, 5), (8, 9)], [(2, 3), (6, 7), (9.5, 10.5)]])
    fire_late = np.concatenate([fire, [[9.8, 20, 30]]])
    end_late = np.concatenate([end, [[10.2, 21, 31]]])
    lifetime, censored = stagger_lifetime(fire_late, end_late)
    assert int(lifetime) == 3 and bool(censored)  # overlap at 9.8 is after t_obs = 9


def test_nan_slots_are_ignored_and_batch_shape_kept():
    fire, end = _trace([[(0, 1), (4, 5), (8, 9)], [(2, 3), (6, 7), (10, 11)]])
    padded_fire = np.concatenate([fire, np.full((1, 3), np.nan)])
    padded_end = np.concatenate([end, np.full((1, 3), np.nan)])
    overlap_fire, overlap_end = _trace([[(0, 1), (4, 5), (8, 9)], [(0.5, 3), (6, 7), (10, 11)]])
    overlap_fire = np.concatenate([overlap_fire, np.full((1, 3), np.nan)])
    overlap_end = np.concatenate([overlap_end, np.full((1, 3), np.nan)])
    fires = np.stack([[padded_fire, overlap_fire]] * 3)
    ends = np.stack([[padded_end, overlap_end]] * 3)
    lifetime, censored = stagger_lifetime(fires, ends)
    assert lifetime.shape == (3, 2) and censored.shape == (3, 2)
    assert np.all(lifetime == [[3, 0]] * 3) and np.all(censored == [[True, False]] * 3)


def test_stagger_lifetime_validates_shapes():
    with pytest.raises(ValueError, match="shape"):
        stagger_lifetime(np.zeros((2, 3)), np.zeros((2, 4)))
    with pytest.raises(ValueError, match="shape"):
        stagger_lifetime(np.zeros(3), np.zeros(3))


def _brute_force(fire, end):
    n_jobs, n_fires = fire.shape
    t_obs = end[:, -1].min()
    best = (np.inf, n_fires)
    windows = [(fire[i, k], end[i, k], k) for i in range(n_jobs) for k in range(n_fires)]
    for (s1, e1, k1), (s2, e2, k2) in itertools.combinations(windows, 2):
        if s1 < e2 and s2 < e1:
            start, index = (s2, k2) if s2 > s1 else (s1, k1)
            if start < t_obs and start < best[0]:
                best = (start, index)
    return best[1], np.isinf(best[0])


@settings(max_examples=60, deadline=None)
@given(
    st.integers(2, 4),
    st.integers(1, 6),
    st.integers(0, 2**31 - 1),
)
def test_stagger_lifetime_matches_brute_force(n_jobs, n_fires, seed):
    rng = np.random.default_rng(seed)
    durations = rng.uniform(0.2, 1.5, (n_jobs, n_fires))
    gaps = rng.uniform(0.1, 3.0, (n_jobs, n_fires))
    fire = np.cumsum(durations + gaps, axis=1) - durations - rng.uniform(0, 3, (n_jobs, 1))
    end = fire + durations
    lifetime, censored = stagger_lifetime(fire, end)
    expected_lifetime, expected_censored = _brute_force(fire, end)
    assert int(lifetime) == expected_lifetime and bool(censored) == expected_censored


def test_stagger_lifetime_on_simulated_fleets():
    # Deterministic, uncapped and staggered: collision-free forever (claim 4), censored;
    # a synchronous launch overlaps at once.
    fleet = cj.Fleet(compute=np.full((2, 4), 7.0), write=np.full((2, 4), 1.0))
    staggered = 0.5 + 2.0 * np.arange(4)
    state = cj.initial_state(fleet, remaining=np.stack([staggered, np.full(4, 7.0)]))
    trace = cj.simulate(fleet, state, n_fires=50)
    lifetime, censored = stagger_lifetime(trace.fire_times, trace.end_times)
    assert lifetime.tolist() == [50, 0] and censored.tolist() == [True, False]


# -- job sizes and sharing policies (claim 9) -----------------------------------------------


def _sized_pair(sizes, cap, policy, compute=(10.0, 10.0), write=(3.0, 3.0), throughput="linear", storage="fair"):
    return cj.Fleet(
        compute=list(compute),
        write=list(write),
        cap=cap,
        throughput=throughput,
        size=list(sizes),
        power_policy=policy,
        storage_policy=storage,
    )


SIZED_PAIRS = [
    # (sizes, cap, power policy, storage policy, throughput)
    ([1.0, 2.0], 1.5, "maxmin", "fair", "linear"),
    ([1.0, 2.0], 1.5, "uniform", "fair", "linear"),
    ([2.0, 1.0], 2.5, "maxmin", "weighted", "shared"),
    ([1.0, 1.0], None, "maxmin", "fcfs", "shared"),
    ([1.0, 3.0], 2.0, "uniform", "fcfs", "sqrt"),
]


@pytest.mark.parametrize("sizes, cap, policy, storage, throughput", SIZED_PAIRS)
def test_sized_lag_equals_section_map(sizes, cap, policy, storage, throughput):
    # The launch state with sizes and fcfs is `section_carry`'s: one cycle of the coupling
    # loop is the section map (which follows the policies, docs/model.md §1b).
    fleet = _sized_pair(sizes, cap, policy, throughput=throughput, storage=storage)
    deltas = _deltas(13.0)
    result = coupling_function(fleet, deltas, N_CYCLES)
    expected, status, return_time = _section_map(fleet, deltas)
    smooth = (status & ~(8 | 128)) == 0  # ORDER_CHANGED / NOT_SMOOTH: the coordinates stay valid
    assert smooth.all()
    assert np.all(_circle_distance(result.lags[:, 1], expected, 13.0) <= 1e-12 * 13.0)
    np.testing.assert_allclose(result.return_times[:, 0], return_time, rtol=1e-13)


@pytest.mark.parametrize("policy", ["maxmin", "uniform"])
def test_unequal_sizes_under_a_binding_cap_couple(policy):
    # Claim 9a: with w = (1, 2) and C = 1.5 the shared-compute speeds are not one common
    # multiple of the solo speeds (1, 0.75), so the pair is not two solo jobs.
    fleet = _sized_pair([1.0, 2.0], 1.5, policy, compute=(10.0, 7.5))
    result = coupling_function(fleet, _deltas(10.5), N_CYCLES)
    np.testing.assert_allclose(result.solo_speed, [1.0, 0.75])
    np.testing.assert_allclose(result.solo_period, [13.0, 13.0])
    assert np.abs(result.coupling).max() > 0.05 * 10.5
    assert np.abs(result.phase_coupling).max() > 0.05 * 13.0


@pytest.mark.parametrize("policy", ["maxmin", "uniform"])
@pytest.mark.parametrize("sizes, cap", [([2.0, 2.0], 3.0), ([2.0, 2.0], 1.2), ([1.0, 2.0], 4.0), ([1.0, 2.0], None)])
def test_equal_sizes_or_a_cap_that_never_binds_stay_neutral(policy, sizes, cap):
    # Controls of claim 9a: equal sizes (cap binding on the pair, even on one job alone) and
    # a cap above Σ w give one common factor: no coupling in either coordinate.
    fleet = _sized_pair(sizes, cap, policy)
    result = coupling_function(fleet, _deltas(13.0), N_CYCLES)
    scale = float(result.solo_period[1])
    assert np.abs(result.cycle_coupling).max() < 1e-12 * 13.0
    assert np.abs(result.phase_coupling).max() < 1e-12 * scale


def test_uniform_is_neutral_while_every_job_alone_runs_at_full_speed():
    # Under "uniform" both computing jobs run at one speed; it is a common multiple of the
    # solo speeds whenever those are equal, i.e. C >= max w (here 2 <= 2.5 < 3 = Σ w).
    neutral = coupling_function(_sized_pair([1.0, 2.0], 2.5, "uniform"), _deltas(13.0), N_CYCLES)
    coupled = coupling_function(_sized_pair([1.0, 2.0], 2.5, "maxmin"), _deltas(13.0), N_CYCLES)
    assert np.abs(neutral.cycle_coupling).max() < 1e-12 * 13.0
    assert np.abs(coupled.cycle_coupling).max() > 0.05 * 13.0


def test_sized_solo_map_is_a_rotation_in_time_phase():
    # Job 1 alone (w = 2, C = 1.5: speed 0.75) turns its time phase by job 0's solo period.
    fleet = _sized_pair([1.0, 2.0], 1.5, "maxmin")  # equal work: solo periods 13 and 16.33
    result = coupling_function(fleet, _deltas(13.0), N_CYCLES)
    np.testing.assert_allclose(result.solo_period, [13.0, 3.0 + 10.0 / 0.75])
    assert result.solo_return_time == pytest.approx(13.0, rel=1e-14)
    solo_phase = cj.coupling.time_phase(result.solo_lags, 10.0, 1.0, 0.75)
    expected = result.phase_lags[:, :-1] - result.solo_return_time
    assert np.all(_circle_distance(solo_phase, expected, result.solo_period[1]) <= 1e-12 * 16.4)


@pytest.mark.parametrize("policy", ["maxmin", "uniform"])
def test_time_phase_coupling_matches_simulated_firing_lags(policy):
    # With f(n) = n and job 0 writing for d_0 = 6 after each firing, job 1 runs alone (at
    # its solo rates) until its next firing if that comes within the write: its time phase
    # at job 0's firing is then the simulated time to that firing. The coupling in time
    # phase is the finite difference of those lags plus R0.
    compute, write = (7.0, 7.5), (6.0, 3.0)  # solo periods 13 and 13
    fleet = _sized_pair([1.0, 2.0], 1.5, policy, compute=compute, write=write)
    deltas = np.linspace(0.15, 4.4, N_DELTAS)  # job 1 computing, fires at δ / 0.75 < d_0
    result = coupling_function(fleet, deltas, N_CYCLES)
    batch = cj.Fleet(
        compute=np.tile(compute, (N_DELTAS, 1)),
        write=np.tile(write, (N_DELTAS, 1)),
        cap=1.5,
        throughput="linear",
        size=[1.0, 2.0],
        power_policy=policy,
    )
    state = cj.initial_state(batch, phase=[1, 0], remaining=np.stack([np.full(N_DELTAS, 6.0), deltas], axis=1))
    trace = cj.simulate(batch, state, n_fires=4)
    assert bool(np.all(trace.ok))
    fire = np.asarray(trace.fire_times)
    job0 = np.concatenate([np.zeros((N_DELTAS, 1)), fire[:, 0, :1]], axis=1)  # job 0 fires at 0, then returns
    # Job 1's first firing after each of job 0's: the simulated lag in time.
    lag = np.stack([fire[m, 1, np.searchsorted(fire[m, 1], job0[m], side="right")] - job0[m] for m in range(N_DELTAS)])
    inside = np.all(lag <= write[0], axis=1)  # inside job 0's write: job 1 was alone until it fired
    assert inside.sum() >= 4
    np.testing.assert_allclose(result.phase_lags[inside, :2], lag[inside], rtol=0, atol=1e-12)
    finite_difference = lag[inside, 1] - lag[inside, 0] + result.solo_return_time
    np.testing.assert_allclose(
        result.phase_coupling[inside, 0],
        finite_difference - 13.0 * np.round(finite_difference / 13.0),
        rtol=0,
        atol=1e-12,
    )
    assert np.abs(result.phase_coupling[:, 0]).max() > 0.1


def test_fcfs_couples_identical_jobs():
    # Claim 9b: one writer at a time. A launch inside job 0's write (u in (T, T + d)) waits
    # for it, so after one cycle the windows touch (u = T + d − d = T: gap d); fair sharing
    # of the same f keeps every lag (claim 1).
    deltas = _deltas(13.0)
    fcfs = coupling_function(cj.Fleet(compute=[10.0, 10.0], write=[3.0, 3.0], storage_policy="fcfs"), deltas, N_CYCLES)
    fair = coupling_function(cj.Fleet(compute=[10.0, 10.0], write=[3.0, 3.0]), deltas, N_CYCLES)
    assert np.abs(fair.cycle_coupling).max() < 1e-12 * 13.0
    assert np.abs(fcfs.coupling).max() > 0.1 * 13.0
    overlapping = deltas > 10.0
    np.testing.assert_allclose(fcfs.lags[overlapping, 1], 10.0, rtol=0, atol=1e-12)
    apart = (deltas > 3.0) & (deltas < 10.0)
    assert np.abs(fcfs.coupling[apart]).max() < 1e-12


def test_uncoupled_history_refuses_throttled_solo_jobs_and_fcfs():
    with pytest.raises(ValueError, match="C >= max w_i = 2"):
        coupling_function(_sized_pair([1.0, 2.0], 1.5, "maxmin", throughput="shared"), [1.0], history="uncoupled")
    with pytest.raises(ValueError, match="fcfs"):
        coupling_function(
            cj.Fleet(compute=[10.0, 10.0], write=[3.0, 3.0], storage_policy="fcfs"), [1.0], history="uncoupled"
        )


@pytest.mark.parametrize(
    "policy, cap, factors",
    [
        ("maxmin", 0.8, (0.5, 0.5)),  # both throttled alone, equal power together: one factor
        ("maxmin", 1.5, (0.75, 0.5)),
        ("maxmin", 2.5, (1.0, 0.75)),
        ("maxmin", None, (1.0, 1.0)),
        ("uniform", 1.5, (0.5, 2 / 3)),
        ("uniform", 2.5, (5 / 6, 5 / 6)),  # max w <= C < Σ w: binds on the pair, one factor
    ],
)
def test_shared_slowdown_by_hand(policy, cap, factors):
    pair = cj.Fleet(compute=[10.0, 10.0], write=[3.0, 3.0], cap=cap, size=[1.0, 2.0], power_policy=policy)
    np.testing.assert_allclose(cj.coupling.shared_slowdown(pair), factors, rtol=1e-15)
    with pytest.raises(ValueError, match="N = 2"):
        cj.coupling.shared_slowdown(cj.Fleet(compute=[1.0] * 3, write=[1.0] * 3))
