"""The manifest of a saved ensemble (`ckpt_jax.ensemble`): what its chunks are results of,
as canonical JSON values with a fingerprint, and how a saved manifest differs from a run's."""

from __future__ import annotations

import hashlib
import json

import jax
import numpy as np

from ._observe import SaveAt

__all__ = ["FORMAT", "RESULT_OPTIONS", "manifest", "differences", "jsonable", "key_description"]

FORMAT = "ckpt_jax.ensemble/1"
# simulate options that decide the results.
RESULT_OPTIONS = ("max_events", "queue_size", "method")


def manifest(n_fleets, chunk_size, n_fires, jitter, key, options, chunk_config, config, save=None) -> dict:
    """The manifest: what the chunks are results of, as canonical JSON values.

    ``save`` is recorded where it is not the default (the full trace only), so ensembles
    saved before `SaveAt` existed keep their fingerprint and resume."""
    fields = {
        "n_fleets": n_fleets,
        "chunk_size": chunk_size,
        "n_fires": n_fires,
        "jitter": array_description(jitter),
        "key": None if key is None else key_description(key),
        "simulate_options": {name: options[name] for name in RESULT_OPTIONS if name in options},
        "make_chunk": chunk_config,
        "config": config,
    }
    if save is not None:
        fields["save"] = save.flags()
    try:
        fields = jsonable(fields)
    except (TypeError, ValueError) as err:
        raise ValueError(f"config must be JSON-serializable: {err}") from None
    return {"format": FORMAT, **fields, "fingerprint": _fingerprint(fields)}


def _fingerprint(fields: dict) -> str:
    return hashlib.sha256(canonical(fields).encode()).hexdigest()


def check_saved(saved: dict) -> str | None:
    """What is wrong with a manifest read back from disk, in words, or None: its counts must be
    integers >= 1 and its fingerprint the hash of its fields (an edited field changes it)."""
    for name in ("n_fleets", "chunk_size"):
        value = saved.get(name)
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            return f"{name} must be an integer >= 1, got {value!r}"
    fields = {name: value for name, value in saved.items() if name not in ("format", "fingerprint")}
    if saved.get("fingerprint") != _fingerprint(fields):
        return "its fields do not match its fingerprint (edited after the run?)"
    return None


def differences(saved: dict, current: dict) -> list:
    """What differs between a saved manifest and this run's, one line per field."""
    if saved.get("format") != FORMAT:
        return [f"format {saved.get('format')!r} != {FORMAT!r}"]
    # A field left out where it has its default value (``save``) compares as that value.
    defaults = {"save": jsonable(SaveAt().flags())}
    lines = []
    names = list(current) + [name for name in saved if name not in current]
    for name in names:
        value = current.get(name, defaults.get(name))
        old = saved.get(name, defaults.get(name))
        if name in ("format", "fingerprint") or canonical(old) == canonical(value):
            continue
        if isinstance(old, dict) and isinstance(value, dict):
            for item in sorted(set(old) | set(value)):
                if canonical(old.get(item)) != canonical(value.get(item)):
                    lines.append(f"{name}[{item!r}]: saved {short(old.get(item))}, now {short(value.get(item))}")
        else:
            lines.append(f"{name}: saved {short(old)}, now {short(value)}")
    if not lines and saved.get("fingerprint") != current["fingerprint"]:
        lines.append("fingerprint differs")
    return lines


def jsonable(value):
    """``value`` as plain JSON values (arrays become lists), as it reads back from a file."""
    return json.loads(canonical(value))


def canonical(value) -> str:
    return json.dumps(value, sort_keys=True, default=json_default)


def json_default(value):
    if isinstance(value, (np.ndarray, jax.Array)):
        return np.asarray(value).tolist()
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"{type(value).__name__} is not JSON-serializable")


def short(value) -> str:
    text = canonical(value)
    return text if len(text) <= 60 else text[:57] + "..."


def array_description(value):
    """Small arrays as JSON values, large ones by their SHA-256 (enough to tell them apart)."""
    if value is None:
        return None
    value = np.asarray(value)
    if value.size <= 16:
        return value.tolist()
    return {
        "shape": list(value.shape),
        "dtype": str(value.dtype),
        "sha256": hashlib.sha256(value.tobytes()).hexdigest(),
    }


def key_description(key):
    return {"impl": str(jax.random.key_impl(key)), "data": array_description(jax.random.key_data(key))}
