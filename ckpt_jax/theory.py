"""Closed forms from the analysis (docs/model.md §3), to compare the simulator against.

These are the *other* oracle: tests compare autodiff through the engine with them, never
a closed form with itself.
"""

from __future__ import annotations

import math

import jax
import jax.core
import jax.numpy as jnp
import numpy as np

from ._validate import real_array
from .model import Throughput, throughput_table

__all__ = [
    "gap_eigenvalues",
    "n_expanding",
    "renewal_cycle_time",
    "renewal_cycle_moments",
    "renewal_waste",
    "renewal_waste_bounds",
    "optimal_interval",
    "young_interval",
    "daly_interval",
    "two_level_waste",
    "two_level_optimal_interval",
    "two_level_pair_band",
    "solo_write_time",
    "solo_period",
    "blocking_young",
]


def gap_eigenvalues(n_jobs: int, throughput: Throughput = None) -> np.ndarray:
    """Eigenvalues of the gap return map in the fully overlapping branch (claim 2, Thm 8).

    ``λ_j = (N − j) f(j) / (j f(N − j))`` for j = 1..N−1 (``(N − j)/j`` for f ≡ 1).

    Args:
      n_jobs: N >= 2.
      throughput: f as accepted by `Fleet` (None, preset name, callable, table).

    Returns:
      (N-1,) float64 array, λ_1 first (decreasing in j).
    """
    if isinstance(n_jobs, bool) or not isinstance(n_jobs, (int, np.integer)) or n_jobs < 2:
        raise ValueError(f"n_jobs must be an integer >= 2, got {n_jobs!r}")
    f = throughput_table(throughput, int(n_jobs))
    if f.ndim != 1:
        raise ValueError("throughput must describe one fleet (a table of length N + 1)")
    j = np.arange(1, n_jobs)
    return (n_jobs - j) * f[j] / (j * f[n_jobs - j])


def n_expanding(n_jobs: int) -> int:
    """Number of expanding directions of the synchronous state, ⌈N/2⌉ − 1 (claim 2)."""
    return math.ceil(n_jobs / 2) - 1


# --- Failures and checkpoint intervals (docs/model.md §1c, claim 10) -------------------------
#
# One job alone, no contention: compute T at speed 1, then a write of wall-clock length d, in
# segments of L = T + d. Failures form a Poisson process of rate 1/M while the job is up; a
# failure costs the segment so far and a restart of length R. The completed segments form a
# renewal process whose cycle X has E[X] = (M + R)(e^{L/M} − 1) (derivation: docs/model.md,
# claim 10). Everything below is that formula, its moments and its minimiser. Where failures
# also strike during the restart (Daly's model, docs/model.md §1e: ``fail_while_down``), a
# restart takes M(e^{R/M} − 1) on average instead of R, and M + R becomes M·e^{R/M}.

# ln 2 − 1/2: the write fraction d/M at which the optimal T/M is 1/2, where `optimal_interval`
# switches from solving for x = T/M to solving for u = 1 − x.
_HALF_FRACTION = math.log(2.0) - 0.5
# Terms of Σ_{k≥2} x^k / k kept for x <= 1/2 (the tail is below 2^-55 of the sum).
_SERIES_TERMS = 60


def _checked(name: str, value, *, allow_zero: bool = False, allow_inf: bool = False):
    """``value`` as an array, or `ValueError` naming ``name`` unless every entry is finite and
    > 0 (>= 0 with ``allow_zero``; +inf also allowed with ``allow_inf``). Traced values (inside
    jit / grad) are passed unchecked: validation runs on concrete inputs, before tracing."""
    if isinstance(value, jax.core.Tracer):
        return value
    values = real_array(name, value)
    bound = ">= 0" if allow_zero else "> 0"
    finite = np.isfinite(values) | (allow_inf & (values == np.inf))
    good = finite & ((values >= 0) if allow_zero else (values > 0))
    if not good.all():
        index = tuple(int(i) for i in np.argwhere(~good)[0]) if values.ndim else ()
        bad = float(values[index]) if values.ndim else float(values)
        where = f" at index {index}" if values.ndim else ""
        kind = "finite or inf" if allow_inf else "finite"
        raise ValueError(f"{name} must be {kind} and {bound}, got {bad!r}{where}")
    return value


