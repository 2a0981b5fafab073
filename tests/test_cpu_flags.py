"""The ``ckpt-jax`` program's CPU defaults (ckpt_jax/_cpu_flags.py, ckpt_jax.cli.run): the
reduction flag in XLA_FLAGS where this jaxlib takes it, never one it would abort on, and the
runs inside ``assess``/``design``/``compare`` split over the host devices
(`ckpt_jax.sharding.default_devices`): neither changes a number."""

import os
import subprocess
import sys
from pathlib import Path

import cpu_flag_runs
import jax
import numpy as np
import pytest

from ckpt_jax import _cpu_flags, sharding

HERE = Path(__file__).parent


def test_reduction_flag_is_added_unless_turned_off_or_set(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(_cpu_flags, "_jaxlib_version", lambda: "0.10.2")  # a version checked
    monkeypatch.setattr(_cpu_flags, "_probe", lambda flag: pytest.fail("a checked version is not probed"))
    environ = {"XLA_FLAGS": "--xla_cpu_use_thunk_runtime=true"}
    assert _cpu_flags.add_reduction_flag(environ)
    assert environ["XLA_FLAGS"] == f"--xla_cpu_use_thunk_runtime=true {_cpu_flags.REDUCTION_FLAG}"
    assert not _cpu_flags.add_reduction_flag(environ)  # once only
    off = {_cpu_flags.OFF_VARIABLE: "0"}
    assert not _cpu_flags.add_reduction_flag(off) and "XLA_FLAGS" not in off
    own = {"XLA_FLAGS": "--xla_cpu_experimental_ynn_fusion_type=reduce"}  # the user's value wins
    assert not _cpu_flags.add_reduction_flag(own)
    assert own["XLA_FLAGS"] == "--xla_cpu_experimental_ynn_fusion_type=reduce"


def test_a_flag_this_jaxlib_rejects_is_never_added(monkeypatch, tmp_path):
    """XLA aborts a process on an unknown flag: such a flag is probed in a fresh interpreter,
    refused, and the answer kept per jaxlib version (no second probe)."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    bogus = "--xla_ckpt_jax_no_such_flag=1"
    environ = {"XLA_FLAGS": ""}
    assert not _cpu_flags.add_reduction_flag(environ, flag=bogus)
    assert environ["XLA_FLAGS"] == ""
    monkeypatch.setattr(_cpu_flags, "_probe", lambda flag: pytest.fail("probed twice"))
    assert not _cpu_flags.flag_accepted(bogus)
    monkeypatch.setattr(_cpu_flags, "_jaxlib_version", lambda: "")  # no jaxlib metadata: never added
    assert not _cpu_flags.add_reduction_flag({}, flag=bogus)


def test_default_devices_are_checked_and_used_only_for_batches_they_split():
    with pytest.raises(ValueError, match="devices"):
        with sharding.default_devices("every"):
            pass
    assert sharding.devices_for_batch(None, 64) is None
    one = tuple(jax.local_devices()[:1])
    with sharding.default_devices(one):
        assert sharding.devices_for_batch(None, 64) is None  # one device: no split
        assert sharding.devices_for_batch(one, 64) == one  # a call's own devices win
    assert sharding.devices_for_batch(None, 64) is None


@pytest.mark.slow  # two minutes on a loaded 2-core machine: the sharded programs compile afresh
def test_the_programs_cpu_defaults_change_no_number(tmp_path):
    """The general loop with every mechanism and observer, the FIFO and the clock path: in a
    process with the reduction flag and two host devices that every run splits over, and
    in this one, bit for bit. (tests/xla_flag_runs.py's 129 arrays under the tier's flags
    with and without the reduction flag: equal too, checked by hand on jaxlib 0.10.2.)"""
    here = cpu_flag_runs.runs()
    flags = f"{os.environ.get('XLA_FLAGS', '')} {_cpu_flags.REDUCTION_FLAG}"
    env = dict(os.environ, JAX_PLATFORMS="cpu", XLA_FLAGS=f"{flags} --xla_force_host_platform_device_count=2")
    path = tmp_path / "flagged.npz"
    done = subprocess.run(
        [sys.executable, str(HERE / "cpu_flag_runs.py"), str(path)],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    flagged = dict(np.load(path))
    assert sorted(flagged) == sorted(here) and len(here) > 30
    differ = [name for name in here if not np.array_equal(here[name], flagged[name], equal_nan=True)]
    assert not differ, f"these arrays differ with the program's CPU defaults: {differ}"
