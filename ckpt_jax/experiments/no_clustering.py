"""Claim 5, first part: random launches do not lock or cluster.

Ensembles of fleets of N identical jobs under storage contention (f ≡ 1, uncapped) are
launched at independent uniformly random cycle positions (`ckpt_jax.random_state`) and
simulated exactly for K cycles. For every launch and cycle the experiment records the
smallest phase gap between distinct jobs' firings (`ckpt_jax.analysis.smallest_gap`, time units;
the solo cycle T + d is 1), accumulated inside the event loop (`SaveAt(trace=False,
gaps=True)`: no (B, N, K) trace is stored, the gaps equal `smallest_gap` of the trace bit
for bit), and follows its ensemble median and 10/90 % quantiles over time.

Clustering or locking would show as a median smallest gap that shrinks cycle after
cycle. The trend is the least-squares slope of log(median smallest gap) against the cycle
index after a burn-in (the first `BURN_IN` of the cycles, where the launch's uniform phases
relax to the fleet's own distribution), with a bootstrap interval over launches.

**Verdict** (an equivalence rule: the claim is one of *no effect*, so the data must be able
to show an effect). The effect is the change of the median smallest gap over
`SHRINK_HORIZON` cycles, exp(slope · `SHRINK_HORIZON`). A cell (N, ρ) reproduces the claim
when the whole `rules.CONFIDENCE` interval of that change lies above 1 / `SHRINK_FACTOR`
(a shrink by less than ×2 over 500 cycles; one-sided: a growing gap is no clustering), is
not reproduced when the whole interval lies below it, and is inconclusive otherwise. The
experiment's verdict combines the cells (`rules.combine`). Each cell's power (the narrowest
margin the run supports, the smallest shrink it would detect) is recorded, and a cell whose
interval lies wholly below ×1 (a significant, if slow, shrink) is named in the text.

Loads ρ = N d / (T + d) are fixed per cell with T + d = 1, so d = ρ / N.
"""

from __future__ import annotations

import time

import jax
import jax.numpy as jnp
import numpy as np

from .. import Fleet, SaveAt, random_state, simulate
from . import rules
from .framework import (
    INCONCLUSIVE,
    REPRODUCED,
    Experiment,
    begin,
    finish,
    fmt,
    fmt_list,
    identical_fleets,
    in_float64,
    new_figure,
    save_figure,
    verdict,
)

NAME = "no_clustering"
CLAIMS = (5,)

LOADS = (0.5, 2.0)  # ρ: storage idle half the time; storage oversubscribed twice over

# Verdict thresholds (named in the report).
SHRINK_FACTOR = 2.0  # equivalence margin: a shrink of the median smallest gap by ×2 or more ...
SHRINK_HORIZON = 500  # ... within this many cycles counts as clustering
SLOPE_MARGIN = -np.log(SHRINK_FACTOR) / SHRINK_HORIZON  # the same margin on the log-slope per cycle
BURN_IN = 0.25  # fraction of the cycles left out of the fit (relaxation from the launch)
MERGE_GAP = 1e-9  # a smallest gap below this (in cycles) at the end counts as a merged pair

# Only the smallest gaps are needed: the gaps observer keeps (K, 4) numbers per fleet and
# returns (K,), no (B, N, K) trace. Memory of one simulate call (one N, both loads,
# B = 2 · launches fleets), float64, per fleet: observer state 32 K bytes (64 K if the loop
# holds two copies) + 8 K of result + the loop's own state ≈ 8 · 16 N bytes: at size full
# (K = 1000, N ≤ 64) ≈ 72 KB + 8 KB ≈ 80 KB per fleet, so B = 10^5 fleets ≈ 8 GB of the
# 141 GB of one GPU. The trace would need 6 · N · K · 8 B ≈ 3.1 MB per fleet at N = 64:
# 310 GB, which does not fit. The host then holds the (B, K) gaps, 0.8 GB.
SIZES = {
    "smoke": dict(n_jobs=(4, 8), launches=16, cycles=40, bootstrap=100),
    "quick": dict(n_jobs=(4, 8, 16, 32), launches=400, cycles=400, bootstrap=400),
    "full": dict(n_jobs=(4, 8, 16, 32, 64), launches=50_000, cycles=1000, bootstrap=1000),
}
GAPS_ONLY = SaveAt(trace=False, gaps=True)


def _identical_fleets(n_jobs: int, loads, launches: int) -> Fleet:
    """Identical fleets at each load (see `experiments.identical_fleets`)."""
    return identical_fleets(n_jobs, loads, launches)


