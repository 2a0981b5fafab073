"""Long ensembles in chunks (`ckpt_jax.ensemble.run_ensemble`): same results as one call, resumable.

Every run here has N = 4 jobs, K = 4 firings and chunks of 4 fleets, so the engine compiles
once per path (with and without jitter) and every test reuses it.
"""

import errno
import json
import os
import shutil
import stat

import jax
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ckpt_jax as cj
from ckpt_jax import ensemble
from ckpt_jax.cli import main
from ckpt_jax.ensemble import LOCK, MANIFEST, EnsembleMismatchError, chunk_bounds
from ckpt_jax.labelled import zarr_missing

N_JOBS, N_FIRES, N_FLEETS, CHUNK = 4, 4, 10, 4  # 3 chunks; the last holds 2 fleets + 2 padding
TRACE_FIELDS = ("fire_times", "end_times", "n_events", "time")
# The CLI writes ensemble.zarr where xarray and zarr are installed (tests/test_labelled.py reads it).
ZARR = [] if zarr_missing() else ["ensemble.zarr"]
LAUNCH_KEY = jax.random.key(7)
JITTER_KEY = jax.random.key(8)


def launches():
    return cj.ensemble.random_launches(np.full(N_JOBS, 0.8), np.full(N_JOBS, 0.2), key=LAUNCH_KEY)


class Recorder:
    """A ``make_chunk`` that records its calls and can fail from a given start on."""

    def __init__(self, fail_from=None):
        self.inner = launches()
        self.config = self.inner.config
        self.calls = []
        self.fail_from = fail_from

    def __call__(self, start, stop):
        if self.fail_from is not None and start >= self.fail_from:
            raise RuntimeError("interrupted")
        self.calls.append((start, stop))
        return self.inner(start, stop)


def reference(jitter=None, key=JITTER_KEY):
    """One `simulate` call over all fleets (no chunks, no padding)."""
    fleet, state = launches()(0, N_FLEETS)
    return cj.simulate(fleet, state, N_FIRES, jitter=jitter, key=key)


def assert_same_trace(result, trace):
    assert result.arrays.keys() == set(TRACE_FIELDS)
    for name in TRACE_FIELDS:
        np.testing.assert_array_equal(result.arrays[name], np.asarray(getattr(trace, name)), err_msg=name)
    np.testing.assert_array_equal(result.ok, np.asarray(trace.ok))
    np.testing.assert_array_equal(result.status, np.asarray(trace.status))


def files(out) -> list:
    """The files a run leaves in ``out``, besides its lock file."""
    return sorted(p.name for p in out.iterdir() if p.name != LOCK)


def run(make_chunk=None, **kwargs):
    kwargs = {"chunk_size": CHUNK, "progress": False, **kwargs}
    return cj.ensemble.run_ensemble(make_chunk or launches(), N_FLEETS, N_FIRES, **kwargs)


# -- same results as one call ---------------------------------------------------------------
@pytest.mark.parametrize("jitter", [None, 0.05])
def test_chunked_in_memory_equals_one_simulate_call(jitter):
    result = run(jitter=jitter, key=JITTER_KEY)
    assert_same_trace(result, reference(jitter))
    assert (result.n_computed, result.n_loaded, result.n_fleets, result.n_bad) == (3, 0, N_FLEETS, 0)
    assert result.arrays["fire_times"].shape == (N_FLEETS, N_JOBS, N_FIRES)


@pytest.mark.parametrize("method", ["clock", "fifo", "general"])
def test_every_simulate_method_passes_through(method):
    result = run(method=method)
    fleet, state = launches()(0, N_FLEETS)
    assert_same_trace(result, cj.simulate(fleet, state, N_FIRES, method=method))


def test_per_fleet_keys_and_jitter_array_follow_their_fleet(tmp_path):
    keys = jax.random.split(JITTER_KEY, N_FLEETS)
    sigma = np.linspace(0.01, 0.1, N_FLEETS)
    result = run(jitter=sigma, key=keys, out_dir=tmp_path)
    assert_same_trace(result, reference(sigma, keys))
    resumed = run(jitter=sigma, key=keys, out_dir=tmp_path)
    assert (resumed.n_computed, resumed.n_loaded) == (0, 3)
    assert_same_trace(resumed, reference(sigma, keys))


LEAN = cj.SaveAt(trace=False, writers=True, gaps=True, jobs=True)
EVERYTHING = cj.SaveAt(writers=True, gaps=True, jobs=True)  # the trace and every observer
OBSERVER_ARRAYS = {
    "writers_time",
    "writers_window",
    "writers_excursions",
    "writers_max",
    "gaps",
    "jobs_write_time",
    "jobs_compute_time",
    "jobs_writes",
}


def assert_same_observers(result, trace):
    """Every array of ``result`` equals the field of one `simulate` call's trace, bit for bit."""
    expected = {"n_events": trace.n_events, "time": trace.time, "gaps": trace.gaps}
    for prefix, stats in (("writers", trace.writers), ("jobs", trace.jobs)):
        expected.update({f"{prefix}_{name}": value for name, value in stats._asdict().items()})
    if trace.fire_times is not None:
        expected.update(fire_times=trace.fire_times, end_times=trace.end_times)
    assert result.arrays.keys() == expected.keys()
    for name, value in expected.items():
        value = np.asarray(value)
        assert result.arrays[name].dtype == value.dtype and result.arrays[name].tobytes() == value.tobytes(), name
    np.testing.assert_array_equal(result.ok, np.asarray(trace.ok))
    np.testing.assert_array_equal(result.status, np.asarray(trace.status))
    # The grouped views put the per-field arrays back together.
    assert isinstance(result.writers, cj.WriterStats) and isinstance(result.jobs, cj.JobStats)
    np.testing.assert_array_equal(result.writers.time, np.asarray(trace.writers.time))
    np.testing.assert_array_equal(result.jobs.writes, np.asarray(trace.jobs.writes))
    assert result.gaps is result.arrays["gaps"]


