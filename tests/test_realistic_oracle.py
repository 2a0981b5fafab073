"""Write limits, two-level checkpoints and the power draw (docs/model.md §1d): the engine
against the exact reference.

`reference.simulate_realistic_reference` integrates each fleet in exact rational arithmetic,
event by event, from the very float64 inputs the engine gets; `simulate(..., until=H,
failure_times=...)` must agree with it to 1e-9 relative (plus 1e-12 of H where the exact
value is 0): fire and end times (NaN for a checkpoint abandoned or in flight at H), the
`JobStats` fields, the `PowerStats` fields, and the number of steps (one per exact instant).

Fleets are random and deterministic (a seeded NumPy generator): 2-4 active jobs in 4 slots,
sizes 1, 2, 4, capped or not, any f preset, per-job write limits (some infinite), idle power,
restart times, listed failures, blocking (some asynchronous, alpha > 0) or two-level
checkpoints (snapshots of length 0 among them), and "grid" fleets (multiples of 1/4, exact in
float64) where many events fall on one instant, failures included: some are put at the very
instants of the exact run (snapshot ends, drain ends, firings, restart ends). Each (power,
storage) pair runs its fleets in one `simulate` call per kind of checkpoint, so the engine
compiles a few times per pair; jitter (the redo of the first lost cycle) has its own test.
The recovery oracle (tests/test_recovery_oracle.py) runs this module's fleets with recovery
reads, through the same `reference` and `check`.
"""

import math
from fractions import Fraction

import numpy as np
import oracle_helpers as oh
import pytest
from reference import THROUGHPUT_KINDS, power_stats, simulate_realistic_reference

import ckpt_jax as cj

N_SLOTS = 4
N_LISTED = 6  # failure times per job, padded with +inf
N_FIRES = 30  # trace columns: more than any job fires before H
N_DRAWS = N_FIRES + 1  # jitter draws per job: compute phases 0..N_FIRES
STATS = (
    "useful_work",
    "persisted_work",
    "lost_work",
    "down_time",
    "write_time",
    "compute_time",
    "snapshot_time",
    "wait_time",
    "completed_write_time",
)
POLICIES = [(power, storage) for power in ("maxmin", "uniform") for storage in ("fair", "weighted", "fcfs")]


