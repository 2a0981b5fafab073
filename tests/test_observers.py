"""Observers (`SaveAt`) accumulated inside every loop equal their trace-derived counterparts.

Each observer is checked against the statistic computed afterwards from the same run's
trace (`smallest_gap`, `writer_distribution`, `writer_excursions`, `observed_interval`,
`writer_count`, the phase times), on random fleets, on every path, with and without a
horizon (`until`). Shapes are fixed per path so each path compiles once.
"""

from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ckpt_jax as cj

ALL = cj.SaveAt(trace=True, writers=True, gaps=True, jobs=True)
N_JOBS, N_FLEETS, K = 8, 3, 8
RTOL = 1e-12


def _fleets(path, seed, capped, padded):
    rng = np.random.default_rng(seed)
    shape = (N_FLEETS, N_JOBS)
    if path == "fifo":
        compute = np.broadcast_to(rng.uniform(2, 10, (N_FLEETS, 1)), shape)
        write = np.broadcast_to(rng.uniform(0.2, 2, (N_FLEETS, 1)), shape)
    else:
        compute, write = rng.uniform(2, 10, shape), rng.uniform(0.2, 2, shape)
    active = np.ones(shape, bool)
    if padded:
        active[0, -2:] = False
    cap = rng.uniform(2, 6, N_FLEETS) if capped else None
    kwargs = {}
    if path == "general":  # the general engine also serves the delayed controller and async writes
        kwargs = dict(delay=np.array([0.0, 0.4, 0.0]), async_fraction=np.array([0.0, 0.0, 0.5]))
    return cj.Fleet(compute, write, cap=cap, throughput="sqrt", active=active, **kwargs)


def _rel_close(got, want):
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=RTOL, atol=RTOL * 100, equal_nan=True)


def _count_on(fire, end, t_start, t_stop):
    """(time at each count, max count) of one fleet's trace on [t_start, t_stop]."""
    times, counts = cj.analysis.writer_count(fire, end)
    edges = np.concatenate([[-np.inf], times, [np.inf]])
    values = np.concatenate([[0], counts])
    spent = np.zeros(N_JOBS + 1)
    most = -1
    for left, right, value in zip(edges[:-1], edges[1:], values):
        overlap = min(right, t_stop) - max(left, t_start)
        if overlap > 0:
            spent[value] += overlap
            most = max(most, value)
    return spent, most


def _check_against_trace(fleet, trace, horizon=None):
    fire, end = np.asarray(trace.fire_times), np.asarray(trace.end_times)
    if horizon is not None:  # writes still open at the horizon count up to it
        end = np.where(np.isfinite(fire) & np.isnan(end), horizon, end)
    assert np.all(np.asarray(trace.ok))
    np.testing.assert_array_equal(np.asarray(trace.gaps), np.asarray(cj.analysis.smallest_gap(fire)))
    t_start, t_stop = cj.analysis.observed_bounds(fire, end)
    if horizon is not None:
        t_start = np.max(np.where(np.asarray(fleet.active), fire[..., 0], -np.inf), axis=-1)
        t_stop = np.full_like(t_start, horizon)
    _rel_close(trace.writers.window, np.stack([t_start, t_stop], -1))
    levels = list(range(N_JOBS + 1))
    for b in range(fire.shape[0]):
        spent, most = _count_on(fire[b], end[b], t_start[b], t_stop[b])
        _rel_close(trace.writers.time[b], spent)
        assert int(trace.writers.max[b]) == most
    if horizon is None:
        np.testing.assert_array_equal(trace.writers.excursions, cj.analysis.writer_excursions(fire, end, levels))
        _rel_close(
            trace.writers.time / np.diff(trace.writers.window, axis=1), cj.analysis.writer_distribution(fire, end)
        )


@settings(max_examples=6, deadline=None)
@given(
    path=st.sampled_from(["general", "clock", "fifo"]),
    seed=st.integers(0, 2**31),
    capped=st.booleans(),
    padded=st.booleans(),
)
def test_observers_equal_the_trace_statistics(path, seed, capped, padded):
    fleet = _fleets(path, seed, capped, padded)
    state = cj.random_state(fleet, jax.random.key(seed % 1000))
    trace = cj.simulate(fleet, state, K, method=path, save=ALL)
    _check_against_trace(fleet, trace)


