"""Claim 12: power steps — the largest drop of a fleet's power draw per cycle, for random
launches against a staggered launch and independent phases, and for two-level checkpoints
with short snapshots against blocking writes.

Fleets of N identical jobs under storage contention (f ≡ 1, uncapped; solo cycle T + d = 1,
load ρ = N d / (T + d)) draw P(t) = Σ_i (w_i while computing, p_idle · w_i otherwise), with
w_i = 1 and p_idle = `IDLE_POWER` (docs/model.md §1d). A job that pauses (fires a blocking
write, or takes a snapshot) drops P by one **job step** (1 − p_idle) · w = 0.7.

**The largest step per cycle.** At one event instant P changes by one job step exactly
(identical jobs launched at random positions never switch at the same instant: claims 3 and 5),
so the step at one instant says nothing about jobs pausing *together*. What an operator fears
is a fall of P that the facility sees as one step: several jobs pausing within a short time.
The experiment measures, within each cycle of job 0 (from its c-th firing to its next), the
largest fall P(t) − P(t′) with t < t′ ≤ t + τ and t′ in the cycle, over a window τ = (T + d)/N
= 1/N, the spacing of a perfect stagger's firings (a perfect stagger at ρ < 1 falls by one
job step in any such window; k jobs pausing within one stagger spacing fall by k). It is
counted in job steps (an integer here: every switch moves P by one job step), and per fleet
averaged over the cycles after `warmup`. The `CycleDrops` observer keeps it inside the event
loop from `EventView.draw` (the draw on the interval before each instant), with the step at
one instant (τ → 0) beside it; `PowerStats` of the same run gives the largest step at one
instant over the run.

Cases, per (N, ρ): (i) random launches (`cj.random_state`); (ii) a staggered launch (cycle
positions i/N, evenly spaced); (iii) independent phases: N non-interacting periodic jobs
with the random launches' measured mean cycle L̄ and writing fraction p̄ (writing D̄ = p̄ L̄
of each cycle), each at an independent uniform phase, so that at every instant the writers
are Binomial(N, p̄) — a Monte-Carlo in NumPy of these independent stationary renewal
processes (`independent_drops`), measured with the same window; (iv) two-level checkpoints
(`Fleet(snapshot=d / 10)`: a job pauses only for its snapshot and for backpressure), launched
by `cj.random_state` (every job computing, at a uniform position of its compute phase).

The scaling with N is a least-squares fit of log(step) on log N per case and load: the
exponent, its standard error from the fit's residuals and its interval from Student's t
(`power_law`, `student_t_quantile`). Ratios carry normal intervals from the standard errors
over fleets (`_ratio`).

**Verdicts** (thresholds below, intervals at `rules.CONFIDENCE`): 12a random launches' step is
no larger than independent phases' (the ratio's interval wholly below `MAX_SYNC_RATIO`);
12b a stagger cuts it (the ratio random / staggered wholly above `MIN_CUT` at every N ≥
`MIN_N`); 12c it grows slower than √N (the random launches' exponent wholly below
`MAX_EXPONENT`: a fleet pausing in step would grow as N); 12d two-level checkpoints with short
snapshots cut it (blocking / two-level wholly above `MIN_CUT` at every N ≥ `MIN_N`); the ratio
of the idle-time fractions is reported beside it.
"""

from __future__ import annotations

import math
import time
from statistics import NormalDist
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .. import Fleet, Observer, SaveAt, initial_state, random_state, simulate, state_from_positions
from . import rules
from .framework import (
    INCONCLUSIVE,
    Experiment,
    begin,
    finish,
    fmt,
    fmt_list,
    in_float64,
    new_figure,
    save_figure,
    verdict,
)

NAME = "power_steps"
CLAIMS = (12,)

# ρ: storage idle half the time, busy 90% of it, oversubscribed twice over. Not ρ = 1 exactly:
# there a perfect stagger's write ends at the instant the next job fires, P never moves, and
# whether it does in the engine hangs on the rounding of those instants.
LOADS = (0.5, 0.9, 2.0)
IDLE_POWER = 0.3  # p_idle: a paused job draws 30% of its full draw
SNAPSHOT_FRACTION = 0.1  # two-level checkpoints: snapshot s = d / 10
RING = 32  # intervals `CycleDrops` remembers (a window reaching further sets its overflow flag)

# Verdict thresholds (named in the report).
MAX_SYNC_RATIO = 1.25  # 12a: random / independent below this: no synchrony beyond chance
MIN_CUT = 1.5  # 12b, 12d: a cut must divide the step by at least this
MIN_N = 16  # 12b, 12d: judged at every N >= this (smaller fleets have little to cut)
MAX_EXPONENT = 0.5  # 12c: slower than √N (a fleet pausing in step grows as N)

# One simulate call per kind at quick size (every N padded to the largest: one compile);
# at full size one call per N and kind. Memory per fleet: the CycleDrops tables
# (K + 1) · (1 + |N|) · 8 B plus the ring 2 · RING · 8 B: about 3 KB at K = 200 (full), and
# the engine's state, ≈ 8 · 16 N bytes (16 KB at N = 128): 2 × 10^3 fleets per call fit easily.
SIZES = {
    "smoke": dict(n_jobs=(4, 8), fleets=4, cycles=12, warmup=4, replicates=400, padded=True),
    "quick": dict(n_jobs=(4, 8, 16, 32, 64), fleets=24, cycles=36, warmup=8, replicates=4000, padded=True),
    "full": dict(n_jobs=(4, 8, 16, 32, 64, 128), fleets=2000, cycles=200, warmup=50, replicates=20_000, padded=False),
}


