"""The floor of one batched `lax.while_loop` iteration on this machine, for comparison with
the FIFO path's cost per switch.

The loop body does the least an O(1)-per-event step must do for every fleet of a batch:
one gather of a 4-wide state row, a short elementwise chain, one scatter of the row back
and one scatter of a time into a trace buffer (shapes as the FIFO path at N = 32, K = 11).
It computes nothing useful. Its nanoseconds per fleet-iteration bound what any XLA event
loop of that shape can reach here; compare them with the Numba baseline's nanoseconds per
event (`bench.py`) to see which speed-ups are possible on this CPU at all.

Usage: python benchmarks/xla_floor.py [B ...]      (default: 2500 10000)
"""

from __future__ import annotations

import sys
import time

import jax
import jax.numpy as jnp

N_JOBS, N_FIRES, ITERATIONS = 32, 11, 700


def floor_ns(n_fleets: int) -> float:
    fleet = jnp.arange(n_fleets)

    def body(state):
        i, time_, clock_a, clock_b, slots, trace = state
        pos = (i + fleet) % N_JOBS
        rows = slots[fleet * N_JOBS + pos]
        dt = jnp.minimum(rows[:, 0] - clock_a, rows[:, 1] - clock_b) / 1.5
        new = jnp.stack([rows[:, 0] + 1.0, rows[:, 1] + 2.0, rows[:, 2] + 1, rows[:, 3]], axis=-1)
        slots = slots.at[fleet * N_JOBS + pos].set(new, unique_indices=True)
        cell = (fleet * N_JOBS + pos) * N_FIRES * 2 + i % (2 * N_FIRES)
        trace = trace.at[cell].set(time_ + dt, unique_indices=True)
        return i + 1, time_ + dt, clock_a + 0.5 * dt, clock_b + 0.25 * dt, slots, trace

    @jax.jit
    def run(slots, trace):
        zero = jnp.zeros(n_fleets)
        return jax.lax.while_loop(lambda s: s[0] < ITERATIONS, body, (0, zero, zero, zero, slots, trace))

    slots = jnp.ones((n_fleets * N_JOBS, 4))
    trace = jnp.zeros(n_fleets * N_JOBS * N_FIRES * 2)
    jax.block_until_ready(run(slots, trace))
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        jax.block_until_ready(run(slots, trace))
        best = min(best, time.perf_counter() - start)
    return best / ITERATIONS / n_fleets * 1e9


if __name__ == "__main__":
    jax.config.update("jax_enable_x64", True)
    for n_fleets in [int(x) for x in sys.argv[1:]] or [2500, 10000]:
        print(f"B = {n_fleets}: {floor_ns(n_fleets):.1f} ns per fleet-iteration (wall, {jax.devices()[0].platform})")
