"""``ckpt-jax design FLEET.toml --out DIR``: checkpoint intervals for a fleet file
(`cj.design.checkpoint_intervals`, docs/model.md claim 10), with a report and figures.

The intervals come from a deterministic compass search on common draws (``--method search``,
the default: `checkpoint_intervals` with ``method="search"``), started at the best of the
baselines and the file's own intervals, or from ``optax.adam`` (``--method adam``). Every
comparison of the report comes from one set of fresh draws (`cj.design.Evaluation`).

design.json holds the run's settings, the intervals per group (``groups``: the design, what the
search found (``searched``), each baseline, and ``recommended``: the intervals to use, in the
file's engine units), ``recommended`` (the run's one recommendation, `recommend`: ``use``, the
set to use, ``"design"``, ``"current"`` or the baseline fallen back to; ``reason``; ``text``,
the sentence the report and stdout print), ``method``,
``converged``, ``start`` (the set the search started from), ``fallback`` (the baseline
recommended instead, where one beat the search outside the noise, else null),
``restart_stagger`` and ``launch_stagger`` (designed with ``--staggers``, in engine units; null
where not designed or the design fell back), ``budgets`` (with budgets, `_budgets_json`: the
limits, the recommendation's use of each on the fresh draws, ``binding``, the shadow prices and
the intervals scaled onto the limits), ``trade_off`` (the fleet waste, GPU-hours a day, volume
and power steps along the recommended intervals × ``factors``), the fleet waste of
the design and the baselines with 95% CIs (``waste``, ``baselines``, ``candidates``), the waste
per group on the same draws (``per_group``, ``per_group_saved``, ``per_group_fleet_waste``),
``power_and_storage`` (per interval set, the power steps above the threshold and the volume of
completed checkpoints, per day in a file with units, else per horizon; and the largest power
step at one instant, ``largest_step`` the mean over the draws of each draw's largest with its
95% CI, ``largest_step_max`` the largest in any draw, in ``step_unit``: W where the file gives
power_per_gpu, else GPUs' draw (``"gpu"``) or units of size), the writer-count
distribution, the history and ``rerun``, the command for a settled answer.

A file with units (`FleetSpec.time_unit` set: the engine runs in seconds, bytes and B/s, a
group's size counts GPUs) adds, on the same fresh draws as ``per_group``:

- ``current``: the file's own intervals (each group's ``interval``/``compute``, Young's where a
  group gives none) as a fourth comparison (also in a file of plain numbers that gives any), in
  ``groups[g]["current"]``, ``per_group``,
  ``per_group_saved`` and ``per_group_fleet_waste``;
- ``time_unit`` and ``seconds_per_time_unit``; ``intervals_in_time_unit``: per group its
  ``name`` and every interval set (``design``, ``current``, the baselines) in the time unit;
  ``recommendation``: one sentence per group, at the recommended interval ("405B pretrain:
  checkpoint every 4.3 min");
- ``gpus``: GPUs per group (size × count) and of the ``fleet``;
- ``goodput``: ``current`` and ``design``, each ``fleet`` and ``groups`` (a list), each an
  estimate ``{mean, low, high}`` (95% CI) of 1 − waste, waste weighted by size;
- ``per_group_fleet_saved``: per comparison (``current`` and each baseline), the fleet waste it
  wastes more than the design, paired over the draws;
- ``gpu_hours_saved_per_day``: per comparison, ``fleet`` and ``groups``: the waste saved × GPUs
  × 24. The waste is a share of the wall-clock time over the horizon, so every day of it the
  design saves that share of each GPU's 24 hours;
- ``gains_and_pays``: per comparison, the groups whose GPU-hours the design saves (``gain``),
  costs (``pay``) outside the noise, and the rest (``tie``).

Files of plain numbers have none of these keys.
"""

from __future__ import annotations

import json
import math
import platform
import time
import unicodedata
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from .._estimate import FLOOR, effect
from ._common import (
    SEED_KEY_TEXT,
    CliError,
    add_devices,
    add_x64,
    devices_inside,
    duration_text,
    integer,
    percent_ci_text,
    quantity_text,
    report_devices,
    seed_key,
    significant,
)
from ._options import (
    HORIZON_FROM_FILE,
    QUICK_HORIZON_TEXT,
    add_floor,
    add_force,
    add_horizon,
    add_no_progress,
    add_out,
    add_quick,
    add_seed,
    horizon_argument,
    run_horizon,
)

if TYPE_CHECKING:
    from ..design import Comparison, DesignResult, Evaluation

# --quick: a small run that shows every output in well under a minute on a laptop CPU (and
# the horizon capped at one day, 200 in a file of plain numbers: `_options.run_horizon`).
QUICK = {"steps": 8, "draws": 4, "pairs": 2}

# The methods of `cj.design.checkpoint_intervals` (its METHODS; not imported, to keep --help light).
METHODS = ("search", "adam")

# The search's finest move: a factor 1 + SEARCH_RTOL on an interval (`checkpoint_intervals`' rtol).
SEARCH_RTOL = 0.1

BASELINES = {"young": "Young", "daly": "Daly", "young_contended": "contended Young"}
# With two-level checkpoints (docs/model.md §1d) a fourth: a lone job's exact optimum.
LABELS = {**BASELINES, "two_level": "two-level optimum"}
# With budgets (docs/model.md §1g) each set that breaks them, scaled up until it keeps them.
SCALED = {
    f"{name}_scaled": f"{label} scaled to the budgets"
    for name, label in {**LABELS, "current": "the current intervals"}.items()
}
LABELS.update(SCALED)
BUDGET_NAMES = {"written": "max_written", "power_steps": "max_power_steps"}


def baselines_of(summary: dict) -> dict:
    """{name: label} of the baselines of a run's summary, in their order."""
    return {name: LABELS[name] for name in summary["baselines"]}


FILES = [
    "design.json",
    "report.md",
    "objective.png",
    "waste_by_group.png",
    "schedule.png",
    "writers.png",
    "trade_off.png",
]


def add_design(subparsers) -> None:
    parser = subparsers.add_parser(
        "design",
        help="design checkpoint intervals for the fleet of a fleet file",
        description=(
            "Find the checkpoint interval of every job group of FLEET.toml that minimises the "
            "fleet's waste, by optimising over the exact simulator (docs/model.md claim 10), and "
            "compare it with Young's, Daly's and the contended Young interval on fresh draws. "
            "Writes design.json, report.md and figures into --out."
        ),
    )
    parser.add_argument("fleet_file", type=Path, metavar="FLEET.toml", help="the fleet file (see examples/fleet.toml)")
    parser.add_argument(
        "--steps",
        type=integer(1, 100_000),
        default=None,
        metavar="K",
        help="at most K optimisation steps (default: [design].steps of the file, else 100)",
    )
    parser.add_argument(
        "--draws",
        type=integer(2, 100_000),
        default=None,
        metavar="S",
        help="failure draws per step (default: [design].draws, else 16)",
    )
    parser.add_argument(
        "--pairs",
        type=integer(1, 1_000),
        default=None,
        metavar="P",
        help="antithetic directions per step (default: [design].pairs, else 4)",
    )
    add_horizon(parser, HORIZON_FROM_FILE)
    add_seed(parser, default=None)
    parser.add_argument(
        "--offsets",
        action="store_const",
        const=True,
        default=None,
        help="design each job's launch offset too (default: [design].offsets, else off)",
    )
    parser.add_argument(
        "--staggers",
        action="store_const",
        const=True,
        default=None,
        help='design the restart stagger ([[outages]]) and the [launch] stagger (mode "staggered") too, '
        "with --method search (default: [design].staggers, else off)",
    )
    parser.add_argument(
        "--method",
        choices=METHODS,
        default="search",
        help="search: a deterministic compass search over each group's interval on common draws, from the "
        "best of the baselines and the file's intervals (default); adam: optax.adam on a smoothed gradient "
        "(--pairs directions per step)",
    )
    parser.add_argument(
        "--max-written",
        default=None,
        metavar="VOLUME",
        help='a budget on the fleet\'s written volume: in a file with units a rate such as "500 TB/day", '
        "in a file of plain numbers the volume over H (default: [design].max_written, else none)",
    )
    parser.add_argument(
        "--max-power-steps",
        type=float,
        default=None,
        metavar="N",
        help="a budget on the power steps above the threshold: per day in a file with units, over H in a "
        "file of plain numbers (default: [design].max_power_steps, else none)",
    )
    parser.add_argument(
        "--budget-bound",
        choices=("mean", "upper"),
        default=None,
        help="keep each budget with its mean on the common draws, or with the upper end of its 95%% CI "
        "(default: [design].budget_bound, else mean)",
    )
    add_quick(
        parser,
        f"{QUICK['steps']} steps, {QUICK['draws']} draws, {QUICK['pairs']} pairs, {QUICK_HORIZON_TEXT}; "
        "options given win",
    )
    add_no_progress(parser)
    add_floor(parser)
    add_force(parser)
    add_devices(parser, shards=False, inside=True)
    add_x64(parser)
    add_out(parser)
    parser.set_defaults(run=_design, check=_check, resumes=False)


def settings_for(args, spec) -> dict:
    """The run's settings: options, else --quick, else the file's [design]."""
    file = spec.design
    quick = args.quick

    def pick(option, key):
        if option is not None:
            return option
        return QUICK[key] if quick else getattr(file, key)

    return {
        "steps": pick(args.steps, "steps"),
        "draws": pick(args.draws, "draws"),
        "pairs": pick(args.pairs, "pairs"),
        "horizon": run_horizon(args.horizon, spec, quick),
        "seed": args.seed if args.seed is not None else file.seed,
        "launch": _launch_name(spec.launch_of(design=True)),
        **({"stagger": spec.launch.stagger} if spec.launch.mode == "staggered" else {}),
        "offsets": args.offsets if args.offsets is not None else file.offsets,
        "staggers": bool(
            getattr(args, "staggers", None) if getattr(args, "staggers", None) is not None else file.staggers
        ),
        "method": getattr(args, "method", "search"),
        "bounds": list(spec.bounds()),
        "group_bounds": [list(bounds) for bounds in spec.group_bounds()],
        "quick": quick,
        "floor": getattr(args, "floor", FLOOR),
        "budgets": budgets_for(args, spec),
    }


