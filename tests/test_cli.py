"""The command line (`ckpt_jax.cli`) and the concurrency step function it plots."""

import argparse
import errno
import json
import os
import stat
import subprocess
import sys

import numpy as np
import pytest
from conftest import TEST_XLA_FLAGS

import ckpt_jax
from ckpt_jax.analysis import observed_interval, writer_count
from ckpt_jax.cli import build_parser, main, seed_key
from ckpt_jax.files import atomic_write_bytes

SMALL = ["simulate", "--jobs", "2", "--cycles", "2"]


def one_error_line(capsys) -> str:
    """The run's stderr, checked to be exactly one line (no traceback)."""
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.endswith("\n"), err
    assert "Traceback" not in err
    return err.strip()


def must_not_run(*args, **kwargs):
    raise AssertionError("simulate ran although the command was bound to fail")


@pytest.mark.parametrize("start", ["random", "sync", "stagger"])
def test_simulate_writes_files_that_round_trip(tmp_path, start, capsys):
    out = tmp_path / "run"
    argv = ["simulate", "--jobs", "4", "--cycles", "5", "--fleets", "2", "--start", start, "--out", str(out)]
    assert main(argv) == 0
    assert "2/2 fleets ok" in capsys.readouterr().out
    for name in ("trace.csv", "trace.npz", "summary.json", "trace.png"):
        assert (out / name).stat().st_size > 0, name

    npz = np.load(out / "trace.npz")
    assert npz["fire_times"].shape == (2, 4, 5)
    assert npz["ok"].all() and not npz["status"].any()
    table = np.genfromtxt(out / "trace.csv", delimiter=",", names=True)
    assert table.dtype.names == ("fleet", "job", "cycle", "fire_time", "end_time")
    index = (table["fleet"].astype(int), table["job"].astype(int), table["cycle"].astype(int))
    assert len(table) == npz["fire_times"].size
    # %.17g round-trips float64 exactly.
    np.testing.assert_array_equal(table["fire_time"], npz["fire_times"][index])
    np.testing.assert_array_equal(table["end_time"], npz["end_times"][index])

    summary = json.loads((out / "summary.json").read_text())
    assert summary["ok"] is True and summary["dtype"] == "float64"
    assert summary["parameters"]["jobs"] == 4 and summary["parameters"]["start"] == start
    assert summary["events_total"] == int(npz["n_events"].sum())


def test_simulate_sync_start_fires_together(tmp_path):
    assert main(["simulate", "--jobs", "3", "--cycles", "2", "--start", "sync", "--out", str(tmp_path)]) == 0
    fire = np.load(tmp_path / "trace.npz")["fire_times"][0]
    # f ≡ 1 shared by 3 writers: each write takes 3 d; all fire at T, then T + 3 d + T.
    np.testing.assert_allclose(fire, [[10.0, 23.0]] * 3, rtol=1e-12)


def test_simulate_no_x64_restores_the_callers_setting(tmp_path):
    import jax

    assert main(["simulate", "--jobs", "2", "--cycles", "2", "--no-x64", "--out", str(tmp_path)]) == 0
    assert json.loads((tmp_path / "summary.json").read_text())["dtype"] == "float32"
    assert jax.config.jax_enable_x64


def test_simulate_exits_nonzero_when_a_fleet_fails(tmp_path, monkeypatch, capsys):
    simulate = ckpt_jax.simulate
    monkeypatch.setattr(ckpt_jax, "simulate", lambda *args, **kwargs: simulate(*args, **kwargs, max_events=3))
    assert main(["simulate", "--jobs", "4", "--cycles", "5", "--out", str(tmp_path)]) == 1
    assert "failed" in capsys.readouterr().err
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["ok"] is False and summary["status"] != 0
    # The partial trace is still written (NaN where nothing was recorded).
    table = np.genfromtxt(tmp_path / "trace.csv", delimiter=",", names=True)
    assert np.isnan(table["end_time"]).any()


