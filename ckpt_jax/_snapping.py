"""The snapping rule and the horizon (docs/model.md §1): when a phase ends, and how the
clock reaches a horizon H.

Every loop (general, FIFO, clock) decides simultaneity with `snapped` and steps to a
horizon with `to_horizon` and `horizon_clock`, so the three agree bit for bit where they
overlap. The rates of a step are `ckpt_jax._rates`.
"""

from __future__ import annotations

import jax.numpy as jnp

__all__ = ["SNAP_ULPS", "snapped", "to_horizon", "horizon_clock"]

# Jobs due within this many ulps of the clock, or left with this many ulps of their phase's
# full work, switch in the same step as the event: simultaneous to working precision.
# Without it, two jobs that should empty together can leave a 1-ulp remainder and take a
# spurious tiny extra step (docs/model.md §1: simultaneous events switch together).
SNAP_ULPS = 8


def snapped(time_to_end, left, work, dt, clock, dtype):
    """The snapping rule, written once for every loop: a phase that ends within
    `SNAP_ULPS` ulps of the clock after ``dt``, or has that many ulps of its work
    ``work`` left, ends now (simultaneous to working precision, docs/model.md §1).

    Both scales matter: a fleet mixing T = 0.25 with d = 2.5 leaves remainders far above
    T's ulps but far below the clock's."""
    eps = jnp.finfo(dtype).eps * SNAP_ULPS
    return (time_to_end <= dt + eps * clock) | (left <= eps * work)


def to_horizon(dt, clock, horizon, dtype):
    """The step to take with a ``horizon``: ``dt`` (to the next event) clamped to it, and
    the whole way to it where the event lies within `SNAP_ULPS` ulps of the horizon on
    either side. The snapping rule applied at the horizon, written once for every loop:
    the event and the horizon are simultaneous to working precision, so the jobs due then
    switch at H, and a fleet never takes a last step of a few ulps to reach H
    (docs/model.md §1 "The horizon")."""
    left = jnp.maximum(horizon - clock, 0)
    eps = jnp.finfo(dtype).eps * SNAP_ULPS
    return jnp.where(dt >= left - eps * horizon, left, dt)


def horizon_clock(clock, dt, horizon):
    """The clock after a step of ``dt`` clamped by `to_horizon`: exactly ``horizon``
    where the step goes the whole way to it. ``clock + (horizon - clock)`` rounds to a
    neighbour of H in a few percent of steps from a clock below H / 2 (above, the
    difference is exact): past H the run would stop an ulp late, short of it it would take
    one more step of an ulp, a second instant for H (docs/model.md §1)."""
    return jnp.where(dt >= horizon - clock, horizon, clock + dt)