def budgets_for(args, spec) -> dict | None:
    """The run's budgets (docs/model.md §1g): options, else the file's ``[design]`` and each
    group's ``min_interval``; None where none is set. ``max_written`` in the engine's units
    (B/s in a file with units, the volume over H in a file of plain numbers)."""
    file = spec.design
    written = _max_written(getattr(args, "max_written", None), spec)
    written = file.max_written if written is None else written
    steps = getattr(args, "max_power_steps", None)
    if steps is not None and not (math.isfinite(steps) and steps >= 0):
        raise CliError(f"--max-power-steps must be a finite number >= 0, got {steps:g}")
    steps = file.max_power_steps if steps is None else steps
    floors = [group.min_interval for group in spec.groups]
    if written is None and steps is None and all(floor is None for floor in floors):
        return None
    bound = getattr(args, "budget_bound", None) or file.budget_bound
    return {
        "max_written": written,
        "max_power_steps": steps,
        "bound": bound,
        "min_interval": floors,
        "per": "day" if spec.time_unit is not None else "horizon",
    }


def _max_written(text, spec) -> float | None:
    """--max-written: a rate with its unit in a file with units (in B/s), else a plain volume."""
    if text is None:
        return None
    if spec.time_unit is not None:
        from .._units import UnitError, to_base

        try:
            value = to_base(text, "bandwidth")
        except UnitError as err:
            raise CliError(f'--max-written {err} (a volume a day, such as "500 TB/day")') from None
    else:
        try:
            value = float(text)
        except ValueError:
            raise CliError(
                f"--max-written must be a plain number (the volume over H) in a file of plain numbers, got {text!r}"
            ) from None
    if not (math.isfinite(value) and value > 0):
        raise CliError(f"--max-written must be > 0 and finite, got {text!r}")
    return value


def _launch_name(launch) -> str:
    """The design's launch as its settings show it (`cj.design.Launch` modes by name)."""
    from .._design_inputs import check_launch

    launch = check_launch(launch)
    return launch if isinstance(launch, str) else launch.mode


def _launch(settings: dict):
    """The launch `cj.design` takes from the settings (`_launch_name`)."""
    from ..design import Launch

    return Launch("staggered", settings["stagger"]) if settings["launch"] == "staggered" else settings["launch"]


def _designed_launch(settings: dict, result):
    """The launch of the recommendation: the settings' (`_launch`), at the designed launch
    stagger where the design chose one (``result.launch_stagger``)."""
    from ..design import Launch

    if result.launch_stagger is None:
        return _launch(settings)
    return Launch("staggered", result.launch_stagger)


def _check_staggers(spec, settings: dict, path) -> None:
    """--staggers / [design].staggers: the search only, and something to stagger."""
    if not settings["staggers"]:
        return
    where = "--staggers" if not spec.design.staggers else f"fleet file {path}: design.staggers"
    if settings["method"] != "search":
        raise CliError(f"{where} needs --method search, got --method {settings['method']}")
    launch_staggered = spec.launch.mode == "staggered" and not settings["offsets"]
    if not spec.outages and not launch_staggered:
        raise CliError(
            f"{where} has nothing to design: the restart stagger acts only with [[outages]], the launch "
            'stagger only with [launch] mode = "staggered" (without offsets)'
        )


def _check(args) -> None:
    from ..fleetfile import load

    # FleetFileError is a ValueError: one error line.
    dtype = np.float64 if args.x64 else np.float32
    args.spec = load(args.fleet_file, dtype=dtype)
    args.settings = settings_for(args, args.spec)
    _check_staggers(args.spec, args.settings, args.fleet_file)
    young = args.spec.young()
    labels = args.spec.labels
    for g, (group, (lo, hi)) in enumerate(zip(args.spec.groups, args.settings["group_bounds"])):
        field = "design.bounds" if group.bounds is None else f"groups[{g}].bounds"
        group_young = young[labels == g]
        if not (lo < group_young.max() * 100 and hi > group_young.min() / 100):
            raise CliError(
                f"fleet file {args.fleet_file}: {field} [{lo:g}, {hi:g}] is far from the Young interval "
                f"of {group.name!r} ({group_young.min():.3g}): widen it"
            )
        top = min(hi, args.settings["horizon"])  # the design holds the range under H
        if group.min_interval is not None and group.min_interval >= top:
            raise CliError(
                f"fleet file {args.fleet_file}: groups[{g}].min_interval = {group.min_interval:g} must be below "
                f"the upper end of the group's design range, {top:g} (its bounds, held at or under the horizon)"
            )


# -- a file with units: its time unit, GB and GB/s, goodput and GPU-hours --------------------


def seconds_per_unit(spec) -> float:
    """Seconds in the file's time unit (1 for a file of plain numbers)."""
    from .._units import duration_unit

    return 1.0 if spec.time_unit is None else duration_unit(spec.time_unit)


def count_text(value: float) -> str:
    """A count of GPUs: whole numbers with thousands separators ("24,576")."""
    return f"{value:,.0f}" if float(value).is_integer() else significant(value)


def time_text(spec, seconds: float, digits: int = 3) -> str:
    """A time of the engine in the file's unit ("4.27 min"; under one unit in a smaller one,
    "11 min" in a file in hours: `duration_text`); a plain number as ``:.4g``."""
    if spec.time_unit is None:
        return f"{seconds:.4g}"
    return duration_text(seconds, spec.time_unit, digits)


def short_time_text(spec, seconds: float) -> str:
    """A time, short ones in seconds ("3.25 s", not "0.0542 min"): as `time_text`."""
    return time_text(spec, seconds)


def volume_text(size: float) -> str:
    """Bytes with the SI prefix that keeps their digits ("2.3 TB", "128 GB"; decimal units, as
    storage is sold)."""
    return quantity_text(size, "B")


def bandwidth_text(rate: float) -> str:
    """Bytes per second with the SI prefix that keeps their digits ("1,024 GB/s", "2 TB/s")."""
    return quantity_text(rate, "B/s")


def hours_text(value: float) -> str:
    """GPU-hours, signed, to the nearest one above 100 ("+1,234", "-12.5")."""
    return f"{value:+,.0f}" if abs(value) >= 100 else f"{value:+.3g}"


def estimate_text(estimate: dict, show: Callable[[float], str]) -> str:
    return f"{show(estimate['mean'])} [{show(estimate['low'])}, {show(estimate['high'])}]"


def comparisons_of(summary: dict) -> dict:
    """{name: label} of what the design is weighed against in GPU-hours: the file's current
    intervals, then the baselines, then (with budgets) those scaled to keep them."""
    return {"current": "the current intervals", **baselines_of(summary), **scaled_of(summary)}


def scaled_of(summary: dict) -> dict:
    """{name: label} of the sets scaled to keep the budgets (`cj.design.BudgetOutcome.scaled`)."""
    return {name: SCALED[name] for name in summary.get("candidates", {}) if name in SCALED}


def _in_units(spec, table: dict, names: list, comparison, floor: float = FLOOR) -> dict:
    """design.json's keys for a file with units (the module docstring lists them), from the
    interval sets ``table`` ({name: (N,) s}) and the library's `cj.design.Comparison` of their
    runs on the same draws, in the order of ``names``; ``floor``: the practical floor (a
    share of the fleet's GPU time) of a gain or a pay."""
    first = np.searchsorted(spec.labels, np.arange(len(spec.groups)))
    unit = seconds_per_unit(spec)
    compared = [name for name in names if name != "design"]
    saved = comparison.gpu_hours_saved
    assert saved is not None  # compared with the GPUs of a file with units
    goodput = {
        name: {
            "fleet": comparison.goodput[name][0].to_dict(),
            "groups": [estimate.to_dict() for estimate in comparison.goodput[name][1]],
        }
        for name in ("current", "design")
    }
    hours = {
        name: {
            "fleet": saved[name][0].to_dict(),
            "groups": [estimate.to_dict() for estimate in saved[name][1]],
        }
        for name in compared
    }
    gpus = _gpus(spec)
    floor_hours = floor * float(gpus.sum()) * 24.0  # GPU-hours per day
    effects = {name: [effect(e, floor_hours) for e in hours[name]["groups"]] for name in compared}
    verdicts = {
        name: {
            "gain": [n for n, e in zip(spec.names, effects[name]) if e > 0],
            "pay": [n for n, e in zip(spec.names, effects[name]) if e < 0],
            "tie": [n for n, e in zip(spec.names, effects[name]) if e == 0],
        }
        for name in compared
    }
    return {
        "time_unit": spec.time_unit,
        "seconds_per_time_unit": unit,
        "intervals_in_time_unit": [
            {"name": group.name, **{name: float(table[name][first[g]]) / unit for name in names}}
            for g, group in enumerate(spec.groups)
        ],
        "gpus": {"groups": gpus.tolist(), "fleet": float(gpus.sum())},
        "goodput": goodput,
        "per_group_fleet_saved": {name: comparison.fleet_saved[name].to_dict() for name in compared},
        "gpu_hours_saved_per_day": hours,
        "gains_and_pays": verdicts,
    }


def _gpus(spec) -> np.ndarray:
    """(G,) GPUs per group: size × count."""
    return np.asarray([group.size * group.count for group in spec.groups], np.float64)