@pytest.mark.parametrize("save, jitter", [(LEAN, None), (LEAN, 0.05), (EVERYTHING, None)])
def test_observers_in_chunks_equal_one_simulate_call(save, jitter):
    result = run(save=save, jitter=jitter, key=JITTER_KEY)
    fleet, state = launches()(0, N_FLEETS)
    assert_same_observers(result, cj.simulate(fleet, state, N_FIRES, jitter=jitter, key=JITTER_KEY, save=save))
    assert (save.trace and result.arrays["fire_times"].shape == (N_FLEETS, N_JOBS, N_FIRES)) or (
        not save.trace and "fire_times" not in result.arrays
    )
    assert result.writers.time.shape == (N_FLEETS, N_JOBS + 1) and result.gaps.shape == (N_FLEETS, N_FIRES)


def test_without_observers_the_grouped_views_are_none():
    result = run(reduce=lambda trace: {"time": trace.time})
    assert result.writers is None and result.gaps is None and result.jobs is None


def test_an_interrupted_run_with_observers_resumes(tmp_path):
    uninterrupted = run(save=LEAN, jitter=0.05, key=JITTER_KEY)
    with pytest.raises(RuntimeError, match="interrupted"):
        run(Recorder(fail_from=4), save=LEAN, jitter=0.05, key=JITTER_KEY, out_dir=tmp_path)
    assert [p.name for p in tmp_path.glob("chunk-*.npz")] == ["chunk-000000.npz"]
    with np.load(tmp_path / "chunk-000000.npz") as chunk:
        assert OBSERVER_ARRAYS <= set(chunk.files) and "fire_times" not in chunk.files
    assert json.loads((tmp_path / MANIFEST).read_text())["save"] == {
        "trace": False,
        "writers": True,
        "gaps": True,
        "jobs": True,
    }

    make_chunk = Recorder()
    resumed = run(make_chunk, save=LEAN, jitter=0.05, key=JITTER_KEY, out_dir=tmp_path)
    assert make_chunk.calls == [(4, 8), (8, 10)] and (resumed.n_loaded, resumed.n_computed) == (1, 2)
    assert resumed.arrays.keys() == uninterrupted.arrays.keys()
    for name, value in uninterrupted.arrays.items():
        assert resumed.arrays[name].tobytes() == value.tobytes(), name


def test_another_save_on_resume_is_a_mismatch(tmp_path):
    run(out_dir=tmp_path, save=LEAN)
    with pytest.raises(EnsembleMismatchError) as info:
        run(out_dir=tmp_path, save=cj.SaveAt(trace=False, gaps=True))
    assert info.value.differences == ["save['jobs']: saved true, now false", "save['writers']: saved true, now false"]
    with pytest.raises(EnsembleMismatchError, match=r"save\['trace'\]: saved false, now true"):
        run(out_dir=tmp_path)  # the default: the trace only
    assert run(out_dir=tmp_path, save=LEAN).n_loaded == 3


def test_the_default_save_is_not_recorded_and_resumes_either_way(tmp_path):
    # Ensembles saved before `save` existed (the trace only) keep their manifest and chunks.
    run(out_dir=tmp_path, reduce=lambda trace: {"time": trace.time})
    assert "save" not in json.loads((tmp_path / MANIFEST).read_text())
    again = run(out_dir=tmp_path, reduce=lambda trace: {"time": trace.time}, save=cj.SaveAt())
    assert (again.n_loaded, again.n_computed) == (3, 0)


def test_random_launches_do_not_depend_on_the_chunking():
    make_chunk = launches()
    fleet, state = make_chunk(0, N_FLEETS)
    part_fleet, part_state = make_chunk(4, 8)
    np.testing.assert_array_equal(part_state.remaining, state.remaining[4:8])
    np.testing.assert_array_equal(part_state.phase, state.phase[4:8])
    np.testing.assert_array_equal(part_fleet.write, fleet.write[4:8])
    # Fleet i is `random_state` of that fleet alone with key fold_in(key, i).
    alone = cj.random_state(fleet[3], jax.random.fold_in(LAUNCH_KEY, 3))
    np.testing.assert_array_equal(alone.remaining, state.remaining[3])
    assert json.dumps(make_chunk.config)  # recorded in the manifest


# -- resume -------------------------------------------------------------------------------------
def test_interrupted_run_resumes_from_the_saved_chunks(tmp_path):
    uninterrupted = run(jitter=0.05, key=JITTER_KEY)
    with pytest.raises(RuntimeError, match="interrupted"):
        run(Recorder(fail_from=8), jitter=0.05, key=JITTER_KEY, out_dir=tmp_path)
    assert sorted(p.name for p in tmp_path.glob("chunk-*.npz")) == ["chunk-000000.npz", "chunk-000001.npz"]

    make_chunk = Recorder()
    resumed = run(make_chunk, jitter=0.05, key=JITTER_KEY, out_dir=tmp_path)
    assert make_chunk.calls == [(8, 10)]  # the saved chunks were loaded, not recomputed
    assert (resumed.n_loaded, resumed.n_computed) == (2, 1)
    assert resumed.n_fleets == N_FLEETS
    for name in TRACE_FIELDS:
        np.testing.assert_array_equal(resumed.arrays[name], uninterrupted.arrays[name])

    again = Recorder()
    complete = run(again, jitter=0.05, key=JITTER_KEY, out_dir=tmp_path)
    assert again.calls == [] and (complete.n_loaded, complete.n_computed) == (3, 0)


