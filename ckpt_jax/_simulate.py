"""The front door: `simulate` plans the run (`ckpt_jax._plan.plan`: every check, the one
static configuration `RunConfig`, the loop of each fleet and the groups of fleets), runs each
group through the driver (`ckpt_jax._loops.driver`: on CPU blocks or sharded over devices),
and merges the results into one `Trace` in batch order. The loops themselves are in
`ckpt_jax._loops`.
"""

from __future__ import annotations

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np

from ._loops import LoopResult, driver
from ._loops.config import RunConfig
from ._observe import JobStats, PowerStats, SaveAt, WriterStats, steady_waste
from ._plan import plan
from ._status import describe_status
from .model import Fleet, State

__all__ = ["Trace", "simulate"]


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class Trace:
    """What `simulate` returns. Leading axes (*B) are the fleet's batch shape.

    A pytree (it passes through `jax.jit` and `jax.tree_util.tree_map`). It indexes its
    batch axes as `Fleet` does: ``trace[3]`` is the trace of fleet 3 of a 1-D batch (every
    field indexed alike); the fields are read by name, ``trace.fire_times``.

    Attributes:
      fire_times: (*B, N, K) time of each job's k-th firing (start of its k-th write);
        NaN for inactive (padding) slots and where the run stopped early.
      end_times: (*B, N, K) end of the write started by that firing; NaN for a write a
        failure abandoned (docs/model.md §1c: it keeps its fire time, the job's next
        firing takes the next column).
      ok: (*B,) True where the run completed (every active job fired and finished K writes).
      status: (*B,) int32 bit flags (`Status`); 0 where ``ok``.
      n_events: (*B,) number of event instants stepped (simultaneous switches count once).
      time: (*B,) simulated time at which the fleet stopped.
      writers, gaps, jobs, power: what `SaveAt` asked for (`WriterStats`, (*B, K) smallest
        gap per cycle, `JobStats`, `PowerStats`), else None; ``fire_times``/``end_times`` are None with
        ``SaveAt(trace=False)``.
      observed: ``{name: output}`` of the user's observers (``SaveAt(observers=...)``),
        else None.
    """

    fire_times: jax.Array | None
    end_times: jax.Array | None
    ok: jax.Array
    status: jax.Array
    n_events: jax.Array
    time: jax.Array
    writers: WriterStats | None = None
    gaps: jax.Array | None = None
    jobs: JobStats | None = None
    observed: dict | None = None
    power: PowerStats | None = None

    @property
    def batch_shape(self) -> tuple:
        """The leading batch shape (*B,)."""
        return tuple(np.shape(self.ok))

    def __getitem__(self, index) -> Trace:
        """The trace of the fleets ``index`` picks from the batch axes, as NumPy indexes
        (``trace[3]``, slices, integer arrays, boolean masks, ``...``).

        Raises:
          IndexError: an index out of range, or any index on a single fleet's trace.
        """
        batch = self.batch_shape
        if batch == ():
            raise IndexError("a single fleet's trace (batch shape ()) has no batch axes to index")
        if isinstance(index, jax.Array):
            index = np.asarray(index)
        # NumPy resolves the index on the fleet numbers (IndexError out of range; JAX would clamp).
        try:
            chosen = np.asarray(np.arange(int(np.prod(batch)), dtype=np.int64).reshape(batch)[index])
        except (TypeError, ValueError) as err:
            raise IndexError(f"invalid fleet index {index!r}: {err}") from None
        take = chosen.reshape(-1)

        def pick(x):
            rest = np.shape(x)[len(batch) :]
            return x.reshape((-1,) + rest)[take].reshape(chosen.shape + rest)

        return jax.tree_util.tree_map(pick, self)

    def arrays(self) -> dict:
        """Every field the run recorded as NumPy arrays, by the names an ensemble stores
        them under (`ckpt_jax.ensemble.EnsembleResult.arrays`): ``fire_times``,
        ``end_times``, ``n_events``, ``time``, ``gaps`` and one array per observer field
        (``writers_time``, ``jobs_writes``, ``power_mean``, ...). ``ok`` and ``status`` are
        apart (an ensemble keeps them as its own fields)."""
        arrays = {name: getattr(self, name) for name in ("fire_times", "end_times", "n_events", "time")}
        arrays = {name: value for name, value in arrays.items() if value is not None}
        for prefix in ("writers", "gaps", "jobs", "power"):  # one array per field: writers_time, ...
            value = getattr(self, prefix)
            if prefix == "gaps" and value is not None:
                arrays["gaps"] = value
            elif value is not None:
                arrays.update({f"{prefix}_{field}": part for field, part in value._asdict().items()})
        return {name: np.asarray(value) for name, value in arrays.items()}

    def to_xarray(self, fleet=None, *, groups=None, batch_dims=None, attrs=None):
        """The trace as an `xarray.Dataset` (`ckpt_jax.labelled`): ``fire_times`` and
        ``end_times`` (``fleet``, ``job``, ``cycle``), ``ok``, ``status``, ``n_events``,
        ``time`` and the observers' fields (``writers_time`` over ``writers`` = 0..N,
        ``gaps`` over ``cycle``, ``jobs_*`` over ``job``, ``power_*``), with units and
        meanings in their ``attrs``. User observers (``observed``) are left out.

        Args:
          fleet: the `Fleet` that was run (optional): T, d, cap, policies, ... as attributes
            (as coordinates where they differ between jobs or fleets).
          groups: optional (N,) job group labels, a ``group`` coordinate along ``job``; or a
            parsed fleet file (`ckpt_jax.fleetfile.FleetSpec`): its group names, and for a
            file with units, times in seconds.
          batch_dims: names of the batch axes (default ``fleet``; ``fleet_0``, ... for more).
          attrs: more dataset attributes (e.g. ``{"seed": 0}``).

        Raises:
          ImportError: xarray is not installed (``pip install "ckpt_jax[xarray]"``).
        """
        from . import labelled

        return labelled.trace_dataset(self, fleet=fleet, groups=groups, batch_dims=batch_dims, attrs=attrs)

    def __iter__(self):
        """The fleets of the first batch axis, one `Trace` each (as iterating a NumPy array)."""
        if self.batch_shape == ():
            raise TypeError("iteration over a single fleet's trace (batch shape ())")
        return (self[i] for i in range(self.batch_shape[0]))

    def __repr__(self) -> str:
        ok = np.asarray(self.ok)
        parts = [f"batch_shape={self.batch_shape}", f"ok={int(ok.sum())}/{ok.size}"]
        if self.fire_times is not None:
            parts.append(f"fire_times/end_times={np.shape(self.fire_times)} {np.asarray(self.fire_times).dtype}")
        time = np.asarray(self.time, np.float64)
        if time.size:
            parts.append(
                f"time=[{np.nanmin(time):.6g}, {np.nanmax(time):.6g}]"
                if time.size > 1
                else f"time={float(time.ravel()[0]):.6g}"
            )
        parts.append(f"n_events<={int(np.max(self.n_events))}" if np.size(self.n_events) else "n_events=[]")
        for name in ("writers", "gaps", "jobs"):
            value = getattr(self, name)
            if value is not None:
                parts.append(f"{name}={np.shape(value) if name == 'gaps' else type(value).__name__}")
        if self.observed:
            parts.append(f"observed={sorted(self.observed)}")
        return f"Trace({', '.join(parts)})"