def savings_lines(summary: dict, quote: Callable[[str], str] = str) -> list:
    """For a file with units: the recommendation, goodput before and after, and per comparison
    the GPU-hours per day the design saves, with the groups that gain and those that pay."""
    names = [group["name"] for group in summary["groups"]]
    unit = summary["time_unit"]
    seconds = summary["seconds_per_time_unit"]
    lines = [
        f"{quote(row['name'])}: checkpoint every {significant(group['recommended'] / seconds, 2)} {unit} "
        f"(now every {significant(row['current'], 2)} {unit})"
        for row, group in zip(summary["intervals_in_time_unit"], summary["groups"])
    ]
    goodput = summary["goodput"]
    lines.append(
        f"Fleet goodput {percent_ci_text(goodput['current']['fleet'])} with the current "
        f"intervals -> {percent_ci_text(goodput['design']['fleet'])} with the design."
    )
    block = summary.get("power_and_storage")
    if block is not None:
        sets = block["sets"]
        threshold = (
            f"{significant(block['threshold_watts'] / 1e6)} MW"
            if block["threshold_watts"] is not None
            else "a tenth of the fleet's full draw"
        )
        lines.append(
            f"Power and storage: {sets['design']['power_steps']['mean']:.0f} power steps over {threshold} a day "
            f"with the design ({sets['current']['power_steps']['mean']:.0f} with the current intervals); "
            f"{volume_text(sets['design']['volume']['mean'])} written a day "
            f"({volume_text(sets['current']['volume']['mean'])} now)."
        )
        step = power_step_line(summary)
        if step is not None:
            lines.append(step)
    for name, label in comparisons_of(summary).items():
        saved = summary["gpu_hours_saved_per_day"][name]
        verdict = summary["gains_and_pays"][name]
        fleet = saved["fleet"]
        noise = {1: "outside the noise", -1: "a loss, outside the noise", 0: "within the noise"}[
            effect(fleet, _floors(summary)["gpu_hours"])
        ]
        parts = []
        for key, word in (("gain", "gain"), ("pay", "pay"), ("tie", "within the noise")):
            if verdict[key]:
                parts.append(
                    ", ".join(
                        f"{quote(n)} ({hours_text(saved['groups'][names.index(n)]['mean'])})" for n in verdict[key]
                    )
                    + f" {word}"
                )
        lines.append(
            f"Against {label}: the design saves {estimate_text(fleet, hours_text)} GPU-hours per day ({noise}); "
            f"per group: {'; '.join(parts)}."
        )
    return lines


def power_value(value: float, unit: str) -> str:
    """A power: in W, kW, MW or GW where the file gives power_per_gpu (``unit`` "W"), in GPUs'
    full draw in a file with units without it ("gpu"), else in units of size ("size")."""
    if unit == "gpu":
        return f"{significant(value)} GPUs' draw"
    if unit != "W":
        return f"{significant(value)}"
    for scale, name in ((1e9, "GW"), (1e6, "MW"), (1e3, "kW")):
        if abs(value) >= scale:
            return f"{significant(value / scale)} {name}"
    return f"{significant(value)} W"


def power_step_line(summary: dict) -> str | None:
    """The largest power step of the recommended intervals (`recommend`) and of the current
    ones: the mean over the draws of each draw's largest, and the largest in any draw."""
    block = summary.get("power_and_storage")
    if block is None or "recommended" not in summary:
        return None
    sets, unit = block["sets"], block.get("step_unit", "size")
    use = summary["recommended"]["use"]
    row = sets.get(use)
    if row is None or "largest_step" not in row:
        return None
    draws = 2 * summary["settings"]["pairs"] * summary["settings"]["draws"]
    label = {"design": "the design", "current": "the current intervals"}.get(use, comparisons_of(summary).get(use, use))
    show = lambda value: power_value(value, unit)  # noqa: E731

    def step(row):
        if row["largest_step"]["low"] == row["largest_step"]["high"] == row["largest_step_max"]:
            return f"{show(row['largest_step_max'])} in every draw"
        return (
            f"{estimate_text(row['largest_step'], show)} on average (the mean over {draws} draws of each draw's "
            f"largest), {show(row['largest_step_max'])} at most (the largest in any draw)"
        )

    now = sets.get("current")
    return (
        f"Largest power step at one instant with {label}: {step(row)}"
        + (f"; with the current intervals {step(now)}" if now is not None and use != "current" else "")
        + (", in units of size" if unit == "size" else "")
        + "."
    )


def _in_report_order(names) -> list:
    """The design, the file's own intervals, then the baselines: the order of every table."""
    return sorted(names, key=lambda name: {"design": 0, "current": 1}.get(name, 2))


def _power_and_storage(spec, evaluation) -> dict:
    """design.json's ``power_and_storage`` (`cj.design.power_and_storage`): per interval set,
    the fleet's power steps above the threshold and the volume of its completed checkpoints,
    per day in a file with units (per horizon H otherwise)."""
    from ..design import power_and_storage

    per_day = spec.time_unit is not None
    sets = power_and_storage(evaluation, spec.per_job("write"), day=86400.0 if per_day else None)
    threshold = float(evaluation.power_threshold)
    watts = spec.power_per_gpu  # the largest step in W where the file gives a GPU's draw

    def shown(key, value):
        if key == "largest_step":
            return {bound: x * (watts or 1.0) for bound, x in value.to_dict().items()}
        if key == "largest_step_max":
            return value * (watts or 1.0)
        return value.to_dict()

    return {
        "per": "day" if per_day else "horizon",
        "threshold": threshold,
        "threshold_watts": None if watts is None else threshold * watts,
        "step_unit": "W" if watts is not None else "gpu" if spec.time_unit is not None else "size",
        "sets": {
            name: {key: shown(key, value) for key, value in sets[name].items()}
            for name in _in_report_order(evaluation.names)
        },
    }


def rerun_command(spec, settings: dict, summary: dict, out) -> str:
    """The command for a settled answer: twice the draws (and the steps, where the run did
    not converge; without --quick), the other settings as this run's."""
    file = spec.design
    parts = ["ckpt-jax", "design", str(spec.path), "--draws", str(2 * settings["draws"])]
    if not summary.get("converged", summary["stopped_early"]):
        parts += ["--steps", str(2 * settings["steps"])]
    if settings["horizon"] != file.horizon:
        parts += ["--horizon", horizon_argument(spec, settings["horizon"])]
    if settings["seed"] != file.seed:
        parts += ["--seed", str(settings["seed"])]
    if settings["offsets"] and not file.offsets:
        parts.append("--offsets")
    if settings.get("staggers") and not file.staggers:
        parts.append("--staggers")
    if settings.get("method", "search") != "search":
        parts += ["--method", settings["method"], "--pairs", str(settings["pairs"])]
    budgets = settings.get("budgets") or {}
    if budgets.get("max_written") is not None and budgets["max_written"] != file.max_written:
        written = budgets["max_written"]
        parts += ["--max-written", f'"{volume_text(written * 86400)}/day"' if spec.time_unit else f"{written:g}"]
    if budgets.get("max_power_steps") is not None and budgets["max_power_steps"] != file.max_power_steps:
        parts += ["--max-power-steps", f"{budgets['max_power_steps']:g}"]
    if budgets.get("bound", file.budget_bound) != file.budget_bound:
        parts += ["--budget-bound", budgets["bound"]]
    return " ".join(parts + ["--out", str(out)])


def _schedule(spec, intervals, *, seed: int, launch, dtype, offsets=None) -> dict:
    """One period of the recommended schedule in a run with failures drawn from ``seed``
    (`cj.design.schedule`)."""
    import jax

    from ..design import schedule

    key = jax.random.fold_in(seed_key(seed), 7) if launch == "random" and offsets is None else None
    return schedule(
        spec.fleet(intervals, dtype=dtype),
        period=spec.period(intervals),
        mtbf=spec.per_job("mtbf"),
        restart=spec.per_job("restart"),
        seed=seed,
        key=key,
        launch=launch,
        offsets=offsets,
    )


def _floors(summary: dict) -> dict:
    """The practical floor (``settings.floor``, a share of the fleet's GPU time) of each
    difference the report weighs: the fleet's waste (a share of its GPU time), each group's
    (a share of the group's: the same GPU-hours) and GPU-hours per day."""
    floor = summary.get("settings", {}).get("floor", FLOOR)
    groups = summary.get("fleet", {}).get("groups", [])
    gpus = np.asarray([float(g.get("size", 1.0)) * float(g.get("count", 1)) for g in groups], np.float64)
    total = float(gpus.sum()) if gpus.size else 1.0
    with np.errstate(divide="ignore"):
        per_group = [floor * total / x if x > 0 else math.inf for x in gpus]
    return {"fleet": floor, "groups": per_group, "gpu_hours": floor * total * 24.0}


def _verdict(saved: dict, floor: float = FLOOR) -> str:
    """How the design's fleet-waste saving against a baseline reads (`ckpt_jax._estimate.effect`)."""
    found = effect(saved, floor)
    if found > 0:
        return "the design is better, outside the noise"
    if found < 0:
        return "the baseline is better, outside the noise"
    return "as good as the design (within the noise)"


# "&" too: "&lt;b&gt;" would render as "<b>".
_MARKDOWN_SPECIAL = set("\\`*_[]<>#|~$&")


def markdown_text(text) -> str:
    """``text`` as literal Markdown inline text: control characters shown as escapes (a
    newline would end a table row and could start a heading), Markdown's punctuation
    backslash-escaped (a ``|`` would split a table cell)."""
    shown = "".join(
        c.encode("unicode_escape").decode("ascii") if unicodedata.category(c) in ("Cc", "Zl", "Zp") else c
        for c in str(text)
    )
    return "".join("\\" + c if c in _MARKDOWN_SPECIAL else c for c in shown)


