"""Finite-time separation rates of the gap map (docs/model.md claim 5): autodiff vs twins vs theory."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ckpt_jax as cj
from ckpt_jax.lyapunov import ftle, ftle_horizons, ftle_twin, random_gaps

THROUGHPUTS = ["shared", "sqrt", "degrading"]


def _overlapping(n_jobs, throughputs, compute=10.0):
    """Identical-job fleets (one per f) in the fully overlapping regime (as in test_maps)."""
    tables = np.stack([cj.throughput_table(t, n_jobs) for t in throughputs])
    write = 0.2 * compute * tables[:, n_jobs] / n_jobs
    shape = (len(throughputs), n_jobs)
    return cj.Fleet(compute=np.full(shape, compute), write=np.broadcast_to(write[:, None], shape), throughput=tables)


def _loaded(n_jobs, load, batch=()):
    write = load / n_jobs
    shape = batch + (n_jobs,)
    return cj.Fleet(compute=np.full(shape, 1.0 - write), write=np.full(shape, write))


_one_cycle = jax.jit(jax.vmap(functools.partial(ftle, n_cycles=1), in_axes=(0, None)))


@pytest.mark.parametrize("n_jobs", [2, 5, 16])
def test_one_cycle_rate_in_overlapping_branch_is_log_largest_eigenvalue(n_jobs):
    fleets = _overlapping(n_jobs, THROUGHPUTS)
    a = np.random.default_rng(n_jobs).uniform(0.2, 1.0, n_jobs - 1) * (0.1 * float(fleets.write.min()) / n_jobs)
    result = _one_cycle(fleets, a)
    assert np.all(np.asarray(result.status) == 0)
    for rate, throughput in zip(np.asarray(result.rate), THROUGHPUTS):
        expected = np.log(np.max(np.abs(cj.theory.gap_eigenvalues(n_jobs, throughput))))
        np.testing.assert_allclose(rate, expected, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("n_jobs", [7])
def test_tangent_along_an_eigendirection_grows_at_its_eigenvalue(n_jobs):
    # The overlapping-branch map is diagonal (claim 2): the tangent e_j grows by λ_j, the
    # contracting ones included, so this checks more than the largest eigenvalue.
    fleet = _overlapping(n_jobs, ["shared"])[0]
    a = np.full(n_jobs - 1, 0.05 * float(fleet.write[0]) / n_jobs)
    expected = np.log(cj.theory.gap_eigenvalues(n_jobs))
    directions = jnp.eye(n_jobs - 1)  # one row per eigendirection e_j

    def rates(direction):
        return (
            ftle(fleet, a, 1, direction=direction).tangent_rate,
            ftle(fleet, a, 1, method="tangent", direction=direction).rate,
            ftle_twin(fleet, a, 1, eps=1e-9, direction=direction).rate,
        )

    jac, tangent, twin = jax.jit(jax.vmap(rates))(directions)
    np.testing.assert_allclose(np.asarray(jac), expected, atol=1e-10)
    np.testing.assert_allclose(np.asarray(tangent), expected, atol=1e-10)
    np.testing.assert_allclose(np.asarray(twin), expected, atol=1e-6)


@jax.jit
@jax.vmap
def _three_estimates(fleet, a):
    """Jacobian-product, one-tangent and twin estimates of one launch, 40 cycles."""
    return ftle(fleet, a, 40), ftle(fleet, a, 40, method="tangent"), ftle_twin(fleet, a, 40, eps=1e-9)


@pytest.mark.parametrize("n_jobs, load", [(3, 0.8), (6, 0.5), (6, 2.0)])
def test_twin_trajectories_agree_with_autodiff(n_jobs, load):
    n_points = 6
    # Loads are data: (6, 0.5) and (6, 2.0) share one compile.
    fleets = _loaded(n_jobs, load, (n_points,))
    points = jax.vmap(random_gaps)(fleets, jax.random.split(jax.random.key(n_jobs), n_points))
    jacobian, tangent, twin = _three_estimates(fleets, points)
    for result in (jacobian, tangent, twin):
        assert np.all(np.asarray(result.status) == 0)
    rate, along = np.asarray(jacobian.rate), np.asarray(jacobian.tangent_rate)
    # Same direction: the one-tangent run, the Jacobian product applied to it, and the twins.
    np.testing.assert_allclose(np.asarray(tangent.rate), along, atol=1e-10)
    np.testing.assert_allclose(np.asarray(twin.rate), along, atol=1e-5)
    # The largest growth over all directions bounds any one direction's.
    assert np.all(rate >= along - 1e-12)
    # The random launches are not all trivial (collision-free launches have rate 0).
    assert np.max(rate) > 0.05
    np.testing.assert_allclose(np.asarray(tangent.final), np.asarray(jacobian.final), rtol=1e-12)


def test_jacobian_rate_is_log_sigma_max_of_the_product():
    fleet = _loaded(5, 1.0)
    a = random_gaps(fleet, jax.random.key(11))
    jac = jax.jit(jax.jacfwd(cj.maps.gap_return_map, argnums=1, has_aux=True))
    step = jax.jit(cj.maps.gap_return_map)
    product = np.eye(4)
    x = a
    for _ in range(3):
        j, _ = jac(fleet, x)
        product = np.asarray(j) @ product
        x, _ = step(fleet, x)
    expected = np.log(np.linalg.svd(product, compute_uv=False)[0]) / 3
    result = ftle(fleet, a, 3)
    np.testing.assert_allclose(float(result.rate), expected, rtol=1e-10)
    np.testing.assert_allclose(np.asarray(result.final), np.asarray(x), rtol=1e-12)


def test_collision_free_stagger_has_zero_rate():
    # Claim 4: write windows that never overlap stay so and the map is the identity.
    fleet = cj.Fleet(compute=np.full(4, 10.0), write=np.full(4, 1.0))
    result = ftle(fleet, np.full(3, 2.75), 20)
    assert int(result.status) == 0
    assert abs(float(result.rate)) < 1e-12
    np.testing.assert_allclose(np.asarray(result.final), 2.75, rtol=1e-12)
    np.testing.assert_allclose(float(result.time), 20 * 11.0, rtol=1e-12)


def test_long_runs_renormalise_instead_of_overflowing():
    # Rates near log(N − 1) per cycle for hundreds of cycles would overflow a raw product.
    fleet = _loaded(16, 1.0)
    a = random_gaps(fleet, jax.random.key(2))
    result = ftle(fleet, a, 400)
    assert int(result.status) == 0 and np.isfinite(float(result.rate)) and float(result.rate) > 0


def test_problems_give_nan_and_a_flag():
    fleet = _loaded(4, 1.0)
    bad = jnp.array([0.1, -0.05, 0.2])  # a negative gap is outside the domain
    good = jnp.array([0.2, 1e-6, 0.2])
    points = jnp.stack([bad, good])
    fleets = _loaded(4, 1.0, (2,))
    runs = _three_estimates(fleets, points)
    for result in runs:
        assert np.isnan(float(result.rate[0])) and np.isnan(float(result.tangent_rate[0]))
        assert int(result.status[0]) & cj.Status.OUT_OF_DOMAIN
        assert np.all(np.isnan(np.asarray(result.final[0])))
        # Flagged lanes do not spoil their neighbours under vmap.
        assert int(result.status[1]) == 0 and np.isfinite(float(result.rate[1]))
    # A twin displaced out of the domain (ε larger than a gap, pointing into it) is flagged.
    twin = ftle_twin(fleet, good, 40, eps=1e-3, direction=jnp.array([0.0, -1.0, 0.0]))
    assert np.isnan(float(twin.rate)) and int(twin.status) & cj.Status.OUT_OF_DOMAIN
    assert cj.Status.DEGENERATE not in (cj.Status.MAX_EVENTS, cj.Status.NONFINITE, cj.Status.QUEUE_OVERFLOW)


@pytest.mark.parametrize("method", ["jacobian", pytest.param("tangent", marks=pytest.mark.slow)])
def test_horizons_read_one_run_as_the_separate_runs_would(method):
    # One run of burn-in + max(horizons) cycles: the burn-in's rate is a run from the launch,
    # each horizon's rate a run from the point the burn-in reached, to rounding.
    fleet = _loaded(6, 1.5)
    a = random_gaps(fleet, jax.random.key(7))
    result = ftle_horizons(fleet, a, (5, 20, 12), burn_in=15, method=method)
    assert int(result.status) == 0
    launch = ftle(fleet, a, 15, method=method)
    np.testing.assert_allclose(float(result.launch_rate), float(launch.rate), rtol=1e-12)
    np.testing.assert_allclose(float(result.launch_tangent_rate), float(launch.tangent_rate), rtol=1e-12)
    np.testing.assert_allclose(float(result.launch_time), float(launch.time), rtol=1e-12)
    np.testing.assert_allclose(np.asarray(result.start), np.asarray(launch.final), rtol=1e-12)
    for index, horizon in enumerate((5, 20, 12)):
        later = ftle(fleet, result.start, horizon, method=method)
        np.testing.assert_allclose(float(result.rate[index]), float(later.rate), rtol=1e-12)
        np.testing.assert_allclose(float(result.tangent_rate[index]), float(later.tangent_rate), rtol=1e-12)
        np.testing.assert_allclose(float(result.time[index]), float(later.time), rtol=1e-12)
    np.testing.assert_allclose(np.asarray(result.final), np.asarray(ftle(fleet, result.start, 20).final), rtol=1e-12)
    # No burn-in: the first horizon is `ftle` itself, and there is no launch window.
    plain = ftle_horizons(fleet, a, (15,), method=method)
    assert float(plain.rate[0]) == float(launch.rate) and np.isnan(float(plain.launch_rate))
    assert float(plain.launch_time) == 0.0


def test_horizons_flag_a_bad_launch_and_refuse_bad_arguments():
    fleet = _loaded(4, 1.0)
    result = ftle_horizons(fleet, jnp.array([0.1, -0.05, 0.2]), (2, 4), burn_in=3)
    assert int(result.status) & cj.Status.OUT_OF_DOMAIN
    assert np.all(np.isnan(np.asarray(result.rate))) and np.isnan(float(result.launch_rate))
    a = jnp.full(3, 0.2)
    for horizons in [(), 3, (0, 2), (2.5,), (True,)]:
        with pytest.raises(ValueError, match="horizons"):
            ftle_horizons(fleet, a, horizons)
    for burn_in in [-1, 1.5, True]:
        with pytest.raises(ValueError, match="burn_in"):
            ftle_horizons(fleet, a, (2,), burn_in=burn_in)
    with pytest.raises(ValueError, match="method"):
        ftle_horizons(fleet, a, (2,), method="qr")


def test_random_gaps_are_uniform_spacings_in_firing_order():
    fleet = _loaded(6, 0.5)
    gaps = np.asarray(jax.vmap(random_gaps, in_axes=(None, 0))(fleet, jax.random.split(jax.random.key(0), 4000)))
    assert gaps.shape == (4000, 5) and np.all(gaps >= 0) and np.all(gaps.sum(axis=1) < 1.0)
    # Uniform spacings of 5 points on (0, 1): each of the first 5 gaps has mean 1/6.
    np.testing.assert_allclose(gaps.mean(axis=0), 1 / 6, atol=0.01)


def test_bad_arguments():
    fleet = _loaded(4, 1.0)
    a = jnp.full(3, 0.2)
    with pytest.raises(ValueError, match="n_cycles"):
        ftle(fleet, a, 0)
    with pytest.raises(ValueError, match="n_cycles"):
        ftle_twin(fleet, a, 2.5)
    with pytest.raises(ValueError, match="method"):
        ftle(fleet, a, 2, method="qr")
    with pytest.raises(ValueError, match="direction"):
        ftle(fleet, a, 2, method="tangent", direction=jnp.ones(2))
    with pytest.raises(ValueError, match="single fleet"):
        ftle(_loaded(4, 1.0, (2,)), a, 2)
