"""Figures of the FTLE experiment (`ckpt_jax.experiments.ftle`, claim 5): one message per panel.

Each sub-claim has its own figure: `growth_figure` (below saturation: growth with N, and the
rise with load to a peak), `regime_figure` (beyond saturation: the rate per unit time, and
how the high-load rate changes with the horizon). Legends sit below their panels, and
series sharing an x value are shifted slightly apart so that every error bar is visible.
"""

from __future__ import annotations

import numpy as np

from . import rules
from .framework import fmt, new_figure

__all__ = ["growth_figure", "panel_titles", "regime_figure"]


def _offsets(count: int, spread: float = 0.03):
    """Multiplicative x offsets that keep overlapping error bars of ``count`` series apart (log x)."""
    return np.exp(np.linspace(-spread, spread, count)) if count > 1 else np.ones(1)


def _errorbar(ax, x, rows, key, ci_key, **style):
    mean = np.array([r[key] for r in rows])
    err = np.array([[r[key] - r[ci_key][0], r[ci_key][1] - r[key]] for r in rows]).T
    return ax.errorbar(x, mean, yerr=err, marker="o", ms=4, capsize=3, **style)


def _load_axis(ax, loads, saturation):
    ax.set_xscale("log", base=2)
    # Tilted: on a log axis 1, 1.25 and 1.5 lie too close for upright labels.
    ax.set_xticks(list(loads), [f"{load:g}" for load in loads], rotation=45, ha="right", rotation_mode="anchor")
    ax.minorticks_off()
    ax.set_xlim(min(loads) / 1.25, max(loads) * 1.25)
    ax.set_xlabel("load ρ = N d / (T + d)")
    if max(loads) > saturation:
        ax.axvspan(saturation, max(loads) * 1.25, color="0.92", zorder=0, label="storage saturated (ρ > 1)")


def _finish_axes(ax, fig_legend_cols=3):
    ax.axhline(0.0, color="0.4", lw=0.8)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(0.0, -0.16), ncols=fig_legend_cols, frameon=False)


def growth_figure(table, peaks, config, saturation, messages):
    """Sub-claim ρ ≤ 1: growth with N (left) and with load up to the peak (right).

    ``messages`` holds each panel's title (``by_n``, ``by_load``), written from the measured
    outcomes so that a title never states more than the data showed.
    """
    from matplotlib import colormaps

    n_jobs_list, loads, main = config["n_jobs"], config["loads"], config["main_horizon"]
    fig = new_figure(figsize=(12, 5.4), layout="constrained")
    by_n, by_load = fig.subplots(1, 2, sharey=True)
    low_loads = [load for load in loads if load <= saturation]
    colors = [colormaps["plasma"](x) for x in np.linspace(0.0, 0.85, len(low_loads))]
    for color, load, shift in zip(colors, low_loads, _offsets(len(low_loads))):
        _errorbar(
            by_n,
            np.asarray(n_jobs_list) * shift,
            [table[(n, load)] for n in n_jobs_list],
            "mean",
            "ci",
            color=color,
            label=f"ρ = {load:g}",
        )
    by_n.set_xscale("log", base=2)
    by_n.set_xticks(list(n_jobs_list), [str(n) for n in n_jobs_list])
    by_n.minorticks_off()
    by_n.set_xlabel("fleet size N")
    by_n.set_ylabel(f"FTLE per cycle of job 0 over {main} cycles")
    by_n.set_title(messages["by_n"], fontsize=10)
    _finish_axes(by_n)
    shades = [colormaps["viridis"](x) for x in np.linspace(0.0, 0.85, len(n_jobs_list))]
    _load_axis(by_load, loads, saturation)
    for color, n_jobs, shift in zip(shades, n_jobs_list, _offsets(len(n_jobs_list))):
        _errorbar(
            by_load,
            np.asarray(loads) * shift,
            [table[(n_jobs, load)] for load in loads],
            "mean",
            "ci",
            color=color,
            label=f"N = {n_jobs}",
        )
        peak = peaks[n_jobs]["per_cycle"]
        by_load.plot(
            peak["grid"] * shift,
            table[(n_jobs, peak["grid"])]["mean"],
            "*",
            ms=14,
            color=color,
            mec="black",
            mew=0.6,
            zorder=5,
        )
    by_load.plot([], [], "*", ms=10, color="0.6", mec="black", mew=0.6, ls="none", label="peak of each N")
    by_load.set_title(messages["by_load"], fontsize=10)
    _finish_axes(by_load)
    fig.suptitle(
        f"Claim 5, FTLE after a {config['burn_in']}-cycle burn-in: (1/K) log σ_max over K = {main} cycles "
        f"(mean over {config['launches']} launches, {rules.CONFIDENCE:.0%} interval)"
    )
    return fig


