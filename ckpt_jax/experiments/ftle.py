"""Claim 5, second part: nearby trajectories separate exponentially, faster for larger
fleets and higher load — and where that stops.

For fleets of N identical jobs under storage contention (f ≡ 1, uncapped), with the
solo cycle T + d = 1 and load ρ = N d / (T + d) (so d = ρ / N), the experiment draws
random launches seen at a firing of job 0 (`ckpt_jax.lyapunov.random_gaps`) and measures
the finite-time separation rate of the gap map with `ckpt_jax.lyapunov.ftle_horizons`
(method ``"jacobian"``: (1/K) log σ_max(J_K ⋯ J_1), every J from `jax.jacfwd` through the
event loop), in one run per launch:

* a **burn-in** of ``burn_in`` cycles from the launch, while the launch's uniform phases
  relax; its rate is what a run from the launch over that many cycles measures (the
  ``from launch`` rate, kept to show how much short runs from the launch overstate);
* then, with the tangent frame restarted, the rates over several **horizons** K after the
  burn-in. The rate at the main horizon is "the FTLE" of the verdicts;
* each rate **per cycle** of job 0 (the verdicts' unit) and **per unit time** (the same log
  growth over the time those cycles took: beyond saturation a cycle lasts longer, ≈ N·d).

`ckpt_jax.lyapunov.ftle_twin` (Benettin twin trajectories from the point the burn-in
reached, along the same direction, on the first ``twin_launches`` launches of each cell)
must agree with the autodiff tangent rate: a check of the autodiff by the map alone.
The gap map exists only while the firing order is kept; identical jobs keep it (claim 3),
so every launch should run clean; failures are counted, not hidden.

docs/model.md's measured finding: the FTLE grows with N and load up to about storage
saturation (ρ ≈ 1), then falls; high-load rates keep decaying with the horizon. The claim
is decided per regime, as two sub-claims (thresholds named in the report):

* **ρ ≤ 1** (storage not saturated): every cell's mean FTLE has a `rules.CONFIDENCE`
  bootstrap interval above 0 (exponential separation); the Spearman correlation between N
  and the cell means is ≥ `MIN_SPEARMAN` at every ρ ≤ 1, and between ρ and the means at
  every N (growth needs ≥ `MIN_GRID_POINTS` grid values to be judged, else inconclusive);
  the twin check holds: |tangent_rate − twin rate| ≤ `TWIN_TOLERANCE` for ≥ `TWIN_AGREEMENT`
  of the checked launches (a twin may straddle a kink of the piecewise-smooth map).
* **ρ > 1** (saturated): "grows with load" is tested per N by the interval of the
  difference mean FTLE(largest ρ) − mean FTLE(ρ = 1): above 0 reproduced, below 0 not
  reproduced (it falls), straddling inconclusive.

Reported beside the verdicts, each by a rule in code: the load at which the FTLE peaks for
each N (`peak_location`, with the bootstrap spread of the peak over the load grid,
`peak_spread`), and how each high-load rate changes from the main horizon to the longest
(`horizon_trend`: falling, settled within ±`HORIZON_MARGIN`, rising, or undecided).
"""

from __future__ import annotations

import functools
import time
from typing import NamedTuple

import jax
import numpy as np

from .. import Fleet
from ..lyapunov import ftle_horizons, ftle_twin, random_gaps
from . import rules
from .framework import (
    INCONCLUSIVE,
    NOT_REPRODUCED,
    REPRODUCED,
    Experiment,
    begin,
    finish,
    fmt,
    fmt_interval,
    fmt_list,
    identical_fleets,
    in_float64,
    save_figure,
    verdict,
)
from .ftle_figures import growth_figure, panel_titles, regime_figure

NAME = "ftle"
CLAIMS = (5,)

# ρ = N d / (T + d); the grid is finer around saturation (ρ = 1) to locate the peak.
LOADS = (0.125, 0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 2.0)
TWIN_EPS = 1e-8  # twin separation, in units of the cycle work T + d

# Verdict thresholds (named in the report).
SATURATION_LOAD = 1.0  # ρ ≤ this: storage not saturated (N·d ≤ T + d); above: saturated
MIN_GRID_POINTS = 3  # growth along N or ρ is judged only over at least this many grid values
MIN_SPEARMAN = 0.8  # rank correlation that counts as "grows with" (0.8 = one adjacent swap of 4 or 5)
TWIN_TOLERANCE = 1e-4  # per-cycle rate difference between autodiff tangent and twin
TWIN_AGREEMENT = 0.95  # fraction of launches that must meet TWIN_TOLERANCE
# Reported, not deciding: a rate that changes by less than this fraction from the main horizon
# to the longest one has settled.
HORIZON_MARGIN = 0.1
# Reported, not deciding: the launch's transient inflates the rate if the from-launch rate lies
# above the after-burn-in one (interval above 0) in more than this fraction of the cells.
LAUNCH_INFLATED_FRACTION = 0.2

