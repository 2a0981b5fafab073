"""Job sizes and sharing policies (docs/model.md §1b) against the exact reference.

Random fleets with random sizes, under every pair of power and storage policy, must agree
with `reference.simulate_reference` (exact rational arithmetic on the same float64 inputs)
to 1e-9 relative, and on grid fleets the engine's step count is bounded from both sides by
the exact event instants, as for the base model (tests/test_engine_oracle.py). Unit sizes
give today's results bit for bit on every loop; `method="auto"` routes fleets the fast loops
cannot serve to the general engine, and an explicit fast method refuses them.

Shapes are fixed (fleets padded to ``N_SLOTS`` slots, ``N_FIRES`` firings) so each policy
pair compiles once per variant.
"""

import functools
import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from reference import maxmin_level, simulate_reference

import ckpt_jax as cj

N_SLOTS = 5
N_FIRES = 4
RTOL = 1e-9
ATOL_OF_SCALE = 1e-12
RESOLUTION = 1e-12  # exactly distinct instants closer than this (relative) may merge
# The §1b policies (the queueing ones of §1e have their own oracle, tests/test_queue_oracle.py).
POLICIES = [(power, storage) for power in cj.POWER_POLICIES for storage in ("fair", "weighted", "fcfs")]
SETTINGS = settings(
    max_examples=int(os.environ.get("CKPT_ORACLE_EXAMPLES", 12)),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@st.composite
def sized_fleets(draw, grid=False, variants=False):
    """A random fleet of 2..N_SLOTS active jobs over N_SLOTS slots, with random sizes.

    ``grid``: times, sizes and caps on multiples of 1/4 and f(n) = 1 or n, so exact
    arithmetic has many simultaneous events. ``variants``: τ > 0 and α > 0 (both, so
    that one compiled loop serves every example of a policy pair).
    """
    n_active = draw(st.integers(2, N_SLOTS))
    slots = sorted(draw(st.permutations(range(N_SLOTS)))[:n_active])
    if grid:
        value = st.integers(1, 12).map(lambda k: k / 4)
        size = st.integers(1, 8).map(lambda k: k / 4)
        fraction = st.integers(1, 4).map(lambda k: k / 4)
        cap = st.integers(1, 4 * n_active).map(lambda k: k / 4)
    else:
        value = st.floats(0.1, 3.0)
        size = st.floats(0.25, 4.0)
        fraction = st.floats(0.01, 1.0)
        cap = st.floats(0.3, 2.0 * n_active)
    compute = [draw(value) for _ in range(n_active)]
    write = [draw(value) for _ in range(n_active)]
    phase = [draw(st.integers(0, 1)) for _ in range(n_active)]
    remaining = [draw(fraction) * (write[j] if phase[j] else compute[j]) for j in range(n_active)]
    linear = draw(st.booleans())
    return dict(
        slots=slots,
        compute=compute,
        write=write,
        phase=phase,
        remaining=remaining,
        size=[draw(size) for _ in range(n_active)],
        cap=draw(cap) if draw(st.integers(0, 4)) else None,
        throughput=[1.0] + [float(n) if linear else 1.0 for n in range(1, N_SLOTS + 1)],
        delay=draw(value) if variants else 0.0,
        async_fraction=draw(fraction) if variants else 0.0,
    )


def pad(values, slots, filler):
    out = [filler] * N_SLOTS
    for value, slot in zip(values, slots):
        out[slot] = value
    return out


def engine_trace(spec, power, storage, method="auto"):
    slots = spec["slots"]
    fleet = cj.Fleet(
        np.array(pad(spec["compute"], slots, 1.25)),
        np.array(pad(spec["write"], slots, 0.75)),
        cap=spec["cap"],
        throughput=np.array(spec["throughput"]),
        delay=spec["delay"],
        async_fraction=spec["async_fraction"],
        active=np.array(pad([True] * len(slots), slots, False)),
        size=np.array(pad(spec["size"], slots, 3.0)),
        power_policy=power,
        storage_policy=storage,
    )
    state = cj.initial_state(
        fleet, phase=np.array(pad(spec["phase"], slots, 1)), remaining=np.array(pad(spec["remaining"], slots, 0.5))
    )
    return cj.simulate(fleet, state, N_FIRES, method=method)


def reference_run(spec, power, storage):
    n_active = len(spec["slots"])
    fire_times, end_times, instants = simulate_reference(
        spec["compute"],
        spec["write"],
        spec["phase"],
        spec["remaining"],
        N_FIRES,
        cap=spec["cap"],
        throughput=spec["throughput"][: n_active + 1],
        delay=spec["delay"],
        async_fraction=spec["async_fraction"],
        size=spec["size"],
        power_policy=power,
        storage_policy=storage,
        return_event_times=True,
    )
    return np.array(fire_times, float), np.array(end_times, float), instants


def resolvable(instants):
    count, last = 0, None
    for t in instants:
        if last is None or t - last > RESOLUTION * max(abs(t), 1):
            count += 1
        last = t
    return count


def assert_agrees(spec, power, storage, bracketed=False):
    trace = engine_trace(spec, power, storage)
    assert bool(trace.ok), f"status {int(trace.status)}: {spec}"
    ref_fire, ref_end, instants = reference_run(spec, power, storage)
    slots = spec["slots"]
    engine = np.concatenate([np.asarray(trace.fire_times)[slots], np.asarray(trace.end_times)[slots]])
    exact = np.concatenate([ref_fire, ref_end])
    bound = RTOL * np.abs(exact) + ATOL_OF_SCALE * max(np.max(exact), 1.0)
    assert np.all(np.abs(engine - exact) <= bound), (np.max(np.abs(engine - exact) / exact), spec)
    if bracketed:
        n_events = int(trace.n_events)
        assert resolvable(instants) <= n_events <= len(instants), (n_events, len(instants), spec)
    return np.max(np.abs(engine - exact) / exact)


@pytest.mark.parametrize("power, storage", POLICIES)
@SETTINGS
@given(spec=sized_fleets())
def test_policies_match_reference(power, storage, spec):
    assert_agrees(spec, power, storage)


@pytest.mark.parametrize("power, storage", POLICIES)
@SETTINGS
@given(spec=sized_fleets(grid=True))
def test_policies_match_reference_with_simultaneous_events(power, storage, spec):
    # Exact ties must be single steps, and events exact arithmetic separates must not merge.
    assert_agrees(spec, power, storage, bracketed=True)


@pytest.mark.parametrize("power, storage", POLICIES)
@SETTINGS
@given(spec=sized_fleets(variants=True))
def test_policies_with_delay_and_async_match_reference(power, storage, spec):
    assert_agrees(spec, power, storage)


@pytest.mark.slow
@pytest.mark.parametrize("power, storage", POLICIES)
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spec=sized_fleets(grid=True, variants=True))
def test_policies_with_variants_on_a_grid_match_reference(power, storage, spec):
    assert_agrees(spec, power, storage, bracketed=True)


