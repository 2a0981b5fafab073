"""Bad and edge input: every class gets a clear error before tracing, or a flagged result.

Each test stands for a class of inputs: a table of cases is parametrized (every case runs
every time), and hypothesis draws the members where the class is a range. Most cases raise
before anything is compiled, so this file is cheap.
"""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ckpt_jax as cj
from ckpt_jax import _plan
from ckpt_jax._validate import value_range

FAST = settings(max_examples=25, deadline=None)


def _fleet(n_jobs=3, batch=(), **kwargs):
    return cj.Fleet(np.full(batch + (n_jobs,), 10.0), np.full(batch + (n_jobs,), 1.0), **kwargs)


# -- a hang: every loop iteration counts ----------------------------------------------------
def _stalling_fleet():
    # Job 0's write ends at t = 1e200 (two writers share f(2) = 1e-200). Then it writes alone
    # at f(1) = 1 and computes at speed 1: both phases last less than 8 ulps of t, so it
    # would fire and end forever at one instant. Every value is inside the numeric range.
    fleet = cj.Fleet(np.array([1.0, 1e280]), np.array([1.0, 1.0]), throughput=[1.0, 1.0, 1e-200])
    return fleet, cj.initial_state(fleet, phase=[1, 1], remaining=[1.0, 0.5])


@pytest.mark.parametrize("method", ["clock", "general"])
def test_time_that_stops_advancing_ends_the_run_flagged(method):
    fleet, state = _stalling_fleet()
    trace = cj.simulate(fleet, state, 3, method=method, max_events=200)
    assert not bool(trace.ok)
    status = int(trace.status)
    # The clock path counts switches at one instant (STALLED); the general engine counts
    # every step as an event (the budget).
    assert status & (cj.Status.STALLED if method == "clock" else cj.Status.MAX_EVENTS)
    assert int(trace.n_events) <= 200
    assert "ok" != cj.describe_status(status)


def test_fifo_stall_is_bounded_too():
    # Identical jobs: 8 writers share f(8) = 1e-200, so the first write ends at t = 4e200;
    # fewer writers drain at f = 1, far below the clock's resolution there. The FIFO path
    # switches one job per iteration, so a lone writer would end and fire forever.
    fleet = cj.Fleet(np.full(8, 1.0), np.full(8, 1.0), throughput=[1.0] + [1.0] * 7 + [1e-200])
    state = cj.initial_state(fleet, phase=np.ones(8, int), remaining=np.linspace(0.5, 1.0, 8))
    trace = cj.simulate(fleet, state, 3, method="fifo", max_events=500)
    assert not bool(trace.ok)
    assert int(trace.status) & cj.Status.STALLED


# -- dtypes ------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [np.float16, "foo", np.int32, np.complex64, "bfloat16", object])
def test_unsupported_dtype_is_refused(dtype):
    with pytest.raises(ValueError, match="dtype must be float32 or float64"):
        _fleet(dtype=dtype)


# -- the numeric range -------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("field", ["compute", "write", "cap", "throughput"])
@settings(max_examples=8)
@given(exponent=st.one_of(st.integers(-1074, -300), st.integers(300, 308)))
def test_values_outside_the_engine_range_are_refused(dtype, field, exponent):
    value = math.ldexp(1.0, exponent) if exponent < 0 else float(f"1e{exponent}")
    low, high = value_range(dtype)
    kwargs = dict(compute=np.full(4, 10.0), write=np.full(4, 1.0))
    if field in ("compute", "write"):
        kwargs[field] = np.array([value, 10.0, 10.0, 10.0])
    elif field == "cap":
        kwargs["cap"] = value
    else:
        kwargs["throughput"] = [1.0, 1.0, value, 1.0, 1.0]
    if low <= value <= high:
        cj.Fleet(**kwargs, dtype=dtype)  # inside: accepted
        return
    with pytest.raises(ValueError, match=r"must lie in \[.*\] in float"):
        cj.Fleet(**kwargs, dtype=dtype)


