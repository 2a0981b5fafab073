"""The fixed checkpoint overhead o_i (docs/model.md §1g): closed forms and refusals.

At each firing a job first spends o_i blocked (neither computing nor a storage user, not in
n_w or n_c), then writes. A lone job's cycle is then T + o + D exactly; with failures its waste
is the renewal formula of §1c with W = T + o + D; and overheads that overlap share nothing, so
a job's overhead lasts o_i whatever the others do and frees the storage and the power for them.
The exact reference (tests/reference.py) covers the overhead on random fleets in
tests/test_realistic_oracle.py.
"""

import math

import jax
import numpy as np
import pytest

import ckpt_jax as cj
from ckpt_jax import design, fleetfile
from ckpt_jax._plan import choose_paths, variants
from ckpt_jax.loop import flat_params

RTOL = 1e-9


def run(fleet, n_fires=6, **kwargs):
    out = cj.simulate(fleet, cj.initial_state(fleet), n_fires, save=cj.SaveAt(jobs=True), **kwargs)
    assert bool(np.all(out.ok))
    return out


def test_a_lone_job_cycles_in_t_plus_o_plus_d():
    compute, write, overhead, limit = 7.0, 3.0, 0.25, 0.5
    fleet = cj.Fleet([compute], [write], overhead=overhead, write_limit=limit)
    out = run(fleet)
    solo = write / limit
    period = compute + overhead + solo
    fired = compute + period * np.arange(6)
    np.testing.assert_allclose(np.asarray(out.fire_times)[0], fired, rtol=RTOL)
    np.testing.assert_allclose(np.asarray(out.end_times)[0], fired + overhead + solo, rtol=RTOL)
    np.testing.assert_allclose(np.asarray(fleet.period)[0], period, rtol=RTOL)
    jobs = out.jobs
    np.testing.assert_allclose(np.asarray(jobs.overhead_time)[0], 6 * overhead, rtol=RTOL)
    np.testing.assert_allclose(np.asarray(jobs.write_time)[0], 6 * solo, rtol=RTOL)
    np.testing.assert_allclose(np.asarray(jobs.completed_write_time)[0], 6 * solo, rtol=RTOL)
    total = jobs.compute_time + jobs.write_time + jobs.overhead_time
    np.testing.assert_allclose(np.asarray(total)[0], float(np.asarray(out.time)), rtol=RTOL)


def test_a_lone_two_level_job_cycles_in_o_plus_s_plus_max_of_t_and_d():
    # The overhead comes before the snapshot; the drain overlaps the next compute phase.
    compute, write, overhead, snap = 4.0, 6.0, 1.5, 0.5
    out = run(cj.Fleet([compute], [write], overhead=overhead, snapshot=snap))
    fired = np.asarray(out.fire_times)[0]
    np.testing.assert_allclose(np.diff(fired), overhead + snap + max(compute, write), rtol=RTOL)
    np.testing.assert_allclose(np.asarray(out.end_times)[0], fired + overhead + snap + write, rtol=RTOL)


def test_overlapping_overheads_share_nothing():
    # Two jobs fire together (T = 4): both overheads last o = 3 (not 6), then both write d = 2
    # sharing f = 1 (4 each). Job 2 (T = 5, d = 1) writes during their overheads alone, at f(1).
    fleet = cj.Fleet([4.0, 4.0, 5.0], [2.0, 2.0, 1.0], overhead=[3.0, 3.0, 0.0])
    out = run(fleet, n_fires=1)
    fired, ended = np.asarray(out.fire_times)[:, 0], np.asarray(out.end_times)[:, 0]
    np.testing.assert_allclose(fired, [4.0, 4.0, 5.0], rtol=RTOL)
    np.testing.assert_allclose(ended, [11.0, 11.0, 6.0], rtol=RTOL)


def test_an_overhead_frees_the_power_cap():
    # C = 1, two jobs: while job 0 spends its overhead (from t = 2 to 12) job 1 computes alone at
    # full speed; before, both computed at 1/2.
    fleet = cj.Fleet([1.0, 6.0], [0.5, 0.5], cap=1.0, overhead=[10.0, 0.0])
    out = run(fleet, n_fires=1)
    # Job 1 did 1 of its 6 by t = 2, the rest (5) alone: fires at 7, inside job 0's overhead.
    np.testing.assert_allclose(np.asarray(out.fire_times)[:, 0], [2.0, 7.0], rtol=RTOL)
    np.testing.assert_allclose(np.asarray(out.end_times)[:, 0], [12.5, 7.5], rtol=RTOL)


def test_the_overhead_draws_idle_power():
    fleet = cj.Fleet([2.0], [1.0], overhead=1.0, idle_power=0.25)
    out = cj.simulate(
        fleet, cj.initial_state(fleet), None, until=8.0, save=cj.SaveAt(trace=False, gaps=False, power=True)
    )
    # Per cycle of 4: 2 computing (draw 1), 1 overhead and 1 write (draw 1/4 each).
    np.testing.assert_allclose(float(np.asarray(out.power.mean)), (2 * 1 + 2 * 0.25) / 4, rtol=RTOL)


