"""The fleet model: parameters (`Fleet`) and per-job initial state (`State`).

Everything here runs on the host, on concrete values, *before* any tracing: this is
where bad input becomes a `ValueError` that names the argument and the allowed range
(docs/model.md §1). The loops (`ckpt_jax._loops`) only ever see validated, broadcast arrays.

Shapes: a fleet has batch shape ``B`` (any number of leading axes, possibly none) and
``N`` job slots. Every array field is stored broadcast to the full batch shape.
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np

from ._outage_inputs import check_outages
from ._policies import ONE_AT_A_TIME, POWER_POLICIES, QUEUE_POLICIES, RECOVERY_SOURCES, STORAGE_POLICIES
from ._throughput import THROUGHPUT_PRESETS, Throughput, throughput_table
from ._validate import broadcast_to, check_dtype, check_key, check_range, real_array, short_repr, value_range

__all__ = [
    "Fleet",
    "State",
    "initial_state",
    "cycle_positions",
    "state_from_positions",
    "solo_cycle_positions",
    "state_at_elapsed",
    "random_state",
    "throughput_table",
    "THROUGHPUT_PRESETS",
    "POWER_POLICIES",
    "STORAGE_POLICIES",
    "RECOVERY_SOURCES",
    "QUEUE_POLICIES",
    "ONE_AT_A_TIME",
    "check_queue_policy",
    "events_to",
    "failures_to",
]


ArrayLike = np.ndarray | jax.Array | Sequence[float] | float


def check_queue_policy(
    storage_policy: str,
    *,
    snapshot: bool,
    async_fraction,
    delay,
    jitter=None,
    recovery_read=None,
    fail_while_down: bool = False,
    outages: bool = False,
    overhead=None,
) -> None:
    """Refuses the variants the queueing storage policies (docs/model.md §1e) do not serve
    yet, naming the argument: a checkpoint request that waits while its job computes is not
    defined with two-level checkpoints (``snapshot``), asynchronous writes (``async_fraction``
    > 0), a delayed controller (``delay`` > 0) or compute jitter (``jitter`` > 0); and recovery
    reads (``recovery_read`` > 0, which would need their own grant), failures while down
    (``fail_while_down``) and common-cause outages (``outages``, docs/model.md §1f) are not
    checked against the queueing reference yet; nor is a fixed checkpoint overhead
    (``overhead`` > 0, docs/model.md §1g: the grant would start it, not the write)."""
    if storage_policy not in QUEUE_POLICIES:
        return
    why = f"storage_policy={storage_policy!r} (docs/model.md §1e) does not serve "
    if snapshot:
        raise ValueError(why + "snapshot= (two-level checkpoints) yet; use 'fcfs', 'fair' or 'weighted'")
    if np.any(np.asarray(async_fraction) > 0):
        raise ValueError(why + f"async_fraction > 0 yet (got {short_repr(async_fraction)}); it must be 0")
    if np.any(np.asarray(delay) > 0):
        raise ValueError(why + f"delay > 0 (a delayed controller) yet (got {short_repr(delay)}); it must be 0")
    if jitter is not None and np.any(np.asarray(jitter) > 0):
        raise ValueError(why + f"jitter > 0 yet (got {short_repr(jitter)}); it must be 0 or None")
    if recovery_read is not None and np.any(np.asarray(recovery_read) > 0):
        raise ValueError(why + f"recovery_read > 0 yet (got {short_repr(recovery_read)}); it must be 0")
    if fail_while_down:
        raise ValueError(why + "fail_while_down=True yet; it must be False")
    if outages:
        raise ValueError(why + "common-cause outages (outage_mtbf or outage_times) yet; drop them")
    if overhead is not None and np.any(np.asarray(overhead) > 0):
        raise ValueError(why + f"overhead > 0 yet (got {short_repr(overhead)}); it must be 0")


def _float_dtype(dtype, *arrays) -> np.dtype:
    """The floating dtype the engine will compute in; never silently truncates float64.

    Only float32 and float64 are supported. An explicit ``dtype=float64`` (or a float64
    NumPy/JAX array argument) without ``jax_enable_x64`` is a request JAX cannot honour:
    with an explicit dtype we raise, with float64 arrays we warn once and compute in float32.
    """
    x64 = bool(jax.config.read("jax_enable_x64"))
    if dtype is not None:
        dtype = check_dtype(dtype)
        if dtype == np.float64 and not x64:
            raise ValueError(
                "dtype=float64 needs jax_enable_x64: call "
                "jax.config.update('jax_enable_x64', True) first (or pass dtype=float32)"
            )
        return dtype
    explicit64 = any(isinstance(a, (np.ndarray, jax.Array)) and a.dtype == np.float64 for a in arrays)
    if explicit64 and not x64:
        warnings.warn(
            "float64 inputs given but jax_enable_x64 is off: ckpt_jax computes in float32. "
            "Enable x64 (jax.config.update('jax_enable_x64', True)) for float64 results.",
            UserWarning,
            stacklevel=4,
        )
    return np.dtype(np.float64 if x64 else np.float32)


def _as_float_array(name: str, value, dtype=None) -> np.ndarray:
    """``value`` as float64 (validation happens in float64, then again after the cast)."""
    return real_array(name, value)


# One compiled program per shape, not one per operation (they are called on every run).
@jax.jit
def _solo_write(write, write_limit, throughput):
    return write / jnp.minimum(write_limit, throughput[..., 1:2])


@jax.jit
def _period(compute, write, write_limit, throughput, two_level, snapshot, overhead):
    solo = _solo_write(write, write_limit, throughput)
    # o + x is x bit for bit where o = 0 (docs/model.md §1g).
    return overhead + jnp.where(two_level[..., None], snapshot + jnp.maximum(compute, solo), compute + solo)


@dataclasses.dataclass(frozen=True, init=False)
class Fleet:
    """A batch of fleets of checkpointing jobs (docs/model.md §1).

    Args:
      compute: solo compute work T_i, shape (*B, N) (or a scalar for every job when
        ``write`` gives the job axis), finite and > 0.
      write: solo write volume d_i, shape (*B, N) (or a scalar, as ``compute``), finite
        and > 0.
      cap: power cap C in units of one job's full-speed draw: None (uncapped), or a
        scalar or (*B,)-shaped array, finite and > 0; a (nested) list may hold None
        entries for uncapped fleets in a batch.
      throughput: aggregate write throughput f(n): None (f ≡ 1), a preset name
        (`THROUGHPUT_PRESETS`), a callable evaluated at n = 1..N, or an array of length
        N + 1 indexed by n (index 0 unused), optionally (*B, N + 1).
      delay: controller delay τ ≥ 0 (the cap acts on the computing count from τ earlier);
        scalar or (*B,). τ = 0 is the base model.
      async_fraction: α ∈ [0, 1], the fraction of its compute rate a job keeps while its
        checkpoint drains in the background; scalar or (*B,). α = 0 is the base model.
      active: optional bool mask (*B, N) for fleets of different sizes padded into one
        batch; inactive slots never run and never count. Default: all active.
      size: job size w_i (docs/model.md §1b): its full-speed power draw (e.g. its GPU
        count) in the units of ``cap``, and its weight where a policy shares by size;
        finite and > 0, a scalar or broadcastable to (*B, N). Default 1.
      power_policy: how the cap is divided among the computing jobs S: ``"maxmin"``
        (default; max-min fair water-filling, job i gets power min(w_i, λ) with
        Σ_S min(w_j, λ) = min(C, Σ_S w_j), speed min(w_i, λ) / w_i) or ``"uniform"``
        (every computing job at min(1, C / Σ_S w_j)). One policy for the whole batch.
      storage_policy: how f(n_w) is divided among the writers W: ``"fair"`` (default;
        f(n_w)/n_w each), ``"weighted"`` (f(n_w)·w_i / Σ_W w_j) or ``"fcfs"`` (one
        writer at a time in firing order, ties by job index, at f(1); the others wait),
        or one of the peer's policies (docs/model.md §1e), one I/O at a time while a job
        whose checkpoint waits keeps computing: ``"fcfs_nonblocking"`` (requests served in
        request order; a request still queued when the next checkpoint comes due is
        dropped and the new one queues) or ``"cooperative"`` (the request of least expected
        waste first, Least-Waste: its score reads ``size``, ``mtbf``, ``restart`` and each
        waiting job's uncovered work; without ``mtbf`` every score is 0 and requests are
        served by job index). The last two exclude ``snapshot``, ``async_fraction`` > 0,
        ``delay`` > 0 and jitter. One policy for the whole batch.
      mtbf: mean time between failures M_i (docs/model.md §1c): job i fails as a Poisson
        process of rate 1/M_i in wall-clock time, except while it is down. None (default):
        no failures. Finite and > 0, a scalar or broadcastable to (*B, N). Stored as
        ``inf`` where there are no failures.
      restart: restart time R_i >= 0 after a failure (finite; a scalar or broadcastable to
        (*B, N)); default 0. Used with ``mtbf`` or with ``failure_times``.
      failure_shape: the shape k in [0.1, 100] of the law of the time to a job's next failure
        (docs/model.md §1f): Weibull with shape k and mean ``mtbf`` (scale M_i / Γ(1 + 1/k)),
        counted from the job's last restart end (or t = 0); with ``fail_while_down`` from its
        previous failure (the renewal is at each failure). None (default) or k = 1 is the
        exponential law of §1c, bit for bit; k < 1 a decreasing hazard (HPC systems fit k ≈
        0.7-0.8). A scalar or broadcastable to (*B, N). Needs ``mtbf``.
      failure_times: each job's failure instants, replayed exactly in place of draws
        (docs/model.md §1f): an array (*B, N, K) of times >= 0, each job's row strictly
        increasing and padded at its end with NaN or +inf (a row of padding: the job never
        fails). A listed time that falls while the job is down is skipped (unless
        ``fail_while_down``). ``mtbf`` may then be None (the cooperative storage policy
        still reads it); ``restart`` applies. Stored with +inf padding, or None.
      write_limit: per-job write limit b_i (docs/model.md §1d), volume per time: a job drains
        no faster than its own nodes push data. None (default): no limit (stored as inf).
        > 0 (inf allowed), a scalar or broadcastable to (*B, N). The storage's f(n_w) is then
        shared by max-min fair water-filling over the writers with these caps (by size under
        ``"weighted"``); ``"fcfs"`` drains its head at min(b, f(1)).
      snapshot: two-level checkpoints (docs/model.md §1d): the blocking snapshot duration
        s_i >= 0 (wall-clock, local). After it the volume d_i drains in the background, as a
        writer, while the job computes its next cycle at full speed; a job whose next
        snapshot comes due while its drain still runs waits for it (backpressure). None
        (default): blocking checkpoints. Excludes ``async_fraction`` > 0. Stored as
        ``snapshot`` (0 where none) and ``two_level`` (*B,) bool.
      recover_from: with ``snapshot``, what a failure keeps: ``"storage"`` (default; the last
        checkpoint whose drain ended) or ``"memory"`` (the last completed snapshot, held by
        peers). One rule for the whole batch.
      recovery_read: recovery read r_i >= 0 (docs/model.md §1e), a volume: after a failure's
        restart R_i the job re-reads its last persisted checkpoint as a storage user (it counts in
        n_w and shares f(n_w) with the writers under the storage policy, at most at its
        ``write_limit``), then computes its lost cycle again. It neither computes nor writes a
        checkpoint meanwhile (idle power; not a writer in `WriterStats`; its time counts in
        `JobStats.down_time`). Default 0: no read, the restart alone. Finite, a scalar or
        broadcastable to (*B, N).
      fail_while_down: the failure clock also runs during the restart and the recovery read
        (docs/model.md §1e, Daly's model): a failure there starts the recovery over (R_i again,
        then the read). Default False: no failures while down (§1c). One rule for the batch.
      domain: each job's failure domain (docs/model.md §1f: a rack, a switch, a file system),
        ints in [0, D), a scalar or broadcastable to (*B, N). Default 0: one domain, the whole
        fleet. D is the last axis of a per-domain ``outage_mtbf``, else the largest domain + 1.
      outage_mtbf: mean time M_o between common-cause outages of each domain (§1f): outages
        strike a domain as a Poisson process in wall-clock time and fail, at that instant,
        every job of the domain that is up (with ``fail_while_down``, the down ones too: their
        recovery starts over); each loses what a failure loses. > 0 (inf: none in that
        domain), a scalar (every domain), one per domain (D,) or (*B, D). None (default): no
        drawn outages. Draws come from the run's key (one stream per fleet and domain).
      outage_times: replayed outages instead of drawn ones: per fleet rows of (time, domain),
        shape (K, 2) (every fleet) or (*B, K, 2), sorted by time, padded at the end with rows
        whose time is NaN or +inf. Excludes ``outage_mtbf``.
      restart_stagger: Δ >= 0, finite (§1f), a scalar or (*B,): the jobs one outage fails end
        their restarts in job order, the k-th of them (k = 0, 1, ... by job index among the
        jobs that outage failed) at t + R_k + k·Δ. A job's own failures are unchanged.
        Default 0.
      idle_power: p_idle in [0, 1] (docs/model.md §1d): the draw of a job that does not
        compute (overhead, snapshot, waiting, blocking write, down) per unit of size; scalar
        or (*B,). Default 0. Used by ``SaveAt(power=True)`` only.
      overhead: the fixed checkpoint overhead o_i >= 0 (docs/model.md §1g), wall-clock per
        checkpoint: at each firing the job first spends o_i blocked (the barrier, serialising
        the state, metadata operations, the commit), neither computing nor using the storage
        (not in n_w or n_c; idle power), then writes (with ``snapshot``, snapshots). A failure
        during it loses what one during the write (the snapshot) loses. Finite, a scalar or
        broadcastable to (*B, N). Default 0: none, and every result is as without it, bit
        for bit. Fleets with some o_i > 0 run on the general engine; the queueing storage
        policies (``"fcfs_nonblocking"``, ``"cooperative"``) do not take it yet.
      dtype: float32 or float64; default float64 under ``jax_enable_x64``, else float32.

    Attributes are stored broadcast to the full batch shape as JAX arrays; ``cap`` is
    ``inf`` where uncapped. `Fleet` is a pytree, so it can be passed through
    `jax.jit` and `jax.vmap`; the two policies are static (auxiliary) data of it. With
    all sizes 1, ``"maxmin"``, ``"uniform"`` and ``"weighted"`` are the base model bit
    for bit.
    """

    compute: jax.Array
    write: jax.Array
    cap: jax.Array
    throughput: jax.Array
    delay: jax.Array
    async_fraction: jax.Array
    active: jax.Array
    size: jax.Array
    mtbf: jax.Array
    restart: jax.Array
    failure_shape: jax.Array
    failure_times: jax.Array | None
    write_limit: jax.Array
    snapshot: jax.Array
    two_level: jax.Array
    idle_power: jax.Array
    recovery_read: jax.Array
    power_policy: str
    storage_policy: str
    recover_from: str
    fail_while_down: bool
    domain: jax.Array
    outage_mtbf: jax.Array
    outage_times: jax.Array
    outage_domains: jax.Array
    restart_stagger: jax.Array
    overhead: jax.Array

    def __init__(
        self,
        compute: ArrayLike,
        write: ArrayLike,
        cap: ArrayLike | None = None,
        throughput: Throughput = None,
        *,
        delay: ArrayLike = 0.0,
        async_fraction: ArrayLike = 0.0,
        active: ArrayLike | None = None,
        size: ArrayLike = 1.0,
        power_policy: str = "maxmin",
        storage_policy: str = "fair",
        mtbf: ArrayLike | None = None,
        restart: ArrayLike = 0.0,
        failure_shape: ArrayLike | None = None,
        failure_times: ArrayLike | None = None,
        write_limit: ArrayLike | None = None,
        snapshot: ArrayLike | None = None,
        recover_from: str = "storage",
        idle_power: ArrayLike = 0.0,
        recovery_read: ArrayLike = 0.0,
        fail_while_down: bool = False,
        domain: ArrayLike | None = None,
        outage_mtbf: ArrayLike | None = None,
        outage_times: ArrayLike | None = None,
        restart_stagger: ArrayLike = 0.0,
        overhead: ArrayLike = 0.0,
        dtype=None,
    ):
        check_policy("power_policy", power_policy, POWER_POLICIES)
        check_policy("storage_policy", storage_policy, STORAGE_POLICIES)
        check_policy("recover_from", recover_from, RECOVERY_SOURCES)
        if not isinstance(fail_while_down, (bool, np.bool_)):
            raise ValueError(f"fail_while_down must be True or False, got {fail_while_down!r}")
        dtype = _float_dtype(dtype, compute, write, cap)
        compute_np = _as_float_array("compute", compute, dtype)
        write_np = _as_float_array("write", write, dtype)
        job_shape = _job_shape(compute_np, write_np)
        n_jobs = job_shape[-1]
        active_np, job_shape = _active_mask(active, job_shape)
        size_np = _as_float_array("size", size, dtype)
        job_shape = _with_sizes(size_np, job_shape)
        batch_shape = job_shape[:-1]
        if recover_from == "memory" and snapshot is None:
            raise ValueError(
                "recover_from='memory' needs snapshot= (two-level checkpoints, docs/model.md §1d): without "
                "snapshots a failure recovers from storage; pass snapshot=s or drop recover_from"
            )
        mtbf_np, restart_np = _failure_arrays(mtbf, restart, job_shape, dtype)
        shape_np = _failure_shape(failure_shape, mtbf, failure_times, job_shape, dtype)
        listed_np = None if failure_times is None else check_failure_times(failure_times, job_shape, dtype)
        limit_np, snapshot_np = _checkpoint_arrays(write_limit, snapshot, job_shape, dtype)
        read_np = _per_job("recovery_read", recovery_read, 0.0, job_shape)
        _refuse("recovery_read", read_np, ~(np.isfinite(read_np) & (read_np >= 0)), "finite and >= 0")
        check_range("recovery_read", np.where(read_np > 0, read_np, 1.0), dtype)
        overhead_np = _per_job("overhead", overhead, 0.0, job_shape)
        _refuse("overhead", overhead_np, ~(np.isfinite(overhead_np) & (overhead_np >= 0)), "finite and >= 0")
        check_range("overhead", np.where(overhead_np > 0, overhead_np, 1.0), dtype)
        cap_np, uncapped, shown_cap = _cap_array(cap, batch_shape, dtype)
        delay_np = _per_fleet("delay", delay, 0.0, batch_shape, dtype)
        alpha_np = _per_fleet("async_fraction", async_fraction, 0.0, batch_shape, dtype)
        idle_np = _per_fleet("idle_power", idle_power, 0.0, batch_shape, dtype)
        if not ((idle_np >= 0) & (idle_np <= 1)).all():
            raise ValueError(f"idle_power must lie in [0, 1], got {idle_power!r}")
        if snapshot is not None and np.any(alpha_np > 0):
            raise ValueError(
                f"async_fraction must be 0 with snapshot= (got {async_fraction!r}): a two-level checkpoint "
                "computes at full speed while its drain runs (docs/model.md §1d)"
            )
        check_queue_policy(
            storage_policy,
            snapshot=snapshot is not None,
            async_fraction=alpha_np,
            delay=delay_np,
            recovery_read=read_np,
            fail_while_down=bool(fail_while_down),
            overhead=overhead_np,
        )
        outages = check_outages(domain, outage_mtbf, outage_times, restart_stagger, job_shape, active_np, dtype)
        check_queue_policy(
            storage_policy, snapshot=False, async_fraction=0.0, delay=0.0, outages=outages.drawn or outages.listed
        )
        table = _throughput_array(throughput, n_jobs, batch_shape)
        active_np = np.broadcast_to(active_np, job_shape)
        size_np = np.broadcast_to(size_np, job_shape)
        compute_np = np.broadcast_to(compute_np, job_shape)
        write_np = np.broadcast_to(write_np, job_shape)
        _check_jobs(active_np, compute_np, write_np, size_np, dtype)
        _check_fleets(cap_np, uncapped, shown_cap, table, delay_np, delay, alpha_np, async_fraction, dtype)
        _check_solo(active_np, compute_np, write_np, table, dtype)

        # Inactive slots get harmless positive work so no lane ever divides by zero.
        fields = dict(
            compute=np.where(active_np, compute_np, 1.0),
            write=np.where(active_np, write_np, 1.0),
            size=np.where(active_np, size_np, 1.0),
            cap=cap_np,
            throughput=table,
            delay=delay_np,
            async_fraction=alpha_np,
            mtbf=mtbf_np,
            restart=restart_np,
            failure_shape=shape_np,
            write_limit=np.where(active_np, limit_np, np.inf),
            snapshot=np.where(active_np, snapshot_np, 0.0),
            idle_power=idle_np,
            recovery_read=np.where(active_np, read_np, 0.0),
            overhead=np.where(active_np, overhead_np, 0.0),
        )
        for name, value in fields.items():
            object.__setattr__(self, name, jnp.asarray(value, dtype=dtype))
        object.__setattr__(self, "active", jnp.asarray(active_np, dtype=bool))
        object.__setattr__(self, "two_level", jnp.asarray(np.full(batch_shape, snapshot is not None), dtype=bool))
        object.__setattr__(self, "failure_times", None if listed_np is None else jnp.asarray(listed_np, dtype=dtype))
        object.__setattr__(self, "power_policy", power_policy)
        object.__setattr__(self, "storage_policy", storage_policy)
        object.__setattr__(self, "recover_from", recover_from)
        object.__setattr__(self, "fail_while_down", bool(fail_while_down))
        # Static too: whether any size differs from 1, for code that sees the sizes only
        # as tracers (`jax.vmap` over fleets) and must still choose the rate rule.
        object.__setattr__(self, "_sized", bool(np.any(active_np & (fields["size"] != 1))))
        # Static too, for the same reason: write limits and two-level checkpoints (§1d).
        object.__setattr__(self, "_limited", bool(np.any(active_np & np.isfinite(fields["write_limit"]))))
        object.__setattr__(self, "_snapshots", snapshot is not None)
        # Static too: whether some job re-reads its checkpoint after a failure (§1e).
        object.__setattr__(self, "_reads", bool(np.any(fields["recovery_read"] > 0)))
        # Static too: whether some active job has a fixed checkpoint overhead (§1g).
        object.__setattr__(self, "_overheads", bool(np.any(fields["overhead"] > 0)))
        _set_outages(self, outages, dtype)
        # Static too: whether a job that fails from draws has a Weibull shape k != 1 (§1f); with
        # k = 1 everywhere the exponential draws of §1c run unchanged, bit for bit.
        drawn = active_np & np.isfinite(mtbf_np)
        object.__setattr__(self, "_weibull", bool(np.any(drawn & (shape_np != 1))))
        if self.has_outages and self.has_weibull_failures:
            # An outage's restart would restart a Weibull clock's age, which needs a draw of its
            # own (its stream index): not modelled yet.
            raise ValueError(
                "failure_shape != 1 (Weibull failures) with outages (outage_mtbf or outage_times) is not "
                "supported yet (docs/model.md §1f); use failure_shape=1 or drop the outages"
            )

    def __repr__(self) -> str:
        # A summary, not the arrays (a fleet of 32 jobs printed 9 KB).
        def summary(name):
            values = np.asarray(getattr(self, name), np.float64)
            if name == "throughput":
                values = values[..., 1:]
            active = np.broadcast_to(np.asarray(self.active), self.compute.shape)
            if values.shape == self.compute.shape:
                values = values[active]
            low, high = (float(values.min()), float(values.max())) if values.size else (np.nan, np.nan)
            return f"{name}={low:.6g}" if low == high else f"{name}=[{low:.6g}..{high:.6g}]"

        fields = ["compute", "write", "size", "cap", "throughput"]
        fields += [
            name
            for name, default in (
                ("delay", 0.0),
                ("async_fraction", 0.0),
                ("restart", 0.0),
                ("write_limit", np.inf),
                ("idle_power", 0.0),
                ("recovery_read", 0.0),
                ("overhead", 0.0),
            )
            if np.any(np.asarray(getattr(self, name)) != default)
        ]
        fields += ["snapshot"] if self.has_snapshots else []
        fields += ["mtbf"] if self.has_failures else []
        fields += ["failure_shape"] if self.has_weibull_failures else []
        listed = "" if self.failure_times is None else f", failure_times=(K={self.failure_times.shape[-1]})"
        n_active = int(np.asarray(self.active).sum())
        return (
            f"Fleet(batch_shape={self.batch_shape}, n_jobs={self.n_jobs}, active={n_active}, "
            f"dtype={np.dtype(self.dtype).name}, {', '.join(summary(name) for name in fields)}, "
            f"power_policy={self.power_policy!r}, storage_policy={self.storage_policy!r}"
            + (f", recover_from={self.recover_from!r}" if self.has_snapshots else "")
            + listed
            + (", fail_while_down=True" if self.fail_while_down else "")
            + (f", outages={self.outage_kind!r}" if self.has_outages else "")
            + ")"
        )

    # -- convenience ---------------------------------------------------------------
    @property
    def n_jobs(self) -> int:
        """N, the number of job slots (active or padding)."""
        return self.compute.shape[-1]

    @property
    def batch_shape(self) -> tuple:
        """The leading batch shape (*B,)."""
        return self.compute.shape[:-1]

    @property
    def dtype(self):
        return self.compute.dtype

    @property
    def has_failures(self) -> bool:
        """Whether the fleets fail (``mtbf`` given, docs/model.md §1c): decided on the host."""
        return bool(np.any(np.isfinite(np.asarray(self.mtbf))))

    @property
    def has_outages(self) -> bool:
        """Whether common-cause outages strike (docs/model.md §1f): decided on the host."""
        return bool(self.outage_kind)

    def without_outages(self) -> Fleet:
        """This fleet without its common-cause outages (docs/model.md §1f): its domains and
        stagger kept, never used."""
        return _replace(self, _outages="")

    @property
    def outage_kind(self) -> str:
        """How outages strike (docs/model.md §1f): ``"drawn"`` (``outage_mtbf``), ``"listed"``
        (``outage_times``) or ``""`` (none)."""
        return str(getattr(self, "_outages", ""))

    @property
    def failure_mtbf(self) -> np.ndarray:
        """(*B, N) each job's mean time between failures of any cause, own (``mtbf``) and its
        domain's drawn outages (``outage_mtbf``) together: 1 / (1/M_i + 1/M_o). Replayed
        outages count at their mean rate up to the last listed instant. For estimates of a
        run's events (`events`), not for the dynamics."""
        rate = 1 / np.asarray(self.mtbf, np.float64)
        if self.has_outages:
            outage = np.asarray(self.outage_mtbf, np.float64)
            if self.outage_kind == "listed":
                times = np.asarray(self.outage_times, np.float64)
                domains = np.asarray(self.outage_domains)
                last = np.max(np.where(np.isfinite(times), times, 0.0), axis=-1, initial=0.0)[..., None]
                count = np.stack(
                    [np.sum(np.isfinite(times) & (domains == d), axis=-1) for d in range(self.n_domains)], axis=-1
                )
                with np.errstate(divide="ignore", invalid="ignore"):
                    outage = np.where(count > 0, np.maximum(last, 1e-300) / np.maximum(count, 1), np.inf)
            domain = np.asarray(self.domain)
            outage = np.broadcast_to(outage, domain.shape[:-1] + outage.shape[-1:])
            rate = rate + 1 / np.take_along_axis(outage, domain, -1)
        with np.errstate(divide="ignore"):
            return 1 / rate

    @property
    def n_domains(self) -> int:
        """D, the number of failure domains (docs/model.md §1f)."""
        return int(self.outage_mtbf.shape[-1])

    @property
    def has_weibull_failures(self) -> bool:
        """Whether some job's failures are drawn from a Weibull law of shape k != 1
        (``failure_shape``, docs/model.md §1f): decided on the host."""
        return bool(getattr(self, "_weibull", False))

    @property
    def has_failure_times(self) -> bool:
        """Whether the fleets replay listed failure instants (``failure_times``, docs/model.md §1f)."""
        return getattr(self, "failure_times", None) is not None

    @property
    def has_snapshots(self) -> bool:
        """Whether the fleets checkpoint in two levels (``snapshot`` given, docs/model.md §1d)."""
        return bool(getattr(self, "_snapshots", False))

    @property
    def has_recovery_reads(self) -> bool:
        """Whether some active job re-reads its checkpoint after a failure (``recovery_read`` > 0,
        docs/model.md §1e)."""
        return bool(getattr(self, "_reads", False))

    @property
    def has_overheads(self) -> bool:
        """Whether some active job has a fixed checkpoint overhead (``overhead`` > 0,
        docs/model.md §1g): decided on the host."""
        return bool(getattr(self, "_overheads", False))

    @property
    def has_write_limits(self) -> bool:
        """Whether some active job has a finite ``write_limit`` (docs/model.md §1d)."""
        return bool(getattr(self, "_limited", False))

    @property
    def solo_write(self) -> jax.Array:
        """Solo write (or drain) duration D_i = d_i / min(b_i, f(1)) of each job, (*B, N)."""
        return _solo_write(self.write, self.write_limit, self.throughput)

    @property
    def period(self) -> jax.Array:
        """Solo cycle time of each job, shape (*B, N): T_i + o_i + D_i with blocking checkpoints,
        o_i + s_i + max(T_i, D_i) with two-level ones (`solo_write`, docs/model.md §1d, §1g)."""
        return _period(
            self.compute, self.write, self.write_limit, self.throughput, self.two_level, self.snapshot, self.overhead
        )

    def events(self, horizon) -> np.ndarray:
        """About how many events each fleet steps up to the horizon H, shape (*B,), every
        kind counted (`events_to`): per solo cycle (`period`) its firing and its write end
        (with a two-level checkpoint, the snapshot's end and the drain's end), each doubled
        by a delayed controller (a change of the computing count schedules an update), plus
        the overhead's end where o_i > 0 (docs/model.md §1g);
        per failure (docs/model.md §1c) the failure and the restart's end, plus the recovery
        read's end (§1e); and each outage instant (§1f, `outage_events`). An estimate, as
        `ckpt_jax.fleetfile.FleetSpec.events`, to size a run to ``until=H`` (its
        ``max_events``, its progress bar, the work it is refused beyond): simultaneous
        switches count once, and contention slows the cycles."""
        two_level = np.asarray(self.two_level)[..., None]
        delayed = (np.asarray(self.delay) > 0)[..., None]
        per_cycle = np.where(two_level, 3.0, 2.0) * np.where(delayed, 2.0, 1.0)
        per_cycle = per_cycle + (np.asarray(self.overhead) > 0) * np.where(delayed, 2.0, 1.0)
        per_failure = np.where(np.asarray(self.recovery_read) > 0, 3.0, 2.0)
        jobs = events_to(
            horizon,
            np.asarray(self.period, np.float64),
            self.failure_mtbf,
            np.asarray(self.restart, np.float64),
            np.asarray(self.active),
            per_cycle=per_cycle,
            per_failure=per_failure,
        )
        return jobs + self.outage_events(horizon)

    def outage_events(self, horizon, mean: bool = True) -> np.ndarray:
        """How many outage instants strike up to the horizon H, shape (*B,): each is an event
        of its own, whether it finds a job up or not (docs/model.md §1f). Per domain with an
        active job, about H / M_o drawn outages (``mean``; else the per-domain (*B, D) mean
        H / M_o, for budgets that add their own spread), or the listed instants up to H (in
        both). Zero without outages."""
        batch = self.batch_shape
        if not self.has_outages:
            return np.zeros(batch if mean else batch + (0,))
        horizon = np.broadcast_to(np.asarray(horizon, np.float64), batch)
        domain = np.broadcast_to(np.asarray(self.domain), np.shape(self.active))
        active = np.asarray(self.active)
        used = np.stack([np.any(active & (domain == d), axis=-1) for d in range(self.n_domains)], axis=-1)
        if self.outage_kind == "drawn":
            outage = np.broadcast_to(np.asarray(self.outage_mtbf, np.float64), used.shape)
            with np.errstate(divide="ignore", invalid="ignore"):
                per_domain = np.where(used & np.isfinite(outage), horizon[..., None] / outage, 0.0)
            return per_domain.sum(axis=-1) if mean else per_domain
        times = np.asarray(self.outage_times, np.float64)
        struck = np.broadcast_to(np.asarray(self.outage_domains), times.shape[:-1] + times.shape[-1:])
        times = np.broadcast_to(times, batch + times.shape[-1:])
        struck = np.broadcast_to(struck, times.shape)
        counted = np.isfinite(times) & (times <= horizon[..., None])
        counted &= np.take_along_axis(used, np.clip(struck, 0, self.n_domains - 1), axis=-1)
        count = counted.sum(axis=-1).astype(np.float64)
        return count if mean else count[..., None]

    def __getitem__(self, index) -> Fleet:
        """Indexes the batch axes as NumPy does: ``fleet[3]`` is the fourth fleet of a 1-D
        batch; slices, integer arrays, boolean masks and ``...`` work too.

        Raises:
          IndexError: an index out of range, or any index on a single fleet (batch shape ()).
        """
        batch = self.batch_shape
        if batch == ():
            raise IndexError("a single fleet (batch shape ()) has no batch axes to index")
        if isinstance(index, jax.Array):
            index = np.asarray(index)
        # NumPy resolves the index on the fleet numbers and raises IndexError out of range;
        # JAX would clamp silently.
        flat = np.arange(int(np.prod(batch)), dtype=np.int64).reshape(batch)
        try:
            chosen = flat[index]
        except (TypeError, ValueError) as err:
            raise IndexError(f"invalid fleet index {index!r}: {err}") from None
        chosen = np.asarray(chosen)
        take = jnp.asarray(chosen.reshape(-1))

        def pick(x):
            if x is None:  # no failure_times
                return None
            flat_x = jnp.reshape(x, (flat.size,) + x.shape[len(batch) :])  # tails may be empty (no outages)
            return jnp.reshape(flat_x[take], chosen.shape + x.shape[len(batch) :])

        return _replace(
            self,
            **{name: pick(getattr(self, name)) for name in _FLEET_FIELDS},
        )


