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

`ckpt_jax.simulate` (``method="auto"``) picks a path per fleet (`choose_paths`). On a CPU,
big batches run in cache-sized blocks of fleets (`run_blocks`).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from . import engine
from . import _observe
from ._observe import EventView, FinalView, SaveAt
from .engine import STATUS_NONFINITE, STATUS_OK, STATUS_STALLED, LoopResult, _Params
from ._progress import progress_bar
from .model import Fleet

__all__ = [
    "FIFO_MIN_JOBS",
    "PATHS",
    "FifoCarry",
    "choose_paths",
    "clock_eligible",
    "fifo_applies",
    "fifo_eligible",
]

# `method="auto"` uses the FIFO and clock paths for fleets of at least this many active
# jobs: below it the general engine's O(N) step is as cheap as their bookkeeping
# (benchmarks/bench.py: at N = 2 the general engine is 1.3-1.8x the clock path).
FIFO_MIN_JOBS = 8


class FifoCarry(NamedTuple):
    """The loop carry of a batch of fleets on the FIFO or clock path (leading axis B).

    Per-job values are stored by **slot**: on the FIFO path a slot is a ring position
    (the ring never changes, so a slot holds the same job for the whole run, and
    `_advance` maps the trace back to job order once, after the loop); on the clock path a
    slot is a job.

    Attributes:
      time: (B,) current time.
      write_hi, write_lo: (B,) the write clock (work done per writer since t = 0) as a
        double-word ``hi + lo``.
      compute_hi, compute_lo: (B,) the compute clock, likewise.
      position: (B, N) int32 ring position of each job (FIFO; the identity on the clock
        path).
      slots: (B N, 4 or 5) per slot (FIFO: ring position; clock: job): the clock value
        (double-word: columns 0, 1) at which that job's phase ends, its fire count so far
        (column 2, exact in floats), whether it writes (column 3: 1.0 or 0.0) and, for
        the jobs observer, the time it entered its phase (column 4).
      trace: (B N K 2,) per slot, cycle k and kind (0: firing, 1: end of that write), the
        time; NaN until written.
      write_head: (B,) int32 ring position of the oldest writer (FIFO path only).
      n_writers: (B,) int32 jobs writing; the n_active − n_writers others compute.
      n_active: (B,) int32 active jobs (on the FIFO path, the ring's length).
      n_finished: (B,) int32 active jobs whose K-th write has ended (done when = n_active).
      n_events: (B,) int32 event instants stepped.
      status: (B,) int32 bit flags (`STATUS_*`).
      halted: (B,) bool, stopped at the event budget (`STATUS_MAX_EVENTS` is set later).
      stall: (B,) int32 switches since time last advanced. Each job switches at most once
        per instant when the fleet's times are resolved by its dtype, so more than 2 N
        means time has stopped advancing (`STATUS_STALLED`): every iteration counts
        against a bound, even those that do not advance time.
    """

    time: jax.Array
    write_hi: jax.Array
    write_lo: jax.Array
    compute_hi: jax.Array
    compute_lo: jax.Array
    position: jax.Array
    slots: jax.Array
    trace: jax.Array
    write_head: jax.Array
    n_writers: jax.Array
    n_active: jax.Array
    n_finished: jax.Array
    n_events: jax.Array
    status: jax.Array
    halted: jax.Array
    stall: jax.Array


def fifo_eligible(fleet: Fleet, jitter=None) -> np.ndarray:
    """Per fleet (batch shape), whether the FIFO path is exact for it: all its active jobs
    share T and d, and it has no jitter, τ = 0 and α = 0. Decided on the host."""
    batch = fleet.batch_shape
    ok = np.ones(batch, bool)
    if jitter is not None:
        ok &= np.broadcast_to(np.asarray(jitter) == 0, batch)
    ok &= np.asarray(fleet.delay) == 0
    ok &= np.asarray(fleet.async_fraction) == 0
    active = np.asarray(fleet.active)
    first = np.argmax(active, axis=-1)[..., None]
    for values in (np.asarray(fleet.compute), np.asarray(fleet.write)):
        same = values == np.take_along_axis(values, first, axis=-1)
        ok &= np.all(~active | same, axis=-1)
    return ok


def fifo_applies(fleet: Fleet, jitter=None) -> bool:
    """True where the FIFO path is exact for every fleet of the batch (`fifo_eligible`)."""
    return bool(np.all(fifo_eligible(fleet, jitter)))


