"""`simulate`'s fast methods (FIFO and clock, `ckpt_jax._loops`) against the general engine:
same traces, same exact simultaneity, and `method="auto"` choosing them per fleet only where
they are exact."""

import jax
import numpy as np
import pytest

import ckpt_jax as cj
from ckpt_jax import _plan, sharding
from ckpt_jax._loops.fifo import ring_ranks
from ckpt_jax._plan import variants

THROUGHPUTS = [None, "sqrt", "degrading", "linear", "saturating"]


def _identical_batch(seed, n_fleets=24, n_slots=8, capped=False, throughput=None):
    """Random identical fleets of 2..n_slots active jobs (padded), random launches."""
    rng = np.random.default_rng(seed)
    n_active = rng.integers(2, n_slots + 1, n_fleets)
    active = np.arange(n_slots)[None, :] < n_active[:, None]
    compute = np.broadcast_to(rng.uniform(2.0, 12.0, (n_fleets, 1)), (n_fleets, n_slots))
    write = np.broadcast_to(rng.uniform(0.2, 5.0, (n_fleets, 1)), (n_fleets, n_slots))
    # Padding slots get other values: eligibility looks at active jobs only.
    compute = np.where(active, compute, 99.0)
    cap = rng.uniform(0.7, n_slots, n_fleets) if capped else None
    fleet = cj.Fleet(compute, write, cap=cap, throughput=throughput, active=active)
    return fleet, cj.random_state(fleet, jax.random.key(seed))


def _relative_error(a, b):
    """Largest |a - b| per fleet relative to the fleet's largest time; NaNs must match."""
    a, b = np.asarray(a), np.asarray(b)
    assert np.array_equal(np.isnan(a), np.isnan(b))
    scale = np.nanmax(np.abs(a), axis=(-2, -1))
    return np.nanmax(np.abs(a - b), axis=(-2, -1)) / scale


@pytest.mark.parametrize("capped", [False, True])
@pytest.mark.parametrize("throughput", THROUGHPUTS)
def test_fifo_matches_general_on_random_identical_fleets(throughput, capped):
    seed = 2 * THROUGHPUTS.index(throughput) + int(capped)
    fleet, state = _identical_batch(seed, capped=capped, throughput=throughput)
    n_fires = 12
    general = cj.simulate(fleet, state, n_fires, method="general")
    fifo = cj.simulate(fleet, state, n_fires, method="fifo")
    assert bool(np.all(general.ok)) and bool(np.all(fifo.ok))
    error = np.maximum(
        _relative_error(general.fire_times, fifo.fire_times), _relative_error(general.end_times, fifo.end_times)
    )
    # Random launches are chaotic (docs/model.md claim 5): rounding differences grow by up to
    # λ_max ~ N per cycle. Measure how far the general engine itself moves when its input
    # moves by one ulp (remaining work down, T up); where that exceeds 1e-13 the trajectory
    # cannot be compared to 1e-12 by anything in float64, so we ask for a few times that.
    nudged = []
    for which in ("remaining", "compute"):
        if which == "remaining":
            moved = cj.initial_state(fleet, state.phase, np.nextafter(np.asarray(state.remaining), 0))
            run = cj.simulate(fleet, moved, n_fires, method="general")
        else:
            bigger = cj.Fleet(
                np.nextafter(np.asarray(fleet.compute), np.inf),
                fleet.write,
                cap=fleet.cap if capped else None,
                throughput=np.asarray(fleet.throughput),
                active=fleet.active,
            )
            run = cj.simulate(bigger, state, n_fires, method="general")
        nudged.append(_relative_error(general.fire_times, run.fire_times))
    sensitivity = np.maximum(*nudged)
    well_conditioned = sensitivity < 1e-13
    assert well_conditioned.sum() >= len(error) // 2
    assert np.all(error[well_conditioned] <= 1e-12), error[well_conditioned].max()
    assert np.all((error <= 1e-12) | (error <= 10 * sensitivity)), np.max(error / np.maximum(sensitivity, 1e-300))
    np.testing.assert_array_equal(
        np.asarray(fifo.n_events)[well_conditioned], np.asarray(general.n_events)[well_conditioned]
    )


def _heterogeneous_batch(seed, n_fleets=16, n_slots=10, capped=False, throughput=None):
    """Random heterogeneous fleets of 2..n_slots active jobs (padded), random launches."""
    rng = np.random.default_rng(seed)
    n_active = rng.integers(2, n_slots + 1, n_fleets)
    active = np.arange(n_slots)[None, :] < n_active[:, None]
    compute = rng.uniform(2.0, 12.0, (n_fleets, n_slots))
    write = rng.uniform(0.2, 5.0, (n_fleets, n_slots))
    cap = rng.uniform(0.7, n_slots, n_fleets) if capped else None
    fleet = cj.Fleet(compute, write, cap=cap, throughput=throughput, active=active)
    return fleet, cj.random_state(fleet, jax.random.key(seed))


