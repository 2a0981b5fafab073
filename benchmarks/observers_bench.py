"""Observers (`SaveAt`) benchmark: peak memory without a trace, and events/s against the trace.

Two measurements, each configuration in a fresh subprocess (public API only: ``ckpt_jax``'s
``simulate``, ``SaveAt``, ``Fleet``, ``random_state``):

``memory``
    ``simulate(fleet, state, K, method="fifo", save=SaveAt(trace=False, writers=True,
    jobs=True))`` once, in a fresh process, on identical fleets (T = 1 − ρ/N, d = ρ/N,
    f ≡ 1, load ρ = N d / (T + d) = 0.8, random launches). Records the child's peak RSS as
    the kernel reports it to the parent (``os.wait4`` → ``ru_maxrss``), the wall time of
    the call (compilation included: it is the process's only call) and the resident/peak
    memory after each stage (import, fleet, state, run, reading the outputs), so a peak
    can be traced to the stage that allocated it.

``throughput``
    Per path (``fifo`` on identical fleets; ``clock`` and ``general`` on heterogeneous
    ones — T_i, d_i drawn from U(0.5, 1.5) × the identical values — or, with
    ``--identical-everywhere``, identical fleets on every path), one process compiles every
    configuration (one warm-up call each), then runs ``--repeats`` rounds; each round calls
    every configuration once, in an order rotated from round to round. Configurations:

      trace      SaveAt()                                     the full (B, N, K) trace
      observers  SaveAt(trace=False, writers, gaps, jobs)     every observer, no trace
      lean       SaveAt(trace=False, writers, jobs)           the memory benchmark's choice
      writers / gaps / jobs                                   one observer alone
      bare       SaveAt(trace=False)                          the loop alone (baseline)
      trace+stats  the trace, then every observer's statistic from it (`trace_statistics`:
                 writer_distribution, writer_excursions, smallest_gap, write time per job),
                 the workflow the observers replace
      NAME/s     NAME, the batch run as s sub-batches, one `simulate` call after another
                 (profiling: does a smaller batch per loop run faster per event?)

    events/s = Σ n_events / wall time of one call. Ratios (config / trace, in events/s)
    are paired within each round (same load), then summarised as min / median / max.
    Every configuration must step the same events (checked).

``kernels``
    A structural profile: each configuration and path runs once at B = 64 in a child with
    ``XLA_FLAGS=--xla_dump_to=...``; the optimized HLO of the innermost ``while`` body (the
    loop iteration) is parsed and its kernels counted (fusions, and among them those that
    contain a scatter or a gather; copies). On XLA:CPU each kernel is one more pass over the
    batch per iteration.

The machine may be shared: compare ratios measured in one run, not absolute times.

Usage:
  python benchmarks/observers_bench.py memory --fleets 10000 --cycles 100       # estimate
  python benchmarks/observers_bench.py memory --fleets 100000 --cycles 1000     # the target
  python benchmarks/observers_bench.py throughput --fleets 10000 --cycles 11 --repeats 7
  python benchmarks/observers_bench.py kernels
  python benchmarks/observers_bench.py all --out benchmarks/results/obs.json   # all three
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
LOAD = 0.8
CONFIGS = {  # name -> SaveAt fields
    "trace": dict(),
    "observers": dict(trace=False, writers=True, gaps=True, jobs=True),
    "lean": dict(trace=False, writers=True, jobs=True),  # the memory benchmark's SaveAt
    "writers": dict(trace=False, writers=True),
    "gaps": dict(trace=False, gaps=True),
    "jobs": dict(trace=False, jobs=True),
    "bare": dict(trace=False),
    # The trace, then every observer's statistic computed from it with the public analysis
    # functions (the workflow the observers replace): writer_distribution,
    # writer_excursions, smallest_gap and the per-job write time.
    "trace+stats": dict(),
}
PATH_JOBS = {"fifo": "identical", "clock": "heterogeneous", "general": "heterogeneous"}


# --------------------------------------------------------------------------- helpers
def proc_memory_mb() -> dict:
    """Resident (VmRSS) and peak resident (VmHWM) memory of this process, MB."""
    out = {}
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith(("VmRSS:", "VmHWM:")):
                    key, value = line.split(":")
                    out[key.lower()] = int(value.split()[0]) / 1024
    except OSError:
        pass
    out["ru_maxrss"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return out


def make_fleet(n_fleets: int, n_jobs: int, jobs: str, seed: int = 0, stages=None):
    """Identical: T = 1 − ρ/N, d = ρ/N (cycle 1, load ρ); heterogeneous: each job's T and d
    times independent U(0.5, 1.5) factors. f ≡ 1, no cap. Random launches (seeded).
    ``stages``: a dict that gets the memory after each step."""
    import jax
    import numpy as np

    import ckpt_jax as cj

    stages = {} if stages is None else stages
    compute = np.full((n_fleets, n_jobs), 1.0 - LOAD / n_jobs)
    write = np.full((n_fleets, n_jobs), LOAD / n_jobs)
    if jobs == "heterogeneous":
        rng = np.random.default_rng([seed, n_fleets, n_jobs])
        compute = compute * rng.uniform(0.5, 1.5, compute.shape)
        write = write * rng.uniform(0.5, 1.5, write.shape)
    stages["host_arrays"] = proc_memory_mb()
    fleet = cj.Fleet(compute, write)
    del compute, write
    stages["fleet"] = proc_memory_mb()
    state = cj.random_state(fleet, jax.random.key(seed))
    stages["state"] = proc_memory_mb()
    return fleet, state


def summary(values) -> dict:
    values = sorted(values)
    return dict(min=values[0], median=statistics.median(values), max=values[-1], n=len(values))


def load_average():
    try:
        return list(os.getloadavg())
    except OSError:
        return None


def environment():
    import jax

    try:
        commit = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--", "ckpt_jax"], cwd=ROOT, capture_output=True, text=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        commit, dirty = "unknown", None
    total_mb = None
    try:
        with open("/proc/meminfo") as fh:
            total_mb = int(fh.readline().split()[1]) / 1024
    except OSError:
        pass
    return dict(
        git_commit=commit,
        library_files_modified=dirty or "",
        jax_version=jax.__version__,
        device=str(jax.devices()[0]),
        cpu_count=os.cpu_count(),
        memory_total_mb=total_mb,
        python=platform.python_version(),
        machine=platform.platform(),
        date=datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        load_average_start=load_average(),
    )


def spawn(args, timeout):
    """Runs this script as a child; returns (last RESULT row or None, child's peak RSS MB,
    seconds, error or None). The peak is the kernel's ``ru_maxrss`` of that child alone
    (``os.wait4``), so it covers everything the process ever held, native buffers included."""
    import tempfile

    start = time.perf_counter()
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen([sys.executable, os.path.abspath(__file__), *args], stdout=out, stderr=err, cwd=ROOT)
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid == proc.pid:
                break
            if time.perf_counter() - start > timeout:
                proc.kill()
                pid, status, usage = os.wait4(proc.pid, 0)
                break
            time.sleep(0.2)
        proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here, not by Popen
        seconds = time.perf_counter() - start
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read(), err.read()
    peak = usage.ru_maxrss / 1024  # Linux: KiB
    rows = [line for line in stdout.splitlines() if line.startswith("RESULT ")]
    row = json.loads(rows[-1][len("RESULT ") :]) if rows else None
    if seconds > timeout:
        return row, peak, seconds, f"timed out after {timeout} s\n" + stderr[-3000:]
    if proc.returncode != 0 or row is None:
        return row, peak, seconds, f"exit {proc.returncode}\n" + stderr[-3000:]
    return row, peak, seconds, None


# --------------------------------------------------------------------------- workers
def worker_memory(config):
    stages = {"start": proc_memory_mb()}
    import jax

    jax.config.update("jax_enable_x64", True)
    import numpy as np

    import ckpt_jax as cj

    stages["import"] = proc_memory_mb()
    fleet, state = make_fleet(config["n_fleets"], config["n_jobs"], "identical", stages=stages)
    save = cj.SaveAt(**config["save"])
    start, start_cpu = time.perf_counter(), time.process_time()
    result = cj.simulate(fleet, state, config["n_fires"], method="fifo", save=save, progress=False)
    jax.block_until_ready(result)
    wall, cpu = time.perf_counter() - start, time.process_time() - start_cpu
    stages["simulate"] = proc_memory_mb()
    events = int(np.sum(np.asarray(result.n_events, dtype=np.int64)))
    ok = bool(np.all(np.asarray(result.ok)))
    # Bring every output to the host, as a user would.
    host = jax.tree_util.tree_map(np.asarray, result)
    out_mb = sum(x.nbytes for x in jax.tree_util.tree_leaves(host)) / 2**20
    stages["outputs_on_host"] = proc_memory_mb()
    row = dict(
        config,
        wall_s=wall,
        cpu_s=cpu,
        events=events,
        events_per_s=events / wall,
        ok=ok,
        has_trace=result.fire_times is not None,
        output_mb=out_mb,
        b_by_n_float64_mb=config["n_fleets"] * config["n_jobs"] * 8 / 2**20,  # the unit of the stages
        stages_mb=stages,
        child_ru_maxrss_mb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    )
    print("RESULT " + json.dumps(row), flush=True)


def trace_statistics(trace, n_jobs: int) -> dict:
    """What ``SaveAt(trace=False, writers=True, gaps=True, jobs=True)`` records, computed
    from a run's trace afterwards (the "trace+stats" configuration)."""
    import jax
    import numpy as np

    import ckpt_jax as cj

    fire, end = np.asarray(trace.fire_times), np.asarray(trace.end_times)
    return jax.block_until_ready(
        dict(
            distribution=cj.analysis.writer_distribution(fire, end),
            excursions=cj.analysis.writer_excursions(fire, end, list(range(n_jobs + 1))),
            gaps=cj.analysis.smallest_gap(fire),
            write_time=np.nansum(end - fire, axis=-1),
        )
    )


