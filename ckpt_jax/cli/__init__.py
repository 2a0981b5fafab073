"""Command line: ``ckpt-jax simulate ...`` (also ``python -m ckpt_jax simulate ...``).

`main` builds a fleet from the options, runs `ckpt_jax.simulate`, and writes into
``--out``: ``trace.csv``, ``trace.npz``, ``summary.json`` and ``trace.png`` (fleet 0).
``ckpt-jax ensemble`` runs a long ensemble of random launches in resumable chunks
(`ckpt_jax.ensemble.run_ensemble`); ``ckpt-jax reproduce`` runs the experiments; ``ckpt-jax design``
designs checkpoint intervals for a fleet file (`ckpt_jax.fleetfile`); ``ckpt-jax assess`` says
what the fleet of a fleet file loses as configured (`ckpt_jax.assess`); ``ckpt-jax compare``
weighs what-if scenarios of a fleet file on common draws (`ckpt_jax.assess.compare`); ``ckpt-jax fit``
fits a fleet file to a cluster's logs (`ckpt_jax.fit`). Subcommands live
in ``_SUBCOMMANDS``.

``--devices`` (every subcommand; default ``all``): one XLA host device per core on a
CPU-only machine, set before JAX's backend starts, or every local GPU; ``simulate`` and
``ensemble`` split their batches over them (at least 2 fleets per device), ``assess``,
``design`` and ``compare`` every run they make inside (`ckpt_jax.sharding.default_devices`),
and each prints one line saying how many it used. Results do not depend on the count.

On the CPU the program also keeps XLA's reductions out of YNNPACK
(``--xla_cpu_experimental_ynn_fusion_type=``, `ckpt_jax._cpu_flags`; ``CKPT_JAX_CPU_FLAGS=0``
leaves ``XLA_FLAGS`` as it is) and lowers the threefry hash unrolled (`ckpt_jax._threefry`):
both change no number, only the time.

Every failure is one line on stderr, ``ckpt-jax: error: ...``, and exit status 2: a bad
option, an ``--out`` that cannot be written (checked before anything runs), a full disk,
or a `ValueError` of the library. Ctrl-C prints one line and exits with status 130.

The subcommands live in ``simulate.py``, ``ensemble.py``, ``reproduce.py``, ``design.py`` and ``assess.py``; what they
share in ``_common.py``; the options they share (``--out``, ``--seed``, ``--no-progress``, ``--quick``,
``--horizon``), each defined once with one meaning, in ``_options.py``.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from collections.abc import Sequence
from pathlib import Path

from .. import _cpu_flags, _threefry
from ._common import (
    INTERRUPTED,
    SMALLER,
    CliError,
    Parser,
    check_out_dir,
    defaults_note,
    devices_for,
    devices_inside,
    fail,
    os_error_text,
    plain_text,
    seed_key,
    start_devices,
)
from .assess import add_assess
from .compare import add_compare
from .design import add_design
from .ensemble import add_ensemble
from .fit import add_fit
from .reproduce import add_reproduce
from .simulate import add_simulate

__all__ = ["main", "run", "build_parser", "CliError", "seed_key", "start_devices", "devices_for"]


_SUBCOMMANDS = (add_simulate, add_reproduce, add_ensemble, add_design, add_assess, add_compare, add_fit)

# Subcommands whose runs inside split over the devices (`ckpt_jax.sharding.default_devices`);
# simulate and ensemble split their batches themselves.
_SPLIT_INSIDE = ("assess", "design", "compare")


def build_parser() -> argparse.ArgumentParser:
    """The `ckpt-jax` argument parser, one subparser per subcommand."""
    from .. import __version__

    parser = Parser(
        prog="ckpt-jax",
        description="Exact, vectorized simulations of checkpointing fleets.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for add in _SUBCOMMANDS:
        add(subparsers)
    return parser


def run() -> None:
    """The ``ckpt-jax`` program (also ``python -m ckpt_jax``): `main` in a process of its own.

    The process is ckpt_jax's, so it lowers JAX's threefry hash with its rounds unrolled on
    the CPU (`ckpt_jax._threefry`: the same bits, runs with failures or jitter compile
    faster) and keeps XLA's reductions out of YNNPACK (`ckpt_jax._cpu_flags`: the same bits,
    the loops run faster), once the arguments and the fleet file's keys are checked (that
    imports JAX, which takes seconds); an in-process call of `main` leaves JAX's lowering
    and ``XLA_FLAGS`` as they are."""
    sys.exit(main(_own_process=True))


def _one_line_fleet_warnings(show):
    """A `warnings.showwarning` printing a fleet file's warnings (`FleetFileWarning`: a key
    that changes nothing) as ``ckpt-jax: warning: ...`` lines, the others as before."""
    from ..fleetfile import FleetFileWarning

    def showwarning(message, category, filename, lineno, file=None, line=None):
        if not issubclass(category, FleetFileWarning):
            return show(message, category, filename, lineno, file, line)
        sys.stderr.write(f"ckpt-jax: warning: {plain_text(str(message))}\n")
        return None

    return showwarning


def _checked_run(args, own_process: bool, restore: dict) -> int:
    """The fleet file's keys (without JAX), the options, then JAX and the devices, then the run
    (``restore``: the x64 setting found, for `main` to put back)."""
    fleet_file = getattr(args, "fleet_file", None) or getattr(args, "fleet", None)
    if fleet_file is not None:  # its TOML and its keys' names, at once: JAX takes seconds to import
        from ..fleetfile import check_keys

        check_keys(fleet_file)
    if getattr(args, "check", None) is not None:
        args.check(args)  # option combinations, before anything is created
    note = None if getattr(args, "spec", None) is None else defaults_note(args.spec)
    if note is not None:
        print(f"ckpt-jax {args.command}: note: {note}.")
    check_out_dir(Path(args.out))
    if not getattr(args, "uses_jax", True):  # `fit`: NumPy and SciPy only, no JAX to start
        return args.run(args)
    if own_process:
        _cpu_flags.add_reduction_flag()  # before anything starts JAX's backend
        _threefry.unroll_on_cpu()
    import jax

    # x64 must be set before any array is built; `main` restores it afterwards, so that an
    # in-process call (tests, notebooks) does not change the caller's JAX configuration.
    restore["x64"] = bool(jax.config.read("jax_enable_x64"))
    jax.config.update("jax_enable_x64", args.x64)
    # The host device count, before anything starts JAX's backend (nothing imported so far
    # does); this starts it.
    args.device_info = start_devices(args.devices)
    if args.command not in _SPLIT_INSIDE:
        return args.run(args)
    from ..sharding import default_devices

    # The runs these commands make inside (each of its own batch size) split over the devices.
    wanted = devices_inside(args.device_info)
    with default_devices(wanted if wanted > 1 else None):
        return args.run(args)


def main(argv: Sequence[str] | None = None, *, _own_process: bool = False) -> int:
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
    restore: dict = {}
    try:
        with warnings.catch_warnings():  # a fleet file's warnings, from its load on, on one line
            warnings.showwarning = _one_line_fleet_warnings(warnings.showwarning)
            return _checked_run(args, _own_process, restore)
    except KeyboardInterrupt:
        then = "rerun the same command to resume" if args.resumes else "rerun the same command to start again"
        return fail(f"interrupted; {then}", prefix="ckpt-jax: ", status=INTERRUPTED)
    except CliError as err:
        return fail(str(err))
    except OSError as err:
        return fail(os_error_text(err, args.resumes))
    except (ValueError, OverflowError) as err:  # the library's validation; numbers out of range
        return fail(str(err))
    except MemoryError:
        return fail(f"out of memory: {SMALLER}")
    except RuntimeError as err:  # XLA's out of memory (jax.errors.JaxRuntimeError)
        if "RESOURCE_EXHAUSTED" not in str(err):
            raise
        return fail(f"out of memory ({str(err).splitlines()[0][:200]}): {SMALLER}")
    finally:
        if "x64" in restore:
            import jax

            jax.config.update("jax_enable_x64", restore["x64"])
