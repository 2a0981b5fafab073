"""The general event loop: where a firing happens, for every variant.

Rates are piecewise constant between events (docs/model.md §1), so the engine steps from one
event to the next exactly: the next event is the smallest time-to-empty over all jobs'
current phases (and pending controller updates); everything advances linearly to it, and
*every* job that empties at that instant switches in the same step.

`GeneralLoop` is this loop for a batch of B fleets, run by the driver's masked
`jax.lax.while_loop` (`ckpt_jax._loops.driver`): each iteration steps every fleet that is
still running (a `vmap` of the single-fleet step) and masks the rest, so a finished fleet
costs a few selects per iteration and its trace buffers are never touched. `step` is the
same step for one fleet, which the driver's one-fleet loop (`driver.advance_fleet`) runs
for code that drives a fleet itself (`ckpt_jax.loop`).

Per-job state is kept general enough for asynchronous checkpoints (docs/model.md §1): a job has
``write_left`` (its background drain, while ``draining``) and ``compute_left`` (work of the
current cycle). With α = 0 a draining job computes nothing, which is the blocking model.

One step (`switch`) is one small rule per mechanism, in order, each a pure function of the
carry and of what the rules before it decided (`_Next`, then `_Rows`, the per-job rows as
they switch); a mechanism no fleet of the run uses is decided away on the host
(`RunConfig`) and traces nothing:

1. rates and next event (`_next_event`, `rates`): who writes and computes, at which rates,
   and the first drain, compute end, controller update, failure, restart end, outage or
   snapshot end;
2. advance (`_advance_phases`): every phase advanced linearly to the event; the phases
   that empty there (the snapping rule);
3. switch (`_write_ends_and_firings`, `_snapshots`, `_start_phases`): write ends, firings,
   snapshots, the next phases. A phase that holds a job between its firing and its write
   (the snapshot of a two-level checkpoint) is a rule here with a small carry field;
4. failures, outages and accounting (`_failures`, `failures.switch`, `outages`);
5. the storage queue (`_grants`) and the delayed controller (`_controller_queue`);
6. the carry after the instant (`_kept`: a stopped fleet keeps its rows) and its water
   levels (`levels_of`).

Per-fleet values carried, and why: XLA:CPU has no multi-output fusion, so a per-fleet
chain (a value computed from all N jobs by a sequence of elementwise steps) that several
per-job passes read is recomputed inside each of them. A per-fleet value therefore comes
either from a reduction (the writer count, the next event's dt: one kernel each) or from
the carry. The carry holds the time, the status and event count, the delayed
controller's applied load and queue, the power draw (where observed) and `Levels`: the
write limits' water level λ (each writer drains at min(b_i, λ)) and the max-min power
level. The levels depend only on the state a step ends in, so the batched loop computes
them once there, in one pass over the slots in an order fixed on the host
(`ckpt_jax._rates.fill_level`), and the next step's rates read them.
"""

from __future__ import annotations

import functools
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .._observe import EventView, LoopInfo
from .._params import Params
from .._rates import (
    ONE_AT_A_TIME,
    QUEUE_POLICIES,
    Sharing,
    compute_speed,
    computing_mask,
    controller_load,
    fcfs_head,
    fill_level,
    filled_rates,
    phase_rates,
    write_rates,
)
from .._snapping import horizon_clock, snapped, to_horizon
from .._status import Status, flag
from . import LoopResult, failures, jitter_works, loop_info, loop_result, outages, requests
from . import record as record_cells
from .config import RunConfig
from .events import Instant

__all__ = ["Carry", "GeneralLoop", "Levels", "init_carry", "step"]


class Levels(NamedTuple):
    """The per-fleet water levels of the state a carry holds, carried from the end of one
    step into the next (see the module docstring for why).

    Attributes:
      write: () the storage's level λ of the write limits' water-filling (`fill_level`:
        each writer drains at min(b_i, λ)), or None where the run does not fill by it.
      power: () the power controller's max-min level (`controller_load` under
        ``"maxmin"``), or None under the other power rules.
    """

    write: jax.Array | None = None
    power: jax.Array | None = None


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
      queued_at: (N,) when the job's current write was queued (its firing time, or with
        two-level checkpoints its snapshot's end, where the drain starts; -inf for
        a write in progress at t = 0): the "fcfs" storage policy serves the earliest.
      applied_computing: the value the (delayed) controller currently acts on: the
        computing count, or with sizes the policy's `controller_load` (docs/model.md §1b).
      queue_time, queue_count: (Q,) ring buffer of pending controller updates.
      queue_head, queue_size: ring-buffer cursor and occupancy.
      n_events: int32 events stepped.
      status: int32 bit flags (`Status`).
      work: the failure state and work accounting (`failures.WorkCarry`, docs/model.md
        §1c), or None where the run neither fails nor reports the jobs' work.
      snapping: (N,) bool, the job takes the blocking snapshot of a two-level checkpoint
        (docs/model.md §1d); None where no fleet of the run has snapshots.
      snap_end: (N,) when its snapshot ends (meaningful where ``snapping``), or None.
      draw: () the fleet's power draw during the interval the last step covered
        (docs/model.md §1d), or None where the run does not observe it.
      requested: (N,) bool, the job's checkpoint request waits while it computes (the
        queueing storage policies, docs/model.md §1e, `requests`; ``queued_at`` is then the
        request's place), or None under the other policies.
      overhead: (N,) bool, the job spends the fixed overhead of the checkpoint it fired
        (docs/model.md §1g): blocked, neither computing nor writing; None where no fleet of
        the run has one (`Params.overhead` None).
      overhead_end: (N,) when that overhead ends (meaningful where ``overhead``), or None.
      levels: the per-fleet water levels of this state (`Levels`), or None: then each step
        computes them from the state itself. The batched loop (`GeneralLoop`) keeps them;
        a carry built or edited by hand (`init_carry`, `ckpt_jax.loop`) has None.
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
    work: failures.WorkCarry | None = None
    snapping: jax.Array | None = None
    snap_end: jax.Array | None = None
    draw: jax.Array | None = None
    requested: jax.Array | None = None
    overhead: jax.Array | None = None
    overhead_end: jax.Array | None = None
    levels: Levels | None = None


