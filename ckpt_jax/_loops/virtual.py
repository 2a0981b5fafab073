"""Virtual-clock engines for base-model fleets: the FIFO path and the clock path.

With no controller delay (τ = 0) and no asynchronous checkpointing (α = 0), all writers of
a fleet drain at one rate f(n_w)/n_w and all computing jobs work at one rate min(1, C/n_c)
(docs/model.md §1), whatever their own T_i and d_i. So two **virtual clocks** per fleet,
``write_clock`` = ∫ f(n_w)/n_w dt and ``compute_clock`` = ∫ min(1, C/n_c) dt (the work done
per writer / per computing job since t = 0), replace the per-job remaining work: a job that
enters a phase gets a fixed **target**, the phase's clock plus its work (d_i, or T_i or its
jittered draw), and it leaves the phase when that clock reaches the target. The clocks grow
without bound, so they and the targets are kept as unevaluated sums ``hi + lo``
(double-word arithmetic): the work left, ``target − clock``, is then as accurate as the
general engine's per-job remaining work, not limited to ulps of the clock.

Each loop iteration switches one job: the writer or the computing job with the smallest
target (the phase's *head*). If either head is due at the current instant (by the general
engine's snapping rule), it switches with no time advance; otherwise time advances to the
earlier of the two and that job switches. So the jobs that switch together at one event
instant do so in consecutive iterations at the same time and see the same clocks, which is
the general engine's "every job that empties switches in the same step": a synchronous
fleet stays exactly synchronous. ``n_events`` counts event instants (iterations that
advance time), as in `ckpt_jax.engine`. The two paths differ in how they find the heads:

* **FIFO path** (identical jobs, no jitter): jobs finish each phase in the order they
  entered it, and the cyclic firing order never changes (claim 3). One **ring** of the
  active jobs in cyclic order holds the writers (oldest first, from ``write_head``) followed
  by the computing jobs; a job leaving one phase joins the tail of the other, which is
  already its neighbour in the ring, so only ``write_head`` and ``n_writers`` move. O(1)
  per switch.
* **clock path** (any T_i, d_i, jitter): the heads are a per-phase argmin over the targets,
  one row reduction per switch: O(N), but far cheaper than the general engine's step.

Both are one loop, `VirtualLoop`, with a **heads strategy**: `ckpt_jax._loops.fifo` or
`ckpt_jax._loops.clock` say how the slots are laid out at t = 0 (``slots``), what each
job's works are (``works``), which writer and computing job lead their phases
(``heads``) and where the writer queue's head moves (``next_write_head``).
`ckpt_jax.simulate` (``method="auto"``) picks a path per fleet (`ckpt_jax._plan.choose_paths`); the driver
(`ckpt_jax._loops.driver`) runs big batches on a CPU in cache-sized blocks of fleets.

How the step is laid out for XLA (docs/performance.md, issue 48's principles): the per-slot
state is four separate arrays (targets as double-words, fire counts, phases), each written
in place at the one switched slot per fleet, so the clock path's argmin reads only the two
it needs; the per-fleet values come from reductions (the heads), gathers, or the decision
(`_decision`: dt and a word of flags), which on a CPU is computed once, under a conditional,
and read by every output of the step, because XLA:CPU would otherwise recompute it in each.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .._observe import EventView, LoopInfo, job_order
from .._params import Params
from .._rates import phase_rates
from .._snapping import horizon_clock, snapped, to_horizon
from .._status import Status
from . import LoopResult, jitter_works, loop_info, loop_result, record
from . import clock as clock_loop
from . import fifo as fifo_loop
from .config import RunConfig
from .events import Switch

__all__ = ["VirtualCarry", "VirtualLoop", "STRATEGIES", "init_carry"]

# The heads strategy of each virtual-clock path.
STRATEGIES = {"fifo": fifo_loop, "clock": clock_loop}


class VirtualCarry(NamedTuple):
    """The loop carry of a batch of fleets on the FIFO or clock path (leading axis B).

    Per-job values are stored by **slot**: on the FIFO path a slot is a ring position
    (the ring never changes, so a slot holds the same job for the whole run, and
    `VirtualLoop.final` maps the trace back to job order once, after the loop); on the
    clock path a slot is a job.

    Attributes:
      time: (B,) current time.
      write_hi, write_lo: (B,) the write clock (work done per writer since t = 0) as a
        double-word ``hi + lo``.
      compute_hi, compute_lo: (B,) the compute clock, likewise.
      position: (B, N) int32 ring position of each job (FIFO; the identity on the clock
        path).
      job_of_slot: (B N,) int32 the job at each ring position (FIFO; None on the clock
        path), for the observers' views, which are in job order.
      target_hi, target_lo: (B N,) per slot (FIFO: ring position; clock: job): the clock
        value (double-word ``hi + lo``) at which that job's phase ends.
      fire_count: (B N,) int32 per slot, the job's firings so far.
      writes: (B N,) bool per slot, whether the job writes.
      (Separate arrays, each updated in place at its switched slot: a stacked (B N, 4)
      row array made the clock path's argmin read all four columns to use two, and every
      switch gather and write whole rows.)
      trace: (B N K 2,) per slot, cycle k and kind (0: firing, 1: end of that write), the
        time; NaN until written.
      write_head: (B,) int32 ring position of the oldest writer (FIFO path only).
      n_writers: (B,) int32 jobs writing; the n_active − n_writers others compute.
      n_active: (B,) int32 active jobs (on the FIFO path, the ring's length).
      n_finished: (B,) int32 active jobs whose K-th write has ended (done when = n_active).
      n_events: (B,) int32 event instants stepped.
      status: (B,) int32 bit flags (`Status`).
      halted: (B,) bool, stopped at the event budget (`Status.MAX_EVENTS` is set later).
      stall: (B,) int32 switches since time last advanced. Each job switches at most once
        per instant when the fleet's times are resolved by its dtype, so more than 2 N
        means time has stopped advancing (`Status.STALLED`): every iteration counts
        against a bound, even those that do not advance time.
    """

    time: jax.Array
    write_hi: jax.Array
    write_lo: jax.Array
    compute_hi: jax.Array
    compute_lo: jax.Array
    position: jax.Array
    target_hi: jax.Array
    target_lo: jax.Array
    fire_count: jax.Array
    writes: jax.Array
    trace: jax.Array
    write_head: jax.Array
    n_writers: jax.Array
    n_active: jax.Array
    n_finished: jax.Array
    n_events: jax.Array
    status: jax.Array
    halted: jax.Array
    stall: jax.Array
    job_of_slot: jax.Array | None = None


def two_sum(a, b):
    """a + b as an unevaluated sum (s, e) with s = fl(a + b), exactly (Knuth)."""
    s = a + b
    b_virtual = s - a
    e = (a - (s - b_virtual)) + (b - b_virtual)
    return s, e


def dw_add(hi, lo, y):
    """Double-word ``hi + lo`` plus a plain number y, renormalised: (hi, lo)."""
    s, e = two_sum(hi, y)
    return two_sum(s, e + lo)


def fleet_constants(params: Params, strategy):
    """Per fleet (batched), computed once per run: the phase works and the flat
    throughput table f (B (N + 1),).

    ``works``: FIFO: (B, 2) the common (T, d); clock: (B N, 2) every job's (T_i, d_i).
    """
    return strategy.works(params), params.throughput.reshape(-1), params.cap


def init_carry(params: Params, state_phase, state_remaining, n_fires: int, strategy=fifo_loop) -> VirtualCarry:
    """The batched carry (leading axis B) at t = 0.

    FIFO: slots are ring positions. Ring order: writers by remaining volume, then
    computing jobs by remaining work, then padding; each queue is then sorted by target
    (entry order), as the FIFO needs. Clock: slots are jobs (the ring is the identity)
    and inactive slots get an infinite target. ``n_fires`` is the trace's length K (0:
    no trace).
    """
    dtype = params.compute.dtype
    n_fleets, n_jobs = params.compute.shape
    writing = params.active & (state_phase == 1)
    remaining = state_remaining.astype(dtype)
    position, target, writing = strategy.slots(params, writing, remaining)
    zero = jnp.zeros(n_fleets, dtype)
    int_zero = jnp.zeros(n_fleets, jnp.int32)
    return VirtualCarry(
        time=zero,
        write_hi=zero,
        write_lo=zero,
        compute_hi=zero,
        compute_lo=zero,
        position=position,
        target_hi=target.reshape(-1),
        target_lo=jnp.zeros(n_fleets * n_jobs, dtype),
        fire_count=jnp.zeros(n_fleets * n_jobs, jnp.int32),
        writes=writing.reshape(-1),
        trace=jnp.full(n_fleets * n_jobs * n_fires * 2, jnp.nan, dtype),
        write_head=int_zero,
        n_writers=jnp.sum(writing, axis=1).astype(jnp.int32),
        n_active=jnp.sum(params.active, axis=1).astype(jnp.int32),
        n_finished=int_zero,
        n_events=int_zero,
        status=int_zero,
        halted=jnp.zeros(n_fleets, bool),
        stall=int_zero,
        job_of_slot=strategy.job_of_slot(position),
    )


def index_dtype(size: int):
    """Flat indices into an array of ``size`` elements: int32 where they fit."""
    if size < np.iinfo(np.int32).max:
        return jnp.int32
    if not jax.config.read("jax_enable_x64"):
        raise ValueError(
            f"the fast path's trace buffer has {size} elements, more than int32 indexes; "
            "enable jax_enable_x64, or simulate fewer fleets, jobs or firings per call"
        )
    return jnp.int64


class _Heads(NamedTuple):
    """The two phases' heads of each fleet (all (B,)) and the rates until the next event.

    Attributes:
      fleet: the fleets' indices (the trace's index dtype).
      n_active: the active jobs, at least 1 (a safe wrap on finished, all-padding lanes).
      write_rate, speed: the writers' and the computing jobs' common rates.
      write_pos, compute_pos: the slots of the writer and the computing job that leave their
        phase next; ``write``, ``compute``: their phases' works (the snapping scales);
        ``next_write``, ``next_compute``: the works of the phases they enter.
      write_target_hi, write_target_lo, compute_target_hi, compute_target_lo: their
        slots' targets (double-words); ``write_count``, ``compute_count``: their firings.
      write_left, compute_left: the work left to each head.
    """

    fleet: jax.Array
    n_active: jax.Array
    write_rate: jax.Array
    speed: jax.Array
    write_pos: jax.Array
    compute_pos: jax.Array
    compute: jax.Array
    write: jax.Array
    next_compute: jax.Array
    next_write: jax.Array
    write_target_hi: jax.Array
    write_target_lo: jax.Array
    write_count: jax.Array
    compute_target_hi: jax.Array
    compute_target_lo: jax.Array
    compute_count: jax.Array
    write_left: jax.Array
    compute_left: jax.Array


class _Due(NamedTuple):
    """When each head leaves its phase (all (B,)): ``write_dt``, ``compute_dt`` from now
    (inf where the phase is empty), and whether it is due now (``due_write``,
    ``due_compute``, either: ``due``)."""

    write_dt: jax.Array
    compute_dt: jax.Array
    due_write: jax.Array
    due_compute: jax.Array
    due: jax.Array


class _Advance(NamedTuple):
    """The time advance of each fleet (all (B,)).

    Attributes:
      dt: the advance (0 where a lane does not advance); ``advance``: the lanes that advance;
        ``finite``: the next event is finite; ``halted``: stopped at the event budget.
      write_set, compute_set: the head that set ``dt`` (its clock snapped onto its target).
      write_hi, write_lo, compute_hi, compute_lo: the clocks after the advance.
      time: the new time; ``stall``: switches since time last advanced.
    """

    dt: jax.Array
    advance: jax.Array
    finite: jax.Array
    halted: jax.Array
    write_set: jax.Array
    compute_set: jax.Array
    write_hi: jax.Array
    write_lo: jax.Array
    compute_hi: jax.Array
    compute_lo: jax.Array
    time: jax.Array
    stall: jax.Array


def switch(constants, params, carry: VirtualCarry, running, event_limit, config: RunConfig, horizon=None):
    """Switches one job in each running fleet (advancing time first if no job is due now).

    Lanes that are not running take dt = 0, switch nobody and write nothing (their
    scatter indices are out of range). With a ``horizon`` (B,) a fleet whose next event
    does not come before it (to working precision, `to_horizon`) advances to it exactly;
    at the horizon it switches the jobs due there by the snapping rule, one per
    iteration, then does nothing (no event counted) once none is due.

    ``config`` (static): the run's `RunConfig`; the switch reads ``path`` (its heads
    strategy, `STRATEGIES`), ``n_fires`` and ``use_jitter`` (jittered compute works: the
    clock path only). Returns ``(carry, event)``, this iteration's `events.Switch` for the
    observers.
    """
    strategy = STRATEGIES[config.path]
    heads = _heads(constants, carry, strategy)
    # The decision (when, and who switches) is a chain of ~90 operations per fleet that every
    # output of the step reads. XLA:CPU has no multi-output fusion: computed in line, each of
    # the ~17 per-fleet fusions that write an output recomputed all of it. A conditional's
    # results are buffers, so under one the chain is computed once per output of the
    # decision (two: dt and a word of flags), and the outputs read them. No lane running: no
    # fleet iterates (the driver stops), and the zeros are what such lanes take. Elsewhere
    # (XLA:GPU fuses with several outputs, and reads a conditional's predicate on the host:
    # one more device-to-host copy per iteration) the decision is computed in line.
    if jax.default_backend() == "cpu":
        dt, flags = jax.lax.cond(
            jnp.any(running),
            lambda: _decision(carry, running, event_limit, heads, horizon),
            lambda: (jnp.zeros_like(carry.time), jnp.zeros(carry.time.shape, jnp.int32)),
        )
    else:
        dt, flags = _decision(carry, running, event_limit, heads, horizon)
    due, adv = _advance(carry, running, heads, dt, flags, horizon)
    ends, fires = (flags & _ENDS) > 0, (flags & _FIRES) > 0
    pos = jnp.where(ends, heads.write_pos, heads.compute_pos)
    count = jnp.where(ends, heads.write_count, heads.compute_count)
    trace = _record_switch(carry, heads.fleet, adv.time, ends, fires, pos, count)
    target_hi, target_lo, fire_count, writes = _enter_phases(params, carry, config, heads, adv, ends, fires, pos, count)
    write_head = strategy.next_write_head(carry.write_head, ends, heads.n_active)
    n_writers = carry.n_writers - ends.astype(jnp.int32) + fires.astype(jnp.int32)
    last_end = ends & (count == config.n_fires)
    event = Switch.of(dt=adv.dt, count=count, slot=pos, running=running, advanced=adv.advance, fired=fires, ended=ends)
    return VirtualCarry(
        time=adv.time,
        write_hi=adv.write_hi,
        write_lo=adv.write_lo,
        compute_hi=adv.compute_hi,
        compute_lo=adv.compute_lo,
        position=carry.position,
        job_of_slot=carry.job_of_slot,
        target_hi=target_hi,
        target_lo=target_lo,
        fire_count=fire_count,
        writes=writes,
        trace=trace,
        write_head=write_head,
        n_writers=n_writers,
        n_active=carry.n_active,
        n_finished=carry.n_finished + last_end.astype(jnp.int32),
        n_events=carry.n_events + adv.advance.astype(jnp.int32),
        status=carry.status
        | jnp.where(running & ~due & ~adv.finite, Status.NONFINITE, 0).astype(jnp.int32)
        | jnp.where(running & (adv.stall > 2 * carry.n_active), Status.STALLED, 0).astype(jnp.int32),
        halted=adv.halted,
        stall=adv.stall,
    ), event


def _heads(constants, carry: VirtualCarry, strategy) -> _Heads:
    """The rates, the heads of both phases (the writer and the computing job that leave
    their phase next, where the two paths differ) and the work each has left."""
    works, throughput, cap = constants
    dtype = carry.time.dtype
    n_fleets, n_jobs = carry.position.shape
    fleet = jnp.arange(n_fleets, dtype=index_dtype(carry.trace.shape[0]))
    n_writers = carry.n_writers
    # The general loop's rate rule (`phase_rates`), so rates agree bit for bit. (A table of
    # rates precomputed over n would divide by constants, which XLA may rewrite.)
    n_computing = (carry.n_active - n_writers).astype(dtype)
    write_rate, speed = phase_rates(throughput[fleet * (n_jobs + 1) + n_writers], n_writers, n_computing, cap, dtype)
    n_active = jnp.maximum(carry.n_active, 1)  # safe wrap on finished (all-padding) lanes
    write_pos, compute_pos, compute, write, next_compute, next_write = strategy.heads(
        works, carry.target_hi, carry.writes, carry.write_head, n_writers, n_active, fleet, n_jobs
    )
    index = jnp.concatenate([fleet * n_jobs + write_pos, fleet * n_jobs + compute_pos])
    target_hi, target_lo, fire_count = carry.target_hi[index], carry.target_lo[index], carry.fire_count[index]
    return _Heads(
        fleet=fleet,
        n_active=n_active,
        write_rate=write_rate,
        speed=speed,
        write_pos=write_pos,
        compute_pos=compute_pos,
        compute=compute,
        write=write,
        next_compute=next_compute,
        next_write=next_write,
        write_target_hi=target_hi[:n_fleets],
        write_target_lo=target_lo[:n_fleets],
        write_count=fire_count[:n_fleets],
        compute_target_hi=target_hi[n_fleets:],
        compute_target_lo=target_lo[n_fleets:],
        compute_count=fire_count[n_fleets:],
        write_left=(target_hi[:n_fleets] - carry.write_hi) + (target_lo[:n_fleets] - carry.write_lo),
        compute_left=(target_hi[n_fleets:] - carry.compute_hi) + (target_lo[n_fleets:] - carry.compute_lo),
    )


def _due(carry: VirtualCarry, heads: _Heads) -> _Due:
    """When each head leaves its phase, and whether it is due now, by the snapping rule
    every loop shares (`snapped`, with no time advance): within `SNAP_ULPS` ulps of the
    clock, or with that many ulps of the phase's work left."""
    dtype = carry.time.dtype
    inf = jnp.asarray(jnp.inf, dtype)
    has_writer = carry.n_writers > 0
    has_computing = carry.n_writers < carry.n_active
    write_dt = jnp.where(has_writer, heads.write_left / heads.write_rate, inf)
    compute_dt = jnp.where(has_computing, heads.compute_left / heads.speed, inf)
    due_write = has_writer & snapped(write_dt, heads.write_left, heads.write, 0.0, carry.time, dtype)
    due_compute = has_computing & snapped(compute_dt, heads.compute_left, heads.compute, 0.0, carry.time, dtype)
    return _Due(write_dt, compute_dt, due_write, due_compute, due_write | due_compute)


