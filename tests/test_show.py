"""What the library shows a user: errors for missing keys, scalar fields, short reprs,
fleet indexing of a `Trace`, status descriptions of arrays; and what the CLI draws."""

import jax
import numpy as np
import pytest

import ckpt_jax as cj

FLEET = cj.Fleet(np.full((3, 4), 10.0), np.full((3, 4), 1.0))


@pytest.fixture(scope="module")
def trace():
    return cj.simulate(FLEET, cj.random_state(FLEET, jax.random.key(0)), 3)


# -- a key is required where a run draws random numbers -----------------------------------------
@pytest.mark.parametrize("kwargs", [dict(jitter=0.5), dict(jitter=[0.0, 0.0, 0.1])])
def test_jitter_without_a_key_is_refused(kwargs):
    with pytest.raises(ValueError, match=r"^key is needed.*jitter"):
        cj.simulate(FLEET, cj.initial_state(FLEET), 3, **kwargs)


def test_drawn_failures_without_a_key_are_refused_but_listed_ones_need_none():
    fleet = cj.Fleet([10.0, 10.0], 1.0, mtbf=50.0)
    with pytest.raises(ValueError, match=r"^key is needed.*mtbf"):
        cj.simulate(fleet, cj.initial_state(fleet), 3, until=20.0)
    listed = cj.simulate(fleet, cj.initial_state(fleet), 3, until=20.0, failure_times=[[5.0], [np.inf]])
    assert bool(listed.ok)


def test_no_randomness_needs_no_key(trace):
    again = cj.simulate(FLEET, cj.random_state(FLEET, jax.random.key(0)), 3, jitter=0.0)
    np.testing.assert_array_equal(again.fire_times, trace.fire_times)


def test_ensemble_with_jitter_needs_a_key():
    def chunk(start, stop):
        fleet = cj.Fleet(np.full((stop - start, 4), 10.0), np.full((stop - start, 4), 1.0))
        return fleet, cj.initial_state(fleet)

    with pytest.raises(ValueError, match=r"^key is needed.*jitter"):
        cj.run_ensemble(chunk, 3, 3, chunk_size=3, jitter=0.1, progress=False)


# -- per-job fields accept scalars alike -----------------------------------------------------
def test_compute_or_write_may_be_a_scalar():
    by_write = cj.Fleet(compute=np.array([10.0, 12.0]), write=1.0)
    by_compute = cj.Fleet(compute=10.0, write=[1.0, 2.0], mtbf=30.0)
    np.testing.assert_array_equal(by_write.write, [1.0, 1.0])
    np.testing.assert_array_equal(by_compute.compute, [10.0, 10.0])
    with pytest.raises(ValueError, match="compute or write must have a trailing job axis"):
        cj.Fleet(10.0, 1.0)


# -- describe_status of an array ----------------------------------------------------------------
def test_describe_status_takes_an_array():
    assert cj.describe_status(np.zeros(5, np.int32)) == "ok"
    text = cj.describe_status(np.array([0, 1, 3, 0]))
    assert text.startswith("2 of 4 not ok: hit the event budget") and "(2 of 4)" in text and "(1 of 4)" in text
    assert cj.describe_status(np.int32(2)) == cj.describe_status(2)
    with pytest.raises(ValueError, match="status must be an integer"):
        cj.describe_status("1")


# -- short reprs --------------------------------------------------------------------------------
def test_reprs_are_short_and_name_the_shapes():
    fleet = cj.Fleet(np.linspace(5.0, 20.0, 32), np.full(32, 1.0), mtbf=100.0, size=np.arange(1, 33))
    text = repr(fleet)
    assert len(text) < 300 and "n_jobs=32" in text and "compute=[5..20]" in text and "mtbf=100" in text
    out = cj.simulate(fleet, cj.initial_state(fleet), 20, until=50.0, key=jax.random.key(1),
                      save=cj.SaveAt(jobs=True))
    text = repr(out)
    assert len(text) < 300 and "(32, 20)" in text and "JobStats" in text


# -- a Trace indexes its fleets, as a Fleet does ---------------------------------------------------
def test_trace_index_picks_fleets(trace):
    one = trace[1]
    assert isinstance(one, cj.Trace) and one.fire_times.shape == (4, 3)
    np.testing.assert_array_equal(one.fire_times, np.asarray(trace.fire_times)[1])
    assert one.ok.shape == () and bool(one.ok) == bool(trace.ok[1])
    assert trace[1:].fire_times.shape == (2, 4, 3)
    assert trace[np.array([True, False, True])].time.shape == (2,)
    with pytest.raises(IndexError):
        trace[3]
    with pytest.raises(IndexError):
        one[0]
    # Not a tuple of fields: iterating goes over the fleets, as for a NumPy array.
    first, *rest = trace
    assert len(rest) == 2 and first.fire_times.shape == (4, 3)
    with pytest.raises(TypeError):
        iter(one)
