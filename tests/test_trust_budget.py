"""Budgets a big run is held to before it starts: one event budget for every kind of event,
and a work budget (events x jobs x runs) that a command passes only with ``--force``; and a
saved ensemble's chunks checked against the content hashes its manifest records."""

import jax
import numpy as np
import pytest

import ckpt_jax as cj
from ckpt_jax import _plan
from ckpt_jax.cli import main

# Two jobs of solo cycle 1 + 0.1 (at most 1.2 under contention) and a rare failure: to
# H = 1e10 they switch about 2e10 times, far beyond the int32 event budget, while their
# failures alone (about 2e4) are few.
H = 1e10


def _fleet(mtbf=None, **kwargs):
    return cj.Fleet([1.0, 1.0], [0.1, 0.1], mtbf=mtbf, restart=0.0 if mtbf is None else 1.0, **kwargs)


@pytest.mark.parametrize("mtbf", [None, 1e6], ids=["no failures", "failures"])
def test_one_event_budget_refuses_a_horizon_with_failures_as_without(mtbf):
    # Before, a fleet with failures was held only to half its failures' events: the same
    # horizon refused without failures ran (for hours) with them.
    with pytest.raises(
        ValueError, match=r"^until = 1e\+10 cannot finish within the event budget.*budget of 2147483647"
    ):
        _plan.check_horizon_events(_fleet(mtbf), H)
    with pytest.raises(ValueError, match=r"^until = 1e\+10 cannot finish within the event budget"):
        cj.simulate(
            _fleet(mtbf),
            cj.initial_state(_fleet(mtbf)),
            None,
            until=H,
            key=jax.random.key(0),
            save=cj.SaveAt(trace=False, jobs=True),
        )


def test_assess_refuses_such_a_horizon_naming_horizon_before_any_run():
    from ckpt_jax.assess import assess

    with pytest.raises(ValueError, match=r"^horizon = 1e\+10 cannot finish within the event budget"):
        assess(_fleet(1e6), horizon=H, key=jax.random.key(0), n_draws=2)


RARE = """
throughput = "shared"

[[groups]]
count = 2
size = 1
write = 0.1
mtbf = 1e6
compute = 1.0
"""


@pytest.mark.parametrize("command", ["assess", "design"])
def test_the_commands_refuse_such_a_horizon_naming_it_even_with_force(command, tmp_path, capsys):
    # The event budget is a limit (--force lifts the work budget only), checked first.
    path = tmp_path / "rare.toml"
    path.write_text(RARE)
    argv = [command, str(path), "--horizon", "1e10", "--no-progress", "--devices", "1", "--out", str(tmp_path / "o")]
    for extra in ([], ["--force"]):
        assert main(argv + extra) != 0
        err = _error(capsys)
        assert "horizon = 1e+10 cannot finish within the event budget" in err and "2147483647" in err, err


def test_a_horizon_within_the_budget_is_not_refused():
    _plan.check_horizon_events(_fleet(1e6), 1e6)
    _plan.check_horizon_events(_fleet(1e3), 1e8)  # frequent failures: still about 2e8 events


def test_the_event_estimate_counts_every_kind():
    # Per cycle of solo period 1.1 a firing and a write end; a two-level checkpoint adds the
    # snapshot's end (solo cycle 0.05 + max(1, 0.1)); per failure the failure and the
    # restart's end, and a recovery read its own end.
    assert _fleet(1e3 - 1.0).events(1100.0) == pytest.approx(2 * 2 * 1000 + 2 * 2 * 1.1)
    two_level = _fleet(1e3 - 1.0, snapshot=0.05)
    assert two_level.events(1050.0) == pytest.approx(3 * 2 * 1000 + 2 * 2 * 1.05)
    read = _fleet(1e3 - 1.0, recovery_read=0.1)
    assert read.events(1100.0) == pytest.approx(2 * 2 * 1000 + 3 * 2 * 1.1)


# -- the work budget: events x jobs x runs, refused beyond WORK_BUDGET unless forced


