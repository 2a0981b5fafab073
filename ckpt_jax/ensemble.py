"""Long ensembles in chunks: a progress bar, and resume after interruption.

`run_ensemble` simulates ``n_fleets`` fleets ``chunk_size`` at a time. Each chunk's
(reduced) trace is saved to ``out_dir/chunk-{index:06d}.npz`` atomically (temporary file
in the same directory, flush + fsync, then `os.replace`), so a chunk file is either
complete or absent. A rerun with the same ``out_dir`` loads the chunks already saved and
computes only the rest: nothing is lost and nothing is counted twice. ``manifest.json``
records what the chunks are results of; resuming a different ensemble into the same
directory raises `EnsembleMismatchError` (a `ValueError`) rather than mixing results. Each
chunk file records its chunk index and the manifest's fingerprint: a chunk file renamed,
swapped with another or copied in from another ensemble is recomputed, with a warning. The
manifest records each chunk file's content hash (``chunk_sha256``, `_manifest.content_hash`),
written just after the chunk: a chunk whose content differs (a number edited after it was
saved) or that the manifest does not record (a run stopped between the two writes) is
recomputed, with a warning. A manifest saved before these hashes has its chunks loaded
unchecked, with a warning, and their hashes recorded.

``save`` (a `ckpt_jax.SaveAt`) picks what each chunk's run records, as for `simulate`: with
``SaveAt(trace=False, writers=True, gaps=True, jobs=True)`` no (B, N, K) trace exists and
each chunk stores only the observers' arrays, O(N + K) per fleet (`EnsembleResult.writers`,
``.gaps``, ``.jobs`` put them back together).

Results do not depend on the chunking: the caller's ``make_chunk(start, stop)`` must build
fleets ``start..stop-1`` from their global indices alone (`random_launches` does), jitter
draws are keyed by the global fleet index (``simulate(..., fleet_offset=start)``), and the
last chunk is padded to ``chunk_size`` with copies of its last fleet, so every chunk runs
the same compiled loop; the padding is dropped.

One run per ``out_dir`` at a time: a run holds the folder's lock (``out_dir/.lock``, a
`filelock.FileLock`) from before it touches any file to its return, and a second run on
the same folder, in this process or another, is refused at once with `EnsembleBusyError`
(it does not wait). A caller that writes files derived from the chunks (the CLI's
``summary.json``) holds `locked` around the run and that write.

`ckpt_jax.open_ensemble` (optional xarray) reads a saved ``out_dir`` as an `xarray.Dataset`
with named dimensions, equal to `run_ensemble`'s arrays, and `EnsembleResult.to_xarray` labels
a result in memory the same way.

Every file ``run_ensemble`` reads or replaces must be a regular file: a directory or a FIFO
at the name of the manifest, a chunk or a temporary file raises `EnsembleMismatchError`
before anything is read or computed (opening a FIFO would block for ever).
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import json
import os
import stat
import threading
import warnings
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from . import _manifest
from ._io import atomic_write
from ._observe import JobStats, PowerStats, SaveAt, WriterStats
from ._plan import non_default_sharing
from ._simulate import Trace, simulate
from ._status import describe_status
from ._validate import check_int, check_key_given, check_method
from .labelled import ensemble_dataset, require_xarray
from .model import Fleet, State, random_state

__all__ = [
    "LOCK",
    "MANIFEST",
    "EnsembleBusyError",
    "EnsembleMismatchError",
    "EnsembleResult",
    "locked",
    "random_launches",
    "run_ensemble",
]

MANIFEST = "manifest.json"
LOCK = ".lock"
# Per-fleet arrays every chunk file holds besides reduce's: the trace's own verdict.
_VERDICT = ("ok", "status")
# Scalars every chunk file holds: which chunk of which ensemble (manifest fingerprint) it is.
_TAGS = ("chunk_index", "fingerprint")
_RESERVED = _VERDICT + _TAGS
# What the default reduce keeps of a `Trace` (ok and status are always kept): the trace
# (where `SaveAt.trace`), the run's events and stop time, and every observer `SaveAt` asks
# for, one array per field (``writers_time``, ``writers_window``, ..., ``gaps``, ``jobs_writes``).
# simulate options that may pass through, and those that decide the results.
_SIMULATE_OPTIONS = ("max_events", "queue_size", "method", "throw", "devices")


class EnsembleMismatchError(ValueError):
    """``out_dir`` holds another ensemble's files (or files no manifest accounts for).

    Attributes:
      out_dir: the directory.
      differences: one line per manifest field that differs (``"n_fires: saved 4, now 5"``);
        empty when the manifest is unreadable or missing.
    """

    def __init__(self, message: str, out_dir: Path, differences=()):
        super().__init__(message)
        self.out_dir = out_dir
        self.differences = list(differences)


class EnsembleBusyError(OSError):
    """Another run holds ``out_dir``'s lock (`locked`): two writers never share a folder.

    Attributes:
      out_dir: the directory.
    """

    def __init__(self, out_dir: Path):
        super().__init__(
            f"{out_dir} is in use by another ckpt_jax ensemble run (it holds {Path(out_dir) / LOCK}); "
            "wait for it to finish, or use another out_dir"
        )
        self.out_dir = out_dir


@dataclasses.dataclass(frozen=True)
class EnsembleResult:
    """What `run_ensemble` returns: per-fleet arrays in global fleet order.

    Attributes:
      arrays: ``{name: (n_fleets, ...) array}``, the outputs of ``reduce``. By default the
        `Trace` fields ``fire_times``, ``end_times`` (where ``save.trace``), ``n_events``,
        ``time``, and the observers of ``save``: ``writers_time``, ``writers_window``,
        ``writers_excursions``, ``writers_max`` (`WriterStats`), ``gaps`` (K,), and
        ``jobs_write_time``, ``jobs_compute_time``, ``jobs_writes``, ... (`JobStats`) and
        ``power_time``, ``power_mean``, ... (`PowerStats`).
      ok: (n_fleets,) bool, `Trace.ok` of each fleet.
      status: (n_fleets,) int32, `Trace.status` of each fleet (`Status` bit flags).
      n_computed: chunks simulated by this call.
      n_loaded: chunks loaded from ``out_dir`` (saved by an earlier call).
      fingerprint: the fingerprint of the ensemble's manifest (``manifest.json``): a file
        derived from the chunks records it, so that a reader can tell it belongs to them.
      manifest: the manifest itself (what the arrays are results of), as JSON values.
    """

    arrays: dict
    ok: np.ndarray
    status: np.ndarray
    n_computed: int
    n_loaded: int
    fingerprint: str = ""
    manifest: dict | None = None

    @property
    def n_fleets(self) -> int:
        return int(self.ok.shape[0])

    @property
    def n_bad(self) -> int:
        """Fleets whose run did not complete (``ok`` False): their arrays are partial."""
        return int(np.sum(~self.ok))

    @property
    def writers(self):
        """The `ckpt_jax.WriterStats` of every fleet (from ``arrays``), or None if not stored."""
        return self._group("writers", WriterStats)

    @property
    def gaps(self):
        """(n_fleets, K) smallest phase gap per cycle (``SaveAt(gaps=True)``), or None."""
        return self.arrays.get("gaps")

    @property
    def jobs(self):
        """The `ckpt_jax.JobStats` of every fleet (from ``arrays``), or None if not stored."""
        return self._group("jobs", JobStats)

    @property
    def power(self):
        """The `ckpt_jax.PowerStats` of every fleet (``SaveAt(power=True)``), or None."""
        return self._group("power", PowerStats)

    def to_xarray(self, *, groups=None, attrs=None):
        """The ensemble as an `xarray.Dataset` (`ckpt_jax.labelled.ensemble_dataset`): one
        variable per array, dimensions ``fleet``, ``job``, ``cycle``, ``writers``, ..., the
        manifest's parameters as attributes. Needs ``pip install "ckpt_jax[xarray]"``."""
        return ensemble_dataset(self, groups=groups, attrs=attrs)

    def _group(self, prefix, kind):
        # Fields with a default (added later) may be absent from ensembles saved before.
        if not all(f"{prefix}_{f}" in self.arrays for f in kind._fields if f not in kind._field_defaults):
            return None
        return kind(**{f: self.arrays[f"{prefix}_{f}"] for f in kind._fields if f"{prefix}_{f}" in self.arrays})


