"""The shared core below every loop: flat parameters, keys, the rate and snapping rules,
budgets and size checks (docs/model.md §1).

Every loop (general, FIFO, clock) computes its rates with `phase_rates` and decides
simultaneity with `snapped` (at a horizon: `to_horizon`), so the three agree bit for bit
where they overlap.
"""

from __future__ import annotations

import functools
from typing import NamedTuple, Optional

import jax
import jax.numpy as jnp
import numpy as np

from ._status import Status
from ._validate import check_fleet_offset, check_int, check_key, check_memory, real_array, value_range
from .model import Fleet

__all__ = [
    "Params", "SNAP_ULPS", "MAX_FIRES", "METHODS", "flat_params", "jitter_work", "phase_rates", "snapped", "to_horizon",
    "computing_mask", "default_max_events", "failure_events", "time_bound", "check_time_bound", "check_horizon",
    "fires_before", "trace_bytes", "check_trace_memory", "check_jitter", "check_method", "batch_keys",
    "check_failure_times", "listed_failure_events", "horizon_events", "events_to", "failures_to", "least_failure_events", "check_events", "check_horizon_events",
    "MAX_EVENTS", "horizon_clock",
]

STATUS_OK = int(Status.OK)

# Jobs due within this many ulps of the clock, or left with this many ulps of their phase's
# full work, switch in the same step as the event: simultaneous to working precision.
# Without it, two jobs that should empty together can leave a 1-ulp remainder and take a
# spurious tiny extra step (docs/model.md §1: simultaneous events switch together).
SNAP_ULPS = 8

MAX_FIRES = 2**30

MAX_EVENTS = 2**31 - 1  # event counters are int32: no event budget is larger


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
    # (N, F) explicit failure times replacing the draws (docs/model.md §1c), or None
    failure_times: Optional[jax.Array] = None


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


def phase_rates(throughput_at_writers, n_writers, n_computing, cap, dtype):
    """The rate rule (docs/model.md §1), written once for every loop: each of ``n_writers``
    writers drains at f(n_w)/n_w and each computing job works at min(1, C/n_c).

    ``n_computing`` is a float in the dtype; the safe denominators keep lanes with no
    writer or no computing job finite (their rate is then unused)."""
    write_rate = throughput_at_writers / jnp.maximum(n_writers, 1).astype(dtype)
    # The cap binds only where n_c > C.
    speed = jnp.where(n_computing > cap, cap / jnp.maximum(n_computing, 1), 1.0).astype(dtype)
    return write_rate, speed


def snapped(time_to_end, left, work, dt, clock, dtype):
    """The snapping rule, written once for every loop: a phase that ends within
    `SNAP_ULPS` ulps of the clock after ``dt``, or has that many ulps of its work
    ``work`` left, ends now (simultaneous to working precision, docs/model.md §1).

    Both scales matter: a fleet mixing T = 0.25 with d = 2.5 leaves remainders far above
    T's ulps but far below the clock's."""
    eps = jnp.finfo(dtype).eps * SNAP_ULPS
    return (time_to_end <= dt + eps * clock) | (left <= eps * work)


def to_horizon(dt, clock, horizon, dtype):
    """The step to take with a ``horizon``: ``dt`` (to the next event) clamped to it, and
    the whole way to it where the event lies within `SNAP_ULPS` ulps of the horizon on
    either side. The snapping rule applied at the horizon, written once for every loop:
    the event and the horizon are simultaneous to working precision, so the jobs due then
    switch at H, and a fleet never takes a last step of a few ulps to reach H
    (docs/model.md §1 "The horizon")."""
    left = jnp.maximum(horizon - clock, 0)
    eps = jnp.finfo(dtype).eps * SNAP_ULPS
    return jnp.where(dt >= left - eps * horizon, left, dt)


