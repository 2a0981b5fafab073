"""Claims 3 and 4: what identical fleets can never change.

Claim 3 (Prop 14): identical jobs never overtake and never merge. Ensembles of random
launches are simulated for hundreds of cycles; for each fleet all firings are sorted by
time and mapped to job ids, which must be one permutation repeated (the cyclic firing order
is kept), and the smallest time between two distinct jobs' firings, relative to the period,
must stay positive (no merger). Fleets mix storage contention, nonlinear f and a binding
power cap, since the claim only needs anonymous rates.

Claim 4 (Prop 16): in the deterministic, uncapped model a staggered fleet whose write
windows never overlap (N·d < T + d; evenly or randomly staggered) stays collision-free,
and launches that start overlapping never become collision-free: every block of N
consecutive write windows (one round of firings) still contains an overlap.

Fleets of different N are padded into shared batches (`Fleet(active=...)`) so the engine
compiles once per (slot count, cycles) pair rather than once per N.

**Why the trace** (not `SaveAt` observers): claim 3 needs the sequence of job ids in firing
order and claim 4 the overlap of consecutive write windows in blocks of N, neither of which
an observer keeps (the gaps observer's smallest gap is not the order, the writers
observer's counts do not say which round of firings an overlap was in).
"""

from __future__ import annotations

import time
from collections import defaultdict
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .. import Fleet, State, random_state, simulate, state_from_positions, throughput_table
from .framework import (
    NOT_REPRODUCED,
    REPRODUCED,
    Experiment,
    begin,
    finish,
    fmt_list,
    in_float64,
    new_figure,
    save_figure,
    verdict,
)

NAME = "invariants"
CLAIMS = (3, 4)

COMPUTE = 10.0  # T
LOAD = 1.0  # random launches: ρ = N d / (T + d) = 1, so writes of a random launch overlap
STAGGER_FILL = 0.8  # staggered fleets: N d = 0.8 (T + d), leaving a margin between windows
# Random-launch conditions (throughput, cap as a fraction of N); the fleets of each N are
# split evenly among them. Claim 4 is stated for the uncapped model, so only uncapped
# fleets enter its statistics.
RANDOM_CONDITIONS = (("shared", None), ("sqrt", None), ("linear", 0.5), ("shared", 0.5))
STAGGER_THROUGHPUTS = ("shared", "sqrt")
OVERLAP_RTOL = 1e-9  # two windows overlap if one ends more than this · (T + d) after the next starts

SIZES = {
    "smoke": dict(n_jobs=(4,), fleets=8, cycles=50, groups=(4,), stagger_fleets=4, stagger_cycles=50),
    "quick": dict(n_jobs=(4, 16, 64), fleets=64, cycles=500, groups=(16, 64), stagger_fleets=8, stagger_cycles=1000),
    "full": dict(
        n_jobs=(4, 16, 64, 256), fleets=256, cycles=2000, groups=(16, 64, 256), stagger_fleets=16, stagger_cycles=4000
    ),
}


def _spec(kind, n_jobs, throughput, cap, write, positions=None):
    return dict(kind=kind, n_jobs=n_jobs, throughput=throughput, cap=cap, write=write, positions=positions)


def _random_specs(n_jobs, fleets):
    write = LOAD * COMPUTE / (n_jobs - LOAD)  # ρ = N d / (T + d)
    specs = []
    for b in range(fleets):
        throughput, cap_fraction = RANDOM_CONDITIONS[b % len(RANDOM_CONDITIONS)]
        cap = None if cap_fraction is None else cap_fraction * n_jobs
        specs.append(_spec("random", n_jobs, throughput, cap, write))
    return specs