def random_launches(
    compute,
    write,
    *,
    key: jax.Array,
    cap=None,
    throughput=None,
    delay=0.0,
    async_fraction=0.0,
    size=1.0,
    power_policy="maxmin",
    storage_policy="fair",
    write_limit=None,
    snapshot=None,
    recover_from="storage",
    idle_power=0.0,
    dtype=None,
) -> Callable[[int, int], tuple]:
    """A ``make_chunk`` for `run_ensemble`: the same jobs in every fleet, random launches.

    Fleet ``i`` (global index) starts from `random_state` with its own key
    ``jax.random.fold_in(key, i)``, so its launch does not depend on the chunk it is in.

    Args:
      compute, write: (N,) solo compute work T_i and write volume d_i of the jobs
        (validated now, as by `Fleet`); identical jobs: ``np.full(N, T)``.
      key: PRNG key of the launches. Use a key independent of the jitter key, e.g.
        ``fold_in(seed_key, 0)`` here and ``fold_in(seed_key, 1)`` for the jitter.
      cap, throughput, delay, async_fraction, size, power_policy, storage_policy: as for `Fleet`.
      write_limit, snapshot, recover_from, idle_power, dtype: as for `Fleet` (docs/model.md §1d).

    Returns:
      ``make_chunk(start, stop) -> (fleet, state)`` with batch shape ``(stop - start,)``.
      Its ``config`` attribute (a JSON-able dict of everything above) is recorded in the
      ensemble's manifest, so resuming with other jobs or another key raises.
    """
    template = Fleet(
        compute,
        write,
        cap,
        throughput,
        delay=delay,
        async_fraction=async_fraction,
        size=size,
        power_policy=power_policy,
        storage_policy=storage_policy,
        write_limit=write_limit,
        snapshot=snapshot,
        recover_from=recover_from,
        idle_power=idle_power,
        dtype=dtype,
    )
    if template.batch_shape != ():
        raise ValueError(f"compute and write must have shape (N,), got {template.compute.shape}")
    key = _typed_key(key, "key")
    if key.shape != ():
        raise ValueError(f"key must be a single PRNG key, got shape {key.shape}")

    def make_chunk(start: int, stop: int):
        fleet = jax.tree_util.tree_map(lambda x: jnp.broadcast_to(x, (stop - start,) + x.shape), template)
        index = jnp.arange(start, stop, dtype=jnp.uint32)
        keys = jax.vmap(jax.random.fold_in, in_axes=(None, 0))(key, index)
        return fleet, random_state(fleet, keys)

    make_chunk.config = _manifest.jsonable(
        {
            "make_chunk": "random_launches",
            "compute": template.compute,
            "write": template.write,
            "cap": None if np.isinf(template.cap) else template.cap,
            "throughput": template.throughput,
            "delay": template.delay,
            "async_fraction": template.async_fraction,
            "dtype": str(template.dtype),
            "key": _manifest.key_description(key),
            **non_default_sharing(template),  # absent for defaults: older manifests still match
            **non_default_checkpointing(template),
        }
    )
    return make_chunk


