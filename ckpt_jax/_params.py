"""One fleet's parameters as flat arrays, and the PRNG keys of its jobs (docs/model.md §1).

`flat_params` turns a validated `Fleet` into `Params` (one batch axis) for the loops;
`batch_keys` derives one key per job from counters only, so the draws of a fleet
(`jitter_work`, the failure times) never depend on its batch or on event order. The rates
the loops compute from them are `ckpt_jax._rates`; the checks of the host, `ckpt_jax._validate`.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.core import Tracer

from ._validate import check_fleet_offset, check_jitter, check_key
from .model import Fleet

__all__ = ["Params", "OutageParams", "flat_params", "jitter_work", "batch_keys", "job_keys", "fold_keys"]


class OutageParams(NamedTuple):
    """One fleet's failure domains and common-cause outages (docs/model.md §1f).

    Attributes:
      domain: (N,) int32 each job's domain, in [0, D).
      mtbf: (D,) mean time between drawn outages per domain (inf: none; all inf where the
        outages are replayed). Its length is D.
      times, domains: (K,) the replayed outage instants (+inf padded) and their (K,) int32
        domains, or None where the outages are drawn.
      stagger: () the restart stagger Δ.
    """

    domain: jax.Array
    mtbf: jax.Array
    times: jax.Array | None
    domains: jax.Array | None
    stagger: jax.Array


class Params(NamedTuple):
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
    size: jax.Array  # (N,) job sizes w_i (docs/model.md §1b), 1 in the base model
    mtbf: jax.Array  # (N,) mean time between failures M_i (docs/model.md §1c), inf: none
    restart: jax.Array  # (N,) restart time R_i after a failure
    # docs/model.md §1d: (N,) write limits b_i (inf: none), (N,) snapshot durations s_i,
    # () two-level checkpoints (then async_fraction is 1: a draining job computes at full
    # speed), () idle power p_idle
    write_limit: jax.Array
    snapshot: jax.Array
    two_level: jax.Array
    idle_power: jax.Array
    # (N, F) explicit failure times replacing the draws (docs/model.md §1c), or None
    failure_times: jax.Array | None = None
    # (N,) recovery read volumes r_i (docs/model.md §1e), or None where no job of the batch reads
    recovery_read: jax.Array | None = None
    # (N,) int32 the job slots by ascending write limit (ties by index), for the water-filling
    # of `ckpt_jax._rates.capped_fill` without a sort per event; None where the limits are traced
    limit_order: jax.Array | None = None
    # (N,) int32 the job slots by ascending size (ties by index), for the power's water-filling
    # level (`ckpt_jax._rates.maxmin_level`) without a sort per event; None where sizes are traced
    size_order: jax.Array | None = None
    # docs/model.md §1f: the failure domains and outages (`OutageParams`), or None without outages
    outages: OutageParams | None = None
    # (N,) Weibull shapes k of the failure law (docs/model.md §1f), or None where every job that
    # fails from draws has k = 1 (the exponential draws of §1c, bit for bit)
    failure_shape: jax.Array | None = None
    # (N,) fixed checkpoint overheads o_i (docs/model.md §1g), or None where no job of the batch
    # has one (then the loops trace none of it)
    overhead: jax.Array | None = None


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


def flat_params(fleet: Fleet, jitter=None, key=None, fleet_offset: int = 0, failure_times=None) -> Params:
    """Flattens a validated fleet into per-fleet parameter arrays with one batch axis.

    Checks ``jitter`` (σ), ``key`` and ``fleet_offset`` first (a `ValueError` naming the bad
    one); ``failure_times``: already checked by `ckpt_jax._validate.check_failure_times`, or
    None. `params_of` builds the same from values checked by the caller."""
    batch_shape = fleet.batch_shape
    sigma = check_jitter(jitter, batch_shape, fleet.dtype)
    key = None if key is None else check_key(key, batch_shape)
    fleet_offset = check_fleet_offset(fleet_offset, int(np.prod(batch_shape, dtype=np.int64)))
    return params_of(fleet, sigma, key, fleet_offset, failure_times)


def params_of(fleet: Fleet, sigma: np.ndarray, key, fleet_offset: int, failure_times=None) -> Params:
    """`flat_params` from checked values: σ of the batch shape (`check_jitter`), a typed key
    (`check_key`) or None, an offset from `check_fleet_offset` and checked failure times."""
    batch_shape = fleet.batch_shape
    n_jobs = fleet.n_jobs
    n_fleets = int(np.prod(batch_shape, dtype=np.int64))

    def flat(x, tail):
        return jnp.reshape(x, (n_fleets,) + tail)

    return Params(
        compute=flat(fleet.compute, (n_jobs,)),
        write=flat(fleet.write, (n_jobs,)),
        cap=flat(fleet.cap, ()),
        throughput=flat(fleet.throughput, (n_jobs + 1,)),
        delay=flat(fleet.delay, ()),
        # A two-level job computes at full speed while its drain runs: α = 1 in the loop.
        async_fraction=flat(jnp.where(fleet.two_level, 1, fleet.async_fraction).astype(fleet.dtype), ()),
        active=flat(fleet.active, (n_jobs,)),
        jitter=jnp.asarray(np.reshape(sigma, n_fleets), fleet.dtype),
        job_keys=batch_keys(key, batch_shape, n_jobs, fleet_offset),
        size=flat(fleet.size, (n_jobs,)),
        mtbf=flat(fleet.mtbf, (n_jobs,)),
        restart=flat(fleet.restart, (n_jobs,)),
        write_limit=flat(fleet.write_limit, (n_jobs,)),
        snapshot=flat(fleet.snapshot, (n_jobs,)),
        two_level=flat(fleet.two_level, ()),
        idle_power=flat(fleet.idle_power, ()),
        failure_times=None
        if failure_times is None
        else jnp.asarray(np.reshape(failure_times, (n_fleets, n_jobs, -1)), fleet.dtype),
        recovery_read=flat(fleet.recovery_read, (n_jobs,)) if fleet.has_recovery_reads else None,
        limit_order=_slot_order(fleet.write_limit, n_fleets, n_jobs),
        size_order=_slot_order(fleet.size, n_fleets, n_jobs),
        failure_shape=flat(fleet.failure_shape, (n_jobs,)) if fleet.has_weibull_failures else None,
        outages=_outage_params(fleet, n_fleets),
        overhead=flat(fleet.overhead, (n_jobs,)) if fleet.has_overheads else None,
    )


def _outage_params(fleet: Fleet, n_fleets: int) -> OutageParams | None:
    """The fleet's outages (docs/model.md §1f) with one batch axis, or None without."""
    if not fleet.has_outages:
        return None
    listed = fleet.outage_kind == "listed"
    return OutageParams(
        domain=jnp.reshape(fleet.domain, (n_fleets, fleet.n_jobs)),
        mtbf=jnp.reshape(fleet.outage_mtbf, (n_fleets, -1)),
        times=jnp.reshape(fleet.outage_times, (n_fleets, -1)) if listed else None,
        domains=jnp.reshape(fleet.outage_domains, (n_fleets, -1)) if listed else None,
        stagger=jnp.reshape(fleet.restart_stagger, (n_fleets,)),
    )


