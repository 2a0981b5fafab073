"""Failure domains, common-cause outages and the restart stagger (docs/model.md §1f): the engine
against the exact reference.

`reference.simulate_realistic_reference` learns outages as given instants (time, domain) and the
restart stagger Δ from the rules (an outage fails every job of its domain that is up, or every
one with ``fail_while_down``; the k-th of them by job index is down R_k + k·Δ), and integrates
each fleet in exact rational arithmetic from the very float64 inputs the engine gets.
`simulate(..., until=H)` must agree to 1e-9 relative (`test_realistic_oracle.check`'s fields:
fire and end times, `JobStats` with ``outage_failures`` and ``stagger_time``, `PowerStats`, one
step per exact instant) on small random fleets, sized, with write limits, with and without the
jobs' own (listed) failures: with replayed outages (``outage_times``, some at instants of the
exact run, some of two domains at once; recovery reads), and with drawn ones (``outage_mtbf``), the reference
fed the instants the engine took (`ckpt_jax.loop.outage_instants`).

Two compiled configurations: blocking fleets with recovery reads and replayed outages, and
two-level fleets with drawn outages and failures while down.
"""

import jax
import numpy as np
import oracle_helpers as oh
import pytest
import test_realistic_oracle as oracle
import test_recovery_oracle as recovery

import ckpt_jax as cj
from ckpt_jax import loop

STATS = oracle.STATS + ("outage_failures", "stagger_time", "outage_lost_work", "outage_down_time")
N_DOMAINS = 2


def random_spec(rng, grid, two_level, failing, fail_while_down, policies):
    """`test_recovery_oracle.random_spec` (recovery reads, some 0) with each job's domain (0 or
    1), a restart stagger and 1..4 replayed outages of the fleet's domains (on a grid fleet one at an instant of
    the exact run, and often one of each domain at one instant)."""
    spec = recovery.random_spec(rng, grid, two_level, failing, False, fail_while_down)
    n_active, horizon = len(spec["slots"]), spec["horizon"]
    domain = [int(x) for x in rng.integers(0, N_DOMAINS, n_active)]
    present = sorted(set(domain))
    count = int(rng.integers(1, 5))
    if grid:
        times = [float(x) for x in rng.integers(1, int(8 * horizon), count) / 8]
        stagger = float(rng.integers(1, 4) / 4)
    else:
        times = [float(x) for x in rng.uniform(0.05, horizon, count)]
        stagger = float(rng.uniform(0.05, 0.6))
    outages = [(t, int(rng.choice(present))) for t in times]
    if len(present) == 2 and rng.random() < 0.5:  # both domains at one instant
        outages.append((outages[0][0], 1 - outages[0][1]))
    spec = dict(
        spec, domain=domain, restart_stagger=stagger, fail_while_down=fail_while_down, outages=sorted(set(outages))
    )
    if grid:  # one more outage at an instant of the exact run so far, which float64 holds
        instants = [t for t in oh.exact_instants(oracle.reference(spec, policies)["event_times"]) if 0 < t < horizon]
        if instants:
            extra = (instants[int(rng.integers(len(instants)))], int(rng.choice(present)))
            spec = dict(spec, outages=sorted(set(spec["outages"]) | {extra}))
    return spec


def resolvable(spec, policies):
    """`test_realistic_oracle.resolvable`, the outage instants among the listed times."""
    run = oracle.reference(spec, policies, horizon=oh.longer_horizon(spec["horizon"]))
    if max(len(fired) for fired in run["fire_times"]) >= oracle.N_FIRES:
        return False
    listed = spec["failures"] + [[t for t, _ in spec["outages"]]]
    return oh.resolvable(run["event_times"], spec["horizon"], listed, spec["restart"] + [0.0])


def random_specs(seed, kinds, policies, fail_while_down):
    """One resolvable fleet per (grid, two_level, failing) in ``kinds`` whose exact run has
    at least one outage failure."""
    rng = np.random.default_rng(seed)
    specs = []
    for grid, two_level, failing in kinds:
        while True:
            spec = random_spec(rng, grid, two_level, failing, fail_while_down, policies)
            if max(map(len, spec["failures"])) > oracle.N_LISTED or not resolvable(spec, policies):
                continue
            if not any(oracle.reference(spec, policies)["outage_failures"]):
                continue
            specs.append(spec)
            break
    return specs


def check(specs, policies, failing, seed=0):
    """Engine and reference agree on every fleet of ``specs`` (one simulate call)."""
    out = oracle.engine(specs, policies, failing=failing, seed=seed)
    assert bool(np.all(out.ok)), f"engine did not complete (status {np.asarray(out.status)})"
    for b, spec in enumerate(specs):
        oh.assert_run_agrees(out, b, spec, oracle.reference(spec, policies), STATS, what=f" ({policies})")
        oracle.check_power(out.power, b, oracle.reference(spec, policies), spec["horizon"], None, None, f"fleet {b}")
    return out


