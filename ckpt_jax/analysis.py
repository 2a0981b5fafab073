"""Statistics of recorded traces (MODEL.md §2 observables).

These functions run on the host, on concrete arrays of one fleet (NumPy or JAX); their
outputs have data-dependent sizes, so they are not meant to be traced.

What the trace records: `simulate` stores the write windows started by firings *after*
t = 0, up to each job's K-th. A write already in progress at t = 0 (a job launched in its
write phase) is not a recorded window, and firings after a job's K-th are not recorded
either. Everything here is therefore about the *recorded* windows; it equals the true
fleet quantity on `observed_interval` only.
"""

from __future__ import annotations

import numpy as np

__all__ = ["writer_count", "observed_interval"]


def _windows(fire_times, end_times):
    """The recorded windows of one fleet as flat float64 arrays (start, end), NaN-free."""
    fire = np.asarray(fire_times, dtype=np.float64)
    end = np.asarray(end_times, dtype=np.float64)
    if fire.shape != end.shape or fire.ndim != 2:
        raise ValueError(
            "fire_times and end_times must both have shape (N, K) for one fleet, got "
            f"{fire.shape} and {end.shape}"
        )
    # NaN marks padding slots and windows a stopped run never opened or closed.
    complete = np.isfinite(fire) & np.isfinite(end)
    return fire[complete], end[complete]


def writer_count(fire_times, end_times) -> tuple[np.ndarray, np.ndarray]:
    """The concurrency step function n_w(t) of one fleet's recorded write windows.

    Each window [fire, end) counts as one writer. Windows that end at the same instant
    another starts net out: the count does not dip (or jump) there, and such instants
    are not breakpoints unless the count really changes. Windows with a NaN fire or end
    time (padding slots, runs that stopped early) are ignored.

    Args:
      fire_times: (N, K) firing times of one fleet (`Trace.fire_times` of that fleet).
      end_times: (N, K) ends of the writes those firings started.

    Returns:
      ``(times, counts)``, float64 and int64 arrays of equal length M: the count is
      ``counts[m]`` on ``[times[m], times[m + 1])``, 0 before ``times[0]``, and
      ``counts[-1] == 0`` after the last window ends. Both are empty without windows.

    Example:
      Job 0 writes on [0, 1) and [3, 4), job 1 on [0.5, 2) and [2.5, 3); at t = 3 one
      write ends as another starts, so t = 3 is no breakpoint.

      >>> times, counts = writer_count([[0.0, 3.0], [0.5, 2.5]], [[1.0, 4.0], [2.0, 3.0]])
      >>> times.tolist(), counts.tolist()
      ([0.0, 0.5, 1.0, 2.0, 2.5, 4.0], [1, 2, 1, 0, 1, 0])
    """
    start, end = _windows(fire_times, end_times)
    events = np.concatenate([start, end])
    steps = np.concatenate([np.ones(start.size, np.int64), -np.ones(end.size, np.int64)])
    times, group = np.unique(events, return_inverse=True)
    # Sum the steps of all events at one instant before accumulating: simultaneous
    # ends and starts net out instead of producing a spurious zero-width dip.
    net = np.zeros(times.size, np.int64)
    np.add.at(net, group, steps)
    changes = net != 0
    return times[changes], np.cumsum(net[changes])


def observed_interval(fire_times, end_times) -> tuple[float, float]:
    """The interval on which the recorded windows are *all* the fleet's writes.

    Before its first recorded firing a job may be writing an unrecorded initial window;
    after its K-th write ends its next firings are not recorded. So `writer_count` equals
    the true n_w(t) from the latest first firing to the earliest last recorded end.

    Args:
      fire_times, end_times: (N, K) trace of one fleet; rows that are all NaN (padding
        slots) are ignored.

    Returns:
      ``(t_start, t_stop)``; ``t_start > t_stop`` when K is too small for any such
      interval, and both are NaN when no job has a recorded window.
    """
    fire = np.asarray(fire_times, dtype=np.float64)
    end = np.asarray(end_times, dtype=np.float64)
    if fire.shape != end.shape or fire.ndim != 2:
        raise ValueError(
            "fire_times and end_times must both have shape (N, K) for one fleet, got "
            f"{fire.shape} and {end.shape}"
        )
    jobs = np.isfinite(fire).any(axis=1)
    if not jobs.any():
        return float("nan"), float("nan")
    # A job whose run stopped early has NaN ends from some firing on: its last finite end
    # is where its unfinished (hence unrecorded) window may begin.
    first_fire = np.where(np.isfinite(fire[jobs, 0]), fire[jobs, 0], np.inf)
    last_end = np.nanmax(np.where(np.isfinite(end[jobs]), end[jobs], -np.inf), axis=1)
    return float(first_fire.max()), float(last_end.min())
