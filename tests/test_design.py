"""`ckpt_jax.design` (docs/model.md claim 10): the smoothed-gradient estimator against finite
differences of the same estimate, reproducibility, bad input, and (slow tier) the acceptance
runs: one job against the exact renewal optimum, two jobs sharing storage against a grid search.

The default tier keeps one small population shape (2P·S = 64 fleets of 2 jobs, H = 200) so
that the event loop compiles once for every test that uses it.
"""

import math

import jax
import numpy as np
import pytest

import ckpt_jax as cj
from ckpt_jax import design
from ckpt_jax._estimate import mean_ci

SMALL = dict(bounds=(0.5, 30.0), horizon=200.0, n_draws=8, n_pairs=4)


@pytest.fixture(scope="module")
def pair():
    """Two jobs sharing one unit of storage bandwidth (f ≡ 1), uncapped, with failures."""
    return cj.Fleet([1.0, 1.0], [0.5, 1.0], mtbf=[10.0, 20.0], restart=0.2, dtype="float64")


def test_interval_parametrisation_round_trips():
    bounds = (0.5, 30.0)
    intervals = np.array([0.6, 1.0, 4.0, 29.0])
    theta = design.theta_from_interval(intervals, bounds)
    np.testing.assert_allclose(np.asarray(design.interval_from_theta(theta, bounds)), intervals, rtol=1e-12)
    extreme = np.asarray(design.interval_from_theta(np.array([-50.0, 50.0]), bounds))
    assert np.all((extreme >= bounds[0]) & (extreme <= bounds[1]))


def test_estimator_on_a_quadratic_objective_has_the_exact_value_and_gradient(pair, monkeypatch):
    # The fleet waste replaced by J(θ) = θᵀAθ/2 + b·θ (+ a constant per failure draw), read
    # back from the intervals the estimator evaluates. For a quadratic the antithetic
    # difference is exact, (J(θ + σz) − J(θ − σz)) / 2σ = z·∇J(θ), so the estimate must be
    # the mean of z zᵀ∇J(θ) over the directions it used; and Gaussian smoothing gives
    # J_σ(θ) = J(θ) + σ² tr(A) / 2 and ∇J_σ = ∇J, which many directions must approach.
    A, b = np.array([[2.0, 0.5], [0.5, 1.0]]), np.array([0.3, -0.2])
    per_draw = np.array([0.0, 0.1, 0.2])
    seen = []

    def quadratic_waste(fleet, intervals, *, horizon, keys, **_):
        theta = design.theta_from_interval(intervals, SMALL["bounds"])
        seen.append(theta)
        value = 0.5 * np.einsum("pi,ij,pj->p", theta, A, theta) + theta @ b
        return value[:, None] + per_draw[: len(keys)]

    monkeypatch.setattr(design, "fleet_waste", quadratic_waste)
    theta, smoothing, n_pairs = np.array([-0.5, 1.0]), 0.3, 4096
    settings = dict(SMALL, n_draws=3, n_pairs=n_pairs, smoothing=smoothing)
    estimate = design.smoothed_gradient(pair, theta, jax.random.key(0), **settings)
    (population,) = seen
    directions = (population[:n_pairs] - population[n_pairs:]) / (2 * smoothing)
    np.testing.assert_allclose(
        (population[:n_pairs] + population[n_pairs:]) / 2, np.tile(theta, (n_pairs, 1)), atol=1e-9
    )
    exact = A @ theta + b
    np.testing.assert_allclose(estimate.gradient, directions.T @ (directions @ exact) / n_pairs, rtol=1e-8)
    np.testing.assert_allclose(estimate.gradient, exact, rtol=0.1)
    smoothed = 0.5 * theta @ A @ theta + b @ theta + 0.5 * smoothing**2 * np.trace(A) + per_draw.mean()
    np.testing.assert_allclose(estimate.objective, smoothed, rtol=0.01)
    assert design.smoothed_objective(pair, theta, jax.random.key(0), **settings) == estimate.objective


def test_fleet_waste_is_the_size_weighted_simulator_waste(pair):
    fleet = cj.Fleet([1.0, 1.0], [0.5, 1.0], mtbf=[10.0, 20.0], size=[1.0, 3.0], dtype="float64")
    keys = jax.random.split(jax.random.key(3), 4)
    intervals = np.array([[2.0, 5.0]])
    waste = design.fleet_waste(fleet, intervals, horizon=50.0, keys=keys)
    assert waste.shape == (1, 4)
    batched = cj.Fleet(
        np.broadcast_to([2.0, 5.0], (4, 2)), [0.5, 1.0], mtbf=[10.0, 20.0], size=[1.0, 3.0], dtype="float64"
    )
    out = cj.simulate(
        batched, cj.initial_state(batched), None, until=50.0, key=keys, save=cj.SaveAt(trace=False, jobs=True)
    )
    per_job = np.asarray(out.jobs.waste)
    np.testing.assert_allclose(waste[0], (per_job[:, 0] + 3 * per_job[:, 1]) / 4, rtol=1e-12)


