"""Host-side argument checks shared by every entry point: dtypes, numbers, ranges, keys,
memory, methods, horizons, jitter and listed failure times. The budgets of a run (its
events, time bound and trace memory) are part of its plan, `ckpt_jax._plan`.

Everything here runs on concrete values *before* any tracing, and every failure is a
`ValueError` that names the argument and says what is allowed.

The numeric range. The engine's exactness arguments (docs/model.md, "Exactness") need
every work, volume and rate to be a normal float with full precision, and the virtual
clocks' double-words need ``eps · value`` normal too: values below
``tiny / eps² · 2¹⁰`` (about 4.6e-274 in float64, 8.5e-22 in float32) are refused. At
the top, a run's times must stay finite: values above ``max · 2⁻⁶⁴`` (about 9.7e288 in
float64, 1.8e19 in float32) are refused, and `simulate` also refuses runs whose time
bound (`ckpt_jax._plan.time_bound`) would overflow.
"""

from __future__ import annotations

import os

import jax
import jax.numpy as jnp
import numpy as np

__all__ = [
    "DTYPES",
    "check_key_given",
    "check_dtype",
    "real_array",
    "value_range",
    "check_range",
    "check_int",
    "check_key",
    "check_fleet_offset",
    "available_bytes",
    "check_memory",
    "MAX_FIRES",
    "MAX_EVENTS",
    "METHODS",
    "check_method",
    "check_horizon",
    "check_jitter",
]

DTYPES = (np.dtype(np.float32), np.dtype(np.float64))


def check_dtype(dtype) -> np.dtype:
    """``dtype`` as a NumPy dtype if it is float32 or float64, else `ValueError`."""
    try:
        resolved = np.dtype(dtype)
    except TypeError:
        raise ValueError(f"dtype must be float32 or float64, got {dtype!r}") from None
    if resolved not in DTYPES:
        raise ValueError(f"dtype must be float32 or float64, got {resolved}")
    return resolved


def real_array(name: str, value) -> np.ndarray:
    """``value`` as a float64 NumPy array; `ValueError` naming ``name`` for anything that
    is not real numbers (strings, None, objects, complex numbers)."""
    try:
        arr = np.asarray(value)
    except (TypeError, ValueError) as err:
        raise ValueError(f"{name} must be an array of real numbers: {err}") from None
    if np.iscomplexobj(arr):
        raise ValueError(f"{name} must be real, got complex values")
    if arr.dtype == object or not (np.issubdtype(arr.dtype, np.number) or arr.dtype == bool):
        try:
            arr = arr.astype(np.float64)
        except (TypeError, ValueError):
            raise ValueError(f"{name} must be an array of real numbers, got {short_repr(value)}") from None
    return arr.astype(np.float64)


def short_repr(value) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def value_range(dtype) -> tuple[float, float]:
    """(low, high): the magnitudes a work, volume, cap or throughput may take in ``dtype``."""
    info = np.finfo(dtype)
    low = float(info.tiny) / float(info.eps) ** 2 * 2.0**10
    high = float(info.max) * 2.0**-64
    return low, high


def check_range(name: str, values: np.ndarray, dtype, mask=None) -> None:
    """Refuses values (where ``mask``) outside `value_range` after the cast to ``dtype``."""
    low, high = value_range(dtype)
    with np.errstate(over="ignore", under="ignore"):  # out-of-range casts are what we report
        cast = np.asarray(values, dtype=np.float64).astype(dtype).astype(np.float64)
    bad = ~((cast >= low) & (cast <= high))
    if mask is not None:
        bad &= mask
    if bad.any():
        index = tuple(int(i) for i in np.argwhere(bad)[0])
        original = float(np.asarray(values, np.float64)[index])
        raise ValueError(
            f"{name} must lie in [{low:.3g}, {high:.3g}] in {np.dtype(dtype)} (the range where the "
            f"engine's snapping and rounding arguments hold); got {original:.6g}"
            + (f" at index {index}" if index else "")
            + (f" (it becomes {cast[index]:.6g} in {np.dtype(dtype)})" if cast[index] != original else "")
            + ("; use float64" if np.dtype(dtype) == np.float32 else "; rescale the time unit")
        )


