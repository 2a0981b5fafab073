"""Results as labelled data (`ckpt_jax.labelled`): named dimensions, coordinates, units and the
run's parameters, values equal to the arrays bit for bit; saved ensembles opened by
`cj.open_ensemble`. Skipped where xarray is missing (``pip install "ckpt_jax[xarray]"``).

Every run has N = 4 jobs and K = 4 firings, as tests/test_ensemble.py, so one compile serves.
"""

import json
import os
import sys

import jax
import numpy as np
import pytest

import ckpt_jax as cj

xarray = pytest.importorskip("xarray")

N_JOBS, N_FIRES, N_FLEETS, CHUNK = 4, 4, 10, 4  # 3 chunks; the last holds 2 fleets
EVERYTHING = cj.SaveAt(writers=True, gaps=True, jobs=True, power=True)
LEAN = cj.SaveAt(trace=False, writers=True, gaps=True, jobs=True)


def launches(compute=0.8):
    return cj.ensemble.random_launches(np.full(N_JOBS, compute), np.full(N_JOBS, 0.2), key=jax.random.key(7), cap=3.0)


def run(out_dir=None, **kwargs):
    kwargs = {"chunk_size": CHUNK, "progress": False, "out_dir": out_dir, **kwargs}
    return cj.ensemble.run_ensemble(launches(), N_FLEETS, N_FIRES, **kwargs)


def same_bits(variable, array) -> bool:
    array = np.asarray(array)
    values = np.asarray(variable.values)
    return values.dtype == array.dtype and values.shape == array.shape and values.tobytes() == array.tobytes()


@pytest.fixture(scope="module")
def traced():
    """A batch of 3 fleets of different jobs, run with every observer."""
    fleet = cj.Fleet(
        np.array([[0.8, 0.7, 0.9, 0.8]] * 3), np.full((3, N_JOBS), 0.2), cap=3.0, storage_policy="weighted"
    )
    state = cj.random_state(fleet, jax.random.split(jax.random.key(1), 3))
    return fleet, cj.simulate(fleet, state, N_FIRES, save=EVERYTHING)


# -- to_xarray -----------------------------------------------------------------------------------
def test_a_trace_has_named_dimensions_coordinates_units_and_equal_values(traced):
    fleet, trace = traced
    ds = trace.to_xarray(fleet, groups=["a", "a", "b", "b"], attrs={"seed": 1})
    assert ds.fire_times.dims == ("fleet", "job", "cycle") and ds.end_times.dims == ("fleet", "job", "cycle")
    assert ds.writers_time.dims == ("fleet", "writers") and ds.writers_window.dims == ("fleet", "bound")
    assert ds.gaps.dims == ("fleet", "cycle") and ds.jobs_writes.dims == ("fleet", "job")
    assert ds.power_time.dims == ("fleet", "bin") and ds.power_mean.dims == ("fleet",)
    assert ds.sizes == {"fleet": 3, "job": N_JOBS, "cycle": N_FIRES, "writers": N_JOBS + 1, "bound": 2} | {
        "bin": trace.power.time.shape[-1],
        "edge": trace.power.edges.shape[-1],
    }
    np.testing.assert_array_equal(ds.writers, np.arange(N_JOBS + 1))  # the writer counts 0..N
    np.testing.assert_array_equal(ds.job, np.arange(N_JOBS))
    assert ds.group.dims == ("job",) and list(ds.group.values) == ["a", "a", "b", "b"]
    assert list(ds.bound.values) == ["start", "stop"]
    # Units and meanings.
    assert ds.fire_times.attrs["units"] == ds.gaps.attrs["units"] == "time" and "units of T and d" in ds.attrs["units"]
    assert ds.power_mean.attrs["units"] == "job draw" and "units" not in ds.jobs_writes.attrs
    assert ds.gaps.attrs["long_name"] == "smallest phase gap"
    # The run's parameters: uniform ones as attributes, per-job ones as coordinates.
    assert ds.attrs["cap"] == 3.0 and ds.attrs["d"] == 0.2 and ds.attrs["storage_policy"] == "weighted"
    assert ds.attrs["seed"] == 1 and ds.attrs["ckpt_jax_version"] == cj.__version__
    assert "T" not in ds.attrs and ds["T"].dims == ("fleet", "job") and ds["T"].attrs["long_name"].startswith("T_i")
    np.testing.assert_array_equal(ds["T"], np.asarray(fleet.compute))
    # Every value is the trace's, bit for bit.
    expected = {"fire_times": trace.fire_times, "ok": trace.ok, "status": trace.status, "gaps": trace.gaps}
    for prefix, stats in (("writers", trace.writers), ("jobs", trace.jobs), ("power", trace.power)):
        expected.update({f"{prefix}_{name}": value for name, value in stats._asdict().items()})
    for name, value in expected.items():
        assert same_bits(ds[name], value), name


