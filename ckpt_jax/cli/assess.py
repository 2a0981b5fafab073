"""``ckpt-jax assess FLEET.toml --out DIR``: what a fleet's checkpointing costs it as configured
(`ckpt_jax.assess.assess`): goodput, GPU-hours lost per day by cause, storage and power, in the
file's own units, with a report and figures."""

from __future__ import annotations

import json
import math
import platform
import shutil
import time
from pathlib import Path

import numpy as np

from ._common import (
    SEED_KEY_TEXT,
    CliError,
    add_devices,
    add_x64,
    devices_inside,
    integer,
    percent_ci_text,
    quantity_text,
    report_devices,
    seed_key,
    significant,
)
from ._common import duration_text as _duration_text
from ._options import (
    HORIZON_FROM_FILE,
    QUICK_HORIZON_TEXT,
    add_force,
    add_horizon,
    add_no_progress,
    add_out,
    add_quick,
    add_seed,
    run_horizon,
)
from .design import markdown_text, note_lines

# --quick: a small run that shows every output in well under a minute on a laptop CPU.
QUICK = {"draws": 8}  # and the horizon capped (`_options.run_horizon`)

FILES = ["assess.json", "report.md", "losses.png", "timeline.png", "writers.png"]
# Assessment.to_xarray() as a zarr group, where xarray and zarr are installed (listed in files then).
ZARR = "assess.zarr"

# One day in hours: the timeline's window, and what "per day" means.
DAY_HOURS = 24.0


def add_assess(subparsers) -> None:
    parser = subparsers.add_parser(
        "assess",
        help="what checkpoints and failures cost the fleet of a fleet file, as configured",
        description=(
            "Simulate the fleet of FLEET.toml at the intervals it uses (its groups' interval, else "
            "Young's) over a horizon, from independent failure draws, and report the goodput per group "
            "and for the fleet (95 % CIs), the GPU-hours lost per day by cause (checkpoint stalls, "
            "backpressure, work lost to failures, restarts, outages and restart stagger where the file has "
            "outages, throttling), the storage's concurrent writers "
            "and the power draw. Times are in the file's time unit; in a file of plain numbers they are "
            "taken as hours. Writes assess.json, report.md and figures into --out, and assess.zarr, the "
            "assessment as an xarray Dataset in a zarr group (xarray.open_zarr opens it), where xarray and "
            'zarr are installed (pip install "ckpt_jax[xarray]").'
        ),
    )
    parser.add_argument("fleet_file", type=Path, metavar="FLEET.toml", help="the fleet file (see examples/)")
    add_horizon(parser, HORIZON_FROM_FILE)
    parser.add_argument(
        "--draws",
        type=integer(2, 100_000),
        default=None,
        metavar="S",
        help="independent failure draws, each from a random launch (default: 64)",
    )
    add_seed(parser, default=None)
    add_quick(parser, f"{QUICK['draws']} draws, {QUICK_HORIZON_TEXT}; options given win")
    add_no_progress(parser)
    add_force(parser)
    add_devices(parser, shards=False, inside=True)
    add_x64(parser)
    add_out(parser)
    parser.set_defaults(run=_assess, check=_check, resumes=False)


def settings_for(args, spec) -> dict:
    """The run's settings: options, else --quick, else the file (draws: 64)."""
    units = spec.time_unit is not None
    horizon = run_horizon(args.horizon, spec, args.quick)
    hours_per_time_unit = 1 / 3600 if units else 1.0  # the engine runs in seconds in a file with units
    return {
        "draws": args.draws if args.draws is not None else (QUICK["draws"] if args.quick else 64),
        "horizon": horizon,
        "time_unit": spec.time_unit,
        "horizon_in_time_unit": horizon / _seconds_per(spec.time_unit),
        "hours_per_time_unit": hours_per_time_unit,
        "gpu_power": spec.power_per_gpu,
        "timeline_span": min(horizon, DAY_HOURS / hours_per_time_unit),
        "seed": args.seed if args.seed is not None else spec.design.seed,
        "quick": args.quick,
    }


def _seconds_per(time_unit: str | None) -> float:
    """The engine's time per display unit: seconds per ``time_unit``, 1 in a file of plain numbers."""
    from .._units import duration_unit

    return 1.0 if time_unit is None else duration_unit(time_unit)


