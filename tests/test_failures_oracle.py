"""Failures and restarts (docs/model.md §1c): the engine against the exact reference.

`simulate(..., failure_times=...)` takes the failure times explicitly, as
`reference.simulate_failures_reference` does, so both integrate the same trajectory: random
small fleets (2-4 active jobs in 4 slots, two fleets per batch), heterogeneous, capped or
not, any f preset, job sizes 1, 2, 4 under every power and storage policy pair, random
restart times (0 included) and a horizon ``until=H``. The failure times include some inside
a down period (the reference and the engine must both discard them) and, on "grid" fleets
(multiples of 1/4, where float64 is exact), some at the very instants of other events:
write ends, firings, restart ends and H. The engine's trace (fire times, end times with NaN
for abandoned writes) and its jobs observer (useful and lost work, failures, time down,
writing and computing) must agree with the exact result to 1e-9 relative, plus 1e-12 of H.
The same holds with the variants of §1: a delayed controller (τ > 0), asynchronous
checkpoints (α > 0) and compute jitter, where the reference is given the engine's own draws
per (job, compute phase), as `tests/test_engine_oracle.py` does without failures.

Shapes are fixed (4 slots, 2 fleets, `N_LISTED` failure times, `N_FIRES` trace columns) so
the engine compiles once per policy pair. ``CKPT_ORACLE_EXAMPLES`` sets the examples per
policy pair; ``pytest -m slow`` runs every pair with more.
"""

import math

import jax
import numpy as np
import oracle_helpers as oh
import pytest
from hypothesis import assume, currently_in_test_context, event, given
from hypothesis import strategies as st
from reference import THROUGHPUT_KINDS, simulate_failures_reference

import ckpt_jax as cj

N_SLOTS = 4
N_FLEETS = 2
N_LISTED = 10  # failure times per job, padded with +inf
N_FIRES = 40  # trace columns: more than any job fires before H (T >= 1/2, H <= 15)
N_DRAWS = N_FIRES + 1  # jitter draws per job: compute phases 0..N_FIRES
JOBS = cj.SaveAt(trace=True, jobs=True)
STATS = ("useful_work", "lost_work", "down_time", "write_time", "compute_time", "completed_write_time")
ERRORS = []  # per example (largest relative error where exact != 0, largest |error| / H where 0)

POLICIES = [(power, storage) for power in ("maxmin", "uniform") for storage in ("fair", "weighted", "fcfs")]


@st.composite
def fleet_specs(draw, sized, variants=()):
    """One fleet of 2..N_SLOTS active jobs in N_SLOTS slots, without its failure times.

    ``grid``: every time-like input on multiples of 1/4, f = 1 or n, integer caps, so that
    many events are exactly simultaneous. ``sized``: job sizes from {1, 2, 4}, at least one
    not 1 (the fleet then takes the size-aware rules); None: either, drawn. ``variants``: any
    of "delay" (a capped fleet with tau > 0), "async" (alpha > 0) and "jitter" (sigma > 0,
    never on the grid; the draws are added by `batches`, which knows the fleet's key).
    """
    grid = draw(st.booleans()) and "jitter" not in variants
    if sized is None:
        sized = draw(st.booleans())
    n_active = draw(st.integers(2, N_SLOTS))
    slots = sorted(draw(st.permutations(range(N_SLOTS)))[:n_active])
    if grid:
        quarters = lambda low, high: st.integers(low, high).map(lambda k: k / 4)  # noqa: E731
        compute = [draw(quarters(2, 12)) for _ in range(n_active)]
        write = [draw(quarters(1, 8)) for _ in range(n_active)]
        restart = [draw(quarters(0, 8)) for _ in range(n_active)]
        fraction = st.integers(1, 4).map(lambda k: k / 4)
        kind = draw(st.sampled_from(["shared", "linear"]))
        cap = draw(st.integers(1, 2 * n_active).map(float))
        horizon = draw(quarters(8, 60))
        delay, async_fraction = quarters(1, 8), quarters(1, 4)
    else:
        compute = [draw(st.floats(0.5, 3.0)) for _ in range(n_active)]
        write = [draw(st.floats(0.1, 2.0)) for _ in range(n_active)]
        restart = [draw(st.sampled_from([0.0, None])) for _ in range(n_active)]
        restart = [draw(st.floats(0.05, 2.0)) if r is None else r for r in restart]
        fraction = st.floats(0.01, 1.0)
        kind = draw(st.sampled_from(sorted(THROUGHPUT_KINDS)))
        cap = draw(st.floats(0.5, 2.0 * n_active))
        horizon = draw(st.floats(2.0, 15.0))
        delay, async_fraction = st.floats(0.01, 2.0), st.floats(0.05, 1.0)
    size = [1.0] * n_active
    if sized:
        size = [draw(st.sampled_from([1.0, 2.0, 4.0])) for _ in range(n_active)]
        size[draw(st.integers(0, n_active - 1))] = draw(st.sampled_from([2.0, 4.0]))
    phase = [draw(st.integers(0, 1)) for _ in range(n_active)]
    remaining = [draw(fraction) * (write[j] if phase[j] else compute[j]) for j in range(n_active)]
    function = THROUGHPUT_KINDS[kind]
    return dict(
        grid=grid,
        slots=slots,
        compute=compute,
        write=write,
        restart=restart,
        size=size,
        phase=phase,
        remaining=remaining,
        cap=cap if "delay" in variants else draw(st.sampled_from([cap, None])),
        horizon=horizon,
        throughput=None if function is None else [1.0] + [function(n) for n in range(1, N_SLOTS + 1)],
        delay=draw(delay) if "delay" in variants else 0.0,
        async_fraction=draw(async_fraction) if "async" in variants else 0.0,
        jitter=draw(st.floats(0.01, 0.2)) if "jitter" in variants else 0.0,
        draws=None,
    )


