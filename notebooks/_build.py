"""Builds the notebooks from cell sources (outputs stripped). Run: python notebooks/_build.py"""

from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

HERE = Path(__file__).parent

SETUP = '''import os
import jax
jax.config.update("jax_enable_x64", True)
import numpy as np
import matplotlib.pyplot as plt
import ckpt_jax as cj
SMOKE = os.environ.get("CKPT_JAX_SMOKE") == "1"   # the tests run every notebook small'''

NOTEBOOKS = {
    "01_quickstart.ipynb": [
        new_markdown_cell("# ckpt_jax quick start\n\nSimulate a fleet of checkpointing jobs exactly, plot its writes, then run a batch of fleets at once."),
        new_code_cell(SETUP),
        new_markdown_cell("One fleet of 8 identical jobs: compute T = 10, write d = 1.5 sharing one unit of storage bandwidth (f ≡ 1), and a power cap of 6 jobs."),
        new_code_cell('''fleet = cj.Fleet(compute=np.full(8, 10.0), write=np.full(8, 1.5), cap=6.0)
state = cj.random_state(fleet, jax.random.key(0))
trace = cj.simulate(fleet, state, n_fires=10 if SMOKE else 40)
print("ok:", bool(trace.ok), "events:", int(trace.n_events))'''),
        new_code_cell('''from ckpt_jax.plotting import plot_trace
fig = plot_trace(np.asarray(trace.fire_times), np.asarray(trace.end_times), title="8 jobs, cap 6")
fig'''),
        new_markdown_cell("A batch: 256 random launches in one call (same compiled loop). The concurrent-writer count over time for one of them:"),
        new_code_cell('''batch = cj.Fleet(compute=np.full((256, 8), 10.0), write=np.full((256, 8), 1.5), cap=6.0)
traces = cj.simulate(batch, cj.random_state(batch, jax.random.key(1)), n_fires=10 if SMOKE else 100)
print("all ok:", bool(traces.ok.all()), " fleet-events:", int(traces.n_events.sum()))
times, counts = cj.writer_count(np.asarray(traces.fire_times[0]), np.asarray(traces.end_times[0]))
plt.step(times, counts, where="post"); plt.xlabel("time"); plt.ylabel("writers n_w"); plt.show()'''),
        new_markdown_cell("Jitter is reproducible from a key; the same key gives the same trace on any batch layout."),
        new_code_cell('''a = cj.simulate(batch, cj.random_state(batch, jax.random.key(1)), n_fires=10, jitter=0.3, key=jax.random.key(7))
b = cj.simulate(batch, cj.random_state(batch, jax.random.key(1)), n_fires=10, jitter=0.3, key=jax.random.key(7))
print("identical:", bool((a.fire_times == b.fire_times).all()))'''),
    ],
    "02_spectrum_autodiff.ipynb": [
        new_markdown_cell("# The reciprocal spectrum by autodiff\n\nMODEL.md claim 2: in the fully overlapping branch the gap return map of N identical jobs has eigenvalues λ_j = (N−j) f(j) / (j f(N−j)). We differentiate *through the event loop* with `jax.jacfwd` and compare."),
        new_code_cell(SETUP),
        new_code_cell('''def overlapping_fleet(n_jobs, throughput):
    f = cj.throughput_table(throughput, n_jobs)
    write = 0.2 * 10.0 * f[n_jobs] / n_jobs          # N writers drain in a fifth of T
    return cj.Fleet(compute=np.full(n_jobs, 10.0), write=np.full(n_jobs, write), throughput=throughput)

n_jobs = 6 if SMOKE else 16
fleet = overlapping_fleet(n_jobs, "shared")
a = np.full(n_jobs - 1, 0.05 * float(fleet.write[0]) / n_jobs)   # small gaps: all writes overlap
result = cj.spectrum(fleet, a)
print("branch:", int(result.info.branch), "(0 = fully overlapping)  det:", result.determinant)
print("expanding directions:", result.n_expanding, " theory:", cj.theory.n_expanding(n_jobs))'''),
        new_code_cell('''j = np.arange(1, n_jobs)
for throughput in ["shared", "sqrt", "degrading"]:
    res = cj.spectrum(overlapping_fleet(n_jobs, throughput), a)
    eig = np.sort(res.eigenvalues.real)[::-1]
    plt.semilogy(j, eig, "o", label=f"jacfwd, f={throughput}")
    plt.semilogy(j, np.sort(cj.theory.gap_eigenvalues(n_jobs, throughput))[::-1], "k-", lw=0.8)
plt.axhline(1, color="grey", ls=":"); plt.xlabel("j"); plt.ylabel("λ_j"); plt.legend(); plt.show()'''),
        new_markdown_cell("The Jacobian itself is diagonal; the map is volume preserving (det = 1) because λ_j λ_{N−j} = 1:"),
        new_code_cell('''J = result.jacobian
print("largest off-diagonal entry:", np.abs(J - np.diag(np.diag(J))).max())
print("λ_j λ_(N-j):", np.round(np.diag(J) * np.diag(J)[::-1], 12))'''),
        new_markdown_cell("Pairwise neutrality (claim 1): for two identical jobs the pair map is the identity for every δ."),
        new_code_cell('''pair = cj.Fleet(compute=[10.0, 10.0], write=[3.0, 3.0], cap=0.8, throughput="sqrt")
deltas = np.linspace(0.1, 12.9, 9 if SMOKE else 60)
nxt, info = jax.vmap(lambda d: cj.section_map(pair, d[None]))(deltas)
print("max |P(δ) - δ| =", float(np.abs(np.asarray(nxt)[:, 0] - deltas).max()))'''),
    ],
    "03_checkpoint_storms.ipynb": [
        new_markdown_cell("# Checkpoint storms: ensembles, bursts, jitter\n\nThousands of random launches at once: do checkpoints cluster (claim 5), how heavy are write bursts compared with independent phases (claim 6), and how long does a stagger survive compute jitter (claim 7)?"),
        new_code_cell(SETUP + "\nfrom ckpt_jax import analysis\nfrom ckpt_jax.coupling import stagger_lifetime"),
        new_markdown_cell("## An ensemble of random launches\n\n16 identical jobs, T = 10, d = 1, shared storage. The smallest gap between consecutive firings per cycle, over the ensemble:"),
        new_code_cell('''n_fleets, n_jobs, n_cycles = (32, 8, 30) if SMOKE else (1000, 16, 300)
fleet = cj.Fleet(compute=np.full((n_fleets, n_jobs), 10.0), write=np.full((n_fleets, n_jobs), 1.0))
trace = cj.simulate(fleet, cj.random_state(fleet, jax.random.key(0)), n_fires=n_cycles)
period = float(np.median(np.diff(np.asarray(trace.fire_times), axis=-1)))
gaps = np.asarray(analysis.smallest_gap(trace.fire_times, period))
q10, q50, q90 = np.nanquantile(gaps, [0.1, 0.5, 0.9], axis=0)
k = np.arange(gaps.shape[-1])
plt.fill_between(k, q10, q90, alpha=0.3); plt.plot(k, q50)
plt.yscale("log"); plt.xlabel("cycle"); plt.ylabel("smallest gap / period"); plt.show()'''),
        new_markdown_cell("## Bursts without synchrony\n\nThe time-weighted distribution of the number of concurrent writers, against Binomial(N, p̄) with the same mean writing fraction:"),
        new_code_cell('''dist = np.nanmean(np.asarray(analysis.writer_distribution(trace.fire_times, trace.end_times)), axis=0)
p_bar = float(analysis.mean_writing_fraction(dist))
baseline = np.asarray(analysis.binomial_baseline(n_jobs, p_bar))
tail = np.cumsum(dist[::-1])[::-1]; base_tail = np.cumsum(baseline[::-1])[::-1]
plt.semilogy(tail, "o-", label="ensemble"); plt.semilogy(base_tail, "k--", label=f"Binomial(N, {p_bar:.3f})")
plt.xlabel("k"); plt.ylabel("P(n_w >= k)"); plt.legend(); plt.show()'''),
        new_markdown_cell("## Jitter sets the stagger lifetime\n\nEvenly staggered fleets of 4 (margin m between write windows) under compute jitter σ: cycles until two windows first overlap."),
        new_code_cell('''n_stag, jobs4, compute, write = (64, 4, 10.0, 1.0) if SMOKE else (500, 4, 10.0, 1.0)
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
plt.xlabel("m / σ"); plt.ylabel("cycles"); plt.legend(); plt.show()'''),
    ],
}

if __name__ == "__main__":
    for name, cells in NOTEBOOKS.items():
        nb = new_notebook(cells=cells, metadata={"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}})
        nbformat.write(nb, HERE / name)
        print("wrote", name)
