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

The fleets are `test_realistic_oracle`'s with two more keys, ``recovery_read`` and
``fail_while_down``, which its `reference` and `check` pass on.
"""

import jax
import numpy as np
import pytest
import test_realistic_oracle as oracle

import ckpt_jax as cj


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


def random_specs(seed, kinds, policies, fail_while_down, sized=True, limited=True):
    """One resolvable fleet per (grid, two_level, failing, asynchronous) in ``kinds``, where the
    exact run reads at least once in every failing fleet."""
    rng = np.random.default_rng(seed)
    specs = []
    for grid, two_level, failing, asynchronous in kinds:
        while True:
            spec = random_spec(rng, grid, two_level, failing, asynchronous, fail_while_down, sized, limited)
            if grid and failing:
                spec = oracle.with_ties(rng, spec, policies)
            if max(map(len, spec["failures"])) > oracle.N_LISTED or not oracle.resolvable(spec, policies):
                continue
            if failing and not any(oracle.reference(spec, policies)["read_time"]):
                continue
            specs.append(spec)
            break
    return specs


def check(specs, policies, failing=True):
    """Engine and reference agree on every fleet of ``specs`` (one simulate call)."""
    oracle.check(specs, policies, failing=failing)


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
