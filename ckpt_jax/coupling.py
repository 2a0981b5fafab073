"""Pairwise coupling functions and stagger lifetimes (docs/model.md claims 7, 8 and 9).

`coupling_function` measures how a pair's phase lag changes over one firing cycle of
job 0, beyond what the two jobs would do on their own. It works for every variant of
docs/model.md §1 (heterogeneity, caps, any f, the delayed controller τ > 0, asynchronous
checkpoints α > 0) and §1b (job sizes, every power and storage policy): each job's solo
dynamics are its own, at its solo speed min(1, C / w_i). `maps.section_map` covers only the undelayed model and
`simulate`'s `Trace` records times, not the remaining work that section coordinates are
made of, so the pair is driven here with the engine's own step (`loop.step`, the same
function `simulate` runs, with the delayed-controller queue switched on). Pairs with
two-level checkpoints (docs/model.md §1d, claim 11) are measured in time phases, the lag's
natural coordinate there (`coupling_function`).

`stagger_lifetime` reads recorded traces: how many cycles a staggered schedule lasts
before two write windows overlap (claim 7).
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from . import loop
from ._plan import variants
from ._rates import compute_speed, controller_load
from ._status import Status, describe_status
from ._validate import check_int
from .model import Fleet

__all__ = [
    "Coupling",
    "TwoLevelCoupling",
    "coupling_function",
    "launch_carry",
    "shared_slowdown",
    "solo_speed",
    "stagger_lifetime",
    "time_phase",
    "two_level_coupling",
    "two_level_launch",
]


class Coupling(NamedTuple):
    """What `coupling_function` returns for M launch lags δ and K cycles.

    All lags are section coordinates of job 1 (work left until its next firing: write
    remainder, if draining, plus compute remainder; docs/model.md §2), taken at job 0's firings.
    Couplings are wrapped onto the circle ``[-L/2, L/2]`` with ``L = T_1 + d_1``.

    Attributes:
      deltas: (M,) launch lags δ = u_0.
      coupling: (M,) first-cycle coupling ``wrap(u_1 − P0(δ))`` (NaN where not ``ok``).
      lags: (M, K + 1) ``u_0, u_1, ..., u_K``: job 1's coordinate when the coupling starts
        (u_0 = δ except after an uncoupled history with unequal periods) and at job 0's
        k-th return.
      solo_lags: (M, K) ``P0(u_{k−1})``: where job 1 would be, had each job run alone.
      cycle_coupling: (M, K) ``wrap(u_k − P0(u_{k−1}))``; column 0 is ``coupling``.
      work_coupling: (M, K) ``wrap(u_k − u_{k−1} + T_0 + d_0)``: the change of lag beyond
        a constant drift of job 0's cycle work (work coordinates with equal work rates).
      phase_lags: (M, K + 1) job 1's *time phase* at the same instants: the time until its
        next firing had it run alone from there, ``(u − T_1)/f(1) + T_1/s_1`` while
        draining (u > T_1), ``u/s_1`` while computing, with s_1 its solo speed.
      phase_coupling: (M, K) ``wrap(φ_k − φ_{k−1} + R0)`` on the circle of circumference
        P_1: alone, job 1's time phase only turns by job 0's solo return time R0, so this
        is the coupling in time-phase coordinates.
      solo_speed: (2,) each job's compute speed alone, min(1, C / w_i) (docs/model.md §1b;
        the same under "maxmin" and "uniform").
      solo_period: (2,) each job's period alone, d_i / f(1) + T_i / s_i.
      return_times: (M, K) time of job 0's k-th return, from the start of the coupling.
      solo_return_time: job 0's return time when it runs alone (R0).
      cycle_length: L = T_1 + d_1.
      ok: (M,) True where every cycle completed with a clean status.

    The time-phase fields need blocking writes and an undelayed controller (α = 0, τ = 0),
    where a job alone has one fixed speed per phase; they are NaN otherwise.
      status: (M,) `cj.Status` bit flags of the coupled and solo runs, OR-ed.

    Pairs with two-level checkpoints (``snapshot``) are measured in time phases instead
    (see `coupling_function`): ``lags`` and ``phase_lags`` are job 1's time phase φ,
    ``coupling``, ``cycle_coupling`` and ``phase_coupling`` are ``wrap(φ_k − φ_{k−1} + R0)``
    on the circle of circumference ``cycle_length`` = P_1 = s_1 + max(T_1 / v_1, D_1),
    ``solo_period`` is each job's s_i + max(T_i / v_i, D_i) and ``work_coupling`` is NaN.
    """

    deltas: np.ndarray
    coupling: np.ndarray
    lags: np.ndarray
    solo_lags: np.ndarray
    cycle_coupling: np.ndarray
    work_coupling: np.ndarray
    phase_lags: np.ndarray
    phase_coupling: np.ndarray
    solo_speed: np.ndarray
    solo_period: np.ndarray
    return_times: np.ndarray
    solo_return_time: float
    cycle_length: float
    ok: np.ndarray
    status: np.ndarray


def solo_speed(params: loop.Params):
    """(N,) each job's compute speed when it computes alone: min(1, C / w_i) (docs/model.md
    §1b; both power policies give min(w_i, C) / w_i, and unit sizes the base model's min(1, C))."""
    return jnp.minimum(1.0, params.cap / params.size)