# The decision's flags, one bit each (`_decision`).
_DUE, _ADVANCE, _FINITE, _HALT, _WRITE_SET, _COMPUTE_SET, _ENDS, _FIRES = (1 << k for k in range(8))


def _decision(carry: VirtualCarry, running, event_limit, heads: _Heads, horizon):
    """When and who: ``(dt, flags)``, the time advance where no head is due now (to the
    earlier head, or the horizon, within the event budget; 0 where a lane does not advance)
    and a word of flags: a head due now, the lane advances, its next event is finite, it
    stops at the budget, the write or the compute head set dt, the write head ends, the
    compute head fires."""
    dtype = carry.time.dtype
    due = _due(carry, heads)
    dt = jnp.minimum(due.write_dt, due.compute_dt)
    waiting = running & ~due.due
    if horizon is not None:
        # No event before the horizon (to working precision): a time advance to it; the
        # jobs due there then switch in the next iterations, as every switch at an instant
        # <= H does (docs/model.md §1). At the horizon with nothing due, a lane does
        # nothing: no zero advance, no event counted.
        dt = to_horizon(dt, carry.time, horizon, dtype)
        waiting = waiting & (carry.time < horizon)
    finite = jnp.isfinite(dt)
    waiting = waiting & finite
    # Past the event budget a fleet only finishes the current instant (due jobs), then halts.
    advance = waiting & (carry.n_events < event_limit)
    halt = waiting & ~advance
    dt = jnp.where(advance, dt, 0)
    # The head that sets dt is exactly at its target (its clock is snapped onto it, `_advance`).
    write_set = advance & (due.write_dt == dt)
    compute_set = advance & (due.compute_dt == dt)
    # Who switches: a due head (writers first), else the head that set dt.
    ends = running & jnp.where(due.due, due.due_write, write_set)
    fires = running & ~ends & jnp.where(due.due, due.due_compute, compute_set)
    bits = ((due.due, _DUE), (advance, _ADVANCE), (finite, _FINITE), (halt, _HALT), (write_set, _WRITE_SET))
    bits += ((compute_set, _COMPUTE_SET), (ends, _ENDS), (fires, _FIRES))
    flags = functools.reduce(jnp.bitwise_or, (jnp.where(flag, bit, 0).astype(jnp.int32) for flag, bit in bits))
    return dt, flags


