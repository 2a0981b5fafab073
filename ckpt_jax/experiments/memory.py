"""Claim 5, last part: a single trajectory keeps no memory of its launch beyond the firing order.

Ensembles of fleets of N identical jobs under storage contention (f ≡ 1, uncapped; solo
cycle T + d = 1, load ρ = N d / (T + d), so d = ρ / N) are launched at independent uniformly
random cycle positions (`ckpt_jax.random_state`) and simulated exactly.

**Lags.** At job 0's k-th firing t_0(k) (the Poincaré section of docs/model.md §2), job j's lag is
the fraction of job 0's current cycle that passes before j fires,

    lag_j(k) = (t_j − t_0(k)) / (t_0(k + 1) − t_0(k)),   t_j = j's first firing after t_0(k),

i.e. its section coordinate u_j (exactly a time, uncapped) over the return time. Identical
jobs keep their cyclic firing order (claim 3), so every job fires exactly once in
(t_0(k), t_0(k + 1)]: the pairing is j's firing number k + m_j, where m_j ∈ {0, 1} counts
j's firings at or before t_0(0). `section_lags` checks that pairing at every cycle and
counts violations. Lags lie in (0, 1) and their ranks are the firing order after job 0.
Normalising by job 0's own return time rather than by the mean period keeps that
ordering exact (a mean-period lag can wrap around when one cycle runs long); the
mean-period version, ((t_j − t_0(k)) / P) mod 1, is recorded as a cross-check.

**Statistic.** R(k) = mean over launches and jobs j ≥ 1 of cos 2π(lag_j(k) − lag_j(0));
R(0) = 1, and R stays 1 for a trajectory that keeps its launch.

**Order-only baseline.** What R(k) would be if the state at cycle k remembered nothing of
the launch but the firing order: pair launch b with an independent launch b' of the same
ensemble, sort b′'s lags at the same cycle k, and give the r-th smallest to the job of
rank r in b (jobs are identical and rates anonymous, so relabelling b′ to b's order
changes nothing in its dynamics, and the sorted lags of a random launch are independent
of its labels). R_base(k) is the same cosine statistic between those rank-matched lags and
b's lag_j(0), averaged over `BASELINE_PARTNERS` partners b' = b + s per launch. It is
computed from the simulated launches, not from a formula, and does not assume the
dynamics keeps the launch distribution. With the partner's lags at its own cycle 0 (a fresh
launch with the same order, as launched) it is R_base(0), recorded as ``r_base_start``; the
end excess against that constant is recorded too.

**Control.** Collision-free staggered fleets (ρ < 1 only: random circular firing gaps
d + (1 − ρ)·w, w a margin-floored Dirichlet draw, random labels) never interact
(claim 4), so their lags never move and R stays 1: the statistic can show memory.

**Verdict** (an equivalence rule: the claim is one of *no effect*, so the data must be able
to show an effect). The effect of a cell (N, ρ) is the launch memory left beyond the firing
order late in the run: the mean of R(k) − R_base(k) over the last `LATE_FRACTION` of the
cycles, averaged per launch, with a bootstrap interval over launches. The cell reproduces
the claim when the whole `rules.CONFIDENCE` interval lies inside ±`MEMORY_MARGIN`, is not
reproduced when it lies wholly outside, and is inconclusive when it straddles an edge.
Cells combine by `rules.combine`. A control whose R(K) falls below `CONTROL_MIN_R` (the
statistic could not have shown memory) turns "reproduced" into "inconclusive". Each cell's
power (the narrowest margin it supports, the smallest memory it would detect) is recorded.
The decay time is the first k at which R(k) − R_base(k) falls below half of its initial
value 1 − R_base(0); as R(k) can ring around the baseline, the settling time (from which on
|R − R_base| stays below that half) and the excess at the last cycle are recorded too
(diagnostics, not part of the verdict).

**Why the trace** (not `SaveAt` observers): the lags pair each job's firing times with job
0's k-th firing, per job and cycle; no observer keeps per-job firing times (the gaps
observer keeps one smallest gap per cycle, the jobs observer totals per job). Memory stays
small: at size full (N ≤ 32, 3 loads × 2,000 launches, K = 503) a run needs
6 · N · K · 8 B ≈ 0.77 MB per fleet, ≈ 4.6 GB.
"""