def _check(args) -> None:
    from ..fleetfile import load

    # FleetFileError is a ValueError: one error line.
    args.spec = load(args.fleet_file, dtype=np.float64 if args.x64 else np.float32)
    if "fleet" in args.spec.names:
        index = args.spec.names.index("fleet")
        raise CliError(
            f"fleet file {args.fleet_file}: groups[{index}].name 'fleet' is reserved for the whole fleet: rename it"
        )
    args.settings = settings_for(args, args.spec)


# -- numbers as an operator reads them ------------------------------------------------------


def _amount(value: float) -> str:
    """A count such as GPU-hours: grouped digits from 100 up, three significant digits below,
    0 below 0.005 (rounding noise, such as a throttling of -1e-9)."""
    if abs(value) < 0.005:
        return "0"
    return f"{value:,.0f}" if abs(value) >= 99.5 else f"{value:.3g}"


def _estimate_text(estimate: dict | None, shown=_amount) -> str:
    """An estimate and its 95% CI; "not observed" for null (assess.json's NaN), "n/a" for a
    null bound (one draw)."""
    if estimate is None:
        return "not observed"
    if estimate["low"] is None and estimate["high"] is None:  # every draw the same: one draw
        return shown(estimate["mean"])
    low, high = (NOT_AVAILABLE if x is None else shown(x) for x in (estimate["low"], estimate["high"]))
    return f"{shown(estimate['mean'])} [{low}, {high}]"


NOT_AVAILABLE = "n/a"


def _maybe(value, shown=_amount) -> str:
    """A number, or "not observed" for null."""
    return "not observed" if value is None else shown(value)


def _percent(value: float) -> str:
    """A fraction in percent, two decimals (the report and the printed lines use it)."""
    return f"{100 * value:.2f}"


def _goodput_text(estimate: dict | None) -> str:
    return "not observed" if estimate is None else percent_ci_text(estimate)


def _draws_text(summary: dict) -> str:
    """What the intervals are over: the draws, or one draw where every draw was the same."""
    fleet = summary["goodput"]["fleet"]
    if fleet is not None and fleet["low"] is None and fleet["high"] is None and summary["n_draws"] > 1:
        return f"every one of the {summary['n_draws']} draws the same, a replayed trace and a fixed launch: one draw"
    return f"95% CI over {summary['n_draws']} draws"


def duration_text(value: float, time_unit: str | None) -> str:
    """A time of the engine in the file's time unit ("30 min"; "11 min", not "0.183 h", in a
    file in hours); plain files: the number (`_common.duration_text`)."""
    return _duration_text(value, time_unit)


def power_text(value: float, unit: str) -> str:
    """A power draw: in W, kW or MW by its size, its digits kept, where the file gives
    power_per_gpu ("9.83 MW", "1,024 kW"), else in GPUs at full draw."""
    if unit == "gpu":
        return f"{_amount(value)} GPUs at full draw"
    return quantity_text(value, "W")


# The words of the figures' legend (`_assess_figures.CAUSE_LABELS`), here without importing matplotlib
# and JAX, which must start after --devices is set.
CAUSE_WORDS = {
    "checkpoint": "checkpoint stalls",
    "overhead": "checkpoint overheads",
    "backpressure": "waiting on backpressure",
    "lost_work": "work lost to failures",
    "restart": "restarts",
    "outages": "outages",
    "restart_stagger": "restart stagger",
    "throttling": "throttling by the power cap",
}


# Causes a fleet without common-cause outages (docs/model.md §1f), or without fixed checkpoint
# overheads (§1g), never has: left out of the report's sentences and table where they are
# exactly 0 (assess.json keeps every cause).
OUTAGE_CAUSES = ("outages", "restart_stagger")
OPTIONAL_CAUSES = (*OUTAGE_CAUSES, "overhead")


def shown_causes(summary: dict) -> list:
    """The causes the report shows: every one, but the outages' and the overheads' where the
    fleet has none."""
    fleet = summary["gpu_hours_lost_per_day"]["fleet"]
    return [
        cause
        for cause in CAUSE_WORDS
        if cause in fleet  # an assess.json written before the overhead cause has none
        and (cause not in OPTIONAL_CAUSES or fleet[cause]["mean"] != 0 or fleet[cause]["high"] not in (0, None))
    ]


