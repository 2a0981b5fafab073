"""Builds the notebooks from the cell sources below, and publishes their figures.

    python notebooks/_build.py              # write notebooks/*.ipynb (outputs stripped)
    python notebooks/_build.py --publish    # also run them at full size (a few minutes on
                                            # a CPU) and write docs/notebooks.md and
                                            # docs/notebooks/*.png from their outputs
    python notebooks/_build.py --publish --smoke   # the same at the tests' size (seconds)

The notebooks are committed without outputs; docs/notebooks.md shows them as run, with
every figure, for a reader browsing the repository. tests/test_notebooks.py runs each
notebook at the smoke size and checks that the committed notebooks and the page match
these sources. Running needs `pip install -e ".[notebooks]"` (or ".[test]").
"""

from __future__ import annotations

import argparse
import base64
import datetime
import os
import platform
import sys
from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
DOCS = ROOT / "docs"
PAGE = DOCS / "notebooks.md"
FIGURES = DOCS / "notebooks"  # docs/notebooks/<notebook>-<n>.png
KERNEL = {"name": "python3", "display_name": "Python 3", "language": "python"}
WIDGET = "application/vnd.jupyter.widget-view+json"

SETUP = """%matplotlib inline
import os
import jax
jax.config.update("jax_enable_x64", True)
import numpy as np
import matplotlib.pyplot as plt
import ckpt_jax as cj
SMOKE = os.environ.get("CKPT_JAX_SMOKE") == "1"   # the tests run every notebook small"""