def regime_figure(table, config, saturation, messages):
    """Sub-claim ρ > 1: the rate per unit time (left) and the horizon dependence at the top load (right).

    ``messages`` holds the panel titles (``per_time``, ``by_horizon``), written from the data.
    """
    from matplotlib import colormaps

    n_jobs_list, loads = config["n_jobs"], config["loads"]
    main, burn_in, horizons = config["main_horizon"], config["burn_in"], config["horizons"]
    top = max(loads)
    fig = new_figure(figsize=(12, 5.4), layout="constrained")
    per_time, by_horizon = fig.subplots(1, 2)
    shades = [colormaps["viridis"](x) for x in np.linspace(0.0, 0.85, len(n_jobs_list))]
    _load_axis(per_time, loads, saturation)
    for color, n_jobs, shift in zip(shades, n_jobs_list, _offsets(len(n_jobs_list))):
        _errorbar(
            per_time,
            np.asarray(loads) * shift,
            [table[(n_jobs, load)] for load in loads],
            "mean_per_time",
            "ci_per_time",
            color=color,
            label=f"N = {n_jobs}",
        )
    per_time.set_ylabel(f"FTLE per unit time over {main} cycles")
    per_time.set_title(messages["per_time"], fontsize=10)
    _finish_axes(per_time)
    for color, n_jobs, shift in zip(shades, n_jobs_list, _offsets(len(n_jobs_list), 0.04)):
        rows = table[(n_jobs, top)]["horizons"]
        _errorbar(
            by_horizon,
            np.asarray(horizons) * shift,
            rows,
            "mean",
            "ci",
            color=color,
            label=f"N = {n_jobs}, after burn-in",
        )
        launch = table[(n_jobs, top)]
        # Beside, not on, the after-burn-in point at the same K, so that both stay visible.
        by_horizon.errorbar(
            [burn_in * shift * 1.12],
            [launch["from_launch_mean"]],
            yerr=[
                [launch["from_launch_mean"] - launch["from_launch_ci"][0]],
                [launch["from_launch_ci"][1] - launch["from_launch_mean"]],
            ],
            marker="o",
            mfc="white",
            ms=7,
            capsize=3,
            color=color,
            ls="none",
        )
    by_horizon.plot([], [], "o", mfc="white", color="0.3", ls="none", label=f"from launch, K = {burn_in}")
    by_horizon.set_xscale("log", base=2)
    by_horizon.set_xticks(list(horizons), [str(k) for k in horizons])
    by_horizon.minorticks_off()
    by_horizon.set_xlabel("horizon K (cycles after the burn-in)")
    by_horizon.set_ylabel("FTLE per cycle of job 0")
    by_horizon.set_title(messages["by_horizon"], fontsize=10)
    _finish_axes(by_horizon, 3)
    fig.suptitle(
        f"Claim 5, FTLE beyond storage saturation ({config['burn_in']}-cycle burn-in; mean over "
        f"{config['launches']} launches, {rules.CONFIDENCE:.0%} interval)"
    )
    return fig


def panel_titles(table, peaks, config, saturation, grows_with_n: bool, knee) -> dict:
    """One message per panel, each from the measured outcome it shows (``knee``: the top load ≤ saturation)."""
    n_jobs_list, loads, main, horizons = config["n_jobs"], config["loads"], config["main_horizon"], config["horizons"]
    top = max(loads)

    def span(values):
        low, high = min(values), max(values)
        return fmt(low) if low == high else f"{fmt(low)}–{fmt(high)}"

    relative = [100 * table[(n, top)]["horizon_change"]["relative"] for n in n_jobs_list]
    titles = dict(
        by_n=(
            f"Below saturation (ρ ≤ {fmt(saturation)}) the FTLE grows with N at every load"
            if grows_with_n
            else f"Below saturation (ρ ≤ {fmt(saturation)}) the FTLE does not grow with N at every load"
        ),
        by_load=f"Against load it peaks at ρ = {span([peaks[n]['per_cycle']['grid'] for n in n_jobs_list])} "
        "(stars), then falls",
        per_time=f"Per unit time it peaks at ρ = {span([peaks[n]['per_time']['grid'] for n in n_jobs_list])}",
        by_horizon=(
            f"At ρ = {fmt(top)} the rate changes by {fmt(min(relative), 2)} % to {fmt(max(relative), 2)} %\n"
            f"from K = {main} to K = {horizons[-1]} cycles after the burn-in"
        ),
    )
    if knee is not None:
        steeper = all(
            table[(n, top)]["mean_per_time"] / table[(n, knee)]["mean_per_time"]
            < table[(n, top)]["mean"] / table[(n, knee)]["mean"]
            for n in n_jobs_list
        )
        if steeper:
            titles["per_time"] += "\nand beyond saturation falls faster than per cycle"
    return titles
