"""Claim 15 (overhead part): how far a fixed checkpoint overhead o moves the best intervals.

A checkpoint blocks its job for a fixed overhead o before its write (docs/model.md §1g: the
barrier, serialising the state, metadata, the commit), so a lone job's cycle is T + o + D and
its best interval moves from about √(2DM) to about √(2(o + D)M).

15a, one job alone: the 405B job of `CLUSTER_FILE` (its D, M and R), for each o of the sweep
`OVERHEADS` (0 to 120 s). The exact optimum T*(o) of the renewal formula with W = T + o + D
(`cj.theory.optimal_interval(o + D, M)`) against Young's interval with and without o; and, by the
exact simulator on common draws (`cj.design.fleet_waste`), the steady-state waste at Young's
interval without o less the waste at Young's with o (GPU-hours a day of the job's GPUs).
Reproduced where T*(o) lies within ``YOUNG_RTOL`` of √(2(o + D)M) at every o, and the interval
with o wastes less than the one without, outside the noise (95 % CI above 0), at every o ≥
``RESOLVED_OVERHEAD``.

15b, the cluster (`CLUSTER_FILE`, every group's overhead set to o): for each o of the size's
sweep, the design (`cj.design.checkpoint_intervals`, the search of ``ckpt-jax design``, with
today's intervals and Young's without o as candidates), and on its fresh evaluation draws the
GPU-hours a day it saves against today's intervals, Young's with o (the design's own baseline)
and Young's without o. Reproduced where every group's designed interval is longer at the largest
o than at o = 0 by more than the search's finest step (``1 + SEARCH_RTOL``), and at every o > 0
the design saves GPU-hours against Young's without o outside the noise.
"""

from __future__ import annotations

import math
import time

import jax
import numpy as np

from .. import design, theory
from .common_causes import CLUSTER_FILE, _cluster_path
from .framework import (
    INCONCLUSIVE,
    NOT_REPRODUCED,
    REPRODUCED,
    Experiment,
    begin,
    finish,
    fmt,
    fmt_interval,
    fmt_list,
    in_float64,
    new_figure,
    save_figure,
    verdict,
)
from .rules import combine, interval_verdict

NAME = "overhead"
CLAIMS = (15,)

OVERHEADS = (0.0, 15.0, 30.0, 60.0, 120.0)  # s, the sweep of 15a
YOUNG_RTOL = 0.1  # 15a: |T*(o) / √(2(o + D)M) − 1| ≤ this at every o ("about")
RESOLVED_OVERHEAD = 30.0  # s, 15a: from this o on, Young's with o must beat Young's without
SEARCH_RTOL = 0.1  # 15b: the search's finest move (as `ckpt-jax design`), a factor 1 + this

SIZES = {
    "smoke": dict(
        solo=dict(overheads=[0.0, 120.0], draws=4, days=0.5),
        cluster=dict(overheads=[0.0, 120.0], groups=[0], days=0.05, draws=2, pairs=1, steps=1),
    ),
    "quick": dict(
        solo=dict(overheads=list(OVERHEADS), draws=32, days=7.0),
        cluster=dict(overheads=[0.0, 30.0, 60.0, 120.0], groups=None, days=2.0, draws=4, pairs=2, steps=15),
    ),
    "full": dict(
        solo=dict(overheads=list(OVERHEADS), draws=128, days=28.0),
        cluster=dict(overheads=list(OVERHEADS), groups=None, days=7.0, draws=8, pairs=4, steps=30),
    ),
}


def cluster_spec(overhead: float, groups=None, fleet_file: str = CLUSTER_FILE):
    """``fleet_file`` with every group's fixed overhead set to ``overhead`` seconds (and only
    the groups of index ``groups``, where given): a `FleetSpec`."""
    import tomllib

    from ..fleetfile import loads

    text = _cluster_path(fleet_file).read_text()
    if groups is not None:
        data: dict = tomllib.loads(text)
        data["groups"] = [data["groups"][g] for g in groups]
        text = _toml_of(data)
    return loads(text, fleet_file).override({"overhead": f"{float(overhead):.17g} s"})


def _toml_of(source: dict) -> str:
    """The fleet file of ``source`` (its TOML data) as TOML text."""
    from ..fleetfile import _toml

    lines, tables = [], []
    for key, value in source.items():
        if isinstance(value, dict):
            tables += ["", f"[{key}]"] + [f"{k} = {_toml(v)}" for k, v in value.items()]
        elif isinstance(value, list) and value and isinstance(value[0], dict):
            for table in value:
                tables += ["", f"[[{key}]]"] + [f"{k} = {_toml(v)}" for k, v in table.items()]
        else:
            lines.append(f"{key} = {_toml(value)}")
    return "\n".join(lines + tables) + "\n"


