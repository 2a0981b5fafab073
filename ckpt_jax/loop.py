"""The exact event loop of one fleet, for code that drives it step by step.

`ckpt_jax.simulate` runs whole batches; the return maps (`ckpt_jax.maps`), coupling
functions (`ckpt_jax.coupling`) and FTLE (`ckpt_jax.lyapunov`) instead follow one fleet
from a chosen state to a chosen event, and differentiate through it. They use this
module. The functions below are public; the loop state they pass around (`Carry`, a
`NamedTuple` of the general loop's per-job rows) is documented for reading, but its
fields may change with the loop (new variants add rows): build it with `init_carry`,
not by hand.

* `flat_params(fleet)` — a validated `Fleet` as flat per-fleet arrays (`Params`, leading
  axis B); take ``jax.tree_util.tree_map(lambda x: x[0], params)`` for one fleet;
* `init_carry(params, phase, remaining, n_fires, queue_size, use_jitter, sharing=Sharing(),
  track_work=False, use_failures=False, use_snapshot=False)` — the loop state (`Carry`) of one
  fleet, from traced values too (no host checks); with the work accounting and failures of
  docs/model.md §1c, and the snapshots of two-level checkpoints (§1d); the fixed overhead of
  a checkpoint (§1g) wherever the params have one (`Params.overhead`);
* `step(params, carry, running, n_fires, use_delay, use_jitter, horizon=None, sharing=Sharing(),
  use_failures=False, use_snapshot=False)` — one event (`advance` steps without failures);
* `advance(params, carry, max_events=..., stop=..., horizon=..., observe=...)` — the
  stepping primitive: event by event until a condition, a horizon or the budget, with an
  optional observer of each step (the driver's one-fleet loop, with the budget rule of
  `simulate`); `advance_to_firing(params, carry, job, ...)` stops at
  the next firing of ``job``;
* `computing_mask(params, draining, waiting)` — who draws compute power;
* `sharing_for(fleet)` — the static rate rules (`Sharing`) of a fleet with job sizes,
  sharing policies (docs/model.md §1b) or write limits (§1d), to pass as ``sharing=`` to `init_carry`, `step`,
  `advance` and `advance_to_firing` (their default is the base model's anonymous rates);
* the observers of `ckpt_jax.SaveAt` (`ckpt_jax.Observer`): each loop iteration is an
  `EventView`, the state after the loop a `FinalView`, the loop described by a
  `LoopInfo`; an observer (the built-in `WritersObserver`, `GapsObserver`,
  `JobsObserver`, or a user's) is ``init(info)``, ``update(state, view)`` and
  ``finalize(state, final)`` over batched arrays.

Example: the time until job 0 of a synchronous pair fires again.

>>> import jax, jax.numpy as jnp, ckpt_jax as cj
>>> from ckpt_jax import loop
>>> fleet = cj.Fleet([10.0, 10.0], [1.0, 1.0])
>>> params = jax.tree_util.tree_map(lambda x: x[0], loop.flat_params(fleet))
>>> carry = loop.init_carry(params, jnp.array([1, 1]), jnp.array([1.0, 1.0]), 1, 1, False)
>>> carry, _ = loop.advance_to_firing(params, carry, 0, max_events=100)
>>> float(carry.time)
12.0
"""

import numpy as np

from ._loops.driver import advance_fleet as advance
from ._loops.driver import advance_to_firing
from ._loops.general import Carry, init_carry, step
from ._loops.outages import drawn_instants
from ._observe import EventView, FinalView, GapsObserver, JobsObserver, LoopInfo, Observer, WritersObserver
from ._params import Params, flat_params, jitter_work
from ._plan import sharing_for
from ._rates import Sharing, computing_mask

__all__ = [
    "Carry",
    "Params",
    "Sharing",
    "flat_params",
    "init_carry",
    "step",
    "advance",
    "advance_to_firing",
    "computing_mask",
    "jitter_work",
    "sharing_for",
    "EventView",
    "FinalView",
    "LoopInfo",
    "Observer",
    "WritersObserver",
    "GapsObserver",
    "JobsObserver",
    "outage_instants",
]


def outage_instants(fleet, horizon, key=None, fleet_offset: int = 0):
    """(B, K, 2) the outages of each fleet before ``horizon`` (docs/model.md §1f), as
    (time, domain) rows sorted by time, NaN padded (K >= 1), one batch axis (the fleets in
    flat order): the drawn ones (``Fleet(outage_mtbf=...)``) that `ckpt_jax.simulate` with the
    same ``key`` and ``fleet_offset`` takes, or the replayed ``outage_times``. None without
    outages. For checks against a reference, and to see when a run's outages struck."""
    if not fleet.has_outages:
        return None
    n_fleets = int(np.prod(fleet.batch_shape, dtype=np.int64))
    if fleet.outage_kind == "listed":
        times = np.reshape(np.asarray(fleet.outage_times, np.float64), (n_fleets, -1))
        domains = np.reshape(np.asarray(fleet.outage_domains, np.float64), (n_fleets, -1))
        horizon = np.broadcast_to(np.asarray(horizon, np.float64).reshape(-1), (n_fleets,))
        keep = times < horizon[:, None]
        rows = np.stack([np.where(keep, times, np.nan), np.where(keep, domains, np.nan)], axis=-1)
        return rows if rows.shape[1] else np.full((n_fleets, 1, 2), np.nan)
    return drawn_instants(flat_params(fleet, key=key, fleet_offset=fleet_offset), horizon)