def computing_mask(params: Params, draining, waiting, use_async: bool = True):
    """Jobs that draw compute power (docs/model.md §1: a draining job counts when α > 0).

    ``use_async=False`` is a static promise that α = 0 in every fleet: then no job ever
    waits and a draining job never computes, and the simpler expressions give the same
    bits with fewer passes over the (B, N) arrays.
    """
    if not use_async:
        return params.active & ~draining
    return params.active & ~waiting & (~draining | (params.async_fraction > 0))


def horizon_clock(clock, dt, horizon):
    """The clock after a step of ``dt`` clamped by `to_horizon`: exactly ``horizon``
    where the step goes the whole way to it. ``clock + (horizon - clock)`` rounds to a
    neighbour of H in a few percent of steps from a clock below H / 2 (above, the
    difference is exact): past H the run would stop an ulp late, short of it it would take
    one more step of an ulp, a second instant for H (docs/model.md §1)."""
    return jnp.where(dt >= horizon - clock, horizon, clock + dt)


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
        # Sizes (§1b) slow a job beyond its solo period: a small writer's weighted share, or
        # a large job's water-filling level, by up to max w / min w; under "fcfs" a write
        # may wait for every other one.
        size = np.where(active, np.asarray(fleet.size, np.float64), 1.0)
        if fleet.power_policy == "maxmin" or fleet.storage_policy == "weighted":
            ratio *= float(np.max(size.max(axis=-1) / size.min(axis=-1)))
        if fleet.storage_policy == "fcfs":
            ratio *= n_jobs
    budget = 4 * n_jobs * (n_fires + 2) * min(ratio, 1e4) + 64
    if fleet is not None and fleet.has_failures:
        budget += failure_events(fleet, n_fires)
    return int(min(budget, 2**31 - 1))


def failure_events(fleet: Fleet, n_fires: int) -> float:
    """Events failures add to a run of ``n_fires`` cycles (docs/model.md §1c), per fleet the
    largest: over the run's time bound H ≈ (n_fires + 2) × the slowest solo period, job i
    fails about H / M_i times (Poisson). Each failure costs up to 4 events: the failure, the
    restart end, and the two switches of the cycle it redoes. Allowed: twice the mean plus
    8 standard deviations plus 16 failures per job."""
    period = np.asarray(fleet.period, np.float64)
    active = np.asarray(fleet.active)
    mtbf = np.where(active, np.asarray(fleet.mtbf, np.float64), np.inf)
    horizon = (n_fires + 2) * np.max(np.where(active, period, 0.0), axis=-1, keepdims=True)
    mean = horizon / mtbf
    per_job = 2 * mean + 8 * np.sqrt(mean) + 16
    return float(np.max(4 * np.sum(np.where(active, per_job, 0.0), axis=-1)))


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
    size = np.where(active, np.asarray(fleet.size, np.float64), 0.0)
    largest = np.max(size, axis=-1, keepdims=True)
    # With sizes (§1b) a job runs at least at min(1, C / (N·max w)) under either power
    # policy (maxmin: λ ≥ C/N; uniform: Σ_S w ≤ N·max w), at least its share
    # min f · w_i / Σ w under "weighted", and under "fcfs" it waits at most for every
    # other write queued ahead of it, each at f(1).
    slowest_speed = np.minimum(1.0, cap / (n_jobs * np.maximum(largest, 1.0))) * np.where(alpha > 0, alpha, 1.0)
    table = np.asarray(fleet.throughput, np.float64)
    slowest_rate = np.min(table[..., 1:], axis=-1, keepdims=True) / n_jobs
    with np.errstate(all="ignore"):
        if fleet.storage_policy == "weighted":
            share = size / np.sum(size, axis=-1, keepdims=True)
            slowest_rate = np.minimum(slowest_rate, np.min(table[..., 1:], axis=-1, keepdims=True) * share)
        write_time = write / slowest_rate
        if fleet.storage_policy == "fcfs":
            write_time = np.sum(np.where(active, write, 0.0), axis=-1, keepdims=True) / table[..., 1:2]
        cycle = (compute + 8 * sigma) / slowest_speed + write_time
        cycle = cycle + np.asarray(fleet.delay, np.float64)[..., None]
        return (n_fires + 2) * np.max(np.where(active, cycle, 0.0), axis=-1)


