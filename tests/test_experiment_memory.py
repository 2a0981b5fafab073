"""Claim 5 (memory of the launch) experiment at size "smoke", and its lag bookkeeping."""

import subprocess
import sys
from pathlib import Path

import numpy as np
from experiment_checks import check_experiment_result

from ckpt_jax.experiments import EXPERIMENTS, memory

ROOT = Path(__file__).resolve().parents[1]


def test_memory_smoke(tmp_path):
    result = memory.run(tmp_path, size="smoke", progress=False)
    check_experiment_result(memory, result, tmp_path, min_figure_bytes=10_000)
    assert memory.EXPERIMENT.name == "memory" and memory.EXPERIMENT in EXPERIMENTS
    assert result["figures"] == ["memory.png", "memory_excess.png"]
    assert memory.EXPERIMENT.claims == (5,)
    item = result["verdicts"][0]
    for key in (
        "cells",
        "cell_outcomes",
        "largest_late_excess",
        "decay_cycles",
        "late_excess_z",
        "control_r_end",
        "detectable_memory",
    ):
        assert key in item["measured"]
    assert item["sub_claim"] == "5 memory" and item["figures"] == result["figures"]

    config = memory.SIZES["smoke"]
    cells, controls = result["numbers"]["cells"], result["numbers"]["controls"]
    assert len(cells) == len(config["n_jobs"]) * len(memory.LOADS)
    assert len(controls) == len(config["n_jobs"]) * sum(load < 1 for load in memory.LOADS)
    for cell in cells + controls:
        # Every run completes and every job fires once per cycle of job 0 (claim 3).
        assert cell["failed_runs"] == 0 and cell["pairing_violations"] == 0
        assert cell["launches"] == config["launches"]
        assert -1 <= cell["r_base_end"] <= 1 and -1 <= cell["r_end"] <= 1
        low, high = cell["late_excess_ci"]
        assert low <= cell["late_excess_mean"] <= high
        assert cell["outcome"] == memory.cell_verdict(low, high)
        # The power numbers are consistent: a memory must clear the margin to be detected.
        assert cell["detectable_memory"] > memory.MEMORY_MARGIN and cell["supported_margin"] > 0
    # Smoke runs are far too small for the margin: the rule says so instead of "reproduced".
    assert item["verdict"] == memory.INCONCLUSIVE
    # Collision-free staggers never interact (claim 4): their lags, hence R, never move.
    for control in controls:
        np.testing.assert_allclose(control["r_every_10th_cycle"], 1.0, atol=1e-9)


def test_section_lags_pairs_the_next_firing():
    # Job 0 fires at 0, 1, 2, ...; job 1 fired before job 0's first firing (offset 1);
    # job 2 fires after it. Lags are fractions of job 0's current return time.
    reference = np.arange(6.0)
    fire = np.stack([reference, reference - 0.75, reference + 0.5])
    fire[0, 3:] = 3.0 + 2.0 * np.arange(3)  # job 0 slows down: return times 1, 1, 1, 2, 2
    fire[1, 4:] = fire[0, 3:5] + 0.5
    fire[2, 3:] = fire[0, 3:] + 1.0
    lags, mean_period_lags, consistent = memory.section_lags(fire, cycles=3)
    assert consistent
    np.testing.assert_allclose(lags, [[0.25] * 4, [0.5] * 4])
    # With the mean period P = 7 / 5 the slow last cycle shifts the lags.
    np.testing.assert_allclose(mean_period_lags[:, -1], [0.5 / 1.4, 1.0 / 1.4])
    # A job firing twice within one cycle of job 0 breaks the pairing and is flagged.
    fire[2, 1] = 0.9
    assert not memory.section_lags(fire, cycles=3)[2]


def test_order_only_curve_of_identical_launches_is_their_memory():
    # Launches that all share one lag vector: the rank-matched partner equals the launch.
    rng = np.random.default_rng(0)
    lags = np.broadcast_to(np.sort(rng.random((5, 1)), axis=0), (8, 5, 4)).copy()
    np.testing.assert_allclose(memory.order_only_curve(lags, partners=3), 1.0)
    np.testing.assert_allclose(memory.memory_curve(lags), 1.0)


def test_experiments_entry_point_lists_every_experiment():
    done = subprocess.run(
        [sys.executable, str(ROOT / "experiments" / "run.py"), "--help"], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0 and "--size" in done.stdout
    assert all(f"{e.name}: {e.title}" in done.stdout for e in EXPERIMENTS)
