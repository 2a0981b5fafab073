"""What-if comparisons (`ckpt_jax.assess.compare`, `ckpt_jax.assess.sensitivity`,
``ckpt-jax compare``): overrides parsed and refused as the file itself, paired CIs against
unpaired repeats, resume from the store, compare.json's shape, the CLI's modes and errors.

Every run here is one small fleet file to one horizon at 16 draws: one compiled shape."""

import json

import jax
import numpy as np
import pytest
from scipy import stats
from small_fleet import SMALL

from ckpt_jax import fleetfile
from ckpt_jax.assess import compare, sensitivity, sensitivity_knobs
from ckpt_jax.cli import main

# Storage that never binds (f(n) = n: every writer drains at 1): the jobs do not interact, so a
# change to one group moves no other's (with a shared storage the coupling of the writes makes
# the per-draw differences noisier, docs/cli.md "ckpt-jax compare").

UNITS = """
time_unit = "min"
power_per_gpu = "700 W"

[storage]
peak = "10 GB/s"

[[groups]]
name = "8B fine-tune"
count = 2
gpus = 8
checkpoint = "100 GB"
mtbf = "4 h"
restart = "5 min"
interval = "20 min"

[[groups]]
name = "other"
count = 1
gpus = 16
checkpoint = "200 GB"
write_limit_per_node = "1 GB/s"
nodes = 2
mtbf = "8 h"
interval = "30 min"
"""

DRAWS = 16
HORIZON = 300.0


@pytest.fixture(scope="module")
def spec():
    return fleetfile.loads(SMALL, "small.toml")


# -- overrides, parsed and checked as the file ------------------------------------------------


@pytest.mark.parametrize(
    "text, key, value",
    [
        ("storage.peak=4 TB/s", "storage.peak", "4 TB/s"),
        ('storage.peak="4 TB/s"', "storage.peak", "4 TB/s"),
        ("restart = 2", "restart", 2),
        ("groups[*].interval=20 min", "groups[*].interval", "20 min"),
        ('groups["8B fine-tune"].snapshot=10 s', 'groups["8B fine-tune"].snapshot', "10 s"),
        ("cap=none", "cap", "none"),
        ("throughput=[1.0, 2.0]", "throughput", [1.0, 2.0]),
    ],
)
def test_parse_override(text, key, value):
    assert fleetfile.parse_override(text) == (key, value)


@pytest.mark.parametrize("text", ["restart", "=3", "restart=", ""])
def test_parse_override_refuses_no_key_or_value(text):
    with pytest.raises(fleetfile.FleetFileError, match="KEY=VALUE"):
        fleetfile.parse_override(text)


@pytest.mark.parametrize("text", ['restart="5 min', "restart=5 min'", "throughput=[1, 2", 'storage.peak=4 TB/s"'])
def test_parse_override_refuses_a_quote_or_bracket_left_open(text):
    # Not read as the text itself: '"5 min' would reach the unit parser and pass as 5 min.
    with pytest.raises(fleetfile.FleetFileError, match="not a TOML value"):
        fleetfile.parse_override(text)


def test_overrides_address_the_files_own_keys():
    spec = fleetfile.loads(UNITS, "units.toml")
    assert spec.override({"storage.peak": "4 GB/s"}).throughput[0] == 4e9
    assert [g.restart for g in spec.override({"restart": "2 min"}).groups] == [120.0, 120.0]
    assert [g.compute for g in spec.override({"groups[*].interval": "10 min"}).groups] == [600.0, 600.0]
    named = spec.override({'groups["8B fine-tune"].interval': "1 h"})
    assert [g.compute for g in named.groups] == [3600.0, 1800.0]
    assert [g.compute for g in spec.override({"groups[1].compute": "1 h"}).groups] == [1200.0, 3600.0]  # its twin
    limited = spec.override({"groups[1].write_limit": "5 GB/s"})  # drops write_limit_per_node and nodes
    assert limited.groups[1].write_limit == 5e9
    two_level = spec.override({"groups[*].snapshot": "10 s"})
    assert two_level.has_snapshots and spec.has_snapshots is False  # the spec itself is unchanged
    assert spec.override({"design.horizon": "2 day"}).design.horizon == 2 * 86400.0


