"""A fleet file from a cluster's own logs: `from_logs` fits the model to them, `write` writes
``fleet.toml``, ``fit.json`` and ``report.md`` (``ckpt-jax fit LOGDIR --out DIR``).

The logs (`ckpt_jax._logs`): ``jobs.csv`` (each job's group, size and observation window),
``writes.csv`` (every completed checkpoint write) and ``failures.csv`` (every failure). What is
fitted, each value with its 95 % interval and the number of observations behind it:

* **Storage** (docs/model.md §1, §1d): the ``[storage]`` curve f(n) = peak · min(n, k)/k /
  (1 + degradation · max(n − k, 0)) and a per-node write limit b (a job of m nodes drains at
  most at m·b), by replaying the observed write starts through the model's exact sharing —
  max-min fair water-filling of f(n_w) over the writers under their limits, stepped event to
  event (`replay`) — and minimising a robust loss of the predicted durations:
  ``scipy.optimize.least_squares`` on r = log(predicted / observed duration) with
  ``loss="soft_l1"`` (a first pass at scale 0.05, then at the residuals' robust scale, 1.4826
  × their median absolute deviation), k profiled over the integers 1 .. the most writes in
  progress at once (the whole profile: its global minimum, never the first rise). Intervals from the
  Jacobian at the optimum (Gauss–Newton covariance s²(JᵀJ)⁻¹ of the writes within 5 robust
  scales, s² no less than the variance the clock's rounding gives a duration, resolution²/6;
  k: the values whose robust cost lies within the 95 % likelihood-ratio bound; where several
  k fit alike, the peak's and degradation's intervals are the union over them, and where they
  reach the most writers seen, k and the peak are bounded below only).
  A parameter the replay does not feel (no write ever at its limit; no instant with more
  than k writers; no write held back by the storage) is reported as not determined and left
  out of the file, never invented. Writes abandoned by failures are not in the logs, yet
  took bandwidth: the writes beside them are the outliers the robust loss is for.
* **Failures** (§1c, §1f) per group: the time to a job's own failure counted from its last
  restart end (or its window's start), right-censored at an outage's failure and at the
  window's end; the exponential and the Weibull law by maximum likelihood
  (``scipy.stats.CensoredData`` with ``scipy.stats.expon.fit`` / ``weibull_min.fit``), a
  likelihood-ratio test of k = 1, the MTBF (the Weibull mean where k = 1 is rejected at 5 %)
  with its interval (exact χ² for the exponential; the observed information, delta method,
  for the Weibull), and the restart time from ``restart_end``.
* **Common causes** (§1f): failures of several jobs within ``window`` (default 60 s) of the
  first are one outage; domains from the ``domain`` column or, without it, the jobs that
  fail together (connected by shared outages); each domain's outage MTBF with its exact
  Poisson interval; the restart stagger from the steps between restart ends.
* **Intervals and sizes** per group: the checkpoint interval (a write's end to the job's next
  write start, with no failure between), the checkpoint volume, nodes and GPUs.

A 10⁶-row ``writes.csv``: the storage is fitted on contiguous windows of at most
``fit_writes`` writes in all (each replayed with the writes still running at its start), and
one replay of every write checks the fit on the rest (`StorageFit.validation`).
"""

from __future__ import annotations

import bisect
import dataclasses
import math
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ._estimate import Z95, mean_ci
from ._logs import Logs, read_logs
from ._policies import storage_curve

if TYPE_CHECKING:
    from .fleetfile import FleetSpec

__all__ = ["Value", "StorageFit", "GroupFit", "DomainFit", "Fit", "from_logs", "replay", "write", "WINDOW"]

# Failures of several jobs within this many seconds of the first are one outage (§1f).
WINDOW = 60.0
# The storage is fitted on at most this many writes (windows of the log); the rest validate.
FIT_WRITES = 3000
FIT_WINDOWS = 6
# A write counts as an inlier of the storage fit within this many robust scales.
INLIER_SCALES = 5.0
# The first pass's soft_l1 scale, in log(predicted / observed).
FIRST_SCALE = 0.05
# The robust scale's floor: a log error below it is a clock's rounding (0.1 ms in 100 s).
SCALE_FLOOR = 1e-6


@dataclasses.dataclass(frozen=True)
class Value:
    """A fitted value with its 95 % interval, the observations behind it and how it was got.

    ``value`` is None where the logs cannot determine it (``why`` says why; ``low`` or
    ``high`` may still bound it)."""

    value: float | None
    low: float | None = None
    high: float | None = None
    n: int = 0
    method: str = ""
    why: str = ""

    @property
    def determined(self) -> bool:
        return self.value is not None

    def inside(self, truth: float) -> bool:
        """``truth`` lies in the interval (closed)."""
        low = -math.inf if self.low is None else self.low
        high = math.inf if self.high is None else self.high
        return low <= truth <= high

    def to_dict(self) -> dict:
        return {
            k: (None if isinstance(v, float) and not math.isfinite(v) else v)
            for k, v in dataclasses.asdict(self).items()
        }


def _undetermined(why: str, n: int = 0, low=None, high=None) -> Value:
    return Value(None, low, high, n, "not determined", why)


# --- Storage -------------------------------------------------------------------------------------


def replay(start, volume, limit, curve, details: bool = False):
    """The model's write ends for writes started at ``start`` (sorted), exactly.

    Writers share f(n) = ``curve[min(n, len(curve)) - 1]`` by max-min fair water-filling under
    their limits (docs/model.md §1d); rates are constant between events (a start or an end), so
    each step goes to the next event and every write whose volume runs out there ends there.

    Args:
      start: (W,) write starts, sorted; volume: (W,) volumes; limit: (W,) each write's limit
        (inf: none); curve: f(1), f(2), ... (the last holds beyond).
      details: also return, per write, the largest writer count it saw and whether it ran at
        its limit, or below it (held back by the storage), at some instant.

    Returns:
      (W,) predicted ends; with ``details`` ``(ends, most_writers, at_limit, held_back)``.
    """
    starts, volumes, caps = (
        np.asarray(start, float).tolist(),
        np.asarray(volume, float).tolist(),
        np.asarray(limit, float).tolist(),
    )
    f = [float(x) for x in curve]
    n_f, n_writes = len(f), len(starts)
    ends = [math.nan] * n_writes
    most, at_limit, held = [0] * n_writes, [False] * n_writes, [False] * n_writes
    active: list = []  # (cap, index), by cap ascending: the water-filling's order
    left: dict = {}
    inf = math.inf
    p = 0
    t = starts[0] if n_writes else 0.0
    while p < n_writes or active:
        while p < n_writes and starts[p] <= t:
            bisect.insort(active, (caps[p], p))
            left[p] = volumes[p]
            p += 1
        if not active:
            t = starts[p]
            continue
        n = len(active)
        total = f[n - 1] if n <= n_f else f[-1]
        level, before = inf, 0.0
        for k, (cap, _) in enumerate(active):
            share = (total - before) / (n - k)
            if share <= cap:
                level = share
                break
            before += cap
        dt = inf
        for cap, i in active:
            rate = cap if cap < level else level
            due = left[i] / rate
            if due < dt:
                dt = due
        upcoming = starts[p] if p < n_writes else inf
        step = dt if t + dt < upcoming else upcoming - t
        now = t + dt if t + dt < upcoming else upcoming
        kept = []
        for cap, i in active:
            rate = cap if cap < level else level
            rest = left[i] - rate * step
            if details:
                most[i] = max(most[i], n)
                if cap <= level:
                    at_limit[i] = True
                else:
                    held[i] = True
            if rest <= 1e-9 * volumes[i]:  # its volume ran out at this event (to rounding)
                ends[i] = now
                del left[i]
            else:
                left[i] = rest
                kept.append((cap, i))
        active = kept
        t = now
    ends = np.asarray(ends)
    if details:
        return ends, np.asarray(most), np.asarray(at_limit), np.asarray(held)
    return ends


