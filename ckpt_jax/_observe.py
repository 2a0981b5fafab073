"""What a run records: `SaveAt` and the observers, accumulated inside the event loop.

diffrax's ``SaveAt`` picks what an ODE solve stores; here `SaveAt` picks what `simulate`
stores. The full trace (``trace=True``) is a (B, N, K) buffer per field; the observers
keep only the statistics they need, so an ensemble of 10^6 fleets fits where its trace
would not:

* ``writers`` — `WriterStats`: time spent with exactly k writers, entries into n_w >= k
  and the largest n_w, on the observation window (`WriterStats.window`);
* ``gaps`` — (B, K) smallest phase gap per cycle (`ckpt_jax.smallest_gap` of the trace);
* ``jobs`` — `JobStats`: per job, time writing, time computing, completed writes, and the
  work accounting of docs/model.md §1c (useful and lost work, failures, time down, waste).

Every loop (general, FIFO, clock) describes each iteration by an `EventView` and the
driver (`ckpt_jax._loops.driver`) calls ``update`` of each observer. An observer is an
`Observer`: three pure functions over batched arrays (leading axis B), ``init(info)``
(buffers sized once, before the loop, from the run's `LoopInfo`), ``update(state, view)``
and ``finalize(state, final) -> output``. The three built-in observers are written with
that same interface; a user's observer is one more such class, passed to
``SaveAt(observers=...)``, and its output is ``trace.observed[observer.name]``.

The window: from the instant every active job has fired once (before that, a write in
progress at t = 0 hides in the state) to the instant the first job ends the write started
by its K-th firing, or to the horizon ``until``: exactly `analysis.observed_interval` of
the same run's trace.
"""

from __future__ import annotations

import dataclasses
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

__all__ = [
    "SaveAt",
    "Observer",
    "LoopInfo",
    "WriterStats",
    "JobStats",
    "PowerStats",
    "EventView",
    "FinalView",
    "job_order",
    "observers_of",
    "finalize",
]


class LoopInfo(NamedTuple):
    """What an observer is told about the run it observes, before the loop (static, hashable).

    Attributes:
      n_fleets: B, the fleets of the block the loop runs (the observer's leading axis).
      n_jobs: N, job slots per fleet.
      dtype: the fleets' float dtype.
      stop_fires: the K whose first write end closes the observation window (None: the
        horizon ``until`` closes it).
      gap_fires: the cycles K the trace (and the gaps observer) keeps.
      one_switch: the loop switches one job per iteration (the FIFO and clock loops: every
        `EventView` has one column, M = 1); else every job due at an instant switches in
        one iteration (M = N columns, the general loop).
      ordered: the jobs fire in one fixed cyclic order (the FIFO loop, claim 3).
      abandons: a write can end without completing (failures, docs/model.md §1c).
    """

    n_fleets: int
    n_jobs: int
    dtype: Any
    stop_fires: int | None = None
    gap_fires: int | None = None
    one_switch: bool = False
    ordered: bool = False
    abandons: bool = False


class Observer:
    """The observer interface of `SaveAt` (diffrax's ``SubSaveAt(fn=...)``, for event loops).

    An observer accumulates a statistic inside the event loop, so nothing of size (N, K) has
    to be stored to compute it. Subclass it and define ``name`` (the key of its output in
    ``Trace.observed``) and three pure functions over batched arrays (leading axis B, the
    fleets of one loop):

    * ``init(info: LoopInfo) -> state``: the state before the first event (a pytree of
      arrays sized once: they cannot grow inside the loop);
    * ``update(state, view: EventView) -> state``: once per loop iteration; lanes with
      ``view.running`` False did nothing in it and must leave their state unchanged;
    * ``finalize(state, final: FinalView) -> output``: a pytree of (B, ...) arrays.

    Instances must be hashable (they are part of the static `SaveAt`; the default identity
    hash will do). `WritersObserver`, `GapsObserver` and `JobsObserver` (``SaveAt(writers=,
    gaps=, jobs=)``) are written with this interface; docs/guide/observers.md has a user's
    observer in ten lines.
    """

    name: str = ""

    def init(self, info: LoopInfo):
        raise NotImplementedError

    def update(self, state, view: EventView):
        raise NotImplementedError

    def finalize(self, state, final: FinalView):
        raise NotImplementedError


BUILT_IN = ("writers", "gaps", "jobs", "power")

# The power observer's default: this many equal bins over [0, W], W the fleet's full draw.
POWER_BINS = 50
# ... and steps larger than this fraction of W are counted (`PowerStats.n_steps`).
POWER_THRESHOLD = 0.1
# A step of the draw smaller than this many ulps of W is rounding, not a change (`PowerStats.n_changes`).
CHANGE_ULPS = 64


@dataclasses.dataclass(frozen=True)
class SaveAt:
    """What `simulate` records (diffrax's ``SaveAt``, for event loops).

    Args:
      trace: the (B, N, K) ``fire_times`` / ``end_times`` buffers (default True).
      writers: `WriterStats` of the writer count n_w on the observation window.
      gaps: (B, K) smallest phase gap per cycle, as `ckpt_jax.analysis.smallest_gap` of the trace.
      jobs: `JobStats`: per job, time writing, time computing, completed writes.
      power: `PowerStats` of the fleet's power draw P(t) (docs/model.md §1d): its
        time-weighted distribution, mean, extremes and its steps at event instants. Runs
        on the general engine (``method="auto"`` sends the fleets there).
      power_bins: the bins of `PowerStats.time`: None (`POWER_BINS` equal bins over
        [0, W], W the fleet's full draw Σ w_i), an int n >= 1 (n equal bins over [0, W]),
        or an increasing sequence of at least two finite edges, in units of one job's
        full-speed draw (the same for every fleet).
      power_threshold: the step size above which `PowerStats.n_steps` counts a step, in
        the units of the draw (>= 0); None: `POWER_THRESHOLD` · W.
      observers: a tuple of user observers (`Observer`), each accumulated inside the loop;
        their outputs are ``trace.observed[observer.name]``.
    """

    trace: bool = True
    writers: bool = False
    gaps: bool = False
    jobs: bool = False
    power: bool = False
    power_bins: int | tuple | None = None
    power_threshold: float | None = None
    observers: tuple = ()

    def __post_init__(self):
        for name in ("trace",) + BUILT_IN:
            value = getattr(self, name)
            if not isinstance(value, (bool, np.bool_)):
                raise ValueError(f"SaveAt.{name} must be True or False, got {value!r}")
        object.__setattr__(self, "power_bins", _power_bins(self.power_bins))
        threshold = self.power_threshold
        if threshold is not None:
            if isinstance(threshold, (bool, np.bool_)) or not isinstance(threshold, (int, float, np.number)):
                raise ValueError(f"SaveAt.power_threshold must be a number >= 0 or None, got {threshold!r}")
            if not (np.isfinite(threshold) and threshold >= 0):
                raise ValueError(f"SaveAt.power_threshold must be finite and >= 0, got {threshold!r}")
            object.__setattr__(self, "power_threshold", float(threshold))
        if isinstance(self.observers, Observer) or not isinstance(self.observers, (tuple, list)):
            raise ValueError(f"SaveAt.observers must be a tuple of ckpt_jax.Observer, got {self.observers!r}")
        object.__setattr__(self, "observers", tuple(self.observers))
        names: set[str] = set(BUILT_IN)
        for observer in self.observers:
            if not isinstance(observer, Observer):
                raise ValueError(f"SaveAt.observers must hold ckpt_jax.Observer instances, got {observer!r}")
            if not isinstance(observer.name, str) or not observer.name or observer.name in names:
                raise ValueError(
                    f"every observer needs its own non-empty name (not one of {sorted(names)}), got {observer.name!r}"
                )
            names.add(observer.name)

    @property
    def any_observer(self) -> bool:
        return self.writers or self.gaps or self.jobs or self.power or bool(self.observers)

    def flags(self) -> dict:
        """The built-in choices, ``{"trace": ..., "writers": ..., "gaps": ..., "jobs": ...}``
        (what an ensemble's manifest records; ``power`` where it is on)."""
        names = ("trace",) + tuple(name for name in BUILT_IN if name != "power" or self.power)
        return {name: getattr(self, name) for name in names}