@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"storage.pek": "4 GB/s"}, r"storage\.pek: unknown key \(did you mean 'peak'"),
        ({"restrat": "2 min"}, r"override restrat: unknown key \(did you mean 'restart'"),
        ({"storage.peak": "4 GB"}, r"storage\.peak: .*is a size; expected a bandwidth"),
        ({"restart": "-1 min"}, r"groups\[0\]\.restart: must be >= 0"),
        ({"groups[0].mtbf": 5.0}, r"groups\[0\]\.mtbf: a plain number in a file with units"),
        ({"groups[7].restart": "1 min"}, r"no group 7: the file has groups\[0\] to groups\[1\]"),
        ({'groups["8B tune"].restart': "1 min"}, r"no group named '8B tune' \(did you mean '8B fine-tune'"),
        ({"groups[*].restrat": "1 min"}, r"unknown group key 'restrat' \(did you mean 'restart'"),
        ({"groups[0].snapshot": "10 s"}, r"groups\[1\]\.snapshot: missing: groups\[0\] has a snapshot"),
        ({"groups[0].name": "x"}, r"name cannot change"),
        ({"power.cap": "1 MW"}, r"override power\.cap: unknown key"),
        ({"groups": []}, r"override groups: a scenario sets a group's keys"),
    ],
)
def test_bad_overrides_raise_the_files_errors_naming_the_key(overrides, message):
    spec = fleetfile.loads(UNITS, "units.toml")
    with pytest.raises(fleetfile.FleetFileError, match=r"fleet file units\.toml \(scenario 'x'\): .*" + message):
        spec.override(overrides, name="x")


def test_compare_refuses_bad_scenarios_before_any_run(spec, tmp_path):
    key = jax.random.key(0)
    with pytest.raises(ValueError, match="groups\\[0\\]\\.mtbf: must be a finite number > 0"):
        compare(spec, {"ok": {"restart": 1.0}, "bad": {"groups[0].mtbf": -1.0}}, key=key, out=tmp_path)
    assert not (tmp_path / "scenarios").exists()  # nothing ran
    with pytest.raises(ValueError, match=r"override design\.horizon: the \[design\] table sets how a run is made"):
        compare(spec, {"longer": {"design.horizon": 600.0}}, key=key, out=tmp_path)  # else: the baseline again
    assert not (tmp_path / "scenarios").exists()
    with pytest.raises(ValueError, match="other than 'baseline'"):
        compare(spec, {"baseline": {"restart": 1.0}}, key=key)
    with pytest.raises(ValueError, match="n_draws must be an int >= 2"):
        compare(spec, {}, key=key, n_draws=1)
    with pytest.raises(ValueError, match="read by ckpt_jax.fleetfile.load"):
        compare(fleetfile.FleetSpec(path="x", groups=spec.groups), {}, key=key)


# -- the paired CI against unpaired repeats ---------------------------------------------------


def _fleet_goodput(spec, scenario: dict, seed: int) -> tuple:
    """(baseline, scenario) fleet goodput per draw, on the draws of ``seed``."""
    ds = compare(spec, {"s": scenario}, key=jax.random.key(seed), n_draws=DRAWS, horizon=HORIZON)
    draws = ds["goodput_draws"].sel(group="fleet").values
    return draws[0], draws[1], ds


def test_paired_ci_is_much_narrower_than_unpaired_and_covers_the_repeats(spec):
    scenario = {"groups[0].restart": 6.0}
    base, alt, ds = _fleet_goodput(spec, scenario, seed=0)
    paired = ds["goodput_difference"].sel(scenario="s", group="fleet").values  # mean, low, high
    assert np.allclose(paired[0], np.mean(alt - base))  # the mean of the per-draw differences
    paired_half = (paired[2] - paired[1]) / 2
    assert np.isclose(paired_half, stats.t.ppf(0.975, DRAWS - 1) * np.std(alt - base, ddof=1) / np.sqrt(DRAWS))
    # Unpaired repeats: the baseline and the scenario each on their own, independent draws.
    repeats = [_fleet_goodput(spec, scenario, seed=seed)[:2] for seed in (1, 2, 3, 4)]
    bases = np.concatenate([r[0] for r in repeats[:2]])  # the baseline of repeats 1-2
    alts = np.concatenate([r[1] for r in repeats[2:]])  # the scenario of repeats 3-4
    unpaired_mean = alts.mean() - bases.mean()
    unpaired_half = stats.t.ppf(0.975, alts.size + bases.size - 2) * np.sqrt(
        alts.var(ddof=1) / alts.size + bases.var(ddof=1) / bases.size
    )
    one_repeat_half = unpaired_half * np.sqrt(2)  # the same from as few draws as the paired CI
    assert paired_half < one_repeat_half / 3, (paired_half, one_repeat_half)
    # The repeats' mean difference, within the two estimates' noise, lies in the paired CI.
    assert abs(paired[0] - unpaired_mean) <= paired_half + unpaired_half
    assert paired[0] > 0  # a shorter restart for group a: more saved work


