"""The one driver of every loop: the masked batched `jax.lax.while_loop`, the observers'
dispatch, the event budget, the status flags, progress, CPU blocks and sharding.

A loop is a strategy (`Loop`): how to start a batch of fleets, step it once, tell which
fleets are unfinished, describe an iteration to the observers and read the result. The
driver owns everything around it, once for every loop:

* the masked `while_loop`: each iteration steps the fleets still running and masks the
  rest; a fleet runs while it is unfinished, has no status flag and is within the event
  budget (`Loop.within_budget`);
* the observers (`ckpt_jax._observe.Observer`): each is updated once per iteration, one
  iteration late (`ckpt_jax._loops.events`: the pending event is read from the loop
  state), and once more after the loop; then finalized with the run's ``ok``;
* the run's status: `Status.MAX_EVENTS` where the budget, and nothing else, stopped a
  fleet, `Status.NONFINITE` wherever the final time is not finite, ``ok`` = done and no flag;
* where the batch runs: sharded over devices (`ckpt_jax.sharding`), in cache-sized blocks
  of fleets on a CPU (the virtual-clock loops), or as one batch;
* progress: a bar that moves per chunk of events (the general loop resumes where a chunk
  stopped: in cycles, or in percent of the horizon, as `Loop.progress` tells) or per group
  of blocks of fleets (the virtual-clock loops, which halt for good at a budget: in fleets);
* the one-fleet loop (`advance_fleet`, `advance_to_firing`): the general step of ONE fleet
  until a stop the caller gives, with the same budget rule (`budget_status`), for code that
  drives a fleet itself (`ckpt_jax.loop`, the return maps, the phase coupling).

Everything static about a run is one `RunConfig`, the single static argument of every
compiled program here.
"""

from __future__ import annotations

import functools
import math
from typing import Any, Protocol

import jax
import jax.numpy as jnp

from .. import _observe, _progress, sharding
from .._observe import EventView, LoopInfo
from .._params import Params
from .._rates import Sharing
from .._status import Status, flag
from . import LoopResult
from .config import RunConfig
from .general import Carry, GeneralLoop, step
from .virtual import VirtualLoop

__all__ = ["Loop", "loop_for", "run", "run_part", "budget_status", "advance_fleet", "advance_to_firing"]


class Loop(Protocol):
    """A loop strategy over a batch of fleets (leading axis B), built per run from the
    `RunConfig`, the fleets' `Params` and their horizons (used with ``config.until``)."""

    def info(self) -> LoopInfo:
        """What the observers are told about the loop (`LoopInfo`)."""
        ...

    def init(self, phase, remaining) -> Any:
        """The carry at t = 0 from the initial `State`'s arrays."""
        ...

    def step(self, carry, running, event_limit) -> tuple[Any, Any]:
        """Steps the ``running`` fleets once (the others must be left unchanged); returns
        ``(carry, event)``, a compact record of the iteration for `view`."""
        ...

    def no_event(self, carry) -> Any:
        """An event in which no fleet ran (before the first iteration)."""
        ...

    def view(self, event, after) -> EventView:
        """The observers' `EventView` of ``event``, read from the carry ``after`` it."""
        ...

    def unfinished(self, carry, event) -> jax.Array:
        """(B,) fleets that have not reached their stop (K writes, or the horizon)."""
        ...

    def within_budget(self, carry, event_limit) -> jax.Array:
        """(B,) fleets within the event budget."""
        ...

    def progress(self, carry) -> jax.Array:
        """How far the slowest fleet got, in [0, 1] (what a progress bar shows): with
        ``until`` the fraction of its horizon, else of the K cycles."""
        ...

    def final(self, carry) -> LoopResult:
        """The result in job order (``observers`` left empty: the driver fills them in)."""
        ...


def loop_for(config: RunConfig, params, horizon) -> Loop:
    """The loop strategy of ``config.path``."""
    return (GeneralLoop if config.path == "general" else VirtualLoop)(config, params, horizon)


def still_running(loop: Loop, carry, event, event_limit) -> jax.Array:
    """(B,) fleets still to step: unfinished, no status flag, within the event budget."""
    return loop.unfinished(carry, event) & (carry.status == Status.OK) & loop.within_budget(carry, event_limit)


