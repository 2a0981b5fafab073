"""`ckpt-jax reproduce`: runs experiments, writes report.md, resumes from finished ones."""

import json

import pytest

from ckpt_jax import cli
from ckpt_jax.experiments import REGISTRY
from ckpt_jax.reproduce import CLAIMS, reproduce


def test_reproduce_writes_report_and_resumes(tmp_path):
    messages = []
    results = reproduce(tmp_path, size="smoke", only=["pairwise_neutrality"], progress=False, log=messages.append)
    assert set(results) == {"pairwise_neutrality"}
    report = (tmp_path / "report.md").read_text()
    for claim in CLAIMS:
        assert f"## Claim {claim}" in report
    assert "| 1 | reproduced | pairwise_neutrality |" in report
    assert "| 2 | not run | - |" in report
    written = json.loads((tmp_path / "pairwise_neutrality.json").read_text())
    assert written["size"] == "smoke" and written["verdicts"]

    # Resume: a finished experiment of the same size is reused, not re-run.
    messages.clear()
    reproduce(tmp_path, size="smoke", only=["pairwise_neutrality"], progress=False, log=messages.append)
    assert any("already done" in m for m in messages)
    # A different size is not a finished result; a torn JSON is not either.
    (tmp_path / "pairwise_neutrality.json").write_text('{"size": "smoke", "verd')
    messages.clear()
    reproduce(tmp_path, size="smoke", only=["pairwise_neutrality"], progress=False, log=messages.append)
    assert not any("already done" in m for m in messages)
    assert json.loads((tmp_path / "pairwise_neutrality.json").read_text())["verdicts"]
    assert not list(tmp_path.glob(".*.tmp"))  # atomic writes leave no temporary files


def test_reproduce_cli_only_and_bad_names(tmp_path, capsys):
    assert cli.main(["reproduce", "--smoke", "--no-progress", "--only", "pairwise_neutrality", "--out", str(tmp_path)]) == 0
    assert (tmp_path / "report.md").exists()
    with pytest.raises(SystemExit):
        cli.main(["reproduce", "--only", "nonsense", "--out", str(tmp_path)])
    with pytest.raises(ValueError, match="experiment must be one of"):
        reproduce(tmp_path, size="smoke", only=["nonsense"])
    with pytest.raises(ValueError, match="size must be one of"):
        reproduce(tmp_path, size="huge")


def test_every_registered_experiment_is_importable_and_declares_claims():
    import importlib

    for name in REGISTRY:
        module = importlib.import_module(f"ckpt_jax.experiments.{name}")
        assert module.NAME == name
        assert set(module.CLAIMS) <= set(CLAIMS)
        assert callable(module.run)