_FLEET_FIELDS = (
    "compute",
    "write",
    "cap",
    "throughput",
    "delay",
    "async_fraction",
    "active",
    "size",
    "mtbf",
    "restart",
    "failure_shape",
    "failure_times",
    "write_limit",
    "snapshot",
    "two_level",
    "idle_power",
    "recovery_read",
    "domain",
    "outage_mtbf",
    "outage_times",
    "outage_domains",
    "restart_stagger",
    "overhead",
)


def _set_outages(fleet: Fleet, outages, dtype) -> None:
    """Stores the checked outage inputs (`ckpt_jax._outage_inputs.Outages`) on ``fleet``."""
    object.__setattr__(fleet, "domain", jnp.asarray(outages.domain, jnp.int32))
    object.__setattr__(fleet, "outage_mtbf", jnp.asarray(outages.mtbf, dtype))
    object.__setattr__(fleet, "outage_times", jnp.asarray(outages.times, dtype))
    object.__setattr__(fleet, "outage_domains", jnp.asarray(outages.domains, jnp.int32))
    object.__setattr__(fleet, "restart_stagger", jnp.asarray(outages.stagger, dtype))
    object.__setattr__(fleet, "_outages", "drawn" if outages.drawn else "listed" if outages.listed else "")


def _per_job(name: str, value, default, job_shape) -> np.ndarray:
    """``value`` (``default`` where None) as a float64 array broadcast to (*B, N)."""
    arr = np.asarray(default) if value is None else real_array(name, value)
    return np.asarray(broadcast_to(name, arr, job_shape, per_job=True), np.float64)