def _estimate(samples) -> dict:
    from .._estimate import mean_ci

    e = mean_ci(np.asarray(samples, np.float64))
    return dict(mean=e.mean, low=e.low, high=e.high)


def measure_solo(config: dict, key) -> dict:
    """15a: the 405B job alone, for each overhead of ``config``."""
    spec = cluster_spec(0.0, groups=[0])
    write, mtbf = float(spec.solo_write_time()[0]), float(spec.per_job("mtbf")[0])
    restart, gpus = float(spec.per_job("restart")[0]), float(spec.per_job("size")[0])
    horizon = config["days"] * 86400.0
    keys = jax.random.split(key, config["draws"])
    rows = []
    for overhead in config["overheads"]:
        fleet = cluster_spec(overhead, groups=[0]).fleet()
        young_without = math.sqrt(2 * write * mtbf)
        young_with = math.sqrt(2 * (overhead + write) * mtbf)
        optimum = float(theory.optimal_interval(overhead + write, mtbf))
        waste = design.fleet_waste(fleet, np.array([[young_without], [young_with]]), horizon=horizon, keys=keys)
        saved = (waste[0] - waste[1]) * gpus * 24  # GPU-hours a day
        rows.append(
            dict(
                overhead=overhead,
                young_without=young_without,
                young_with=young_with,
                optimum=optimum,
                optimum_vs_young=optimum / young_with - 1,
                formula_waste=float(theory.renewal_waste(young_with, overhead + write, mtbf, restart)),
                waste_with=_estimate(waste[1]),
                saved_gpu_hours=_estimate(saved),
            )
        )
    return dict(write=write, mtbf=mtbf, restart=restart, gpus=gpus, horizon=horizon, draws=config["draws"], rows=rows)


def measure_cluster(config: dict, key, progress: bool) -> dict:
    """15b: the cluster's design at each overhead of ``config`` (one search each, common draws)."""
    rows = []
    names = None
    for overhead in config["overheads"]:
        spec = cluster_spec(overhead, groups=config["groups"])
        without = cluster_spec(0.0, groups=config["groups"])
        names = [group.name for group in spec.groups]
        fleet = spec.fleet()
        current = spec.intervals()
        result = design.checkpoint_intervals(
            fleet,
            bounds=spec.job_bounds(),
            horizon=config["days"] * 86400.0,
            n_draws=config["draws"],
            n_pairs=config["pairs"],
            steps=config["steps"],
            key=key,
            groups=spec.labels,
            method="search",
            launch=spec.launch_of(design=True),
            eval_draws=2 * config["pairs"] * config["draws"],
            candidates={"current": current, "young_without_overhead": without.young()},
            rtol=SEARCH_RTOL,
            progress=progress,
        )
        gpus = np.bincount(spec.labels, weights=spec.per_job("size"))
        assert result.evaluation is not None  # checkpoint_intervals always evaluates on fresh draws
        comparison = design.compare(result.evaluation, spec.labels, spec.per_job("size"), gpus=gpus)
        assert comparison.gpu_hours_saved is not None  # gpus given
        first = np.searchsorted(spec.labels, np.arange(len(spec.groups)))
        saved = {
            name: dict(mean=e.mean, low=e.low, high=e.high)
            for name, (e, _) in comparison.gpu_hours_saved.items()
            if name in ("current", "young", "young_without_overhead")
        }
        rows.append(
            dict(
                overhead=overhead,
                designed=[float(x) for x in np.asarray(result.intervals)[first]],
                young_with=[float(x) for x in spec.young()[first]],
                young_without=[float(x) for x in without.young()[first]],
                current=[float(x) for x in current[first]],
                fallback=result.fallback,
                converged=bool(result.converged),
                saved_gpu_hours=saved,
            )
        )
    return dict(groups=names, rows=rows, days=config["days"], draws=config["draws"], pairs=config["pairs"])