SIZES = {
    "smoke": dict(
        n_jobs=(3, 4),
        loads=(0.25, 0.5, 1.0, 2.0),
        launches=4,
        burn_in=10,
        horizons=(5, 10, 20),
        main_horizon=10,
        twin_launches=4,
        bootstrap=100,
    ),
    "quick": dict(
        n_jobs=(4, 8, 16, 32),
        loads=LOADS,
        launches=12,
        burn_in=50,
        horizons=(25, 50, 100, 200),
        main_horizon=100,
        twin_launches=4,
        bootstrap=1000,
    ),
    "full": dict(
        n_jobs=(4, 8, 16, 32, 64),
        loads=LOADS + (3.0,),
        launches=128,
        burn_in=200,
        horizons=(50, 100, 200, 400, 800),
        main_horizon=400,
        twin_launches=32,
        bootstrap=2000,
    ),
}


def _identical_fleets(n_jobs: int, loads, launches: int) -> Fleet:
    """Identical fleets at each load (see `experiments.identical_fleets`)."""
    return identical_fleets(n_jobs, loads, launches, flat=True)


@functools.cache
def _compiled(horizons: tuple, burn_in: int, twin_cycles: int):
    """Batched (over fleets and points) jitted rate functions; one compile per N."""
    launch = jax.jit(jax.vmap(random_gaps))
    rates = jax.jit(jax.vmap(functools.partial(ftle_horizons, horizons=horizons, burn_in=burn_in, method="jacobian")))
    twin = jax.jit(jax.vmap(functools.partial(ftle_twin, n_cycles=twin_cycles, eps=TWIN_EPS)))
    return launch, rates, twin


def spearman(x, y) -> float:
    """Spearman rank correlation of two 1-D samples (ties get their average rank)."""
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)

    def ranks(v):
        order = np.argsort(v, kind="stable")
        r = np.empty(v.size)
        r[order] = np.arange(v.size, dtype=np.float64)
        for value in np.unique(v):
            tied = v == value
            r[tied] = r[tied].mean()
        return r

    rx, ry = ranks(x), ranks(y)
    if rx.std() == 0 or ry.std() == 0:
        return float("nan")
    return float(np.corrcoef(rx, ry)[0, 1])


def peak_location(loads, means) -> dict:
    """Where a curve over the load grid peaks.

    Args:
      loads: (L,) increasing grid loads.
      means: (L,) values (NaN values are skipped).

    Returns:
      ``grid``: the grid load of the largest value; ``refined``: the vertex of the parabola
      in log ρ through it and its two neighbours (the grid load itself at an edge of the grid
      or where the parabola does not open downwards; clipped to the neighbours); ``at_edge``:
      whether the largest value is at the first or last grid load (the peak may lie beyond).

    >>> peak_location([0.5, 1.0, 2.0], [1.0, 3.0, 1.0])["refined"]
    1.0
    """
    loads, means = np.asarray(loads, np.float64), np.asarray(means, np.float64)
    if not np.isfinite(means).any():
        return dict(grid=float("nan"), refined=float("nan"), at_edge=False)
    index = int(np.nanargmax(means))
    at_edge = index in (0, loads.size - 1)
    refined = loads[index]
    if not at_edge and np.isfinite(means[index - 1 : index + 2]).all():
        x = np.log(loads[index - 1 : index + 2])
        y = means[index - 1 : index + 2]
        curvature, slope, _ = np.polyfit(x, y, 2)
        if curvature < 0:
            refined = float(np.exp(np.clip(-slope / (2 * curvature), x[0], x[2])))
    return dict(grid=float(loads[index]), refined=float(refined), at_edge=bool(at_edge))


def peak_spread(loads, boot_means) -> dict:
    """Bootstrap spread of the peak's grid load.

    Args:
      loads: (L,) grid loads.
      boot_means: (B, L) bootstrap means of each grid cell (resampled independently per cell).

    Returns:
      ``fraction``: per grid load, the fraction of resamples that peak there; ``range``: the
      `rules.CONFIDENCE` range of the peak's grid load over the resamples.
    """
    loads = np.asarray(loads, np.float64)
    boot_means = np.asarray(boot_means, np.float64)
    valid = np.isfinite(boot_means).any(axis=1)
    if not valid.any():
        return dict(fraction=[float("nan")] * loads.size, range=[float("nan"), float("nan")])
    peaks = np.nanargmax(boot_means[valid], axis=1)
    fraction = np.bincount(peaks, minlength=loads.size) / peaks.size
    alpha = (1 - rules.CONFIDENCE) / 2
    low, high = np.quantile(peaks, [alpha, 1 - alpha], method="inverted_cdf")
    return dict(fraction=[float(f) for f in fraction], range=[float(loads[int(low)]), float(loads[int(high)])])


def horizon_trend(low: float, high: float, reference: float) -> str:
    """How a rate changes with the horizon, from the interval [low, high] of its change.

    ``"falling"`` if the interval lies wholly below −`HORIZON_MARGIN`·reference, ``"rising"``
    if wholly above +`HORIZON_MARGIN`·reference, ``"settled"`` if wholly inside that margin,
    ``"undecided"`` otherwise (or if undefined).

    >>> horizon_trend(-0.05, -0.03, 0.2), horizon_trend(-0.01, 0.01, 0.2), horizon_trend(-0.03, 0.0, 0.2)
    ('falling', 'settled', 'undecided')
    """
    margin = HORIZON_MARGIN * abs(float(reference))
    outcome = rules.interval_verdict(low, high, -margin, margin)
    if outcome == REPRODUCED:
        return "settled"
    if outcome == NOT_REPRODUCED:
        return "falling" if high < -margin else "rising"
    return "undecided"


