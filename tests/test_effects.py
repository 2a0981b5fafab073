"""Effects that matter (issue 47, item 2) and the what-if family of item 4: a comparison's
scenarios share their launches in work coordinates; a difference is an effect only outside
the noise and above the practical floor; identical configurations read "the same"; identical
draws are one draw; two values of one field in a scenario are refused; every key of a file's
tables is a what-if key; a relative failure trace works in a what-if; a stored scenario is
reused only for the same trace contents.

The runs use `tests/test_compare.py`'s small fleet, horizon and draws (one compiled shape);
the rest needs no run."""

import dataclasses
import json
import math
import os
from pathlib import Path

import jax
import numpy as np
import pytest
from small_fleet import SMALL

from ckpt_jax import assess, fleetfile
from ckpt_jax._estimate import FLOOR, Estimate, effect
from ckpt_jax.cli import main
from ckpt_jax.cli.compare import headlines, summary_json, verdict

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"

# As tests/test_compare.py's SMALL: no write limits, so every solo write is storage-bound.
DRAWS, HORIZON = 16, 300.0


@pytest.fixture(scope="module")
def spec():
    return fleetfile.loads(SMALL, "small.toml")


def _launches(monkeypatch, spec, scenarios):
    """The start states `compare` runs each scenario from, in order (the baseline first)."""
    run, states = assess.simulate, []

    def recording(fleet, state, *args, **kwargs):
        states.append((np.asarray(state.phase), np.asarray(state.remaining, np.float64)))
        return run(fleet, state, *args, **kwargs)

    monkeypatch.setattr(assess, "simulate", recording)
    ds = assess.compare(spec, scenarios, key=jax.random.key(1), n_draws=DRAWS, horizon=HORIZON)
    return ds, states


# -- launches in work coordinates --------------------------------------------------------------


def test_a_faster_storage_starts_every_job_with_the_same_work_left(spec, monkeypatch):
    # Twice the bandwidth halves every solo write D_i. Drawn as a fraction of D_i + T_i (as
    # before), every job's launch moved; in work coordinates only a job whose phase changes
    # (probability |ΔD_i| / (D_i + T_i), a few %) starts elsewhere.
    _, ((phase0, left0), (phase1, left1)) = _launches(
        monkeypatch, spec, {"fast": {"throughput": [2.0, 4.0, 6.0, 8.0, 10.0]}}
    )
    kept = phase0 == phase1
    assert kept.mean() > 0.9
    np.testing.assert_array_equal(left1[kept], left0[kept])


def test_storage_on_writes_capped_by_their_own_limits_reads_the_same(spec):
    # Each job's write limit (0.5) is below f(1): more storage changes no write, no launch.
    capped = spec.override({"groups[*].write_limit": 0.5})
    ds = assess.compare(
        capped, {"10x storage": {"throughput": [10.0, 20.0, 30.0, 40.0, 50.0]}}, key=jax.random.key(2), n_draws=DRAWS
    )
    draws = ds["gpu_hours_per_day_draws"].values
    np.testing.assert_array_equal(draws[1], draws[0])
    assert not ds["gpu_hours_per_day_significant"].any() and not bool(ds["same_configuration"][1])
    summary = {**summary_json(ds), "settings": {"mode": "scenarios"}}
    assert verdict(summary).endswith("the same as the baseline: **10x storage**.")
    assert "the same saved work as the baseline on every draw" in headlines(summary)[0]


# -- the practical floor, "the same", one draw ---------------------------------------------------


def test_float_rounding_is_no_effect():
    rounding = Estimate(4.73e-12, 4.72e-12, 4.74e-12)  # as the design reported it
    assert effect(rounding, FLOOR) == 0 and effect(rounding, 0.0) == 1
    assert effect(Estimate(-0.02, -0.03, -0.01), FLOOR) == -1
    assert effect(Estimate(0.02, -0.01, 0.05), FLOOR) == 0  # the CI holds 0
    assert effect(Estimate(0.02, math.nan, math.nan), FLOOR) == 0  # no interval: not resolved
    assert effect(Estimate(0.02, math.nan, math.nan), FLOOR, exact=True) == 1  # one draw: exact
    assert effect({"mean": 5e-5, "low": None, "high": None}, FLOOR, exact=True) == 0  # below the floor