class CycleDrops(Observer):
    """Per cycle of job 0, the largest fall of the power draw within each window τ, and the
    largest fall at one instant.

    Column c of the tables holds the instants from job 0's c-th firing (c ≥ 1) to its next
    (column 0: before its first firing). A fall within τ at instant t′ (the start of an
    interval of positive length, drawing P′) is max(P − P′) over the levels P held at some
    instant of [t′ − τ, t′), i.e. over the remembered intervals that end after t′ − τ; the
    ring keeps the last `capacity` intervals, and ``overflow`` says where a window needed an
    older one (its values are then NaN).

    Output ``{"within": (B, K + 1, W), "instant": (B, K + 1), "starts": (B, K + 1) time of
    job 0's c-th firing, "complete": (B, K + 1) bool, "overflow": (B, W)}``, NaN where a
    column is not a complete cycle or the run did not complete.
    """

    name = "cycle_drops"

    def __init__(self, windows, cycles: int, capacity: int = RING):
        self.windows = tuple(float(w) for w in windows)
        self.cycles, self.capacity = int(cycles), int(capacity)

    def _key(self):
        return (self.windows, self.cycles, self.capacity)

    def __eq__(self, other):
        return isinstance(other, CycleDrops) and self._key() == other._key()

    def __hash__(self):
        return hash((CycleDrops,) + self._key())

    def init(self, info):
        fleets, dtype = info.n_fleets, info.dtype
        columns, n_windows = self.cycles + 1, len(self.windows)
        return dict(
            ends=jnp.full((fleets, self.capacity), -jnp.inf, dtype),  # end of each remembered interval
            draws=jnp.zeros((fleets, self.capacity), dtype),
            head=jnp.zeros(fleets, jnp.int32),  # the ring's next slot
            last=jnp.full(fleets, jnp.nan, dtype),  # the draw on the latest interval
            count=jnp.zeros(fleets, jnp.int32),  # job 0's firings so far
            instant=jnp.zeros((fleets, columns), dtype),
            within=jnp.zeros((fleets, columns, n_windows), dtype),
            starts=jnp.full((fleets, columns), jnp.nan, dtype),
            overflow=jnp.zeros((fleets, n_windows), bool),
        )

    def update(self, state, view):
        assert view.draw is not None  # SaveAt(power=True) on the general engine
        draw, time = view.draw, view.time
        fleets = jnp.arange(time.shape[0])
        interval = view.running & (view.dt > 0)
        start = time - view.dt
        windows = jnp.asarray(self.windows, draw.dtype)
        reach = state["ends"][:, :, None] > (start[:, None] - windows[None, :])[:, None, :]  # (B, L, W)
        falls = jnp.max(jnp.where(reach, state["draws"][:, :, None] - draw[:, None, None], 0), axis=1)
        instant = jnp.where(jnp.isnan(state["last"]), 0, jnp.maximum(state["last"] - draw, 0))
        oldest = reach[fleets, state["head"]]  # the slot about to be overwritten is still needed
        column = state["count"]  # columns past K are dropped
        within = state["within"].at[fleets, column].max(jnp.where(interval[:, None], falls, 0), mode="drop")
        instants = state["instant"].at[fleets, column].max(jnp.where(interval, instant, 0), mode="drop")
        slot = (jnp.arange(self.capacity)[None, :] == state["head"][:, None]) & interval[:, None]
        # Job 0 fires at `time`, after the interval: the steps of later instants are its new cycle's.
        fires = view.running & jnp.any(view.fired & (view.job == 0), axis=1)
        count = state["count"] + fires.astype(jnp.int32)
        starts = state["starts"].at[fleets, jnp.where(fires, count, self.cycles + 1)].set(time, mode="drop")
        return dict(
            ends=jnp.where(slot, time[:, None], state["ends"]),
            draws=jnp.where(slot, draw[:, None], state["draws"]),
            head=jnp.where(interval, (state["head"] + 1) % self.capacity, state["head"]),
            last=jnp.where(interval, draw, state["last"]),
            count=count,
            instant=instants,
            within=within,
            starts=starts,
            overflow=state["overflow"] | (interval[:, None] & oldest),
        )

    def finalize(self, state, final):
        ok = final.ok if final.ok is not None else jnp.ones(state["count"].shape, bool)
        columns = jnp.arange(self.cycles + 1)[None, :]
        complete = (columns >= 1) & (columns < state["count"][:, None]) & ok[:, None]
        nan = jnp.asarray(jnp.nan, state["within"].dtype)
        return dict(
            within=jnp.where(complete[:, :, None] & ~state["overflow"][:, None, :], state["within"], nan),
            instant=jnp.where(complete, state["instant"], nan),
            starts=state["starts"],
            complete=complete,
            overflow=state["overflow"],
        )


class DrawRecorder(Observer):
    """The draw P on each interval of positive length that ends after ``since``, as
    ``{"ends": (B, E), "draws": (B, E)}`` (the first E such intervals; NaN past them): P(t)
    for a figure, with no trace to rebuild it from."""

    name = "draw_recorder"

    def __init__(self, since: float, capacity: int):
        self.since, self.capacity = float(since), int(capacity)

    def __eq__(self, other):
        return isinstance(other, DrawRecorder) and (self.since, self.capacity) == (other.since, other.capacity)

    def __hash__(self):
        return hash((DrawRecorder, self.since, self.capacity))

    def init(self, info):
        nan = jnp.full((info.n_fleets, self.capacity), jnp.nan, info.dtype)
        return dict(ends=nan, draws=nan, count=jnp.zeros(info.n_fleets, jnp.int32))

    def update(self, state, view):
        fleets = jnp.arange(view.time.shape[0])
        kept = view.running & (view.dt > 0) & (view.time > self.since)
        index = jnp.where(kept, state["count"], self.capacity)
        return dict(
            ends=state["ends"].at[fleets, index].set(view.time, mode="drop"),
            draws=state["draws"].at[fleets, index].set(view.draw, mode="drop"),
            count=state["count"] + kept.astype(jnp.int32),
        )

    def finalize(self, state, final):
        return dict(ends=state["ends"], draws=state["draws"])