def init_carry(
    params: Params,
    state_phase,
    state_remaining,
    n_fires: int,
    queue_size: int,
    use_jitter: bool,
    sharing: Sharing = Sharing(),
    track_work: bool = False,
    use_failures: bool = False,
    use_snapshot: bool = False,
    memory: bool = False,
    use_power: bool = False,
    use_recovery: bool = False,
) -> Carry:
    """The carry at t = 0; ``track_work`` (static) adds the work accounting, and
    ``use_failures`` (static) the failure state, of `failures.WorkCarry`; ``use_snapshot``
    the snapshot state of two-level checkpoints (``memory``: recovered from memory) and
    ``use_power`` the power draw (docs/model.md §1d); ``use_recovery`` the recovery reads
    (docs/model.md §1e). The overhead's state (docs/model.md §1g) is there where
    ``params.overhead`` is (no overhead is in progress at t = 0)."""
    dtype = params.compute.dtype
    n_jobs = params.compute.shape[0]
    draining = params.active & (state_phase == 1)
    if use_jitter:
        first_work = jitter_works(params.job_keys, params.compute, params.jitter, 0)
    else:
        first_work = params.compute
    compute_left = jnp.where(draining, first_work, state_remaining)
    waiting = jnp.zeros(n_jobs, bool)
    load = controller_load(
        sharing, params.size, computing_mask(params, draining, waiting), params.cap, params.size_order
    )
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
        # The queueing policies always keep the accounting: a write covers what its job did
        # up to the grant (docs/model.md §1e).
        work=failures.init(params, compute_left, use_failures, memory, use_recovery)
        if track_work or use_failures or sharing.storage in QUEUE_POLICIES
        else None,
        snapping=jnp.zeros(n_jobs, bool) if use_snapshot else None,
        snap_end=jnp.zeros(n_jobs, dtype) if use_snapshot else None,
        draw=jnp.zeros((), dtype) if use_power else None,
        requested=jnp.zeros(n_jobs, bool) if sharing.storage in QUEUE_POLICIES else None,
        overhead=None if params.overhead is None else jnp.zeros(n_jobs, bool),
        overhead_end=None if params.overhead is None else jnp.zeros(n_jobs, dtype),
    )


def rates(
    params: Params,
    carry: Carry,
    use_delay: bool,
    use_async: bool = True,
    sharing: Sharing = Sharing(),
    reading=None,
):
    """Piecewise-constant rates of every job between now and the next event.

    ``reading``: (N,) the jobs that re-read their checkpoint after a failure (docs/model.md
    §1e), or None: storage users like the writers (in n_w, sharing f under the policy, at
    most at their limit b_i), and not computing. Where the carry holds its water levels
    (`Levels`), the rates read them instead of filling again: the same numbers.

    Returns ``(drains, write_rate, computing, compute_rate)``: the storage users that drain
    now (all but those queued behind the head under "fcfs"), their rate, the jobs drawing
    compute power and their rate."""
    dtype = params.compute.dtype
    writers, computing = _users(params, carry, use_async, reading)
    levels = carry.levels if carry.levels is not None else Levels()
    n_writers = jnp.sum(writers)
    if sharing.power == "free":  # the cap never binds: full speed, no load to compute
        load = jnp.zeros((), dtype)
    elif levels.power is not None:
        load = levels.power
    else:
        load = controller_load(sharing, params.size, computing, params.cap, params.size_order)
    if use_delay:
        # τ = 0 fleets bypass the queue, so they reproduce the base model bit for bit.
        load = jnp.where(params.delay > 0, carry.applied_computing, load)
    # The base rule; with sizes (§1b) the policies replace one side or both.
    write_rate, speed = phase_rates(params.throughput[n_writers], n_writers, load, params.cap, dtype)
    if sharing.power != "count":
        speed = compute_speed(sharing, load, params.size, params.cap)
    drains = writers
    if sharing.storage in ONE_AT_A_TIME:
        drains = fcfs_head(writers, carry.queued_at)
    if levels.write is not None:
        write_rate = filled_rates(params.write_limit, writers, levels.write)
    else:
        write_rate = write_rates(
            sharing, params.throughput, writers, params.size, write_rate, drains, params.write_limit, params.limit_order
        )
    if use_async:
        compute_rate = jnp.where(computing, jnp.where(carry.draining, params.async_fraction * speed, speed), 0)
    else:
        compute_rate = jnp.where(computing, speed, 0)
    return drains, write_rate, computing, compute_rate.astype(dtype)


def _computing(params: Params, draining, waiting, use_async: bool, snapping, overhead):
    """`computing_mask`, less the jobs spending a checkpoint's fixed overhead (``overhead``,
    docs/model.md §1g; None where the run has none)."""
    computing = computing_mask(params, draining, waiting, use_async, snapping)
    return computing if overhead is None else computing & ~overhead


