"""The figures of ``ckpt-jax design``: one message per panel."""

from __future__ import annotations

import unicodedata

import numpy as np
from matplotlib.patches import Rectangle
from matplotlib.ticker import MaxNLocator

from .._estimate import half_width

COLOURS = {
    "design": "#d62728",
    "current": "#7f7f7f",
    "young": "#1f77b4",
    "daly": "#2ca02c",
    "young_contended": "#9467bd",
    "two_level": "#8c564b",
}
LABELS = {
    "design": "design",
    "current": "current",
    "young": "Young",
    "daly": "Daly",
    "young_contended": "contended Young",
    "two_level": "two-level optimum",
}


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def close(figure) -> None:
    _pyplot().close(figure)


def figure_text(text) -> str:
    """``text`` drawn literally: a ``$`` would start matplotlib's mathtext (and an unknown
    macro in it fails the figure), a control character would break the line."""
    shown = "".join(
        c.encode("unicode_escape").decode("ascii") if unicodedata.category(c) in ("Cc", "Zl", "Zp") else c
        for c in str(text)
    )
    return shown.replace("$", r"\$")


def _time_scale(spec) -> tuple:
    """(seconds per unit, " (unit)") of a file with units; (1, "") for plain numbers."""
    if spec.time_unit is None:
        return 1.0, ""
    from .._units import duration_unit

    return duration_unit(spec.time_unit), f" ({figure_text(spec.time_unit)})"


