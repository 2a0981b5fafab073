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
}

if __name__ == "__main__":
    for name, cells in NOTEBOOKS.items():
        nb = new_notebook(cells=cells, metadata={"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}})
        nbformat.write(nb, HERE / name)
        print("wrote", name)
