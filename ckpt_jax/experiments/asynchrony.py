"""Claim 11: asynchrony and phase-blindness, the coupling function of two-level pairs.

Two identical jobs checkpoint in two levels (docs/model.md §1d): a blocking snapshot s, then
a background drain of d while the next compute T runs, and backpressure (a job whose next
snapshot is due waits for its drain). The experiment measures the pair's coupling function
``P(δ) − δ`` (`coupling.two_level_coupling`: job 1 launched at time phase δ, read at job 0's
next firing, through the general loop in float64) on a grid of T, s and f, and of the write
limit b in one slice, and compares where it is non-zero with the conditions:

* drains keep up, D(2) ≤ T with D(n) = d / min(b, f(n)/n): no drain outlasts its compute,
  so the pair fires as two lone jobs and the coupling is exactly zero;
* the band `theory.two_level_pair_band`, D(1) < T < T_c = D(2) − s·(D(2)/D(1) − 1): where
  the coupling is predicted non-zero (outside it the pair keeps its lag even while drains
  back up).

Every time is in units of d / f(1) (d = 1, f(1) = 1). Per grid cell the number is
``max_δ |P(δ) − δ| / P`` over M launch lags, P = s + max(T, D(1)) the lone period (the first
cycle: the coupling function). The coupled cells are then followed for ``RELAX_CYCLES``
returns of job 0, to see whether the pair keeps coupling once its launch has relaxed.
"""

from __future__ import annotations

import time
from typing import NamedTuple, TypedDict

import numpy as np

from .. import Fleet, throughput_table
from ..coupling import two_level_coupling
from ..theory import two_level_pair_band
from .framework import (
    NOT_REPRODUCED,
    PARTIALLY,
    REPRODUCED,
    Experiment,
    begin,
    finish,
    fmt,
    in_float64,
    new_figure,
    save_figure,
    verdict,
)

NAME = "asynchrony"
CLAIMS = (11,)

WRITE = 1.0  # d; f(1) = 1, so D(1) = 1 without a write limit
COMPUTE_RANGE = (0.25, 4.5)  # T / d, cell midpoints
SNAPSHOT_RANGE = (0.0, 1.5)  # s / d
LIMIT_RANGE = (0.25, 1.75)  # b / f(1), the write-limit slice
LIMIT_SNAPSHOT = 0.25  # s / d of the write-limit slice
# (label, throughput, column variable): f(2) = 1, √2 and 2 give per-writer rates f(2)/2 of
# 1/2, 1/√2 and 1 (no contention: the control, where no band exists).
PANELS = (
    ("f ≡ 1", "shared", "snapshot"),
    ("f(n) = √n", "sqrt", "snapshot"),
    ("f(n) = n (no contention)", "linear", "snapshot"),
    (f"f ≡ 1, write limit b, s = {LIMIT_SNAPSHOT:g} d", "shared", "write_limit"),
)
RELAX_CYCLES = 24  # returns of job 0 followed from each launch of a coupled cell
RELAX_WINDOW = 4  # the last cycles of those, where a relaxed pair keeps its lag
# The coupling curves: f ≡ 1, s = CURVE_SNAPSHOT, one T in each regime (D(1) = 1, T_c = 1.75, D(2) = 2).
CURVE_SNAPSHOT = 0.25
CURVE_COMPUTES = (
    (2.5, "T > D(2): drains keep up"),
    (1.875, "T_c < T < D(2): drains back up"),
    (1.5, "D(1) < T < T_c: the band"),
    (1.125, "D(1) < T < T_c: the band"),
    (0.75, "T < D(1): lone drains back up"),
)

# Verdict thresholds.
ZERO_TOL = 1e-12  # max |P(δ) − δ| / P ≤ this: exactly zero (rounding)
COUPLED_MIN = 1e-9  # > this: coupled; in between: ambiguous
EDGE_STEPS = 1.0  # a measured edge within this many T-grid steps of the predicted one matches