def test_zero_overhead_traces_nothing_of_it():
    # o = 0 everywhere (or on padding slots only) is the model without it: the loops get no
    # overhead rows, so every program and result is the one without, bit for bit.
    for fleet in (
        cj.Fleet([3.0, 5.0], [1.0, 0.5], overhead=0.0),
        cj.Fleet([3.0, 5.0], [1.0, 0.5], overhead=[0.0, 2.0], active=[True, False]),
    ):
        assert not fleet.has_overheads
        assert flat_params(fleet).overhead is None
    assert flat_params(cj.Fleet([3.0, 5.0], [1.0, 0.5], overhead=[0.0, 2.0])).overhead is not None


@pytest.mark.parametrize("bad", [-1.0, math.nan, math.inf, [1.0, -0.5]])
def test_a_bad_overhead_is_refused_by_name(bad):
    with pytest.raises(ValueError, match="overhead must be finite and >= 0"):
        cj.Fleet([1.0, 2.0], [0.5, 0.5], overhead=bad)


def test_the_fast_paths_refuse_an_overhead_and_auto_runs_it_on_the_general_engine():
    fleet = cj.Fleet(np.full(40, 3.0), np.full(40, 0.01), overhead=0.5)
    for method in ("fifo", "clock"):
        with pytest.raises(ValueError, match="overhead"):
            cj.simulate(fleet, cj.initial_state(fleet), 2, method=method)
    assert set(choose_paths(fleet, variants(fleet), "auto").ravel()) == {"general"}
    without = cj.Fleet(np.full(40, 3.0), np.full(40, 0.01))
    assert set(choose_paths(without, variants(without), "auto").ravel()) == {"fifo"}


@pytest.mark.parametrize("policy", ["fcfs_nonblocking", "cooperative"])
def test_the_queueing_policies_refuse_an_overhead(policy):
    with pytest.raises(ValueError, match="overhead > 0"):
        cj.Fleet([1.0, 2.0], [0.5, 0.5], overhead=1.0, storage_policy=policy)


# --- with failures: the renewal formula of §1c with W = T + o + D ---------------------------


def test_failures_match_the_renewal_formula_with_the_overhead():
    # One job alone, 200 independent draws over 200 cycles: the mean of 1 − useful/H within the
    # renewal formula's finite-horizon bracket (`renewal_waste_bounds`, as tests/
    # test_theory_failures.py holds the reference to it) with W = T + o + D, widened by 4
    # standard errors; the bracket without o is far away.
    compute, write, overhead, mtbf, restart, n_fleets = 4.0, 0.5, 1.5, 20.0, 1.0, 200
    horizon = 200 * (compute + overhead + write)
    fleet = cj.Fleet(
        np.full((n_fleets, 1), compute), np.full((n_fleets, 1), write), mtbf=mtbf, restart=restart, overhead=overhead
    )
    save = cj.SaveAt(trace=False, gaps=False, jobs=True)
    out = cj.simulate(fleet, cj.initial_state(fleet), None, until=horizon, key=jax.random.key(5), save=save)
    assert bool(np.all(out.ok))
    waste = np.asarray(out.jobs.covered_waste)[:, 0]
    mean, error = waste.mean(), waste.std(ddof=1) / math.sqrt(n_fleets)
    low, high = (float(x) for x in cj.theory.renewal_waste_bounds(compute, overhead + write, mtbf, restart, horizon))
    assert low - 4 * error <= mean <= high + 4 * error, (mean, low, high, error)
    _, without = (float(x) for x in cj.theory.renewal_waste_bounds(compute, write, mtbf, restart, horizon))
    assert mean > without + 50 * error, (mean, without, error)
    # A failure during the overhead loses the cycle, as one during the write does; the time
    # accounting still closes.
    jobs = out.jobs
    total = jobs.compute_time + jobs.write_time + jobs.overhead_time + jobs.down_time
    np.testing.assert_allclose(np.asarray(total)[:, 0], horizon, rtol=RTOL)