def _floats(*values):
    """The arguments as jnp arrays of one floating dtype (float64 under x64, never forced)."""
    dtype = jnp.result_type(*values, float)
    return tuple(jnp.asarray(v, dtype) for v in values)


def renewal_cycle_time(compute, write, mtbf, restart, *, fail_while_down=False):
    """Expected wall-clock time for one job alone to complete one cycle (compute + write)
    under exponential failures: ``E[X] = (M + R)·(e^{(T + d)/M} − 1)`` (docs/model.md claim 10),
    or with failures while down ``E[X] = M·e^{R/M}·(e^{(T + d)/M} − 1)`` (§1e).
    All four arguments broadcast together; jnp arrays, differentiable.

    Args:
      compute: T > 0, the compute work of a cycle (time units at speed 1).
      write: d > 0, the wall-clock time of the job's solo write (its volume / f(1)).
      mtbf: M > 0 finite, the mean time between failures (a Poisson process in wall-clock time,
        off while the job is down unless ``fail_while_down``).
      restart: R >= 0 finite, the time down after each failure. A lone job's recovery read
        r adds its solo duration: pass R + r / min(b, f(1)) (docs/model.md §1e).
      fail_while_down: failures also strike during the restart, which then starts over
        (Daly's model; `ckpt_jax.Fleet`'s ``fail_while_down``). Default False.

    Returns:
      E[X], the broadcast shape of the inputs.

    >>> import ckpt_jax as cj
    >>> round(float(cj.theory.renewal_cycle_time(1.0, 0.0625, 1e9, 0.0)), 6)
    1.0625
    """
    compute = _checked("compute", compute)
    write = _checked("write", write)
    mtbf = _checked("mtbf", mtbf)
    restart = _checked("restart", restart, allow_zero=True)
    T, d, M, R = _floats(compute, write, mtbf, restart)
    return _per_failure(M, R, _checked_flag(fail_while_down)) * jnp.expm1((T + d) / M)


def _checked_flag(fail_while_down) -> bool:
    if not isinstance(fail_while_down, (bool, np.bool_)):
        raise ValueError(f"fail_while_down must be True or False, got {fail_while_down!r}")
    return bool(fail_while_down)


def _per_failure(M, R, fail_while_down: bool):
    """The factor of E[X]: the mean up time before a failure plus the mean recovery, M + R, or
    with failures while down M + M(e^{R/M} − 1) = M·e^{R/M}."""
    return M * jnp.exp(R / M) if fail_while_down else M + R


def _truncated_moments(M, L):
    """Mean and variance of an Exp(M) time given that it is below L (a failure within a try of
    length L): mean M − L p/q, second moment [2M² − p(L² + 2LM + 2M²)]/q, p = e^{−L/M}, q = 1 − p."""
    p = jnp.exp(-L / M)
    q = -jnp.expm1(-L / M)
    safe = jnp.where(q > 0, q, 1)
    mean = M - L * p / safe
    second = (2 * M**2 - p * (L**2 + 2 * L * M + 2 * M**2)) / safe
    return jnp.where(q > 0, mean, 0), jnp.where(q > 0, jnp.maximum(second - mean**2, 0), 0)


def renewal_waste(compute, write, mtbf, restart, *, fail_while_down=False):
    """Long-run waste of one job alone with periodic checkpoints and exponential failures,
    ``1 − T / E[X]`` with ``E[X] = (M + R)·(e^{(T + d)/M} − 1)``: the fraction of wall-clock
    time that does not end up as compute saved by a completed write (docs/model.md claim 10).
    With ``fail_while_down`` (§1e), ``M + R`` becomes ``M·e^{R/M}``.

    Args:
      compute, write, mtbf, restart: T > 0, d > 0, M > 0 finite, R >= 0 finite, as in
        `renewal_cycle_time`; they broadcast together. jnp arrays, differentiable in all four.
      fail_while_down: failures also strike during the restart (`renewal_cycle_time`).

    Returns:
      The waste in [0, 1), the broadcast shape of the inputs.

    >>> import ckpt_jax as cj
    >>> waste = cj.theory.renewal_waste(compute=1.0, write=0.1, mtbf=100.0, restart=0.5)
    >>> round(float(waste), 4)
    0.1004
    """
    compute = _checked("compute", compute)
    T, cycle = _floats(compute, renewal_cycle_time(compute, write, mtbf, restart, fail_while_down=fail_while_down))
    return 1 - T / cycle