def _stagger_specs(n_jobs, fleets, rng):
    """Collision-free launches: half evenly staggered, half with random spacings ≥ d."""
    write = STAGGER_FILL * COMPUTE / (n_jobs - STAGGER_FILL)  # N d = fill (T + d)
    cycle = COMPUTE + write
    slack = cycle - n_jobs * write
    specs = []
    for b in range(fleets):
        if b < fleets // 2:
            spacing = np.full(n_jobs - 1, cycle / n_jobs)
        else:
            cuts = np.sort(rng.uniform(0, slack, n_jobs))
            spacing = write + np.diff(cuts)  # N − 1 spacings; the rest of the slack closes the cycle
        positions = np.concatenate([[0.0], np.cumsum(spacing)])
        positions = (cycle - positions) % cycle  # job j fires after job j − 1, one spacing later
        kind = "even" if b < fleets // 2 else "random stagger"
        specs.append(_spec(kind, n_jobs, STAGGER_THROUGHPUTS[b % len(STAGGER_THROUGHPUTS)], None, write, positions))
    return specs


def _simulate_group(specs, slots, cycles, key, progress):
    """Simulates padded fleets of one slot count; returns per-fleet (fire, end) of the active jobs."""
    count = len(specs)
    compute = np.ones((count, slots))
    write = np.ones((count, slots))
    active = np.zeros((count, slots), bool)
    tables = np.ones((count, slots + 1))
    caps = np.full(count, np.inf)
    for b, s in enumerate(specs):
        n = s["n_jobs"]
        compute[b, :n] = COMPUTE
        write[b, :n] = s["write"]
        active[b, :n] = True
        tables[b, : n + 1] = throughput_table(s["throughput"], n)
        if s["cap"] is not None:
            caps[b] = s["cap"]
    # Fleet takes a finite cap per fleet: 2·slots computing jobs can never exceed it.
    fleet = Fleet(
        compute=compute,
        write=write,
        cap=np.where(np.isfinite(caps), caps, 2.0 * slots),
        throughput=tables,
        active=active,
        dtype=np.float64,
    )
    state = random_state(fleet, key)
    staggered = np.array([s["positions"] is not None for s in specs])
    if staggered.any():
        positions = np.zeros((count, slots))
        for b, s in enumerate(specs):
            if s["positions"] is not None:
                positions[b, : s["n_jobs"]] = s["positions"]
        placed = state_from_positions(fleet, positions)
        rows = staggered[:, None]
        state = State(
            phase=jnp.where(rows, placed.phase, state.phase),
            remaining=jnp.where(rows, placed.remaining, state.remaining),
        )
    trace = simulate(fleet, state, n_fires=cycles, progress=progress)
    fire = np.asarray(trace.fire_times)
    end = np.asarray(trace.end_times)
    ok = np.asarray(trace.ok)
    return [(fire[b, : s["n_jobs"]], end[b, : s["n_jobs"]], bool(ok[b])) for b, s in enumerate(specs)]


def _firing_statistics(fire):
    """Order kept (one permutation repeated), the smallest distinct-job firing gap / period
    over the whole run, and the same in the first and in the last round of N firings."""
    n_jobs, n_fires = fire.shape
    times = fire.T.ravel()
    order = np.argsort(times, kind="stable")
    jobs = np.tile(np.arange(n_jobs), n_fires)[order]
    first = jobs[:n_jobs]
    kept = len(set(first.tolist())) == n_jobs and np.array_equal(jobs, np.tile(first, n_fires))
    sorted_times = times[order]
    distinct = jobs[1:] != jobs[:-1]
    gaps = np.diff(sorted_times)[distinct]
    period = (fire[0, -1] - fire[0, 0]) / (n_fires - 1)
    first_round, last_round = gaps[:n_jobs].min(), gaps[-n_jobs:].min()
    return bool(kept), float(gaps.min() / period), float(first_round / period), float(last_round / period)


def _overlaps(fire, end, cycle):
    """Overlap flag of each sorted write window with the next one, shape (N K − 1,)."""
    order = np.argsort(fire.ravel(), kind="stable")
    starts, ends = fire.ravel()[order], end.ravel()[order]
    # Starts are sorted, so a window overlapping any later one also overlaps the next.
    return ends[:-1] > starts[1:] + OVERLAP_RTOL * cycle


def _collision_free_blocks(overlaps, n_jobs):
    """True for each block of N consecutive windows (a full round) without any overlap."""
    blocks = np.lib.stride_tricks.sliding_window_view(overlaps, n_jobs)
    return ~blocks.any(axis=1)