NOTEBOOKS = {
    "01_quickstart.ipynb": [
        new_markdown_cell(
            "# ckpt_jax quick start\n\nSimulate a fleet of checkpointing jobs exactly, plot its writes, then run a batch of fleets at once."
        ),
        new_code_cell(SETUP),
        new_markdown_cell(
            "One fleet of 8 identical jobs: compute T = 10, write d = 1.5 sharing one unit of storage bandwidth (f ≡ 1), and a power cap of 6 jobs."
        ),
        new_code_cell("""fleet = cj.Fleet(compute=np.full(8, 10.0), write=np.full(8, 1.5), cap=6.0)
state = cj.random_state(fleet, jax.random.key(0))
trace = cj.simulate(fleet, state, n_fires=10 if SMOKE else 40)
print("ok:", bool(trace.ok), "events:", int(trace.n_events))"""),
        new_markdown_cell(
            "Its write windows (one row per job) above the number of concurrent writers n_w(t). `plot_trace` returns a matplotlib `Figure`; `display` shows it."
        ),
        new_code_cell("""from ckpt_jax.plotting import plot_trace
fig = plot_trace(np.asarray(trace.fire_times), np.asarray(trace.end_times), title="8 jobs, cap 6")
display(fig)"""),
        new_markdown_cell(
            "A batch: 256 random launches in one call (same compiled loop). The concurrent-writer count over time for one of them:"
        ),
        new_code_cell("""batch = cj.Fleet(compute=np.full((256, 8), 10.0), write=np.full((256, 8), 1.5), cap=6.0)
traces = cj.simulate(batch, cj.random_state(batch, jax.random.key(1)), n_fires=10 if SMOKE else 100)
print("all ok:", bool(traces.ok.all()), " fleet-events:", int(traces.n_events.sum()))
times, counts = cj.analysis.writer_count(np.asarray(traces.fire_times[0]), np.asarray(traces.end_times[0]))
plt.step(times, counts, where="post"); plt.xlim(0, 200)   # the first 200 time units (about 15 cycles)
plt.xlabel("time"); plt.ylabel("writers n_w"); plt.show()"""),
        new_markdown_cell("Jitter is reproducible from a key; the same key gives the same trace on any batch layout."),
        new_code_cell("""a = cj.simulate(batch, cj.random_state(batch, jax.random.key(1)), n_fires=10, jitter=0.3, key=jax.random.key(7))
b = cj.simulate(batch, cj.random_state(batch, jax.random.key(1)), n_fires=10, jitter=0.3, key=jax.random.key(7))
print("identical:", bool((a.fire_times == b.fire_times).all()))"""),
    ],
    "02_spectrum_autodiff.ipynb": [
        new_markdown_cell(
            "# The reciprocal spectrum by autodiff\n\ndocs/model.md, claim 2: in the fully overlapping branch the gap return map of N identical jobs has eigenvalues λ_j = (N−j) f(j) / (j f(N−j)). We differentiate *through the event loop* with `jax.jacfwd` and compare."
        ),
        new_code_cell(SETUP),
        new_code_cell("""def overlapping_fleet(n_jobs, throughput):
    f = cj.throughput_table(throughput, n_jobs)
    write = 0.2 * 10.0 * f[n_jobs] / n_jobs          # N writers drain in a fifth of T
    return cj.Fleet(compute=np.full(n_jobs, 10.0), write=np.full(n_jobs, write), throughput=throughput)

n_jobs = 6 if SMOKE else 16
fleet = overlapping_fleet(n_jobs, "shared")
a = np.full(n_jobs - 1, 0.05 * float(fleet.write[0]) / n_jobs)   # small gaps: all writes overlap
result = cj.maps.spectrum(fleet, a)
print("branch:", int(result.info.branch), "(0 = fully overlapping)  det:", result.determinant)
print("expanding directions:", result.n_expanding, " theory:", cj.theory.n_expanding(n_jobs))"""),
        new_code_cell("""j = np.arange(1, n_jobs)
for throughput in ["shared", "sqrt", "degrading"]:
    res = cj.maps.spectrum(overlapping_fleet(n_jobs, throughput), a)
    eig = np.sort(res.eigenvalues.real)[::-1]
    plt.semilogy(j, eig, "o", label=f"jacfwd, f={throughput}")
    plt.semilogy(j, np.sort(cj.theory.gap_eigenvalues(n_jobs, throughput))[::-1], "k-", lw=0.8)
plt.axhline(1, color="grey", ls=":"); plt.xlabel("j"); plt.ylabel("λ_j"); plt.legend(); plt.show()"""),
        new_markdown_cell(
            "The Jacobian itself is diagonal; the map is volume preserving (det = 1) because λ_j λ_{N−j} = 1:"
        ),
        new_code_cell("""J = result.jacobian
print("largest off-diagonal entry:", np.abs(J - np.diag(np.diag(J))).max())
print("λ_j λ_(N-j):", np.round(np.diag(J) * np.diag(J)[::-1], 12))"""),
        new_markdown_cell(
            "Pairwise neutrality (claim 1): for two identical jobs the pair map is the identity for every δ."
        ),
        new_code_cell("""pair = cj.Fleet(compute=[10.0, 10.0], write=[3.0, 3.0], cap=0.8, throughput="sqrt")
deltas = np.linspace(0.1, 12.9, 9 if SMOKE else 60)
nxt, info = jax.vmap(lambda d: cj.maps.section_map(pair, d[None]))(deltas)
print("max |P(δ) - δ| =", float(np.abs(np.asarray(nxt)[:, 0] - deltas).max()))"""),
        new_markdown_cell(
            "## Coupling returns when jobs have sizes\n\n"
            "Neutrality needs *anonymous* rates (claim 9). Give the two jobs sizes w = 1 and 2 (their full-speed power "
            "draw) under a cap C = 1.5 and the two power policies of docs/model.md §1b. Alone, job i computes at "
            "min(1, C / w_i); together they slow by *different* factors (`shared_slowdown`), and the pair couples. "
            "Job 1's work is scaled so that both jobs alone have the same period P, and the coupling is measured in "
            "time-phase coordinates (time to the next solo firing), against each job run alone. Equal sizes under a "
            "binding cap stay neutral."
        ),
        new_code_cell("""from ckpt_jax.coupling import coupling_function, shared_slowdown

def sized_pair(sizes, cap, policy):
    speed = np.minimum(1.0, cap / np.asarray(sizes))          # each job's solo speed
    return cj.Fleet(compute=list(10.0 * speed), write=[3.0, 3.0], cap=cap, throughput="linear",
                    size=sizes, power_policy=policy)

grid = (np.arange(12 if SMOKE else 48) + 0.5) / (12 if SMOKE else 48)
for sizes, cap, policy, style in [([1.0, 2.0], 1.5, "maxmin", "o-"), ([1.0, 2.0], 1.5, "uniform", "s-"),
                                  ([2.0, 2.0], 3.0, "maxmin", "k:")]:
    pair = sized_pair(sizes, cap, policy)
    result = coupling_function(pair, grid * float(pair.compute[1] + pair.write[1]))
    period = result.solo_period[1]
    c = result.phase_coupling[:, 0] / period
    print(f"w = {sizes}, C = {cap}, {policy:7s}: slowdowns {shared_slowdown(pair).round(3)}, "
          f"max |c| = {np.abs(c).max():.3g} P, mean {c.mean():+.3g} P, peak-to-peak {np.ptp(c):.3g} P")
    plt.plot(result.phase_lags[:, 0] / period, c, style, ms=4, mfc="none", label=f"w = {sizes}, C = {cap}, {policy}")
plt.axhline(0, color="grey", lw=0.7); plt.xlabel("launch lag φ / P (time phase)")
plt.ylabel("coupling c / P"); plt.legend(loc="center", bbox_to_anchor=(0.5, 0.27)); plt.show()"""),
        new_markdown_cell(
            "The coupling is mostly a shift (its mean: a detuning); its peak-to-peak is the width of the 1:1 locking "
            "range. Shorten job 1's solo period by the mean and the pair locks: `locked_lags` finds the zeros of its "
            "lag map and their slopes (stable when |slope| < 1)."
        ),
        new_code_cell("""from ckpt_jax.locking import locked_lags

pair = sized_pair([1.0, 2.0], 1.5, "maxmin")
first = coupling_function(pair, grid * float(pair.compute[1] + pair.write[1]))
detuning = first.phase_coupling[:, 0].mean()
detuned = cj.Fleet(compute=[10.0, 0.75 * (10.0 - detuning)], write=[3.0, 3.0], cap=1.5, throughput="linear",
                   size=[1.0, 2.0], power_policy="maxmin")
run = coupling_function(detuned, grid * float(detuned.compute[1] + detuned.write[1]), 30 if SMOKE else 100)
period = run.solo_period[1]
shift = (run.phase_lags[:, 1] - run.phase_lags[:, 0] + period / 2) % period - period / 2
for point in locked_lags(run.phase_lags[:, 0], shift, period):
    print(f"locked lag {point.lag / period:.3f} P, slope {point.slope:.3f}: {'stable' if point.stable else 'unstable'}")
print("distinct long-run lags / P:", np.unique(np.round(run.phase_lags[:, -1] % period / period, 3)))"""),
        new_markdown_cell(
            "First-come-first-served storage is not anonymous even for identical jobs: a write that overlaps job 0's "
            "waits for it, and after one cycle the two windows touch. The gap map is then locally constant on its "
            "overlapping branch: `jacfwd` gives det = 0, where fair sharing of the same f gives claim 2's det = 1."
        ),
        new_code_cell("""n_jobs = 4
for storage in ["fcfs", "fair"]:
    fleet = cj.Fleet(compute=np.full(n_jobs, 10.0), write=np.full(n_jobs, 0.5), storage_policy=storage)
    res = cj.maps.spectrum(fleet, np.full(n_jobs - 1, 0.01))
    print(f"{storage}: status {int(res.info.status)}, branch {int(res.info.branch)}, det {res.determinant:.3g}, "
          f"|eigenvalues| {np.round(np.abs(res.eigenvalues), 3)}")"""),
    ],
    "03_checkpoint_storms.ipynb": [
        new_markdown_cell(
            "# Checkpoint storms: ensembles, bursts, jitter\n\nThousands of random launches at once: do checkpoints cluster (claim 5), how heavy are write bursts compared with independent phases (claim 6), and how long does a stagger survive compute jitter (claim 7)?"
        ),
        new_code_cell(SETUP + "\nfrom ckpt_jax import analysis\nfrom ckpt_jax.coupling import stagger_lifetime"),
        new_markdown_cell(
            "## An ensemble of random launches\n\n16 identical jobs, T = 10, d = 1, shared storage. Per cycle, the smallest gap "
            "between consecutive firings of a fleet, over the ensemble. The gaps are in time units, the last one of a cycle "
            "measured to the next cycle's first firing: `smallest_gap` gets no `period`, since no single period fits: how "
            "long a cycle takes depends on how much the writes overlap, so it differs from fleet to fleet and from cycle "
            "to cycle. "
            "Identical jobs keep their firing order (claim 3), so no gap is negative."
        ),
        new_code_cell("""n_fleets, n_jobs, n_cycles = (32, 8, 30) if SMOKE else (1000, 16, 300)
fleet = cj.Fleet(compute=np.full((n_fleets, n_jobs), 10.0), write=np.full((n_fleets, n_jobs), 1.0))
trace = cj.simulate(fleet, cj.random_state(fleet, jax.random.key(0)), n_fires=n_cycles)
cycles = np.diff(np.asarray(trace.fire_times), axis=-1)   # each job's cycle lengths
means = np.nanmean(cycles, axis=(-2, -1))                  # per fleet
print(f"all ok: {bool(trace.ok.all())}; cycle lengths {np.nanmin(cycles):.1f} to {np.nanmax(cycles):.1f}, "
      f"per-fleet means {means.min():.1f} to {means.max():.1f}")
gaps = np.asarray(analysis.smallest_gap(trace.fire_times))[:, :-1]   # the last cycle has no next firing
assert not (gaps < 0).any(), "a negative gap: the firing order changed"
q10, q50, q90 = np.nanquantile(gaps, [0.1, 0.5, 0.9], axis=0)
k = np.arange(gaps.shape[-1])
plt.fill_between(k, q10, q90, alpha=0.3, label="10 % to 90 % of fleets"); plt.plot(k, q50, label="median")
plt.yscale("log"); plt.xlabel("cycle"); plt.ylabel("smallest gap (time units)"); plt.legend(loc="lower right"); plt.show()"""),
        new_markdown_cell(
            "## Bursts without synchrony\n\nThe time-weighted distribution of the number of concurrent writers, against Binomial(N, p̄) with the same mean writing fraction:"
        ),
        new_code_cell("""dist = np.nanmean(np.asarray(analysis.writer_distribution(trace.fire_times, trace.end_times)), axis=0)
p_bar = float(analysis.mean_writing_fraction(dist))
baseline = np.asarray(analysis.binomial_baseline(n_jobs, p_bar))
tail = np.cumsum(dist[::-1])[::-1]; base_tail = np.cumsum(baseline[::-1])[::-1]
plt.semilogy(tail, "o-", label="ensemble"); plt.semilogy(base_tail, "k--", label=f"Binomial(N, {p_bar:.3f})")
plt.xlabel("k"); plt.ylabel("P(n_w >= k)"); plt.legend(); plt.show()"""),
        new_markdown_cell(
            "## Jitter sets the stagger lifetime\n\nEvenly staggered fleets of 4 (margin m between write windows) under compute jitter σ: cycles until two windows first overlap."
        ),
        new_code_cell("""n_stag, jobs4, compute, write = (64, 4, 10.0, 1.0) if SMOKE else (500, 4, 10.0, 1.0)
cycle = compute + write
margin = cycle / jobs4 - write
staggered = cj.Fleet(compute=np.full((n_stag, jobs4), compute), write=np.full((n_stag, jobs4), write))
positions = np.broadcast_to(np.arange(jobs4) * cycle / jobs4, (n_stag, jobs4))
medians = []
ratios = np.array([4.0, 8.0, 16.0]) if SMOKE else np.array([4.0, 8.0, 16.0, 32.0])
for ratio in ratios:
    sigma = margin / ratio
    k_max = int(min(4000, 8 * ratio**2)) if not SMOKE else 200
    tr = cj.simulate(staggered, cj.state_from_positions(staggered, positions), n_fires=k_max, jitter=sigma, key=jax.random.key(int(ratio)))
    life, censored = stagger_lifetime(tr.fire_times, tr.end_times)
    medians.append(np.median(life))
    print(f"m/σ = {ratio:5.1f}: median lifetime {np.median(life):8.1f} cycles, censored {censored.mean():.0%}")
plt.loglog(ratios, medians, "o-", label="median lifetime")
plt.loglog(ratios, medians[0] * (ratios / ratios[0])**2, "k:", label="slope 2")
plt.xlabel("m / σ"); plt.ylabel("cycles"); plt.legend(); plt.show()"""),
    ],
    "04_checkpoint_intervals.ipynb": [
        new_markdown_cell(
            "# Choose checkpoint intervals for your fleet\n\n"
            "Young's interval √(2DM) is each job's best interval *alone*. When jobs share storage bandwidth and a "
            "power cap, a job's write takes longer than its solo D, and a writing job frees power for the others. "
            "`cj.design.checkpoint_intervals` searches the intervals with `optax.adam` over the exact simulator, "
            "failures included, and compares the result with Young's, Daly's and the contended Young interval on "
            "fresh paired draws (docs/model.md claim 10)."
        ),
        new_code_cell(SETUP),
        new_markdown_cell(
            "## One job alone: the renewal formula\n\n"
            "With write time D, MTBF M and restart R, the long-run waste is W(T) = 1 − T / ((M + R)(e^{(T+D)/M} − 1)) "
            "(`cj.theory.renewal_waste`); its exact minimiser is `cj.theory.optimal_interval`. Young's interval is its "
            "first-order approximation, Daly's the next orders."
        ),
        new_code_cell("""D, M, R = 1.0, 10.0, 0.5
T = np.geomspace(1.0, 15.0, 200)
plt.plot(T, cj.theory.renewal_waste(T, D, M, R), label="renewal formula W(T)")
for name, t, color, style in [("exact T*", cj.theory.optimal_interval(D, M, R), "k", "-"),
                              ("Young", cj.theory.young_interval(D, M), "C1", "--"),
                              ("Daly", cj.theory.daly_interval(D, M), "C2", ":")]:
    plt.axvline(float(t), color=color, ls=style, label=f"{name}: T = {float(t):.3f}")
plt.xscale("log"); plt.xlabel("checkpoint interval T"); plt.ylabel("waste"); plt.legend(); plt.show()"""),
        new_markdown_cell(
            "## Your fleet\n\n"
            "Describe the fleet as groups of identical jobs. Here: four groups of sizes 1, 2, 4 and 8 (power draw at full "
            "speed), write volume 0.5 × size, MTBF 200 / size (bigger jobs fail more often), restart 1, storage that "
            "saturates at 4 concurrent writers (f(n) = min(n, 4)) and a power cap at half the fleet's full draw. Every "
            "job's Young interval is the same, √200 ≈ 14.1."
        ),
        new_code_cell("""per_group = 2 if SMOKE else 4
size = np.repeat([1.0, 2.0, 4.0, 8.0], per_group)
groups = np.repeat(np.arange(4), per_group)        # jobs of one group share one interval
fleet = cj.Fleet(np.ones(size.size), 0.5 * size, cap=0.5 * size.sum(), throughput="saturating", size=size,
                 mtbf=200.0 / size, restart=1.0, dtype="float64")
print(f"{fleet.n_jobs} jobs; Young's intervals per group:",
      np.round(np.sqrt(2 * np.asarray(fleet.write) * np.asarray(fleet.mtbf))[::per_group], 2))"""),
        new_markdown_cell(
            "## Design\n\n"
            "Each step simulates 2P·S fleets at once (P antithetic directions, S failure draws shared by all of them) "
            'over the horizon H and takes one Adam step on the log-intervals. `launch="random"` starts the jobs at '
            "random points of their cycles. The result is evaluated, with the baselines, on fresh draws."
        ),
        new_code_cell("""settings = (dict(horizon=100.0, n_draws=2, n_pairs=2, steps=3, eval_draws=8) if SMOKE
            else dict(horizon=400.0, n_draws=8, n_pairs=4, steps=40, eval_draws=64))
result = cj.design.checkpoint_intervals(fleet, bounds=(1.0, 200.0), key=jax.random.key(0), groups=groups,
                                        launch="random", progress=False, **settings)
print(f"{len(result.history.objective)} steps, stopped early: {result.stopped_early}")
print(f"{'design':16s} T per group {np.round(result.intervals[::per_group], 2)}  waste {result.waste.mean:.4f}")
for name, b in result.baselines.items():
    noise = "outside the noise" if b.saved.low > 0 or b.saved.high < 0 else "within the noise"
    print(f"{name:16s} T per group {np.round(b.intervals[::per_group], 2)}  waste {b.waste.mean:.4f}  "
          f"saved {b.saved.mean:+.4f} [{b.saved.low:+.4f}, {b.saved.high:+.4f}] ({noise})")"""),
        new_markdown_cell(
            "The optimisation: the smoothed objective per step (with ±2 standard errors) and each group's interval."
        ),
        new_code_cell("""history = result.history
steps = np.arange(len(history.objective))
fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4), layout="constrained")
left.fill_between(steps, history.objective - 2 * history.stderr, history.objective + 2 * history.stderr, alpha=0.3)
left.plot(steps, history.objective); left.set_xlabel("step"); left.set_ylabel("fleet waste (smoothed objective)")
for g, s in enumerate([1, 2, 4, 8]):
    right.plot(steps, history.intervals[:, g * per_group], label=f"size {s}")
right.axhline(np.sqrt(200.0), color="grey", ls="--", label="Young (every group)")
right.set_yscale("log"); right.set_xlabel("step"); right.set_ylabel("interval T"); right.legend(fontsize=8)
plt.show()"""),
        new_markdown_cell(
            "Waste saved against each baseline, paired on the same fresh draws (95% intervals). Above zero, the design "
            "is better than the baseline; an interval that contains zero is within the noise: run more draws, "
            "a longer horizon or more steps before concluding."
        ),
        new_code_cell("""names = list(result.baselines)
saved = [result.baselines[n].saved for n in names]
y = np.arange(len(names))
plt.errorbar([s.mean for s in saved], y, xerr=[[s.mean - s.low for s in saved], [s.high - s.mean for s in saved]],
             fmt="o", capsize=5)
plt.axvline(0, color="k", lw=0.8); plt.yticks(y, names); plt.ylim(-0.5, len(names) - 0.5)
plt.xlabel("waste saved by the design (baseline − design)"); plt.show()"""),
    ],
    "what_if.ipynb": [
        new_markdown_cell(
            "# What if? Scenarios of a fleet file on common draws\n\n`cj.assess.compare` runs a fleet file as it is and with some of its keys set to other values, every scenario on the same failure draws (the same launches, the same failure streams: common random numbers), so each difference against the file is paired draw by draw. Here: the LLM cluster of `examples/llm_cluster.toml` with half and double the storage bandwidth, two-level checkpoints, restarts halved, and the intervals `cj.design` recommends."
        ),
        new_code_cell(SETUP),
        new_code_cell("""from ckpt_jax import fleetfile
from ckpt_jax.assess import compare, sensitivity
from ckpt_jax.design import checkpoint_intervals
spec = fleetfile.load("../examples/llm_cluster.toml")
DRAWS, HORIZON = (4, 6 * 3600.0) if SMOKE else (32, spec.design.horizon)   # seconds: a file with units
key = jax.random.key(0)
first = np.searchsorted(spec.labels, np.arange(len(spec.groups)))   # each group's first job
print(f"{spec.n_jobs} jobs, {HORIZON / 86400:g} days, {DRAWS} common draws per scenario")"""),
        new_markdown_cell(
            "The design's intervals (a short compass search on common draws, as `ckpt-jax design` runs it), to try as a scenario:"
        ),
        new_code_cell("""design = checkpoint_intervals(
    spec.fleet(), bounds=spec.job_bounds(), horizon=HORIZON, key=jax.random.key(1), groups=spec.labels,
    method="search", launch="random", progress=False, candidates={"current": spec.intervals()},
    n_draws=2 if SMOKE else spec.design.draws, n_pairs=1 if SMOKE else spec.design.pairs,
    steps=1 if SMOKE else spec.design.steps)
designed = {f"groups[{g}].interval": f"{float(design.intervals[i])} s" for g, i in enumerate(first)}
print({name: f"{design.intervals[i] / 60:.1f} min" for name, i in zip(spec.names, first)})"""),
        new_markdown_cell(
            "Each scenario is a dict of the file's own keys; values are parsed and checked exactly as the file (a wrong unit or an out-of-range value raises the file's error, naming the key, before anything runs)."
        ),
        new_code_cell("""scenarios = {
    "storage x0.5": {"storage.peak": "1 TB/s"},
    "storage x2": {"storage.peak": "4 TB/s"},
    "two-level checkpoints": {"groups[*].snapshot": "10 s"},
    "restart halved": {f"groups[{g}].restart": f"{group.restart / 2!r} s" for g, group in enumerate(spec.groups)},
    "the design's intervals": designed,
}
ds = compare(spec, scenarios, key=key, n_draws=DRAWS, horizon=HORIZON)
ds["gpu_hours_per_day_difference"].sel(group="fleet").to_pandas().round(1)"""),
        new_markdown_cell(
            "GPU-hours of saved work per day gained against the file as it is, for the fleet, with the 95 % CI of the paired differences:"
        ),
        new_code_cell("""gain = ds["gpu_hours_per_day_difference"].sel(group="fleet").drop_sel(scenario="baseline")
mean, low, high = (gain.sel(statistic=s).values for s in ("mean", "low", "high"))
y = np.arange(gain.sizes["scenario"])
plt.errorbar(mean, y, xerr=[mean - low, high - mean], fmt="o", capsize=5)
plt.axvline(0, color="k", lw=0.8); plt.yticks(y, gain.scenario.values); plt.ylim(-0.5, len(y) - 0.5)
plt.xlabel("GPU-hours per day gained (paired 95% CI)"); plt.tight_layout(); plt.show()"""),
        new_markdown_cell(
            "Why pairing: the spread of the per-draw differences against the spread of one scenario's draws (the noise an unpaired comparison would carry, twice over):"
        ),
        new_code_cell("""draws = ds["goodput_draws"].sel(group="fleet")
for name in list(scenarios):
    difference = draws.sel(scenario=name) - draws.sel(scenario="baseline")
    print(f"{name:24s} sd of the paired difference {float(difference.std()):.2e}, sd of one scenario {float(draws.sel(scenario=name).std()):.2e}")"""),
        new_markdown_cell(
            "Which knob matters most: the elasticity of the fleet's goodput to each continuous knob of the file, by paired central differences at ±10 %, ranked:"
        ),
        new_code_cell("""sens = sensitivity(spec, key=key, n_draws=DRAWS, horizon=HORIZON)
sens[["elasticity", "gpu_hours_per_day_up", "gpu_hours_per_day_down"]].sel(statistic="mean").to_pandas().round(4)"""),
        new_code_cell("""up = sens["gpu_hours_per_day_up"].sel(statistic="mean").values
down = sens["gpu_hours_per_day_down"].sel(statistic="mean").values
y = np.arange(len(up))
plt.barh(y, up, color="C0", label="+10 %"); plt.barh(y, down, color="C3", alpha=0.8, label="-10 %")
plt.axvline(0, color="k", lw=0.8); plt.yticks(y, sens.knob.values); plt.gca().invert_yaxis()
plt.xlabel("GPU-hours per day gained by the fleet"); plt.legend(); plt.tight_layout(); plt.show()"""),
    ],
}


