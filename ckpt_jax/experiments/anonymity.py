"""Claim 9: neutrality needs anonymity (9a: job sizes under a binding cap; 9b: fcfs storage).

Every curve is `coupling.coupling_function` of a 2-job fleet with job sizes or a sharing
policy (docs/model.md §1b), read by `ckpt_jax.locking`. Two coordinates:

* *work*: job 1's section coordinate u (work left until its next firing) at job 0's
  firings; the coupling is ``wrap(u_k − P0(u_{k−1}))`` on the circle L = T_1 + d_1, with P0
  each job run alone at its own solo speed min(1, C / w_i);
* *time phase*: the time φ until job 1's next firing had it run alone; alone, φ only turns
  by job 0's solo period, so the coupling is ``wrap(φ_k − φ_{k−1} + R0)`` on the circle of
  job 1's solo period P_1. Fixed points and their slopes are the same in both coordinates
  (a change of coordinates on the circle); both lists are recorded.

(a) Pairs of sizes w = (1, 2) with f(n) = n (the cap is the only interaction), d = 3 and
    compute work T_i = 10·s_i, so that both jobs alone compute for 10 and have one solo
    period (13): the uncoupled lag map is the identity and everything that moves the lag
    is coupling. Cases in ``COUPLED_CASES``; the controls (``CONTROLS``: equal sizes under a
    binding cap, a cap above Σ w) must give zero. A scan over caps compares the measured
    amplitude with the exact criterion of `coupling.shared_slowdown` (the pair couples iff
    its two jobs slow by different factors when both compute). Equal solo periods put the
    pair's lag under its coupling alone; its mean is then a detuning, so each coupled case is
    run again *detuned* (job 1's solo period shortened by the mean coupling, the middle of
    the locking range) to show the locked lags that a detuned pair finds.
(b) Identical pairs under ``"fcfs"`` storage (and the fair control), and the gap-map
    Jacobian (`jax.jacfwd` through the event loop) of N identical jobs under fcfs and fair
    storage at points of every branch, kept where the map is smooth (status 0).

Locked lags are the zeros of the lag displacement D = wrap(lag_k − lag_{k−1}) (`locking.locked_lags`);
the long-run lags are those after ``n_cycles`` cycles from a grid of launch lags.
"""

from __future__ import annotations

import time
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from .. import Fleet
from ..coupling import coupling_function, shared_slowdown
from ..locking import coupling_stats, locked_lags
from ..maps import gap_return_map
from .framework import (
    NOT_REPRODUCED,
    REPRODUCED,
    Experiment,
    begin,
    finish,
    fmt,
    fmt_list,
    in_float64,
    save_figure,
    verdict,
)
from .rules import combine

NAME = "anonymity"
CLAIMS = (9,)

# (a) job sizes under a power cap
SIZES_PAIR = (1.0, 2.0)
SOLO_COMPUTE_TIME = 10.0  # T_i / s_i: both jobs alone compute for this long
WRITE = 3.0
THROUGHPUT = "linear"  # f(n) = n: no storage contention, the cap is the only interaction
COUPLED_CASES = (("maxmin", SIZES_PAIR, 1.5), ("maxmin", SIZES_PAIR, 2.5), ("uniform", SIZES_PAIR, 1.5))
# Binding on the pair (C < Σ w) yet neutral by `shared_slowdown`: uniform with C >= max w.
UNIFORM_WINDOW = ("uniform", SIZES_PAIR, 2.5)
CONTROLS = (
    ("maxmin", (2.0, 2.0), 3.0, "equal sizes, binding cap"),
    ("uniform", (2.0, 2.0), 3.0, "equal sizes, binding cap"),
    ("maxmin", SIZES_PAIR, 4.0, "cap above Σ w"),
    ("uniform", SIZES_PAIR, 4.0, "cap above Σ w"),
)
POLICIES = ("maxmin", "uniform")