def horizon_events(fleet: Fleet, horizon) -> np.ndarray:
    """About how many events each fleet steps up to the horizon H (*B,) (`events_to`)."""
    return events_to(horizon, np.asarray(fleet.period, np.float64), np.asarray(fleet.mtbf, np.float64),
                     np.asarray(fleet.restart, np.float64), np.asarray(fleet.active))


def events_to(horizon, period, mtbf, restart, active) -> np.ndarray:
    """About how many events a fleet of jobs with solo periods T_i + d_i/f(1), MTBFs M_i
    (inf: none) and restarts R_i steps up to the horizon H: two switches per solo cycle,
    H / period_i cycles, plus a failure and a restart end per failure, about H / (M_i + R_i)
    of them (docs/model.md §1c). (*B, N) arrays in, (*B,) out. An estimate for progress
    bars and messages: simultaneous switches count once, and contention slows the cycles."""
    with np.errstate(all="ignore"):
        cycles = np.sum(np.where(active, np.asarray(horizon, np.float64)[..., None] / period, 0.0), axis=-1)
    return 2 * cycles + 2 * failures_to(horizon, mtbf, restart, active)


def failures_to(horizon, mtbf, restart, active) -> np.ndarray:
    """About how many failures the jobs of a fleet have up to H (*B,): each fails about
    H / (M_i + R_i) times (an up time of M_i on average, then R_i down; M_i = inf: none)."""
    horizon = np.asarray(horizon, np.float64)[..., None]
    with np.errstate(all="ignore"):
        per_job = np.where(active & np.isfinite(mtbf), horizon / (mtbf + restart), 0.0)
    return np.sum(per_job, axis=-1)


def least_failure_events(horizon, mtbf, restart, active) -> np.ndarray:
    """A lower bound on the events of failures up to H (*B,): half the expected failures
    (`failures_to`)."""
    return 0.5 * failures_to(horizon, mtbf, restart, active)


def check_events(name: str, horizon, least, estimate, n_jobs: int, failures: bool, max_events: int = MAX_EVENTS):
    """Refuses, naming ``name``, a horizon whose run needs at least ``least`` events (per
    fleet, *B) where that is beyond ``max_events``; ``estimate``: the likely count."""
    least = np.ravel(least)
    if not np.any(least > max_events):
        return
    worst = int(np.argmax(least))
    horizon = np.broadcast_to(horizon, np.shape(least)).ravel() if np.ndim(horizon) else np.full(least.shape, horizon)
    raise ValueError(
        f"{name} = {float(horizon[worst]):.6g} cannot finish within the event budget: it needs about "
        f"{float(np.ravel(estimate)[worst]):.3g} events per fleet ({n_jobs} jobs x H / cycle"
        + (" + failures" if failures else "") + f"), at least {least[worst]:.3g}, beyond the budget of "
        f"{max_events} events; lower {name} (or rescale the time unit)"
    )


def check_horizon_events(fleet: Fleet, horizon, jitter=None, max_events: int = MAX_EVENTS, name: str = "until") -> None:
    """Refuses a run to the horizon H that cannot finish within ``max_events`` events per
    fleet, before it starts (it would run for a long while and stop unfinished).

    The count compared is a lower bound: with failures, half the expected failures
    (`least_failure_events`); without, the job of the slowest cycle still switches twice
    per cycle bound of `time_bound`, 2·⌊H / cycle⌋ times."""
    horizon = np.broadcast_to(np.asarray(horizon, np.float64), fleet.batch_shape)
    active = np.asarray(fleet.active)
    mtbf, restart = np.asarray(fleet.mtbf, np.float64), np.asarray(fleet.restart, np.float64)
    if fleet.has_failures:
        least = least_failure_events(horizon, mtbf, restart, active)
    else:
        with np.errstate(all="ignore"):
            least = 2 * np.floor(horizon / time_bound(fleet, -1, jitter))
    least = np.where(np.any(active, axis=-1), least, 0.0)
    check_events(name, horizon, least, horizon_events(fleet, horizon), fleet.n_jobs, fleet.has_failures, max_events)


