"""Checkpoint requests of the queueing storage policies (docs/model.md §1e) in the general loop.

Under ``"fcfs_nonblocking"`` and ``"cooperative"`` the storage serves one I/O at a time, and a
compute end is a checkpoint *request*, not a firing: the job starts its next compute phase at
once and keeps computing while its request waits. The write starts when the storage grants the
request (that is the job's firing, recorded in the trace): the job then stops computing and
drains its volume d_i, alone, at min(b_i, f(1)); the write covers all the work it did up to
that instant (the request's phase and what it computed while waiting). Its next checkpoint
comes due T_i of compute after the write ends.

A request still waiting when the job's next checkpoint comes due (T_i of compute later) is
dropped: its work stays uncovered and the new request queues (under ``"fcfs_nonblocking"``
at the back; ``"cooperative"`` does not look at queue order). A due at the very instant the
storage frees is not "before" the grant: the old request still competes with its place.

The storage grants at the end of an instant, after its write ends, compute ends, restart ends
and failures (a failure cancels the job's request, and frees the storage if the job was
writing), whenever no up job drains. Writes in progress at t = 0 are blocking writes already
started: served first, one at a time by job index, as under ``"fcfs"``.

Which request: ``"fcfs_nonblocking"`` the earliest request, ``"cooperative"`` the least
Least-Waste score (`ckpt_jax._rates.least_waste_scores`); ties by job index.
"""

from __future__ import annotations

import jax.numpy as jnp

from .._params import Params
from .._rates import least_waste_scores
from . import failures

__all__ = ["grant"]


def _first(mask):
    """The lowest index of ``mask`` alone (all False where ``mask`` is empty)."""
    return mask & (jnp.arange(mask.shape[0]) == jnp.argmax(mask))


def grant(
    params: Params,
    storage: str,
    work: failures.WorkCarry,
    *,
    time,
    running,
    up,
    failed,
    completes,
    requested,
    queued_at,
    draining,
    write_left,
    compute_left,
):
    """The instant's requests and grant, after its other switches and the work accounting.

    ``requested``: the requests waiting before the instant; ``completes``: the jobs whose
    compute phase ended at this instant (a new request, or a
    drop and a new request where one waits); ``failed``: the jobs a failure hit at it;
    ``up``: the jobs that are up after it. Returns ``(work, requested, queued_at, draining,
    write_left, compute_left, grants)``, ``grants`` (N,) the job whose write starts (at most
    one). Lanes not ``running`` grant nothing.
    """
    waiting = requested
    requested = (waiting | completes) & ~failed & up
    # FCFS order: a new request joins the back; a request that comes due again as the storage
    # frees keeps its place for this grant (the new due is not before the grant).
    order = jnp.where(completes & ~waiting, time, queued_at)
    free = ~jnp.any(draining & up)
    exposure = work.uncovered + (work.phase_work - compute_left)
    if storage == "cooperative":
        service = params.write / jnp.minimum(params.write_limit, params.throughput[1])
        idle = jnp.zeros_like(requested)
        zero = jnp.zeros_like(exposure)
        key = least_waste_scores(requested, idle, params.size, params.mtbf, params.restart, exposure, zero, service)
    else:
        key = jnp.where(requested, order, jnp.inf)
    grants = running & free & _first(requested & (key == jnp.min(key)))
    work = work._replace(
        pending=jnp.where(grants, exposure, work.pending),
        uncovered=jnp.where(grants, 0, work.uncovered),
        phase_work=jnp.where(grants, params.compute, work.phase_work),
    )
    return (
        work,
        requested & ~grants,
        jnp.where(completes, time, order),
        draining | grants,
        jnp.where(grants, params.write, write_left),
        jnp.where(grants, params.compute, compute_left),
        grants,
    )
