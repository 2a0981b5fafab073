"""Claim 13: interval design against cooperative checkpoint scheduling, on the peer's cielo platform.

The workload is `CLASSES` (also `examples/cielo.toml`) (Herault, Robert et al. 2018/2019, the "cielo" platform of
their public simulator): four application classes on 17,784 nodes, a job's size its node count,
one file system of aggregate bandwidth B, node failures at the rate of a system MTBF M_sys. At
each setting (B, M_sys) every strategy runs the same failure draws from random launches
(`cj.design.fleet_waste`, the fleet's waste weighted by node count over H):

* Young's periods √(2·M_i·C_i) (their simulator's default, which it calls Daly's:
  ``App::ckpt_interval``), C_i the checkpoint alone at B, under no interference (every job writes at B as
  if alone), proportional sharing (``storage_policy="weighted"``), blocking FCFS (``"fcfs"``),
  non-blocking FCFS (``"fcfs_nonblocking"``) and cooperative scheduling (``"cooperative"``);
* the intervals designed over the exact simulator (`cj.design.checkpoint_intervals`, one
  interval per class) under proportional sharing and under cooperative scheduling.

Strategies the engine does not know (a storage policy missing from `cj.STORAGE_POLICIES`) are
reported as missing, not run. Per setting, three paired differences on the same draws answer
the claim's question: the design under proportional sharing against cooperative scheduling at
Young's periods (does design *beat* cooperative scheduling, or *match* it within ``MATCH``?), and
the design under cooperative scheduling against cooperative scheduling at Young's periods (does
it *add* to it?). A verdict is reproduced (decided) where each of these intervals is decided
(wholly above ``MATCH``, wholly below −``MATCH``, or inside ±``MATCH``), inconclusive otherwise.

Regression points (13 peer): at B = 40 GB/s and M_sys = 8 h and 2 h, the waste interference
adds under proportional sharing (proportional minus no interference, paired), against the
peer's published numbers (`PEER_INCREMENT`): reproduced where their value lies in the run's
95% interval widened by ``PEER_TOLERANCE``.
"""

from __future__ import annotations

from typing import Any

import jax
import numpy as np

from .. import design
from .._estimate import mean_ci
from ..model import STORAGE_POLICIES, Fleet
from .framework import (
    INCONCLUSIVE,
    NOT_REPRODUCED,
    REPRODUCED,
    Experiment,
    begin,
    finish,
    fmt,
    fmt_interval,
    in_float64,
    new_figure,
    save_figure,
    verdict,
)
from .rules import combine

NAME = "cooperative"
CLAIMS = (13,)

NODES = 17_784  # cielo's node count: the system MTBF is the node MTBF / NODES
NODE_MEMORY = 32e9  # bytes per node
# The application classes (examples/cielo.toml; their src/celio.C): name, jobs, nodes per job,
# checkpoint volume as a fraction of the job's memory. The jobs fill 17,235 of the nodes.
CLASSES = (("EAP", 12, 1024, 1.6), ("LAP", 4, 256, 1.85), ("Silverton", 1, 2048, 3.5), ("VPIC", 1, 1875, 0.85))
GB = 1e9
HOUR = 3600.0
DAY = 86400.0
# The peer's published increase in waste that interference causes under proportional sharing,
# their model with its extra I/O switched off: {(B in GB/s, M_sys in h): waste}.
PEER_INCREMENT = {(40.0, 8.0): 0.046, (40.0, 2.0): 0.162}
PEER_TOLERANCE = 0.01  # 13 peer: their value within the 95% interval widened by this much
MATCH = 0.005  # 13: a difference in fleet waste inside ±MATCH is a match

# name -> (storage policy, no interference): what each strategy runs with Young's periods.
STRATEGIES = {
    "no interference": ("fair", True),
    "proportional": ("weighted", False),
    "blocking fcfs": ("fcfs", False),
    "non-blocking fcfs": ("fcfs_nonblocking", False),
    "cooperative": ("cooperative", False),
}
DESIGNS = {"design, proportional": "weighted", "design, cooperative": "cooperative"}

SIZES: dict[str, dict[str, Any]] = {
    "smoke": dict(
        settings=[(40.0, 8.0)],
        regression=[],
        horizon_days=3.0,
        draws=4,
        design=dict(horizon_days=2.0, n_draws=2, n_pairs=1, steps=1),
    ),
    "quick": dict(
        settings=[(40.0, 2.0), (160.0, 24.0)],
        regression=[(40.0, 8.0), (40.0, 2.0)],
        horizon_days=30.0,
        draws=32,
        design=dict(horizon_days=15.0, n_draws=8, n_pairs=2, steps=15),
    ),
    "full": dict(
        settings=[(b, m) for b in (40.0, 80.0, 160.0) for m in (1.0, 2.0, 4.0, 8.0, 24.0)],
        regression=[(40.0, 8.0), (40.0, 2.0)],
        horizon_days=60.0,
        draws=128,
        design=dict(horizon_days=30.0, n_draws=16, n_pairs=4, steps=60),
    ),
}


