"""Command line: ``ckpt-jax simulate ...`` (also ``python -m ckpt_jax simulate ...``).

`main` builds a fleet from the options, runs `ckpt_jax.simulate`, and writes into
``--out``: ``trace.csv``, ``trace.npz``, ``summary.json`` and ``trace.png`` (fleet 0).
``ckpt-jax ensemble`` runs a long ensemble of random launches in resumable chunks
(`ckpt_jax.run_ensemble`); ``ckpt-jax reproduce`` runs the experiments. Subcommands live
in ``_SUBCOMMANDS``.
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import sys
import time
from pathlib import Path
from typing import Optional, Sequence

import numpy as np

# Runs with more firings than this (fleets × jobs × cycles) show a progress bar.
_PROGRESS_WORK = 200_000
_CSV_COLUMNS = ("fleet", "job", "cycle", "fire_time", "end_time")


# -- option types: argparse turns ArgumentTypeError into "argument --opt: message" --------
def _integer(low: int):
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer >= {low}, got {text!r}") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"must be >= {low}, got {value}")
        return value

    return parse


def _real(*, positive: bool):
    bound = "> 0" if positive else ">= 0"

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number {bound}, got {text!r}") from None
        if not math.isfinite(value) or value < 0 or (positive and value == 0):
            raise argparse.ArgumentTypeError(f"must be finite and {bound}, got {text}")
        return value

    return parse


def _cap(text: str) -> Optional[float]:
    if text.strip().lower() in ("none", "inf", "infinity"):
        return None
    try:
        return _real(positive=True)(text)
    except argparse.ArgumentTypeError as err:
        raise argparse.ArgumentTypeError(f"{err} (or 'none' for uncapped)") from None


def _fraction(text: str) -> float:
    value = _real(positive=False)(text)
    if value > 1:
        raise argparse.ArgumentTypeError(f"must lie in [0, 1], got {text!r}")
    return value


def _add_fleet_options(parser, compute_default: float | None = 10.0,
                       write_default: float | None = 1.0) -> None:
    """The options of a fleet of identical jobs, shared by ``simulate`` and ``ensemble``."""
    from .model import THROUGHPUT_PRESETS

    parser.add_argument("--jobs", type=_integer(2), default=8, metavar="N",
                        help="jobs per fleet")
    parser.add_argument("--compute", type=_real(positive=True), default=compute_default, metavar="T",
                        help="solo compute duration (work) per cycle")
    parser.add_argument("--write", type=_real(positive=True), default=write_default, metavar="d",
                        help="solo write duration (volume) per checkpoint")
    parser.add_argument("--cap", type=_cap, default=None, metavar="C",
                        help="power cap, in jobs at full speed ('none' = uncapped)")
    parser.add_argument("--throughput", choices=sorted(THROUGHPUT_PRESETS), default="shared",
                        help="aggregate write throughput f(n) with n concurrent writers")
    parser.add_argument("--jitter", type=_real(positive=False), default=0.0, metavar="SIGMA",
                        help="standard deviation of each compute phase's work")
    parser.add_argument("--delay", type=_real(positive=False), default=0.0, metavar="TAU",
                        help="controller delay: the cap acts on the computing count from TAU earlier")
    parser.add_argument("--async-fraction", type=_fraction, default=0.0, metavar="ALPHA",
                        help="asynchronous checkpoints: compute fraction kept while a write drains "
                        "(0 = blocking)")
    parser.add_argument("--seed", type=_integer(0), default=0,
                        help="PRNG seed for the random start and the jitter")


def _add_simulate(subparsers) -> None:
    parser = subparsers.add_parser(
        "simulate",
        help="simulate a fleet of identical checkpointing jobs and write its trace",
        description=(
            "Simulate B fleets of N identical jobs (compute T, then a blocking write of "
            "volume d) exactly, event to event, for K cycles each, and write trace.csv, "
            "trace.npz, summary.json and trace.png (fleet 0) into --out."
        ),
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    _add_fleet_options(parser)
    parser.add_argument("--cycles", type=_integer(1), default=50, metavar="K",
                        help="firings (checkpoints) recorded per job")
    parser.add_argument("--fleets", type=_integer(1), default=1, metavar="B",
                        help="ensemble size (independent launches); the figure shows fleet 0")
    parser.add_argument("--start", choices=("random", "sync", "stagger"), default="random",
                        help="random: uniform cycle positions; sync: all start computing "
                        "together; stagger: evenly spaced cycle positions")
    parser.add_argument("--x64", action=argparse.BooleanOptionalAction, default=True,
                        help="compute in float64 (jax_enable_x64)")
    parser.add_argument("--out", type=Path, required=True, metavar="DIR",
                        help="output directory (created if missing)")
    parser.set_defaults(run=_simulate)


def _add_reproduce(subparsers) -> None:
    from .experiments import REGISTRY

    parser = subparsers.add_parser(
        "reproduce",
        help="run every experiment and write report.md (the main job)",
        description=(
            "Run the experiments behind the claims of docs/model.md and write DIR/report.md with, "
            "per claim, the numbers, figures and a verdict decided by thresholds in the code. "
            "An interrupted run resumes from the experiments already finished."
        ),
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    sizes = parser.add_mutually_exclusive_group()
    sizes.add_argument("--quick", dest="size", action="store_const", const="quick",
                       help="sized for <= 10 minutes on a 2-core CPU (default)")
    sizes.add_argument("--full", dest="size", action="store_const", const="full",
                       help="sized for one GPU")
    sizes.add_argument("--smoke", dest="size", action="store_const", const="smoke",
                       help="seconds per experiment (what the tests run)")
    parser.set_defaults(size="quick")
    parser.add_argument("--only", action="append", choices=REGISTRY, metavar="NAME",
                        help=f"run only this experiment (repeatable): {', '.join(REGISTRY)}")
    parser.add_argument("--restart", action="store_true",
                        help="ignore finished experiments in DIR and run them again")
    parser.add_argument("--no-progress", action="store_true", help="no progress bars")
    parser.add_argument("--out", type=Path, required=True, metavar="DIR",
                        help="output directory (created if missing)")

    def run(args):
        from .reproduce import main_reproduce

        return main_reproduce(args)

    parser.set_defaults(run=run, x64=True)


def _add_ensemble(subparsers) -> None:
    parser = subparsers.add_parser(
        "ensemble",
        help="run a long ensemble of random launches in chunks (resumable)",
        description=(
            "Simulate B fleets of N identical jobs from independent random launches, C fleets "
            "at a time. Each chunk is saved atomically into --out (chunk-*.npz: per-fleet "
            "smallest phase gap per cycle, events and end time), so an interrupted run "
            "resumes from the last chunk saved; summary.json is written at the end."
        ),
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument("--fleets", type=_integer(1), required=True, metavar="B",
                        help="ensemble size (independent random launches)")
    _add_fleet_options(parser, compute_default=None, write_default=None)
    parser.add_argument("--load", type=_real(positive=True), default=None, metavar="RHO",
                        help="load N d / (T + d) with T + d = 1 (instead of --compute/--write; "
                        "without either, T = 10 and d = 1)")
    parser.add_argument("--fires", "--cycles", dest="fires", type=_integer(1), default=50, metavar="K",
                        help="firings (checkpoints) recorded per job")
    parser.add_argument("--chunk-size", type=_integer(1), default=1000, metavar="C",
                        help="fleets per chunk (one saved file each)")
    parser.add_argument("--restart", action="store_true",
                        help="discard the chunks saved in DIR and start over")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    parser.add_argument("--x64", action=argparse.BooleanOptionalAction, default=True,
                        help="compute in float64 (jax_enable_x64)")
    parser.add_argument("--out", type=Path, required=True, metavar="DIR",
                        help="output directory for the chunks, manifest.json and summary.json")
    parser.set_defaults(run=_ensemble)


_SUBCOMMANDS = (_add_simulate, _add_reproduce, _add_ensemble)


def build_parser() -> argparse.ArgumentParser:
    """The `ckpt-jax` argument parser, one subparser per subcommand."""
    from . import __version__

    parser = argparse.ArgumentParser(
        prog="ckpt-jax",
        description="Exact, vectorized simulations of checkpointing fleets.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for add in _SUBCOMMANDS:
        add(subparsers)
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Runs the CLI; returns the exit status (0 when every fleet completed).

    Args:
      argv: arguments without the program name; default ``sys.argv[1:]``.
    """
    args = build_parser().parse_args(argv)
    import jax

    # x64 must be set before any array is built. Restore it afterwards so an in-process
    # call (tests, notebooks) does not change the caller's global JAX configuration.
    previous_x64 = bool(jax.config.jax_enable_x64)
    jax.config.update("jax_enable_x64", args.x64)
    try:
        return args.run(args)
    finally:
        jax.config.update("jax_enable_x64", previous_x64)


