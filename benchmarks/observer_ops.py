"""What the observers' per-iteration array operations cost on this machine (pure JAX).

A batched `lax.while_loop` whose body only advances a per-fleet index and time (the base),
plus one kind of update per variant, with the shapes an observer update of the fast paths
has at N = 32, K = 11 (one switch per fleet and iteration: M = 1):

  trace_set      one flat scatter-set of a time into a (B N K) buffer (the trace's
                 `_record`; the fast paths write two such buffers, fire and end times)
  count_scatter  (B, N+1) float `.at[fleet, n].add(dt)`           (writers: time at n_w)
  count_flat     the same on the flattened buffer with flat indices
  count_gather_set  the same as a gather, an add and a scatter-set with unique indices
                 (each fleet touches its own row: no two updates collide)
  count_onehot   the same as a dense masked add, no scatter
  rises_scatter  two int32 `.at[fleet, i].add(±1, mode="drop")`   (writers: rises)
  jobs_scatter   (B, N) int32 add and float add at the switching job  (jobs observer)
  jobs_gather_set   the same as gathers and scatter-sets with unique indices
  jobs_onehot    the same as dense masked adds
  gaps_4ops      (B K, 4) rows: gather, scatter-add of the count, gather of the count,
                 scatter-set of three columns                 (the gaps observer today)
  gaps_2ops      one gather of the row, one scatter-set of all four columns (unique
                 indices; with M = 1 no two firings share a cell in one iteration)

Prints nanoseconds per fleet-iteration of each variant minus the base (min over
interleaved repeats). These are the building blocks' costs, not the observers' own code.

Usage: python benchmarks/observer_ops.py [B ...]      (default: 2500 10000)
"""

from __future__ import annotations

import json
import sys
import time

import jax
import jax.numpy as jnp

N_JOBS, N_FIRES, ITERATIONS, REPEATS = 32, 11, 500, 5


