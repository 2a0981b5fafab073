"""The figures of an assessment (`ckpt_jax.assess.assess`): one message per panel."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from matplotlib.ticker import FuncFormatter, MaxNLocator, PercentFormatter

from ..assess import CAUSES, Assessment, Timeline
from ._design_figures import _pyplot, close, figure_text

CAUSE_COLOURS = {
    "checkpoint": "#1f77b4",
    "overhead": "#17becf",
    "backpressure": "#9467bd",
    "lost_work": "#d62728",
    "restart": "#ff7f0e",
    "outages": "#8c564b",
    "restart_stagger": "#e377c2",
    "throttling": "#7f7f7f",
}
CAUSE_LABELS = {
    "checkpoint": "checkpoint stalls",
    "overhead": "checkpoint overheads",
    "backpressure": "waiting on backpressure",
    "lost_work": "work lost to failures",
    "restart": "restarts",
    "outages": "outages",
    "restart_stagger": "restart stagger",
    "throttling": "throttling by the power cap",
}


def losses_figure(assessment: Assessment):
    """Left: where each group's GPU time goes (goodput and the losses by cause, in % of its
    time); right: the GPU-hours each group loses per day by cause, with the fleet's 95% CI."""
    plt = _pyplot()
    names = list(assessment.groups) + ["fleet"]
    rows = np.arange(len(names))[::-1]
    height = max(2.8, 0.55 * len(names) + 1.6)
    figure, (left, right) = plt.subplots(1, 2, figsize=(12, height), constrained_layout=True, sharey=True)
    goodput = np.array([assessment.goodput[name].mean for name in names])
    left.barh(rows, goodput, color="#2ca02c", label="goodput")
    start, hours_start = goodput.copy(), np.zeros(len(names))
    for cause in CAUSES:
        share = np.array([assessment.losses[name][cause].mean for name in names])
        hours = np.array([assessment.gpu_hours_lost_per_day[name][cause].mean for name in names])
        style = dict(color=CAUSE_COLOURS[cause], label=CAUSE_LABELS[cause])
        left.barh(rows, share, left=start, **style)
        right.barh(rows, hours, left=hours_start, **style)
        start, hours_start = start + share, hours_start + hours
    for row, name in zip(rows, names):
        estimate = assessment.goodput[name]
        interval = "" if np.isnan(estimate.low) else f" [{100 * estimate.low:.1f}, {100 * estimate.high:.1f}]"
        left.text(
            0.01, row, f"{100 * estimate.mean:.1f} %{interval}",  # no interval: one draw
            va="center", ha="left", fontsize=8, color="white",
        )  # fmt: skip
    total = {name: sum(assessment.gpu_hours_lost_per_day[name][c].mean for c in CAUSES) for name in names}
    for row, name in zip(rows, names):
        shown = f"{total[name]:,.0f}" if total[name] >= 99.5 else f"{total[name]:.3g}"
        right.text(total[name], row, f" {shown}", va="center", ha="left", fontsize=8)
    left.set_yticks(rows, [figure_text(f"{name} ({assessment.gpus[name]:,.0f} GPUs)") for name in names])
    left.set_xlim(0, 1)
    left.xaxis.set_major_formatter(PercentFormatter(1.0))
    left.set_xlabel("share of the group's GPU time (goodput in green, with its 95% CI)")
    left.set_title("Where the GPU time goes")
    right.set_xlim(0, 1.15 * max(max(total.values()), 1e-12))
    right.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}" if abs(v) >= 10 else f"{v:g}"))
    right.set_xlabel("GPU-hours lost per day")
    right.set_title("GPU-hours lost per day, by cause")
    right.xaxis.set_major_locator(MaxNLocator(nbins=5))  # grouped thousands need room
    # The causes that cost something somewhere, in the bars' order, read row by row; the others
    # are named once.
    absent = [CAUSE_LABELS[c] for c in CAUSES if all(assessment.losses[name][c].mean == 0 for name in names)]
    entries = [(handle, label) for handle, label in zip(*left.get_legend_handles_labels()) if label not in absent]
    columns = min(len(entries), 4)
    order = [k for c in range(columns) for k in range(c, len(entries), columns)]  # row-major
    handles, labels = zip(*[entries[k] for k in order])
    title = f"0 everywhere: {', '.join(absent)}" if absent else None
    legend = figure.legend(
        handles, labels, loc="outside lower center", ncols=columns, fontsize=8, frameon=False, title=title
    )
    if title:
        legend.get_title().set_fontsize(8)
    return figure


