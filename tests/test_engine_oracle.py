"""The JAX engine against the exact plain-Python reference (docs/model.md section 4).

Random heterogeneous, capped, nonlinear-f fleets (and the delayed-controller and
asynchronous variants) must agree with `reference.simulate_reference`, run in exact
rational arithmetic on the very same float64 inputs, to 1e-9 relative. Where a fleet is so
ill-conditioned that a one-ulp change of its inputs moves the exact answer by more than that
(claim 5: trajectories separate), the bound is relative to that one-ulp sensitivity instead.
Shapes are kept fixed within each test (fleets padded to ``N_SLOTS`` job slots with the
``active`` mask) so the engine compiles only a few times.

Also here: batching and padding are invisible (bit for bit), and tau = 0 / alpha = 0 are the
base model bit for bit, and simultaneous events across mixed scales switch in one step.
"""

import math

import numpy as np
import oracle_helpers as oh
import pytest
from hypothesis import currently_in_test_context, event, example, given, note
from hypothesis import strategies as st
from reference import THROUGHPUT_KINDS, simulate_reference

import ckpt_jax as cj

N_SLOTS = 6  # every fleet in the property tests is padded to this many job slots
N_FIRES = 5
UNCAPPED = 1e6  # a cap that never binds, for mixing capped and uncapped fleets in a batch
RTOL = oh.RTOL
ATOL_OF_SCALE = 1e-12  # absolute tolerance, relative to the largest time in the trace
# On an ill-conditioned fleet the engine may be off by this many times the effect of a
# one-ulp input change on the exact answer (rounding errors are amplified the same way).
CONDITION_FACTOR = 1000
# Exactly distinct events closer than this (relative to the time) are below what float64 can
# separate: hypothesis found a grid fleet with two instants 3 * 2**-52 apart at t = 24.37.
RESOLUTION = oh.RESOLUTION

# A modest default for CI; CKPT_ORACLE_EXAMPLES=500 makes a thorough hunt.
SETTINGS = oh.oracle_settings(25)


@st.composite
def fleets(draw, grid=False, capped=None, delay=False, asynchronous=False, identical=False):
    """A random fleet of 2..N_SLOTS active jobs scattered over N_SLOTS slots.

    ``identical=True``: every job has the first job's T and d (the FIFO path's fleets).

    ``grid=True`` draws every time-like input (and delay, alpha) from multiples of 1/4, with
    f(n) = 1 or n and integer caps, so exact arithmetic has many exactly simultaneous events,
    which the float engine must still get right.
    """
    n_active = draw(st.integers(2, N_SLOTS))
    slots = sorted(draw(st.permutations(range(N_SLOTS)))[:n_active])
    if grid:
        quarter = st.integers(1, 12).map(lambda k: k / 4)
        compute = [draw(quarter) for _ in range(n_active)]
        write = [draw(quarter) for _ in range(n_active)]
        fraction = st.integers(1, 4).map(lambda k: k / 4)
        kind = draw(st.sampled_from(["shared", "linear"]))
        cap_values = st.integers(1, n_active).map(float)
        delays = st.integers(1, 8).map(lambda k: k / 4)
        fractions_async = st.integers(1, 4).map(lambda k: k / 4)
    else:
        work = st.floats(0.1, 3.0)
        compute = [draw(work) for _ in range(n_active)]
        write = [draw(work) for _ in range(n_active)]
        fraction = st.floats(0.01, 1.0)
        kind = draw(st.sampled_from(sorted(THROUGHPUT_KINDS) + ["random"]))
        cap_values = st.floats(0.5, float(n_active))
        delays = st.floats(0.01, 2.0)
        fractions_async = st.floats(0.05, 1.0)
    if identical:
        compute, write = [compute[0]] * n_active, [write[0]] * n_active
    phase = [draw(st.integers(0, 1)) for _ in range(n_active)]
    remaining = [draw(fraction) * (write[j] if phase[j] else compute[j]) for j in range(n_active)]
    if capped is None:
        capped = draw(st.booleans())
    cap = draw(cap_values) if capped else None
    if kind == "random":
        table = [1.0] + [draw(st.floats(0.2, 3.0)) for _ in range(N_SLOTS)]
    elif THROUGHPUT_KINDS[kind] is None:
        table = None
    else:
        table = [1.0] + [THROUGHPUT_KINDS[kind](n) for n in range(1, N_SLOTS + 1)]
    return dict(
        slots=slots,
        compute=compute,
        write=write,
        phase=phase,
        remaining=remaining,
        cap=cap,
        throughput=table,
        delay=draw(delays) if delay else 0.0,
        async_fraction=draw(fractions_async) if asynchronous else 0.0,
    )


