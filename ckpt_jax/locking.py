"""Reading a pair's coupling function: its size, its shape and the lags it locks to
(docs/model.md claims 8 and 9).

`ckpt_jax.coupling.coupling_function` samples, on a grid of launch lags δ, how far one
cycle moves a pair's lag beyond the uncoupled map (the coupling c) and how far it moves the
lag at all (the displacement D = wrap(lag after − lag before)). This module summarises such
samples on the circle of circumference L:

* `coupling_stats`: the largest |c|, its mean (a detuning: a shift of every lag alike, i.e.
  of the pair's common frequency), its peak-to-peak (the width of the 1:1 locking range:
  a pair whose solo detuning per cycle lies inside [min c, max c] has a locked lag), and
  its odd part (what pushes the lag towards or away from synchrony).
* `locked_lags`: the fixed points of the lag map δ ↦ δ + D(δ), i.e. the zeros of D, with
  the slope of the lag map there (stable when |slope| < 1), and whole intervals of fixed
  points (neutral lags, claim 1's P(δ) = δ).
* `settled_fraction`: how many long-run lags ended at a stable fixed point.

Everything here is NumPy on sampled values; it makes no assumption about the model.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

__all__ = ["FixedPoint", "coupling_stats", "odd_part", "locked_lags", "settled_fraction", "circle_distance"]


def _wrap(x, length):
    return x - length * np.round(x / length)


def circle_distance(a, b, length):
    """|a − b| on the circle of circumference ``length``."""
    return np.abs(_wrap(np.asarray(a, np.float64) - np.asarray(b, np.float64), length))


def odd_part(deltas, coupling, length: float) -> float:
    """S = [mean c on (0, L/2) − mean c on (L/2, L)] / 2: > 0 repels from synchrony.

    A positive c moves job 1's lag up, so S > 0 means lags just after synchrony (small δ)
    grow and lags just before it (δ near L) shrink: synchrony repels."""
    deltas = np.asarray(deltas, np.float64)
    coupling = np.asarray(coupling, np.float64)
    trailing = deltas < length / 2
    return float((np.mean(coupling[trailing]) - np.mean(coupling[~trailing])) / 2)


def coupling_stats(deltas, coupling, length: float) -> dict:
    """Size and shape of a sampled coupling function c(δ) on the circle (0, L).

    Args:
      deltas: (M,) sorted lags in (0, L).
      coupling: (M,) c at those lags.
      length: L.

    Returns:
      dict with ``max_abs`` (max |c|), ``mean``, ``peak_to_peak`` (max c − min c),
      ``minimum``, ``maximum``, ``odd_amplitude`` and ``even_amplitude`` (max |c_odd| and
      max |c_even| with c_odd(δ) = [c(δ) − c(L − δ)] / 2, c(L − δ) interpolated
      periodically), and ``odd_part`` (`odd_part`, the sign of the odd part).

    >>> d = (np.arange(8) + 0.5) / 8
    >>> s = coupling_stats(d, 0.1 + 0.05 * np.sin(2 * np.pi * d), 1.0)
    >>> round(s["mean"], 12), round(s["odd_amplitude"], 3), round(s["even_amplitude"], 3)
    (0.1, 0.046, 0.1)
    """
    deltas = np.asarray(deltas, np.float64)
    coupling = np.asarray(coupling, np.float64)
    mirrored = np.interp(length - deltas, deltas, coupling, period=length)
    odd = (coupling - mirrored) / 2
    even = (coupling + mirrored) / 2
    return dict(
        max_abs=float(np.max(np.abs(coupling))),
        mean=float(np.mean(coupling)),
        peak_to_peak=float(np.ptp(coupling)),
        minimum=float(np.min(coupling)),
        maximum=float(np.max(coupling)),
        odd_amplitude=float(np.max(np.abs(odd))),
        even_amplitude=float(np.max(np.abs(even))),
        odd_part=odd_part(deltas, coupling, length),
    )


class FixedPoint(NamedTuple):
    """A locked lag of a pair's lag map, from samples.

    Attributes:
      lag: where D = 0 (linear interpolation between the two samples around a sign change),
        or the first lag of an interval of fixed points.
      end: the last lag of an interval (``lag`` for an isolated zero).
      slope: the lag map's slope 1 + dD/dδ there (the secant over the grid cell around an
        isolated zero; 1 on an interval).
      stable: |slope| < 1 (an interval is neutral, never stable).
      kind: "isolated", "interval" (consecutive samples with |D| ≤ tol) or "all" (every
        sample: the neutral map P(δ) = δ).
    """

    lag: float
    end: float
    slope: float
    stable: bool
    kind: str


def locked_lags(deltas, displacement, length: float, tol: float = 0.0) -> list:
    """Fixed points of a sampled circle map δ ↦ δ + D(δ): the zeros of D and their slopes.

    The samples lie on the circle (0, L), sorted; the last is followed by the first (plus
    L). An isolated zero is a sign change between two neighbouring samples with |D| > tol,
    unless D jumps there by L/2 or more (the wrap of D itself at ±L/2, not a zero).
    Samples with |D| ≤ tol are zeros; a run of them (circularly) is an interval.

    Args:
      deltas: (M,) sorted lags in (0, L).
      displacement: (M,) D(δ) = wrap(lag after one cycle − δ), in [−L/2, L/2].
      length: L.
      tol: |D| at or below this is zero.

    Returns:
      list of `FixedPoint`, in order of ``lag``.

    Examples:
      >>> d = (np.arange(10) + 0.5) / 10
      >>> shift = -0.1 * np.sin(2 * np.pi * d) / np.pi
      >>> [(round(p.lag, 6), round(p.slope, 6), p.stable) for p in locked_lags(d, shift, 1.0)]
      [(0.0, 0.803274, True), (0.5, 1.196726, False)]
    """
    deltas = np.asarray(deltas, np.float64)
    shift = np.asarray(displacement, np.float64)
    if deltas.shape != shift.shape or deltas.ndim != 1 or deltas.size < 2:
        raise ValueError(
            f"deltas and displacement must be 1-D of one length >= 2, got {deltas.shape} and {shift.shape}"
        )
    zero = np.abs(shift) <= tol
    n = deltas.size
    if zero.all():
        return [FixedPoint(float(deltas[0]), float(deltas[-1]), 1.0, False, "all")]
    found = []
    # Runs of zeros, started after a non-zero sample so none is split by the wrap.
    start = int(np.argmin(zero))
    k = 0
    while k < n:
        i = (start + k) % n
        if zero[i]:
            run = 0
            while zero[(i + run) % n]:
                run += 1
            found.append(FixedPoint(float(deltas[i]), float(deltas[(i + run - 1) % n]), 1.0, False, "interval"))
            k += run
        else:
            k += 1
    for i in range(n):
        j = (i + 1) % n
        a, b = shift[i], shift[j]
        if zero[i] or zero[j] or np.sign(a) == np.sign(b) or abs(b - a) >= length / 2:
            continue
        step = deltas[j] - deltas[i] + (length if j == 0 else 0.0)
        where = deltas[i] - a * step / (b - a)
        slope = 1 + (b - a) / step
        found.append(
            FixedPoint(float(where % length), float(where % length), float(slope), bool(abs(slope) < 1), "isolated")
        )
    return sorted(found, key=lambda p: p.lag)


def settled_fraction(final_lags, fixed_points, length: float, radius: float) -> float:
    """Fraction of ``final_lags`` within ``radius`` (on the circle) of a stable isolated
    fixed point, or inside (or within ``radius`` of) an interval of fixed points."""
    final = np.asarray(final_lags, np.float64)
    near = np.zeros(final.shape, bool)
    for point in fixed_points:
        if point.kind == "all":
            return 1.0
        if point.kind == "isolated":
            if point.stable:
                near |= circle_distance(final, point.lag, length) <= radius
        else:
            width = (point.end - point.lag) % length
            near |= ((final - point.lag) % length <= width + radius) | (
                circle_distance(final, point.lag, length) <= radius
            )
    return float(np.mean(near))