def test_observer_results_alone_and_a_single_fleet(traced):
    fleet, trace = traced
    writers = trace.writers.to_xarray()
    assert set(writers.data_vars) == {"writers_time", "writers_window", "writers_excursions", "writers_max"}
    assert same_bits(writers.writers_excursions, trace.writers.excursions)
    jobs = trace.jobs.to_xarray(groups=[0, 0, 1, 1])
    assert jobs.jobs_compute_time.dims == ("fleet", "job") and list(jobs.group.values) == [0, 0, 1, 1]
    assert float(jobs.jobs_write_time.groupby("group").sum().sel(group=1)[0]) == pytest.approx(
        float(np.asarray(trace.jobs.write_time)[0, 2:].sum())
    )
    power = trace.power.to_xarray(fleet)
    assert same_bits(power.power_edges, trace.power.edges) and power.attrs["power_policy"] == "maxmin"
    one = trace[1].to_xarray()  # batch shape (): no fleet dimension
    assert one.fire_times.dims == ("job", "cycle") and "fleet" not in one.dims
    assert same_bits(one.gaps, np.asarray(trace.gaps)[1])
    named = trace.to_xarray(batch_dims="draw")
    assert named.gaps.dims == ("draw", "cycle")


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"groups": ["a", "b"]}, r"groups must have one label per job, shape \(4,\)"),
        ({"batch_dims": ("fleet", "job")}, "batch_dims must name the 1 batch axes"),
        ({"fleet": "fleet"}, "fleet must be None or the ckpt_jax.Fleet that was run"),
        ({"fleet": cj.Fleet(np.ones(3), np.ones(3))}, r"fleet must be the fleet that was run: .* 3 jobs"),
        ({"attrs": [("seed", 1)]}, "attrs must be None or a dict"),
    ],
)
def test_bad_labels_are_refused_naming_the_argument(traced, kwargs, match):
    with pytest.raises(ValueError, match=match):
        traced[1].to_xarray(**kwargs)


def test_a_design_history_over_steps():
    history = cj.design.History(
        objective=np.array([0.3, 0.2, 0.1]),
        stderr=np.array([0.01, 0.01, 0.02]),
        grad_norm=np.array([1.0, 0.5, 0.2]),
        intervals=np.arange(12.0).reshape(3, N_JOBS),
    )
    ds = history.to_xarray(groups=[0, 0, 1, 1])
    assert ds.objective.dims == ("step",) and ds.intervals.dims == ("step", "job") and "offsets" not in ds
    np.testing.assert_array_equal(ds.step, np.arange(3))
    assert same_bits(ds.intervals, history.intervals) and ds.intervals.attrs["units"] == "time"
    assert list(ds.group.values) == [0, 0, 1, 1]


def test_without_xarray_to_xarray_says_what_to_install(traced, monkeypatch):
    monkeypatch.setitem(sys.modules, "xarray", None)  # import xarray now raises ImportError
    for call in (traced[1].to_xarray, traced[1].writers.to_xarray, lambda: cj.open_ensemble(".")):
        with pytest.raises(ImportError, match=r'pip install "ckpt_jax\[xarray\]"'):
            call()


# -- ensembles ---------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    out = tmp_path_factory.mktemp("ensemble")
    return out, run(out, save=EVERYTHING, jitter=0.05, key=jax.random.key(8), config={"seed": 8})


def lazy_modes():
    try:
        import dask  # noqa: F401
    except ImportError:
        return [False, pytest.param(True, marks=pytest.mark.skip(reason="dask is not installed"))]
    return [False, True]


