"""Job sizes and sharing policies (docs/model.md §1b): how the cap C is divided among the
computing jobs and f(n_w) among the writers once jobs are not anonymous.

The general engine traces one `Sharing` per group of fleets, decided on the host
(`sharing_for`): ``Sharing()`` is the base model's anonymous rule
(`ckpt_jax._params.phase_rates`) and costs nothing extra. `simulate` runs the fleets whose
sizes are all 1 on it, so with unit sizes ``"maxmin"``, ``"uniform"`` and ``"weighted"``
are today's results bit for bit, whatever the batch. The size-aware rules give the same
values for unit sizes too (``"maxmin"``: λ = C/n_c exactly), and the same bits where the
rates keep their shape (see `sharing_for` for the one exception).

The per-job rules act on ONE fleet (arrays of shape (N,)); the loops `vmap` them.
"""

from __future__ import annotations

from typing import NamedTuple, Optional

import jax
import jax.numpy as jnp
import numpy as np

from .model import Fleet

__all__ = ["Sharing", "sharing_for", "sized", "needs_general", "non_default_sharing", "controller_load", "compute_speed", "write_rates", "fcfs_head"]


class Sharing(NamedTuple):
    """The rate rules one call traces (static, hashable).

    Attributes:
      power: ``"count"`` (min(1, C/n_c), the base rule: every size is 1), ``"maxmin"`` or
        ``"uniform"``.
      storage: ``"fair"``, ``"weighted"`` or ``"fcfs"``.
    """

    power: str = "count"
    storage: str = "fair"


def sized(fleet: Fleet) -> np.ndarray:
    """Per fleet (batch shape), whether some active job has a size other than 1.

    Under tracing (a `Fleet` passed through `jax.vmap` or `jax.jit`, as the return maps
    allow) the sizes are unknown; the answer is then the flag `Fleet` recorded, as static
    data, when it was built (True for the whole batch if any fleet of it was sized: the
    size-aware rules are exact for unit sizes too, only slower)."""
    if isinstance(fleet.size, jax.core.Tracer) or isinstance(fleet.active, jax.core.Tracer):
        return np.full(fleet.batch_shape, getattr(fleet, "_sized", True))
    return np.any(np.asarray(fleet.active) & (np.asarray(fleet.size) != 1), axis=-1)


def needs_general(fleet: Fleet) -> np.ndarray:
    """Per fleet (batch shape), whether only the general engine is exact for it.

    The fast loops' virtual clocks need every writer to drain at one rate and every
    computing job to work at one rate. Unequal sizes break that under ``"maxmin"`` and
    ``"weighted"``, and under ``"uniform"`` the common speed min(1, C/Σ_S w_j) depends on
    *which* jobs compute; ``"fcfs"`` drains one writer at a time. So a fleet goes to a fast
    loop only with all sizes 1 and a storage policy other than ``"fcfs"`` (it is then the
    base model exactly).
    """
    return sized(fleet) | (fleet.storage_policy == "fcfs")


def sharing_for(fleet: Fleet, any_sized: Optional[bool] = None) -> Sharing:
    """The `Sharing` the general engine traces for ``fleet`` (decided on the host).

    ``any_sized``: whether the fleets it will run include one with a size other than 1
    (default: `sized` over the whole batch). `simulate` runs the unit-size fleets of a
    batch apart from the sized ones, so they trace the base rule itself: per-job rates
    ("weighted") let XLA fuse a product into a subtraction (one FMA) where the base rule's
    per-fleet rate does not, which would move unit-size fleets by an ulp.
    """
    if any_sized is None:
        any_sized = bool(np.any(sized(fleet)))
    power = fleet.power_policy if any_sized else "count"
    storage = fleet.storage_policy
    if storage == "weighted" and not any_sized:
        storage = "fair"
    return Sharing(power, storage)


def non_default_sharing(fleet: Fleet) -> dict:
    """The sizes and policies of ``fleet`` that differ from the defaults (for manifests and
    summaries, which then stay as they were for base-model fleets)."""
    entries = {}
    if bool(np.any(np.asarray(fleet.size) != 1)):
        entries["size"] = np.asarray(fleet.size).tolist()
    if fleet.power_policy != "maxmin":
        entries["power_policy"] = fleet.power_policy
    if fleet.storage_policy != "fair":
        entries["storage_policy"] = fleet.storage_policy
    return entries