def pad(values, slots, filler):
    """Scatters per-job values into N_SLOTS slots, filler elsewhere."""
    return oh.padded(values, slots, filler, N_SLOTS)


def engine_trace(spec, n_fires=N_FIRES, method="auto"):
    """Runs the engine on one fleet padded to N_SLOTS slots; returns the `Trace`."""
    active = np.array(pad([True] * len(spec["slots"]), spec["slots"], False))
    fleet = cj.Fleet(
        compute=np.array(pad(spec["compute"], spec["slots"], 1.25)),
        write=np.array(pad(spec["write"], spec["slots"], 0.75)),
        cap=spec["cap"],
        throughput=None if spec["throughput"] is None else np.array(spec["throughput"]),
        delay=spec["delay"],
        async_fraction=spec["async_fraction"],
        active=active,
    )
    state = cj.initial_state(
        fleet,
        phase=np.array(pad(spec["phase"], spec["slots"], 1)),
        remaining=np.array(pad(spec["remaining"], spec["slots"], 0.5)),
    )
    return cj.simulate(fleet, state, n_fires=n_fires, method=method)


def reference_trace(spec, n_fires=N_FIRES):
    """Runs the exact reference on the active jobs; returns float arrays and the (exact)
    times of its event instants."""
    n_active = len(spec["slots"])
    table = spec["throughput"]
    fire_times, end_times, event_times = simulate_reference(
        spec["compute"],
        spec["write"],
        spec["phase"],
        spec["remaining"],
        n_fires,
        cap=spec["cap"],
        throughput=None if table is None else table[: n_active + 1],
        delay=spec["delay"],
        async_fraction=spec["async_fraction"],
        return_event_times=True,
    )
    return np.array(fire_times, dtype=float), np.array(end_times, dtype=float), event_times


def resolvable_events(event_times):
    """Event instants a float64 engine can tell apart: exactly distinct instants closer than
    RESOLUTION (relative) may legitimately be merged into one step."""
    count, last = 0, None
    for t in event_times:
        if last is None or t - last > RESOLUTION * max(abs(t), 1):
            count += 1
        last = t
    return count


def input_sensitivity(spec, ref_end, n_fires=N_FIRES):
    """How far the exact answer moves, relative to the largest time, when the inputs move by
    one ulp: every remaining work one ulp down, or every T_i one ulp up (two runs).

    No float64 computation can beat this on the given trajectory, so it measures how
    ill-conditioned a fleet is (docs/model.md claim 5: nearby trajectories separate).
    """
    scale = np.max(ref_end)
    moved = []
    for change in ("remaining", "compute"):
        perturbed = dict(spec)
        direction = 0.0 if change == "remaining" else np.inf
        perturbed[change] = [float(np.nextafter(x, direction)) for x in spec[change]]
        moved.append(np.max(np.abs(reference_trace(perturbed, n_fires)[1] - ref_end)) / scale)
    return max(moved)


