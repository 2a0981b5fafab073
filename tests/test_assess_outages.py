"""`ckpt_jax.assess` with common-cause outages (docs/model.md §1f): their cost and the restart
stagger's are causes of their own, apart from the jobs' own failures."""

import jax
import numpy as np
import pytest

import ckpt_jax as cj


def test_outages_and_the_stagger_are_causes_of_their_own():
    # Four jobs of one domain and no failures of their own: every failure is an outage's. An
    # outage of the four up jobs staggers them 0, Δ, 2Δ, 3Δ: 1.5Δ per job per outage, about
    # H / M_o outages (a job is down R + 3Δ = 9 of every M_o = 100 at most, so nearly all up).
    compute, write = np.full(4, 10.0), np.full(4, 1.0)
    fleet = cj.Fleet(compute, write, size=8.0, restart=3.0, outage_mtbf=100.0, restart_stagger=2.0)
    horizon = 2000.0
    result = cj.assess.assess(fleet, horizon=horizon, key=jax.random.key(5), n_draws=8, groups={"all": [0, 1, 2, 3]})
    losses = result.losses["fleet"]
    total = result.goodput["fleet"].mean + sum(losses[c].mean for c in cj.assess.CAUSES)
    assert total == pytest.approx(1, abs=1e-12)
    assert losses["lost_work"].mean == 0 and losses["restart"].mean == 0  # no own failures
    assert losses["outages"].mean > 0
    expected = 1.5 * 2.0 / 100.0  # the stagger's share of the time
    assert 0.66 * expected < losses["restart_stagger"].mean < 1.33 * expected
    assert set(result.to_json()["gpu_hours_lost_per_day"]["fleet"]) == set(cj.assess.CAUSES)
