"""``ckpt-jax ensemble``: a long ensemble of random launches in resumable chunks."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ._common import (
    SEED_KEY_TEXT,
    CliError,
    add_devices,
    add_fleet_options,
    add_x64,
    check_period,
    devices_for,
    fleet_keywords,
    integer,
    plain,
    plain_text,
    policy_parameters,
    real,
    report_devices,
    seed_key,
)
from ._options import add_force, add_no_progress, add_out, add_seed

if TYPE_CHECKING:
    from .. import SaveAt
    from ..ensemble import EnsembleResult


def add_ensemble(subparsers) -> None:
    parser = subparsers.add_parser(
        "ensemble",
        help="run a long ensemble of random launches in chunks (resumable)",
        description=(
            "Simulate B fleets of N identical jobs from independent random launches, C fleets "
            "at a time. Each chunk is saved atomically into --out (chunk-*.npz: per fleet, the "
            "statistics --save names, accumulated during the run without storing the trace, and "
            "events and end time), so an interrupted run resumes from the last chunk saved; "
            "summary.json is written at the end (a run that starts over removes the old one first), "
            "and records the manifest's fingerprint. One run per DIR at a time: a second is refused. "
            "A complete run also writes ensemble.zarr, the same Dataset as a zarr group that "
            "xarray.open_zarr opens without ckpt_jax (needs xarray and zarr: "
            'pip install "ckpt_jax[xarray]"; skipped without them). In a notebook, '
            "ckpt_jax.open_ensemble(DIR) opens DIR as an xarray Dataset."
        ),
    )
    parser.add_argument(
        "--fleets",
        type=integer(1),
        required=True,
        metavar="B",
        help="ensemble size, independent random launches (required)",
    )
    add_fleet_options(parser, ensemble=True)
    parser.add_argument(
        "--load",
        type=real(positive=True),
        default=None,
        metavar="RHO",
        help="load N d / (T + d) with T + d = 1, instead of --compute/--write "
        "(default: none, i.e. T = 10 and d = 1 unless given)",
    )
    parser.add_argument(
        "--fires",
        "--cycles",
        dest="fires",
        type=integer(1),
        default=50,
        metavar="K",
        help="firings (checkpoints) recorded per job (default: %(default)s)",
    )
    parser.add_argument(
        "--chunk-size",
        type=integer(1),
        default=1000,
        metavar="C",
        help="fleets per chunk, one saved file each (default: %(default)s)",
    )
    parser.add_argument(
        "--save",
        type=_save_list,
        default=("gaps",),
        metavar="LIST",
        help="what each chunk keeps per fleet, comma-separated: writers (time at each "
        "writer count, excursions, largest count), gaps (smallest phase gap per cycle), "
        "jobs (time writing and computing, writes, per job), all recorded without the "
        "trace; order: gaps with an exact firing-order flag (two jobs swapping "
        "included), from each chunk's trace, held in memory, N x K per fleet "
        "(default: gaps)",
    )
    parser.add_argument("--restart", action="store_true", help="discard the chunks saved in DIR and start over")
    add_seed(parser)
    add_no_progress(parser)
    add_force(parser)
    add_devices(parser)
    add_x64(parser)
    add_out(parser)  # the chunks, manifest.json, ensemble.zarr and summary.json
    parser.set_defaults(run=_ensemble, check=_durations, resumes=True)


# -- ensemble ---------------------------------------------------------------------------
SUMMARY = "summary.json"
# The dataset of ckpt_jax.open_ensemble(DIR) as a zarr group: a derived copy of the chunks.
ZARR = "ensemble.zarr"

# Option names of the ensemble's parameters, for messages ("chunk-size: 1000 saved, 500 now").
_ENSEMBLE_OPTIONS = {
    "fleets": "fleets",
    "jobs": "jobs",
    "fires": "fires",
    "chunk_size": "chunk-size",
    "load": "load",
    "compute": "compute",
    "write": "write",
    "cap": "cap",
    "throughput": "throughput",
    "jitter": "jitter",
    "delay": "delay",
    "size": "size",
    "power_policy": "power-policy",
    "storage_policy": "storage-policy",
    "async_fraction": "async-fraction",
    "seed": "seed",
    "x64": "x64",
    "save": "save",
}

# What an entry recorded only where it is not the default (`policy_parameters`) means when absent.
_DEFAULTS = {"size": 1, "power_policy": "maxmin", "storage_policy": "fair"}

# --save: what a chunk can keep, in this order, and the arrays each adds to a chunk file
# (besides n_events, time, ok and status). writers, gaps and jobs are observers
# (`ckpt_jax.SaveAt` fields, O(N + K) per fleet); order derives the gaps and an exact
# firing-order flag from each chunk's trace, held in memory (O(N K) per fleet), not saved.
_SAVE_NAMES = ("writers", "gaps", "jobs", "order")

_SAVE_ARRAYS = {
    "writers": ["writers_time", "writers_window", "writers_excursions", "writers_max"],
    "gaps": ["smallest_gap", "order_changed"],
    "jobs": ["jobs_write_time", "jobs_compute_time", "jobs_writes"],
    "order": [],
}


def _save_list(text: str) -> tuple:
    """``--save``: comma-separated names, returned in `_SAVE_NAMES` order (order adds gaps)."""
    names = [name.strip().lower() for name in text.split(",")]
    unknown = [name for name in names if name not in _SAVE_NAMES]
    if unknown or not any(names):
        got = ", ".join(repr(name) for name in unknown if name) or repr(text)
        raise argparse.ArgumentTypeError(f"expected a comma-separated list of {', '.join(_SAVE_NAMES)}, got {got}")
    if "order" in names:
        names.append("gaps")
    return tuple(name for name in _SAVE_NAMES if name in names)


def _ensemble_arrays(save: tuple) -> list:
    """The per-fleet arrays of each chunk file (besides ok and status), for ``--save``."""
    return [name for observer in save for name in _SAVE_ARRAYS[observer]] + ["n_events", "time"]


def _durations(args) -> tuple:
    """(T, d) from --load (T + d = 1, d = ρ / N) or from --compute / --write."""
    if args.load is None:
        durations = (10.0 if args.compute is None else args.compute, 1.0 if args.write is None else args.write)
        return check_period(*durations)
    if args.compute is not None or args.write is not None:
        raise CliError("give either --load or --compute/--write, not both")
    if args.load >= args.jobs:
        raise CliError(f"--load must be < N = {args.jobs} (so that T = 1 - load/N > 0), got {plain(args.load)}")
    write = args.load / args.jobs
    return 1.0 - write, write


def _gaps_and_order(fire_times):
    """Per fleet and cycle k: the smallest phase gap (time units, `ckpt_jax.analysis.smallest_gap`
    without a period), and whether the firing order changed from cycle k to k + 1.

    The gap assumes the firing order of identical jobs is fixed (claim 3). Jitter can change
    it: a job then fires twice before another fires once (the closing gap would come out
    negative), or two jobs swap. Where it changed the gap is NaN; the last cycle (no next
    one) is NaN and never counts as changed.
    """
    import jax.numpy as jnp

    from ..analysis import smallest_gap

    fire = jnp.asarray(fire_times)
    gaps = smallest_gap(fire)
    if isinstance(gaps, tuple):  # (gaps, flags) from a smallest_gap that reports order changes
        gaps = gaps[0]
    finite = jnp.isfinite(fire)
    present = jnp.any(finite, axis=-1, keepdims=True)  # not a padding slot
    complete = jnp.all(~present | finite, axis=-2)  # (..., K): every job's k-th firing recorded
    first = jnp.min(jnp.where(finite, fire, jnp.inf), axis=-2)
    last = jnp.max(jnp.where(finite, fire, -jnp.inf), axis=-2)
    order = jnp.argsort(jnp.where(present, fire, jnp.inf), axis=-2, stable=True)
    swapped = jnp.any(order[..., 1:] != order[..., :-1], axis=-2)
    overtaken = last[..., :-1] > first[..., 1:]
    changed = (swapped | overtaken) & complete[..., :-1] & complete[..., 1:]
    changed = jnp.concatenate([changed, jnp.zeros_like(changed[..., :1])], axis=-1)
    gaps = jnp.where(changed | (gaps < 0), jnp.nan, gaps)
    return gaps, changed


def _order_changed(gaps, ok):
    """Per fleet and cycle k ≤ K − 2: the firing order changed there, as far as the smallest
    gaps tell (`ckpt_jax.SaveAt(gaps=True)`, i.e. `ckpt_jax.analysis.smallest_gap`).

    In a fleet that completed, every cycle was recorded, so a NaN gap at k ≤ K − 2 means
    cycle k's firings interleave with cycle k − 1's or k + 1's (a job fired twice before
    another fired once: jitter), and the gap is undefined. The observer keeps no per-job
    order, so a swap of two jobs that leaves the cycles apart is not seen (its gaps are
    still gaps between consecutive firings), and one change from k to k + 1 marks both
    cycles. The last cycle (no closing gap) and fleets that did not complete (a NaN there
    may be a cycle never recorded) never count.
    """
    gaps = np.asarray(gaps)
    changed = np.isnan(gaps) & np.asarray(ok, bool)[:, None]
    changed[:, -1] = False
    return changed


def _ensemble_parameters(args, compute: float, write: float) -> dict:
    return {
        "fleets": args.fleets,
        "jobs": args.jobs,
        "fires": args.fires,
        "chunk_size": args.chunk_size,
        "load": args.load,
        "compute": compute,
        "write": write,
        "cap": args.cap,
        "throughput": args.throughput,
        "jitter": args.jitter,
        "delay": args.delay,
        "async_fraction": args.async_fraction,
        "seed": args.seed,
        "x64": args.x64,
        "save": ",".join(args.save),
        **policy_parameters(args),
    }


def _check_saved_ensemble(out: Path, parameters: dict) -> None:
    """Raises `CliError` in the CLI's words when ``out`` holds another ensemble."""
    from ..ensemble import MANIFEST

    path = out / MANIFEST
    if not path.exists():
        return
    try:
        saved = json.loads(path.read_text())
    except (OSError, ValueError, RecursionError):
        raise CliError(f"{path} is unreadable; use --restart to start over") from None
    config = saved.get("config") if isinstance(saved, dict) else None
    old = config.get("parameters") if isinstance(config, dict) and config.get("command") == "ensemble" else None
    if not isinstance(old, dict):
        raise CliError(
            f"{out} holds an ensemble made by another version of ckpt-jax or by the Python "
            "API; use --restart to start over, or another --out"
        )
    now = json.loads(json.dumps(parameters))  # as it reads back from the manifest
    # Either side may lack an entry: sizes and policies are recorded only where not default.
    lines = [
        f"{_ENSEMBLE_OPTIONS.get(name, name)}: {plain(old.get(name, _DEFAULTS.get(name)))} saved, "
        f"{plain(now.get(name, _DEFAULTS.get(name)))} now"
        for name in sorted(set(now) | set(old), key=list({**now, **old}).index)
        if old.get(name) != now.get(name)
    ]
    if lines:
        raise CliError(f"{out} holds another ensemble: {'; '.join(lines)}; use --restart to start over")