def _advance(carry: VirtualCarry, running, heads: _Heads, dt, flags, horizon):
    """The decision applied: ``(due, advance)``, whether a head was due now, and the
    `_Advance` (both clocks advance by dt; the one whose head set dt is snapped onto its
    target, so that jobs that entered the phase together (equal targets) read exactly zero
    left and follow at once)."""
    advance = (flags & _ADVANCE) > 0
    write_set, compute_set = (flags & _WRITE_SET) > 0, (flags & _COMPUTE_SET) > 0
    write_hi, write_lo = dw_add(carry.write_hi, carry.write_lo, heads.write_rate * dt)
    write_hi = jnp.where(write_set, heads.write_target_hi, write_hi)
    write_lo = jnp.where(write_set, heads.write_target_lo, write_lo)
    compute_hi, compute_lo = dw_add(carry.compute_hi, carry.compute_lo, heads.speed * dt)
    compute_hi = jnp.where(compute_set, heads.compute_target_hi, compute_hi)
    compute_lo = jnp.where(compute_set, heads.compute_target_lo, compute_lo)
    return (flags & _DUE) > 0, _Advance(
        dt=dt,
        advance=advance,
        finite=(flags & _FINITE) > 0,
        halted=carry.halted | ((flags & _HALT) > 0),
        write_set=write_set,
        compute_set=compute_set,
        write_hi=write_hi,
        write_lo=write_lo,
        compute_hi=compute_hi,
        compute_lo=compute_lo,
        time=carry.time + dt if horizon is None else horizon_clock(carry.time, dt, horizon),
        stall=jnp.where(advance | ~running, 0, carry.stall + 1),
    )