def test_interrupt_in_reduce_and_mid_write_leave_no_partial_chunk(tmp_path, monkeypatch):
    calls = []

    def reduce(trace):
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return {"n_events": trace.n_events}

    with pytest.raises(KeyboardInterrupt):
        run(reduce=reduce, out_dir=tmp_path)
    assert [p.name for p in tmp_path.glob("chunk-*")] == ["chunk-000000.npz"]

    write_npz = ensemble._write_npz

    def dies_mid_write(handle, arrays):
        handle.write(b"PK\x03\x04 half a zip")
        raise KeyboardInterrupt

    monkeypatch.setattr(ensemble, "_write_npz", dies_mid_write)
    with pytest.raises(KeyboardInterrupt):
        run(reduce=reduce, out_dir=tmp_path)
    monkeypatch.setattr(ensemble, "_write_npz", write_npz)
    assert files(tmp_path) == ["chunk-000000.npz", MANIFEST]

    result = run(reduce=lambda trace: {"n_events": trace.n_events}, out_dir=tmp_path)
    assert (result.n_loaded, result.n_computed) == (1, 2)
    np.testing.assert_array_equal(result.arrays["n_events"], np.asarray(reference().n_events))


def test_stray_temp_files_and_a_truncated_chunk_are_handled(tmp_path):
    first = run(out_dir=tmp_path)
    (tmp_path / ".chunk-000001.npz.abc123.tmp").write_bytes(b"partial")
    (tmp_path / f".{MANIFEST}.xyz.tmp").write_bytes(b"{")
    chunk = tmp_path / "chunk-000002.npz"
    chunk.write_bytes(chunk.read_bytes()[:100])
    with pytest.warns(RuntimeWarning, match="unreadable"):
        result = run(out_dir=tmp_path)
    assert (result.n_loaded, result.n_computed) == (2, 1)
    assert not list(tmp_path.glob(".*.tmp"))
    for name in TRACE_FIELDS:
        np.testing.assert_array_equal(result.arrays[name], first.arrays[name])


def test_swapped_or_foreign_chunks_are_recomputed_with_a_warning(tmp_path):
    first = run(out_dir=tmp_path / "a")
    run(out_dir=tmp_path / "b", jitter=0.05, key=JITTER_KEY)  # another ensemble
    a, b = tmp_path / "a", tmp_path / "b"
    zero, one = (a / "chunk-000000.npz").read_bytes(), (a / "chunk-000001.npz").read_bytes()
    (a / "chunk-000000.npz").write_bytes(one)
    (a / "chunk-000001.npz").write_bytes(zero)
    shutil.copy(b / "chunk-000002.npz", a / "chunk-000002.npz")
    with pytest.warns(RuntimeWarning) as caught:
        result = run(out_dir=a)
    messages = sorted(str(w.message) for w in caught)
    assert len(messages) == 3, messages
    assert "chunk-000000.npz holds chunk 1, not chunk 0" in messages[0]
    assert "chunk-000001.npz holds chunk 0, not chunk 1" in messages[1]
    assert "chunk-000002.npz belongs to another ensemble" in messages[2]
    assert (result.n_loaded, result.n_computed) == (0, 3)
    for name in TRACE_FIELDS:
        np.testing.assert_array_equal(result.arrays[name], first.arrays[name])
    assert run(out_dir=a).n_loaded == 3  # rewritten: no warning now


def test_chunk_without_tags_is_recomputed(tmp_path):
    run(out_dir=tmp_path)
    path = tmp_path / "chunk-000001.npz"
    with np.load(path) as npz:
        assert int(npz["chunk_index"]) == 1
        assert str(npz["fingerprint"]) == json.loads((tmp_path / MANIFEST).read_text())["fingerprint"]
        old = {name: npz[name] for name in npz.files if name not in ("chunk_index", "fingerprint")}
    np.savez(path, **old)  # as an older version wrote it
    with pytest.warns(RuntimeWarning, match="does not record its chunk index"):
        assert run(out_dir=tmp_path).n_computed == 1


def test_chunks_and_manifest_get_the_users_umask(tmp_path):
    previous = os.umask(0o022)
    try:
        run(out_dir=tmp_path, reduce=lambda trace: {"time": trace.time})
    finally:
        os.umask(previous)
    assert {stat.S_IMODE(p.stat().st_mode) for p in tmp_path.iterdir()} == {0o644}