def _bar_labels(ax, x, values, counts, width, color="black"):
    """Bars of fractions with their value written above; a 0 % bar gets a visible line in
    its bar's ``color`` (so the legend's key can be found in the plot)."""
    for xi, value, count in zip(x, values, counts):
        if np.isnan(value):
            ax.text(xi, 0.02, "n/a", ha="center", fontsize=8)
            continue
        if value == 0:
            ax.plot([xi - width / 2, xi + width / 2], [0, 0], color=color, lw=4, solid_capstyle="butt", clip_on=False)
        ax.text(xi, value + 0.03, f"{value:.0%}\nof {count}", ha="center", fontsize=8)


def _order_figure(random_by_n, stagger_by_n, n_jobs_list, cycles):
    """Claim 3: no merger (smallest firing gap stays > 0) and the cyclic order never changes."""
    from matplotlib.ticker import MaxNLocator

    fig = new_figure(figsize=(11, 4.4), layout="constrained")
    ax_gap, ax_order = fig.subplots(1, 2)
    colors = [f"C{k}" for k in range(len(n_jobs_list))]
    all_gaps = np.concatenate([[r["min_gap"] for r in random_by_n[n]] for n in n_jobs_list])
    low = np.floor(np.log10(max(all_gaps.min(), 1e-18)))
    bins = np.linspace(low, 0, 30)
    for n, color in zip(n_jobs_list, colors):
        gaps = np.log10(np.maximum([r["min_gap"] for r in random_by_n[n]], 1e-18))
        ax_gap.hist(gaps, bins=bins, histtype="step", lw=1.5, color=color, label=f"N = {n}")
    ax_gap.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax_gap.set_xlabel("log10 (smallest gap between two jobs' firings / period)")
    ax_gap.set_ylabel("random launches")
    ax_gap.set_title(f"no merger over {cycles} cycles (a merger would be at −∞)", fontsize=10)
    ax_gap.legend(fontsize=8)

    x = np.arange(len(n_jobs_list))
    fleets = [random_by_n[n] + stagger_by_n[n] for n in n_jobs_list]
    kept = [np.mean([r["order_kept"] for r in group]) for group in fleets]
    ax_order.bar(x, kept, 0.6, color=colors)
    _bar_labels(ax_order, x, kept, [len(g) for g in fleets], 0.6)
    ax_order.set_xticks(x, [f"N = {n}" for n in n_jobs_list])
    ax_order.set_ylim(0, 1.25)
    ax_order.set_ylabel("fraction of fleets (random and staggered)")
    ax_order.set_title("the cyclic firing order never changes", fontsize=10)
    fig.suptitle("Claim 3: identical jobs never overtake and never merge")
    return fig


def _collision_free_figure(random_by_n, stagger_by_n, n_jobs_list, cycles, stagger_cycles):
    """Claim 4: staggers stay collision-free; overlapping launches never become so."""
    fig = new_figure(figsize=(7, 4.6), layout="constrained")
    ax = fig.subplots()
    x = np.arange(len(n_jobs_list))
    width = 0.38
    stay = [np.mean([s["stays_free"] for s in stagger_by_n[n]]) for n in n_jobs_list]
    became, overlapping_counts = [], []
    for n in n_jobs_list:
        overlapping = [r for r in random_by_n[n] if r["uncapped"] and r["starts_overlapping"]]
        overlapping_counts.append(len(overlapping))
        became.append(np.mean([r["becomes_free"] for r in overlapping]) if overlapping else np.nan)
    ax.bar(
        x - width / 2,
        stay,
        width,
        color="tab:green",
        label=f"staggered fleets that stay collision-free ({stagger_cycles} cycles; claim: 100 %)",
    )
    ax.bar(
        x + width / 2,
        np.nan_to_num(became),
        width,
        color="tab:red",
        label=f"overlapping launches that become collision-free ({cycles} cycles; claim: 0 %)",
    )
    _bar_labels(ax, x - width / 2, stay, [len(stagger_by_n[n]) for n in n_jobs_list], width, "tab:green")
    _bar_labels(ax, x + width / 2, became, overlapping_counts, width, "tab:red")
    ax.set_xticks(x, [f"N = {n}" for n in n_jobs_list])
    ax.set_ylim(0, 1.3)
    ax.set_ylabel("fraction of fleets")
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.1), frameon=False)
    fig.suptitle("Claim 4: the collision-free set is invariant and not reached (uncapped)")
    return fig