def cell_verdict(slope_low: float, slope_high: float) -> str:
    """A cell's verdict from the interval of its log-slope per cycle (one-sided margin)."""
    return rules.interval_verdict(slope_low, slope_high, margin_low=SLOPE_MARGIN)


def _log_median_slope(log_gaps: np.ndarray) -> float:
    """Least-squares slope of log(median over launches) against the cycle index."""
    return _slope_of_medians(np.median(np.exp(log_gaps), axis=0))


def _slope_of_medians(median: np.ndarray) -> float:
    curve = np.log(median)
    cycles = np.arange(curve.size)
    return float(np.polyfit(cycles, curve, 1)[0])


def _bootstrap_slopes(log_gaps: np.ndarray, n_boot: int, rng: np.random.Generator) -> np.ndarray:
    """`_log_median_slope` of ``n_boot`` resamples of the launches (rows), drawn from ``rng``
    one after another: bit for bit ``[_log_median_slope(log_gaps[rng.integers(0, B, B)])
    for _ in range(n_boot)]``, but without sorting every resample.

    Each cycle's values are sorted once; a resample is the number of times it draws each
    launch, and its median is read off the sorted values where the running count of draws
    crosses the middle rank(s): the same order statistics (and the same mean of the two
    middle ones for an even count) that `np.median` selects. The counting (integers only,
    so exact in any JAX precision) runs on the default JAX device: at size full (5·10^4
    launches × 750 cycles) a resample then costs milliseconds on a GPU instead of seconds
    of `np.median` on a CPU core.
    """
    launches = log_gaps.shape[0]
    values = np.exp(log_gaps)
    order = np.argsort(values, axis=0, kind="stable")
    ordered = np.take_along_axis(values, order, axis=0).T  # (cycles, launches), sorted rows
    order = jnp.asarray(order.T, jnp.int32)
    rows = np.arange(ordered.shape[0])
    slopes = np.empty(n_boot)
    for b in range(n_boot):
        counts = np.bincount(rng.integers(0, launches, launches), minlength=launches)
        lower, upper = (np.asarray(p) for p in _median_positions(order, jnp.asarray(counts, jnp.int32)))
        median = ordered[rows, upper] if launches % 2 else (ordered[rows, lower] + ordered[rows, upper]) / 2
        slopes[b] = _slope_of_medians(median)
    return slopes


@jax.jit
def _median_positions(order, counts):
    """Per row of ``order`` (launch indices in the order of that row's sorted values), the
    positions of the values of 0-based rank n/2 − 1 and n/2 (n = launches, odd: ⌊n/2⌋ twice)
    in the multiset that draws launch i ``counts[i]`` times."""
    n = order.shape[1]
    drawn = jnp.cumsum(counts[order], axis=1)  # draws among the j + 1 smallest values of the row
    lower, upper = (n - 1) // 2, n // 2
    return jnp.sum(drawn <= lower, axis=1), jnp.sum(drawn <= upper, axis=1)


def shrink_trend(gaps: np.ndarray, n_boot: int, rng: np.random.Generator) -> dict:
    """Slope of log median smallest gap vs cycle after the burn-in, with a bootstrap
    interval over launches, and the cell's verdict against the margin.

    Args:
      gaps: (launches, cycles) smallest gaps, all finite and > 0.
    """
    start = int(round(BURN_IN * gaps.shape[1]))
    log_gaps = np.log(gaps[:, start:])
    slope = _log_median_slope(log_gaps)
    boot = _bootstrap_slopes(log_gaps, n_boot, rng)
    alpha = (1 - rules.CONFIDENCE) / 2
    low, high = (float(q) for q in np.quantile(boot, [alpha, 1 - alpha]))
    se = float(np.std(boot, ddof=1))
    outcome = cell_verdict(low, high)
    supported = rules.smallest_supported_margin(se, two_sided=False)
    detectable = rules.smallest_detectable_effect(se, -SLOPE_MARGIN)
    median = np.median(gaps, axis=0)
    return dict(
        fit_from_cycle=start,
        slope=slope,
        slope_ci=[low, high],
        slope_se=se,
        change_per_horizon=float(np.exp(slope * SHRINK_HORIZON)),
        change_per_horizon_ci=[float(np.exp(low * SHRINK_HORIZON)), float(np.exp(high * SHRINK_HORIZON))],
        significant_shrink=bool(high < 0),
        outcome=outcome,
        # Power: the narrowest shrink margin this cell supports with rules.POWER, the
        # smallest shrink (per SHRINK_HORIZON) it would flag as clustering, and the power
        # to conclude "no clustering" if the gap truly does not change.
        supported_shrink=float(np.exp(-supported * SHRINK_HORIZON)),
        detectable_shrink=float(np.exp(-detectable * SHRINK_HORIZON)),
        power_if_no_change=rules.equivalence_power(se, SLOPE_MARGIN, np.inf),
        median_first=float(median[0]),
        median_last=float(median[-1]),
        passed=outcome == REPRODUCED,
    )