def _group_verdicts(summary: dict, names: list) -> dict:
    """Per baseline, the groups whose waste the design lowers (gain) and raises (pay),
    outside the noise of the paired per-group difference, and the rest (tie)."""
    verdicts = {}
    floors = _floors(summary)["groups"]
    floors = floors if len(floors) == len(names) else [FLOOR] * len(names)
    for name in baselines_of(summary):
        saved = [effect(s, f) for s, f in zip(summary["per_group_saved"][name], floors)]
        verdicts[name] = {
            "gain": [n for n, e in zip(names, saved) if e > 0],
            "pay": [n for n, e in zip(names, saved) if e < 0],
            "tie": [n for n, e in zip(names, saved) if e == 0],
        }
    return verdicts


def _saved_text(summary: dict, name: str) -> str:
    """What the design saves against ``name`` over the fleet: GPU-hours per day in a file with
    units, else the fleet waste saved."""
    if "gpu_hours_saved_per_day" in summary:
        return f"{estimate_text(summary['gpu_hours_saved_per_day'][name]['fleet'], hours_text)} GPU-hours per day"
    saved = {**summary["baselines"], **summary.get("candidates", {})}[name]["saved"]
    return f"{saved['mean']:+.4f} [{saved['low']:+.4f}, {saved['high']:+.4f}] of fleet waste"


def recommend(summary: dict) -> dict:
    """The run's one recommendation, decided once from its estimates on the fresh draws:
    ``{"use": name, "reason": text, "text": sentence}``. Every place that says what to use
    (the report's first line and its fleet-waste section, stdout, design.json's
    ``recommended``, ``recommendation`` and ``groups[g]["recommended"]``) prints this.

    In order:

    1. the set the design fell back to (``fallback``: it beat the search's intervals outside
       the noise);
    2. the file's own intervals (``current``) where the design saves nothing outside the noise
       against them (and they keep the budgets, if any): a change buys nothing measurable;
    3. else the design's, for one reason: against the current intervals what it saves, else
       that it beats every comparison outside the noise, else that none does better (naming
       those as good within the noise). A comparison that does better outside the noise but
       that the design may not fall back to (intervals that differ within a group, or outside
       the bounds) is named as such."""
    labels = comparisons_of(summary)
    compared = {**summary["baselines"], **summary.get("candidates", {})}
    floor = _floors(summary)["fleet"]

    def named(names):
        return ", ".join(labels.get(name, name) for name in names)

    # With budgets: the sets that break them (weighed scaled to keep them) are no rivals.
    broke = {name.removesuffix("_scaled") for name in summary.get("budgets", {}).get("scaled", {})}
    fallback = summary.get("fallback")
    if fallback is not None:
        use = fallback
        reason = (
            f"{'they' if fallback == 'current' else 'its intervals'} beat the search's outside the noise on "
            "fresh draws, so they are the design here"
        )
    elif "current" in compared and "current" not in broke and effect(compared["current"]["saved"], floor) <= 0:
        use = "current"
        reason = (
            f"the design saves {_saved_text(summary, 'current')} against them, within the noise: "
            "a change buys nothing measurable"
        )
    else:
        use = "design"
        better = [name for name, b in compared.items() if effect(b["saved"], floor) < 0]
        ties = [name for name, b in compared.items() if effect(b["saved"], floor) == 0]
        over = [name for name in better if name in broke]
        better = [name for name in better if name not in broke]
        if better:
            reason = (
                f"{named(better)} {'does' if len(better) == 1 else 'do'} better outside the noise, but with "
                "intervals that differ within a group or lie outside the bounds, which the design may not take"
            )
        elif "current" in compared:
            reason = f"they save {_saved_text(summary, 'current')} against the current intervals, outside the noise"
        elif not ties:
            reason = "they beat every comparison outside the noise"
        else:
            reason = (
                f"no comparison does better outside the noise ({named(ties)} "
                f"{'is' if len(ties) == 1 else 'are'} as good within it)"
            )
        if over:
            reason += (
                f"; {named(over)} {'does' if len(over) == 1 else 'do'} better but "
                f"{'breaks' if len(over) == 1 else 'break'} the budgets (scaled to keep them: no better)"
            )
    what = {"design": "use the design's intervals", "current": "keep the current intervals"}
    text = f"{what.get(use, f'use {labels.get(use, use)}')}: {reason}"
    return {"use": use, "reason": reason, "text": text}


def recommended_intervals(summary: dict) -> list:
    """(G,) the recommended interval of each group, in engine units (`recommend`)."""
    use = summary["recommended"]["use"]
    return [group["design"] if use == "design" else group[use] for group in summary["groups"]]


def _stagger_value(summary: dict, value: float) -> str:
    """A stagger in the file's time unit, or in seconds under a tenth of it (a file with
    units), else as a plain number."""
    if summary.get("time_unit"):
        unit = summary["seconds_per_time_unit"]
        if 0 < value < 0.1 * unit:
            return f"{significant(value)} s"
        return f"{significant(value / unit)} {summary['time_unit']}"
    return f"{value:.4g}"


def staggers_line(summary: dict) -> str | None:
    """With ``--staggers``: the staggers to use with the recommendation, the designed ones
    against the file's (None without ``--staggers``)."""
    if not summary["settings"].get("staggers"):
        return None
    own = {  # the staggers that act: the restart stagger with outages, the launch's when staggered
        name: value
        for name, value, acts in (
            (
                "restart_stagger",
                float(summary["fleet"].get("restart_stagger", 0.0)),
                bool(summary["fleet"].get("outages")),
            ),
            (
                "[launch] stagger",
                float(summary["settings"].get("stagger", 0.0)),
                summary["settings"]["launch"] == "staggered",
            ),
        )
        if acts
    }
    designed = {
        name: float(summary[key])
        for name, key in (("restart_stagger", "restart_stagger"), ("[launch] stagger", "launch_stagger"))
        if summary.get(key) is not None
    }
    if designed and summary["recommended"]["use"] == "design":
        return (
            "Staggers, designed with the intervals: "
            + "; ".join(
                f"{name} {_stagger_value(summary, value)} (the file's {_stagger_value(summary, own[name])})"
                for name, value in designed.items()
            )
            + "."
        )
    kept = "; ".join(f"{name} {_stagger_value(summary, own[name])}" for name in (designed or own))
    because = (
        "the design fell back to a baseline, which keeps them"
        if not designed
        else "the recommendation is not the design's ("
        + "; ".join(f"its {name} {_stagger_value(summary, value)}" for name, value in designed.items())
        + " goes with its intervals)"
    )
    return f"Staggers: keep the file's ({kept}): {because}."


def headline(summary: dict, names: list, quote: Callable[[str], str] = str) -> list:
    """The run's verdict in a few sentences: converged or not and which intervals to use, per
    baseline what the fleet saves and which groups gain and which pay (``quote`` formats a
    group name), and the command for a settled answer."""
    steps = summary["steps_taken"]
    lines = []
    converged = summary.get("converged", summary["stopped_early"])
    use = f"; {summary['recommended']['text']}" if "recommended" in summary else ""
    if converged:
        if summary.get("method", "adam") == "search":
            test = (
                f"no move of {summary['search_rtol']:.0%} in any group's interval lowered the waste beyond "
                f"its standard error on {summary['settings']['draws']} common draws"
            )
        else:
            test = "the objective stopped improving (early stopping)"
        lines.append(f"Converged after {steps} steps: {test}{use}.")
    else:
        budget = "the --quick budget" if summary["settings"]["quick"] else "the step budget"
        lines.append(
            f"NOT CONVERGED: {steps} steps ({budget}) ran out before the search settled; "
            "treat these intervals as a first guess and rerun with more steps"
            + (" (without --quick)" if summary["settings"]["quick"] else "")
            + (f"{use} for now." if use else ".")
        )
    verdicts = _group_verdicts(summary, names)
    for name, label in baselines_of(summary).items():
        saved = summary["baselines"][name]["saved"]
        verdict = verdicts[name]
        fleet = {1: "saves fleet waste", -1: "loses fleet waste", 0: "is within the noise on fleet waste"}[
            effect(saved, _floors(summary)["fleet"])
        ]
        text = f"Against {label}: the design {fleet} ({saved['mean']:+.4f} [{saved['low']:+.4f}, {saved['high']:+.4f}])"
        parts = []
        if verdict["gain"]:
            parts.append(f"{', '.join(map(quote, verdict['gain']))} gain")
        if verdict["pay"]:
            cells = summary["per_group"]
            index = {n: g for g, n in enumerate(names)}
            parts.append(
                ", ".join(
                    f"{quote(n)} ({cells[name][index[n]]['mean']:.4f} -> {cells['design'][index[n]]['mean']:.4f})"
                    for n in verdict["pay"]
                )
                + (" pays" if len(verdict["pay"]) == 1 else " pay")
            )
        if verdict["tie"]:
            parts.append(f"{', '.join(map(quote, verdict['tie']))} within the noise")
        lines.append(f"{text}; per group: {'; '.join(parts)}.")
    staggers = staggers_line(summary) if "recommended" in summary else None
    if staggers is not None:
        lines.insert(1, staggers)
    if "rerun" in summary:
        lines.append(f"For a settled answer (tighter intervals of confidence): {summary['rerun']}")
    return lines


def summary_lines(summary: dict, names: list, quote: Callable[[str], str] = str) -> list:
    """The run's summary lines, the same in the report and on stdout: the headline (converged,
    the recommendation, the staggers), the verdict per comparison (in a file with units in
    GPU-hours per day, with the file's own intervals among them), the largest power step, and
    the command for a settled answer."""
    head = headline(summary, names, quote=quote)
    settled = [line for line in head if line.startswith("For a settled")]
    budgets = budget_lines(summary)
    if summary.get("time_unit"):
        staggers = [line for line in head if line.startswith("Staggers")]
        return head[:1] + staggers + budgets + savings_lines(summary, quote=quote) + settled
    step = power_step_line(summary)
    body = [line for line in head if line not in settled]
    return body[:1] + budgets + body[1:] + ([] if step is None else [step]) + settled


