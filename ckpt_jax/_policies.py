"""The names of the model's policies and throughput presets (docs/model.md §1b, §1d, §1e), in
plain Python: the command line offers them as choices, and a fleet file is checked against
them, before anything imports JAX (`ckpt_jax.model` and `ckpt_jax._throughput` hold them for
the engine)."""

from __future__ import annotations

import math
from collections.abc import Callable

__all__ = [
    "POWER_POLICIES",
    "STORAGE_POLICIES",
    "RECOVERY_SOURCES",
    "QUEUE_POLICIES",
    "ONE_AT_A_TIME",
    "THROUGHPUT_PRESETS",
    "storage_curve",
]

# How the cap C is divided among the computing jobs, and f(n_w) among the writers
# (docs/model.md §1b); the first of each is the default.
POWER_POLICIES = ("maxmin", "uniform")
STORAGE_POLICIES = ("fair", "weighted", "fcfs", "fcfs_nonblocking", "cooperative")
# What a failure of a two-level checkpointing job loses (docs/model.md §1d).
RECOVERY_SOURCES = ("storage", "memory")
# Storage policies of the peer's model (docs/model.md §1e): one I/O at a time, and a job whose
# checkpoint waits keeps computing (its request stays queued). Like "fcfs", they drain one
# writer at a time; unlike it, a firing is a checkpoint *request*, and the write starts when
# the storage grants it.
QUEUE_POLICIES = ("fcfs_nonblocking", "cooperative")
ONE_AT_A_TIME = ("fcfs",) + QUEUE_POLICIES

# Named throughput functions f(n) (aggregate write bandwidth with n concurrent writers).
THROUGHPUT_PRESETS: dict[str, Callable[[int], float]] = {
    "shared": lambda n: 1.0,  # one unit of bandwidth shared equally (storage contention)
    "linear": lambda n: float(n),  # no storage contention: each writer at full speed
    "sqrt": lambda n: math.sqrt(n),  # sub-linear aggregate bandwidth
    "saturating": lambda n: float(min(n, 4)),  # bandwidth grows until 4 writers, then shared
    "degrading": lambda n: 1.0 / (1.0 + 0.1 * (n - 1)),  # thrashing: more writers, less total
}


def storage_curve(n: int, peak: float, saturates_at: int, degradation: float) -> float:
    """f(n) of a fleet file's ``[storage]`` curve: the aggregate bandwidth of n concurrent
    writers, ``peak * min(n, k) / k / (1 + degradation * max(n - k, 0))`` with k
    ``saturates_at`` (what `ckpt_jax.fleetfile` reads and `ckpt_jax.fit` fits)."""
    return peak * min(n, saturates_at) / saturates_at / (1.0 + degradation * max(n - saturates_at, 0))