# -- simulate ---------------------------------------------------------------------------
def _initial_state(fleet, start: str, seed: int):
    import jax

    from .model import initial_state, random_state, state_from_positions

    if start == "random":
        return random_state(fleet, jax.random.key(seed))
    if start == "sync":
        return initial_state(fleet)
    # Evenly spaced cycle positions θ_i = i (T + d) / N: job 0 has just fired.
    cycle = np.asarray(fleet.compute, np.float64) + np.asarray(fleet.write, np.float64)
    n_jobs = fleet.n_jobs
    return state_from_positions(fleet, cycle * np.arange(n_jobs) / n_jobs)


def _write_csv(path: Path, fire_times: np.ndarray, end_times: np.ndarray) -> None:
    """One row per (fleet, job, cycle); %.17g round-trips float64 exactly, NaN as 'nan'."""
    n_fleets, n_jobs, n_cycles = fire_times.shape
    fleet, job, cycle = np.meshgrid(
        np.arange(n_fleets), np.arange(n_jobs), np.arange(n_cycles), indexing="ij"
    )
    table = np.column_stack(
        [fleet.ravel(), job.ravel(), cycle.ravel(), fire_times.ravel(), end_times.ravel()]
    )
    np.savetxt(path, table, fmt=["%d", "%d", "%d", "%.17g", "%.17g"], delimiter=",",
               header=",".join(_CSV_COLUMNS), comments="")