@pytest.mark.parametrize(
    "dtype,kwargs",
    [
        (np.float32, dict(compute=[1e300, 1.0])),  # inf in float32
        (np.float32, dict(compute=[1e-300, 1.0])),  # 0 in float32
        (np.float32, dict(cap=1e-300)),
        (np.float32, dict(delay=1e-300)),
        (np.float64, dict(compute=[2.0**-1022, 1.0])),
        (np.float64, dict(compute=[1.7e308, 1.0])),
        (np.float64, dict(compute=[1e308, 1e308], write=[1e308, 1e308])),  # the period overflows
    ],
)
def test_values_are_validated_in_the_dtype_used(dtype, kwargs):
    args = dict(compute=[10.0, 10.0], write=[1.0, 1.0])
    args.update(kwargs)
    with pytest.raises(ValueError, match="must lie in"):
        cj.Fleet(args.pop("compute"), args.pop("write"), dtype=dtype, **args)


def test_jitter_that_vanishes_in_float32_is_refused():
    fleet = _fleet(dtype=np.float32)
    with pytest.raises(ValueError, match="jitter"):
        cj.simulate(fleet, cj.initial_state(fleet), 2, jitter=1e-300)


def test_runs_whose_times_would_overflow_are_refused():
    fleet = cj.Fleet([1e287, 1e287], [1.0, 1.0])
    with pytest.raises(ValueError, match="n_fires = 1000 cycles .* could take up to"):
        cj.simulate(fleet, cj.initial_state(fleet), 1000)


@pytest.mark.parametrize("method", ["general", "clock", "fifo"])
def test_a_non_finite_time_is_never_ok(method, monkeypatch):
    # Bypass the overflow check to see the loop's own guard: with two or more writers the
    # throughput drops to 1e-200 and a write of 1e200 lasts longer than float64 holds.
    monkeypatch.setattr(_plan, "check_time_bound", lambda *args: None)
    n_jobs = 2 if method == "general" else 8
    table = [1.0, 1.0] + [1e-200] * (n_jobs - 1)
    fleet = cj.Fleet(np.full(n_jobs, 1.0), np.full(n_jobs, 1e200), throughput=table)
    trace = cj.simulate(fleet, cj.initial_state(fleet), 4, method=method)
    assert not bool(trace.ok)
    assert int(trace.status) & cj.Status.NONFINITE


# -- a State built by hand ----------------------------------------------------------------------
_BAD_STATES = [
    ("remaining", -5.0, "remaining must lie"),
    ("remaining", 0.0, "remaining must lie"),
    ("remaining", 10.5, "remaining must lie"),  # above the compute work T = 10
    ("remaining", float("nan"), "remaining must lie"),
    ("remaining", float("inf"), "remaining must lie"),
    ("phase", 2, "phase must be 0"),
    ("phase", -1, "phase must be 0"),
]


@pytest.mark.parametrize("field, value, message", _BAD_STATES)
@pytest.mark.parametrize("job", [0, 1, 2])
@pytest.mark.parametrize("method", ["auto", "general", "clock"])
def test_a_hand_built_state_is_validated(field, value, message, job, method):
    fleet = _fleet()
    good = cj.initial_state(fleet)
    phase = np.asarray(good.phase).copy()
    remaining = np.asarray(good.remaining).copy()
    (phase if field == "phase" else remaining)[job] = value
    state = cj.State(phase=jnp.asarray(phase), remaining=jnp.asarray(remaining))
    with pytest.raises(ValueError, match=message):
        cj.simulate(fleet, state, 2, method=method)


def test_a_hand_built_state_of_the_wrong_shape_is_refused():
    fleet = _fleet()
    state = cj.State(phase=jnp.zeros(4, jnp.int32), remaining=jnp.ones(4))
    with pytest.raises(ValueError, match="state.phase has shape"):
        cj.simulate(fleet, state, 2)


@pytest.mark.parametrize("phase", ["a", 0.5, [0, 1j, 0]])
def test_bad_phase_values_name_phase(phase):
    with pytest.raises(ValueError, match="phase"):
        cj.initial_state(_fleet(), phase=phase)


