"""Failures and restarts in the general loop (docs/model.md §1c), and the per-job work
accounting that the jobs observer reports (useful work, lost work, failures, time down).

Job i fails as a Poisson process of rate 1/M_i in wall-clock time, except while it is down.
Failures are events of the exact loop like the others: the carry holds each job's next
failure time (and, while it is down, its restart end), and `event_times` hands the loop the
time to each, so ``dt`` is the minimum over every job's next event, failures included.

Draws. Failure number n of a job (0-based) happens at the time drawn with index n from the
job's failure stream ``fold_in(fold_in(job_key, FAILURE_STREAM), n)``, where ``job_key`` is
the job's key of `Params.job_keys` (derived from the run's key, the fleet's flat index plus
``fleet_offset``, and the job index): the same fleet gets the same failures in any batch
layout and on any device count. Because failures are memoryless and do not happen while a
job is down, the first failure is at Exp(M_i) from t = 0 and failure n + 1 at
``restart end of failure n + Exp(M_i)``. `FAILURE_STREAM` (2³¹) lies above every cycle index
that `jitter_work` folds in (< 2³⁰), so jitter and failure draws never share a key.

Explicit failure times (``simulate(..., failure_times=...)``, `Params.failure_times`, (N, F)
per fleet, sorted and padded with +inf) replace the draws, as the reference integrator takes
them: the next failure of a job is the first listed time at or after its restart end (a
listed time inside the down period [t_f, t_f + R_i) is discarded) and after the failure t_f
just taken. The listed times are sorted, so the ones passed over are a prefix of the row and
their count is the job's cursor into it; the failure time itself, not the clock (which can
differ from it by an ulp), starts the down period.

At a failure, everything due at that instant has already switched (write ends, firings,
restart ends): the job then loses its compute work since its last completed write (the
current phase's progress, plus the whole cycle its write in progress would have saved),
abandons that write, and is down for R_i (not counted in n_w or n_c). It then computes the
lost cycle again from the start: T_i, or with jitter the same draw as the lost cycle had
(redo of compute phase c uses `jitter_work` index c, where c is the job's fire count, less
one if its write was in progress: that write covered phase c − 1).

Recovery reads and failures while down (docs/model.md §1e). With ``recovery_read`` r_i > 0
the restart's end (the failure itself where R_i = 0) starts a read of r_i: the job is then a
storage user (``WorkCarry.reading``; the loop counts it in n_w and shares f with the writers)
that does not compute, and the read's end resumes its lost cycle. Its time counts as time down.
Without ``fail_while_down`` the failure clock is off during the restart and the read: the next
failure is drawn at the read's end (memoryless, so ``read end + Exp(M_i)``, with the same index
as before; listed times inside the recovery are discarded). With ``fail_while_down`` the clock
never stops: failure n + 1 comes at ``failure n + Exp(M_i)`` (the first listed time after it),
and one that hits a job in its restart or read starts the recovery over (R_i, then the read);
it loses nothing, as the job has computed nothing since.

The accounting keeps exact sums: a compute phase adds its full work (``phase_work``) when it
completes, so without failures the useful work of a deterministic job is exactly its
completed writes times T_i (after a start at a full phase).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import jax.scipy.special

from .._params import Params
from .._snapping import snapped
from . import jitter_works, outages

__all__ = ["FAILURE_STREAM", "WorkCarry", "init", "up_params", "event_times", "switch", "refresh_gaps", "failed"]

FAILURE_STREAM = 2**31


class WorkCarry(NamedTuple):
    """Per-job failure state and work accounting of one fleet (all (N,)).

    Attributes:
      down: the job is restarting after a failure (neither computing nor writing).
      up_at: when its restart ends (meaningful where ``down``).
      next_failure: time of its next failure (inf without failures or for padding slots).
      phase_work: the work its current compute phase started with (0 while waiting).
      uncovered: work of completed compute phases not yet in a write (async: the phase
        done while the previous write still drains).
      pending: work the write in progress will save when it completes.
      useful_work, lost_work, down_time: totals since t = 0.
      failures: int32 failures since t = 0.
      persisted: work covered by checkpoints whose drain ended, where useful work counts
        at the snapshot (two-level checkpoints recovered from memory, docs/model.md §1d);
        else None (it is the useful work).
      safe: (N,) bool, the checkpoint in progress has completed its snapshot (its work is
        useful already; with ``persisted`` only).
      reading: (N,) bool, the job re-reads its checkpoint after a restart (docs/model.md
        §1e; the loop keeps the volume left in its ``write_left``), or None where no job reads.
      next_gap: (N,) the standard exponential draw its next failure will use (number
        ``failures + 1`` of its stream), drawn ahead by `refresh_gaps` so that an event draws
        only for the jobs that failed at it; None with listed failure times or recovery reads
        (there `failure_time` draws at the failure).
      outage: the failure domains' outage state (`outages.OutageCarry`, docs/model.md §1f),
        or None without outages. ``failures`` counts the job's own failures only (the index
        of its failure stream); ``outage.failures`` those outages caused.
    """

    down: jax.Array
    up_at: jax.Array
    next_failure: jax.Array
    phase_work: jax.Array
    uncovered: jax.Array
    pending: jax.Array
    useful_work: jax.Array
    lost_work: jax.Array
    down_time: jax.Array
    failures: jax.Array
    persisted: jax.Array | None = None
    safe: jax.Array | None = None
    reading: jax.Array | None = None
    next_gap: jax.Array | None = None
    outage: outages.OutageCarry | None = None


def _draw_gap(job_key, n, dtype):
    """The standard exponential draw number ``n`` of a job's failure stream."""
    key = jax.random.fold_in(jax.random.fold_in(job_key, FAILURE_STREAM), n)
    return jax.random.exponential(key, (), dtype)


