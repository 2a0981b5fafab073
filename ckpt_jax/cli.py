"""Command line: ``ckpt-jax simulate ...`` (also ``python -m ckpt_jax simulate ...``).

`main` builds a fleet from the options, runs `ckpt_jax.simulate`, and writes into
``--out``: ``trace.csv``, ``trace.npz``, ``summary.json`` and ``trace.png`` (fleet 0).
``ckpt-jax ensemble`` runs a long ensemble of random launches in resumable chunks
(`ckpt_jax.run_ensemble`); ``ckpt-jax reproduce`` runs the experiments. Subcommands live
in ``_SUBCOMMANDS``.

``--devices`` (every subcommand; default ``all``): one XLA host device per core on a
CPU-only machine, set before JAX's backend starts, or every local GPU; ``simulate`` and
``ensemble`` split their batches over them (at least 2 fleets per device) and print one
line saying how many they used. Results do not depend on the count.

Every failure is one line on stderr, ``ckpt-jax: error: ...``, and exit status 2: a bad
option, an ``--out`` that cannot be written (checked before anything runs), a full disk,
or a `ValueError` of the library. Ctrl-C prints one line and exits with status 130.
"""

from __future__ import annotations

import argparse
import errno
import json
import math
import os
import platform
import re
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import NamedTuple, Optional, Sequence

import numpy as np

# Runs with more firings than this (fleets × jobs × cycles) show a progress bar.
_PROGRESS_WORK = 200_000
_CSV_COLUMNS = ("fleet", "job", "cycle", "fire_time", "end_time")
_SEED_MAX = 2**64 - 1
# Exit status of a run stopped by Ctrl-C (128 + SIGINT), as shells report it.
_INTERRUPTED = 130


class CliError(Exception):
    """A failure the command line reports as one ``ckpt-jax: error: ...`` line (status 2)."""


class _Parser(argparse.ArgumentParser):
    """Usage errors as one line (``ckpt-jax: error: argument --jobs: ...``), status 2."""

    def error(self, message):
        sys.stderr.write(f"ckpt-jax: error: {message} (see '{self.prog} --help')\n")
        raise SystemExit(2)


# -- option types: argparse turns ArgumentTypeError into "argument --opt: message" --------
def _integer(low: int, high: Optional[int] = None):
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer >= {low}, got {text!r}") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"must be >= {low}, got {value}")
        if high is not None and value > high:
            raise argparse.ArgumentTypeError(f"must be <= {high}, got {value}")
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


def _add_x64(parser) -> None:
    action = parser.add_argument("--x64", action=argparse.BooleanOptionalAction, default=True)
    # Set after construction: BooleanOptionalAction (Python < 3.13) would append its own
    # "(default: True)" to a help given to the constructor.
    action.help = "compute in float64 (jax_enable_x64); --no-x64: float32 (default: --x64)"


# --devices: at most this many (one XLA host device per core is cheap, thousands are not).
_DEVICES_MAX = 1024
# A batch is split over several devices only with at least this many fleets per device.
_FLEETS_PER_DEVICE = 2
_FORCE_FLAG = "xla_force_host_platform_device_count"


def _device_count(text: str) -> Optional[int]:
    """``--devices``: an int in [1, _DEVICES_MAX], or None for ``all``."""
    if text.strip().lower() == "all":
        return None
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1 or 'all', got {text!r}") from None
    if not 1 <= value <= _DEVICES_MAX:
        raise argparse.ArgumentTypeError(f"must be 'all' or an integer from 1 to {_DEVICES_MAX}, got {value}")
    return value


def _add_devices(parser, *, shards: bool = True) -> None:
    what = ("devices to split the fleets over" if shards
            else "devices to set up (the experiments do not split over them yet)")
    parser.add_argument("--devices", type=_device_count, default=None, metavar="N|all",
                        help=f"{what}: 'all' = one CPU device per core on a CPU-only machine, "
                        "every local GPU on a GPU machine; N = that many (default: all)")


