"""Fleet files (`ckpt_jax.fleetfile`): parsing, the fleet they build, and every bad field named."""

import math
import os
from pathlib import Path

import numpy as np
import pytest

import ckpt_jax as cj
from ckpt_jax.fleetfile import FleetFileError, dumps, load, loads

TINY = """
throughput = "shared"
cap = 3.0
power_policy = "uniform"
storage_policy = "weighted"

[design]
bounds = [0.5, 50.0]
horizon = 100.0
draws = 4
seed = 7

[[groups]]
name = "small"
count = 2
size = 1
write = 0.5
mtbf = 20.0
restart = 0.5
compute = 3.0

[[groups]]
name = "big"
count = 1
size = 2
write = 1.0
mtbf = 10.0
"""


def test_parse_and_build_fleet():
    spec = loads(TINY, "tiny.toml")
    assert spec.n_jobs == 3 and spec.names == ("small", "big")
    np.testing.assert_array_equal(spec.labels, [0, 0, 1])
    assert spec.cap == 3.0 and spec.design.seed == 7 and spec.bounds() == (0.5, 50.0)
    fleet = spec.fleet(dtype=np.float64)
    assert isinstance(fleet, cj.Fleet) and fleet.n_jobs == 3
    assert fleet.power_policy == "uniform" and fleet.storage_policy == "weighted"
    np.testing.assert_allclose(np.asarray(fleet.size), [1, 1, 2])
    np.testing.assert_allclose(np.asarray(fleet.mtbf), [20, 20, 10])
    np.testing.assert_allclose(np.asarray(fleet.restart), [0.5, 0.5, 0])
    # The big group has no compute: Young's √(2·d/f(1)·M).
    np.testing.assert_allclose(np.asarray(fleet.compute), [3.0, 3.0, math.sqrt(2 * 1.0 * 10.0)])
    assert not np.isfinite(np.asarray(spec.fleet(failures=False, dtype=np.float64).mtbf)).any()


def test_round_trip_through_text(tmp_path):
    spec = loads(TINY, "tiny.toml")
    path = tmp_path / "again.toml"
    path.write_text(dumps(spec))
    again = load(path)
    assert again.groups == spec.groups and again.design == spec.design
    assert again.to_dict() | {"path": None} == spec.to_dict() | {"path": None}


def test_write_limits_snapshots_and_the_idle_draw_round_trip(tmp_path):
    text = (
        TINY.replace(
            'storage_policy = "weighted"', 'storage_policy = "weighted"\nrecover_from = "memory"\nidle_power = 0.3'
        )
        .replace("compute = 3.0", "compute = 3.0\nwrite_limit = 0.2\nsnapshot = 0.0")
        .replace("mtbf = 10.0", "mtbf = 10.0\nsnapshot = 0.25")
    )
    spec = loads(text, "t.toml")
    assert spec.has_snapshots and spec.recover_from == "memory" and spec.idle_power == 0.3
    fleet = spec.fleet(dtype=np.float64)
    np.testing.assert_array_equal(np.asarray(fleet.write_limit), [0.2, 0.2, np.inf])
    np.testing.assert_array_equal(np.asarray(fleet.snapshot), [0.0, 0.0, 0.25])
    assert fleet.recover_from == "memory" and float(fleet.idle_power) == 0.3
    # Alone, "small" drains 0.5 at its limit 0.2 (in 2.5) and "big" at f(1) = 1 (in 1).
    np.testing.assert_allclose(spec.solo_write_time(), [2.5, 2.5, 1.0])
    np.testing.assert_allclose(spec.period(), [0.0 + 3.0, 3.0, 0.25 + max(math.sqrt(2 * 0.25 * 10.0), 1.0)])
    path = tmp_path / "again.toml"
    path.write_text(dumps(spec))
    again = load(path)
    assert again.groups == spec.groups and (again.recover_from, again.idle_power) == ("memory", 0.3)
    assert again.to_dict() | {"path": None} == spec.to_dict() | {"path": None}
    # A file without the new fields is written and described as before.
    plain = loads(TINY, "t.toml")
    assert "recover_from" not in dumps(plain) and "idle_power" not in dumps(plain)
    assert not {"recover_from", "idle_power"} & set(plain.to_dict())
    assert not {"write_limit", "snapshot"} & set(plain.to_dict()["groups"][0])
    assert plain.fleet().has_snapshots is False and plain.fleet().has_write_limits is False


