"""Weibull and replayed failures (docs/model.md §1f): ``Fleet(failure_shape=k)`` and
``Fleet(failure_times=...)``.

* k = 1 (and the default None) is the exponential law of §1c bit for bit: the same key gives
  the same trace arrays exactly.
* The first failure times of many jobs follow Weibull(k, mean M) (a Kolmogorov-Smirnov test
  under a fixed key, so deterministic), and reject the exponential law where k != 1.
* The exact reference (tests/reference.py, explicit failure times), fed the instants the
  engine's Weibull draws give (the failure stream of failures.py: draw n of job i is
  ``exponential(fold_in(fold_in(job_key, 2**31), n))``, turned into E^(1/k)/Γ(1 + 1/k) and
  counted from the restart end), agrees with the engine to 1e-9; so does the engine replaying
  those instants from ``Fleet(failure_times=...)``. With ``fail_while_down`` the clock counts
  from the previous failure: the §1e reference (`simulate_realistic_reference`), fed the
  instants counted so, agrees too.
"""

import math

import jax
import numpy as np
import oracle_helpers as oh
import pytest
import scipy.stats
from reference import simulate_failures_reference, simulate_realistic_reference

import ckpt_jax as cj
from ckpt_jax.loop import flat_params

JOBS = cj.SaveAt(trace=True, jobs=True)
STATS = ("useful_work", "lost_work", "down_time", "write_time", "compute_time", "completed_write_time")
FAILURE_STREAM = 2**31  # the failure stream's fold of a job key (failures.py)


def _leaves_equal(a, b):
    for x, y in zip(jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b), strict=True):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


def test_shape_one_is_the_exponential_law_bit_for_bit():
    compute = np.array([[1.0, 2.0, 1.5], [0.7, 1.1, 2.2]])
    kwargs = dict(mtbf=[[3.0, 5.0, 4.0], [2.0, 6.0, 3.5]], restart=0.25)
    state = cj.initial_state(cj.Fleet(compute, 0.5, **kwargs))
    run = dict(n_fires=40, until=30.0, key=jax.random.key(3), save=JOBS, jitter=0.05)
    base = cj.simulate(cj.Fleet(compute, 0.5, **kwargs), state, **run)
    assert np.all(np.asarray(base.jobs.failures) > 0)
    for shape in (1.0, np.ones((2, 3)), 1):
        fleet = cj.Fleet(compute, 0.5, failure_shape=shape, **kwargs)
        assert not fleet.has_weibull_failures
        _leaves_equal(base, cj.simulate(fleet, state, **run))
    other = cj.simulate(cj.Fleet(compute, 0.5, failure_shape=0.7, **kwargs), state, **run)
    assert not np.array_equal(np.asarray(other.jobs.failures), np.asarray(base.jobs.failures))


# -- the law of the drawn gaps ----------------------------------------------------------------

N_LAW = 200  # jobs per fleet; 4 fleets, half the jobs of each shape
SHAPES = (0.7, 2.0)


