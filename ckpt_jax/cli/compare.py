"""``ckpt-jax compare FLEET.toml --set KEY=VALUE --out DIR``: what-if scenarios of a fleet file
against it as it is, on common draws (`ckpt_jax.assess.compare`), a sweep of one key, or the
sensitivity of the fleet's goodput to each continuous knob (`ckpt_jax.assess.sensitivity`), with
a report, figures and ``compare.json``."""

from __future__ import annotations

import contextlib
import json
import math
import platform
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from ._common import (
    SEED_KEY_TEXT,
    CliError,
    add_devices,
    add_x64,
    devices_inside,
    integer,
    report_devices,
    seed_key,
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
    run_horizon,
)
from .assess import duration_text, power_text
from .design import markdown_text, note_lines

DRAWS = 32  # per scenario: the differences are paired, so fewer draws than assess's 64 resolve them
QUICK = {"draws": 8}  # and the horizon capped (`_options.run_horizon`)
STEP = 0.1  # --sensitivity: ±10 %

SET_HELP = (
    "KEY=VALUE: one override of the fleet file, by its own key (storage.peak='4 TB/s', "
    "groups[\"8B fine-tune\"].snapshot='10 s', groups[*].interval='20 min', groups[*].overhead='30 s', "
    "restart='2 min' for every group); repeat for more; together they make one scenario"
)


def add_compare(subparsers) -> None:
    parser = subparsers.add_parser(
        "compare",
        help="what-if scenarios of a fleet file, a sweep of one key, or the knobs that matter",
        description=(
            "Run FLEET.toml as it is and with some of its keys set to other values (--set, --scenario), "
            "or one key at several values (--sweep), or every continuous knob at ±10 %% (--sensitivity), "
            "all on the same failure draws (common random numbers): every difference against the file as it "
            "is is paired draw by draw, with its 95 %% CI. Overrides are parsed and checked exactly as the "
            "file (units, ranges), before anything runs. Writes compare.json, report.md and figures into "
            "--out; each finished scenario is kept in --out/scenarios, so a rerun resumes."
        ),
    )
    parser.add_argument("fleet_file", type=Path, metavar="FLEET.toml", help="the fleet file (see examples/)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", dest="sets", help=SET_HELP)
    parser.add_argument(
        "--scenario",
        action="append",
        default=[],
        metavar="NAME:KEY=VALUE,...",
        dest="scenarios",
        help="a named scenario of overrides separated by commas (repeatable)",
    )
    parser.add_argument(
        "--sweep",
        metavar="KEY=V1,V2,...",
        default=None,
        help="one key at several values (units allowed): goodput and GPU-hours per day against the value",
    )
    parser.add_argument(
        "--sensitivity",
        action="store_true",
        help="the elasticity of the fleet's goodput to each continuous knob, by paired ±10 %% changes",
    )
    add_horizon(parser, HORIZON_FROM_FILE)
    parser.add_argument(
        "--draws",
        type=integer(2, 100_000),
        default=None,
        metavar="S",
        help=f"failure draws per scenario, common to every scenario (default: {DRAWS})",
    )
    add_seed(parser, default=None)
    add_quick(parser, f"{QUICK['draws']} draws, {QUICK_HORIZON_TEXT}; options given win")
    add_no_progress(parser)
    add_floor(parser)
    add_force(parser)
    add_devices(parser, shards=False, inside=True)
    add_x64(parser)
    add_out(parser)
    parser.set_defaults(run=_compare, check=_check, resumes=True)


# -- the scenarios from the options -------------------------------------------------------


def split_top_level(text: str, separator: str = ",") -> list:
    """``text`` split at each ``separator`` outside quotes and brackets (a value may be a
    list, a group key may hold a quoted name)."""
    parts, depth, quote, current = [], 0, None, []
    for char in text:
        if quote is not None:
            quote = None if char == quote else quote
        elif char in "\"'":
            quote = char
        elif char in "[(":
            depth += 1
        elif char in "])":
            depth = max(depth - 1, 0)
        elif char == separator and depth == 0:
            parts.append("".join(current).strip())
            current = []
            continue
        current.append(char)
    parts.append("".join(current).strip())
    return parts


def _overrides(texts, where: str) -> dict:
    from ..fleetfile import parse_override

    overrides = {}
    for text in texts:
        try:
            key, value = parse_override(text)
        except ValueError as err:
            raise CliError(f"{where}: {err}") from None
        if key in overrides:  # the later would win unseen
            raise CliError(f"{where}: {key} is set twice ({key}={overrides[key]!r} and {text!r}): give it once")
        overrides[key] = value
    return overrides