# The batched paths, in the order `simulate` runs them.
PATHS = ("fifo", "clock", "general")


def clock_eligible(fleet: Fleet) -> np.ndarray:
    """Per fleet (batch shape), whether the clock path is exact for it: τ = 0 and α = 0
    (then every writer drains at one rate and every computing job works at one rate)."""
    return (np.asarray(fleet.delay) == 0) & (np.asarray(fleet.async_fraction) == 0) & np.ones(fleet.batch_shape, bool)


def choose_paths(fleet: Fleet, jitter, method: str) -> np.ndarray:
    """Per fleet (batch shape), the path `simulate` runs it on: "fifo", "clock" or "general".

    ``method="auto"``: fleets with fewer than `FIFO_MIN_JOBS` active jobs run on the
    general engine (its O(N) step is cheapest there); larger ones on the FIFO path where
    `fifo_eligible`, else on the clock path where `clock_eligible`, else on the general
    engine. An explicit method is applied to every fleet, or raises `ValueError`
    where it is not exact.
    """
    batch = fleet.batch_shape
    if method == "general":
        return np.full(batch, "general", dtype=object)
    fifo = fifo_eligible(fleet, jitter)
    clock = clock_eligible(fleet)
    if method == "fifo":
        if not fifo.all():
            raise ValueError(
                "method='fifo' needs identical deterministic fleets (all active jobs of a fleet with "
                "the same compute and write, no jitter, delay 0, async_fraction 0); use 'clock', 'general' or 'auto'"
            )
        return np.full(batch, "fifo", dtype=object)
    if method == "clock":
        if not clock.all():
            raise ValueError("method='clock' needs delay 0 and async_fraction 0 in every fleet; use 'general' or 'auto'")
        return np.full(batch, "clock", dtype=object)
    n_active = np.asarray(fleet.active).sum(axis=-1)
    big = n_active >= FIFO_MIN_JOBS
    path = np.where(clock & big, "clock", "general").astype(object)
    path[fifo & big] = "fifo"
    return path


def _two_sum(a, b):
    """a + b as an unevaluated sum (s, e) with s = fl(a + b), exactly (Knuth)."""
    s = a + b
    b_virtual = s - a
    e = (a - (s - b_virtual)) + (b - b_virtual)
    return s, e


def _dw_add(hi, lo, y):
    """Double-word ``hi + lo`` plus a plain number y, renormalised: (hi, lo)."""
    s, e = _two_sum(hi, y)
    return _two_sum(s, e + lo)


def _fleet_constants(params: _Params, clock: bool):
    """Per fleet (batched), computed once per run: the phase works and the flat
    throughput table f (B (N + 1),).

    ``works``: FIFO: (B, 2) the common (T, d); clock: (B N, 2) every job's (T_i, d_i).
    """
    if clock:
        works = jnp.stack([params.compute, params.write], axis=-1).reshape(-1, 2)
    else:
        first = jnp.argmax(params.active, axis=1)[:, None]
        works = jnp.concatenate(
            [jnp.take_along_axis(params.compute, first, axis=1), jnp.take_along_axis(params.write, first, axis=1)],
            axis=1,
        )
    return works, params.throughput.reshape(-1), params.cap


def _ranks(group, remaining):
    """Per row, the rank of each job in the order (group, remaining, job index): the
    inverse of a stable lexsort, for the ring setup. ``group`` is 0 (writing), 1
    (computing) or 2 (padding, whose order does not matter) and ``remaining`` >= 0.

    Small N: O(N²) comparisons. Larger N: one stable argsort of a single unsigned key,
    the float's bit pattern (monotone for non-negative floats) with the top bit set for
    group 1 and all ones for group 2: XLA:CPU sorts one key much faster than two
    (B = 1e4, N = 1024: 1.4 s against 2.1 s for `jnp.lexsort`)."""
    n_fleets, n_jobs = remaining.shape
    remaining = jnp.where(group == 2, 0, remaining)
    if n_jobs <= 64:
        a_major, b_major = group[:, :, None], group[:, None, :]
        a_minor, b_minor = remaining[:, :, None], remaining[:, None, :]
        index = jnp.arange(n_jobs)
        earlier = index[None, :] < index[:, None]
        before = (b_major < a_major) | ((b_major == a_major) & ((b_minor < a_minor) | ((b_minor == a_minor) & earlier)))
        return jnp.sum(before, axis=2)
    unsigned = {4: jnp.uint32, 8: jnp.uint64}[remaining.dtype.itemsize]
    bits = jax.lax.bitcast_convert_type(remaining + 0.0, unsigned)  # + 0.0: no -0.0
    top = jnp.asarray(1 << (8 * remaining.dtype.itemsize - 1), unsigned)
    key = jnp.where(group == 0, bits, jnp.where(group == 1, bits | top, jnp.asarray(jnp.iinfo(unsigned).max, unsigned)))
    order = jnp.argsort(key, axis=1, stable=True)
    fleet = jnp.arange(n_fleets)[:, None]
    return jnp.zeros_like(order).at[fleet, order].set(jnp.arange(n_jobs)[None, :], unique_indices=True)