def _power_bins(bins):
    """`SaveAt.power_bins` checked: None, an int >= 1, or a tuple of increasing finite edges."""
    if bins is None:
        return None
    if isinstance(bins, (int, np.integer)) and not isinstance(bins, (bool, np.bool_)):
        if bins < 1:
            raise ValueError(f"SaveAt.power_bins must be an int >= 1 or increasing edges, got {bins!r}")
        return int(bins)
    try:
        edges = np.asarray(bins, np.float64)
    except (TypeError, ValueError):
        edges = None
    if edges is None or edges.ndim != 1 or edges.size < 2:
        raise ValueError(f"SaveAt.power_bins must be an int >= 1 or a 1-D sequence of >= 2 edges, got {bins!r}")
    if not (np.all(np.isfinite(edges)) and np.all(np.diff(edges) > 0)):
        raise ValueError(f"SaveAt.power_bins edges must be finite and strictly increasing, got {bins!r}")
    return tuple(float(e) for e in edges)


class WriterStats(NamedTuple):
    """The writer count n_w(t) on the observation window, per fleet.

    Attributes:
      time: (*B, N + 1) time spent with exactly k writers inside ``window``.
      window: (*B, 2) the window [t_start, t_stop] (`analysis.observed_interval`).
      excursions: (*B, N + 1) entries into n_w >= k inside the window (level k = 0 never).
      max: (*B,) largest n_w on the window (-1 if the window is empty).
    """

    time: jax.Array
    window: jax.Array
    excursions: jax.Array
    max: jax.Array

    def to_xarray(self, fleet=None, *, groups=None, batch_dims=None, attrs=None):
        """These statistics as an `xarray.Dataset` of ``writers_{field}`` variables, as in
        `Trace.to_xarray` (which see for the arguments). They are per fleet, with no ``job``
        dimension: per-job ``groups`` labels are refused (ValueError), a parsed fleet file is
        taken for its units. Needs ``pip install "ckpt_jax[xarray]"``."""
        from . import labelled

        return labelled.stats_dataset(self, "writers", fleet=fleet, groups=groups, batch_dims=batch_dims, attrs=attrs)


class PowerStats(NamedTuple):
    """The fleet's power draw P(t) over the whole run [0, stop time] (docs/model.md §1d), in
    units of one job's full-speed draw (the units of the cap C).

    P is piecewise constant between events: a computing job draws w_i times its compute
    rate, every other job of the fleet (snapshot, waiting, blocking write, down)
    p_idle · w_i. A step is the change of P across one event instant: P on the interval
    after it less P on the interval before it (instants between which no time passes are
    one instant).

    Attributes:
      time: (*B, n) time spent with P in each bin [e_k, e_{k+1}) (the last bin closed).
      edges: (*B, n + 1) the bin edges (`SaveAt.power_bins`).
      mean: (*B,) ∫ P dt over the stop time.
      max, min: (*B,) the largest and smallest P on an interval of positive length.
      largest_drop, largest_rise: (*B,) the largest decrease and increase of P at one
        instant (>= 0; 0 where P never fell / rose).
      n_steps: (*B,) instants where |ΔP| > ``threshold``.
      n_changes: (*B,) instants where P changed (by more than 64 ulps of W: the same draw
        summed over other jobs, as when a binding cap keeps it at C, can differ by rounding).
      threshold: (*B,) the threshold used (`SaveAt.power_threshold`).
      full_draw: (*B,) W = Σ w_i of the active jobs (their draw when all compute at full speed).
    """

    time: jax.Array
    edges: jax.Array
    mean: jax.Array
    max: jax.Array
    min: jax.Array
    largest_drop: jax.Array
    largest_rise: jax.Array
    n_steps: jax.Array
    n_changes: jax.Array
    threshold: jax.Array
    full_draw: jax.Array

    def to_xarray(self, fleet=None, *, groups=None, batch_dims=None, attrs=None):
        """These statistics as an `xarray.Dataset` of ``power_{field}`` variables, as in
        `Trace.to_xarray` (which see for the arguments). They are per fleet, with no ``job``
        dimension: per-job ``groups`` labels are refused (ValueError), a parsed fleet file is
        taken for its units. Needs ``pip install "ckpt_jax[xarray]"``."""
        from . import labelled

        return labelled.stats_dataset(self, "power", fleet=fleet, groups=groups, batch_dims=batch_dims, attrs=attrs)


