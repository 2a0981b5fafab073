"""Checkpoint intervals designed over the exact simulator (docs/model.md claim 10).

The objective is the fleet's waste ``Σ_i w_i·waste_i / Σ_i w_i`` (w the sizes) over a horizon
H, averaged over failure (and jitter) draws, as the exact event loop measures it
(`ckpt_jax.simulate` with ``until=H``, `JobStats.waste`; with two-level checkpoints
``1 − persisted work / H``, `job_waste`). Write limits, snapshots and their recovery rule
(docs/model.md §1d) are the fleet's own and run as given. The loop is chaotic (claim 5) and
piecewise smooth in the intervals, so pathwise derivatives are useless over long horizons; the
gradient is estimated instead from the batch dimension:

* the intervals live in an unconstrained parametrisation of the bounds,
  ``T = lo·(hi/lo)^sigmoid(θ)`` (log-space, so a step in θ is a relative change in T);
* optionally (``offsets=True``) each job's launch offset is a decision variable too: its cycle
  position at t = 0 is the fraction ``θ mod 1`` of its solo cycle D + T in time (periodic, as the cycle is),
  smoothed and stepped with the intervals;
* antithetic Gaussian smoothing: P directions z_p ~ N(0, I) and
  ``ĝ = Σ_p [J(θ + σz_p) − J(θ − σz_p)]·z_p / (2σP)``, an unbiased estimate of the gradient of
  the smoothed objective J_σ(θ) = E_z J(θ + σz);
* common random numbers: the S failure draws are the same for every one of the 2P perturbed
  interval sets of a step, so most of the noise cancels in the differences. The whole
  population, shape (2P, S, N), is one batched `Fleet` and one `simulate` call, so a step
  compiles once and runs as a single batch.

`checkpoint_intervals` runs `optax.adam` (cosine-decayed learning rate) on θ, stops early when
a windowed mean of the objective stops improving beyond its standard error, and evaluates the
recommendation and the Young, Daly and contended-Young baselines on fresh draws shared by all
four (so that their differences are paired). The baselines take the time a checkpoint blocks a
job: its write alone, d / min(b, f(1)) with write limits; with two-level checkpoints the snapshot
s, and then no interval shorter than the drain (`contended_young`); two-level fleets get a
fourth, a lone job's exact optimum (`theory.two_level_optimal_interval`).
"""

from __future__ import annotations

import math
import warnings
from typing import NamedTuple, TypedDict

import jax
import jax.numpy as jnp
import numpy as np

from . import theory
from ._design_inputs import (
    LAUNCHES,
    check_inputs,
    interval_from_theta,
    labels_of,
    offset_from_theta,
    theta_from_interval,
)
from ._observe import SaveAt
from ._simulate import simulate
from .model import Fleet, State, cycle_positions, initial_state, solo_cycle_positions, state_from_positions

__all__ = [
    "Estimate",
    "Baseline",
    "History",
    "DesignResult",
    "GradientEstimate",
    "LAUNCHES",
    "interval_from_theta",
    "theta_from_interval",
    "offset_from_theta",
    "fleet_waste",
    "job_waste",
    "smoothed_objective",
    "smoothed_gradient",
    "contended_young",
    "launch_cycle",
    "launch_state",
    "checkpoint_intervals",
]


# Two-sided 95% normal quantile for the confidence intervals of `Estimate`.
_Z95 = 1.959963984540054


class Estimate(NamedTuple):
    """A Monte-Carlo mean with its 95% confidence interval (normal, over independent draws)."""

    mean: float
    low: float
    high: float

    @property
    def stderr(self) -> float:
        return (self.high - self.low) / (2 * _Z95)


class Baseline(NamedTuple):
    """A baseline's intervals (N,), its fleet waste, and the waste the recommendation saves
    against it (baseline − recommended, paired on the same draws: > 0 means better)."""

    intervals: np.ndarray
    waste: Estimate
    saved: Estimate


class History(NamedTuple):
    """Per optimisation step (leading axis: steps taken).

    Attributes:
      objective: estimate of the smoothed objective J_σ at the step's θ (mean over the 2P·S runs).
      stderr: its standard error over the S draws.
      grad_norm: Euclidean norm of the gradient estimate in θ.
      intervals: (steps, N) the intervals T(θ) at the step.
      offsets: (steps, N) the launch offsets at the step (`DesignResult.offsets`), or None.
    """

    objective: np.ndarray
    stderr: np.ndarray
    grad_norm: np.ndarray
    intervals: np.ndarray
    offsets: np.ndarray | None = None

    def to_xarray(self, *, groups=None, attrs=None):
        """The history as an `xarray.Dataset` over ``step`` (and ``job``): ``objective``,
        ``stderr``, ``grad_norm``, ``intervals``, ``offsets``; ``groups`` (N,) labels the
        jobs (or a `ckpt_jax.fleetfile.FleetSpec`: its group names). Needs ``pip install "ckpt_jax[xarray]"``."""
        from . import labelled

        return labelled.history_dataset(self, groups=groups, attrs=attrs)