def writers_figure(assessment: Assessment, throughput=None):
    """The fraction of time at each writer count, against independent phases, with the 99th
    percentile in the title and, where a count shown reaches them, the count from which every
    set of writers is storage-bound (`Assessment.saturation_writers`) and, given the storage's
    ``throughput`` table f(0), ..., f(N), the counts where f(n) peaks."""
    plt = _pyplot()
    if not assessment.writers_observed:
        return _unobserved_writers_figure(plt, assessment)
    observed = np.asarray(assessment.writer_time)
    independent = np.asarray(assessment.independent_writer_time)
    shown = np.flatnonzero((observed > 1e-6) | (independent > 1e-6))
    highest = max(shown.max() if shown.size else 1, assessment.writers_max)  # the counts that occur
    top = min(int(highest) + 1, observed.size - 1)  # one count beyond, where there is one
    counts = np.arange(top + 1)
    figure, axis = plt.subplots(figsize=(8, 4.2), constrained_layout=True)
    width = 0.4
    axis.bar(counts - width / 2, observed[: top + 1], width, color="#1f77b4", label="this fleet (pooled over draws)")
    axis.bar(counts + width / 2, independent[: top + 1], width, color="#bbbbbb", label="independent phases")
    peak = _peak_counts(throughput)
    if peak is not None and peak[0] <= top:
        axis.axvspan(peak[0] - 0.5, min(peak[1], top) + 0.5, color="#2ca02c", alpha=0.12, lw=0)
        axis.text(
            peak[0] - 0.45, 0.97, "f(n) at its peak", transform=axis.get_xaxis_transform(), va="top", ha="left",
            fontsize=8, color="#2ca02c",
        )  # fmt: skip
    saturation = assessment.saturation_writers
    if saturation <= top:
        axis.axvline(saturation - 0.5, color="#d62728", lw=1, ls="--")
        label = f"from {saturation} writers: every set storage-bound"
        axis.text(
            saturation - 0.55, 0.90, label,
            transform=axis.get_xaxis_transform(), va="top", ha="right", fontsize=8, color="#d62728",
        )  # fmt: skip
    axis.set_xlim(-0.6, top + 0.6)
    # A log scale: the rare high counts (the storms) are what the storage must survive.
    positive = np.concatenate([observed[: top + 1], independent[: top + 1]])
    positive = positive[positive > 0]
    axis.set_yscale("log")
    axis.set_ylim(max(positive.min() / 2, 1e-9), 1.5)
    axis.xaxis.set_major_locator(MaxNLocator(integer=True))
    axis.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{100 * v:g} %"))
    axis.set_xlabel("concurrent writers")
    axis.set_ylabel("share of time")
    title = f"Writers: P50 {assessment.writers_p50:g}, P99 {assessment.writers_p99:g}, max {assessment.writers_max}"
    if saturation <= assessment.writers_max:  # a count that occurs
        title += f"; every set storage-bound {100 * assessment.saturated_time.mean:.1f} % of the time"
    elif saturation < observed.size:
        title += f"; every set storage-bound only from {saturation} writers, never reached"
    elif throughput is not None and peak is None:
        title += f"; f(n) grows up to all {observed.size - 1} writers: never saturated"
    axis.set_title(title, fontsize=10)
    axis.legend(frameon=False, fontsize=8, loc="center right")
    return figure


def _unobserved_writers_figure(plt, assessment: Assessment):
    """`writers_figure` where no draw observed the writer count: the independent phases'
    law alone, and a title that says why the fleet's own is missing."""
    independent = np.asarray(assessment.independent_writer_time)
    shown = np.flatnonzero(independent > 1e-6)
    top = min(int(shown.max()) + 1 if shown.size else 1, independent.size - 1)
    counts = np.arange(top + 1)
    figure, axis = plt.subplots(figsize=(8, 4.2), constrained_layout=True)
    axis.bar(counts, independent[: top + 1], 0.4, color="#bbbbbb", label="independent phases")
    axis.text(
        0.5, 0.75, "this fleet's writer count: not observed in any draw",
        transform=axis.transAxes, ha="center", va="center", fontsize=10, color="#d62728",
        bbox={"facecolor": "white", "edgecolor": "#d62728", "alpha": 0.9},
    )  # fmt: skip
    axis.set_xlim(-0.6, top + 0.6)
    positive = independent[: top + 1][independent[: top + 1] > 0]
    axis.set_yscale("log")
    axis.set_ylim(max(positive.min() / 2, 1e-9) if positive.size else 1e-9, 1.5)
    axis.xaxis.set_major_locator(MaxNLocator(integer=True))
    axis.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{100 * v:g} %"))
    axis.set_xlabel("concurrent writers")
    axis.set_ylabel("share of time")
    axis.set_title(
        "Writers: not observed in any draw (no observation window: the jobs are down almost all the time,\n"
        "or the horizon is shorter than the window, which opens once every job has started a checkpoint)",
        fontsize=9,
    )
    axis.legend(frameon=False, fontsize=8, loc="center right")
    return figure


