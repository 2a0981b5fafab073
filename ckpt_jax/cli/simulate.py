"""``ckpt-jax simulate``: B fleets of N identical jobs, their trace, summary and figure."""

from __future__ import annotations

import json
import math
import platform
import sys
import time
from pathlib import Path

import numpy as np

from ._common import (
    CSV_COLUMNS,
    PROGRESS_WORK,
    SEED_KEY_TEXT,
    CliError,
    _fraction,
    add_devices,
    add_fleet_options,
    add_x64,
    check_period,
    devices_for,
    finite_or_none,
    fleet_keywords,
    integer,
    policy_parameters,
    real,
    report_devices,
    seed_key,
)
from ._options import add_force, add_horizon, add_no_progress, add_out, add_seed, horizon_value


def add_simulate(subparsers) -> None:
    parser = subparsers.add_parser(
        "simulate",
        help="simulate a fleet of identical checkpointing jobs and write its trace",
        description=(
            "Simulate B fleets of N identical jobs (compute T, then a blocking write of "
            "volume d) exactly, event to event, for K cycles each, and write trace.csv, "
            "trace.npz, summary.json and trace.png (fleet 0) into --out."
        ),
    )
    add_fleet_options(parser)
    _add_checkpoint_options(parser)
    add_force(parser)
    parser.add_argument(
        "--fleet",
        type=Path,
        default=None,
        metavar="FLEET.toml",
        help="take the fleet (groups, sizes, writes, MTBF, restart, storage, cap, "
        "policies) from a fleet file (see examples/fleet.toml); excludes the options "
        "that describe the fleet (--jobs, --compute, --write, --cap, ...)",
    )
    parser.add_argument(
        "--logs",
        type=Path,
        default=None,
        metavar="DIR",
        help="with --fleet: also write the run's logs as a cluster keeps them, jobs.csv, writes.csv "
        "and failures.csv (fleet 0; times to the millisecond), the input of `ckpt-jax fit`. Its failures "
        "and outages are drawn on the host by the file's laws from --seed and replayed exactly",
    )
    _mark_defaults(parser)
    # Every fleet stops at t = H; --cycles then only sizes the trace.
    add_horizon(parser, "none: K cycles; with --fleet, whose jobs fail, the file's [design].horizon")
    parser.add_argument(
        "--cycles",
        type=integer(1),
        default=None,
        metavar="K",
        help="firings (checkpoints) recorded per job (default: 50; with a horizon, as many as "
        f"record every firing up to it, at most {_TRACE_SLOTS_MAX:,} slots in all; the run says "
        "how much it recorded)",
    )
    parser.add_argument(
        "--fleets",
        type=integer(1),
        default=1,
        metavar="B",
        help="ensemble size (independent launches); the figure shows fleet 0 (default: %(default)s)",
    )
    parser.add_argument(
        "--start",
        choices=("random", "sync", "stagger", "launch"),
        default=None,
        help="random: uniform cycle positions; sync: all start computing "
        "together; stagger: evenly spaced cycle positions; launch: the fleet file's [launch] "
        "table (default: launch with --fleet, else random)",
    )
    add_seed(parser, default=None)
    add_no_progress(parser)
    add_devices(parser)
    add_x64(parser)
    add_out(parser)
    parser.set_defaults(run=_simulate, check=_check, resumes=False)


# Without --cycles and without a horizon: this many firings per job.
_CYCLES_DEFAULT = 50


# With a horizon and without --cycles, the trace records every firing up to it, in at most
# this many (fleet, job, firing) slots (its CSV is about 60 bytes a slot).
_TRACE_SLOTS_MAX = 2_000_000


# The options that describe the fleet; --fleet takes all of them from the file.
_FLEET_OPTIONS = {
    "jobs": "--jobs",
    "compute": "--compute",
    "write": "--write",
    "cap": "--cap",
    "throughput": "--throughput",
    "delay": "--delay",
    "async_fraction": "--async-fraction",
    "size": "--size",
    "power_policy": "--power-policy",
    "storage_policy": "--storage-policy",
    "write_limit": "--write-limit",
    "snapshot": "--snapshot",
    "recover_from": "--recover-from",
    "idle_power": "--idle-power",
}