def non_default_checkpointing(fleet: Fleet) -> dict:
    """The write limits, snapshots and idle power of ``fleet`` that differ from the defaults
    (docs/model.md §1d), for manifests, which then stay as they were for fleets without them."""
    entries = {}
    if fleet.has_write_limits:
        limit = np.asarray(fleet.write_limit, np.float64)
        entries["write_limit"] = [float(b) if np.isfinite(b) else None for b in limit.ravel()]  # None: no limit
    if fleet.has_snapshots:
        entries["snapshot"] = np.asarray(fleet.snapshot).tolist()
        entries["recover_from"] = fleet.recover_from
    if bool(np.any(np.asarray(fleet.idle_power) != 0)):
        entries["idle_power"] = np.asarray(fleet.idle_power).tolist()
    return entries


def run_ensemble(
    make_chunk: Callable[[int, int], tuple],
    n_fleets: int,
    n_fires: int,
    *,
    chunk_size: int,
    out_dir: str | os.PathLike | None = None,
    key: jax.Array | None = None,
    jitter=None,
    resume: bool = True,
    progress: bool | None = None,
    reduce: Callable[[Trace], dict] | None = None,
    config: Any = None,
    save=None,
    **simulate_kwargs,
) -> EnsembleResult:
    """Simulates ``n_fleets`` fleets in chunks, saving each chunk; resumes from saved chunks.

    Args:
      make_chunk: ``make_chunk(start, stop) -> (fleet, state)``: a `Fleet` of batch shape
        ``(stop - start,)`` holding fleets ``start..stop-1`` and its `State`. It must be
        deterministic in the global indices alone (not in the chunking): derive any
        randomness per fleet, e.g. from ``jax.random.fold_in(key, index)``, as
        `random_launches` does. Every chunk should have the same N and dtype (one compile).
      n_fleets: ensemble size, >= 1.
      n_fires: K >= 1, firings to record per job (as for `simulate`).
      chunk_size: fleets per chunk, >= 1 (at most ``n_fleets`` are used). The last chunk
        is padded to this size with copies of its last fleet; the copies are dropped.
      out_dir: directory for ``manifest.json`` and ``chunk-{index:06d}.npz`` (created if
        missing); None keeps everything in memory (no resume). The run holds the folder's
        lock (`locked`, the file ``.lock``) throughout: one run per folder at a time.
      key: jitter PRNG key as for `simulate`: one key, folded with each fleet's global
        index, or one key per fleet (shape ``(n_fleets,)``).
      jitter: compute-work standard deviation σ >= 0, scalar or ``(n_fleets,)``.
      resume: load chunks already saved in ``out_dir`` instead of recomputing them; False
        discards them (and the manifest) first.
      progress: a tqdm bar over fleets; None shows it when there is more than one chunk.
      reduce: ``reduce(trace) -> {name: array}`` with leading axis ``chunk_size`` (one row
        per fleet of the padded chunk), applied to each chunk's `Trace` before saving.
        Default: the trace's ``fire_times`` and ``end_times`` (where ``save.trace``),
        ``n_events``, ``time`` and the observer arrays ``save`` asks for (see
        `EnsembleResult.arrays`).
        The names ``ok`` and ``status`` (always kept) and ``chunk_index`` and
        ``fingerprint`` (each file's tags) are reserved; any other identifier is stored
        under its own name. Arrays of dtype object cannot be stored (a chunk file holds no
        pickles) and are refused, as are values that are not arrays, naming the key, before
        anything is saved (on the first chunk).
      config: JSON-able description of what ``make_chunk`` and ``reduce`` compute (e.g.
        N, T, d, seed), recorded in the manifest; a resume with a different one raises.
        ``make_chunk.config``, if present (`random_launches`), is recorded too.
      save: a `ckpt_jax.SaveAt`, passed to `simulate` for every chunk (None: the full trace
        only, as ``SaveAt()``). Recorded in the manifest: resuming with another ``save``
        raises `EnsembleMismatchError`.
      **simulate_kwargs: ``max_events``, ``queue_size``, ``method``, ``throw``, ``devices``,
        passed to `simulate`. The default event budget is set per chunk; pass
        ``max_events`` for budgets independent of the chunking.

    Returns:
      An `EnsembleResult`. Fleets that did not complete (``ok`` False) are kept, counted in
      ``n_bad`` and reported by a `RuntimeWarning`.

    Raises:
      ValueError: a bad argument (before anything runs), or a ``make_chunk`` or
        ``reduce`` output of the wrong kind or shape.
      EnsembleMismatchError: ``out_dir`` holds another ensemble, or a directory or FIFO
        where a chunk or the manifest would be (a `ValueError`).
      EnsembleBusyError: another run holds ``out_dir``'s lock (an `OSError`).
      OSError: ``out_dir`` cannot be written (e.g. the disk is full): the chunks saved
        before are complete, and a rerun resumes from them.

    Warns:
      RuntimeWarning: a chunk file that is unreadable, of the wrong size, another chunk's
        (index) or another ensemble's (fingerprint) is recomputed and overwritten.
    """
    n_fleets = check_int("n_fleets", n_fleets, 1)
    n_fires = check_int("n_fires", n_fires, 1)
    chunk_size = min(check_int("chunk_size", chunk_size, 1), n_fleets)
    # ValueError, not TypeError, for every bad argument: the package's convention (model.py).
    if not callable(make_chunk):
        raise ValueError(f"make_chunk must be callable as make_chunk(start, stop), got {make_chunk!r}")  # noqa: TRY004
    if reduce is not None and not callable(reduce):
        raise ValueError(f"reduce must be None or callable as reduce(trace), got {reduce!r}")
    if not isinstance(resume, bool):
        raise ValueError(f"resume must be True or False, got {resume!r}")  # noqa: TRY004
    if progress is not None and not isinstance(progress, bool):
        raise ValueError(f"progress must be None, True or False, got {progress!r}")
    options = _check_simulate_kwargs(simulate_kwargs)
    save = _check_save(save)
    jitter = _check_jitter(jitter, n_fleets)
    check_key_given(key, jitter is not None and bool(np.any(np.asarray(jitter) > 0)), drawn_failures=False)
    if key is not None:
        key = _typed_key(key, "key")
        if key.shape not in ((), (n_fleets,)):
            raise ValueError(f"key must be a single PRNG key or have shape ({n_fleets},), got {key.shape}")
    manifest = _manifest.manifest(
        n_fleets, chunk_size, n_fires, jitter, key, options, getattr(make_chunk, "config", None), config, save
    )

    out = None if out_dir is None else Path(out_dir)
    with contextlib.nullcontext() if out is None else locked(out):
        return _run(
            make_chunk,
            n_fleets,
            n_fires,
            chunk_size,
            out,
            key,
            jitter,
            resume,
            progress,
            reduce,
            save,
            options,
            manifest,
        )