def _interval(boot: np.ndarray):
    alpha = (1 - rules.CONFIDENCE) / 2
    low, high = np.quantile(boot, [alpha, 1 - alpha])
    return float(low), float(high)


def _mean_and_interval(values: np.ndarray, resamples: np.ndarray):
    """Mean of per-launch values and its bootstrap interval over the given launch resamples."""
    if values.size == 0:
        return float("nan"), [float("nan"), float("nan")], np.full(1, np.nan)
    boot = values[resamples].mean(axis=1)
    return float(values.mean()), list(_interval(boot)), boot


def _measure(n_jobs, config):
    """One batched run per N: rates (horizon, load, launch), from-launch rates, twins."""
    loads, launches = config["loads"], config["launches"]
    horizons, burn_in, main = config["horizons"], config["burn_in"], config["main_horizon"]
    launch, rates, twin = _compiled(horizons, burn_in, main)
    fleets = _identical_fleets(n_jobs, loads, launches)
    keys = jax.random.split(jax.random.key(5000 + n_jobs), fleets.batch_shape[0])
    result = rates(fleets, launch(fleets, keys))
    # The twin check runs from the point the burn-in reached, on the first launches of each cell.
    checked = np.zeros((len(loads), launches), bool)
    checked[:, : config["twin_launches"]] = True
    subset = checked.reshape(-1)
    check = twin(jax.tree_util.tree_map(lambda x: x[subset], fleets), result.start[subset])
    shape = (len(loads), launches)

    def cells(x):
        return (
            np.moveaxis(np.asarray(x).reshape(shape + np.shape(x)[1:]), -1, 0)
            if np.ndim(x) > 1
            else np.asarray(x).reshape(shape)
        )

    twin_rate = np.full(shape, np.nan)
    twin_status = np.full(shape, -1)
    twin_rate[checked], twin_status[checked] = np.asarray(check.rate), np.asarray(check.status)
    lengths = np.asarray(horizons, np.float64)[:, None, None]
    rate, time_ = cells(result.rate), cells(result.time)
    return dict(
        rate=rate,
        per_time=rate * lengths / time_,
        tangent=cells(result.tangent_rate),
        launch_rate=cells(result.launch_rate),
        launch_per_time=cells(result.launch_rate) * burn_in / cells(result.launch_time),
        status=cells(result.status),
        twin_rate=twin_rate,
        twin_status=twin_status,
        main=horizons.index(main),
    )


def _cell(n_jobs, load, index, measured, config, rng):
    """The numbers of one (N, ρ) cell, with paired bootstraps over its clean launches."""
    horizons, main = config["horizons"], measured["main"]
    status = measured["status"][index]
    clean = status == 0
    count = int(clean.sum())
    resamples = rng.integers(0, max(count, 1), (config["bootstrap"], max(count, 1)))

    def stat(values):
        return _mean_and_interval(values[clean], resamples)

    mean, ci, boot = stat(measured["rate"][main, index])
    per_time, ci_per_time, boot_per_time = stat(measured["per_time"][main, index])
    launch_mean, launch_ci, _ = stat(measured["launch_rate"][index])
    # The launch's transient: the burn-in's rate from the launch against the rate over as many
    # cycles after it (equal horizons, since the rate itself depends on the horizon).
    same = horizons.index(config["burn_in"])
    excess, excess_ci, _ = stat(measured["launch_rate"][index] - measured["rate"][same, index])
    longest = measured["rate"][-1, index] - measured["rate"][main, index]
    change, change_ci, _ = stat(longest)
    both = clean & (measured["twin_status"][index] == 0)
    difference = np.abs(measured["tangent"][main, index][both] - measured["twin_rate"][index][both])
    values = measured["rate"][main, index][clean]
    row = dict(
        n_jobs=n_jobs,
        load=load,
        launches=int(status.size),
        clean=count,
        failed_status=sorted({int(s) for s in status[~clean]}),
        mean=mean,
        ci=ci,
        median=float(np.median(values)) if count else np.nan,
        std=float(values.std()) if count else np.nan,
        mean_per_time=per_time,
        ci_per_time=ci_per_time,
        tangent_mean=float(np.mean(measured["tangent"][main, index][clean])) if count else np.nan,
        from_launch_mean=launch_mean,
        from_launch_ci=launch_ci,
        from_launch_mean_per_time=float(np.mean(measured["launch_per_time"][index][clean])) if count else np.nan,
        from_launch_excess=excess,
        from_launch_excess_ci=excess_ci,
        horizons=[
            dict(
                horizon=k,
                mean=stat(measured["rate"][h, index])[0],
                ci=stat(measured["rate"][h, index])[1],
                mean_per_time=stat(measured["per_time"][h, index])[0],
                tangent_mean=stat(measured["tangent"][h, index])[0],
            )
            for h, k in enumerate(horizons)
        ],
        horizon_change=dict(
            from_horizon=horizons[main],
            to_horizon=horizons[-1],
            change=change,
            ci=change_ci,
            relative=change / mean if mean else np.nan,
            relative_ci=tuple(bound / mean if mean else np.nan for bound in change_ci),
            trend=horizon_trend(*change_ci, reference=mean),
        ),
        twin_mean=float(np.mean(measured["twin_rate"][index][both])) if both.any() else np.nan,
        twin_checked=int(both.sum()),
        twin_agreeing=int(np.sum(difference <= TWIN_TOLERANCE)),
        twin_max_difference=float(difference.max()) if difference.size else np.nan,
    )
    return row, boot, boot_per_time


