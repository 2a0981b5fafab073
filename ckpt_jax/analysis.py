"""Statistics of recorded traces (docs/model.md §2 observables).

`writer_count`, `observed_interval` and `writer_excursions` run on the host, on concrete
arrays (NumPy or JAX); their outputs have data-dependent sizes, so they are not meant to
be traced. `smallest_gap`, `binomial_baseline`, `tail_ratio` and `mean_writing_fraction`
are `jax.numpy` functions of fixed-shape arrays with any leading batch axes (jit-able);
`writer_distribution` finds the observed interval on the host and does the rest batched.

What the trace records: `simulate` stores the write windows started by firings *after*
t = 0, up to each job's K-th. A write already in progress at t = 0 (a job launched in its
write phase) is not a recorded window, and firings after a job's K-th are not recorded
either. Everything here is therefore about the *recorded* windows; it equals the true
fleet quantity on `observed_interval` only.
"""

from __future__ import annotations

import functools

import jax
import jax.core
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import gammaln, xlog1py, xlogy

__all__ = [
    "writer_count",
    "observed_interval",
    "smallest_gap",
    "cycles_interleaved",
    "writer_distribution",
    "mean_writing_fraction",
    "binomial_baseline",
    "tail_ratio",
    "writer_excursions",
    "observed_bounds",
]


def _one_fleet(fire_times, end_times):
    """One fleet's (N, K) trace as float64 arrays, with its shapes checked."""
    fire = np.asarray(fire_times, dtype=np.float64)
    end = np.asarray(end_times, dtype=np.float64)
    if fire.shape != end.shape or fire.ndim != 2:
        raise ValueError(
            f"fire_times and end_times must both have shape (N, K) for one fleet, got {fire.shape} and {end.shape}"
        )
    return fire, end


def _windows(fire_times, end_times):
    """The recorded windows of one fleet as flat float64 arrays (start, end), NaN-free."""
    fire, end = _one_fleet(fire_times, end_times)
    # NaN marks padding slots and windows a stopped run never opened or closed.
    complete = np.isfinite(fire) & np.isfinite(end)
    return fire[complete], end[complete]


def writer_count(fire_times, end_times) -> tuple[np.ndarray, np.ndarray]:
    """The concurrency step function n_w(t) of one fleet's recorded write windows.

    Each window [fire, end) counts as one writer. Windows that end at the same instant
    another starts net out: the count does not dip (or jump) there, and such instants
    are not breakpoints unless the count really changes. Windows with a NaN fire or end
    time (padding slots, runs that stopped early) are ignored.

    Args:
      fire_times: (N, K) firing times of one fleet (`Trace.fire_times` of that fleet).
      end_times: (N, K) ends of the writes those firings started.

    Returns:
      ``(times, counts)``, float64 and int64 arrays of equal length M: the count is
      ``counts[m]`` on ``[times[m], times[m + 1])``, 0 before ``times[0]``, and
      ``counts[-1] == 0`` after the last window ends. Both are empty without windows.

    Example:
      Job 0 writes on [0, 1) and [3, 4), job 1 on [0.5, 2) and [2.5, 3); at t = 3 one
      write ends as another starts, so t = 3 is no breakpoint.

      >>> times, counts = writer_count([[0.0, 3.0], [0.5, 2.5]], [[1.0, 4.0], [2.0, 3.0]])
      >>> times.tolist(), counts.tolist()
      ([0.0, 0.5, 1.0, 2.0, 2.5, 4.0], [1, 2, 1, 0, 1, 0])
    """
    start, end = _windows(fire_times, end_times)
    events = np.concatenate([start, end])
    steps = np.concatenate([np.ones(start.size, np.int64), -np.ones(end.size, np.int64)])
    times, group = np.unique(events, return_inverse=True)
    # Sum the steps of all events at one instant before accumulating: simultaneous
    # ends and starts net out instead of producing a spurious zero-width dip.
    net = np.zeros(times.size, np.int64)
    np.add.at(net, group, steps)
    changes = net != 0
    return times[changes], np.cumsum(net[changes])


