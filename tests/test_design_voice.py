"""``ckpt-jax design`` speaks with one voice: one recommendation, decided once from the
estimates (`ckpt_jax.cli.design.recommend`), printed by every part of the report, stdout and
design.json; the designed staggers in the summary lines. Constructed results: no run."""

import pytest

from ckpt_jax.cli.design import BASELINES, _report, headline, recommend, staggers_line
from ckpt_jax.fleetfile import loads

PLAIN = """
throughput = "shared"
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
restart = 0.5
"""


def estimate(mean, half=0.004):
    return {"mean": mean, "low": mean - half, "high": mean + half}


def summary_of(saved: dict, per_group: dict, *, fallback=None, candidates=None, staggers=False) -> dict:
    """A design.json of the plain two-group file: ``saved`` the fleet waste the design saves
    against each comparison, ``per_group`` its saving per group."""
    design = [estimate(0.10), estimate(0.20)]
    compared = {**{name: {} for name in BASELINES}, **(candidates or {})}
    summary = {
        "fleet": {"restart_stagger": 0.0, "outages": [{"domain": "rack", "mtbf": 100.0}]},
        "settings": {
            "quick": False,
            "draws": 4,
            "pairs": 2,
            "seed": 0,
            "horizon": 40.0,
            "launch": "random",
            "offsets": False,
            "staggers": staggers,
        },
        "steps_taken": 5,
        "stopped_early": True,
        "converged": True,
        "method": "search",
        "search_rtol": 0.1,
        "start": "daly",
        "fallback": fallback,
        "offsets": None,
        "restart_stagger": None,
        "launch_stagger": None,
        "waste": estimate(0.15),
        "baselines": {
            name: {"waste": estimate(0.15 + saved[name]["mean"]), "saved": saved[name]} for name in BASELINES
        },
        "candidates": {
            name: {"waste": estimate(0.15 + saved[name]["mean"]), "saved": saved[name]} for name in candidates or {}
        },
        "groups": [
            {"name": "small", "design": 2.0, **{name: 3.0 for name in compared}},
            {"name": "big", "design": 1.5, **{name: 2.5 for name in compared}},
        ],
        "per_group_saved": {name: per_group[name] for name in compared},
        "per_group": {
            "design": design,
            **{name: [estimate(d["mean"] + s["mean"]) for d, s in zip(design, per_group[name])] for name in compared},
        },
        "rerun": "ckpt-jax design tiny.toml --draws 8 --out run",
    }
    summary["recommended"] = recommend(summary)
    for group in summary["groups"]:
        use = summary["recommended"]["use"]
        group["recommended"] = group["design" if use == "design" else use]
    return summary


TIE = {"young": estimate(0.02), "daly": estimate(0.001), "young_contended": estimate(0.03)}
# Against Daly the fleet is within the noise, while "small" gains outside it and "big" pays.
SPLIT = {name: [estimate(0.03), estimate(-0.01)] for name in BASELINES}
SPLIT["daly"] = [estimate(0.0109, 0.0026), estimate(-0.009, 0.002)]


def test_recommend_decides_once_from_the_estimates():
    # The design beats every comparison outside the noise.
    clear = {name: estimate(0.02) for name in BASELINES}
    decided = recommend(summary_of(clear, SPLIT))
    assert decided["use"] == "design" and "beat every comparison outside the noise" in decided["reason"]
    # A tie with Daly: still the design's, and the reason names Daly as good.
    decided = recommend(summary_of(TIE, SPLIT))
    assert decided["use"] == "design" and "Daly is as good within it" in decided["reason"]
    assert decided["text"] == f"use the design's intervals: {decided['reason']}"
    # A fallback is the recommendation.
    decided = recommend(summary_of(TIE, SPLIT, fallback="daly"))
    assert decided["use"] == "daly" and decided["text"].startswith("use Daly: its intervals beat the search's")
    # The current intervals within the noise of the design: keep them.
    current = {"current": {}}
    tie_current = summary_of(
        {**TIE, "current": estimate(0.001)}, {**SPLIT, "current": SPLIT["daly"]}, candidates=current
    )
    decided = recommend(tie_current)
    assert decided["use"] == "current" and decided["text"].startswith("keep the current intervals: the design saves")
    assert "within the noise" in decided["reason"]
    # ... but outside it, the design's, for what it saves against them.
    beats_current = summary_of(
        {**TIE, "current": estimate(0.05)}, {**SPLIT, "current": SPLIT["young"]}, candidates=current
    )
    decided = recommend(beats_current)
    assert decided["use"] == "design" and "against the current intervals, outside the noise" in decided["reason"]
    # A set that does better but that the design may not take is named, not hidden.
    better = {**TIE, "young_contended": estimate(-0.02)}
    decided = recommend(summary_of(better, SPLIT))
    assert decided["use"] == "design" and decided["reason"].startswith("contended Young does better outside the noise")


