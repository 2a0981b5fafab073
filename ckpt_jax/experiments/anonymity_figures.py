"""Figures of the claim-9 experiment (`ckpt_jax.experiments.anonymity`): one message per panel."""

from __future__ import annotations

import numpy as np

from .framework import new_figure

FLOOR = 1e-17  # exact zeros are drawn at this level on log axes (said on each axis)
CASE_STYLES = (("tab:red", "o", "-"), ("tab:orange", "s", "--"), ("tab:purple", "^", "-."), ("tab:blue", "v", ":"))


def figure_9a_coupling(sizes, *, coupling_tol: float, control_tol: float, sizes_pair):
    """9a: coupling functions in time phase and in work, the controls, and the cap scan."""

    fig = new_figure(figsize=(13, 9), layout="constrained")
    (phase_ax, work_ax), (scan_ax, control_ax) = fig.subplots(2, 2)
    for (label, row), (color, marker, line) in zip(sizes["coupled"].items(), CASE_STYLES):
        neutral = row["phase"]["max_abs"] <= coupling_tol * row["period"]
        name = label + (" (neutral: one common slowdown)" if neutral else "")
        phase_ax.plot(
            row["phases"] / row["period"],
            row["phase_coupling"] / row["period"],
            marker=marker,
            ls=line,
            color=color,
            ms=3.5,
            mfc="none",
            lw=1.0,
            label=name,
        )
        work_ax.plot(
            row["deltas"] / row["length"],
            row["work_coupling"] / row["length"],
            marker=marker,
            ls=line,
            color=color,
            ms=3.5,
            mfc="none",
            lw=1.0,
            label=name,
        )
    for ax, what, unit in (
        (phase_ax, "time phase φ (time to the next solo firing)", "P"),
        (work_ax, "work coordinate u (work left to the next firing)", "L"),
    ):
        ax.axhline(0, color="0.5", lw=0.7)
        ax.set_xlabel(f"launch lag of job 1 in {what} / {unit}")
        ax.set_ylabel(f"first-cycle coupling c / {unit}")
    handles, names = phase_ax.get_legend_handles_labels()
    fig.legend(handles, names, loc="outside lower center", ncols=len(names), fontsize=9, frameon=False)
    phase_ax.set_title("in time phase: mostly a detuning (the mean), its swing is the locking width", fontsize=10)
    work_ax.set_title("in work coordinates: the same coupling, reshaped by the solo speeds", fontsize=10)
    for (policy, entry), (color, marker, line), size in zip(sizes["scan"].items(), CASE_STYLES[::3], (9, 5)):
        amp = np.maximum(entry["amplitude"], FLOOR)
        scan_ax.semilogy(entry["caps"], amp, ls=line, color=color, lw=1.0)
        on = entry["predicted"]
        scan_ax.semilogy(entry["caps"][on], amp[on], marker, color=color, ms=size, label=f"{policy}: slowdowns differ")
        scan_ax.semilogy(
            entry["caps"][~on],
            amp[~on],
            marker,
            color=color,
            ms=size,
            mfc="none",
            label=f"{policy}: one common slowdown",
        )
    for value, text in ((min(sizes_pair), "min w"), (max(sizes_pair), "max w"), (sum(sizes_pair), "Σ w")):
        scan_ax.axvline(value, color="0.6", lw=0.8, ls=":")
        scan_ax.text(value, 1e-14, f" {text}", fontsize=8, color="0.35", rotation=90, va="bottom")
    scan_ax.axhline(coupling_tol, color="black", lw=1, ls="--", label=f"threshold {coupling_tol:.0e}")
    scan_ax.set_ylim(FLOOR / 3, 3)
    scan_ax.set_xlabel(f"power cap C (sizes w = {sizes_pair[0]:g}, {sizes_pair[1]:g})")
    scan_ax.set_ylabel(f"max |c| / P in time phase (0 drawn at {FLOOR:.0e})")
    scan_ax.set_title("the pair couples exactly where its two shared-compute slowdowns differ", fontsize=10)
    scan_ax.legend(fontsize=8, loc="center right", framealpha=0.9)
    labels, values = [], []
    for label, row in sizes["controls"].items():
        labels.append(f"{label}\n({row['kind']})")
        values.append(max(row["phase"]["max_abs"] / row["period"], row["work"]["max_abs"] / row["length"]))
    y = np.arange(len(values))
    control_ax.barh(y, np.maximum(values, FLOOR), color="tab:green", left=FLOOR / 3)
    control_ax.set_xscale("log")
    control_ax.set_xlim(FLOOR / 3, 1.0)
    control_ax.axvline(control_tol, color="black", lw=1, ls="--", label=f"control threshold {control_tol:.0e}")
    control_ax.set_yticks(y, labels, fontsize=8)
    control_ax.set_xlabel(f"max |c| over both coordinates, per circle (0 drawn at {FLOOR:.0e})")
    control_ax.set_title("controls: rounding level only", fontsize=10)
    control_ax.legend(fontsize=8, loc="lower right")
    fig.suptitle("Claim 9a: pairs of unequal size under a power cap (f(n) = n), coupling against each job alone")
    return fig


