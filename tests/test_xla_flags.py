"""How the tier compiles (tests/conftest.py: the XLA flags ``TEST_XLA_FLAGS``, classic fusion
emitters and one codegen split, and the unrolled threefry lowering on the CPU, all for compile
time) changes no number: representative runs in this process and in a fresh one with XLA's
defaults and JAX's own lowering, as users compile, are equal bit for bit."""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import xla_flag_runs
from conftest import TEST_XLA_FLAGS, UNROLLED_THREEFRY

HERE = Path(__file__).parent


@pytest.mark.slow  # every representative run compiled twice, in two processes (about 35 s)
@pytest.mark.skipif(
    TEST_XLA_FLAGS not in os.environ.get("XLA_FLAGS", "") and not UNROLLED_THREEFRY,
    reason="the tier compiles as users do",
)
def test_how_the_tier_compiles_changes_no_number(tmp_path):
    flagged = xla_flag_runs.runs()
    defaults = os.environ.get("XLA_FLAGS", "").replace(TEST_XLA_FLAGS, "").strip()
    env = dict(os.environ, JAX_PLATFORMS="cpu", XLA_FLAGS=defaults)
    env.pop("JAX_COMPILATION_CACHE_DIR", None)
    path = tmp_path / "defaults.npz"
    done = subprocess.run(
        [sys.executable, str(HERE / "xla_flag_runs.py"), str(path)],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    users = dict(np.load(path))
    assert sorted(users) == sorted(flagged) and len(flagged) > 60
    differ = [name for name in flagged if not np.array_equal(flagged[name], users[name], equal_nan=True)]
    assert not differ, f"these arrays differ as the tier compiles them: {differ}"
