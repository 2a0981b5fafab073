"""Guards for designs within budgets (docs/model.md §1g) and for ``ckpt-jax fit``: plausible
slips that the other tests let through, each checked against values computed by hand from
small data, not against the code itself.

Budgets: the use of a limit per `Budgets.per` (a budget per day over a half-day horizon is
twice the horizon's use, not half), the shadow price's sign (the waste a relaxed limit
saves: the searched design's waste minus the relaxed one's, paired on the same draws), a
floor (``min_interval``) raised on its own group's jobs, the shadow price in GPU-hours a
day (× GPUs × 24), and a point moved onto the limits carrying its own waste and use (not
the starting point's: the search picks its start by them).

Fit: failures exactly ``window`` apart are one outage ("within"), writes that meet end to
start are not concurrent, the time to a job's own failure counts from its restart's end and
an outage's failure censors it, the fitted file's bandwidths are in GB/s (10⁹ B/s, not
GiB/s), the Weibull mean's interval is the observed information's in (log k, log mean), a
domain's outage MTBF counts its own jobs' observed time, and `simulate --logs` ends the
restarts of one outage's k-th job k·Δ after the first (k = 0, 1, ...).

Cheap by design: no design run, one tiny trace (three jobs, eight draws) for the shadow
price, one fit of an 80-write log; the rest is numpy on a handful of rows. Each test fails on the
slip it names (each was planted and checked).
"""

from __future__ import annotations

import math
from pathlib import Path
from types import SimpleNamespace

import jax
import numpy as np
import pytest

import ckpt_jax as cj
from ckpt_jax import design, fit
from ckpt_jax._estimate import Estimate
from ckpt_jax._logs import read_logs

# -- budgets ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def fleet():
    """Three jobs in two groups (volumes 1, 1, 2), failing often enough that the interval
    matters within H = 120."""
    return cj.Fleet(
        np.full(3, 10.0),
        np.array([1.0, 1.0, 2.0]),
        throughput=np.minimum(np.arange(4), 2.0),
        mtbf=np.full(3, 30.0),
        restart=0.5,
        dtype="float64",
    )


NO_RELAXED = {"held": {}, "binding": (), "relaxed": {}, "scaled": {}}


def test_use_per_day_scales_the_horizon_to_the_day(fleet):
    # Completed checkpoints per job in two draws over H = 43200 s (half a day).
    writes = np.array([[1.0, 2.0, 3.0], [2.0, 2.0, 1.0]])
    steps = np.array([4.0, 6.0])
    per_day = design.Budgets(written=1.0, power_steps=1.0, per=86400.0)
    # Volumes 1, 1, 2: 1 + 2 + 6 = 9 and 2 + 2 + 2 = 6 over half a day, 18 and 12 a day.
    use = design._use_of(writes, steps, fleet, per_day, 43200.0)
    np.testing.assert_allclose(use["written"], [18.0, 12.0])
    np.testing.assert_allclose(use["power_steps"], [8.0, 12.0])
    over_h = design._use_of(writes, steps, fleet, design.Budgets(written=1.0, power_steps=1.0), 43200.0)
    np.testing.assert_allclose(over_h["written"], [9.0, 6.0])
    # The report's use on the evaluation's draws, the same way (no relaxed design: no run).
    evaluation = SimpleNamespace(writes=writes[None], power_steps=steps[None], names=("design",))
    outcome = design._budget_outcome(
        fleet,
        per_day,
        NO_RELAXED,
        evaluation,
        None,
        keys=None,
        horizon=43200.0,
        jitter=None,
        launch="synchronous",
        offsets=None,
        restart_stagger=None,
    )
    assert outcome.used["written"].mean == pytest.approx(15.0)
    assert outcome.used["power_steps"].mean == pytest.approx(10.0)


def test_the_shadow_price_is_the_waste_the_relaxed_design_saves(fleet):
    # The searched design at the longest intervals (a tight budget), the relaxed one shorter:
    # with failures every 30 on average, intervals of 60 lose far more work than intervals of 8.
    horizon, keys = 120.0, jax.random.split(jax.random.key(3), 8)
    searched, relaxed = np.full((1, 3), 60.0), np.full((1, 3), 8.0)
    start = np.zeros((1, 3))  # launch offsets: every run below shares one compiled program

    def waste(intervals):
        return design.fleet_waste(fleet, intervals, horizon=horizon, keys=keys, offsets=start)[0]

    saved = waste(searched) - waste(relaxed)
    assert saved.mean() > 0  # the scenario: relaxing the limit buys something
    outcome = design._budget_outcome(
        fleet,
        design.Budgets(power_steps=5.0),
        {**NO_RELAXED, "relaxed": {"power_steps": relaxed[0]}},
        SimpleNamespace(writes=None, power_steps=np.zeros((1, 8)), names=("design", "young")),
        waste(searched),
        keys=keys,
        horizon=horizon,
        jitter=None,
        launch="synchronous",
        offsets=start[0],
        restart_stagger=None,
    )
    shadow = outcome.shadow["power_steps"]
    assert shadow.mean == pytest.approx(saved.mean(), rel=1e-9, abs=1e-12)
    assert shadow.mean > 0


