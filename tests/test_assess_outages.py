"""`ckpt_jax.assess` with common-cause outages (docs/model.md §1f): their cost and the restart
stagger's are causes of their own, apart from the jobs' own failures."""

import jax
import numpy as np
import pytest

import ckpt_jax as cj


def test_outages_and_the_stagger_are_causes_of_their_own(monkeypatch):
    # Four jobs of one domain and no failures of their own: every failure is an outage's. An
    # outage of the four up jobs staggers them 0, Δ, 2Δ, 3Δ: 1.5Δ per job per outage, about
    # H / M_o outages (a job is down R + 3Δ = 9 of every M_o = 100 at most, so nearly all up).
    compute, write = np.full(4, 10.0), np.full(4, 1.0)
    fleet = cj.Fleet(compute, write, size=8.0, restart=3.0, outage_mtbf=100.0, restart_stagger=2.0)
    horizon = 2000.0
    runs = []  # the run's JobStats, for the causes by hand
    simulate = cj.assess.simulate
    monkeypatch.setattr(
        cj.assess, "simulate", lambda *args, **kwargs: runs.append(simulate(*args, **kwargs)) or runs[-1]
    )
    result = cj.assess.assess(fleet, horizon=horizon, key=jax.random.key(5), n_draws=8, groups={"all": [0, 1, 2, 3]})
    losses = result.losses["fleet"]
    total = result.goodput["fleet"].mean + sum(losses[c].mean for c in cj.assess.CAUSES)
    assert total == pytest.approx(1, abs=1e-12)
    assert losses["lost_work"].mean == 0 and losses["restart"].mean == 0  # no own failures
    assert losses["outages"].mean > 0
    expected = 1.5 * 2.0 / 100.0  # the stagger's share of the time
    assert 0.66 * expected < losses["restart_stagger"].mean < 1.33 * expected
    assert set(result.to_json()["gpu_hours_lost_per_day"]["fleet"]) == set(cj.assess.CAUSES)
    # Each by hand from the run's JobStats (equal sizes: the fleet's share is the jobs' mean):
    # an outage costs the work it threw away and the time down after it, the stagger aside.
    (run,) = runs
    jobs = {name: np.asarray(getattr(run.jobs, name), np.float64) for name in ("outage_lost_work", "outage_down_time")}
    stagger = np.asarray(run.jobs.stagger_time, np.float64)
    assert np.all(jobs["outage_lost_work"] > 0) and np.all(stagger >= 0)
    by_hand = (jobs["outage_lost_work"] + jobs["outage_down_time"] - stagger) / horizon
    assert losses["outages"].mean == pytest.approx(by_hand.mean(axis=1).mean(), rel=1e-12)
    assert losses["restart_stagger"].mean == pytest.approx((stagger / horizon).mean(axis=1).mean(), rel=1e-12)


@pytest.mark.parametrize("stagger", [0.0, 1.0])
def test_the_storm_after_an_outage_lasts_without_stagger_and_never_comes_with_one(stagger):
    # Four identical jobs, T = 10, d = 1 on f = 1 (a write alone takes D = 1; P = 11), R = 2, no
    # jitter, one outage of the whole fleet at t = 50. Without stagger they restart together
    # and all four write together in every later cycle (the synchronous state is a fixed point);
    # with Δ = D they come back one write apart, and no two writes ever meet ((N - 1)·D <= T).
    compute, write = np.full(4, 10.0), np.full(4, 1.0)
    fleet = cj.Fleet(compute, write, restart=2.0, outage_times=[[50.0, 0.0]], restart_stagger=stagger)
    storms = cj.assess.outage_storms(fleet, span=50.0 + 9 * 11.0, key=jax.random.key(2), n_cycles=8)
    assert storms.period == 11.0 and storms.times.tolist() == [50.0] and storms.domains.tolist() == [0]
    before, peaks = storms.before[0], storms.peaks[0]
    assert 1 <= before <= 4
    if stagger == 0:
        assert peaks[0] == 0  # down for R, then computing T: nobody writes in the first cycle
        np.testing.assert_array_equal(peaks[1:], 4)
        if before < 4:
            assert not storms.recovered[0] and storms.storm_cycles[0] == 7
    else:
        assert np.all(peaks <= 1) and peaks[1:].min() == 1
        assert storms.recovered[0] and storms.storm_cycles[0] == 0


def test_the_storms_are_those_of_the_outages_the_timeline_ran():
    # Drawn outages of the whole fleet and no own failures: the fleet is all down (nobody writes,
    # nobody computes: no draw) exactly from each outage's instant, for R, so the instants where
    # the timeline goes all down are the run's outages, and outage_storms must report those.
    fleet = cj.Fleet(np.full(4, 10.0), np.full(4, 1.0), restart=2.0, outage_mtbf=60.0)
    storms = cj.assess.outage_storms(fleet, span=300.0, key=jax.random.key(3), n_cycles=2)
    line = storms.timeline
    down = (line.writers == 0) & (line.draw == 0)
    struck = line.start[down & ~np.concatenate([[False], down[:-1]])]
    assert struck.size >= 2  # the draw has outages to tell apart
    np.testing.assert_array_equal(storms.times, struck)
    np.testing.assert_array_equal(storms.domains, 0)


def test_outage_storms_refuses_a_fleet_without_outages():
    with pytest.raises(ValueError, match="outages"):
        cj.assess.outage_storms(cj.Fleet([10.0, 10.0], [1.0, 1.0]), span=100.0, key=jax.random.key(0))


def test_the_report_tells_the_storm_after_outages():
    from ckpt_jax.cli.assess import _storm_lines

    row = dict(time=2.0, domain="rack-a", peak_before=1.0, storm_cycles=7, recovered=False)
    rows = [dict(row, peaks=[0.0] + [4.0] * 7), dict(row, time=30.0, peaks=[1.0] * 8, storm_cycles=0, recovered=True)]
    summary = {"settings": {"time_unit": "h"}, "outage_storms": {"period": 0.5, "n_cycles": 8, "outages": rows}}
    text = "\n".join(_storm_lines(summary))
    assert "2 outages" in text and "1 of 2 outages raise the writer peak" in text
    assert "1 of them keep it there for all 8 cycles" in text
    assert "| rack-a | 1 | 0 4 4 4 4 4 4 4 | 7+ |" in text
    assert _storm_lines({"settings": {"time_unit": "h"}}) == []  # no outages, no section
