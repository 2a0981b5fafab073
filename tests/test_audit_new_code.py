"""Tests with teeth for the steady-state goodput and the comparison's effects (issue 47 items
1 and 2): each checks one thing a plausible bug in that code would get wrong and the other
tests let pass (the floor in GPU-hours per day, one draw against draws that differ by
rounding, ...). Cheap: no run, or tiny fleets over short horizons."""

import jax
import numpy as np
from small_fleet import SMALL

import ckpt_jax as cj
from ckpt_jax import assess, fleetfile
from ckpt_jax._estimate import FLOOR

# tests/test_effects.py's small fleet (7 GPUs): no run here, only its parsed groups.
GPUS = np.asarray([3.0, 4.0, 7.0])  # groups a, b and the fleet


def _draws(goodput) -> dict:
    """A scenario's draws (`assess._scenario_draws`' shape): every group at the fleet's goodput."""
    shares = np.repeat(np.asarray(goodput, np.float64)[:, None], 3, axis=1)
    return {
        "goodput": shares,
        "gpu_hours_per_day": shares * GPUS * 24.0,
        "power_step": np.full(len(goodput), 3.0),
        "writers_peak": np.full(len(goodput), 2.0),
        "gpus": GPUS,
    }


def _dataset(base, scenario, floor=FLOOR):
    spec = fleetfile.loads(SMALL, "small.toml")
    specs = {"baseline": spec, "s": spec.override({"restart": 2.0})}
    draws = {"baseline": _draws(base), "s": _draws(scenario)}
    return assess._comparison_dataset(spec, specs, {"s": {"restart": 2.0}}, draws, 300.0, floor, None)


def test_the_floor_of_gpu_hours_per_day_is_the_floor_times_the_fleets_gpu_hours():
    # A goodput change of half the floor, resolved (its CI excludes 0): 5e-5 × 7 GPUs × 24 h =
    # 0.0084 GPU-h/day, below the floor's 0.0168 GPU-h/day. Compared against the floor as a
    # share (1e-4), the same change would count in GPU-hours and not in goodput.
    goodput = np.linspace(0.80, 0.90, 8)
    below = goodput + 0.5 * FLOOR * (1 + np.linspace(0, 0.01, 8))
    ds = _dataset(goodput, below)
    assert ds.attrs["floor_gpu_hours_per_day"] == FLOOR * 7 * 24.0
    hours = ds["gpu_hours_per_day_difference"].sel(scenario="s", group="fleet")
    assert float(hours.sel(statistic="low")) > 0 and float(hours.sel(statistic="mean")) < FLOOR * 7 * 24.0
    assert not ds["gpu_hours_per_day_significant"].any() and not ds["goodput_significant"].any()
    # Twice the floor counts in both units alike.
    above = _dataset(goodput, goodput + 2 * FLOOR * (1 + np.linspace(0, 0.01, 8)))
    for field in ("goodput_significant", "gpu_hours_per_day_significant"):
        assert above[field].sel(scenario="s", group="fleet")


def test_draws_that_differ_by_rounding_are_not_one_draw():
    # Draws equal to rounding (a relative 1e-13) still differ: they are draws with an interval,
    # not one draw. Only draws equal bit for bit are one draw.
    base = np.full(4, 0.9) * (1 + 1e-13 * np.arange(4))
    ds = _dataset(base, base - 0.02)
    assert not bool(ds["one_draw"].sel(scenario="s"))
    assert np.isfinite(ds["goodput"].sel(scenario="baseline", group="fleet", statistic="low"))
    assert bool(_dataset(np.full(4, 0.9), np.full(4, 0.88))["one_draw"].sel(scenario="s"))


# -- the uncovered work at the stop --------------------------------------------------------------


def test_the_uncovered_work_with_snapshots_recovered_from_memory_is_counted_once():
    # Under recover_from="memory" a completed snapshot's work is useful (a failure keeps it)
    # while its drain still runs: it is not uncovered too. Blocking snapshots, no cap: the
    # work done is the compute time, split exactly into useful, lost and uncovered work.
    n = 8
    fleet = cj.Fleet(
        np.full((n, 1), 2.4),
        np.full((n, 1), 0.5),
        snapshot=0.02,
        recover_from="memory",
        mtbf=20.0,
        restart=0.1,
    )
    state = cj.random_state(fleet, jax.random.key(3))
    save = cj.SaveAt(trace=False, jobs=True)
    jobs = cj.simulate(fleet, state, None, until=24.0, key=jax.random.key(4), save=save).jobs
    done = np.asarray(jobs.useful_work) + np.asarray(jobs.lost_work) + np.asarray(jobs.uncovered_work)
    np.testing.assert_allclose(done, jobs.compute_time, rtol=1e-12)


def test_a_write_in_progress_since_before_t0_covers_no_work_done_since_t0():
    # Jobs that start writing (their compute before t = 0 counts nowhere) and are still in
    # that first write at H: no work done since t = 0 is uncovered, on every path.
    fleet = cj.Fleet(np.full((1, 2), 10.0), np.full((1, 2), 1.0))
    state = cj.initial_state(fleet, phase=np.ones((1, 2), np.int32), remaining=np.full((1, 2), 1.0))
    save = cj.SaveAt(trace=False, jobs=True)
    for method in ("general", "clock", "fifo"):
        jobs = cj.simulate(fleet, state, None, until=0.5, method=method, save=save).jobs
        np.testing.assert_array_equal(jobs.uncovered_work, 0.0, err_msg=method)
        np.testing.assert_array_equal(jobs.waste, 1.0, err_msg=method)


def test_assess_counts_only_draws_equal_bit_for_bit_as_one_draw():
    # `assess` strips the intervals only where every draw recorded the same numbers; draws
    # that differ by rounding (a relative 1e-13) keep their interval.
    from types import SimpleNamespace

    def run(*leaves):
        return SimpleNamespace(jobs=tuple(np.asarray(x) for x in leaves), writers=(), power=())

    same = np.array([[0.9, np.nan], [0.9, np.nan]])
    assert assess._same_runs(run(same, np.array([3, 3])))
    assert not assess._same_runs(run(same * np.array([[1.0], [1 + 1e-13]]), np.array([3, 3])))
    assert not assess._same_runs(run(same, np.array([3, 4])))
