"""``ckpt-jax design FLEET.toml`` and ``ckpt-jax simulate --fleet``."""

import json
import re

import pytest

from ckpt_jax.cli import main
from ckpt_jax.cli.design import FILES

TINY = """
throughput = "shared"
cap = 2.0

[design]
bounds = [0.5, 50.0]
horizon = 40.0

[[groups]]
name = "small"
count = 2
size = 1
write = 0.5
mtbf = 20.0
restart = 0.5

[[groups]]
name = "big"
count = 1
size = 2
write = 1.0
mtbf = 10.0
"""

FAST = ["--steps", "2", "--draws", "2", "--pairs", "1", "--no-progress", "--devices", "1"]


@pytest.fixture
def fleet_file(tmp_path):
    path = tmp_path / "tiny.toml"
    path.write_text(TINY)
    return path


def one_error_line(capsys) -> str:
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    return err.strip()


# Names Markdown and matplotlib's mathtext would read as markup: a "|" splits a table cell,
# "$\\nosuchmacro{$" failed the figures after the whole design had run.
HOSTILE = {"small": "a|b *c* # d", "big": "$\\\\nosuchmacro{$"}


def test_design_writes_report_json_and_figures(fleet_file, tmp_path, capsys):
    text = TINY
    for plain, hostile in HOSTILE.items():
        text = text.replace(f'name = "{plain}"', f'name = "{hostile}"')
    fleet_file.write_text(text)
    names = [HOSTILE["small"], HOSTILE["big"].replace("\\\\", "\\")]
    out = tmp_path / "design"
    assert main(["design", str(fleet_file), "--quick", *FAST, "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    # A run that did not converge says so first; the groups that gain and pay are named.
    assert "NOT CONVERGED: 2 steps (the --quick budget)" in printed
    assert "Against Young: the design" in printed and "per group:" in printed and repr(names[0]) in printed
    # The work, said before it starts: events per run of the file's fleet to the horizon.
    from ckpt_jax.fleetfile import load

    assert f"jobs to H = 40: about {load(fleet_file).events(40.0):.2g} events per run" in printed, printed
    for name in FILES:
        assert (out / name).stat().st_size > 0, name
    summary = json.loads((out / "design.json").read_text())
    assert summary["settings"]["steps"] == 2 and summary["settings"]["horizon"] == 40.0
    assert [group["name"] for group in summary["groups"]] == names
    assert set(summary["baselines"]) == {"young", "daly", "young_contended"}
    assert summary["steps_taken"] == 2
    # The search, from the best baseline, and the command for a settled answer.
    assert summary["method"] == "search" and summary["converged"] is False
    assert summary["start"] in summary["baselines"] and summary["fallback"] in (None, *summary["baselines"])
    assert "For a settled answer" in printed and "--draws 4 --steps 4" in summary["rerun"]
    # One voice: the fleet waste table and the per-group tables are the same draws.
    for name in summary["baselines"]:
        fleet = summary["per_group_fleet_waste"][name]
        assert fleet["mean"] == pytest.approx(summary["baselines"][name]["waste"]["mean"], abs=1e-12)
    assert summary["per_group_fleet_waste"]["design"]["mean"] == pytest.approx(summary["waste"]["mean"], abs=1e-12)
    power = summary["power_and_storage"]
    assert power["per"] == "horizon" and set(power["sets"]) == {"design", *summary["baselines"]}
    assert all(row["volume"]["mean"] > 0 for row in power["sets"].values())
    # The writer count is averaged over the draws where it is defined, never NaN there.
    for name, fraction in summary["writers_fraction"].items():
        assert summary["writers_draws"][name] >= 1, name
        assert abs(sum(fraction) - 1) < 1e-9, name
    report = (out / "report.md").read_text()
    assert "## Recommended intervals" in report and "contended Young" in report and "95% CI" in report
    assert "## Power and storage" in report
    assert report.splitlines()[2].startswith("- **NOT CONVERGED")
    # Escaped: each group's rows keep their cells, no heading is injected.
    assert "| a\\|b \\*c\\* \\# d | 2 |" in report and "| \\$\\\\nosuchmacro{\\$ | 1 |" in report
    assert [line for line in report.splitlines() if line.startswith("#")] == [
        line for line in report.splitlines() if line.startswith(("# Checkpoint", "## "))
    ]
    cells = [len(re.split(r"(?<!\\)\|", line)) if line.startswith("|") else None for line in report.splitlines()]
    for before, here in zip(cells, cells[1:]):
        assert before is None or here is None or before == here  # every row of a table has its header's cells


def test_design_offsets_and_group_bounds(fleet_file, tmp_path, capsys):
    # [design] offsets = true designs launch offsets (reported); a group's bounds hold its
    # interval; the schedule comes from a run with failures.
    text = TINY.replace("horizon = 40.0", "horizon = 40.0\noffsets = true").replace(
        "mtbf = 10.0", "mtbf = 10.0\nbounds = [4.0, 8.0]"
    )
    fleet_file.write_text(text)
    out = tmp_path / "design"
    assert main(["design", str(fleet_file), "--quick", *FAST, "--out", str(out)]) == 0
    summary = json.loads((out / "design.json").read_text())
    assert summary["settings"]["offsets"] is True and len(summary["offsets"]) == 3
    assert summary["settings"]["group_bounds"] == [[0.5, 50.0], [4.0, 8.0]]
    assert 4.0 <= summary["groups"][1]["design"] <= 8.0  # the search may stop on a bound
    assert summary["schedule_failures_shown"] >= 1
    report = (out / "report.md").read_text()
    assert "## Launch offsets (designed)" in report and "designed launch offsets" in report
    assert (out / "schedule.png").stat().st_size > 0


def test_design_bad_fleet_file_is_one_error_line(fleet_file, tmp_path, capsys):
    fleet_file.write_text(TINY.replace("mtbf = 10.0", "mtbf = -10.0"))
    assert main(["design", str(fleet_file), *FAST, "--out", str(tmp_path / "o")]) == 2
    line = one_error_line(capsys)
    assert line.startswith("ckpt-jax: error: fleet file ") and "groups[1].mtbf" in line and "> 0" in line


@pytest.mark.parametrize(
    "option, value", [("--steps", "0"), ("--draws", "1"), ("--horizon", "-1"), ("--seed", "-1"), ("--pairs", "x")]
)
def test_design_overrides_are_validated(fleet_file, tmp_path, capsys, option, value):
    assert main(["design", str(fleet_file), option, value, "--out", str(tmp_path / "o")]) == 2
    assert option in one_error_line(capsys)


def test_simulate_fleet_file(fleet_file, tmp_path, capsys):
    out = tmp_path / "sim"
    assert (
        main(
            [
                "simulate",
                "--fleet",
                str(fleet_file),
                "--cycles",
                "10",
                "--fleets",
                "2",
                "--devices",
                "1",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    assert "2/2 fleets ok, N=3" in capsys.readouterr().out
    summary = json.loads((out / "summary.json").read_text())
    assert summary["parameters"]["fleet"]["groups"][1]["name"] == "big"
    assert summary["parameters"]["horizon"] == 40.0
    assert (out / "trace.png").exists()


@pytest.mark.parametrize(
    "conflict",
    [
        ["--jobs", "8"],
        ["--cap", "3"],
        ["--size", "1,2"],
        ["--throughput", "shared"],
        ["--power-policy", "maxmin"],
        ["--compute", "10"],
        ["--snapshot", "0.1"],
        ["--write-limit", "1"],
        ["--recover-from", "storage"],
        ["--idle-power", "0.5"],
    ],
)
def test_simulate_fleet_refuses_fleet_options(fleet_file, tmp_path, capsys, conflict):
    assert main(["simulate", "--fleet", str(fleet_file), *conflict, "--out", str(tmp_path / "o")]) == 2
    line = one_error_line(capsys)
    assert "--fleet" in line and conflict[0] in line


def test_simulate_fleet_bad_file(tmp_path, capsys):
    assert main(["simulate", "--fleet", str(tmp_path / "absent.toml"), "--out", str(tmp_path / "o")]) == 2
    assert "absent.toml: cannot read it" in one_error_line(capsys)


@pytest.mark.slow
def test_design_example_fleet_quick(tmp_path, capsys):
    out = tmp_path / "example"
    assert main(["design", "examples/fleet.toml", "--quick", "--no-progress", "--out", str(out)]) == 0
    summary = json.loads((out / "design.json").read_text())
    assert len(summary["groups"]) == 4


# The tiny fleet with write limits (one group only), two-level checkpoints recovering from
# memory, and an idle draw (docs/model.md §1d).
TWO_LEVEL = (
    TINY.replace("cap = 2.0", 'cap = 2.0\nrecover_from = "memory"\nidle_power = 0.2')
    .replace("restart = 0.5", "restart = 0.5\nwrite_limit = 0.25\nsnapshot = 0.05")
    .replace("mtbf = 10.0", "mtbf = 10.0\nsnapshot = 0.1")
)


@pytest.mark.slow  # the library's snapshot designs are in tests/test_design.py
def test_design_fleet_file_with_write_limits_and_snapshots(fleet_file, tmp_path, capsys):
    from ckpt_jax.fleetfile import load

    fleet_file.write_text(TWO_LEVEL)
    spec = load(fleet_file)
    fleet = spec.fleet()
    assert fleet.has_snapshots and fleet.recover_from == "memory" and float(fleet.idle_power) == 0.2
    assert fleet.write_limit.tolist() == [0.25, 0.25, float("inf")]
    # Young's interval from the snapshot, no shorter than the drain d / min(b, f(1)) = 2 of "small".
    assert spec.young().tolist() == [2.0, 2.0, max(2 * 0.1 * 10.0, 1.0) ** 0.5]
    out = tmp_path / "design"
    assert main(["design", str(fleet_file), "--quick", *FAST, "--out", str(out)]) == 0
    summary = json.loads((out / "design.json").read_text())
    assert summary["fleet"]["recover_from"] == "memory" and summary["fleet"]["idle_power"] == 0.2
    assert [group.get("write_limit") for group in summary["fleet"]["groups"]] == [0.25, None]
    assert [group["snapshot"] for group in summary["fleet"]["groups"]] == [0.05, 0.1]
    assert [group["young"] for group in summary["groups"]] == [2.0, 2.0**0.5]
    report = (out / "report.md").read_text()
    assert "Waste is 1 − persisted work / H" in report
    assert "write limits 0.25, none (group by group); two-level checkpoints, snapshots 0.05, 0.1" in report


def test_simulate_fleet_file_with_snapshots_observes_power(fleet_file, tmp_path, capsys):
    fleet_file.write_text(TWO_LEVEL)
    out = tmp_path / "sim"
    assert main(["simulate", "--fleet", str(fleet_file), "--power", "--cycles", "2", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "power draw of fleet 0 (full draw W = 4)" in printed
    # Two firings per job cover a part of the horizon: the run says which.
    assert "the trace holds the first 2 firings per job: every firing up to " in printed
    assert "of the 40 horizon (--cycles records more)" in printed
    summary = json.loads((out / "summary.json").read_text())
    assert not summary["recorded_whole_run"] and summary["recorded_until"] < 40
    assert summary["parameters"]["fleet"]["recover_from"] == "memory"
    # The computing jobs draw at most the cap C = 2; the others 0.2 of their size on top.
    assert summary["power"]["full_draw"] == [4.0] and 0 < summary["power"]["max"][0] <= 2.0 + 0.2 * 4.0
    assert summary["power"]["mean"][0] < summary["power"]["max"][0]


# TINY in hours, gigabytes and GB/s (storage of 1 GB/s: 1.8 TB takes 0.5 h alone), "big" with
# the interval its cluster uses today.
TINY_UNITS = """
time_unit = "h"
cap = 2.0

[storage]
peak = "1 GB/s"

[design]
bounds = ["0.5 h", "50 h"]
horizon = "3 day"

[[groups]]
name = "small"
count = 2
gpus = 1
checkpoint = "1.8 TB"
mtbf = "20 h"
restart = "0.5 h"

[[groups]]
name = "big"
count = 1
gpus = 2
checkpoint = "3.6 TB"
mtbf = "10 h"
interval = "3 h"
"""


def test_design_with_units_answers_in_hours_goodput_and_gpu_hours(tmp_path, capsys):
    path = tmp_path / "units.toml"
    path.write_text(TINY_UNITS)
    out = tmp_path / "design"
    assert main(["design", str(path), "--quick", *FAST, "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    summary = json.loads((out / "design.json").read_text())
    # --quick caps a file with units at one day of its time (not 200 s), said in its unit.
    assert summary["settings"]["horizon"] == 86400.0
    assert "3 jobs to H = 24 h (86,400 s)" in printed
    assert summary["time_unit"] == "h" and summary["seconds_per_time_unit"] == 3600.0
    for key in ("intervals_in_time_unit", "recommendation", "gpus", "goodput", "gpu_hours_saved_per_day"):
        assert key in summary, key
    compared = ["current", "young", "daly", "young_contended"]
    assert list(summary["gpu_hours_saved_per_day"]) == compared
    # The file's own intervals: "big" its 3 h, "small" Young's (none given), in s and in h.
    assert summary["groups"][1]["current"] == 3 * 3600.0
    assert summary["groups"][0]["current"] == summary["groups"][0]["young"]
    rows = summary["intervals_in_time_unit"]
    assert rows[1]["current"] == 3.0 and rows[0]["design"] == summary["groups"][0]["design"] / 3600
    assert summary["gpus"] == {"groups": [2.0, 2.0], "fleet": 4.0}
    # GPU-hours per day = waste saved × GPUs × 24, from design.json's own waste numbers.
    for name in compared:
        hours = summary["gpu_hours_saved_per_day"][name]
        fleet_saved = summary["per_group_fleet_saved"][name]
        design, other = summary["per_group_fleet_waste"]["design"], summary["per_group_fleet_waste"][name]
        assert fleet_saved["mean"] == pytest.approx(other["mean"] - design["mean"], abs=1e-12)
        for bound in ("mean", "low", "high"):
            assert hours["fleet"][bound] == pytest.approx(fleet_saved[bound] * 4 * 24, rel=1e-9, abs=1e-9)
            for g, gpus in enumerate([2, 2]):
                saved = summary["per_group_saved"][name][g][bound]
                assert hours["groups"][g][bound] == pytest.approx(saved * gpus * 24, rel=1e-9, abs=1e-9)
        verdict = summary["gains_and_pays"][name]
        assert sorted(verdict["gain"] + verdict["pay"] + verdict["tie"]) == ["big", "small"]
    # Goodput before (current) and after (design) is 1 − their waste.
    for name in ("current", "design"):
        goodput = summary["goodput"][name]
        assert goodput["fleet"]["mean"] == pytest.approx(1 - summary["per_group_fleet_waste"][name]["mean"])
        assert goodput["groups"][1]["mean"] == pytest.approx(1 - summary["per_group"][name][1]["mean"])
    report = (out / "report.md").read_text()
    from ckpt_jax.cli.design import significant

    # The recommended interval (the design's, or the current one where it saves nothing measurable).
    design_h = significant(summary["groups"][0]["recommended"] / 3600, 2)
    assert f'"small": checkpoint every {design_h} h (now every 4.5 h)' in report
    assert summary["recommendation"][0] == f"small: checkpoint every {design_h} h"
    assert "| 1.8 TB | 30 min | 20 h |" in report  # the checkpoint, its write alone and the MTBF
    assert "## Goodput before and after" in report and "## GPU-hours per day saved by the design" in report
    assert "Against the current intervals: the design saves" in printed
    power = summary["power_and_storage"]
    assert power["per"] == "day" and power["sets"]["current"]["power_steps"]["mean"] >= 0
    assert "Power and storage:" in printed and "written a day" in printed
    # Goodput is 1 − the fleet waste of the waste table (one set of draws).
    assert summary["goodput"]["design"]["fleet"]["mean"] == pytest.approx(1 - summary["waste"]["mean"], abs=1e-12)
    for line in report.splitlines():  # every row of a table has its header's cells
        assert not line.startswith("|") or line.count("|") >= 3


def test_design_units_and_plain_twin_give_the_same_intervals(tmp_path, capsys):
    # The same fleet in hours and bytes, and in plain numbers (hours; volumes in hours at f = 1).
    units = TINY_UNITS.replace('horizon = "3 day"', 'horizon = "40 h"')
    plain = TINY.replace("mtbf = 10.0", "mtbf = 10.0\ncompute = 3.0")
    summaries = []
    for name, text in (("units", units), ("plain", plain)):
        path = tmp_path / f"{name}.toml"
        path.write_text(text)
        assert main(["design", str(path), *FAST, "--x64", "--out", str(tmp_path / name)]) == 0
        summaries.append(json.loads((tmp_path / name / "design.json").read_text()))
    with_units, plain_numbers = summaries
    for row_units, row_plain in zip(with_units["groups"], plain_numbers["groups"]):
        for key in ("design", "young", "daly"):
            assert row_units[key] / 3600 == pytest.approx(row_plain[key], rel=1e-6), key
    assert with_units["groups"][1]["current"] / 3600 == pytest.approx(3.0)
    # A file of plain numbers that gives intervals is weighed against them too, but in waste
    # alone: no GPU-hours.
    assert "current" in plain_numbers["per_group"] and "gpu_hours_saved_per_day" not in plain_numbers


@pytest.mark.parametrize(
    "extra, expected",
    [([], "--staggers has nothing to design"), (["--method", "adam"], "--staggers needs --method search")],
)
def test_design_staggers_are_refused_before_any_run(fleet_file, tmp_path, capsys, extra, expected):
    # TINY has no [[outages]] and a random launch: nothing to stagger; adam cannot design them.
    if extra:
        fleet_file.write_text(TINY + "\n[[outages]]\nmtbf = 50.0\n")
    assert main(["design", str(fleet_file), "--staggers", *extra, "--out", str(tmp_path / "o")]) == 2
    assert expected in one_error_line(capsys)


def test_the_schedule_figure_launches_at_the_designed_stagger():
    from types import SimpleNamespace

    from ckpt_jax.cli.design import _designed_launch
    from ckpt_jax.design import Launch

    settings = {"launch": "staggered", "stagger": 30.0}
    assert _designed_launch(settings, SimpleNamespace(launch_stagger=None)) == Launch("staggered", 30.0)
    assert _designed_launch(settings, SimpleNamespace(launch_stagger=12.5)) == Launch("staggered", 12.5)
    assert _designed_launch({"launch": "random", "stagger": 0.0}, SimpleNamespace(launch_stagger=None)) == "random"


def test_simulate_fleet_records_the_whole_horizon_and_says_so(tmp_path, capsys):
    """Without --cycles, a fleet file's trace holds every firing up to its horizon (it held
    50 per job, a fraction of a long horizon); summary.json has goodput and failure counts,
    and trace.png speaks in the file's time unit."""
    import numpy as np

    path = tmp_path / "units.toml"
    path.write_text(TINY_UNITS.replace('horizon = "3 day"', 'horizon = "10 day"'))
    out = tmp_path / "sim"
    assert main(["simulate", "--fleet", str(path), "--no-progress", "--devices", "1", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "the trace holds every firing up to the horizon, 240 h" in printed
    assert re.search(r"goodput \d+\.\d\d %, \d+ failures?", printed)
    summary = json.loads((out / "summary.json").read_text())
    fire = np.load(out / "trace.npz")["fire_times"]
    assert np.isnan(fire[..., -1]).all()  # no job filled its slots
    assert np.nanmax(fire) > 200 * 3600  # firings late in the 240 h horizon are there
    assert summary["recorded_whole_run"] and summary["recorded_until"] == 240 * 3600.0
    assert summary["time_unit"] == "h"
    assert set(summary["goodput"]) == {"fleet", "small", "big"} and 0 < summary["goodput"]["fleet"][0] < 1
    assert summary["failures"]["fleet"][0] == summary["failures"]["small"][0] + summary["failures"]["big"][0]
    assert summary["failures"]["fleet"][0] > 0  # MTBFs of 10-20 h over 240 h


def test_trace_figure_names_its_time_unit():
    import numpy as np

    from ckpt_jax.plotting import plot_trace

    fire = np.array([[1.0, 11.0], [2.0, np.nan]])
    end = np.array([[1.5, 11.5], [2.5, np.nan]])
    figure = plot_trace(fire, end, until=20.0, time_unit="min", failures=[1, 0], down_time=[1234.5, 0.0])
    gantt, count = figure.axes[:2]
    assert count.get_xlabel() == "time [min]"
    notes = [text.get_text() for text in gantt.texts]
    assert "1 fail., down 1,234 min" in notes or "1 fail., down 1,235 min" in notes
    assert plot_trace(fire, end).axes[1].get_xlabel() == "time"