def assert_agrees(spec, n_fires=N_FIRES, events=None, method="auto"):
    """Engine and reference agree to RTOL (or, on ill-conditioned fleets, to within
    ``CONDITION_FACTOR`` times what a one-ulp change of the inputs does to the exact answer).

    ``events``: None, "equal" (exact ties in the reference must be single steps in the engine
    too) or "bracketed" (the engine never merges events that exact arithmetic separates by
    more than RESOLUTION, and never splits an exact instant into several steps).
    """
    trace = engine_trace(spec, n_fires, method)
    assert bool(trace.ok), f"engine did not complete (status {int(trace.status)}): {spec}"
    inactive = [s for s in range(N_SLOTS) if s not in spec["slots"]]
    assert np.isnan(np.asarray(trace.fire_times)[inactive]).all(), "padding slots must stay NaN"
    assert np.isnan(np.asarray(trace.end_times)[inactive]).all(), "padding slots must stay NaN"
    ref_fire, ref_end, ref_event_times = reference_trace(spec, n_fires)
    engine = np.concatenate([np.asarray(trace.fire_times)[spec["slots"]], np.asarray(trace.end_times)[spec["slots"]]])
    exact = np.concatenate([ref_fire, ref_end])
    scale = max(np.max(ref_end), 1.0)
    error = np.abs(engine - exact)
    if not np.all(error <= RTOL * np.abs(exact) + ATOL_OF_SCALE * scale):
        sensitivity = input_sensitivity(spec, ref_end, n_fires)
        if currently_in_test_context():  # inside a hypothesis example: report it
            event(f"engine off by more than {RTOL:g}: judged by its one-ulp sensitivity")
            note(
                f"one-ulp input sensitivity {sensitivity:.3g}, engine error "
                f"{np.max(error) / scale:.3g} (relative to the largest time)"
            )
        bound = RTOL * np.abs(exact) + max(ATOL_OF_SCALE, CONDITION_FACTOR * sensitivity) * scale
        worst = np.unravel_index(np.argmax(error - bound), error.shape)
        assert np.all(error <= bound), (
            f"engine {engine[worst]!r} != exact {exact[worst]!r} at (job row, k) {worst} "
            f"(rows: fire_times then end_times); one-ulp sensitivity {sensitivity:.3g}: {spec}"
        )
    n_events = int(trace.n_events)
    if events == "equal":
        assert n_events == len(ref_event_times), f"{n_events} event instants != {len(ref_event_times)}: {spec}"
    elif events == "bracketed":
        resolvable = resolvable_events(ref_event_times)
        assert resolvable <= n_events <= len(ref_event_times), (
            f"{n_events} event instants, exact {len(ref_event_times)}, resolvable {resolvable}: {spec}"
        )


# --- the base model ---------------------------------------------------------------------


@SETTINGS
@given(spec=fleets())
def test_engine_matches_reference(spec):
    assert_agrees(spec)


@SETTINGS
@given(spec=fleets(grid=True))
def test_engine_matches_reference_with_simultaneous_events(spec):
    # Times must agree, exactly distinct events must not merge (beyond float resolution)
    # and exactly simultaneous ones must not split into spurious extra steps (docs/model.md §1).
    assert_agrees(spec, events="bracketed")


HAND_CASES = {
    # name: (compute, write, phase, remaining, cap, throughput)
    "synchronous_pair": ([3.0, 3.0], [1.0, 1.0], [0, 0], [3.0, 3.0], None, None),
    "synchronous_six_capped": ([2.0] * 6, [1.0] * 6, [0] * 6, [2.0] * 6, 2.0, None),
    "synchronous_writers_sqrt": (
        [2.0] * 4,
        [1.5] * 4,
        [1] * 4,
        [1.5] * 4,
        None,
        [1.0] + [math.sqrt(n) for n in range(1, 7)],
    ),
    "staggered_thirds": ([2.0, 2.0, 2.0], [1.0, 1.0, 1.0], [0, 0, 0], [1 / 3, 2 / 3, 1.0], None, None),
    "drain_meets_compute_end": ([3.0, 3.0], [1.0, 1.0], [1, 0], [0.5, 0.5], 1.0, [1.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0]),
}