def test_work_beyond_the_budget_is_refused_naming_the_size_unless_forced():
    events, jobs, runs = 3e6, 100_000, 8  # a fleet file's count = 100000, 8 draws
    with pytest.raises(
        ValueError, match=r"2\.4e\+12 job-events.*groups\[0\]\.count = 99994.*budget of 1e\+10.*--force"
    ):
        _plan.check_work(events, jobs, runs, size="groups[0].count = 99994")
    assert _plan.check_work(events, jobs, runs, force=True) == pytest.approx(2.4e12)
    assert _plan.check_work(1e3, 32, 64) == pytest.approx(2.048e6)
    with pytest.raises(ValueError, match="force must be True or False"):
        _plan.check_work(1e3, 32, 64, force="yes")


BIG = """
throughput = "shared"

[[groups]]
count = 99994
size = 1
write = 0.5
mtbf = 20.0
compute = 4.0

[[groups]]
count = 2
size = 1
write = 0.5
mtbf = 20.0
compute = 4.0
"""


def _error(capsys) -> str:
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    return err


@pytest.mark.parametrize("command", ["assess", "design"])
def test_a_fleet_file_beyond_the_work_budget_is_refused_naming_its_count(command, tmp_path, capsys):
    path = tmp_path / "big.toml"
    path.write_text(BIG)
    code = main([command, str(path), "--quick", "--no-progress", "--devices", "1", "--out", str(tmp_path / "out")])
    err = _error(capsys)
    assert code != 0
    assert "groups[0].count = 99994" in err and "N = 99996 jobs" in err and "--force" in err, err
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


def test_ensemble_and_simulate_beyond_the_work_budget_are_refused_naming_jobs(tmp_path, capsys):
    out = tmp_path / "ens"
    code = main(["ensemble", "--fleets", "100000", "--jobs", "1000", "--fires", "50", "--out", str(out)])
    err = _error(capsys)
    assert code != 0 and "--jobs" in err and "--force" in err and "1e+10" in err, err
    assert not (out / "manifest.json").exists()
    code = main(["simulate", "--fleets", "1000", "--jobs", "10000", "--cycles", "50", "--out", str(tmp_path / "s")])
    err = _error(capsys)
    assert code != 0 and "--jobs" in err and "--force" in err, err


def test_force_is_an_option_of_every_command_that_runs_fleets():
    from ckpt_jax.cli import build_parser

    parser = build_parser()
    for argv in (
        ["assess", "f.toml", "--out", "o"],
        ["design", "f.toml", "--out", "o"],
        ["simulate", "--out", "o"],
        ["ensemble", "--fleets", "2", "--out", "o"],
    ):
        assert parser.parse_args([*argv, "--force"]).force is True
        assert parser.parse_args(argv).force is False


# -- saved ensembles: each chunk's content hash in the manifest, checked on load

N_JOBS, N_FIRES, N_FLEETS, CHUNK = 2, 3, 4, 2  # two chunks of two fleets


def _launches():
    return cj.ensemble.random_launches(np.full(N_JOBS, 0.8), np.full(N_JOBS, 0.2), key=jax.random.key(3))


def _run(out, **kwargs):
    return cj.ensemble.run_ensemble(_launches(), N_FLEETS, N_FIRES, chunk_size=CHUNK, out_dir=out, **kwargs)


def _edit_a_number(path):
    """Changes one number of a chunk file as a user would: load it, edit, save it again."""
    from ckpt_jax.ensemble import _write_npz

    with np.load(path, allow_pickle=False) as npz:
        arrays = {name: npz[name] for name in npz.files}
    arrays["end_times"] = arrays["end_times"].copy()
    arrays["end_times"][1, 0, 0] += 0.125
    with open(path, "wb") as handle:
        _write_npz(handle, arrays)


def _read_manifest(out):
    import json

    return json.loads((out / cj.ensemble.MANIFEST).read_text())


def _set_manifest(out, manifest):
    import json

    (out / cj.ensemble.MANIFEST).write_text(json.dumps(manifest, indent=2))


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    out = tmp_path_factory.mktemp("ensemble")
    return out, _run(out)


def _copy(saved, tmp_path):
    import shutil

    out, result = saved
    shutil.copytree(out, tmp_path / "copy")
    return tmp_path / "copy", result


