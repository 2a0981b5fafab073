"""Claim 10, acceptance (c): checkpoint intervals for a fleet where contention matters.

32 jobs in 4 size groups (8 jobs each of size 1, 2, 4, 8), write volume proportional to size,
MTBF inversely proportional to size (so every job's Young interval is the same), saturating
storage f(n) = min(n, 4), and a power cap at half the fleet's full draw. One interval per
group is designed with `cj.design.checkpoint_intervals` and compared, on fresh paired draws,
with Young's, Daly's and the contended Young interval.

    PYTHONPATH=. python benchmarks/design_storm.py [--steps 60] [--horizon 1000]
"""

from __future__ import annotations

import argparse
import time

import jax
import numpy as np

jax.config.update("jax_enable_x64", True)

import ckpt_jax as cj  # noqa: E402


def storm_fleet():
    size = np.repeat([1.0, 2.0, 4.0, 8.0], 8)
    fleet = cj.Fleet(
        np.ones(32),
        0.5 * size,
        cap=0.5 * size.sum(),
        throughput="saturating",
        size=size,
        mtbf=200.0 / size,
        restart=1.0,
        dtype="float64",
    )
    return fleet, np.repeat(np.arange(4), 8)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--horizon", type=float, default=1000.0)
    parser.add_argument("--draws", type=int, default=16)
    parser.add_argument("--pairs", type=int, default=4)
    parser.add_argument("--launch", default="random", choices=cj.design.LAUNCHES)
    args = parser.parse_args()
    fleet, groups = storm_fleet()
    start = time.perf_counter()
    result = cj.design.checkpoint_intervals(
        fleet,
        bounds=(1.0, 200.0),
        horizon=args.horizon,
        n_draws=args.draws,
        n_pairs=args.pairs,
        key=jax.random.key(0),
        groups=groups,
        steps=args.steps,
        launch=args.launch,
        progress=True,
    )
    elapsed = time.perf_counter() - start
    print(f"{len(result.history.objective)} steps (stopped early: {result.stopped_early}), {elapsed:.0f} s")
    per_group = lambda t: " ".join(f"{x:7.2f}" for x in np.asarray(t)[::8])  # noqa: E731
    print(
        f"{'design':16s} T per group {per_group(result.intervals)}  waste {result.waste.mean:.4f} "
        f"[{result.waste.low:.4f}, {result.waste.high:.4f}]"
    )
    for name, baseline in result.baselines.items():
        saved = baseline.saved
        verdict = "outside the noise" if saved.low > 0 or saved.high < 0 else "within the noise"
        print(
            f"{name:16s} T per group {per_group(baseline.intervals)}  waste {baseline.waste.mean:.4f} "
            f"[{baseline.waste.low:.4f}, {baseline.waste.high:.4f}]  saved {saved.mean:+.4f} "
            f"[{saved.low:+.4f}, {saved.high:+.4f}] ({verdict})"
        )


if __name__ == "__main__":
    main()