def test_a_different_ensemble_in_out_dir_raises_and_restart_discards_it(tmp_path):
    run(out_dir=tmp_path, config={"load": 0.8})
    cases = [
        ({"config": {"load": 0.9}}, r"config\['load'\]"),
        ({"config": {"load": 0.8}, "jitter": 0.05}, "jitter"),
        ({"config": {"load": 0.8}, "chunk_size": 3}, "chunk_size"),
        ({"config": {"load": 0.8}, "max_events": 500}, "simulate_options"),
    ]
    for kwargs, what in cases:
        with pytest.raises(ValueError, match=what):
            run(out_dir=tmp_path, **kwargs)
    with pytest.raises(EnsembleMismatchError) as info:  # a ValueError that lists what differs
        run(out_dir=tmp_path, config={"load": 0.9})
    assert info.value.differences == ["config['load']: saved 0.8, now 0.9"]
    with pytest.raises(ValueError, match="n_fires"):
        cj.ensemble.run_ensemble(
            launches(), N_FLEETS, N_FIRES + 1, chunk_size=CHUNK, out_dir=tmp_path, config={"load": 0.8}
        )
    with pytest.raises(ValueError, match="make_chunk"):
        other = cj.ensemble.random_launches(np.full(N_JOBS, 0.7), np.full(N_JOBS, 0.3), key=LAUNCH_KEY)
        run(other, out_dir=tmp_path, config={"load": 0.8})

    restarted = run(out_dir=tmp_path, config={"load": 0.9}, resume=False)
    assert (restarted.n_loaded, restarted.n_computed) == (0, 3)
    assert json.loads((tmp_path / MANIFEST).read_text())["config"] == {"load": 0.9}

    (tmp_path / MANIFEST).unlink()  # chunks without a manifest: whose are they?
    with pytest.raises(ValueError, match=MANIFEST):
        run(out_dir=tmp_path)


def test_fleets_with_failures_are_refused():
    # An ensemble runs K cycles per job; failures abandon writes, so that may never complete.
    def failing(start, stop):
        fleet = cj.Fleet(np.full((stop - start, N_JOBS), 1.0), np.full((stop - start, N_JOBS), 0.3), mtbf=5.0)
        return fleet, cj.initial_state(fleet)

    with pytest.raises(ValueError, match=r"make_chunk\(0, \d+\) returned fleets with failures.*until=H"):
        run(failing)


# -- what is kept -------------------------------------------------------------------------------
def test_custom_reduce_keeps_per_fleet_arrays(tmp_path):
    gap = jax.jit(cj.analysis.smallest_gap)

    def reduce(trace):
        return {"smallest_gap": gap(trace.fire_times), "n_events": trace.n_events}

    result = run(reduce=reduce, out_dir=tmp_path)
    trace = reference()
    assert result.arrays.keys() == {"smallest_gap", "n_events"}
    np.testing.assert_array_equal(result.arrays["smallest_gap"], np.asarray(cj.analysis.smallest_gap(trace.fire_times)))
    np.testing.assert_array_equal(result.arrays["n_events"], np.asarray(trace.n_events))
    assert result.ok.shape == (N_FLEETS,) and result.ok.all()


def test_fleets_that_did_not_complete_are_kept_and_counted(tmp_path):
    with pytest.warns(RuntimeWarning, match=f"{N_FLEETS} of {N_FLEETS} fleets did not complete"):
        result = run(out_dir=tmp_path, max_events=3)
    assert result.n_bad == N_FLEETS and not result.ok.any()
    assert (result.status & cj.Status.MAX_EVENTS).all()
    assert np.isnan(result.arrays["end_times"]).any()
    with pytest.warns(RuntimeWarning, match="did not complete"):
        loaded = run(out_dir=tmp_path, max_events=3)
    assert loaded.n_loaded == 3 and loaded.n_bad == N_FLEETS


def test_progress_bar_counts_fleets(capsys):
    run(progress=True, reduce=lambda trace: {"time": trace.time})
    assert f"{N_FLEETS}/{N_FLEETS}" in capsys.readouterr().err


# -- bad input -----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "changes, what",
    [
        ({"n_fleets": 0}, "n_fleets"),
        ({"n_fleets": 2.5}, "n_fleets"),
        ({"n_fires": 0}, "n_fires"),
        ({"chunk_size": 0}, "chunk_size"),
        ({"chunk_size": True}, "chunk_size"),
        ({"jitter": -0.1}, "jitter"),
        ({"jitter": np.ones(3)}, "jitter"),
        ({"key": jax.random.split(JITTER_KEY, 3)}, "key"),
        ({"key": "seed"}, "key"),
        ({"make_chunk": None}, "make_chunk"),
        ({"reduce": "n_events"}, "reduce"),
        ({"resume": "yes"}, "resume"),
        ({"progress": 1}, "progress"),
        ({"fleet_offset": 4}, "fleet_offset"),
        ({"max_events": 0}, "max_events"),
        ({"queue_size": 0}, "queue_size"),
        ({"method": "fast"}, "method"),
        ({"config": {"seed": object()}}, "config"),
        ({"save": "writers"}, "save must be None or a ckpt_jax.SaveAt"),
        ({"save": {"writers": True}}, "save"),
    ],
)
def test_bad_arguments_raise_before_anything_runs(tmp_path, changes, what):
    make_chunk = Recorder()
    kwargs = {
        "make_chunk": make_chunk,
        "n_fleets": N_FLEETS,
        "n_fires": N_FIRES,
        "chunk_size": CHUNK,
        "out_dir": tmp_path,
    }
    kwargs.update(changes)
    with pytest.raises(ValueError, match=what):
        cj.ensemble.run_ensemble(kwargs.pop("make_chunk"), kwargs.pop("n_fleets"), kwargs.pop("n_fires"), **kwargs)
    assert make_chunk.calls == [] and not list(tmp_path.iterdir())


def test_unknown_simulate_option_is_a_type_error():
    with pytest.raises(TypeError, match="max_event"):
        run(max_event=10)


