"""Claim 14 (a)–(d): storms after a common restart, and the restart stagger that removes them.

**The outage as a launch.** A fleet-wide outage at t fails every job that is up; each loses
its cycle in progress and, after a restart R, computes that cycle again from its start
(docs/model.md §1c). With equal R and no stagger every identical job therefore starts its
compute phase at t + R, all at once: exactly a launch with every job at the start of its
compute phase ("together", `initial_state`'s default). With a restart stagger Δ (§1f), job k
comes back at t + R + kΔ: exactly a launch in which job k's compute starts kΔ later
("staggered"). So (a)–(c) are questions about these two launches, and the experiment runs
them on the engine as it is. It also measures the equivalence itself on the general engine:
an outage replayed with `simulate(failure_times=...)` (every job failing at one instant,
restart R + kΔ for job k, `Fleet(restart=...)`) fires exactly when the launch does, shifted
by t + R (tests/test_experiments_common_causes.py checks both launches against it).

**Writer peak of a cycle.** Cycle k of a job is its k-th recorded firing and write. The
*writer peak* of cycle k is the largest number of jobs writing at once at the start of some
job's k-th write, counting every recorded write (of any cycle) that covers that instant
(`cycle_peaks`). The most concurrent writers at any instant are there, since the count only
rises when a write starts; N means all N jobs collide.

**(a) Without jitter** N identical jobs launched together stay synchronous: every cycle's
writer peak is N. Measured for several N and sharing settings (f ≡ 1, √n, degrading, n, and
f ≡ 1 under a binding cap) over many cycles: *reproduced* when every cycle of every fleet
peaks at exactly N (an exact statement, no tolerance), *not reproduced* otherwise.

**(b) With compute jitter σ** (each compute phase draws T + σξ, docs/model.md §1) the storm
dissolves. A restart redoes the lost cycle with that cycle's jitter draw, which differs per
job; the launch that matches it starts every job in its write phase (`initial_state(phase=1)`,
not recorded), so every job's first recorded firing comes after a jittered compute phase,
as after a restart. The **storm lifetime** is the 1-based index of the first cycle whose
writer peak is below N (censored when every recorded cycle peaks at N). The **margin** is
m = D(1) = d/f(1), the solo write time, as in claim 7 the distance the firing times must
spread before two writes can stop overlapping: two jobs' writes overlap exactly while their
firings are less than D(1) apart, whatever f (the first writes alone at f(1) until the
second fires). The jitter claim (7) predicts a lifetime ∝ (m/σ)² where the firings do a
driftless random walk. Per sharing setting and N, the median lifetime over an ensemble is
fitted against m/σ on a log-log scale, with a bootstrap interval, as in `jitter`: reproduced
when the interval lies inside 2 ± `SLOPE_MARGIN`, not reproduced when wholly outside.
Expected by claim 2 (and found): the synchronous state is neutral only where λ_j =
(N − j)f(j)/(j f(N − j)) = 1 for every j (f ∝ n, or N = 2); under storage contention with
N ≥ 3 it has expanding directions (λ_1 = (N − 1) f(1)/f(N − 1) > 1) that blow the jitter up
geometrically, and the storm ends in about log(m/σ)/log λ_1 cycles, far sooner.

**(c) A restart stagger Δ = D(1).** Job k starts its compute kΔ after job 0, so its write
starts just as job k − 1's ends. Where (N − 1)·D(1) ≤ T the N writes fit in one solo cycle
T + D(1) and the fleet is collision free; it stays so (claim 4). Measured on the outage
itself (failure_times, restart R + kΔ): the writer peak of every cycle is exactly 1 over
many cycles, and the extra down time per job, the engine's `JobStats.down_time` less R,
averages (N − 1)Δ/2 (compared with the formula). Beyond, (N − 1)·D(1) > T (load ρ > 1),
collisions are unavoidable; the experiment reports the peaks there against the storm's N.

**(d) The LLM cluster** (`cluster_cost`, `CLUSTER_FILE` = examples/llm_cluster.toml: 27 jobs on
24,576 GPUs) with fleet-wide outages every `OUTAGE_MTBF_HOURS` ≈ 37 h. The rate is *assumed*:
Llama 3's 54-day snapshot (the file's [L3]) attributes 35 of its 419 unexpected interruptions
to network switches and cables, the one cause there that can stop many jobs at once; counting
each as an outage of the whole cluster makes it an upper bound. Every stagger Δ runs on
common draws (the same keys: random launches, own-failure streams, outage instants), and so
does the file without outages. Per draw, in GPU-hours per day: the outages' own cost (work
lost and restarts, `cj.assess` cause "outages"), the stagger's k·Δ ("restart_stagger"), and
the **storms**: the completed writes' time beyond each job's solo write time D_i(1), less the
same in the run without outages (paired). Δ is searched over a grid, D(1)·`STAGGER_FRACTIONS`
with D(1) the longest solo write time of the file's jobs (the 8B jobs', 6.7 s), so that the
report shows each Δ's cost (``ckpt-jax design --staggers`` designs Δ for a fleet file by its
search on common draws), and the best is the least mean total loss (every cause; the
work unsaved at H is not lost, docs/model.md §1c). The total beyond the run without outages is the outages, the stagger,
the storms and the rest (``other``): the jobs' own failures and checkpoints, which change
because a job that an outage stops neither fails on its own nor checkpoints while it is down.
The writer peak per cycle after each outage and the cycles it stays above the one before come
from `cj.assess.outage_storms` (Δ = 0 and the best Δ). Reproduced when the storms cost GPU time
and the best stagger saves GPU time against Δ = 0 (paired CIs above 0);
not reproduced when either CI lies below 0; inconclusive otherwise.
"""

from __future__ import annotations

import math
import time
from typing import TypedDict

import jax
import numpy as np

from .. import Fleet, SaveAt, initial_state, simulate
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
    in_float64,
    new_figure,
    save_figure,
    verdict,
)
from .jitter import (
    CLAIMED_SLOPE,
    MAX_CENSORED,
    MIN_FIT_POINTS,
    N_BOOTSTRAP,
    SLOPE_MARGIN,
    fit_slope,
    median_lifetime,
    slope_verdict,
)

NAME = "common_causes"
CLAIMS = (14,)

COMPUTE = 7.0  # T
WRITE = 1.0  # d; every setting has f(1) = 1, so D(1) = d = 1 and the margin m = 1
RESTART = 2.0  # R
OUTAGE_AT = 3.5  # the outage strikes during the first compute phase (no write recorded before)
STAGGER = WRITE  # Δ = D(1)

# Sharing settings: name → (throughput preset, cap as a fraction of N or None).
SETTINGS: dict[str, tuple[str, float | None]] = {
    "f ≡ 1": ("shared", None),
    "f = √n": ("sqrt", None),
    "f degrading": ("degrading", None),
    "f = n": ("linear", None),
    "f ≡ 1, cap N/2": ("shared", 0.5),
}
NEIGHBOUR_CYCLES = 2  # cycle_peaks counts writes of cycles k − 2..k + 2 at the start of a k-th write

# (b): the lifetime law of claim 7 (`jitter`: CLAIMED_SLOPE ± SLOPE_MARGIN, MIN_FIT_POINTS,
# MAX_CENSORED, N_BOOTSTRAP, its median and fit), fitted down to shorter medians.
FIT_MIN_MEDIAN = 3.0  # cycles: shorter medians are shown, not fitted
LIFETIME_SCALE = 0.5  # cycles per (m/σ)² of the slowest cell (two jobs), from a pilot run
K_FACTOR = 2.5
K_MIN = 20
PEAK_BLOCK = 128  # fleets per block of `cycle_peaks` in (b)


class _Size(TypedDict):
    a_jobs: list[int]  # N for (a)
    a_cycles: int  # cycles of the launches of (a)
    outage_cycles: int  # cycles after the replayed outages of (a) and (c)
    b_cells: list[list]  # (setting, N) for (b)
    b_points: int  # m/σ values per cell, log spaced over b_ratio_range
    b_fleets: int
    b_ratio_range: tuple[float, float]
    c_jobs: list[int]  # N for (c); (N − 1) D(1) ≤ T for N ≤ 8
    d_days: float  # (d): days of the LLM cluster per draw
    d_draws: int  # (d): common draws per stagger


