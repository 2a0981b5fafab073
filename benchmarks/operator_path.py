"""The operator's path against a compiled loop of the same model (issue 34, item 3).

An infrastructure engineer's fleet file (``examples/llm_cluster.toml``: 27 jobs of four
sizes, per-job write limits, a storage throughput table f(n), Poisson failures with
restarts) runs on ckpt_jax's general loop over a horizon, with `JobStats`. This script
times that path against a plain Numba loop of the same model: ``prange`` over the fleets,
one sequential event loop per fleet, O(N) per event (the sorts are done once per fleet,
as the sizes and limits do not change). The Numba loop mirrors ``ckpt_jax._loops.general``
restricted to what the file uses (docs/model.md §1, §1b, §1c, §1d):

* blocking writes (α = 0), no controller delay (τ = 0), no jitter, no snapshots, no
  recovery reads, the failure clock off while a job is down;
* power: the ``"maxmin"`` policy with a cap C (`ckpt_jax._rates.maxmin_level`; the count
  rule min(1, C/n_c) for fleets whose sizes are all 1, as `simulate` runs them);
* storage: the ``"fair"`` policy with write limits b_i, shared by water-filling,
  r_i = min(b_i, λ) with Σ r_i = f(n_w) (`ckpt_jax._rates._unit_fill`);
* failures and restarts (`ckpt_jax._loops.failures`): a failed job loses its work since its
  last completed write, abandons its write, is down for R_i, then redoes the lost cycle;
* a horizon H (`ckpt_jax._snapping.to_horizon`, `horizon_clock`) and the snapping rule
  (`snapped`): every job due within `SNAP_ULPS` ulps of the clock switches in the same step.

Failure draws: ckpt_jax draws from threefry streams per job; the Numba loop draws
Exp(M_i) with NumPy's generator inside Numba, seeded per fleet (same distribution, same
fleets and launches). With explicit failure times (``failure_times``) both take the same
failures, which the agreement check uses.

What it does:

1. checks agreement without failures over one day (the file as is, and with a binding
   cap of 16 MW so that the sizes matter): every fire time, every end time, the event counts
   and the per-job `JobStats` equal to <= 1e-9 relative; then with explicit failure times
   (the same failures on both sides): the same, plus lost work, failures and time down.
   It aborts (exit status 1) if any differs;
2. times the file over one day with failures for B fleets (``--sizes``; default 1, 128,
   1024, 8192; ``--quick``: 1, 128): ckpt_jax's ``simulate`` after a compiling call, the
   Numba loop after its compile, in alternating rounds (both see the same load; the best
   of ``--repeats``, ``--large-repeats`` above B = 1024, 5× as many at B = 1),
   ratio = Numba time / ckpt_jax time (> 1: ckpt_jax is faster), with the drawn
   failures' means compared as a check (the same distribution: within 6 standard errors);
3. a per-mechanism table at B = 128 (``--mechanism-fleets``): the file as is, then with
   failures off, write limits off, all sizes 1, everything off, and a binding cap
   (16 MW, failures on), all compiled first and then called in ``--mechanism-repeats``
   rounds of every row: each row's ckpt_jax and Numba times (best of the rounds), their
   ratio, and the cost of the mechanism the row switches off, (time of the file as is) /
   (time of the row), the median over rounds of the ratio within a round (wall and CPU
   time; per job-update, N × events, for ckpt_jax; and Numba's);
4. on two XLA host devices (``--two-devices``, the default): every B >= 2 again in a
   subprocess started with ``--xla_force_host_platform_device_count=2``, ckpt_jax's batch
   sharded over both (``devices="all"``, checked equal to one device first), against the
   Numba loop in the same rounds;
5. the fused kernels of one loop iteration (``--kernels-fleets``, B = 128): the file run in
   a subprocess that dumps XLA's optimized HLO; the innermost while body of the biggest
   module (the general loop's ``advance``) counted by kind (fusions, gather/scatter fusions,
   copies, the conditional; the conditional's branches are not counted);
6. ``ckpt-jax assess`` and ``ckpt-jax design`` of the file with their defaults
   (``--cli-repeats`` rounds; ``--cli-variants``: also with ``--devices 1``, with
   ``CKPT_JAX_CPU_FLAGS=0`` and with both, paired per round), the wall time of the whole
   process (import, compile, run, report) of this checkout's ckpt_jax;
7. writes ``operator_path.json`` under ``--out`` and prints markdown tables.

Every variant runs from the same launches (the file's `random_state`, one key per fleet,
as `assess` draws them) and on ``method="general"``, the operator's path.

Usage:
  python benchmarks/operator_path.py --quick --out /tmp/op
  python benchmarks/operator_path.py --out benchmarks/results        # B = 1, 128, 1024, 8192
  python benchmarks/operator_path.py --sizes 1 128 1024 --out /tmp/op
  python benchmarks/operator_path.py --sizes 1 128 1024 --mechanism-fleets 0 --cli-repeats 2   # issue 48's run
  python benchmarks/operator_path.py --cli-only --cli-commands assess --cli-repeats 3 --cli-variants

This is benchmark code, not library code: ckpt_jax does not depend on Numba.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time

import numpy as np
from numba import njit, prange

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
FLEET_FILE = os.path.join(ROOT, "examples", "llm_cluster.toml")
DAY = 86400.0  # the fleet file's times are in seconds (its time_unit only names the reports' unit)
BINDING_CAP_W = 16e6  # the file's suggestion for a binding cap, in watts
# Must equal ckpt_jax._snapping.SNAP_ULPS (checked before the agreement test).
_SNAP_ULPS = 8
STATUS_MAX_EVENTS = 1  # int(ckpt_jax.Status.MAX_EVENTS): Numba code takes plain ints
STATUS_NONFINITE = 2  # int(ckpt_jax.Status.NONFINITE)
TOLERANCE = 1e-9


# --------------------------------------------------------------------------- Numba loop
@njit(cache=True)
def _maxmin_level(size, computing, cap, size_order):
    """`ckpt_jax._rates.maxmin_level`: the level λ with Σ_{j∈S} min(w_j, λ) = C, or inf
    where Σ_S w_j <= C. ``size_order`` sorts the sizes ascending once per fleet; walking it
    and skipping the jobs outside S visits S's sizes in ascending order (ties are equal
    values, so their order does not matter), with the same prefix sums, left to right."""
    m = 0
    total = 0.0
    for i in range(size.shape[0]):
        if computing[i]:
            m += 1
            total += size[i]
    if not total > cap:
        return np.inf
    before = 0.0
    k = 0
    last = cap
    for j in range(size_order.shape[0]):
        i = size_order[j]
        if not computing[i]:
            continue
        level = (cap - before) / max(m - k, 1)
        if level <= size[i]:
            return level
        last = level
        before += size[i]
        k += 1
    # Rounding left no k fitting: the largest job alone is throttled (as maxmin_level).
    return last


@njit(cache=True)
def _fill_level(total, limit, writers, n_writers, limit_order):
    """`ckpt_jax._rates._unit_fill`'s level: the first λ_k = (f(n_w) − Σ_{j<k} b_j) / (n_w − k)
    with λ_k <= b_k over the writers sorted by limit (``limit_order``, sorted once per
    fleet), inf where none fits (every writer at its limit). Rates r_i = min(b_i, λ)."""
    before = 0.0
    k = 0
    for j in range(limit_order.shape[0]):
        i = limit_order[j]
        if not writers[i]:
            continue
        level = (total - before) / (n_writers - k)
        if level <= limit[i]:
            return level
        before += limit[i]
        k += 1
    return np.inf


@njit(cache=True)
def _listed_after(row, after, failed_at):
    """`failures.failure_time` with explicit times: the first listed time at or after
    ``after`` and after ``failed_at`` (the rows are sorted: the passed times are a prefix)."""
    for f in range(row.shape[0]):
        if not (row[f] < after or row[f] <= failed_at):
            return row[f]
    return np.inf


@njit(cache=True)
def _run_fleet(
    compute,
    write,
    size,
    cap,
    table,
    active,
    limit,
    mtbf,
    restart,
    phase,
    remaining,
    size_order,
    limit_order,
    sized,
    listed,
    failure_list,
    horizon,
    max_events,
    snap,
    seed,
    fire_times,
    end_times,
    stats,
    counts,
):
    """One fleet's event loop, `general.switch` for α = 0, τ = 0, no jitter, "maxmin"
    (``sized``) or the count rule, "fair" storage with write limits, failures (drawn, or
    ``listed`` in ``failure_list``) and the horizon. Fills ``fire_times`` / ``end_times``
    (N, K), ``stats`` (N, 5: write time, down time, useful work, lost work, compute time)
    and ``counts`` (N, 3: firings, completed writes, failures). Returns (events, status, time)."""
    n_jobs = compute.shape[0]
    n_trace = fire_times.shape[1]
    np.random.seed(seed)  # Numba's generator, thread-local: one fleet runs on one thread
    draining = np.zeros(n_jobs, np.bool_)
    down = np.zeros(n_jobs, np.bool_)
    writers = np.zeros(n_jobs, np.bool_)
    computing = np.zeros(n_jobs, np.bool_)
    write_left = np.zeros(n_jobs)
    compute_left = np.zeros(n_jobs)
    write_rate = np.zeros(n_jobs)
    speed = np.ones(n_jobs)
    write_dt = np.full(n_jobs, np.inf)
    compute_dt = np.full(n_jobs, np.inf)
    # The accounting of `failures.WorkCarry`.
    phase_work = np.zeros(n_jobs)
    uncovered = np.zeros(n_jobs)
    pending = np.zeros(n_jobs)
    up_at = np.zeros(n_jobs)
    next_failure = np.full(n_jobs, np.inf)
    fire_count = np.zeros(n_jobs, np.int64)
    for i in range(n_jobs):
        if not active[i]:
            continue
        if phase[i] == 1:  # an initial write: it saves nothing
            draining[i] = True
            write_left[i] = remaining[i]
            compute_left[i] = compute[i]
        else:  # work done before t = 0 counts nowhere
            compute_left[i] = remaining[i]
        phase_work[i] = compute_left[i]
        if listed:
            next_failure[i] = _listed_after(failure_list[i], 0.0, -np.inf)
        elif np.isfinite(mtbf[i]):
            next_failure[i] = np.random.exponential(1.0) * mtbf[i]
    clock = 0.0
    n_events = 0
    status = 0
    while clock < horizon:
        if n_events >= max_events:
            status |= STATUS_MAX_EVENTS
            break
        # The rates (`general.rates`): a job that is down counts nowhere.
        n_writers = 0
        n_computing = 0
        for i in range(n_jobs):
            live = active[i] and not down[i]
            writers[i] = live and draining[i]
            computing[i] = live and not draining[i]
            n_writers += writers[i]
            n_computing += computing[i]
        level = _fill_level(table[n_writers], limit, writers, n_writers, limit_order)
        if sized:
            load = _maxmin_level(size, computing, cap, size_order)
            for i in range(n_jobs):
                speed[i] = 1.0 if size[i] <= load else load / size[i]
        else:
            common = cap / max(n_computing, 1) if n_computing > cap else 1.0
            for i in range(n_jobs):
                speed[i] = common
        # The next event: the first phase to empty, failure or restart end.
        dt = np.inf
        for i in range(n_jobs):
            write_dt[i] = np.inf
            compute_dt[i] = np.inf
            if writers[i]:
                write_rate[i] = min(limit[i], level)
                write_dt[i] = write_left[i] / write_rate[i]
                dt = min(dt, write_dt[i])
            elif computing[i]:
                compute_dt[i] = compute_left[i] / speed[i]
                dt = min(dt, compute_dt[i])
            if active[i]:
                dt = min(dt, next_failure[i] - clock)
                if down[i]:
                    dt = min(dt, up_at[i] - clock)
        # The horizon (`to_horizon`, `horizon_clock`).
        left = max(horizon - clock, 0.0)
        if dt >= left - snap * horizon:
            dt = left
        if not np.isfinite(dt):
            status |= STATUS_NONFINITE
            break
        before = clock
        clock = horizon if dt >= horizon - clock else clock + dt
        step = clock - before  # the observers' interval
        tol = dt + snap * clock  # the time half of the snapping rule
        for i in range(n_jobs):
            if not active[i]:
                continue
            # Intervals: the jobs observer's write time, the accounting's time down.
            if writers[i]:
                stats[i, 0] += step
            if down[i]:
                stats[i, 1] += dt
            ends = False
            completes = False
            if writers[i]:
                write_left[i] -= write_rate[i] * dt
                ends = write_dt[i] <= tol or write_left[i] <= snap * write[i]
            elif computing[i]:
                compute_left[i] -= speed[i] * dt
                completes = compute_dt[i] <= tol or compute_left[i] <= snap * compute[i]
            if ends:  # (1) the drain ends: it saves the work its firing moved into pending
                if fire_count[i] >= 1:
                    if fire_count[i] <= n_trace:
                        end_times[i, fire_count[i] - 1] = clock
                    counts[i, 1] += 1
                draining[i] = False
                write_left[i] = 0.0
                stats[i, 2] += pending[i]
                pending[i] = 0.0
            if completes:  # (2) the compute phase ends: the job fires, its write starts
                if fire_count[i] < n_trace:
                    fire_times[i, fire_count[i]] = clock
                fire_count[i] += 1
                draining[i] = True
                write_left[i] = write[i]
                compute_left[i] = compute[i]
                pending[i] = uncovered[i] + phase_work[i]
                uncovered[i] = 0.0
                phase_work[i] = compute[i]
            # (3) restart ends, then failures (`failures.switch`).
            if down[i] and up_at[i] - before <= tol:
                down[i] = False
            if not down[i] and next_failure[i] - before <= tol:
                failed_at = next_failure[i] if listed else clock
                back = failed_at + restart[i]
                stats[i, 3] += pending[i] + uncovered[i] + (phase_work[i] - compute_left[i])
                counts[i, 2] += 1
                if listed:
                    next_failure[i] = _listed_after(failure_list[i], back, failed_at)
                elif np.isfinite(mtbf[i]):
                    next_failure[i] = back + np.random.exponential(1.0) * mtbf[i]
                else:
                    next_failure[i] = np.inf
                down[i] = restart[i] > 0
                up_at[i] = back
                phase_work[i] = compute[i]  # the lost cycle again from the start
                compute_left[i] = compute[i]
                uncovered[i] = 0.0
                pending[i] = 0.0
                draining[i] = False
                write_left[i] = 0.0
        n_events += 1
    for i in range(n_jobs):
        counts[i, 0] = fire_count[i]
        stats[i, 4] = clock - stats[i, 0] - stats[i, 1]
    return n_events, status, clock


@njit(parallel=True, cache=True)
def _run_batch(
    compute,
    write,
    size,
    cap,
    table,
    active,
    limit,
    mtbf,
    restart,
    phase,
    remaining,
    size_order,
    limit_order,
    sized,
    listed,
    failure_list,
    horizon,
    max_events,
    snap,
    seed,
    fire_times,
    end_times,
    stats,
    counts,
    n_events,
    status,
    clock,
):
    for b in prange(compute.shape[0]):
        n_events[b], status[b], clock[b] = _run_fleet(
            compute[b],
            write[b],
            size[b],
            cap[b],
            table[b],
            active[b],
            limit[b],
            mtbf[b],
            restart[b],
            phase[b],
            remaining[b],
            size_order[b],
            limit_order[b],
            sized[b],
            listed,
            failure_list[b],
            horizon,
            max_events,
            snap,
            seed + b,
            fire_times[b],
            end_times[b],
            stats[b],
            counts[b],
        )


def numba_inputs(fleet, state) -> dict:
    """The Numba loop's (B, ...) float64 arrays of a batched `Fleet` and its `State`, with
    the per-fleet sort orders of the sizes and the limits (static: sorted once)."""
    shape = np.shape(fleet.compute)
    per_job = lambda x: np.ascontiguousarray(np.broadcast_to(np.asarray(x, np.float64), shape))  # noqa: E731
    size, limit = per_job(fleet.size), per_job(fleet.write_limit)
    active = np.ascontiguousarray(np.broadcast_to(np.asarray(fleet.active), shape))
    return dict(
        compute=per_job(fleet.compute),
        write=per_job(fleet.write),
        size=size,
        cap=np.ascontiguousarray(np.broadcast_to(np.asarray(fleet.cap, np.float64), shape[:-1])),
        table=np.ascontiguousarray(np.asarray(fleet.throughput, np.float64)),
        active=active,
        limit=limit,
        mtbf=per_job(fleet.mtbf),
        restart=per_job(fleet.restart),
        phase=np.ascontiguousarray(np.asarray(state.phase), np.int64),
        remaining=per_job(state.remaining),
        size_order=np.argsort(size, axis=-1, kind="stable"),
        limit_order=np.argsort(limit, axis=-1, kind="stable"),
        # As `simulate`: fleets whose sizes are all 1 run on the count rule.
        sized=np.any(active & (size != 1), axis=-1),
    )


def simulate_numba(
    inputs: dict, horizon: float, *, n_fires: int = 0, seed: int = 0, failure_times=None, max_events=10**8
):
    """Runs the batch ``inputs`` (`numba_inputs`) to ``horizon``: failures drawn (seed
    ``seed + b`` for fleet b) or taken from ``failure_times`` (B, N, F). ``n_fires``: trace
    columns to record (0: none). Returns a dict of NumPy arrays."""
    n_fleets, n_jobs = inputs["compute"].shape
    listed = failure_times is not None
    failures = np.zeros((n_fleets, n_jobs, 1)) if not listed else np.ascontiguousarray(failure_times, np.float64)
    fire_times = np.full((n_fleets, n_jobs, n_fires), np.nan)
    end_times = np.full((n_fleets, n_jobs, n_fires), np.nan)
    stats = np.zeros((n_fleets, n_jobs, 5))
    counts = np.zeros((n_fleets, n_jobs, 3), np.int64)
    n_events = np.zeros(n_fleets, np.int64)
    status = np.zeros(n_fleets, np.int64)
    clock = np.zeros(n_fleets)
    snap = np.finfo(np.float64).eps * _SNAP_ULPS
    _run_batch(
        *(inputs[name] for name in NUMBA_ARGS),
        listed,
        failures,
        float(horizon),
        int(max_events),
        snap,
        int(seed),
        fire_times,
        end_times,
        stats,
        counts,
        n_events,
        status,
        clock,
    )
    active = inputs["active"]
    nan = lambda x: np.where(active, x, np.nan)  # noqa: E731
    return dict(
        fire_times=fire_times,
        end_times=end_times,
        n_events=n_events,
        status=status,
        time=clock,
        write_time=nan(stats[..., 0]),
        down_time=nan(stats[..., 1]),
        useful_work=nan(stats[..., 2]),
        lost_work=nan(stats[..., 3]),
        compute_time=nan(stats[..., 4]),
        fire_count=counts[..., 0],
        writes=np.where(active, counts[..., 1], -1),
        failures=np.where(active, counts[..., 2], -1),
    )


NUMBA_ARGS = (
    "compute",
    "write",
    "size",
    "cap",
    "table",
    "active",
    "limit",
    "mtbf",
    "restart",
    "phase",
    "remaining",
    "size_order",
    "limit_order",
    "sized",
)


# --------------------------------------------------------------------------- fleets
NOTES = {  # what each row's mechanism does to the rates of the file's fleet
    "as is": "sizes, write limits, f(n), failures, no cap",
    "failures off": "failures and restart ends are events (under 1 % more); a down job counts nowhere",
    "write limits off": "the limits bind: a lone 70B or 8B writer drains at b < f(1)",
    "sizes all 1": "without a cap the sizes cannot change any rate",
    "everything off": "unit sizes, no limits, no failures: the base model with f(n)",
    "binding cap (16 MW)": "the cap binds while nearly every job computes; sizes then matter",
}
MECHANISMS = {  # row -> (failures, write limits, sizes, binding cap)
    "as is": (True, True, True, False),
    "failures off": (False, True, True, False),
    "write limits off": (True, False, True, False),
    "sizes all 1": (True, True, False, False),
    "everything off": (False, False, False, False),
    "binding cap (16 MW)": (True, True, True, True),
}


def load_spec():
    from ckpt_jax import fleetfile

    spec = fleetfile.load(FLEET_FILE)
    assert spec.power_policy == "maxmin" and spec.storage_policy == "fair", "the Numba loop serves maxmin + fair"
    assert spec.delay == 0 and spec.async_fraction == 0 and not spec.has_snapshots
    return spec


def make_fleet(spec, n_fleets: int, *, failures=True, limits=True, sizes=True, binding_cap=False):
    """The file's fleet as a batch of ``n_fleets``, with mechanisms switched off: no
    failures (mtbf inf, no restart), no write limits (b = inf), all sizes 1, or the cap at
    16 MW (in the file's power unit, GPUs)."""
    import ckpt_jax as cj

    base = spec.fleet(dtype=np.float64, failures=failures)
    n_jobs = base.n_jobs
    shape = (n_fleets, n_jobs)
    per_job = lambda x: np.broadcast_to(np.asarray(x, np.float64), shape)  # noqa: E731
    cap = None
    if binding_cap:
        cap = BINDING_CAP_W / spec.power_per_gpu
    elif np.isfinite(float(np.asarray(base.cap))):
        cap = float(np.asarray(base.cap))
    return cj.Fleet(
        per_job(base.compute),
        per_job(base.write),
        cap=cap,
        throughput=np.broadcast_to(np.asarray(base.throughput, np.float64), (n_fleets, n_jobs + 1)),
        size=per_job(base.size) if sizes else np.ones(shape),
        power_policy=spec.power_policy,
        storage_policy=spec.storage_policy,
        mtbf=per_job(base.mtbf) if failures else None,
        restart=per_job(base.restart) if failures else 0.0,
        write_limit=per_job(base.write_limit) if limits else np.full(shape, np.inf),
        idle_power=float(np.asarray(base.idle_power)),
        dtype=np.float64,
    )


def launches(spec, n_fleets: int, seed: int):
    """The file's random launches, one key per fleet (as `assess` draws them), from the
    fleet as it is: every variant starts from the same phases and remaining work."""
    import jax

    import ckpt_jax as cj

    keys = jax.random.split(jax.random.PRNGKey(seed), n_fleets)
    return cj.random_state(make_fleet(spec, n_fleets), keys), keys


def simulate_jax(fleet, state, keys, horizon, *, trace=False, n_fires=None, failure_times=None, devices=None):
    import jax

    import ckpt_jax as cj

    out = cj.simulate(
        fleet,
        state,
        n_fires,
        until=horizon,
        key=keys,
        method="general",
        save=cj.SaveAt(trace=trace, jobs=True),
        progress=False,
        failure_times=failure_times,
        devices=devices,
    )
    return jax.block_until_ready(out)


# --------------------------------------------------------------------------- agreement
def rel_diff(a, b) -> float:
    """max |a − b| / max(1, max |a|), inf where the NaN patterns differ."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    if not np.array_equal(np.isnan(a), np.isnan(b)):
        return float("inf")
    if not np.isfinite(a).any():
        return 0.0
    scale = max(1.0, float(np.nanmax(np.abs(a))))
    return float(np.nanmax(np.abs(a - b)) / scale)


def listed_failures(fleet, n_fleets: int, horizon: float, seed: int) -> np.ndarray:
    """(B, N, F) explicit failure times: a Poisson process of each job's mtbf up to the
    horizon (gaps Exp(M_i)), padded with +inf; some fall into restarts and are discarded
    by both loops alike."""
    rng = np.random.default_rng(seed)
    mtbf = np.broadcast_to(np.asarray(fleet.mtbf, np.float64), np.shape(fleet.compute))
    n_max = int(np.ceil(horizon / mtbf.min() * 3 + 10))
    times = np.cumsum(rng.exponential(size=mtbf.shape + (n_max,)) * mtbf[..., None], axis=-1)
    return np.where(times <= horizon, times, np.inf)


def check_agreement(spec, n_fleets: int, seed: int) -> dict:
    """Numba vs ckpt_jax over one day: the whole trace and `JobStats` to <= 1e-9, the same
    event counts. Without failures (the file as is; a binding cap), then with the same
    explicit failure times on both sides."""
    from ckpt_jax._snapping import SNAP_ULPS

    assert _SNAP_ULPS == SNAP_ULPS, "operator_path._SNAP_ULPS must match ckpt_jax's SNAP_ULPS"
    state, keys = launches(spec, n_fleets, seed)
    cases = {
        "no failures": dict(failures=False),
        "no failures, binding cap": dict(failures=False, binding_cap=True),
        "listed failures": dict(failures=True),
        "listed failures, binding cap": dict(failures=True, binding_cap=True),
    }
    results = {}
    for name, options in cases.items():
        fleet = make_fleet(spec, n_fleets, **options)
        listed = listed_failures(fleet, n_fleets, DAY, seed + 1) if options["failures"] else None
        n_fires = int(DAY / float(np.min(fleet.compute))) + 2  # more columns than any job fires
        trace = simulate_jax(fleet, state, keys, DAY, trace=True, n_fires=n_fires, failure_times=listed)
        out = simulate_numba(numba_inputs(fleet, state), DAY, n_fires=n_fires, failure_times=listed)
        jobs = trace.jobs
        fields = ["write_time", "compute_time", "useful_work", "lost_work", "down_time"]
        row = dict(
            fire_times=rel_diff(trace.fire_times, out["fire_times"]),
            end_times=rel_diff(trace.end_times, out["end_times"]),
            **{field: rel_diff(getattr(jobs, field), out[field]) for field in fields},
        )
        same = dict(
            n_events=bool(np.array_equal(np.asarray(trace.n_events), out["n_events"])),
            writes=bool(np.array_equal(np.asarray(jobs.writes), out["writes"])),
            failures=bool(np.array_equal(np.asarray(jobs.failures), out["failures"])),
            time=bool(np.array_equal(np.asarray(trace.time), out["time"])),
            ok=bool(np.all(np.asarray(trace.ok))) and bool(np.all(out["status"] == 0)),
        )
        worst = max(row.values())
        results[name] = dict(
            max_rel=worst,
            **row,
            **same,
            events=int(np.sum(out["n_events"])),
            failures_taken=int(np.sum(np.maximum(out["failures"], 0))),
            fleets=n_fleets,
        )
        print(f"  agreement, {name}: max rel diff {worst:.2e}, same events/writes/failures/time/ok {same}")
        if not (worst <= TOLERANCE and all(same.values())):
            print(json.dumps(results[name], indent=1), file=sys.stderr)
            raise SystemExit(f"Numba and ckpt_jax disagree ({name}): see above")
    return results


def check_statistics(trace, out) -> dict:
    """Drawn failures (threefry vs Numba's generator): the same distribution, so fleet
    means agree within the noise; reported, and a gross difference aborts."""
    useful_jax = np.nansum(np.asarray(trace.jobs.useful_work), axis=-1)
    useful_numba = np.nansum(out["useful_work"], axis=-1)
    fails_jax = np.sum(np.maximum(np.asarray(trace.jobs.failures), 0), axis=-1)
    fails_numba = np.sum(np.maximum(out["failures"], 0), axis=-1)
    n = useful_jax.size
    gap = abs(useful_jax.mean() - useful_numba.mean())
    noise = np.sqrt((useful_jax.var() + useful_numba.var()) / n) if n > 1 else np.inf
    row = dict(
        useful_work_mean=(float(useful_jax.mean()), float(useful_numba.mean())),
        failures_mean=(float(fails_jax.mean()), float(fails_numba.mean())),
        useful_gap_in_se=float(gap / noise) if noise > 0 else 0.0,
    )
    if n > 1 and gap > 6 * noise:
        raise SystemExit(f"Numba and ckpt_jax differ in distribution with drawn failures: {row}")
    return row


# --------------------------------------------------------------------------- timing
def time_cases(spec, n_fleets: int, seed: int, repeats: int, cases: dict, devices=None) -> dict:
    """ckpt_jax and Numba on the same fleets and launches, one day, for each case (name ->
    `make_fleet` options). Every case is compiled first (not timed; ckpt_jax to a short
    horizon, which compiles the same program), then ``repeats`` rounds call every case
    once, ckpt_jax then Numba, so that the rows of one round see the same load on the
    machine. Per case: each engine's best time, their ratio, and the per-round times (the
    on/off ratios of the mechanism table are paired per round). ``devices``: ckpt_jax's
    batch sharded over them (`simulate(..., devices=...)`)."""
    prepared = {}
    for name, options in cases.items():
        fleet = make_fleet(spec, n_fleets, **options)
        state, keys = launches(spec, n_fleets, seed)
        inputs = numba_inputs(fleet, state)
        start = time.perf_counter()
        simulate_jax(fleet, state, keys, DAY / 50, devices=devices)
        first_jax = time.perf_counter() - start
        simulate_numba({k: v[:1] for k, v in inputs.items()}, DAY, seed=seed)  # compile (or load the cache)
        prepared[name] = (fleet, state, keys, inputs, first_jax)
    runs = {name: dict(jax=[], numba=[], jax_cpu=[], numba_cpu=[], load=[]) for name in cases}
    last = {}
    for _ in range(repeats):
        for name, (fleet, state, keys, inputs, _) in prepared.items():
            times = runs[name]
            start, cpu = time.perf_counter(), time.process_time()
            trace = simulate_jax(fleet, state, keys, DAY, devices=devices)
            times["jax"].append(time.perf_counter() - start)
            times["jax_cpu"].append(time.process_time() - cpu)
            start, cpu = time.perf_counter(), time.process_time()
            out = simulate_numba(inputs, DAY, seed=seed)
            times["numba"].append(time.perf_counter() - start)
            times["numba_cpu"].append(time.process_time() - cpu)
            times["load"].append(os.getloadavg()[0])
            last[name] = (trace, out)
    rows = {}
    for name, options in cases.items():
        fleet, first_jax = prepared[name][0], prepared[name][4]
        trace, out = last[name]
        if not (np.all(np.asarray(trace.ok)) and np.all(out["status"] == 0)):
            raise SystemExit(f"a run did not complete (B = {n_fleets}, {name})")
        times = runs[name]
        jax_s, numba_s = min(times["jax"]), min(times["numba"])
        events_jax = int(np.sum(np.asarray(trace.n_events)))
        events_numba = int(np.sum(out["n_events"]))
        n_jobs = fleet.n_jobs
        row = dict(
            fleets=n_fleets,
            jax_s=jax_s,
            jax_runs_s=times["jax"],
            jax_first_call_s=first_jax,  # compile + a run to H / 50
            numba_s=numba_s,
            numba_runs_s=times["numba"],
            ratio=numba_s / jax_s,
            # CPU time of all threads (XLA's and Numba's alike): steadier on a shared machine.
            jax_cpu_s=min(times["jax_cpu"]),
            numba_cpu_s=min(times["numba_cpu"]),
            jax_cpu_runs_s=times["jax_cpu"],
            numba_cpu_runs_s=times["numba_cpu"],
            cpu_ratio=min(times["numba_cpu"]) / min(times["jax_cpu"]),
            round_ratios=[n / j for n, j in zip(times["numba"], times["jax"])],
            events_jax=events_jax,
            events_numba=events_numba,
            jax_job_updates_per_s=events_jax * n_jobs / jax_s,
            numba_job_updates_per_s=events_numba * n_jobs / numba_s,
            jax_us_per_iteration=jax_s / max(int(np.max(np.asarray(trace.n_events))), 1) * 1e6,
            load_average_1min=times["load"],
        )
        if options.get("failures", True):
            row["statistics"] = check_statistics(trace, out)
        rows[name] = row
    return rows


def paired_cost(full: dict, row: dict, key: str) -> float:
    """Median over rounds of (the file as is) / (this row), times of one round paired."""
    return float(np.median(np.asarray(full[key]) / np.asarray(row[key])))


def environment() -> dict:
    import jax
    import numba

    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    except OSError:
        commit = ""
    return dict(
        commit=commit,
        python=platform.python_version(),
        jax=jax.__version__,
        numba=numba.__version__,
        numba_threads=int(numba.get_num_threads()),
        cpus=os.cpu_count(),
        machine=platform.machine(),
        load_average=os.getloadavg(),
        date=time.strftime("%Y-%m-%d %H:%M:%S"),
    )


# --------------------------------------------------------------------------- subprocesses
def spawn_child(args: list, extra_xla_flags: str, timeout: float) -> dict:
    """This script in a fresh process with ``extra_xla_flags`` added to ``XLA_FLAGS`` (JAX
    reads them when its backend starts); its last ``RESULT`` line, parsed, or the error."""
    env = dict(os.environ, XLA_FLAGS=f"{os.environ.get('XLA_FLAGS', '')} {extra_xla_flags}".strip())
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [ROOT, os.environ.get("PYTHONPATH")]))
    try:
        done = subprocess.run(
            [sys.executable, os.path.abspath(__file__), *args], env=env, capture_output=True, text=True, timeout=timeout
        )
    except subprocess.TimeoutExpired:
        return dict(error=f"timed out after {timeout:.0f} s")
    results = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    if done.returncode != 0 or not results:
        return dict(error=(done.stderr or done.stdout)[-3000:])
    return json.loads(results[-1][len("RESULT ") :])


def child_two_devices(spec, sizes, seed: int, repeats: int) -> dict:
    """In a process with two XLA host devices: every B >= 2 timed as `time_cases` does with
    ckpt_jax's batch sharded over both (``devices="all"``: each core runs its own loop),
    after checking that the sharded run equals the one-device run (events, useful work)."""
    import jax

    devices = jax.local_devices()
    rows = []
    for n_fleets in sizes:
        if n_fleets < 2:
            continue
        fleet = make_fleet(spec, n_fleets)
        state, keys = launches(spec, n_fleets, seed)
        one = simulate_jax(fleet, state, keys, DAY / 50)
        two = simulate_jax(fleet, state, keys, DAY / 50, devices="all")
        for a, b in ((one.n_events, two.n_events), (one.jobs.useful_work, two.jobs.useful_work)):
            if not np.array_equal(np.asarray(a), np.asarray(b), equal_nan=True):
                raise SystemExit(f"B = {n_fleets}: two host devices do not give the one-device results")
        rounds = repeats if n_fleets > 1 else repeats * 5
        row = time_cases(spec, n_fleets, seed, rounds, {"as is": {}}, devices="all")["as is"]
        row["devices"] = len(devices)
        rows.append(row)
    return dict(devices=len(devices), sizes=rows)


def child_kernels(spec, n_fleets: int, seed: int) -> dict:
    """One short run of the file (the caller dumps XLA's optimized HLO)."""
    fleet = make_fleet(spec, n_fleets)
    state, keys = launches(spec, n_fleets, seed)
    simulate_jax(fleet, state, keys, DAY / 50)
    return dict(fleets=n_fleets)


def loop_kernels(spec_fleets: int, seed: int, timeout: float) -> dict:
    """The fused kernels of one loop iteration: the file run in a fresh process that dumps
    XLA's optimized HLO; the innermost, largest ``while`` body of the biggest module is
    counted (`observers_bench.loop_body_kernels`: fusions, with the scatters and gathers
    among them apart, copies and the other kernels)."""
    import tempfile

    sys.path.insert(0, HERE)
    from observers_bench import loop_body_kernels

    with tempfile.TemporaryDirectory() as dump:
        child = spawn_child(
            ["--child", "kernels", "--sizes", str(spec_fleets), "--seed", str(seed)],
            f"--xla_dump_to={dump} --xla_dump_hlo_as_text",
            timeout,
        )
        if "error" in child:
            return child
        return loop_body_kernels(dump)


# The operator's commands timed with their defaults (the ckpt-jax program: its XLA flags and
# host devices as it sets them); ``--cli-variants`` adds each with its CPU defaults off.
CLI_COMMANDS = ("assess", "design")
CLI_VARIANTS = {
    "defaults": ([], {}),
    "--devices 1": (["--devices", "1"], {}),
    "CKPT_JAX_CPU_FLAGS=0": ([], {"CKPT_JAX_CPU_FLAGS": "0"}),
    "both off": (["--devices", "1"], {"CKPT_JAX_CPU_FLAGS": "0"}),
}


def time_cli(commands, repeats: int, variants) -> list:
    """``python -m ckpt_jax COMMAND examples/llm_cluster.toml`` with its defaults (this
    checkout's ckpt_jax), wall time of the whole process (import, compile, run, report), in
    ``repeats`` rounds of every command and variant in turn (rows of one round see the same
    load). Per row: every round's seconds and load average, and the devices line printed."""
    import tempfile

    rows = {
        (command, name): dict(command=command, variant=name, seconds=[], load=[])
        for command in commands
        for name in variants
    }
    for _ in range(repeats):
        for (command, name), row in rows.items():
            options, environ = CLI_VARIANTS[name]
            env = dict(os.environ, **environ)
            env["PYTHONPATH"] = os.pathsep.join(filter(None, [ROOT, os.environ.get("PYTHONPATH")]))
            with tempfile.TemporaryDirectory() as out:
                argv = [sys.executable, "-m", "ckpt_jax", command, FLEET_FILE, "--no-progress", "--force", "--out", out]
                start = time.perf_counter()
                done = subprocess.run(argv + options, env=env, capture_output=True, text=True)
                row["seconds"].append(time.perf_counter() - start)
            row["load"].append(os.getloadavg()[0])
            row["returncode"] = done.returncode
            row["devices_line"] = next((line for line in done.stdout.splitlines() if " device" in line), "")
            if done.returncode not in (0, 1):
                row["error"] = done.stderr[-2000:]
            print(f"  {command} ({name}): {row['seconds'][-1]:.1f} s, exit {done.returncode}", flush=True)
    for row in rows.values():
        row["best_s"] = min(row["seconds"])
        row["median_s"] = float(np.median(row["seconds"]))
    return list(rows.values())


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1, 128, 1024, 8192], help="batch sizes B")
    parser.add_argument("--quick", action="store_true", help="B = 1, 128 only")
    parser.add_argument("--repeats", type=int, default=3, help="timed rounds (best of), B <= 1024")
    parser.add_argument("--large-repeats", type=int, default=1, help="timed rounds for B > 1024")
    parser.add_argument("--mechanism-fleets", type=int, default=128, help="B of the per-mechanism table (0: skip)")
    parser.add_argument("--mechanism-repeats", type=int, default=5, help="rounds of the per-mechanism table")
    parser.add_argument("--check-fleets", type=int, default=16, help="fleets of the agreement check")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--two-devices",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="also time every B >= 2 on two XLA host devices, in a subprocess",
    )
    parser.add_argument("--kernels-fleets", type=int, default=128, help="B of the HLO kernel count (0: skip)")
    parser.add_argument(
        "--cli-repeats",
        type=int,
        default=1,
        help="rounds of `assess` and `design` on the file with their defaults (0: skip)",
    )
    parser.add_argument(
        "--cli-commands", nargs="+", choices=CLI_COMMANDS, default=list(CLI_COMMANDS), help="commands timed"
    )
    parser.add_argument(
        "--cli-variants",
        action="store_true",
        help="also time them with --devices 1, with CKPT_JAX_CPU_FLAGS=0 and with both, paired per round",
    )
    parser.add_argument("--cli-only", action="store_true", help="only the kernel count and the commands' times")
    parser.add_argument("--child", choices=("two-devices", "kernels"), help=argparse.SUPPRESS)
    parser.add_argument("--timeout", type=float, default=3600, help="seconds for each subprocess")
    parser.add_argument("--out", default=None, help="directory for operator_path.json")
    args = parser.parse_args(argv)
    sizes = [1, 128] if args.quick else args.sizes

    import jax

    jax.config.update("jax_enable_x64", True)
    spec = load_spec()
    if args.child == "two-devices":
        print("RESULT " + json.dumps(child_two_devices(spec, sizes, args.seed, args.repeats)), flush=True)
        return 0
    if args.child == "kernels":
        print("RESULT " + json.dumps(child_kernels(spec, sizes[0], args.seed)), flush=True)
        return 0
    result = dict(fleet_file=os.path.relpath(FLEET_FILE, ROOT), horizon_s=DAY, n_jobs=spec.n_jobs, env=environment())
    print(f"# operator path: {result['fleet_file']}, {spec.n_jobs} jobs, one day")
    result["sizes"], result["mechanisms"], result["two_devices"] = [], [], None
    if args.kernels_fleets > 0:
        result["loop_kernels"] = loop_kernels(args.kernels_fleets, args.seed, args.timeout)
        result["loop_kernels"]["fleets"] = args.kernels_fleets
        print(f"  kernels per loop iteration (B = {args.kernels_fleets}): {result['loop_kernels']}", flush=True)
    if args.cli_only:
        sizes, args.mechanism_fleets, args.two_devices = [], 0, False
    else:
        result["agreement"] = check_agreement(spec, args.check_fleets, args.seed)

    for n_fleets in sizes:
        repeats = args.repeats if n_fleets <= 1024 else args.large_repeats
        if n_fleets == 1:  # calls of a few ms: more rounds against the machine's noise
            repeats *= 5
        row = time_cases(spec, n_fleets, args.seed, repeats, {"as is": {}})["as is"]
        result["sizes"].append(row)
        print(
            f"  B = {n_fleets}: ckpt_jax {row['jax_s']:.3f} s, Numba {row['numba_s']:.3f} s, ratio {row['ratio']:.3f}",
            flush=True,
        )

    if args.two_devices and any(n > 1 for n in sizes):
        child_args = ["--child", "two-devices", "--sizes", *map(str, sizes), "--seed", str(args.seed)]
        child_args += ["--repeats", str(args.repeats)]
        result["two_devices"] = spawn_child(child_args, "--xla_force_host_platform_device_count=2", args.timeout)
        if "error" in result["two_devices"]:
            print(f"  two host devices: {result['two_devices']['error']}", flush=True)
        for row in result["two_devices"].get("sizes", []):
            print(
                f"  B = {row['fleets']}, two host devices: ckpt_jax {row['jax_s']:.3f} s, "
                f"Numba {row['numba_s']:.3f} s, ratio {row['ratio']:.3f}",
                flush=True,
            )

    if args.mechanism_fleets > 0:
        cases = {
            name: dict(failures=failures, limits=limits, sizes=sizes_on, binding_cap=binding_cap)
            for name, (failures, limits, sizes_on, binding_cap) in MECHANISMS.items()
        }
        rows = time_cases(spec, args.mechanism_fleets, args.seed, args.mechanism_repeats, cases)
        full = rows["as is"]
        for name, row in rows.items():
            row["row"] = name
            row["note"] = NOTES[name]
            # ckpt_jax's cost of the mechanism(s) the row switches off: the file as is / row.
            row["jax_cost"] = paired_cost(full, row, "jax_runs_s")
            row["jax_cpu_cost"] = paired_cost(full, row, "jax_cpu_runs_s")
            row["jax_cost_per_job_update"] = row["jax_cost"] * row["events_jax"] / full["events_jax"]
            row["numba_cost"] = paired_cost(full, row, "numba_runs_s")
            result["mechanisms"].append(row)
            print(f"  {name}: ckpt_jax {row['jax_s']:.3f} s, Numba {row['numba_s']:.3f} s", flush=True)

    result["cli"] = []
    if args.cli_repeats > 0:
        variants = list(CLI_VARIANTS) if args.cli_variants else ["defaults"]
        result["cli"] = time_cli(args.cli_commands, args.cli_repeats, variants)

    print()
    print(markdown(result))
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        path = os.path.join(args.out, "operator_path.json")
        with open(path, "w") as handle:
            json.dump(result, handle, indent=1)
        print(f"wrote {path}")
    return 0


