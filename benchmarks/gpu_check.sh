#!/usr/bin/env bash
# One short GPU check (<= 5 minutes: timeouts 120 + 75 + 75 s): correctness smoke tests on
# the device, then the largest float64 difference from the CPU backend and the N = 32 benchmark at B = 10^4 and
# 10^5 (FIFO path on identical fleets, clock and general paths on heterogeneous ones), once
# with XLA's defaults and once with command buffers that include WHILE loops: JSON lines.
# On the device image (no network): pip install --no-deps -e . first.
set -euo pipefail
cd "$(dirname "$0")/.."
export PYTHONUNBUFFERED=1
python - <<'PY'
import jax
print({"devices": [str(d) for d in jax.devices()], "jax": jax.__version__})
PY
# Correctness on the accelerator: engine vs the exact oracle, maps/spectrum, fast paths.
timeout 120 python -m pytest -q -x -p no:cacheprovider \
  tests/test_engine.py tests/test_fast.py tests/test_maps.py -k "not notebook" \
  || echo '{"tests": "failed or timed out: see above; the benchmark still runs"}'
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
for n_fleets in (10_000, 100_000):
    for jobs, methods in (("identical", ("fifo",)), ("heterogeneous", ("clock", "general"))):
        scale = 1.0 if jobs == "identical" else rng.uniform(0.5, 1.5, (n_fleets, 32))
        fleet = cj.Fleet(compute=np.full((n_fleets, 32), 0.75) * scale, write=np.full((n_fleets, 32), 0.25 / 32 * 16) * scale)
        state = cj.random_state(fleet, jax.random.key(0))
        for method in methods:
            if method == "general" and n_fleets > 10_000:
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
timeout 75 python "$bench" || echo '{"default": "failed or timed out"}'
XLA_FLAGS="${XLA_FLAGS:-} --xla_gpu_enable_command_buffer=FUSION,CUBLAS,CUSTOM_CALL,CONDITIONAL,WHILE" \
  timeout 75 python "$bench" || echo '{"command_buffer_while": "failed or timed out"}'
rm -f "$bench"