# --- hand-checked rates ------------------------------------------------------------------


def test_maxmin_water_filling_by_hand():
    # C = 3 over sizes 1, 2, 4: the smallest gets all of its 1, the others share 2 -> 1 each.
    assert maxmin_level([1, 2, 4], 3) == 1
    assert maxmin_level([1, 2, 4], 8) is None
    # First compute ends: job 0 at speed 1 (T = 1), then C = 3 over sizes 2, 4: 1.5 each.
    fleet = cj.Fleet([1.0, 10.0, 10.0], [5.0, 5.0, 5.0], cap=3.0, size=[1.0, 2.0, 4.0])
    trace = cj.simulate(fleet, cj.initial_state(fleet), 1, method="general", max_events=3)
    # After 1 time unit: job 1 did 1/2 of 10 work units' worth at speed 1/2, job 2 1/4; then
    # speeds 1.5/2 and 1.5/4 while job 0 writes. Job 0's write ends at t = 6.
    assert float(trace.end_times[0, 0]) == 6.0
    uniform = cj.Fleet([1.0, 10.0, 10.0], [5.0] * 3, cap=3.0, size=[1.0, 2.0, 4.0], power_policy="uniform")
    trace = cj.simulate(uniform, cj.initial_state(uniform), 1, method="general", max_events=2)
    # Uniform: every job at 3/7 of full speed, so job 0 fires at 7/3.
    np.testing.assert_allclose(float(trace.fire_times[0, 0]), 7 / 3, rtol=1e-15)