def _draws(spec, goodput: np.ndarray) -> dict:
    """A scenario's draws (`assess._scenario_draws`' shape) from the fleet's goodput per draw."""
    gpus = np.asarray([3.0, 4.0, 7.0])
    shares = np.repeat(np.asarray(goodput, np.float64)[:, None], 3, axis=1)
    return {
        "goodput": shares,
        "gpu_hours_per_day": shares * gpus * 24.0,
        "power_step": np.full(len(goodput), 3.0),
        "writers_peak": np.full(len(goodput), 2.0),
        "gpus": gpus,
    }


def _dataset(spec, base, scenario, floor=FLOOR):
    specs = {"baseline": spec, "s": spec.override({"restart": 2.0})}
    return assess._comparison_dataset(
        spec, specs, {"s": {"restart": 2.0}}, {"baseline": base, "s": scenario}, HORIZON, floor, None
    )


def test_a_difference_below_the_floor_is_within_the_noise(spec):
    goodput = np.linspace(0.80, 0.90, 8)
    tiny = goodput + 1e-12 * (1 + np.linspace(0, 0.01, 8))  # a CI that excludes 0, at float rounding
    ds = _dataset(spec, _draws(spec, goodput), _draws(spec, tiny))
    assert float(ds["gpu_hours_per_day_difference"].sel(scenario="s", group="fleet", statistic="low")) > 0
    assert not ds["gpu_hours_per_day_significant"].any() and not ds["goodput_significant"].any()
    summary = {**summary_json(ds), "settings": {"mode": "scenarios"}}
    assert "within the noise: below the floor" in headlines(summary)[0]
    assert "within the noise: **s**" in verdict(summary)
    # Above the floor it counts; with --floor 0 the CI alone decides.
    assert (
        _dataset(spec, _draws(spec, goodput), _draws(spec, goodput + 1e-3))["goodput_significant"]
        .sel(scenario="s")
        .all()
    )
    assert _dataset(spec, _draws(spec, goodput), _draws(spec, tiny), 0.0)["goodput_significant"].sel(scenario="s").all()


def test_identical_draws_are_one_draw_without_an_interval(spec):
    # A replayed trace and a fixed launch: every draw the same.
    ds = _dataset(spec, _draws(spec, np.full(4, 0.9)), _draws(spec, np.full(4, 0.88)))
    assert bool(ds["one_draw"].sel(scenario="s"))
    difference = ds["gpu_hours_per_day_difference"].sel(scenario="s", group="fleet").values
    assert difference[0] == pytest.approx(-0.02 * 7 * 24) and np.isnan(difference[1:]).all()
    assert np.isnan(ds["goodput"].sel(scenario="baseline", group="fleet", statistic="low"))
    assert bool(ds["gpu_hours_per_day_significant"].sel(scenario="s", group="fleet"))  # exact, above the floor
    summary = {**summary_json(ds), "settings": {"mode": "scenarios"}}
    assert headlines(summary)[0].endswith("saved work -3.36 GPU-hours per day (one draw: every draw the same)")
    assert "that lose: **s**" in verdict(summary)


def test_the_files_own_values_read_the_same_configuration(spec):
    ds = assess.compare(spec, {"as is": {"groups[0].restart": 8.0}}, key=jax.random.key(5), n_draws=DRAWS)
    assert bool(ds["same_configuration"].sel(scenario="as is")) and not ds["goodput_significant"].any()
    summary = {**summary_json(ds), "settings": {"mode": "scenarios"}}
    assert "the same: the baseline's configuration" in headlines(summary)[0]
    assert verdict(summary).endswith("the same as the baseline: **as is**.")


