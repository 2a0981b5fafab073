"""Designs within budgets (docs/model.md §1g; issue 49, item 2): `ckpt_jax.design.Budgets` on
`checkpoint_intervals`, the fleet file's ``[design]`` budgets and ``min_interval``, and the
command line's.

The checks of bad values run no simulation. One small design run (three jobs, one shape) is
shared by the tests of a binding volume budget and of a budget no interval keeps.
"""

from typing import Any

import jax
import numpy as np
import pytest

import ckpt_jax as cj
from ckpt_jax import design
from ckpt_jax.cli import main
from ckpt_jax.fleetfile import FleetFileError, loads

RUN: dict[str, Any] = dict(
    bounds=(2.0, 60.0),
    horizon=120.0,
    n_draws=4,
    method="search",
    steps=4,
    eval_draws=8,
    progress=False,
    groups=np.array([0, 0, 1]),
)


@pytest.fixture(scope="module")
def fleet():
    """Three jobs, two groups, sharing storage that two writers saturate; failures rare
    enough that the written volume is nearly the same in every draw."""
    return cj.Fleet(
        np.full(3, 10.0),
        np.array([1.0, 1.0, 2.0]),
        throughput=np.minimum(np.arange(4), 2.0),
        mtbf=np.full(3, 150.0),
        restart=0.5,
        dtype="float64",
    )


# -- bad values: a ValueError naming the field, before any run ------------------------------


@pytest.mark.parametrize(
    ("budgets", "match"),
    [
        (design.Budgets(written=-1.0), r"budgets\.written must be None or a finite number > 0, got -1"),
        (design.Budgets(written=0.0), r"budgets\.written must be None or a finite number > 0"),
        (design.Budgets(written="500 TB/day"), r"budgets\.written must be None or a finite number"),
        (design.Budgets(power_steps=float("nan")), r"budgets\.power_steps must be None or a finite number >= 0"),
        (design.Budgets(power_steps=True), r"budgets\.power_steps"),
        (design.Budgets(written=1.0, per=0.0), r"budgets\.per must be None or a finite number > 0"),
        (design.Budgets(written=1.0, bound="max"), r"budgets\.bound must be one of 'mean', 'upper', got 'max'"),
        (design.Budgets(min_interval=[1.0, 2.0]), r"budgets\.min_interval must be None, a number or an array"),
        (design.Budgets(min_interval=-1.0), r"budgets\.min_interval must be None, a number or an array"),
        (design.Budgets(min_interval=[3.0, 4.0, 4.0]), r"budgets\.min_interval must be the same for every job"),
        (design.Budgets(min_interval=60.0), r"budgets\.min_interval of job 0 \(60\) must be below"),
        ({"written": 1.0}, r"budgets must be None or a ckpt_jax\.design\.Budgets, got dict"),
    ],
)
def test_bad_budgets_are_refused_naming_the_field(fleet, budgets, match):
    with pytest.raises(ValueError, match=match):
        design.checkpoint_intervals(fleet, key=jax.random.key(0), budgets=budgets, **RUN)


def test_budgets_need_the_search_and_draws_for_an_upper_bound(fleet):
    with pytest.raises(ValueError, match=r"budgets need method='search', got method='adam'"):
        design.checkpoint_intervals(
            fleet, key=jax.random.key(0), budgets=design.Budgets(written=1.0), **RUN | {"method": "adam"}
        )
    with pytest.raises(ValueError, match=r"budgets\.bound='upper' needs n_draws >= 2"):
        design.checkpoint_intervals(
            fleet, key=jax.random.key(0), budgets=design.Budgets(written=1.0, bound="upper"), **RUN | {"n_draws": 1}
        )


GROUP = "[[groups]]\ncount = 2\nsize = 1\nwrite = 1.0\nmtbf = 100.0\n"


@pytest.mark.parametrize(
    ("table", "match"),
    [
        ("[design]\nmax_written = -3.0\n", r"design\.max_written: must be a finite number > 0"),
        ("[design]\nmax_power_steps = -1\n", r"design\.max_power_steps: must be a finite number >= 0"),
        ('[design]\nmax_power_steps = "many"\n', r"design\.max_power_steps: must be a finite number >= 0"),
        ('[design]\nbudget_bound = "max"\n', r"design\.budget_bound: must be one of 'mean', 'upper'"),
        ("[design]\nmax_writen = 3.0\n", r"design\.max_writen: unknown key \(did you mean 'max_written'\?"),
    ],
)
def test_fleet_file_budgets_are_checked(table, match):
    with pytest.raises(FleetFileError, match=match):
        loads('throughput = "shared"\n' + table + GROUP)