SIZES: dict[str, _Size] = {
    "smoke": _Size(
        a_jobs=[2, 4],
        a_cycles=40,
        outage_cycles=12,
        b_cells=[["f = n", 4], ["f ≡ 1", 4]],
        b_points=3,
        b_fleets=16,
        b_ratio_range=(4.0, 10.0),
        c_jobs=[4, 12],
        d_days=1.0,
        d_draws=2,
    ),
    "quick": _Size(
        a_jobs=[2, 4, 8, 16],
        a_cycles=1000,
        outage_cycles=200,
        b_cells=[["f = n", 2], ["f = n", 4], ["f ≡ 1", 2], ["f ≡ 1", 4], ["f = √n", 4], ["f ≡ 1, cap N/2", 4]],
        b_points=4,
        b_fleets=100,
        b_ratio_range=(8.0, 64.0),
        c_jobs=[4, 8, 12, 16],
        d_days=14.0,
        d_draws=16,
    ),
    "full": _Size(
        a_jobs=[2, 4, 8, 16, 32],
        a_cycles=10000,
        outage_cycles=1000,
        b_cells=[
            ["f = n", 2],
            ["f = n", 4],
            ["f = n", 8],
            ["f ≡ 1", 2],
            ["f ≡ 1", 4],
            ["f ≡ 1", 8],
            ["f = √n", 4],
            ["f ≡ 1, cap N/2", 4],
        ],
        b_points=5,
        b_fleets=400,
        b_ratio_range=(8.0, 128.0),
        c_jobs=[2, 4, 8, 12, 16, 32],
        d_days=28.0,
        d_draws=64,
    ),
}


# -- fleets and launches ---------------------------------------------------------------------------
def fleets(cells, pad: int, restart: float | np.ndarray = 0.0) -> Fleet:
    """One fleet per ``(setting, N)`` of ``cells``: N identical jobs (T = `COMPUTE`, d = `WRITE`)
    under the setting's f and cap, padded to ``pad`` slots; ``restart`` (*B, pad) or scalar."""
    n = np.array([c[1] for c in cells])
    if pad < n.max():
        raise ValueError(f"pad must be at least the largest N ({n.max()}), got {pad}")
    active = np.arange(pad)[None, :] < n[:, None]
    table = np.stack([_throughput_row(SETTINGS[s][0], pad) for s, _ in cells])
    caps = [None if SETTINGS[s][1] is None else SETTINGS[s][1] * k for s, k in cells]
    shape = (len(cells), pad)
    return Fleet(
        compute=np.full(shape, COMPUTE),
        write=np.full(shape, WRITE),
        cap=caps,  # pyright: ignore[reportArgumentType]  (None entries: uncapped fleets, as Fleet documents)
        throughput=table,
        active=active,
        restart=restart,
        dtype=np.float64,
    )


def _throughput_row(preset: str, pad: int) -> np.ndarray:
    from .._throughput import throughput_table

    return throughput_table(preset, pad)


def stagger_restarts(cells, pad: int, stagger: float) -> np.ndarray:
    """Per job the restart after an outage: R + kΔ for job k (0 in padding slots)."""
    n = np.array([c[1] for c in cells])
    k = np.arange(pad)[None, :]
    return np.where(k < n[:, None], RESTART + stagger * k, 0.0)


def replay_outage(fleet: Fleet, n_fires: int, horizon, progress: bool):
    """Launch together, every job fails at `OUTAGE_AT` (`failure_times`), restarts after the
    fleet's ``restart``; runs to ``horizon`` keeping each job's first ``n_fires`` firings and
    the per-job statistics (down time). Returns the `Trace`."""
    times = np.full(fleet.compute.shape + (1,), OUTAGE_AT)
    return simulate(
        fleet,
        initial_state(fleet),
        n_fires,
        until=horizon,
        failure_times=times,
        save=SaveAt(trace=True, jobs=True),
        progress=progress,
    )


# -- per-cycle writer peaks ------------------------------------------------------------------------
def cycle_peaks(fire_times, end_times, neighbours: int = NEIGHBOUR_CYCLES) -> np.ndarray:
    """The writer peak of each cycle: (*B, N, K) trace → (*B, K) ints.

    Peak of cycle k = max over jobs i of the number of recorded writes [fire, end) of cycles
    k − ``neighbours`` .. k + ``neighbours`` (any job) that cover job i's k-th firing. A write
    ending at the instant another starts does not cover it (the count nets out, as in
    `cj.analysis.writer_count`). NaN windows (padding, unrecorded) count nowhere; a cycle
    with no recorded firing has peak 0. Writes more than ``neighbours`` cycles apart are
    assumed not to overlap (jobs that drift a whole cycle apart would need a larger value).
    """
    if isinstance(neighbours, bool) or not isinstance(neighbours, (int, np.integer)) or neighbours < 0:
        raise ValueError(f"neighbours must be an integer >= 0, got {neighbours!r}")
    fire = np.asarray(fire_times, dtype=np.float64)
    end = np.asarray(end_times, dtype=np.float64)
    if fire.shape != end.shape or fire.ndim < 2:
        raise ValueError(f"fire_times and end_times must have one shape (*B, N, K), got {fire.shape}, {end.shape}")
    n_cycles = fire.shape[-1]
    counts = np.zeros(fire.shape, dtype=np.int64)
    for shift in range(-neighbours, neighbours + 1):
        lo, hi = max(0, -shift), min(n_cycles, n_cycles - shift)  # cycles k with k + shift in range
        if lo >= hi:
            continue
        f_other = fire[..., lo + shift : hi + shift]
        e_other = end[..., lo + shift : hi + shift]
        start = fire[..., lo:hi]
        # (…, i, 1, k) against (…, 1, j, k): job j's write of cycle k + shift covers job i's k-th firing.
        covers = (f_other[..., None, :, :] <= start[..., :, None, :]) & (
            start[..., :, None, :] < e_other[..., None, :, :]
        )
        counts[..., lo:hi] += covers.sum(axis=-2)
    return counts.max(axis=-2)


def storm_lifetimes(peaks, n_jobs):
    """``(lifetime, censored)`` per fleet from (B, K) writer peaks and (B,) N: the 1-based
    index of the first cycle whose peak is below N; censored (lifetime K) if none is."""
    peaks = np.asarray(peaks)
    below = peaks < np.asarray(n_jobs)[:, None]
    censored = ~below.any(axis=1)
    lifetime = np.where(censored, peaks.shape[1], np.argmax(below, axis=1) + 1)
    return lifetime, censored


# -- (d): the realistic cluster --------------------------------------------------------------------
CLUSTER_FILE = "examples/llm_cluster.toml"  # relative to the repository root (or an absolute path)
# Fleet-wide outages of examples/llm_cluster.toml, assumed: Llama 3's 54-day snapshot (the file's
# [L3]) attributes 35 of its 419 unexpected interruptions to network switches and cables, the
# cause among them that can stop many jobs at once; we assume each such event fails every job
# of the cluster (an upper bound), one every 54 d × 24 h / 35 ≈ 37 h.
OUTAGE_MTBF_HOURS = 54 * 24 / 35
STAGGER_FRACTIONS = (0.0, 0.25, 0.5, 1.0, 2.0)  # Δ / D(1), the paired search when design cannot
STORM_CYCLES = 6  # cycles after each outage whose writer peaks `outage_storms` reports
STORM_DRAWS = 2  # draws whose outages `outage_storms` inspects, per stagger shown


def _cluster_path(fleet_file: str):
    """``fleet_file`` as given where it exists, else relative to the repository root."""
    from pathlib import Path

    path = Path(fleet_file)
    if not path.exists() and not path.is_absolute():
        path = Path(__file__).resolve().parents[2] / fleet_file
    if not path.exists():
        raise ValueError(f"fleet_file {fleet_file!r} does not exist")
    return path


def cluster_spec(outage_rate: float, stagger: float = 0.0, fleet_file: str = CLUSTER_FILE):
    """``fleet_file`` (a fleet file without outages) with fleet-wide outages at ``outage_rate``
    per hour (one ``[[outages]]`` table of the default domain) and ``restart_stagger`` =
    ``stagger`` seconds: a `FleetSpec`."""
    from ..fleetfile import loads

    text = _cluster_path(fleet_file).read_text()
    base = loads(text, fleet_file)
    if base.outages or base.restart_stagger:
        raise ValueError(f"fleet_file must have no [[outages]] and no restart_stagger, {fleet_file} has")
    head = f'restart_stagger = "{float(stagger):.17g} s"\n'
    return loads(head + text + f'\n[[outages]]\nmtbf = "{1.0 / outage_rate:.17g} h"\n', fleet_file)