def _gaps(params: Params, index):
    """(..., N) each job's draw number ``index`` ((..., N) ints) of its failure stream."""
    keys, flat = params.job_keys.reshape(-1), index.reshape(-1).astype(jnp.uint32)
    draws = jax.vmap(lambda k, n: _draw_gap(k, n, params.compute.dtype))(keys, flat)
    return draws.reshape(index.shape)


def _after(params: Params, after, gap):
    """``after + gap·M_i`` where a job fails at all, inf elsewhere. Masked before the product:
    Exp · inf would be NaN where the draw is 0. With Weibull shapes (`Params.failure_shape`,
    docs/model.md §1f) the standard exponential draw E becomes E^(1/k) / Γ(1 + 1/k), a Weibull
    variable of shape k and mean 1 (E itself where k = 1)."""
    fails = params.active & jnp.isfinite(params.mtbf)
    if params.failure_shape is not None:
        gap = _weibull_gap(gap, params.failure_shape)
    return jnp.where(fails, after + gap * jnp.where(fails, params.mtbf, 1), jnp.inf).astype(params.compute.dtype)


def _weibull_gap(gap, shape):
    """The standard exponential draws ``gap`` turned into Weibull draws of shape ``shape`` and
    mean 1: P(E^(1/k) > x) = exp(−x^k), and E[E^(1/k)] = Γ(1 + 1/k)."""
    inverse = 1 / shape
    mean = jnp.exp(jax.scipy.special.gammaln(1 + inverse))
    return jnp.where(shape == 1, gap, gap**inverse / mean).astype(gap.dtype)


def failure_time(params: Params, after, index, failed_at=None):
    """(N,) the time of each job's failure number ``index`` ((N,) ints), given that the
    job is up from ``after`` on: ``after + Exp(M_i)`` from the job's failure stream.

    With explicit failure times (`Params.failure_times`) ``index`` is not used: the first
    listed time at or after ``after`` and, where given, after ``failed_at`` (the failure
    just taken, which with R_i = 0 is also at ``after``); inf where the list runs out."""
    dtype = params.compute.dtype
    if params.failure_times is not None:
        listed = params.failure_times
        passed = listed < after[:, None]
        if failed_at is not None:
            passed = passed | (listed <= failed_at[:, None])
        cursor = jnp.sum(passed, axis=-1)  # sorted rows: the times passed over are a prefix
        padded = jnp.concatenate([listed, jnp.full(listed.shape[:-1] + (1,), jnp.inf, listed.dtype)], axis=-1)
        upcoming = jnp.take_along_axis(padded, cursor[:, None], axis=-1)[:, 0]
        return jnp.where(params.active, upcoming, jnp.inf).astype(dtype)

    return _after(params, after, _gaps(params, index))


