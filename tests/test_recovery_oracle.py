"""Recovery reads and failures while down (docs/model.md §1e): the engine against the exact
reference.

`reference.simulate_realistic_reference` learns both from the rules (a reader is a storage user
among the writers; with ``fail_while_down`` a failure also hits a job that is down or reading and
starts its recovery over), and integrates each fleet in exact rational arithmetic from the very
float64 inputs the engine gets. `simulate(..., until=H, failure_times=...)` must agree to 1e-9
relative (`test_realistic_oracle.check`'s fields: fire and end times, `JobStats`, `PowerStats`,
and one step per exact instant) on small random fleets: sized, with write limits, under the
fair, weighted and fcfs storage policies, blocking (some asynchronous) or two-level, grid fleets
with failures at the exact run's own instants, with and without failures, ``fail_while_down`` on
and off. A second failure is often put inside the first one's recovery, so that it either
restarts the recovery (on) or is passed over (off).
"""

import math
from fractions import Fraction

import jax
import numpy as np
import pytest
import test_realistic_oracle as oracle
from reference import simulate_realistic_reference

import ckpt_jax as cj


def reference(spec, policies, recover_from="storage", horizon=None):
    """The exact run of one fleet (active jobs only), with its reads and failure rule."""
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
        recovery_read=spec["recovery_read"],
        fail_while_down=spec["fail_while_down"],
    )


def random_spec(rng, grid, two_level, failing, asynchronous, fail_while_down, sized=True, limited=True):
    """`test_realistic_oracle.random_spec` with recovery reads r_i (some 0) and, where it fails,
    often a second failure inside the first one's recovery (restart plus a solo read)."""
    spec = oracle.random_spec(rng, grid, two_level, failing, asynchronous, sized=sized, limited=limited)
    n_active = len(spec["slots"])
    if grid:
        reads = [float(x) for x in rng.integers(0, 9, n_active) / 4]
    else:
        reads = [0.0 if rng.random() < 0.25 else float(x) for x in rng.uniform(0.1, 1.5, n_active)]
    failures = []
    for times, restart, read in zip(spec["failures"], spec["restart"], reads):
        if times and rng.random() < 0.7:
            inside = times[0] + (restart + read) * (rng.integers(1, 8) / 8 if grid else rng.uniform(0.05, 0.95))
            times = sorted(set(times) | {float(inside)})
        failures.append(times)
    return dict(spec, recovery_read=reads, failures=failures, fail_while_down=fail_while_down)


def resolvable(spec, policies):
    """Float64 tells apart every two distinct instants of the exact run (a little past H,
    listed failure times and restart ends included) and the trace holds every firing."""
    longer = Fraction(spec["horizon"]) * (1 + Fraction(oracle.RESOLUTION))
    run = reference(spec, policies, horizon=longer)
    if max(len(fired) for fired in run["fire_times"]) >= oracle.N_FIRES:
        return False
    listed = {Fraction(t) for job in spec["failures"] for t in job}
    listed |= {Fraction(t) + Fraction(r) for job, r in zip(spec["failures"], spec["restart"]) for t in job}
    instants = sorted(set(run["event_times"][:-1]) | listed | {Fraction(spec["horizon"])})
    return all(b - a > oracle.RESOLUTION * max(b, 1) for a, b in zip(instants, instants[1:]))


def with_ties(rng, spec, policies):
    """Up to two more failures of a grid fleet, each at an instant of the exact run so far
    that float64 holds exactly (read ends and restart ends among them)."""
    for _ in range(int(rng.integers(1, 3))):
        instants = [t for t in reference(spec, policies)["event_times"] if Fraction(float(t)) == t]
        job = int(rng.integers(len(spec["slots"])))
        times = sorted(set(spec["failures"][job]) | {float(instants[int(rng.integers(len(instants)))])})
        spec = dict(spec, failures=[times if j == job else t for j, t in enumerate(spec["failures"])])
    return spec


def random_specs(seed, kinds, policies, fail_while_down, sized=True, limited=True):
    """One resolvable fleet per (grid, two_level, failing, asynchronous) in ``kinds``, where the
    exact run reads at least once in every failing fleet."""
    rng = np.random.default_rng(seed)
    specs = []
    for grid, two_level, failing, asynchronous in kinds:
        while True:
            spec = random_spec(rng, grid, two_level, failing, asynchronous, fail_while_down, sized, limited)
            if grid and failing:
                spec = with_ties(rng, spec, policies)
            if max(map(len, spec["failures"])) > oracle.N_LISTED or not resolvable(spec, policies):
                continue
            if failing and not any(reference(spec, policies)["read_time"]):
                continue
            specs.append(spec)
            break
    return specs