def verdict_15a(solo: dict, figures=()) -> tuple:
    rows = solo["rows"]
    close = [abs(row["optimum_vs_young"]) <= YOUNG_RTOL for row in rows]
    parts = [REPRODUCED if all(close) else NOT_REPRODUCED]
    for row in rows:
        if row["overhead"] >= RESOLVED_OVERHEAD:
            saved = row["saved_gpu_hours"]
            parts.append(interval_verdict(saved["low"], saved["high"], 0.0))
    outcome = combine(parts)
    last = rows[-1]
    why = (
        f"The 405B job alone (D = {fmt(solo['write'])} s, M = {fmt(solo['mtbf'])} s): the exact optimum T*(o) lies "
        f"within {fmt(100 * max(abs(r['optimum_vs_young']) for r in rows))} % of √(2(o + D)M) at every o "
        f"(threshold {fmt(100 * YOUNG_RTOL)} %); at o = {fmt(last['overhead'])} s it is {fmt(last['optimum'])} s "
        f"against √(2DM) = {fmt(last['young_without'])} s. Young's interval with o saves "
        f"{fmt(last['saved_gpu_hours']['mean'])} "
        f"{fmt_interval(last['saved_gpu_hours']['low'], last['saved_gpu_hours']['high'])} GPU-hours a day against "
        f"Young's without it at o = {fmt(last['overhead'])} s ({solo['draws']} common draws of "
        f"{fmt(solo['horizon'] / 86400)} days)."
    )
    table = dict(
        columns=["o (s)", "√(2DM) (s)", "√(2(o + D)M) (s)", "T*(o) (s)", "T*/Young − 1", "saved GPU-h/day"],
        rows=[
            [
                fmt(r["overhead"]),
                fmt(r["young_without"]),
                fmt(r["young_with"]),
                fmt(r["optimum"]),
                fmt(r["optimum_vs_young"]),
                f"{fmt(r['saved_gpu_hours']['mean'])} "
                f"{fmt_interval(r['saved_gpu_hours']['low'], r['saved_gpu_hours']['high'])}",
            ]
            for r in rows
        ],
    )
    entry = verdict(
        15,
        outcome,
        why,
        sub_claim="15a",
        title="a lone job's best interval moves to about √(2(o + D)M)",
        headline=f"T*(120 s) / √(2(o + D)M) − 1 = {fmt(last['optimum_vs_young'])}",
        rule=(
            "reproduced where T*(o) is within YOUNG_RTOL of √(2(o + D)M) at every o and Young's interval with o "
            "wastes less than without it (95 % CI above 0) at every o ≥ RESOLVED_OVERHEAD"
        ),
        thresholds=dict(YOUNG_RTOL=YOUNG_RTOL, RESOLVED_OVERHEAD=RESOLVED_OVERHEAD),
        figures=list(figures),
        table=table,
    )
    return outcome, entry


# The interval sets the design is weighed against, in words.
_WORDS = {"current": "today's intervals", "young": "Young's with o", "young_without_overhead": "Young's without o"}


def verdict_15b(cluster: dict, figures=()) -> tuple:
    rows = cluster["rows"]
    first, last = rows[0], rows[-1]
    moved = [b / a for a, b in zip(first["designed"], last["designed"])]
    parts = [REPRODUCED if all(m > 1 + SEARCH_RTOL for m in moved) else INCONCLUSIVE]
    for row in rows:
        if row["overhead"] > 0:
            saved = row["saved_gpu_hours"]["young_without_overhead"]
            parts.append(interval_verdict(saved["low"], saved["high"], 0.0))
    outcome = combine(parts)
    groups = cluster["groups"]
    why = (
        f"On {CLUSTER_FILE} with every group's overhead o: from o = {fmt(first['overhead'])} to "
        f"{fmt(last['overhead'])} s the designed intervals move by factors of {fmt_list(moved)} "
        f"({', '.join(groups)}; the finest step of the search is {fmt(1 + SEARCH_RTOL)}). At o = "
        f"{fmt(last['overhead'])} s the design saves "
        + "; ".join(
            f"{fmt(s['mean'])} {fmt_interval(s['low'], s['high'])} GPU-hours a day against {_WORDS[name]}"
            for name, s in last["saved_gpu_hours"].items()
        )
        + f" ({2 * cluster['pairs'] * cluster['draws']} fresh draws of {fmt(cluster['days'])} days)."
    )
    table = dict(
        columns=["o (s)", "group", "today (min)", "Young without o (min)", "Young with o (min)", "designed (min)"],
        rows=[
            [fmt(r["overhead"]), g, fmt(r["current"][k] / 60), fmt(r["young_without"][k] / 60)]
            + [fmt(r["young_with"][k] / 60), fmt(r["designed"][k] / 60)]
            for r in rows
            for k, g in enumerate(groups)
        ],
    )
    entry = verdict(
        15,
        outcome,
        why,
        sub_claim="15b",
        title="on the LLM cluster the designed intervals follow o",
        headline=f"designed intervals ×{fmt_list(moved)} from o = 0 to {fmt(last['overhead'])} s",
        rule=(
            "reproduced where every group's designed interval at the largest o is longer than at o = 0 by more than "
            "the search's finest step (1 + SEARCH_RTOL), and at every o > 0 the design saves GPU-hours against "
            "Young's interval without o (95 % CI above 0)"
        ),
        thresholds=dict(SEARCH_RTOL=SEARCH_RTOL),
        figures=list(figures),
        table=table,
    )
    return outcome, entry