def worker_throughput(config):
    import jax

    jax.config.update("jax_enable_x64", True)
    import numpy as np

    import ckpt_jax as cj

    method, jobs = config["method"], config["jobs"]
    fleet, state = make_fleet(config["n_fleets"], config["n_jobs"], jobs)
    names = list(config["configs"])
    batches = {}  # split s -> s (fleet, state) pieces of the same batch, called one after another
    for name in names:
        split = int(name.split("/")[1]) if "/" in name else 1
        if split not in batches:
            compute, write = np.asarray(fleet.compute), np.asarray(fleet.write)
            phase, remaining = np.asarray(state.phase), np.asarray(state.remaining)
            pieces = []
            for part in np.array_split(np.arange(config["n_fleets"]), split):
                sub = cj.Fleet(compute[part], write[part])
                pieces.append((sub, cj.initial_state(sub, phase=phase[part], remaining=remaining[part])))
            batches[split] = pieces

    def call(name):
        base, _, split = name.partition("/")
        save = cj.SaveAt(**CONFIGS[base])
        start, start_cpu = time.perf_counter(), time.process_time()
        results = []
        for sub, sub_state in batches[int(split or 1)]:
            results.append(cj.simulate(sub, sub_state, config["n_fires"], method=method, save=save, progress=False))
            jax.block_until_ready(results[-1])
            if base == "trace+stats":
                trace_statistics(results[-1], config["n_jobs"])
        wall, cpu = time.perf_counter() - start, time.process_time() - start_cpu
        n_events = np.concatenate([np.asarray(r.n_events, dtype=np.int64) for r in results])
        ok = all(bool(np.all(np.asarray(r.ok))) for r in results)
        return wall, cpu, (n_events, ok)

    warmup, events, ok = {}, {}, {}
    n_events = None
    for name in names:  # warm-up: compile + one full run
        wall, cpu, (counts, ok[name]) = call(name)
        warmup[name] = dict(wall_s=wall, cpu_s=cpu)
        events[name] = int(counts.sum())
        if n_events is None:
            n_events = counts
        elif not np.array_equal(counts, n_events):
            raise SystemExit(f"{method}: {name} stepped other events than {names[0]}")
    walls = {name: [] for name in names}
    cpus = {name: [] for name in names}
    for round_ in range(config["repeats"]):
        shift = round_ % len(names)
        for name in names[shift:] + names[:shift]:
            wall, cpu, _ = call(name)
            walls[name].append(wall)
            cpus[name].append(cpu)
    row = dict(
        config,
        events=events,
        ok=ok,
        warmup=warmup,
        wall_s=walls,
        cpu_s=cpus,
        child_ru_maxrss_mb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    )
    print("RESULT " + json.dumps(row), flush=True)


