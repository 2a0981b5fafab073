"""Claim 13 (interval design against cooperative scheduling, cielo): the smoke run, the fleet
against examples/cielo.toml, and the verdict rules on hand-made numbers."""

from pathlib import Path

import numpy as np
import pytest
from experiment_checks import check_experiment_result

from ckpt_jax.experiments import EXPERIMENTS, INCONCLUSIVE, NOT_REPRODUCED, REPRODUCED, cooperative
from ckpt_jax.fleetfile import load

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "cielo.toml"


@pytest.mark.slow  # a whole experiment at smoke size; `reproduce --quick` runs it too
def test_cooperative_smoke(tmp_path):
    assert cooperative.EXPERIMENT in EXPERIMENTS
    result = cooperative.run(tmp_path, size="smoke", progress=False)
    check_experiment_result(cooperative, result, tmp_path, one_verdict_per_claim=False)
    assert [v["sub_claim"] for v in result["verdicts"]] == ["13", "13 peer"]
    (setting,) = result["numbers"]["settings"]
    built = set(setting["waste"]) | set(setting["missing"])
    assert built == set(cooperative.STRATEGIES) | set(cooperative.DESIGNS)
    for estimate in setting["waste"].values():
        assert 0 < estimate["low"] <= estimate["mean"] <= estimate["high"] < 1


def test_the_fleet_is_the_example_file():
    """examples/cielo.toml (units, failure rate per node) and the experiment's own fleet agree."""
    from_file = load(EXAMPLE).fleet()
    built = cooperative.cielo_fleet(40.0, 8.0, "weighted")
    for field in ("write", "size", "mtbf", "restart"):
        np.testing.assert_allclose(np.asarray(getattr(from_file, field)), np.asarray(getattr(built, field)), rtol=1e-12)
    np.testing.assert_allclose(np.asarray(from_file.throughput)[1:], np.asarray(built.throughput)[1:], rtol=1e-12)
    assert from_file.storage_policy == built.storage_policy
    # The solo checkpoint times of the classes, as the peer's paper gives them (1,311, 379, 5,734, 1,275 s).
    solo = np.asarray(built.write) / 40e9
    np.testing.assert_allclose(np.unique(np.round(solo)), [379, 1275, 1311, 5734])


def _setting(beat, add):
    estimate = lambda mean, half: dict(mean=mean, low=mean - half, high=mean + half)  # noqa: E731
    return dict(
        bandwidth_gbs=40.0,
        mtbf_hours=2.0,
        waste={"cooperative": estimate(0.2, 0.01)},
        differences={
            "design (proportional) minus cooperative": estimate(*beat),
            "design (cooperative) minus cooperative": estimate(*add),
        },
        intervals_hours={"cooperative": [1.0, 2.0, 3.0, 4.0]},
        missing=[],
    )


@pytest.mark.parametrize(
    "beat, add, outcome, words",
    [
        ((-0.05, 0.01), (-0.03, 0.01), REPRODUCED, ("beats", "adds to it")),
        ((0.05, 0.01), (0.0, 0.001), REPRODUCED, ("is worse than", "matches")),
        ((0.0, 0.02), (-0.03, 0.01), INCONCLUSIVE, ("undecided",)),
    ],
)
def test_verdict_13_decides_from_the_paired_differences(beat, add, outcome, words):
    entry = cooperative.verdict_13([_setting(beat, add)])
    assert entry["verdict"] == outcome
    for word in words:
        assert word in entry["why"]


@pytest.mark.parametrize("theirs, outcome", [(0.05, REPRODUCED), (0.2, NOT_REPRODUCED)])
def test_verdict_13_peer_against_the_published_increment(theirs, outcome, monkeypatch):
    estimate = lambda mean, half: dict(mean=mean, low=mean - half, high=mean + half)  # noqa: E731
    point = dict(
        bandwidth_gbs=40.0,
        mtbf_hours=8.0,
        no_interference=estimate(0.09, 0.01),
        proportional=estimate(0.14, 0.01),
        increment=estimate(0.2, 0.004),  # a fixed down time: not what is judged
        with_peer_recovery=dict(
            no_interference=estimate(0.1, 0.01), proportional=estimate(0.15, 0.01), increment=estimate(0.047, 0.004)
        ),
        peer_increment=theirs,
    )
    assert cooperative.verdict_13_peer([point])["verdict"] == outcome