def renewal_cycle_moments(compute, write, mtbf, restart, *, fail_while_down=False):
    """Mean and variance of the cycle time X of `renewal_cycle_time`.

    With L = T + d, p = e^{−L/M} (a try succeeds) and q = 1 − p:
    ``E[X] = (M + R)·q/p`` and ``Var[X] = [2(M + R)(M q − L p) − M² q² + R² q] / p²``
    (docs/model.md claim 10). The variance loses about (M/L)²·eps to cancellation for L ≪ M.

    With ``fail_while_down`` (§1e) each failed try costs F + Y: F, the failure time given one
    within L; Y, a restart of R that starts over at each failure (itself a sum of failed tries of
    length R, then R). With N ~ Geometric (failed tries before the one that survives, mean q/p,
    variance q/p²): ``E[X] = (q/p)·M·e^{R/M}`` and
    ``Var[X] = (q/p)(Var F + Var Y) + (q/p²)(E F + E Y)²``.

    Args:
      compute, write, mtbf, restart: as in `renewal_cycle_time`.
      fail_while_down: failures also strike during the restart (`renewal_cycle_time`).

    Returns:
      ``(mean, variance)``, each of the broadcast shape.
    """
    compute = _checked("compute", compute)
    write = _checked("write", write)
    mtbf = _checked("mtbf", mtbf)
    restart = _checked("restart", restart, allow_zero=True)
    T, d, M, R = _floats(compute, write, mtbf, restart)
    L = T + d
    p = jnp.exp(-L / M)
    q = -jnp.expm1(-L / M)
    if _checked_flag(fail_while_down):
        fail_mean, fail_var = _truncated_moments(M, L)
        # The restart: K failed tries of R (mean q_R/p_R, variance q_R/p_R²), then R itself.
        p_restart, q_restart = jnp.exp(-R / M), -jnp.expm1(-R / M)
        try_mean, try_var = _truncated_moments(M, R)
        restart_mean = M * jnp.expm1(R / M)
        restart_var = q_restart / p_restart * try_var + q_restart / p_restart**2 * try_mean**2
        mean = q / p * M * jnp.exp(R / M)
        variance = q / p * (fail_var + restart_var) + q / p**2 * (fail_mean + restart_mean) ** 2
        return mean, jnp.maximum(variance, 0)
    mean = (M + R) * q / p
    variance = (2 * (M + R) * (M * q - L * p) - (M * q) ** 2 + R**2 * q) / p**2
    return mean, jnp.maximum(variance, 0)


def renewal_waste_bounds(compute, write, mtbf, restart, horizon, *, fail_while_down=False, steady=False):
    """Bounds on the *expected* waste ``1 − E[useful work up to H] / H`` of one job alone over
    a finite horizon H, starting with a fresh cycle at t = 0.

    The useful work up to H is T·N(H), N(H) the completed cycles by H (a renewal count). From
    Wald's identity and Lorden's bound on the overshoot, ``H/μ − 1 <= E[N(H)] <= H/μ + σ²/μ²``
    (μ, σ² from `renewal_cycle_moments`), so the expected waste lies in
    ``[W − T σ²/(μ² H), W + T/H]`` around the long-run waste W = `renewal_waste`: a bias of
    order E[X]/H at most (docs/model.md claim 10). The bounds are clipped to [0, 1].

    With ``steady=True``, bounds on the expected *steady-state* waste of docs/model.md §1c
    (`JobStats.waste`): the work saved is T·N(H) plus the work U of the cycle in progress at
    H, 0 <= U <= T, so the bracket is ``[W − T σ²/(μ² H) − T/H, W + T/H]``. These are the
    bounds this proof gives, not the estimator's bias (second order, ~T²/(M·H)).

    Args:
      compute, write, mtbf, restart: as in `renewal_cycle_time`.
      horizon: H > 0 finite.
      fail_while_down: failures also strike during the restart (`renewal_cycle_time`).
      steady: bound the steady-state waste instead of ``1 − useful / H``.

    Returns:
      ``(low, high)``, each of the broadcast shape.
    """
    horizon = _checked("horizon", horizon)
    mean, variance = renewal_cycle_moments(compute, write, mtbf, restart, fail_while_down=fail_while_down)
    T, H, mean, variance = _floats(compute, horizon, mean, variance)
    waste = 1 - T / mean
    low = jnp.maximum(waste - T * variance / (mean**2 * H) - (T / H if steady else 0), 0)
    high = jnp.minimum(waste + T / H, 1)
    return low, high


