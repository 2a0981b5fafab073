"""Running a batch of fleets sharded over several devices.

Fleets are independent, so the batch axis splits across devices with no communication:
each device runs its own event loop (`jax.shard_map` over a 1-D mesh with axis
``"fleets"``) on its block of fleets and stops when its own fleets are done. The batch is
padded to a multiple of the device count with finished-from-the-start fleets (copies of
fleet 0 with every job slot inactive), which are dropped afterwards. Results are
bit-identical to a single device: every fleet computes exactly the same operations.

Multi-host use (`jax.distributed`) is described in ``docs/multihost.md``.
"""

from __future__ import annotations

import functools
from typing import Optional, Sequence, Union

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

__all__ = ["FLEET_AXIS", "resolve_devices", "fleet_sharding", "pad_fleets"]

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
    (`ckpt_jax.engine._init_and_advance` or `ckpt_jax.fast.init_and_advance`): ``part`` is
    a pytree of arrays with a leading fleet axis; each device stops when its own fleets
    are done.
    """
    spec = PartitionSpec(FLEET_AXIS)

    def local(part, event_limit):
        return run(part, event_limit, **static)

    mapped = jax.shard_map(local, mesh=_mesh(devices), in_specs=(spec, PartitionSpec()), out_specs=spec, check_vma=False)
    return jax.jit(mapped)