BLOCKING = [
    (False, False, True),
    (True, False, True),
    (True, False, True),
    (False, False, True),
    (True, False, False),  # outages only: no failures of the jobs' own
    (False, False, False),
]


def test_engine_matches_the_reference_with_replayed_outages():
    # Blocking fleets with recovery reads: an outage's jobs read back after their staggered
    # restarts, and a reader is out of an outage's reach.
    policies = ("maxmin", "weighted")
    check(random_specs(36_000, BLOCKING, policies, False), policies, failing=True)


def test_engine_matches_the_reference_with_drawn_outages():
    # Two-level fleets, failures while down, outages drawn from a mean time of about a third of
    # the horizon per domain: the reference takes the instants the engine drew.
    policies = ("uniform", "fair")
    rng = np.random.default_rng(36_100)
    seed = 5
    specs = []
    for grid in (False, True, False):
        while True:
            spec = oracle.random_spec(rng, grid, True, True)
            n_active = len(spec["slots"])
            spec = dict(
                spec,
                domain=[int(x) for x in rng.integers(0, N_DOMAINS, n_active)],
                restart_stagger=0.25 if grid else float(rng.uniform(0.05, 0.6)),
                fail_while_down=True,
                outage_mtbf=[spec["horizon"] / 3, spec["horizon"] / 2],
                outages=[],
            )
            specs.append(spec)
            break
    fleet = oracle.fleet(specs, policies)
    drawn = loop.outage_instants(fleet, np.array([s["horizon"] for s in specs]), key=jax.random.key(seed))
    assert drawn is not None
    specs = [dict(spec, outages=[(t, int(d)) for t, d in rows if np.isfinite(t)]) for spec, rows in zip(specs, drawn)]
    assert sum(map(len, (s["outages"] for s in specs))) >= 3  # the draws give outages to check
    assert all(resolvable(s, policies) for s in specs)
    out = check(specs, policies, failing=True, seed=seed)
    # Layout: the same fleet alone takes the same outages.
    alone = loop.outage_instants(fleet[1:2], specs[1]["horizon"], key=jax.random.key(seed), fleet_offset=1)
    assert alone is not None
    np.testing.assert_array_equal(alone[0, : len(specs[1]["outages"])], np.asarray(specs[1]["outages"], float))
    assert np.all(np.asarray(out.jobs.outage_failures)[np.asarray(fleet.active)] >= 0)


def test_an_own_failure_at_an_outages_instant_fails_the_job_once():
    # Three jobs launched together (T = 10, D = 1, R = 2, Δ = 1), one outage of the whole fleet
    # at t = 5 and job 0's own (listed) failure at that very instant: job 0 fails once, as its
    # own failure (no stagger, no rank); the outage fails jobs 1 and 2, ranks 0 and 1. Each has
    # computed 5 since the launch, none of it saved.
    fleet = cj.Fleet(
        np.full(3, 10.0),
        np.full(3, 1.0),
        restart=2.0,
        failure_times=[[5.0], [np.inf], [np.inf]],
        outage_times=[[5.0, 0.0]],
        restart_stagger=1.0,
    )
    out = cj.simulate(fleet, cj.initial_state(fleet), None, until=30.0, save=cj.SaveAt(trace=False, jobs=True))
    jobs = {name: np.asarray(value) for name, value in out.jobs._asdict().items() if value is not None}
    np.testing.assert_array_equal(jobs["failures"], [1, 1, 1])
    np.testing.assert_array_equal(jobs["outage_failures"], [0, 1, 1])
    np.testing.assert_array_equal(jobs["stagger_time"], [0.0, 0.0, 1.0])
    np.testing.assert_array_equal(jobs["down_time"], [2.0, 2.0, 3.0])
    np.testing.assert_array_equal(jobs["outage_down_time"], [0.0, 2.0, 3.0])
    np.testing.assert_array_equal(jobs["lost_work"], [5.0, 5.0, 5.0])
    np.testing.assert_array_equal(jobs["outage_lost_work"], [0.0, 5.0, 5.0])