def init(
    params: Params, compute_left, use_failures: bool, memory: bool = False, use_recovery: bool = False
) -> WorkCarry:
    """The accounting at t = 0. Work done before t = 0 counts nowhere: an initial write
    saves nothing, an initially computing job's first write saves only what it computed
    after t = 0 (its ``remaining``). ``memory``: two-level checkpoints recovered from
    memory (useful work counts at the snapshot, persisted work at the drain's end);
    ``use_recovery``: the recovery reads' state (docs/model.md §1e)."""
    dtype = params.compute.dtype
    n_jobs = params.compute.shape[0]
    zeros = jnp.zeros(n_jobs, dtype)
    ahead = use_failures and not use_recovery and params.failure_times is None
    first = (
        failure_time(params, zeros, jnp.zeros(n_jobs, jnp.int32)) if use_failures else jnp.full(n_jobs, jnp.inf, dtype)
    )
    return WorkCarry(
        down=jnp.zeros(n_jobs, bool),
        up_at=zeros,
        next_failure=first,
        phase_work=compute_left.astype(dtype),
        uncovered=zeros,
        pending=zeros,
        useful_work=zeros,
        lost_work=zeros,
        down_time=zeros,
        failures=jnp.zeros(n_jobs, jnp.int32),
        persisted=zeros if memory else None,
        safe=jnp.zeros(n_jobs, bool) if memory else None,
        reading=jnp.zeros(n_jobs, bool) if use_recovery and use_failures else None,
        next_gap=_gaps(params, jnp.ones(n_jobs, jnp.int32)) if ahead else None,
        outage=outages.init(params) if use_failures and params.outages is not None else None,
    )


def up_params(params: Params, work: WorkCarry) -> Params:
    """``params`` with the jobs that are down made inactive: the rate rules then count them
    in neither n_w nor n_c (docs/model.md §1c)."""
    return params._replace(active=params.active & ~work.down)


def event_times(params: Params, work: WorkCarry, time):
    """(failure_dt, restart_dt), (N,) each: time to each job's next failure and to the end
    of its restart (inf where none). A job's next failure comes after its restart end, so
    the minimum over both is the next failure or restart event."""
    inf = jnp.asarray(jnp.inf, params.compute.dtype)
    failure_dt = jnp.where(params.active, work.next_failure - time, inf)
    restart_dt = jnp.where(params.active & work.down, work.up_at - time, inf)
    return failure_dt, restart_dt


class _Instant(NamedTuple):
    """What the loop switched at this instant, as `switch` receives it (all (N,) but the
    scalars ``time``, ``dt``, ``running``).

    Attributes:
      time, dt, running: the instant, the step that reached it, and whether the lane steps.
      completes, fires, ends: the compute phases that completed, the firings, the drains that
        ended; ``starts``: the two-level snapshots that ended (their drain starts), or None.
      draining, waiting, write_left, compute_left, fire_count, snapping: the loop's rows after
        its switches (``snapping`` None without two-level checkpoints).
      read_ends: the recovery reads that ended, or None.
      failure_dt, restart_dt: the time to each job's failure and restart end (with failures).
      outage_dt: (D,) the time to each domain's next outage (with outages), else None.
      overhead: the jobs spending a checkpoint's fixed overhead after the loop's switches
        (docs/model.md §1g), or None.
    """

    time: jax.Array
    dt: jax.Array
    running: jax.Array
    completes: jax.Array
    fires: jax.Array
    ends: jax.Array
    draining: jax.Array
    waiting: jax.Array
    write_left: jax.Array
    compute_left: jax.Array
    fire_count: jax.Array
    snapping: jax.Array | None
    starts: jax.Array | None
    read_ends: jax.Array | None
    failure_dt: jax.Array | None
    restart_dt: jax.Array | None
    outage_dt: jax.Array | None = None
    overhead: jax.Array | None = None