def _refuse(name: str, arr: np.ndarray, bad: np.ndarray, rule: str) -> None:
    """`ValueError` naming ``name``, its ``rule`` and its first ``bad`` entry, where any is."""
    if bad.any():
        raise ValueError(
            f"{name} must be {rule}; found {float(arr[bad].ravel()[0])!r} "
            f"at index {tuple(int(i) for i in np.argwhere(bad)[0])}"
        )


def _failure_arrays(mtbf, restart, job_shape, dtype):
    """MTBF and restart time (docs/model.md §1c) broadcast to (*B, N) and validated:
    mtbf finite and > 0 (None: no failures, stored as inf), restart finite and >= 0."""
    mtbf_np = _per_job("mtbf", mtbf, np.inf, job_shape)
    restart_np = _per_job("restart", restart, 0.0, job_shape)
    if mtbf is not None:
        _refuse("mtbf", mtbf_np, ~(np.isfinite(mtbf_np) & (mtbf_np > 0)), "finite and > 0 (or None for no failures)")
        check_range("mtbf", mtbf_np, dtype)
    _refuse("restart", restart_np, ~(np.isfinite(restart_np) & (restart_np >= 0)), "finite and >= 0")
    check_range("restart", np.where(restart_np > 0, restart_np, 1.0), dtype)
    return mtbf_np, restart_np