@pytest.mark.parametrize(
    "option, value",
    [
        ("--jobs", "1"),
        ("--compute", "0"),
        ("--write", "nan"),
        ("--cap", "-1"),
        ("--jitter", "-0.5"),
        ("--cycles", "0"),
        ("--fleets", "x"),
        ("--throughput", "none"),
        ("--start", "late"),
        ("--seed", "-1"),
        ("--seed", "18446744073709551616"),
    ],
)
def test_simulate_rejects_bad_options_by_name(tmp_path, capsys, option, value):
    assert main(["simulate", option, value, "--out", str(tmp_path)]) == 2
    assert one_error_line(capsys).startswith(f"ckpt-jax: error: argument {option}")


def test_module_help_runs():
    result = subprocess.run(
        [sys.executable, "-m", "ckpt_jax", "simulate", "--help"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    for option in ("--jobs", "--throughput", "--start", "--x64", "--out"):
        assert option in result.stdout


def test_writer_count_nets_out_simultaneous_end_and_start():
    # Job 0 writes on [0, 1) and [3, 4); job 1 on [0.5, 2) and [2.5, 3): at t = 3 one
    # write ends as another begins, at t = 1 likewise only one ends.
    fire = np.array([[0.0, 3.0], [0.5, 2.5]])
    end = np.array([[1.0, 4.0], [2.0, 3.0]])
    times, counts = writer_count(fire, end)
    np.testing.assert_array_equal(times, [0.0, 0.5, 1.0, 2.0, 2.5, 4.0])
    np.testing.assert_array_equal(counts, [1, 2, 1, 0, 1, 0])


def test_writer_count_synchronous_windows_and_nan_padding():
    # Three jobs writing together, back to back ([0, 3) then [3, 6)), plus a padding row:
    # the ends and starts at t = 3 cancel, so the count is 3 throughout.
    fire = np.array([[0.0, 3.0]] * 3 + [[np.nan, np.nan]])
    end = np.array([[3.0, 6.0]] * 3 + [[np.nan, np.nan]])
    times, counts = writer_count(fire, end)
    np.testing.assert_array_equal(times, [0.0, 6.0])
    np.testing.assert_array_equal(counts, [3, 0])
    assert observed_interval(fire, end) == (0.0, 6.0)


def test_writer_count_empty_and_bad_shapes():
    times, counts = writer_count(np.full((2, 3), np.nan), np.full((2, 3), np.nan))
    assert times.size == 0 and counts.size == 0
    with pytest.raises(ValueError, match="shape"):
        writer_count(np.zeros((2, 3)), np.zeros((2, 2)))


# -- failures: one line, exit status 2 ------------------------------------------------------
def test_out_that_is_a_file_fails_before_simulating(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(ckpt_jax, "simulate", must_not_run)
    a_file = tmp_path / "file"
    a_file.write_text("x")
    assert main([*SMALL, "--out", str(a_file)]) == 2
    assert one_error_line(capsys) == f"ckpt-jax: error: --out {a_file}: not a directory"
    assert main([*SMALL, "--out", str(a_file / "sub")]) == 2
    assert one_error_line(capsys).startswith(f"ckpt-jax: error: --out {a_file / 'sub'}: cannot create it")
    assert a_file.read_text() == "x"


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0, reason="root writes into a 0500 directory")
def test_unwritable_out_fails_before_simulating(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(ckpt_jax, "simulate", must_not_run)
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    try:
        assert main([*SMALL, "--out", str(locked)]) == 2
        assert main([*SMALL, "--out", str(locked / "sub")]) == 2
    finally:
        locked.chmod(0o700)
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith(f"ckpt-jax: error: --out {locked}: cannot write there")
    assert err[1].startswith(f"ckpt-jax: error: --out {locked / 'sub'}: cannot create it")


def test_out_where_no_file_can_be_created_fails_before_simulating(tmp_path, capsys, monkeypatch):
    # What a read-only directory does for a user other than root (and root on a read-only mount).
    import tempfile

    def refused(*args, **kwargs):
        raise PermissionError(errno.EACCES, "Permission denied")

    monkeypatch.setattr(ckpt_jax, "simulate", must_not_run)
    monkeypatch.setattr(tempfile, "mkstemp", refused)
    assert main([*SMALL, "--out", str(tmp_path)]) == 2
    assert one_error_line(capsys) == f"ckpt-jax: error: --out {tmp_path}: cannot write there (Permission denied)"


@pytest.mark.parametrize(
    "code, what", [(errno.ENOSPC, "no space left on device"), (errno.EDQUOT, "disk quota exceeded")]
)
def test_disk_full_is_one_line(tmp_path, capsys, monkeypatch, code, what):
    def full(handle, **arrays):
        raise OSError(code, os.strerror(code))

    monkeypatch.setattr(np, "savez", full)
    assert main([*SMALL, "--out", str(tmp_path)]) == 2
    line = one_error_line(capsys)
    assert line.startswith(f"ckpt-jax: error: {what} while writing ({tmp_path / 'trace.npz'})")
    assert line.endswith("free some space, then rerun the same command")
    assert not list(tmp_path.glob(".*.tmp"))  # nothing half written


@pytest.mark.parametrize(
    "failure, status, line",
    [
        (
            OSError(errno.ENOSPC, "No space left on device", "DIR/report.md"),
            2,
            "ckpt-jax: error: no space left on device while writing (DIR/report.md); the files written before are "
            "complete (none is half written): free some space, then rerun the same command to resume",
        ),
        (KeyboardInterrupt(), 130, "ckpt-jax: interrupted; rerun the same command to resume"),
    ],
)
def test_reproduce_disk_full_or_ctrl_c_says_a_rerun_resumes(tmp_path, capsys, monkeypatch, failure, status, line):
    import ckpt_jax.reproduce

    def fails(*args, **kwargs):
        raise failure

    monkeypatch.setattr(ckpt_jax.reproduce, "reproduce", fails)
    assert main(["reproduce", "--smoke", "--out", str(tmp_path)]) == status
    assert one_error_line(capsys) == line


def test_library_value_errors_are_one_line_with_plain_numbers(tmp_path, capsys, monkeypatch):
    def refuses(*args, **kwargs):
        raise ValueError("the trace needs 1.6e+13 bytes (max_events=np.int64(7), jitter=np.float64(-1.0))")

    monkeypatch.setattr(ckpt_jax, "simulate", refuses)
    assert main([*SMALL, "--out", str(tmp_path)]) == 2
    assert one_error_line(capsys) == ("ckpt-jax: error: the trace needs 1.6e+13 bytes (max_events=7, jitter=-1.0)")


def test_overflowing_period_is_one_line(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(ckpt_jax, "simulate", must_not_run)
    assert main([*SMALL, "--compute", "1e308", "--write", "1e308", "--out", str(tmp_path)]) == 2
    assert "overflows" in one_error_line(capsys)


def test_ctrl_c_is_one_line(tmp_path, capsys, monkeypatch):
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(ckpt_jax, "simulate", interrupted)
    assert main([*SMALL, "--out", str(tmp_path)]) == 130
    assert one_error_line(capsys) == "ckpt-jax: interrupted; rerun the same command to start again"


# -- help -------------------------------------------------------------------------------------
def subparsers():
    actions = [a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)]
    return actions[0].choices


@pytest.mark.parametrize("command", ["simulate", "ensemble", "reproduce"])
def test_help_states_each_default_once_and_truly(command):
    parser = subparsers()[command]
    text = " ".join(parser.format_help().split())
    for wrong in ("(default: None)", "(default: False)", "(default: True)", "(default) (default"):
        assert wrong not in text, wrong
    for action in parser._actions:
        assert (action.help or "").count("(default:") <= 1, action.help  # stated once
        for option in action.option_strings:
            assert option in text, option
        if action.help and action.required:
            assert "(required)" in action.help
    if command == "ensemble":
        assert "--compute T solo compute duration (work) per cycle (default: 10, or from --load)" in text
    if command == "reproduce":
        for option in ("--smoke", "--restart", "--no-progress", "--quick", "--full", "--only"):
            assert option in text


def test_help_and_version_exit_zero_and_a_missing_command_is_one_line(capsys):
    assert main(["ensemble", "--help"]) == 0
    assert "--chunk-size" in capsys.readouterr().out
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.startswith("ckpt-jax ")
    assert main([]) == 2
    assert one_error_line(capsys).startswith("ckpt-jax: error: the following arguments are required: COMMAND")


# -- files ------------------------------------------------------------------------------------
def test_files_get_the_users_umask(tmp_path):
    previous = os.umask(0o027)
    try:
        assert main([*SMALL, "--out", str(tmp_path / "run")]) == 0
        kept = tmp_path / "kept.json"
        kept.write_bytes(b"{}")
        kept.chmod(0o604)
        atomic_write_bytes(kept, b"[]")  # an existing file keeps its mode
    finally:
        os.umask(previous)
    modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in (tmp_path / "run").iterdir()}
    assert modes == dict.fromkeys(["trace.csv", "trace.npz", "summary.json", "trace.png"], 0o640)
    assert stat.S_IMODE(kept.stat().st_mode) == 0o604 and kept.read_bytes() == b"[]"


def test_seed_key_is_jax_random_key_where_that_is_exact():
    import jax

    for seed in (0, 1, 2**32 - 1, 2**32, 2**63 - 1):
        np.testing.assert_array_equal(jax.random.key_data(seed_key(seed)), jax.random.key_data(jax.random.key(seed)))
    # Under float32 jax.random.key(2**32) wraps onto seed 0; the CLI's key does not.
    top = jax.random.key_data(seed_key(2**64 - 1))
    np.testing.assert_array_equal(top, [2**32 - 1, 2**32 - 1])
    assert not np.array_equal(jax.random.key_data(seed_key(2**32)), jax.random.key_data(seed_key(0)))


# -- --devices ----------------------------------------------------------------------------
def cli_process(argv, **env):
    """``python -m ckpt_jax ARGV`` on CPU with the host device count left to the CLI."""
    environ = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "JAX_NUM_CPU_DEVICES")}
    if TEST_XLA_FLAGS in os.environ.get("XLA_FLAGS", ""):  # the tier's compile flags, no device count
        environ["XLA_FLAGS"] = TEST_XLA_FLAGS
    environ.update(JAX_PLATFORMS="cpu", **env)
    result = subprocess.run(
        [sys.executable, "-m", "ckpt_jax", *argv], capture_output=True, text=True, timeout=300, env=environ
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


@pytest.mark.slow  # a second process with two devices; tests/test_sharding.py checks sharded runs in the tier
def test_simulate_on_one_or_two_devices_gives_the_same_trace(tmp_path):
    argv = ["simulate", "--fleets", "6", "--jobs", "4", "--cycles", "6", "--jitter", "0.1", "--seed", "3"]
    traces = {}
    for n in (1, 2):
        out = tmp_path / f"devices-{n}"
        printed = cli_process([*argv, "--devices", str(n), "--out", str(out)])
        word = "device" if n == 1 else "devices"
        assert f"ckpt-jax simulate: {n} CPU {word} (--devices {n})\n" in printed, printed
        assert json.loads((out / "summary.json").read_text())["devices"]["used"] == n
        with np.load(out / "trace.npz") as npz:
            traces[n] = dict(npz)
    assert sorted(traces[1]) == ["end_times", "fire_times", "n_events", "ok", "status", "time"]
    for name, one in traces[1].items():
        assert one.dtype == traces[2][name].dtype and one.tobytes() == traces[2][name].tobytes(), name


def test_ensemble_resumes_on_another_device_count_with_the_same_chunks(tmp_path):
    argv = [
        "ensemble",
        "--fleets",
        "8",
        "--chunk-size",
        "4",
        "--jobs",
        "4",
        "--fires",
        "5",
        "--jitter",
        "0.1",
        "--no-progress",
    ]
    two, mixed = tmp_path / "two", tmp_path / "mixed"
    printed = cli_process([*argv, "--out", str(two)])  # default: one device per core
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    used = min(cores, 2)  # chunks of 4 fleets: at most 2 devices
    assert json.loads((two / "summary.json").read_text())["devices"]["used"] == used, printed
    mixed.mkdir()
    for name in ("manifest.json", "chunk-000000.npz"):
        (mixed / name).write_bytes((two / name).read_bytes())
    printed = cli_process([*argv, "--devices", "1", "--out", str(mixed)])
    assert "ckpt-jax ensemble: 1 CPU device (--devices 1)" in printed
    assert "2 chunks (1 computed, 1 loaded)" in printed
    with np.load(two / "chunk-000001.npz") as a, np.load(mixed / "chunk-000001.npz") as b:
        assert sorted(a) == sorted(b)
        for name in a:
            assert a[name].tobytes() == b[name].tobytes(), name


def test_devices_in_process_after_jax_started_uses_the_devices_there(tmp_path, capsys):
    import jax

    if jax.default_backend() != "cpu":
        pytest.skip("checks the CPU fallback")
    have = len(jax.local_devices())  # the backend is up
    assert (
        main(
            [
                "simulate",
                "--fleets",
                "8",
                "--jobs",
                "2",
                "--cycles",
                "2",
                "--devices",
                str(have + 1),
                "--out",
                str(tmp_path),
            ]
        )
        == 0
    )
    line = capsys.readouterr().out.splitlines()[0]
    word = "device" if have == 1 else "devices"
    assert line.startswith(f"ckpt-jax simulate: {min(have, 4)} CPU {word}"), line
    assert f"--devices {have + 1} not possible: JAX had already started in this process with {have}" in line
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["devices"]["used"] == min(have, 4) and summary["devices"]["requested"] == have + 1


@pytest.mark.parametrize("command", ["simulate", "ensemble", "reproduce"])
@pytest.mark.parametrize("value", ["0", "x", "2.5", "1025"])
def test_bad_devices_are_one_line(tmp_path, capsys, command, value):
    argv = [command, "--devices", value, "--out", str(tmp_path)]
    if command == "ensemble":
        argv += ["--fleets", "2"]
    assert main(argv) == 2
    assert one_error_line(capsys).startswith("ckpt-jax: error: argument --devices: ")


def test_devices_on_a_gpu_machine_are_the_local_gpus(monkeypatch):
    import jax

    from ckpt_jax import cli

    class Gpu:
        platform = "gpu"

    monkeypatch.setattr(jax, "local_devices", lambda: [Gpu(), Gpu()])
    monkeypatch.setattr(jax.config, "update", lambda name, value: None)  # the backend is real
    every = cli.start_devices(None)
    assert every.available == 2 and every.why == "every local GPU"
    assert cli.devices_for(every, 100) == (2, 2) and cli.devices_for(every, 3) == (None, 1)
    assert cli.devices_for(cli.start_devices(1), 100) == (None, 1)
    with pytest.raises(cli.CliError, match="--devices 3: this machine has 2 GPU devices"):
        cli.start_devices(3)


def test_simulate_with_sizes_and_policies_matches_the_library(tmp_path, capsys):
    import ckpt_jax as cj

    out = tmp_path / "sized"
    argv = [
        "simulate",
        "--jobs",
        "4",
        "--cycles",
        "3",
        "--fleets",
        "1",
        "--start",
        "stagger",
        "--cap",
        "2",
        "--size",
        "1,2",
        "--power-policy",
        "uniform",
        "--storage-policy",
        "fcfs",
        "--out",
        str(out),
    ]
    assert main(argv) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["parameters"]["size"] == [1.0, 2.0, 1.0, 2.0]  # the list repeats over the jobs
    assert summary["parameters"]["power_policy"] == "uniform"
    assert summary["parameters"]["storage_policy"] == "fcfs"
    with np.load(out / "trace.npz") as npz:
        fire_times = npz["fire_times"]
    # The same run through the library: the CLI's stagger start is cycle positions i/N.
    fleet = cj.Fleet(
        np.full((1, 4), 10.0),
        np.full((1, 4), 1.0),
        cap=2.0,
        size=[1.0, 2.0, 1.0, 2.0],
        power_policy="uniform",
        storage_policy="fcfs",
    )
    state = cj.state_from_positions(fleet, np.full((1, 4), 11.0) * np.arange(4) / 4)
    np.testing.assert_allclose(fire_times, cj.simulate(fleet, state, 3).fire_times, rtol=1e-12)
    assert (
        main(
            [
                "simulate",
                "--jobs",
                "4",
                "--cycles",
                "3",
                "--fleets",
                "1",
                "--start",
                "stagger",
                "--cap",
                "2",
                "--out",
                str(tmp_path / "plain"),
            ]
        )
        == 0
    )
    plain = json.loads((tmp_path / "plain" / "summary.json").read_text())["parameters"]
    assert not {"size", "power_policy", "storage_policy"} & set(plain)  # defaults: as before


@pytest.mark.parametrize(
    "value, message",
    [
        ("1,,2", "argument --size: expected sizes > 0"),
        ("0", "argument --size: must be finite and > 0"),
        ("1,nan", "argument --size: must be finite"),
        ("1,2,3", "--size lists 3 sizes but a fleet has only --jobs 2"),
    ],
)
def test_bad_sizes_are_one_line(tmp_path, capsys, value, message):
    assert main([*SMALL, "--size", value, "--out", str(tmp_path)]) == 2
    assert message in one_error_line(capsys)


@pytest.mark.parametrize("option", ["--power-policy", "--storage-policy"])
def test_unknown_policies_are_one_line(tmp_path, capsys, option):
    assert main([*SMALL, option, "greedy", "--out", str(tmp_path)]) == 2
    assert one_error_line(capsys).startswith(f"ckpt-jax: error: argument {option}: invalid choice")


def test_ensemble_records_sizes_and_refuses_to_resume_with_others(tmp_path, capsys):
    out = tmp_path / "ens"
    argv = [
        "ensemble",
        "--fleets",
        "4",
        "--chunk-size",
        "2",
        "--jobs",
        "3",
        "--fires",
        "3",
        "--cap",
        "1.5",
        "--no-progress",
        "--out",
        str(out),
    ]
    assert main([*argv, "--size", "1,2,4", "--storage-policy", "weighted"]) == 0
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["config"]["parameters"]["size"] == [1.0, 2.0, 4.0]
    capsys.readouterr()
    assert main(argv) == 2
    err = one_error_line(capsys)
    assert "size: [1.0, 2.0, 4.0] saved, 1 now" in err and "storage-policy: weighted saved, fair now" in err


def test_ensemble_with_a_deeply_nested_manifest_is_one_error_line(tmp_path, capsys):
    out = tmp_path / "nested"
    out.mkdir()
    (out / "manifest.json").write_text('{"config": ' + "[" * 100_000 + "]" * 100_000 + "}")
    assert main(["ensemble", "--fleets", "2", "--jobs", "2", "--fires", "2", "--no-progress", "--out", str(out)]) == 2
    assert "manifest.json is unreadable; use --restart" in capsys.readouterr().err


def test_simulate_with_write_limits_snapshots_and_power_matches_the_library(tmp_path, capsys):
    import ckpt_jax as cj

    out = tmp_path / "two-level"
    argv = ["simulate", "--jobs", "4", "--cycles", "3", "--start", "stagger", "--out", str(out)]
    options = ["--write-limit", "0.5", "--snapshot", "0.2", "--idle-power", "0.1", "--power"]
    assert main([*argv, *options]) == 0
    printed = capsys.readouterr().out
    summary = json.loads((out / "summary.json").read_text())
    assert {name: summary["parameters"][name] for name in ("write_limit", "snapshot", "idle_power")} == {
        "write_limit": 0.5,
        "snapshot": 0.2,
        "idle_power": 0.1,
    }
    # Alone a write drains at 0.5 (not f(1) = 1) while the job computes: load 4·2 / (0.2 + max(10, 2)).
    assert summary["load"] == pytest.approx(4 * 2.0 / 10.2, rel=1e-12)
    # The same run through the library, power observed.
    fleet = cj.Fleet(np.full((1, 4), 10.0), 1.0, write_limit=0.5, snapshot=0.2, idle_power=0.1)
    # --start stagger starts two-level jobs computing, evenly spaced over T: i·T/N of it done.
    state = cj.initial_state(fleet, remaining=10.0 - np.full((1, 4), 10.0) * np.arange(4) / 4)
    trace = cj.simulate(fleet, state, 3, save=cj.SaveAt(trace=True, power=True))
    with np.load(out / "trace.npz") as npz:
        np.testing.assert_allclose(npz["fire_times"], trace.fire_times, rtol=1e-12)
    power = trace.power
    assert power is not None
    for name in ("mean", "max", "min", "largest_drop", "largest_rise", "n_steps", "threshold"):
        np.testing.assert_allclose(summary["power"][name], np.asarray(getattr(power, name)), rtol=1e-12)
    # A snapshot draws 0.1 of a job: each one is a step of 0.9 down, then up, over 0.1·W = 0.4.
    assert summary["power"]["largest_drop"][0] == pytest.approx(0.9) and summary["power"]["max"] == [4.0]
    assert f"steps over 0.4 (of {summary['power']['n_changes'][0]} changes)" in printed
    assert f"mean {summary['power']['mean'][0]:.4g}, max 4, min" in printed


@pytest.mark.parametrize(
    "options, message",
    [
        (["--snapshot", "0.1", "--async-fraction", "0.5"], "--snapshot and --async-fraction exclude each other"),
        (["--recover-from", "memory"], "--recover-from memory needs --snapshot"),
        (["--idle-power", "1.5"], "argument --idle-power: must lie in [0, 1]"),
        (["--write-limit", "0"], "argument --write-limit: must be finite and > 0"),
    ],
)
def test_simulate_two_level_options_that_cannot_run_are_one_line(tmp_path, capsys, monkeypatch, options, message):
    monkeypatch.setattr(ckpt_jax, "simulate", must_not_run)
    assert main([*SMALL, *options, "--out", str(tmp_path)]) == 2
    assert message in one_error_line(capsys)


# -- the shared options: one definition, one meaning -------------------------------------------
SHARED = {
    "--out": "OUT_HELP",
    "--seed": "SEED_HELP",
    "--no-progress": "NO_PROGRESS_HELP",
    "--horizon": "HORIZON_HELP",
    "--quick": None,
}

UNITS_FILE = """
time_unit = "h"

[storage]
peak = "1 GB/s"

[design]
bounds = ["0.5 h", "50 h"]
horizon = "3 day"
seed = 5

[[groups]]
name = "small"
count = 2
gpus = 1
checkpoint = "1.8 TB"
mtbf = "20 h"
"""

PLAIN_FILE = """
throughput = "shared"

[design]
horizon = 40.0

[[groups]]
name = "small"
count = 2
size = 1
write = 0.5
mtbf = 20.0
"""


@pytest.mark.parametrize("command", ["simulate", "ensemble", "reproduce", "design", "assess", "compare"])
def test_every_command_takes_the_shared_options_with_one_help_text(command):
    from ckpt_jax.cli import _options

    parser = subparsers()[command]
    actions = {option: action for action in parser._actions for option in action.option_strings}
    assert "--out" in actions and "--no-progress" in actions
    for option, constant in SHARED.items():
        if option not in actions:
            continue
        text = actions[option].help
        if constant is not None:  # the same words, then the default the command states
            assert text.startswith(getattr(_options, constant)), (command, option, text)
        else:
            assert text.startswith("a small fast run: "), (command, text)
    if "--seed" in actions:
        assert actions["--seed"].type("18446744073709551615") == 2**64 - 1


def _checked(argv):
    """The parsed and checked arguments of one command (the fleet file loaded, nothing run)."""
    args = build_parser().parse_args([*argv, "--out", "unused"])
    args.check(args)
    return args


def test_horizon_means_the_same_in_every_command(tmp_path):
    units, plain = tmp_path / "units.toml", tmp_path / "plain.toml"
    units.write_text(UNITS_FILE)
    plain.write_text(PLAIN_FILE)
    for value in ("1 day", "24", "24 h", "1440 min"):  # a plain number: in the file's time unit, h
        assert _checked(["simulate", "--fleet", str(units), "--horizon", value]).horizon == 86400.0
        assert _checked(["design", str(units), "--horizon", value]).settings["horizon"] == 86400.0
        assert _checked(["assess", str(units), "--horizon", value]).settings["horizon"] == 86400.0
    for command in (["simulate", "--fleet", str(plain)], ["design", str(plain)], ["assess", str(plain)]):
        args = _checked([*command, "--horizon", "12.5"])
        assert getattr(args, "settings", {"horizon": args.horizon})["horizon"] == 12.5
    assert _checked(["simulate", "--horizon", "7"]).horizon == 7.0
    # The default: the file's [design].horizon (and its seed), --quick capped at one day there.
    assert _checked(["simulate", "--fleet", str(units)]).horizon == 3 * 86400.0
    assert _checked(["design", str(units), "--quick"]).settings["horizon"] == 86400.0
    assert _checked(["simulate", "--fleet", str(units)]).seed == 5
    assert _checked(["design", str(units)]).settings["seed"] == 5
    assert _checked(["simulate"]).seed == 0


@pytest.mark.parametrize(
    "argv, message",
    [
        (["simulate", "--horizon", "2 day"], "argument --horizon: a fleet without a fleet file (no --fleet) has"),
        (["simulate", "--horizon", "-3"], "argument --horizon: must be finite and > 0, got '-3'"),
        (["simulate", "--horizon", "5 TB"], 'argument --horizon: "5 TB" is a size; expected a duration'),
        (["design", "PLAIN", "--horizon", "2 day"], "argument --horizon: a file of plain numbers has no time unit"),
        (["design", "UNITS", "--horizon", "inf"], "argument --horizon: must be finite and > 0"),
        (["design", "UNITS", "--horizon", "1e306"], "argument --horizon: must be finite, got '1e306' (h)"),
    ],
)
def test_a_bad_horizon_is_one_error_line_in_every_command(tmp_path, capsys, monkeypatch, argv, message):
    files = {"PLAIN": PLAIN_FILE, "UNITS": UNITS_FILE}
    for name, text in files.items():
        (tmp_path / f"{name}.toml").write_text(text)
    argv = [str(tmp_path / f"{a}.toml") if a in files else a for a in argv]
    monkeypatch.setattr(ckpt_jax, "simulate", must_not_run)
    assert main([*argv, "--out", str(tmp_path / "out")]) == 2
    assert one_error_line(capsys).startswith(f"ckpt-jax: error: {message}")


def test_the_rerun_command_gives_the_horizon_in_the_files_time_unit(tmp_path):
    from ckpt_jax.cli.design import rerun_command
    from ckpt_jax.fleetfile import load

    units, plain = tmp_path / "units.toml", tmp_path / "plain.toml"
    units.write_text(UNITS_FILE)
    plain.write_text(PLAIN_FILE)
    for path, horizon, shown in ((units, 86400.0, "--horizon 24 "), (plain, 12.5, "--horizon 12.5 ")):
        args = _checked(["design", str(path), "--horizon", shown.split()[1]])
        assert args.settings["horizon"] == horizon
        command = rerun_command(load(path), args.settings, {"converged": True, "stopped_early": True}, "o")
        assert shown in command
        # The command reads back to the same horizon.
        again = _checked(command.split()[1:-2])
        assert again.settings["horizon"] == horizon