class DesignResult(NamedTuple):
    """What `checkpoint_intervals` returns.

    Attributes:
      intervals: (N,) recommended T_i.
      waste: `Estimate` of the fleet waste at ``intervals`` on fresh evaluation draws.
      baselines: ``{"young", "daly", "young_contended"}`` → `Baseline`, on the same draws.
        With two-level checkpoints: max(√(2·s·M), D), Daly's with s then no shorter than D,
        the fixed point of `contended_young` (D the drain alone, d / min(b, f(1))), and
        ``"two_level"``: a lone job's exact optimum (`theory.two_level_optimal_interval`).
      history: `History` of the optimisation.
      stopped_early: whether early stopping ended the run before ``steps``.
      offsets: (N,) recommended launch offsets (``offsets=True``), each job's position at
        t = 0 in [0, `launch_cycle`) for the fleet run at ``intervals`` (`launch_state`): in
        its solo cycle D_i + T_i in time, or with two-level checkpoints in its compute phase T_i; None
        when the offsets were not designed.
    """

    intervals: np.ndarray
    waste: Estimate
    baselines: dict
    history: History
    stopped_early: bool
    offsets: np.ndarray | None = None


class GradientEstimate(NamedTuple):
    """One antithetic, common-random-number estimate at θ (`smoothed_gradient`).

    Attributes:
      objective: estimate of J_σ(θ), the mean fleet waste over the 2P·S runs.
      stderr: its standard error over the S draws (the 2P runs of a draw are correlated).
      gradient: (G,) estimate of ∇J_σ(θ) (G + G_o with offsets).
    """

    objective: float
    stderr: float
    gradient: np.ndarray


# -- the objective, measured by the exact simulator -------------------------------------


def _batched(fleet: Fleet, intervals: np.ndarray) -> Fleet:
    """``fleet`` with compute work ``intervals`` (*P, N): a validated batched `Fleet`."""
    batch = intervals.shape[:-1]
    cap = np.asarray(fleet.cap)
    per_fleet = lambda x: np.broadcast_to(np.asarray(x), batch)  # noqa: E731
    per_job = lambda x: np.broadcast_to(np.asarray(x), intervals.shape)  # noqa: E731
    return Fleet(
        intervals,
        per_job(fleet.write),
        cap=None if np.isinf(cap) else per_fleet(cap),
        throughput=np.broadcast_to(np.asarray(fleet.throughput), batch + (fleet.n_jobs + 1,)),
        delay=per_fleet(fleet.delay),
        async_fraction=per_fleet(fleet.async_fraction),
        active=per_job(fleet.active),
        size=per_job(fleet.size),
        power_policy=fleet.power_policy,
        storage_policy=fleet.storage_policy,
        mtbf=per_job(fleet.mtbf),
        restart=per_job(fleet.restart),
        write_limit=per_job(fleet.write_limit),
        snapshot=per_job(fleet.snapshot) if fleet.has_snapshots else None,
        recover_from=fleet.recover_from,
        idle_power=per_fleet(fleet.idle_power),
        recovery_read=per_job(fleet.recovery_read),
        fail_while_down=fleet.fail_while_down,
        dtype=fleet.dtype,
    )


def launch_cycle(fleet: Fleet) -> np.ndarray:
    """(*B, N) float64: the span a launch position lies in (`launch_state`): the solo cycle in
    time D_i + T_i (write first, then compute; `ckpt_jax.solo_cycle_positions`), or with
    two-level checkpoints the compute phase T_i alone, where `ckpt_jax.random_state` starts
    such jobs (a drain in flight at t = 0 would let the job compute a whole T_i meanwhile, so
    every job launched in its write would snapshot at T_i, together)."""
    compute = np.asarray(fleet.compute, np.float64)
    return compute if fleet.has_snapshots else np.asarray(fleet.solo_write, np.float64) + compute


