"""The rate rule of every policy (docs/model.md §1, §1b): how fast each computing job works
and each writer drains, given who computes and who writes. Which variants a fleet uses, and
so which of these rules a run traces, is decided on the host (`ckpt_jax._plan`).

The base model's anonymous rule is `phase_rates`: f(n_w)/n_w per writer and min(1, C/n_c)
per computing job, written once for every loop (general, FIFO, clock), so the three agree bit
for bit where they overlap. Job sizes and sharing policies (§1b) refine it on the general
engine, which traces one `Sharing` per group of fleets, decided on the host (`ckpt_jax._plan.sharing_for`):
``Sharing()`` is the base rule and costs nothing extra. `simulate` runs the fleets whose
sizes are all 1 on it, so with unit sizes ``"maxmin"``, ``"uniform"`` and ``"weighted"`` are
the base model's results bit for bit, whatever the batch. The size-aware rules give the same
values for unit sizes too (``"maxmin"``: λ = C/n_c exactly), and the same bits where the
rates keep their shape (see `ckpt_jax._plan.sharing_for` for the one exception).

The per-job rules act on ONE fleet (arrays of shape (N,)); the loops `vmap` them. When a
phase ends is the snapping rule, `ckpt_jax._snapping`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

import jax.numpy as jnp

from .model import ONE_AT_A_TIME, QUEUE_POLICIES

if TYPE_CHECKING:  # annotations only: the rate rule imports nothing of the package
    from ._params import Params

__all__ = [
    "Sharing",
    "phase_rates",
    "computing_mask",
    "controller_load",
    "maxmin_level",
    "compute_speed",
    "write_rates",
    "capped_fill",
    "fill_level",
    "filled_rates",
    "fcfs_head",
    "QUEUE_POLICIES",
    "ONE_AT_A_TIME",
    "least_waste_scores",
]


class Sharing(NamedTuple):
    """The rate rules one call traces (static, hashable).

    Attributes:
      power: ``"count"`` (min(1, C/n_c), the base rule: every size is 1), ``"maxmin"``,
        ``"uniform"``, or ``"free"``: the cap cannot bind in any fleet of the run (the sizes
        of its active jobs sum to at most C, and τ = 0), so every computing job runs at full
        speed — the values of ``"maxmin"`` and ``"uniform"`` there, without their per-event
        passes (`sharing_for` decides it on the host).
      storage: ``"fair"``, ``"weighted"``, ``"fcfs"``, ``"fcfs_nonblocking"`` or ``"cooperative"``.
      limits: the writers have write limits (docs/model.md §1d): the storage is shared by
        water-filling with caps (`capped_fill`).
    """

    power: str = "count"
    storage: str = "fair"
    limits: bool = False


def phase_rates(throughput_at_writers, n_writers, n_computing, cap, dtype):
    """The rate rule (docs/model.md §1), written once for every loop: each of ``n_writers``
    writers drains at f(n_w)/n_w and each computing job works at min(1, C/n_c).

    ``n_computing`` is a float in the dtype; the safe denominators keep lanes with no
    writer or no computing job finite (their rate is then unused)."""
    write_rate = throughput_at_writers / jnp.maximum(n_writers, 1).astype(dtype)
    # The cap binds only where n_c > C.
    speed = jnp.where(n_computing > cap, cap / jnp.maximum(n_computing, 1), 1.0).astype(dtype)
    return write_rate, speed


def computing_mask(params: Params, draining, waiting, use_async: bool = True, snapping=None):
    """Jobs that draw compute power (docs/model.md §1: a draining job counts when α > 0;
    §1d: a job taking its snapshot, ``snapping``, does not).

    ``use_async=False`` is a static promise that α = 0 in every fleet: then no job ever
    waits and a draining job never computes, and the simpler expressions give the same
    bits with fewer passes over the (B, N) arrays.
    """
    if not use_async:
        return params.active & ~draining
    computing = params.active & ~waiting & (~draining | (params.async_fraction > 0))
    return computing if snapping is None else computing & ~snapping


def controller_load(sharing: Sharing, size, computing, cap, order=None):
    """The one number the power controller acts on (docs/model.md §1b): the computing
    count n_c (``"count"``), the computing size Σ_S w_j (``"uniform"``) or the
    water-filling level λ (``"maxmin"``, inf where the cap does not bind; ``order``: the
    slots by ascending size, `Params.size_order`, or None). The delayed controller (τ > 0)
    applies the value from τ earlier."""
    dtype = size.dtype
    if sharing.power in ("count", "free"):  # "free": the count, never applied (τ = 0)
        return jnp.sum(computing).astype(dtype)
    if sharing.power == "uniform":
        return jnp.sum(jnp.where(computing, size, 0)).astype(dtype)
    return maxmin_level(size, computing, cap) if order is None else _ordered_level(size, computing, cap, order)


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


def _ordered_level(size, computing, cap, order):
    """`maxmin_level` where the slots' order by size is known (``order``, static per
    fleet): the computing sizes read in that order with the others zeroed are the sorted
    sizes with zeros between them, and x + 0 = x, so the prefix sums, levels and the first
    job that fits are the same numbers, without a sort per event."""
    dtype = size.dtype
    in_set = computing[order]
    ordered = size[order]
    if size.shape[0] <= NETWORK_MAX_SLOTS:
        return _one_pass_power_level(cap, ordered, in_set)
    served = jnp.where(in_set, ordered, 0)
    total = jnp.sum(served)
    before = jnp.concatenate([jnp.zeros((1,), dtype), jnp.cumsum(served)[:-1]])
    rank = jnp.cumsum(in_set.astype(jnp.int32)) - in_set.astype(jnp.int32)  # computing jobs before
    m = jnp.sum(in_set.astype(jnp.int32))
    level = (cap - before) / jnp.maximum(m - rank, 1).astype(dtype)
    fits = in_set & (level <= ordered)
    # No k fits (C within an ulp of Σ_S w): the largest computing job, the last in order.
    last = jnp.where(in_set, level, jnp.asarray(-jnp.inf, dtype))[::-1]
    fallback = last[jnp.argmax(in_set[::-1])]
    chosen = jnp.where(jnp.any(fits), level[jnp.argmax(fits)], fallback)
    return jnp.where(total > cap, chosen, jnp.asarray(jnp.inf, dtype)).astype(dtype)


def _one_pass_power_level(cap, ordered, in_set):
    """`_ordered_level` in one pass over the slots by ascending size, as `_one_pass_level`
    fills the write limits: the sizes summed left to right, the first computing job k with
    C − Σ_{j<k} w_j <= w_k · (computing jobs from k on) gives λ (divided out once); none
    fits (C within rounding of Σ_S w): the largest computing job's. One fused kernel per
    batch of fleets; the level agrees with the prefix-sum version to rounding."""
    dtype = ordered.dtype
    before = jnp.zeros((), dtype)
    rest = jnp.sum(in_set.astype(jnp.int32))
    left, share = jnp.asarray(jnp.inf, dtype), jnp.ones((), dtype)
    last = jnp.asarray(-jnp.inf, dtype)
    found = jnp.zeros((), bool)
    for k in range(ordered.shape[0]):
        member, size = in_set[k], ordered[k]
        count = rest.astype(dtype)
        fits = member & ~found & (cap - before <= size * count)
        left = jnp.where(fits, cap - before, left)
        share = jnp.where(fits, count, share)
        last = jnp.where(member, cap - before, last)  # the last computing job: alone from here
        found = found | fits
        before = before + jnp.where(member, size, 0)
        rest = rest - member.astype(jnp.int32)
    chosen = jnp.where(found, left / share, last)
    return jnp.where(before > cap, chosen, jnp.asarray(jnp.inf, dtype)).astype(dtype)


def compute_speed(sharing: Sharing, load, size, cap):
    """Each computing job's speed from the controller's `controller_load` (not for
    ``"count"``, which is `phase_rates`): ``"uniform"`` min(1, C/W), one factor for all;
    ``"maxmin"`` min(w_i, λ) / w_i, shape (N,); ``"free"`` 1 (the cap never binds)."""
    dtype = size.dtype
    if sharing.power == "free":
        return jnp.ones_like(size)
    if sharing.power == "uniform":
        binds = load > cap
        return jnp.where(binds, cap / jnp.where(binds, load, 1), 1).astype(dtype)
    return jnp.where(size <= load, 1, load / size).astype(dtype)


def write_rates(sharing: Sharing, throughput, writers, size, fair_rate, head, limit=None, order=None):
    """Each writer's drain rate: ``"fair"`` f(n_w)/n_w (``fair_rate``, from `phase_rates`),
    ``"weighted"`` f(n_w)·w_i / Σ_W w_j, ``"fcfs"`` f(1) for the ``head`` and 0 for the
    writers queued behind it. ``throughput`` is the table f(0..N).

    With ``sharing.limits`` (docs/model.md §1d) each writer drains at most at its ``limit``
    b_i: ``"fair"`` and ``"weighted"`` fill f(n_w) by water-filling with caps
    (`capped_fill`, by size under ``"weighted"``), ``"fcfs"`` drains its head at
    min(b, f(1))."""
    dtype = size.dtype
    if sharing.limits:
        assert limit is not None  # the writers' limits b_i
        if sharing.storage in ONE_AT_A_TIME:
            return jnp.where(head, jnp.minimum(limit, throughput[1]), 0).astype(dtype)
        weight = size if sharing.storage == "weighted" else None
        return capped_fill(throughput[jnp.sum(writers)], limit, weight, writers, order)
    if sharing.storage == "fair":
        return fair_rate
    if sharing.storage == "weighted":
        n_writers = jnp.sum(writers)
        weight = jnp.sum(jnp.where(writers, size, 0))
        # f·w_i first, then / Σ w: with unit sizes this is f(n_w)/n_w to the bit.
        return (throughput[n_writers] * size / jnp.where(weight > 0, weight, 1)).astype(dtype)
    return jnp.where(head, throughput[1], 0).astype(dtype)


def capped_fill(total, limit, weight, members, order=None):
    """Max-min fair water-filling with caps (docs/model.md §1d): the rates
    r_i = min(b_i, λ·w_i) of the ``members`` with Σ r_i = ``total``, or r_i = b_i where
    Σ b_i <= total (every member at its cap; the rest of the storage is unused).

    Members sorted by b_i / w_i ascending: if the k first run at their caps, the others
    share what is left in proportion to their weights, λ_k = (total − Σ_{j<k} b_j) /
    Σ_{j>=k} w_j; the level is λ_k for the first k with λ_k <= b_k / w_k (member k is the
    first one not held back by its cap). Fixed shape: one sort and two prefix sums over
    the N slots, as `maxmin_level`. ``weight`` None means unit weights (``"fair"``), which
    `_unit_fill` computes without a sort, or with ``order`` (the slots by ascending b_i,
    `Params.limit_order`) `_ordered_fill`. Returns (N,) rates, 0 outside ``members``."""
    if weight is None:
        return _unit_fill(total, limit, members) if order is None else _ordered_fill(total, limit, members, order)
    dtype = weight.dtype
    inf = jnp.asarray(jnp.inf, dtype)
    ratio = jnp.where(members, limit / weight, inf)
    order = jnp.lexsort((~members, ratio))  # members first among equal (infinite) ratios
    in_set = members[order]
    caps = jnp.where(in_set, limit[order], 0)
    weights = jnp.where(in_set, weight[order], 0)
    before = jnp.concatenate([jnp.zeros((1,), dtype), jnp.cumsum(caps)[:-1]])
    rest = jnp.cumsum(weights[::-1])[::-1]  # Σ_{j>=k} w_j
    level = (total - before) / jnp.where(rest > 0, rest, 1)
    fits = in_set & (level <= ratio[order])
    # None fits: every member at its cap (Σ b_i <= total, or within rounding of it).
    chosen = jnp.where(jnp.any(fits), level[jnp.argmax(fits)], inf)
    return jnp.where(members, jnp.minimum(limit, chosen * weight), 0).astype(dtype)


# Up to this many job slots the unit-weight water-filling sorts with a comparator network
# and sums its prefix unrolled; beyond, with `jnp.sort` and `jnp.cumsum`.
NETWORK_MAX_SLOTS = 64


def _unit_fill(total, limit, members):
    """`capped_fill` with unit weights, the same bits without its lexsort and gathers: the
    order only has to place the caps, and equal caps are equal values, so sorting the caps
    alone (members' b_i, inf elsewhere) gives the sorted arrays; Σ_{j>=k} w_j is m − k,
    exact. Up to `NETWORK_MAX_SLOTS` slots the caps go through a sorting network of min/max
    (exact) and the prefix is summed left to right, as `jnp.cumsum` does on the CPU.
    XLA:CPU runs a sort of a few slots per fleet as a generic kernel, about 100 ns per
    slot, and a cumulative sum as a windowed reduction; the network's layers and the
    unrolled sum are elementwise passes (capped fill 3–4× faster at N = 16)."""
    dtype = limit.dtype
    inf = jnp.asarray(jnp.inf, dtype)
    n_jobs = members.shape[0]
    small = n_jobs <= NETWORK_MAX_SLOTS
    ordered = _network_sort(jnp.where(members, limit, inf)) if small else jnp.sort(jnp.where(members, limit, inf))
    m = jnp.sum(members)
    k = jnp.arange(n_jobs)
    in_set = k < m
    caps = jnp.where(in_set, ordered, 0)
    before = _exclusive_prefix(caps) if small else jnp.concatenate([jnp.zeros((1,), dtype), jnp.cumsum(caps)[:-1]])
    return _first_fit(total, limit, members, ordered, in_set, before, (m - k).astype(dtype))


def _ordered_fill(total, limit, members, order):
    """`_unit_fill` where the slots' order by b_i is known (``order``, static per fleet): the
    members read in that order with the others' caps zeroed are the sorted caps with zeros
    between them, and x + 0 = x, so the prefix sums, levels and the first member that fits
    are the same numbers, without a sort per event."""
    return filled_rates(limit, members, fill_level(total, limit, members, order))


def fill_level(total, limit, members, order):
    """The water level λ of `capped_fill` with unit weights, the slots' order by b_i known
    (``order``, `Params.limit_order`): each member drains at min(b_i, λ) (`filled_rates`);
    inf where every member runs at its cap. One number per fleet: the general loop carries
    it from the end of one step into the next (`ckpt_jax._loops.general`)."""
    dtype = limit.dtype
    in_set = members[order]
    ordered = limit[order]
    n_jobs = members.shape[0]
    if n_jobs <= NETWORK_MAX_SLOTS:
        return _one_pass_level(total, ordered, in_set, jnp.sum(members))
    caps = jnp.where(in_set, ordered, 0)
    # One windowed reduction instead of N − 1 dependent adds, each its own pass.
    before = jnp.concatenate([jnp.zeros((1,), dtype), jnp.cumsum(caps)[:-1]])
    counted = jnp.cumsum(in_set.astype(jnp.int32)) - in_set.astype(jnp.int32)  # members before
    return _first_fit_level(total, ordered, in_set, before, (jnp.sum(members) - counted).astype(dtype))


def _one_pass_level(total, ordered, in_set, n_members):
    """The first-fit level of `_first_fit_level` in one pass over the slots in ascending
    order (``ordered``, members ``in_set``, ``n_members`` of them): the caps summed left to
    right, the first member k with total − Σ_{j<k} b_j <= b_k · (members from k on) taken,
    and its level divided out once. Elementwise over a batch of fleets, XLA fuses the N
    steps into one kernel, where a prefix sum is lowered to pads and windowed reductions
    (about 8 kernels on the CPU) and a division per step to one kernel per step. The
    prefix sums and the fit test may round differently from `jnp.cumsum`'s blocked sums
    and the divided test: the level agrees to rounding."""
    dtype = ordered.dtype
    before = jnp.zeros((), dtype)
    rest = n_members.astype(jnp.int32)
    left, share = jnp.asarray(jnp.inf, dtype), jnp.ones((), dtype)
    found = jnp.zeros((), bool)
    for k in range(ordered.shape[0]):
        member, cap = in_set[k], ordered[k]
        count = rest.astype(dtype)
        fits = member & ~found & (total - before <= cap * count)
        left = jnp.where(fits, total - before, left)
        share = jnp.where(fits, count, share)
        found = found | fits
        before = before + jnp.where(member, cap, 0)
        rest = rest - member.astype(jnp.int32)
    return jnp.where(found, left / share, jnp.asarray(jnp.inf, dtype))


def filled_rates(limit, members, level):
    """Each member's rate min(b_i, λ) under the water ``level`` λ (`fill_level`), 0 elsewhere."""
    return jnp.where(members, jnp.minimum(limit, level), 0).astype(limit.dtype)


def _first_fit(total, limit, members, ordered, in_set, before, rest):
    """The unit-weight rates from the caps in ascending order (``ordered``, members
    ``in_set``): the first member whose level λ_k = (total − ``before``) / ``rest`` fits
    under its cap gives every member min(b_i, λ); none fits: every member at its cap."""
    return filled_rates(limit, members, _first_fit_level(total, ordered, in_set, before, rest))


def _first_fit_level(total, ordered, in_set, before, rest):
    """The level λ of `_first_fit`: inf where no member's level fits under its cap."""
    dtype = ordered.dtype
    level = (total - before) / jnp.where(rest > 0, rest, 1)
    fits = in_set & (level <= ordered)
    return jnp.where(jnp.any(fits), level[jnp.argmax(fits)], jnp.asarray(jnp.inf, dtype))


def _network_sort(values):
    """``values`` (N,) sorted ascending (no NaN) by a bitonic network of min/max: padded
    with +inf to a power of two, each layer one elementwise pass over reshaped halves."""
    n_slots = values.shape[0]
    size = 1 << max(n_slots - 1, 0).bit_length()
    slots = jnp.concatenate([values, jnp.full((size - n_slots,), jnp.inf, values.dtype)])
    block = 2
    while block <= size:
        # Merge sorted runs of block/2: compare each slot with its mirror in the block...
        halves = slots.reshape(size // block, 2, block // 2)
        low, high = halves[:, 0], halves[:, 1, ::-1]
        slots = jnp.stack([jnp.minimum(low, high), jnp.maximum(low, high)[:, ::-1]], axis=1).reshape(size)
        # ... then half-cleaners of decreasing span.
        span = block // 4
        while span >= 1:
            halves = slots.reshape(size // (2 * span), 2, span)
            low, high = halves[:, 0], halves[:, 1]
            slots = jnp.stack([jnp.minimum(low, high), jnp.maximum(low, high)], axis=1).reshape(size)
            span //= 2
        block *= 2
    return slots[:n_slots]


def _exclusive_prefix(values):
    """Σ_{j<k} values_j for every k, summed left to right (unrolled over the N slots): the
    bits of `jnp.cumsum` on the CPU, where XLA sums each window in order."""
    total = jnp.zeros((), values.dtype)
    sums = [total]
    for value in [values[i] for i in range(values.shape[0] - 1)]:
        total = total + value
        sums.append(total)
    return jnp.stack(sums)


def fcfs_head(writers, queued_at):
    """The writer ``"fcfs"`` serves: the earliest firing (``queued_at``, -inf for writes
    in progress at t = 0), ties by job index; no job where nobody writes."""
    n_jobs = writers.shape[0]
    key = jnp.where(writers, queued_at, jnp.inf)
    first = writers & (key == jnp.min(key))
    return first & (jnp.arange(n_jobs) == jnp.argmax(first))


def least_waste_scores(candidates, blocked, size, mtbf, restart, exposure, waited, service):
    """The "cooperative" policy's score of each waiting request (docs/model.md §1e): the
    expected waste that serving request i first inflicts on the others while it holds the
    storage for ``service[i]`` (Herault, Robert et al.'s Least-Waste, with its two terms as
    their paper defines them). Each other waiting request j adds

    * ``size[j] · (waited[j] + service[i])`` where j is ``blocked`` (its job idles while it
      waits: the time it has idled and the time it will idle more), else
    * ``size[j] · service[i] / mtbf[j] · (restart[j] + exposure[j] + service[i] / 2)``: a job
      that keeps computing risks, with probability ≈ service[i] / M_j, a failure that costs
      its restart and the work it has not covered (``exposure``), half the wait on average.

    All arrays (N,); returns (N,) scores, +inf outside ``candidates``. The storage serves the
    smallest, ties by job index. Masked before every product: M = inf gives 0, never NaN.
    """
    dtype = size.dtype
    others = candidates[None, :] & ~jnp.eye(candidates.shape[0], dtype=bool)
    finite = jnp.isfinite(mtbf)
    rate = jnp.where(finite, size / jnp.where(finite, mtbf, 1), 0)
    hold = service[:, None]
    idle = size[None, :] * (waited[None, :] + hold)
    risk = rate[None, :] * hold * (restart[None, :] + exposure[None, :] + hold / 2)
    terms = jnp.where(others, jnp.where(blocked[None, :], idle, risk), 0)
    return jnp.where(candidates, jnp.sum(terms, axis=1), jnp.inf).astype(dtype)
