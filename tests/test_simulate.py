"""`simulate`: exact simultaneity, claim 1 (pairwise neutrality), batching, jitter, bounded
loops and input validation. The oracle comparison lives in test_engine_oracle.py."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from reference import simulate_reference

import ckpt_jax as cj


def test_synchronous_fleet_stays_exactly_synchronous_500_cycles():
    # All jobs identical and in phase: every event switches all N together (docs/model.md §1).
    fleet = cj.Fleet(compute=np.full(6, 7.0), write=np.full(6, 2.5), cap=2.5, throughput="sqrt")
    trace = cj.simulate(fleet, cj.initial_state(fleet), n_fires=500)
    fire = np.asarray(trace.fire_times)
    assert bool(trace.ok)
    assert np.all(fire == fire[0])  # bit-for-bit, not approximately
    assert np.all(np.asarray(trace.end_times) == np.asarray(trace.end_times)[0])
    # One event per switch instant: K firings + K write ends, nothing spurious in between.
    assert int(trace.n_events) == 2 * 500
    # The synchronous period: compute at rate min(1, C/N), write at f(N)/N.
    period = 7.0 / (2.5 / 6) + 2.5 / (math.sqrt(6) / 6)
    np.testing.assert_allclose(np.diff(fire[0]), period, rtol=1e-12)


def test_several_jobs_finishing_together_switch_in_one_step():
    # Two groups of three identical-phase jobs plus a loner: groups switch as one event.
    fleet = cj.Fleet(compute=np.full(7, 10.0), write=np.full(7, 2.0))
    remaining = [10.0, 10.0, 10.0, 4.0, 4.0, 4.0, 7.0]
    trace = cj.simulate(fleet, cj.initial_state(fleet, remaining=remaining), n_fires=30)
    fire = np.asarray(trace.fire_times)
    assert np.all(fire[0:3] == fire[0]) and np.all(fire[3:6] == fire[3])
    # Three distinct phases => 3 firing instants and 3 write ends per cycle, nothing else:
    # exactly the exact reference's count of event instants (a split tie would add steps).
    _, _, instants = simulate_reference([10] * 7, [2] * 7, [0] * 7, remaining, 30, return_event_times=True)
    assert int(trace.n_events) == len(instants) == 6 * 30


@pytest.mark.parametrize("phase", [0, 1])
def test_remainders_within_ulps_of_the_work_switch_together_early_in_a_run(phase):
    # Two computing (phase 0) or writing (phase 1) jobs whose remainders differ by 4 ulps of
    # their work (T = d = 1) at t ~ 1e-6: below what float64 resolves on the work's scale, so
    # they switch in one step as if tied, although that gap is far above the clock's ulps
    # there (the work-scale half of the engine's snapping rule, docs/model.md §1).
    fleet = cj.Fleet(np.array([1.0, 1.0, 3.0]), np.array([1.0, 1.0, 0.5]))
    x, ulps = 2.0**-20, 4 * np.finfo(np.float64).eps
    tied = cj.simulate(fleet, cj.initial_state(fleet, phase=[phase, phase, 0], remaining=[x, x, 3.0]), 4)
    near = cj.simulate(fleet, cj.initial_state(fleet, phase=[phase, phase, 0], remaining=[x, x + ulps, 3.0]), 4)
    assert bool(near.ok) and int(near.n_events) == int(tied.n_events)
    fire = np.asarray(near.fire_times)
    np.testing.assert_array_equal(fire[0], fire[1])
    np.testing.assert_allclose(fire, np.asarray(tied.fire_times), rtol=1e-14)


PAIR_CASES = [
    # (cap, throughput): storage contention, power cap, both; several f and C.
    (None, "shared"),
    (None, "sqrt"),
    (None, "degrading"),
    (0.5, "linear"),
    (1.0, "linear"),
    (1.5, "linear"),
    (0.7, "shared"),
    (1.2, "sqrt"),
    (0.9, "degrading"),
    (1.0, "saturating"),
]


def _pair_batch(write_over_compute, n_offsets=9):
    """Identical pairs: every case in PAIR_CASES x offsets δ across the whole cycle."""
    compute, write = 10.0, 10.0 * write_over_compute
    cycle = compute + write
    offsets = (np.arange(n_offsets) + 0.37) / n_offsets * cycle
    compute_b, write_b, cap_b, table_b, positions = [], [], [], [], []
    for cap, throughput in PAIR_CASES:
        for delta in offsets:
            compute_b.append([compute, compute])
            write_b.append([write, write])
            cap_b.append(np.inf if cap is None else cap)
            table_b.append(cj.throughput_table(throughput, 2))
            positions.append([0.0, delta])
    return compute_b, write_b, cap_b, table_b, positions


@pytest.mark.parametrize("write_over_compute", [0.1, 0.45, 0.95])
def test_claim1_identical_pair_gap_is_constant(write_over_compute):
    compute_b, write_b, cap_b, table_b, positions = _pair_batch(write_over_compute)
    caps = np.array(cap_b)
    # Uncapped rows use a cap far above N, which never binds (exactly the uncapped rates).
    fleet = cj.Fleet(
        compute=compute_b, write=write_b, cap=np.where(np.isinf(caps), 1e6, caps), throughput=np.array(table_b)
    )
    state = cj.state_from_positions(fleet, positions)
    trace = cj.simulate(fleet, state, n_fires=200)
    assert bool(np.all(trace.ok))
    fire = np.asarray(trace.fire_times)
    gap = fire[:, 1, :] - fire[:, 0, :]
    period = np.diff(fire[:, 0, :], axis=-1).mean(axis=-1)
    spread = np.abs(gap - gap[:, :1]).max(axis=-1)
    assert np.all(spread <= 1e-12 * period), spread.max()


def test_claim1_fails_for_heterogeneous_jobs_under_binding_cap():
    # The test above could fail: heterogeneous T with a binding cap couples the pair (claim 8a).
    fleet = cj.Fleet(compute=[10.0, 9.0], write=[2.0, 2.0], cap=1.0, throughput="linear")
    trace = cj.simulate(fleet, cj.state_from_positions(fleet, [0.0, 5.0]), n_fires=50)
    fire = np.asarray(trace.fire_times)
    gap = fire[1] - fire[0]
    assert np.abs(np.diff(gap)).max() > 1e-3


def test_batch_equals_each_fleet_alone_with_padding():
    key = jax.random.key(7)
    compute = np.array([[10.0, 8.0, 9.0, 11.0], [5.0, 6.0, 1.0, 1.0], [3.0, 3.0, 3.0, 1.0]])
    write = np.array([[1.0, 2.0, 1.5, 0.5], [2.0, 1.0, 1.0, 1.0], [1.0, 1.0, 1.0, 1.0]])
    active = np.array([[True] * 4, [True, True, False, False], [True, True, True, False]])
    fleet = cj.Fleet(compute=compute, write=write, cap=[2.0, 1.5, 1.0], throughput="sqrt", active=active)
    state = cj.random_state(fleet, key)
    batch = cj.simulate(fleet, state, n_fires=8)
    assert bool(np.all(batch.ok))
    for b in range(3):
        n = int(active[b].sum())
        alone = cj.Fleet(compute=compute[b, :n], write=write[b, :n], cap=[2.0, 1.5, 1.0][b], throughput="sqrt")
        alone_state = cj.initial_state(alone, phase=state.phase[b, :n], remaining=state.remaining[b, :n])
        single = cj.simulate(alone, alone_state, n_fires=8)
        np.testing.assert_array_equal(np.asarray(batch.fire_times)[b, :n], np.asarray(single.fire_times))
        np.testing.assert_array_equal(np.asarray(batch.end_times)[b, :n], np.asarray(single.end_times))
        assert np.all(np.isnan(np.asarray(batch.fire_times)[b, n:]))


def test_jitter_reproducible_on_any_batch_layout():
    fleet = cj.Fleet(compute=np.full((4, 5), 10.0), write=np.full((4, 5), 2.0))
    state = cj.random_state(fleet, jax.random.key(0))
    key = jax.random.key(42)
    flat = cj.simulate(fleet, state, n_fires=10, jitter=0.8, key=key)
    again = cj.simulate(fleet, state, n_fires=10, jitter=0.8, key=key)
    np.testing.assert_array_equal(flat.fire_times, again.fire_times)
    # Same fleets as a (2, 2) batch: identical traces.
    square = cj.Fleet(compute=np.full((2, 2, 5), 10.0), write=np.full((2, 2, 5), 2.0))
    square_state = cj.State(state.phase.reshape(2, 2, 5), state.remaining.reshape(2, 2, 5))
    folded = cj.simulate(square, square_state, n_fires=10, jitter=0.8, key=key)
    np.testing.assert_array_equal(np.asarray(folded.fire_times).reshape(4, 5, 10), flat.fire_times)
    # One fleet alone, in a chunk that starts at its index: identical trace.
    alone = cj.simulate(
        fleet[2], cj.State(state.phase[2], state.remaining[2]), n_fires=10, jitter=0.8, key=key, fleet_offset=2
    )
    np.testing.assert_array_equal(alone.fire_times, np.asarray(flat.fire_times)[2])
    # A different key gives a different trace; the jitter actually changes periods.
    other = cj.simulate(fleet, state, n_fires=10, jitter=0.8, key=jax.random.key(43))
    assert not np.array_equal(other.fire_times, flat.fire_times)
    periods = np.diff(np.asarray(flat.fire_times), axis=-1)
    assert periods.std() > 0.1


def test_jitter_work_is_positive_and_has_the_right_spread():
    keys = jax.vmap(jax.random.fold_in, in_axes=(None, 0))(jax.random.key(1), jnp.arange(4000))
    work = jax.vmap(cj.loop.jitter_work, in_axes=(0, None, None, None))(keys, jnp.float64(1.0), jnp.float64(0.2), 3)
    assert float(work.min()) > 0
    assert abs(float(work.mean()) - 1.0) < 0.02 and abs(float(work.std()) - 0.2) < 0.02
    heavy = jax.vmap(cj.loop.jitter_work, in_axes=(0, None, None, None))(keys, jnp.float64(1.0), jnp.float64(5.0), 3)
    assert float(heavy.min()) > 0  # truncated: the work stays positive


def test_max_events_stops_with_ok_false_and_can_raise():
    fleet = cj.Fleet(compute=np.full((2, 3), 10.0), write=np.full((2, 3), 1.0))
    state = cj.initial_state(fleet, remaining=[[10.0, 7.0, 3.0], [10.0, 10.0, 10.0]])
    trace = cj.simulate(fleet, state, n_fires=10, max_events=25)
    # The staggered fleet needs ~60 events; the synchronous one needs 20.
    assert np.asarray(trace.ok).tolist() == [False, True]
    assert int(trace.status[0]) & cj.Status.MAX_EVENTS
    assert int(trace.n_events[0]) == 25
    with pytest.raises(RuntimeError, match="max_events"):
        cj.simulate(fleet, state, n_fires=10, max_events=25, throw=True)


def test_float32_runs_and_drift_is_the_dynamics_not_the_engine():
    kwargs = dict(compute=[10.0, 9.5, 8.0, 12.0], write=[1.0, 2.0, 1.5, 0.5], cap=2.0, throughput="sqrt")
    f64 = cj.Fleet(**kwargs)
    f32 = cj.Fleet(**kwargs, dtype=np.float32)
    positions = [0.0, 3.0, 5.5, 9.0]
    t64 = cj.simulate(f64, cj.state_from_positions(f64, positions), n_fires=100)
    t32 = cj.simulate(f32, cj.state_from_positions(f32, positions), n_fires=100)
    assert t32.fire_times.dtype == jnp.float32 and t64.fire_times.dtype == jnp.float64
    assert bool(t32.ok) and bool(t64.ok)
    fire64 = np.asarray(t64.fire_times)
    scale = fire64.max(axis=0)
    err32 = (np.abs(np.asarray(t32.fire_times, np.float64) - fire64) / scale).max(axis=0)
    # A float64 run whose launch is moved by one float32 ulp: the dynamics' own amplification.
    nudged = [0.0, 3.0 * (1 + 2**-23), 5.5, 9.0]
    t_nudged = cj.simulate(f64, cj.state_from_positions(f64, nudged), n_fires=100)
    err_nudge = (np.abs(np.asarray(t_nudged.fire_times) - fire64) / scale).max(axis=0)
    assert err32[:10].max() < 1e-6  # a few float32 ulps per event early on
    # Later drift (measured ~1e-3 at cycle 100) tracks the chaotic amplification of one ulp.
    assert np.all(err32 <= 20 * err_nudge + 1e-6)


def test_float64_without_x64_is_refused():
    jax.config.update("jax_enable_x64", False)
    try:
        with pytest.raises(ValueError, match="jax_enable_x64"):
            cj.Fleet(compute=[1.0, 1.0], write=[1.0, 1.0], dtype=np.float64)
        with pytest.warns(UserWarning, match="float32"):
            fleet = cj.Fleet(compute=np.array([1.0, 2.0]), write=np.array([1.0, 1.0]))
        assert fleet.dtype == jnp.float32
    finally:
        jax.config.update("jax_enable_x64", True)


# -- bad input: a ValueError naming the argument, before any tracing -------------------

BAD_NUMBERS = [0.0, -1.0, math.inf, -math.inf, math.nan]


@pytest.mark.parametrize("bad", BAD_NUMBERS)
@pytest.mark.parametrize("which", ["compute", "write"])
@pytest.mark.parametrize("index", [0, 1, 2])
def test_bad_work_is_rejected(bad, which, index):
    values = {"compute": [10.0, 10.0, 10.0], "write": [1.0, 1.0, 1.0]}
    values[which][index] = bad
    with pytest.raises(ValueError, match=which):
        cj.Fleet(**values)


@pytest.mark.parametrize("bad", BAD_NUMBERS)
def test_bad_cap_is_rejected(bad):
    with pytest.raises(ValueError, match="cap"):
        cj.Fleet(compute=[1.0, 1.0], write=[1.0, 1.0], cap=bad)


@pytest.mark.parametrize("bad", BAD_NUMBERS)
@pytest.mark.parametrize("n", [1, 2, 3])
def test_bad_throughput_is_rejected(bad, n):
    table = [1.0, 1.0, 1.0, 1.0]
    table[n] = bad
    with pytest.raises(ValueError, match="throughput"):
        cj.Fleet(compute=[1.0] * 3, write=[1.0] * 3, throughput=table)
    with pytest.raises(ValueError, match="throughput"):
        cj.Fleet(compute=[1.0] * 3, write=[1.0] * 3, throughput=lambda m: bad if m == n else 1.0)


def test_bad_shapes_are_rejected():
    with pytest.raises(ValueError, match="compute and write"):
        cj.Fleet(compute=[1.0, 1.0, 1.0], write=[1.0, 1.0])
    with pytest.raises(ValueError, match="throughput"):
        cj.Fleet(compute=[1.0, 1.0], write=[1.0, 1.0], throughput=[1.0, 1.0])
    with pytest.raises(ValueError, match="cap"):
        cj.Fleet(compute=np.ones((3, 2)), write=np.ones((3, 2)), cap=[1.0, 2.0])
    with pytest.raises(ValueError, match="compute or write must have a trailing job axis"):
        cj.Fleet(compute=5.0, write=1.0)  # one of the two may be a scalar, not both
    fleet = cj.Fleet(compute=np.ones((3, 2)), write=np.ones((3, 2)))
    with pytest.raises(ValueError, match="phase"):
        cj.initial_state(fleet, phase=np.zeros((2, 2), int))
    with pytest.raises(ValueError, match="remaining"):
        cj.initial_state(fleet, remaining=np.ones((3, 3)))


@pytest.mark.parametrize("phase", [-1, 2, 7, 0.5])
def test_bad_phase_is_rejected(phase):
    fleet = cj.Fleet(compute=[10.0, 10.0], write=[1.0, 1.0])
    with pytest.raises(ValueError, match="phase"):
        cj.initial_state(fleet, phase=[0, phase])


@pytest.mark.parametrize("phase", [0, 1])
@pytest.mark.parametrize("remaining", [0.0, -1.0, 10.5, math.inf, -math.inf, math.nan])
def test_remaining_out_of_range_is_rejected(phase, remaining):
    fleet = cj.Fleet(compute=[10.0, 10.0], write=[1.0, 1.0])
    with pytest.raises(ValueError, match="remaining"):
        cj.initial_state(fleet, phase=[0, phase], remaining=[5.0, remaining])


@pytest.mark.parametrize("phase", [0, 1])
@settings(max_examples=10)
@given(remaining=st.one_of(st.floats(max_value=0.0), st.floats(min_value=10.5)))
def test_remaining_out_of_range_is_rejected_on_the_whole_range(phase, remaining):
    fleet = cj.Fleet(compute=[10.0, 10.0], write=[1.0, 1.0])
    with pytest.raises(ValueError, match="remaining"):
        cj.initial_state(fleet, phase=[0, phase], remaining=[5.0, remaining])


@pytest.mark.parametrize("n_fires", [0, -3, 2.5, True])
def test_bad_n_fires_is_rejected(n_fires):
    fleet = cj.Fleet(compute=[10.0, 10.0], write=[1.0, 1.0])
    with pytest.raises(ValueError, match="n_fires"):
        cj.simulate(fleet, cj.initial_state(fleet), n_fires=n_fires)


def test_bad_options_are_rejected():
    fleet = cj.Fleet(compute=[10.0, 10.0], write=[1.0, 1.0])
    state = cj.initial_state(fleet)
    with pytest.raises(ValueError, match="max_events"):
        cj.simulate(fleet, state, n_fires=2, max_events=0)
    with pytest.raises(ValueError, match="jitter"):
        cj.simulate(fleet, state, n_fires=2, jitter=-1.0)
    with pytest.raises(ValueError, match="async_fraction"):
        cj.Fleet(compute=[1.0, 1.0], write=[1.0, 1.0], async_fraction=1.5)
    with pytest.raises(ValueError, match="delay"):
        cj.Fleet(compute=[1.0, 1.0], write=[1.0, 1.0], delay=-0.1)