def largest_rises(times: np.ndarray, levels: np.ndarray, window: float, lo: np.ndarray) -> np.ndarray:
    """Largest rise of a piecewise-constant count within ``window``, for counts that start
    after ``lo``: max of levels[j] − levels[i] over i ≤ j with the end of interval i (times[i + 1])
    after times[j] − window and times[j] >= lo.

    Args:
      times: (R, E) sorted start times of the intervals (per row), the last one's end implied
        by nothing (it is only ever the later instant).
      levels: (R, E) the count on each interval.
      window: τ.
      lo: (R,) only later instants at or after this count.
    """
    best = np.zeros(times.shape[0])
    ends = np.concatenate([times[:, 1:], np.full((times.shape[0], 1), np.inf)], axis=1)
    counted = times >= lo[:, None]
    lag = 1
    while lag < times.shape[1]:
        reach = ends[:, :-lag] > times[:, lag:] - window
        if not reach.any():
            break
        rise = np.where(reach & counted[:, lag:], levels[:, lag:] - levels[:, :-lag], 0)
        best = np.maximum(best, rise.max(axis=1))
        lag += 1
    return best


def independent_drops(
    n_jobs: int, cycle: float, writing: float, window: float, replicates: int, rng: np.random.Generator
) -> np.ndarray:
    """Monte-Carlo of independent phases: N periodic jobs (period ``cycle``, each writing for
    ``writing`` = p̄ L̄ of it) at independent uniform phases; per replicate, the largest rise of
    the writer count within ``window`` over one period (periodic: every cycle is the same).
    Returns (replicates,) job steps."""
    phase = rng.uniform(0, cycle, (replicates, n_jobs))
    # Two periods of events (firings +1, write ends −1) so every window of the second has its past.
    fires = np.concatenate([phase, phase + cycle, phase + 2 * cycle], axis=1)
    ends = fires + writing
    times = np.concatenate([fires, ends], axis=1)
    steps = np.concatenate([np.ones_like(fires), -np.ones_like(ends)], axis=1)
    order = np.argsort(times, axis=1, kind="stable")
    times = np.take_along_axis(times, order, axis=1)
    levels = np.cumsum(np.take_along_axis(steps, order, axis=1), axis=1)
    return largest_rises(times, levels, window, np.full(replicates, 2 * cycle))


def power_law(n_jobs, values) -> dict:
    """Least-squares fit of log(value) = log(a) + b log N: the exponent b, its standard error
    from the residuals (NaN with fewer than three points) and a."""
    values = np.asarray(values, np.float64)
    if not np.all(values > 0):  # a case that never falls has no power law
        return dict(exponent=float("nan"), se=float("nan"), prefactor=float("nan"), dof=values.size - 2)
    x, y = np.log(np.asarray(n_jobs, np.float64)), np.log(values)
    (slope, intercept), residuals = np.polyfit(x, y, 1), None
    residuals = y - (intercept + slope * x)
    dof = x.size - 2
    se = math.sqrt(residuals @ residuals / dof / np.sum((x - x.mean()) ** 2)) if dof > 0 else float("nan")
    return dict(exponent=float(slope), se=se, prefactor=float(math.exp(intercept)), dof=dof)


def _rows(n_jobs, loads, fleets: int):
    """(N, ρ, replicate) of every fleet of one call, flat."""
    return [(n, load, r) for n in n_jobs for load in loads for r in range(fleets)]


def _fleet(rows, pad: int, two_level: bool) -> Fleet:
    """Identical fleets (T + d = 1, d = ρ / N, f ≡ 1, uncapped) padded to ``pad`` slots."""
    n = np.array([row[0] for row in rows])
    write = np.array([row[1] for row in rows]) / n
    active = np.arange(pad)[None, :] < n[:, None]
    shape = (len(rows), pad)
    write = np.broadcast_to(write[:, None], shape)
    return Fleet(
        compute=1.0 - write,
        write=write,
        active=active,
        idle_power=IDLE_POWER,
        snapshot=SNAPSHOT_FRACTION * write if two_level else None,
        dtype=np.float64,
    )


def blocking_state(fleet: Fleet, staggered: np.ndarray, key):
    """Random launches (`random_state`) and, in the rows ``staggered``, cycle positions i/N."""
    launched = random_state(fleet, key)
    active = np.asarray(fleet.active)
    n = active.sum(axis=1, keepdims=True)
    cycle = np.asarray(fleet.compute) + np.asarray(fleet.write)
    positions = np.where(active, np.arange(active.shape[1])[None, :] / n * cycle, 0.0)
    even = state_from_positions(fleet, positions)
    pick = staggered[:, None]
    return initial_state(
        fleet,
        phase=np.where(pick, np.asarray(even.phase), np.asarray(launched.phase)),
        remaining=np.where(pick, np.asarray(even.remaining), np.asarray(launched.remaining)),
    )