def _q_series(x):
    """−x − log(1 − x) = Σ_{k≥2} x^k / k without cancellation, for 0 <= x <= about 1/2."""
    total = jnp.zeros_like(x)
    for k in range(_SERIES_TERMS, 1, -1):
        total = (total + 1.0 / k) * x
    return total * x  # Horner: x·(x/2 + x²/3 + ...)


def optimal_interval(write, mtbf, restart=0.0):
    """The compute interval T that minimises `renewal_waste` exactly (docs/model.md claim 10).

    Setting d/dT [T / (e^{(T + d)/M} − 1)] = 0 gives the first-order condition
    ``e^{(T + d)/M}·(1 − T/M) = 1``, with the unique root in (0, M)
    ``T* = M·(1 + W₀(−e^{−1 − d/M}))`` (W₀ the principal branch of Lambert's W). The restart
    time R only scales E[X] by (M + R), so T* does not depend on it (it is accepted, and
    checked, so that the call reads like `renewal_waste`).

    The root is found without the cancellation of W₀ near its branch point: for d/M <= ln 2 −
    1/2 (T*/M <= 1/2) by Newton's method on Σ_{k≥2} x^k/k = d/M for x = T/M, started from the
    branch-point series of W₀; beyond, by Newton's method on log u − u + 1 + d/M = 0 for
    u = 1 − T/M. A fixed number of steps (jit-friendly); relative error about 1e-15. The last
    step's derivative is the implicit-function one, so `jax.grad` / `jax.jacfwd` are exact.

    Args:
      write: d > 0, the solo write time.
      mtbf: M > 0 finite.
      restart: R >= 0 finite (does not change T*; the three broadcast together).

    Returns:
      T*, the broadcast shape of the inputs.

    >>> import ckpt_jax as cj
    >>> round(float(cj.theory.optimal_interval(write=0.1, mtbf=100.0)), 4)
    4.4057
    """
    write = _checked("write", write)
    mtbf = _checked("mtbf", mtbf)
    restart = _checked("restart", restart, allow_zero=True)
    d, M, R = _floats(write, mtbf, restart)
    d, M, _ = jnp.broadcast_arrays(d, M, R)
    a = d / M
    small = a <= _HALF_FRACTION

    # Near the branch point: x = T/M solves q(x) = Σ_{k≥2} x^k/k = a; q is convex and
    # increasing, q'(x) = x/(1 − x). Safe stand-in inputs keep the unused branch finite.
    a_small = jnp.where(small, a, _HALF_FRACTION / 2)
    p = jnp.sqrt(-2 * jnp.expm1(-a_small))  # W₀(z) + 1 = p − p²/3 + ..., p = √(2(1 + e z))
    x = p * (1 + p * (-1 / 3 + p * (11 / 72 + p * (-43 / 540 + p * (769 / 17280 + p * (-221 / 8505))))))
    for _ in range(4):
        x = x - (_q_series(x) - a_small) * (1 - x) / x
    x = jax.lax.stop_gradient(x)
    x_small = x - (_q_series(x) - a_small) * (1 - x) / x

    # Far from it: u = 1 − T/M solves r(u) = log u − u + 1 + a = 0; r is concave and
    # increasing on (0, 1), so Newton's steps from u = e^{−1−a} (below the root) increase
    # monotonically to it. Beyond a = 40, u < 1e-17 and T/M rounds to 1 anyway.
    a_large = jnp.clip(jnp.where(small, 1.0, a), _HALF_FRACTION, 40.0)
    u = jnp.exp(-1 - a_large)
    for _ in range(8):
        u = u - (jnp.log(u) - u + 1 + a_large) * u / (1 - u)
    u = jax.lax.stop_gradient(u)
    u_large = u - (jnp.log(u) - u + 1 + a_large) * u / (1 - u)

    return M * jnp.where(small, x_small, 1 - u_large)


# -- a fleet's solo formulas on the host (float64 NumPy; `Fleet.solo_write` and `Fleet.period`
# are their traced forms): what the designer, the fleet files and the reports compute from


def solo_write_time(write, write_limit, single_rate) -> np.ndarray:
    """A job's write (or drain) time alone, D = d / min(b, f(1)): the volume ``write`` at the
    smaller of its write limit and the storage's one-writer rate ``single_rate``."""
    return np.asarray(write, np.float64) / np.minimum(np.asarray(write_limit, np.float64), single_rate)