def _report_head(spec, settings, result_json: dict, wall_s: float) -> list:
    """The report's verdict lines, the fleet and how the run measured it."""
    groups = spec.names
    md = markdown_text
    units = spec.time_unit is not None
    quote = lambda name: f'"{md(name)}"'  # noqa: E731
    head = summary_lines(result_json, groups, quote=quote)
    lines = [f"# Checkpoint intervals for {md(spec.path)}", ""]
    lines += [
        f"- **{line}**" if i == 0 and not result_json["stopped_early"] else f"- {line}" for i, line in enumerate(head)
    ]
    lines += [
        "",
        f"{spec.n_jobs} jobs in {len(groups)} groups"
        + (f" ({count_text(spec.per_job('size').sum())} GPUs)" if units else "")
        + f"; storage f = {_storage_text(spec)}, cap = {_cap_text(spec)}, power policy {spec.power_policy}, "
        f"storage policy {spec.storage_policy}"
        + (
            f"; write limits {', '.join(_limit(group.write_limit, units) for group in spec.groups)} (group by group)"
            if any(group.write_limit is not None for group in spec.groups)
            else ""
        )
        + (
            "; two-level checkpoints, snapshots "
            f"{', '.join(_snapshot_text(spec, group.snapshot) for group in spec.groups)} "
            f"(group by group), recovery from {spec.recover_from}"
            if spec.has_snapshots
            else ""
        )
        + ".",
        "Waste is the steady-state waste, 1 − (work done − work lost at failures) / H over the horizon "
        f"H = {_horizon_text(spec, settings['horizon'])}, weighted by job size, "
        + (
            f"designed launch offsets (the baselines launch {settings['launch']}); "
            if settings["offsets"]
            else f"launch {settings['launch']}; "
        )
        + _method_text(settings, result_json)
        + f", seed {settings['seed']}, {wall_s:.0f} s.",
        *note_lines(spec),
        "",
        "## Recommended intervals",
        "",
    ]
    return lines


def note_lines(spec) -> list:
    """The defaults the file leaves in force, said (`defaults_note`): a paragraph, or none."""
    from ._common import defaults_note

    note = defaults_note(spec)
    return [] if note is None else ["", f"**Note:** {markdown_text(note)}."]


def _plain_tables(spec, result_json: dict) -> list:
    """A file of plain numbers: the intervals per group, the design's and each baseline's."""
    md = markdown_text
    baselines = baselines_of(result_json)
    lines = [
        "| group | jobs | size | write | MTBF | **design** | " + " | ".join(baselines.values()) + " |",
        "|---" * (6 + len(baselines)) + "|",
    ]
    for g, group in enumerate(spec.groups):
        row = result_json["groups"][g]
        lines.append(
            f"| {md(group.name)} | {group.count} | {group.size:g} | {group.write:g} | {group.mtbf:g} | "
            f"**{row['design']:.4g}** | " + " | ".join(f"{row[name]:.4g}" for name in baselines) + " |"
        )
    return lines


def _offsets_lines(spec, settings, result_json: dict) -> list:
    """The designed launch offsets per group, and as fractions of the cycle."""
    md = markdown_text
    offsets = np.asarray(result_json["offsets"])
    design = np.asarray([row["design"] for row in result_json["groups"]])[spec.labels]
    cycle = design if spec.has_snapshots else design + spec.solo_write_time()
    where = (
        "Each job's compute done at t = 0 in its first compute phase T (with two-level checkpoints every "
        "job starts computing, no drain in flight), and as a fraction of T"
        if spec.has_snapshots
        else "Each job's time into its solo cycle D + T at t = 0 (write first, then compute), and as a "
        "fraction of the cycle"
    )
    lines = [
        "",
        "## Launch offsets (designed)",
        "",
        f"{where}; the baselines keep the launch {settings['launch']}.",
        "",
        f"| group | offsets | fractions of {'T' if spec.has_snapshots else 'the cycle'} |",
        "|---|---|---|",
    ]
    for g, group in enumerate(spec.groups):
        mine = spec.labels == g
        lines.append(
            f"| {md(group.name)} | {', '.join(f'{x:.3g}' for x in offsets[mine])} | "
            f"{', '.join(f'{x:.2f}' for x in offsets[mine] / cycle[mine])} |"
        )
    return lines


def _fleet_waste_lines(spec, result_json: dict) -> list:
    """The fleet waste of the design and each comparison, and what that means plainly."""
    md = markdown_text
    groups = spec.names
    baselines = baselines_of(result_json)
    waste = result_json["waste"]
    lines = [
        "",
        "## Fleet waste (fresh draws, 95% CIs)",
        "",
        "| intervals | fleet waste | waste saved by the design | verdict |",
        "|---|---|---|---|",
        f"| **design** | {waste['mean']:.4f} [{waste['low']:.4f}, {waste['high']:.4f}] | | |",
    ]
    weighed = {
        **({"current": "current"} if "current" in result_json.get("candidates", {}) else {}),
        **baselines,
        **scaled_of(result_json),
    }
    for name, label in weighed.items():
        base = {**result_json["baselines"], **result_json.get("candidates", {})}[name]
        w, s = base["waste"], base["saved"]
        lines.append(
            f"| {label} | {w['mean']:.4f} [{w['low']:.4f}, {w['high']:.4f}] | "
            f"{s['mean']:+.4f} [{s['low']:+.4f}, {s['high']:+.4f}] | {_verdict(s, _floors(result_json)['fleet'])} |"
        )
    lines += ["", f"**Recommendation: {md(result_json['recommended']['text'])}.**"]
    verdicts = _group_verdicts(result_json, groups)
    pays = [
        f"{', '.join(map(md, verdicts[name]['pay']))} {'pays' if len(verdicts[name]['pay']) == 1 else 'pay'} "
        f"against {label}"
        for name, label in baselines.items()
        if verdicts[name]["pay"]
    ]
    if pays:  # the fleet's verdict moves waste between groups: said, not hidden
        lines += ["", f"Per group, outside the noise: {'; '.join(pays)} (see the waste per group)."]
    return lines


def _per_group_lines(spec, result_json: dict) -> list:
    """The waste per group: saved against each comparison, then each set's own."""
    md = markdown_text
    units = spec.time_unit is not None
    compared = comparisons_of(result_json) if units else baselines_of(result_json)
    lines = [
        "",
        "## Waste per group (the same fresh draws, 95% CIs)",
        "",
        "Positive: the design wastes less in this group than the "
        + ("intervals compared" if units else "baseline")
        + " (paired over the same draws).",
        "",
        "| group | " + " | ".join(f"saved against {label}" for label in compared.values()) + " |",
        "|---" * (1 + len(compared)) + "|",
    ]
    for g, group in enumerate(spec.groups):
        cells = [result_json["per_group_saved"][name][g] for name in compared]
        lines.append(
            f"| {md(group.name)} | "
            + " | ".join(f"{c['mean']:+.4f} [{c['low']:+.4f}, {c['high']:+.4f}]" for c in cells)
            + " |"
        )
    columns = {name: "current" if name == "current" else label for name, label in compared.items()}
    lines += ["", "| group | design | " + " | ".join(columns.values()) + " |", "|---" * (2 + len(compared)) + "|"]
    for g, group in enumerate(spec.groups):
        cells = [result_json["per_group"][name][g] for name in ["design", *compared]]
        lines.append(
            f"| {md(group.name)} | "
            + " | ".join(f"{c['mean']:.4f} [{c['low']:.4f}, {c['high']:.4f}]" for c in cells)
            + " |"
        )
    return lines


def _figures_lines(units: bool) -> list:
    """What each figure shows."""
    return [
        "",
        "## Figures",
        "",
        "- `objective.png`: the smoothed objective (training draws) and the intervals per step.",
        "- `waste_by_group.png`: waste per job group, "
        + ("the current intervals, " if units else "")
        + "each baseline and the design.",
        "- `schedule.png`: one period of the recommended schedule in a run with failures "
        "(compute, writes, writes abandoned at a failure, and the time down restarting).",
        "- `writers.png`: the distribution of the writer count n_w, "
        + ("current, " if units else "")
        + "Young and design.",
        "- `trade_off.png`: "
        + (
            "GPU-hours a day lost to checkpoints and failures against the volume written a day"
            if units
            else "the fleet waste against the volume written over H"
        )
        + ", along the recommended intervals scaled by common factors (×0.5 to ×2), with the design, "
        + ("the current intervals, " if units else "")
        + "the baselines (and, with budgets, those scaled to keep them) as points and the budget on the "
        "volume as a line (the same fresh draws).",
        "",
    ]


def _staggers_lines(spec, settings: dict, result_json: dict) -> list:
    """The designed restart and launch staggers (``--staggers``) against the file's."""
    rows = []
    if result_json.get("restart_stagger") is not None:
        rows.append(("restart_stagger", spec.restart_stagger, result_json["restart_stagger"]))
    if result_json.get("launch_stagger") is not None:
        rows.append(("[launch] stagger", settings.get("stagger", 0.0), result_json["launch_stagger"]))
    if not rows:
        if settings.get("staggers"):
            return [
                "",
                "## Staggers",
                "",
                "Not designed: the design fell back to a baseline, which keeps the file's.",
                "",
            ]
        return []
    recommended = result_json["recommended"]["use"] == "design"
    lines = [
        "",
        "## Staggers (designed)",
        "",
        "Searched with the intervals, in [0, H]; the baselines keep the file's"
        + ("." if recommended else "; not recommended: the recommendation keeps the file's with its intervals."),
        "",
        "| stagger | file | designed |",
        "|---|---|---|",
    ]
    for name, own, designed in rows:
        lines.append(f"| {name} | {_horizon_text(spec, own)} | {_horizon_text(spec, designed)} |")
    return lines + [""]