def random_spec(
    rng, grid, two_level, failing, asynchronous=False, jitter=False, sized=True, limited=True, overhead=False
):
    """One fleet of 2..N_SLOTS active jobs in N_SLOTS slots, as a dict of Python values.

    ``sized``: sizes from {1, 2, 4}, one at least not 1, else all 1; ``limited``: write limits,
    one at least finite, else none. The engine runs fleets with and without sizes (and
    limits) of one call as separate programs, so each call here draws one kind. ``overhead``:
    fixed checkpoint overheads (docs/model.md §1g), one at least positive, some 0 (drawn
    last, so the other fields are those drawn without)."""
    n_active = int(rng.integers(2, N_SLOTS + 1))
    slots = sorted(int(x) for x in rng.permutation(N_SLOTS)[:n_active])
    if grid:
        quarters = lambda low, high, n=n_active: [float(x) for x in rng.integers(4 * low, 4 * high + 1, n) / 4]  # noqa: E731
        compute, write, restart = quarters(2, 3), quarters(1, 2), quarters(0, 1)
        limit = [x if rng.random() < 0.6 else math.inf for x in quarters(1, 2)]
        snap = quarters(0, 1)
        kind = ["shared", "linear"][int(rng.integers(2))]
        cap = float(rng.integers(1, 2 * n_active + 1))
        horizon = float(rng.integers(24, 41)) / 4
        fractions = quarters(1, 1)
        alpha = quarters(1, 1, 1)[0]
        idle = [0.0, 0.25, 0.5][int(rng.integers(3))]
    else:
        uniform = lambda low, high, n=n_active: [float(x) for x in rng.uniform(low, high, n)]  # noqa: E731
        compute, write = uniform(0.5, 3.0), uniform(0.1, 2.0)
        restart = [0.0 if rng.random() < 0.3 else x for x in uniform(0.05, 1.0)]
        limit = [x if rng.random() < 0.6 else math.inf for x in uniform(0.1, 1.5)]
        snap = [0.0 if rng.random() < 0.25 else x for x in uniform(0.01, 0.6)]
        kind = sorted(THROUGHPUT_KINDS)[int(rng.integers(len(THROUGHPUT_KINDS)))]
        cap = uniform(0.5, 2.0 * n_active, 1)[0]
        horizon = uniform(5.0, 12.0, 1)[0]
        fractions = uniform(0.01, 1.0)
        alpha = uniform(0.05, 1.0, 1)[0]
        idle = uniform(0.0, 0.5, 1)[0] if rng.random() < 0.7 else 0.0
    size = [float(x) for x in rng.choice([1.0, 2.0, 4.0], n_active)] if sized else [1.0] * n_active
    if sized and all(w == 1 for w in size):
        size[int(rng.integers(n_active))] = float(rng.choice([2.0, 4.0]))
    if not limited:
        limit = [math.inf] * n_active
    elif all(math.isinf(b) for b in limit):
        limit[int(rng.integers(n_active))] = 1.0 if grid else float(rng.uniform(0.1, 1.5))
    phase = [int(x) for x in rng.integers(0, 2, n_active)]
    failures = [[] for _ in range(n_active)]
    if failing:
        for job in range(n_active):
            count = int(rng.integers(0, 3))
            times = rng.integers(0, int(8 * horizon) + 1, count) / 8 if grid else rng.uniform(1e-3, horizon, count)
            failures[job] = sorted({float(x) for x in times})
    function = THROUGHPUT_KINDS[kind]
    overheads = None
    if overhead:
        if grid:
            overheads = [float(x) for x in rng.integers(0, 5, n_active) / 4]
        else:
            overheads = [0.0 if rng.random() < 0.25 else float(x) for x in rng.uniform(0.01, 0.8, n_active)]
        if not any(overheads):
            overheads[int(rng.integers(n_active))] = 0.5
    return dict(
        overhead=overheads,
        grid=grid,
        slots=slots,
        compute=compute,
        write=write,
        restart=restart,
        write_limit=limit,
        snapshot=snap if two_level else None,
        size=size,
        phase=phase,
        remaining=[f * (write[j] if phase[j] else compute[j]) for j, f in enumerate(fractions)],
        cap=cap if rng.random() < 0.6 else None,
        throughput=None if function is None else [1.0] + [function(n) for n in range(1, N_SLOTS + 1)],
        async_fraction=alpha if asynchronous else 0.0,
        idle_power=idle,
        jitter=uniform(0.05, 0.3, 1)[0] if jitter else 0.0,
        horizon=horizon,
        failures=failures,
        draws=None,
    )


def reference(spec, policies, recover_from="storage", horizon=None):
    """The exact run of one fleet (active jobs only); with its recovery reads and failure
    rule where the spec has them (tests/test_recovery_oracle.py)."""
    power, storage = policies
    return simulate_realistic_reference(
        spec["compute"],
        spec["write"],
        spec["horizon"] if horizon is None else horizon,
        failure_times=spec["failures"],
        restart=spec["restart"],
        phase=spec["phase"],
        remaining=spec["remaining"],
        cap=spec["cap"],
        throughput=spec["throughput"],
        size=spec["size"],
        power_policy=power,
        storage_policy=storage,
        write_limit=spec["write_limit"],
        snapshot=spec["snapshot"],
        recover_from=recover_from,
        async_fraction=spec["async_fraction"],
        idle_power=spec["idle_power"],
        compute_work=oh.compute_work_of(spec),
        recovery_read=spec.get("recovery_read"),
        fail_while_down=spec.get("fail_while_down", False),
        domain=spec.get("domain"),
        outages=spec.get("outages"),
        restart_stagger=spec.get("restart_stagger") or 0,
        overhead=spec.get("overhead"),
    )