def controller_load(sharing: Sharing, size, computing, cap):
    """The one number the power controller acts on (docs/model.md §1b): the computing
    count n_c (``"count"``), the computing size Σ_S w_j (``"uniform"``) or the
    water-filling level λ (``"maxmin"``, inf where the cap does not bind). The delayed
    controller (τ > 0) applies the value from τ earlier."""
    dtype = size.dtype
    if sharing.power == "count":
        return jnp.sum(computing).astype(dtype)
    if sharing.power == "uniform":
        return jnp.sum(jnp.where(computing, size, 0)).astype(dtype)
    return maxmin_level(size, computing, cap)


def maxmin_level(size, computing, cap):
    """The level λ with Σ_{j∈S} min(w_j, λ) = C, or inf where Σ_S w_j ≤ C (no job throttled).

    Sizes of the computing jobs are sorted ascending, s_0 ≤ s_1 ≤ ... ≤ s_{m-1}. If the
    k smallest run at full power, the other m − k share what is left equally:
    λ_k = (C − Σ_{j<k} s_j) / (m − k). The level is λ_k for the first k with λ_k ≤ s_k
    (job k is the smallest throttled one; every smaller job fits under λ). Fixed shape:
    one sort and one prefix sum over the N slots. With all sizes 1 the first k is 0 and
    λ = C / m, the base rule's C / n_c bit for bit.
    """
    dtype = size.dtype
    n_jobs = size.shape[0]
    inf = jnp.asarray(jnp.inf, dtype)
    ordered = jnp.sort(jnp.where(computing, size, inf))
    m = jnp.sum(computing).astype(jnp.int32)
    k = jnp.arange(n_jobs, dtype=jnp.int32)
    in_set = k < m
    served = jnp.where(in_set, ordered, 0)
    total = jnp.sum(served)
    before = jnp.concatenate([jnp.zeros((1,), dtype), jnp.cumsum(served)[:-1]])
    level = (cap - before) / jnp.maximum(m - k, 1).astype(dtype)
    fits = in_set & (level <= ordered)
    # Rounding can leave no k exactly fitting when C is within an ulp of Σ_S w: then the
    # largest job alone is throttled, to what is left, which is its size to rounding.
    first = jnp.where(jnp.any(fits), jnp.argmax(fits), jnp.maximum(m - 1, 0))
    return jnp.where(total > cap, level[first], inf).astype(dtype)


def compute_speed(sharing: Sharing, load, size, cap):
    """Each computing job's speed from the controller's `controller_load` (not for
    ``"count"``, which is `phase_rates`): ``"uniform"`` min(1, C/W), one factor for all;
    ``"maxmin"`` min(w_i, λ) / w_i, shape (N,)."""
    dtype = size.dtype
    if sharing.power == "uniform":
        binds = load > cap
        return jnp.where(binds, cap / jnp.where(binds, load, 1), 1).astype(dtype)
    return jnp.where(size <= load, 1, load / size).astype(dtype)


def write_rates(sharing: Sharing, throughput, writers, size, fair_rate, head):
    """Each writer's drain rate: ``"fair"`` f(n_w)/n_w (``fair_rate``, from `phase_rates`),
    ``"weighted"`` f(n_w)·w_i / Σ_W w_j, ``"fcfs"`` f(1) for the ``head`` and 0 for the
    writers queued behind it. ``throughput`` is the table f(0..N)."""
    dtype = size.dtype
    if sharing.storage == "fair":
        return fair_rate
    if sharing.storage == "weighted":
        n_writers = jnp.sum(writers)
        weight = jnp.sum(jnp.where(writers, size, 0))
        # f·w_i first, then / Σ w: with unit sizes this is f(n_w)/n_w to the bit.
        return (throughput[n_writers] * size / jnp.where(weight > 0, weight, 1)).astype(dtype)
    return jnp.where(head, throughput[1], 0).astype(dtype)


def fcfs_head(writers, queued_at):
    """The writer ``"fcfs"`` serves: the earliest firing (``queued_at``, -inf for writes
    in progress at t = 0), ties by job index; no job where nobody writes."""
    n_jobs = writers.shape[0]
    key = jnp.where(writers, queued_at, jnp.inf)
    first = writers & (key == jnp.min(key))
    return first & (jnp.arange(n_jobs) == jnp.argmax(first))
