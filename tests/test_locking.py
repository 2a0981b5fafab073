"""Reading coupling functions: their size and shape, locked lags and their stability (claim 9)."""

import numpy as np
import pytest

from ckpt_jax.locking import coupling_stats, locked_lags, odd_part, settled_fraction

GRID = (np.arange(40) + 0.5) / 40 * 8.0  # a circle of circumference L = 8


def test_stats_of_a_detuned_sine():
    c = 0.3 + 0.2 * np.sin(2 * np.pi * GRID / 8.0)
    stats = coupling_stats(GRID, c, 8.0)
    assert stats["mean"] == pytest.approx(0.3, abs=1e-12)
    assert stats["peak_to_peak"] == pytest.approx(0.4, rel=1e-2)
    assert stats["max_abs"] == pytest.approx(0.5, rel=1e-2)
    assert stats["odd_amplitude"] == pytest.approx(0.2, rel=1e-2)
    assert stats["even_amplitude"] == pytest.approx(0.3, rel=1e-12)  # a sine is odd: only the mean is even
    assert stats["odd_part"] > 0 and odd_part(GRID, -c, 8.0) < 0


def test_zeros_and_slopes_of_a_sine_lag_map():
    # D = −k sin(2π δ / L): zeros at 0 and L/2; slope of the lag map 1 ∓ 2πk/L.
    k = 0.4
    points = locked_lags(GRID, -k * np.sin(2 * np.pi * GRID / 8.0), 8.0)
    assert [p.kind for p in points] == ["isolated", "isolated"]
    lags = [p.lag for p in points]
    assert min(abs(lags[0]), abs(lags[0] - 8.0)) < 1e-9 and lags[1] == pytest.approx(4.0, abs=1e-9)
    assert points[0].slope == pytest.approx(1 - 2 * np.pi * k / 8.0, rel=2e-3) and points[0].stable
    assert points[1].slope == pytest.approx(1 + 2 * np.pi * k / 8.0, rel=2e-3) and not points[1].stable
    # The opposite sign swaps stability.
    flipped = locked_lags(GRID, k * np.sin(2 * np.pi * GRID / 8.0), 8.0)
    assert [p.stable for p in flipped] == [False, True]


def test_a_detuning_beyond_the_locking_range_has_no_zero():
    assert locked_lags(GRID, 0.3 + 0.2 * np.sin(2 * np.pi * GRID / 8.0), 8.0) == []
    # Inside the range: two zeros, one stable.
    points = locked_lags(GRID, 0.1 + 0.2 * np.sin(2 * np.pi * GRID / 8.0), 8.0)
    assert len(points) == 2 and sum(p.stable for p in points) == 1


def test_the_wrap_of_the_displacement_is_not_a_zero():
    # D rises through L/2 and reappears at −L/2: a jump of L, not a crossing of 0.
    shift = np.where(GRID < 4.0, 3.9, -3.9)
    shift = np.where(np.abs(GRID - 4.0) < 0.5, np.sign(GRID - 4.0) * -3.99, shift)
    assert all(p.lag != pytest.approx(4.0, abs=0.5) for p in locked_lags(GRID, shift, 8.0))


def test_plateaus_are_intervals_and_a_neutral_map_is_all_fixed():
    assert [p.kind for p in locked_lags(GRID, np.zeros_like(GRID), 8.0, tol=1e-12)] == ["all"]
    # fcfs-like: pushed up below 2, fixed on [2, 6], pushed down above 6, a jump at 0.
    shift = np.where(GRID < 2.0, 2.0 - GRID, np.where(GRID > 6.0, 6.0 - GRID, 0.0))
    points = locked_lags(GRID, shift, 8.0, tol=1e-12)
    kinds = sorted(p.kind for p in points)
    assert kinds == ["interval", "isolated"]
    interval = next(p for p in points if p.kind == "interval")
    assert interval.lag == pytest.approx(2.1) and interval.end == pytest.approx(5.9)
    jump = next(p for p in points if p.kind == "isolated")
    assert min(jump.lag, 8.0 - jump.lag) < 0.2 and not jump.stable  # synchrony repels
    final = np.concatenate([np.full(5, 3.0), np.full(3, 0.05)])
    assert settled_fraction(final, points, 8.0, radius=0.01) == pytest.approx(5 / 8)


def test_a_plateau_across_the_wrap_is_one_interval():
    shift = np.where((GRID < 1.0) | (GRID > 7.0), 0.0, np.sin(np.pi * (GRID - 1.0) / 6.0))
    intervals = [p for p in locked_lags(GRID, shift, 8.0, tol=0.0) if p.kind == "interval"]
    assert len(intervals) == 1 and intervals[0].lag == pytest.approx(7.1) and intervals[0].end == pytest.approx(0.9)


def test_bad_input():
    with pytest.raises(ValueError, match="1-D"):
        locked_lags(GRID, np.zeros(3), 8.0)
