"""Claim 5, second part: nearby trajectories separate exponentially, faster for larger
fleets and higher load.

For fleets of N identical jobs under storage contention (f ≡ 1, uncapped), with the
solo cycle T + d = 1 and load ρ = N d / (T + d) (so d = ρ / N), the experiment draws
random launches seen at a firing of job 0 (`ckpt_jax.lyapunov.random_gaps`) and measures
the finite-time separation rate of the K-cycle gap map:

* `ckpt_jax.lyapunov.ftle` (method ``"jacobian"``): (1/K) log σ_max(J_K ⋯ J_1), with
  every J from `jax.jacfwd` through the event loop — the FTLE reported here; the same run
  gives the growth rate of one fixed perturbation direction (``tangent_rate``);
* `ckpt_jax.lyapunov.ftle_twin`: Benettin twin trajectories along that same direction,
  which must agree with ``tangent_rate`` (a check of the autodiff by the map alone).

The gap map exists only while the firing order is kept; identical jobs keep it (claim 3),
so every launch should run clean; failures are counted, not hidden.

Rates are per cycle of job 0 (the verdict's unit); per unit time is also recorded.
Verdict thresholds are fixed here, before any data were seen:

* exponential separation: the mean FTLE of each cell has a bootstrap CI above 0;
* growth with N (at each ρ) and with ρ (at each N): Spearman correlation between the
  grid variable and the cell means ≥ `MIN_SPEARMAN`;
* the twin check: |tangent_rate − twin rate| ≤ `TWIN_TOLERANCE` for ≥ `TWIN_AGREEMENT`
  of the launches (a twin may straddle a kink of the piecewise-smooth map).
"""

from __future__ import annotations

import functools
import time
from pathlib import Path

import jax
import numpy as np

from .. import Fleet
from ..lyapunov import ftle, ftle_twin, random_gaps
from . import NOT_REPRODUCED, PARTIALLY, REPRODUCED, check_size, identical_fleets, finish, new_figure, save_figure, verdict

NAME = "ftle"
CLAIMS = (5,)

LOADS = (0.125, 0.25, 0.5, 1.0, 2.0)  # ρ = N d / (T + d)
TWIN_EPS = 1e-8  # twin separation, in units of the cycle work T + d

# Verdict thresholds, fixed before looking at data.
CONFIDENCE = 0.95  # bootstrap interval of each cell's mean FTLE
MIN_SPEARMAN = 0.8  # rank correlation that counts as "grows with" (0.8 = one adjacent swap of 4 or 5)
TWIN_TOLERANCE = 1e-4  # per-cycle rate difference between autodiff tangent and twin
TWIN_AGREEMENT = 0.95  # fraction of launches that must meet TWIN_TOLERANCE

SIZES = {
    "smoke": dict(n_jobs=(3, 4), loads=(0.5, 2.0), launches=4, cycles=10, bootstrap=100),
    "quick": dict(n_jobs=(4, 8, 16, 32), loads=LOADS, launches=16, cycles=100, bootstrap=1000),
    "full": dict(n_jobs=(4, 8, 16, 32, 64), loads=LOADS, launches=128, cycles=300, bootstrap=2000),
}


def _identical_fleets(n_jobs: int, loads, launches: int) -> Fleet:
    """Identical fleets at each load (see `experiments.identical_fleets`)."""
    return identical_fleets(n_jobs, loads, launches, flat=True)


@functools.lru_cache(maxsize=None)
def _compiled(n_cycles: int):
    """Batched (over fleets and points) jitted rate functions; one compile per N."""
    launch = jax.jit(jax.vmap(random_gaps))
    jacobian = jax.jit(jax.vmap(functools.partial(ftle, n_cycles=n_cycles, method="jacobian")))
    twin = jax.jit(jax.vmap(functools.partial(ftle_twin, n_cycles=n_cycles, eps=TWIN_EPS)))
    return launch, jacobian, twin


def spearman(x, y) -> float:
    """Spearman rank correlation of two 1-D samples (ties get their average rank)."""
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)

    def ranks(v):
        order = np.argsort(v, kind="stable")
        r = np.empty(v.size)
        r[order] = np.arange(v.size, dtype=np.float64)
        for value in np.unique(v):
            tied = v == value
            r[tied] = r[tied].mean()
        return r

    rx, ry = ranks(x), ranks(y)
    if rx.std() == 0 or ry.std() == 0:
        return float("nan")
    return float(np.corrcoef(rx, ry)[0, 1])