def launch_state(fleet: Fleet, position) -> State:
    """The state with each job at ``position`` (*B, N) in [0, `launch_cycle`): that far in
    time into its solo cycle (`ckpt_jax.solo_cycle_positions`), or with two-level checkpoints
    the compute done in its first compute phase (computing, T_i − position left, no drain in
    flight)."""
    if not fleet.has_snapshots:
        position = np.asarray(position, np.float64)
        cycle = launch_cycle(fleet)
        if np.any(np.asarray(fleet.active) & ~((position >= 0) & (position < cycle))):
            raise ValueError("position must lie in [0, D_i + T_i), the solo cycle in time")
        return state_from_positions(fleet, solo_cycle_positions(fleet, position))
    position = np.asarray(position, np.float64)
    compute = np.asarray(fleet.compute, np.float64)
    if np.any(np.asarray(fleet.active) & ~((position >= 0) & (position < compute))):
        raise ValueError("position must lie in [0, T_i) with two-level checkpoints (the compute phase)")
    return initial_state(fleet, phase=0, remaining=compute - position)


def _launch_state(batched: Fleet, draw_keys, launch: str, offsets=None):
    cycle = launch_cycle(batched)
    if offsets is not None:  # (*P, N) fractions of each set's cycle, the same in every draw
        fractions = np.broadcast_to(np.asarray(offsets, np.float64)[..., None, :], cycle.shape)
    elif launch == "synchronous":
        return initial_state(batched)
    else:
        # Positions are drawn as fractions of the cycle per (draw, job), shared by every
        # interval set of the batch (common random numbers), scaled by each set's cycle D + T.
        fractions = jax.vmap(lambda k: jax.random.uniform(jax.random.fold_in(k, 1), (batched.n_jobs,)))(draw_keys)
        fractions = np.asarray(fractions, np.float64).reshape(cycle.shape)
    return launch_state(batched, cycle_positions(fractions, cycle))


def _run(fleet: Fleet, intervals: np.ndarray, draw_keys, horizon: float, jitter, launch: str, offsets=None):
    """JobStats of ``fleet`` at ``intervals`` (*P, N) under draws ``draw_keys`` (S,): every
    interval set runs every draw, batch (*P, S, N); ``offsets`` (*P, N) replace ``launch``."""
    n_draws = draw_keys.shape[0]
    batch = intervals.shape[:-1]
    grid = np.broadcast_to(intervals[..., None, :], batch + (n_draws, fleet.n_jobs))
    keys = jnp.broadcast_to(draw_keys, batch + (n_draws,))
    batched = _batched(fleet, np.ascontiguousarray(grid))
    state = _launch_state(batched, keys.reshape(-1), launch, offsets)
    out = simulate(
        batched,
        state,
        None,
        until=horizon,
        key=keys,
        jitter=jitter,
        throw=True,
        progress=False,
        save=SaveAt(trace=False, jobs=True),
    )
    assert out.jobs is not None  # recorded: SaveAt(jobs=True)
    return out.jobs


def _weighted(fleet: Fleet, per_job):
    weight = np.where(np.asarray(fleet.active), np.asarray(fleet.size, np.float64), 0.0)
    return np.asarray(per_job, np.float64) @ weight / weight.sum()


def fleet_waste(
    fleet: Fleet, intervals, *, horizon, keys, jitter=None, launch: str = "synchronous", offsets=None
) -> np.ndarray:
    """Fleet waste ``Σ_i w_i·waste_i / Σ_i w_i`` of ``fleet`` run with compute intervals
    ``intervals`` over [0, H], by the exact simulator, under each failure draw (waste_i as
    `job_waste` counts it: from the persisted work with two-level checkpoints).

    Args:
      fleet: a single `Fleet` (batch shape ()) with ``mtbf``.
      intervals: (*P, N) interval sets T to evaluate.
      horizon: H > 0.
      keys: (S,) PRNG keys, one per draw; every interval set sees the same S draws.
      jitter: compute jitter σ (docs/model.md §1), as for `simulate`.
      launch: ``"synchronous"`` (every job starts a fresh compute phase at t = 0) or
        ``"random"`` (uniform cycle positions per draw, the same fractions for every set).
        Positions lie in `launch_cycle` (`launch_state`).
      offsets: None, or (*P, N) launch offsets as fractions in [0, 1) of each job's
        `launch_cycle`, the same in every draw (they replace ``launch``).

    Returns:
      (*P, S) fleet waste.
    """
    intervals = np.asarray(intervals, np.float64)
    if offsets is not None:
        offsets = np.broadcast_to(np.asarray(offsets, np.float64), intervals.shape)
    jobs = _run(fleet, intervals, keys, float(horizon), jitter, launch, offsets)
    return _weighted(fleet, job_waste(fleet, jobs, horizon))


