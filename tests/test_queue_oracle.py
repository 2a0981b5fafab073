"""One I/O at a time (docs/model.md §1b "fcfs", §1e "fcfs_nonblocking" and "cooperative"):
the engine against the exact reference `reference_queue.simulate_queue_reference`.

Random small fleets (2-4 active jobs in 4 slots, two fleets per batch), heterogeneous, capped
or not, sizes 1, 2, 4, write limits, any f(1), run to a horizon in three modes: explicit
failure times (some inside a down period) with restarts; none, but MTBFs the cooperative
score sees; no failures and no MTBF at all (the failure-free engine; every score 0). The engine's trace and its
jobs observer must agree with the exact run to 1e-9 relative (plus 1e-12 of H). The
reference's blocking "fcfs" is first checked against `reference.simulate_failures_reference`,
the project's older reference, which learnt "fcfs" on its own.
"""

import math
from fractions import Fraction

import jax
import jax.numpy as jnp
import numpy as np
import oracle_helpers as oh
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from reference import simulate_failures_reference
from reference_queue import least_waste, simulate_queue_reference

import ckpt_jax as cj
from ckpt_jax._rates import least_waste_scores

N_SLOTS = 4
N_FLEETS = 2
N_LISTED = 6
N_FIRES = 40
JOBS = cj.SaveAt(trace=True, jobs=True)
STATS = ("useful_work", "lost_work", "down_time", "write_time", "compute_time")
ERRORS = {}  # policy -> largest relative error seen


@st.composite
def fleet_specs(draw, mode):
    """One fleet, its failure times and its horizon. ``mode``: "failing" (some jobs get
    failure times, the score sees each job's M_i), "listed" (no failure time, but the score
    sees M_i) or "plain" (no failures and no M_i: every score is 0). On the "grid" every
    time-like input is a multiple of 1/4 (exact in float64, so events coincide exactly)."""
    grid = draw(st.booleans())
    n_active = draw(st.integers(2, N_SLOTS))
    slots = sorted(draw(st.permutations(range(N_SLOTS)))[:n_active])
    if grid:
        quarter = lambda low, high: st.integers(low, high).map(lambda k: k / 4)  # noqa: E731
        compute = [draw(quarter(2, 12)) for _ in range(n_active)]
        write = [draw(quarter(1, 6)) for _ in range(n_active)]
        restart = [draw(quarter(0, 6)) for _ in range(n_active)]
        horizon = draw(quarter(8, 48))
        f1 = draw(st.sampled_from([1.0, 2.0]))
        limit = [draw(st.sampled_from([math.inf, 0.5, 1.0])) for _ in range(n_active)]
        mtbf = [draw(st.sampled_from([8.0, 16.0, 32.0])) for _ in range(n_active)]
        cap = draw(st.sampled_from([None, 1.0, 2.0, 3.0]))
        some_time = st.integers(0, int(4 * horizon)).map(lambda k: k / 4)
    else:
        compute = [draw(st.floats(0.5, 3.0)) for _ in range(n_active)]
        write = [draw(st.floats(0.1, 1.5)) for _ in range(n_active)]
        restart = [draw(st.sampled_from([0.0, draw(st.floats(0.05, 2.0))])) for _ in range(n_active)]
        horizon = draw(st.floats(2.0, 15.0))
        f1 = draw(st.floats(0.5, 2.0))
        limit = [draw(st.sampled_from([math.inf, draw(st.floats(0.3, 3.0))])) for _ in range(n_active)]
        mtbf = [draw(st.floats(2.0, 50.0)) for _ in range(n_active)]
        cap = draw(st.sampled_from([None, draw(st.floats(0.5, 2.0 * n_active))]))
        some_time = st.one_of(st.just(0.0), st.floats(1e-3, horizon))
    size = [draw(st.sampled_from([1.0, 2.0, 4.0])) for _ in range(n_active)]
    phase = [draw(st.integers(0, 1)) for _ in range(n_active)]
    fraction = st.integers(1, 4).map(lambda k: k / 4)
    remaining = [draw(fraction) * (write[j] if phase[j] else compute[j]) for j in range(n_active)]
    failures = [[] for _ in range(n_active)]
    if mode == "plain":
        mtbf = None
    if mode == "failing":
        inside = st.integers(1, 3).map(lambda k: k / 4) if grid else st.floats(0.01, 0.99)
        for job in range(n_active):
            times = set(draw(st.lists(some_time, max_size=3)))
            for t in sorted(times):  # sometimes one more inside the down period it causes
                if restart[job] > 0 and draw(st.booleans()):
                    times.add(t + draw(inside) * restart[job])
            failures[job] = sorted(times)[:N_LISTED]
    return dict(
        grid=grid,
        slots=slots,
        compute=compute,
        write=write,
        restart=restart,
        horizon=horizon,
        f1=f1,
        throughput=[1.0] + [f1] * N_SLOTS,
        write_limit=limit,
        mtbf=mtbf,
        cap=cap,
        mode=mode,
        size=size,
        phase=phase,
        remaining=remaining,
        failures=failures,
    )