@in_float64
def run(out_dir, size: str = "quick", progress: bool = True) -> dict:
    """Simulates random and staggered launches and checks claims 3 and 4; writes JSON and a figure.

    Args:
      out_dir: directory for ``invariants.json`` and its two figures.
      size: "smoke", "quick" or "full" (fleet sizes, ensemble sizes, cycles).
      progress: show the engine's progress bars.
    """
    out_dir, size, config, started = begin(out_dir, size, SIZES)
    rng = np.random.default_rng(3)
    n_jobs_list = tuple(config["n_jobs"])
    random_by_n, stagger_by_n, not_ok = _simulate_all(config, rng, progress)
    figure_order = save_figure(
        _order_figure(random_by_n, stagger_by_n, n_jobs_list, config["cycles"]), out_dir / f"{NAME}_order.png"
    )
    figure_free = save_figure(
        _collision_free_figure(random_by_n, stagger_by_n, n_jobs_list, config["cycles"], config["stagger_cycles"]),
        out_dir / f"{NAME}_collision_free.png",
    )
    figures = [figure_order, figure_free]
    per_n = {str(n): _per_n(random_by_n[n], stagger_by_n[n]) for n in n_jobs_list}
    totals = _totals(random_by_n, stagger_by_n, n_jobs_list, not_ok)
    claim3 = _verdict_order(totals, per_n, config, figure_order)
    claim4 = _verdict_collision_free(totals, per_n, config, figure_free)
    numbers = dict(
        compute=COMPUTE,
        random_load=LOAD,
        random_conditions=[dict(throughput=t, cap_over_n=c) for t, c in RANDOM_CONDITIONS],
        stagger_fill=STAGGER_FILL,
        n_jobs=list(n_jobs_list),
        fleets_per_n=config["fleets"],
        cycles=config["cycles"],
        stagger_fleets_per_n=config["stagger_fleets"],
        stagger_cycles=config["stagger_cycles"],
        incomplete_runs=not_ok,
        order_kept_fraction=totals.order_fraction,
        smallest_gap_over_period=totals.smallest_gap,
        stayed_collision_free_fraction=totals.stay_fraction,
        became_collision_free_fraction=totals.became_fraction,
        per_n=per_n,
        seconds=time.perf_counter() - started,
    )
    return finish(out_dir, EXPERIMENT, size, numbers, [claim3, claim4], figures)


def _simulate_all(config: dict, rng, progress: bool):
    """``(random_by_n, stagger_by_n, not_ok)``: per N the records of the random launches and
    of the staggered fleets, and the count of incomplete runs. One simulate call (one
    compiled loop) per (slot count, cycles); random and staggered fleets share a call where
    both agree."""
    n_jobs_list = tuple(config["n_jobs"])
    calls = defaultdict(list)
    for n in n_jobs_list:
        slots = min(g for g in config["groups"] if g >= n)
        for spec in _random_specs(n, config["fleets"]):
            calls[(slots, config["cycles"])].append(spec)
        for spec in _stagger_specs(n, config["stagger_fleets"], rng):
            calls[(max(n_jobs_list), config["stagger_cycles"])].append(spec)

    random_by_n, stagger_by_n = defaultdict(list), defaultdict(list)
    not_ok = 0
    key = jax.random.key(3)
    for index, ((slots, cycles), specs) in enumerate(sorted(calls.items(), key=lambda kv: kv[0])):
        results = _simulate_group(specs, slots, cycles, jax.random.fold_in(key, index), progress)
        for spec, (fire, end, ok) in zip(specs, results):
            not_ok += not ok
            record = _record(spec, fire, end, ok)
            (random_by_n if spec["kind"] == "random" else stagger_by_n)[spec["n_jobs"]].append(record)
    return random_by_n, stagger_by_n, not_ok


