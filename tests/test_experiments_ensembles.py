"""Ensemble experiments for claims 5 and 6 at size "smoke": files, structure, sanity."""

import re
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


@pytest.mark.slow  # a whole experiment at smoke size; `reproduce --quick` runs it too
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


@pytest.mark.slow  # a whole experiment at smoke size; `reproduce --quick` runs it too
def test_ftle_smoke(tmp_path):
    result = ftle.run(tmp_path, size="smoke", progress=False)
    _check_common(result, tmp_path, ftle)
    config = ftle.SIZES["smoke"]
    numbers = result["numbers"]
    assert numbers["burn_in"] == config["burn_in"] and numbers["horizons"] == list(config["horizons"])
    cells = numbers["cells"]
    assert len(cells) == len(config["n_jobs"]) * len(config["loads"])
    for cell in cells:
        assert cell["clean"] == cell["launches"]
        # The one-direction rate never exceeds the largest growth; twins agree with autodiff.
        assert cell["tangent_mean"] <= cell["mean"] + 1e-12
        assert cell["twin_agreeing"] == cell["twin_checked"] == config["twin_launches"]
        # One rate per horizon; the main horizon's is the cell's FTLE; per time beside per cycle.
        assert [h["horizon"] for h in cell["horizons"]] == list(config["horizons"])
        main = cell["horizons"][config["horizons"].index(config["main_horizon"])]
        assert main["mean"] == cell["mean"] and main["mean_per_time"] == cell["mean_per_time"]
        assert cell["mean_per_time"] > 0 and np.isfinite(cell["from_launch_mean"])
        change = cell["horizon_change"]
        assert change["trend"] == ftle.horizon_trend(*change["ci"], cell["mean"])
    for n_jobs in config["n_jobs"]:
        peak = numbers["peaks"][str(n_jobs)]["per_cycle"]
        means = [c["mean"] for c in cells if c["n_jobs"] == n_jobs]
        assert peak["grid"] == config["loads"][int(np.argmax(means))] == numbers["peak_load"][str(n_jobs)]
        assert sum(peak["fraction"]) == pytest.approx(1.0)
    assert result["verdicts"][0]["measured"]["twin_agreement"] == 1.0
    # One sub-claim per regime of docs/model.md's finding, each with its own verdict and figure.
    assert [v["sub_claim"] for v in result["verdicts"]] == ["5 FTLE, ρ ≤ 1", "5 FTLE, ρ > 1"]
    assert [v["figures"] for v in result["verdicts"]] == [["ftle.png"], ["ftle_regime.png"]]
    assert "peaks" in result["verdicts"][0]["why"] and "horizon" in result["verdicts"][1]["why"]


def _synthetic_table(n_jobs_list, loads, falls: bool, horizon_drop: float):
    """Cells shaped as `ftle.run` builds them: a rate rising with N and ρ up to ρ = 0.75, then
    falling (``falls``) or still rising; each horizon's rate ``horizon_drop`` lower per step."""
    config = dict(n_jobs=n_jobs_list, loads=loads, burn_in=100, horizons=(50, 100, 200), main_horizon=100)
    table, peaks = {}, {}
    for n in n_jobs_list:
        for load in loads:
            shape = load if (load <= 0.75 or not falls) else 0.75**2 / load
            mean = 0.1 * np.log2(n) * shape
            change = -horizon_drop * mean
            table[(n, load)] = dict(
                mean=mean,
                mean_per_time=mean / max(1.0, load),
                horizons=[
                    dict(horizon=k, mean=mean * (1 - horizon_drop) ** (i - 1)) for i, k in enumerate((50, 100, 200))
                ],
                horizon_change=dict(
                    change=change,
                    ci=[1.2 * change - 1e-4, 0.8 * change + 1e-4],
                    relative=-horizon_drop,
                    relative_ci=[(1.2 * change - 1e-4) / mean, (0.8 * change + 1e-4) / mean],
                    trend=ftle.horizon_trend(1.2 * change - 1e-4, 0.8 * change + 1e-4, mean),
                ),
                from_launch_excess=0.0,
                from_launch_excess_ci=[-0.01, 0.01],
            )
        for kind, key in (("per_cycle", "mean"), ("per_time", "mean_per_time")):
            values = [table[(n, load)][key] for load in loads]
            peaks.setdefault(n, {})[kind] = dict(**ftle.peak_location(loads, values), range=[0.75, 0.75])
    knee, top = 1.0, max(loads)
    steps = {
        str(n): dict(
            change=table[(n, top)]["mean"] - table[(n, knee)]["mean"],
            ci=[0, 0],
            outcome=ftle.NOT_REPRODUCED if falls else ftle.REPRODUCED,
        )
        for n in n_jobs_list
    }
    low = [load for load in loads if load <= 1.0]
    high = [load for load in loads if load > 1.0]
    return ftle.regime_texts(table, peaks, steps, config, low, high, knee)