class JobStats(NamedTuple):
    """Per job, over the whole run [0, stop time].

    Attributes:
      write_time: (*B, N) time spent writing (draining a checkpoint), abandoned writes
        included.
      compute_time: (*B, N) time spent computing (with α > 0 this overlaps writing).
      writes: (*B, N) writes completed that a firing after t = 0 started.
      useful_work: (*B, N) compute work saved by a completed write (docs/model.md §1c);
        work done before t = 0 counts nowhere. NaN on the fast paths with jitter.
      lost_work: (*B, N) compute work lost to failures.
      failures: (*B, N) number of failures (-1 where the run did not complete).
      down_time: (*B, N) time spent restarting after failures.
      waste: (*B, N) the steady-state waste over the horizon H of ``until`` (NaN without),
        docs/model.md §1c: 1 − (useful_work + uncovered_work) / H, i.e. one less the compute
        work done before H net of the work failures took, over H. Nothing fails at H, so
        the work not yet covered there is not lost; its remaining bias is second order
        (the share of that work a later failure would take, ~T²/(M·H)).
      covered_waste: (*B, N) 1 − useful_work / H (NaN without ``until``): the waste that
        counts the work uncovered at H as lost, as if the job failed there. Biased high by
        about T/(2H); minimised over T it behaves as if the failure rate were 1/M + 1/H.
      uncovered_work: (*B, N) compute work done since t = 0 that at the stop no checkpoint
        covers and no failure took: what a failure at the stop would lose (the write in
        progress' work, with two-level checkpoints every cycle whose drain has not ended
        or under ``recover_from="memory"`` whose snapshot has not ended, and the current
        phase's progress). useful + lost + uncovered work = compute work done since t = 0.
        Exact on every path; NaN where ``useful_work`` is.
      completed_write_time: (*B, N) time spent in the writes counted in ``writes``, each
        from its firing to its end: ``completed_write_time / writes`` is the mean duration
        of a completed write, without the writes abandoned by a failure, the one open at
        the stop, or one in progress at t = 0 (which ``write_time`` all include). With
        two-level checkpoints a write is the drain, from the snapshot's end to the drain's end.
      snapshot_time: (*B, N) time spent taking the blocking snapshots of two-level
        checkpoints (docs/model.md §1d; 0 without).
      wait_time: (*B, N) time spent waiting on backpressure: the next checkpoint was due
        while the previous drain still ran (two-level checkpoints, or α > 0).
      persisted_work: (*B, N) compute work covered by a checkpoint whose drain ended. The
        useful work, except with ``recover_from="memory"``, where useful work counts at
        the snapshot.
      outage_failures: (*B, N) the failures among ``failures`` that common-cause outages
        caused (docs/model.md §1f; 0 without outages). ``failures`` counts every failure,
        the job's own and the outages'.
      stagger_time: (*B, N) the time down for the restart stagger (docs/model.md §1f): the
        extra k·Δ of each outage's restart, within ``down_time`` (0 without outages).
      outage_lost_work, outage_down_time: (*B, N) the part of ``lost_work`` and of
        ``down_time`` (restart, stagger, recovery read) due to outages (0 without outages).
      overhead_time: (*B, N) time spent in the fixed overheads of checkpoints (docs/model.md
        §1g; 0 without): blocked, neither computing nor writing. ``write_time`` and
        ``completed_write_time`` do not include it.

    Per job, compute + write + down + overhead time (+ waiting time with α > 0, where compute and
    write overlap; + snapshot and waiting time with two-level checkpoints, where compute
    and drain overlap) is the stop time.
    """

    write_time: jax.Array
    compute_time: jax.Array
    writes: jax.Array
    useful_work: jax.Array | None = None
    lost_work: jax.Array | None = None
    failures: jax.Array | None = None
    down_time: jax.Array | None = None
    waste: jax.Array | None = None
    completed_write_time: jax.Array | None = None
    snapshot_time: jax.Array | None = None
    wait_time: jax.Array | None = None
    persisted_work: jax.Array | None = None
    outage_failures: jax.Array | None = None
    stagger_time: jax.Array | None = None
    outage_lost_work: jax.Array | None = None
    outage_down_time: jax.Array | None = None
    covered_waste: jax.Array | None = None
    uncovered_work: jax.Array | None = None
    overhead_time: jax.Array | None = None

    def to_xarray(self, fleet=None, *, groups=None, batch_dims=None, attrs=None):
        """These statistics as an `xarray.Dataset` of ``jobs_{field}`` variables, as in
        `Trace.to_xarray` (which see for the arguments). Needs ``pip install "ckpt_jax[xarray]"``."""
        from . import labelled

        return labelled.stats_dataset(self, "jobs", fleet=fleet, groups=groups, batch_dims=batch_dims, attrs=attrs)


class EventView(NamedTuple):
    """One loop iteration, as observers see it (batched, leading axis B).

    An iteration covers an interval of constant rates [time − dt, time) followed by the
    switches at ``time``. The general engine switches every due job in one iteration
    (M = N columns); the fast paths switch one job per iteration (M = 1), and several
    iterations can share one instant (``advanced`` is False for all but the first).

    Attributes:
      time: (B,) the instant of the switches.
      dt: (B,) length of the interval before it (0 where time did not advance).
      advanced: (B,) time advanced in this iteration (a new instant began).
      running: (B,) the lane did anything at all.
      n_writers: (B,) int writers during the interval.
      n_writers_after: (B,) int writers after the switches.
      fired, ended: (B, M) bool: a firing / a write end at ``time``.
      recorded_end: (B, M) bool, ended and that write was started by a firing after t = 0.
      job: (B, M) int job index of each column.
      cycle: (B, M) int, where fired, the cycle of that firing (0-based fire count).
      draining, waiting: (B, N) bool during the interval (general engine only, else None;
        ``waiting`` is None, too, where no fleet checkpoints asynchronously).
      first_fires: (B,) int jobs that fired for the first time at ``time``.
      last_ends: (B,) int jobs that ended the write of their K-th firing at ``time``.
      n_active: (B,) int active jobs of the fleet.
      slot: (B, M) int, or None where it is ``job``: a key of each column's job that is
        fixed for the run, in the loop's own layout (the FIFO loop's ring position).
        `FinalView.slot_position` maps jobs to slots. An observer that scatters into
        per-job rows every iteration may key them by slot and put them in job order once,
        after the loop (`job_order`): on the FIFO loop that saves a gather per iteration
        (the jobs observer: 7% of a run with all three observers).
      snapping: (B, N) bool, taking the snapshot of a two-level checkpoint during the
        interval (docs/model.md §1d; general engine only, else None).
      overhead: (B, N) bool, spending the fixed overhead of a checkpoint during the interval
        (docs/model.md §1g; general engine only, where a fleet has one, else None).
      draw: (B,) the fleet's power draw P during the interval, where the run observes it
        (``SaveAt(power=True)``, general engine only), else None.
      full_draw: (B,) W = Σ of the active jobs' sizes (the full draw), with ``draw``.
    """

    time: jax.Array
    dt: jax.Array
    advanced: jax.Array
    running: jax.Array
    n_writers: jax.Array
    n_writers_after: jax.Array
    fired: jax.Array
    ended: jax.Array
    recorded_end: jax.Array
    job: jax.Array
    cycle: jax.Array
    draining: jax.Array | None
    waiting: jax.Array | None
    first_fires: jax.Array
    last_ends: jax.Array
    n_active: jax.Array
    slot: jax.Array | None = None
    snapping: jax.Array | None = None
    draw: jax.Array | None = None
    full_draw: jax.Array | None = None
    overhead: jax.Array | None = None


