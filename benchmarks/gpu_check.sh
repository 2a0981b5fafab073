#!/usr/bin/env bash
# One short GPU check (<= 5 minutes): correctness smoke tests on the device, then the
# identical-fleet benchmark at B = 10^5, N = 32 (FIFO and general paths), printed as JSON.
# On the device image (no network): pip install --no-deps -e . first.
set -euo pipefail
cd "$(dirname "$0")/.."
export PYTHONUNBUFFERED=1
python - <<'PY'
import jax
print({"devices": [str(d) for d in jax.devices()], "jax": jax.__version__})
PY
# Correctness on the accelerator: engine vs the exact oracle, maps/spectrum, fast path.
timeout 150 python -m pytest -q -x -p no:cacheprovider \
  tests/test_engine.py tests/test_fast.py tests/test_maps.py -k "not notebook" || exit 1
python - <<'PY'
import json, time
import jax
jax.config.update("jax_enable_x64", True)
import numpy as np
import ckpt_jax as cj

out = {"device": str(jax.devices()[0]), "jax": jax.__version__, "date": time.strftime("%Y-%m-%d")}
for n_fleets in (10_000, 100_000):
    fleet = cj.Fleet(compute=np.full((n_fleets, 32), 0.75), write=np.full((n_fleets, 32), 0.25 / 32 * 16))
    state = cj.random_state(fleet, jax.random.key(0))
    for method in ("fifo", "general"):
        cj.simulate(fleet, state, n_fires=2, method=method).fire_times.block_until_ready()
        start = time.perf_counter()
        trace = cj.simulate(fleet, state, n_fires=20, method=method, progress=False)
        trace.fire_times.block_until_ready()
        seconds = time.perf_counter() - start
        out[f"B{n_fleets}_N32_{method}_events_per_s"] = float(np.sum(trace.n_events)) / seconds
        out[f"B{n_fleets}_N32_{method}_ok"] = bool(np.all(trace.ok))
# float64 results must equal the CPU's: compare one small case against the CPU backend.
small = cj.Fleet(compute=np.full((4, 8), 10.0), write=np.full((4, 8), 1.0), cap=6.0)
small_state = cj.random_state(small, jax.random.key(1))
gpu = np.asarray(cj.simulate(small, small_state, n_fires=50).fire_times)
with jax.default_device(jax.devices("cpu")[0]):
    cpu = np.asarray(cj.simulate(small, small_state, n_fires=50).fire_times)
out["max_rel_diff_gpu_vs_cpu"] = float(np.max(np.abs(gpu - cpu) / np.abs(cpu)))
print(json.dumps(out, indent=1))
PY
