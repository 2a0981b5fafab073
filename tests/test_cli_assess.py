"""``ckpt-jax assess FLEET.toml``: the files, the report read against assess.json, the options,
and a lone job's goodput through a file with units against the renewal formula."""

import json
import re

import pytest

import ckpt_jax as cj
from ckpt_jax.cli import build_parser, main
from ckpt_jax.cli.assess import FILES

TINY = """
time_unit = "min"
power_per_gpu = "700 W"
idle_power = "100 W"

[storage]
peak = "10 GB/s"
saturates_at = 1

[design]
horizon = "1 week"

[[groups]]
name = "big"
count = 2
gpus = 64
checkpoint = "600 GB"             # 60 s alone
mtbf = "4 h"
restart = "5 min"
interval = "20 min"

[[groups]]
name = "small"
count = 3
gpus = 8
checkpoint = "100 GB"             # 10 s alone
mtbf = "12 h"
restart = "2 min"
interval = "10 min"
"""

PLAIN = """
throughput = "shared"

[[groups]]
count = 2
size = 1
write = 0.5
mtbf = 20.0
compute = 4.0
"""

FAST = ["--draws", "4", "--no-progress", "--devices", "1"]


def one_error_line(capsys) -> str:
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    return err.strip()


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """One run of the tiny fleet over 6 h: (the output folder, what it printed)."""
    folder = tmp_path_factory.mktemp("assess")
    path = folder / "tiny.toml"
    path.write_text(TINY)
    out = folder / "out"
    import contextlib
    import io

    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        assert main(["assess", str(path), "--horizon", "6 h", *FAST, "--out", str(out)]) == 0
    return out, printed.getvalue()