def test_the_manifest_records_each_chunks_content_hash(saved):
    from ckpt_jax import _manifest as manifests

    out, result = saved
    hashes = _read_manifest(out)[manifests.HASHES]
    assert len(hashes) == 2 and all(isinstance(h, str) and len(h) == 64 for h in hashes)
    with np.load(out / "chunk-000001.npz") as npz:
        assert hashes[1] == manifests.content_hash({name: npz[name] for name in npz.files})
    assert manifests.HASHES not in result.manifest  # what the arrays are results of, not the record


@pytest.mark.parametrize("lazy", [False, True])
def test_a_number_edited_in_a_saved_chunk_is_refused_by_open_ensemble(saved, tmp_path, lazy):
    out, result = _copy(saved, tmp_path)
    np.testing.assert_array_equal(cj.open_ensemble(out, lazy=lazy).end_times.values, result.arrays["end_times"])
    _edit_a_number(out / "chunk-000001.npz")
    with pytest.raises(ValueError, match=r"chunk-000001\.npz does not match the content hash manifest\.json"):
        cj.open_ensemble(out, lazy=lazy).end_times.values  # noqa: B018  (lazily: read here)


def test_a_resume_recomputes_an_edited_chunk(saved, tmp_path):
    out, result = _copy(saved, tmp_path)
    _edit_a_number(out / "chunk-000001.npz")
    with pytest.warns(RuntimeWarning, match=r"chunk-000001\.npz does not match the content hash"):
        again = _run(out)
    assert (again.n_loaded, again.n_computed) == (1, 1)
    np.testing.assert_array_equal(again.arrays["end_times"], result.arrays["end_times"])
    assert _read_manifest(out) == _read_manifest(saved[0])  # the recomputed chunk's hash recorded again
    cj.open_ensemble(out)  # and read back


def test_a_chunk_saved_but_not_yet_recorded_is_recomputed_on_resume(saved, tmp_path):
    # A run stopped between saving a chunk and recording its hash.
    from ckpt_jax import _manifest as manifests

    out, result = _copy(saved, tmp_path)
    manifest = _read_manifest(out)
    manifest[manifests.HASHES][1] = None
    _set_manifest(out, manifest)
    with pytest.raises(ValueError, match=r"chunk-000001\.npz is not recorded in manifest\.json"):
        cj.open_ensemble(out)
    with pytest.warns(RuntimeWarning, match=r"chunk-000001\.npz is not recorded in manifest\.json"):
        again = _run(out)
    assert (again.n_loaded, again.n_computed) == (1, 1)
    np.testing.assert_array_equal(again.arrays["end_times"], result.arrays["end_times"])
    assert _read_manifest(out) == _read_manifest(saved[0])


def test_an_ensemble_saved_before_chunk_hashes_loads_with_a_warning(saved, tmp_path):
    from ckpt_jax import _manifest as manifests

    out, result = _copy(saved, tmp_path)
    manifest = _read_manifest(out)
    del manifest[manifests.HASHES]
    _set_manifest(out, manifest)
    with pytest.warns(RuntimeWarning, match="records no content hashes of its chunks.*read unchecked"):
        ds = cj.open_ensemble(out)
    np.testing.assert_array_equal(ds.end_times.values, result.arrays["end_times"])
    # A resume loads its chunks unchecked, once, and records their hashes.
    with pytest.warns(RuntimeWarning, match="records no content hashes of its chunks.*loaded unchecked"):
        again = _run(out)
    assert (again.n_loaded, again.n_computed) == (2, 0)
    assert _read_manifest(out) == _read_manifest(saved[0])


def test_a_malformed_hash_record_is_refused(saved, tmp_path):
    from ckpt_jax import _manifest as manifests

    out, _ = _copy(saved, tmp_path)
    manifest = _read_manifest(out)
    manifest[manifests.HASHES] = ["0" * 64]
    _set_manifest(out, manifest)
    with pytest.raises(ValueError, match=r"cannot be trusted: chunk_sha256 must be a list of 2 chunk hashes"):
        cj.open_ensemble(out)
    with pytest.raises(cj.ensemble.EnsembleMismatchError, match="chunk_sha256 must be a list of 2"):
        _run(out)