def _curve(peak: float, saturates_at: int, degradation: float, n_max: int) -> list:
    return [storage_curve(n, peak, saturates_at, degradation) for n in range(1, max(n_max, saturates_at) + 1)]


def observed_writers(start, end) -> tuple:
    """(W,) the time-weighted mean and the largest number of writes in progress (the logs' own
    concurrency, the write itself included) over each write's observed interval."""
    start, end = np.asarray(start, float), np.asarray(end, float)
    times = np.concatenate([start, end])
    steps = np.concatenate([np.ones_like(start), -np.ones_like(end)])
    order = np.lexsort((steps, times))  # ends before starts at one instant
    times, steps = times[order], steps[order]
    count = np.cumsum(steps)
    area = np.concatenate([[0.0], np.cumsum(count[:-1] * np.diff(times))])

    def integral(at):
        k = np.searchsorted(times, at, side="right") - 1
        k = np.clip(k, 0, len(times) - 1)
        return area[k] + count[k] * (at - times[k])

    mean = (integral(end) - integral(start)) / (end - start)
    # The largest count over each interval: the count after its start and after every event inside.
    k0 = np.searchsorted(times, start, side="right") - 1
    k1 = np.searchsorted(times, end, side="left") - 1
    most = np.empty(len(start), np.int64)
    # A sparse table of range maxima of the count (O(n log n)), queried for every interval at once.
    table = [count]
    span = 1
    while 2 * span <= len(count):
        previous = table[-1]
        table.append(np.maximum(previous[:-span], previous[span:]))
        span *= 2
    lo, hi = np.minimum(k0, k1), np.maximum(k0, k1)
    length = hi - lo + 1
    level = np.floor(np.log2(np.maximum(length, 1))).astype(int)
    for j in np.unique(level):
        rows = level == j
        width = 1 << int(j)
        most[rows] = np.maximum(table[j][lo[rows]], table[j][hi[rows] - width + 1])
    return mean, most


def _windows(n_writes: int, start, end, fit_writes: int, n_windows: int) -> list:
    """Contiguous blocks of the writes (by start) to fit on: ``(first replayed, first scored,
    end)`` each, the replay starting with every write still running at the block's start."""
    if n_writes <= fit_writes:
        return [(0, 0, n_writes)]
    size = fit_writes // n_windows
    reach = np.maximum.accumulate(end)  # the latest end among the writes so far
    blocks = []
    for j in range(n_windows):
        first = int(round(j * (n_writes - size) / max(n_windows - 1, 1)))
        warm = int(np.searchsorted(reach, start[first], side="right"))  # writes before it ended before
        blocks.append((min(warm, first), first, first + size))
    return blocks


# least_squares' tolerances for the chosen k (its interval is narrow where the logs are exact).
TIGHT = 1e-12
# The profile over k: every k up to SCAN_EVERY, then a grid growing by SCAN_GROWTH (refined
# around its best) up to the most writes in progress at once.
SCAN_EVERY = 48
SCAN_GROWTH = 1.1
# The 95 % quantile of chi-square with one degree of freedom (likelihood-ratio bounds).
CHI2_95 = 3.841458820694124


class _Cost:
    """A k of the profile left unrefined (far outside the bound): its cost and residuals."""

    def __init__(self, cost: float, fun: np.ndarray):
        self.cost, self.fun = cost, fun


def _gauss_newton(residuals, x, r, inlier, clock: float, usable=(True, True, True)) -> tuple:
    """``(covariance, keep, s2)`` of the three storage parameters at ``x``: the Jacobian of the
    raw residuals by central differences on the ``inlier`` writes, the residual variance
    ``s2`` (no smaller than the clock's), and ``s2 (JᵀJ)⁻¹`` over the columns ``keep`` (usable,
    and felt by some write); NaN elsewhere, and wherever JᵀJ is singular."""
    steps = np.array([1e-5, 1e-5, 1e-5 * max(1.0, abs(x[2]))])
    columns = []
    for j in range(3):
        up, down = x.copy(), x.copy()
        up[j] += steps[j]
        down[j] -= steps[j]
        columns.append((residuals(up) - residuals(down)) / (2 * steps[j]))
    jacobian = np.stack(columns, axis=1)[inlier]
    m = int(inlier.sum())
    s2 = max(float(np.sum(r[inlier] ** 2) / max(m - 3, 1)), clock)
    keep = [j for j in range(3) if usable[j] and np.any(jacobian[:, j] != 0)]
    covariance = np.full((3, 3), np.nan)
    if keep and m > len(keep):
        sub = jacobian[:, keep]
        try:
            covariance[np.ix_(keep, keep)] = s2 * np.linalg.inv(sub.T @ sub)
        except np.linalg.LinAlgError:
            pass
    return covariance, keep, s2


def _spread(residuals, x, r, inlier, clock: float) -> np.ndarray:
    """(3,) the Gauss-Newton standard deviations at ``x`` (NaN where the Jacobian is singular)."""
    variance = np.diag(_gauss_newton(residuals, x, r, inlier, clock)[0])
    return np.sqrt(np.where(variance >= 0, variance, np.nan))