def _record_switch(carry: VirtualCarry, fleet, time, ends, fires, pos, count):
    """The trace with this iteration's switch: the end of the write started by firing
    number ``count`` (not an initial write) goes to cycle count − 1; a firing to cycle
    ``count``. Each fleet writes at most one time."""
    n_fleets, n_jobs = carry.position.shape
    index = fleet.dtype
    trace_len = carry.trace.shape[0] // max(1, 2 * n_fleets * n_jobs)  # K of the trace (0: none)
    record_end = ends & (count >= 1) & (count <= trace_len)
    record_fire = fires & (count < trace_len)
    cycle = jnp.where(ends, count - 1, count).astype(index)
    cell = ((fleet * n_jobs + pos) * trace_len + cycle) * 2 + ends.astype(index)
    return record(carry.trace, cell, time, record_end | record_fire)


def _enter_phases(
    params, carry: VirtualCarry, config: RunConfig, heads: _Heads, adv: _Advance, ends, fires, pos, count
):
    """The slots after the switch, ``(target_hi, target_lo, fire_count, writes)``: a writer
    that ends starts computing (target: compute clock + its work), a job that fires starts
    writing (write clock + d). FIFO: both are already at that ring spot. Each array is
    written in place at the one switched slot per fleet."""
    n_fleets, n_jobs = carry.position.shape
    fleet = heads.fleet
    next_compute = heads.next_compute
    if config.use_jitter and config.path == "clock":  # compute phase number `count` of that job (`jitter_work`)
        keys = params.job_keys[jnp.arange(n_fleets), heads.write_pos]
        next_compute = jitter_works(keys, next_compute, params.jitter, count)
    target_hi, target_lo = dw_add(
        jnp.where(ends, adv.compute_hi, adv.write_hi),
        jnp.where(ends, adv.compute_lo, adv.write_lo),
        jnp.where(ends, next_compute, heads.next_write),
    )
    switched = ends | fires
    index = jnp.where(switched, fleet * n_jobs + pos, n_fleets * n_jobs)  # out of range: dropped

    def put(per_slot, value):
        return per_slot.at[index].set(value, mode="drop", unique_indices=True)

    return (
        put(carry.target_hi, target_hi),
        put(carry.target_lo, target_lo),
        put(carry.fire_count, count + fires.astype(jnp.int32)),
        put(carry.writes, fires),
    )


