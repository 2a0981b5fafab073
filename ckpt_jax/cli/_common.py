"""What every subcommand shares: option types, the output-folder check, one-line errors,
seeds and devices."""

from __future__ import annotations

import argparse
import errno
import math
import os
import re
import sys
import tempfile
from pathlib import Path
from typing import NamedTuple

import numpy as np

# Runs with more firings than this (fleets × jobs × cycles) show a progress bar.
PROGRESS_WORK = 200_000


CSV_COLUMNS = ("fleet", "job", "cycle", "fire_time", "end_time")


# Exit status of a run stopped by Ctrl-C (128 + SIGINT), as shells report it.
INTERRUPTED = 130


class CliError(Exception):
    """A failure the command line reports as one ``ckpt-jax: error: ...`` line (status 2)."""


class Parser(argparse.ArgumentParser):
    """Usage errors as one line (``ckpt-jax: error: argument --jobs: ...``), status 2."""

    def error(self, message):
        sys.stderr.write(f"ckpt-jax: error: {message} (see '{self.prog} --help')\n")
        raise SystemExit(2)


# -- option types: argparse turns ArgumentTypeError into "argument --opt: message" --------
def defaults_note(spec) -> str | None:
    """The defaults a fleet file leaves in force that change its answers, said where a
    command reports (stdout and report.md): a group without ``restart`` runs with none, 0
    (a failed job resumes at once; docs/guide/fleet-files.md). None where every group gives
    its restart."""
    names = spec.restart_defaults() if hasattr(spec, "restart_defaults") else ()
    if not names:
        return None
    groups = ", ".join(repr(name) for name in names)
    which = "group" if len(names) == 1 else "groups"
    return (
        f"{which} {groups} {'gives' if len(names) == 1 else 'give'} no restart: taken as 0, the default (a failed job "
        'resumes at once, so each failure costs only the work lost); set restart (such as "10 min") to count '
        "the time a restart takes"
    )


def integer(low: int, high: int | None = None):
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


def real(*, positive: bool):
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


def _cap(text: str) -> float | None:
    if text.strip().lower() in ("none", "inf", "infinity"):
        return None
    try:
        return real(positive=True)(text)
    except argparse.ArgumentTypeError as err:
        raise argparse.ArgumentTypeError(f"{err} (or 'none' for uncapped)") from None


def _sizes(text: str) -> tuple:
    """``--size``: one or more comma-separated job sizes, each finite and > 0."""
    parts = [part.strip() for part in text.split(",")]
    if not all(parts):
        raise argparse.ArgumentTypeError(f"expected sizes > 0 separated by commas, e.g. 1,2,4, got {text!r}")
    return tuple(real(positive=True)(part) for part in parts)


def job_sizes(sizes: tuple | None, n_jobs: int) -> np.ndarray | None:
    """The (N,) sizes of ``--size``: the list repeated over the N jobs (one value: every job;
    ``1,2,4`` with 6 jobs: 1, 2, 4, 1, 2, 4); None without ``--size``. A list longer than N
    is an error."""
    if sizes is None:
        return None
    if len(sizes) > n_jobs:
        raise CliError(f"--size lists {len(sizes)} sizes but a fleet has only --jobs {n_jobs}")
    return np.resize(np.asarray(sizes, np.float64), n_jobs)


def policy_parameters(args) -> dict:
    """``--size`` and the two policies as summary/manifest entries, only where they differ
    from the defaults (so ensembles saved before sizes existed still resume)."""
    entries = {}
    if args.size is not None:
        sizes = job_sizes(args.size, args.jobs)
        assert sizes is not None  # --size was given
        entries["size"] = sizes.tolist()
    if args.power_policy != "maxmin":
        entries["power_policy"] = args.power_policy
    if args.storage_policy != "fair":
        entries["storage_policy"] = args.storage_policy
    return entries


def fleet_keywords(args, n_jobs: int) -> dict:
    """The `Fleet` keyword arguments of the fleet options (`add_fleet_options`), shared by
    ``simulate`` and ``ensemble``."""
    return dict(
        cap=args.cap,
        throughput=args.throughput,
        delay=args.delay,
        async_fraction=args.async_fraction,
        size=1.0 if args.size is None else job_sizes(args.size, n_jobs),
        power_policy=args.power_policy,
        storage_policy=args.storage_policy,
        dtype=np.float64 if args.x64 else np.float32,
    )


def _fraction(text: str) -> float:
    value = real(positive=False)(text)
    if value > 1:
        raise argparse.ArgumentTypeError(f"must lie in [0, 1], got {text!r}")
    return value