def _uniform_median(n_jobs: int) -> float:
    """Median smallest spacing of N independent uniform points on a circle of length 1:
    P(min > x) = (1 − N x)^(N−1), a reference level for unclustered phases."""
    return (1 - 2 ** (-1 / (n_jobs - 1))) / n_jobs


def _figure(cells, loads, n_jobs_list, cycles):
    from matplotlib import colormaps
    from matplotlib.lines import Line2D

    colors = [colormaps["viridis"](x) for x in np.linspace(0.0, 0.9, len(n_jobs_list))]
    fig = new_figure(figsize=(5.4 * len(loads), 5.0), layout="constrained")
    axes = np.atleast_1d(fig.subplots(1, len(loads), sharey=True))
    for ax, load in zip(axes, loads):
        for color, n_jobs in zip(colors, n_jobs_list):
            cell = cells[(n_jobs, load)]
            x = np.arange(cell["median"].size)
            ax.fill_between(x, cell["q10"], cell["q90"], color=color, alpha=0.08, lw=0)
            for edge in ("q10", "q90"):  # the band's edges, so overlapping bands stay apart
                ax.plot(x, cell[edge], color=color, lw=0.5, alpha=0.6)
            ax.plot(x, cell["median"], color=color, lw=1.2)
            start = cell["trend"]["fit_from_cycle"]
            fit = np.exp(cell["intercept"] + cell["trend"]["slope"] * x[start:])
            ax.plot(x[start:], fit, color="black", lw=2.2)
            ax.plot(x[start:], fit, color=color, lw=1.2, ls="--")
            ax.axhline(_uniform_median(n_jobs), color=color, lw=0.9, ls=":")
        start = cells[(n_jobs_list[0], load)]["trend"]["fit_from_cycle"]
        ax.axvspan(0, start, color="0.9", zorder=0)
        ax.set_yscale("log")
        ax.set_xlim(0, cycles - 2)
        ax.set_xlabel("cycle k")
        ax.set_title(f"load ρ = {load:g}")
        ax.grid(True, which="major", alpha=0.3)
    axes[0].set_ylabel("smallest firing gap (units of T + d)")
    handles = [Line2D([], [], color=c, lw=2, label=f"N = {n}") for c, n in zip(colors, n_jobs_list)]
    handles += [
        Line2D([], [], color="0.3", lw=1.2, label="median over launches (band: 10–90 %)"),
        Line2D([], [], color="0.3", lw=1.2, ls="--", label="log-linear fit (after the burn-in)"),
        Line2D([], [], color="0.3", lw=0.9, ls=":", label="median for N independent uniform phases"),
        Line2D([], [], color="0.9", lw=8, label="burn-in, not fitted"),
    ]
    fig.legend(handles=handles, loc="outside lower center", ncols=4, fontsize=8, frameon=False)
    fig.suptitle(f"Claim 5, smallest gap: the median smallest firing gap over {cycles} cycles does not shrink")
    return fig