def test_design_counts_no_rounding_as_a_gain_or_a_pay():
    from ckpt_jax.cli.design import _group_verdicts, headline, recommend

    rounding = {"mean": 4.73e-12, "low": 4.72e-12, "high": 4.74e-12}
    summary = {
        "settings": {"floor": FLOOR, "quick": False, "draws": 4},
        "fleet": {"groups": [{"size": 8.0, "count": 2}, {"size": 16.0, "count": 1}]},
        "baselines": {"daly": {"waste": rounding, "saved": rounding}},
        "per_group_saved": {"daly": [rounding, {k: -v for k, v in rounding.items()}]},
        "per_group": {"daly": [{"mean": 0.0172}] * 2, "design": [{"mean": 0.0172}] * 2},
        "steps_taken": 3,
        "converged": True,
        "stopped_early": True,
        "method": "search",
        "search_rtol": 0.1,
        "waste": rounding,
    }
    assert _group_verdicts(summary, ["x", "y"])["daly"] == {"gain": [], "pay": [], "tie": ["x", "y"]}
    summary["recommended"] = recommend(summary)
    assert summary["recommended"]["use"] == "design" and "is as good" in summary["recommended"]["text"]
    lines = headline(summary, ["x", "y"])
    assert "is within the noise on fleet waste" in lines[1] and "pays" not in lines[1], lines


def test_floor_is_an_option_checked_before_any_run(tmp_path, capsys):
    path = tmp_path / "small.toml"
    path.write_text(SMALL)
    out = tmp_path / "run"
    assert main(["compare", str(path), "--set", "restart=2", "--floor", "100", "--out", str(out)]) == 2
    assert "--floor: must be a percent in [0, 100)" in capsys.readouterr().err
    with pytest.raises(ValueError, match=r"floor must be in \[0, 1\)"):
        assess.compare(fleetfile.loads(SMALL, "small.toml"), {}, key=jax.random.key(0), floor=-1e-4)


# -- what-if keys (item 4) -----------------------------------------------------------------------

UNITS = EXAMPLES / "fleet_failures.toml"


@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"groups[0].interval": "2 h", "groups[0].compute": "3 h"}, r"sets groups\[0\]\.compute, which override "),
        ({"restart": "1 min", "groups[0].restart": "2 min"}, r"override groups\[0\]\.restart: sets groups\[0\]"),
        ({"groups[*].mtbf": "9 h", 'groups["eval"].mtbf': "2 h"}, r"sets groups\[1\]\.mtbf, which override groups"),
        ({"groups[0].restart": "1 min", "groups[train].restart": "2 min"}, r"groups\[0\]\.restart"),
        ({"storage.peak": "1 GB/s", "storage.table": ["1 GB/s"]}, r"override storage\.table: sets throughput"),
        ({"groups[0].write_limit": "1 GB/s", "groups[0].nodes": 2}, r"sets groups\[0\]\.write_limit"),
    ],
)
def test_two_values_for_one_field_in_a_scenario_are_refused(overrides, message):
    spec = fleetfile.load(UNITS)
    with pytest.raises(fleetfile.FleetFileError, match=message + ".*two values for one field"):
        spec.override(overrides, name="x")


def test_distinct_fields_and_groups_are_not_refused():
    spec = fleetfile.load(UNITS)
    spec.override({"groups[0].restart": "1 min", "groups[1].restart": "2 min"})
    spec.override({"storage.peak": "1 GB/s", "storage.saturates_at": 2})


def _table_keys(data: dict) -> dict:
    """Every key of a fleet file's tables, as a what-if addresses it -> the file's own value."""
    keys = {}
    for key, value in data.items():
        if key == "groups":
            for g, group in enumerate(value):
                keys.update({f"groups[{g}].{k}": v for k, v in group.items() if k != "name"})
        elif key == "outages":
            for o, table in enumerate(value):
                keys.update({f"outages[{o}].{k}": v for k, v in table.items()})
        elif isinstance(value, dict):
            keys.update({f"{key}.{k}": v for k, v in value.items()})
        else:
            keys[key] = value
    return keys


@pytest.mark.parametrize("name", sorted(path.name for path in EXAMPLES.glob("*.toml")))
def test_every_key_of_a_files_tables_is_a_what_if_key(name):
    spec = fleetfile.load(EXAMPLES / name)
    for key, value in _table_keys(spec.source).items():
        if key.startswith("design."):  # refused on purpose (every scenario runs one design)
            with pytest.raises(ValueError, match=r"the \[design\] table sets how a run is made"):
                assess.check_scenario_keys("x", {key: value})
            continue
        assess.check_scenario_keys("x", {key: value})
        scenario = spec.override({key: value}, name=f"{key}={value}")
        assert dataclasses.replace(scenario, path=spec.path) == spec, key  # its own value: the same fleet