def reference(spec, policy, horizon=None):
    return simulate_queue_reference(
        spec["compute"],
        spec["write"],
        spec["horizon"] if horizon is None else horizon,
        policy,
        failure_times=spec["failures"],
        restart=spec["restart"],
        phase=spec["phase"],
        remaining=spec["remaining"],
        cap=spec["cap"],
        f1=spec["f1"],
        size=spec["size"],
        write_limit=spec["write_limit"],
        mtbf=spec["mtbf"],
    )


def resolvable(spec, policy):
    """Float64 tells every two distinct instants apart (an event just after H included),
    the trace holds every firing, and no two different cooperative scores are closer than
    float arithmetic decides."""
    run = reference(spec, policy, oh.longer_horizon(spec["horizon"]))
    if max(len(f) for f in run["fire_times"]) >= N_FIRES or run["closest_tie"] < 1e-9:
        return False
    return oh.resolvable(run["event_times"], spec["horizon"], spec["failures"])


def engine(specs, policy, method="auto"):
    """One `simulate` call; "plain" specs run the failure-free engine (no failure times, no M)."""
    plain = specs[0]["mode"] == "plain"
    fleet = oh.fleet_of(specs, N_SLOTS, storage_policy=policy)
    lists = None if plain else [spec["failures"] for spec in specs]
    return oh.run_engine(specs, fleet, N_FIRES, lists, N_LISTED, save=JOBS, seed=None, method=method)


def check(specs, policy):
    # A batch of unit-size and sized fleets (or of fleets with and without write limits) runs
    # as two groups: topped up to N_FLEETS each, they reuse the programs of batches that do not.
    (specs,) = oh.even_groups(specs)
    out = engine(specs, policy)
    assert bool(np.all(out.ok)), np.asarray(out.status)
    for b, spec in enumerate(specs):
        exact = reference(spec, policy)
        # Each exact instant is one step of the engine on the grid (exact in float64).
        worst, _ = oh.assert_run_agrees(out, b, spec, exact, STATS, completed_ends=True, count_steps=spec["grid"])
        ERRORS[policy] = max(ERRORS.get(policy, 0.0), worst)


# The default tier: each queueing policy with failures (drawn, and listed on an exact grid), and
# once without; blocking fcfs has its own oracle (tests/test_failures_oracle.py). ``pytest -m
# slow`` runs every policy in every mode.
MODES = [(policy, mode) for policy in ("fcfs_nonblocking", "cooperative") for mode in ("plain", "listed", "failing")]
DEFAULT = [("fcfs_nonblocking", "listed"), ("cooperative", "failing"), ("cooperative", "plain")]


@pytest.mark.parametrize("policy, mode", DEFAULT)
@oh.oracle_settings(5)
@given(data=st.data())
def test_engine_matches_the_queue_reference(policy, mode, data):
    specs = [data.draw(fleet_specs(mode)) for _ in range(N_FLEETS)]
    assume(all(resolvable(spec, policy) for spec in specs))
    check(specs, policy)


@pytest.mark.slow
@pytest.mark.parametrize("policy, mode", MODES + [("fcfs", "plain"), ("fcfs", "listed"), ("fcfs", "failing")])
@oh.oracle_settings(60)
@given(data=st.data())
def test_engine_matches_the_queue_reference_thoroughly(policy, mode, data):
    specs = [data.draw(fleet_specs(mode)) for _ in range(N_FLEETS)]
    assume(all(resolvable(spec, policy) for spec in specs))
    check(specs, policy)


@oh.oracle_settings(25)
@given(spec=fleet_specs(mode="failing"))
def test_the_queue_reference_learnt_fcfs_as_the_older_reference(spec):
    """Blocking fcfs (without write limits, which the older reference does not take): both
    references give the same exact run."""
    spec = dict(spec, write_limit=[math.inf] * len(spec["compute"]))
    mine = reference(spec, "fcfs")
    theirs = simulate_failures_reference(
        spec["compute"],
        spec["write"],
        spec["horizon"],
        spec["failures"],
        spec["restart"],
        phase=spec["phase"],
        remaining=spec["remaining"],
        cap=spec["cap"],
        throughput=[1.0] + [spec["f1"]] * len(spec["compute"]),
        size=spec["size"],
        storage_policy="fcfs",
    )
    for name in ("fire_times", "end_times", "failures", "event_times") + STATS:
        assert mine[name] == theirs[name], name