class _Size(TypedDict):
    n_compute: int  # T cells
    n_columns: int  # s (or b) values per panel
    n_delta: int  # launch lags per pair


SIZES: dict[str, _Size] = {
    "smoke": _Size(n_compute=12, n_columns=3, n_delta=16),
    "quick": _Size(n_compute=68, n_columns=13, n_delta=128),
    "full": _Size(n_compute=272, n_columns=49, n_delta=512),
}


def _grid(n_compute: int, n_columns: int):
    """T cell midpoints and the two column axes (s, b)."""
    low, high = COMPUTE_RANGE
    step = (high - low) / n_compute
    computes = low + (np.arange(n_compute) + 0.5) * step
    return computes, np.linspace(*SNAPSHOT_RANGE, n_columns), np.linspace(*LIMIT_RANGE, n_columns), step


def _panel(throughput: str, column: str, computes, columns) -> dict:
    """The (T, column) grid of one panel: each cell's T, s, b and f table, and the predicted
    edges D(1), T_c and D(2)."""
    compute, value = np.meshgrid(computes, columns, indexing="ij")
    snapshot = value if column == "snapshot" else np.full_like(value, LIMIT_SNAPSHOT)
    limit = value if column == "write_limit" else np.full_like(value, np.inf)
    table = throughput_table(throughput, 2)
    lower, upper = two_level_pair_band(WRITE, snapshot, throughput, limit)
    return dict(
        compute=compute,
        snapshot=snapshot,
        limit=limit,
        table=np.broadcast_to(table, compute.shape + (3,)),
        lower=np.broadcast_to(lower, compute.shape),
        upper=upper,
        shared=WRITE / np.minimum(limit, table[2] / 2),  # D(2)
    )


def _pairs(compute, snapshot, limit, table) -> Fleet:
    """Identical two-level pairs, one per entry of the flat (B,) arrays."""
    return Fleet(
        compute=np.repeat(compute[:, None], 2, axis=1),
        write=WRITE,
        throughput=table,
        snapshot=snapshot[:, None],
        write_limit=limit[:, None],
        dtype=np.float64,
    )


def _measure(panels, phases) -> None:
    """Adds each panel's ``first``: max_δ |P(δ) − δ| / P per cell, all panels in one batch."""
    flat = {
        key: np.concatenate([panel[key].reshape(-1, *panel[key].shape[2:]) for panel in panels])
        for key in ("compute", "snapshot", "limit", "table")
    }
    result = two_level_coupling(_pairs(flat["compute"], flat["snapshot"], flat["limit"], flat["table"]), phases, 1)
    first = (np.abs(result.coupling[:, :, 0]) / result.period[:, 1, None]).max(axis=1)
    offset = 0
    for panel in panels:
        size = panel["compute"].size
        panel["first"] = first[offset : offset + size].reshape(panel["compute"].shape)
        offset += size


def _relaxation(panels, phases):
    """Follows the coupled cells' launches, and the coupling curves' pairs, for `RELAX_CYCLES`
    returns of job 0 (one batch). Returns per coupled cell the largest coupling / P in each
    cycle, (cells, RELAX_CYCLES), and the curves (`_curves`)."""
    coupled = [panel["first"] > COUPLED_MIN for panel in panels]
    computes = np.asarray([c for c, _ in CURVE_COMPUTES])
    n_curves = computes.size

    def pick(key, curve_value):
        cells = [panel[key][mask] for panel, mask in zip(panels, coupled, strict=True)]
        return np.concatenate([np.broadcast_to(curve_value, (n_curves,) + cells[0].shape[1:]), *cells])

    fleets = _pairs(
        pick("compute", computes),
        pick("snapshot", CURVE_SNAPSHOT),
        pick("limit", np.inf),
        pick("table", throughput_table("shared", 2)),
    )
    result = two_level_coupling(fleets, phases, RELAX_CYCLES)
    period = result.period[:, 1]
    relative = np.abs(result.coupling) / period[:, None, None]
    curves = dict(
        first=result.coupling[:n_curves, :, 0] / period[:n_curves, None],
        kept=result.lags[:n_curves, :, -1] / period[:n_curves, None],
        settled=_settled(relative[:n_curves].max(axis=1)),
    )
    return relative[n_curves:].max(axis=1), curves