def test_outage_inputs_are_checked_by_name():
    base = dict(compute=[2.0, 2.0], write=[1.0, 1.0])
    for kwargs, name in [
        (dict(domain=[0, -1], outage_mtbf=5.0), "domain"),
        (dict(domain=[0, 2], outage_mtbf=[5.0, 5.0]), "domain"),
        (dict(domain=[0, 0.5]), "domain"),
        (dict(outage_mtbf=0.0), "outage_mtbf"),
        (dict(outage_mtbf=[5.0, 5.0, 5.0], domain=[0, 1]), None),
        (dict(outage_times=[[2.0, 0.0], [1.0, 0.0]]), "outage_times"),
        (dict(outage_times=[[2.0, 1.0]]), "outage_times"),
        (dict(outage_times=[[0.0, 0.0]]), "outage_times"),
        (dict(outage_times=[2.0, 0.0]), "outage_times"),
        (dict(outage_times=[[2.0, 0.0]], outage_mtbf=3.0), "outage_mtbf and outage_times"),
        (dict(restart_stagger=-1.0), "restart_stagger"),
        (dict(restart_stagger=float("inf")), "restart_stagger"),
        (dict(outage_mtbf=5.0, storage_policy="cooperative"), "outages"),
        (dict(outage_mtbf=5.0, mtbf=20.0, failure_shape=0.7), "failure_shape"),
    ]:
        if name is None:
            cj.Fleet(**base, **kwargs)  # three domains, two of them used: fine
            continue
        try:
            cj.Fleet(**base, **kwargs)
        except ValueError as err:
            assert name in str(err), (kwargs, str(err))
        else:
            raise AssertionError(f"accepted {kwargs}")


def test_own_failures_pause_while_an_outage_keeps_a_job_down():
    # Drawn own failures and drawn outages together, with recovery reads (the own clock is held
    # through the read): a job's own failures come at rate 1/M over its time up only (the clock
    # is off while it is down, from either cause), about 30 % fewer than H / M here; the
    # outages come at rate 1/M_o per domain whatever the jobs do.
    horizon, mtbf, outage_mtbf = 20_000.0, 50.0, 30.0
    fleet = cj.Fleet(
        [10.0, 10.0, 10.0],
        [1.0, 1.0, 1.0],
        mtbf=mtbf,
        restart=5.0,
        recovery_read=[0.0, 2.0, 2.0],
        domain=[0, 0, 1],
        outage_mtbf=outage_mtbf,
        restart_stagger=2.0,
    )
    key = jax.random.key(11)
    out = cj.simulate(
        fleet, cj.initial_state(fleet), None, until=horizon, key=key, save=cj.SaveAt(trace=False, jobs=True)
    )
    jobs = out.jobs
    own = np.asarray(jobs.failures - jobs.outage_failures, np.float64)
    expected = (horizon - np.asarray(jobs.down_time)) / mtbf
    assert np.all(np.abs(own - expected) < 4 * np.sqrt(expected)), (own, expected)
    assert np.all(np.abs(own - horizon / mtbf) > 4 * np.sqrt(horizon / mtbf))  # a clock that never stops
    instants = loop.outage_instants(fleet, horizon, key=key)[0]
    per_domain = np.array([np.sum(instants[:, 1] == d) for d in (0, 1)])
    assert np.all(np.abs(per_domain - horizon / outage_mtbf) < 4 * np.sqrt(horizon / outage_mtbf))
    # Job 2 is alone in its domain: every outage of it finds it up or down, never both at once.
    assert int(jobs.outage_failures[2]) <= per_domain[1]
    assert float(jobs.stagger_time[2]) == 0.0 and float(jobs.stagger_time[1]) > 0  # rank 0 alone; job 1 often second


def _instants_one_by_one(fleet, horizon, key):
    """The drawn outage instants as the run takes them, one at a time: each fleet's and
    domain's next instant from `_upcoming` (compiled, as in a run) until the horizon."""
    import jax.numpy as jnp

    from ckpt_jax._loops.outages import _upcoming
    from ckpt_jax._params import flat_params

    params, upcoming = flat_params(fleet, key=key), jax.jit(_upcoming)
    rows = []
    for b in range(params.compute.shape[0]):
        one = jax.tree_util.tree_map(lambda x, b=b: x[b], params)
        n_domains = int(one.outages.mtbf.shape[-1])
        found = []
        for d in range(n_domains):
            last, count = jnp.full(n_domains, -jnp.inf, params.compute.dtype), jnp.zeros(n_domains, jnp.int32)
            while (t := float(upcoming(one, last, count)[d])) < horizon:
                found.append((t, d))
                last, count = last.at[d].set(t), count.at[d].set(count[d] + 1)
        rows.append(sorted(found))
    return rows


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_outage_instants_are_the_runs_drawn_one_by_one(dtype):
    # Vectorised: every fleet's and domain's draws at once (54 s for 20 fleets one by one).
    fleet = cj.Fleet(
        np.full((3, 3), 3.0),
        np.full((3, 3), 0.5),
        mtbf=50.0,
        domain=[0, 0, 1],
        outage_mtbf=np.array([[5.0, 25.0], [4.0, np.inf], [40.0, 6.0]]),
        dtype=dtype,
    )
    key = jax.random.key(5)
    instants = loop.outage_instants(fleet, 30.0, key=key)
    reference = _instants_one_by_one(fleet, 30.0, key)
    assert instants.shape == (3, max(map(len, reference)), 2)
    for rows, expected in zip(instants, reference):
        np.testing.assert_array_equal(rows[: len(expected)], np.asarray(expected, np.float64).reshape(-1, 2))
        assert np.all(np.isnan(rows[len(expected) :]))