def test_a_waiting_job_keeps_computing_and_its_write_covers_that_work():
    """Two jobs due together: job 1 waits for job 0's write (1 time unit) while computing,
    then writes everything it did, T + 1 (both non-blocking policies; blocking fcfs idles)."""
    fleet = lambda policy: cj.Fleet([2.0, 2.0], [1.0, 1.0], storage_policy=policy)  # noqa: E731
    runs = {
        policy: cj.simulate(fleet(policy), cj.initial_state(fleet(policy)), n_fires=2, until=4.5, save=JOBS)
        for policy in ("fcfs", "fcfs_nonblocking", "cooperative")
    }
    for policy in ("fcfs_nonblocking", "cooperative"):
        np.testing.assert_array_equal(np.asarray(runs[policy].fire_times)[:, 0], [2.0, 3.0])
        np.testing.assert_array_equal(np.asarray(runs[policy].jobs.useful_work), [2.0, 3.0])
    np.testing.assert_array_equal(np.asarray(runs["fcfs"].jobs.useful_work), [2.0, 2.0])


@pytest.mark.parametrize("policy", ["fcfs_nonblocking", "cooperative"])
def test_writes_that_never_overlap_are_served_as_under_blocking_storage(policy):
    """Staggered jobs whose writes never meet (failures included) never wait for the storage:
    the same run as under "fair" storage."""
    fleet = lambda storage: cj.Fleet(  # noqa: E731
        [3.0, 3.0, 3.0], [0.5, 0.5, 0.5], mtbf=50.0, restart=0.25, storage_policy=storage
    )
    failures = np.array([[4.0, np.inf], [np.inf, np.inf], [10.0, np.inf]])
    runs = [
        cj.simulate(
            fleet(storage),
            cj.initial_state(fleet(storage), remaining=[3.0, 2.0, 1.0]),
            n_fires=8,
            until=20.0,
            failure_times=failures,
            save=JOBS,
        )
        for storage in ("fair", policy)
    ]
    np.testing.assert_array_equal(np.asarray(runs[1].jobs.failures), [1, 0, 1])
    for name in ("fire_times", "end_times"):
        np.testing.assert_array_equal(np.asarray(getattr(runs[0], name)), np.asarray(getattr(runs[1], name)))
    for name in STATS:
        np.testing.assert_allclose(np.asarray(getattr(runs[0].jobs, name)), np.asarray(getattr(runs[1].jobs, name)))


def test_a_request_still_waiting_at_the_next_due_is_dropped():
    """Job 0 holds the storage for 5; job 1 (T = 2) asks at 1, again at 3 (the first request
    is dropped) and at 5, when the storage frees: it keeps its place and writes 5 of work."""
    fleet = cj.Fleet([10.0, 2.0], [5.0, 1.0], storage_policy="fcfs_nonblocking")
    state = cj.initial_state(fleet, phase=[1, 0], remaining=[5.0, 1.0])
    out = cj.simulate(fleet, state, n_fires=2, until=6.5, save=JOBS)
    np.testing.assert_array_equal(np.asarray(out.fire_times)[1, :1], [5.0])
    np.testing.assert_array_equal(np.asarray(out.jobs.useful_work), [0.0, 5.0])


def test_cooperative_serves_the_request_whose_wait_risks_more_first():
    """Jobs 0 and 1 ask (at 1 and 1.5) while job 2 writes until 2. FCFS serves job 0 first;
    Least-Waste serves job 1 (size 4, MTBF 10: letting it wait risks 4/10 · 1 · 2.5 = 1)
    before job 0 (size 1, MTBF 100: 1/100 · 1 · 2.5)."""
    first = {}
    for policy in ("fcfs_nonblocking", "cooperative"):
        fleet = cj.Fleet(
            [2.0, 3.0, 10.0], [1.0, 1.0, 2.0], size=[1.0, 4.0, 1.0], mtbf=[100.0, 10.0, 100.0], storage_policy=policy
        )
        state = cj.initial_state(fleet, phase=[0, 0, 1], remaining=[1.0, 1.5, 2.0])
        none = np.full((3, 1), np.inf)
        out = cj.simulate(fleet, state, n_fires=2, until=4.5, save=JOBS, failure_times=none)
        first[policy] = np.asarray(out.fire_times)[:2, 0]
    np.testing.assert_array_equal(first["fcfs_nonblocking"], [2.0, 3.0])
    np.testing.assert_array_equal(first["cooperative"], [3.0, 2.0])


