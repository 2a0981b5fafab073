"""Common-cause outages and the restart stagger in the general loop (docs/model.md §1f).

Each job belongs to a failure domain (`OutageParams.domain`). Outages strike a domain at the
instants of a Poisson process of mean time M_o (drawn) or at listed instants (replayed), and
fail, at that instant, every job of the domain that is up (with ``fail_while_down`` the jobs
down too); each loses what a failure loses (`failures`). They are events of the exact loop
like the others: the carry holds each domain's next outage time, `event_dt` hands the loop the
time to the first, and every domain due at an instant strikes in the same step.

Draws. Outage number n of domain d (0-based) of a fleet comes ``Exp(1)·M_o[d]`` after outage
n − 1 (or t = 0), the exponential drawn from ``fold_in(fold_in(fold_in(key_0, OUTAGE_STREAM),
d), n)``, where ``key_0`` is the key of the fleet's job 0 (`Params.job_keys`, derived from the
run's key and the fleet's flat index only): the same fleet gets the same outages in any batch
layout. `OUTAGE_STREAM` (2³¹ + 1) differs from every value folded into a job key elsewhere
(jitter's cycle indices < 2³⁰, the failure stream 2³¹), so no two streams share a key.
`drawn_instants` computes the same instants on the host from a fleet and a key.

Replayed outages (`OutageParams.times`): a domain's next outage is its first listed instant
after its last one (repeated rows of one domain and instant are one outage).

Restart stagger. The jobs one outage fails (one domain, one instant) are ranked by job index,
k = 0, 1, ...; job k is down for R_k + k·Δ (docs/model.md §1f). The job's own failure clock:
memoryless, it is paused while the job is down (unless ``fail_while_down``): its pending own
failure moves by the time down (drawn failures), or, with listed failure times, the next is
the first listed at or after its restart end, as after its own failures.
"""

from __future__ import annotations

import functools
import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .._params import Params
from .._snapping import snapped

__all__ = ["OUTAGE_STREAM", "OutageCarry", "init", "event_dt", "struck", "refresh", "drawn_instants"]

OUTAGE_STREAM = 2**31 + 1
_MOST_LISTED = 100_000  # outages per domain that `drawn_instants` lists


class OutageCarry(NamedTuple):
    """The outage state of one fleet.

    Attributes:
      next: (D,) each domain's next outage time (inf: none).
      last: (D,) its last outage time (-inf: none yet).
      count: (D,) int32 outages so far (the draw index of the next one).
      failures: (N,) int32 each job's failures by outages.
      stagger_time: (N,) time each job was down for the stagger (k·Δ) since t = 0.
      stagger: (N,) the stagger of the job's current restart (0 after its own failure).
      held: (N,) the job's own failure clock held while an outage's recovery read runs
        (drawn failures; NaN: none held).
      lost_work, down_time: (N,) the work lost to outages and the time down (restart, stagger
        and recovery read) after them, since t = 0.
      by_outage: (N,) bool the job's last failure was an outage's.
    """

    next: jax.Array
    last: jax.Array
    count: jax.Array
    failures: jax.Array
    stagger_time: jax.Array
    stagger: jax.Array
    held: jax.Array
    lost_work: jax.Array
    down_time: jax.Array
    by_outage: jax.Array


def _draw(key_0, domain, n, dtype):
    """The standard exponential draw number ``n`` of a domain's outage stream."""
    key = jax.random.fold_in(jax.random.fold_in(jax.random.fold_in(key_0, OUTAGE_STREAM), domain), n)
    return jax.random.exponential(key, (), dtype)


def _upcoming(params: Params, last, count):
    """(D,) each domain's next outage after ``last`` (its outage number ``count``)."""
    out = params.outages
    assert out is not None
    dtype = params.compute.dtype
    n_domains = out.mtbf.shape[-1]
    domains = jnp.arange(n_domains)
    if out.times is not None:  # replayed: the first listed instant after the last
        assert out.domains is not None
        later = (out.domains[None, :] == domains[:, None]) & (out.times[None, :] > last[:, None])
        return jnp.min(jnp.where(later, out.times[None, :], jnp.inf), axis=-1, initial=jnp.inf).astype(dtype)
    gaps = jax.vmap(lambda d, n: _draw(params.job_keys[0], d, n, dtype))(
        domains.astype(jnp.uint32), count.astype(jnp.uint32)
    )
    return _after(last, gaps, out.mtbf).astype(dtype)