class VirtualLoop:
    """The FIFO and clock paths as a `ckpt_jax._loops.driver.Loop`: one job switches per
    iteration in each running fleet; the heads strategy is ``STRATEGIES[config.path]``."""

    def __init__(self, config: RunConfig, params: Params, horizon):
        self.config, self.params = config, params
        self.horizon = horizon if config.until else None
        self.strategy = STRATEGIES[config.path]
        self.constants = fleet_constants(params, self.strategy)

    def info(self) -> LoopInfo:
        return loop_info(self.config, self.params, one_switch=True, ordered=self.config.path == "fifo")

    def init(self, phase, remaining) -> VirtualCarry:
        return init_carry(self.params, phase, remaining, self.config.trace_len, self.strategy)

    def step(self, carry: VirtualCarry, running, event_limit):
        return switch(self.constants, self.params, carry, running, event_limit, self.config, self.horizon)

    def no_event(self, carry: VirtualCarry) -> Switch:
        return Switch.none(carry.time.shape[0], carry.time.dtype)

    def view(self, event: Switch, after: VirtualCarry) -> EventView:
        return event.view(after, self.config.n_fires, after.job_of_slot)

    def unfinished(self, carry: VirtualCarry, event: Switch):
        """Not done: some active job has not completed K writes; with ``until``, before the
        horizon, or at it while the last iteration did something (more may be due)."""
        if self.horizon is not None:
            return (carry.time < self.horizon) | event.acted
        return carry.n_finished < carry.n_active

    def within_budget(self, carry: VirtualCarry, event_limit):
        # The budget is enforced in `switch`: past it a fleet finishes its instant, then halts.
        return ~carry.halted

    def progress(self, carry: VirtualCarry):
        """How far the slowest fleet got, in [0, 1]: with ``until`` the fraction of its
        horizon, else the fewest firings of an active job over K."""
        if self.horizon is not None:
            return jnp.minimum(1, jnp.min(carry.time / self.horizon))
        position = carry.position if self.config.path == "fifo" else None
        fired = job_order(carry.fire_count.reshape(carry.position.shape), position)
        n_fires = self.config.n_fires
        return jnp.min(jnp.where(self.params.active, jnp.minimum(fired, n_fires), n_fires)) / n_fires

    def final(self, carry: VirtualCarry) -> LoopResult:
        """The final state in job order."""
        n_fleets, n_jobs = carry.position.shape
        trace_len = carry.trace.shape[0] // max(1, 2 * n_fleets * n_jobs)
        trace = carry.trace.reshape(n_fleets, n_jobs, trace_len, 2)
        position = carry.position if self.config.path == "fifo" else None  # ring position -> job

        def by_job(per_slot):
            return job_order(per_slot.reshape(n_fleets, n_jobs), position)

        trace = job_order(trace, position)
        writing, target_hi, target_lo = by_job(carry.writes), by_job(carry.target_hi), by_job(carry.target_lo)
        # A computing job's work left is its target less the compute clock (double-words);
        # a writer's next phase is whole (deterministic works: with jitter the useful work
        # is not reported, `ckpt_jax._simulate.fast_useful_work`).
        left = (target_hi - carry.compute_hi[:, None]) + (target_lo - carry.compute_lo[:, None])
        return loop_result(
            self.params,
            self.horizon,
            time=carry.time,
            fire_times=trace[..., 0],
            end_times=trace[..., 1],
            complete=carry.n_finished >= carry.n_active,
            n_events=carry.n_events,
            status=carry.status,
            n_writers=carry.n_writers,
            fire_count=by_job(carry.fire_count),
            writing=writing,
            slot_position=position,
            compute_left=jnp.where(writing, self.params.compute, left),
        )