def scenarios_from(args) -> tuple:
    """(mode, scenarios, sweep): ``"sensitivity"``, ``"sweep"`` or ``"scenarios"``; name ->
    overrides; for a sweep (key, [value text]) else None."""
    given = bool(args.sets or args.scenarios)
    if sum([given, args.sweep is not None, args.sensitivity]) != 1:
        raise CliError("give scenarios (--set, --scenario), or --sweep, or --sensitivity: one of the three")
    if args.sensitivity:
        return "sensitivity", {}, None
    if args.sweep is not None:
        key, equals, values = args.sweep.partition("=")
        texts = split_top_level(values) if equals else []
        if not key.strip() or len(texts) < 1 or not all(texts):
            raise CliError(f"argument --sweep: must be KEY=V1,V2,... with at least two values, got {args.sweep!r}")
        key = key.strip()
        if len(texts) < 2:
            raise CliError(f"argument --sweep: {key} needs at least two values (for one, use --set {args.sweep})")
        if _numeric(texts) is None:
            raise CliError(
                f"argument --sweep: {key}: every value must be a number or a quantity with its unit (a sweep is "
                f"drawn against the value), got {', '.join(texts)}; compare other values with --scenario NAME:{key}=..."
            )
        scenarios = {f"{key}={text}": _overrides([f"{key}={text}"], "argument --sweep") for text in texts}
        if len(scenarios) != len(texts):
            raise CliError(f"argument --sweep: a value is given twice in {args.sweep!r}")
        return "sweep", scenarios, (key, texts)
    scenarios = {}
    if args.sets:
        scenarios[" ".join(args.sets)] = _overrides(args.sets, "argument --set")
    for text in args.scenarios:
        name, colon, body = text.partition(":")
        if not colon or not name.strip() or not body.strip():
            raise CliError(f"argument --scenario: must be NAME:KEY=VALUE,KEY=VALUE,..., got {text!r}")
        name = name.strip()
        if not name.isprintable():
            raise CliError(f"argument --scenario: the name {name!r} holds a control character (a newline, a tab)")
        if name in scenarios or name == "baseline":
            raise CliError(f"argument --scenario: the name {name!r} is taken (baseline, or given twice)")
        scenarios[name] = _overrides(split_top_level(body), f"argument --scenario {name}")
    return "scenarios", scenarios, None


def _check(args) -> None:
    from ..assess import check_scenario_keys, sensitivity_knobs
    from ..fleetfile import dumps, load

    try:
        import xarray  # noqa: F401  (the comparison is an xarray.Dataset)
    except ImportError:
        raise CliError('compare needs xarray: pip install "ckpt_jax[xarray]"') from None
    args.spec = load(args.fleet_file, dtype=np.float64 if args.x64 else np.float32)
    if "fleet" in args.spec.names:
        index = args.spec.names.index("fleet")
        raise CliError(
            f"fleet file {args.fleet_file}: groups[{index}].name 'fleet' is reserved for the whole fleet: rename it"
        )
    args.mode, args.scenario_overrides, args.sweep_values = scenarios_from(args)
    _check_out_paths(Path(args.out))
    if args.mode == "sensitivity":
        knobs = sensitivity_knobs(args.spec, STEP)
        for knob, (up, down) in knobs.items():
            args.scenario_overrides[f"{knob} +{100 * STEP:g}%"] = up
            args.scenario_overrides[f"{knob} -{100 * STEP:g}%"] = down
    seen, args.scenario_specs = {}, {"baseline": args.spec}
    for name, overrides in args.scenario_overrides.items():  # every override, as the file: before any run
        try:
            check_scenario_keys(name, overrides)
        except ValueError as err:
            raise CliError(str(err)) from None
        args.scenario_specs[name] = args.spec.override(overrides, name=name)
        text = dumps(args.scenario_specs[name])
        if args.mode == "sweep" and text in seen:  # "1 min" and "60 s": the same run twice
            raise CliError(f"argument --sweep: {seen[text]} and {name} are the same value")
        seen[text] = name
    horizon = run_horizon(args.horizon, args.spec, args.quick)
    args.settings = {
        "mode": args.mode,
        "draws": args.draws if args.draws is not None else (QUICK["draws"] if args.quick else DRAWS),
        "horizon": horizon,
        "time_unit": args.spec.time_unit,
        "hours_per_time_unit": 1 / 3600 if args.spec.time_unit is not None else 1.0,
        "seed": args.seed if args.seed is not None else args.spec.design.seed,
        "quick": args.quick,
        "floor": args.floor,
    }
    if args.mode == "sensitivity":
        args.settings["step"] = STEP


def _check_out_paths(out: Path) -> None:
    """What the run writes in ``out``, checked before it runs: the scenarios' store must be a
    folder, each output a regular file (a folder or a FIFO there would fail only at the end)."""
    from ..assess import SCENARIO_DIR

    store = out / SCENARIO_DIR
    if store.exists() and not store.is_dir():
        raise CliError(f"--out {out}: {store} is not a folder (the finished scenarios are kept there): move it")
    for name in ("compare.json", "report.md", "gains.png", "sweep.png", "tornado.png"):
        path = out / name
        if path.exists() and not path.is_file():
            raise CliError(f"--out {out}: {path} is not a regular file (it would be replaced): move it")


# -- running ------------------------------------------------------------------------------