@pytest.mark.parametrize("lazy", lazy_modes())
def test_open_ensemble_equals_run_ensemble_bit_for_bit(saved, lazy):
    out, result = saved
    before = {p.name: p.stat().st_mtime_ns for p in out.iterdir()}
    ds = cj.open_ensemble(out, lazy=lazy)
    assert all(hasattr(ds[name].variable._data, "dask") == lazy for name in result.arrays)
    assert set(ds.data_vars) == set(result.arrays) | {"ok", "status"}
    for name, value in {**result.arrays, "ok": result.ok, "status": result.status}.items():
        assert same_bits(ds[name], value), name
    np.testing.assert_array_equal(ds.fleet, np.arange(N_FLEETS))
    # The manifest as attributes: the whole of it, and its parameters by name.
    manifest = json.loads((out / cj.ensemble.MANIFEST).read_text())
    manifest.pop("chunk_sha256")  # the chunks' content hashes: a record, not what they are results of
    assert json.loads(ds.attrs["manifest"]) == manifest and ds.attrs["fingerprint"] == result.fingerprint
    assert (ds.attrs["n_fleets"], ds.attrs["n_fires"], ds.attrs["chunk_size"]) == (N_FLEETS, N_FIRES, CHUNK)
    assert (ds.attrs["T"], ds.attrs["d"], ds.attrs["cap"], ds.attrs["jitter"]) == (0.8, 0.2, 3.0, 0.05)
    assert ds.attrs["seed"] == 8
    assert ds.identical(result.to_xarray())  # the in-memory result labels the same way
    assert {p.name: p.stat().st_mtime_ns for p in out.iterdir()} == before  # nothing written


def test_a_notebook_cell_plots_a_saved_ensemble(saved, tmp_path):
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out, result = saved
    ds = cj.open_ensemble(out)
    smallest = ds.gaps.min("cycle")
    counts, _, _ = smallest.plot.hist()
    assert counts.sum() == np.isfinite(np.nanmin(result.gaps, axis=1)).sum() > 0
    axes = plt.gca()
    assert axes.get_xlabel() == "smallest phase gap [time]"
    plt.figure()
    ds.gaps.mean("fleet").plot()
    assert plt.gca().get_xlabel() == "cycle"
    plt.close("all")


def test_a_saved_ensemble_shared_as_zarr_opens_without_ckpt_jax(saved, tmp_path):
    pytest.importorskip("zarr")
    out, result = saved
    cj.open_ensemble(out, groups=["a", "a", "b", "b"]).to_zarr(tmp_path / "storm.zarr")
    shared = xarray.open_zarr(tmp_path / "storm.zarr").load()
    assert same_bits(shared.gaps, result.gaps) and same_bits(shared.writers_time, result.writers.time)
    assert shared.attrs["fingerprint"] == result.fingerprint
    assert list(shared.bound.values) == ["start", "stop"] and list(shared.group.values) == ["a", "a", "b", "b"]


def test_open_ensemble_refuses_an_incomplete_or_tampered_ensemble(tmp_path):
    with pytest.raises(FileNotFoundError, match="holds no manifest.json"):
        cj.open_ensemble(tmp_path)
    run(tmp_path, save=LEAN)
    chunk = tmp_path / "chunk-000001.npz"
    zero, one = (tmp_path / "chunk-000000.npz").read_bytes(), chunk.read_bytes()
    chunk.write_bytes(zero)
    with pytest.raises(ValueError, match="chunk-000001.npz holds chunk 0, not chunk 1"):
        cj.open_ensemble(tmp_path)
    chunk.write_bytes(one[:100])
    with pytest.raises(ValueError, match="chunk-000001.npz is unreadable"):
        cj.open_ensemble(tmp_path)
    os.unlink(chunk)
    with pytest.raises(ValueError, match="chunk-000001.npz is missing: the ensemble is not complete"):
        cj.open_ensemble(tmp_path)
    assert not chunk.exists()  # a reader never removes or recomputes anything
    assert run(tmp_path, save=LEAN).n_computed == 1  # a rerun completes it
    assert cj.open_ensemble(tmp_path).sizes["fleet"] == N_FLEETS


