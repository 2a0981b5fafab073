"""The exact event engine: where a firing happens.

Rates are piecewise constant between events (docs/model.md §1), so the engine steps from one
event to the next exactly: the next event is the smallest time-to-empty over all jobs'
current phases (and pending controller updates); everything advances linearly to it, and
*every* job that empties at that instant switches in the same step.

A batch of B fleets is advanced by one masked `jax.lax.while_loop`: the body steps every
fleet that is still running (a `vmap` of the single-fleet step) and masks the rest, so a
finished fleet costs a few selects per iteration and its trace buffers are never touched.

Per-job state is kept general enough for asynchronous checkpoints (docs/model.md §1): a job has
``write_left`` (its background drain, while ``draining``) and ``compute_left`` (work of the
current cycle). With α = 0 a draining job computes nothing, which is the blocking model.
"""

from __future__ import annotations

import functools
import math
from typing import NamedTuple, Optional

import jax
import jax.numpy as jnp
import numpy as np

from . import _observe
from ._observe import EventView, FinalView, JobStats, SaveAt, WriterStats, observers_for
from ._status import Status, describe_status, flag
from ._validate import check_dtype, check_fleet_offset, check_int, check_key, check_memory, real_array, value_range
from .model import Fleet, State, check_state

__all__ = [
    "Trace",
    "simulate",
    "jitter_work",
    "STATUS_OK",
    "STATUS_MAX_EVENTS",
    "STATUS_NONFINITE",
    "STATUS_QUEUE_OVERFLOW",
    "STATUS_STALLED",
    "describe_status",
    "time_bound",
]

# Status bit flags (jax-md style): OR-ed together, 0 means a clean completion. All bits
# and their messages live in one registry, `ckpt_jax._status`.
STATUS_OK = int(Status.OK)
STATUS_MAX_EVENTS = int(Status.MAX_EVENTS)  # the event budget ran out before every job fired K times
STATUS_NONFINITE = int(Status.NONFINITE)  # a non-finite time (e.g. times overflowed)
STATUS_QUEUE_OVERFLOW = int(Status.QUEUE_OVERFLOW)  # the delayed controller's queue was full
STATUS_STALLED = int(Status.STALLED)  # fast paths: time stopped advancing

# Jobs due within this many ulps of the clock, or left with this many ulps of their phase's
# full work, switch in the same step as the event: simultaneous to working precision.
# Without it, two jobs that should empty together can leave a 1-ulp remainder and take a
# spurious tiny extra step (docs/model.md §1: simultaneous events switch together).
_SNAP_ULPS = 8


class Trace(NamedTuple):
    """What `simulate` returns. Leading axes (*B) are the fleet's batch shape.

    Attributes:
      fire_times: (*B, N, K) time of each job's k-th firing (start of its k-th write);
        NaN for inactive (padding) slots and where the run stopped early.
      end_times: (*B, N, K) end of the write started by that firing.
      ok: (*B,) True where the run completed (every active job fired and finished K writes).
      status: (*B,) int32 bit flags (`STATUS_*`); 0 where ``ok``.
      n_events: (*B,) number of event instants stepped (simultaneous switches count once).
      time: (*B,) simulated time at which the fleet stopped.
      writers, gaps, jobs: what `SaveAt` asked for (`WriterStats`, (*B, K) smallest gap per
        cycle, `JobStats`), else None; ``fire_times``/``end_times`` are None with
        ``SaveAt(trace=False)``.
    """

    fire_times: Optional[jax.Array]
    end_times: Optional[jax.Array]
    ok: jax.Array
    status: jax.Array
    n_events: jax.Array
    time: jax.Array
    writers: Optional[WriterStats] = None
    gaps: Optional[jax.Array] = None
    jobs: Optional[JobStats] = None


class LoopResult(NamedTuple):
    """What every loop hands to `_flat_trace` (flattened fleets, job order)."""

    time: jax.Array
    fire_times: jax.Array  # (B, N, K) or (B, N, 0) without a trace
    end_times: jax.Array
    done: jax.Array  # (B,) every job finished K writes, or the horizon was reached
    n_events: jax.Array
    status: jax.Array
    observers: tuple  # observer states after the loop
    final: FinalView


class _Params(NamedTuple):
    """One fleet's parameters (leading batch axis added by the caller)."""

    compute: jax.Array  # (N,)
    write: jax.Array  # (N,)
    cap: jax.Array  # ()
    throughput: jax.Array  # (N + 1,)
    delay: jax.Array  # ()
    async_fraction: jax.Array  # ()
    active: jax.Array  # (N,) bool
    jitter: jax.Array  # () compute-work standard deviation σ
    job_keys: jax.Array  # (N,) PRNG keys, one stream per job (used only with jitter)


class Carry(NamedTuple):
    """The documented loop carry of one fleet.

    Attributes:
      time: current time.
      draining: (N,) bool, the job's checkpoint write is in progress (it counts as a writer).
      waiting: (N,) bool, compute of the next cycle is done but the previous write still
        drains (asynchronous checkpoints only); the job does nothing until the drain ends.
      write_left: (N,) volume left to drain (meaningful where ``draining``).
      compute_left: (N,) work left in the current compute cycle.
      fire_count: (N,) int32 firings since t = 0.
      end_count: (N,) int32 recorded write ends (writes started by a firing after t = 0).
      fire_times, end_times: (N, K) trace buffers, NaN until written.
      applied_computing: computing count the (delayed) controller currently acts on.
      queue_time, queue_count: (Q,) ring buffer of pending controller updates.
      queue_head, queue_size: ring-buffer cursor and occupancy.
      n_events: int32 events stepped.
      status: int32 bit flags (`STATUS_*`).
    """

    time: jax.Array
    draining: jax.Array
    waiting: jax.Array
    write_left: jax.Array
    compute_left: jax.Array
    fire_count: jax.Array
    end_count: jax.Array
    fire_times: jax.Array
    end_times: jax.Array
    applied_computing: jax.Array
    queue_time: jax.Array
    queue_count: jax.Array
    queue_head: jax.Array
    queue_size: jax.Array
    n_events: jax.Array
    status: jax.Array