# (b) fcfs storage, identical jobs: (label, storage policy, cap)
FCFS_COMPUTE, FCFS_WRITE, FCFS_THROUGHPUT = 10.0, 3.0, "shared"
FCFS_CASES = (("fcfs, uncapped", "fcfs", None), ("fcfs, C = 1.5", "fcfs", 1.5), ("fair (control)", "fair", None))
SPECTRUM_COMPUTE, SPECTRUM_WRITE_FRACTION = 10.0, 0.2  # d = 0.2 T / N: claim 2's overlapping branch (f ≡ 1)

# Verdict thresholds, relative to the circle (L in work, P_1 in time phase).
COUPLING_TOL = 1e-9  # max |c| above this is a coupling
CONTROL_TOL = 1e-12  # a control must stay below this
FACTOR_TOL = 1e-12  # `shared_slowdown` factors closer than this are one common factor
DET_TOL = 1e-9  # anonymous storage: |det − 1| below this at every smooth point (claim 2)
SETTLE_RADIUS = 1e-3  # a launch whose last cycle moved its lag by at most this (/ circle) has settled

SIZES = {
    "smoke": dict(n_delta=16, n_cycles=30, n_caps=5, n_jobs=(2, 3), points=6),
    "quick": dict(n_delta=48, n_cycles=120, n_caps=17, n_jobs=(2, 3, 4), points=16),
    "full": dict(n_delta=256, n_cycles=600, n_caps=65, n_jobs=(2, 3, 4, 6, 8), points=64),
}


def _lags(n_delta: int, length: float) -> np.ndarray:
    return (np.arange(n_delta) + 0.5) / n_delta * length


def _wrap(x, length):
    return x - length * np.round(x / length)


def sized_pair(policy, sizes, cap, detuning: float = 0.0) -> Fleet:
    """w = ``sizes`` under ``policy``, T_i = s_i · (10 − detuning on job 1), d = 3, f(n) = n."""
    speed = np.minimum(1.0, (np.inf if cap is None else cap) / np.asarray(sizes))
    compute = speed * (SOLO_COMPUTE_TIME - np.array([0.0, detuning]))
    return Fleet(
        compute=list(compute),
        write=[WRITE, WRITE],
        cap=cap,
        throughput=THROUGHPUT,
        size=list(sizes),
        power_policy=policy,
        dtype=np.float64,
    )


def _measure(fleet, n_delta, n_cycles) -> dict:
    """Coupling in both coordinates, locked lags and long-run lags of one pair."""
    length = float(np.asarray(fleet.compute[1] + fleet.write[1]))
    result = coupling_function(fleet, _lags(n_delta, length), n_cycles)
    period = float(result.solo_period[1])
    phase0 = result.phase_lags[:, 0]
    row: dict[str, Any] = dict(
        length=length,
        period=period,
        deltas=result.deltas,
        phases=phase0,
        solo_speed=result.solo_speed,
        solo_period=result.solo_period,
        work=coupling_stats(result.deltas, result.coupling, length),
        phase=coupling_stats(phase0, result.phase_coupling[:, 0], period),
        work_coupling=result.coupling,
        phase_coupling=result.phase_coupling[:, 0],
    )
    phase_shift = _wrap(result.phase_lags[:, 1] - phase0, period)
    work_shift = _wrap(result.lags[:, 1] - result.lags[:, 0], length)
    tol = CONTROL_TOL * period
    row["phase_displacement"] = phase_shift
    row["work_displacement"] = work_shift
    row["phase_fixed"] = [p._asdict() for p in locked_lags(phase0, phase_shift, period, tol)]
    row["work_fixed"] = [p._asdict() for p in locked_lags(result.deltas, work_shift, length, CONTROL_TOL * length)]
    row["final_phases"] = result.phase_lags[:, -1] % period
    row["n_cycles"] = n_cycles
    # Settled: the last cycle moved the lag by at most SETTLE_RADIUS of the circle (at a
    # stable locked lag, or anywhere on an interval of fixed points).
    last_move = _wrap(result.phase_lags[:, -1] - result.phase_lags[:, -2], period)
    row["settled"] = float(np.mean(np.abs(last_move) <= SETTLE_RADIUS * period))
    return row


