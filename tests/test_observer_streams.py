"""The gaps observer on arbitrary time-ordered firing streams equals `smallest_gap`.

The loops only ever show the observer firings in time order; this drives it directly
(`ckpt_jax.loop.GapsObserver`) with streams the engine rarely makes: jobs that overtake
each other by several cycles, many firings at one instant (in one iteration, as the
general engine switches, or one per iteration in any order, as the fast paths do),
padding jobs that never fire. Independent of the engine: the firing times are drawn here.
"""

import jax.numpy as jnp
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import ckpt_jax as cj
from ckpt_jax.loop import EventView, FinalView, GapsObserver, LoopInfo


def _fire_times(rng, n_jobs, n_cycles, spread, grid, padded):
    start = rng.uniform(0, 2, (n_jobs, 1))
    periods = rng.uniform(1 - spread, 1 + spread, (n_jobs, n_cycles))
    if grid:  # a job never fires twice at one instant: at least two grid steps apart
        periods = np.maximum(periods, 2 * grid)
    fire = start + np.cumsum(periods, axis=1) - periods[:, :1]
    if grid:  # snap to a grid: many firings share an instant
        fire = np.round(fire / grid) * grid
    if padded:
        fire[-1] = np.nan
    return fire


def _cut(rng, fire):
    """The stream up to a horizon after every job's first firing (a run stopped by until)."""
    first = np.nanmax(fire[:, 0])
    return np.where(fire > rng.uniform(first, np.nanmax(fire)), np.nan, fire)


def _fire_counts(fire):
    """(1, N) firings per job of a stream (its finite fire times: a prefix of the cycles)."""
    return jnp.asarray(np.sum(np.isfinite(fire), axis=1), jnp.int32)[None]


def _view(time, fired, cycle, n_active):
    width = fired.shape[0]
    zeros = jnp.zeros(1, jnp.int32)
    return EventView(
        time=jnp.array([time]),
        dt=jnp.zeros(1),
        advanced=jnp.ones(1, bool),
        running=jnp.ones(1, bool),
        n_writers=zeros,
        n_writers_after=zeros,
        fired=jnp.asarray(fired)[None],
        ended=jnp.zeros((1, width), bool),
        recorded_end=jnp.zeros((1, width), bool),
        job=jnp.arange(width, dtype=jnp.int32)[None],
        cycle=jnp.asarray(cycle, jnp.int32)[None],
        draining=None,
        waiting=None,
        first_fires=zeros,
        last_ends=zeros,
        n_active=n_active,
    )


def _init(observer, n_jobs, n_cycles, ordered=False):
    """The observer's state for one fleet of ``n_jobs`` jobs, ``n_cycles`` cycles."""
    return observer.init(
        LoopInfo(n_fleets=1, n_jobs=n_jobs, dtype=jnp.float64, gap_fires=n_cycles, one_switch=ordered, ordered=ordered)
    )


@settings(max_examples=20, deadline=None)
@given(
    seed=st.integers(0, 2**31),
    n_jobs=st.integers(2, 5),
    n_cycles=st.integers(2, 6),
    spread=st.sampled_from([0.0, 0.3, 0.9]),
    grid=st.sampled_from([None, 0.25]),
    padded=st.booleans(),
    per_instant=st.booleans(),
    cut=st.booleans(),
)
def test_gaps_observer_on_any_time_ordered_stream(seed, n_jobs, n_cycles, spread, grid, padded, per_instant, cut):
    rng = np.random.default_rng(seed)
    fire = _fire_times(rng, n_jobs, n_cycles, spread, grid, padded)
    if cut:
        fire = _cut(rng, fire)
    observer = GapsObserver()
    state = _init(observer, n_jobs, n_cycles)
    active = ~np.isnan(fire[:, 0])
    n_active = jnp.array([active.sum()], jnp.int32)
    jobs, cycles = np.nonzero(np.isfinite(fire))
    times = fire[jobs, cycles]
    for t in np.unique(times):
        at = np.nonzero(times == t)[0]
        if per_instant:  # the general engine: one iteration, one column per job
            fired, cycle = np.zeros(n_jobs, bool), np.zeros(n_jobs, np.int32)
            fired[jobs[at]], cycle[jobs[at]] = True, cycles[at]
            state = observer.update(state, _view(t, fired, cycle, n_active))
        else:  # the fast paths: one firing per iteration, any order within the instant
            for i in rng.permutation(at):
                state = observer.update(state, _view(t, np.ones(1, bool), [cycles[i]], n_active))
    final = FinalView(
        time=jnp.array([np.nanmax(fire)]),
        async_fraction=jnp.zeros(1),
        active=jnp.asarray(active)[None],
        horizon=None,
        n_writers=jnp.zeros(1, jnp.int32),
        fire_count=_fire_counts(fire),
        ok=jnp.ones(1, bool),
    )
    got = np.asarray(observer.finalize(state, final))[0]
    want = np.asarray(cj.analysis.smallest_gap(fire))
    np.testing.assert_array_equal(got, want)