def _init_carry(params: _Params, state_phase, state_remaining, n_fires: int, clock: bool = False, entry: bool = False) -> FifoCarry:
    """The batched carry (leading axis B) at t = 0.

    FIFO: slots are ring positions. Ring order: writers by remaining volume, then
    computing jobs by remaining work, then padding; each queue is then sorted by target
    (entry order), as the FIFO needs. Clock: slots are jobs (the ring is the identity)
    and inactive slots get an infinite target. ``n_fires`` is the trace's length K (0:
    no trace); ``entry`` adds a slot column with the time the job entered its phase (for
    the jobs observer: a write's duration when it ends).
    """
    dtype = params.compute.dtype
    n_fleets, n_jobs = params.compute.shape
    writing = params.active & (state_phase == 1)
    remaining = state_remaining.astype(dtype)
    if clock:
        position = jnp.broadcast_to(jnp.arange(n_jobs, dtype=jnp.int32), (n_fleets, n_jobs))
        target = jnp.where(params.active, remaining, jnp.inf)
    else:
        group = jnp.where(params.active, jnp.where(writing, 0, 1), 2)
        position = _ranks(group, remaining).astype(jnp.int32)
        fleet = jnp.arange(n_fleets)[:, None]
        target = jnp.zeros_like(remaining).at[fleet, position].set(remaining, unique_indices=True)
        writing = jnp.zeros_like(writing).at[fleet, position].set(writing, unique_indices=True)
    zeros = jnp.zeros_like(target)
    columns = [target, zeros, zeros, writing.astype(dtype)] + ([zeros] if entry else [])
    slots = jnp.stack(columns, axis=-1)
    zero = jnp.zeros(n_fleets, dtype)
    int_zero = jnp.zeros(n_fleets, jnp.int32)
    return FifoCarry(
        time=zero,
        write_hi=zero,
        write_lo=zero,
        compute_hi=zero,
        compute_lo=zero,
        position=position,
        slots=slots.reshape(n_fleets * n_jobs, len(columns)),
        trace=jnp.full(n_fleets * n_jobs * n_fires * 2, jnp.nan, dtype),
        write_head=int_zero,
        n_writers=jnp.sum(writing, axis=1).astype(jnp.int32),
        n_active=jnp.sum(params.active, axis=1).astype(jnp.int32),
        n_finished=int_zero,
        n_events=int_zero,
        status=int_zero,
        halted=jnp.zeros(n_fleets, bool),
        stall=int_zero,
    )


def _index_dtype(size: int):
    """Flat indices into an array of ``size`` elements: int32 where they fit."""
    if size < np.iinfo(np.int32).max:
        return jnp.int32
    if not jax.config.jax_enable_x64:
        raise ValueError(
            f"the fast path's trace buffer has {size} elements, more than int32 indexes; "
            "enable jax_enable_x64, or simulate fewer fleets, jobs or firings per call"
        )
    return jnp.int64


def _running(carry: FifoCarry):
    return (carry.n_finished < carry.n_active) & (carry.status == STATUS_OK) & ~carry.halted