def _users(params: Params, carry: Carry, use_async: bool, reading):
    """``(writers, computing)``: the storage users (writers and recovery reads) and the jobs
    drawing compute power, of the jobs ``params`` has active (a job in a checkpoint's fixed
    overhead is neither, docs/model.md §1g)."""
    writers = params.active & carry.draining
    computing = _computing(params, carry.draining, carry.waiting, use_async, carry.snapping, carry.overhead)
    if reading is not None:
        writers = writers | (params.active & reading)
        computing = computing & ~reading
    return writers, computing


def carries_levels(config: RunConfig) -> bool:
    """Whether a run's rate rules have a water level to carry (`Levels`): the write limits'
    unit-weight filling, or the max-min power rule."""
    return (config.sharing.limits and config.sharing.storage == "fair") or config.sharing.power == "maxmin"


def levels_of(params: Params, carry: Carry, config: RunConfig) -> Levels:
    """The water levels of the state ``carry`` holds (`Levels`), from the jobs up in it."""
    live, reading = _live(params, carry, config)
    writers, computing = _users(live, carry, config.use_async, reading)
    sharing = config.sharing
    write = power = None
    if sharing.limits and sharing.storage == "fair" and params.limit_order is not None:
        write = fill_level(params.throughput[jnp.sum(writers)], params.write_limit, writers, params.limit_order)
    if sharing.power == "maxmin":
        power = controller_load(sharing, live.size, computing, live.cap, live.size_order)
    return Levels(write=write, power=power)


def _live(params: Params, carry: Carry, config: RunConfig):
    """``(live, reading)``: the parameters the rates see (a job that is down is inactive,
    `failures.up_params`) and the jobs re-reading their checkpoint (or None)."""
    if not config.use_failures:
        return params, None
    assert carry.work is not None  # a run with failures tracks each job's work
    reading = None
    if config.use_recovery:
        reading = carry.work.reading
        assert reading is not None and params.recovery_read is not None
    return failures.up_params(params, carry.work), reading


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
    use_snapshot: bool = False,
) -> Carry:
    """Advances one fleet to its next event and switches every job that empties there.

    With a ``horizon`` the step stops there if no event comes first (a pure time advance,
    used to read the state at a fixed time); an event within the snapping tolerance of
    the horizon happens at it (`to_horizon`).

    ``running`` is False for fleets already stopped: they still execute this body (a
    batched while_loop steps all lanes), so it must be safe there — no division by zero,
    no inf − inf — and it must write nothing: their carry is returned unchanged.

    ``sharing`` (static) selects the rate rules of job sizes and sharing policies
    (`ckpt_jax._plan.sharing_for`; default: the base model's anonymous rates);
    ``use_failures`` (static) adds failures and restarts (docs/model.md §1c; the carry
    must come from `init_carry` with ``use_failures=True``); ``use_snapshot`` (static)
    adds two-level checkpoints (docs/model.md §1d; a carry from `init_carry` with
    ``use_snapshot=True``).
    """
    config = RunConfig(
        n_fires=n_fires,
        use_jitter=use_jitter,
        use_delay=use_delay,
        use_async=use_async,
        use_failures=use_failures,
        sharing=sharing,
        use_snapshot=use_snapshot,
    )
    new, fire_slot, end_slot, _, _ = switch(params, carry, running, config, horizon)
    if new.work is not None and carry.work is not None:
        new = new._replace(work=failures.refresh_gaps(params, carry.work, new.work, few=1))
        new = new._replace(work=_refresh_outages(params, carry.work, new.work))
    carry = new
    jobs = jnp.arange(params.compute.shape[0])
    return carry._replace(
        fire_times=carry.fire_times.at[jobs, fire_slot].set(carry.time, mode="drop"),
        end_times=carry.end_times.at[jobs, end_slot].set(carry.time, mode="drop"),
    )


class _Next(NamedTuple):
    """The next event of one fleet (`_next_event`): the rates until it, and when it comes.

    Attributes:
      live: the parameters the rates see (`failures.up_params`: a job that is down is inactive).
      reading: (N,) the jobs re-reading their checkpoint (docs/model.md §1e), or None.
      writers, write_rate, computing, compute_rate: the rates of `rates`; ``computes``: (N,)
        the jobs whose compute rate is positive.
      draw: () the fleet's power draw over the interval (docs/model.md §1d), or None.
      write_dt, compute_dt: (N,) the time to empty each job's drain and compute phase.
      queue_dt: () the time to the next pending controller update, or None.
      failure_dt, restart_dt: (N,) the time to each job's failure and restart end, or None.
      snap_dt: (N,) the time to each snapshot's end, or None.
      outage_dt: (D,) the time to each failure domain's next outage (docs/model.md §1f), or None.
      overhead_dt: (N,) the time to the end of each job's overhead (docs/model.md §1g), or None.
      dt: () the step (0 where the fleet stops or no event is finite); ``finite``: whether
        the event is finite; ``time``: the event's time.
    """

    live: Params
    reading: jax.Array | None
    writers: jax.Array
    write_rate: jax.Array
    computing: jax.Array
    compute_rate: jax.Array
    computes: jax.Array
    draw: jax.Array | None
    write_dt: jax.Array
    compute_dt: jax.Array
    queue_dt: jax.Array | None
    failure_dt: jax.Array | None
    restart_dt: jax.Array | None
    snap_dt: jax.Array | None
    dt: jax.Array
    finite: jax.Array
    time: jax.Array
    outage_dt: jax.Array | None = None
    overhead_dt: jax.Array | None = None


