"""What every experiment is built from: the `Experiment` object, the float64 scope its run
executes in, verdicts, number formatting and atomic JSON and figure writes.

An experiment is a module of `ckpt_jax.experiments` that defines one `Experiment`
(``EXPERIMENT``): its name, the claims of docs/model.md §3 it speaks to, its size table and
its ``run(out_dir, size="quick", progress=True) -> dict``, which writes ``out_dir/NAME.json``
(numbers) and one or more PNG figures, atomically, and returns the JSON dict.

The dict holds ``"numbers"`` (what was measured), ``"figures"`` (PNG file names) and
``"verdicts"``: a list of `verdict(...)` dicts, one per sub-claim (a claim, or one part of
it such as 8a), decided by thresholds written in the experiment's code (never by hand),
each naming the figures that belong to it. The decision rules shared by experiments
(intervals against stated margins, power) live in `ckpt_jax.experiments.rules`. Sizes:
``"smoke"`` (seconds, used by the tests), ``"quick"`` (the whole set in ≤ 10 minutes on a
2-core CPU), ``"full"`` (one GPU).

Experiments verify in float64: each ``run`` is decorated with `in_float64`, which turns
``jax_enable_x64`` on for the run only and restores the caller's setting after it, so
importing or running an experiment leaves JAX's global configuration as it found it.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from .._io import atomic_write_bytes

SIZES = ("smoke", "quick", "full")

REPRODUCED = "reproduced"
NOT_REPRODUCED = "not reproduced"
PARTIALLY = "partially"
INCONCLUSIVE = "inconclusive"  # the run could not decide: too small or too noisy for its margin
VERDICTS = (REPRODUCED, PARTIALLY, INCONCLUSIVE, NOT_REPRODUCED)


@dataclasses.dataclass(frozen=True, eq=False)
class Experiment:
    """One experiment of ``ckpt-jax reproduce``.

    Attributes:
      name: its name: the ``--only`` choice, ``NAME.json`` and the prefix of its figures.
      title: what it measures, in one line (``experiments/run.py --help``).
      claims: the claim numbers of docs/model.md §3 its verdicts speak to.
      sizes: ``{size: parameters}`` for each of `SIZES`: what a run of that size simulates.
        A result records its entry (`provenance`) and is reused only where it matches.
      run: ``run(out_dir, size="quick", progress=True) -> dict``, in float64 (`in_float64`).
    """

    name: str
    title: str
    claims: tuple[int, ...]
    sizes: Mapping[str, Mapping[str, Any]]
    run: Callable[..., dict]


def in_float64(run: Callable[..., dict]) -> Callable[..., dict]:
    """Decorates an experiment's ``run`` to execute with ``jax_enable_x64`` on (float64 is
    the verification dtype) and to restore the caller's setting when it returns or raises.
    The result is plain JSON values (`finish`), so no float64 array outlives the scope."""

    @functools.wraps(run)
    def scoped(*args, **kwargs) -> dict:
        import jax

        previous = bool(jax.config.read("jax_enable_x64"))
        jax.config.update("jax_enable_x64", True)
        try:
            return run(*args, **kwargs)
        finally:
            jax.config.update("jax_enable_x64", previous)

    return scoped


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


def begin(out_dir, size: str, configs: dict):
    """What every experiment's ``run`` starts with: the checked size and its entry of the
    experiment's size table, the output folder as a `Path`, and the start time
    (``time.perf_counter()``) for the run time it reports.

    Returns ``(out_dir, size, config, started)``."""
    size = check_size(size)
    return Path(out_dir), size, configs[size], time.perf_counter()


def verdict(
    claim: int,
    verdict: str,
    why: str,
    *,
    sub_claim: str | None = None,
    title: str = "",
    headline: str = "",
    rule: str = "",
    thresholds: dict | None = None,
    figures=(),
    table: dict | None = None,
    **measured: Any,
) -> dict:
    """One sub-claim's verdict.

    Args:
      claim: the claim number of docs/model.md §3.
      verdict: one of `VERDICTS`.
      why: prose naming the measured numbers and the thresholds that decided it.
      sub_claim: label of the part of the claim decided here ("8a", "5 memory"); the claim
        number by default.
      title: what the sub-claim states, in a few words (the report's headings).
      headline: the deciding numbers in one short line (the report's summary table).
      rule: the decision rule in words.
      thresholds: ``{CONSTANT_NAME: value}`` of the named constants the rule uses.
      figures: file names of the figures that show this sub-claim (each figure belongs to
        one sub-claim).
      table: ``{"columns": [...], "rows": [[...], ...]}`` of formatted strings, the numbers
        behind the verdict, for the report.
      measured: the numbers behind the verdict (JSON).
    """
    if verdict not in VERDICTS:
        raise ValueError(f"verdict must be one of {VERDICTS}, got {verdict!r}")
    if table is not None and any(len(row) != len(table["columns"]) for row in table["rows"]):
        raise ValueError("every table row needs one cell per column")
    return {
        "claim": int(claim),
        "sub_claim": str(claim) if sub_claim is None else str(sub_claim),
        "verdict": verdict,
        "title": title,
        "headline": headline,
        "why": why,
        "rule": rule,
        "thresholds": to_jsonable(thresholds or {}),
        "figures": list(figures),
        "table": table,
        "measured": to_jsonable(measured),
    }


def fmt(value, digits: int = 3) -> str:
    """A number for prose: ``digits`` significant digits, scientific notation when tiny or huge.

    >>> fmt(0.000123456), fmt(12.5), fmt(3966.5), fmt(3), fmt(float("nan")), fmt(None)
    ('1.23e-04', '12.5', '3,970', '3', 'n/a', 'n/a')
    """
    if value is None or isinstance(value, str):
        return "n/a" if value in (None, "nan") else value
    if isinstance(value, (bool, np.bool_)):
        return "yes" if value else "no"
    if isinstance(value, (int, np.integer)):
        return f"{int(value):,}" if abs(int(value)) >= 10_000 else str(int(value))
    value = float(value)
    if not np.isfinite(value):
        return "n/a" if np.isnan(value) else ("∞" if value > 0 else "−∞")
    if value == 0:
        return "0"
    if abs(value) < 1e-3 or abs(value) >= 1e5:
        return f"{value:.{max(digits - 1, 0)}e}"
    if abs(value) >= 10**digits:  # 3966.5 → 3,970, not 3.97e+03
        return f"{float(f'{value:.{digits}g}'):,.0f}"
    return f"{value:.{digits}g}"


def fmt_list(values, digits: int = 3, unit: str = "") -> str:
    """Values in prose: ``4, 8, 16 and 32`` (no brackets, no quotes)."""
    items = [v if isinstance(v, str) else fmt(v, digits) for v in values]
    items = [f"{item}{unit}" for item in items]
    if len(items) <= 1:
        return "".join(items)
    return ", ".join(items[:-1]) + " and " + items[-1]


def fmt_interval(low, high, digits: int = 3) -> str:
    """``[low, high]`` of a confidence interval, formatted with `fmt`."""
    return f"[{fmt(low, digits)}, {fmt(high, digits)}]"


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


def provenance(experiment: Experiment, size: str) -> dict:
    """What a result is a result of: ``{"version": ckpt_jax.__version__, "parameters": the
    experiment's entry of its size table, as JSON values}``. A stored result is reused only
    where it records the same (`ckpt_jax.reproduce`)."""
    from .. import __version__

    parameters = experiment.sizes[check_size(size)]
    return {"version": __version__, "parameters": json.loads(json.dumps(to_jsonable(parameters)))}


def finish(out_dir: Path, experiment: Experiment, size: str, numbers: dict, verdicts: list, figures: list) -> dict:
    """Assembles an experiment's result dict and writes ``out_dir/NAME.json`` atomically
    (written last, so its presence means the experiment finished: resume relies on it).
    The result records the package version and the experiment's parameters (`provenance`).

    Every figure a verdict names must be one of ``figures``, and no figure may belong to
    two verdicts (the report shows each figure once, under its sub-claim)."""
    name = experiment.name
    owners: dict[str, str] = {}
    for entry in verdicts:
        for figure in entry.get("figures", []):
            if figure not in figures:
                raise ValueError(f"verdict {entry['sub_claim']} names figure {figure!r}, which {name} did not write")
            if figure in owners:
                raise ValueError(f"figure {figure!r} belongs to both {owners[figure]} and {entry['sub_claim']}")
            owners[figure] = entry["sub_claim"]
    result = {
        "name": name,
        "size": size,
        **provenance(experiment, size),
        "numbers": to_jsonable(numbers),
        "verdicts": verdicts,
        "figures": list(figures),
    }
    write_json(Path(out_dir) / f"{name}.json", result)
    return result