@in_float64
def run(out_dir, size: str = "quick", progress: bool = True) -> dict:
    """Simulates random launches per (N, ρ) and tests for a shrinking smallest gap.

    Args:
      out_dir: directory for ``no_clustering.json`` and ``no_clustering.png``.
      size: "smoke", "quick" or "full" (fleet sizes, launches, cycles).
      progress: show the simulator's progress bar on long runs.

    Returns:
      The result dict written to ``out_dir/no_clustering.json``.
    """
    out_dir, size, config, started = begin(out_dir, size, SIZES)
    rng = np.random.default_rng(5)
    cycles = config["cycles"]
    cells, per_cell = _measure_cells(config, rng, progress)
    figures = [save_figure(_figure(cells, LOADS, config["n_jobs"], cycles), out_dir / f"{NAME}.png")]
    outcome = rules.combine(c["outcome"] for c in per_cell)
    merged = sum(c["merged_at_end"] for c in per_cell)
    counts = {kind: sum(c["outcome"] == kind for c in per_cell) for kind in {c["outcome"] for c in per_cell}}
    steepest = min(per_cell, key=lambda c: c["slope"])
    shrinking = [c for c in per_cell if c["significant_shrink"]]
    weakest = min(per_cell, key=lambda c: c["detectable_shrink"])
    headline = (
        f"median smallest gap ×{fmt(steepest['change_per_horizon'])} per {SHRINK_HORIZON} cycles at worst "
        f"({_where(steepest)}; margin ×{fmt(1 / SHRINK_FACTOR)}); {counts.get(REPRODUCED, 0)} of {len(per_cell)} cells"
    )
    numbers = dict(
        n_jobs=list(config["n_jobs"]),
        loads=list(LOADS),
        launches=config["launches"],
        cycles=cycles,
        bootstrap=config["bootstrap"],
        throughput="shared (f = 1)",
        cap=None,
        cycle_work="T + d = 1, d = rho / N",
        cells=per_cell,
        seconds=time.perf_counter() - started,
    )
    verdicts = [
        verdict(
            5,
            outcome,
            _why(per_cell, config, counts, steepest, shrinking, weakest, merged),
            sub_claim="5 smallest gap",
            title="the smallest phase gap does not shrink",
            headline=headline,
            rule=_rule(),
            thresholds=dict(
                SHRINK_FACTOR=SHRINK_FACTOR,
                SHRINK_HORIZON=SHRINK_HORIZON,
                BURN_IN=BURN_IN,
                CONFIDENCE=rules.CONFIDENCE,
                MERGE_GAP=MERGE_GAP,
            ),
            figures=figures,
            table=_table(per_cell),
            cells=len(per_cell),
            cell_outcomes=[c["outcome"] for c in per_cell],
            steepest_slope=steepest["slope"],
            steepest_slope_ci=steepest["slope_ci"],
            steepest_change_per_horizon=steepest["change_per_horizon"],
            significant_shrink_cells=[[c["n_jobs"], c["load"]] for c in shrinking],
            weakest_detectable_shrink=weakest["detectable_shrink"],
            merged_at_end=merged,
        )
    ]
    return finish(out_dir, EXPERIMENT, size, numbers, verdicts, figures)


def _measure_cells(config: dict, rng, progress: bool) -> tuple[dict, list]:
    """``(cells, per_cell)``: per (N, ρ) the smallest gap's median and quantiles per cycle
    and its trend (for the figure), and the cells' JSON summaries in order."""
    cycles = config["cycles"]
    cells, per_cell = {}, []
    for n_jobs in config["n_jobs"]:
        fleet = _identical_fleets(n_jobs, LOADS, config["launches"])
        state = random_state(fleet, jax.random.key(1000 + n_jobs))
        trace = simulate(fleet, state, cycles, progress=progress, save=GAPS_ONLY)
        ok = np.asarray(trace.ok)
        # The last cycle has no closing gap without a period (NaN): drop it.
        gaps = np.asarray(trace.gaps)[..., :-1]
        for index, load in enumerate(LOADS):
            usable = ok[index] & np.all(np.isfinite(gaps[index]) & (gaps[index] > 0), axis=-1)
            cell_gaps = gaps[index][usable]
            trend = shrink_trend(cell_gaps, config["bootstrap"], rng)
            median = np.median(cell_gaps, axis=0)
            x = np.arange(median.size)[trend["fit_from_cycle"] :]
            intercept = float(np.mean(np.log(median[x])) - trend["slope"] * np.mean(x))
            cells[(n_jobs, load)] = dict(
                median=median,
                q10=np.quantile(cell_gaps, 0.1, axis=0),
                q90=np.quantile(cell_gaps, 0.9, axis=0),
                trend=trend,
                intercept=intercept,
            )
            per_cell.append(
                dict(
                    n_jobs=n_jobs,
                    load=load,
                    launches=int(usable.sum()),
                    failed_runs=int((~ok[index]).sum()),
                    merged_at_end=int(np.sum(cell_gaps[:, -1] < MERGE_GAP)),
                    smallest_gap_ever=float(cell_gaps.min()),
                    uniform_phases_median=_uniform_median(n_jobs),
                    **trend,
                    median_every_10th_cycle=median[::10],
                    q10_every_10th_cycle=cells[(n_jobs, load)]["q10"][::10],
                    q90_every_10th_cycle=cells[(n_jobs, load)]["q90"][::10],
                )
            )
    return cells, per_cell