from __future__ import annotations

import time

import jax
import numpy as np

from .. import Fleet, initial_state, random_state, simulate, state_from_positions
from . import rules
from .framework import (
    INCONCLUSIVE,
    REPRODUCED,
    Experiment,
    begin,
    finish,
    fmt,
    fmt_interval,
    fmt_list,
    identical_fleets,
    in_float64,
    new_figure,
    save_figure,
    verdict,
)

NAME = "memory"
CLAIMS = (5,)

LOADS = (0.5, 1.0, 2.0)  # ρ: storage idle half the time; exactly saturated; oversubscribed twice
CONTROL_MARGIN = 0.5  # share of the slack 1 − ρ spread evenly over the gaps of a staggered fleet

# Verdict thresholds (named in the report). The margin is the tolerance floor fixed before
# any data were seen (0.02 of the cosine statistic, whose launch value is 1).
MEMORY_MARGIN = 0.02  # equivalence margin on the late mean of R(k) − R_base(k)
LATE_FRACTION = 0.1  # the effect is averaged over this last fraction of the cycles
CONTROL_MIN_R = 0.99  # a staggered control must keep R(K) at least this high
BASELINE_PARTNERS = 16  # independent launches paired with each launch for R_base

SIZES = {
    "smoke": dict(n_jobs=(8,), launches=24, cycles=30, bootstrap=100),
    "quick": dict(n_jobs=(8, 16), launches=1000, cycles=300, bootstrap=400),
    "full": dict(n_jobs=(8, 16, 32), launches=2000, cycles=500, bootstrap=1000),
}


def section_lags(fire_times, cycles: int):
    """Each job's lag behind job 0 at job 0's firings k = 0..cycles (docs/model.md §2 section).

    Args:
      fire_times: (..., N, K) firing times of fleets of identical jobs, K ≥ cycles + 3.
      cycles: last section index to return.

    Returns:
      ``(lags, mean_period_lags, consistent)``: (..., N − 1, cycles + 1) lags of jobs 1..N−1
      as fractions of job 0's current return time, the same lags as ((t_j − t_0) / P) mod 1
      with P the fleet's mean period (job 0's), and a (...,) bool mask of the fleets where
      every paired firing lies in (t_0(k), t_0(k + 1)] — one firing per job per cycle (claim 3).
    """
    fire = np.asarray(fire_times, dtype=np.float64)
    if fire.shape[-1] < cycles + 3:
        raise ValueError(f"need K ≥ cycles + 3 = {cycles + 3} firings per job, got {fire.shape[-1]}")
    reference = fire[..., 0, :]  # (..., K) job 0's firings
    others = fire[..., 1:, :]  # (..., N − 1, K)
    # m_j: j's firings at or before job 0's first; then j's (k + m_j)-th follows t_0(k).
    offset = np.sum(others <= reference[..., None, :1], axis=-1)  # (..., N − 1)
    section = np.arange(cycles + 1)
    index = np.minimum(offset[..., None] + section, fire.shape[-1] - 1)
    paired = np.take_along_axis(others, index, axis=-1)  # (..., N − 1, cycles + 1)
    start = reference[..., None, : cycles + 1]
    stop = reference[..., None, 1 : cycles + 2]
    consistent = np.all((offset <= 1)[..., None] & (paired > start) & (paired <= stop), axis=(-2, -1))
    lags = (paired - start) / (stop - start)
    period = (reference[..., -1] - reference[..., 0]) / (fire.shape[-1] - 1)
    mean_period_lags = np.mod((paired - start) / period[..., None, None], 1.0)
    return lags, mean_period_lags, consistent


def memory_curve(lags) -> np.ndarray:
    """Per-launch R(k): mean over jobs of cos 2π(lag_j(k) − lag_j(0)); lags (B, N − 1, K') → (B, K')."""
    return np.mean(np.cos(2 * np.pi * (lags - lags[..., :1])), axis=-2)