def check_horizon(until, batch_shape, dtype, name: str = "until") -> np.ndarray:
    """``until`` as a float64 array of the batch shape: finite and > 0 in the dtype used."""
    horizon = real_array(name, until)
    try:
        horizon = np.broadcast_to(horizon, batch_shape)
    except ValueError:
        raise ValueError(f"{name} must be a scalar or have the batch shape {batch_shape}, got {np.shape(until)}") from None
    low, high = value_range(dtype)
    bad = ~(np.isfinite(horizon) & (horizon > 0) & (horizon <= high))
    with np.errstate(over="ignore"):
        vanishes = np.any(horizon.astype(dtype) == 0)
    if bad.any() or vanishes:
        raise ValueError(f"{name} must be finite and in (0, {high:.3g}] in {np.dtype(dtype)}, got {until!r}")
    return horizon


def fires_before(fleet: Fleet, horizon: np.ndarray) -> int:
    """About how many cycles the fastest job completes before the horizon: sizes the event
    budget of runs with ``until`` (at least one cycle per solo period of the fastest job)."""
    period = np.asarray(fleet.period, np.float64)
    fastest = np.min(np.where(np.asarray(fleet.active), period, np.inf), axis=-1)
    cycles = np.max(np.asarray(horizon, np.float64) / fastest)
    return int(min(MAX_FIRES, np.ceil(cycles) + 1))


def check_time_bound(fleet: Fleet, n_fires: int, jitter) -> None:
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


def check_trace_memory(fleet: Fleet, n_fires: int, queue_size: int, devices) -> None:
    n_fleets = int(np.prod(fleet.batch_shape, dtype=np.int64))
    check_memory(
        f"simulate with B = {n_fleets} fleets x N = {fleet.n_jobs} jobs x K = {n_fires} firings",
        trace_bytes(fleet, n_fires, queue_size),
        devices,
        hint="lower n_fires or the batch, or split the ensemble (ckpt_jax.run_ensemble)",
    )


def batch_keys(key, batch_shape, n_jobs: int, fleet_offset: int):
    """Per-job PRNG keys, shape (B, N), derived from counters only (layout invariant).

    A scalar key is folded with each fleet's flat index (plus ``fleet_offset``, for
    chunked ensembles); a key array of the batch shape gives each fleet its own key.
    """
    n_fleets = int(np.prod(batch_shape, dtype=np.int64))
    key = jax.random.key(0) if key is None else check_key(key, batch_shape)
    if key.shape == ():
        return fold_keys(key, jnp.uint32(fleet_offset), n_fleets, n_jobs)
    return job_keys(key.reshape(n_fleets), n_jobs)

# Jitted so that deriving keys costs one dispatch, not a dozen (it dominated small runs).


@functools.partial(jax.jit, static_argnums=(1,))


def job_keys(fleet_keys, n_jobs: int):
    jobs = jnp.arange(n_jobs, dtype=jnp.uint32)
    return jax.vmap(lambda k: jax.vmap(jax.random.fold_in, in_axes=(None, 0))(k, jobs))(fleet_keys)


@functools.partial(jax.jit, static_argnums=(2, 3))


def fold_keys(key, fleet_offset, n_fleets: int, n_jobs: int):
    index = jnp.arange(n_fleets, dtype=jnp.uint32) + fleet_offset
    return job_keys(jax.vmap(jax.random.fold_in, in_axes=(None, 0))(key, index), n_jobs)


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