def _one_line_warnings(show):
    """A `warnings.showwarning` printing run_ensemble's RuntimeWarnings (a chunk file
    recomputed) as ``ckpt-jax: warning: ...`` lines; the CLI reports failed fleets itself."""

    def showwarning(message, category, filename, lineno, file=None, line=None):
        if not issubclass(category, RuntimeWarning):
            return show(message, category, filename, lineno, file, line)
        if "did not complete" not in str(message):
            sys.stderr.write(f"ckpt-jax: warning: {plain_text(str(message))}\n")
        return None

    return showwarning


def _discard_stale_summary(out: Path, restart: bool) -> None:
    """Removes summary.json unless it describes the chunks the manifest accounts for: a run
    that starts over (--restart, or no manifest yet) first removes it, so a run killed part
    way leaves no summary of the ensemble before. The new one is written at the end."""
    from ..ensemble import MANIFEST

    path = out / SUMMARY
    if not path.exists():
        return
    if not restart and _fingerprint(path) is not None and _fingerprint(path) == _fingerprint(out / MANIFEST):
        return
    path.unlink()


def _discard_stale_zarr(out: Path, restart: bool) -> None:
    """Removes what a killed zarr write left, and ensemble.zarr unless it is the dataset of
    the chunks the manifest accounts for (as `_discard_stale_summary`): a run that starts
    over leaves no copy of the ensemble before. Raises `CliError` where ensemble.zarr is
    not a folder (a file, a link): not something a run wrote."""
    from ..ensemble import MANIFEST
    from ..labelled import remove_zarr_strays, zarr_fingerprint

    path = out / ZARR
    if not os.path.lexists(path):
        remove_zarr_strays(path)
        return
    if path.is_symlink() or not path.is_dir():
        raise CliError(f"{path} is not a folder a run wrote: remove it, or use another --out")
    remove_zarr_strays(path)
    if not restart and zarr_fingerprint(path) is not None and zarr_fingerprint(path) == _fingerprint(out / MANIFEST):
        return
    shutil.rmtree(path)


