"""Claim 5, first part: random launches do not lock or cluster.

Ensembles of fleets of N identical jobs under storage contention (f ≡ 1, uncapped) are
launched at independent uniformly random cycle positions (`ckpt_jax.random_state`) and
simulated exactly for K cycles. For every launch and cycle the experiment records the
smallest phase gap between distinct jobs' firings (`ckpt_jax.analysis.smallest_gap`,
time units; the solo cycle T + d is 1) and follows its ensemble median and 10/90 %
quantiles over time.

Clustering or locking would show as a median smallest gap that shrinks cycle after
cycle. The trend is the least-squares slope of log(median smallest gap) against the cycle
index, with a bootstrap confidence interval over launches. A cell (N, ρ) passes when the
trend is not significantly negative *or* is too small to matter: the CI's upper end is
≥ 0, or the fitted drop over the whole run, exp(−slope · (K − 2)), is below
`MAX_DROP_FACTOR`. The thresholds are fixed here, before any data were seen.

Loads ρ = N d / (T + d) are fixed per cell with T + d = 1, so d = ρ / N.
"""

from __future__ import annotations

import time
from pathlib import Path

import jax
import numpy as np

from .. import Fleet, random_state, simulate
from ..analysis import smallest_gap
from . import NOT_REPRODUCED, PARTIALLY, REPRODUCED, check_size, identical_fleets, finish, new_figure, save_figure, verdict

NAME = "no_clustering"
CLAIMS = (5,)

LOADS = (0.5, 2.0)  # ρ: storage idle half the time; storage oversubscribed twice over

# Verdict thresholds, fixed before looking at data.
CONFIDENCE = 0.95  # two-sided bootstrap interval of the slope
MAX_DROP_FACTOR = 2.0  # a fitted shrink of the median smallest gap by less than this is no clustering
MERGE_GAP = 1e-9  # a smallest gap below this (in cycles) at the end counts as a merged pair

SIZES = {
    "smoke": dict(n_jobs=(4, 8), launches=16, cycles=40, bootstrap=100),
    "quick": dict(n_jobs=(4, 8, 16, 32), launches=200, cycles=200, bootstrap=400),
    "full": dict(n_jobs=(4, 8, 16, 32, 64), launches=1000, cycles=500, bootstrap=1000),
}


def _identical_fleets(n_jobs: int, loads, launches: int) -> Fleet:
    """Identical fleets at each load (see `experiments.identical_fleets`)."""
    return identical_fleets(n_jobs, loads, launches)


def _log_median_slope(log_gaps: np.ndarray) -> float:
    """Least-squares slope of log(median over launches) against the cycle index."""
    curve = np.log(np.median(np.exp(log_gaps), axis=0))
    cycles = np.arange(curve.size)
    return float(np.polyfit(cycles, curve, 1)[0])


def _trend(gaps: np.ndarray, n_boot: int, rng: np.random.Generator) -> dict:
    """Slope of log median smallest gap vs cycle, with a bootstrap CI over launches.

    Args:
      gaps: (launches, cycles) smallest gaps, all finite and > 0.
    """
    log_gaps = np.log(gaps)
    slope = _log_median_slope(log_gaps)
    launches = gaps.shape[0]
    boot = np.array([_log_median_slope(log_gaps[rng.integers(0, launches, launches)]) for _ in range(n_boot)])
    alpha = (1 - CONFIDENCE) / 2
    low, high = np.quantile(boot, [alpha, 1 - alpha])
    span = gaps.shape[1] - 1
    drop = float(np.exp(-slope * span))
    median = np.median(gaps, axis=0)
    passed = bool(high >= 0 or drop < MAX_DROP_FACTOR)
    return dict(
        slope=slope,
        slope_ci=[float(low), float(high)],
        fitted_drop_factor=drop,
        median_first=float(median[0]),
        median_last=float(median[-1]),
        passed=passed,
    )


def _uniform_median(n_jobs: int) -> float:
    """Median smallest spacing of N independent uniform points on a circle of length 1:
    P(min > x) = (1 − N x)^(N−1), a reference level for unclustered phases."""
    return (1 - 2 ** (-1 / (n_jobs - 1))) / n_jobs