def switch(
    params: Params,
    work: WorkCarry,
    *,
    time,
    dt,
    running,
    completes,
    fires,
    ends,
    draining,
    waiting,
    write_left,
    compute_left,
    fire_count,
    use_failures: bool,
    use_jitter: bool,
    failure_dt=None,
    restart_dt=None,
    snapping=None,
    starts=None,
    memory: bool = False,
    read_ends=None,
    fail_while_down: bool = False,
    outage_dt=None,
    overhead=None,
):
    """The accounting of one instant, after the loop's write ends, snapshot ends and
    firings, then (with ``use_failures``) its restart ends and failures, in that order.

    ``snapping``: the two-level jobs taking a snapshot after the instant's switches, or
    None; ``starts``: the two-level jobs whose snapshot ended at this instant (their drain
    starts). With ``memory`` (docs/model.md §1d) a checkpoint's work is useful when its
    snapshot ends and persisted when its drain ends, and a failure keeps it from then on.

    ``read_ends``: the recovery reads that ended at this instant (where ``work.reading`` is
    kept, docs/model.md §1e); ``fail_while_down``: failures hit restarts and reads too.
    ``overhead``: the jobs spending a checkpoint's fixed overhead (docs/model.md §1g), or
    None: a failure there loses what one during the write loses (the loop clears the rows).

    Returns ``(work, draining, waiting, write_left, compute_left, snapping, read_starts)``:
    the failed jobs have abandoned their snapshot or write and restart their lost cycle;
    ``read_starts`` (the reads that start at this instant, their ``write_left`` set to r_i) is
    None without recovery reads. Lanes not ``running`` are returned unchanged (a batched
    while_loop steps them too).
    """
    now = _Instant(
        time=time,
        dt=dt,
        running=running,
        completes=completes,
        fires=fires,
        ends=ends,
        draining=draining,
        waiting=waiting,
        write_left=write_left,
        compute_left=compute_left,
        fire_count=fire_count,
        snapping=snapping,
        starts=starts,
        read_ends=read_ends,
        failure_dt=failure_dt,
        restart_dt=restart_dt,
        outage_dt=outage_dt,
        overhead=overhead,
    )
    new = _account(params, work, now, memory)
    read_starts = None
    if use_failures:
        new, now, read_starts = _failures(params, work, new, now, use_jitter, fail_while_down)
    new = jax.tree_util.tree_map(lambda a, b: jnp.where(running, a, b), new, work)
    return new, now.draining, now.waiting, now.write_left, now.compute_left, now.snapping, read_starts


def _account(params: Params, work: WorkCarry, now: _Instant, memory: bool) -> WorkCarry:
    """The work accounting of the instant's write ends, compute completions and firings,
    and the time down of the step that reached it."""
    dtype = params.compute.dtype
    recovering = work.down if work.reading is None else work.down | work.reading
    down_time = work.down_time + jnp.where(recovering & now.running, now.dt, 0).astype(dtype)
    ends, fires, starts = now.ends, now.fires, now.starts
    # A completed write saves the work its firing moved into ``pending``; a completed
    # compute phase adds its full work; a firing moves the uncovered work into its write.
    persisted, safe = work.persisted, work.safe
    if memory:  # the work of a safe checkpoint is useful already
        assert persisted is not None and safe is not None and starts is not None
        persisted = persisted + jnp.where(ends, work.pending, 0)
        useful = work.useful_work + jnp.where(ends & ~safe, work.pending, 0)
        safe = safe & ~ends
    else:
        useful = work.useful_work + jnp.where(ends, work.pending, 0)
    pending = jnp.where(ends, 0, work.pending)
    uncovered = work.uncovered + jnp.where(now.completes, work.phase_work, 0)
    pending = jnp.where(fires, uncovered, pending)
    uncovered = jnp.where(fires, 0, uncovered)
    if memory:  # a snapshot that ends (at its firing where s_i = 0) makes its work safe
        assert safe is not None and starts is not None
        safe = (safe & ~fires) | starts
        useful = useful + jnp.where(starts, pending, 0)
    phase_work = jnp.where(fires | now.completes, now.compute_left, work.phase_work)
    return work._replace(
        phase_work=phase_work,
        uncovered=uncovered,
        pending=pending,
        useful_work=useful,
        down_time=down_time,
        persisted=persisted,
        safe=safe,
    )