def test_random_launch_shares_cycle_fractions_across_interval_sets(pair):
    # Common random numbers for launches: a draw places every interval set at the same
    # fractions of its cycle, so equal interval sets give equal waste, and draws differ.
    keys = jax.random.split(jax.random.key(5), 3)
    waste = design.fleet_waste(pair, np.array([[2.0, 5.0], [2.0, 5.0]]), horizon=50.0, keys=keys, launch="random")
    np.testing.assert_array_equal(waste[0], waste[1])
    assert len(np.unique(waste[0])) == 3


def test_gradient_matches_finite_differences_of_the_same_smoothed_objective(pair):
    # Both estimate ∇J_σ: the antithetic estimate, and central differences (step h) of the
    # Monte-Carlo estimate of J_σ taken with the same directions and failure draws (the same
    # key). Over independent keys their paired difference must be zero within its error.
    theta = design.theta_from_interval(np.array([2.0, 9.0]), SMALL["bounds"])
    settings = dict(SMALL, smoothing=0.2)
    h = 0.05
    gradients, differences = [], []
    for replicate in range(24):
        key = jax.random.key(100 + replicate)
        gradients.append(design.smoothed_gradient(pair, theta, key, **settings).gradient)
        row = []
        for k in range(2):
            step = h * np.eye(2)[k]
            up = design.smoothed_objective(pair, theta + step, key, **settings)
            down = design.smoothed_objective(pair, theta - step, key, **settings)
            row.append((up - down) / (2 * h))
        differences.append(row)
    gradients, differences = np.asarray(gradients), np.asarray(differences)
    gap = gradients - differences
    z = gap.mean(axis=0) / (gap.std(axis=0, ddof=1) / math.sqrt(len(gap)))
    assert np.all(np.abs(z) < 4), (gradients.mean(axis=0), differences.mean(axis=0), z)
    # ... and the check has power: both see the slope (T_0 below, T_1 above the optimum).
    mean = gradients.mean(axis=0)
    error = gradients.std(axis=0, ddof=1) / math.sqrt(len(gradients))
    assert mean[0] < -4 * error[0] and mean[1] > 4 * error[1], (mean, error)


def test_offset_gradient_matches_finite_differences_of_the_same_smoothed_objective(pair):
    # The same check for the launch-offset coordinates θ[2:] (fractions of the cycle, mod 1),
    # designed alongside the intervals: one estimate of the whole (4,) gradient per key.
    theta = np.concatenate([design.theta_from_interval(np.array([2.0, 9.0]), SMALL["bounds"]), [0.3, 0.7]])
    settings = dict(SMALL, smoothing=0.2, offsets=True)
    h = 0.05
    gradients, differences = [], []
    for replicate in range(16):
        key = jax.random.key(200 + replicate)
        gradients.append(design.smoothed_gradient(pair, theta, key, **settings).gradient[2:])
        row = []
        for k in (2, 3):
            step = h * np.eye(4)[k]
            up = design.smoothed_objective(pair, theta + step, key, **settings)
            down = design.smoothed_objective(pair, theta - step, key, **settings)
            row.append((up - down) / (2 * h))
        differences.append(row)
    gap = np.asarray(gradients) - np.asarray(differences)
    z = gap.mean(axis=0) / (gap.std(axis=0, ddof=1) / math.sqrt(len(gap)))
    assert np.all(np.abs(z) < 4), (np.mean(gradients, axis=0), np.mean(differences, axis=0), z)
    assert np.all(np.isfinite(gap)) and np.any(np.asarray(differences) != 0)


@pytest.mark.slow  # a design search of offsets; tests/test_cli_design.py designs offsets in the tier
def test_designed_offsets_are_reproducible_and_in_the_cycle(pair):
    def run(seed):
        return design.checkpoint_intervals(
            pair, key=jax.random.key(seed), steps=3, window=2, offsets=True, progress=False, **SMALL
        )

    first, again, other = run(0), run(0), run(1)
    np.testing.assert_array_equal(first.offsets, again.offsets)
    np.testing.assert_array_equal(first.intervals, again.intervals)
    assert first.waste == again.waste
    assert not np.array_equal(first.offsets, other.offsets)
    cycle = np.array([0.5, 1.0]) + first.intervals
    assert first.offsets.shape == (2,) and np.all((first.offsets >= 0) & (first.offsets < cycle))
    assert first.history.offsets.shape == (3, 2)
    # Started evenly staggered: job 0 at the start of its cycle, job 1 halfway round.
    np.testing.assert_allclose(first.history.offsets[0], [0.0, 0.5 * (1.0 + first.history.intervals[0, 1])])
    # The design's waste is that of its offsets; the baselines keep the synchronous launch.
    keys = jax.random.split(jax.random.split(jax.random.key(0), 3)[1], 2 * SMALL["n_pairs"] * SMALL["n_draws"])
    young = first.baselines["young"]
    assert math.isclose(
        young.waste.mean,
        design.fleet_waste(pair, young.intervals[None], horizon=SMALL["horizon"], keys=keys).mean(),
        rel_tol=1e-12,
    )
    fractions = first.offsets / cycle
    assert math.isclose(
        first.waste.mean,
        design.fleet_waste(
            pair, first.intervals[None], horizon=SMALL["horizon"], keys=keys, offsets=fractions[None]
        ).mean(),
        rel_tol=1e-9,
    )
    assert (
        design.checkpoint_intervals(pair, key=jax.random.key(0), steps=1, window=1, progress=False, **SMALL).offsets
        is None
    )