def _after(last, gap, mtbf):
    """The outage instant a standard exponential ``gap`` after ``last`` (from 0 for the
    first), in a domain of MTBF ``mtbf`` (never where it is infinite)."""
    finite = jnp.isfinite(mtbf)
    return jnp.where(finite, jnp.maximum(last, 0) + gap * jnp.where(finite, mtbf, 1), jnp.inf)


def init(params: Params) -> OutageCarry:
    """The outage state at t = 0: each domain's first outage."""
    out = params.outages
    assert out is not None
    dtype = params.compute.dtype
    n_domains, n_jobs = out.mtbf.shape[-1], params.compute.shape[0]
    last = jnp.full(n_domains, -jnp.inf, dtype)
    count = jnp.zeros(n_domains, jnp.int32)
    zeros = jnp.zeros(n_jobs, dtype)
    return OutageCarry(
        next=_upcoming(params, last, count),
        last=last,
        count=count,
        failures=jnp.zeros(n_jobs, jnp.int32),
        stagger_time=zeros,
        stagger=zeros,
        held=jnp.full(n_jobs, jnp.nan, dtype),
        lost_work=zeros,
        down_time=zeros,
        by_outage=jnp.zeros(n_jobs, bool),
    )


def event_dt(params: Params, carry: OutageCarry, time):
    """(D,) the time to each domain's next outage."""
    return (carry.next - time).astype(params.compute.dtype)


def struck(params: Params, carry: OutageCarry, outage_dt, dt, time, running, exposed):
    """The outages of this instant (docs/model.md §1f).

    ``outage_dt``: (D,) the time to each domain's outage before the step; ``exposed``: (N,)
    the jobs an outage can fail (up, or any with ``fail_while_down``; own failures of this
    instant excluded: a job fails once). Returns ``(carry, jobs, at, stagger)``: the carry
    with the struck domains' outages taken (their next one is set by `refresh`), the (N,)
    jobs they fail, (N,) the outage's instant per job, and (N,) each failed job's stagger
    k·Δ (k its rank by job index among the jobs its outage fails)."""
    out = params.outages
    assert out is not None
    dtype = params.compute.dtype
    n_domains = carry.next.shape[0]
    due = running & snapped(outage_dt, 1.0, 0.0, dt, time, dtype) & jnp.isfinite(carry.next)
    jobs = exposed & params.active & due[out.domain]
    member = (out.domain[:, None] == jnp.arange(n_domains)[None, :]) & jobs[:, None]  # (N, D)
    before = jnp.cumsum(member.astype(jnp.int32), axis=0) - member.astype(jnp.int32)
    rank = jnp.take_along_axis(before, out.domain[:, None], axis=1)[:, 0]
    stagger = jnp.where(jobs, rank.astype(dtype) * out.stagger, 0).astype(dtype)
    at = carry.next[out.domain]
    carry = carry._replace(
        last=jnp.where(due, carry.next, carry.last),
        next=jnp.where(due, jnp.nan, carry.next),  # `refresh` sets it before the next step
        count=carry.count + due.astype(jnp.int32),
    )
    return carry, jobs, at, stagger


def refresh(params: Params, before: OutageCarry | None, after: OutageCarry | None) -> OutageCarry | None:
    """``after`` with the next outage of every domain struck since ``before`` (any leading
    batch axes). Nothing is drawn at an instant without outages (one branch for the batch)."""
    if after is None or before is None:
        return after
    assert params.outages is not None
    struck_now = after.count != before.count
    lead = after.count.ndim - 1

    def none():
        return after.next

    def some():
        upcoming = _upcoming
        for _ in range(lead):
            upcoming = jax.vmap(upcoming)
        return jnp.where(struck_now, upcoming(params, after.last, after.count), after.next)

    return after._replace(next=jax.lax.cond(jnp.any(struck_now), some, none))