def _add_fleet_options(parser, *, ensemble: bool = False) -> None:
    """The options of a fleet of identical jobs, shared by ``simulate`` and ``ensemble``."""
    from .model import THROUGHPUT_PRESETS

    parser.add_argument("--jobs", type=_integer(2), default=8, metavar="N",
                        help="jobs per fleet (default: %(default)s)")
    if ensemble:
        # No default here: --compute/--write and --load exclude each other (_durations).
        compute_help = "solo compute duration (work) per cycle (default: 10, or from --load)"
        write_help = "solo write duration (volume) per checkpoint (default: 1, or from --load)"
    else:
        compute_help = "solo compute duration (work) per cycle (default: %(default)g)"
        write_help = "solo write duration (volume) per checkpoint (default: %(default)g)"
    parser.add_argument("--compute", type=_real(positive=True), default=None if ensemble else 10.0,
                        metavar="T", help=compute_help)
    parser.add_argument("--write", type=_real(positive=True), default=None if ensemble else 1.0,
                        metavar="d", help=write_help)
    parser.add_argument("--cap", type=_cap, default=None, metavar="C",
                        help="power cap, in jobs at full speed; 'none' = uncapped (default: none)")
    parser.add_argument("--throughput", choices=sorted(THROUGHPUT_PRESETS), default="shared",
                        help="aggregate write throughput f(n) with n concurrent writers "
                        "(default: %(default)s)")
    parser.add_argument("--jitter", type=_real(positive=False), default=0.0, metavar="SIGMA",
                        help="standard deviation of each compute phase's work (default: 0)")
    parser.add_argument("--delay", type=_real(positive=False), default=0.0, metavar="TAU",
                        help="controller delay: the cap acts on the computing count from TAU "
                        "earlier (default: 0)")
    parser.add_argument("--async-fraction", type=_fraction, default=0.0, metavar="ALPHA",
                        help="asynchronous checkpoints: compute fraction kept while a write drains; "
                        "0 = blocking (default: 0)")
    parser.add_argument("--seed", type=_integer(0, _SEED_MAX), default=0,
                        help=f"PRNG seed for the random start and the jitter, 0 to {_SEED_MAX} "
                        "(default: 0)")


def _add_simulate(subparsers) -> None:
    parser = subparsers.add_parser(
        "simulate",
        help="simulate a fleet of identical checkpointing jobs and write its trace",
        description=(
            "Simulate B fleets of N identical jobs (compute T, then a blocking write of "
            "volume d) exactly, event to event, for K cycles each, and write trace.csv, "
            "trace.npz, summary.json and trace.png (fleet 0) into --out."
        ),
    )
    _add_fleet_options(parser)
    parser.add_argument("--cycles", type=_integer(1), default=50, metavar="K",
                        help="firings (checkpoints) recorded per job (default: %(default)s)")
    parser.add_argument("--fleets", type=_integer(1), default=1, metavar="B",
                        help="ensemble size (independent launches); the figure shows fleet 0 "
                        "(default: %(default)s)")
    parser.add_argument("--start", choices=("random", "sync", "stagger"), default="random",
                        help="random: uniform cycle positions; sync: all start computing "
                        "together; stagger: evenly spaced cycle positions (default: %(default)s)")
    _add_devices(parser)
    _add_x64(parser)
    parser.add_argument("--out", type=Path, required=True, metavar="DIR",
                        help="output directory, created if missing (required)")
    parser.set_defaults(run=_simulate, check=lambda args: _check_period(args.compute, args.write),
                        resumes=False)


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
    )
    sizes = parser.add_mutually_exclusive_group()
    sizes.add_argument("--quick", dest="size", action="store_const", const="quick",
                       help="sized for <= 10 minutes on a 2-core CPU (the default size)")
    sizes.add_argument("--full", dest="size", action="store_const", const="full",
                       help="sized for one GPU")
    sizes.add_argument("--smoke", dest="size", action="store_const", const="smoke",
                       help="seconds per experiment (what the tests run)")
    parser.set_defaults(size="quick")
    parser.add_argument("--only", action="append", choices=REGISTRY, metavar="NAME",
                        help=f"run only this experiment (repeatable; default: all): {', '.join(REGISTRY)}")
    parser.add_argument("--restart", action="store_true",
                        help="ignore finished experiments in DIR and run them again")
    parser.add_argument("--no-progress", action="store_true", help="no progress bars")
    _add_devices(parser, shards=False)
    parser.add_argument("--out", type=Path, required=True, metavar="DIR",
                        help="output directory, created if missing (required)")

    def run(args):
        from .reproduce import main_reproduce

        # Experiments do not take a device count yet: each runs on the default device.
        _report_devices("reproduce", args.device_info, args.device_info.available,
                        detail="the experiments use the first only")
        return main_reproduce(args)

    parser.set_defaults(run=run, x64=True, resumes=True)


