"""Claim 6: bursts without synchrony — the upper tail of the concurrent-writer count is
heavier than for independent phases.

Ensembles of fleets of N identical jobs under storage contention (f ≡ 1, uncapped; solo
cycle T + d = 1, load ρ = N d / (T + d)) are launched at random cycle positions and
simulated exactly for K cycles. For every fleet the experiment measures the time-weighted
distribution of the writer count n_w on its observed interval
(`ckpt_jax.analysis.writer_distribution`) and its writing fraction p = E[n_w] / N. Both,
and the excursions below, come from the writers observer accumulated inside the event loop
(`SaveAt(trace=False, writers=True)`, `ckpt_jax.WriterStats`): no (B, N, K) trace is
stored. The observer's time at each count equals the trace's `writer_distribution` times
the window's length to rounding (the same intervals, summed in another order), its
excursions `ckpt_jax.analysis.writer_excursions` exactly.

The baseline is what independent phases would give: each fleet's own Binomial(N, p)
(docs/model.md: "p the fleet's measured writing fraction"), averaged over the ensemble like the
measured distributions (a mixture of binomials; a single Binomial(N, p̄) with the pooled
p̄ is recorded as well). The tail ratio P(n_w ≥ k) / P_baseline(n_w ≥ k) is taken at the
upper levels k > N p̄ that the ensemble visits often enough: at least `MIN_EXCURSIONS`
separate excursions to n_w ≥ k (`ckpt_jax.analysis.writer_excursions`).

**Verdict** (the claim is one of an effect, so the interval must clear a margin): at each of
a cell's `TOP_LEVELS` highest usable levels, the `rules.CONFIDENCE` bootstrap interval (over
fleets) of the tail ratio must lie wholly above `MIN_TAIL_RATIO` (reproduced); wholly below
it: not reproduced (the tail is not that much heavier); straddling: inconclusive. Levels,
then cells, combine by `rules.combine`; a cell with no usable level is inconclusive.
"""

from __future__ import annotations

import time

import jax
import numpy as np

from .. import Fleet, SaveAt, random_state, simulate
from ..analysis import binomial_baseline, mean_writing_fraction
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

NAME = "bursts"
CLAIMS = (6,)

LOADS = (0.5, 2.0)  # ρ: storage idle half the time; storage oversubscribed twice over

# Verdict thresholds (named in the report).
MIN_EXCURSIONS = 50  # excursions to n_w ≥ k across the ensemble for level k to count
TOP_LEVELS = 3  # the verdict looks at this many of the highest usable levels
MIN_TAIL_RATIO = 2.0  # margin: the tail must be at least this many times the binomial tail

# Only writer-count statistics are needed: the writers observer keeps O(N) numbers per
# fleet, no (B, N, K) trace. Memory of one simulate call (one N, both loads, B = 2 · fleets
# fleets), float64, per fleet: observer state ≈ 8 (N + 1) + 4 (N + 2) + 40 bytes and its
# output about as much (≈ 1.6 KB at N = 64; ≈ 2.4 KB if the loop holds two copies), plus the
# loop's own state ≈ 8 · 16 N bytes (8.2 KB): ≈ 11 KB per fleet at size full (N ≤ 64), so
# B = 10^5 fleets ≈ 1.1 GB of the 141 GB of one GPU. The trace would need 6 · N · K · 8 B
# ≈ 1.5 MB per fleet at N = 64, K = 500: 150 GB, which does not fit.
SIZES = {
    "smoke": dict(n_jobs=(8,), fleets=16, cycles=40, bootstrap=100),
    "quick": dict(n_jobs=(8, 16, 32), fleets=100, cycles=200, bootstrap=500),
    "full": dict(n_jobs=(8, 16, 32, 64), fleets=50_000, cycles=500, bootstrap=1000),
}
WRITERS_ONLY = SaveAt(trace=False, writers=True)


def _identical_fleets(n_jobs: int, loads, fleets: int) -> Fleet:
    """Identical fleets at each load (see `experiments.identical_fleets`)."""
    return identical_fleets(n_jobs, loads, fleets)


def _tail(dist: np.ndarray) -> np.ndarray:
    """P(n ≥ k), k = 0..N, along the last axis."""
    return np.cumsum(dist[..., ::-1], axis=-1)[..., ::-1]