def _where(c) -> str:
    return f"N = {c['n_jobs']}, ρ = {c['load']:g}"


def _pair(c) -> str:
    return f"({c['n_jobs']}, {c['load']:g})"


def _why(
    per_cell: list, config: dict, counts: dict, steepest: dict, shrinking: list, weakest: dict, merged: int
) -> str:
    """The verdict in prose: the cells' outcomes, the steepest trend, the power, the merged
    launches, and what deciding an inconclusive cell would take."""
    cycles, launches, fit_from = config["cycles"], config["launches"], per_cell[0]["fit_from_cycle"]
    why = (
        f"{len(per_cell)} cells (N = {fmt_list(config['n_jobs'])}; ρ = {fmt_list(LOADS)}), {launches} random "
        f"launches × {cycles} cycles each, trend fitted from cycle {fit_from} on: "
        + ", ".join(f"{n} {kind}" for kind, n in sorted(counts.items()))
        + f". The steepest trend, at {_where(steepest)}, changes the median smallest gap by "
        f"×{fmt(steepest['change_per_horizon'])} per {SHRINK_HORIZON} cycles "
        f"(interval ×{fmt(steepest['change_per_horizon_ci'][0])} to ×{fmt(steepest['change_per_horizon_ci'][1])}; "
        f"clustering would be ×{fmt(1 / SHRINK_FACTOR)} or less). "
        + (
            f"Stated plainly: at (N, ρ) = {fmt_list([_pair(c) for c in shrinking])} the interval lies wholly below "
            "×1, a statistically significant but slow shrink, smaller than the margin. "
            if shrinking
            else "No cell's interval lies wholly below ×1. "
        )
        + f"Power: every cell would have detected a shrink of ×{fmt(weakest['detectable_shrink'])} per "
        f"{SHRINK_HORIZON} cycles or stronger with {rules.POWER:.0%} power (weakest cell: {_where(weakest)}); "
        f"{merged} launches ended with two jobs closer than {MERGE_GAP:g}."
    )
    undecided = [c for c in per_cell if c["outcome"] == INCONCLUSIVE]
    beyond_edge = [c for c in undecided if c["slope"] <= SLOPE_MARGIN]
    if beyond_edge:
        why += (
            f" At (N, ρ) = {fmt_list([_pair(c) for c in beyond_edge])} the estimate itself shrinks faster than the "
            "margin, so a larger run would more likely say not reproduced."
        )
    undecided = [c for c in undecided if c["slope"] > SLOPE_MARGIN]
    if undecided:
        needed = max(
            rules.launches_to_decide(c["slope_se"], c["launches"], c["slope"] - SLOPE_MARGIN) for c in undecided
        )
        full = SIZES["full"]
        why += (
            f" Inconclusive at this size: deciding needs about {needed:,} launches per cell at {cycles} cycles "
            "if the estimates are the truth "
            f"(size full runs {full['launches']:,} launches × {full['cycles']:,} cycles, a longer fit as well)."
        )
    return why


def _rule() -> str:
    """The decision rule in words."""
    return (
        f"per cell, the {rules.CONFIDENCE:.0%} bootstrap interval (over launches) of the change of the median "
        f"smallest gap per {SHRINK_HORIZON} cycles must lie above ×1/{fmt(SHRINK_FACTOR)} (reproduced); wholly "
        f"below it: not reproduced; straddling: inconclusive. The first {BURN_IN:.0%} of the cycles are left out "
        "of the fit. Cells combine by the rule above."
    )


def _table(per_cell: list) -> dict:
    """The report's table: per cell the change of the median smallest gap and the power."""
    return dict(
        columns=[
            "N",
            "ρ",
            "launches",
            f"change per {SHRINK_HORIZON} cycles",
            "interval",
            "smallest detectable shrink",
            "power if no change",
            "verdict",
        ],
        rows=[
            [
                str(c["n_jobs"]),
                fmt(c["load"]),
                str(c["launches"]),
                f"×{fmt(c['change_per_horizon'])}",
                f"×{fmt(c['change_per_horizon_ci'][0])} to ×{fmt(c['change_per_horizon_ci'][1])}",
                f"×{fmt(c['detectable_shrink'])}",
                f"{c['power_if_no_change']:.0%}",
                c["outcome"],
            ]
            for c in per_cell
        ],
    )


EXPERIMENT = Experiment(
    name=NAME,
    title="random launches do not lock or cluster: the smallest phase gap",
    claims=CLAIMS,
    sizes=SIZES,
    run=run,
)