def _largest_step(power: dict) -> float:
    """The largest power step at one instant in any draw, drop or rise (assess.json's
    ``largest_drop_max`` and ``largest_rise_max``)."""
    values = [power.get(key) for key in ("largest_drop_max", "largest_rise_max")]
    return max([v for v in values if v is not None], default=0.0)


def headline(summary: dict) -> list:
    """The assessment in four sentences: the fleet's goodput, its GPU-hours lost per day by
    cause (largest first), the largest power step, and the time at the cap."""
    fleet_hours = summary["gpu_hours_lost_per_day"]["fleet"]
    gpus = summary["gpus"]["fleet"]
    lost = sum(cause["mean"] for cause in fleet_hours.values())
    causes = sorted(shown_causes(summary), key=lambda cause: -fleet_hours[cause]["mean"])
    power = summary["power"]
    unit = power["unit"]
    drop, rise = power["largest_drop"], power["largest_rise"]
    step, kind = (drop, "drop") if drop["mean"] >= rise["mean"] else (rise, "rise")
    worst = _largest_step(power)
    if max(step["mean"], worst) > 1e-9 * power["max"]["mean"]:  # rounding aside
        step_text = (
            f"Largest power step: {power_text(step['mean'], unit)} on average (a {kind} at one instant; the mean "
            f"over the {summary['n_draws']} draws of each draw's largest), {power_text(worst, unit)} at most "
            f"(the largest in any draw), with a mean draw of {power_text(power['mean']['mean'], unit)} and a max of "
            f"{power_text(power['max']['mean'], unit)}."
        )
    else:
        step_text = f"No power step: the draw stays at {power_text(power['max']['mean'], unit)}."
    lines = [
        f"Fleet goodput {_goodput_text(summary['goodput']['fleet'])} ({_draws_text(summary)}): "
        f"its {gpus:,.0f} GPUs lose {_amount(lost)} GPU-hours per day.",
        "GPU-hours lost per day: "
        + "; ".join(f"{CAUSE_WORDS[cause]} {_estimate_text(fleet_hours[cause])}" for cause in causes)
        + ".",
        step_text,
    ]
    if power["cap_time"] is None:
        lines.append("No power cap.")
    else:
        lines.append(
            f"At the power cap {_goodput_text(power['cap_time'])} of the time; computing below full speed costs "
            f"{_estimate_text(power['throttled_gpu_hours_per_day'])} GPU-hours per day."
        )
    return lines


def _report(spec, summary: dict) -> str:
    md = markdown_text
    settings = summary["settings"]
    unit = settings["time_unit"]
    shown = lambda value: duration_text(value, unit)  # noqa: E731
    names = list(summary["groups"])
    lines = [f"# Assessment of {md(spec.path)}", ""]
    lines += [f"- **{line}**" if i == 0 else f"- {line}" for i, line in enumerate(headline(summary))]
    hours = (
        f"Times in {unit}" + (f", those under 1 {unit} in a smaller unit." if _seconds_per(unit) > 1 else ".")
        if unit is not None
        else "The file has plain numbers: its times are taken as hours (GPU-hours = size × time)."
    )
    hours_too = "" if unit == "h" else f" ({significant(summary['horizon_hours'])} h)"
    lines += [
        "",
        f"{spec.n_jobs} jobs in {len(names)} group{'s' * (len(names) != 1)}, simulated as configured over H = "
        f"{shown(settings['horizon'])}{hours_too} in {summary['n_draws']} independent "
        f"failure draws, each from {_launch_text(spec, shown)} (seed {settings['seed']}; "
        f"{summary['wall_time_s']:.0f} s). "
        f"{hours} "
        + (
            "Every draw was the same (nothing in them is drawn at random), so they are one draw: its numbers "
            "have no interval."
            if _draws_text(summary).startswith("every")
            else "Every estimate is a mean over the draws with its 95% CI."
        ),
    ]
    lines += note_lines(spec)
    lines += _groups_lines(spec, summary, shown)
    lines += _storage_section(spec, summary, shown)
    lines += _power_lines(spec, summary)
    lines += _storm_lines(summary)
    lines += _figures_lines(summary)
    return "\n".join(lines)