SHAPE_MIN, SHAPE_MAX = 0.1, 100.0  # the Weibull shapes `Fleet` takes (docs/model.md §1f)


def _failure_shape(failure_shape, mtbf, failure_times, job_shape, dtype) -> np.ndarray:
    """The Weibull shapes k (docs/model.md §1f) broadcast to (*B, N), in [`SHAPE_MIN`,
    `SHAPE_MAX`] (None: 1, the exponential law): below, Γ(1 + 1/k) and the draws' 1/k-th powers
    leave float32's range. A shape other than 1 needs ``mtbf`` and excludes ``failure_times``
    (listed instants follow no law)."""
    shape_np = _per_job("failure_shape", failure_shape, 1.0, job_shape)
    inside = np.isfinite(shape_np) & (shape_np >= SHAPE_MIN) & (shape_np <= SHAPE_MAX)
    _refuse("failure_shape", shape_np, ~inside, f"in [{SHAPE_MIN}, {SHAPE_MAX}] (1: exponential)")
    if np.any(shape_np != 1) and mtbf is None:
        raise ValueError("failure_shape needs mtbf= (the Weibull law's mean, docs/model.md §1f)")
    if np.any(shape_np != 1) and failure_times is not None:
        raise ValueError(
            "failure_shape must be None or 1 with failure_times=: listed failure instants are replayed as "
            "given and follow no law (docs/model.md §1f)"
        )
    return shape_np