def test_recovery_reads_and_failures_while_down_round_trip(tmp_path):
    text = TINY.replace('storage_policy = "weighted"', 'storage_policy = "weighted"\nfail_while_down = true').replace(
        "compute = 3.0", "compute = 3.0\nrecovery_read = 0.75"
    )
    spec = loads(text, "t.toml")
    assert spec.fail_while_down and spec.groups[0].recovery_read == 0.75 and spec.groups[1].recovery_read is None
    fleet = spec.fleet(dtype=np.float64)
    np.testing.assert_array_equal(np.asarray(fleet.recovery_read), [0.75, 0.75, 0.0])
    assert fleet.fail_while_down and fleet.has_recovery_reads
    path = tmp_path / "again.toml"
    path.write_text(dumps(spec))
    again = load(path)
    assert again.groups == spec.groups and again.fail_while_down
    assert again.to_dict() | {"path": None} == spec.to_dict() | {"path": None}
    # A file without them is written and described as before; the fleet reads nothing.
    plain = loads(TINY, "t.toml")
    assert "fail_while_down" not in dumps(plain) and "recovery_read" not in dumps(plain)
    assert "fail_while_down" not in plain.to_dict() and "recovery_read" not in plain.to_dict()["groups"][0]
    assert not plain.fleet().fail_while_down and not plain.fleet().has_recovery_reads


def test_a_recovery_read_with_units_is_a_size():
    text = """
time_unit = "min"
[storage]
peak = "2 TB/s"
[[groups]]
count = 2
gpus = 8
checkpoint = "100 GB"
recovery_read = "0.5 TB"
mtbf = "2 h"
"""
    spec = loads(text, "u.toml")
    assert spec.groups[0].recovery_read == 0.5e12
    assert 'recovery_read = "500000000000.0 B"' in dumps(spec)
    assert loads(dumps(spec), "again.toml").groups == spec.groups
    with pytest.raises(FleetFileError, match=r"groups\[0\]\.recovery_read"):
        loads(text.replace('"0.5 TB"', '"3 min"'), "u.toml")


@pytest.mark.parametrize(
    "changes, field, message",
    [
        ({"mtbf = 10.0": "mtbf = 10.0\nsnapshot = 0.1"}, r"groups\[0\]\.snapshot", "missing: groups"),
        (
            {
                "mtbf = 10.0": "mtbf = 10.0\nsnapshot = 0.1",
                "compute = 3.0": "compute = 3.0\nsnapshot = 0.1",
                "cap": "async_fraction = 0.5\ncap",
            },
            "async_fraction",
            "must be 0 with snapshots",
        ),
        ({"cap": 'recover_from = "memory"\ncap'}, "recover_from", "'memory' needs snapshots"),
    ],
    ids=["snapshot in one group only", "snapshot and async", "memory without snapshots"],
)
def test_two_level_fields_that_do_not_go_together_name_the_field(changes, field, message):
    text = TINY
    for old, new in changes.items():
        text = text.replace(old, new, 1)
    with pytest.raises(FleetFileError, match=rf"t.toml: {field}: {message}"):
        loads(text, "t.toml")