@pytest.mark.parametrize("capped, throughput", [(False, None), (True, "sqrt"), (True, "degrading")])
def test_clock_path_matches_general_on_random_heterogeneous_fleets(capped, throughput):
    """The clock path (virtual clocks, per-phase argmin) against the general engine: to
    1e-12 where a one-ulp input change moves the general engine by less than 1e-13. On
    chaotic (ill-conditioned) fleets the two round in different places, and one random
    one-ulp direction underestimates the worst one: there only within 1000x of it (the
    exact oracle in test_engine_oracle.py judges the clock path on its own)."""
    fleet, state = _heterogeneous_batch(7 + int(capped), capped=capped, throughput=throughput)
    n_fires = 10
    general = cj.simulate(fleet, state, n_fires, method="general")
    clock = cj.simulate(fleet, state, n_fires, method="clock")
    assert bool(np.all(general.ok)) and bool(np.all(clock.ok))
    error = np.maximum(
        _relative_error(general.fire_times, clock.fire_times), _relative_error(general.end_times, clock.end_times)
    )
    moved = cj.initial_state(fleet, state.phase, np.nextafter(np.asarray(state.remaining), 0))
    sensitivity = _relative_error(general.fire_times, cj.simulate(fleet, moved, n_fires, method="general").fire_times)
    well_conditioned = sensitivity < 1e-13
    assert well_conditioned.sum() >= 2
    assert np.all(error[well_conditioned] <= 1e-12), error[well_conditioned].max()
    assert np.all((error <= 1e-12) | (error <= 1000 * sensitivity)), np.max(error / np.maximum(sensitivity, 1e-300))


def test_clock_path_with_jitter_matches_general():
    fleet, state = _heterogeneous_batch(11, n_fleets=6, n_slots=9)
    key = jax.random.key(12)
    general = cj.simulate(fleet, state, 4, jitter=0.2, key=key, method="general")
    clock = cj.simulate(fleet, state, 4, jitter=0.2, key=key, method="clock")
    assert bool(np.all(clock.ok))
    # Four cycles: chaos has not yet amplified rounding beyond ~1e-12.
    assert np.all(_relative_error(general.fire_times, clock.fire_times) <= 1e-10)
    assert np.all(_relative_error(general.end_times, clock.end_times) <= 1e-10)


def test_clock_path_rejects_delay_and_async():
    for kw in (dict(delay=0.5), dict(async_fraction=0.3)):
        fleet = cj.Fleet(np.array([5.0, 6.0]), np.ones(2), **kw)
        with pytest.raises(ValueError, match="clock"):
            cj.simulate(fleet, cj.initial_state(fleet), 3, method="clock")
    fleet = cj.Fleet(np.full((2, 9), 5.0) + np.arange(9), np.ones((2, 9)), delay=np.array([0.0, 0.5]))
    np.testing.assert_array_equal(_plan.choose_paths(fleet, variants(fleet), "auto"), ["clock", "general"])


@pytest.mark.parametrize(
    "cap, throughput", [(None, "shared"), (None, "sqrt"), (1.3, "linear"), (0.8, "shared"), (1.2, "degrading")]
)
def test_fifo_matches_general_on_neutral_pairs_over_many_cycles(cap, throughput):
    # Identical pairs are neutral (claim 1), so rounding does not grow: 1e-12 over 200 cycles.
    offsets = np.linspace(0.3, 11.7, 9)
    fleet = cj.Fleet(np.full((9, 2), 9.0), np.full((9, 2), 3.0), cap=cap, throughput=throughput)
    state = cj.state_from_positions(fleet, np.stack([np.zeros(9), offsets], axis=1))
    general = cj.simulate(fleet, state, 200, method="general")
    fifo = cj.simulate(fleet, state, 200, method="fifo")
    assert np.all(_relative_error(general.fire_times, fifo.fire_times) <= 1e-12)
    assert np.all(_relative_error(general.end_times, fifo.end_times) <= 1e-12)
    np.testing.assert_array_equal(np.asarray(fifo.n_events), np.asarray(general.n_events))