def jitter_work(job_key: jax.Array, compute: jax.Array, jitter: jax.Array, cycle) -> jax.Array:
    """Compute work of one job's compute phase number ``cycle`` under jitter σ.

    The work is ``T + σ ξ`` with ξ ~ N(0, 1) truncated to keep the work positive
    (docs/model.md §1). The draw depends only on (job key, cycle), never on event order, so
    the same key gives the same trace on any batch layout. Cycle 0 is the compute phase
    that follows an initial write; cycle k ≥ 1 follows the job's k-th firing.
    """
    safe_sigma = jnp.where(jitter > 0, jitter, 1.0)
    lower = -compute / safe_sigma
    xi = jax.random.truncated_normal(jax.random.fold_in(job_key, cycle), lower, jnp.inf, (), compute.dtype)
    work = compute + jitter * xi
    tiny = compute * jnp.finfo(compute.dtype).eps
    return jnp.where(jitter > 0, jnp.maximum(work, tiny), compute)


def _computing_mask(params: _Params, draining, waiting, use_async: bool = True):
    """Jobs that draw compute power (docs/model.md §1: a draining job counts when α > 0).

    ``use_async=False`` is a static promise that α = 0 in every fleet: then no job ever
    waits and a draining job never computes, and the simpler expressions give the same
    bits with fewer passes over the (B, N) arrays.
    """
    if not use_async:
        return params.active & ~draining
    return params.active & ~waiting & (~draining | (params.async_fraction > 0))


def _init_carry(params: _Params, state_phase, state_remaining, n_fires: int, queue_size: int, use_jitter: bool) -> Carry:
    dtype = params.compute.dtype
    n_jobs = params.compute.shape[0]
    draining = params.active & (state_phase == 1)
    if use_jitter:
        first_work = jax.vmap(jitter_work, in_axes=(0, 0, None, None))(
            params.job_keys, params.compute, params.jitter, 0
        )
    else:
        first_work = params.compute
    compute_left = jnp.where(draining, first_work, state_remaining)
    waiting = jnp.zeros(n_jobs, bool)
    n_computing = jnp.sum(_computing_mask(params, draining, waiting)).astype(dtype)
    nan_trace = jnp.full((n_jobs, n_fires), jnp.nan, dtype)
    return Carry(
        time=jnp.zeros((), dtype),
        draining=draining,
        waiting=waiting,
        write_left=jnp.where(draining, state_remaining, 0).astype(dtype),
        compute_left=compute_left.astype(dtype),
        fire_count=jnp.zeros(n_jobs, jnp.int32),
        end_count=jnp.zeros(n_jobs, jnp.int32),
        fire_times=nan_trace,
        end_times=nan_trace,
        applied_computing=n_computing,
        queue_time=jnp.full((queue_size,), jnp.inf, dtype),
        queue_count=jnp.zeros((queue_size,), dtype),
        queue_head=jnp.zeros((), jnp.int32),
        queue_size=jnp.zeros((), jnp.int32),
        n_events=jnp.zeros((), jnp.int32),
        status=jnp.zeros((), jnp.int32),
    )


def _rates(params: _Params, carry: Carry, use_delay: bool, use_async: bool = True):
    """Piecewise-constant rates of every job between now and the next event."""
    dtype = params.compute.dtype
    writers = params.active & carry.draining
    n_writers = jnp.sum(writers)
    computing = _computing_mask(params, carry.draining, carry.waiting, use_async)
    n_computing = jnp.sum(computing).astype(dtype)
    if use_delay:
        # τ = 0 fleets bypass the queue, so they reproduce the base model bit for bit.
        n_computing = jnp.where(params.delay > 0, carry.applied_computing, n_computing)
    write_rate = params.throughput[n_writers] / jnp.maximum(n_writers, 1).astype(dtype)
    # The cap binds only where n_c > C; the safe denominator keeps unselected lanes finite.
    speed = jnp.where(n_computing > params.cap, params.cap / jnp.maximum(n_computing, 1), 1.0)
    if use_async:
        compute_rate = jnp.where(computing, jnp.where(carry.draining, params.async_fraction * speed, speed), 0)
    else:
        compute_rate = jnp.where(computing, speed, 0)
    return writers, write_rate, computing, compute_rate.astype(dtype)


def _done(carry: Carry, active, n_fires: int):
    return jnp.all(~active | (carry.end_count >= n_fires))


def _step(
    params: _Params,
    carry: Carry,
    running,
    n_fires: int,
    use_delay: bool,
    use_jitter: bool,
    horizon=None,
    use_async: bool = True,
) -> Carry:
    """Advances one fleet to its next event and switches every job that empties there.

    With a ``horizon`` the step stops there if no event comes first (a pure time advance,
    used to read the state at a fixed time).

    ``running`` is False for fleets already stopped: they still execute this body (a
    batched while_loop steps all lanes), so it must be safe there — no division by zero,
    no inf − inf — and it must write nothing: their carry is returned unchanged.
    """
    carry, fire_slot, end_slot, _, _ = _switch(params, carry, running, n_fires, use_delay, use_jitter, horizon, use_async)
    jobs = jnp.arange(params.compute.shape[0])
    return carry._replace(
        fire_times=carry.fire_times.at[jobs, fire_slot].set(carry.time, mode="drop"),
        end_times=carry.end_times.at[jobs, end_slot].set(carry.time, mode="drop"),
    )