@pytest.mark.parametrize(
    "make_chunk, reduce, what",
    [
        (lambda start, stop: launches()(start, stop + 1), None, "must return 4 fleets"),
        (lambda start, stop: launches()(start, stop)[0], None, r"\(fleet, state\)"),
        (None, lambda trace: {"n_events": trace.n_events[:2]}, "leading axis of 4"),
        (None, lambda trace: {"ok": trace.ok}, "reduce's keys"),
        (None, lambda trace: trace.n_events, "dict"),
    ],
)
def test_bad_make_chunk_or_reduce_output_raises(make_chunk, reduce, what):
    with pytest.raises(ValueError, match=what):
        run(make_chunk, reduce=reduce)


@settings(max_examples=40, deadline=None)
@given(n_fleets=st.integers(1, 200), chunk_size=st.integers(1, 64))
def test_chunk_bounds_cover_every_fleet_once(n_fleets, chunk_size):
    bounds = chunk_bounds(n_fleets, chunk_size)
    covered = np.concatenate([np.arange(start, stop) for start, stop in bounds])
    np.testing.assert_array_equal(covered, np.arange(n_fleets))
    assert all(0 < stop - start <= chunk_size for start, stop in bounds)


@settings(max_examples=20, deadline=None)
@given(n_fleets=st.integers(max_value=0), chunk_size=st.integers(max_value=0))
def test_nonpositive_sizes_are_rejected(n_fleets, chunk_size):
    with pytest.raises(ValueError, match="n_fleets"):
        cj.ensemble.run_ensemble(launches(), n_fleets, N_FIRES, chunk_size=CHUNK)
    with pytest.raises(ValueError, match="chunk_size"):
        cj.ensemble.run_ensemble(launches(), N_FLEETS, N_FIRES, chunk_size=chunk_size)