def observed_interval(fire_times, end_times) -> tuple[float, float]:
    """The interval on which the recorded windows are *all* the fleet's writes.

    Before its first recorded firing a job may be writing an unrecorded initial window;
    after its K-th write ends its next firings are not recorded. So `writer_count` equals
    the true n_w(t) from the latest first firing to the earliest last recorded end.

    Args:
      fire_times, end_times: (N, K) trace of one fleet; rows that are all NaN (padding
        slots) are ignored.

    Returns:
      ``(t_start, t_stop)``; ``t_start > t_stop`` when K is too small for any such
      interval, and both are NaN when no job has a recorded window.
    """
    fire, end = _one_fleet(fire_times, end_times)
    t_start, t_stop = observed_bounds(fire, end)
    return float(t_start), float(t_stop)


def observed_bounds(fire_times, end_times) -> tuple[np.ndarray, np.ndarray]:
    """`observed_interval` of every fleet of a (..., N, K) trace at once: ``(t_start,
    t_stop)``, each of the batch shape (...,), NaN where a fleet has no recorded window."""
    fire = np.asarray(fire_times, dtype=np.float64)
    end = np.asarray(end_times, dtype=np.float64)
    if fire.shape != end.shape:
        raise ValueError(f"fire_times and end_times must have the same shape, got {fire.shape} and {end.shape}")
    _check_trace_shape("fire_times", fire)
    jobs = np.isfinite(fire).any(axis=-1)  # (..., N): not a padding slot
    # A job whose run stopped early has NaN ends from some firing on: its last finite end
    # is where its unfinished (hence unrecorded) window may begin.
    first_fire = np.where(np.isfinite(fire[..., 0]), fire[..., 0], np.inf)
    last_end = np.fmax.reduce(end, axis=-1, initial=-np.inf)
    t_start = np.max(np.where(jobs, first_fire, -np.inf), axis=-1)
    t_stop = np.min(np.where(jobs, last_end, np.inf), axis=-1)
    none = ~jobs.any(axis=-1)
    return np.where(none, np.nan, t_start), np.where(none, np.nan, t_stop)


def _check_trace_shape(name: str, array, min_ndim: int = 2):
    if array.ndim < min_ndim:
        raise ValueError(f"{name} must have shape (..., N, K), got {array.shape}")