def _slot_order(values, n_fleets: int, n_jobs: int):
    """(B, N) each fleet's job slots sorted by ``values`` (write limits, sizes; ties by
    index), or None for traced values."""
    if isinstance(values, Tracer):
        return None
    values = np.reshape(np.asarray(values), (n_fleets, n_jobs))
    return jnp.asarray(np.argsort(values, axis=-1, kind="stable").astype(np.int32))


def batch_keys(key, batch_shape, n_jobs: int, fleet_offset: int):
    """Per-job PRNG keys, shape (B, N), derived from counters only (layout invariant).

    ``key``: a typed key checked by `check_key` (shape () or the batch shape), or None. A
    scalar key is folded with each fleet's flat index (plus ``fleet_offset``, for chunked
    ensembles); a key array of the batch shape gives each fleet its own key.
    """
    n_fleets = int(np.prod(batch_shape, dtype=np.int64))
    key = jax.random.key(0) if key is None else key
    # Each key depends on its fleet's and job's counters alone, so keys are derived for the
    # next powers of two and cut: one compiled program serves many batch and fleet sizes.
    if key.shape == ():
        return fold_keys(key, jnp.uint32(fleet_offset), _bucket(n_fleets), _bucket(n_jobs))[:n_fleets, :n_jobs]
    return job_keys(key.reshape(n_fleets), _bucket(n_jobs))[:, :n_jobs]


def _bucket(n: int) -> int:
    """The smallest power of two >= ``n`` (1 for n <= 1)."""
    return 1 << max(0, int(n) - 1).bit_length()


# Jitted so that deriving keys costs one dispatch, not a dozen (it dominated small runs).
@functools.partial(jax.jit, static_argnums=(1,))
def job_keys(fleet_keys, n_jobs: int):
    jobs = jnp.arange(n_jobs, dtype=jnp.uint32)
    return jax.vmap(lambda k: jax.vmap(jax.random.fold_in, in_axes=(None, 0))(k, jobs))(fleet_keys)


@functools.partial(jax.jit, static_argnums=(2, 3))
def fold_keys(key, fleet_offset, n_fleets: int, n_jobs: int):
    index = jnp.arange(n_fleets, dtype=jnp.uint32) + fleet_offset
    return job_keys(jax.vmap(jax.random.fold_in, in_axes=(None, 0))(key, index), n_jobs)
