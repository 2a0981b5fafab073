"""The claim-10 experiment (intervals) at smoke size, its verdict rules on altered data, and the
grid optimum it reads from a quadratic fit."""

import copy

import numpy as np
import pytest
from experiment_checks import check_experiment_result

from ckpt_jax.experiments import EXPERIMENTS, INCONCLUSIVE, NOT_REPRODUCED, PARTIALLY, REPRODUCED, intervals


@pytest.fixture(scope="module")
def smoke(tmp_path_factory):
    out = tmp_path_factory.mktemp("intervals")
    return intervals.run(out, size="smoke", progress=False), out


@pytest.mark.slow  # reads the experiment's smoke run (module fixture); `reproduce --quick` runs it too
def test_intervals_smoke(smoke):
    result, out = smoke
    check_experiment_result(intervals, result, out, one_verdict_per_claim=False)
    assert intervals.EXPERIMENT in EXPERIMENTS
    by_sub = {v["sub_claim"]: v for v in result["verdicts"]}
    assert sorted(by_sub) == ["10a", "10b"]
    assert by_sub["10a"]["figures"] == ["intervals_10a.png"]
    assert by_sub["10b"]["figures"] == ["intervals_10b_pair.png", "intervals_10b_fleet.png"]
    single = result["numbers"]["single_job"]
    # The simulator matches the renewal formula at any size (within its error and the bracket).
    assert max(single["curve"]["z_outside"]) <= intervals.FORMULA_Z
    assert single["optimum"] == pytest.approx(3.8318316820829486, rel=1e-12)
    storm = result["numbers"]["storm"]
    assert set(storm["baselines"]) == set(intervals.BASELINES)
    for baseline in storm["baselines"].values():
        saved = baseline["saved"]
        assert saved["low"] <= saved["mean"] <= saved["high"]


def test_quadratic_minimum_recovers_a_known_minimiser():
    points = np.exp(np.stack(np.meshgrid(np.linspace(0.5, 1.5, 5), np.linspace(1.0, 2.0, 5), indexing="ij"), -1))
    points = points.reshape(-1, 2)
    x = np.log(points)
    target = np.array([0.9, 1.6])
    values = (
        1
        + (x[:, 0] - target[0]) ** 2
        + 0.5 * (x[:, 0] - target[0]) * (x[:, 1] - target[1])
        + 2 * (x[:, 1] - target[1]) ** 2
    )
    np.testing.assert_allclose(intervals.quadratic_minimum(points, values), np.exp(target), rtol=1e-10)
    assert intervals.quadratic_minimum(points, -values) is None  # a maximum is not a minimum


def _verdict_10a(single):
    return intervals.verdict_10a(single)[0]


def _verdict_10b(pair, storm):
    return intervals.verdict_10b(pair, storm)[0]


@pytest.mark.slow  # reads the experiment's smoke run (module fixture); `reproduce --quick` runs it too
def test_10a_verdict_follows_the_formula_and_the_optimum(smoke):
    single = copy.deepcopy(smoke[0]["numbers"]["single_job"])
    single["curve"]["z_outside"] = [0.0] * len(single["curve"]["z_outside"])
    single["designed_rel_error"] = 0.01
    assert _verdict_10a(single) == REPRODUCED
    off_formula = copy.deepcopy(single)
    off_formula["curve"]["z_outside"][2] = intervals.FORMULA_Z + 0.5
    assert _verdict_10a(off_formula) == NOT_REPRODUCED
    off_optimum = copy.deepcopy(single)
    off_optimum["designed_rel_error"] = -(intervals.OPTIMUM_RTOL + 0.01)
    assert _verdict_10a(off_optimum) == NOT_REPRODUCED


def _saved(storm, low, high):
    for baseline in storm["baselines"].values():
        baseline["saved"] = dict(mean=(low + high) / 2, low=low, high=high)


@pytest.mark.slow  # reads the experiment's smoke run (module fixture); `reproduce --quick` runs it too
def test_10b_verdict_follows_the_grid_and_the_savings(smoke):
    pair = copy.deepcopy(smoke[0]["numbers"]["pair"])
    storm = copy.deepcopy(smoke[0]["numbers"]["storm"])
    pair["rel_error"] = [0.01, -0.02]
    _saved(storm, 0.01, 0.03)
    assert _verdict_10b(pair, storm) == REPRODUCED
    straddles = copy.deepcopy(storm)
    straddles["baselines"]["daly"]["saved"] = dict(mean=0.001, low=-0.004, high=0.006)
    assert _verdict_10b(pair, straddles) == INCONCLUSIVE
    worse = copy.deepcopy(storm)
    worse["baselines"]["young"]["saved"] = dict(mean=-0.02, low=-0.03, high=-0.01)
    assert _verdict_10b(pair, worse) == PARTIALLY
    off_grid = copy.deepcopy(pair)
    off_grid["rel_error"] = [0.01, intervals.GRID_RTOL + 0.02]
    assert _verdict_10b(off_grid, storm) == PARTIALLY
    all_worse = copy.deepcopy(storm)
    _saved(all_worse, -0.03, -0.01)
    assert _verdict_10b(off_grid, all_worse) == NOT_REPRODUCED


@pytest.mark.slow  # reads the experiment's smoke run (module fixture); `reproduce --quick` runs it too
def test_report_has_a_row_per_sub_claim(smoke, tmp_path):
    from ckpt_jax.reproduce import write_report

    result, _ = smoke
    report = write_report(tmp_path, {"intervals": result}, "smoke").read_text()
    rows = [line for line in report.splitlines() if line.startswith("| ") and line.endswith("| `intervals` |")]
    assert len(rows) == 2 and "| 10a:" in rows[0] and "| 10b:" in rows[1]
    assert "### 10a:" in report and "### 10b:" in report and "intervals_10b_fleet.png" in report