def _run(
    make_chunk, n_fleets, n_fires, chunk_size, out, key, jitter, resume, progress, reduce, save, options, manifest
) -> EnsembleResult:
    """`run_ensemble` after its checks, holding ``out``'s lock."""
    bounds = chunk_bounds(n_fleets, chunk_size)
    chunks: list = [None] * len(bounds)
    hashes: list = [None] * len(bounds)
    if out is not None:
        recorded = _prepare(out, manifest, resume, len(bounds))
        for index, (start, stop) in enumerate(bounds):
            expected = _UNCHECKED if recorded is None else recorded[index]
            loaded = _load_chunk(out / _chunk_name(index), stop - start, index, manifest["fingerprint"], expected)
            if loaded is not None:
                chunks[index], hashes[index] = loaded
        if recorded is None or hashes != recorded:
            if recorded is None and any(chunk is not None for chunk in chunks):
                warnings.warn(
                    f"{out / MANIFEST} records no content hashes of its chunks (saved by an older version): "
                    f"its {sum(chunk is not None for chunk in chunks)} chunks are loaded unchecked, and their "
                    "hashes are recorded from now on",
                    RuntimeWarning,
                    stacklevel=3,
                )
            _write_manifest(out, manifest, hashes)  # the chunks recomputed below are recorded as they come
    n_loaded = sum(chunk is not None for chunk in chunks)

    from ._progress import progress_bar

    show = len(bounds) > 1 if progress is None else progress
    done = sum(stop - start for chunk, (start, stop) in zip(chunks, bounds) if chunk is not None)
    n_bad = sum(int(np.sum(~chunk["ok"])) for chunk in chunks if chunk is not None)
    with progress_bar(
        total=n_fleets, initial=done, unit="fleet", desc="ckpt_jax.ensemble.run_ensemble", disable=not show
    ) as bar:
        for index, (start, stop) in enumerate(bounds):
            if chunks[index] is not None:
                continue
            chunk = _run_chunk(make_chunk, start, stop, chunk_size, n_fires, key, jitter, reduce, options, save)
            if out is not None:
                tags = {"chunk_index": np.int64(index), "fingerprint": np.str_(manifest["fingerprint"])}
                content = {**chunk, **tags}
                atomic_write(out / _chunk_name(index), lambda handle, content=content: _write_npz(handle, content))
                # The file first, then its hash: a run stopped in between leaves a chunk the
                # manifest does not vouch for, which the next run recomputes.
                hashes[index] = _manifest.content_hash(content)
                _write_manifest(out, manifest, hashes)
            chunks[index] = chunk
            n_bad += int(np.sum(~chunk["ok"]))
            bar.update(stop - start)
            if n_bad:
                bar.set_postfix(not_ok=n_bad)

    arrays = _concatenate(chunks)
    ok, status = arrays.pop("ok").astype(bool), arrays.pop("status")
    if n_bad:
        codes = int(np.bitwise_or.reduce(status[~ok]))
        warnings.warn(
            f"{n_bad} of {n_fleets} fleets did not complete: {describe_status(codes)} (see EnsembleResult.ok)",
            RuntimeWarning,
            stacklevel=3,
        )
    return EnsembleResult(
        arrays,
        ok,
        status,
        n_computed=len(bounds) - n_loaded,
        n_loaded=n_loaded,
        fingerprint=manifest["fingerprint"],
        manifest=manifest,
    )


# -- chunks ----------------------------------------------------------------------------
def chunk_bounds(n_fleets: int, chunk_size: int) -> list:
    """``[(start, stop), ...]`` covering ``0..n_fleets-1`` once, in order."""
    return [(start, min(start + chunk_size, n_fleets)) for start in range(0, n_fleets, chunk_size)]


def _chunk_name(index: int) -> str:
    return f"chunk-{index:06d}.npz"