def test_checkpoint_intervals_is_reproducible_from_its_key(pair):
    def run(seed):
        return design.checkpoint_intervals(pair, key=jax.random.key(seed), steps=4, window=2, progress=False, **SMALL)

    first, again, other = run(0), run(0), run(1)
    np.testing.assert_array_equal(first.intervals, again.intervals)
    np.testing.assert_array_equal(first.history.objective, again.history.objective)
    assert first.waste == again.waste
    assert not np.array_equal(first.history.objective, other.history.objective)
    assert first.intervals.shape == (2,) and first.history.intervals.shape == (4, 2)
    assert set(first.baselines) == {"young", "daly", "young_contended"}
    for baseline in first.baselines.values():
        assert baseline.waste.low <= baseline.waste.mean <= baseline.waste.high
        # saved is paired on the same draws: it is the difference of the two means.
        assert math.isclose(baseline.saved.mean, baseline.waste.mean - first.waste.mean, abs_tol=1e-12)
    young = np.asarray(cj.theory.young_interval(np.array([0.5, 1.0]), np.array([10.0, 20.0])))
    np.testing.assert_allclose(first.baselines["young"].intervals, young, rtol=1e-12)
    assert np.all((first.intervals > SMALL["bounds"][0]) & (first.intervals < SMALL["bounds"][1]))


def test_groups_share_one_interval(pair):
    result = design.checkpoint_intervals(
        pair, key=jax.random.key(0), steps=2, window=1, groups=[7, 7], progress=False, **SMALL
    )
    assert result.intervals[0] == result.intervals[1]
    assert np.all(result.history.intervals[:, 0] == result.history.intervals[:, 1])


def test_per_job_bounds_hold_each_interval(pair):
    # Bounds far apart per job: every iterate of each job stays inside its own range, and a
    # group whose jobs share their bounds still shares one interval.
    bounds = (np.array([0.5, 12.0]), np.array([2.0, 40.0]))
    result = design.checkpoint_intervals(
        pair, key=jax.random.key(0), steps=3, window=1, progress=False, **dict(SMALL, bounds=bounds)
    )
    history = result.history.intervals
    assert np.all((history > bounds[0]) & (history < bounds[1])), history
    assert np.all((result.intervals > bounds[0]) & (result.intervals < bounds[1]))
    shared = design.checkpoint_intervals(
        pair,
        key=jax.random.key(0),
        steps=2,
        window=1,
        groups=[4, 4],
        progress=False,
        **dict(SMALL, bounds=([1.0, 1.0], [8.0, 8.0])),
    )
    assert shared.intervals[0] == shared.intervals[1] and 1.0 < shared.intervals[0] < 8.0


def test_contended_young_is_young_without_contention():
    # One job whose failures never strike (M huge) writes in exactly d / f(1): the fixed point
    # is Young's interval at once.
    fleet = cj.Fleet([1.0], [0.5], throughput=[0.0, 2.0], mtbf=1e9, dtype="float64")
    # As many draws as the next test: the two share one compiled loop (8 fleets of one job).
    keys = jax.random.split(jax.random.key(0), 8)
    intervals, iterations, converged = design.contended_young(fleet, horizon=1e6, keys=keys)
    np.testing.assert_allclose(intervals, np.sqrt(2 * 0.25 * 1e9), rtol=1e-9)
    assert converged and iterations == 1


def test_contended_young_is_young_for_a_lone_job_that_fails():
    # One job alone fails often (M = 10, R = 0.5): every completed write takes exactly d, so
    # the fixed point is Young's interval; writes abandoned by a failure or open at the
    # horizon do not count (with them the mean write took 1.05 d, and T came out 2.6% long).
    fleet = cj.Fleet([1.0], [1.0], mtbf=10.0, restart=0.5, dtype="float64")
    keys = jax.random.split(jax.random.key(0), 8)
    young = math.sqrt(2 * 1.0 * 10.0)
    jobs = design._run(fleet, np.array([young]), keys, 500.0, None, "synchronous")
    assert np.all(np.asarray(jobs.failures) > 0)
    abandoned = np.asarray(jobs.write_time) - np.asarray(jobs.completed_write_time)
    assert np.all(abandoned > 0)  # the bias was there to remove
    np.testing.assert_allclose(np.asarray(jobs.completed_write_time) / np.asarray(jobs.writes), 1.0, rtol=1e-12)
    intervals, iterations, converged = design.contended_young(fleet, horizon=500.0, keys=keys)
    np.testing.assert_allclose(intervals, young, rtol=1e-12)
    assert converged and iterations == 1