def figure_9a_locking(sizes):
    """9a: for each coupled case, the lag map of the detuned pair and where long runs end."""
    rows = [(label, row) for label, row in sizes["coupled"].items() if "detuned" in row]
    fig = new_figure(figsize=(4.6 * max(len(rows), 1), 7.6), layout="constrained")
    axes = np.asarray(fig.subplots(2, max(len(rows), 1), squeeze=False))
    for col, (label, row) in enumerate(rows):
        map_ax, hist_ax = axes[0, col], axes[1, col]
        detuned = row["detuned"]
        period = detuned["period"]
        map_ax.plot(
            row["phases"] / row["period"],
            row["phase_displacement"] / row["period"],
            "-",
            color="0.55",
            lw=1.2,
            label="equal solo periods: no zero, the lag drifts",
        )
        map_ax.plot(
            detuned["phases"] / period,
            detuned["phase_displacement"] / period,
            "-",
            color="tab:red",
            lw=1.4,
            label="detuned by the mean coupling",
        )
        for point in detuned["phase_fixed"]:
            if point["kind"] == "isolated":
                map_ax.plot(
                    point["lag"] / period, 0, "o", ms=8, color="tab:red", mfc="tab:red" if point["stable"] else "white"
                )
        map_ax.plot([], [], "o", color="tab:red", ms=8, label="stable locked lag")
        map_ax.plot([], [], "o", color="tab:red", mfc="white", ms=8, label="unstable locked lag")
        map_ax.axhline(0, color="black", lw=0.7)
        map_ax.set_title(label, fontsize=10)
        map_ax.set_xlabel("lag φ / P (time phase)")
        top = max(np.max(np.abs(row["phase_displacement"] / row["period"])), 1e-3)
        map_ax.set_ylim(-1.15 * top, 1.15 * top)
        if col == 0:
            handles, names = map_ax.get_legend_handles_labels()
            fig.legend(handles, names, loc="outside lower center", ncols=len(names), fontsize=9, frameon=False)
        bins = np.linspace(0, 1, 41)
        hist_ax.hist(row["final_phases"] / row["period"], bins=bins, color="0.6", alpha=0.8, label="equal solo periods")
        hist_ax.hist(
            detuned["final_phases"] / period,
            bins=bins,
            color="tab:red",
            histtype="step",
            lw=1.6,
            label=f"detuned: {100 * detuned['settled']:.0f} % settled",
        )
        hist_ax.set_xlabel(f"lag φ / P after {row['n_cycles']} cycles")
        # Headroom above the tallest bar, so that the legend hides no bar wherever it stands.
        tallest = max(np.histogram(row["final_phases"] / row["period"], bins)[0].max(), 1)
        tallest = max(tallest, np.histogram(detuned["final_phases"] / period, bins)[0].max())
        hist_ax.set_ylim(0, 1.4 * tallest)
        hist_ax.legend(fontsize=8, loc="upper right", framealpha=0.9)
        if col == 0:
            map_ax.set_ylabel("lag change per cycle D(φ) / P")
            hist_ax.set_ylabel("launches (of a uniform grid)")
    fig.suptitle("Claim 9a: a detuned pair locks at the stable zero of its lag map (top); long runs end there (bottom)")
    return fig