def _switch(params: _Params, carry: Carry, running, n_fires: int, use_delay: bool, use_jitter: bool, horizon, use_async: bool):
    """`_step` without writing the trace buffers: returns (carry, fire_slot, end_slot,
    fires, ends), the last two (N,) masks of the jobs that fired / ended a write.

    ``fire_slot`` / ``end_slot`` (N,) give the trace column each job's switch at the new
    ``carry.time`` goes to; K (= n_fires) means "nothing to record". The batched loop
    records a whole batch with one flat scatter (`_record`).
    """
    dtype = params.compute.dtype
    inf = jnp.asarray(jnp.inf, dtype)
    writers, write_rate, computing, compute_rate = _rates(params, carry, use_delay, use_async)
    computes = compute_rate > 0

    write_dt = jnp.where(writers, carry.write_left / write_rate, inf)
    compute_dt = jnp.where(computes, carry.compute_left / jnp.where(computes, compute_rate, 1), inf)
    dt = jnp.minimum(jnp.min(write_dt), jnp.min(compute_dt))
    if use_delay:
        queue_dt = jnp.where(carry.queue_size > 0, carry.queue_time[carry.queue_head] - carry.time, inf)
        dt = jnp.minimum(dt, queue_dt)
    if horizon is not None:
        dt = jnp.minimum(dt, jnp.maximum(horizon - carry.time, 0))
    finite = jnp.isfinite(dt)
    dt = jnp.where(finite & running, dt, 0)
    time = carry.time + dt

    write_left = jnp.where(writers, carry.write_left - write_rate * dt, carry.write_left)
    compute_left = jnp.where(computes, carry.compute_left - compute_rate * dt, carry.compute_left)
    eps = jnp.finfo(dtype).eps * _SNAP_ULPS
    # Simultaneous to working precision: due within a few ulps of the clock, or left with
    # a few ulps of the phase's work. Both scales matter: a fleet mixing T = 0.25 with
    # d = 2.5 leaves remainders far above T's ulps but far below the clock's.
    clock = eps * (carry.time + dt)
    ends = writers & ((write_dt <= dt + clock) | (write_left <= eps * params.write))
    completes = computes & ((compute_dt <= dt + clock) | (compute_left <= eps * params.compute))
    ends = ends & running & finite
    completes = completes & running & finite

    # (1) drains that end: record the end of the write started by the latest firing.
    record_end = ends & (carry.fire_count >= 1) & (carry.fire_count <= n_fires)
    end_slot = jnp.where(record_end, carry.fire_count - 1, n_fires)  # n_fires = dropped
    end_count = carry.end_count + record_end.astype(jnp.int32)
    draining = carry.draining & ~ends
    # (2) compute completions fire, unless the previous write still drains (then wait);
    # (3) jobs that were waiting fire the instant their drain ends.
    if use_async:
        fires = (completes & ~draining) | (carry.waiting & ends)
        waiting = (carry.waiting | (completes & draining)) & ~fires
    else:  # α = 0: only computing (non-draining) jobs complete, and nobody waits
        fires = completes
        waiting = carry.waiting
    fire_slot = jnp.where(fires & (carry.fire_count < n_fires), carry.fire_count, n_fires)
    fire_count = carry.fire_count + fires.astype(jnp.int32)
    draining = draining | fires
    if use_jitter:
        next_work = jax.vmap(jitter_work, in_axes=(0, 0, None, 0))(
            params.job_keys, params.compute, params.jitter, fire_count
        )
    else:
        next_work = params.compute
    write_left = jnp.where(fires, params.write, jnp.where(ends, 0, write_left))
    compute_left = jnp.where(fires, next_work, jnp.where(completes, 0, compute_left))

    applied = carry.applied_computing
    queue_time, queue_count = carry.queue_time, carry.queue_count
    queue_head, queue_size = carry.queue_head, carry.queue_size
    status = carry.status
    if use_delay:
        capacity = queue_time.shape[0]
        pop = running & (queue_size > 0) & (queue_dt <= dt + clock)
        applied = jnp.where(pop, queue_count[queue_head], applied)
        queue_head = jnp.where(pop, (queue_head + 1) % capacity, queue_head)
        queue_size = queue_size - pop.astype(jnp.int32)
        new_computing = jnp.sum(_computing_mask(params, draining, waiting, use_async)).astype(dtype)
        push = running & (params.delay > 0) & (new_computing != jnp.sum(computing).astype(dtype))
        overflow = push & (queue_size >= capacity)
        slot = (queue_head + queue_size) % capacity
        queue_time = jnp.where(push & ~overflow, queue_time.at[slot].set(time + params.delay), queue_time)
        queue_count = jnp.where(push & ~overflow, queue_count.at[slot].set(new_computing), queue_count)
        queue_size = queue_size + (push & ~overflow).astype(jnp.int32)
        status = status | flag(overflow, STATUS_QUEUE_OVERFLOW)
    status = status | flag(running & ~finite, STATUS_NONFINITE)

    def keep(new, old):
        return jnp.where(running, new, old)

    return Carry(
        time=time,
        draining=keep(draining, carry.draining),
        waiting=keep(waiting, carry.waiting),
        write_left=keep(write_left, carry.write_left),
        compute_left=keep(compute_left, carry.compute_left),
        fire_count=fire_count,
        end_count=end_count,
        fire_times=carry.fire_times,
        end_times=carry.end_times,
        applied_computing=applied,
        queue_time=queue_time,
        queue_count=queue_count,
        queue_head=queue_head,
        queue_size=queue_size,
        n_events=carry.n_events + running.astype(jnp.int32),
        status=status.astype(jnp.int32),
    ), fire_slot, end_slot, fires, ends


def _record(buffer, slot, time):
    """Batched trace write: ``buffer[b, i, slot[b, i]] = time[b]`` where ``slot < K``.

    One scatter on the flattened (B N K) buffer with flat indices (out-of-range for "no
    write", dropped): measurably cheaper than the batched 2-D scatter `vmap` produces.
    """
    n_fleets, n_jobs, n_fires = buffer.shape
    size = n_fleets * n_jobs * n_fires
    if size >= np.iinfo(np.int32).max:
        # Flat int32 indices would overflow: the batched 2-D scatter needs none that large.
        jobs = jnp.arange(n_jobs)
        put = lambda row, slot_row, t: row.at[jobs, slot_row].set(t, mode="drop")  # noqa: E731
        return jax.vmap(put)(buffer, slot, time)
    cell = jnp.arange(n_fleets * n_jobs, dtype=jnp.int32).reshape(n_fleets, n_jobs) * n_fires
    index = jnp.where(slot < n_fires, cell + slot, size)
    values = jnp.broadcast_to(time[:, None], slot.shape)
    flat = buffer.reshape(size).at[index.reshape(-1)].set(values.reshape(-1), mode="drop", unique_indices=True)
    return flat.reshape(buffer.shape)