def cielo_fleet(
    bandwidth_gbs: float, mtbf_hours: float, policy: str, no_interference: bool = False, peer_recovery: bool = False
) -> Fleet:
    """The cielo fleet (`CLASSES`, the jobs class by class) at aggregate bandwidth B (GB/s) and
    system MTBF M_sys (hours), under the storage ``policy``; ``no_interference``: every writer
    gets B (f(n) = n·B, fair). examples/cielo.toml is the same fleet at 40 GB/s and 8 h.
    ``peer_recovery``: the peer's recovery, a failed job re-reads its checkpoint through the
    storage (``recovery_read`` = its volume) and can fail again meanwhile (``fail_while_down``)."""
    counts = [count for _, count, _, _ in CLASSES]
    nodes = np.repeat([float(n) for _, _, n, _ in CLASSES], counts)
    volume = np.repeat([n * NODE_MEMORY * fraction for _, _, n, fraction in CLASSES], counts)
    n_jobs = nodes.size
    bandwidth = bandwidth_gbs * GB
    throughput = np.arange(n_jobs + 1) * bandwidth if no_interference else np.full(n_jobs + 1, bandwidth)
    throughput[0] = bandwidth
    return Fleet(
        np.ones(n_jobs),
        volume,
        size=nodes,
        mtbf=1.0 / (1.0 / (mtbf_hours * HOUR * NODES) * nodes),
        restart=0.0,
        throughput=throughput,
        storage_policy="fair" if no_interference else policy,
        recovery_read=volume if peer_recovery else 0.0,
        fail_while_down=peer_recovery,
        dtype="float64",
    )


def class_labels() -> np.ndarray:
    """(N,) each job's class index in `CLASSES`."""
    return np.repeat(np.arange(len(CLASSES)), [count for _, count, _, _ in CLASSES])


def _estimate(samples) -> dict:
    return mean_ci(samples).to_dict()


def _waste(fleet: Fleet, intervals, horizon: float, keys) -> np.ndarray:
    """(S,) the fleet's waste at ``intervals`` (N,) on the draws ``keys``, from random launches."""
    return design.fleet_waste(fleet, np.asarray(intervals)[None], horizon=horizon, keys=keys, launch="random")[0]


def measure_setting(bandwidth: float, mtbf: float, config: dict, key, progress: bool) -> dict:
    """Every strategy's waste at one setting on shared draws, and the paired differences."""
    eval_key, design_key = jax.random.split(key)
    keys = jax.random.split(eval_key, config["draws"])
    horizon = config["horizon_days"] * DAY
    labels = class_labels()
    samples, missing, intervals = {}, [], {}
    for name, (policy, alone) in STRATEGIES.items():
        if policy not in STORAGE_POLICIES:
            missing.append(name)
            continue
        fleet = cielo_fleet(bandwidth, mtbf, policy, alone)
        young = design._young(fleet)
        intervals[name] = young
        samples[name] = _waste(fleet, young, horizon, keys)
    d = config["design"]
    for name, policy in DESIGNS.items():
        if policy not in STORAGE_POLICIES:
            missing.append(name)
            continue
        fleet = cielo_fleet(bandwidth, mtbf, policy)
        young = design._young(fleet)
        result = design.checkpoint_intervals(
            fleet,
            bounds=(float(young.min()) / 4, float(young.max()) * 4),
            horizon=d["horizon_days"] * DAY,
            n_draws=d["n_draws"],
            n_pairs=d["n_pairs"],
            steps=d["steps"],
            key=jax.random.fold_in(design_key, len(intervals)),
            groups=labels,
            launch="random",
            progress=progress,
        )
        intervals[name] = np.asarray(result.intervals, np.float64)
        samples[name] = _waste(fleet, intervals[name], horizon, keys)
    waste = {name: _estimate(s) for name, s in samples.items()}
    pairs = {
        "design (proportional) minus cooperative": ("design, proportional", "cooperative"),
        "design (cooperative) minus cooperative": ("design, cooperative", "cooperative"),
        "proportional minus no interference": ("proportional", "no interference"),
        "design (proportional) minus proportional": ("design, proportional", "proportional"),
    }
    differences = {
        label: _estimate(samples[a] - samples[b]) for label, (a, b) in pairs.items() if a in samples and b in samples
    }
    first = np.searchsorted(labels, np.arange(labels.max() + 1))
    return dict(
        bandwidth_gbs=bandwidth,
        mtbf_hours=mtbf,
        horizon_days=config["horizon_days"],
        draws=config["draws"],
        waste=waste,
        differences=differences,
        intervals_hours={name: (t[first] / HOUR).tolist() for name, t in intervals.items()},
        missing=missing,
    )


