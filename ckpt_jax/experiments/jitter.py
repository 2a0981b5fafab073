"""Claim 7: with per-cycle compute jitter σ a stagger of margin m lives ~ (m/σ)² cycles.

N identical, uncapped jobs (f ≡ 1) are launched evenly staggered: firings every s = (T + d)/N,
so consecutive write windows are separated by the idle margin ``m = s − d``. While no two
windows overlap every job runs at its solo rates, so the only motion of the stagger is the
jitter: each compute phase draws ``T + σ ξ`` (`simulate(..., jitter=σ)`), a driftless random
walk of every firing time. The stagger's lifetime is the number of cycles until two write
windows first overlap (`coupling.stagger_lifetime`); a diffusive walk needs ~(m/σ)² steps
to cover m, whereas a chaotic amplification would need only ~log(m/σ)/λ.

σ is varied at fixed geometry, so m/σ spans ``RATIO_RANGE`` (1.5 decades). Each point runs
its own K = ``K_FACTOR · LIFETIME_SCALE · (m/σ)² + K_MIN`` cycles, enough that most fleets
collide within the run if the claim holds; fleets still staggered at the end are
*censored* (lifetime ≥ K). The median lifetime is exact while fewer than half the fleets
are censored (censored values all lie above the uncensored ones), so only such points are
fitted, and only those whose median is at least ``FIT_MIN_MEDIAN`` cycles (the diffusive
limit; a walk of a few steps overshoots the margin by O(σ)). The fitted slope of
log(median) vs log(m/σ) gets a bootstrap confidence interval (fleets resampled within
each point).

**Verdict** (an equivalence rule around the law): reproduced when the whole
`rules.CONFIDENCE` interval of the slope lies inside 2 ± `SLOPE_MARGIN`, not reproduced when
it lies wholly outside, inconclusive when it straddles an edge or fewer than
`MIN_FIT_POINTS` points could be fitted. The margin separates the diffusive law (2) from
the alternatives it is tested against: a drift would give 1, chaotic amplification
(lifetime ~ log(m/σ)/λ) about 0.

**Why the trace** (not `SaveAt` observers): the lifetime is the *cycle index* of the window
whose start opens the first overlap. No observer records when n_w first reached 2: the
writers observer counts excursions to n_w ≥ 2 and the largest count but not their cycle,
and the gaps observer's per-cycle minimum mixes a cycle's inner gaps with its closing gap
to the next cycle (so "a gap < d" would place the overlap one cycle off) and holds NaN where
jitter interleaves cycles. Memory stays small: at size full the longest point (K ≈ 41,000
cycles, 1,000 fleets of N = 4) needs 6 · N · K · 8 B ≈ 7.9 MB per fleet, ≈ 8 GB per run.
"""

from __future__ import annotations

import math
import time
from typing import TypedDict

import jax
import numpy as np

from .. import Fleet, initial_state, simulate
from ..coupling import stagger_lifetime
from . import rules
from .framework import (
    INCONCLUSIVE,
    Experiment,
    begin,
    finish,
    fmt,
    fmt_interval,
    in_float64,
    new_figure,
    save_figure,
    verdict,
)

NAME = "jitter"
CLAIMS = (7,)

N_JOBS = 4
COMPUTE = 7.0  # T
WRITE = 1.0  # d; spacing s = (T + d)/N = 2, margin m = s − d = 1
RATIO_RANGE = (4.0, 128.0)  # m/σ at size quick: 1.5 decades (full: 4..256)

# K per point: a guess of the median lifetime (cycles per (m/σ)², from a pilot run) times a
# safety factor. If lifetimes grew faster than (m/σ)² the top points would be censored,
# which the fit detects and reports; it never enters the fit.
LIFETIME_SCALE = 0.25
K_FACTOR = 2.5
K_MIN = 20

FIT_MIN_MEDIAN = 10.0  # cycles: points with a shorter median lifetime are shown, not fitted
MAX_CENSORED = 0.5  # the median is exact only while fewer than half the fleets are censored
N_BOOTSTRAP = 1000