def _groups_lines(spec, summary: dict, shown) -> list:
    """The report's tables per group: the intervals in use, then goodput and GPU-hours lost
    per day by cause, and what the throttling column holds."""
    md = markdown_text
    names = list(summary["groups"])
    causes = shown_causes(summary)
    lines = [
        "",
        "## Intervals in use",
        "",
        "| group | jobs | GPUs per job | checkpoint interval | write alone | "
        + ("snapshot | " if spec.has_snapshots else "")
        + "MTBF per job | restart |",
        "|---" * (7 + spec.has_snapshots) + "|",
    ]
    first = np.searchsorted(spec.labels, np.arange(len(spec.groups)))
    intervals, write_alone = spec.intervals()[first], spec.solo_write_time()[first]
    for g, group in enumerate(spec.groups):
        interval = shown(intervals[g]) + (" (Young's)" if group.compute is None else "")
        lines.append(
            f"| {md(group.name)} | {group.count} | {_amount(group.size)} | {interval} | {shown(write_alone[g])} | "
            + (f"{shown(group.snapshot)} | " if spec.has_snapshots else "")
            + f"{shown(group.mtbf)} | {shown(group.restart)} |"
        )
    lines += [
        "",
        "Write alone: the checkpoint's write time with no other writer, at the job's write limit or the "
        "storage's one-writer bandwidth, whichever is lower.",
        "",
        "## Goodput and GPU-hours lost per day, per group",
        "",
        "Goodput: the share of the group's GPU time that ends up as saved training work.",
        "",
        "| group | GPUs | goodput | " + " | ".join(CAUSE_WORDS[cause] for cause in causes) + " | total lost |",
        "|---" * (4 + len(causes)) + "|",
    ]
    for name in [*names, "fleet"]:
        per_day = summary["gpu_hours_lost_per_day"][name]
        total = sum(per_day[cause]["mean"] for cause in CAUSE_WORDS if cause in per_day)
        label = "**fleet**" if name == "fleet" else md(name)
        lines.append(
            f"| {label} | {summary['gpus'][name]:,.0f} | {_goodput_text(summary['goodput'][name])} | "
            + " | ".join(_estimate_text(per_day[cause]) for cause in causes)
            + f" | {_amount(total)} |"
        )
    power = summary["power"]
    throttling = summary["gpu_hours_lost_per_day"]["fleet"]["throttling"]["mean"]
    throttled = power["throttled_gpu_hours_per_day"]["mean"]
    if power["cap_time"] is None:
        split = "Without a power cap every job computes at full speed: nothing is throttled."
    else:
        split = (
            f"The power draw measures the throttling by another route: {_amount(throttled)} GPU-hours per day "
            f"of computing below full speed (the table's {_amount(throttling)})."
        )
    split += (
        " Goodput is steady-state: the work done since the last checkpoint is not lost at the horizon "
        "(nothing fails there), so it counts as goodput (docs/model.md §1c)."
    )
    lines += ["", f"Checkpoint stalls include the slowdown of writes under contention. {split}"]
    return lines


def _storage_section(spec, summary: dict, shown) -> list:
    """The report's storage section: its statements and the table of writer counts, or why
    the writer count was not observed."""
    settings, unit = summary["settings"], summary["settings"]["time_unit"]
    lines = []
    storage = summary["storage"]
    n_slots = len(storage["writer_time"]) - 1
    if storage.get("writers_observed", True):
        lines += ["", "## Storage", "", *_storage_lines(spec, storage, unit)]
        observed, independent = storage["writer_time"], storage["independent_writer_time"]
        # Every count up to the last one held 0.01 % of the time, then the rest in one row.
        top = max(k for k in range(n_slots + 1) if observed[k] >= 1e-4 or independent[k] >= 1e-4)
        share = _share
        lines += [
            "",
            "| writers | share of time | with independent phases |",
            "|---|---|---|",
            *(f"| {k} | {share(observed[k])} | {share(independent[k])} |" for k in range(top + 1)),
        ]
        if top < n_slots and (sum(observed[top + 1 :]) > 0 or sum(independent[top + 1 :]) > 0):
            lines.append(
                f"| {top + 1} to {n_slots} | {share(sum(observed[top + 1 :]))} | {share(sum(independent[top + 1 :]))} |"
            )
    else:
        lines += ["", "## Storage", "", _unobserved_text(summary, shown(settings["horizon"]))]
    return lines