def _compare(args) -> int:
    import jax

    from .. import __version__
    from .._plan import check_horizon_events, check_work, largest_count
    from ..assess import compare, sensitivity
    from ..ensemble import LOCK, EnsembleBusyError, locked

    spec, settings = args.spec, args.settings
    report_devices("compare", args.device_info, devices_inside(args.device_info))
    n_runs = 1 + len(args.scenario_overrides)
    unit = settings["time_unit"]
    print(
        f"ckpt-jax compare: {n_runs} scenarios (the baseline first) of {spec.n_jobs} jobs to H = "
        f"{duration_text(settings['horizon'], unit)}, {settings['draws']} common draws each"
    )
    # Every scenario's events, not the baseline's alone: a scenario may shorten an interval to
    # seconds or multiply a count. The budget is checked on the heaviest, as if every run were it.
    heaviest, heaviest_name, heaviest_events, most = spec, "baseline", 0.0, -1.0
    for name, scenario in args.scenario_specs.items():
        fleet = scenario.fleet(dtype=np.float64 if args.x64 else np.float32)
        try:
            check_horizon_events(fleet, settings["horizon"], name="horizon")
        except ValueError as err:
            raise CliError(f"scenario {name!r}: {err}") from None
        events = float(fleet.events(settings["horizon"]))
        if events * scenario.n_jobs > most:
            heaviest, heaviest_name, heaviest_events, most = scenario, name, events, events * scenario.n_jobs
    check_work(
        heaviest_events,
        heaviest.n_jobs,
        settings["draws"] * n_runs,
        force=args.force,
        size=f"scenario {heaviest_name!r}: {largest_count(heaviest)}",
    )
    common = dict(
        key=seed_key(settings["seed"]),
        horizon=settings["horizon"],
        n_draws=settings["draws"],
        out=args.out,
        progress=not args.no_progress,
        floor=settings["floor"],
    )
    out = Path(args.out)
    with contextlib.ExitStack() as held:  # the scenarios' store and the files written from them, one run at a time
        try:
            held.enter_context(locked(out))
        except EnsembleBusyError as err:
            raise CliError(
                f"--out {out} is in use by another run (it holds {out / LOCK}); wait for it to finish, or use "
                "another --out"
            ) from err
        started = time.perf_counter()
        if args.mode == "sensitivity":
            ds = sensitivity(spec, step=STEP, **common)
        else:
            ds = compare(spec, args.scenario_overrides, **common)
        wall_s = time.perf_counter() - started
        reused = json.loads(ds.attrs["reused"])
        if reused:
            print(f"ckpt-jax compare: {len(reused)} finished scenarios reused from {out / 'scenarios'}")
        summary = {
            "command": "compare",
            "version": __version__,
            "fleet": spec.to_dict(),
            "settings": settings,
            "keys": {"seed": SEED_KEY_TEXT, "draws": "split(key(seed), draws), the same for every scenario"},
            **summary_json(ds),
            "wall_time_s": wall_s,
            "backend": jax.default_backend(),
            "python": platform.python_version(),
            "jax": jax.__version__,
        }
        if args.sweep_values is not None:
            summary["sweep"] = {"key": args.sweep_values[0], "values": args.sweep_values[1]}
        if args.mode == "sensitivity":
            from ..assess import sensitivity_left_out

            summary["left_out"] = sensitivity_left_out(spec)
        _write_outputs(out, spec, ds, summary)
    for line in headlines(summary):
        print(f"ckpt-jax compare: {plain_markdown(line)}")
    print(f"ckpt-jax compare: {plain_markdown(verdict(summary))}")
    for knob, why in summary.get("left_out", {}).items():
        print(f"ckpt-jax compare: left out {knob}, as {why}")
    print(f"ckpt-jax compare: {wall_s:.1f} s -> {out}")
    return 0


# -- compare.json -------------------------------------------------------------------------


def _estimate(values) -> dict | None:
    mean, low, high = (float(x) for x in values)
    if not math.isfinite(mean):
        return None
    number = lambda x: x if math.isfinite(x) else None  # noqa: E731
    return {"mean": mean, "low": number(low), "high": number(high)}


def _by_group(ds, variable: str, scenario: str) -> dict:
    """``{"fleet": estimate, "groups": [{"name", "mean", "low", "high"}]}`` (assess's goodput shape)."""
    table = ds[variable].sel(scenario=scenario)
    groups = [{"name": str(name), **(_estimate(table.sel(group=name).values) or {})} for name in ds.group.values[:-1]]
    return {"fleet": _estimate(table.sel(group="fleet").values), "groups": groups}


def _number(value) -> float | None:
    """A 0-d value as a float; null where not observed (NaN)."""
    value = float(value)
    return value if math.isfinite(value) else None