def build() -> dict:
    """``{file name: notebook}``, outputs empty, cell ids fixed (``<stem>-<index>``) so that
    rebuilding an unchanged notebook rewrites it byte for byte."""
    notebooks = {}
    for name, cells in NOTEBOOKS.items():
        stem = Path(name).stem
        fresh = [
            nbformat.from_dict(
                nbformat.v4.new_code_cell(c.source)
                if c.cell_type == "code"
                else nbformat.v4.new_markdown_cell(c.source)
            )
            for c in cells
        ]
        for index, cell in enumerate(fresh):
            cell["id"] = f"{stem[:3]}-{index:02d}"
        notebooks[name] = new_notebook(cells=fresh, metadata={"kernelspec": dict(KERNEL)})
    return notebooks


def write_notebooks() -> None:
    for name, nb in build().items():
        nbformat.write(nb, HERE / name)
        print("wrote", HERE.relative_to(ROOT) / name)


def execute(nb, *, smoke: bool, timeout: int = 1800):
    """Runs a notebook top to bottom in a fresh kernel (in notebooks/); returns it executed."""
    from nbclient import NotebookClient

    nb = nbformat.from_dict(nb)  # a copy
    saved = {name: os.environ.get(name) for name in ("CKPT_JAX_SMOKE", "MPLBACKEND")}
    os.environ["CKPT_JAX_SMOKE"] = "1" if smoke else "0"
    os.environ.pop("MPLBACKEND", None)  # the kernel's inline backend draws the figures
    try:
        NotebookClient(
            nb, timeout=timeout, kernel_name="python3", resources={"metadata": {"path": str(HERE)}}
        ).execute()
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
    return nb