def _report(spec, settings, result_json: dict, wall_s: float) -> str:
    lines = _report_head(spec, settings, result_json, wall_s)
    lines += _units_tables(spec, result_json) if spec.time_unit is not None else _plain_tables(spec, result_json)
    if result_json["offsets"] is not None:
        lines += _offsets_lines(spec, settings, result_json)
    lines += _staggers_lines(spec, settings, result_json)
    if spec.outages and spec.outages[0].mtbf is not None:
        lines += [
            "The baselines take each job's total failure rate with its domain's drawn outages, "
            "1/M + 1/M_o (the MTBF column is the job's own M; `cj.design.baseline_mtbf`).",
            "",
        ]
    lines += _fleet_waste_lines(spec, result_json)
    lines += _power_storage_lines(spec, result_json)
    lines += _budget_table(spec, result_json)
    lines += _per_group_lines(spec, result_json)
    lines += _figures_lines(spec.time_unit is not None)
    return "\n".join(lines)


def _method_text(settings: dict, summary: dict) -> str:
    """How the intervals were found, in a few words."""
    steps, converged = summary["steps_taken"], summary.get("converged", summary["stopped_early"])
    if summary.get("method", "adam") == "search":
        start = summary.get("start")
        return (
            f"a compass search over each group's interval on {settings['draws']} common draws"
            + (f" from the best starting point, {LABELS.get(start, start)}" if start else "")
            + f", {steps} steps ({'converged' if converged else 'not converged'})"
            + ("" if summary.get("fallback") is None else f", then the fallback to {summary['fallback']}")
            + f"; every comparison on {2 * settings['pairs'] * settings['draws']} fresh draws"
        )
    return (
        f"{steps} optimisation steps "
        f"({'stopped early' if converged else 'not stopped early, so not known to be converged'}), "
        f"{settings['draws']} draws × {settings['pairs']} pairs per step"
    )


def _power_storage_lines(spec, summary: dict) -> list:
    """The report's power and storage table: power steps above the threshold and the volume
    of the completed checkpoints, per day (per H in a file of plain numbers), per interval set."""
    block = summary.get("power_and_storage")
    if block is None:
        return []
    units = spec.time_unit is not None
    per = "per day" if block["per"] == "day" else "over H"
    unit = block.get("step_unit", "size")
    if block["threshold_watts"] is not None:
        threshold = f"{significant(block['threshold_watts'] / 1e6)} MW"
    elif unit == "gpu":
        threshold = power_value(block["threshold"], unit)
    else:
        threshold = f"{significant(block['threshold'])} (one job's draw per unit of size)"
    show_volume = (lambda v: volume_text(v)) if units else (lambda v: significant(v))  # noqa: E731
    labels = {"design": "**design**", "current": "current", **LABELS}
    # In the table the unit is in the header where it is one (GPUs' draw, size), W per cell.
    step = (lambda v: power_value(v, "W")) if unit == "W" else significant  # noqa: E731
    in_header = {"W": "", "gpu": " (GPUs' draw)", "size": " (size)"}[unit]
    largest = all("largest_step" in row for row in block["sets"].values())
    lines = [
        "",
        "## Power and storage (the same draws, 95% CIs)",
        "",
        f"Power steps: instants where the fleet's draw moves by more than {threshold} (a tenth of its full "
        "draw; a job that fires and one that resumes each make one); volume: the completed checkpoints"
        + (
            "; largest step: the largest change of the draw at one instant, up or down"
            + ", the mean over the draws of each draw's largest (95% CI) and the largest in any draw (max)"
            if largest
            else ""
        )
        + ".",
        "",
        f"| intervals | power steps {per} | volume written {per} |"
        + (f" largest step: mean{in_header} | largest step: max{in_header} |" if largest else ""),
        "|---|---|---|" + ("---|---|" if largest else ""),
    ]
    for name, row in block["sets"].items():
        steps, volume = row["power_steps"], row["volume"]
        lines.append(
            f"| {labels.get(name, markdown_text(name))} | "
            f"{steps['mean']:.1f} [{steps['low']:.1f}, {steps['high']:.1f}] | "
            f"{show_volume(volume['mean'])} [{show_volume(volume['low'])}, {show_volume(volume['high'])}] |"
            + (f" {estimate_text(row['largest_step'], step)} | {step(row['largest_step_max'])} |" if largest else "")
        )
    return lines


def _horizon_text(spec, horizon: float) -> str:
    """H as given (plain), or in the file's time unit and in seconds."""
    if spec.time_unit is None:
        return f"{horizon:g}"
    return f"{time_text(spec, horizon)} ({significant(horizon)} s)"


def _limit(value, units: bool = False) -> str:
    if value is None:
        return "none"
    return bandwidth_text(value) if units else f"{value:g}"


def _snapshot_text(spec, snapshot: float) -> str:
    return f"{snapshot:g}" if spec.time_unit is None else short_time_text(spec, snapshot)


def _storage_text(spec) -> str:
    """The storage curve: a preset's name, 'list', or in a file with units f(1) ... f(N)."""
    if isinstance(spec.throughput, str):
        return spec.throughput
    if spec.time_unit is None:
        return "list"
    rates = spec.throughput
    peak = max(rates)
    if min(rates) == peak:
        return f"{bandwidth_text(peak)} shared by every writer count"
    return (
        f"{bandwidth_text(rates[0])} for one writer, peak {bandwidth_text(peak)} at {rates.index(peak) + 1}, "
        f"{bandwidth_text(rates[-1])} at {len(rates)}"
    )


def _cap_text(spec) -> str:
    if spec.cap is None:
        return "none"
    if spec.power_per_gpu is None:
        return f"{spec.cap:g}"
    return f"{significant(spec.cap * spec.power_per_gpu / 1e6)} MW ({spec.cap:g} GPUs' draw)"


def _units_tables(spec, result_json: dict) -> list:
    """A file with units: the intervals in its time unit, goodput before and after, and the
    GPU-hours per day the design saves, per group and for the fleet."""
    md = markdown_text
    unit = spec.time_unit
    compared = comparisons_of(result_json)
    intervals = result_json["intervals_in_time_unit"]
    gpus = result_json["gpus"]
    write_alone = spec.solo_write_time()[np.searchsorted(spec.labels, np.arange(len(spec.groups)))]
    lines = [
        f"Intervals are the compute time between checkpoints, in {md(unit)}; current: the file's own "
        "(Young's where a group gives none).",
        "",
        "| group | jobs | GPUs per job | checkpoint | write alone | MTBF | **design** | current | "
        + " | ".join(list(compared.values())[1:])
        + " |",
        "|---" * (7 + len(compared)) + "|",
    ]
    for g, group in enumerate(spec.groups):
        row = intervals[g]
        lines.append(
            f"| {md(group.name)} | {group.count} | {count_text(group.size)} | {volume_text(group.write)} | "
            f"{short_time_text(spec, write_alone[g])} | {time_text(spec, group.mtbf)} | "
            f"**{significant(row['design'])}** | " + " | ".join(significant(row[name]) for name in compared) + " |"
        )
    goodput = result_json["goodput"]
    lines += [
        "",
        "## Goodput before and after (fresh draws, 95% CIs)",
        "",
        "Goodput is 1 − waste: the share of the GPUs' time that went into work no failure took "
        "(the work not yet checkpointed at H counts: nothing fails there), weighted by GPUs; the current "
        "intervals and the design on the same draws.",
        "",
        "| group | GPUs | current | design |",
        "|---|---|---|---|",
    ]
    for g, group in enumerate(spec.groups):
        lines.append(
            f"| {md(group.name)} | {count_text(gpus['groups'][g])} | "
            f"{percent_ci_text(goodput['current']['groups'][g])} | "
            f"{percent_ci_text(goodput['design']['groups'][g])} |"
        )
    lines.append(
        f"| **fleet** | {count_text(gpus['fleet'])} | {percent_ci_text(goodput['current']['fleet'])} | "
        f"**{percent_ci_text(goodput['design']['fleet'])}** |"
    )
    hours = result_json["gpu_hours_saved_per_day"]
    lines += [
        "",
        "## GPU-hours per day saved by the design (95% CIs)",
        "",
        "The waste saved × GPUs × 24: waste is a share of the wall-clock time over the horizon, so each day "
        "the design saves that share of every GPU's 24 hours. Positive: the group gains; negative: it pays "
        "(paired over the same draws as the goodput).",
        "",
        "| group | GPUs | " + " | ".join(f"against {label}" for label in compared.values()) + " |",
        "|---" * (2 + len(compared)) + "|",
    ]
    for g, group in enumerate(spec.groups):
        lines.append(
            f"| {md(group.name)} | {count_text(gpus['groups'][g])} | "
            + " | ".join(estimate_text(hours[name]["groups"][g], hours_text) for name in compared)
            + " |"
        )
    lines.append(
        f"| **fleet** | {count_text(gpus['fleet'])} | "
        + " | ".join(f"**{estimate_text(hours[name]['fleet'], hours_text)}**" for name in compared)
        + " |"
    )
    return lines


class _Comparisons(NamedTuple):
    """Every comparison of the report, on the evaluation's fresh draws."""

    compared: dict  # the baselines and the candidates, by name
    table: dict  # per job, the intervals of the design and of each compared set
    evaluation: Evaluation  # the fresh draws every comparison comes from
    comparison: Comparison  # the waste per group, fleet waste and savings (`cj.design.compare`)
    names: list  # the evaluated sets in the report's order
    per_group: np.ndarray  # (D, S, G) waste per group, in the order of names
    writers: np.ndarray  # the writer-count distribution per set, in the order of names
    writers_draws: np.ndarray