def _simulate(n_jobs, loads, fleets: int, config: dict, two_level: bool, seed: int) -> list[dict]:
    """One call's fleets (blocking: ``fleets`` random launches and one staggered launch per
    (N, ρ); two-level: ``fleets`` launches), measured. Returns one record per fleet."""
    per_cell = fleets if two_level else fleets + 1
    rows = _rows(n_jobs, loads, per_cell)
    fleet = _fleet(rows, max(n_jobs), two_level)
    staggered = np.array([not two_level and r == fleets for _, _, r in rows])
    key = jax.random.key(seed)
    state = random_state(fleet, key) if two_level else blocking_state(fleet, staggered, key)
    cycles, warmup = config["cycles"], config["warmup"]
    windows = tuple(1.0 / n for n in n_jobs)  # τ = (T + d) / N
    recorder = DrawRecorder(since=float(warmup), capacity=16 * max(n_jobs))
    save = SaveAt(trace=False, power=True, jobs=True, observers=(CycleDrops(windows, cycles), recorder))
    out = simulate(fleet, state, cycles, save=save, progress=False)
    jobs, power, observed = out.jobs, out.power, out.observed
    assert jobs is not None and power is not None and observed is not None  # saved
    drops = {name: np.asarray(value) for name, value in observed["cycle_drops"].items()}
    drawn = {name: np.asarray(value) for name, value in observed["draw_recorder"].items()}
    stop = np.asarray(out.time)
    active = np.asarray(fleet.active)
    write_time = np.where(active, np.asarray(jobs.write_time), 0).sum(axis=1)
    paused_time = np.where(active, np.asarray(jobs.snapshot_time) + np.asarray(jobs.wait_time), 0).sum(axis=1)
    step = 1.0 - IDLE_POWER  # one job step, w = 1
    records = []
    for b, (n, load, _) in enumerate(rows):
        own = n_jobs.index(n)
        columns = np.arange(cycles + 1)
        counted = drops["complete"][b] & (columns >= warmup)
        within = drops["within"][b, counted, own] / step
        starts = drops["starts"][b]
        lengths = starts[1:][counted[:-1]] - starts[:-1][counted[:-1]]
        idle = (paused_time[b] if two_level else write_time[b]) / (n * stop[b])
        records.append(
            dict(
                n_jobs=n,
                load=load,
                case="two-level" if two_level else ("staggered" if staggered[b] else "random"),
                ok=bool(np.asarray(out.ok)[b]) and bool(np.all(np.isfinite(within))) and within.size > 0,
                within=within,
                instant=drops["instant"][b, counted] / step,
                largest_drop=float(np.asarray(power.largest_drop)[b]) / step,
                largest_rise=float(np.asarray(power.largest_rise)[b]) / step,
                cycle=float(lengths.mean()) if lengths.size else float("nan"),
                idle_fraction=float(idle),
                ends=drawn["ends"][b],
                draws=drawn["draws"][b] / n,
            )
        )
    return records


def _cell(records, n_jobs: int) -> dict:
    """Mean over fleets of each fleet's mean largest step per cycle (job steps), its
    standard error, and the distribution of the per-cycle values (k = 0..N job steps)."""
    means = np.array([r["within"].mean() for r in records])
    pooled = np.concatenate([r["within"] for r in records])
    se = float(means.std(ddof=1) / math.sqrt(means.size)) if means.size > 1 else 0.0
    return dict(
        fleets=len(records),
        mean=float(means.mean()),
        se=se,
        distribution=_distribution(pooled, n_jobs),
        instant_max=float(max(r["instant"].max() for r in records)),
        largest_drop=float(max(r["largest_drop"] for r in records)),
        largest_rise=float(max(r["largest_rise"] for r in records)),
        cycle=float(np.mean([r["cycle"] for r in records])),
        idle_fraction=float(np.mean([r["idle_fraction"] for r in records])),
    )


def _distribution(values, n_jobs: int) -> np.ndarray:
    """P(largest step = k job steps), k = 0..N (values are whole job steps to rounding)."""
    k = np.clip(np.rint(values).astype(np.int64), 0, n_jobs)
    return np.bincount(k, minlength=n_jobs + 1) / max(k.size, 1)


def _ratio(top: dict, bottom: dict) -> tuple[float, float, float]:
    """top.mean / bottom.mean with its `rules.CONFIDENCE` interval (delta method, normal)."""
    z = NormalDist().inv_cdf(1 - (1 - rules.CONFIDENCE) / 2)
    if bottom["mean"] <= 0:  # the bottom never falls (a perfect stagger's flat draw)
        value = math.inf if top["mean"] > 0 else math.nan
        return value, value, value
    ratio = top["mean"] / bottom["mean"]
    relative = math.hypot(top["se"] / top["mean"], bottom["se"] / bottom["mean"])
    return ratio, ratio * math.exp(-z * relative), ratio * math.exp(z * relative)


def student_t_quantile(probability: float, dof: int) -> float:
    """The ``probability`` quantile (> 0.5) of Student's t with ``dof`` degrees of freedom, by
    bisection on its CDF 1 − I_{ν/(ν + x²)}(ν/2, 1/2) / 2 (NaN for dof < 1).

    >>> round(student_t_quantile(0.95, 3), 3), round(student_t_quantile(0.95, 10**6), 3)
    (2.353, 1.645)
    """
    from jax.scipy.special import betainc

    if dof < 1:
        return float("nan")
    low, high = 0.0, 1e3
    for _ in range(100):
        middle = (low + high) / 2
        tail = 0.5 * float(betainc(dof / 2, 0.5, dof / (dof + middle**2)))
        low, high = (middle, high) if 1 - tail < probability else (low, middle)
    return (low + high) / 2


