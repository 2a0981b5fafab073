"""Checkpoint intervals designed over the exact simulator (docs/model.md claim 10).

The objective is the fleet's waste ``Σ_i w_i·waste_i / Σ_i w_i`` (w the sizes) over a horizon
H, averaged over failure (and jitter) draws, as the exact event loop measures it
(`ckpt_jax.simulate` with ``until=H``, `JobStats.waste`, `job_waste`): the steady-state waste
of docs/model.md §1c, one less the work done before H net of the work failures took, over H.
Nothing fails at H, so the work still uncovered there is not counted as lost; counting it
(`JobStats.covered_waste`) would act as a failure at H and pull every interval toward
√(2D/(1/M + 1/H)), and without failures to √(2DH). Write limits, snapshots and their recovery rule
(docs/model.md §1d) are the fleet's own and run as given. The loop is chaotic (claim 5) and
piecewise smooth in the intervals, so pathwise derivatives are useless over long horizons; the
gradient is estimated instead from the batch dimension:

* the intervals live in an unconstrained parametrisation of the bounds,
  ``T = lo·(hi/lo)^sigmoid(θ)`` (log-space, so a step in θ is a relative change in T);
* optionally (``offsets=True``) each job's launch offset is a decision variable too: its cycle
  position at t = 0 is the fraction ``θ mod 1`` of its solo cycle D + T in time (periodic, as the cycle is),
  smoothed and stepped with the intervals;
* optionally (``stagger=True``, the search only) the restart stagger of a fleet with outages
  and the launch stagger of a staggered launch are searched with the intervals, in [0, H];
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

With `Budgets` (docs/model.md §1g: a limit on the fleet's written volume and on its power steps,
a floor on each interval) the search keeps them on its common draws: a point that breaks a limit
is moved up the intervals' common scale onto it (`_onto_limits`), and the result says which limit
binds and what relaxing it would buy (`BudgetOutcome`); `trade_off` gives the waste against the
volume along one interval set scaled.
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
    BUDGET_BOUNDS,
    LAUNCH_MODES,
    LAUNCHES,
    Budgets,
    Launch,
    check_budgets,
    check_inputs,
    check_launch,
    interval_from_theta,
    labels_of,
    offset_from_theta,
    theta_from_interval,
)
from ._estimate import FLOOR, Estimate, check_floor, effect, half_width, mean_ci
from ._observe import SaveAt
from ._simulate import simulate
from .model import (
    Fleet,
    State,
    _replace,
    cycle_positions,
    initial_state,
    random_state,
    state_at_elapsed,
)

__all__ = [
    "Estimate",
    "Baseline",
    "History",
    "DesignResult",
    "Evaluation",
    "METHODS",
    "GradientEstimate",
    "LAUNCHES",
    "LAUNCH_MODES",
    "Launch",
    "Budgets",
    "BUDGET_BOUNDS",
    "BudgetOutcome",
    "InfeasibleBudgets",
    "TradeOff",
    "trade_off",
    "start_state",
    "paired_random_state",
    "staggered_positions",
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
    "Comparison",
    "compare",
    "group_waste",
    "writer_distribution",
    "power_and_storage",
    "failure_draws",
    "schedule",
]


# Two-sided 95% normal quantile for the confidence intervals of `Estimate`.
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


class Evaluation(NamedTuple):
    """Every interval set a design is weighed against, run on one set of fresh draws
    (`checkpoint_intervals`): every comparison of a report comes from these runs.

    Attributes:
      names: (D,) ``"design"``, then each baseline, then each candidate given.
      intervals: (D, N) the intervals of each set.
      job_waste: (D, S, N) each job's waste (`job_waste`) under each draw.
      fleet_waste: (D, S) the fleet waste, weighted by size (`fleet_waste`).
      writes: (D, S, N) completed writes (`JobStats.writes`).
      writers: (D, S, N + 1) share of the observation window with k writers (`WriterStats`;
        NaN on a draw where some job never fired).
      power_steps: (D, S) instants where the fleet's draw moved by more than
        ``power_threshold`` (`PowerStats.n_steps`: a job that fires and one that resumes
        each make a step).
      power_threshold: that threshold, in units of one job's full draw (the default of
        `SaveAt.power_threshold`: a tenth of the fleet's full draw).
      horizon: H, the span of every run.
      power_largest_step: (D, S) the largest change of the fleet's draw at one instant, up or
        down (`PowerStats.largest_drop`, ``largest_rise``), in units of size; None where not
        recorded.
    """

    names: tuple
    intervals: np.ndarray
    job_waste: np.ndarray
    fleet_waste: np.ndarray
    writes: np.ndarray
    writers: np.ndarray
    power_steps: np.ndarray
    power_threshold: float
    horizon: float
    power_largest_step: np.ndarray | None = None


class DesignResult(NamedTuple):
    """What `checkpoint_intervals` returns.

    Attributes:
      intervals: (N,) recommended T_i: the search's, or the baseline it fell back to
        (``fallback``).
      waste: `Estimate` of the fleet waste at ``intervals`` on fresh evaluation draws.
      baselines: ``{"young", "daly", "young_contended"}`` → `Baseline`, on the same draws.
        With two-level checkpoints: max(√(2·s·M), D), Daly's with s then no shorter than D,
        the fixed point of `contended_young` (D the drain alone, d / min(b, f(1))), and
        ``"two_level"``: a lone job's exact optimum (`theory.two_level_optimal_interval`).
      history: `History` of the optimisation.
      stopped_early: whether the stopping test ended the run before ``steps``.
      offsets: (N,) recommended launch offsets (``offsets=True``), each job's position at
        t = 0 in [0, `launch_cycle`) for the fleet run at ``intervals`` (`launch_state`): in
        its solo cycle D_i + T_i in time, or with two-level checkpoints in its compute phase T_i; None
        when the offsets were not designed (or the design fell back to a baseline).
      converged: whether the method's stopping test passed (``"search"``: no move of the
        finest step improved the common-draw waste beyond its standard error; ``"adam"``:
        early stopping).
      method: ``"search"`` or ``"adam"``.
      start: the name of the interval set the search started from (the best of the
        baselines and candidates on the training draws); None with ``"adam"``.
      fallback: the baseline or candidate recommended instead of the search's intervals,
        because it beat them outside the noise on the evaluation draws; else None.
      searched: (N,) the intervals the optimisation found (``intervals`` unless ``fallback``).
      candidates: ``{name: Baseline}`` for the ``candidates`` given, on the same draws; with
        ``budgets``, also each baseline and candidate that broke them, scaled up onto them
        (``"<name>_scaled"``, `BudgetOutcome.scaled`).
      evaluation: the `Evaluation` every estimate above comes from.
      mesh: (steps,) the search's relative step per step (a move multiplies an interval by
        e^mesh); None with ``"adam"``.
      restart_stagger: the designed restart stagger Δ >= 0 (``stagger=True`` on a fleet with
        outages, docs/model.md §1f); None when not designed (or the design fell back).
      launch_stagger: the designed launch stagger Δ_L >= 0 (``stagger=True`` with a staggered
        `Launch`; 0 launches every job together); None when not designed (or fell back).
      budgets: with ``budgets``, a `BudgetOutcome`: the design's use of each limit, which
        binds, and what relaxing it by 10 % would save; else None.
    """

    intervals: np.ndarray
    waste: Estimate
    baselines: dict
    history: History
    stopped_early: bool
    offsets: np.ndarray | None = None
    converged: bool = False
    method: str = "adam"
    start: str | None = None
    fallback: str | None = None
    searched: np.ndarray | None = None
    candidates: dict | None = None
    evaluation: Evaluation | None = None
    mesh: np.ndarray | None = None
    restart_stagger: float | None = None
    launch_stagger: float | None = None
    budgets: BudgetOutcome | None = None


class BudgetOutcome(NamedTuple):
    """What the `Budgets` of a design did (`checkpoint_intervals` with ``budgets``).

    Attributes:
      budgets: the `Budgets` as checked (``min_interval`` (N,) or None).
      used: {limit name: `Estimate`} the recommendation's use of each limit on the
        evaluation's fresh draws, per `Budgets.per` (``"written"``: volume;
        ``"power_steps"``: steps above the threshold).
      held: {limit name: float} the statistic the search held under the limit on its common
        draws at the searched intervals: the mean, or the upper end of its 95 % CI
        (`Budgets.bound`).
      binding: the names of the limits that bind on the common draws: the searched intervals
        use them within `BINDING` (3 %) of the limit, or scaled down by the search's finest
        move (÷ (1 + rtol)) would break them.
      shadow: {limit name: `Estimate`} for each binding limit, the fleet waste that a limit
        10 % higher would save (the shadow price, as a share of the fleet's time: × GPUs × 24
        for GPU-hours a day), paired on the evaluation draws: the searched intervals scaled
        down by one common factor until the relaxed limit binds (to first order the best
        design under it, as the waste's gradient there is the limit's, scaled).
      relaxed: {limit name: (N,) intervals} those scaled-down intervals.
      scaled: {set name: (N,) intervals} each baseline and candidate that broke a limit on the
        common draws, scaled up by one common factor until it keeps them (each interval held
        in its bounds): weighed as the candidates ``"<name>_scaled"``.
    """

    budgets: Budgets
    used: dict
    held: dict
    binding: tuple
    shadow: dict
    relaxed: dict
    scaled: dict


class InfeasibleBudgets(ValueError):
    """No intervals within the bounds keep the budgets on the design's common draws.

    Attributes:
      smallest: {limit name: float} for each limit broken, the smallest that would be kept:
        the fleet's use of it at the longest intervals the bounds allow (per `Budgets.per`).
      limits: {limit name: float} the limits asked for.
    """

    def __init__(self, message: str, smallest: dict, limits: dict):
        super().__init__(message)
        self.smallest = smallest
        self.limits = limits


class TradeOff(NamedTuple):
    """The fleet's waste against its use of the budgets along one interval set scaled by
    common factors (`trade_off`), on shared draws.

    Attributes:
      factors: (F,) the factors.
      intervals: (F, N) the scaled intervals.
      waste: (F, S) the fleet waste per draw.
      written: (F, S) the volume of completed checkpoints per draw, per ``per``.
      power_steps: (F, S) the power steps above the threshold per draw, per ``per``.
    """

    factors: np.ndarray
    intervals: np.ndarray
    waste: np.ndarray
    written: np.ndarray
    power_steps: np.ndarray


# A limit binds where the searched intervals use it within this share of it (the projection
# onto the limits stops within 1 %), or where a finer move would break it.
BINDING = 0.03
# A limit relaxed by this share for its shadow price.
RELAX = 0.10


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


def _batched(fleet: Fleet, intervals: np.ndarray, restart_stagger=None) -> Fleet:
    """``fleet`` with compute work ``intervals`` (*P, N): a validated batched `Fleet`;
    ``restart_stagger`` (*P,) replaces the fleet's (None: keep it)."""
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
        mtbf=per_job(fleet.mtbf) if fleet.has_failures else None,  # None: no failures (mtbf inf)
        restart=per_job(fleet.restart) if fleet.has_failures or fleet.has_failure_times or fleet.has_outages else 0.0,
        failure_shape=per_job(fleet.failure_shape) if fleet.has_weibull_failures else None,
        failure_times=None
        if fleet.failure_times is None
        else np.broadcast_to(np.asarray(fleet.failure_times), intervals.shape + fleet.failure_times.shape[-1:]),
        write_limit=per_job(fleet.write_limit),
        snapshot=per_job(fleet.snapshot) if fleet.has_snapshots else None,
        recover_from=fleet.recover_from,
        idle_power=per_fleet(fleet.idle_power),
        recovery_read=per_job(fleet.recovery_read),
        fail_while_down=fleet.fail_while_down,
        overhead=per_job(fleet.overhead),
        **_outages_of(fleet, batch, restart_stagger),
        dtype=fleet.dtype,
    )