def order_only_curve(lags, partners: int) -> np.ndarray:
    """Per-launch order-only baseline: partner launches' sorted lags given to b's ranks.

    Args:
      lags: (B, N − 1, K') section lags of B independent launches.
      partners: number of partners b' = b + s (mod B), s = 1..partners, per launch.

    Returns:
      (B, K') the cosine statistic between lag_j(0) of b and the rank-matched partner lags
      at the same cycle k; at k = 0 it is a fresh launch with the same firing order.
    """
    launches = lags.shape[0]
    partners = min(partners, launches - 1)
    ranks = np.argsort(np.argsort(lags[..., 0], axis=-1), axis=-1)  # (B, N − 1) firing order after job 0
    ordered = np.sort(lags, axis=-2)  # r-th smallest lag of each launch and cycle
    same_cycle = np.zeros(lags.shape[::2])
    for shift in range(1, partners + 1):
        partner = np.roll(ordered, -shift, axis=0)
        matched = np.take_along_axis(partner, ranks[..., None], axis=-2)  # (B, N − 1, K')
        cosine = np.cos(2 * np.pi * (matched - lags[..., :1]))
        same_cycle += np.mean(cosine, axis=-2)
    return same_cycle / partners


def bootstrap_interval(values: np.ndarray, n_boot: int, rng: np.random.Generator):
    """Percentile interval (`rules.CONFIDENCE`) and standard error of the mean of (B,) values."""
    draws = rng.integers(0, values.size, (n_boot, values.size))
    means = values[draws].mean(axis=1)
    alpha = (1 - rules.CONFIDENCE) / 2
    low, high = np.quantile(means, [alpha, 1 - alpha])
    return float(low), float(high), float(np.std(means, ddof=1))


def _decay_time(excess: np.ndarray):
    """First k with excess(k) < excess(0) / 2, or None if it never gets there."""
    below = np.flatnonzero(excess < excess[0] / 2)
    return int(below[0]) if below.size else None


def _settle_time(excess: np.ndarray):
    """First k from which |excess| stays below excess(0) / 2 to the end (the decay time
    misses revivals: R(k) can ring around the baseline), or None."""
    outside = np.flatnonzero(np.abs(excess) >= excess[0] / 2)
    settle = int(outside[-1]) + 1 if outside.size else 0
    return settle if settle < excess.size else None


def _fleets(n_jobs: int, loads, launches: int) -> Fleet:
    """Identical fleets at each load (see `experiments.identical_fleets`)."""
    return identical_fleets(n_jobs, loads, launches)


def _staggered_positions(n_jobs: int, load: float, launches: int, rng: np.random.Generator) -> np.ndarray:
    """(launches, N) cycle positions of collision-free fleets: circular firing gaps
    d + (1 − ρ)·w with w ≥ CONTROL_MARGIN / N summing to 1, random labels (needs ρ < 1)."""
    write = load / n_jobs
    share = CONTROL_MARGIN / n_jobs + (1 - CONTROL_MARGIN) * rng.dirichlet(np.ones(n_jobs), launches)
    gaps = write + (1.0 - load) * share  # (launches, N), sum = T + d = 1
    # First firing times in (0, 1): a random start inside the closing gap, then the gaps.
    first = rng.uniform(0.0, 1.0, (launches, 1)) * gaps[:, -1:]
    fire_at = first + np.concatenate([np.zeros((launches, 1)), np.cumsum(gaps[:, :-1], axis=1)], axis=1)
    fire_at = np.take_along_axis(fire_at, np.argsort(rng.random((launches, n_jobs)), axis=1), axis=1)
    # Uncapped and alone on the storage, a job at position θ fires after (T + d) − θ.
    return 1.0 - fire_at


def _launch_states(fleet: Fleet, n_jobs: int, control_loads, launches: int, key, rng):
    """Random launches for every row, replaced by staggered ones in the trailing control rows."""
    random = random_state(fleet, key)
    if not control_loads:
        return random
    rows = len(control_loads)
    positions = np.zeros(fleet.compute.shape)
    for index, load in enumerate(control_loads):
        positions[-rows + index] = _staggered_positions(n_jobs, load, launches, rng)
    staggered = state_from_positions(fleet, positions)
    phase = np.asarray(random.phase).copy()
    remaining = np.asarray(random.remaining).copy()
    phase[-rows:] = np.asarray(staggered.phase)[-rows:]
    remaining[-rows:] = np.asarray(staggered.remaining)[-rows:]
    return initial_state(fleet, phase=phase, remaining=remaining)


