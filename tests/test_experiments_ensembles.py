"""Ensemble experiments for claims 5 and 6 at size "smoke": files, structure, sanity."""

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from experiment_checks import check_experiment_result

import ckpt_jax as cj

from ckpt_jax.experiments import bursts, ftle, no_clustering

ROOT = Path(__file__).resolve().parents[1]


def _check_common(result, out, module):
    check_experiment_result(module, result, out, min_figure_bytes=10_000, one_verdict_per_claim=module is not ftle)


def test_no_clustering_smoke(tmp_path):
    result = no_clustering.run(tmp_path, size="smoke", progress=False)
    _check_common(result, tmp_path, no_clustering)
    cells = result["numbers"]["cells"]
    config = no_clustering.SIZES["smoke"]
    assert len(cells) == len(config["n_jobs"]) * len(no_clustering.LOADS)
    for cell in cells:
        assert cell["failed_runs"] == 0 and cell["launches"] == config["launches"]
        low, high = cell["slope_ci"]
        assert cell["outcome"] == no_clustering.cell_verdict(low, high)
        assert cell["fit_from_cycle"] == round(no_clustering.BURN_IN * (config["cycles"] - 1))
        # Identical jobs never merge (claim 3), so every smallest gap stays positive.
        assert cell["smallest_gap_ever"] > 0 and cell["merged_at_end"] == 0
        # The ensemble starts unclustered: its median is near that of uniform phases.
        assert 0.2 < cell["median_first"] / cell["uniform_phases_median"] < 5


def test_ftle_smoke(tmp_path):
    result = ftle.run(tmp_path, size="smoke", progress=False)
    _check_common(result, tmp_path, ftle)
    cells = result["numbers"]["cells"]
    for cell in cells:
        assert cell["clean"] == cell["launches"]
        # The one-direction rate never exceeds the largest growth; twins agree with autodiff.
        assert cell["tangent_mean"] <= cell["mean"] + 1e-12
        assert cell["twin_agreeing"] == cell["twin_checked"] == cell["launches"]
    assert result["verdicts"][0]["measured"]["twin_agreement"] == 1.0
    # One sub-claim per regime of docs/model.md's finding, each with its own verdict.
    assert [v["sub_claim"] for v in result["verdicts"]] == ["5 FTLE, ρ ≤ 1", "5 FTLE, ρ > 1"]
    assert result["verdicts"][1]["figures"] == [] and result["verdicts"][0]["figures"] == ["ftle.png"]


def test_spearman_ranks_and_ties():
    assert ftle.spearman([1, 2, 3, 4], [0.1, 0.2, 0.3, 0.4]) == pytest.approx(1.0)
    assert ftle.spearman([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
    assert ftle.spearman([1, 2, 3, 4], [1, 3, 2, 4]) == pytest.approx(0.8)
    assert np.isnan(ftle.spearman([1, 2, 3], [5, 5, 5]))


def test_bursts_smoke(tmp_path):
    result = bursts.run(tmp_path, size="smoke", progress=False)
    _check_common(result, tmp_path, bursts)
    for cell in result["numbers"]["cells"]:
        measured = np.array(cell["measured_tail"], dtype=float)
        baseline = np.array(cell["mixture_tail"], dtype=float)
        # Tails start at P(n_w ≥ 0) = 1 and never increase.
        np.testing.assert_allclose([measured[0], baseline[0]], 1.0, rtol=1e-9)
        assert np.all(np.diff(measured) <= 1e-12) and np.all(np.diff(baseline) <= 1e-12)
        assert 0 < cell["writing_fraction"] < 1
        assert all(k > cell["mean_writers"] for k in cell["top_levels"])
        assert cell["level_outcomes"] == [bursts.level_verdict(lo, hi) for lo, hi in
                                          zip(cell["top_ratio_lower"], cell["top_ratio_upper"])]


@pytest.mark.parametrize("launches", [1, 2, 7, 40, 401])
def test_no_clustering_bootstrap_equals_sorting_every_resample(launches):
    # Ties (rounded values), odd and even launch counts: the same slopes bit for bit, and
    # the generator left where the plain loop leaves it (the next cell draws on from there).
    values = np.round(np.random.default_rng(launches).uniform(0.01, 0.1, (launches, 33)), 3)
    log_gaps = np.log(values)
    fast, plain = np.random.default_rng(5), np.random.default_rng(5)
    slopes = no_clustering._bootstrap_slopes(log_gaps, 30, fast)
    expected = [no_clustering._log_median_slope(log_gaps[plain.integers(0, launches, launches)]) for _ in range(30)]
    assert slopes.tobytes() == np.array(expected).tobytes()
    assert fast.integers(0, 2**62) == plain.integers(0, 2**62)


def test_statistics_experiments_record_observers_not_traces_and_full_has_1e5_fleets():
    # One simulate call per N holds every load: B = len(LOADS) · fleets per load.
    assert no_clustering.GAPS_ONLY == cj.SaveAt(trace=False, gaps=True)
    assert bursts.WRITERS_ONLY == cj.SaveAt(trace=False, writers=True)
    assert len(no_clustering.LOADS) * no_clustering.SIZES["full"]["launches"] >= 10**5
    assert len(bursts.LOADS) * bursts.SIZES["full"]["fleets"] >= 10**5


@pytest.mark.parametrize("name", ["no_clustering", "ftle", "bursts"])
def test_entry_point_runs_each_by_name(name):
    done = subprocess.run([sys.executable, str(ROOT / "experiments" / "run.py"), name, "--help"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "--size" in done.stdout
    bad = subprocess.run([sys.executable, str(ROOT / "experiments" / "run.py"), "no_such_experiment", "--out", "x"],
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "invalid choice" in bad.stderr