CASES = ("random", "independent", "staggered", "two-level")
COLORS = {"random": "tab:red", "independent": "tab:blue", "staggered": "tab:green", "two-level": "tab:purple"}
LABELS = {
    "random": "random launches (blocking)",
    "independent": "independent phases (Monte-Carlo)",
    "staggered": "staggered launch (blocking)",
    "two-level": "two-level, s = d/10 (random launches)",
}


def _scaling_figure(cells, fits, n_jobs, loads):
    from matplotlib.ticker import NullFormatter

    fig = new_figure(figsize=(5.2 * len(loads), 4.6), layout="constrained")
    axes = np.atleast_1d(fig.subplots(1, len(loads), sharey=True))
    for ax, load in zip(axes, loads):
        for case in CASES:
            means = np.array([cells[(case, n, load)]["mean"] for n in n_jobs])
            errors = np.array([cells[(case, n, load)]["se"] for n in n_jobs])
            fit = fits[(case, load)]
            label = f"{LABELS[case]}: N^{fit['exponent']:.2f}" + (
                f" ± {fit['se']:.2f}" if np.isfinite(fit["se"]) else ""
            )
            ax.errorbar(n_jobs, means, yerr=errors, color=COLORS[case], marker="o", ms=4, capsize=2, label=label)
            grid = np.geomspace(min(n_jobs), max(n_jobs), 50)
            ax.plot(grid, fit["prefactor"] * grid ** fit["exponent"], color=COLORS[case], lw=0.8, ls=":")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xticks(n_jobs, [str(n) for n in n_jobs])
        ax.set_yticks([1, 1.5, 2, 3, 4, 5, 6], ["1", "1.5", "2", "3", "4", "5", "6"])
        ax.yaxis.set_minor_formatter(NullFormatter())
        ax.set_xlabel("N (jobs)")
        ax.set_title(f"ρ = {load:g}")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7.5, loc="upper left")
    axes[0].set_ylabel("largest fall of P within τ = cycle/N, per cycle (job steps)")
    fig.suptitle("Claim 12: the largest power step per cycle against N (mean over fleets ± SE; dotted: power-law fit)")
    return fig


def _trace_figure(records, n_fig: int, load: float):
    cases = ("random", "staggered", "two-level")
    fig = new_figure(figsize=(10, 2.3 * len(cases) + 0.6), layout="constrained")
    axes = np.atleast_1d(fig.subplots(len(cases), 1, sharex=True, sharey=True))
    picked = {
        case: next(r for r in records if r["case"] == case and r["n_jobs"] == n_fig and r["load"] == load)
        for case in cases
    }
    t0 = max(np.nanmin(picked[case]["ends"]) for case in cases)
    span = 2 * picked["random"]["cycle"]
    lowest = 1.0
    for ax, case in zip(axes, cases):
        r = picked[case]
        ends, draws = r["ends"], r["draws"]
        keep = np.isfinite(ends)
        ends, draws = ends[keep], draws[keep]
        starts = np.concatenate([[ends[0]], ends[:-1]])
        show = (ends > t0) & (starts < t0 + span)
        ax.stairs(
            draws[show][1:], np.concatenate([starts[show][1:], [ends[show][-1]]]), baseline=None, color=COLORS[case]
        )
        lowest = min(lowest, draws[show][1:].min())
        ax.set_ylabel("P / N")
        ax.set_title(
            f"{LABELS[case]}: this fleet's largest step per cycle, mean {r['within'].mean():.2f} job steps", fontsize=9
        )
        ax.grid(True, alpha=0.3)
    axes[-1].set_xlim(t0, t0 + span)
    axes[-1].set_ylim(lowest - 0.02, 1.01)
    axes[-1].set_xlabel("time (solo cycles T + d)")
    fig.suptitle(
        f"Claim 12: the fleet's draw P(t) over two cycles, N = {n_fig}, ρ = {load:g}, idle draw {IDLE_POWER:g} "
        f"(one job step = {1 - IDLE_POWER:g} / N of the full draw)"
    )
    return fig


def _distribution_figure(cells, n_top: int, loads):
    fig = new_figure(figsize=(5.2 * len(loads), 4.2), layout="constrained")
    axes = np.atleast_1d(fig.subplots(1, len(loads), sharey=True))
    for ax, load in zip(axes, loads):
        for case in CASES:
            dist = cells[(case, n_top, load)]["distribution"]
            k = np.arange(dist.size)
            seen = dist > 0
            ax.plot(k[seen], dist[seen], color=COLORS[case], marker="o", ms=4, label=LABELS[case])
        ax.set_yscale("log")
        ax.set_xlim(0, max(3, max(np.nonzero(cells[(c, n_top, load)]["distribution"])[0].max() for c in CASES)) + 1)
        ax.set_xlabel("largest fall of P within τ in one cycle (job steps)")
        ax.set_title(f"N = {n_top}, ρ = {load:g}")
        ax.grid(True, which="both", alpha=0.3)
    axes[0].set_ylabel("fraction of cycles")
    axes[0].legend(fontsize=8)
    fig.suptitle("Claim 12: distribution of the largest power step per cycle at the largest N")
    return fig


def _cut_verdict(ratios: dict, keys) -> tuple[str, list]:
    """Each key's ratio interval wholly above `MIN_CUT` (reproduced), wholly below (not),
    else inconclusive; combined. No key: inconclusive."""
    outcomes = [rules.interval_verdict(ratios[k][1], ratios[k][2], margin_low=MIN_CUT) for k in keys]
    return (rules.combine(outcomes) if outcomes else INCONCLUSIVE), outcomes


