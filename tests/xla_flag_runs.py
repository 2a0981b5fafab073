"""Representative runs whose every number must not depend on the XLA flags the tier compiles
with (tests/conftest.py, ``TEST_XLA_FLAGS``): tests/test_xla_flags.py runs them in the tier's
process and in a fresh one with XLA's defaults, and compares the arrays bit for bit.

``python tests/xla_flag_runs.py OUT.npz`` writes them (what the fresh process runs)."""

import sys

import jax
import numpy as np

jax.config.update("jax_enable_x64", True)

import ckpt_jax as cj  # noqa: E402


def recorder() -> tuple:
    """``(out, record)``: ``record(name, tree)`` puts every leaf of ``tree`` in ``out`` as a
    numpy array, under ``name/k``."""
    out = {}

    def record(name, tree):
        for k, leaf in enumerate(jax.tree_util.tree_leaves(tree)):
            out[f"{name}/{k}"] = np.asarray(leaf)

    return out, record


def realistic(rng, n_fleets: int):
    """The general loop with sizes, a binding cap, write limits, two-level checkpoints,
    failures, recovery reads, power and every observer, to a horizon (``n_fleets`` fleets of
    5 jobs); also run by tests/cpu_flag_runs.py."""
    every = cj.SaveAt(jobs=True, power=True, writers=True, gaps=True)
    fleet = cj.Fleet(
        rng.uniform(2, 10, (n_fleets, 5)),
        rng.uniform(0.5, 3, (n_fleets, 5)),
        cap=2.5,
        size=rng.choice([1.0, 2.0, 4.0], (n_fleets, 5)),
        write_limit=0.6,
        snapshot=0.3,
        mtbf=40.0,
        restart=1.0,
        recovery_read=True,
        idle_power=0.2,
    )
    state = cj.random_state(fleet, jax.random.key(1))
    return cj.simulate(fleet, state, 6, until=60.0, key=jax.random.key(2), save=every)


def runs() -> dict:
    """{name: array} of every result array of seven runs and of random draws: the general loop
    with sizes, a binding cap, write limits, two-level checkpoints, failures, recovery reads,
    power and every observer to a horizon; a nonlinear f(n) with padded slots; jitter, delay
    and asynchronous checkpoints; sizes with delay and asynchronous checkpoints under the
    uniform and weighted policies; identical jobs (the FIFO path); outages with a restart
    stagger; the gap return map's spectrum (its Jacobian by `jax.jacfwd`); and keys split and
    folded, and uniform, normal, truncated normal, exponential and Weibull draws."""
    rng = np.random.default_rng(0)
    out, record = recorder()
    record("realistic", realistic(rng, 3))
    active = np.arange(5)[None, :] < np.array([[2], [5], [4]])
    fleet = cj.Fleet(
        rng.uniform(2, 10, (3, 5)), rng.uniform(0.5, 3, (3, 5)), cap=[1.5, 2.0, 4.0], throughput="sqrt", active=active
    )
    record(
        "sqrt", cj.simulate(fleet, cj.random_state(fleet, jax.random.key(3)), 12, save=cj.SaveAt(gaps=True, jobs=True))
    )
    fleet = cj.Fleet(
        rng.uniform(2, 10, (3, 4)),
        rng.uniform(0.5, 3, (3, 4)),
        cap=2.5,
        delay=rng.uniform(0, 1, 3),
        async_fraction=rng.uniform(0, 1, 3),
    )
    record(
        "variants", cj.simulate(fleet, cj.random_state(fleet, jax.random.key(4)), 10, jitter=0.3, key=jax.random.key(5))
    )
    # Sizes with delay and asynchronous checkpoints under the uniform power and weighted storage
    # policies, in five slots of which three are active: LLVM level 1 changed this run (a case of
    # tests/test_sizes.py, which it turned into a MAX_EVENTS run).
    fleet = cj.Fleet(
        np.array([1.0, 1.0, 3.0, 1.25, 1.25]),
        np.array([2.0, 2.0, 1.0, 0.75, 0.75]),
        cap=1.0,
        throughput=np.ones(6),
        delay=1.0,
        async_fraction=1.0,
        active=np.array([True, True, True, False, False]),
        size=np.array([2.0, 1.5257998734379017, 2.2698333457931352, 3.0, 3.0]),
        power_policy="uniform",
        storage_policy="weighted",
    )
    state = cj.initial_state(fleet, phase=np.array([0, 0, 0, 1, 1]), remaining=np.array([1.0, 1.0, 3.0, 0.5, 0.5]))
    record("sizes-delay-async", cj.simulate(fleet, state, 4))
    fleet = cj.Fleet(np.full((3, 6), 7.0), np.full((3, 6), 1.25), cap=5.0)
    record(
        "fifo",
        cj.simulate(fleet, cj.random_state(fleet, jax.random.key(6)), 12, save=cj.SaveAt(writers=True, gaps=True)),
    )
    fleet = cj.Fleet(
        rng.uniform(2, 10, (2, 4)),
        rng.uniform(0.5, 3, (2, 4)),
        mtbf=50.0,
        restart=1.0,
        domain=[0, 0, 1, 1],
        outage_mtbf=[20.0, 30.0],
        restart_stagger=0.4,
    )
    state = cj.random_state(fleet, jax.random.key(7))
    record("outages", cj.simulate(fleet, state, 4, until=80.0, key=jax.random.key(8), save=cj.SaveAt(jobs=True)))
    fleet = cj.Fleet(np.array([6.0, 5.0, 7.0, 4.5]), np.array([1.0, 0.8, 1.2, 0.6]), throughput="sqrt")
    record("spectrum", cj.maps.spectrum(fleet, np.array([1.5, 2.5, 1.0])))
    # The draws themselves (the tier unrolls the threefry hash's rounds on the CPU).
    key = jax.random.key(9)
    record(
        "draws",
        [
            jax.random.key_data(jax.random.split(key, 5)),
            jax.random.key_data(jax.random.fold_in(key, 3)),
            jax.random.uniform(key, (7,)),
            jax.random.normal(key, (7,)),
            jax.random.truncated_normal(key, -2.0, 2.0, (7,)),
            jax.random.exponential(key, (7,)),
            jax.random.weibull_min(key, 1.0, 0.7, (7,)),
            jax.random.bits(key, (7,), "uint32"),
        ],
    )
    return out


if __name__ == "__main__":
    np.savez(sys.argv[1], **runs())