# -- indexing -----------------------------------------------------------------------------------
def test_fleet_indexing_is_numpy_like_and_checked():
    compute = np.arange(1.0, 13.0).reshape(4, 3) + 10
    fleet = cj.Fleet(compute, np.ones((4, 3)), cap=[1.0, 2.0, None, 3.0])
    np.testing.assert_array_equal(fleet[1].compute, compute[1])
    np.testing.assert_array_equal(fleet[-1].compute, compute[-1])
    np.testing.assert_array_equal(fleet[1:3].compute, compute[1:3])
    np.testing.assert_array_equal(fleet[np.array([3, 0])].compute, compute[[3, 0]])
    np.testing.assert_array_equal(fleet[jnp.array([2])].cap, [np.inf])
    np.testing.assert_array_equal(fleet[np.array([True, False, True, False])].cap, [1.0, np.inf])
    assert fleet[np.array([3, 0])].batch_shape == (2,)
    for index in (4, -5, np.array([0, 7])):
        with pytest.raises(IndexError):
            fleet[index]
    with pytest.raises(IndexError, match="single fleet"):
        fleet[0][0]


# -- spectra at kinks -----------------------------------------------------------------------------
def test_spectrum_says_where_the_map_is_not_differentiable():
    fleet = _fleet(4)
    at_sync = cj.maps.spectrum(fleet, jnp.zeros(3))
    assert int(at_sync.info.status) & cj.Status.NOT_SMOOTH
    boundary = cj.maps.spectrum(fleet, jnp.array([1.0, 2.0, 3.0]))  # gaps equal to one write
    assert int(boundary.info.status) & cj.Status.NOT_SMOOTH
    # Next to the synchronous state, on the overlapping branch: smooth, claim 2's spectrum.
    near = cj.maps.spectrum(fleet, jnp.full(3, 1e-3))
    assert int(near.info.status) == 0
    np.testing.assert_allclose(np.sort(near.eigenvalues.real), np.sort(cj.theory.gap_eigenvalues(4)), rtol=1e-12)
    # The kink does not make the value undefined: a = 0 is still the fixed point.
    value, info = cj.maps.gap_return_map(_fleet(3), jnp.zeros(2))
    np.testing.assert_array_equal(np.asarray(value), [0.0, 0.0])


# -- smallest_gap without a fixed firing order -------------------------------------------------
@FAST
@given(
    st.lists(st.floats(0, 5, allow_nan=False), min_size=12, max_size=12),
    st.lists(st.floats(0.1, 3), min_size=4, max_size=4),
)
def test_smallest_gap_is_never_negative(offsets, steps):
    # Any firing times of 3 jobs over 4 cycles, monotone per job (jobs may overtake).
    fire = np.asarray(offsets).reshape(3, 4) + np.cumsum(np.tile(steps, (3, 1)) * 4, axis=1)
    fire = np.sort(fire, axis=1)
    gaps = np.asarray(cj.analysis.smallest_gap(fire))
    assert np.all(np.isnan(gaps) | (gaps >= 0))
    interleaved = np.asarray(cj.analysis.cycles_interleaved(fire))
    assert np.all(np.isnan(gaps[interleaved]))


def test_smallest_gap_with_jitter_flags_order_changes():
    fleet = _fleet(8, batch=(16,))
    trace = cj.simulate(fleet, cj.random_state(fleet, jax.random.key(3)), 30, jitter=1.5, key=jax.random.key(4))
    gaps = np.asarray(cj.analysis.smallest_gap(trace.fire_times))
    assert np.all(np.isnan(gaps) | (gaps >= 0))
    assert np.asarray(cj.analysis.cycles_interleaved(trace.fire_times)).any()  # the order did change


def test_smallest_gap_refuses_a_period_that_gives_negative_gaps():
    fire = [[0.0, 10.0], [1.0, 11.5], [4.0, 14.0]]
    with pytest.raises(ValueError, match="period is shorter"):
        cj.analysis.smallest_gap(fire, period=3.0)
    with pytest.raises(ValueError, match="period must be finite"):
        cj.analysis.smallest_gap(fire, period=-1.0)


