"""A/B of the FIFO and clock paths: two checkouts (or two XLA flag sets) on bench.py's fleets.

`bench.py`'s B = 10^4, N = 32 rows (identical jobs on the FIFO path, heterogeneous ones on the
clock path; uncapped and with a binding cap C = 0.9 N; load 0.5; the full trace), each run
in a fresh process per side and round, the sides in turn so both see the same load: per
side the best of ``--repeats`` steady calls (after a compiling call), events/s, and a
checksum of the fire and end times (the two sides must agree bit for bit where the
arithmetic is unchanged). The Numba loop (`numba_engine.py`) runs on the same fleets once
per configuration and round, for the ratio to Numba.

Usage:
  python benchmarks/fast_paths_ab.py --a /path/to/other/checkout              # A: that, B: this
  python benchmarks/fast_paths_ab.py --b-flags=--xla_cpu_experimental_ynn_fusion_type=   # same code
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
CONFIGS = [("identical", False, "fifo"), ("identical", True, "fifo"), ("heterogeneous", False, "clock"),
           ("heterogeneous", True, "clock")]  # fmt: skip


def worker(config: dict) -> dict:
    import jax

    jax.config.update("jax_enable_x64", True)
    import numpy as np

    sys.path.insert(0, HERE)
    from bench import build

    row = dict(config)
    fleet, state = build(config)
    if config["engine"] == "numba":
        from bench import numba_inputs
        from numba_engine import simulate_numba

        from ckpt_jax._plan import default_max_events

        inputs = numba_inputs(fleet, state)
        limit = default_max_events(fleet.n_jobs, config["n_fires"], fleet)
        simulate_numba(**inputs, n_fires=config["n_fires"], max_events=limit)
        times, cpu = [], []
        for _ in range(config["repeats"]):
            start, start_cpu = time.perf_counter(), time.process_time()
            out = simulate_numba(**inputs, n_fires=config["n_fires"], max_events=limit)
            times.append(time.perf_counter() - start)
            cpu.append(time.process_time() - start_cpu)
        row.update(seconds=min(times), cpu_seconds=min(cpu), events=int(out["n_events"].sum()))
        return row
    import ckpt_jax as cj

    def run(limit=None):
        trace = cj.simulate(fleet, state, config["n_fires"], method=config["method"], progress=False, max_events=limit)
        return jax.block_until_ready(trace)

    run(1)  # compiles what the full run uses (the event limit is traced)
    times, cpu = [], []
    for _ in range(config["repeats"]):
        start, start_cpu = time.perf_counter(), time.process_time()
        trace = run()
        times.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
    fire, end = np.asarray(trace.fire_times), np.asarray(trace.end_times)
    row.update(
        seconds=min(times),
        cpu_seconds=min(cpu),  # of all threads: steadier than wall time on a shared machine
        events=int(np.sum(np.asarray(trace.n_events, np.int64))),
        checksum=float(np.nansum(fire) + np.nansum(end)),
        digest=hash((fire.tobytes(), end.tobytes())),
    )
    return row


def spawn(config: dict, root: str, flags: str) -> dict:
    env = dict(os.environ, PYTHONPATH=root, XLA_FLAGS=f"{os.environ.get('XLA_FLAGS', '')} {flags}".strip())
    env["PYTHONHASHSEED"] = "0"
    done = subprocess.run(
        [sys.executable, os.path.abspath(__file__), "--worker", json.dumps(config)],
        env=env,
        capture_output=True,
        text=True,
        cwd=root,
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    if done.returncode or not lines:
        raise SystemExit(f"worker failed ({root}, {config}): {done.stderr[-3000:]}")
    return json.loads(lines[-1][len("RESULT ") :])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--a", default=ROOT, help="checkout of side A (default: this one)")
    parser.add_argument("--b", default=ROOT, help="checkout of side B (default: this one)")
    parser.add_argument("--a-flags", default="", help="XLA flags added for side A")
    parser.add_argument("--b-flags", default="", help="XLA flags added for side B")
    parser.add_argument("--fleets", type=int, default=10_000)
    parser.add_argument("--jobs", type=int, default=32)
    parser.add_argument("--cycles", type=int, default=11)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--only", default=None, help="fifo or clock")
    parser.add_argument("--no-numba", action="store_true")
    parser.add_argument("--out", default=None, help="JSON file")
    parser.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        print("RESULT " + json.dumps(worker(json.loads(args.worker))), flush=True)
        return 0
    rows = []
    for round_ in range(args.rounds):
        for jobs, capped, method in CONFIGS:
            if args.only and method != args.only:
                continue
            base = dict(n_fleets=args.fleets, n_jobs=args.jobs, n_fires=args.cycles, jobs=jobs, capped=capped)
            base.update(method=method, repeats=args.repeats, round=round_)
            row = dict(base)
            for side, root, flags in (("a", args.a, args.a_flags), ("b", args.b, args.b_flags)):
                row[side] = spawn(dict(base, engine="jax"), root, flags)
                row[side]["load"] = os.getloadavg()[0]
            if not args.no_numba:
                row["numba"] = spawn(dict(base, engine="numba"), args.b, "")
            a, b = row["a"], row["b"]
            row["b_over_a"] = a["seconds"] / b["seconds"]
            row["b_over_a_cpu"] = a["cpu_seconds"] / b["cpu_seconds"]
            row["same_bits"] = a["digest"] == b["digest"] and a["events"] == b["events"]
            text = f"{method} {jobs} capped={capped} round {round_}: A {a['seconds']:.3f} s, B {b['seconds']:.3f} s"
            text += f", B/A speed {row['b_over_a']:.3f} (CPU {row['b_over_a_cpu']:.3f}), same bits {row['same_bits']}"
            if "numba" in row:
                numba_rate = row["numba"]["events"] / row["numba"]["seconds"]
                row["a_vs_numba"] = a["events"] / a["seconds"] / numba_rate
                row["b_vs_numba"] = b["events"] / b["seconds"] / numba_rate
                numba_cpu_rate = row["numba"]["events"] / row["numba"]["cpu_seconds"]
                row["a_vs_numba_cpu"] = a["events"] / a["cpu_seconds"] / numba_cpu_rate
                row["b_vs_numba_cpu"] = b["events"] / b["cpu_seconds"] / numba_cpu_rate
                text += f", vs Numba A {row['a_vs_numba']:.3f} B {row['b_vs_numba']:.3f}"
            print(text + f" (load {a['load']:.1f})", flush=True)
            rows.append(row)
    if args.out:
        with open(args.out, "w") as handle:
            json.dump(dict(rows=rows, a=args.a, b=args.b, a_flags=args.a_flags, b_flags=args.b_flags), handle, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
