"""Fleet files with the failure laws and launch modes of docs/model.md §1f: ``failure_shape``,
``failure_trace`` (a CSV failure log) and the ``[launch]`` table, and `cj.design.start_state`,
the one function every launch goes through."""

import dataclasses
from pathlib import Path

import jax
import numpy as np
import pytest

import ckpt_jax as cj
from ckpt_jax.design import Launch, staggered_positions, start_state
from ckpt_jax.fleetfile import FleetFileError, LaunchSettings, dumps, load, loads

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"

BASE = """
throughput = "shared"
{top}

[[groups]]
name = "a"
count = 2
size = 1.0
write = 0.5
mtbf = 20.0
restart = 0.5
compute = 4.0
{group}

[[groups]]
name = "b"
count = 1
size = 2.0
write = 1.0
mtbf = 30.0
compute = 4.0
"""


UNITS = """
time_unit = "h"
{top}

[storage]
peak = "10 GB/s"

[[groups]]
name = "a"
count = 2
gpus = 8
checkpoint = "50 GB"
mtbf = "20 h"
restart = "30 min"
interval = "4 h"
{group}

[[groups]]
name = "b"
count = 1
gpus = 16
checkpoint = "100 GB"
mtbf = "30 h"
interval = "4 h"
"""


def _file(tmp_path, top="", group="", trace=None, name="log.csv", units=False):
    if trace is not None:
        (tmp_path / name).write_text(trace)
    path = tmp_path / "fleet.toml"
    path.write_text((UNITS if units else BASE).format(top=top, group=group))
    return path


def _same(spec, again):
    assert dataclasses.replace(again, path=spec.path) == spec


def test_failure_shape_top_level_and_per_group(tmp_path):
    spec = load(_file(tmp_path, top="failure_shape = 0.7", group="failure_shape = 1.5"))
    assert [g.failure_shape for g in spec.groups] == [1.5, 0.7]
    fleet = spec.fleet(dtype=np.float64)
    np.testing.assert_array_equal(np.asarray(fleet.failure_shape), [1.5, 1.5, 0.7])
    assert fleet.has_weibull_failures
    _same(spec, loads(dumps(spec), trace_anywhere=True))
    plain = load(_file(tmp_path)).fleet(dtype=np.float64)
    assert not plain.has_weibull_failures and not plain.has_failure_times


def test_failure_trace_by_group_and_job_with_a_unit(tmp_path):
    trace = "time [min],group,job\n90,a,1\n30,b,0\n60,a,1\n"
    spec = load(_file(tmp_path, top='failure_trace = "log.csv"', trace=trace, units=True))
    # A file with units: times in seconds.
    assert spec.failure_times == ((), (3600.0, 5400.0), (1800.0,))
    fleet = spec.fleet(dtype=np.float64)
    np.testing.assert_array_equal(np.asarray(fleet.failure_times), [[np.inf] * 2, [3600.0, 5400.0], [1800.0, np.inf]])
    _same(spec, loads(dumps(spec), trace_anywhere=True))
    out = cj.simulate(fleet, cj.initial_state(fleet), None, until=7200.0, save=cj.SaveAt(trace=False, jobs=True))
    np.testing.assert_array_equal(out.jobs.failures, [0, 2, 1])


def test_failure_trace_by_job_in_the_file_time_unit_and_plain(tmp_path):
    spec = load(_file(tmp_path, top='failure_trace = "log.csv"', trace="job,time\n2,0.5\n", units=True))
    assert spec.failure_times == ((), (), (1800.0,))
    plain = load(_file(tmp_path, top='failure_trace = "log.csv"', trace="time,job\n2.5,0\n1.0,0\n"))
    assert plain.failure_times == ((1.0, 2.5), (), ())


@pytest.mark.parametrize(
    ("header", "message"),
    [
        ("time [0 h],job", "the time column's unit is not a unit of time .*a unit holds no number"),  # was: all at 0
        ("time [1/60 h],job", "a unit holds no number"),
        ("time [2h],job", "a unit holds no number"),
        ("time,job,job", "the header has the column 'job' twice"),  # was: the second ignored
        ("time,group,job,group", "the header has the column 'group' twice"),
    ],
)
def test_a_trace_header_with_a_number_in_its_unit_or_a_column_twice_is_refused(tmp_path, header, message):
    trace = header + "\n" + ",".join("a" if name == "group" else "0" for name in header.split(",")) + "\n"
    with pytest.raises(FleetFileError, match=f"failure_trace: .*{message}"):
        load(_file(tmp_path, top='failure_trace = "log.csv"', trace=trace, units=True))