@dataclasses.dataclass(frozen=True)
class StorageFit:
    """The storage's fitted parameters (bytes/s) and how well the replay fits.

    Attributes:
      peak, saturates_at, degradation, per_node_limit: `Value`.
      loss: what was minimised.
      n_writes: writes in the logs; n_fit: writes the fit scored (in ``windows`` blocks).
      scale: the residuals' robust scale (log units).
      validation: summary of the replay of every write with the fitted values.
      observed, predicted: (W,) durations of every write, by start; concurrency: (W,) its
        observed mean writer count.
    """

    peak: Value
    saturates_at: Value
    degradation: Value
    per_node_limit: Value
    loss: str
    n_writes: int
    n_fit: int
    windows: int
    scale: float
    profile: dict
    validation: dict
    observed: np.ndarray = dataclasses.field(repr=False)
    predicted: np.ndarray = dataclasses.field(repr=False)
    concurrency: np.ndarray = dataclasses.field(repr=False)

    def curve(self, n_max: int) -> list:
        """f(1..n_max) with the fitted values (degradation 0 where not determined)."""
        degradation = self.degradation.value or 0.0
        return _curve(self.peak.value or math.nan, int(self.saturates_at.value or 1), degradation, n_max)


def fit_storage(logs: Logs, *, fit_writes: int = FIT_WRITES, windows: int = FIT_WINDOWS) -> StorageFit:
    """The ``[storage]`` curve and the per-node write limit from ``writes.csv`` (module doc)."""
    from scipy.optimize import least_squares

    start, end, volume = logs.write_start, logs.write_end, logs.write_bytes
    nodes = logs.nodes[logs.write_job]
    observed = end - start
    n_writes = len(start)
    if n_writes < 4:
        raise ValueError(f"writes.csv: {n_writes} writes; the storage fit needs at least 4")
    mean_writers, most_writers = observed_writers(start, end)
    n_max = int(most_writers.max())
    blocks = _windows(n_writes, start, end, fit_writes, windows)
    scored = np.concatenate([np.arange(first, stop) for _, first, stop in blocks])

    def predicted(x, k, details=False):
        peak, per_node, degradation = math.exp(x[0]), math.exp(x[1]), x[2]
        curve = _curve(peak, k, degradation, n_max + 1)
        out, extra = [], [[], [], []]
        for warm, first, stop in blocks:
            got = replay(start[warm:stop], volume[warm:stop], per_node * nodes[warm:stop], curve, details)
            if details:
                got, *more = got
                for store, values in zip(extra, more):
                    store.append(values[first - warm :])
            out.append(got[first - warm :] - start[first:stop])
        durations = np.concatenate(out)
        return (durations, *[np.concatenate(e) for e in extra]) if details else durations

    def residuals(x, k):
        return np.log(predicted(x, k) / observed[scored])

    # Starting values: a lone write's rate, the largest rate per node, the largest aggregate.
    rate = volume / observed
    alone = most_writers == 1
    per_node0 = float(np.max((rate / nodes)[alone] if alone.any() else rate / nodes))
    aggregate = float(np.max(rate * mean_writers))

    # Each k = 1 .. n_max (every k the logs can inform: beyond the most writes ever in progress
    # at once, k and peak trade off exactly): a first pass at scale FIRST_SCALE, started from the
    # best (by cost) of a cold start and the k before's optimum (its peak kept, or scaled by
    # k / (k - 1) to keep the rate per writer below k); then every k again at one common scale
    # (the best first pass's robust scale), so that their costs compare (the profile over k).
    # The whole profile is scanned: it need not be unimodal in k (a local minimum at a small k
    # would be a silent wrong answer).
    def first_cost(x, k):
        r = residuals(x, k)
        return float(np.sum(FIRST_SCALE**2 * (np.sqrt(1 + (r / FIRST_SCALE) ** 2) - 1)))

    starts, firsts = {}, {}

    def warm_starts(k, neighbour):
        warm = firsts[neighbour].x
        return [warm, warm + np.array([math.log(k / neighbour), 0.0, 0.0])]

    def solve(k, candidates):
        bounds = starts[k]
        candidates = [np.clip(c, np.array(bounds[0]) + 1e-9, np.array(bounds[1]) - 1e-9) for c in candidates]
        costs = [first_cost(c, k) for c in candidates]
        at = int(np.argmin(costs))
        if k in firsts and costs[at] >= firsts[k].cost:
            return
        fitted = least_squares(
            residuals, candidates[at], args=(k,), loss="soft_l1", f_scale=FIRST_SCALE, bounds=bounds, x_scale=1.0
        )
        if k not in firsts or fitted.cost < firsts[k].cost:
            firsts[k] = fitted

    def first_pass(k, previous):
        peak0 = max(aggregate, k * float(np.max(rate[alone] if alone.any() else rate)))
        x0 = np.array([math.log(peak0), math.log(per_node0 * 1.05), 0.05])
        starts[k] = ([x0[0] - 20, x0[1] - 20, 0.0], [x0[0] + 20, x0[1] + 20, 50.0])
        solve(k, [x0] + (warm_starts(k, previous) if previous is not None else []))

    # Every k up to SCAN_EVERY; beyond it (a log with very many writers at once) a geometric grid,
    # filled in with every k between the grid points around the grid's best.
    grid = list(range(1, min(n_max, SCAN_EVERY) + 1))
    while grid[-1] < n_max:
        grid.append(min(n_max, max(grid[-1] + 1, int(math.ceil(grid[-1] * SCAN_GROWTH)))))
    for i, k in enumerate(grid):
        first_pass(k, grid[i - 1] if i else None)
    best = min(firsts, key=lambda j: firsts[j].cost)
    if best > SCAN_EVERY:
        at = grid.index(best)
        for k in range(grid[at - 1] + 1, grid[min(at + 1, len(grid) - 1)]):
            if k not in firsts:
                first_pass(k, k - 1 if k - 1 in firsts else best)
    # Back down: a k whose fit from the larger k's optimum is better (a local minimum left).
    scanned = sorted(firsts)
    for i in range(len(scanned) - 2, -1, -1):
        solve(scanned[i], warm_starts(scanned[i], scanned[i + 1]))
    best = min(firsts, key=lambda j: firsts[j].cost)
    r = firsts[best].fun
    # The clock's rounding of a start and an end (uniform, one step wide each) is noise the
    # durations carry whatever the fit: a floor under the residuals' variance.
    clock = float(np.mean(logs.resolution**2 / 6 / observed[scored] ** 2))
    scale = max(1.4826 * float(np.median(np.abs(r - np.median(r)))), math.sqrt(clock), SCALE_FLOOR)
    fits = {
        best: (
            least_squares(
                residuals,
                firsts[best].x,
                args=(best,),
                bounds=starts[best],
                loss="soft_l1",
                f_scale=scale,
                xtol=TIGHT,
                ftol=TIGHT,
                gtol=TIGHT,
                x_scale=1.0,
            ),
            scale,
        )
    }
    r = fits[best][0].fun
    kept = np.abs(r - np.median(r)) <= INLIER_SCALES * scale
    variance = max(float(np.sum(r[kept] ** 2) / max(int(kept.sum()) - 3, 1)), clock)
    for k, first in firsts.items():  # the other k at the same scale: their costs, for the profile
        if k == best:
            continue
        r = residuals(first.x, k)
        above = float(np.sum(scale**2 * (np.sqrt(1 + (r / scale) ** 2) - 1)))  # soft_l1's cost there
        if 2 * (above - fits[best][0].cost) / variance > 10 * CHI2_95:  # far outside even unrefined
            fits[k] = (_Cost(above, r), scale)
            continue
        fits[k] = (
            least_squares(residuals, first.x, args=(k,), bounds=starts[k], loss="soft_l1", f_scale=scale, x_scale=1.0),
            scale,
        )
    best_k = min(fits, key=lambda j: fits[j][0].cost)
    result, scale = fits[best_k]
    x = result.x
    r = result.fun
    inlier = np.abs(r - np.median(r)) <= INLIER_SCALES * scale
    m = int(inlier.sum())
    durations, most, at_limit, held = predicted(x, best_k, details=True)

    felt = {
        "peak": int(np.sum(held)),
        "per_node_limit": int(np.sum(at_limit)),
        "degradation": int(np.sum(most > best_k)),
    }
    reasons = {
        "peak": "no write was held back by the storage in the replay (every write ran at its per-node limit): "
        "the peak is only bounded below",
        "per_node_limit": "no write ran at its per-node limit in the replay (the storage always bound first): the "
        "limit is only bounded below",
        "degradation": f"no instant had more than {best_k} writer{'s' * (best_k != 1)} (saturates_at): the "
        "degradation beyond it cannot be seen",
    }
    names = ("peak", "per_node_limit", "degradation")
    # The Jacobian's (Gauss-Newton) interval on the inliers, for the parameters some write felt.
    covariance, keep, s2 = _gauss_newton(
        lambda z: residuals(z, best_k), x, r, inlier, clock, usable=[felt[name] > 0 for name in names]
    )
    values = {}
    method = "least_squares soft_l1 on log(predicted/observed duration); Jacobian (Gauss-Newton) 95 % interval"
    for j, name in enumerate(names):
        sd = math.sqrt(covariance[j, j]) if np.isfinite(covariance[j, j]) and covariance[j, j] >= 0 else math.nan
        n_felt = felt[name]
        if j not in keep or not math.isfinite(sd):
            bound = None
            if name == "peak":
                bound = float(np.max(rate * mean_writers))
            elif name == "per_node_limit":
                bound = float(np.max(rate / nodes))
            why = reasons[name] if j not in keep else "the Jacobian is singular there"
            values[name] = _undetermined(why, n_felt, low=bound)
            continue
        if name == "degradation":  # >= 0 (a bound of the fit)
            low, high = max(float(x[2] - Z95 * sd), 0.0), float(x[2] + Z95 * sd)
            values[name] = Value(float(x[2]), low, high, n_felt, method)
        else:  # fitted in logs: the interval is symmetric there
            values[name] = Value(math.exp(x[j]), math.exp(x[j] - Z95 * sd), math.exp(x[j] + Z95 * sd), n_felt, method)
    # saturates_at: the k whose robust cost (one common scale) is within the 95 % likelihood-ratio bound.
    ss = {k: float(fit.cost) for k, (fit, _) in fits.items()}
    inside = [k for k in ss if 2 * (ss[k] - ss[best_k]) / max(s2, 1e-300) <= CHI2_95]
    method_k = f"profile over k = 1 .. {n_max} (the most writes in progress at once): likelihood-ratio bound"
    if max(inside) >= n_max:
        # k and the peak trade off exactly once k reaches the most writers the logs saw.
        values["saturates_at"] = Value(
            float(best_k),
            float(min(inside)),
            None,
            m,
            method_k,
            (f"k = {min(inside)} .. {n_max}" if min(inside) < n_max else f"k = {n_max}")
            + " (the most writes ever in progress at once) fits the logs, and so does any larger k with a peak "
            "larger in proportion: k is only bounded below",
        )
    else:
        why = ""
        if len(inside) > 1:
            why = f"k = {min(inside)} .. {max(inside)} fit the logs alike (the peak and degradation trade off with it)"
        values["saturates_at"] = Value(float(best_k), float(min(inside)), float(max(inside)), m, method_k, why)
    # Several k fit alike: the parameters k trades off with (peak, degradation, and the limit the
    # replay feels) take, at every such k, its own optimum and Jacobian interval: the union.
    for k in inside:
        if k == best_k or not hasattr(fits[k][0], "x"):
            continue
        xk, rk = fits[k][0].x, fits[k][0].fun
        sd_k = _spread(
            lambda z, k=k: residuals(z, k), xk, rk, np.abs(rk - np.median(rk)) <= INLIER_SCALES * scale, clock
        )
        for j, name in enumerate(names):
            value = values[name]
            if not value.determined:
                continue
            centre = float(xk[j]) if name == "degradation" else math.exp(xk[j])
            low, high = centre, centre
            if math.isfinite(sd_k[j]):
                low, high = (
                    (max(xk[j] - Z95 * sd_k[j], 0.0), xk[j] + Z95 * sd_k[j])
                    if name == "degradation"
                    else (math.exp(xk[j] - Z95 * sd_k[j]), math.exp(xk[j] + Z95 * sd_k[j]))
                )
            if low < value.low or high > value.high:
                values[name] = dataclasses.replace(
                    value,
                    low=float(min(low, value.low)),
                    high=float(max(high, value.high)),
                    method=value.method + f"; widened over k = {min(inside)} .. {max(inside)} (saturates_at)",
                )
    if max(inside) >= n_max and values["peak"].determined:
        # Beyond the most writers seen, f(n) = peak · n / k for every n seen: only peak / k is felt.
        values["peak"] = dataclasses.replace(
            values["peak"],
            high=None,
            method=values["peak"].method + "; no upper bound: saturates_at is not bounded above",
        )

    # Validation: every write replayed with the fitted values (peak at its bound where undetermined).
    peak = values["peak"].value or values["peak"].low
    per_node = values["per_node_limit"].value or math.inf
    degradation = values["degradation"].value or 0.0
    every = replay(start, volume, per_node * nodes, _curve(peak, best_k, degradation, n_max + 1)) - start
    log_error = np.log(every / observed)
    held_out = np.ones(n_writes, bool)
    held_out[scored] = False
    by_writers = {}
    rounded = np.clip(np.round(mean_writers).astype(int), 1, None)
    for n in np.unique(rounded):
        rows = rounded == n
        by_writers[int(n)] = {"writes": int(rows.sum()), "median_log_error": float(np.median(log_error[rows]))}
    validation = {
        "writes": n_writes,
        "held_out": int(held_out.sum()),
        "median_abs_log_error": float(np.median(np.abs(log_error))),
        "median_abs_log_error_held_out": float(np.median(np.abs(log_error[held_out]))) if held_out.any() else None,
        "share_off_by_10pct": float(np.mean(np.abs(log_error) > math.log(1.1))),
        "by_writers": by_writers,
        "most_writers": n_max,
    }
    return StorageFit(
        peak=values["peak"],
        saturates_at=values["saturates_at"],
        degradation=values["degradation"],
        per_node_limit=values["per_node_limit"],
        loss=f"soft_l1 (scipy.optimize.least_squares) on log(predicted / observed duration), scale {scale:.3g}",
        n_writes=n_writes,
        n_fit=len(scored),
        windows=len(blocks),
        scale=scale,
        profile={int(k): ss[k] for k in ss},
        validation=validation,
        observed=observed,
        predicted=every,
        concurrency=mean_writers,
    )


