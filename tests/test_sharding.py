"""Sharding the batch axis over several (forced host) CPU devices changes nothing.

The host device count must be forced before JAX initialises, so the comparison runs in a
fresh interpreter with ``XLA_FLAGS=--xla_force_host_platform_device_count=4``.
"""

import json
import os
import subprocess
import sys
import textwrap

import jax
import numpy as np
import pytest

import ckpt_jax as cj

CHECK = textwrap.dedent(
    """
    import json
    import os
    import jax
    jax.config.update("jax_enable_x64", True)
    import numpy as np
    import ckpt_jax as cj
    from ckpt_jax._threefry import unroll_on_cpu

    if os.environ.get("CKPT_JAX_TEST_XLA_FLAGS", "1") != "0":  # as the tier compiles (tests/conftest.py)
        unroll_on_cpu()
    assert jax.device_count() == 4, jax.devices()
    rng = np.random.default_rng(0)
    results = {}

    def same(a, b):
        return all(
            np.array_equal(np.asarray(x), np.asarray(y), equal_nan=True)
            for x, y in zip(jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b))
        )

    # The default tier checks the general engine on three devices (padded) and on all four in
    # reverse order, with observers to a horizon, with every realistic variant, and a batch
    # that mixes the FIFO and general paths, each on one layout; CKPT_SHARDING_ALL=1 (the heavy
    # tier) checks every case on every layout given.
    every = os.environ.get("CKPT_SHARDING_ALL") == "1"
    default_tier = {"general", "general-until", "mixed", "realistic"}

    def compare(name, fleet, state, n_fires, layouts=("all", 3, jax.devices()[::-1]), **kw):
        if not every:
            if name not in default_tier:
                return
            layouts = layouts[1:] if name == "general" else layouts[:1]
        one = cj.simulate(fleet, state, n_fires, **kw)
        for devices in layouts:
            many = cj.simulate(fleet, state, n_fires, devices=devices, **kw)
            label = devices if isinstance(devices, (str, int)) else "reversed"
            results[f"{name}/{label}"] = bool(same(one, many) and np.all(np.asarray(one.ok)))

    # Heterogeneous, capped, nonlinear f; B = 7 (not a multiple of 4) with padded slots.
    compute = rng.uniform(2, 10, (7, 5))
    write = rng.uniform(0.5, 3, (7, 5))
    active = np.arange(5)[None, :] < rng.integers(2, 6, 7)[:, None]
    fleet = cj.Fleet(compute, write, cap=rng.uniform(1, 4, 7), throughput="sqrt", active=active)
    state = cj.random_state(fleet, jax.random.key(1))
    compare("general", fleet, state, 15)
    # Observers and a horizon, sharded: the same as on one device.
    observers = cj.SaveAt(writers=True, gaps=True, jobs=True)
    compare("general-until", fleet, state, 15, layouts=(3,), save=observers, until=30.0)
    # Leading batch axes (2, 3) with jitter, delay and asynchronous checkpoints.
    fleet = cj.Fleet(rng.uniform(2, 10, (2, 3, 4)), rng.uniform(0.5, 3, (2, 3, 4)), cap=2.5,
                     delay=rng.uniform(0, 1, (2, 3)), async_fraction=rng.uniform(0, 1, (2, 3)))
    state = cj.random_state(fleet, jax.random.key(2))
    compare("variants", fleet, state, 10, jitter=0.3, key=jax.random.key(3))
    # Identical fleets (the FIFO path), a mixed batch (both paths), and B = 1 < 4 devices.
    fleet = cj.Fleet(np.full((6, 8), 7.0), np.full((6, 8), 1.25), cap=5.0)
    state = cj.random_state(fleet, jax.random.key(4))
    compare("fifo", fleet, state, 12)
    compare("fifo-observers", fleet, state, 12, layouts=(3,),
            save=cj.SaveAt(trace=False, writers=True, gaps=True, jobs=True))
    fleet = cj.Fleet(np.stack([np.full(8, 5.0), rng.uniform(3, 6, 8), np.full(8, 2.0)]), np.full((3, 8), 0.3))
    state = cj.random_state(fleet, jax.random.key(5))
    compare("mixed", fleet, state, 12)
    # Write limits, two-level checkpoints, failures and the power draw (docs/model.md §1d).
    fleet = cj.Fleet(rng.uniform(2, 10, (5, 4)), rng.uniform(0.5, 3, (5, 4)), cap=2.5, write_limit=0.4,
                     snapshot=0.3, mtbf=40.0, restart=1.0, idle_power=0.2)
    compare("realistic", fleet, cj.random_state(fleet, jax.random.key(7)), 6, layouts=(3,), until=40.0,
            key=jax.random.key(8), save=cj.SaveAt(jobs=True, power=True))
    fleet = cj.Fleet(rng.uniform(2, 10, 6), rng.uniform(0.5, 3, 6))
    compare("single", fleet, cj.random_state(fleet, jax.random.key(6)), 12)
    print("RESULTS " + json.dumps(results))
    """
)


def _check_sharding(every: bool) -> dict:
    env = dict(os.environ)
    env["CKPT_SHARDING_ALL"] = "1" if every else "0"
    env["XLA_FLAGS"] = (env.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=4").strip()
    env["JAX_PLATFORMS"] = "cpu"
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    proc = subprocess.run([sys.executable, "-c", CHECK], env=env, cwd=root, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-4000:]
    line = [x for x in proc.stdout.splitlines() if x.startswith("RESULTS ")][-1]
    return json.loads(line[len("RESULTS ") :])


def test_sharded_batch_is_identical_to_one_device():
    results = _check_sharding(every=False)
    assert len(results) == 5
    assert all(results.values()), {k: v for k, v in results.items() if not v}


@pytest.mark.slow
def test_sharded_batch_is_identical_to_one_device_on_every_layout():
    results = _check_sharding(every=True)
    assert len(results) == 18
    assert all(results.values()), {k: v for k, v in results.items() if not v}


def test_devices_argument_is_validated():
    fleet = cj.Fleet(np.full(3, 5.0), np.ones(3))
    state = cj.initial_state(fleet)
    with pytest.raises(ValueError, match="devices"):
        cj.simulate(fleet, state, 2, devices="some")
    with pytest.raises(ValueError, match="devices"):
        cj.simulate(fleet, state, 2, devices=len(jax.local_devices()) + 1)
    with pytest.raises(ValueError, match="devices"):
        cj.simulate(fleet, state, 2, devices=[])
    one = cj.simulate(fleet, state, 2)
    local = cj.simulate(fleet, state, 2, devices="all")
    np.testing.assert_array_equal(np.asarray(one.fire_times), np.asarray(local.fire_times))