def test_fcfs_serves_writers_one_at_a_time_in_firing_order():
    # Three identical jobs fire together at t = 1; fcfs drains them in index order at f(1).
    fleet = cj.Fleet(np.ones(3), np.full(3, 2.0), storage_policy="fcfs")
    trace = cj.simulate(fleet, cj.initial_state(fleet), 1)
    np.testing.assert_array_equal(np.asarray(trace.fire_times)[:, 0], [1.0, 1.0, 1.0])
    np.testing.assert_array_equal(np.asarray(trace.end_times)[:, 0], [3.0, 5.0, 7.0])
    # A later firing queues behind an earlier one even with a smaller job index.
    late = cj.Fleet([2.0, 1.0], [2.0, 2.0], storage_policy="fcfs")
    trace = cj.simulate(late, cj.initial_state(late), 1)
    np.testing.assert_array_equal(np.asarray(trace.end_times)[:, 0], [5.0, 3.0])


def test_equal_sizes_are_the_base_model_with_a_rescaled_cap():
    # §1b: with every size s, maxmin and uniform are the base model with cap C / s.
    compute, write = [3.0, 2.2, 4.1, 1.7], [0.6, 0.9, 0.4, 1.1]
    state = dict(phase=[0, 1, 0, 1], remaining=[1.0, 0.3, 2.0, 0.9])
    base = cj.Fleet(compute, write, cap=1.25)
    expected = cj.simulate(base, cj.initial_state(base, **state), 6).fire_times
    for power in cj.POWER_POLICIES:
        fleet = cj.Fleet(compute, write, cap=2.5, size=2.0, power_policy=power, storage_policy="weighted")
        got = cj.simulate(fleet, cj.initial_state(fleet, **state), 6).fire_times
        np.testing.assert_allclose(got, expected, rtol=1e-13)


# --- unit sizes are the base model, bit for bit ---------------------------------------------


def _base_and_policies(n_jobs, heterogeneous, **kwargs):
    rng = np.random.default_rng(n_jobs)
    compute = rng.uniform(1, 3, n_jobs) if heterogeneous else np.full(n_jobs, 2.0)
    write = rng.uniform(0.2, 1, n_jobs) if heterogeneous else np.full(n_jobs, 0.5)
    fleets = [cj.Fleet(compute, write, **kwargs)]
    for power, storage in POLICIES:
        if storage != "fcfs":
            fleets.append(
                cj.Fleet(compute, write, size=np.ones(n_jobs), power_policy=power, storage_policy=storage, **kwargs)
            )
    return fleets, rng.uniform(0, 1, n_jobs)


@pytest.mark.parametrize(
    "method, n_jobs, heterogeneous", [("general", 4, True), ("clock", 8, True), ("fifo", 8, False), ("auto", 8, False)]
)
def test_unit_sizes_are_the_base_model_bit_for_bit_on_every_loop(method, n_jobs, heterogeneous):
    fleets, position = _base_and_policies(n_jobs, heterogeneous, cap=n_jobs / 3, throughput="sqrt")
    traces = []
    for fleet in fleets:
        state = cj.state_from_positions(fleet, position * np.asarray(fleet.period))
        traces.append(cj.simulate(fleet, state, 12, method=method))
    for trace in traces[1:]:
        assert bool(trace.ok)
        np.testing.assert_array_equal(trace.fire_times, traces[0].fire_times)
        np.testing.assert_array_equal(trace.end_times, traces[0].end_times)
        assert int(trace.n_events) == int(traces[0].n_events)


# The default tier runs the base rules and both variants together; the slow tier each alone.
@pytest.mark.parametrize(
    "delay, alpha",
    [
        (0.0, 0.0),
        pytest.param(0.7, 0.0, marks=pytest.mark.slow),
        pytest.param(0.0, 0.4, marks=pytest.mark.slow),
        (0.7, 0.4),
    ],
)
def test_unit_size_fleet_batched_with_sized_fleets_is_unchanged(delay, alpha):
    # In a batch with a sized fleet the general engine traces the size-aware rules; the
    # unit-size fleet's trace must still be the base model's, bit for bit (a fleet's trace
    # never depends on its batch).
    compute, write = np.array([3.0, 2.2, 4.1, 1.7]), np.array([0.6, 0.9, 0.4, 1.1])
    kwargs = dict(cap=1.5, throughput="degrading", delay=delay, async_fraction=alpha)
    base = cj.Fleet(compute, write, **kwargs)
    state = dict(phase=[0, 1, 0, 1], remaining=[1.0, 0.3, 2.0, 0.9])
    alone = cj.simulate(base, cj.initial_state(base, **state), 8)
    for power in cj.POWER_POLICIES:
        batch = cj.Fleet(
            np.stack([compute] * 2),
            np.stack([write] * 2),
            size=[[1.0] * 4, [1.0, 2.0, 0.5, 3.0]],
            power_policy=power,
            storage_policy="weighted",
            **kwargs,
        )
        trace = cj.simulate(batch, cj.initial_state(batch, **state), 8)
        assert bool(np.all(trace.ok))
        np.testing.assert_array_equal(trace.fire_times[0], alone.fire_times)
        np.testing.assert_array_equal(trace.end_times[0], alone.end_times)
        assert not np.array_equal(trace.fire_times[1], alone.fire_times)