# --- Common causes -------------------------------------------------------------------------------


def outage_clusters(logs: Logs, window: float = WINDOW) -> list:
    """The outages in ``failures.csv``: lists of failure rows (by time) of at least two jobs,
    each within ``window`` seconds of its first failure, of one domain where the logs name
    domains (a cluster across domains is one outage per domain)."""
    times, jobs = logs.failure_time, logs.failure_job
    clusters, current = [], []
    for row in range(len(times)):
        if current and times[row] - times[current[0]] > window:
            clusters.append(current)
            current = []
        current.append(row)
    if current:
        clusters.append(current)
    if logs.domain is not None:
        split = []
        for cluster in clusters:
            for name in dict.fromkeys(logs.domain[row] for row in cluster):
                split.append([row for row in cluster if logs.domain[row] == name])
        clusters = split
    return [cluster for cluster in clusters if len({int(jobs[row]) for row in cluster}) >= 2]


def job_domains(logs: Logs, clusters: list) -> tuple:
    """(J,) each job's failure domain: the ``domain`` column's (a job with no failure: none),
    or, without it, the jobs connected by shared outages (``d1``, ``d2``, ... by first outage);
    None for a job in no domain with outages."""
    domains: list = [None] * logs.n_jobs
    if logs.domain is not None:
        for job, name in zip(logs.failure_job, logs.domain):
            domains[int(job)] = name or None
        return _group_domains(logs, domains)
    parent = list(range(logs.n_jobs))

    def root(i):
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for cluster in clusters:
        members = [int(logs.failure_job[row]) for row in cluster]
        for job in members[1:]:
            parent[root(job)] = root(members[0])
    names: dict = {}
    for cluster in clusters:
        top = root(int(logs.failure_job[cluster[0]]))
        names.setdefault(top, f"d{len(names) + 1}")
    in_outages = {int(logs.failure_job[row]) for cluster in clusters for row in cluster}
    return _group_domains(logs, [names.get(root(j)) if j in in_outages else None for j in range(logs.n_jobs)])