def test_a_trace_is_read_only_from_the_fleet_files_folder_unless_the_user_gives_it(tmp_path):
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "log.csv").write_text("time,job\n1.0,0\n")
    folder = tmp_path / "fleets"
    folder.mkdir()
    (folder / "sub").mkdir()
    (folder / "sub" / "log.csv").write_text("time,job\n1.0,0\n")
    (folder / "link.csv").symlink_to(outside / "log.csv")
    fleet = lambda trace: _file(folder, top=f"failure_trace = {str(trace)!r}")  # noqa: E731
    assert load(fleet("sub/log.csv")).failure_times[0] == (1.0,)  # below the folder: read
    for trace, why in [
        (outside / "log.csv", "no absolute path"),
        ("../elsewhere/log.csv", "no absolute path, no \\.\\."),
        ("sub/../../elsewhere/log.csv", "no absolute path, no \\.\\."),
        ("link.csv", "links out of the fleet file's folder"),
    ]:
        with pytest.raises(FleetFileError, match=f"failure_trace: .*{why}"):
            load(fleet(trace))
        # The user's own path (load's argument, or compare --set failure_trace=PATH) is read.
        assert load(fleet(trace), trace_anywhere=True).failure_times[0] == (1.0,)
    spec = load(fleet("sub/log.csv"))
    assert spec.override({"failure_trace": str(outside / "log.csv")}).failure_times[0] == (1.0,)


def test_a_trace_that_is_a_fifo_or_a_device_is_refused_without_reading_it(tmp_path):
    import os

    os.mkfifo(tmp_path / "log.csv")  # before: read_text blocked for ever on it
    with pytest.raises(FleetFileError, match="failure_trace: .*log.csv is not a regular file"):
        load(_file(tmp_path, top='failure_trace = "log.csv"'))
    (tmp_path / "dir.csv").mkdir()
    with pytest.raises(FleetFileError, match="failure_trace: .*dir.csv is not a regular file"):
        load(_file(tmp_path, top='failure_trace = "dir.csv"'))
    with pytest.raises(FleetFileError, match="failure_trace: /dev/zero is not a regular file"):
        load(_file(tmp_path, top='failure_trace = "/dev/zero"'), trace_anywhere=True)


@pytest.mark.parametrize(
    "trace",
    [
        "root:x:0:0:SECRET:/root:/bin/bash\n",  # a header that is none of the columns
        "time,SECRET\n1,0\n",
        "time,job\nSECRET,0\n",
        "time,job\n1,SECRET\n",
        "time,group\n1,SECRET\n",
        "time [SECRET],job\n1,0\n",
        "time,job\n1,0\n1,0,SECRET\n",
        "time,time [SECRET]\n1,0\n",
    ],
)
def test_no_trace_error_quotes_the_files_content(tmp_path, trace):
    with pytest.raises(FleetFileError, match="failure_trace") as raised:
        load(_file(tmp_path, top='failure_trace = "log.csv"', trace=trace))
    assert "SECRET" not in str(raised.value)


def test_the_example_trace_loads():
    spec = load(EXAMPLES / "fleet_failures.toml")
    assert spec.failure_trace is not None and spec.launch == LaunchSettings("staggered", 30.0)
    assert sum(len(times) for times in spec.failure_times) >= 3
    spec.fleet(dtype=np.float64)