def summary_json(ds) -> dict:
    """compare.json's numbers from `ckpt_jax.assess.compare`'s (or ``sensitivity``'s) dataset."""
    scenarios = []
    for name in ds.scenario.values:
        name = str(name)
        entry = {
            "name": name,
            "overrides": json.loads(str(ds["overrides"].sel(scenario=name).values)),
            "goodput": _by_group(ds, "goodput", name),
            "gpu_hours_per_day": _by_group(ds, "gpu_hours_per_day", name),
            "power_step": _estimate(ds["power_step"].sel(scenario=name).values),
            "power_step_max": _number(ds["power_step_max"].sel(scenario=name).values),
            "writers_peak": _estimate(ds["writers_peak"].sel(scenario=name).values),
        }
        if name != ds.attrs["baseline"]:
            entry["difference"] = {
                "goodput": _by_group(ds, "goodput_difference", name),
                "gpu_hours_per_day": _by_group(ds, "gpu_hours_per_day_difference", name),
                "power_step": _estimate(ds["power_step_difference"].sel(scenario=name).values),
                "writers_peak": _estimate(ds["writers_peak_difference"].sel(scenario=name).values),
            }
            entry["outside_noise"] = {
                "goodput": bool(ds["goodput_significant"].sel(scenario=name, group="fleet")),
                "groups": [bool(x) for x in ds["goodput_significant"].sel(scenario=name).values[:-1]],
                "gpu_hours_per_day": {
                    "fleet": bool(ds["gpu_hours_per_day_significant"].sel(scenario=name, group="fleet")),
                    "groups": [bool(x) for x in ds["gpu_hours_per_day_significant"].sel(scenario=name).values[:-1]],
                },
                "power_step": bool(ds["power_step_significant"].sel(scenario=name)),
                "writers_peak": bool(ds["writers_peak_significant"].sel(scenario=name)),
            }
        if "same_configuration" in ds:
            entry["same_configuration"] = bool(ds["same_configuration"].sel(scenario=name))
            entry["one_draw"] = bool(ds["one_draw"].sel(scenario=name))
        scenarios.append(entry)
    summary = {
        "baseline": ds.attrs["baseline"],
        "n_draws": ds.attrs["n_draws"],
        "horizon_hours": ds.attrs["horizon_hours"],
        "power_unit": ds.attrs["power_unit"],
        "floor": ds.attrs.get("floor"),
        "floor_gpu_hours_per_day": ds.attrs.get("floor_gpu_hours_per_day"),
        "gpus": {str(g): float(x) for g, x in zip(ds.group.values, ds["gpus"].values[0])},
        "scenarios": scenarios,
    }
    if "knob" in ds.dims:
        summary["sensitivity"] = [
            {
                "knob": str(knob),
                "step": ds.attrs["step"],
                "elasticity": _estimate(ds["elasticity"].sel(knob=knob).values),
                "gpu_hours_per_day_up": _estimate(ds["gpu_hours_per_day_up"].sel(knob=knob).values),
                "gpu_hours_per_day_down": _estimate(ds["gpu_hours_per_day_down"].sel(knob=knob).values),
                "overrides_up": json.loads(str(ds["knob_overrides"].sel(knob=knob).values)),
                "outside_noise": {
                    "elasticity": bool(ds["elasticity_significant"].sel(knob=knob)),
                    "gpu_hours_per_day_up": bool(ds["gpu_hours_per_day_up_significant"].sel(knob=knob)),
                    "gpu_hours_per_day_down": bool(ds["gpu_hours_per_day_down_significant"].sel(knob=knob)),
                },
            }
            for knob in ds.knob.values
        ]
    return summary


# -- the report ---------------------------------------------------------------------------


def _amount(value: float | None) -> str:
    if value is None:
        return "n/a"
    if value == 0:
        return "0"
    if abs(value) < 0.005:  # a small fleet's: not "0", which would read as no change
        return f"{value:.2g}"
    return f"{value:,.0f}" if abs(value) >= 99.5 else f"{value:.3g}"


def _signed(value: float | None, shown=_amount) -> str:
    if value is None:
        return "n/a"
    text = shown(value)
    if value == 0:
        return text  # "0 W", not "+0 W"
    return text if text.startswith("-") or text == "0" else f"+{text}"


def _with_ci(estimate: dict | None, shown=_amount, signed: bool = False) -> str:
    """An estimate and its 95 % CI ("+1,234 [+1,001, +1,467]"); "not observed" for none."""
    if estimate is None:
        return "not observed"
    text = (lambda x: _signed(x, shown)) if signed else (lambda x: "n/a" if x is None else shown(x))  # noqa: E731
    if estimate["low"] is None and estimate["high"] is None and estimate["mean"] is not None:
        return f"{text(estimate['mean'])} (one draw)"  # every draw the same: no interval
    return f"{text(estimate['mean'])} [{text(estimate['low'])}, {text(estimate['high'])}]"


def _negated(estimate: dict) -> dict:
    negate = lambda x: None if x is None else -x  # noqa: E731
    return {"mean": -estimate["mean"], "low": negate(estimate["high"]), "high": negate(estimate["low"])}


def _points(value: float | None) -> str:
    """A goodput difference in percentage points: three significant digits from 1 point up,
    else three decimals ("0.037"), or two significant digits below that ("0.00015")."""
    if value is None:
        return "n/a"
    if value == 0:
        return "0"
    points = 100 * value
    if abs(points) < 0.0005:  # beyond three decimals: "-0.00015", not "-0.000" nor "9.1e-05"
        return f"{points:.{1 - math.floor(math.log10(abs(points)))}f}"
    return f"{points:.3g}" if abs(points) >= 1 else f"{points:.3f}"


def _three(value: float) -> str:
    return f"{value:.3g}"


def _percent(value: float | None) -> str:
    return "n/a" if value is None else f"{100 * value:.2f} %"


OUTSIDE = "outside the noise"


def _noise(estimate: dict | None, outside: bool | None = None, one_draw: bool = False) -> str:
    """How a difference reads: ``outside`` is `ckpt_jax.assess.compare`'s verdict (its CI
    excludes 0 and it exceeds the floor; None: the CI alone); ``one_draw``: every draw the
    same (no interval, the difference exact)."""
    if estimate is None or estimate.get("mean") is None:
        return "not resolved"
    if one_draw:
        return "one draw: every draw the same" + ("" if outside else ", below the floor")
    if estimate["low"] is None or estimate["high"] is None:
        return "not resolved"
    excludes = estimate["low"] > 0 or estimate["high"] < 0
    if outside is None:
        outside = excludes
    if outside:
        return OUTSIDE
    return "within the noise: below the floor" if excludes else "within the noise"


def _counts(word: str) -> bool:
    """Whether a `_noise` word makes a difference an effect (a gain or a loss)."""
    return word == OUTSIDE or word == "one draw: every draw the same"


def _overrides_text(overrides: dict) -> str:
    return ", ".join(
        f"{key}={json.dumps(value) if not isinstance(value, str) else value}" for key, value in overrides.items()
    )