def _running(params: _Params, carry: Carry, n_fires: int, event_limit, horizon=None):
    """Lanes still to step: not done (every job K writes, or the horizon reached), no
    flag, within the event budget."""
    if horizon is None:
        unfinished = ~jax.vmap(_done, in_axes=(0, 0, None))(carry, params.active, n_fires)
    else:
        unfinished = carry.time < horizon
    return unfinished & (carry.status == STATUS_OK) & (carry.n_events < event_limit)


def _event_view(params: _Params, before: Carry, after: Carry, running, fires, ends, n_fires: int) -> EventView:
    """The general engine's iteration as observers see it: one instant, all N jobs."""
    n_fleets, n_jobs = params.compute.shape
    writers = params.active & before.draining
    dt = after.time - before.time
    return EventView(
        time=after.time,
        dt=dt,
        advanced=dt > 0,
        running=running,
        n_writers=jnp.sum(writers, axis=1).astype(jnp.int32),
        n_writers_after=jnp.sum(params.active & after.draining, axis=1).astype(jnp.int32),
        fired=fires,
        ended=ends,
        recorded_end=ends & (before.fire_count >= 1),
        job=jnp.broadcast_to(jnp.arange(n_jobs, dtype=jnp.int32), (n_fleets, n_jobs)),
        cycle=before.fire_count,
        write_duration=None,
        draining=writers,
        waiting=params.active & before.waiting,
        first_fires=jnp.sum(fires & (before.fire_count == 0), axis=1).astype(jnp.int32),
        last_ends=jnp.sum(ends & (before.fire_count == n_fires), axis=1).astype(jnp.int32),
    )


def _advance(
    params: _Params,
    state,
    event_limit,
    n_fires: int,
    use_delay: bool,
    use_jitter: bool,
    use_async: bool = True,
    save: SaveAt = SaveAt(),
    until: bool = False,
    stop_fires: Optional[int] = None,
    gap_fires: Optional[int] = None,
):
    """Steps a batch of fleets (leading axis B) until each is done, failed or at event_limit.

    ``state`` is ``(carry, observer states, horizon)``; the observers (`ckpt_jax._observe`)
    are updated once per step, inside the loop. ``n_fires`` is the stop count K (or a huge
    count with ``until``); ``stop_fires`` the K the observers' window closes at (None: the
    horizon closes it).
    """
    switch = jax.vmap(_switch, in_axes=(0, 0, 0, None, None, None, 0 if until else None, None))
    observers = observers_for(save, params.compute.shape[1], stop_fires, gap_fires)
    n_active = jnp.sum(params.active, axis=1).astype(jnp.int32)

    def still(carry, horizon):
        return _running(params, carry, n_fires, event_limit, horizon if until else None)

    def cond(loop):
        return jnp.any(loop[-1])

    def body(loop):
        # The running mask is computed once per iteration and carried to the next test.
        carry, obs, horizon, running = loop
        new, fire_slot, end_slot, fires, ends = switch(
            params, carry, running, n_fires, use_delay, use_jitter, horizon if until else None, use_async
        )
        new = new._replace(
            fire_times=_record(new.fire_times, fire_slot, new.time),
            end_times=_record(new.end_times, end_slot, new.time),
        )
        if observers:
            view = _event_view(params, carry, new, running, fires, ends, n_fires)
            obs = tuple(o.update(state_o, view, n_active) for o, state_o in zip(observers, obs))
        return new, obs, horizon, still(new, horizon)

    carry, obs, horizon = state
    carry, obs, horizon, _ = jax.lax.while_loop(cond, body, (carry, obs, horizon, still(carry, horizon)))
    return carry, obs, horizon


_STATIC = ("n_fires", "use_delay", "use_jitter", "use_async", "save", "until", "stop_fires", "gap_fires")
_advance_jit = jax.jit(_advance, static_argnames=_STATIC, donate_argnums=(1,))


_check_int = check_int  # kept for the modules that import it from here


METHODS = ("auto", "general", "fifo", "clock")


def check_method(method) -> str:
    """``method`` if it is one of `METHODS`, else `ValueError`."""
    if method not in METHODS:
        raise ValueError(f"method must be one of {', '.join(map(repr, METHODS))}, got {method!r}")
    return method


def default_max_events(n_jobs: int, n_fires: int, fleet: Optional[Fleet] = None) -> int:
    """A generous event budget: two switches per job per cycle, plus slack for
    heterogeneous fleets whose fast jobs cycle more often than the slowest one."""
    ratio = 1.0
    if fleet is not None:
        period = np.asarray(fleet.compute, np.float64) + np.asarray(fleet.write, np.float64) / np.asarray(
            fleet.throughput[..., 1:2], np.float64
        )
        active = np.asarray(fleet.active)
        fastest = np.where(active, period, np.inf).min(axis=-1)
        slowest = np.where(active, period, 0).max(axis=-1)
        with np.errstate(all="ignore"):
            ratio = float(np.max(slowest / fastest))
        if not np.isfinite(ratio):  # validated fleets have finite periods; stay safe anyway
            ratio = 1e4
        if np.any(np.asarray(fleet.delay) > 0):
            ratio *= 2  # each change of the computing count schedules one controller update
    budget = 4 * n_jobs * (n_fires + 2) * min(ratio, 1e4) + 64
    return int(min(budget, 2**31 - 1))