def _add_checkpoint_options(parser) -> None:
    """Write limits, two-level checkpoints and the power draw (docs/model.md §1d)."""
    from .._policies import RECOVERY_SOURCES

    parser.add_argument(
        "--write-limit",
        type=real(positive=True),
        default=None,
        metavar="b",
        help="each job's write limit: it drains no faster than b (volume per time), the storage's "
        "f(n) shared by water-filling under the limits (default: none)",
    )
    parser.add_argument(
        "--snapshot",
        type=real(positive=False),
        default=None,
        metavar="s",
        help="two-level checkpoints: a blocking snapshot of s, then the write drains in the "
        "background while the job computes; excludes --async-fraction (default: blocking writes)",
    )
    parser.add_argument(
        "--recover-from",
        choices=RECOVERY_SOURCES,
        default="storage",
        help="with --snapshot, what a failure recovers from (--fleet: the file's jobs fail) (default: %(default)s)",
    )
    parser.add_argument(
        "--idle-power",
        type=_fraction,
        default=0.0,
        metavar="P",
        help="power drawn per unit size by a job that does not compute, for --power (default: 0)",
    )
    parser.add_argument(
        "--power",
        action="store_true",
        help="observe the fleet's power draw: print its mean, max, min, largest drop and rise and "
        "the steps over 0.1 of the full draw (fleet 0), and add them to summary.json (every fleet)",
    )


class _Default:
    """An option's default, marked so that `_check` can tell it from a value given."""

    def __init__(self, value):
        self.value = value

    def __str__(self):  # for %(default)s in the help
        return str(self.value)

    def __format__(self, spec):  # for %(default)g
        return format(self.value, spec)

    def __float__(self):
        return float(self.value)


def _mark_defaults(parser) -> None:
    for action in parser._actions:
        if action.dest in _FLEET_OPTIONS:
            action.default = _Default(action.default)


def _check(args) -> None:
    given = [option for dest, option in _FLEET_OPTIONS.items() if not isinstance(getattr(args, dest), _Default)]
    for dest in _FLEET_OPTIONS:
        value = getattr(args, dest)
        if isinstance(value, _Default):
            setattr(args, dest, value.value)
    args.spec = None
    if args.logs is not None and args.fleet is None:
        raise CliError("--logs needs --fleet: the logs name the fleet file's groups, nodes and failures")
    if args.fleet is not None:
        if given:
            raise CliError(
                f"--fleet and {given[0]} both describe the fleet: the fleet file gives "
                f"{', '.join(_FLEET_OPTIONS.values())}; drop {' '.join(given)} or --fleet"
            )
        from ..fleetfile import load

        args.spec = load(args.fleet, dtype=np.float64 if args.x64 else np.float32)
        args.jobs = args.spec.n_jobs
        if args.start is None:  # the file's [launch], where it has one
            args.start = "random" if args.spec.launch.mode == "random" else "launch"
        if args.seed is None:
            args.seed = args.spec.design.seed
        if args.horizon is None:
            # Failures abandon writes, so a run of K completed cycles per job has no bound:
            # a fleet file's run stops at a horizon.
            args.horizon = args.spec.design.horizon
        else:
            args.horizon = horizon_value(args.horizon, args.spec.time_unit)
        return
    if args.start == "launch":
        raise CliError("--start launch takes the fleet file's [launch] table: it needs --fleet")
    if args.start is None:
        args.start = "random"
    if args.seed is None:
        args.seed = 0
    if args.horizon is not None:
        args.horizon = horizon_value(args.horizon, None, fleet_file=False)
    check_period(args.compute, args.write)
    if args.snapshot is not None and args.async_fraction > 0:
        raise CliError(
            "--snapshot and --async-fraction exclude each other: a two-level checkpoint computes at full "
            "speed while its write drains"
        )
    if args.recover_from != "storage" and args.snapshot is None:
        raise CliError(f"--recover-from {args.recover_from} needs --snapshot (two-level checkpoints)")


