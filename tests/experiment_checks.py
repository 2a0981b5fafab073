"""One check of an experiment's result, shared by the smoke tests of every experiment."""

import json

from ckpt_jax.experiments import NOT_REPRODUCED, PARTIALLY, REPRODUCED


def check_experiment_result(module, result, out, *, min_figure_bytes=0, one_verdict_per_claim=True):
    """The framework's contract (`ckpt_jax.experiments`): JSON on disk equals the returned
    dict, verdicts are well formed and about the module's claims, figures are PNG files."""
    assert result["name"] == module.NAME and result["size"] == "smoke"
    path = out / f"{module.NAME}.json"
    assert path.exists()
    assert json.loads(path.read_text()) == json.loads(json.dumps(result))
    for item in result["verdicts"]:
        assert item["verdict"] in (REPRODUCED, NOT_REPRODUCED, PARTIALLY)
        assert item["why"] and isinstance(item["measured"], dict)
        assert item["claim"] in module.CLAIMS
    if one_verdict_per_claim:
        assert [v["claim"] for v in result["verdicts"]] == list(module.CLAIMS)
    assert result["figures"]
    for name in result["figures"]:
        figure = out / name
        assert name.endswith(".png") and figure.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert figure.stat().st_size > min_figure_bytes, name