def test_every_scenario_runs_on_the_same_draws(spec):
    # A scenario equal to the file reproduces the baseline draw by draw: the same launches and failures.
    ds = compare(spec, {"same": {"groups[0].restart": 8.0, "groups[b].restart": 4}}, key=jax.random.key(5))
    draws = ds["goodput_draws"].values
    np.testing.assert_array_equal(draws[0], draws[1])
    assert np.all(ds["goodput_difference"].sel(scenario="same").values == 0)
    assert not ds["goodput_significant"].sel(scenario="same").any()
    # The largest power step: its mean over the draws and, apart, its maximum over them.
    steps = ds["power_step_draws"].values
    np.testing.assert_array_equal(ds["power_step_max"].values, steps.max(axis=1))
    np.testing.assert_allclose(ds["power_step"].sel(statistic="mean").values, steps.mean(axis=1), rtol=1e-12)


def test_compare_launches_the_fleet_as_its_launch_table_says(spec):
    # The file with `[launch] mode = "together"`: compare's baseline is assess's run of the same
    # file from the same launch and key (the CLI's call: spec.fleet(), spec.launch_of()), draw for
    # draw the same jobs, not a random launch's.
    from ckpt_jax.assess import assess

    together = fleetfile.loads(SMALL + '\n[launch]\nmode = "together"\n', "together.toml")
    assert together.launch_of() != spec.launch_of()
    key = jax.random.key(7)
    ds = compare(together, {}, key=key, n_draws=DRAWS, horizon=HORIZON)
    fleet = together.fleet(dtype=np.dtype(together.dtype))
    groups = {name: [int(i) for i in np.flatnonzero(together.labels == g)] for g, name in enumerate(together.names)}
    result = assess(fleet, horizon=HORIZON, key=key, n_draws=DRAWS, groups=groups, launch=together.launch_of())
    base = ds.sel(scenario="baseline")
    for group in [*together.names, "fleet"]:
        assert float(base["goodput"].sel(group=group, statistic="mean")) == pytest.approx(
            result.goodput[group].mean, rel=1e-12
        )
    assert int(np.max(base["writers_peak_draws"].values)) == result.writers_max
    # Launched together, group a's three jobs write together until a failure parts them.
    assert np.all(base["writers_peak_draws"].values >= 3)


# -- sensitivities ----------------------------------------------------------------------------


def test_sensitivity_knobs_and_signs(spec):
    knobs = sensitivity_knobs(spec, 0.1)
    assert list(knobs) == ["storage peak", "interval of a", "interval of b", "checkpoint size", "restart", "MTBF"]
    up, down = knobs["restart"]
    assert up == {"groups[0].restart": pytest.approx(8.8), "groups[1].restart": pytest.approx(4.4)}
    assert down == {"groups[0].restart": pytest.approx(7.2), "groups[1].restart": pytest.approx(3.6)}
    assert knobs["storage peak"][0] == {"throughput": pytest.approx([1.1, 2.2, 3.3, 4.4, 5.5])}
    ds = sensitivity(spec, key=jax.random.key(0), n_draws=DRAWS, horizon=HORIZON)
    elasticity = ds["elasticity"].sel(statistic="mean")
    assert set(ds.knob.values) == set(knobs)
    assert np.all(np.diff(np.abs(elasticity.values)) <= 0)  # ranked
    # Longer MTBF buys goodput; longer restarts and larger checkpoints cost it.
    assert ds["elasticity"].sel(knob="MTBF", statistic="low") > 0
    assert ds["elasticity"].sel(knob="restart", statistic="high") < 0
    assert ds["elasticity"].sel(knob="checkpoint size", statistic="high") < 0
    # Each value by hand from the draws: the central difference over two steps, per draw, of the
    # fleet's goodput at ×(1 ± step), in units of the baseline's mean goodput; its paired 95 % CI.
    goodput = ds["goodput_draws"].sel(group="fleet")
    mean_goodput = float(goodput.sel(scenario="baseline").mean())
    for knob in knobs:
        up, down = goodput.sel(scenario=f"{knob} +10%").values, goodput.sel(scenario=f"{knob} -10%").values
        per_draw = (up - down) / (2 * 0.1 * mean_goodput)
        half = stats.t.ppf(0.975, DRAWS - 1) * np.std(per_draw, ddof=1) / np.sqrt(DRAWS)
        low, high = per_draw.mean() - half, per_draw.mean() + half
        expected = [per_draw.mean(), low, high]
        np.testing.assert_allclose(ds["elasticity"].sel(knob=knob).values, expected, rtol=1e-9, atol=1e-12)
    units = sensitivity_knobs(fleetfile.loads(UNITS, "units.toml"), 0.1)
    # As a file writes them: the time unit, an SI prefix, no float noise ("1980.0000000000002 s").
    assert units["storage peak"][0] == {"storage.peak": "11 GB/s"}
    assert units["write limit"][1] == {"groups[1].write_limit": "1.8 GB/s"}
    assert units["interval of 8B fine-tune"] == ({"groups[0].compute": "22 min"}, {"groups[0].compute": "18 min"})
    assert units["checkpoint size"][0] == {"groups[0].write": "110 GB", "groups[1].write": "220 GB"}