def test_two_level_example_file_loads():
    spec = load("examples/fleet_two_level.toml")
    assert spec.n_jobs == 32 and spec.has_snapshots and spec.fleet().has_write_limits
    # Alone each job drains at min(b, f(1)) = 0.5: D = 2d; Young's max(√(2·s·M), D) as the file says.
    np.testing.assert_allclose(spec.solo_write_time()[::8], [1.0, 2.0, 4.0, 8.0])
    np.testing.assert_allclose(spec.young()[::8], [math.sqrt(20.0)] * 3 + [8.0])


def test_example_file_loads():
    spec = load("examples/fleet.toml")
    assert spec.n_jobs == 32 and len(spec.groups) == 4
    np.testing.assert_allclose(spec.young(), math.sqrt(200.0))
    total = float(np.sum(spec.per_job("size")))
    assert spec.cap < total  # the cap binds


def test_group_bounds_override_the_fleet_bounds(tmp_path):
    text = _set(TINY, "groups[1]", "bounds", "[2.0, 20.0]")
    spec = loads(text, "tiny.toml")
    assert spec.groups[1].bounds == (2.0, 20.0) and spec.groups[0].bounds is None
    assert spec.group_bounds() == ((0.5, 50.0), (2.0, 20.0))
    lo, hi = spec.job_bounds()
    np.testing.assert_array_equal(lo, [0.5, 0.5, 2.0])
    np.testing.assert_array_equal(hi, [50.0, 50.0, 20.0])
    path = tmp_path / "again.toml"
    path.write_text(dumps(spec))
    assert load(path).groups == spec.groups
    assert spec.to_dict()["groups"][1]["bounds"] == [2.0, 20.0]
    designed = loads(_set(TINY, "design", "offsets", "true"))
    assert designed.design.offsets is True and loads(dumps(designed)).design == designed.design


def test_throughput_list_and_uncapped():
    text = TINY.replace('throughput = "shared"', "throughput = [1.0, 1.5, 2.0]").replace("cap = 3.0", 'cap = "none"')
    spec = loads(text)
    assert spec.cap is None and spec.throughput == (1.0, 1.5, 2.0)
    fleet = spec.fleet(dtype=np.float64)
    np.testing.assert_allclose(np.asarray(fleet.throughput)[1:], [1.0, 1.5, 2.0])


# Each case: (path of the field, a bad value as TOML). The error must name the file and field.
GROUP_FIELDS = {
    "count": ["0", "-1", "1.5", "true", '"8"', "100001"],
    "size": ["0", "-2.0", "nan", "inf", '"big"', "false", "[1]"],
    "write": ["0", "-0.5", "nan", "inf", '"x"'],
    "mtbf": ["0", "-3", "nan", "inf", '"x"', "true"],
    "restart": ["-1", "nan", "inf", '"x"'],
    "compute": ["0", "-1", "inf", '"x"'],
    "bounds": ["[1.0]", "[5.0, 1.0]", "[2.0, 2.0]", "[0.0, 1.0]", "3", "[1.0, inf]", '["a", 2.0]'],
    "name": ['""', "3", '"' + "x" * 41 + '"'],
    "write_limit": ["0", "-1", "nan", "inf", '"x"'],
    "snapshot": ["-0.1", "nan", "inf", '"x"', "true"],
    "recovery_read": ["-0.1", "nan", "inf", '"x"', "true"],
}
TOP_FIELDS = {
    "throughput": ['"fast"', "3", "[1.0, 2.0]", "[1.0, -1.0, 1.0]"],
    "cap": ["0", "-1", "nan", '"lots"', "true"],
    "power_policy": ['"fair"', "1"],
    "storage_policy": ['"maxmin"', "1"],
    "delay": ["-1", "nan"],
    "async_fraction": ["-0.1", "1.5"],
    "recover_from": ['"disk"', "1"],
    "idle_power": ["-0.1", "1.5", "nan", '"x"'],
    "fail_while_down": ["1", '"yes"', "0.0"],
}
DESIGN_FIELDS = {
    "bounds": ["[1.0]", "[5.0, 1.0]", "[2.0, 2.0]", "[0.0, 1.0]", "3", "[1.0, inf]"],
    "horizon": ["0", "-1", "inf", '"x"'],
    "draws": ["1", "0", "2.5", "true"],
    "pairs": ["0", "1.5"],
    "steps": ["0", "-3"],
    "seed": ["-1", "18446744073709551616", "1.0"],
    "launch": ['"staggered"', "1"],
    "offsets": ['"yes"', "1"],
}