def add_x64(parser) -> None:
    action = parser.add_argument("--x64", action=argparse.BooleanOptionalAction, default=True)
    # Set after construction: BooleanOptionalAction (Python < 3.13) would append its own
    # "(default: True)" to a help given to the constructor.
    action.help = "compute in float64 (jax_enable_x64); --no-x64: float32 (default: --x64)"


# --devices: at most this many (one XLA host device per core is cheap, thousands are not).
_DEVICES_MAX = 1024


# A batch is split over several devices only with at least this many fleets per device.
_FLEETS_PER_DEVICE = 2


_FORCE_FLAG = "xla_force_host_platform_device_count"


def _device_count(text: str) -> int | None:
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


def add_devices(parser, *, shards: bool = True, inside: bool = False) -> None:
    """``--devices``: ``shards``, the command splits its batches over them; ``inside``, the
    runs it makes inside split over them (`ckpt_jax.sharding.default_devices`)."""
    what = (
        "devices to split the fleets over"
        if shards
        else "devices to split every run over"
        if inside
        else "devices to set up (the experiments do not split over them yet)"
    )
    parser.add_argument(
        "--devices",
        type=_device_count,
        default=None,
        metavar="N|all",
        help=f"{what}: 'all' = one CPU device per core on a CPU-only machine, "
        "every local GPU on a GPU machine; N = that many (default: all)",
    )


def add_fleet_options(parser, *, ensemble: bool = False) -> None:
    """The options of a fleet of identical jobs, shared by ``simulate`` and ``ensemble`` (each adds
    ``--seed``, `_options.add_seed`)."""
    from .._policies import POWER_POLICIES, STORAGE_POLICIES, THROUGHPUT_PRESETS  # no JAX: the parser is built first

    parser.add_argument("--jobs", type=integer(2), default=8, metavar="N", help="jobs per fleet (default: %(default)s)")
    if ensemble:
        # No default here: --compute/--write and --load exclude each other (_durations).
        compute_help = "solo compute duration (work) per cycle (default: 10, or from --load)"
        write_help = "solo write duration (volume) per checkpoint (default: 1, or from --load)"
    else:
        compute_help = "solo compute duration (work) per cycle (default: %(default)g)"
        write_help = "solo write duration (volume) per checkpoint (default: %(default)g)"
    parser.add_argument(
        "--compute", type=real(positive=True), default=None if ensemble else 10.0, metavar="T", help=compute_help
    )
    parser.add_argument(
        "--write", type=real(positive=True), default=None if ensemble else 1.0, metavar="d", help=write_help
    )
    parser.add_argument(
        "--cap",
        type=_cap,
        default=None,
        metavar="C",
        help="power cap, in jobs at full speed; 'none' = uncapped (default: none)",
    )
    parser.add_argument(
        "--throughput",
        choices=sorted(THROUGHPUT_PRESETS),
        default="shared",
        help="aggregate write throughput f(n) with n concurrent writers (default: %(default)s)",
    )
    parser.add_argument(
        "--jitter",
        type=real(positive=False),
        default=0.0,
        metavar="SIGMA",
        help="standard deviation of each compute phase's work (default: 0)",
    )
    parser.add_argument(
        "--delay",
        type=real(positive=False),
        default=0.0,
        metavar="TAU",
        help="controller delay: the cap acts on the computing count from TAU earlier (default: 0)",
    )
    parser.add_argument(
        "--async-fraction",
        type=_fraction,
        default=0.0,
        metavar="ALPHA",
        help="asynchronous checkpoints: compute fraction kept while a write drains; 0 = blocking (default: 0)",
    )
    parser.add_argument(
        "--size",
        type=_sizes,
        default=None,
        metavar="W[,W...]",
        help="job sizes (full-speed power draw, in the units of --cap), comma-separated "
        "and repeated over the jobs: 1,2,4 with --jobs 6 is 1,2,4,1,2,4 (default: 1)",
    )
    parser.add_argument(
        "--power-policy",
        choices=POWER_POLICIES,
        default="maxmin",
        help="how the cap is divided among computing jobs: maxmin (water-filling) or "
        "uniform (every job throttled alike) (default: %(default)s)",
    )
    parser.add_argument(
        "--storage-policy",
        choices=STORAGE_POLICIES,
        default="fair",
        help="how f(n) is divided among writers: fair (equal shares), weighted (by "
        "size), fcfs (one at a time, in firing order), fcfs_nonblocking (one at a time, a "
        "waiting job computes on) or cooperative (one at a time, least expected waste "
        "first) (default: %(default)s)",
    )


# -- failures ---------------------------------------------------------------------------
SMALLER = "try fewer fleets, jobs or cycles (ensemble: a smaller --chunk-size)"


_NUMPY_SCALAR = re.compile(r"\bnp\.(?:float|int|uint|complex)\d*\(([^()]*)\)")