def solo_period(compute, write_alone, snapshot=None) -> np.ndarray:
    """A job's solo cycle: T + D with a blocking checkpoint, s + max(T, D) with a two-level one
    (``snapshot`` s; None: blocking), as `Fleet.period` (docs/model.md §1d)."""
    compute, write_alone = np.asarray(compute, np.float64), np.asarray(write_alone, np.float64)
    if snapshot is None:
        return compute + write_alone
    return np.asarray(snapshot, np.float64) + np.maximum(compute, write_alone)


def blocking_young(write_alone, mtbf, snapshot=None) -> np.ndarray:
    """Young's interval from the time a checkpoint blocks its job: √(2·D·M), D the write time
    alone; with two-level checkpoints (``snapshot`` s) the snapshot blocks, not the drain, and a
    checkpoint due before the previous drain of D ended waits for it: max(√(2·s·M), D), the
    exact optimum (`two_level_optimal_interval`) to first order in s/M and D/M."""
    write_alone, mtbf = np.asarray(write_alone, np.float64), np.asarray(mtbf, np.float64)
    if snapshot is None:
        return np.sqrt(2 * write_alone * mtbf)
    return np.maximum(np.sqrt(2 * np.asarray(snapshot, np.float64) * mtbf), write_alone)


def young_interval(write, mtbf):
    """Young's first-order optimum ``√(2 d M)`` (Young, CACM 1974; docs/model.md claim 10).

    Args:
      write: d > 0, the solo write time.
      mtbf: M > 0 finite.

    Returns:
      √(2 d M), the broadcast shape of the inputs.

    >>> import ckpt_jax as cj
    >>> float(cj.theory.young_interval(write=0.5, mtbf=100.0))
    10.0
    """
    write = _checked("write", write)
    mtbf = _checked("mtbf", mtbf)
    d, M = _floats(write, mtbf)
    return jnp.sqrt(2 * d * M)


def daly_interval(write, mtbf):
    """Daly's higher-order estimate of the optimum (J. T. Daly, FGCS 22, 2006):
    ``√(2dM)·[1 + ⅓·√(d/(2M)) + (1/9)·(d/(2M))] − d`` for d < 2M, else M.

    Args:
      write: d > 0, the solo write time.
      mtbf: M > 0 finite.

    Returns:
      The estimate, the broadcast shape of the inputs.

    >>> import ckpt_jax as cj
    >>> round(float(cj.theory.daly_interval(write=0.1, mtbf=100.0)), 4)
    4.4057
    """
    write = _checked("write", write)
    mtbf = _checked("mtbf", mtbf)
    d, M = _floats(write, mtbf)
    ratio = jnp.minimum(d / (2 * M), 1.0)  # the d >= 2M branch does not use it
    estimate = jnp.sqrt(2 * d * M) * (1 + jnp.sqrt(ratio) / 3 + ratio / 9) - d
    return jnp.where(d < 2 * M, estimate, M)


# --- Two-level checkpoints (issue 24; docs/model.md §1c, "Two-level checkpoints") -------------
#
# One job alone, no contention: compute T, a blocking snapshot s, then a drain of wall-clock
# length D in the background while the next T computes; a job whose compute ends before its
# drain waits for it. A failure (rate 1/M while up) abandons the snapshot or drain in flight;
# after a restart R the job computes a fresh T. The snapshot ends form a renewal process
# (each starts the same state: a drain of D and a compute of T, nothing else in flight) with
# E[C] = (M + R)·e^{(T + s)/M}·(1 − e^{−(s + max(T, D))/M}); a cycle saves T at its end
# (recovery from memory) or at its drain end, if no failure comes first (from storage).

_RECOVER_FROM = ("storage", "memory")


def _checked_rule(recover_from) -> str:
    if not isinstance(recover_from, str) or recover_from not in _RECOVER_FROM:
        raise ValueError(f"recover_from must be 'storage' or 'memory', got {recover_from!r}")
    return recover_from


def _float64(*values):
    """The arguments as float64 NumPy arrays, broadcast together."""
    return np.broadcast_arrays(*(np.asarray(v, np.float64) for v in values))