class FinalView(NamedTuple):
    """The state after the loop, for ``finalize`` (batched, job order)."""

    time: jax.Array  # (B,) stop time
    async_fraction: jax.Array  # (B,)
    active: jax.Array  # (B, N)
    horizon: jax.Array | None  # (B,) or None
    n_writers: jax.Array  # (B,) writers at the stop
    fire_count: jax.Array | None = None  # (B, N) int firings since t = 0 (the gaps observer's fullness)
    writes: jax.Array | None = None  # (B, N) int completed writes, where the loop knows them
    writing: jax.Array | None = None  # (B, N) bool writing at the stop (the jobs observer's open writes)
    slot_position: jax.Array | None = None  # (B, N) slot of each job (`EventView.slot`; None: slots are jobs)
    # The general engine's work accounting (docs/model.md §1c), else None.
    useful_work: jax.Array | None = None  # (B, N) compute work saved by a completed write
    # (B, N) compute work done that no checkpoint covers at the stop (`JobStats.uncovered_work`)
    uncovered_work: jax.Array | None = None
    lost_work: jax.Array | None = None  # (B, N) compute work lost to failures
    failures: jax.Array | None = None  # (B, N) int failures
    down_time: jax.Array | None = None  # (B, N) time spent restarting
    # docs/model.md §1d: (B, N) work whose checkpoint's drain ended, where it differs from
    # the useful work (two-level checkpoints recovered from memory), else None.
    persisted_work: jax.Array | None = None
    # docs/model.md §1f: (B, N) failures by outages and time down for the stagger, or None.
    outage_failures: jax.Array | None = None
    stagger_time: jax.Array | None = None
    outage_lost_work: jax.Array | None = None
    outage_down_time: jax.Array | None = None
    ok: jax.Array | None = None  # (B,) bool the run completed (`Trace.ok`), set before ``finalize``
    # (B, N) work left in each job's current compute phase at the stop (the whole next phase
    # for a job in a blocking write); the fast paths' uncovered work is derived from it
    # (`ckpt_jax._simulate.fast_useful_work`).
    compute_left: jax.Array | None = None


def row_reductions(*terms):
    """Per row of (B, M) arrays, several reductions in one pass (a variadic
    `jax.lax.reduce`; on XLA:CPU each separate reduction is one more pass over the batch).
    ``terms``: ``(values, "sum" | "min")`` pairs; returns one (B,) array per term."""
    values = tuple(v for v, _ in terms)
    kinds = tuple(k for _, k in terms)
    init = tuple(
        jnp.zeros((), v.dtype)
        if k == "sum"
        else jnp.array(jnp.iinfo(v.dtype).max if jnp.issubdtype(v.dtype, jnp.integer) else jnp.inf, v.dtype)
        for v, k in terms
    )

    def combine(a, b):
        return tuple(x + y if k == "sum" else jnp.minimum(x, y) for x, y, k in zip(a, b, kinds))

    return jax.lax.reduce(values, init, combine, (1,))


def job_order(per_slot, position):
    """(B, N, ...) rows kept per slot (`EventView.slot`), in job order: job j's row is the
    one at its slot ``position[b, j]`` (`FinalView.slot_position`; None: the slots are the
    jobs)."""
    if position is None:
        return per_slot
    index = position.reshape(position.shape + (1,) * (per_slot.ndim - 2))
    return jnp.take_along_axis(per_slot, index, axis=1)


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class Bound:
    """A built-in observer's loop state: its arrays, and the `LoopInfo` of the loop they
    were sized for (static). The observers read the loop's facts (one switch per iteration,
    a fixed firing order, abandoned writes) from here, not from flags of their own."""

    arrays: dict
    info: LoopInfo = dataclasses.field(metadata=dict(static=True))


def _window_state(n_fleets, dtype):
    # Shared by the window-based observers: counters that open and close the window.
    return dict(
        n_fired=jnp.zeros(n_fleets, jnp.int32),
        t_start=jnp.full(n_fleets, jnp.nan, dtype),
        t_stop=jnp.full(n_fleets, jnp.nan, dtype),
    )


class _Window:
    """Opens when every active job has fired once, closes at the first K-th write end.

    ``open_before`` is whether the window was open for the interval before this
    iteration's switches (and for an instant's rises: open strictly before the instant).
    """

    @staticmethod
    def init(n_fleets, dtype):
        return _window_state(n_fleets, dtype)

    @staticmethod
    def update(state, view: EventView, has_stop: bool):
        n_active = view.n_active
        # t_stop is set (not NaN) from the iteration of the first K-th write end on.
        open_before = (state["n_fired"] >= n_active) & (jnp.isnan(state["t_stop"]) | (not has_stop))
        n_fired = state["n_fired"] + jnp.where(view.running, view.first_fires, 0)
        opens = jnp.isnan(state["t_start"]) & (n_fired >= n_active)
        closes = jnp.isnan(state["t_stop"]) & view.running & (view.last_ends > 0) & has_stop
        new = dict(
            n_fired=n_fired,
            t_start=jnp.where(opens, view.time, state["t_start"]),
            t_stop=jnp.where(closes, view.time, state["t_stop"]),
        )
        return new, open_before


class WritersObserver(Observer):
    """`WriterStats`, accumulated per interval (time at each count) and per switch.

    Rises are netted over every switch at one instant, as `analysis.writer_count` nets
    them: an instant that starts at n_w = s and ends at b enters levels s+1..b once. The
    iteration moves n_w from a to b; at every level k > s it crosses, it adds +1 (up,
    a < k <= b) or −1 (down, b < k <= a). Starting below k, the crossings of k alternate
    up and down, so their sum over the instant is 1 exactly when it ends at or above k:
    no per-instant state beyond s. The fast paths switch one job per iteration
    (|b − a| <= 1): one cell per iteration; the general engine adds its levels in bulk."""

    name = "writers"

    def init(self, info: LoopInfo):
        n_fleets, dtype, size = info.n_fleets, info.dtype, info.n_jobs + 1
        return Bound(
            info=info,
            arrays=dict(
                window=_Window.init(n_fleets, dtype),
                time=jnp.zeros((n_fleets, size), dtype),
                rises=jnp.zeros((n_fleets, size), jnp.int32),  # entries into n_w >= k
                max=jnp.full(n_fleets, -1, jnp.int32),
                instant_start=jnp.zeros(n_fleets, jnp.int32),  # n_w when the current instant began
                instant_open=jnp.zeros(n_fleets, bool),  # window open strictly before it
            ),
        )

    def update(self, bound, view: EventView):
        state, info = bound.arrays, bound.info
        window, open_before = _Window.update(state["window"], view, info.stop_fires is not None)
        fleets = jnp.arange(view.time.shape[0])
        in_interval = view.running & open_before & (view.dt > 0)
        time = state["time"].at[fleets, view.n_writers].add(jnp.where(in_interval, view.dt, 0))
        most = jnp.where(in_interval, jnp.maximum(state["max"], view.n_writers), state["max"])
        # An iteration that advances time begins a new instant (before its switches).
        begins = view.advanced & view.running
        start = jnp.where(begins, view.n_writers, state["instant_start"])
        instant_open = jnp.where(begins, open_before, state["instant_open"])
        counted = instant_open & view.running
        a, b, rises = view.n_writers, view.n_writers_after, state["rises"]
        if not info.one_switch:  # the general engine: n_w jumps a -> b, levels in bulk
            k = jnp.arange(rises.shape[1])[None, :]
            a, b, s = a[:, None], b[:, None], start[:, None]
            crossed = ((k > a) & (k <= b)).astype(rises.dtype) - ((k > b) & (k <= a)).astype(rises.dtype)
            rises = rises + jnp.where(counted[:, None] & (k > s), crossed, 0)
        else:  # one switch, n_w moves by ±1: the level it reaches (firing) or leaves (end)
            level = jnp.maximum(a, b)
            step = jnp.where(counted & (level > start), b - a, 0)
            rises = rises.at[fleets, level].add(step.astype(rises.dtype), mode="drop")
        return Bound(
            info=info,
            arrays=dict(
                window=window, time=time, rises=rises, max=most, instant_start=start, instant_open=instant_open
            ),
        )

    def finalize(self, bound, final: FinalView):
        state = bound.arrays
        window = state["window"]
        if final.horizon is None:
            t_stop = window["t_stop"]  # NaN if the first K-th write never ended
        else:
            assert final.ok is not None  # set by the driver before finalize
            t_stop = jnp.where(final.ok, final.horizon, jnp.nan)
        usable = jnp.isfinite(window["t_start"]) & jnp.isfinite(t_stop) & (t_stop > window["t_start"])
        nan = jnp.asarray(jnp.nan, state["time"].dtype)
        return WriterStats(
            time=jnp.where(usable[:, None], state["time"], nan),
            window=jnp.stack([window["t_start"], t_stop], axis=1),
            excursions=jnp.where(usable[:, None], state["rises"], -1),
            max=jnp.where(usable, state["max"], -1),
        )