def level_verdict(low: float, high: float) -> str:
    """One level's verdict from the interval of its tail ratio (must clear the margin)."""
    return rules.interval_verdict(low, high, margin_low=MIN_TAIL_RATIO)


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
    lower = np.quantile(boot, (1 - rules.CONFIDENCE) / 2, axis=0)
    upper = np.quantile(boot, 1 - (1 - rules.CONFIDENCE) / 2, axis=0)
    level_outcomes = [level_verdict(float(lower[k]), float(upper[k])) for k in top]
    outcome = rules.combine(level_outcomes) if top.size else INCONCLUSIVE
    passed = outcome == REPRODUCED
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
        top_ratio_upper=upper[top],
        level_outcomes=level_outcomes,
        outcome=outcome,
        passed=passed,
    )


def _figures(cells, n_jobs_list, loads):
    from matplotlib import colormaps
    from matplotlib.lines import Line2D
    from matplotlib.ticker import MaxNLocator

    fig = new_figure(figsize=(4.4 * len(n_jobs_list), 3.7 * len(loads) + 0.8), layout="constrained")
    axes = np.asarray(fig.subplots(len(loads), len(n_jobs_list), squeeze=False))
    never = False
    for row, load in enumerate(loads):
        for col, n_jobs in enumerate(n_jobs_list):
            ax = axes[row, col]
            cell = cells[(n_jobs, load)]
            k = np.arange(n_jobs + 1)
            curves = (cell["measured_tail"], cell["mixture_tail"], cell["pooled_tail"])
            positive = np.concatenate([c[c > 0] for c in curves])
            floor = 10 ** np.floor(np.log10(positive.min())) / 10
            seen = cell["measured_tail"] > 0
            ax.semilogy(k[seen], cell["measured_tail"][seen], "o-", ms=3, color="tab:red")
            if not seen.all():
                # P = 0 has no place on a log axis: mark the levels never reached at the bottom.
                never = True
                ax.plot(k[~seen], np.full((~seen).sum(), floor * 1.6), "v", color="tab:red", ms=6, mfc="white")
            ax.semilogy(k, cell["mixture_tail"], "s--", ms=3, mfc="none", color="tab:blue")
            ax.semilogy(k, cell["pooled_tail"], ":", color="0.4")
            for level in cell["top_levels"]:
                ax.axvline(level, color="tab:green", lw=0.7, alpha=0.6)
            ax.set_ylim(floor, 2)
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
            ax.set_title(
                f"N = {n_jobs}, ρ = {load:g} (writing fraction p̄ = {cell['writing_fraction']:.3f})", fontsize=9
            )
            ax.set_xlabel("writer level k")
            ax.grid(True, which="major", alpha=0.3)
        axes[row, 0].set_ylabel("P(n_w ≥ k)")
    handles = [
        Line2D([], [], color="tab:red", marker="o", ms=3, label="measured"),
        Line2D(
            [],
            [],
            color="tab:blue",
            marker="s",
            mfc="none",
            ms=3,
            ls="--",
            label="Binomial(N, p), p per fleet (the baseline)",
        ),
        Line2D([], [], color="0.4", ls=":", label="Binomial(N, p̄), one pooled p̄"),
        Line2D([], [], color="tab:green", lw=0.7, label="levels the verdict uses"),
    ]
    if never:
        handles.append(
            Line2D(
                [], [], color="tab:red", marker="v", mfc="white", ls="none", label="measured P = 0: level never reached"
            )
        )
    fig.legend(handles=handles, loc="outside lower center", ncols=len(handles), fontsize=8, frameon=False)
    fig.suptitle("Claim 6: upper tail of the concurrent-writer count against independent phases")

    ratio_fig = new_figure(figsize=(5.6 * len(loads), 4.6), layout="constrained")
    ratio_axes = np.atleast_1d(ratio_fig.subplots(1, len(loads), sharey=True))
    colors = [colormaps["viridis"](x) for x in np.linspace(0.0, 0.9, len(n_jobs_list))]
    for ax, load in zip(ratio_axes, loads):
        for color, n_jobs in zip(colors, n_jobs_list):
            cell = cells[(n_jobs, load)]
            usable = cell["usable_levels"]
            if usable.size == 0:
                continue
            low, high = cell["tail_ratio_ci"]
            ax.errorbar(
                usable / n_jobs,
                cell["tail_ratio"][usable],
                yerr=[cell["tail_ratio"][usable] - low[usable], high[usable] - cell["tail_ratio"][usable]],
                color=color,
                marker="o",
                ms=3,
                capsize=2,
                label=f"N = {n_jobs}",
            )
            top = cell["top_levels"]
            ax.plot(top / n_jobs, cell["tail_ratio"][top], "o", ms=8, mfc="none", mec=color)
        ax.axhline(1.0, color="0.4", lw=0.8, label="×1: as heavy as independent phases")
        ax.axhline(MIN_TAIL_RATIO, color="tab:red", lw=0.9, ls="--", label=f"margin ×{MIN_TAIL_RATIO:g}")
        ax.set_yscale("log")
        ax.set_xlabel(f"k / N (levels above the mean with ≥ {MIN_EXCURSIONS} excursions)")
        ax.set_title(f"ρ = {load:g}")
        ax.grid(True, which="both", alpha=0.3)
    ratio_axes[0].set_ylabel("tail ratio P(n_w ≥ k) / P_binomial(n_w ≥ k)")
    handles, labels = ratio_axes[0].get_legend_handles_labels()
    handles.append(
        Line2D([], [], color="0.3", marker="o", ms=8, mfc="none", ls="none", label="levels the verdict uses")
    )
    ratio_fig.legend(handles=handles, loc="outside lower center", ncols=len(handles), fontsize=8, frameon=False)
    ratio_fig.suptitle(
        f"Claim 6: tail ratio against independent phases ({rules.CONFIDENCE:.0%} bootstrap interval over fleets)"
    )
    return fig, ratio_fig


