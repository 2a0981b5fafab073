"""Trace statistics for claims 5 and 6: smallest gaps, writer-count distributions, baselines."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ckpt_jax as cj
from ckpt_jax.analysis import (
    binomial_baseline,
    mean_writing_fraction,
    observed_interval,
    smallest_gap,
    tail_ratio,
    writer_count,
    writer_distribution,
    writer_excursions,
)

# ---------------------------------------------------------------------------- smallest_gap


def test_smallest_gap_by_hand_with_and_without_period():
    # Cycle 0: 0, 1, 4 → gaps 1, 3 and the closing gap to 10 (next cycle's first): 6.
    # Cycle 1: 10, 12.5, 14 → gaps 2.5, 1.5; no cycle 2, so no closing gap without a period.
    fire = np.array([[0.0, 10.0], [1.0, 12.5], [4.0, 14.0]])
    np.testing.assert_array_equal(np.asarray(smallest_gap(fire)), [1.0, np.nan])
    # With a period of 8: closing gaps 0 + 8 − 4 = 4 and 10 + 8 − 14 = 4; fractions of 8.
    np.testing.assert_allclose(np.asarray(smallest_gap(fire, period=8.0)), [1 / 8, 1.5 / 8], rtol=1e-15)


def test_smallest_gap_closing_gap_can_be_the_smallest():
    # Cycle 0: 0, 3, 6, next cycle starts at 6.5: the wrap-around gap 0.5 is the smallest.
    fire = np.array([[0.0, 6.5, 13.0], [3.0, 9.5, 16.0], [6.0, 12.5, 19.0]])
    np.testing.assert_allclose(np.asarray(smallest_gap(fire))[:2], [0.5, 0.5], rtol=1e-15)
    np.testing.assert_allclose(np.asarray(smallest_gap(fire, period=6.5)), [0.5 / 6.5] * 3, rtol=1e-14)


def test_smallest_gap_is_order_invariant_and_ignores_padding_but_not_stopped_runs():
    fire = np.array([[4.0, 14.0, 24.0], [0.0, 10.0, 20.0], [1.0, 11.5, 21.0]])
    base = np.asarray(smallest_gap(fire, period=10.0))
    # Relabelling jobs changes nothing.
    np.testing.assert_array_equal(np.asarray(smallest_gap(fire[::-1], period=10.0)), base)
    # A padding slot (all NaN) is ignored.
    padded = np.vstack([fire, np.full((1, 3), np.nan)])
    np.testing.assert_array_equal(np.asarray(smallest_gap(padded, period=10.0)), base)
    # A run that stopped early (a real job's last firing missing) gives NaN there, not a
    # minimum over the jobs that happened to fire.
    stopped = fire.copy()
    stopped[2, 2] = np.nan
    out = np.asarray(smallest_gap(stopped, period=10.0))
    np.testing.assert_array_equal(out[:2], base[:2])
    assert np.isnan(out[2])
    # Without a period, cycle 1's closing gap needs cycle 2's first firing; cycle 2 is
    # incomplete, so cycle 1 is NaN too.
    out = np.asarray(smallest_gap(stopped))
    assert np.isfinite(out[0]) and np.isnan(out[1]) and np.isnan(out[2])


def test_smallest_gap_batches_and_broadcasts_period():
    rng = np.random.default_rng(0)
    fire = np.sort(rng.uniform(0, 10, (2, 3, 5, 1)), axis=-2) + 10.0 * np.arange(4)
    period = np.array([[10.0], [20.0]])  # (2, 1) broadcasts against the batch (2, 3)
    out = np.asarray(smallest_gap(fire, period=period))
    assert out.shape == (2, 3, 4)
    for i in range(2):
        for j in range(3):
            np.testing.assert_allclose(out[i, j], np.asarray(smallest_gap(fire[i, j], period=period[i, 0])))
    # jit-able.
    np.testing.assert_allclose(np.asarray(jax.jit(smallest_gap)(fire, 10.0)), np.asarray(smallest_gap(fire, 10.0)))


def test_smallest_gap_of_a_simulated_fleet_matches_the_global_firing_sequence():
    # Identical jobs keep their order (claim 3): the k-th firings are N consecutive firings,
    # so the smallest per-cycle gap equals the smallest gap of the merged firing sequence.
    fleet = cj.Fleet(compute=np.full(6, 0.8), write=np.full(6, 0.2))
    trace = cj.simulate(fleet, cj.random_state(fleet, jax.random.key(3)), 12)
    fire = np.asarray(trace.fire_times)
    ours = np.asarray(smallest_gap(fire))
    sequence = np.sort(fire.ravel())
    gaps = np.diff(sequence).reshape(-1)  # gap m follows the m-th firing
    for k in range(fire.shape[1] - 1):
        np.testing.assert_allclose(ours[k], gaps[6 * k : 6 * k + 6].min(), rtol=1e-12)


def test_smallest_gap_rejects_a_bare_vector():
    with pytest.raises(ValueError, match=r"\(\.\.\., N, K\)"):
        smallest_gap(np.zeros(4))


# --------------------------------------------------------------------- writer_distribution


def _reference_distribution(fire, end, n_jobs):
    """Slow reference: integrate writer_count's step function over observed_interval."""
    t0, t1 = observed_interval(fire, end)
    times, counts = writer_count(fire, end)
    edges = np.concatenate([[-np.inf], times, [np.inf]])
    values = np.concatenate([[0], counts])
    hist = np.zeros(n_jobs + 1)
    for left, right, value in zip(edges[:-1], edges[1:], values):
        width = min(right, t1) - max(left, t0)
        if width > 0:
            hist[value] += width
    return hist / (t1 - t0)