class GapsObserver(Observer):
    """(B, K) smallest phase gap per cycle (`analysis.smallest_gap` of the trace).

    Firings arrive in time order, and cycles begin in order (a job fires cycle c + 1 only
    after it fired cycle c), so per fleet only the newest cycle ``cur`` and the one before
    it are still changing: their first/last firing and smallest inner gap are per-fleet
    scalars. When cycle c + 2 begins, cycle c is final but for late firings; its smallest
    gap min(inner, first_{c+1} − last_c) goes to a (B, K) table, or −inf where c
    interleaves with c + 1 (a firing of c after first_{c+1}). A later firing of c has
    t > first_{c+2} > first_{c+1}: it overwrites c's cell with −inf. A −inf cell makes the
    cycle and the next one NaN, as `smallest_gap` makes interleaved cycles. A cycle counts
    only when it and the next are full (every active job fired them), which the fire counts
    at the stop tell (`FinalView.fire_count`). Per iteration: one cell (the general engine:
    two, see ``update``).

    Every firing of one iteration has the same time (the general engine switches a whole
    instant at once, the fast paths one job), so an iteration is summarised by how many
    firings it has in cycles cur − 1, cur and cur + 1; cycles up to cur − 2 are late.
    Equal times do not interleave (`smallest_gap` compares strictly).
    """

    name = "gaps"

    def init(self, info: LoopInfo):
        n_fleets, dtype, k = info.n_fleets, info.dtype, info.gap_fires
        zero, inf = jnp.zeros(n_fleets, dtype), jnp.full(n_fleets, jnp.inf, dtype)
        no = jnp.zeros(n_fleets, bool)
        if info.ordered:  # the FIFO loop: the cyclic firing order is fixed (claim 3)
            return Bound(
                info=info,
                arrays=dict(
                    smallest=jnp.full((n_fleets, k), jnp.nan, dtype),
                    cur=jnp.full(n_fleets, -1, jnp.int32),
                    last=zero,
                    inner=inf,
                ),
            )
        return Bound(
            info=info,
            arrays=dict(
                smallest=jnp.full((n_fleets, k), jnp.nan, dtype),
                cur=jnp.full(n_fleets, -1, jnp.int32),  # newest cycle begun (-1: none)
                first=zero,
                last=zero,
                inner=inf,  # cycle cur
                prev_last=zero,
                prev_inner=inf,  # cycle cur - 1
                prev_ahead=no,  # a firing of cur - 1 came after cur's first: they interleave
            ),
        )

    @staticmethod
    def _written(state):
        """Cycle cur − 1's cell, as written when cur + 1 begins: its smallest gap, or −inf
        where it interleaves with cur (then both are NaN in the result)."""
        closing = state["first"] - state["prev_last"]
        return jnp.where(state["prev_ahead"], -jnp.inf, jnp.minimum(state["prev_inner"], closing))

    @staticmethod
    def _update_ordered(state, view: EventView, k: int):
        # The FIFO ring fires the jobs in one fixed cyclic order: cycle c + 1 begins only
        # after every job fired cycle c, and no firing is ever late. So cycle c is final
        # when c + 1 begins: one float cell, three scalars.
        t, cur = view.time, state["cur"]
        fired = view.fired[:, 0] & view.running & (view.cycle[:, 0] < k)
        begins = fired & (view.cycle[:, 0] == cur + 1)
        gap = t - state["last"]
        cell = jnp.where(begins & (cur >= 0), cur, k)
        fleets = jnp.arange(t.shape[0])
        smallest = (
            state["smallest"].at[fleets, cell].set(jnp.minimum(state["inner"], gap), mode="drop", unique_indices=True)
        )
        same = fired & ~begins
        return dict(
            smallest=smallest,
            cur=cur + begins.astype(jnp.int32),
            last=jnp.where(fired, t, state["last"]),
            inner=jnp.where(begins, jnp.inf, jnp.where(same, jnp.minimum(state["inner"], gap), state["inner"])),
        )

    def update(self, bound, view: EventView):
        state, info = bound.arrays, bound.info
        if info.ordered:
            return Bound(info=info, arrays=self._update_ordered(state, view, info.gap_fires))
        n_fleets, width = view.fired.shape
        k, t, cur = info.gap_fires, view.time, state["cur"]
        fired = view.fired & view.running[:, None] & (view.cycle < k)
        offset = view.cycle - cur[:, None]

        late = fired & (offset <= -2)

        def how_many(mask):
            return ((mask & fired).astype(jnp.int32), "sum")

        n_prev, n_cur, n_next, lowest = row_reductions(
            how_many(offset == -1),
            how_many(offset == 0),
            how_many(offset == 1),
            (jnp.where(late, view.cycle, k).astype(jnp.int32), "min"),
        )
        # Cycle cur - 1 at t >= first: interleaved if later, else a tie (a gap of zero).
        tie = t == state["first"]
        prev_ahead = state["prev_ahead"] | ((n_prev > 0) & ~tie)
        tied = (n_prev > 0) & tie
        prev_inner = jnp.where(
            tied,
            jnp.minimum(state["prev_inner"], jnp.where(n_prev > 1, 0, t - state["prev_last"])),
            state["prev_inner"],
        )
        prev_last = jnp.where(tied, t, state["prev_last"])
        # Cycle cur (begun, so it has a firing, wherever cur >= 0).
        seen = n_cur > 0
        gap = jnp.where(cur >= 0, t - state["last"], jnp.inf)
        inner = jnp.where(seen, jnp.minimum(state["inner"], jnp.where(n_cur > 1, 0, gap)), state["inner"])
        last = jnp.where(seen, t, state["last"])
        state = dict(state, prev_ahead=prev_ahead, prev_inner=prev_inner, prev_last=prev_last, inner=inner, last=last)
        # Cycle cur + 1 begins: cycle cur - 1 is written out and the window moves on.
        begins = n_next > 0
        row = cur - 1
        write = begins & (row >= 0)
        fleets = jnp.arange(n_fleets)
        # A late firing (cycle c <= cur - 2, already written out) marks c with -inf: c and
        # c + 1 interleave. Only the lowest late cycle of an iteration is marked: a higher
        # one c' is NaN anyway, as is c' + 1, since the job that fired c late has yet to fire
        # them, after their successors began (a late or interleaved firing, marked when it
        # is the lowest of its instant) or never (then they are not full).
        if width == 1:  # one firing: either it begins a cycle or it is late, one cell
            cell = jnp.where(write, row, lowest)
            value = jnp.where(write, self._written(state), -jnp.inf)
        else:  # the general engine: the cycle written out and the lowest late cycle
            cell = jnp.concatenate([jnp.where(write, row, k), lowest])
            value = jnp.concatenate([self._written(state), jnp.full_like(t, -jnp.inf)])
            fleets = jnp.concatenate([fleets, fleets])
        smallest = state["smallest"].at[fleets, cell].set(value, mode="drop", unique_indices=width == 1)
        shifted = dict(
            cur=cur + 1,
            first=t,
            last=t,
            inner=jnp.where(n_next > 1, jnp.zeros_like(t), jnp.inf),
            prev_last=state["last"],
            prev_inner=state["inner"],
            prev_ahead=jnp.zeros_like(prev_ahead),
        )
        state = {
            name: jnp.where(begins, shifted[name], value) if name in shifted else value for name, value in state.items()
        }
        return Bound(info=info, arrays=dict(state, smallest=smallest))

    def finalize(self, bound, final: FinalView):
        state = bound.arrays
        n_fleets, k = state["smallest"].shape
        cycles = jnp.arange(k)[None, :]
        cur = state["cur"][:, None]
        # A cycle counts only where the next one is full (every active job fired it, so its
        # fire count exceeds c + 1), which implies the cycle itself is.
        assert final.fire_count is not None  # every loop reports it
        fewest = jnp.min(jnp.where(final.active, final.fire_count, np.iinfo(np.int32).max), axis=1)
        next_full = (cycles + 1 < fewest[:, None]) & (cycles + 1 < k)
        if bound.info.ordered:  # every cycle before cur is written out; cur has no next
            return jnp.where((cycles < cur) & next_full, state["smallest"], jnp.nan)
        # The two cycles still in the scalars: cur - 1 as if cur + 1 began, cur (no next).
        smallest = jnp.where(cycles == cur - 1, self._written(state)[:, None], state["smallest"])
        smallest = jnp.where(cycles == cur, jnp.nan, smallest)
        ahead = smallest == -jnp.inf  # interleaves with the next cycle
        ahead_before = jnp.concatenate([jnp.zeros((n_fleets, 1), bool), ahead[:, :-1]], axis=1)
        valid = (cycles <= cur) & next_full & ~ahead & ~ahead_before
        return jnp.where(valid, smallest, jnp.nan)