def job_waste(fleet: Fleet, jobs, horizon) -> np.ndarray:
    """Each job's waste as the design counts it, ``1 − work / H`` from a run's `JobStats`:
    the work saved is the persisted work (covered by a checkpoint whose drain ended) for a
    fleet with two-level checkpoints, and the useful work otherwise (`JobStats.waste`). The
    two differ only under ``recover_from="memory"``, where useful work counts at the snapshot
    (docs/model.md §1d): a design for such a fleet minimises the work not yet on storage.

    Args:
      fleet: the `Fleet` that was run (only whether it has snapshots is read).
      jobs: its `JobStats`, run with ``until=H``.
      horizon: H.

    Returns:
      The waste per job, the shape of ``jobs.waste``.
    """
    if not fleet.has_snapshots:
        return np.asarray(jobs.waste)
    persisted = np.asarray(jobs.persisted_work)
    return 1 - persisted / persisted.dtype.type(horizon)


# -- the estimator ---------------------------------------------------------------------


def _population(theta, key, n_pairs, n_draws, smoothing):
    """Directions (P, G), the 2P perturbed θ (2P, G) (+ then −) and the S draw keys."""
    direction_key, draw_key = jax.random.split(key)
    directions = np.asarray(jax.random.normal(direction_key, (n_pairs, theta.shape[0])), np.float64)
    population = np.concatenate([theta + smoothing * directions, theta - smoothing * directions])
    return directions, population, jax.random.split(draw_key, n_draws)


def _split(theta, labels, offset_labels, bounds):
    """θ (..., G [+ G_o]) → intervals (..., N) and offset fractions (..., N) or None."""
    n_groups = int(labels.max()) + 1
    intervals = np.asarray(interval_from_theta(theta[..., :n_groups], bounds))[..., labels]
    if offset_labels is None:
        return intervals, None
    return intervals, np.asarray(offset_from_theta(theta[..., n_groups:]))[..., offset_labels]


def _population_waste(
    fleet, theta, key, *, bounds, labels, offset_labels, horizon, n_pairs, n_draws, smoothing, jitter, launch
):
    theta = np.asarray(theta, np.float64)
    expected = int(labels.max()) + 1 + (0 if offset_labels is None else int(offset_labels.max()) + 1)
    if theta.shape != (expected,):
        per_offset = "" if offset_labels is None else ", then one per offset group"
        raise ValueError(f"theta must have shape ({expected},) (one per group{per_offset}), got {theta.shape}")
    directions, population, draws = _population(theta, key, n_pairs, n_draws, smoothing)
    intervals, offsets = _split(population, labels, offset_labels, bounds)
    return directions, fleet_waste(
        fleet, intervals, horizon=horizon, keys=draws, jitter=jitter, launch=launch, offsets=offsets
    )


class _Settings(TypedDict):
    """The checked settings of a design run, as `_population_waste` takes them."""

    bounds: tuple[np.ndarray, np.ndarray]  # (lo, hi) per group, (G,) each
    labels: np.ndarray  # (N,) interval group of each job
    offset_labels: np.ndarray | None  # (N,) offset group of each job; None without offsets
    horizon: float
    n_pairs: int
    n_draws: int
    smoothing: float
    launch: str


def _settings(
    fleet, bounds, horizon, n_draws, n_pairs, groups, launch, smoothing, offsets=False, offset_groups=None
) -> tuple[_Settings, tuple[np.ndarray, np.ndarray]]:
    """The checked settings; ``bounds`` per group (G,) each, ``job_bounds`` per job (N,)."""
    job_bounds, bounds, horizon, labels = check_inputs(fleet, bounds, horizon, n_draws, n_pairs, groups, launch)
    if not (0 < float(smoothing) < math.inf):
        raise ValueError(f"smoothing must be > 0 and finite, got {smoothing!r}")
    if not isinstance(offsets, (bool, np.bool_)):
        raise ValueError(f"offsets must be True or False, got {offsets!r}")
    if offset_groups is not None and not offsets:
        raise ValueError("offset_groups needs offsets=True")
    offset_labels = labels_of(offset_groups, fleet.n_jobs, "offset_groups") if offsets else None
    return _Settings(
        bounds=bounds,
        labels=labels,
        offset_labels=offset_labels,
        horizon=horizon,
        n_pairs=n_pairs,
        n_draws=n_draws,
        smoothing=float(smoothing),
        launch=launch,
    ), job_bounds


def smoothed_objective(
    fleet: Fleet,
    theta,
    key,
    *,
    bounds,
    horizon,
    n_draws,
    n_pairs=4,
    groups=None,
    smoothing=0.1,
    jitter=None,
    launch="synchronous",
    offsets=False,
    offset_groups=None,
) -> float:
    """Monte-Carlo estimate of J_σ(θ) = E_z E_ω[fleet waste at T(θ + σz)], from the same
    directions z and draws ω that `smoothed_gradient` derives from ``key``: finite differences
    of it, with one ``key``, are finite differences of the very estimate whose gradient
    `smoothed_gradient` estimates (common random numbers).

    Args: as `smoothed_gradient`.

    Returns:
      The mean fleet waste over the 2P·S runs.
    """
    settings, _ = _settings(fleet, bounds, horizon, n_draws, n_pairs, groups, launch, smoothing, offsets, offset_groups)
    _, waste = _population_waste(fleet, theta, key, jitter=jitter, **settings)
    return float(waste.mean())