def two_level_waste(compute, snapshot, drain, mtbf, restart, recover_from="storage"):
    """Long-run waste of one job alone with two-level checkpoints and exponential failures
    (docs/model.md §1c, "Two-level checkpoints: the renewal formula").

    With the mean time between snapshot ends
    ``E[C] = (M + R)·e^{(T + s)/M}·(1 − e^{−(s + max(T, D))/M})``, the waste is
    ``1 − T·e^{−D/M} / E[C]`` when a failure recovers from storage (a cycle's work is saved when
    its drain ends; a failure during the drain loses it) and ``1 − T / E[C]`` when it recovers
    from memory (saved when its snapshot ends). Without failures (M = inf) both are
    ``1 − T / (s + max(T, D))``. For D → 0 and s = d this is `renewal_waste`.

    Args:
      compute: T > 0, the compute work of a cycle (time units at speed 1).
      snapshot: s >= 0 finite, the wall-clock time of the blocking snapshot.
      drain: D >= 0 finite, the wall-clock time of the background drain, d / min(b, f(1)).
      mtbf: M > 0 (inf: no failures), the mean time between failures (a Poisson process in
        wall-clock time, off while the job is down).
      restart: R >= 0 finite, the time down after each failure.
      recover_from: "storage" (default) or "memory", as `Fleet`'s `recover_from`. The five
        numbers broadcast together.

    Returns:
      The waste in [0, 1], a float64 NumPy array of the broadcast shape (a NumPy scalar for
      scalar inputs).

    >>> import ckpt_jax as cj
    >>> w = cj.theory.two_level_waste(compute=10.0, snapshot=1.0, drain=3.0, mtbf=50.0, restart=2.0)
    >>> round(float(w), 4)
    0.264
    """
    rule = _checked_rule(recover_from)
    _checked("compute", compute)
    _checked("snapshot", snapshot, allow_zero=True)
    _checked("drain", drain, allow_zero=True)
    _checked("mtbf", mtbf, allow_inf=True)
    _checked("restart", restart, allow_zero=True)
    T, s, D, M, R = _float64(compute, snapshot, drain, mtbf, restart)
    failures = np.isfinite(M)
    rate = np.where(failures, 1 / M, 0.0)
    M_safe = np.where(failures, M, 1.0)  # the unused branch stays finite
    period = s + np.maximum(T, D)
    with np.errstate(over="ignore"):
        cycle = np.where(failures, (M_safe + R) * np.exp((T + s) * rate) * -np.expm1(-period * rate), period)
    saved = T * np.exp(-D * rate) if rule == "storage" else T
    return (1 - saved / cycle)[()]


def _blocking_optimum_fraction(a):
    """x = T*/M of `optimal_interval` for a = d/M (the root of −x − log(1 − x) = a), in float64
    NumPy; a = 0 gives 0. The same two Newton iterations as `optimal_interval`."""
    small = a <= _HALF_FRACTION
    a_small = np.where(small, a, _HALF_FRACTION / 2)
    p = np.sqrt(-2 * np.expm1(-a_small))
    x = p * (1 + p * (-1 / 3 + p * (11 / 72 + p * (-43 / 540 + p * (769 / 17280 + p * (-221 / 8505))))))
    for _ in range(5):
        series = np.zeros_like(x)
        for k in range(_SERIES_TERMS, 1, -1):
            series = (series + 1.0 / k) * x
        x_safe = np.where(x > 0, x, 1.0)
        x = np.where(x > 0, x - (series * x - a_small) * (1 - x) / x_safe, 0.0)
    a_large = np.clip(np.where(small, 1.0, a), _HALF_FRACTION, 40.0)
    u = np.exp(-1 - a_large)
    for _ in range(9):
        u = u - (np.log(u) - u + 1 + a_large) * u / (1 - u)
    return np.where(small, x, 1 - u)