def _run_chunk(make_chunk, start, stop, chunk_size, n_fires, key, jitter, reduce, options, save) -> dict:
    """Simulates fleets ``start..stop-1`` padded to ``chunk_size``; returns their arrays."""
    size = stop - start
    built = make_chunk(start, stop)
    if not (isinstance(built, tuple) and len(built) == 2):
        raise ValueError(f"make_chunk({start}, {stop}) must return (fleet, state), got {type(built).__name__}")
    fleet, state = built
    if not isinstance(fleet, Fleet) or not isinstance(state, State):
        raise ValueError(  # noqa: TRY004
            f"make_chunk({start}, {stop}) must return (Fleet, State), got "
            f"({type(fleet).__name__}, {type(state).__name__})"
        )
    if fleet.batch_shape != (size,):
        raise ValueError(
            f"make_chunk({start}, {stop}) must return {size} fleets (batch shape ({size},)), got {fleet.batch_shape}"
        )
    if fleet.has_failures or fleet.has_outages:
        # simulate needs until= for them (docs/model.md §1c, §1f), and an ensemble runs K cycles.
        raise ValueError(
            f"make_chunk({start}, {stop}) returned fleets with failures (mtbf or outages): run_ensemble runs "
            "n_fires cycles per job, which failures may never complete; use "
            "cj.simulate(..., until=H) (or cj.design.fleet_waste) for them"
        )
    # Copies of the last fleet fill the chunk: every chunk has one shape, so one compile.
    rows = np.minimum(np.arange(chunk_size), size - 1)
    fleet, state = jax.tree_util.tree_map(lambda x: x[rows], (fleet, state))
    if key is not None and key.shape != ():
        key = key[start + rows]
    if jitter is not None and np.ndim(jitter) == 1:
        jitter = jitter[start + rows]
    trace = simulate(
        fleet, state, n_fires, jitter=jitter, key=key, fleet_offset=start, progress=False, save=save, **options
    )
    arrays = trace.arrays() if reduce is None else _reduced(reduce(trace), chunk_size)
    arrays.update(ok=np.asarray(trace.ok), status=np.asarray(trace.status))
    return {name: value[:size] for name, value in arrays.items()}


def _reduced(output, chunk_size: int) -> dict:
    if not isinstance(output, dict):
        raise ValueError(f"reduce must return a dict of per-fleet arrays, got {type(output).__name__}")  # noqa: TRY004
    arrays = {}
    for name, value in output.items():
        if not isinstance(name, str) or not name.isidentifier() or name in _RESERVED:
            raise ValueError(f"reduce's keys must be identifiers other than {_RESERVED}, got {name!r}")
        try:
            value = np.asarray(value)
        except (TypeError, ValueError) as err:  # ragged lists, objects numpy cannot convert
            raise ValueError(
                f"reduce's {name!r} must be an array (one row per fleet), got {type(value).__name__}: {err}"
            ) from None
        if value.dtype.hasobject:
            # A chunk file holds no pickles (np.load(allow_pickle=False)): it could not be read back.
            raise ValueError(
                f"reduce's {name!r} has dtype object, which a chunk file cannot store: return "
                "numeric, boolean or string arrays"
            )
        if value.ndim < 1 or value.shape[0] != chunk_size:
            raise ValueError(
                f"reduce's {name!r} must have a leading axis of {chunk_size} (one row per fleet of "
                f"the chunk), got shape {value.shape}"
            )
        arrays[name] = value
    return arrays


def _write_npz(handle, arrays: dict) -> None:
    """Writes ``arrays`` to ``handle`` as an ``.npz`` archive (what `np.load` reads), each
    under its own name. Unlike ``np.savez(handle, **arrays)`` a name is never taken for one
    of savez's own arguments (``file``, ``allow_pickle``), and nothing is pickled."""
    with zipfile.ZipFile(handle, mode="w", compression=zipfile.ZIP_STORED, allowZip64=True) as archive:
        for name, value in arrays.items():
            with archive.open(f"{name}.npy", mode="w", force_zip64=True) as member:
                np.lib.format.write_array(member, np.asanyarray(value), allow_pickle=False)


# `_load_chunk`'s ``expected`` for a manifest saved before chunk hashes: nothing to check.
_UNCHECKED = object()
# One chunk file is parsed at a time: dask reads the chunks of a lazily opened ensemble in
# threads, and numpy parses each array's header with `ast.literal_eval`, which CPython 3.11
# does not allow in two threads at once (it raises "SystemError: AST constructor recursion
# depth mismatch").
_READING = threading.Lock()


def _npz_arrays(path: Path) -> dict:
    """Every array of a chunk file, read (and CRC-checked) under `_READING`; raises what
    `np.load` raises for a file it cannot read."""
    with _READING, np.load(path, allow_pickle=False) as npz:
        return {name: npz[name] for name in npz.files}


def _load_chunk(path: Path, size: int, index: int, fingerprint: str, expected: object = _UNCHECKED) -> tuple | None:
    """Chunk ``index``'s saved arrays and the content hash of its file, or None if it must be
    computed: the file is missing, unreadable (then removed), of the wrong size, another
    chunk's or another ensemble's, or not the content the manifest recorded for it, ``expected``
    (`_manifest.content_hash`; None: none recorded; `_UNCHECKED`: a manifest saved before
    chunk hashes) (then left for the recomputed chunk to overwrite)."""
    if not path.exists():
        return None
    try:
        arrays = _npz_arrays(path)
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as err:
        warnings.warn(f"{path} is unreadable ({err}); recomputing that chunk", RuntimeWarning, stacklevel=4)
        path.unlink()
        return None
    digest = _manifest.content_hash(arrays)
    tags = {name: arrays.pop(name) for name in _TAGS if name in arrays}
    problem = chunk_problem(tags, {name: value.shape for name, value in arrays.items()}, size, index, fingerprint)
    if problem is None and expected is not _UNCHECKED:
        problem = hash_problem(digest, expected)
    if problem is not None:
        warnings.warn(f"{path} {problem}; recomputing that chunk", RuntimeWarning, stacklevel=4)
        return None
    return arrays, digest