BAD = [
    (dict(bounds=(0.0, 1.0)), "bounds"),
    (dict(bounds=(2.0, 1.0)), "bounds"),
    (dict(bounds=(2.0, 2.0)), "bounds"),
    (dict(bounds=(1.0, math.inf)), "bounds"),
    (dict(bounds=(math.nan, 1.0)), "bounds"),
    (dict(bounds=3.0), "bounds"),
    (dict(bounds=(np.ones(3), 30.0)), "bounds"),
    (dict(bounds=(0.5, [30.0, 0.4])), "bounds"),
    (dict(bounds=([0.5, -1.0], 30.0)), "bounds"),
    (dict(bounds=([0.5, 1.0], [30.0, math.inf])), "bounds"),
    (dict(bounds=([0.5, 1.0], 30.0), groups=[3, 3]), "bounds"),
    (dict(horizon=0.0), "horizon"),
    (dict(horizon=math.inf), "horizon"),
    (dict(horizon="long"), "horizon"),
    (dict(n_draws=0), "n_draws"),
    (dict(n_draws=2.5), "n_draws"),
    (dict(n_draws=True), "n_draws"),
    (dict(n_pairs=0), "n_pairs"),
    (dict(steps=0), "steps"),
    (dict(learning_rate=-1.0), "learning_rate"),
    (dict(smoothing=0.0), "smoothing"),
    (dict(groups=[0, 1, 2]), "groups"),
    (dict(launch="staggered"), "launch"),
    (dict(init=[1.0, -1.0]), "init"),
    (dict(init=[0.1, 5.0]), r"init must lie inside the bounds: job 0 starts at 0.1, outside \[0.5, 30\]"),
    (dict(method="search", init=[5.0, 100.0]), r"init must lie inside the bounds: job 1"),
    (dict(eval_draws=1), "eval_draws"),
    (dict(offsets="yes"), "offsets"),
    (dict(offset_groups=[0, 0]), "offset_groups"),
    (dict(offsets=True, offset_groups=[0, 1, 2]), "offset_groups"),
]


@pytest.mark.parametrize("change, name", BAD)
def test_bad_input_names_the_argument(pair, change, name):
    args = dict(SMALL, key=jax.random.key(0), progress=False, **change)
    with pytest.raises(ValueError, match=name):
        design.checkpoint_intervals(pair, **args)


@pytest.mark.parametrize(
    "fleet, name",
    [
        (cj.Fleet([1.0, 1.0], [0.5, 1.0], dtype="float64"), "mtbf"),
        (cj.Fleet([[1.0, 1.0]], [0.5, 1.0], mtbf=10.0, dtype="float64"), "single fleet"),
        ("fleet", "ckpt_jax.Fleet"),
    ],
)
def test_bad_fleet(fleet, name):
    with pytest.raises(ValueError, match=name):
        design.checkpoint_intervals(fleet, key=jax.random.key(0), progress=False, **SMALL)


@pytest.mark.slow
def test_acceptance_one_job_matches_the_renewal_optimum():
    # (a) One job alone: D/M = 0.1, where Young is 17% off the exact optimum and Daly 0.04%.
    fleet = cj.Fleet([1.0], [1.0], mtbf=10.0, dtype="float64")
    result = design.checkpoint_intervals(
        fleet,
        bounds=(0.5, 50.0),
        horizon=2000.0,
        n_draws=64,
        n_pairs=8,
        key=jax.random.key(0),
        steps=150,
        progress=False,
    )
    optimum = float(cj.theory.optimal_interval(1.0, 10.0))
    assert abs(result.intervals[0] / optimum - 1) < 0.05, (result.intervals, optimum)
    # Young's interval is measurably worse on the same fresh draws; Daly's is not.
    assert result.baselines["young"].saved.low > 0
    assert result.baselines["daly"].saved.low < 0 < result.baselines["daly"].saved.high


def _grid_minimum(fleet, horizon, n_draws, key, centre, width, points):
    """Brute force: the same objective (fleet waste, same draws at every point) on a
    log-spaced grid around ``centre``; returns the grid minimiser and the minimiser of a
    quadratic fitted to the grid in log T (robust to the grid's Monte-Carlo noise)."""
    axis = [c * np.exp(np.linspace(-width, width, points)) for c in centre]
    grid = np.stack(np.meshgrid(*axis, indexing="ij"), axis=-1).reshape(-1, 2)
    waste = design.fleet_waste(fleet, grid, horizon=horizon, keys=jax.random.split(key, n_draws)).mean(axis=1)
    x = np.log(grid)
    features = np.stack([np.ones(len(x)), x[:, 0], x[:, 1], x[:, 0] ** 2, x[:, 0] * x[:, 1], x[:, 1] ** 2], axis=1)
    c = np.linalg.lstsq(features, waste, rcond=None)[0]
    hessian = np.array([[2 * c[3], c[4]], [c[4], 2 * c[5]]])
    fitted = np.exp(np.linalg.solve(hessian, -c[1:3]))
    return grid[np.argmin(waste)], fitted


@pytest.mark.slow
def test_acceptance_two_jobs_sharing_storage_match_a_grid_search():
    # (b) Two jobs, f ≡ 1 shared, no cap: the design against a brute-force grid search over the
    # same (unsmoothed) objective, on independent draws.
    fleet = cj.Fleet([1.0, 1.0], [0.5, 1.0], mtbf=[10.0, 20.0], restart=0.2, dtype="float64")
    horizon = 1000.0
    result = design.checkpoint_intervals(
        fleet,
        bounds=(0.5, 50.0),
        horizon=horizon,
        n_draws=64,
        n_pairs=8,
        key=jax.random.key(1),
        steps=150,
        progress=False,
    )
    coarse, _ = _grid_minimum(fleet, horizon, 128, jax.random.key(2), result.baselines["young"].intervals, 0.7, 15)
    best, fitted = _grid_minimum(fleet, horizon, 512, jax.random.key(3), coarse, 0.15, 13)
    assert np.all(np.abs(result.intervals / fitted - 1) < 0.05), (result.intervals, fitted, best)