def check_failure_times(failure_times, job_shape: tuple, dtype) -> np.ndarray:
    """Listed failure instants (docs/model.md §1f) as a float64 array (*B, N, K): broadcastable
    to it, >= 0, each job's row strictly increasing in ``dtype`` and padded at its end with NaN
    or +inf (NaN padding becomes +inf; a row of padding: the job never fails). A `ValueError`
    names ``failure_times`` and the rule."""
    times = real_array("failure_times", failure_times)
    expected = f"(*B, N, K) = {tuple(job_shape)} + (K,)"
    if times.ndim < 2:
        raise ValueError(f"failure_times must have shape {expected}, got {times.shape}")
    try:
        times = np.broadcast_to(times, tuple(job_shape) + (times.shape[-1],))
    except ValueError:
        raise ValueError(f"failure_times must have shape {expected}, got {times.shape}") from None
    times = np.where(np.isnan(times), np.inf, times)
    if np.any(times < 0):
        raise ValueError("failure_times must be >= 0 (pad a job's row with NaN or +inf)")
    _, high = value_range(dtype)
    if np.any(np.isfinite(times) & (times > high)):
        raise ValueError(f"failure_times must be +inf or at most {high:.3g} in {np.dtype(dtype)}")
    cast = times.astype(dtype)
    earlier, later = cast[..., :-1], cast[..., 1:]
    if np.any((later <= earlier) & ~(np.isinf(earlier) & np.isinf(later))):
        raise ValueError(
            f"failure_times must be strictly increasing along each job's row in {np.dtype(dtype)}, "
            "padded at its end with NaN or +inf"
        )
    return np.asarray(times, np.float64)


