"""Times the trace statistics of `ckpt_jax.analysis` on a big trace (B = 10^4, N = 32, K = 200).

The trace is a real one: random launches of identical jobs simulated on the FIFO path (so
its sizes, NaN padding and tie structure are what users see). Each statistic is timed as
the best of ``--repeats`` calls, next to a baseline measured in the same run: for
`smallest_gap`, the same function under `jax.jit` (XLA's sort along the job axis), the
implementation before the NumPy block path; for `writer_excursions`, its per-fleet
definition from `writer_count` on a subset of fleets, scaled up.

    python benchmarks/analysis_bench.py --out benchmarks/results/analysis.json
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import time
from pathlib import Path

import jax
import numpy as np

jax.config.update("jax_enable_x64", True)

import ckpt_jax as cj  # noqa: E402


def best_of(repeats: int, call) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(call())
        times.append(time.perf_counter() - start)
    return min(times)


def per_fleet_excursions(fire, end, levels):
    out = []
    for f, e in zip(fire, end):
        t_start, t_stop = cj.analysis.observed_interval(f, e)
        times, counts = cj.analysis.writer_count(f, e)
        before = np.concatenate([[0], counts[:-1]])
        inside = (times > t_start) & (times <= t_stop)
        out.append([np.sum((before < k) & (counts >= k) & inside) for k in levels])
    return np.array(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fleets", type=int, default=10_000)
    parser.add_argument("--jobs", type=int, default=32)
    parser.add_argument("--fires", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()

    n_fleets, n_jobs, n_fires = args.fleets, args.jobs, args.fires
    fleet = cj.Fleet(np.full((n_fleets, n_jobs), 1.0 - 0.8 / n_jobs), np.full((n_fleets, n_jobs), 0.8 / n_jobs))
    trace = cj.simulate(fleet, cj.random_state(fleet, jax.random.key(0)), n_fires, progress=False)
    fire, end = np.asarray(trace.fire_times), np.asarray(trace.end_times)
    rows = {}
    rows["smallest_gap_s"] = best_of(args.repeats, lambda: cj.analysis.smallest_gap(fire))
    jitted = jax.jit(cj.analysis.smallest_gap)
    jax.block_until_ready(jitted(fire))
    rows["smallest_gap_jit_baseline_s"] = best_of(args.repeats, lambda: jitted(fire))
    np.testing.assert_array_equal(np.asarray(cj.analysis.smallest_gap(fire)), np.asarray(jitted(fire)))
    rows["writer_distribution_s"] = best_of(args.repeats, lambda: cj.analysis.writer_distribution(fire, end))
    levels = list(range(1, n_jobs + 1, 4))
    rows["writer_excursions_s"] = best_of(args.repeats, lambda: cj.analysis.writer_excursions(fire, end, levels))
    subset = max(1, n_fleets // 50)
    start = time.perf_counter()
    per_fleet_excursions(fire[:subset], end[:subset], levels)
    rows["writer_excursions_per_fleet_baseline_s"] = (time.perf_counter() - start) * n_fleets / subset
    rows["observed_bounds_s"] = best_of(args.repeats, lambda: cj.analysis.observed_bounds(fire, end))
    ratios = {
        "smallest_gap_speedup_vs_jit": rows["smallest_gap_jit_baseline_s"] / rows["smallest_gap_s"],
        "writer_excursions_speedup_vs_per_fleet": rows["writer_excursions_per_fleet_baseline_s"]
        / rows["writer_excursions_s"],
    }
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    except OSError:
        commit = None
    result = {
        "shape": [n_fleets, n_jobs, n_fires],
        "seconds": rows,
        "ratios": ratios,
        "commit": commit,
        "jax": jax.__version__,
        "numpy": np.__version__,
        "python": platform.python_version(),
        "device": str(jax.devices()[0]),
        "date": time.strftime("%Y-%m-%d"),
    }
    print(json.dumps(result, indent=2))
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
