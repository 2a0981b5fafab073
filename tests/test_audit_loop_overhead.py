"""Cases of the lean general loop and the fixed checkpoint overhead (docs/model.md §1g) that the
other tests leave open, each found by planting a plausible bug in that code and seeing no test
fail (the audit of issue 51).

* A failure during a checkpoint's overhead loses the cycle the checkpoint covered, and the
  redo computes that cycle's own jittered work again (`failures._redo`: the overhead is an open
  checkpoint, as a snapshot or an unsafe drain is). Without jitter every cycle's work is T, so
  only a jittered run tells the draws apart; the exact reference (tests/reference.py) does.
* The design's contended Young iteration keeps the interval of a job that completed no write
  in any draw: its stand-in D is T²/(2M) less the overhead o, so that √(2·(o + D)·M) gives
  T back (`design.contended_young`). The design tests' fleets all complete writes.
* The next event is one reduction over the per-job times and, apart, the per-fleet ones: a
  pending controller update (a delayed controller, τ > 0) and a domain's next common-cause
  outage (docs/model.md §1f). No other test runs the two together, so an outage left out of
  the reduction where a controller queue is also there went unseen (the outage struck at the
  next other event instead).
* assess's causes and goodput add up to 1 with the overheads as their own cause: an overhead
  left out of the sum before the rest (throttling) is taken shows as throttling on a fleet
  without a cap; the overhead test checks the overhead cause, not the rest.
* A fleet file's ``overhead`` may be 0 (as ``restart`` and ``snapshot`` may: no overhead), in
  units or plain, and an override to "0 s" (the overhead experiment's o = 0) too; the overhead
  tests refuse only negative values and wrong units.

Every case is one tiny fleet over a short horizon: a second or two each in the tier.
"""

import jax
import numpy as np
from reference import simulate_realistic_reference

import ckpt_jax as cj
from ckpt_jax import design, fleetfile
from ckpt_jax._params import flat_params, jitter_work

RTOL = 1e-9


def test_a_failure_during_an_overhead_redoes_the_lost_cycle_with_its_own_draw():
    # One job computing T = 4 at t = 0 fires at 4 (its next phase is cycle 1), spends o = 1 in
    # its overhead, fails at 4.5, is back at 5 and redoes cycle 0 (the cycle the open checkpoint
    # covered) with cycle 0's draw, not cycle 1's; then o + d = 2 more.
    compute, write, overhead, restart, sigma, seed = 4.0, 1.0, 1.0, 0.5, 0.8, 3
    fleet = cj.Fleet([compute], [write], overhead=overhead, restart=restart)
    key = jax.random.key(seed)
    params = flat_params(fleet, sigma, key)
    draws = [float(jitter_work(params.job_keys[0, 0], params.compute[0, 0], params.jitter[0], c)) for c in range(4)]
    assert abs(draws[0] - draws[1]) > 0.05  # the two cycles' draws tell the bug apart
    horizon = 5.0 + draws[0] + overhead + write + 0.5
    out = cj.simulate(
        fleet,
        cj.initial_state(fleet),
        4,
        until=horizon,
        failure_times=np.array([[4.5, np.inf]]),
        jitter=sigma,
        key=key,
        save=cj.SaveAt(jobs=True),
    )
    assert bool(np.all(out.ok))
    exact = simulate_realistic_reference(
        [compute],
        [write],
        horizon,
        failure_times=[[4.5]],
        restart=[restart],
        phase=[0],
        remaining=[compute],
        overhead=[overhead],
        compute_work=lambda job, cycle: draws[cycle],
    )
    fired = [float(x) for x in exact["fire_times"][0]]
    np.testing.assert_allclose(fired, [4.0, 5.0 + draws[0]], rtol=RTOL)  # the hand computation
    np.testing.assert_allclose(np.asarray(out.fire_times)[0, :2], fired, rtol=RTOL)
    np.testing.assert_allclose(np.asarray(out.jobs.lost_work)[0], float(exact["lost_work"][0]), rtol=RTOL)


def test_contended_young_keeps_the_interval_of_a_job_with_an_overhead_and_no_write():
    # Young's interval with o + D = 3, M = 10 is √60 ≈ 7.7 > H = 5: no draw completes a write,
    # so the job keeps it (the first iteration changes nothing).
    fleet = cj.Fleet([1.0], [1.0], mtbf=10.0, overhead=2.0, dtype="float64")
    young = np.sqrt(2 * (2.0 + 1.0) * 10.0)
    np.testing.assert_allclose(design._young(fleet), young, rtol=1e-12)
    keys = jax.random.split(jax.random.key(0), 2)
    intervals, iterations, converged = design.contended_young(fleet, horizon=5.0, keys=keys)
    np.testing.assert_allclose(intervals, young, rtol=1e-12)
    assert converged and iterations == 1


def test_an_outage_is_an_event_under_a_delayed_controller():
    # Two jobs computing T = 10 from t = 0 (the cap C = 2 never binds), τ = 0.5: the outage at
    # t = 3 fails both; they are back at 4 and redo T: both fire at 14 (not at 10).
    for delay in (0.0, 0.5):
        fleet = cj.Fleet([10.0, 10.0], [1.0, 1.0], cap=2.0, delay=delay, restart=1.0, outage_times=[[3.0, 0]])
        out = cj.simulate(fleet, cj.initial_state(fleet), 2, until=15.0, save=cj.SaveAt(jobs=True))
        assert bool(np.all(out.ok))
        np.testing.assert_allclose(np.asarray(out.fire_times)[:, 0], [14.0, 14.0], rtol=RTOL)
        np.testing.assert_array_equal(np.asarray(out.jobs.failures), [1, 1])


def test_assess_overheads_are_not_throttling():
    # A lone job, no cap, no failures: cycles of T + o + D = 10 + 2 + 1 = 13 from t = 0, ten of
    # them in H = 130: overheads 20/130, writes 10/130, goodput 100/130, no throttling.
    fleet = cj.Fleet([10.0], [1.0], overhead=2.0)
    result = cj.assess.assess(fleet, horizon=130.0, key=jax.random.key(0), n_draws=2)
    losses = result.losses["fleet"]
    np.testing.assert_allclose(losses["overhead"].mean, 20 / 130, rtol=1e-12)
    np.testing.assert_allclose(losses["checkpoint"].mean, 10 / 130, rtol=1e-12)
    np.testing.assert_allclose(result.goodput["fleet"].mean, 100 / 130, rtol=1e-12)
    assert losses["throttling"].mean == 0.0


ZERO_FILE = """
time_unit = "min"
[storage]
peak = "2 TB/s"
[[groups]]
name = "big"
count = 1
gpus = 1024
checkpoint = "1 TB"
mtbf = "8 h"
overhead = OVERHEAD
"""


def test_a_fleet_file_takes_a_zero_overhead():
    for value in ('"0 s"', "0", "0.0"):
        spec = fleetfile.loads(ZERO_FILE.replace("OVERHEAD", value))
        assert spec.groups[0].overhead == 0.0 and not spec.has_overheads
    spec = fleetfile.loads(ZERO_FILE.replace("OVERHEAD", '"30 s"'))
    assert spec.groups[0].overhead == 30.0
    assert spec.override({"overhead": "0 s"}).groups[0].overhead == 0.0