@in_float64
def run(out_dir, size: str = "quick", progress: bool = True) -> dict:
    """Measures the largest power step per cycle of random, staggered and two-level fleets
    against independent phases.

    Args:
      out_dir: directory for ``power_steps.json`` and the PNG figures.
      size: "smoke", "quick" or "full" (fleet sizes, fleets per cell, cycles).
      progress: unused (the runs are short); kept for the common signature.

    Returns:
      The result dict written to ``out_dir/power_steps.json``.
    """
    del progress
    out_dir, size, config, started = begin(out_dir, size, SIZES)
    n_jobs, fleets = tuple(config["n_jobs"]), config["fleets"]
    records, cells = _measure(n_jobs, config)
    failed = sum(not r["ok"] for r in records)
    keys = [(n, load) for n in n_jobs for load in LOADS]
    ratios = _Ratios(
        sync={k: _ratio(cells[("random",) + k], cells[("independent",) + k]) for k in keys},
        stagger={k: _ratio(cells[("random",) + k], cells[("staggered",) + k]) for k in keys},
        two_level={k: _ratio(cells[("random",) + k], cells[("two-level",) + k]) for k in keys},
        idle={k: cells[("random",) + k]["idle_fraction"] / cells[("two-level",) + k]["idle_fraction"] for k in keys},
    )
    fits = _fits(cells, n_jobs)
    n_top = max(n_jobs)
    n_fig = max([n for n in n_jobs if n <= 32] or [n_top])
    figures = [
        save_figure(_scaling_figure(cells, fits, n_jobs, LOADS), out_dir / f"{NAME}_scaling.png"),
        save_figure(_trace_figure(records, n_fig, LOADS[0]), out_dir / f"{NAME}_trace.png"),
        save_figure(_distribution_figure(cells, n_top, LOADS), out_dir / f"{NAME}_distribution.png"),
    ]
    verdicts = _verdicts(cells, ratios, fits, keys, config, failed, figures)
    numbers = dict(
        n_jobs=list(n_jobs),
        loads=list(LOADS),
        fleets=fleets,
        cycles=config["cycles"],
        warmup=config["warmup"],
        replicates=config["replicates"],
        idle_power=IDLE_POWER,
        snapshot="d / 10",
        throughput="shared (f = 1)",
        cap=None,
        cycle_work="T + d = 1, d = rho / N",
        window="tau = (T + d) / N",
        step_unit="one job step (1 - idle_power) * w",
        baseline="Monte-Carlo: N independent periodic jobs, measured cycle and writing fraction, uniform phases",
        failed_runs=failed,
        cells=[
            dict(case=case, n_jobs=n, load=load, **cells[(case, n, load)])
            for case in CASES
            for n in n_jobs
            for load in LOADS
        ],
        exponents=[dict(case=case, load=load, **fits[(case, load)]) for case in CASES for load in LOADS],
        seconds=time.perf_counter() - started,
    )
    return finish(out_dir, EXPERIMENT, size, numbers, verdicts, figures)


class _Ratios(NamedTuple):
    """Per (N, ρ): random over independent (``sync``), over staggered (``stagger``) and
    blocking over two-level (``two_level``), each ``(ratio, low, high)``, and the ratio of
    the idle-time fractions (``idle``)."""

    sync: dict
    stagger: dict
    two_level: dict
    idle: dict


def _measure(n_jobs: tuple, config: dict) -> tuple[list, dict]:
    """``(records, cells)``: every run's record, and per (case, N, ρ) its cell, the
    independent phases' Monte-Carlo baseline included."""
    fleets = config["fleets"]
    groups = [n_jobs] if config["padded"] else [(n,) for n in n_jobs]
    records = []
    for group in groups:
        records += _simulate(group, LOADS, fleets, config, two_level=False, seed=12_000 + max(group))
        records += _simulate(group, LOADS, fleets, config, two_level=True, seed=12_500 + max(group))
    cells = {}
    for n in n_jobs:
        for load in LOADS:
            for case in ("random", "staggered", "two-level"):
                chosen = [r for r in records if r["ok"] and (r["case"], r["n_jobs"], r["load"]) == (case, n, load)]
                cells[(case, n, load)] = _cell(chosen, n)
    rng = np.random.default_rng(12)
    for n in n_jobs:
        for load in LOADS:
            measured = cells[("random", n, load)]
            cycle, writing = measured["cycle"], measured["idle_fraction"] * measured["cycle"]
            drops = independent_drops(n, cycle, writing, 1.0 / n, config["replicates"], rng)
            cells[("independent", n, load)] = dict(
                fleets=config["replicates"],
                mean=float(drops.mean()),
                se=float(drops.std(ddof=1) / math.sqrt(drops.size)),
                distribution=_distribution(drops, n),
                cycle=cycle,
                idle_fraction=measured["idle_fraction"],
            )
    return records, cells


def _fits(cells: dict, n_jobs: tuple) -> dict:
    """Per (case, ρ) the power law of the mean largest step in N, with its Student-t interval."""
    fits = {
        (case, load): power_law(n_jobs, [cells[(case, n, load)]["mean"] for n in n_jobs])
        for case in CASES
        for load in LOADS
    }
    for fit in fits.values():
        t = student_t_quantile(1 - (1 - rules.CONFIDENCE) / 2, fit["dof"])
        fit["interval"] = [fit["exponent"] - t * fit["se"], fit["exponent"] + t * fit["se"]]
    return fits