def cell_verdict(low: float, high: float) -> str:
    """A cell's verdict from the interval of its late memory R − R_base (two-sided margin)."""
    return rules.interval_verdict(low, high, -MEMORY_MARGIN, MEMORY_MARGIN)


def _cell(lags, mean_period_lags, consistent, ok, partners, n_boot, rng) -> dict:
    usable = ok & consistent
    lags, mean_period_lags = lags[usable], mean_period_lags[usable]
    per_launch = memory_curve(lags)
    base_same = order_only_curve(lags, partners)
    curve, baseline = per_launch.mean(axis=0), base_same.mean(axis=0)
    excess = curve - baseline
    late = max(1, int(round(LATE_FRACTION * excess.size)))
    late_per_launch = np.mean(per_launch[:, -late:] - base_same[:, -late:], axis=1)
    low, high, se = bootstrap_interval(late_per_launch, n_boot, rng)
    outcome = cell_verdict(low, high)
    late_mean = float(late_per_launch.mean())
    return dict(
        launches=int(usable.sum()),
        failed_runs=int((~ok).sum()),
        pairing_violations=int((ok & ~consistent).sum()),
        late_cycles=late,
        late_excess_mean=late_mean,
        late_excess_ci=[low, high],
        late_excess_se=se,
        late_excess_z=late_mean / se if se > 0 else float("nan"),
        outcome=outcome,
        passed=outcome == REPRODUCED,
        # Power: the narrowest margin this cell supports with rules.POWER, the smallest
        # memory it would flag as "not reproduced", the power to conclude "no memory" if
        # there is none, and the launches the margin needs.
        supported_margin=rules.smallest_supported_margin(se),
        detectable_memory=rules.smallest_detectable_effect(se, MEMORY_MARGIN),
        power_if_no_memory=rules.equivalence_power(se, -MEMORY_MARGIN, MEMORY_MARGIN),
        launches_needed=rules.launches_needed(se, int(usable.sum()), MEMORY_MARGIN),
        r_base_start=float(baseline[0]),
        launch_memory=float(1.0 - baseline[0]),
        late_excess_fraction_of_launch=late_mean / float(1.0 - baseline[0]),
        r_end=float(curve[-1]),
        r_base_end=float(baseline[-1]),
        excess_end=float(excess[-1]),
        excess_end_vs_launch_baseline=float(curve[-1] - baseline[0]),
        r_end_mean_period=float(memory_curve(mean_period_lags)[:, -1].mean()),
        decay_cycles=_decay_time(excess),
        settle_cycles=_settle_time(excess),
        late_excess_max_abs=float(np.abs(excess[-late:]).max()),
        curve=curve,
        baseline=baseline,
        excess=excess,
    )


