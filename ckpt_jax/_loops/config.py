"""One run's static configuration: what `simulate` decided after validation, in one value.

Everything a loop's program depends on besides its arrays (the loop, the trace's length,
what to observe, which variants the fleets use, the rate rules) is a field of one frozen,
hashable `RunConfig`. It is the single static argument of every jitted loop, block and
sharded program (``static_argnames=("config",)``): two runs with equal configurations
share their compiled programs, and a new variant is one more field here, not one more
flag threaded through every signature.
"""

from __future__ import annotations

import dataclasses

from .._observe import SaveAt
from .._rates import Sharing
from ..model import QUEUE_POLICIES

__all__ = ["RunConfig", "default_events_per_iteration", "EVENTS_PER_ITERATION"]

# k by backend (`RunConfig.events_per_iteration`). On the CPU one step per iteration: an
# iteration costs its passes over the state, and two steps per iteration measured neutral
# within the noise. On an accelerator each pass is a kernel launch and the condition's read
# a transfer to the host, paid once per k events; 4 is not measured yet
# (benchmarks/gpu_check.sh times k = 1, 4, 16 where a device is lent).
EVENTS_PER_ITERATION = {"cpu": 1}
ACCELERATOR_EVENTS_PER_ITERATION = 4


def default_events_per_iteration(backend: str) -> int:
    """k for a backend name (``jax.default_backend()``): 1 on the CPU, 4 elsewhere."""
    return EVENTS_PER_ITERATION.get(backend, ACCELERATOR_EVENTS_PER_ITERATION)


@dataclasses.dataclass(frozen=True)
class RunConfig:
    """The static configuration of one run of one loop (hashable).

    Attributes:
      path: the loop, ``"general"``, ``"fifo"`` or ``"clock"`` (`ckpt_jax._plan.choose_paths`).
      n_fires: the stop count K: a fleet is done when every active job completed K writes
        (with ``until`` a count never reached, `ckpt_jax._params.MAX_FIRES`).
      trace_len: the trace's length K (0: no trace buffer).
      save: what `simulate` records (`ckpt_jax.SaveAt`).
      stop_fires: the K whose first write end closes the observers' window (None: the
        horizon closes it).
      gap_fires: the cycles the gaps observer keeps.
      queue_size: capacity of the delayed controller's queue (1 where no fleet has τ > 0).
      use_jitter, use_delay, use_async, use_failures: whether some fleet of the run has
        jitter, τ > 0, α > 0, failures (the variants' code is traced only where used).
      until: the run stops at a per-fleet time horizon instead of at K writes.
      sharing: the rate rules of job sizes, sharing policies and write limits
        (`ckpt_jax._rates.Sharing`).
      use_snapshot: some fleet checkpoints in two levels (docs/model.md §1d).
      recover_from: what a failure of a two-level job keeps, ``"storage"`` or ``"memory"``.
      use_recovery: some job re-reads its checkpoint after a failure (``recovery_read``,
        docs/model.md §1e): the readers are storage users of the general loop.
      fail_while_down: the failure clock runs during restarts and recovery reads (§1e).
      events_per_iteration: k, the steps of every running fleet per iteration of the
        driver's `while_loop` (an inner loop of k steps, finished fleets masked): the
        loop's condition is read, and on a GPU its launches paid, once per k events. The
        results do not depend on it (`default_events_per_iteration`).
    """

    path: str = "general"
    n_fires: int = 1
    trace_len: int = 0
    save: SaveAt = SaveAt()
    stop_fires: int | None = None
    gap_fires: int | None = None
    queue_size: int = 1
    use_jitter: bool = False
    use_delay: bool = False
    use_async: bool = False
    use_failures: bool = False
    until: bool = False
    sharing: Sharing = Sharing()
    use_snapshot: bool = False
    recover_from: str = "storage"
    use_recovery: bool = False
    fail_while_down: bool = False
    events_per_iteration: int = 1

    @property
    def use_power(self) -> bool:
        """Whether the loop computes the fleet's power draw per interval (``SaveAt(power=True)``)."""
        return self.save.power

    @property
    def memory(self) -> bool:
        """Two-level checkpoints recovered from memory: useful work counts at the snapshot."""
        return self.use_snapshot and self.recover_from == "memory"

    @property
    def track_work(self) -> bool:
        """Whether the general loop keeps the work accounting (`failures.WorkCarry`, ten
        per-job rows stepped every iteration): with failures, or where the jobs observer
        reports useful work of jittered phases. Without either, every completed write saves
        one full phase, and `ckpt_jax._simulate.fast_useful_work` derives the useful work
        from the write counts."""
        return self.path == "general" and (
            self.use_failures or self.queue or (self.save.jobs and (self.use_jitter or self.use_snapshot))
        )

    @property
    def queue(self) -> bool:
        """Checkpoint requests queue while their jobs compute (``"fcfs_nonblocking"``,
        ``"cooperative"``, docs/model.md §1e): a write covers the work up to its start, which
        the work accounting follows (so it is kept)."""
        return self.sharing.storage in QUEUE_POLICIES