def test_a_floor_raises_its_own_groups_lower_bound():
    # Jobs 0, 1 in group 0 with floor 3, job 2 in group 1 with floor 2 (bounds [1, 60]).
    labels = np.array([0, 0, 1])
    (lo, hi), (group_lo, group_hi) = design._with_floor(
        np.array([3.0, 3.0, 2.0]), (np.full(3, 1.0), np.full(3, 60.0)), labels
    )
    np.testing.assert_array_equal(lo, [3.0, 3.0, 2.0])
    np.testing.assert_array_equal(group_lo, [3.0, 2.0])
    np.testing.assert_array_equal(group_hi, [60.0, 60.0])
    # Groups listed out of order: job 0 in group 1, jobs 1, 2 in group 0.
    (lo, _), (group_lo, _) = design._with_floor(
        np.array([5.0, 2.0, 2.0]), (np.full(3, 1.0), np.full(3, 60.0)), np.array([1, 0, 0])
    )
    np.testing.assert_array_equal(lo, [5.0, 2.0, 2.0])
    np.testing.assert_array_equal(group_lo, [2.0, 5.0])


def test_the_shadow_price_in_gpu_hours_a_day():
    from ckpt_jax.cli.design import _budgets_json
    from ckpt_jax.fleetfile import loads

    spec = loads(
        'power_per_gpu = "700 W"\n[storage]\npeak = "1 TB/s"\n[[groups]]\ncount = 2\ngpus = 8\n'
        'checkpoint = "1 TB"\nmtbf = "10 h"\n[[groups]]\ncount = 1\ngpus = 8\ncheckpoint = "1 TB"\nmtbf = "10 h"\n'
    )
    outcome = design.BudgetOutcome(
        budgets=design.Budgets(written=500e12, per=86400.0),
        used={"written": Estimate(450e12, 400e12, 500e12)},
        held={"written": 490e12},
        binding=("written",),
        shadow={"written": Estimate(0.01, 0.005, 0.015)},
        relaxed={"written": np.full(3, 3000.0)},
        scaled={},
    )
    block = _budgets_json(spec, outcome, np.array([0, 2]))
    # 24 GPUs; a share 0.01 of their time is 0.01 × 24 × 24 = 5.76 GPU-hours a day.
    assert block["shadow_gpu_hours_per_day"]["written"] == pytest.approx(
        {"mean": 5.76, "low": 2.88, "high": 8.64}, rel=1e-12
    )
    assert block["relaxed"] == {"written": [3000.0, 3000.0]}


# -- fit ----------------------------------------------------------------------------------------

JOBS = "job,group,gpus,nodes,first [s],last [s]\na,g,8,1,0,10000\nb,g,8,1,0,10000\nc,g,8,1,0,10000\n"
NO_WRITES = "job,start [s],end [s],bytes [GB]\n"


def _folder(tmp_path: Path, jobs: str, writes: str, failures: str) -> Path:
    folder = tmp_path / "logs"
    folder.mkdir(exist_ok=True)
    for name, text in (("jobs.csv", jobs), ("writes.csv", writes), ("failures.csv", failures)):
        (folder / name).write_text(text)
    return folder


def test_failures_exactly_window_apart_are_one_outage(tmp_path):
    # a at 3600, b exactly 60 s later: within the window of 60 s, one outage; c 120 s after
    # a is past it, alone (not an outage).
    failures = "job,time [s]\na,3600\nb,3660\nc,3720\n"
    logs = read_logs(_folder(tmp_path, JOBS, NO_WRITES, failures))
    clusters = fit.outage_clusters(logs, window=60.0)
    assert [[int(logs.failure_job[row]) for row in cluster] for cluster in clusters] == [[0, 1]]


def test_writes_that_meet_end_to_start_are_not_concurrent():
    # w0 [0, 10], w1 [10, 20], w2 [5, 15]: w2 overlaps w0 on [5, 10] and w1 on [10, 15]; at
    # t = 10 w0 ends as w1 starts: two writes in progress there, never three.
    mean, most = fit.observed_writers([0.0, 10.0, 5.0], [10.0, 20.0, 15.0])
    np.testing.assert_allclose(mean, [1.5, 1.5, 2.0])
    np.testing.assert_array_equal(most, [2, 2, 2])
    mean, most = fit.observed_writers([0.0, 10.0], [10.0, 20.0])
    np.testing.assert_allclose(mean, [1.0, 1.0])
    np.testing.assert_array_equal(most, [1, 1])