def _check_cluster_arguments(outage_rate, stagger) -> None:
    if isinstance(outage_rate, bool) or not isinstance(outage_rate, (int, float)):
        raise ValueError(f"outage_rate must be a finite number > 0 (outages per hour), got {outage_rate!r}")
    if not math.isfinite(outage_rate) or outage_rate <= 0:
        raise ValueError(f"outage_rate must be a finite number > 0 (outages per hour), got {outage_rate!r}")
    if stagger is not None and not (
        isinstance(stagger, (int, float)) and not isinstance(stagger, bool) and math.isfinite(stagger) and stagger >= 0
    ):
        raise ValueError(f"stagger must be None or a finite number >= 0 (seconds), got {stagger!r}")


def _cluster_draws(spec, horizon: float, keys, progress: bool) -> dict:
    """One batched run of ``spec``'s fleet over the draws ``keys`` (random launches, the jobs'
    own failures and the outages): per draw the fleet's GPU-hours per day lost by cause
    (`cj.assess.CAUSES`), in total (every cause; the work unsaved at H is not lost, docs/model.md
    §1c, and counts in the goodput), and to contention
    (``storm``: the completed writes' time beyond each job's solo write time D_i(1))."""
    from ..assess import CAUSES, _time_split
    from ..design import _batched, start_state

    fleet = spec.fleet()
    batched = _batched(fleet, np.broadcast_to(np.asarray(fleet.compute, np.float64), (len(keys), fleet.n_jobs)))
    out = simulate(
        batched,
        start_state(batched, "random", keys),
        None,
        until=horizon,
        key=keys,
        throw=True,
        progress=progress,
        save=SaveAt(trace=False, jobs=True),
    )
    assert out.jobs is not None
    active = np.asarray(fleet.active)
    sizes = np.where(active, np.asarray(fleet.size, np.float64), 0.0)
    per_day = sizes * 24.0  # a fraction of H of one job -> GPU-hours per day
    _, causes = _time_split(fleet, out.jobs, horizon)
    draws = {cause: np.where(active, causes[cause], 0.0) @ per_day for cause in CAUSES}
    # Every cause: the work in progress at H is in the goodput (steady state, docs/model.md
    # §1c), so "throttling" is the slowdown under a cap only (0 without one, to rounding).
    draws["total"] = np.sum([draws[cause] for cause in CAUSES], axis=0)
    jobs = out.jobs
    excess = np.asarray(jobs.completed_write_time, np.float64) - np.asarray(jobs.writes) * spec.solo_write_time()
    draws["storm"] = np.where(active, excess / horizon, 0.0) @ per_day
    draws["outage_failures"] = np.asarray(jobs.outage_failures, np.float64).sum(axis=-1)
    return draws


def cluster_cost(
    outage_rate: float,
    *,
    stagger: float | None = None,
    fleet_file: str = CLUSTER_FILE,
    days: float = 7.0,
    n_draws: int = 8,
    key=None,
    progress: bool = False,
) -> dict:
    """Claim 14 (d): GPU-hours per day lost to outages and to the storms after them.

    Runs ``fleet_file`` (`CLUSTER_FILE`: times in seconds) with fleet-wide outages at
    ``outage_rate`` per hour, over ``days`` days and ``n_draws`` draws, on common draws
    (the same keys: the same random launches, own-failure streams and outage instants) for
    several restart staggers Δ and once without outages. ``stagger`` None: the paired search
    Δ = D(1)·`STAGGER_FRACTIONS` with D(1) the longest solo write time of the file's jobs;
    a number: Δ = 0 and that Δ (seconds).

    Returns a dict: ``staggers`` (Δ, s), ``solo_write`` (D(1), s), ``without`` (the draws
    without outages) and ``with`` (one per Δ), each mapping ``"total"``, ``"storm"``, every
    `cj.assess.CAUSES` cause and ``"outage_failures"`` to (n_draws,) per-draw values (GPU-hours
    per day, failures), and ``horizon`` (s).

    Raises:
      ValueError: ``outage_rate`` not a finite number > 0, ``stagger`` < 0, ``days`` not > 0,
        ``n_draws`` < 2, or ``fleet_file`` with outages of its own.
    """
    _check_cluster_arguments(outage_rate, stagger)
    if isinstance(days, bool) or not isinstance(days, (int, float)) or not (math.isfinite(days) and days > 0):
        raise ValueError(f"days must be a finite number > 0, got {days!r}")
    if isinstance(n_draws, bool) or not isinstance(n_draws, (int, np.integer)) or n_draws < 2:
        raise ValueError(f"n_draws must be an int >= 2, got {n_draws!r}")
    base = cluster_spec(outage_rate, 0.0, fleet_file)
    solo = float(np.max(base.solo_write_time()))
    staggers = [solo * f for f in STAGGER_FRACTIONS] if stagger is None else [0.0, float(stagger)]
    keys = jax.random.split(jax.random.key(1414) if key is None else key, int(n_draws))
    horizon = float(days) * 86400.0
    from ..fleetfile import load

    without = _cluster_draws(load(_cluster_path(fleet_file)), horizon, keys, progress)
    runs = [_cluster_draws(cluster_spec(outage_rate, s, fleet_file), horizon, keys, progress) for s in staggers]
    return dict(staggers=staggers, solo_write=solo, without=without, runs=runs, horizon=horizon, keys=keys)


def cluster_storms(outage_rate: float, staggers, *, days: float, n_draws: int, key, fleet_file: str = CLUSTER_FILE):
    """Per restart stagger Δ in ``staggers``, the checkpoint storms after the outages of
    ``n_draws`` runs (`cj.assess.outage_storms`, `STORM_CYCLES` cycles, common keys): the
    (K,) writer peaks of the cycle before each outage, (K, C) of the C cycles after it, the
    (K,) cycles the peak stays above the one before, and whether it came back within C."""
    from ..assess import outage_storms

    results = []
    for stagger in staggers:
        fleet = cluster_spec(outage_rate, stagger, fleet_file).fleet()
        parts = [
            outage_storms(fleet, span=days * 86400.0, key=jax.random.fold_in(key, s), n_cycles=STORM_CYCLES)
            for s in range(n_draws)
        ]
        results.append(
            dict(
                stagger=float(stagger),
                before=np.concatenate([p.before for p in parts]),
                peaks=np.concatenate([p.peaks for p in parts]).reshape(-1, STORM_CYCLES),
                storm_cycles=np.concatenate([p.storm_cycles for p in parts]),
                recovered=np.concatenate([p.recovered for p in parts]),
                period=parts[0].period,
            )
        )
    return results


def cluster_summary(cost: dict) -> dict:
    """Per stagger the GPU-hours per day lost (mean, CI) to the outages, the stagger, the
    storms they cause (contention beyond the run without outages) and in all beyond it; the
    best stagger Δ > 0 by mean total loss and its paired saving against Δ = 0."""
    from .._estimate import mean_ci
    from ..assess import paired_difference

    without, rows = cost["without"], []
    for stagger, run in zip(cost["staggers"], cost["runs"]):
        rows.append(
            dict(
                stagger=stagger,
                outages=mean_ci(run["outages"]),
                restart_stagger=mean_ci(run["restart_stagger"]),
                storm=paired_difference(run["storm"], without["storm"]),
                extra=paired_difference(run["total"], without["total"]),
                # The rest of ``extra``: the jobs' own failures and checkpoints, fewer where an outage
                # stopped them (``extra`` = outages + restart_stagger + storm + other, draw by draw).
                other=paired_difference(
                    run["total"] - run["outages"] - run["restart_stagger"] - run["storm"],
                    without["total"] - without["storm"],
                ),
                saving=paired_difference(cost["runs"][0]["total"], run["total"]),
                outage_failures=float(np.mean(run["outage_failures"])),
            )
        )
    staggered = [r for r in rows if r["stagger"] > 0]
    best = min(staggered, key=lambda r: r["extra"].mean) if staggered else rows[0]
    return dict(rows=rows, best=best, storm_without=mean_ci(without["storm"]), total_without=mean_ci(without["total"]))


def cluster_verdict_outcome(storm, saving) -> str:
    """From (mean, low, high) of the storm cost at Δ = 0 and of the best stagger's saving:
    reproduced when the storms after outages cost GPU time (the paired CI of the storm cost
    above 0) and the best stagger saves (its paired saving's CI above 0); not reproduced
    when either CI lies below 0 (no storm cost, or a stagger that costs more than it saves);
    inconclusive otherwise."""
    (_, storm_low, storm_high), (_, saving_low, saving_high) = storm, saving
    if storm_low > 0 and saving_low > 0:
        return REPRODUCED
    if saving_high < 0 or storm_high < 0:
        return NOT_REPRODUCED
    return INCONCLUSIVE