def _simulate(args) -> int:
    import jax

    from . import __version__
    from .analysis import writer_count
    from .engine import describe_status, simulate
    from .model import Fleet
    from .plotting import plot_trace

    n_fleets, n_jobs, n_cycles = args.fleets, args.jobs, args.cycles
    fleet = Fleet(
        np.full((n_fleets, n_jobs), args.compute),
        np.full((n_fleets, n_jobs), args.write),
        cap=args.cap,
        throughput=args.throughput,
        delay=args.delay,
        async_fraction=args.async_fraction,
        dtype=np.float64 if args.x64 else np.float32,
    )
    state = _initial_state(fleet, args.start, args.seed)
    # The jitter stream is derived apart from the launch key so the two are independent.
    jitter_key = jax.random.fold_in(jax.random.key(args.seed), 1)
    work = n_fleets * n_jobs * n_cycles

    started = time.perf_counter()
    trace = simulate(
        fleet,
        state,
        n_cycles,
        jitter=args.jitter if args.jitter > 0 else None,
        key=jitter_key,
        progress=work >= _PROGRESS_WORK,
    )
    trace = jax.tree_util.tree_map(np.asarray, trace)  # blocks until the run is done
    wall_s = time.perf_counter() - started

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    _write_csv(out / "trace.csv", trace.fire_times, trace.end_times)
    np.savez(
        out / "trace.npz",
        fire_times=trace.fire_times,
        end_times=trace.end_times,
        ok=trace.ok,
        status=trace.status,
        n_events=trace.n_events,
        time=trace.time,
    )

    ok = trace.ok
    n_ok = int(ok.sum())
    status_all = int(np.bitwise_or.reduce(trace.status.ravel()))
    _, counts = writer_count(trace.fire_times[0], trace.end_times[0])
    summary = {
        "command": "simulate",
        "version": __version__,
        "parameters": {
            "jobs": n_jobs,
            "compute": args.compute,
            "write": args.write,
            "cap": args.cap,
            "throughput": args.throughput,
            "jitter": args.jitter,
            "delay": args.delay,
            "async_fraction": args.async_fraction,
            "seed": args.seed,
            "cycles": n_cycles,
            "fleets": n_fleets,
            "start": args.start,
            "x64": args.x64,
        },
        "keys": {
            "start": "jax.random.key(seed) (used only by --start random)",
            "jitter": "jax.random.fold_in(jax.random.key(seed), 1)",
        },
        "dtype": str(fleet.dtype),
        "load": n_jobs * args.write / (args.compute + args.write),
        "ok": bool(ok.all()),
        "fleets_ok": n_ok,
        "status": status_all,
        "status_text": describe_status(status_all),
        "events_total": int(trace.n_events.sum()),
        "events_per_fleet_max": int(trace.n_events.max()),
        "simulated_time_max": float(np.nanmax(trace.time)),
        "max_recorded_writers_fleet0": int(counts.max()) if counts.size else 0,
        "wall_time_s": wall_s,
        "backend": jax.default_backend(),
        "python": platform.python_version(),
        "jax": jax.__version__,
        "files": ["trace.csv", "trace.npz", "summary.json", "trace.png"],
        "csv_columns": list(_CSV_COLUMNS),
        "notes": "cycle is the 0-based firing index after t = 0; fire/end times of "
        "padding or unfinished windows are NaN. Windows in progress at t = 0 are not recorded.",
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")

    cap = "uncapped" if args.cap is None else f"C={args.cap:g}"
    title = (
        f"fleet 0 of {n_fleets}: N={n_jobs}, T={args.compute:g}, d={args.write:g}, {cap}, "
        f"f={args.throughput}, σ={args.jitter:g}, start={args.start}, seed={args.seed}"
    )
    figure = plot_trace(trace.fire_times[0], trace.end_times[0], title=title)
    figure.savefig(out / "trace.png", dpi=120)

    print(
        f"ckpt-jax simulate: {n_ok}/{n_fleets} fleets ok, N={n_jobs}, K={n_cycles}, "
        f"{int(trace.n_events.sum())} events, {wall_s:.2f} s -> {out}"
    )
    if n_ok < n_fleets:
        print(f"ckpt-jax simulate: {n_fleets - n_ok} fleet(s) failed: {describe_status(status_all)}",
              file=sys.stderr)
        return 1
    return 0


# -- ensemble ---------------------------------------------------------------------------
def _durations(args) -> tuple:
    """(T, d) from --load (T + d = 1, d = ρ / N) or from --compute / --write."""
    if args.load is None:
        return (10.0 if args.compute is None else args.compute, 1.0 if args.write is None else args.write)
    if args.compute is not None or args.write is not None:
        raise ValueError("give either --load or --compute/--write, not both")
    if args.load >= args.jobs:
        raise ValueError(f"--load must be < N = {args.jobs} (so that T = 1 - load/N > 0), got {args.load:g}")
    write = args.load / args.jobs
    return 1.0 - write, write


def _ensemble(args) -> int:
    import jax

    from . import __version__
    from .analysis import smallest_gap
    from .engine import describe_status
    from .ensemble import MANIFEST, random_launches, run_ensemble
    from .experiments import write_json

    try:
        compute, write = _durations(args)
    except ValueError as err:
        print(f"ckpt-jax ensemble: error: {err}", file=sys.stderr)
        return 2
    n_jobs = args.jobs
    seed_key = jax.random.key(args.seed)
    make_chunk = random_launches(
        np.full(n_jobs, compute),
        np.full(n_jobs, write),
        key=jax.random.fold_in(seed_key, 0),
        cap=args.cap,
        throughput=args.throughput,
        delay=args.delay,
        async_fraction=args.async_fraction,
        dtype=np.float64 if args.x64 else np.float32,
    )
    gap = jax.jit(smallest_gap)  # every chunk has one shape: compiled once

    def reduce(trace):
        return {"smallest_gap": gap(trace.fire_times), "n_events": trace.n_events, "time": trace.time}

    started = time.perf_counter()
    try:
        result = run_ensemble(
            make_chunk,
            args.fleets,
            args.fires,
            chunk_size=args.chunk_size,
            out_dir=args.out,
            key=jax.random.fold_in(seed_key, 1),
            jitter=args.jitter if args.jitter > 0 else None,
            resume=not args.restart,
            progress=False if args.no_progress else None,
            reduce=reduce,
            config={"command": "ensemble", "arrays": ["smallest_gap", "n_events", "time"]},
        )
    except ValueError as err:
        print(f"ckpt-jax ensemble: error: {err} (on the command line, --restart discards saved chunks)",
              file=sys.stderr)
        return 2
    wall_s = time.perf_counter() - started

    ok = result.ok
    status_all = int(np.bitwise_or.reduce(result.status))
    # Smallest gap ever seen per fleet (time units; the last cycle has no closing gap).
    gaps = result.arrays["smallest_gap"][ok]
    fleet_min_gap = np.min(np.where(np.isnan(gaps), np.inf, gaps), axis=-1, initial=np.inf)
    finite = np.isfinite(fleet_min_gap)
    n_chunks = result.n_computed + result.n_loaded
    summary = {
        "command": "ensemble",
        "version": __version__,
        "parameters": {
            "fleets": args.fleets,
            "jobs": n_jobs,
            "fires": args.fires,
            "chunk_size": args.chunk_size,
            "compute": compute,
            "write": write,
            "cap": args.cap,
            "throughput": args.throughput,
            "jitter": args.jitter,
            "delay": args.delay,
            "async_fraction": args.async_fraction,
            "seed": args.seed,
            "x64": args.x64,
        },
        "keys": {
            "launch": "fleet i: jax.random.fold_in(jax.random.fold_in(jax.random.key(seed), 0), i)",
            "jitter": "jax.random.fold_in(jax.random.key(seed), 1), folded with the fleet index",
        },
        "load": n_jobs * write / (compute + write),
        "ok": bool(ok.all()),
        "fleets_ok": int(ok.sum()),
        "status": status_all,
        "status_text": describe_status(status_all),
        "chunks": n_chunks,
        "chunks_computed": result.n_computed,
        "chunks_loaded": result.n_loaded,
        "events_mean": float(result.arrays["n_events"].mean()),
        "smallest_gap_min_mean": float(fleet_min_gap[finite].mean()) if finite.any() else None,
        "wall_time_s": wall_s,
        "backend": jax.default_backend(),
        "jax": jax.__version__,
        "files": [MANIFEST, "chunk-*.npz", "summary.json"],
        "notes": "smallest_gap_min_mean: per ok fleet, the smallest phase gap (time units) over "
        "cycles 0..K-2 (ckpt_jax.smallest_gap), averaged over those fleets (null when K = 1). "
        "Each chunk-*.npz holds per fleet: smallest_gap (K,), n_events, time, ok, status.",
    }
    write_json(Path(args.out) / "summary.json", summary)

    print(
        f"ckpt-jax ensemble: {int(ok.sum())}/{args.fleets} fleets ok, N={n_jobs}, K={args.fires}, "
        f"{n_chunks} chunks ({result.n_computed} computed, {result.n_loaded} loaded), {wall_s:.2f} s "
        f"-> {args.out}"
    )
    if not ok.all():
        print(f"ckpt-jax ensemble: {result.n_bad} fleet(s) failed: {describe_status(status_all)}", file=sys.stderr)
        return 1
    return 0