def simulate(
    fleet: Fleet,
    state: State,
    n_fires: int | None,
    *,
    max_events: int | None = None,
    jitter=None,
    key: jax.Array | None = None,
    throw: bool = False,
    progress: bool | None = None,
    queue_size: int = 64,
    fleet_offset: int = 0,
    method: str = "auto",
    devices=None,
    save: SaveAt | None = None,
    until=None,
    failure_times=None,
    events_per_iteration: int | None = None,
) -> Trace:
    """Simulates a batch of fleets exactly, event to event, until every job fired K times
    (or, with ``until``, up to a time horizon).

    Args:
      fleet: the `Fleet` (batch shape *B, N job slots).
      state: its initial `State` (from `initial_state`, `state_from_positions`, ...).
      n_fires: K >= 1, firings (and completed writes) to record per job. Without ``until``
        the run stops once every active job has completed K writes; fleets with failures
        need ``until`` (a `ValueError` otherwise), as a failure abandons a write and K
        completed writes may never come.
      max_events: event budget per fleet; a fleet that exhausts it stops with
        ``ok = False`` and status `Status.MAX_EVENTS`. Default: `default_max_events`;
        with it, a horizon that cannot be reached within the budget (about 2³¹ events) is
        refused with a `ValueError` before the run starts.
      jitter: compute-work standard deviation σ >= 0, scalar or (*B,) (docs/model.md §1).
      key: PRNG key for jitter and failures: one key (folded with each fleet's flat
        index) or one per fleet (shape *B). Same key, same trace. Failure draws are keyed
        by (fleet, job, failure index), jitter draws by (fleet, job, cycle). Required
        (a `ValueError` without it) when the run draws random numbers: jitter > 0 or
        failures drawn from ``Fleet(mtbf=...)``.
      throw: raise `RuntimeError` if any fleet did not complete.
      progress: show a tqdm progress bar (default: only for long runs, judged from the
        cycles asked for or, with ``until``, the events expected up to the horizon; on one
        device: per chunk of events on the general path, in cycles or in percent of the
        horizon, per block of fleets on the FIFO and clock paths).
      queue_size: capacity of the delayed controller's pending-update queue.
      fleet_offset: added to the flat fleet index when folding a scalar key (for
        simulating one big ensemble in chunks with identical draws).
      method: ``"general"`` (the general loop, O(N) per event, every variant);
        ``"fifo"`` (the O(1)-per-switch FIFO loop, only for identical
        deterministic fleets: all active jobs of each fleet share T and d, no jitter,
        τ = 0, α = 0); ``"clock"`` (the virtual clocks with a per-phase
        argmin: any T_i, d_i and jitter, but τ = 0 and α = 0); or ``"auto"``: fleets of
        at least `FIFO_MIN_JOBS` (8) active jobs run on the FIFO path where it applies,
        else on the clock path where it applies; the rest on the general engine. Decided
        per fleet on the host, so a fleet's trace does not depend on its batch.
        All paths give the same trace to working precision (not bit for bit: chaotic
        fleets, docs/model.md claim 5, amplify ulp differences over many cycles).
      devices: shard the batch over several devices (`ckpt_jax.sharding`): None (one
        device, or the devices of an enclosing `ckpt_jax.sharding.default_devices` block),
        ``"all"`` (every local device), an int n (the first n) or a sequence of devices.
        Results are identical to one device.
      save: what to record, a `SaveAt` (default: the full trace only). Observers
        (``writers``, ``gaps``, ``jobs`` and the user's ``observers``) are accumulated
        inside the loop; with ``trace=False`` no (B, N, K) buffer exists anywhere.
      until: a time horizon H > 0 (scalar or (*B,)): every fleet stops at t = H exactly,
        after every switch at an instant <= H (those at H too; a job due within the
        snapping tolerance of H switches at H, docs/model.md §1), and is ok if it got
        there. ``n_fires`` then only sizes the trace and the ``gaps`` observer, and may
        be None when neither is recorded. Needed for fleets with
        failures (``Fleet(mtbf=...)`` or ``failure_times``; `JobStats.waste` is measured
        over H): the trace then holds each job's first K firings up to H, in firing
        order; a write a failure abandoned keeps its fire time and has a NaN end time, and
        firings after the K-th are not recorded (`JobStats` counts them all).
      failure_times: explicit failure times that replace the draws of ``mtbf`` (which may
        then be None; ``restart`` still applies), shape (*B, N, F), each job's row strictly
        increasing, >= 0 and padded at its end with NaN or +inf. A listed time at which the
        job is down, t_f <= t < t_f + R_i, is discarded: the next failure is the first listed
        time at or after its restart end (docs/model.md §1c, as `tests/reference.py` takes
        them). General engine only. The same as ``Fleet(failure_times=...)`` (docs/model.md
        §1f), which carries them with the fleet (batch indexing, `assess`, `design`); give
        them to one or the other.
      events_per_iteration: k >= 1 steps of every running fleet per iteration of the
        loop (an inner loop of k steps; a fleet that stops within them is masked), so the
        loop's condition is read, and on a GPU its kernels launched, once per k events.
        The results are the same for every k. None: by the backend, 1 on the CPU (where
        more measured no faster) and 4 on an accelerator (not yet measured).

    Fleets with failures (docs/model.md §1c) run on the general engine (``"auto"``
    sends them there; ``"fifo"`` and ``"clock"`` refuse them).

    Returns:
      A `Trace`.
    """
    if not isinstance(throw, (bool, np.bool_)):
        raise ValueError(f"throw must be True or False, got {throw!r}")
    run = plan(
        fleet,
        state,
        n_fires,
        max_events=max_events,
        jitter=jitter,
        key=key,
        queue_size=queue_size,
        fleet_offset=fleet_offset,
        method=method,
        devices=devices,
        save=save,
        until=until,
        failure_times=failure_times,
        events_per_iteration=events_per_iteration,
    )
    pieces = []
    for group in run.groups:
        part = run.part(group)
        result = driver.run(
            group.config,
            part,
            max_events=run.max_events,
            progress=progress,
            devices=run.devices,
            expected_events=run.expected_events,
        )
        pieces.append((group.index, group_trace(result, group.config, part)))
    flat = pieces[0][1] if len(pieces) == 1 else merge(pieces, run.n_fleets)
    trace = flat if run.batch_shape == (run.n_fleets,) else _to_batch_shape(flat, run.batch_shape)
    if throw and not bool(np.all(trace.ok)):
        bad = np.asarray(trace.status)[~np.asarray(trace.ok)]
        codes = np.bitwise_or.reduce(bad.ravel())
        raise RuntimeError(f"{bad.size} of {np.size(trace.ok)} fleets did not complete: {describe_status(int(codes))}")
    return trace


