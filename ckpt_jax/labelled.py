"""Results as labelled data: `xarray.Dataset`s of traces, observers, ensembles and designs.

Every result keeps its axes by name: ``fleet`` (the batch; an ensemble's global fleet index),
``job``, ``cycle`` (the k-th firing), ``writers`` (the writer count n = 0..N), ``bound``
(an observation window's start and stop), power ``bin`` and ``edge``, and a design's
``step``. Each variable carries its meaning (``long_name``, ``description``) and units
(``units``: ``time`` in the units of T and d, ``job draw`` one job's full-speed power draw) in its
``attrs``; the dataset carries what the run was (``T``, ``d``, ``cap``, policies, the ensemble's
manifest and seed where known, the ckpt_jax version). Variable names are those of
`ckpt_jax.ensemble.EnsembleResult.arrays` (``gaps``, ``writers_time``, ``jobs_writes``,
``power_mean``, ...), the same for a `Trace` and a saved ensemble, so one notebook reads
both::

    ds = cj.open_ensemble("runs/storm")
    ds.gaps.min("cycle").plot.hist()
    trace.to_xarray(fleet).writers_time.mean("fleet").plot()

xarray is an optional dependency (``pip install "ckpt_jax[xarray]"``); this module imports
it only when called. It imports no result module: each result hands itself in
(``to_xarray``), so the results sit above it. `ckpt_jax.open_ensemble` (in
`ckpt_jax.ensemble`) reads a saved ensemble lazily, one dask chunk per chunk file, where dask
is installed, and into memory otherwise.
"""

from __future__ import annotations

import importlib
import json
import os
import shutil
import tempfile
import uuid
from pathlib import Path

import numpy as np

__all__ = [
    "INSTALL",
    "dataset",
    "ensemble_dataset",
    "assessment_dataset",
    "history_dataset",
    "remove_zarr_strays",
    "require_xarray",
    "write_zarr",
    "zarr_fingerprint",
    "zarr_missing",
]

INSTALL = 'pip install "ckpt_jax[xarray]"'
# Units as plot labels show them; the dataset's ``units`` attribute says what they are.
_TIME = "time"
_DRAW = "job draw"
_WORK = "work"
_UNITS = (
    "time: the units of T and d (and of the fleet file); work: compute work, units of T; "
    "job draw: one job's full-speed power draw, the units of cap"
)