def reference(spec, failure_times, policies):
    """The exact run of one fleet (active jobs only)."""
    power, storage = policies
    return simulate_failures_reference(
        spec["compute"],
        spec["write"],
        spec["horizon"],
        failure_times,
        spec["restart"],
        phase=spec["phase"],
        remaining=spec["remaining"],
        cap=spec["cap"],
        throughput=spec["throughput"],
        size=spec["size"],
        power_policy=power,
        storage_policy=storage,
        delay=spec["delay"],
        async_fraction=spec["async_fraction"],
        compute_work=oh.compute_work_of(spec),
    )


@st.composite
def failure_lists(draw, spec, policies):
    """Per active job, a strictly increasing list of at most N_LISTED failure times.

    Random times in [0, H]; after some of them a time inside the down period they cause
    (discarded if the first one hits); on grid fleets also, one at a time, instants of the
    exact run so far: write ends, firings, restart ends, H itself.
    """
    n_active = len(spec["slots"])
    horizon = spec["horizon"]
    times = [set() for _ in range(n_active)]
    # On the grid, multiples of 1/8; off it, 0 or at least 1e-3: a failure a few ulps after
    # t = 0 would put exactly distinct events (its redone cycle's end, H) closer together
    # than float64 resolves.
    if spec["grid"]:
        some_time = st.integers(0, int(8 * horizon)).map(lambda k: k / 8)
        inside = st.integers(0, 3).map(lambda k: k / 4)
    else:
        some_time = st.one_of(st.just(0.0), st.floats(1e-3, horizon))
        inside = st.floats(0.01, 0.99)
    for job in range(n_active):
        for t in draw(st.lists(some_time, max_size=3)):
            times[job].add(t)
            if spec["restart"][job] > 0 and draw(st.booleans()):
                times[job].add(t + draw(inside) * spec["restart"][job])
    if spec["grid"]:
        for _ in range(draw(st.integers(0, 4))):
            instants = oh.exact_instants(reference(spec, [sorted(job) for job in times], policies)["event_times"])
            if not instants:
                break
            job = draw(st.integers(0, n_active - 1))
            times[job].add(draw(st.sampled_from(instants)))
    return [sorted(job)[:N_LISTED] for job in times]


def fleet(specs, policies):
    """The batch of fleets ``specs``, padded to N_SLOTS slots."""
    power, storage = policies
    return oh.fleet_of(specs, N_SLOTS, power_policy=power, storage_policy=storage)


def engine(specs, lists, policies, seed=0):
    """The engine on the batch of fleets ``specs``, with jitter under ``jax.random.key(seed)``."""
    return oh.run_engine(specs, fleet(specs, policies), N_FIRES, lists, N_LISTED, save=JOBS, seed=seed)


def resolvable(spec, failure_times, policies):
    """Whether float64 can tell apart every two distinct instants of the exact run, the
    horizon, any event just after it and the listed failure times included (float64 cannot
    decide whether a time an ulp before t_f + R_i falls inside the down period), and the
    trace's N_FIRES columns hold every firing (short jitter draws can make many)."""
    run = reference(dict(spec, horizon=oh.longer_horizon(spec["horizon"])), failure_times, policies)
    if max(len(fired) for fired in run["fire_times"]) >= N_FIRES:
        return False
    return oh.resolvable(run["event_times"], spec["horizon"], failure_times)