class _Rows(NamedTuple):
    """The per-job rows of one instant as its rules switch them, in order.

    Attributes:
      ends, completes: (N,) the drains that end and the compute phases that complete;
        ``read_ends``: the recovery reads that end (or None).
      draining, waiting, write_left, compute_left: the carry's rows, switched so far.
      end_slot, end_count, fire_slot, fire_count: the trace columns (K: none) and counts.
      fires: (N,) the jobs that fire; ``starts``: the drains that start.
      snapping, snap_end: the snapshot rows (None without two-level checkpoints).
      work: the work accounting (None where not kept); ``read_starts``: the recovery reads
        that start (or None); ``live``: the parameters of the jobs up after the instant.
      requested, queued_at: the queued requests and the storage queue's places.
      released: (N,) the jobs whose checkpoint starts its snapshot or drain now: the firings,
        or with overheads (docs/model.md §1g) the firings without one and the overheads that
        end; None: the firings.
      overhead, overhead_end: the overhead rows (None without overheads).
    """

    ends: jax.Array
    completes: jax.Array
    read_ends: jax.Array | None
    draining: jax.Array
    waiting: jax.Array
    write_left: jax.Array
    compute_left: jax.Array
    end_slot: Any = None
    end_count: Any = None
    fires: Any = None
    fire_slot: Any = None
    fire_count: Any = None
    starts: Any = None
    snapping: Any = None
    snap_end: Any = None
    work: Any = None
    read_starts: Any = None
    live: Any = None
    requested: Any = None
    queued_at: Any = None
    released: Any = None
    overhead: Any = None
    overhead_end: Any = None


def switch(params: Params, carry: Carry, running, config: RunConfig, horizon):
    """`step` without writing the trace buffers: returns (carry, fire_slot, end_slot,
    fires, ends), the last two (N,) masks of the jobs that fired / ended a write.

    ``config`` (static): the run's variants and rate rules (`RunConfig`; the switch reads
    ``n_fires``, ``use_delay``, ``use_jitter``, ``use_async``, ``sharing``,
    ``use_failures``, ``use_snapshot``, ``memory``, ``use_power``, ``use_recovery`` and
    ``fail_while_down``).

    ``fire_slot`` / ``end_slot`` (N,) give the trace column each job's switch at the new
    ``carry.time`` goes to; K (= n_fires) means "nothing to record". The batched loop
    records a whole batch with one flat scatter (`record`).

    With ``use_failures``, failures and restart ends are events too, and a job that is
    down counts nowhere: the rates see it as inactive (`failures.up_params`).

    With ``use_snapshot`` (two-level checkpoints, docs/model.md §1d) a firing starts the
    blocking snapshot (s_i of wall-clock time; neither computing nor writing), and its end
    starts the drain (a writer) and the next compute phase; a fleet without snapshots, or
    with s_i = 0, starts the drain at the firing. ``memory``: failures recover from the
    last snapshot. ``use_power``: the carry's ``draw`` is the fleet's power draw during
    the interval stepped. ``use_recovery``: after its restart a failed job re-reads its
    checkpoint (``Params.recovery_read``) as a storage user, then computes (docs/model.md
    §1e); ``fail_while_down``: failures also hit restarts and reads (§1e).

    Where ``params.overhead`` is given (docs/model.md §1g) a firing with o_i > 0 first blocks
    the job for o_i of wall-clock time; the overhead's end does what the firing would have
    done (start the snapshot, or the drain).
    """
    nxt = _next_event(params, carry, running, config, horizon)
    rows = _advance_phases(params, carry, running, nxt)
    rows = _write_ends_and_firings(carry, config, rows)
    rows = _overheads(params, carry, running, nxt, rows)
    rows = _snapshots(params, carry, running, config, nxt, rows)
    rows = _start_phases(params, config, rows)
    rows = _failures(params, carry, running, config, nxt, rows)
    rows = _grants(params, carry, running, config, nxt, rows)
    queue = _controller_queue(params, carry, running, config, nxt, rows)
    new = _kept(carry, running, nxt, rows, queue)
    if carry.levels is not None:  # the levels of the new state, for the next step's rates
        new = new._replace(levels=levels_of(params, new, config))
    return new, rows.fire_slot, rows.end_slot, rows.fires, rows.ends