def _power_lines(spec, summary: dict) -> list:
    """The report's power section."""
    power = summary["power"]
    full = power["edges"][-1]  # every GPU computing
    per_gpu = full / summary["gpus"]["fleet"]
    unit_power = power["unit"]
    if unit_power == "W":
        drawn, in_units = (lambda value: power_text(value, "W")), []
    else:  # the unit once, then plain numbers
        drawn = _amount
        in_units = ["- In units of one GPU's full draw (the file gives no power_per_gpu)."]
    lines = [
        "",
        "## Power",
        "",
        *in_units,
        f"- Draw: mean {_estimate_text(power['mean'], drawn)}, max "
        f"{_estimate_text(power['max'], drawn)}; every GPU computing: "
        f"{drawn(full)} ({drawn(per_gpu)} a GPU; one not computing draws {drawn(spec.idle_power * per_gpu)}).",
        f"- Largest step at one instant, the mean over the draws of each draw's largest: drop "
        f"{_estimate_text(power['largest_drop'], drawn)}, rise {_estimate_text(power['largest_rise'], drawn)}; "
        f"the largest in any draw (max over the draws): drop {_maybe(power.get('largest_drop_max'), drawn)}, "
        f"rise {_maybe(power.get('largest_rise_max'), drawn)}.",
        "- The draw's distribution (pooled, to one bin of 1% of the full draw): "
        + ", ".join(f"{name} {_bin_text(_quantile_bin(power, q), drawn)}" for name, q in QUANTILES)
        + ".",
    ]
    if power["cap_time"] is None:
        lines.append("- No power cap.")
    else:
        lines.append(f"- Cap {drawn(spec.cap * per_gpu)}: at the cap {_goodput_text(power['cap_time'])} of the time.")
    return lines


def _figures_lines(summary: dict) -> list:
    """The report's list of figures, those written only."""
    settings, unit = summary["settings"], summary["settings"]["time_unit"]
    storage = summary["storage"]
    figures = {
        "losses.png": "where each group's GPU time goes, and its GPU-hours lost per day by cause.",
        "timeline.png": f"the power draw and the concurrent writers of one fleet over "
        f"{duration_text(settings['timeline_span'], unit)}"
        + (" (one day)" if settings["timeline_span"] * settings["hours_per_time_unit"] == DAY_HOURS else "")
        + (" of the file's time, taken as hours" if unit is None else "")
        + ".",
        "writers.png": "the share of time at each writer count, against jobs with independent phases, and the "
        "counts where the storage's aggregate bandwidth peaks."
        if storage.get("writers_observed", True)
        else "the share of time at each writer count for jobs with independent phases only: the fleet's own "
        "writer count was not observed in any draw.",
    }
    written = summary.get("files", FILES)  # a figure that could not be drawn is not listed
    return ["", "## Figures", "", *(f"- `{name}`: {text}" for name, text in figures.items() if name in written), ""]


def _unobserved_text(summary: dict, horizon: str) -> str:
    """Why the storage section has no writer counts: no draw had an observation window
    (`ckpt_jax.assess.Assessment.writers_observed`)."""
    down = summary["lost_fraction"]["fleet"]["restart"]["mean"]
    why = (
        f"the jobs are down {_percent(down)} % of the time, restarting after failures"
        if down >= 0.5
        else f"the horizon H = {horizon} is shorter than that"
    )
    return (
        "- **The writer count was not observed in any draw.** It is observed from the instant every job has "
        f"started a checkpoint once, and in no draw did that happen before the horizon: {why}. The goodput, "
        "the losses and the power draw above do not depend on it."
    )


def _counts_text(low: int, high: int, n_slots: int) -> str:
    """Writer counts low..high in words ("1 writer", "4 writers or more", "2 to 3 writers")."""
    if low == high:
        return f"{low} writer{'s' if low != 1 else ''}"
    return f"{low} writers or more" if high == n_slots else f"{low} to {high} writers"