def coverage(spec, exact, listed):
    """What an example exercised, for ``--hypothesis-show-statistics``."""
    kinds, horizon = set(), spec["horizon"]
    for job, times in enumerate(listed):
        hit = set(exact["failure_times"][job])
        if any(t < horizon and t not in hit for t in times):
            kinds.add("a listed time inside a down period")
        others = set(exact["end_times"][job]) | set(exact["fire_times"][job])
        for other in range(len(listed)):
            others |= set(exact["fire_times"][other]) | set(exact["end_times"][other])
        if hit & others:
            kinds.add("a failure at a firing or write end")
        if spec["restart"][job] > 0 and hit & set(exact["restart_times"][job]):
            kinds.add("a failure at a restart end")
        if horizon in hit:
            kinds.add("a failure at H")
        if hit:
            kinds.add("failures")
        fired = exact["fire_times"][job]
        ends = oh.end_columns(fired, exact["end_times"][job])
        after = fired[1:] + [math.inf]
        if any(math.isnan(end) and start <= t < later for start, end, later in zip(fired, ends, after) for t in hit):
            kinds.add("a failure while writing" + (" (and computing, alpha > 0)" if spec["async_fraction"] else ""))
        if hit and spec["delay"]:
            kinds.add("failures under a delayed controller")
        if hit and spec["jitter"]:
            kinds.add("failures with jitter (a redo with the lost cycle's draw)")
    return kinds


def check(specs, lists, policies, seed=0):
    """Engine and reference agree on every fleet of the batch (and `ERRORS` records how
    closely); ``seed``: the key of the jitter draws in ``specs``. Each exact instant is one
    step on grid fleets (exact in float64); float fleets may merge instants float64 cannot
    tell apart."""
    out = engine(specs, lists, policies, seed)
    assert bool(np.all(out.ok)), f"engine did not complete (status {np.asarray(out.status)})"
    for b, (spec, per_job) in enumerate(zip(specs, lists)):
        exact = reference(spec, per_job, policies)
        what = f", failure times {per_job}"
        ERRORS.append(
            oh.assert_run_agrees(out, b, spec, exact, STATS, completed_ends=True, count_steps=spec["grid"], what=what)
        )
        if currently_in_test_context():
            for kind in coverage(spec, exact, per_job):
                event(kind)


@st.composite
def batches(draw, policies, sized, variants=()):
    """``(specs, lists, seed)``: N_FLEETS fleets, their failure times, the jitter key's seed."""
    seed = draw(st.integers(0, 2**16))
    specs = [draw(fleet_specs(sized, variants)) for _ in range(N_FLEETS)]
    lists = [draw(failure_lists(spec, policies)) for spec in specs]
    # A batch of unit-size and sized fleets runs as two groups: topped up to N_FLEETS each,
    # they reuse the programs of batches that do not split. The jitter draws are keyed by
    # the fleet's place in the batch, so they come last.
    specs, lists = oh.even_groups(specs, lists)
    specs = oh.with_jitter_draws(specs, fleet(specs, policies), seed, N_DRAWS)
    assume(all(resolvable(spec, times, policies) for spec, times in zip(specs, lists)))
    return specs, lists, seed


# The default tier: three pairs (the base rules, and two size-aware pairs that between
# them cover every power and storage policy); each compiles once.
DEFAULT = [(("maxmin", "fair"), False), (("maxmin", "weighted"), True), (("uniform", "fcfs"), True)]


@pytest.mark.parametrize("policies, sized", DEFAULT)
@oh.oracle_settings(6)
@given(data=st.data())
def test_engine_matches_the_failure_reference(policies, sized, data):
    specs, lists, seed = data.draw(batches(policies, sized))
    check(specs, lists, policies, seed)


@pytest.mark.slow
@pytest.mark.parametrize("policies", POLICIES)
@pytest.mark.parametrize("sized", [False, True])
@oh.oracle_settings(60)
@given(data=st.data())
def test_engine_matches_the_failure_reference_thoroughly(policies, sized, data):
    specs, lists, seed = data.draw(batches(policies, sized))
    check(specs, lists, policies, seed)


# The variants of §1 with failures (docs/model.md §1c "In the engine"): the delayed controller
# sees a failure or a restart tau later, an asynchronous write covers the cycle before its
# firing (a failure while it drains loses that cycle and the progress since), and the redo
# reuses the lost cycle's jitter draw. Sizes are drawn per fleet, so each test compiles the
# unit-size and the size-aware program.
VARIANTS = {
    "delay": ("delay",),
    "async": ("async",),
    "jitter": ("jitter",),
    "delay, async and jitter": ("delay", "async", "jitter"),
}
DEFAULT_VARIANTS = [
    ("delay", ("uniform", "fcfs")),
    ("async", ("maxmin", "weighted")),
    ("jitter", ("maxmin", "fair")),
    ("delay, async and jitter", ("uniform", "weighted")),
]