def _edges(panel, step):
    """Per column: the measured and predicted edges of the coupled band (NaN where none)."""
    rows = []
    coupled = panel["first"] > COUPLED_MIN
    for j in range(panel["compute"].shape[1]):
        computes = panel["compute"][:, j]
        lower, upper = panel["lower"][0, j], panel["upper"][0, j]
        hits = computes[coupled[:, j]]
        measured = (hits.min() - step / 2, hits.max() + step / 2) if hits.size else (np.nan, np.nan)
        resolvable = upper - lower > 2 * step  # a band of at least two cells
        rows.append(
            dict(
                lower=lower,
                upper=upper,
                shared=panel["shared"][0, j],
                measured_lower=measured[0],
                measured_upper=measured[1],
                resolvable=bool(resolvable),
            )
        )
    return rows


def _log_map(values, floor=-17.0):
    with np.errstate(divide="ignore"):
        return np.log10(np.maximum(values, 10**floor))


def _map_figure(panels, columns_by_panel, computes, step):
    from matplotlib import colormaps

    floor = -17.0
    fig = new_figure(figsize=(12, 9.5), layout="constrained")
    axes = fig.subplots(2, 2, sharey=True)
    image = None
    for ax, (label, throughput, column), panel, columns in zip(
        axes.ravel(), PANELS, panels, columns_by_panel, strict=True
    ):
        half = (columns[1] - columns[0]) / 2 if len(columns) > 1 else 0.05
        image = ax.imshow(
            _log_map(panel["first"], floor),
            origin="lower",
            aspect="auto",
            cmap=colormaps["magma_r"],
            vmin=floor,
            vmax=0,
            extent=(columns[0] - half, columns[-1] + half, computes[0] - step / 2, computes[-1] + step / 2),
            interpolation="nearest",
        )
        x = np.linspace(columns[0] - half, columns[-1] + half, 400)
        s = np.maximum(x, 0) if column == "snapshot" else np.full_like(x, LIMIT_SNAPSHOT)
        limit = np.maximum(x, 1e-9) if column == "write_limit" else None
        lower, upper = two_level_pair_band(WRITE, s, throughput, limit)
        f2 = throughput_table(throughput, 2)[2]
        shared = WRITE / np.minimum(np.inf if limit is None else limit, f2 / 2) * np.ones_like(x)
        lower = lower * np.ones_like(x)
        band = upper > lower
        ax.plot(x, shared, color="tab:blue", ls="--", lw=1.5, label="D(2) = T")
        ax.plot(x, lower, color="tab:green", ls=":", lw=2, label="D(1) = T")
        ax.plot(x[band], upper[band], color="tab:cyan", lw=2, label="T_c = D(2) − s (D(2)/D(1) − 1)")
        ax.set_ylim(computes[0] - step / 2, computes[-1] + step / 2)
        ax.set_xlim(x[0], x[-1])
        ax.set_title(label, fontsize=11)
        ax.set_xlabel("s / d" if column == "snapshot" else "b / f(1)")
        if ax in axes[:, 0]:
            ax.set_ylabel("T / d")
    axes[0, 0].legend(loc="upper right", fontsize=9, framealpha=0.9)
    assert image is not None  # one per panel
    bar = fig.colorbar(image, ax=axes, shrink=0.8, label="log10 max_δ |P(δ) − δ| / P   (exact zeros at 1e-17)")
    bar.ax.axhline(np.log10(ZERO_TOL), color="tab:red", lw=2)
    fig.suptitle(
        "Claim 11: coupling of two identical two-level jobs; predicted band D(1) < T < T_c between the green "
        f"and cyan lines\n(d = 1, f(1) = 1; red mark on the colour bar: zero threshold {ZERO_TOL:.0e})",
        fontsize=12,
    )
    return fig


