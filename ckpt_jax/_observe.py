"""What a run records: `SaveAt` and the observers, accumulated inside the event loop.

diffrax's ``SaveAt`` picks what an ODE solve stores; here `SaveAt` picks what `simulate`
stores. The full trace (``trace=True``) is a (B, N, K) buffer per field; the observers
keep only the statistics they need, so an ensemble of 10^6 fleets fits where its trace
would not:

* ``writers`` — `WriterStats`: time spent with exactly k writers, entries into n_w >= k
  and the largest n_w, on the observation window (`WriterStats.window`);
* ``gaps`` — (B, K) smallest phase gap per cycle (`ckpt_jax.smallest_gap` of the trace);
* ``jobs`` — `JobStats`: per job, time writing, time computing, completed writes.

Every loop (general, FIFO, clock) describes each iteration by an `EventView` and calls
`update` of each observer; an observer is three pure functions over batched arrays
(leading axis B): ``init`` (buffers sized once, before the loop), ``update(state, view)``
and ``finalize(state, final) -> output``. A new observer is one more such class.

The window: from the instant every active job has fired once (before that, a write in
progress at t = 0 hides in the state) to the instant the first job ends the write started
by its K-th firing, or to the horizon ``until``: exactly `analysis.observed_interval` of
the same run's trace.
"""

from __future__ import annotations

import dataclasses
from typing import NamedTuple, Optional

import jax
import jax.numpy as jnp
import numpy as np

__all__ = ["SaveAt", "WriterStats", "JobStats", "EventView", "FinalView", "observers_for", "finalize"]


@dataclasses.dataclass(frozen=True)
class SaveAt:
    """What `simulate` records (diffrax's ``SaveAt``, for event loops).

    Args:
      trace: the (B, N, K) ``fire_times`` / ``end_times`` buffers (default True).
      writers: `WriterStats` of the writer count n_w on the observation window.
      gaps: (B, K) smallest phase gap per cycle, as `ckpt_jax.smallest_gap` of the trace.
      jobs: `JobStats`: per job, time writing, time computing, completed writes.
    """

    trace: bool = True
    writers: bool = False
    gaps: bool = False
    jobs: bool = False

    def __post_init__(self):
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if not isinstance(value, (bool, np.bool_)):
                raise ValueError(f"SaveAt.{field.name} must be True or False, got {value!r}")

    @property
    def any_observer(self) -> bool:
        return self.writers or self.gaps or self.jobs


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


class JobStats(NamedTuple):
    """Per job, over the whole run [0, stop time].

    Attributes:
      write_time: (*B, N) time spent writing (draining a checkpoint).
      compute_time: (*B, N) time spent computing (with α > 0 this overlaps writing).
      writes: (*B, N) writes completed that a firing after t = 0 started.
    """

    write_time: jax.Array
    compute_time: jax.Array
    writes: jax.Array


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
      write_duration: (B, M) where ended, the duration of that write; None where the loop
        gives dense masks instead.
      draining, waiting: (B, N) bool during the interval (general engine only, else None).
      first_fires: (B,) int jobs that fired for the first time at ``time``.
      last_ends: (B,) int jobs that ended the write of their K-th firing at ``time``.
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
    write_duration: Optional[jax.Array]
    draining: Optional[jax.Array]
    waiting: Optional[jax.Array]
    first_fires: jax.Array
    last_ends: jax.Array


class FinalView(NamedTuple):
    """The state after the loop, for ``finalize`` (batched, job order)."""

    time: jax.Array  # (B,) stop time
    open_write: jax.Array  # (B, N) time spent so far in a write still in progress (else 0)
    async_fraction: jax.Array  # (B,)
    active: jax.Array  # (B, N)
    horizon: Optional[jax.Array]  # (B,) or None
    n_writers: jax.Array  # (B,) writers at the stop