def resolvable(spec, policies, recover_from="storage"):
    """Whether float64 tells apart every two distinct instants of the exact run (a little
    past H, listed failure times and restart ends included) and the trace holds every firing."""
    run = reference(spec, policies, recover_from, horizon=oh.longer_horizon(spec["horizon"]))
    if max(len(fired) for fired in run["fire_times"]) >= N_FIRES:
        return False
    return oh.resolvable(run["event_times"], spec["horizon"], spec["failures"], spec["restart"])


def with_ties(rng, spec, policies, recover_from="storage"):
    """On a grid fleet with failures, up to two more failures, each at an instant of the
    exact run so far that float64 holds exactly (a failure an ulp before an instant it does
    not hold would pre-empt it in the exact run, and no float run can tell)."""
    for _ in range(int(rng.integers(1, 3))):
        instants = oh.exact_instants(reference(spec, policies, recover_from)["event_times"])
        job = int(rng.integers(len(spec["slots"])))
        times = sorted(set(spec["failures"][job]) | {instants[int(rng.integers(len(instants)))]})
        spec = dict(spec, failures=[times if j == job else t for j, t in enumerate(spec["failures"])])
    return spec


def random_specs(seed, kinds, policies, recover_from, sized=True, limited=True, overhead=False):
    """One resolvable fleet per (grid, two_level, failing, asynchronous) in ``kinds``."""
    rng = np.random.default_rng(seed)
    specs = []
    for grid, two_level, failing, asynchronous in kinds:
        while True:
            spec = random_spec(
                rng, grid, two_level, failing, asynchronous, sized=sized, limited=limited, overhead=overhead
            )
            if grid and failing:
                spec = with_ties(rng, spec, policies, recover_from)
            if max(map(len, spec["failures"])) <= N_LISTED and resolvable(spec, policies, recover_from):
                specs.append(spec)
                break
    return specs


def fleet(specs, policies, recover_from="storage"):
    """The batch of fleets ``specs``, padded to N_SLOTS slots (one failure rule per batch)."""
    power, storage = policies
    static = dict(power_policy=power, storage_policy=storage, recover_from=recover_from)
    if "fail_while_down" in specs[0]:
        assert len({spec["fail_while_down"] for spec in specs}) == 1
        static["fail_while_down"] = specs[0]["fail_while_down"]
    if specs[0].get("outage_mtbf") is not None:  # drawn outages (tests/test_outages_oracle.py)
        static["outage_mtbf"] = np.array([spec["outage_mtbf"] for spec in specs])
    elif specs[0].get("outages") is not None:  # replayed outages: (B, K, 2) rows, NaN padded
        width = max(1, max(len(spec["outages"]) for spec in specs))
        rows = np.full((len(specs), width, 2), np.nan)
        for b, spec in enumerate(specs):
            rows[b, : len(spec["outages"])] = np.asarray(spec["outages"], dtype=float).reshape(-1, 2)
        static["outage_times"] = rows
    return oh.fleet_of(specs, N_SLOTS, **static)


def with_draws(specs, policies, recover_from, seed):
    """``specs`` with the engine's jitter draws under ``jax.random.key(seed)``."""
    return oh.with_jitter_draws(specs, fleet(specs, policies, recover_from), seed, N_DRAWS)


def engine(specs, policies, recover_from="storage", failing=True, bins=None, threshold=None, seed=0):
    """One `simulate` call on the batch of fleets ``specs``."""
    return oh.run_engine(
        specs,
        fleet(specs, policies, recover_from),
        N_FIRES,
        lists=[spec["failures"] for spec in specs] if failing else None,
        n_listed=N_LISTED,
        save=cj.SaveAt(jobs=True, power=True, power_bins=bins, power_threshold=threshold),
        seed=seed,
    )