def _where(k) -> str:
    return f"N = {k[0]}, ρ = {k[1]:g}"


def _ratio_text(ratios: dict, k) -> str:
    value, low, high = ratios[k]
    return f"×{fmt(value, 3)} [{fmt(low, 3)}, {fmt(high, 3)}]"


def _setup_text(cells: dict, keys: list, config: dict, failed: int) -> tuple[str, str, float]:
    """``(setup, instant, largest drop)``: the runs in prose, and the largest change of the
    draw at one instant over every run (never more than one job step)."""
    n_jobs = tuple(config["n_jobs"])
    instant_max = max(
        cells[(c, n, load)]["largest_drop"] for c in ("random", "staggered", "two-level") for n, load in keys
    )
    rise_max = max(
        cells[(c, n, load)]["largest_rise"] for c in ("random", "staggered", "two-level") for n, load in keys
    )
    setup = (
        f"N = {fmt_list(n_jobs)}; ρ = {fmt_list(LOADS)}; {config['fleets']} random launches per cell × "
        f"{config['cycles']} cycles "
        f"(the first {config['warmup']} skipped), idle draw {IDLE_POWER:g}, f ≡ 1, uncapped. "
        + (
            f"{failed} fleets left out (run incomplete, or a window beyond the ring of {RING} intervals). "
            if failed
            else ""
        )
    )
    instant_text = (
        f"At one instant the draw never moves by more than one job step: over every run the largest drop is "
        f"{fmt(instant_max, 4)} job step and the largest rise {fmt(rise_max, 4)}. "
    )
    return setup, instant_text, instant_max


def _table(cells: dict, ratios: _Ratios, keys: list) -> dict:
    """The report's table: per (N, ρ) the four cases' largest step and the ratios."""

    def row(k):
        return [
            str(k[0]),
            fmt(k[1]),
            *(f"{fmt(cells[(c,) + k]['mean'], 3)} ± {fmt(cells[(c,) + k]['se'], 2)}" for c in CASES),
            f"×{fmt(ratios.sync[k][0], 3)}",
            f"×{fmt(ratios.stagger[k][0], 3)}",
            f"×{fmt(ratios.two_level[k][0], 3)}",
            f"×{fmt(ratios.idle[k], 3)}",
        ]

    return dict(
        columns=[
            "N",
            "ρ",
            "random",
            "independent",
            "staggered",
            "two-level",
            "random / independent",
            "random / staggered",
            "blocking / two-level",
            "idle-time ratio",
        ],
        rows=[row(k) for k in keys],
    )


def _verdicts(cells: dict, ratios: _Ratios, fits: dict, keys: list, config: dict, failed: int, figures) -> list:
    """The verdicts of 12a (no synchrony beyond independent phases), 12b (a stagger cuts the
    step), 12c (sub-√N scaling) and 12d (two-level checkpoints cut it)."""
    setup, instant_text, instant_max = _setup_text(cells, keys, config, failed)
    scaling_png, trace_png, distribution_png = figures
    large = [k for k in keys if k[0] >= MIN_N]
    thresholds = dict(
        MAX_SYNC_RATIO=MAX_SYNC_RATIO,
        MIN_CUT=MIN_CUT,
        MIN_N=MIN_N,
        MAX_EXPONENT=MAX_EXPONENT,
        IDLE_POWER=IDLE_POWER,
        SNAPSHOT_FRACTION=SNAPSHOT_FRACTION,
        CONFIDENCE=rules.CONFIDENCE,
    )
    top_keys = [(max(config["n_jobs"]), load) for load in LOADS]
    return [
        _verdict_sync(
            ratios,
            keys,
            setup + instant_text,
            instant_max,
            top_keys,
            thresholds,
            distribution_png,
            _table(cells, ratios, keys),
        ),
        _verdict_stagger(ratios, keys, large, setup, top_keys, thresholds, trace_png),
        _verdict_exponent(fits, setup, thresholds, scaling_png),
        _verdict_two_level(ratios, keys, large, setup, top_keys, thresholds),
    ]


def _verdict_sync(ratios: _Ratios, keys, intro: str, instant_max, top_keys, thresholds, figure, table) -> dict:
    """12a: random launches' largest step is no larger than independent phases'."""
    sync = ratios.sync
    sync_outcomes = [rules.interval_verdict(sync[k][1], sync[k][2], margin_high=MAX_SYNC_RATIO) for k in keys]
    worst = max(keys, key=lambda k: sync[k][0])
    sync_why = (
        intro + f"Within τ = cycle/N, random launches against independent phases: ratios from "
        f"×{fmt(min(v[0] for v in sync.values()), 3)} to ×{fmt(sync[worst][0], 3)} (the largest at {_where(worst)}, "
        f"{_ratio_text(sync, worst)}); "
        + ", ".join(f"{n} {kind}" for kind, n in sorted(_counts(sync_outcomes).items()))
        + f" of {len(keys)} cells."
    )
    return verdict(
        12,
        rules.combine(sync_outcomes),
        sync_why,
        sub_claim="12a",
        title="random launches' largest step per cycle is no larger than independent phases'",
        headline=", ".join(f"{_where(k)}: {_ratio_text(sync, k)}" for k in top_keys) + f" (margin ×{MAX_SYNC_RATIO:g})",
        rule=f"per (N, ρ) the {rules.CONFIDENCE:.0%} interval of random / independent must lie wholly below "
        f"×{MAX_SYNC_RATIO:g} (reproduced); wholly above: not reproduced; else inconclusive; cells combine.",
        thresholds=thresholds,
        figures=[figure],
        table=table,
        ratios={f"N={k[0]},rho={k[1]}": sync[k] for k in keys},
        outcomes=sync_outcomes,
        largest_instant_drop=instant_max,
    )