def time_bound(fleet: Fleet, n_fires: int, jitter=None) -> np.ndarray:
    """An upper bound on the time at which each fleet completes ``n_fires`` cycles (*B,).

    Every cycle of job i takes at most its compute work at the slowest compute speed
    min(1, C/N) (or α of it while a write drains) plus its write at the slowest per-writer
    rate min_n f(n)/N; ``n_fires + 2`` cycles bound the run (jitter: T_i + 8σ per cycle).
    `simulate` refuses runs whose bound overflows the dtype instead of returning inf times.
    """
    compute = np.asarray(fleet.compute, np.float64)
    write = np.asarray(fleet.write, np.float64)
    active = np.asarray(fleet.active)
    n_jobs = fleet.n_jobs
    sigma = 0.0 if jitter is None else np.asarray(jitter, np.float64)[..., None]
    cap = np.asarray(fleet.cap, np.float64)[..., None]
    alpha = np.asarray(fleet.async_fraction, np.float64)[..., None]
    slowest_speed = np.minimum(1.0, cap / n_jobs) * np.where(alpha > 0, alpha, 1.0)
    slowest_rate = np.min(np.asarray(fleet.throughput, np.float64)[..., 1:], axis=-1, keepdims=True) / n_jobs
    with np.errstate(all="ignore"):
        cycle = (compute + 8 * sigma) / slowest_speed + write / slowest_rate
        cycle = cycle + np.asarray(fleet.delay, np.float64)[..., None]
        return (n_fires + 2) * np.max(np.where(active, cycle, 0.0), axis=-1)


def _batch_keys(key, batch_shape, n_jobs: int, fleet_offset: int):
    """Per-job PRNG keys, shape (B, N), derived from counters only (layout invariant).

    A scalar key is folded with each fleet's flat index (plus ``fleet_offset``, for
    chunked ensembles); a key array of the batch shape gives each fleet its own key.
    """
    n_fleets = int(np.prod(batch_shape, dtype=np.int64))
    key = jax.random.key(0) if key is None else check_key(key, batch_shape)
    if key.shape == ():
        return _fold_keys(key, jnp.uint32(fleet_offset), n_fleets, n_jobs)
    return _job_keys(key.reshape(n_fleets), n_jobs)


# Jitted so that deriving keys costs one dispatch, not a dozen (it dominated small runs).
@functools.partial(jax.jit, static_argnums=(1,))
def _job_keys(fleet_keys, n_jobs: int):
    jobs = jnp.arange(n_jobs, dtype=jnp.uint32)
    return jax.vmap(lambda k: jax.vmap(jax.random.fold_in, in_axes=(None, 0))(k, jobs))(fleet_keys)


@functools.partial(jax.jit, static_argnums=(2, 3))
def _fold_keys(key, fleet_offset, n_fleets: int, n_jobs: int):
    index = jnp.arange(n_fleets, dtype=jnp.uint32) + fleet_offset
    return _job_keys(jax.vmap(jax.random.fold_in, in_axes=(None, 0))(key, index), n_jobs)


def check_jitter(jitter, batch_shape, dtype) -> np.ndarray:
    """σ as a float64 array of the batch shape: finite, >= 0, and > 0 also after the cast
    to the fleet's dtype wherever it is > 0."""
    sigma = np.zeros(batch_shape) if jitter is None else real_array("jitter", jitter)
    try:
        sigma = np.broadcast_to(sigma, batch_shape)
    except ValueError:
        raise ValueError(f"jitter must be a scalar or have the batch shape {batch_shape}, got {np.shape(jitter)}") from None
    if not (np.isfinite(sigma) & (sigma >= 0)).all():
        raise ValueError(f"jitter must be finite and >= 0, got {float(sigma[~(np.isfinite(sigma) & (sigma >= 0))].ravel()[0])}")
    low, high = value_range(dtype)
    positive = sigma > 0
    if np.any(positive & ((sigma.astype(dtype) == 0) | (sigma > high))):
        raise ValueError(f"jitter must be 0 or lie in [{low:.3g}, {high:.3g}] in {np.dtype(dtype)}")
    return sigma


def flat_params(fleet: Fleet, jitter=None, key=None, fleet_offset: int = 0) -> _Params:
    """Flattens a validated fleet into per-fleet parameter arrays with one batch axis."""
    batch_shape = fleet.batch_shape
    n_jobs = fleet.n_jobs
    n_fleets = int(np.prod(batch_shape, dtype=np.int64))
    sigma = check_jitter(jitter, batch_shape, fleet.dtype)
    fleet_offset = check_fleet_offset(fleet_offset, n_fleets)
    flat = lambda x, tail: jnp.reshape(x, (n_fleets,) + tail)  # noqa: E731
    return _Params(
        compute=flat(fleet.compute, (n_jobs,)),
        write=flat(fleet.write, (n_jobs,)),
        cap=flat(fleet.cap, ()),
        throughput=flat(fleet.throughput, (n_jobs + 1,)),
        delay=flat(fleet.delay, ()),
        async_fraction=flat(fleet.async_fraction, ()),
        active=flat(fleet.active, (n_jobs,)),
        jitter=jnp.asarray(sigma.reshape(n_fleets), fleet.dtype),
        job_keys=_batch_keys(key, batch_shape, n_jobs, fleet_offset),
    )