def make(n_fleets: int, variant: str):
    fleet = jnp.arange(n_fleets)
    levels = jnp.arange(N_JOBS + 1)
    jobs = jnp.arange(N_JOBS)

    def update(i, n, job, t, dt, buf):
        if variant == "base":
            return buf
        if variant == "trace_set":
            cell = (fleet * N_JOBS + job) * N_FIRES + i % N_FIRES
            return buf.at[cell].set(t, mode="drop")
        if variant == "count_scatter":
            return buf.at[fleet, n].add(dt)
        if variant == "count_flat":
            return buf.reshape(-1).at[fleet * (N_JOBS + 1) + n].add(dt).reshape(buf.shape)
        if variant == "count_gather_set":  # one cell per fleet: the indices are unique
            flat, cell = buf.reshape(-1), fleet * (N_JOBS + 1) + n
            return flat.at[cell].set(flat[cell] + dt, unique_indices=True).reshape(buf.shape)
        if variant == "count_onehot":
            return buf + jnp.where(levels[None, :] == n[:, None], dt[:, None], 0.0)
        if variant == "rises_scatter":
            size = buf.shape[1]
            up = (i % 3) == 0
            buf = buf.at[fleet, jnp.where(up, n + 1, size)].add(1, mode="drop")
            return buf.at[fleet, jnp.where(up, n + 2, size)].add(-1, mode="drop")
        if variant == "jobs_scatter":
            count, total = buf
            return count.at[fleet, job].add(1), total.at[fleet, job].add(dt)
        if variant == "jobs_gather_set":
            count, total = buf
            cell = fleet * N_JOBS + job
            count, total = count.reshape(-1), total.reshape(-1)
            count = count.at[cell].set(count[cell] + 1, unique_indices=True)
            total = total.at[cell].set(total[cell] + dt, unique_indices=True)
            return count.reshape(n_fleets, N_JOBS), total.reshape(n_fleets, N_JOBS)
        if variant == "jobs_onehot":
            count, total = buf
            hit = jobs[None, :] == job[:, None]
            return count + hit.astype(count.dtype), total + jnp.where(hit, dt[:, None], 0.0)
        if variant in ("gaps_4ops", "gaps_2ops"):
            rows = buf
            cell = fleet * N_FIRES + (i // N_JOBS) % N_FIRES
            if variant == "gaps_4ops":
                old = rows.at[cell].get(mode="fill", fill_value=0)
                rows = rows.at[cell, 3].add(1, mode="drop")
                count = rows.at[cell, 3].get(mode="fill", fill_value=0)
                inner = jnp.minimum(old[:, 2], jnp.where(old[:, 3] > 0, t - old[:, 1], jnp.inf))
                inner = jnp.where(count - old[:, 3] >= 2, jnp.minimum(inner, 0), inner)
                first = jnp.where(old[:, 3] > 0, old[:, 0], t)
                return rows.at[cell, :3].set(jnp.stack([first, t, inner], axis=-1), mode="drop")
            old = rows.at[cell].get(mode="fill", fill_value=0)
            inner = jnp.minimum(old[:, 2], jnp.where(old[:, 3] > 0, t - old[:, 1], jnp.inf))
            first = jnp.where(old[:, 3] > 0, old[:, 0], t)
            return rows.at[cell].set(
                jnp.stack([first, t, inner, old[:, 3] + 1], axis=-1), mode="drop", unique_indices=True
            )
        raise ValueError(variant)

    def body(state):
        i, t, buf = state
        n = (i * 7 + fleet) % (N_JOBS + 1)
        job = (i + fleet * 3) % N_JOBS
        dt = 0.5 + 0.25 * jnp.sin(t)
        return i + 1, t + dt, update(i, n, job, t, dt, buf)

    if variant == "trace_set":
        buf = jnp.zeros(n_fleets * N_JOBS * N_FIRES)
    elif variant.startswith("count") or variant == "base":
        buf = jnp.zeros((n_fleets, N_JOBS + 1))
    elif variant == "rises_scatter":
        buf = jnp.zeros((n_fleets, N_JOBS + 2), jnp.int32)
    elif variant.startswith("jobs"):
        buf = (jnp.zeros((n_fleets, N_JOBS), jnp.int32), jnp.zeros((n_fleets, N_JOBS)))
    else:
        buf = jnp.zeros((n_fleets * N_FIRES, 4))

    @jax.jit
    def run(buf):
        return jax.lax.while_loop(lambda s: s[0] < ITERATIONS, body, (0, jnp.zeros(n_fleets), buf))

    jax.block_until_ready(run(buf))
    return lambda: jax.block_until_ready(run(buf))


VARIANTS = [
    "base",
    "trace_set",
    "count_scatter",
    "count_flat",
    "count_gather_set",
    "count_onehot",
    "rises_scatter",
    "jobs_scatter",
    "jobs_gather_set",
    "jobs_onehot",
    "gaps_4ops",
    "gaps_2ops",
]


def measure(n_fleets: int) -> dict:
    runs = {v: make(n_fleets, v) for v in VARIANTS}
    best = {v: float("inf") for v in VARIANTS}
    for _ in range(REPEATS):  # interleaved
        for v, fn in runs.items():
            start = time.perf_counter()
            fn()
            best[v] = min(best[v], time.perf_counter() - start)
    per = {v: s / ITERATIONS / n_fleets * 1e9 for v, s in best.items()}
    return dict(B=n_fleets, base_ns=per["base"], extra_ns={v: per[v] - per["base"] for v in VARIANTS if v != "base"})


if __name__ == "__main__":
    jax.config.update("jax_enable_x64", True)
    for n_fleets in [int(x) for x in sys.argv[1:]] or [2500, 10000]:
        row = measure(n_fleets)
        print(json.dumps(row), flush=True)
        print(
            f"B = {n_fleets}: base {row['base_ns']:.1f} ns per fleet-iteration; extra: "
            + ", ".join(f"{k} {v:.1f}" for k, v in row["extra_ns"].items()),
            flush=True,
        )