def _oldest(slots, n_jobs: int):
    """Clock path: per fleet, the writer and the computing job with the smallest target
    (ties: the lowest job index), in one variadic row reduction. (On XLA:CPU this beats
    `jnp.argmin`, a min-then-locate pair, and a tournament of halvings.)"""
    rows = slots.reshape(-1, n_jobs, slots.shape[-1])
    inf = jnp.asarray(jnp.inf, slots.dtype)
    writing = rows[..., 3] > 0
    index = jnp.broadcast_to(jnp.arange(n_jobs, dtype=jnp.int32), rows.shape[:2])

    def smaller(a, b):  # (value, index) pairs: min value, then min index; associative
        take_b = (b[0] < a[0]) | ((b[0] == a[0]) & (b[1] < a[1]))
        return jnp.where(take_b, b[0], a[0]), jnp.where(take_b, b[1], a[1])

    def combine(a, b):
        return smaller(a[:2], b[:2]) + smaller(a[2:], b[2:])

    keys = (jnp.where(writing, rows[..., 0], inf), index, jnp.where(writing, inf, rows[..., 0]), index)
    _, write_pos, _, compute_pos = jax.lax.reduce(keys, (inf, jnp.int32(n_jobs), inf, jnp.int32(n_jobs)), combine, (1,))
    return write_pos, compute_pos


