"""The clock loop's own part: heterogeneous jobs (any T_i, d_i, jitter) under τ = 0 and
α = 0. Every job of a phase moves at one rate, so a job's end is a fixed clock value from
the moment it enters the phase; the next to finish is a per-phase argmin (one variadic
row reduction per switch, O(N)). This module is the clock heads strategy of
`ckpt_jax._loops.virtual.VirtualLoop`.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

__all__ = ["oldest_heads", "works", "slots", "job_of_slot", "heads", "next_write_head"]


def oldest_heads(target_hi, writes, n_jobs: int):
    """Clock path: per fleet, the writer and the computing job with the smallest target
    (``target_hi``, (B N,); ties: the lowest job index), in one variadic row reduction. (On
    XLA:CPU this beats `jnp.argmin`, a min-then-locate pair, and a tournament of halvings.)"""
    target = target_hi.reshape(-1, n_jobs)
    inf = jnp.asarray(jnp.inf, target.dtype)
    writing = writes.reshape(-1, n_jobs)
    index = jnp.broadcast_to(jnp.arange(n_jobs, dtype=jnp.int32), target.shape)

    def smaller(a, b):  # (value, index) pairs: min value, then min index; associative
        take_b = (b[0] < a[0]) | ((b[0] == a[0]) & (b[1] < a[1]))
        return jnp.where(take_b, b[0], a[0]), jnp.where(take_b, b[1], a[1])

    def combine(a, b):
        return smaller(a[:2], b[:2]) + smaller(a[2:], b[2:])

    keys = (jnp.where(writing, target, inf), index, jnp.where(writing, inf, target), index)
    _, write_pos, _, compute_pos = jax.lax.reduce(keys, (inf, jnp.int32(n_jobs), inf, jnp.int32(n_jobs)), combine, (1,))
    return write_pos, compute_pos


def works(params):
    """(B N, 2) every job's own (T_i, d_i)."""
    return jnp.stack([params.compute, params.write], axis=-1).reshape(-1, 2)


def slots(params, writing, remaining):
    """Slots are jobs (the ring is the identity); inactive slots get an infinite target.

    Returns ``(position, target, writing)``."""
    n_fleets, n_jobs = params.compute.shape
    position = jnp.broadcast_to(jnp.arange(n_jobs, dtype=jnp.int32), (n_fleets, n_jobs))
    return position, jnp.where(params.active, remaining, jnp.inf), writing


def heads(works, target_hi, writes, write_head, n_writers, n_active, fleet, n_jobs):
    """The writer and the computing job with the smallest target, and their own works; a
    writer that ends computes next its own T, a job that fires writes its own d."""
    n_fleets = fleet.shape[0]
    write_pos, compute_pos = oldest_heads(target_hi, writes, n_jobs)
    write_pos = jnp.minimum(write_pos, n_jobs - 1)  # no writer / no computing job: unused
    compute_pos = jnp.minimum(compute_pos, n_jobs - 1)
    head_work = works[jnp.concatenate([fleet * n_jobs + compute_pos, fleet * n_jobs + write_pos])]
    compute, write = head_work[:n_fleets, 0], head_work[n_fleets:, 1]  # the heads' own works
    next_compute, next_write = head_work[n_fleets:, 0], head_work[:n_fleets, 1]
    return write_pos, compute_pos, compute, write, next_compute, next_write


def job_of_slot(position):
    """Slots are jobs: no map (None)."""
    return None


def next_write_head(write_head, ends, n_active):
    """No writer queue: the heads are found by argmin, the head cursor is unused."""
    return write_head