def test_writer_distribution_by_hand():
    # Job 0 writes [0, 1), [3, 4), [6, 7); job 1 writes [0.5, 2), [3.5, 5), [6.5, 8).
    # Observed interval: [0.5, 7] (latest first firing, earliest last end), length 6.5.
    # Two writers on [0.5, 1), [3.5, 4), [6.5, 7): 1.5; one writer on [1, 2), [3, 3.5),
    # [4, 5), [6, 6.5): 3; none on [2, 3), [5, 6): 2.
    fire = np.array([[0.0, 3.0, 6.0], [0.5, 3.5, 6.5]])
    end = np.array([[1.0, 4.0, 7.0], [2.0, 5.0, 8.0]])
    dist = np.asarray(writer_distribution(fire, end))
    np.testing.assert_allclose(dist, np.array([2.0, 3.0, 1.5]) / 6.5, rtol=1e-14)
    np.testing.assert_allclose(dist, _reference_distribution(fire, end, 2), rtol=1e-14)
    # Wider table (n_jobs > N) pads with zeros.
    np.testing.assert_allclose(np.asarray(writer_distribution(fire, end, n_jobs=4))[:3], dist, rtol=1e-14)
    assert np.asarray(writer_distribution(fire, end, n_jobs=4))[3:].tolist() == [0.0, 0.0]


def test_writer_distribution_simultaneous_end_and_start_and_padding():
    # A write ending exactly as another starts (t = 2) and a NaN padding slot.
    fire = np.array([[0.0, 2.0], [1.0, 3.0], [np.nan, np.nan]])
    end = np.array([[2.0, 4.0], [2.5, 5.0], [np.nan, np.nan]])
    dist = np.asarray(writer_distribution(fire, end))
    np.testing.assert_allclose(dist, _reference_distribution(fire, end, 3), rtol=1e-14)
    # Observed [1, 4]: two on [1, 2.5), [3, 4); one on [2.5, 3). Length 3.
    np.testing.assert_allclose(dist, [0.0, 0.5 / 3, 2.5 / 3, 0.0], rtol=1e-14)


def test_writer_distribution_matches_reference_on_simulated_batch():
    fleet = cj.Fleet(compute=np.full((2, 3, 5), 0.7), write=np.full((2, 3, 5), 0.3), throughput="sqrt")
    trace = cj.simulate(fleet, cj.random_state(fleet, jax.random.key(7)), 15)
    dist = np.asarray(writer_distribution(trace.fire_times, trace.end_times))
    assert dist.shape == (2, 3, 6)
    np.testing.assert_allclose(dist.sum(axis=-1), 1.0, rtol=1e-12)
    fire, end = np.asarray(trace.fire_times), np.asarray(trace.end_times)
    for i in range(2):
        for j in range(3):
            np.testing.assert_allclose(dist[i, j], _reference_distribution(fire[i, j], end[i, j], 5), atol=1e-12)