def _write_zarr(out: Path) -> bool:
    """Writes ensemble.zarr, the dataset of ``open_ensemble(out)``, atomically (replacing an
    older one), and returns True; without xarray or zarr prints what to install and returns False."""
    from ..ensemble import open_ensemble
    from ..labelled import write_zarr, zarr_missing

    missing = zarr_missing()
    if missing is not None:
        print(f"ckpt-jax ensemble: {ZARR} not written: {missing}")
        return False
    write_zarr(open_ensemble(out), out / ZARR)  # streamed one chunk file at a time where dask is installed
    return True


def _fingerprint(path: Path) -> str | None:
    """The manifest fingerprint a manifest.json or summary.json records, or None."""
    try:
        saved = json.loads(path.read_text())
    except (OSError, ValueError, RecursionError):
        return None
    value = saved.get("fingerprint") if isinstance(saved, dict) else None
    return value if isinstance(value, str) else None


def _ensemble(args) -> int:
    from .._plan import check_work
    from ..ensemble import LOCK, EnsembleBusyError, locked

    compute, write = _durations(args)
    # Two events per job and cycle in each of --fleets runs, refused up front unless --force.
    check_work(2 * args.jobs * (args.fires + 2), args.jobs, args.fleets, force=args.force, size="--jobs")
    out = Path(args.out)
    parameters = _ensemble_parameters(args, compute, write)
    # The lock is held from the first check to summary.json: no other run changes the
    # folder in between (a second run is refused in one line).
    try:
        with locked(out):
            return _ensemble_locked(args, out, parameters, compute, write)
    except EnsembleBusyError as err:
        raise CliError(
            f"{out} is in use by another run (it holds {out / LOCK}); wait for it to finish, or use another --out"
        ) from err


