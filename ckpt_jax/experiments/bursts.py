"""Claim 6: bursts without synchrony — the upper tail of the concurrent-writer count is
heavier than for independent phases.

Ensembles of fleets of N identical jobs under storage contention (f ≡ 1, uncapped; solo
cycle T + d = 1, load ρ = N d / (T + d)) are launched at random cycle positions and
simulated exactly for K cycles. For every fleet the experiment measures the time-weighted
distribution of the writer count n_w on its observed interval
(`ckpt_jax.analysis.writer_distribution`) and its writing fraction p = E[n_w] / N.

The baseline is what independent phases would give: each fleet's own Binomial(N, p)
(docs/model.md: "p the fleet's measured writing fraction"), averaged over the ensemble like the
measured distributions (a mixture of binomials; a single Binomial(N, p̄) with the pooled
p̄ is recorded as well). The tail ratio P(n_w ≥ k) / P_baseline(n_w ≥ k) is taken at the
upper levels k > N p̄ that the ensemble visits often enough: at least `MIN_EXCURSIONS`
separate excursions to n_w ≥ k (`ckpt_jax.analysis.writer_excursions`).

Verdict thresholds, fixed before any data were seen: a cell (N, ρ) reproduces the claim
when at each of its `TOP_LEVELS` highest such levels the ratio is ≥ `MIN_TAIL_RATIO` and
its bootstrap lower bound (over fleets) is ≥ 1.
"""

from __future__ import annotations

import time
from pathlib import Path

import jax
import numpy as np

from .. import Fleet, random_state, simulate
from ..analysis import binomial_baseline, mean_writing_fraction, writer_distribution, writer_excursions
from . import NOT_REPRODUCED, PARTIALLY, REPRODUCED, check_size, identical_fleets, finish, new_figure, save_figure, verdict

NAME = "bursts"
CLAIMS = (6,)

LOADS = (0.5, 2.0)  # ρ: storage idle half the time; storage oversubscribed twice over

# Verdict thresholds, fixed before looking at data.
MIN_EXCURSIONS = 50  # excursions to n_w ≥ k across the ensemble for level k to count
TOP_LEVELS = 3  # the verdict looks at this many of the highest usable levels
MIN_TAIL_RATIO = 2.0  # measured tail / binomial tail at those levels
CONFIDENCE = 0.95  # bootstrap interval over fleets; its lower end must be ≥ 1

SIZES = {
    "smoke": dict(n_jobs=(8,), fleets=16, cycles=40, bootstrap=100),
    "quick": dict(n_jobs=(8, 16, 32), fleets=100, cycles=200, bootstrap=500),
    "full": dict(n_jobs=(8, 16, 32, 64), fleets=1000, cycles=500, bootstrap=1000),
}


def _identical_fleets(n_jobs: int, loads, fleets: int) -> Fleet:
    """Identical fleets at each load (see `experiments.identical_fleets`)."""
    return identical_fleets(n_jobs, loads, fleets)


def _tail(dist: np.ndarray) -> np.ndarray:
    """P(n ≥ k), k = 0..N, along the last axis."""
    return np.cumsum(dist[..., ::-1], axis=-1)[..., ::-1]


