"""The XLA flags the tier compiles with (tests/conftest.py, ``TEST_XLA_FLAGS``: classic fusion
emitters, LLVM level 1, for compile time) change no number: representative runs in this
process and in a fresh one with XLA's defaults, as users compile, are equal bit for bit."""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import xla_flag_runs
from conftest import TEST_XLA_FLAGS

HERE = Path(__file__).parent


@pytest.mark.skipif(TEST_XLA_FLAGS not in os.environ.get("XLA_FLAGS", ""), reason="the tier runs with XLA's defaults")
def test_the_tiers_xla_flags_change_no_number(tmp_path):
    flagged = xla_flag_runs.runs()
    env = dict(os.environ, JAX_PLATFORMS="cpu", XLA_FLAGS=os.environ["XLA_FLAGS"].replace(TEST_XLA_FLAGS, "").strip())
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
    defaults = dict(np.load(path))
    assert sorted(defaults) == sorted(flagged) and len(flagged) > 60
    differ = [name for name in flagged if not np.array_equal(flagged[name], defaults[name], equal_nan=True)]
    assert not differ, f"these arrays differ under the tier's XLA flags: {differ}"
