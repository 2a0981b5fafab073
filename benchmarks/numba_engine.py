"""A Numba-compiled per-fleet event loop for the base model, the benchmark's baseline.

Same semantics as `ckpt_jax.loop.step` restricted to the base model (docs/model.md §1):
blocking writes (α = 0), no controller delay (τ = 0), no jitter, a throughput table f(n)
and a power cap C. Every job whose phase empties at an event instant switches in that
instant, with the engine's snapping rule: due within ``_SNAP_ULPS`` ulps of the clock, or
left with that many ulps of its phase's full work. Fleets run in parallel with ``prange``; each fleet is a
plain sequential loop, O(N) per event.

This is benchmark code, not library code: ckpt_jax does not depend on Numba.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

# Must equal ckpt_jax._snapping.SNAP_ULPS (checked by bench.py's agreement test).
_SNAP_ULPS = 8
STATUS_MAX_EVENTS = 1  # int(ckpt_jax.Status.MAX_EVENTS): Numba code takes plain ints
STATUS_NONFINITE = 2  # int(ckpt_jax.Status.NONFINITE)


@njit(cache=True)
def _run_fleet(compute, write, cap, table, active, phase, remaining, n_fires, max_events, snap, fire_times, end_times):
    """Integrates one fleet; fills its (N, K) trace rows. Returns (n_events, status, time)."""
    n_jobs = compute.shape[0]
    draining = np.zeros(n_jobs, np.bool_)
    write_left = np.zeros(n_jobs)
    compute_left = np.zeros(n_jobs)
    fire_count = np.zeros(n_jobs, np.int64)
    end_count = np.zeros(n_jobs, np.int64)
    n_active = 0
    n_writers = 0
    for i in range(n_jobs):
        if active[i]:
            n_active += 1
            if phase[i] == 1:
                draining[i] = True
                write_left[i] = remaining[i]
                compute_left[i] = compute[i]
                n_writers += 1
            else:
                compute_left[i] = remaining[i]
    n_finished = 0  # active jobs with end_count >= K: the fleet is done when all are
    time = 0.0
    n_events = 0
    status = 0
    while n_finished < n_active:
        if n_events >= max_events:
            status |= STATUS_MAX_EVENTS
            break
        n_computing = n_active - n_writers
        write_rate = table[n_writers] / max(n_writers, 1)
        speed = cap / max(n_computing, 1) if n_computing > cap else 1.0
        dt = np.inf
        for i in range(n_jobs):
            if active[i]:
                if draining[i]:
                    dt = min(dt, write_left[i] / write_rate)
                else:
                    dt = min(dt, compute_left[i] / speed)
        if not np.isfinite(dt):
            status |= STATUS_NONFINITE
            break
        clock = snap * (time + dt)
        time += dt
        for i in range(n_jobs):
            if not active[i]:
                continue
            if draining[i]:
                left = write_left[i] - write_rate * dt
                if write_left[i] / write_rate <= dt + clock or left <= snap * write[i]:
                    # The end of the write started by the latest firing (not an initial write).
                    if fire_count[i] >= 1 and fire_count[i] <= n_fires:
                        end_times[i, fire_count[i] - 1] = time
                        end_count[i] += 1
                        if end_count[i] == n_fires:
                            n_finished += 1
                    draining[i] = False
                    write_left[i] = 0.0
                    n_writers -= 1
                else:
                    write_left[i] = left
            else:
                left = compute_left[i] - speed * dt
                if compute_left[i] / speed <= dt + clock or left <= snap * compute[i]:
                    if fire_count[i] < n_fires:
                        fire_times[i, fire_count[i]] = time
                    fire_count[i] += 1
                    draining[i] = True
                    write_left[i] = write[i]
                    compute_left[i] = compute[i]
                    n_writers += 1
                else:
                    compute_left[i] = left
        n_events += 1
    return n_events, status, time


@njit(parallel=True, cache=True)
def _run_batch(
    compute,
    write,
    cap,
    table,
    active,
    phase,
    remaining,
    n_fires,
    max_events,
    snap,
    fire_times,
    end_times,
    n_events,
    status,
    time,
):
    for b in prange(compute.shape[0]):
        n_events[b], status[b], time[b] = _run_fleet(
            compute[b],
            write[b],
            cap[b],
            table[b],
            active[b],
            phase[b],
            remaining[b],
            n_fires,
            max_events,
            snap,
            fire_times[b],
            end_times[b],
        )


def simulate_numba(compute, write, cap, table, active, phase, remaining, n_fires, max_events):
    """Runs a batch of base-model fleets (float64), one leading batch axis.

    Args:
      compute, write: (B, N) solo work T_i and write volume d_i.
      cap: (B,) power cap C (``inf`` where uncapped).
      table: (B, N + 1) throughput table f(n), index 0 unused.
      active: (B, N) bool mask.
      phase, remaining: (B, N) initial phase (0 computing, 1 writing) and work left.
      n_fires: K, firings to record per job; max_events: event budget per fleet.

    Returns:
      dict with fire_times, end_times (B, N, K; NaN where not reached), n_events (B,),
      status (B,), time (B,).
    """
    compute = np.ascontiguousarray(compute, np.float64)
    n_fleets, n_jobs = compute.shape
    fire_times = np.full((n_fleets, n_jobs, n_fires), np.nan)
    end_times = np.full((n_fleets, n_jobs, n_fires), np.nan)
    n_events = np.zeros(n_fleets, np.int64)
    status = np.zeros(n_fleets, np.int64)
    time = np.zeros(n_fleets)
    snap = np.finfo(np.float64).eps * _SNAP_ULPS
    _run_batch(
        compute,
        np.ascontiguousarray(write, np.float64),
        np.ascontiguousarray(cap, np.float64),
        np.ascontiguousarray(table, np.float64),
        np.ascontiguousarray(active, np.bool_),
        np.ascontiguousarray(phase, np.int64),
        np.ascontiguousarray(remaining, np.float64),
        int(n_fires),
        int(max_events),
        snap,
        fire_times,
        end_times,
        n_events,
        status,
        time,
    )
    return dict(fire_times=fire_times, end_times=end_times, n_events=n_events, status=status, time=time)