def test_writer_distribution_is_nan_without_an_observed_interval():
    # One cycle: job 1's first firing comes after job 0's only write ended.
    fire = np.array([[0.0], [2.0]])
    end = np.array([[1.0], [3.0]])
    assert np.all(np.isnan(np.asarray(writer_distribution(fire, end))))
    with pytest.raises(ValueError, match="same shape"):
        writer_distribution(fire, end[:, :0])
    with pytest.raises(ValueError, match="n_jobs"):
        writer_distribution(fire, end, n_jobs=1)


def test_independent_incommensurate_jobs_give_the_binomial():
    # Uncoupled jobs with incommensurate periods and the same writing fraction are
    # independent in the long-time average: the distribution must approach Binomial(N, p).
    n_jobs, p, cycles = 5, 0.3, 4000
    periods = 1.0 + 0.1 * np.sqrt(np.array([2.0, 3.0, 5.0, 7.0, 11.0]))
    offsets = np.random.default_rng(1).uniform(0, 1, n_jobs)
    fire = offsets[:, None] * periods[:, None] + periods[:, None] * np.arange(cycles)
    end = fire + p * periods[:, None]
    dist = np.asarray(writer_distribution(fire, end))
    np.testing.assert_allclose(float(mean_writing_fraction(dist)), p, atol=2e-3)
    np.testing.assert_allclose(dist, np.asarray(binomial_baseline(n_jobs, p)), atol=5e-3)
    # And its upper-tail ratio is ≈ 1, while synchronised jobs' is far above 1.
    ratio = np.asarray(tail_ratio(dist, binomial_baseline(n_jobs, p), [3, 4]))
    np.testing.assert_allclose(ratio, 1.0, atol=0.1)
    sync_fire = np.broadcast_to(fire[:1], fire.shape)
    sync = np.asarray(writer_distribution(sync_fire, sync_fire + p * periods[0]))
    assert float(tail_ratio(sync, binomial_baseline(n_jobs, float(mean_writing_fraction(sync))), 5)) > 50


# ----------------------------------------------------------------------------- baselines


@pytest.mark.parametrize("n_jobs", [1, 2, 7, 64])
@pytest.mark.parametrize("p", [0.0, 0.03, 0.5, 0.9, 1.0])
def test_binomial_baseline_matches_math_comb(n_jobs, p):
    pmf = np.asarray(binomial_baseline(n_jobs, p))
    expected = [math.comb(n_jobs, k) * p**k * (1 - p) ** (n_jobs - k) for k in range(n_jobs + 1)]
    np.testing.assert_allclose(pmf, expected, rtol=1e-10, atol=1e-300)
    np.testing.assert_allclose(pmf.sum(), 1.0, rtol=1e-12)
    np.testing.assert_allclose(float(mean_writing_fraction(pmf)), p, atol=1e-12)


def test_binomial_baseline_batches_and_rejects_bad_input():
    pmf = np.asarray(binomial_baseline(4, jnp.array([[0.1, 0.2], [0.3, 1.5]])))
    assert pmf.shape == (2, 2, 5)
    assert np.all(np.isnan(pmf[1, 1]))  # p outside [0, 1]
    np.testing.assert_allclose(pmf[0, 1], np.asarray(binomial_baseline(4, 0.2)))
    for bad in (0, -1, 2.5, True):
        with pytest.raises(ValueError, match="n_jobs"):
            binomial_baseline(bad, 0.5)


