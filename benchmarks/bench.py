"""Throughput benchmark: ckpt_jax vs a Numba event loop vs the plain-Python reference.

Runs the same fleets (random launches; identical or heterogeneous jobs; with or without a
binding power cap) through

  (a) ``ckpt_jax.simulate`` with the general engine (``method="general"``), the clock path
      (``method="clock"``, `ckpt_jax._loops`: what ``"auto"`` picks for heterogeneous fleets
      of >= 8 jobs) and, for identical fleets, the FIFO path (``method="fifo"``);
  (b) a Numba ``@njit(parallel=True)`` per-fleet event loop (``numba_engine.py``), ``prange``
      over fleets;
  (c) the plain-Python reference integrator ``tests/reference.py::simulate_reference``
      (float arithmetic, ``exact=False``), only at tiny sizes.

Before timing, the Numba loop is checked against ckpt_jax on a small capped, nonlinear-f case
(fire/end times to 1e-9 relative, identical event counts). Every configuration runs in its own
subprocess, so first-call compile time is a true first call and peak RSS is per configuration.
Throughput is fleet-events per second, counting events as ckpt_jax does (``trace.n_events``
summed: event instants). The machine may be shared: compare the ratios measured in one run,
not absolute times across runs.

Usage:
  python benchmarks/bench.py --quick --out results/bench.json
  python benchmarks/bench.py                   # full grid: B in {1,1e3,1e4} x N in {2,32,256,1024}
"""

from __future__ import annotations

import argparse
import datetime
import functools
import inspect
import json
import os
import platform
import resource
import subprocess
import sys
import time
import tracemalloc

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

VARIANTS = [  # (jobs, capped)
    ("identical", False),
    ("identical", True),
    ("heterogeneous", False),
    ("heterogeneous", True),
]
LOAD = 0.5  # rho = N d / (T + d): write load of the fleet
CAP_FRACTION = 0.9  # C = 0.9 N binds whenever more than 90% of jobs compute
REFERENCE_MAX_JOBS = 32  # the Python reference only runs at B = 1, N <= this
HOST_DEVICES = os.cpu_count() or 1  # ckpt_jax on one XLA CPU device per core (extra rows)


