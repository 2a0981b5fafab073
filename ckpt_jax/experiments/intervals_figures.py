"""Figures of the intervals experiment (`ckpt_jax.experiments.intervals`, claim 10): one
message per panel, legends outside the data."""

from __future__ import annotations

import numpy as np

from .framework import fmt, new_figure, save_figure

_OPTIMA = (  # (key in the numbers, label, colour, line style)
    ("young", "Young √(2DM)", "tab:orange", "--"),
    ("daly", "Daly (on top of T*)", "tab:green", "-."),
    ("optimum", "exact T* (renewal formula)", "black", "-"),
    ("designed", "design (optax over the simulator)", "tab:red", ":"),
)


def _plain_log_ticks(axis):
    """Plain numbers (2, 3, 5) on a log axis instead of 2×10⁰."""
    from matplotlib.ticker import LogLocator, NullFormatter, ScalarFormatter

    axis.set_major_locator(LogLocator(base=10, subs=(1.0, 1.5, 2.0, 3.0, 5.0, 7.0)))
    formatter = ScalarFormatter()
    formatter.set_scientific(False)
    axis.set_major_formatter(formatter)
    axis.set_minor_formatter(NullFormatter())


def single_job_figure(single, path, optimum_rtol) -> str:
    """10a: waste vs T, simulated and the formula, with the optima; and the residuals."""
    curve = single["curve"]
    T = np.asarray(curve["intervals"], float)
    measured, se = np.asarray(curve["measured"], float), np.asarray(curve["stderr"], float)
    formula = np.asarray(curve["formula"], float)
    low, high = np.asarray(curve["bracket_low"], float), np.asarray(curve["bracket_high"], float)
    fig = new_figure(figsize=(13, 5.2), layout="constrained")
    left, right = fig.subplots(1, 2)

    fine = np.geomspace(T[0], T[-1], 200)
    from .. import theory

    left.plot(
        fine,
        np.asarray(theory.renewal_waste(fine, single["write"], single["mtbf"], single["restart"])),
        color="tab:blue",
        lw=1.5,
        label="renewal formula W(T)",
    )
    left.errorbar(
        T,
        measured,
        yerr=2 * se,
        fmt="o",
        color="tab:blue",
        mfc="white",
        ms=5,
        capsize=2,
        label=f"simulated, {single['draws']} draws of H = {fmt(single['horizon'])} (±2 SE)",
    )
    for key, label, colour, style in _OPTIMA:
        left.axvline(single[key], color=colour, ls=style, lw=1.3, label=f"{label}: T = {fmt(single[key], 4)}")
    optimum = single["optimum"]
    left.axvspan(
        optimum * (1 - optimum_rtol),
        optimum * (1 + optimum_rtol),
        color="grey",
        alpha=0.15,
        label=f"T* ± {fmt(100 * optimum_rtol)}%",
    )
    left.set_xscale("log")
    _plain_log_ticks(left.xaxis)
    left.set_xlabel("checkpoint interval T (compute work between checkpoints)")
    left.set_ylabel("waste (fraction of wall-clock time)")
    left.set_title(
        f"one job alone (D = {fmt(single['write'])}, M = {fmt(single['mtbf'])}, "
        f"R = {fmt(single['restart'])}): simulated waste, the renewal formula and the optima",
        fontsize=10,
    )
    left.legend(loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=2, fontsize=8, frameon=False)

    right.fill_between(
        T,
        low - formula,
        high - formula,
        color="tab:blue",
        alpha=0.2,
        label="finite-horizon bracket − W (renewal_waste_bounds)",
    )
    right.errorbar(
        T,
        measured - formula,
        yerr=2 * se,
        fmt="o",
        color="tab:blue",
        mfc="white",
        ms=5,
        capsize=2,
        label="simulated − W (±2 SE)",
    )
    right.axhline(0, color="grey", lw=0.8)
    right.set_xscale("log")
    _plain_log_ticks(right.xaxis)
    right.set_xlabel("checkpoint interval T")
    right.set_ylabel("measured waste − formula W(T)")
    right.set_title("residuals: simulated − formula against the finite-horizon bracket", fontsize=10)
    right.legend(loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=1, fontsize=8, frameon=False)
    return save_figure(fig, path)