# --- routing ----------------------------------------------------------------------------------


def test_auto_routes_sized_and_fcfs_fleets_to_the_general_engine():
    from ckpt_jax._plan import choose_paths, variants

    sizes = np.ones((3, 8))
    sizes[1, 2] = 2.0
    fleet = cj.Fleet(np.full((3, 8), 2.0), np.full((3, 8), 0.5), cap=3.0, size=sizes)
    np.testing.assert_array_equal(choose_paths(fleet, variants(fleet), "auto"), ["fifo", "general", "fifo"])
    for power in cj.POWER_POLICIES:
        fcfs = cj.Fleet(np.full((2, 8), 2.0), np.full((2, 8), 0.5), power_policy=power, storage_policy="fcfs")
        np.testing.assert_array_equal(choose_paths(fcfs, variants(fcfs), "auto"), ["general", "general"])
    # Auto gives each fleet what it gives the fleet alone (decided per fleet).
    state = cj.state_from_positions(fleet, np.linspace(0, 2, 8) * np.ones((3, 1)))
    together = cj.simulate(fleet, state, 5)
    for b in range(3):
        alone = cj.simulate(fleet[b], cj.State(state.phase[b], state.remaining[b]), 5)
        np.testing.assert_array_equal(together.fire_times[b], alone.fire_times)


@pytest.mark.parametrize("method", ["fifo", "clock"])
@pytest.mark.parametrize(
    "kwargs, reason",
    [
        (dict(size=[1.0, 2.0, 1.0]), "sizes"),
        (dict(size=[2.0] * 3, power_policy="uniform"), "sizes"),
        (dict(storage_policy="fcfs"), "fcfs"),
    ],
)
def test_explicit_fast_method_refuses_what_it_cannot_serve(method, kwargs, reason):
    fleet = cj.Fleet(np.full(3, 2.0), np.full(3, 0.5), cap=1.5, **kwargs)
    with pytest.raises(ValueError, match=f"method='{method}'.*{reason}"):
        cj.simulate(fleet, cj.initial_state(fleet), 2, method=method)


# --- the rest of the API ----------------------------------------------------------------------


def test_float32_sized_fleet_agrees_with_float64():
    kwargs = dict(cap=2.0, size=[1.0, 2.5, 0.5, 1.5], storage_policy="weighted", throughput="sqrt")
    compute, write = [3.0, 2.2, 4.1, 1.7], [0.6, 0.9, 0.4, 1.1]
    traces = []
    for dtype in (np.float32, np.float64):
        fleet = cj.Fleet(compute, write, dtype=dtype, **kwargs)
        traces.append(cj.simulate(fleet, cj.initial_state(fleet, phase=[0, 1, 0, 1]), 5))
    assert traces[0].fire_times.dtype == np.float32 and bool(traces[0].ok)
    np.testing.assert_allclose(traces[0].fire_times, traces[1].fire_times, rtol=1e-5)


def test_fleet_indexing_and_pytree_keep_sizes_and_policies():
    import jax

    fleet = cj.Fleet(
        np.full((3, 2), 2.0),
        np.ones((3, 2)),
        size=[[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]],
        power_policy="uniform",
        storage_policy="fcfs",
    )
    one = fleet[1]
    np.testing.assert_array_equal(one.size, [3.0, 4.0])
    assert (one.power_policy, one.storage_policy) == ("uniform", "fcfs")
    mapped = jax.tree_util.tree_map(lambda x: x, fleet)
    assert (mapped.power_policy, mapped.storage_policy) == ("uniform", "fcfs")
    np.testing.assert_array_equal(mapped.size, fleet.size)