def test_report_and_stdout_say_one_recommendation():
    # The case of the issue: the first line said "use the design's; Daly is as good", the
    # last "Plainly: Daly is at least as good ... the design buys nothing", with a group
    # gaining outside the noise against Daly.
    spec = loads(PLAIN, "tiny.toml")
    summary = summary_of(TIE, SPLIT)
    text = summary["recommended"]["text"]
    report = _report(spec, summary["settings"], summary, 1.0)
    assert "Plainly" not in report and "buys nothing" not in report and "either serves" not in report
    first = report.splitlines()[2]
    assert first.startswith("- Converged") and first.endswith(f"; {text}.")
    assert f"**Recommendation: {text}.**" in report
    # The per-group split is said as such, not as "nothing".
    assert "Per group, outside the noise: big pays against Young; big pays against Daly; big pays against" in report
    assert headline(summary, spec.names)[0].endswith(f"; {text}.")
    # A fallback: every place says the fallback.
    summary = summary_of(TIE, SPLIT, fallback="daly")
    report = _report(spec, summary["settings"], summary, 1.0)
    assert report.count("use Daly: its intervals beat the search's") == 2
    assert "use the design's" not in report


def test_staggers_are_in_the_summary_lines():
    spec = loads(PLAIN, "tiny.toml")
    summary = summary_of({name: estimate(0.02) for name in BASELINES}, SPLIT, staggers=True)
    summary["restart_stagger"] = 2.5
    line = staggers_line(summary)
    assert line == "Staggers, designed with the intervals: restart_stagger 2.5 (the file's 0)."
    assert headline(summary, spec.names)[1] == line
    assert f"- {line}" in _report(spec, summary["settings"], summary, 1.0)
    # Not recommended (a fallback): the file's are kept, and the line says why.
    summary = summary_of(TIE, SPLIT, fallback="daly", staggers=True)
    assert staggers_line(summary) == (
        "Staggers: keep the file's (restart_stagger 0): the design fell back to a baseline, which keeps them."
    )
    assert staggers_line(summary_of(TIE, SPLIT)) is None  # without --staggers


@pytest.mark.parametrize("use", ["design", "current"])
def test_units_summary_lines_give_the_recommended_intervals(use):
    from ckpt_jax.cli.design import savings_lines

    saved = {**TIE, "current": estimate(0.05 if use == "design" else 0.001)}
    summary = summary_of(saved, {**SPLIT, "current": SPLIT["young"]}, candidates={"current": {}})
    assert summary["recommended"]["use"] == use
    summary.update(
        time_unit="h",
        seconds_per_time_unit=3600.0,
        intervals_in_time_unit=[
            {"name": g["name"], "design": g["design"] / 3600, "current": g["current"] / 3600} for g in summary["groups"]
        ],
        goodput={name: {"fleet": estimate(0.9)} for name in ("current", "design")},
        gpu_hours_saved_per_day={
            name: {"fleet": estimate(10.0, 5.0 if use == "design" else 20.0), "groups": [estimate(5.0)] * 2}
            for name in ("current", *BASELINES)
        },
        gains_and_pays={name: {"gain": ["small", "big"], "pay": [], "tie": []} for name in ("current", *BASELINES)},
    )
    summary["recommended"] = recommend(summary)
    assert summary["recommended"]["use"] == use
    first = savings_lines(summary)[0]
    interval = summary["groups"][0]["recommended"] / 3600
    assert first == f"small: checkpoint every {interval:.2g} h (now every {3.0 / 3600:.2g} h)"
    assert "GPU-hours per day" in summary["recommended"]["reason"]


# -- the design's progress bar ------------------------------------------------------------------
class _Bar:
    """A progress bar that records its total at every refresh."""

    def __init__(self, total):
        self.total, self.n, self.totals = total, 0, []

    def update(self, n):
        self.n += n
        assert self.n <= self.total, (self.n, self.total)

    def refresh(self):
        self.totals.append(self.total)

    def set_postfix(self, **_):
        pass


