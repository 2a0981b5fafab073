"""The general event loop: where a firing happens, for every variant.

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

import math
from typing import NamedTuple, Optional

import jax
import jax.numpy as jnp
import numpy as np

from .. import _observe, _progress
from .._observe import FinalView, SaveAt, observers_for
from .._params import Params, jitter_work
from .._rates import Sharing, compute_speed, computing_mask, controller_load, fcfs_head, phase_rates, write_rates
from .._snapping import horizon_clock, snapped, to_horizon
from .._status import Status, flag
from . import LoopResult, failures
from .events import Instant
from . import record as record_cells

__all__ = ["Carry", "init_carry", "step", "advance", "advance_to_firing", "batched_advance", "run_chunked", "init_and_advance",
           "tracks_work"]

STATUS_OK = int(Status.OK)
STATUS_NONFINITE = int(Status.NONFINITE)
STATUS_QUEUE_OVERFLOW = int(Status.QUEUE_OVERFLOW)
STATUS_MAX_EVENTS = int(Status.MAX_EVENTS)


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
      queued_at: (N,) when the job's current write was queued (its firing time; -inf for
        a write in progress at t = 0): the "fcfs" storage policy serves the earliest.
      applied_computing: the value the (delayed) controller currently acts on: the
        computing count, or with sizes the policy's `controller_load` (docs/model.md §1b).
      queue_time, queue_count: (Q,) ring buffer of pending controller updates.
      queue_head, queue_size: ring-buffer cursor and occupancy.
      n_events: int32 events stepped.
      status: int32 bit flags (`STATUS_*`).
      work: the failure state and work accounting (`failures.WorkCarry`, docs/model.md
        §1c), or None where the run neither fails nor reports the jobs' work.
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
    queued_at: jax.Array
    applied_computing: jax.Array
    queue_time: jax.Array
    queue_count: jax.Array
    queue_head: jax.Array
    queue_size: jax.Array
    n_events: jax.Array
    status: jax.Array
    work: Optional[failures.WorkCarry] = None


def init_carry(params: Params, state_phase, state_remaining, n_fires: int, queue_size: int, use_jitter: bool,
               sharing: Sharing = Sharing(), track_work: bool = False, use_failures: bool = False) -> Carry:
    """The carry at t = 0; ``track_work`` (static) adds the work accounting, and
    ``use_failures`` (static) the failure state, of `failures.WorkCarry`."""
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
    load = controller_load(sharing, params.size, computing_mask(params, draining, waiting), params.cap)
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
        queued_at=jnp.where(draining, -jnp.inf, jnp.inf).astype(dtype),
        applied_computing=load,
        queue_time=jnp.full((queue_size,), jnp.inf, dtype),
        queue_count=jnp.zeros((queue_size,), dtype),
        queue_head=jnp.zeros((), jnp.int32),
        queue_size=jnp.zeros((), jnp.int32),
        n_events=jnp.zeros((), jnp.int32),
        status=jnp.zeros((), jnp.int32),
        work=failures.init(params, compute_left, use_failures) if track_work or use_failures else None,
    )


def rates(params: Params, carry: Carry, use_delay: bool, use_async: bool = True, sharing: Sharing = Sharing()):
    """Piecewise-constant rates of every job between now and the next event.

    Returns ``(drains, write_rate, computing, compute_rate)``: the writers that drain now
    (all writers but those queued behind the head under "fcfs"), their rate, the jobs
    drawing compute power and their rate."""
    dtype = params.compute.dtype
    writers = params.active & carry.draining
    n_writers = jnp.sum(writers)
    computing = computing_mask(params, carry.draining, carry.waiting, use_async)
    load = controller_load(sharing, params.size, computing, params.cap)
    if use_delay:
        # τ = 0 fleets bypass the queue, so they reproduce the base model bit for bit.
        load = jnp.where(params.delay > 0, carry.applied_computing, load)
    # The base rule; with sizes (§1b) the policies replace one side or both.
    write_rate, speed = phase_rates(params.throughput[n_writers], n_writers, load, params.cap, dtype)
    if sharing.power != "count":
        speed = compute_speed(sharing, load, params.size, params.cap)
    drains = writers
    if sharing.storage == "fcfs":
        drains = fcfs_head(writers, carry.queued_at)
    write_rate = write_rates(sharing, params.throughput, writers, params.size, write_rate, drains)
    if use_async:
        compute_rate = jnp.where(computing, jnp.where(carry.draining, params.async_fraction * speed, speed), 0)
    else:
        compute_rate = jnp.where(computing, speed, 0)
    return drains, write_rate, computing, compute_rate.astype(dtype)


def done(carry: Carry, active, n_fires: int):
    return jnp.all(~active | (carry.end_count >= n_fires))


def step(
    params: Params,
    carry: Carry,
    running,
    n_fires: int,
    use_delay: bool,
    use_jitter: bool,
    horizon=None,
    use_async: bool = True,
    sharing: Sharing = Sharing(),
    use_failures: bool = False,
) -> Carry:
    """Advances one fleet to its next event and switches every job that empties there.

    With a ``horizon`` the step stops there if no event comes first (a pure time advance,
    used to read the state at a fixed time); an event within the snapping tolerance of
    the horizon happens at it (`to_horizon`).

    ``running`` is False for fleets already stopped: they still execute this body (a
    batched while_loop steps all lanes), so it must be safe there — no division by zero,
    no inf − inf — and it must write nothing: their carry is returned unchanged.

    ``sharing`` (static) selects the rate rules of job sizes and sharing policies
    (`ckpt_jax._rates.sharing_for`; default: the base model's anonymous rates);
    ``use_failures`` (static) adds failures and restarts (docs/model.md §1c; the carry
    must come from `init_carry` with ``use_failures=True``).
    """
    carry, fire_slot, end_slot, _, _ = switch(params, carry, running, n_fires, use_delay, use_jitter, horizon, use_async,
                                              sharing, use_failures)
    jobs = jnp.arange(params.compute.shape[0])
    return carry._replace(
        fire_times=carry.fire_times.at[jobs, fire_slot].set(carry.time, mode="drop"),
        end_times=carry.end_times.at[jobs, end_slot].set(carry.time, mode="drop"),
    )


def advance(params: Params, carry: Carry, *, max_events, stop=None, horizon=None, use_delay: bool = False,
            observe=None, observed=None, sharing: Sharing = Sharing()):
    """The stepping primitive: advances ONE fleet (no batch axis) event by event.

    It stops where ``stop(carry, observed)`` becomes True, at ``horizon`` (the last step
    goes to it exactly, `to_horizon`), when ``carry.n_events`` reaches ``max_events``
    (`Status.MAX_EVENTS` is then set, as the stop was not reached) or at a status flag.
    ``observe(observed, before, after) -> observed`` runs after every step (an observer
    of the two carries). Jit-able, and differentiable by `jax.jacfwd` (forward mode
    works through `lax.while_loop`). ``sharing``: the static rate rules, as for `step`
    (`ckpt_jax.loop.sharing_for(fleet)` for a fleet with sizes or policies).

    Returns ``(carry, observed)``.
    """

    def stopped(c, o):
        reached = jnp.zeros((), bool) if stop is None else stop(c, o)
        if horizon is not None:
            reached = reached | (c.time >= horizon)
        return reached

    def cond(state):
        c, o = state
        return ~stopped(c, o) & (c.status == STATUS_OK) & (c.n_events < max_events)

    def body(state):
        c, o = state
        new = step(params, c, jnp.bool_(True), 1, use_delay, False, horizon=horizon, sharing=sharing)
        return new, (o if observe is None else observe(o, c, new))

    carry, observed = jax.lax.while_loop(cond, body, (carry, observed))
    short = ~stopped(carry, observed) & (carry.status == STATUS_OK)
    return carry._replace(status=(carry.status | flag(short, STATUS_MAX_EVENTS)).astype(jnp.int32)), observed


def advance_to_firing(params: Params, carry: Carry, job: int, *, max_events, use_delay: bool = False,
                      observe=None, observed=None, sharing: Sharing = Sharing()):
    """`advance` until job ``job`` fires once more (the return maps' step: job 0's next
    firing is the Poincaré section, docs/model.md §2). Returns ``(carry, observed)``."""
    target = carry.fire_count[job] + 1
    return advance(
        params, carry, max_events=max_events, stop=lambda c, _: c.fire_count[job] >= target,
        use_delay=use_delay, observe=observe, observed=observed, sharing=sharing,
    )


def switch(params: Params, carry: Carry, running, n_fires: int, use_delay: bool, use_jitter: bool, horizon, use_async: bool,
           sharing: Sharing = Sharing(), use_failures: bool = False):
    """`step` without writing the trace buffers: returns (carry, fire_slot, end_slot,
    fires, ends), the last two (N,) masks of the jobs that fired / ended a write.

    ``fire_slot`` / ``end_slot`` (N,) give the trace column each job's switch at the new
    ``carry.time`` goes to; K (= n_fires) means "nothing to record". The batched loop
    records a whole batch with one flat scatter (`record`).

    With ``use_failures``, failures and restart ends are events too, and a job that is
    down counts nowhere: the rates see it as inactive (`failures.up_params`).
    """
    dtype = params.compute.dtype
    inf = jnp.asarray(jnp.inf, dtype)
    live = failures.up_params(params, carry.work) if use_failures else params
    writers, write_rate, computing, compute_rate = rates(live, carry, use_delay, use_async, sharing)
    computes = compute_rate > 0

    if sharing.storage == "fcfs":  # ``writers`` drain: the head only, the rest wait
        write_dt = jnp.where(writers, carry.write_left / jnp.where(writers, write_rate, 1), inf)
    else:
        write_dt = jnp.where(writers, carry.write_left / write_rate, inf)
    compute_dt = jnp.where(computes, carry.compute_left / jnp.where(computes, compute_rate, 1), inf)
    dt = jnp.minimum(jnp.min(write_dt), jnp.min(compute_dt))
    if use_delay:
        queue_dt = jnp.where(carry.queue_size > 0, carry.queue_time[carry.queue_head] - carry.time, inf)
        dt = jnp.minimum(dt, queue_dt)
    if use_failures:
        failure_dt, restart_dt = failures.event_times(params, carry.work, carry.time)
        dt = jnp.minimum(dt, jnp.minimum(jnp.min(failure_dt), jnp.min(restart_dt)))
    if horizon is not None:  # an event within the snapping tolerance of H happens at H
        dt = to_horizon(dt, carry.time, horizon, dtype)
    finite = jnp.isfinite(dt)
    dt = jnp.where(finite & running, dt, 0)
    time = carry.time + dt if horizon is None else horizon_clock(carry.time, dt, horizon)

    write_left = jnp.where(writers, carry.write_left - write_rate * dt, carry.write_left)
    compute_left = jnp.where(computes, carry.compute_left - compute_rate * dt, carry.compute_left)
    # Simultaneous to working precision (`snapped`): every job due at this instant switches.
    ends = writers & snapped(write_dt, write_left, params.write, dt, time, dtype)
    completes = computes & snapped(compute_dt, compute_left, params.compute, dt, time, dtype)
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
    work = carry.work
    if work is not None:  # the accounting, then restart ends and failures (docs/model.md §1c)
        work, draining, waiting, write_left, compute_left = failures.switch(
            params, work, time=time, dt=dt, running=running & finite, completes=completes, fires=fires, ends=ends,
            draining=draining, waiting=waiting, write_left=write_left, compute_left=compute_left, fire_count=fire_count,
            use_failures=use_failures, use_jitter=use_jitter,
            **(dict(failure_dt=failure_dt, restart_dt=restart_dt) if use_failures else {}))
        live = failures.up_params(params, work) if use_failures else params

    applied = carry.applied_computing
    queue_time, queue_count = carry.queue_time, carry.queue_count
    queue_head, queue_size = carry.queue_head, carry.queue_size
    status = carry.status
    if use_delay:
        capacity = queue_time.shape[0]
        # A pending controller update due at this instant (the time half of the snap rule).
        pop = running & (queue_size > 0) & snapped(queue_dt, 1.0, 0.0, dt, time, dtype)
        applied = jnp.where(pop, queue_count[queue_head], applied)
        queue_head = jnp.where(pop, (queue_head + 1) % capacity, queue_head)
        queue_size = queue_size - pop.astype(jnp.int32)
        now_computing = computing_mask(live, draining, waiting, use_async)
        new_computing = controller_load(sharing, params.size, now_computing, params.cap)
        changed = new_computing != controller_load(sharing, params.size, computing, params.cap)
        if sharing.power != "count":
            # A change of the count is an update even where the level stays (as in the
            # base model, so unit sizes schedule the same updates).
            changed = changed | (jnp.sum(now_computing) != jnp.sum(computing))
        push = running & (params.delay > 0) & changed
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
        queued_at=keep(jnp.where(fires, time, carry.queued_at), carry.queued_at) if sharing.storage == "fcfs" else carry.queued_at,
        applied_computing=applied,
        queue_time=queue_time,
        queue_count=queue_count,
        queue_head=queue_head,
        queue_size=queue_size,
        n_events=carry.n_events + running.astype(jnp.int32),
        status=status.astype(jnp.int32),
        work=work,
    ), fire_slot, end_slot, fires, ends


def record(buffer, slot, time):
    """Batched trace write: ``buffer[b, i, slot[b, i]] = time[b]`` where ``slot < K``.

    `ckpt_jax._loops.record` on the flattened (B N K) buffer, as the fast paths write theirs.
    """
    n_fleets, n_jobs, n_fires = buffer.shape
    size = n_fleets * n_jobs * n_fires
    if size >= np.iinfo(np.int32).max:
        # Flat int32 indices would overflow: the batched 2-D scatter needs none that large.
        jobs = jnp.arange(n_jobs)
        put = lambda row, slot_row, t: row.at[jobs, slot_row].set(t, mode="drop")  # noqa: E731
        return jax.vmap(put)(buffer, slot, time)
    cell = jnp.arange(n_fleets * n_jobs, dtype=jnp.int32).reshape(n_fleets, n_jobs) * n_fires + slot
    values = jnp.broadcast_to(time[:, None], slot.shape)
    flat = record_cells(buffer.reshape(size), cell.reshape(-1), values.reshape(-1), (slot < n_fires).reshape(-1))
    return flat.reshape(buffer.shape)


def still_running(params: Params, carry: Carry, n_fires: int, event_limit, horizon=None):
    """Lanes still to step: not done (every job K writes, or the horizon reached), no
    flag, within the event budget."""
    if horizon is None:
        unfinished = ~jax.vmap(done, in_axes=(0, 0, None))(carry, params.active, n_fires)
    else:
        unfinished = carry.time < horizon
    return unfinished & (carry.status == STATUS_OK) & (carry.n_events < event_limit)


def batched_advance(
    params: Params,
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
    sharing: Sharing = Sharing(),
    use_failures: bool = False,
):
    """Steps a batch of fleets (leading axis B) until each is done, failed or at event_limit.

    ``state`` is ``(carry, observer states, horizon)``; the observers (`ckpt_jax._observe`)
    are updated once per step, inside the loop, one iteration late (`events.Instant`).
    ``n_fires`` is the stop count K (or a huge count with ``until``); ``stop_fires`` the K
    the observers' window closes at (None: the horizon closes it).
    """
    switch_all = jax.vmap(switch, in_axes=(0, 0, 0, None, None, None, 0 if until else None, None, None, None))
    observers = observers_for(save, params.compute.shape[1], stop_fires, gap_fires, count_writes=use_failures)
    n_active = jnp.sum(params.active, axis=1).astype(jnp.int32)

    def still(carry, horizon):
        return still_running(params, carry, n_fires, event_limit, horizon if until else None)

    def cond(loop):
        return jnp.any(loop[-1])

    def observe(obs, event, after):
        view = event.view(params, after, n_fires, use_async)
        return tuple(o.update(state_o, view, n_active) for o, state_o in zip(observers, obs))

    def body(loop):
        # The running mask is computed once per iteration and carried to the next test.
        carry, obs, horizon, event, running = loop
        if observers:  # the previous iteration's event, now read from the loop state
            obs = observe(obs, event, carry)
        new, fire_slot, end_slot, fires, ends = switch_all(
            params, carry, running, n_fires, use_delay, use_jitter, horizon if until else None, use_async, sharing,
            use_failures,
        )
        new = new._replace(
            fire_times=record(new.fire_times, fire_slot, new.time),
            end_times=record(new.end_times, end_slot, new.time),
        )
        if observers:
            event = Instant.of(carry, running, fires, ends)
        return new, obs, horizon, event, still(new, horizon)

    carry, obs, horizon = state
    carry, obs, horizon, event, _ = jax.lax.while_loop(
        cond, body, (carry, obs, horizon, Instant.none(carry), still(carry, horizon)))
    if observers:  # the last iteration's event
        obs = observe(obs, event, carry)
    return carry, obs, horizon

STATIC = ("n_fires", "use_delay", "use_jitter", "use_async", "save", "until", "stop_fires", "gap_fires", "sharing",
          "use_failures")

advance_jit = jax.jit(batched_advance, static_argnames=STATIC, donate_argnums=(1,))


def run_chunked(params, state, max_events, progress, n_fleets, expected_events=None, **static):
    """Runs the loop in chunks of events so long runs can show a progress bar: in cycles
    (the slowest job's completed writes) or, with ``until``, in simulated time (percent of
    the horizon reached by the slowest fleet). ``expected_events``: with ``until``, about
    how many events the busiest fleet steps (`ckpt_jax._validate.horizon_events`); it sizes
    the chunks and decides whether a bar is shown.

    The event limit is a traced argument, so every chunk reuses one compiled loop.
    """
    n_fires = static["n_fires"]
    until = static["until"]
    n_jobs = params.compute.shape[1]
    if until:
        events = max(1, min(max_events, expected_events or max_events))
    else:
        events = min(max_events, 2 * n_jobs * (n_fires + 2))
    if progress is None:
        progress = n_fleets * events / 2 >= _progress.LONG_RUN
    static = {k: v for k, v in static.items() if k != "trace_len"}
    if not progress:
        return advance_jit(params, state, jnp.int32(max_events), **static)

    chunk = max(1, math.ceil(events / 50))
    limit = 0
    if until:  # simulated time: the percent of its horizon the slowest fleet reached
        shown = dict(total=100, unit="% of H", bar_format="{l_bar}{bar}| {n:.0f}/{total} {unit} [{elapsed}<{remaining}]")
    else:
        shown = dict(total=n_fires, unit="cycle")
    with _progress.progress_bar(desc="ckpt_jax.simulate", **shown) as bar:
        while True:
            limit = min(limit + chunk, max_events)
            state = advance_jit(params, state, jnp.int32(limit), **static)
            carry, _, horizon = state
            if until:
                bar.update(100 * min(1.0, float(jnp.min(carry.time / horizon))) - bar.n)
            else:
                bar.update(int(jnp.min(jnp.where(params.active, carry.end_count, n_fires))) - bar.n)
            still = still_running(params, carry, n_fires, max_events, horizon if until else None)
            if limit >= max_events or not bool(jnp.any(still)):
                return state


def tracks_work(save: SaveAt, use_jitter: bool, use_failures: bool) -> bool:
    """Whether the loop keeps the work accounting (`failures.WorkCarry`, ten per-job rows
    stepped every iteration): with failures, or where the jobs observer reports useful work
    of jittered phases. Without either, every completed write saves one full phase, and
    `ckpt_jax._simulate.fast_useful_work` derives the useful work from the write counts."""
    return use_failures or (save.jobs and use_jitter)


def init_state(params, phase, remaining, horizon, *, queue_size, n_fires, trace_len, use_jitter, save, stop_fires, gap_fires,
               sharing=Sharing(), use_failures=False, **_):
    """The general loop's state (carry, observer states, horizon) at t = 0: with the work
    accounting where `tracks_work`."""
    carry = jax.vmap(init_carry, in_axes=(0, 0, 0, None, None, None, None, None, None))(
        params, phase, remaining, trace_len, queue_size, use_jitter, sharing, tracks_work(save, use_jitter, use_failures), use_failures
    )
    n_fleets, n_jobs = params.compute.shape
    observers = _observe.init(save, n_jobs, stop_fires, gap_fires, n_fleets, params.compute.dtype,
                              count_writes=use_failures)
    return carry, observers, horizon

init_jit = jax.jit(init_state, static_argnames=("queue_size", "n_fires", "trace_len", "use_jitter", "save", "stop_fires", "gap_fires", "use_delay", "use_async", "until", "sharing", "use_failures"))


def result(params, carry, observers, horizon, *, n_fires, until, use_failures=False) -> LoopResult:
    """The `LoopResult` of the general loop's final state. Without failures the completed
    writes are the firings less the write still open (`FinalView.writes`)."""
    writing = params.active & carry.draining
    finished = carry.time >= horizon if until else jax.vmap(done, in_axes=(0, 0, None))(carry, params.active, n_fires)
    final = FinalView(
        time=carry.time,
        async_fraction=params.async_fraction,
        active=params.active,
        horizon=horizon if until else None,
        n_writers=jnp.sum(writing, axis=1).astype(jnp.int32),
        fire_count=carry.fire_count,
        writes=None if use_failures else _observe.completed_writes(carry.fire_count, writing),
        writing=writing,
        **({} if carry.work is None else dict(
            useful_work=carry.work.useful_work, lost_work=carry.work.lost_work, failures=carry.work.failures,
            down_time=carry.work.down_time)),
    )
    return LoopResult(
        time=carry.time,
        fire_times=carry.fire_times,
        end_times=carry.end_times,
        done=finished,
        n_events=carry.n_events,
        status=carry.status,
        observers=observers,
        final=final,
    )


def init_and_advance(part, event_limit, *, queue_size, **static):
    """Init, loop and result in one function, for `sharding.sharded_loop`."""
    params, phase, remaining, horizon = part
    state = init_state(params, phase, remaining, horizon, queue_size=queue_size, **static)
    loop_static = {k: v for k, v in static.items() if k != "trace_len"}
    state = batched_advance(params, state, event_limit, **loop_static)
    return result(params, *state, n_fires=static["n_fires"], until=static["until"], use_failures=static["use_failures"])