@pytest.mark.parametrize(
    "top, group, trace, message",
    [
        ('failure_trace = "log.csv"', "", "time,group\n1.0,a\n", "log.csv, row 2, column 'group': group 'a' has 2"),
        (
            'failure_trace = "log.csv"',
            "",
            "time,group\n1.0,c\n",
            "row 2, column 'group': names no group (groups: a, b)",
        ),
        ('failure_trace = "log.csv"', "", "time,job\n1.0,3\n", "row 2, column 'job': must be a job index from 0 to 2"),
        ('failure_trace = "log.csv"', "", "time,job\n-1,0\n", "row 2, column 'time': must be a time >= 0"),
        ('failure_trace = "log.csv"', "", "time,job\n1.0,0\n2,0,3\n", "row 3: 3 values for 2 columns"),
        ('failure_trace = "log.csv"', "", "time,job\n1.0,0\n1,0\n", "row 3: the job fails at that time twice"),
        ('failure_trace = "log.csv"', "", "when,job\n1.0,0\n", "the header needs one time column"),
        ('failure_trace = "log.csv"', "", "time,job,rack\n1.0,0,r\n", "the columns must be time and group and/or job"),
        ('failure_trace = "log.csv"', "", "time [parsec],job\n1,0\n", "the time column's unit is not a unit of time"),
        ('failure_trace = "log.csv"', "", "time [h],job\n1,0\n", "failure_trace: its time column has a unit"),
        ('failure_trace = "missing.csv"', "", None, "cannot read"),
        ("failure_trace = 3", "", None, "failure_trace: must be the path of a CSV file"),
        ('failure_trace = "log.csv"', "failure_shape = 0.7", "time,job\n1,0\n", "groups[0].failure_shape: must be 1"),
        ("failure_shape = 0", "", None, "failure_shape: must be a finite number >= 0.1 and <= 100"),
        ("", "failure_shape = true", None, "groups[0].failure_shape: must be a finite number >= 0.1"),
        ('[launch]\nmode = "later"', "", None, "launch.mode: must be one of 'random', 'together', 'staggered'"),
        ('[launch]\nmode = "staggered"', "", None, "launch.stagger: missing"),
        ('[launch]\nmode = "together"\nstagger = 1.0', "", None, "launch.stagger: only counts with mode"),
        ('[launch]\nmode = "staggered"\nstagger = -1.0', "", None, "launch.stagger: must be a finite number > 0"),
        ('[launch]\nmoda = "random"', "", None, "launch.moda: unknown key"),
        ('[design]\nlaunch = "random"\n[launch]\nmode = "together"', "", None, "design.launch: 'random' disagrees"),
    ],
)
def test_bad_failure_and_launch_fields_name_file_and_field(tmp_path, top, group, trace, message):
    with pytest.raises(FleetFileError, match="fleet file .*fleet.toml") as raised:
        load(_file(tmp_path, top=top, group=group, trace=trace))
    assert message in str(raised.value)


# -- launches -----------------------------------------------------------------------------------


def test_launch_table_round_trips_and_sets_the_design_launch(tmp_path):
    spec = load(_file(tmp_path, top='[launch]\nmode = "staggered"\nstagger = 0.25'))
    assert spec.launch == LaunchSettings("staggered", 0.25)
    assert spec.launch_of() == Launch("staggered", 0.25) == spec.launch_of(design=True)
    _same(spec, loads(dumps(spec), trace_anywhere=True))
    together = load(_file(tmp_path, top='[launch]\nmode = "together"'))
    assert together.launch_of(design=True) == Launch("together")
    plain = load(_file(tmp_path, top='[design]\nlaunch = "synchronous"'))
    assert plain.launch_of() == Launch() and plain.launch_of(design=True) == "synchronous"


def test_start_state_modes():
    fleet = cj.Fleet([4.0, 4.0, 4.0, 3.0], [1.0] * 4, active=[True, False, True, True])
    together = start_state(fleet, Launch("together"))
    for name in ("phase", "remaining"):
        np.testing.assert_array_equal(getattr(together, name), getattr(cj.initial_state(fleet), name))
        np.testing.assert_array_equal(getattr(start_state(fleet, "synchronous"), name), getattr(together, name))
    random = start_state(fleet, Launch(), jax.random.key(4))
    np.testing.assert_array_equal(random.remaining, cj.random_state(fleet, jax.random.key(4)).remaining)
    # Staggered by 1/2: the active jobs 0, 2, 3 start their compute 1/2 apart, t = 0 being the
    # last one's launch; they fire first at T - 1, T - 1/2 and T, each computing at t = 0.
    staggered = start_state(fleet, Launch("staggered", 0.5))
    out = cj.simulate(fleet, staggered, n_fires=2)
    np.testing.assert_array_equal(np.asarray(out.fire_times)[[0, 2, 3], 0], [3.0, 3.5, 3.0])
    np.testing.assert_array_equal(np.asarray(staggered.phase)[[0, 2, 3]], 0)
    # A stagger longer than a cycle wraps around it.
    wrapped = staggered_positions(fleet, 3.0)
    np.testing.assert_allclose(wrapped[[0, 2, 3]], [(1 + 6) % 5, (1 + 3) % 5, 1.0])


def test_staggered_launch_of_a_two_level_fleet():
    # Two-level checkpoints: the launch cycle is the compute phase T_i alone, and job k has
    # computed (K − k)·Δ mod T_i of it at t = 0 (no write before it, unlike a one-level
    # fleet's D_i + (K − k)·Δ). Active jobs 0, 2, 3 (k = 0, 1, 2; K = 2), T = 4, 4, 3, D = 1.
    fleet = cj.Fleet([4.0, 4.0, 4.0, 3.0], [1.0] * 4, snapshot=0.5, active=[True, False, True, True])
    compute = np.array([4.0, 4.0, 3.0])
    for stagger in (1.5, 3.0):  # 3.0: (K − k)·Δ = 6 wraps around job 0's T = 4
        ahead = np.array([2.0, 1.0, 0.0]) * stagger
        np.testing.assert_allclose(staggered_positions(fleet, stagger)[[0, 2, 3]], np.mod(ahead, compute))
        state = start_state(fleet, Launch("staggered", stagger))
        np.testing.assert_array_equal(np.asarray(state.phase)[[0, 2, 3]], 0)  # computing
        np.testing.assert_allclose(np.asarray(state.remaining)[[0, 2, 3]], compute - np.mod(ahead, compute))