@functools.partial(jax.jit, static_argnums=1)
def _to_batch_shape(flat: Trace, batch_shape: tuple) -> Trace:
    """``flat`` (leading axis B) with batch shape ``batch_shape``: one compiled program for
    every array of the trace (eager reshapes compiled one program per array and shape)."""
    return jax.tree_util.tree_map(lambda x: x.reshape(batch_shape + x.shape[1:]), flat)


def group_trace(result: LoopResult, config: RunConfig, part) -> Trace:
    """The flat `Trace` of one group of fleets from the driver's result; where the loop
    kept no work accounting (`RunConfig.track_work`), the jobs' useful work is computed
    from their writes (`fast_useful_work`)."""
    trace = flat_trace(result, save=config.save)
    if config.save.jobs and not config.track_work:
        final = result.final
        at_stop = (final.fire_count, final.writing, final.compute_left)
        jobs = fast_useful_work(trace.jobs, *part, *at_stop, use_jitter=config.use_jitter)
        trace = dataclasses.replace(trace, jobs=jobs)
    return trace


@functools.partial(jax.jit, static_argnames=("use_jitter",))
def fast_useful_work(
    jobs: JobStats, params, phase, remaining, horizon, fire_count, writing, compute_left, *, use_jitter: bool
) -> JobStats:
    """The useful and uncovered work of fleets run without the work accounting (the fast
    paths, and the general engine without failures or jitter: `RunConfig.track_work`;
    docs/model.md §1c), and the wastes they give (`JobStats.waste`, `JobStats.covered_waste`).

    Useful work: each completed write saved one full compute phase T_i, but the first write
    of an initially computing job saved only its ``remaining`` work (work before t = 0 counts
    nowhere). Uncovered work at the stop (``fire_count``, ``writing``, ``compute_left``: the
    loop's final state, `FinalView`): the work of the write in progress, if a firing after
    t = 0 started it (T_i, or ``remaining`` for that first firing), plus the progress of the
    current compute phase, its whole work (``remaining`` for the phase in progress at t = 0)
    less ``compute_left`` (0 for a blocking writer, whose next phase is whole; with α > 0 the
    phase computed while draining, whole where it waits). With jitter the phases' works are
    not kept: NaN."""
    compute = params.compute
    first_short = jnp.where((phase == 0) & (jobs.writes >= 1), compute - remaining, 0)
    useful = jobs.writes * compute - first_short
    in_write = jnp.where((fire_count == 1) & (phase == 0), remaining, compute)
    phase_work = jnp.where((fire_count == 0) & (phase == 0), remaining, compute)
    uncovered = jnp.where(writing & (fire_count >= 1), in_write, 0) + (phase_work - compute_left)
    if use_jitter:
        jittered = params.jitter[:, None] > 0
        useful, uncovered = jnp.where(jittered, jnp.nan, useful), jnp.where(jittered, jnp.nan, uncovered)
    ok = jobs.writes >= 0
    useful = jnp.where(ok, useful, jnp.nan).astype(compute.dtype)
    uncovered = jnp.where(ok, uncovered, jnp.nan).astype(compute.dtype)
    covered_waste, waste = steady_waste(useful, uncovered, horizon)
    return jobs._replace(
        useful_work=useful, uncovered_work=uncovered, persisted_work=useful, waste=waste, covered_waste=covered_waste
    )