def _record(spec: dict, fire, end, ok) -> dict:
    """One fleet's record: its firing order and gaps, and whether it is, becomes or stays
    collision-free."""
    n = spec["n_jobs"]
    cycle = COMPUTE + spec["write"]
    kept, min_gap, first_gap, last_gap = _firing_statistics(fire)
    overlaps = _overlaps(fire, end, cycle)
    free = _collision_free_blocks(overlaps, n)
    record = dict(
        kind=spec["kind"],
        throughput=spec["throughput"],
        cap=spec["cap"],
        ok=ok,
        order_kept=kept,
        min_gap=min_gap,
        first_round_gap=first_gap,
        last_round_gap=last_gap,
    )
    if spec["kind"] == "random":
        record.update(
            uncapped=spec["cap"] is None,
            starts_overlapping=bool(overlaps[:n].any()),
            becomes_free=bool(free.any()),
            stays_free=bool(free.all()),
        )
    else:
        record.update(stays_free=bool(not overlaps.any()), overlapping_windows=int(overlaps.sum()))
    return record


def _per_n(rand: list, stag: list) -> dict:
    """One N's summary of its random launches and staggered fleets."""
    uncapped = [r for r in rand if r["uncapped"]]
    overlapping = [r for r in uncapped if r["starts_overlapping"]]
    free_launches = [r for r in uncapped if not r["starts_overlapping"]]
    return dict(
        random_fleets=len(rand),
        order_kept_fraction=float(np.mean([r["order_kept"] for r in rand])),
        smallest_gap_over_period=float(min(r["min_gap"] for r in rand)),
        median_smallest_gap_over_period=float(np.median([r["min_gap"] for r in rand])),
        # Not a verdict here (claim 5 is experiment 'no_clustering'): the smallest gap of the
        # first and of the last round of N firings, medians over the random launches.
        median_first_round_gap=float(np.median([r["first_round_gap"] for r in rand])),
        median_last_round_gap=float(np.median([r["last_round_gap"] for r in rand])),
        uncapped_overlapping_launches=len(overlapping),
        became_collision_free=int(sum(r["becomes_free"] for r in overlapping)),
        uncapped_collision_free_launches=len(free_launches),
        collision_free_launches_stayed=int(sum(r["stays_free"] for r in free_launches)),
        staggered_fleets=len(stag),
        staggered_stayed_collision_free=int(sum(s["stays_free"] for s in stag)),
        staggered_order_kept=int(sum(s["order_kept"] for s in stag)),
    )


class _Totals(NamedTuple):
    """Over every N: the fleets, the incomplete runs, the fraction that kept its firing
    order, the smallest gap, the uncapped launches that started overlapping or free, and
    the fractions that stayed / became collision-free."""

    all_random: list
    all_stagger: list
    not_ok: int
    order_fraction: float
    smallest_gap: float
    overlapping: list
    free_launches: list
    stay_fraction: float
    became_fraction: float


def _totals(random_by_n, stagger_by_n, n_jobs_list: tuple, not_ok: int) -> _Totals:
    all_random = [r for n in n_jobs_list for r in random_by_n[n]]
    all_stagger = [s for n in n_jobs_list for s in stagger_by_n[n]]
    overlapping = [r for r in all_random if r["uncapped"] and r["starts_overlapping"]]
    free_launches = [r for r in all_random if r["uncapped"] and not r["starts_overlapping"]]
    return _Totals(
        all_random=all_random,
        all_stagger=all_stagger,
        not_ok=not_ok,
        order_fraction=float(np.mean([r["order_kept"] for r in all_random + all_stagger])),
        smallest_gap=float(min(r["min_gap"] for r in all_random)),
        overlapping=overlapping,
        free_launches=free_launches,
        stay_fraction=float(np.mean([s["stays_free"] for s in all_stagger + free_launches])),
        became_fraction=float(np.mean([r["becomes_free"] for r in overlapping])) if overlapping else float("nan"),
    )


