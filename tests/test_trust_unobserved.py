"""An assessment whose writer count no draw observed keeps its numbers; per-fleet statistics
refuse per-job group labels by name."""

from __future__ import annotations

import contextlib
import io
import json
import math

import jax
import numpy as np
import pytest

import ckpt_jax as cj
from ckpt_jax.cli import main

# Failures while down, far more often than the restart: the jobs are down almost all the time.
DOWN = cj.Fleet(np.array([50.0, 50.0]), np.array([1.0, 1.0]), mtbf=1.0, restart=10.0, fail_while_down=True)
# A horizon shorter than the first checkpoint of either job: no draw's window opens.
SHORT = cj.Fleet(np.array([50.0, 50.0]), np.array([1.0, 1.0]), mtbf=1000.0, restart=10.0)


def _no_nan(constant):
    raise AssertionError(f"assess.json holds {constant}, which is not JSON")


@pytest.mark.parametrize("fleet, horizon", [(DOWN, 100.0), (SHORT, 0.5)], ids=["down", "short"])
def test_an_unobserved_writer_count_keeps_the_assessment(fleet, horizon):
    result = cj.assess.assess(fleet, horizon=horizon, key=jax.random.key(0), n_draws=2)
    assert not result.writers_observed and result.writers_max == -1
    assert np.all(np.isnan(result.writer_time)) and result.writer_time.shape == (3,)
    assert math.isnan(result.writers_p50) and math.isnan(result.writers_p99) and math.isnan(result.saturated_time.mean)
    # Everything else stands: goodput plus the losses is 1, and the power draw is there.
    total = result.goodput["fleet"].mean + sum(e.mean for e in result.losses["fleet"].values())
    assert total == pytest.approx(1.0, abs=1e-6)
    assert math.isfinite(result.power_mean.mean) and result.independent_writer_time.sum() == pytest.approx(1.0)
    summary = result.to_json()
    text = json.dumps(summary, allow_nan=False)  # NaN is no JSON
    storage = json.loads(text)["storage"]
    assert storage["writers_observed"] is False and storage["writers_max"] == -1
    assert storage["writer_time"] == [None] * 3 and storage["saturated_time"] is None
    assert storage["writers_p50"] is None and storage["writers_p99"] is None
    pytest.importorskip("xarray")
    ds = result.to_xarray()
    assert ds.attrs["writers_observed"] == 0 and "writers_p50" not in ds.attrs
    assert bool(np.all(np.isnan(ds.writer_time))) and ds.sizes["writers"] == 3
    assert math.isfinite(float(ds.goodput_mean.sel(group="fleet")))


def test_an_observed_writer_count_says_so():
    result = cj.assess.assess(SHORT, horizon=400.0, key=jax.random.key(0), n_draws=2)
    assert result.writers_observed and result.to_json()["storage"]["writers_observed"] is True
    assert result.writer_time.sum() == pytest.approx(1.0)


DOWN_FILE = """
fail_while_down = true
throughput = "shared"

[[groups]]
count = 2
size = 1
write = 0.5
mtbf = 1.0
restart = 10.0
compute = 4.0
"""


def test_the_cli_reports_a_writer_count_no_draw_observed(tmp_path):
    path = tmp_path / "fleet.toml"
    path.write_text(DOWN_FILE)
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        argv = ["assess", str(path), "--horizon", "40", "--draws", "2", "--no-progress", "--devices", "1"]
        assert main([*argv, "--out", str(tmp_path / "out")]) == 0
    out = tmp_path / "out"
    summary = json.loads((out / "assess.json").read_text(), parse_constant=_no_nan)
    assert summary["storage"]["writers_observed"] is False
    assert "writers.png" in summary["files"] and (out / "writers.png").exists()
    report = (out / "report.md").read_text()
    storage = report.split("## Storage", 1)[1].split("## Power", 1)[0]
    assert "The writer count was not observed in any draw" in storage
    assert "the jobs are down" in storage and "nan" not in report.lower()
    assert "Fleet goodput" in printed.getvalue()


# -- per-fleet statistics and group labels -------------------------------------------------------


@pytest.fixture(scope="module")
def stats():
    fleet = cj.Fleet(np.array([10.0, 12.0]), np.array([1.0, 1.0]), mtbf=50.0)
    save = cj.SaveAt(trace=False, jobs=True, writers=True, power=True)
    state = cj.random_state(fleet, jax.random.key(0))
    return cj.simulate(fleet, state, None, until=100.0, key=jax.random.key(1), save=save)


@pytest.mark.parametrize("field", ["writers", "power"])
def test_per_fleet_statistics_refuse_job_labels_by_name(stats, field):
    pytest.importorskip("xarray")
    with pytest.raises(ValueError, match=r"^groups: these results have no job dimension"):
        getattr(stats, field).to_xarray(groups=["a", "b"])
    assert "group" not in getattr(stats, field).to_xarray().coords  # without labels: as before


def test_job_statistics_still_take_job_labels(stats):
    pytest.importorskip("xarray")
    ds = stats.jobs.to_xarray(groups=["a", "b"])
    assert list(ds.group.values) == ["a", "b"]
