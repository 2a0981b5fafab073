"""Running a batch of fleets sharded over several devices.

Fleets are independent, so the batch axis splits across devices with no communication:
each device runs its own event loop (`jax.shard_map` over a 1-D mesh with axis
``"fleets"``) on its block of fleets and stops when its own fleets are done. The batch is
padded to a multiple of the device count with finished-from-the-start fleets (copies of
fleet 0 with every job slot inactive), which are dropped afterwards. Results are
bit-identical to a single device: every fleet computes exactly the same operations.

On a CPU the two fast loops also run a big batch in cache-sized blocks of fleets, one
after another (`run_blocks`). Multi-host use (`jax.distributed`) is described in
``docs/multihost.md``.
"""

from __future__ import annotations

import functools
from typing import Optional, Sequence, Union

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from . import _observe, _progress
from ._loops import virtual
from ._observe import SaveAt

__all__ = ["FLEET_AXIS", "resolve_devices", "fleet_sharding", "pad_fleets", "pad_inert", "run_blocks", "sharded_loop"]

FLEET_AXIS = "fleets"

Devices = Union[None, str, int, Sequence[jax.Device]]


def resolve_devices(devices: Devices) -> Optional[tuple]:
    """The devices to shard over, or None for the default single-device run.

    Args:
      devices: None (one device, no sharding); ``"all"`` (every device of this process,
        `jax.local_devices`); an int n (the first n local devices); or a sequence of devices.
    """
    if devices is None:
        return None
    if isinstance(devices, str):
        if devices != "all":
            raise ValueError(f"devices must be None, 'all', an int or a sequence of devices, got {devices!r}")
        return tuple(jax.local_devices())
    if isinstance(devices, (int, np.integer)) and not isinstance(devices, bool):
        available = jax.local_devices()
        if not 1 <= devices <= len(available):
            raise ValueError(f"devices={devices} but this process has {len(available)} devices")
        return tuple(available[: int(devices)])
    try:
        devices = tuple(devices)
    except TypeError:
        raise ValueError(f"devices must be None, 'all', an int or a sequence of devices, got {devices!r}") from None
    if not devices or not all(isinstance(d, jax.Device) for d in devices):
        raise ValueError(f"devices must be a non-empty sequence of jax.Device, got {devices!r}")
    if len(set(devices)) != len(devices):
        raise ValueError("devices must not repeat a device")
    return devices


def _mesh(devices: tuple) -> Mesh:
    return Mesh(np.asarray(devices, dtype=object), (FLEET_AXIS,))


def fleet_sharding(devices: tuple) -> NamedSharding:
    """Leading (batch) axis split over ``devices``, trailing axes whole."""
    return NamedSharding(_mesh(devices), PartitionSpec(FLEET_AXIS))


def pad_fleets(tree, n_fleets: int, n_devices: int):
    """Pads every leaf's leading axis to a multiple of ``n_devices`` with copies of row 0.

    Returns (padded tree, number of padding rows). The caller makes the padding inert.
    """
    n_pad = (-n_fleets) % n_devices
    if n_pad == 0:
        return tree, 0

    def pad(x):
        return jnp.concatenate([x, jnp.repeat(x[:1], n_pad, axis=0)], axis=0)

    return jax.tree_util.tree_map(pad, tree), n_pad


def place(tree, devices: tuple):
    """Puts every leaf of ``tree`` (leading axis divisible by the device count) on the mesh."""
    return jax.device_put(tree, fleet_sharding(devices))


def unpad(tree, n_fleets: int):
    return jax.tree_util.tree_map(lambda x: x[:n_fleets], tree)


@functools.lru_cache(maxsize=64)


def sharded_loop(run, devices: tuple, **static):
    """``run(part, event_limit, **static)`` per device block, jitted.

    ``run`` initialises and runs a batched event loop on its block of fleets
    (`ckpt_jax._loops.general.init_and_advance` or `ckpt_jax._loops.virtual.init_and_advance`): ``part`` is
    a pytree of arrays with a leading fleet axis; each device stops when its own fleets
    are done.
    """
    spec = PartitionSpec(FLEET_AXIS)

    def local(part, event_limit):
        return run(part, event_limit, **static)

    mapped = jax.shard_map(local, mesh=_mesh(devices), in_specs=(spec, PartitionSpec()), out_specs=spec, check_vma=False)
    return jax.jit(mapped)


def pad_inert(params, phase, remaining, multiple: int, horizon=None):
    """Pads flattened fleets (leading axis B) to a multiple of ``multiple`` with inert
    fleets: copies of fleet 0 with no active job, done before their first step (with a
    horizon: a horizon of 0, so they are done at t = 0 too)."""
    n_fleets = params.compute.shape[0]
    tree = (params, phase, remaining) if horizon is None else (params, phase, remaining, horizon)
    tree, n_pad = pad_fleets(tree, n_fleets, multiple)
    if n_pad:
        tree = (tree[0]._replace(active=tree[0].active.at[n_fleets:].set(False)),) + tuple(tree[1:])
        if horizon is not None:
            tree = tree[:3] + (tree[3].at[n_fleets:].set(0),)
    return tree


# On a CPU the fast paths run a big batch in blocks of fleets, one after another, sized so
# that a block's trace and slots (N (2K + 4) floats per fleet) fill about this many bytes
# and stay in the last-level cache, but never below CPU_MIN_BLOCK fleets (each loop
# iteration's fixed cost is then amortised). B = 1e4, N = 32, K = 11 on 2 cores: blocks of
# 2,500 run 15-18% faster (FIFO) and 8-10% faster (clock) than the whole batch at once,
# blocks of 1,000 no faster. Accelerators run the whole batch at once.
CPU_BLOCK_BYTES = 16 * 2**20