def test_random_launches_records_sizes_and_policies_only_where_not_default():
    import jax

    plain = cj.ensemble.random_launches(np.full(3, 2.0), np.ones(3), key=jax.random.key(0))
    assert "size" not in plain.config and "storage_policy" not in plain.config
    sized = cj.ensemble.random_launches(
        np.full(3, 2.0), np.ones(3), key=jax.random.key(0), size=[1.0, 2.0, 4.0], storage_policy="fcfs"
    )
    assert sized.config["size"] == [1.0, 2.0, 4.0] and sized.config["storage_policy"] == "fcfs"
    fleet, state = sized(0, 2)
    assert fleet.storage_policy == "fcfs" and fleet.size.shape == (2, 3)
    assert bool(np.all(cj.simulate(fleet, state, 3).ok))


def test_return_maps_follow_sizes():
    import jax
    import jax.numpy as jnp

    # Jitted (the two sized pairs share the map's program; op by op, the map and its
    # Jacobian compile every primitive of the event loop on its own): under jit the sized
    # rules are the ones the Fleet recorded, here the same as the eager choice (the cap binds).
    gap_map = jax.jit(cj.maps.gap_return_map)
    gap_jacobian = jax.jit(jax.jacfwd(cj.maps.gap_return_map, argnums=1, has_aux=True))
    # Unequal sizes under a binding cap: the pair is no longer neutral (claim 9a), and
    # the map is differentiable through the size-aware loop.
    pair = cj.Fleet([10.0, 10.0], [1.0, 1.0], cap=1.5, size=[1.0, 2.0])
    a_next, info = gap_map(pair, jnp.array([3.0]))
    assert int(info.status) == 0 and abs(float(a_next[0]) - 3.0) > 1e-3
    jacobian, _ = gap_jacobian(pair, jnp.array([3.0]))
    assert np.isfinite(np.asarray(jacobian)).all()
    equal = cj.Fleet([10.0, 10.0], [1.0, 1.0], cap=1.5, size=[2.0, 2.0])
    np.testing.assert_allclose(gap_map(equal, jnp.array([3.0]))[0], [3.0], rtol=1e-12)
    # The coupling function follows sizes too (claim 9a): tests/test_coupling.py checks it on
    # unequal sizes under a binding cap (coupled) and on its controls (neutral), where its
    # program compiles once for every pair of the same rules.


@pytest.mark.parametrize("power", ["maxmin", "uniform"])
def test_uncapped_sizes_run_free_with_the_same_bits(power):
    """Where the cap cannot bind (Σ of the active sizes ≤ C, τ = 0), `sharing_for` traces the
    "free" rule, which skips the controller's load; it must give the policy's own bits, and a
    cap that can bind must keep the policy."""
    import jax
    import jax.numpy as jnp

    from ckpt_jax import loop

    sizes = [3.0, 1.0, 2.5, 0.5]
    fleet = cj.Fleet([2.0, 3.1, 1.7, 4.2], [0.4, 0.7, 0.3, 0.9], size=sizes, cap=7.0, power_policy=power)
    assert loop.sharing_for(fleet).power == "free"
    assert loop.sharing_for(cj.Fleet([2.0] * 4, [0.4] * 4, size=sizes, cap=6.9, power_policy=power)).power == power
    params = jax.tree_util.tree_map(lambda x: x[0], loop.flat_params(fleet))
    phase, remaining = jnp.array([0, 1, 0, 1]), jnp.array([0.3, 0.2, 1.1, 0.5])

    # One program per rule (op by op, the start and the loop compile each primitive apart).
    @functools.partial(jax.jit, static_argnames="sharing")
    def run(params, phase, remaining, sharing):
        carry = loop.init_carry(params, phase, remaining, 1, 1, False, sharing=sharing)
        return loop.advance(params, carry, max_events=200, horizon=30.0, sharing=sharing)[0]

    rules = (loop.sharing_for(fleet), loop.Sharing(power, "fair"))
    ends = [run(params, phase, remaining, sharing) for sharing in rules]
    # ``applied_computing`` is the delayed controller's value, unused where τ = 0.
    free, policy = (jax.tree_util.tree_leaves(end._replace(applied_computing=0)) for end in ends)
    for a, b in zip(free, policy):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    assert int(ends[0].n_events) > 20