def launch_carry(params: loop.Params, u_others, queue_size: int, sharing: loop.Sharing = loop.Sharing()) -> loop.Carry:
    """Engine carry at the instant job 0 fires, jobs 1..N-1 at section coordinates u.

    Job 0 has just fired: it drains d_0 and has its full T_0 to compute. A job j at u is
    placed where a job running *alone* would be when u work remains (its solo natural
    state), which for α = 0 is `maps.section_carry`'s convention:

    * α = 0: u ∈ (0, T] computing with u left; u ∈ (T, T + d] draining u − T, then T.
    * α > 0: while draining a solo job also computes at ``α·s`` (s = `solo_speed`, drain
      rate f(1)), so u = w + c with c = T − a (d − w), ``a = α s / f(1)``. Hence
      u ≤ T − a d: computing (c = u); above it: draining w = (u − T + a d)/(1 + a) with
      c = u − w; and where ``a d > T`` the compute runs out first, so u ≤ d − T/a is
      *waiting* with w = u, c = 0.

    u = 0 is the same instant as job 0's firing (≡ T + d). The controller's history before
    t = 0 is the launch's controller value (the engine's convention for τ > 0). Under
    "fcfs" storage job 0, which fires now, queues behind a job already writing (as in
    `maps.section_carry`). Inactive slots keep harmless values.

    Args:
      params: one fleet's `loop.Params` (no batch axis).
      u_others: (N-1,) section coordinates of jobs 1..N-1.
      queue_size: capacity of the delayed-controller queue.
      sharing: the fleet's rate rules (`loop.sharing_for`).
    """
    compute, write = params.compute, params.write
    dtype = compute.dtype
    cycle = compute + write
    u = jnp.concatenate([jnp.reshape(cycle[0], (1,)), jnp.asarray(u_others, dtype)])
    u = jnp.where(u == 0, cycle, u)
    a = params.async_fraction * solo_speed(params) / params.throughput[1]
    drain_start = compute - a * write  # u at the end of a solo drain (if positive)
    w_drain = (u - compute + a * write) / (1 + a)
    waiting = params.active & (drain_start < 0) & (u <= write - compute / jnp.where(a > 0, a, 1))
    draining = params.active & (waiting | (u > drain_start))
    write_left = jnp.where(waiting, u, jnp.where(draining, w_drain, 0))
    compute_left = jnp.where(waiting, 0, jnp.where(draining, u - w_drain, u))
    # Job 0 has just fired: exactly d_0 and T_0 left (no rounding through the formulas).
    is_job0 = jnp.arange(u.shape[0]) == 0
    write_left = jnp.where(is_job0, write, write_left)
    compute_left = jnp.where(is_job0, compute, compute_left)
    remaining = jnp.where(draining, write_left, compute_left)
    carry = loop.init_carry(params, draining.astype(jnp.int32), remaining, 1, queue_size, False, sharing)
    applied = controller_load(sharing, params.size, loop.computing_mask(params, carry.draining, waiting), params.cap)
    if sharing.storage == "fcfs":
        carry = carry._replace(queued_at=carry.queued_at.at[0].set(0))
    return carry._replace(
        waiting=waiting,
        compute_left=jnp.where(params.active, compute_left, carry.compute_left).astype(dtype),
        applied_computing=applied.astype(dtype),
    )


def _section_coordinate(carry: loop.Carry):
    """Work left until each job's next firing: write remainder (if draining) + compute."""
    return jnp.where(carry.draining, carry.write_left, 0) + carry.compute_left


def _cycles(params, carry, n_cycles: int, use_delay: bool, event_budget: int, sharing: loop.Sharing):
    """Steps one fleet through job 0's next ``n_cycles`` firings; returns the coordinates
    and times at each, and the final status."""

    def one_cycle(carry, k):
        carry, _ = loop.advance_to_firing(
            params, carry, 0, max_events=event_budget * (k + 1), use_delay=use_delay, sharing=sharing
        )
        return carry, (_section_coordinate(carry), carry.time)

    carry, (coordinates, times) = jax.lax.scan(one_cycle, carry, jnp.arange(n_cycles))
    return coordinates, times, carry.status


def _solo(params, job: int):
    """The same fleet with only ``job`` active: the job running alone (no coupling)."""
    only = jnp.arange(params.compute.shape[0]) == job
    return params._replace(active=only)


def _uncoupled(params):
    """The same jobs with the coupling switched off: every writer drains at f(1) and the
    cap never binds (run with "fair" storage). Each job then runs as it would alone,
    provided its solo speed min(1, C / w_i) is 1."""
    n = jnp.arange(params.throughput.shape[0], dtype=params.throughput.dtype)
    return params._replace(cap=jnp.full_like(params.cap, jnp.inf), throughput=n * params.throughput[1])


def _burn_in(params, carry, until, use_delay: bool, event_budget: int, sharing: loop.Sharing):
    """Steps until job 0 fires at a time >= ``until``; returns the carry there with the
    cycle and event counters reset (time and the controller queue carry on)."""

    def last_firing(last, before, after):
        return jnp.where(after.fire_count[0] > before.fire_count[0], after.time, last)

    carry, _ = loop.advance(
        params,
        carry,
        max_events=event_budget,
        stop=lambda c, last: last >= until,
        use_delay=use_delay,
        observe=last_firing,
        observed=jnp.zeros((), carry.time.dtype),
        sharing=sharing,
    )
    return carry._replace(fire_count=jnp.zeros_like(carry.fire_count), n_events=jnp.zeros_like(carry.n_events))