def test_times_to_failure_count_from_restart_ends_and_outages_censor(tmp_path):
    # Job a (window [0, 10000]): own failure at 1000 (restarted at 1100), an outage with b at
    # 3000 (a restarted at 3050), own failure at 5000 (restarted at 5100).
    failures = "job,time [s],restart_end [s]\na,1000,1100\na,3000,3050\nb,3010,3060\na,5000,5100\nb,8000,8100\n"
    logs = read_logs(_folder(tmp_path, JOBS, NO_WRITES, failures))
    clusters = fit.outage_clusters(logs, window=60.0)
    outage_rows = {row for cluster in clusters for row in cluster}
    assert len(clusters) == 1
    events, censored = fit._segments(logs, (0,), outage_rows)
    # Observed: 1000 - 0 and 5000 - 3050; censored: at the outage 3000 - 1100, at the
    # window's end 10000 - 5100.
    np.testing.assert_allclose(np.sort(events), [1000.0, 1950.0])
    np.testing.assert_allclose(np.sort(censored), [1900.0, 4900.0])
    # Job b: censored at the outage (3010 from 0), own failure 8000 - 3060, censored 10000 - 8100.
    events, censored = fit._segments(logs, (1,), outage_rows)
    np.testing.assert_allclose(np.sort(events), [4940.0])
    np.testing.assert_allclose(np.sort(censored), [1900.0, 3010.0])


def test_the_fitted_file_speaks_gb_and_gb_per_s(tmp_path):
    from ckpt_jax import fleetfile

    rows = ["job,start [s],end [s],bytes [GB]"]
    # Two 1-node jobs, 10 GB each in 10 s, never together: 1 GB/s a write.
    for k in range(40):
        t = 100.0 * k
        rows += [f"a,{t},{t + 10},10", f"b,{t + 50},{t + 60},10"]
    jobs = "job,group,gpus,nodes,first [s],last [s]\na,g,8,1,0,5000\nb,g,8,1,0,5000\n"
    logs = read_logs(_folder(tmp_path, jobs, "\n".join(rows) + "\n", "job,time [s]\n"))
    fitted = fit.from_logs(logs)
    spec = fleetfile.load(fit.write(fitted, tmp_path / "out")[0])
    assert spec.groups[0].write == pytest.approx(10e9, rel=1e-5)  # 10 GB, not 10 GiB
    storage = spec.source["storage"]
    from ckpt_jax._units import to_base

    # Every write alone at 1 GB/s: the peak (f(1), saturates_at = 1) is 10^9 B/s.
    assert to_base(storage["peak"], "bandwidth") == pytest.approx(1e9, rel=1e-3)


def test_the_weibull_means_interval_is_the_observed_information_of_log_mean():
    from scipy import stats
    from scipy.special import gamma

    rng = np.random.default_rng(7)
    events = 1000.0 * rng.weibull(0.7, 200)
    censored = 1000.0 * rng.uniform(0.0, 2.0, 30)
    _, weibull, shape, _, _ = fit._failure_law(events, censored)
    k, mean = shape.value, weibull.value

    # The log-likelihood in (log k, log mean): at the maximum, the observed information of
    # this parametrisation gives the interval of log(mean) directly (no delta method).
    def loglik(log_k, log_mean):
        c = math.exp(log_k)
        scale = math.exp(log_mean) / gamma(1 + 1 / c)
        law = stats.weibull_min
        return float(np.sum(law.logpdf(events, c, scale=scale)) + np.sum(law.logsf(censored, c, scale=scale)))

    point, h = np.array([math.log(k), math.log(mean)]), 1e-4
    hessian = np.empty((2, 2))
    for i in range(2):
        for j in range(2):
            e_i, e_j = np.eye(2)[i] * h, np.eye(2)[j] * h
            hessian[i, j] = (
                loglik(*(point + e_i + e_j))
                - loglik(*(point + e_i - e_j))
                - loglik(*(point - e_i + e_j))
                + loglik(*(point - e_i - e_j))
            ) / (4 * h * h)
    sd = math.sqrt(np.linalg.inv(-hessian)[1, 1])
    assert weibull.low == pytest.approx(mean * math.exp(-1.959963984540054 * sd), rel=2e-3)
    assert weibull.high == pytest.approx(mean * math.exp(1.959963984540054 * sd), rel=2e-3)


