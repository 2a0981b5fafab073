"""The experiment framework: an experiment is an explicit object, listed in `EXPERIMENTS`, and
neither importing nor running one changes JAX's global configuration (float64 is turned on
for a run only, `in_float64`)."""

import json
import os
import subprocess
import sys

import jax
import pytest

from ckpt_jax.experiments import EXPERIMENTS, Experiment, in_float64, pairwise_neutrality


def python(code: str, x64: bool) -> subprocess.CompletedProcess:
    """``python -c code`` in a fresh process whose x64 starts as ``x64`` (the tests' own is on)."""
    env = {**os.environ, "JAX_ENABLE_X64": "1" if x64 else "0", "JAX_PLATFORMS": "cpu"}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr
    return done


@pytest.mark.parametrize("x64", [False, True])
def test_importing_the_package_and_the_experiments_leaves_x64_as_it_was(x64):
    code = (
        "import jax; before = jax.config.jax_enable_x64\n"
        "import ckpt_jax, ckpt_jax.cli, ckpt_jax.experiments, ckpt_jax.reproduce\n"
        "from ckpt_jax.experiments import EXPERIMENTS\n"
        "print(before, jax.config.jax_enable_x64, len(EXPERIMENTS))"
    )
    assert python(code, x64).stdout.split() == [str(x64), str(x64), str(len(EXPERIMENTS))]


def test_in_float64_scopes_x64_to_the_run_and_restores_it_on_error():
    seen = []

    @in_float64
    def run(fail=False):
        seen.append(jax.config.jax_enable_x64)
        if fail:
            raise RuntimeError("stop")
        return {}

    jax.config.update("jax_enable_x64", False)
    try:
        run()
        assert jax.config.jax_enable_x64 is False
        with pytest.raises(RuntimeError, match="stop"):
            run(fail=True)
        assert jax.config.jax_enable_x64 is False
    finally:
        jax.config.update("jax_enable_x64", True)
    run()  # on stays on
    assert seen == [True, True, True] and jax.config.jax_enable_x64 is True


def test_a_run_started_without_x64_gives_the_numbers_of_a_float64_process(tmp_path):
    """The experiment computes in float64 whatever the caller's setting, and leaves it off."""
    here = pairwise_neutrality.EXPERIMENT.run(tmp_path / "here", size="smoke", progress=False)
    code = (
        "import json, sys, jax\n"
        "from ckpt_jax.experiments import pairwise_neutrality\n"
        f"result = pairwise_neutrality.EXPERIMENT.run({str(tmp_path / 'there')!r}, size='smoke', progress=False)\n"
        "assert not jax.config.jax_enable_x64\n"
        "json.dump(result, sys.stdout)"
    )
    there = json.loads(python(code, x64=False).stdout)
    for result in (here, there):
        result["numbers"].pop("seconds")
    assert there["numbers"] == json.loads(json.dumps(here["numbers"]))
    assert [v["verdict"] for v in there["verdicts"]] == [v["verdict"] for v in here["verdicts"]]


def test_experiments_are_objects_with_unique_names():
    assert all(isinstance(experiment, Experiment) for experiment in EXPERIMENTS)
    names = [experiment.name for experiment in EXPERIMENTS]
    assert len(set(names)) == len(names)
    with pytest.raises(AttributeError):
        EXPERIMENTS[0].name = "renamed"  # frozen