def _add_ensemble(subparsers) -> None:
    parser = subparsers.add_parser(
        "ensemble",
        help="run a long ensemble of random launches in chunks (resumable)",
        description=(
            "Simulate B fleets of N identical jobs from independent random launches, C fleets "
            "at a time. Each chunk is saved atomically into --out (chunk-*.npz: per fleet, the "
            "statistics --save names, accumulated during the run without storing the trace, and "
            "events and end time), so an interrupted run resumes from the last chunk saved; "
            "summary.json is written at the end."
        ),
    )
    parser.add_argument("--fleets", type=_integer(1), required=True, metavar="B",
                        help="ensemble size, independent random launches (required)")
    _add_fleet_options(parser, ensemble=True)
    parser.add_argument("--load", type=_real(positive=True), default=None, metavar="RHO",
                        help="load N d / (T + d) with T + d = 1, instead of --compute/--write "
                        "(default: none, i.e. T = 10 and d = 1 unless given)")
    parser.add_argument("--fires", "--cycles", dest="fires", type=_integer(1), default=50, metavar="K",
                        help="firings (checkpoints) recorded per job (default: %(default)s)")
    parser.add_argument("--chunk-size", type=_integer(1), default=1000, metavar="C",
                        help="fleets per chunk, one saved file each (default: %(default)s)")
    parser.add_argument("--save", type=_save_list, default=("gaps",), metavar="LIST",
                        help="what each chunk keeps per fleet, comma-separated: writers (time at each "
                        "writer count, excursions, largest count), gaps (smallest phase gap per cycle), "
                        "jobs (time writing and computing, writes, per job), all recorded without the "
                        "trace; order: gaps with an exact firing-order flag (two jobs swapping "
                        "included), from each chunk's trace, held in memory, N x K per fleet "
                        "(default: gaps)")
    parser.add_argument("--restart", action="store_true",
                        help="discard the chunks saved in DIR and start over")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    _add_devices(parser)
    _add_x64(parser)
    parser.add_argument("--out", type=Path, required=True, metavar="DIR",
                        help="output directory for the chunks, manifest.json and summary.json (required)")
    parser.set_defaults(run=_ensemble, check=_durations, resumes=True)


_SUBCOMMANDS = (_add_simulate, _add_reproduce, _add_ensemble)