def hash_problem(digest: str, expected: object) -> str | None:
    """Why a chunk file whose content hashes to ``digest`` is not the one the manifest
    recorded, ``expected`` (None: none recorded), in words, or None when it is."""
    if expected is None:
        return f"is not recorded in {MANIFEST} (a run stopped between saving it and recording it?)"
    if digest != expected:
        return (
            f"does not match the content hash {MANIFEST} records for it (sha256 {digest[:12]}..., "
            f"not {str(expected)[:12]}...: edited after it was saved?)"
        )
    return None


def chunk_problem(tags: dict, shapes: dict, size: int, index: int, fingerprint: str) -> str | None:
    """Why a chunk file with these tags (``{name: array}`` of `_TAGS` found in it) and
    per-fleet array shapes (``{name: shape}``) is not chunk ``index`` of ``size`` fleets of
    the ensemble ``fingerprint``, in words, or None when it is."""
    if len(tags) < len(_TAGS) or any(value.ndim != 0 for value in tags.values()):
        return "does not record its chunk index and ensemble (written by an older version?)"
    if tags["fingerprint"].dtype.kind != "U" or str(tags["fingerprint"]) != fingerprint:
        recorded = str(tags["fingerprint"])[:12]
        return f"belongs to another ensemble (manifest fingerprint {recorded}..., not {fingerprint[:12]}...)"
    if tags["chunk_index"].dtype.kind not in "iu" or int(tags["chunk_index"]) != index:
        return f"holds chunk {tags['chunk_index'].item()}, not chunk {index} (renamed or swapped?)"
    if not set(_VERDICT) <= set(shapes) or any(len(shape) < 1 or shape[0] != size for shape in shapes.values()):
        return f"does not hold {size} fleets"
    return None


def _concatenate(chunks: list) -> dict:
    """Joins the chunks' arrays in fleet order, checking they agree on names and shapes."""
    first = chunks[0]
    for index, chunk in enumerate(chunks):
        layout = {name: value.shape[1:] for name, value in chunk.items()}
        expected = {name: value.shape[1:] for name, value in first.items()}
        if layout != expected:
            raise ValueError(
                f"chunk {index} holds arrays {layout} but chunk 0 holds {expected} (per-fleet shapes): "
                "did reduce or make_chunk change between runs? Rerun with resume=False"
            )
    return {name: np.concatenate([chunk[name] for chunk in chunks]) for name in first}


# -- files -------------------------------------------------------------------------------
# Runs of this process holding a folder's lock, by (folder, thread): `locked` is re-entrant
# in one thread (the CLI holds it around run_ensemble), never shared between threads.
_HELD: set = set()


@contextlib.contextmanager
def locked(out_dir: str | os.PathLike) -> Iterator[Path]:
    """Holds ``out_dir``'s lock (creating the folder): no other run, in this process or
    another, writes there meanwhile. Re-entrant in one thread.

    Yields:
      ``out_dir`` as a `Path`.

    Raises:
      EnsembleBusyError: another run holds the lock (refused at once: no waiting).
    """
    from filelock import FileLock, Timeout

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    held = (os.path.realpath(out), threading.get_ident())
    if held in _HELD:
        yield out
        return
    lock = FileLock(out / LOCK, timeout=0)
    try:
        lock.acquire()
    except Timeout:
        raise EnsembleBusyError(out) from None
    _HELD.add(held)
    try:
        yield out
    finally:
        _HELD.discard(held)
        lock.release()


def check_files(out: Path, names=()) -> None:
    """Raises `EnsembleMismatchError` if the manifest, a chunk, a temporary file or one of
    ``names`` in ``out`` exists and is not a regular file (a directory, a FIFO, a socket):
    reading a FIFO would block for ever, and a directory can be neither read nor replaced."""
    paths = [out / MANIFEST, *out.glob("chunk-*.npz"), *_strays(out), *(out / name for name in names)]
    for path in paths:
        try:
            mode = path.stat().st_mode  # follows a symbolic link to what it names
        except FileNotFoundError:
            continue
        if not stat.S_ISREG(mode):
            kind = "a directory" if stat.S_ISDIR(mode) else "a FIFO" if stat.S_ISFIFO(mode) else "not a regular file"
            raise EnsembleMismatchError(
                f"{path} is {kind}, not a file run_ensemble wrote: remove it, or use another out_dir", out
            )


def _strays(out: Path) -> list:
    """Temporary files left by a run killed mid-write (a kill -9 skips atomic_write's cleanup);
    under the lock, no running write owns them."""
    return [*out.glob(f".{MANIFEST}.*.tmp"), *out.glob(".chunk-*.npz.*.tmp")]


def _prepare(out: Path, manifest: dict, resume: bool, n_chunks: int) -> list | None:
    """Creates ``out``, removes stray temporary files, checks or writes the manifest.

    Returns the content hashes of the chunks the saved manifest records (None where that
    chunk is not recorded), or None for a manifest saved before chunk hashes."""
    out.mkdir(parents=True, exist_ok=True)
    check_files(out)
    for stray in _strays(out):
        stray.unlink()
    path = out / MANIFEST
    if not resume:
        for old in out.glob("chunk-*.npz"):
            old.unlink()
    elif path.exists():
        try:
            saved = json.loads(path.read_text())
        except (OSError, ValueError, RecursionError) as err:
            raise EnsembleMismatchError(
                f"{path} is unreadable ({err}); rerun with resume=False to start over", out
            ) from None
        if not isinstance(saved, dict):
            raise EnsembleMismatchError(
                f"{path} is unreadable (JSON, but a {type(saved).__name__}, not an object); rerun with "
                "resume=False to start over",
                out,
            )
        differences = _manifest.differences(saved, manifest)
        if differences:
            raise EnsembleMismatchError(
                f"{out} holds another ensemble ({'; '.join(differences)}); rerun with resume=False "
                "to discard its chunks, or use another out_dir",
                out,
                differences,
            )
        try:
            return _manifest.recorded_hashes(saved, n_chunks)
        except ValueError as err:
            raise EnsembleMismatchError(
                f"{path} is unreadable ({err}); rerun with resume=False to start over", out
            ) from None
    elif any(out.glob("chunk-*.npz")):
        raise EnsembleMismatchError(
            f"{out} holds chunk files but no {MANIFEST}; rerun with resume=False to discard them", out
        )
    hashes = [None] * n_chunks
    _write_manifest(out, manifest, hashes)
    return hashes