@in_float64
def run(out_dir, size: str = "quick", progress: bool = True) -> dict:
    """Measures writer-count tails of random launches against binomial baselines.

    Args:
      out_dir: directory for ``bursts.json`` and the PNG figures.
      size: "smoke", "quick" or "full" (fleet sizes, fleets per cell, cycles).
      progress: show the simulator's progress bar on long runs.

    Returns:
      The result dict written to ``out_dir/bursts.json``.
    """
    out_dir, size, config, started = begin(out_dir, size, SIZES)
    rng = np.random.default_rng(6)
    cells, per_cell = _measure_cells(config, rng, progress)
    figures = [
        save_figure(fig, out_dir / name)
        for fig, name in zip(_figures(cells, config["n_jobs"], LOADS), (f"{NAME}_tails.png", f"{NAME}_ratio.png"))
    ]
    outcome = rules.combine(c["outcome"] for c in per_cell)
    counts = {kind: sum(c["outcome"] == kind for c in per_cell) for kind in {c["outcome"] for c in per_cell}}
    smallest = min(
        (c for c in per_cell if c["top_levels"].size), key=lambda c: c["top_ratio_lower"].min(), default=None
    )
    headline = (
        f"tail ratio at the top levels ≥ ×{fmt(smallest['top_ratio_lower'].min(), 2)} (lower interval end; "
        f"margin ×{MIN_TAIL_RATIO:g}); {counts.get(REPRODUCED, 0)} of {len(per_cell)} cells"
        if smallest is not None
        else "no usable level"
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
            _why(per_cell, config, counts, smallest),
            title="the writer count's upper tail is heavier than for independent phases",
            headline=headline,
            rule=_rule(),
            thresholds=dict(
                MIN_TAIL_RATIO=MIN_TAIL_RATIO,
                TOP_LEVELS=TOP_LEVELS,
                MIN_EXCURSIONS=MIN_EXCURSIONS,
                CONFIDENCE=rules.CONFIDENCE,
            ),
            figures=figures,
            table=_table(per_cell),
            cells=len(per_cell),
            cell_outcomes=[c["outcome"] for c in per_cell],
            top_ratios={f"N={c['n_jobs']},rho={c['load']}": c["top_ratios"] for c in per_cell},
        )
    ]
    return finish(out_dir, EXPERIMENT, size, numbers, verdicts, figures)