def _solo_advance(params, u, horizon, use_delay: bool, queue_size: int, event_budget: int, sharing: loop.Sharing):
    """Job 1 alone, launched at coordinate u, run for ``horizon``: its coordinate then."""
    solo = _solo(params, 1)
    carry = launch_carry(solo, jnp.reshape(u, (1,)), queue_size, sharing)
    carry, _ = loop.advance(solo, carry, max_events=event_budget, horizon=horizon, use_delay=use_delay, sharing=sharing)
    return _section_coordinate(carry)[1], carry.status


# One compiled loop serves every variant: the delayed-controller queue is always on (τ = 0
# fleets bypass it bit for bit, see the general loop's rates), and the uncoupled history is a burn-in
# whose length is data (0: none), so fleets differing only in values never recompile.
_USE_DELAY = True


@functools.partial(jax.jit, static_argnames=("n_cycles", "queue_size", "sharing"))
def _coupling_arrays(
    params, deltas, history_until, event_budget, n_cycles: int, queue_size: int, sharing: loop.Sharing
):
    use_delay = _USE_DELAY
    uncoupled_sharing = sharing._replace(storage="fair")  # with f(n) = n f(1): every writer at f(1)

    def coupled(delta):
        carry = launch_carry(params, jnp.reshape(delta, (1,)), queue_size, sharing)
        carry = _burn_in(_uncoupled(params), carry, history_until, use_delay, event_budget * 4, uncoupled_sharing)
        start_time = carry.time
        start = _section_coordinate(carry)[1]
        coordinates, times, status = _cycles(params, carry, n_cycles, use_delay, event_budget, sharing)
        return start, coordinates[:, 1], times - start_time, status

    starts, lags, return_times, status = jax.vmap(coupled)(deltas)
    # Job 0 alone, from its firing, until it fires again: the uncoupled return time R0.
    solo0 = launch_carry(_solo(params, 0), jnp.zeros((1,), deltas.dtype), queue_size, sharing)
    _, solo_times, solo0_status = _cycles(_solo(params, 0), solo0, 1, use_delay, event_budget, sharing)
    solo_return = solo_times[0]
    before = jnp.concatenate([starts[:, None], lags[:, :-1]], axis=1)
    axes = (None, 0, None, None, None, None, None)
    advance = jax.vmap(jax.vmap(_solo_advance, axes), axes)
    solo_lags, solo_status = advance(params, before, solo_return, use_delay, queue_size, event_budget, sharing)
    status = status | solo0_status | jnp.bitwise_or.reduce(solo_status, axis=1)
    return starts, lags, return_times, solo_lags, solo_return, status


def _solo_drain_rate(params: loop.Params):
    """(N,) each job's drain rate alone: min(b_i, f(1)) (docs/model.md §1d)."""
    return jnp.minimum(params.write_limit, params.throughput[1])


def _two_level_period(params: loop.Params):
    """(N,) each job's period alone with two-level checkpoints: s_i + max(T_i / v_i, D_i),
    with v_i its solo speed and D_i = d_i / min(b_i, f(1)) (docs/model.md §1d)."""
    return params.snapshot + jnp.maximum(params.compute / solo_speed(params), params.write / _solo_drain_rate(params))


def two_level_launch(params: loop.Params, delta, queue_size: int, sharing: loop.Sharing = loop.Sharing()) -> loop.Carry:
    """Engine carry of a two-level pair (docs/model.md §1d) at the instant job 0 fires, job 1
    at time phase δ: it fires after δ if it runs alone from here.

    Job 0 starts its snapshot (with s_0 = 0: its drain and its next compute). Job 1 is where
    a job running *alone* is τ = P_1 − δ after a firing (P_1 = s_1 + max(T_1/v_1, D_1)): in
    its snapshot (τ < s_1, s_1 − τ left), else x = τ − s_1 into its cycle, computing with
    T_1 − v_1 x left and draining d_1 − r_1 x (r_1 = min(b_1, f(1))) while that is positive,
    waiting where its compute is done and its drain is not. δ = P_1 is the same instant as
    job 0's firing. Under "fcfs" a drain in flight at the launch is served before job 0's.

    Args:
      params: one fleet's `loop.Params` (no batch axis), two jobs.
      delta: () job 1's time phase in (0, P_1].
      queue_size: capacity of the delayed-controller queue.
      sharing: the fleet's rate rules (`loop.sharing_for`).
    """
    compute, write, snapshot = params.compute, params.write, params.snapshot
    dtype = compute.dtype
    speed, drain_rate = solo_speed(params), _solo_drain_rate(params)
    is_job0 = jnp.arange(compute.shape[0]) == 0
    since = jnp.where(is_job0, 0, _two_level_period(params) - jnp.asarray(delta, dtype))  # τ, time since firing
    snapping = params.active & (snapshot > 0) & (since < snapshot)
    into = jnp.maximum(since - snapshot, 0)  # x, time into the cycle after the snapshot
    write_left = jnp.where(snapping, 0, write - drain_rate * into)
    draining = params.active & ~snapping & (write_left > 0)
    compute_left = jnp.where(snapping, compute, jnp.maximum(compute - speed * into, 0))
    waiting = draining & (compute_left <= 0)
    remaining = jnp.where(draining, write_left, compute_left)
    carry = loop.init_carry(
        params, draining.astype(jnp.int32), remaining, 1, queue_size, False, sharing, use_snapshot=True
    )
    applied = controller_load(
        sharing, params.size, loop.computing_mask(params, draining, waiting, True, snapping), params.cap
    )
    assert carry.snap_end is not None  # a carry with snapshots
    return carry._replace(
        draining=draining,
        waiting=waiting,
        write_left=jnp.where(draining, write_left, 0).astype(dtype),
        compute_left=jnp.where(params.active, compute_left, carry.compute_left).astype(dtype),
        snapping=snapping,
        snap_end=jnp.where(snapping, snapshot - since, 0).astype(dtype),
        queued_at=jnp.where(draining, jnp.where(is_job0, 0, -jnp.inf), jnp.inf).astype(dtype),
        applied_computing=applied.astype(dtype),
    )