def _checkpoint_keywords(args) -> dict:
    """The `Fleet` keyword arguments of `_add_checkpoint_options`."""
    return dict(
        write_limit=args.write_limit,
        snapshot=args.snapshot,
        recover_from=args.recover_from,
        idle_power=args.idle_power,
    )


def _checkpoint_parameters(args) -> dict:
    """`_add_checkpoint_options` as summary entries, only where given (a run without them
    writes the summary it wrote before)."""
    defaults = {"write_limit": None, "snapshot": None, "recover_from": "storage", "idle_power": 0.0}
    return {name: getattr(args, name) for name, value in defaults.items() if getattr(args, name) != value}


# PowerStats fields in summary.json, per fleet.
_POWER_FIELDS = ("mean", "max", "min", "largest_drop", "largest_rise", "n_steps", "n_changes", "threshold", "full_draw")


def _power_summary(power) -> dict:
    return {name: np.asarray(getattr(power, name)).tolist() for name in _POWER_FIELDS}


def _power_line(power) -> str:
    """Fleet 0's power draw in one line."""
    value = {name: np.asarray(getattr(power, name)).reshape(-1)[0] for name in _POWER_FIELDS}
    return (
        f"ckpt-jax simulate: power draw of fleet 0 (full draw W = {value['full_draw']:g}): mean {value['mean']:.4g}, "
        f"max {value['max']:.4g}, min {value['min']:.4g}, largest drop {value['largest_drop']:.4g}, largest rise "
        f"{value['largest_rise']:.4g}, {int(value['n_steps'])} steps over {value['threshold']:.4g} "
        f"(of {int(value['n_changes'])} changes)"
    )


def _initial_state(fleet, start: str, seed: int, spec=None):
    from .. import initial_state, random_state, state_from_positions

    if start == "launch":  # the fleet file's [launch] (docs/model.md §1f)
        from ..design import Launch, start_state

        assert spec is not None
        return start_state(fleet, Launch(*spec.launch), seed_key(seed))
    if start == "random":
        return random_state(fleet, seed_key(seed))
    if start == "sync":
        return initial_state(fleet)
    from ..design import launch_cycle, launch_state

    if not fleet.has_snapshots:
        # Evenly spaced cycle positions θ_i = i (T + d) / N: job 0 has just fired.
        cycle = np.asarray(fleet.compute, np.float64) + np.asarray(fleet.write, np.float64)
        n_jobs = fleet.n_jobs
        return state_from_positions(fleet, cycle * np.arange(n_jobs) / n_jobs)
    # Two-level: evenly spaced points i T / N of the compute phase, no drain in flight (as
    # `cj.random_state` starts such jobs).
    return launch_state(fleet, launch_cycle(fleet) * np.arange(fleet.n_jobs) / fleet.n_jobs)


def _write_csv(handle, fire_times: np.ndarray, end_times: np.ndarray) -> None:
    """One row per (fleet, job, cycle); %.17g round-trips float64 exactly, NaN as 'nan'."""
    n_fleets, n_jobs, n_cycles = fire_times.shape
    fleet, job, cycle = np.meshgrid(np.arange(n_fleets), np.arange(n_jobs), np.arange(n_cycles), indexing="ij")
    table = np.column_stack([fleet.ravel(), job.ravel(), cycle.ravel(), fire_times.ravel(), end_times.ravel()])
    np.savetxt(
        handle,
        table,
        fmt=["%d", "%d", "%d", "%.17g", "%.17g"],
        delimiter=",",
        header=",".join(CSV_COLUMNS),
        comments="",
    )


def _fleet(args):
    """The (B, N) fleet of the options, or of the fleet file."""
    from .. import Fleet

    n_fleets, n_jobs = args.fleets, args.jobs
    if args.spec is not None:
        one = args.spec.fleet(dtype=np.float64 if args.x64 else np.float32)
        return args.spec.fleet(
            np.broadcast_to(np.asarray(one.compute, np.float64), (n_fleets, n_jobs)), dtype=one.dtype
        )
    return Fleet(
        np.full((n_fleets, n_jobs), args.compute),
        np.full((n_fleets, n_jobs), args.write),
        **fleet_keywords(args, n_jobs),
        **_checkpoint_keywords(args),
    )