def _group_domains(logs: Logs, domains: list) -> tuple:
    """A job whose domain the logs do not show (no failure, or in no outage) takes its group's,
    where the group's other jobs share one."""
    for g in range(len(logs.groups)):
        members = np.flatnonzero(logs.group == g)
        known = {domains[j] for j in members if domains[j] is not None}
        if len(known) == 1:
            for j in members:
                domains[j] = domains[j] or next(iter(known))
    return tuple(domains)


@dataclasses.dataclass(frozen=True)
class DomainFit:
    """One failure domain: its jobs, its outages and their mean time between (`Value`, s)."""

    name: str
    jobs: tuple
    outages: int
    span: float
    mtbf: Value


def _poisson_mtbf(count: int, span: float) -> Value:
    """The mean time between events of a Poisson process seen ``count`` times in ``span``:
    ``span / count`` with the exact (Garwood) 95 % interval."""
    from scipy.stats import chi2

    high = math.inf if count == 0 else float(2 * span / chi2.ppf(0.025, 2 * count))
    low = float(2 * span / chi2.ppf(0.975, 2 * count + 2))
    if count == 0:
        return _undetermined(f"none in {span:.4g} s of observation: the MTBF is only bounded below", 0, low=low)
    return Value(span / count, low, high, count, "events / observed time; exact Poisson (chi-square) interval")


def fit_domains(logs: Logs, clusters: list, domains: tuple) -> list:
    """Each domain's outage MTBF over the span its jobs are observed."""
    fitted = []
    for name in dict.fromkeys(d for d in domains if d is not None):
        members = tuple(j for j in range(logs.n_jobs) if domains[j] == name)
        count = sum(1 for cluster in clusters if domains[int(logs.failure_job[cluster[0]])] == name)
        span = float(logs.last[list(members)].max() - logs.first[list(members)].min())
        fitted.append(DomainFit(name, members, count, span, _poisson_mtbf(count, span)))
    return fitted


# --- Failures ------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class GroupFit:
    """One group of jobs (one failure domain): sizes, interval, volume and failure law.

    Times in s, volumes in B. ``failure_shape`` is the Weibull k; ``k1_p_value`` the
    likelihood-ratio test of k = 1; ``mtbf`` the Weibull mean where k = 1 is rejected at 5 %,
    else the exponential MTBF. ``gaps``/``gaps_censored``: the times to failure (s) behind it.
    """

    name: str
    group: str
    domain: str | None
    jobs: tuple
    gpus: int
    nodes: int
    notes: tuple
    interval: Value
    checkpoint: Value
    mtbf: Value
    mtbf_exponential: Value
    mtbf_weibull: Value
    failure_shape: Value
    k1_p_value: float | None
    restart: Value
    ks_p_value: float | None
    gaps: np.ndarray = dataclasses.field(repr=False)
    gaps_censored: np.ndarray = dataclasses.field(repr=False)


def _segments(logs: Logs, jobs: tuple, outage_rows: set) -> tuple:
    """Times to a job's own failure from its last restart end (or its window's start):
    (uncensored, right-censored) in s, censored at outages and at the window's end."""
    events, censored = [], []
    restart_end = logs.restart_end
    for job in jobs:
        clock = float(logs.first[job])
        for row in np.flatnonzero(logs.failure_job == job):
            t = float(logs.failure_time[row])
            if t > clock:
                (censored if row in outage_rows else events).append(t - clock)
            elif row not in outage_rows:
                events.append(max(t - clock, 1e-3))  # a failure at its restart's end
            ended = math.nan if restart_end is None else float(restart_end[row])
            clock = ended if math.isfinite(ended) else t
        if logs.last[job] > clock:
            censored.append(float(logs.last[job]) - clock)
    return np.asarray(events), np.asarray(censored)