def _time_phase_two_level(params: loop.Params, carry: loop.Carry):
    """(N,) each job's time phase: the time until its next firing had it run alone from
    ``carry`` (in its snapshot: the snapshot's rest, then max(T/v, D); else the longer of
    its compute and its drain left)."""
    assert carry.snapping is not None and carry.snap_end is not None  # a carry with snapshots
    speed, drain_rate = solo_speed(params), _solo_drain_rate(params)
    cycle = jnp.maximum(params.compute / speed, params.write / drain_rate)
    running = jnp.maximum(carry.compute_left / speed, jnp.where(carry.draining, carry.write_left, 0) / drain_rate)
    return jnp.where(carry.snapping, carry.snap_end - carry.time + cycle, running)


def _two_level_phases(params, deltas, event_budget, n_cycles: int, queue_size: int, sharing: loop.Sharing):
    """Job 1's time phase at job 0's firings and their times, for each launch phase."""

    def coupled(delta):
        carry = two_level_launch(params, delta, queue_size, sharing)

        def one_cycle(carry, k):
            carry, _ = loop.advance_to_firing(
                params,
                carry,
                0,
                max_events=event_budget * (k + 1),
                use_delay=_USE_DELAY,
                sharing=sharing,
                use_snapshot=True,
            )
            return carry, (_time_phase_two_level(params, carry)[1], carry.time)

        start = _time_phase_two_level(params, carry)[1]
        carry, (phases, times) = jax.lax.scan(one_cycle, carry, jnp.arange(n_cycles))
        return start, phases, times, carry.status

    return jax.vmap(coupled)(deltas)


_STATIC = ("n_cycles", "queue_size", "sharing")
_two_level_arrays = jax.jit(_two_level_phases, static_argnames=_STATIC)


@functools.partial(jax.jit, static_argnames=_STATIC)
def _two_level_batch(params, deltas, event_budget, n_cycles: int, queue_size: int, sharing: loop.Sharing):
    """`_two_level_phases` for a batch of pairs (leading axis B on the parameters and lags)."""

    def one(pair_params, pair_deltas):
        return _two_level_phases(pair_params, pair_deltas, event_budget, n_cycles, queue_size, sharing)

    return jax.vmap(one)(params, deltas)


def _wrap(x, length):
    """x mapped onto the circle of circumference ``length``, as a value in [-L/2, L/2]."""
    return x - length * np.round(x / length)


