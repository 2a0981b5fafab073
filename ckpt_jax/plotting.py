"""Figures of one fleet's trace: write windows per job and the concurrency n_w(t).

Pure functions of NumPy arrays returning a `matplotlib.figure.Figure`. Importing this
module never selects a backend or touches pyplot, so it is safe in libraries, notebooks
and headless runs alike (a bare `Figure` renders with Agg when saved).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from matplotlib.collections import PolyCollection
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from .analysis import observed_interval, writer_count

__all__ = ["plot_trace"]

_WRITE_COLOR = "tab:blue"
_OPEN_COLOR = "tab:orange"
_UNOBSERVED_COLOR = "0.9"
# A write window is drawn at least this fraction of the time axis wide (about 1.5 pixels of
# the default figure): a window narrower than a pixel would vanish.
MIN_WIDTH_FRACTION = 1.5e-3
# Above this many changes of n_w the writer-count panel is drawn per time bin (its time
# average and its largest value in each of `_BINS` bins): a step line would fill the panel.
_MAX_STEPS = 600
_BINS = 400


def _window_polygons(fire: np.ndarray, end: np.ndarray, height: float = 0.7, min_width: float = 0.0):
    """Rectangles (M, 4, 2) for every complete window, at least ``min_width`` wide (a
    shorter one is centred on its own midpoint), and the job row of each."""
    complete = np.isfinite(fire) & np.isfinite(end)
    jobs, _ = np.nonzero(complete)
    left, right = fire[complete], end[complete]
    pad = np.maximum(min_width - (right - left), 0.0) / 2
    left, right = left - pad, right + pad
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


def _recorded_interval(fire: np.ndarray, end: np.ndarray, until: float | None):
    """`observed_interval`, for a run to a horizon too: there a job that did not fill its
    K trace columns has every firing up to H recorded, so it bounds nothing but H."""
    t_start, t_stop = observed_interval(fire, end)
    if until is None or not np.isfinite(t_start):
        return t_start, t_stop
    fired = np.isfinite(fire).any(axis=-1)
    full = np.isfinite(fire[:, -1])
    last_end = np.fmax.reduce(end, axis=-1, initial=-np.inf)
    stops = np.where(full, last_end, until)[fired]
    return t_start, float(min(stops.min(initial=np.inf), until))


def _binned(times: np.ndarray, counts: np.ndarray, t_end: float, n_bins: int):
    """The step function n_w (``counts[i]`` from ``times[i]`` on, 0 before) per time bin:
    bin edges, time average and largest value in each bin."""
    edges = np.linspace(0.0, t_end, n_bins + 1)
    starts = np.concatenate([[0.0], times])
    values = np.concatenate([[0], counts]).astype(np.float64)
    area = np.concatenate([[0.0], np.cumsum(values[:-1] * np.diff(starts))])  # integral up to each start
    at = np.searchsorted(starts, edges, side="right") - 1
    integral = area[at] + values[at] * (edges - starts[at])
    mean = np.diff(integral) / np.diff(edges)
    top = values[at[:-1]].copy()  # the value at each bin's left edge ...
    inside = np.clip(np.searchsorted(edges, starts, side="right") - 1, 0, n_bins - 1)
    np.maximum.at(top, inside, values)  # ... and every value taken inside it
    return edges, mean, top


def plot_trace(
    fire_times,
    end_times,
    *,
    ax: Sequence | None = None,
    title: str | None = None,
    until: float | None = None,
    groups: tuple | None = None,
    failures=None,
    down_time=None,
    time_unit: str | None = None,
) -> Figure:
    """Gantt chart of each job's write windows above the concurrency n_w(t).

    The concurrency is that of the *recorded* windows (`ckpt_jax.analysis.writer_count`):
    a write in progress at t = 0 and firings after a job's K-th are not in the trace, so
    outside the interval where the trace holds every write (shaded grey) it undercounts.
    Every window is drawn at least `MIN_WIDTH_FRACTION` of the time axis wide, so that a
    write shorter than a pixel still shows; over many changes the n_w panel shows the time
    average and the largest n_w per time bin instead of every step.

    Args:
      fire_times: (N, K) firing times of one fleet (e.g. ``trace.fire_times[0]``).
      end_times: (N, K) ends of the writes those firings started. NaN entries (padding
        slots, runs that stopped early) are left out; a firing with a NaN end followed by a
        later firing (a write a failure abandoned) or at the end of the row (a write open
        at the stop) is drawn as a tick.
      ax: optional pair of Axes ``(gantt_ax, concurrency_ax)`` to draw into; by default a
        new two-panel figure with a shared time axis.
      title: optional figure title.
      until: the run's horizon H (``simulate(..., until=H)``), if any: the time axis ends
        there, and a job with fewer than K firings has them all recorded up to H.
      groups: optional ``(labels, names)``: (N,) group index of each job (jobs of a group
        adjacent) and the group names, shown on the job axis.
      failures, down_time: optional (N,) failures and time down of each job
        (`ckpt_jax.JobStats`), written at the end of each job's row.
      time_unit: the unit of every time given (``"min"``, ``"h"``), named on the time axis
        and after each time down; None: the axis reads "time".

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
        gantt_ax, count_ax = fig.subplots(2, 1, sharex=True, gridspec_kw={"height_ratios": [gantt_height, 2.5]})
    else:
        gantt_ax, count_ax = ax
        fig = gantt_ax.figure

    last_fire = float(np.nanmax(fire)) if np.isfinite(fire).any() else 0.0
    t_end = float(until) if until is not None else (float(times[-1]) if times.size else 1.0)
    t_end = max(t_end, last_fire, np.finfo(float).tiny)
    t_start, t_stop = _recorded_interval(fire, end, until)
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

    verts, _ = _window_polygons(fire, end, min_width=MIN_WIDTH_FRACTION * t_end)
    # verts is one (M, 4, 2) array, PolyCollection's fast path; its stub asks for a sequence of polygons.
    gantt_ax.add_collection(
        PolyCollection(verts, facecolors=_WRITE_COLOR, edgecolors="none", zorder=2)  # pyright: ignore[reportArgumentType]
    )
    # Firings with no recorded end: abandoned at a failure, or open at the stop.
    open_jobs, open_slots = np.nonzero(np.isfinite(fire) & np.isnan(end))
    if open_jobs.size:
        gantt_ax.plot(
            fire[open_jobs, open_slots],
            open_jobs,
            ls="none",
            marker="|",
            ms=9,
            mew=1.6,
            color=_OPEN_COLOR,
            zorder=3,
            label="write with no end (abandoned at a failure, or open at the stop)",
        )
        gantt_ax.legend(
            loc="lower right", bbox_to_anchor=(1.0, 1.0), fontsize="small", frameon=False, borderaxespad=0.2
        )
    gantt_ax.set_ylim(n_jobs - 0.5, -0.5)  # job 0 on top
    if groups is not None:
        labels, names = np.asarray(groups[0]), list(groups[1])
        firsts = np.searchsorted(labels, np.arange(len(names)))
        lasts = np.append(firsts[1:], n_jobs) - 1
        for first in firsts[1:]:
            gantt_ax.axhline(first - 0.5, color="k", lw=0.6, zorder=1)
        gantt_ax.set_yticks((firsts + lasts) / 2, [_literal(name) for name in names])
        gantt_ax.set_ylabel("job group")
    else:
        gantt_ax.set_ylabel("job")
        gantt_ax.yaxis.set_major_locator(MaxNLocator(integer=True, nbins=min(n_jobs, 12)))
    if failures is not None or down_time is not None:
        notes, unit = [], "" if time_unit is None else f" {time_unit}"
        for job in range(n_jobs):
            parts = [] if failures is None else [f"{int(np.asarray(failures)[job])} fail."]
            parts += [] if down_time is None else [f"down {_number(float(np.asarray(down_time)[job]))}{unit}"]
            notes.append(", ".join(parts))
        size = "x-small" if n_jobs > 12 else "small"
        for job, note in enumerate(notes):
            gantt_ax.annotate(
                note,
                (1.0, job),
                xycoords=("axes fraction", "data"),
                xytext=(4, 0),
                textcoords="offset points",
                va="center",
                fontsize=size,
                annotation_clip=False,
            )
    gantt_ax.set_title("write windows (bar: firing → end of its write)", fontsize="medium", loc="left")

    steps_t = np.concatenate([[0.0], times])
    steps_n = np.concatenate([[0], counts])
    if times.size > _MAX_STEPS:
        edges, mean, top = _binned(times, counts, t_end, _BINS)
        count_ax.stairs(
            top,
            edges,
            fill=True,
            color="tab:red",
            alpha=0.25,
            lw=0,
            zorder=2,
            label=f"largest $n_w$ per bin of {edges[1]:.3g}{'' if time_unit is None else ' ' + time_unit}",
        )
        count_ax.stairs(mean, edges, color="tab:red", lw=1.0, zorder=2, label="$n_w$ averaged per bin")
    else:
        count_ax.step(
            steps_t,
            steps_n,
            where="post",
            color="tab:red",
            lw=1.2,
            zorder=2,
            label="writers $n_w(t)$ (recorded windows)",
        )
    if unobserved != [(0.0, t_end)] and times.size:
        # Time average over the interval where the recorded windows are all the writes.
        edges = np.clip(np.append(steps_t, t_end), t_start, t_stop)
        mean = float(np.sum(np.diff(edges) * steps_n) / (t_stop - t_start))
        count_ax.axhline(mean, color="k", ls="--", lw=1, zorder=3, label=f"time average = {mean:.2f}")
    count_ax.set_ylim(-0.1, max(int(counts.max()) if counts.size else 1, 1) + 0.3)
    count_ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    count_ax.set_ylabel("writers $n_w$")
    count_ax.set_xlabel("time" if time_unit is None else f"time [{time_unit}]")
    count_ax.set_xlim(0.0, t_end)
    # Above the panel, not on it: the step line fills the whole axes for long traces.
    count_ax.legend(
        loc="lower right", bbox_to_anchor=(1.0, 1.0), ncols=4, fontsize="small", frameon=False, borderaxespad=0.2
    )
    if title:
        fig.suptitle(_literal(title))
    return fig


def _number(value: float) -> str:
    """``value`` with its significant digits, thousands grouped: ``55,080``, ``918``, ``0.25``."""
    return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.3g}"


def _literal(text) -> str:
    """``text`` drawn as written: a ``$`` would start matplotlib's mathtext."""
    return str(text).replace("$", r"\$")