def _checkpoint_arrays(write_limit, snapshot, job_shape, dtype):
    """Write limits and snapshot durations (docs/model.md §1d) broadcast to (*B, N) and
    validated: write_limit > 0 (inf allowed; None: inf), snapshot finite and >= 0 (None: 0)."""
    limit_np = _per_job("write_limit", write_limit, np.inf, job_shape)
    snapshot_np = _per_job("snapshot", snapshot, 0.0, job_shape)
    _refuse("write_limit", limit_np, ~(limit_np > 0), "> 0 (inf or None for no limit)")  # NaN too
    check_range("write_limit", np.where(np.isfinite(limit_np), limit_np, 1.0), dtype)
    _refuse("snapshot", snapshot_np, ~(np.isfinite(snapshot_np) & (snapshot_np >= 0)), "finite and >= 0")
    check_range("snapshot", np.where(snapshot_np > 0, snapshot_np, 1.0), dtype)
    return limit_np, snapshot_np


def _job_shape(compute_np: np.ndarray, write_np: np.ndarray) -> tuple:
    """The fleet shape (*B, N) of ``compute`` and ``write``: one of them may be a scalar,
    shared by every job (as for size, mtbf, ...), and N >= 1."""
    if compute_np.ndim < 1 and write_np.ndim < 1:
        raise ValueError(
            "compute or write must have a trailing job axis of length N >= 1 (the other may be "
            f"a scalar), got shapes {compute_np.shape} and {write_np.shape}"
        )
    try:
        job_shape = np.broadcast_shapes(compute_np.shape, write_np.shape)
    except ValueError:
        raise ValueError(
            f"compute and write shapes must broadcast to (..., N): got {compute_np.shape} and {write_np.shape}"
        ) from None
    if job_shape[-1] < 1:
        raise ValueError("compute and write must hold at least one job (N >= 1)")
    return job_shape


def _active_mask(active, job_shape: tuple) -> tuple[np.ndarray, tuple]:
    """``(active, job_shape)``: the boolean mask of active slots (None: all) and the fleet
    shape it broadcasts to, with the same N."""
    if active is None:
        return np.ones(job_shape, dtype=bool), job_shape
    n_jobs = job_shape[-1]
    active_np = np.asarray(active)
    if active_np.dtype != bool:
        raise ValueError(f"active must be a boolean mask, got dtype {active_np.dtype}")
    try:
        job_shape = np.broadcast_shapes(job_shape, active_np.shape)
    except ValueError:
        raise ValueError(f"active shape {active_np.shape} does not broadcast to the fleet shape {job_shape}") from None
    if job_shape[-1] != n_jobs:
        raise ValueError(f"active must have N = {n_jobs} job slots, got {active_np.shape}")
    return active_np, job_shape


def _with_sizes(size_np: np.ndarray, job_shape: tuple) -> tuple:
    """The fleet shape with the sizes broadcast in (same N), refused if a batch axis is empty."""
    n_jobs = job_shape[-1]
    try:
        shape = np.broadcast_shapes(job_shape, size_np.shape)
    except ValueError:
        shape = None
    if shape is None or shape[-1] != n_jobs:
        raise ValueError(
            f"size must be a scalar or broadcast to the fleet shape (*B, N) with N = {n_jobs} job "
            f"slots, got shape {size_np.shape}"
        )
    if 0 in shape[:-1]:
        raise ValueError(
            f"compute and write must hold at least one fleet: the batch shape (*B,) = {shape[:-1]} "
            "has an axis of length 0"
        )
    return shape


def _per_fleet(name: str, value, default, batch_shape: tuple, dtype) -> np.ndarray:
    """``value`` (``default`` where None) as a float array broadcast to the batch shape (*B,)."""
    return broadcast_to(name, _as_float_array(name, default if value is None else value, dtype), batch_shape)


def _cap_array(cap, batch_shape: tuple, dtype):
    """``(cap, uncapped, shown)``: the cap C (inf where uncapped) and where it is uncapped,
    broadcast to (*B,), and the value an error names. A list may mix capped and uncapped
    fleets: None entries mean uncapped (shown as inf)."""
    if cap is not None and not np.isscalar(cap) and not isinstance(cap, (np.ndarray, jax.Array)):
        try:
            entries = np.asarray(cap, dtype=object)
        except ValueError:
            raise ValueError(f"cap must be a number, None or an array of them, got {cap!r}") from None
        uncapped = np.vectorize(lambda c: c is None, otypes=[bool])(entries)
        filled = np.where(uncapped, np.inf, entries)
        if any(isinstance(c, complex) for c in filled.ravel()):
            raise ValueError("cap must be real, got complex values")
        try:
            cap = filled.astype(np.float64)
        except (TypeError, ValueError):
            raise ValueError(f"cap must hold real numbers or None, got {cap!r}") from None
    else:
        uncapped = np.zeros(np.shape(cap) if cap is not None else (), bool)
    cap_np = _per_fleet("cap", cap, np.inf, batch_shape, dtype)
    uncapped = np.broadcast_to(uncapped, batch_shape) if cap is not None else np.ones(batch_shape, bool)
    return cap_np, uncapped, cap


def _throughput_array(throughput: Throughput, n_jobs: int, batch_shape: tuple) -> np.ndarray:
    """The throughput table f(0..N) broadcast to (*B, N + 1)."""
    table = throughput_table(throughput, n_jobs)
    try:
        return np.broadcast_to(table, batch_shape + (n_jobs + 1,))
    except ValueError:
        raise ValueError(f"throughput table shape {table.shape} does not match the batch shape {batch_shape}") from None


def _check_jobs(active_np, compute_np, write_np, size_np, dtype) -> None:
    """Refuses a compute work, write volume or size that is not finite and > 0 for an
    active job, or out of the dtype's range."""
    for name, arr in (("compute", compute_np), ("write", write_np), ("size", size_np)):
        bad = active_np & ~(np.isfinite(arr) & (arr > 0))
        if bad.any():
            raise ValueError(
                f"{name} must be finite and > 0 for every active job; found "
                f"{float(arr[bad].ravel()[0])!r} at index {tuple(int(i) for i in np.argwhere(bad)[0])}"
            )
        check_range(name, arr, dtype, mask=active_np)


def _check_fleets(cap_np, uncapped, shown_cap, table, delay_np, delay, alpha_np, async_fraction, dtype) -> None:
    """Refuses a cap, throughput, delay or asynchronous fraction out of its range; the
    messages name the value as given (``shown_cap``, ``delay``, ``async_fraction``)."""
    if not (uncapped | ((cap_np > 0) & np.isfinite(cap_np))).all():
        raise ValueError(f"cap must be finite and > 0 (or None for uncapped), got {shown_cap!r}")
    check_range("cap", np.where(uncapped, 1.0, cap_np), dtype)
    check_range("throughput f(n)", table[..., 1:], dtype)
    if not (np.isfinite(delay_np) & (delay_np >= 0)).all():
        raise ValueError(f"delay must be finite and >= 0, got {delay!r}")
    check_range("delay", np.where(delay_np > 0, delay_np, 1.0), dtype)
    if not ((alpha_np >= 0) & (alpha_np <= 1)).all():
        raise ValueError(f"async_fraction must lie in [0, 1], got {async_fraction!r}")


