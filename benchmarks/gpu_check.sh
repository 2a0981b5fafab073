#!/usr/bin/env bash
# One short GPU check (<= 6.5 minutes: timeouts 15 + 90 + 65 + 65 + 60 + 90 s = 385 s): the device,
# correctness smoke tests on it, then the largest float64 difference from the CPU backend and
# the N = 32 benchmark at B = 10^4 and 10^5 (FIFO path on identical fleets, clock and general
# paths on heterogeneous ones), once with XLA's defaults and once with command buffers that
# include WHILE loops; then observer runs (SaveAt(trace=False, writers, gaps, jobs)) at
# B = 10^5 and 10^6, N = 32, against the full trace; then the general loop with k = 1, 4, 16
# events per while_loop iteration (simulate(..., events_per_iteration=k); skipped, with a
# line saying so, where simulate has no such keyword): JSON lines.
# On the device image (no network): pip install --no-deps -e . first.
# Dry run on a CPU: benchmarks/gpu_check.sh --dry-run (every B / 1000, no pytest step), or
# GPU_CHECK_SCALE=k to divide every B by k.
set -euo pipefail
cd "$(dirname "$0")/.."
export PYTHONUNBUFFERED=1
dry_run=0
if [[ "${1:-}" == "--dry-run" ]]; then
  dry_run=1
  export GPU_CHECK_SCALE="${GPU_CHECK_SCALE:-1000}"
fi
export GPU_CHECK_SCALE="${GPU_CHECK_SCALE:-1}"
timeout 15 python - <<'PY' || echo '{"devices": "failed or timed out"}'
import jax
print({"devices": [str(d) for d in jax.devices()], "jax": jax.__version__})
PY
# Correctness on the accelerator: engine vs the exact oracle, maps/spectrum, fast paths.
if [[ "$dry_run" == 1 ]]; then
  echo '{"tests": "skipped (dry run)"}'
else
  timeout 90 python -m pytest -q -x -p no:cacheprovider \
    tests/test_simulate.py tests/test_methods.py tests/test_maps.py -k "not notebook" \
    || echo '{"tests": "failed or timed out: see above; the benchmark still runs"}'
fi
bench=$(mktemp --suffix=.py)
cat > "$bench" <<'PY'
# One JSON line per measurement, printed as soon as it is made: a timeout keeps the rest.
import json, os, time
import jax
jax.config.update("jax_enable_x64", True)
import numpy as np
import ckpt_jax as cj

def emit(**fields):
    print(json.dumps(fields), flush=True)

emit(device=str(jax.devices()[0]), jax=jax.__version__, date=time.strftime("%Y-%m-%d"),
     xla_flags=os.environ.get("XLA_FLAGS", ""))
rng = np.random.default_rng(0)
# float64 results must equal the CPU's: small cases against the CPU backend.
for method, compute in (("fifo", np.full((4, 8), 10.0)), ("clock", rng.uniform(8, 12, (4, 8)))):
    small = cj.Fleet(compute=compute, write=np.full((4, 8), 1.0), cap=6.0)
    small_state = cj.random_state(small, jax.random.key(1))
    here = np.asarray(cj.simulate(small, small_state, n_fires=50, method=method).fire_times)
    with jax.default_device(jax.devices("cpu")[0]):
        cpu = np.asarray(cj.simulate(small, small_state, n_fires=50, method=method).fire_times)
    emit(check=f"max_rel_diff_vs_cpu_{method}", value=float(np.max(np.abs(here - cpu) / np.abs(cpu))))
