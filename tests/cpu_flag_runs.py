"""Runs whose every number must not depend on the ``ckpt-jax`` program's CPU defaults (the
reduction flag, `ckpt_jax._cpu_flags`; the runs split over host devices,
`ckpt_jax.sharding.default_devices`): tests/test_cpu_flags.py runs them in the tier's process
and in a fresh one with both, and compares the arrays bit for bit. Four fleets each, so that
two devices get two each.

``python tests/cpu_flag_runs.py OUT.npz`` writes them in a process with two host devices
(what the fresh process runs), every run split over both."""

import sys

import jax
import numpy as np

jax.config.update("jax_enable_x64", True)

from xla_flag_runs import realistic, recorder  # noqa: E402

import ckpt_jax as cj  # noqa: E402


def runs() -> dict:
    """{name: array} of every result array of three runs: the general loop with sizes, a
    binding cap, write limits, two-level checkpoints, failures, recovery reads, power and
    every observer to a horizon; heterogeneous jobs with jitter on the clock path and
    identical jobs on the FIFO path, with the writers, gaps and jobs observers."""
    rng = np.random.default_rng(0)
    out, record = recorder()
    record("general", realistic(rng, 4))
    observers = cj.SaveAt(writers=True, gaps=True, jobs=True)
    fleet = cj.Fleet(rng.uniform(2, 10, (4, 6)), rng.uniform(0.5, 3, (4, 6)), cap=4.0)
    state = cj.random_state(fleet, jax.random.key(3))
    record("clock", cj.simulate(fleet, state, 12, method="clock", jitter=0.3, key=jax.random.key(4), save=observers))
    fleet = cj.Fleet(np.full((4, 8), 7.0), np.full((4, 8), 1.25), cap=5.0)
    state = cj.random_state(fleet, jax.random.key(5))
    record("fifo", cj.simulate(fleet, state, 12, method="fifo", save=observers))
    return out


if __name__ == "__main__":
    from ckpt_jax import sharding

    assert len(jax.local_devices()) == 2, "run with XLA_FLAGS=--xla_force_host_platform_device_count=2"
    with sharding.default_devices("all"):
        np.savez(sys.argv[1], **runs())