def _window(settings: dict) -> int:
    """--method adam: the design is T at the mean θ of this many last steps."""
    return min(10, settings["steps"])


def _design(args) -> int:
    """The budget checks, the design, the comparisons on fresh draws, then the outputs."""
    spec, settings = args.spec, args.settings
    report_devices("design", args.device_info, devices_inside(args.device_info))
    dtype = np.float64 if args.x64 else np.float32
    fleet = _checked_fleet(spec, settings, dtype, force=args.force)
    started = time.perf_counter()
    from ..design import InfeasibleBudgets

    try:
        result = _run_design(args, fleet)
    except InfeasibleBudgets as err:
        raise CliError(_infeasible_text(spec, settings, err, args)) from None
    comparisons = _compare(spec, result)
    summary = _summary(spec, settings, result, comparisons)
    summary["trade_off"] = _trade_off_json(spec, settings, result, dtype)
    schedule = _recommended_schedule(spec, settings, result, comparisons, summary, dtype)
    wall_s = time.perf_counter() - started
    summary.update(
        schedule_period=schedule["period"],
        schedule_window=[schedule["start"], schedule["stop"]],
        schedule_failures_shown=schedule["failures_shown"],
        wall_time_s=wall_s,
    )
    out = Path(args.out)
    summary["rerun"] = rerun_command(spec, settings, summary, out)
    _write_outputs(out, spec, settings, summary, schedule, comparisons, wall_s)
    _print_outcome(spec, summary, wall_s, out)
    return 0


def _checked_fleet(spec, settings: dict, dtype, *, force: bool):
    """Says what the run will do, and returns the fleet after the event and work budgets
    (`_plan.check_horizon_events`, `_plan.check_work`) let it run."""
    from .._plan import check_horizon_events, check_work, largest_count

    search = settings["method"] == "search"
    n_sets = 2 * len(spec.groups) + 2 if search else 2 * settings["pairs"]
    print(
        f"ckpt-jax design: {spec.n_jobs} jobs to H = {_horizon_text(spec, settings['horizon'])}: about "
        f"{spec.events(settings['horizon']):.2g} events per run (each O(N)), "
        + (
            f"up to {n_sets} interval sets x {settings['draws']} common draws per step"
            if search
            else f"{n_sets * settings['draws']} runs per step"
        )
        + f", up to {settings['steps']} steps"
    )
    fleet = spec.fleet(dtype=dtype)
    check_horizon_events(fleet, settings["horizon"], name="horizon")  # the event budget: a limit
    runs = n_sets * settings["draws"] * settings["steps"]  # every step's runs, refused up front unless --force
    check_work(fleet.events(settings["horizon"]), spec.n_jobs, runs, force=force, size=largest_count(spec))
    return fleet


def _run_design(args, fleet) -> DesignResult:
    """The design itself (`cj.design.checkpoint_intervals`), evaluated on fresh draws."""
    import jax

    from ..design import checkpoint_intervals

    spec, settings = args.spec, args.settings
    # The file's own intervals are weighed (and tried as a start) where it gives any, and
    # always in a file with units (Young's where a group gives none).
    current = spec.time_unit is not None or any(group.compute is not None for group in spec.groups)
    design_key, _ = jax.random.split(seed_key(settings["seed"]))
    return checkpoint_intervals(
        fleet,
        bounds=spec.job_bounds(),
        horizon=settings["horizon"],
        n_draws=settings["draws"],
        n_pairs=settings["pairs"],
        steps=settings["steps"],
        key=design_key,
        groups=spec.labels,
        method=settings["method"],
        launch=_launch(settings),
        offsets=settings["offsets"],
        stagger=settings["staggers"],
        progress=not args.no_progress,
        window=_window(settings),
        eval_draws=2 * settings["pairs"] * settings["draws"],
        candidates={"current": spec.intervals()} if current else None,
        rtol=SEARCH_RTOL,
        floor=settings.get("floor", FLOOR),
        budgets=_budgets(spec, settings),
    )


def _budgets(spec, settings: dict):
    """The run's `cj.design.Budgets` (None without any): per day in a file with units, else over H."""
    from ..design import Budgets

    budgets = settings.get("budgets")
    if budgets is None:
        return None
    day = spec.time_unit is not None
    written = budgets["max_written"]
    lower = spec.job_bounds()[0]
    floors = np.repeat([math.nan if f is None else f for f in budgets["min_interval"]], [g.count for g in spec.groups])
    return Budgets(
        written=None if written is None else written * (86400.0 if day else 1.0),
        power_steps=budgets["max_power_steps"],
        min_interval=None if np.all(np.isnan(floors)) else np.where(np.isnan(floors), lower, floors),
        per=86400.0 if day else None,
        bound=budgets["bound"],
    )


def _budget_value(units: bool, name: str, value: float, bare: bool = False) -> str:
    """A budget's value as the report shows it: a volume a day (units) or over H, a count of
    steps; ``bare``: without "a day" / "over H"."""
    shown = volume_text(value) if units and name == "written" else significant(value)
    return shown if bare else f"{shown} {'a day' if units else 'over H'}"


def _infeasible_text(spec, settings: dict, err, args) -> str:
    """The refusal of budgets no intervals in the bounds keep, in the file's units, naming
    the option or the file's field that set each broken one."""
    del settings
    units = spec.time_unit is not None
    parts = []
    for name, smallest in err.smallest.items():
        option = "--" + BUDGET_NAMES[name].replace("_", "-")
        given = getattr(args, BUDGET_NAMES[name], None) is not None
        where = option if given else f"fleet file {spec.path}: design.{BUDGET_NAMES[name]}"
        parts.append(
            f"{where} = {_budget_value(units, name, err.limits[name])} cannot be kept: even at the longest intervals "
            f"the bounds allow the fleet uses {_budget_value(units, name, smallest)}, the smallest budget that would "
            "be feasible; raise the budget (or the bounds' upper ends)"
        )
    return "; ".join(parts)


def _compare(spec, result: DesignResult) -> _Comparisons:
    """The design against every baseline and candidate, per group, on the evaluation's draws."""
    from ..design import compare, writer_distribution

    units = spec.time_unit is not None
    compared = {**result.baselines, **(result.candidates or {})}
    table = {"design": result.intervals, **{name: b.intervals for name, b in compared.items()}}
    evaluation = result.evaluation
    assert evaluation is not None  # checkpoint_intervals always evaluates on fresh draws
    comparison = compare(evaluation, spec.labels, spec.per_job("size"), gpus=_gpus(spec) if units else None)
    names = _in_report_order(evaluation.names)
    order = [evaluation.names.index(name) for name in names]
    writers, writers_draws = (value[order] for value in writer_distribution(evaluation))
    per_group = comparison.group_waste[order]
    return _Comparisons(compared, table, evaluation, comparison, names, per_group, writers, writers_draws)


def _recommended_schedule(spec, settings: dict, result: DesignResult, comparisons: _Comparisons, summary, dtype):
    """One period of the recommended intervals (`recommend`) in a run with failures: the
    design's at its launch (offsets, launch stagger), else the set recommended at the
    settings' launch."""
    use = summary["recommended"]["use"]
    if use == "design":
        launch, intervals, offsets = _designed_launch(settings, result), result.intervals, result.offsets
    else:
        launch, intervals, offsets = _launch(settings), comparisons.table[use], None
    return _schedule(spec, intervals, seed=settings["seed"], launch=launch, dtype=dtype, offsets=offsets)


def _summary(spec, settings: dict, result: DesignResult, comparisons: _Comparisons):
    """design.json, but for ``rerun`` (which quotes it) and the schedule and wall time
    (`_design` adds them)."""
    import jax

    from .. import __version__

    first = np.searchsorted(spec.labels, np.arange(len(spec.groups)))  # each group's first job
    summary = {
        "command": "design",
        "version": __version__,
        "fleet": spec.to_dict(),
        "settings": settings,
        "keys": {
            "seed": SEED_KEY_TEXT,
            "design": "split(key(seed))[0]",
            "evaluation": "split(split(key(seed))[0], 3)[1]: every comparison's draws",
        },
        **_outcome_json(spec, result, comparisons, first, settings.get("floor", FLOOR)),
        **_comparisons_json(spec, comparisons),
        **_history_json(settings, result, first),
        "backend": jax.default_backend(),
        "python": platform.python_version(),
        "jax": jax.__version__,
        "files": FILES,
    }
    if spec.time_unit is not None:
        summary.update(
            _in_units(spec, comparisons.table, comparisons.names, comparisons.comparison, settings.get("floor", FLOOR))
        )
    if result.budgets is not None:
        summary["budgets"] = _budgets_json(spec, result.budgets, first)
    summary["recommended"] = recommend(summary)
    for group, interval in zip(summary["groups"], recommended_intervals(summary)):
        group["recommended"] = interval
    if spec.time_unit is not None:
        summary["recommendation"] = [
            f"{group['name']}: checkpoint every {time_text(spec, group['recommended'], 2)}"
            for group in summary["groups"]
        ]
    return summary


def _estimate_json(estimate) -> dict:
    return {"mean": estimate.mean, "low": estimate.low, "high": estimate.high}