def test_assess_writes_its_files_with_the_documented_schema(run):
    out, printed = run
    for name in ("assess.json", "report.md", "losses.png", "timeline.png", "writers.png"):
        assert (out / name).stat().st_size > 0, name
    for name in ("losses.png", "timeline.png", "writers.png"):
        assert (out / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", name
    summary = json.loads((out / "assess.json").read_text())
    assert summary["command"] == "assess" and summary["files"][: len(FILES)] == FILES
    assert summary["settings"]["horizon"] == 6 * 3600.0  # seconds, the engine's time
    assert summary["settings"]["horizon_in_time_unit"] == pytest.approx(360.0)
    assert summary["settings"]["time_unit"] == "min" and summary["settings"]["draws"] == 4
    assert summary["fleet"]["time_unit"] == "min" and summary["fleet"]["power_per_gpu"] == 700.0
    assert summary["horizon_hours"] == pytest.approx(6.0)
    assert summary["groups"] == {"big": {"jobs": [0, 1], "gpus": 128.0}, "small": {"jobs": [2, 3, 4], "gpus": 24.0}}
    estimate = {"mean", "low", "high"}
    for name in ("big", "small", "fleet"):
        assert set(summary["goodput"][name]) == estimate
        assert set(summary["gpu_hours_lost_per_day"][name]) == set(cj.assess.CAUSES)
        assert all(set(e) == estimate for e in summary["gpu_hours_lost_per_day"][name].values())
    storage = summary["storage"]
    assert {"writer_time", "independent_writer_time", "writers_p50", "writers_p99", "writers_max"} <= set(storage)
    assert len(storage["writer_time"]) == 6 and sum(storage["writer_time"]) == pytest.approx(1)
    power = summary["power"]
    assert power["unit"] == "W" and power["cap_time"] is None
    assert power["edges"][-1] == pytest.approx(152 * 700.0)  # every GPU computing
    assert {"mean", "max", "largest_drop", "largest_rise", "throttled_gpu_hours_per_day"} <= set(power)
    assert "Fleet goodput" in printed and f"-> {out}" in printed


def test_assess_writes_the_assessment_as_zarr_equal_to_assess_json(run):
    xarray = pytest.importorskip("xarray")
    pytest.importorskip("zarr")
    out, _ = run
    summary = json.loads((out / "assess.json").read_text())
    assert summary["files"] == [*FILES, "assess.zarr"]
    ds = xarray.open_zarr(out / "assess.zarr")
    assert list(ds.group.values) == ["big", "small", "fleet"] and list(ds.cause.values) == list(cj.assess.CAUSES)
    for name in ("big", "small", "fleet"):
        for part in ("mean", "low", "high"):
            assert float(ds[f"goodput_{part}"].sel(group=name)) == summary["goodput"][name][part]
            for cause in cj.assess.CAUSES:
                cell = dict(group=name, cause=cause)
                lost = summary["gpu_hours_lost_per_day"][name][cause][part]
                assert float(ds[f"gpu_hours_lost_per_day_{part}"].sel(cell)) == lost
                assert float(ds[f"lost_fraction_{part}"].sel(cell)) == summary["lost_fraction"][name][cause][part]
    assert list(ds.writer_time.values) == summary["storage"]["writer_time"] and ds.sizes["writers"] == 6
    assert list(ds.power_edges.values) == summary["power"]["edges"] and ds.power_edges.attrs["units"] == "W"
    assert float(ds.power_mean_mean) == summary["power"]["mean"]["mean"]
    assert not any(name.startswith("cap_time") for name in ds.data_vars)  # no cap
    assert (ds.attrs["command"], ds.attrs["seed"], ds.attrs["n_draws"], ds.attrs["horizon_unit"]) == (
        "assess",
        summary["settings"]["seed"],
        4,
        "s",
    )
    assert ds.attrs["horizon"] == summary["horizon"] and ds.attrs["horizon_hours"] == pytest.approx(6.0)


def test_assess_without_xarray_or_zarr_says_what_to_install(run, tmp_path, monkeypatch, capsys):
    from ckpt_jax import labelled

    monkeypatch.setattr(labelled, "zarr_missing", lambda: 'xarray is not installed (pip install "ckpt_jax[xarray]")')
    path = tmp_path / "tiny.toml"
    path.write_text(TINY)
    out = tmp_path / "out"
    (out / "assess.zarr").mkdir(parents=True)  # an earlier run's, removed: it is not of this one
    assert main(["assess", str(path), "--horizon", "6 h", *FAST, "--out", str(out)]) == 0  # compiled: quick
    printed = capsys.readouterr()
    assert 'ckpt-jax assess: assess.zarr not written: xarray is not installed (pip install "ckpt_jax[xarray]")\n' in (
        printed.out
    )
    assert json.loads((out / "assess.json").read_text())["files"] == FILES and not (out / "assess.zarr").exists()


def _numbers(text: str) -> list:
    return [float(x.replace(",", "")) for x in re.findall(r"-?[\d,]*\.?\d+(?:e[-+]\d+)?", text)]


def _shown(value: float) -> float:
    """The rounding the report applies to an amount (GPU-hours): whole from 100, else 3 digits."""
    return 0.5 if abs(value) >= 99.5 else max(abs(value), 1e-3) * 5e-3


def test_report_headline_reads_as_assess_json(run):
    out, _ = run
    summary = json.loads((out / "assess.json").read_text())
    report = (out / "report.md").read_text()
    lines = report.splitlines()
    headline = lines[2]
    assert headline.startswith("- **Fleet goodput ")
    goodput = summary["goodput"]["fleet"]
    mean, low, high = _numbers(headline.split("Fleet goodput ")[1])[:3]
    for shown, value in zip((mean, low, high), (goodput["mean"], goodput["low"], goodput["high"])):
        assert shown == pytest.approx(100 * value, abs=0.0051)
    # GPU-hours lost per day, cause by cause, as the reader sees them.
    words = {"checkpoint stalls": "checkpoint", "waiting on backpressure": "backpressure"}
    words |= {"work lost to failures": "lost_work", "restarts": "restart"}
    words["throttling by the power cap"] = "throttling"
    causes = lines[3].removeprefix("- GPU-hours lost per day: ").rstrip(".").split("; ")
    assert len(causes) == 5
    for text in causes:
        name = re.match(r"[a-z ]+[a-z]", text).group(0)
        expected = summary["gpu_hours_lost_per_day"]["fleet"][words[name]]
        values = (expected["mean"], expected["low"], expected["high"])
        for shown, value in zip(_numbers(text.removeprefix(name)), values):
            assert shown == pytest.approx(value, abs=_shown(value)), (text, expected)
    # The largest power step in the unit its size calls for (here kW: 64 GPUs x 600 W per job).
    step = max(summary["power"]["largest_drop"]["mean"], summary["power"]["largest_rise"]["mean"])
    shown = re.search(r"Largest power step: ([\d.]+) (W|kW|MW)", lines[4])
    assert shown is not None, lines[4]
    scale = {"W": 1.0, "kW": 1e3, "MW": 1e6}[shown.group(2)]
    assert float(shown.group(1)) * scale == pytest.approx(step, rel=5e-3)
    assert 1e3 <= step < 1e6 and shown.group(2) == "kW"
    # ... said as the mean over the draws of each draw's largest, beside the largest in any draw.
    assert "on average (a " in lines[4] and "the mean over the 4 draws of each draw's largest" in lines[4]
    worst = max(summary["power"]["largest_drop_max"], summary["power"]["largest_rise_max"])
    shown = re.search(r"([\d.]+) (W|kW|MW) at most \(the largest in any draw\)", lines[4])
    assert shown is not None, lines[4]
    assert float(shown.group(1)) * {"W": 1.0, "kW": 1e3, "MW": 1e6}[shown.group(2)] == pytest.approx(worst, rel=5e-3)
    assert worst >= step - 1e-9
    assert "the largest in any draw (max over the draws): drop" in report
    assert lines[5] == "- No power cap."
    # The intervals in use in the file's time unit; per-group goodput as in assess.json.
    assert "| big | 2 | 64 | 20 min | 1 min |" in report and "| small | 3 | 8 | 10 min | 10 s |" in report
    for name in ("big", "small"):
        row = next(line for line in lines if line.startswith(f"| {name} | {summary['groups'][name]['gpus']:,.0f} |"))
        value = _numbers(row.split("|")[3])[0]
        assert value == pytest.approx(100 * summary["goodput"][name]["mean"], abs=0.0051)
    assert "over H = 360 min (6 h)" in report


def _settings(argv):
    from ckpt_jax.cli.assess import _check

    args = build_parser().parse_args(["assess", *argv, "--out", "unused"])
    _check(args)
    return args.settings


def test_horizon_and_quick_in_the_files_units(tmp_path):
    units, plain = tmp_path / "units.toml", tmp_path / "plain.toml"
    units.write_text(TINY)
    plain.write_text(PLAIN)
    assert _settings([str(units)])["horizon"] == 7 * 86400.0  # [design].horizon
    assert _settings([str(units)])["draws"] == 64
    assert _settings([str(units), "--horizon", "2 day"])["horizon"] == 2 * 86400.0
    assert _settings([str(units), "--horizon", "90"])["horizon"] == 90 * 60.0  # the file's unit, min
    quick = _settings([str(units), "--quick"])
    assert quick["horizon"] == 86400.0 and quick["draws"] < 64
    assert _settings([str(units), "--quick", "--horizon", "3 day", "--draws", "5"])["horizon"] == 3 * 86400.0
    settings = _settings([str(plain), "--quick"])
    assert settings["horizon"] == 200.0 and settings["hours_per_time_unit"] == 1.0
    assert settings["time_unit"] is None and settings["timeline_span"] == 24.0


@pytest.mark.parametrize(
    "file, options, message",
    [
        (TINY, ["--horizon", "5 TB"], 'argument --horizon: "5 TB" is a size; expected a duration'),
        (TINY, ["--horizon", "-2 h"], "argument --horizon: must be finite and > 0"),
        (TINY, ["--horizon", "nan"], "argument --horizon: must be finite and > 0"),
        (PLAIN, ["--horizon", "2 day"], "argument --horizon: a file of plain numbers has no time unit"),
        (TINY, ["--draws", "1"], "argument --draws: must be >= 2"),
        (TINY.replace('name = "small"', 'name = "fleet"'), [], "groups[1].name 'fleet' is reserved"),
    ],
)
def test_bad_options_are_one_error_line(tmp_path, capsys, file, options, message):
    path = tmp_path / "fleet.toml"
    path.write_text(file)
    assert main(["assess", str(path), *options, *FAST, "--out", str(tmp_path / "o")]) == 2
    line = one_error_line(capsys)
    assert line.startswith("ckpt-jax: error: ") and message in line, line
    assert not (tmp_path / "o" / "assess.json").exists()


LONE = """
time_unit = "min"

[storage]
peak = "1 GB/s"

[[groups]]
name = "lone"
count = 1
gpus = 8
checkpoint = "60 GB"              # D = 60 s
mtbf = "1 h"
restart = "2 min"
interval = "10 min"
"""


def test_lone_job_goodput_through_a_file_with_units_is_the_renewal_formula(tmp_path, capsys):
    # One job: no contention is possible, and its goodput is the renewal formula (claim 10)
    # evaluated in seconds, the engine's time of a file with units.
    path = tmp_path / "lone.toml"
    path.write_text(LONE)
    out = tmp_path / "out"
    horizon_min = 15_000
    argv = ["assess", str(path), "--horizon", f"{horizon_min} min", "--draws", "32", "--no-progress"]
    assert main([*argv, "--devices", "1", "--out", str(out)]) == 0
    summary = json.loads((out / "assess.json").read_text())
    compute, write, mtbf, restart, horizon = 600.0, 60.0, 3600.0, 120.0, horizon_min * 60.0
    formula = 1 - float(cj.theory.renewal_waste(compute, write, mtbf, restart))
    goodput = summary["goodput"]["fleet"]
    assert summary["goodput"]["lone"] == goodput
    # Within the CI, widened by the random launch's partial first cycle (at most one cycle over H).
    bias = (compute + write) / horizon
    assert goodput["low"] - bias < formula < goodput["high"] + bias, (goodput, formula)
    assert goodput["high"] - goodput["low"] < 0.02  # a CI tight enough to mean something
    assert summary["lost_fraction"]["fleet"]["backpressure"]["mean"] == 0


def test_help_states_each_default_once(capsys):
    assert main(["assess", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    for option in ("--horizon H", "--draws S", "--seed SEED", "--quick", "--no-progress", "--x64", "--out DIR"):
        assert option in text, option
    assert "%%" not in text and "(default: None)" not in text and "(default: False)" not in text
    assert "(default: 64)" in text and "taken as hours" in text