def default_cycles(n_fleets: int, n_jobs: int, cycles: int) -> int:
    """K per size: the general engine costs O(N) per event and ~2N events per cycle, so
    keep B N^2 K bounded (about 1.2e8: 11 cycles at B = 1e4, N = 32, long enough that the
    start-up transient and the ragged finish of a batch do not dominate); at least one."""
    return max(1, min(cycles, int(1.2e8 // (n_fleets * n_jobs * n_jobs))))


def grid(quick: bool, cycles: int):
    if quick:
        sizes = [(1, 32), (1000, 32), (10000, 32), (1000, 2), (1000, 256), (100, 1024), (10000, 1024)]
    else:
        sizes = [(b, n) for b in (1, 1000, 10000) for n in (2, 32, 256, 1024)]
    configs = []
    for n_fleets, n_jobs in sizes:
        for jobs, capped in VARIANTS:
            # At N = 1024, B = 1e4 only the FIFO path is affordable: identical fleets only.
            fifo_only = n_fleets * n_jobs * n_jobs > 2e9
            if fifo_only and jobs != "identical":
                continue
            configs.append(
                dict(
                    n_fleets=n_fleets,
                    n_jobs=n_jobs,
                    jobs=jobs,
                    capped=capped,
                    n_fires=min(cycles, 2) if fifo_only else default_cycles(n_fleets, n_jobs, cycles),
                    fifo_only=fifo_only,
                    run_reference=n_fleets == 1 and n_jobs <= REFERENCE_MAX_JOBS,
                    host_devices=1,
                )
            )
            if (n_fleets, n_jobs) == (10000, 32) and HOST_DEVICES > 1:
                # The headline size again with ckpt_jax on one XLA host device per core
                # (`devices="all"`): each core runs its own loop, no per-kernel thread sync.
                configs.append(dict(configs[-1], host_devices=HOST_DEVICES, run_reference=False))
    return configs


# --------------------------------------------------------------------------- fleets
def make_fleet_arrays(n_fleets, n_jobs, jobs, capped, seed=0):
    """Host arrays of one benchmark batch: T, d (B, N), cap (B,), random positions θ (B, N)."""
    import numpy as np

    rng = np.random.default_rng([seed, n_fleets, n_jobs, int(jobs == "identical"), int(capped)])
    mean_compute = 10.0
    mean_write = LOAD * mean_compute / (n_jobs - LOAD)  # N d / (T + d) = LOAD
    if jobs == "identical":
        compute = np.full((n_fleets, n_jobs), mean_compute)
        write = np.full((n_fleets, n_jobs), mean_write)
    else:
        compute = rng.uniform(0.5, 1.5, (n_fleets, n_jobs)) * mean_compute
        write = rng.uniform(0.5, 1.5, (n_fleets, n_jobs)) * mean_write
    cap = np.full(n_fleets, CAP_FRACTION * n_jobs) if capped else None
    theta = rng.uniform(0, 1, (n_fleets, n_jobs)) * (compute + write)
    theta = np.minimum(theta, np.nextafter(compute + write, 0))
    return compute, write, cap, theta


def build(config):
    import ckpt_jax as cj

    compute, write, cap, theta = make_fleet_arrays(
        config["n_fleets"], config["n_jobs"], config["jobs"], config["capped"]
    )
    fleet = cj.Fleet(compute, write, cap=cap, throughput="shared")
    return fleet, cj.state_from_positions(fleet, theta)


def numba_inputs(fleet, state):
    import numpy as np

    return dict(
        compute=np.asarray(fleet.compute),
        write=np.asarray(fleet.write),
        cap=np.asarray(fleet.cap),
        table=np.asarray(fleet.throughput),
        active=np.asarray(fleet.active),
        phase=np.asarray(state.phase),
        remaining=np.asarray(state.remaining),
    )


def max_rss_mb() -> float:
    """Peak resident set size of this process so far (MB); Linux reports KiB."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def rel_diff(a, b) -> float:
    import numpy as np

    a, b = np.asarray(a, float), np.asarray(b, float)
    if not np.array_equal(np.isnan(a), np.isnan(b)):
        return float("inf")
    scale = max(1.0, float(np.nanmax(np.abs(a)))) if np.isfinite(a).any() else 1.0
    return float(np.nanmax(np.abs(a - b)) / scale) if np.isfinite(a).any() else 0.0


# --------------------------------------------------------------------------- checks
def check_agreement():
    """Numba vs ckpt_jax (general and FIFO) on small capped, nonlinear-f fleets, before timing."""
    import jax
    import numpy as np
    from numba_engine import _SNAP_ULPS, simulate_numba

    import ckpt_jax as cj
    from ckpt_jax._snapping import SNAP_ULPS

    assert _SNAP_ULPS == SNAP_ULPS, "numba_engine._SNAP_ULPS must match ckpt_jax's SNAP_ULPS"
    rng = np.random.default_rng(1)
    n_fleets, n_jobs, n_fires = 40, 6, 25
    results = {}
    for jobs in ("heterogeneous", "identical"):
        if jobs == "identical":
            compute = np.broadcast_to(rng.uniform(5, 15, (n_fleets, 1)), (n_fleets, n_jobs))
            write = np.broadcast_to(rng.uniform(0.5, 3, (n_fleets, 1)), (n_fleets, n_jobs))
        else:
            compute = rng.uniform(5, 15, (n_fleets, n_jobs))
            write = rng.uniform(0.5, 3, (n_fleets, n_jobs))
        cap = np.where(rng.uniform(size=n_fleets) < 0.5, rng.uniform(1, n_jobs, n_fleets), np.inf)
        cap = np.where(np.isinf(cap), 1e300, cap)  # finite stand-in for "uncapped" in one batch
        fleet = cj.Fleet(compute, write, cap=cap, throughput="sqrt")
        state = cj.random_state(fleet, jax.random.key(2))
        # One synchronous fleet: every event switches all jobs together.
        phase = np.asarray(state.phase).copy()
        remaining = np.asarray(state.remaining).copy()
        phase[0], remaining[0] = 0, np.asarray(fleet.compute)[0]
        state = cj.initial_state(fleet, phase=phase, remaining=remaining)
        out = simulate_numba(**numba_inputs(fleet, state), n_fires=n_fires, max_events=10**6)
        methods = ("general", "clock", "fifo") if jobs == "identical" else ("general", "clock")
        for method in methods:
            trace = cj.simulate(fleet, state, n_fires, method=method)
            fire = rel_diff(out["fire_times"], trace.fire_times)
            end = rel_diff(out["end_times"], trace.end_times)
            same_events = bool(np.array_equal(out["n_events"], np.asarray(trace.n_events)))
            ok = bool(np.all(trace.ok)) and np.all(out["status"] == 0)
            results[f"{jobs}/{method}"] = dict(fire_rel=fire, end_rel=end, same_events=same_events)
            if not (ok and fire <= 1e-9 and end <= 1e-9 and same_events):
                raise SystemExit(f"Numba and ckpt_jax ({method}) disagree on {jobs} fleets: {results}")
        sync = out["fire_times"][0]
        if jobs == "identical" and not np.all(sync == sync[0]):
            raise SystemExit("Numba: the synchronous fleet did not stay exactly synchronous")
    return results


# --------------------------------------------------------------------------- worker
def timed(fn, repeats, min_total=1.0, max_calls=200):
    """((first-call wall s, CPU s), best steady wall s, best steady CPU s, result).

    Steady times are the best of at least ``repeats`` further calls, continued until they
    add up to ``min_total`` seconds (short runs: a stall from other load on a shared
    machine then rarely hides every sample). CPU time counts all threads of this process.
    """
    start, start_cpu = time.perf_counter(), time.process_time()
    result = fn()
    first, first_cpu = time.perf_counter() - start, time.process_time() - start_cpu
    best, best_cpu = float("inf"), float("inf")
    calls, total = 0, 0.0
    while calls < repeats or (total < min_total and calls < max_calls):
        start, start_cpu = time.perf_counter(), time.process_time()
        result = fn()
        elapsed = time.perf_counter() - start
        best = min(best, elapsed)
        best_cpu = min(best_cpu, time.process_time() - start_cpu)
        calls, total = calls + 1, total + elapsed
    return (first, first_cpu), best, best_cpu, result


def worker(config, repeats):
    """Runs one configuration through every engine; prints one JSON line."""
    import jax

    jax.config.update("jax_enable_x64", True)
    import numpy as np
    from numba_engine import simulate_numba

    import ckpt_jax as cj
    from ckpt_jax._plan import default_max_events

    n_fires = config["n_fires"]
    row = dict(config)
    row["rss_start_mb"] = max_rss_mb()
    fleet, state = build(config)
    max_events = default_max_events(fleet.n_jobs, n_fires, fleet)
    big = config["n_fleets"] * config["n_jobs"] ** 2 * n_fires >= 3e6
    reps = 2 if big else repeats  # 2: the first steady call also pays first-touch page faults
    traces = {}

    devices = "all" if config.get("host_devices", 1) > 1 else None
    assert jax.device_count() == config.get("host_devices", 1), jax.devices()

    def run_jax(method, limit=None):
        trace = cj.simulate(fleet, state, n_fires, method=method, progress=False, max_events=limit, devices=devices)
        jax.block_until_ready(trace)
        return trace

    methods = ["fifo"] if config["fifo_only"] else ["general", "clock"]
    if config["jobs"] == "identical" and not config["fifo_only"]:
        methods.append("fifo")
    for method in methods:
        # The first call, stopped after one event (the event limit is a traced argument,
        # so it compiles exactly what the full run uses): tracing + compilation time.
        start, start_cpu = time.perf_counter(), time.process_time()
        run_jax(method, limit=1)
        first_s, first_cpu_s = time.perf_counter() - start, time.process_time() - start_cpu
        # The same call again runs the same work without compiling (setup of the state,
        # one event, building the trace: seconds at B = 1e4, N = 1024): the difference is
        # tracing + compilation.
        start, start_cpu = time.perf_counter(), time.process_time()
        run_jax(method, limit=1)
        again_s, again_cpu_s = time.perf_counter() - start, time.process_time() - start_cpu
        compile_s, compile_cpu_s = max(0.0, first_s - again_s), max(0.0, first_cpu_s - again_cpu_s)
        first, steady, cpu, trace = timed(functools.partial(run_jax, method), reps)
        events = int(np.sum(np.asarray(trace.n_events, dtype=np.int64)))
        traces[method] = trace
        row[f"jax_{method}"] = dict(
            first_full_call_s=first[0],
            steady_s=steady,
            first_call_limit1_s=first_s,
            first_call_limit1_cpu_s=first_cpu_s,
            compile_s=compile_s,
            compile_cpu_s=compile_cpu_s,
            events=events,
            events_per_s=events / steady,
            cpu_s=cpu,
            events_per_cpu_s=events / cpu,
            ok=bool(np.all(trace.ok)),
            rss_after_mb=max_rss_mb(),
        )

    if not config["fifo_only"]:
        import numba

        # prange over B fleets uses at most B threads; a single fleet runs single-threaded
        # (a parallel region of one iteration only adds thread wake-up latency).
        numba.set_num_threads(max(1, min(numba.config.NUMBA_NUM_THREADS, config["n_fleets"])))
        inputs = numba_inputs(fleet, state)
        first, steady, cpu, out = timed(lambda: simulate_numba(**inputs, n_fires=n_fires, max_events=max_events), reps)
        events = int(out["n_events"].sum())
        general = traces["general"]
        row["numba"] = dict(
            first_call_s=first[0],
            steady_s=steady,
            events=events,
            events_per_s=events / steady,
            cpu_s=cpu,
            events_per_cpu_s=events / cpu,
            ok=bool(np.all(out["status"] == 0)),
            threads=int(numba.get_num_threads()),
            same_events_as_jax=bool(np.array_equal(out["n_events"], np.asarray(general.n_events))),
            fire_rel_diff_vs_jax=rel_diff(out["fire_times"], general.fire_times),
            rss_after_mb=max_rss_mb(),
        )
        for method in methods:
            mine = row[f"jax_{method}"]
            mine["ratio_vs_numba"] = mine["events_per_s"] / row["numba"]["events_per_s"]
            mine["cpu_ratio_vs_numba"] = mine["events_per_cpu_s"] / row["numba"]["events_per_cpu_s"]
        for method in ("fifo", "clock"):
            if method not in traces:
                continue
            mine = row[f"jax_{method}"]
            mine["ratio_vs_general"] = mine["events_per_s"] / row["jax_general"]["events_per_s"]
            mine["cpu_ratio_vs_general"] = mine["events_per_cpu_s"] / row["jax_general"]["events_per_cpu_s"]
            mine["rel_diff_vs_general"] = rel_diff(traces[method].fire_times, general.fire_times)
            mine["same_events_as_general"] = bool(
                np.array_equal(np.asarray(traces[method].n_events), np.asarray(general.n_events))
            )

    if config["run_reference"]:
        sys.path.insert(0, os.path.join(ROOT, "tests"))
        from reference import simulate_reference

        compute = np.asarray(fleet.compute)[0].tolist()
        write = np.asarray(fleet.write)[0].tolist()
        phase = np.asarray(state.phase)[0].tolist()
        remaining = np.asarray(state.remaining)[0].tolist()
        cap = None if not config["capped"] else float(np.asarray(fleet.cap)[0])
        # The reference reports its event instants (a list) or their count, by version.
        counts = "return_event_count" in inspect.signature(simulate_reference).parameters
        option = "return_event_count" if counts else "return_event_times"
        tracemalloc.start()
        start = time.perf_counter()
        fire, _, events = simulate_reference(
            compute, write, phase, remaining, n_fires, cap=cap, exact=False, max_events=max_events, **{option: True}
        )
        elapsed = time.perf_counter() - start
        events = events if counts else len(events)
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        row["reference"] = dict(
            steady_s=elapsed,
            events=events,
            events_per_s=events / elapsed,
            python_peak_mb=peak / 2**20,
            fire_rel_diff_vs_jax=rel_diff(np.asarray(fire, float), np.asarray(traces["general"].fire_times)[0]),
        )
        row["jax_general"]["ratio_vs_reference"] = row["jax_general"]["events_per_s"] / row["reference"]["events_per_s"]
        row["numba"]["ratio_vs_reference"] = row["numba"]["events_per_s"] / row["reference"]["events_per_s"]
    print("RESULT " + json.dumps(row), flush=True)


# --------------------------------------------------------------------------- report
def environment():
    import jax
    import numba

    try:
        commit = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = bool(
            subprocess.run(["git", "status", "--porcelain"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
        )
    except (OSError, subprocess.CalledProcessError):
        commit, dirty = "unknown", None
    return dict(
        git_commit=commit,
        git_dirty=dirty,
        jax_version=jax.__version__,
        numba_version=numba.__version__,
        device=str(jax.devices()[0]),
        device_kind=jax.devices()[0].device_kind,
        cpu_count=os.cpu_count(),
        numba_threads=numba.config.NUMBA_NUM_THREADS,
        python=platform.python_version(),
        machine=platform.platform(),
        date=datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
    )


def fmt(x, spec=".3g"):
    return "-" if x is None else format(x, spec)


def print_table(rows):
    header = (
        f"{'B':>6} {'N':>5} {'K':>3} {'jobs':<13} {'cap':<4} {'dev':>3} | {'general ev/s':>12} {'clock ev/s':>10} "
        f"{'fifo ev/s':>10} {'numba ev/s':>10} {'ref ev/s':>9} | {'gen/numba':>9} {'clock/numba':>11} "
        f"{'fifo/numba':>10} | {'compile s':>9} {'1st call s':>10} {'rss MB':>7}"
    )
    print(header)
    print("-" * len(header))
    for row in rows:
        gen = row.get("jax_general", {})
        clock = row.get("jax_clock", {})
        fifo = row.get("jax_fifo", {})
        num = row.get("numba", {})
        ref = row.get("reference", {})
        compile_s = max((v["compile_s"] for v in (gen, clock, fifo) if "compile_s" in v), default=None)
        first_s = max(
            (v["first_call_limit1_s"] for v in (gen, clock, fifo) if "first_call_limit1_s" in v), default=None
        )
        rss = max(v.get("rss_after_mb", 0) for v in (gen, clock, fifo, num))
        print(
            f"{row['n_fleets']:>6} {row['n_jobs']:>5} {row['n_fires']:>3} {row['jobs']:<13} "
            f"{'yes' if row['capped'] else 'no':<4} {row.get('host_devices', 1):>3} | "
            f"{fmt(gen.get('events_per_s')):>12} "
            f"{fmt(clock.get('events_per_s')):>10} {fmt(fifo.get('events_per_s')):>10} "
            f"{fmt(num.get('events_per_s')):>10} {fmt(ref.get('events_per_s')):>9} | "
            f"{fmt(gen.get('ratio_vs_numba')):>9} {fmt(clock.get('ratio_vs_numba')):>11} "
            f"{fmt(fifo.get('ratio_vs_numba')):>10} | {fmt(compile_s, '.2f'):>9} {fmt(first_s, '.2f'):>10} {rss:>7.0f}"
        )


def scaling(rows):
    """Events/s at the largest N over events/s at N = 32, same B, jobs and cap, per engine."""
    out = []
    for row in rows:
        if "error" in row or row["n_jobs"] == 32:
            continue
        base = [
            r
            for r in rows
            if "error" not in r
            and r["n_jobs"] == 32
            and all(r.get(k, 1) == row.get(k, 1) for k in ("n_fleets", "jobs", "capped", "host_devices"))
        ]
        if not base:
            continue
        entry = {k: row[k] for k in ("n_fleets", "n_jobs", "jobs", "capped")}
        for engine in ("jax_general", "jax_clock", "jax_fifo", "numba"):
            if engine in row and engine in base[0]:
                entry[engine] = row[engine]["events_per_s"] / base[0][engine]["events_per_s"]
        out.append(entry)
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="a subset that finishes in a few minutes")
    parser.add_argument("--cycles", type=int, default=None, help="K, firings per job (default 10 quick, 20 full)")
    parser.add_argument("--repeats", type=int, default=3, help="steady-state repeats (best of) for small runs")
    parser.add_argument("--out", default=None, help="write results as JSON here")
    parser.add_argument("--only", default=None, help="run configs whose 'B,N' matches, e.g. 10000,32")
    parser.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    sys.path.insert(0, HERE)
    sys.path.insert(0, ROOT)
    if args.worker is not None:
        worker(json.loads(args.worker), args.repeats)
        return

    import jax

    jax.config.update("jax_enable_x64", True)
    cycles = args.cycles if args.cycles is not None else (10 if args.quick else 20)
    env = environment()
    print(json.dumps(env))
    start = time.perf_counter()
    agreement = check_agreement()
    print(f"agreement check passed ({time.perf_counter() - start:.1f} s): {json.dumps(agreement)}", flush=True)

    rows = []
    configs = grid(args.quick, cycles)
    if args.only:
        configs = [c for c in configs if f"{c['n_fleets']},{c['n_jobs']}" == args.only]
    for config in configs:
        start = time.perf_counter()
        env = dict(os.environ)
        if config["host_devices"] > 1:
            flag = f"--xla_force_host_platform_device_count={config['host_devices']}"
            env["XLA_FLAGS"] = (env.get("XLA_FLAGS", "") + " " + flag).strip()
        proc = subprocess.run(
            [sys.executable, os.path.abspath(__file__), "--worker", json.dumps(config), "--repeats", str(args.repeats)],
            capture_output=True,
            text=True,
            cwd=ROOT,
            env=env,
        )
        lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
        if proc.returncode != 0 or not lines:
            print(f"config {config} failed:\n{proc.stderr[-3000:]}", flush=True)
            rows.append(dict(config, error=proc.stderr[-3000:]))
            continue
        row = json.loads(lines[-1][len("RESULT ") :])
        row["wall_s"] = time.perf_counter() - start
        rows.append(row)
        print_table([row])
    print()
    print_table([r for r in rows if "error" not in r])
    print("\nevents/s at N over events/s at N = 32 (same B, jobs, cap):")
    for entry in scaling(rows):
        print("  " + json.dumps(entry))
    if args.out:
        os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
        with open(args.out, "w") as fh:
            json.dump(
                dict(
                    environment=env,
                    agreement=agreement,
                    quick=args.quick,
                    cycles=cycles,
                    rows=rows,
                    scaling_vs_n32=scaling(rows),
                ),
                fh,
                indent=1,
            )
        print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