def _next_event(params: Params, carry: Carry, running, config: RunConfig, horizon) -> _Next:
    """The rates until the next event and its time: the first drain, compute phase, pending
    controller update, failure or restart end, snapshot end, or the horizon."""
    dtype = params.compute.dtype
    inf = jnp.asarray(jnp.inf, dtype)
    live, reading = _live(params, carry, config)
    writers, write_rate, computing, compute_rate = rates(
        live, carry, config.use_delay, config.use_async, config.sharing, reading
    )
    computes = compute_rate > 0
    draw = carry.draw
    if config.use_power:  # computing: w_i · rate_i; otherwise (a job of the fleet, up or down) p_idle · w_i
        power = jnp.where(computing, params.size * compute_rate, params.idle_power * params.size)
        draw = jnp.sum(jnp.where(params.active, power, 0)).astype(dtype)

    sharing = config.sharing
    if sharing.storage in ONE_AT_A_TIME or sharing.limits:  # a writer may drain at rate 0 (queued)
        write_dt = jnp.where(writers, carry.write_left / jnp.where(writers, write_rate, 1), inf)
    else:
        write_dt = jnp.where(writers, carry.write_left / write_rate, inf)
    compute_dt = jnp.where(computes, carry.compute_left / jnp.where(computes, compute_rate, 1), inf)
    # The per-job times to the next event meet elementwise and are reduced once: one
    # reduction kernel per event, not one per kind of event (a min is exact in any order).
    job_dt = jnp.minimum(write_dt, compute_dt)
    dt = None
    queue_dt = failure_dt = restart_dt = snap_dt = outage_dt = None
    if config.use_delay:
        queue_dt = jnp.where(carry.queue_size > 0, carry.queue_time[carry.queue_head] - carry.time, inf)
        dt = queue_dt
    if config.use_failures:
        assert carry.work is not None  # as above
        failure_dt, restart_dt = failures.event_times(params, carry.work, carry.time)
        job_dt = jnp.minimum(job_dt, jnp.minimum(failure_dt, restart_dt))
        if carry.work.outage is not None:  # common-cause outages (§1f)
            outage_dt = outages.event_dt(params, carry.work.outage, carry.time)
            dt = jnp.min(outage_dt) if dt is None else jnp.minimum(dt, jnp.min(outage_dt))
    if config.use_snapshot:  # a snapshot ends at a wall-clock time, as a restart does
        assert carry.snapping is not None and carry.snap_end is not None
        snap_dt = jnp.where(live.active & carry.snapping, carry.snap_end - carry.time, inf)
        job_dt = jnp.minimum(job_dt, snap_dt)
    overhead_dt = None
    if carry.overhead is not None:  # an overhead ends at a wall-clock time, as a snapshot does (§1g)
        assert carry.overhead_end is not None
        overhead_dt = jnp.where(live.active & carry.overhead, carry.overhead_end - carry.time, inf)
        job_dt = jnp.minimum(job_dt, overhead_dt)
    dt = jnp.min(job_dt) if dt is None else jnp.minimum(jnp.min(job_dt), dt)
    if horizon is not None:  # an event within the snapping tolerance of H happens at H
        dt = to_horizon(dt, carry.time, horizon, dtype)
    finite = jnp.isfinite(dt)
    dt = jnp.where(finite & running, dt, 0)
    time = carry.time + dt if horizon is None else horizon_clock(carry.time, dt, horizon)
    return _Next(
        live=live,
        reading=reading,
        writers=writers,
        write_rate=write_rate,
        computing=computing,
        compute_rate=compute_rate,
        computes=computes,
        draw=draw,
        write_dt=write_dt,
        compute_dt=compute_dt,
        queue_dt=queue_dt,
        failure_dt=failure_dt,
        restart_dt=restart_dt,
        snap_dt=snap_dt,
        dt=dt,
        finite=finite,
        time=time,
        outage_dt=outage_dt,
        overhead_dt=overhead_dt,
    )


def _advance_phases(params: Params, carry: Carry, running, nxt: _Next) -> _Rows:
    """Every drain and compute phase advanced linearly to the event, and those that empty at
    it: to working precision (`snapped`), every job due at this instant switches."""
    dtype = params.compute.dtype
    dt, time, writers, computes = nxt.dt, nxt.time, nxt.writers, nxt.computes
    write_left = jnp.where(writers, carry.write_left - nxt.write_rate * dt, carry.write_left)
    compute_left = jnp.where(computes, carry.compute_left - nxt.compute_rate * dt, carry.compute_left)
    volume = params.write
    if nxt.reading is not None:  # a read's volume sets its snapping scale
        assert params.recovery_read is not None  # as `_next_event` checked
        volume = jnp.where(nxt.reading, params.recovery_read, params.write)
    ends = writers & snapped(nxt.write_dt, write_left, volume, dt, time, dtype)
    completes = computes & snapped(nxt.compute_dt, compute_left, params.compute, dt, time, dtype)
    ends = ends & running & nxt.finite
    completes = completes & running & nxt.finite
    read_ends = None
    if nxt.reading is not None:  # a recovery read that ends: the job computes from now (§1e)
        read_ends = ends & nxt.reading
        ends = ends & ~nxt.reading
    return _Rows(ends, completes, read_ends, carry.draining, carry.waiting, write_left, compute_left)


def _write_ends_and_firings(carry: Carry, config: RunConfig, rows: _Rows) -> _Rows:
    """The drains that end, and the firings they and the compute completions make."""
    n_fires, ends, completes = config.n_fires, rows.ends, rows.completes
    # (1) drains that end: record the end of the write started by the latest firing.
    record_end = ends & (carry.fire_count >= 1) & (carry.fire_count <= n_fires)
    end_slot = jnp.where(record_end, carry.fire_count - 1, n_fires)  # n_fires = dropped
    end_count = carry.end_count + record_end.astype(jnp.int32)
    draining = carry.draining & ~ends
    # (2) compute completions fire, unless the previous write still drains (then wait);
    # (3) jobs that were waiting fire the instant their drain ends.
    if config.use_async:
        fires = (completes & ~draining) | (carry.waiting & ends)
        waiting = (carry.waiting | (completes & draining)) & ~fires
    elif config.queue:  # a compute end is a request; the firing is its grant (`requests`, §1e)
        fires = jnp.zeros_like(completes)
        waiting = carry.waiting
    else:  # α = 0: only computing (non-draining) jobs complete, and nobody waits
        fires = completes
        waiting = carry.waiting
    fire_slot = jnp.where(fires & (carry.fire_count < n_fires), carry.fire_count, n_fires)
    fire_count = carry.fire_count + fires.astype(jnp.int32)
    return rows._replace(
        end_slot=end_slot,
        end_count=end_count,
        draining=draining,
        waiting=waiting,
        fires=fires,
        fire_slot=fire_slot,
        fire_count=fire_count,
    )