def _switch(constants, params, carry: FifoCarry, running, event_limit, n_fires: int, clock: bool, use_jitter: bool,
            horizon=None, job_at=None):
    """Switches one job in each running fleet (advancing time first if no job is due now).

    Lanes that are not running take dt = 0, switch nobody and write nothing (their
    scatter indices are out of range). With a ``horizon`` (B,) a fleet whose next event
    lies beyond it advances to it exactly and switches nobody. ``job_at`` (B, N) maps a
    slot to its job (for the observers' view).

    Returns ``(carry, view)``, the `EventView` of this iteration (one column: M = 1).
    """
    works, throughput, cap = constants
    dtype = carry.time.dtype
    n_fleets, n_jobs = carry.position.shape
    inf = jnp.asarray(jnp.inf, dtype)
    eps = jnp.finfo(dtype).eps * engine._SNAP_ULPS
    index = _index_dtype(carry.trace.shape[0])
    fleet = jnp.arange(n_fleets, dtype=index)

    n_writers = carry.n_writers
    # The same expressions as `engine._rates`, so rates agree bit for bit. (A table of
    # rates precomputed over n would divide by constants, which XLA may rewrite.)
    n_computing = (carry.n_active - n_writers).astype(dtype)
    write_rate = throughput[fleet * (n_jobs + 1) + n_writers] / jnp.maximum(n_writers, 1).astype(dtype)
    speed = jnp.where(n_computing > cap, cap / jnp.maximum(n_computing, 1), 1.0).astype(dtype)
    n_active = jnp.maximum(carry.n_active, 1)  # safe wrap on finished (all-padding) lanes
    if clock:
        write_pos, compute_pos = _oldest(carry.slots, n_jobs)
        write_pos = jnp.minimum(write_pos, n_jobs - 1)  # no writer / no computing job: unused
        compute_pos = jnp.minimum(compute_pos, n_jobs - 1)
        head_work = works[jnp.concatenate([fleet * n_jobs + compute_pos, fleet * n_jobs + write_pos])]
        compute, write = head_work[:n_fleets, 0], head_work[n_fleets:, 1]  # the heads' own works
        # A writer that ends computes next its own T; a job that fires writes its own d.
        next_compute, next_write = head_work[n_fleets:, 0], head_work[:n_fleets, 1]
    else:
        write_pos = carry.write_head
        compute_pos = write_pos + n_writers
        compute_pos = jnp.where(compute_pos >= n_active, compute_pos - n_active, compute_pos)
        compute, write = works[:, 0], works[:, 1]
        next_compute, next_write = compute, write
    heads = carry.slots[jnp.concatenate([fleet * n_jobs + write_pos, fleet * n_jobs + compute_pos])]
    write_head_row, compute_head_row = heads[:n_fleets], heads[n_fleets:]
    write_left = (write_head_row[:, 0] - carry.write_hi) + (write_head_row[:, 1] - carry.write_lo)
    compute_left = (compute_head_row[:, 0] - carry.compute_hi) + (compute_head_row[:, 1] - carry.compute_lo)

    # Due now, by the general engine's snapping rule (`engine._switch`): within
    # `engine._SNAP_ULPS` ulps of the clock, or with that many ulps of the phase's work left.
    has_writer = n_writers > 0
    has_computing = n_writers < carry.n_active
    write_dt = jnp.where(has_writer, write_left / write_rate, inf)
    compute_dt = jnp.where(has_computing, compute_left / speed, inf)
    clock_ulps = eps * carry.time
    due_write = has_writer & ((write_dt <= clock_ulps) | (write_left <= eps * write))
    due_compute = has_computing & ((compute_dt <= clock_ulps) | (compute_left <= eps * compute))
    due = due_write | due_compute

    dt = jnp.minimum(write_dt, compute_dt)
    if horizon is not None:  # no event before the horizon: a pure time advance to it
        dt = jnp.minimum(dt, jnp.maximum(horizon - carry.time, 0))
    finite = jnp.isfinite(dt)
    waiting = running & ~due & finite
    # Past the event budget a fleet only finishes the current instant (due jobs), then halts.
    advance = waiting & (carry.n_events < event_limit)
    halted = carry.halted | (waiting & ~advance)
    dt = jnp.where(advance, dt, 0)
    # The head that sets dt is exactly at its target: snap that clock onto it, so jobs that
    # entered the phase together (equal targets) read exactly zero left and follow at once.
    write_set = advance & (write_dt == dt)
    compute_set = advance & (compute_dt == dt)
    write_hi, write_lo = _dw_add(carry.write_hi, carry.write_lo, write_rate * dt)
    write_hi = jnp.where(write_set, write_head_row[:, 0], write_hi)
    write_lo = jnp.where(write_set, write_head_row[:, 1], write_lo)
    compute_hi, compute_lo = _dw_add(carry.compute_hi, carry.compute_lo, speed * dt)
    compute_hi = jnp.where(compute_set, compute_head_row[:, 0], compute_hi)
    compute_lo = jnp.where(compute_set, compute_head_row[:, 1], compute_lo)
    time = carry.time + dt
    stall = jnp.where(advance | ~running, 0, carry.stall + 1)

    # Who switches: a due head (writers first), else the head that set dt.
    ends = running & jnp.where(due, due_write, write_set)
    fires = running & ~ends & jnp.where(due, due_compute, compute_set)
    pos = jnp.where(ends, write_pos, compute_pos)
    count = jnp.where(ends, write_head_row[:, 2], compute_head_row[:, 2]).astype(jnp.int32)

    # The end of the write started by firing number `count` (not an initial write) goes to
    # cycle count − 1; a firing to cycle `count`. Each fleet writes at most one time.
    size = carry.trace.shape[0]
    trace_len = size // max(1, 2 * n_fleets * n_jobs)  # K of the trace (0: none)
    record_end = ends & (count >= 1) & (count <= trace_len)
    record_fire = fires & (count < trace_len)
    cycle = jnp.where(ends, count - 1, count).astype(index)
    cell = ((fleet * n_jobs + pos) * trace_len + cycle) * 2 + ends.astype(index)
    trace = carry.trace.at[jnp.where(record_end | record_fire, cell, size)].set(time, mode="drop", unique_indices=True)

    # A writer that ends starts computing (target: compute clock + its work), a job that
    # fires starts writing (write clock + d). FIFO: both are already at that ring spot.
    if clock and use_jitter:  # compute phase number `count` of that job (engine.jitter_work)
        keys = params.job_keys[jnp.arange(n_fleets), write_pos]
        next_compute = jax.vmap(engine.jitter_work)(keys, next_compute, params.jitter, count)
    target_hi, target_lo = _dw_add(
        jnp.where(ends, compute_hi, write_hi), jnp.where(ends, compute_lo, write_lo), jnp.where(ends, next_compute, next_write)
    )
    columns = [target_hi, target_lo, (count + fires.astype(jnp.int32)).astype(dtype), fires.astype(dtype)]
    entry = carry.slots.shape[1] > 4
    if entry:  # the jobs observer: when the job entered its new phase
        columns.append(time)
    row = jnp.stack(columns, axis=-1)
    switched = ends | fires
    slots = carry.slots.at[jnp.where(switched, fleet * n_jobs + pos, n_fleets * n_jobs)].set(
        row, mode="drop", unique_indices=True
    )
    write_head = carry.write_head
    if not clock:
        write_head = jnp.where(ends, jnp.where(write_pos + 1 >= n_active, 0, write_pos + 1), write_pos)
    n_writers_after = n_writers - ends.astype(jnp.int32) + fires.astype(jnp.int32)
    last_end = ends & (count == n_fires)
    view = EventView(
        time=time,
        dt=dt,
        advanced=advance,
        running=running,
        n_writers=n_writers,
        n_writers_after=n_writers_after,
        fired=fires[:, None],
        ended=ends[:, None],
        recorded_end=(ends & (count >= 1))[:, None],
        job=(pos if job_at is None else job_at[fleet, pos]).astype(jnp.int32)[:, None],
        cycle=count[:, None],
        write_duration=(time - write_head_row[:, 4])[:, None] if entry else None,
        draining=None,
        waiting=None,
        first_fires=(fires & (count == 0)).astype(jnp.int32),
        last_ends=last_end.astype(jnp.int32),
    )
    return FifoCarry(
        time=time,
        write_hi=write_hi,
        write_lo=write_lo,
        compute_hi=compute_hi,
        compute_lo=compute_lo,
        position=carry.position,
        slots=slots,
        trace=trace,
        write_head=write_head,
        n_writers=n_writers_after,
        n_active=carry.n_active,
        n_finished=carry.n_finished + last_end.astype(jnp.int32),
        n_events=carry.n_events + advance.astype(jnp.int32),
        status=carry.status
        | jnp.where(running & ~due & ~finite, STATUS_NONFINITE, 0).astype(jnp.int32)
        | jnp.where(running & (stall > 2 * carry.n_active), STATUS_STALLED, 0).astype(jnp.int32),
        halted=halted,
        stall=stall,
    ), view