def _set(text: str, table: str, key: str, value: str) -> str:
    """TINY with ``key = value`` set in ``table`` ("" top level, "design", "groups[1]")."""
    lines = text.splitlines()
    header = {"": None, "design": "[design]", "groups[1]": "[[groups]]"}[table]
    start = 0 if header is None else [i for i, line in enumerate(lines) if line == header][-1] + 1
    end = next((i for i in range(start, len(lines)) if lines[i].startswith("[")), len(lines))
    body = [line for line in lines[start:end] if not line.startswith(f"{key} =")]
    return "\n".join(lines[:start] + [f"{key} = {value}"] + body + lines[end:]) + "\n"


CASES = (
    [("groups[1]", key, value) for key, values in GROUP_FIELDS.items() for value in values]
    + [("", key, value) for key, values in TOP_FIELDS.items() for value in values]
    + [("design", key, value) for key, values in DESIGN_FIELDS.items() for value in values]
)


@pytest.mark.parametrize("table, key, value", CASES)
def test_every_bad_field_names_file_and_field(table, key, value):
    text = _set(TINY, table, key, value)
    with pytest.raises(FleetFileError) as info:
        loads(text, "fleets/bad.toml")
    message = str(info.value)
    field = f"{table}.{key}" if table else key
    assert "fleets/bad.toml" in message
    assert field in message, message
    assert "must" in message or "at most" in message or "unique" in message, message


@pytest.mark.parametrize(
    "table, key, near",
    [("", "troughput", "throughput"), ("design", "horizn", "horizon"), ("groups[1]", "mtfb", "mtbf")],
)
def test_unknown_keys_are_errors(table, key, near):
    with pytest.raises(FleetFileError, match=rf"unknown key \(did you mean '{near}'\? allowed: "):
        loads(_set(TINY, table, key, "1.0"), "t.toml")
    with pytest.raises(
        FleetFileError, match=(f"{table}.{key}" if table else key).replace("[", r"\[").replace("]", r"\]")
    ):
        loads(_set(TINY, table, key, "1.0"), "t.toml")


@pytest.mark.parametrize("key", ["count", "size", "write", "mtbf"])
def test_missing_group_keys(key):
    text = TINY.replace(f"\n{key} =", f"\n# {key} =")
    with pytest.raises(FleetFileError, match=rf"t.toml: groups\[0\]\.{key}: missing"):
        loads(text, "t.toml")


def test_file_level_errors(tmp_path):
    with pytest.raises(FleetFileError, match="cannot read it"):
        load(tmp_path / "absent.toml")
    (tmp_path / "broken.toml").write_text("groups = [\n")
    with pytest.raises(FleetFileError, match="broken.toml: not valid TOML"):
        load(tmp_path / "broken.toml")
    with pytest.raises(FleetFileError, match="groups: missing"):
        loads('throughput = "shared"\n', "t.toml")
    with pytest.raises(FleetFileError, match="groups: must be a non-empty"):
        loads('throughput = "shared"\ngroups = []\n', "t.toml")
    duplicated = TINY.replace('name = "big"', 'name = "small"')
    with pytest.raises(FleetFileError, match=r"groups\[1\]\.name: must be unique"):
        loads(duplicated, "t.toml")