class JobsObserver(Observer):
    """`JobStats`: write time and completed-write time from the switch times, or, with
    failures (`LoopInfo.abandons`: writes can be abandoned), per interval;
    completed writes; compute time as the stop time minus the time not computing (writing
    with α = 0, waiting with α > 0, accumulated per interval).

    From the switch times: per job, the write ends of writes a firing started (A), the end
    of a write in progress at t = 0 (E), the firings (S) and the latest firing (L). Write
    time = A + E − S (+ t_stop while writing), completed-write time = A − S (+ L, the
    firing of a write still open). The fast paths (`LoopInfo.one_switch`) add each
    switch's time to one of three sums of the switching job's slot (`EventView.slot`) in
    one scatter, and keep the time of each slot's latest switch in a second one. The general
    engine keeps A − S, E and L as three dense arrays, each updated from its own old value
    only (XLA then copies none of them per iteration).

    With failures a write can be abandoned (the job fails and fires again before the write
    could end), so the general engine accumulates per interval instead: the time drained
    since the job's latest firing (``open_write``) is added to the completed-write time at a
    recorded write end and reset at a firing, so an abandoned write, or one still open at
    the stop, adds nothing; and it counts completed writes per end. Otherwise the loop
    hands them to ``finalize`` (`FinalView.writes`: every firing starts a write, and all
    but the one still open have ended).

    The three ways keep three state layouts: they are not interchangeable bit for bit (a
    difference of sums rounds otherwise than a sum of differences), and each is the
    fastest for its loop."""

    name = "jobs"

    def init(self, info: LoopInfo):
        n_fleets, n_jobs, dtype = info.n_fleets, info.n_jobs, info.dtype
        if info.one_switch:  # per job: the sums A, E, S of the class docstring
            arrays = dict(sums=jnp.zeros((n_fleets, n_jobs, 3), dtype), latest=jnp.zeros((n_fleets, n_jobs), dtype))
        elif not info.abandons:  # no failures: every write ends or is open at the stop
            zeros = jnp.zeros((n_fleets, n_jobs), dtype)
            arrays = dict(ends_less_fires=zeros, initial=zeros, latest=zeros, waiting_time=zeros)
        else:
            zeros = jnp.zeros((n_fleets, n_jobs), dtype)
            arrays = dict(
                write_time=zeros,
                waiting_time=zeros,
                completed_write_time=zeros,
                open_write=zeros,
                writes=jnp.zeros((n_fleets, n_jobs), jnp.int32),
                snapshot_time=zeros,
                overhead_time=zeros,
            )
        return Bound(info=info, arrays=arrays)

    def update(self, bound, view: EventView):
        return Bound(info=bound.info, arrays=self._update(bound.arrays, bound.info, view))

    @staticmethod
    def _update(state, info: LoopInfo, view: EventView):
        if info.one_switch:  # one switch per lane: its time goes to one sum of its job's slot
            n_fleets, n_jobs = view.time.shape[0], info.n_jobs
            switched = (view.ended[:, 0] | view.fired[:, 0]) & view.running
            slot = view.job if view.slot is None else view.slot
            cell = jnp.where(switched, jnp.arange(n_fleets) * n_jobs + slot[:, 0], n_fleets * n_jobs)
            which = jnp.where(view.fired[:, 0], 2, jnp.where(view.recorded_end[:, 0], 0, 1))
            times = jnp.where(which[:, None] == jnp.arange(3)[None, :], view.time[:, None], 0)
            flat = state["sums"].reshape(n_fleets * n_jobs, 3)  # flat scatters (`ckpt_jax._loops.record`)
            flat = flat.at[cell].add(times, mode="drop", unique_indices=True)
            latest = state["latest"].reshape(-1).at[cell].set(view.time, mode="drop", unique_indices=True)
            return dict(sums=flat.reshape(state["sums"].shape), latest=latest.reshape(state["latest"].shape))
        # The general engine's masks are dense anyway (its columns are the jobs).
        dt = jnp.where(view.running, view.dt, 0)[:, None]
        waiting_time = (
            state["waiting_time"] if view.waiting is None else state["waiting_time"] + jnp.where(view.waiting, dt, 0)
        )
        if not info.abandons:  # no failures: the switch times, as on the fast paths
            t = view.time[:, None]
            fired, ended = view.fired & view.running[:, None], view.ended & view.running[:, None]
            recorded = view.recorded_end & view.running[:, None]
            # Each array is updated from its own old value only (no copy of it per iteration).
            return dict(
                ends_less_fires=state["ends_less_fires"] + (jnp.where(recorded, t, 0) - jnp.where(fired, t, 0)),
                initial=jnp.where(ended & ~recorded, t, state["initial"]),
                latest=jnp.where(fired, t, state["latest"]),
                waiting_time=waiting_time,
            )
        # With failures (a failure abandons the write in progress): accumulate the interval.
        assert view.draining is not None  # failures run on the general engine only
        write_time = state["write_time"] + jnp.where(view.draining, dt, 0)
        open_write = state["open_write"] + jnp.where(view.draining, dt, 0)
        ended = view.recorded_end & view.running[:, None]
        completed = state["completed_write_time"] + jnp.where(ended, open_write, 0)
        # A write end and the next firing can share an instant: the end counts first.
        open_write = jnp.where(view.fired & view.running[:, None], 0, open_write)
        snapshot_time = state["snapshot_time"]
        if view.snapping is not None:
            snapshot_time = snapshot_time + jnp.where(view.snapping, dt, 0)
        overhead_time = state["overhead_time"]
        if view.overhead is not None:  # docs/model.md §1g
            overhead_time = overhead_time + jnp.where(view.overhead, dt, 0)
        return dict(
            write_time=write_time,
            waiting_time=waiting_time,
            completed_write_time=completed,
            open_write=open_write,
            writes=state["writes"] + ended.astype(jnp.int32),
            snapshot_time=snapshot_time,
            overhead_time=overhead_time,
        )

    def finalize(self, bound, final: FinalView):
        state, info = bound.arrays, bound.info
        if info.one_switch:  # per slot: in job order
            sums = job_order(state["sums"], final.slot_position)
            ends, initial, fires = sums[..., 0], sums[..., 1], sums[..., 2]
            latest = job_order(state["latest"], final.slot_position)
            state = dict(
                ends_less_fires=ends - fires, initial=initial, latest=latest, waiting_time=jnp.zeros_like(ends)
            )
        if not info.abandons:  # from switch times: the fast paths, the general engine without failures
            writing = final.writing
            assert writing is not None and final.fire_count is not None  # every loop reports them
            opened = writing & (final.fire_count >= 1)  # its write was started by a firing
            difference = state["ends_less_fires"]
            state = dict(
                write_time=difference + state["initial"] + jnp.where(writing, final.time[:, None], 0),
                completed_write_time=difference + jnp.where(opened, state["latest"], 0),
                waiting_time=state["waiting_time"],
            )
        if final.writes is not None:
            state = dict(state, writes=final.writes)
        write_time = state["write_time"]
        nan = jnp.asarray(jnp.nan, write_time.dtype)
        zeros = jnp.zeros_like(write_time)
        snapshot_time = state.get("snapshot_time", zeros)
        idle = jnp.where(final.async_fraction[:, None] > 0, state["waiting_time"] + snapshot_time, write_time)
        down_time = zeros if final.down_time is None else final.down_time
        compute_time = final.time[:, None] - idle - down_time
        overhead_time = state.get("overhead_time", zeros)
        if "overhead_time" in state:  # docs/model.md §1g (without overheads: as before, bit for bit)
            compute_time = compute_time - overhead_time
        assert final.ok is not None  # set by the driver before finalize
        ok = final.active & final.ok[:, None]
        # The fast paths keep no work accounting: `_simulate` fills in their useful work.
        useful = jnp.full_like(write_time, jnp.nan) if final.useful_work is None else final.useful_work
        uncovered = jnp.full_like(write_time, jnp.nan) if final.uncovered_work is None else final.uncovered_work
        lost = zeros if final.lost_work is None else final.lost_work
        failures = jnp.zeros_like(state["writes"]) if final.failures is None else final.failures
        covered_waste, waste = steady_waste(useful, uncovered, final.horizon)
        return JobStats(
            write_time=jnp.where(ok, write_time, nan),
            compute_time=jnp.where(ok, compute_time, nan),
            writes=jnp.where(ok, state["writes"], -1),
            useful_work=jnp.where(ok, useful, nan),
            lost_work=jnp.where(ok, lost, nan),
            failures=jnp.where(ok, failures, -1),
            down_time=jnp.where(ok, down_time, nan),
            waste=jnp.where(ok, waste, nan),
            completed_write_time=jnp.where(ok, state["completed_write_time"], nan),
            snapshot_time=jnp.where(ok, snapshot_time, nan),
            wait_time=jnp.where(ok, state["waiting_time"], nan),
            persisted_work=jnp.where(ok, useful if final.persisted_work is None else final.persisted_work, nan),
            outage_failures=jnp.where(ok, 0 if final.outage_failures is None else final.outage_failures, -1),
            stagger_time=jnp.where(ok, zeros if final.stagger_time is None else final.stagger_time, nan),
            outage_lost_work=jnp.where(ok, zeros if final.outage_lost_work is None else final.outage_lost_work, nan),
            outage_down_time=jnp.where(ok, zeros if final.outage_down_time is None else final.outage_down_time, nan),
            covered_waste=jnp.where(ok, covered_waste, nan),
            uncovered_work=jnp.where(ok, uncovered, nan),
            overhead_time=jnp.where(ok, overhead_time, nan),
        )