def _outages_of(fleet: Fleet, batch: tuple, restart_stagger=None) -> dict:
    """``fleet``'s failure domains, outages and restart stagger (docs/model.md §1f) as
    `Fleet` arguments for a batch of it of shape ``batch``."""
    per_fleet = lambda x: np.broadcast_to(np.asarray(x), batch + np.shape(x))  # noqa: E731
    rows = None
    if fleet.outage_kind == "listed":
        rows = np.stack([np.asarray(fleet.outage_times, np.float64), np.asarray(fleet.outage_domains, np.float64)], -1)
    return dict(
        domain=per_fleet(fleet.domain),
        outage_mtbf=per_fleet(fleet.outage_mtbf) if fleet.outage_kind == "drawn" else None,
        outage_times=None if rows is None else per_fleet(rows),
        restart_stagger=per_fleet(fleet.restart_stagger)
        if restart_stagger is None
        else np.broadcast_to(np.asarray(restart_stagger, np.float64), batch),
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
    time into its solo cycle (`ckpt_jax.model.state_at_elapsed`, computed in time so that a
    file of bytes keeps the digits of its seconds), or with two-level checkpoints
    the compute done in its first compute phase (computing, T_i − position left, no drain in
    flight)."""
    if not fleet.has_snapshots:
        position = np.asarray(position, np.float64)
        cycle = launch_cycle(fleet)
        if np.any(np.asarray(fleet.active) & ~((position >= 0) & (position < cycle))):
            raise ValueError("position must lie in [0, D_i + T_i), the solo cycle in time")
        return state_at_elapsed(fleet, position)  # in time: a file's bytes keep its seconds' digits
    position = np.asarray(position, np.float64)
    compute = np.asarray(fleet.compute, np.float64)
    if np.any(np.asarray(fleet.active) & ~((position >= 0) & (position < compute))):
        raise ValueError("position must lie in [0, T_i) with two-level checkpoints (the compute phase)")
    return initial_state(fleet, phase=0, remaining=compute - position)


def staggered_positions(fleet: Fleet, stagger) -> np.ndarray:
    """(*B, N) launch positions (`launch_state`) of a staggered launch (docs/model.md §1f): the
    k-th active job (k = 0, ..., K in index order) starts its first compute phase k·Δ after
    job 0, and t = 0 is the launch of the last one, job K. So at t = 0 job k has computed
    (K − k)·Δ of its first phase: position D_i + (K − k)·Δ in time (`launch_cycle`; with
    two-level checkpoints (K − k)·Δ), every job computing and none writing, and job k fires
    first at T_k − (K − k)·Δ. Where (K − k)·Δ exceeds T_k the position wraps around the solo
    cycle (mod D_i + T_i, or T_i), as if the job's first cycles had run alone."""
    stagger = np.asarray(stagger, np.float64)
    if not np.all(np.isfinite(stagger) & (stagger >= 0)):
        raise ValueError(f"stagger must be finite and >= 0, got {stagger!r}")
    active = np.asarray(fleet.active)
    order = np.cumsum(active, axis=-1) - 1  # k of each active job
    ahead = (order[..., -1:] - order) * stagger[..., None]  # (K − k)·Δ, Δ a scalar or one per fleet
    cycle = launch_cycle(fleet)
    start = 0.0 if fleet.has_snapshots else np.asarray(fleet.solo_write, np.float64)
    with np.errstate(invalid="ignore"):  # padding slots
        position = np.mod(start + ahead, cycle)
    position = np.minimum(position, np.nextafter(cycle, 0))  # the mod can round up to the cycle
    return np.where(active, position, 0.0)


def start_state(fleet: Fleet, launch: str | Launch = "random", key=None) -> State:
    """The state at t = 0 of ``fleet`` launched as ``launch`` (docs/model.md §1f, launch modes):
    the one place `assess`, ``ckpt-jax simulate`` and the fleet files' ``[launch]`` start a
    fleet from.

    Args:
      fleet: the `Fleet` (any batch shape).
      launch: a `Launch`, or ``"random"`` (`ckpt_jax.random_state`: uniform in time over each
        job's solo cycle, drawn from ``key``), ``"synchronous"`` (every job at the start of its
        compute, `ckpt_jax.initial_state`; `Launch` mode "together"); a staggered `Launch`
        starts job k's first compute k·Δ after job 0's (`staggered_positions`).
      key: with a random launch, a PRNG key (or one per fleet), as `ckpt_jax.random_state`.
    """
    launch = check_launch(launch)
    if launch == "random":
        if key is None:
            raise ValueError("key must be a PRNG key for a random launch, got None")
        return random_state(fleet, key)
    if launch == "synchronous":
        return initial_state(fleet)
    return launch_state(fleet, staggered_positions(fleet, launch.stagger))


# The stream of `paired_random_state`'s position within the phase: folded into the draw's key,
# apart from the streams the engine folds into its job keys (jitter < 2³⁰, failures 2³¹).
WITHIN_PHASE_STREAM = 2**31 + 7


def paired_random_state(fleet: Fleet, key) -> State:
    """A random launch as `ckpt_jax.random_state` draws it (each job uniform in time over its
    solo cycle D_i + T_i: writing with probability D_i / (D_i + T_i)), but drawn in work
    coordinates, so that fleets that differ in some jobs or in the storage start every other
    job with the same work remaining: `ckpt_jax.assess.compare`'s scenarios, paired draw by
    draw (docs/model.md §1f).

    Two uniforms per job: u (`random_state`'s own draw from ``key``) picks the phase (writing
    where u·(D_i + T_i) < D_i, as `random_state` decides), and v (from the key folded with
    `WITHIN_PHASE_STREAM`) the work left in it, (1 − v)·d_i of the write or (1 − v)·T_i of the
    compute. The distribution is `random_state`'s; the position within the phase does not
    depend on D_i, so a scenario that changes the storage (and so D_i) moves no job's remaining
    work unless its phase changes (probability |ΔD_i| / (D_i + T_i)), where `random_state`,
    which draws the position as the fraction u of the cycle, moves every job whose D_i changes.
    With two-level checkpoints `random_state`'s launch is already in work coordinates (u·T_i of
    the compute done) and is returned as it is.

    Args:
      fleet: the `Fleet` (batch shape *B).
      key: a PRNG key, or one per fleet (batch shape *B), as `random_state`.
    """
    from ._validate import check_key

    state = random_state(fleet, key)
    key = check_key(key, fleet.batch_shape)
    if fleet.batch_shape != () and key.shape == fleet.batch_shape:
        draw = jax.vmap(lambda k: jax.random.uniform(k, (fleet.n_jobs,), dtype=fleet.dtype))
        within = np.asarray(draw(jax.vmap(lambda k: jax.random.fold_in(k, WITHIN_PHASE_STREAM))(key.reshape(-1))))
        within = within.astype(np.float64).reshape(fleet.compute.shape)
    else:
        key = jax.random.fold_in(key, WITHIN_PHASE_STREAM)
        within = np.asarray(jax.random.uniform(key, fleet.compute.shape, dtype=fleet.dtype), np.float64)
    two_level = np.broadcast_to(np.asarray(fleet.two_level)[..., None], fleet.compute.shape)
    active = np.broadcast_to(np.asarray(fleet.active), fleet.compute.shape)
    phase = np.asarray(state.phase)
    length = np.where(phase == 1, np.asarray(fleet.write, np.float64), np.asarray(fleet.compute, np.float64))
    with np.errstate(invalid="ignore"):  # padding slots may hold anything
        left = length * (1.0 - within)
    remaining = np.where(active & ~two_level, left, np.asarray(state.remaining, np.float64))
    return initial_state(fleet, phase=phase, remaining=remaining)


def _launch_state(batched: Fleet, draw_keys, launch, offsets=None):
    cycle = launch_cycle(batched)
    launch = check_launch(launch)
    if offsets is not None:  # (*P, N) fractions of each set's cycle, the same in every draw
        fractions = np.broadcast_to(np.asarray(offsets, np.float64)[..., None, :], cycle.shape)
    elif launch != "random":
        return start_state(batched, launch)
    else:
        # Positions are drawn as fractions of the cycle per (draw, job), shared by every
        # interval set of the batch (common random numbers), scaled by each set's cycle D + T.
        fractions = jax.vmap(lambda k: jax.random.uniform(jax.random.fold_in(k, 1), (batched.n_jobs,)))(draw_keys)
        fractions = np.asarray(fractions, np.float64).reshape(cycle.shape)
    return launch_state(batched, cycle_positions(fractions, cycle))


def _run(
    fleet: Fleet,
    intervals: np.ndarray,
    draw_keys,
    horizon: float,
    jitter,
    launch: str | Launch,
    offsets=None,
    restart_stagger=None,
):
    """JobStats of ``fleet`` at ``intervals`` (*P, N) under draws ``draw_keys`` (S,): every
    interval set runs every draw, batch (*P, S, N); ``offsets`` (*P, N) replace ``launch``,
    ``restart_stagger`` (*P,) the fleet's."""
    jobs = _run_trace(fleet, intervals, draw_keys, horizon, jitter, launch, offsets, restart_stagger).jobs
    assert jobs is not None  # recorded: SaveAt(jobs=True)
    return jobs


def _run_trace(
    fleet: Fleet,
    intervals: np.ndarray,
    draw_keys,
    horizon: float,
    jitter,
    launch: str | Launch,
    offsets=None,
    restart_stagger=None,
    *,
    full=False,
    power=False,
):
    """`_run`'s whole `Trace`; ``full``: with the writers and the power recorded too;
    ``power``: with the power alone (a budget on power steps)."""
    n_draws = draw_keys.shape[0]
    batch = intervals.shape[:-1]
    grid = np.broadcast_to(intervals[..., None, :], batch + (n_draws, fleet.n_jobs))
    keys = jnp.broadcast_to(draw_keys, batch + (n_draws,))
    if restart_stagger is not None:
        restart_stagger = np.broadcast_to(np.asarray(restart_stagger, np.float64)[..., None], batch + (n_draws,))
    batched = _batched(fleet, np.ascontiguousarray(grid), restart_stagger)
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
        save=SaveAt(trace=False, jobs=True, writers=full, power=full or power),
    )
    assert out.jobs is not None  # recorded: SaveAt(jobs=True)
    return out


def _weighted(fleet: Fleet, per_job):
    weight = np.where(np.asarray(fleet.active), np.asarray(fleet.size, np.float64), 0.0)
    return np.asarray(per_job, np.float64) @ weight / weight.sum()


def fleet_waste(
    fleet: Fleet,
    intervals,
    *,
    horizon,
    keys,
    jitter=None,
    launch: str | Launch = "synchronous",
    offsets=None,
    restart_stagger=None,
) -> np.ndarray:
    """Fleet waste ``Σ_i w_i·waste_i / Σ_i w_i`` of ``fleet`` run with compute intervals
    ``intervals`` over [0, H], by the exact simulator, under each failure draw (waste_i as
    `job_waste` counts it: the steady-state waste, docs/model.md §1c).

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
      restart_stagger: None (the fleet's), or (*P,) restart staggers Δ >= 0, one per set
        (docs/model.md §1f: they act only with outages).

    Returns:
      (*P, S) fleet waste.
    """
    intervals = np.asarray(intervals, np.float64)
    if offsets is not None:
        offsets = np.broadcast_to(np.asarray(offsets, np.float64), intervals.shape)
    if restart_stagger is not None:
        restart_stagger = np.broadcast_to(np.asarray(restart_stagger, np.float64), intervals.shape[:-1])
    jobs = _run(fleet, intervals, keys, float(horizon), jitter, launch, offsets, restart_stagger)
    return _weighted(fleet, job_waste(fleet, jobs, horizon))