def _ensemble_locked(args, out: Path, parameters: dict, compute: float, write: float) -> int:
    """The run, with the lock held: the folder's checks, the chunks, summary.json, the outcome."""
    import jax

    from ..ensemble import random_launches
    from ..experiments import write_json

    _check_folder(out, parameters, restart=args.restart)
    root_key = seed_key(args.seed)
    make_chunk = random_launches(
        np.full(args.jobs, compute),
        np.full(args.jobs, write),
        key=jax.random.fold_in(root_key, 0),
        **fleet_keywords(args, args.jobs),
    )
    # Every chunk is padded to the chunk size: that is the batch each simulate call splits.
    batch = min(args.chunk_size, args.fleets)
    devices, n_devices = devices_for(args.device_info, batch)
    device_summary = report_devices(
        "ensemble", args.device_info, n_devices, batch=batch, batch_text=f"chunks of {batch} fleet{'s' * (batch != 1)}"
    )
    started = time.perf_counter()
    result = _run_chunks(args, out, parameters, make_chunk, jax.random.fold_in(root_key, 1), devices)
    wall_s = time.perf_counter() - started
    zarr_written = _write_zarr(out)  # the ensemble is complete: every chunk is saved
    summary = _ensemble_summary(args, parameters, compute, write, result, wall_s, device_summary, zarr_written)
    write_json(out / SUMMARY, summary)  # last, atomically: present only after a complete run
    return _report_outcome(args, summary, result, wall_s, out)