def _mean_ci(values: np.ndarray, n_boot: int, rng: np.random.Generator):
    boot = rng.choice(values, size=(n_boot, values.size), replace=True).mean(axis=1)
    alpha = (1 - CONFIDENCE) / 2
    low, high = np.quantile(boot, [alpha, 1 - alpha])
    return float(values.mean()), float(low), float(high)


def _figure(table, n_jobs_list, loads, cycles):
    from matplotlib import colormaps

    colors = [colormaps["plasma"](x) for x in np.linspace(0.0, 0.85, len(loads))]
    fig = new_figure(figsize=(11, 4.4), layout="constrained")
    by_n, by_load = fig.subplots(1, 2)
    for color, load in zip(colors, loads):
        rows = [table[(n, load)] for n in n_jobs_list]
        mean = np.array([r["mean"] for r in rows])
        err = np.array([[r["mean"] - r["ci"][0], r["ci"][1] - r["mean"]] for r in rows]).T
        by_n.errorbar(n_jobs_list, mean, yerr=err, color=color, marker="o", ms=4, capsize=3, label=f"ρ = {load}")
        twin = np.array([r["twin_mean"] for r in rows])
        by_n.plot(n_jobs_list, twin, "x", color=color, ms=5)
    by_n.set_xscale("log", base=2)
    by_n.set_xlabel("fleet size N")
    by_n.set_ylabel("FTLE per cycle  (1/K) log σ_max")
    by_n.set_title("vs N (×: twin trajectories, one direction)")
    by_n.legend(fontsize=8)
    by_n.grid(True, alpha=0.3)
    shades = [colormaps["viridis"](x) for x in np.linspace(0.0, 0.9, len(n_jobs_list))]
    for color, n_jobs in zip(shades, n_jobs_list):
        rows = [table[(n_jobs, load)] for load in loads]
        mean = np.array([r["mean"] for r in rows])
        err = np.array([[r["mean"] - r["ci"][0], r["ci"][1] - r["mean"]] for r in rows]).T
        by_load.errorbar(loads, mean, yerr=err, color=color, marker="o", ms=4, capsize=3, label=f"N = {n_jobs}")
    by_load.set_xscale("log", base=2)
    by_load.set_xlabel("load ρ = N d / (T + d)")
    by_load.set_title("vs load")
    by_load.legend(fontsize=8)
    by_load.grid(True, alpha=0.3)
    for ax in (by_n, by_load):
        ax.axhline(0.0, color="0.4", lw=0.8)
    fig.suptitle(f"Claim 5: finite-time separation rate over {cycles} cycles of the gap map (mean, 95 % CI)")
    return fig