def _storage_lines(spec, storage: dict, unit: str | None) -> list:
    """The storage section's statements: the writer counts, where the aggregate bandwidth
    f(n) peaks and how often the fleet has that many writers, and from which count every set
    of writers is bound by the storage (`ckpt_jax.assess.Assessment.saturation_writers`)."""
    md = markdown_text
    curve = _storage_curve(spec)  # f(1), ..., f(N)
    observed = storage["writer_time"]
    n_slots, saturation = len(observed) - 1, storage["saturation_writers"]
    lines = [
        f"- Concurrent writers (time-weighted, pooled over the draws): P50 {storage['writers_p50']:g}, "
        f"P99 {storage['writers_p99']:g}, max {storage['writers_max']}."
    ]
    if n_slots > 1 and curve[-1] > curve[-2]:
        lines.append(
            f"- The storage never saturates: its aggregate bandwidth f(n) still grows at n = {n_slots}, with every "
            f"job of the fleet writing (f(1) = {_bandwidth(curve[0], unit)}, f({n_slots}) = "
            f"{_bandwidth(curve[-1], unit)})."
        )
        return lines
    at_peak = np.flatnonzero(curve >= curve.max() * (1 - 1e-12)) + 1
    low, high = int(at_peak.min()), int(at_peak.max())
    held = sum(observed[n] for n in range(low, high + 1))
    counts = _counts_text(low, high, n_slots)
    lines.append(
        f"- The storage's aggregate bandwidth f(n) peaks at {_bandwidth(curve.max(), unit)} with {counts}"
        + (" (it falls as more write)" if high < n_slots else "")
        + f". That many write at once {_share(held)} of the time, so the storage runs at its peak at most that long."
    )
    if saturation > n_slots:
        lines.append(
            "- The storage never bounds every set of writers: the write limits of the slowest writers add up to "
            "less than f(n)."
        )
    elif saturation > storage["writers_max"]:
        lines.append(
            f"- The storage, not the writers' own write limits, bounds every set of writers only from {saturation} "
            f"writers on, more than any draw had at once (max {storage['writers_max']})."
        )
    else:
        lines.append(
            f"- From {saturation} writers on, the storage, not the writers' own write limits, bounds every set of "
            f"writers (f(n) no longer grows, and any {saturation} writers can fill it). That many or more write at "
            f"once {_goodput_text(storage['saturated_time'])} of the time."
        )
    alone = _fills_alone(spec)
    if alone and saturation > 1:  # from one writer: said above
        lines.append(
            f"- One job of {', '.join(md(name) for name in alone)} drains at the storage's peak alone "
            f"({_bandwidth(curve.max(), unit)}): while it writes the storage is the bottleneck whatever the "
            "writer count."
        )
    return lines


def _share(value: float) -> str:
    """A share of time in percent, three significant digits ("< 0.01 %" below that)."""
    return "0 %" if value == 0 else "< 0.01 %" if value < 1e-4 else f"{100 * value:.3g} %"


def _storage_curve(spec) -> np.ndarray:
    """f(1), ..., f(N): the storage's aggregate bandwidth with n writers."""
    if not isinstance(spec.throughput, str):
        return np.asarray(spec.throughput, np.float64)
    from .._throughput import THROUGHPUT_PRESETS

    preset = THROUGHPUT_PRESETS[spec.throughput]
    return np.asarray([float(preset(n)) for n in range(1, spec.n_jobs + 1)])


def _fills_alone(spec) -> list:
    """The groups one job of which saturates the storage alone: it drains at min(b, f(1)),
    and that reaches the peak of f."""
    curve = _storage_curve(spec)
    return [group.name for group in spec.groups if min(group.write_limit or math.inf, curve[0]) >= curve.max()]


def _bandwidth(value: float, time_unit: str | None) -> str:
    """A bandwidth in a file with units, with the SI prefix that keeps its digits ("1,024 GB/s",
    "2 TB/s"); else the number."""
    return significant(value) if time_unit is None else quantity_text(value, "B/s")


QUANTILES = (("P1", 0.01), ("median", 0.5))  # of the power draw, in the report


def _bin_text(bin: tuple, shown) -> str:
    low, high = shown(bin[0]), shown(bin[1])
    return f"≈ {low}" if low == high else f"in [{low}, {high})"


def _quantile_bin(power: dict, q: float) -> tuple:
    """The bin [low, high) of the draw's histogram where its ``q`` quantile lies."""
    cumulative = np.cumsum(power["time"])
    index = min(int(np.searchsorted(cumulative, q * cumulative[-1], side="left")), len(power["time"]) - 1)
    return float(power["edges"][index]), float(power["edges"][index + 1])


def _launch_text(spec, shown) -> str:
    """How every draw starts (the file's ``[launch]``, docs/model.md §1f), for the report."""
    launch = spec.launch
    text = "a random launch"
    if launch.mode == "together":
        text = "a launch with every job at the start of its compute"
    elif launch.mode == "staggered":
        text = f"a staggered launch (job k starts k × {shown(launch.stagger)} after job 0)"
    return text + (", the failures of the file's failure_trace replayed" if spec.failure_trace is not None else "")