def _check_folder(out: Path, parameters: dict, *, restart: bool) -> None:
    """Refuses a folder that holds something else or another ensemble (unless --restart), and
    removes a summary.json and an ensemble.zarr that do not describe the chunks saved."""
    from ..ensemble import EnsembleMismatchError, check_files

    try:
        check_files(out, [SUMMARY])
    except EnsembleMismatchError as err:
        raise CliError(str(err).replace("out_dir", "--out")) from None
    if not restart:
        _check_saved_ensemble(out, parameters)
    _discard_stale_zarr(out, restart)
    _discard_stale_summary(out, restart)


def _save_at(save: tuple) -> SaveAt:
    """The observers --save names, accumulated inside the event loop: no (B, N, K) trace,
    unless order asks for one (to derive the gaps and the firing-order flag from it)."""
    from .. import SaveAt

    exact_order = "order" in save
    return SaveAt(
        trace=exact_order,
        writers="writers" in save,
        gaps="gaps" in save and not exact_order,
        jobs="jobs" in save,
    )


def _reducer(save: SaveAt) -> Callable[[Any], dict]:
    """What each chunk file keeps of a chunk's result, for the `SaveAt` ``save``."""
    import jax

    gaps_and_order = jax.jit(_gaps_and_order)  # every chunk has one shape: compiled once

    def reduce(trace):
        arrays = {}
        if save.writers:
            arrays.update({f"writers_{name}": value for name, value in trace.writers._asdict().items()})
        if save.trace:  # --save order
            gaps, changed = gaps_and_order(trace.fire_times)
            arrays.update(smallest_gap=gaps, order_changed=changed)
        elif save.gaps:
            arrays.update(smallest_gap=trace.gaps, order_changed=_order_changed(trace.gaps, trace.ok))
        if save.jobs:
            arrays.update({f"jobs_{name}": value for name, value in trace.jobs._asdict().items()})
        return {**arrays, "n_events": trace.n_events, "time": trace.time}

    return reduce


def _run_chunks(args, out: Path, parameters: dict, make_chunk, jitter_key, devices) -> EnsembleResult:
    """`ckpt_jax.ensemble.run_ensemble` into ``out``, resuming from the chunks saved there
    unless --restart; its refusals become one line in the CLI's words."""
    from ..ensemble import EnsembleMismatchError, run_ensemble

    save = _save_at(args.save)
    try:
        with warnings.catch_warnings():
            warnings.showwarning = _one_line_warnings(warnings.showwarning)
            warnings.simplefilter("always", RuntimeWarning)
            return run_ensemble(
                make_chunk,
                args.fleets,
                args.fires,
                chunk_size=args.chunk_size,
                out_dir=out,
                key=jitter_key,
                jitter=args.jitter if args.jitter > 0 else None,
                resume=not args.restart,
                progress=False if args.no_progress else None,
                reduce=_reducer(save),
                save=save,
                config={"command": "ensemble", "arrays": _ensemble_arrays(args.save), "parameters": parameters},
                devices=devices,  # not part of the manifest: a resume may use another count
            )
    except EnsembleMismatchError as err:
        if err.differences:
            raise CliError(
                f"{out} holds another ensemble ({'; '.join(err.differences)}); use --restart to start over"
            ) from None
        if "resume=False" not in str(err):  # not a matter of another ensemble: --restart would not help
            raise CliError(str(err).replace("out_dir", "--out")) from None
        reason = str(err).split("; rerun with resume=False")[0]
        raise CliError(f"{reason}; use --restart to start over") from None


