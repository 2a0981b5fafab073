"""The figures of ``ckpt-jax design``: one message per panel."""

from __future__ import annotations

import numpy as np

COLOURS = {"design": "#d62728", "young": "#1f77b4", "daly": "#2ca02c", "young_contended": "#9467bd"}
LABELS = {"design": "design", "young": "Young", "daly": "Daly", "young_contended": "contended Young"}


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def close(figure) -> None:
    _pyplot().close(figure)


def objective_figure(spec, summary):
    """Left: the smoothed objective per step with ±1 standard error; right: interval per group."""
    plt = _pyplot()
    history = summary["history"]
    objective, stderr = np.asarray(history["objective"]), np.asarray(history["stderr"])
    steps = np.arange(1, objective.size + 1)
    figure, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2), constrained_layout=True)
    left.plot(steps, objective, color="k", lw=1.2, label="fleet waste (training draws)")
    left.fill_between(steps, objective - stderr, objective + stderr, color="k", alpha=0.15, lw=0,
                      label="± 1 standard error")
    left.set(xlabel="optimisation step", ylabel="smoothed fleet waste", title="objective vs step")
    left.legend(loc="best", fontsize=8)
    intervals = np.asarray(history["intervals"])
    colours = plt.get_cmap("viridis")(np.linspace(0, 0.9, len(spec.groups)))
    for g, group in enumerate(spec.groups):
        right.plot(steps, intervals[:, g], color=colours[g], lw=1.4, label=group.name)
    right.set_yscale("log")
    from matplotlib.ticker import NullFormatter, ScalarFormatter

    right.yaxis.set_major_formatter(ScalarFormatter())
    right.yaxis.set_minor_formatter(NullFormatter())
    right.set(xlabel="optimisation step", ylabel="checkpoint interval T", title="interval per group vs step")
    right.legend(loc="center left", bbox_to_anchor=(1.01, 0.5), fontsize=8, title="group")
    return figure


def waste_figure(spec, per_group, names):
    """Grouped bars: waste per job group for each baseline and the design, 95% CIs."""
    plt = _pyplot()
    n_groups = len(spec.groups)
    order = [name for name in ("young", "daly", "young_contended", "design") if name in names]
    width = 0.8 / len(order)
    figure, axis = plt.subplots(figsize=(max(6.5, 1.6 * n_groups + 3), 4.2), constrained_layout=True)
    x = np.arange(n_groups)
    top = 0.0
    for k, name in enumerate(order):
        samples = per_group[names.index(name)]  # (S, G)
        mean = samples.mean(axis=0)
        half = 1.96 * samples.std(axis=0, ddof=1) / np.sqrt(samples.shape[0])
        top = max(top, float((mean + half).max()))
        axis.bar(x + (k - (len(order) - 1) / 2) * width, mean, width, yerr=half, capsize=2,
                 color=COLOURS[name], label=LABELS[name] + (" (after)" if name == "design" else " (before)"))
    axis.set_xticks(x, spec.names)
    axis.set_ylim(0, top * 1.25)
    axis.set(xlabel="job group", ylabel="waste (1 − useful work / H)", title="waste per job group, before and after")
    axis.legend(loc="upper left", ncols=len(order), fontsize=8)
    return figure


def schedule_figure(spec, schedule):
    """Gantt chart of one period of a run with failures: per job, compute, completed and
    abandoned writes, and the time down restarting after a failure."""
    plt = _pyplot()
    fire, end, abandoned = schedule["fire"], schedule["end"], schedule["abandoned"]
    start, stop = schedule["start"], schedule["stop"]
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
        axis.broken_barh(clipped([w for w, a in zip(spans, lost) if not a]), (job - 0.4, 0.8),
                         color=colours["write"], lw=0)
        axis.broken_barh(clipped([w for w, a in zip(spans, lost) if a]), (job - 0.4, 0.8),
                         color=colours["abandoned"], lw=0)
        down = clipped(schedule["down"][job])
        axis.broken_barh(down, (job - 0.4, 0.8), color=colours["down"], lw=0)
        for t, _ in down:  # the failure instant, visible even when R is short
            axis.plot([t, t], [job - 0.45, job + 0.45], color="k", lw=1.2)
    starts = np.searchsorted(labels, np.arange(len(spec.groups)))
    for g, first in enumerate(starts):
        if g:
            axis.axhline(first - 0.5, color="k", lw=0.6)
    axis.set_yticks((starts + np.append(starts[1:], n_jobs) - 1) / 2, spec.names)
    axis.set_ylim(n_jobs - 0.5, -0.5)
    axis.set_xlim(start, stop)
    shown = schedule["failures_shown"]
    axis.set(xlabel="time", title=f"one period ({schedule['period']:.3g}) of the recommended schedule, "
             f"{shown} failure{'' if shown == 1 else 's'} in view")
    names = {"compute": "compute", "write": "write", "abandoned": "write abandoned at a failure",
             "down": "down (restart after a failure)"}
    handles = [plt.Rectangle((0, 0), 1, 1, color=colours[k]) for k in names]
    axis.legend(handles, list(names.values()), loc="center left", bbox_to_anchor=(1.01, 0.5), fontsize=8)
    return figure


def writers_figure(writers, names):
    """The fraction of time with n_w writers, Young (before) and the design (after)."""
    plt = _pyplot()
    figure, axis = plt.subplots(figsize=(7.5, 4.2), constrained_layout=True)
    pairs = [(name, writers[names.index(name)]) for name in ("young", "design")]
    last = max(int(np.nonzero(fraction > 1e-4)[0].max(initial=0)) for _, fraction in pairs)
    levels = np.arange(last + 1)
    for k, (name, fraction) in enumerate(pairs):
        axis.bar(levels + (k - 0.5) * 0.4, fraction[: last + 1], 0.4, color=COLOURS[name],
                 label=LABELS[name] + (" (after)" if name == "design" else " (before)"))
    axis.set(xlabel="writers at once, n_w", ylabel="fraction of time", title="writer count, before and after")
    axis.legend(loc="upper right", fontsize=8)
    return figure


def all_figures(spec, summary, schedule, per_group, writers, names) -> dict:
    return {
        "objective.png": objective_figure(spec, summary),
        "waste_by_group.png": waste_figure(spec, per_group, names),
        "schedule.png": schedule_figure(spec, schedule),
        "writers.png": writers_figure(writers, names),
    }