_NUMPY_BOOL = re.compile(r"\bnp\.(True|False)_\b")


_NUMPY_STR = re.compile(r"\bnp\.str_\(('[^']*'|\"[^\"]*\")\)")


def plain_text(message: str) -> str:
    """``message`` on one line, numbers as plain numbers (``-1.0``, not ``np.float64(-1.0)``)."""
    message = _NUMPY_SCALAR.sub(r"\1", message)
    message = _NUMPY_BOOL.sub(r"\1", message)
    message = _NUMPY_STR.sub(r"\1", message)
    return " ".join(message.split())


def fail(message: str, prefix: str = "ckpt-jax: error: ", status: int = 2) -> int:
    sys.stderr.write(f"{prefix}{plain_text(message)}\n")
    return status


def os_error_text(err: OSError, resumes: bool) -> str:
    where = f" ({err.filename})" if err.filename else ""
    if err.errno in (errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC)):
        what = "no space left on device" if err.errno == errno.ENOSPC else "disk quota exceeded"
        then = "rerun the same command to resume" if resumes else "rerun the same command"
        return (
            f"{what} while writing{where}; the files written before are complete "
            f"(none is half written): free some space, then {then}"
        )
    return f"{err.strerror or err}{where}"


def check_out_dir(out: Path) -> None:
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


def plain(value) -> str:
    """A value for a message: ``none``, ``on``/``off``, ``10`` (not ``10.0``), ``0.25``."""
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() and abs(value) < 1e16 else repr(value)
    return str(value)


def seed_key(seed: int):
    """The PRNG key of ``--seed``: threefry2x32 with key data ``[seed >> 32, seed & 0xFFFFFFFF]``.

    That is ``jax.random.key(seed)`` (default implementation) wherever it is exact: every
    seed under x64, seeds below 2**32 under float32 (where ``jax.random.key`` would wrap
    larger seeds around onto small ones, and raises beyond 2**63).
    """
    import jax

    data = np.array([seed >> 32, seed & 0xFFFFFFFF], dtype=np.uint32)
    # The stub asks for a jax.Array; any array-like is accepted (and a NumPy one stays exact).
    return jax.random.wrap_key_data(data, impl="threefry2x32")  # pyright: ignore[reportArgumentType]


# -- devices ----------------------------------------------------------------------------
class _DeviceInfo(NamedTuple):
    platform: str  # of the default backend: "cpu", "gpu", "tpu"
    available: int  # its local devices
    requested: int | None  # --devices N; None for all
    why: str  # how the count came about, for the devices line