def _failure_law(events: np.ndarray, censored: np.ndarray) -> tuple:
    """(exponential MTBF, Weibull mean, Weibull k, p-value of k = 1, KS p-value) by maximum
    likelihood on right-censored data (scipy.stats)."""
    from scipy import stats
    from scipy.special import digamma, gamma

    n = len(events)
    total = float(events.sum() + censored.sum())
    if n == 0:
        why = "no failure observed"
        exponential = _poisson_mtbf(0, total)
        return exponential, _undetermined(why), _undetermined(why), None, None
    data = stats.CensoredData(uncensored=events, right=censored)
    scale_e = float(stats.expon.fit(data, floc=0)[1])
    exponential = dataclasses.replace(
        _poisson_mtbf(n, total),
        value=float(scale_e),
        method="exponential MLE (scipy.stats.expon.fit, censored); exact chi-square interval",
    )
    if n < 3:
        why = f"{n} failure{'s' * (n != 1)}: too few for a shape"
        return exponential, _undetermined(why, n), _undetermined(why, n), None, None
    c, _, scale = np.asarray(stats.weibull_min.fit(data, floc=0), np.float64).tolist()

    def loglik(log_c, log_scale):
        shape, scale = math.exp(log_c), math.exp(log_scale)
        law = stats.weibull_min
        return float(np.sum(law.logpdf(events, shape, scale=scale)) + np.sum(law.logsf(censored, shape, scale=scale)))

    point = np.array([math.log(c), math.log(scale)])
    h = 1e-4
    hessian = np.empty((2, 2))
    for i in range(2):
        for j in range(2):
            e_i, e_j = np.eye(2)[i] * h, np.eye(2)[j] * h
            hessian[i, j] = (
                loglik(*(point + e_i + e_j))
                - loglik(*(point + e_i - e_j))
                - loglik(*(point - e_i + e_j))
                + loglik(*(point - e_i - e_j))
            ) / (4 * h * h)
    ll_weibull = loglik(*point)
    ll_exponential = float(
        np.sum(stats.expon.logpdf(events, scale=scale_e)) + np.sum(stats.expon.logsf(censored, scale=scale_e))
    )
    statistic = max(2 * (ll_weibull - ll_exponential), 0.0)
    p_value = float(stats.chi2.sf(statistic, 1))
    mean = scale * gamma(1 + 1 / c)
    method = "Weibull MLE (scipy.stats.weibull_min.fit, censored); observed-information 95 % interval"
    try:
        covariance = np.linalg.inv(-hessian)
    except np.linalg.LinAlgError:
        covariance = np.full((2, 2), np.nan)
    sd_c = math.sqrt(covariance[0, 0]) if covariance[0, 0] > 0 else math.nan
    grad = np.array([-digamma(1 + 1 / c) / c, 1.0])  # d log(mean) / d (log k, log scale)
    var_mean = float(grad @ covariance @ grad)
    sd_mean = math.sqrt(var_mean) if var_mean > 0 else math.nan
    shape = Value(float(c), c * math.exp(-Z95 * sd_c), c * math.exp(Z95 * sd_c), n, method)
    weibull = Value(float(mean), mean * math.exp(-Z95 * sd_mean), mean * math.exp(Z95 * sd_mean), n, method)
    ks = float(stats.kstest(events, stats.weibull_min(c, scale=scale).cdf).pvalue)
    return exponential, weibull, shape, p_value, ks


def _restart(logs: Logs, jobs: tuple, outage_rows: set) -> Value:
    if logs.restart_end is None:
        return _undetermined("failures.csv has no restart_end column")
    rows = [r for r in np.flatnonzero(np.isin(logs.failure_job, jobs)) if r not in outage_rows]
    took = np.asarray([logs.restart_end[r] - logs.failure_time[r] for r in rows])
    took = took[np.isfinite(took)]
    if len(took) == 0:
        return _undetermined("no restart_end logged for a failure of its own", 0)
    if len(took) == 1:
        return Value(float(took[0]), None, None, 1, "one restart")
    return _mean_value(took, logs.resolution, "mean of restart_end - time; Student's t interval")


def _intervals(logs: Logs, jobs: tuple) -> Value:
    """Compute between a write's end and the job's next write start, with no failure between."""
    gaps = []
    for job in jobs:
        mine = np.flatnonzero(logs.write_job == job)
        ends, starts = logs.write_end[mine][:-1], logs.write_start[mine][1:]
        fails = np.sort(logs.failure_time[logs.failure_job == job])
        clean = np.searchsorted(fails, ends) == np.searchsorted(fails, starts)
        gaps.append((starts - ends)[clean])
    gaps = np.concatenate(gaps) if gaps else np.zeros(0)
    if len(gaps) < 2:
        return _undetermined(
            f"{len(gaps)} interval{'s' * (len(gaps) != 1)} between writes with no failure between", len(gaps)
        )
    return _mean_value(gaps, logs.resolution, "mean of next start - end; Student's t interval")


def _mean_value(samples: np.ndarray, resolution: float, method: str) -> Value:
    """The mean of differences of logged times with its interval, no narrower than the
    clock's step either side: the logs cannot resolve a time difference more finely."""
    estimate = mean_ci(samples)
    half = max(estimate.high - estimate.mean, resolution)
    return Value(estimate.mean, estimate.mean - half, estimate.mean + half, len(samples), method)


def _volume(logs: Logs, jobs: tuple) -> Value:
    volumes = logs.write_bytes[np.isin(logs.write_job, jobs)]
    if len(volumes) == 0:
        return _undetermined("no write logged", 0)
    if len(volumes) == 1:
        return Value(float(volumes[0]), None, None, 1, "one write")
    estimate = mean_ci(volumes)
    return Value(estimate.mean, estimate.low, estimate.high, len(volumes), "mean bytes per write; Student's t interval")


def _common(values: np.ndarray, what: str, name: str) -> tuple:
    """The group's value (its most common) and a note where its jobs differ."""
    found, counts = np.unique(values, return_counts=True)
    value = int(found[np.argmax(counts)])
    note = (
        ()
        if len(found) == 1
        else (f"{name}: its jobs have {what} {', '.join(str(int(v)) for v in found)}; the file takes {value}",)
    )
    return value, note