def _verdict_stagger(ratios: _Ratios, keys, large, setup: str, top_keys, thresholds, figure) -> dict:
    """12b: a staggered launch cuts the largest step."""
    stagger = ratios.stagger
    stagger_outcome, stagger_outcomes = _cut_verdict(stagger, large)
    stagger_why = setup + (
        "Random over staggered, "
        + "; ".join(f"{_where(k)}: {_ratio_text(stagger, k)}" for k in large)
        + f" (at N < {MIN_N}: "
        + "; ".join(f"{_where(k)}: ×{fmt(stagger[k][0], 3)}" for k in keys if k not in large)
        + ")."
        if large
        else f"No cell with N ≥ {MIN_N} at this size."
    )
    return verdict(
        12,
        stagger_outcome,
        stagger_why,
        sub_claim="12b",
        title="a staggered launch cuts the largest step",
        headline=", ".join(f"{_where(k)}: {_ratio_text(stagger, k)}" for k in top_keys),
        rule=f"at every N ≥ {MIN_N} and ρ the {rules.CONFIDENCE:.0%} interval of random / staggered must lie "
        f"wholly above ×{MIN_CUT:g} (reproduced); wholly below: not reproduced; else inconclusive.",
        thresholds=thresholds,
        figures=[figure],
        ratios={f"N={k[0]},rho={k[1]}": stagger[k] for k in keys},
        outcomes=stagger_outcomes,
    )


def _verdict_exponent(fits: dict, setup: str, thresholds, figure) -> dict:
    """12c: the largest step grows slower than √N."""
    exponent_outcomes = [
        rules.interval_verdict(*fits[("random", load)]["interval"], margin_high=MAX_EXPONENT) for load in LOADS
    ]
    exponent_why = (
        setup
        + "; ".join(
            f"ρ = {load:g}: "
            + ", ".join(f"{case} {_exponent_text(fits[(case, load)])}" for case in CASES)
            + f" (random: interval {_interval_text(fits[('random', load)]['interval'])})"
            for load in LOADS
        )
        + "."
    )
    return verdict(
        12,
        rules.combine(exponent_outcomes),
        exponent_why,
        sub_claim="12c",
        title="the largest step grows slower than √N",
        headline=", ".join(f"ρ = {load:g}: {_exponent_text(fits[('random', load)])}" for load in LOADS)
        + f" (random launches; margin {MAX_EXPONENT:g})",
        rule=f"per ρ the {rules.CONFIDENCE:.0%} interval (Student t on the fit's residuals) of the random "
        f"launches' exponent must lie wholly below {MAX_EXPONENT:g} (reproduced); wholly above: not "
        "reproduced; else inconclusive; loads combine.",
        thresholds=thresholds,
        figures=[figure],
        exponents={f"{case},rho={load}": fits[(case, load)] for case in CASES for load in LOADS},
        outcomes=exponent_outcomes,
    )


def _verdict_two_level(ratios: _Ratios, keys, large, setup: str, top_keys, thresholds) -> dict:
    """12d: two-level checkpoints with short snapshots cut the largest step."""
    two_level, idle_ratio = ratios.two_level, ratios.idle
    two_level_outcome, two_level_outcomes = _cut_verdict(two_level, large)
    two_level_why = setup + (
        f"Blocking over two-level (s = d/{1 / SNAPSHOT_FRACTION:g}), against the ratio of idle-time fractions: "
        + "; ".join(f"{_where(k)}: {_ratio_text(two_level, k)} (idle ×{fmt(idle_ratio[k], 3)})" for k in large)
        + "."
        if large
        else f"No cell with N ≥ {MIN_N} at this size."
    )
    return verdict(
        12,
        two_level_outcome,
        two_level_why,
        sub_claim="12d",
        title="two-level checkpoints with short snapshots cut the largest step",
        headline=", ".join(
            f"{_where(k)}: {_ratio_text(two_level, k)} (idle ×{fmt(idle_ratio[k], 3)})" for k in top_keys
        ),
        rule=f"at every N ≥ {MIN_N} and ρ the {rules.CONFIDENCE:.0%} interval of blocking / two-level must lie "
        f"wholly above ×{MIN_CUT:g} (reproduced); wholly below: not reproduced; else inconclusive.",
        thresholds=thresholds,
        ratios={f"N={k[0]},rho={k[1]}": two_level[k] for k in keys},
        idle_ratios={f"N={k[0]},rho={k[1]}": idle_ratio[k] for k in keys},
        outcomes=two_level_outcomes,
    )


def _two(value) -> str:
    """Two decimals (no "-0.00"), or n/a."""
    return f"{value + 0.0:.2f}" if np.isfinite(value) else "n/a"


def _exponent_text(fit: dict) -> str:
    return f"N^{_two(fit['exponent'])} ± {_two(fit['se'])}"


def _interval_text(interval) -> str:
    return f"{_two(interval[0])} to {_two(interval[1])}"


def _counts(outcomes) -> dict:
    return {kind: sum(o == kind for o in outcomes) for kind in set(outcomes)}


EXPERIMENT = Experiment(
    name=NAME,
    title="the largest power step per cycle: random, staggered, independent phases, two-level",
    claims=CLAIMS,
    sizes=SIZES,
    run=run,
)