def check(specs, policies, recover_from="storage", failing=True, bins=None, threshold=None, seed=0):
    """Engine and reference agree on every fleet of ``specs`` (one simulate call)."""
    out = engine(specs, policies, recover_from, failing, bins, threshold, seed)
    assert bool(np.all(out.ok)), f"engine did not complete (status {np.asarray(out.status)})"
    for b, spec in enumerate(specs):
        exact = reference(spec, policies, recover_from)
        what = f" ({policies}, {recover_from})"
        oh.assert_run_agrees(out, b, spec, exact, STATS, what=what)
        check_power(out.power, b, exact, spec["horizon"], bins, threshold, f"fleet {b}{what}: {spec}")


def check_power(power, b, exact, horizon, bins, threshold, what):
    """The engine's PowerStats of fleet ``b`` against the exact draw.

    A draw within rounding of a bin edge, or a step within rounding of the threshold, may
    fall on either side; such bins and steps are held to either answer. A step that is
    exactly 0 may come out of float64 as a few ulps (a draw summed from other terms): the
    count of changes here allows it, `test_an_exactly_unchanged_draw_is_no_change` does not.
    """
    total = exact["total_size"]
    scale = float(total)
    edges = [Fraction(float(e)) for e in np.asarray(power.edges)[b]]
    asked = bins if bins is None or isinstance(bins, int) else [Fraction(float(e)) for e in bins]
    oh.assert_close(
        edges, [float(e) for e in power_stats(exact["power"], total, bins=asked)["edges"]], scale, f"edges, {what}"
    )
    stats = power_stats(exact["power"], total, bins=edges, threshold=None if threshold is None else Fraction(threshold))
    oh.assert_close(np.asarray(power.full_draw)[b], scale, scale, f"power full_draw, {what}")
    for name in ("mean", "max", "min", "largest_drop", "largest_rise", "threshold"):
        oh.assert_close(np.asarray(getattr(power, name))[b], float(stats[name]), scale, f"power {name}, {what}")
    near = lambda x, y: abs(x - y) <= 1e-9 * total  # noqa: E731
    draws = [draw for _, _, draw in exact["power"]]
    if not any(near(draw, edge) for draw in draws for edge in edges[1:-1]):
        oh.assert_close(
            np.asarray(power.time)[b], [float(x) for x in stats["time"]], horizon, f"power time per bin, {what}"
        )
    steps = [abs(after[2] - before[2]) for before, after in zip(exact["power"], exact["power"][1:])]
    limit = stats["threshold"]
    sure = sum(1 for step in steps if step > limit and not near(step, limit))
    maybe = sum(1 for step in steps if near(step, limit))
    assert sure <= int(np.asarray(power.n_steps)[b]) <= sure + maybe, f"n_steps, exact {stats['n_steps']}; {what}"
    changes = int(np.asarray(power.n_changes)[b])
    sure, maybe = stats["n_changes"], sum(1 for step in steps if near(step, 0))
    assert sure <= changes <= maybe + sum(1 for step in steps if not near(step, 0)), (
        f"n_changes {changes}, exact {stats['n_changes']}; {what}"
    )


# (grid, two_level, failing, asynchronous) per fleet of one call.


BLOCKING = [
    (False, False, False, False),
    (False, False, True, False),
    (True, False, True, False),
    (False, False, True, True),
    (True, False, True, True),
]
TWO_LEVEL = [
    (False, True, False, False),
    (False, True, True, False),
    (True, True, True, False),
    (True, True, False, False),
    (False, True, True, False),
    (True, True, True, False),
]


# Power bins per pair: the default (50 over [0, W]), a number with a threshold, or edges.
BINS = [(None, None), (7, 0.5), (np.linspace(0.1, 3.3, 9), None)]


