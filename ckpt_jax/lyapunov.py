"""Finite-time separation rates (FTLE) of the gap return map (docs/model.md claim 5).

Two independent estimates of how fast nearby configurations separate, per cycle (one
return of the reference job 0):

* `ftle` linearises: it iterates `ckpt_jax.maps.gap_return_map` K times and propagates
  tangents by forward-mode autodiff through the event loop — either the whole Jacobian
  (rate = (1/K) log of the largest singular value of J_K ⋯ J_1) or one tangent vector
  (rate = (1/K) log of its growth);
* `ftle_twin` is Benettin's twin-trajectory method: a copy displaced by a small ε is
  advanced by the map itself and pulled back to distance ε after every cycle.

For the same initial direction the tangent and twin rates agree to O(ε); the Jacobian
rate is the largest growth over all directions, so it is ≥ the tangent rate and
approaches it as K grows.

`ftle_horizons` runs the same propagation once and reads it several times: the rate over
a burn-in from the launch, then, with the tangent frame restarted, the rates over several
horizons after it (claim 5: a launch's uniform phases relax first, and a finite-time rate
depends on how long it is measured).

The gap map is defined only while the firing order is kept; identical jobs keep it
(claim 3). Wherever the map flags a problem (order changed, out of domain, event budget)
the run stops updating, the rate is NaN and ``status`` carries the map's flags.

All functions take one fleet and one point, are pure and already jitted (``n_cycles``,
``method`` and ``max_events`` static); batch them over fleets and points with `jax.vmap`::

    rates = jax.jit(jax.vmap(functools.partial(ftle, n_cycles=100)))(fleets, points)
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ._status import Status
from .maps import gap_return_map
from .model import Fleet

__all__ = ["FTLE", "FTLEHorizons", "ftle", "ftle_horizons", "ftle_twin", "random_gaps"]

METHODS = ("jacobian", "tangent")


class FTLE(NamedTuple):
    """Result of `ftle` / `ftle_twin` for one fleet and one starting point.

    Attributes:
      rate: () finite-time separation rate per cycle of job 0 (natural log); NaN where
        ``status != 0``.
      tangent_rate: () growth rate of the one perturbation along ``direction``: equal to
        ``rate`` for ``method="tangent"`` and for `ftle_twin`; from the same Jacobian
        product for ``method="jacobian"`` (so one run gives both, and ≤ ``rate``).
      time: () total time of the K cycles (sum of the map's return times), so
        ``rate * n_cycles / time`` is the rate per unit time.
      status: () int32, the OR of the map's status flags over the run (0 = clean).
      final: (N-1,) gap coordinates after K cycles; NaN where ``status != 0``.
    """

    rate: jax.Array
    tangent_rate: jax.Array
    time: jax.Array
    status: jax.Array
    final: jax.Array


def _check_cycles(n_cycles) -> int:
    if isinstance(n_cycles, (bool, np.bool_)) or not isinstance(n_cycles, (int, np.integer)) or n_cycles < 1:
        raise ValueError(f"n_cycles must be a Python integer >= 1 (static under jit), got {n_cycles!r}")
    return int(n_cycles)


def _unit_direction(direction, size: int, dtype):
    """The initial tangent: ``direction`` normalised, by default all gaps equally."""
    if direction is None:
        v = jnp.ones((size,), dtype)
    else:
        v = jnp.asarray(direction, dtype)
        if v.shape != (size,):
            raise ValueError(f"direction must have shape (N-1,) = ({size},), got {v.shape}")
    return v / jnp.linalg.norm(v)


def _map(fleet, max_events):
    def step(a):
        return gap_return_map(fleet, a, max_events=max_events)

    return step


def _check_horizons(horizons) -> tuple:
    def cycles(k):
        return not isinstance(k, (bool, np.bool_)) and isinstance(k, (int, np.integer)) and k >= 1

    if not isinstance(horizons, tuple) or not horizons or not all(cycles(k) for k in horizons):
        raise ValueError(f"horizons must be a non-empty tuple of integers >= 1 (static under jit), got {horizons!r}")
    return tuple(int(k) for k in horizons)


def _check_burn_in(burn_in) -> int:
    if isinstance(burn_in, (bool, np.bool_)) or not isinstance(burn_in, (int, np.integer)) or burn_in < 0:
        raise ValueError(f"burn_in must be a Python integer >= 0 (static under jit), got {burn_in!r}")
    return int(burn_in)


def _propagate(fleet, a, horizons, burn_in, method, direction, max_events):
    """One run of ``burn_in + max(horizons)`` cycles; the tangent frame restarts after the burn-in.

    Returns (top, along, time) at each mark — the burn-in's end (if any) first, then each
    horizon after it — as sums of log growth, plus the point after the burn-in, the status
    and the final point.
    """
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    a = jnp.asarray(a)
    step = _map(fleet, max_events)
    size = a.shape[-1]
    dtype = a.dtype
    unit = _unit_direction(direction, size, dtype)

    def with_value(x):
        y, info = step(x)
        return y, (y, info)

    if method == "jacobian":
        basis = jnp.eye(size, dtype=dtype)

        def advance(x, frame) -> tuple:  # (next point, step info, pushed frame)
            jacobian, (y, info) = jax.jacfwd(with_value, has_aux=True)(x)
            return y, info, jacobian @ frame

        def measure(frame):
            # The normalised product's σ_max and its image of v; the other factors are in log_growth.
            return jnp.log(jnp.linalg.norm(frame, ord=2)), jnp.log(jnp.linalg.norm(frame @ unit))

    else:
        basis = unit

        def advance(x, frame) -> tuple:
            (y, info), (tangent, _) = jax.jvp(step, (x,), (frame,))
            return y, info, tangent

        def measure(frame):
            zero = jnp.zeros((), dtype)  # the frame is the unit tangent: its growth is all in log_growth
            return zero, zero

    n_steps = burn_in + max(horizons)
    marks = ([burn_in - 1] if burn_in else []) + [burn_in + k - 1 for k in horizons]
    is_mark = np.zeros(n_steps, bool)
    is_mark[marks] = True
    is_restart = np.zeros(n_steps, bool)
    if burn_in:
        is_restart[burn_in] = True

    def body(carry, flags):
        mark, restart = flags
        x, frame, log_growth, time, status, start = carry
        # The cycle index is the same in every lane, so under vmap these stay unbatched.
        frame = jnp.where(restart, basis, frame)
        log_growth = jnp.where(restart, 0, log_growth)
        time = jnp.where(restart, 0, time)
        start = jnp.where(restart, x, start)
        y, info, pushed = advance(x, frame)
        scale = jnp.linalg.norm(pushed)
        ok = (status == 0) & (info.status == 0) & jnp.isfinite(scale) & (scale > 0)
        # A failed lane keeps its last good point and frame (the map stays safe there).
        safe_scale = jnp.where(ok, scale, 1)
        frame = jnp.where(ok, pushed / safe_scale, frame)
        log_growth = log_growth + jnp.log(safe_scale)
        time = time + jnp.where(ok, info.return_time, 0)
        status = status | info.status | jnp.where(ok | (info.status != 0) | (status != 0), 0, int(Status.DEGENERATE))
        # σ_max (an SVD) only where a rate is read.
        top, along = jax.lax.cond(mark, measure, lambda f: (jnp.zeros((), dtype), jnp.zeros((), dtype)), frame)
        record = (log_growth + top, log_growth + along, time)
        return (jnp.where(ok, y, x), frame, log_growth, time, status, start), record

    init = (a, basis, jnp.zeros((), dtype), jnp.zeros((), dtype), jnp.zeros((), jnp.int32), a)
    (x, _, _, _, status, start), (top, along, time) = jax.lax.scan(
        body, init, (jnp.asarray(is_mark), jnp.asarray(is_restart))
    )
    index = np.asarray(marks)
    return top[index], along[index], time[index], start, status, x


# Jitted with the cycle count, method and budget static, so a direct call compiles once per
# shape instead of re-tracing the scan; the entry points nest under a caller's jit and vmap.
@functools.partial(jax.jit, static_argnames=("n_cycles", "method", "max_events"))
def ftle(
    fleet: Fleet,
    a,
    n_cycles: int,
    *,
    method: str = "jacobian",
    direction=None,
    max_events: int | None = None,
) -> FTLE:
    """Finite-time separation rate of the K-cycle gap map, by autodiff through the engine.

    Args:
      fleet: a single `Fleet` (batch shape ()), N >= 2, jobs 1..N-1 in firing order.
      a: (N-1,) starting gap coordinates (see `ckpt_jax.maps.gap_return_map`, `random_gaps`).
      n_cycles: K >= 1 map iterations (static under jit).
      method: ``"jacobian"``: rate = (1/K) log σ_max(J_K ⋯ J_1), the largest growth over
        all perturbations, from the full Jacobian of every cycle (`jax.jacfwd`, N − 1
        tangents); ``"tangent"``: rate = (1/K) log |J_K ⋯ J_1 v| for the unit vector v
        along ``direction`` (one `jax.jvp` per cycle, cheaper at large N).
      direction: (N-1,) initial tangent v (default: all ones, normalised); for
        ``"jacobian"`` it only sets ``tangent_rate``.
      max_events: event budget per cycle (default: that of `gap_return_map`).

    Returns:
      An `FTLE`. The product is renormalised every cycle and the log scale summed, so long
      runs neither overflow nor underflow.
    """
    n_cycles = _check_cycles(n_cycles)
    top, along, time, _, status, x = _propagate(fleet, a, (n_cycles,), 0, method, direction, max_events)
    return _result(top[0] / n_cycles, along[0] / n_cycles, time[0], status, x)


class FTLEHorizons(NamedTuple):
    """Result of `ftle_horizons` for one fleet and one launch (H = len(horizons)).

    Attributes:
      rate: (H,) separation rate per cycle over the first ``horizons[h]`` cycles after the
        burn-in (σ_max for ``"jacobian"``, as `ftle`); NaN where ``status != 0``.
      tangent_rate: (H,) growth rate of the one perturbation started along ``direction``
        at the end of the burn-in.
      time: (H,) time those cycles took, so ``rate * horizons / time`` is the rate per unit time.
      launch_rate: () the rate over the burn-in itself, from the launch: what `ftle` with
        ``n_cycles=burn_in`` gives (NaN for ``burn_in=0``).
      launch_tangent_rate: () likewise for the one direction.
      launch_time: () time of the burn-in cycles (0 for ``burn_in=0``).
      start: (N-1,) gap coordinates at the end of the burn-in (where the horizons start).
      status: () int32, the OR of the map's flags over the whole run (0 = clean).
      final: (N-1,) gap coordinates after ``burn_in + max(horizons)`` cycles.
    """

    rate: jax.Array
    tangent_rate: jax.Array
    time: jax.Array
    launch_rate: jax.Array
    launch_tangent_rate: jax.Array
    launch_time: jax.Array
    start: jax.Array
    status: jax.Array
    final: jax.Array


@functools.partial(jax.jit, static_argnames=("horizons", "burn_in", "method", "max_events"))
def ftle_horizons(
    fleet: Fleet,
    a,
    horizons: tuple,
    *,
    burn_in: int = 0,
    method: str = "jacobian",
    direction=None,
    max_events: int | None = None,
) -> FTLEHorizons:
    """Separation rates over several horizons after a burn-in, from one run.

    The run takes ``burn_in + max(horizons)`` cycles. The burn-in propagates tangents too
    (at the cost of derivatives), so the rate a run from the launch measures over
    ``burn_in`` cycles comes with it; then the tangent frame restarts (identity, or the unit
    ``direction``) and the rate over each horizon is read on the way. With ``burn_in=0``
    and one horizon K this is `ftle` with ``n_cycles=K``.

    Args:
      fleet: a single `Fleet` (batch shape ()), N >= 2, jobs 1..N-1 in firing order.
      a: (N-1,) gap coordinates at the launch.
      horizons: tuple of K >= 1, cycles after the burn-in (static under jit).
      burn_in: cycles from the launch before the horizons start (static, >= 0).
      method, direction, max_events: as for `ftle`.

    Returns:
      An `FTLEHorizons`.
    """
    horizons = _check_horizons(horizons)
    burn_in = _check_burn_in(burn_in)
    top, along, time, start, status, x = _propagate(fleet, a, horizons, burn_in, method, direction, max_events)
    ok = status == 0
    lengths = np.asarray(horizons, np.float64)
    first = 1 if burn_in else 0
    nan = jnp.full((), jnp.nan, top.dtype)
    launch = (top[0] / burn_in, along[0] / burn_in, time[0]) if burn_in else (nan, nan, jnp.zeros((), top.dtype))
    return FTLEHorizons(
        rate=jnp.where(ok, top[first:] / lengths, jnp.nan),
        tangent_rate=jnp.where(ok, along[first:] / lengths, jnp.nan),
        time=time[first:],
        launch_rate=jnp.where(ok, launch[0], jnp.nan),
        launch_tangent_rate=jnp.where(ok, launch[1], jnp.nan),
        launch_time=launch[2],
        start=jnp.where(ok, start, jnp.nan),
        status=status.astype(jnp.int32),
        final=jnp.where(ok, x, jnp.nan),
    )


def _result(rate, tangent_rate, time, status, final) -> FTLE:
    ok = status == 0
    return FTLE(
        rate=jnp.where(ok, rate, jnp.nan),
        tangent_rate=jnp.where(ok, tangent_rate, jnp.nan),
        time=time,
        status=status.astype(jnp.int32),
        final=jnp.where(ok, final, jnp.nan),
    )


@functools.partial(jax.jit, static_argnames=("n_cycles", "max_events"))
def ftle_twin(
    fleet: Fleet,
    a,
    n_cycles: int,
    eps: float = 1e-8,
    *,
    direction=None,
    max_events: int | None = None,
) -> FTLE:
    """Finite-time separation rate by twin trajectories, renormalised every cycle (Benettin).

    The twin starts at ``a + ε v`` (v the unit ``direction``); after each cycle the
    separation's growth is logged and the twin is pulled back to distance ε along the
    current separation. This uses the map only (no derivatives), so it cross-checks
    `ftle` with ``method="tangent"`` and the same direction.

    Args:
      fleet: a single `Fleet` (batch shape ()), N >= 2.
      a: (N-1,) starting gap coordinates.
      n_cycles: K >= 1 (static under jit).
      eps: separation in units of job 0's cycle work T_0 + d_0 (default 1e-8).
        It must be small against the smallest gap, or the twin may leave the domain
        (flagged) or straddle a kink of the piecewise-smooth map.
      direction: (N-1,) initial separation (default: all ones, normalised).
      max_events: event budget per cycle.

    Returns:
      An `FTLE` (``status`` is the OR over both trajectories).
    """
    n_cycles = _check_cycles(n_cycles)
    a = jnp.asarray(a)
    step = _map(fleet, max_events)
    dtype = a.dtype
    distance = jnp.asarray(eps, dtype) * (fleet.compute[0] + fleet.write[0]).astype(dtype)
    twin = a + distance * _unit_direction(direction, a.shape[-1], dtype)

    def body(carry, _):
        x, x_twin, log_growth, time, status = carry
        y, info = step(x)
        y_twin, info_twin = step(x_twin)
        separation = y_twin - y
        size = jnp.linalg.norm(separation)
        flags = info.status | info_twin.status
        ok = (status == 0) & (flags == 0) & jnp.isfinite(size) & (size > 0)
        safe_size = jnp.where(ok, size, distance)
        return (
            jnp.where(ok, y, x),
            jnp.where(ok, y + separation * (distance / safe_size), x_twin),
            log_growth + jnp.log(safe_size / distance),
            time + jnp.where(ok, info.return_time, 0),
            status | flags | jnp.where(ok | (flags != 0) | (status != 0), 0, int(Status.DEGENERATE)),
        ), None

    start = (a, twin, jnp.zeros((), dtype), jnp.zeros((), dtype), jnp.zeros((), jnp.int32))
    (x, _, log_growth, time, status), _ = jax.lax.scan(body, start, None, length=n_cycles)
    return _result(log_growth / n_cycles, log_growth / n_cycles, time, status, x)


@jax.jit
def random_gaps(fleet: Fleet, key: jax.Array) -> jax.Array:
    """Gap coordinates of a random launch seen at a firing of job 0 (identical jobs).

    Jobs 1..N-1 sit at independent uniform cycle positions when job 0 fires, so their
    section coordinates u_j (work until their next firing) are uniform on (0, T + d);
    sorted, their differences are the gaps (docs/model.md §2). Identical jobs may be relabelled
    freely, so sorting puts them in firing order. jit- and vmap-able.

    Args:
      fleet: a single `Fleet` of identical jobs (job 0's T + d is used for all).
      key: a PRNG key.

    Returns:
      (N-1,) gaps a_j >= 0 with sum < T + d.
    """
    cycle = fleet.compute[0] + fleet.write[0]
    n_jobs = fleet.compute.shape[-1]
    uniform = jax.random.uniform(key, (n_jobs - 1,), fleet.compute.dtype)
    section = jnp.sort(uniform) * cycle
    return jnp.diff(section, prepend=jnp.zeros((1,), section.dtype))