def test_fleet_file_budgets_read_with_units_and_round_trip():
    from ckpt_jax.fleetfile import dumps

    text = (
        'power_per_gpu = "700 W"\n[storage]\npeak = "1 TB/s"\n[design]\nmax_written = "500 TB/day"\n'
        'max_power_steps = 100\nbudget_bound = "upper"\n[[groups]]\ncount = 2\ngpus = 8\ncheckpoint = "1 TB"\n'
        'mtbf = "10 h"\nmin_interval = "5 min"\n'
    )
    spec = loads(text)
    assert spec.design.max_written == pytest.approx(500e12 / 86400)  # B/s
    assert spec.design.max_power_steps == 100 and spec.design.budget_bound == "upper"
    assert spec.groups[0].min_interval == 300.0
    again = loads(dumps(spec))
    assert again.design == spec.design and again.groups == spec.groups
    # A volume is not a rate: a file with units takes the budget a day.
    with pytest.raises(FleetFileError, match=r'design\.max_written: "500 TB" is a size; expected a bandwidth'):
        loads(text.replace('"500 TB/day"', '"500 TB"'))
    with pytest.raises(FleetFileError, match=r"groups\[0\]\.min_interval: must be > 0"):
        loads(text.replace('"5 min"', '"0 s"'))


def test_cli_bad_budgets_are_one_error_line(tmp_path, capsys):
    path = tmp_path / "f.toml"
    path.write_text('throughput = "shared"\n[design]\nbounds = [1.0, 50.0]\nhorizon = 40.0\n' + GROUP)
    out = str(tmp_path / "o")
    for option, value, match in (
        ("--max-written", "lots", "--max-written must be a plain number (the volume over H)"),
        ("--max-written", "-2", "--max-written must be > 0 and finite"),
        ("--max-power-steps", "-1", "--max-power-steps must be a finite number >= 0"),
    ):
        assert main(["design", str(path), option, value, "--no-progress", "--out", out]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and match in err, err
    path.write_text(path.read_text().replace("mtbf = 100.0\n", "mtbf = 100.0\nmin_interval = 60.0\n"))
    assert main(["design", str(path), "--no-progress", "--out", out]) == 2
    err = capsys.readouterr().err
    assert "groups[0].min_interval = 60 must be below the upper end of the group's design range, 40" in err, err


# -- a binding volume budget, and one no interval keeps ---------------------------------------


@pytest.fixture(scope="module")
def budgeted(fleet):
    """Young's intervals and the design with a volume budget 60 % of what they write, kept
    with the upper end of its 95 % CI on the search's four draws (a margin for their noise)."""
    young = design.contended_young(fleet, horizon=1.0, keys=jax.random.split(jax.random.key(0), 2), max_iter=0)[0]
    at_young = design.trade_off(
        fleet, young, [1.0], horizon=RUN["horizon"], keys=jax.random.split(jax.random.key(5), 8)
    )
    budgets = design.Budgets(written=0.6 * float(at_young.written.mean()), bound="upper")
    return young, budgets, design.checkpoint_intervals(fleet, key=jax.random.key(1), budgets=budgets, **RUN)


def test_a_binding_volume_budget_is_kept_on_fresh_draws(fleet, budgeted):
    young, budgets, result = budgeted
    outcome = result.budgets
    assert outcome is not None and outcome.binding == ("written",)
    assert outcome.held["written"] <= budgets.written  # on the search's common draws
    # On fresh draws, not seen by the search: the volume is kept (to its noise).
    fresh = design.trade_off(
        fleet, result.intervals, [1.0], horizon=RUN["horizon"], keys=jax.random.split(jax.random.key(99), 8)
    )
    written = cj.design.mean_ci(fresh.written[0])
    assert written.mean <= budgets.written, (written, budgets.written)
    # Longer intervals than Young's, which break the budget.
    assert np.all(result.intervals > young)
    # The shadow price: the design relaxed by 10 % is shorter, on the relaxed limit.
    relaxed = outcome.relaxed["written"]
    assert np.all(relaxed <= result.searched) and np.any(relaxed < result.searched)
    assert np.isfinite(outcome.shadow["written"].mean)


def test_the_design_is_at_least_as_good_as_the_baselines_scaled_to_the_budget(fleet, budgeted):
    _, budgets, result = budgeted
    scaled = {name: b for name, b in result.candidates.items() if name.endswith("_scaled")}
    # Every baseline breaks the budget, and is weighed scaled up onto it.
    assert set(scaled) == {f"{name}_scaled" for name in result.baselines}
    per = design.power_and_storage(result.evaluation, fleet.write)
    for name in scaled:
        base = name.removesuffix("_scaled")
        assert per[base]["volume"].mean > budgets.written
        assert per[name]["volume"].mean <= budgets.written
    # No scaled baseline beats the recommendation outside the noise on the fresh draws
    # (one that did would be recommended instead: the fallback).
    best = min(scaled, key=lambda name: scaled[name].waste.mean)
    assert result.fallback in (None, *scaled)
    assert scaled[best].saved.high >= 0, scaled[best]


def test_an_infeasible_budget_is_refused_with_the_smallest_feasible(fleet):
    with pytest.raises(design.InfeasibleBudgets, match=r"the smallest budget that would be feasible") as info:
        design.checkpoint_intervals(fleet, key=jax.random.key(1), budgets=design.Budgets(written=0.5), **RUN)
    err = info.value
    assert isinstance(err, ValueError) and err.limits == {"written": 0.5}
    # The smallest: the volume at the longest intervals the bounds allow, on the common draws
    # (every job at 60: one checkpoint each before H = 120, 1 + 1 + 2).
    assert err.smallest["written"] == pytest.approx(4.0, rel=0.3)
    assert err.smallest["written"] > 0.5


# -- the command line ------------------------------------------------------------------------

TINY = """
throughput = "shared"

[design]
bounds = [0.5, 50.0]
horizon = 40.0
max_written = 3.0

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
min_interval = 2.0
"""

FAST = ["--quick", "--steps", "2", "--draws", "2", "--pairs", "1", "--no-progress", "--devices", "1"]


def test_cli_budgets_reach_the_design_per_day_with_units(tmp_path):
    from types import SimpleNamespace

    from ckpt_jax.cli.design import _budgets, settings_for

    text = (
        'power_per_gpu = "700 W"\n[storage]\npeak = "1 TB/s"\n[design]\nmax_power_steps = 100\n'
        '[[groups]]\ncount = 2\ngpus = 8\ncheckpoint = "1 TB"\nmtbf = "10 h"\nmin_interval = "5 min"\n'
        '[[groups]]\ncount = 1\ngpus = 8\ncheckpoint = "1 TB"\nmtbf = "10 h"\n'
    )
    spec = loads(text)
    args = SimpleNamespace(
        steps=None,
        draws=None,
        pairs=None,
        horizon=None,
        seed=None,
        quick=False,
        offsets=None,
        max_written="500 TB/day",
        max_power_steps=None,
        budget_bound="upper",
    )
    settings = settings_for(args, spec)
    assert settings["budgets"]["max_written"] == pytest.approx(500e12 / 86400)
    budgets = _budgets(spec, settings)
    assert budgets.written == pytest.approx(500e12) and budgets.per == 86400.0  # a day's volume, per day
    assert budgets.power_steps == 100 and budgets.bound == "upper"
    lower = spec.job_bounds()[0]
    assert budgets.min_interval.tolist() == [300.0, 300.0, lower[2]]  # a group without a floor keeps its bound
    # No budget set: none reaches the design.
    bare = loads(text.replace("max_power_steps = 100\n", "").replace('min_interval = "5 min"\n', ""))
    assert settings_for(SimpleNamespace(**{**vars(args), "max_written": None}), bare)["budgets"] is None


@pytest.mark.slow  # two design runs of the command (the library's budgets run in the tier above)
def test_cli_design_within_a_volume_budget(tmp_path, capsys):
    import json

    path = tmp_path / "tiny.toml"
    path.write_text(TINY)
    out = tmp_path / "design"
    assert main(["design", str(path), *FAST, "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "Budget on the written volume:" in printed and "limit 3 over H" in printed
    summary = json.loads((out / "design.json").read_text())
    block = summary["budgets"]
    assert block["limits"] == {"written": 3.0} and block["per"] == "horizon" and block["min_interval"] == [None, 2.0]
    assert summary["groups"][1]["design"] >= 2.0
    assert summary["trade_off"]["factors"][0] == 0.5 and (out / "trade_off.png").stat().st_size > 0
    report = (out / "report.md").read_text()
    assert "## Budgets (docs/model.md §1g)" in report and "Floors on the intervals (min_interval): big 2." in report
    # A budget no interval within the bounds keeps: one error line with the smallest that would be.
    assert main(["design", str(path), *FAST, "--max-written", "0.01", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--max-written = 0.01 over H cannot be kept" in err, err
    assert "the smallest budget that would be feasible" in err


@pytest.mark.slow  # a design run of its own, with the power recorded at every step
def test_a_power_step_budget_and_a_floor_are_kept(fleet):
    young = design.contended_young(fleet, horizon=1.0, keys=jax.random.split(jax.random.key(0), 2), max_iter=0)[0]
    at_young = design.trade_off(
        fleet, young, [1.0], horizon=RUN["horizon"], keys=jax.random.split(jax.random.key(5), 8)
    )
    limit = 0.7 * float(at_young.power_steps.mean())
    budgets = design.Budgets(power_steps=limit, min_interval=[25.0, 25.0, 2.0], bound="upper")
    result = design.checkpoint_intervals(fleet, key=jax.random.key(2), budgets=budgets, **RUN)
    assert np.all(result.intervals[:2] >= 25.0)  # the floor of the first group
    assert result.budgets is not None and set(result.budgets.used) == {"power_steps"}
    fresh = design.trade_off(
        fleet, result.intervals, [1.0], horizon=RUN["horizon"], keys=jax.random.split(jax.random.key(98), 16)
    )
    assert fresh.power_steps.mean() <= limit, (fresh.power_steps.mean(), limit)


@pytest.mark.slow  # a design run of its own
def test_a_floor_alone_raises_the_lower_bound(fleet):
    floor = design.Budgets(min_interval=[30.0, 30.0, 2.0])
    result = design.checkpoint_intervals(fleet, key=jax.random.key(1), budgets=floor, **RUN)
    assert np.all(result.intervals[:2] >= 30.0)
    assert result.budgets is not None and result.budgets.used == {} and result.budgets.binding == ()
