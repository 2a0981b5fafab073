"""Figures of one fleet's trace: write windows per job and the concurrency n_w(t).

Pure functions of NumPy arrays returning a `matplotlib.figure.Figure`. Importing this
module never selects a backend or touches pyplot, so it is safe in libraries, notebooks
and headless runs alike (a bare `Figure` renders with Agg when saved).
"""

from __future__ import annotations

from typing import Optional, Sequence

import numpy as np
from matplotlib.collections import PolyCollection
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from .analysis import observed_interval, writer_count

__all__ = ["plot_trace"]

_WRITE_COLOR = "tab:blue"
_UNOBSERVED_COLOR = "0.9"


def _window_polygons(fire: np.ndarray, end: np.ndarray, height: float = 0.7):
    """Rectangles (M, 4, 2) for every complete window, and the job row of each."""
    complete = np.isfinite(fire) & np.isfinite(end)
    jobs, _ = np.nonzero(complete)
    left, right = fire[complete], end[complete]
    low, high = jobs - height / 2, jobs + height / 2
    verts = np.stack(
        [
            np.stack([left, low], -1),
            np.stack([right, low], -1),
            np.stack([right, high], -1),
            np.stack([left, high], -1),
        ],
        axis=1,
    )
    return verts, jobs


def plot_trace(
    fire_times,
    end_times,
    *,
    ax: Optional[Sequence] = None,
    title: Optional[str] = None,
) -> Figure:
    """Gantt chart of each job's write windows above the concurrency n_w(t).

    The concurrency is that of the *recorded* windows (`ckpt_jax.analysis.writer_count`):
    a write in progress at t = 0 and firings after a job's K-th are not in the trace, so
    outside `ckpt_jax.analysis.observed_interval` (shaded grey) it undercounts.

    Args:
      fire_times: (N, K) firing times of one fleet (e.g. ``trace.fire_times[0]``).
      end_times: (N, K) ends of the writes those firings started. NaN entries (padding
        slots, runs that stopped early) are left out.
      ax: optional pair of Axes ``(gantt_ax, concurrency_ax)`` to draw into; by default a
        new two-panel figure with a shared time axis.
      title: optional figure title.

    Returns:
      The `Figure` holding the axes.
    """
    fire = np.asarray(fire_times, dtype=np.float64)
    end = np.asarray(end_times, dtype=np.float64)
    times, counts = writer_count(fire, end)  # validates the (N, K) shapes
    n_jobs = fire.shape[0]

    if ax is None:
        gantt_height = float(np.clip(0.3 * n_jobs, 2.0, 7.0))
        fig = Figure(figsize=(10, gantt_height + 2.5), layout="constrained")
        gantt_ax, count_ax = fig.subplots(
            2, 1, sharex=True, gridspec_kw={"height_ratios": [gantt_height, 2.5]}
        )
    else:
        gantt_ax, count_ax = ax
        fig = gantt_ax.figure

    t_end = float(times[-1]) if times.size else 1.0
    t_start, t_stop = observed_interval(fire, end)
    unobserved = []
    if np.isfinite(t_start) and t_start < t_stop:
        unobserved = [(0.0, t_start), (t_stop, t_end)]
    elif times.size:
        unobserved = [(0.0, t_end)]
    for axis in (gantt_ax, count_ax):
        for k, (low, high) in enumerate(unobserved):
            if high > low:
                axis.axvspan(
                    low,
                    high,
                    color=_UNOBSERVED_COLOR,
                    zorder=0,
                    label="not fully recorded" if (axis is count_ax and k == 0) else None,
                )

    verts, _ = _window_polygons(fire, end)
    gantt_ax.add_collection(
        PolyCollection(verts, facecolors=_WRITE_COLOR, edgecolors="none", zorder=2)
    )
    gantt_ax.set_ylim(n_jobs - 0.5, -0.5)  # job 0 on top
    gantt_ax.set_ylabel("job")
    gantt_ax.yaxis.set_major_locator(MaxNLocator(integer=True, nbins=min(n_jobs, 12)))
    gantt_ax.set_title("write windows (bar: firing → end of its write)", fontsize="medium")

    steps_t = np.concatenate([[0.0], times])
    steps_n = np.concatenate([[0], counts])
    count_ax.step(steps_t, steps_n, where="post", color="tab:red", lw=1.2, zorder=2,
                  label="writers $n_w(t)$ (recorded windows)")
    if unobserved != [(0.0, t_end)] and times.size:
        # Time average over the interval where the recorded windows are all the writes.
        edges = np.clip(np.append(steps_t, t_end), t_start, t_stop)
        mean = float(np.sum(np.diff(edges) * steps_n) / (t_stop - t_start))
        count_ax.axhline(mean, color="k", ls="--", lw=1, zorder=3,
                         label=f"time average = {mean:.2f}")
    count_ax.set_ylim(-0.1, max(int(counts.max()) if counts.size else 1, 1) + 0.3)
    count_ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    count_ax.set_ylabel("writers $n_w$")
    count_ax.set_xlabel("time")
    count_ax.set_xlim(0.0, t_end)
    # Above the panel, not on it: the step line fills the whole axes for long traces.
    count_ax.legend(loc="lower right", bbox_to_anchor=(1.0, 1.0), ncols=3, fontsize="small",
                    frameon=False, borderaxespad=0.2)
    if title:
        fig.suptitle(title)
    return fig
