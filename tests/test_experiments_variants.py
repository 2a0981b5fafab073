"""The experiments behind claims 7 and 8 (jitter, boundary) at smoke size."""

import numpy as np
import pytest
from experiment_checks import check_experiment_result

from ckpt_jax.experiments import EXPERIMENTS, NOT_REPRODUCED, PARTIALLY, REPRODUCED, boundary, jitter


def _check_result(module, result, tmp_path):
    check_experiment_result(module, result, tmp_path, one_verdict_per_claim=False)


def test_jitter_smoke(tmp_path):
    result = jitter.run(tmp_path, size="smoke", progress=False)
    _check_result(jitter, result, tmp_path)
    numbers = result["numbers"]
    medians = np.asarray(numbers["median_lifetime"], dtype=float)
    # More margin per unit of jitter, longer-lived staggers.
    assert np.all(np.diff(medians) > 0)
    assert all(n == 0 for n in numbers["fleets_not_ok"])
    assert [v["claim"] for v in result["verdicts"]] == [7]
    item = result["verdicts"][0]
    assert item["verdict"] == jitter.slope_verdict(*item["measured"]["ci"])


def test_boundary_smoke(tmp_path):
    result = boundary.run(tmp_path, size="smoke", progress=False)
    _check_result(boundary, result, tmp_path)
    by_sub = {v["sub_claim"]: v["verdict"] for v in result["verdicts"]}
    # Exact statements of the model (see boundary's docstring and the coupling tests):
    # a pair equals two solo jobs (8a), τ flips the coupling's sign (8b), and async
    # checkpoints only move the lag while the drain state relaxes (8c).
    assert by_sub == {"8a": NOT_REPRODUCED, "8b": REPRODUCED, "8c": PARTIALLY}
    # One figure per sub-claim, each under its own.
    assert [v["figures"] for v in result["verdicts"]] == [["boundary_8a.png"], ["boundary_8b.png"], ["boundary_8c.png"]]


def test_experiment_modules_follow_the_framework():
    for module in (jitter, boundary):
        assert module.EXPERIMENT in EXPERIMENTS
        assert set(module.EXPERIMENT.sizes) == {"smoke", "quick", "full"}
    with pytest.raises(ValueError, match="size"):
        boundary.run("/nonexistent", size="huge")