def _overheads(params: Params, carry: Carry, running, nxt: _Next, rows: _Rows) -> _Rows:
    """The fixed checkpoint overhead (docs/model.md §1g): a firing with o_i > 0 blocks its job
    for o_i; the overheads that end release their checkpoint (`_Rows.released`), as the other
    firings do at once."""
    if carry.overhead is None:
        return rows
    assert params.overhead is not None and carry.overhead_end is not None
    dtype = params.compute.dtype
    ends = carry.overhead & running & nxt.finite & snapped(nxt.overhead_dt, 1.0, 0.0, nxt.dt, nxt.time, dtype)
    blocks = rows.fires & (params.overhead > 0)
    return rows._replace(
        released=(rows.fires & ~blocks) | ends,
        overhead=(carry.overhead & ~ends) | blocks,
        overhead_end=jnp.where(blocks, nxt.time + params.overhead, carry.overhead_end),
    )


def _snapshots(params: Params, carry: Carry, running, config: RunConfig, nxt: _Next, rows: _Rows) -> _Rows:
    """Two-level checkpoints (docs/model.md §1d): snapshots that end start their drain; a
    firing (or an overhead's end, §1g: `_Rows.released`) starts a snapshot. Elsewhere it
    starts the drain itself."""
    released = rows.fires if rows.released is None else rows.released
    if not config.use_snapshot:
        return rows._replace(starts=released, snapping=carry.snapping, snap_end=carry.snap_end)
    assert carry.snapping is not None and carry.snap_end is not None
    dtype = params.compute.dtype
    snap_ends = carry.snapping & running & nxt.finite & snapped(nxt.snap_dt, 1.0, 0.0, nxt.dt, nxt.time, dtype)
    snaps = released & params.two_level & (params.snapshot > 0)
    starts = (released & ~snaps) | snap_ends
    snapping = (carry.snapping & ~snap_ends) | snaps
    snap_end = jnp.where(snaps, nxt.time + params.snapshot, carry.snap_end)
    return rows._replace(starts=starts, snapping=snapping, snap_end=snap_end)


def _start_phases(params: Params, config: RunConfig, rows: _Rows) -> _Rows:
    """The drains that start, and the next compute phase of the jobs that fired."""
    draining = rows.draining | rows.starts
    if config.use_jitter:
        next_work = jitter_works(params.job_keys, params.compute, params.jitter, rows.fire_count)
    else:
        next_work = params.compute
    write_left = jnp.where(rows.starts, params.write, jnp.where(rows.ends, 0, rows.write_left))
    if rows.read_ends is not None:
        write_left = jnp.where(rows.read_ends, 0, write_left)
    # A requesting job computes its next phase at once (§1e); elsewhere a compute end waits.
    fresh = rows.fires | (rows.completes & config.queue)
    compute_left = jnp.where(fresh, next_work, jnp.where(rows.completes, 0, rows.compute_left))
    return rows._replace(draining=draining, write_left=write_left, compute_left=compute_left)


def _failures(params: Params, carry: Carry, running, config: RunConfig, nxt: _Next, rows: _Rows) -> _Rows:
    """The work accounting, then restart ends and failures (docs/model.md §1c,
    `failures.switch`), where the run keeps it."""
    if carry.work is None:
        return rows._replace(work=None, read_starts=None, live=nxt.live)
    work, draining, waiting, write_left, compute_left, snapping, read_starts = failures.switch(
        params,
        carry.work,
        time=nxt.time,
        dt=nxt.dt,
        running=running & nxt.finite,
        completes=rows.completes,
        fires=rows.fires,
        ends=rows.ends,
        draining=rows.draining,
        waiting=rows.waiting,
        write_left=rows.write_left,
        compute_left=rows.compute_left,
        fire_count=rows.fire_count,
        use_failures=config.use_failures,
        use_jitter=config.use_jitter,
        snapping=rows.snapping,
        starts=rows.starts & params.two_level if config.use_snapshot else None,
        memory=config.memory,
        read_ends=rows.read_ends,
        fail_while_down=config.fail_while_down,
        **(dict(failure_dt=nxt.failure_dt, restart_dt=nxt.restart_dt) if config.use_failures else {}),
        outage_dt=nxt.outage_dt,
        overhead=rows.overhead,
    )
    overhead = rows.overhead
    if overhead is not None and config.use_failures:  # a failed job abandons its overhead too (§1g)
        overhead = overhead & ~failures.failed(carry.work, work)
    return rows._replace(
        overhead=overhead,
        work=work,
        draining=draining,
        waiting=waiting,
        write_left=write_left,
        compute_left=compute_left,
        snapping=snapping,
        read_starts=read_starts,
        live=failures.up_params(params, work) if config.use_failures else params,
    )