def _figure(cells, loads, n_jobs_list, cycles):
    from matplotlib import colormaps

    colors = [colormaps["viridis"](x) for x in np.linspace(0.0, 0.9, len(n_jobs_list))]
    fig = new_figure(figsize=(5.2 * len(loads), 4.4), layout="constrained")
    axes = np.atleast_1d(fig.subplots(1, len(loads), sharey=True))
    for ax, load in zip(axes, loads):
        for color, n_jobs in zip(colors, n_jobs_list):
            cell = cells[(n_jobs, load)]
            x = np.arange(cell["median"].size)
            ax.fill_between(x, cell["q10"], cell["q90"], color=color, alpha=0.18, lw=0)
            ax.plot(x, cell["median"], color=color, lw=1.3, label=f"N={n_jobs}")
            fit = np.exp(cell["intercept"] + cell["trend"]["slope"] * x)
            ax.plot(x, fit, color=color, lw=0.8, ls="--")
            ax.axhline(_uniform_median(n_jobs), color=color, lw=0.8, ls=":")
        ax.set_yscale("log")
        ax.set_xlabel("cycle k")
        ax.set_title(f"load ρ = {load}")
        ax.grid(True, which="major", alpha=0.3)
    axes[0].set_ylabel("smallest firing gap (units of T + d)\ndotted: N independent uniform phases")
    axes[-1].legend(fontsize=8, loc="lower right")
    fig.suptitle(
        f"Claim 5: smallest phase gap over {cycles} cycles (median, 10–90 % band, dashed: log-linear fit)"
    )
    return fig


def run(out_dir, size: str = "quick", progress: bool = True) -> dict:
    """Simulates random launches per (N, ρ) and tests for a shrinking smallest gap.

    Args:
      out_dir: directory for ``no_clustering.json`` and ``no_clustering.png``.
      size: "smoke", "quick" or "full" (fleet sizes, launches, cycles).
      progress: show the simulator's progress bar on long runs.

    Returns:
      The result dict written to ``out_dir/no_clustering.json``.
    """
    jax.config.update("jax_enable_x64", True)
    size = check_size(size)
    out_dir = Path(out_dir)
    config = SIZES[size]
    started = time.perf_counter()
    rng = np.random.default_rng(5)
    cycles = config["cycles"]

    cells, per_cell = {}, []
    for n_jobs in config["n_jobs"]:
        fleet = _identical_fleets(n_jobs, LOADS, config["launches"])
        state = random_state(fleet, jax.random.key(1000 + n_jobs))
        trace = simulate(fleet, state, cycles, progress=progress)
        ok = np.asarray(trace.ok)
        # The last cycle has no closing gap without a period (NaN): drop it.
        gaps = np.asarray(smallest_gap(trace.fire_times))[..., :-1]
        for index, load in enumerate(LOADS):
            usable = ok[index] & np.all(np.isfinite(gaps[index]) & (gaps[index] > 0), axis=-1)
            cell_gaps = gaps[index][usable]
            trend = _trend(cell_gaps, config["bootstrap"], rng)
            median = np.median(cell_gaps, axis=0)
            x = np.arange(median.size)
            intercept = float(np.mean(np.log(median)) - trend["slope"] * np.mean(x))
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

    figures = [save_figure(_figure(cells, LOADS, config["n_jobs"], cycles), out_dir / f"{NAME}.png")]

    passed = [c for c in per_cell if c["passed"]]
    merged = sum(c["merged_at_end"] for c in per_cell)
    if len(passed) == len(per_cell):
        outcome = REPRODUCED
    elif passed:
        outcome = PARTIALLY
    else:
        outcome = NOT_REPRODUCED
    failing = [f"(N={c['n_jobs']}, ρ={c['load']}): slope {c['slope']:.2e}, drop ×{c['fitted_drop_factor']:.2f}"
               for c in per_cell if not c["passed"]]
    steepest = min(per_cell, key=lambda c: c["slope"])
    why = (
        f"{len(passed)} of {len(per_cell)} cells (N in {list(config['n_jobs'])}, ρ in {list(LOADS)}; "
        f"{config['launches']} launches × {cycles} cycles each) show no shrinking smallest gap: "
        f"{int(CONFIDENCE * 100)} % bootstrap CI of the log-median slope reaching ≥ 0, or a fitted drop over "
        f"the run below ×{MAX_DROP_FACTOR}. Steepest slope {steepest['slope']:.2e}/cycle at "
        f"(N={steepest['n_jobs']}, ρ={steepest['load']}), CI [{steepest['slope_ci'][0]:.2e}, "
        f"{steepest['slope_ci'][1]:.2e}], fitted drop ×{steepest['fitted_drop_factor']:.2f}; "
        f"{merged} launches ended with a gap below {MERGE_GAP:g}."
        + (f" Failing: {'; '.join(failing)}." if failing else "")
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
            why,
            cells_passed=len(passed),
            cells=len(per_cell),
            steepest_slope=steepest["slope"],
            steepest_slope_ci=steepest["slope_ci"],
            largest_fitted_drop=max(c["fitted_drop_factor"] for c in per_cell),
            merged_at_end=merged,
        )
    ]
    return finish(out_dir, NAME, size, numbers, verdicts, figures)
