"""How the loops hand their observers each iteration: an `EventView`, one iteration late.

Each loop keeps the switches of an iteration in its loop state (a small `NamedTuple` of
per-fleet values and bit flags) and builds the observers' `EventView` from it at the start of
the next iteration, and once more after the loop for the last one: the same updates in the
same order. Read in the iteration that computes them, XLA:CPU recomputes the whole switch
decision (due, dt, who switches: fusions of 100-136 ops) inside every observer kernel; read
from the loop state they are loaded from memory. In paired runs at that change, all three
observers on the clock path went from 0.76 to 1.06-1.11 of the trace's events/s
(benchmarks/observers_bench.py; the README has the latest full run).

* `Switch` — the fast paths (`ckpt_jax._loops.virtual`): one job switches per iteration;
* `Instant` — the general engine (`ckpt_jax._loops.general`): every due job of an instant.

Both build the same `EventView`, in job order; the driver (`ckpt_jax._loops.driver`) keeps
the pending event and dispatches it to the observers.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from .._observe import EventView, row_reductions

__all__ = ["Switch", "Instant"]


class Switch(NamedTuple):
    """A fast-path iteration: its dt, its count (`EventView.cycle`) and bit flags (1:
    running, 2: time advanced, 4: a firing, 8: a write end; the slot above them)."""

    dt: jax.Array  # (B,)
    count: jax.Array  # (B,) int32
    flags: jax.Array  # (B,) int32

    @staticmethod
    def none(n_fleets, dtype) -> Switch:
        """An iteration in which no lane ran: every observer leaves its state as it is."""
        int_zero = jnp.zeros(n_fleets, jnp.int32)
        return Switch(dt=jnp.zeros(n_fleets, dtype), count=int_zero, flags=int_zero)

    @staticmethod
    def of(*, dt, count, slot, running, advanced, fired, ended) -> Switch:
        """The iteration's switch, all (B,): ``count`` the switching job's fire count before
        it, ``slot`` its slot."""
        flags = (
            running.astype(jnp.int32)
            | (advanced.astype(jnp.int32) << 1)
            | (fired.astype(jnp.int32) << 2)
            | (ended.astype(jnp.int32) << 3)
            | (slot.astype(jnp.int32) << 4)
        )
        return Switch(dt=dt, count=count, flags=flags)

    @property
    def acted(self) -> jax.Array:
        """(B,) the lane advanced time or switched a job in this iteration."""
        return (self.flags & 14) > 0

    def view(self, after, n_fires, job_of_slot=None) -> EventView:
        """The `EventView` of the iteration that led to the loop carry ``after`` (one
        column: M = 1). ``job_of_slot`` (B N,): the job at each slot (the FIFO ring; None:
        the slots are the jobs)."""
        flags, count = self.flags, self.count
        fires, ends = (flags & 4) > 0, (flags & 8) > 0
        slot = job = flags >> 4
        if job_of_slot is not None:  # a gather per iteration, which XLA drops where no observer reads ``job``
            n_fleets = job.shape[0]
            job = job_of_slot[jnp.arange(n_fleets, dtype=jnp.int32) * (job_of_slot.shape[0] // n_fleets) + slot]
        return EventView(
            time=after.time,
            dt=self.dt,
            advanced=(flags & 2) > 0,
            running=(flags & 1) > 0,
            n_writers=after.n_writers + ends.astype(jnp.int32) - fires.astype(jnp.int32),
            n_writers_after=after.n_writers,
            fired=fires[:, None],
            ended=ends[:, None],
            recorded_end=(ends & (count >= 1))[:, None],
            job=job[:, None],
            cycle=count[:, None],
            draining=None,
            waiting=None,
            first_fires=(fires & (count == 0)).astype(jnp.int32),
            last_ends=(ends & (count == n_fires)).astype(jnp.int32),
            n_active=after.n_active,
            slot=None if job_of_slot is None else slot[:, None],
        )


class Instant(NamedTuple):
    """A general-engine iteration: the time before it, whether the lane ran, per job bit
    flags (1: fired, 2: ended, 4: was draining, 8: was waiting, 16: was taking a snapshot,
    32: was spending a checkpoint's fixed overhead)
    and, where the run observes it, the fleet's power draw during the interval."""

    time: jax.Array  # (B,)
    running: jax.Array  # (B,) bool
    flags: jax.Array  # (B, N) int8
    draw: jax.Array | None = None  # (B,)

    @staticmethod
    def none(carry) -> Instant:
        """An iteration in which no lane ran: every observer leaves its state as it is."""
        return Instant(
            time=carry.time,
            running=jnp.zeros(carry.time.shape, bool),
            flags=jnp.zeros(carry.fire_count.shape, jnp.int8),
            draw=carry.draw,
        )

    @staticmethod
    def of(before, running, fires, ends, draw=None) -> Instant:
        bits = [fires, ends, before.draining, before.waiting]
        if before.snapping is not None:
            bits.append(before.snapping)
        flags = sum(bit.astype(jnp.int8) << i for i, bit in enumerate(bits))
        if before.overhead is not None:  # docs/model.md §1g
            flags = flags + (before.overhead.astype(jnp.int8) << 5)
        return Instant(time=before.time, running=running, flags=jnp.asarray(flags, jnp.int8), draw=draw)

    def view(self, params, after, n_fires: int, n_active, use_async: bool = True, full_draw=None) -> EventView:
        """The `EventView` of the iteration that led to the loop carry ``after``: one
        instant, all N jobs (``waiting`` is None without asynchronous checkpoints). The
        carry before it is ``after`` with the flagged masks, the time before, and one
        firing less where a job fired (failures never change the fire counts)."""
        fires, ends = (self.flags & 1) > 0, (self.flags & 2) > 0
        fire_count = after.fire_count - fires.astype(jnp.int32)  # before the iteration
        n_fleets, n_jobs = params.compute.shape
        writers = params.active & ((self.flags & 4) > 0)

        def count(mask):
            return (mask.astype(jnp.int32), "sum")

        n_writers, n_writers_after, first_fires, last_ends = row_reductions(
            count(writers),
            count(params.active & after.draining),
            count(fires & (fire_count == 0)),
            count(ends & (fire_count == n_fires)),
        )
        dt = after.time - self.time
        return EventView(
            time=after.time,
            dt=dt,
            advanced=dt > 0,
            running=self.running,
            n_writers=n_writers,
            n_writers_after=n_writers_after,
            fired=fires,
            ended=ends,
            recorded_end=ends & (fire_count >= 1),
            job=jnp.broadcast_to(jnp.arange(n_jobs, dtype=jnp.int32), (n_fleets, n_jobs)),
            cycle=fire_count,
            draining=writers,
            waiting=params.active & ((self.flags & 8) > 0) if use_async else None,
            first_fires=first_fires,
            last_ends=last_ends,
            n_active=n_active,
            snapping=params.active & ((self.flags & 16) > 0) if after.snapping is not None else None,
            overhead=params.active & ((self.flags & 32) > 0) if after.overhead is not None else None,
            draw=self.draw,
            full_draw=full_draw,
        )