def _cell(dist: np.ndarray, excursions: np.ndarray, n_boot: int, rng: np.random.Generator) -> dict:
    """Tails, ratios and the pass/fail of one (N, ρ) cell.

    Args:
      dist: (fleets, N + 1) per-fleet writer-count distributions (all finite).
      excursions: (fleets, N) excursions to n_w ≥ k for k = 1..N.
    """
    n_jobs = dist.shape[-1] - 1
    p = np.asarray(mean_writing_fraction(dist))
    per_fleet_baseline = np.asarray(binomial_baseline(n_jobs, p))
    measured_tail = _tail(dist.mean(axis=0))
    mixture_tail = _tail(per_fleet_baseline.mean(axis=0))
    pooled_tail = _tail(np.asarray(binomial_baseline(n_jobs, p.mean())))
    ratio = measured_tail / mixture_tail
    total_excursions = np.concatenate([[np.nan], excursions.sum(axis=0)])  # index k = 0..N
    levels = np.arange(n_jobs + 1)
    usable = (levels > n_jobs * p.mean()) & (total_excursions >= MIN_EXCURSIONS) & (measured_tail > 0)
    top = levels[usable][-TOP_LEVELS:]

    fleets = dist.shape[0]
    boot = np.empty((n_boot, n_jobs + 1))
    for b in range(n_boot):
        pick = rng.integers(0, fleets, fleets)
        boot[b] = _tail(dist[pick].mean(axis=0)) / _tail(per_fleet_baseline[pick].mean(axis=0))
    lower = np.quantile(boot, (1 - CONFIDENCE) / 2, axis=0)
    upper = np.quantile(boot, 1 - (1 - CONFIDENCE) / 2, axis=0)
    passed = bool(top.size > 0 and np.all(ratio[top] >= MIN_TAIL_RATIO) and np.all(lower[top] >= 1.0))
    return dict(
        writing_fraction=float(p.mean()),
        writing_fraction_spread=[float(p.min()), float(p.max())],
        mean_writers=float(n_jobs * p.mean()),
        measured_tail=measured_tail,
        mixture_tail=mixture_tail,
        pooled_tail=pooled_tail,
        tail_ratio=ratio,
        tail_ratio_ci=[lower, upper],
        pooled_tail_ratio=measured_tail / pooled_tail,
        excursions=total_excursions,
        usable_levels=levels[usable],
        top_levels=top,
        top_ratios=ratio[top],
        top_ratio_lower=lower[top],
        passed=passed,
    )


def _figures(cells, n_jobs_list, loads):
    fig = new_figure(figsize=(4.2 * len(n_jobs_list), 3.8 * len(loads)), layout="constrained")
    axes = np.asarray(fig.subplots(len(loads), len(n_jobs_list), squeeze=False))
    for row, load in enumerate(loads):
        for col, n_jobs in enumerate(n_jobs_list):
            ax = axes[row, col]
            cell = cells[(n_jobs, load)]
            k = np.arange(n_jobs + 1)
            floor = 1e-12
            ax.semilogy(k, np.maximum(cell["measured_tail"], floor), "o-", ms=3, color="tab:red", label="measured")
            ax.semilogy(k, np.maximum(cell["mixture_tail"], floor), "s--", ms=3, mfc="none", color="tab:blue",
                        label="Binomial(N, p) per fleet")
            ax.semilogy(k, np.maximum(cell["pooled_tail"], floor), ":", color="0.4", label="Binomial(N, p̄) pooled")
            for level in cell["top_levels"]:
                ax.axvline(level, color="tab:green", lw=0.6, alpha=0.6)
            ax.set_ylim(floor, 2)
            ax.set_title(f"N = {n_jobs}, ρ = {load} (p̄ = {cell['writing_fraction']:.3f})", fontsize=10)
            ax.set_xlabel("k")
            ax.grid(True, which="major", alpha=0.3)
        axes[row, 0].set_ylabel("P(n_w ≥ k)")
    axes[0, -1].legend(fontsize=7, loc="lower left")
    fig.suptitle("Claim 6: upper tail of the concurrent-writer count vs independent phases "
                 "(green: levels the verdict uses)")

    ratio_fig = new_figure(figsize=(5.5 * len(loads), 4.2), layout="constrained")
    ratio_axes = np.atleast_1d(ratio_fig.subplots(1, len(loads), sharey=True))
    from matplotlib import colormaps

    colors = [colormaps["viridis"](x) for x in np.linspace(0.0, 0.9, len(n_jobs_list))]
    for ax, load in zip(ratio_axes, loads):
        for color, n_jobs in zip(colors, n_jobs_list):
            cell = cells[(n_jobs, load)]
            usable = cell["usable_levels"]
            if usable.size == 0:
                continue
            low, high = cell["tail_ratio_ci"]
            ax.errorbar(usable / n_jobs, cell["tail_ratio"][usable],
                        yerr=[cell["tail_ratio"][usable] - low[usable], high[usable] - cell["tail_ratio"][usable]],
                        color=color, marker="o", ms=3, capsize=2, label=f"N = {n_jobs}")
        ax.axhline(1.0, color="0.4", lw=0.8)
        ax.axhline(MIN_TAIL_RATIO, color="tab:red", lw=0.8, ls="--", label=f"threshold ×{MIN_TAIL_RATIO:g}")
        ax.set_yscale("log")
        ax.set_xlabel("k / N (levels above the mean with ≥ %d excursions)" % MIN_EXCURSIONS)
        ax.set_title(f"ρ = {load}")
        ax.grid(True, which="both", alpha=0.3)
    ratio_axes[0].set_ylabel("P(n_w ≥ k) / P_binomial(n_w ≥ k)")
    ratio_axes[-1].legend(fontsize=8)
    ratio_fig.suptitle("Claim 6: tail ratio vs independent phases (95 % bootstrap CI over fleets)")
    return fig, ratio_fig