CPU_MIN_BLOCK = 1024

# ... and never above CPU_MAX_BLOCK[path] fleets, whatever the state's size: a block's loop
# runs until its slowest fleet is done, so smaller blocks idle fewer finished lanes, and its
# per-job rows stay in the cores' own caches. B = 1e4, N = 32 on 2 cores (paired rounds,
# 2026-12-01): on the clock path, blocks of 1,024 ran 1.06x (trace) and 1.15x (all three
# observers) faster than blocks of 2,048 at K = 11, and 1.10x (observers) at K = 200; the
# FIFO path's O(1) switch gains nothing from them (blocks of 2,048: 1.07x the trace's, 1.2x
# the observers' events/s of blocks of 1,024).
CPU_MAX_BLOCK = {"fifo": 2048, "clock": 1024}


def block_size(params: Params, trace_len: int, save: SaveAt = SaveAt(), gap_fires=None, clock: bool = False) -> int:
    """Fleets per CPU block: as many as keep the loop state (per-job rows, the trace and
    the observers' state) within `CPU_BLOCK_BYTES`, at most `CPU_MAX_BLOCK` of the path
    (``clock``: the clock path, else FIFO); all fleets on other platforms."""
    n_fleets, n_jobs = params.compute.shape
    platforms = {device.platform for device in params.compute.devices()}
    if platforms != {"cpu"}:
        return n_fleets
    itemsize = params.compute.dtype.itemsize
    per_fleet = n_jobs * (2 * trace_len + 5) * itemsize + _observe.state_bytes(save, n_jobs, gap_fires, itemsize)
    largest = CPU_MAX_BLOCK["clock" if clock else "fifo"]
    return min(n_fleets, largest, max(CPU_MIN_BLOCK, CPU_BLOCK_BYTES // per_fleet))


def advance_blocks(params: Params, phase, remaining, horizon, event_limit, *, n_blocks: int, **static) -> LoopResult:
    """`init_and_advance` over ``n_blocks`` equal blocks of fleets, one after another
    (`jax.lax.map`), in one compiled program."""

    def run(part):
        return virtual.init_and_advance(part, event_limit, **static)

    # Explicit sizes, not -1: a trace of length K = 0 has zero-size arrays.
    blocks = jax.tree_util.tree_map(
        lambda x: x.reshape((n_blocks, x.shape[0] // n_blocks) + x.shape[1:]), (params, phase, remaining, horizon)
    )
    result = jax.lax.map(run, blocks)
    return jax.tree_util.tree_map(lambda x: x.reshape((x.shape[0] * x.shape[1],) + x.shape[2:]), result)

advance_blocks_jit = jax.jit(advance_blocks, static_argnames=("n_blocks",) + virtual.STATIC)


def run_blocks(params: Params, phase, remaining, horizon, event_limit, *, progress=None, expected_events=None,
               **static) -> LoopResult:
    """Runs flattened fleets (leading axis B) on the FIFO or clock path on one device, in
    blocks of fleets (`block_size`: on a CPU) so each block's state stays in cache.

    The batch is padded with inert fleets (copies of fleet 0 with no active job) to whole
    blocks. Without a progress bar all blocks run in one compiled program; with one, one
    call per group of blocks, so the bar moves. ``expected_events``: with ``until``, about
    how many events the busiest fleet steps (`ckpt_jax._validate.horizon_events`), which
    decides whether a bar is shown. Returns the `LoopResult` of all fleets.
    """
    n_fleets = params.compute.shape[0]
    block = block_size(params, static["trace_len"], static["save"], static["gap_fires"], static["clock"])
    n_blocks = -(-n_fleets // block)
    block = -(-n_fleets // n_blocks)  # equal blocks: pad by fewer than n_blocks inert fleets
    params, phase, remaining, horizon = pad_inert(params, phase, remaining, block, horizon)
    if progress is None:
        # Firings: N per cycle, or about half the events to a horizon.
        firings = expected_events / 2 if static["until"] else params.compute.shape[1] * static["n_fires"]
        progress = n_blocks > 1 and n_fleets * firings >= 10 * _progress.LONG_RUN
    if not progress:
        result = advance_blocks_jit(params, phase, remaining, horizon, event_limit, n_blocks=n_blocks, **static)
        return jax.tree_util.tree_map(lambda x: x[:n_fleets], result)
    # About 20 updates: each call runs a group of blocks (one compile for every full group).
    per_call = max(1, n_blocks // 20)
    pieces = []
    with _progress.progress_bar(total=n_fleets, desc=f"ckpt_jax.simulate ({'clock' if static['clock'] else 'fifo'})", unit="fleet") as bar:
        for first in range(0, n_blocks, per_call):
            count = min(per_call, n_blocks - first)
            part = jax.tree_util.tree_map(
                lambda x: x[first * block : (first + count) * block],  # noqa: B023
                (params, phase, remaining, horizon),
            )
            # Waits for the group (dispatch is asynchronous), so the bar shows work done.
            pieces.append(jax.block_until_ready(advance_blocks_jit(*part, event_limit, n_blocks=count, **static)))
            bar.update(min(n_fleets, (first + count) * block) - bar.n)
    return jax.tree_util.tree_map(lambda *leaves: jnp.concatenate(leaves)[:n_fleets], *pieces)