def _sizes_part(config) -> dict:
    n_delta, n_cycles = config["n_delta"], config["n_cycles"]
    coupled = {}
    for policy, sizes, cap in COUPLED_CASES + (UNIFORM_WINDOW,):
        label = f"{policy}, w = {sizes[0]:g}, {sizes[1]:g}, C = {cap:g}"
        row = _measure(sized_pair(policy, sizes, cap), n_delta, n_cycles)
        row.update(
            policy=policy,
            sizes=sizes,
            cap=cap,
            slowdown=shared_slowdown(sized_pair(policy, sizes, cap)),
            role="coupled" if (policy, sizes, cap) in COUPLED_CASES else "window",
        )
        if row["phase"]["max_abs"] > COUPLING_TOL * row["period"]:
            # Shorten job 1's solo period by the mean coupling: the middle of the locking range.
            detuning = row["phase"]["mean"]
            row["detuned"] = _measure(sized_pair(policy, sizes, cap, detuning), n_delta, n_cycles)
            row["detuned"]["detuning"] = detuning
        coupled[label] = row
    controls = {}
    for policy, sizes, cap, kind in CONTROLS:
        row = _measure(sized_pair(policy, sizes, cap), n_delta, n_cycles)
        row.update(policy=policy, sizes=sizes, cap=cap, kind=kind)
        controls[f"{policy}, w = {sizes[0]:g}, {sizes[1]:g}, C = {cap:g}"] = row
    caps = np.linspace(0.5, 3.7, config["n_caps"])
    scan = {}
    for policy in POLICIES:
        amplitude, predicted = [], []
        for cap in caps:
            fleet = sized_pair(policy, SIZES_PAIR, float(cap))
            # n_cycles as above: the compiled loop is reused; only the first cycle is read.
            length = float(np.asarray(fleet.compute[1] + fleet.write[1]))
            result = coupling_function(fleet, _lags(n_delta, length), n_cycles)
            amplitude.append(float(np.max(np.abs(result.phase_coupling[:, 0]))) / float(result.solo_period[1]))
            factors = shared_slowdown(fleet)
            predicted.append(bool(abs(factors[0] - factors[1]) > FACTOR_TOL))
        scan[policy] = dict(caps=caps, amplitude=np.array(amplitude), predicted=np.array(predicted))
    return dict(coupled=coupled, controls=controls, scan=scan)


def _value_and_info(fleet, a):
    a_next, info = gap_return_map(fleet, a)
    return a_next, (a_next, info)


_gap_jacobians = jax.jit(jax.vmap(jax.jacfwd(_value_and_info, argnums=1, has_aux=True), in_axes=(None, 0)))