@pytest.mark.parametrize(
    "change, reason",
    [
        (dict(mtbf=[1e-3, 1e-3]), r"no job saved any work .*every job fails more often"),
        (dict(cap=0.001), r"no job saved any work .*the power cap C = 0.001"),
    ],
    ids=["failing constantly", "tiny cap"],
)
def test_a_flat_objective_is_said_with_its_reason(change, reason):
    fleet = cj.Fleet(
        [1.0, 1.0],
        [0.5, 1.0],
        mtbf=change.get("mtbf", [10.0, 20.0]),
        restart=0.2,
        cap=change.get("cap"),
        dtype="float64",
    )
    settings = dict(SMALL, horizon=change.get("horizon", SMALL["horizon"]))
    with pytest.warns(RuntimeWarning, match="the objective is flat, nothing was designed: " + reason):
        result = design.checkpoint_intervals(
            fleet, key=jax.random.key(0), steps=2, window=1, progress=False, **settings
        )
    assert np.all(result.history.grad_norm == 0)
    # No checkpoint completes, so the interval changes nothing (steady-state waste: the work
    # uncovered at H is not lost, docs/model.md §1c).
    assert all(baseline.saved.mean == 0 for baseline in result.baselines.values())


def test_an_objective_that_varies_gives_no_warning(pair, recwarn):
    design.checkpoint_intervals(pair, key=jax.random.key(0), steps=2, window=1, progress=False, **SMALL)
    assert not [w for w in recwarn if "flat" in str(w.message)]


# -- write limits and two-level checkpoints (docs/model.md §1d) ------------------------------

# Three jobs sharing f ≡ 1, each drains at most 0.5 per unit time: alone a write takes d / 0.5.
LIMITED = dict(write=[1.0, 1.0, 1.0], mtbf=[20.0, 30.0, 40.0], restart=0.2, write_limit=0.5)
# Three two-level jobs with short snapshots and long drains (d / min(b, f(1)) = 2, 2, 1 alone)
# that contend for f ≡ 1: at Young's interval max(√(2·s·M), D) a snapshot comes due while
# the previous drain still runs, and the job waits.
TWO_LEVEL = dict(
    write=[2.0, 2.0, 2.0],
    mtbf=[50.0, 50.0, 100.0],
    restart=0.2,
    write_limit=[2.0, 1.0, 2.0],
    snapshot=[0.05, 0.05, 0.1],
)
DESIGN_RUN = dict(bounds=(0.5, 60.0), horizon=200.0, n_draws=8, n_pairs=4, steps=20, progress=False)


@pytest.mark.parametrize("fields", [LIMITED, dict(TWO_LEVEL, recover_from="memory")], ids=["write limits", "memory"])
def test_fleet_waste_runs_the_fleet_as_given_and_counts_what_failures_take(fields):
    # The population is the user's fleet with its write limits, snapshots and recovery rule:
    # fleet_waste equals the steady-state waste of the same batch built by hand (docs/model.md
    # §1c: the work done less the work failures took, whatever covers it), so under
    # recover_from="memory", where a failure keeps the work of a finished snapshot, it is
    # lower than from storage on the same draws (the dynamics are the same).
    fleet = cj.Fleet(1.0, dtype="float64", **fields)
    keys = jax.random.split(jax.random.key(4), 4)
    waste = design.fleet_waste(fleet, np.array([[3.0, 4.0, 5.0]]), horizon=60.0, keys=keys)
    batched = cj.Fleet(np.broadcast_to([3.0, 4.0, 5.0], (4, 3)), dtype="float64", **fields)
    out = cj.simulate(
        batched, cj.initial_state(batched), None, until=60.0, key=keys, save=cj.SaveAt(trace=False, jobs=True)
    )
    jobs = out.jobs
    kept = np.asarray(jobs.useful_work) + np.asarray(jobs.uncovered_work)
    np.testing.assert_allclose(waste[0], (1 - kept / 60.0).mean(axis=-1), rtol=1e-12)
    if fleet.has_snapshots:
        persisted, useful = np.asarray(jobs.persisted_work), np.asarray(jobs.useful_work)
        assert np.any(useful > persisted)  # a failure struck a drain: the two counts differ
        storage = cj.Fleet(1.0, dtype="float64", **TWO_LEVEL)
        from_storage = design.fleet_waste(storage, np.array([[3.0, 4.0, 5.0]]), horizon=60.0, keys=keys)
        assert np.all(waste <= from_storage) and np.any(waste < from_storage)