def _curve_figure(curves, phases):
    fig = new_figure(figsize=(15, 7), layout="constrained")
    axes = fig.subplots(2, len(CURVE_COMPUTES), sharey="row", sharex=True)
    for k, (compute, regime) in enumerate(CURVE_COMPUTES):
        top, bottom = axes[0, k], axes[1, k]
        first = curves["first"][k]
        top.axhline(0, color="0.7", lw=0.8)
        top.plot(phases, first, color="tab:red", lw=1.8)
        top.set_title(f"T = {compute:g} d\n{regime}\nmax |P(δ) − δ| / P = {fmt(np.abs(first).max())}", fontsize=10)
        bottom.plot([0, 1], [0, 1], color="0.7", lw=0.8)
        bottom.plot(phases, curves["kept"][k], color="tab:blue", lw=1.8)
        settled = curves["settled"][k]
        kept = (
            "every launch lag is kept"
            if settled == 0
            else f"lags kept after {settled} cycle{'' if settled == 1 else 's'}"
        )
        bottom.set_title(kept, fontsize=10)
        bottom.set_xlabel("launch lag δ / P")
    axes[0, 0].set_ylabel("first cycle: (P(δ) − δ) / P")
    axes[1, 0].set_ylabel(f"lag after {RELAX_CYCLES} cycles / P")
    fig.suptitle(
        f"Claim 11: coupling functions of an identical two-level pair, f ≡ 1, s = {CURVE_SNAPSHOT:g} d "
        "(D(1) = 1, T_c = 1.75, D(2) = 2)\ntop: the coupling function; bottom: the lag each launch ends at "
        "(grey: the identity)",
        fontsize=12,
    )
    return fig


def _settled(relative) -> np.ndarray:
    """Per row of (..., K) couplings / P: the cycles after which every one is <= ZERO_TOL."""
    coupled = relative > ZERO_TOL
    last = relative.shape[-1] - np.argmax(coupled[..., ::-1], axis=-1)
    return np.where(coupled.any(axis=-1), last, 0)