def _grants(params: Params, carry: Carry, running, config: RunConfig, nxt: _Next, rows: _Rows) -> _Rows:
    """The storage queue: under a queueing policy a waiting request is granted once the
    storage is free (docs/model.md §1e, `requests.grant`); under "fcfs" writes, and
    recovery reads, take their place when they start."""
    requested, queued_at = carry.requested, carry.queued_at
    if config.queue:
        work = rows.work
        assert work is not None and carry.work is not None and requested is not None  # `RunConfig.track_work`
        work, requested, queued_at, draining, write_left, compute_left, fires = requests.grant(
            params,
            config.sharing.storage,
            work,
            time=nxt.time,
            running=running & nxt.finite,
            up=rows.live.active,
            failed=failures.failed(carry.work, work),
            completes=rows.completes,
            requested=requested,
            queued_at=queued_at,
            draining=rows.draining,
            write_left=rows.write_left,
            compute_left=rows.compute_left,
        )
        n_fires, fire_count = config.n_fires, rows.fire_count
        fire_slot = jnp.where(fires & (fire_count < n_fires), fire_count, n_fires)
        fire_count = fire_count + fires.astype(jnp.int32)
        return rows._replace(
            work=work,
            requested=requested,
            queued_at=queued_at,
            draining=draining,
            write_left=write_left,
            compute_left=compute_left,
            fires=fires,
            fire_slot=fire_slot,
            fire_count=fire_count,
        )
    if config.sharing.storage == "fcfs":
        starts = rows.starts if rows.read_starts is None else rows.starts | rows.read_starts
        queued_at = jnp.where(starts, nxt.time, queued_at)
    return rows._replace(requested=requested, queued_at=queued_at)


def _controller_queue(params: Params, carry: Carry, running, config: RunConfig, nxt: _Next, rows: _Rows):
    """The delayed controller (docs/model.md §1): the update due at this instant applies,
    and a change of the computing load is queued to apply τ later (a ring buffer; a full
    one sets `Status.QUEUE_OVERFLOW`). Returns ``(applied_computing, queue_time,
    queue_count, queue_head, queue_size, status)``."""
    applied = carry.applied_computing
    queue_time, queue_count = carry.queue_time, carry.queue_count
    queue_head, queue_size = carry.queue_head, carry.queue_size
    status = carry.status
    if config.use_delay:
        dtype, sharing, time = params.compute.dtype, config.sharing, nxt.time
        capacity = queue_time.shape[0]
        # A pending controller update due at this instant (the time half of the snap rule).
        pop = running & (queue_size > 0) & snapped(nxt.queue_dt, 1.0, 0.0, nxt.dt, time, dtype)
        applied = jnp.where(pop, queue_count[queue_head], applied)
        queue_head = jnp.where(pop, (queue_head + 1) % capacity, queue_head)
        queue_size = queue_size - pop.astype(jnp.int32)
        now_computing = _computing(
            rows.live, rows.draining, rows.waiting, config.use_async, rows.snapping, rows.overhead
        )
        if rows.read_starts is not None:
            assert rows.work is not None and rows.work.reading is not None
            now_computing = now_computing & ~rows.work.reading
        new_computing = controller_load(sharing, params.size, now_computing, params.cap, params.size_order)
        changed = new_computing != controller_load(sharing, params.size, nxt.computing, params.cap, params.size_order)
        if sharing.power != "count":
            # A change of the count is an update even where the level stays (as in the
            # base model, so unit sizes schedule the same updates).
            changed = changed | (jnp.sum(now_computing) != jnp.sum(nxt.computing))
        push = running & (params.delay > 0) & changed
        overflow = push & (queue_size >= capacity)
        slot = (queue_head + queue_size) % capacity
        queue_time = jnp.where(push & ~overflow, queue_time.at[slot].set(time + params.delay), queue_time)
        queue_count = jnp.where(push & ~overflow, queue_count.at[slot].set(new_computing), queue_count)
        queue_size = queue_size + (push & ~overflow).astype(jnp.int32)
        status = status | flag(overflow, Status.QUEUE_OVERFLOW)
    status = status | flag(running & ~nxt.finite, Status.NONFINITE)
    return applied, queue_time, queue_count, queue_head, queue_size, status


def _kept(carry: Carry, running, nxt: _Next, rows: _Rows, queue) -> Carry:
    """The carry after the instant: a fleet that is not running keeps its rows."""
    applied, queue_time, queue_count, queue_head, queue_size, status = queue

    def keep(new, old):
        return jnp.where(running, new, old)

    return Carry(
        time=nxt.time,
        draining=keep(rows.draining, carry.draining),
        waiting=keep(rows.waiting, carry.waiting),
        write_left=keep(rows.write_left, carry.write_left),
        compute_left=keep(rows.compute_left, carry.compute_left),
        fire_count=rows.fire_count,
        end_count=rows.end_count,
        fire_times=carry.fire_times,
        end_times=carry.end_times,
        queued_at=keep(rows.queued_at, carry.queued_at),
        applied_computing=applied,
        queue_time=queue_time,
        queue_count=queue_count,
        queue_head=queue_head,
        queue_size=queue_size,
        n_events=carry.n_events + running.astype(jnp.int32),
        status=status.astype(jnp.int32),
        work=rows.work,
        snapping=None if rows.snapping is None else keep(rows.snapping, carry.snapping),
        snap_end=None if rows.snap_end is None else keep(rows.snap_end, carry.snap_end),
        draw=None if nxt.draw is None else keep(nxt.draw, carry.draw),
        requested=None if rows.requested is None else keep(rows.requested, carry.requested),
        overhead=None if rows.overhead is None else keep(rows.overhead, carry.overhead),
        overhead_end=None if rows.overhead_end is None else keep(rows.overhead_end, carry.overhead_end),
    )


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