def run(out_dir, size: str = "quick", progress: bool = True) -> dict:
    """Measures writer-count tails of random launches against binomial baselines.

    Args:
      out_dir: directory for ``bursts.json`` and the PNG figures.
      size: "smoke", "quick" or "full" (fleet sizes, fleets per cell, cycles).
      progress: show the simulator's progress bar on long runs.

    Returns:
      The result dict written to ``out_dir/bursts.json``.
    """
    jax.config.update("jax_enable_x64", True)
    size = check_size(size)
    out_dir = Path(out_dir)
    config = SIZES[size]
    started = time.perf_counter()
    rng = np.random.default_rng(6)

    cells, per_cell = {}, []
    for n_jobs in config["n_jobs"]:
        fleet = _identical_fleets(n_jobs, LOADS, config["fleets"])
        state = random_state(fleet, jax.random.key(6000 + n_jobs))
        trace = simulate(fleet, state, config["cycles"], progress=progress)
        ok = np.asarray(trace.ok)
        dist = np.asarray(writer_distribution(trace.fire_times, trace.end_times))
        excursions = writer_excursions(trace.fire_times, trace.end_times, np.arange(1, n_jobs + 1))
        for index, load in enumerate(LOADS):
            usable = ok[index] & np.all(np.isfinite(dist[index]), axis=-1)
            cell = _cell(dist[index][usable], excursions[index][usable], config["bootstrap"], rng)
            cells[(n_jobs, load)] = cell
            per_cell.append(dict(n_jobs=n_jobs, load=load, fleets=int(usable.sum()),
                                 failed_runs=int((~ok[index]).sum()), **cell))

    figures = [
        save_figure(fig, out_dir / name)
        for fig, name in zip(_figures(cells, config["n_jobs"], LOADS), (f"{NAME}_tails.png", f"{NAME}_ratio.png"))
    ]

    passed = [c for c in per_cell if c["passed"]]
    if len(passed) == len(per_cell):
        outcome = REPRODUCED
    elif passed:
        outcome = PARTIALLY
    else:
        outcome = NOT_REPRODUCED

    def describe(c):
        top = zip(c["top_levels"], c["top_ratios"], c["top_ratio_lower"])
        levels = ", ".join(f"k={k}: ×{r:.2g} (≥ {lo:.2g})" for k, r, lo in top)
        return f"(N={c['n_jobs']}, ρ={c['load']}, p̄={c['writing_fraction']:.3f}) {levels or 'no usable level'}"

    why = (
        f"{len(passed)} of {len(per_cell)} cells ({config['fleets']} fleets × {config['cycles']} cycles each) have "
        f"a measured upper tail ≥ ×{MIN_TAIL_RATIO:g} the per-fleet Binomial(N, p) tail, with bootstrap lower "
        f"bound ≥ 1, at each of their top {TOP_LEVELS} levels above the mean with ≥ {MIN_EXCURSIONS} excursions: "
        + "; ".join(describe(c) for c in per_cell)
        + "."
    )
    numbers = dict(
        n_jobs=list(config["n_jobs"]),
        loads=list(LOADS),
        fleets=config["fleets"],
        cycles=config["cycles"],
        bootstrap=config["bootstrap"],
        throughput="shared (f = 1)",
        cap=None,
        cycle_work="T + d = 1, d = rho / N",
        baseline="mean over fleets of Binomial(N, p_fleet); pooled Binomial(N, mean p) also given",
        cells=per_cell,
        seconds=time.perf_counter() - started,
    )
    verdicts = [
        verdict(
            6,
            outcome,
            why,
            cells_passed=len(passed),
            cells=len(per_cell),
            top_ratios={f"N={c['n_jobs']},rho={c['load']}": c["top_ratios"] for c in per_cell},
        )
    ]
    return finish(out_dir, NAME, size, numbers, verdicts, figures)