def build_parser() -> argparse.ArgumentParser:
    """The `ckpt-jax` argument parser, one subparser per subcommand."""
    from . import __version__

    parser = _Parser(
        prog="ckpt-jax",
        description="Exact, vectorized simulations of checkpointing fleets.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for add in _SUBCOMMANDS:
        add(subparsers)
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Runs the CLI; returns the exit status: 0 when every fleet completed, 1 when some
    did not, 2 on an error (one ``ckpt-jax: error: ...`` line on stderr), 130 on Ctrl-C.

    ``--devices`` (default: one CPU device per core) sets the process's XLA host device
    count, which JAX fixes when its backend starts. Called in a process whose backend has
    not started yet, this sets it for the rest of the process; where it has (an in-process
    call after other JAX work) the devices already there are used, and the devices line
    says so.

    Args:
      argv: arguments without the program name; default ``sys.argv[1:]``.
    """
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as done:  # --help, --version, or a usage error already reported
        return done.code if isinstance(done.code, int) else 2 * (done.code is not None)
    previous_x64 = None
    try:
        if getattr(args, "check", None) is not None:
            args.check(args)  # option combinations, before anything is created
        _check_out_dir(Path(args.out))
        import jax

        # x64 must be set before any array is built. Restore it afterwards so an in-process
        # call (tests, notebooks) does not change the caller's global JAX configuration.
        previous_x64 = bool(jax.config.jax_enable_x64)
        jax.config.update("jax_enable_x64", args.x64)
        # The host device count, before anything starts JAX's backend (nothing imported so
        # far does); this starts it.
        args.device_info = _start_devices(args.devices)
        return args.run(args)
    except KeyboardInterrupt:
        then = "rerun the same command to resume" if args.resumes else "rerun the same command to start again"
        return _fail(f"interrupted; {then}", prefix="ckpt-jax: ", status=_INTERRUPTED)
    except CliError as err:
        return _fail(str(err))
    except OSError as err:
        return _fail(_os_error_text(err, args.resumes))
    except (ValueError, OverflowError) as err:  # the library's validation; numbers out of range
        return _fail(str(err))
    except MemoryError:
        return _fail(f"out of memory: {_SMALLER}")
    except RuntimeError as err:  # XLA's out of memory (jax.errors.JaxRuntimeError)
        if "RESOURCE_EXHAUSTED" not in str(err):
            raise
        return _fail(f"out of memory ({str(err).splitlines()[0][:200]}): {_SMALLER}")
    finally:
        if previous_x64 is not None:
            import jax

            jax.config.update("jax_enable_x64", previous_x64)


# -- failures ---------------------------------------------------------------------------
_SMALLER = "try fewer fleets, jobs or cycles (ensemble: a smaller --chunk-size)"
_NUMPY_SCALAR = re.compile(r"\bnp\.(?:float|int|uint|complex)\d*\(([^()]*)\)")
_NUMPY_BOOL = re.compile(r"\bnp\.(True|False)_\b")
_NUMPY_STR = re.compile(r"\bnp\.str_\(('[^']*'|\"[^\"]*\")\)")


def _plain_text(message: str) -> str:
    """``message`` on one line, numbers as plain numbers (``-1.0``, not ``np.float64(-1.0)``)."""
    message = _NUMPY_SCALAR.sub(r"\1", message)
    message = _NUMPY_BOOL.sub(r"\1", message)
    message = _NUMPY_STR.sub(r"\1", message)
    return " ".join(message.split())


def _fail(message: str, prefix: str = "ckpt-jax: error: ", status: int = 2) -> int:
    sys.stderr.write(f"{prefix}{_plain_text(message)}\n")
    return status


def _os_error_text(err: OSError, resumes: bool) -> str:
    where = f" ({err.filename})" if err.filename else ""
    if err.errno in (errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC)):
        what = "no space left on device" if err.errno == errno.ENOSPC else "disk quota exceeded"
        then = "rerun the same command to resume" if resumes else "rerun the same command"
        return (f"{what} while writing{where}; the files written before are complete "
                f"(none is half written): free some space, then {then}")
    return f"{err.strerror or err}{where}"


def _check_out_dir(out: Path) -> None:
    """Creates ``--out`` and checks a file can be written there, before anything runs."""
    if out.exists() and not out.is_dir():
        raise CliError(f"--out {out}: not a directory")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise CliError(f"--out {out}: cannot create it ({err.strerror or err})") from None
    try:
        fd, probe = tempfile.mkstemp(dir=out, prefix=".ckpt-jax-probe.", suffix=".tmp")
        try:
            os.write(fd, b"0")
        finally:
            os.close(fd)
            os.unlink(probe)
    except OSError as err:
        if err.errno in (errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC)):
            raise CliError(f"--out {out}: no space left on device") from None
        raise CliError(f"--out {out}: cannot write there ({err.strerror or err})") from None


def _plain(value) -> str:
    """A value for a message: ``none``, ``on``/``off``, ``10`` (not ``10.0``), ``0.25``."""
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() and abs(value) < 1e16 else repr(value)
    return str(value)


def _seed_key(seed: int):
    """The PRNG key of ``--seed``: threefry2x32 with key data ``[seed >> 32, seed & 0xFFFFFFFF]``.

    That is ``jax.random.key(seed)`` (default implementation) wherever it is exact: every
    seed under x64, seeds below 2**32 under float32 (where ``jax.random.key`` would wrap
    larger seeds around onto small ones, and raises beyond 2**63).
    """
    import jax

    data = np.array([seed >> 32, seed & 0xFFFFFFFF], dtype=np.uint32)
    return jax.random.wrap_key_data(data, impl="threefry2x32")


# -- devices ----------------------------------------------------------------------------
class _DeviceInfo(NamedTuple):
    platform: str  # of the default backend: "cpu", "gpu", "tpu"
    available: int  # its local devices
    requested: Optional[int]  # --devices N; None for all
    why: str  # how the count came about, for the devices line


def _usable_cores() -> int:
    """The cores this process may run on (its CPU affinity), else ``os.cpu_count()``."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _start_devices(requested: Optional[int]) -> _DeviceInfo:
    """Sets the XLA host (CPU) device count, then starts JAX's backend.

    The count must be set before the backend starts (the first array or device query);
    afterwards it cannot change. Without ``--devices``, a count the environment already
    set (``JAX_NUM_CPU_DEVICES``, ``XLA_FLAGS=--xla_force_host_platform_device_count``)
    is kept. On a GPU machine the host count does not matter; the GPUs are used.
    """
    import jax

    cores = _usable_cores()
    why = f"--devices {requested}" if requested is not None else "one per core"
    started = False
    preset = jax.config.jax_num_cpu_devices  # -1: not set
    if requested is None and preset >= 0 and preset != cores:
        why = ("as JAX_NUM_CPU_DEVICES sets it" if "JAX_NUM_CPU_DEVICES" in os.environ
               else "as jax_num_cpu_devices is set in this process")
    elif requested is None and preset < 0 and _FORCE_FLAG in os.environ.get("XLA_FLAGS", ""):
        why = f"as XLA_FLAGS --{_FORCE_FLAG} sets it"
    else:
        try:
            jax.config.update("jax_num_cpu_devices", cores if requested is None else requested)
        except RuntimeError as err:  # the backend is up already: its devices stay as they are
            if "initialized" not in str(err):
                raise
            started = True
    local = jax.local_devices()
    platform, available = local[0].platform, len(local)
    name = platform.upper()
    if platform != "cpu":
        if requested is not None and requested > available:
            raise CliError(f"--devices {requested}: this machine has {available} {name} "
                           f"device{'s' * (available != 1)}")
        why = why if requested is not None else f"every local {name}"
    elif started and (available < requested if requested is not None else available != cores):
        asked = f"--devices {requested}" if requested is not None else f"one per core ({cores})"
        why = (f"{asked} not possible: JAX had already started in this process with {available}; "
               "run ckpt-jax as a process of its own")
    return _DeviceInfo(platform, available, requested, why)


def _devices_for(info: _DeviceInfo, batch: int) -> tuple:
    """(``devices`` for simulate / run_ensemble, device count) for batches of ``batch``
    fleets: at most the devices asked for and available, at least 2 fleets per device."""
    wanted = info.available if info.requested is None else min(info.requested, info.available)
    used = max(1, min(wanted, batch // _FLEETS_PER_DEVICE))
    return (None if used == 1 else used), used


def _report_devices(command: str, info: _DeviceInfo, used: int, *, batch: Optional[int] = None,
                    batch_text: str = "", detail: Optional[str] = None) -> dict:
    """Prints the devices line; returns the devices entry of summary.json.

    ``batch``: fleets per simulate call (``batch_text`` names it), where the command splits them.
    """
    name = info.platform.upper()
    notes = [info.why]
    if info.why == "one per core" and used > 1 and batch is not None:
        notes.append("--devices 1 for one")
    wanted = info.available if info.requested is None else min(info.requested, info.available)
    if batch is not None and used < wanted:
        notes.append(f"{batch_text}: at least {_FLEETS_PER_DEVICE} fleets per device to split them")
    if detail:
        notes.append(detail)
    of = f" of {info.available}" if used < info.available else ""
    print(f"ckpt-jax {command}: {used} {name} device{'s' * (used != 1)}{of} ({'; '.join(notes)})")
    return {
        "used": used,
        "available": info.available,
        "platform": info.platform,
        "requested": "all" if info.requested is None else info.requested,
        "note": "; ".join(notes),
    }


# -- simulate ---------------------------------------------------------------------------
def _check_period(compute: float, write: float) -> tuple:
    if not math.isfinite(compute + write):
        raise CliError(f"--compute + --write overflows ({_plain(compute)} + {_plain(write)}): "
                       "use smaller durations")
    return compute, write


def _initial_state(fleet, start: str, seed: int):
    from .model import initial_state, random_state, state_from_positions

    if start == "random":
        return random_state(fleet, _seed_key(seed))
    if start == "sync":
        return initial_state(fleet)
    # Evenly spaced cycle positions θ_i = i (T + d) / N: job 0 has just fired.
    cycle = np.asarray(fleet.compute, np.float64) + np.asarray(fleet.write, np.float64)
    n_jobs = fleet.n_jobs
    return state_from_positions(fleet, cycle * np.arange(n_jobs) / n_jobs)


def _write_csv(handle, fire_times: np.ndarray, end_times: np.ndarray) -> None:
    """One row per (fleet, job, cycle); %.17g round-trips float64 exactly, NaN as 'nan'."""
    n_fleets, n_jobs, n_cycles = fire_times.shape
    fleet, job, cycle = np.meshgrid(
        np.arange(n_fleets), np.arange(n_jobs), np.arange(n_cycles), indexing="ij"
    )
    table = np.column_stack(
        [fleet.ravel(), job.ravel(), cycle.ravel(), fire_times.ravel(), end_times.ravel()]
    )
    np.savetxt(handle, table, fmt=["%d", "%d", "%d", "%.17g", "%.17g"], delimiter=",",
               header=",".join(_CSV_COLUMNS), comments="")


def _simulate(args) -> int:
    import jax

    from . import __version__
    from ._io import atomic_write, atomic_write_bytes
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
    jitter_key = jax.random.fold_in(_seed_key(args.seed), 1)
    work = n_fleets * n_jobs * n_cycles
    devices, n_devices = _devices_for(args.device_info, n_fleets)
    device_summary = _report_devices("simulate", args.device_info, n_devices, batch=n_fleets,
                                     batch_text=f"{n_fleets} fleet{'s' * (n_fleets != 1)}")

    started = time.perf_counter()
    trace = simulate(
        fleet,
        state,
        n_cycles,
        jitter=args.jitter if args.jitter > 0 else None,
        key=jitter_key,
        progress=work >= _PROGRESS_WORK,
        devices=devices,
    )
    trace = jax.tree_util.tree_map(np.asarray, trace)  # blocks until the run is done
    wall_s = time.perf_counter() - started

    out = Path(args.out)
    # Each file is written atomically: complete (this run's) or as it was before.
    atomic_write(out / "trace.csv", lambda handle: _write_csv(handle, trace.fire_times, trace.end_times))
    atomic_write(out / "trace.npz", lambda handle: np.savez(
        handle,
        fire_times=trace.fire_times,
        end_times=trace.end_times,
        ok=trace.ok,
        status=trace.status,
        n_events=trace.n_events,
        time=trace.time,
    ))

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
            "seed": _SEED_KEY_TEXT,
            "start": "key(seed) (used only by --start random)",
            "jitter": "jax.random.fold_in(key(seed), 1)",
        },
        "dtype": str(fleet.dtype),
        "load": n_jobs * args.write / (args.compute + args.write),
        "ok": bool(ok.all()),
        "fleets_ok": n_ok,
        "status": status_all,
        "status_text": describe_status(status_all),
        "events_total": int(trace.n_events.sum()),
        "events_per_fleet_max": int(trace.n_events.max()),
        "simulated_time_max": _finite_or_none(np.nanmax(trace.time)),
        "max_recorded_writers_fleet0": int(counts.max()) if counts.size else 0,
        "wall_time_s": wall_s,
        "backend": jax.default_backend(),
        "devices": device_summary,
        "python": platform.python_version(),
        "jax": jax.__version__,
        "files": ["trace.csv", "trace.npz", "summary.json", "trace.png"],
        "csv_columns": list(_CSV_COLUMNS),
        "notes": "cycle is the 0-based firing index after t = 0; fire/end times of "
        "padding or unfinished windows are NaN. Windows in progress at t = 0 are not recorded.",
    }
    atomic_write_bytes(out / "summary.json", (json.dumps(summary, indent=2) + "\n").encode())

    cap = "uncapped" if args.cap is None else f"C={args.cap:g}"
    title = (
        f"fleet 0 of {n_fleets}: N={n_jobs}, T={args.compute:g}, d={args.write:g}, {cap}, "
        f"f={args.throughput}, σ={args.jitter:g}, start={args.start}, seed={args.seed}"
    )
    figure = plot_trace(trace.fire_times[0], trace.end_times[0], title=title)
    atomic_write(out / "trace.png", lambda handle: figure.savefig(handle, format="png", dpi=120))

    print(
        f"ckpt-jax simulate: {n_ok}/{n_fleets} fleets ok, N={n_jobs}, K={n_cycles}, "
        f"{int(trace.n_events.sum())} events, {wall_s:.2f} s -> {out}"
    )
    if n_ok < n_fleets:
        print(f"ckpt-jax simulate: {n_fleets - n_ok} fleet(s) failed: {describe_status(status_all)}",
              file=sys.stderr)
        return 1
    return 0


_SEED_KEY_TEXT = (
    "key(seed): the threefry2x32 key with data [seed >> 32, seed & 0xFFFFFFFF], i.e. "
    "jax.random.key(seed) under x64"
)


def _finite_or_none(value) -> Optional[float]:
    value = float(value)
    return value if math.isfinite(value) else None


# -- ensemble ---------------------------------------------------------------------------
# Option names of the ensemble's parameters, for messages ("chunk-size: 1000 saved, 500 now").
_ENSEMBLE_OPTIONS = {
    "fleets": "fleets", "jobs": "jobs", "fires": "fires", "chunk_size": "chunk-size",
    "load": "load", "compute": "compute", "write": "write", "cap": "cap",
    "throughput": "throughput", "jitter": "jitter", "delay": "delay",
    "async_fraction": "async-fraction", "seed": "seed", "x64": "x64", "save": "save",
}
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
        raise argparse.ArgumentTypeError(
            f"expected a comma-separated list of {', '.join(_SAVE_NAMES)}, got {got}")
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
        return _check_period(*durations)
    if args.compute is not None or args.write is not None:
        raise CliError("give either --load or --compute/--write, not both")
    if args.load >= args.jobs:
        raise CliError(f"--load must be < N = {args.jobs} (so that T = 1 - load/N > 0), got {_plain(args.load)}")
    write = args.load / args.jobs
    return 1.0 - write, write


def _gaps_and_order(fire_times):
    """Per fleet and cycle k: the smallest phase gap (time units, `ckpt_jax.smallest_gap`
    without a period), and whether the firing order changed from cycle k to k + 1.

    The gap assumes the firing order of identical jobs is fixed (claim 3). Jitter can change
    it: a job then fires twice before another fires once (the closing gap would come out
    negative), or two jobs swap. Where it changed the gap is NaN; the last cycle (no next
    one) is NaN and never counts as changed.
    """
    import jax.numpy as jnp

    from .analysis import smallest_gap

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
    gaps tell (`ckpt_jax.SaveAt(gaps=True)`, i.e. `ckpt_jax.smallest_gap`).

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
    }


