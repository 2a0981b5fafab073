"""The event loops, behind one protocol (`driver.Loop`).

Every loop is a strategy: ``init`` → carry, ``step(carry, running)`` → (carry, event),
``unfinished(carry)``, ``view(event)`` → the observers' `EventView`, and ``final(carry)`` →
a result in job order (`LoopResult`) that `ckpt_jax._simulate` turns into a `Trace`. One
driver runs them all.

* `config` — `RunConfig`, everything static about a run, the one static argument;
* `driver` — the masked batched while_loop, observers, budget, status, progress, CPU
  blocks and sharding, for every loop;
* `general` — `GeneralLoop`, the exact O(N) step for every variant (delay, asynchronous
  checkpoints, sizes and sharing policies, failures), and the one-fleet stepping primitive;
* `failures` — the general loop's failure state and work accounting;
* `events` — what a loop keeps of an iteration for its observers (read one iteration late);
* `virtual` — `VirtualLoop`, the virtual-clock loop, with a heads strategy:
  * `fifo` — identical deterministic jobs: a fixed ring, O(1) per switch;
  * `clock` — any T_i, d_i and jitter: a per-phase argmin.

Which loop a fleet runs on is decided on the host (`ckpt_jax._plan.choose_paths`).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from .._observe import FinalView, LoopInfo, completed_writes
from .._params import jitter_work

__all__ = [
    "LoopResult",
    "loop_info",
    "loop_result",
    "jitter_works",
    "record",
]


class LoopResult(NamedTuple):
    """What every loop hands to `ckpt_jax._simulate.flat_trace` (flattened fleets, job order)."""

    time: jax.Array
    fire_times: jax.Array  # (B, N, K) or (B, N, 0) without a trace
    end_times: jax.Array
    done: jax.Array  # (B,) every job finished K writes, or the horizon was reached
    n_events: jax.Array
    status: jax.Array  # (B,) the loop's flags; the driver adds MAX_EVENTS and NONFINITE
    observers: Any  # the driver's: {name: output} of every observer (the loop's: ())
    final: FinalView
    ok: jax.Array | None = None  # (B,) set by the driver: done and no status flag


def loop_info(config, params, **facts) -> LoopInfo:
    """The observers' `LoopInfo` of a loop over ``params`` (leading axis B) run with the
    `RunConfig` ``config``; ``facts``: the loop's own (``one_switch``, ``ordered``,
    ``abandons``)."""
    n_fleets, n_jobs = params.compute.shape
    return LoopInfo(
        n_fleets=n_fleets,
        n_jobs=n_jobs,
        dtype=params.compute.dtype,
        stop_fires=config.stop_fires,
        gap_fires=config.gap_fires,
        **facts,
    )


def loop_result(
    params,
    horizon,
    *,
    time,
    fire_times,
    end_times,
    complete,
    n_events,
    status,
    n_writers,
    fire_count,
    writing,
    abandons: bool = False,
    work=None,
    slot_position=None,
    compute_left=None,
) -> LoopResult:
    """The `LoopResult` of every loop's ``final`` (flattened fleets, job order).

    ``complete``: (B,) every active job completed K writes (with a ``horizon``, done means
    the horizon is reached instead). The completed writes (`FinalView.writes`) are the
    firings less the write still open, unless failures can abandon writes (``abandons``:
    the jobs observer counts them itself). ``work``: the general loop's work accounting
    (`failures.WorkCarry`), or None. ``slot_position``: (B, N) the slot of each job
    (`EventView.slot`), or None where the slots are the jobs. ``compute_left``: (B, N) the
    work left in each job's current compute phase (`FinalView.compute_left`)."""
    final = FinalView(
        time=time,
        async_fraction=params.async_fraction,
        active=params.active,
        horizon=horizon,
        n_writers=n_writers,
        fire_count=fire_count,
        writes=None if abandons else completed_writes(fire_count, writing),
        writing=writing,
        slot_position=slot_position,
        compute_left=compute_left,
        **(
            {}
            if work is None
            else dict(
                useful_work=work.useful_work,
                uncovered_work=None if compute_left is None else uncovered_work(work, compute_left),
                lost_work=work.lost_work,
                failures=work.failures if work.outage is None else work.failures + work.outage.failures,
                down_time=work.down_time,
                persisted_work=work.persisted,
                outage_failures=None if work.outage is None else work.outage.failures,
                stagger_time=None if work.outage is None else _stagger_served(work, time),
                outage_lost_work=None if work.outage is None else work.outage.lost_work,
                outage_down_time=None if work.outage is None else work.outage.down_time,
            )
        ),
    )
    done = complete if horizon is None else time >= horizon
    return LoopResult(
        time=time,
        fire_times=fire_times,
        end_times=end_times,
        done=done,
        n_events=n_events,
        status=status,
        observers=(),
        final=final,
    )


def uncovered_work(work, compute_left):
    """(B, N) the compute work done since t = 0 that no checkpoint covers at the stop and no
    failure took (`JobStats.uncovered_work`): exactly what a failure at the stop would lose
    (`failures.switch`), the write in progress' work (unless its snapshot is safe in memory),
    the completed phases not yet in a write and the current phase's progress. A job down or
    reading at the stop has none (its redo phase is whole)."""
    exposed = work.pending if work.safe is None else jnp.where(work.safe, 0, work.pending)
    return exposed + work.uncovered + (work.phase_work - compute_left)


def _stagger_served(work, time):
    """(B, N) the stagger time served by ``time``: a job still down at the stop has served
    its stagger (the last k·Δ of its restart, docs/model.md §1f) only up to the stop."""
    outage = work.outage
    left = jnp.maximum(work.up_at - time[:, None], 0)
    return outage.stagger_time - jnp.where(work.down, jnp.minimum(outage.stagger, left), 0)


def jitter_works(job_keys, compute, jitter, cycle):
    """`jitter_work` of many jobs at once, the one batched jitter draw of every loop: the
    keys and base works batched along their first axis, ``jitter`` and ``cycle`` either
    batched alike or one value for all (a draw depends only on its job key and cycle)."""
    in_axes = (0, 0, 0 if jnp.ndim(jitter) else None, 0 if jnp.ndim(cycle) else None)
    return jax.vmap(jitter_work, in_axes=in_axes)(job_keys, compute, jitter, cycle)


def record(flat, cell, value, write):
    """The trace write of every loop: ``flat[cell] = value`` where ``write``.

    One scatter on the flattened trace buffer: each lane (or column) writes at most one
    cell and no two share one (unique flat indices); the others point past the end and
    are dropped. Cheaper on XLA:CPU than the batched 2-D scatter `vmap` produces.
    """
    return flat.at[jnp.where(write, cell, flat.shape[0])].set(value, mode="drop", unique_indices=True)