# -- sizes and budgets ----------------------------------------------------------------------------
@pytest.mark.parametrize("n_fires", [10**11, 2**31, 2**30 + 1])
def test_huge_n_fires_is_refused(n_fires):
    fleet = _fleet()
    with pytest.raises(ValueError, match="n_fires"):
        cj.simulate(fleet, cj.initial_state(fleet), n_fires)


def test_buffers_larger_than_memory_are_refused_with_an_estimate():
    fleet = _fleet(32, batch=(100_000,))
    with pytest.raises(ValueError, match=r"would need about .* more than the .* available"):
        cj.simulate(fleet, cj.initial_state(fleet), 2**29)


@pytest.mark.parametrize("max_events", [0, -1, -10, 1.5, "x", True])
def test_bad_map_budgets_name_max_events(max_events):
    with pytest.raises(ValueError, match="max_events"):
        cj.maps.gap_return_map(_fleet(), jnp.zeros(2), max_events=max_events)
    with pytest.raises(ValueError, match="max_events"):
        cj.maps.section_map(_fleet(), jnp.ones(2), max_events=max_events)


# -- keys and offsets -------------------------------------------------------------------------------
@pytest.mark.parametrize("key", [0, "seed", np.zeros(2), np.zeros(3, np.uint32), np.zeros((5, 2), np.float32), 1.5])
def test_bad_keys_name_key(key):
    fleet = _fleet(batch=(2,))
    with pytest.raises(ValueError, match="key"):
        cj.random_state(fleet, key)
    with pytest.raises(ValueError, match="key"):
        cj.simulate(fleet, cj.initial_state(fleet), 2, jitter=0.1, key=key)


def test_raw_key_data_is_accepted_like_a_typed_key():
    fleet = _fleet(batch=(2,))
    typed = cj.random_state(fleet, jax.random.key(7))
    raw = cj.random_state(fleet, jax.random.PRNGKey(7))
    np.testing.assert_array_equal(typed.remaining, raw.remaining)
    per_fleet = cj.random_state(fleet, jax.random.split(jax.random.PRNGKey(7), 2))
    assert per_fleet.remaining.shape == (2, 3)


@pytest.mark.parametrize("offset", [-1, 2**33, 1.5, True, "0"])
def test_bad_fleet_offsets_are_refused(offset):
    fleet = _fleet()
    with pytest.raises(ValueError, match="fleet_offset"):
        cj.simulate(fleet, cj.initial_state(fleet), 2, jitter=0.1, fleet_offset=offset)


# -- messages that name the argument ----------------------------------------------------------------
@pytest.mark.parametrize(
    "call,name",
    [
        (lambda: cj.simulate(_fleet(), cj.initial_state(_fleet()), 2, jitter="a"), "jitter"),
        (lambda: _fleet(batch=(3,), cap=[2, "x", 3]), "cap"),
        (lambda: cj.Fleet([1 + 2j, 3.0], [1.0, 1.0]), "compute"),
        (lambda: cj.Fleet([10.0, 10.0], ["a", 1.0]), "write"),
        (lambda: _fleet(cap=1j), "cap"),
        (lambda: cj.random_state("x", jax.random.key(0)), "fleet"),
        (lambda: cj.maps.section_map("x", jnp.ones(2)), "fleet"),
        (lambda: cj.maps.spectrum("x", jnp.ones(2)), "fleet"),
        (lambda: cj.maps.gap_return_map(_fleet(), "x"), "a must"),
        (lambda: cj.simulate(_fleet(), "state", 2), "state"),
        (lambda: cj.simulate(_fleet(), cj.initial_state(_fleet()), 2, throw="yes"), "throw"),
    ],
)
def test_messages_name_the_argument(call, name):
    with pytest.raises(ValueError, match=name):
        call()