def _usable_cores() -> int:
    """The cores this process may run on (its CPU affinity), else ``os.cpu_count()``."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def start_devices(requested: int | None) -> _DeviceInfo:
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
    # -1: not set. A flag with a context manager is read as an attribute (config.read refuses
    # it), which the Config class sets at run time and pyright does not see.
    preset = jax.config.jax_num_cpu_devices  # pyright: ignore[reportAttributeAccessIssue]
    if requested is None and preset >= 0 and preset != cores:
        why = (
            "as JAX_NUM_CPU_DEVICES sets it"
            if "JAX_NUM_CPU_DEVICES" in os.environ
            else "as jax_num_cpu_devices is set in this process"
        )
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
            raise CliError(f"--devices {requested}: this machine has {available} {name} device{'s' * (available != 1)}")
        why = why if requested is not None else f"every local {name}"
    elif started and (available < requested if requested is not None else available != cores):
        asked = f"--devices {requested}" if requested is not None else f"one per core ({cores})"
        why = (
            f"{asked} not possible: JAX had already started in this process with {available}; "
            "run ckpt-jax as a process of its own"
        )
    return _DeviceInfo(platform, available, requested, why)


def devices_inside(info: _DeviceInfo) -> int:
    """The devices the runs of ``assess``, ``design`` and ``compare`` split over (each run
    uses at most one per `ckpt_jax.sharding.MIN_FLEETS_PER_DEVICE` of its fleets)."""
    return info.available if info.requested is None else min(info.requested, info.available)


def devices_for(info: _DeviceInfo, batch: int) -> tuple:
    """(``devices`` for simulate / run_ensemble, device count) for batches of ``batch``
    fleets: at most the devices asked for and available, at least 2 fleets per device."""
    wanted = info.available if info.requested is None else min(info.requested, info.available)
    used = max(1, min(wanted, batch // _FLEETS_PER_DEVICE))
    return (None if used == 1 else used), used


def report_devices(
    command: str,
    info: _DeviceInfo,
    used: int,
    *,
    batch: int | None = None,
    batch_text: str = "",
    detail: str | None = None,
) -> dict:
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
def check_period(compute: float, write: float) -> tuple:
    if not math.isfinite(compute + write):
        raise CliError(f"--compute + --write overflows ({plain(compute)} + {plain(write)}): use smaller durations")
    return compute, write


SEED_KEY_TEXT = (
    "key(seed): the threefry2x32 key with data [seed >> 32, seed & 0xFFFFFFFF], i.e. jax.random.key(seed) under x64"
)


def finite_or_none(value) -> float | None:
    value = float(value)
    return value if math.isfinite(value) else None


# -- numbers as an operator reads them (reports and printed lines of every command) -------------
def significant(value: float, digits: int = 3) -> str:
    """``value`` with ``digits`` significant figures below 10^(digits−1) ("4.27", "0.0312",
    "4.20"; a number they show exactly without trailing zeros: "11", "0.5"), every digit of a
    larger number's integer part, grouped by thousands ("1,024", not "1020"; "10,123"), an
    exponent from 1e15 on."""
    value = float(value)
    if value == 0 or not math.isfinite(value):
        return f"{value:g}"
    rounded = float(f"{value:.{digits}g}")
    if abs(rounded) >= 1e15:
        return f"{rounded:.{digits}g}"
    if abs(rounded) >= 10 ** (digits - 1):
        return f"{value:,.0f}"
    decimals = max(digits - 1 - math.floor(math.log10(abs(rounded))), 0)
    text = f"{rounded:.{decimals}f}"
    if "." in text and _reads_exactly(value, digits):  # a round number: "11", "0.5", not "11.0", "0.500"
        text = text.rstrip("0").rstrip(".")
    return text


def _reads_exactly(value: float, digits: int) -> bool:
    """Whether `significant` shows ``value`` without rounding it (to 1e-9 relative)."""
    if abs(value) >= 10 ** (digits - 1):
        return abs(value - round(value)) <= 1e-9 * abs(value)
    return abs(float(f"{value:.{digits}g}") - value) <= 1e-9 * abs(value)


def percent_text(fraction: float, decimals: int = 2) -> str:
    """A fraction in percent ("86.95 %")."""
    return f"{100 * fraction:.{decimals}f} %"


def percent_ci_text(estimate: dict) -> str:
    """A share and its 95 % CI in percent ("86.95 % [86.64, 87.26]"); "n/a" for a null bound;
    the share alone where both bounds are null (every draw the same: one draw, no interval)."""
    if estimate["low"] is None and estimate["high"] is None:
        return percent_text(estimate["mean"])
    low, high = ("n/a" if x is None else f"{100 * x:.2f}" for x in (estimate["low"], estimate["high"]))
    return f"{percent_text(estimate['mean'])} [{low}, {high}]"


# Units a time may be shown in, largest first (seconds each).
_TIME_UNITS = (("day", 86400.0), ("h", 3600.0), ("min", 60.0), ("s", 1.0))


def duration_text(seconds: float, time_unit: str | None, digits: int = 3) -> str:
    """A time of the engine in the file's time unit ("30 min", "1.63 h"); one under a whole
    unit in the largest smaller unit that shows it without rounding, else the largest in which
    it is at least 1 ("11 min", not "0.183333333333 h"; "5 s", not "0.00139 h"). A file of
    plain numbers (``time_unit`` None): the number."""
    from .._units import duration_unit

    if time_unit is None:
        return significant(seconds, digits)
    scale = duration_unit(time_unit)
    shown = seconds / scale
    smaller = [(name, size) for name, size in _TIME_UNITS if size < scale]
    if shown == 0 or not math.isfinite(shown) or abs(shown) >= 1 or not smaller:
        return f"{significant(shown, digits)} {time_unit}"
    fits = [(name, seconds / size) for name, size in smaller if abs(seconds / size) >= 1] or [("s", seconds)]
    name, value = next(((n, v) for n, v in fits if _reads_exactly(v, digits)), fits[0])
    return f"{significant(value, digits)} {name}"


_PREFIXES = ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"), (1.0, ""))


def quantity_text(value: float, base: str, digits: int = 3) -> str:
    """A size (``base`` "B") or a bandwidth ("B/s") with the SI prefix that shows it without
    rounding, the largest such ("2 TB/s", "1,024 GB/s", "1.2 GB/s"), else the largest in which
    it is at least 1 ("1.23 TB")."""
    value = float(value)
    if value == 0 or not math.isfinite(value):
        return f"{value:g} {base}"
    fits = [(prefix, value / size) for size, prefix in _PREFIXES if 1 <= abs(value / size) < 1e4]
    if not fits:
        return f"{value:.{digits}g} {base}"
    prefix, shown = next(((p, v) for p, v in fits if _reads_exactly(v, digits)), fits[0])
    return f"{significant(shown, digits)} {prefix}{base}"