def plain_markdown(line: str) -> str:
    return line.replace("**", "").replace("`", "")


def headlines(summary: dict, show: Callable[[str], str] = str) -> list:
    """One line per scenario (or per knob, ranked): what it gains or loses against the baseline;
    ``show`` writes a name (`markdown_text` for the report)."""
    if "sensitivity" in summary:
        return [_knob_sentence(row, show) for row in summary["sensitivity"]]
    lines = []
    base = summary["scenarios"][0]
    for entry in summary["scenarios"][1:]:
        hours = entry["difference"]["gpu_hours_per_day"]["fleet"]
        against = (
            f"**{show(entry['name'])}**: fleet goodput {_percent(entry['goodput']['fleet']['mean'])} against "
            f"{_percent(base['goodput']['fleet']['mean'])}"
        )
        if entry.get("same_configuration"):
            lines.append(f"{against}; the same: the baseline's configuration, the same run")
            continue
        if _the_same(entry):
            lines.append(f"{against}; the same saved work as the baseline on every draw")
            continue
        word = _fleet_noise(entry)
        if entry.get("one_draw"):
            lines.append(f"{against}; saved work {_signed(hours['mean'])} GPU-hours per day ({word})")
            continue
        lines.append(f"{against}; saved work {_with_ci(hours, signed=True)} GPU-hours per day ({word})")
    return lines


def _the_same(entry: dict) -> bool:
    """Whether a scenario is the baseline's configuration, or saves the same work on every draw."""
    hours = entry["difference"]["gpu_hours_per_day"]["fleet"]
    zero = hours is not None and hours["mean"] == 0 and hours["low"] in (0, None) and hours["high"] in (0, None)
    return bool(entry.get("same_configuration")) or zero


def _fleet_noise(entry: dict) -> str:
    """How a scenario's difference in the fleet's saved work reads (`_noise`)."""
    hours = entry["difference"]["gpu_hours_per_day"]["fleet"]
    flags = entry.get("outside_noise", {}).get("gpu_hours_per_day")
    return _noise(hours, None if flags is None else flags["fleet"], entry.get("one_draw", False))


def verdict(summary: dict, show: Callable[[str], str] = str) -> str:
    """One sentence: which scenarios (or knobs) move the fleet's saved work beyond the noise."""
    same = []
    if "sensitivity" in summary:
        rows = [
            (row["knob"], row["elasticity"], _noise(row["elasticity"], row.get("outside_noise", {}).get("elasticity")))
            for row in summary["sensitivity"]
        ]
        what = "Knobs"
    else:
        rows = [
            (e["name"], e["difference"]["gpu_hours_per_day"]["fleet"], _fleet_noise(e))
            for e in summary["scenarios"][1:]
            if not _the_same(e)
        ]
        same = [e["name"] for e in summary["scenarios"][1:] if _the_same(e)]
        what = "Scenarios"
    gain = [name for name, estimate, word in rows if _counts(word) and estimate["mean"] > 0]
    lose = [name for name, estimate, word in rows if _counts(word) and estimate["mean"] < 0]
    within = [name for name, estimate, word in rows if not _counts(word)]
    if "sensitivity" in summary:
        parts = [f"{what} whose increase raises the fleet's goodput beyond the noise: {_names(gain, show)}"]
        parts.append(f"lowers it: {_names(lose, show)}")
    else:
        parts = [f"{what} that gain saved work beyond the noise: {_names(gain, show)}"]
        parts.append(f"that lose: {_names(lose, show)}")
    parts.append(f"within the noise: {_names(within, show)}")
    if same:
        parts.append(f"the same as the baseline: {_names(same, show)}")
    return "; ".join(parts) + "."


def _names(names: list, show: Callable[[str], str] = str) -> str:
    return ", ".join(f"**{show(name)}**" for name in names) if names else "none"


# The words of a knob's larger and smaller value.
_WORDS = {
    "interval": ("longer", "shorter"),
    "restart": ("longer", "shorter"),
    "snapshot": ("longer", "shorter"),
    "overhead": ("longer", "shorter"),
    "MTBF": ("longer", "shorter"),
    "outage MTBF": ("longer", "shorter"),
    "power cap": ("higher", "lower"),
}


def _knob_sentence(row: dict, show: Callable[[str], str] = str) -> str:
    """ "a 10 % larger storage peak buys 1,234 [1,001, 1,467] GPU-hours per day", in the
    direction that gains (or loses least)."""
    knob, step = row["knob"], f"{100 * row['step']:g} %"
    larger, smaller = next((words for name, words in _WORDS.items() if knob.startswith(name)), ("larger", "smaller"))
    up, down = row["gpu_hours_per_day_up"], row["gpu_hours_per_day_down"]
    up_mean = -math.inf if up is None else up["mean"]
    down_mean = -math.inf if down is None else down["mean"]
    word, change = (larger, up) if up_mean >= down_mean else (smaller, down)
    # The knob's one verdict is its elasticity's (the central difference, as the ranking and the
    # summary line take it); the one-sided change beside it is what a 10 % step buys.
    flag = row.get("outside_noise", {}).get("elasticity")
    elasticity = _with_ci(row["elasticity"], lambda x: f"{x:.3g}", signed=True)
    if change is None:
        return f"{show(knob)}: not resolved; elasticity {elasticity}"
    if all(x is not None and x["mean"] == 0 and x["low"] in (0, None) and x["high"] in (0, None) for x in (up, down)):
        return f"{show(knob)} at ±{step}: the same saved work as the baseline on every draw"
    return (
        f"a {step} {word} {show(knob)}: saved work {_with_ci(change, signed=True)} GPU-hours per day; "
        f"elasticity {elasticity} ({_noise(row['elasticity'], flag)})"
    )