def _advance(
    params: _Params,
    carry: FifoCarry,
    event_limit,
    n_fires: int,
    clock: bool = False,
    use_jitter: bool = False,
    horizon=None,
    save: SaveAt = SaveAt(),
    until: bool = False,
    stop_fires=None,
    gap_fires=None,
) -> LoopResult:
    """Switches jobs of a batch of fleets (leading axis B) until each is done or stopped
    (with ``until``: at its horizon), updating the observers once per iteration; returns
    the final state in job order."""
    constants = _fleet_constants(params, clock)
    n_fleets, n_jobs = carry.position.shape
    fleet = jnp.arange(n_fleets)[:, None]
    observers = _observe.observers_for(save, n_jobs, stop_fires, gap_fires)
    # Slot -> job: the clock path's slots are jobs; the FIFO's are ring positions.
    job_at = None if clock or not save.jobs else jnp.zeros_like(carry.position).at[fleet, carry.position].set(
        jnp.arange(n_jobs, dtype=jnp.int32)[None, :], unique_indices=True
    )
    obs = _observe.init(save, n_jobs, stop_fires, gap_fires, n_fleets, carry.time.dtype)
    n_active = carry.n_active

    def still(c):
        if until:
            return (c.time < horizon) & (c.status == STATUS_OK) & ~c.halted
        return _running(c)

    def cond(state):
        return jnp.any(state[-1])

    def body(state):
        carry, obs, running = state
        carry, view = _switch(constants, params, carry, running, event_limit, n_fires, clock, use_jitter,
                              horizon if until else None, job_at)
        obs = tuple(o.update(state_o, view, n_active) for o, state_o in zip(observers, obs))
        return carry, obs, still(carry)

    carry, obs, _ = jax.lax.while_loop(cond, body, (carry, obs, still(carry)))
    trace_len = carry.trace.shape[0] // max(1, 2 * n_fleets * n_jobs)
    trace = carry.trace.reshape(n_fleets, n_jobs, trace_len, 2)
    slots = carry.slots.reshape(n_fleets, n_jobs, -1)
    if not clock:  # ring position -> job: job j's row is the one at its ring position
        trace = jnp.take_along_axis(trace, carry.position[:, :, None, None], axis=1)
        slots = jnp.take_along_axis(slots, carry.position[:, :, None], axis=1)
    writing = slots[..., 3] > 0
    open_write = jnp.where(writing, carry.time[:, None] - slots[..., 4], 0) if slots.shape[-1] > 4 else jnp.zeros(writing.shape, carry.time.dtype)
    done = carry.time >= horizon if until else carry.n_finished >= carry.n_active
    return LoopResult(
        time=carry.time,
        fire_times=trace[..., 0],
        end_times=trace[..., 1],
        done=done,
        n_events=carry.n_events,
        status=carry.status,
        observers=obs,
        final=FinalView(
            time=carry.time,
            open_write=open_write,
            async_fraction=params.async_fraction,
            active=params.active,
            horizon=horizon if until else None,
            n_writers=carry.n_writers,
        ),
    )


_STATIC = ("n_fires", "clock", "use_jitter", "save", "until", "stop_fires", "gap_fires", "trace_len")