def smoothed_gradient(
    fleet: Fleet,
    theta,
    key,
    *,
    bounds,
    horizon,
    n_draws,
    n_pairs=4,
    groups=None,
    smoothing=0.1,
    jitter=None,
    launch="synchronous",
    offsets=False,
    offset_groups=None,
) -> GradientEstimate:
    """Antithetic Gaussian-smoothing estimate of ∇_θ J_σ with common random numbers, from one
    batched `simulate` call of shape (2P, S, N).

    Args:
      fleet: a single `Fleet` with ``mtbf``.
      theta: (G,) unconstrained parameters, one per group (`interval_from_theta`); with
        ``offsets``, (G + G_o,): then one per offset group (`offset_from_theta`).
      key: PRNG key for the P directions and the S failure draws.
      bounds: (lo, hi), 0 < lo < hi finite: the intervals' range; each a number or (N,)
        per job (equal within a group).
      horizon: H > 0.
      n_draws: S >= 1 failure draws, shared by all 2P perturbed interval sets.
      n_pairs: P >= 1 antithetic pairs.
      groups: None (one θ per job) or (N,) integer labels (jobs in one group share a θ;
        θ's entries follow the sorted labels).
      smoothing: σ > 0, the smoothing scale in θ.
      jitter, launch: as `fleet_waste`.
      offsets: launch offsets are decision variables too (then ``launch`` is not used).
      offset_groups: None (one offset per job) or (N,) integer labels of jobs sharing one.

    Returns:
      A `GradientEstimate`.
    """
    settings, _ = _settings(fleet, bounds, horizon, n_draws, n_pairs, groups, launch, smoothing, offsets, offset_groups)
    directions, waste = _population_waste(fleet, theta, key, jitter=jitter, **settings)
    return _estimate(directions, waste, settings["smoothing"])


def _estimate(directions, waste, smoothing) -> GradientEstimate:
    n_pairs = directions.shape[0]
    plus, minus = waste[:n_pairs], waste[n_pairs:]
    gradient = ((plus - minus).mean(axis=1) @ directions) / (2 * smoothing * n_pairs)
    per_draw = waste.mean(axis=0)
    stderr = per_draw.std(ddof=1) / math.sqrt(per_draw.size) if per_draw.size > 1 else math.nan
    return GradientEstimate(float(waste.mean()), float(stderr), gradient)


# -- baselines -------------------------------------------------------------------------


def _solo_write(fleet: Fleet) -> np.ndarray:
    """(N,) each job's write time alone, D = d / min(b, f(1)) (`Fleet.solo_write`), in float64."""
    rate = np.minimum(np.asarray(fleet.write_limit, np.float64), float(np.asarray(fleet.throughput)[1]))
    return np.asarray(fleet.write, np.float64) / rate


def _young(fleet: Fleet, write=None) -> np.ndarray:
    """(N,) Young's interval from the time a checkpoint blocks a job: √(2·D·M), D the write
    time (``write``, default alone: `_solo_write`). With two-level checkpoints the snapshot s
    blocks, not the drain, and a checkpoint due before the previous drain of D ended waits
    for it: max(√(2·s·M), D), the exact optimum (`theory.two_level_optimal_interval`) to
    first order in s/M and D/M."""
    mtbf = np.asarray(fleet.mtbf, np.float64)
    write = _solo_write(fleet) if write is None else write
    if not fleet.has_snapshots:
        return np.sqrt(2 * write * mtbf)
    return np.maximum(np.sqrt(2 * np.asarray(fleet.snapshot, np.float64) * mtbf), write)


def _daly(fleet: Fleet) -> np.ndarray:
    """(N,) Daly's interval (`theory.daly_interval`) from the time a checkpoint blocks a job
    alone: the write D, or with two-level checkpoints the snapshot s, then no shorter than
    D (as `_young`; s = 0 gives D)."""
    mtbf = np.asarray(fleet.mtbf, np.float64)
    if not fleet.has_snapshots:
        return np.asarray(theory.daly_interval(_solo_write(fleet), mtbf), np.float64)
    snapshot = np.asarray(fleet.snapshot, np.float64)
    daly = np.asarray(theory.daly_interval(np.where(snapshot > 0, snapshot, 1.0), mtbf), np.float64)
    return np.maximum(np.where(snapshot > 0, daly, 0.0), _solo_write(fleet))