def _report(spec, summary: dict) -> str:
    md = markdown_text
    settings = summary["settings"]
    unit = settings["time_unit"]
    title = {"sensitivity": "Sensitivity", "sweep": f"Sweep of {summary.get('sweep', {}).get('key')}"}
    lines = [f"# {md(title.get(settings['mode'], 'What-if comparison'))} of {md(spec.path)}", ""]
    lines += [verdict(summary, md), ""]
    lines += [f"- {line}" for line in headlines(summary, md)]
    lines += note_lines(spec)
    names = [group["name"] for group in summary["scenarios"][0]["goodput"]["groups"]]
    lines += [
        "",
        f"{spec.n_jobs} jobs in {len(names)} groups ({summary['gpus']['fleet']:,.0f} GPUs), each scenario simulated "
        f"over H = {duration_text(settings['horizon'], unit)} ({summary['horizon_hours']:,.4g} h) on the same "
        f"{summary['n_draws']} failure draws (seed {settings['seed']}; {summary['wall_time_s']:.0f} s): the same "
        "failure stream of every job in every scenario, and the same random launch drawn in work coordinates (a "
        "job a scenario leaves as it is starts with the same work left; common random numbers). Each difference is "
        "the scenario less the baseline (the file as it is), in the lines above and in the tables alike: + the "
        "scenario saves more work (draws a larger power step, has more writers), - less. It is the mean of the "
        "per-draw differences with its 95% CI; *outside the noise* means that CI excludes 0 and the difference "
        f"exceeds the practical floor, {_floor_text(summary)}. GPU-hours per day count saved work: goodput × GPUs × "
        "24.",
    ]
    if any(entry.get("one_draw") for entry in summary["scenarios"]):
        lines += [
            "",
            "Every draw is the same (a replayed failure trace and a fixed launch: nothing is drawn at random), so the "
            "draws are one draw: its numbers have no interval, and a difference is exact, an effect where it "
            "exceeds the floor.",
        ]
    if unit is None:
        lines += ["", "The file has plain numbers: its times are taken as hours."]
    if "sensitivity" in summary:  # the ranking first; its runs' tables after it
        lines += _sensitivity_table(summary)
        for knob, why in summary.get("left_out", {}).items():  # a knob with no effect on this file
            lines += ["", f"Left out: {md(knob)}, as {md(why)}."]
    lines += _scenario_table(summary)
    lines += _group_table(summary, names)
    figures = {
        "gains.png": "the GPU-hours of saved work per day each scenario gains against the baseline, fleet and per "
        "group, with 95% CIs of the paired differences.",
        "sweep.png": "the fleet's goodput and the GPU-hours per day gained against the swept value, with 95% CI bands.",
        "tornado.png": "each knob's GPU-hours per day gained at ±10 %, ranked, with 95% CIs.",
    }
    lines += ["", "## Figures", ""]
    lines += [f"- `{name}`: {text}" for name, text in figures.items() if name in summary.get("files", [])]
    return "\n".join(lines) + "\n"


def _floor_text(summary: dict) -> str:
    """The practical floor, as the report states it."""
    floor, hours = summary.get("floor"), summary.get("floor_gpu_hours_per_day")
    if floor is None or hours is None:
        return "none"
    return f"{100 * floor:g} % of the fleet's GPU time ({_amount(hours)} GPU-hours per day; --floor)"