def _budgets_json(spec, outcome, first: np.ndarray) -> dict:
    """design.json's ``budgets`` (`cj.design.BudgetOutcome`): the limits (per day in a file
    with units, else over H), the recommendation's use of each on the fresh draws, which
    bind, each binding limit's shadow price (the fleet waste, and in a file with units the
    GPU-hours a day, that a limit 10 % higher would save), and the intervals per group of the
    relaxed design and of each set scaled to keep the limits."""
    gpus = float(_gpus(spec).sum()) if spec.time_unit is not None else None
    per_group = lambda intervals: [float(intervals[j]) for j in first]  # noqa: E731
    block = {
        "per": "day" if spec.time_unit is not None else "horizon",
        "bound": outcome.budgets.bound,
        "limits": dict(outcome.budgets.limits),
        "min_interval": [group.min_interval for group in spec.groups],
        "used": {name: e.to_dict() for name, e in outcome.used.items()},
        "held": dict(outcome.held),
        "binding": list(outcome.binding),
        "shadow_waste": {name: e.to_dict() for name, e in outcome.shadow.items()},
        "relaxed": {name: per_group(value) for name, value in outcome.relaxed.items()},
        "scaled": {f"{name}_scaled": per_group(value) for name, value in outcome.scaled.items()},
    }
    if gpus is not None:
        block["shadow_gpu_hours_per_day"] = {
            name: {key: value * gpus * 24.0 for key, value in e.to_dict().items()} for name, e in outcome.shadow.items()
        }
    return block


def budget_lines(summary: dict) -> list:
    """The budgets in a sentence each: the recommendation's use against the limit, whether it
    binds, and what relaxing it by 10 % would buy."""
    block = summary.get("budgets")
    if block is None:
        return []
    words = {"written": "written volume", "power_steps": "power steps"}
    units = block["per"] == "day"
    bound = "its mean" if block["bound"] == "mean" else "the upper end of its 95% CI"
    lines = []
    for name, limit in block["limits"].items():
        used = block["used"][name]
        text = (
            f"Budget on the {words[name]}: {_budget_value(units, name, used['mean'])} "
            f"(95% CI {_budget_value(units, name, used['low'], bare=True)} to "
            f"{_budget_value(units, name, used['high'], bare=True)}) with the recommendation, limit "
            f"{_budget_value(units, name, limit)} (kept with {bound} on the "
            "common draws)"
        )
        if name in block["binding"]:
            if "shadow_gpu_hours_per_day" in block:
                buys = f"{estimate_text(block['shadow_gpu_hours_per_day'][name], hours_text)} GPU-hours a day"
            else:
                e = block["shadow_waste"][name]
                buys = f"{e['mean']:+.4f} [{e['low']:+.4f}, {e['high']:+.4f}] of fleet waste"
            text += f"; it binds: relaxing it by 10% would buy {buys}"
        else:
            text += "; it does not bind"
        lines.append(text + ".")
    return lines


def _budget_table(spec, summary: dict) -> list:
    """The report's budgets section: each limit, the use of each set, what binds."""
    block = summary.get("budgets")
    if block is None:
        return []
    md = markdown_text
    floors = [
        f"{md(group.name)} {time_text(spec, floor)}"
        for group, floor in zip(spec.groups, block["min_interval"])
        if floor is not None
    ]
    lines = [
        "",
        "## Budgets (docs/model.md §1g)",
        "",
        "The design keeps each budget on its common draws ("
        + ("the mean" if block["bound"] == "mean" else "the upper end of the 95% CI")
        + "): a move of the search that breaks one is scaled up, every interval by one factor, until it "
        "keeps it; the baselines and the current intervals that break one are weighed scaled the same way "
        "('scaled to the budgets'). A budget binds where the design uses it within 3% or the search's finest "
        "move down (every interval ÷ 1.1) would break it; its shadow price is "
        "what a budget 10% higher would buy, the design's intervals scaled down until it binds again "
        "(paired on the fresh draws).",
        "",
    ]
    if floors:
        lines += [f"Floors on the intervals (min_interval): {', '.join(floors)}.", ""]
    lines += [f"- {line}" for line in budget_lines(summary)]
    return lines


def _trade_off_json(spec, settings: dict, result, dtype) -> dict:
    """design.json's ``trade_off``: the fleet's waste (and in a file with units the GPU-hours a
    day it costs) against its written volume and power steps along the recommended
    intervals scaled by common factors, on the evaluation's draws (as many factors as the
    evaluation weighs sets: one compiled program)."""
    import jax

    from ..design import trade_off

    evaluation = result.evaluation
    n_sets = len(evaluation.names)
    factors = np.geomspace(0.5, 2.0, n_sets)  # the design and three baselines at least
    design_key, _ = jax.random.split(seed_key(settings["seed"]))
    _, eval_key, _ = jax.random.split(design_key, 3)
    keys = jax.random.split(eval_key, evaluation.fleet_waste.shape[1])
    units = spec.time_unit is not None
    curve = trade_off(
        spec.fleet(dtype=dtype),
        result.intervals,
        factors,
        horizon=settings["horizon"],
        keys=keys,
        launch=_launch(settings),
        per=86400.0 if units else None,
    )
    gpus = float(_gpus(spec).sum())
    from .._estimate import mean_ci

    return {
        "factors": factors.tolist(),
        "waste": [mean_ci(w).to_dict() for w in curve.waste],
        "gpu_hours_per_day": [mean_ci(w * gpus * 24.0).to_dict() for w in curve.waste] if units else None,
        "written": [mean_ci(v).to_dict() for v in curve.written],
        "power_steps": [mean_ci(v).to_dict() for v in curve.power_steps],
    }


def _outcome_json(
    spec, result: DesignResult, comparisons: _Comparisons, first: np.ndarray, floor: float = FLOOR
) -> dict:
    """design.json's intervals per group, how the search ended, and the fleet waste of the
    design and of each baseline and candidate, with what the design saves over it (outside
    the noise: its CI excludes 0 and it exceeds ``floor``, `ckpt_jax._estimate.effect`)."""

    def outcome(b) -> dict:
        return {
            "waste": _estimate_json(b.waste),
            "saved": _estimate_json(b.saved),
            "outside_noise": effect(b.saved, floor) != 0,
        }

    searched = result.intervals if result.searched is None else result.searched
    return {
        "groups": [
            {
                "name": group.name,
                "design": float(result.intervals[first[g]]),
                "searched": float(searched[first[g]]),
                **{name: float(comparisons.table[name][first[g]]) for name in comparisons.compared},
            }
            for g, group in enumerate(spec.groups)
        ],
        "offsets": None if result.offsets is None else [float(x) for x in result.offsets],
        "restart_stagger": result.restart_stagger,
        "launch_stagger": result.launch_stagger,
        "method": result.method,
        "converged": bool(result.converged),
        "start": result.start,
        "fallback": result.fallback,
        "search_rtol": SEARCH_RTOL,
        "mesh": None if result.mesh is None else result.mesh.tolist(),
        "waste": _estimate_json(result.waste),
        "baselines": {name: outcome(b) for name, b in result.baselines.items()},
        "candidates": {name: outcome(b) for name, b in (result.candidates or {}).items()},
    }


def _comparisons_json(spec, comparisons: _Comparisons) -> dict:
    """design.json's comparisons per group, power and storage, and writer counts."""
    comparison, names = comparisons.comparison, comparisons.names
    return {
        "per_group": {name: [e.to_dict() for e in comparison.waste[name]] for name in names},
        "per_group_saved": {name: [e.to_dict() for e in comparison.saved[name]] for name in names if name != "design"},
        "per_group_fleet_waste": {name: comparison.fleet_waste[name].to_dict() for name in names},
        "power_and_storage": _power_and_storage(spec, comparisons.evaluation),
        "writers_fraction": {name: comparisons.writers[i].tolist() for i, name in enumerate(names)},
        "writers_draws": {name: int(comparisons.writers_draws[i]) for i, name in enumerate(names)},
    }


def _history_json(settings: dict, result: DesignResult, first: np.ndarray) -> dict:
    """design.json's history of the search (or of adam) and how it stopped."""
    history = result.history
    steps = int(history.objective.size)
    return {
        "history": {
            "objective": history.objective.tolist(),
            "stderr": history.stderr.tolist(),
            "grad_norm": history.grad_norm.tolist(),
            "intervals": history.intervals[:, first].tolist(),
        },
        "recommended_from_last_steps": 1 if settings["method"] == "search" else min(_window(settings), steps),
        "steps_taken": steps,
        "stopped_early": bool(result.stopped_early),
    }


def _write_outputs(
    out: Path, spec, settings: dict, summary: dict, schedule: dict, comparisons: _Comparisons, wall_s: float
) -> None:
    """design.json, report.md and the figures (`FILES`), each written atomically."""
    from ..files import atomic_write, atomic_write_bytes
    from . import _design_figures as figures

    atomic_write_bytes(out / "design.json", (json.dumps(summary, indent=2) + "\n").encode())
    atomic_write_bytes(out / "report.md", _report(spec, settings, summary, wall_s).encode())
    all_figures = figures.all_figures(
        spec, summary, schedule, comparisons.per_group, comparisons.writers, comparisons.names
    )
    for name, figure in all_figures.items():
        atomic_write(out / name, lambda handle, figure=figure: figure.savefig(handle, format="png", dpi=120))
        figures.close(figure)


def _print_outcome(spec, summary: dict, wall_s: float, out: Path) -> None:
    """The recommended intervals, their fleet waste, and the summary lines (`summary_lines`)."""
    units = spec.time_unit is not None
    use = summary["recommended"]["use"]
    recommended = ", ".join(
        f"{g['name']} {g['recommended']:.3g}" if not units else f"{g['name']} {time_text(spec, g['recommended'])}"
        for g in summary["groups"]
    )
    waste = summary["waste"] if use == "design" else summary["per_group_fleet_waste"][use]
    print(
        f"ckpt-jax design: recommended intervals{'' if use == 'design' else ' (' + comparisons_of(summary)[use] + ')'} "
        f"{recommended}; fleet waste {waste['mean']:.4f} [{waste['low']:.4f}, {waste['high']:.4f}]"
    )
    for line in summary_lines(summary, spec.names, quote=repr):
        print(f"ckpt-jax design: {line}")
    print(f"ckpt-jax design: {summary['steps_taken']} steps, {wall_s:.1f} s -> {out}")