def worker_kernels(config):
    """One small run with the HLO dump on (the caller sets XLA_FLAGS)."""
    import jax

    jax.config.update("jax_enable_x64", True)
    import ckpt_jax as cj

    fleet, state = make_fleet(config["n_fleets"], config["n_jobs"], config["jobs"])
    save = cj.SaveAt(**CONFIGS[config["config"]])
    jax.block_until_ready(
        cj.simulate(fleet, state, config["n_fires"], method=config["method"], save=save, progress=False)
    )
    print("RESULT " + json.dumps(dict(config, child_ru_maxrss_mb=0)), flush=True)


def _computations(text):
    """{name: [instruction lines]} of an HLO text module."""
    import re

    out, name, lines = {}, None, []
    for line in text.splitlines():
        match = re.match(r"^(?:ENTRY )?%?([\w.\-]+) .*\{\s*$", line)
        if match and not line.startswith(" "):
            name, lines = match.group(1), []
        elif line.startswith("}") and name:
            out[name], name = lines, None
        elif name:
            lines.append(line)
    return out


def loop_body_kernels(dump_dir) -> dict:
    """Kernel counts of the innermost, largest while body in the biggest optimized module."""
    import collections
    import glob
    import re

    files = glob.glob(os.path.join(dump_dir, "*cpu_after_optimizations.txt")) or glob.glob(
        os.path.join(dump_dir, "*after_optimizations.txt")
    )
    path = max(files, key=os.path.getsize)
    comps = _computations(open(path).read())
    bodies = [
        m.group(1)
        for lines in comps.values()
        for line in lines
        if " while(" in line
        for m in [re.search(r"body=%?([\w.\-]+)", line)]
        if m
    ]
    inner = [b for b in bodies if b in comps and not any(" while(" in line for line in comps[b])]
    body = max(inner, key=lambda b: len(comps[b]))
    counts = collections.Counter()
    for line in comps[body]:
        match = re.search(r"\s([a-z][a-z\-]*)\(", line.split("=", 1)[1]) if "=" in line else None
        if not match or match.group(1) in ("parameter", "get-tuple-element", "tuple", "constant", "bitcast"):
            continue
        op = match.group(1)
        if op == "fusion":
            called = re.search(r"calls=%?([\w.\-]+)", line)
            inside = " ".join(comps.get(called.group(1), [])) if called else ""
            op = next((f"fusion[{k}]" for k in ("scatter", "gather") if f" {k}(" in inside), "fusion")
        counts[op] += 1
    return dict(module=os.path.basename(path), kernels=sum(counts.values()), by_kind=dict(sorted(counts.items())))