@pytest.mark.parametrize("variant, policies", DEFAULT_VARIANTS, ids=[v for v, _ in DEFAULT_VARIANTS])
@oh.oracle_settings(20)
@given(data=st.data())
def test_engine_matches_the_failure_reference_with_variants(variant, policies, data):
    specs, lists, seed = data.draw(batches(policies, None, VARIANTS[variant]))
    check(specs, lists, policies, seed)


@pytest.mark.slow
@pytest.mark.parametrize("policies", POLICIES)
@pytest.mark.parametrize("variant", sorted(VARIANTS))
@oh.oracle_settings(60)
@given(data=st.data())
def test_engine_matches_the_failure_reference_with_variants_thoroughly(variant, policies, data):
    specs, lists, seed = data.draw(batches(policies, None, VARIANTS[variant]))
    check(specs, lists, policies, seed)


def _grid_fleet(**kw):
    return dict(
        grid=True,
        slots=[0, 2],
        compute=[2.0, 3.0],
        write=[1.0, 1.0],
        restart=[1.0, 0.0],
        size=[1.0, 1.0],
        phase=[0, 0],
        remaining=[2.0, 3.0],
        cap=None,
        horizon=12.0,
        throughput=None,
        delay=0.0,
        async_fraction=0.0,
        jitter=0.0,
        draws=None,
        **kw,
    )


# Job 0 (T = 2, R = 1) fires at 2 and writes alone until 3, when job 1 (T = 3, R = 0) fires.
TIES = {
    "at a write end (nothing lost), inside the down period, at the restart end": [[3.0, 3.5, 4.0], [5.0]],
    "at a firing (the cycle is lost); R = 0 and again just after": [[2.0], [3.0, 3.0 + 1e-3]],
    "at a restart end, and at H": [[1.0, 2.0], [12.0]],
    "at t = 0": [[0.0], []],
}


@pytest.mark.parametrize("lists", list(TIES.values()), ids=list(TIES))
def test_engine_matches_the_failure_reference_at_ties(lists):
    check([_grid_fleet(), _grid_fleet()], [lists, [[], []]], ("maxmin", "fair"))


# Switches at the very instant H, which the engine's clock reaches a few ulps early after
# steps of inexact length (thirds): they and H are one instant, one step, not a switch at
# 13.999999999999998 and a step of one ulp to 14 (found by hypothesis, maxmin power and
# weighted storage on sized fleets, without and with failures; the snapping rule applies at
# the horizon, docs/model.md §1).
_SIZED = dict(
    grid=True,
    slots=[0, 1, 2, 3],
    phase=[0, 0, 0, 0],
    throughput=None,
    delay=0.0,
    async_fraction=0.0,
    jitter=0.0,
    draws=None,
)
HORIZON_INSTANTS = {
    "a firing at H (no failures)": (
        dict(
            _SIZED,
            compute=[1.75, 2.5, 2.25, 0.5],
            write=[0.25, 0.25, 0.25, 0.5],
            restart=[0.0] * 4,
            size=[2.0, 1.0, 2.0, 1.0],
            remaining=[0.4375, 0.625, 0.5625, 0.125],
            cap=1.0,
            horizon=13.0,
        ),
        [[], [], [], []],
    ),
    "a firing at H (failures)": (
        dict(
            _SIZED,
            compute=[2.25, 2.75, 2.75, 0.75],
            write=[0.25] * 4,
            restart=[0.5, 0.25, 1.75, 0.0],
            size=[4.0, 4.0, 1.0, 1.0],
            remaining=[0.5625, 0.6875, 0.6875, 0.5625],
            cap=4.0,
            horizon=14.0,
        ),
        [[0.5625, 7.375, 7.5], [0.0], [0.0, 6.25], []],
    ),
    "a write end and a failure at H": (
        dict(
            _SIZED,
            compute=[2.25, 3.0, 2.75, 2.0],
            write=[2.0, 1.5, 0.5, 0.5],
            restart=[0.5, 0.25, 1.75, 1.0],
            size=[4.0, 4.0, 1.0, 1.0],
            remaining=[1.6875, 1.5, 2.0625, 1.5],
            cap=8.0,
            horizon=14.25,
        ),
        [[7.75, 8.125, 10.5, 10.625, 13.625], [3.0, 3.1875, 10.5, 13.375], [1.5, 6.25, 7.125, 13.75], [14.25]],
    ),
}