@pytest.mark.parametrize("launch", [Launch("staggered", 1234.567), Launch("staggered", 30.0), "random"])
def test_launches_of_a_file_in_bytes_keep_the_digits_of_its_seconds(launch):
    # The compute left went through the cycle position d + work: with d = 5e10 bytes and
    # T = 3600 s it kept 8 digits (relative error 5e-9 against the same fleet in GB).
    def fleet(scale):
        write = np.array([50.0, 40.0, 30.0, 0.02]) * scale  # the last job writes within the stagger
        table = np.array([0.0, 10.0, 10.0, 10.0, 10.0]) * scale
        return cj.Fleet(compute=[3600.0, 3000.0, 1800.0, 2400.0], write=write, throughput=table, dtype=np.float64)

    key = jax.random.key(3) if launch == "random" else None
    in_bytes, in_gigabytes = start_state(fleet(1e9), launch, key), start_state(fleet(1.0), launch, key)
    np.testing.assert_array_equal(in_bytes.phase, in_gigabytes.phase)
    scale = np.where(np.asarray(in_bytes.phase) == 1, 1e9, 1.0)  # a write's volume left is in bytes
    np.testing.assert_allclose(np.asarray(in_bytes.remaining) / scale, in_gigabytes.remaining, rtol=1e-13, atol=0)


def test_a_stagger_of_one_write_time_keeps_the_writes_apart():
    # N identical jobs with (N - 1)·D <= T staggered by D (claim 14c): every write alone.
    fleet = cj.Fleet(np.full(4, 3.0), np.full(4, 1.0))
    out = cj.simulate(fleet, start_state(fleet, Launch("staggered", 1.0)), n_fires=6, save=cj.SaveAt(writers=True))
    assert int(np.asarray(out.writers.max)) == 1
    together = cj.simulate(fleet, start_state(fleet, "synchronous"), n_fires=6, save=cj.SaveAt(writers=True))
    assert int(np.asarray(together.writers.max)) == 4


@pytest.mark.parametrize(
    "launch, match",
    [
        ("staggered", "launch must be one of"),
        (Launch("staggered"), "launch.stagger must be finite and > 0"),
        (Launch("together", 1.0), "launch.stagger must be 0"),
        (Launch("later"), "launch.mode must be one of"),
    ],
)
def test_bad_launches_name_the_argument(launch, match):
    fleet = cj.Fleet([4.0, 4.0], [1.0, 1.0])
    with pytest.raises(ValueError, match=match):
        start_state(fleet, launch)


def test_random_launch_needs_a_key():
    fleet = cj.Fleet([4.0, 4.0], [1.0, 1.0])
    with pytest.raises(ValueError, match="key must be a PRNG key"):
        start_state(fleet, "random")


def test_design_and_assess_take_a_launch():
    from ckpt_jax.assess import assess
    from ckpt_jax.design import fleet_waste

    fleet = cj.Fleet(np.full(3, 3.0), np.full(3, 1.0), mtbf=200.0, restart=0.5)
    keys = jax.random.split(jax.random.key(0), 2)
    run = dict(horizon=40.0, keys=keys)
    synchronous = fleet_waste(fleet, np.full((1, 3), 3.0), launch="synchronous", **run)
    together = fleet_waste(fleet, np.full((1, 3), 3.0), launch=Launch("together"), **run)
    np.testing.assert_array_equal(together, synchronous)
    staggered = fleet_waste(fleet, np.full((1, 3), 3.0), launch=Launch("staggered", 1.0), **run)
    assert np.all(staggered < synchronous)  # the writes no longer share the storage
    at_once = assess(fleet, horizon=40.0, key=jax.random.key(1), n_draws=2, launch=Launch("together"))
    apart = assess(fleet, horizon=40.0, key=jax.random.key(1), n_draws=2, launch=Launch("staggered", 1.0))
    assert apart.writers_max == 1 and at_once.writers_max == 3
    with pytest.raises(ValueError, match="launch must be one of"):
        assess(fleet, horizon=40.0, key=jax.random.key(1), n_draws=2, launch="staggered")