def _first_failures():
    """Per shape, (4 · N_LAW / 2,) first failure times / M of jobs that compute one endless
    phase (nothing else happens) and stay down after it: each loses exactly its time up."""
    mtbf = np.tile(np.repeat([1.0, 3.0], N_LAW // 2)[None], (4, 1))
    shape = np.tile(np.tile(SHAPES, N_LAW // 2)[None], (4, 1))
    fleet = cj.Fleet(1e6, np.ones((4, N_LAW)), mtbf=mtbf, restart=1e6, failure_shape=shape)
    # One event per job (its failure; the default budget sizes for 3e6 time units of failures,
    # 2**31 events): a clock that fails a job again while it is down ends the run at once
    # (MAX_EVENTS) instead of running for minutes.
    out = cj.simulate(
        fleet,
        cj.initial_state(fleet),
        None,
        until=150.0,
        key=jax.random.key(7),
        save=cj.SaveAt(trace=False, jobs=True),
        max_events=2 * N_LAW,
    )
    assert np.all(np.asarray(out.ok))
    np.testing.assert_array_equal(out.jobs.failures, 1)  # every job failed once, by H = 50 M
    gaps = np.asarray(out.jobs.lost_work) / mtbf
    return {k: gaps[shape == k] for k in SHAPES}


def test_drawn_gaps_follow_the_weibull_law():
    for k, gaps in _first_failures().items():
        scale = 1 / math.gamma(1 + 1 / k)  # mean 1
        fit = scipy.stats.kstest(gaps, "weibull_min", args=(k, 0, scale))
        assert fit.pvalue > 0.01, (k, fit)
        exponential = scipy.stats.kstest(gaps, "expon")
        assert exponential.pvalue < 1e-3, (k, exponential)  # and not the law of §1c
        assert abs(gaps.mean() - 1) < 4 * math.sqrt(math.gamma(1 + 2 / k) * scale**2 - 1) / math.sqrt(gaps.size)


# -- the exact reference, fed the instants the engine drew ----------------------------------------

N_SLOTS = 4
N_FIRES = 60


def _specs(seed):
    """Two random fleets of 2..4 active jobs in 4 slots, with MTBFs and Weibull shapes."""
    rng = np.random.default_rng(seed)
    specs = []
    for _ in range(2):
        n = int(rng.integers(2, N_SLOTS + 1))
        slots = sorted(rng.permutation(N_SLOTS)[:n].tolist())
        compute = rng.uniform(0.5, 3.0, n).tolist()
        write = rng.uniform(0.1, 1.5, n).tolist()
        phase = rng.integers(0, 2, n).tolist()
        specs.append(
            dict(
                grid=False,
                slots=slots,
                compute=compute,
                write=write,
                restart=rng.choice([0.0, 0.5, 1.3], n).tolist(),
                mtbf=rng.uniform(2.0, 8.0, n).tolist(),
                shape=rng.choice([0.6, 0.8, 1.0, 1.7], n).tolist(),
                size=[1.0] * n,
                phase=phase,
                remaining=[rng.uniform(0.05, 1.0) * (write[j] if phase[j] else compute[j]) for j in range(n)],
                cap=float(rng.uniform(0.8, n)),
                horizon=float(rng.uniform(15.0, 25.0)),
                throughput=None,
                delay=0.0,
                async_fraction=0.0,
                jitter=0.0,
                draws=None,
            )
        )
    return specs


def _fleet(specs, **failures):
    """The batch ``specs`` padded to N_SLOTS slots, with the failure inputs ``failures``."""
    return cj.Fleet(
        oh.per_job(specs, "compute", N_SLOTS),
        oh.per_job(specs, "write", N_SLOTS),
        cap=[spec["cap"] for spec in specs],
        active=oh.active(specs, N_SLOTS),
        restart=oh.per_job(specs, "restart", N_SLOTS),
        **failures,
    )


def _instants(fleet, specs, key, n_draws=40, from_failure=False):
    """Per fleet, per active job, the failure instants of the engine's draws up to H: failure
    n at (restart end of failure n - 1, or 0) + M · E_n^(1/k) / Γ(1 + 1/k); ``from_failure``
    (failures while down): counted from failure n - 1 itself."""
    keys = flat_params(fleet, key=key).job_keys
    draw = jax.jit(
        jax.vmap(
            jax.vmap(
                lambda k: jax.vmap(
                    lambda n: jax.random.exponential(
                        jax.random.fold_in(jax.random.fold_in(k, FAILURE_STREAM), n), (), np.float64
                    )
                )(np.arange(n_draws))
            )
        )
    )
    exponential = np.asarray(draw(keys))
    lists = []
    for b, spec in enumerate(specs):
        per_job = []
        for job, slot in enumerate(spec["slots"]):
            k, mean, restart = spec["shape"][job], spec["mtbf"][job], spec["restart"][job]
            weibull = exponential[b, slot] if k == 1 else exponential[b, slot] ** (1 / k) / math.gamma(1 + 1 / k)
            times, up = [], 0.0
            for gap in weibull:
                t = up + gap * mean
                if t > spec["horizon"]:
                    break
                times.append(t)
                up = t if from_failure else t + restart
            assert len(times) < n_draws
            per_job.append(times)
        lists.append(per_job)
    return lists


def _reference(spec, times):
    return simulate_failures_reference(
        spec["compute"],
        spec["write"],
        spec["horizon"],
        times,
        spec["restart"],
        phase=spec["phase"],
        remaining=spec["remaining"],
        cap=spec["cap"],
        throughput=spec["throughput"],
    )


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_weibull_runs_match_the_reference(seed):
    specs = _specs(seed)
    key = jax.random.key(seed)
    shapes = oh.per_job(specs, "shape", N_SLOTS, 1.0)
    fleet = _fleet(specs, mtbf=oh.per_job(specs, "mtbf", N_SLOTS), failure_shape=shapes)
    assert fleet.has_weibull_failures
    lists = _instants(fleet, specs, key)
    until = np.array([spec["horizon"] for spec in specs])
    state = oh.initial_state(specs, fleet)
    drawn = cj.simulate(fleet, state, n_fires=N_FIRES, until=until, key=key, save=JOBS)
    listed = oh.listed_failures(specs, lists, N_SLOTS, 40)
    listed[np.isinf(listed)] = np.nan  # NaN padding, as operators' logs have it
    replay_fleet = _fleet(specs, failure_times=listed)
    replayed = cj.simulate(replay_fleet, state, n_fires=N_FIRES, until=until, save=JOBS)
    failed = 0
    for b, (spec, times) in enumerate(zip(specs, lists)):
        exact = _reference(spec, times)
        assert oh.resolvable(exact["event_times"], spec["horizon"], times, spec["restart"])
        for out in (drawn, replayed):
            oh.assert_run_agrees(out, b, spec, exact, STATS, completed_ends=True, count_steps=False)
        failed += sum(exact["failures"])
    assert failed >= 10  # the examples do fail


# -- replayed failures on the Fleet ---------------------------------------------------------------


def test_fleet_failure_times_are_simulate_failure_times():
    fleet = cj.Fleet([[1.0, 2.0]], [[0.5, 0.5]], restart=0.25)
    times = [[[1.2, 1.3, 4.0], [np.inf] * 3]]  # 1.3 falls while job 0 is down: skipped
    args = dict(n_fires=8, until=10.0, save=JOBS)
    given = cj.simulate(fleet, cj.initial_state(fleet), failure_times=times, **args)
    on_fleet = cj.Fleet([[1.0, 2.0]], [[0.5, 0.5]], restart=0.25, failure_times=[[[1.2, 1.3, 4.0], [np.nan] * 3]])
    assert on_fleet.has_failure_times and not on_fleet.has_failures
    _leaves_equal(given, cj.simulate(on_fleet, cj.initial_state(on_fleet), **args))
    np.testing.assert_array_equal(given.jobs.failures, [[2, 0]])
    picked = on_fleet[0]  # indexing the batch keeps each fleet's list
    assert picked.failure_times.shape == (2, 3)
    with pytest.raises(ValueError, match="failure_times given twice"):
        cj.simulate(on_fleet, cj.initial_state(on_fleet), failure_times=times, **args)


def test_a_listed_failure_while_down_strikes_with_fail_while_down():
    # Job 0 fails at 1.2, is down until 2.2; 1.5 is skipped, unless failures strike while down
    # (then the restart starts over at 1.5 and ends at 2.5).
    times = [[1.2, 1.5], [np.inf, np.inf]]
    runs = {
        flag: cj.simulate(
            fleet := cj.Fleet([1.0, 2.0], [0.5, 0.5], restart=1.0, failure_times=times, fail_while_down=flag),
            cj.initial_state(fleet),
            n_fires=8,
            until=10.0,
            save=JOBS,
        )
        for flag in (False, True)
    }
    np.testing.assert_array_equal(runs[False].jobs.failures, [1, 0])
    np.testing.assert_array_equal(runs[True].jobs.failures, [2, 0])
    np.testing.assert_allclose(runs[False].jobs.down_time[0], 1.0)
    np.testing.assert_allclose(runs[True].jobs.down_time[0], 1.3)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(failure_shape=0.0, mtbf=2.0), r"failure_shape must be in \[0.1, 100.0\]"),
        (dict(failure_shape=0.05, mtbf=2.0), r"failure_shape must be in \[0.1, 100.0\]"),
        (dict(failure_shape=np.nan, mtbf=2.0), r"failure_shape must be in \[0.1, 100.0\]"),
        (dict(failure_shape=[0.7, 0.8, 0.9], mtbf=2.0), "failure_shape must be a scalar or broadcast"),
        (dict(failure_shape=0.7), "failure_shape needs mtbf"),
        (dict(failure_shape=0.7, mtbf=2.0, failure_times=[[1.0], [2.0]]), "failure_shape must be None or 1"),
        (dict(failure_times=[[1.0, 0.5], [np.inf, np.inf]]), "failure_times must be strictly increasing"),
        (dict(failure_times=[[np.nan, 0.5], [np.inf, np.inf]]), "failure_times must be strictly increasing"),
        (dict(failure_times=[[-1.0], [np.inf]]), "failure_times must be >= 0"),
        (dict(failure_times=[1.0, 2.0]), "failure_times must have shape"),
        (dict(failure_times=np.ones((3, 1))), "failure_times must have shape"),
        (dict(failure_times="x"), "failure_times must be"),
    ],
)
def test_bad_failure_inputs_name_the_argument(kwargs, match):
    with pytest.raises(ValueError, match=match):
        cj.Fleet([1.0, 2.0], [0.5, 0.5], **kwargs)


def test_with_failures_while_down_the_weibull_clock_counts_from_the_previous_failure():
    # Restarts as long as the gaps: many failures strike a restart and start it over. The run
    # drawn with fail_while_down replays exactly as the instants counted failure to failure.
    specs = [dict(_specs(5)[0], restart=[2.0] * len(_specs(5)[0]["slots"]), horizon=30.0)] * 2
    shapes, mtbf = oh.per_job(specs, "shape", N_SLOTS, 1.0), oh.per_job(specs, "mtbf", N_SLOTS)
    fleet = _fleet(specs, mtbf=mtbf, failure_shape=np.where(shapes == 1.0, 0.7, shapes), fail_while_down=True)
    specs = [dict(spec, shape=[0.7 if k == 1.0 else k for k in spec["shape"]]) for spec in specs]
    key = jax.random.key(11)
    lists = _instants(fleet, specs, key, from_failure=True)
    state, until = oh.initial_state(specs, fleet), np.array([spec["horizon"] for spec in specs])
    drawn = cj.simulate(fleet, state, n_fires=N_FIRES, until=until, key=key, save=JOBS)
    listed = _fleet(specs, failure_times=oh.listed_failures(specs, lists, N_SLOTS, 40), fail_while_down=True)
    replayed = cj.simulate(listed, state, n_fires=N_FIRES, until=until, save=JOBS)
    counts = [[len(times) for times in per_job] for per_job in lists]
    np.testing.assert_array_equal(np.asarray(drawn.jobs.failures)[0, specs[0]["slots"]], counts[0])
    for name in ("failures", "down_time", "useful_work", "lost_work"):
        np.testing.assert_allclose(getattr(drawn.jobs, name), getattr(replayed.jobs, name), rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(drawn.fire_times, replayed.fire_times, rtol=1e-9)
    for b, (spec, times) in enumerate(zip(specs, lists)):  # the reference of §1e, failures while down
        exact = simulate_realistic_reference(
            spec["compute"],
            spec["write"],
            spec["horizon"],
            failure_times=times,
            restart=spec["restart"],
            phase=spec["phase"],
            remaining=spec["remaining"],
            cap=spec["cap"],
            fail_while_down=True,
        )
        oh.assert_run_agrees(drawn, b, spec, exact, STATS[:3], count_steps=False)
    # Some failures did strike a restart (else this would not tell the two clocks apart).
    assert any(b - a < 2.0 for per_job in lists[0] for a, b in zip(per_job, per_job[1:]))