def test_ftle_regime_text_follows_the_data():
    loads = (0.25, 0.5, 0.75, 1.0, 2.0)
    falling = _synthetic_table((4, 8), loads, falls=True, horizon_drop=0.3)
    rising = _synthetic_table((4, 8), loads, falls=False, horizon_drop=0.0)
    # Where it peaks is read off the data: at 0.75 when it falls beyond, at the grid edge otherwise.
    assert "ρ = 0.75 (≈" in falling["regime"] and "at the grid edge" not in falling["regime"]
    assert "ρ = 2 (≈ 2, at the grid edge" in rising["regime"]
    assert "It falls at every N" in falling["beyond"] and "it still grows at N = 4 and 8" in rising["beyond"]
    assert falling["horizon"].count("(falling)") == 2 and rising["horizon"].count("(settled)") == 2
    # The change and its interval in one unit (it read "-30 % [-0.0058, -0.0038]": a % and rates).
    assert "in % of the rate at K = 100" in falling["horizon"]
    assert re.search(r"-30 % \[-3\d(\.\d)? %, -2\d(\.\d)? %\] \(falling\) at N = 4", falling["horizon"])
    assert "a short horizon does" in falling["horizon"] and "a short horizon does" not in rising["horizon"]
    assert falling["horizon_headline"] != rising["horizon_headline"]


def test_ftle_peak_location_finds_a_known_peak():
    loads = np.array([0.125, 0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 2.0])
    # A parabola in log ρ peaking at ρ = 0.8: the grid maximum is 0.75, the vertex 0.8 exactly.
    curve = 1.0 - (np.log(loads) - np.log(0.8)) ** 2
    peak = ftle.peak_location(loads, curve)
    assert peak["grid"] == 0.75 and not peak["at_edge"]
    assert peak["refined"] == pytest.approx(0.8, rel=1e-9)
    # A monotone curve peaks at the grid's edge (the true peak may lie beyond); NaN cells are skipped.
    edge = ftle.peak_location(loads, loads.copy())
    assert edge["grid"] == edge["refined"] == 2.0 and edge["at_edge"]
    gappy = curve.copy()
    gappy[3] = np.nan
    assert ftle.peak_location(loads, gappy)["grid"] in (0.5, 1.0)
    assert np.isnan(ftle.peak_location(loads, np.full(loads.size, np.nan))["grid"])


def test_ftle_peak_spread_counts_where_each_resample_peaks():
    loads = [0.5, 1.0, 2.0]
    rng = np.random.default_rng(3)
    clear = np.array([0.1, 0.3, 0.2]) + rng.normal(0, 1e-3, (500, 3))
    spread = ftle.peak_spread(loads, clear)
    assert spread["fraction"] == [0.0, 1.0, 0.0] and spread["range"] == [1.0, 1.0]
    # Two loads equally likely to be the peak: each about half, and the range covers both.
    tied = np.array([0.3, 0.3, 0.1]) + rng.normal(0, 1e-2, (2000, 3))
    spread = ftle.peak_spread(loads, tied)
    assert spread["fraction"][0] == pytest.approx(0.5, abs=0.05) and spread["fraction"][2] == 0.0
    assert spread["range"] == [0.5, 1.0]


@pytest.mark.parametrize(
    "low, high, reference, expected",
    [
        (-0.05, -0.03, 0.2, "falling"),  # below −10 % of the rate
        (-0.01, 0.01, 0.2, "settled"),  # inside ±10 %
        (0.03, 0.05, 0.2, "rising"),
        (-0.03, 0.0, 0.2, "undecided"),  # straddles −10 %
        (float("nan"), 0.0, 0.2, "undecided"),
    ],
)
def test_ftle_horizon_trend(low, high, reference, expected):
    assert ftle.horizon_trend(low, high, reference) == expected


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
        assert cell["level_outcomes"] == [
            bursts.level_verdict(lo, hi) for lo, hi in zip(cell["top_ratio_lower"], cell["top_ratio_upper"])
        ]


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
    done = subprocess.run(
        [sys.executable, str(ROOT / "experiments" / "run.py"), name, "--help"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0 and "--size" in done.stdout


def test_entry_point_refuses_an_unknown_name():
    bad = subprocess.run(
        [sys.executable, str(ROOT / "experiments" / "run.py"), "no_such_experiment", "--out", "x"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert bad.returncode == 2 and "invalid choice" in bad.stderr
