"""The general engine's events/s with the realistic storage of docs/model.md §1d (write
limits, two-level checkpoints) and with the power observer, against the base model.

One process per batch size B runs the same heterogeneous fleets (N jobs, T_i and d_i the
identical values T = 1 − ρ/N, d = ρ/N times independent U(0.5, 1.5) factors, load ρ = 0.8,
f ≡ 1, no cap, random launches) through ``simulate(..., method="general")`` in these
configurations:

  base       the fleets as they are, ``SaveAt()`` (the full trace)
  limits     every job with a finite write limit b_i ~ U(0.5, 2) (f ≡ 1: a lone writer is held
             back where b_i < 1, two or more share f(n_w)/n_w <= 1/2 and bind fewer)
  snapshots  two-level checkpoints, snapshot s_i = d_i / 4
  both       limits and snapshots
  bare       the base fleets, ``SaveAt(trace=False)`` (the loop alone)
  power      the base fleets, ``SaveAt(trace=False, power=True)`` (the power observer alone)

Every configuration is compiled and run once (warm-up, not timed), then ``--repeats``
rounds call each once, in an order rotated from round to round. events/s = Σ
``trace.n_events`` / wall time of one call (events counted as the engine counts them:
event instants). Ratios are paired within a round (same load on the machine) and
summarised as min / median / max over rounds, in wall time and in CPU time of all threads:

  limits / base, snapshots / base, both / base    the cost per event of §1d's storage
  power / base, power / bare                      the power observer against the trace
                                                  and against no observer

base, bare and power run the same fleets and must step the same events (checked). The
machine may be shared: compare the ratios of one run, not absolute rates across runs.

Usage:
  python benchmarks/realistic_bench.py --out benchmarks/results/realistic.json   # B = 256, 1024
  python benchmarks/realistic_bench.py --fleets 256 --repeats 3                     # quicker
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time

from observers_bench import environment, load_average, summary

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
LOAD = 0.8
LIMITS = (0.5, 2.0)  # write limits b_i ~ U(LIMITS), f ≡ 1
SNAPSHOT = 0.25  # s_i = SNAPSHOT · d_i
CONFIGS = {  # name -> (fleet variant, SaveAt fields)
    "base": ("base", dict()),
    "limits": ("limits", dict()),
    "snapshots": ("snapshots", dict()),
    "both": ("both", dict()),
    "bare": ("base", dict(trace=False)),
    "power": ("base", dict(trace=False, power=True)),
}
RATIOS = {  # name -> (numerator, denominator), both in events/s
    "limits/base": ("limits", "base"),
    "snapshots/base": ("snapshots", "base"),
    "both/base": ("both", "base"),
    "power/trace": ("power", "base"),
    "power/bare": ("power", "bare"),
}


def make_fleets(n_fleets: int, n_jobs: int, seed: int = 0) -> dict:
    """{variant: (fleet, state)}: the same T_i, d_i and launch phases in every variant."""
    import jax
    import numpy as np

    import ckpt_jax as cj

    rng = np.random.default_rng([seed, n_fleets, n_jobs])
    shape = (n_fleets, n_jobs)
    compute = (1.0 - LOAD / n_jobs) * rng.uniform(0.5, 1.5, shape)
    write = LOAD / n_jobs * rng.uniform(0.5, 1.5, shape)
    limit = rng.uniform(*LIMITS, shape)
    snapshot = SNAPSHOT * write
    base = cj.Fleet(compute, write)
    state = cj.random_state(base, jax.random.key(seed))
    phase, remaining = np.asarray(state.phase), np.asarray(state.remaining)
    fleets = dict(
        base=base,
        limits=cj.Fleet(compute, write, write_limit=limit),
        snapshots=cj.Fleet(compute, write, snapshot=snapshot),
        both=cj.Fleet(compute, write, write_limit=limit, snapshot=snapshot),
    )
    return {name: (fleet, cj.initial_state(fleet, phase=phase, remaining=remaining)) for name, fleet in fleets.items()}


def run_size(n_fleets: int, n_jobs: int, n_fires: int, repeats: int, names: list[str]) -> dict:
    import jax
    import numpy as np

    import ckpt_jax as cj

    fleets = make_fleets(n_fleets, n_jobs)

    def call(name):
        variant, save = CONFIGS[name]
        fleet, state = fleets[variant]
        start, start_cpu = time.perf_counter(), time.process_time()
        result = cj.simulate(fleet, state, n_fires, method="general", save=cj.SaveAt(**save), progress=False)
        jax.block_until_ready(result)
        wall, cpu = time.perf_counter() - start, time.process_time() - start_cpu
        return wall, cpu, np.asarray(result.n_events, dtype=np.int64), bool(np.all(np.asarray(result.ok)))

    warmup, events, ok, counts = {}, {}, {}, {}
    for name in names:  # compile + one full run, not timed
        wall, cpu, counts[name], ok[name] = call(name)
        warmup[name] = dict(wall_s=wall, cpu_s=cpu)
        events[name] = int(counts[name].sum())
    same = [n for n in ("base", "bare", "power") if n in names]
    for name in same[1:]:
        if not np.array_equal(counts[name], counts[same[0]]):
            raise SystemExit(f"{name} stepped other events than {same[0]} on the same fleets")
    walls = {name: [] for name in names}
    cpus = {name: [] for name in names}
    for round_ in range(repeats):
        shift = round_ % len(names)
        for name in names[shift:] + names[:shift]:
            wall, cpu, _, _ = call(name)
            walls[name].append(wall)
            cpus[name].append(cpu)
    row = dict(
        n_fleets=n_fleets,
        n_jobs=n_jobs,
        n_fires=n_fires,
        repeats=repeats,
        load=LOAD,
        write_limit_uniform=LIMITS,
        snapshot_over_write=SNAPSHOT,
        events=events,
        ok=ok,
        warmup=warmup,
        wall_s=walls,
        cpu_s=cpus,
        events_per_s={n: summary([events[n] / t for t in walls[n]]) for n in names},
        ru_maxrss_mb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    )
    # Ratios of events/s, paired per round: (e_a / t_a) / (e_b / t_b).
    for key, times in (("ratios", walls), ("cpu_ratios", cpus)):
        row[key] = {
            label: summary([(events[a] / ta) / (events[b] / tb) for ta, tb in zip(times[a], times[b])])
            for label, (a, b) in RATIOS.items()
            if a in names and b in names
        }
    return row


def report(row: dict) -> None:
    print(
        f"B={row['n_fleets']} N={row['n_jobs']} K={row['n_fires']}, {row['repeats']} rounds "
        f"(events per call: {', '.join(f'{n} {e:.3g}' for n, e in row['events'].items())})",
        flush=True,
    )
    for name, e in row["events_per_s"].items():
        print(f"  {name:<10} events/s median {e['median']:.3g} ({e['min']:.3g}-{e['max']:.3g})", flush=True)
    for label, r in row["ratios"].items():
        c = row["cpu_ratios"][label]
        print(
            f"  {label:<15} wall {r['median']:.3f} ({r['min']:.3f}-{r['max']:.3f}),"
            f" cpu {c['median']:.3f} ({c['min']:.3f}-{c['max']:.3f})",
            flush=True,
        )


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--fleets", default="256,1024", help="batch sizes B, comma-separated")
    parser.add_argument("--jobs", type=int, default=16, help="N")
    parser.add_argument("--cycles", type=int, default=100, help="K, completed writes per job")
    parser.add_argument("--repeats", type=int, default=5, help="timed rounds")
    parser.add_argument("--configs", default=",".join(CONFIGS))
    parser.add_argument("--out", default=None, help="write results as JSON here")
    args = parser.parse_args(argv)
    sys.path.insert(0, ROOT)
    import jax

    jax.config.update("jax_enable_x64", True)
    env = environment()
    print(json.dumps(env), flush=True)
    results = dict(environment=env, rows=[])
    names = args.configs.split(",")
    for n_fleets in (int(b) for b in args.fleets.split(",")):
        row = run_size(n_fleets, args.jobs, args.cycles, args.repeats, names)
        row["load_average_after"] = load_average()
        results["rows"].append(row)
        report(row)
    results["load_average_end"] = load_average()
    if args.out:
        os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
        with open(args.out, "w") as fh:
            json.dump(results, fh, indent=1)
        print(f"wrote {args.out}")
    return results


if __name__ == "__main__":
    main()