@settings(max_examples=6, deadline=None)
@given(path=st.sampled_from(["general", "clock", "fifo"]), seed=st.integers(0, 2**31), capped=st.booleans())
def test_observers_up_to_a_horizon_equal_the_trace(path, seed, capped):
    # Launched computing (no write hides in the state at t = 0) and K large enough that
    # the trace holds every firing before the horizon: phase times are then in the trace.
    fleet = _fleets(path, seed, capped, padded=False)
    rng = np.random.default_rng(seed)
    state = cj.initial_state(
        fleet, phase=0, remaining=np.asarray(fleet.compute) * rng.uniform(0.01, 1, (N_FLEETS, N_JOBS))
    )
    horizon = 40.0
    trace = cj.simulate(fleet, state, 40, method=path, save=ALL, until=horizon)
    np.testing.assert_array_equal(np.asarray(trace.time), horizon)
    fire, end = np.asarray(trace.fire_times), np.asarray(trace.end_times)
    assert np.isnan(fire[..., -1]).all()  # K was enough
    _check_against_trace(fleet, trace, horizon)
    started = np.isfinite(fire)
    spans = np.where(started, np.where(np.isfinite(end), end, horizon) - fire, 0).sum(axis=-1)
    _rel_close(trace.jobs.write_time, spans)
    np.testing.assert_array_equal(trace.jobs.writes, np.isfinite(end).sum(axis=-1))
    completed = np.where(np.isfinite(end), end - fire, 0).sum(axis=-1)
    _rel_close(trace.jobs.completed_write_time, completed)
    alpha = np.asarray(fleet.async_fraction)[:, None]
    _rel_close(np.where(alpha > 0, np.nan, trace.jobs.compute_time), np.where(alpha > 0, np.nan, horizon - spans))


@settings(max_examples=6, deadline=None)
@given(path=st.sampled_from(["general", "clock", "fifo"]), seed=st.integers(0, 2**31), capped=st.booleans())
def test_completed_write_time_is_the_traced_writes(path, seed, capped):
    # Random launches (writes in progress at t = 0, which count in write_time only) up to
    # a horizon (writes open there, likewise): completed writes are the traced ones.
    fleet = _fleets(path, seed, capped, padded=False)
    state = cj.random_state(fleet, jax.random.key(seed % 1000))
    trace = cj.simulate(fleet, state, 40, method=path, save=ALL, until=40.0)
    fire, end = np.asarray(trace.fire_times), np.asarray(trace.end_times)
    assert np.isnan(fire[..., -1]).all()  # K was enough
    _rel_close(trace.jobs.completed_write_time, np.where(np.isfinite(end), end - fire, 0).sum(axis=-1))
    assert np.all(np.asarray(trace.jobs.completed_write_time) <= np.asarray(trace.jobs.write_time) * (1 + RTOL))


@pytest.mark.parametrize("path", ["general", "clock", "fifo"])
def test_without_a_trace_the_observers_are_the_same(path):
    fleet = _fleets(path, 7, True, True)
    state = cj.random_state(fleet, jax.random.key(7))
    full = cj.simulate(fleet, state, K, method=path, save=ALL)
    lean = cj.simulate(fleet, state, K, method=path, save=cj.SaveAt(trace=False, writers=True, gaps=True, jobs=True))
    assert lean.fire_times is None and lean.end_times is None
    for name in ("writers", "gaps", "jobs", "ok", "status", "n_events", "time"):
        for a, b in zip(jax.tree_util.tree_leaves(getattr(full, name)), jax.tree_util.tree_leaves(getattr(lean, name))):
            np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    # A horizon without n_fires: no trace, no gaps.
    horizon = cj.simulate(
        fleet, state, None, method=path, until=30.0, save=cj.SaveAt(trace=False, writers=True, jobs=True)
    )
    assert np.all(np.asarray(horizon.ok)) and horizon.gaps is None
    np.testing.assert_array_equal(np.asarray(horizon.time), 30.0)