def test_a_move_onto_the_limits_carries_the_moved_points_waste_and_use():
    # One log-interval x; the use 2·e^(-1.5 x) against a limit 1 (kept from x = log(2) / 1.5),
    # the waste x² + 1 on two draws. The point at 0 breaks the limit and moves up to the root
    # (within 1 %); the point at 1 keeps it and stays.
    calls = []

    def run(points):
        x = points[:, 0]
        use = 2.0 * np.exp(-1.5 * x)
        calls.append(len(points))
        return np.repeat((x**2 + 1)[:, None], 2, 1), np.log(use), {"written": np.repeat(use[:, None], 2, 1)}

    points = np.array([[0.0], [1.0]])
    moved, waste, use, kept = design._onto_limits(
        run, points, run(points), n_groups=1, lower=np.array([-5.0]), upper=np.array([5.0]), n_rows=2
    )
    root = math.log(2.0) / 1.5
    assert kept.all() and moved[1, 0] == 1.0
    assert root <= moved[0, 0] <= root + math.log1p(0.01) / 1.5
    # The waste and the use returned are the moved points', not the starting ones'.
    np.testing.assert_allclose(waste[:, 0], moved[:, 0] ** 2 + 1)
    np.testing.assert_allclose(use["written"][:, 0], 2.0 * np.exp(-1.5 * moved[:, 0]))
    assert all(n == 2 for n in calls)  # every run padded to n_rows: one compiled program


def test_an_outages_restarts_end_delta_apart_from_the_first(tmp_path):
    from ckpt_jax.fleetfile import loads

    spec = loads(
        'time_unit = "min"\nrestart_stagger = "30 s"\n[storage]\npeak = "1 GB/s"\n'
        '[[groups]]\nname = "a"\ncount = 3\ngpus = 1\ncheckpoint = "60 GB"\nmtbf = "1000000 h"\n'
        'interval = "10 min"\nrestart = "1 min"\ndomain = "rack"\n'
        '[[outages]]\ndomain = "rack"\ntimes = ["5 min", "1 h"]\n'
    )
    drawn = fit.draw_failures(spec, 7200.0, 0)
    rows = [(job, time, end) for job, time, end, domain, cause in drawn.rows if cause == "outage"]
    # Job k of the jobs an outage fails ends its restart at t + R + k·Δ (k = 0, 1, 2): R = 60 s, Δ = 30 s.
    assert rows == [
        (0, 300.0, 360.0),
        (1, 300.0, 390.0),
        (2, 300.0, 420.0),
        (0, 3600.0, 3660.0),
        (1, 3600.0, 3690.0),
        (2, 3600.0, 3720.0),
    ]


def test_a_domains_outage_mtbf_counts_its_own_jobs_time(tmp_path):
    # Domain rack (a, b) observed over [0, 4 h], c (another domain) over [0, 10 h]; rack has two
    # outages: its span is 4 h (14400 s), its MTBF 7200 s.
    jobs = "job,group,gpus,nodes,first [h],last [h]\na,r,8,1,0,4\nb,r,8,1,0,4\nc,s,8,1,0,10\nd,s,8,1,0,10\n"
    failures = "job,time [s],domain\na,1000,rack\nb,1010,rack\na,9000,rack\nb,9005,rack\nc,20000,other\nd,20001,other\n"
    logs = read_logs(_folder(tmp_path, jobs, NO_WRITES, failures))
    clusters = fit.outage_clusters(logs, window=60.0)
    domains = fit.fit_domains(logs, clusters, fit.job_domains(logs, clusters))
    rack = next(d for d in domains if d.name == "rack")
    assert rack.outages == 2 and rack.span == 14400.0 and rack.mtbf.value == 7200.0
    other = next(d for d in domains if d.name == "other")
    assert other.outages == 1 and other.span == 36000.0


def test_the_outage_mtbfs_interval_is_the_exact_poisson_one():
    # Two outages in 1000 s: MTBF 500 s; the exact (Garwood) 95 % interval from the chi-square
    # table, 2T / chi2_0.975(2n + 2) and 2T / chi2_0.025(2n): 2000 / 14.4494 and 2000 / 0.484419.
    value = fit._poisson_mtbf(2, 1000.0)
    assert value.value == 500.0 and value.n == 2
    assert value.low == pytest.approx(2000.0 / 14.4494, rel=1e-5)
    assert value.high == pytest.approx(2000.0 / 0.484419, rel=1e-5)
    # None in 1000 s: bounded below by 2T / chi2_0.975(2) = 2000 / 7.37776.
    none = fit._poisson_mtbf(0, 1000.0)
    assert not none.determined and none.low == pytest.approx(2000.0 / 7.37776, rel=1e-5)