def _cycles(args, fleet) -> int:
    """K, the firings recorded per job: ``--cycles``; else, with a horizon, enough for every
    firing up to it (a job fires at most once per compute phase, T of work at a speed <= 1;
    with jitter, T - 4σ, at least T / 4), at most `_TRACE_SLOTS_MAX` slots in all; else 50."""
    if args.cycles is not None:
        return args.cycles
    if args.horizon is None:
        return _CYCLES_DEFAULT
    compute = np.asarray(fleet.compute, np.float64)[np.asarray(fleet.active, bool)]
    shortest = float(compute.min())
    if args.jitter > 0:
        shortest = max(shortest - 4 * args.jitter, shortest / 4)
    needed = math.floor(args.horizon / shortest) + 1
    return max(1, min(needed, _TRACE_SLOTS_MAX // (args.fleets * args.jobs)))


def recorded_until(fire_times: np.ndarray, horizon: float | None) -> float | None:
    """The time up to which a (B, N, K) trace holds every firing: the horizon where no job
    filled its K slots, else the earliest last firing of a job that did (its later firings
    are not recorded). None without a horizon where every job filled its slots (the run
    stopped at the K-th firings: every firing is recorded)."""
    full = np.isfinite(fire_times[..., -1])
    if not full.any():
        return horizon
    return float(np.min(fire_times[..., -1][full]))


def _time_scale(args) -> tuple:
    """(engine time per shown unit, the unit's name or None): a fleet file's ``time_unit``
    (its engine runs in seconds), else the units of --compute."""
    from .assess import _seconds_per

    unit = None if args.spec is None else args.spec.time_unit
    return _seconds_per(unit), unit


def _coverage_line(args, until: float | None, n_cycles: int) -> str:
    """What the trace holds, in one line."""
    from .assess import duration_text

    unit = _time_scale(args)[1]
    slots = f"K = {n_cycles:,} slots per job"
    if args.horizon is None:
        return f"ckpt-jax simulate: the trace holds the first {n_cycles:,} firings of every job"
    horizon = duration_text(args.horizon, unit)
    if until is not None and until >= args.horizon:
        return f"ckpt-jax simulate: the trace holds every firing up to the horizon, {horizon} ({slots})"
    shown = "the start" if until is None else duration_text(until, unit)
    return (
        f"ckpt-jax simulate: the trace holds the first {n_cycles:,} firings per job: every firing up to "
        f"{shown} of the {horizon} horizon (--cycles records more)"
    )


def _write_traces(out: Path, trace) -> None:
    """trace.csv and trace.npz, each written atomically: complete (this run's) or as it was before."""
    from ..files import atomic_write

    atomic_write(out / "trace.csv", lambda handle: _write_csv(handle, trace.fire_times, trace.end_times))
    atomic_write(
        out / "trace.npz",
        lambda handle: np.savez(
            handle,
            fire_times=trace.fire_times,
            end_times=trace.end_times,
            ok=trace.ok,
            status=trace.status,
            n_events=trace.n_events,
            time=trace.time,
        ),
    )


def _parameters(args) -> dict:
    """summary.json's ``parameters``: the options (with --fleet, the file and the run's own)."""
    parameters = {
        "jobs": args.jobs,
        "compute": args.compute,
        "write": args.write,
        "cap": args.cap,
        "throughput": args.throughput,
        "jitter": args.jitter,
        "delay": args.delay,
        "async_fraction": args.async_fraction,
        "seed": args.seed,
        "cycles": args.cycles,
        "fleets": args.fleets,
        "start": args.start,
        "x64": args.x64,
        **policy_parameters(args),
        **_checkpoint_parameters(args),
        **({} if args.horizon is None else {"horizon": args.horizon}),
    }
    if args.spec is None:
        return parameters
    run_only = ("jitter", "seed", "cycles", "fleets", "start", "x64", "horizon")
    return {"fleet": args.spec.to_dict(), **{name: parameters[name] for name in run_only}}


def _load(args, fleet) -> float:
    """The fleet's load Σ D / period (fleet 0)."""
    if args.spec is not None:
        return float(np.sum(args.spec.solo_write_time() / args.spec.period()))
    if args.write_limit is not None or args.snapshot is not None:  # D / period, as the fleet has them
        return float(np.sum(np.asarray(fleet.solo_write, np.float64)[0] / np.asarray(fleet.period, np.float64)[0]))
    return args.jobs * args.write / (args.compute + args.write)


def _summary(args, fleet, trace, wall_s: float, device_summary: dict) -> dict:
    import jax

    from .. import __version__, describe_status
    from ..analysis import writer_count

    status_all = int(np.bitwise_or.reduce(trace.status.ravel()))
    _, counts = writer_count(trace.fire_times[0], trace.end_times[0])
    return {
        "command": "simulate",
        "version": __version__,
        "parameters": _parameters(args),
        "keys": {
            "seed": SEED_KEY_TEXT,
            "start": "key(seed) (used only by --start random)",
            "jitter": "jax.random.fold_in(key(seed), 1)",
            "failures": "jax.random.fold_in(key(seed), 1) (--fleet: the file's MTBF)",
        },
        "dtype": str(fleet.dtype),
        "load": _load(args, fleet),
        "ok": bool(trace.ok.all()),
        "fleets_ok": int(trace.ok.sum()),
        "status": status_all,
        "status_text": describe_status(status_all),
        "events_total": int(trace.n_events.sum()),
        "events_per_fleet_max": int(trace.n_events.max()),
        "simulated_time_max": finite_or_none(np.nanmax(trace.time)),
        "max_recorded_writers_fleet0": int(counts.max()) if counts.size else 0,
        "wall_time_s": wall_s,
        "backend": jax.default_backend(),
        "devices": device_summary,
        "python": platform.python_version(),
        "jax": jax.__version__,
        "files": ["trace.csv", "trace.npz", "summary.json", "trace.png"],
        "csv_columns": list(CSV_COLUMNS),
        "notes": "cycle is the 0-based firing index after t = 0; fire/end times of "
        "padding or unfinished windows are NaN. Windows in progress at t = 0 are not recorded. "
        "Times are in the engine's unit (seconds in a fleet file with units; time_unit is the one "
        "trace.png shows). recorded_until: every firing up to it is in the trace (null: the run "
        "stopped at each job's K-th firing). goodput: per fleet, the GPU-weighted share of the "
        "horizon's GPU time that a failure can no longer take, as assess counts it; failures: per "
        "fleet, the failures of its jobs (outage_failures: those that outages caused).",
        **({"power": _power_summary(trace.power)} if args.power else {}),
        **_coverage(args, trace),
        **({} if trace.jobs is None else _goodput_and_failures(args, fleet, trace.jobs)),
    }


def _coverage(args, trace) -> dict:
    """summary.json's account of what the trace holds (times in the engine's unit)."""
    until = recorded_until(trace.fire_times, args.horizon)
    return {
        "time_unit": _time_scale(args)[1],
        "recorded_cycles": int(trace.fire_times.shape[-1]),
        "recorded_until": until,
        "recorded_whole_run": until is None or (args.horizon is not None and until >= args.horizon),
    }


def _goodput_and_failures(args, fleet, jobs) -> dict:
    """Per fleet, the goodput over the horizon (GPU-weighted, as ``assess`` counts it) and the
    failures, of the fleet and of each group of a fleet file."""
    from ..assess import _time_split

    active = np.asarray(fleet.active, bool)
    sizes = np.where(active, np.broadcast_to(np.asarray(fleet.size, np.float64), active.shape), 0.0)
    import jax

    # One fleet at a time: `_time_split` reads each fleet's scalar settings.
    goodput = np.stack(
        [
            _time_split(fleet[b], jax.tree_util.tree_map(lambda x, b=b: x[b], jobs), args.horizon)[0]
            for b in range(args.fleets)
        ]
    )
    goodput = np.where(active, goodput, 0.0)
    failures = np.where(active, np.asarray(jobs.failures), 0)
    outage_failures = np.where(active, np.asarray(jobs.outage_failures), 0)
    members = {"fleet": np.ones(active.shape[-1], bool)}
    if args.spec is not None:
        labels = np.asarray(args.spec.labels)
        members.update({name: labels == index for index, name in enumerate(args.spec.names)})

    def weighted(values, member):
        weight = np.where(member, sizes, 0.0)
        return (np.sum(values * weight, axis=-1) / np.sum(weight, axis=-1)).tolist()

    return {
        "goodput": {name: weighted(goodput, member) for name, member in members.items()},
        "failures": {name: np.sum(np.where(member, failures, 0), axis=-1).tolist() for name, member in members.items()},
        "outage_failures": {
            name: np.sum(np.where(member, outage_failures, 0), axis=-1).tolist() for name, member in members.items()
        },
    }


def _goodput_line(summary: dict) -> str:
    """Fleet 0's goodput and failures in one line."""
    goodput, failures = summary["goodput"]["fleet"][0], summary["failures"]["fleet"][0]
    return (
        f"ckpt-jax simulate: fleet 0 over the horizon: goodput {100 * goodput:.2f} %, "
        f"{failures:,} failure{'s' * (failures != 1)}"
    )


def _title(args) -> str:
    """trace.png's title: fleet 0 and what shapes it."""
    n_fleets, n_jobs = args.fleets, args.jobs
    if args.spec is not None:
        spec = args.spec
        cap = "uncapped" if spec.cap is None else f"C={spec.cap:g}"
        throughput = spec.throughput if isinstance(spec.throughput, str) else "list"
        return (
            f"fleet 0 of {n_fleets}: {Path(spec.path).name}, N={n_jobs} in {len(spec.groups)} groups, "
            f"{cap}, f={throughput}, σ={args.jitter:g}, start={args.start}, seed={args.seed}"
        )
    cap = "uncapped" if args.cap is None else f"C={args.cap:g}"
    title = (
        f"fleet 0 of {n_fleets}: N={n_jobs}, T={args.compute:g}, d={args.write:g}, {cap}, "
        f"f={args.throughput}, σ={args.jitter:g}, start={args.start}, seed={args.seed}"
    )
    for name, value in (("b", args.write_limit), ("s", args.snapshot)):
        title += "" if value is None else f", {name}={value:g}"
    if args.size is not None:  # sizes and policies shape the picture: name them
        title += (
            f"\nsizes {','.join(f'{w:g}' for w in args.size)}, {args.power_policy} power, {args.storage_policy} storage"
        )
    return title


def _write_figure(args, out: Path, trace) -> None:
    from ..files import atomic_write
    from ..plotting import plot_trace

    shown = (
        {}
        if args.spec is None
        else {
            "groups": (args.spec.labels, args.spec.names),
            "failures": trace.jobs.failures[0],
            "down_time": trace.jobs.down_time[0],
        }
    )
    # In the file's time unit (the engine runs in seconds in a file with units).
    scale, unit = _time_scale(args)
    if "down_time" in shown:
        shown["down_time"] = np.asarray(shown["down_time"], np.float64) / scale
    figure = plot_trace(
        np.asarray(trace.fire_times[0], np.float64) / scale,
        np.asarray(trace.end_times[0], np.float64) / scale,
        title=_title(args),
        until=None if args.horizon is None else args.horizon / scale,
        time_unit=unit,
        **shown,
    )
    atomic_write(out / "trace.png", lambda handle: figure.savefig(handle, format="png", dpi=120))


def _write_logs(args, drawn, trace) -> None:
    """jobs.csv, writes.csv and failures.csv of fleet 0 into --logs (`ckpt_jax.fit.run_logs`)."""
    from .._logs import write_logs
    from ..fit import run_logs

    logs = run_logs(args.spec, drawn, trace.fire_times[0], trace.end_times[0], args.horizon)
    write_logs(args.logs, logs)
    print(
        f"ckpt-jax simulate: logs of fleet 0 -> {args.logs}: {logs.n_jobs} jobs, {len(logs.write_start):,} "
        f"completed writes, {len(logs.failure_time):,} failures (drawn with numpy from seed {args.seed}, replayed)"
    )


def _simulate(args) -> int:
    import jax

    from .. import SaveAt, describe_status, simulate
    from .._plan import check_horizon_events, check_work, largest_count
    from ..files import atomic_write_bytes

    drawn = None
    if args.logs is not None:  # the run's failures drawn here, replayed exactly, then logged
        from ..fit import draw_failures

        drawn = draw_failures(args.spec, args.horizon, args.seed)
        spec, args.spec = args.spec, drawn.spec
    fleet = _fleet(args)
    args.cycles = _cycles(args, fleet)
    n_fleets, n_jobs, n_cycles = args.fleets, args.jobs, args.cycles
    state = _initial_state(fleet, args.start, args.seed, args.spec)
    if drawn is not None:
        args.spec = spec
    # The jitter stream is derived apart from the launch key so the two are independent.
    jitter_key = jax.random.fold_in(seed_key(args.seed), 1)
    if args.horizon is not None:  # the event budget first: a limit, which --force does not lift
        check_horizon_events(fleet, args.horizon, args.jitter if args.jitter > 0 else None, name="horizon")
    events = 2 * n_jobs * (n_cycles + 2) if args.horizon is None else fleet.events(args.horizon)
    size = "--jobs" if args.spec is None else largest_count(args.spec)
    check_work(events, n_jobs, n_fleets, force=args.force, size=size)  # up front, unless --force
    work = n_fleets * n_jobs * n_cycles
    if args.horizon is not None:  # the horizon, not the trace's cycles, says how long the run is
        work = max(work, n_fleets * float(np.max(fleet.events(args.horizon))) / 2)
    devices, n_devices = devices_for(args.device_info, n_fleets)
    device_summary = report_devices(
        "simulate", args.device_info, n_devices, batch=n_fleets, batch_text=f"{n_fleets} fleet{'s' * (n_fleets != 1)}"
    )

    started = time.perf_counter()
    trace = simulate(
        fleet,
        state,
        n_cycles,
        jitter=args.jitter if args.jitter > 0 else None,
        key=jitter_key,
        progress=not args.no_progress and work >= PROGRESS_WORK,
        devices=devices,
        until=args.horizon,
        # A fleet file's jobs fail: keep each job's failures and time down for the figure.
        # With a horizon, keep each job's statistics: goodput, failures, time down.
        save=None
        if args.horizon is None and not args.power
        else SaveAt(trace=True, jobs=args.horizon is not None, power=args.power),
    )
    trace = jax.tree_util.tree_map(np.asarray, trace)  # blocks until the run is done
    wall_s = time.perf_counter() - started

    out = Path(args.out)
    _write_traces(out, trace)
    summary = _summary(args, fleet, trace, wall_s, device_summary)
    atomic_write_bytes(out / "summary.json", (json.dumps(summary, indent=2) + "\n").encode())
    _write_figure(args, out, trace)
    if drawn is not None:
        _write_logs(args, drawn, trace)

    n_ok, status_all = summary["fleets_ok"], summary["status"]
    print(
        f"ckpt-jax simulate: {n_ok}/{n_fleets} fleets ok, N={n_jobs}, K={n_cycles}, "
        f"{int(trace.n_events.sum())} events, {wall_s:.2f} s -> {out}"
    )
    print(_coverage_line(args, summary["recorded_until"], n_cycles))
    if "goodput" in summary:
        print(_goodput_line(summary))
    if args.power:
        print(_power_line(trace.power))
    if n_ok < n_fleets:
        print(f"ckpt-jax simulate: {n_fleets - n_ok} fleet(s) failed: {describe_status(status_all)}", file=sys.stderr)
        return 1
    return 0
