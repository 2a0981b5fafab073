"""The manifest of a saved ensemble (`ckpt_jax.ensemble`): what its chunks are results of,
as canonical JSON values with a fingerprint, how a saved manifest differs from a run's, and
the content hash of each chunk saved (`HASHES`, `content_hash`)."""

from __future__ import annotations

import hashlib
import json

import jax
import numpy as np

from ._observe import SaveAt

__all__ = [
    "FORMAT",
    "HASHES",
    "RESULT_OPTIONS",
    "manifest",
    "differences",
    "jsonable",
    "key_description",
    "content_hash",
    "recorded_hashes",
]

FORMAT = "ckpt_jax.ensemble/1"
# simulate options that decide the results.
RESULT_OPTIONS = ("max_events", "queue_size", "method")
# The manifest's record of each chunk file's content (`content_hash`), by chunk index, None
# where no chunk is saved yet. It grows as the chunks are saved, so it is no part of the
# fingerprint (what the chunks are results of); manifests saved before it lack it.
HASHES = "chunk_sha256"
_NOT_FIELDS = ("format", "fingerprint", HASHES)


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
    fields = {name: value for name, value in saved.items() if name not in _NOT_FIELDS}
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
        if name in _NOT_FIELDS or canonical(old) == canonical(value):
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


def content_hash(arrays: dict) -> str:
    """The SHA-256 of a chunk file's content: every array (name, dtype, shape and bytes),
    in name order. Any number edited, an array added, removed, renamed or retyped changes it;
    the file's zip metadata (times, compression) does not enter it."""
    digest = hashlib.sha256()
    for name in sorted(arrays):
        value = np.ascontiguousarray(arrays[name])
        digest.update(json.dumps([name, value.dtype.str, list(value.shape)]).encode())
        digest.update(value.tobytes())
    return digest.hexdigest()


def recorded_hashes(saved: dict, n_chunks: int) -> list | None:
    """The content hashes a saved manifest records, one per chunk (None where that chunk is
    not recorded), or None where it records none (saved before chunk hashes existed).

    Raises:
      ValueError: the record is not a list of ``n_chunks`` hexadecimal SHA-256 strings or nulls.
    """
    if HASHES not in saved:
        return None
    hashes = saved[HASHES]
    if not isinstance(hashes, list) or len(hashes) != n_chunks:
        raise ValueError(f"{HASHES} must be a list of {n_chunks} chunk hashes, got {short(hashes)}")
    for value in hashes:
        if value is not None and not (
            isinstance(value, str) and len(value) == 64 and all(c in "0123456789abcdef" for c in value)
        ):
            raise ValueError(f"{HASHES} must hold SHA-256 hex digests or null, got {short(value)}")
    return list(hashes)