def job_waste(fleet: Fleet, jobs, horizon) -> np.ndarray:
    """Each job's waste as the design counts it: the steady-state waste of docs/model.md §1c,
    ``1 − (work done before H − work lost at failures before H) / H`` (`JobStats.waste`: the
    useful work plus the work uncovered at H, `JobStats.uncovered_work`). Nothing fails at
    H, so the work not yet covered there is not lost; the estimator's remaining bias is
    second order (~T²/(M·H)). It does not depend on when work counts as covered, so two-level
    checkpoints recovered from storage or from memory are counted alike: a failure loses what
    it loses under the fleet's own recovery rule, and nothing else is lost.

    Args:
      fleet: the `Fleet` that was run (kept for the signature; the waste is the run's own).
      jobs: its `JobStats`, run with ``until=H``.
      horizon: H (kept for the signature; `JobStats.waste` is measured over it).

    Returns:
      The waste per job, the shape of ``jobs.waste``.
    """
    del fleet, horizon
    return np.asarray(jobs.waste)


# -- budgets: the fleet's use of its limits, and intervals scaled to keep them -------------


def _written_volume(fleet: Fleet) -> np.ndarray:
    """(N,) each active job's checkpoint volume (0 in padding slots)."""
    return np.where(np.asarray(fleet.active), np.asarray(fleet.write, np.float64), 0.0)


def _use_of(writes, power_steps, fleet: Fleet, budgets: Budgets, horizon: float) -> dict:
    """{limit name: (...)} the fleet's use of each limit of ``budgets`` per draw, per
    `Budgets.per`: ``writes`` (..., N) completed checkpoints per job, ``power_steps`` (...)
    the power steps above the threshold (None where not recorded)."""
    scale = 1.0 if budgets.per is None else budgets.per / horizon
    use = {}
    if budgets.written is not None:
        use["written"] = np.asarray(writes, np.float64) @ _written_volume(fleet) * scale
    if budgets.power_steps is not None:
        use["power_steps"] = np.asarray(power_steps, np.float64) * scale
    return use


def _held(use: dict, bound: str) -> dict:
    """{limit name: (M,)} each limit's statistic over the draws (the last axis): the mean, or
    the upper end of its 95 % CI (``bound="upper"``)."""
    return {
        name: values.mean(-1) + (half_width(values, axis=-1) if bound == "upper" else 0.0)
        for name, values in use.items()
    }


def _excess(held: dict, limits: dict) -> np.ndarray:
    """(M,) the largest log(use / limit) over the limits: <= 0 where every limit is kept. A
    limit of 0 is kept only by no use at all."""
    tiny = np.finfo(np.float64).tiny
    return np.max([np.log(np.maximum(held[name], tiny) / max(limit, tiny)) for name, limit in limits.items()], axis=0)


def _waste_and_use(
    fleet: Fleet, intervals, budgets: Budgets, *, horizon, keys, jitter, launch, offsets=None, restart_stagger=None
) -> tuple[np.ndarray, dict]:
    """`fleet_waste` (*P, S) and the fleet's use of each limit of ``budgets`` per draw
    (`_use_of`), from one run."""
    intervals = np.asarray(intervals, np.float64)
    if offsets is not None:
        offsets = np.broadcast_to(np.asarray(offsets, np.float64), intervals.shape)
    if restart_stagger is not None:
        restart_stagger = np.broadcast_to(np.asarray(restart_stagger, np.float64), intervals.shape[:-1])
    power = budgets.power_steps is not None
    out = _run_trace(fleet, intervals, keys, float(horizon), jitter, launch, offsets, restart_stagger, power=power)
    assert out.jobs is not None and (out.power is not None or not power)  # recorded as asked
    waste = _weighted(fleet, job_waste(fleet, out.jobs, horizon))
    steps = np.asarray(out.power.n_steps, np.float64).reshape(waste.shape) if out.power is not None else None
    return waste, _use_of(np.asarray(out.jobs.writes, np.float64), steps, fleet, budgets, float(horizon))


def _shifted(points, shift, n_groups: int, lower, upper) -> np.ndarray:
    """``points`` (R, K) with every log-interval (the first ``n_groups`` coordinates) moved by
    ``shift`` (R,), held in the bounds: the intervals scaled by e^shift."""
    moved = np.array(points, np.float64)
    moved[:, :n_groups] += np.asarray(shift, np.float64)[:, None]
    return np.clip(moved, lower, upper)


def _onto_limits(run, points, first, *, n_groups, lower, upper, n_rows, down=False, rounds=12):
    """Each of ``points`` (R, K) moved along the intervals' common scale (one shift of every
    log-interval, each held in its bounds) onto the limits: a point that breaks them by the
    smallest shift up that keeps them; with ``down`` a point that keeps them by the largest
    shift down that still does (the limits relaxed: `BudgetOutcome.shadow`), else it stays.

    The limits are close to inversely proportional to the intervals (a job writes about
    H / (T + D) times), so the root of the excess (`_excess`, in logs) along the shift is
    found by a safeguarded secant, a few batched runs; it stops within 1 % of the limit.

    Args:
      run: (M, K) points -> (waste (M, S), excess (M,), use {name: (M, S)}), every call padded
        to ``n_rows`` rows (one compiled program).
      first: ``run`` of ``points`` itself.

    Returns:
      ``(points, waste, use, kept)``: the moved points, their waste and use on the draws, and
      (R,) whether each keeps the limits (False: not even at the end of its bounds).
    """
    points = np.asarray(points, np.float64)
    waste, excess, use = np.array(first[0]), np.array(first[1]), {k: np.array(v) for k, v in first[2].items()}
    if down and np.any(excess > 0):
        raise ValueError("_onto_limits(down=True) moves points that keep the limits")
    logs = points[:, :n_groups]
    # The shift at which every interval reaches the end of its bounds: beyond it nothing moves.
    end = -(logs - lower[:n_groups]).max(1) if down else (upper[:n_groups] - logs).max(1)
    kept_side = np.where(excess <= 0, 0.0, np.nan)  # a shift known to keep the limits
    broken_side = np.where(excess > 0, 0.0, np.nan)  # a shift known to break them
    g_kept, g_broken = np.where(excess <= 0, excess, np.nan), np.where(excess > 0, excess, np.nan)
    step = np.full(points.shape[0], 0.01)
    done = excess <= 0 if not down else np.zeros(points.shape[0], bool)
    tolerance = math.log1p(0.01)
    for _ in range(rounds):
        both = ~np.isnan(kept_side) & ~np.isnan(broken_side)
        with np.errstate(invalid="ignore"):
            done |= both & ((np.abs(kept_side - broken_side) < 2e-3) | (g_kept >= -tolerance))
        if down:
            done |= ~both & (kept_side <= end)  # keeps them with every interval at its lower bound
        else:
            done |= ~both & (broken_side >= end)  # breaks them with every interval at its upper bound
        if done.all():
            break
        with np.errstate(invalid="ignore", divide="ignore"):
            secant = broken_side + g_broken * (kept_side - broken_side) / (g_broken - g_kept)
            low, high = np.fmin(kept_side, broken_side), np.fmax(kept_side, broken_side)
            secant = np.clip(secant, low + 0.1 * (high - low), high - 0.1 * (high - low))
        # One side known: a step of about the excess (the limits go as 1 / interval), doubling.
        if down:
            one_side = np.maximum(kept_side + np.minimum(1.1 * np.nan_to_num(g_kept), -step), end)
        else:
            one_side = np.minimum(broken_side + np.maximum(1.1 * np.nan_to_num(g_broken), step), end)
        trial = np.where(both, secant, one_side)
        rows = np.flatnonzero(~done)
        moved = _shifted(points[rows], trial[rows], n_groups, lower, upper)
        new_waste, new_excess, new_use = run(_pad_rows(moved, n_rows))
        for i, row in enumerate(rows):
            if new_excess[i] <= 0:
                kept_side[row], g_kept[row] = trial[row], new_excess[i]
                waste[row], excess[row] = new_waste[i], new_excess[i]
                for name in use:
                    use[name][row] = new_use[name][i]
            else:
                broken_side[row], g_broken[row] = trial[row], new_excess[i]
            step[row] *= 2
    kept = ~np.isnan(kept_side)
    return _shifted(points, np.where(kept, kept_side, 0.0), n_groups, lower, upper), waste, use, kept


def _infeasible(budgets: Budgets, held: dict, limits: dict, top) -> InfeasibleBudgets:
    """The error of budgets no intervals in the bounds keep: ``held`` the use at the
    longest intervals the bounds allow (``top``, (N,))."""
    per = "over the horizon H" if budgets.per is None else f"per {budgets.per:g} of the engine's time"
    broken = {name: float(held[name]) for name in limits if held[name] > limits[name]}
    parts = [
        f"budgets.{name} = {limits[name]:g} is broken even at the longest intervals the bounds allow "
        f"(the fleet's use there: {value:g} {per}, the smallest budget that would be feasible)"
        for name, value in broken.items()
    ]
    return InfeasibleBudgets(
        "no intervals within the bounds keep the budgets on the design's common draws: "
        + "; ".join(parts)
        + "; raise the budget or the bounds' upper ends (the longest intervals: "
        + f"{np.array2string(np.asarray(top), precision=4)})",
        broken,
        dict(limits),
    )


def trade_off(
    fleet: Fleet, intervals, factors, *, horizon, keys, jitter=None, launch: str | Launch = "synchronous", per=None
) -> TradeOff:
    """The fleet's waste against its written volume and power steps along ``intervals`` (N,)
    scaled by each of ``factors`` (F,), on the draws ``keys`` (S,) shared by every factor: one
    batched run of shape (F, S, N), recording what the design's evaluation records (so that
    F sets as many as the evaluation's run as one compiled program).

    Args:
      fleet, horizon, jitter, launch: as `fleet_waste`.
      intervals: (N,) the intervals scaled.
      factors: (F,) positive factors.
      keys: (S,) PRNG keys, one per draw.
      per: the span the volume and the steps count over (86400: per day in a fleet in
        seconds); None: over H.

    Returns:
      A `TradeOff`.
    """
    factors = np.asarray(factors, np.float64)
    if factors.ndim != 1 or factors.size < 1 or not np.all(np.isfinite(factors) & (factors > 0)):
        raise ValueError(f"factors must be a 1-D array of finite numbers > 0, got {factors!r}")
    if per is not None and not (0 < float(per) < math.inf):
        raise ValueError(f"per must be None or a finite number > 0, got {per!r}")
    sets = factors[:, None] * np.asarray(intervals, np.float64)[None]
    n_draws = keys.shape[0]
    out = _run_trace(fleet, sets, keys, float(horizon), jitter, launch, full=True)
    records = _records(out, factors.size, n_draws)
    waste = np.asarray(job_waste(fleet, out.jobs, horizon), np.float64).reshape(records["writes"].shape)
    scale = 1.0 if per is None else float(per) / float(horizon)
    return TradeOff(
        factors,
        sets,
        _weighted(fleet, waste),
        records["writes"] @ _written_volume(fleet) * scale,
        records["power_steps"] * scale,
    )


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
    launch: str | Launch


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
        launch=check_launch(launch),
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
    return theory.solo_write_time(fleet.write, fleet.write_limit, float(np.asarray(fleet.throughput)[1]))


def baseline_mtbf(fleet: Fleet) -> np.ndarray:
    """(N,) the mean time between failures the baselines (Young, Daly, contended Young, the
    two-level optimum) take: each job's own ``mtbf`` (the mean, also under Weibull failures:
    the formulas take M, not the shape k), and where outages are drawn its domain's
    too, at the total rate 1/M_i + 1/M_o (`Fleet.failure_mtbf`, docs/model.md §1f). Replayed
    outages are known instants, not a rate: they do not enter."""
    if fleet.outage_kind == "drawn":
        return np.asarray(fleet.failure_mtbf, np.float64)
    return np.asarray(fleet.mtbf, np.float64)