def figure_9b(fcfs, *, coupling_tol: float):
    """9b: fcfs coupling of identical jobs, where long runs end, and the gap-map determinant."""

    fig = new_figure(figsize=(15, 4.8), layout="constrained")
    coupling_ax, hist_ax, det_ax = fig.subplots(1, 3)
    first = next(iter(fcfs["cases"].values()))
    for k, ((label, row), (color, marker, line)) in enumerate(zip(fcfs["cases"].items(), CASE_STYLES)):
        neutral = row["phase"]["max_abs"] <= coupling_tol * row["period"]
        same = k > 0 and np.allclose(row["work_coupling"], first["work_coupling"], rtol=0, atol=1e-12 * row["length"])
        coupling_ax.plot(
            row["deltas"] / row["length"],
            row["work_coupling"] / row["length"],
            marker=marker,
            ls=line,
            color=color,
            ms=3.5 + 2.5 * (k == 0),
            mfc="none",
            lw=1.2 if not neutral else 1.8,
            label=label + (": exactly 0" if neutral else "") + (" (same curve as the first)" if same else ""),
        )
    coupling_ax.axhline(0, color="0.5", lw=0.7)
    coupling_ax.set_xlabel("launch lag δ / L (work left to job 1's next firing)")
    coupling_ax.set_ylabel("first-cycle coupling c / L")
    coupling_ax.set_title("fcfs: overlapping writes are pushed apart in one cycle", fontsize=10)
    coupling_ax.legend(fontsize=8, loc="upper center", framealpha=0.9)
    bins = np.linspace(0, 1, 41)
    for (label, row), (color, _, line) in zip(fcfs["cases"].items(), CASE_STYLES):
        hist_ax.hist(
            row["final_phases"] / row["period"], bins=bins, histtype="step", lw=1.6, color=color, ls=line, label=label
        )
    hist_ax.set_xlabel(f"lag / P after {first['n_cycles']} cycles")
    hist_ax.set_ylabel("launches (of a uniform grid)")
    hist_ax.set_title("fcfs empties the overlapping lags; fair keeps the launch grid", fontsize=10)
    hist_ax.legend(fontsize=8, loc="upper center", framealpha=0.9)
    names = {0: "overlapping", 1: "collision-free", 2: "mixed"}
    markers = {"fcfs": "o", "fair": "x"}
    offsets = {0: -0.2, 1: 0.0, 2: 0.2}
    colors = {0: "tab:red", 1: "tab:blue", 2: "tab:orange"}
    seen = set()
    for spectrum in fcfs["spectra"].values():
        for branch, name in names.items():
            keep = spectrum["smooth"] & (spectrum["branch"] == branch)
            if not keep.any():
                continue
            x = spectrum["n_jobs"] + offsets[branch] + (0.06 if spectrum["storage"] == "fair" else -0.06)
            key = (spectrum["storage"], branch)
            det_ax.plot(
                np.full(int(keep.sum()), x),
                spectrum["determinant"][keep],
                markers[spectrum["storage"]],
                color=colors[branch],
                ms=7,
                mfc="none",
                label=f"{spectrum['storage']}, {name}" if key not in seen else None,
            )
            seen.add(key)
    det_ax.set_xticks(sorted({s["n_jobs"] for s in fcfs["spectra"].values()}))
    det_ax.set_ylim(-0.15, 1.75)
    det_ax.set_xlabel("jobs N (identical; points offset by branch)")
    det_ax.set_ylabel("det of the gap map (jacfwd), smooth points")
    det_ax.set_title("fair storage keeps volume (det 1); fcfs contracts it to 0", fontsize=10)
    det_ax.legend(fontsize=8, loc="upper center", ncols=2, framealpha=0.9)
    fig.suptitle("Claim 9b: first-come-first-served storage couples identical jobs (T = 10, d = 3, f ≡ 1)")
    return fig