def run_kernels(args):
    import tempfile

    rows = []
    names = args.configs.split(",")
    for method in args.methods.split(","):
        jobs = "identical" if args.identical_everywhere else PATH_JOBS[method]
        for name in names:
            if "/" in name or name == "trace+stats":  # the same loop as another configuration
                continue
            config = dict(
                kind="kernels", method=method, jobs=jobs, config=name, n_fleets=64, n_jobs=args.jobs, n_fires=11
            )
            with tempfile.TemporaryDirectory() as dump:
                flags = os.environ.get("XLA_FLAGS", "") + f" --xla_dump_to={dump} --xla_dump_hlo_as_text"
                os.environ["XLA_FLAGS"], old = flags.strip(), os.environ.get("XLA_FLAGS")
                try:
                    _, _, _, error = spawn(["--worker-kernels", json.dumps(config)], args.timeout)
                finally:
                    if old is None:
                        os.environ.pop("XLA_FLAGS")
                    else:
                        os.environ["XLA_FLAGS"] = old
                row = dict(config, **(loop_body_kernels(dump) if not error else dict(error=error)))
            rows.append(row)
            print(
                f"kernels {method:<8} {name:<10} {row.get('kernels')} per iteration: "
                f"{row.get('by_kind', row.get('error'))}",
                flush=True,
            )
    return rows


# --------------------------------------------------------------------------- drivers
def run_memory(args):
    rows = []
    sizes = (
        [(int(b), int(k)) for b, k in (s.split(",") for s in args.sizes)]
        if args.sizes
        else [(args.fleets, args.cycles)]
    )
    for n_fleets, n_fires in sizes:
        config = dict(
            kind="memory",
            n_fleets=n_fleets,
            n_jobs=args.jobs,
            n_fires=n_fires,
            method="fifo",
            save=dict(trace=False, writers=True, jobs=True),
            load=LOAD,
        )
        load_before = load_average()
        row, peak, seconds, error = spawn(["--worker-memory", json.dumps(config)], args.timeout)
        row = dict(config) if row is None else row
        row.update(
            peak_rss_mb=peak, process_s=seconds, load_average_before=load_before, load_average_after=load_average()
        )
        if error:
            row["error"] = error
        rows.append(row)
        if error:
            print(f"memory B={n_fleets} K={n_fires}: FAILED {error[-500:]}", flush=True)
        else:
            print(
                f"memory B={n_fleets} N={args.jobs} K={n_fires}: peak RSS {peak:.0f} MB, "
                f"simulate {row['wall_s']:.1f} s "
                f"({row['events']:.3g} events, {row['events_per_s']:.3g} ev/s incl. compile), ok={row['ok']}, "
                f"stages (VmRSS/VmHWM MB): "
                + ", ".join(
                    f"{k} {v.get('vmrss', 0):.0f}/{v.get('vmhwm', 0):.0f}" for k, v in row["stages_mb"].items()
                ),
                flush=True,
            )
    return rows