def _scenario_table(summary: dict) -> list:
    unit = summary["power_unit"]
    power = lambda x: power_text(x, unit)  # noqa: E731
    lines = [
        "",
        "## Scenarios",
        "",
        "| scenario | overrides | fleet goodput | change (points) | GPU-h/day gained | power step (mean; max) | "
        "change | writer peak | change |",
        "|---" * 9 + "|",
    ]
    for entry in summary["scenarios"]:
        base = "difference" not in entry
        diff = {} if base else entry["difference"]
        flags = entry.get("outside_noise", {})
        mark = lambda flag, base=base: " *" if not base and flag else ""  # noqa: E731
        cells = [
            f"**{markdown_text(entry['name'])}**" if base else markdown_text(entry["name"]),
            markdown_text(_overrides_text(entry["overrides"])) or "(the file as it is)",
            _with_ci(entry["goodput"]["fleet"], _percent),
            "" if base else _with_ci(diff["goodput"]["fleet"], _points, signed=True) + mark(flags.get("goodput")),
            ""
            if base
            else _with_ci(diff["gpu_hours_per_day"]["fleet"], signed=True)
            + mark(flags.get("gpu_hours_per_day", {}).get("fleet")),
            _with_ci(entry["power_step"], power)
            + ("" if entry.get("power_step_max") is None else f"; max {power(entry['power_step_max'])}"),
            "" if base else _with_ci(diff["power_step"], power, signed=True) + mark(flags.get("power_step")),
            _with_ci(entry["writers_peak"], lambda x: f"{x:.3g}"),
            ""
            if base
            else _with_ci(diff["writers_peak"], lambda x: f"{x:.3g}", signed=True) + mark(flags.get("writers_peak")),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    lines += [
        "",
        "\\* an effect: its CI excludes 0 (or every draw is the same) and it exceeds the floor. Power step: the "
        "largest change of the fleet's draw at one instant, up or down (the mean over the draws of each draw's "
        "largest, with its CI; max: the largest in any draw; the change is of the means). Writer peak: the most "
        "checkpoints written at once.",
    ]
    return lines


def _group_table(summary: dict, names: list) -> list:
    lines = [
        "",
        "## GPU-hours per day gained, per group",
        "",
        "| scenario | " + " | ".join(markdown_text(name) for name in names) + " | fleet |",
        "|---" * (len(names) + 2) + "|",
    ]
    for entry in summary["scenarios"][1:]:
        diff = entry["difference"]["gpu_hours_per_day"]
        cells = [*diff["groups"], diff["fleet"]]
        flags = entry.get("outside_noise", {}).get("gpu_hours_per_day", {})
        flags = [*flags.get("groups", [False] * len(diff["groups"])), flags.get("fleet", False)]
        shown = [
            _with_ci(cell if cell.get("mean") is not None else None, signed=True) + (" *" if flag else "")
            for cell, flag in zip(cells, flags)
        ]
        lines.append(f"| {markdown_text(entry['name'])} | " + " | ".join(shown) + " |")
    return lines


def _sensitivity_table(summary: dict) -> list:
    step = f"{100 * summary['settings']['step']:g} %"
    lines = [
        "",
        "## Knobs, ranked by the elasticity of the fleet's goodput",
        "",
        f"Elasticity: the % change of the fleet's goodput per % change of the knob, from paired central differences "
        f"at ±{step} on the common draws. GPU-hours per day gained by the fleet at +{step} and at -{step}.",
        "",
        f"| rank | knob | elasticity | +{step}: GPU-h/day | -{step}: GPU-h/day |",
        "|---|---|---|---|---|",
    ]
    for rank, row in enumerate(summary["sensitivity"], 1):
        lines.append(
            f"| {rank} | {markdown_text(row['knob'])} | {_with_ci(row['elasticity'], _three, signed=True)} | "
            f"{_with_ci(row['gpu_hours_per_day_up'], signed=True)} | "
            f"{_with_ci(row['gpu_hours_per_day_down'], signed=True)} |"
        )
    return lines


# -- figures ------------------------------------------------------------------------------


def gains_figure(summary: dict):
    """Horizontal bars: each scenario's GPU-hours per day gained against the baseline, for the
    fleet and per group, with the paired differences' 95% CIs."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    entries = summary["scenarios"][1:]
    names = ["fleet"] + [group["name"] for group in entries[0]["difference"]["gpu_hours_per_day"]["groups"]]
    fig, ax = plt.subplots(figsize=(8, 1.2 + 0.5 * len(entries) * len(names) / 2), layout="constrained")
    height = 0.8 / len(names)
    colors = plt.get_cmap("tab10")
    for s, entry in enumerate(entries):
        diff = entry["difference"]["gpu_hours_per_day"]
        for g, cell in enumerate([diff["fleet"], *diff["groups"]]):
            if cell is None or cell.get("mean") is None:
                continue
            y = s + (g - (len(names) - 1) / 2) * height
            error = [
                [cell["mean"] - (cell["low"] if cell["low"] is not None else cell["mean"])],
                [(cell["high"] if cell["high"] is not None else cell["mean"]) - cell["mean"]],
            ]
            ax.barh(
                y,
                cell["mean"],
                height=height * 0.9,
                color=colors(g),
                label=names[g] if s == 0 else None,
                xerr=error,
                capsize=2,
                error_kw={"elinewidth": 0.8},
            )
    for s, entry in enumerate(entries):  # the fleet's number beside its bar, and whether it is noise
        fleet = entry["difference"]["gpu_hours_per_day"]["fleet"]
        if fleet is not None and fleet.get("mean") is not None:
            noise = _fleet_noise(entry)
            label = _signed(fleet["mean"]) + ("" if noise == OUTSIDE else f" ({noise})")
            y = s - (len(names) - 1) / 2 * height
            end = max(0.0, fleet["high"] if fleet["high"] is not None else fleet["mean"])
            ax.annotate(label, (end, y), xytext=(4, 0), textcoords="offset points", va="center", fontsize="small")
    ax.margins(x=0.15)  # room for the labels
    ax.axvline(0, color="black", linewidth=0.8)
    ax.set_yticks(range(len(entries)), [entry["name"] for entry in entries])
    ax.invert_yaxis()
    ax.set_xlabel("GPU-hours of saved work per day gained against the baseline (95% CI, paired)")
    ax.set_title(f"What-if scenarios on {summary['n_draws']} common draws")
    ax.legend(loc="best", fontsize="small")
    return fig


def _numeric(texts: list) -> np.ndarray | None:
    """The swept values as numbers (plain, or in their unit's base), else None."""
    from .._units import KINDS, UnitError, to_base

    values = []
    for text in texts:
        try:
            values.append(float(text))
            continue
        except ValueError:
            pass
        for kind in KINDS:
            try:
                values.append(to_base(text.strip("\"'"), kind))
                break
            except UnitError:
                continue
        else:
            return None
    return np.asarray(values, np.float64)


def _row(estimates: list, field: str) -> np.ndarray:
    """One field of each estimate (NaN where none)."""
    return np.asarray([np.nan if e is None or e[field] is None else e[field] for e in estimates], np.float64)


def sweep_figure(summary: dict):
    """Fleet goodput (with its CI) and GPU-hours per day gained (paired CI) against the swept value."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    key, texts = summary["sweep"]["key"], summary["sweep"]["values"]
    entries = summary["scenarios"][1:]
    numbers = _numeric(texts)
    x = np.arange(len(texts), dtype=float) if numbers is None else numbers
    order = np.argsort(x)
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(7, 6), sharex=True, layout="constrained")
    row = _row
    goodput = [entry["goodput"]["fleet"] for entry in entries]
    base = summary["scenarios"][0]["goodput"]["fleet"]
    top.plot(x[order], 100 * row(goodput, "mean")[order], "o-", color="C0", label="fleet goodput")
    top.fill_between(
        x[order], 100 * row(goodput, "low")[order], 100 * row(goodput, "high")[order], color="C0", alpha=0.2
    )
    top.axhline(100 * base["mean"], color="gray", linestyle="--", linewidth=1, label="the file as it is")
    top.set_ylabel("fleet goodput (%)")
    top.legend(fontsize="small")
    names = ["fleet"] + [group["name"] for group in entries[0]["difference"]["gpu_hours_per_day"]["groups"]]
    for g, name in enumerate(names):
        cells = [
            entry["difference"]["gpu_hours_per_day"]["fleet"]
            if g == 0
            else entry["difference"]["gpu_hours_per_day"]["groups"][g - 1]
            for entry in entries
        ]
        cells = [None if c is None or c.get("mean") is None else c for c in cells]
        # The fleet wide, the groups thin and dashed over it (one group may carry the whole gain).
        style = {"linewidth": 3.0, "linestyle": "-"} if g == 0 else {"linewidth": 1.0, "linestyle": "--", "zorder": 3}
        bottom.plot(x[order], row(cells, "mean")[order], marker="o", color=f"C{g}", label=name, markersize=4, **style)
        bottom.fill_between(x[order], row(cells, "low")[order], row(cells, "high")[order], color=f"C{g}", alpha=0.15)
    bottom.axhline(0, color="black", linewidth=0.8)
    bottom.set_ylabel("GPU-h/day gained vs the file (paired 95% CI)")
    if numbers is not None and np.all(x > 0) and x.max() >= 8 * x.min():  # doublings: equal steps
        bottom.set_xscale("log")
        bottom.minorticks_off()
    bottom.set_xticks(x, texts)
    bottom.set_xlabel(key)
    bottom.legend(fontsize="small")
    top.set_title(f"Sweep of {key} on {summary['n_draws']} common draws")
    return fig


def tornado_figure(summary: dict):
    """Each knob's GPU-hours per day gained at +step and at -step, ranked (largest elasticity on top)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = summary["sensitivity"]
    step = f"{100 * rows[0]['step']:g} %" if rows else ""
    fig, ax = plt.subplots(figsize=(8, 1.5 + 0.45 * len(rows)), layout="constrained")
    for i, row in enumerate(rows):
        for field, color, label in (
            ("gpu_hours_per_day_up", "C0", f"+{step}"),
            ("gpu_hours_per_day_down", "C3", f"-{step}"),
        ):
            cell = row[field]
            if cell is None:
                continue
            low = cell["low"] if cell["low"] is not None else cell["mean"]
            high = cell["high"] if cell["high"] is not None else cell["mean"]
            ax.barh(
                i,
                cell["mean"],
                height=0.6,
                color=color,
                alpha=0.8,
                label=label if i == 0 else None,
                xerr=[[cell["mean"] - low], [high - cell["mean"]]],
                capsize=3,
                error_kw={"elinewidth": 0.8},
            )
    ax.axvline(0, color="black", linewidth=0.8)
    ax.set_yticks(range(len(rows)), [row["knob"] for row in rows])
    ax.invert_yaxis()
    ax.set_xlabel("GPU-hours of saved work per day gained by the fleet (paired 95% CI)")
    ax.set_title(f"Knobs ranked by elasticity: each at ±{step}, {summary['n_draws']} common draws")
    ax.legend(loc="best", fontsize="small")
    return fig


def _write_outputs(out: Path, spec, ds, summary: dict) -> None:
    """compare.json, report.md and the figures of the mode; a figure that fails is a warning."""
    from .._io import atomic_write, atomic_write_bytes
    from ._design_figures import close

    mode = summary["settings"]["mode"]
    figures = {
        "sensitivity": {"tornado.png": tornado_figure},
        "sweep": {"sweep.png": sweep_figure, "gains.png": gains_figure},
    }
    figures = figures.get(mode, {"gains.png": gains_figure})
    summary["files"] = ["compare.json", "report.md"]
    for name, make in figures.items():
        try:
            figure = make(summary)
            try:
                atomic_write(out / name, lambda handle, figure=figure: figure.savefig(handle, format="png", dpi=120))
            finally:
                close(figure)
            summary["files"].append(name)
        except Exception as err:  # noqa: BLE001 - a figure never costs the numbers
            why = f"{type(err).__name__}: {err}"
            print(f"ckpt-jax compare: warning: {name} not drawn ({why}); the numbers are in compare.json")
    atomic_write_bytes(out / "compare.json", (json.dumps(summary, indent=2) + "\n").encode())
    atomic_write_bytes(out / "report.md", _report(spec, summary).encode())