def test_design_with_write_limits_is_no_worse_than_the_baselines():
    fleet = cj.Fleet(1.0, dtype="float64", **LIMITED)
    result = design.checkpoint_intervals(fleet, key=jax.random.key(0), **DESIGN_RUN)
    # The baselines take the write time alone under the limit, d / min(b, f(1)) = 2.
    np.testing.assert_allclose(result.baselines["young"].intervals, np.sqrt(2 * 2.0 * np.array(LIMITED["mtbf"])))
    np.testing.assert_allclose(
        result.baselines["daly"].intervals, cj.theory.daly_interval(2.0, np.array(LIMITED["mtbf"])), rtol=1e-12
    )
    # Blocking writes keep the objective flat near Young's interval: no baseline is better
    # outside the noise (paired over the same fresh draws).
    for name, baseline in result.baselines.items():
        assert baseline.saved.high > 0, (name, baseline)


def test_design_with_snapshots_beats_the_baselines_where_drains_contend():
    fleet = cj.Fleet(1.0, dtype="float64", **TWO_LEVEL)
    result = design.checkpoint_intervals(fleet, key=jax.random.key(0), **DESIGN_RUN)
    drain = np.array([2.0, 2.0, 1.0])
    young = np.maximum(np.sqrt(2 * np.array(TWO_LEVEL["snapshot"]) * np.array(TWO_LEVEL["mtbf"])), drain)
    np.testing.assert_allclose(result.baselines["young"].intervals, young, rtol=1e-12)
    # Waiting on a contended drain is pure waste: the design checkpoints less often than
    # Young's interval and saves waste against every baseline, outside the noise.
    assert np.all(result.intervals > young)
    # A fourth baseline: the exact optimum of a lone job (no contention).
    optimum = cj.theory.two_level_optimal_interval(TWO_LEVEL["snapshot"], drain, TWO_LEVEL["mtbf"], 0.2)
    np.testing.assert_allclose(result.baselines["two_level"].intervals, optimum, rtol=1e-12)
    assert list(result.baselines) == ["young", "daly", "young_contended", "two_level"]
    for name, baseline in result.baselines.items():
        assert baseline.saved.low > 0, (name, baseline)


def test_two_level_jobs_launch_computing():
    # With two-level checkpoints a launch position is the compute done in the first phase T
    # (no drain in flight at t = 0, as cj.random_state starts them): a random launch puts
    # every job computing, with (0, T] left.
    fleet = cj.Fleet(1.0, dtype="float64", **TWO_LEVEL)
    np.testing.assert_array_equal(design.launch_cycle(fleet), [1.0, 1.0, 1.0])
    intervals = np.array([[3.0, 4.0, 5.0]])
    keys = jax.random.split(jax.random.key(2), 3)
    batched = design._batched(fleet, np.broadcast_to(intervals[:, None], (1, 3, 3)))
    state = design._launch_state(batched, keys, "random")
    assert np.all(np.asarray(state.phase) == 0)
    remaining = np.asarray(state.remaining)
    assert np.all((remaining > 0) & (remaining <= [3.0, 4.0, 5.0])) and len(np.unique(remaining)) == 9
    with pytest.raises(ValueError, match=r"position must lie in \[0, T_i\)"):
        design.launch_state(fleet, [0.0, 1.0, 1.5])


# -- the deterministic search ------------------------------------------------------------


def test_compass_search_finds_the_minimum_of_a_quadratic_and_says_when_it_stopped():
    # A deterministic bowl in two coordinates with a per-draw offset (cancelled by pairing):
    # the search must stop converged within one finest step of the minimum, and a budget of
    # one step must end it not converged.
    minimum = np.array([0.7, -1.2])
    offsets = np.array([0.0, 0.3, -0.1, 0.05])

    def evaluate(points):
        return ((points - minimum) ** 2).sum(axis=1)[:, None] + offsets

    lower, upper, scale = np.full(2, -10.0), np.full(2, 10.0), np.ones(2)
    mesh_min = math.log1p(0.1)
    centre, converged, rows = design._compass_search(
        evaluate, np.zeros(2), lower, upper, scale, mesh_min=mesh_min, max_steps=100, bar=None
    )
    assert converged and len(rows) < 100
    assert np.all(np.abs(centre - minimum) <= mesh_min), centre
    assert [row[0] for row in rows] == sorted([row[0] for row in rows], reverse=True)  # never worse
    _, converged, rows = design._compass_search(
        evaluate, np.zeros(2), lower, upper, scale, mesh_min=mesh_min, max_steps=1, bar=None
    )
    assert not converged and len(rows) == 1