def _two_level_optimum(fleet: Fleet) -> np.ndarray:
    """(N,) the interval that minimises a lone job's long-run waste with two-level
    checkpoints (`theory.two_level_optimal_interval`: snapshot s, drain D alone, M; the
    restart R does not move it)."""
    active = np.asarray(fleet.active)
    # Padding slots get harmless values, and Young's interval back.
    pick = lambda x: np.where(active, np.asarray(x, np.float64), 1.0)  # noqa: E731
    optimum = theory.two_level_optimal_interval(
        pick(fleet.snapshot), pick(_solo_write(fleet)), pick(fleet.mtbf), recover_from=fleet.recover_from
    )
    return np.where(active, optimum, _young(fleet))


def contended_young(
    fleet: Fleet, *, horizon, keys, start=None, max_iter=10, rtol=1e-3, jitter=None, launch="synchronous"
) -> tuple:
    """Young's interval with the write time *as contended in the simulator*: the fixed point
    of T ← √(2·D(T)·M), D_i(T) each job's mean duration of a completed write, firing to end
    (`JobStats.completed_write_time` / `JobStats.writes`, over the draws ``keys``), when the
    fleet runs at T. Writes abandoned by a failure or still open at the horizon are left out:
    they would lengthen D (a job alone would not get Young's interval). With two-level
    checkpoints D(T) is the contended drain, and the map is T ← max(√(2·s·M), D(T)) (the
    snapshot s blocks, not the drain: `_young`).

    Args:
      fleet, horizon, jitter, launch: as `fleet_waste`.
      keys: (S,) draws, the same at every iteration (so the map is deterministic).
      start: (N,) the first T (default: Young's with the solo write time).
      max_iter: at most this many simulations.
      rtol: stop when no T_i moves by more than this fraction.

    Returns:
      ``(intervals (N,), iterations, converged)``.
    """
    mtbf = np.asarray(fleet.mtbf, np.float64)
    intervals = _young(fleet) if start is None else np.asarray(start, np.float64)
    for iteration in range(1, max_iter + 1):
        jobs = _run(fleet, intervals, keys, float(horizon), jitter, launch)
        writes = np.asarray(jobs.writes, np.float64).sum(axis=0)
        write_time = np.asarray(jobs.completed_write_time, np.float64).sum(axis=0)
        # A job that completed no write in any draw keeps its interval (no measurement).
        duration = np.where(writes > 0, write_time / np.maximum(writes, 1), intervals**2 / (2 * mtbf))
        updated = _young(fleet, duration)
        if fleet.has_snapshots:
            updated = np.where(writes > 0, updated, intervals)
        change = np.max(np.abs(updated / intervals - 1))
        intervals = updated
        if change <= rtol:
            return intervals, iteration, True
    return intervals, max_iter, False


def _launch_span(fleet: Fleet, write, intervals) -> np.ndarray:
    """`launch_cycle` of ``fleet`` run at ``intervals`` (..., N)."""
    return intervals if fleet.has_snapshots else write + intervals


def _mean_ci(samples) -> Estimate:
    samples = np.asarray(samples, np.float64)
    mean = float(samples.mean())
    half = _Z95 * float(samples.std(ddof=1)) / math.sqrt(samples.size) if samples.size > 1 else math.nan
    return Estimate(mean, mean - half, mean + half)


def _flat_reason(fleet: Fleet, job_bounds, horizon: float, launch: str, offsets: bool, waste) -> str:
    """Why the waste did not change across the population: what a user can change."""
    # The first checkpoint of a synchronous launch is saved at T + D (two-level: persisted
    # at T + s + D, the drain's end after the snapshot).
    first_saved = job_bounds[0] + np.asarray(fleet.snapshot, np.float64) + _solo_write(fleet)
    shortest = float(np.min(first_saved))
    if launch == "synchronous" and not offsets and horizon <= shortest:
        cycle = "T + s + d / min(b, f(1))" if fleet.has_snapshots else "T + d / f(1)"
        return (
            f"the horizon H = {horizon:g} is no longer than the shortest cycle {cycle} = {shortest:g} "
            "(at the lower bound), so no job completes a checkpoint before H; lengthen the horizon"
        )
    if not np.all(np.asarray(waste) == 1):
        return f"the waste was the same for every interval tried ({float(np.mean(waste)):.6g}); widen the bounds"
    reasons = []
    mtbf = np.asarray(fleet.mtbf, np.float64)
    if np.all(mtbf + np.asarray(fleet.restart, np.float64) < first_saved):
        reasons.append(
            f"every job fails more often (MTBF {float(mtbf.max()):.3g}) than its shortest cycle ({shortest:.3g})"
        )
    cap = float(np.asarray(fleet.cap))
    size = np.where(np.asarray(fleet.active), np.asarray(fleet.size, np.float64), 0.0)
    if cap < size.sum():
        reasons.append(f"the power cap C = {cap:g} slows compute to about {cap / size.sum():.3g} of full speed")
    return "no job saved any work before H in any draw (waste 1 everywhere)" + (
        ": " + "; ".join(reasons) if reasons else ""
    )


