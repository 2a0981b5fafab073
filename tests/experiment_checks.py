"""One check of an experiment's result, shared by the smoke tests of every experiment."""

import json

from ckpt_jax.experiments import VERDICTS


def check_experiment_result(module, result, out, *, min_figure_bytes=0, one_verdict_per_claim=True):
    """The framework's contract (`ckpt_jax.experiments.framework`): JSON on disk equals the returned
    dict, verdicts are well formed and about the module's claims, each names the figures
    that show it (each figure under one sub-claim), figures are PNG files, and the report's
    prose and tables carry no raw Python or JSON."""
    experiment = module.EXPERIMENT
    assert result["name"] == experiment.name and result["size"] == "smoke"
    path = out / f"{experiment.name}.json"
    assert path.exists()
    assert json.loads(path.read_text()) == json.loads(json.dumps(result))
    owners = {}
    for item in result["verdicts"]:
        assert item["verdict"] in VERDICTS
        assert item["why"] and isinstance(item["measured"], dict)
        assert item["claim"] in experiment.claims
        assert item["sub_claim"] and item["title"] and item["headline"] and item["rule"]
        for figure in item["figures"]:
            assert figure in result["figures"] and figure not in owners
            owners[figure] = item["sub_claim"]
        text = " ".join([item["why"], item["headline"], item["rule"]])
        if item["table"]:
            assert all(len(row) == len(item["table"]["columns"]) for row in item["table"]["rows"])
            text += " ".join(str(cell) for row in item["table"]["rows"] for cell in row)
        # No Python reprs or JSON in prose: brackets of lists/dicts with quotes, tuples of strings.
        for token in ("['", "{'", "('", '{"', '["', "np.", "array("):
            assert token not in text, (item["sub_claim"], token)
    sub_claims = [v["sub_claim"] for v in result["verdicts"]]
    assert len(set(sub_claims)) == len(sub_claims)
    if one_verdict_per_claim:
        assert [v["claim"] for v in result["verdicts"]] == list(experiment.claims)
    else:
        assert {v["claim"] for v in result["verdicts"]} == set(experiment.claims)
    assert result["figures"] and set(owners) == set(result["figures"])
    for name in result["figures"]:
        figure = out / name
        assert name.endswith(".png") and figure.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert figure.stat().st_size > min_figure_bytes, name
