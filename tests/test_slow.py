"""Heavy runs (`python -m pytest -m slow`): the main job end to end, large fleets, many
oracle examples. Not in the default tier; run before resolving."""

import os
import subprocess
import sys
from pathlib import Path

import jax
import numpy as np
import pytest

import ckpt_jax as cj
from ckpt_jax.experiments import EXPERIMENTS
from ckpt_jax.reproduce import reproduce

pytestmark = pytest.mark.slow


def test_reproduce_quick_end_to_end(tmp_path):
    results = reproduce(tmp_path, size="quick", progress=False, log=lambda m: None)
    assert set(results) == {experiment.name for experiment in EXPERIMENTS}
    report = (tmp_path / "report.md").read_text()
    assert "not run" not in report and "MODEL.md" not in report.replace("docs/model.md", "")
    total = sum(r["wall_seconds"] for r in results.values())
    assert total < 600, f"--quick took {total:.0f} s; it is sized for 10 minutes on a 2-core CPU"
    for name in results:
        assert (tmp_path / f"{name}.json").exists()
        for figure in results[name]["figures"]:
            assert (tmp_path / figure).stat().st_size > 1000
            assert report.count(f"]({figure})") == 1


def test_claim3_large_fleets_keep_order():
    n_jobs, batch = 256, 4
    fleet = cj.Fleet(compute=np.full((batch, n_jobs), 10.0), write=np.full((batch, n_jobs), 0.1), cap=200.0)
    trace = cj.simulate(fleet, cj.random_state(fleet, jax.random.key(3)), n_fires=500)
    assert bool(np.all(trace.ok))
    fire = np.asarray(trace.fire_times)
    for b in range(batch):
        order = np.argsort(fire[b].T.ravel(), kind="stable")
        jobs = np.tile(np.arange(n_jobs), 500)[order]
        assert np.array_equal(jobs, np.tile(jobs[:n_jobs], 500))


def test_oracle_with_many_examples():
    env = dict(os.environ, CKPT_ORACLE_EXAMPLES="300")
    tests = Path(__file__).parent / "test_engine_oracle.py"
    result = subprocess.run([sys.executable, "-m", "pytest", str(tests), "-q", "-p", "no:cacheprovider"], env=env)
    assert result.returncode == 0
