"""How close ``ckpt-jax design`` comes to the best intervals: an exhaustive paired search.

For a fleet file (default `examples/llm_cluster.toml`), a coordinate search over each group's
interval on S common draws (the same failures and launch fractions for every interval set):
each round tries, for one group at a time, the group's interval times every factor of a grid
(the other groups held where they are), all in one batched `simulate` call, and keeps the best;
the rounds go over the groups again with a finer grid. The search starts from the best of the
baselines (Young, Daly, contended Young, the file's intervals) on the same draws.

Its best intervals, the design's recommendation (``--design DIR/design.json`` of a
``ckpt-jax design`` run, or a fresh `cj.design.checkpoint_intervals` run with the CLI's
defaults), the file's intervals and the baselines are then run on fresh paired draws: the
report is the design's fleet waste less the search's, with its 95% CI (the design is within
``--tolerance`` of the best when the CI's upper end is below it).

    PYTHONPATH=. python benchmarks/design_search.py --design /tmp/d1/design.json \\
        [--draws 16] [--eval-draws 32] [--out benchmarks/results/design_search.json]
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

import jax
import numpy as np

from ckpt_jax import design
from ckpt_jax.fleetfile import load

# Round r multiplies a group's interval by each factor of GRIDS[r] (the centre included).
GRIDS = (
    (0.5, 0.63, 0.79, 1.0, 1.26, 1.59, 2.0),
    (0.8, 0.9, 1.0, 1.12, 1.25),
    (0.93, 0.97, 1.0, 1.03, 1.07),
)


def _estimate(samples) -> dict:
    samples = np.asarray(samples, np.float64)
    half = 1.959963984540054 * samples.std(ddof=1) / math.sqrt(samples.size)
    return {"mean": float(samples.mean()), "low": float(samples.mean() - half), "high": float(samples.mean() + half)}


def coordinate_search(fleet, labels, start, *, horizon, keys, launch, bounds, rounds, log=print):
    """The best per-group intervals on the draws ``keys``, from ``start`` (N,): per round and
    group, every factor of the round's grid in one batch. Returns (intervals, waste, runs)."""
    lo, hi = bounds
    current = np.asarray(start, np.float64).copy()
    best = float(design.fleet_waste(fleet, current[None], horizon=horizon, keys=keys, launch=launch).mean())
    runs = keys.shape[0]
    for round_, grid in enumerate(GRIDS[:rounds]):
        for g in range(int(labels.max()) + 1):
            mine = labels == g
            sets = np.repeat(current[None], len(grid), axis=0)
            sets[:, mine] = np.clip(current[mine][None] * np.asarray(grid)[:, None], lo[mine], hi[mine])
            waste = design.fleet_waste(fleet, sets, horizon=horizon, keys=keys, launch=launch).mean(axis=1)
            runs += sets.shape[0] * keys.shape[0]
            k = int(np.argmin(waste))
            if waste[k] < best:
                best, current = float(waste[k]), sets[k]
            log(f"round {round_ + 1} group {g}: x{grid[k]:g} -> waste {best:.5f}")
    return current, best, runs


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("fleet_file", nargs="?", default="examples/llm_cluster.toml")
    parser.add_argument("--design", type=Path, default=None, help="design.json of a ckpt-jax design run")
    parser.add_argument("--draws", type=int, default=16, help="common draws of the search")
    parser.add_argument("--eval-draws", type=int, default=32, help="fresh draws of the comparison")
    parser.add_argument("--rounds", type=int, default=2, choices=range(1, len(GRIDS) + 1))
    parser.add_argument("--seed", type=int, default=12345, help="the search's and the comparison's draws")
    parser.add_argument("--tolerance", type=float, default=0.002)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()

    spec = load(args.fleet_file)
    fleet = spec.fleet(dtype=np.float32)
    horizon, launch, labels = spec.design.horizon, spec.design.launch, spec.labels
    bounds = spec.job_bounds()
    search_key, eval_key = jax.random.split(jax.random.key(args.seed))
    keys = jax.random.split(search_key, args.draws)
    started = time.perf_counter()

    if args.design is not None:
        summary = json.loads(args.design.read_text())
        recommended = np.repeat([group["design"] for group in summary["groups"]], [g.count for g in spec.groups])
    else:
        result = design.checkpoint_intervals(
            fleet,
            bounds=bounds,
            horizon=horizon,
            n_draws=spec.design.draws,
            n_pairs=spec.design.pairs,
            steps=spec.design.steps,
            key=jax.random.key(spec.design.seed),
            groups=labels,
            method="search",
            launch=launch,
            candidates={"current": spec.intervals()},
        )
        recommended = result.intervals

    contended, _, _ = design.contended_young(fleet, horizon=horizon, keys=keys, launch=launch, rtol=1e-2)
    table = {
        "young": design._young(fleet),
        "daly": design._daly(fleet),
        "young_contended": contended,
        "current": spec.intervals(),
    }
    start_waste = design.fleet_waste(fleet, np.stack(list(table.values())), horizon=horizon, keys=keys, launch=launch)
    start_name = list(table)[int(np.argmin(start_waste.mean(axis=1)))]
    print(f"start: {start_name} ({start_waste.mean(axis=1).min():.5f} on {args.draws} common draws)")
    best, best_waste, runs = coordinate_search(
        fleet, labels, table[start_name], horizon=horizon, keys=keys, launch=launch, bounds=bounds, rounds=args.rounds
    )
    search_s = time.perf_counter() - started

    compared = {"search": best, "design": recommended, **table}
    fresh = jax.random.split(eval_key, args.eval_draws)
    waste = design.fleet_waste(fleet, np.stack(list(compared.values())), horizon=horizon, keys=fresh, launch=launch)
    runs += waste.size
    first = np.searchsorted(labels, np.arange(len(spec.groups)))
    rows = {
        name: {
            "intervals_min": [float(x) / 60 for x in compared[name][first]],
            "waste": _estimate(waste[i]),
            "minus_search": _estimate(waste[i] - waste[0]),
        }
        for i, name in enumerate(compared)
    }
    gap = rows["design"]["minus_search"]
    verdict = "within" if gap["high"] < args.tolerance else "NOT within"
    print(
        f"{'':16s} " + " ".join(f"{g.name[:14]:>14s}" for g in spec.groups) + "   fleet waste [95% CI]   minus search"
    )
    for name, row in rows.items():
        w, d = row["waste"], row["minus_search"]
        print(
            f"{name:16s} "
            + " ".join(f"{x:11.2f} min" for x in row["intervals_min"])
            + f"   {w['mean']:.5f} [{w['low']:.5f}, {w['high']:.5f}]"
            + f"   {d['mean']:+.5f} [{d['low']:+.5f}, {d['high']:+.5f}]"
        )
    print(
        f"the design is {verdict} {args.tolerance:g} fleet waste of the search's best "
        f"({gap['mean']:+.5f} [{gap['low']:+.5f}, {gap['high']:+.5f}]); {runs} fleet runs, "
        f"search {search_s:.0f} s, total {time.perf_counter() - started:.0f} s"
    )
    if args.out is not None:
        args.out.write_text(
            json.dumps(
                {
                    "fleet_file": str(args.fleet_file),
                    "draws": args.draws,
                    "eval_draws": args.eval_draws,
                    "rounds": args.rounds,
                    "seed": args.seed,
                    "start": start_name,
                    "search_waste_on_common_draws": best_waste,
                    "rows": rows,
                    "tolerance": args.tolerance,
                    "within": gap["high"] < args.tolerance,
                    "fleet_runs": runs,
                    "wall_s": time.perf_counter() - started,
                },
                indent=2,
            )
            + "\n"
        )


if __name__ == "__main__":
    main()
