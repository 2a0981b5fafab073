"""What `ckpt_jax.design` optimises over and the checks of its inputs: the unconstrained
parametrisation of intervals and launch offsets, group labels and per-job bounds."""

from __future__ import annotations

import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ._plan import check_horizon_events
from .model import Fleet

__all__ = [
    "LAUNCHES",
    "LAUNCH_MODES",
    "Launch",
    "check_launch",
    "interval_from_theta",
    "offset_from_theta",
    "theta_from_interval",
    "labels_of",
    "check_inputs",
    "job_bounds",
    "BUDGET_BOUNDS",
    "Budgets",
    "check_budgets",
]

LAUNCHES = ("synchronous", "random")
LAUNCH_MODES = ("random", "together", "staggered")
# How a budget is held on the design's common draws: its mean, or the upper end of its 95 % CI.
BUDGET_BOUNDS = ("mean", "upper")


class Launch(NamedTuple):
    """How a fleet starts (docs/model.md §1f, launch modes).

    Attributes:
      mode: ``"random"`` (each job uniform in time over its solo cycle, `ckpt_jax.random_state`),
        ``"together"`` (every job at the start of its compute at t = 0, `ckpt_jax.initial_state`)
        or ``"staggered"`` (job k, counted over the active jobs in index order, starts its first
        compute k·``stagger`` after job 0; t = 0 is the last job's launch,
        `ckpt_jax.design.staggered_positions`).
      stagger: Δ_L > 0 with ``"staggered"`` (a time), else 0.
    """

    mode: str = "random"
    stagger: float = 0.0


def check_launch(launch, name: str = "launch"):
    """``launch`` checked and normalised: the strings of `LAUNCHES` as they are, a `Launch` of
    mode "together" as ``"synchronous"`` and of mode "random" as ``"random"`` (the same
    starts), a staggered `Launch` as it is. A `ValueError` names ``name`` and what is allowed."""
    if isinstance(launch, str) and launch in LAUNCHES:
        return launch
    if not isinstance(launch, Launch):
        raise ValueError(
            f"{name} must be one of {', '.join(map(repr, LAUNCHES))} or a ckpt_jax.design.Launch, got {launch!r}"
        )
    if launch.mode not in LAUNCH_MODES:
        raise ValueError(f"{name}.mode must be one of {', '.join(map(repr, LAUNCH_MODES))}, got {launch.mode!r}")
    stagger = launch.stagger
    if isinstance(stagger, bool) or not isinstance(stagger, (int, float, np.integer, np.floating)):
        raise ValueError(f"{name}.stagger must be a number, got {stagger!r}")
    if launch.mode != "staggered":
        if stagger != 0:
            raise ValueError(f"{name}.stagger must be 0 unless mode='staggered', got {stagger!r}")
        return "synchronous" if launch.mode == "together" else "random"
    if not (math.isfinite(stagger) and stagger > 0):
        raise ValueError(f"{name}.stagger must be finite and > 0 with mode='staggered', got {stagger!r}")
    return Launch("staggered", float(stagger))


# -- parametrisation -------------------------------------------------------------------


def interval_from_theta(theta, bounds):
    """Intervals ``T = lo·(hi/lo)^sigmoid(θ)`` in (lo, hi) from unconstrained θ (any shape;
    ``lo`` and ``hi`` numbers or arrays that broadcast against θ, e.g. one per group)."""
    lo, hi = bounds
    return lo * jnp.exp(jnp.log(hi / lo) * jax.nn.sigmoid(jnp.asarray(theta)))


def offset_from_theta(theta):
    """Launch offsets as fractions ``θ mod 1`` of the cycle, in [0, 1), from unconstrained θ."""
    return jnp.mod(jnp.asarray(theta), 1.0)


def theta_from_interval(intervals, bounds):
    """The inverse of `interval_from_theta`; intervals are clipped just inside (lo, hi)."""
    lo, hi = bounds
    fraction = np.log(np.asarray(intervals, np.float64) / lo) / np.log(hi / lo)
    fraction = np.clip(fraction, 1e-6, 1 - 1e-6)
    return np.log(fraction) - np.log1p(-fraction)


# -- validation ------------------------------------------------------------------------


def labels_of(groups, n_jobs: int, name: str) -> np.ndarray:
    """(N,) labels 0..G-1 (in the sorted order of ``groups``); one per job for None."""
    if groups is None:
        return np.arange(n_jobs)
    groups = np.asarray(groups)
    if groups.shape != (n_jobs,) or not np.issubdtype(groups.dtype, np.integer):
        raise ValueError(
            f"{name} must be None or an integer array of shape ({n_jobs},), got {groups.dtype} of shape {groups.shape}"
        )
    return np.unique(groups, return_inverse=True)[1].reshape(n_jobs)