def run(out_dir, size: str = "quick", progress: bool = True) -> dict:
    """Measures the FTLE on a grid of (N, ρ) from random launches; writes JSON and a figure.

    Args:
      out_dir: directory for ``ftle.json`` and ``ftle.png``.
      size: "smoke", "quick" or "full" (grid, launches per cell, cycles).
      progress: print one line per fleet size (each is one compiled, batched call).

    Returns:
      The result dict written to ``out_dir/ftle.json``.
    """
    jax.config.update("jax_enable_x64", True)
    size = check_size(size)
    out_dir = Path(out_dir)
    config = SIZES[size]
    started = time.perf_counter()
    rng = np.random.default_rng(55)
    n_jobs_list, loads, launches, cycles = config["n_jobs"], config["loads"], config["launches"], config["cycles"]
    launch, jacobian, twin = _compiled(cycles)

    table, cells = {}, []
    for n_jobs in n_jobs_list:
        fleets = _identical_fleets(n_jobs, loads, launches)
        keys = jax.random.split(jax.random.key(5000 + n_jobs), fleets.batch_shape[0])
        points = launch(fleets, keys)
        result = jacobian(fleets, points)
        check = twin(fleets, points)
        rate = np.asarray(result.rate).reshape(len(loads), launches)
        along = np.asarray(result.tangent_rate).reshape(len(loads), launches)
        per_time = (np.asarray(result.rate) * cycles / np.asarray(result.time)).reshape(len(loads), launches)
        status = np.asarray(result.status).reshape(len(loads), launches)
        twin_rate = np.asarray(check.rate).reshape(len(loads), launches)
        twin_status = np.asarray(check.status).reshape(len(loads), launches)
        if progress:
            print(f"[ftle] N = {n_jobs}: {time.perf_counter() - started:.1f} s", flush=True)
        for index, load in enumerate(loads):
            clean = status[index] == 0
            values = rate[index][clean]
            mean, low, high = _mean_ci(values, config["bootstrap"], rng) if values.size else (np.nan,) * 3
            both = clean & (twin_status[index] == 0)
            difference = np.abs(along[index][both] - twin_rate[index][both])
            row = dict(
                n_jobs=n_jobs,
                load=load,
                launches=launches,
                clean=int(clean.sum()),
                failed_status=sorted({int(s) for s in status[index][~clean]}),
                mean=mean,
                ci=[low, high],
                median=float(np.median(values)) if values.size else np.nan,
                std=float(values.std()) if values.size else np.nan,
                fraction_zero=float(np.mean(np.abs(values) < 1e-12)) if values.size else np.nan,
                mean_per_time=float(np.mean(per_time[index][clean])) if values.size else np.nan,
                tangent_mean=float(np.mean(along[index][clean])) if values.size else np.nan,
                twin_mean=float(np.mean(twin_rate[index][both])) if both.any() else np.nan,
                twin_checked=int(both.sum()),
                twin_agreeing=int(np.sum(difference <= TWIN_TOLERANCE)),
                twin_max_difference=float(difference.max()) if difference.size else np.nan,
            )
            table[(n_jobs, load)] = row
            cells.append(row)

    figures = [save_figure(_figure(table, n_jobs_list, loads, cycles), out_dir / f"{NAME}.png")]

    positive = [c for c in cells if c["ci"][0] > 0]
    rho_by_n = {str(load): spearman(n_jobs_list, [table[(n, load)]["mean"] for n in n_jobs_list]) for load in loads}
    rho_by_load = {str(n): spearman(loads, [table[(n, load)]["mean"] for load in loads]) for n in n_jobs_list}
    grows_with_n = all(v >= MIN_SPEARMAN for v in rho_by_n.values())
    grows_with_load = all(v >= MIN_SPEARMAN for v in rho_by_load.values())
    checked = sum(c["twin_checked"] for c in cells)
    agreeing = sum(c["twin_agreeing"] for c in cells)
    twin_ok = checked > 0 and agreeing >= TWIN_AGREEMENT * checked
    clean = sum(c["clean"] for c in cells)
    total = sum(c["launches"] for c in cells)
    all_positive = len(positive) == len(cells)

    if all_positive and grows_with_n and grows_with_load and twin_ok:
        outcome = REPRODUCED
    elif positive and (grows_with_n or grows_with_load) and twin_ok:
        outcome = PARTIALLY
    else:
        outcome = NOT_REPRODUCED
    # Descriptive only (not part of the verdict): where along the load axis each N peaks.
    peak_load = {str(n): loads[int(np.nanargmax([table[(n, load)]["mean"] for load in loads]))] for n in n_jobs_list}
    fmt = lambda d: ", ".join(f"{k}: {v:+.2f}" for k, v in d.items())  # noqa: E731
    why = (
        f"FTLE per cycle over {cycles} cycles, {launches} launches per cell, N in {list(n_jobs_list)}, "
        f"ρ in {list(loads)} ({clean} of {total} launches ran clean). Mean FTLE > 0 (CI above 0) in "
        f"{len(positive)} of {len(cells)} cells (range {min(c['mean'] for c in cells):.3f} to "
        f"{max(c['mean'] for c in cells):.3f}). Spearman vs N at each ρ: {fmt(rho_by_n)} → "
        f"{'grows' if grows_with_n else 'does not grow'} with N (threshold {MIN_SPEARMAN}); vs ρ at each N: "
        f"{fmt(rho_by_load)} → {'grows' if grows_with_load else 'does not grow'} with load. Twin check: "
        f"{agreeing} of {checked} launches within {TWIN_TOLERANCE:g} (need {TWIN_AGREEMENT:.0%}). "
        f"Mean FTLE peaks at ρ = {peak_load} (per N)."
    )
    numbers = dict(
        n_jobs=list(n_jobs_list),
        loads=list(loads),
        launches=launches,
        cycles=cycles,
        twin_eps=TWIN_EPS,
        throughput="shared (f = 1)",
        cap=None,
        cycle_work="T + d = 1, d = rho / N",
        spearman_vs_n=rho_by_n,
        spearman_vs_load=rho_by_load,
        peak_load=peak_load,
        cells=cells,
        seconds=time.perf_counter() - started,
    )
    verdicts = [
        verdict(
            5,
            outcome,
            why,
            cells_positive=len(positive),
            cells=len(cells),
            grows_with_n=grows_with_n,
            grows_with_load=grows_with_load,
            spearman_vs_n=rho_by_n,
            spearman_vs_load=rho_by_load,
            twin_agreement=agreeing / checked if checked else float("nan"),
            clean_launches=clean,
        )
    ]
    return finish(out_dir, NAME, size, numbers, verdicts, figures)