def test_a_what_if_reads_a_relative_trace_from_the_files_folder(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)  # not the file's folder
    spec = fleetfile.load(os.path.relpath(UNITS, tmp_path))
    scenario = spec.override({"storage.peak": "50 GB/s"}, name="storage.peak=50 GB/s")  # a "/" in the name
    assert scenario.failure_times == spec.failure_times and scenario.throughput[0] == 50e9
    assert spec.override({"launch.mode": "random"}).launch.mode == "random"  # the stagger dropped with it


def test_a_stored_scenario_is_reused_only_for_the_same_trace_contents(tmp_path):
    trace = tmp_path / "failures.csv"
    (tmp_path / "fleet.toml").write_text(UNITS.read_text())
    keys = jax.random.split(jax.random.key(0), 2)
    trace.write_text((EXAMPLES / "failures.csv").read_text())
    before = assess._fingerprint(fleetfile.load(tmp_path / "fleet.toml"), 3600.0, keys)
    rows = trace.read_text().splitlines()
    trace.write_text("\n".join(rows[:-1]) + "\n")  # the last failure gone, the path the same
    after = assess._fingerprint(fleetfile.load(tmp_path / "fleet.toml"), 3600.0, keys)
    assert before != after
    moved = tmp_path / "elsewhere"
    moved.mkdir()
    (moved / "fleet.toml").write_text(UNITS.read_text())
    (moved / "failures.csv").write_text(trace.read_text())
    assert assess._fingerprint(fleetfile.load(moved / "fleet.toml"), 3600.0, keys) == after  # contents, not path


@pytest.mark.slow  # the Python API's test above covers the relative trace in the tier
def test_cli_sweeps_a_file_with_a_relative_trace(tmp_path, capsys):
    out = tmp_path / "sweep"
    argv = ["compare", str(UNITS), "--sweep", "storage.peak=50 GB/s,200 GB/s", "--draws", "2", "--horizon", "2 h"]
    assert main([*argv, "--no-progress", "--devices", "1", "--out", str(out)]) == 0
    summary = json.loads((out / "compare.json").read_text())
    assert [entry.get("one_draw") for entry in summary["scenarios"]] == [True, True, True]
    assert "one draw" in (out / "report.md").read_text()


def test_assess_of_identical_draws_is_one_draw_without_an_interval():
    import ckpt_jax as cj
    from ckpt_jax.assess import assess
    from ckpt_jax.design import Launch

    # No failures and a launch all together: nothing is drawn, every draw the same.
    fixed = cj.Fleet(np.full(3, 3.0), np.full(3, 1.0))
    one = assess(fixed, horizon=40.0, key=jax.random.key(1), n_draws=2, launch=Launch("together"))
    goodput = one.goodput["fleet"]
    assert 0 < goodput.mean < 1 and math.isnan(goodput.low) and math.isnan(goodput.high)
    assert math.isnan(one.power_largest_drop.low) and one.to_json()["goodput"]["fleet"]["low"] is None
    drawn = assess(fixed, horizon=40.0, key=jax.random.key(1), n_draws=2)  # random launches: an interval
    assert drawn.goodput["fleet"].low < drawn.goodput["fleet"].high


def test_a_knobs_line_says_the_verdict_its_summary_says():
    # A 10 % step's one-sided change within the noise, its elasticity (the central difference,
    # twice the step) outside it: the knob's line must not call it noise while the summary
    # line lists it among the knobs that raise the goodput.
    from ckpt_jax.cli.compare import _knob_sentence

    row = {
        "knob": "storage peak",
        "step": 0.1,
        "elasticity": {"mean": 0.00145, "low": 7.1e-05, "high": 0.00283},
        "gpu_hours_per_day_up": {"mean": 111.0, "low": -14.0, "high": 236.0},
        "gpu_hours_per_day_down": {"mean": -120.0, "low": -250.0, "high": 10.0},
        "outside_noise": {"elasticity": True, "gpu_hours_per_day_up": False, "gpu_hours_per_day_down": False},
    }
    line = _knob_sentence(row)
    assert "within the noise" not in line and line.endswith("(outside the noise)"), line
    row["outside_noise"]["elasticity"] = False
    assert "within the noise" in _knob_sentence(row)
