"""The documentation site builds with `mkdocs build --strict`: a broken link, a missing
anchor, a page left out of the nav or an API reference to a name that no longer exists fails
the build (and this test). Skipped only outside CI when mkdocs is not installed
(`pip install -e ".[docs]"`)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent


def test_docs_build_strict(tmp_path):
    try:
        import mkdocs  # noqa: F401
    except ImportError:
        if os.environ.get("CI", "").lower() == "true":
            raise
        pytest.skip('mkdocs is not installed: pip install -e ".[docs]"')
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1")
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert (tmp_path / "site" / "reference" / "core" / "index.html").exists()
