"""`ckpt_jax.design` with the inputs of docs/model.md §1f (issue 36, item 6): the restart and
launch staggers designed with the intervals (``stagger=True``), the baselines' failure rate
with drawn outages, and the design's saving against Young and Daly under Weibull failures.

Two small design runs, each compiled once: four jobs in one domain with outages and a
staggered launch, and a lone job with Weibull failures (k = 0.7).
"""

import math
from typing import Any

import jax
import numpy as np
import pytest

import ckpt_jax as cj
from ckpt_jax import design
from ckpt_jax.fleetfile import FleetFileError, loads

STAGGERED = cj.design.Launch("staggered", 1.0)
GROUP = "[[groups]]\ncount = 2\nsize = 1\nwrite = 1.0\nmtbf = {mtbf}\n"
RUN: dict[str, Any] = dict(
    bounds=(1.0, 100.0), horizon=150.0, n_draws=4, method="search", steps=4, eval_draws=8, progress=False
)


@pytest.fixture(scope="module")
def outages():
    """Four jobs in one failure domain whose outages (M_o = 60) fail them together."""
    return cj.Fleet(
        np.full(4, 10.0),
        np.full(4, 1.0),
        throughput=np.minimum(np.arange(5), 2.0),
        mtbf=np.full(4, 200.0),
        restart=0.5,
        outage_mtbf=[60.0],
        restart_stagger=0.25,
        dtype="float64",
    )


@pytest.fixture(scope="module")
def staggered(outages):
    key = jax.random.key(3)
    return key, design.checkpoint_intervals(
        outages, key=key, groups=np.zeros(4, int), launch=STAGGERED, stagger=True, **RUN
    )


def test_the_baselines_take_the_total_failure_rate_with_drawn_outages(outages):
    total = 1 / (1 / 200.0 + 1 / 60.0)
    np.testing.assert_allclose(design.baseline_mtbf(outages), np.full(4, total), rtol=1e-12)
    # Young's interval √(2·D·M) with D = d / f(1) = 1 alone, M the total.
    young = design.contended_young(outages, horizon=1.0, keys=jax.random.split(jax.random.key(0), 2), max_iter=0)[0]
    np.testing.assert_allclose(young, np.full(4, math.sqrt(2 * total)), rtol=1e-12)
    # A fleet file takes the same total where [[outages]] are drawn.
    text = (
        'throughput = "shared"\n[[outages]]\nmtbf = 60.0\n[[groups]]\ncount = 2\nsize = 1\nwrite = 1.0\nmtbf = 200.0\n'
    )
    np.testing.assert_allclose(loads(text).young(), np.full(2, math.sqrt(2 * total)), rtol=1e-12)


@pytest.mark.slow  # a whole design search (the tier keeps the refusals and the baselines)
def test_staggers_are_designed_bounded_and_reach_the_evaluation(outages, staggered):
    key, result = staggered
    assert result.evaluation is not None
    assert result.restart_stagger is not None and result.launch_stagger is not None
    for value in (result.restart_stagger, result.launch_stagger):
        assert 0.0 <= value <= RUN["horizon"]
    assert result.fallback is None
    # The design's row of the evaluation is the fleet run at the designed intervals and
    # staggers on the evaluation draws: the same numbers from `fleet_waste` directly.
    _, eval_key, _ = jax.random.split(key, 3)
    draws = jax.random.split(eval_key, RUN["eval_draws"])
    positions = design.staggered_positions(
        cj.Fleet(result.intervals, np.full(4, 1.0), throughput=np.minimum(np.arange(5), 2.0)),
        result.launch_stagger,
    )
    fractions = positions / (1.0 + result.intervals)
    direct = design.fleet_waste(
        outages,
        result.intervals[None],
        horizon=RUN["horizon"],
        keys=draws,
        offsets=fractions[None],
        restart_stagger=np.array([result.restart_stagger]),
    )
    np.testing.assert_allclose(result.evaluation.fleet_waste[0], direct[0], rtol=1e-12)
    # A different restart stagger changes the waste on these draws (it does act).
    other = design.fleet_waste(
        outages,
        result.intervals[None],
        horizon=RUN["horizon"],
        keys=draws,
        offsets=fractions[None],
        restart_stagger=np.array([result.restart_stagger + 5.0]),
    )
    assert not np.allclose(other, direct)


def test_stagger_refuses_what_it_cannot_design(outages):
    lone = cj.Fleet([10.0], [1.0], mtbf=[100.0], dtype="float64")
    key = jax.random.key(0)
    with pytest.raises(ValueError, match="stagger=True has nothing to design"):
        design.checkpoint_intervals(lone, key=key, stagger=True, **RUN)
    with pytest.raises(ValueError, match="stagger=True needs method='search'"):
        design.checkpoint_intervals(outages, key=key, stagger=True, **{**RUN, "method": "adam"})
    with pytest.raises(ValueError, match="stagger must be True or False"):
        design.checkpoint_intervals(outages, key=key, stagger="yes", **RUN)
    with pytest.raises(FleetFileError, match="design.staggers"):
        loads('throughput = "shared"\n[design]\nstaggers = true\n' + GROUP.format(mtbf=200.0))
    with pytest.raises(FleetFileError, match="design.staggers"):
        loads('throughput = "shared"\n[design]\nstaggers = 1\n[[outages]]\nmtbf = 60.0\n' + GROUP.format(mtbf=9.0))


@pytest.mark.slow  # a whole design search (the tier keeps the refusals and the baselines)
def test_weibull_lone_job_reports_its_saving_against_young_and_daly_with_paired_cis():
    # A lone job (d = 1 alone, M = 100 the mean of a Weibull law of shape 0.7): Young's and
    # Daly's intervals take the mean M, whatever the shape.
    lone = cj.Fleet([10.0], [1.0], throughput=[0.0, 1.0], mtbf=[100.0], restart=1.0, failure_shape=0.7)
    result = design.checkpoint_intervals(
        lone,
        key=jax.random.key(1),
        fallback=False,
        **{**RUN, "bounds": (1.0, 200.0), "horizon": 400.0, "n_draws": 8, "eval_draws": 32},
    )
    young, daly = result.baselines["young"], result.baselines["daly"]
    assert result.evaluation is not None
    np.testing.assert_allclose(young.intervals, [math.sqrt(2 * 100.0)], rtol=1e-12)
    # Daly (2006): √(2DM)·[1 + √(D/2M)/3 + D/(18M)] − D for D < 2M.
    ratio = 1.0 / (2 * 100.0)
    np.testing.assert_allclose(
        daly.intervals, [math.sqrt(2 * 100.0) * (1 + math.sqrt(ratio) / 3 + ratio / 9) - 1.0], rtol=1e-12
    )
    waste = result.evaluation.fleet_waste
    for name, baseline in (("young", young), ("daly", daly)):
        paired = waste[result.evaluation.names.index(name)] - waste[0]
        assert baseline.saved.mean == pytest.approx(paired.mean(), rel=1e-12, abs=1e-15)
        assert baseline.saved.low <= baseline.saved.mean <= baseline.saved.high
        # The search starts from the best of the baselines on its draws: it does not lose to
        # them outside the noise on fresh draws (a design at Young's interval itself, through
        # exp(log T), may differ from it in the last bit).
        assert baseline.saved.high >= -1e-9