# The fast paths (`ckpt_jax._loops`: virtual clocks with a FIFO ring or a per-phase argmin)
# must meet the same oracle: `method="auto"` sends fleets of at least 8 jobs to them.


@SETTINGS
@given(spec=fleets())
def test_clock_path_matches_reference(spec):
    assert_agrees(spec, method="clock")


@SETTINGS
@given(spec=fleets(grid=True))
def test_clock_path_matches_reference_with_simultaneous_events(spec):
    assert_agrees(spec, events="bracketed", method="clock")


@SETTINGS
@given(spec=fleets(identical=True))
def test_fifo_path_matches_reference(spec):
    assert_agrees(spec, method="fifo")


@SETTINGS
@given(spec=fleets(grid=True, identical=True))
def test_fifo_path_matches_reference_with_simultaneous_events(spec):
    assert_agrees(spec, events="bracketed", method="fifo")


@pytest.mark.parametrize("method", ["general", "clock", "fifo"])  # every hand case has identical jobs
@pytest.mark.parametrize("name", sorted(HAND_CASES))
def test_engine_matches_reference_on_exact_ties(name, method):
    compute, write, phase, remaining, cap, table = HAND_CASES[name]
    n = len(compute)
    spec = dict(
        slots=list(range(n)),
        compute=compute,
        write=write,
        phase=phase,
        remaining=remaining,
        cap=cap,
        throughput=table,
        delay=0.0,
        async_fraction=0.0,
    )
    assert_agrees(spec, events="equal", method=method)


def test_callable_throughput_matches_table():
    compute, write = [2.0, 1.5, 2.5], [0.7, 1.1, 0.4]
    state_kwargs = dict(phase=[0, 1, 0], remaining=[0.3, 0.2, 1.9])
    by_callable = cj.Fleet(compute, write, cap=1.5, throughput=math.sqrt)
    by_table = cj.Fleet(compute, write, cap=1.5, throughput=np.array([1.0] + [math.sqrt(n) for n in range(1, 4)]))
    traces = [
        cj.simulate(fleet, cj.initial_state(fleet, **state_kwargs), n_fires=N_FIRES)
        for fleet in (by_callable, by_table)
    ]
    np.testing.assert_array_equal(traces[0].fire_times, traces[1].fire_times)
    fire_times, _ = simulate_reference(
        compute, write, n_fires=N_FIRES, cap=1.5, throughput=[0] + [math.sqrt(n) for n in range(1, 4)], **state_kwargs
    )
    np.testing.assert_allclose(traces[0].fire_times, np.array(fire_times, dtype=float), rtol=RTOL)


# --- variants -----------------------------------------------------------------------------


