"""An O(1)-per-switch engine for identical deterministic fleets (the FIFO path).

When every active job of a fleet has the same T and d, there is no jitter, no controller
delay (τ = 0) and no asynchronous checkpointing (α = 0), all writers drain at one rate
f(n_w)/n_w and all computing jobs work at one rate min(1, C/n_c) (MODEL.md §1). So within
each phase jobs finish in the order they entered it, and the cyclic firing order never
changes (claim 3). The engine then needs no per-job remaining work:

* two **virtual clocks**, ``write_clock`` = ∫ f(n_w)/n_w dt and ``compute_clock`` =
  ∫ min(1, C/n_c) dt, the work done per writer / per computing job since t = 0;
* one **ring** of the active jobs in cyclic order, split into the writers (oldest first,
  starting at ``write_head``) followed by the computing jobs (oldest first). A job leaving one
  phase joins the tail of the other, which is already its neighbour in the ring, so only
  ``write_head`` and ``n_writers`` move;
* per ring position the clock value (``target``) at which the job's phase ends: entry clock
  plus d (writers) or plus T (computing jobs).

The clocks grow without bound, so they and the targets are kept as unevaluated sums
``hi + lo`` (double-word arithmetic): the work left, ``target − clock``, is then as accurate
as the general engine's per-job remaining work, not limited to ulps of the clock.

Each loop iteration switches one job: the oldest writer or the oldest computing job. If
either is due at the current instant (by the general engine's snapping rule), it switches
with no time advance; otherwise time advances to the earlier of the two and that
job switches. So the jobs that switch together at one event instant do so in consecutive
iterations at the same time and see the same clocks, which is the general engine's
"every job that empties switches in the same step": the synchronous fleet stays exactly
synchronous. ``n_events`` counts event instants (iterations that advance time), as in
`ckpt_jax.engine`. Cost: O(1) per switch instead of O(N) per event.

`ckpt_jax.simulate` (``method="auto"``) runs every fleet for which `fifo_eligible` holds and
that has at least `FIFO_MIN_JOBS` active jobs on this path, the others on the general engine.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from . import engine
from .engine import STATUS_NONFINITE, STATUS_OK, _Params
from .model import Fleet

__all__ = ["FifoCarry", "fifo_eligible", "fifo_applies", "FIFO_MIN_JOBS"]

# `method="auto"` uses the FIFO path for fleets of at least this many active jobs: below it
# the general engine's O(N) step is as cheap as FIFO's bookkeeping (benchmarks/bench.py).
FIFO_MIN_JOBS = 8


class FifoCarry(NamedTuple):
    """The loop carry of one fleet on the FIFO path.

    Attributes:
      time: current time.
      write_clock, compute_clock: (2,) work done per writer / per computing job since
        t = 0, as a double-word ``hi + lo``.
      ring: (N,) int32 active job indices in cyclic firing order (padding slots at the end).
      target: (N, 2) per ring position, the clock value (double-word) at which that job's
        phase ends.
      write_head: int32 ring position of the oldest writer.
      n_writers: int32 jobs writing; the n_active − n_writers others compute.
      n_active: int32 active jobs (the ring's length).
      fire_count, end_count: (N,) int32 per job, as in `ckpt_jax.engine.Carry`.
      fire_times, end_times: (N, K) trace buffers, NaN until written.
      n_finished: int32 active jobs whose K-th write has ended (done when = n_active).
      n_events: int32 event instants stepped.
      status: int32 bit flags (`STATUS_*`).
    """

    time: jax.Array
    write_clock: jax.Array
    compute_clock: jax.Array
    ring: jax.Array
    target: jax.Array
    write_head: jax.Array
    n_writers: jax.Array
    n_active: jax.Array
    fire_count: jax.Array
    end_count: jax.Array
    fire_times: jax.Array
    end_times: jax.Array
    n_finished: jax.Array
    n_events: jax.Array
    status: jax.Array


def fifo_eligible(fleet: Fleet, jitter=None) -> np.ndarray:
    """Per fleet (batch shape), whether the FIFO path is exact for it: all its active jobs
    share T and d, and it has no jitter, τ = 0 and α = 0. Decided on the host."""
    batch = fleet.batch_shape
    ok = np.ones(batch, bool)
    if jitter is not None:
        ok &= np.broadcast_to(np.asarray(jitter) == 0, batch)
    ok &= np.asarray(fleet.delay) == 0
    ok &= np.asarray(fleet.async_fraction) == 0
    active = np.asarray(fleet.active)
    first = np.argmax(active, axis=-1)[..., None]
    for values in (np.asarray(fleet.compute), np.asarray(fleet.write)):
        same = values == np.take_along_axis(values, first, axis=-1)
        ok &= np.all(~active | same, axis=-1)
    return ok


def fifo_applies(fleet: Fleet, jitter=None) -> bool:
    """True where the FIFO path is exact for every fleet of the batch (`fifo_eligible`)."""
    return bool(np.all(fifo_eligible(fleet, jitter)))


def _two_sum(a, b):
    """a + b as an unevaluated sum (s, e) with s = fl(a + b), exactly (Knuth)."""
    s = a + b
    b_virtual = s - a
    e = (a - (s - b_virtual)) + (b - b_virtual)
    return s, e


def _dw_add(x, y):
    """Double-word x (shape (2,)) plus a plain number y, renormalised."""
    s, e = _two_sum(x[0], y)
    hi, lo = _two_sum(s, e + x[1])
    return jnp.stack([hi, lo])


def _dw_left(target, clock):
    """target − clock for double-words, rounded once: the work left."""
    return (target[0] - clock[0]) + (target[1] - clock[1])


def _job_work(params: _Params):
    """The fleet's common (T, d), shape (2,): every active job has the same.

    O(N): computed once per run, outside the event loop."""
    first = jnp.argmax(params.active)
    return jnp.stack([params.compute[first], params.write[first]])


def _init_carry(params: _Params, state_phase, state_remaining, n_fires: int) -> FifoCarry:
    dtype = params.compute.dtype
    n_jobs = params.compute.shape[0]
    writing = params.active & (state_phase == 1)
    # Ring order: writers by remaining volume, then computing jobs by remaining work,
    # then padding. Each queue is then sorted by target (entry order), as the FIFO needs.
    group = jnp.where(params.active, jnp.where(writing, 0, 1), 2)
    ring = jnp.lexsort((state_remaining, group)).astype(jnp.int32)
    nan_trace = jnp.full((n_jobs, n_fires), jnp.nan, dtype)
    zero = jnp.zeros((), dtype)
    target = state_remaining[ring].astype(dtype)
    return FifoCarry(
        time=zero,
        write_clock=jnp.zeros(2, dtype),
        compute_clock=jnp.zeros(2, dtype),
        ring=ring,
        target=jnp.stack([target, jnp.zeros_like(target)], axis=-1),
        write_head=jnp.zeros((), jnp.int32),
        n_writers=jnp.sum(writing).astype(jnp.int32),
        n_active=jnp.sum(params.active).astype(jnp.int32),
        fire_count=jnp.zeros(n_jobs, jnp.int32),
        end_count=jnp.zeros(n_jobs, jnp.int32),
        fire_times=nan_trace,
        end_times=nan_trace,
        n_finished=jnp.zeros((), jnp.int32),
        n_events=jnp.zeros((), jnp.int32),
        status=jnp.zeros((), jnp.int32),
    )


def _look(params: _Params, work, carry: FifoCarry):
    """Rates, the oldest writer / computing job (ring positions, work left) and which of
    them is due now: everything one iteration reads, gathered once."""
    heads = _heads(params, carry)
    return heads + _due(params, work, carry, heads)


def _heads(params: _Params, carry: FifoCarry):
    """Rates and the oldest writer / computing job: ring positions and work left."""
    dtype = params.compute.dtype
    n_writers = carry.n_writers
    n_computing = (carry.n_active - n_writers).astype(dtype)
    # The same expressions as `engine._rates`, so rates agree bit for bit.
    write_rate = params.throughput[n_writers] / jnp.maximum(n_writers, 1).astype(dtype)
    speed = jnp.where(n_computing > params.cap, params.cap / jnp.maximum(n_computing, 1), 1.0).astype(dtype)
    n_active = jnp.maximum(carry.n_active, 1)  # safe modulus on finished (all-padding) lanes
    write_pos = carry.write_head
    compute_pos = (carry.write_head + n_writers) % n_active
    write_left = _dw_left(carry.target[write_pos], carry.write_clock)
    compute_left = _dw_left(carry.target[compute_pos], carry.compute_clock)
    return write_rate, speed, write_pos, compute_pos, write_left, compute_left


def _due(params: _Params, work, carry: FifoCarry, heads):
    """Which head switches at the current instant without advancing time.

    The general engine's snapping rule (`engine._switch`): due within `engine._SNAP_ULPS`
    ulps of the clock, or left with that many ulps of its phase's full work.
    """
    compute, write = work[0], work[1]
    write_rate, speed, _, _, write_left, compute_left = heads
    eps = jnp.finfo(params.compute.dtype).eps * engine._SNAP_ULPS
    clock = eps * carry.time
    has_writer = carry.n_writers > 0
    has_computing = carry.n_writers < carry.n_active
    due_write = has_writer & ((write_left / write_rate <= clock) | (write_left <= eps * write))
    due_compute = has_computing & ((compute_left / speed <= clock) | (compute_left <= eps * compute))
    return due_write, due_compute


def _done(carry: FifoCarry):
    return carry.n_finished >= carry.n_active


def _running(carry: FifoCarry, look, event_limit):
    """Runs until done; past the event budget only to finish the current instant."""
    due_write, due_compute = look[-2:]
    within = (carry.n_events < event_limit) | ((carry.n_events > 0) & (due_write | due_compute))
    return ~_done(carry) & (carry.status == STATUS_OK) & within


def _switch_one(params: _Params, work, carry: FifoCarry, look, running, n_fires: int) -> FifoCarry:
    """Switches one job (advancing time first if no job is due now). ``look`` = `_look`.

    Stopped lanes (``running`` False) still execute this under `vmap`: they take dt = 0,
    switch nobody and write nothing (every scatter index is out of range for them).
    """
    dtype = params.compute.dtype
    inf = jnp.asarray(jnp.inf, dtype)
    compute, write = work[0], work[1]
    write_rate, speed, write_pos, compute_pos, write_left, compute_left, due_write, due_compute = look
    due = due_write | due_compute
    has_writer = carry.n_writers > 0
    has_computing = carry.n_writers < carry.n_active

    write_dt = jnp.where(has_writer, write_left / write_rate, inf)
    compute_dt = jnp.where(has_computing, compute_left / speed, inf)
    dt = jnp.minimum(write_dt, compute_dt)
    finite = jnp.isfinite(dt)
    advance = running & ~due & finite
    dt = jnp.where(advance, dt, 0)
    # The head that sets dt is exactly at its target: snap that clock onto it, so jobs that
    # entered the phase together (equal targets) read exactly zero left and follow at once.
    write_clock = jnp.where(
        advance & (write_dt == dt), carry.target[write_pos], _dw_add(carry.write_clock, write_rate * dt)
    )
    compute_clock = jnp.where(
        advance & (compute_dt == dt), carry.target[compute_pos], _dw_add(carry.compute_clock, speed * dt)
    )
    time = carry.time + dt

    # Who switches: a due head (writers first), else the head that set dt.
    ends = running & jnp.where(due, due_write, advance & (write_dt == dt))
    fires = running & ~ends & jnp.where(due, due_compute, advance & (compute_dt == dt))
    pos = jnp.where(ends, write_pos, compute_pos)
    job = carry.ring[pos]
    n_jobs = params.compute.shape[0]
    count = carry.fire_count[job]
    ended = carry.end_count[job]

    # Counters are updated with `set` of a value read from them (not `add`): the data
    # dependency lets XLA update them in place instead of copying (B, N) every iteration.
    record_end = ends & (count >= 1) & (count <= n_fires)
    end_times = carry.end_times.at[job, jnp.where(record_end, count - 1, n_fires)].set(time, mode="drop")
    end_count = carry.end_count.at[jnp.where(record_end, job, n_jobs)].set(ended + 1, mode="drop")
    finished = record_end & (ended + 1 == n_fires)
    fire_times = carry.fire_times.at[job, jnp.where(fires & (count < n_fires), count, n_fires)].set(time, mode="drop")
    fire_count = carry.fire_count.at[jnp.where(fires, job, n_jobs)].set(count + 1, mode="drop")

    # A writer that ends joins the computing tail (target: compute clock + T); a job that
    # fires joins the writers' tail (write clock + d). Both are already at that ring spot.
    new_target = jnp.where(ends, _dw_add(compute_clock, compute), _dw_add(write_clock, write))
    switched = ends | fires
    target = carry.target.at[jnp.where(switched, pos, n_jobs)].set(new_target, mode="drop")
    n_active = jnp.maximum(carry.n_active, 1)
    write_head = jnp.where(ends, (carry.write_head + 1) % n_active, carry.write_head)
    n_writers = carry.n_writers - ends.astype(jnp.int32) + fires.astype(jnp.int32)
    status = carry.status | jnp.where(running & ~due & ~finite, STATUS_NONFINITE, 0)
    return FifoCarry(
        time=time,
        write_clock=write_clock,
        compute_clock=compute_clock,
        ring=carry.ring,
        target=target,
        write_head=write_head,
        n_writers=n_writers,
        n_active=carry.n_active,
        fire_count=fire_count,
        end_count=end_count,
        fire_times=fire_times,
        end_times=end_times,
        n_finished=carry.n_finished + finished.astype(jnp.int32),
        n_events=carry.n_events + advance.astype(jnp.int32),
        status=status.astype(jnp.int32),
    )


def _advance(params: _Params, carry: FifoCarry, event_limit, n_fires: int) -> FifoCarry:
    """Switches jobs of a batch of fleets (leading axis B) until each is done or stopped."""
    work = jax.vmap(_job_work)(params)
    look = jax.vmap(_look)
    running = jax.vmap(_running, in_axes=(0, 0, None))
    switch = jax.vmap(_switch_one, in_axes=(0, 0, 0, 0, 0, None))

    def cond(state):
        return jnp.any(state[2])

    def body(state):
        carry, seen, active = state
        carry = switch(params, work, carry, seen, active, n_fires)
        seen = look(params, work, carry)
        return carry, seen, running(carry, seen, event_limit)

    seen = look(params, work, carry)
    return jax.lax.while_loop(cond, body, (carry, seen, running(carry, seen, event_limit)))[0]


_advance_jit = jax.jit(_advance, static_argnames=("n_fires",), donate_argnums=(1,))
_init_jit = jax.jit(jax.vmap(_init_carry, in_axes=(0, 0, 0, None)), static_argnums=(3,))