def _refresh_outages(params: Params, before: failures.WorkCarry, after: failures.WorkCarry | None):
    """``after`` with the next outage of each domain struck at the instant (docs/model.md §1f)."""
    if after is None or after.outage is None:
        return after
    return after._replace(outage=outages.refresh(params, before.outage, after.outage))


class GeneralLoop:
    """The general loop as a `ckpt_jax._loops.driver.Loop`: a batch of fleets (leading
    axis B), every fleet stepped by the vmapped single-fleet `switch`, the trace written by
    one flat scatter per field (`record`)."""

    def __init__(self, config: RunConfig, params: Params, horizon):
        self.config, self.params = config, params
        self.horizon = horizon if config.until else None
        self.n_active = jnp.sum(params.active, axis=1).astype(jnp.int32)
        # W, the fleet's full draw (docs/model.md §1d): the power observer's default scale.
        self.full_draw = jnp.sum(jnp.where(params.active, params.size, 0), axis=1) if config.use_power else None

    def info(self) -> LoopInfo:
        # Two-level checkpoints: a firing starts a snapshot, not a write, so the jobs
        # observer accumulates write time per interval, as it does where writes are abandoned.
        # So do overheads (docs/model.md §1g): the time from a firing to its write's end is not the write's.
        config = self.config
        abandons = config.use_failures or config.use_snapshot or self.params.overhead is not None
        return loop_info(config, self.params, abandons=abandons)

    def init(self, phase, remaining) -> Carry:
        """The carry at t = 0: with the work accounting where `RunConfig.track_work`."""
        config = self.config
        init = functools.partial(
            init_carry,
            n_fires=config.trace_len,
            queue_size=config.queue_size,
            use_jitter=config.use_jitter,
            sharing=config.sharing,
            track_work=config.track_work,
            use_failures=config.use_failures,
            use_snapshot=config.use_snapshot,
            memory=config.memory,
            use_power=config.use_power,
            use_recovery=config.use_recovery,
        )
        carry = jax.vmap(init)(self.params, phase, remaining)
        if carries_levels(config):  # the water levels ride in the carry (module docstring)
            carry = carry._replace(levels=jax.vmap(functools.partial(levels_of, config=config))(self.params, carry))
        return carry

    def step(self, carry: Carry, running, event_limit):
        """Every running fleet to its next event instant; returns ``(carry, events.Instant)``."""
        config = self.config
        one = functools.partial(switch, config=config)
        if self.horizon is None:
            new, fire_slot, end_slot, fires, ends = jax.vmap(lambda p, c, r: one(p, c, r, horizon=None))(
                self.params, carry, running
            )
        else:
            new, fire_slot, end_slot, fires, ends = jax.vmap(lambda p, c, r, h: one(p, c, r, horizon=h))(
                self.params, carry, running, self.horizon
            )
        if new.work is not None and carry.work is not None:  # draws for the next failures of the jobs that failed
            few = max(4, self.params.compute.shape[0] // 8)
            new = new._replace(work=failures.refresh_gaps(self.params, carry.work, new.work, few))
            new = new._replace(work=_refresh_outages(self.params, carry.work, new.work))
        new = new._replace(
            fire_times=record(new.fire_times, fire_slot, new.time),
            end_times=record(new.end_times, end_slot, new.time),
        )
        return new, Instant.of(carry, running, fires, ends, new.draw)

    def no_event(self, carry: Carry) -> Instant:
        return Instant.none(carry)

    def view(self, event: Instant, after: Carry) -> EventView:
        return event.view(self.params, after, self.config.n_fires, self.n_active, self.config.use_async, self.full_draw)

    def unfinished(self, carry: Carry, event: Instant | None):
        """Not done: every job completed K writes, or the horizon is reached."""
        if self.horizon is not None:
            return carry.time < self.horizon
        return ~jax.vmap(done, in_axes=(0, 0, None))(carry, self.params.active, self.config.n_fires)

    def within_budget(self, carry: Carry, event_limit):
        return carry.n_events < event_limit

    def progress(self, carry: Carry):
        """How far the slowest fleet got, in [0, 1]: with ``until`` the fraction of its
        horizon, else the fewest completed writes of an active job over K."""
        if self.horizon is not None:
            return jnp.minimum(1, jnp.min(carry.time / self.horizon))
        n_fires = self.config.n_fires
        return jnp.min(jnp.where(self.params.active, jnp.minimum(carry.end_count, n_fires), n_fires)) / n_fires

    def final(self, carry: Carry) -> LoopResult:
        """The `LoopResult` of the final carry. Without failures the completed writes are the
        firings less the write still open (`FinalView.writes`)."""
        params = self.params
        writing = params.active & carry.draining
        complete = jax.vmap(done, in_axes=(0, 0, None))(carry, params.active, self.config.n_fires)
        return loop_result(
            params,
            self.horizon,
            time=carry.time,
            fire_times=carry.fire_times,
            end_times=carry.end_times,
            complete=complete,
            n_events=carry.n_events,
            status=carry.status,
            n_writers=jnp.sum(writing, axis=1).astype(jnp.int32),
            fire_count=carry.fire_count,
            writing=writing,
            # A job in its overhead at the stop has fired and not written (§1g): the
            # observer counts the write ends itself, as with failures.
            abandons=self.config.use_failures or self.params.overhead is not None,
            work=carry.work,
            compute_left=carry.compute_left,
        )