def start(config: RunConfig, part):
    """The driver's state at t = 0, ``(carry, observer states)``, of ``part = (params,
    phase, remaining, horizon)``."""
    params, phase, remaining, horizon = part
    loop = loop_for(config, params, horizon)
    info = loop.info()
    return loop.init(phase, remaining), tuple(o.init(info) for o in _observe.observers_of(config.save))


def advance(config: RunConfig, part, state, event_limit):
    """The masked batched `while_loop`: steps every running fleet until none is left;
    returns the state ``(carry, observer states)``."""
    params, _, _, horizon = part
    loop = loop_for(config, params, horizon)
    observers = _observe.observers_of(config.save)

    def observe(states, event, after):
        view = loop.view(event, after)
        return tuple(o.update(s, view) for o, s in zip(observers, states))

    def one_step(state):
        # The running mask is computed once per step and carried to the next test.
        carry, states, event, running = state
        if observers:  # the previous step's event, now read from the loop state
            states = observe(states, event, carry)
        carry, new_event = loop.step(carry, running, event_limit)
        return carry, states, (new_event if observers else event), still_running(loop, carry, new_event, event_limit)

    def body(state):
        # k steps per iteration: a fleet that stops within them is masked (it runs the
        # body and writes nothing, as in any batched step), so k changes no result.
        k = config.events_per_iteration
        if k == 1:
            return one_step(state)
        return jax.lax.fori_loop(0, k, lambda _, s: one_step(s), state)

    carry, states = state
    none = loop.no_event(carry)
    initial = (carry, states, none, still_running(loop, carry, none, event_limit))
    carry, states, event, _ = jax.lax.while_loop(lambda s: jnp.any(s[-1]), body, initial)
    if observers:  # the last iteration's event
        states = observe(states, event, carry)
    return carry, states


def finish(config: RunConfig, part, state) -> LoopResult:
    """The `LoopResult`: the loop's final state, the run's status and ``ok``, and the
    observers' outputs (``{name: output}``)."""
    params, _, _, horizon = part
    carry, states = state
    result = loop_for(config, params, horizon).final(carry)
    status = budget_status(result.status, result.done)
    # A non-finite time is never ok, whichever loop produced it.
    status = status | flag(~jnp.isfinite(result.time), Status.NONFINITE)
    # Any flag means the numbers cannot be trusted, so ok requires status == 0.
    ok = result.done & (status == Status.OK)
    final = result.final._replace(ok=ok)
    return result._replace(status=status, ok=ok, final=final, observers=_observe.finalize(config.save, states, final))


def budget_status(status, done):
    """``status`` with `Status.MAX_EVENTS` added where the run is not ``done`` and no other
    flag is set: the budget is the reason only where nothing else stopped it."""
    return jnp.where(done | (status != Status.OK), status, status | Status.MAX_EVENTS).astype(jnp.int32)


def run_part(config: RunConfig, part, event_limit) -> LoopResult:
    """Start, loop and finish of one batch of fleets: what each block and each device runs."""
    return finish(config, part, advance(config, part, start(config, part), event_limit))