def _ensemble_summary(
    args,
    parameters: dict,
    compute: float,
    write: float,
    result: EnsembleResult,
    wall_s: float,
    device_summary,
    zarr_written: bool,
) -> dict:
    """summary.json: the parameters, the fleets' outcome and statistics, and the run."""
    import jax

    from .. import __version__, describe_status
    from ..ensemble import MANIFEST

    ok = result.ok
    status_all = int(np.bitwise_or.reduce(result.status))
    return {
        "command": "ensemble",
        "version": __version__,
        # The manifest's: summary.json describes the chunks only where the two agree.
        "fingerprint": result.fingerprint,
        "parameters": parameters,
        "keys": {
            "seed": SEED_KEY_TEXT,
            "launch": "fleet i: jax.random.fold_in(jax.random.fold_in(key(seed), 0), i)",
            "jitter": "jax.random.fold_in(key(seed), 1), folded with the fleet index",
        },
        "load": args.jobs * write / (compute + write),
        "ok": bool(ok.all()),
        "fleets_ok": int(ok.sum()),
        "status": status_all,
        "status_text": describe_status(status_all),
        "chunks": result.n_computed + result.n_loaded,
        "chunks_computed": result.n_computed,
        "chunks_loaded": result.n_loaded,
        "save": list(args.save),
        "events_mean": float(result.arrays["n_events"].mean()),
        **_gap_summary(result.arrays, ok),
        **_writer_summary(result.arrays, ok),
        **_job_summary(result.arrays, ok),
        "wall_time_s": wall_s,
        "backend": jax.default_backend(),
        "devices": device_summary,
        "jax": jax.__version__,
        "files": [MANIFEST, "chunk-*.npz", *([ZARR] if zarr_written else []), SUMMARY],
        "notes": _ensemble_notes(args.save),
    }


def _report_outcome(args, summary: dict, result: EnsembleResult, wall_s: float, out: Path) -> int:
    """Prints the run's outcome (and warns of firing-order changes); 1 where a fleet failed."""
    ok = result.ok
    print(
        f"ckpt-jax ensemble: {int(ok.sum())}/{args.fleets} fleets ok, N={args.jobs}, K={args.fires}, "
        f"{summary['chunks']} chunks ({result.n_computed} computed, {result.n_loaded} loaded), {wall_s:.2f} s "
        f"-> {out}"
    )
    if summary["order_changed_cycles"]:
        print(
            f"ckpt-jax: warning: the firing order changed in {summary['order_changed_cycles']} cycle(s) of "
            f"{summary['order_changed_fleets']} fleet(s) (jitter?): their smallest gaps are undefined and left "
            "out of smallest_gap_min_mean (see order_changed_* in summary.json"
            + ("" if "order" in args.save else "; --save order also flags two jobs swapping")
            + ")",
            file=sys.stderr,
        )
    if not ok.all():
        print(f"ckpt-jax ensemble: {result.n_bad} fleet(s) failed: {summary['status_text']}", file=sys.stderr)
        return 1
    return 0


def _gap_summary(arrays: dict, ok) -> dict:
    """summary.json's smallest-gap statistics (None without ``--save gaps``)."""
    if "smallest_gap" not in arrays:
        return dict(
            smallest_gap_min_mean=None, smallest_gap_fleets=None, order_changed_cycles=None, order_changed_fleets=None
        )
    # Smallest gap ever seen per fleet (time units), over the cycles whose firing order held
    # (the last cycle has no closing gap): never negative.
    gaps = arrays["smallest_gap"][ok]
    changed = arrays["order_changed"][ok].astype(bool)
    fleet_min_gap = np.min(np.where(np.isnan(gaps), np.inf, gaps), axis=-1, initial=np.inf)
    finite = np.isfinite(fleet_min_gap)
    return dict(
        smallest_gap_min_mean=float(fleet_min_gap[finite].mean()) if finite.any() else None,
        smallest_gap_fleets=int(finite.sum()),
        order_changed_cycles=int(changed.sum()),
        order_changed_fleets=int(changed.any(axis=-1).sum()),
    )


def _writer_summary(arrays: dict, ok) -> dict:
    """With ``--save writers``: the mean over ok fleets of the time-weighted writer-count
    distribution on each fleet's observation window, and the largest count seen."""
    if "writers_time" not in arrays:
        return {}
    window = arrays["writers_window"]
    length = window[:, 1] - window[:, 0]
    usable = ok & np.all(np.isfinite(arrays["writers_time"]), axis=-1) & (length > 0)
    dist = arrays["writers_time"][usable] / length[usable, None]
    return dict(
        writer_distribution_mean=[float(p) for p in dist.mean(axis=0)] if usable.any() else None,
        writer_distribution_fleets=int(usable.sum()),
        writers_max=int(arrays["writers_max"][usable].max()) if usable.any() else None,
    )