def solo_figure(solo: dict, path) -> str:
    """15a: the intervals against o (left) and what Young's with o saves (right)."""
    rows = solo["rows"]
    o = np.array([r["overhead"] for r in rows])
    fig = new_figure(figsize=(12, 4.6), layout="constrained")
    left, right = fig.subplots(1, 2)
    for key, label, style in (
        ("young_without", "Young √(2DM)", "--"),
        ("young_with", "Young √(2(o + D)M)", "-"),
        ("optimum", "exact T*(o)", ":"),
    ):
        left.plot(o, [r[key] / 60 for r in rows], style, marker="o", label=label)
    left.set_xlabel("overhead o (s)")
    left.set_ylabel("interval (min)")
    left.set_title("The 405B job alone: the best interval against o")
    left.legend()
    saved = [r["saved_gpu_hours"] for r in rows]
    mean = np.array([s["mean"] for s in saved])
    low, high = np.array([s["low"] for s in saved]), np.array([s["high"] for s in saved])
    right.errorbar(o, mean, yerr=[mean - low, high - mean], fmt="o-", capsize=3)
    right.axhline(0, color="grey", lw=0.8)
    right.set_xlabel("overhead o (s)")
    right.set_ylabel("GPU-hours a day (95 % CI)")
    right.set_title("Saved by Young with o against Young without")
    return save_figure(fig, path)


def cluster_figure(cluster: dict, path) -> str:
    """15b: each group's designed interval against o (left), what the design saves (right)."""
    rows = cluster["rows"]
    o = np.array([r["overhead"] for r in rows])
    fig = new_figure(figsize=(12, 4.6), layout="constrained")
    left, right = fig.subplots(1, 2)
    for k, group in enumerate(cluster["groups"]):
        line = left.plot(o, [r["designed"][k] / 60 for r in rows], "o-", label=f"{group}: designed")
        left.plot(o, [r["young_with"][k] / 60 for r in rows], "--", color=line[0].get_color(), lw=0.8)
    left.set_xlabel("overhead o (s)")
    left.set_ylabel("interval (min); dashed: Young with o")
    left.set_title("Designed intervals against o")
    left.legend(fontsize=8)
    for name, label in (
        ("current", "today's intervals"),
        ("young_without_overhead", "Young without o"),
        ("young", "Young with o"),
    ):
        saved = [r["saved_gpu_hours"].get(name) for r in rows]
        mean = np.array([s["mean"] for s in saved])
        low, high = np.array([s["low"] for s in saved]), np.array([s["high"] for s in saved])
        right.errorbar(o, mean, yerr=[mean - low, high - mean], fmt="o-", capsize=3, label=label)
    right.axhline(0, color="grey", lw=0.8)
    right.set_xlabel("overhead o (s)")
    right.set_ylabel("GPU-hours a day the design saves (95 % CI)")
    right.set_title("What the design saves against")
    right.legend(fontsize=8)
    return save_figure(fig, path)


@in_float64
def run(out_dir, size: str = "quick", progress: bool = True) -> dict:
    """Measures 15a and 15b; writes ``overhead.json`` and two figures.

    Args:
      out_dir: directory for ``overhead.json`` and the PNG figures.
      size: "smoke", "quick" or "full".
      progress: show the design's progress bars.
    """
    out_dir, size, config, started = begin(out_dir, size, SIZES)
    solo_key, cluster_key = jax.random.split(jax.random.key(15))
    solo = measure_solo(config["solo"], solo_key)
    cluster = measure_cluster(config["cluster"], cluster_key, progress)
    figure_a = solo_figure(solo, out_dir / f"{NAME}_15a.png")
    figure_b = cluster_figure(cluster, out_dir / f"{NAME}_15b.png")
    _, entry_a = verdict_15a(solo, [figure_a])
    _, entry_b = verdict_15b(cluster, [figure_b])
    numbers = dict(solo=solo, cluster=cluster, seconds=time.perf_counter() - started)
    return finish(out_dir, EXPERIMENT, size, numbers, [entry_a, entry_b], [figure_a, figure_b])


EXPERIMENT = Experiment(
    name=NAME,
    title="how far a fixed checkpoint overhead moves the designed intervals",
    claims=CLAIMS,
    sizes=SIZES,
    run=run,
)