def grid_figure(pair, path) -> str:
    """10b: the two-job objective on the fine grid, with the design, the grid optimum and Young."""
    grid = pair["grid"]
    t0, t1 = (np.asarray(a, float) for a in grid["fine_axes"])
    waste = np.asarray(grid["fine_waste"], float)
    fig = new_figure(figsize=(7.5, 6.2), layout="constrained")
    ax = fig.subplots()
    image = ax.pcolormesh(t0, t1, waste.T, shading="nearest", cmap="viridis")
    fig.colorbar(image, ax=ax, label="fleet waste (mean over the grid's draws)")
    marks = [
        (pair["designed"], "design", "tab:red", "o"),
        (grid["optimum"], "grid optimum (quadratic fit)", "white", "X"),
        (grid["grid_point"], "best grid point", "white", "s"),
        (pair["young"], "Young per job", "tab:orange", "^"),
    ]
    for point, label, colour, marker in marks:
        point = np.asarray(point, float)
        ax.plot(
            point[0],
            point[1],
            marker,
            color=colour,
            mec="black",
            ms=10,
            ls="none",
            label=f"{label}: ({fmt(point[0], 3)}, {fmt(point[1], 3)})",
        )
    ax.set_xscale("log")
    ax.set_yscale("log")
    _plain_log_ticks(ax.xaxis)
    _plain_log_ticks(ax.yaxis)
    ax.set_xlabel("T of job 0 (D = 0.5, M = 10)")
    ax.set_ylabel("T of job 1 (D = 1, M = 20)")
    rel = ", ".join(f"{100 * r:+.1f}%" for r in pair["rel_error"])
    ax.set_title(f"two jobs sharing storage: design vs grid optimum {rel}", fontsize=10)
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.12), ncol=2, fontsize=8, frameon=False)
    return save_figure(fig, path)


def fleet_figure(storm, path, baselines) -> str:
    """10b: fleet waste of the design and each baseline, and the waste saved, with 95% intervals."""
    fig = new_figure(figsize=(13, 5.0), layout="constrained")
    left, right = fig.subplots(1, 2)
    names = ["design"] + list(baselines)
    rows = [storm["waste"]] + [storm["baselines"][n]["waste"] for n in baselines]
    means = np.array([r["mean"] for r in rows])
    errors = np.array([[r["mean"] - r["low"], r["high"] - r["mean"]] for r in rows]).T
    colours = ["tab:red", "tab:orange", "tab:green", "tab:purple"]
    intervals = {n: storm["designed"] if n == "design" else storm["baselines"][n]["intervals"] for n in names}
    y = np.arange(len(names))[::-1]
    for k in range(len(names)):
        left.errorbar(means[k], y[k], xerr=errors[:, k : k + 1], fmt="o", color=colours[k], ms=7, capsize=5, lw=2)
    left.set_yticks(
        y,
        [f"{n}\nT = {', '.join(fmt(t, 3) for t in intervals[n])}" for n in names],
        fontsize=8,
    )
    left.set_ylim(y.min() - 0.6, y.max() + 0.6)
    left.grid(axis="x", alpha=0.3)
    left.set_xlabel("fleet waste (size-weighted, 95% interval)")
    left.set_title(
        f"{storm['jobs']} jobs, sizes {', '.join(fmt(s) for s in storm['sizes'])} (T per size group): fleet waste",
        fontsize=10,
    )

    saved = [storm["baselines"][n]["saved"] for n in baselines]
    means = np.array([s["mean"] for s in saved])
    errors = np.array([[s["mean"] - s["low"], s["high"] - s["mean"]] for s in saved]).T
    y = np.arange(len(baselines))[::-1]
    right.barh(y, means, xerr=errors, color=colours[1:], alpha=0.8, capsize=4)
    right.axvline(0, color="black", lw=1)
    right.set_yticks(y, list(baselines))
    right.set_xlabel("waste saved by the design (baseline − design, paired draws, 95% interval)")
    right.set_title("saved against each baseline: > 0 means the design is better", fontsize=10)
    return save_figure(fig, path)