def markdown(result: dict) -> str:
    lines = [
        "| B | ckpt_jax s | Numba s | ratio Numba/ckpt_jax (wall / CPU) | ckpt_jax job-updates/s | "
        "Numba job-updates/s |",
        "|---|---|---|---|---|---|",
    ]
    for row in result["sizes"]:
        lines.append(
            f"| {row['fleets']} | {row['jax_s']:.3f} | {row['numba_s']:.3f} | {row['ratio']:.3f} / "
            f"{row['cpu_ratio']:.3f} | "
            f"{row['jax_job_updates_per_s']:.2e} | {row['numba_job_updates_per_s']:.2e} |"
        )
    two = result.get("two_devices") or {}
    if two.get("sizes"):
        lines += [
            "",
            "| B, two host devices | ckpt_jax s | Numba s | ratio Numba/ckpt_jax (wall / CPU) |",
            "|---|---|---|---|",
        ]
        for row in two["sizes"]:
            lines.append(
                f"| {row['fleets']} | {row['jax_s']:.3f} | {row['numba_s']:.3f} | "
                f"{row['ratio']:.3f} / {row['cpu_ratio']:.3f} |"
            )
    kernels = result.get("loop_kernels") or {}
    if "kernels" in kernels:
        kinds = ", ".join(f"{kind} {count}" for kind, count in kernels["by_kind"].items())
        lines += ["", f"Kernels per loop iteration (B = {kernels['fleets']}): {kernels['kernels']} ({kinds})"]
    if result.get("cli"):
        lines += [
            "",
            "| command (the file, defaults) | variant | best s | median s | rounds |",
            "|---|---|---|---|---|",
        ]
        for row in result["cli"]:
            lines.append(
                f"| {row['command']} | {row['variant']} | {row['best_s']:.1f} | {row['median_s']:.1f} | "
                f"{len(row['seconds'])} |"
            )
    if result["mechanisms"]:
        fleets = result["mechanisms"][0]["fleets"]
        lines += [
            "",
            f"| B = {fleets}, one day | ckpt_jax s | Numba s | ratio Numba/ckpt_jax (wall / CPU) | events/fleet | "
            "ckpt_jax: as is / row (wall / CPU) | per job-update | Numba: as is / row |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for row in result["mechanisms"]:
            lines.append(
                f"| {row['row']} | {row['jax_s']:.3f} | {row['numba_s']:.3f} | {row['ratio']:.3f} / "
                f"{row['cpu_ratio']:.3f} | "
                f"{row['events_jax'] / row['fleets']:.0f} | {row['jax_cost']:.2f} / {row['jax_cpu_cost']:.2f} | "
                f"{row['jax_cost_per_job_update']:.2f} | {row['numba_cost']:.2f} |"
            )
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
