"""The options the subcommands share, each defined once, with one meaning and one help text:
``--out``, ``--seed``, ``--no-progress``, ``--quick``, ``--horizon``, ``--force`` and ``--floor``.

``--horizon`` is a duration with its unit (``"24 h"``, ``"1 day"``), or a plain number in the
fleet file's time unit, as a fleet file reads its own ``horizon``: in a file with units the
number counts in its ``time_unit``; in a file of plain numbers (and in ``simulate`` without a
fleet file) in the model's time unit, where a unit is refused. Units are read by the project's
one parser (`ckpt_jax._units`); argparse reads the text (`Horizon`), and `horizon_value` turns
it into the engine's time once the fleet file is known.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import NamedTuple

from ..fleetfile import SEED_MAX
from ._common import CliError, integer

OUT_HELP = "output directory, created if missing (required)"

SEED_HELP = f"PRNG seed of every random draw, an integer from 0 to {SEED_MAX}"
# The default a command states: the fleet file's where it reads one, else 0.
SEED_FROM_FILE = "the fleet file's [design].seed, else 0"

NO_PROGRESS_HELP = "no progress bars"

HORIZON_HELP = (
    "the time simulated: a duration with its unit ('24 h', '2 day'), or a plain number in the fleet "
    "file's time unit (in a file of plain numbers, or without a fleet file, the model's time unit)"
)

# The default of a command that runs a fleet file (``design``, ``assess``).
HORIZON_FROM_FILE = "the fleet file's [design].horizon; where it gives none, a week in a file with units, else 1000"

# --quick caps the horizon at one day in a file with units, at 200 in a file of plain numbers.
QUICK_HORIZON_UNITS = 86400.0
QUICK_HORIZON_PLAIN = 200.0
QUICK_HORIZON_TEXT = f"horizon at most one day ({QUICK_HORIZON_PLAIN:g} in a file of plain numbers)"


def add_out(parser) -> None:
    """``--out DIR``, required (created if missing; checked writable before anything runs)."""
    parser.add_argument("--out", type=Path, required=True, metavar="DIR", help=OUT_HELP)


def add_seed(parser, *, default: int | None = 0) -> None:
    """``--seed``, 0 to `SEED_MAX`. ``default=None``: the command takes the fleet file's
    ``[design].seed`` (else 0) where none is given."""
    said = SEED_FROM_FILE if default is None else str(default)
    parser.add_argument(
        "--seed", type=integer(0, SEED_MAX), default=default, metavar="SEED", help=f"{SEED_HELP} (default: {said})"
    )


FORCE_HELP = "run beyond the work budget, 1e10 job-events (events x jobs x runs), refused otherwise"


def add_force(parser) -> None:
    """``--force``: run a job beyond the work budget (`ckpt_jax._plan.WORK_BUDGET`)."""
    parser.add_argument("--force", action="store_true", help=FORCE_HELP)


def add_no_progress(parser) -> None:
    parser.add_argument("--no-progress", action="store_true", help=NO_PROGRESS_HELP)


def add_quick(parser, what: str, **keywords) -> None:
    """``--quick``: a small fast run; ``what`` says how small. ``keywords`` go to
    ``add_argument`` (``reproduce``: a size among others)."""
    action = keywords.pop("action", "store_true")
    parser.add_argument("--quick", action=action, help=f"a small fast run: {what}", **keywords)


class Horizon(NamedTuple):
    """``--horizon`` as given: ``value`` in seconds where ``text`` has a unit (``seconds``),
    else the plain number."""

    text: str
    value: float
    seconds: bool


def horizon_option(text: str) -> Horizon:
    """argparse's type of ``--horizon``: a plain number or a duration with its unit, finite and
    > 0 (`ckpt_jax._units.to_base`)."""
    from .._units import UnitError, to_base

    try:
        value, seconds = float(text), False
    except ValueError:
        try:
            value, seconds = to_base(text, "duration"), True
        except UnitError as err:
            raise argparse.ArgumentTypeError(str(err)) from None
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"must be finite and > 0, got {text!r}")
    return Horizon(text, value, seconds)


def add_horizon(parser, default: str) -> None:
    """``--horizon H``; ``default`` says what the command runs to without it."""
    parser.add_argument(
        "--horizon", type=horizon_option, default=None, metavar="H", help=f"{HORIZON_HELP} (default: {default})"
    )


def horizon_value(horizon: Horizon, time_unit: str | None, *, fleet_file: bool = True) -> float:
    """``--horizon`` in the engine's time: seconds in a file with units (a plain number counts
    in its ``time_unit``); the plain number itself in a file of plain numbers, or without a
    fleet file (``fleet_file=False``), where a unit is refused."""
    from .._units import duration_unit

    if time_unit is None:
        if horizon.seconds:
            where = "a file of plain numbers" if fleet_file else "a fleet without a fleet file (no --fleet)"
            raise CliError(f"argument --horizon: {where} has no time unit; give a number, got {horizon.text!r}")
        return horizon.value
    value = horizon.value if horizon.seconds else horizon.value * duration_unit(time_unit)
    if not math.isfinite(value):
        raise CliError(f"argument --horizon: must be finite, got {horizon.text!r} ({time_unit})")
    return value


def run_horizon(horizon: Horizon | None, spec, quick: bool) -> float:
    """The horizon of a run on the fleet file ``spec`` (``design``, ``assess``): ``--horizon``,
    else with ``--quick`` the file's capped at one day (200 in a file of plain numbers), else
    the file's ``[design].horizon``."""
    if horizon is not None:
        return horizon_value(horizon, spec.time_unit)
    if quick:
        return min(spec.design.horizon, QUICK_HORIZON_PLAIN if spec.time_unit is None else QUICK_HORIZON_UNITS)
    return spec.design.horizon


def horizon_argument(spec, horizon: float) -> str:
    """``horizon`` (engine time) as a ``--horizon`` value that reads back to it: in the file's
    time unit (a plain number), or the number itself in a file of plain numbers."""
    from .._units import duration_unit

    shown = horizon if spec.time_unit is None else horizon / duration_unit(spec.time_unit)
    return f"{shown:g}" if float(f"{shown:g}") == shown else repr(float(shown))


FLOOR_HELP = (
    "the practical floor of a difference, in percent of the fleet's GPU time: a difference reads as a gain or a "
    "loss only where its 95%% CI excludes 0 and it exceeds this (default: %(default)s %%, 2.4 GPU-hours a day on "
    "1,000 GPUs; 0: the CI alone)"
)


def percent_floor(text: str) -> float:
    """``--floor``'s percent in [0, 100), as a share of the fleet's GPU time."""
    try:
        value = float(text.strip().removesuffix("%"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a percent of the fleet's GPU time (0.01), got {text!r}") from None
    if not (math.isfinite(value) and 0 <= value < 100):
        raise argparse.ArgumentTypeError(f"must be a percent in [0, 100), got {text!r}")
    return value / 100


def add_floor(parser) -> None:
    """``--floor PERCENT``: the practical floor of a difference (`ckpt_jax._estimate.FLOOR`)."""
    from .._estimate import FLOOR

    parser.add_argument(
        "--floor",
        type=percent_floor,
        default=FLOOR,
        metavar="PERCENT",
        help=FLOOR_HELP.replace("%(default)s", f"{100 * FLOOR:g}"),
    )
