"""The plan of a run: every host decision of `ckpt_jax.simulate`, made once, on concrete
values, before anything is traced (docs/development.md, "Layers").

* **Variants** — which variants of the model each fleet uses (`variants`), and the rate
  rules the general engine traces for a group of fleets (`sharing_for`);
* **paths** — the loop each fleet runs on (`choose_paths`: FIFO, clock or general);
* **budgets** — the events, time and memory a run may take, sized and refused before it
  starts (`default_max_events`, `check_time_bound`, `check_horizon_events`, ...);
* **the plan** — `plan` checks `simulate`'s arguments and returns a frozen `Plan`: the
  run's `RunConfig`, the flattened `Params`, the groups of fleets (each with its loop and
  rate rules) and the event budget. `simulate` is then: plan, run each group through the
  driver, reassemble.

Every failure here is a `ValueError` that names the argument and says what is allowed.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.core import Tracer

from . import sharding
from ._loops.config import RunConfig, default_events_per_iteration
from ._observe import SaveAt
from ._params import Params, params_of
from ._rates import Sharing
from ._validate import (
    MAX_EVENTS,
    MAX_FIRES,
    check_fleet_offset,
    check_horizon,
    check_int,
    check_jitter,
    check_key,
    check_key_given,
    check_memory,
    check_method,
    value_range,
)
from .model import ONE_AT_A_TIME, Fleet, State, check_queue_policy, check_state, failures_to
from .model import check_failure_times as _check_listed

__all__ = [
    "Variants",
    "variants",
    "sharing_for",
    "non_default_sharing",
    "FIFO_MIN_JOBS",
    "PATHS",
    "fifo_eligible",
    "choose_paths",
    "general_only_reason",
    "sharing_reason",
    "default_max_events",
    "failure_events",
    "listed_failure_events",
    "fires_before",
    "time_bound",
    "check_time_bound",
    "least_failure_events",
    "check_events",
    "least_events",
    "check_horizon_events",
    "WORK_BUDGET",
    "work",
    "check_work",
    "largest_count",
    "trace_bytes",
    "check_trace_memory",
    "check_failure_times",
    "Group",
    "Plan",
    "plan",
]


# -- variants: which variants of the model a fleet uses, and the rate rules it traces


class Variants(NamedTuple):
    """Which variants of the model the fleets of a batch use (docs/model.md §1, §1b, §1c):
    boolean arrays of the batch shape, one flag per fleet, and the storage policy's one flag
    for the batch. From `variants`, the one test of the variants a fleet uses: a run's static
    flags, the loops that are exact for a fleet and the rules it traces all follow from it.

    Attributes:
      delay: τ > 0, the power controller acts on the load of τ earlier.
      asynchronous: α > 0, a draining job keeps computing at α of its speed.
      jitter: σ > 0, compute works drawn per cycle.
      sized: some active job has a size other than 1.
      failures: some job fails (a finite ``mtbf``).
      fcfs: a storage policy that drains one writer at a time (``"fcfs"``,
        ``"fcfs_nonblocking"``, ``"cooperative"``; the whole batch).
      limits: some active job has a finite write limit (docs/model.md §1d).
      two_level: two-level checkpoints, a snapshot then a background drain (§1d).
    """

    delay: Any
    asynchronous: Any
    jitter: Any
    sized: Any
    failures: Any
    fcfs: bool
    limits: Any = False
    two_level: Any = False

    @property
    def instant_blocking(self):
        """Where τ = 0 and α = 0: the controller acts at once and a job blocks while it
        writes (the return maps' and the phase coupling's base model)."""
        return ~self.delay & ~self.asynchronous

    @property
    def one_rate(self):
        """Where every writer drains at one rate and every computing job works at one rate:
        all sizes 1 and a storage policy other than ``"fcfs"``. Unequal sizes break that
        under ``"maxmin"`` and ``"weighted"``, and under ``"uniform"`` the common speed
        min(1, C/Σ_S w_j) depends on *which* jobs compute; ``"fcfs"`` drains one writer at
        a time. Elsewhere only the general engine is exact."""
        return np.logical_not(self.sized | self.fcfs)

    @property
    def virtual_clock(self):
        """Where the virtual clocks of the fast loops (FIFO, clock) are exact: τ = 0, α = 0
        and one rate per phase (`one_rate`); the base model exactly."""
        return self.instant_blocking & self.one_rate & np.logical_not(self.limits | self.two_level)


def variants(fleet: Fleet, jitter=None) -> Variants:
    """Which variants of the model each fleet of ``fleet`` uses (`Variants`), with the jitter
    σ ``jitter`` (None: none; a validated scalar or batch-shaped σ otherwise).

    Decided on the host for concrete fleets (NumPy arrays). A `Fleet` traced by `jax.vmap`
    or `jax.jit` (as the return maps allow) gets traced flags for τ, α and failures, and for
    sizes the flag `Fleet` recorded when it was built."""
    arrays = (fleet.delay, fleet.async_fraction, fleet.mtbf, jitter, fleet.write_limit, fleet.two_level)
    xp = jnp if any(isinstance(x, Tracer) for x in arrays) else np
    sigma = xp.zeros(fleet.batch_shape) if jitter is None else xp.asarray(jitter)
    two_level = xp.asarray(fleet.two_level)
    return Variants(
        delay=xp.asarray(fleet.delay) > 0,
        # A two-level job computes while its drain runs, as α = 1 does (§1d).
        asynchronous=(xp.asarray(fleet.async_fraction) > 0) | two_level,
        jitter=xp.broadcast_to(sigma > 0, fleet.batch_shape),
        sized=_sized(fleet),
        failures=xp.any(xp.isfinite(xp.asarray(fleet.mtbf)), axis=-1),
        fcfs=fleet.storage_policy in ONE_AT_A_TIME,
        limits=_limited(fleet),
        two_level=two_level,
    )


def _limited(fleet: Fleet) -> np.ndarray:
    """Per fleet (batch shape), whether some active job has a finite write limit; under
    tracing the flag `Fleet` recorded when it was built (as `_sized`)."""
    if isinstance(fleet.write_limit, Tracer) or isinstance(fleet.active, Tracer):
        return np.full(fleet.batch_shape, getattr(fleet, "_limited", True))
    return np.any(np.asarray(fleet.active) & np.isfinite(np.asarray(fleet.write_limit)), axis=-1)


def _sized(fleet: Fleet) -> np.ndarray:
    """Per fleet (batch shape), whether some active job has a size other than 1.

    Under tracing (a `Fleet` passed through `jax.vmap` or `jax.jit`, as the return maps
    allow) the sizes are unknown; the answer is then the flag `Fleet` recorded, as static
    data, when it was built (True for the whole batch if any fleet of it was sized: the
    size-aware rules are exact for unit sizes too, only slower)."""
    if isinstance(fleet.size, Tracer) or isinstance(fleet.active, Tracer):
        return np.full(fleet.batch_shape, getattr(fleet, "_sized", True))
    return np.any(np.asarray(fleet.active) & (np.asarray(fleet.size) != 1), axis=-1)


def sharing_for(fleet: Fleet, any_sized: bool | None = None, any_limits: bool | None = None) -> Sharing:
    """The `Sharing` the general engine traces for ``fleet`` (decided on the host).

    ``any_sized``: whether the fleets it will run include one with a size other than 1
    (default: `Variants.sized` over the whole batch). `simulate` runs the unit-size fleets of a
    batch apart from the sized ones, so they trace the base rule itself: per-job rates
    ("weighted") let XLA fuse a product into a subtraction (one FMA) where the base rule's
    per-fleet rate does not, which would move unit-size fleets by an ulp. ``any_limits``:
    whether they include one with a write limit (default: `Variants.limits` over the batch);
    fleets without run apart, on the rules without limits, for the same reason.
    """
    if any_sized is None:
        any_sized = bool(np.any(variants(fleet).sized))
    if any_limits is None:
        any_limits = bool(np.any(variants(fleet).limits))
    power = fleet.power_policy if any_sized else "count"
    if power != "count" and _cap_never_binds(fleet):
        power = "free"
    storage = fleet.storage_policy
    if storage == "weighted" and not any_sized:
        storage = "fair"
    return Sharing(power, storage, bool(any_limits))


def _cap_never_binds(fleet: Fleet) -> bool:
    """Whether no computing set of any fleet can exceed the power cap: Σ of the active sizes
    ≤ C in every fleet (sizes are > 0, so every subset draws less), and no controller delay
    (a delayed controller schedules its updates from the load, so it keeps its rule).
    False under tracing (the values are unknown there)."""
    arrays = (fleet.size, fleet.active, fleet.cap, fleet.delay)
    if any(isinstance(x, Tracer) for x in arrays):
        return False
    size = np.where(np.asarray(fleet.active), np.asarray(fleet.size, np.float64), 0.0)
    cap = np.asarray(fleet.cap, np.float64)
    return bool(np.all(np.asarray(fleet.delay) == 0) and np.all(size.sum(axis=-1) <= cap))


def non_default_sharing(fleet: Fleet) -> dict:
    """The sizes and policies of ``fleet`` that differ from the defaults (for manifests and
    summaries, which then stay as they were for base-model fleets)."""
    entries = {}
    if bool(np.any(np.asarray(fleet.size) != 1)):
        entries["size"] = np.asarray(fleet.size).tolist()
    if fleet.power_policy != "maxmin":
        entries["power_policy"] = fleet.power_policy
    if fleet.storage_policy != "fair":
        entries["storage_policy"] = fleet.storage_policy
    return entries


# -- paths: the loop each fleet runs on


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
    if fleet.has_outages:
        return "outages (outage_mtbf or outage_times, docs/model.md §1f): they are events of the general engine only"
    if np.any(uses.limits):
        return "write_limit (docs/model.md §1d): writers at their limits do not share one rate"
    if np.any(uses.two_level):
        return "snapshot (two-level checkpoints, docs/model.md §1d): snapshots are events of the general engine only"
    if fleet.has_overheads:
        return "overhead (docs/model.md §1g): the end of a checkpoint's overhead is an event of the general engine only"
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


# -- budgets: the events, time and memory a run may take, sized and refused before it starts


def default_max_events(n_jobs: int, n_fires: int, fleet: Fleet | None = None) -> int:
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
        if np.any(variants(fleet).delay):
            ratio *= 2  # each change of the computing count schedules one controller update
        # Sizes (§1b) slow a job beyond its solo period: a small writer's weighted share, or
        # a large job's water-filling level, by up to max w / min w; under "fcfs" a write
        # may wait for every other one.
        size = np.where(active, np.asarray(fleet.size, np.float64), 1.0)
        if fleet.power_policy == "maxmin" or fleet.storage_policy == "weighted":
            ratio *= float(np.max(size.max(axis=-1) / size.min(axis=-1)))
        if fleet.storage_policy in ONE_AT_A_TIME:
            ratio *= n_jobs
    budget = 4 * n_jobs * (n_fires + 2) * min(ratio, 1e4) + 64
    if fleet is not None and (fleet.has_failures or fleet.has_outages):
        budget += failure_events(fleet, n_fires)
    return int(min(budget, 2**31 - 1))


def failure_events(fleet: Fleet, n_fires: int) -> float:
    """Events failures add to a run of ``n_fires`` cycles (docs/model.md §1c), per fleet the
    largest: over the run's time bound H ≈ (n_fires + 2) × the slowest solo period, job i
    fails about H / M_i times (Poisson). Each failure costs up to 4 events: the failure, the
    restart end, and the two switches of the cycle it redoes; one more, the read's end, with
    recovery reads (docs/model.md §1e). Allowed: twice the mean plus 8 standard deviations plus
    16 failures per job (with failures while down, H / M_i still bounds the mean); and per
    domain as many outage instants, each one event (§1f)."""
    period = np.asarray(fleet.period, np.float64)
    active = np.asarray(fleet.active)
    mtbf = np.where(active, fleet.failure_mtbf, np.inf)  # outages too (docs/model.md §1f)
    horizon = (n_fires + 2) * np.max(np.where(active, period, 0.0), axis=-1, keepdims=True)
    mean = horizon / mtbf
    per_job = 2 * mean + 8 * np.sqrt(mean) + 16
    events = 5 if fleet.has_recovery_reads else 4
    jobs = events * np.sum(np.where(active, per_job, 0.0), axis=-1)
    # Each outage instant is an event of its own (§1f), whether it finds a job up or not.
    outages = fleet.outage_events(horizon[..., 0], mean=False)
    if fleet.outage_kind == "drawn":
        outages = np.where(outages > 0, 2 * outages + 8 * np.sqrt(outages) + 16, 0.0)
    return float(np.max(jobs + np.sum(outages, axis=-1)))


def listed_failure_events(failure_times: np.ndarray, fleet: Fleet) -> int:
    """Events explicit failure times add to a run, per fleet the largest: up to 4 per
    listed time of an active job (the failure, the restart end and the two switches of
    the cycle it redoes; 5 with recovery reads, their end), as `failure_events` counts them
    for drawn failures."""
    listed = np.where(np.asarray(fleet.active)[..., None], np.isfinite(failure_times), False)
    events = 5 if fleet.has_recovery_reads else 4
    return int(events * np.max(np.sum(listed, axis=(-1, -2)), initial=0))


def fires_before(fleet: Fleet, horizon: np.ndarray) -> int:
    """About how many cycles the fastest job completes before the horizon: sizes the event
    budget of runs with ``until`` (at least one cycle per solo period of the fastest job)."""
    period = np.asarray(fleet.period, np.float64)
    fastest = np.min(np.where(np.asarray(fleet.active), period, np.inf), axis=-1)
    cycles = np.max(np.asarray(horizon, np.float64) / fastest)
    return int(min(MAX_FIRES, np.ceil(cycles) + 1))


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
        if fleet.storage_policy in ONE_AT_A_TIME:
            write_time = np.sum(np.where(active, write, 0.0), axis=-1, keepdims=True) / table[..., 1:2]
        cycle = (compute + 8 * sigma) / slowest_speed + write_time
        cycle = cycle + np.asarray(fleet.delay, np.float64)[..., None]
        return (n_fires + 2) * np.max(np.where(active, cycle, 0.0), axis=-1)


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


def least_failure_events(horizon, mtbf, restart, active) -> np.ndarray:
    """A lower bound on the events of failures up to H (*B,): half the expected failures
    (`failures_to`)."""
    return 0.5 * failures_to(horizon, mtbf, restart, active)


def check_events(
    name: str,
    horizon,
    least,
    estimate,
    n_jobs: int,
    failures: bool,
    max_events: int = MAX_EVENTS,
    outages: bool = False,
):
    """Refuses, naming ``name``, a horizon whose run needs at least ``least`` events (per
    fleet, *B) where that is beyond ``max_events``; ``estimate``: the likely count, every
    event kind in it (`ckpt_jax.Fleet.events`)."""
    least = np.ravel(least)
    if not np.any(least > max_events):
        return
    worst = int(np.argmax(least))
    horizon = np.broadcast_to(horizon, np.shape(least)).ravel() if np.ndim(horizon) else np.full(least.shape, horizon)
    kinds = (
        "firings and write ends"
        + (", failures and restarts" if failures else "")
        + (", outage instants" if outages else "")
    )
    raise ValueError(
        f"{name} = {float(horizon[worst]):.6g} cannot finish within the event budget: it needs about "
        f"{float(np.ravel(estimate)[worst]):.3g} events per fleet ({n_jobs} jobs to H, every kind counted: "
        f"{kinds}), at least {least[worst]:.3g}, beyond the budget of "
        f"{max_events} events; lower {name} (or rescale the time unit)"
    )


def least_events(fleet: Fleet, horizon, jitter=None) -> np.ndarray:
    """A lower bound on the events of a run to the horizon H (*B,), every kind in one count:
    the switches of the job of the slowest cycle bound (`time_bound`), twice per cycle it
    completes in the time failures leave it (each failure costs at most its restart and the
    cycle it abandons), plus the failures' own events (`least_failure_events`) and the
    outage instants (`ckpt_jax.Fleet.outage_events`: half the drawn mean, every listed one).
    Fleets without active jobs step none."""
    horizon = np.broadcast_to(np.asarray(horizon, np.float64), fleet.batch_shape)
    active = np.asarray(fleet.active)
    mtbf, restart = np.asarray(fleet.mtbf, np.float64), np.asarray(fleet.restart, np.float64)
    every_cause = np.asarray(fleet.failure_mtbf, np.float64)  # outages fail jobs too (§1f)
    with np.errstate(all="ignore"):
        bound = time_bound(fleet, -1, jitter)
        # The share of H a job spends in cycles it completes: M / (M + R + one cycle bound).
        share = np.where(
            active & np.isfinite(every_cause), every_cause / (every_cause + restart + bound[..., None]), 1.0
        )
        up = horizon * np.min(np.where(active, share, 1.0), axis=-1)
        least = 2 * np.floor(up / bound)
    if fleet.has_failures:
        least = least + least_failure_events(horizon, mtbf, restart, active)
    if fleet.has_outages:  # each outage instant, up or down: half the drawn mean, every listed one
        least = least + fleet.outage_events(horizon) * (0.5 if fleet.outage_kind == "drawn" else 1.0)
    return np.where(np.any(active, axis=-1), least, 0.0)


def check_horizon_events(fleet: Fleet, horizon, jitter=None, max_events: int = MAX_EVENTS, name: str = "until") -> None:
    """Refuses a run to the horizon H that cannot finish within ``max_events`` events per
    fleet, before it starts (it would run for a long while and stop unfinished).

    One budget for every kind of event: the count compared is `least_events` (the cycles'
    switches and the failures' events together), a lower bound, and the message gives the
    likely count (`ckpt_jax.Fleet.events`)."""
    horizon = np.broadcast_to(np.asarray(horizon, np.float64), fleet.batch_shape)
    least = least_events(fleet, horizon, jitter)
    failing = fleet.has_failures or fleet.has_outages
    check_events(name, horizon, least, fleet.events(horizon), fleet.n_jobs, failing, max_events, fleet.has_outages)


# The work a command runs without being told `force`: job-events, events x jobs x runs
# (each event of the general engine costs O(N)). On one CPU core a job-event takes a few
# tenths of a microsecond, so 10^10 of them are about an hour of it; beyond, a run is refused
# unless the caller says so (``--force`` on the command line, ``force=True`` here).
WORK_BUDGET = 10**10


def work(events, n_jobs: int, n_runs: int) -> float:
    """The work of ``n_runs`` runs of ``n_jobs`` jobs stepping ``events`` events each (the
    largest of an array): job-events, what `check_work` compares with `WORK_BUDGET`."""
    return float(np.max(events)) * float(n_jobs) * float(n_runs)


def check_work(
    events, n_jobs: int, n_runs: int, *, force: bool = False, size: str = "", budget: float = WORK_BUDGET
) -> float:
    """The work of a run, estimated up front (`work`: events x jobs x runs), refused where it
    is beyond ``budget`` (`WORK_BUDGET`) unless ``force``, before anything is traced.

    ``events``: the events of one run (`ckpt_jax.Fleet.events` to a horizon, every kind
    counted); ``n_runs``: the fleets it runs (a batch, the draws, every step's runs);
    ``size``: what sets the fleet's size, for the message (a fleet file's
    ``groups[i].count``, an option such as ``--jobs``). Returns the work."""
    if not isinstance(force, bool):
        raise ValueError(f"force must be True or False, got {force!r}")
    total = work(events, n_jobs, n_runs)
    if not force and not total <= budget:
        where = f" ({size})" if size else ""
        raise ValueError(
            f"this run is about {total:.2g} job-events of work ({float(np.max(events)):.3g} events per run x "
            f"N = {n_jobs} jobs{where} x {n_runs} runs), beyond the budget of {budget:.2g} "
            "(about an hour of one CPU core) that runs without asking: lower the fleet size, the horizon "
            "or the runs, or pass --force (force=True) to run it anyway"
        )
    return total


def largest_count(spec) -> str:
    """A fleet file's largest group count, as its key: ``groups[i].count = n`` (for `check_work`)."""
    counts = [int(getattr(group, "count", 1)) for group in spec.groups]
    index = int(np.argmax(counts))
    return f"groups[{index}].count = {counts[index]}"


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


def check_failure_times(failure_times, fleet: Fleet) -> np.ndarray:
    """Listed failure times (docs/model.md §1c, §1f) as an array of shape (*B, N, F) in the
    fleet's dtype, checked as `Fleet(failure_times=...)` checks them
    (`ckpt_jax.model.check_failure_times`): >= 0, each job's row strictly increasing and padded
    at its end with NaN or +inf (stored as +inf)."""
    times = _check_listed(failure_times, fleet.compute.shape, fleet.dtype)
    return times.astype(fleet.dtype)


# -- the plan: every host decision of one `simulate` call, made once before any tracing


class Group(NamedTuple):
    """Fleets of a run that share one compiled loop: their `RunConfig` (with its ``path``
    and rate rules, ``sharing``) and their flat indices in the batch."""

    config: RunConfig
    index: np.ndarray


@dataclasses.dataclass(frozen=True, eq=False)
class Plan:
    """What `plan` decided for one run, frozen: `simulate` runs each group through the
    driver and reassembles the traces in batch order.

    Attributes:
      config: the run's static configuration (each group's adds its path and rate rules).
      params: the fleets' `Params`, flattened (leading axis B).
      phase, remaining: (B, N) the initial `State`'s arrays, flattened.
      horizon: (B,) the horizons, or None without ``until``.
      groups: the groups of fleets, in the order they run (`PATHS`; on the general engine
        unit-size fleets apart from sized ones, and fleets without write limits apart from
        those with, `sharing_for`).
      max_events: the event budget per fleet.
      expected_events: with ``until``, about how many events the busiest fleet steps
        (`Fleet.events`: what a progress bar counts down), else None.
      devices: the devices to shard over (`ckpt_jax.sharding.resolve_devices`), or None.
      batch_shape: the fleets' batch shape (*B,).
    """

    config: RunConfig
    params: Params
    phase: jax.Array
    remaining: jax.Array
    horizon: jax.Array | None
    groups: tuple[Group, ...]
    max_events: int
    expected_events: int | None
    devices: tuple | None
    batch_shape: tuple

    @property
    def n_fleets(self) -> int:
        return int(self.params.compute.shape[0])

    def part(self, group: Group) -> tuple:
        """``(params, phase, remaining, horizon)`` of the fleets of ``group`` (what
        `ckpt_jax._loops.driver.run` runs)."""
        part = (self.params, self.phase, self.remaining, self.horizon)
        if group.index.size == self.n_fleets:
            return part
        return jax.tree_util.tree_map(lambda x: x[group.index], part)


def plan(
    fleet: Fleet,
    state: State,
    n_fires: int | None,
    *,
    max_events: int | None = None,
    jitter=None,
    key=None,
    queue_size: int = 64,
    fleet_offset: int = 0,
    method: str = "auto",
    devices=None,
    save: SaveAt | None = None,
    until=None,
    failure_times=None,
    events_per_iteration: int | None = None,
) -> Plan:
    """Checks every argument of `ckpt_jax.simulate` (a `ValueError` naming it, before any
    tracing) and decides the run: its `RunConfig`, the event budget, the loop of each fleet
    and the rate rules of each group. The arguments are `simulate`'s."""
    run = _check_run(fleet, state, n_fires, save, until, failure_times, method)
    max_events, default_budget = _event_budget(fleet, run, max_events)
    queue_size = check_int("queue_size", queue_size, 1, 2**20)
    check_method(method)
    devices = sharding.devices_for_batch(devices, math.prod(fleet.batch_shape))
    if events_per_iteration is None:  # by the backend the run goes to
        backend = jax.default_backend() if devices is None else devices[0].platform
        events_per_iteration = default_events_per_iteration(backend)
    events_per_iteration = check_int("events_per_iteration", events_per_iteration, 1, 1024)
    sigma = check_jitter(jitter, fleet.batch_shape, fleet.dtype)
    fleet_offset = check_fleet_offset(fleet_offset, math.prod(fleet.batch_shape))
    uses = variants(fleet, jitter)  # the one test of which variants the run traces
    check_queue_policy(
        fleet.storage_policy, snapshot=False, async_fraction=fleet.async_fraction, delay=fleet.delay, jitter=sigma
    )
    if run.horizon is None:
        check_time_bound(fleet, run.fires, jitter)
    elif default_budget:  # a budget the caller chose may stop the run on purpose
        check_horizon_events(fleet, run.horizon, jitter, max_events)
    use_delay = bool(np.any(uses.delay))
    trace_len = run.fires if run.save.trace else 0
    check_trace_memory(fleet, trace_len, queue_size if use_delay else 1, devices)
    path = choose_paths(fleet, uses, "general" if run.failure_times is not None else method, run.save).ravel()
    use_jitter = bool(np.any(uses.jitter))
    drawn = (fleet.has_failures and run.failure_times is None) or fleet.outage_kind == "drawn"
    check_key_given(key, use_jitter, drawn_failures=drawn)
    key = None if key is None else check_key(key, fleet.batch_shape)
    params = params_of(fleet, sigma, key, fleet_offset, run.failure_times)  # all checked: built last
    config = RunConfig(
        n_fires=MAX_FIRES if run.horizon is not None else run.fires,
        trace_len=trace_len,
        save=run.save,
        stop_fires=run.n_fires if run.horizon is None else None,
        gap_fires=run.n_fires,
        queue_size=queue_size if use_delay else 1,
        use_jitter=use_jitter,
        use_delay=use_delay,
        use_async=bool(np.any(uses.asynchronous)),
        use_failures=run.use_failures,
        until=run.horizon is not None,
        use_snapshot=fleet.has_snapshots,
        recover_from=fleet.recover_from,
        use_recovery=run.use_failures and fleet.has_recovery_reads,
        fail_while_down=run.use_failures and fleet.fail_while_down,
        events_per_iteration=events_per_iteration,
    )
    n_fleets = params.compute.shape[0]
    return Plan(
        config=config,
        params=params,
        phase=jnp.reshape(state.phase, params.compute.shape),
        remaining=jnp.reshape(state.remaining, params.compute.shape).astype(fleet.dtype),
        horizon=None if run.horizon is None else jnp.asarray(run.horizon.reshape(n_fleets), fleet.dtype),
        groups=_groups(fleet, uses, config, path),
        max_events=max_events,
        expected_events=(None if run.horizon is None else int(min(np.max(fleet.events(run.horizon)), max_events))),
        devices=devices,
        batch_shape=fleet.batch_shape,
    )


class _Run(NamedTuple):
    """The checked arguments that decide how long a run goes and what it records."""

    state: State
    n_fires: int | None  # K as given (None only with until= and neither trace nor gaps saved)
    fires: int  # K where it stops the run or sizes the trace (0 where K is read nowhere)
    save: SaveAt
    horizon: np.ndarray | None
    failure_times: np.ndarray | None
    use_failures: bool


def _check_run(fleet, state, n_fires, save, until, failure_times, method) -> _Run:
    """The fleet, state, K, what to save, the horizon and the listed failures, checked
    together (a run with failures needs a horizon; a trace needs K)."""
    if not isinstance(fleet, Fleet):
        raise ValueError(f"fleet must be a ckpt_jax.Fleet, got {type(fleet).__name__}")
    save = SaveAt() if save is None else save
    if not isinstance(save, SaveAt):
        raise ValueError(f"save must be a ckpt_jax.SaveAt, got {type(save).__name__}")
    state = check_state(fleet, state)  # a State built by hand is validated here too
    horizon = None if until is None else check_horizon(until, fleet.batch_shape, fleet.dtype)
    if n_fires is None:
        if horizon is None:
            raise ValueError("n_fires must be an integer >= 1 (it may be None only with until=)")
        if save.trace or save.gaps:
            raise ValueError(
                "n_fires is needed to size the trace and the gaps observer; "
                "pass n_fires or save=SaveAt(trace=False, gaps=False)"
            )
    if failure_times is not None and fleet.has_failure_times:
        raise ValueError(
            "failure_times given twice: the fleet replays its own (Fleet(failure_times=...)); pass them to "
            "the Fleet or to simulate, not both"
        )
    if failure_times is not None:
        failure_times = check_failure_times(failure_times, fleet)
    elif fleet.has_failure_times:  # checked by the Fleet, stored with +inf padding
        failure_times = np.asarray(fleet.failure_times)
    if failure_times is not None:
        if method in ("fifo", "clock"):
            raise ValueError(
                f"method={method!r} cannot serve failure_times (failures are events of the general "
                "engine only, docs/model.md §1c); use 'general' or 'auto'"
            )
    use_failures = fleet.has_failures or failure_times is not None or fleet.has_outages
    if use_failures and horizon is None:
        # Without a horizon the run would stop at K completed writes per job, which a fleet
        # that keeps failing may never reach (an abandoned write takes a trace column).
        raise ValueError(
            f"n_fires={n_fires!r} without until= cannot end a run with failures (Fleet(mtbf=...) or "
            "failure_times): a failure abandons the write in progress, so K completed writes per job may "
            "never come (docs/model.md §1c). Pass until=H, a time horizon: the run stops at t = H and "
            "n_fires only sizes the trace (each job's first K firings up to H, a write a failure abandoned "
            "keeping its fire time with a NaN end time)"
        )
    # Counters and trace columns are int32: K stays well inside it.
    n_fires = None if n_fires is None else check_int("n_fires", n_fires, 1, MAX_FIRES)
    fires = 0 if n_fires is None else n_fires
    return _Run(state, n_fires, fires, save, horizon, failure_times, use_failures)


def _event_budget(fleet: Fleet, run: _Run, max_events) -> tuple[int, bool]:
    """The event budget per fleet, and whether it is the default (`default_max_events`,
    with the listed failures' events added)."""
    default_budget = max_events is None
    if default_budget:
        budget_fires = run.fires if run.horizon is None else fires_before(fleet, run.horizon)
        max_events = default_max_events(fleet.n_jobs, budget_fires, fleet)
        if run.failure_times is not None:
            max_events = min(max_events + listed_failure_events(run.failure_times, fleet), MAX_EVENTS)
    return check_int("max_events", max_events, 1, MAX_EVENTS), default_budget


def _groups(fleet: Fleet, uses: Variants, config: RunConfig, path: np.ndarray) -> tuple[Group, ...]:
    """The fleets of each loop, in `PATHS` order. "auto" decides per fleet, so a fleet's
    trace never depends on what it is batched with; on the general engine unit-size
    fleets run apart from sized ones, and fleets without write limits apart from those
    with (`sharing_for`)."""
    n_fleets = path.size
    with_sizes = uses.sized.reshape(n_fleets)
    with_limits = np.broadcast_to(uses.limits, fleet.batch_shape).reshape(n_fleets)
    chosen = [(name, path == name, Sharing()) for name in PATHS if name != "general"]
    chosen += [
        (
            "general",
            (path == "general") & (with_sizes == has_sizes) & (with_limits == has_limits),
            sharing_for(fleet, has_sizes, has_limits),
        )
        for has_limits in (False, True)
        for has_sizes in (False, True)
    ]
    return tuple(
        Group(dataclasses.replace(config, path=name, sharing=sharing), np.flatnonzero(where))
        for name, where, sharing in chosen
        if np.any(where)
    )