def _measure_cells(config: dict, rng, progress: bool) -> tuple[dict, list]:
    """``(cells, per_cell)``: per (N, ρ) the writer-count distribution's tail against the
    binomial baselines, and the cells' JSON summaries in order."""
    cells, per_cell = {}, []
    for n_jobs in config["n_jobs"]:
        fleet = _identical_fleets(n_jobs, LOADS, config["fleets"])
        state = random_state(fleet, jax.random.key(6000 + n_jobs))
        trace = simulate(fleet, state, config["cycles"], progress=progress, save=WRITERS_ONLY)
        ok = np.asarray(trace.ok)
        writers = trace.writers
        assert writers is not None  # saved: WRITERS_ONLY
        # writer_distribution of the trace: time at each count over the window's length
        # (NaN where a fleet has no window, as there).
        window = np.asarray(writers.window)
        with np.errstate(invalid="ignore", divide="ignore"):
            dist = np.asarray(writers.time) / (window[..., 1] - window[..., 0])[..., None]
        excursions = np.asarray(writers.excursions)[..., 1:].astype(np.int64)  # levels k = 1..N
        for index, load in enumerate(LOADS):
            usable = ok[index] & np.all(np.isfinite(dist[index]), axis=-1)
            cell = _cell(dist[index][usable], excursions[index][usable], config["bootstrap"], rng)
            cells[(n_jobs, load)] = cell
            per_cell.append(
                dict(n_jobs=n_jobs, load=load, fleets=int(usable.sum()), failed_runs=int((~ok[index]).sum()), **cell)
            )
    return cells, per_cell


def _where(c) -> str:
    return f"N = {c['n_jobs']}, ρ = {c['load']:g}"


def _why(per_cell: list, config: dict, counts: dict, smallest) -> str:
    """The verdict in prose: the cells' outcomes, the least heavy tail, and the cells not
    shown to exceed the margin at every top level."""
    short = [c for c in per_cell if c["outcome"] != REPRODUCED]
    return (
        f"{len(per_cell)} cells (N = {fmt_list(config['n_jobs'])}; ρ = {fmt_list(LOADS)}), {config['fleets']} fleets × "
        f"{config['cycles']} cycles each; at each cell's top {TOP_LEVELS} levels above the mean with at least "
        f"{MIN_EXCURSIONS} excursions, the tail ratio P(n_w ≥ k) / P_binomial(n_w ≥ k): "
        + ", ".join(f"{n} {kind}" for kind, n in sorted(counts.items()))
        + ". "
        + (
            f"The least heavy tail is at {_where(smallest)}: its interval at level k = "
            f"{smallest['top_levels'][int(np.argmin(smallest['top_ratio_lower']))]} starts at "
            f"×{fmt(smallest['top_ratio_lower'].min(), 2)}. "
            if smallest is not None
            else ""
        )
        + (
            f"Cells not shown to exceed ×{MIN_TAIL_RATIO:g} at every top level: "
            + "; ".join(
                f"{_where(c)}: "
                + (", ".join(f"k = {k} {o}" for k, o in zip(c["top_levels"], c["level_outcomes"])) or "no usable level")
                for c in short
            )
            + "."
            if short
            else f"Every top level of every cell is more than ×{MIN_TAIL_RATIO:g} heavier than binomial."
        )
    )


def _rule() -> str:
    """The decision rule in words."""
    return (
        f"at each of a cell's top {TOP_LEVELS} levels k above the mean writer count that the ensemble reaches at least "
        f"{MIN_EXCURSIONS} times, the {rules.CONFIDENCE:.0%} bootstrap interval (over fleets) of the tail ratio must "
        f"lie above ×{MIN_TAIL_RATIO:g} (reproduced); wholly below: not reproduced; straddling: inconclusive. Levels, "
        "then cells, combine by the rule above."
    )


def _table(per_cell: list) -> dict:
    """The report's table: per cell and top level the tail ratio, its interval and verdict."""
    rows = []
    for c in per_cell:
        for k, ratio, low, high, o in zip(
            c["top_levels"], c["top_ratios"], c["top_ratio_lower"], c["top_ratio_upper"], c["level_outcomes"]
        ):
            rows.append(
                [
                    str(c["n_jobs"]),
                    fmt(c["load"]),
                    fmt(c["writing_fraction"]),
                    str(int(k)),
                    f"×{fmt(ratio, 3)}",
                    f"×{fmt(low, 3)} to ×{fmt(high, 3)}",
                    o,
                ]
            )
        if not c["top_levels"].size:
            rows.append([str(c["n_jobs"]), fmt(c["load"]), fmt(c["writing_fraction"]), "none", "-", "-", INCONCLUSIVE])
    return dict(columns=["N", "ρ", "writing fraction p̄", "level k", "tail ratio", "interval", "verdict"], rows=rows)


EXPERIMENT = Experiment(
    name=NAME,
    title="the upper tail of the writer count against Binomial(N, p)",
    claims=CLAIMS,
    sizes=SIZES,
    run=run,
)