def _window_state(n_fleets, dtype):
    # Shared by the window-based observers: counters that open and close the window.
    return dict(
        n_fired=jnp.zeros(n_fleets, jnp.int32),
        n_ended=jnp.zeros(n_fleets, jnp.int32),
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
    def update(state, view: EventView, n_active, has_stop: bool):
        open_before = (state["n_fired"] >= n_active) & ((state["n_ended"] == 0) | (not has_stop))
        n_fired = state["n_fired"] + jnp.where(view.running, view.first_fires, 0)
        n_ended = state["n_ended"] + jnp.where(view.running, view.last_ends, 0)
        opens = jnp.isnan(state["t_start"]) & (n_fired >= n_active)
        closes = jnp.isnan(state["t_stop"]) & (n_ended > 0) & has_stop
        new = dict(
            n_fired=n_fired,
            n_ended=n_ended,
            t_start=jnp.where(opens, view.time, state["t_start"]),
            t_stop=jnp.where(closes, view.time, state["t_stop"]),
        )
        return new, open_before


class WritersObserver:
    """`WriterStats`, accumulated per interval (time at each count) and per instant
    (rises, netted over every switch at one instant, as `analysis.writer_count` nets them)."""

    name = "writers"

    def __init__(self, n_jobs: int, n_fires: Optional[int]):
        self.n_jobs = n_jobs
        self.has_stop = n_fires is not None

    def init(self, n_fleets, dtype):
        size = self.n_jobs + 1
        return dict(
            window=_Window.init(n_fleets, dtype),
            time=jnp.zeros((n_fleets, size), dtype),
            # Rises from a to b > a add one excursion at every level a+1..b: a difference
            # array (+1 at a+1, −1 at b+1), summed at the end, makes each rise O(1).
            rises=jnp.zeros((n_fleets, size + 1), jnp.int32),
            max=jnp.full(n_fleets, -1, jnp.int32),
            instant_start=jnp.zeros(n_fleets, jnp.int32),  # n_w when the current instant began
            instant_open=jnp.zeros(n_fleets, bool),  # window open strictly before it
        )

    def update(self, state, view: EventView, n_active):
        window, open_before = _Window.update(state["window"], view, n_active, self.has_stop)
        fleets = jnp.arange(view.time.shape[0])
        # A new instant closes the previous one: count its net rise.
        closing = view.advanced & view.running
        rises = self._add_rise(state["rises"], fleets, closing & state["instant_open"], state["instant_start"], view.n_writers)
        in_interval = view.running & open_before & (view.dt > 0)
        time = state["time"].at[fleets, view.n_writers].add(jnp.where(in_interval, view.dt, 0))
        most = jnp.where(in_interval, jnp.maximum(state["max"], view.n_writers), state["max"])
        instant_start = jnp.where(closing, view.n_writers, state["instant_start"])
        instant_open = jnp.where(closing, open_before, state["instant_open"])
        # The general engine's iterations are whole instants: close them at once.
        return dict(window=window, time=time, rises=rises, max=most, instant_start=instant_start, instant_open=instant_open)

    @staticmethod
    def _add_rise(rises, fleets, counted, start, stop):
        up = counted & (stop > start)
        size = rises.shape[1]
        rises = rises.at[fleets, jnp.where(up, start + 1, size)].add(1, mode="drop")
        return rises.at[fleets, jnp.where(up, stop + 1, size)].add(-1, mode="drop")

    def finalize(self, state, final: FinalView, complete):
        fleets = jnp.arange(final.time.shape[0])
        window = state["window"]
        if final.horizon is None:
            t_stop = window["t_stop"]  # NaN if the first K-th write never ended
        else:
            t_stop = jnp.where(complete, final.horizon, jnp.nan)
        # The last instant is still open: count its rise if it lies inside the window.
        rises = self._add_rise(state["rises"], fleets, state["instant_open"], state["instant_start"], final.n_writers)
        excursions = jnp.cumsum(rises, axis=1)[:, :-1]
        usable = jnp.isfinite(window["t_start"]) & jnp.isfinite(t_stop) & (t_stop > window["t_start"])
        nan = jnp.asarray(jnp.nan, state["time"].dtype)
        return WriterStats(
            time=jnp.where(usable[:, None], state["time"], nan),
            window=jnp.stack([window["t_start"], t_stop], axis=1),
            excursions=jnp.where(usable[:, None], excursions, -1),
            max=jnp.where(usable, state["max"], -1),
        )


class GapsObserver:
    """(B, K) smallest phase gap per cycle: per cycle k, the first and last firing time,
    the smallest gap between consecutive firings so far and their number; closed at the
    end with the gap to cycle k + 1's first firing (`analysis.smallest_gap`)."""

    name = "gaps"

    def __init__(self, n_fires: int):
        self.n_fires = n_fires

    def init(self, n_fleets, dtype):
        inf = jnp.inf
        rows = jnp.stack(
            [jnp.full((n_fleets, self.n_fires), inf, dtype), jnp.full((n_fleets, self.n_fires), -inf, dtype),
             jnp.full((n_fleets, self.n_fires), inf, dtype), jnp.zeros((n_fleets, self.n_fires), dtype)],
            axis=-1,
        )  # columns: first, last, smallest inner gap, count
        return rows  # (B, K, 4): every observer state has the fleet axis first

    def update(self, rows, view: EventView, n_active):
        n_fleets, width = view.fired.shape
        k = self.n_fires
        rows = rows.reshape(n_fleets * k, 4)
        fleets = jnp.arange(n_fleets)[:, None]
        use = view.fired & (view.cycle < k) & view.running[:, None]
        cell = jnp.where(use, fleets * k + view.cycle, n_fleets * k).reshape(-1)
        old = rows.at[cell].get(mode="fill", fill_value=0).reshape(n_fleets, width, 4)
        t = view.time[:, None]
        if width == 1:
            # One firing per fleet per iteration (the fast loops): the cells are distinct, so
            # one scatter of whole rows, marked unique, updates the state in place (a
            # read-after-write scatter made XLA:CPU copy the whole (B, K, 4) state).
            count = old[..., 3] + 1
            together = jnp.zeros(count.shape, bool)
        else:
            # Jobs firing in the same cycle at one instant: count them all before comparing.
            rows = rows.at[cell, 3].add(1, mode="drop")
            count = rows.at[cell, 3].get(mode="fill", fill_value=0).reshape(n_fleets, width)
            together = count - old[..., 3] >= 2
        inner = jnp.minimum(old[..., 2], jnp.where(old[..., 3] > 0, t - old[..., 1], jnp.inf))
        inner = jnp.where(together, jnp.minimum(inner, 0), inner)
        first = jnp.where(old[..., 3] > 0, old[..., 0], t)
        if width == 1:
            new = jnp.stack([first, jnp.broadcast_to(t, first.shape), inner, count], axis=-1).reshape(-1, 4)
            return rows.at[cell].set(new, mode="drop", unique_indices=True).reshape(n_fleets, k, 4)
        new = jnp.stack([first, jnp.broadcast_to(t, first.shape), inner], axis=-1).reshape(-1, 3)
        return rows.at[cell, :3].set(new, mode="drop").reshape(n_fleets, k, 4)

    def finalize(self, rows, final: FinalView, complete):
        n_fleets = final.time.shape[0]
        first, last, inner, count = rows[..., 0], rows[..., 1], rows[..., 2], rows[..., 3]
        n_active = jnp.sum(final.active, axis=1)[:, None].astype(count.dtype)
        full = count >= n_active
        following = jnp.concatenate([first[:, 1:], jnp.full((n_fleets, 1), jnp.nan, first.dtype)], axis=1)
        next_full = jnp.concatenate([full[:, 1:], jnp.zeros((n_fleets, 1), bool)], axis=1)
        closing = jnp.where(next_full, following - last, jnp.nan)
        # As `analysis.smallest_gap`: cycles whose firings interleave are not gaps (NaN).
        ahead = last[:, :-1] > first[:, 1:]
        pad = jnp.zeros((n_fleets, 1), bool)
        interleaved = jnp.concatenate([ahead, pad], axis=1) | jnp.concatenate([pad, ahead], axis=1)
        smallest = jnp.minimum(inner, closing)
        return jnp.where(full & ~interleaved & ~(closing < 0), smallest, jnp.nan)


class JobsObserver:
    """`JobStats`: write time from each write's duration (fast paths) or per interval
    (general engine, whose masks are dense anyway), completed writes, and compute time as
    the stop time minus the time not computing (writing with α = 0, waiting with α > 0)."""

    name = "jobs"

    def __init__(self, n_jobs: int):
        self.n_jobs = n_jobs

    def init(self, n_fleets, dtype):
        zeros = jnp.zeros((n_fleets, self.n_jobs), dtype)
        return dict(write_time=zeros, waiting_time=zeros, writes=jnp.zeros((n_fleets, self.n_jobs), jnp.int32))

    def update(self, state, view: EventView, n_active):
        n_fleets = view.time.shape[0]
        fleets = jnp.broadcast_to(jnp.arange(n_fleets)[:, None], view.job.shape)
        running = view.running[:, None]
        writes = state["writes"].at[fleets, view.job].add((view.recorded_end & running).astype(jnp.int32))
        if view.draining is not None:  # dense masks: accumulate the interval
            dt = jnp.where(view.running, view.dt, 0)[:, None]
            write_time = state["write_time"] + jnp.where(view.draining, dt, 0)
            waiting_time = state["waiting_time"] + jnp.where(view.waiting, dt, 0)
        else:  # one write at a time: add its duration when it ends (α = 0 here)
            ends = view.ended & running
            write_time = state["write_time"].at[fleets, view.job].add(jnp.where(ends, view.write_duration, 0))
            waiting_time = state["waiting_time"]
        return dict(write_time=write_time, waiting_time=waiting_time, writes=writes)

    def finalize(self, state, final: FinalView, complete):
        write_time = state["write_time"] + final.open_write
        idle = jnp.where(final.async_fraction[:, None] > 0, state["waiting_time"], write_time)
        compute_time = final.time[:, None] - idle
        ok = final.active & complete[:, None]
        nan = jnp.asarray(jnp.nan, write_time.dtype)
        return JobStats(
            write_time=jnp.where(ok, write_time, nan),
            compute_time=jnp.where(ok, compute_time, nan),
            writes=jnp.where(ok, state["writes"], -1),
        )


def observers_for(save: SaveAt, n_jobs: int, stop_fires: Optional[int], gap_fires: Optional[int]) -> tuple:
    """The observer objects a `SaveAt` asks for, in a fixed order (static per run).

    ``stop_fires``: the K whose first write end closes the window (None: the horizon
    closes it); ``gap_fires``: the cycles the gaps observer keeps."""
    chosen = []
    if save.writers:
        chosen.append(WritersObserver(n_jobs, stop_fires))
    if save.gaps:
        chosen.append(GapsObserver(gap_fires))
    if save.jobs:
        chosen.append(JobsObserver(n_jobs))
    return tuple(chosen)


def init(save: SaveAt, n_jobs: int, stop_fires, gap_fires, n_fleets: int, dtype) -> tuple:
    """The observers' initial states (buffers sized once, before the loop)."""
    return tuple(o.init(n_fleets, dtype) for o in observers_for(save, n_jobs, stop_fires, gap_fires))


def finalize(save: SaveAt, n_jobs: int, stop_fires, gap_fires, states, final: FinalView, ok) -> dict:
    """``{name: output}`` of every observer of ``save`` from its state after the loop."""
    observers = observers_for(save, n_jobs, stop_fires, gap_fires)
    return {o.name: o.finalize(state, final, ok) for o, state in zip(observers, states)}