@pytest.mark.parametrize("cap, throughput", [(None, None), (2.5, "sqrt"), (4.0, "degrading")])
def test_synchronous_fleet_stays_exactly_synchronous(cap, throughput):
    fleet = cj.Fleet(compute=np.full(6, 7.0), write=np.full(6, 2.5), cap=cap, throughput=throughput)
    state = cj.initial_state(fleet)
    fifo = cj.simulate(fleet, state, n_fires=300, method="fifo")
    general = cj.simulate(fleet, state, n_fires=300, method="general")
    fire, end = np.asarray(fifo.fire_times), np.asarray(fifo.end_times)
    assert bool(fifo.ok)
    assert np.all(fire == fire[0]) and np.all(end == end[0])  # bit for bit
    assert int(fifo.n_events) == 2 * 300  # every instant switches all six at once
    np.testing.assert_allclose(fire, np.asarray(general.fire_times), rtol=1e-12)


def test_groups_finishing_together_switch_at_one_instant():
    fleet = cj.Fleet(compute=np.full(7, 10.0), write=np.full(7, 2.0))
    remaining = [10.0, 10.0, 10.0, 4.0, 4.0, 4.0, 7.0]
    state = cj.initial_state(fleet, remaining=remaining)
    fifo = cj.simulate(fleet, state, n_fires=30, method="fifo")
    general = cj.simulate(fleet, state, n_fires=30, method="general")
    fire = np.asarray(fifo.fire_times)
    assert np.all(fire[0:3] == fire[0]) and np.all(fire[3:6] == fire[3])
    # Three phases: 3 firing instants and 3 write ends per cycle, no split ties.
    assert int(fifo.n_events) == int(general.n_events) == 6 * 30
    np.testing.assert_allclose(fire, np.asarray(general.fire_times), rtol=1e-12)


def test_eligibility_is_decided_per_fleet():
    compute = np.array([[5.0, 5.0, 5.0], [5.0, 6.0, 5.0], [4.0, 4.0, 1.0], [3.0, 3.0, 3.0]])
    active = np.array([[True] * 3, [True] * 3, [True, True, False], [True] * 3])
    fleet = cj.Fleet(compute, np.ones((4, 3)), active=active, delay=[0.0, 0.0, 0.0, 0.5])
    np.testing.assert_array_equal(_plan.fifo_eligible(fleet, variants(fleet)), [True, False, True, False])
    assert not bool(np.all(_plan.fifo_eligible(fleet, variants(fleet))))
    assert not _plan.fifo_eligible(fleet, variants(fleet, 0.1)).any()
    async_fleet = cj.Fleet(np.full(3, 5.0), np.ones(3), async_fraction=0.5)
    assert not bool(np.all(_plan.fifo_eligible(async_fleet, variants(async_fleet))))
    same = cj.Fleet(np.full(3, 5.0), np.ones(3))
    assert bool(np.all(_plan.fifo_eligible(same, variants(same, 0.0))))


def test_auto_decides_per_fleet_and_matches_each_fleet_alone():
    # One batch mixing: identical with 9 jobs (FIFO), heterogeneous (clock), identical
    # with 5 active jobs (general: below FIFO_MIN_JOBS), identical with 8 (FIFO).
    rng = np.random.default_rng(3)
    compute = np.stack([np.full(9, 6.0), rng.uniform(4, 8, 9), np.full(9, 4.0), np.full(9, 5.0)])
    write = np.stack([np.full(9, 0.5), rng.uniform(0.3, 0.8, 9), np.full(9, 1.0), np.full(9, 0.4)])
    active = np.ones((4, 9), bool)
    active[2, 5:] = False
    active[3, 8:] = False
    fleet = cj.Fleet(compute, write, cap=7.2, throughput="sqrt", active=active)
    state = cj.random_state(fleet, jax.random.key(4))
    batch = cj.simulate(fleet, state, 20)
    expected = ["fifo", "clock", "general", "fifo"]
    assert _plan.FIFO_MIN_JOBS == 8
    for b in range(4):
        alone_state = cj.State(state.phase[b], state.remaining[b])
        alone = cj.simulate(fleet[b], alone_state, 20)
        by_method = cj.simulate(fleet[b], alone_state, 20, method=expected[b])
        for got in (alone, by_method):
            np.testing.assert_array_equal(np.asarray(batch.fire_times)[b], np.asarray(got.fire_times))
            np.testing.assert_array_equal(np.asarray(batch.end_times)[b], np.asarray(got.end_times))
            assert int(np.asarray(batch.n_events)[b]) == int(got.n_events)
    assert np.asarray(batch.fire_times).shape == (4, 9, 20) and bool(np.all(batch.ok))