divide = int(os.environ.get("GPU_CHECK_SCALE", "1"))  # > 1: a dry run at smaller B
for n_fleets in (10_000 // divide, 100_000 // divide):
    for jobs, methods in (("identical", ("fifo",)), ("heterogeneous", ("clock", "general"))):
        scale = 1.0 if jobs == "identical" else rng.uniform(0.5, 1.5, (n_fleets, 32))
        fleet = cj.Fleet(compute=np.full((n_fleets, 32), 0.75) * scale, write=np.full((n_fleets, 32), 0.25 / 32 * 16) * scale)
        state = cj.random_state(fleet, jax.random.key(0))
        for method in methods:
            if method == "general" and n_fleets > 10_000 // divide:
                continue
            # Compile first: the same K (static), stopped after one event (the limit is traced).
            cj.simulate(fleet, state, n_fires=20, method=method, max_events=1).fire_times.block_until_ready()
            start = time.perf_counter()
            trace = cj.simulate(fleet, state, n_fires=20, method=method, progress=False)
            trace.fire_times.block_until_ready()
            seconds = time.perf_counter() - start
            emit(B=n_fleets, N=32, K=20, jobs=jobs, method=method, seconds=seconds,
                 events_per_s=float(np.sum(trace.n_events)) / seconds, ok=bool(np.all(trace.ok)))
PY
timeout 65 python "$bench" || echo '{"default": "failed or timed out"}'
XLA_FLAGS="${XLA_FLAGS:-} --xla_gpu_enable_command_buffer=FUSION,CUBLAS,CUSTOM_CALL,CONDITIONAL,WHILE" \
  timeout 65 python "$bench" || echo '{"command_buffer_while": "failed or timed out"}'
observe=$(mktemp --suffix=.py)
cat > "$observe" <<'PY'
# Observers without a trace (SaveAt(trace=False, writers, gaps, jobs)) at B = 10^5 and 10^6,
# N = 32, K = 20, then the full trace of the same fleets (its events/s: the ratio). One JSON
# line per measurement; the observer runs come first, so a timeout drops the trace runs.
import json, os, time
import jax
jax.config.update("jax_enable_x64", True)
import numpy as np
import ckpt_jax as cj

def emit(**fields):
    print(json.dumps(fields), flush=True)

divide = int(os.environ.get("GPU_CHECK_SCALE", "1"))  # > 1: a dry run at smaller B
observers = cj.SaveAt(trace=False, writers=True, gaps=True, jobs=True)
emit(part="observers", device=str(jax.devices()[0]), date=time.strftime("%Y-%m-%d"))
# float64 observers must equal the CPU's: small cases against the CPU backend.
rng = np.random.default_rng(0)
for method, compute in (("fifo", np.full((4, 8), 10.0)), ("clock", rng.uniform(8, 12, (4, 8)))):
    small = cj.Fleet(compute=compute, write=np.full((4, 8), 1.0), cap=6.0)
    small_state = cj.random_state(small, jax.random.key(1))
    here = cj.simulate(small, small_state, n_fires=50, method=method, save=observers)
    with jax.default_device(jax.devices("cpu")[0]):
        cpu = cj.simulate(small, small_state, n_fires=50, method=method, save=observers)
    diff = 0.0
    for a, b in ((here.writers.time, cpu.writers.time), (here.gaps, cpu.gaps), (here.jobs.write_time, cpu.jobs.write_time)):
        a, b = np.asarray(a), np.asarray(b)
        if not np.array_equal(np.isnan(a), np.isnan(b)):
            diff = float("inf")
        else:
            diff = max(diff, float(np.nanmax(np.abs(a - b) / np.maximum(np.abs(b), 1e-300), initial=0.0)))
    same = all(np.array_equal(np.asarray(a), np.asarray(b)) for a, b in (
        (here.writers.excursions, cpu.writers.excursions), (here.jobs.writes, cpu.jobs.writes)))
    emit(check=f"observers_max_rel_diff_vs_cpu_{method}", value=diff, same_counts=bool(same))
# Identical fleets T = 1 - 0.8/N, d = 0.8/N (load 0.8, f = 1); heterogeneous: U(0.5, 1.5) factors.
n_jobs, n_fires, load = 32, 20, 0.8
runs = []
for save_name in ("observers", "trace"):
    for n_fleets in (100_000 // divide, 1_000_000 // divide):
        for jobs, method in (("identical", "fifo"), ("heterogeneous", "clock")):
            runs.append((save_name, n_fleets, jobs, method))
fleets, events_per_s = {}, {}
for save_name, n_fleets, jobs, method in runs:
    if (n_fleets, jobs) not in fleets:
        fleets.clear()  # one batch on the device at a time
        compute = np.full((n_fleets, n_jobs), 1 - load / n_jobs)
        write = np.full((n_fleets, n_jobs), load / n_jobs)
        if jobs == "heterogeneous":
            draw = np.random.default_rng(n_fleets)  # the same fleets for both saves
            compute = compute * draw.uniform(0.5, 1.5, compute.shape)
            write = write * draw.uniform(0.5, 1.5, write.shape)
        fleet = cj.Fleet(compute=compute, write=write)
        fleets[(n_fleets, jobs)] = (fleet, cj.random_state(fleet, jax.random.key(0)))
    fleet, state = fleets[(n_fleets, jobs)]
    save = observers if save_name == "observers" else cj.SaveAt()
    # Compile first: the same K (static), stopped after one event (the limit is traced).
    start = time.perf_counter()
    jax.block_until_ready(cj.simulate(fleet, state, n_fires=n_fires, method=method, save=save, max_events=1))
    compile_s = time.perf_counter() - start
    start = time.perf_counter()
    result = cj.simulate(fleet, state, n_fires=n_fires, method=method, save=save, progress=False)
    jax.block_until_ready(result)
    seconds = time.perf_counter() - start
    events = int(np.sum(np.asarray(result.n_events, np.int64)))
    rate = events / seconds
    events_per_s[(save_name, n_fleets, method)] = rate
    line = dict(B=n_fleets, N=n_jobs, K=n_fires, jobs=jobs, method=method, save=save_name, seconds=seconds,
                first_call_s=compile_s, events=events, events_per_s=rate, ok=bool(np.all(np.asarray(result.ok))))
    del result
    if save_name == "trace" and ("observers", n_fleets, method) in events_per_s:
        line["observers_over_trace"] = events_per_s[("observers", n_fleets, method)] / rate
    emit(**line)
PY
timeout 60 python "$observe" || echo '{"observers": "failed or timed out"}'
events=$(mktemp --suffix=.py)
cat > "$events" <<'PY'
# The general loop with k events per while_loop iteration (an inner loop of k steps, finished
# fleets masked): a kernel launch and the loop condition's read are paid once per k events.
# examples/llm_cluster.toml (27 jobs, sizes, write limits, f(n), failures) over one day, with
# JobStats, B = 10^3 and 10^4; k = 1, 4, 16 on the same fleets and launches, each compiled
# first; every k must give the same events and useful work as k = 1. One JSON line each.
import inspect, json, os, time
import jax
jax.config.update("jax_enable_x64", True)
import numpy as np
import ckpt_jax as cj
from ckpt_jax import fleetfile

def emit(**fields):
    print(json.dumps(fields), flush=True)

if "events_per_iteration" not in inspect.signature(cj.simulate).parameters:
    emit(part="events_per_iteration", skipped="this ckpt_jax's simulate has no events_per_iteration keyword")
    raise SystemExit(0)
divide = int(os.environ.get("GPU_CHECK_SCALE", "1"))  # > 1: a dry run at smaller B
emit(part="events_per_iteration", device=str(jax.devices()[0]), date=time.strftime("%Y-%m-%d"))
spec = fleetfile.load("examples/llm_cluster.toml")
for n_fleets in (max(2, 1_000 // divide), max(2, 10_000 // divide)):
    base = spec.fleet(dtype=np.float64)
    keys = jax.random.split(jax.random.key(0), n_fleets)
    fleet = cj.Fleet(
        np.broadcast_to(np.asarray(base.compute), (n_fleets, base.n_jobs)),
        np.broadcast_to(np.asarray(base.write), (n_fleets, base.n_jobs)),
        cap=None if not np.isfinite(float(np.asarray(base.cap))) else float(np.asarray(base.cap)),
        throughput=np.broadcast_to(np.asarray(base.throughput), (n_fleets, base.n_jobs + 1)),
        size=np.broadcast_to(np.asarray(base.size), (n_fleets, base.n_jobs)),
        power_policy=spec.power_policy,
        storage_policy=spec.storage_policy,
        mtbf=np.broadcast_to(np.asarray(base.mtbf), (n_fleets, base.n_jobs)),
        restart=np.broadcast_to(np.asarray(base.restart), (n_fleets, base.n_jobs)),
        write_limit=np.broadcast_to(np.asarray(base.write_limit), (n_fleets, base.n_jobs)),
        idle_power=float(np.asarray(base.idle_power)),
        dtype=np.float64,
    )
    state = cj.random_state(fleet, keys)
    reference = None
    for k in (1, 4, 16):
        run = lambda until: cj.simulate(fleet, state, None, until=until, key=keys, method="general",
                                        save=cj.SaveAt(trace=False, jobs=True), progress=False,
                                        events_per_iteration=k)
        start = time.perf_counter()
        jax.block_until_ready(run(86400.0 / 50))  # compiles the same program
        first_call_s = time.perf_counter() - start
        start = time.perf_counter()
        out = jax.block_until_ready(run(86400.0))
        seconds = time.perf_counter() - start
        events = np.asarray(out.n_events)
        useful = np.asarray(out.jobs.useful_work)
        same = None if reference is None else bool(np.array_equal(events, reference[0]) and np.array_equal(useful, reference[1]))
        if reference is None:
            reference = (events, useful)
        emit(B=n_fleets, N=base.n_jobs, k=k, seconds=seconds, first_call_s=first_call_s,
             events=int(events.sum()), us_per_event=seconds / max(int(events.max()), 1) * 1e6,
             same_as_k1=same, ok=bool(np.all(np.asarray(out.ok))))
PY
timeout 90 python "$events" || echo '{"events_per_iteration": "failed or timed out"}'
rm -f "$bench" "$observe" "$events"