@in_float64
def run(out_dir, size: str = "quick", progress: bool = True) -> dict:
    """Measures the coupling of identical two-level pairs over (T, s, f) and (T, b).

    Args:
      out_dir: directory for ``asynchrony.json`` and the PNG figures.
      size: "smoke", "quick" or "full" (grid resolution).
      progress: unused (one compiled call per panel); kept for the common signature.
    """
    out_dir, size, config, started = begin(out_dir, size, SIZES)
    computes, snapshots, limits, step = _grid(config["n_compute"], config["n_columns"])
    phases = (np.arange(config["n_delta"]) + 0.5) / config["n_delta"]
    columns_by_panel = [snapshots if column == "snapshot" else limits for _, _, column in PANELS]
    panels = [
        _panel(throughput, column, computes, columns)
        for (_, throughput, column), columns in zip(PANELS, columns_by_panel, strict=True)
    ]
    _measure(panels, phases)
    relax, curves = _relaxation(panels, phases)  # relax: (coupled cells, RELAX_CYCLES)
    cells = _classify(panels, step)
    settled = _settled(relax)
    late = float(relax[:, -RELAX_WINDOW:].max()) if relax.size else 0.0
    edges = [_edges(panel, step) for panel in panels]
    figures = [
        save_figure(_map_figure(panels, columns_by_panel, computes, step), out_dir / f"{NAME}_map.png"),
        save_figure(_curve_figure(curves, phases), out_dir / f"{NAME}_curves.png"),
    ]
    verdicts = [
        _verdict_keep_up(cells, panels, config["n_delta"]),
        _verdict_backed_up(cells, settled, late, figures[1]),
        _verdict_boundary(cells, edges, step, figures[0]),
    ]
    numbers = dict(
        write=WRITE,
        compute_range=COMPUTE_RANGE,
        compute_step=step,
        snapshots=snapshots,
        write_limits=limits,
        limit_snapshot=LIMIT_SNAPSHOT,
        n_delta=config["n_delta"],
        relax_cycles=RELAX_CYCLES,
        relaxation=dict(
            cells=int(relax.shape[0]),
            cycles_to_keep_max=int(settled.max(initial=0)),
            cycles_to_keep_median=float(np.median(settled)) if settled.size else 0.0,
            max_coupling_last_cycles=late,
        ),
        panels={
            label: dict(
                throughput=throughput,
                column=column,
                max_first=float(panel["first"].max()),
                coupled_cells=int((panel["first"] > COUPLED_MIN).sum()),
                edges=edges[p],
            )
            for p, ((label, throughput, column), panel) in enumerate(zip(PANELS, panels, strict=True))
        },
        curves=dict(
            snapshot=CURVE_SNAPSHOT,
            computes=[c for c, _ in CURVE_COMPUTES],
            max_first=np.abs(curves["first"]).max(axis=1),
            cycles_to_keep=curves["settled"],
        ),
        seconds=time.perf_counter() - started,
    )
    return finish(out_dir, EXPERIMENT, size, numbers, verdicts, figures)


class _Cells(NamedTuple):
    """Every cell of every panel, flat: its compute work T and first-cycle coupling
    max_δ |P(δ) − δ| / P, the band's edges and D(2), and how it is classified."""

    compute: np.ndarray
    first: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    shared: np.ndarray
    keep_up: np.ndarray  # D(2) ≤ T: no drain outlasts its compute
    coupled: np.ndarray  # coupling above COUPLED_MIN
    ambiguous: np.ndarray  # neither coupled nor zero
    far: np.ndarray  # more than EDGE_STEPS T steps from the band's edges
    mismatch: np.ndarray  # far from the edges, and not as the band predicts


def _classify(panels: list, step: float) -> _Cells:
    """The cells of every panel, classified against the band D(1) < T < T_c."""

    def stack(key):
        return np.concatenate([panel[key].ravel() for panel in panels])

    compute, first = stack("compute"), stack("first")
    lower, upper, shared = stack("lower"), stack("upper"), stack("shared")
    coupled = first > COUPLED_MIN
    zero = first <= ZERO_TOL
    ambiguous = ~coupled & ~zero
    predicted = (lower < compute) & (compute < upper)
    near_edge = (np.abs(compute - lower) <= EDGE_STEPS * step) | (np.abs(compute - upper) <= EDGE_STEPS * step)
    near_edge &= upper > lower  # an empty band has no edge
    far = ~near_edge
    mismatch = far & ((coupled != predicted) | ambiguous)
    return _Cells(compute, first, lower, upper, shared, compute >= shared, coupled, ambiguous, far, mismatch)


def _table(panels: list) -> dict:
    """The report's table: per panel its cells, the keep-up cells' largest coupling, the
    backed-up, coupled and in-band cells, and the largest coupling."""

    def panel_row(p, label):
        panel = panels[p]
        cells = panel["first"]
        keep = panel["compute"] >= panel["shared"]
        hits = cells > COUPLED_MIN
        band = (panel["lower"] < panel["compute"]) & (panel["compute"] < panel["upper"])
        return [
            label,
            str(cells.size),
            fmt(cells[keep].max()) if keep.any() else "n/a",
            str(int((~keep).sum())),
            str(int(hits.sum())),
            str(int(band.sum())),
            fmt(cells.max()),
        ]

    return dict(
        columns=[
            "panel",
            "cells",
            "max |P−δ|/P, D(2) ≤ T",
            "cells D(2) > T",
            "coupled cells",
            "cells in band",
            "max |P−δ|/P",
        ],
        rows=[panel_row(p, label) for p, (label, _, _) in enumerate(PANELS)],
    )


