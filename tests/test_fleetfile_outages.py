"""Fleet files with failure domains, ``[[outages]]`` tables and ``restart_stagger``
(docs/model.md §1f): parsing, the fleet they build, the round trip, and every bad key named."""

import re

import jax
import numpy as np
import pytest
from test_fleetfile import TINY

import ckpt_jax as cj
from ckpt_jax.fleetfile import FleetFileError, dumps, load, loads

RACKS = (
    TINY.replace("compute = 3.0", 'compute = 3.0\ndomain = "rack-a"')
    + """
[[outages]]
domain = "rack-a"
mtbf = 40.0

[[outages]]
mtbf = 80.0
"""
).replace('storage_policy = "weighted"', 'storage_policy = "weighted"\nrestart_stagger = 0.25')


def test_domains_outages_and_stagger_build_the_fleet_and_round_trip(tmp_path):
    spec = loads(RACKS, "racks.toml")
    assert spec.domains == ("rack-a", "cluster") and spec.restart_stagger == 0.25
    np.testing.assert_array_equal(spec.domain_index(), [0, 0, 1])
    fleet = spec.fleet(dtype=np.float64)
    np.testing.assert_array_equal(np.asarray(fleet.domain), [0, 0, 1])
    np.testing.assert_array_equal(np.asarray(fleet.outage_mtbf), [40.0, 80.0])
    assert fleet.outage_kind == "drawn" and float(fleet.restart_stagger) == 0.25
    assert not spec.fleet(failures=False, dtype=np.float64).has_outages
    path = tmp_path / "again.toml"
    path.write_text(dumps(spec))
    again = load(path)
    assert again.groups == spec.groups and again.outages == spec.outages and again.restart_stagger == 0.25
    assert again.to_dict() | {"path": None} == spec.to_dict() | {"path": None}
    # A file without them is written and described as before.
    plain = loads(TINY, "t.toml")
    assert "outages" not in dumps(plain) and "domain" not in dumps(plain) and "restart_stagger" not in dumps(plain)
    assert "outages" not in plain.to_dict() and "domain" not in plain.to_dict()["groups"][0]
    assert not plain.fleet().has_outages


def test_replayed_outages_with_units_and_a_run_that_takes_them():
    text = """
time_unit = "min"
restart_stagger = "30 s"
[storage]
peak = "1 GB/s"
[[groups]]
name = "a"
count = 2
gpus = 1
checkpoint = "60 GB"
mtbf = "1000 h"
interval = "10 min"
restart = "1 min"
domain = "rack-a"
[[groups]]
name = "b"
count = 1
gpus = 1
checkpoint = "60 GB"
mtbf = "1000 h"
interval = "10 min"
[[outages]]
domain = "rack-a"
times = ["5 min", "1 h"]
[[outages]]
domain = "cluster"
times = ["30 min"]
"""
    spec = loads(text, "u.toml")
    assert spec.restart_stagger == 30.0 and spec.outages[0].times == (300.0, 3600.0)
    fleet = spec.fleet(dtype=np.float64)
    np.testing.assert_array_equal(np.asarray(fleet.outage_times), [300.0, 1800.0, 3600.0])
    np.testing.assert_array_equal(np.asarray(fleet.outage_domains), [0, 1, 0])
    assert loads(dumps(spec), "u.toml").outages == spec.outages
    # Every job starts computing at t = 0: each outage finds its domain's jobs up.
    out = cj.simulate(fleet, cj.initial_state(fleet), 8, until=7200.0, key=jax.random.key(0), save=cj.SaveAt(jobs=True))
    np.testing.assert_array_equal(np.asarray(out.jobs.outage_failures), [2, 2, 1])
    # The second job of rack-a restarts 30 s after the first, at each of its two outages.
    np.testing.assert_allclose(np.asarray(out.jobs.stagger_time), [0.0, 60.0, 0.0])


@pytest.mark.parametrize(
    "old, new, field",
    [
        ('domain = "rack-a"\nmtbf = 40.0', 'domain = "rack-z"\nmtbf = 40.0', "outages[0].domain"),
        ("mtbf = 80.0", 'domain = "rack-a"\nmtbf = 80.0', "outages[1].domain"),
        ("mtbf = 80.0", "mtbf = 80.0\ntimes = [1.0]", "outages[1].mtbf"),
        ("mtbf = 80.0", "times = [1.0, 2.0]", "outages[1].times"),
        ("mtbf = 40.0", "times = [2.0, 1.0]", "outages[0].times"),
        ("mtbf = 40.0", "times = [0.0]", "outages[0].times[0]"),
        ("mtbf = 40.0", "mtbf = -1.0", "outages[0].mtbf"),
        ("mtbf = 80.0", "mtbf = 80.0\nrack = 1", "outages[1].rack"),
        ("restart_stagger = 0.25", "restart_stagger = -0.25", "restart_stagger"),
        ('compute = 3.0\ndomain = "rack-a"', "compute = 3.0\ndomain = 3", "groups[0].domain"),
        ('storage_policy = "weighted"', 'storage_policy = "fcfs_nonblocking"', "storage_policy"),
        ("mtbf = 20.0", "mtbf = 20.0\nfailure_shape = 0.7", "groups[0].failure_shape"),
    ],
)
def test_every_bad_outage_key_is_named(old, new, field):
    assert old in RACKS
    with pytest.raises(FleetFileError, match=re.escape(f"racks.toml: {field}:")):
        loads(RACKS.replace(old, new, 1), "racks.toml")