def smallest_gap(fire_times, period=None) -> jax.Array:
    """Smallest phase gap between distinct jobs' firings, per fleet and per cycle (claim 5).

    Cycle k is the k-th firing of every job. For fleets of identical jobs the firing order
    is a constant of motion (claim 3), so these are N consecutive firings of the fleet;
    cycle k's gaps are the N − 1 gaps between its sorted firing times plus the closing
    (circular) gap from its last firing to the first firing of cycle k + 1. With jitter or
    heterogeneous jobs a job can overtake: where cycle k's firings interleave with cycle
    k + 1's (a job fired its k+1-th time before another its k-th, `cycles_interleaved`),
    the gaps of both cycles are not gaps between consecutive firings, and both are NaN.
    So a gap is never negative.

    Args:
      fire_times: (..., N, K) firing times (`Trace.fire_times`). Rows that are all NaN
        (padding slots) are ignored; a cycle where another job's firing is NaN (a run
        that stopped early) gives NaN.
      period: None, or the cycle time (scalar or broadcastable to the batch shape (...,)).
        When given, the closing gap wraps around by ``period`` (first + period − last)
        and all gaps are returned as fractions of it; a period shorter than some cycle's
        spread (a negative closing gap) raises `ValueError` (NaN under `jax.jit`). When
        None, gaps are in time units and the closing gap is measured to the next cycle's
        first firing, so the last cycle (k = K − 1) has no closing gap and is NaN.

    Returns:
      (..., K) smallest gap of each cycle, >= 0 or NaN.

    Example:
      >>> fire = [[0.0, 10.0], [1.0, 11.5], [4.0, 14.0]]
      >>> smallest_gap(fire).tolist()
      [1.0, nan]
      >>> smallest_gap(fire, period=8.0).tolist()
      [0.125, 0.1875]
    """
    fire = fire_times if isinstance(fire_times, jax.core.Tracer) else np.asarray(fire_times)
    if not jnp.issubdtype(fire.dtype, jnp.floating):
        fire = fire.astype(jnp.result_type(float))
    _check_trace_shape("fire_times", fire)
    if period is not None and not isinstance(period, jax.core.Tracer):
        scale = np.asarray(period, np.float64)
        if not np.all(np.isfinite(scale) & (scale > 0)):
            raise ValueError(f"period must be finite and > 0, got {period!r}")
    if isinstance(fire, jax.core.Tracer) or isinstance(period, jax.core.Tracer):
        smallest, _ = _smallest_gap(fire, period)
        return jnp.asarray(smallest)
    assert isinstance(fire, np.ndarray)  # a concrete trace, not a tracer
    smallest, n_negative = _smallest_gap_blocks(fire, period)
    if n_negative:
        raise ValueError(
            f"period is shorter than the spread of the firings in {n_negative} of "
            f"{smallest.size} cycles (negative closing gaps): pass each fleet's own cycle time "
            "(broadcastable to the batch shape), or period=None to measure the closing gap "
            "to the next cycle's first firing"
        )
    return jnp.asarray(smallest)


def cycles_interleaved(fire_times) -> jax.Array:
    """(..., K) True where cycle k's firings interleave with cycle k + 1's (or k − 1's):
    some job fired its (k+1)-th time before another fired its k-th, so the firing order
    changed there. Always False for identical deterministic jobs (claim 3).

    >>> cycles_interleaved([[0.0, 10.0], [9.0, 11.0], [12.0, 13.0]]).tolist()
    [True, True]
    """
    fire = jnp.asarray(fire_times)
    if not jnp.issubdtype(fire.dtype, jnp.floating):
        fire = fire.astype(jnp.result_type(float))
    _check_trace_shape("fire_times", fire)
    return _interleaved(fire)


def _interleaved(fire, xp=jnp, first=None, last=None):
    if first is None:
        first = xp.nanmin(fire, axis=-2, initial=xp.inf)
        last = xp.nanmax(fire, axis=-2, initial=-xp.inf)
    assert last is not None  # given together with first
    ahead = last[..., :-1] > first[..., 1:]  # cycle k overlaps cycle k + 1
    pad = xp.zeros_like(ahead[..., :1])
    return xp.concatenate([ahead, pad], axis=-1) | xp.concatenate([pad, ahead], axis=-1)


def _smallest_step(ordered, xp):
    """min over j of ordered[..., j+1, :] − ordered[..., j, :], ignoring NaN (inf if none).

    NumPy: one job row at a time, never materialising the (..., N−1, K) differences (their
    allocation cost more than the sort)."""
    if xp is jnp:
        return jnp.nanmin(jnp.diff(ordered, axis=-2), axis=-2, initial=jnp.inf)
    smallest = np.full(ordered.shape[:-2] + ordered.shape[-1:], np.inf, ordered.dtype)
    step = np.empty_like(smallest)
    for row in range(ordered.shape[-2] - 1):  # over jobs, not fleets
        np.subtract(ordered[..., row + 1, :], ordered[..., row, :], out=step)
        np.fmin(smallest, step, out=smallest)
    return smallest


_GAP_BLOCK_BYTES = 1 << 20  # NumPy works on blocks of fleets this big: they stay in cache


