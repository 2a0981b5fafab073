"""What a fleet's checkpointing costs it as configured: goodput, GPU-hours lost by cause,
storage and power load (issue 25 §2; docs/model.md §1c, §1d).

`assess` runs ``n_draws`` independent failure draws of one fleet, each from its own random
launch (`ckpt_jax.random_state`: uniform in time), over a horizon H with the exact event loop, and reduces
what the run records (`JobStats`, `WriterStats`, `PowerStats`) to an operator's numbers.
It is unit-agnostic: times are in the fleet's own unit (``hours_per_time_unit`` converts
them to hours), a job's ``size`` counts its GPUs, and the power draw is in units of one
GPU's full-speed draw (``gpu_power`` converts it).

**Where each job's time goes.** Over [0, H] a job's wall-clock time splits into

* ``goodput``: the steady-state goodput (docs/model.md §1c): compute work done before H
  less the work failures took, i.e. the work a failure can no longer take
  (`JobStats.useful_work`: saved by a completed write, with two-level checkpoints by a drain
  that ended, under ``recover_from="memory"`` by a snapshot) plus the work still uncovered at
  H (`JobStats.uncovered_work`). Nothing fails at H, so that work is not lost: counting it
  as lost (``useful / H``, `JobStats.covered_waste`) would bias the goodput low by about
  T/(2H) per job. The remaining bias is second order, ~T²/(M·H);
* ``checkpoint``: stalled by its own checkpoints: blocking writes (contention included, as a
  write under contention takes longer) and two-level snapshots; with asynchronous
  checkpoints (α > 0) the compute forgone while draining, (1 − α)·(write − wait time);
* ``overhead``: blocked in the fixed overheads of its checkpoints (docs/model.md §1g;
  `JobStats.overhead_time`; 0 without): the barrier, serialising, metadata, the commit;
* ``backpressure``: waiting for the previous drain to end (`JobStats.wait_time`);
* ``lost_work``: compute work thrown away by the jobs' own failures (`JobStats.lost_work`
  less `JobStats.outage_lost_work`);
* ``restart``: down after the jobs' own failures (`JobStats.down_time` less
  `JobStats.outage_down_time`);
* ``outages``: compute work thrown away by common-cause outages and the time down after them,
  the restart stagger aside (docs/model.md §1f; 0 without outages);
* ``restart_stagger``: down waiting for one's turn after an outage, the k·Δ of the restart
  stagger (`JobStats.stagger_time`; 0 without outages);
* ``throttling``: the rest, compute time that did no work: the slowdown under a binding
  power cap (0 without a cap, to rounding; with α > 0 the compute forgone while draining
  is the ``checkpoint`` stall). The work uncovered at H is in the goodput, not here. For
  the whole fleet the power draw measures it: a computing job draws w_i times its
  compute rate and every other job p_idle·w_i (docs/model.md §1d), so the work done is
  ∫P dt − p_idle Σ_i w_i (H − compute time_i), and `Assessment.throttled` is the GPU time
  spent computing less that work (with α > 0 less the ``checkpoint`` stall, computing at α
  while draining, which is counted at full speed: under a cap that part is approximate).

The nine add up to H for every job (to rounding; a ``throttling`` remainder under
`ROUNDING_FLOOR` of H is rounding and counts as 0): `Assessment.losses` plus the goodput is 1
per GPU, in each draw.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ._design_inputs import Launch, check_launch
from ._estimate import FLOOR, Estimate, check_floor, effect, mean_ci, share_ci
from ._observe import Observer, SaveAt
from ._plan import check_horizon_events
from ._simulate import simulate
from ._validate import check_horizon, check_key
from .design import _batched, paired_random_state, start_state
from .loop import outage_instants
from .model import Fleet

__all__ = [
    "BASELINE",
    "CAUSES",
    "Assessment",
    "Timeline",
    "OutageStorms",
    "assess",
    "check_scenario_keys",
    "compare",
    "default_groups",
    "outage_storms",
    "paired_difference",
    "sensitivity",
    "sensitivity_knobs",
    "sensitivity_left_out",
    "timeline",
]

# A share of H below this is rounding (the "throttling" remainder of an uncapped fleet).
ROUNDING_FLOOR = 1e-12

# The causes of lost GPU time, in the order of the module docstring.
CAUSES = (
    "checkpoint",
    "overhead",
    "backpressure",
    "lost_work",
    "restart",
    "outages",
    "restart_stagger",
    "throttling",
)

# A draw at least this fraction of the cap counts as "at the cap".
_AT_CAP = 1 - 1e-9
_POWER_BINS = 100


class Assessment(NamedTuple):
    """A fleet's assessment (`assess`). Estimates are means over the draws with a 95% CI;
    the CI of a share of time (goodput, losses, saturated and cap time, and the GPU-hours per
    day made from the losses) stays inside [0, 1] (`ckpt_jax._estimate.share_ci`).

    The writer count is observed on each draw's observation window
    (`ckpt_jax.WriterStats.window`: from the instant every active job has fired once to the
    first end of a job's K-th write, or H). Where no draw has one (jobs down almost all the
    time, or H shorter than the window) it is not observed (`Assessment.writers_observed`
    False): ``writer_time``, ``writers_p50``, ``writers_p99`` and ``saturated_time`` are NaN
    and ``writers_max`` is -1 (as in `ckpt_jax.WriterStats.max`), while everything else
    (goodput, losses, power, and ``independent_writer_time``, which needs no window) is
    computed as usual. `Assessment.to_json` writes null for each NaN.

    Attributes:
      groups: group name -> (job indices,), in the order the groups were given.
      goodput: group name (and ``"fleet"``) -> `Estimate` of the GPU-weighted fraction of
        wall-clock time that ends up as saved compute work.
      losses: group name (and ``"fleet"``) -> cause (`CAUSES`) -> `Estimate` of the
        GPU-weighted fraction of wall-clock time lost to that cause; per draw, goodput plus
        the losses is 1.
      gpu_hours_lost_per_day: the same as GPU-hours per day: fraction × GPUs × 24.
      gpus: group name (and ``"fleet"``) -> GPUs (the sum of the jobs' sizes).
      writer_time: (N + 1,) fraction of the observation window spent with k writers, pooled
        over the draws.
      independent_writer_time: (N + 1,) the same if the jobs' phases were independent, each
        writing the fraction of time it wrote in the draws (a Poisson-binomial law): what
        the fleet's writer count would be without any correlation between its jobs.
      writers_p50, writers_p99: percentiles of the time-weighted writer count (pooled).
      writers_max: the largest writer count in any draw.
      saturation_writers: the least writer count from which the storage's aggregate f(n)
        stops growing (f(k) >= f(j) for every j > k, and f(N) <= f(N - 1) for k = N) and
        any that many writers can fill it (the smallest write limits sum to f(k) at least);
        N + 1 where no count does both.
      saturated_time: `Estimate` of the fraction of the window with at least that many writers.
      power_mean, power_max, power_largest_drop, power_largest_rise: `Estimate`s over the
        draws of the draw's mean, its max, and its largest drop and rise at one instant, in
        ``power_unit``: each the mean over the draws of each draw's own (its 95% CI is that
        mean's, not the range of the draws).
      power_edges, power_time: (n + 1,) bin edges in ``power_unit`` and (n,) fraction of the
        time spent in each bin, pooled over the draws.
      cap_time: `Estimate` of the fraction of time with the draw at the cap (None without a
        cap; with ``idle_power`` > 0 the idle draw counts towards it).
      throttled: `Estimate` of the fleet's GPU-weighted fraction of time lost to computing
        below full speed (module docstring), measured from the power draw: the fleet's
        ``throttling`` by another route (equal to rounding with α = 0).
      throttled_gpu_hours_per_day: the same in GPU-hours per day.
      power_unit: ``"W"`` where ``gpu_power`` was given, else ``"gpu"`` (one GPU's full draw).
      horizon: H in the fleet's time unit; ``hours_per_time_unit`` its length in hours.
      n_draws: the number of independent draws. Where every draw recorded the same (a
        replayed trace and a fixed launch), they are one draw: every `Estimate` has NaN
        bounds (no interval).
      power_largest_drop_max, power_largest_rise_max: the largest drop and rise at one
        instant in any draw (the maximum over the draws of each draw's largest), in
        ``power_unit``: the worst a draw showed (a rack outage's), which can lie far above
        the mean's CI.
    """

    groups: dict
    goodput: dict
    losses: dict
    gpu_hours_lost_per_day: dict
    gpus: dict
    writer_time: np.ndarray
    independent_writer_time: np.ndarray
    writers_p50: float
    writers_p99: float
    writers_max: int
    saturation_writers: int
    saturated_time: Estimate
    power_mean: Estimate
    power_max: Estimate
    power_largest_drop: Estimate
    power_largest_rise: Estimate
    power_edges: np.ndarray
    power_time: np.ndarray
    cap_time: Estimate | None
    throttled: Estimate
    throttled_gpu_hours_per_day: Estimate
    power_unit: str
    horizon: float
    hours_per_time_unit: float
    n_draws: int
    power_largest_drop_max: float = math.nan
    power_largest_rise_max: float = math.nan

    @property
    def writers_observed(self) -> bool:
        """Whether any draw observed the writer count: False where no draw had an observation
        window (`ckpt_jax.WriterStats.window`), and then the writer fields are NaN."""
        return self.writers_max >= 0

    def to_xarray(self, *, attrs=None):
        """The assessment as an `xarray.Dataset` (`ckpt_jax.labelled.assessment_dataset`):
        dimensions ``group`` (the groups, then ``"fleet"``), ``cause``, ``writers``, power
        ``bin``; each estimate as ``NAME_mean``, ``NAME_low`` and ``NAME_high``; the scalars
        and ``attrs`` (a dict) as attributes. Needs xarray (``pip install "ckpt_jax[xarray]"``)."""
        from .labelled import assessment_dataset

        return assessment_dataset(self, CAUSES, attrs=attrs)

    def to_json(self) -> dict:
        """The assessment as plain JSON types. Schema (every estimate is
        ``{"mean": float, "low": float, "high": float}``, a 95% CI over the draws; null
        where not observed, and a bound null where one draw alone gives it)::

            {
              "horizon": float,                  # H, the fleet's time unit
              "horizon_hours": float,
              "n_draws": int,
              "groups": {name: {"jobs": [int], "gpus": float}},
              "goodput": {name | "fleet": estimate},
              "lost_fraction": {name | "fleet": {cause: estimate}},
              "gpu_hours_lost_per_day": {name | "fleet": {cause: estimate}},
              "storage": {
                "writers_observed": bool,        # False: the writer fields are null (-1 max)
                "writer_time": [float | null],   # fraction of time at k = 0..N writers
                "independent_writer_time": [float],  # the same for independent phases
                "writers_p50": float | null, "writers_p99": float | null, "writers_max": int,
                "saturation_writers": int,
                "saturated_time": estimate | null,   # fraction of time
              },
              "power": {
                "unit": "W" | "gpu",
                "mean": estimate, "max": estimate,
                "largest_drop": estimate, "largest_rise": estimate,  # means over the draws
                "largest_drop_max": float | null,  # the largest in any draw
                "largest_rise_max": float | null,
                "edges": [float], "time": [float],   # the draw's distribution
                "cap_time": estimate | null,     # fraction of time at the cap
                "throttled": estimate,           # fraction of the fleet's GPU time
                "throttled_gpu_hours_per_day": estimate,
              },
            }

        Causes are `CAUSES`; the module docstring says what each counts.
        """

        def number(x):  # JSON has no NaN: null where a value was not observed
            return float(x) if math.isfinite(x) else None

        def est(e):
            if e is None or not math.isfinite(e.mean):
                return None
            return {"mean": e.mean, "low": number(e.low), "high": number(e.high)}

        def by_cause(table):
            return {name: {cause: est(e) for cause, e in causes.items()} for name, causes in table.items()}

        return {
            "horizon": self.horizon,
            "horizon_hours": self.horizon * self.hours_per_time_unit,
            "n_draws": self.n_draws,
            "groups": {name: {"jobs": list(jobs), "gpus": self.gpus[name]} for name, jobs in self.groups.items()},
            "goodput": {name: est(e) for name, e in self.goodput.items()},
            "lost_fraction": by_cause(self.losses),
            "gpu_hours_lost_per_day": by_cause(self.gpu_hours_lost_per_day),
            "storage": {
                "writers_observed": self.writers_observed,
                "writer_time": [number(x) for x in self.writer_time],
                "independent_writer_time": [float(x) for x in self.independent_writer_time],
                "writers_p50": number(self.writers_p50),
                "writers_p99": number(self.writers_p99),
                "writers_max": self.writers_max,
                "saturation_writers": self.saturation_writers,
                "saturated_time": est(self.saturated_time),
            },
            "power": {
                "unit": self.power_unit,
                "mean": est(self.power_mean),
                "max": est(self.power_max),
                "largest_drop": est(self.power_largest_drop),
                "largest_rise": est(self.power_largest_rise),
                "largest_drop_max": number(self.power_largest_drop_max),
                "largest_rise_max": number(self.power_largest_rise_max),
                "edges": [float(x) for x in self.power_edges],
                "time": [float(x) for x in self.power_time],
                "cap_time": est(self.cap_time),
                "throttled": est(self.throttled),
                "throttled_gpu_hours_per_day": est(self.throttled_gpu_hours_per_day),
            },
        }


def default_groups(fleet: Fleet) -> dict:
    """One group per distinct (compute, write, size) among the active jobs, named after them,
    in the order of their first job: name -> (job indices,)."""
    compute, write, size = (np.asarray(x, np.float64) for x in (fleet.compute, fleet.write, fleet.size))
    active = np.asarray(fleet.active)
    groups: dict = {}
    for i in np.flatnonzero(active):
        name = f"{size[i]:g} GPU{'s' if size[i] != 1 else ''}/job, compute {compute[i]:g}, write {write[i]:g}"
        groups.setdefault(name, []).append(int(i))
    return {name: tuple(jobs) for name, jobs in groups.items()}


def _positive(name, value) -> float:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.number)):
        raise ValueError(f"{name} must be a finite number > 0, got {value!r}")
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"{name} must be a finite number > 0, got {value!r}")
    return float(value)


def _check_span(name: str, fleet: Fleet, value: float, jitter) -> None:
    """The engine's checks of a run's end (`check_horizon`, `check_horizon_events`), named
    ``name`` (the argument given) rather than the engine's ``until``."""
    check_horizon(value, (), fleet.dtype, name=name)
    check_horizon_events(fleet, value, jitter, name=name)


def _check_groups(groups, fleet: Fleet) -> dict:
    if groups is None:
        return default_groups(fleet)
    if not isinstance(groups, dict) or not groups:
        raise ValueError(f"groups must be a non-empty dict of name -> job indices, got {groups!r}")
    active = np.asarray(fleet.active)
    checked = {}
    for name, jobs in groups.items():
        if not isinstance(name, str) or not name or name == "fleet":
            raise ValueError(f"groups: every name must be a non-empty string other than 'fleet', got {name!r}")
        try:
            indices = np.asarray(jobs)
        except (TypeError, ValueError):
            indices = None
        if indices is None or indices.ndim != 1 or indices.size == 0 or not np.issubdtype(indices.dtype, np.integer):
            raise ValueError(f"groups[{name!r}] must be a non-empty sequence of job indices, got {jobs!r}")
        if np.any((indices < 0) | (indices >= fleet.n_jobs)) or not np.all(active[indices]):
            raise ValueError(f"groups[{name!r}] must hold indices of active jobs in [0, {fleet.n_jobs}), got {jobs!r}")
        if np.unique(indices).size != indices.size:
            raise ValueError(f"groups[{name!r}] lists a job twice: {jobs!r}")
        checked[name] = tuple(int(i) for i in indices)
    return checked


def _time_split(fleet: Fleet, jobs, horizon: float) -> tuple[np.ndarray, dict]:
    """Per draw and job, (S, N) fractions of H: the steady-state goodput (useful work plus
    the work uncovered at H, docs/model.md §1c) and each cause (module docstring)."""
    zeros = np.zeros(np.shape(jobs.compute_time))
    as_array = lambda x: zeros if x is None else np.asarray(x, np.float64)  # noqa: E731
    write, wait, snapshot = as_array(jobs.write_time), as_array(jobs.wait_time), as_array(jobs.snapshot_time)
    down, lost = as_array(jobs.down_time), as_array(jobs.lost_work)
    goodput = (np.asarray(jobs.useful_work, np.float64) + as_array(jobs.uncovered_work)) / horizon
    alpha = float(np.asarray(fleet.async_fraction))
    if fleet.has_snapshots:
        checkpoint = snapshot
    elif alpha > 0:
        checkpoint = (1 - alpha) * (write - wait)
    else:
        checkpoint = write
    outage_lost, outage_down = as_array(jobs.outage_lost_work), as_array(jobs.outage_down_time)
    stagger = as_array(jobs.stagger_time)
    overhead = as_array(getattr(jobs, "overhead_time", None))
    causes = dict(checkpoint=checkpoint / horizon, overhead=overhead / horizon, backpressure=wait / horizon)
    causes["lost_work"] = (lost - outage_lost) / horizon
    causes["restart"] = (down - outage_down) / horizon
    causes["outages"] = (outage_lost + outage_down - stagger) / horizon
    causes["restart_stagger"] = stagger / horizon
    rest = 1 - goodput - sum(causes.values())
    # Without a cap the rest is rounding alone (~1e-16): 0 below ROUNDING_FLOOR, so that its
    # CI is not the logit interval of rounding noise.
    causes["throttling"] = np.where(np.abs(rest) < ROUNDING_FLOOR, 0.0, rest)
    return goodput, causes


def _independent_writers(writing) -> np.ndarray:
    """(N + 1,) the law of the number of jobs writing when job i writes with probability
    ``writing[i]``, independently (Poisson-binomial; padding slots write with probability 0)."""
    law = np.zeros(writing.size + 1)
    law[0] = 1.0
    for p in np.clip(writing, 0.0, 1.0):
        law[1:] = law[1:] * (1 - p) + law[:-1] * p
        law[0] *= 1 - p
    return law


def _saturation_writers(throughput: np.ndarray, write_limits: np.ndarray) -> int:
    """The least writer count k >= 1 from which f(n) stops growing (f(k) >= f(j) for every
    j > k) and at which any k writers can fill it (the k smallest write limits sum to f(k)
    at least: below that every writer drains at its own limit, docs/model.md §1d); N + 1
    where no count of the fleet's N slots does both. A curve still growing at N (f(N) >
    f(N - 1)) does not stop growing at N: the fleet merely ends there (``saturates_at =
    1000`` with 4 jobs), and no count saturates the storage."""
    n_jobs = throughput.size - 1
    limits = np.cumsum(np.sort(write_limits))  # the k smallest limits, k = 1..
    for k in range(1, n_jobs + 1):
        fills = k <= limits.size and limits[k - 1] >= throughput[k]
        stops = np.all(throughput[k + 1 :] <= throughput[k]) and (k < n_jobs or throughput[k] <= throughput[k - 1])
        if fills and stops:
            return k
    return n_jobs + 1


def _scaled(estimate: Estimate, factor: float) -> Estimate:
    """A share's estimate in other units (GPU-hours per day): its mean and bounds times ``factor``."""
    return Estimate(estimate.mean * factor, estimate.low * factor, estimate.high * factor)


def _weighted_percentile(counts: np.ndarray, weights: np.ndarray, q: float) -> float:
    """The least count whose cumulative weight reaches ``q`` (of the total)."""
    cumulative = np.cumsum(weights) / weights.sum()
    index = min(int(np.searchsorted(cumulative, q, side="left")), counts.size - 1)  # rounding at the top
    return float(counts[index])


def assess(
    fleet: Fleet,
    *,
    horizon,
    key,
    n_draws: int = 64,
    groups: dict | None = None,
    hours_per_time_unit=1.0,
    gpu_power=None,
    jitter=None,
    progress: bool | None = False,
    launch="random",
) -> Assessment:
    """Assess ``fleet`` as configured over [0, H]: ``n_draws`` independent failure draws, each
    from a random launch, run in one batch by the exact event loop.

    Args:
      fleet: a single `Fleet` (batch shape ()), its compute work T_i the intervals in use; a
        job's ``size`` counts its GPUs. ``mtbf`` may be None (no failures).
      horizon: H > 0, in the fleet's time unit.
      key: a PRNG key; draw s uses ``split(key, n_draws)[s]`` for its launch and failures.
      n_draws: the number of draws S >= 2 (the CIs need two).
      groups: name -> job indices (active jobs, none twice; groups may share jobs), or None
        for `default_groups`. ``"fleet"`` is reserved for the whole fleet.
      hours_per_time_unit: the length of the fleet's time unit in hours (> 0).
      gpu_power: watts per GPU at full speed (> 0), or None to leave the draw in GPUs.
      jitter: compute jitter σ, as for `ckpt_jax.simulate`.
      progress: a progress bar, as for `ckpt_jax.simulate` (None: only for long runs).
      launch: how every draw starts (docs/model.md §1f): ``"random"`` (default, from the
        draw's key), ``"synchronous"`` or a `ckpt_jax.design.Launch` (`ckpt_jax.design.start_state`).

    Returns:
      An `Assessment`.
    """
    if not isinstance(fleet, Fleet):
        raise ValueError(f"fleet must be a ckpt_jax.Fleet, got {type(fleet).__name__}")
    if fleet.batch_shape != ():
        raise ValueError(f"fleet must be a single fleet (batch shape ()), got batch shape {fleet.batch_shape}")
    horizon = _positive("horizon", horizon)
    _check_span("horizon", fleet, horizon, jitter)
    hours_per_time_unit = _positive("hours_per_time_unit", hours_per_time_unit)
    gpu_power = None if gpu_power is None else _positive("gpu_power", gpu_power)
    if isinstance(n_draws, (bool, np.bool_)) or not isinstance(n_draws, (int, np.integer)) or n_draws < 2:
        raise ValueError(f"n_draws must be an int >= 2, got {n_draws!r}")
    n_draws = int(n_draws)
    groups = _check_groups(groups, fleet)
    launch = check_launch(launch)
    keys = jax.random.split(check_key(key), n_draws)

    sizes = np.where(np.asarray(fleet.active), np.asarray(fleet.size, np.float64), 0.0)
    out, edges = _run_draws(fleet, horizon, keys, jitter, progress, launch)

    scale = gpu_power if gpu_power is not None else 1.0
    time_fields, causes = _by_group(fleet, out.jobs, groups, horizon, sizes)
    assessment = Assessment(
        **time_fields,
        **_writer_fields(fleet, out, horizon),
        **_power_fields(fleet, out, horizon, edges * scale, scale, causes["checkpoint"] @ sizes),
        power_unit="W" if gpu_power is not None else "gpu",
        horizon=horizon,
        hours_per_time_unit=hours_per_time_unit,
        n_draws=n_draws,
    )
    return _as_one_draw(assessment) if _same_runs(out) else assessment


def _same_runs(out) -> bool:
    """Whether every draw of a run recorded the same (a replayed trace and a fixed launch:
    nothing drawn at random), NaN equal to NaN: its draws are then one draw."""
    return _equal_across_draws(
        leaf for stats in (out.jobs, out.writers, out.power) for leaf in jax.tree_util.tree_leaves(stats)
    )


def _equal_across_draws(arrays) -> bool:
    """Whether each of ``arrays`` (draws on the leading axis) is the same in every draw, bit
    for bit, NaN equal to NaN."""
    for leaf in arrays:
        x = np.asarray(leaf)
        if x.ndim == 0 or x.shape[0] < 2:
            continue
        same = x == x[:1]
        if np.issubdtype(x.dtype, np.floating):
            same |= np.isnan(x) & np.isnan(x[:1])
        if not np.all(same):
            return False
    return True


def _as_one_draw(assessment: Assessment) -> Assessment:
    """``assessment`` with every `Estimate` without an interval (NaN bounds, null in its JSON):
    identical draws are one draw, and a zero-width interval would read as certainty."""

    def strip(value):
        if isinstance(value, Estimate):
            return Estimate(value.mean, math.nan, math.nan)
        if isinstance(value, dict):
            return {key: strip(x) for key, x in value.items()}
        return value

    return assessment._replace(**{name: strip(getattr(assessment, name)) for name in assessment._fields})


def _run_draws(
    fleet: Fleet, horizon: float, keys, jitter, progress, launch: str | Launch = "random", paired: bool = False
) -> tuple:
    """One batched run of ``fleet`` over the draws ``keys`` (each its own launch, as
    ``launch`` says, and failures) to ``horizon``, recording the jobs, the writers and the power draw; and the
    power histogram's bin edges (in GPUs). ``paired``: a random launch drawn in work
    coordinates (`ckpt_jax.design.paired_random_state`, `compare`'s scenarios)."""
    n_draws, n_jobs = len(keys), fleet.n_jobs
    batched = _batched(fleet, np.broadcast_to(np.asarray(fleet.compute, np.float64), (n_draws, n_jobs)))
    sizes = np.where(np.asarray(fleet.active), np.asarray(fleet.size, np.float64), 0.0)
    full_draw = float(sizes.sum())
    cap = float(np.asarray(fleet.cap))
    edges = np.linspace(0.0, full_draw, _POWER_BINS + 1)
    if math.isfinite(cap) and 0 < cap * _AT_CAP < full_draw:
        edges = np.unique(np.append(edges, cap * _AT_CAP))
    state = paired_random_state(batched, keys) if paired and launch == "random" else start_state(batched, launch, keys)
    out = simulate(
        batched,
        state,
        None,
        until=horizon,
        key=keys,
        jitter=jitter,
        throw=True,
        progress=progress,
        save=SaveAt(trace=False, jobs=True, writers=True, power=True, power_bins=tuple(edges)),
    )
    assert out.jobs is not None and out.writers is not None and out.power is not None
    return out, edges


def _by_group(fleet: Fleet, jobs, groups: dict, horizon: float, sizes: np.ndarray) -> tuple[dict, dict]:
    """Each group's (and the fleet's) GPUs, goodput and losses by cause (shares and GPU-hours
    per day), as `Assessment` fields; and the (S, N) shares by cause (0 on padding slots)."""
    # Padding slots (``active`` False) may hold NaN: they are masked out, never weighted by 0.
    active = np.asarray(fleet.active)
    goodput, causes = _time_split(fleet, jobs, horizon)
    goodput = np.where(active, goodput, 0.0)
    causes = {cause: np.where(active, value, 0.0) for cause, value in causes.items()}
    members = dict(groups, fleet=tuple(int(i) for i in np.flatnonzero(active)))
    gpus, goodput_by, losses, per_day = {}, {}, {}, {}
    for name, members_of in members.items():
        weight = np.zeros(fleet.n_jobs)
        weight[list(members_of)] = sizes[list(members_of)]
        gpus[name] = float(weight.sum())
        weight = weight / gpus[name]
        goodput_by[name] = share_ci(goodput @ weight)
        losses[name] = {cause: share_ci(causes[cause] @ weight) for cause in CAUSES}
        per_day[name] = {cause: _scaled(losses[name][cause], gpus[name] * 24.0) for cause in CAUSES}
    fields = dict(groups=groups, goodput=goodput_by, losses=losses, gpu_hours_lost_per_day=per_day, gpus=gpus)
    return fields, causes


def _writer_fields(fleet: Fleet, out, horizon: float) -> dict:
    """The writer count's `Assessment` fields, from the run's `WriterStats` (pooled)."""
    writers = out.writers
    writer_time = np.asarray(writers.time, np.float64)  # (S, N + 1)
    window = np.asarray(writers.window, np.float64)
    length = window[:, 1] - window[:, 0]
    pooled = np.nansum(writer_time, axis=0)
    counts = np.arange(fleet.n_jobs + 1)
    active = np.asarray(fleet.active)
    throughput = np.asarray(fleet.throughput, np.float64)
    saturation = _saturation_writers(throughput, np.asarray(fleet.write_limit, np.float64)[active])
    saturated = np.where(length > 0, writer_time[:, saturation:].sum(axis=1) / length, np.nan)
    writing = np.where(active, np.asarray(out.jobs.write_time, np.float64), 0.0).mean(axis=0) / horizon
    if not pooled.sum() > 0:
        # No draw had an observation window (`Assessment.writers_observed`): the writer count
        # is not observed, and everything else of the assessment stands.
        nan = float("nan")
        return dict(
            writer_time=np.full(fleet.n_jobs + 1, nan),
            independent_writer_time=_independent_writers(writing),
            writers_p50=nan,
            writers_p99=nan,
            writers_max=-1,
            saturation_writers=int(saturation),
            saturated_time=Estimate(nan, nan, nan),
        )
    return dict(
        writer_time=pooled / pooled.sum(),
        independent_writer_time=_independent_writers(writing),
        writers_p50=_weighted_percentile(counts, pooled, 0.5),
        writers_p99=_weighted_percentile(counts, pooled, 0.99),
        writers_max=int(np.max(np.asarray(writers.max))),
        saturation_writers=int(saturation),
        saturated_time=share_ci(saturated[np.isfinite(saturated)]),
    )


def _largest(samples) -> float:
    """The maximum over the draws a value was observed in (NaN: none)."""
    samples = np.asarray(samples, np.float64)
    samples = samples[np.isfinite(samples)]
    return float(samples.max()) if samples.size else math.nan


def _power_fields(fleet: Fleet, out, horizon: float, edges: np.ndarray, scale: float, stalled) -> dict:
    """The power draw's `Assessment` fields, from the run's `PowerStats` (``edges`` already
    in the reported unit, ``scale`` per GPU); ``stalled``: (S,) the checkpoint stalls in GPU
    time per unit time (counted apart from the throttling with α > 0)."""
    power = out.power
    sizes = np.where(np.asarray(fleet.active), np.asarray(fleet.size, np.float64), 0.0)
    full_draw = float(sizes.sum())
    cap = float(np.asarray(fleet.cap))
    power_time = np.asarray(power.time, np.float64).sum(axis=0)
    cap_time = None
    if math.isfinite(cap):
        at_cap = np.asarray(power.edges, np.float64)[0, :-1] >= cap * _AT_CAP
        cap_time = share_ci(np.asarray(power.time, np.float64)[:, at_cap].sum(axis=1) / horizon)
    # The fleet's work done from its draw (module docstring), as a fraction of its GPU time.
    compute_time = np.where(np.asarray(fleet.active), np.asarray(out.jobs.compute_time, np.float64), 0.0) @ sizes
    idle = float(np.asarray(fleet.idle_power))
    work = np.asarray(power.mean, np.float64) * horizon - idle * (full_draw * horizon - compute_time)
    throttled = (compute_time - work) / (full_draw * horizon)
    if not fleet.has_snapshots and float(np.asarray(fleet.async_fraction)) > 0:
        # Computing at α while draining is counted as a checkpoint stall already.
        throttled = throttled - stalled / full_draw
    return dict(
        power_mean=mean_ci(np.asarray(power.mean, np.float64) * scale),
        power_max=mean_ci(np.asarray(power.max, np.float64) * scale),
        power_largest_drop=mean_ci(np.asarray(power.largest_drop, np.float64) * scale),
        power_largest_rise=mean_ci(np.asarray(power.largest_rise, np.float64) * scale),
        power_largest_drop_max=_largest(np.asarray(power.largest_drop, np.float64) * scale),
        power_largest_rise_max=_largest(np.asarray(power.largest_rise, np.float64) * scale),
        power_edges=edges,
        power_time=power_time / power_time.sum(),
        cap_time=cap_time,
        throttled=mean_ci(throttled),
        throttled_gpu_hours_per_day=mean_ci(throttled * full_draw * 24.0),
    )


# -- one fleet over time ---------------------------------------------------------------


class Timeline(NamedTuple):
    """The writer count and the power draw of one fleet over [0, span], piecewise constant.

    Attributes:
      start: (n,) the start of each interval of positive length, increasing; the last one
        ends at ``span``.
      writers: (n,) int writers during each interval.
      draw: (n,) the fleet's power draw during each interval, in ``power_unit``.
      power_unit: ``"W"`` where ``gpu_power`` was given, else ``"gpu"``.
      span: the end of the window, in the fleet's time unit.
      hours_per_time_unit: the length of the fleet's time unit in hours.
    """

    start: np.ndarray
    writers: np.ndarray
    draw: np.ndarray
    power_unit: str
    span: float
    hours_per_time_unit: float


class _Intervals(Observer):
    """Records every interval of positive length: its start, its writer count and the draw,
    into buffers of ``capacity`` entries; ``overflow`` where more came."""

    name = "intervals"

    def __init__(self, capacity: int):
        self.capacity = capacity

    def init(self, info):
        buffer = jnp.full((info.n_fleets, self.capacity), jnp.nan, info.dtype)
        return dict(
            count=jnp.zeros(info.n_fleets, jnp.int32),
            start=buffer,
            draw=buffer,
            writers=jnp.full((info.n_fleets, self.capacity), -1, jnp.int32),
        )

    def update(self, state, view):
        # A lane that did not run, or an iteration at the same instant, records nothing; a
        # full buffer keeps counting (the overflow) and writes nowhere (index out of range).
        record = view.running & (view.dt > 0)
        count = state["count"]
        index = jnp.where(record, count, self.capacity)[:, None]

        def put(buffer, value):
            value = value[:, None].astype(buffer.dtype)
            return jnp.put_along_axis(buffer, index, value, axis=1, inplace=False, mode="drop")

        return dict(
            count=count + record.astype(jnp.int32),
            start=put(state["start"], view.time - view.dt),
            draw=put(state["draw"], view.draw),
            writers=put(state["writers"], view.n_writers),
        )

    def finalize(self, state, final):
        return state


def timeline(
    fleet: Fleet,
    *,
    span,
    key,
    hours_per_time_unit=1.0,
    gpu_power=None,
    jitter=None,
    capacity: int | None = None,
    launch="random",
) -> Timeline:
    """The writer count and the power draw of ``fleet`` over [0, ``span``], from one random
    launch and one failure draw (the first of `assess`'s draws with the same ``key``).

    Args:
      fleet: a single `Fleet` (batch shape ()).
      span: the window's end, in the fleet's time unit (for one day: 24 / hours_per_time_unit).
      key: a PRNG key, as for `assess`.
      hours_per_time_unit, gpu_power, jitter, launch: as for `assess`.
      capacity: the most intervals recorded (None: sized from the run: twice `Fleet.events`
        for ``span`` and 64, and where the run has more, once more with as many as it had).

    Returns:
      A `Timeline`. Raises ValueError where the fleet has more intervals than a ``capacity``
      given.
    """
    if not isinstance(fleet, Fleet) or fleet.batch_shape != ():
        raise ValueError("fleet must be a single ckpt_jax.Fleet (batch shape ())")
    span = _positive("span", span)
    _check_span("span", fleet, span, jitter)
    hours_per_time_unit = _positive("hours_per_time_unit", hours_per_time_unit)
    gpu_power = None if gpu_power is None else _positive("gpu_power", gpu_power)
    launch = check_launch(launch)
    sized = capacity is None  # sized from the run: an estimate first, then the count it had
    if capacity is None:
        capacity = 2 * int(np.max(np.asarray(fleet.events(span)))) + 64
    if isinstance(capacity, (bool, np.bool_)) or not isinstance(capacity, (int, np.integer)) or capacity < 1:
        raise ValueError(f"capacity must be an int >= 1 or None, got {capacity!r}")
    keys = jax.random.split(check_key(key), 2)[:1]
    batched = _batched(fleet, np.asarray(fleet.compute, np.float64)[None])
    recorded = _record_intervals(batched, keys, span, jitter, int(capacity), launch)
    count = int(recorded["count"])
    if count > capacity and sized:  # the estimate fell short (failures while down): rerun, sized
        capacity = count
        recorded = _record_intervals(batched, keys, span, jitter, capacity, launch)
        count = int(recorded["count"])
    if count > capacity:
        raise ValueError(f"capacity={capacity} is too small: the fleet has {count} intervals up to span={span}")
    scale = gpu_power if gpu_power is not None else 1.0
    return Timeline(
        start=recorded["start"][:count].astype(np.float64),
        writers=recorded["writers"][:count],
        draw=recorded["draw"][:count].astype(np.float64) * scale,
        power_unit="W" if gpu_power is not None else "gpu",
        span=span,
        hours_per_time_unit=hours_per_time_unit,
    )


def _record_intervals(
    batched: Fleet, keys, span: float, jitter, capacity: int, launch: str | Launch = "random"
) -> dict:
    """One run of ``batched`` (one fleet) to ``span``, its intervals recorded (`_Intervals`)."""
    out = simulate(
        batched,
        start_state(batched, launch, keys),
        None,
        until=span,
        key=keys,
        jitter=jitter,
        throw=True,
        progress=False,
        save=SaveAt(trace=False, power=True, observers=(_Intervals(capacity),)),
    )
    assert out.observed is not None  # recorded: SaveAt(observers=...)
    return jax.tree_util.tree_map(lambda x: np.asarray(x)[0], out.observed["intervals"])


class OutageStorms(NamedTuple):
    """The checkpoint storm after each outage of one run (docs/model.md §1f, claim 14), from
    the writer count of `timeline`.

    Attributes:
      times, domains: (K,) each outage's instant and domain (the outages before the span).
      period: P, the cycle: the longest solo period of the fleet's jobs (`Fleet.period`).
      before: (K,) the writer-count peak over the cycle before the outage, [t − P, t).
      peaks: (K, C) the writer-count peak over each of the C cycles after it,
        [t + cP, t + (c + 1)P) (NaN past the span).
      storm_cycles: (K,) how many cycles in a row, from the first whose peak exceeds
        ``before``, stay above it: 0 where none exceeds it; where every one after that first
        stays above, to the window's end, ``recovered`` is False.
      recovered: (K,) bool the peak came back to ``before`` or below within the C cycles
        (True where it never exceeded it).
      timeline: the run's `Timeline`.
    """

    times: np.ndarray
    domains: np.ndarray
    period: float
    before: np.ndarray
    peaks: np.ndarray
    storm_cycles: np.ndarray
    recovered: np.ndarray
    timeline: Timeline


def _peak(timeline: Timeline, low: float, high: float) -> float:
    """The largest writer count over [low, high) of a piecewise-constant timeline (NaN where
    the window leaves [0, span])."""
    if low < 0 or high > timeline.span or not high > low:
        return math.nan
    ends = np.append(timeline.start[1:], timeline.span)
    overlap = (timeline.start < high) & (ends > low)
    return float(np.max(timeline.writers[overlap], initial=0))


def outage_storms(fleet: Fleet, *, span, key, n_cycles: int = 8, jitter=None, capacity: int | None = None):
    """The writer-count peak per cycle over the ``n_cycles`` cycles after each outage of one
    run of ``fleet`` over [0, ``span``] (the run of `timeline` with the same ``key``), against
    the peak of the cycle before it, and how many cycles the fleet takes to get back below it
    (docs/model.md §1f, claim 14). ``fleet``: a single `Fleet` with outages. Returns an
    `OutageStorms`."""
    if not isinstance(fleet, Fleet) or fleet.batch_shape != ():
        raise ValueError("fleet must be a single ckpt_jax.Fleet (batch shape ())")
    if not fleet.has_outages:
        raise ValueError("fleet has no outages (Fleet(outage_mtbf=...) or outage_times): no storm to report")
    if isinstance(n_cycles, (bool, np.bool_)) or not isinstance(n_cycles, (int, np.integer)) or n_cycles < 1:
        raise ValueError(f"n_cycles must be an int >= 1, got {n_cycles!r}")
    line = timeline(fleet, span=span, key=key, jitter=jitter, capacity=capacity)
    keys = jax.random.split(check_key(key), 2)[:1]  # the timeline's run
    batched = _batched(fleet, np.asarray(fleet.compute, np.float64)[None])
    rows = outage_instants(batched, line.span, key=keys)
    assert rows is not None  # the fleet has outages
    rows = rows[0][np.isfinite(rows[0, :, 0])]
    period = float(np.max(np.asarray(fleet.period, np.float64)[np.asarray(fleet.active)]))
    times, domains = rows[:, 0], rows[:, 1].astype(np.int64)
    before = np.array([_peak(line, t - period, t) for t in times])
    peaks = np.array([[_peak(line, t + c * period, t + (c + 1) * period) for c in range(n_cycles)] for t in times])
    peaks = peaks.reshape(len(times), n_cycles)
    storm = np.zeros(len(times), np.int64)
    recovered = np.ones(len(times), bool)
    for k in range(len(times)):
        above = peaks[k] > before[k]  # NaN (past the span) is not above
        if not above.any():
            continue
        first = int(np.argmax(above))
        below = np.nonzero(~above[first:] & np.isfinite(peaks[k, first:]))[0]
        storm[k] = below[0] if below.size else int(np.sum(above[first:]))
        recovered[k] = below.size > 0
    return OutageStorms(times, domains, period, before, peaks, storm, recovered, line)


# -- what-if comparisons on common draws -----------------------------------------------

BASELINE = "baseline"
STATISTICS = ("mean", "low", "high")
# What `compare` keeps of each draw of a scenario: name -> (dimensions past the draw).
_DRAW_FIELDS = ("goodput", "gpu_hours_per_day", "power_step", "writers_peak")
SCENARIO_DIR = "scenarios"  # `compare`'s store of finished scenarios, under ``out``


def compare(
    spec,
    scenarios: dict,
    *,
    key,
    horizon=None,
    n_draws: int = 32,
    out=None,
    progress: bool = False,
    floor: float = FLOOR,
):
    """What-if scenarios of a fleet file against it as it is, on common draws.

    Each scenario is the file with some of its keys set to other values (`FleetSpec.override`:
    parsed and checked exactly as the file, so a bad one raises the file's own error naming
    the key, before anything runs). Every scenario runs the same ``n_draws`` draws as the
    baseline (the same keys: the same failure streams, and the same random launch drawn in
    work coordinates, `ckpt_jax.design.paired_random_state`, so that a job the scenario
    leaves as it is starts with the same work left in every scenario, whatever the scenario
    does to the storage; common random numbers), so each difference against the baseline is
    paired per draw and its 95 % CI is that of the mean of the per-draw differences: far
    narrower than the difference of two independent estimates.

    A difference is an effect (``*_significant``) where its CI excludes 0 *and* it exceeds
    the practical floor ``floor``, a share of the fleet's GPU time (default
    `ckpt_jax._estimate.FLOOR`, 0.01 %): for GPU-hours per day floor × the baseline's GPUs ×
    24 (``floor_gpu_hours_per_day``), for a group's goodput the same GPU-hours as a share of
    the group's GPUs, for the power step floor × the fleet's full draw; the writer peak
    counts whole writers and has no floor. Where every draw of the baseline and of a
    scenario is the same (a replayed trace and a fixed launch: ``one_draw``), there is one
    draw and no interval (NaN bounds), and the difference, exact, counts against the floor
    alone.

    Args:
      spec: a `ckpt_jax.fleetfile.FleetSpec` read by ``fleetfile.load`` (or ``loads``).
      scenarios: name -> {key: value} overrides (``{"fast storage": {"storage.peak": "4
        TB/s"}}``); the name ``"baseline"`` is the file as it is, always the first.
      key: a PRNG key; draw s uses ``split(key, n_draws)[s]``, as `assess` does.
      horizon: H in the engine's time (seconds in a file with units); None: the file's
        ``[design].horizon``.
      n_draws: draws S >= 2 per scenario.
      out: None, or a folder where each finished scenario is stored (``scenarios/``, under
        the folder's lock, `ckpt_jax.ensemble.locked`): a rerun with the same inputs loads it
        rather than running it again, so an interrupted comparison resumes.
      progress: a progress bar over the scenarios.
      floor: the practical floor in [0, 1), a share of the fleet's GPU time (above).

    Returns:
      An `xarray.Dataset` with dimensions ``scenario`` (``"baseline"`` first), ``group``
      (the file's groups, then ``"fleet"``), ``statistic`` (mean, low, high: a 95 % CI) and
      ``draw``: ``goodput`` and ``gpu_hours_per_day`` (GPU-hours of saved work per day:
      goodput × GPUs × 24) per scenario and group; ``power_step`` (the largest step of the
      draw at one instant, up or down: its estimate is the mean over the draws of each draw's
      largest) and ``writers_peak`` (the most concurrent writers) per scenario; each with its
      ``*_difference`` against the baseline (paired per draw) and ``*_significant`` (an effect:
      the difference's CI excludes 0 and it exceeds the floor); the per-draw values ``*_draws``;
      ``power_step_max`` per scenario, the largest step in any draw (the maximum over the
      draws); ``gpus`` per scenario and group; ``overrides`` (JSON text),
      ``same_configuration`` (the scenario is the baseline's fleet, parsed: the same run) and
      ``one_draw`` (every draw of it and of the baseline the same) per scenario. Its
      attributes: ``reused`` lists (JSON text) the scenarios loaded from ``out``; ``floor`` and
      ``floor_gpu_hours_per_day``.
    """
    import json

    from .labelled import require_xarray

    require_xarray()
    specs = _scenario_specs(spec, scenarios)
    horizon = spec.design.horizon if horizon is None else _positive("horizon", horizon)
    if isinstance(n_draws, (bool, np.bool_)) or not isinstance(n_draws, (int, np.integer)) or n_draws < 2:
        raise ValueError(f"n_draws must be an int >= 2, got {n_draws!r}")
    n_draws = int(n_draws)
    floor = check_floor(floor)
    keys = jax.random.split(check_key(key), n_draws)
    fleets = {}
    for name, scenario in specs.items():  # every check before any run
        fleets[name] = scenario.fleet(dtype=np.dtype(scenario.dtype))
        try:
            _check_span("horizon", fleets[name], horizon, None)
        except ValueError as err:
            raise ValueError(f"scenario {name!r}: {err}") from None
    draws, reused, same = _run_scenarios(specs, fleets, horizon, keys, out, progress)
    dataset = _comparison_dataset(spec, specs, scenarios, draws, horizon, floor, same)
    return dataset.assign_attrs(reused=json.dumps(reused))


def _run_scenarios(specs: dict, fleets: dict, horizon: float, keys, out, progress: bool) -> tuple:
    """Each scenario's draws (`_scenario_draws`), those stored in ``out`` by an earlier run
    loaded rather than run; the names of those loaded; and per scenario whether it is the
    baseline's configuration (its fingerprint, `_fingerprint`, is the baseline's)."""
    fingerprints = {name: _fingerprint(scenario, horizon, keys) for name, scenario in specs.items()}
    draws, reused = {}, []
    with _store(out) as store:
        # Reused: stored by an earlier run (a scenario equal to another of this run shares its file).
        earlier = set() if store is None else {path.name for path in store.glob("*.json")}
        bar = _scenario_bar(len(specs), progress)
        try:
            for name, scenario in specs.items():
                if bar is not None:
                    bar.set_postfix_str(name[:40])
                stored = _stored(store, fingerprints[name], len(keys))
                if stored is not None:
                    draws[name] = stored
                    if f"{fingerprints[name][:32]}.json" in earlier:
                        reused.append(name)
                else:
                    draws[name] = _scenario_draws(scenario, fleets[name], horizon, keys)
                    _store_scenario(store, fingerprints[name], draws[name])
                if bar is not None:
                    bar.update()
        finally:
            if bar is not None:
                bar.close()
    same = {name: fingerprints[name] == fingerprints[BASELINE] for name in specs}
    return draws, reused, same


def check_scenario_keys(name: str, overrides: dict) -> None:
    """Refuses a scenario's key that a comparison would ignore: the ``[design]`` table's
    (every scenario runs the same horizon and draws, `compare`'s ``horizon``, ``n_draws`` and
    ``key``), which would make the scenario the baseline again, silently."""
    for key in overrides:
        if isinstance(key, str) and (key == "design" or key.startswith("design.")):
            raise ValueError(
                f"scenario {name!r}: override {key}: the [design] table sets how a run is made, the same for every "
                "scenario (horizon, n_draws, key: ckpt-jax compare's --horizon, --draws, --seed), not the fleet"
            )


def _scenario_specs(spec, scenarios) -> dict:
    """name -> the scenario's `FleetSpec`, the baseline first; every override checked."""
    if not hasattr(spec, "override") or getattr(spec, "source", None) is None:
        raise ValueError("spec must be a FleetSpec read by ckpt_jax.fleetfile.load or loads")
    if not isinstance(scenarios, dict):
        raise ValueError(f"scenarios must be a dict of name -> {{key: value}}, got {type(scenarios).__name__}")
    specs = {BASELINE: spec}
    for name, overrides in scenarios.items():
        if not isinstance(name, str) or not name.strip() or name == BASELINE:
            raise ValueError(f"scenarios: every name must be a non-empty string other than {BASELINE!r}, got {name!r}")
        if not isinstance(overrides, dict):
            raise ValueError(f"scenarios[{name!r}] must be a dict of key -> value, got {type(overrides).__name__}")
        check_scenario_keys(name, overrides)
        specs[name] = spec.override(overrides, name=name)
        if specs[name].names != spec.names:  # the comparison is per group
            raise ValueError(f"scenario {name!r}: its groups {specs[name].names} are not the file's {spec.names}")
    return specs


def _scenario_bar(total: int, progress: bool):
    if not progress:
        return None
    from ._progress import progress_bar

    return progress_bar(total=total, desc="scenarios", unit="scenario")


def _scenario_draws(spec, fleet: Fleet, horizon: float, keys) -> dict:
    """Per draw of one scenario: goodput and GPU-hours per day of saved work per group and
    for the fleet (S, G + 1), the largest power step (S,) and the writer peak (S,)."""
    out, _ = _run_draws(fleet, horizon, keys, None, False, check_launch(spec.launch_of()), paired=True)
    goodput, _ = _time_split(fleet, out.jobs, horizon)
    active = np.asarray(fleet.active)
    sizes = np.where(active, np.asarray(fleet.size, np.float64), 0.0)
    goodput = np.where(active, goodput, 0.0)
    labels = np.asarray(spec.labels)
    weights = np.stack([np.where(labels == g, sizes, 0.0) for g in range(len(spec.groups))] + [sizes], axis=1)
    gpus = weights.sum(axis=0)  # (G + 1,)
    useful = goodput @ weights  # (S, G + 1) GPU time of saved work per unit time
    scale = spec.power_per_gpu if spec.power_per_gpu is not None else 1.0
    power = out.power
    step = np.maximum(np.asarray(power.largest_drop, np.float64), np.asarray(power.largest_rise, np.float64))
    peak = np.asarray(out.writers.max, np.float64)
    return {
        "goodput": useful / gpus,
        "gpu_hours_per_day": useful * 24.0,
        "power_step": step * scale,
        "writers_peak": np.where(peak >= 0, peak, np.nan),  # -1: not observed in that draw
        "gpus": gpus,
    }


def _fingerprint(spec, horizon: float, keys) -> str:
    """What a scenario's draws are a result of: the fleet as parsed (a failure trace by its
    contents, the instants read from it, not by its path), the horizon, the keys, the launch
    drawn in work coordinates, the dtype and the package version."""
    import hashlib

    from ._manifest import canonical
    from ._version import __version__

    fleet = {k: v for k, v in spec.to_dict().items() if k not in ("path", "failure_trace")}
    if spec.failure_times is not None:  # an edited trace at the same path is another scenario
        fleet["failure_times"] = [[float(t) for t in times] for times in spec.failure_times]
    fields = {
        "launch": "paired_random_state",
        "fleet": fleet,
        "horizon": horizon,
        "keys": np.asarray(jax.random.key_data(keys)).tolist(),
        "dtype": spec.dtype,
        "version": __version__,
        "fields": _DRAW_FIELDS,
    }
    return hashlib.sha256(canonical(fields).encode()).hexdigest()


class _store:
    """``out``'s lock and its ``scenarios/`` folder (None: nothing stored)."""

    def __init__(self, out):
        self.out = None if out is None else Path(out)
        self._lock = None

    def __enter__(self):
        if self.out is None:
            return None
        from .ensemble import locked

        self._lock = locked(self.out)
        self._lock.__enter__()
        (self.out / SCENARIO_DIR).mkdir(exist_ok=True)
        return self.out / SCENARIO_DIR

    def __exit__(self, *exc):
        if self._lock is not None:
            self._lock.__exit__(*exc)
        return False


def _stored(store, fingerprint: str, n_draws: int) -> dict | None:
    """A finished scenario's draws from ``store`` (None where absent, unreadable or not of
    these inputs: run again)."""
    if store is None:
        return None
    import json

    path = store / f"{fingerprint[:32]}.json"
    if not path.is_file():
        return None
    try:
        saved = json.loads(path.read_text(encoding="utf-8"))
        if saved.get("fingerprint") != fingerprint:
            return None
        if saved.get("sha256") != _draws_hash(saved["draws"]):  # edited since it was stored: not trusted
            import warnings

            warnings.warn(f"{path}: its draws do not match their hash (edited?): run again", stacklevel=2)
            return None
        draws = {name: np.asarray(saved["draws"][name], np.float64) for name in (*_DRAW_FIELDS, "gpus")}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    if any(draws[name].shape[0] != n_draws for name in _DRAW_FIELDS):
        return None
    return draws


def _store_scenario(store, fingerprint: str, draws: dict) -> None:
    if store is None:
        return
    import json

    from ._io import atomic_write_bytes

    as_lists = {name: np.where(np.isfinite(x), x, np.nan).tolist() for name, x in draws.items()}
    # NaN as NaN: Python's json reads it back. The hash of the draws refuses a file edited since.
    text = json.dumps({"fingerprint": fingerprint, "sha256": _draws_hash(as_lists), "draws": as_lists})
    atomic_write_bytes(store / f"{fingerprint[:32]}.json", text.encode())


def _draws_hash(draws) -> str:
    """The SHA-256 of a stored scenario's draws (lists of floats, as JSON writes them)."""
    import hashlib
    import json

    return hashlib.sha256(json.dumps(draws, sort_keys=True).encode()).hexdigest()


def paired_difference(scenario, baseline) -> Estimate:
    """The mean of ``scenario - baseline`` over the draws both observed (NaN in either:
    left out), with its 95 % CI: the two arrays are paired, draw by draw."""
    difference = np.asarray(scenario, np.float64) - np.asarray(baseline, np.float64)
    difference = difference[np.isfinite(difference)]
    if difference.size == 0:
        return Estimate(math.nan, math.nan, math.nan)
    return mean_ci(difference)


def _finite_ci(samples, share: bool = False) -> Estimate:
    samples = np.asarray(samples, np.float64)
    samples = samples[np.isfinite(samples)]
    if samples.size == 0:
        return Estimate(math.nan, math.nan, math.nan)
    return share_ci(samples) if share else mean_ci(samples)


def _identical_draws(draws: dict) -> bool:
    """Whether every draw of a scenario gave the same numbers (a replayed trace and a fixed
    launch: nothing random), NaN (not observed) equal to NaN."""
    return _equal_across_draws(np.asarray(draws[field], np.float64) for field in _DRAW_FIELDS)


def _one_draw(estimate: Estimate) -> Estimate:
    """An estimate of identical draws: its mean, no interval (the draws are one draw)."""
    return Estimate(estimate.mean, math.nan, math.nan)


def _comparison_dataset(
    spec, specs: dict, scenarios: dict, draws: dict, horizon: float, floor: float = FLOOR, same: dict | None = None
):
    """`compare`'s `xarray.Dataset` from each scenario's draws; ``floor`` (a share of the
    fleet's GPU time) and ``same`` (name -> the baseline's configuration) as `compare`'s."""
    import json

    import xarray as xr

    names = list(specs)
    groups = [*spec.names, "fleet"]
    base = draws[BASELINE]
    same = {name: name == BASELINE for name in names} if same is None else same
    identical = {name: _identical_draws(draws[name]) for name in names}
    one_draw = {name: identical[name] and identical[BASELINE] for name in names}
    # The floor of each field's differences, in its own unit (per group where it has groups).
    gpus = np.asarray(base["gpus"], np.float64)  # (G + 1,), the fleet last
    scale = spec.power_per_gpu if spec.power_per_gpu is not None else 1.0
    with np.errstate(divide="ignore", invalid="ignore"):
        floors = {
            "goodput": np.where(gpus > 0, floor * gpus[-1] / gpus, math.inf),
            "gpu_hours_per_day": np.full(len(groups), floor * gpus[-1] * 24.0),
            "power_step": np.asarray([floor * gpus[-1] * scale]),
            "writers_peak": np.asarray([0.0]),
        }
    variables = {}
    for field in _DRAW_FIELDS:
        per_group = base[field].ndim == 2
        dims = ("scenario", "group", "statistic") if per_group else ("scenario", "statistic")
        value, difference, significant = [], [], []
        for name in names:
            columns = range(len(groups)) if per_group else [None]
            pick = lambda x, c: x if c is None else x[:, c]  # noqa: E731
            values = [_finite_ci(pick(draws[name][field], c), field == "goodput") for c in columns]
            changes = [paired_difference(pick(draws[name][field], c), pick(base[field], c)) for c in columns]
            if identical[name]:
                values = [_one_draw(v) for v in values]
            if one_draw[name]:
                changes = [_one_draw(d) for d in changes]
            value.append(values)
            difference.append(changes)
            significant.append(
                [
                    not same[name] and effect(d, float(f), exact=one_draw[name]) != 0
                    for d, f in zip(changes, floors[field])
                ]
            )
        value, difference = np.asarray(value, np.float64), np.asarray(difference, np.float64)
        significant = np.asarray(significant, bool)
        if not per_group:
            value, difference, significant = value[:, 0], difference[:, 0], significant[:, 0]
        draw_dims = ("scenario", "draw", "group") if per_group else ("scenario", "draw")
        variables[field] = (dims, value)
        variables[f"{field}_difference"] = (dims, difference)
        variables[f"{field}_significant"] = (dims[:-1], significant)
        variables[f"{field}_draws"] = (draw_dims, np.stack([draws[name][field] for name in names]))
    # The largest power step in any draw, beside power_step's mean over the draws of each draw's largest.
    variables["power_step_max"] = (("scenario",), np.array([_largest(draws[name]["power_step"]) for name in names]))
    variables["gpus"] = (("scenario", "group"), np.stack([draws[name]["gpus"] for name in names]))
    overrides = [json.dumps({}) if name == BASELINE else json.dumps(scenarios[name], default=str) for name in names]
    variables["overrides"] = (("scenario",), np.asarray(overrides, dtype=object))
    variables["same_configuration"] = (("scenario",), np.asarray([bool(same[name]) for name in names]))
    variables["one_draw"] = (("scenario",), np.asarray([bool(one_draw[name]) for name in names]))
    hours_per_time_unit = 1 / 3600 if spec.time_unit is not None else 1.0
    attrs = {
        "fleet_file": str(spec.path),
        "baseline": BASELINE,
        "n_draws": int(base["goodput"].shape[0]),
        "horizon": float(horizon),
        "horizon_hours": float(horizon) * hours_per_time_unit,
        "power_unit": "W" if spec.power_per_gpu is not None else "gpu",
        "time_unit": spec.time_unit or "",
        "floor": float(floor),
        "floor_gpu_hours_per_day": float(floor * gpus[-1] * 24.0),
    }
    return xr.Dataset(
        variables,
        coords={
            "scenario": names,
            "group": groups,
            "statistic": list(STATISTICS),
            "draw": np.arange(base["goodput"].shape[0]),
        },
        attrs=attrs,
    )


# -- sensitivities: paired central differences -------------------------------------------


def _quantity_text(value: float, base: str, time_unit: str) -> str:
    """``value`` (in ``base``: s, B or B/s) as a fleet file writes it, to 12 significant digits
    (it is read back), in a unit where the number lies in [1, 1000) and needs the fewest of
    them: a time in the file's time unit or in day, h, min or s ("11 min", not
    "0.183333333333 h"), a size or bandwidth with an SI prefix ("7.15 TB", "2.2 TB/s"); of units
    that do as well, the file's time unit first, then the larger."""
    from ._units import duration_unit

    if value == 0:
        return f"0 {time_unit if base == 's' else base}"
    if base == "s":
        units = [(time_unit, duration_unit(time_unit))]
        units += [(name, size) for name, size in (("day", 86400.0), ("h", 3600.0), ("min", 60.0), ("s", 1.0))]
    else:
        prefixes = ("E", "P", "T", "G", "M", "k", "")  # the larger first
        units = [(prefix + base, 1000.0 ** (len(prefixes) - 1 - k)) for k, prefix in enumerate(prefixes)]

    def choice(unit):
        index, (name, size) = unit
        shown = value / size
        mantissa = f"{shown:.12g}".split("e")[0].lstrip("-").replace(".", "").strip("0")
        return (not 1 <= abs(shown) < 1000, len(mantissa), index)

    _, (name, size) = min(enumerate(units), key=choice)
    return f"{value / size:.12g} {name}"


def sensitivity_knobs(spec, step: float = 0.1) -> dict:
    """The continuous knobs of a fleet file, each as two scenarios of `compare`: every value
    of the knob times 1 + ``step`` and times 1 − ``step``.

    The knobs: the storage's peak bandwidth (its ``peak``, or every entry of its table or of
    a listed ``throughput``; a preset has none), each group's checkpoint interval (the one in
    use: the file's, else Young's), and for every group at once its checkpoint size, write
    limit, restart, MTBF, snapshot and fixed checkpoint overhead (docs/model.md §1g; those the
    file has, and non-zero somewhere); with ``[[outages]]`` drawn, their MTBF (every table at
    once) and the restart stagger (where it is not 0), and the power cap where one is set
    (docs/model.md §1d, §1f). A knob that changes nothing on the file is left out
    (`sensitivity_left_out` says why): the MTBF where the file replays its failures
    (``failure_trace``), the outage MTBF where it replays its outages.

    Returns:
      knob name -> (overrides ×(1 + step), overrides ×(1 − step)), in the file's keys.
    """
    if not (isinstance(step, (int, float)) and 0 < step < 1):
        raise ValueError(f"step must be a number in (0, 1), got {step!r}")
    units = spec.time_unit is not None
    first = np.searchsorted(spec.labels, np.arange(len(spec.groups)))

    def value(x: float, base: str | None):  # as the file would hold it: with a unit in a file with units
        return _quantity_text(float(x), base, spec.time_unit) if units and base is not None else float(x)

    def scaled(keys_values: dict, base: str, factor: float) -> dict:
        return {
            key: [value(v * factor, base) for v in x] if isinstance(x, list) else value(x * factor, base)
            for key, x in keys_values.items()
        }

    knobs: dict = {}
    storage = (spec.source or {}).get("storage")
    peak = None
    if isinstance(storage, dict) and "peak" in storage:
        peak = {"storage.peak": float(max(spec.throughput))}
    elif isinstance(storage, dict):
        peak = {"storage.table": [float(x) for x in spec.throughput[: len(storage.get("table", []))]]}
    elif not isinstance(spec.throughput, str):
        peak = {"throughput": [float(x) for x in spec.throughput]}
    if peak is not None:
        knobs["storage peak"] = (peak, "B/s")
    intervals = spec.intervals()[first]
    for g, group in enumerate(spec.groups):
        knobs[f"interval of {group.name}"] = ({f"groups[{g}].compute": float(intervals[g])}, "s")
    left_out = sensitivity_left_out(spec)
    for knob, field, base in (
        ("checkpoint size", "write", "B"),
        ("write limit", "write_limit", "B/s"),
        ("restart", "restart", "s"),
        ("MTBF", "mtbf", "s"),
        ("snapshot", "snapshot", "s"),
        ("overhead", "overhead", "s"),
    ):
        if knob in left_out:
            continue
        values = {
            f"groups[{g}].{field}": float(getattr(group, field))
            for g, group in enumerate(spec.groups)
            if getattr(group, field) is not None and getattr(group, field) > 0
        }
        if values:
            knobs[knob] = (values, base)
    drawn = {f"outages[{i}].mtbf": float(o.mtbf) for i, o in enumerate(spec.outages) if o.mtbf is not None}
    if drawn and "outage MTBF" not in left_out:
        knobs["outage MTBF"] = (drawn, "s")
    if spec.outages and "restart stagger" not in left_out:
        knobs["restart stagger"] = ({"restart_stagger": float(spec.restart_stagger)}, "s")
    if spec.cap is not None:  # a plain cap counts GPUs' draw, in a file with units too
        knobs["power cap"] = ({"cap": float(spec.cap)}, None)
    return {
        name: (scaled(values, base, 1 + step), scaled(values, base, 1 - step)) for name, (values, base) in knobs.items()
    }


def sensitivity_left_out(spec) -> dict:
    """{knob: why} of the knobs `sensitivity_knobs` leaves out because ±10 % of them changes
    nothing on this fleet file: the MTBF where the file replays its failures (``failure_trace``),
    the outage MTBF where its ``[[outages]]`` replay listed times, and the restart stagger where
    it is 0 (with outages)."""
    left_out = {}
    if spec.failure_trace is not None:
        left_out["MTBF"] = (
            "the file replays its failures (failure_trace): a change of MTBF moves no failure (it sets only "
            "Young's intervals and the design's bounds)"
        )
    if spec.outages and all(outage.mtbf is None for outage in spec.outages):
        left_out["outage MTBF"] = "the file's [[outages]] replay listed times: they have no MTBF to change"
    if spec.outages and spec.restart_stagger == 0:
        left_out["restart stagger"] = (
            "restart_stagger is 0, and ±10 % of 0 is 0 (try --sweep restart_stagger=... for its effect)"
        )
    return left_out


def sensitivity(
    spec,
    *,
    key,
    step: float = 0.1,
    horizon=None,
    n_draws: int = 32,
    out=None,
    progress: bool = False,
    floor: float = FLOOR,
):
    """The elasticity of the fleet's goodput to each continuous knob of a fleet file
    (`sensitivity_knobs`), by paired central differences on common draws.

    Each knob is run at ×(1 ± ``step``) on the baseline's draws (`compare`); per draw, the
    elasticity is (G₊ − G₋) / (2 · step · Ḡ), with G the fleet's goodput and Ḡ the
    baseline's mean: the % change of the goodput per % change of the knob. A central
    difference has an error of order step² (against step for a one-sided one), and on
    common draws the noise of the two runs mostly cancels, so a few draws rank the knobs.

    A knob is an effect (``elasticity_significant``) where the elasticity's CI excludes 0 and
    the goodput moves by more than ``floor`` between its two ends (|G₊ − G₋| > floor, as
    `compare`'s floor); each end's GPU-hours per day, where its CI excludes 0 and it exceeds
    `compare`'s ``floor_gpu_hours_per_day`` (``gpu_hours_per_day_up_significant``, ``_down_``).

    Args:
      spec, key, horizon, n_draws, out, progress, floor: as `compare`.
      step: the relative change, in (0, 1).

    Returns:
      `compare`'s `xarray.Dataset` (scenarios ``"KNOB +10%"`` and ``"KNOB -10%"``), with a
      ``knob`` dimension, ranked by |elasticity| (largest first): ``elasticity`` (knob,
      statistic), ``gpu_hours_per_day_up`` and ``gpu_hours_per_day_down`` (knob, statistic:
      the fleet's GPU-hours of saved work per day gained at ×(1 + step) and at ×(1 − step),
      paired against the baseline), their ``*_significant`` (knob) and ``knob_overrides``
      (JSON text of the + scenario).
    """
    import json

    knobs = sensitivity_knobs(spec, step)
    percent = f"{100 * step:g}%"
    scenarios = {}
    for knob, (up, down) in knobs.items():
        scenarios[f"{knob} +{percent}"] = up
        scenarios[f"{knob} -{percent}"] = down
    ds = compare(spec, scenarios, key=key, horizon=horizon, n_draws=n_draws, out=out, progress=progress, floor=floor)
    fleet = ds["goodput_draws"].sel(group="fleet").values  # (scenario, draw)
    names = list(ds["scenario"].values)
    mean_goodput = float(np.mean(fleet[0]))
    rows = []
    one_draw = ds["one_draw"].values
    for knob in knobs:
        up, down = names.index(f"{knob} +{percent}"), names.index(f"{knob} -{percent}")
        exact = bool(one_draw[up] and one_draw[down])
        elasticity = paired_difference(fleet[up] / (2 * step * mean_goodput), fleet[down] / (2 * step * mean_goodput))
        if exact:
            elasticity = _one_draw(elasticity)
        gained = [ds["gpu_hours_per_day_difference"].sel(group="fleet").values[i] for i in (up, down)]
        rows.append(
            (
                knob,
                elasticity,
                Estimate(*gained[0]),
                Estimate(*gained[1]),
                json.dumps(knobs[knob][0]),
                effect(elasticity, floor / (2 * step * mean_goodput) if mean_goodput > 0 else math.inf, exact=exact)
                != 0,
                bool(ds["gpu_hours_per_day_significant"].sel(group="fleet").values[up]),
                bool(ds["gpu_hours_per_day_significant"].sel(group="fleet").values[down]),
            )
        )
    rows.sort(key=lambda row: -abs(row[1].mean) if math.isfinite(row[1].mean) else 0.0)
    return (
        ds.assign(
            elasticity=(("knob", "statistic"), np.asarray([row[1] for row in rows], np.float64)),
            gpu_hours_per_day_up=(("knob", "statistic"), np.asarray([row[2] for row in rows], np.float64)),
            gpu_hours_per_day_down=(("knob", "statistic"), np.asarray([row[3] for row in rows], np.float64)),
            knob_overrides=(("knob",), np.asarray([row[4] for row in rows], dtype=object)),
            elasticity_significant=(("knob",), np.asarray([row[5] for row in rows], bool)),
            gpu_hours_per_day_up_significant=(("knob",), np.asarray([row[6] for row in rows], bool)),
            gpu_hours_per_day_down_significant=(("knob",), np.asarray([row[7] for row in rows], bool)),
        )
        .assign_coords(knob=[row[0] for row in rows])
        .assign_attrs(step=float(step))
    )