def fit_groups(logs: Logs, clusters: list, domains: tuple) -> list:
    """Per group (split by failure domain), the sizes, interval, volume and failure law."""
    outage_rows = {row for cluster in clusters for row in cluster}
    fitted = []
    for g, group in enumerate(logs.groups):
        members = [j for j in range(logs.n_jobs) if logs.group[j] == g]
        split = list(dict.fromkeys(domains[j] for j in members))
        for domain in split:
            jobs = tuple(j for j in members if domains[j] == domain)
            name = group if len(split) == 1 else f"{group} ({domain or 'no outages'})"
            gpus, note_g = _common(logs.gpus[list(jobs)], "gpus", name)
            nodes, note_n = _common(logs.nodes[list(jobs)], "nodes", name)
            events, censored = _segments(logs, jobs, outage_rows)
            exponential, weibull, shape, p_value, ks = _failure_law(events, censored)
            rejected = p_value is not None and p_value < 0.05
            fitted.append(
                GroupFit(
                    name=name,
                    group=group,
                    domain=domain,
                    jobs=jobs,
                    gpus=gpus,
                    nodes=nodes,
                    notes=note_g + note_n,
                    interval=_intervals(logs, jobs),
                    checkpoint=_volume(logs, jobs),
                    mtbf=weibull if rejected else exponential,
                    mtbf_exponential=exponential,
                    mtbf_weibull=weibull,
                    failure_shape=shape,
                    k1_p_value=p_value,
                    restart=_restart(logs, jobs, outage_rows),
                    ks_p_value=ks,
                    gaps=events,
                    gaps_censored=censored,
                )
            )
    return fitted


def _stagger(logs: Logs, clusters: list, groups: list) -> Value:
    """Δ of the restart stagger: one outage's restarts end in order, the k-th k·Δ after its
    group's restart time. The median of the steps between consecutive restart excesses
    (restart_end − time − R, by restart end) over every outage, with its order-statistic 95 %
    interval (a job's own failure that falls in an outage's window adds a step the median
    shrugs off), no narrower than the clock's step."""
    from scipy.stats import binom

    if logs.restart_end is None or not clusters:
        return _undetermined("no outage with logged restart ends")
    restart_of = {job: fit.restart.value for fit in groups for job in fit.jobs}
    restart_end = logs.restart_end
    steps = []
    for cluster in clusters:
        excess = [
            restart_end[row] - logs.failure_time[row] - restart_of[int(logs.failure_job[row])]
            for row in sorted(cluster, key=lambda r: restart_end[r])
            if restart_of.get(int(logs.failure_job[row])) is not None and math.isfinite(restart_end[row])
        ]
        steps += np.diff(excess).tolist()
    if not steps:
        return _undetermined("no outage with two restart ends", 0)
    steps = np.sort(np.asarray(steps))
    n = len(steps)
    median = float(np.median(steps))
    low_rank = int(binom.ppf(0.025, n, 0.5))  # the order statistics that bracket the median at 95 %
    high_rank = min(n - 1, n - low_rank)
    low = min(float(steps[max(low_rank - 1, 0)]), median) - logs.resolution
    high = max(float(steps[high_rank]), median) + logs.resolution
    return Value(max(median, 0.0), max(low, 0.0), max(high, 0.0), n, "median step of restart ends; order statistics")


# --- The whole fit -------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Fit:
    """What `from_logs` fitted: `StorageFit`, one `GroupFit` per group (and domain), one
    `DomainFit` per failure domain with outages, the restart stagger, the outages found."""

    logs: Logs = dataclasses.field(repr=False)
    window: float
    storage: StorageFit
    groups: list
    domains: list
    stagger: Value
    clusters: list = dataclasses.field(repr=False)
    seconds: dict = dataclasses.field(default_factory=dict)

    def to_dict(self) -> dict:
        """Plain data for fit.json (times in s, sizes in B, bandwidths in B/s)."""
        storage = self.storage
        return {
            "logs": self.logs.folder,
            "time_unit": self.logs.time_unit,
            "window_s": self.window,
            "storage": {
                **{
                    name: getattr(storage, name).to_dict()
                    for name in ("peak", "saturates_at", "degradation", "per_node_limit")
                },
                "loss": storage.loss,
                "writes": storage.n_writes,
                "fitted_on": storage.n_fit,
                "windows": storage.windows,
                "profile_sum_of_squares": storage.profile,
                "validation": storage.validation,
            },
            "groups": [
                {
                    "name": g.name,
                    "group": g.group,
                    "domain": g.domain,
                    "jobs": [self.logs.jobs[j] for j in g.jobs],
                    "gpus": g.gpus,
                    "nodes": g.nodes,
                    "notes": list(g.notes),
                    **{
                        name: getattr(g, name).to_dict()
                        for name in (
                            "interval",
                            "checkpoint",
                            "mtbf",
                            "mtbf_exponential",
                            "mtbf_weibull",
                            "failure_shape",
                            "restart",
                        )
                    },
                    "k1_p_value": g.k1_p_value,
                    "ks_p_value": g.ks_p_value,
                    "failures": len(g.gaps),
                    "censored": len(g.gaps_censored),
                }
                for g in self.groups
            ],
            "domains": [
                {
                    "name": d.name,
                    "jobs": [self.logs.jobs[j] for j in d.jobs],
                    "outages": d.outages,
                    "span_s": d.span,
                    "mtbf": d.mtbf.to_dict(),
                }
                for d in self.domains
            ],
            "restart_stagger": self.stagger.to_dict(),
            "outages": len(self.clusters),
            "seconds": self.seconds,
        }


def from_logs(logs, *, window: float = WINDOW, fit_writes: int = FIT_WRITES) -> Fit:
    """Fits the model to a cluster's logs (a folder with ``jobs.csv``, ``writes.csv`` and
    ``failures.csv``, or a `ckpt_jax._logs.Logs`); module doc for what and how.

    Args:
      logs: the folder, or logs already read.
      window: failures of several jobs within this many seconds of the first are one outage.
      fit_writes: the storage is fitted on at most this many writes (windows of the log).

    Raises:
      ckpt_jax._logs.LogError: a bad log (file, row and column named).
      ValueError: ``window`` not > 0, or too few writes to fit the storage.
    """
    import time

    if not (isinstance(window, (int, float)) and math.isfinite(window) and window > 0):
        raise ValueError(f"window must be a duration > 0 in seconds, got {window!r}")
    if not (isinstance(fit_writes, int) and fit_writes >= 10):
        raise ValueError(f"fit_writes must be an int >= 10, got {fit_writes!r}")
    seconds = {}
    started = time.perf_counter()
    if not isinstance(logs, Logs):
        logs = read_logs(logs)
    seconds["read"] = time.perf_counter() - started
    started = time.perf_counter()
    storage = fit_storage(logs, fit_writes=fit_writes)
    seconds["storage"] = time.perf_counter() - started
    started = time.perf_counter()
    clusters = outage_clusters(logs, window)
    domains = job_domains(logs, clusters)
    groups = fit_groups(logs, clusters, domains)
    fitted_domains = [d for d in fit_domains(logs, clusters, domains)]
    stagger = _stagger(logs, clusters, groups)
    seconds["failures"] = time.perf_counter() - started
    return Fit(logs, float(window), storage, groups, fitted_domains, stagger, clusters, seconds)