# -- what the engine refuses is refused at load time, naming the field -----------------------
ENGINE_REFUSES = [  # (table, key, value, the field named): each in the TOML type the reader takes
    ("groups[1]", "mtbf", "1e308", "groups[1].mtbf"),
    ("groups[1]", "mtbf", "1e-300", "groups[1].mtbf"),
    ("groups[1]", "write", "1e308", "groups[1].write"),
    ("groups[1]", "size", "1e300", "groups[1].size"),
    ("groups[1]", "compute", "1e300", "groups[1].compute"),
    ("groups[1]", "restart", "1e300", "groups[1].restart"),
    ("groups[1]", "bounds", "[1e-300, 2.0]", "groups[1].bounds[0]"),
    ("", "throughput", "[1e-300, 1e-300, 1e-300]", "throughput[0]"),
    ("", "cap", "1e300", "cap"),
    ("", "delay", "1e300", "delay"),
    ("design", "bounds", "[1e-300, 1e300]", "design.bounds[0]"),
    ("design", "bounds", "[1.0, 1e300]", "design.bounds[1]"),
    ("design", "horizon", "1e308", "design.horizon"),
    # A run the event budget cannot finish: H / (M + R) failures per job alone.
    ("design", "horizon", "1e12", "design.horizon"),
]


@pytest.mark.parametrize("table, key, value, field", ENGINE_REFUSES, ids=[f"{c[1]}={c[2]}" for c in ENGINE_REFUSES])
def test_every_value_the_engine_refuses_names_file_and_field(table, key, value, field):
    with pytest.raises(FleetFileError) as info:
        loads(_set(TINY, table, key, value), "fleets/bad.toml")
    message = str(info.value)
    assert message.startswith(f"fleet file fleets/bad.toml: {field}"), message
    assert "must" in message or "cannot finish" in message, message


@pytest.mark.parametrize(
    "changes, field",
    [
        # Young's interval √(2·d/f(1)·M), the interval the run uses without compute.
        ({"write": "9e288", "mtbf": "9e288"}, r"groups\[1\]: Young's interval must lie in .*set groups\[1\]\.compute"),
        # The solo period T + d / f(1), as cj.Fleet checks it.
        ({"write": "9e288", "compute": "9e288"}, r"groups\[1\] \(its solo period T \+ d / f\(1\)\): must lie in"),
    ],
    ids=["young", "solo period"],
)
def test_what_fields_make_together_is_refused_naming_the_group(changes, field):
    text = TINY
    for key, value in changes.items():  # each in range alone
        text = _set(text, "groups[1]", key, value)
    with pytest.raises(FleetFileError, match="t.toml: " + field):
        loads(text, "t.toml")


def test_values_are_checked_in_the_dtype_the_run_uses():
    text = _set(TINY, "groups[1]", "mtbf", "1e25")  # a float64, not a float32
    assert loads(text, "t.toml").groups[1].mtbf == 1e25
    with pytest.raises(FleetFileError, match=r"t.toml: groups\[1\]\.mtbf: must lie in .* float32"):
        loads(text, "t.toml", dtype=np.float32)


def test_a_horizon_within_the_budget_loads_and_says_its_events():
    spec = loads(TINY, "t.toml")  # H = 100: 2 cycles per solo period, 2 events per failure
    period = spec.intervals() + spec.solo_write_time()
    expected = np.sum(2 * 100 / period + 2 * 100 / (spec.per_job("mtbf") + spec.per_job("restart")))
    assert spec.events() == pytest.approx(expected)


# -- files that are not fleet files ----------------------------------------------------------
@pytest.mark.parametrize("where", ["mtbf = {}", "cap = {}", "nested = {}"])
def test_deeply_nested_arrays_are_an_error(where):
    nested = "[" * 5000 + "]" * 5000
    with pytest.raises(FleetFileError, match="t.toml: .*nested too deeply"):
        loads(
            TINY + "\n" + where.format(nested) + "\n"
            if where.startswith("nested")
            else _set(TINY, "", where.split()[0], nested)
            if where.startswith("cap")
            else _set(TINY, "groups[1]", "mtbf", nested),
            "t.toml",
        )


