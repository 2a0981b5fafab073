"""The experiments behind claims 1-4 (spectrum, pairwise_neutrality, invariants) at smoke size."""

import pytest
from experiment_checks import check_experiment_result

from ckpt_jax.experiments import REPRODUCED, invariants, pairwise_neutrality, spectrum

# These claims hold exactly in the model, so even smoke runs must reproduce them (claim 8a's
# verdict is the 'boundary' experiment's; pairwise_neutrality only records its numbers).
EXPECTED = {
    "spectrum": {2: REPRODUCED},
    "pairwise_neutrality": {1: REPRODUCED},
    "invariants": {3: REPRODUCED, 4: REPRODUCED},
}


@pytest.mark.parametrize("module", [spectrum, pairwise_neutrality, invariants], ids=lambda m: m.EXPERIMENT.name)
def test_experiment_runs_at_smoke_size(module, tmp_path):
    result = module.run(tmp_path, size="smoke", progress=False)
    check_experiment_result(module, result, tmp_path)
    assert {v["claim"]: v["verdict"] for v in result["verdicts"]} == EXPECTED[module.EXPERIMENT.name]
    assert set(EXPECTED[module.EXPERIMENT.name]) == set(module.EXPERIMENT.claims)
