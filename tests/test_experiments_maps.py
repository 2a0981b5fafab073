"""The experiments behind claims 1-4 and 8a (spectrum, pairwise_neutrality, invariants) at smoke size."""

import json

import pytest

from ckpt_jax.experiments import NOT_REPRODUCED, PARTIALLY, REPRODUCED
from ckpt_jax.experiments import invariants, pairwise_neutrality, spectrum

# These claims hold exactly in the model, so even smoke runs must reproduce them (claim 8a's
# verdict is the 'boundary' experiment's; pairwise_neutrality only records its numbers).
EXPECTED = {
    "spectrum": {2: REPRODUCED},
    "pairwise_neutrality": {1: REPRODUCED},
    "invariants": {3: REPRODUCED, 4: REPRODUCED},
}


@pytest.mark.parametrize("module", [spectrum, pairwise_neutrality, invariants], ids=lambda m: m.NAME)
def test_experiment_runs_at_smoke_size(module, tmp_path):
    result = module.run(tmp_path, size="smoke", progress=False)
    path = tmp_path / f"{module.NAME}.json"
    assert path.exists()
    assert json.loads(path.read_text()) == json.loads(json.dumps(result))
    assert result["name"] == module.NAME and result["size"] == "smoke"
    for item in result["verdicts"]:
        assert item["verdict"] in (REPRODUCED, NOT_REPRODUCED, PARTIALLY)
        assert item["why"] and isinstance(item["measured"], dict)
    assert {v["claim"]: v["verdict"] for v in result["verdicts"]} == EXPECTED[module.NAME]
    assert set(EXPECTED[module.NAME]) == set(module.CLAIMS)
    assert result["figures"]
    for name in result["figures"]:
        assert name.endswith(".png") and (tmp_path / name).stat().st_size > 0