def _failures(params: Params, work: WorkCarry, new: WorkCarry, now: _Instant, use_jitter: bool, fail_while_down: bool):
    """Restart ends (and recovery reads), then failures (docs/model.md §1c, §1e), after the
    accounting ``new``: returns ``(work, now, read_starts)``, the rows of ``now`` switched."""
    restarts, down, reading, reads, next_failure = _restart_ends(params, work, now, fail_while_down)
    hit = params.active if fail_while_down else params.active & ~down
    fails = now.running & hit & snapped(now.failure_dt, 1.0, 0.0, now.dt, now.time, params.compute.dtype)
    own, restart, strike = fails, params.restart, None
    if work.outage is not None:  # common-cause outages (§1f): more jobs fail, some restart later
        strike = _strike(params, work, now, fails, down, reading, next_failure, fail_while_down)
        fails, restart, next_failure = fails | strike.jobs, params.restart + strike.stagger, strike.next_failure
    progress = new.phase_work - now.compute_left
    exposed = new.pending if new.safe is None else jnp.where(new.safe, 0, new.pending)
    lost = work.lost_work + jnp.where(fails, exposed + new.uncovered + progress, 0)
    redo = _redo(params, new, now, use_jitter)
    back, upcoming = _next_failure(params, work, now, fail_while_down, restart)
    if strike is not None:
        back, upcoming = _after_outage(params, work, strike, back, upcoming, restart, next_failure, fail_while_down)
    write_left, read_starts = now.write_left, None
    if reading is not None:
        upcoming, reading, write_left, read_starts = _reads_after(
            params, now, reading, reads, restarts, fails, upcoming, fail_while_down, restart
        )
    next_failure = jnp.where(fails, upcoming, next_failure)
    failed = WorkCarry(
        down=down | (fails & (restart > 0)),
        up_at=jnp.where(fails, back, work.up_at),
        next_failure=next_failure,
        phase_work=jnp.where(fails, redo, new.phase_work),
        uncovered=jnp.where(fails, 0, new.uncovered),
        pending=jnp.where(fails, 0, new.pending),
        useful_work=new.useful_work,
        lost_work=lost,
        down_time=new.down_time,
        failures=work.failures + own.astype(jnp.int32),
        persisted=new.persisted,
        safe=None if new.safe is None else new.safe & ~fails,
        reading=reading,
        next_gap=work.next_gap,
        outage=None
        if strike is None
        else _outage_after(params, work, new, strike, fails, lost, down, now, reads, fail_while_down),
    )
    # The failed jobs abandon their snapshot or write and restart their lost cycle.
    draining = now.draining & ~fails
    snapping = None if now.snapping is None else now.snapping & ~fails
    waiting = now.waiting & ~fails
    if reading is None:
        write_left = jnp.where(fails, 0, write_left)
    compute_left = jnp.where(fails, redo, now.compute_left)
    now = now._replace(
        draining=draining, waiting=waiting, write_left=write_left, compute_left=compute_left, snapping=snapping
    )
    return failed, now, read_starts


def _restart_ends(params: Params, work: WorkCarry, now: _Instant, fail_while_down: bool):
    """The restarts that end at this instant, and with recovery reads (§1e) the reads that
    end and those the restarts start. Returns ``(restarts, down, reading, reads,
    next_failure)``: ``reads`` (the jobs with r_i > 0) and ``reading`` are None without
    recovery reads; without ``fail_while_down`` the failure clock starts again where a read
    ends."""
    restarts = now.running & work.down & snapped(now.restart_dt, 1.0, 0.0, now.dt, now.time, params.compute.dtype)
    down = work.down & ~restarts
    reading, reads, next_failure = work.reading, None, work.next_failure
    if reading is not None:  # reads end, restarts start reads (§1e)
        read_volume = params.recovery_read
        assert now.read_ends is not None and read_volume is not None
        reads = read_volume > 0
        reading = (reading & ~now.read_ends) | (restarts & reads)
        if not fail_while_down:  # the clock starts again where the read ends
            again = failure_time(params, jnp.broadcast_to(now.time, next_failure.shape), work.failures)
            next_failure = jnp.where(now.read_ends, again, next_failure)
    return restarts, down, reading, reads, next_failure