def simulate(
    fleet: Fleet,
    state: State,
    n_fires: Optional[int],
    *,
    max_events: Optional[int] = None,
    jitter=None,
    key: Optional[jax.Array] = None,
    throw: bool = False,
    progress: Optional[bool] = None,
    queue_size: int = 64,
    fleet_offset: int = 0,
    method: str = "auto",
    devices=None,
    save: Optional[SaveAt] = None,
    until=None,
) -> Trace:
    """Simulates a batch of fleets exactly, event to event, until every job fired K times
    (or, with ``until``, up to a time horizon).

    Args:
      fleet: the `Fleet` (batch shape *B, N job slots).
      state: its initial `State` (from `initial_state`, `state_from_positions`, ...).
      n_fires: K >= 1, firings (and completed writes) to record per job.
      max_events: event budget per fleet; a fleet that exhausts it stops with
        ``ok = False`` and status `STATUS_MAX_EVENTS`. Default: `default_max_events`.
      jitter: compute-work standard deviation σ >= 0, scalar or (*B,) (docs/model.md §1).
      key: PRNG key for jitter: one key (folded with each fleet's flat index) or one per
        fleet (shape *B). Same key, same trace.
      throw: raise `RuntimeError` if any fleet did not complete.
      progress: show a tqdm progress bar (default: only for long runs; on one device:
        per chunk of events on the general path, per block of fleets on the FIFO and
        clock paths).
      queue_size: capacity of the delayed controller's pending-update queue.
      fleet_offset: added to the flat fleet index when folding a scalar key (for
        simulating one big ensemble in chunks with identical draws).
      method: ``"general"`` (this module's engine, O(N) per event, every variant);
        ``"fifo"`` (the O(1)-per-switch path of `ckpt_jax.fast`, only for identical
        deterministic fleets: all active jobs of each fleet share T and d, no jitter,
        τ = 0, α = 0); ``"clock"`` (`ckpt_jax.fast`'s virtual clocks with a per-phase
        argmin: any T_i, d_i and jitter, but τ = 0 and α = 0); or ``"auto"``: fleets of
        at least `fast.FIFO_MIN_JOBS` active jobs run on the FIFO path where it applies,
        else on the clock path where it applies; the rest on the general engine. Decided
        per fleet on the host, so a fleet's trace does not depend on its batch.
        All paths give the same trace to working precision (not bit for bit: chaotic
        fleets, docs/model.md claim 5, amplify ulp differences over many cycles).
      devices: shard the batch over several devices (`ckpt_jax.sharding`): None (one
        device), ``"all"`` (every local device), an int n (the first n) or a sequence of
        devices. Results are identical to one device.
      save: what to record, a `SaveAt` (default: the full trace only). Observers
        (``writers``, ``gaps``, ``jobs``) are accumulated inside the loop; with
        ``trace=False`` no (B, N, K) buffer exists anywhere.
      until: a time horizon H > 0 (scalar or (*B,)): every fleet stops at t = H exactly
        and is ok if it got there. ``n_fires`` then only sizes the trace and the ``gaps``
        observer, and may be None when neither is recorded.

    Returns:
      A `Trace`.
    """
    if not isinstance(fleet, Fleet):
        raise ValueError(f"fleet must be a ckpt_jax.Fleet, got {type(fleet).__name__}")
    save = SaveAt() if save is None else save
    if not isinstance(save, SaveAt):
        raise ValueError(f"save must be a ckpt_jax.SaveAt, got {type(save).__name__}")
    horizon = None if until is None else check_horizon(until, fleet.batch_shape, fleet.dtype)
    if n_fires is None:
        if horizon is None:
            raise ValueError("n_fires must be an integer >= 1 (it may be None only with until=)")
        if save.trace or save.gaps:
            raise ValueError("n_fires is needed to size the trace and the gaps observer; pass n_fires or save=SaveAt(trace=False, gaps=False)")
    # Counters and trace columns are int32: K stays well inside it.
    n_fires = None if n_fires is None else check_int("n_fires", n_fires, 1, MAX_FIRES)
    state = check_state(fleet, state)  # a State built by hand is validated here too
    budget_fires = n_fires if horizon is None else _fires_before(fleet, horizon)
    if max_events is None:
        max_events = default_max_events(fleet.n_jobs, budget_fires, fleet)
    max_events = check_int("max_events", max_events, 1, 2**31 - 1)
    queue_size = check_int("queue_size", queue_size, 1, 2**20)
    check_method(method)
    if not isinstance(throw, (bool, np.bool_)):
        raise ValueError(f"throw must be True or False, got {throw!r}")
    from . import fast, sharding  # fast imports this module

    devices = sharding.resolve_devices(devices)
    params = flat_params(fleet, jitter, key, fleet_offset)  # validates jitter, key and offset
    n_fleets = params.compute.shape[0]
    if horizon is None:
        _check_time_bound(fleet, n_fires, jitter)
    trace_len = n_fires if save.trace else 0
    _check_trace_memory(fleet, trace_len, queue_size if np.any(np.asarray(fleet.delay) > 0) else 1, devices)
    path = fast.choose_paths(fleet, jitter, method).reshape(n_fleets)
    options = dict(
        n_fires=MAX_FIRES if horizon is not None else n_fires,
        trace_len=trace_len,
        save=save,
        stop_fires=n_fires if horizon is None else None,
        gap_fires=n_fires,
        max_events=max_events,
        queue_size=queue_size,
        use_jitter=jitter is not None and bool(np.any(np.asarray(jitter) > 0)),
        use_delay=bool(np.any(np.asarray(fleet.delay) > 0)),
        use_async=bool(np.any(np.asarray(fleet.async_fraction) > 0)),
        progress=progress,
        devices=devices,
    )
    horizon_flat = None if horizon is None else jnp.asarray(horizon.reshape(n_fleets), fleet.dtype)
    phase = jnp.reshape(state.phase, params.compute.shape)
    remaining = jnp.reshape(state.remaining, params.compute.shape).astype(fleet.dtype)
    # "auto" decides per fleet, so a fleet's trace never depends on what it is batched with.
    pieces = []
    for name in fast.PATHS:
        index = np.flatnonzero(path == name)
        if index.size == 0:
            continue
        part = (params, phase, remaining, horizon_flat)
        if index.size < n_fleets:
            part = jax.tree_util.tree_map(lambda x: x[index], part)
        result = _run(*part, path=name, **options)
        pieces.append((index, _flat_trace(result, save=save, stop_fires=options["stop_fires"], gap_fires=n_fires)))
    flat = pieces[0][1] if len(pieces) == 1 else _merge(pieces, n_fleets)
    batch = fleet.batch_shape
    trace = jax.tree_util.tree_map(lambda x: x.reshape(batch + x.shape[1:]), flat)
    if throw and not bool(np.all(trace.ok)):
        bad = np.asarray(trace.status)[~np.asarray(trace.ok)]
        codes = np.bitwise_or.reduce(bad.ravel())
        raise RuntimeError(
            f"{bad.size} of {np.size(trace.ok)} fleets did not complete: {describe_status(int(codes))}"
        )
    return trace