def steady_waste(useful, uncovered, horizon):
    """``(covered_waste, waste)`` of (B, N) useful and uncovered work over the (B,) horizon
    (NaN where there is none; `JobStats`): 1 − useful / H, and the steady-state
    1 − (useful + uncovered) / H (docs/model.md §1c)."""
    if horizon is None:
        nan = jnp.full_like(useful, jnp.nan)
        return nan, nan
    # One divide for both: XLA turns two divides by one divisor into products with its
    # reciprocal in some programs (a sharded batch's) and not in others: a last-bit difference.
    covered_waste, waste = 1 - jnp.stack([useful, useful + uncovered]) / horizon[None, :, None]
    return covered_waste, waste


class PowerObserver(Observer):
    """`PowerStats`, from the draw the general engine computes per interval
    (`EventView.draw`). The last interval of positive length is kept to take the step at
    the next one; where no time passes (several iterations at one instant) nothing changes,
    so the switches of one instant make one step."""

    name = "power"

    def __init__(self, bins=None, threshold=None):
        self.bins, self.threshold = bins, threshold

    def __eq__(self, other):
        return isinstance(other, PowerObserver) and (self.bins, self.threshold) == (other.bins, other.threshold)

    def __hash__(self):
        return hash((PowerObserver, self.bins, self.threshold))

    def init(self, info: LoopInfo):
        n_fleets, dtype = info.n_fleets, info.dtype
        n_bins = len(self.bins) - 1 if isinstance(self.bins, tuple) else (self.bins or POWER_BINS)
        zeros = jnp.zeros(n_fleets, dtype)
        inf = jnp.full(n_fleets, jnp.inf, dtype)
        count = jnp.zeros(n_fleets, jnp.int32)
        return dict(
            time=jnp.zeros((n_fleets, n_bins), dtype),
            energy=zeros,
            max=-inf,
            min=inf,
            drop=zeros,
            rise=zeros,
            last=jnp.full(n_fleets, jnp.nan, dtype),
            n_steps=count,
            n_changes=count,
            full=zeros,
        )

    def _edges(self, full):
        """(B, n + 1) bin edges for fleets of full draw ``full`` (B,)."""
        if isinstance(self.bins, tuple):
            return jnp.broadcast_to(jnp.asarray(self.bins, full.dtype), full.shape + (len(self.bins),))
        n_bins = self.bins or POWER_BINS
        # The fractions as a host constant: one rounding (the product) in any batch layout.
        fractions = np.arange(n_bins + 1, dtype=np.float64) / n_bins
        return full[:, None] * jnp.asarray(fractions, full.dtype)

    def update(self, state, view: EventView):
        assert view.draw is not None and view.full_draw is not None  # the general engine's
        draw, full = view.draw, view.full_draw
        interval = view.running & (view.dt > 0)  # an interval of positive length, at rate ``draw``
        dt = jnp.where(interval, view.dt, 0)
        edges = self._edges(full)
        n_bins = edges.shape[1] - 1
        index = jax.vmap(lambda e, p: jnp.searchsorted(e, p, side="right"))(edges, draw) - 1
        index = jnp.where(draw == edges[:, -1], n_bins - 1, index)  # the last bin is closed
        inside = (index >= 0) & (index < n_bins)
        bins = jnp.arange(n_bins)
        time = state["time"] + jnp.where((bins[None, :] == index[:, None]) & inside[:, None], dt[:, None], 0)
        step = draw - state["last"]  # NaN before the first interval
        eps = jnp.finfo(draw.dtype).eps
        stepped = interval & ~jnp.isnan(step)
        threshold = (POWER_THRESHOLD * full) if self.threshold is None else jnp.asarray(self.threshold, full.dtype)
        return dict(
            time=time,
            energy=state["energy"] + dt * draw,
            max=jnp.where(interval, jnp.maximum(state["max"], draw), state["max"]),
            min=jnp.where(interval, jnp.minimum(state["min"], draw), state["min"]),
            drop=jnp.where(stepped, jnp.maximum(state["drop"], -step), state["drop"]),
            rise=jnp.where(stepped, jnp.maximum(state["rise"], step), state["rise"]),
            last=jnp.where(interval, draw, state["last"]),
            n_steps=state["n_steps"] + (stepped & (jnp.abs(step) > threshold)).astype(jnp.int32),
            # A change beyond rounding: the same draw summed over other jobs can differ by ulps.
            n_changes=state["n_changes"] + (stepped & (jnp.abs(step) > CHANGE_ULPS * eps * full)).astype(jnp.int32),
            full=jnp.where(view.running, full, state["full"]),
        )

    def finalize(self, state, final: FinalView):
        full = state["full"]
        nan = jnp.asarray(jnp.nan, full.dtype)
        ok = final.ok if final.ok is not None else jnp.ones(full.shape, bool)
        threshold = (POWER_THRESHOLD * full) if self.threshold is None else jnp.full_like(full, self.threshold)
        return PowerStats(
            time=state["time"],
            edges=self._edges(full),
            mean=jnp.where(ok & (final.time > 0), state["energy"] / final.time, nan),
            max=jnp.where(ok, state["max"], nan),
            min=jnp.where(ok, state["min"], nan),
            largest_drop=jnp.where(ok, state["drop"], nan),
            largest_rise=jnp.where(ok, state["rise"], nan),
            n_steps=jnp.where(ok, state["n_steps"], -1),
            n_changes=jnp.where(ok, state["n_changes"], -1),
            threshold=threshold,
            full_draw=full,
        )