@pytest.mark.parametrize("path", ["general", "clock", "fifo"])
def test_observers_of_synchronous_groups_equal_the_trace(path):
    # Groups of jobs that switch at one instant: rises netted over many switches at one
    # time, gaps of zero, writes that end as others start.
    compute, write = np.full((N_FLEETS, N_JOBS), 6.0), np.full((N_FLEETS, N_JOBS), 1.5)
    fleet = cj.Fleet(compute, write, cap=np.array([3.0, 9.0, 2.5]), throughput="sqrt")
    groups = np.array([[1.0] * 4 + [0.5] * 4, [1.0] * 8, [1.0, 1.0, 0.25, 0.25, 0.25, 0.5, 0.5, 0.5]])
    state = cj.initial_state(fleet, phase=0, remaining=compute * groups)
    trace = cj.simulate(fleet, state, K, method=path, save=ALL)
    _check_against_trace(fleet, trace)
    assert np.any(np.asarray(trace.gaps) == 0)  # simultaneous firings were seen


@pytest.mark.parametrize("path", ["general", "clock", "fifo"])
def test_a_group_that_fires_as_another_ends_its_write_is_no_excursion(path):
    # Half the jobs end their writes at the very instant the other half fire (exactly, in
    # floats: 1.5 / (sqrt(4) / 4) = 3 = T), every cycle: n_w stays 4, the switches at each
    # instant net to zero rises, but pass through every level from 0 to 4.
    compute, write = np.full((1, 8), 3.0), np.full((1, 8), 1.5)
    fleet = cj.Fleet(compute, write, throughput="sqrt")
    state = cj.initial_state(fleet, phase=np.array([[1] * 4 + [0] * 4]), remaining=np.array([[1.5] * 4 + [3.0] * 4]))
    trace = cj.simulate(fleet, state, K, method=path, save=ALL)
    _check_against_trace(fleet, trace)
    assert np.asarray(trace.writers.excursions)[0].tolist() == [0] * 9
    assert np.asarray(trace.writers.time)[0, 4] > 0 and np.asarray(trace.writers.max)[0] == 4


@pytest.mark.parametrize("policies", [("maxmin", "weighted"), ("uniform", "fcfs")])
def test_observers_of_sized_fleets_equal_the_trace(policies):
    # Job sizes and sharing policies (general engine): the observers see the same events.
    rng = np.random.default_rng(11)
    shape = (N_FLEETS, N_JOBS)
    fleet = cj.Fleet(
        rng.uniform(2, 10, shape),
        rng.uniform(0.2, 2, shape),
        cap=rng.uniform(2, 6, N_FLEETS),
        throughput="sqrt",
        size=rng.choice([1.0, 2.0, 4.0], shape),
        power_policy=policies[0],
        storage_policy=policies[1],
    )
    state = cj.random_state(fleet, jax.random.key(11))
    trace = cj.simulate(fleet, state, K, save=ALL)
    _check_against_trace(fleet, trace)


@pytest.mark.parametrize("path", ["general", "clock"])
def test_with_jitter_the_observers_equal_the_trace(path):
    fleet = _fleets("clock", 3, True, False)
    state = cj.random_state(fleet, jax.random.key(3))
    trace = cj.simulate(fleet, state, K, method=path, save=ALL, jitter=0.8, key=jax.random.key(4))
    _check_against_trace(fleet, trace)


def test_a_run_that_stops_early_reports_nan_observers():
    fleet = _fleets("clock", 1, False, False)
    trace = cj.simulate(fleet, cj.random_state(fleet, jax.random.key(1)), K, method="clock", save=ALL, max_events=20)
    assert not np.any(np.asarray(trace.ok))
    assert np.isnan(np.asarray(trace.writers.time)).all()
    assert np.isnan(np.asarray(trace.jobs.write_time)).all()
    assert (np.asarray(trace.jobs.writes) == -1).all()


def test_savet_fields_must_be_booleans():
    with pytest.raises(ValueError, match="SaveAt.writers"):
        cj.SaveAt(writers="yes")