def measure_regression(bandwidth: float, mtbf: float, config: dict, key) -> dict:
    """The waste interference adds under proportional sharing at Young's periods (paired), with
    this model's recovery (a down time, here 0) and with the peer's (`cielo_fleet`'s
    ``peer_recovery``)."""
    keys = jax.random.split(key, config["draws"])
    horizon = config["horizon_days"] * DAY
    runs = {}
    for recovery in (False, True):
        for name in ("no interference", "proportional"):
            policy, alone = STRATEGIES[name]
            fleet = cielo_fleet(bandwidth, mtbf, policy, alone, peer_recovery=recovery)
            runs[name, recovery] = _waste(fleet, design._young(fleet), horizon, keys)
    peer = {
        "no_interference": _estimate(runs["no interference", True]),
        "proportional": _estimate(runs["proportional", True]),
        "increment": _estimate(runs["proportional", True] - runs["no interference", True]),
    }
    runs = {name: runs[name, False] for name in ("no interference", "proportional")}
    return dict(
        with_peer_recovery=peer,
        bandwidth_gbs=bandwidth,
        mtbf_hours=mtbf,
        no_interference=_estimate(runs["no interference"]),
        proportional=_estimate(runs["proportional"]),
        increment=_estimate(runs["proportional"] - runs["no interference"]),
        peer_increment=PEER_INCREMENT.get((bandwidth, mtbf)),
    )


def _decide(difference: dict | None) -> str:
    """beats / worse / matches / undecided from a paired difference (design minus other)."""
    if difference is None:
        return "missing"
    if difference["high"] < -MATCH:
        return "beats"
    if difference["low"] > MATCH:
        return "worse"
    if -MATCH < difference["low"] and difference["high"] < MATCH:
        return "matches"
    return "undecided"


def verdict_13(settings: list, figures=()) -> dict:
    """13's verdict from `measure_setting`'s numbers (or their JSON)."""
    rows, decided, answers = [], True, []
    for s in settings:
        beat = _decide(s["differences"].get("design (proportional) minus cooperative"))
        add = _decide(s["differences"].get("design (cooperative) minus cooperative"))
        decided &= beat not in ("undecided", "missing") and add not in ("undecided", "missing")
        answers.append(
            f"at {fmt(s['bandwidth_gbs'])} GB/s, M_sys = {fmt(s['mtbf_hours'])} h the design under proportional "
            f"sharing {beat.replace('beats', 'beats').replace('worse', 'is worse than')} cooperative scheduling"
            f" and designing under cooperative scheduling {'adds to it' if add == 'beats' else add}"
        )
        for name, w in s["waste"].items():
            rows.append(
                [
                    f"{fmt(s['bandwidth_gbs'])} GB/s, {fmt(s['mtbf_hours'])} h",
                    name,
                    f"{fmt(w['mean'], 3)} {fmt_interval(w['low'], w['high'], 3)}",
                    ", ".join(fmt(t, 3) for t in s["intervals_hours"][name]),
                ]
            )
        where = f"{fmt(s['bandwidth_gbs'])} GB/s, {fmt(s['mtbf_hours'])} h"
        rows += [[where, name, "not built", "-"] for name in s["missing"]]
    outcome = REPRODUCED if decided else INCONCLUSIVE
    why = "; ".join(answers) + (
        f". A difference inside ±{fmt(MATCH)} of fleet waste is a match; every setting's differences are decided."
        if decided
        else f". Some paired difference straddles ±{fmt(MATCH)} or a strategy is missing: more draws (`--full`)."
    )
    return verdict(
        13,
        outcome,
        why,
        sub_claim="13",
        title="interval design against cooperative scheduling (cielo)",
        headline="; ".join(answers),
        rule=f"decided (reproduced) if at every setting the paired differences of the design against cooperative "
        f"scheduling lie wholly below −{fmt(MATCH)}, wholly above {fmt(MATCH)} or wholly inside ±{fmt(MATCH)}; "
        "inconclusive otherwise.",
        thresholds=dict(MATCH=MATCH),
        figures=list(figures),
        table=dict(columns=["setting", "strategy", "fleet waste [95% CI]", "intervals per class (h)"], rows=rows),
        settings=settings,
    )