def _blocked(fleet: Fleet, time) -> np.ndarray:
    """(N,) ``time`` plus each job's fixed checkpoint overhead o_i (docs/model.md §1g): what a
    checkpoint blocks its job for. ``time`` itself, bit for bit, without overheads."""
    if not fleet.has_overheads:
        return np.asarray(time, np.float64)
    return np.asarray(fleet.overhead, np.float64) + np.asarray(time, np.float64)


def _young(fleet: Fleet, write=None) -> np.ndarray:
    """(N,) Young's interval from the time a checkpoint blocks a job: √(2·(o + D)·M), D the
    write time (``write``, default alone: `_solo_write`) and o the fixed overhead (docs/model.md
    §1g; 0 without). With two-level checkpoints the overhead and the snapshot s block, not the
    drain, and a checkpoint due before the previous drain of D ended waits for it:
    max(√(2·(o + s)·M), D), the exact optimum (`theory.two_level_optimal_interval`) to first
    order in (o + s)/M and D/M."""
    write = _solo_write(fleet) if write is None else write
    if fleet.has_snapshots:
        return theory.blocking_young(write, baseline_mtbf(fleet), _blocked(fleet, fleet.snapshot))
    return theory.blocking_young(_blocked(fleet, write), baseline_mtbf(fleet))


def _daly(fleet: Fleet) -> np.ndarray:
    """(N,) Daly's interval (`theory.daly_interval`) from the time a checkpoint blocks a job
    alone: the overhead and the write o + D, or with two-level checkpoints the overhead and
    the snapshot o + s, then no shorter than D (as `_young`; o + s = 0 gives D)."""
    mtbf = baseline_mtbf(fleet)
    if not fleet.has_snapshots:
        return np.asarray(theory.daly_interval(_blocked(fleet, _solo_write(fleet)), mtbf), np.float64)
    snapshot = _blocked(fleet, fleet.snapshot)
    daly = np.asarray(theory.daly_interval(np.where(snapshot > 0, snapshot, 1.0), mtbf), np.float64)
    return np.maximum(np.where(snapshot > 0, daly, 0.0), _solo_write(fleet))


def _two_level_optimum(fleet: Fleet) -> np.ndarray:
    """(N,) the interval that minimises a lone job's long-run waste with two-level
    checkpoints (`theory.two_level_optimal_interval`: snapshot s, drain D alone, M; the
    restart R does not move it). A fixed overhead o (docs/model.md §1g) blocks the job before
    its snapshot and loses what the snapshot loses: it counts as a snapshot of o + s."""
    active = np.asarray(fleet.active)
    # Padding slots get harmless values, and Young's interval back.
    pick = lambda x: np.where(active, np.asarray(x, np.float64), 1.0)  # noqa: E731
    optimum = theory.two_level_optimal_interval(
        pick(_blocked(fleet, fleet.snapshot)),
        pick(_solo_write(fleet)),
        pick(baseline_mtbf(fleet)),
        recover_from=fleet.recover_from,
    )
    return np.where(active, optimum, _young(fleet))


def contended_young(
    fleet: Fleet, *, horizon, keys, start=None, max_iter=10, rtol=1e-3, jitter=None, launch="synchronous"
) -> tuple:
    """Young's interval with the write time *as contended in the simulator*: the fixed point
    of T ← √(2·(o + D(T))·M), D_i(T) each job's mean duration of a completed write, firing to
    end (`JobStats.completed_write_time` / `JobStats.writes`, over the draws ``keys``; a fixed
    overhead o, docs/model.md §1g, is not contended and not in it), when the fleet runs at T.
    Writes abandoned by a failure or still open at the horizon are left out:
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
    mtbf = baseline_mtbf(fleet)
    intervals = _young(fleet) if start is None else np.asarray(start, np.float64)
    for iteration in range(1, max_iter + 1):
        jobs = _run(fleet, intervals, keys, float(horizon), jitter, launch)
        writes = np.asarray(jobs.writes, np.float64).sum(axis=0)
        write_time = np.asarray(jobs.completed_write_time, np.float64).sum(axis=0)
        # A job that completed no write in any draw keeps its interval (no measurement).
        kept = intervals**2 / (2 * mtbf)
        if fleet.has_overheads:  # √(2·(o + D)·M) = T
            kept = kept - np.asarray(fleet.overhead, np.float64)
        duration = np.where(writes > 0, write_time / np.maximum(writes, 1), kept)
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


def _flat_reason(fleet: Fleet, job_bounds, horizon: float, launch: str | Launch, offsets: bool, waste, writes) -> str:
    """Why the waste did not change across the population: what a user can change.
    ``writes``: the checkpoints completed in the evaluation's runs."""
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
    if np.any(np.asarray(writes) > 0):
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
    return "no job saved any work before H in any draw (no checkpoint completed)" + (
        ": " + "; ".join(reasons) if reasons else ""
    )


# -- one evaluation on fresh draws ---------------------------------------------------


def _records(out, n_sets: int, n_draws: int) -> dict:
    """The arrays of an `Evaluation` from a full run (`_run` with ``full=True``)."""
    writer_time = np.asarray(out.writers.time, np.float64)
    window = np.asarray(out.writers.window, np.float64)
    span = np.maximum(window[..., 1] - window[..., 0], np.finfo(float).tiny)
    shape = (n_sets, n_draws)
    return {
        "jobs": out.jobs,
        "writes": np.asarray(out.jobs.writes, np.float64).reshape(shape + (-1,)),
        "writers": (writer_time / span[..., None]).reshape(shape + (-1,)),
        "power_steps": np.asarray(out.power.n_steps, np.float64).reshape(shape),
        "power_largest_step": np.maximum(
            np.asarray(out.power.largest_drop, np.float64), np.asarray(out.power.largest_rise, np.float64)
        ).reshape(shape),
        "power_threshold": float(np.asarray(out.power.threshold, np.float64).reshape(-1)[0]),
    }


def _evaluate(
    fleet: Fleet, table: dict, keys, horizon: float, jitter, launch: str | Launch, offsets=None, restart_stagger=None
) -> Evaluation:
    """Run every set of ``table`` ({name: (N,)}, ``"design"`` first) on the draws ``keys``:
    failures (and launch fractions) shared; the design launches at ``offsets`` (N,
    fractions of its cycle) and restarts after an outage with ``restart_stagger`` where
    given, the others at ``launch`` and the fleet's stagger."""
    names = tuple(table)
    intervals = np.stack([np.asarray(table[name], np.float64) for name in names])
    n_draws = keys.shape[0]
    if offsets is None and restart_stagger is None:
        parts = [(intervals, None, None, len(names))]
    else:  # the baselines keep their launch and stagger; the design takes its own
        fractions = None if offsets is None else np.asarray(offsets, np.float64)[None]
        stagger = None if restart_stagger is None else np.array([float(restart_stagger)])
        parts = [(intervals[:1], fractions, stagger, 1), (intervals[1:], None, None, len(names) - 1)]
    records = []
    for sets, fractions, stagger, count in parts:
        out = _run_trace(fleet, sets, keys, horizon, jitter, launch, fractions, stagger, full=True)
        records.append(_records(out, count, n_draws))
    waste = np.concatenate(
        [np.asarray(job_waste(fleet, r["jobs"], horizon), np.float64).reshape(r["writes"].shape) for r in records]
    )
    join = lambda name: np.concatenate([r[name] for r in records])  # noqa: E731
    return Evaluation(
        names=names,
        intervals=intervals,
        job_waste=waste,
        fleet_waste=_weighted(fleet, waste),
        writes=join("writes"),
        writers=join("writers"),
        power_steps=join("power_steps"),
        power_threshold=records[0]["power_threshold"],
        horizon=float(horizon),
        power_largest_step=join("power_largest_step"),
    )


def _with_design(evaluation: Evaluation, name: str) -> Evaluation:
    """``evaluation`` with the design's row replaced by ``name``'s (a fallback)."""
    source = evaluation.names.index(name)
    fields = {}
    for field in ("intervals", "job_waste", "fleet_waste", "writes", "writers", "power_steps", "power_largest_step"):
        if getattr(evaluation, field) is None:
            continue
        value = np.array(getattr(evaluation, field))
        value[0] = value[source]
        fields[field] = value
    return evaluation._replace(**fields)


# -- the deterministic search on common draws ------------------------------------------

METHODS = ("search", "adam")
# The search's first step multiplies an interval by 2 (or halves it); each step without an
# accepted move halves the step (in log-interval).
_FIRST_MESH = math.log(2.0)
# An offset coordinate (a fraction of the cycle) moves by this much per unit of mesh: a
# quarter of the cycle at the first step.
_OFFSET_SCALE = 0.25 / _FIRST_MESH


def _fewest_steps(mesh: float, mesh_min: float) -> int:
    """The fewest steps a compass search at ``mesh`` still takes: each step without an
    accepted move halves the mesh, and it stops at the first such step at ``mesh_min`` or
    finer (a step that accepts a move adds one)."""
    halvings = max(0, math.ceil(math.log2(mesh / mesh_min) - 1e-12)) if mesh > mesh_min else 0
    return 1 + halvings


def _search_bar_total(bar, taken: int, mesh: float, mesh_min: float, max_steps: int) -> None:
    """The progress bar's total: the steps taken and the fewest still to take, within the
    step budget (not the budget itself: the search usually converges long before it)."""
    if bar is not None:
        bar.total = min(max_steps, taken + _fewest_steps(mesh, mesh_min))
        bar.refresh()


def _compass_search(evaluate, start, lower, upper, scale, *, mesh_min, max_steps, bar):
    """Compass (pattern) search on a deterministic sample-average objective.

    Each step evaluates, on the same draws, the centre, the 2K points one step up and down
    each coordinate, and the combination of the previous step's improving moves; the best
    point that lowers the waste by more than the standard error of its paired difference
    with the centre becomes the centre, and a step with none halves the step. It stops,
    converged, when a step at ``mesh <= mesh_min`` accepts no move. Every step evaluates
    2K + 2 points (the centre again where there is no combined move), so one compiled
    program serves every step; the repeated centre gains nothing and is never accepted.

    Args:
      evaluate: (M, K) points -> (M, S) waste, every point on the same S draws; or, with
        budgets, ``(points, waste, kept)``: the points moved onto the budgets where they break
        them (`_onto_limits`), their waste, and (M,) whether each keeps the budgets (a point
        that does not is never accepted).
      start: (K,) the first centre.
      lower, upper: (K,) bounds (±inf for periodic coordinates).
      scale: (K,) the move of a coordinate per unit of mesh.

    Returns:
      ``(centre, converged, rows)``, rows one (objective, stderr, grad_norm, centre, mesh)
      per step.
    """
    centre, mesh, extra, rows = np.asarray(start, np.float64), _FIRST_MESH, None, []
    n_coordinates = centre.size
    _search_bar_total(bar, 0, mesh, mesh_min, max_steps)
    for _ in range(max_steps):
        step = mesh * scale
        moves = np.repeat(centre[None], 2 * n_coordinates, axis=0)
        moves[0::2] += np.diag(step)
        moves[1::2] -= np.diag(step)
        last = centre if extra is None else extra
        points = np.clip(np.concatenate([centre[None], moves, last[None]]), lower, upper)
        found = evaluate(points)
        points, waste, kept = found if isinstance(found, tuple) else (points, found, True)
        waste = np.asarray(waste, np.float64)  # (M, S)
        gain = waste[:1] - waste  # paired improvement on the centre, per draw
        n_draws = waste.shape[1]
        mean = gain.mean(axis=1)
        stderr = gain.std(axis=1, ddof=1) / math.sqrt(n_draws) if n_draws > 1 else np.zeros_like(mean)
        accepted = (mean > stderr) & (mean > 0) & kept
        slope = (waste[1 : 1 + 2 * n_coordinates : 2].mean(1) - waste[2 : 2 + 2 * n_coordinates : 2].mean(1)) / (
            2 * np.maximum(step, np.finfo(float).tiny)
        )
        centre_se = waste[0].std(ddof=1) / math.sqrt(n_draws) if n_draws > 1 else math.nan
        rows.append((float(waste[0].mean()), float(centre_se), float(np.linalg.norm(slope)), centre, mesh))
        if bar is not None:
            bar.update(1)
            bar.set_postfix(waste=f"{waste[0].mean():.5f}", step=f"{math.expm1(mesh):.0%}")
        if not accepted.any():
            extra = None
            if mesh <= mesh_min:
                _search_bar_total(bar, len(rows), mesh, mesh_min, len(rows))  # done: the bar is full
                return centre, True, rows
            mesh /= 2
            _search_bar_total(bar, len(rows), mesh, mesh_min, max_steps)
            continue
        # The next step also tries every coordinate's improving move at once.
        combined, moved = centre.copy(), 0
        for k in range(n_coordinates):
            up, down = 1 + 2 * k, 2 + 2 * k
            better = up if mean[up] >= mean[down] else down
            if accepted[better]:
                combined[k] = points[better, k]
                moved += 1
        best = int(np.argmax(np.where(accepted, mean, -np.inf)))
        centre = points[best]
        extra = combined if moved >= 2 and not np.array_equal(combined, centre) else None
        _search_bar_total(bar, len(rows), mesh, mesh_min, max_steps)
    return centre, False, rows