@settings(max_examples=30, deadline=None)
@given(data=st.data())
def test_least_waste_scores_match_the_reference(data):
    """Both terms of the score (idle requests and computing ones), on random requests."""
    n = data.draw(st.integers(2, 5))
    waiting = [j for j in range(n) if data.draw(st.booleans())] or [0]
    floats = lambda low, high: [data.draw(st.floats(low, high)) for _ in range(n)]  # noqa: E731
    size, restart, exposure, waited, service = floats(1, 8), floats(0, 2), floats(0, 5), floats(0, 3), floats(0.1, 2)
    mtbf = [data.draw(st.sampled_from([None, data.draw(st.floats(1, 100))])) for _ in range(n)]
    blocked = [data.draw(st.booleans()) for _ in range(n)]
    mask = np.isin(np.arange(n), waiting)
    arr = lambda x: jnp.asarray(x, jnp.float64)  # noqa: E731
    got = least_waste_scores(
        jnp.asarray(mask),
        jnp.asarray(blocked),
        arr(size),
        arr([math.inf if m is None else m for m in mtbf]),
        arr(restart),
        arr(exposure),
        arr(waited),
        arr(service),
    )
    exact = [_num_list(x) for x in (size, restart, exposure, waited, service)]
    mtbf_exact = [None if m is None else Fraction(m) for m in mtbf]
    for i in range(n):
        if not mask[i]:
            assert got[i] == np.inf
            continue
        want = least_waste(i, waiting, exact[0], mtbf_exact, exact[1], exact[2], exact[3], blocked, exact[4])
        assert abs(float(got[i]) - float(want)) <= 1e-12 * max(1.0, float(want))


def _num_list(values):
    return [Fraction(v) for v in values]


@pytest.mark.parametrize("policy", ["fcfs_nonblocking", "cooperative"])
def test_fast_methods_refuse_them_by_name_and_auto_takes_the_general_engine(policy):
    fleet = cj.Fleet(np.full((2, 8), 2.0), np.full((2, 8), 0.1), storage_policy=policy)
    state = cj.initial_state(fleet)
    for method in ("fifo", "clock"):
        with pytest.raises(ValueError, match=f"storage_policy='{policy}'"):
            cj.simulate(fleet, state, n_fires=3, method=method)
    auto = cj.simulate(fleet, state, n_fires=3, method="auto")
    general = cj.simulate(fleet, state, n_fires=3, method="general")
    np.testing.assert_array_equal(np.asarray(auto.fire_times), np.asarray(general.fire_times))


@pytest.mark.parametrize("policy", ["fcfs_nonblocking", "cooperative"])
@pytest.mark.parametrize(
    "kwargs, word",
    [
        (dict(snapshot=0.1), "snapshot"),
        (dict(async_fraction=0.5), "async_fraction"),
        (dict(delay=0.2), "delay"),
        (dict(mtbf=10.0, recovery_read=0.5), "recovery_read"),
        (dict(mtbf=10.0, fail_while_down=True), "fail_while_down"),
    ],
)
def test_unsupported_combinations_are_refused(policy, kwargs, word):
    with pytest.raises(ValueError, match=word):
        cj.Fleet([2.0, 3.0], [0.5, 0.5], storage_policy=policy, cap=1.5, **kwargs)


def test_jitter_is_refused():
    fleet = cj.Fleet([2.0, 3.0], [0.5, 0.5], storage_policy="cooperative")
    with pytest.raises(ValueError, match="jitter"):
        cj.simulate(fleet, cj.initial_state(fleet), n_fires=3, jitter=0.1, key=jax.random.key(0))


def teardown_module():
    if ERRORS:
        print("\nqueue oracle, largest relative error per policy:", ERRORS)


@pytest.mark.parametrize("policy", [pytest.param("fcfs_nonblocking", marks=pytest.mark.slow), "cooperative"])
def test_the_designer_accepts_the_queueing_policies(policy):
    """`design.checkpoint_intervals` perturbs intervals through the simulator under them."""
    from ckpt_jax import design

    fleet = cj.Fleet([1.0, 1.0], [0.3, 0.5], size=[1.0, 2.0], mtbf=[20.0, 15.0], restart=0.5, storage_policy=policy)
    result = design.checkpoint_intervals(
        fleet, bounds=(0.5, 20.0), horizon=30.0, n_draws=2, key=jax.random.key(0), n_pairs=1, steps=2, progress=False
    )
    assert np.all((result.intervals >= 0.5) & (result.intervals <= 20.0))
    assert np.isfinite(result.waste.mean)