# Verdict thresholds on the fitted slope of log(median lifetime) vs log(m/σ) (named in the report).
CLAIMED_SLOPE = 2.0
# Equivalence margin. The (m/σ)² law is asymptotic: a walk that crosses the margin in a few
# steps overshoots it by O(σ), biasing the slope low by O(σ/m); ±0.2 (a tenth of the
# exponent) still separates the law from a drift (slope 1) or chaos (slope ≈ 0).
SLOPE_MARGIN = 0.2
MIN_FIT_POINTS = 3


class _Size(TypedDict):
    n_points: int  # m/σ values, log spaced over ratio_range
    n_fleets: int  # fleets per point
    ratio_range: tuple[float, float]


SIZES: dict[str, _Size] = {
    "smoke": _Size(n_points=3, n_fleets=24, ratio_range=(7.0, 16.0)),
    "quick": _Size(n_points=6, n_fleets=200, ratio_range=RATIO_RANGE),
    "full": _Size(n_points=13, n_fleets=1000, ratio_range=(4.0, 256.0)),
}


def slope_verdict(low: float, high: float) -> str:
    """The verdict from the interval of the fitted exponent (margin around the law's 2)."""
    return rules.interval_verdict(low, high, CLAIMED_SLOPE - SLOPE_MARGIN, CLAIMED_SLOPE + SLOPE_MARGIN)


def staggered_fleet(n_fleets: int):
    """``n_fleets`` copies of the evenly staggered fleet and its launch state.

    Job j fires first at ``c + j s`` with ``c = (T − (N − 1) s)/2 > 0``, so windows are
    spaced by s and the margin between consecutive windows is m = s − d.
    """
    spacing = (COMPUTE + WRITE) / N_JOBS
    fleet = Fleet(
        compute=np.full((n_fleets, N_JOBS), COMPUTE), write=np.full((n_fleets, N_JOBS), WRITE), dtype=np.float64
    )
    first = (COMPUTE - (N_JOBS - 1) * spacing) / 2
    remaining = np.broadcast_to(first + spacing * np.arange(N_JOBS), (n_fleets, N_JOBS))
    return fleet, initial_state(fleet, phase=0, remaining=remaining), spacing - WRITE


def cycles_for(ratio: float) -> int:
    """The run length K for one m/σ (see the module docstring)."""
    return int(math.ceil(K_FACTOR * LIFETIME_SCALE * ratio**2)) + K_MIN


def median_lifetime(lifetime, censored, n_fires: int) -> float:
    """Median lifetime, exact while < ``MAX_CENSORED`` of the fleets are censored (NaN otherwise)."""
    if np.mean(censored) >= MAX_CENSORED:
        return float("nan")
    return float(np.median(np.where(censored, n_fires, lifetime)))


def fit_slope(ratios, medians):
    """Least-squares slope and intercept of log(median) vs log(m/σ)."""
    slope, intercept = np.polyfit(np.log(ratios), np.log(medians), 1)
    return float(slope), float(intercept)


def _bootstrap(lifetimes, censored, n_fires, fitted, rng):
    """Slopes refitted on medians of fleets resampled within each fitted point."""
    slopes = np.empty(N_BOOTSTRAP)
    ratios = np.asarray([r for r, use in fitted])
    for b in range(N_BOOTSTRAP):
        medians = []
        for _, p in fitted:
            pick = rng.integers(0, lifetimes[p].size, lifetimes[p].size)
            values = np.where(censored[p][pick], n_fires[p], lifetimes[p][pick])
            medians.append(np.median(values))
        slopes[b] = fit_slope(ratios, np.maximum(medians, 0.5))[0]
    return slopes