def regime_texts(table, peaks, steps, config, low_loads, high_loads, knee) -> dict:
    """The report's sentences on where the FTLE peaks, what happens beyond and with the horizon.

    Args:
      table: ``{(N, ρ): cell}`` as `run` builds it (``mean``, ``mean_per_time``, ``horizons``,
        ``horizon_change``, ``from_launch_excess`` and its ``_ci``).
      peaks: ``{N: {"per_cycle": ..., "per_time": ...}}``, each `peak_location` and `peak_spread`.
      steps: ``{str(N): {"change", "ci", "outcome"}}``, FTLE(top ρ) − FTLE(``knee``); empty if
        no load lies above saturation.
      config: the size's entry of `SIZES`.
      low_loads, high_loads: the grid loads at or below and above `SATURATION_LOAD`.
      knee: the largest load at or below saturation.

    Returns:
      ``{"regime", "beyond", "per_time", "horizon", "horizon_headline"}`` sentences ("" where
      the size measured nothing above saturation).
    """
    n_jobs_list = config["n_jobs"]
    refined = [peaks[n]["per_cycle"]["refined"] for n in n_jobs_list]
    regime = (
        f"Where the FTLE per cycle peaks: {_peak_text(peaks, 'per_cycle', n_jobs_list)}. The growth with load "
        f"therefore holds up to "
        f"ρ ≈ {fmt(min(refined), 2)}–{fmt(max(refined), 2)}, around storage saturation (ρ = "
        f"{fmt(SATURATION_LOAD)})."
    )
    out = dict(regime=regime, beyond="", per_time="", horizon="", horizon_headline="")
    if not steps:
        return out
    out["beyond"] = _beyond_text(steps)
    out["per_time"] = _per_time_text(table, peaks, n_jobs_list, max(config["loads"]), knee)
    out["horizon"], out["horizon_headline"] = _horizon_texts(table, config, low_loads, high_loads)
    return out


def _peak_text(peaks: dict, kind: str, n_jobs_list) -> str:
    """Where the FTLE (``kind``: per cycle or per time) peaks at each N, with its range."""
    return "; ".join(
        f"ρ = {fmt(p['grid'])} (≈ {fmt(p['refined'], 2)}{', at the grid edge' if p['at_edge'] else ''}; "
        f"{rules.CONFIDENCE:.0%} bootstrap range {fmt(p['range'][0])}–{fmt(p['range'][1])}) at N = {n}"
        for n, p in ((n, peaks[n][kind]) for n in n_jobs_list)
    )


def _beyond_text(steps: dict) -> str:
    """Whether the FTLE per cycle falls, still grows or is undecided beyond saturation, per N."""
    falls = [n for n, st in steps.items() if st["outcome"] == NOT_REPRODUCED]
    grows = [n for n, st in steps.items() if st["outcome"] == REPRODUCED]
    if len(falls) == len(steps):
        return (
            f"It falls at every N: beyond its peak near saturation (the mean period tends to N·d) the "
            f'FTLE per cycle falls with load, so the claim\'s "grows with load" holds only up to the '
            f"peak, not beyond ρ = {fmt(SATURATION_LOAD)}."
        )
    undecided = [n for n in steps if n not in falls and n not in grows]
    parts = [
        f"{word} at N = {fmt_list(group)}"
        for word, group in (("it falls", falls), ("it still grows", grows), ("it is undecided", undecided))
        if group
    ]
    return "Beyond saturation " + (", ".join(parts[:-1]) + " and " + parts[-1] if len(parts) > 1 else parts[0]) + "."


def _per_time_text(table: dict, peaks: dict, n_jobs_list, top: float, knee) -> str:
    """The FTLE per unit time from the knee to the top load, and where it peaks."""
    steeper = all(
        table[(n, top)]["mean_per_time"] / table[(n, knee)]["mean_per_time"]
        < table[(n, top)]["mean"] / table[(n, knee)]["mean"]
        for n in n_jobs_list
    )
    return (
        (
            "Per unit time the fall is steeper at every N, since a saturated cycle lasts longer: "
            if steeper
            else "Per unit time: "
        )
        + f"from ρ = {fmt(knee)} to {fmt(top)} the rate per unit time goes "
        + ", ".join(
            f"{fmt(table[(n, knee)]['mean_per_time'], 2)} → {fmt(table[(n, top)]['mean_per_time'], 2)} at N = {n}"
            for n in n_jobs_list
        )
        + f"; it peaks at {_peak_text(peaks, 'per_time', n_jobs_list)}."
    )