def _write_manifest(out: Path, manifest: dict, hashes: list) -> None:
    """Writes ``manifest`` with the chunks' content hashes (`_manifest.HASHES`), atomically."""
    text = json.dumps({**manifest, _manifest.HASHES: hashes}, indent=2) + "\n"
    atomic_write(out / MANIFEST, lambda handle: handle.write(text.encode()))


def _typed_key(key, name: str) -> jax.Array:
    """A typed PRNG key array from a typed or raw (uint32, trailing axis 2) key."""
    if isinstance(key, jax.Array) and jnp.issubdtype(key.dtype, jax.dtypes.prng_key):
        return key
    try:
        return jax.random.wrap_key_data(jnp.asarray(key, jnp.uint32))
    except (TypeError, ValueError) as err:
        raise ValueError(f"{name} must be a PRNG key (jax.random.key(seed)), got {key!r}: {err}") from None


# -- arguments ---------------------------------------------------------------------------
def _check_simulate_kwargs(kwargs: dict) -> dict:
    if "fleet_offset" in kwargs:
        raise ValueError("fleet_offset is set by run_ensemble (each chunk's first global fleet index)")
    unknown = sorted(set(kwargs) - set(_SIMULATE_OPTIONS))
    if unknown:
        raise TypeError(
            f"run_ensemble got unexpected keyword arguments {unknown}; simulate options: {_SIMULATE_OPTIONS}"
        )
    if kwargs.get("max_events") is not None:
        check_int("max_events", kwargs["max_events"], 1, 2**31 - 1)
    if "queue_size" in kwargs:
        check_int("queue_size", kwargs["queue_size"], 1)
    if "method" in kwargs:
        check_method(kwargs["method"])
    return dict(kwargs)


def _check_save(save):
    """``save`` as a `SaveAt`, or None where it asks for the default (the full trace only)."""
    if save is None:
        return None
    if not isinstance(save, SaveAt):
        raise ValueError(f"save must be None or a ckpt_jax.SaveAt, got {save!r}")
    if save.observers:
        raise ValueError(
            "run_ensemble stores the trace and the built-in observers (writers, gaps, jobs, power) in its "
            "chunks, not a user's observers: use simulate for SaveAt(observers=...)"
        )
    return None if save == SaveAt() else save


def _check_jitter(jitter, n_fleets: int):
    if jitter is None:
        return None
    try:
        sigma = np.asarray(jitter, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"jitter must be a number >= 0 or an array of shape ({n_fleets},), got {jitter!r}") from None
    if sigma.shape not in ((), (n_fleets,)):
        raise ValueError(f"jitter must be a scalar or have shape ({n_fleets},), got shape {sigma.shape}")
    if not (np.isfinite(sigma) & (sigma >= 0)).all():
        raise ValueError(f"jitter must be finite and >= 0, got {jitter!r}")
    return float(sigma) if sigma.ndim == 0 else sigma


# -- saved ensembles, read back as labelled data


