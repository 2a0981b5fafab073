"""The sources pass ruff's lint rules and its formatter, and the package passes pyright, with the
configuration in pyproject.toml (`[tool.ruff]`, `[tool.pyright]`). A failure prints the tool's
report; `ruff check --fix . && ruff format .` repairs most lint and format findings. Skipped only
outside CI when the tool is not installed (`pip install -e ".[lint]"`, part of ".[test]")."""

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent


def run_tool(module, *args, timeout=300):
    """Runs `python -m module args` at the repository root; fails with its report."""
    if importlib.util.find_spec(module) is None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f'{module} is not installed in CI: pip install -e ".[test]"')
        pytest.skip(f'{module} is not installed: pip install -e ".[lint]"')
    # No check for a newer pyright release: the version is pinned, and CI may be offline.
    env = dict(os.environ, PYRIGHT_PYTHON_IGNORE_WARNINGS="1")
    done = subprocess.run(
        [sys.executable, "-m", module, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout
    )
    assert done.returncode == 0, f"{module} {' '.join(args)} failed:\n{done.stdout}{done.stderr}"


def test_ruff_check():
    run_tool("ruff", "check", "--no-fix", ".")


def test_ruff_format():
    run_tool("ruff", "format", "--check", "--diff", ".")


@pytest.mark.slow  # pyright over the package takes about 30 s; ruff runs in the tier
def test_pyright():
    # The interpreter running the tests is the one whose packages (jax, numpy) pyright resolves.
    run_tool("pyright", "--pythonpath", sys.executable, timeout=600)