def verdict_13_peer(points: list) -> dict:
    """13 peer's verdict: the interference increment against the peer's published numbers."""
    rows, outcomes = [], []
    for p in points:
        # Judged with the peer's recovery (a read through the storage, failures while down),
        # the model choice that makes the two comparable; this model's fixed down time beside it.
        peer, theirs = p["with_peer_recovery"], p["peer_increment"]
        inc = peer["increment"]
        if theirs is None:
            continue
        inside = inc["low"] - PEER_TOLERANCE <= theirs <= inc["high"] + PEER_TOLERANCE
        outcomes.append(REPRODUCED if inside else NOT_REPRODUCED)
        rows.append(
            [
                f"{fmt(p['bandwidth_gbs'])} GB/s, {fmt(p['mtbf_hours'])} h",
                f"{fmt(peer['no_interference']['mean'], 3)}",
                f"{fmt(peer['proportional']['mean'], 3)}",
                f"{fmt(inc['mean'], 3)} {fmt_interval(inc['low'], inc['high'], 3)}",
                f"{fmt(p['increment']['mean'], 3)} {fmt_interval(p['increment']['low'], p['increment']['high'], 3)}",
                fmt(theirs, 3),
            ]
        )
    outcome = combine(outcomes) if outcomes else INCONCLUSIVE
    why = (
        "The waste proportional sharing adds to Young's periods over no interference (paired draws), with the "
        "peer's recovery (a failed job re-reads its checkpoint through the storage and can fail again meanwhile; "
        "no input or output I/O), against the peer's published increments with their extra I/O switched off: "
        + "; ".join(f"{r[0]}: {r[3]} here ({r[4]} with a fixed down time of 0), {r[5]} theirs" for r in rows)
        + f" (tolerance {fmt(PEER_TOLERANCE)} beyond the 95% interval)."
        if rows
        else "No regression point at this size."
    )
    return verdict(
        13,
        outcome,
        why,
        sub_claim="13 peer",
        title="the peer's interference increments on cielo",
        headline=", ".join(f"{r[0]}: {r[3].split()[0]} vs {r[5]}" for r in rows) or "no regression point at this size",
        rule=f"reproduced where the peer's value lies within the 95% interval of the increment widened by "
        f"{fmt(PEER_TOLERANCE)}; not reproduced otherwise.",
        thresholds=dict(PEER_TOLERANCE=PEER_TOLERANCE),
        table=dict(
            columns=[
                "setting",
                "no interference",
                "proportional",
                "increment [95% CI]",
                "increment, fixed down time",
                "peer's increment",
            ],
            rows=rows,
        ),
        points=points,
    )


def strategies_figure(settings: list):
    """Fleet waste of every strategy at each setting, with 95% intervals."""
    figure = new_figure(figsize=(9, 1.2 + 2.6 * len(settings)), constrained_layout=True)
    axes = figure.subplots(len(settings), 1, squeeze=False)[:, 0]
    for ax, s in zip(axes, settings):
        names = list(s["waste"])
        mean = np.array([s["waste"][n]["mean"] for n in names])
        err = np.array([[mean[i] - s["waste"][n]["low"], s["waste"][n]["high"] - mean[i]] for i, n in enumerate(names)])
        colours = ["#1f77b4" if not n.startswith("design") else "#2ca02c" for n in names]
        rows = np.arange(len(names))[::-1]
        ax.barh(rows, mean, xerr=err.T, color=colours, capsize=3)
        ax.set_yticks(rows, names)
        ax.set_xlabel("fleet waste (node-weighted fraction of time)")
        ax.set_title(f"cielo, B = {fmt(s['bandwidth_gbs'])} GB/s, system MTBF {fmt(s['mtbf_hours'])} h")
        high = mean + err[:, 1]
        span = max(float(high.max()) * 1.2, 1e-3)
        for row, m, top in zip(rows, mean, high):  # the value just past its error bar
            ax.text(top + 0.01 * span, row, f"{m:.3f}", va="center", fontsize=8)
        ax.set_xlim(0, span)
    return figure


@in_float64
def run(out_dir, size: str = "quick", progress: bool = True) -> dict:
    out_dir, size, config, started = begin(out_dir, size, SIZES)
    key = jax.random.key(13)
    settings = [
        measure_setting(b, m, config, jax.random.fold_in(key, i), progress)
        for i, (b, m) in enumerate(config["settings"])
    ]
    points = [
        measure_regression(b, m, config, jax.random.fold_in(key, 100 + i))
        for i, (b, m) in enumerate(config["regression"])
    ]
    figure_name = save_figure(strategies_figure(settings), out_dir / f"{NAME}_strategies.png")
    verdicts = [verdict_13(settings, [figure_name]), verdict_13_peer(points)]
    import time

    numbers = dict(settings=settings, regression=points, wall_seconds=time.perf_counter() - started)
    return finish(out_dir, EXPERIMENT, size, numbers, verdicts, [figure_name])


EXPERIMENT = Experiment(
    name=NAME,
    title="claim 13: interval design against cooperative checkpoint scheduling on the peer's cielo platform",
    claims=CLAIMS,
    sizes=SIZES,
    run=run,
)