@pytest.mark.parametrize("power, storage", POLICIES)
@pytest.mark.parametrize("kinds", [BLOCKING, TWO_LEVEL], ids=["blocking", "two-level"])
def test_engine_matches_the_realistic_reference(power, storage, kinds):
    # Sized fleets with write limits.
    index = POLICIES.index((power, storage))
    bins, threshold = BINS[(index + (kinds is TWO_LEVEL)) % len(BINS)]
    specs = random_specs(24_000 + 10 * index + (kinds is TWO_LEVEL), kinds, (power, storage), "storage")
    check(specs, (power, storage), bins=bins, threshold=threshold)


@pytest.mark.parametrize("kinds", [BLOCKING, TWO_LEVEL], ids=["blocking", "two-level"])
def test_engine_matches_the_realistic_reference_with_unit_sizes_and_no_limits(kinds):
    # The engine's other programs: every size 1, no write limit (the base rules).
    policies = ("maxmin", "fair")
    specs = random_specs(24_050 + (kinds is TWO_LEVEL), kinds, policies, "storage", sized=False, limited=False)
    check(specs, policies)


@pytest.mark.parametrize("policies", [("uniform", "weighted"), ("maxmin", "fcfs")])
def test_engine_matches_the_realistic_reference_recovering_from_memory(policies):
    seed = 24_100 + POLICIES.index(policies)
    check(random_specs(seed, TWO_LEVEL, policies, "memory"), policies, recover_from="memory")


@pytest.mark.parametrize("recover_from", ["storage", "memory"])
def test_a_failure_redoes_the_first_lost_cycle_with_its_draw(recover_from):
    # Jitter: the redo after a failure has the work of the first lost cycle (docs/model.md §1d:
    # the cycle before the firing whose checkpoint was in flight and not yet safe).
    policies = ("maxmin", "weighted")
    rng = np.random.default_rng(24_300 + (recover_from == "memory"))
    while True:  # four fleets whose failures hit both a snapshot and a drain
        specs = []
        while len(specs) < 4:
            spec = random_spec(rng, grid=False, two_level=True, failing=True, jitter=True)
            if resolvable(spec, policies, recover_from):  # with T, as a first filter
                specs.append(spec)
        specs = with_draws(specs, policies, recover_from, seed=7)
        hit = set().union(*(failures_hit(spec, policies, recover_from) for spec in specs))
        if {"snapshot", "drain"} <= hit and all(resolvable(spec, policies, recover_from) for spec in specs):
            break
    check(specs, policies, recover_from=recover_from, seed=7)


def failures_hit(spec, policies, recover_from):
    """The phases of two-level checkpoints that failures of the exact run interrupt, where
    the job then redoes its lost cycle in full (the redo's work shows in its next firing)."""
    run = reference(spec, policies, recover_from)
    phases = set()
    for job, hits in enumerate(run["failure_times"]):
        fire_times = run["fire_times"][job]
        for k, (fired, ended) in enumerate(zip(fire_times, run["end_times"][job])):
            snapshot_end = fired + Fraction(spec["snapshot"][job])
            next_fire = fire_times[k + 1] if k + 1 < len(fire_times) else None
            if ended is not None or next_fire is None:
                continue
            # One failure between the firings: it hit the checkpoint, the next firing ends the redo.
            between = [t for t in hits if fired <= t < next_fire]
            if len(between) == 1:
                phases.add("snapshot" if between[0] < snapshot_end else "drain")
    return phases


@pytest.mark.parametrize(
    "kinds, policies, recover_from",
    [(BLOCKING, ("maxmin", "fcfs"), "storage"), (TWO_LEVEL, ("uniform", "weighted"), "memory")],
    ids=["blocking", "two-level"],
)
def test_engine_matches_the_realistic_reference_with_overheads(kinds, policies, recover_from):
    # The fixed overhead (docs/model.md §1g) before the write or the snapshot, failures hitting
    # it among the others (grid fleets put some at its very instants).
    seed = 24_400 + (kinds is TWO_LEVEL)
    check(random_specs(seed, kinds, policies, recover_from, overhead=True), policies, recover_from=recover_from)