def test_assess_reports_the_overhead_as_its_own_cause():
    # A lone job, 16 draws over 500 cycles: goodput is the renewal formula with W = T + o + D;
    # per renewal cycle the job spends M(e^{(o+d)/M} − e^{d/M}) in overheads and M(e^{d/M} − 1)
    # writing (abandoned attempts included: ∫ P(Y > y) over each phase, times 1/p attempts).
    compute, write, overhead, mtbf, restart = 10.0, 1.0, 2.0, 50.0, 2.0
    period = compute + overhead + write
    horizon = 500 * period
    fleet = cj.Fleet([compute], [write], size=[8.0], mtbf=mtbf, restart=restart, overhead=overhead)
    result = cj.assess.assess(fleet, horizon=horizon, key=jax.random.key(0), n_draws=16)
    goodput = result.goodput["fleet"]
    formula = 1 - float(cj.theory.renewal_waste(compute, overhead + write, mtbf, restart))
    assert abs(goodput.mean - formula) < 4 * goodput.stderr + period / horizon, (goodput, formula)
    mean_cycle = float(cj.theory.renewal_cycle_time(compute, overhead + write, mtbf, restart))
    expected = dict(
        overhead=mtbf * (math.exp((overhead + write) / mtbf) - math.exp(write / mtbf)) / mean_cycle,
        checkpoint=mtbf * math.expm1(write / mtbf) / mean_cycle,
    )
    losses = result.losses["fleet"]
    for cause, value in expected.items():
        estimate = losses[cause]
        assert abs(estimate.mean - value) < 4 * estimate.stderr + period / horizon, (cause, estimate, value)
    hours = result.gpu_hours_lost_per_day["fleet"]["overhead"].mean
    np.testing.assert_allclose(hours, losses["overhead"].mean * 8 * 24, rtol=1e-12)


UNITS_FILE = """
time_unit = "min"
[storage]
peak = "2 TB/s"
[[groups]]
name = "big"
count = 1
gpus = 1024
checkpoint = "1 TB"
mtbf = "8 h"
overhead = "30 s"
[[groups]]
name = "small"
count = 2
gpus = 64
checkpoint = "100 GB"
mtbf = "40 h"
"""


def test_a_fleet_file_takes_an_overhead_per_group_in_units():
    spec = fleetfile.loads(UNITS_FILE)
    assert [group.overhead for group in spec.groups] == [30.0, None]
    np.testing.assert_array_equal(spec.overheads(), [30.0, 0.0, 0.0])
    fleet = spec.fleet()
    np.testing.assert_array_equal(np.asarray(fleet.overhead), [30.0, 0.0, 0.0])
    # Young's interval and the solo period take it: √(2(o + D)M), T + o + D.
    write = spec.solo_write_time()
    np.testing.assert_allclose(spec.young()[0], math.sqrt(2 * (30.0 + write[0]) * 8 * 3600.0), rtol=1e-12)
    np.testing.assert_allclose(spec.period()[0], spec.intervals()[0] + 30.0 + write[0], rtol=1e-12)
    np.testing.assert_allclose(np.asarray(fleet.period)[0], spec.period()[0], rtol=1e-12)
    again = fleetfile.loads(fleetfile.dumps(spec))
    assert [group.overhead for group in again.groups] == [30.0, None]
    # An override sets it, for a group or every group (compare's scenarios).
    assert [g.overhead for g in spec.override({"overhead": "1 min"}).groups] == [60.0, 60.0]


@pytest.mark.parametrize(
    "value, message", [('"-3 s"', "groups\\[0\\].overhead"), ('"3 GB"', "groups\\[0\\].overhead"), ("-1.0", "overhead")]
)
def test_a_bad_overhead_in_a_fleet_file_is_refused_by_field(value, message):
    text = UNITS_FILE.replace('overhead = "30 s"', f"overhead = {value}")
    with pytest.raises(fleetfile.FleetFileError, match=message):
        fleetfile.loads(text)


def test_the_design_baselines_are_young_and_daly_with_o_plus_d():
    fleet = cj.Fleet([10.0, 10.0], [1.0, 2.0], mtbf=[100.0, 400.0], overhead=[3.0, 0.0])
    blocked = np.array([3.0 + 1.0, 2.0])
    np.testing.assert_allclose(design._young(fleet), np.sqrt(2 * blocked * [100.0, 400.0]), rtol=1e-12)
    np.testing.assert_allclose(design._daly(fleet), cj.theory.daly_interval(blocked, np.array([100.0, 400.0])))
    two_level = cj.Fleet([10.0], [30.0], mtbf=[100.0], overhead=2.0, snapshot=0.5)
    np.testing.assert_allclose(design._young(two_level), max(math.sqrt(2 * 2.5 * 100.0), 30.0), rtol=1e-12)


def test_sensitivity_has_an_overhead_knob_where_the_file_has_one():
    knobs = cj.assess.sensitivity_knobs(fleetfile.loads(UNITS_FILE))
    up, down = knobs["overhead"]
    assert up == {"groups[0].overhead": "33 s"} and down == {"groups[0].overhead": "27 s"}
    assert "overhead" not in cj.assess.sensitivity_knobs(fleetfile.loads(UNITS_FILE.replace('overhead = "30 s"', "")))


def test_a_fleet_file_with_a_queueing_policy_refuses_an_overhead():
    text = 'storage_policy = "cooperative"\n' + UNITS_FILE
    with pytest.raises(fleetfile.FleetFileError, match="storage_policy.*groups\\[0\\].overhead"):
        fleetfile.loads(text)