def _assess(args) -> int:
    import jax

    from .. import __version__
    from .._plan import check_horizon_events, check_work, largest_count
    from ..assess import assess, timeline
    from . import _assess_figures as figures

    spec, settings = args.spec, args.settings
    report_devices("assess", args.device_info, devices_inside(args.device_info))
    unit = settings["time_unit"]
    print(
        f"ckpt-jax assess: {spec.n_jobs} jobs to H = {duration_text(settings['horizon'], unit)}: about "
        f"{spec.events(settings['horizon']):.2g} events per run (each O(N)), {settings['draws']} draws"
    )
    fleet = spec.fleet(dtype=np.float64 if args.x64 else np.float32)
    # The event budget (a limit), then the work of the draws and the timeline's run (unless --force).
    check_horizon_events(fleet, settings["horizon"], name="horizon")
    check_work(
        fleet.events(settings["horizon"]),
        spec.n_jobs,
        settings["draws"] + 1 + fleet.has_outages,  # the draws, the timeline, the outages' storm
        force=args.force,
        size=largest_count(spec),
    )
    groups = {name: [int(i) for i in np.flatnonzero(spec.labels == g)] for g, name in enumerate(spec.names)}
    key = seed_key(settings["seed"])
    started = time.perf_counter()
    common = dict(
        hours_per_time_unit=settings["hours_per_time_unit"],
        gpu_power=settings["gpu_power"],
        launch=spec.launch_of(),  # the file's [launch] (docs/model.md §1f)
    )
    result = assess(
        fleet,
        horizon=settings["horizon"],
        key=key,
        n_draws=settings["draws"],
        groups=groups,
        progress=None if not args.no_progress else False,
        **common,
    )
    wall_s = time.perf_counter() - started
    # The numbers first: a timeline or a figure that fails costs that figure, never the assessment.
    try:
        one_fleet = timeline(fleet, span=settings["timeline_span"], key=key, **common)
    except ValueError as err:
        one_fleet = None
        print(f"ckpt-jax assess: warning: timeline.png not drawn: {err}")
    figures_made = {
        "losses.png": lambda: figures.losses_figure(result),
        "timeline.png": None
        if one_fleet is None
        else lambda: figures.timeline_figure(one_fleet, result.saturation_writers),
        "writers.png": lambda: figures.writers_figure(result, throughput=np.asarray(fleet.throughput, np.float64)),
    }

    summary = {
        "command": "assess",
        "version": __version__,
        "fleet": spec.to_dict(),
        "settings": settings,
        "keys": {"seed": SEED_KEY_TEXT, "draws": "split(key(seed), draws)", "timeline": "the first draw's key"},
        **result.to_json(),
        "gpus": result.gpus,
        "wall_time_s": wall_s,
        "backend": jax.default_backend(),
        "python": platform.python_version(),
        "jax": jax.__version__,
        "files": [name for name in FILES if figures_made.get(name, True) is not None],
    }
    if fleet.has_outages:  # the storm after each outage, over one run to H (docs/model.md §1f)
        summary["outage_storms"] = _storms_summary(fleet, settings["horizon"], key, spec.domains)
    out = Path(args.out)
    _write_outputs(out, spec, result, summary, figures_made)

    for line in headline(summary):
        print(f"ckpt-jax assess: {line}")
    per_group = "; ".join(f"{name} {_goodput_text(summary['goodput'][name])}" for name in spec.names)
    print(f"ckpt-jax assess: goodput per group: {per_group}")
    print(f"ckpt-jax assess: {wall_s:.1f} s -> {out}")
    return 0


STORM_CYCLES = 8  # the cycles after each outage whose writer-count peak the report gives


def _storms_summary(fleet, horizon: float, key, names) -> dict:
    """`ckpt_jax.assess.outage_storms` of one run to H, as plain data (NaN as None)."""
    from ..assess import outage_storms

    storms = outage_storms(fleet, span=horizon, key=key, n_cycles=STORM_CYCLES)
    plain = lambda x: None if not math.isfinite(x) else float(x)  # noqa: E731
    rows = [
        {
            "time": float(t),
            "domain": names[int(d)],
            "peak_before": plain(b),
            "peaks": [plain(p) for p in peaks],
            "storm_cycles": int(c),
            "recovered": bool(r),
        }
        for t, d, b, peaks, c, r in zip(
            storms.times, storms.domains, storms.before, storms.peaks, storms.storm_cycles, storms.recovered
        )
    ]
    return {"period": storms.period, "n_cycles": STORM_CYCLES, "outages": rows}