def _measure_cluster(config, progress: bool) -> dict:
    """(d) at this size: the paired search over Δ on common draws and the storms after the
    outages for Δ = 0 and the best Δ."""
    rate = 1.0 / OUTAGE_MTBF_HOURS
    cost = cluster_cost(rate, days=config["d_days"], n_draws=config["d_draws"], progress=progress)
    summary = cluster_summary(cost)
    shown = [0.0, summary["best"]["stagger"]]
    storms = cluster_storms(
        rate, shown, days=config["d_days"], n_draws=min(STORM_DRAWS, config["d_draws"]), key=jax.random.key(1415)
    )
    return dict(rate=rate, cost=cost, summary=summary, storms=storms)


def _storm_numbers(storm: dict) -> dict:
    """Mean writer peak before the outages and per cycle after them, and the cycles to recover."""
    peaks = storm["peaks"]
    return dict(
        stagger=storm["stagger"],
        outages=int(peaks.shape[0]),
        before=float(np.nanmean(storm["before"])) if np.isfinite(storm["before"]).any() else math.nan,
        after=[float(np.nanmean(c)) if np.isfinite(c).any() else math.nan for c in peaks.T],
        peak_after=float(np.nanmean(np.nanmax(peaks, axis=1))) if np.isfinite(peaks).any() else math.nan,
        max_after=float(np.nanmax(peaks)) if np.isfinite(peaks).any() else math.nan,
        storm_cycles=float(np.mean(storm["storm_cycles"])) if peaks.size else math.nan,
        recovered=float(np.mean(storm["recovered"])) if peaks.size else math.nan,
    )


def _cluster_figure(measured: dict):
    """Left: GPU-hours per day lost by cause against Δ (paired CIs); right: the writer peak
    per cycle after an outage (mean over the outages) with and without the best stagger."""
    summary, solo = measured["summary"], measured["cost"]["solo_write"]
    fig = new_figure(figsize=(12, 4.6), layout="constrained")
    left, right = fig.subplots(1, 2)
    x = np.array([r["stagger"] / solo for r in summary["rows"]])
    position = np.arange(x.size)
    for name, label, colour in (
        ("restart_stagger", "restart stagger k·Δ", "tab:green"),
        ("storm", "storms: contention beyond the run without outages", "tab:red"),
    ):
        est = [r[name] for r in summary["rows"]]
        mean = np.array([e.mean for e in est])
        err = np.array([[e.mean - e.low for e in est], [e.high - e.mean for e in est]])
        left.errorbar(position, mean, yerr=np.nan_to_num(err), fmt="o-", color=colour, capsize=3, label=label)
    saving = summary["rows"]
    mean = np.array([-r["saving"].mean for r in saving])
    err = np.array(
        [[r["saving"].high - r["saving"].mean for r in saving], [r["saving"].mean - r["saving"].low for r in saving]]
    )
    left.errorbar(
        position,
        mean,
        yerr=np.nan_to_num(err),
        fmt="s--",
        color="black",
        capsize=3,
        label="total loss − total at Δ = 0 (paired)",
    )
    left.axhline(0, color="0.5", lw=0.8)
    left.set_xticks(position, [f"{v:g}" for v in x])
    left.set_xlabel(f"restart stagger Δ / D(1)   (D(1) = {solo:.3g} s)")
    left.set_ylabel("GPU-hours per day")
    outages = summary["rows"][0]["outages"]
    left.set_title(f"lost by cause (outages themselves: {outages.mean:,.0f} GPU-h/day at every Δ)", fontsize=9)
    left.legend(fontsize=7)
    left.grid(True, alpha=0.3)
    for storm, colour in zip(measured["storms"], ("black", "tab:green")):
        numbers = _storm_numbers(storm)
        cycles = np.arange(0, STORM_CYCLES + 1)
        right.plot(
            cycles,
            [numbers["before"], *numbers["after"]],
            "o-",
            color=colour,
            label=f"Δ = {storm['stagger'] / solo:g}·D(1) ({numbers['outages']} outages)",
        )
    right.set_xticks(np.arange(0, STORM_CYCLES + 1), ["before"] + [str(c) for c in range(1, STORM_CYCLES + 1)])
    right.set_xlabel("cycle after the outage (P = longest solo period; in cycle 1 the jobs restart and compute)")
    right.set_ylabel("writer peak of the cycle (mean over outages)")
    right.set_ylim(bottom=0)
    right.set_title("the checkpoint storm after an outage", fontsize=9)
    right.legend(fontsize=7)
    right.grid(True, alpha=0.3)
    rate = measured["rate"]
    fig.suptitle(f"Claim 14d: examples/llm_cluster.toml with fleet-wide outages every {1 / rate:.0f} h (assumed)")
    return fig


def _ci_text(estimate, digits: str = ",.0f") -> str:
    return f"{estimate.mean:{digits}} [{estimate.low:{digits}}, {estimate.high:{digits}}]"


def _storm_text(numbers: dict) -> str:
    """The storm after the outages, in words (`_storm_numbers`)."""
    if not numbers["outages"] or not math.isfinite(numbers["max_after"]):
        return "no outage fell in the draws inspected for the writer peaks (too short a run)."
    before = (
        f"{numbers['before']:.1f} on average in the cycle before an outage"
        if math.isfinite(numbers["before"])
        else "not measured before an outage (none had a whole cycle before it)"
    )
    return (
        f"over {numbers['outages']} outage{'s' if numbers['outages'] != 1 else ''} the writer peak is {before} "
        f"and {numbers['peak_after']:.1f} in the {STORM_CYCLES} after it (at most "
        f"{numbers['max_after']:.0f} of 27 jobs); it stays above the cycle before for "
        f"{numbers['storm_cycles']:.1f} cycles on average ({numbers['recovered']:.0%} back within {STORM_CYCLES})."
    )


def _verdict_d(measured: dict, config, figure: str) -> dict:
    summary, cost = measured["summary"], measured["cost"]
    solo, rows, best = cost["solo_write"], summary["rows"], summary["best"]
    outcome = cluster_verdict_outcome(rows[0]["storm"], best["saving"])
    together, staggered = (_storm_numbers(s) for s in measured["storms"])
    zero = rows[0]
    why = (
        f"{CLUSTER_FILE} ({config['d_draws']} draws of {config['d_days']:g} days, random launches, the file's own "
        f"failures) with fleet-wide outages every {OUTAGE_MTBF_HOURS:.0f} h (assumed: the 35 of Llama 3's 419 "
        "unexpected interruptions in 54 days attributed to network switches and cables, each taken to fail the "
        f"whole cluster, an upper bound). Without a stagger the outages cost {_ci_text(zero['outages'])} GPU-h/day "
        f"(work lost and restarts; {zero['outage_failures']:.0f} job failures per run) and the storms after them "
        f"{_ci_text(zero['storm'], ',.1f')} GPU-h/day more write time beyond the solo write time than the same draws "
        f"without outages ({_ci_text(summary['storm_without'], ',.1f')} GPU-h/day there); "
        + _storm_text(together)
        + f" In all they cost {_ci_text(zero['extra'])} GPU-h/day beyond the run without outages: the outages and "
        f"the storms plus the jobs' own failures and checkpoints, {_ci_text(zero['other'])} (a job that an outage "
        "stops neither fails on its own nor checkpoints while it is down)."
        + " Δ was searched on common draws (paired 95 % CIs; `ckpt-jax design --staggers` designs it for a fleet "
        "file) over "
        f"{fmt_list([f'{f:g}' for f in STAGGER_FRACTIONS])} × D(1) = {solo:.3g} s (the longest solo write, the "
        "8B jobs'): "
        + "; ".join(
            f"Δ = {r['stagger'] / solo:g}·D(1): stagger {_ci_text(r['restart_stagger'], ',.1f')}, storms "
            f"{_ci_text(r['storm'], ',.1f')}, saving against Δ = 0 {_ci_text(r['saving'], ',.1f')}"
            for r in rows[1:]
        )
        + f" GPU-h/day. With the best, Δ = {best['stagger'] / solo:g}·D(1), "
        + _storm_text(staggered)
        + " "
        + (
            "The stagger removes the storms and pays for itself."
            if outcome == REPRODUCED
            else (
                "The stagger removes the storms, but on this cluster they cost less than the stagger's k·Δ "
                "waits: the writes take seconds against 30-minute cycles, so the storms are real and cheap, and the "
                if best["restart_stagger"].mean > zero["storm"].mean
                else "The stagger's k·Δ waits cost less than the storms on average, but the "
            )
            + "saving is "
            + (
                "below zero."
                if outcome == NOT_REPRODUCED
                else "not resolved from zero at this size (the full size, 64 draws of 28 days, narrows it)."
            )
        )
    )
    headline = (
        f"outages {zero['outages'].mean:,.0f} GPU-h/day; storms {zero['storm'].mean:,.1f}; best Δ = "
        f"{best['stagger'] / solo:g}·D(1) saves {_ci_text(best['saving'], ',.1f')}"
    )
    return verdict(
        14,
        outcome,
        why,
        sub_claim="14d",
        title="GPU-hours per day lost to outages and storms on the LLM cluster, with and without a stagger",
        headline=headline,
        rule=(
            "reproduced when the storms after outages cost GPU time (the paired 95 % CI of the contention beyond "
            "the run without outages, at Δ = 0, above 0) and the best stagger of the search (least mean total "
            "loss) saves GPU time against Δ = 0 (paired CI above 0); not reproduced when either CI lies below 0; "
            "inconclusive otherwise. The outage rate is assumed."
        ),
        thresholds=dict(OUTAGE_MTBF_HOURS=OUTAGE_MTBF_HOURS, STAGGER_FRACTIONS=list(STAGGER_FRACTIONS)),
        figures=[figure],
        table=dict(
            columns=[
                "Δ / D(1)",
                "Δ (s)",
                "outages",
                "restart stagger",
                "storms",
                "own failures and checkpoints",
                "total beyond no outages",
                "saving vs Δ = 0",
            ],
            rows=[
                [
                    f"{r['stagger'] / solo:g}",
                    f"{r['stagger']:.3g}",
                    _ci_text(r["outages"]),
                    _ci_text(r["restart_stagger"], ",.1f"),
                    _ci_text(r["storm"], ",.1f"),
                    _ci_text(r["other"]),
                    _ci_text(r["extra"]),
                    _ci_text(r["saving"], ",.1f"),
                ]
                for r in rows
            ],
        ),
        outage_mtbf_hours=OUTAGE_MTBF_HOURS,
        best_stagger=best["stagger"],
    )