def test_every_status_bit_has_a_message():
    for bit in cj.Status:
        if bit:
            assert cj.describe_status(bit) not in ("ok", "") and "unknown" not in cj.describe_status(bit)
    assert "unknown" in cj.describe_status(1 << 20)


# -- job sizes and sharing policies (docs/model.md §1b) ------------------------------------------
_BAD_SIZES = [0.0, -0.0, -1.0, -1e300, float("nan"), float("inf"), -float("inf"), 1e-300, 1e300, "big", None, 1 + 2j]


@pytest.mark.parametrize("value", _BAD_SIZES)
@pytest.mark.parametrize("job", [0, 1, 2])
@pytest.mark.parametrize("batched", [False, True])
def test_bad_sizes_name_size_and_the_allowed_range(value, job, batched):
    size = np.ones((2, 3) if batched else 3, dtype=object)
    size[..., job] = value
    with pytest.raises(ValueError, match="size") as err:
        _fleet(batch=(2,) if batched else (), size=size.tolist())
    if isinstance(value, float) and not value <= 0 and math.isfinite(value):
        assert "must lie in [" in str(err.value)  # the numeric range, in the dtype used
    elif isinstance(value, float):
        assert "finite and > 0" in str(err.value)


def test_a_size_outside_float32_range_is_refused_in_float32_only():
    _fleet(size=[1.0, 1e25, 1.0])  # fine in float64
    with pytest.raises(ValueError, match="size must lie in"):
        _fleet(size=[1.0, 1e25, 1.0], dtype=np.float32)


@pytest.mark.parametrize("shape", [(2,), (4,), (2, 2), (3, 2)])
def test_a_size_array_of_the_wrong_shape_names_size(shape):
    with pytest.raises(ValueError, match=r"size must be a scalar or broadcast to the fleet shape"):
        _fleet(batch=(2,), size=np.ones(shape))


def test_sizes_may_broadcast_the_batch_like_active():
    fleet = _fleet(size=np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]))
    assert fleet.batch_shape == (2,) and fleet.compute.shape == (2, 3)


@pytest.mark.parametrize("name", ["MAXMIN", "fifo", "", "fair", "maxmin", 0, 1, None])
def test_unknown_policies_name_the_argument_and_the_choices(name):
    _check_policy_names(name)


@FAST
@given(name=st.one_of(st.text(max_size=8), st.integers()))
def test_unknown_policy_strings_name_the_argument_and_the_choices(name):
    _check_policy_names(name)


def _check_policy_names(name):
    if name not in cj.POWER_POLICIES:
        with pytest.raises(ValueError, match=r"power_policy must be one of 'maxmin', 'uniform'"):
            _fleet(power_policy=name)
    if name not in cj.STORAGE_POLICIES:
        with pytest.raises(ValueError, match=r"storage_policy must be one of 'fair', 'weighted', 'fcfs'"):
            _fleet(storage_policy=name)


def test_sizes_that_would_overflow_the_run_time_are_refused():
    # A huge job under a small cap crawls: its time bound overflows, so simulate refuses.
    fleet = _fleet(size=[1.0, 1e287, 1.0], cap=1.0)
    with pytest.raises(ValueError, match="n_fires"):
        cj.simulate(fleet, cj.initial_state(fleet), 5)


def test_an_empty_batch_is_refused_by_name():
    # Before: accepted, then a NumPy "zero-size array to reduction" error inside simulate.
    with pytest.raises(ValueError, match=r"at least one fleet: the batch shape \(\*B,\) = \(0,\)"):
        cj.Fleet(np.zeros((0, 3)), np.ones((0, 3)))


def test_recover_from_memory_without_snapshots_is_refused():
    # Before: accepted and ignored (the fleet-file loader refused it).
    with pytest.raises(ValueError, match=r"recover_from='memory' needs snapshot="):
        cj.Fleet([10.0, 12.0], [1.0, 1.0], recover_from="memory")
    assert cj.Fleet([10.0, 12.0], [1.0, 1.0], snapshot=0.1, recover_from="memory").recover_from == "memory"