def _horizon_texts(table: dict, config: dict, low_loads, high_loads) -> tuple[str, str]:
    """``(horizon, headline)``: how the rate at the top load changes with the horizon and
    measured from the launch, and the same in one line."""
    n_jobs_list, main, burn_in, horizons = (
        config["n_jobs"],
        config["main_horizon"],
        config["burn_in"],
        config["horizons"],
    )
    top = max(config["loads"])
    changes = {n: table[(n, top)]["horizon_change"] for n in n_jobs_list}

    def count(cells):
        trends = [table[c]["horizon_change"]["trend"] for c in cells]
        return ", ".join(
            f"{trends.count(t)} {t}" for t in ("falling", "settled", "rising", "undecided") if trends.count(t)
        )

    high_cells = [(n, load) for n in n_jobs_list for load in high_loads]
    low_cells = [(n, load) for n in n_jobs_list for load in low_loads]
    horizon = (
        f"With the horizon: after the burn-in, the rate per cycle at ρ = {fmt(top)} over K = {fmt_list(horizons)} "
        "cycles is "
        + "; ".join(
            " → ".join(fmt(h["mean"], 2) for h in table[(n, top)]["horizons"]) + f" at N = {n}" for n in n_jobs_list
        )
        + f". From K = {main} to {horizons[-1]} it changes, in % of the rate at K = {main}, by "
        + ", ".join(
            # The change and its interval in one unit: % of the rate at K = main.
            f"{fmt(100 * c['relative'], 2)} % [{fmt(100 * c['relative_ci'][0], 2)} %, "
            f"{fmt(100 * c['relative_ci'][1], 2)} %] ({c['trend']}) at N = {n}"
            for n, c in changes.items()
        )
        + f". Of the {len(high_cells)} cells above saturation: {count(high_cells)}; of the {len(low_cells)} at or "
        f"below it: {count(low_cells)} (margin ±{HORIZON_MARGIN:.0%}). Measured from the launch instead, the "
        f"{burn_in}-cycle rate at ρ = {fmt(top)} differs from the {burn_in}-cycle rate after the burn-in by "
        + ", ".join(
            f"{fmt(table[(n, top)]['from_launch_excess'], 2)} "
            f"{fmt_interval(*table[(n, top)]['from_launch_excess_ci'], digits=2)} at N = {n}"
            for n in n_jobs_list
        )
        + f"; {_launch_text(table, n_jobs_list, top)}"
    )
    falling = sum(table[c]["horizon_change"]["trend"] == "falling" for c in high_cells)
    headline = (
        f"rate at ρ = {fmt(top)} from K = {horizons[0]} to {horizons[-1]}: "
        + ", ".join(
            f"{fmt(table[(n, top)]['horizons'][0]['mean'], 2)} → "
            f"{fmt(table[(n, top)]['horizons'][-1]['mean'], 2)} (N = {n})"
            for n in n_jobs_list
        )
        + f"; {falling} of {len(high_cells)} saturated cells still falling"
    )
    return horizon, headline


def _launch_text(table: dict, n_jobs_list, top: float) -> str:
    """Whether the launch's transient inflates the rate measured from the launch."""
    inflated = [c for c in table if table[c]["from_launch_excess_ci"][0] > 0]
    falling_top = [n for n in n_jobs_list if table[(n, top)]["horizon_change"]["trend"] == "falling"]
    launch_text = (
        f"the rate from the launch lies above the rate after the burn-in (interval above 0) in "
        f"{len(inflated)} of {len(table)} cells"
    )
    if len(inflated) <= LAUNCH_INFLATED_FRACTION * len(table):
        return launch_text + (
            f", at most {LAUNCH_INFLATED_FRACTION:.0%}: the launch's transient does not inflate the rate"
            + ("; a short horizon does." if falling_top else ".")
        )
    return launch_text + f", more than {LAUNCH_INFLATED_FRACTION:.0%}: the launch's transient inflates the rate."


@in_float64
def run(out_dir, size: str = "quick", progress: bool = True) -> dict:
    """Measures the FTLE on a grid of (N, ρ) from random launches; writes JSON and figures.

    Args:
      out_dir: directory for ``ftle.json``, ``ftle.png`` and ``ftle_regime.png``.
      size: "smoke", "quick" or "full" (grid, launches per cell, burn-in, horizons).
      progress: print one line per fleet size (each is one compiled, batched call).

    Returns:
      The result dict written to ``out_dir/ftle.json``.
    """
    out_dir, size, config, started = begin(out_dir, size, SIZES)
    rng = np.random.default_rng(55)
    main, burn_in, horizons = config["main_horizon"], config["burn_in"], config["horizons"]
    if burn_in not in horizons or main not in horizons:
        raise ValueError(f"the burn-in and the main horizon must be among the horizons, got {config}")
    grid = _measure_grid(config, rng, started, progress)
    low, high = _low_regime(grid, config), _high_regime(grid, config)
    table, peaks, n_jobs_list = grid.table, grid.peaks, config["n_jobs"]
    peak_load = {str(n): peaks[n]["per_cycle"]["grid"] for n in n_jobs_list}
    trends = {str(n): {fmt(load): table[(n, load)]["horizon_change"] for load in high.loads} for n in n_jobs_list}
    text = regime_texts(table, peaks, high.steps, config, low.loads, high.loads, high.knee)
    messages = panel_titles(table, peaks, config, SATURATION_LOAD, low.parts["grows_with_n"] == REPRODUCED, high.knee)
    figures = [
        save_figure(growth_figure(table, peaks, config, SATURATION_LOAD, messages), out_dir / f"{NAME}.png"),
        save_figure(regime_figure(table, config, SATURATION_LOAD, messages), out_dir / f"{NAME}_regime.png"),
    ]
    numbers = dict(
        n_jobs=list(n_jobs_list),
        loads=list(config["loads"]),
        launches=config["launches"],
        burn_in=burn_in,
        horizons=list(horizons),
        main_horizon=main,
        twin_launches=config["twin_launches"],
        twin_eps=TWIN_EPS,
        throughput="shared (f = 1)",
        cap=None,
        cycle_work="T + d = 1, d = rho / N",
        spearman_vs_n=low.rho_by_n,
        spearman_vs_load=low.rho_by_load,
        change_beyond_saturation=high.steps,
        peak_load=peak_load,
        peaks={str(n): v for n, v in peaks.items()},
        horizon_trends=trends,
        cells=grid.cells,
        seconds=time.perf_counter() - started,
    )
    verdicts = [
        _verdict_low(grid, low, config, text, peak_load, figures[:1]),
        _verdict_high(grid, high, config, text, peak_load, trends, figures[1:]),
    ]
    return finish(out_dir, EXPERIMENT, size, numbers, verdicts, figures)