def _storm_lines(summary: dict) -> list:
    """The report's section on the storm after outages, where the fleet has outages."""
    storms = summary.get("outage_storms")
    if storms is None:
        return []
    unit = summary["settings"]["time_unit"]
    rows = storms["outages"]
    lines = [
        "",
        "## The checkpoint storm after outages",
        "",
        f"One run to H from the first draw's launch: {len(rows)} outages. Per outage the peak of concurrent "
        f"writers over the cycle before it and over each of the {storms['n_cycles']} cycles after it (a cycle "
        f"is the longest solo period, {duration_text(storms['period'], unit)}), and the cycles in a row above "
        "the peak before it (the storm).",
    ]
    if not rows:
        return lines
    stormy = [row for row in rows if row["storm_cycles"] > 0]
    lasting = sum(not row["recovered"] for row in rows)
    lines += [
        "",
        f"- {len(stormy)} of {len(rows)} outages raise the writer peak above the one before them"
        + (
            f"; {lasting} of them keep it there for all {storms['n_cycles']} cycles."
            if lasting
            else (
                f"; back below within {max(row['storm_cycles'] for row in stormy)} cycles at most." if stormy else "."
            )
        ),
        "",
        "| outage at | domain | peak before | peaks per cycle after | storm cycles |",
        "|---|---|---|---|---|",
    ]
    show = lambda x: "–" if x is None else f"{x:.0f}"  # noqa: E731
    for row in rows[:10]:
        storm = f"{row['storm_cycles']}" + ("" if row["recovered"] else "+")
        lines.append(
            f"| {duration_text(row['time'], unit)} | {markdown_text(row['domain'])} | {show(row['peak_before'])} | "
            f"{' '.join(show(p) for p in row['peaks'])} | {storm} |"
        )
    if len(rows) > 10:
        lines.append(f"\nThe first 10 of {len(rows)}; assess.json has them all.")
    return lines


def _write_outputs(out: Path, spec, result, summary: dict, figures_made: dict) -> None:
    """Write assess.zarr (where xarray and zarr are installed), assess.json and report.md,
    then the figures; a figure that fails is a warning, left out of ``summary["files"]``."""
    from .. import labelled
    from .._io import atomic_write, atomic_write_bytes
    from ._design_figures import close

    settings = summary["settings"]
    zarr_missing = labelled.zarr_missing()
    if zarr_missing is None:
        labelled.remove_zarr_strays(out / ZARR)
        attrs = {"command": "assess", "fleet_file": str(spec.path), "seed": settings["seed"]}
        attrs["horizon_unit"] = "s" if settings["time_unit"] is not None else "h"  # the engine's time
        out.mkdir(parents=True, exist_ok=True)
        labelled.write_zarr(result.to_xarray(attrs=attrs), out / ZARR)
        summary["files"] = [*summary["files"], ZARR]
    else:
        print(f"ckpt-jax assess: {ZARR} not written: {zarr_missing}")
        if (out / ZARR).is_dir() and not (out / ZARR).is_symlink():
            shutil.rmtree(out / ZARR)  # an earlier run's: it would not describe this one
    write_json = lambda: atomic_write_bytes(out / "assess.json", (json.dumps(summary, indent=2) + "\n").encode())  # noqa: E731
    write_json()
    atomic_write_bytes(out / "report.md", _report(spec, summary).encode())
    failed = []
    for name, make in figures_made.items():
        if make is None:
            (out / name).unlink(missing_ok=True)  # an earlier run's: it would not describe this one
            continue
        try:
            figure = make()
            try:
                atomic_write(out / name, lambda handle, figure=figure: figure.savefig(handle, format="png", dpi=120))
            finally:
                close(figure)
        except Exception as err:  # noqa: BLE001 - a figure never costs the numbers written above
            failed.append(name)
            print(
                f"ckpt-jax assess: warning: {name} not drawn ({type(err).__name__}: {err}); the numbers are in "
                "assess.json and report.md"
            )
    if failed:  # assess.json and report.md list only the files written
        summary["files"] = [name for name in summary["files"] if name not in failed]
        write_json()
        atomic_write_bytes(out / "report.md", _report(spec, summary).encode())