MAX_FIRES = 2**30


def check_horizon(until, batch_shape, dtype) -> np.ndarray:
    """``until`` as a float64 array of the batch shape: finite and > 0 in the dtype used."""
    horizon = real_array("until", until)
    try:
        horizon = np.broadcast_to(horizon, batch_shape)
    except ValueError:
        raise ValueError(f"until must be a scalar or have the batch shape {batch_shape}, got {np.shape(until)}") from None
    low, high = value_range(dtype)
    bad = ~(np.isfinite(horizon) & (horizon > 0) & (horizon <= high))
    if bad.any() or np.any(horizon.astype(dtype) == 0):
        raise ValueError(f"until must be finite and in (0, {high:.3g}] in {np.dtype(dtype)}, got {until!r}")
    return horizon


def _fires_before(fleet: Fleet, horizon: np.ndarray) -> int:
    """About how many cycles the fastest job completes before the horizon: sizes the event
    budget of runs with ``until`` (at least one cycle per solo period of the fastest job)."""
    period = np.asarray(fleet.period, np.float64)
    fastest = np.min(np.where(np.asarray(fleet.active), period, np.inf), axis=-1)
    cycles = np.max(np.asarray(horizon, np.float64) / fastest)
    return int(min(MAX_FIRES, np.ceil(cycles) + 1))


def _check_time_bound(fleet: Fleet, n_fires: int, jitter) -> None:
    """Refuses runs whose times could overflow the dtype (they would come back as inf)."""
    bound = time_bound(fleet, n_fires, jitter)
    _, high = value_range(fleet.dtype)
    too_long = ~(bound <= high)
    if np.any(too_long):
        worst = float(np.max(np.where(np.isfinite(bound), bound, np.inf)))
        raise ValueError(
            f"n_fires = {n_fires} cycles of these fleets could take up to {worst:.3g} time units, beyond "
            f"the {high:.3g} that {np.dtype(fleet.dtype)} holds with room for rounding; lower n_fires, "
            "rescale the time unit (compute, write)"
            + (" or use float64" if np.dtype(fleet.dtype) == np.float32 else "")
        )


def trace_bytes(fleet: Fleet, n_fires: int, queue_size: int = 1) -> int:
    """Peak bytes `simulate` allocates for a batch: the (B, N, K) fire and end buffers,
    held about three times at once (loop carry, the finished trace, the job-order copy),
    plus the per-job state."""
    n_fleets = int(np.prod(fleet.batch_shape, dtype=np.int64))
    item = np.dtype(fleet.dtype).itemsize
    per_fleet = fleet.n_jobs * (6 * n_fires + 16) * item + 2 * queue_size * item + 64
    return int(n_fleets) * int(per_fleet)


def _check_trace_memory(fleet: Fleet, n_fires: int, queue_size: int, devices) -> None:
    n_fleets = int(np.prod(fleet.batch_shape, dtype=np.int64))
    check_memory(
        f"simulate with B = {n_fleets} fleets x N = {fleet.n_jobs} jobs x K = {n_fires} firings",
        trace_bytes(fleet, n_fires, queue_size),
        devices,
        hint="lower n_fires or the batch, or split the ensemble (ckpt_jax.run_ensemble)",
    )


def _run_chunked(params, state, max_events, progress, n_fleets, **static):
    """Runs the loop in chunks of events so long runs can show a progress bar.

    The event limit is a traced argument, so every chunk reuses one compiled loop.
    """
    n_fires = static["n_fires"]
    until = static["until"]
    work = n_fleets * params.compute.shape[1] * (static["gap_fires"] or 0 if until else n_fires)
    if progress is None:
        progress = work >= 5_000_000
    static = {k: v for k, v in static.items() if k != "trace_len"}
    if not progress:
        return _advance_jit(params, state, jnp.int32(max_events), **static)
    from ._progress import progress_bar

    n_chunks = 50
    chunk = max(1, math.ceil(max_events / n_chunks)) if until else max(
        1, math.ceil(min(max_events, 2 * params.compute.shape[1] * (n_fires + 2)) / n_chunks)
    )
    limit = 0
    total = 1.0 if until else n_fires
    with progress_bar(total=total, desc="ckpt_jax.simulate", unit="" if until else "cycle") as bar:
        while True:
            limit = min(limit + chunk, max_events)
            state = _advance_jit(params, state, jnp.int32(limit), **static)
            carry, _, horizon = state
            if until:
                bar.update(float(jnp.min(carry.time / horizon)) - bar.n)
            else:
                bar.update(int(jnp.min(jnp.where(params.active, carry.end_count, n_fires))) - bar.n)
            still = _running(params, carry, n_fires, max_events, horizon if until else None)
            if limit >= max_events or not bool(jnp.any(still)):
                return state


def _pad_inert(params, phase, remaining, multiple: int, horizon=None):
    """Pads flattened fleets (leading axis B) to a multiple of ``multiple`` with inert
    fleets: copies of fleet 0 with no active job, done before their first step (with a
    horizon: a horizon of 0, so they are done at t = 0 too)."""
    from . import sharding

    n_fleets = params.compute.shape[0]
    tree = (params, phase, remaining) if horizon is None else (params, phase, remaining, horizon)
    tree, n_pad = sharding.pad_fleets(tree, n_fleets, multiple)
    if n_pad:
        tree = (tree[0]._replace(active=tree[0].active.at[n_fleets:].set(False)),) + tuple(tree[1:])
        if horizon is not None:
            tree = tree[:3] + (tree[3].at[n_fleets:].set(0),)
    return tree