class _Grid(NamedTuple):
    """The measured grid: per (N, ρ) its cell (``table``) and bootstrap means (``boots``),
    the cells in order (``cells``), and per N the peak load (``peaks``)."""

    table: dict
    cells: list
    boots: dict
    peaks: dict


class _Low(NamedTuple):
    """The regime ρ ≤ 1: its loads and cells, the Spearman correlations with N (per ρ) and
    with ρ (per N), the parts of the verdict and its outcome, and the twin check's counts."""

    loads: list
    cells: list
    rho_by_n: dict
    rho_by_load: dict
    parts: dict
    outcome: str
    checked: int
    agreeing: int
    clean: int
    total: int


class _High(NamedTuple):
    """The regime ρ > 1: its loads, the top load and the knee (the top ρ ≤ 1, None where
    either regime is empty), per N the change of the FTLE between them (``steps``), the
    Spearman correlation with N at the top load, the verdict's parts and its outcome."""

    loads: list
    top: float
    knee: float | None
    steps: dict
    rho_by_n: float
    parts: dict
    outcome: str


def _measure_grid(config: dict, rng, started: float, progress: bool) -> _Grid:
    """Every cell of the (N, ρ) grid, one compiled, batched call per N."""
    loads = config["loads"]
    table, cells, boots, peaks = {}, [], {}, {}
    for n_jobs in config["n_jobs"]:
        measured = _measure(n_jobs, config)
        if progress:
            print(f"[ftle] N = {n_jobs}: {time.perf_counter() - started:.1f} s", flush=True)
        per_time_boots = []
        for index, load in enumerate(loads):
            row, boot, boot_per_time = _cell(n_jobs, load, index, measured, config, rng)
            table[(n_jobs, load)] = row
            boots[(n_jobs, load)] = boot
            per_time_boots.append(boot_per_time)
            cells.append(row)
        by_load = np.stack([boots[(n_jobs, load)] for load in loads], axis=1)
        peaks[n_jobs] = dict(
            per_cycle=dict(
                **peak_location(loads, [table[(n_jobs, load)]["mean"] for load in loads]), **peak_spread(loads, by_load)
            ),
            per_time=dict(
                **peak_location(loads, [table[(n_jobs, load)]["mean_per_time"] for load in loads]),
                **peak_spread(loads, np.stack(per_time_boots, axis=1)),
            ),
        )
    return _Grid(table, cells, boots, peaks)


def _yes_no(flag) -> str:
    return REPRODUCED if flag else NOT_REPRODUCED


def _growth(values_by_key: dict, grid) -> tuple[dict, str]:
    """Spearman per key over the grid, and the part's verdict."""
    if len(grid) < MIN_GRID_POINTS:
        return {}, INCONCLUSIVE
    rho = {key: spearman(grid, values) for key, values in values_by_key.items()}
    return rho, _yes_no(all(v >= MIN_SPEARMAN for v in rho.values()))


def _positive(table: dict, region) -> str:
    return _yes_no(all(table[key]["ci"][0] > 0 for key in region))


def _low_regime(grid: _Grid, config: dict) -> _Low:
    """ρ ≤ 1: positive, grows with N (at each ρ), grows with ρ (at each N), twins agree."""
    table, cells, n_jobs_list = grid.table, grid.cells, config["n_jobs"]
    checked = sum(c["twin_checked"] for c in cells)
    agreeing = sum(c["twin_agreeing"] for c in cells)
    twin_ok = checked > 0 and agreeing >= TWIN_AGREEMENT * checked
    low_loads = [load for load in config["loads"] if load <= SATURATION_LOAD]
    low_cells = [(n, load) for n in n_jobs_list for load in low_loads]
    rho_by_n, by_n = _growth(
        {fmt(load): [table[(n, load)]["mean"] for n in n_jobs_list] for load in low_loads}, n_jobs_list
    )
    rho_by_load, by_load = _growth(
        {str(n): [table[(n, load)]["mean"] for load in low_loads] for n in n_jobs_list}, low_loads
    )
    parts = dict(
        positive=_positive(table, low_cells) if low_cells else INCONCLUSIVE,
        grows_with_n=by_n,
        grows_with_load=by_load,
        twin_check=_yes_no(twin_ok),
    )
    return _Low(
        loads=low_loads,
        cells=low_cells,
        rho_by_n=rho_by_n,
        rho_by_load=rho_by_load,
        parts=parts,
        outcome=rules.combine(parts.values()),
        checked=checked,
        agreeing=agreeing,
        clean=sum(c["clean"] for c in cells),
        total=sum(c["launches"] for c in cells),
    )