def _gaps_of_stream(fire, stream, n_cycles):
    """The observer's gaps after a given stream of single firings [(time, cycle), ...]."""
    n_jobs = fire.shape[0]
    observer = GapsObserver()
    state = _init(observer, n_jobs, n_cycles)
    for t, c in stream:
        state = observer.update(state, _view(t, np.ones(1, bool), [c], jnp.array([n_jobs], jnp.int32)))
    final = FinalView(
        time=jnp.array([np.max(fire)]),
        async_fraction=jnp.zeros(1),
        active=jnp.ones((1, n_jobs), bool),
        horizon=None,
        n_writers=jnp.zeros(1, jnp.int32),
        fire_count=_fire_counts(fire),
        ok=jnp.ones(1, bool),
    )
    return np.asarray(observer.finalize(state, final))[0]


def test_a_cycle_that_ends_as_the_next_begins_has_a_zero_gap_in_either_order():
    # Job 1's first firing and job 0's second share t = 1: cycle 0 closes with a gap of
    # zero (no interleaving: `smallest_gap` compares strictly), whichever the loop sees first.
    fire = np.array([[0.0, 1.0, 2.5], [1.0, 2.0, 3.0]])
    want = np.asarray(cj.analysis.smallest_gap(fire))
    assert want.tolist()[:2] == [0.0, 0.5]
    for stream in (
        [(0.0, 0), (1.0, 1), (1.0, 0), (2.0, 1), (2.5, 2), (3.0, 2)],
        [(0.0, 0), (1.0, 0), (1.0, 1), (2.0, 1), (2.5, 2), (3.0, 2)],
    ):
        np.testing.assert_array_equal(_gaps_of_stream(fire, stream, 3), want)


def test_a_cycle_that_interleaves_with_the_one_before_is_nan():
    # Job 0 fires cycle 1 (t = 0.9) before job 1 fires cycle 0 (t = 1): cycles 0 and 1
    # interleave, so both are NaN although cycle 1 alone looks fine; cycle 2 is valid.
    fire = np.array([[0.0, 0.9, 2.0, 3.0], [1.0, 1.5, 2.5, 3.5]])
    want = np.asarray(cj.analysis.smallest_gap(fire))
    np.testing.assert_array_equal(want, [np.nan, np.nan, 0.5, np.nan])
    jobs, cycles = np.nonzero(np.isfinite(fire))
    stream = sorted(zip(fire[jobs, cycles], cycles))
    np.testing.assert_array_equal(_gaps_of_stream(fire, stream, 4), want)