def write(fit: Fit, out) -> list:
    """Writes ``fleet.toml``, ``fit.json``, ``report.md`` and its figures into ``out``;
    returns the paths written."""
    from ._fit_report import write_all

    return write_all(fit, Path(out))


# --- Logs of a simulated run (``ckpt-jax simulate --fleet F --logs DIR``) ------------------------


@dataclasses.dataclass(frozen=True)
class DrawnFailures:
    """A run's failures drawn on the host: rows ``(job, time, restart_end, domain, cause)`` by
    time, and the fleet-file spec that replays them exactly (own failures as a failure trace,
    outages as listed instants)."""

    rows: list
    spec: FleetSpec


def draw_failures(spec, horizon: float, seed: int) -> DrawnFailures:
    """Draws every failure of a fleet file's jobs up to ``horizon`` by the file's laws
    (docs/model.md §1c, §1f): each job's own failures (exponential, Weibull of shape k counted
    from its last restart end, or the file's failure trace), its domain's outages (drawn or
    listed; they fail the jobs of the domain that are up, whose restarts end in job order,
    k·Δ apart), no failure while down; with numpy's generator of ``seed``.

    Raises:
      ValueError: a file whose restart ends depend on the run (``recovery_read``,
        ``fail_while_down``) or with two-level checkpoints (a drain's start is not a firing).
    """
    from .fleetfile import Outage

    if spec.fail_while_down:
        raise ValueError("--logs: fail_while_down is not logged yet (a failure while down restarts the recovery)")
    if any(group.recovery_read for group in spec.groups):
        raise ValueError("--logs: recovery_read is not logged yet (the restart's end depends on the storage)")
    if spec.has_snapshots:
        raise ValueError("--logs: two-level checkpoints (snapshot) are not logged yet; give blocking writes")
    rng = np.random.default_rng(seed)
    n_jobs = spec.n_jobs
    mtbf, restart = spec.per_job("mtbf"), spec.per_job("restart")
    shape = spec._per_job_or("failure_shape", 1.0)
    listed = spec.failure_times
    domain_names, domain_of = spec.domains, spec.domain_index()

    def own_after(job: int, clock: float) -> float:
        if listed is not None:
            times = listed[job]
            k = bisect.bisect_left(times, clock)
            return times[k] if k < len(times) else math.inf
        if not math.isfinite(mtbf[job]):
            return math.inf
        k = shape[job]
        scale = mtbf[job] / math.gamma(1 + 1 / k)
        return clock + scale * float(rng.weibull(k))

    outage_times: dict = {}
    for outage in spec.outages:
        d = domain_names.index(outage.domain)
        if outage.times is not None:
            outage_times[d] = [t for t in outage.times if t <= horizon]
        else:
            times, t = [], 0.0
            while True:
                t += float(rng.exponential(outage.mtbf))
                if t > horizon:
                    break
                times.append(t)
            outage_times[d] = times
    events = sorted((t, d) for d, times in outage_times.items() for t in times)
    next_own = [own_after(j, 0.0) for j in range(n_jobs)]
    down_until = [0.0] * n_jobs
    rows = []
    own_times: list = [[] for _ in range(n_jobs)]
    k_outage = 0
    while True:
        job = int(np.argmin(next_own))
        t_own = next_own[job]
        t_outage = events[k_outage][0] if k_outage < len(events) else math.inf
        if min(t_own, t_outage) > horizon:
            break
        if t_own < t_outage:
            end = t_own + restart[job]
            rows.append((job, t_own, end, domain_names[domain_of[job]], "own"))
            own_times[job].append(t_own)
            down_until[job] = end
            next_own[job] = own_after(job, end)
            continue
        t, d = events[k_outage]
        k_outage += 1
        struck = [j for j in range(n_jobs) if domain_of[j] == d and down_until[j] <= t]
        for rank, j in enumerate(struck):
            end = t + restart[j] + rank * spec.restart_stagger
            rows.append((j, t, end, domain_names[d], "outage"))
            down_until[j] = end
            next_own[j] = own_after(j, end)
    rows.sort(key=lambda row: (row[1], row[0]))
    outages = tuple(Outage(domain_names[d], times=tuple(times)) for d, times in outage_times.items() if times)
    replayed = dataclasses.replace(
        spec,
        failure_times=tuple(tuple(times) for times in own_times),
        failure_trace="(drawn by ckpt-jax simulate --logs)",
        outages=outages,
    )
    return DrawnFailures(rows, replayed)


def run_logs(spec, drawn: DrawnFailures, fire_times, end_times, horizon: float) -> Logs:
    """The logs of one simulated fleet: its jobs (named ``group-k``), its completed writes
    (a finite end at or before ``horizon``: a write a failure abandoned has none) and the
    drawn failures. ``fire_times``/``end_times``: (N, K) of that fleet's trace."""
    fire_times, end_times = np.asarray(fire_times, np.float64), np.asarray(end_times, np.float64)
    labels = spec.labels
    names = [f"{group.name}-{k}" for group in spec.groups for k in range(group.count)]
    done = np.isfinite(end_times) & np.isfinite(fire_times) & (end_times <= horizon)
    job = np.broadcast_to(np.arange(spec.n_jobs)[:, None], fire_times.shape)[done]
    start, end = fire_times[done], end_times[done]
    order = np.lexsort((job, start))
    volume = spec.per_job("write")[job[order]]
    rows = drawn.rows
    return Logs(
        folder="",
        time_unit="s",
        jobs=tuple(names),
        groups=tuple(group.name for group in spec.groups),
        group=np.asarray(labels),
        gpus=spec.per_job("size"),
        nodes=np.repeat(group_nodes(spec), [group.count for group in spec.groups]),
        first=np.zeros(spec.n_jobs),
        last=np.full(spec.n_jobs, float(horizon)),
        write_job=job[order],
        write_start=start[order],
        write_end=end[order],
        write_bytes=volume,
        failure_job=np.asarray([row[0] for row in rows], np.int64),
        failure_time=np.asarray([row[1] for row in rows], np.float64),
        restart_end=np.asarray([row[2] for row in rows], np.float64),
        domain=tuple(row[3] for row in rows),
        cause=tuple(row[4] for row in rows),
    )


def group_nodes(spec) -> list:
    """Each group's node count as the file gives it (``nodes``), else 1."""
    tables = (spec.source or {}).get("groups", [{}] * len(spec.groups))
    return [int(table.get("nodes", 1)) for table in tables]