def _spectra(n_jobs_list, points, rng) -> dict:
    """Gap-map Jacobians of N identical jobs under fcfs and fair storage, by jacfwd."""
    out = {}
    for n_jobs in n_jobs_list:
        write = SPECTRUM_WRITE_FRACTION * SPECTRUM_COMPUTE / n_jobs
        length = SPECTRUM_COMPUTE + write
        # A quarter of the points with small gaps (claim 2's overlapping branch), the rest uniform launches.
        n_small = max(points // 4, 1)
        small = rng.uniform(0.02, 0.3, (n_small, n_jobs - 1)) * write / n_jobs
        positions = np.sort(rng.uniform(0, length, (points - small.shape[0], n_jobs - 1)), axis=1)
        gaps = np.concatenate([small, np.diff(positions, axis=1, prepend=0.0)])
        for storage in ("fcfs", "fair"):
            fleet = Fleet(
                compute=np.full(n_jobs, SPECTRUM_COMPUTE),
                write=np.full(n_jobs, write),
                storage_policy=storage,
                dtype=np.float64,
            )
            jacobian, (_, info) = _gap_jacobians(fleet, jnp.asarray(gaps))
            jacobian = np.asarray(jacobian)
            status = np.asarray(info.status)
            smooth = (status == 0) & np.all(np.isfinite(jacobian), axis=(1, 2))
            det = np.where(smooth, np.linalg.det(np.where(smooth[:, None, None], jacobian, 0.0)), np.nan)
            eig = [np.sort_complex(np.linalg.eigvals(j)) if s else None for j, s in zip(jacobian, smooth)]
            out[f"{storage} N={n_jobs}"] = dict(
                storage=storage,
                n_jobs=n_jobs,
                branch=np.asarray(info.branch),
                smooth=smooth,
                determinant=det,
                small_gaps=np.arange(points) < n_small,
                eigenvalue_moduli=[np.abs(e) if e is not None else None for e in eig],
            )
    return out


def _fcfs_part(config) -> dict:
    rows = {}
    length = FCFS_COMPUTE + FCFS_WRITE
    for label, storage, cap in FCFS_CASES:
        fleet = Fleet(
            compute=[FCFS_COMPUTE] * 2,
            write=[FCFS_WRITE] * 2,
            cap=cap,
            throughput=FCFS_THROUGHPUT,
            storage_policy=storage,
            dtype=np.float64,
        )
        rows[label] = _measure(fleet, config["n_delta"], config["n_cycles"])
        rows[label]["storage"] = storage
    spectra = _spectra(config["n_jobs"], config["points"], np.random.default_rng(9))
    return dict(length=length, cases=rows, spectra=spectra)


def _small(value: float) -> str:
    """A rounding-level number: 0 when exactly 0, else one significant digit."""
    return "0" if value == 0 else f"{value:.0e}"


def _fixed_text(points, period) -> str:
    isolated = [p for p in points if p["kind"] == "isolated"]
    intervals = [p for p in points if p["kind"] == "interval"]
    parts = [
        f"{'stable' if p['stable'] else 'unstable'} lag {fmt(p['lag'] / period)} P (slope {fmt(p['slope'])})"
        for p in isolated
    ]
    parts += [f"neutral interval {fmt(p['lag'] / period)}–{fmt(p['end'] / period)} P" for p in intervals]
    if any(p["kind"] == "all" for p in points):
        return "every lag fixed"
    return "; ".join(parts) if parts else "none (the lag drifts)"


def verdict_9a(sizes) -> tuple:
    """9a's verdict from the measurements (`run`'s ``numbers["sizes"]``, arrays or their JSON)."""
    coupled, controls, scan = sizes["coupled"], sizes["controls"], sizes["scan"]
    per_policy = {}
    for policy in POLICIES:
        amps = [
            max(r["phase"]["max_abs"] / r["period"], r["work"]["max_abs"] / r["length"])
            for r in coupled.values()
            if r["policy"] == policy and r["role"] == "coupled"
        ]
        per_policy[policy] = max(amps)
    worst_control = max(
        max(r["phase"]["max_abs"] / r["period"], r["work"]["max_abs"] / r["length"]) for r in controls.values()
    )
    window = next(r for r in coupled.values() if r["role"] == "window")
    window_amp = max(window["phase"]["max_abs"] / window["period"], window["work"]["max_abs"] / window["length"])
    mismatches = {
        p: [float(c) for c, a, q in zip(s["caps"], s["amplitude"], s["predicted"]) if (a > COUPLING_TOL) != q]
        for p, s in scan.items()
    }
    parts = [REPRODUCED if per_policy[p] > COUPLING_TOL else NOT_REPRODUCED for p in POLICIES]
    parts.append(REPRODUCED if worst_control < CONTROL_TOL else NOT_REPRODUCED)
    parts.append(REPRODUCED if not any(mismatches.values()) else NOT_REPRODUCED)
    outcome = combine(parts)
    rows = []
    for label, r in list(coupled.items()) + list(controls.items()):
        ph, wk = r["phase"], r["work"]
        rows.append(
            [
                label,
                r.get("kind", "unequal sizes"),
                fmt(ph["max_abs"] / r["period"]),
                fmt(ph["mean"] / r["period"]),
                fmt(ph["peak_to_peak"] / r["period"]),
                fmt(ph["odd_amplitude"] / r["period"]),
                fmt(wk["max_abs"] / r["length"]),
                _fixed_text(r["phase_fixed"], r["period"]),
                _fixed_text(r["detuned"]["phase_fixed"], r["detuned"]["period"]) if "detuned" in r else "-",
                fmt(r["detuned"]["settled"]) if "detuned" in r else "-",
            ]
        )
    table = dict(
        columns=[
            "pair",
            "kind",
            "max |c| (/P)",
            "mean (/P)",
            "peak-to-peak (/P)",
            "odd part max (/P)",
            "max |c| work (/L)",
            "locked lags, equal solo periods",
            "locked lags, detuned by the mean",
            "detuned launches settled",
        ],
        rows=rows,
    )
    detuned_text = "; ".join(
        f"{label}: {_fixed_text(r['detuned']['phase_fixed'], r['detuned']['period'])}, "
        f"{fmt(100 * r['detuned']['settled'], 3)} % of launches settled there"
        for label, r in coupled.items()
        if "detuned" in r
    )
    amplitude_text = "; ".join(
        f"{label}: max |c| = {fmt(r['phase']['max_abs'] / r['period'])} P, mean "
        f"{fmt(r['phase']['mean'] / r['period'])} P, peak-to-peak {fmt(r['phase']['peak_to_peak'] / r['period'])} P "
        f"(work: {fmt(r['work']['max_abs'] / r['length'])} L)"
        for label, r in coupled.items()
        if r["role"] == "coupled"
    )
    why = (
        f"Pairs of sizes w = {SIZES_PAIR[0]:g}, {SIZES_PAIR[1]:g} under a power cap (f(n) = n, d = {WRITE:g}, both "
        f"jobs alone computing for {SOLO_COMPUTE_TIME:g}, one solo period P), coupling against each job alone at its "
        f"own solo speed. Time phase and work: {amplitude_text}. The coupling is mostly a detuning (mean > "
        "peak-to-peak / 2): with equal solo periods no lag is locked and the lag drifts; detuned by the mean coupling "
        f"(the middle of the 1:1 locking range) the pair locks: {detuned_text}. Controls (equal sizes under a binding "
        f"cap; a cap above Σ w): at most {worst_control:.1e} of the circle (threshold {CONTROL_TOL:.0e}). Under "
        f"uniform with max w ≤ C < Σ w (C = {UNIFORM_WINDOW[2]:g}) the cap binds on the pair but both jobs slow by one "
        f"factor: coupling {window_amp:.1e}, none. Over {len(scan['maxmin']['caps'])} caps from "
        f"{fmt(scan['maxmin']['caps'][0])} to {fmt(scan['maxmin']['caps'][-1])} the pair coupled exactly where its two "
        "shared-compute slowdowns differ "
        + (
            "at every cap, for both policies"
            if not any(mismatches.values())
            else f"except at C = {fmt_list([c for v in mismatches.values() for c in v])}"
        )
        + " (maxmin: min w < C < Σ w; uniform: C < max w)."
    )
    rule = (
        f"reproduced if, for each power policy, some unequal-size pair under a binding cap couples (max |c| > "
        f"{COUPLING_TOL:.0e} of the circle in time phase or work), every control stays below {CONTROL_TOL:.0e}, "
        "and over the cap scan the pair couples exactly where `shared_slowdown` gives two different factors; "
        "the parts combine by the usual rule."
    )
    headline = (
        f"max |c| = {fmt(per_policy['maxmin'])} (maxmin), {fmt(per_policy['uniform'])} (uniform) of the circle "
        f"(P or L); controls ≤ {_small(worst_control)}"
    )
    measured = dict(
        max_coupling=per_policy,
        worst_control=worst_control,
        uniform_window_coupling=window_amp,
        scan_mismatches=mismatches,
    )
    return outcome, why, rule, table, headline, measured


def _spectrum_arrays(spectrum) -> dict:
    return dict(
        spectrum,
        branch=np.asarray(spectrum["branch"], int),
        smooth=np.asarray(spectrum["smooth"], bool),
        small_gaps=np.asarray(spectrum["small_gaps"], bool),
        determinant=np.asarray(spectrum["determinant"], float),
    )


def verdict_9b(fcfs) -> tuple:
    """9b's verdict from the measurements (`run`'s ``numbers["fcfs"]``, arrays or their JSON)."""
    cases = fcfs["cases"]
    spectra = {key: _spectrum_arrays(s) for key, s in fcfs["spectra"].items()}
    amp = {
        label: max(r["phase"]["max_abs"] / r["period"], r["work"]["max_abs"] / r["length"])
        for label, r in cases.items()
    }
    fcfs_amp = min(a for label, a in amp.items() if cases[label]["storage"] == "fcfs")
    control = max(a for label, a in amp.items() if cases[label]["storage"] != "fcfs")
    # Claim 2's statement: small gaps of identical jobs, the fully overlapping branch.
    fair_dets = np.concatenate(
        [
            s["determinant"][s["smooth"] & s["small_gaps"] & (s["branch"] == 0)]
            for s in spectra.values()
            if s["storage"] == "fair"
        ]
    )
    fair_err = float(np.max(np.abs(fair_dets - 1))) if fair_dets.size else float("nan")
    parts = [
        REPRODUCED if fcfs_amp > COUPLING_TOL else NOT_REPRODUCED,
        REPRODUCED if control < CONTROL_TOL else NOT_REPRODUCED,
        REPRODUCED if fair_err < DET_TOL else NOT_REPRODUCED,
    ]
    outcome = combine(parts)
    rows = []
    names = {0: "overlapping", 1: "collision-free", 2: "mixed"}
    summary = {}
    for key, s in spectra.items():
        for branch, name in names.items():
            keep = s["smooth"] & (s["branch"] == branch)
            if not keep.any():
                continue
            dets = s["determinant"][keep]
            moduli = np.concatenate([m for m, k in zip(s["eigenvalue_moduli"], keep) if k])
            summary[f"{key} {name}"] = dict(n=int(keep.sum()), det_min=float(dets.min()), det_max=float(dets.max()))
            rows.append(
                [
                    s["storage"],
                    str(s["n_jobs"]),
                    name,
                    f"{int(keep.sum())} of {int((s['branch'] == branch).sum())}",
                    f"{fmt(dets.min())} to {fmt(dets.max())}",
                    f"{fmt(moduli.min())} to {fmt(moduli.max())}",
                ]
            )
    for label, r in cases.items():
        rows.append(
            [
                label,
                "2",
                "pair coupling",
                "-",
                f"max |c| = {fmt(amp[label])} P; mean {fmt(r['phase']['mean'] / r['period'])}; "
                f"p2p {fmt(r['phase']['peak_to_peak'] / r['period'])}",
                _fixed_text(r["phase_fixed"], r["period"]),
            ]
        )
    table = dict(
        columns=["storage", "N", "branch", "smooth points", "det", "|eigenvalues| (or: fixed points)"], rows=rows
    )
    fcfs_over = [v for k, v in summary.items() if k.startswith("fcfs") and k.endswith("overlapping")]
    fcfs_text = "; ".join(
        f"{k}: det {fmt(v['det_min'])} to {fmt(v['det_max'])} over {v['n']} points"
        for k, v in summary.items()
        if k.startswith("fcfs")
    )
    main = cases[FCFS_CASES[0][0]]
    why = (
        f"Identical pairs T = {FCFS_COMPUTE:g}, d = {FCFS_WRITE:g}, f ≡ 1. Under fcfs the coupling reaches "
        f"{fmt(fcfs_amp)} of the period in every fcfs case (mean {fmt(main['phase']['mean'] / main['period'])} P, odd: "
        f"peak-to-peak {fmt(main['phase']['peak_to_peak'] / main['period'])} P). A launch with overlapping writes is "
        "moved in one cycle to windows that touch (the waiting writer starts where the head ends); the fixed points "
        f"are {_fixed_text(main['phase_fixed'], main['period'])}; {fmt(100 * main['settled'], 3)} % of launches have "
        f"stopped moving after {main['n_cycles']} cycles. Fair sharing of the same f (the control): {control:.1e} "
        f"(threshold {CONTROL_TOL:.0e}). Gap-map Jacobians by jacfwd where the map is smooth: {fcfs_text}"
        + (" (on the overlapping branch the map is locally constant: det 0, every eigenvalue 0)" if fcfs_over else "")
        + f"; fair storage gives |det − 1| ≤ {_small(fair_err)} at the small-gap points of the overlapping branch "
        "(claim 2's det = 1; elsewhere its determinants are in the table)."
    )
    rule = (
        f"reproduced if every fcfs identical pair couples (max |c| > {COUPLING_TOL:.0e} of the period), the fair "
        f"control stays below {CONTROL_TOL:.0e}, and fair storage has |det − 1| < {DET_TOL:.0e} at every smooth "
        "small-gap point of the overlapping branch (claim 2); the fcfs determinants are reported."
    )
    fcfs_dets = [v for k, v in summary.items() if k.startswith("fcfs")]
    headline = f"fcfs max |c| = {fmt(fcfs_amp)} P (fair: {_small(control)}); fair |det − 1| ≤ {_small(fair_err)}"
    if fcfs_dets:
        headline += (
            f"; fcfs det {fmt(min(v['det_min'] for v in fcfs_dets))} to {fmt(max(v['det_max'] for v in fcfs_dets))}"
        )
    measured = dict(fcfs_coupling=fcfs_amp, fair_coupling=control, fair_det_error=fair_err, spectra=summary)
    return outcome, why, rule, table, headline, measured


@in_float64
def run(out_dir, size: str = "quick", progress: bool = True) -> dict:
    """Measures claim 9's coupling functions and spectra; writes ``anonymity.json`` and figures.

    Args:
      out_dir: output directory.
      size: "smoke", "quick" or "full" (launch-lag grid, cycles, cap scan, fleet sizes N).
      progress: unused (small batches); kept for the common signature.
    """
    from .anonymity_figures import figure_9a_coupling, figure_9a_locking, figure_9b

    out_dir, size, config, started = begin(out_dir, size, SIZES)
    sizes = _sizes_part(config)
    fcfs = _fcfs_part(config)
    figures_a = [
        save_figure(
            figure_9a_coupling(sizes, coupling_tol=COUPLING_TOL, control_tol=CONTROL_TOL, sizes_pair=SIZES_PAIR),
            out_dir / f"{NAME}_9a.png",
        ),
        save_figure(figure_9a_locking(sizes), out_dir / f"{NAME}_9a_locking.png"),
    ]
    figure_b = save_figure(figure_9b(fcfs, coupling_tol=COUPLING_TOL), out_dir / f"{NAME}_9b.png")
    thresholds = dict(
        COUPLING_TOL=COUPLING_TOL,
        CONTROL_TOL=CONTROL_TOL,
        FACTOR_TOL=FACTOR_TOL,
        DET_TOL=DET_TOL,
        SETTLE_RADIUS=SETTLE_RADIUS,
    )
    titles = {
        "9a": "unequal job sizes under a binding cap couple a pair (maxmin and uniform power)",
        "9b": "fcfs storage couples identical jobs",
    }
    verdicts = []
    for sub, decide, data, figures in (("9a", verdict_9a, sizes, figures_a), ("9b", verdict_9b, fcfs, [figure_b])):
        outcome, why, rule, table, headline, measured = decide(data)
        verdicts.append(
            verdict(
                9,
                outcome,
                why,
                sub_claim=sub,
                title=titles[sub],
                headline=headline,
                rule=rule,
                thresholds=thresholds,
                figures=figures,
                table=table,
                **measured,
            )
        )
    numbers = dict(n_cycles=config["n_cycles"], sizes=sizes, fcfs=fcfs, seconds=time.perf_counter() - started)
    return finish(out_dir, EXPERIMENT, size, numbers, verdicts, figures_a + [figure_b])


EXPERIMENT = Experiment(
    name=NAME,
    title="job sizes and fcfs storage: neutrality needs anonymity",
    claims=CLAIMS,
    sizes=SIZES,
    run=run,
)