@pytest.mark.parametrize("method", ["general", "clock"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_jitter_matches_reference_with_the_same_draws(seed, method):
    """Compute jitter: the reference, fed the engine's own per-(job, cycle) draws through
    ``compute_work``, gives the same trace. Cycle 0 follows an initial write, cycle k the
    k-th firing (docs/model.md section 1)."""
    import jax

    from ckpt_jax.loop import flat_params

    compute, write = [2.0, 1.4, 2.6, 0.9], [0.5, 0.8, 0.3, 0.6]
    phase, remaining = [1, 0, 0, 1], [0.2, 0.7, 2.0, 0.6]
    sigma, key = 0.3, jax.random.key(seed)
    fleet = cj.Fleet(compute, write, cap=2.5, throughput="sqrt")
    trace = cj.simulate(
        fleet,
        cj.initial_state(fleet, phase=phase, remaining=remaining),
        n_fires=N_FIRES,
        jitter=sigma,
        key=key,
        method=method,
    )
    job_keys = flat_params(fleet, sigma, key).job_keys[0]

    def compute_work(job, cycle):
        return float(cj.loop.jitter_work(job_keys[job], fleet.compute[job], np.float64(sigma), cycle))

    assert compute_work(0, 1) != compute[0]  # the draws do jitter
    fire_times, end_times = simulate_reference(
        compute,
        write,
        phase,
        remaining,
        N_FIRES,
        cap=2.5,
        throughput=[0] + [math.sqrt(n) for n in range(1, 5)],
        compute_work=compute_work,
    )
    assert bool(trace.ok)
    np.testing.assert_allclose(trace.fire_times, np.array(fire_times, float), rtol=RTOL)
    np.testing.assert_allclose(trace.end_times, np.array(end_times, float), rtol=RTOL)


@SETTINGS
@given(spec=fleets(asynchronous=True))
def test_async_engine_matches_reference(spec):
    assert_agrees(spec)


@SETTINGS
@given(spec=fleets(grid=True, asynchronous=True))
# Exact arithmetic puts two instants 3 * 2**-52 apart at t = 24.37: the engine may merge them.
@example(
    spec=dict(
        slots=[0, 1, 2, 3],
        compute=[0.25, 0.75, 1.5, 0.25],
        write=[0.25, 0.25, 0.5, 1.25],
        phase=[0, 0, 0, 0],
        remaining=[0.0625, 0.1875, 0.375, 0.0625],
        cap=None,
        throughput=None,
        delay=0.0,
        async_fraction=0.75,
    )
)
def test_async_engine_matches_reference_with_simultaneous_events(spec):
    assert_agrees(spec, events="bracketed")


@SETTINGS
@given(spec=fleets(capped=True, delay=True))
def test_delayed_engine_matches_reference(spec):
    assert_agrees(spec)


@SETTINGS
@given(spec=fleets(grid=True, capped=True, delay=True))
def test_delayed_engine_matches_reference_with_simultaneous_events(spec):
    assert_agrees(spec, events="bracketed")


def test_ill_conditioned_fleet_is_judged_by_its_conditioning():
    # Found by hypothesis: a cap of 1/2 and f(1) = 2.5, f(2) = 0.5 amplify rounding so much
    # that one ulp of input moves the exact end times by 1.6e-9 relative; the engine is off
    # by as much, which no float64 computation can avoid. assert_agrees loosens to 1000x the
    # one-ulp sensitivity only for such fleets.
    spec = dict(
        slots=[0, 1, 2, 3, 4],
        compute=[1.0, 2.0, 0.5, 0.25, 1.0],
        write=[1.0, 1.0, 1.0, 1.0, 2.0],
        phase=[0] * 5,
        remaining=[1.0, 2.0, 0.375, 0.125, 1.0],
        cap=0.5,
        throughput=[1.0, 2.5, 0.5, 2.0, 1.0, 1.0, 1.0],
        delay=1.0,
        async_fraction=0.0,
    )
    ref_end = reference_trace(spec)[1]
    assert input_sensitivity(spec, ref_end) > RTOL
    assert_agrees(spec)


@SETTINGS
@given(spec=fleets(capped=True, delay=True, asynchronous=True))
def test_delayed_async_engine_matches_reference(spec):
    assert_agrees(spec)


# --- simultaneous events across mixed scales -------------------------------------------
# docs/model.md section 1: events that coincide must switch together, "never one at a time with a
# spurious tiny step". These cases once split (per-job snapping only); the engine now also
# snaps to the clock's resolution, and these guard that fix.


def _grid_spec(compute, write, remaining, phase=None, cap=None, delay=0.0, async_fraction=0.0):
    n = len(compute)
    return dict(
        slots=list(range(n)),
        compute=compute,
        write=write,
        phase=phase or [0] * n,
        remaining=remaining,
        cap=cap,
        throughput=None,
        delay=delay,
        async_fraction=async_fraction,
    )


def test_simultaneous_events_with_mixed_scales_are_one_step():
    assert_agrees(_grid_spec([0.25] * 4, [0.25, 0.25, 0.25, 2.5], [0.0625] * 4), events="equal")


def test_async_simultaneous_events_are_one_step():
    spec = _grid_spec(
        [0.25] * 5 + [0.5], [1.5, 0.25, 0.25, 0.5, 0.75, 0.25], [0.0625] * 5 + [0.125], async_fraction=0.5
    )
    assert_agrees(spec, events="equal")


def test_delayed_controller_update_at_a_firing_is_one_step():
    spec = _grid_spec([0.25] * 3, [0.25] * 3, [0.0625] * 3, phase=[0, 0, 1], cap=2.0, delay=0.25)
    assert_agrees(spec, events="equal")


def _variant_batch(delay, async_fraction):
    """Two fleets in one batch: fleet 0 has the given variant parameters, fleet 1 is base."""
    compute = np.array([[2.0, 1.3, 2.7, 0.9], [2.0, 1.3, 2.7, 0.9]])
    write = np.array([[0.6, 1.2, 0.5, 0.8], [0.6, 1.2, 0.5, 0.8]])
    fleet = cj.Fleet(
        compute,
        write,
        cap=np.array([1.5, 1.5]),
        throughput="sqrt",
        delay=np.array([delay, 0.0]),
        async_fraction=np.array([async_fraction, 0.0]),
    )
    state = cj.initial_state(fleet, phase=np.array([[0, 1, 0, 1]] * 2), remaining=np.array([[0.4, 0.3, 2.0, 0.1]] * 2))
    return cj.simulate(fleet, state, n_fires=N_FIRES)


@pytest.mark.parametrize("delay,async_fraction", [(0.7, 0.0), (0.0, 0.4), (0.7, 0.4)])
def test_zero_delay_and_zero_async_are_the_base_model_bit_for_bit(delay, async_fraction):
    """tau = 0 and alpha = 0 fleets reproduce the base model exactly, even when batched with
    fleets that switch on the delayed-controller queue or asynchronous writes."""
    batched = _variant_batch(delay, async_fraction)
    base_fleet = cj.Fleet([2.0, 1.3, 2.7, 0.9], [0.6, 1.2, 0.5, 0.8], cap=1.5, throughput="sqrt")
    base = cj.simulate(
        base_fleet, cj.initial_state(base_fleet, phase=[0, 1, 0, 1], remaining=[0.4, 0.3, 2.0, 0.1]), n_fires=N_FIRES
    )
    assert bool(np.all(batched.ok)) and bool(base.ok)
    np.testing.assert_array_equal(batched.fire_times[1], base.fire_times)
    np.testing.assert_array_equal(batched.end_times[1], base.end_times)
    # The variant fleet itself does differ from the base model (so the check above has teeth).
    assert not np.array_equal(batched.fire_times[0], base.fire_times)


# --- batching and padding are invisible ------------------------------------------------------


def _batch_inputs(n_fleets=5, n_jobs=4, seed=0):
    rng = np.random.default_rng(seed)
    compute = rng.uniform(0.3, 3.0, (n_fleets, n_jobs))
    write = rng.uniform(0.1, 2.0, (n_fleets, n_jobs))
    # Fleet rejects inf in a cap array; a cap of at least N never binds ("uncapped").
    cap = np.where(rng.random(n_fleets) < 0.5, UNCAPPED, rng.uniform(0.5, n_jobs, n_fleets))
    table = np.concatenate([np.ones((n_fleets, 1)), rng.uniform(0.3, 3.0, (n_fleets, n_jobs))], -1)
    phase = rng.integers(0, 2, (n_fleets, n_jobs))
    remaining = rng.uniform(0.05, 1.0, (n_fleets, n_jobs)) * np.where(phase == 1, write, compute)
    delay = np.array([0.0, 0.5, 0.0, 1.3, 0.2][:n_fleets])
    async_fraction = np.array([0.0, 0.0, 0.6, 0.3, 1.0][:n_fleets])
    return compute, write, cap, table, phase, remaining, delay, async_fraction


@pytest.mark.parametrize("variants", [False, True])
def test_batching_is_invisible(variants):
    compute, write, cap, table, phase, remaining, delay, async_fraction = _batch_inputs()
    if not variants:
        delay, async_fraction = np.zeros_like(delay), np.zeros_like(async_fraction)
    fleet = cj.Fleet(compute, write, cap=cap, throughput=table, delay=delay, async_fraction=async_fraction)
    batched = cj.simulate(fleet, cj.initial_state(fleet, phase=phase, remaining=remaining), n_fires=N_FIRES)
    assert batched.fire_times.shape == (len(compute), compute.shape[1], N_FIRES)
    assert bool(np.all(batched.ok))
    for b in range(len(compute)):
        alone = cj.Fleet(
            compute[b],
            write[b],
            cap=None if cap[b] == UNCAPPED else cap[b],
            throughput=table[b],
            delay=delay[b],
            async_fraction=async_fraction[b],
        )
        trace = cj.simulate(alone, cj.initial_state(alone, phase=phase[b], remaining=remaining[b]), n_fires=N_FIRES)
        assert bool(trace.ok)
        np.testing.assert_array_equal(batched.fire_times[b], trace.fire_times)
        np.testing.assert_array_equal(batched.end_times[b], trace.end_times)


def test_batch_with_leading_axes_matches_reference():
    compute, write, cap, table, phase, remaining, delay, async_fraction = _batch_inputs(n_fleets=4)
    shape = (2, 2)
    fleet = cj.Fleet(
        compute.reshape(shape + (4,)),
        write.reshape(shape + (4,)),
        cap=cap.reshape(shape),
        throughput=table.reshape(shape + (5,)),
        delay=delay.reshape(shape),
        async_fraction=async_fraction.reshape(shape),
    )
    trace = cj.simulate(
        fleet,
        cj.initial_state(fleet, phase=phase.reshape(shape + (4,)), remaining=remaining.reshape(shape + (4,))),
        n_fires=N_FIRES,
    )
    for b in range(4):
        fire_times, end_times = simulate_reference(
            compute[b],
            write[b],
            phase[b],
            remaining[b],
            N_FIRES,
            cap=None if cap[b] == UNCAPPED else cap[b],
            throughput=list(table[b]),
            delay=delay[b],
            async_fraction=async_fraction[b],
        )
        np.testing.assert_allclose(trace.fire_times[b // 2, b % 2], np.array(fire_times, float), rtol=RTOL)
        np.testing.assert_allclose(trace.end_times[b // 2, b % 2], np.array(end_times, float), rtol=RTOL)


@pytest.mark.parametrize("slots", [(0, 1, 2), (3, 4, 5), (0, 2, 5)])
@pytest.mark.parametrize("variant", ["base", "capped_sqrt", "async_delay"])
def test_padding_is_invisible(slots, variant):
    compute, write = [2.1, 0.8, 1.7], [0.9, 0.6, 1.4]
    phase, remaining = [1, 0, 0], [0.25, 0.8, 1.7]
    kwargs = dict(
        base={}, capped_sqrt=dict(cap=1.2, throughput="sqrt"), async_delay=dict(cap=1.5, delay=0.4, async_fraction=0.5)
    )[variant]
    small = cj.Fleet(compute, write, **kwargs)
    reference = cj.simulate(small, cj.initial_state(small, phase=phase, remaining=remaining), n_fires=N_FIRES)

    def padded(values, filler):
        return np.array(pad(values, slots, filler))

    big = cj.Fleet(padded(compute, 0.3), padded(write, 2.5), active=padded([True] * 3, False), **kwargs)
    trace = cj.simulate(
        big, cj.initial_state(big, phase=padded(phase, 1), remaining=padded(remaining, 0.1)), n_fires=N_FIRES
    )
    assert bool(trace.ok) and bool(reference.ok)
    np.testing.assert_array_equal(np.asarray(trace.fire_times)[list(slots)], reference.fire_times)
    np.testing.assert_array_equal(np.asarray(trace.end_times)[list(slots)], reference.end_times)
    others = [s for s in range(N_SLOTS) if s not in slots]
    assert np.isnan(np.asarray(trace.fire_times)[others]).all()