def _check_solo(active_np, compute_np, write_np, table, dtype) -> None:
    """Refuses a fleet without an active job, or a job whose solo cycle is not
    representable (its time bound is checked by simulate)."""
    if not active_np.any(axis=-1).all():
        raise ValueError("active must mark at least one job active in every fleet")
    solo = np.where(active_np, compute_np + write_np / table[..., 1:2], 1.0)
    check_range("the solo period T_i + d_i / f(1)", solo, dtype)


_FLEET_STATIC = (
    "power_policy",
    "storage_policy",
    "recover_from",
    "fail_while_down",
    "_sized",
    "_limited",
    "_snapshots",
    "_reads",
    "_outages",
    "_weibull",
    "_overheads",
)


def check_policy(name: str, value, allowed: tuple) -> str:
    """``value`` if it is one of ``allowed`` (a policy name), else `ValueError` naming ``name``."""
    if not isinstance(value, str) or value not in allowed:
        raise ValueError(f"{name} must be one of {', '.join(map(repr, allowed))}, got {value!r}")
    return value


def _replace(fleet: Fleet, **changes) -> Fleet:
    """A copy of ``fleet`` with some fields replaced, bypassing validation."""
    new = object.__new__(Fleet)
    for name in _FLEET_FIELDS + _FLEET_STATIC:
        object.__setattr__(new, name, changes.get(name, getattr(fleet, name)))
    return new


def _fleet_flatten(fleet):
    # The policies are static: they select code paths, so they are auxiliary data.
    return tuple(getattr(fleet, name) for name in _FLEET_FIELDS), tuple(getattr(fleet, n) for n in _FLEET_STATIC)


def _fleet_unflatten(static, leaves):
    # Bypasses __init__: leaves may be tracers, batching sentinels or None.
    new = object.__new__(Fleet)
    for name, leaf in zip(_FLEET_FIELDS, leaves):
        object.__setattr__(new, name, leaf)
    for name, value in zip(_FLEET_STATIC, static):
        object.__setattr__(new, name, value)
    return new


jax.tree_util.register_pytree_node(Fleet, _fleet_flatten, _fleet_unflatten)


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class State:
    """Per-job initial condition of a batch of fleets.

    Attributes:
      phase: (*B, N) int32, 0 = computing, 1 = writing.
      remaining: (*B, N) work (phase 0) or volume (phase 1) left in the current phase.
    """

    phase: jax.Array
    remaining: jax.Array


def _check_fleet(fleet) -> None:
    if not isinstance(fleet, Fleet):
        raise ValueError(f"fleet must be a ckpt_jax.Fleet, got {type(fleet).__name__}")


def initial_state(fleet: Fleet, phase: ArrayLike = 0, remaining: ArrayLike | None = None) -> State:
    """Validated initial state for ``fleet``.

    Args:
      fleet: the `Fleet`.
      phase: (*B, N) ints, 0 = computing, 1 = writing (broadcast; default all computing).
      remaining: (*B, N) work left in the current phase, in (0, T_i] for computing jobs and
        (0, d_i] for writing jobs, positive also after the cast to the fleet's dtype.
        Default: a full phase (T_i or d_i), i.e. a synchronous start.

    Raises:
      ValueError: phase not in {0, 1}, remaining out of range, or shapes that do not match.
    """
    _check_fleet(fleet)
    shape = fleet.compute.shape
    phase_np = real_array("phase", phase)
    if not np.all(np.isfinite(phase_np) & (np.mod(phase_np, 1) == 0)):
        raise ValueError(f"phase must hold integers 0 (computing) or 1 (writing), got {_values(phase_np)}")
    try:
        phase_np = np.broadcast_to(phase_np.astype(np.int64), shape)
    except ValueError:
        raise ValueError(f"phase must have the fleet shape {shape}, got {np.shape(phase)}") from None
    active = np.asarray(fleet.active)
    if not np.isin(phase_np[active], (0, 1)).all():
        raise ValueError(
            f"phase must be 0 (computing) or 1 (writing) for every active job, got values {_values(phase_np[active])}"
        )
    full = np.where(phase_np == 1, np.asarray(fleet.write), np.asarray(fleet.compute))
    if remaining is None:
        remaining_np = full
    else:
        remaining_np = real_array("remaining", remaining)
        try:
            remaining_np = np.broadcast_to(remaining_np, shape)
        except ValueError:
            raise ValueError(f"remaining must have the fleet shape {shape}, got {remaining_np.shape}") from None
        # A relative slack of a few ulps lets users pass remaining = T computed in another dtype.
        slack = 4 * np.finfo(np.dtype(fleet.dtype)).eps * full
        cast = remaining_np.astype(fleet.dtype)
        bad = active & ~(np.isfinite(remaining_np) & (cast > 0) & (remaining_np <= full + slack))
        if bad.any():
            idx = tuple(int(i) for i in np.argwhere(bad)[0])
            which = "d_i (write)" if phase_np[idx] == 1 else "T_i (compute)"
            raise ValueError(
                f"remaining must lie in (0, {which}] for each job (and stay > 0 in {np.dtype(fleet.dtype)}); "
                f"remaining{list(idx)} = {float(remaining_np[idx])!r} but the phase's full work is "
                f"{float(full[idx])!r}"
            )
        remaining_np = np.minimum(remaining_np, full)
    remaining_np = np.where(active, remaining_np, 1.0)
    return State(
        phase=jnp.asarray(np.where(active, phase_np, 0), dtype=jnp.int32),
        remaining=jnp.asarray(remaining_np, dtype=fleet.dtype),
    )


def _values(array) -> str:
    unique = np.unique(np.asarray(array))
    shown = ", ".join(f"{v:g}" for v in unique[:6]) + (", ..." if unique.size > 6 else "")
    return f"[{shown}]"


def check_state(fleet: Fleet, state) -> State:
    """Validates a `State` wherever one enters (e.g. `simulate`), however it was built.

    A `State` made by hand skips `initial_state`'s checks; this applies them again: the
    fleet's shape, phase in {0, 1}, remaining finite and in (0, full phase work].

    Returns:
      The state with ``remaining`` in the fleet's dtype.
    """
    _check_fleet(fleet)
    if not isinstance(state, State):
        raise ValueError(f"state must be a ckpt_jax.State (see initial_state), got {type(state).__name__}")
    shape = fleet.compute.shape
    for name in ("phase", "remaining"):
        if np.shape(getattr(state, name)) != shape:
            raise ValueError(
                f"state.{name} has shape {np.shape(getattr(state, name))}, but the fleet's shape is {shape}"
            )
    try:
        return initial_state(fleet, phase=np.asarray(state.phase), remaining=np.asarray(state.remaining))
    except ValueError as err:
        raise ValueError(f"state: {err}") from None


def cycle_positions(fraction, cycle) -> np.ndarray:
    """Cycle positions ``fraction × cycle`` (float64) for fractions in [0, 1), kept inside
    [0, cycle) as `state_from_positions` requires (a fraction just below 1 can round up)."""
    cycle = np.asarray(cycle, np.float64)
    return np.minimum(np.asarray(fraction, np.float64) * cycle, np.nextafter(cycle, 0))