def engine(specs, policies, failing=True):
    """One `simulate` call on the batch of fleets ``specs`` (one failure rule for the batch)."""
    power, storage = policies
    field = lambda name, filler: np.array([oracle.padded(s[name], s["slots"], filler) for s in specs])  # noqa: E731
    two_level = specs[0]["snapshot"] is not None
    fail_while_down = specs[0]["fail_while_down"]
    assert all((s["snapshot"] is not None) == two_level and s["fail_while_down"] == fail_while_down for s in specs)
    fleet = cj.Fleet(
        field("compute", 1.25),
        field("write", 0.75),
        cap=[s["cap"] for s in specs],
        throughput=np.array([s["throughput"] or [1.0] * (oracle.N_SLOTS + 1) for s in specs]),
        size=field("size", 1.0),
        restart=field("restart", 0.5),
        active=np.array([oracle.padded([True] * len(s["slots"]), s["slots"], False) for s in specs]),
        write_limit=field("write_limit", math.inf),
        snapshot=field("snapshot", 0.0) if two_level else None,
        async_fraction=np.array([s["async_fraction"] for s in specs]),
        idle_power=np.array([s["idle_power"] for s in specs]),
        power_policy=power,
        storage_policy=storage,
        recovery_read=field("recovery_read", 0.0),
        fail_while_down=fail_while_down,
    )
    state = cj.initial_state(fleet, phase=field("phase", 0), remaining=field("remaining", 0.5))
    times = np.full((len(specs), oracle.N_SLOTS, oracle.N_LISTED), np.inf)
    for b, spec in enumerate(specs):
        for job, slot in enumerate(spec["slots"]):
            times[b, slot, : len(spec["failures"][job])] = spec["failures"][job]
    return cj.simulate(
        fleet,
        state,
        n_fires=oracle.N_FIRES,
        until=np.array([s["horizon"] for s in specs]),
        failure_times=times if failing else None,
        save=cj.SaveAt(jobs=True, power=True),
    )


def check(specs, policies, failing=True):
    """Engine and reference agree on every fleet of ``specs`` (one simulate call)."""
    out = engine(specs, policies, failing)
    assert bool(np.all(out.ok)), f"engine did not complete (status {np.asarray(out.status)})"
    jobs = out.jobs
    for b, spec in enumerate(specs):
        exact = reference(spec, policies)
        slots, horizon = spec["slots"], spec["horizon"]
        what = f"fleet {b} ({policies}): {spec}"
        assert float(np.asarray(out.time)[b]) == horizon, what
        steps = int(np.asarray(out.n_events)[b])
        assert steps == len(exact["event_times"]), f"{steps} steps, {len(exact['event_times'])} instants; {what}"
        for job, slot in enumerate(slots):
            fired = [float(t) for t in exact["fire_times"][job]]
            ended = [math.nan if e is None else float(e) for e in exact["end_times"][job]]
            pad = [math.nan] * (oracle.N_FIRES - len(fired))
            oracle.close(np.asarray(out.fire_times)[b, slot], fired + pad, horizon, f"fire times of job {job}, {what}")
            oracle.close(np.asarray(out.end_times)[b, slot], ended + pad, horizon, f"end times of job {job}, {what}")
        np.testing.assert_array_equal(np.asarray(jobs.failures)[b, slots], exact["failures"], err_msg=what)
        completed = [sum(e is not None for e in ends) for ends in exact["end_times"]]
        np.testing.assert_array_equal(np.asarray(jobs.writes)[b, slots], completed, err_msg=what)
        for name in oracle.STATS:
            want = [float(x) for x in exact[name]]
            oracle.close(np.asarray(getattr(jobs, name))[b, slots], want, horizon, f"{name}, {what}")
        oracle.check_power(out.power, b, exact, horizon, None, None, what)


# (grid, two_level, failing, asynchronous) per fleet of one call.
BLOCKING = [
    (False, False, True, False),
    (True, False, True, False),
    (False, False, True, True),
    (True, False, True, False),
    (False, False, False, False),
]
TWO_LEVEL = [(False, True, True, False), (True, True, True, False), (False, True, True, False)]
STORAGE = ["fair", "weighted", "fcfs"]


@pytest.mark.parametrize("storage", STORAGE)
@pytest.mark.parametrize("fail_while_down", [False, True])
def test_engine_matches_the_reference_with_recovery_reads(storage, fail_while_down):
    # Sized fleets with write limits (a limit binds reads as it binds writes).
    policies = ("maxmin", storage)
    seed = 27_000 + 10 * STORAGE.index(storage) + fail_while_down
    check(random_specs(seed, BLOCKING, policies, fail_while_down), policies)


