"""Running a batch of fleets sharded over several devices.

Fleets are independent, so the batch axis splits across devices with no communication:
each device runs its own event loop (`jax.shard_map` over a 1-D mesh with axis
``"fleets"``) on its block of fleets and stops when its own fleets are done. The batch is
padded to a multiple of the device count with finished-from-the-start fleets (copies of
fleet 0 with every job slot inactive), which are dropped afterwards. Results are
bit-identical to a single device: every fleet computes exactly the same operations.

On a CPU the two fast loops also run a big batch in cache-sized blocks of fleets, one
after another (`block_size`; the driver, `ckpt_jax._loops.driver`, runs them).

`default_devices` sets, for a block of code, the devices that `ckpt_jax.simulate` shards
over when its call names none (``devices=None``): the ``ckpt-jax`` program runs ``assess``,
``design`` and ``compare`` in it, over one XLA host device per core, so that the runs those
functions make inside use every core.
Multi-host use (`jax.distributed`) is described in ``docs/multihost.md``.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from . import _observe
from ._params import Params

__all__ = [
    "FLEET_AXIS",
    "MIN_FLEETS_PER_DEVICE",
    "resolve_devices",
    "default_devices",
    "devices_for_batch",
    "fleet_sharding",
    "pad_fleets",
    "pad_inert",
    "block_size",
    "sharded",
]

FLEET_AXIS = "fleets"

# Under `default_devices`, a batch is split only with at least this many fleets per device
# (the CLI's rule for --devices as well).
MIN_FLEETS_PER_DEVICE = 2

Devices = None | str | int | Sequence[jax.Device]

_DEFAULT_DEVICES: contextvars.ContextVar = contextvars.ContextVar("ckpt_jax_default_devices", default=None)


@contextlib.contextmanager
def default_devices(devices: Devices):
    """Within the ``with`` block, `ckpt_jax.simulate` calls that name no ``devices`` shard
    their batch over ``devices`` (as `resolve_devices` reads them; None: one device), using
    at most one device per `MIN_FLEETS_PER_DEVICE` fleets: a batch of fewer than
    2 × `MIN_FLEETS_PER_DEVICE` fleets runs on one device. Results do not change (every fleet
    computes the same operations on any device), so functions that call `simulate` inside
    (`ckpt_jax.assess.assess`, `ckpt_jax.design`) run on every device without an argument of
    their own::

        # XLA_FLAGS=--xla_force_host_platform_device_count=2, set before JAX starts
        with ckpt_jax.sharding.default_devices("all"):
            report = ckpt_jax.assess.assess(...)

    A call's own ``devices`` argument wins. Nested blocks: the innermost applies."""
    if devices is not None:
        resolve_devices(devices)  # a bad value fails here, not at the first simulate call
    token = _DEFAULT_DEVICES.set(devices)
    try:
        yield
    finally:
        _DEFAULT_DEVICES.reset(token)


def devices_for_batch(devices: Devices, n_fleets: int) -> tuple | None:
    """The devices a `simulate` call of ``n_fleets`` fleets shards over: its own ``devices``
    (`resolve_devices`), or where it names none the `default_devices` in force, at most one
    per `MIN_FLEETS_PER_DEVICE` fleets (None: one device)."""
    if devices is not None:
        return resolve_devices(devices)
    default = _DEFAULT_DEVICES.get()
    if default is None:
        return None
    resolved = resolve_devices(default)
    assert resolved is not None
    used = min(len(resolved), n_fleets // MIN_FLEETS_PER_DEVICE)
    return resolved[:used] if used > 1 else None


def resolve_devices(devices: Devices) -> tuple | None:
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
        if isinstance(devices, bool):  # not a count of devices, and not iterable either
            raise TypeError
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
def sharded(run, config, devices: tuple, compiler_options: tuple = ()):
    """``run(config, part, event_limit)`` per device block, jitted.

    ``run`` starts and runs a batched event loop on its block of fleets
    (`ckpt_jax._loops.driver.run_part`): ``part`` is a pytree of arrays with a leading
    fleet axis; each device stops when its own fleets are done. ``config`` (a
    `ckpt_jax._loops.config.RunConfig`) is static; ``compiler_options``: XLA options of
    the program, as ``(name, value)`` pairs (hashable, for the cache).
    """
    spec = PartitionSpec(FLEET_AXIS)

    def local(part, event_limit):
        return run(config, part, event_limit)

    mapped = jax.shard_map(
        local, mesh=_mesh(devices), in_specs=(spec, PartitionSpec()), out_specs=spec, check_vma=False
    )
    return jax.jit(mapped, compiler_options=dict(compiler_options) or None)


def pad_inert(params, phase, remaining, horizon, multiple: int):
    """Pads flattened fleets (leading axis B) to a multiple of ``multiple`` with inert
    fleets: copies of fleet 0 with no active job and a horizon of 0, done before their
    first step. Returns ``(params, phase, remaining, horizon)``."""
    n_fleets = params.compute.shape[0]
    tree, n_pad = pad_fleets((params, phase, remaining, horizon), n_fleets, multiple)
    if n_pad:
        params, phase, remaining, horizon = tree
        tree = (
            params._replace(active=params.active.at[n_fleets:].set(False)),
            phase,
            remaining,
            horizon.at[n_fleets:].set(0),
        )
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


def block_size(params: Params, config) -> int:
    """Fleets per CPU block of a virtual-clock loop: as many as keep the loop state (per-job
    rows, the trace and the observers' state) within `CPU_BLOCK_BYTES`, at most
    `CPU_MAX_BLOCK` of the path; all fleets on other platforms. ``config``: the run's
    `ckpt_jax._loops.config.RunConfig`."""
    n_fleets, n_jobs = params.compute.shape
    platforms = {device.platform for device in params.compute.devices()}
    if platforms != {"cpu"}:
        return n_fleets
    itemsize = params.compute.dtype.itemsize
    per_fleet = n_jobs * (2 * config.trace_len + 5) * itemsize + _observe.state_bytes(
        config.save, n_jobs, config.gap_fires, itemsize
    )
    return min(n_fleets, CPU_MAX_BLOCK[config.path], max(CPU_MIN_BLOCK, CPU_BLOCK_BYTES // per_fleet))