def state_from_positions(fleet: Fleet, position: ArrayLike) -> State:
    """State from cycle positions θ_i ∈ [0, d_i + T_i) (work done since the last firing).

    θ < d_i: writing with d_i − θ left; otherwise computing with T_i − (θ − d_i) left
    (docs/model.md §2, write progress first, then compute progress).
    """
    _check_fleet(fleet)
    theta = real_array("position", position)
    write = np.asarray(fleet.write, dtype=np.float64)
    compute = np.asarray(fleet.compute, dtype=np.float64)
    try:
        theta = np.broadcast_to(theta, write.shape)
    except ValueError:
        raise ValueError(f"position must have the fleet shape {write.shape}, got {theta.shape}") from None
    active = np.asarray(fleet.active)
    bad = active & ~((theta >= 0) & (theta < write + compute))
    if bad.any():
        raise ValueError(f"position must lie in [0, d_i + T_i); got {float(theta[bad].ravel()[0])!r}")
    writing = theta < write
    remaining = np.where(writing, write - theta, compute - (theta - write))
    return initial_state(fleet, phase=writing.astype(np.int32), remaining=remaining)


def solo_cycle_positions(fleet: Fleet, elapsed: ArrayLike) -> np.ndarray:
    """Cycle positions θ_i (work done since the last firing, `state_from_positions`) of jobs
    ``elapsed`` (*B, N) time into their solo cycle D_i + T_i (D_i = d_i / min(b_i, f(1)),
    `Fleet.solo_write`): inside the write (elapsed < D_i) the volume written alone by then,
    d_i·elapsed/D_i, else the whole write d_i and the compute done, elapsed − D_i. Where
    D_i = d_i (f(1) = 1 and no write limit) this is ``elapsed`` itself, bit for bit; where the
    volume is not a time (bytes against seconds) it is what makes a launch uniform in time."""
    write = np.asarray(fleet.write, dtype=np.float64)
    elapsed = np.asarray(elapsed, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):  # padding slots may hold anything
        solo = np.asarray(fleet.solo_write, dtype=np.float64)
        mapped = np.where(elapsed < solo, write * (elapsed / solo), write + (elapsed - solo))
        compute = np.asarray(fleet.compute, dtype=np.float64)
    mapped = np.minimum(mapped, np.nextafter(write + compute, 0))  # rounding at the cycle's end
    return np.where(solo == write, elapsed, mapped)


def state_at_elapsed(fleet: Fleet, elapsed: ArrayLike) -> State:
    """The state of jobs ``elapsed`` (*B, N) time into their solo cycle D_i + T_i, in [0,
    D_i + T_i), as `state_from_positions` of `solo_cycle_positions` but computed in time:
    inside the write (elapsed < D_i) writing with d_i − d_i·elapsed/D_i left, else computing
    with T_i − (elapsed − D_i) left. The compute left never passes through the cycle position
    d_i + work, which in a file of bytes and seconds (d_i ~ 1e11, T_i ~ 1e3) keeps only the
    digits of T_i that d_i leaves (about 8 of float64's 16). Where D_i = d_i it is
    `state_from_positions(fleet, elapsed)` bit for bit."""
    _check_fleet(fleet)
    write = np.asarray(fleet.write, dtype=np.float64)
    compute = np.asarray(fleet.compute, dtype=np.float64)
    elapsed = np.broadcast_to(np.asarray(elapsed, dtype=np.float64), write.shape)
    active = np.asarray(fleet.active)
    with np.errstate(divide="ignore", invalid="ignore"):  # padding slots may hold anything
        solo = np.asarray(fleet.solo_write, dtype=np.float64)
        bad = active & ~((elapsed >= 0) & (elapsed < solo + compute))
        if bad.any():
            raise ValueError(f"elapsed must lie in [0, D_i + T_i); got {float(elapsed[bad].ravel()[0])!r}")
        writing = elapsed < solo
        written = np.where(solo == write, elapsed, write * (elapsed / solo))  # D_i = d_i: elapsed itself
        left = np.where(writing, write - written, compute - (elapsed - solo))
    # Rounding at the cycle's end: a job about to fire has a sliver left, never none.
    left = np.where(active & (left <= 0), np.where(writing, np.spacing(write), np.spacing(compute)), left)
    return initial_state(fleet, phase=writing.astype(np.int32), remaining=left)


def random_state(fleet: Fleet, key: jax.Array) -> State:
    """Independent random cycle positions, one per job (a "random launch"), uniform in time
    over each job's solo cycle D_i + T_i (`solo_cycle_positions`).

    Args:
      fleet: the `Fleet` (batch shape *B, N job slots).
      key: one PRNG key for the whole batch, or a key array of the batch shape *B (one
        key per fleet): then fleet b's positions depend on ``key[b]`` alone, so a fleet's
        launch does not depend on the batch it is drawn in (`ckpt_jax.ensemble` uses this).
        Typed keys (`jax.random.key`) and raw key data (`jax.random.PRNGKey`) both work.

    Fleets with two-level checkpoints (``snapshot``, docs/model.md §1d) start every job
    computing, at a uniform position u·T_i of its compute phase (no drain in flight): a job
    that writes at t = 0 would compute its whole next T_i meanwhile, so every such job would
    take its snapshot at t = T_i, all together.
    """
    _check_fleet(fleet)
    key = check_key(key, fleet.batch_shape)
    if fleet.batch_shape != () and key.shape == fleet.batch_shape:
        fleet_keys = jnp.reshape(key, (-1,))
        draw = jax.vmap(lambda k: jax.random.uniform(k, (fleet.n_jobs,), dtype=fleet.dtype))
        u = np.asarray(draw(fleet_keys), dtype=np.float64).reshape(fleet.compute.shape)
    else:
        u = np.asarray(jax.random.uniform(key, fleet.compute.shape, dtype=fleet.dtype), dtype=np.float64)
    compute = np.asarray(fleet.compute, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):  # padding slots may hold anything
        cycle = np.asarray(fleet.solo_write, dtype=np.float64) + compute
    state = state_at_elapsed(fleet, cycle_positions(u, cycle))
    two_level = np.broadcast_to(np.asarray(fleet.two_level)[..., None], compute.shape)
    if not two_level.any():
        return state
    # Two-level: the compute left, (1 − u)·T in (0, T], so the first snapshot is at a uniform time.
    remaining = np.where(two_level, compute - cycle_positions(u, compute), np.asarray(state.remaining))
    phase = np.where(two_level, 0, np.asarray(state.phase))
    return initial_state(fleet, phase=phase, remaining=remaining)


def events_to(
    horizon, period, mtbf, restart, active, *, per_cycle: ArrayLike = 2.0, per_failure: ArrayLike = 2.0
) -> np.ndarray:
    """About how many events a fleet of jobs with solo periods T_i + d_i/f(1), MTBFs M_i
    (inf: none) and restarts R_i steps up to the horizon H, every kind in one count: H /
    period_i cycles of ``per_cycle`` events each (the firing and the write end: 2; a
    two-level checkpoint adds the snapshot's end), plus ``per_failure`` events for each of
    about H / (M_i + R_i) failures (the failure and the restart's end: 2; a recovery read
    adds its end) (docs/model.md §1c-§1e). (*B, N) arrays in (``per_cycle`` and
    ``per_failure`` broadcast to them), (*B,) out. An estimate for budgets, progress bars
    and messages: simultaneous switches count once, and contention slows the cycles."""
    horizon = np.asarray(horizon, np.float64)[..., None]
    with np.errstate(all="ignore"):
        cycles = np.where(active, horizon / period, 0.0)
        failures = np.where(active & np.isfinite(mtbf), horizon / (mtbf + restart), 0.0)
    return np.sum(np.asarray(per_cycle) * cycles + np.asarray(per_failure) * failures, axis=-1)


def failures_to(horizon, mtbf, restart, active) -> np.ndarray:
    """About how many failures the jobs of a fleet have up to H (*B,): each fails about
    H / (M_i + R_i) times (an up time of M_i on average, then R_i down; M_i = inf: none)."""
    horizon = np.asarray(horizon, np.float64)[..., None]
    with np.errstate(all="ignore"):
        per_job = np.where(active & np.isfinite(mtbf), horizon / (mtbf + restart), 0.0)
    return np.sum(per_job, axis=-1)