def test_fifo_rejects_ineligible_fleets_and_unknown_methods():
    fleet = cj.Fleet(np.array([5.0, 6.0]), np.ones(2))
    state = cj.initial_state(fleet)
    with pytest.raises(ValueError, match="fifo"):
        cj.simulate(fleet, state, 3, method="fifo")
    with pytest.raises(ValueError, match="method"):
        cj.simulate(fleet, state, 3, method="fastest")


@pytest.mark.parametrize("method", ["fifo", "clock"])
def test_fast_path_event_budget_stops_with_ok_false(method):
    fleet = cj.Fleet(np.full(4, 5.0), np.ones(4))
    state = cj.state_from_positions(fleet, [0.0, 1.5, 3.0, 4.5])
    trace = cj.simulate(fleet, state, 10, method=method, max_events=7)
    assert not bool(trace.ok) and int(trace.status) & cj.Status.MAX_EVENTS
    assert int(trace.n_events) == 7
    # It stops after exactly those 7 events: the general engine's partial trace, bit for bit.
    general = cj.simulate(fleet, state, 10, method="general", max_events=7)
    np.testing.assert_array_equal(np.asarray(trace.fire_times), np.asarray(general.fire_times))
    np.testing.assert_array_equal(np.asarray(trace.end_times), np.asarray(general.end_times))
    # The budget is exact: the full run's event count suffices, one less does not.
    needed = int(cj.simulate(fleet, state, 10, method="general").n_events)
    assert bool(cj.simulate(fleet, state, 10, method=method, max_events=needed).ok)
    short = cj.simulate(fleet, state, 10, method=method, max_events=needed - 1)
    assert not bool(short.ok) and int(short.n_events) == needed - 1
    with pytest.raises(RuntimeError, match="max_events"):
        cj.simulate(fleet, state, 10, method=method, max_events=7, throw=True)


def test_fifo_leading_batch_axes_and_float32():
    compute = np.full((2, 3, 4), 5.0)
    fleet = cj.Fleet(compute, np.full((2, 3, 4), 0.75), cap=3.0, throughput="sqrt", dtype=np.float32)
    state = cj.random_state(fleet, jax.random.key(1))
    fifo = cj.simulate(fleet, state, 6, method="fifo")
    general = cj.simulate(fleet, state, 6, method="general")
    assert fifo.fire_times.shape == (2, 3, 4, 6) and fifo.fire_times.dtype == np.float32
    assert bool(np.all(fifo.ok))
    np.testing.assert_allclose(np.asarray(fifo.fire_times), np.asarray(general.fire_times), rtol=1e-3)


@pytest.mark.parametrize("progress", [False, True])
def test_cpu_blocks_of_fleets_change_nothing(monkeypatch, progress):
    # Blocks of 3 fleets (the last one padded), with and without the per-block progress
    # bar, give the same bits as the whole batch at once, on both fast paths.
    for compute in (np.full((7, 9), 5.0), np.full((7, 9), 5.0) + 0.1 * np.arange(9)):
        fleet = cj.Fleet(compute, np.ones((7, 9)), cap=6.5)
        state = cj.random_state(fleet, jax.random.key(1))
        save = cj.SaveAt(writers=True, gaps=True, jobs=True)  # observers too
        monkeypatch.setattr(sharding, "CPU_MIN_BLOCK", 100)
        whole = cj.simulate(fleet, state, 5, save=save)
        monkeypatch.setattr(sharding, "CPU_BLOCK_BYTES", 1)
        monkeypatch.setattr(sharding, "CPU_MIN_BLOCK", 3)
        blocks = cj.simulate(fleet, state, 5, progress=progress, save=save)
        for a, b in zip(jax.tree_util.tree_leaves(whole), jax.tree_util.tree_leaves(blocks)):
            np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


@pytest.mark.parametrize("n_jobs", [8, 100])  # O(N²) comparisons / one-key sort
def test_ring_ranks_are_a_stable_lexsort(n_jobs):
    import jax.numpy as jnp

    rng = np.random.default_rng(n_jobs)
    group = rng.integers(0, 3, (40, n_jobs))
    remaining = rng.choice([0.0, 0.5, 1.0, 2.0, 1e-300, 3.3, np.nextafter(3.3, 4)], (40, n_jobs))
    got = np.asarray(ring_ranks(jnp.asarray(group), jnp.asarray(remaining)))
    key = np.where(group == 2, 0.0, remaining)  # padding (group 2) in index order
    order = np.array([np.lexsort((np.arange(n_jobs), key[b], group[b])) for b in range(40)])
    np.testing.assert_array_equal(got, np.argsort(order, axis=1))