def _verdict_order(totals: _Totals, per_n: dict, config: dict, figure: str) -> dict:
    """Claim 3: identical jobs never overtake and never merge."""
    n_random, n_stagger = len(totals.all_random), len(totals.all_stagger)
    order_fraction, smallest_gap, not_ok = totals.order_fraction, totals.smallest_gap, totals.not_ok
    claim3_ok = not_ok == 0 and order_fraction == 1.0 and smallest_gap > 0
    return verdict(
        3,
        REPRODUCED if claim3_ok else NOT_REPRODUCED,
        f"{n_random} random launches (N = {fmt_list(config['n_jobs'])}, {config['cycles']} cycles; f ≡ 1, f = √n, "
        f"and a binding cap C = N/2) and {n_stagger} staggered fleets: {order_fraction:.1%} kept their cyclic "
        f"firing order (threshold 100 %); the smallest firing gap between two jobs is {smallest_gap:.2e} of the "
        f"period (threshold > 0: no merger); {not_ok} runs incomplete.",
        title="identical jobs never overtake and never merge",
        headline=f"order kept in {order_fraction:.0%} of {n_random + n_stagger} fleets; smallest gap "
        f"{smallest_gap:.1e} of the period",
        rule="reproduced if every run completes, every fleet repeats one firing permutation, and the smallest "
        "firing gap between distinct jobs stays > 0; not reproduced otherwise.",
        thresholds=dict(OVERLAP_RTOL=OVERLAP_RTOL),
        figures=[figure],
        table=dict(
            columns=["N", "random launches", "order kept", "smallest gap / period", "median smallest gap / period"],
            rows=[
                [
                    n,
                    str(v["random_fleets"]),
                    f"{v['order_kept_fraction']:.0%}",
                    f"{v['smallest_gap_over_period']:.1e}",
                    f"{v['median_smallest_gap_over_period']:.1e}",
                ]
                for n, v in per_n.items()
            ],
        ),
        order_kept_fraction=order_fraction,
        smallest_gap_over_period=smallest_gap,
        incomplete_runs=not_ok,
    )


def _verdict_collision_free(totals: _Totals, per_n: dict, config: dict, figure: str) -> dict:
    """Claim 4: collision-free configurations stay so and are not reached from outside."""
    n_stagger, n_free, n_overlapping = len(totals.all_stagger), len(totals.free_launches), len(totals.overlapping)
    stay_fraction, became_fraction = totals.stay_fraction, totals.became_fraction
    claim4_ok = totals.not_ok == 0 and stay_fraction == 1.0 and bool(totals.overlapping) and became_fraction == 0.0
    return verdict(
        4,
        REPRODUCED if claim4_ok else NOT_REPRODUCED,
        f"{n_stagger} staggered fleets (N d = {STAGGER_FILL:g} (T + d), {config['stagger_cycles']} cycles) and "
        f"{n_free} random launches that started collision-free: {stay_fraction:.1%} stayed collision-free "
        f"(threshold 100 %). Of {n_overlapping} uncapped random launches that started overlapping, "
        f"{became_fraction:.1%} ever had a collision-free round of N windows (threshold 0 %, over "
        f"{config['cycles']} cycles).",
        title="collision-free configurations stay so and are not reached from outside",
        headline=f"{stay_fraction:.0%} of {n_stagger + n_free} collision-free fleets stayed so; "
        f"{became_fraction:.0%} of {n_overlapping} overlapping launches became so",
        rule="reproduced if every run completes, every collision-free fleet stays collision-free, and no uncapped "
        "launch that starts overlapping ever has a collision-free round of N windows; not reproduced otherwise.",
        thresholds=dict(OVERLAP_RTOL=OVERLAP_RTOL, STAGGER_FILL=STAGGER_FILL),
        figures=[figure],
        table=dict(
            columns=["N", "staggered fleets stayed collision-free", "overlapping launches became collision-free"],
            rows=[
                [
                    n,
                    f"{v['staggered_stayed_collision_free']} of {v['staggered_fleets']}",
                    f"{v['became_collision_free']} of {v['uncapped_overlapping_launches']}",
                ]
                for n, v in per_n.items()
            ],
        ),
        stayed_collision_free_fraction=stay_fraction,
        became_collision_free_fraction=became_fraction,
        overlapping_launches=n_overlapping,
        staggered_fleets=n_stagger,
    )


EXPERIMENT = Experiment(
    name=NAME,
    title="what identical fleets never change: firing order, collision-free sets",
    claims=CLAIMS,
    sizes=SIZES,
    run=run,
)