def check_inputs(fleet, bounds, horizon, n_draws, n_pairs, groups, launch):
    if not isinstance(fleet, Fleet):
        raise ValueError(f"fleet must be a ckpt_jax.Fleet, got {type(fleet).__name__}")
    if fleet.batch_shape != ():
        raise ValueError(f"fleet must be a single fleet (batch shape ()), got batch shape {fleet.batch_shape}")
    mtbf = np.asarray(fleet.mtbf)[np.asarray(fleet.active)]
    if not np.all(np.isfinite(mtbf)):
        raise ValueError(
            "fleet must have a finite mtbf for every active job (Fleet(..., mtbf=M)): "
            "without failures there is nothing to checkpoint against"
        )
    n_jobs = fleet.n_jobs
    lo, hi = job_bounds(bounds, n_jobs)
    try:
        horizon = float(horizon)
    except (TypeError, ValueError):
        raise ValueError(f"horizon must be a number > 0 and finite, got {horizon!r}") from None
    if not (0 < horizon < math.inf):
        raise ValueError(f"horizon must be > 0 and finite, got {horizon!r}")
    check_horizon_events(fleet, horizon, name="horizon")  # before the first step, not after minutes
    for name, value in (("n_draws", n_draws), ("n_pairs", n_pairs)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
            raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
    check_launch(launch)
    labels = labels_of(groups, n_jobs, "groups")
    # One θ per group maps through one pair of bounds: the group's jobs must share it.
    _, first = np.unique(labels, return_index=True)  # labels are 0..G-1
    group_lo, group_hi = lo[first], hi[first]
    if not (np.array_equal(group_lo[labels], lo) and np.array_equal(group_hi[labels], hi)):
        raise ValueError("bounds must be the same for every job of a group (one interval per group)")
    return (lo, hi), (group_lo, group_hi), horizon, labels


def job_bounds(bounds, n_jobs: int):
    """(lo, hi), each (N,) float64, from a pair of numbers or of (N,) arrays."""
    rule = f"bounds must be a pair (lo, hi), each a number or an array of shape ({n_jobs},), with 0 < lo < hi finite"
    try:
        lo, hi = bounds
        lo, hi = np.asarray(lo, np.float64), np.asarray(hi, np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"{rule}, got {bounds!r}") from None
    for value in (lo, hi):
        if value.shape not in ((), (n_jobs,)):
            raise ValueError(f"{rule}, got shapes {lo.shape} and {hi.shape}")
    lo, hi = np.broadcast_to(lo, (n_jobs,)).copy(), np.broadcast_to(hi, (n_jobs,)).copy()
    if not (np.all(np.isfinite(lo) & np.isfinite(hi)) and np.all(lo > 0) and np.all(hi > lo)):
        raise ValueError(f"{rule}, got {bounds!r}")
    return lo, hi


# -- budgets (docs/model.md §1g) ---------------------------------------------------------


class Budgets(NamedTuple):
    """Limits a design must keep (docs/model.md §1g): constraints on the intervals, not
    dynamics. Each limit is estimated on the design's common draws, as the report measures it
    (`ckpt_jax.design.power_and_storage`).

    Attributes:
      written: the most volume the fleet may write per ``per`` (its completed checkpoints ×
        each job's volume, in the fleet's volume unit); None: no limit.
      power_steps: the most power steps above the threshold (`ckpt_jax.SaveAt.power_threshold`'s
        default, a tenth of the fleet's full draw) per ``per``; None: no limit.
      min_interval: a floor on every interval: None, a number, or (N,) per job (equal within a
        group); it raises the lower bound of the search.
      per: the span the limits count over, in the engine's time (86400 where it runs in
        seconds: per day); None: over the design's horizon H.
      bound: ``"mean"`` (the mean over the common draws keeps the limit) or ``"upper"`` (the
        upper end of its 95 % CI does: a margin for the noise of the draws).
    """

    written: float | None = None
    power_steps: float | None = None
    min_interval: float | np.ndarray | None = None
    per: float | None = None
    bound: str = "mean"

    @property
    def limits(self) -> dict:
        """{name: limit} of the limits given, ``"written"`` before ``"power_steps"``."""
        return {
            name: value
            for name, value in (("written", self.written), ("power_steps", self.power_steps))
            if value is not None
        }


def _positive_number(value, name: str, *, allow_zero: bool) -> float:
    rule = f"a finite number {'>=' if allow_zero else '>'} 0"
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise ValueError(f"budgets.{name} must be None or {rule}, got {value!r}")
    value = float(value)
    if not (math.isfinite(value) and (value >= 0 if allow_zero else value > 0)):
        raise ValueError(f"budgets.{name} must be None or {rule}, got {value!r}")
    return value


def check_budgets(budgets, n_jobs: int) -> Budgets | None:
    """``budgets`` checked (None stays None): every `ValueError` names the field
    (``budgets.written``) and what is allowed; ``min_interval`` comes back as (N,) or None."""
    if budgets is None:
        return None
    if not isinstance(budgets, Budgets):
        raise ValueError(f"budgets must be None or a ckpt_jax.design.Budgets, got {type(budgets).__name__}")
    written = None if budgets.written is None else _positive_number(budgets.written, "written", allow_zero=False)
    steps = None
    if budgets.power_steps is not None:
        steps = _positive_number(budgets.power_steps, "power_steps", allow_zero=True)
    per = None if budgets.per is None else _positive_number(budgets.per, "per", allow_zero=False)
    if budgets.bound not in BUDGET_BOUNDS:
        raise ValueError(f"budgets.bound must be one of {', '.join(map(repr, BUDGET_BOUNDS))}, got {budgets.bound!r}")
    floor = budgets.min_interval
    if floor is not None:
        rule = f"budgets.min_interval must be None, a number or an array of shape ({n_jobs},), each finite and > 0"
        if isinstance(floor, bool):
            raise ValueError(f"{rule}, got {floor!r}")
        try:
            floor = np.asarray(floor, np.float64)
        except (TypeError, ValueError):
            raise ValueError(f"{rule}, got {budgets.min_interval!r}") from None
        if floor.shape not in ((), (n_jobs,)) or not np.all(np.isfinite(floor) & (floor > 0)):
            raise ValueError(f"{rule}, got {budgets.min_interval!r}")
        floor = np.broadcast_to(floor, (n_jobs,)).copy()
    return Budgets(written, steps, floor, per, budgets.bound)