def observers_of(save: SaveAt) -> tuple:
    """The observers a `SaveAt` asks for, in a fixed order (static per run): the built-in
    ones it switches on, then the user's."""
    chosen = []
    if save.writers:
        chosen.append(WritersObserver())
    if save.gaps:
        chosen.append(GapsObserver())
    if save.jobs:
        chosen.append(JobsObserver())
    if save.power:
        chosen.append(PowerObserver(save.power_bins, save.power_threshold))
    return tuple(chosen) + save.observers


def completed_writes(fire_count, writing):
    """(B, N) completed writes started by a firing after t = 0, where no failure abandons
    one: every firing starts a write, and all but the one still open have ended."""
    return fire_count - (writing & (fire_count >= 1)).astype(fire_count.dtype)


def state_bytes(save: SaveAt, n_jobs: int, gap_fires: int | None, itemsize: int) -> int:
    """Bytes per fleet of the observers' loop state (what a CPU block must keep in cache)."""
    total = 0
    if save.writers:  # time and rises at N + 1 levels, the window and instant scalars
        total += (n_jobs + 1) * (itemsize + 4) + 4 * itemsize + 16
    if save.gaps:  # a cell per cycle, the two open cycles' scalars
        total += (gap_fires or 0) * itemsize + 5 * itemsize + 8
    if save.jobs:  # the fast paths: four sums per job (the general engine: four or five)
        total += 5 * n_jobs * itemsize
    return total  # a user's observers are not counted


def finalize(save: SaveAt, states, final: FinalView) -> dict:
    """``{name: output}`` of every observer of ``save`` from its state after the loop
    (``final.ok`` set)."""
    return {o.name: o.finalize(state, final) for o, state in zip(observers_of(save), states)}