def _job_summary(arrays: dict, ok) -> dict:
    """With ``--save jobs``: the mean over ok fleets and jobs of the fraction of the run
    spent writing, and of the writes completed per job."""
    if "jobs_write_time" not in arrays:
        return {}
    time_run = arrays["time"][ok][:, None]
    return dict(
        write_time_fraction_mean=float(np.mean(arrays["jobs_write_time"][ok] / time_run)) if ok.any() else None,
        writes_per_job_mean=float(np.mean(arrays["jobs_writes"][ok])) if ok.any() else None,
    )


def _ensemble_notes(save: tuple) -> str:
    """summary.json's notes: what each number is and what each chunk file holds."""
    notes = []
    if "order" in save:
        notes.append(
            "smallest_gap_min_mean: per ok fleet, the smallest phase gap (time units, >= 0) over "
            "cycles 0..K-2 whose firing order held (ckpt_jax.analysis.smallest_gap of each chunk's trace), "
            "averaged over the smallest_gap_fleets fleets that have such a cycle (null when none, e.g. "
            "K = 1). The gap assumes the firing order is fixed, as it is for identical jobs without "
            "jitter; where it changed from cycle k to k + 1 (a job fired twice before another fired "
            "once, or two jobs swapped: jitter) cycle k's gap is NaN and left out. "
            "order_changed_cycles counts those (ok fleet, cycle) pairs, order_changed_fleets the ok "
            "fleets with at least one (--save order: exact, from the trace)."
        )
    elif "gaps" in save:
        notes.append(
            "smallest_gap_min_mean: per ok fleet, the smallest phase gap (time units, >= 0) over "
            "cycles 0..K-2 (ckpt_jax.analysis.smallest_gap, accumulated during the run: SaveAt(gaps=True)), "
            "averaged over the smallest_gap_fleets fleets that have a defined one (null when none, "
            "e.g. K = 1). The gap assumes the firing order is fixed, as it is for identical jobs "
            "without jitter. Where jitter changed it so that cycle k's firings interleave with cycle "
            "k + 1's (a job fired twice before another fired once), both cycles' gaps are NaN and "
            "left out. order_changed_cycles counts the (ok fleet, cycle k <= K-2) pairs with a NaN "
            "gap, order_changed_fleets the ok fleets with at least one. This is what the gaps alone "
            "tell: no per-job firing order is stored, so one change from cycle k to k + 1 counts as "
            "2 cycles, and a swap of two jobs that leaves the cycles apart is not counted (its gaps "
            "are still gaps between consecutive firings, and are kept; --save order flags those too)."
        )
    if "writers" in save:
        notes.append(
            "writer_distribution_mean: mean over the writer_distribution_fleets ok fleets of the "
            "fraction of each fleet's observation window (from every job's first firing to the "
            "first end of a K-th write, ckpt_jax.analysis.observed_interval) spent with exactly n writers, "
            "n = 0..N (ckpt_jax.analysis.writer_distribution); writers_max: the largest writer count seen "
            "in any of those windows."
        )
    if "jobs" in save:
        notes.append(
            "write_time_fraction_mean: mean over ok fleets and jobs of the time spent writing over "
            "the run's length; writes_per_job_mean: writes completed per job (started by a firing "
            "after t = 0)."
        )
    arrays = ", ".join(_ensemble_arrays(save)) + ", ok, status"
    notes.append(
        f"Each chunk-*.npz holds per fleet: {arrays} (writers_*: ckpt_jax.WriterStats fields, "
        "jobs_*: ckpt_jax.JobStats fields; smallest_gap and order_changed (K,) per cycle), and the "
        "file's chunk_index and the manifest's fingerprint. No trace is stored. "
        "ckpt_jax.open_ensemble(DIR) opens them as one xarray Dataset (smallest_gap named gaps); "
        "ensemble.zarr, where listed in files, is that Dataset as a zarr group (format 2, one zarr chunk "
        "per chunk file), which xarray.open_zarr opens without ckpt_jax."
    )
    return " ".join(notes)
