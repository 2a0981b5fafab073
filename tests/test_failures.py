"""Failures and restarts (docs/model.md §1c) in the general engine: unchanged without
failures, reproducible in any batch layout, time and work accounting, the renewal formula
for one job alone, Poisson failure counts, and bad input."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ckpt_jax as cj

JOBS = cj.SaveAt(trace=True, jobs=True)

# One fleet shape (BATCH fleets of three jobs) and one trace length K for the traced runs of
# this module: the static configuration and the shapes decide which programs are compiled,
# so the runs that trace the same variant share one compiled general loop (the failure path
# of a jittered bit-for-bit run is the accounting test's program, that of an unjittered one
# the until-needed check's). With ``until`` the run ends at the horizon, so K only sizes the
# trace.
BATCH, K = 4, 200


def _fleet(batch=BATCH, **kw):
    compute = np.array([[10.0, 7.0, 12.5]] * batch)
    write = np.array([[1.0, 2.0, 1.5]] * batch)
    return cj.Fleet(compute, write, **kw)


def _same(a, b):
    for x, y in zip(jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b)):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


VARIANTS = [
    dict(),
    dict(cap=1.5, throughput="saturating"),
    dict(delay=0.7, cap=1.5),
    dict(async_fraction=0.5),
    dict(size=[1.0, 2.0, 3.0], cap=2.5, storage_policy="weighted"),
    dict(size=[1.0, 2.0, 3.0], cap=2.5, power_policy="uniform", storage_policy="fcfs"),
]


# Every variant without jitter, and with it the base model, asynchronous writes and sizes under fcfs
# (the rest under ``-m slow``).
@pytest.mark.parametrize(
    "variant, jitter",
    [(variant, None) for variant in VARIANTS]
    + [
        pytest.param(variant, 0.5, marks=() if k in (0, 3, 5) else pytest.mark.slow)
        for k, variant in enumerate(VARIANTS)
    ],
)
def test_without_failures_the_engine_is_unchanged_bit_for_bit(variant, jitter):
    # The failure machinery is static: off without mtbf, and the work accounting that the
    # jobs observer adds does not feed back into the dynamics. A fleet whose failures never
    # come (M far beyond the horizon) takes the failure path and gives the same bits too.
    key = jax.random.key(3)
    plain = _fleet(**variant)
    state = cj.random_state(plain, jax.random.key(1))
    args = dict(n_fires=K, until=150.0, jitter=jitter, key=key, method="general")
    base = cj.simulate(plain, state, save=cj.SaveAt(), **args)
    observed = cj.simulate(plain, state, save=JOBS, **args)
    never = cj.simulate(_fleet(mtbf=1e200, restart=1.0, **variant), state, save=JOBS, **args)
    assert bool(np.all(base.ok))
    for out in (observed, never):
        _same(
            (base.fire_times, base.end_times, base.time, base.n_events, base.status),
            (out.fire_times, out.end_times, out.time, out.n_events, out.status),
        )
    # Without failures (or jittered phases) the loop keeps no work accounting: the useful
    # work is the completed writes times T_i, which the failure path sums phase by phase;
    # and the write times come from the switch times, which the failure path accumulates
    # per interval. Both agree to rounding; the counts exactly.
    sums = (
        "useful_work",
        "waste",
        "covered_waste",
        "uncovered_work",
        "write_time",
        "compute_time",
        "completed_write_time",
        "persisted_work",
    )
    _same(
        observed.jobs._replace(**{f: None for f in sums}),
        never.jobs._replace(failures=observed.jobs.failures, **{f: None for f in sums}),
    )
    for field in sums:
        np.testing.assert_allclose(getattr(observed.jobs, field), getattr(never.jobs, field), rtol=1e-13, atol=1e-15)
    assert np.all(never.jobs.failures == 0)


@pytest.mark.parametrize("method", ["general", "auto", "clock", "fifo"])
def test_without_failures_useful_work_is_completed_writes_times_t(method):
    n = 8  # large enough for the fast paths under "auto"
    fleet = cj.Fleet(np.full((2, n), 10.0), np.full((2, n), 1.0), cap=6.0)
    position = np.linspace(0, 10.9, n)[None, :] * np.ones((2, 1))
    state = cj.state_from_positions(fleet, position)
    out = cj.simulate(fleet, state, n_fires=None, until=200.0, method=method, save=cj.SaveAt(trace=False, jobs=True))
    jobs = out.jobs
    # Work before t = 0 counts nowhere: an initially computing job's first write saved only
    # the work it had left at t = 0.
    computing = np.asarray(state.phase) == 0
    short = np.where(computing, 10.0 - np.asarray(state.remaining), 0.0)
    np.testing.assert_allclose(jobs.useful_work, jobs.writes * 10.0 - short, rtol=1e-12)
    np.testing.assert_array_equal(jobs.lost_work, 0)
    np.testing.assert_array_equal(jobs.failures, 0)
    np.testing.assert_array_equal(jobs.down_time, 0)
    np.testing.assert_allclose(jobs.covered_waste, 1 - jobs.useful_work / 200.0)
    # Steady state (docs/model.md §1c): the work uncovered at H is not lost.
    np.testing.assert_allclose(jobs.waste, 1 - (jobs.useful_work + jobs.uncovered_work) / 200.0)
    assert np.all((np.asarray(jobs.uncovered_work) >= 0) & (np.asarray(jobs.uncovered_work) <= 10.0 * (1 + 1e-12)))


def test_without_failures_a_synchronous_start_saves_exactly_writes_times_t():
    fleet = _fleet()
    out = cj.simulate(fleet, cj.initial_state(fleet), n_fires=None, until=333.0, save=cj.SaveAt(trace=False, jobs=True))
    np.testing.assert_array_equal(out.jobs.useful_work, out.jobs.writes * np.asarray(fleet.compute))


@pytest.mark.parametrize("variant", VARIANTS + [dict(cap=1.0, throughput=[0, 1.0, 1.5, 1.8], delay=0.3)])
@pytest.mark.parametrize("restart", [0.0, 2.5])
def test_time_and_work_accounting(variant, restart):
    fleet = _fleet(mtbf=[25.0, 40.0, 60.0], restart=restart, **variant)
    horizon = 400.0
    out = cj.simulate(
        fleet,
        cj.random_state(fleet, jax.random.key(5)),
        n_fires=K,
        until=horizon,
        key=jax.random.key(7),
        jitter=0.3,
        save=JOBS,
    )
    jobs = out.jobs
    assert bool(np.all(out.ok)) and np.all(jobs.failures > 0)
    total = jobs.compute_time + jobs.write_time + jobs.down_time
    if variant.get("async_fraction", 0) == 0:
        np.testing.assert_allclose(total, horizon, rtol=1e-12)  # compute + write + down = H
    else:  # compute overlaps writing; the rest of the time the job waits or is down
        assert np.all(jobs.compute_time + jobs.down_time <= horizon * (1 + 1e-12))
    if restart == 0:
        np.testing.assert_array_equal(jobs.down_time, 0)
    else:  # down R per failure, the last restart possibly cut by the horizon
        d = np.asarray(jobs.down_time)
        assert np.all(d <= jobs.failures * restart + 1e-9) and np.all(d > (jobs.failures - 1) * restart - 1e-9)
    # Work saved plus work lost is at most the work done; the rest is the work since the
    # last completed write at H (compute rate <= 1, so work <= compute time).
    assert np.all(jobs.useful_work >= 0) and np.all(jobs.lost_work >= 0)
    assert np.all(jobs.useful_work + jobs.lost_work <= jobs.compute_time * (1 + 1e-12))
    # The trace: every completed write has an end; an abandoned write keeps its fire time
    # and a NaN end, at most one per failure (the last write may be in progress at H).
    fired = np.sum(np.isfinite(out.fire_times), axis=-1)
    ended = np.sum(np.isfinite(out.end_times), axis=-1)
    np.testing.assert_array_equal(ended, jobs.writes)
    assert np.all(fired - ended <= jobs.failures + 1)
    assert np.all(fired - ended >= 0)


def test_failures_are_reproducible_and_independent_of_the_batch_layout():
    fleet = _fleet(mtbf=30.0, restart=1.5, cap=1.5)
    state = cj.random_state(fleet, jax.random.key(2))
    args = dict(n_fires=K, until=300.0, key=jax.random.key(11), jitter=0.2, save=JOBS)
    whole = cj.simulate(fleet, state, **args)
    _same(whole, cj.simulate(fleet, state, **args))
    assert np.all(whole.jobs.failures > 0)
    other = cj.simulate(fleet, state, **dict(args, key=jax.random.key(12)))
    assert not np.array_equal(np.asarray(other.jobs.failures), np.asarray(whole.jobs.failures))
    single = lambda x: x[3]  # noqa: E731
    alone = cj.simulate(fleet[3], jax.tree_util.tree_map(single, state), fleet_offset=3, **args)
    _same(jax.tree_util.tree_map(single, whole), alone)
    middle = cj.simulate(fleet[1:3], jax.tree_util.tree_map(lambda x: x[1:3], state), fleet_offset=1, **args)
    _same(jax.tree_util.tree_map(lambda x: x[1:3], whole), middle)
    reshaped = cj.simulate(
        _fleet(mtbf=30.0, restart=1.5, cap=1.5)[np.arange(BATCH).reshape(2, BATCH // 2)],
        jax.tree_util.tree_map(lambda x: x.reshape((2, BATCH // 2) + x.shape[1:]), state),
        **args,
    )
    _same(whole, jax.tree_util.tree_map(lambda x: x.reshape((BATCH,) + x.shape[2:]), reshaped))
    on_devices = cj.simulate(fleet, state, devices=1, **args)
    _same(whole, on_devices)


def _renewal(compute, write, mtbf, restart):
    """Mean and variance of one cycle X (T compute + d write at speed 1, redone from its
    start after each failure and a restart R): E[X] = (M + R)(e^{(T+d)/M} − 1)."""
    rate, w = 1 / mtbf, compute + write
    p = math.exp(-rate * w)  # a cycle attempt succeeds
    q = 1 - p
    mean_y = mtbf - w * p / q  # the time of a failure within an attempt, given one
    mean_y2 = (2 * mtbf**2 - p * (w**2 + 2 * w * mtbf + 2 * mtbf**2)) / q
    mean = w + q / p * (mean_y + restart)
    var = q / p * (mean_y2 - mean_y**2) + q / p**2 * (mean_y + restart) ** 2
    return mean, var


@pytest.mark.parametrize("mtbf, restart", [(50.0, 2.0), (20.0, 0.0)])
def test_one_job_alone_has_the_renewal_formula_waste(mtbf, restart):
    compute, write, n_fleets = 10.0, 1.0, 2000
    horizon = 200 * (compute + write)
    fleet = cj.Fleet(np.full((n_fleets, 1), compute), np.full((n_fleets, 1), write), mtbf=mtbf, restart=restart)
    out = cj.simulate(
        fleet,
        cj.initial_state(fleet),
        n_fires=None,
        until=horizon,
        key=jax.random.key(0),
        save=cj.SaveAt(trace=False, jobs=True),
    )
    assert bool(np.all(out.ok))
    # The covered waste 1 − useful / H, whose finite-horizon bias is known exactly.
    waste = np.asarray(out.jobs.covered_waste)[:, 0]
    mean, var = _renewal(compute, write, mtbf, restart)
    formula = 1 - compute / mean
    # Finite-horizon bias: the useful work is T × (cycles completed by H), and a renewal
    # process started fresh at t = 0 has E N(H) = H/μ + (σ² − μ²)/(2μ²) + o(1), so
    # E waste(H) = formula − T (σ² − μ²) / (2 μ² H).
    expected = formula - compute * (var - mean**2) / (2 * mean**2 * horizon)
    error = waste.std(ddof=1) / math.sqrt(n_fleets)
    assert abs(waste.mean() - expected) < 4 * error, (waste.mean(), expected, formula, error)
    # Failure counts: F(t) − U(t)/M is a martingale (U: time up), so E F(H) = E U(H) / M
    # and Var(F(H) − U(H)/M) = E U(H) / M, as for a Poisson count.
    failures = np.asarray(out.jobs.failures)[:, 0]
    up = horizon - np.asarray(out.jobs.down_time)[:, 0]
    excess = failures - up / mtbf
    scale = math.sqrt(np.mean(up) / mtbf)
    assert abs(excess.mean()) < 4 * scale / math.sqrt(n_fleets)
    assert abs(excess.var(ddof=1) / scale**2 - 1) < 4 * math.sqrt(2 / n_fleets)


def test_float32_runs_with_failures():
    fleet = _fleet(batch=2, mtbf=30.0, restart=1.0, cap=1.5, dtype=jnp.float32)
    out = cj.simulate(
        fleet,
        cj.initial_state(fleet),
        n_fires=None,
        until=300.0,
        key=jax.random.key(1),
        save=cj.SaveAt(trace=False, jobs=True),
    )
    assert out.jobs.useful_work.dtype == jnp.float32
    assert bool(np.all(out.ok)) and np.all(out.jobs.failures > 0)
    total = out.jobs.compute_time + out.jobs.write_time + out.jobs.down_time
    np.testing.assert_allclose(total, 300.0, rtol=1e-5)


def test_a_run_that_exhausts_the_event_budget_reports_it():
    fleet = _fleet(mtbf=5.0, restart=1.0)
    out = cj.simulate(
        fleet,
        cj.initial_state(fleet),
        n_fires=None,
        until=1000.0,
        max_events=50,
        save=cj.SaveAt(trace=False, jobs=True),
        key=jax.random.key(0),
    )
    assert not np.any(out.ok)
    assert np.all(np.asarray(out.status) & cj.Status.MAX_EVENTS)
    assert np.all(np.isnan(out.jobs.waste))


def test_the_default_budget_allows_for_frequent_failures():
    fleet = _fleet(mtbf=3.0, restart=0.5)
    out = cj.simulate(
        fleet,
        cj.initial_state(fleet),
        n_fires=None,
        until=2000.0,
        save=cj.SaveAt(trace=False, jobs=True),
        key=jax.random.key(0),
    )
    assert bool(np.all(out.ok)) and np.all(out.jobs.failures > 200)


def test_failures_route_to_the_general_engine_and_fast_methods_refuse_them():
    n = 8
    fleet = cj.Fleet(np.full(n, 10.0), np.full(n, 1.0), mtbf=50.0)
    state = cj.initial_state(fleet)
    auto = cj.simulate(fleet, state, n_fires=5, until=60.0, key=jax.random.key(1))
    general = cj.simulate(fleet, state, n_fires=5, until=60.0, key=jax.random.key(1), method="general")
    _same(auto, general)
    for method in ("fifo", "clock"):
        with pytest.raises(ValueError, match="cannot serve failures"):
            cj.simulate(fleet, state, n_fires=5, until=60.0, method=method)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(mtbf=0.0), "mtbf must be finite and > 0"),
        (dict(mtbf=-3.0), "mtbf must be finite and > 0"),
        (dict(mtbf=np.inf), "mtbf must be finite and > 0"),
        (dict(mtbf=np.nan), "mtbf must be finite and > 0"),
        (dict(mtbf=[1.0, 0.0, 1.0]), "mtbf must be finite and > 0"),
        (dict(mtbf="x"), "mtbf must be"),
        (dict(mtbf=10.0, restart=-1.0), "restart must be finite and >= 0"),
        (dict(mtbf=10.0, restart=np.inf), "restart must be finite and >= 0"),
        (dict(mtbf=10.0, restart=np.nan), "restart must be finite and >= 0"),
        (dict(mtbf=[1.0, 2.0]), "mtbf must be a scalar or broadcast"),
    ],
)
def test_bad_failure_parameters_name_the_argument(kwargs, match):
    with pytest.raises(ValueError, match=match):
        _fleet(**kwargs)


@pytest.mark.parametrize("save", [cj.SaveAt(), cj.SaveAt(trace=False, jobs=True), JOBS])
@pytest.mark.parametrize("listed", [False, True])
def test_failures_need_until_not_only_n_fires(save, listed):
    # A failure abandons the write in progress, so "K completed writes per job" may never
    # come: without a horizon the run is refused before tracing, with or without a trace.
    fleet = _fleet(restart=1.0) if listed else _fleet(mtbf=10.0)
    extra = dict(failure_times=np.full((BATCH, 3, 1), 4.0)) if listed else {}
    with pytest.raises(ValueError, match=rf"n_fires={K} without until=.*failures.*Pass until=H") as raised:
        cj.simulate(fleet, cj.initial_state(fleet), n_fires=K, save=save, **extra)
    assert "NaN end time" in str(raised.value)
    # With until the same call runs to H; the trace holds the first K firings.
    out = cj.simulate(fleet, cj.initial_state(fleet), n_fires=K, save=save, until=80.0, key=jax.random.key(0), **extra)
    assert bool(np.all(out.ok)) and np.all(np.asarray(out.time) == 80.0)
    if save.trace:
        assert out.fire_times.shape == (BATCH, 3, K) and np.all(np.isfinite(out.fire_times[..., 0]))


def test_without_failures_n_fires_alone_still_ends_the_run():
    fleet = _fleet(restart=1.0)  # a restart time alone is not a failure
    out = cj.simulate(fleet, cj.initial_state(fleet), n_fires=5)
    assert bool(np.all(out.ok)) and np.all(np.isfinite(out.end_times))