def run_throughput(args):
    rows = []
    names = args.configs.split(",")
    for method in args.methods.split(","):
        jobs = "identical" if args.identical_everywhere else PATH_JOBS[method]
        config = dict(
            kind="throughput",
            method=method,
            jobs=jobs,
            n_fleets=args.fleets,
            n_jobs=args.jobs,
            n_fires=args.cycles,
            repeats=args.repeats,
            configs=names,
            load=LOAD,
        )
        load_before = load_average()
        row, peak, seconds, error = spawn(["--worker-throughput", json.dumps(config)], args.timeout)
        row = dict(config) if row is None else row
        row.update(process_s=seconds, load_average_before=load_before, load_average_after=load_average())
        if error:
            row["error"] = error
            print(f"throughput {method}: FAILED {error[-800:]}", flush=True)
            rows.append(row)
            continue
        events = row["events"]
        row["events_per_s"] = {n: summary([events[n] / t for t in row["wall_s"][n]]) for n in names}
        row["events_per_cpu_s"] = {n: summary([events[n] / t for t in row["cpu_s"][n]]) for n in names}
        if "trace" in names:  # paired per round: same load
            row["ratio_vs_trace"] = {
                n: summary([tt / tn for tt, tn in zip(row["wall_s"]["trace"], row["wall_s"][n])])
                for n in names
                if n != "trace"
            }
            row["cpu_ratio_vs_trace"] = {
                n: summary([tt / tn for tt, tn in zip(row["cpu_s"]["trace"], row["cpu_s"][n])])
                for n in names
                if n != "trace"
            }
        rows.append(row)
        print(
            f"throughput {method} ({jobs}, B={args.fleets}, N={args.jobs}, K={args.cycles}, "
            f"{row['events'][names[0]]:.3g} events/call, {args.repeats} rounds):",
            flush=True,
        )
        for n in names:
            e = row["events_per_s"][n]
            line = f"  {n:<10} events/s min {e['min']:.3g} median {e['median']:.3g} max {e['max']:.3g}"
            if n != "trace" and "ratio_vs_trace" in row:
                r, c = row["ratio_vs_trace"][n], row["cpu_ratio_vs_trace"][n]
                line += (
                    f" | vs trace: wall {r['median']:.3f} ({r['min']:.3f}-{r['max']:.3f}),"
                    f" cpu {c['median']:.3f} ({c['min']:.3f}-{c['max']:.3f})"
                )
            print(line, flush=True)
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("what", nargs="?", choices=("memory", "throughput", "kernels", "all"), default="all")
    parser.add_argument("--fleets", type=int, default=None, help="B (default: memory 1e5, throughput 1e4)")
    parser.add_argument("--jobs", type=int, default=32, help="N")
    parser.add_argument("--cycles", type=int, default=None, help="K (default: memory 1000, throughput 11)")
    parser.add_argument(
        "--sizes", nargs="*", default=None, help="memory: several B,K pairs, e.g. 10000,100 100000,1000"
    )
    parser.add_argument("--repeats", type=int, default=7, help="throughput rounds")
    parser.add_argument("--methods", default="fifo,clock,general")
    parser.add_argument("--configs", default=",".join(CONFIGS))
    parser.add_argument("--identical-everywhere", action="store_true", help="identical fleets on clock/general too")
    parser.add_argument("--timeout", type=float, default=3600, help="seconds per child process")
    parser.add_argument("--out", default=None, help="write results as JSON here")
    parser.add_argument("--worker-memory", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--worker-throughput", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--worker-kernels", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    sys.path.insert(0, ROOT)
    if args.worker_memory is not None:
        return worker_memory(json.loads(args.worker_memory))
    if args.worker_throughput is not None:
        return worker_throughput(json.loads(args.worker_throughput))
    if args.worker_kernels is not None:
        return worker_kernels(json.loads(args.worker_kernels))

    env = environment()
    print(json.dumps(env), flush=True)
    results = dict(environment=env)
    if args.what in ("memory", "all"):
        sub = argparse.Namespace(**vars(args))
        sub.fleets = args.fleets or 100_000
        sub.cycles = args.cycles or 1000
        results["memory"] = run_memory(sub)
    if args.what in ("throughput", "all"):
        sub = argparse.Namespace(**vars(args))
        sub.fleets = args.fleets or 10_000
        sub.cycles = args.cycles or 11
        results["throughput"] = run_throughput(sub)
    if args.what in ("kernels", "all"):
        results["kernels"] = run_kernels(args)
    results["load_average_end"] = load_average()
    if args.out:
        os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
        with open(args.out, "w") as fh:
            json.dump(results, fh, indent=1)
        print(f"wrote {args.out}")
    return results


if __name__ == "__main__":
    main()