# -- saved ensembles ---------------------------------------------------------------------------
def open_ensemble(path, *, lazy: bool | None = None, groups=None):
    """A saved ensemble (`ckpt_jax.ensemble.run_ensemble`'s ``out_dir``, or the folder
    ``ckpt-jax ensemble --out`` wrote) as an `xarray.Dataset`, equal bit for bit to the
    arrays `run_ensemble` returns.

    Nothing is written, locked or recomputed: every chunk file is checked (its chunk index
    and the manifest's fingerprint, its number of fleets, and its content against the hash
    the manifest records, when it is read) and a missing, foreign or edited one raises,
    naming it. A manifest saved before chunk hashes is read with a warning that its chunks
    are unchecked. Reading while a run writes is safe (chunk files appear whole).

    Args:
      path: the ensemble's folder (``manifest.json`` and ``chunk-*.npz``).
      lazy: read each array when it is computed, one dask chunk per chunk file (needs
        dask); False reads everything now; None: lazily where dask is installed.
      groups: optional (N,) job group labels (a ``group`` coordinate along ``job``).

    Returns:
      An `xarray.Dataset`: ``ok``, ``status`` and every stored array along ``fleet`` (the
      global fleet index), with the manifest's parameters as attributes. For example
      ``ds.gaps.min("cycle").plot.hist()``.

    Raises:
      ImportError: xarray is missing (or dask, with ``lazy=True``).
      FileNotFoundError: no ``manifest.json`` in ``path``.
      ValueError: an unreadable manifest, or a chunk missing, unreadable, not this
        ensemble's, or not the content the manifest records for it (rerun the ensemble to
        complete it; lazily, raised where the chunk is read).
    """
    require_xarray()
    if lazy is not None and not isinstance(lazy, bool):
        raise ValueError(f"lazy must be None, True or False, got {lazy!r}")
    dask = None
    if lazy is not False:
        try:  # an optional dependency, imported by name (the type checker need not resolve it)
            dask = importlib.import_module("dask")
            importlib.import_module("dask.array")
        except ImportError as err:
            if lazy:
                raise ImportError(f"open_ensemble(lazy=True) needs dask: pip install dask ({err})") from None
    out = Path(path)
    if not (out / MANIFEST).is_file():
        raise FileNotFoundError(f"{out} holds no {MANIFEST}: not a saved ensemble (run_ensemble's out_dir)")
    try:
        manifest = json.loads((out / MANIFEST).read_text())
    except (OSError, ValueError, RecursionError) as err:
        raise ValueError(f"{out / MANIFEST} is unreadable ({err!r})") from None
    if not isinstance(manifest, dict):  # valid JSON, but a list, a number, a string or null
        raise ValueError(f"{out / MANIFEST} is unreadable (JSON, but a {type(manifest).__name__}, not an object)")
    try:
        problem = _manifest.check_saved(manifest)
    except (ValueError, KeyError, TypeError, RecursionError) as err:
        raise ValueError(f"{out / MANIFEST} is unreadable ({err!r})") from None
    if manifest.get("format") != _manifest.FORMAT:
        raise ValueError(f"{out / MANIFEST} has format {manifest.get('format')!r}, not {_manifest.FORMAT!r}")
    if problem is not None:
        raise ValueError(f"{out / MANIFEST} cannot be trusted: {problem}")
    bounds = chunk_bounds(manifest["n_fleets"], manifest["chunk_size"])
    fingerprint = str(manifest["fingerprint"])
    try:
        hashes = _manifest.recorded_hashes(manifest, len(bounds))
    except ValueError as err:
        raise ValueError(f"{out / MANIFEST} cannot be trusted: {err}") from None
    if hashes is None:
        warnings.warn(
            f"{out / MANIFEST} records no content hashes of its chunks (saved by an older version): they are "
            "read unchecked; rerun the ensemble (it resumes, computing nothing) to record them",
            RuntimeWarning,
            stacklevel=2,
        )
    manifest = {name: value for name, value in manifest.items() if name != _manifest.HASHES}
    headers = [_chunk_header(out, index, stop - start, fingerprint) for index, (start, stop) in enumerate(bounds)]
    layout = {name: (shape[1:], dtype) for name, (shape, dtype) in headers[0].items()}
    for index, header in enumerate(headers):
        if {name: (shape[1:], dtype) for name, (shape, dtype) in header.items()} != layout:
            raise ValueError(f"{out / _chunk_name(index)} holds other arrays than {out / _chunk_name(0)}")
    expected = [_UNCHECKED] * len(bounds) if hashes is None else hashes
    for index, digest in enumerate(expected):
        if digest is None:  # before reading anything: the manifest does not vouch for this chunk
            raise ValueError(f"{out / _chunk_name(index)} {hash_problem('', None)}: rerun the ensemble")
    if dask is not None:
        # One read of each chunk file, checked against its hash, shared by its arrays.
        read = [dask.delayed(_read_chunk)(out / _chunk_name(index), digest) for index, digest in enumerate(expected)]
        arrays = {}
        for name, (rest, dtype) in layout.items():
            parts = [
                dask.array.from_delayed(read[index][name], (stop - start,) + rest, dtype)
                for index, (start, stop) in enumerate(bounds)
            ]
            arrays[name] = dask.array.concatenate(parts)
    else:
        arrays = {name: [] for name in layout}
        for index, digest in enumerate(expected):
            chunk = _read_chunk(out / _chunk_name(index), digest)
            for name in layout:
                arrays[name].append(chunk[name])
        arrays = {name: np.concatenate(parts) for name, parts in arrays.items()}
    ok, status = arrays.pop("ok"), arrays.pop("status")
    result = EnsembleResult(arrays, ok, status, 0, len(bounds), fingerprint, manifest)
    return ensemble_dataset(result, groups=groups)


def _read_chunk(path: Path, expected) -> dict:
    """Every array of a chunk file, its content checked against ``expected`` (the hash the
    manifest records; `_UNCHECKED`: none to check); raises `ValueError` where it differs."""
    try:
        arrays = _npz_arrays(path)
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as err:
        raise ValueError(f"{path} is unreadable ({err})") from None
    if expected is not _UNCHECKED:
        problem = hash_problem(_manifest.content_hash(arrays), expected)
        if problem is not None:
            raise ValueError(f"{path} {problem}: rerun the ensemble to recompute it")
    return arrays


def _chunk_header(out: Path, index: int, size: int, fingerprint: str) -> dict:
    """``{name: (shape, dtype)}`` of chunk ``index``'s arrays, read from the array headers
    (and its two tags) alone; raises `ValueError` where the chunk is not this ensemble's."""
    path = out / _chunk_name(index)
    if not path.is_file():
        raise ValueError(f"{path} is missing: the ensemble is not complete (rerun it to compute the rest)")
    header, tags = {}, {}
    try:
        with zipfile.ZipFile(path) as archive:
            for member in archive.namelist():
                name = member.removesuffix(".npy")
                with archive.open(member) as handle:
                    if name in _TAGS:
                        tags[name] = np.lib.format.read_array(handle, allow_pickle=False)
                        continue
                    version = np.lib.format.read_magic(handle)
                    if version == (1, 0):
                        shape, _, dtype = np.lib.format.read_array_header_1_0(handle)
                    elif version == (2, 0):
                        shape, _, dtype = np.lib.format.read_array_header_2_0(handle)
                    else:
                        raise ValueError(f"{member} has .npy format version {version}, not 1.0 or 2.0")
                    header[name] = (tuple(shape), dtype)
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as err:
        raise ValueError(f"{path} is unreadable ({err})") from None
    problem = chunk_problem(tags, {name: shape for name, (shape, _) in header.items()}, size, index, fingerprint)
    if problem is not None:
        raise ValueError(f"{path} {problem}: rerun the ensemble to recompute it")
    return header