def check_failure_times(failure_times, fleet: Fleet) -> np.ndarray:
    """Explicit failure times (docs/model.md §1c) as an array of shape (*B, N, F) in the
    fleet's dtype: broadcastable to it, no NaN, >= 0, each job's row strictly increasing
    and padded at its end with +inf (a row of only +inf: the job never fails)."""
    times = real_array("failure_times", failure_times)
    if times.ndim < 2:
        raise ValueError(f"failure_times must have shape (*B, N, F) = {fleet.batch_shape + (fleet.n_jobs,)} + (F,), "
                         f"got {times.shape}")
    try:
        times = np.broadcast_to(times, fleet.batch_shape + (fleet.n_jobs, times.shape[-1]))
    except ValueError:
        raise ValueError(f"failure_times must have shape (*B, N, F) = {fleet.batch_shape + (fleet.n_jobs,)} + (F,), "
                         f"got {times.shape}") from None
    if np.any(np.isnan(times)) or np.any(times < 0):
        raise ValueError("failure_times must be >= 0 and not NaN (pad a job's row with +inf)")
    _, high = value_range(fleet.dtype)
    if np.any(np.isfinite(times) & (times > high)):
        raise ValueError(f"failure_times must be +inf or at most {high:.3g} in {np.dtype(fleet.dtype)}")
    cast = times.astype(fleet.dtype)
    earlier, later = cast[..., :-1], cast[..., 1:]
    if np.any((later <= earlier) & ~(np.isinf(earlier) & np.isinf(later))):
        raise ValueError(f"failure_times must be strictly increasing along each job's row in "
                         f"{np.dtype(fleet.dtype)}, padded at the end with +inf")
    return cast


def listed_failure_events(failure_times: np.ndarray, fleet: Fleet) -> int:
    """Events explicit failure times add to a run, per fleet the largest: up to 4 per
    listed time of an active job (the failure, the restart end and the two switches of
    the cycle it redoes), as `failure_events` counts them for drawn failures."""
    listed = np.where(np.asarray(fleet.active)[..., None], np.isfinite(failure_times), False)
    return int(4 * np.max(np.sum(listed, axis=(-1, -2)), initial=0))


def flat_params(fleet: Fleet, jitter=None, key=None, fleet_offset: int = 0, failure_times=None) -> Params:
    """Flattens a validated fleet into per-fleet parameter arrays with one batch axis
    (``failure_times``: already checked by `check_failure_times`, or None)."""
    batch_shape = fleet.batch_shape
    n_jobs = fleet.n_jobs
    n_fleets = int(np.prod(batch_shape, dtype=np.int64))
    sigma = check_jitter(jitter, batch_shape, fleet.dtype)
    fleet_offset = check_fleet_offset(fleet_offset, n_fleets)
    flat = lambda x, tail: jnp.reshape(x, (n_fleets,) + tail)  # noqa: E731
    return Params(
        compute=flat(fleet.compute, (n_jobs,)),
        write=flat(fleet.write, (n_jobs,)),
        cap=flat(fleet.cap, ()),
        throughput=flat(fleet.throughput, (n_jobs + 1,)),
        delay=flat(fleet.delay, ()),
        async_fraction=flat(fleet.async_fraction, ()),
        active=flat(fleet.active, (n_jobs,)),
        jitter=jnp.asarray(sigma.reshape(n_fleets), fleet.dtype),
        job_keys=batch_keys(key, batch_shape, n_jobs, fleet_offset),
        size=flat(fleet.size, (n_jobs,)),
        mtbf=flat(fleet.mtbf, (n_jobs,)),
        restart=flat(fleet.restart, (n_jobs,)),
        failure_times=None if failure_times is None else jnp.asarray(
            np.reshape(failure_times, (n_fleets, n_jobs, -1)), fleet.dtype),
    )