def init_and_advance(part, event_limit, *, trace_len: int, **static) -> LoopResult:
    """`_init_carry` + `_advance` of one block of fleets ``part = (params, phase,
    remaining, horizon)``; also what `sharding.sharded_loop` runs per device."""
    params, phase, remaining, horizon = part
    carry = _init_carry(params, phase, remaining, trace_len, static["clock"], entry=static["save"].jobs)
    return _advance(params, carry, event_limit, horizon=horizon, **static)


# On a CPU the fast paths run a big batch in blocks of fleets, one after another, sized so
# that a block's trace and slots (N (2K + 4) floats per fleet) fill about this many bytes
# and stay in the last-level cache, but never below CPU_MIN_BLOCK fleets (each loop
# iteration's fixed cost is then amortised). B = 1e4, N = 32, K = 11 on 2 cores: blocks of
# 2,500 run 15-18% faster (FIFO) and 8-10% faster (clock) than the whole batch at once,
# blocks of 1,000 no faster. Accelerators run the whole batch at once.
CPU_BLOCK_BYTES = 16 * 2**20
CPU_MIN_BLOCK = 1024


def _block_size(params: _Params, trace_len: int) -> int:
    n_fleets, n_jobs = params.compute.shape
    platforms = {device.platform for device in params.compute.devices()}
    if platforms != {"cpu"}:
        return n_fleets
    per_fleet = n_jobs * (2 * trace_len + 5) * params.compute.dtype.itemsize
    return min(n_fleets, max(CPU_MIN_BLOCK, CPU_BLOCK_BYTES // per_fleet))


def _advance_blocks(params: _Params, phase, remaining, horizon, event_limit, *, n_blocks: int, **static) -> LoopResult:
    """`init_and_advance` over ``n_blocks`` equal blocks of fleets, one after another
    (`jax.lax.map`), in one compiled program."""

    def run(part):
        return init_and_advance(part, event_limit, **static)

    # Explicit sizes, not -1: a trace of length K = 0 has zero-size arrays.
    blocks = jax.tree_util.tree_map(
        lambda x: x.reshape((n_blocks, x.shape[0] // n_blocks) + x.shape[1:]), (params, phase, remaining, horizon)
    )
    result = jax.lax.map(run, blocks)
    return jax.tree_util.tree_map(lambda x: x.reshape((x.shape[0] * x.shape[1],) + x.shape[2:]), result)


_advance_blocks_jit = jax.jit(_advance_blocks, static_argnames=("n_blocks",) + _STATIC)


def run_blocks(params: _Params, phase, remaining, horizon, event_limit, *, progress=None, **static) -> LoopResult:
    """Runs flattened fleets (leading axis B) on the FIFO or clock path on one device, in
    blocks of fleets (`_block_size`: on a CPU) so each block's state stays in cache.

    The batch is padded with inert fleets (copies of fleet 0 with no active job) to whole
    blocks. Without a progress bar all blocks run in one compiled program; with one, one
    call per group of blocks, so the bar moves. Returns the `LoopResult` of all fleets.
    """
    n_fleets = params.compute.shape[0]
    block = _block_size(params, static["trace_len"])
    n_blocks = -(-n_fleets // block)
    params, phase, remaining, horizon = engine._pad_inert(params, phase, remaining, block, horizon)
    if progress is None:
        work = static["trace_len"] or (static["gap_fires"] or 0)
        progress = n_blocks > 1 and n_fleets * params.compute.shape[1] * work >= 50_000_000
    if not progress:
        result = _advance_blocks_jit(params, phase, remaining, horizon, event_limit, n_blocks=n_blocks, **static)
        return jax.tree_util.tree_map(lambda x: x[:n_fleets], result)
    # About 20 updates: each call runs a group of blocks (one compile for every full group).
    per_call = max(1, n_blocks // 20)
    pieces = []
    with progress_bar(total=n_fleets, desc=f"ckpt_jax.simulate ({'clock' if static['clock'] else 'fifo'})", unit="fleet") as bar:
        for first in range(0, n_blocks, per_call):
            count = min(per_call, n_blocks - first)
            part = jax.tree_util.tree_map(
                lambda x: x[first * block : (first + count) * block],  # noqa: B023
                (params, phase, remaining, horizon),
            )
            pieces.append(_advance_blocks_jit(*part, event_limit, n_blocks=count, **static))
            bar.update(min(n_fleets, (first + count) * block) - bar.n)
    return jax.tree_util.tree_map(lambda *leaves: jnp.concatenate(leaves)[:n_fleets], *pieces)