def _peak_counts(throughput) -> tuple | None:
    """(first, last) writer count where f(n) = max f, of a table f(0), ..., f(N); None without
    a table, or where f still grows at N (the fleet ends before the storage saturates)."""
    if throughput is None:
        return None
    curve = np.asarray(throughput, np.float64)[1:]
    if curve.size > 1 and curve[-1] > curve[-2]:
        return None
    at_peak = np.flatnonzero(curve >= curve.max() * (1 - 1e-12)) + 1
    return int(at_peak.min()), int(at_peak.max())


# Above this many intervals the writer count is drawn per bin: a step line of 10^4 steps is a
# solid block at the figure's width.
_EXACT_STEPS = 600
_BINS = 288  # five-minute bins over a day


def _binned_writers(edges: np.ndarray, writers: np.ndarray, bins: int) -> tuple:
    """Per bin of [edges[0], edges[-1]]: its edges, the time-weighted mean writer count and the
    largest count within it (``writers[i]`` holds over [edges[i], edges[i + 1]))."""
    grid = np.linspace(edges[0], edges[-1], bins + 1)
    integral = np.concatenate([[0.0], np.cumsum(writers * np.diff(edges))])  # ∫ writers, at each edge
    mean = np.diff(np.interp(grid, edges, integral)) / np.diff(grid)
    largest = np.zeros(bins)
    first = np.clip(np.searchsorted(grid, edges[:-1], side="right") - 1, 0, bins - 1)
    last = np.clip(np.searchsorted(grid, edges[1:], side="left") - 1, 0, bins - 1)
    np.maximum.at(largest, first, writers)
    np.maximum.at(largest, last, writers)
    largest = np.maximum(largest, mean)  # a bin inside one interval holds its count throughout
    return grid, mean, largest


def timeline_figure(timeline: Timeline, saturation_writers: int | None = None):
    """The power draw (top) and the writer count (bottom) of one fleet over its window, in
    hours; the count from which every set of writers is storage-bound dashed. With more than
    a few hundred intervals the writer count is drawn per bin (288 over the window): its
    time-weighted mean and, lighter, its largest value in the bin."""
    plt = _pyplot()
    hours = timeline.hours_per_time_unit
    edges = np.append(timeline.start, timeline.span) * hours
    figure, (top, bottom) = plt.subplots(2, 1, figsize=(11, 5.5), sharex=True, constrained_layout=True)
    scale, unit = 1.0, "GPUs at full draw"
    if timeline.power_unit == "W":  # in W, kW or MW by the largest draw
        peak = float(np.max(timeline.draw)) if timeline.draw.size else 0.0
        scale, unit = next(((s, u) for s, u in ((1e9, "GW"), (1e6, "MW"), (1e3, "kW")) if peak >= s), (1.0, "W"))
    top.stairs(timeline.draw / scale, edges, color="#ff7f0e", lw=1, baseline=None)
    top.set_ylabel(f"power draw ({unit})")
    top.set_title("One fleet over time: the power draw and the concurrent writers")
    writers = np.asarray(timeline.writers, np.float64)
    if writers.size > _EXACT_STEPS:
        grid, mean, largest = _binned_writers(edges, writers, _BINS)
        minutes = (grid[1] - grid[0]) * 60
        bottom.stairs(largest, grid, color="#aec7e8", lw=1, baseline=None, label=f"most in {minutes:.3g} min")
        bottom.stairs(mean, grid, color="#1f77b4", lw=1.2, baseline=None, label=f"mean over {minutes:.3g} min")
    else:
        bottom.stairs(writers, edges, color="#1f77b4", lw=1, baseline=None, label="writers")
    if saturation_writers is not None and writers.size and saturation_writers <= writers.max():
        bottom.axhline(saturation_writers, color="#d62728", lw=1, ls="--", label="every set storage-bound from here")
    bottom.legend(frameon=False, fontsize=8, loc="upper right")
    bottom.yaxis.set_major_locator(MaxNLocator(integer=True))
    bottom.set_ylabel("writers")
    bottom.set_xlabel("hours")
    bottom.set_xlim(0, edges[-1])
    return figure


def assess_figures(assessment: Assessment, out_dir, timeline: Timeline | None = None) -> list[Path]:
    """Write ``losses.png`` (`losses_figure`), ``writers.png`` (`writers_figure`) and, with
    a ``timeline`` (`ckpt_jax.assess.timeline`), ``timeline.png`` (`timeline_figure`) to
    ``out_dir`` (created if missing); returns their paths."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    figures = [("losses.png", lambda: losses_figure(assessment)), ("writers.png", lambda: writers_figure(assessment))]
    if timeline is not None:
        figures.append(("timeline.png", lambda: timeline_figure(timeline, assessment.saturation_writers)))
    paths = []
    for name, make in figures:
        figure = make()
        path = out_dir / name
        figure.savefig(path, dpi=120)
        close(figure)
        paths.append(path)
    return paths