def _pad_rows(rows: np.ndarray, n_rows: int) -> np.ndarray:
    """``rows`` with its first row repeated up to ``n_rows`` rows (a batch of one shape:
    each row of a population runs on its own keys, so the padding changes no other row)."""
    return np.concatenate([rows, np.repeat(rows[:1], n_rows - len(rows), axis=0)])


def _candidates(fleet, candidates, init, n_jobs: int) -> dict:
    """The caller's interval sets, checked: {name: (N,) float64}."""
    table = dict(candidates or {})
    if init is not None:
        table.setdefault("init", init)
    checked = {}
    for name, value in table.items():
        if not isinstance(name, str) or name in ("design", "young", "daly", "young_contended", "two_level"):
            raise ValueError(f"candidates: {name!r} is not a name of its own (design and the baselines are taken)")
        value = np.asarray(value, np.float64)
        if value.shape != (n_jobs,) or not np.all(np.isfinite(value) & (value > 0)):
            raise ValueError(f"candidates[{name!r}] must be ({n_jobs},) positive finite intervals, got {value!r}")
        checked[name] = value
    return checked


def _within_horizon(bounds, horizon: float) -> tuple[np.ndarray, np.ndarray]:
    """``bounds`` (lo, hi) held at or under the horizon H: hi becomes min(hi, H), and a range
    lying wholly at or beyond H keeps its width (the ratio hi / lo) below H, so that
    (lo, hi) = (10 Young, 1000 Young) with H far shorter becomes (H / 100, H).

    An interval longer than H completes no checkpoint before H from a synchronous launch:
    the run then cannot see what a failure would cost (the steady-state estimator's bias,
    ~T²/(M·H), docs/model.md §1c, is no longer small), so a very reliable job with a large
    checkpoint (a Young interval of years) must not be designed at one over a horizon of a
    day."""
    lo, hi = (np.asarray(bound, np.float64) for bound in bounds)
    top = np.minimum(hi, horizon)
    return np.where(lo < top, lo, top * (lo / hi)), top


def _group_start(intervals, labels, bounds) -> np.ndarray:
    """(G,) log of each group's geometric-mean interval, clipped into its bounds."""
    n_groups = int(labels.max()) + 1
    logs = np.array([np.log(intervals[labels == g]).mean() for g in range(n_groups)])
    return np.clip(logs, np.log(bounds[0]), np.log(bounds[1]))


