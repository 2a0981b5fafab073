"""The claim-15 experiment (overhead): its verdict rules and figures on hand-made numbers (cheap,
in the tier), and a smoke run (slow: it runs a design of the LLM cluster's largest job)."""

import copy

import pytest
from experiment_checks import check_experiment_result

from ckpt_jax.experiments import EXPERIMENTS, INCONCLUSIVE, NOT_REPRODUCED, PARTIALLY, REPRODUCED, overhead


def _estimate(mean, half=1.0):
    return dict(mean=mean, low=mean - half, high=mean + half)


SOLO = dict(
    write=3.25,
    mtbf=10080.0,
    restart=1020.0,
    gpus=16384.0,
    horizon=86400.0,
    draws=4,
    rows=[
        dict(
            overhead=o,
            young_without=256.0,
            young_with=256.0 * ((o + 3.25) / 3.25) ** 0.5,
            optimum=250.0 * ((o + 3.25) / 3.25) ** 0.5,
            optimum_vs_young=250.0 / 256.0 - 1,
            formula_waste=0.1,
            waste_with=_estimate(0.1, 0.01),
            saved_gpu_hours=_estimate(100.0 * o, 10.0),
        )
        for o in (0.0, 30.0, 120.0)
    ],
)
CLUSTER = dict(
    groups=["big", "small"],
    days=1.0,
    draws=2,
    pairs=1,
    rows=[
        dict(
            overhead=o,
            designed=[300.0 * (1 + o / 30), 900.0 * (1 + o / 60)],
            young_with=[300.0 * (1 + o / 30), 900.0 * (1 + o / 60)],
            young_without=[300.0, 900.0],
            current=[1800.0, 1800.0],
            fallback=None,
            converged=True,
            saved_gpu_hours={
                "current": _estimate(500.0),
                "young": _estimate(0.0, 5.0),
                "young_without_overhead": _estimate(50.0 * o + (10.0 if o == 0 else 0.0)),
            },
        )
        for o in (0.0, 60.0)
    ],
)


def test_verdicts_and_figures_on_hand_made_numbers(tmp_path):
    assert overhead.EXPERIMENT in EXPERIMENTS and overhead.EXPERIMENT.claims == (15,)
    outcome, entry = overhead.verdict_15a(SOLO)
    assert outcome == REPRODUCED and entry["sub_claim"] == "15a"
    assert len(entry["table"]["rows"]) == 3
    far = copy.deepcopy(SOLO)
    far["rows"][1]["optimum_vs_young"] = 0.2  # T* 20 % away from √(2(o + D)M)
    assert overhead.verdict_15a(far)[0] == PARTIALLY
    noisy = copy.deepcopy(SOLO)
    noisy["rows"][2]["saved_gpu_hours"] = _estimate(1.0, 5.0)  # straddles 0
    assert overhead.verdict_15a(noisy)[0] == INCONCLUSIVE
    outcome, entry = overhead.verdict_15b(CLUSTER)
    assert outcome == REPRODUCED and entry["sub_claim"] == "15b"
    assert "today's intervals" in entry["why"] and len(entry["table"]["rows"]) == 4
    worse = copy.deepcopy(CLUSTER)
    worse["rows"][1]["saved_gpu_hours"]["young_without_overhead"] = _estimate(-50.0)
    assert overhead.verdict_15b(worse)[0] == PARTIALLY
    still = copy.deepcopy(CLUSTER)
    still["rows"][1]["designed"] = [305.0, 905.0]  # moved less than the search's finest step
    still["rows"][1]["saved_gpu_hours"]["young_without_overhead"] = _estimate(-50.0)
    assert overhead.verdict_15b(still)[0] == NOT_REPRODUCED
    for name, figure in (("a", overhead.solo_figure(SOLO, tmp_path / "a.png")),):
        assert figure == f"{name}.png" and (tmp_path / figure).read_bytes()[:4] == b"\x89PNG"
    assert overhead.cluster_figure(CLUSTER, tmp_path / "b.png") == "b.png"


@pytest.mark.slow
def test_overhead_smoke(tmp_path):
    result = overhead.run(tmp_path, size="smoke", progress=False)
    check_experiment_result(overhead, result, tmp_path, one_verdict_per_claim=False)
    assert [v["sub_claim"] for v in result["verdicts"]] == ["15a", "15b"]
    solo = result["numbers"]["solo"]
    for row in solo["rows"]:  # the closed forms, at any size
        assert abs(row["optimum_vs_young"]) <= overhead.YOUNG_RTOL
        assert row["young_with"] == pytest.approx(((row["overhead"] + solo["write"]) * 2 * solo["mtbf"]) ** 0.5)