def two_level_optimal_interval(snapshot, drain, mtbf, restart=0.0, recover_from="storage"):
    """The compute interval T that minimises `two_level_waste` exactly (docs/model.md §1c,
    "Two-level checkpoints: the renewal formula").

    For T >= D the saved fraction is ``e^{−D/M}·T / [(M + R)(e^{(T + s)/M} − 1)]`` (storage;
    memory without e^{−D/M}): the blocking formula with the write d replaced by the snapshot s,
    times a factor free of T. Its maximiser is T_s = `optimal_interval` (write=s), about
    √(2 s M). For T < D the cycle is s + D whatever T, and T·e^{−T/M} increases up to T = M.
    So ``T* = T_s`` if T_s >= D, else ``min(D, M)``: the same for both rules, and about
    max(√(2 s M), D) for s, D ≪ M. R does not move it (it is accepted and checked so that the
    call reads like `two_level_waste`).

    Args:
      snapshot: s >= 0 finite (s = 0: T_s = 0, so T* = min(D, M)).
      drain: D >= 0 finite; s and D not both 0 (the waste then falls towards R/(M + R) as T → 0,
        with no minimum).
      mtbf: M > 0 finite.
      restart: R >= 0 finite.
      recover_from: "storage" (default) or "memory"; T* is the same for both. The four
        numbers broadcast together.

    Returns:
      T*, a float64 NumPy array of the broadcast shape (a NumPy scalar for scalar inputs).

    >>> import ckpt_jax as cj
    >>> round(float(cj.theory.two_level_optimal_interval(snapshot=0.1, drain=2.0, mtbf=100.0)), 4)
    4.4057
    >>> round(float(cj.theory.two_level_optimal_interval(snapshot=0.1, drain=8.0, mtbf=100.0)), 4)
    8.0
    """
    _checked_rule(recover_from)
    _checked("snapshot", snapshot, allow_zero=True)
    _checked("drain", drain, allow_zero=True)
    _checked("mtbf", mtbf)
    _checked("restart", restart, allow_zero=True)
    s, D, M, _ = _float64(snapshot, drain, mtbf, restart)
    if np.any((s == 0) & (D == 0)):
        raise ValueError("snapshot and drain must not both be 0: the waste then has no minimum over T > 0")
    T_s = M * _blocking_optimum_fraction(s / M)
    return np.where(T_s >= D, T_s, np.minimum(D, M))[()]


def two_level_pair_band(write, snapshot, throughput: Throughput = None, write_limit=None):
    """The compute intervals T where two identical two-level jobs couple (docs/model.md claim 11).

    With per-writer drain rates r_n = min(b, f(n)/n) and D(n) = d / r_n, the pair's coupling
    function P(δ) − δ (`ckpt_jax.coupling.coupling_function`) is exactly zero unless

        D(1) < T < T_c = D(2) − s · (D(2)/D(1) − 1),

    equivalently d > s·r_1 + (T − s)·r_2 while a lone drain keeps up (D(1) < T). Why: a
    drain outlasts its compute only by sharing storage, never when D(2) ≤ T. Two drains that
    overlap only each other are shared fairly, and the later one ends exactly as long after
    its start as the earlier one: both firings wait equally and the lag is kept. A drain is
    delayed alone only when the partner fires during it (the partner's previous drain and
    next drain both overlap it); in the T it has before its next snapshot is due it then
    shares the storage all the time but the partner's snapshot, and moves s·r_1 + (T − s)·r_2,
    whence T_c. Below D(1) every firing waits for its own drain, even alone, and the pair is
    a closed loop of two equal drains shared fairly: the lag is kept again. At s = 0 the
    upper edge is D(2) itself; the band is empty where r_2 = r_1 (no contention, or write
    limits b ≤ f(2)/2). The edges are the asynchrony experiment's prediction, which it
    checks against the measured coupling.

    Args:
      write: d > 0, each job's volume.
      snapshot: s >= 0, each job's snapshot duration.
      throughput: f(n) as `ckpt_jax.Fleet` takes it (None: f ≡ 1); f(1) and f(2) are used.
      write_limit: b > 0, inf allowed (None: no limit).

    Returns:
      ``(lower, upper)`` = (D(1), T_c) as float64 arrays of the inputs' broadcast shape; the
      band is empty where upper <= lower.

    >>> lower, upper = two_level_pair_band(write=1.0, snapshot=0.25)
    >>> float(lower), float(upper)
    (1.0, 1.75)
    """
    table = throughput_table(throughput, 2)
    d = np.asarray(_checked("write", write), np.float64)
    s = np.asarray(_checked("snapshot", snapshot, allow_zero=True), np.float64)
    b = np.inf if write_limit is None else real_array("write_limit", write_limit)
    if not np.all(b > 0):  # inf allowed (no limit); NaN and <= 0 not
        raise ValueError(f"write_limit must be > 0 (inf: no limit), got {write_limit!r}")
    one, two = np.minimum(b, table[..., 1]), np.minimum(b, table[..., 2] / 2)
    lower, shared = d / one, d / two
    return lower, shared - s * (shared / lower - 1)