def _run(params, phase, remaining, horizon, *, path, n_fires, trace_len, save, stop_fires, gap_fires, max_events, queue_size, use_jitter, use_delay, use_async, progress, devices) -> LoopResult:
    """Runs flattened fleets (leading axis B) on one path, optionally sharded; returns the
    `LoopResult` (job order) that `_flat_trace` turns into a `Trace`."""
    from . import fast, sharding

    n_fleets = params.compute.shape[0]
    until = horizon is not None
    if horizon is None:
        horizon = jnp.full((n_fleets,), jnp.inf, params.compute.dtype)
    if devices is not None:
        params, phase, remaining, horizon = _pad_inert(params, phase, remaining, len(devices), horizon)
        params, phase, remaining, horizon = sharding.place((params, phase, remaining, horizon), devices)
    limit = jnp.int32(max_events)
    observe = dict(save=save, until=until, stop_fires=stop_fires, gap_fires=gap_fires, trace_len=trace_len)
    if path != "general":
        clock = path == "clock"
        static = dict(n_fires=n_fires, clock=clock, use_jitter=use_jitter and clock, **observe)
        if devices is None:
            return fast.run_blocks(params, phase, remaining, horizon, limit, progress=progress, **static)
        loop = sharding.sharded_loop(fast.init_and_advance, devices, **static)
        return sharding.unpad(loop((params, phase, remaining, horizon), limit), n_fleets)
    static = dict(n_fires=n_fires, use_delay=use_delay, use_jitter=use_jitter, use_async=use_async, **observe)
    queue = queue_size if use_delay else 1
    if devices is None:
        state = _init_jit(params, phase, remaining, horizon, queue_size=queue, **static)
        state = _run_chunked(params, state, max_events, progress, n_fleets, **static)
        return _general_result(params, *state, **{k: static[k] for k in ("n_fires", "until")})
    loop = sharding.sharded_loop(_init_and_advance, devices, queue_size=queue, **static)
    return sharding.unpad(loop((params, phase, remaining, horizon), limit), n_fleets)


def _init_state(params, phase, remaining, horizon, *, queue_size, n_fires, trace_len, use_jitter, save, stop_fires, gap_fires, **_):
    """The general loop's state (carry, observer states, horizon) at t = 0."""
    carry = jax.vmap(_init_carry, in_axes=(0, 0, 0, None, None, None))(
        params, phase, remaining, trace_len, queue_size, use_jitter
    )
    n_fleets, n_jobs = params.compute.shape
    observers = _observe.init(save, n_jobs, stop_fires, gap_fires, n_fleets, params.compute.dtype)
    return carry, observers, horizon


_init_jit = jax.jit(_init_state, static_argnames=("queue_size", "n_fires", "trace_len", "use_jitter", "save", "stop_fires", "gap_fires", "use_delay", "use_async", "until"))


def _general_result(params, carry, observers, horizon, *, n_fires, until) -> LoopResult:
    done = carry.time >= horizon if until else jax.vmap(_done, in_axes=(0, 0, None))(carry, params.active, n_fires)
    final = FinalView(
        time=carry.time,
        open_write=jnp.zeros_like(carry.write_left),  # the general loop accumulates densely
        async_fraction=params.async_fraction,
        active=params.active,
        horizon=horizon if until else None,
        n_writers=jnp.sum(params.active & carry.draining, axis=1).astype(jnp.int32),
    )
    return LoopResult(
        time=carry.time,
        fire_times=carry.fire_times,
        end_times=carry.end_times,
        done=done,
        n_events=carry.n_events,
        status=carry.status,
        observers=observers,
        final=final,
    )


def _init_and_advance(part, event_limit, *, queue_size, **static):
    """Init, loop and result in one function, for `sharding.sharded_loop`."""
    params, phase, remaining, horizon = part
    state = _init_state(params, phase, remaining, horizon, queue_size=queue_size, **static)
    loop_static = {k: v for k, v in static.items() if k != "trace_len"}
    state = _advance(params, state, event_limit, **loop_static)
    return _general_result(params, *state, n_fires=static["n_fires"], until=static["until"])


def _merge(pieces, n_fleets: int) -> Trace:
    """Reassembles the traces of fleet subsets ``[(flat indices, Trace), ...]`` in batch order."""

    def merge(*leaves):
        out = jnp.zeros((n_fleets,) + leaves[0].shape[1:], leaves[0].dtype)
        for (index, _), leaf in zip(pieces, leaves):
            out = out.at[index].set(leaf)
        return out

    return jax.tree_util.tree_map(merge, *(trace for _, trace in pieces))


@functools.partial(jax.jit, static_argnames=("save", "stop_fires", "gap_fires"))
def _flat_trace(result: LoopResult, *, save: SaveAt, stop_fires, gap_fires) -> Trace:
    """The `Trace` of flattened fleets (leading axis B) from a loop's result (any path)."""
    active = result.final.active
    # The budget is the reason only where nothing else stopped the run.
    status = jnp.where(result.done | (result.status != 0), result.status, result.status | STATUS_MAX_EVENTS)
    # A non-finite time is never ok, whichever loop produced it.
    status = status | flag(~jnp.isfinite(result.time), STATUS_NONFINITE)
    # Any flag means the numbers cannot be trusted, so ok requires status == 0.
    ok = result.done & (status == STATUS_OK)
    mask = active[:, :, None]
    observed = _observe.finalize(save, active.shape[1], stop_fires, gap_fires, result.observers, result.final, ok)
    return Trace(
        fire_times=jnp.where(mask, result.fire_times, jnp.nan) if save.trace else None,
        end_times=jnp.where(mask, result.end_times, jnp.nan) if save.trace else None,
        ok=ok,
        status=status,
        n_events=result.n_events,
        time=result.time,
        writers=observed.get("writers"),
        gaps=observed.get("gaps"),
        jobs=observed.get("jobs"),
    )