def test_search_is_reproducible_and_every_estimate_comes_from_one_evaluation(pair):
    def run(seed):
        return design.checkpoint_intervals(
            pair,
            key=jax.random.key(seed),
            method="search",
            steps=8,
            progress=False,
            candidates={"mine": np.array([1.5, 2.5])},
            **SMALL,  # the draws of the next search test: the two share their compiled programs
        )

    first, again = run(0), run(0)
    np.testing.assert_array_equal(first.intervals, again.intervals)
    assert first.waste == again.waste and first.method == "search"
    assert first.start in ("young", "daly", "young_contended", "mine")
    evaluation = first.evaluation
    assert evaluation.names == ("design", "young", "daly", "young_contended", "mine")
    n_eval = 2 * SMALL["n_pairs"] * SMALL["n_draws"]
    assert evaluation.fleet_waste.shape == (5, n_eval) and evaluation.job_waste.shape == (5, n_eval, 2)
    np.testing.assert_array_equal(evaluation.intervals[0], first.intervals)
    assert math.isclose(first.waste.mean, evaluation.fleet_waste[0].mean(), rel_tol=1e-12)
    compared = {**first.baselines, **first.candidates}
    for i, name in enumerate(evaluation.names[1:], 1):
        assert math.isclose(
            compared[name].saved.mean, (evaluation.fleet_waste[i] - evaluation.fleet_waste[0]).mean(), abs_tol=1e-12
        )
        assert not compared[name].saved.high < 0  # no set beats the recommendation outside the noise
    assert np.all(evaluation.power_steps >= 0) and np.all(evaluation.writes >= 0)
    assert first.mesh is not None and first.mesh[0] == pytest.approx(1.0)  # the first move: x2 or /2
    assert np.all(np.diff(first.mesh) <= 0)


def test_a_baseline_that_beats_the_design_is_recommended_instead(pair):
    # Bounds that hold the design at tiny intervals, and a candidate inside them far better:
    # the design falls back to it, and every estimate says so (the design's row is its row).
    bounds = (0.5, 60.0)
    result = design.checkpoint_intervals(
        pair,
        key=jax.random.key(0),
        method="adam",
        steps=1,
        window=1,
        learning_rate=1e-6,
        init=np.array([0.55, 0.55]),
        progress=False,
        candidates={"good": np.array([3.0, 4.5])},
        **dict(SMALL, bounds=bounds, n_draws=4, n_pairs=1),
    )
    assert result.fallback is not None
    assert result.searched[0] < 0.6
    chosen = {**result.baselines, **result.candidates}[result.fallback]
    np.testing.assert_array_equal(result.intervals, chosen.intervals)
    assert chosen.saved == design.Estimate(0.0, 0.0, 0.0)
    off = design.checkpoint_intervals(
        pair,
        key=jax.random.key(0),
        method="adam",
        steps=1,
        window=1,
        learning_rate=1e-6,
        init=np.array([0.55, 0.55]),
        progress=False,
        fallback=False,
        **dict(SMALL, bounds=bounds, n_draws=4, n_pairs=1),
    )
    assert off.fallback is None and off.intervals[0] < 0.6


def test_a_reliable_job_is_never_designed_past_the_horizon():
    # Jobs that (almost) never fail with large checkpoints: Young's interval, √(2·d·M) = 10⁶,
    # lies far past H = 200, and so did the default bounds (Young ÷ 10 to × 10): the design
    # recommended intervals no checkpoint completes within, waste 1, while the intervals in
    # use (3 and 4.5) kept most of the work. The bounds are now held under H.
    fleet = cj.Fleet([1.0, 1.0], [0.5, 1.0], mtbf=1e12, restart=0.2, dtype="float64")
    young = np.sqrt(2 * np.array([0.5, 1.0]) * 1e12)
    result = design.checkpoint_intervals(
        fleet,
        key=jax.random.key(0),
        method="search",
        steps=2,
        progress=False,
        candidates={"current": np.array([3.0, 4.5])},
        **dict(SMALL, bounds=(young / 10, young * 10)),
    )
    assert np.all(result.intervals <= SMALL["horizon"]), result.intervals
    assert result.waste.mean < 0.5
    assert not result.candidates["current"].saved.high < 0  # the intervals in use do not beat it


def test_the_intervals_in_use_are_recommended_where_they_beat_the_design_outside_the_bounds(pair):
    # Bounds that hold the design at tiny intervals and a candidate outside them far better
    # (the caller's own intervals): the design falls back to it rather than recommending
    # what it beats outside the noise.
    result = design.checkpoint_intervals(
        pair,
        key=jax.random.key(0),
        method="adam",
        steps=1,
        window=1,
        learning_rate=1e-6,
        init=np.array([0.55, 0.55]),
        progress=False,
        candidates={"current": np.array([3.0, 4.5])},
        **dict(SMALL, bounds=(0.5, 0.6), n_draws=4, n_pairs=1),
    )
    assert result.fallback == "current"
    np.testing.assert_array_equal(result.intervals, [3.0, 4.5])
    assert result.candidates["current"].saved == design.Estimate(0.0, 0.0, 0.0)


def test_bounds_are_held_under_the_horizon():
    lo, hi = design._within_horizon((np.array([0.5, 1e5, 300.0]), np.array([30.0, 1e7, 400.0])), 200.0)
    np.testing.assert_allclose(lo, [0.5, 2.0, 150.0])
    np.testing.assert_allclose(hi, [30.0, 200.0, 200.0])


# -- reading an evaluation (what `ckpt-jax design` reports), on arrays made by hand ------------


def _evaluation():
    """Three sets (design, young, current) of 3 jobs in 2 groups over 4 draws; job 2's writer
    shares undefined (NaN) on draw 0 of the design."""
    rng = np.random.default_rng(0)
    job_waste = rng.uniform(0.0, 0.5, (3, 4, 3))
    size = np.array([1.0, 3.0, 2.0])
    writers = rng.uniform(0.0, 1.0, (3, 4, 4))
    writers[0, 0] = np.nan
    return design.Evaluation(
        names=("design", "young", "current"),
        intervals=np.ones((3, 3)),
        job_waste=job_waste,
        fleet_waste=(job_waste * size).sum(-1) / size.sum(),
        writes=rng.integers(0, 5, (3, 4, 3)).astype(float),
        writers=writers,
        power_steps=rng.integers(0, 9, (3, 4)).astype(float),
        power_threshold=0.1,
        horizon=43200.0,
    ), size