def test_the_search_bar_counts_the_steps_it_may_still_take():
    import math

    import numpy as np

    from ckpt_jax import design

    minimum = np.array([0.7, -1.2])

    def evaluate(points):  # a bowl, with a per-draw offset that pairing cancels
        return ((points - minimum) ** 2).sum(axis=1)[:, None] + np.array([0.0, 0.3, -0.1, 0.05])

    mesh_min = math.log1p(0.1)
    bounds = (np.full(2, -10.0), np.full(2, 10.0), np.ones(2))
    bar = _Bar(100)  # the step budget, as the bar was made
    _, converged, rows = design._compass_search(
        evaluate, np.zeros(2), *bounds, mesh_min=mesh_min, max_steps=100, bar=bar
    )
    assert converged and len(rows) < 10
    # From ×2 to the finest move of 10%: 3 halvings and the step that accepts nothing.
    assert design._fewest_steps(math.log(2.0), mesh_min) == 4 and bar.totals[0] == 4
    assert max(bar.totals) < 100 and bar.totals[-1] == bar.n == len(rows)  # full when it converged
    # A budget it runs out of: the total is the budget, reached.
    bar = _Bar(3)
    design._compass_search(evaluate, np.zeros(2), *bounds, mesh_min=mesh_min, max_steps=3, bar=bar)
    assert bar.n == 3 and bar.totals[-1] == 3 and max(bar.totals) == 3


# -- the largest power step: its mean over the draws and its maximum -----------------------------
def test_power_and_storage_gives_the_largest_step_mean_and_max():
    import numpy as np

    from ckpt_jax import design
    from ckpt_jax._estimate import mean_ci

    steps = np.array([[2.0, 2.0, 9.0, 3.0, 2.0, 2.0, 3.0, 2.0], np.ones(8)])  # a rack outage in draw 2
    evaluation = design.Evaluation(
        names=("design", "young"),
        intervals=np.ones((2, 1)),
        job_waste=np.zeros((2, 8, 1)),
        fleet_waste=np.zeros((2, 8)),
        writes=np.ones((2, 8, 1)),
        writers=np.zeros((2, 8, 2)),
        power_steps=np.zeros((2, 8)),
        power_threshold=0.1,
        horizon=10.0,
        power_largest_step=steps,
    )
    sets = design.power_and_storage(evaluation, np.array([1.0]))
    assert sets["design"]["largest_step"] == mean_ci(steps[0]) and sets["design"]["largest_step_max"] == 9.0
    assert sets["design"]["largest_step"].high < 9.0  # the worst draw lies above the mean's CI
    # The design falling back to Young takes Young's steps too.
    assert np.array_equal(design._with_design(evaluation, "young").power_largest_step[0], steps[1])


def test_design_report_and_stdout_name_the_largest_step_mean_and_max():
    from ckpt_jax.cli.design import _power_storage_lines, power_step_line

    spec = loads(PLAIN, "tiny.toml")
    summary = summary_of({name: estimate(0.02) for name in BASELINES}, SPLIT)
    row = {
        "power_steps": estimate(3.0, 1.0),
        "volume": estimate(50.0, 5.0),
        "largest_step": {"mean": 2.5, "low": 1.0, "high": 4.0},
        "largest_step_max": 9.0,
    }
    summary["power_and_storage"] = {
        "per": "horizon",
        "threshold": 0.3,
        "threshold_watts": None,
        "step_unit": "size",
        "sets": {name: row for name in ("design", *BASELINES)},
    }
    line = power_step_line(summary)
    assert line == (
        "Largest power step at one instant with the design: 2.5 [1, 4] on average (the mean over 16 draws "
        "of each draw's largest), 9 at most (the largest in any draw), in units of size."
    )
    table = "\n".join(_power_storage_lines(spec, summary))
    assert "| largest step: mean (size) | largest step: max (size) |" in table and "| 2.5 [1, 4] | 9 |" in table
    assert "the mean over the draws of each draw's largest (95% CI) and the largest in any draw (max)" in table


# -- a group without restart: the documented default, stated ------------------------------------
def test_a_group_without_restart_runs_with_none_and_every_output_says_so(tmp_path, capsys):
    from ckpt_jax.cli import main
    from ckpt_jax.cli.design import note_lines

    spec = loads(PLAIN.replace('restart = 0.5\n[[groups]]\nname = "big"', '[[groups]]\nname = "big"'), "tiny.toml")
    assert spec.groups[0].restart == 0.0 and spec.groups[1].restart == 0.5
    assert spec.restart_defaults() == ("small",)
    assert loads(PLAIN, "tiny.toml").restart_defaults() == () and note_lines(loads(PLAIN, "tiny.toml")) == []
    (note,) = [line for line in note_lines(spec) if line]
    assert note.startswith("**Note:** group 'small' gives no restart: taken as 0, the default")
    # The report says it (here design's; assess and compare print the same lines).
    summary = summary_of(TIE, SPLIT)
    assert note in _report(spec, summary["settings"], summary, 1.0)
    # ... and stdout, first, for any command reading the file (here before an --out error).
    path = tmp_path / "f.toml"
    path.write_text(PLAIN.replace("restart = 0.5\n", ""))
    (tmp_path / "file").write_text("")
    assert main(["assess", str(path), "--out", str(tmp_path / "file")]) == 2
    printed = capsys.readouterr().out
    assert printed.startswith("ckpt-jax assess: note: groups 'small', 'big' give no restart: taken as 0")