# -- command line ---------------------------------------------------------------------------------
def test_cli_ensemble_runs_resumes_and_restarts(tmp_path, capsys):
    out = tmp_path / "ensemble"
    argv = [
        "ensemble",
        "--out",
        str(out),
        "--fleets",
        "6",
        "--jobs",
        str(N_JOBS),
        "--fires",
        str(N_FIRES),
        "--chunk-size",
        str(CHUNK),
        "--load",
        "0.8",
        "--no-progress",
    ]
    assert main(argv) == 0
    assert "6/6 fleets ok" in capsys.readouterr().out
    assert files(out) == ["chunk-000000.npz", "chunk-000001.npz", *ZARR, MANIFEST, "summary.json"]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["fleets_ok"] == 6 and summary["chunks_computed"] == 2
    assert summary["files"] == [MANIFEST, "chunk-*.npz", *ZARR, "summary.json"]
    assert summary["load"] == pytest.approx(0.8)
    assert 0 < summary["smallest_gap_min_mean"] < 1
    with np.load(out / "chunk-000001.npz") as chunk:
        assert chunk["smallest_gap"].shape == (2, N_FIRES) and chunk["ok"].all()

    assert main(argv) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert (summary["chunks_loaded"], summary["chunks_computed"]) == (2, 0)

    other = [a if a != "0.8" else "0.9" for a in argv]
    assert main(other) == 2
    assert one_line(capsys).endswith(
        "load: 0.8 saved, 0.9 now; compute: 0.8 saved, 0.775 now; write: 0.2 saved, "
        "0.225 now; use --restart to start over"
    )
    assert main(other + ["--restart"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["chunks_computed"] == 2 and summary["load"] == pytest.approx(0.9)

    assert main(argv + ["--compute", "3"]) == 2
    assert one_line(capsys) == "ckpt-jax: error: give either --load or --compute/--write, not both"


def one_line(capsys) -> str:
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    return err.strip()


def cli_argv(out, *more):
    return [
        "ensemble",
        "--out",
        str(out),
        "--fleets",
        "6",
        "--jobs",
        str(N_JOBS),
        "--fires",
        str(N_FIRES),
        "--chunk-size",
        str(CHUNK),
        "--load",
        "0.8",
        "--no-progress",
        *more,
    ]


def test_cli_resume_mismatch_speaks_in_options(tmp_path, capsys):
    out = tmp_path / "ensemble"
    assert main(cli_argv(out)) == 0
    capsys.readouterr()
    assert main([a if a != "6" else "5" for a in cli_argv(out, "--seed", "3", "--no-x64")]) == 2
    assert one_line(capsys) == (
        f"ckpt-jax: error: {out} holds another ensemble: fleets: 6 saved, 5 now; seed: 0 saved, 3 now; "
        "x64: on saved, off now; use --restart to start over"
    )
    manifest = json.loads((out / MANIFEST).read_text())
    del manifest["config"]["parameters"]  # as an older version (or the Python API) wrote it
    (out / MANIFEST).write_text(json.dumps(manifest))
    assert main(cli_argv(out)) == 2
    assert one_line(capsys).endswith("use --restart to start over, or another --out")
    assert main(cli_argv(out, "--restart")) == 0


@pytest.mark.parametrize("sigma, save", [("0.3", "gaps"), ("0.1", "order")])
def test_cli_summary_never_reports_a_negative_gap(tmp_path, capsys, sigma, save):
    # σ comparable to the gaps: jobs overtake one another (the firing order changes). The
    # gaps observer sees the changes that interleave two cycles (σ = 0.3 here); order, from
    # the trace, also two jobs swapping inside a cycle (all σ = 0.1 gives at K = 4).
    out = tmp_path / "jitter"
    assert main(cli_argv(out, "--jitter", sigma, "--save", save)) == 0
    err = capsys.readouterr().err
    summary = json.loads((out / "summary.json").read_text())
    assert summary["save"] == (["gaps", "order"] if save == "order" else ["gaps"])
    assert summary["order_changed_cycles"] > 0 and 0 < summary["order_changed_fleets"] <= 6
    assert err.startswith(f"ckpt-jax: warning: the firing order changed in {summary['order_changed_cycles']} cycle(s)")
    assert ("--save order also flags" in err) == (save == "gaps")
    assert summary["smallest_gap_min_mean"] is None or summary["smallest_gap_min_mean"] >= 0
    for path in out.glob("chunk-*.npz"):
        with np.load(path) as chunk:
            gaps, changed = chunk["smallest_gap"], chunk["order_changed"]
            assert not (gaps < 0).any() and "fire_times" not in chunk.files
            assert np.isnan(gaps[changed]).all()
            assert not changed[:, -1].any()
    # Without jitter the order never changes: no warning, every fleet has a gap.
    assert main(cli_argv(tmp_path / "plain", "--save", save)) == 0
    assert capsys.readouterr().err == ""
    summary = json.loads((tmp_path / "plain" / "summary.json").read_text())
    assert (summary["order_changed_cycles"], summary["smallest_gap_fleets"]) == (0, 6)


def test_cli_gaps_observer_equals_the_trace_without_jitter(tmp_path):
    # The default (the gaps observer, no trace) and order (from the trace) agree bit for bit
    # where the firing order cannot change; order is what the ensemble computed before.
    for save in ("gaps", "order"):
        assert main(cli_argv(tmp_path / save, "--save", save)) == 0
    for name in ("chunk-000000.npz", "chunk-000001.npz"):
        with np.load(tmp_path / "gaps" / name) as a, np.load(tmp_path / "order" / name) as b:
            for array in ("smallest_gap", "order_changed", "n_events", "time", "ok", "status"):
                assert a[array].tobytes() == b[array].tobytes(), array
    plain = json.loads((tmp_path / "gaps" / "summary.json").read_text())
    exact = json.loads((tmp_path / "order" / "summary.json").read_text())
    for field in ("smallest_gap_min_mean", "smallest_gap_fleets", "order_changed_cycles", "events_mean"):
        assert plain[field] == exact[field], field


def test_cli_save_writers_gaps_jobs_keeps_every_observer(tmp_path, capsys):
    out = tmp_path / "all"
    assert main(cli_argv(out, "--save", "jobs, writers,gaps")) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["save"] == ["writers", "gaps", "jobs"] and summary["parameters"]["save"] == "writers,gaps,jobs"
    dist = np.array(summary["writer_distribution_mean"])
    assert (
        dist.shape == (N_JOBS + 1,) and dist.sum() == pytest.approx(1.0) and summary["writer_distribution_fleets"] == 6
    )
    assert 1 <= summary["writers_max"] <= N_JOBS
    assert 0 < summary["write_time_fraction_mean"] < 1 and summary["writes_per_job_mean"] >= N_FIRES - 1
    assert 0 < summary["smallest_gap_min_mean"] < 1
    with np.load(out / "chunk-000001.npz") as chunk:
        assert chunk["writers_time"].shape == (2, N_JOBS + 1) and chunk["writers_window"].shape == (2, 2)
        assert chunk["jobs_writes"].shape == (2, N_JOBS) and chunk["smallest_gap"].shape == (2, N_FIRES)
        assert "fire_times" not in chunk.files
    # The same observers as one simulate call of those fleets (fleets 4 and 5).
    fleet, state = cj.ensemble.random_launches(
        np.full(N_JOBS, 0.8), np.full(N_JOBS, 0.2), key=jax.random.fold_in(jax.random.key(0), 0)
    )(0, 6)
    trace = cj.simulate(fleet, state, N_FIRES, save=cj.SaveAt(trace=False, writers=True, gaps=True, jobs=True))
    with np.load(out / "chunk-000001.npz") as chunk:
        np.testing.assert_array_equal(chunk["writers_time"], np.asarray(trace.writers.time)[4:])
        np.testing.assert_array_equal(chunk["smallest_gap"], np.asarray(trace.gaps)[4:])
        np.testing.assert_array_equal(chunk["jobs_write_time"], np.asarray(trace.jobs.write_time)[4:])
    # Only writers: no gap statistics (null), the writer distribution as before.
    assert main(cli_argv(tmp_path / "writers", "--save", "writers")) == 0
    summary = json.loads((tmp_path / "writers" / "summary.json").read_text())
    assert summary["smallest_gap_min_mean"] is None and summary["order_changed_cycles"] is None
    assert summary["writer_distribution_mean"] == pytest.approx(dist.tolist(), rel=0, abs=0)
    # Another --save on resume is refused in the options' words.
    capsys.readouterr()
    assert main(cli_argv(out, "--save", "gaps")) == 2
    assert one_line(capsys).endswith("save: writers,gaps,jobs saved, gaps now; use --restart to start over")


@pytest.mark.parametrize("value", ["nonsense", "writers,trace", "", ","])
def test_cli_bad_save_is_one_line_naming_the_allowed_names(tmp_path, capsys, value):
    assert main(cli_argv(tmp_path / "bad", "--save", value)) == 2
    line = one_line(capsys)
    assert line.startswith(
        "ckpt-jax: error: argument --save: expected a comma-separated list of writers, gaps, jobs, order, got "
    )
    assert not (tmp_path / "bad").exists()


@pytest.mark.parametrize(
    "failure, status, message",
    [
        (OSError(errno.ENOSPC, "No space left on device"), 2, "no space left on device while writing ("),
        (KeyboardInterrupt(), 130, "ckpt-jax: interrupted; rerun the same command to resume"),
    ],
)
def test_cli_disk_full_or_ctrl_c_is_one_line_and_a_rerun_resumes(
    tmp_path, capsys, monkeypatch, failure, status, message
):
    write_npz, calls = ensemble._write_npz, []

    def fails_on_the_second_chunk(handle, arrays):
        calls.append(1)
        if len(calls) == 2:
            raise failure
        return write_npz(handle, arrays)

    monkeypatch.setattr(ensemble, "_write_npz", fails_on_the_second_chunk)
    out = tmp_path / "ensemble"
    assert main(cli_argv(out)) == status
    line = one_line(capsys)
    assert message in line
    if status == 2:
        assert f"{out / 'chunk-000001.npz'}" in line and line.endswith("rerun the same command to resume")
    assert files(out) == ["chunk-000000.npz", MANIFEST]
    monkeypatch.setattr(ensemble, "_write_npz", write_npz)
    assert main(cli_argv(out)) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert (summary["chunks_loaded"], summary["chunks_computed"]) == (1, 1)


def test_cli_reports_a_recomputed_chunk_in_one_line(tmp_path, capsys):
    out = tmp_path / "ensemble"
    assert main(cli_argv(out)) == 0
    (out / "chunk-000001.npz").write_bytes((out / "chunk-000000.npz").read_bytes())
    capsys.readouterr()
    assert main(cli_argv(out)) == 0
    assert one_line(capsys) == (
        f"ckpt-jax: warning: {out / 'chunk-000001.npz'} holds chunk 0, not chunk 1 (renamed or swapped?); "
        "recomputing that chunk"
    )


def test_a_deeply_nested_manifest_is_an_error_not_a_recursion_error(tmp_path):
    (tmp_path / MANIFEST).write_text('{"config": ' + "[" * 100_000 + "]" * 100_000 + "}")
    with pytest.raises(EnsembleMismatchError, match="unreadable"):
        run(out_dir=tmp_path)


@pytest.mark.parametrize("text", ["[1, 2]", "null", "3", '"manifest"'])
def test_a_manifest_that_is_json_but_no_object_is_unreadable(tmp_path, text):
    # Before: open_ensemble raised AttributeError ('list' object has no attribute 'get').
    (tmp_path / MANIFEST).write_text(text)
    with pytest.raises(ValueError, match=r"manifest.json is unreadable \(JSON, but a \w+, not an object\)"):
        cj.open_ensemble(tmp_path)
    with pytest.raises(EnsembleMismatchError, match=r"is unreadable \(JSON, but a \w+, not an object\)"):
        run(out_dir=tmp_path)


# -- nothing lost on disk --------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["allow_pickle", "file", "fix_imports", "kwds"])
def test_any_identifier_is_stored_under_its_own_name_and_resumes(tmp_path, name):
    # np.savez(file, **arrays) took these names for its own arguments.
    def reduce(trace):
        return {name: trace.n_events, "time": trace.time}

    first = run(reduce=reduce, out_dir=tmp_path)
    resumed = run(reduce=reduce, out_dir=tmp_path)
    assert (resumed.n_loaded, resumed.n_computed) == (3, 0)
    assert resumed.arrays.keys() == {name, "time"}
    np.testing.assert_array_equal(resumed.arrays[name], np.asarray(reference().n_events))
    np.testing.assert_array_equal(resumed.arrays[name], first.arrays[name])


@pytest.mark.parametrize(
    "value, what",
    [
        (lambda trace: np.array([{"fleet": i} for i in range(CHUNK)], dtype=object), "dtype object"),
        (lambda trace: [[1.0]] * (CHUNK - 1) + [[1.0, 2.0]], "must be an array"),
    ],
)
def test_what_a_chunk_cannot_store_is_refused_before_anything_is_saved(tmp_path, value, what):
    make_chunk = Recorder()
    with pytest.raises(ValueError, match=f"reduce's 'label' .*{what}"):
        run(make_chunk, reduce=lambda trace: {"n_events": trace.n_events, "label": value(trace)}, out_dir=tmp_path)
    assert make_chunk.calls == [(0, CHUNK)]  # the first chunk, no further
    assert files(tmp_path) == [MANIFEST]


@pytest.mark.parametrize("name", ["chunk-000001.npz", MANIFEST])
@pytest.mark.parametrize("kind", ["directory", "fifo"])
@pytest.mark.parametrize("resume", [True, False])
def test_a_directory_or_fifo_at_a_file_name_is_refused_before_anything_runs(tmp_path, name, kind, resume):
    if name != MANIFEST:  # a saved ensemble, one of whose chunks is not a file
        run(out_dir=tmp_path)
        (tmp_path / name).unlink()
    if kind == "directory":
        (tmp_path / name).mkdir()
    else:
        os.mkfifo(tmp_path / name)  # opening it for reading would block for ever
    make_chunk = Recorder()
    with pytest.raises(EnsembleMismatchError, match=f"{name} is a {'directory' if kind == 'directory' else 'FIFO'}"):
        run(make_chunk, out_dir=tmp_path, resume=resume)
    assert make_chunk.calls == []


def test_a_second_run_on_a_folder_in_use_is_refused_and_the_first_completes(tmp_path):
    import threading

    started, release, outcome = threading.Event(), threading.Event(), {}

    def waits_in_its_second_chunk(start, stop):
        if start == CHUNK:
            started.set()
            release.wait(60)
        return launches()(start, stop)

    waits_in_its_second_chunk.config = launches().config

    def first():
        try:
            outcome["result"] = run(waits_in_its_second_chunk, out_dir=tmp_path)
        except BaseException as err:  # noqa: BLE001 - reported by the assertion below
            outcome["error"] = err

    thread = threading.Thread(target=first)
    thread.start()
    try:
        assert started.wait(60)
        (tmp_path / ".chunk-000001.npz.abc.tmp").write_bytes(b"as if the first were writing it")
        make_chunk = Recorder()
        with pytest.raises(ensemble.EnsembleBusyError, match="in use by another"):
            run(make_chunk, out_dir=tmp_path, resume=False)
        assert make_chunk.calls == [] and (tmp_path / ".chunk-000001.npz.abc.tmp").exists()
    finally:
        release.set()
        thread.join(60)
    assert "error" not in outcome, outcome
    assert outcome["result"].n_computed == 3
    assert run(out_dir=tmp_path).n_loaded == 3  # the lock is released on return


def test_cli_refuses_a_folder_another_process_holds_in_one_line(tmp_path, capsys):
    import subprocess
    import sys

    out = tmp_path / "ensemble"
    out.mkdir()
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            (
                "import sys, filelock; lock = filelock.FileLock(sys.argv[1]); lock.acquire(); "
                "print('held', flush=True); sys.stdin.read()"
            ),
            str(out / LOCK),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline() == "held\n"
        assert main(cli_argv(out)) == 2
        assert one_line(capsys) == (
            f"ckpt-jax: error: {out} is in use by another run (it holds {out / LOCK}); "
            "wait for it to finish, or use another --out"
        )
        assert files(out) == []
    finally:
        holder.communicate("")


def test_cli_restart_killed_part_way_leaves_no_stale_summary(tmp_path, capsys, monkeypatch):
    out = tmp_path / "ensemble"
    assert main(cli_argv(out)) == 0
    old = json.loads((out / "summary.json").read_text())
    assert old["fingerprint"] == json.loads((out / MANIFEST).read_text())["fingerprint"]

    write_npz, calls = ensemble._write_npz, []

    def killed_on_the_second_chunk(handle, arrays):
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return write_npz(handle, arrays)

    monkeypatch.setattr(ensemble, "_write_npz", killed_on_the_second_chunk)
    assert main(cli_argv(out, "--restart", "--seed", "5")) == 130
    assert files(out) == ["chunk-000000.npz", MANIFEST]  # no summary of seed 0 beside seed 5's manifest
    assert json.loads((out / MANIFEST).read_text())["config"]["parameters"]["seed"] == 5

    # A summary that does not record this manifest (edited, or older) is removed when a run starts.
    (out / "summary.json").write_text(json.dumps({**old, "fingerprint": "0" * 64}))
    calls[:] = [1]  # killed on the one chunk left to compute
    assert main(cli_argv(out, "--seed", "5")) == 130
    assert not (out / "summary.json").exists()

    monkeypatch.setattr(ensemble, "_write_npz", write_npz)
    assert main(cli_argv(out, "--seed", "5")) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["parameters"]["seed"] == 5
    assert summary["fingerprint"] == json.loads((out / MANIFEST).read_text())["fingerprint"]


@pytest.mark.parametrize("kind", ["directory", "fifo"])
def test_cli_summary_path_that_is_not_a_file_is_one_line_before_anything_runs(tmp_path, capsys, kind):
    out = tmp_path / "ensemble"
    out.mkdir()
    (out / "summary.json").mkdir() if kind == "directory" else os.mkfifo(out / "summary.json")
    assert main(cli_argv(out)) == 2
    line = one_line(capsys)
    assert f"{out / 'summary.json'} is a " in line and line.endswith("remove it, or use another --out")
    assert files(out) == ["summary.json"]


def test_cli_without_xarray_or_zarr_says_what_to_install_and_completes(tmp_path, capsys, monkeypatch):
    from ckpt_jax import labelled

    monkeypatch.setattr(labelled, "zarr_missing", lambda: 'zarr is not installed (pip install "ckpt_jax[xarray]")')
    out = tmp_path / "ensemble"
    assert main(cli_argv(out)) == 0
    printed = capsys.readouterr()
    assert printed.err == ""
    assert (
        'ckpt-jax ensemble: ensemble.zarr not written: zarr is not installed (pip install "ckpt_jax[xarray]")\n'
    ) in printed.out
    assert files(out) == ["chunk-000000.npz", "chunk-000001.npz", MANIFEST, "summary.json"]
    assert json.loads((out / "summary.json").read_text())["files"] == [MANIFEST, "chunk-*.npz", "summary.json"]


@pytest.mark.parametrize("kind", ["file", "link"])
def test_cli_zarr_path_that_is_not_a_folder_is_one_line_before_anything_runs(tmp_path, capsys, kind):
    out = tmp_path / "ensemble"
    out.mkdir()
    if kind == "file":
        (out / "ensemble.zarr").write_bytes(b"not a zarr group")
    else:
        (tmp_path / "elsewhere").mkdir()
        (out / "ensemble.zarr").symlink_to(tmp_path / "elsewhere")
    assert main(cli_argv(out)) == 2
    assert one_line(capsys) == (
        f"ckpt-jax: error: {out / 'ensemble.zarr'} is not a folder a run wrote: remove it, or use another --out"
    )
    assert files(out) == ["ensemble.zarr"]