def test_group_waste_and_the_comparison_are_paired_size_weighted_means():
    evaluation, size = _evaluation()
    labels = np.array([0, 0, 1])
    per_group = design.group_waste(evaluation, labels, size)
    waste = evaluation.job_waste
    np.testing.assert_allclose(per_group[..., 0], (waste[..., 0] * 1 + waste[..., 1] * 3) / 4)
    np.testing.assert_allclose(per_group[..., 1], waste[..., 2])
    result = design.compare(evaluation, labels, size, gpus=[16.0, 8.0])
    assert result.names == evaluation.names and set(result.saved) == {"young", "current"}
    difference = per_group[2, :, 1] - per_group[0, :, 1]  # current − design, group 1, per draw
    assert result.saved["current"][1] == mean_ci(difference)
    assert result.waste["young"][0] == mean_ci(per_group[1, :, 0])
    fleet_saved = evaluation.fleet_waste[1] - evaluation.fleet_waste[0]
    assert result.fleet_saved["young"] == mean_ci(fleet_saved)
    assert result.fleet_waste["design"] == mean_ci(evaluation.fleet_waste[0])
    assert result.goodput["design"][0] == mean_ci(1 - evaluation.fleet_waste[0])
    assert result.gpu_hours_saved is not None
    fleet_hours, group_hours = result.gpu_hours_saved["young"]
    assert fleet_hours.mean == pytest.approx(fleet_saved.mean() * 24 * 24)
    assert group_hours[1].mean == pytest.approx((per_group[1, :, 1] - per_group[0, :, 1]).mean() * 8 * 24)
    assert design.compare(evaluation, labels, size).gpu_hours_saved is None


def test_writer_distribution_averages_the_draws_where_it_is_defined():
    evaluation, _ = _evaluation()
    shares, n_draws = design.writer_distribution(evaluation)
    np.testing.assert_array_equal(n_draws, [3, 4, 4])
    np.testing.assert_allclose(shares[0], evaluation.writers[0, 1:].mean(0))
    np.testing.assert_allclose(shares[1], evaluation.writers[1].mean(0))


def test_power_and_storage_per_day_and_over_the_horizon():
    evaluation, _ = _evaluation()
    write = np.array([2.0, 1.0, 5.0])
    per_h = design.power_and_storage(evaluation, write)
    per_day = design.power_and_storage(evaluation, write, day=86400.0)  # H is half a day
    assert list(per_h) == list(evaluation.names)
    assert per_h["young"]["volume"] == mean_ci(evaluation.writes[1] @ write)
    assert per_h["young"]["power_steps"] == mean_ci(evaluation.power_steps[1])
    assert per_day["current"]["power_steps"].mean == pytest.approx(2 * evaluation.power_steps[2].mean())


def test_failure_draws_are_reproducible_and_skip_failures_while_down():
    listed, down = design.failure_draws([5.0, 1e12], [2.0, 0.0], 60.0, seed=3)
    again, _ = design.failure_draws([5.0, 1e12], [2.0, 0.0], 60.0, seed=3)
    np.testing.assert_array_equal(listed, again)
    times = listed[0][np.isfinite(listed[0])]
    assert np.all(np.diff(times) > 0) and times.max() <= 60.0 and np.all(np.isinf(listed[1]))
    assert down[1] == []
    struck = [t for t, _ in down[0]]
    assert set(struck) <= set(times) and struck[0] == times[0]
    for (t, back), later in zip(down[0], down[0][1:]):
        assert back == t + 2.0 and later[0] >= back  # a failure while down is passed over


def test_schedule_shows_one_period_of_a_run_with_failures():
    fleet = cj.Fleet([3.0, 3.0], [0.5, 1.0], mtbf=[10.0, 20.0], restart=0.2, dtype="float64")
    period = np.array([3.5, 4.0])
    shown = design.schedule(fleet, period=period, mtbf=[10.0, 20.0], restart=[0.2, 0.2], seed=0)
    assert shown["fire"].shape == shown["end"].shape == shown["abandoned"].shape
    assert 0 <= shown["start"] < shown["stop"] and shown["stop"] - shown["start"] <= shown["period"] + 1e-12
    assert 3.0 < shown["period"] < 3 * 4.0  # a fire-to-fire time: the interval and a write, or a wait
    ended = np.isfinite(shown["end"])
    assert np.all(shown["end"][ended] >= shown["fire"][ended])
    again = design.schedule(fleet, period=period, mtbf=[10.0, 20.0], restart=[0.2, 0.2], seed=0)
    np.testing.assert_array_equal(shown["fire"], again["fire"])
    with pytest.raises(ValueError, match="key"):
        design.schedule(fleet, period=period, mtbf=[10.0, 20.0], restart=[0.2, 0.2], seed=0, launch="random")