def _verdict_keep_up(cells: _Cells, panels: list, n_delta: int) -> dict:
    """11a: exactly zero while drains keep up (D(2) ≤ T)."""
    keep_up, first = cells.keep_up, cells.first
    worst_keep_up = float(first[keep_up].max()) if keep_up.any() else float("nan")
    claim_a = keep_up.any() and worst_keep_up <= ZERO_TOL
    return verdict(
        11,
        REPRODUCED if claim_a else NOT_REPRODUCED,
        f"Over the {int(keep_up.sum())} of {int(first.size)} cells where drains keep up (D(2) ≤ T, so no drain "
        f"outlasts its compute), the largest max_δ |P(δ) − δ| / P is {worst_keep_up:.1e}, against the threshold "
        f"{ZERO_TOL:.0e} ({n_delta} launch lags per pair, f ≡ 1, √n and n, write limits).",
        sub_claim="11a",
        title="exactly zero while drains keep up (D(2) ≤ T)",
        headline=f"max |P(δ) − δ| / P = {worst_keep_up:.1e} over {int(keep_up.sum())} keep-up cells",
        rule=f"reproduced if max |P(δ) − δ| / P ≤ {ZERO_TOL:.0e} over every cell with D(2) ≤ T.",
        thresholds=dict(ZERO_TOL=ZERO_TOL),
        table=_table(panels),
        max_keep_up=worst_keep_up,
        keep_up_cells=int(keep_up.sum()),
    )


def _verdict_backed_up(cells: _Cells, settled: np.ndarray, late: float, figure: str) -> dict:
    """11b: non-zero once drains back up. Where does coupling appear?"""
    first, coupled, keep_up = cells.first, cells.coupled, cells.keep_up
    backed_up = ~keep_up
    lone_backs_up = backed_up & (cells.compute <= cells.lower)
    pairwise_only = backed_up & (cells.compute >= cells.upper) & (cells.compute > cells.lower)
    n_backed, n_coupled_backed = int(backed_up.sum()), int((backed_up & coupled).sum())
    if n_backed and n_coupled_backed == n_backed:
        outcome = REPRODUCED
    elif n_coupled_backed and not (keep_up & coupled).any():
        outcome = PARTIALLY
    else:
        outcome = NOT_REPRODUCED
    return verdict(
        11,
        outcome,
        f"Of the {n_backed} cells where drains can back up (D(2) > T), {n_coupled_backed} couple "
        f"(max |P(δ) − δ| / P > {COUPLED_MIN:.0e}, largest {float(first.max()):.3g}). The others stay exactly "
        f"zero (largest {float(first[backed_up & ~coupled].max()) if (backed_up & ~coupled).any() else 0:.1e}): "
        f"{int(lone_backs_up.sum())} with T ≤ D(1), where even a lone drain backs up and the pair is a closed "
        f"loop of two equal drains shared fairly, and {int(pairwise_only.sum())} with T_c ≤ T < D(2), where "
        "drains back up only while they overlap each other, and then end equally late. Backup is necessary for "
        f"coupling, not sufficient. Followed for {RELAX_CYCLES} cycles, every launch of the coupled cells "
        f"reaches a lag the pair then keeps exactly, after at most {int(settled.max(initial=0))} cycles "
        f"(median {fmt(float(np.median(settled)) if settled.size else 0.0)}; largest coupling in the last "
        f"{RELAX_WINDOW} cycles {late:.1e} of P): the coupling moves lags onto a set the pair is blind to.",
        sub_claim="11b",
        title="non-zero once drains back up",
        headline=f"{n_coupled_backed} of {n_backed} backed-up cells couple; max |P(δ) − δ| / P = "
        f"{float(first.max()):.3g}",
        rule=f"reproduced if every cell with D(2) > T has max |P(δ) − δ| / P > {COUPLED_MIN:.0e}; partially if "
        "some do and no keep-up cell does; not reproduced otherwise.",
        thresholds=dict(COUPLED_MIN=COUPLED_MIN),
        figures=[figure],
        backed_up_cells=n_backed,
        coupled_backed_up_cells=n_coupled_backed,
        zero_lone_backs_up=int(lone_backs_up.sum()),
        zero_pairwise_only=int(pairwise_only.sum()),
        max_coupling_last_cycles=late,
        cycles_to_keep_max=int(settled.max(initial=0)),
    )