# name -> (dimensions after the batch ones, long name, units, description).
_VARIABLES = {
    "fire_times": (("job", "cycle"), "firing time", _TIME, "start of the job's k-th write; NaN where none"),
    "end_times": (("job", "cycle"), "write end time", _TIME, "end of the write started by that firing"),
    "ok": ((), "run completed", None, "every active job fired and finished its writes"),
    "status": ((), "status bit flags", None, "ckpt_jax.Status bits; 0 where ok"),
    "n_events": ((), "event instants", None, "event instants stepped (simultaneous switches once)"),
    "time": ((), "stop time", _TIME, "simulated time at which the fleet stopped"),
    "writers_time": (("writers",), "time at n writers", _TIME, "time with exactly n writers in the window"),
    "writers_window": (("bound",), "observation window", _TIME, "ckpt_jax.analysis.observed_interval"),
    "writers_excursions": (("writers",), "entries into n_w >= n", None, "in the window; level 0 never"),
    "writers_max": ((), "largest writer count", None, "on the window; -1 where it is empty"),
    "gaps": (("cycle",), "smallest phase gap", _TIME, "smallest gap between consecutive firings of the cycle"),
    "order_changed": (("cycle",), "firing order changed", None, "from this cycle to the next (jitter)"),
    "jobs_write_time": (("job",), "time writing", _TIME, "abandoned writes included"),
    "jobs_compute_time": (("job",), "time computing", _TIME, "overlaps writing where alpha > 0"),
    "jobs_writes": (("job",), "writes completed", None, "started by a firing after t = 0"),
    "jobs_useful_work": (("job",), "useful work", _WORK, "compute work saved by a completed write"),
    "jobs_lost_work": (("job",), "lost work", _WORK, "compute work lost to failures"),
    "jobs_failures": (("job",), "failures", None, "-1 where the run did not complete"),
    "jobs_down_time": (("job",), "down time", _TIME, "restarting after failures"),
    "jobs_waste": (
        ("job",),
        "waste",
        "1",
        "steady state: 1 - (useful + uncovered work) / horizon (the work uncovered at H is not lost)",
    ),
    "jobs_covered_waste": (("job",), "covered waste", "1", "1 - useful work / horizon (uncovered work counted lost)"),
    "jobs_uncovered_work": (
        ("job",),
        "uncovered work",
        _WORK,
        "compute work done that no checkpoint covers at the stop and no failure took",
    ),
    "jobs_completed_write_time": (("job",), "time in completed writes", _TIME, "the writes counted in writes"),
    "jobs_snapshot_time": (("job",), "snapshot time", _TIME, "blocking snapshots of two-level checkpoints"),
    "jobs_wait_time": (("job",), "backpressure wait", _TIME, "next checkpoint due while a drain ran"),
    "jobs_persisted_work": (("job",), "persisted work", _WORK, "covered by a checkpoint whose drain ended"),
    "jobs_outage_failures": (("job",), "outage failures", None, "failures caused by common-cause outages"),
    "jobs_stagger_time": (("job",), "stagger time", _TIME, "time down for the restart stagger"),
    "jobs_outage_lost_work": (("job",), "outage lost work", _WORK, "compute work lost to outages"),
    "jobs_outage_down_time": (("job",), "outage down time", _TIME, "down after outages"),
    "jobs_overhead_time": (("job",), "overhead time", _TIME, "blocked in the fixed overheads of checkpoints"),
    "power_time": (("bin",), "time at power", _TIME, "time with the draw P in each bin"),
    "power_edges": (("edge",), "power bin edges", _DRAW, "SaveAt.power_bins"),
    "power_mean": ((), "mean power", _DRAW, "time-weighted mean of P over the run"),
    "power_max": ((), "largest power", _DRAW, "on an interval of positive length"),
    "power_min": ((), "smallest power", _DRAW, "on an interval of positive length"),
    "power_largest_drop": ((), "largest power drop", _DRAW, "at one instant, >= 0"),
    "power_largest_rise": ((), "largest power rise", _DRAW, "at one instant, >= 0"),
    "power_n_steps": ((), "power steps", None, "instants where |dP| > threshold"),
    "power_n_changes": ((), "power changes", None, "instants where P changed"),
    "power_threshold": ((), "step threshold", _DRAW, "SaveAt.power_threshold"),
    "power_full_draw": ((), "full draw W", _DRAW, "sum of the active jobs' sizes"),
}
_HISTORY = {
    "objective": (("step",), "smoothed waste", "1", "estimate of J_sigma at the step's theta"),
    "stderr": (("step",), "standard error", "1", "of the objective over the draws"),
    "grad_norm": (("step",), "gradient norm", None, "Euclidean norm of the estimate in theta"),
    "intervals": (("step", "job"), "checkpoint interval", _TIME, "T_i at the step"),
    "offsets": (("step", "job"), "launch offset", _TIME, "each job's cycle position at t = 0"),
}
# Fleet fields recorded (as attributes where uniform, else as coordinates): {field: (name, meaning)}.
# ``compute`` and ``size`` are methods of a Dataset: the model's T and the words job_size stand in.
_FLEET_FIELDS = {
    "compute": ("T", "T_i, solo compute work per cycle"),
    "write": ("d", "d_i, checkpoint write volume"),
    "cap": ("cap", "C, power cap (inf: none)"),
    "delay": ("delay", "write start delay"),
    "async_fraction": ("async_fraction", "alpha, fraction of a write overlapping compute"),
    "size": ("job_size", "w_i, job size (full-speed draw)"),
    "mtbf": ("mtbf", "M_i, mean time between failures (inf: none)"),
    "restart": ("restart", "R_i, restart time"),
    "failure_shape": ("failure_shape", "k_i, Weibull shape of the time to failure (1: exponential)"),
    "write_limit": ("write_limit", "b_i, per-job write limit (inf: none)"),
    "snapshot": ("snapshot", "s_i, blocking snapshot of two-level checkpoints"),
    "idle_power": ("idle_power", "p_idle, draw of a job that does not compute"),
}