# -- the design loop -------------------------------------------------------------------


def checkpoint_intervals(
    fleet: Fleet,
    *,
    bounds,
    horizon,
    n_draws: int,
    key: jax.Array,
    groups=None,
    n_pairs: int = 4,
    steps: int = 200,
    learning_rate: float = 0.1,
    smoothing: float = 0.1,
    init=None,
    patience: int = 30,
    window: int = 10,
    eval_draws: int | None = None,
    jitter=None,
    launch: str = "synchronous",
    offsets: bool = False,
    offset_groups=None,
    progress: bool = True,
) -> DesignResult:
    """Checkpoint intervals that minimise the fleet's waste over [0, H], found with
    `optax.adam` over the exact simulator (docs/model.md claim 10).

    Args:
      fleet: a single `Fleet` (batch shape ()) with ``mtbf``; its ``compute`` is ignored.
      bounds: (lo, hi), 0 < lo < hi finite: the range of the intervals; each a number
        (every job) or an (N,) array (per job; the jobs of a group must share their bounds).
      horizon: H > 0, the time over which waste is measured.
      n_draws: S >= 1 failure draws per step, shared by the whole population of the step.
      key: PRNG key; the same key gives the same result.
      groups: None (one interval per job) or (N,) integer labels of jobs sharing an interval.
      n_pairs: P antithetic directions per step (a step simulates 2P·S fleets at once).
      steps: at most this many optimisation steps (the cosine schedule spans them).
      learning_rate: Adam's initial learning rate, in θ (log-interval) units.
      smoothing: σ, the Gaussian smoothing scale in θ.
      init: (N,) starting intervals (default: Young's, clipped into the bounds).
      patience: stop after this many steps in which the windowed mean objective did not
        improve on its best by more than its standard error.
      window: steps per windowed mean; the recommendation is T at the mean θ of the last
        ``window`` steps (an average of the iterates, which damps the estimator's noise).
      eval_draws: fresh draws for the final evaluation (default 2·P·S).
      jitter, launch: as `fleet_waste`; ``launch`` is the baselines' launch (and the
        design's, unless ``offsets``).
      offsets: design each job's launch offset too (its cycle position at t = 0), started
        evenly staggered (offset group g of G_o at the fraction g / G_o of its cycle).
      offset_groups: None (one offset per job: identical jobs sharing an interval still
        launch apart) or (N,) integer labels of jobs sharing one offset.
      progress: show a tqdm progress bar.

    Returns:
      A `DesignResult`. A `RuntimeWarning` says why when the objective was flat (every
      perturbed interval set measured the same waste: a horizon shorter than a cycle, jobs
      that never complete a checkpoint): the intervals returned are then the starting ones.
    """
    import optax  # imported here so that `import ckpt_jax` stays light

    settings, job_bounds = _settings(
        fleet, bounds, horizon, n_draws, n_pairs, groups, launch, smoothing, offsets, offset_groups
    )
    for name, value in (("steps", steps), ("patience", patience), ("window", window)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
            raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
    if not (0 < float(learning_rate) < math.inf):
        raise ValueError(f"learning_rate must be > 0 and finite, got {learning_rate!r}")
    eval_draws = 2 * n_pairs * n_draws if eval_draws is None else eval_draws
    if isinstance(eval_draws, bool) or not isinstance(eval_draws, (int, np.integer)) or eval_draws < 2:
        raise ValueError(f"eval_draws must be an integer >= 2, got {eval_draws!r}")
    bounds, labels, n_groups = settings["bounds"], settings["labels"], int(settings["labels"].max()) + 1
    young = _young(fleet)
    start = young if init is None else np.asarray(init, np.float64)
    if start.shape != (fleet.n_jobs,) or not np.all(np.isfinite(start) & (start > 0)):
        raise ValueError(f"init must be None or ({fleet.n_jobs},) positive finite intervals, got {init!r}")
    theta = np.array(
        [
            theta_from_interval(np.exp(np.log(start[labels == g]).mean()), (bounds[0][g], bounds[1][g]))
            for g in range(n_groups)
        ]
    )
    offset_labels = settings["offset_labels"]
    if offset_labels is not None:
        n_offsets = int(offset_labels.max()) + 1
        theta = np.concatenate([theta, np.arange(n_offsets) / n_offsets])

    train_key, eval_key, calibration_key = jax.random.split(key, 3)
    schedule = optax.cosine_decay_schedule(float(learning_rate), int(steps), alpha=0.01)
    optimizer = optax.adam(schedule)
    opt_state = optimizer.init(jnp.asarray(theta))
    objective, stderr, grad_norm, thetas = [], [], [], []
    best, since_best, stopped_early = math.inf, 0, False

    bar = None
    if progress:
        from ._progress import progress_bar

        bar = progress_bar(total=int(steps), desc="ckpt_jax.design", unit="step")
    try:
        for step in range(int(steps)):
            estimate = smoothed_gradient(
                fleet,
                theta,
                jax.random.fold_in(train_key, step),
                groups=labels,
                bounds=job_bounds,
                horizon=settings["horizon"],
                n_draws=n_draws,
                n_pairs=n_pairs,
                smoothing=settings["smoothing"],
                jitter=jitter,
                launch=launch,
                offsets=offsets,
                offset_groups=None if offset_labels is None else offset_labels,
            )
            objective.append(estimate.objective)
            stderr.append(estimate.stderr)
            grad_norm.append(float(np.linalg.norm(estimate.gradient)))
            thetas.append(theta)
            updates, opt_state = optimizer.update(jnp.asarray(estimate.gradient), opt_state)
            theta = np.asarray(optax.apply_updates(jnp.asarray(theta), updates), np.float64)
            if bar is not None:
                bar.update(1)
                bar.set_postfix(waste=f"{estimate.objective:.5f}")
            if len(objective) >= window:
                recent = np.asarray(objective[-window:])
                recent_se = np.sqrt(np.nansum(np.square(stderr[-window:]))) / window
                if recent.mean() < best - recent_se:
                    best, since_best = recent.mean(), 0
                else:
                    since_best += 1
                    if since_best >= patience:
                        stopped_early = step + 1 < steps
                        break
    finally:
        if bar is not None:
            bar.close()

    # θ is unconstrained, offsets included (θ mod 1 is taken after the mean): averaging the
    # iterates does not wrap around the cycle.
    tail = np.mean(thetas[-window:], axis=0)
    intervals, fractions = _split(tail, labels, offset_labels, bounds)
    path_intervals, path_fractions = _split(np.asarray(thetas), labels, offset_labels, bounds)
    write = _solo_write(fleet)
    history = History(
        np.asarray(objective),
        np.asarray(stderr),
        np.asarray(grad_norm),
        path_intervals,
        None if fractions is None else cycle_positions(path_fractions, _launch_span(fleet, write, path_intervals)),
    )

    # The contended fixed point uses its own draws; all four designs are then evaluated
    # on the same fresh draws, never the training ones.
    contended, _, _ = contended_young(
        fleet,
        horizon=settings["horizon"],
        keys=jax.random.split(calibration_key, eval_draws),
        jitter=jitter,
        launch=launch,
    )
    candidates = {
        "young": young,
        "daly": _daly(fleet),
        "young_contended": contended,
        **({"two_level": _two_level_optimum(fleet)} if fleet.has_snapshots else {}),
    }
    eval_keys = jax.random.split(eval_key, eval_draws)
    if fractions is None:
        table = np.stack([intervals] + list(candidates.values()))
        waste = fleet_waste(fleet, table, horizon=settings["horizon"], keys=eval_keys, jitter=jitter, launch=launch)
    else:  # the baselines keep their launch; the design takes its offsets
        table = np.stack(list(candidates.values()))
        waste = np.concatenate(
            [
                fleet_waste(
                    fleet,
                    intervals[None],
                    horizon=settings["horizon"],
                    keys=eval_keys,
                    jitter=jitter,
                    offsets=fractions[None],
                ),
                fleet_waste(fleet, table, horizon=settings["horizon"], keys=eval_keys, jitter=jitter, launch=launch),
            ]
        )
    baselines = {
        name: Baseline(candidates[name], _mean_ci(waste[i + 1]), _mean_ci(waste[i + 1] - waste[0]))
        for i, name in enumerate(candidates)
    }
    if not np.any(np.asarray(grad_norm) > 0):
        # Every perturbed interval set of every step measured the same waste: the intervals
        # returned are the starting ones, and the comparison with the baselines is empty.
        reason = _flat_reason(fleet, job_bounds, settings["horizon"], launch, offsets, waste)
        warnings.warn(
            f"checkpoint_intervals: the objective is flat, nothing was designed: {reason}; the "
            "intervals returned are the starting ones",
            RuntimeWarning,
            stacklevel=2,
        )
    return DesignResult(
        intervals,
        _mean_ci(waste[0]),
        baselines,
        history,
        stopped_early,
        None if fractions is None else cycle_positions(fractions, _launch_span(fleet, write, intervals)),
    )