def _cluster_numbers(measured: dict) -> dict:
    """(d)'s numbers for the JSON: per stagger the estimates, and the storms shown."""
    as_list = lambda e: [e.mean, e.low, e.high]  # noqa: E731
    return dict(
        fleet_file=CLUSTER_FILE,
        outage_mtbf_hours=OUTAGE_MTBF_HOURS,
        solo_write=measured["cost"]["solo_write"],
        horizon=measured["cost"]["horizon"],
        storm_without=as_list(measured["summary"]["storm_without"]),
        total_without=as_list(measured["summary"]["total_without"]),
        staggers=[
            {k: (as_list(v) if hasattr(v, "low") else v) for k, v in row.items()} for row in measured["summary"]["rows"]
        ],
        best_stagger=measured["summary"]["best"]["stagger"],
        storms=[_storm_numbers(s) for s in measured["storms"]],
    )


# -- (a): the synchronous state is a fixed point ---------------------------------------------------
EQUIVALENCE_TOLERANCE = 1e-12  # outage vs launch firings, relative to the latest time compared
FIGURE_CYCLES = 120  # cycles shown in the per-cycle figure


def _measure_fixed_point(config, progress: bool) -> tuple[list[dict], np.ndarray]:
    """Launches together without jitter (every setting × N) and the same fleets after a
    replayed outage. Returns per cell its numbers and the (B, K) writer peaks of the launches."""
    cells = [(s, n) for s in SETTINGS for n in config["a_jobs"]]
    fleet = fleets(cells, max(config["a_jobs"]), restart=RESTART)
    launch = simulate(fleet, initial_state(fleet), config["a_cycles"], progress=progress)
    fire, end = np.asarray(launch.fire_times), np.asarray(launch.end_times)
    peaks = cycle_peaks(fire, end)
    spread = np.nanmax(fire, axis=1) - np.nanmin(fire, axis=1)  # (B, K): one cycle's firings
    k = config["outage_cycles"]
    horizon = OUTAGE_AT + RESTART + np.nanmax(end[..., k - 1], axis=1) + COMPUTE / 2
    outage = replay_outage(fleet, k, horizon, progress)
    after = np.asarray(outage.fire_times)
    outage_peaks = cycle_peaks(after, outage.end_times)
    active = np.asarray(fleet.active)
    rows = []
    for b, (setting, n) in enumerate(cells):
        shifted, launched = after[b][active[b]] - (OUTAGE_AT + RESTART), fire[b][active[b], :k]
        recorded = bool(np.isfinite(shifted).all())
        rows.append(
            dict(
                setting=setting,
                n_jobs=int(n),
                cycles=int(config["a_cycles"]),
                ok=bool(launch.ok[b]) and bool(outage.ok[b]) and recorded,
                min_peak=int(peaks[b].min()),
                max_peak=int(peaks[b].max()),
                cycles_below_n=int((peaks[b] < n).sum()),
                max_spread=float(spread[b].max()),
                outage_cycles=int(k),
                outage_min_peak=int(outage_peaks[b].min()),
                outage_max_peak=int(outage_peaks[b].max()),
                outage_difference=float(np.max(np.abs(shifted - launched))) if recorded else float("nan"),
                outage_time_scale=float(np.nanmax(after[b])),
            )
        )
    return rows, peaks


def fixed_point_verdict(cells) -> str:
    """Reproduced when every cycle of every launch and replayed outage peaks at exactly N and
    each outage fires where its launch does, less t + R (to `EQUIVALENCE_TOLERANCE` of the
    latest time); not reproduced otherwise (an exact statement: no inconclusive outcome)."""
    exact = all(
        c["ok"]
        and c["min_peak"] == c["max_peak"] == c["outage_min_peak"] == c["outage_max_peak"] == c["n_jobs"]
        and c["outage_difference"] <= EQUIVALENCE_TOLERANCE * c["outage_time_scale"]
        for c in cells
    )
    return REPRODUCED if exact else NOT_REPRODUCED


# -- (b): jitter dissolves the storm ---------------------------------------------------------------
def cycles_for(ratio: float) -> int:
    """Cycles run at one m/σ: ``K_FACTOR`` times the slowest cell's median guess, plus ``K_MIN``."""
    return int(math.ceil(K_FACTOR * LIFETIME_SCALE * ratio**2)) + K_MIN


def expansion(setting: str, n_jobs: int) -> float:
    """Claim 2's leading multiplier λ_1 = (N − 1) f(1) / f(N − 1) of the synchronous state
    (uncapped); NaN for a capped setting (claim 2 assumes a cap that does not bind). 1 for N = 2."""
    preset, cap = SETTINGS[setting]
    if cap is not None:
        return float("nan")
    f = _throughput_row(preset, n_jobs)
    return float((n_jobs - 1) * f[1] / f[n_jobs - 1])


def _measure_lifetimes(config, progress: bool):
    """Launches together with jitter σ = m / ratio for each ratio: per cell (setting, N) and
    ratio the storm lifetimes and censored flags, and the ensemble-mean writer peak of the
    first `FIGURE_CYCLES` cycles at the middle ratio."""
    cells = [tuple(c) for c in config["b_cells"]]
    n_fleets = config["b_fleets"]
    rows = [c for c in cells for _ in range(n_fleets)]
    fleet = fleets(rows, max(n for _, n in cells))
    state = initial_state(fleet, phase=1)  # every job writing: its first compute is jittered
    n_jobs = np.array([n for _, n in rows])
    low, high = config["b_ratio_range"]
    ratios = np.geomspace(low, high, config["b_points"])
    middle = len(ratios) // 2
    key = jax.random.key(14)
    lifetimes = np.zeros((len(cells), len(ratios), n_fleets), dtype=np.int64)
    censored = np.zeros((len(cells), len(ratios), n_fleets), dtype=bool)
    series, not_ok, n_fires = None, [], []
    for p, ratio in enumerate(ratios):
        k = cycles_for(ratio)
        trace = simulate(fleet, state, k, jitter=WRITE / ratio, key=jax.random.fold_in(key, p), progress=progress)
        fire, end = np.asarray(trace.fire_times), np.asarray(trace.end_times)
        peaks = np.concatenate(  # in blocks of fleets: the comparison arrays are (fleets, N, N, K)
            [cycle_peaks(fire[b : b + PEAK_BLOCK], end[b : b + PEAK_BLOCK]) for b in range(0, len(rows), PEAK_BLOCK)]
        )
        life, cens = storm_lifetimes(peaks, n_jobs)
        ok = np.asarray(trace.ok)
        cens = cens | ~ok  # a run that stopped early counts as censored at K (never seen: reported)
        lifetimes[:, p] = life.reshape(len(cells), n_fleets)
        censored[:, p] = cens.reshape(len(cells), n_fleets)
        not_ok.append(int((~ok).sum()))
        n_fires.append(k)
        if p == middle:
            shown = peaks[:, :FIGURE_CYCLES].reshape(len(cells), n_fleets, -1)
            series = shown.mean(axis=1)
    return cells, ratios, lifetimes, censored, np.asarray(n_fires), series, not_ok