def require_xarray():
    """The ``xarray`` module, or an `ImportError` saying what to install."""
    try:
        import xarray
    except ImportError as err:
        raise ImportError(f"labelled results (to_xarray, open_ensemble) need xarray: {INSTALL}") from err
    return xarray


def zarr_missing() -> str | None:
    """None where xarray and zarr import, else one sentence saying what to install (the CLI
    prints it and writes no ``.zarr``)."""
    for name in ("xarray", "zarr"):
        try:
            importlib.import_module(name)
        except ImportError:
            return f"{name} is not installed ({INSTALL})"
    return None


def write_zarr(ds, path) -> None:
    """Writes ``ds`` as a zarr group at ``path``, a folder that is either whole or absent.

    The group is written into a temporary folder beside ``path`` (``.NAME.*.tmp``) and
    renamed into place; an older ``path`` is first renamed aside (``.NAME.*.old``) and then
    removed, so a reader sees the old group, then the new one, never part of one. Zarr
    format 2 with consolidated metadata: every zarr-python and xarray reads it
    (``xarray.open_zarr(path)``, with no ckpt_jax). Dask arrays are written chunk by chunk.
    On any error the temporary folder is removed and the error propagates; `remove_zarr_strays`
    clears what a killed process leaves.
    """
    require_xarray()
    path = Path(path)
    from ._io import _umask

    tmp = Path(tempfile.mkdtemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp"))
    old = path.parent / f".{path.name}.{uuid.uuid4().hex}.old"
    try:
        tmp.chmod(0o777 & ~_umask())  # mkdtemp's 0700: a folder gets what mkdir would give
        ds.to_zarr(tmp, mode="w", zarr_format=2, consolidated=True)
        if os.path.lexists(path):
            os.rename(path, old)
        os.rename(tmp, path)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        if os.path.lexists(old) and not os.path.lexists(path):
            os.rename(old, path)  # the older group stays where the new one could not go
        raise
    if os.path.isdir(old) and not os.path.islink(old):
        shutil.rmtree(old)
    elif os.path.lexists(old):
        os.unlink(old)


def remove_zarr_strays(path) -> None:
    """Removes the temporary folders a killed `write_zarr` of ``path`` left beside it."""
    path = Path(path)
    for stray in [*path.parent.glob(f".{path.name}.*.tmp"), *path.parent.glob(f".{path.name}.*.old")]:
        if stray.is_dir() and not stray.is_symlink():
            shutil.rmtree(stray)
        else:
            stray.unlink()


def zarr_fingerprint(path) -> str | None:
    """The ``fingerprint`` attribute of the zarr group (format 2) at ``path``, or None."""
    try:
        attrs = json.loads((Path(path) / ".zattrs").read_text())
    except (OSError, ValueError, RecursionError):
        return None
    value = attrs.get("fingerprint") if isinstance(attrs, dict) else None
    return value if isinstance(value, str) else None


def _version() -> str:
    from ._version import __version__

    return __version__


def _batch_dims(ndim: int, batch_dims) -> tuple:
    if batch_dims is None:
        return () if ndim == 0 else ("fleet",) if ndim == 1 else tuple(f"fleet_{i}" for i in range(ndim))
    batch_dims = (batch_dims,) if isinstance(batch_dims, str) else tuple(batch_dims)
    if len(batch_dims) != ndim or not all(isinstance(d, str) and d for d in batch_dims):
        raise ValueError(f"batch_dims must name the {ndim} batch axes, got {batch_dims!r}")
    return batch_dims


def _labels(groups, n_jobs: int):
    if groups is None:
        return None
    if _is_fleet_file(groups):
        if groups.labels.shape != (n_jobs,):
            raise ValueError(
                f"groups: the fleet file {groups.path} has {groups.labels.size} jobs, the results {n_jobs}: "
                "give the fleet file that was run, or one label per job"
            )
        return np.asarray(groups.names, dtype=object)[groups.labels]  # each job's group name
    labels = np.asarray(groups)
    if labels.shape != (n_jobs,):
        raise ValueError(f"groups must have one label per job, shape ({n_jobs},), got shape {labels.shape}")
    return labels.astype(object) if labels.dtype.kind == "U" else labels


def _is_fleet_file(groups) -> bool:
    """Whether ``groups`` is a parsed fleet file (`ckpt_jax.fleetfile.FleetSpec`)."""
    return all(hasattr(groups, name) for name in ("labels", "names", "time_unit", "path"))


def dataset(arrays: dict, *, batch_ndim: int, batch_dims=None, groups=None, fleet=None, attrs=None, table=None):
    """An `xarray.Dataset` of named per-fleet arrays: what every ``to_xarray`` builds on.

    Args:
      arrays: ``{name: array}``, each of shape ``batch + rest``: NumPy, JAX or dask arrays
        (dask arrays stay lazy). Known names (those of `EnsembleResult.arrays`) get their
        dimensions, meaning and units; any other name gets ``fleet`` then ``{name}_dim_i``.
      batch_ndim: the number of leading batch axes.
      batch_dims: their names (default ``fleet`` for one axis, ``fleet_0``, ... for more).
      groups: optional (N,) job group labels, a ``group`` coordinate along ``job`` (a
        ValueError where no array has a ``job`` dimension); or a parsed fleet file
        (`ckpt_jax.fleetfile.FleetSpec`): its group names, and, for a file with units, times
        in seconds (``units`` "s").
      fleet: optional `ckpt_jax.Fleet` the arrays are results of: its parameters become
        attributes where uniform, coordinates where they vary.
      attrs: more dataset attributes (a seed, a name of the run).
      table: the variables' table (default: a run's).

    Returns:
      An `xarray.Dataset` with integer coordinates ``fleet``, ``job``, ``cycle``,
      ``writers``, ... along the dimensions present.
    """
    xarray = require_xarray()
    table = _VARIABLES if table is None else table
    batch = _batch_dims(batch_ndim, batch_dims)
    # A fleet file with units holds every time in seconds (ckpt_jax.fleetfile.FleetSpec.time_unit).
    spec = groups if _is_fleet_file(groups) else None
    seconds = spec is not None and getattr(spec, "time_unit", None) is not None
    variables, sizes = {}, {}
    for name, value in arrays.items():
        value = value if hasattr(value, "dask") else np.asarray(value)
        known = table.get(name)
        rest = known[0] if known is not None else tuple(f"{name}_dim_{i}" for i in range(value.ndim - batch_ndim))
        dims = batch + rest
        if value.ndim != len(dims):
            raise ValueError(f"{name!r} has shape {value.shape}: expected dimensions {dims}")
        sizes.update(zip(dims, value.shape))
        meta = {} if known is None else {"long_name": known[1], "description": known[3]}
        if known is not None and known[2] is not None:
            meta["units"] = "s" if seconds and known[2] in (_TIME, _WORK) else known[2]
        variables[name] = xarray.Variable(dims, value, attrs=meta)
    coords = {}
    for dim, size in sizes.items():
        if dim == "bound":
            # Python strings: zarr and netCDF store them as variable-length text.
            coords[dim] = ("bound", np.array(["start", "stop"], dtype=object))
        elif dim in batch or dim in ("job", "cycle", "writers", "bin", "edge", "step"):
            coords[dim] = (dim, np.arange(size))
    if "writers" in coords:
        coords["writers"] = ("writers", coords["writers"][1], {"long_name": "writer count n"})
    if "job" in sizes and groups is not None:
        coords["group"] = ("job", _labels(groups, sizes["job"]), {"long_name": "job group"})
    elif groups is not None and spec is None:
        # Per-job labels with nothing per job to label (WriterStats, PowerStats, a run that kept
        # no job arrays): refused, never dropped. A fleet file still gives its units.
        raise ValueError(
            f"groups: these results have no job dimension (variables {', '.join(variables)}), so there is "
            "nothing per job to label: give groups to JobStats.to_xarray or to Trace.to_xarray of a run that "
            "kept jobs, or leave it out (a parsed fleet file is accepted for its units)"
        )
    dataset_attrs = {"ckpt_jax_version": _version(), "units": _UNITS}
    if spec is not None:
        dataset_attrs["fleet_file"] = str(getattr(spec, "path", ""))
        if seconds:
            dataset_attrs["units"] = "time: s (the fleet file's units); " + _UNITS.split("; ", 1)[1]
    if fleet is not None:
        _check_fleet(fleet, tuple(sizes.get(dim) for dim in batch), sizes.get("job"))
        fleet_attrs, fleet_coords = _fleet_parameters(fleet, batch, sizes.get("job"))
        dataset_attrs.update(fleet_attrs)
        coords.update(fleet_coords)
    if attrs is not None and not isinstance(attrs, dict):
        raise ValueError(f"attrs must be None or a dict of dataset attributes, got {type(attrs).__name__}")
    dataset_attrs.update(attrs or {})
    return xarray.Dataset(variables, coords=coords, attrs=dataset_attrs)


def _check_fleet(fleet, batch_shape: tuple, n_jobs) -> None:
    from .model import Fleet

    if not isinstance(fleet, Fleet):
        raise ValueError(f"fleet must be None or the ckpt_jax.Fleet that was run, got {type(fleet).__name__}")
    if tuple(fleet.batch_shape) != batch_shape or (n_jobs is not None and fleet.n_jobs != n_jobs):
        jobs = "" if n_jobs is None else f" and {n_jobs} jobs"
        raise ValueError(
            f"fleet must be the fleet that was run: it has batch shape {tuple(fleet.batch_shape)} and "
            f"{fleet.n_jobs} jobs, the results batch shape {batch_shape}{jobs}"
        )


def _fleet_parameters(fleet, batch: tuple, n_jobs) -> tuple:
    """A fleet's parameters: attributes where one value holds for every job of every fleet,
    else coordinates over the batch (and job) dimensions."""
    attrs = {"power_policy": fleet.power_policy, "storage_policy": fleet.storage_policy}
    if bool(np.any(np.asarray(fleet.two_level))):
        attrs["recover_from"] = fleet.recover_from
    coords = {}
    shape = tuple(fleet.batch_shape)
    for field, (name, meaning) in _FLEET_FIELDS.items():
        value = np.asarray(getattr(fleet, field))
        if value.shape == shape:
            dims = batch
        elif n_jobs is not None and value.shape == shape + (n_jobs,):
            dims = batch + ("job",)
        else:
            dims = batch + tuple(f"{name}_dim_{i}" for i in range(value.ndim - len(shape)))
        if value.size and bool(np.all(value == value.reshape(-1)[0])):
            attrs[name] = value.reshape(-1)[0].item()
        elif len(dims) == value.ndim:
            coords[name] = (dims, value, {"long_name": meaning})
    attrs["parameters"] = "; ".join(f"{name}: {meaning}" for name, meaning in _FLEET_FIELDS.values())
    return attrs, coords


# -- results ---------------------------------------------------------------------------------
def trace_dataset(trace, *, fleet=None, groups=None, batch_dims=None, attrs=None):
    """`ckpt_jax.Trace.to_xarray`: the trace's recorded fields (`ckpt_jax.Trace.arrays`), one
    variable each."""
    arrays = {**trace.arrays(), "ok": np.asarray(trace.ok), "status": np.asarray(trace.status)}
    return dataset(
        arrays, batch_ndim=len(trace.batch_shape), batch_dims=batch_dims, groups=groups, fleet=fleet, attrs=attrs
    )


def stats_dataset(stats, prefix: str, *, fleet=None, groups=None, batch_dims=None, attrs=None):
    """``to_xarray`` of `WriterStats`, `JobStats` or `PowerStats`: ``{prefix}_{field}`` variables."""
    arrays = {f"{prefix}_{name}": value for name, value in stats._asdict().items() if value is not None}
    reference = {"writers": "max", "jobs": "write_time", "power": "mean"}[prefix]
    ndim = np.ndim(getattr(stats, reference)) - (1 if prefix == "jobs" else 0)
    return dataset(arrays, batch_ndim=ndim, batch_dims=batch_dims, groups=groups, fleet=fleet, attrs=attrs)


def _manifest_attrs(manifest) -> dict:
    """An ensemble manifest as dataset attributes: every field as JSON (``manifest``), and
    its parameters as plain attributes (netCDF and zarr keep numbers and strings)."""
    if not manifest:
        return {}
    attrs = {"manifest": json.dumps(manifest, sort_keys=True), "fingerprint": manifest.get("fingerprint", "")}
    for name in ("n_fleets", "chunk_size", "n_fires"):
        if name in manifest:
            attrs[name] = manifest[name]
    if isinstance(manifest.get("jitter"), (int, float)):
        attrs["jitter"] = manifest["jitter"]
    chunk = manifest.get("make_chunk") if isinstance(manifest.get("make_chunk"), dict) else {}
    for field in ("compute", "write", "cap", "delay", "async_fraction", "dtype"):
        value = chunk.get(field)
        if isinstance(value, list) and value and all(v == value[0] for v in value):
            value = value[0]  # identical jobs: one number
        if isinstance(value, (int, float, str)) and not isinstance(value, bool):
            attrs[_FLEET_FIELDS[field][0] if field in _FLEET_FIELDS else field] = value
    config = manifest.get("config")
    config = config if isinstance(config, dict) else {}
    parameters = config.get("parameters")
    parameters = parameters if isinstance(parameters, dict) else config
    for name, value in parameters.items():  # the CLI's seed, load, policies
        if isinstance(value, (int, float, str)) and not isinstance(value, bool) and name not in attrs:
            attrs[name] = value
    return attrs


def ensemble_dataset(result, *, groups=None, attrs=None, arrays=None):
    """`EnsembleResult.to_xarray`: ``ok``, ``status`` and every array, ``fleet`` the global
    fleet index, the manifest as attributes (``arrays`` replaces the result's, e.g. lazily).
    The CLI's ``smallest_gap`` is named ``gaps``, as `SaveAt` names the same numbers."""
    arrays = {**(result.arrays if arrays is None else arrays)}
    if "smallest_gap" in arrays and "gaps" not in arrays:
        # The CLI's name for what SaveAt(gaps=True) calls gaps (the same numbers): one name in notebooks.
        arrays = {("gaps" if name == "smallest_gap" else name): value for name, value in arrays.items()}
    arrays.setdefault("ok", result.ok)
    arrays.setdefault("status", result.status)
    return dataset(arrays, batch_ndim=1, groups=groups, attrs={**_manifest_attrs(result.manifest), **(attrs or {})})


def history_dataset(history, *, groups=None, attrs=None):
    """`ckpt_jax.design.History.to_xarray`: one row per optimisation step."""
    arrays = {name: value for name, value in history._asdict().items() if value is not None}
    return dataset(arrays, batch_ndim=0, groups=groups, attrs=attrs, table=_HISTORY)


# -- assessments -------------------------------------------------------------------------------
_FRACTION = "1"
_GPU_HOURS = "GPU-hours per day"
# Estimates (a mean over the draws and its 95% CI): name -> (dims, long name, units, description);
# units None here: the assessment's power unit. Each becomes NAME_mean, NAME_low and NAME_high.
_ASSESSMENT_ESTIMATES = {
    "goodput": (("group",), "goodput", _FRACTION, "GPU-weighted fraction of wall-clock time saved as compute work"),
    "lost_fraction": (("group", "cause"), "time lost", _FRACTION, "GPU-weighted fraction of wall-clock time lost"),
    "gpu_hours_lost_per_day": (("group", "cause"), "GPU-hours lost", _GPU_HOURS, "lost fraction x GPUs x 24"),
    "saturated_time": ((), "time saturated", _FRACTION, "fraction of the window with >= saturation_writers"),
    "power_mean": ((), "mean power", None, "time-weighted mean of the fleet's draw"),
    "power_max": ((), "largest power", None, "of the fleet's draw"),
    "power_largest_drop": ((), "largest power drop", None, "at one instant"),
    "power_largest_rise": ((), "largest power rise", None, "at one instant"),
    "cap_time": ((), "time at the cap", _FRACTION, "fraction of time with the draw at the cap (absent: no cap)"),
    "throttled": ((), "throttled", _FRACTION, "fleet's GPU time lost to computing below full speed"),
    "throttled_gpu_hours_per_day": ((), "GPU-hours throttled", _GPU_HOURS, "throttled x GPUs x 24"),
}
_ASSESSMENT_ARRAYS = {
    "gpus": (("group",), "GPUs", "GPU", "the sum of the group's job sizes"),
    "writer_time": (("writers",), "time at n writers", _FRACTION, "fraction of the window, pooled over draws"),
    "independent_writer_time": (
        ("writers",),
        "time at n writers, independent phases",
        _FRACTION,
        "the same were the jobs' phases independent (Poisson-binomial)",
    ),
    "power_time": (("bin",), "time at power", _FRACTION, "fraction of the time with the draw in each bin"),
    "power_edges": (("edge",), "power bin edges", None, "bin i is [edge i, edge i + 1)"),
    "power_largest_drop_max": ((), "largest power drop in any draw", None, "at one instant, the max over the draws"),
    "power_largest_rise_max": ((), "largest power rise in any draw", None, "at one instant, the max over the draws"),
}
_ESTIMATE_PARTS = {"mean": "mean over the draws", "low": "95% CI low", "high": "95% CI high"}


def assessment_dataset(assessment, causes, *, attrs=None):
    """`ckpt_jax.assess.Assessment.to_xarray`: one dataset of an assessment.

    Dimensions ``group`` (the group names, then ``"fleet"``), ``cause`` (``causes``, the
    names of the assessment's causes in order: `ckpt_jax.assess.CAUSES`), ``writers``
    (n = 0..N), power ``bin`` and ``edge``. Each estimate is three variables, ``NAME_mean``,
    ``NAME_low`` and ``NAME_high`` (a 95% CI over the draws): ``goodput_*`` per group,
    ``lost_fraction_*`` and ``gpu_hours_lost_per_day_*`` per group and cause, and 0-d
    ``saturated_time_*``, ``power_*``, ``cap_time_*`` (absent without a cap),
    ``throttled_*``; with ``gpus`` per group, ``writer_time``, ``independent_writer_time``,
    ``power_time``, ``power_edges`` and 0-d ``power_largest_drop_max`` and
    ``power_largest_rise_max`` (the largest step at one instant in any draw; the
    ``power_largest_*_mean`` are means over the draws of each draw's largest). The scalars
    (horizon, draws, writer percentiles, saturation count, power unit) and each group's jobs
    (JSON) are attributes; every variable's ``units`` says what it counts. ``writers_observed`` is 0
    where no draw observed the writer count: ``writer_time`` and ``saturated_time_*`` are
    NaN and the writer percentiles absent.
    """
    if attrs is not None and not isinstance(attrs, dict):
        raise ValueError(f"attrs must be None or a dict of dataset attributes, got {type(attrs).__name__}")
    names = list(assessment.goodput)
    table = {**_ASSESSMENT_ARRAYS}
    arrays = {
        "gpus": np.array([assessment.gpus[name] for name in names], np.float64),
        "writer_time": np.asarray(assessment.writer_time, np.float64),
        "independent_writer_time": np.asarray(assessment.independent_writer_time, np.float64),
        "power_time": np.asarray(assessment.power_time, np.float64),
        "power_edges": np.asarray(assessment.power_edges, np.float64),
        "power_largest_drop_max": np.asarray(assessment.power_largest_drop_max, np.float64),
        "power_largest_rise_max": np.asarray(assessment.power_largest_rise_max, np.float64),
    }
    estimates = {
        "goodput": [assessment.goodput[name] for name in names],
        "lost_fraction": [[assessment.losses[name][c] for c in causes] for name in names],
        "gpu_hours_lost_per_day": [[assessment.gpu_hours_lost_per_day[name][c] for c in causes] for name in names],
    }
    for field in list(_ASSESSMENT_ESTIMATES)[3:]:
        if getattr(assessment, field) is not None:
            estimates[field] = getattr(assessment, field)
    for field, value in estimates.items():
        dims, long_name, units, description = _ASSESSMENT_ESTIMATES[field]
        values = np.array(value, np.float64)  # (..., 3): mean, low, high
        for index, (part, meaning) in enumerate(_ESTIMATE_PARTS.items()):
            table[f"{field}_{part}"] = (dims, f"{long_name} ({meaning})", units, description)
            arrays[f"{field}_{part}"] = values[..., index]
    power_unit = assessment.power_unit
    table = {
        name: (dims, long_name, power_unit if units is None else units, description)
        for name, (dims, long_name, units, description) in table.items()
    }
    own_attrs = {
        "units": (
            "fractions: of wall-clock time (GPU-weighted); GPU-hours per day; power: "
            f"{power_unit} ({'watts' if power_unit == 'W' else 'one GPU full-speed draw'}); "
            "horizon: the fleet's time unit"
        ),
        "horizon": assessment.horizon,
        "horizon_hours": assessment.horizon * assessment.hours_per_time_unit,
        "hours_per_time_unit": assessment.hours_per_time_unit,
        "n_draws": assessment.n_draws,
        "power_unit": power_unit,
        "writers_observed": int(assessment.writers_observed),  # netCDF has no boolean attributes
        "writers_p50": assessment.writers_p50,
        "writers_p99": assessment.writers_p99,
        "writers_max": assessment.writers_max,
        "saturation_writers": assessment.saturation_writers,
        "groups": json.dumps({name: list(jobs) for name, jobs in assessment.groups.items()}),
        "causes": ", ".join(causes) + ": see ckpt_jax.assess",
    }
    if not assessment.writers_observed:  # NaN percentiles are left out: NaN is no JSON value (zarr's attributes)
        del own_attrs["writers_p50"], own_attrs["writers_p99"]
    ds = dataset(arrays, batch_ndim=0, table=table, attrs={**own_attrs, **(attrs or {})})
    # Python strings: zarr and netCDF store them as variable-length text.
    return ds.assign_coords(
        group=("group", np.array(names, dtype=object), {"long_name": "job group ('fleet': every job)"}),
        cause=("cause", np.array(causes, dtype=object), {"long_name": "cause of lost GPU time"}),
    )