def _check_run(fleet, method, init, *, steps, patience, window, learning_rate, rtol, eval_draws) -> int:
    """`checkpoint_intervals`' own arguments, checked before any run; returns ``eval_draws``."""
    for name, value in (("steps", steps), ("patience", patience), ("window", window)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
            raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
    if not (0 < float(learning_rate) < math.inf):
        raise ValueError(f"learning_rate must be > 0 and finite, got {learning_rate!r}")
    if not (0 < float(rtol) < 1):
        raise ValueError(f"rtol must be in (0, 1), got {rtol!r}")
    if isinstance(eval_draws, bool) or not isinstance(eval_draws, (int, np.integer)) or eval_draws < 2:
        raise ValueError(f"eval_draws must be an integer >= 2, got {eval_draws!r}")
    if method == "adam" and init is not None:
        start = np.asarray(init, np.float64)
        if start.shape != (fleet.n_jobs,) or not np.all(np.isfinite(start) & (start > 0)):
            raise ValueError(f"init must be None or ({fleet.n_jobs},) positive finite intervals, got {init!r}")
    return int(eval_draws)


def _check_init_bounds(init, job_bounds) -> None:
    """``init`` inside the bounds (before: clipped into them without a word)."""
    if init is None:
        return
    start = np.asarray(init, np.float64)
    lo, hi = (np.broadcast_to(np.asarray(b, np.float64), start.shape) for b in job_bounds)
    outside = np.flatnonzero((start < lo) | (start > hi))
    if outside.size:
        job = int(outside[0])
        raise ValueError(
            f"init must lie inside the bounds: job {job} starts at {start[job]:g}, outside [{lo[job]:g}, {hi[job]:g}]"
        )


def _baselines(fleet, young, horizon: float, keys, *, jitter, launch, rtol) -> dict:
    """{name: (N,) intervals} of the baselines: Young, Daly, contended Young (its fixed point on
    ``keys``), and with two-level checkpoints a lone job's exact optimum."""
    contended, _, _ = contended_young(fleet, horizon=horizon, keys=keys, jitter=jitter, launch=launch, rtol=rtol)
    return {
        "young": young,
        "daly": _daly(fleet),
        "young_contended": contended,
        **({"two_level": _two_level_optimum(fleet)} if fleet.has_snapshots else {}),
    }


def _fallback(
    evaluation: Evaluation, compared: dict, extra: dict, labels, job_bounds, floor: float = FLOOR, allowed=None
) -> str | None:
    """The set to recommend instead of the design, if any: the best of those that beat it
    outside the noise (by more than ``floor`` of the fleet's waste too, `ckpt_jax._estimate.effect`)
    on the evaluation draws, among the sets the design could have been:
    one interval per group, and a baseline inside the bounds (the caller's range of allowed
    intervals); a candidate (``extra``: the caller's own set, such as the intervals in use)
    wherever it lies, as a design it beats outside the noise is never the better answer.
    ``allowed``: None, or the names that may be recommended at all (those that keep the
    design's budgets)."""
    waste = evaluation.fleet_waste
    _, first_job = np.unique(labels, return_index=True)  # labels are 0..G-1

    def inside(name):
        value = compared[name]
        shared = np.array_equal(value, value[first_job][labels])
        if name in extra:
            return shared
        return shared and bool(np.all((value >= job_bounds[0]) & (value <= job_bounds[1])))

    beaten = [
        name
        for i, name in enumerate(evaluation.names[1:], 1)
        if effect(mean_ci(waste[i] - waste[0]), floor) < 0 and inside(name) and (allowed is None or name in allowed)
    ]
    if not beaten:
        return None
    return min(beaten, key=lambda name: waste[evaluation.names.index(name)].mean())


# -- the design loop -------------------------------------------------------------------


def checkpoint_intervals(
    fleet: Fleet,
    *,
    bounds,
    horizon,
    n_draws: int,
    key: jax.Array,
    groups=None,
    method: str = "adam",
    n_pairs: int = 4,
    steps: int = 200,
    learning_rate: float = 0.1,
    smoothing: float = 0.1,
    init=None,
    patience: int = 30,
    window: int = 10,
    eval_draws: int | None = None,
    jitter=None,
    launch: str | Launch = "synchronous",
    offsets: bool = False,
    offset_groups=None,
    progress: bool = True,
    candidates=None,
    rtol: float = 0.1,
    fallback: bool = True,
    stagger: bool = False,
    floor: float = FLOOR,
    budgets: Budgets | None = None,
) -> DesignResult:
    """Checkpoint intervals that minimise the fleet's waste over [0, H], found over the exact
    simulator (docs/model.md claim 10).

    Two methods:

    * ``"search"``: a deterministic compass search over each group's log-interval (and
      each offset group's launch offset) on S common draws, fixed for the whole run, so
      that it minimises one sample-average objective and every comparison within a step
      is paired. It starts at the best of the baselines (Young, Daly, contended Young) and
      the ``candidates`` on those draws, moves a group's interval by ×2 or ÷2, then by
      ever smaller factors, accepting a move only where it lowers the waste by more than
      the standard error of the paired difference, and stops, converged, when no move of
      a factor of 1 + ``rtol`` or less is accepted. It needs 2K + 1 (+1) interval sets per
      step (K coordinates), each run on the S draws.
    * ``"adam"``: `optax.adam` (cosine-decayed learning rate) on an antithetic,
      common-random-number gradient estimate (`smoothed_gradient`), stopped when a
      windowed mean of the objective stops improving beyond its standard error; the
      recommendation is T at the mean θ of the last ``window`` steps.

    The recommendation, the baselines and the candidates are then run on fresh draws shared
    by all of them (`Evaluation`: every estimate of the result comes from those runs). With
    ``fallback``, where one of them beats the recommendation outside the noise (the 95% CI
    of the paired difference below zero), it is recommended instead (``fallback`` names it).

    Args:
      fleet: a single `Fleet` (batch shape ()) with ``mtbf``; its ``compute`` is ignored.
      bounds: (lo, hi), 0 < lo < hi finite: the range of the intervals; each a number
        (every job) or an (N,) array (per job; the jobs of a group must share their bounds).
        The range is held at or under the horizon (`_within_horizon`): an interval longer
        than H completes no checkpoint before H, so it can only waste the whole run.
      horizon: H > 0, the time over which waste is measured.
      n_draws: S >= 1 failure draws per step (``"adam"``: shared by the step's population;
        ``"search"``: the same S draws at every step).
      key: PRNG key; the same key gives the same result.
      groups: None (one interval per job) or (N,) integer labels of jobs sharing an interval.
      method: ``"search"`` or ``"adam"`` (above).
      n_pairs: P antithetic directions per step (``"adam"``; a step simulates 2P·S fleets).
      steps: at most this many optimisation steps (``"adam"``: the cosine schedule spans them).
      learning_rate: Adam's initial learning rate, in θ (log-interval) units.
      smoothing: σ, the Gaussian smoothing scale in θ (``"adam"``).
      init: (N,) starting intervals (``"adam"``; default Young's, clipped into the bounds);
        ``"search"`` takes them as one more candidate, ``"init"``.
      patience: stop after this many steps in which the windowed mean objective did not
        improve on its best by more than its standard error (``"adam"``).
      window: steps per windowed mean (``"adam"``).
      eval_draws: fresh draws for the final evaluation (default 2·P·S).
      jitter, launch: as `fleet_waste`; ``launch`` is the baselines' launch (and the
        design's, unless ``offsets``).
      offsets: design each job's launch offset too (its cycle position at t = 0), started
        evenly staggered (offset group g of G_o at the fraction g / G_o of its cycle).
      offset_groups: None (one offset per job: identical jobs sharing an interval still
        launch apart) or (N,) integer labels of jobs sharing one offset.
      progress: show a tqdm progress bar of the steps (``"search"``: its total is the steps
        taken and the fewest it may still take to converge, within ``steps``; full when it stops).
      candidates: None or {name: (N,) intervals}: more interval sets to start from
        (``"search"``) and to weigh the design against (e.g. the intervals in use today).
      rtol: the search's finest move, a factor 1 + rtol on an interval (``"search"``).
      fallback: recommend a baseline or candidate that beats the design outside the noise
        (the best such set with one interval per group; a baseline also inside the bounds,
        while a candidate, the caller's own set such as the intervals in use, is taken
        wherever it lies).
      stagger: design the staggers too (``"search"`` only), with the intervals: the restart
        stagger Δ >= 0 (docs/model.md §1f) of a fleet with outages, and the launch stagger
        Δ_L >= 0 of a staggered ``launch`` (`Launch`; not with ``offsets``, which replace
        the launch). Each starts at the fleet's (the launch's) value and moves in [0, H],
        first by max(Δ, mean solo write) then by ever smaller steps, as an interval does.
        The baselines keep the fleet's staggers. A fleet with neither outages nor a
        staggered launch has nothing to stagger: a `ValueError` says so.
      floor: with ``fallback``, the practical floor in [0, 1): a set beats the design only
        where it lowers the fleet waste by more than this share of the fleet's GPU time, its
        CI excluding 0 too (default `ckpt_jax._estimate.FLOOR`, 0.01 %; float rounding, a
        difference of 1e-12 with an interval as narrow, never counts).
      budgets: None, or `Budgets` the design must keep (docs/model.md §1g; ``"search"`` only):
        a limit on the fleet's written volume and on its power steps, each held on the
        search's common draws (their mean, or the upper end of its 95 % CI), and a floor on
        the intervals (raising the bounds' lower ends). Every starting point and every move
        that breaks a limit is moved up the intervals' common scale until it keeps them; the
        baselines and candidates so scaled are weighed too (``"<name>_scaled"``), and a
        fallback must keep the limits (on the common draws) and the floor.
        `DesignResult.budgets` says which limit binds and what relaxing it by 10 % would
        save. `InfeasibleBudgets` (a `ValueError`) refuses limits that no intervals within the
        bounds keep, with the smallest that would be kept.

    Returns:
      A `DesignResult`. A `RuntimeWarning` says why when the objective was flat (every
      interval set tried measured the same waste: a horizon shorter than a cycle, jobs
      that never complete a checkpoint): the intervals returned are then the starting ones.
    """
    if method not in METHODS:
        raise ValueError(f"method must be one of {', '.join(map(repr, METHODS))}, got {method!r}")
    staggers = _check_stagger(fleet, stagger, method, launch, offsets)
    floor = check_floor(floor)
    settings, job_bounds = _settings(
        fleet, bounds, horizon, n_draws, n_pairs, groups, launch, smoothing, offsets, offset_groups
    )
    budgets = check_budgets(budgets, fleet.n_jobs)
    if budgets is not None and method != "search":
        raise ValueError(f"budgets need method='search', got method={method!r}")
    if budgets is not None and budgets.bound == "upper" and n_draws < 2:
        raise ValueError(f"budgets.bound='upper' needs n_draws >= 2 (a CI over the draws), got {n_draws!r}")
    eval_draws = _check_run(
        fleet,
        method,
        init,
        steps=steps,
        patience=patience,
        window=window,
        learning_rate=learning_rate,
        rtol=rtol,
        eval_draws=2 * n_pairs * n_draws if eval_draws is None else eval_draws,
    )
    young = _young(fleet)
    extra = _candidates(fleet, candidates, init if method == "search" else None, fleet.n_jobs)
    _check_init_bounds(init, job_bounds)
    job_bounds = _within_horizon(job_bounds, settings["horizon"])
    settings["bounds"] = _within_horizon(settings["bounds"], settings["horizon"])
    if budgets is not None and budgets.min_interval is not None:
        job_bounds, settings["bounds"] = _with_floor(budgets.min_interval, job_bounds, settings["labels"])

    train_key, eval_key, calibration_key = jax.random.split(key, 3)
    bar = None
    if progress:
        from ._progress import progress_bar

        # The search's bar counts the steps it may still take (`_search_bar_total`), adam's its
        # budget (the cosine schedule spans it), made full where it stops early.
        total = int(steps) if method == "adam" else min(int(steps), _fewest_steps(_FIRST_MESH, math.log1p(rtol)))
        bar = progress_bar(total=total, desc=f"ckpt_jax.design ({method})", unit="step")
    try:
        # The contended fixed point uses its own draws (as many as the evaluation's for
        # "adam", the search's S otherwise: it is one more starting point there).
        baselines_table = _baselines(
            fleet,
            young,
            settings["horizon"],
            jax.random.split(calibration_key, eval_draws if method == "adam" else n_draws),
            jitter=jitter,
            launch=launch,
            rtol=1e-3 if method == "adam" else 1e-2,
        )
        compared = {**baselines_table, **extra}
        if method == "adam":
            found = _adam(
                fleet,
                settings,
                job_bounds,
                young if init is None else np.asarray(init, np.float64),
                train_key,
                steps=int(steps),
                patience=int(patience),
                window=int(window),
                learning_rate=float(learning_rate),
                n_draws=n_draws,
                jitter=jitter,
                launch=launch,
                offsets=offsets,
                bar=bar,
            )
        else:
            found = _search(
                fleet,
                settings,
                compared,
                train_key,
                steps=int(steps),
                rtol=float(rtol),
                n_draws=n_draws,
                jitter=jitter,
                launch=launch,
                bar=bar,
                staggers=staggers,
                budgets=budgets if budgets is not None and budgets.limits else None,
            )
    finally:
        if bar is not None:
            bar.close()
    intervals, fractions, history, converged, stopped_early, start, mesh = found[:7]
    designed = found[7] if len(found) > 7 else {}
    used = found[8] if len(found) > 8 else None
    if used is None and budgets is not None:  # a floor alone: nothing held on the draws
        used = {"held": {}, "binding": (), "relaxed": {}, "scaled": {}, "kept": set(compared)}
    if used is not None:  # the baselines and candidates scaled onto the budgets are weighed too
        scaled = {f"{name}_scaled": value for name, value in used["scaled"].items()}
        extra, compared = {**extra, **scaled}, {**compared, **scaled}
    launch_fractions = fractions
    if "launch_stagger" in designed:  # the staggered launch at the designed Δ_L, as fractions
        launch_fractions = _stagger_fractions(fleet, intervals[None], np.array([designed["launch_stagger"]]))[0]

    evaluation = _evaluate(
        fleet,
        {"design": intervals, **compared},
        jax.random.split(eval_key, eval_draws),
        settings["horizon"],
        jitter,
        launch,
        launch_fractions,
        designed.get("restart_stagger"),
    )
    searched = intervals
    allowed = None
    if used is not None:  # a fallback keeps the budgets on the common draws, and the floor
        allowed = {name for name in compared if name.endswith("_scaled")} | {
            name for name in compared if name in used["kept"] and np.all(compared[name] >= job_bounds[0] * (1 - 1e-12))
        }
    searched_waste = np.asarray(evaluation.fleet_waste[0], np.float64)
    chosen = (
        _fallback(evaluation, compared, extra, settings["labels"], job_bounds, floor, allowed) if fallback else None
    )
    if chosen is not None:
        evaluation = _with_design(evaluation, chosen)
        intervals, fractions, designed = compared[chosen], None, {}
    waste = evaluation.fleet_waste
    estimates = {
        name: Baseline(compared[name], mean_ci(waste[i]), mean_ci(waste[i] - waste[0]))
        for i, name in enumerate(evaluation.names)
        if i > 0
    }
    if not np.any(np.asarray(history.grad_norm) > 0):
        # Every interval set tried at every step measured the same waste: the intervals
        # returned are the starting ones, and the comparison with the baselines is empty.
        reason = _flat_reason(fleet, job_bounds, settings["horizon"], launch, offsets, waste, evaluation.writes)
        warnings.warn(
            f"checkpoint_intervals: the objective is flat, nothing was designed: {reason}; the "
            "intervals returned are the starting ones",
            RuntimeWarning,
            stacklevel=2,
        )
    write = _solo_write(fleet)
    return DesignResult(
        intervals,
        mean_ci(waste[0]),
        {name: estimates[name] for name in baselines_table},
        history,
        stopped_early,
        None if fractions is None else cycle_positions(fractions, _launch_span(fleet, write, intervals)),
        converged=converged,
        method=method,
        start=start,
        fallback=chosen,
        searched=searched,
        candidates={name: estimates[name] for name in extra},
        evaluation=evaluation,
        mesh=mesh,
        restart_stagger=designed.get("restart_stagger"),
        launch_stagger=designed.get("launch_stagger"),
        budgets=None
        if used is None
        else _budget_outcome(
            fleet,
            budgets,
            used,
            evaluation,
            searched_waste,
            keys=jax.random.split(eval_key, eval_draws),
            horizon=settings["horizon"],
            jitter=jitter,
            launch=launch,
            offsets=launch_fractions,
            restart_stagger=designed.get("restart_stagger"),
        ),
    )


def _with_floor(floor, job_bounds, labels) -> tuple:
    """The bounds (per job, per group) with their lower ends raised to ``floor`` (N,)
    (`Budgets.min_interval`); a `ValueError` names it where it differs within a group or
    reaches a group's upper end."""
    lo, hi = (np.asarray(bound, np.float64) for bound in job_bounds)
    _, first = np.unique(labels, return_index=True)
    if not np.array_equal(floor[first][labels], floor):
        raise ValueError("budgets.min_interval must be the same for every job of a group (one interval per group)")
    lo = np.maximum(lo, floor)
    too_high = np.flatnonzero(lo >= hi)
    if too_high.size:
        job = int(too_high[0])
        raise ValueError(
            f"budgets.min_interval of job {job} ({floor[job]:g}) must be below its bounds' upper end {hi[job]:g} "
            "(held at or under the horizon H)"
        )
    return (lo, hi), (lo[first], hi[first])


def _budget_outcome(
    fleet, budgets, used, evaluation, searched_waste, *, keys, horizon, jitter, launch, offsets, restart_stagger
) -> BudgetOutcome:
    """`DesignResult.budgets`: the recommendation's use of each limit on the evaluation draws,
    and each binding limit's shadow price, paired with the searched intervals there."""
    scale = 1.0 if budgets.per is None else budgets.per / horizon
    use = {}
    if budgets.written is not None:
        use["written"] = mean_ci(np.asarray(evaluation.writes[0], np.float64) @ _written_volume(fleet) * scale)
    if budgets.power_steps is not None:
        use["power_steps"] = mean_ci(np.asarray(evaluation.power_steps[0], np.float64) * scale)
    shadow = {}
    if used["relaxed"]:
        names = list(used["relaxed"])
        relaxed = np.stack([used["relaxed"][name] for name in names])
        if offsets is None and restart_stagger is None:  # padded to the evaluation's run: its program
            out = _run_trace(fleet, _pad_rows(relaxed, len(evaluation.names)), keys, horizon, jitter, launch, full=True)
            waste = _weighted(fleet, job_waste(fleet, out.jobs, horizon))[: len(names)]
        else:
            waste = fleet_waste(
                fleet,
                relaxed,
                horizon=horizon,
                keys=keys,
                jitter=jitter,
                launch=launch,
                offsets=None if offsets is None else np.broadcast_to(offsets, relaxed.shape),
                restart_stagger=restart_stagger,
            )
        shadow = {name: mean_ci(searched_waste - waste[i]) for i, name in enumerate(names)}
    return BudgetOutcome(
        budgets=budgets,
        used=use,
        held=used["held"],
        binding=used["binding"],
        shadow=shadow,
        relaxed=used["relaxed"],
        scaled=used["scaled"],
    )


def _check_stagger(fleet: Fleet, stagger, method: str, launch, offsets) -> tuple:
    """The staggers ``stagger=True`` designs: a tuple of ``"restart_stagger"`` (with
    outages) and ``"launch_stagger"`` (with a staggered launch and no offsets); () when off.
    A `ValueError` names ``stagger`` where there is nothing to design or the method cannot."""
    if not isinstance(stagger, (bool, np.bool_)):
        raise ValueError(f"stagger must be True or False, got {stagger!r}")
    if not stagger:
        return ()
    if method != "search":
        raise ValueError(f"stagger=True needs method='search', got method={method!r}")
    launch = check_launch(launch)
    names = ("restart_stagger",) if fleet.has_outages else ()
    if isinstance(launch, Launch) and launch.mode == "staggered" and not offsets:
        names += ("launch_stagger",)
    if not names:
        raise ValueError(
            "stagger=True has nothing to design: the restart stagger acts only with outages "
            "(outage_mtbf or outage_times) and the launch stagger only with a staggered launch "
            "(Launch('staggered', stagger) and offsets=False); this fleet and launch have neither"
        )
    return names


def _stagger_fractions(fleet: Fleet, intervals, stagger) -> np.ndarray:
    """(M, N) the launch positions of a staggered launch at Δ_L = ``stagger`` (M,) of
    ``fleet`` run at ``intervals`` (M, N), as fractions of each job's `launch_cycle`."""
    batched = _batched(fleet, np.asarray(intervals, np.float64))
    cycle = launch_cycle(batched)
    return np.minimum(staggered_positions(batched, stagger) / cycle, np.nextafter(1.0, 0))


def _search(fleet, settings, compared, key, *, steps, rtol, n_draws, jitter, launch, bar, staggers=(), budgets=None):
    """`checkpoint_intervals` with ``method="search"``: the best of ``compared`` on S common
    draws, then `_compass_search` from there on the same draws. ``staggers`` (names, as
    `_check_stagger`) are the last coordinates, linear, in [0, H]. With ``budgets`` every
    point that breaks them is moved up the intervals' common scale until it keeps them
    (`_onto_limits`): the starting points, and each move of the search."""
    bounds, labels, offset_labels = settings["bounds"], settings["labels"], settings["offset_labels"]
    n_groups = int(labels.max()) + 1
    n_offsets = 0 if offset_labels is None else int(offset_labels.max()) + 1
    draws = jax.random.split(key, n_draws)
    horizon = settings["horizon"]
    first_stagger = n_groups + n_offsets

    def split(points):
        intervals = np.exp(points[:, :n_groups])[:, labels]
        if offset_labels is None:
            return intervals, None
        return intervals, np.mod(points[:, n_groups:first_stagger], 1.0)[:, offset_labels]

    def stagger_of(points, name):
        return points[:, first_stagger + staggers.index(name)] if name in staggers else None

    def launch_of(points):
        """The intervals, launch fractions and restart stagger of ``points``."""
        intervals, fractions = split(points)
        launch_stagger = stagger_of(points, "launch_stagger")
        if launch_stagger is not None:
            fractions = _stagger_fractions(fleet, intervals, launch_stagger)
        return intervals, fractions, stagger_of(points, "restart_stagger")

    def waste_of(points) -> np.ndarray:
        """(M, S) the waste of ``points`` on the common draws."""
        intervals, fractions, restart_stagger = launch_of(points)
        return fleet_waste(
            fleet,
            intervals,
            horizon=horizon,
            keys=draws,
            jitter=jitter,
            launch=launch,
            offsets=fractions,
            restart_stagger=restart_stagger,
        )

    def run(points, limits=None):
        """(waste (M, S), excess (M,), use) of ``points`` under the budgets (or ``limits``)."""
        assert budgets is not None
        intervals, fractions, restart_stagger = launch_of(points)
        waste, use = _waste_and_use(
            fleet,
            intervals,
            budgets,
            horizon=horizon,
            keys=draws,
            jitter=jitter,
            launch=launch,
            offsets=fractions,
            restart_stagger=restart_stagger,
        )
        return waste, _excess(_held(use, budgets.bound), budgets.limits if limits is None else limits), use

    def onto(points, first, limits=None, down=False):
        return _onto_limits(
            lambda p: run(p, limits),
            points,
            first,
            n_groups=n_groups,
            lower=lower,
            upper=upper,
            n_rows=n_points,
            down=down,
        )

    def evaluate(points):
        if budgets is None:
            return waste_of(points)
        moved, waste, _, kept = onto(points, run(points))
        return moved, waste, kept

    names = list(compared)
    starts = np.stack([_group_start(compared[name], labels, bounds) for name in names])
    lower, upper = np.log(bounds[0]), np.log(bounds[1])
    scale = np.ones(n_groups)
    if offset_labels is not None:  # evenly staggered offsets, as "adam" starts them
        n_offsets = int(offset_labels.max()) + 1
        starts = np.concatenate([starts, np.broadcast_to(np.arange(n_offsets) / n_offsets, (len(names), n_offsets))], 1)
        lower = np.concatenate([lower, np.full(n_offsets, -np.inf)])
        upper = np.concatenate([upper, np.full(n_offsets, np.inf)])
        scale = np.concatenate([scale, np.full(n_offsets, _OFFSET_SCALE)])
    if staggers:  # the fleet's (launch's) staggers, moved first by max(Δ, mean solo write)
        own = {"restart_stagger": float(np.asarray(fleet.restart_stagger)), "launch_stagger": check_launch(launch)}
        values = np.array([own[name] if name == "restart_stagger" else own[name].stagger for name in staggers])
        write = float(np.mean(_solo_write(fleet)[np.asarray(fleet.active)]))
        starts = np.concatenate([starts, np.broadcast_to(values, (len(names), len(staggers)))], 1)
        lower = np.concatenate([lower, np.zeros(len(staggers))])
        upper = np.concatenate([upper, np.full(len(staggers), horizon)])
        scale = np.concatenate([scale, np.maximum(values, write) / _FIRST_MESH])
    # The best starting point on the search's own draws (the offsets and staggers, if designed),
    # padded to the search's 2K + 2 points so that the start and every step share one program.
    n_points = max(len(names), 2 * starts.shape[1] + 2)
    scaled = {}
    if budgets is not None:  # each start moved up onto the budgets; the best that keeps them
        waste, excess, use = run(_pad_rows(starts, n_points))
        count = len(names)
        first_run = (waste[:count], excess[:count], {name: value[:count] for name, value in use.items()})
        moved, start_waste, _, kept = onto(starts, first_run)
        if not kept.any():  # not even at the longest intervals: the smallest budget there
            top = np.array(starts[:1])
            top[:, :n_groups] = upper[:n_groups]
            _, _, use = run(_pad_rows(top, n_points))
            held = {name: float(value[0]) for name, value in _held(use, budgets.bound).items()}
            raise _infeasible(budgets, held, budgets.limits, split(top)[0][0])
        scaled = {names[i]: split(moved[i : i + 1])[0][0] for i in np.flatnonzero((excess[:count] > 0) & kept)}
        start_waste = np.where(kept[:, None], start_waste, np.inf)
        starts = moved
    elif offset_labels is None and not staggers:
        start_waste = fleet_waste(
            fleet,
            _pad_rows(np.stack([compared[n] for n in names]), n_points),
            horizon=horizon,
            keys=draws,
            jitter=jitter,
            launch=launch,
        )
    else:
        start_waste = waste_of(_pad_rows(starts, n_points))
    start_waste = start_waste[: len(names)]
    first = int(np.argmin(start_waste.mean(axis=1)))
    centre, converged, rows = _compass_search(
        evaluate, starts[first], lower, upper, scale, mesh_min=math.log1p(rtol), max_steps=steps, bar=bar
    )
    path = np.stack([row[3] for row in rows])
    path_intervals, path_fractions = split(path)
    intervals, fractions = split(centre[None])
    write = _solo_write(fleet)
    history = History(
        np.array([row[0] for row in rows]),
        np.array([row[1] for row in rows]),
        np.array([row[2] for row in rows]),
        path_intervals,
        None if path_fractions is None else cycle_positions(path_fractions, _launch_span(fleet, write, path_intervals)),
    )
    mesh = np.array([math.expm1(row[4]) for row in rows])
    used = None
    if budgets is not None:  # which limits bind at the centre, and the centre under each relaxed
        # A limit binds where the searched intervals use it within `BINDING` of it, or where the
        # search's finest move down (every interval ÷ (1 + rtol)) would break it: the use is a
        # step function of the intervals (whole checkpoints), flat near the limit over short H.
        shorter = _shifted(centre[None], [-math.log1p(rtol)], n_groups, lower, upper)
        waste, _, use = run(_pad_rows(np.concatenate([centre[None], shorter]), n_points))
        held_shorter = _held({name: value[1:2] for name, value in use.items()}, budgets.bound)
        use = {name: value[:1] for name, value in use.items()}
        held = {name: float(value[0]) for name, value in _held(use, budgets.bound).items()}
        binding = tuple(
            name
            for name, limit in budgets.limits.items()
            if held_shorter[name][0] > limit or held[name] >= (1 - BINDING) * limit
        )
        relaxed = {}
        for name in binding:
            limits = {**budgets.limits, name: budgets.limits[name] * (1 + RELAX)}
            first_run = (waste[:1], _excess(_held(use, budgets.bound), limits), use)
            lowered, _, _, _ = onto(centre[None], first_run, limits, down=True)
            relaxed[name] = split(lowered)[0][0]
        kept_names = {name for i, name in enumerate(names) if kept[i] and name not in scaled}
        used = {"held": held, "binding": binding, "relaxed": relaxed, "scaled": scaled, "kept": kept_names}
    return (
        intervals[0],
        None if fractions is None else fractions[0],
        history,
        converged,
        converged,
        names[first] + ("_scaled" if names[first] in scaled else ""),
        mesh,
        {name: float(centre[first_stagger + i]) for i, name in enumerate(staggers)},
        used,
    )


def _adam(
    fleet,
    settings,
    job_bounds,
    start,
    key,
    *,
    steps,
    patience,
    window,
    learning_rate,
    n_draws,
    jitter,
    launch,
    offsets,
    bar,
):
    """`checkpoint_intervals` with ``method="adam"``."""
    import optax  # imported here so that `import ckpt_jax` stays light

    bounds, labels, n_groups = settings["bounds"], settings["labels"], int(settings["labels"].max()) + 1
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

    schedule = optax.cosine_decay_schedule(learning_rate, steps, alpha=0.01)
    optimizer = optax.adam(schedule)
    opt_state = optimizer.init(jnp.asarray(theta))
    objective, stderr, grad_norm, thetas = [], [], [], []
    best, since_best, stopped_early = math.inf, 0, False
    for step in range(steps):
        estimate = smoothed_gradient(
            fleet,
            theta,
            jax.random.fold_in(key, step),
            groups=labels,
            bounds=job_bounds,
            horizon=settings["horizon"],
            n_draws=n_draws,
            n_pairs=settings["n_pairs"],
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
                    if bar is not None:  # stopped early: the steps it took were all it takes
                        bar.total = bar.n
                        bar.refresh()
                    break

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
    return intervals, fractions, history, stopped_early, stopped_early, None, None


# -- reading an evaluation: per group, writers, power and storage --------------------


def group_waste(evaluation: Evaluation, labels, size) -> np.ndarray:
    """(D, S, G) each interval set's waste per group of jobs, on the evaluation's draws (paired
    across the sets): the waste of the group's jobs weighted by their ``size``.

    Args:
      evaluation: an `Evaluation` (`DesignResult.evaluation`).
      labels: (N,) each job's group, 0 to G − 1.
      size: (N,) each job's size (its weight in the group's waste).
    """
    waste = np.asarray(evaluation.job_waste, np.float64)  # (D, S, N)
    labels, size = np.asarray(labels), np.asarray(size, np.float64)
    n_groups = int(labels.max()) + 1
    return np.stack(
        [(waste[..., labels == g] * size[labels == g]).sum(-1) / size[labels == g].sum() for g in range(n_groups)],
        axis=-1,
    )


def writer_distribution(evaluation: Evaluation) -> tuple[np.ndarray, np.ndarray]:
    """Each interval set's share of time at each writer count n_w, averaged over the draws
    where it is defined, (D, N + 1) (NaN where no draw defines it), and how many draws those
    are, (D,).

    The writer count is defined on a draw only once every job has fired (`WriterStats`):
    where some job never fired before H it is NaN, and a plain mean would be NaN as soon as
    one draw is."""
    fraction = np.asarray(evaluation.writers, np.float64)  # (D, S, N + 1)
    defined = np.all(np.isfinite(fraction), axis=-1)  # (D, S)
    n_defined = defined.sum(axis=1)  # (D,)
    total = np.where(defined[..., None], fraction, 0.0).sum(axis=1)
    shares = np.where(n_defined[:, None] > 0, total / np.maximum(n_defined, 1)[:, None], np.nan)
    return shares, n_defined


def power_and_storage(evaluation: Evaluation, write, *, day: float | None = None) -> dict:
    """Per interval set, ``{name: {"power_steps": Estimate, "volume": Estimate}}``: the
    fleet's power steps above ``evaluation.power_threshold`` (`PowerStats.n_steps`) and the
    volume of its completed checkpoints (`Evaluation.writes` × each job's volume), over the
    evaluation's draws, per ``day`` or over the horizon H. Where the evaluation recorded it
    (`Evaluation.power_largest_step`), also the largest step of the draw at one instant, in
    units of size: ``"largest_step"``, an `Estimate` of the mean over the draws of each
    draw's largest, and ``"largest_step_max"``, a float, the largest in any draw.

    Args:
      evaluation: an `Evaluation`.
      write: (N,) each job's checkpoint volume.
      day: a day in the engine's time (86400 where it runs in seconds): the estimates are
        per day (scaled by day / H); None: over H.
    """
    scale = day / evaluation.horizon if day is not None else 1.0
    volume = np.asarray(evaluation.writes, np.float64) @ np.asarray(write, np.float64)  # (D, S)
    return {
        name: {
            "power_steps": mean_ci(np.asarray(evaluation.power_steps[i], np.float64) * scale),
            "volume": mean_ci(volume[i] * scale),
            **_largest_step(evaluation, i),
        }
        for i, name in enumerate(evaluation.names)
    }


def _largest_step(evaluation: Evaluation, index: int) -> dict:
    """`power_and_storage`'s largest power step of one set: its mean over the draws and its
    maximum over them (nothing where the evaluation has none)."""
    if evaluation.power_largest_step is None:
        return {}
    steps = np.asarray(evaluation.power_largest_step[index], np.float64)
    return {"largest_step": mean_ci(steps), "largest_step_max": float(steps.max())}


class Comparison(NamedTuple):
    """Every interval set of an `Evaluation` weighed against the design, per group and for
    the fleet, on the evaluation's draws (each difference paired over them): `compare`.

    Attributes:
      names: (D,) the interval sets, as `Evaluation.names` (``"design"`` first).
      group_waste: (D, S, G) each set's waste per group (`group_waste`).
      waste: {name: [Estimate per group]} of ``group_waste``.
      saved: {name: [Estimate per group]}, every set but the design: its waste minus the
        design's (> 0: the design wastes less there).
      fleet_waste: {name: Estimate} of `Evaluation.fleet_waste`.
      fleet_saved: {name: Estimate}, every set but the design: its fleet waste minus the
        design's.
      goodput: {name: (fleet Estimate, [Estimate per group])} of 1 − waste.
      gpu_hours_saved: with ``gpus``: {name: (fleet Estimate, [Estimate per group])}, every
        set but the design: the waste saved × GPUs × 24. The waste is a share of the
        wall-clock time over the horizon, so every day the design saves that share of each
        GPU's 24 hours. None without ``gpus``.
    """

    names: tuple
    group_waste: np.ndarray
    waste: dict
    saved: dict
    fleet_waste: dict
    fleet_saved: dict
    goodput: dict
    gpu_hours_saved: dict | None


def compare(evaluation: Evaluation, labels, size, *, gpus=None) -> Comparison:
    """Every interval set of ``evaluation`` weighed against the design (its first set), per
    group and for the fleet, with 95% CIs (`Comparison`).

    Args:
      evaluation: an `Evaluation` (`DesignResult.evaluation`).
      labels: (N,) each job's group, 0 to G − 1.
      size: (N,) each job's size (its weight in its group's waste).
      gpus: None, or (G,) each group's GPUs, for the GPU-hours saved per day.
    """
    names = tuple(evaluation.names)
    per_group = group_waste(evaluation, labels, size)  # (D, S, G)
    fleet = np.asarray(evaluation.fleet_waste, np.float64)  # (D, S)
    n_groups = per_group.shape[-1]
    design = names.index("design")
    compared = [name for name in names if name != "design"]
    group_saved = {name: per_group[names.index(name)] - per_group[design] for name in compared}  # (S, G)
    fleet_saved = {name: fleet[names.index(name)] - fleet[design] for name in compared}
    hours = None
    if gpus is not None:
        gpus = np.asarray(gpus, np.float64)
        hours = {
            name: (
                mean_ci(fleet_saved[name] * gpus.sum() * 24),
                [mean_ci(group_saved[name][:, g] * gpus[g] * 24) for g in range(n_groups)],
            )
            for name in compared
        }
    return Comparison(
        names=names,
        group_waste=per_group,
        waste={name: [mean_ci(per_group[i, :, g]) for g in range(n_groups)] for i, name in enumerate(names)},
        saved={name: [mean_ci(group_saved[name][:, g]) for g in range(n_groups)] for name in compared},
        fleet_waste={name: mean_ci(fleet[i]) for i, name in enumerate(names)},
        fleet_saved={name: mean_ci(fleet_saved[name]) for name in compared},
        goodput={
            name: (mean_ci(1 - fleet[i]), [mean_ci(1 - per_group[i, :, g]) for g in range(n_groups)])
            for i, name in enumerate(names)
        },
        gpu_hours_saved=hours,
    )


# -- one period of a schedule in a run with failures -----------------------------------


def failure_draws(mtbf, restart, until: float, seed: int) -> tuple[np.ndarray, list]:
    """Per job, Poisson failure times of rate 1/M_i on [0, until] from NumPy's generator of
    ``[seed, 7]``: (N, F) sorted and +inf padded (as ``simulate(..., failure_times=...)``
    takes them), and per job the down periods [t_f, t_f + R_i) of those that strike (a time
    inside a down period is passed over, as the engine passes over listed times there)."""
    rng = np.random.default_rng([seed, 7])
    rows, down = [], []
    for m, r in zip(np.asarray(mtbf, np.float64), np.asarray(restart, np.float64)):
        times, t = [], 0.0
        while True:
            t += rng.exponential(m)
            if t > until:
                break
            times.append(t)
        rows.append(times)
        struck, back = [], -np.inf
        for t in times:
            if t >= back:
                struck.append((t, t + r))
                back = t + r
        down.append(struck)
    width = max(1, max(len(times) for times in rows))
    listed = np.full((len(rows), width), np.inf)
    for job, times in enumerate(rows):
        listed[job, : len(times)] = times
    return listed, down


def schedule(
    fleet: Fleet,
    *,
    period,
    mtbf,
    restart,
    seed: int,
    key: jax.Array | None = None,
    launch: str | Launch = "synchronous",
    offsets=None,
) -> dict:
    """One period of ``fleet``'s schedule (run at its ``compute``, the intervals) in a run
    with failures drawn from ``seed`` (`failure_draws`).

    The run lasts long enough for a failure to show after the launch transient (at most 40
    periods). The window shown is one period around the first failure after the transient
    (three periods), else around the last failure, else the run's last period; the period is
    the longest job's median fire-to-fire time over the cycles that no failure of its own
    interrupted (a failure stretches its cycle by the lost work and the restart).

    Args:
      fleet: a single `Fleet` (batch shape ()); its outages (docs/model.md §1f), if any, are left
        out: the schedule shows the jobs' own failures.
      period: (N,) each job's solo period at its interval (the run's length is set from it).
      mtbf, restart: (N,) each job's M_i and R_i, for the failure draws.
      seed: the failure draws' seed.
      key: PRNG key of a random launch (``launch="random"``).
      launch: ``"synchronous"`` or ``"random"``.
      offsets: None, or (N,) launch offsets (`launch_state`), which take precedence.

    Returns:
      A dict: ``fire`` and ``end`` (N, K) fire and end times (an abandoned write ends at
      the job's next failure, or at the run's end), ``abandoned`` (N, K) the writes a
      failure abandoned (or still open at the end), ``down`` per job its down periods,
      ``start`` and ``stop`` the window shown, ``period``, and ``failures_shown`` the
      failures inside the window.
    """
    solo = np.asarray(period, np.float64)
    mtbf = np.asarray(mtbf, np.float64)
    fleet = fleet.without_outages()  # the jobs' own failures, drawn here, mark the down periods
    period_guess = float(solo.max())
    rate = float(np.sum(1 / mtbf))
    until = min(max(6.0, 3.0 + 2.0 / (rate * period_guess)) * period_guess, 40.0 * period_guess)
    listed, down = failure_draws(mtbf, restart, until, seed)
    fleet = _replace(fleet, failure_times=None)  # the failures shown are drawn from ``seed``
    if offsets is not None:
        state = launch_state(fleet, offsets)
    elif check_launch(launch) == "random":
        if key is None:
            raise ValueError('key must be a PRNG key with launch="random", got None')
        state = random_state(fleet, key)
    else:
        state = start_state(fleet, launch)
    n_fires = int(np.ceil(until / solo.min())) + 2
    trace = simulate(fleet, state, n_fires, until=until, progress=False, failure_times=listed)
    fire = np.asarray(trace.fire_times, np.float64)
    end = np.asarray(trace.end_times, np.float64)
    stop = float(np.asarray(trace.time).max())
    # A write with no end was abandoned at the job's next failure (or is open at the stop).
    abandoned = np.isfinite(fire) & ~np.isfinite(end)
    cut = np.full_like(fire, stop)
    for job, periods in enumerate(down):
        starts = np.array([t for t, _ in periods] + [stop])
        cut[job] = starts[np.minimum(np.searchsorted(starts, fire[job]), starts.size - 1)]
    end_drawn = np.where(abandoned, np.minimum(cut, stop), end)
    gaps = []
    for job, periods in enumerate(down):
        fired = fire[job][np.isfinite(fire[job])]
        failed = np.array([t for t, _ in periods])
        clean = [b - a for a, b in zip(fired, fired[1:]) if not np.any((failed >= a) & (failed < b))]
        gaps.append(float(np.median(clean)) if clean else math.nan)
    shown_period = float(np.nanmax(gaps)) if np.isfinite(gaps).any() else period_guess
    struck = sorted(t for periods in down for t, _ in periods if t < stop)
    later = [t for t in struck if t >= 3 * shown_period] or struck[-1:]  # after the transient if any
    if later:
        start = min(max(later[0] - shown_period / 3, 0.0), max(stop - shown_period, 0.0))
    else:
        start = max(stop - shown_period, 0.0)
    return {
        "fire": fire,
        "end": end_drawn,
        "abandoned": abandoned,
        "down": down,
        "start": start,
        "stop": min(start + shown_period, stop),
        "period": shown_period,
        "failures_shown": sum(start <= t < start + shown_period for periods in down for t, _ in periods),
    }
