"""The command line (`ckpt_jax.cli`) and the concurrency step function it plots."""

import json
import subprocess
import sys

import numpy as np
import pytest

from ckpt_jax.analysis import observed_interval, writer_count
from ckpt_jax.cli import main


@pytest.mark.parametrize("start", ["random", "sync", "stagger"])
def test_simulate_writes_files_that_round_trip(tmp_path, start, capsys):
    out = tmp_path / "run"
    argv = ["simulate", "--jobs", "4", "--cycles", "5", "--fleets", "2", "--start", start,
            "--out", str(out)]
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
    assert main(["simulate", "--jobs", "3", "--cycles", "2", "--start", "sync",
                 "--out", str(tmp_path)]) == 0
    fire = np.load(tmp_path / "trace.npz")["fire_times"][0]
    # f ≡ 1 shared by 3 writers: each write takes 3 d; all fire at T, then T + 3 d + T.
    np.testing.assert_allclose(fire, [[10.0, 23.0]] * 3, rtol=1e-12)


def test_simulate_no_x64_restores_the_callers_setting(tmp_path):
    import jax

    assert main(["simulate", "--jobs", "2", "--cycles", "2", "--no-x64",
                 "--out", str(tmp_path)]) == 0
    assert json.loads((tmp_path / "summary.json").read_text())["dtype"] == "float32"
    assert jax.config.jax_enable_x64


def test_simulate_exits_nonzero_when_a_fleet_fails(tmp_path, monkeypatch, capsys):
    import ckpt_jax.engine

    simulate = ckpt_jax.engine.simulate
    monkeypatch.setattr(ckpt_jax.engine, "simulate",
                        lambda *args, **kwargs: simulate(*args, **kwargs, max_events=3))
    assert main(["simulate", "--jobs", "4", "--cycles", "5", "--out", str(tmp_path)]) == 1
    assert "failed" in capsys.readouterr().err
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["ok"] is False and summary["status"] != 0
    # The partial trace is still written (NaN where nothing was recorded).
    table = np.genfromtxt(tmp_path / "trace.csv", delimiter=",", names=True)
    assert np.isnan(table["end_time"]).any()


@pytest.mark.parametrize(
    "option, value",
    [("--jobs", "1"), ("--compute", "0"), ("--write", "nan"), ("--cap", "-1"),
     ("--jitter", "-0.5"), ("--cycles", "0"), ("--fleets", "x"), ("--throughput", "none"),
     ("--start", "late")],
)
def test_simulate_rejects_bad_options_by_name(tmp_path, capsys, option, value):
    with pytest.raises(SystemExit) as exit_info:
        main(["simulate", option, value, "--out", str(tmp_path)])
    assert exit_info.value.code == 2
    assert f"argument {option}" in capsys.readouterr().err


def test_module_help_runs():
    result = subprocess.run(
        [sys.executable, "-m", "ckpt_jax", "simulate", "--help"],
        capture_output=True, text=True, timeout=120,
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