def test_tail_ratio_by_hand_and_edge_cases():
    dist = np.array([0.5, 0.2, 0.2, 0.1])
    base = np.array([0.4, 0.4, 0.15, 0.05])
    # P(n ≥ 2) = 0.3 vs 0.2; P(n ≥ 3) = 0.1 vs 0.05; P(n ≥ 0) = 1 vs 1.
    np.testing.assert_allclose(np.asarray(tail_ratio(dist, base, [0, 2, 3])), [1.0, 1.5, 2.0], rtol=1e-12)
    assert np.asarray(tail_ratio(dist, base, 3)).shape == ()
    zero = np.array([0.5, 0.5, 0.0, 0.0])
    assert np.isinf(float(tail_ratio(dist, zero, 3)))
    assert np.isnan(float(tail_ratio(zero, zero, 3)))
    with pytest.raises(ValueError, match="k must be"):
        tail_ratio(dist, base, 4)
    with pytest.raises(ValueError, match="k must be"):
        tail_ratio(dist, base, 1.5)
    with pytest.raises(ValueError, match="same N"):
        tail_ratio(dist, base[:3], 1)


# ------------------------------------------------------------------------ writer_excursions


def test_writer_excursions_by_hand():
    # Observed [0.5, 7]: n_w rises to 2 at 0.5 (the start: not counted), 3.5 and 6.5; to ≥ 1
    # at 3 and 6 (after the gaps [2, 3) and [5, 6)).
    fire = np.array([[0.0, 3.0, 6.0], [0.5, 3.5, 6.5]])
    end = np.array([[1.0, 4.0, 7.0], [2.0, 5.0, 8.0]])
    np.testing.assert_array_equal(writer_excursions(fire, end, [1, 2]), [2, 2])
    assert int(writer_excursions(fire, end, 2)) == 2
    batch = writer_excursions(np.stack([fire, fire]), np.stack([end, end]), [1, 2, 3])
    assert batch.shape == (2, 3) and batch[:, 2].tolist() == [0, 0]


def test_writer_excursions_ignore_a_handover():
    # A write ends at t = 2 as another starts: n_w stays 1, so no new excursion to ≥ 1.
    fire = np.array([[0.0, 2.0, 4.0], [0.5, 2.5, 4.5]])
    end = np.array([[1.0, 3.0, 5.0], [2.0, 4.0, 6.0]])
    # n_w: [0.5,1) 2, [1,2) 1, [2,2.5) 1, [2.5,3) 2, [3,4) 1, [4,4.5) 1, [4.5,5) 2, [5, ...) 1.
    np.testing.assert_array_equal(writer_excursions(fire, end, [1, 2]), [0, 2])


def _excursions_one_fleet(fire, end, levels):
    """Per-fleet oracle from `writer_count`: rises to >= k inside the observed interval."""
    t_start, t_stop = cj.analysis.observed_interval(fire, end)
    if not t_stop > t_start:
        return np.zeros(len(levels), int)
    times, counts = cj.analysis.writer_count(fire, end)
    before = np.concatenate([[0], counts[:-1]])
    inside = (times > t_start) & (times <= t_stop)
    return np.array([np.sum((before < k) & (counts >= k) & inside) for k in levels])


def test_batched_excursions_and_bounds_equal_the_per_fleet_definitions():
    fleet = cj.Fleet(np.full((24, 5), 3.0), np.full((24, 5), 1.0), cap=[2.0] * 12 + [None] * 12)
    trace = cj.simulate(fleet, cj.random_state(fleet, jax.random.key(1)), 10, jitter=0.5, key=jax.random.key(2))
    fire, end = np.array(trace.fire_times), np.array(trace.end_times)
    fire[0, -2:] = end[0, -2:] = np.nan  # padding slots
    fire[1], end[1] = np.round(fire[1]), np.round(end[1])  # exact ties: ends as others start
    end[2, 0, 5:] = np.nan  # a run that stopped early
    fire[2, 0, 6:] = np.nan
    levels = [1, 2, 3, 4, 5]
    want = np.stack([_excursions_one_fleet(f, e, levels) for f, e in zip(fire, end)])
    np.testing.assert_array_equal(cj.analysis.writer_excursions(fire, end, levels), want)
    t_start, t_stop = cj.analysis.observed_bounds(fire, end)
    bounds = np.array([cj.analysis.observed_interval(f, e) for f, e in zip(fire, end)])
    np.testing.assert_array_equal(np.stack([t_start, t_stop], -1), bounds)