def test_a_utf8_byte_order_mark_is_accepted(tmp_path):
    path = tmp_path / "bom.toml"
    path.write_bytes(b"\xef\xbb\xbf" + TINY.encode())
    assert load(path).names == ("small", "big")


@pytest.mark.parametrize(
    "name",
    ["two\nlines", "tab\there", "bell\x07", "del\x7f", "nul\x00", "sep\u2028"],
    ids=["newline", "tab", "bell", "delete", "nul", "line separator"],
)
def test_a_name_dumps_cannot_write_back_is_refused(name):
    escaped = "".join(c if c.isprintable() else f"\\u{ord(c):04x}" for c in name)  # TOML's escape
    text = TINY.replace('name = "big"', f'name = "{escaped}"')
    with pytest.raises(FleetFileError, match=r"t.toml: groups\[1\]\.name: must be printable"):
        loads(text, "t.toml")


@pytest.mark.parametrize("name", ['quote " and \\ backslash', "ünïcödé 🚀", "a | b"])
def test_names_loads_accepts_are_written_back_by_dumps(name):
    spec = loads(
        TINY.replace('name = "big"', 'name = "' + name.replace("\\", "\\\\").replace('"', '\\"') + '"'), "t.toml"
    )
    assert spec.names[1] == name
    assert loads(dumps(spec), "t.toml").names == spec.names


def test_the_python_required_has_tomllib():
    # Fleet files are read with the standard library's tomllib, new in Python 3.11: every
    # version pyproject.toml admits must have it.
    import pathlib
    import re
    import tomllib

    project = tomllib.loads((pathlib.Path(__file__).parents[1] / "pyproject.toml").read_text())["project"]
    lowest = re.fullmatch(r">=\s*(\d+)\.(\d+)", project["requires-python"].strip())
    assert lowest and (int(lowest[1]), int(lowest[2])) >= (3, 11), project["requires-python"]


@pytest.mark.parametrize("command", ["assess", "design", "compare", "simulate"])
def test_a_misspelt_key_is_reported_before_jax_is_imported(tmp_path, command):
    # Before: the command line imported JAX (and every experiment) first, and a misspelt key
    # took 4 s here, 17-27 s on a busy machine, to report; now about 0.6 s.
    import subprocess
    import sys

    path = tmp_path / "bad.toml"
    path.write_text(TINY.replace("compute = 3.0", "comptue = 3.0", 1))
    argv = {"simulate": ["simulate", "--fleet", str(path)], "compare": ["compare", str(path), "--set", "cap=2"]}
    argv = argv.get(command, [command, str(path)]) + ["--out", str(tmp_path / "out")]
    probe = f"import sys\nfrom ckpt_jax.cli import main\nstatus = main({argv!r})\nprint(status, 'jax' in sys.modules)"
    root = str(Path(__file__).resolve().parent.parent)
    done = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=root,
        env={**os.environ, "PYTHONPATH": root},
    )
    assert "groups[0].comptue: unknown key (did you mean 'compute'?" in done.stderr, done.stderr
    assert done.stdout.split() == ["2", "False"], done.stdout + done.stderr


def test_a_fleet_files_warning_is_one_line_on_the_command_line(tmp_path, capsys):
    from ckpt_jax.cli import main

    path = tmp_path / "fleet.toml"
    path.write_text(TINY.replace('storage_policy = "weighted"', 'storage_policy = "weighted"\nrestart_stagger = 0.5'))
    (tmp_path / "taken").write_text("")  # --out a file: refused after the fleet file is read, before any run
    assert main(["assess", str(path), "--out", str(tmp_path / "taken")]) == 2
    lines = capsys.readouterr().err.splitlines()
    assert lines[0] == (
        f"ckpt-jax: warning: fleet file {path}: restart_stagger: acts only with [[outages]] (the jobs one outage "
        "fails); this file has none"
    )
    assert lines[1].startswith("ckpt-jax: error: --out") and len(lines) == 2