def figures(nb) -> list:
    """The PNG images of an executed notebook, in order: ``[(cell index, bytes), ...]``."""
    return [
        (index, base64.b64decode(output["data"]["image/png"]))
        for index, cell in enumerate(nb.cells)
        if cell.cell_type == "code"
        for output in cell.outputs
        if "image/png" in output.get("data", {})
    ]


def figure_name(notebook: str, number: int) -> str:
    return f"{Path(notebook).stem}-{number}.png"


def _fence(text: str, language: str = "") -> list:
    return [f"```{language}", text.rstrip("\n"), "```", ""]


def render(executed: dict, *, smoke: bool) -> tuple:
    """``(page text, {png name: bytes})`` of docs/notebooks.md from executed notebooks."""
    import jax

    size = "the tests' smoke size (CKPT_JAX_SMOKE=1)" if smoke else "full size"
    lines = [
        "# Notebooks, as run",
        "",
        "<!-- Generated by `python notebooks/_build.py --publish` from the notebooks' sources in",
        "     notebooks/_build.py: do not edit by hand; rerun that command instead. -->",
        "",
        "The notebooks in [`notebooks/`](../notebooks/) are committed without outputs. This page shows "
        f"each one run top to bottom at {size}, with its printed output and every figure "
        f"(run on {datetime.date.today().isoformat()}: JAX {jax.__version__}, {jax.default_backend()} backend, "
        f"{platform.machine()}, {os.cpu_count()} cores).",
        "",
        'To run them yourself: `pip install -e ".[notebooks]"` (Jupyter and ipywidgets), then '
        "`jupyter lab notebooks/`. With `CKPT_JAX_SMOKE=1` in the environment they run small, in seconds "
        "(what `tests/test_notebooks.py` does).",
        "",
    ]
    lines += [f"- [`{name}`](#{Path(name).stem.lower()})" for name in executed]
    lines.append("")
    images = {}
    for name, nb in executed.items():
        stem, number = Path(name).stem, 0
        lines += [f"## {stem}", "", f"Source: [`notebooks/{name}`](../notebooks/{name})", ""]
        for cell in nb.cells:
            if cell.cell_type == "markdown":
                # Headings two levels down: each notebook is a "## " section of the page.
                body = "\n".join("##" + line if line.startswith("#") else line for line in cell.source.splitlines())
                lines += [body, ""]
                continue
            lines += _fence(cell.source, "python")
            printed = False  # consecutive prints go into one block
            for output in cell.outputs:
                data = output.get("data", {})
                if output.output_type == "stream" and output.name == "stdout":
                    if printed:  # lines ends with _fence's [..., text, "```", ""]
                        lines[-3] += "\n" + output.text.rstrip("\n")
                    else:
                        lines += _fence(output.text)
                    printed = True
                    continue
                printed = False
                if "image/png" in data:
                    number += 1
                    png = figure_name(name, number)
                    images[png] = base64.b64decode(data["image/png"])
                    lines += [f"![{stem}, figure {number}]({FIGURES.name}/{png})", ""]
                elif output.output_type == "execute_result" and WIDGET not in data and "text/plain" in data:
                    lines += _fence(data["text/plain"])
                elif output.output_type == "error":
                    raise RuntimeError(f"{name}: a cell failed: {output.ename}: {output.evalue}")
    return "\n".join(lines).rstrip("\n") + "\n", images


