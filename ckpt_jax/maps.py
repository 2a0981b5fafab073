"""Return maps in section and gap coordinates (docs/model.md §2), and their spectra by autodiff.

The maps run the exact engine (`ckpt_jax.loop.step`) from one firing of job 0 to the
next, so their Jacobians come from `jax.jacfwd` *through the event loop* — forward mode
works through `lax.while_loop`; reverse mode does not. Both maps are jit-able and take a
single fleet; batch them with `jax.vmap`.

The maps are only piecewise smooth: each reports the branch of its point (all N write
windows overlapping at some instant, collision-free, or mixed) and a status. Where the map
is not defined as a smooth map of its coordinates (the firing order changes before job 0
fires again, the point is outside the domain, the loop failed) the value is NaN and the
status says why.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from . import loop
from ._plan import variants
from ._status import Status, flag
from ._validate import check_int
from .model import Fleet

__all__ = [
    "MapInfo",
    "Spectrum",
    "section_map",
    "gap_return_map",
    "spectrum",
    "work_done",
    "BRANCH_OVERLAPPING",
    "BRANCH_COLLISION_FREE",
    "BRANCH_MIXED",
    "section_carry",
]

BRANCH_OVERLAPPING = 0  # all N write windows overlap, then all N compute windows (Thm 8)
BRANCH_COLLISION_FREE = 1  # never two writers at once during the cycle
BRANCH_MIXED = 2  # anything in between

# Status bits that make a map's value undefined (NaN): everything but a kink.
_FATAL = ~int(Status.NOT_SMOOTH)


class MapInfo(NamedTuple):
    """Auxiliary output of the return maps.

    Attributes:
      branch: `BRANCH_*` code of the cycle the map followed: overlapping when at some
        instant all N jobs write and at another all N compute; collision-free when never
        two write at once; mixed otherwise.
      status: 0, or bit flags (`cj.Status`: the loop's, `Status.ORDER_CHANGED`, `Status.OUT_OF_DOMAIN`,
        `Status.UNSUPPORTED` for fleets with delay > 0 or async_fraction > 0).
      return_time: time from job 0's firing to its next firing.
      max_writers: the largest number of concurrent writers during that cycle.
      n_events: events stepped.
    """

    branch: jax.Array
    status: jax.Array
    return_time: jax.Array
    max_writers: jax.Array
    n_events: jax.Array


class Spectrum(NamedTuple):
    """Linearisation of the gap return map at a point (docs/model.md claim 2).

    Attributes:
      eigenvalues: (N-1,) eigenvalues sorted by decreasing real part (complex128/64).
      determinant: det of the Jacobian.
      n_expanding: number of eigenvalues with modulus > 1 (+ a relative tolerance).
      jacobian: (N-1, N-1) from `jax.jacfwd` through the event loop.
      info: the `MapInfo` of the point.
    """

    eigenvalues: np.ndarray
    determinant: float
    n_expanding: int
    jacobian: np.ndarray
    info: MapInfo


def _single_fleet_params(fleet: Fleet) -> loop.Params:
    _check_single_fleet(fleet)
    params = loop.flat_params(fleet)
    return jax.tree_util.tree_map(lambda x: x[0], params)


def _check_single_fleet(fleet: Fleet) -> None:
    if not isinstance(fleet, Fleet):
        raise ValueError(f"fleet must be a ckpt_jax.Fleet, got {type(fleet).__name__}")
    if fleet.batch_shape != ():
        raise ValueError(
            f"fleet must be a single fleet (batch shape ()), got batch shape {fleet.batch_shape}; "
            "use jax.vmap over fleets"
        )
    if fleet.n_jobs < 2:
        raise ValueError(f"return maps need N >= 2 jobs, got N = {fleet.n_jobs}")


def _check_coordinates(name: str, x, n_jobs: int):
    try:
        x = jnp.asarray(x)
    except TypeError as err:
        raise ValueError(f"{name} must be an array of real numbers: {err}") from None
    if x.shape != (n_jobs - 1,):
        raise ValueError(f"{name} must have shape (N-1,) = ({n_jobs - 1},), got {x.shape}")
    if not jnp.issubdtype(x.dtype, jnp.floating):
        raise ValueError(f"{name} must be floating point, got dtype {x.dtype}")
    return x


def section_carry(params: loop.Params, u_others, sharing: loop.Sharing = loop.Sharing()):
    """The coordinate conversion behind the maps: the loop state (`loop.Carry`) at the
    instant job 0 fires, from the section coordinates of jobs 1..N-1 (traceable).

    Returns ``(carry, in_domain)``.

    u ∈ (0, T] means computing with u left; u ∈ (T, T + d] writing with u − T left (and the
    next cycle's full T to follow); u = 0 is the same instant as job 0's firing (≡ T + d).

    ``sharing``: the fleet's rate rules (`loop.sharing_for`). Under "fcfs" storage job 0,
    which fires now, queues behind the other writers, and those queue in index order: with
    jobs labelled in firing order after job 0 (as `gap_return_map` has them), that is the
    order in which they fired.
    """
    compute, write = params.compute, params.write
    dtype = compute.dtype
    u = jnp.concatenate([jnp.reshape(write[0] + compute[0], (1,)), u_others.astype(dtype)])
    cycle = compute + write
    u = jnp.where(u == 0, cycle, u)
    writing = u > compute
    remaining = jnp.where(writing, u - compute, u)
    in_domain = jnp.all(~params.active | ((u > 0) & (u <= cycle)))
    carry = loop.init_carry(params, writing.astype(jnp.int32), remaining, 1, 1, False, sharing)
    carry = carry._replace(queued_at=carry.queued_at.at[0].set(0))
    return carry, in_domain


def _run_to_next_firing(params: loop.Params, carry: loop.Carry, max_events: int, sharing: loop.Sharing):
    """Steps until job 0 fires again (`loop.advance_to_firing`); an observer of each step
    tracks the most concurrent writers and computing jobs seen, and the most jobs that
    switched in one step (2 or more: a tie)."""

    def counts(c, switched):
        writers = jnp.sum(params.active & c.draining)
        computing = jnp.sum(loop.computing_mask(params, c.draining, c.waiting))
        return jnp.stack([writers, computing, switched])

    def observe(most, before, after):
        changed = params.active & ((after.draining != before.draining) | (after.fire_count != before.fire_count))
        return jnp.maximum(most, counts(after, jnp.sum(changed)))

    start = counts(carry, jnp.zeros((), jnp.int32))
    return loop.advance_to_firing(
        params, carry, 0, max_events=max_events, observe=observe, observed=start, sharing=sharing
    )


def _section_step(fleet: Fleet, u, max_events: int, sharing: loop.Sharing):
    params = _single_fleet_params(fleet)
    carry, in_domain = section_carry(params, u, sharing)
    final, most = _run_to_next_firing(params, carry, max_events, sharing)
    u_next = jnp.where(final.draining, final.write_left, 0) + final.compute_left
    status = final.status  # `advance_to_firing` flags a missed firing (MAX_EVENTS)
    status = status | flag(~in_domain, Status.OUT_OF_DOMAIN)
    # The maps are defined for the base model: with a controller delay the state at a firing
    # includes the pending updates, and with asynchronous checkpoints a draining job's compute
    # progress; neither is a function of the section coordinates (use `ckpt_jax.coupling`).
    status = status | flag(~variants(fleet).instant_blocking, Status.UNSUPPORTED)
    # Each other job must fire exactly once, in its section order (claim 3's order).
    assert final.fire_count is not None  # every loop reports it
    fired_once = jnp.all(~params.active[1:] | (final.fire_count[1:] == 1))
    status = status | flag(~fired_once, Status.ORDER_CHANGED)
    # A kink: two jobs switched in one step, or the section point itself sits on an event
    # of another job (it fires with job 0, u = 0 or T + d, or its write ends there, u = T).
    # The map is piecewise smooth and such points lie on the boundary between pieces: the
    # value is still returned; its Jacobian there is the derivative of one piece only, so
    # `spectrum` reports it but it is not "the" linearisation.
    on_edge = params.active[1:] & ((u == 0) | (u == params.compute[1:] + params.write[1:]) | (u == params.compute[1:]))
    status = status | flag((most[2] > 1) | jnp.any(on_edge), Status.NOT_SMOOTH)
    n_active = jnp.sum(params.active)
    most_writers, most_computing = most[0], most[1]
    overlapping = (most_writers >= n_active) & (most_computing >= n_active)
    branch = jnp.where(
        overlapping, BRANCH_OVERLAPPING, jnp.where(most_writers <= 1, BRANCH_COLLISION_FREE, BRANCH_MIXED)
    )
    info = MapInfo(
        branch=branch.astype(jnp.int32),
        status=status.astype(jnp.int32),
        return_time=final.time,
        max_writers=most_writers.astype(jnp.int32),
        n_events=final.n_events,
    )
    return params, final, u_next[1:], info


def _budget(fleet, max_events) -> int:
    """The event budget of one map step: validated, or the default for the fleet."""
    if not isinstance(fleet, Fleet):
        raise ValueError(f"fleet must be a ckpt_jax.Fleet, got {type(fleet).__name__}")
    if max_events is None:
        return _default_budget(fleet)
    return check_int("max_events", max_events, 1, 2**31 - 1)


def _default_budget(fleet: Fleet) -> int:
    return 8 * fleet.n_jobs + 64


def section_map(fleet: Fleet, u, *, max_events: int | None = None):
    """Section coordinates at one firing of job 0 → the same at its next firing.

    Args:
      fleet: a single `Fleet` (batch shape ()), N >= 2.
      u: (N-1,) section coordinates of jobs 1..N-1: work left until each job's next
        firing (write remainder, if writing, plus compute remainder), in (0, T_j + d_j].

    Returns:
      ``(u_next, info)``: (N-1,) coordinates at job 0's next firing, and a `MapInfo`.
      ``u_next`` is NaN where the loop failed or the input is out of the domain; a change
      of firing order is flagged (the coordinates themselves stay well defined).
      Differentiate with ``jax.jacfwd(section_map, argnums=1, has_aux=True)``.
    """
    max_events = _budget(fleet, max_events)
    _check_single_fleet(fleet)
    u = _check_coordinates("u", u, fleet.n_jobs)
    return _section_map(fleet, u, max_events, loop.sharing_for(fleet))


# The maps' programs: one compiled call each (run op by op, every primitive of the event loop
# compiled on its own). The rate rules are decided before, on the host for a concrete fleet
# (as `simulate` decides them), under the caller's trace otherwise, and passed in as static.
@functools.partial(jax.jit, static_argnums=(2, 3))
def _section_map(fleet: Fleet, u, max_events: int, sharing: loop.Sharing):
    _, _, u_next, info = _section_step(fleet, u, max_events, sharing)
    fatal = info.status & ~int(Status.ORDER_CHANGED | Status.NOT_SMOOTH)
    return jnp.where(fatal == 0, u_next, jnp.nan), info


def gap_return_map(fleet: Fleet, a, *, max_events: int | None = None):
    """Gap coordinates (jobs labelled in firing order after job 0) → the next gaps.

    ``a_1 = u_1`` and ``a_j = u_j − u_{j−1}`` (docs/model.md §2): job j is the j-th to fire after
    job 0. A job firing at the same instant as job 0 has coordinate 0, so the synchronous
    state ``a = 0`` is a fixed point.

    Args:
      fleet: a single `Fleet`, N >= 2 (jobs 1..N-1 listed in firing order).
      a: (N-1,) gaps, each >= 0, with ``sum(a) <= T + d``.

    Returns:
      ``(a_next, info)``; ``a_next`` is NaN, with a status flag, where the firing order
      changed (the map is undefined there), the input is out of domain or the loop failed.
      At a kink of the map (`Status.NOT_SMOOTH`: a = 0, a job firing with job 0, a gap
      equal to a write, ...) the value is returned and the flag set: it is continuous
      there but not differentiable.
    """
    max_events = _budget(fleet, max_events)
    _check_single_fleet(fleet)
    a = _check_coordinates("a", a, fleet.n_jobs)
    return _gap_return_map(fleet, a, max_events, loop.sharing_for(fleet))


@functools.partial(jax.jit, static_argnums=(2, 3))
def _gap_return_map(fleet: Fleet, a, max_events: int, sharing: loop.Sharing):
    u = jnp.cumsum(a)
    params, final, u_next, info = _section_step(fleet, u, max_events, sharing)
    # Jobs that fire together with job 0's return are at gap coordinate 0, not T + d.
    active = params.active[1:]
    with_job0 = final.fire_times[1:, 0] == final.time
    u_next = jnp.where(with_job0, 0, u_next)
    a_next = jnp.diff(u_next, prepend=jnp.zeros((1,), u_next.dtype))
    # Padding slots (inactive, listed after the active jobs) never fire: ignore them. A job
    # that fires together with job 0's return is first in the new order (gap 0), however
    # late its raw firing time: it ranks before every job that fired in between.
    fire_order = jnp.where(active, jnp.where(with_job0, -jnp.inf, final.fire_times[1:, 0]), jnp.inf)
    order_kept = jnp.all(~active | (a_next >= 0)) & jnp.all(fire_order[1:] >= fire_order[:-1])
    status = info.status | flag(~jnp.all(a >= 0), Status.OUT_OF_DOMAIN)
    status = status | flag(~order_kept, Status.ORDER_CHANGED)
    info = info._replace(status=status.astype(jnp.int32))
    a_next = jnp.where(active, a_next, 0)  # padding slots: 0, so Jacobians stay finite
    return jnp.where((status & _FATAL) == 0, a_next, jnp.nan), info


def work_done(fleet: Fleet, u, time, *, max_events: int | None = None):
    """Cycle position θ (work since the last firing; write first, then compute) of every
    job at a fixed ``time`` after the section point ``u``. Used to check event-time
    derivatives against the implicit-function theorem. Base model only: NaN for fleets
    with delay > 0 or async_fraction > 0 (see `Status.UNSUPPORTED`)."""
    max_events = _budget(fleet, max_events)
    _check_single_fleet(fleet)
    u = _check_coordinates("u", u, fleet.n_jobs)
    return _work_done(fleet, u, time, max_events, loop.sharing_for(fleet))


@functools.partial(jax.jit, static_argnums=(3, 4))
def _work_done(fleet: Fleet, u, time, max_events: int, sharing: loop.Sharing):
    params = _single_fleet_params(fleet)
    carry, _ = section_carry(params, u, sharing)
    horizon = jnp.asarray(time, params.compute.dtype)
    final, _ = loop.advance(params, carry, max_events=max_events, horizon=horizon, sharing=sharing)
    # Base model (α = 0): a writer has drained d − write_left; a computer did all its write.
    theta = jnp.where(
        final.draining,
        params.write - final.write_left,
        params.write + params.compute - final.compute_left,
    )
    return jnp.where(variants(fleet).instant_blocking, theta, jnp.nan)


def spectrum(fleet: Fleet, a, *, rtol: float = 1e-9) -> Spectrum:
    """Eigenvalues, determinant and expanding directions of the gap return map at ``a``,
    from its Jacobian by `jax.jacfwd` through the event loop.

    Args:
      fleet: a single `Fleet`.
      a: (N-1,) gap coordinates of the linearisation point.
      rtol: an eigenvalue counts as expanding if its modulus exceeds 1 + rtol.

    Returns:
      A `Spectrum`. Check ``info.status``: 0 means the map is smooth at ``a`` and the
      Jacobian is its derivative. `Status.NOT_SMOOTH` means ``a`` lies on a kink (the
      synchronous fixed point a = 0, a branch boundary such as a gap equal to one write):
      the Jacobian that `jax.jacfwd` returns there is one piece's, and it can be singular
      (det 0 at a = 0). To linearise at the synchronous state, take a point of the
      overlapping branch next to it, e.g. ``a = jnp.full(N - 1, 1e-3 * d)``: there the map
      is smooth and its spectrum is claim 2's (N − j) f(j) / (j f(N − j)).
    """
    if not isinstance(fleet, Fleet):
        raise ValueError(f"fleet must be a ckpt_jax.Fleet, got {type(fleet).__name__}")
    rtol = float(rtol)
    if not (rtol >= 0 and np.isfinite(rtol)):
        raise ValueError(f"rtol must be finite and >= 0, got {rtol}")
    a = _check_coordinates("a", a, fleet.n_jobs)
    jacobian, info = _gap_jacobian(fleet, a)
    jacobian = np.asarray(jacobian)
    if not np.all(np.isfinite(jacobian)):
        eigenvalues = np.full(a.shape, np.nan + 0j)
        determinant = float("nan")
    else:
        eigenvalues = np.linalg.eigvals(jacobian)
        eigenvalues = eigenvalues[np.argsort(-eigenvalues.real, kind="stable")]
        determinant = float(np.linalg.det(jacobian))
    n_expanding = int(np.sum(np.abs(eigenvalues) > 1 + rtol))
    return Spectrum(eigenvalues, determinant, n_expanding, jacobian, info)


@jax.jit
def _gap_jacobian(fleet: Fleet, a):
    return jax.jacfwd(gap_return_map, argnums=1, has_aux=True)(fleet, a)
