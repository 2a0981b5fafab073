"""Every status bit of ckpt_jax, with its message: one registry (jax-md's error codes).

A status is an int32 of OR-ed bits; 0 means a clean result. Every module that can flag
something takes its bit from here, so `describe_status` explains every code any function
returns (`simulate`, the return maps, `spectrum`, the FTLE functions).
"""

from __future__ import annotations

import enum

import jax.numpy as jnp
import numpy as np

__all__ = ["Status", "describe_status", "flag", "MESSAGES"]


class Status(enum.IntFlag):
    """The status bits (values are fixed: they are stored in saved results)."""

    OK = 0
    MAX_EVENTS = 1  # the event budget ran out before the run completed
    NONFINITE = 2  # a time or an event time became inf or NaN
    QUEUE_OVERFLOW = 4  # the delayed controller's pending-update queue was full
    ORDER_CHANGED = 8  # return maps: some job fired 0 or 2+ times, or out of order
    OUT_OF_DOMAIN = 16  # return maps: the point is not a valid coordinate
    DEGENERATE = 32  # FTLE: the tangent or the twin separation vanished
    UNSUPPORTED = 64  # return maps: delay > 0 or async_fraction > 0
    NOT_SMOOTH = 128  # return maps: a tie of distinct jobs' events, the map has a kink here
    STALLED = 256  # time stopped advancing: more switches at one instant than N jobs can make


MESSAGES = {
    Status.MAX_EVENTS: "hit the event budget (max_events) before the run completed",
    Status.NONFINITE: "a non-finite time occurred (the run's times overflowed or became NaN)",
    Status.QUEUE_OVERFLOW: "the delayed-controller queue overflowed (raise queue_size)",
    Status.ORDER_CHANGED: "the firing order changed before job 0 fired again (the map is not defined)",
    Status.OUT_OF_DOMAIN: "the point is outside the map's domain",
    Status.DEGENERATE: "the tangent vector or the twin separation vanished (no rate)",
    Status.UNSUPPORTED: "return maps are defined for delay 0 and async_fraction 0 only",
    Status.NOT_SMOOTH: (
        "events of distinct jobs coincided during the cycle: the map is only piecewise smooth "
        "here and its Jacobian is one-sided (linearise at a nearby point of one branch)"
    ),
    Status.STALLED: (
        "time stopped advancing (more switches at one instant than the fleet's jobs can make): "
        "the fleet's times are below the resolution of its dtype"
    ),
}


def flag(condition, bit: int) -> jnp.ndarray:
    """``bit`` as int32 where ``condition`` holds, else 0.

    Both branches are explicitly int32: OR-ing an int32 status with a weakly typed
    ``jnp.where(c, bit, 0)`` crashed XLA:CPU's eager compile under x64 (JAX 0.10.2).
    """
    return jnp.where(condition, jnp.int32(int(bit)), jnp.int32(0))


def describe_status(status) -> str:
    """Human-readable reasons for a status code (OR-ed bits of `Status`).

    Args:
      status: one code (an int or a 0-d array), or an array of codes, e.g. ``trace.status``
        of a batch: then a summary of the whole array, with how many codes carry each bit.

    Examples:
      >>> describe_status(0)
      'ok'
      >>> describe_status(Status.MAX_EVENTS | Status.NONFINITE).split("; ")[1][:20]
      'a non-finite time oc'
      >>> describe_status(np.array([0, 1, 1, 0]))
      '2 of 4 not ok: hit the event budget (max_events) before the run completed (2 of 4)'
    """
    codes = np.asarray(status)
    if codes.dtype == bool or not (
        np.issubdtype(codes.dtype, np.integer)
        or (np.issubdtype(codes.dtype, np.floating) and np.all(np.mod(codes, 1) == 0))
    ):
        raise ValueError(f"status must be an integer status code or an array of them, got {status!r:.80}")
    codes = codes.astype(np.int64)
    if codes.ndim == 0:
        return _describe(int(codes))
    if not codes.any():
        return "ok"
    n, n_bad = codes.size, int(np.count_nonzero(codes))
    parts = [
        f"{text} ({int(np.count_nonzero(codes & bit))} of {n})" for bit, text in MESSAGES.items() if np.any(codes & bit)
    ]
    unknown = int(np.bitwise_or.reduce(codes.ravel())) & ~sum(int(bit) for bit in MESSAGES)
    if unknown:
        parts.append(f"unknown status bits {unknown:#x}")
    return f"{n_bad} of {n} not ok: " + "; ".join(parts)


def _describe(status: int) -> str:
    if status == 0:
        return "ok"
    parts = [text for bit, text in MESSAGES.items() if status & bit]
    unknown = status & ~sum(int(bit) for bit in MESSAGES)
    if unknown:
        parts.append(f"unknown status bits {unknown:#x}")
    return "; ".join(parts)