# -- resume -----------------------------------------------------------------------------------


def test_an_interrupted_comparison_resumes_the_scenarios_it_finished(spec, tmp_path):
    scenarios = {"faster": {"restart": 2.0}, "slower": {"restart": 9.0}}
    key = jax.random.key(2)
    first = compare(spec, {"faster": scenarios["faster"]}, key=key, n_draws=DRAWS, horizon=HORIZON, out=tmp_path)
    assert json.loads(first.attrs["reused"]) == []
    stored = sorted((tmp_path / "scenarios").glob("*.json"))
    assert len(stored) == 2  # the baseline and "faster": as if interrupted before "slower"
    again = compare(spec, scenarios, key=key, n_draws=DRAWS, horizon=HORIZON, out=tmp_path)
    assert json.loads(again.attrs["reused"]) == ["baseline", "faster"]
    np.testing.assert_array_equal(again["goodput_draws"].values[:2], first["goodput_draws"].values)
    # A file that does not hold what it should is run again; other inputs are not reused.
    stored[0].write_text("{not json")
    rerun = compare(spec, scenarios, key=key, n_draws=DRAWS, horizon=HORIZON, out=tmp_path)
    assert len(json.loads(rerun.attrs["reused"])) == 2
    other = compare(spec, scenarios, key=jax.random.key(3), n_draws=DRAWS, horizon=HORIZON, out=tmp_path)
    assert json.loads(other.attrs["reused"]) == []


def test_a_stored_scenario_edited_by_hand_is_run_again(spec, tmp_path):
    key = jax.random.key(4)
    first = compare(spec, {"faster": {"restart": 2.0}}, key=key, n_draws=DRAWS, horizon=HORIZON, out=tmp_path)
    for path in (tmp_path / "scenarios").glob("*.json"):  # the same inputs, other numbers
        saved = json.loads(path.read_text())
        saved["draws"]["goodput"][0][-1] = 0.999
        path.write_text(json.dumps(saved))
    with pytest.warns(UserWarning, match="do not match their hash"):
        again = compare(spec, {"faster": {"restart": 2.0}}, key=key, n_draws=DRAWS, horizon=HORIZON, out=tmp_path)
    assert json.loads(again.attrs["reused"]) == []
    np.testing.assert_array_equal(again["goodput_draws"].values, first["goodput_draws"].values)


# -- the CLI ----------------------------------------------------------------------------------

FAST = ["--draws", str(DRAWS), "--horizon", str(HORIZON), "--no-progress", "--devices", "1"]


@pytest.fixture(scope="module")
def small_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("fleet") / "small.toml"
    path.write_text(SMALL)
    return path