def _high_regime(grid: _Grid, config: dict) -> _High:
    """ρ > 1: does it still grow with load? Per N, FTLE(top ρ) − FTLE(ρ = 1 or the top ρ ≤ 1)."""
    table, boots, n_jobs_list, loads = grid.table, grid.boots, config["n_jobs"], config["loads"]
    low_loads = [load for load in loads if load <= SATURATION_LOAD]
    high_loads = [load for load in loads if load > SATURATION_LOAD]
    steps = {}
    top = max(loads)
    if not (high_loads and low_loads):
        return _High(high_loads, top, None, steps, float("nan"), {}, INCONCLUSIVE)
    knee = max(low_loads)
    for n in n_jobs_list:
        boot = boots[(n, top)] - boots[(n, knee)]
        change = table[(n, top)]["mean"] - table[(n, knee)]["mean"]
        low, high = _interval(boot)
        steps[str(n)] = dict(change=change, ci=[low, high], outcome=rules.interval_verdict(low, high, 0.0))
    rho_high_by_n = spearman(n_jobs_list, [table[(n, top)]["mean"] for n in n_jobs_list])
    # The verdict is the growth with load alone; positivity there is reported, not decided.
    parts = dict(
        grows_with_load=rules.combine(s["outcome"] for s in steps.values()),
        positive=_positive(table, [(n, top) for n in n_jobs_list]),
    )
    return _High(high_loads, top, knee, steps, rho_high_by_n, parts, parts["grows_with_load"])


def _thresholds() -> dict:
    return dict(
        SATURATION_LOAD=SATURATION_LOAD,
        MIN_SPEARMAN=MIN_SPEARMAN,
        MIN_GRID_POINTS=MIN_GRID_POINTS,
        TWIN_TOLERANCE=TWIN_TOLERANCE,
        TWIN_AGREEMENT=TWIN_AGREEMENT,
        HORIZON_MARGIN=HORIZON_MARGIN,
        LAUNCH_INFLATED_FRACTION=LAUNCH_INFLATED_FRACTION,
        CONFIDENCE=rules.CONFIDENCE,
    )


def _spearman_text(values: dict, name: str) -> str:
    return ", ".join(f"{fmt(v, 2)} at {name} = {k}" for k, v in values.items()) or "not judged"


def _least(values: dict) -> str:
    return f"≥ {fmt(min(values.values()), 2)}" if values else "not judged"


def _verdict_low(grid: _Grid, low: _Low, config: dict, text: dict, peak_load: dict, figures) -> dict:
    """5, ρ ≤ 1: nearby trajectories separate, faster for larger N and load."""
    table, peaks, n_jobs_list, loads = grid.table, grid.peaks, config["n_jobs"], config["loads"]
    parts = low.parts
    setup = (
        f"FTLE per cycle over K = {config['main_horizon']} cycles after a {config['burn_in']}-cycle burn-in, "
        f"{config['launches']} launches per cell, "
        f"N = {fmt_list(n_jobs_list)} ({low.clean} of {low.total} launches ran clean); twin check {low.agreeing} "
        f"of {low.checked} launches within {TWIN_TOLERANCE:g} (need {TWIN_AGREEMENT:.0%})."
    )
    low_range = [table[key]["mean"] for key in low.cells]
    why_low = (
        f"{setup} At ρ = {fmt_list(low.loads)} the mean FTLE is {fmt(min(low_range))} to {fmt(max(low_range))} per "
        f"cycle, {'every' if parts['positive'] == REPRODUCED else 'not every'} cell's interval above 0. "
        f"Spearman correlation with N: {_spearman_text(low.rho_by_n, 'ρ')}; with ρ: "
        f"{_spearman_text(low.rho_by_load, 'N')} (threshold {MIN_SPEARMAN:g}; judged over ≥ {MIN_GRID_POINTS} "
        f"grid values). "
        f"Parts: FTLE > 0 {parts['positive']}, grows with N {parts['grows_with_n']}, grows with ρ "
        f"{parts['grows_with_load']}, twin check {parts['twin_check']}. {text['regime']}"
    )
    rule_low = (
        f"at ρ ≤ {fmt(SATURATION_LOAD)}: every cell's mean-FTLE interval above 0; Spearman correlation of the cell "
        f"means with N ≥ {MIN_SPEARMAN:g} at every ρ and with ρ ≥ {MIN_SPEARMAN:g} at every N (over at least "
        f"{MIN_GRID_POINTS} grid values, else inconclusive); autodiff and twin rates agree within "
        f"{TWIN_TOLERANCE:g} for {TWIN_AGREEMENT:.0%} of the checked launches. Parts combine by the rule above. "
        "The peak is the grid load of the largest mean (refined by a parabola in log ρ), its range the "
        f"{rules.CONFIDENCE:.0%} range over bootstrap resamples."
    )
    table_rows = []
    for n in n_jobs_list:
        row = [str(n)]
        for load in loads:
            cell = table[(n, load)]
            row.append(f"{fmt(cell['mean'], 2)} {fmt_interval(*cell['ci'], digits=2)}")
        row.append(f"{fmt(peaks[n]['per_cycle']['grid'])} (≈ {fmt(peaks[n]['per_cycle']['refined'], 2)})")
        table_rows.append(row)
    headline_low = (
        f"FTLE {fmt(min(low_range), 2)} to {fmt(max(low_range), 2)} per cycle; Spearman with N "
        f"{_least(low.rho_by_n)}, with ρ {_least(low.rho_by_load)} (threshold {MIN_SPEARMAN:g}); peak at ρ = "
        + ", ".join(f"{fmt(v)} (N = {k})" for k, v in peak_load.items())
    )
    return verdict(
        5,
        low.outcome,
        why_low,
        sub_claim="5 FTLE, ρ ≤ 1",
        title="nearby trajectories separate, faster for larger N and load (storage not saturated)",
        headline=headline_low,
        rule=rule_low,
        thresholds=_thresholds(),
        figures=figures,
        table=dict(columns=["N"] + [f"ρ = {fmt(load)}" for load in loads] + ["peak ρ"], rows=table_rows),
        parts=parts,
        spearman_vs_n=low.rho_by_n,
        spearman_vs_load=low.rho_by_load,
        peak_load=peak_load,
        twin_agreement=low.agreeing / low.checked if low.checked else float("nan"),
        clean_launches=low.clean,
    )