def check_int(name: str, value, low: int, high: int | None = None) -> int:
    """``value`` as an int in [low, high]; `ValueError` naming ``name`` otherwise."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise ValueError(f"{name} must be an integer >= {low}, got {short_repr(value)}")
    if value < low or (high is not None and value > high):
        bound = f">= {low}" if high is None else f"in [{low}, {high}]"
        raise ValueError(f"{name} must be {bound}, got {int(value)}")
    return int(value)


def check_key(key, batch_shape: tuple = (), name: str = "key") -> jax.Array:
    """A typed PRNG key array, from what `jax.random` accepts as keys: a typed key
    (`jax.random.key`) or raw uint32 key data (`jax.random.PRNGKey`), of shape () or the
    batch shape (raw data: with the implementation's trailing key shape).

    Returns the typed key array (shape () or ``batch_shape``).
    """
    if isinstance(key, (int, np.integer, float, str, bytes)) or key is None:
        raise ValueError(f"{name} must be a JAX PRNG key (e.g. jax.random.key(0)), got {short_repr(key)}")
    try:
        dtype = key.dtype
    except AttributeError:
        raise ValueError(f"{name} must be a JAX PRNG key (e.g. jax.random.key(0)), got {type(key).__name__}") from None
    if jnp.issubdtype(dtype, jax.dtypes.prng_key):
        typed = key
    else:
        if np.dtype(dtype) != np.uint32:
            raise ValueError(
                f"{name} must be a typed PRNG key (jax.random.key) or raw uint32 key data "
                f"(jax.random.PRNGKey), got an array of dtype {dtype}"
            )
        impl_shape = jax.random.key_data(jax.random.key(0)).shape
        shape = tuple(np.shape(key))
        if shape[len(shape) - len(impl_shape) :] != impl_shape:
            raise ValueError(
                f"raw {name} data must have a trailing shape {impl_shape} (jax.random.PRNGKey), got shape {shape}"
            )
        typed = jax.random.wrap_key_data(jnp.asarray(key, jnp.uint32))
    if typed.shape not in ((), tuple(batch_shape)):
        raise ValueError(
            f"{name} must be a single PRNG key or one per fleet (batch shape {tuple(batch_shape)}), got {typed.shape}"
        )
    return typed


def check_fleet_offset(fleet_offset, n_fleets: int) -> int:
    """Fleet offsets are folded into keys as uint32: 0 <= offset and offset + B <= 2³²."""
    return check_int("fleet_offset", fleet_offset, 0, 2**32 - max(1, n_fleets))


def available_bytes(devices=None) -> int | None:
    """Memory a run may use: the accelerator's limit, or the host's available memory."""
    device = devices[0] if devices else jax.devices()[0]
    if device.platform != "cpu":
        try:
            stats = device.memory_stats() or {}
        except Exception:  # noqa: BLE001 - not every backend reports memory
            stats = {}
        limit = stats.get("bytes_limit")
        if limit:
            per_device = int(limit) - int(stats.get("bytes_in_use", 0))
            return per_device * (len(devices) if devices else 1)
    try:
        with open("/proc/meminfo") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def check_memory(what: str, n_bytes: float, devices=None, hint: str = "") -> None:
    """Refuses (before allocating) a run whose buffers need more than the memory available."""
    limit = available_bytes(devices)
    if limit is None or n_bytes <= limit:
        return
    raise ValueError(
        f"{what} would need about {_bytes(n_bytes)}, more than the {_bytes(limit)} available"
        + (f"; {hint}" if hint else "")
    )


def _bytes(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB", "TB", "PB", "EB"):
        if n < 1000 or unit == "EB":
            return f"{n:.3g} {unit}"
        n /= 1000
    return f"{n:.3g} EB"


def check_key_given(key, jittered: bool, drawn_failures: bool) -> None:
    """A run that draws random numbers (jitter > 0, failures drawn from ``mtbf``, outages) needs
    an explicit ``key``, as `jax.random` does: a silent default key would give every such
    run the same draws."""
    if key is None and (jittered or drawn_failures):
        reason = "jitter > 0" if jittered else "failures drawn from Fleet(mtbf=...) or outages from outage_mtbf"
        raise ValueError(
            f"key is needed: this run draws random numbers ({reason}); pass key=jax.random.key(seed) "
            "(one key, or one per fleet of the batch shape)"
        )


MAX_FIRES = 2**30

MAX_EVENTS = 2**31 - 1  # event counters are int32: no event budget is larger

METHODS = ("auto", "general", "fifo", "clock")


def check_method(method) -> str:
    """``method`` if it is one of `METHODS`, else `ValueError`."""
    if method not in METHODS:
        raise ValueError(f"method must be one of {', '.join(map(repr, METHODS))}, got {method!r}")
    return method


def broadcast_to(name: str, arr, shape: tuple, *, per_job: bool = False) -> np.ndarray:
    """``arr`` broadcast to ``shape``, the batch shape (*B,) or with ``per_job`` the fleet
    shape (*B, N); a `ValueError` naming ``name`` and the shape where it does not broadcast."""
    try:
        return np.broadcast_to(arr, shape)
    except ValueError:
        to = "broadcast to the fleet shape" if per_job else "have the batch shape"
        raise ValueError(f"{name} must be a scalar or {to} {shape}, got shape {np.shape(arr)}") from None


def check_horizon(until, batch_shape, dtype, name: str = "until") -> np.ndarray:
    """``until`` as a float64 array of the batch shape: finite and > 0 in the dtype used."""
    horizon = broadcast_to(name, real_array(name, until), batch_shape)
    low, high = value_range(dtype)
    bad = ~(np.isfinite(horizon) & (horizon > 0) & (horizon <= high))
    with np.errstate(over="ignore"):
        vanishes = np.any(horizon.astype(dtype) == 0)
    if bad.any() or vanishes:
        raise ValueError(f"{name} must be finite and in (0, {high:.3g}] in {np.dtype(dtype)}, got {until!r}")
    return horizon


def check_jitter(jitter, batch_shape, dtype) -> np.ndarray:
    """σ as a float64 array of the batch shape: finite, >= 0, and > 0 also after the cast
    to the fleet's dtype wherever it is > 0."""
    sigma = broadcast_to(
        "jitter", np.zeros(batch_shape) if jitter is None else real_array("jitter", jitter), batch_shape
    )
    if not (np.isfinite(sigma) & (sigma >= 0)).all():
        raise ValueError(
            f"jitter must be finite and >= 0, got {float(sigma[~(np.isfinite(sigma) & (sigma >= 0))].ravel()[0])}"
        )
    low, high = value_range(dtype)
    positive = sigma > 0
    if np.any(positive & ((sigma.astype(dtype) == 0) | (sigma > high))):
        raise ValueError(f"jitter must be 0 or lie in [{low:.3g}, {high:.3g}] in {np.dtype(dtype)}")
    return sigma


# -- budgets: the events, time and memory a run may take, sized and refused before it starts