def test_cli_scenarios_write_compare_json_report_and_figure(small_file, tmp_path, capsys):
    out = tmp_path / "run"
    argv = [
        "compare",
        str(small_file),
        "--set",
        "restart=2.0",
        "--scenario",
        "short a:groups[a].compute=0.8,groups[a].restart=4",
        *FAST,
        "--out",
        str(out),
    ]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    summary = json.loads((out / "compare.json").read_text())
    assert [s["name"] for s in summary["scenarios"]] == ["baseline", "restart=2.0", "short a"]
    short = summary["scenarios"][2]
    assert short["overrides"] == {"groups[a].compute": 0.8, "groups[a].restart": 4}
    assert set(short["goodput"]) == {"fleet", "groups"} and set(short["goodput"]["fleet"]) == {"mean", "low", "high"}
    assert [g["name"] for g in short["goodput"]["groups"]] == ["a", "b"]
    assert set(short["difference"]) == {"goodput", "gpu_hours_per_day", "power_step", "writers_peak"}
    hours = short["difference"]["gpu_hours_per_day"]
    assert hours["fleet"]["low"] > 0 and short["outside_noise"]["goodput"]
    # Group b is untouched, and its writes never wait for a's: the same draws give it the same
    # hours, to the rounding of the work in progress at H (steady state, docs/model.md §1c).
    untouched = hours["groups"][1]
    assert untouched["name"] == "b"
    assert all(abs(untouched[part]) < 1e-9 for part in ("mean", "low", "high"))
    assert short["outside_noise"]["groups"] == [True, False]
    report = (out / "report.md").read_text()
    assert "## Scenarios" in report and "short a" in report and "outside the noise" in report
    assert summary["files"] == ["compare.json", "report.md", "gains.png"] and (out / "gains.png").stat().st_size > 0
    assert "short a: fleet goodput" in printed
    # Which scenarios gain beyond the noise, said plainly, first.
    verdict = report.split("\n")[2]
    assert verdict.startswith("Scenarios that gain saved work beyond the noise: ") and "**short a**" in verdict
    assert "Scenarios that gain saved work beyond the noise: " in printed
    # The same command again reuses every scenario.
    assert main(argv) == 0
    assert "3 finished scenarios reused" in capsys.readouterr().out
    # The power step: the mean over the draws of each draw's largest, and the largest in any draw.
    assert short["power_step_max"] >= short["power_step"]["mean"] - 1e-9
    assert "power step (mean; max)" in report and "max: the largest in any draw" in report


def test_cli_sweep_and_sensitivity(small_file, tmp_path, capsys):
    out = tmp_path / "sweep"
    assert main(["compare", str(small_file), "--sweep", "groups[b].compute=1,2,4", *FAST, "--out", str(out)]) == 0
    summary = json.loads((out / "compare.json").read_text())
    assert summary["sweep"] == {"key": "groups[b].compute", "values": ["1", "2", "4"]}
    assert [s["name"] for s in summary["scenarios"][1:]] == [f"groups[b].compute={v}" for v in (1, 2, 4)]
    assert "sweep.png" in summary["files"]
    out = tmp_path / "sensitivity"
    assert main(["compare", str(small_file), "--sensitivity", *FAST, "--out", str(out)]) == 0
    summary = json.loads((out / "compare.json").read_text())
    assert [row["knob"] for row in summary["sensitivity"]][0] in {"MTBF", "restart", "interval of a", "interval of b"}
    assert "tornado.png" in summary["files"]
    report = (out / "report.md").read_text()
    assert "## Knobs, ranked by the elasticity" in report and "GPU-hours per day" in report