def coupling_function(
    fleet_pair: Fleet,
    deltas,
    n_cycles: int = 1,
    *,
    history: str = "launch",
    queue_size: int = 64,
    max_events: int | None = None,
) -> Coupling:
    """Measured pairwise coupling function of a 2-job fleet, any variant (docs/model.md claims 8, 9, 11).

    Job 0 is launched at its firing and job 1 at section coordinate δ (`launch_carry`);
    the pair runs for ``n_cycles`` returns of job 0, and at each return k the lag u_k of
    job 1 is read. What is subtracted is the *uncoupled* map P0: each job run alone from
    the same launch (same f(1), cap, τ, α, but no partner), job 1 read at the instant job
    0 alone would return (R0). So the coupling at cycle k is

        c_k = wrap(u_k − P0(u_{k−1})),  wrapped to [−L/2, L/2], L = T_1 + d_1,

    which is 0 for all δ exactly when the pair does what two independent jobs would. For
    identical jobs P0 is the identity; for unequal periods it is the solo drift (the
    rotation by job 0's solo period, expressed in job 1's work coordinate). With job sizes
    (docs/model.md §1b) each job alone runs at its own solo speed min(1, C / w_i) and, under
    "fcfs", is always at the head of its own queue. ``work_coupling`` instead subtracts the
    constant work drift T_0 + d_0 (what job 1 would do if both jobs always progressed at
    equal work rates). ``phase_coupling`` is the same coupling in time-phase coordinates
    (time until job 1's next solo firing), where P0 is a rotation by R0.

    The coupling function proper is the first cycle, ``c_1(δ)``. Two launch details matter
    for the variants and are fixed here:

    * τ > 0, ``history="launch"``: the controller has seen the launch's computing count
      forever (the engine's convention for t < 0). ``history="uncoupled"``: before the
      coupling is switched on, the pair runs *uncoupled* (every writer at f(1), no cap) until
      job 0 fires at a time >= τ, so the controller's memory holds the pair's own uncoupled
      past; identical jobs keep their lag δ through it, unequal ones drift by P0, and
      ``lags[:, 0]`` is the lag where the coupling starts. Needs C >= max w_i (then every
      solo speed is 1 and the uncoupled pair is exactly each job alone) and a storage
      policy other than "fcfs" (whose queue order the uncoupled past would not record).
    * α > 0: the launch puts job 1 at its *solo* natural state (`launch_carry`); the
      coupled pair relaxes from it for a few cycles, so for α > 0 later columns of
      ``cycle_coupling`` (at lags ``lags[:, k−1]``) are the steady-state coupling.

    **Two-level checkpoints** (``snapshot``, docs/model.md §1d, claim 11). A job's state is
    then its snapshot, compute and drain left, and the lag's natural coordinate is time:
    job 1's *time phase* φ at job 0's firing, the time until job 1 fires again had it run
    alone from there (r + max(T_1/v_1, D_1) in its snapshot with r left, else the longer of
    its compute left over v_1 and its drain left over r_1 = min(b_1, f(1))). Where the pair
    does not interact this is the time between job 0's firing and job 1's next one. It lives
    on the circle of circumference P_1 = s_1 + max(T_1/v_1, D_1), D_1 = d_1/r_1, job 1's
    period alone, and job 1 is launched at its solo state with phase δ ∈ (0, P_1]
    (`two_level_launch`). Alone, φ turns by job 0's solo return time R0 = P_0, so

        c_k = wrap(φ_k − φ_{k−1} + R0),  wrapped to [−P_1/2, P_1/2],

    which for identical jobs is P(δ) − δ. The run goes through the general loop with
    ``use_snapshot=True``; ``history`` must be "launch". `two_level_coupling` measures a
    batch of such pairs at once.

    Args:
      fleet_pair: a single `Fleet` (batch shape ()) with N = 2 active jobs.
      deltas: (M,) launch lags in (0, T_1 + d_1] (work units); with ``snapshot``, time
        phases in (0, P_1].
      n_cycles: K >= 1 returns of job 0 to follow.
      history: "launch" or "uncoupled" (see above; only matters for τ > 0).
      queue_size: delayed-controller queue capacity.
      max_events: event budget per cycle (default: generous for the periods' ratio).

    Returns:
      A `Coupling` of NumPy arrays.

    Raises:
      ValueError: not a single 2-job fleet, lags outside (0, T_1 + d_1] (two-level: (0, P_1]),
        bad n_cycles or history, ``history="uncoupled"`` with C < max w_i, with "fcfs"
        storage or with two-level checkpoints.
      RuntimeError: a run hit its event budget or the controller queue overflowed.
    """
    sharing = _check_pair(fleet_pair)
    n_cycles = check_int("n_cycles", n_cycles, 1)
    queue_size = check_int("queue_size", queue_size, 1)
    cap, sizes = _check_history(fleet_pair, history, sharing)
    two_level = fleet_pair.has_snapshots
    params = jax.tree_util.tree_map(lambda x: x[0], loop.flat_params(fleet_pair))
    cycle, deltas_np = _check_deltas(fleet_pair, params, deltas, two_level)
    if max_events is None:
        max_events = _default_max_events(fleet_pair, cap, sizes, cycle)
    max_events = check_int("max_events", max_events, 1, 2**31 // (4 * (n_cycles + 1)))
    deltas_jax = jnp.asarray(deltas_np, fleet_pair.dtype)
    if two_level:
        return _two_level_coupling(params, deltas_np, deltas_jax, max_events, n_cycles, queue_size, sharing, cycle)
    # The uncoupled history runs until job 0 fires at a time >= τ; 0 means no burn-in.
    history_until = params.delay if history == "uncoupled" else jnp.zeros_like(params.delay)
    starts, lags, return_times, solo_lags, solo_return, status = _coupling_arrays(
        params,
        deltas_jax,
        history_until,
        jnp.int32(max_events),
        n_cycles=n_cycles,
        queue_size=queue_size,
        sharing=sharing,
    )
    status, ok = _launches_ok(status)
    lags = np.concatenate([np.asarray(starts, np.float64)[:, None], np.asarray(lags, np.float64)], axis=1)
    solo_lags = np.asarray(solo_lags, np.float64)
    length = float(cycle[1])
    cycle_coupling = _wrap(lags[:, 1:] - solo_lags, length)
    speed, period, phase_lags, phase_coupling = _phase_coordinates(fleet_pair, params, lags, float(solo_return))
    return Coupling(
        deltas=deltas_np,
        coupling=cycle_coupling[:, 0],
        lags=lags,
        solo_lags=solo_lags,
        cycle_coupling=cycle_coupling,
        work_coupling=_wrap(np.diff(lags, axis=1) + cycle[0], length),
        phase_lags=phase_lags,
        phase_coupling=phase_coupling,
        solo_speed=speed,
        solo_period=period,
        return_times=np.asarray(return_times, np.float64),
        solo_return_time=float(solo_return),
        cycle_length=length,
        ok=ok,
        status=status,
    )


def _check_pair(fleet_pair: Fleet) -> loop.Sharing:
    """Refuses anything but one fleet of two active jobs; returns its rate rules."""
    if not isinstance(fleet_pair, Fleet):
        raise ValueError(f"fleet_pair must be a ckpt_jax.Fleet, got {type(fleet_pair).__name__}")
    if fleet_pair.batch_shape != () or fleet_pair.n_jobs != 2 or not bool(np.all(np.asarray(fleet_pair.active))):
        raise ValueError(
            "fleet_pair must be one fleet (batch shape ()) of N = 2 active jobs, got batch shape "
            f"{fleet_pair.batch_shape} and N = {fleet_pair.n_jobs}"
        )
    return loop.sharing_for(fleet_pair)


def _check_history(fleet_pair: Fleet, history: str, sharing: loop.Sharing):
    """Refuses a ``history`` the pair cannot have (see `coupling_function`); returns the
    cap C and the sizes w_i."""
    if history not in ("launch", "uncoupled"):
        raise ValueError(f"history must be 'launch' or 'uncoupled', got {history!r}")
    cap = float(np.asarray(fleet_pair.cap))
    sizes = np.asarray(fleet_pair.size, dtype=np.float64)
    if history == "uncoupled" and cap < sizes.max():
        raise ValueError(
            f"history='uncoupled' needs a cap C >= max w_i = {sizes.max():g} (jobs alone at full speed), got C = {cap}"
        )
    if history == "uncoupled" and sharing.storage == "fcfs":
        raise ValueError("history='uncoupled' does not support storage_policy 'fcfs' (the uncoupled past has no queue)")
    if history == "uncoupled" and fleet_pair.has_snapshots:
        raise ValueError("history='uncoupled' does not support two-level checkpoints (snapshot)")
    return cap, sizes


def _check_deltas(fleet_pair: Fleet, params, deltas, two_level: bool):
    """``(cycle, deltas)``: each job's lag circle (T_i + d_i, or with two-level checkpoints
    its solo period P_i) and the launch lags, refused unless they lie in (0, cycle_1]."""
    if two_level:
        cycle = np.asarray(_two_level_period(params), dtype=np.float64)
        lag_range = "s_1 + max(T_1 / v_1, D_1)"
    else:
        cycle = np.asarray(fleet_pair.compute + fleet_pair.write, dtype=np.float64)
        lag_range = "T_1 + d_1"
    deltas_np = np.asarray(deltas, dtype=np.float64)
    if deltas_np.ndim != 1 or deltas_np.size == 0:
        raise ValueError(f"deltas must be a non-empty 1-D array of lags, got shape {deltas_np.shape}")
    if not np.all(np.isfinite(deltas_np) & (deltas_np > 0) & (deltas_np <= cycle[1])):
        raise ValueError(
            f"deltas must lie in (0, {lag_range}] = (0, {cycle[1]}], got values in "
            f"[{np.nanmin(deltas_np)}, {np.nanmax(deltas_np)}]"
        )
    return cycle, deltas_np


def _default_max_events(fleet_pair: Fleet, cap: float, sizes, cycle) -> int:
    """Events per cycle of job 0: a few per cycle of the faster job, more when slow rates
    (a tight cap, little bandwidth) stretch job 0's cycle in time."""
    slowest = min(1.0, cap / float(sizes.sum())) * float(np.asarray(fleet_pair.throughput[1:3]).min()) / 2
    ratio = float(cycle.max() / cycle.min()) / max(slowest, 1e-3)
    return int(64 * (1 + min(ratio, 1e4)) + 256)


def _launches_ok(status):
    """``(status, ok)`` as NumPy arrays; a `RuntimeError` naming the flags where a launch failed."""
    status = np.asarray(status)
    ok = status == Status.OK
    if not ok.all():
        raise RuntimeError(
            f"{int((~ok).sum())} of {ok.size} launches failed: {describe_status(int(np.bitwise_or.reduce(status)))}"
        )
    return status, ok


def _phase_coordinates(fleet_pair: Fleet, params, lags, solo_return_time: float):
    """``(solo_speed, solo_period, phase_lags, phase_coupling)``: the lags in time-phase
    coordinates, where P0 is a rotation by R0 (NaN where the variant has no such phase)."""
    speed = np.asarray(solo_speed(params), np.float64)
    write_speed = float(np.asarray(params.throughput[1]))
    compute_np = np.asarray(fleet_pair.compute, np.float64)
    period = np.asarray(fleet_pair.write, np.float64) / write_speed + compute_np / speed
    if variants(fleet_pair).instant_blocking:
        phase_lags = time_phase(lags, compute_np[1], write_speed, speed[1])
        phase_coupling = _wrap(np.diff(phase_lags, axis=1) + solo_return_time, period[1])
    else:
        phase_lags = np.full(lags.shape, np.nan)
        phase_coupling = np.full((lags.shape[0], lags.shape[1] - 1), np.nan)
    return speed, period, phase_lags, phase_coupling


def _two_level_coupling(params, deltas_np, deltas_jax, max_events, n_cycles, queue_size, sharing, period):
    """`coupling_function` for a pair with two-level checkpoints: lags are time phases."""
    starts, phases, return_times, status = _two_level_arrays(
        params, deltas_jax, jnp.int32(max_events), n_cycles=n_cycles, queue_size=queue_size, sharing=sharing
    )
    status, ok = _launches_ok(status)
    lags = np.concatenate([np.asarray(starts, np.float64)[:, None], np.asarray(phases, np.float64)], axis=1)
    length = float(period[1])
    solo_return_time = float(period[0])  # job 0 alone returns after its own period
    # Alone, job 1's phase only turns by R0 while job 0 returns.
    solo_lags = lags[:, :-1] - solo_return_time
    solo_lags = solo_lags - length * np.floor(solo_lags / length)
    solo_lags = np.where(solo_lags <= 0, solo_lags + length, solo_lags)
    cycle_coupling = _wrap(lags[:, 1:] - lags[:, :-1] + solo_return_time, length)
    return Coupling(
        deltas=deltas_np,
        coupling=cycle_coupling[:, 0],
        lags=lags,
        solo_lags=solo_lags,
        cycle_coupling=cycle_coupling,
        work_coupling=np.full(cycle_coupling.shape, np.nan),
        phase_lags=lags,
        phase_coupling=cycle_coupling,
        solo_speed=np.asarray(solo_speed(params), np.float64),
        solo_period=np.asarray(period, np.float64),
        return_times=np.asarray(return_times, np.float64),
        solo_return_time=solo_return_time,
        cycle_length=length,
        ok=ok,
        status=status,
    )


class TwoLevelCoupling(NamedTuple):
    """What `two_level_coupling` returns for B pairs, M launch phases and K cycles.

    Lags are time phases of job 1 at job 0's firings (as in `coupling_function` for
    two-level pairs); couplings are wrapped onto ``[-P_1/2, P_1/2]``.

    Attributes:
      deltas: (B, M) launch lags δ = phase · P_1.
      lags: (B, M, K + 1) job 1's time phase at the launch and at job 0's k-th return.
      coupling: (B, M, K) ``wrap(φ_k − φ_{k−1} + R0)``, R0 = P_0; column 0 is P(δ) − δ for
        identical jobs.
      period: (B, 2) each job's period alone, s_i + max(T_i / v_i, D_i).
      return_times: (B, M, K) time of job 0's k-th return.
      status: (B, M) `cj.Status` bit flags.
    """

    deltas: np.ndarray
    lags: np.ndarray
    coupling: np.ndarray
    period: np.ndarray
    return_times: np.ndarray
    status: np.ndarray


def two_level_coupling(
    fleets: Fleet, phases, n_cycles: int = 1, *, queue_size: int = 64, max_events: int | None = None
) -> TwoLevelCoupling:
    """The coupling function of a batch of two-level pairs (docs/model.md §1d, claim 11).

    The same measurement as `coupling_function` for a pair with ``snapshot``, for B pairs at
    once (one compiled program): each pair is launched at the M lags δ = phase · P_1 of its
    own period P_1 = s_1 + max(T_1 / v_1, D_1).

    Args:
      fleets: a `Fleet` of batch shape (B,), N = 2 active jobs each, every pair with
        two-level checkpoints (``snapshot``).
      phases: (M,) launch lags as fractions of P_1, in (0, 1].
      n_cycles: K >= 1 returns of job 0 to follow.
      queue_size: delayed-controller queue capacity.
      max_events: event budget per cycle (default: generous for the periods' ratio).

    Raises:
      ValueError: not a (B,) batch of two-level pairs, phases outside (0, 1].
      RuntimeError: a run hit its event budget or the controller queue overflowed.
    """
    if not isinstance(fleets, Fleet) or len(fleets.batch_shape) != 1 or fleets.n_jobs != 2:
        raise ValueError("fleets must be a ckpt_jax.Fleet of batch shape (B,) with N = 2 jobs")
    if not bool(np.all(np.asarray(fleets.active))):
        raise ValueError("every pair of fleets must have both jobs active")
    if not fleets.has_snapshots or not bool(np.all(np.asarray(fleets.two_level))):
        raise ValueError("every pair of fleets must checkpoint in two levels (snapshot)")
    n_cycles = check_int("n_cycles", n_cycles, 1)
    queue_size = check_int("queue_size", queue_size, 1)
    phases_np = np.asarray(phases, dtype=np.float64)
    if phases_np.ndim != 1 or phases_np.size == 0 or not np.all((phases_np > 0) & (phases_np <= 1)):
        raise ValueError("phases must be a non-empty 1-D array of fractions of the period in (0, 1]")
    params = loop.flat_params(fleets)
    period = np.asarray(jax.vmap(_two_level_period)(params), np.float64)
    if max_events is None:
        ratio = float((period.max(axis=1) / period.min(axis=1)).max())
        max_events = int(64 * (1 + min(ratio, 1e4)) + 256)
    max_events = check_int("max_events", max_events, 1, 2**31 // (4 * (n_cycles + 1)))
    deltas = phases_np[None, :] * period[:, 1:2]
    starts, lags, return_times, status = _two_level_batch(
        params,
        jnp.asarray(deltas, fleets.dtype),
        jnp.int32(max_events),
        n_cycles,
        queue_size,
        loop.sharing_for(fleets),
    )
    status = np.asarray(status)
    if not (status == Status.OK).all():
        bad = status != Status.OK
        flags = int(np.bitwise_or.reduce(status.ravel()))
        raise RuntimeError(f"{int(bad.sum())} of {bad.size} launches failed: {describe_status(flags)}")
    lags = np.concatenate([np.asarray(starts, np.float64)[..., None], np.asarray(lags, np.float64)], axis=-1)
    length = period[:, 1, None, None]
    coupling = _wrap(np.diff(lags, axis=-1) + period[:, 0, None, None], length)
    return TwoLevelCoupling(
        deltas=deltas,
        lags=lags,
        coupling=coupling,
        period=period,
        return_times=np.asarray(return_times, np.float64),
        status=status,
    )


def shared_slowdown(fleet_pair: Fleet) -> np.ndarray:
    """(2,) each job's compute speed while both jobs compute, over its solo speed.

    A pair whose two factors are equal is slowed by one common factor whenever both compute
    and runs at its solo rates otherwise; with fair storage (or f(n) = n) it is then two
    solo jobs on a reparametrised clock, so its coupling is exactly zero (docs/model.md
    claims 1, 8a, 9a). Unequal factors make compute speeds diverge: the pair couples.
    Under "maxmin" that happens for unequal sizes whenever min w < C < w_0 + w_1; under
    "uniform" only when C < max w (from max w up every job alone runs at full speed, and
    both together always run at one speed).
    """
    if not isinstance(fleet_pair, Fleet) or fleet_pair.batch_shape != () or fleet_pair.n_jobs != 2:
        raise ValueError("fleet_pair must be one ckpt_jax.Fleet (batch shape ()) of N = 2 jobs")
    params = jax.tree_util.tree_map(lambda x: x[0], loop.flat_params(fleet_pair))
    sharing = loop.sharing_for(fleet_pair)
    both = jnp.ones(2, bool)
    if sharing.power == "count":
        together = jnp.full(2, jnp.minimum(1.0, params.cap / 2))
    else:
        together = compute_speed(
            sharing, controller_load(sharing, params.size, both, params.cap), params.size, params.cap
        )
        together = jnp.broadcast_to(together, (2,))
    return np.asarray(together / solo_speed(params), np.float64)


def time_phase(u, compute, write_speed, speed):
    """Time until a job's next firing had it run alone, from its section coordinate u.

    A job alone (α = 0, τ = 0) drains at f(1) and computes at its solo speed s, so from
    u > T (draining u − T, then computing T) that time is (u − T)/f(1) + T/s, and from
    u ≤ T (computing) it is u/s. In these coordinates a job alone turns at unit rate.

    Args:
      u: array of section coordinates in (0, T + d].
      compute: the job's compute work T.
      write_speed: f(1).
      speed: the job's solo compute speed s (`solo_speed`).

    >>> float(time_phase(12.0, 10.0, 1.0, 0.5)), float(time_phase(4.0, 10.0, 1.0, 0.5))
    (22.0, 8.0)
    """
    u = np.asarray(u, np.float64)
    return np.where(u > compute, (u - compute) / write_speed + compute / speed, u / speed)


def stagger_lifetime(fire_times, end_times) -> tuple[np.ndarray, np.ndarray]:
    """Cycles a schedule lasts before two write windows first overlap (docs/model.md claim 7).

    Windows ``[fire, end)`` of different jobs overlap when each starts before the other
    ends (windows that only touch do not overlap, as in `analysis.writer_count`). The
    lifetime is the firing index k (0-based) of the window whose start opens the first
    overlap: k complete collision-free cycles went before it. Only overlaps that begin
    before ``t_obs``, the earliest over the jobs of each job's last recorded write end,
    count: up to then every window that has started is recorded. A fleet with no such
    overlap is *censored*: lifetime K. Windows with a NaN time (padding slots, unfinished
    runs) are ignored; a write in progress at t = 0 is not a recorded window.

    Args:
      fire_times: (..., N, K) firing times (`Trace.fire_times`).
      end_times: (..., N, K) ends of those writes.

    Returns:
      ``(lifetime, censored)``: (...,) int64 cycles, and (...,) bool, True where no
      overlap was seen before ``t_obs`` (lifetime = K is then a lower bound).

    Example:
      Job 1's third window [13, 15) overlaps job 0's [12, 14): lifetime 2.

      >>> fire = np.array([[0.0, 6.0, 12.0], [3.0, 9.0, 13.0]])
      >>> end = np.array([[2.0, 8.0, 14.0], [5.0, 11.0, 15.0]])
      >>> lifetime, censored = stagger_lifetime(fire, end)
      >>> int(lifetime), bool(censored)
      (2, False)
    """
    fire = np.asarray(fire_times, dtype=np.float64)
    end = np.asarray(end_times, dtype=np.float64)
    if fire.shape != end.shape or fire.ndim < 2:
        raise ValueError(f"fire_times and end_times must both have shape (..., N, K), got {fire.shape} and {end.shape}")
    *batch, n_jobs, n_fires = fire.shape
    flat_fire = fire.reshape(-1, n_jobs * n_fires)
    flat_end = end.reshape(-1, n_jobs * n_fires)
    cycle_index = np.broadcast_to(np.arange(n_fires), (n_jobs, n_fires)).reshape(-1)
    recorded = np.isfinite(flat_fire) & np.isfinite(flat_end)
    # Absent windows sort last and end before anything starts: they never overlap.
    start = np.where(recorded, flat_fire, np.inf)
    stop = np.where(recorded, flat_end, -np.inf)
    order = np.argsort(start, axis=1, kind="stable")
    start = np.take_along_axis(start, order, axis=1)
    stop = np.take_along_axis(stop, order, axis=1)
    index = cycle_index[order]
    # In start order a window overlaps an earlier-starting one iff it starts before the
    # latest end seen so far (a same-job window always ends before the job fires again).
    latest_end = np.maximum.accumulate(stop, axis=1)
    before = np.concatenate([np.full((stop.shape[0], 1), -np.inf), latest_end[:, :-1]], axis=1)
    # A slot with no window at all (padding) does not limit the observation; a job whose
    # run stopped early has a NaN last end, and nothing after its last end is known.
    last_end = np.max(np.where(np.isfinite(end), end, -np.inf), axis=-1).reshape(-1, n_jobs)
    has_window = np.isfinite(end).any(axis=-1).reshape(-1, n_jobs)
    observed_until = np.where(has_window, last_end, np.inf).min(axis=1)
    overlap = (start < before) & (start < observed_until[:, None])
    first = np.argmax(overlap, axis=1)
    found = overlap.any(axis=1)
    rows = np.arange(start.shape[0])
    lifetime = np.where(found, index[rows, first], n_fires).astype(np.int64)
    return lifetime.reshape(batch), (~found).reshape(batch)