def _interval_axis(axis, values) -> None:
    """A readable y axis for intervals: linear within a decade, else log with ticks at
    1, 2 and 5 times powers of ten (a log axis within a decade labels one tick)."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    values = np.asarray(values, np.float64)
    values = values[np.isfinite(values) & (values > 0)]
    if values.size and values.max() > 10 * values.min():
        axis.set_yscale("log")
        axis.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
        axis.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        axis.yaxis.set_minor_formatter(NullFormatter())
    else:
        axis.yaxis.set_major_locator(MaxNLocator(nbins=6))


def objective_figure(spec, summary):
    """Left: the smoothed objective per step with ±1 standard error; right: interval per
    group. The steps whose mean θ gives the recommendation are shaded, the recommended
    intervals starred."""
    plt = _pyplot()
    history = summary["history"]
    objective, stderr = np.asarray(history["objective"]), np.asarray(history["stderr"])
    steps = np.arange(1, objective.size + 1)
    averaged = summary.get("recommended_from_last_steps", 1)
    span = (steps[-1] - averaged + 0.5, steps[-1] + 0.5)
    shade = dict(color="#d62728", alpha=0.08, lw=0)
    search = summary.get("method", "adam") == "search"
    figure, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2), constrained_layout=True)
    if search:  # the search's point of each step; its moves are judged by paired differences
        shade = dict(alpha=0, lw=0)
    else:
        left.axvspan(
            *span, **shade, label=f"last {averaged} step{'s' * (averaged != 1)}: averaged for the recommendation"
        )
    left.plot(steps, objective, color="k", lw=1.2, marker="o", ms=3, label="fleet waste (training draws)")
    # The band is the spread of each step's level over the draws. A search judges its moves on
    # the same draws, paired, whose noise is far smaller: overlapping bands do not mean that a
    # move was noise.
    band = (
        "level ± 1 standard error over the draws\n(not a move's noise: moves are judged paired, on the same draws)"
        if search
        else "± 1 standard error over the draws"
    )
    left.fill_between(steps, objective - stderr, objective + stderr, color="k", alpha=0.15, lw=0, label=band)
    if search and steps.size > 1:
        # Steps where no interval moved (no move paid, or only an offset or a stagger did).
        moved = np.asarray(history["intervals"], np.float64)
        stayed = np.flatnonzero(np.all(moved[1:] == moved[:-1], axis=tuple(range(1, moved.ndim)))) + 1
        if stayed.size:
            left.plot(
                steps[stayed], objective[stayed], "o", ms=6, mfc="white", mec="k", ls="none", zorder=3,
                label="no interval moved at this step",
            )  # fmt: skip
    label = "fleet waste on the common draws" if search else "smoothed fleet waste"
    left.set(xlabel="search step" if search else "optimisation step", ylabel=label, title="objective vs step")
    left.yaxis.set_major_locator(MaxNLocator(nbins=6))
    # Below the panel: inside, a long label would cover the curve.
    left.legend(loc="upper center", bbox_to_anchor=(0.5, -0.16), fontsize=8, frameon=False)
    scale, unit = _time_scale(spec)
    intervals = np.asarray(history["intervals"]) / scale
    # The intervals to use (`ckpt_jax.cli.design.recommend`): the design's, or the set recommended instead.
    recommended = np.array([group.get("recommended", group["design"]) for group in summary["groups"]]) / scale
    colours = plt.get_cmap("viridis")(np.linspace(0, 0.9, len(spec.groups)))
    right.axvspan(*span, **shade)
    for g, group in enumerate(spec.groups):
        right.plot(steps, intervals[:, g], color=colours[g], lw=1.4, label=figure_text(group.name))
        right.plot(
            [steps[-1] + 0.5],
            [recommended[g]],
            marker="*",
            ms=12,
            color=colours[g],
            mec="k",
            mew=0.6,
            ls="none",
            clip_on=False,
        )
    right.plot([], [], marker="*", ms=10, color="w", mec="k", ls="none", label="recommended")
    _interval_axis(right, np.concatenate([intervals.ravel(), recommended]))
    right.set_xlim(0.5, steps[-1] + 1)
    right.set(
        xlabel="search step" if search else "optimisation step",
        ylabel=f"checkpoint interval T{unit}",
        title="interval per group vs step",
    )
    for axis in (left, right):
        axis.xaxis.set_major_locator(MaxNLocator(integer=True))
    right.legend(loc="center left", bbox_to_anchor=(1.01, 0.5), fontsize=8, title="group")
    return figure


def waste_figure(spec, per_group, names):
    """Grouped bars: waste per job group for each baseline and the design, 95% CIs."""
    plt = _pyplot()
    n_groups = len(spec.groups)
    order = [name for name in ("current", "young", "daly", "young_contended", "two_level", "design") if name in names]
    width = 0.8 / len(order)
    figure, axis = plt.subplots(figsize=(max(6.5, 1.6 * n_groups + 3), 4.2), constrained_layout=True)
    x = np.arange(n_groups)
    top = 0.0
    for k, name in enumerate(order):
        samples = per_group[names.index(name)]  # (S, G)
        mean = samples.mean(axis=0)
        half = half_width(samples, axis=0)
        top = max(top, float((mean + half).max()))
        axis.bar(
            x + (k - (len(order) - 1) / 2) * width,
            mean,
            width,
            yerr=half,
            capsize=2,
            color=COLOURS[name],
            label=LABELS[name],
        )
    axis.set_xticks(x, [figure_text(name) for name in spec.names])
    axis.set_ylim(0, top * 1.25)
    axis.set(
        xlabel="job group",
        ylabel=f"waste (1 − {'persisted' if spec.has_snapshots else 'useful'} work / H)",
        title=f"waste per job group: {'the current intervals, ' if 'current' in names else ''}"
        "the baselines and the design",
    )
    axis.legend(loc="upper left", ncols=len(order), fontsize=8)
    return figure


def schedule_figure(spec, schedule):
    """Gantt chart of one period of a run with failures: per job, compute, completed and
    abandoned writes, and the time down restarting after a failure."""
    plt = _pyplot()
    scale, unit = _time_scale(spec)
    fire, end, abandoned = schedule["fire"] / scale, schedule["end"] / scale, schedule["abandoned"]
    start, stop = schedule["start"] / scale, schedule["stop"] / scale
    n_jobs = fire.shape[0]
    labels = spec.labels
    colours = {"compute": "#c7d7ea", "write": "#d62728", "abandoned": "#f4a582", "down": "#404040"}

    def clipped(spans):
        return [(max(a, start), min(b, stop) - max(a, start)) for a, b in spans if b > start and a < stop]

    figure, axis = plt.subplots(figsize=(10, max(3.0, 0.22 * n_jobs + 1.5)), constrained_layout=True)
    for job in range(n_jobs):
        ok = np.isfinite(fire[job])
        spans = list(zip(fire[job][ok], end[job][ok]))
        lost = abandoned[job][ok]
        axis.broken_barh([(start, stop - start)], (job - 0.4, 0.8), color=colours["compute"], lw=0)
        axis.broken_barh(
            clipped([w for w, a in zip(spans, lost) if not a]), (job - 0.4, 0.8), color=colours["write"], lw=0
        )
        axis.broken_barh(
            clipped([w for w, a in zip(spans, lost) if a]), (job - 0.4, 0.8), color=colours["abandoned"], lw=0
        )
        down = clipped([(a / scale, b / scale) for a, b in schedule["down"][job]])
        axis.broken_barh(down, (job - 0.4, 0.8), color=colours["down"], lw=0)
        for t, _ in down:  # the failure instant, visible even when R is short
            axis.plot([t, t], [job - 0.45, job + 0.45], color="k", lw=1.2)
    starts = np.searchsorted(labels, np.arange(len(spec.groups)))
    for g, first in enumerate(starts):
        if g:
            axis.axhline(first - 0.5, color="k", lw=0.6)
    axis.set_yticks((starts + np.append(starts[1:], n_jobs) - 1) / 2, [figure_text(name) for name in spec.names])
    axis.set_ylim(n_jobs - 0.5, -0.5)
    axis.set_xlim(start, stop)
    shown = schedule["failures_shown"]
    axis.set(
        xlabel=f"time{unit}",
        title=f"one period ({schedule['period'] / scale:.3g}{unit.replace(' (', ' ').rstrip(')')}) of the recommended "
        "schedule, "
        f"{shown} failure{'' if shown == 1 else 's'} in view",
    )
    # Two-level checkpoints: a window runs from the snapshot to the drain's end, and the job
    # computes again once the snapshot ended (docs/model.md §1d).
    write = "snapshot + drain (computing during the drain)" if spec.has_snapshots else "write"
    names = {
        "compute": "compute",
        "write": write,
        "abandoned": f"{write.split(' (')[0]} abandoned at a failure",
        "down": "down (restart after a failure)",
    }
    handles = [Rectangle((0, 0), 1, 1, color=colours[k]) for k in names]
    axis.legend(handles, list(names.values()), loc="center left", bbox_to_anchor=(1.01, 0.5), fontsize=8)
    return figure


def writers_figure(writers, names, draws=None):
    """The fraction of time with n_w writers, Young and the design, averaged over the draws
    where it is defined (every job fired before H); a set with no such draw says so."""
    plt = _pyplot()
    figure, axis = plt.subplots(figsize=(7.5, 4.2), constrained_layout=True)
    shown_sets = [name for name in ("current", "young", "design") if name in names]
    width = 0.8 / len(shown_sets)
    pairs = [(name, np.asarray(writers[names.index(name)], np.float64)) for name in shown_sets]
    shown = [fraction for _, fraction in pairs if np.isfinite(fraction).all()]
    last = max([int(np.nonzero(fraction > 1e-4)[0].max(initial=0)) for fraction in shown], default=0)
    levels = np.arange(last + 1)
    missing = []
    for k, (name, fraction) in enumerate(pairs):
        count = "" if draws is None else f" ({draws[name]} draw{'s' * (draws[name] != 1)})"
        if not np.isfinite(fraction).all():
            missing.append(LABELS[name])
            axis.bar([], [], color=COLOURS[name], label=f"{LABELS[name]}: no draw where every job fired")
            continue
        offset = (k - (len(pairs) - 1) / 2) * width
        axis.bar(levels + offset, fraction[: last + 1], width, color=COLOURS[name], label=LABELS[name] + count)
    if missing:
        axis.text(
            0.5,
            0.5,
            f"{' and '.join(missing)}: undefined (some job never fired before H in every draw)",
            transform=axis.transAxes,
            ha="center",
            va="center",
            fontsize=9,
            wrap=True,
        )
    axis.set_xticks(levels)
    # A long tail of rare writer counts vanishes on a linear axis: show it on a log one.
    tail = [fraction[1 : last + 1] for fraction in shown]
    positive = np.concatenate([t[t > 0] for t in tail]) if tail else np.zeros(0)
    log = positive.size > 0 and positive.min() < 0.01 * max(float(np.max(f)) for f in shown)
    if log:
        axis.set_yscale("log")
        axis.set_ylim(max(positive.min() / 2, 1e-6), 1.5)
    axis.set(
        xlabel="writers at once, n_w",
        ylabel="fraction of time" + (" (log scale)" if log else ""),
        title=f"writer count once every job has fired, {', '.join(LABELS[n] for n in shown_sets[:-1])} and the design",
    )
    axis.legend(loc="upper right", fontsize=8)
    return figure


def trade_off_figure(spec, summary):
    """GPU-hours a day lost (a file with units; else the fleet waste) against the volume
    written a day (else over H), along the recommended intervals scaled by common factors,
    with the design, the current intervals, the baselines and the sets scaled to the budgets
    as points, and the budget on the volume as a line; 95% CIs."""
    plt = _pyplot()
    units = spec.time_unit is not None
    curve = summary["trade_off"]
    gpus = float(summary["gpus"]["fleet"]) if units else 1.0
    scale = 24.0 * gpus if units else 1.0
    volume_scale, volume_unit = 1.0, ""
    if units:
        top = max(row["mean"] for row in curve["written"])
        volume_scale, volume_unit = next(
            (
                (factor, name)
                for factor, name in ((1e15, "PB"), (1e12, "TB"), (1e9, "GB"), (1e6, "MB"))
                if top >= factor
            ),
            (1.0, "B"),
        )
    figure, axis = plt.subplots(figsize=(7.5, 4.6), constrained_layout=True)
    x = np.array([row["mean"] for row in curve["written"]]) / volume_scale
    y = np.array([row["mean"] for row in curve["waste"]]) * scale
    y_half = np.array([(row["high"] - row["low"]) / 2 for row in curve["waste"]]) * scale
    axis.errorbar(
        x, y, yerr=y_half, color="#d62728", alpha=0.6, marker=".", capsize=2, label="design's intervals × factor"
    )
    for factor, xi, yi in zip(curve["factors"], x, y):
        axis.annotate(
            f"×{factor:.2g}", (xi, yi), textcoords="offset points", xytext=(4, 4), fontsize=7, color="#d62728"
        )
    sets = summary["power_and_storage"]["sets"]
    waste = summary["per_group_fleet_waste"]
    for name, row in sets.items():
        point_x = row["volume"]["mean"] / volume_scale
        point_y = waste[name]["mean"] * scale
        base = name.removesuffix("_scaled")
        colour = COLOURS.get(base, "#17becf")
        label = str(LABELS.get(base, base)) + (" scaled to the budgets" if name.endswith("_scaled") else "")
        axis.plot(
            point_x,
            point_y,
            marker="*" if name == "design" else "o",
            markersize=13 if name == "design" else 7,
            color=colour,
            markerfacecolor="none" if name.endswith("_scaled") else colour,
            linestyle="none",
            label=figure_text(label),
        )
    budgets = summary.get("budgets")
    if budgets is not None and "written" in budgets["limits"]:
        axis.axvline(
            budgets["limits"]["written"] / volume_scale, color="k", linestyle="--", linewidth=1, label="budget"
        )
    per = "a day" if units else "over H"
    axis.set(
        xlabel=f"volume written {per}" + (f" ({volume_unit})" if units else ""),
        ylabel="GPU-hours a day lost (waste × GPUs × 24)" if units else "fleet waste",
        title="what the intervals cost against what they write",
    )
    axis.legend(loc="center left", bbox_to_anchor=(1.01, 0.5), fontsize=8)
    return figure


def all_figures(spec, summary, schedule, per_group, writers, names) -> dict:
    draws = summary.get("writers_draws")
    figures = {
        "objective.png": objective_figure(spec, summary),
        "waste_by_group.png": waste_figure(spec, per_group, names),
        "schedule.png": schedule_figure(spec, schedule),
        "writers.png": writers_figure(writers, names, draws),
    }
    if "trade_off" in summary:
        figures["trade_off.png"] = trade_off_figure(spec, summary)
    return figures