@pytest.mark.parametrize(
    ("field", "value", "match"),
    [
        ("n_fleets", N_FLEETS // 2, "its fields do not match its fingerprint"),  # before: half the fleets
        ("n_fleets", 10**18, "its fields do not match its fingerprint"),  # before: MemoryError
        ("chunk_size", 0, r"chunk_size must be an integer >= 1, got 0"),  # before: range() arg 3 ...
        ("n_fires", 99, "its fields do not match its fingerprint"),
    ],
)
def test_open_ensemble_refuses_an_edited_manifest(tmp_path, field, value, match):
    run(tmp_path, save=LEAN)
    path = tmp_path / "manifest.json"
    manifest = json.loads(path.read_text())
    manifest[field] = value
    path.write_text(json.dumps(manifest))
    with pytest.raises(ValueError, match=rf"manifest.json cannot be trusted: {match}"):
        cj.open_ensemble(tmp_path)


def test_open_ensemble_bad_lazy_is_a_value_error(saved):
    with pytest.raises(ValueError, match="lazy must be None, True or False"):
        cj.open_ensemble(saved[0], lazy="yes")


@pytest.fixture(scope="module")
def cli_saved(tmp_path_factory):
    """One ``ckpt-jax ensemble`` run of 6 fleets in chunks of 4: (its folder, its argv less --out)."""
    from ckpt_jax.cli import main

    argv = ["ensemble", "--fleets", "6", "--jobs", str(N_JOBS), "--fires", str(N_FIRES), "--chunk-size", str(CHUNK)]
    argv += ["--load", "0.8", "--no-progress", "--save", "writers,gaps,jobs"]
    out = tmp_path_factory.mktemp("cli") / "storm"
    assert main([*argv, "--out", str(out)]) == 0
    return out, argv


def chunk_arrays(out) -> dict:
    """The arrays of a CLI ensemble's two chunk files, concatenated, by their dataset names."""
    parts = {}
    for index in range(2):
        with np.load(out / f"chunk-{index:06d}.npz") as chunk:
            for name in set(chunk.files) - {"chunk_index", "fingerprint"}:
                parts.setdefault("gaps" if name == "smallest_gap" else name, []).append(chunk[name])
    return {name: np.concatenate(values) for name, values in parts.items()}


def test_what_the_cli_writes_opens_in_one_line(cli_saved):
    out, _ = cli_saved
    ds = cj.open_ensemble(out)
    assert same_bits(ds.gaps, chunk_arrays(out)["gaps"])  # the CLI's smallest_gap, named gaps
    assert ds.gaps.dims == ("fleet", "cycle") and ds.order_changed.dims == ("fleet", "cycle")
    assert ds.writers_time.dims == ("fleet", "writers") and ds.attrs["seed"] == 0
    assert ds.attrs["fingerprint"] == json.loads((out / "summary.json").read_text())["fingerprint"]
    assert ds.gaps.min("cycle").sizes == {"fleet": 6}


def assert_zarr_is_the_ensemble(out):
    shared = xarray.open_zarr(out / "ensemble.zarr")
    xarray.testing.assert_identical(shared, cj.open_ensemble(out))  # values, dims, coordinates, attrs
    arrays = chunk_arrays(out)
    assert set(shared.data_vars) == set(arrays)
    for name, value in arrays.items():
        assert same_bits(shared[name], value), name
    assert shared.gaps.chunks == ((CHUNK, 2), (N_FIRES,))  # one zarr chunk per chunk file
    return shared


def test_the_cli_writes_ensemble_zarr_equal_to_the_chunks_bit_for_bit(cli_saved):
    pytest.importorskip("zarr")
    out, _ = cli_saved
    shared = assert_zarr_is_the_ensemble(out)
    assert "ensemble.zarr" in json.loads((out / "summary.json").read_text())["files"]
    assert shared.writers_window.dims == ("fleet", "bound") and list(shared.bound.values) == ["start", "stop"]
    assert shared.gaps.attrs["units"] == "time" and shared.attrs["seed"] == 0
    # A reader without ckpt_jax: xarray and zarr alone.
    script = (
        "import hashlib, json, sys; sys.modules['ckpt_jax'] = None; import xarray; "
        "ds = xarray.open_zarr(sys.argv[1]).load(); "
        "print(json.dumps([ds.attrs['fingerprint'], hashlib.sha256(ds.gaps.values.tobytes()).hexdigest()]))"
    )
    import hashlib
    import subprocess

    done = subprocess.run(
        [sys.executable, "-c", script, str(out / "ensemble.zarr")], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    digest = hashlib.sha256(chunk_arrays(out)["gaps"].tobytes()).hexdigest()
    assert json.loads(done.stdout) == [shared.attrs["fingerprint"], digest]


def test_a_resume_or_a_restart_keeps_ensemble_zarr_the_ensemble(cli_saved, tmp_path, monkeypatch, capsys):
    pytest.importorskip("zarr")
    import shutil

    from ckpt_jax.cli import main

    out = tmp_path / "storm"
    shutil.copytree(cli_saved[0], out)
    argv = [*cli_saved[1], "--out", str(out)]
    (out / ".ensemble.zarr.killed.tmp").mkdir()  # as a write killed with -9 leaves it
    assert main(argv) == 0  # a resume of a complete run: every chunk loaded, the zarr rewritten
    assert json.loads((out / "summary.json").read_text())["chunks_loaded"] == 2
    assert_zarr_is_the_ensemble(out)
    assert sorted(p.name for p in out.iterdir() if p.name.startswith(".")) == [".lock"]

    # Interrupted while writing the zarr: the older one stays whole, nothing half written is left.
    to_zarr = xarray.Dataset.to_zarr

    def interrupted(self, store, **kwargs):
        to_zarr(self, store, **kwargs)
        raise KeyboardInterrupt

    monkeypatch.setattr(xarray.Dataset, "to_zarr", interrupted)
    assert main(argv) == 130
    monkeypatch.undo()
    assert_zarr_is_the_ensemble(out)
    assert sorted(p.name for p in out.iterdir() if p.name.startswith(".")) == [".lock"]

    assert main([*argv, "--restart", "--seed", "3"]) == 0  # another ensemble: its own zarr
    assert assert_zarr_is_the_ensemble(out).attrs["seed"] == 3
    capsys.readouterr()


FLEET_FILE = """
{units}
[design]
bounds = [{low}, {high}]
horizon = {horizon}
[[groups]]
name = "small"
count = 3
{small}
[[groups]]
name = "big"
count = 1
{big}
"""
PLAIN = {
    "units": 'throughput = "shared"',
    "low": "0.5",
    "high": "50.0",
    "horizon": "100.0",
    "small": "size = 1\nwrite = 0.2\ncompute = 0.8\nmtbf = 100.0",
    "big": "size = 2\nwrite = 0.4\ncompute = 1.6\nmtbf = 50.0",
}
WITH_UNITS = {
    "units": 'time_unit = "min"\n[storage]\npeak = "100 GB/s"',
    "low": '"1 min"',
    "high": '"10 h"',
    "horizon": '"2 day"',
    "small": 'gpus = 8\ncheckpoint = "40 GB"\ninterval = "4 min"\nmtbf = "1 day"',
    "big": 'gpus = 64\ncheckpoint = "500 GB"\ninterval = "30 min"\nmtbf = "12 h"',
}


@pytest.mark.parametrize("fields, time_units", [(PLAIN, "time"), (WITH_UNITS, "s")])
def test_a_fleet_file_names_the_job_groups(fields, time_units):
    spec = cj.fleetfile.loads(FLEET_FILE.format(**fields), "groups.toml")
    fleet = spec.fleet(failures=False, dtype=np.float64)
    trace = cj.simulate(fleet, cj.initial_state(fleet), 2, save=cj.SaveAt(jobs=True))
    ds = trace.to_xarray(fleet, groups=spec)
    assert list(ds.group.values) == ["small"] * 3 + ["big"] and ds.attrs["fleet_file"] == "groups.toml"
    assert ds.fire_times.attrs["units"] == ds.jobs_write_time.attrs["units"] == time_units
    np.testing.assert_array_equal(ds["T"], np.asarray(fleet.compute))  # per job: a coordinate
    per_group = ds.jobs_writes.groupby("group").sum()
    assert per_group.sel(group="big") == int(np.asarray(trace.jobs.writes)[3])


# -- assessments ---------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def assessed():
    """A small assessment of two groups under a power cap (so every estimate is present)."""
    fleet = cj.Fleet(
        np.array([0.8, 0.8, 1.6, 1.6]),
        np.array([0.2, 0.2, 0.4, 0.4]),
        size=np.array([1.0, 1.0, 2.0, 2.0]),
        cap=4.0,
        mtbf=30.0,
        restart=0.5,
    )
    groups = {"small": [0, 1], "big": [2, 3]}
    return cj.assess.assess(fleet, horizon=20.0, key=jax.random.key(3), n_draws=3, groups=groups, gpu_power=700.0)


def test_an_assessment_has_groups_causes_units_and_equal_values(assessed, tmp_path):
    ds = assessed.to_xarray(attrs={"seed": 3})
    causes = list(cj.assess.CAUSES)
    assert list(ds.group.values) == ["small", "big", "fleet"] and list(ds.cause.values) == causes
    assert ds.sizes == {"group": 3, "cause": len(causes), "writers": 5, "bin": assessed.power_time.size, "edge": 102}
    assert ds.goodput_mean.dims == ("group",) and ds.lost_fraction_low.dims == ("group", "cause")
    assert ds.writer_time.dims == ("writers",) and ds.power_time.dims == ("bin",) and ds.power_mean_high.dims == ()
    for name in ("small", "big", "fleet"):
        for part in ("mean", "low", "high"):
            assert ds[f"goodput_{part}"].sel(group=name) == getattr(assessed.goodput[name], part)
            for cause in causes:
                cell = dict(group=name, cause=cause)
                assert ds[f"lost_fraction_{part}"].sel(cell) == getattr(assessed.losses[name][cause], part)
                lost = getattr(assessed.gpu_hours_lost_per_day[name][cause], part)
                assert ds[f"gpu_hours_lost_per_day_{part}"].sel(cell) == lost
        assert ds.gpus.sel(group=name) == assessed.gpus[name]
    for name in ("writer_time", "independent_writer_time", "power_time", "power_edges"):
        assert same_bits(ds[name], getattr(assessed, name)), name
    for name in ("saturated_time", "power_mean", "power_max", "cap_time", "throttled"):
        assert [float(ds[f"{name}_{part}"]) for part in ("mean", "low", "high")] == list(getattr(assessed, name))
    # Per GPU, the goodput and the losses add up to one (a check on the layout, not the numbers).
    np.testing.assert_allclose(ds.goodput_mean + ds.lost_fraction_mean.sum("cause"), 1.0, rtol=1e-9)
    assert (
        ds.goodput_mean.attrs["units"] == "1" and ds.gpu_hours_lost_per_day_mean.attrs["units"] == "GPU-hours per day"
    )
    assert ds.power_mean_mean.attrs["units"] == ds.power_edges.attrs["units"] == "W"
    assert ds.gpus.attrs["units"] == "GPU" and "95% CI low" in ds.goodput_low.attrs["long_name"]
    assert (ds.attrs["n_draws"], ds.attrs["horizon"], ds.attrs["power_unit"], ds.attrs["seed"]) == (3, 20.0, "W", 3)
    assert ds.attrs["saturation_writers"] == assessed.saturation_writers
    assert json.loads(ds.attrs["groups"]) == {"small": [0, 1], "big": [2, 3]}
    pytest.importorskip("zarr")
    cj.labelled.write_zarr(ds, tmp_path / "assess.zarr")
    xarray.testing.assert_identical(xarray.open_zarr(tmp_path / "assess.zarr").load(), ds)
    with pytest.raises(ValueError, match="attrs must be None or a dict"):
        assessed.to_xarray(attrs=[("seed", 3)])


def test_an_assessment_without_a_cap_has_no_cap_time(assessed):
    ds = assessed._replace(cap_time=None, power_unit="gpu").to_xarray()
    assert not any(name.startswith("cap_time") for name in ds.data_vars)
    assert ds.power_max_mean.attrs["units"] == "gpu"