def _fit_cell(ratios, lifetimes, censored, n_fires, rng) -> dict:
    """One cell's medians, the fitted slope over its usable points and its bootstrap interval."""
    medians = np.array([median_lifetime(lifetimes[p], censored[p], n_fires[p]) for p in range(len(ratios))])
    fitted = np.isfinite(medians) & (medians >= FIT_MIN_MEDIAN)
    nan = float("nan")
    result = dict(
        medians=medians,
        means=np.where(censored, n_fires[:, None], lifetimes).mean(axis=1),
        censored_fraction=censored.mean(axis=1),
        fitted=fitted,
        slope=nan,
        intercept=nan,
        ci=[nan, nan],
        se=nan,
    )
    if fitted.sum() < MIN_FIT_POINTS:
        return result
    slope, intercept = fit_slope(ratios[fitted], medians[fitted])
    slopes = np.empty(N_BOOTSTRAP)
    points = np.flatnonzero(fitted)
    for b in range(N_BOOTSTRAP):
        resampled = []
        for p in points:
            pick = rng.integers(0, lifetimes[p].size, lifetimes[p].size)
            resampled.append(np.median(np.where(censored[p][pick], n_fires[p], lifetimes[p][pick])))
        slopes[b] = fit_slope(ratios[fitted], np.maximum(resampled, 0.5))[0]
    low, high = np.quantile(slopes, [(1 - rules.CONFIDENCE) / 2, (1 + rules.CONFIDENCE) / 2])
    result.update(slope=slope, intercept=intercept, ci=[float(low), float(high)], se=float(np.std(slopes, ddof=1)))
    return result


def log_law_slope(ratios, means) -> float:
    """Slope of the mean lifetime against ln(m/σ) (cycles per e-fold of m/σ): 1/ln λ_1 where the
    synchronous state expands by λ_1 per cycle."""
    return float(np.polyfit(np.log(ratios), means, 1)[0])


# -- (c): a restart stagger Δ = D(1) ---------------------------------------------------------------
STAGGER_SETTINGS = ("f ≡ 1", "f = √n")
DOWN_TOLERANCE = 1e-12  # relative: mean extra down time against (N − 1)Δ/2


def fits_one_cycle(n_jobs: int) -> bool:
    """Whether the N solo writes fit in one solo cycle: (N − 1)·D(1) ≤ T."""
    return (n_jobs - 1) * WRITE <= COMPUTE


def _measure_stagger(config, progress: bool):
    """A replayed outage with restart R + kΔ for job k (Δ = D(1)), per setting and N: per cell
    the writer peaks and the extra down time, and the (B, K) peaks."""
    cells = [(s, n) for s in STAGGER_SETTINGS for n in config["c_jobs"]]
    pad = max(config["c_jobs"])
    fleet = fleets(cells, pad, restart=stagger_restarts(cells, pad, STAGGER))
    k = config["outage_cycles"]
    n = np.array([c[1] for c in cells])
    f_n = np.array([_throughput_row(SETTINGS[s][0], m)[m] for s, m in cells])
    longest_cycle = COMPUTE + n * WRITE / f_n  # every writer drains at f(n)/n >= f(N)/N
    horizon = OUTAGE_AT + RESTART + (n - 1) * STAGGER + (k + 1) * longest_cycle
    trace = replay_outage(fleet, k, horizon, progress)
    peaks = cycle_peaks(trace.fire_times, trace.end_times)
    assert trace.jobs is not None
    down = np.asarray(trace.jobs.down_time)
    fire = np.asarray(trace.fire_times)
    active = np.asarray(fleet.active)
    rows = []
    for b, (setting, m) in enumerate(cells):
        extra = down[b][active[b]] - RESTART
        settled = peaks[b, min(m, k - 1) :]
        rows.append(
            dict(
                setting=setting,
                n_jobs=int(m),
                fits=fits_one_cycle(m),
                cycles=int(k),
                ok=bool(trace.ok[b]) and bool(np.isfinite(fire[b][active[b]]).all()),
                min_peak=int(peaks[b].min()),
                max_peak=int(peaks[b].max()),
                cycles_above_one=int((peaks[b] > 1).sum()),
                mean_peak_settled=float(settled.mean()),
                max_peak_settled=int(settled.max()),
                mean_extra_down=float(extra.mean()),
                formula_extra_down=(m - 1) * STAGGER / 2,
                max_job_deviation=float(np.max(np.abs(extra - STAGGER * np.arange(m)))),
            )
        )
    return rows, peaks, cells


def stagger_verdict(cells) -> str:
    """Reproduced when every cell with (N − 1)·D(1) ≤ T ran clean, peaked at exactly 1 in every
    cycle and lost (N − 1)Δ/2 of extra down time per job on average (to `DOWN_TOLERANCE`)."""
    fitting = [c for c in cells if c["fits"]]
    exact = bool(fitting) and all(
        c["ok"]
        and c["min_peak"] == c["max_peak"] == 1
        and abs(c["mean_extra_down"] - c["formula_extra_down"]) <= DOWN_TOLERANCE * max(c["formula_extra_down"], 1.0)
        for c in fitting
    )
    return REPRODUCED if exact else NOT_REPRODUCED


# -- figures ---------------------------------------------------------------------------------------
def _cycles_figure(a_series, a_jobs: int, b_cells, b_series, sigma: float, c_cells, c_peaks):
    """Writer peak per cycle: together without jitter, together with jitter σ (ensemble mean),
    staggered by Δ = D(1); left N = ``a_jobs``, right the largest N with (N − 1)·D(1) > T."""
    fig = new_figure(figsize=(12, 4.6), layout="constrained")
    left, right = fig.subplots(1, 2)
    shown = min(FIGURE_CYCLES, a_series.size)
    x = np.arange(1, shown + 1)
    left.step(x, a_series[:shown], where="mid", color="black", lw=2, label="together, no jitter (f ≡ 1)")
    colours = iter(["tab:red", "tab:orange", "tab:purple", "tab:brown", "tab:pink", "tab:olive", "tab:cyan"])
    for (setting, n), series in zip(b_cells, b_series):
        if n == a_jobs:
            cut = min(shown, series.size)
            left.plot(
                x[:cut],
                series[:cut],
                "-",
                color=next(colours),
                label=f"together, jitter σ = {fmt(sigma)} ({setting}, mean)",
            )
    by_cell = {cell: b for b, cell in enumerate(c_cells)}
    if ("f ≡ 1", a_jobs) in by_cell:
        staggered = c_peaks[by_cell[("f ≡ 1", a_jobs)]]
        cut = min(shown, staggered.size)
        left.step(x[:cut], staggered[:cut], where="mid", color="tab:green", lw=2, label="staggered restart Δ = D(1)")
    left.set_ylim(0, a_jobs * 1.5)
    left.set_xlabel("cycle after the restart")
    left.set_ylabel("writer peak of the cycle (jobs writing at once)")
    left.set_title(f"N = {a_jobs}, T = {COMPUTE:g}, d = {WRITE:g}: (N − 1)·D(1) ≤ T")
    left.legend(fontsize=7, loc="upper center", ncol=2)
    left.grid(True, alpha=0.3)
    beyond = [n for s, n in c_cells if s == "f ≡ 1" and not fits_one_cycle(n)]
    if beyond:
        n_big = max(beyond)
        right.axhline(n_big, color="black", lw=1.5, ls="--", label="together, no jitter: N every cycle")
        for setting, colour in zip(STAGGER_SETTINGS, ("tab:green", "tab:blue")):
            if (setting, n_big) in by_cell:
                peaks = c_peaks[by_cell[(setting, n_big)]]
                cut = min(FIGURE_CYCLES, peaks.size)
                right.step(
                    np.arange(1, cut + 1),
                    peaks[:cut],
                    where="mid",
                    color=colour,
                    label=f"staggered Δ = D(1), {setting}",
                )
        right.set_ylim(0, n_big * 1.25)
        right.set_title(f"N = {n_big}: (N − 1)·D(1) = {(n_big - 1) * WRITE:g} > T = {COMPUTE:g}")
        right.legend(fontsize=7, loc="upper center", ncol=2)
    right.set_xlabel("cycle after the restart")
    right.set_ylabel("writer peak of the cycle")
    right.grid(True, alpha=0.3)
    fig.suptitle("Claim 14: the storm after a common restart, with and without jitter, and a restart stagger")
    return fig


