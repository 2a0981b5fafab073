"""The event loops, behind one protocol (`driver.Loop`), and the choice of loop per fleet.

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

`choose_paths` decides per fleet, on the host.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .._observe import FinalView, LoopInfo, completed_writes
from .._params import jitter_work
from .._rates import Variants
from ..model import Fleet

__all__ = [
    "LoopResult",
    "loop_info",
    "loop_result",
    "jitter_works",
    "record",
    "FIFO_MIN_JOBS",
    "PATHS",
    "choose_paths",
    "fifo_eligible",
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
) -> LoopResult:
    """The `LoopResult` of every loop's ``final`` (flattened fleets, job order).

    ``complete``: (B,) every active job completed K writes (with a ``horizon``, done means
    the horizon is reached instead). The completed writes (`FinalView.writes`) are the
    firings less the write still open, unless failures can abandon writes (``abandons``:
    the jobs observer counts them itself). ``work``: the general loop's work accounting
    (`failures.WorkCarry`), or None. ``slot_position``: (B, N) the slot of each job
    (`EventView.slot`), or None where the slots are the jobs."""
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
        **(
            {}
            if work is None
            else dict(
                useful_work=work.useful_work,
                lost_work=work.lost_work,
                failures=work.failures,
                down_time=work.down_time,
                persisted_work=work.persisted,
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


# `method="auto"` uses the FIFO and clock paths for fleets of at least this many active
# jobs: below it the general engine's O(N) step is as cheap as their bookkeeping
# (benchmarks/bench.py: at N = 2 the general engine is 1.3-1.8x the clock path).
FIFO_MIN_JOBS = 8


def fifo_eligible(fleet: Fleet, uses: Variants) -> np.ndarray:
    """Per fleet (batch shape), whether the FIFO path is exact for it: all its active jobs
    share T and d, and it has no jitter, τ = 0 and α = 0, all sizes 1 and a storage policy
    other than "fcfs" (docs/model.md §1b). ``uses``: the fleet's `variants` (with its jitter).
    Decided on the host."""
    ok = uses.virtual_clock & ~uses.jitter
    active = np.asarray(fleet.active)
    first = np.argmax(active, axis=-1)[..., None]
    for values in (np.asarray(fleet.compute), np.asarray(fleet.write)):
        same = values == np.take_along_axis(values, first, axis=-1)
        ok &= np.all(~active | same, axis=-1)
    return ok


# The batched paths, in the order `simulate` runs them.
PATHS = ("fifo", "clock", "general")


def choose_paths(fleet: Fleet, uses: Variants, method: str, save=None) -> np.ndarray:
    """Per fleet (batch shape), the path `simulate` runs it on: "fifo", "clock" or "general".

    ``method="auto"``: fleets with fewer than `FIFO_MIN_JOBS` active jobs run on the
    general engine (its O(N) step is cheapest there); larger ones on the FIFO path where
    `fifo_eligible`, else on the clock path where `Variants.virtual_clock`, else on the general
    engine. Fleets with failures (``mtbf``) always run on the general engine. An explicit
    method is applied to every fleet, or raises `ValueError` where it is not exact.
    ``uses``: the fleet's `variants` (with its jitter), computed once by the caller.
    Write limits, two-level checkpoints and ``save.power`` (docs/model.md §1d), recovery reads
    and failures while down (§1e) are exact on the general engine only, as failures are.
    """
    batch = fleet.batch_shape
    general_only = general_only_reason(fleet, uses, save)
    if method == "general" or (method == "auto" and general_only):
        return np.full(batch, "general", dtype=object)
    if general_only:
        raise ValueError(f"method={method!r} cannot serve {general_only}; use 'general' or 'auto'")
    fifo = fifo_eligible(fleet, uses)
    clock = uses.virtual_clock
    policy = sharing_reason(fleet, uses)
    if method == "fifo":
        if policy:
            raise ValueError(f"method='fifo' cannot serve {policy}; use 'general' or 'auto'")
        if not fifo.all():
            raise ValueError(
                "method='fifo' needs identical deterministic fleets (all active jobs of a fleet with "
                "the same compute and write, no jitter, delay 0, async_fraction 0); use 'clock', 'general' or 'auto'"
            )
        return np.full(batch, "fifo", dtype=object)
    if method == "clock":
        if policy:
            raise ValueError(f"method='clock' cannot serve {policy}; use 'general' or 'auto'")
        if not clock.all():
            raise ValueError(
                "method='clock' needs delay 0 and async_fraction 0 in every fleet; use 'general' or 'auto'"
            )
        return np.full(batch, "clock", dtype=object)
    n_active = np.asarray(fleet.active).sum(axis=-1)
    big = n_active >= FIFO_MIN_JOBS
    path = np.where(clock & big, "clock", "general").astype(object)
    path[fifo & big] = "fifo"
    return path


def general_only_reason(fleet: Fleet, uses: Variants, save=None) -> str:
    """What in the run only the general engine serves, by name, or "" (docs/model.md §1c-§1e)."""
    if fleet.has_recovery_reads:
        return "recovery_read (docs/model.md §1e): recovery reads are storage users of the general engine only"
    if fleet.fail_while_down:
        return "fail_while_down (docs/model.md §1e): failures are events of the general engine only"
    if fleet.has_failures:
        return "failures (mtbf, docs/model.md §1c): they are events of the general engine only"
    if np.any(uses.limits):
        return "write_limit (docs/model.md §1d): writers at their limits do not share one rate"
    if np.any(uses.two_level):
        return "snapshot (two-level checkpoints, docs/model.md §1d): snapshots are events of the general engine only"
    if save is not None and save.power:
        return "SaveAt(power=True): the power draw is observed on the general engine only"
    return ""


def sharing_reason(fleet: Fleet, uses: Variants) -> str:
    """Why the fast loops cannot serve some fleet of the batch (docs/model.md §1b), or ""."""
    if uses.fcfs:
        return (
            f"storage_policy={fleet.storage_policy!r} (one writer drains at a time, so writers do not share one "
            "rate and the virtual clocks do not apply)"
        )
    unequal = ~uses.one_rate
    if np.any(unequal):
        first = tuple(int(i) for i in np.argwhere(np.atleast_1d(unequal))[0]) if fleet.batch_shape else ()
        return (
            f"job sizes other than 1 (fleet {first}): under power_policy={fleet.power_policy!r} and "
            f"storage_policy={fleet.storage_policy!r} the jobs of one phase do not share one rate, "
            "so the virtual clocks do not apply"
        )
    return ""
