"""The knobs `ckpt-jax compare --sensitivity` ranks (`ckpt_jax.assess.sensitivity_knobs`; issue
49, item 4): the outage MTBF and the restart stagger where the file has outages, the power cap
where one is set, and the knobs that change nothing on the file left out with a word. No
simulation: the knobs are overrides of the file, checked as the command checks them."""

import pytest

from ckpt_jax.assess import sensitivity_knobs, sensitivity_left_out
from ckpt_jax.fleetfile import load, loads

BASE = 'throughput = "shared"\n[[groups]]\ncount = 2\nsize = 1\nwrite = 1.0\nmtbf = 100.0\nrestart = 2.0\n'


def test_outages_stagger_and_cap_are_knobs():
    spec = loads(
        BASE.replace('"shared"\n', '"shared"\ncap = 1.5\nrestart_stagger = 0.5\n') + "[[outages]]\nmtbf = 400.0\n"
    )
    knobs = sensitivity_knobs(spec, 0.1)
    assert knobs["outage MTBF"] == (
        {"outages[0].mtbf": pytest.approx(440.0)},
        {"outages[0].mtbf": pytest.approx(360.0)},
    )
    assert knobs["restart stagger"] == (
        {"restart_stagger": pytest.approx(0.55)},
        {"restart_stagger": pytest.approx(0.45)},
    )
    assert knobs["power cap"] == ({"cap": pytest.approx(1.65)}, {"cap": pytest.approx(1.35)})
    assert sensitivity_left_out(spec) == {}
    # Each is a scenario the file takes (`compare` applies them as overrides).
    for up, down in (knobs["outage MTBF"], knobs["restart stagger"], knobs["power cap"]):
        assert spec.override(up).to_dict() != spec.to_dict() != spec.override(down).to_dict()
    assert spec.override(knobs["outage MTBF"][0]).outages[0].mtbf == pytest.approx(440.0)
    assert spec.override(knobs["power cap"][1]).cap == pytest.approx(1.35)


def test_a_file_without_outages_or_cap_has_none_of_those_knobs():
    knobs = sensitivity_knobs(loads(BASE), 0.1)
    assert not {"outage MTBF", "restart stagger", "power cap"} & set(knobs)
    assert "MTBF" in knobs and sensitivity_left_out(loads(BASE)) == {}


def test_knobs_with_no_effect_on_the_file_are_left_out_with_a_word():
    # Replayed failures: the MTBF moves no failure.
    replayed = load("examples/fleet_failures.toml")
    assert "MTBF" not in sensitivity_knobs(replayed, 0.1)
    assert "failure_trace" in sensitivity_left_out(replayed)["MTBF"]
    # Replayed outages have no MTBF; a stagger of 0 stays 0 at ±10 %.
    listed = loads(BASE + "[[outages]]\ntimes = [50.0, 120.0]\n")
    knobs, left_out = sensitivity_knobs(listed, 0.1), sensitivity_left_out(listed)
    assert not {"outage MTBF", "restart stagger"} & set(knobs)
    assert set(left_out) == {"outage MTBF", "restart stagger"}
    assert "listed times" in left_out["outage MTBF"] and "restart_stagger is 0" in left_out["restart stagger"]


def test_a_cap_in_watts_is_a_knob_in_gpus_draw():
    text = (
        'power_per_gpu = "700 W"\ncap = "10 kW"\n[storage]\npeak = "1 TB/s"\n[[groups]]\ncount = 2\ngpus = 8\n'
        'checkpoint = "1 TB"\nmtbf = "10 h"\n'
    )
    spec = loads(text)
    up, down = sensitivity_knobs(spec, 0.1)["power cap"]
    assert up == {"cap": pytest.approx(1.1 * 1e4 / 700)}
    assert spec.override(down).cap == pytest.approx(0.9 * 1e4 / 700)