@pytest.mark.parametrize("spec, lists", list(HORIZON_INSTANTS.values()), ids=list(HORIZON_INSTANTS))
def test_a_switch_at_the_horizon_is_one_instant(spec, lists):
    check([spec, spec], [lists, lists], ("maxmin", "weighted"))


# The step to H from a clock below H / 2, where clock + (H - clock) rounds: a run stops at H
# exactly, neither an ulp past it nor a step of an ulp later. Both jobs fire at r and end
# their write at r + 1/2, the clock then jumps to H; ``grid`` asks `check` to count steps.
@pytest.mark.parametrize("r, horizon", [(0.347, 5.726), (0.184, 3.256)], ids=["short of H", "past H"])
def test_the_step_to_the_horizon_lands_on_it(r, horizon):
    assert (r + 0.5) + (horizon - (r + 0.5)) != horizon
    spec = dict(
        _grid_fleet(), compute=[20.0, 20.0], write=[0.25, 0.25], restart=[0.0, 0.0], remaining=[r, r], horizon=horizon
    )
    check([spec, spec], [[[], []], [[], []]], ("maxmin", "fair"))


@pytest.mark.parametrize("method", ["fifo", "clock"])
def test_the_fast_paths_land_on_the_horizon(method):
    # The same two fleets on the FIFO and clock paths (no failures): the same instants as
    # the general engine, and a stop at H exactly.
    horizon = np.array([5.726, 3.256])
    fleet = cj.Fleet(np.full((2, 2), 20.0), np.full((2, 2), 0.25))
    state = cj.initial_state(fleet, phase=np.zeros((2, 2), int), remaining=np.array([[0.347] * 2, [0.184] * 2]))
    fast, general = (cj.simulate(fleet, state, n_fires=2, until=horizon, method=m) for m in (method, "general"))
    np.testing.assert_array_equal(fast.time, horizon)
    for name in ("time", "fire_times", "end_times", "n_events"):
        np.testing.assert_array_equal(getattr(fast, name), getattr(general, name), err_msg=name)


@pytest.mark.parametrize(
    "times, match",
    [
        (np.full((2, 3), 1.0), "strictly increasing"),
        (np.array([[np.nan, 1.0], [np.inf, np.inf]]), "strictly increasing"),  # NaN pads a row's end only
        (np.array([[-1.0, 2.0], [np.inf, np.inf]]), ">= 0"),
        (np.array([[np.inf, 2.0], [np.inf, np.inf]]), "strictly increasing"),
        (np.ones(2), "shape"),
        (np.ones((3, 1)), "shape"),
        ("x", "failure_times must be"),
    ],
)
def test_bad_failure_times_name_the_argument(times, match):
    fleet = cj.Fleet([1.0, 2.0], [0.5, 0.5], restart=1.0)
    with pytest.raises(ValueError, match=match) as raised:
        cj.simulate(fleet, cj.initial_state(fleet), n_fires=3, failure_times=times)
    assert "failure_times" in str(raised.value)


def test_failure_times_need_the_general_engine():
    fleet = cj.Fleet([1.0, 2.0], [0.5, 0.5])
    for method in ("fifo", "clock"):
        with pytest.raises(ValueError, match="failure_times"):
            cj.simulate(fleet, cj.initial_state(fleet), n_fires=3, failure_times=[[1.0], [2.0]], method=method)


def test_listed_failures_replace_the_draws():
    # With failure_times, mtbf and the key change nothing; without failures listed, the
    # run is the failure-free one.
    fleet = cj.Fleet([[1.0, 2.0]], [[0.5, 0.5]], restart=0.25)
    state = cj.initial_state(fleet)
    times = [[[1.2, 4.0], [np.inf, np.inf]]]
    args = dict(n_fires=8, until=10.0, save=JOBS, failure_times=times)
    base = cj.simulate(fleet, state, **args)
    drawn = cj.Fleet([[1.0, 2.0]], [[0.5, 0.5]], restart=0.25, mtbf=0.1)
    other = cj.simulate(drawn, state, key=jax.random.key(5), **args)
    for x, y in zip(jax.tree_util.tree_leaves(base), jax.tree_util.tree_leaves(other)):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))
    np.testing.assert_array_equal(base.jobs.failures, [[2, 0]])
    none = cj.simulate(fleet, state, **dict(args, failure_times=np.full((1, 2, 1), np.inf)))
    free = cj.simulate(fleet, state, n_fires=8, until=10.0, save=JOBS)
    np.testing.assert_array_equal(none.fire_times, free.fire_times)
    np.testing.assert_array_equal(none.end_times, free.end_times)
