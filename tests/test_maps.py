"""Return maps, autodiff Jacobians and the invariant structure (docs/model.md claims 1-4)."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ckpt_jax as cj

THROUGHPUTS = ["shared", "sqrt", "saturating", "degrading"]  # f ≡ 1, √n, min(n, 4), decreasing


def _identical(n_jobs, throughputs, compute=10.0):
    """A batch of identical-job fleets, one per throughput function, each in its fully
    overlapping regime: N writers together drain in a fifth of the compute time."""
    tables = np.stack([cj.throughput_table(t, n_jobs) for t in throughputs])
    write = 0.2 * compute * tables[:, n_jobs] / n_jobs
    shape = (len(throughputs), n_jobs)
    return cj.Fleet(compute=np.full(shape, compute), write=np.broadcast_to(write[:, None], shape), throughput=tables)


_batched_jacobian = jax.jit(jax.vmap(jax.jacfwd(cj.maps.gap_return_map, argnums=1, has_aux=True), in_axes=(0, None)))
_padded_jacobians = jax.jit(jax.vmap(jax.jacfwd(cj.maps.gap_return_map, argnums=1, has_aux=True)))

SLOTS = 12  # the small fleets of claim 2, N = 2..SLOTS, padded to one shape
SMALL_N = list(range(2, SLOTS + 1))


def _small_gaps(n_jobs, fleets):
    """Small positive gaps: all N write windows overlap (the fully overlapping branch)."""
    return np.random.default_rng(n_jobs).uniform(0.2, 1.0, n_jobs - 1) * (0.1 * float(fleets.write.min()) / n_jobs)


@pytest.fixture(scope="module")
def padded_jacobians():
    """The gap-map Jacobians of claim 2 for every small N and every f, in one compiled call:
    each N's fleets are padded to SLOTS slots (inactive jobs after the active ones, which the
    maps ignore and give gap 0); ``{n_jobs: (jacobians (f, N-1, N-1), info)}``."""
    fleets, gaps = [], []
    for n_jobs in SMALL_N:
        fleet = _identical(n_jobs, THROUGHPUTS)
        pad = SLOTS - n_jobs
        fleets.append(
            cj.Fleet(
                compute=np.pad(np.asarray(fleet.compute), ((0, 0), (0, pad)), mode="edge"),
                write=np.pad(np.asarray(fleet.write), ((0, 0), (0, pad)), mode="edge"),
                throughput=np.stack([cj.throughput_table(t, SLOTS) for t in THROUGHPUTS]),
                active=np.arange(SLOTS) < n_jobs,
            )
        )
        gaps.append(np.pad(_small_gaps(n_jobs, fleet), (0, pad)))
    batch = jax.tree_util.tree_map(lambda *rows: jnp.concatenate(rows), *fleets)
    a = np.repeat(np.stack(gaps), len(THROUGHPUTS), axis=0)
    jacobians, info = _padded_jacobians(batch, a)
    jacobians = np.asarray(jacobians).reshape(len(SMALL_N), len(THROUGHPUTS), SLOTS - 1, SLOTS - 1)
    info = jax.tree_util.tree_map(lambda x: np.asarray(x).reshape((len(SMALL_N), len(THROUGHPUTS)) + x.shape[1:]), info)
    out = {}
    for k, n_jobs in enumerate(SMALL_N):
        block = jacobians[k]
        # The padding slots neither move nor are moved by the active jobs.
        assert np.all(block[:, n_jobs - 1 :, :] == 0) and np.all(block[:, :, n_jobs - 1 :] == 0)
        out[n_jobs] = (block[:, : n_jobs - 1, : n_jobs - 1], jax.tree_util.tree_map(lambda x, k=k: x[k], info))
    return out


@pytest.mark.parametrize("n_jobs", SMALL_N + [64, 256])
def test_claim2_reciprocal_spectrum_by_autodiff(n_jobs, padded_jacobians):
    if n_jobs in padded_jacobians:
        jacobians, info = padded_jacobians[n_jobs]
    else:
        fleets = _identical(n_jobs, THROUGHPUTS)
        jacobians, info = _batched_jacobian(fleets, _small_gaps(n_jobs, fleets))
    assert np.all(np.asarray(info.branch) == cj.maps.BRANCH_OVERLAPPING)
    assert np.all(np.asarray(info.status) == 0)
    for jacobian, throughput in zip(np.asarray(jacobians), THROUGHPUTS):
        eigenvalues = np.linalg.eigvals(jacobian)
        eigenvalues = eigenvalues[np.argsort(-eigenvalues.real)]
        expected = cj.theory.gap_eigenvalues(n_jobs, throughput)
        order = np.argsort(-expected)
        np.testing.assert_allclose(eigenvalues.real, expected[order], rtol=1e-9)
        assert np.abs(eigenvalues.imag).max(initial=0) < 1e-9
        assert abs(np.linalg.det(jacobian) - 1) < 1e-9
        n_expanding = int(np.sum(np.abs(eigenvalues) > 1 + 1e-9))
        if throughput == "shared":
            assert n_expanding == math.ceil(n_jobs / 2) - 1
        # λ_j λ_{N-j} = 1, from the autodiff eigenvalues (indexed by j via the diagonal).
        diagonal = np.diag(jacobian)
        np.testing.assert_allclose(diagonal * diagonal[::-1], 1.0, rtol=1e-9)


def test_spectrum_function_matches_theory():
    fleet = cj.Fleet(compute=np.full(7, 10.0), write=np.full(7, 3.0), throughput="sqrt")
    result = cj.maps.spectrum(fleet, np.full(6, 0.1))
    np.testing.assert_allclose(
        np.sort(result.eigenvalues.real), np.sort(cj.theory.gap_eigenvalues(7, "sqrt")), rtol=1e-9
    )
    assert abs(result.determinant - 1) < 1e-9
    assert result.n_expanding == 3 and int(result.info.branch) == cj.maps.BRANCH_OVERLAPPING


# Jitted once for the module (the fleet is an argument, so every fleet of one shape shares the
# program): run op by op, each call compiles every primitive of the event loop on its own.
# The maps run eagerly in the other tests of this module (order change, refusals).
_jacobian = jax.jit(jax.jacfwd(cj.maps.gap_return_map, argnums=1, has_aux=True))
_gap_maps = jax.jit(jax.vmap(cj.maps.gap_return_map, in_axes=(None, 0)))


@pytest.mark.parametrize(
    "cap, throughput, a",
    [
        (None, "shared", [0.3, 0.5, 0.2]),  # overlapping
        (2.5, "sqrt", [2.0, 1.0, 4.0]),  # mixed, capped
        (None, "degrading", [4.0, 3.5, 3.8]),  # collision-free
    ],
)
def test_jacobian_agrees_with_central_differences(cap, throughput, a):
    fleet = cj.Fleet(compute=np.full(4, 10.0), write=np.full(4, 3.0), cap=cap, throughput=throughput)
    a = np.asarray(a)
    jacobian, info = _jacobian(fleet, a)
    assert int(info.status) == 0
    step = 1e-6
    e = step * np.eye(a.size)  # row j: a step along coordinate j
    plus, _ = _gap_maps(fleet, a + e)
    minus, _ = _gap_maps(fleet, a - e)
    columns = (np.asarray(plus) - np.asarray(minus)) / (2 * step)  # row j: column j of the Jacobian
    np.testing.assert_allclose(np.asarray(jacobian), columns.T, rtol=1e-6, atol=1e-7)


def _return_time(fleet, u):
    return cj.maps.section_map(fleet, u)[1].return_time


def _work_of_job0(fleet, u, time):
    return cj.maps.work_done(fleet, u, time)[0]


_return_time_and_slope = jax.jit(lambda fleet, u: (_return_time(fleet, u), jax.jacfwd(_return_time, 1)(fleet, u)))
_work_and_slope = jax.jit(lambda fleet, u, t: (_work_of_job0(fleet, u, t), jax.jacfwd(_work_of_job0, 1)(fleet, u, t)))


def test_return_time_derivative_matches_implicit_function_theorem():
    # t* solves G(t, u) = θ_0(t; u) − (d_0 + T_0) = 0, so dt*/du = −(∂θ_0/∂u) / (∂θ_0/∂t).
    fleet = cj.Fleet(compute=[10.0, 9.0, 12.0], write=[3.0, 2.0, 4.0], cap=1.5, throughput="sqrt")
    u = jnp.array([4.0, 13.0])
    t_star, dt_du = _return_time_and_slope(fleet, u)
    t_star = float(t_star)
    probe = t_star * (1 - 1e-7)  # inside the last constant-rate interval before the firing
    at_probe, dtheta_du = _work_and_slope(fleet, u, probe)
    h = t_star * 1e-8
    rate = (at_probe - _work_and_slope(fleet, u, probe - h)[0]) / h
    assert 0 < float(rate) < 1  # the cap binds there, so this is not a trivial rate-1 case
    np.testing.assert_allclose(np.asarray(dt_du), -np.asarray(dtheta_du) / float(rate), rtol=1e-6)
    assert np.any(np.abs(np.asarray(dt_du)) > 1e-3)


_pair_map = jax.jit(jax.vmap(cj.maps.section_map, in_axes=(0, 0)))


@pytest.mark.parametrize("write", [1.0, 4.0, 9.5])
def test_claim1_pair_map_is_identity_across_the_cycle(write):
    cases = [
        (None, "shared"),
        (None, "sqrt"),
        (0.6, "linear"),
        (1.0, "linear"),
        (1.4, "linear"),
        (0.8, "shared"),
        (1.3, "degrading"),
    ]
    compute = 10.0
    deltas = np.linspace(0, compute + write, 25)[1:-1]
    rows = [(c, t, x) for c, t in cases for x in deltas]
    caps = np.array([1e9 if c is None else c for c, _, _ in rows])
    tables = np.stack([cj.throughput_table(t, 2) for _, t, _ in rows])
    fleets = cj.Fleet(
        compute=np.full((len(rows), 2), compute), write=np.full((len(rows), 2), write), cap=caps, throughput=tables
    )
    delta = np.array([[x] for _, _, x in rows])
    nxt, info = _pair_map(fleets, delta)
    assert np.all(np.asarray(info.status) == 0)
    np.testing.assert_allclose(np.asarray(nxt), delta, rtol=1e-12, atol=1e-12 * (compute + write))


def test_claim1_pair_map_moves_for_heterogeneous_jobs_under_binding_cap():
    # Unequal periods alone shift δ by a constant (the uncoupled drift). A cap below 1
    # throttles even a lone computing job (its own speed changes with who else computes),
    # so the shift depends on δ in these work coordinates; the test can fail. (This is not
    # the pairwise coupling of claim 8a, which the anonymous model cannot produce: see
    # docs/model.md claim 8.)
    # (δ = 8 = T_1 would sit on a kink: job 1's write ends as job 0 fires; see NOT_SMOOTH.)
    delta = np.linspace(3.25, 9.25, 7)[:, None]
    shifts = {}
    # (C < 1: a lone computing job is throttled while a lone writer is not; with C >= 1 and
    # f(1) = 1 both jobs always progress at equal rates and even unequal jobs stay neutral.)
    for cap in (0.6, 1e9):
        fleets = cj.Fleet(
            compute=np.tile([10.0, 8.0], (7, 1)), write=np.tile([3.0, 3.0], (7, 1)), cap=cap, throughput="linear"
        )
        nxt, info = _pair_map(fleets, delta)
        assert np.all(np.asarray(info.status) == 0)
        shifts[cap] = np.asarray(nxt) - delta
    assert np.ptp(shifts[1e9]) < 1e-12  # uncapped: pure drift
    assert np.ptp(shifts[0.6]) > 1e-2  # binding cap: coupling


def test_map_flags_order_change_with_nan():
    # A much faster job 1 fires twice before job 0 returns: the gap map is undefined there.
    fleet = cj.Fleet(compute=[10.0, 2.0, 10.0], write=[1.0, 0.5, 1.0])
    a_next, info = cj.maps.gap_return_map(fleet, jnp.array([1.0, 3.0]))
    assert np.all(np.isnan(np.asarray(a_next)))
    assert int(info.status) & cj.Status.ORDER_CHANGED
    bad, info = cj.maps.gap_return_map(fleet, jnp.array([-1.0, 3.0]))
    assert np.all(np.isnan(np.asarray(bad))) and int(info.status) & cj.Status.OUT_OF_DOMAIN


def test_map_rejects_batched_fleet_and_wrong_shape():
    fleet = cj.Fleet(compute=np.full((2, 3), 10.0), write=np.full((2, 3), 1.0))
    with pytest.raises(ValueError, match="single fleet"):
        cj.maps.gap_return_map(fleet, jnp.zeros(2))
    with pytest.raises(ValueError, match="shape"):
        cj.maps.gap_return_map(fleet[0], jnp.zeros(3))


def _cyclic_order_kept(fire_times):
    """Firings sorted in time must list the jobs in one fixed cyclic order, every cycle."""
    n_jobs, n_fires = fire_times.shape
    order = np.argsort(fire_times.T.ravel(), kind="stable")
    jobs = np.tile(np.arange(n_jobs), n_fires)[order]
    first = jobs[:n_jobs]
    return len(set(first)) == n_jobs and np.array_equal(jobs, np.tile(first, n_fires))


@pytest.mark.parametrize("n_jobs", [3, 8, 64])
def test_claim3_firing_order_is_invariant_and_phases_never_merge(n_jobs):
    batch = 8
    fleet = cj.Fleet(
        compute=np.full((batch, n_jobs), 10.0),
        write=np.full((batch, n_jobs), 2.0),
        cap=[None] * 0 or None,
        throughput="sqrt",
    )
    state = cj.random_state(fleet, jax.random.key(n_jobs))
    trace = cj.simulate(fleet, state, n_fires=500)
    assert bool(np.all(trace.ok))
    fire = np.asarray(trace.fire_times)
    for b in range(batch):
        assert _cyclic_order_kept(fire[b])
        per_cycle = np.sort(fire[b], axis=0)
        assert np.diff(per_cycle, axis=0).min() > 0  # distinct phases never coincide


def _windows_sorted(fire, end):
    order = np.argsort(fire.ravel())
    return fire.ravel()[order], end.ravel()[order]


# The two claim-4 runs share one compiled loop: CLAIM4_BATCH fleets of CLAIM4_JOBS jobs,
# CLAIM4_FIRES firings.
CLAIM4_BATCH, CLAIM4_JOBS, CLAIM4_FIRES = 8, 6, 1000


def test_claim4_collision_free_fleets_stay_collision_free():
    n_jobs, compute, write = CLAIM4_JOBS, 10.0, 1.0
    rng = np.random.default_rng(4)
    cycle = compute + write
    positions = []
    for _ in range(CLAIM4_BATCH):  # random staggers whose write windows never overlap
        slack = cycle - n_jobs * write
        cuts = np.sort(rng.uniform(0, slack, n_jobs - 1))
        spacing = np.diff(np.concatenate([[0], cuts, [slack]]))[:-1] + write
        positions.append(np.concatenate([[0.0], np.cumsum(spacing)]) % cycle)
    fleet = cj.Fleet(compute=np.full((CLAIM4_BATCH, n_jobs), compute), write=np.full((CLAIM4_BATCH, n_jobs), write))
    trace = cj.simulate(fleet, cj.state_from_positions(fleet, np.array(positions)), n_fires=CLAIM4_FIRES)
    assert bool(np.all(trace.ok))
    for b in range(CLAIM4_BATCH):
        starts, ends = _windows_sorted(np.asarray(trace.fire_times)[b], np.asarray(trace.end_times)[b])
        assert np.all(ends[:-1] <= starts[1:] + 1e-9)


def test_claim4_overlapping_launches_never_become_collision_free():
    n_jobs = CLAIM4_JOBS
    fleet = cj.Fleet(compute=np.full((CLAIM4_BATCH, n_jobs), 10.0), write=np.full((CLAIM4_BATCH, n_jobs), 1.5))
    state = cj.random_state(fleet, jax.random.key(11))
    trace = cj.simulate(fleet, state, n_fires=CLAIM4_FIRES)
    assert bool(np.all(trace.ok))
    for b in range(CLAIM4_BATCH):
        starts, ends = _windows_sorted(np.asarray(trace.fire_times)[b], np.asarray(trace.end_times)[b])
        overlaps = ends[:-1] > starts[1:]
        assert overlaps[:n_jobs].any()  # launched overlapping
        # every block of N consecutive firings (one cycle) still holds an overlap
        blocks = np.lib.stride_tricks.sliding_window_view(overlaps, n_jobs)
        assert blocks.any(axis=1).all()


def test_maps_refuse_delayed_and_async_fleets_with_nan_and_flag():
    # The section coordinates do not determine the state of these variants: never a
    # silently wrong number (the base-model map would be returned otherwise).
    for options in (dict(delay=2.0), dict(async_fraction=0.5)):
        fleet = cj.Fleet(compute=[10.0, 10.0], write=[3.0, 3.0], cap=1.0, throughput="linear", **options)
        value, info = cj.maps.section_map(fleet, jnp.array([4.0]))
        assert np.isnan(float(value[0])) and int(info.status) & cj.Status.UNSUPPORTED
        value, info = cj.maps.gap_return_map(fleet, jnp.array([4.0]))
        assert np.isnan(float(value[0])) and int(info.status) & cj.Status.UNSUPPORTED
        assert np.isnan(float(cj.maps.work_done(fleet, jnp.array([4.0]), 1.0)[0]))