def _redo(params: Params, new: WorkCarry, now: _Instant, use_jitter: bool):
    """(N,) the work of the cycle a failed job computes again from the start, with the draw
    it had (docs/model.md §1c): the cycle a checkpoint in progress covers, unless it is safe
    (§1d)."""
    open_checkpoint = now.draining if new.safe is None else now.draining & ~new.safe
    if now.snapping is not None:
        open_checkpoint = open_checkpoint | now.snapping
    if now.overhead is not None:  # a checkpoint in its overhead is open too (§1g)
        open_checkpoint = open_checkpoint | now.overhead
    cycle = jnp.maximum(now.fire_count - open_checkpoint.astype(jnp.int32), 0)
    if use_jitter:
        return jitter_works(params.job_keys, params.compute, params.jitter, cycle)
    return params.compute


def _next_failure(params: Params, work: WorkCarry, now: _Instant, fail_while_down: bool, restart):
    """``(back, upcoming)``: where a job that fails now is up again (its restart's end,
    ``restart`` after the failure) and its next failure. The down period starts from the
    listed time, which the clock may miss by an ulp; the clock runs again from the restart's
    end (§1c), or never stops (§1e)."""
    listed = params.failure_times is not None
    failed_at = work.next_failure if listed else jnp.broadcast_to(now.time, work.next_failure.shape)
    back = failed_at + restart
    clock_from = failed_at if fail_while_down else back
    if listed:
        upcoming = failure_time(params, clock_from, work.failures + 1, failed_at=work.next_failure)
    elif work.next_gap is not None:  # drawn ahead (`refresh_gaps`): the same value
        upcoming = _after(params, clock_from, work.next_gap)
    else:
        upcoming = failure_time(params, clock_from, work.failures + 1)
    return back, upcoming


def _reads_after(
    params: Params, now: _Instant, reading, reads, restarts, fails, upcoming, fail_while_down: bool, restart
):
    """Recovery reads after the instant's failures (§1e): a failure abandons the job's read
    or write, and a read starts where a restart (``restart`` long) ends (at the failure
    itself where it is 0). Without ``fail_while_down`` a reading job's next failure is drawn
    where its read ends. Returns ``(upcoming, reading, write_left, read_starts)``."""
    restarts_read = fails & reads & (restart == 0)  # no restart: the read starts now
    if not fail_while_down:  # drawn where the read ends
        upcoming = jnp.where(reads, jnp.asarray(jnp.inf, params.compute.dtype), upcoming)
    read_starts = (reading & (restarts & ~fails)) | restarts_read
    reading = (reading & ~fails) | restarts_read
    write_left = jnp.where(fails, 0, now.write_left)
    assert params.recovery_read is not None  # as `_restart_ends` checked
    write_left = jnp.where(read_starts, params.recovery_read, write_left)
    return upcoming, reading, write_left, read_starts


class _Strike(NamedTuple):
    """The outages of one instant (docs/model.md §1f, `outages.struck`): the outage state
    with them taken, the (N,) jobs they fail, each one's outage instant and stagger k·Δ, and
    the jobs' pending own failures (a recovery read that ends gives back a held clock)."""

    carry: outages.OutageCarry
    jobs: jax.Array
    at: jax.Array
    stagger: jax.Array
    next_failure: jax.Array


def _strike(params: Params, work: WorkCarry, now: _Instant, own, down, reading, next_failure, fail_while_down: bool):
    """The outages of this instant, after the restart ends and with the jobs' own failures
    ``own`` known: a job fails once, as its own failure where both fall at one instant. An
    outage fails the jobs of its domain that are up (not ``down``, not ``reading``), or every
    one with ``fail_while_down``. Returns a `_Strike`."""
    carry = work.outage
    assert carry is not None
    held = carry.held
    if now.read_ends is not None:  # the own clock held by an outage's read runs again
        back_up = now.read_ends & ~jnp.isnan(held)
        next_failure = jnp.where(back_up, now.time + held, next_failure)
        held = jnp.where(now.read_ends, jnp.nan, held)
    exposed = ~own
    if not fail_while_down:
        exposed = exposed & ~down
        if reading is not None:
            exposed = exposed & ~reading
    carry, jobs, at, stagger = outages.struck(
        params, carry._replace(held=held), now.outage_dt, now.dt, now.time, now.running, exposed
    )
    return _Strike(carry, jobs, at, stagger, next_failure)