def _figure(cells, controls, loads, n_jobs_list, cycles, launches):
    from matplotlib.lines import Line2D

    fig = new_figure(figsize=(4.3 * len(loads), 3.2 * len(n_jobs_list) + 0.8), layout="constrained")
    axes = np.asarray(fig.subplots(len(n_jobs_list), len(loads), sharex=True, sharey=True, squeeze=False))
    for row, n_jobs in enumerate(n_jobs_list):
        for column, load in enumerate(loads):
            ax, cell = axes[row, column], cells[(n_jobs, load)]
            x = np.arange(cell["curve"].size)
            ax.plot(x, cell["baseline"], color="tab:orange", lw=1.4)
            ax.plot(x, cell["curve"], color="tab:blue", lw=1.4)
            if (n_jobs, load) in controls:
                # Above the other curves, which start at R = 1 too.
                ax.plot(x, controls[(n_jobs, load)]["curve"], color="black", lw=1.2, ls="--", zorder=3)
            else:
                ax.text(
                    0.98, 0.97, "no control: no collision-free stagger at ρ ≥ 1",
                    transform=ax.transAxes, ha="right", va="top", fontsize=7, color="0.3",
                )  # fmt: skip
            ax.axvspan(x[-1] - cell["late_cycles"] + 1, x[-1], color="0.85", zorder=0)
            low, high = cell["late_excess_ci"]
            ax.set_title(
                f"N = {n_jobs}, ρ = {load:g}: late R − R_base = {cell['late_excess_mean']:+.3f}\n"
                f"interval [{low:+.3f}, {high:+.3f}] → {cell['outcome']}",
                fontsize=9,
            )
            ax.set_xscale("symlog", linthresh=1.0)
            ax.set_xlim(0, x[-1])
            ax.grid(True, alpha=0.3)
            if row == len(n_jobs_list) - 1:
                ax.set_xlabel("cycle k (job 0's firings; symlog axis)")
            if column == 0:
                ax.set_ylabel("R(k) = mean cos 2π(lag(k) − lag(0))")
    axes[0, 0].set_ylim(-0.05, 1.1)  # the control's R = 1 clear of the frame
    handles = [
        Line2D([], [], color="tab:blue", lw=1.4, label="random launches: R(k)"),
        Line2D(
            [], [], color="tab:orange", lw=1.4, label="order-only baseline R_base(k) (remembers only the firing order)"
        ),
        Line2D(
            [],
            [],
            color="black",
            lw=1.2,
            ls="--",
            label="control at ρ < 1: collision-free stagger (keeps its launch, R = 1)",
        ),
        Line2D([], [], color="0.85", lw=8, label=f"last {LATE_FRACTION:.0%} of the cycles: the verdict's window"),
    ]
    fig.legend(handles=handles, loc="outside lower center", ncols=2, fontsize=8, frameon=False)
    fig.suptitle(f"Claim 5, memory: R(k) falls to the order-only baseline ({launches} launches per panel)")
    return fig