def _check_saved_ensemble(out: Path, parameters: dict) -> None:
    """Raises `CliError` in the CLI's words when ``out`` holds another ensemble."""
    from .ensemble import MANIFEST

    path = out / MANIFEST
    if not path.exists():
        return
    try:
        saved = json.loads(path.read_text())
    except (OSError, ValueError):
        raise CliError(f"{path} is unreadable; use --restart to start over") from None
    config = saved.get("config") if isinstance(saved, dict) else None
    old = config.get("parameters") if isinstance(config, dict) and config.get("command") == "ensemble" else None
    if not isinstance(old, dict):
        raise CliError(f"{out} holds an ensemble made by another version of ckpt-jax or by the Python "
                       "API; use --restart to start over, or another --out")
    now = json.loads(json.dumps(parameters))  # as it reads back from the manifest
    lines = [
        f"{_ENSEMBLE_OPTIONS.get(name, name)}: {_plain(old.get(name))} saved, {_plain(value)} now"
        for name, value in now.items()
        if old.get(name) != value
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
            sys.stderr.write(f"ckpt-jax: warning: {_plain_text(str(message))}\n")
        return None

    return showwarning


def _ensemble(args) -> int:
    import jax

    from . import EnsembleMismatchError, SaveAt, __version__, describe_status, random_launches, run_ensemble
    from .ensemble import MANIFEST
    from .experiments import write_json

    compute, write = _durations(args)
    n_jobs = args.jobs
    out = Path(args.out)
    parameters = _ensemble_parameters(args, compute, write)
    if not args.restart:
        _check_saved_ensemble(out, parameters)
    seed_key = _seed_key(args.seed)
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
    # The observers --save names, accumulated inside the event loop: no (B, N, K) trace,
    # unless order asks for one (to derive the gaps and the firing-order flag from it).
    exact_order = "order" in args.save
    save = SaveAt(trace=exact_order, writers="writers" in args.save, gaps="gaps" in args.save and not exact_order,
                  jobs="jobs" in args.save)
    gaps_and_order = jax.jit(_gaps_and_order)  # every chunk has one shape: compiled once
    # Every chunk is padded to the chunk size: that is the batch each simulate call splits.
    batch = min(args.chunk_size, args.fleets)
    devices, n_devices = _devices_for(args.device_info, batch)
    device_summary = _report_devices("ensemble", args.device_info, n_devices, batch=batch,
                                     batch_text=f"chunks of {batch} fleet{'s' * (batch != 1)}")

    def reduce(trace):
        arrays = {}
        if save.writers:
            arrays.update({f"writers_{name}": value for name, value in trace.writers._asdict().items()})
        if exact_order:
            gaps, changed = gaps_and_order(trace.fire_times)
            arrays.update(smallest_gap=gaps, order_changed=changed)
        elif save.gaps:
            arrays.update(smallest_gap=trace.gaps, order_changed=_order_changed(trace.gaps, trace.ok))
        if save.jobs:
            arrays.update({f"jobs_{name}": value for name, value in trace.jobs._asdict().items()})
        return {**arrays, "n_events": trace.n_events, "time": trace.time}

    started = time.perf_counter()
    try:
        with warnings.catch_warnings():
            warnings.showwarning = _one_line_warnings(warnings.showwarning)
            warnings.simplefilter("always", RuntimeWarning)
            result = run_ensemble(
                make_chunk,
                args.fleets,
                args.fires,
                chunk_size=args.chunk_size,
                out_dir=out,
                key=jax.random.fold_in(seed_key, 1),
                jitter=args.jitter if args.jitter > 0 else None,
                resume=not args.restart,
                progress=False if args.no_progress else None,
                reduce=reduce,
                save=save,
                config={"command": "ensemble", "arrays": _ensemble_arrays(args.save), "parameters": parameters},
                devices=devices,  # not part of the manifest: a resume may use another count
            )
    except EnsembleMismatchError as err:
        if err.differences:
            raise CliError(f"{out} holds another ensemble ({'; '.join(err.differences)}); "
                           "use --restart to start over") from None
        reason = str(err).split("; rerun with resume=False")[0]
        raise CliError(f"{reason}; use --restart to start over") from None
    wall_s = time.perf_counter() - started

    ok = result.ok
    status_all = int(np.bitwise_or.reduce(result.status))
    n_chunks = result.n_computed + result.n_loaded
    summary = {
        "command": "ensemble",
        "version": __version__,
        "parameters": parameters,
        "keys": {
            "seed": _SEED_KEY_TEXT,
            "launch": "fleet i: jax.random.fold_in(jax.random.fold_in(key(seed), 0), i)",
            "jitter": "jax.random.fold_in(key(seed), 1), folded with the fleet index",
        },
        "load": n_jobs * write / (compute + write),
        "ok": bool(ok.all()),
        "fleets_ok": int(ok.sum()),
        "status": status_all,
        "status_text": describe_status(status_all),
        "chunks": n_chunks,
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
        "files": [MANIFEST, "chunk-*.npz", "summary.json"],
        "notes": _ensemble_notes(args.save),
    }
    write_json(out / "summary.json", summary)

    print(
        f"ckpt-jax ensemble: {int(ok.sum())}/{args.fleets} fleets ok, N={n_jobs}, K={args.fires}, "
        f"{n_chunks} chunks ({result.n_computed} computed, {result.n_loaded} loaded), {wall_s:.2f} s "
        f"-> {out}"
    )
    if summary["order_changed_cycles"]:
        print(
            f"ckpt-jax: warning: the firing order changed in {summary['order_changed_cycles']} cycle(s) of "
            f"{summary['order_changed_fleets']} fleet(s) (jitter?): their smallest gaps are undefined and left "
            "out of smallest_gap_min_mean (see order_changed_* in summary.json"
            + ("" if exact_order else "; --save order also flags two jobs swapping") + ")",
            file=sys.stderr,
        )
    if not ok.all():
        print(f"ckpt-jax ensemble: {result.n_bad} fleet(s) failed: {describe_status(status_all)}", file=sys.stderr)
        return 1
    return 0


def _gap_summary(arrays: dict, ok) -> dict:
    """summary.json's smallest-gap statistics (None without ``--save gaps``)."""
    if "smallest_gap" not in arrays:
        return dict(smallest_gap_min_mean=None, smallest_gap_fleets=None, order_changed_cycles=None,
                    order_changed_fleets=None)
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
            "cycles 0..K-2 whose firing order held (ckpt_jax.smallest_gap of each chunk's trace), "
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
            "cycles 0..K-2 (ckpt_jax.smallest_gap, accumulated during the run: SaveAt(gaps=True)), "
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
            "first end of a K-th write, ckpt_jax.observed_interval) spent with exactly n writers, "
            "n = 0..N (ckpt_jax.writer_distribution); writers_max: the largest writer count seen "
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
        "file's chunk_index and the manifest's fingerprint. No trace is stored."
    )
    return " ".join(notes)