@functools.partial(jax.jit, static_argnames=("config", "n_blocks"))
def run_blocks(config: RunConfig, part, event_limit, n_blocks: int) -> LoopResult:
    """`run_part` over ``n_blocks`` equal blocks of fleets, one after another
    (`jax.lax.map`), in one compiled program."""
    if n_blocks == 1:
        return run_part(config, part, event_limit)
    # Explicit sizes, not -1: a trace of length K = 0 has zero-size arrays.
    blocks = jax.tree_util.tree_map(lambda x: x.reshape((n_blocks, x.shape[0] // n_blocks) + x.shape[1:]), part)
    result = jax.lax.map(lambda block: run_part(config, block, event_limit), blocks)
    return jax.tree_util.tree_map(lambda x: x.reshape((x.shape[0] * x.shape[1],) + x.shape[2:]), result)


start_jit = jax.jit(start, static_argnames=("config",))
# XLA's copy insertion, run before scheduling, copies every loop-state buffer that a pass
# reads after another pass may have written its new value; with region analysis it sees
# the while body's order and keeps most in place: the general loop's body of the realistic
# cluster (examples/llm_cluster.toml) goes from 20 state copies per iteration to 6. Copies
# move no arithmetic: the same bits.
LOOP_COMPILER_OPTIONS = {"xla_cpu_copy_insertion_use_region_analysis": True}
advance_jit = jax.jit(advance, static_argnames=("config",), donate_argnums=(2,), compiler_options=LOOP_COMPILER_OPTIONS)
finish_jit = jax.jit(finish, static_argnames=("config",))


def run(config: RunConfig, part, *, max_events: int, progress=None, devices=None, expected_events=None) -> LoopResult:
    """Runs flattened fleets ``part = (params, phase, remaining, horizon)`` (leading axis B;
    ``horizon`` None without ``until``) on ``config.path``; returns the `LoopResult` of
    every fleet.

    ``devices``: shard the batch over them (`ckpt_jax.sharding`). Otherwise the
    virtual-clock loops run on a CPU in blocks of fleets (`sharding.block_size`), padded
    with inert fleets to whole blocks. ``progress`` (None: only for long runs) shows a bar;
    ``expected_events``: with ``until``, about how many events the busiest fleet steps
    (`ckpt_jax.Fleet.events`), which sizes the chunks and decides whether a bar
    is shown.
    """
    params, phase, remaining, horizon = part
    n_fleets, n_jobs = params.compute.shape
    if horizon is None:
        horizon = jnp.full((n_fleets,), jnp.inf, params.compute.dtype)
    part = (params, phase, remaining, horizon)
    limit = jnp.int32(max_events)
    if devices is not None:
        part = sharding.place(sharding.pad_inert(*part, multiple=len(devices)), devices)
        options = tuple(LOOP_COMPILER_OPTIONS.items()) if config.path == "general" else ()
        return sharding.unpad(sharding.sharded(run_part, config, devices, options)(part, limit), n_fleets)
    # The general loop resumes where a chunk of events stopped: its bar moves per chunk.
    # The virtual-clock loops halt for good at a budget: theirs moves per group of blocks.
    by_events = config.path == "general"
    block = n_fleets if by_events else sharding.block_size(params, config)
    n_blocks = -(-n_fleets // block)
    block = -(-n_fleets // n_blocks)  # equal blocks: pad by fewer than n_blocks inert fleets
    part = sharding.pad_inert(*part, multiple=block)
    if by_events:
        events = (
            max(1, min(max_events, expected_events or max_events))
            if config.until
            else min(max_events, 2 * n_jobs * (config.n_fires + 2))
        )
        firings = n_fleets * events / 2
        long_run = firings >= _progress.LONG_RUN
    else:  # firings: N per cycle, or about half the events to a horizon
        firings = n_fleets * (
            (max_events if expected_events is None else expected_events) / 2
            if config.until
            else n_jobs * config.n_fires
        )
        long_run = n_blocks > 1 and firings >= 10 * _progress.LONG_RUN
    if not (long_run if progress is None else progress):
        if by_events:  # three programs, as a chunked run: the loop's state is donated and updated in
            # place (one program for all three ran the general loop with observers 8% slower)
            return finish_jit(config, part, advance_jit(config, part, start_jit(config, part), limit))
        return sharding.unpad(run_blocks(config, part, limit, n_blocks=n_blocks), n_fleets)
    if by_events:
        return _events_with_progress(config, part, max_events, events)
    return _blocks_with_progress(config, part, limit, n_blocks, block, n_fleets)


def _events_with_progress(config: RunConfig, part, max_events: int, events: int) -> LoopResult:
    """The general loop in chunks of about ``events / 50`` events, so long runs show a bar:
    in cycles (the slowest job's completed writes) or, with ``until``, in percent of the
    horizon reached by the slowest fleet. The event limit is a traced argument, so every
    chunk reuses one compiled loop."""
    params, _, _, horizon = part
    loop = loop_for(config, params, horizon)
    if config.until:
        shown = dict(
            total=100, unit="% of H", bar_format="{l_bar}{bar}| {n:.0f}/{total} {unit} [{elapsed}<{remaining}]"
        )
    else:
        shown = dict(total=config.n_fires, unit="cycle")
    chunk = max(1, math.ceil(events / 50))
    limit = 0
    state = start_jit(config, part)
    with _progress.progress_bar(desc="ckpt_jax.simulate", **shown) as bar:
        while True:
            limit = min(limit + chunk, max_events)
            state = advance_jit(config, part, state, jnp.int32(limit))
            carry = state[0]
            done = float(loop.progress(carry))
            bar.update((100 * done if config.until else int(round(done * config.n_fires))) - bar.n)
            if limit >= max_events or not bool(jnp.any(still_running(loop, carry, None, max_events))):
                return finish_jit(config, part, state)


def _blocks_with_progress(config: RunConfig, part, limit, n_blocks: int, block: int, n_fleets: int) -> LoopResult:
    """The blocks of fleets in about 20 groups, one call per group, so the bar (in fleets)
    moves; one compile for every full group."""
    per_call = max(1, n_blocks // 20)
    pieces = []
    with _progress.progress_bar(total=n_fleets, desc=f"ckpt_jax.simulate ({config.path})", unit="fleet") as bar:
        for first in range(0, n_blocks, per_call):
            count = min(per_call, n_blocks - first)
            group = jax.tree_util.tree_map(lambda x: x[first * block : (first + count) * block], part)  # noqa: B023
            # Waits for the group (dispatch is asynchronous), so the bar shows work done.
            pieces.append(jax.block_until_ready(run_blocks(config, group, limit, n_blocks=count)))
            bar.update(min(n_fleets, (first + count) * block) - bar.n)
    return jax.tree_util.tree_map(lambda *leaves: jnp.concatenate(leaves)[:n_fleets], *pieces)


# -- one fleet, driven by the caller: the stepping primitive of `ckpt_jax.loop`


def advance_fleet(
    params: Params,
    carry: Carry,
    *,
    max_events,
    stop=None,
    horizon=None,
    use_delay: bool = False,
    observe=None,
    observed: Any = None,  # any pytree
    sharing: Sharing = Sharing(),
    use_snapshot: bool = False,
):
    """Advances ONE fleet (no batch axis) event by event with the general step (`step`).

    It stops where ``stop(carry, observed)`` becomes True, at ``horizon`` (the last step
    goes to it exactly, `to_horizon`), when ``carry.n_events`` reaches ``max_events``
    (`Status.MAX_EVENTS` is then set, as the stop was not reached: `budget_status`) or at a
    status flag. ``observe(observed, before, after) -> observed`` runs after every step
    (an observer of the two carries). Jit-able, and differentiable by `jax.jacfwd`
    (forward mode works through `lax.while_loop`). ``sharing``: the static rate rules
    (`ckpt_jax.loop.sharing_for(fleet)` for a fleet with sizes, policies or write
    limits); ``use_snapshot``: two-level checkpoints, for a carry from `init_carry` with
    ``use_snapshot=True`` (docs/model.md §1d).

    Returns ``(carry, observed)``.
    """

    def stopped(c, o):
        reached = jnp.zeros((), bool) if stop is None else stop(c, o)
        if horizon is not None:
            reached = reached | (c.time >= horizon)
        return reached

    def cond(state):
        c, o = state
        return ~stopped(c, o) & (c.status == Status.OK) & (c.n_events < max_events)

    def body(state):
        c, o = state
        new = step(
            params, c, jnp.bool_(True), 1, use_delay, False, horizon=horizon, sharing=sharing, use_snapshot=use_snapshot
        )
        return new, (o if observe is None else observe(o, c, new))

    carry, observed = jax.lax.while_loop(cond, body, (carry, observed))
    return carry._replace(status=budget_status(carry.status, stopped(carry, observed))), observed


def advance_to_firing(
    params: Params,
    carry: Carry,
    job: int,
    *,
    max_events,
    use_delay: bool = False,
    observe=None,
    observed: Any = None,  # any pytree
    sharing: Sharing = Sharing(),
    use_snapshot: bool = False,
):
    """`advance_fleet` until job ``job`` fires once more (the return maps' step: job 0's
    next firing is the Poincaré section, docs/model.md §2). Returns ``(carry, observed)``."""
    target = carry.fire_count[job] + 1
    return advance_fleet(
        params,
        carry,
        max_events=max_events,
        stop=lambda c, _: c.fire_count[job] >= target,
        use_delay=use_delay,
        observe=observe,
        observed=observed,
        sharing=sharing,
        use_snapshot=use_snapshot,
    )