def _verdict_high(grid: _Grid, high: _High, config: dict, text: dict, peak_load: dict, trends: dict, figures) -> dict:
    """5, ρ > 1: the FTLE still grows with load once the storage saturates."""
    table, steps, top, knee = grid.table, high.steps, high.top, high.knee
    horizons, main, burn_in = config["horizons"], config["main_horizon"], config["burn_in"]
    if not steps:
        return verdict(
            5,
            high.outcome,
            f"No load above ρ = {fmt(SATURATION_LOAD)} at this size: the saturated regime was not measured.",
            sub_claim="5 FTLE, ρ > 1",
            title="the FTLE still grows with load once the storage saturates",
            headline="not measured",
            rule="not measured at this size",
            thresholds=_thresholds(),
            figures=figures,
            table=None,
            parts=high.parts,
            change_beyond_saturation=steps,
            spearman_vs_n_at_top_load=high.rho_by_n,
            peak_load=peak_load,
            horizon_trends=trends,
        )
    stays_positive = high.parts["positive"] == REPRODUCED
    high_sign = "stays positive (every interval above 0)" if stays_positive else "is not positive in every cell"
    why_high = (
        f"From ρ = {fmt(knee)} to ρ = {fmt(top)} the mean FTLE per cycle changes by "
        + ", ".join(f"{fmt(st['change'], 2)} {fmt_interval(*st['ci'], digits=2)} at N = {n}" for n, st in steps.items())
        + f". {text['beyond']} At ρ = {fmt(top)} the FTLE {high_sign}"
        f" and its Spearman correlation with N is {fmt(high.rho_by_n, 2)}. {text['per_time']} {text['horizon']}"
    )
    rule_high = (
        f"at ρ > {fmt(SATURATION_LOAD)}: per N, the interval of mean FTLE(ρ = {fmt(top)}) − mean FTLE(ρ = {fmt(knee)}) "
        "above 0 means it still grows (reproduced), below 0 that it falls (not reproduced), straddling 0 "
        "inconclusive; N combine by the rule above (whether the FTLE stays positive there is reported, not decided). "
        f"Horizon trend (reported): the interval of rate(K = {horizons[-1]}) − rate(K = {main}) wholly below "
        f"−{HORIZON_MARGIN:g}× the rate is falling, wholly inside ±{HORIZON_MARGIN:g}× settled, wholly above rising, "
        "else undecided."
    )
    step_table = _step_table(table, steps, top, knee, horizons, burn_in)
    headline_high = (
        f"FTLE from ρ = {fmt(knee)} to {fmt(top)}: "
        + ", ".join(f"{fmt(st['change'], 2)} (N = {n})" for n, st in steps.items())
        + f"; {text['horizon_headline']}"
    )
    return verdict(
        5,
        high.outcome,
        why_high,
        sub_claim="5 FTLE, ρ > 1",
        title="the FTLE still grows with load once the storage saturates",
        headline=headline_high,
        rule=rule_high,
        thresholds=_thresholds(),
        figures=figures,
        table=step_table,
        parts=high.parts,
        change_beyond_saturation=steps,
        spearman_vs_n_at_top_load=high.rho_by_n,
        peak_load=peak_load,
        horizon_trends=trends,
    )


def _step_table(table: dict, steps: dict, top: float, knee, horizons, burn_in: int) -> dict:
    """The report's table of the regime ρ > 1: per N the change from the knee to the top load."""
    return dict(
        columns=[
            "N",
            f"FTLE(ρ = {fmt(top)}) − FTLE(ρ = {fmt(knee)})",
            "interval",
            "verdict",
            f"per time at ρ = {fmt(top)}",
            f"K = {fmt_list(horizons)} at ρ = {fmt(top)}",
            f"from launch, K = {burn_in}",
        ],
        rows=[
            [
                n,
                fmt(st["change"], 3),
                fmt_interval(*st["ci"], digits=3),
                st["outcome"],
                fmt(table[(int(n), top)]["mean_per_time"], 2),
                " → ".join(fmt(h["mean"], 2) for h in table[(int(n), top)]["horizons"]),
                fmt(table[(int(n), top)]["from_launch_mean"], 2),
            ]
            for n, st in steps.items()
        ],
    )


EXPERIMENT = Experiment(
    name=NAME,
    title="finite-time Lyapunov exponents against N and load",
    claims=CLAIMS,
    sizes=SIZES,
    run=run,
)