def _lifetime_figure(cells, ratios, fits):
    fig = new_figure(figsize=(7.5, 5), layout="constrained")
    ax = fig.subplots()
    grid = np.geomspace(ratios.min(), ratios.max(), 50)
    for (setting, n), fit, colour in zip(cells, fits, ["C0", "C1", "C2", "C3", "C4", "C5", "C6", "C7"]):
        medians = fit["medians"]
        label = f"{setting}, N = {n}"
        if np.isfinite(fit["slope"]):
            label += f": slope {fit['slope']:.2f} {fmt_interval(*fit['ci'], digits=2)}"
            ax.plot(grid, np.exp(fit["intercept"]) * grid ** fit["slope"], "-", color=colour, lw=1)
        ax.plot(ratios[fit["fitted"]], medians[fit["fitted"]], "o", color=colour, label=label)
        other = np.isfinite(medians) & ~fit["fitted"]
        if other.any():
            ax.plot(ratios[other], medians[other], "o", mfc="white", color=colour)
    ax.plot(grid, 0.4 * grid**2, "--", color="0.4", label="slope 2 guide")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("margin / jitter  m/σ  (m = D(1))")
    ax.set_ylabel("median storm lifetime (cycles until fewer than N write at once)")
    ax.set_title("Claim 14b: how long the storm after a common restart lasts under jitter")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)
    return fig