@pytest.mark.parametrize(
    "options, message",
    [
        (["--set", "restrat=1"], "override restrat: unknown key"),
        (["--set", "groups[0].mtbf=0"], r"groups\[0\]\.mtbf: must be a finite number > 0"),
        (["--scenario", "no colon"], "must be NAME:KEY=VALUE"),
        (["--scenario", "baseline:restart=1"], "is taken"),
        (["--sweep", "restart"], "must be KEY=V1,V2"),
        (["--sweep", "restart=1"], "restart needs at least two values"),
        (["--sweep", "storage_policy=fair,fcfs"], "storage_policy: every value must be a number"),
        (["--sweep", "restart=1,1.0"], "restart=1 and restart=1.0 are the same value"),
        (["--set", 'restart="5'], "not a TOML value"),
        (["--set", "restart=1", "--set", "restart=2"], "restart is set twice"),
        (["--set", "design.horizon=2000"], r"override design\.horizon: the \[design\] table sets how a run is made"),
        (["--sweep", "design.seed=1,2"], r"override design\.seed: the \[design\] table"),
        (["--scenario", "a:mtbf=50,mtbf=60"], "mtbf is set twice"),
        (["--scenario", "a\nb:restart=1"], "holds a control character"),
        (["--sensitivity", "--set", "restart=1"], "one of the three"),
        ([], "one of the three"),
    ],
)
def test_cli_refuses_bad_options_before_any_run(small_file, tmp_path, capsys, options, message):
    import re

    out = tmp_path / "bad"
    assert main(["compare", str(small_file), *options, *FAST, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("ckpt-jax: error:") and re.search(message, err), err
    assert not (out / "scenarios").exists()


def test_cli_weighs_the_work_of_every_scenario_not_the_baselines_alone(tmp_path, capsys):
    path, out = tmp_path / "units.toml", tmp_path / "heavy"
    path.write_text(UNITS)
    argv = ["compare", str(path), "--set", "groups[0].count=90000", "--draws", "16", "--horizon", "1 day"]
    assert main([*argv, "--no-progress", "--devices", "1", "--out", str(out)]) == 2  # refused, not run for hours
    err = capsys.readouterr().err
    assert "beyond the budget" in err and "scenario 'groups[0].count=90000': groups[0].count = 90000" in err, err
    assert not (out / "scenarios").exists()


def test_cli_refuses_a_second_run_on_the_same_out(small_file, tmp_path, capsys):
    from filelock import FileLock

    from ckpt_jax.ensemble import LOCK

    out = tmp_path / "busy"
    out.mkdir()
    held = FileLock(out / LOCK)  # as another process running there holds it
    held.acquire()
    try:
        assert main(["compare", str(small_file), "--set", "restart=2.0", *FAST, "--out", str(out)]) == 2
    finally:
        held.release()
    err = capsys.readouterr().err
    assert f"--out {out} is in use by another run" in err and "use another --out" in err, err
    assert not (out / "scenarios").exists()


@pytest.mark.parametrize("name", ["scenarios", "report.md"])
def test_cli_refuses_an_out_folder_it_could_not_write_before_any_run(small_file, tmp_path, capsys, name):
    out = tmp_path / "taken"
    out.mkdir()
    (out / name).touch() if name == "scenarios" else (out / name).mkdir()
    assert main(["compare", str(small_file), "--set", "restart=2.0", *FAST, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert f"{out / name} is not a" in err and "move it" in err, err


def test_cli_interrupted_resumes_the_finished_scenarios(small_file, tmp_path, capsys, monkeypatch):
    from ckpt_jax import assess

    out = tmp_path / "interrupted"
    argv = ["compare", str(small_file), "--set", "restart=2.0", "--set", "mtbf=50.0", *FAST, "--out", str(out)]
    argv += ["--scenario", "later:restart=3.0"]
    run = assess._scenario_draws
    calls = []

    def interrupted_on_the_third(*args):
        calls.append(1)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return run(*args)

    monkeypatch.setattr(assess, "_scenario_draws", interrupted_on_the_third)
    assert main(argv) == 130
    assert capsys.readouterr().err == "ckpt-jax: interrupted; rerun the same command to resume\n"
    assert not (out / "compare.json").exists() and len(list((out / "scenarios").glob("*.json"))) == 2
    monkeypatch.setattr(assess, "_scenario_draws", run)
    assert main(argv) == 0
    assert "2 finished scenarios reused" in capsys.readouterr().out
    summary = json.loads((out / "compare.json").read_text())
    assert [s["name"] for s in summary["scenarios"]] == ["baseline", "restart=2.0 mtbf=50.0", "later"]


def test_report_numbers_read_plainly():
    from ckpt_jax.cli.assess import power_text
    from ckpt_jax.cli.compare import _amount, _knob_sentence, _points, _signed

    assert _points(3.72e-4) == "0.037" and _points(0.0287) == "2.87"
    assert _points(-1.5e-6) == "-0.00015" and _points(9.09e-7) == "0.000091"  # not "-0.000", nor "9.1e-05"
    assert _signed(0.0, lambda x: power_text(x, "W")) == "0 W"  # not "+0 W"
    assert _signed(3.72e-4, _points) == "+0.037"
    assert _amount(0.0012) == "0.0012" and _amount(-0.004) == "-0.004"  # a small fleet's: not "0"
    zero = {"mean": 0.0, "low": 0.0, "high": 0.0}
    row = {"knob": "restart", "step": 0.1, "elasticity": zero, "gpu_hours_per_day_up": zero}
    assert _knob_sentence({**row, "gpu_hours_per_day_down": zero}) == (
        "restart at ±10 %: the same saved work as the baseline on every draw"
    )