def _excess_figure(cells, loads, n_jobs_list, launches, window: int = 9):
    """R(k) − R_base(k) on log axes of k, to show how the last of the memory fades, and beside
    it the verdict's number per load against the margin.

    Thin lines: every cycle; bold: a centred running mean over ``window`` cycles, which
    averages out the ringing of R(k) around the baseline at high load.
    """
    from matplotlib import colormaps
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    colors = [colormaps["plasma"](x) for x in np.linspace(0.0, 0.75, len(loads))]
    fig = new_figure(figsize=(6.4 * len(n_jobs_list), 4.8), layout="constrained")
    grid = fig.add_gridspec(1, 2 * len(n_jobs_list), width_ratios=[4, 1] * len(n_jobs_list))
    shown = [MEMORY_MARGIN * 3]
    pairs = []
    first = None
    for column, n_jobs in enumerate(n_jobs_list):
        ax = fig.add_subplot(grid[0, 2 * column], sharey=first)
        first = first or ax
        verdict_ax = fig.add_subplot(grid[0, 2 * column + 1], sharey=first)
        pairs.append((ax, verdict_ax))
        for index, (color, load) in enumerate(zip(colors, loads)):
            cell = cells[(n_jobs, load)]
            excess = cell["excess"]
            k = np.arange(excess.size)
            ax.plot(k[1:], excess[1:], color=color, lw=0.6, alpha=0.35)
            if excess.size > window:
                smooth = np.convolve(excess, np.ones(window) / window, mode="valid")
                ax.plot(k[window // 2 : window // 2 + smooth.size], smooth, color=color, lw=1.8)
                shown.append(np.abs(smooth[window:]).max(initial=0.0))
            low, high = cell["late_excess_ci"]
            mean = cell["late_excess_mean"]
            verdict_ax.errorbar(
                [index],
                [mean],
                yerr=[[mean - low], [high - mean]],
                color=color,
                marker="D",
                ms=6,
                mec="black",
                capsize=5,
                lw=1.8,
            )
            shown.append(max(abs(low), abs(high)))
        late_start = cells[(n_jobs, loads[0])]["excess"].size - cells[(n_jobs, loads[0])]["late_cycles"]
        ax.axvspan(max(late_start, 1), cells[(n_jobs, loads[0])]["excess"].size - 1, color="0.85", zorder=0)
        for axis in (ax, verdict_ax):
            axis.axhline(0.0, color="black", lw=0.8)
            axis.axhspan(-MEMORY_MARGIN, MEMORY_MARGIN, color="tab:green", alpha=0.15, lw=0)
            axis.grid(True, which="both", alpha=0.25)
        ax.set_xscale("log")
        ax.set_xlabel("cycle k")
        ax.set_title(f"N = {n_jobs}: R(k) − R_base(k) over the run", fontsize=10)
        verdict_ax.set_xticks(range(len(loads)), [f"{load:g}" for load in loads])
        verdict_ax.set_xlim(-0.6, len(loads) - 0.4)
        verdict_ax.set_xlabel("load ρ")
        verdict_ax.set_title("verdict", fontsize=10)
        verdict_ax.tick_params(labelleft=False)
        if column:
            ax.tick_params(labelleft=False)
    limit = 1.15 * max(shown)
    pairs[0][0].set_ylim(-limit, limit)
    pairs[0][0].set_ylabel("R(k) − R_base(k)")
    handles = [Line2D([], [], color=c, lw=1.8, label=f"ρ = {load:g}") for c, load in zip(colors, loads)]
    handles += [
        Line2D([], [], color="0.4", lw=0.6, alpha=0.6, label="every cycle (early cycles run off the axes)"),
        Line2D([], [], color="0.4", lw=1.8, label=f"{window}-cycle running mean"),
        Patch(facecolor="0.85", label=f"last {LATE_FRACTION:.0%} of the cycles"),
        Line2D(
            [],
            [],
            color="0.4",
            marker="D",
            mec="black",
            lw=1.8,
            label=f"verdict: its mean over those cycles, {rules.CONFIDENCE:.0%} interval",
        ),
        Patch(facecolor="tab:green", alpha=0.15, label=f"equivalence margin ± {MEMORY_MARGIN:g}"),
    ]
    fig.legend(handles=handles, loc="outside lower center", ncols=4, fontsize=8, frameon=False)
    fig.suptitle(f"Claim 5, memory: the launch memory left beyond the firing order ({launches} launches per cell)")
    return fig


@in_float64
def run(out_dir, size: str = "quick", progress: bool = True) -> dict:
    """Measures R(k) for random launches per (N, ρ) against the order-only baseline.

    Args:
      out_dir: directory for ``memory.json`` and ``memory.png``.
      size: "smoke", "quick" or "full" (fleet sizes, launches, cycles).
      progress: show the simulator's progress bar on long runs.

    Returns:
      The result dict written to ``out_dir/memory.json``.
    """
    out_dir, size, config, started = begin(out_dir, size, SIZES)
    rng = np.random.default_rng(55)
    cycles, launches = config["cycles"], config["launches"]
    control_loads = tuple(load for load in LOADS if load < 1)
    cells, controls, per_cell, per_control = _measure_cells(config, control_loads, rng, progress)
    figures = [
        save_figure(_figure(cells, controls, LOADS, config["n_jobs"], cycles, launches), out_dir / f"{NAME}.png"),
        save_figure(_excess_figure(cells, LOADS, config["n_jobs"], launches), out_dir / f"{NAME}_excess.png"),
    ]
    controls_hold = all(c["r_end"] >= CONTROL_MIN_R for c in per_control)
    outcome = rules.combine(c["outcome"] for c in per_cell)
    if outcome == REPRODUCED and not controls_hold:
        outcome = INCONCLUSIVE  # the statistic could not have shown memory
    counts = {kind: sum(c["outcome"] == kind for c in per_cell) for kind in {c["outcome"] for c in per_cell}}
    largest = max(per_cell, key=lambda c: abs(c["late_excess_mean"]))
    headline = (
        f"late memory beyond the firing order ≤ {fmt(abs(largest['late_excess_mean']))} "
        f"({_where(largest)}, interval {fmt_interval(*largest['late_excess_ci'])}; margin ±{MEMORY_MARGIN:g}); "
        f"{counts.get(REPRODUCED, 0)} of {len(per_cell)} cells"
    )
    numbers = dict(
        n_jobs=list(config["n_jobs"]),
        loads=list(LOADS),
        control_loads=list(control_loads),
        launches=launches,
        cycles=cycles,
        bootstrap=config["bootstrap"],
        baseline_partners=BASELINE_PARTNERS,
        throughput="shared (f = 1)",
        cap=None,
        cycle_work="T + d = 1, d = rho / N",
        cells=per_cell,
        controls=per_control,
        seconds=time.perf_counter() - started,
    )
    verdicts = [
        verdict(
            5,
            outcome,
            _why(per_cell, per_control, config, counts, largest, controls_hold),
            sub_claim="5 memory",
            title="a trajectory keeps no memory of its launch beyond the firing order",
            headline=headline,
            rule=_rule(),
            thresholds=dict(
                MEMORY_MARGIN=MEMORY_MARGIN,
                LATE_FRACTION=LATE_FRACTION,
                CONTROL_MIN_R=CONTROL_MIN_R,
                CONFIDENCE=rules.CONFIDENCE,
            ),
            figures=figures,
            table=_table(per_cell),
            cells=len(per_cell),
            cell_outcomes=[c["outcome"] for c in per_cell],
            largest_late_excess=largest["late_excess_mean"],
            largest_late_excess_ci=largest["late_excess_ci"],
            late_excess_mean=[c["late_excess_mean"] for c in per_cell],
            late_excess_z=[c["late_excess_z"] for c in per_cell],
            detectable_memory=[c["detectable_memory"] for c in per_cell],
            decay_cycles=[c["decay_cycles"] for c in per_cell],
            control_r_end=[c["r_end"] for c in per_control],
        )
    ]
    return finish(out_dir, EXPERIMENT, size, numbers, verdicts, figures)


def _measure_cells(config: dict, control_loads: tuple, rng, progress: bool):
    """``(cells, controls, per_cell, per_control)``: per (N, ρ) the random launches' cell and
    the staggered control's, and their JSON summaries in order. One batch per N: the
    random-launch rows, then the staggered control rows."""
    cycles, launches = config["cycles"], config["launches"]
    cells, controls, per_cell, per_control = {}, {}, [], []
    for n_jobs in config["n_jobs"]:
        fleet = _fleets(n_jobs, LOADS + control_loads, launches)
        state = _launch_states(fleet, n_jobs, control_loads, launches, jax.random.key(5000 + n_jobs), rng)
        trace = simulate(fleet, state, cycles + 3, progress=progress)
        lags, mean_period_lags, consistent = section_lags(trace.fire_times, cycles)
        ok = np.asarray(trace.ok)
        for row, load in enumerate(LOADS + control_loads):
            cell = _cell(
                lags[row], mean_period_lags[row], consistent[row], ok[row], BASELINE_PARTNERS, config["bootstrap"], rng
            )
            control = row >= len(LOADS)
            (controls if control else cells)[(n_jobs, load)] = cell
            summary = {k: v for k, v in cell.items() if k not in ("curve", "baseline", "excess")}
            summary.update(
                n_jobs=n_jobs,
                load=load,
                r_every_10th_cycle=cell["curve"][::10],
                r_base_every_10th_cycle=cell["baseline"][::10],
            )
            (per_control if control else per_cell).append(summary)
    return cells, controls, per_cell, per_control


def _where(c) -> str:
    return f"N = {c['n_jobs']}, ρ = {c['load']:g}"


def _pair(c) -> str:
    return f"({c['n_jobs']}, {c['load']:g})"


def _why(per_cell: list, per_control: list, config: dict, counts: dict, largest: dict, controls_hold: bool) -> str:
    """The verdict in prose: the cells' outcomes, the largest late memory, the power, the
    controls, and what deciding an inconclusive cell would take."""
    beyond = [c for c in per_cell if c["late_excess_ci"][0] > 0 or c["late_excess_ci"][1] < 0]
    above_margin = [c for c in per_cell if c["outcome"] != REPRODUCED]
    weakest = max(per_cell, key=lambda c: c["detectable_memory"])
    late_cycles = per_cell[0]["late_cycles"]
    why = (
        f"{len(per_cell)} cells (N = {fmt_list(config['n_jobs'])}; ρ = {fmt_list(LOADS)}), {config['launches']} "
        f"random launches × {config['cycles']} cycles each; the launch memory beyond the firing order, R − R_base "
        f"averaged over the last {late_cycles} cycles: "
        + ", ".join(f"{n} {kind}" for kind, n in sorted(counts.items()))
        + f". Largest: {fmt(largest['late_excess_mean'])} at {_where(largest)} (interval "
        f"{fmt_interval(*largest['late_excess_ci'])}, margin ±{MEMORY_MARGIN:g}; the launch itself starts "
        f"{fmt(largest['launch_memory'])} above the baseline). "
        + (
            f"Stated plainly: a small memory beyond the firing order persists to the end of the run at (N, ρ) = "
            f"{fmt_list([_pair(c) for c in beyond])} (interval wholly above 0)"
            + (
                f", and at {fmt_list([_pair(c) for c in above_margin])} it is not shown to be within the margin. "
                if above_margin
                else ", inside the margin. "
            )
            if beyond
            else "No cell's interval excludes 0. "
        )
        + f"Power: every cell would have detected a memory of {fmt(weakest['detectable_memory'])} or more with "
        f"{rules.POWER:.0%} power (weakest: {_where(weakest)}). Collision-free staggered controls end at R(K) = "
        f"{fmt_list([c['r_end'] for c in per_control], 6)} (must stay ≥ {CONTROL_MIN_R:g}"
        + (
            "), so the statistic can show memory."
            if controls_hold
            else "): a control lost its memory, so the statistic "
            "could not have shown any and the verdict is at most inconclusive."
        )
    )
    undecided = [c for c in per_cell if c["outcome"] == INCONCLUSIVE]
    beyond_edge = [c for c in undecided if abs(c["late_excess_mean"]) >= MEMORY_MARGIN]
    within = [c for c in undecided if abs(c["late_excess_mean"]) < MEMORY_MARGIN]
    if beyond_edge:
        why += (
            f" Inconclusive at {fmt_list([_pair(c) for c in beyond_edge])}: the estimate itself lies beyond the "
            "margin, so a larger run would more likely say not reproduced than reproduced."
        )
    if within:
        needed = max(
            rules.launches_to_decide(c["late_excess_se"], c["launches"], MEMORY_MARGIN - abs(c["late_excess_mean"]))
            for c in within
        )
        why += (
            f" Inconclusive at {fmt_list([_pair(c) for c in within])} with the estimate inside the margin but near "
            f"its edge: deciding it needs about {needed:,} launches per cell if the estimate is the truth (size "
            f"full runs {SIZES['full']['launches']:,})."
        )
    return why


def _rule() -> str:
    """The decision rule in words."""
    return (
        f"per cell, the {rules.CONFIDENCE:.0%} bootstrap interval (over launches) of the mean of R(k) − R_base(k) over "
        f"the last {LATE_FRACTION:.0%} of the cycles must lie inside ±{MEMORY_MARGIN:g} (reproduced); wholly outside: "
        f"not reproduced; straddling an edge: inconclusive. Cells combine by the rule above; a staggered control "
        f"with R(K) < {CONTROL_MIN_R:g} caps the verdict at inconclusive."
    )


def _table(per_cell: list) -> dict:
    """The report's table: per cell the launch memory, its decay, the late memory and the power."""
    return dict(
        columns=[
            "N",
            "ρ",
            "launches",
            "launch memory 1 − R_base(0)",
            "half-decay (cycles)",
            "late R − R_base",
            "interval",
            "smallest detectable",
            "power if none",
            "verdict",
        ],
        rows=[
            [
                str(c["n_jobs"]),
                fmt(c["load"]),
                str(c["launches"]),
                fmt(c["launch_memory"]),
                fmt(c["decay_cycles"]),
                f"{c['late_excess_mean']:+.4f}",
                f"[{c['late_excess_ci'][0]:+.4f}, {c['late_excess_ci'][1]:+.4f}]",
                fmt(c["detectable_memory"]),
                f"{c['power_if_no_memory']:.0%}",
                c["outcome"],
            ]
            for c in per_cell
        ],
    )


EXPERIMENT = Experiment(
    name=NAME,
    title="a trajectory keeps no memory of its launch beyond the firing order",
    claims=CLAIMS,
    sizes=SIZES,
    run=run,
)