# -- the run ---------------------------------------------------------------------------------------
@in_float64
def run(out_dir, size: str = "quick", progress: bool = True) -> dict:
    """Measures claim 14 (a)–(d) and writes ``common_causes.json`` and three figures.

    Args:
      out_dir: directory for the JSON and ``common_causes.png``, ``common_causes_lifetimes.png``,
        ``common_causes_cluster.png``.
      size: "smoke", "quick" or "full" (`SIZES`).
      progress: show the engine's progress bar on long runs.
    """
    out_dir, size, config, started = begin(out_dir, size, SIZES)
    a_cells, a_peaks = _measure_fixed_point(config, progress)
    b_cells, ratios, lifetimes, censored, n_fires, b_series, not_ok = _measure_lifetimes(config, progress)
    rng = np.random.default_rng(14)
    fits = [_fit_cell(ratios, lifetimes[c], censored[c], n_fires, rng) for c in range(len(b_cells))]
    c_cells, c_peaks, c_keys = _measure_stagger(config, progress)
    cluster = _measure_cluster(config, progress)
    a_jobs = 4 if 4 in config["a_jobs"] else max(config["a_jobs"])
    series_index = [(s, n) for s in SETTINGS for n in config["a_jobs"]].index(("f ≡ 1", a_jobs))
    sigma = WRITE / ratios[len(ratios) // 2]
    cycles_png = save_figure(
        _cycles_figure(a_peaks[series_index], a_jobs, b_cells, b_series, sigma, c_keys, c_peaks),
        out_dir / f"{NAME}.png",
    )
    lifetimes_png = save_figure(_lifetime_figure(b_cells, ratios, fits), out_dir / f"{NAME}_lifetimes.png")
    cluster_png = save_figure(_cluster_figure(cluster), out_dir / f"{NAME}_cluster.png")
    verdicts = [
        _verdict_a(a_cells, cycles_png),
        _verdict_b(b_cells, ratios, fits, n_fires, config["b_fleets"], lifetimes_png, not_ok),
        _verdict_c(c_cells),
        _verdict_d(cluster, config, cluster_png),
    ]
    numbers = dict(
        compute=COMPUTE,
        write=WRITE,
        restart=RESTART,
        outage_at=OUTAGE_AT,
        stagger=STAGGER,
        fixed_point=a_cells,
        lifetimes=[
            dict(
                setting=s,
                n_jobs=n,
                expansion=expansion(s, n),
                ratios=ratios,
                sigmas=WRITE / ratios,
                n_fires=n_fires,
                median_lifetime=fit["medians"],
                mean_lifetime=fit["means"],
                censored_fraction=fit["censored_fraction"],
                fitted=fit["fitted"],
                slope=fit["slope"],
                slope_ci=fit["ci"],
                slope_se=fit["se"],
                log_law_slope=log_law_slope(ratios, fit["means"]),
            )
            for (s, n), fit in zip(b_cells, fits)
        ],
        lifetime_fleets_not_ok=not_ok,
        stagger_cells=c_cells,
        cluster=_cluster_numbers(cluster),
        seconds=time.perf_counter() - started,
    )
    return finish(out_dir, EXPERIMENT, size, numbers, verdicts, [cycles_png, lifetimes_png, cluster_png])


# -- verdicts --------------------------------------------------------------------------------------
def _verdict_a(cells, figure: str) -> dict:
    outcome = fixed_point_verdict(cells)
    settings = list(dict.fromkeys(c["setting"] for c in cells))
    sizes = sorted({c["n_jobs"] for c in cells})
    broken = [c for c in cells if c["min_peak"] != c["n_jobs"] or c["outage_min_peak"] != c["n_jobs"]]
    worst = max(c["outage_difference"] / c["outage_time_scale"] for c in cells)
    cycles = cells[0]["cycles"]
    why = (
        f"N identical jobs launched together without jitter: every one of {cycles:,} cycles of every fleet "
        f"({len(cells)} fleets: N = {fmt_list(sizes)} under {fmt_list(settings)}) peaks at "
        + ("exactly N writers" if not broken else f"fewer than N writers in {len(broken)} fleets")
        + f"; the firings of one cycle are at most {fmt(max(c['max_spread'] for c in cells))} apart. The same "
        f"fleets failed by one outage at t = {OUTAGE_AT:g} (every job, restart R = {RESTART:g}) fire where the "
        f"launch does, shifted by t + R, to {fmt(worst)} of the time reached, over {cells[0]['outage_cycles']} "
        "cycles"
        + (
            ", and peak at N in every one: the restart is the launch. The synchronous state is a fixed point of "
            "every anonymous sharing setting tried, including a binding cap."
            if outcome == REPRODUCED
            else "; not every cycle or firing matches: see the table."
        )
    )
    headline = f"peak N in all {cycles:,} cycles of {len(cells)} fleets; outage = launch to {fmt(worst)}"
    return verdict(
        14,
        outcome,
        why,
        sub_claim="14a",
        title="without jitter the storm never dissolves",
        headline=headline,
        rule=(
            "reproduced when every cycle of every launch and of every replayed outage peaks at exactly N writers "
            f"and the outage's firings equal the launch's plus t + R to {EQUIVALENCE_TOLERANCE:g} of the time "
            "reached; not reproduced otherwise (exact, no inconclusive outcome)."
        ),
        thresholds=dict(EQUIVALENCE_TOLERANCE=EQUIVALENCE_TOLERANCE),
        figures=[figure],
        table=dict(
            columns=["setting", "N", "cycles", "writer peaks", "largest spread", "outage: peaks", "outage − launch"],
            rows=[
                [
                    c["setting"],
                    str(c["n_jobs"]),
                    f"{c['cycles']:,}",
                    f"{c['min_peak']}..{c['max_peak']}",
                    fmt(c["max_spread"]),
                    f"{c['outage_min_peak']}..{c['outage_max_peak']}",
                    fmt(c["outage_difference"]),
                ]
                for c in cells
            ],
        ),
        fleets=len(cells),
        cycles=cycles,
        worst_relative_difference=worst,
    )


def _regime(cells, fits, outcomes) -> str:
    """Where the law held and where not, grouped by claim 2's λ_1 (neutral: 1; else expanding
    or capped), in prose drawn from the cells' verdicts."""
    neutral = [c for c, (s, n) in enumerate(cells) if expansion(s, n) == 1]
    other = [c for c in range(len(cells)) if c not in neutral]

    def slopes(group) -> str:
        values = [fits[c]["slope"] for c in group if np.isfinite(fits[c]["slope"])]
        if not values:
            return "n/a"
        low, high = fmt(min(values)), fmt(max(values))
        return low if low == high else f"{low} to {high}"

    text = []
    if neutral:
        held = all(outcomes[c] != NOT_REPRODUCED for c in neutral)
        text.append(
            f"Where the synchronous state is neutral (claim 2's λ_j all 1: "
            f"{fmt_list([f'{cells[c][0]}, N = {cells[c][1]}' for c in neutral])}) the slope is {slopes(neutral)}"
            + (
                ", consistent with a driftless random walk of the firings that must spread by m"
                if held
                else ", and some contradict the law"
            )
            + "."
        )
    if other:
        failed = all(outcomes[c] == NOT_REPRODUCED for c in other)
        text.append(
            f"Where it expands (λ_1 = (N − 1) f(1)/f(N − 1) > 1: storage contention with N ≥ 3) or a cap binds "
            f"({fmt_list([f'{cells[c][0]}, N = {cells[c][1]}' for c in other])}) the slope is {slopes(other)}"
            + (
                ": the jitter is amplified geometrically, the storm ends within a few cycles and its lifetime "
                "grows about like log(m/σ), not (m/σ)². The claim does not hold in that regime."
                if failed
                else "; not every such cell contradicts the law at this size."
            )
        )
    return " ".join(text)


def _verdict_b(cells, ratios, fits, n_fires, n_fleets: int, figure: str, not_ok) -> dict:
    outcomes = [slope_verdict(*fit["ci"]) for fit in fits]
    outcome = rules.combine(outcomes)
    parts = []
    for (setting, n), fit, result in zip(cells, fits, outcomes):
        lam = expansion(setting, n)
        if np.isfinite(fit["slope"]):
            parts.append(f"{setting}, N = {n}: slope {fmt(fit['slope'])} {fmt_interval(*fit['ci'])}, {result}")
        else:
            parts.append(f"{setting}, N = {n}: fewer than {MIN_FIT_POINTS} usable points, inconclusive")
        if np.isfinite(lam) and lam > 1:
            slope_ln = log_law_slope(ratios, fit["means"])
            parts[-1] += (
                f" (λ_1 = {fmt(lam)}: mean lifetime grows by {fmt(slope_ln)} cycles per e-fold of m/σ, "
                f"1/ln λ_1 = {fmt(1 / math.log(lam))})"
            )
    why = (
        f"Launched together with compute jitter σ (m/σ = {fmt(ratios[0])} to {fmt(ratios[-1])}, m = D(1) = "
        f"{WRITE:g}, {n_fleets} fleets per point), the median number of cycles until fewer than N write at once, "
        "fitted on a log-log scale: " + "; ".join(parts) + ". " + _regime(cells, fits, outcomes)
    )
    if sum(not_ok):
        why += f" {sum(not_ok)} runs stopped early and count as censored."
    headline = "; ".join(f"{s}, N = {n}: {fmt(f['slope'])}" for (s, n), f in zip(cells, fits))
    return verdict(
        14,
        outcome,
        why,
        sub_claim="14b",
        title="with jitter σ the storm dissolves after ~(m/σ)² cycles",
        headline=f"lifetime ∝ (m/σ)^slope: {headline}",
        rule=(
            f"per cell, the {rules.CONFIDENCE:.0%} bootstrap interval (fleets resampled within each point) of the "
            f"slope of log(median lifetime) against log(m/σ) must lie inside {fmt(CLAIMED_SLOPE - SLOPE_MARGIN)}.."
            f"{fmt(CLAIMED_SLOPE + SLOPE_MARGIN)} (reproduced); wholly outside: not reproduced; straddling an edge, or "
            f"fewer than {MIN_FIT_POINTS} points with fewer than {MAX_CENSORED:.0%} censored fleets and a median of "
            f"at least {FIT_MIN_MEDIAN:g} cycles: inconclusive. Cells combine by the report's rule."
        ),
        thresholds=dict(
            CLAIMED_SLOPE=CLAIMED_SLOPE,
            SLOPE_MARGIN=SLOPE_MARGIN,
            MIN_FIT_POINTS=MIN_FIT_POINTS,
            FIT_MIN_MEDIAN=FIT_MIN_MEDIAN,
            MAX_CENSORED=MAX_CENSORED,
            CONFIDENCE=rules.CONFIDENCE,
        ),
        figures=[figure],
        table=dict(
            columns=["setting", "N", "λ_1", "median lifetime per m/σ", "censored", "slope", "interval", "verdict"],
            rows=[
                [
                    s,
                    str(n),
                    fmt(expansion(s, n)),
                    ", ".join(fmt(m) for m in f["medians"]),
                    f"{float(np.max(f['censored_fraction'])):.0%}",
                    fmt(f["slope"]),
                    fmt_interval(*f["ci"]),
                    o,
                ]
                for (s, n), f, o in zip(cells, fits, outcomes)
            ],
        ),
        ratios=ratios,
        cycles_run=n_fires,
        cell_verdicts=outcomes,
        slopes=[f["slope"] for f in fits],
    )


def _verdict_c(cells) -> dict:
    outcome = stagger_verdict(cells)
    fitting = [c for c in cells if c["fits"]]
    beyond = [c for c in cells if not c["fits"]]
    shown = [c for c in fitting if c["setting"] == STAGGER_SETTINGS[0]]
    why = (
        f"Every job failed by one outage restarts after R + kΔ (job k, Δ = D(1) = {STAGGER:g}). Where (N − 1)·D(1) "
        f"≤ T = {COMPUTE:g} (N = {fmt_list(sorted({c['n_jobs'] for c in fitting}))}): "
        + (
            "every cycle peaks at exactly one writer"
            if all(c["min_peak"] == c["max_peak"] == 1 for c in fitting)
            else "some cycle has more than one writer"
        )
        + f" over {fitting[0]['cycles'] if fitting else 0} cycles after the restart, and the extra down time per job "
        "(the engine's down time less R) averages "
        + ", ".join(f"{fmt(c['mean_extra_down'])} (N = {c['n_jobs']})" for c in shown)
        + " against (N − 1)Δ/2 = "
        + ", ".join(fmt(c["formula_extra_down"]) for c in shown)
        + "."
    )
    if beyond:
        why += (
            " Beyond, (N − 1)·D(1) > T, the N writes cannot fit in one cycle and the stagger cannot stay collision "
            "free: "
            + "; ".join(
                f"{c['setting']}, N = {c['n_jobs']}: peaks {c['min_peak']}..{c['max_peak']}, mean "
                f"{fmt(c['mean_peak_settled'])} after the first N cycles (together: {c['n_jobs']})"
                for c in beyond
            )
            + ". There the stagger "
            + (
                "lowers the mean peak below N but does not remove the collisions."
                if all(c["mean_peak_settled"] < c["n_jobs"] for c in beyond)
                else "does not lower the peaks below the storm's N."
            )
        )
    return verdict(
        14,
        outcome,
        why,
        sub_claim="14c",
        title="a restart stagger Δ = D(1) is collision free where (N − 1)·D(1) ≤ T",
        headline=(
            f"peak 1 in every cycle where (N − 1)·D(1) ≤ T; extra down time = (N − 1)Δ/2 (largest difference "
            f"{fmt(max((abs(c['mean_extra_down'] - c['formula_extra_down']) for c in fitting), default=float('nan')))})"
        ),
        rule=(
            "reproduced when every fleet with (N − 1)·D(1) ≤ T has exactly one writer at the peak of every cycle after "
            f"the replayed outage and a mean extra down time per job equal to (N − 1)Δ/2 to {DOWN_TOLERANCE:g} "
            "relative; not reproduced otherwise (exact). Fleets beyond that bound are reported, not judged."
        ),
        thresholds=dict(DOWN_TOLERANCE=DOWN_TOLERANCE, STAGGER=STAGGER),
        table=dict(
            columns=["setting", "N", "(N − 1)·D(1) ≤ T", "peaks", "mean peak (settled)", "extra down", "(N − 1)Δ/2"],
            rows=[
                [
                    c["setting"],
                    str(c["n_jobs"]),
                    "yes" if c["fits"] else "no",
                    f"{c['min_peak']}..{c['max_peak']}",
                    fmt(c["mean_peak_settled"]),
                    fmt(c["mean_extra_down"]),
                    fmt(c["formula_extra_down"]),
                ]
                for c in cells
            ],
        ),
        fleets=len(cells),
    )


EXPERIMENT = Experiment(
    name=NAME,
    title="storms after a common restart: fixed point, jitter lifetime, restart stagger, LLM cluster (claim 14 a-d)",
    claims=CLAIMS,
    sizes=SIZES,
    run=run,
)