def _after_outage(params: Params, work: WorkCarry, strike: _Strike, back, upcoming, restart, next_failure, fwd: bool):
    """``(back, upcoming)`` with the jobs an outage failed set: up again ``restart`` (R_i + k·Δ)
    after the outage's instant; their own failure clock paused while down (a drawn pending
    failure moves by the time down; with listed times, the first at or after the restart's
    end), or running on with ``fail_while_down`` (fwd)."""
    jobs, at = strike.jobs, strike.at
    back_o = at + restart
    if fwd:
        up = next_failure
    elif params.failure_times is not None:
        up = failure_time(params, back_o, work.failures, failed_at=at)
    else:
        up = next_failure + (back_o - at)
    return jnp.where(jobs, back_o, back), jnp.where(jobs, up, upcoming)


def _outage_after(
    params: Params, work: WorkCarry, new: WorkCarry, strike: _Strike, fails, lost, down, now: _Instant, reads, fwd: bool
):
    """The outage state after the instant's failures: the outage failures counted with the
    work they lost (``lost``: every failure's total, ``new``: the accounting before the
    failures) and the time down after them, the stagger assigned (a failure that cuts short
    a restart in progress, with ``fail_while_down``, takes back the part of its stagger not
    served: the stagger is the restart's last k·Δ), and with recovery reads the own clock
    held until the read ends."""
    carry = strike.carry
    down_step = new.down_time - work.down_time  # the step's time down, of the recovery before the instant
    remaining = jnp.maximum(work.up_at - now.time, 0)
    unserved = jnp.where(fails & down, jnp.minimum(carry.stagger, remaining), 0)
    held = carry.held
    if reads is not None and not fwd and params.failure_times is None:
        held = jnp.where(strike.jobs & reads, strike.next_failure - strike.at, held)
    return carry._replace(
        failures=carry.failures + strike.jobs.astype(jnp.int32),
        stagger_time=(carry.stagger_time - unserved + strike.stagger).astype(carry.stagger_time.dtype),
        stagger=jnp.where(fails, strike.stagger, carry.stagger),
        held=held,
        lost_work=carry.lost_work + jnp.where(strike.jobs, lost - work.lost_work, 0),
        down_time=carry.down_time + jnp.where(carry.by_outage, down_step, 0),
        by_outage=jnp.where(fails, strike.jobs, carry.by_outage),
    )


def failed(before: WorkCarry, after: WorkCarry):
    """(N,) the jobs that failed between ``before`` and ``after``, by any cause."""
    changed = after.failures != before.failures
    if after.outage is not None and before.outage is not None:
        changed = changed | (after.outage.failures != before.outage.failures)
    return changed


def refresh_gaps(params: Params, before: WorkCarry, after: WorkCarry, few: int) -> WorkCarry:
    """``after`` with a new `WorkCarry.next_gap` for every job that failed since ``before``
    (any leading batch axes): its draw number ``failures + 1``. Nothing is drawn at an event
    without failures; up to ``few`` failed jobs (over the whole batch) are gathered and drawn
    alone, more draw for every job (the same values either way: a draw depends only on the
    job's key and its index)."""
    if after.next_gap is None:
        return after
    failed = after.failures != before.failures
    # Counted over the batch's own axes: a sum over the flattened (B N,) mask is lowered
    # to pads and windowed reductions on the CPU (six kernels per event, not one).
    count = jnp.sum(failed, dtype=jnp.int32)
    failed = failed.reshape(-1)
    gaps, index = after.next_gap.reshape(-1), (after.failures + 1).reshape(-1)
    keys = params.job_keys.reshape(-1)
    dtype = params.compute.dtype

    def none():
        return gaps

    def some():
        (slot,) = jnp.nonzero(failed, size=few, fill_value=gaps.shape[0])  # past the end: dropped
        safe = jnp.minimum(slot, gaps.shape[0] - 1)
        drawn = jax.vmap(lambda k, n: _draw_gap(k, n, dtype))(keys[safe], index[safe].astype(jnp.uint32))
        return gaps.at[slot].set(drawn, mode="drop")

    def every():
        drawn = jax.vmap(lambda k, n: _draw_gap(k, n, dtype))(keys, index.astype(jnp.uint32))
        return jnp.where(failed, drawn, gaps)

    branch = jnp.where(count == 0, 0, jnp.where(count <= few, 1, 2))
    new = jax.lax.switch(branch, (none, some, every))
    return after._replace(next_gap=new.reshape(after.next_gap.shape))