@pytest.mark.parametrize(
    "kwargs,match",
    [
        (dict(save="writers"), "save must be"),
        (dict(until=0.0), "until"),
        (dict(until=-1.0), "until"),
        (dict(until=float("inf")), "until"),
        (dict(until="x"), "until"),
        (dict(until=[1.0, 2.0]), "until"),
        (dict(n_fires=None), "n_fires"),
        (dict(n_fires=None, until=5.0), "n_fires is needed"),
        (dict(n_fires=None, until=5.0, save=cj.SaveAt(trace=False, gaps=True)), "n_fires is needed"),
    ],
)
def test_bad_observer_requests_are_refused_before_tracing(kwargs, match):
    fleet = _fleets("clock", 0, False, False)
    state = cj.initial_state(fleet)
    n_fires = kwargs.pop("n_fires", K)
    with pytest.raises(ValueError, match=match):
        cj.simulate(fleet, state, n_fires, **kwargs)


def _documented_user_observer():
    """The code of the user's observer in docs/guide/observers.md (the block after its marker)."""
    text = (Path(__file__).parent.parent / "docs" / "guide" / "observers.md").read_text()
    block = text.split("<!-- user-observer -->", 1)[1].split("```python\n", 1)[1].split("```", 1)[0]
    return block


@pytest.mark.parametrize("path", ["general", "clock", "fifo"])
def test_the_documented_user_observer_equals_the_trace(path):
    fleet = _fleets(path, 11, True, False)
    rng = np.random.default_rng(11)
    # Launched computing (no write hides in the state at t = 0), K enough for every firing.
    remaining = np.asarray(fleet.compute) * rng.uniform(0.01, 1, (N_FLEETS, N_JOBS))
    state = cj.initial_state(fleet, phase=0, remaining=remaining)
    names = {"cj": cj, "fleet": fleet, "state": state}
    exec(_documented_user_observer(), names)  # the page's example runs as written
    assert np.asarray(names["out"].observed["writing_time"]).shape == (N_FLEETS,)
    horizon = 40.0
    save = cj.SaveAt(trace=True, observers=(names["WritingTime"](),))
    trace = cj.simulate(fleet, state, 40, method=path, save=save, until=horizon)
    fire, end = np.asarray(trace.fire_times), np.asarray(trace.end_times)
    assert np.isnan(fire[..., -1]).all() and np.all(np.asarray(trace.ok))  # K was enough
    end = np.where(np.isfinite(fire) & np.isnan(end), horizon, end)
    want = [_count_on(fire[b], end[b], 0.0, horizon)[0][1:].sum() for b in range(N_FLEETS)]
    _rel_close(trace.observed["writing_time"], want)


class _Count(cj.Observer):
    name = "firings"

    def init(self, info):
        return jnp.zeros((info.n_fleets, info.n_jobs), jnp.int32)

    def update(self, count, view):
        fired = view.fired & view.running[:, None]
        fleets = jnp.broadcast_to(jnp.arange(count.shape[0])[:, None], fired.shape)
        return count.at[fleets, view.job].add(fired.astype(jnp.int32))

    def finalize(self, count, final):
        return count


@pytest.mark.parametrize("path", ["general", "clock", "fifo"])
def test_a_user_observer_sees_jobs_in_job_order_on_every_path(path):
    # The views' columns name jobs (not FIFO ring slots): per-job firing counts equal the trace's.
    fleet = _fleets(path, 5, False, True)
    state = cj.random_state(fleet, jax.random.key(5))
    trace = cj.simulate(fleet, state, K, method=path, save=cj.SaveAt(observers=(_Count(),)))
    fired = np.isfinite(np.asarray(trace.fire_times)).sum(axis=-1)
    counted = np.asarray(trace.observed["firings"])
    # The trace keeps K firings per job; a job may fire once more before the slowest is done.
    assert np.all((counted == fired) | ((fired == K) & (counted >= K)))
    assert np.all(counted[~np.asarray(fleet.active)] == 0)


def test_user_observers_need_distinct_names():
    with pytest.raises(ValueError, match="own non-empty name"):
        cj.SaveAt(observers=(_Count(), _Count()))
    with pytest.raises(ValueError, match="own non-empty name"):
        cj.SaveAt(observers=(type("Jobs", (_Count,), {"name": "jobs"})(),))
    with pytest.raises(ValueError, match="ckpt_jax.Observer"):
        cj.SaveAt(observers=(lambda view: view,))