def merge(pieces, n_fleets: int) -> Trace:
    """Reassembles the traces of fleet subsets ``[(flat indices, Trace), ...]`` in batch order."""

    def merge(*leaves):
        out = jnp.zeros((n_fleets,) + leaves[0].shape[1:], leaves[0].dtype)
        for (index, _), leaf in zip(pieces, leaves):
            out = out.at[index].set(leaf)
        return out

    return jax.tree_util.tree_map(merge, *(trace for _, trace in pieces))


def flat_trace(result: LoopResult, *, save: SaveAt) -> Trace:
    """The `Trace` of flattened fleets (leading axis B) from the driver's result (any loop):
    the result's arrays as they are, the trace's times NaN in padded slots (compiled once per
    trace shape; nothing to compile without a trace)."""
    observed = result.observers
    assert result.ok is not None  # set by the driver
    fire_times, end_times = (None, None)
    if save.trace:
        fire_times, end_times = _mask_inactive(result.fire_times, result.end_times, result.final.active)
    return Trace(
        fire_times=fire_times,
        end_times=end_times,
        ok=result.ok,
        status=result.status,
        n_events=result.n_events,
        time=result.time,
        writers=observed.get("writers"),
        gaps=observed.get("gaps"),
        jobs=observed.get("jobs"),
        power=observed.get("power"),
        observed={o.name: observed[o.name] for o in save.observers} or None,
    )


@jax.jit
def _mask_inactive(fire_times, end_times, active):
    """``(fire_times, end_times)`` with NaN in the slots of inactive jobs."""
    mask = active[:, :, None]
    return jnp.where(mask, fire_times, jnp.nan), jnp.where(mask, end_times, jnp.nan)