def test_engine_matches_the_realistic_reference_without_failure_times():
    # No failure_times at all (the failure-free path).
    policies = ("maxmin", "fcfs")
    kinds = [(False, True, False, False), (True, True, False, False), (False, True, False, False)]
    check(random_specs(24_200, kinds, policies, "storage"), policies, failing=False)


def test_an_exactly_unchanged_draw_is_no_change():
    # Blocking, uniform power, C = 6, sizes (2, 4, 1), idle power 1/2, no failures: at
    # t = 4.3958... and 4.6458... the computing set changes while the draw stays exactly 6
    # (the cap binds before and after), so the draw changes at 11 instants. float64 sums the
    # draw from other terms on each side, and a step of a few ulps is not a change.
    spec = dict(
        grid=True,
        slots=[0, 1, 2],
        compute=[1.0, 1.75, 1.0],
        write=[0.25, 1.0, 0.5],
        restart=[0.0] * 3,
        write_limit=[math.inf] * 3,
        snapshot=None,
        size=[2.0, 4.0, 1.0],
        phase=[0, 0, 0],
        remaining=[1.0, 1.75, 1.0],
        cap=6.0,
        throughput=None,
        async_fraction=0.0,
        idle_power=0.5,
        jitter=0.0,
        horizon=6.0,
        failures=[[], [], []],
        draws=None,
    )
    policies = ("uniform", "fair")
    exact = power_stats(reference(spec, policies, "storage")["power"], Fraction(7))
    out = engine([spec], policies, "storage", failing=False)
    assert exact["n_changes"] == 11
    assert int(np.asarray(out.power.n_changes)[0]) == exact["n_changes"]


def _two_level_pair(failures):
    # Job 0: T = 2, s = 1/2, d = 1 at f = 1 (no backpressure); job 1: T = 3, s = 1/4, d = 2
    # limited to 1/2 (D = 4 > T: it waits on its drain, then fires at the drain's end).
    return dict(
        grid=True,
        slots=[0, 2],
        compute=[2.0, 3.0],
        write=[1.0, 2.0],
        restart=[0.5, 0.25],
        write_limit=[math.inf, 0.5],
        snapshot=[0.5, 0.25],
        size=[1.0, 2.0],
        phase=[0, 0],
        remaining=[2.0, 3.0],
        cap=None,
        throughput=None,
        async_fraction=0.0,
        idle_power=0.25,
        jitter=0.0,
        horizon=16.0,
        failures=failures,
        draws=None,
    )


@pytest.mark.parametrize("recover_from", ["storage", "memory"])
def test_failures_at_the_instants_of_two_level_switches(recover_from):
    # A failure at the very instant of a snapshot end (the snapshot ends first: under
    # "memory" its checkpoint is safe), a drain end (persisted first), a backpressured firing
    # (it fires first, then the failure abandons the new snapshot), a restart end, and H.
    policies = ("maxmin", "weighted")
    free = reference(_two_level_pair([[], []]), policies, recover_from)
    fire0, end0, fire1, end1 = free["fire_times"][0], free["end_times"][0], free["fire_times"][1], free["end_times"][1]
    waited = [t for t in fire1 if t in end1]
    assert waited, "job 1 must fire at one of its drain ends"
    ties = {
        "snapshot end": [[float(fire0[1]) + 0.5], []],
        "drain end": [[float(end0[0])], [float(end1[0])]],
        "backpressured firing": [[], [float(waited[0])]],
        "restart end": [[3.0, 3.5], [float(fire1[0]), float(fire1[0]) + 0.25]],
        "H": [[16.0], [1.0, 16.0]],
    }
    specs = [_two_level_pair(lists) for lists in ties.values()]
    for spec in specs:
        assert resolvable(spec, policies, recover_from)
    check(specs, policies, recover_from=recover_from)