@pytest.mark.parametrize("fail_while_down", [False, True])
def test_engine_matches_the_reference_with_two_level_checkpoints(fail_while_down):
    policies = ("uniform", "weighted")
    check(random_specs(27_100 + fail_while_down, TWO_LEVEL, policies, fail_while_down), policies)


def test_engine_matches_the_reference_with_unit_sizes_and_no_limits():
    # The engine's base-rule program (every size 1, no write limit).
    policies = ("maxmin", "fair")
    check(random_specs(27_200, BLOCKING, policies, True, sized=False, limited=False), policies)


def test_engine_matches_the_reference_without_failures():
    # Reads configured, but no failure ever comes: nothing reads.
    policies = ("maxmin", "fcfs")
    kinds = [(False, False, False, False), (True, False, False, False)]
    check(random_specs(27_300, kinds, policies, True), policies, failing=False)


# --- the engine's own checks ------------------------------------------------------------------


def _same(a, b):
    for x, y in zip(jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b), strict=True):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


def test_no_reads_and_no_restarts_are_todays_engine_bit_for_bit():
    # recovery_read = 0 is today's model; so is fail_while_down where R = 0 (nobody is ever down).
    compute, write = np.array([[10.0, 7.0, 12.5]] * 2), np.array([[1.0, 2.0, 1.5]] * 2)
    args = dict(n_fires=12, until=150.0, key=jax.random.key(3), save=cj.SaveAt(trace=True, jobs=True, power=True))
    for restart, changes in ((2.0, dict(recovery_read=0.0)), (0.0, dict(recovery_read=0.0, fail_while_down=True))):
        today = cj.Fleet(compute, write, mtbf=15.0, restart=restart, storage_policy="fcfs", write_limit=0.8)
        new = cj.Fleet(compute, write, mtbf=15.0, restart=restart, storage_policy="fcfs", write_limit=0.8, **changes)
        state = cj.random_state(today, jax.random.key(1))
        _same(cj.simulate(today, state, **args), cj.simulate(new, state, **args))


def test_reads_and_down_failures_run_on_the_general_engine_and_fast_methods_refuse_them():
    n = 8
    state = cj.initial_state(cj.Fleet(np.full(n, 10.0), np.full(n, 1.0)))
    for changes, name in ((dict(recovery_read=0.5), "recovery_read"), (dict(fail_while_down=True), "fail_while_down")):
        fleet = cj.Fleet(np.full(n, 10.0), np.full(n, 1.0), mtbf=50.0, restart=1.0, **changes)
        auto = cj.simulate(fleet, state, n_fires=5, until=60.0, key=jax.random.key(1))
        _same(auto, cj.simulate(fleet, state, n_fires=5, until=60.0, key=jax.random.key(1), method="general"))
        for method in ("fifo", "clock"):
            with pytest.raises(ValueError, match=f"cannot serve {name}"):
                cj.simulate(fleet, state, n_fires=5, until=60.0, method=method)


@pytest.mark.parametrize(
    "changes, match",
    [
        (dict(recovery_read=-1.0), "recovery_read must be finite and >= 0"),
        (dict(recovery_read=np.nan), "recovery_read must be finite and >= 0"),
        (dict(recovery_read=np.inf), "recovery_read must be finite and >= 0"),
        (dict(recovery_read=[1.0, -2.0]), "recovery_read must be finite and >= 0; found -2.0 at index"),
        (dict(recovery_read=[1.0, 2.0, 3.0]), "recovery_read must be a scalar or broadcast"),
        (dict(recovery_read="x"), "recovery_read must be"),
        (dict(fail_while_down="yes"), "fail_while_down must be True or False"),
        (dict(fail_while_down=1), "fail_while_down must be True or False"),
    ],
)
def test_bad_recovery_parameters_name_the_argument(changes, match):
    with pytest.raises(ValueError, match=match):
        cj.Fleet([3.0, 2.0], [1.0, 1.0], mtbf=10.0, **changes)


def test_the_designers_fleets_keep_the_recovery_fields():
    from ckpt_jax.design import _batched

    fleet = cj.Fleet([3.0, 2.0], [1.0, 1.0], mtbf=10.0, recovery_read=[0.5, 0.0], fail_while_down=True)
    batched = _batched(fleet, np.array([[4.0, 5.0], [6.0, 7.0]]))
    np.testing.assert_array_equal(np.asarray(batched.recovery_read), [[0.5, 0.0], [0.5, 0.0]])
    assert batched.fail_while_down and batched.has_recovery_reads
