"""Experiments: each turns library calls into the evidence for claims of docs/model.md §3.

Every experiment is a module here with

* ``NAME`` (str) and ``CLAIMS`` (tuple of claim numbers it speaks to), and
* ``run(out_dir, size="quick", progress=True) -> dict`` that writes ``out_dir/NAME.json``
  (numbers) and one or more PNG figures, atomically, and returns the JSON dict.

The dict holds ``"numbers"`` (what was measured), ``"figures"`` (PNG file names) and
``"verdicts"``: a list of `verdict(...)` dicts, one per claim, decided by thresholds
written in the experiment's code (never by hand). Sizes: ``"smoke"`` (seconds, used by the
tests), ``"quick"`` (the whole set in ≤ 10 minutes on a 2-core CPU), ``"full"`` (one GPU).

The thin scripts in the repository's top-level ``experiments/`` call these modules, and
``ckpt-jax reproduce`` runs them all and writes ``report.md``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from .._io import atomic_write_bytes

SIZES = ("smoke", "quick", "full")

REPRODUCED = "reproduced"
NOT_REPRODUCED = "not reproduced"
PARTIALLY = "partially"

# Experiment modules in the order `ckpt-jax reproduce` runs them.
REGISTRY = (
    "spectrum",
    "pairwise_neutrality",
    "invariants",
    "no_clustering",
    "memory",
    "ftle",
    "bursts",
    "jitter",
    "boundary",
)


def identical_fleets(n_jobs: int, loads, launches: int, flat: bool = False):
    """Fleets of N identical jobs with T + d = 1 and d = ρ / N, uncapped, f ≡ 1, float64.

    Args:
      n_jobs: N.
      loads: sequence of loads ρ = N·d / (T + d).
      launches: fleets per load.
      flat: one batch axis (len(loads) · launches,) instead of (len(loads), launches).
    """
    from ..model import Fleet

    write = np.asarray(loads, dtype=np.float64)[:, None] / n_jobs
    write = np.broadcast_to(write, (write.shape[0], launches))[..., None]
    if flat:
        write = write.reshape(-1, 1)
    shape = write.shape[:-1] + (n_jobs,)
    return Fleet(compute=np.broadcast_to(1.0 - write, shape), write=np.broadcast_to(write, shape), dtype=np.float64)


def check_size(size: str) -> str:
    if size not in SIZES:
        raise ValueError(f"size must be one of {SIZES}, got {size!r}")
    return size


def verdict(claim: int, verdict: str, why: str, **measured: Any) -> dict:
    """One claim's verdict: ``verdict`` is REPRODUCED, NOT_REPRODUCED or PARTIALLY,
    ``why`` names the measured numbers and the thresholds that decided it."""
    if verdict not in (REPRODUCED, NOT_REPRODUCED, PARTIALLY):
        raise ValueError(f"verdict must be one of reproduced/not reproduced/partially, got {verdict!r}")
    return {"claim": int(claim), "verdict": verdict, "why": why, "measured": to_jsonable(measured)}


def to_jsonable(value: Any) -> Any:
    """NumPy/JAX scalars and arrays → plain JSON types (NaN/inf become strings)."""
    if isinstance(value, dict):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_jsonable(v) for v in value]
    if hasattr(value, "__array__") and not isinstance(value, (str, bytes)):
        arr = np.asarray(value)
        if arr.ndim == 0:
            return to_jsonable(arr.item())
        return [to_jsonable(v) for v in arr.tolist()]
    if isinstance(value, float) and not np.isfinite(value):
        return repr(value)
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (np.floating,)):
        return to_jsonable(float(value))
    if isinstance(value, np.bool_):
        return bool(value)
    return value


def write_json(path: Path, obj: Any) -> None:
    """Writes JSON atomically (temp file + rename): an interrupted run leaves no half file."""
    atomic_write_bytes(Path(path), json.dumps(to_jsonable(obj), indent=2, sort_keys=False).encode())


def save_figure(fig, path: Path, dpi: int = 120) -> str:
    """Saves a matplotlib figure atomically; returns the file name."""
    import io

    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=dpi, bbox_inches="tight")
    atomic_write_bytes(Path(path), buffer.getvalue())
    return Path(path).name


def new_figure(*args, **kwargs):
    """A matplotlib Figure not attached to pyplot (no GUI backend, no global state)."""
    from matplotlib.figure import Figure

    return Figure(*args, **kwargs)


def finish(out_dir: Path, name: str, size: str, numbers: dict, verdicts: list, figures: list) -> dict:
    """Assembles an experiment's result dict and writes ``out_dir/name.json`` atomically
    (written last, so its presence means the experiment finished: resume relies on it)."""
    result = {
        "name": name,
        "size": size,
        "numbers": to_jsonable(numbers),
        "verdicts": verdicts,
        "figures": list(figures),
    }
    write_json(Path(out_dir) / f"{name}.json", result)
    return result