def test_overrides_reach_the_outage_tables_and_the_stagger():
    spec = loads(RACKS, "racks.toml")
    scenario = spec.override({"outages[0].mtbf": 20.0, "restart_stagger": 1.0})
    assert scenario.restart_stagger == 1.0 and scenario.outages[0].mtbf == 20.0
    replayed = spec.override({"outages[0].times": [2.0], "outages[1].times": [5.0, 9.0]})
    assert replayed.outages[0].mtbf is None and replayed.outages[1].times == (5.0, 9.0)  # times replace mtbf
    assert replayed.fleet().outage_kind == "listed"
    with pytest.raises(FleetFileError, match=re.escape("outages[1].times: outages[0] has mtbf")):
        spec.override({"outages[1].times": [5.0]})  # one table draws, the other replays
    with pytest.raises(FleetFileError, match=re.escape("override outages[2].mtbf: no outages[2]")):
        spec.override({"outages[2].mtbf": 5.0})


def test_outage_instants_count_in_the_event_estimate_and_the_up_front_refusal():
    # Each outage instant is an event whether it finds a job up or not: mtbf = 1 s over two
    # days was estimated at 432 events a run (the jobs' cycles and failures only), then ran
    # with 173 k and no warning; at 0.1 ms over a week the run could never finish.
    from ckpt_jax._plan import check_horizon_events, least_events

    often = RACKS.replace("mtbf = 40.0", "mtbf = 1e-3").replace("mtbf = 80.0", "mtbf = 1e-4")
    spec = loads(often, "racks.toml")
    fleet = spec.fleet(dtype=np.float64)
    horizon = 1e6
    instants = horizon / 1e-3 + horizon / 1e-4
    assert spec.events(horizon) >= instants and float(fleet.events(horizon)) >= instants
    assert float(fleet.outage_events(horizon)) == pytest.approx(instants)
    assert float(least_events(fleet, horizon)) >= 0.5 * instants  # a lower bound: half the drawn mean
    with pytest.raises(
        ValueError, match=r"horizon = 1e\+06 cannot finish within the event budget: .*, outage instants\)"
    ):
        check_horizon_events(fleet, horizon, name="horizon")
    # Replayed outages: every listed instant up to H, in a domain with active jobs.
    listed = RACKS.replace("mtbf = 40.0", "times = [1.0, 2.0, 500.0]").replace("mtbf = 80.0", "times = [3.0]")
    spec = loads(listed, "racks.toml")
    assert float(spec.fleet(dtype=np.float64).outage_events(100.0)) == 3.0
    assert spec.events(100.0) - loads(TINY, "t.toml").events(100.0) >= 3.0


def test_keys_that_change_nothing_without_outages_warn():
    # Before: restart_stagger without [[outages]], or a group's domain no outage table names,
    # loaded silently and changed nothing.
    from ckpt_jax.fleetfile import FleetFileWarning

    stagger = TINY.replace('storage_policy = "weighted"', 'storage_policy = "weighted"\nrestart_stagger = 0.25')
    with pytest.warns(FleetFileWarning, match=r"restart_stagger: acts only with \[\[outages\]\]"):
        loads(stagger, "t.toml")
    typo = RACKS.replace('domain = "rack-a"\nmtbf = 40.0', 'domain = "rack-a"\nmtbf = 40.0', 1).replace(
        'compute = 3.0\ndomain = "rack-a"', 'compute = 3.0\ndomain = "rack-b"'
    )
    typo = typo.replace('[[outages]]\ndomain = "rack-a"\nmtbf = 40.0\n\n', "")
    with pytest.warns(FleetFileWarning, match=r"groups\[0\]\.domain: 'rack-b' is no \[\[outages\]\] table's domain"):
        loads(typo, "racks.toml")
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error", FleetFileWarning)
        loads(RACKS, "racks.toml")  # every domain struck: no warning


@pytest.mark.parametrize(
    ("stagger", "match"),
    [
        (1e30, r"launch\.stagger: 1e\+30 puts the first of the 3 jobs 2e\+30 ahead of the last, over 1e\+06 solo"),
        (1e-300, r"launch\.stagger: must lie in \["),
    ],
)
def test_a_launch_stagger_out_of_range_is_refused(stagger, match):
    # Before: 1e30 loaded and every launch position lost all its digits (the head start mod
    # the cycle); 1e-300 loaded below the engine's range.
    text = TINY.replace("[design]", f'[launch]\nmode = "staggered"\nstagger = {stagger!r}\n\n[design]')
    with pytest.raises(FleetFileError, match=match):
        loads(text, "t.toml")