def _smallest_gap_blocks(fire: np.ndarray, period):
    """`_smallest_gap` of a concrete trace, over blocks of fleets (allocating the whole
    sorted (B, N, K) copy at once costs more than the sort itself)."""
    batch, (n_jobs, n_fires) = fire.shape[:-2], fire.shape[-2:]
    flat = fire.reshape((-1, n_jobs, n_fires))
    periods = None if period is None else np.broadcast_to(np.asarray(period, fire.dtype), batch).reshape(-1)
    block = max(1, _GAP_BLOCK_BYTES // max(1, n_jobs * n_fires * fire.itemsize))
    pieces, n_negative = [], 0
    for start in range(0, flat.shape[0], block):  # blocks of fleets, for the cache
        part = None if periods is None else periods[start : start + block]
        smallest, negative = _smallest_gap(flat[start : start + block], part)
        pieces.append(smallest)
        n_negative += int(negative)
    smallest = np.concatenate(pieces) if pieces else np.zeros((0, n_fires), fire.dtype)
    return smallest.reshape(batch + (n_fires,)), n_negative


def _smallest_gap(fire, period):
    """(smallest gaps (..., K), number of complete cycles with a negative closing gap).

    Written once for both array modules: NumPy for concrete traces (its sort along the job
    axis is ~25x faster than XLA:CPU's on (10^4, 32, 200) traces), `jax.numpy` under tracing.
    NaN-ignoring reductions (nanmin/nanmax with an initial value) skip padding slots.
    """
    xp = jnp if isinstance(fire, jax.core.Tracer) or isinstance(period, jax.core.Tracer) else np
    fire = xp.asarray(fire)
    finite = xp.isfinite(fire)
    present = xp.any(finite, axis=-1, keepdims=True)  # (..., N, 1): not a padding slot
    complete = xp.all(finite | ~present, axis=-2)  # (..., K)
    ordered = xp.sort(fire, axis=-2)  # NaN (padding) sorts last
    # initial=inf also covers N = 1 (no inner gap) and single active jobs.
    inner_min = _smallest_step(ordered, xp)
    first = xp.nanmin(ordered, axis=-2, initial=xp.inf)
    last = xp.nanmax(ordered, axis=-2, initial=-xp.inf)
    if period is None:
        following = xp.concatenate([first[..., 1:], xp.full_like(first[..., :1], xp.nan)], axis=-1)
        next_complete = xp.concatenate([complete[..., 1:], xp.zeros_like(complete[..., :1])], axis=-1)
        following = xp.where(next_complete, following, xp.nan)
        closing = following - last
        scale = xp.ones((), fire.dtype)
    else:
        scale = xp.asarray(period, fire.dtype)[..., None]
        closing = first + scale - last
    # xp.minimum propagates a NaN closing gap (the last cycle without a period).
    with np.errstate(invalid="ignore"):
        smallest = xp.minimum(inner_min, closing) / scale
        valid = complete & ~_interleaved(fire, xp, first, last) & ~(closing < 0)
    # Without a period a negative closing gap is an order change (NaN); with one, a bad period.
    n_negative = 0 if period is None else xp.sum(complete & (closing < 0))
    return xp.where(valid, smallest, xp.nan), n_negative


def _observed_bounds(fire: np.ndarray, end: np.ndarray) -> np.ndarray:
    """(B, 2) `observed_interval` of each fleet of a flattened (B, N, K) batch."""
    t_start, t_stop = observed_bounds(fire, end)
    return np.stack([t_start, t_stop], axis=-1).reshape(-1, 2)


def _histogram_one(fire, end, t_start, t_stop, n_bins: int):
    """Time spent at each writer count on [t_start, t_stop] by one fleet's windows."""
    valid = (jnp.isfinite(fire) & jnp.isfinite(end)).ravel()
    # Invalid windows become zero steps at +inf: they sort last and weigh nothing.
    times = jnp.concatenate([jnp.where(valid, fire.ravel(), jnp.inf), jnp.where(valid, end.ravel(), jnp.inf)])
    steps = jnp.concatenate([valid, valid]).astype(jnp.int32) * jnp.concatenate(
        [jnp.ones(valid.size, jnp.int32), -jnp.ones(valid.size, jnp.int32)]
    )
    order = jnp.argsort(times)
    times, counts = times[order], jnp.cumsum(steps[order])
    # The count is counts[m] on [times[m], times[m+1]). Ties leave transient counts (even
    # out of range) on zero-width pieces, which weigh nothing; clipping keeps them in range.
    left = jnp.clip(times, t_start, t_stop)
    right = jnp.clip(jnp.concatenate([times[1:], jnp.full((1,), jnp.inf, times.dtype)]), t_start, t_stop)
    weights = right - left
    hist = jax.ops.segment_sum(weights, jnp.clip(counts, 0, n_bins - 1), num_segments=n_bins)
    # Before the first event the count is 0.
    hist = hist.at[0].add(jnp.clip(times[0], t_start, t_stop) - t_start)
    return hist


_CHUNK_EVENTS = 1 << 24  # events sorted per batched call of `writer_distribution`
_histograms = jax.jit(jax.vmap(_histogram_one, in_axes=(0, 0, 0, 0, None)), static_argnums=4)


def writer_distribution(fire_times, end_times, n_jobs=None) -> jax.Array:
    """Time-weighted distribution of the concurrent-writer count n_w (claim 6).

    The fraction of `observed_interval` (where the recorded windows are all the fleet's
    writes) that each fleet spends with exactly n writers, n = 0..N. Ties (a write ending
    as another starts) take no time and do not matter.

    Args:
      fire_times, end_times: (..., N, K) trace (`Trace.fire_times`, `Trace.end_times`).
      n_jobs: largest count to tabulate (default N, the number of job slots); must be >= N.

    Returns:
      (..., n_jobs + 1) probabilities summing to 1 over the last axis; NaN for a fleet
      without an observed interval (K too small, or no recorded windows).
    """
    fire = np.asarray(fire_times, dtype=np.float64)
    end = np.asarray(end_times, dtype=np.float64)
    if fire.shape != end.shape:
        raise ValueError(f"fire_times and end_times must have the same shape, got {fire.shape} and {end.shape}")
    _check_trace_shape("fire_times", fire)
    n_slots, n_fires = fire.shape[-2:]
    n_jobs = n_slots if n_jobs is None else int(n_jobs)
    if n_jobs < n_slots:
        raise ValueError(f"n_jobs must be >= the number of job slots N = {n_slots}, got {n_jobs}")
    batch = fire.shape[:-2]
    flat_fire = fire.reshape((-1, n_slots, n_fires))
    flat_end = end.reshape((-1, n_slots, n_fires))
    bounds = _observed_bounds(flat_fire, flat_end)
    t_start, t_stop = bounds[:, 0], bounds[:, 1]
    usable = np.isfinite(t_start) & np.isfinite(t_stop) & (t_stop > t_start)
    # Unusable fleets get a unit dummy interval (no 0/0), then NaN.
    t_start = np.where(usable, t_start, 0.0)
    t_stop = np.where(usable, t_stop, 1.0)
    dtype = jnp.result_type(float)
    # Fixed-size chunks bound the memory of the batched sort (2 N K events per fleet); the
    # last chunk is padded with copies of the first fleet so every chunk reuses one compile.
    n_fleets = flat_fire.shape[0]
    chunk = max(1, min(n_fleets, _CHUNK_EVENTS // max(1, 2 * n_slots * n_fires)))
    pieces = []
    for begin in range(0, n_fleets, chunk):
        index = np.arange(begin, begin + chunk)
        index = np.where(index < n_fleets, index, 0)
        pieces.append(
            _histograms(
                jnp.asarray(flat_fire[index], dtype),
                jnp.asarray(flat_end[index], dtype),
                jnp.asarray(t_start[index], dtype),
                jnp.asarray(t_stop[index], dtype),
                n_jobs + 1,
            )
        )
    hist = jnp.concatenate(pieces)[:n_fleets]
    dist = hist / jnp.asarray(t_stop - t_start, dtype)[:, None]
    dist = jnp.where(jnp.asarray(usable)[:, None], dist, jnp.nan)
    return dist.reshape(batch + (n_jobs + 1,))


def mean_writing_fraction(distribution) -> jax.Array:
    """p̄ = E[n_w] / N, the mean fraction of jobs writing, of (..., N + 1) distributions → (...,)."""
    dist = jnp.asarray(distribution)
    n_jobs = dist.shape[-1] - 1
    if n_jobs < 1:
        raise ValueError(f"distribution must have N + 1 >= 2 entries along its last axis, got {dist.shape}")
    return jnp.sum(dist * jnp.arange(n_jobs + 1, dtype=dist.dtype), axis=-1) / n_jobs


def binomial_baseline(n_jobs: int, p) -> jax.Array:
    """Binomial(N, p) pmf: the writer count if the N jobs' phases were independent (claim 6).

    Args:
      n_jobs: N >= 1.
      p: writing fraction in [0, 1], any shape (...,) (e.g. `mean_writing_fraction`).

    Returns:
      (..., N + 1) probabilities of n = 0..N writers.

    Example:
      >>> binomial_baseline(2, 0.5).round(6).tolist()
      [0.25, 0.5, 0.25]
    """
    if isinstance(n_jobs, bool) or not isinstance(n_jobs, (int, np.integer)) or n_jobs < 1:
        raise ValueError(f"n_jobs must be an integer >= 1, got {n_jobs!r}")
    p = jnp.asarray(p)
    if not jnp.issubdtype(p.dtype, jnp.floating):
        p = p.astype(jnp.result_type(float))
    return _binomial_pmf(int(n_jobs), p)


@functools.partial(jax.jit, static_argnums=0)
def _binomial_pmf(n_jobs: int, p):
    p = p[..., None]
    n = jnp.arange(n_jobs + 1, dtype=p.dtype)
    # xlogy/xlog1py give 0·log 0 = 0, so p = 0 and p = 1 are exact point masses.
    log_pmf = gammaln(n_jobs + 1.0) - gammaln(n + 1) - gammaln(n_jobs - n + 1) + xlogy(n, p) + xlog1py(n_jobs - n, -p)
    return jnp.where((p >= 0) & (p <= 1), jnp.exp(log_pmf), jnp.nan)


def _upper_tail(dist):
    """P(n ≥ k) for k = 0..N along the last axis (reverse cumulative sum)."""
    return jnp.flip(jnp.cumsum(jnp.flip(dist, -1), axis=-1), -1)


def tail_ratio(distribution, baseline, k) -> jax.Array:
    """P(n_w ≥ k) / P_baseline(n_w ≥ k): how much heavier the measured upper tail is.

    Args:
      distribution: (..., N + 1) measured distribution (`writer_distribution`).
      baseline: (..., N + 1) reference distribution (`binomial_baseline`), broadcastable.
      k: an integer level in 0..N, or a sequence of M levels.

    Returns:
      (...,) for a scalar k, (..., M) for a sequence. ``inf`` where the baseline tail is
      0 but the measured one is not, NaN where both are 0.
    """
    dist = jnp.asarray(distribution)
    base = jnp.asarray(baseline)
    if dist.shape[-1] != base.shape[-1]:
        raise ValueError(
            f"distribution and baseline must have the same N + 1 entries, got {dist.shape} and {base.shape}"
        )
    levels = np.asarray(k)
    if not np.issubdtype(levels.dtype, np.integer) or np.any(levels < 0) or np.any(levels >= dist.shape[-1]):
        raise ValueError(f"k must be integers in 0..{dist.shape[-1] - 1}, got {k!r}")
    measured = _upper_tail(dist)[..., levels]
    reference = _upper_tail(base)[..., levels]
    return measured / reference


def _excursions(fire, end, t_start, t_stop, levels) -> np.ndarray:
    """(B, M) rises of the writer count to each level inside (t_start, t_stop], batched.

    The events of each fleet (window starts +1, ends −1) are sorted by time; events at one
    instant net out (as in `writer_count`), so the count before an instant is the running
    sum just before that instant's first event and the count after it is the running sum
    at its last event."""
    valid = np.isfinite(fire) & np.isfinite(end)
    n_fleets = fire.shape[0]
    times = np.concatenate(
        [np.where(valid, fire, np.inf).reshape(n_fleets, -1), np.where(valid, end, np.inf).reshape(n_fleets, -1)],
        axis=1,
    )
    steps = np.concatenate([valid.reshape(n_fleets, -1), -valid.reshape(n_fleets, -1).astype(np.int64)], axis=1).astype(
        np.int64
    )
    order = np.argsort(times, axis=1, kind="stable")
    times = np.take_along_axis(times, order, axis=1)
    running = np.cumsum(np.take_along_axis(steps, order, axis=1), axis=1)
    index = np.broadcast_to(np.arange(times.shape[1]), times.shape)
    first_of_instant = np.concatenate([np.ones((n_fleets, 1), bool), times[:, 1:] != times[:, :-1]], axis=1)
    last_of_instant = np.concatenate([times[:, 1:] != times[:, :-1], np.ones((n_fleets, 1), bool)], axis=1)
    start = np.maximum.accumulate(np.where(first_of_instant, index, 0), axis=1)
    padded = np.concatenate([np.zeros((n_fleets, 1), np.int64), running], axis=1)
    before = np.take_along_axis(padded, start, axis=1)  # running sum before the instant
    inside = last_of_instant & (times > t_start[:, None]) & (times <= t_stop[:, None])
    return np.stack([np.sum(inside & (before < k) & (running >= k), axis=1) for k in levels], axis=1)


def writer_excursions(fire_times, end_times, levels) -> np.ndarray:
    """Number of excursions to n_w ≥ k begun inside each fleet's observed interval.

    An excursion begins where `writer_count` rises from below k to k or more; a count
    that is already ≥ k at the start of `observed_interval` is not counted. The number
    of excursions measures how many (roughly independent) samples a tail estimate of
    `writer_distribution` rests on.

    Args:
      fire_times, end_times: (..., N, K) trace.
      levels: an integer k or a sequence of M levels.

    Returns:
      int64 array (...,) for a scalar level or (..., M) for a sequence.
    """
    fire = np.asarray(fire_times, dtype=np.float64)
    end = np.asarray(end_times, dtype=np.float64)
    if fire.shape != end.shape:
        raise ValueError(f"fire_times and end_times must have the same shape, got {fire.shape} and {end.shape}")
    _check_trace_shape("fire_times", fire)
    scalar = np.ndim(levels) == 0
    levels = np.atleast_1d(np.asarray(levels))
    if not np.issubdtype(levels.dtype, np.integer):
        raise ValueError(f"levels must be integers, got {levels!r}")
    batch = fire.shape[:-2]
    n_slots, n_fires = fire.shape[-2:]
    flat_fire = fire.reshape((-1, n_slots, n_fires))
    flat_end = end.reshape((-1, n_slots, n_fires))
    t_start, t_stop = observed_bounds(flat_fire, flat_end)
    usable = t_stop > t_start
    result = np.zeros((flat_fire.shape[0], levels.size), np.int64)
    # Blocks of fleets bound the memory of the (block, 2 N K) event arrays.
    block = max(1, _CHUNK_EVENTS // max(1, 8 * n_slots * n_fires))
    for first in range(0, flat_fire.shape[0], block):
        rows = slice(first, first + block)
        result[rows] = _excursions(flat_fire[rows], flat_end[rows], t_start[rows], t_stop[rows], levels)
    result[~usable] = 0
    result = result.reshape(batch + (levels.size,))
    return result[..., 0] if scalar else result