def _verdict_boundary(cells: _Cells, edges: list, step: float, figure: str) -> dict:
    """11c: the band predicts every cell beyond one grid step of its edges."""
    edge_errors_upper, edge_errors_lower, shared_offsets = [], [], []
    for panel_edges in edges:
        for row in panel_edges:
            if row["resolvable"] and np.isfinite(row["measured_upper"]):
                edge_errors_upper.append(abs(row["measured_upper"] - row["upper"]))
                edge_errors_lower.append(abs(row["measured_lower"] - row["lower"]))
                shared_offsets.append(row["shared"] - row["measured_upper"])
    resolvable = sum(row["resolvable"] for panel_edges in edges for row in panel_edges)
    worst_edge = max(edge_errors_upper + edge_errors_lower, default=float("nan"))
    mismatch, far, ambiguous = cells.mismatch, cells.far, cells.ambiguous
    claim_c = (
        int(mismatch.sum()) == 0
        and len(edge_errors_upper) == resolvable
        and resolvable > 0
        and worst_edge <= EDGE_STEPS * step
    )
    return verdict(
        11,
        REPRODUCED if claim_c else NOT_REPRODUCED,
        f"The band D(1) < T < T_c = D(2) − s (D(2)/D(1) − 1) (theory.two_level_pair_band) predicts all "
        f"{int(far.sum())} cells farther than one T step ({step:g} d) from its edges with "
        f"{int(mismatch.sum())} mismatches ({int(ambiguous.sum())} ambiguous cells in all). In the "
        f"{resolvable} columns whose band spans more than two cells, the measured edges lie within "
        f"{fmt(worst_edge)} d of the predicted ones. D(2) ≤ T alone places the upper edge "
        f"{fmt(max(shared_offsets, default=float('nan')))} d too high at most (it is exact only at s = 0, "
        "and where f(2)/2 = f(1) or b ≤ f(2)/2 there is no band at all); D(1) ≤ T is the lower edge.",
        sub_claim="11c",
        title="the boundary where coupling appears",
        headline=f"{int(mismatch.sum())} mismatches off the edges; edges within {fmt(worst_edge)} d (step {step:g} d)",
        rule="reproduced if the band predicts every cell more than one T step from its edges (no mismatch, no "
        "ambiguous cell) and, in every column whose band spans more than two cells, both measured edges lie "
        "within one T step of the predicted ones.",
        thresholds=dict(EDGE_STEPS=EDGE_STEPS, ZERO_TOL=ZERO_TOL, COUPLED_MIN=COUPLED_MIN),
        figures=[figure],
        mismatches=int(mismatch.sum()),
        far_cells=int(far.sum()),
        ambiguous=int(ambiguous.sum()),
        resolvable_columns=resolvable,
        worst_edge_error=worst_edge,
        max_shared_minus_measured_upper=max(shared_offsets, default=float("nan")),
    )


EXPERIMENT = Experiment(
    name=NAME,
    title="the coupling function of identical two-level pairs (asynchrony and phase-blindness)",
    claims=CLAIMS,
    sizes=SIZES,
    run=run,
)