def drawn_instants(params: Params, horizon) -> np.ndarray:
    """(B, K, 2) the drawn outage instants before ``horizon`` of each fleet of ``params``
    (one batch axis), as (time, domain) rows sorted by time, NaN padded: the outages a run
    with these parameters takes (docs/model.md §1f), for checks against a reference.

    Every fleet's and domain's instants at once, in blocks of draws (`_instant_block`: the
    draws vectorised, the sum of the gaps taken in order as the run takes it, so the instants
    are the run's to the bit), until each stream has passed its horizon."""
    out = params.outages
    assert out is not None and out.times is None
    n_fleets = params.compute.shape[0]
    dtype = params.compute.dtype
    n_domains = int(out.mtbf.shape[-1])
    horizons = np.broadcast_to(np.asarray(horizon, np.float64), (n_fleets,))
    mtbf = np.broadcast_to(np.asarray(out.mtbf, np.float64), (n_fleets, n_domains))
    with np.errstate(divide="ignore", invalid="ignore"):
        expected = np.where(np.isfinite(mtbf), np.maximum(horizons[:, None], 0) / mtbf, 0.0)
    mean = float(np.max(expected, initial=0.0))
    block = int(min(_MOST_LISTED, 2 ** math.ceil(math.log2(1.25 * mean + 8 * math.sqrt(mean) + 16))))
    keys = params.job_keys[:, 0]
    last = jnp.full((n_fleets, n_domains), -jnp.inf, dtype)
    blocks, count = [], 0
    while count < _MOST_LISTED:
        size = min(block, _MOST_LISTED - count)
        times = _instant_block(keys, jnp.asarray(out.mtbf, dtype), last, count, size)
        blocks.append(np.asarray(times, np.float64))
        last, count = times[..., -1], count + size
        if not np.any(np.asarray(last, np.float64) < horizons[:, None]):
            break
    else:  # never a silent cut
        b, d = np.argwhere(np.asarray(last, np.float64) < horizons[:, None])[0]
        raise ValueError(
            f"fleet {b}, domain {d}: more than {_MOST_LISTED:,} outages before the horizon "
            f"{horizons[b]:g}; list a shorter horizon"
        )
    times = np.concatenate(blocks, axis=-1)  # (B, D, n) each stream's instants, in order
    domains = np.broadcast_to(np.arange(n_domains, dtype=np.float64)[:, None], times.shape[1:])
    kept = times < horizons[:, None, None]
    width = max(1, int(np.max(kept.sum(axis=(1, 2)), initial=0)))
    result = np.full((n_fleets, width, 2), np.nan)
    for b in range(n_fleets):  # the rows of one fleet, by time then domain
        rows = np.stack([times[b][kept[b]], domains[kept[b]]], axis=-1)
        rows = rows[np.lexsort((rows[:, 1], rows[:, 0]))]
        result[b, : len(rows)] = rows
    return result


def _instant_block(keys, mtbf, last, first: int, size: int):
    """(B, D, size) the outage instants number ``first`` .. ``first + size - 1`` of every
    fleet (its key of `_draw`, ``keys`` (B,)) and domain (``mtbf`` (B, D) or (D,)), after
    ``last`` (B, D): each gap drawn as `_upcoming` draws it (vectorised), and added in order,
    one by one, as `_upcoming` adds it in a run (`_accumulate`: compiled as the run is, so
    the instants are the run's to the bit; a parallel sum would round otherwise)."""
    numbers = (first + jnp.arange(size)).astype(jnp.uint32)
    gaps = _gaps(keys, jnp.arange(last.shape[-1]).astype(jnp.uint32), numbers, np.dtype(last.dtype))  # (B, D, size)
    return _accumulate(jnp.broadcast_to(mtbf, last.shape), last, gaps)


@functools.partial(jax.jit, static_argnums=3)
def _gaps(keys, domains, numbers, dtype):
    """(B, D, n) the standard exponential draws ``numbers`` of each fleet's and domain's stream."""
    draw = jax.vmap(lambda key, d, n: _draw(key, d, n, dtype), in_axes=(None, None, 0))
    draw = jax.vmap(draw, in_axes=(None, 0, None))  # domains
    return jax.vmap(draw, in_axes=(0, None, None))(keys, domains, numbers)  # fleets


@jax.jit
def _accumulate(mtbf, last, gaps):
    """(B, D, n) the instants ``last`` + the ``gaps`` (B, D, n) × ``mtbf``, summed in order."""

    def step(previous, gap):
        upcoming = _after(previous, gap, mtbf).astype(last.dtype)
        return upcoming, upcoming

    _, times = jax.lax.scan(step, last, jnp.moveaxis(gaps, -1, 0))
    return jnp.moveaxis(times, 0, -1)