def publish(*, smoke: bool = False) -> None:
    """Runs every notebook and writes docs/notebooks.md and docs/notebooks/*.png."""
    executed = {}
    for name, nb in build().items():
        print(f"running {name} ({'smoke' if smoke else 'full'} size) ...", flush=True)
        executed[name] = execute(nb, smoke=smoke)
        noise = [
            o
            for c in executed[name].cells
            if c.cell_type == "code"
            for o in c.outputs
            if o.output_type == "stream" and o.name == "stderr"
        ]
        for output in noise:
            print(f"  warning: {name} wrote to stderr: {output.text.strip()[:200]}", file=sys.stderr)
    page, images = render(executed, smoke=smoke)
    FIGURES.mkdir(parents=True, exist_ok=True)
    for stale in FIGURES.glob("*.png"):
        if stale.name not in images:
            stale.unlink()
    for png, data in images.items():
        (FIGURES / png).write_bytes(data)
    PAGE.write_text(page, encoding="utf-8")
    print(f"wrote {PAGE.relative_to(ROOT)} and {len(images)} figures in {FIGURES.relative_to(ROOT)}/")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--publish", action="store_true", help="also run the notebooks and write docs/notebooks.md and its figures"
    )
    parser.add_argument("--smoke", action="store_true", help="with --publish: run at the tests' size")
    options = parser.parse_args()
    write_notebooks()
    if options.publish:
        publish(smoke=options.smoke)