def test_two_late_firings_of_one_cycle_at_one_instant_keep_the_cycle_before_valid():
    # Jobs 2 and 3 fire cycle 1 together at t = 7, after cycle 3 began (t = 6): cycle 1
    # interleaves (NaN) but is full, so cycle 0 keeps its gap of 1. One iteration with a
    # column per job, as the general engine switches an instant.
    fire = np.array(
        [[0.0, 4.0, 5.0, 6.0], [1.0, 4.5, 5.5, 6.5], [2.0, 7.0, np.nan, np.nan], [3.0, 7.0, np.nan, np.nan]]
    )
    want = np.asarray(cj.analysis.smallest_gap(fire))
    assert want[0] == 1.0 and np.all(np.isnan(want[1:]))
    observer = GapsObserver()
    state = _init(observer, 4, 4)
    jobs, cycles = np.nonzero(np.isfinite(fire))
    for t in np.unique(fire[jobs, cycles]):
        at = fire[jobs, cycles] == t
        fired, cycle = np.zeros(4, bool), np.zeros(4, np.int32)
        fired[jobs[at]], cycle[jobs[at]] = True, cycles[at]
        state = observer.update(state, _view(t, fired, cycle, jnp.array([4], jnp.int32)))
    final = FinalView(
        time=jnp.array([7.0]),
        async_fraction=jnp.zeros(1),
        active=jnp.ones((1, 4), bool),
        horizon=None,
        n_writers=jnp.zeros(1, jnp.int32),
        fire_count=_fire_counts(fire),
        ok=jnp.ones(1, bool),
    )
    np.testing.assert_array_equal(np.asarray(observer.finalize(state, final))[0], want)


@settings(max_examples=30, deadline=None)
@given(
    seed=st.integers(0, 2**31),
    n_jobs=st.integers(2, 5),
    n_cycles=st.integers(2, 6),
    grid=st.sampled_from([None, 0.25]),
    cut=st.booleans(),
)
def test_ordered_gaps_observer_on_cyclically_ordered_streams(seed, n_jobs, n_cycles, grid, cut):
    # The FIFO path's variant (``ordered``): identical periods, launch offsets within one
    # period, ties broken in ring order (cycle first), optionally cut at a horizon.
    rng = np.random.default_rng(seed)
    start = np.sort(rng.uniform(0, 1, n_jobs))
    fire = start[:, None] + np.arange(n_cycles)[None, :]
    if grid:
        fire = np.round(fire / grid) * grid
    if cut:  # a horizon after every job's first firing: the last cycles are incomplete
        fire[fire > rng.uniform(fire[:, 0].max(), fire.max())] = np.nan
    observer = GapsObserver()
    state = _init(observer, n_jobs, n_cycles, ordered=True)
    n_active = jnp.array([n_jobs], jnp.int32)
    jobs, cycles = np.nonzero(np.isfinite(fire))
    for i in np.lexsort((jobs, cycles, fire[jobs, cycles])):
        state = observer.update(state, _view(fire[jobs[i], cycles[i]], np.ones(1, bool), [cycles[i]], n_active))
    final = FinalView(
        time=jnp.array([np.nanmax(fire)]),
        async_fraction=jnp.zeros(1),
        active=jnp.ones((1, n_jobs), bool),
        horizon=None,
        n_writers=jnp.zeros(1, jnp.int32),
        fire_count=_fire_counts(fire),
        ok=jnp.ones(1, bool),
    )
    got = np.asarray(observer.finalize(state, final))[0]
    np.testing.assert_array_equal(got, np.asarray(cj.analysis.smallest_gap(fire)))


def test_the_streams_reach_every_case():
    # The family above covers overtaking by two or more cycles, ties across cycles and
    # interleaved cycles next to valid ones (checked here so that it cannot silently shrink).
    rng = np.random.default_rng(5)
    deep = ties = mixed = False
    for _ in range(200):
        fire = _fire_times(rng, 4, 6, 0.9, 0.25 if rng.random() < 0.5 else None, False)
        order = np.argsort(fire, axis=None, kind="stable")
        cycle = np.unravel_index(order, fire.shape)[1]
        deep |= bool(np.any(np.maximum.accumulate(cycle) - cycle >= 2))
        ties |= bool(np.any(np.isin(fire[:, 1:], fire[:, :-1])))
        gaps = np.asarray(cj.analysis.smallest_gap(fire))[:-1]
        mixed |= bool(np.isnan(gaps).any() and np.isfinite(gaps).any())
    assert deep and ties and mixed