def _figure(ratios, lifetimes, censored, n_fires, medians, fit, fitted_mask):
    fig = new_figure(figsize=(12, 4.8), layout="constrained")
    ax, ax_survival = fig.subplots(1, 2)
    q25 = np.array([np.percentile(np.where(c, k, x), 25) for x, c, k in zip(lifetimes, censored, n_fires)])
    q75 = np.array([np.percentile(np.where(c, k, x), 75) for x, c, k in zip(lifetimes, censored, n_fires)])
    shown = np.isfinite(medians)
    ax.errorbar(
        ratios[shown],
        medians[shown],
        yerr=[medians[shown] - q25[shown], q75[shown] - medians[shown]],
        fmt="none",
        ecolor="0.6",
        capsize=3,
        label="interquartile range",
    )
    ax.plot(ratios[fitted_mask], medians[fitted_mask], "o", color="tab:blue", label="median (fitted)")
    other = shown & ~fitted_mask
    if other.any():
        ax.plot(ratios[other], medians[other], "o", mfc="white", color="tab:blue", label="median (not fitted)")
    slope, intercept, low, high = fit
    grid = np.geomspace(ratios.min(), ratios.max(), 50)
    if np.isfinite(slope):
        ax.plot(
            grid,
            np.exp(intercept) * grid**slope,
            "-",
            color="tab:red",
            label=f"fit: slope {slope:.2f} [{low:.2f}, {high:.2f}]",
        )
        centre = np.exp(np.mean(np.log(ratios[fitted_mask])))
        level = np.exp(intercept) * centre**slope
        ax.plot(grid, level * (grid / centre) ** CLAIMED_SLOPE, "--", color="0.3", label="slope 2 guide")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("margin / jitter  m/σ")
    ax.set_ylabel("stagger lifetime (cycles until two windows overlap)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title(f"N = {N_JOBS} staggered jobs, f ≡ 1, uncapped")
    for ratio, life, cens, k in zip(ratios, lifetimes, censored, n_fires):
        scaled = np.sort(np.where(cens, k, life)) / ratio**2
        survival = 1.0 - np.arange(1, scaled.size + 1) / scaled.size
        ax_survival.step(scaled, survival, where="post", label=f"m/σ = {ratio:.3g}")
    ax_survival.set_xscale("log")
    ax_survival.set_xlabel("lifetime / (m/σ)²")
    ax_survival.set_ylabel("fraction of fleets still staggered")
    ax_survival.set_title("survival vs lifetime/(m/σ)²: curves collapse if the law holds")
    ax_survival.grid(True, alpha=0.3)
    ax_survival.legend(fontsize=7)
    fig.suptitle("Claim 7: jitter sets the stagger lifetime")
    return fig


@in_float64
def run(out_dir, size: str = "quick", progress: bool = True) -> dict:
    """Measures stagger lifetimes vs m/σ and fits the scaling exponent; writes JSON + PNG.

    Args:
      out_dir: directory for ``jitter.json`` and ``jitter.png``.
      size: "smoke", "quick" or "full" (points, fleets per point).
      progress: show the engine's progress bar on long runs.
    """
    out_dir, size, config, started = begin(out_dir, size, SIZES)
    ratios = np.geomspace(*config["ratio_range"], config["n_points"])
    fleet, state, margin = staggered_fleet(config["n_fleets"])
    runs = _measure_lifetimes(fleet, state, margin, ratios, progress)
    lifetimes, censored, n_fires, medians, not_ok = runs
    censored_fraction = np.asarray([c.mean() for c in censored])
    fitted_mask = np.isfinite(medians) & (medians >= FIT_MIN_MEDIAN)
    fit = _fit(ratios, runs, fitted_mask)
    slope, intercept, low, high, se = fit
    figure = save_figure(
        _figure(ratios, lifetimes, censored, np.asarray(n_fires), medians, (slope, intercept, low, high), fitted_mask),
        out_dir / f"{NAME}.png",
    )
    span = float(np.log10(ratios[fitted_mask].max() / ratios[fitted_mask].min())) if fitted_mask.any() else 0.0
    outcome = slope_verdict(low, high)
    supported = rules.smallest_supported_margin(se)
    detectable = rules.smallest_detectable_effect(se, SLOPE_MARGIN)
    power = rules.equivalence_power(se, -SLOPE_MARGIN, SLOPE_MARGIN)
    why, headline = _why(ratios, medians, fitted_mask, fit, outcome, config["n_fleets"], margin, span)
    claim7 = verdict(
        7,
        outcome,
        why,
        title="stagger lifetime scales as (m/σ)²",
        headline=headline,
        rule=_rule(),
        thresholds=dict(
            CLAIMED_SLOPE=CLAIMED_SLOPE,
            SLOPE_MARGIN=SLOPE_MARGIN,
            MIN_FIT_POINTS=MIN_FIT_POINTS,
            FIT_MIN_MEDIAN=FIT_MIN_MEDIAN,
            MAX_CENSORED=MAX_CENSORED,
            CONFIDENCE=rules.CONFIDENCE,
        ),
        figures=[figure],
        table=_table(ratios, n_fires, medians, censored_fraction, fitted_mask, margin),
        slope=slope,
        ci=[low, high],
        slope_se=se,
        supported_margin=supported,
        detectable_deviation=detectable,
        power_if_law_holds=power,
        fitted_points=int(fitted_mask.sum()),
        fit_decades=span,
        censored_fraction=censored_fraction,
    )
    numbers = dict(
        n_jobs=N_JOBS,
        compute=COMPUTE,
        write=WRITE,
        margin=margin,
        n_fleets=config["n_fleets"],
        ratios=ratios,
        sigmas=margin / ratios,
        n_fires=n_fires,
        median_lifetime=medians,
        lifetime_quartiles=[
            [float(np.percentile(np.where(c, k, x), q)) for q in (25, 75)]
            for x, c, k in zip(lifetimes, censored, n_fires)
        ],
        censored_fraction=censored_fraction,
        fitted=fitted_mask,
        slope=slope,
        intercept=intercept,
        slope_ci=[low, high],
        fleets_not_ok=not_ok,
        seconds=time.perf_counter() - started,
    )
    return finish(out_dir, EXPERIMENT, size, numbers, [claim7], [figure])


def _measure_lifetimes(fleet, state, margin: float, ratios, progress: bool):
    """``(lifetimes, censored, n_fires, medians, not_ok)``: per point m/σ the stagger
    lifetimes of the fleets that ran clean and which were censored, the cycles run, the
    median lifetime and the count of incomplete runs."""
    key = jax.random.key(7)
    lifetimes, censored, n_fires, medians, not_ok = [], [], [], [], []
    for p, ratio in enumerate(ratios):
        k = cycles_for(ratio)
        trace = simulate(
            fleet, state, n_fires=k, jitter=margin / ratio, key=jax.random.fold_in(key, p), progress=progress
        )
        ok = np.asarray(trace.ok)
        life, cens = stagger_lifetime(np.asarray(trace.fire_times)[ok], np.asarray(trace.end_times)[ok])
        lifetimes.append(life)
        censored.append(cens)
        n_fires.append(k)
        not_ok.append(int((~ok).sum()))
        medians.append(median_lifetime(life, cens, k))
    return lifetimes, censored, n_fires, np.asarray(medians), not_ok


def _fit(ratios, runs, fitted_mask):
    """``(slope, intercept, low, high, se)``: the fitted slope of log(median lifetime)
    against log(m/σ) over the fitted points, its bootstrap interval and standard error (NaN
    with too few points)."""
    lifetimes, censored, n_fires, medians, _ = runs
    if fitted_mask.sum() < MIN_FIT_POINTS:
        nan = float("nan")
        return nan, nan, nan, nan, nan
    slope, intercept = fit_slope(ratios[fitted_mask], medians[fitted_mask])
    fitted = [(ratios[p], p) for p in np.flatnonzero(fitted_mask)]
    slopes = _bootstrap(lifetimes, censored, n_fires, fitted, np.random.default_rng(7))
    low, high = (float(q) for q in np.quantile(slopes, [(1 - rules.CONFIDENCE) / 2, (1 + rules.CONFIDENCE) / 2]))
    return slope, intercept, low, high, float(np.std(slopes, ddof=1))


def _table(ratios, n_fires, medians, censored_fraction, fitted_mask, margin: float) -> dict:
    """The report's table: per point m/σ its cycles, median lifetime and censored fraction."""
    return dict(
        columns=["m/σ", "σ", "cycles run", "median lifetime", "median / (m/σ)²", "censored", "fitted"],
        rows=[
            [fmt(r), fmt(margin / r), str(k), fmt(m), fmt(m / r**2), f"{c:.0%}", "yes" if f else "no"]
            for r, k, m, c, f in zip(ratios, n_fires, medians, censored_fraction, fitted_mask)
        ],
    )


def _rule() -> str:
    """The decision rule in words."""
    band = (CLAIMED_SLOPE - SLOPE_MARGIN, CLAIMED_SLOPE + SLOPE_MARGIN)
    return (
        f"the {rules.CONFIDENCE:.0%} bootstrap interval (fleets resampled within each point) of the fitted slope of "
        f"log(median lifetime) against log(m/σ) must lie inside {fmt(band[0])}..{fmt(band[1])} (reproduced); wholly "
        f"outside: not reproduced; straddling an edge, or fewer than {MIN_FIT_POINTS} points with fewer than "
        f"{MAX_CENSORED:.0%} censored fleets and a median of at least {FIT_MIN_MEDIAN:g} cycles: inconclusive."
    )


def _why(ratios, medians, fitted_mask, fit, outcome: str, fleets: int, margin: float, span: float):
    """``(why, headline)``: the fitted law in prose with its power, and what deciding an
    inconclusive fit would take."""
    slope, _, low, high, se = fit
    if not np.isfinite(slope):
        why = (
            f"Only {int(fitted_mask.sum())} of {ratios.size} points (m/σ = {fmt(ratios.min())} to {fmt(ratios.max())}, "
            f"{fleets} fleets each) had fewer than {MAX_CENSORED:.0%} censored fleets and a median lifetime of at "
            f"least {FIT_MIN_MEDIAN:g} cycles; the fit needs {MIN_FIT_POINTS}. Inconclusive at this size: sizes quick "
            f"and full fit m/σ from {fmt(SIZES['quick']['ratio_range'][0])} up."
        )
        return why, f"only {int(fitted_mask.sum())} usable points (need {MIN_FIT_POINTS})"
    scaled = medians / ratios**2
    supported = rules.smallest_supported_margin(se)
    detectable = rules.smallest_detectable_effect(se, SLOPE_MARGIN)
    power = rules.equivalence_power(se, -SLOPE_MARGIN, SLOPE_MARGIN)
    lo_r, hi_r = ratios[fitted_mask].min(), ratios[fitted_mask].max()
    why = (
        f"The median stagger lifetime grows as (m/σ)^{fmt(slope)}, interval {fmt_interval(low, high)}, fitted on "
        f"{int(fitted_mask.sum())} points over m/σ = {fmt(lo_r)} to {fmt(hi_r)} ({span:.2f} decades; {fleets} "
        f"fleets per point, N = {N_JOBS}, margin m = {margin:g}); the law claims 2, margin ±{SLOPE_MARGIN:g}. "
        f"Median lifetime / (m/σ)² runs from {fmt(scaled[fitted_mask][0])} to {fmt(scaled[fitted_mask][-1])} "
        f"cycles over the fitted points (constant under the law). Power: the slope's standard error is {fmt(se)}, "
        f"so this run supports a margin as narrow as ±{fmt(supported)} and would have detected a slope off 2 by "
        f"{fmt(detectable)} or more with {rules.POWER:.0%} power; power to conclude the law if it holds exactly: "
        f"{power:.0%}."
    )
    if outcome == INCONCLUSIVE and abs(slope - CLAIMED_SLOPE) >= SLOPE_MARGIN:
        why += (
            " Inconclusive at this size, and the fitted slope itself lies outside the margin: a larger run "
            "would more likely say not reproduced."
        )
    elif outcome == INCONCLUSIVE:
        needed = rules.launches_to_decide(se, fleets, SLOPE_MARGIN - abs(slope - CLAIMED_SLOPE))
        why += (
            f" Inconclusive at this size: deciding needs about {needed:,} fleets per point if the fitted slope "
            "is the truth "
            f"(size full runs {SIZES['full']['n_fleets']:,} over a wider m/σ range)."
        )
    return why, f"lifetime ∝ (m/σ)^{fmt(slope)}, interval {fmt_interval(low, high)}; margin 2 ± {SLOPE_MARGIN:g}"


EXPERIMENT = Experiment(
    name=NAME,
    title="the lifetime of a stagger under compute jitter, against (m/σ)²",
    claims=CLAIMS,
    sizes=SIZES,
    run=run,
)
