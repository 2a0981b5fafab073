"""Every notebook runs top to bottom at a smoke size (CKPT_JAX_SMOKE=1), shows its figures
and writes nothing to stderr; the committed notebooks and docs/notebooks.md match the
sources in notebooks/_build.py."""

import importlib.util
import re
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


def load_build():
    spec = importlib.util.spec_from_file_location("notebooks_build", ROOT / "notebooks" / "_build.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


BUILD = load_build()
PAGE = BUILD.PAGE.read_text(encoding="utf-8") if BUILD.PAGE.exists() else ""


def page_section(name: str) -> str:
    """The part of docs/notebooks.md about one notebook."""
    parts = re.split(r"^## ", PAGE, flags=re.MULTILINE)
    found = [part for part in parts if part.startswith(Path(name).stem + "\n")]
    assert len(found) == 1, f"docs/notebooks.md has no section for {name}: run python notebooks/_build.py --publish"
    return found[0]


# The kernels compile as the tier does (tests/conftest.py): the threefry hash unrolled on the
# CPU, from a startup file of the kernel's own IPython directory (the XLA flags reach the
# kernel through the environment).
TIER_STARTUP = """\
import os

if os.environ.get("CKPT_JAX_TEST_XLA_FLAGS", "1") != "0":
    from ckpt_jax._threefry import unroll_on_cpu

    unroll_on_cpu()
"""


@pytest.fixture
def tier_kernel(tmp_path, monkeypatch):
    startup = tmp_path / "ipython" / "profile_default" / "startup"
    startup.mkdir(parents=True)
    (startup / "00-tier.py").write_text(TIER_STARTUP, encoding="utf-8")
    monkeypatch.setenv("IPYTHONDIR", str(tmp_path / "ipython"))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_runs_and_shows_its_figures(path, tier_kernel):
    nb = nbformat.read(path, as_version=4)
    assert all(not cell.get("outputs") for cell in nb.cells if cell.cell_type == "code"), "strip outputs"
    executed = BUILD.execute(nb, smoke=True, timeout=300)
    for cell in executed.cells:
        if cell.cell_type != "code":
            continue
        kinds = [(o.output_type, o.get("name")) for o in cell.outputs]
        assert ("stream", "stderr") not in kinds, [o.text for o in cell.outputs if o.get("name") == "stderr"]
        text = "".join(o.get("text", "") for o in cell.outputs)
        assert "\r" not in text, "no progress text in an output"
        assert "TqdmWarning" not in text and "IProgress" not in text
        draws = "plt.show()" in cell.source or "display(fig)" in cell.source
        images = sum("image/png" in o.get("data", {}) for o in cell.outputs)
        assert images == draws, f"a figure is drawn but not shown (or the reverse):\n{cell.source}"
    # The published page holds one figure per figure the notebook shows.
    published = re.findall(r"\]\(notebooks/([^)]+\.png)\)", page_section(path.name))
    assert published == [BUILD.figure_name(path.name, n + 1) for n in range(len(BUILD.figures(executed)))]


def test_committed_notebooks_are_built_from_build_py():
    built = BUILD.build()
    assert sorted(built) == [p.name for p in NOTEBOOKS]
    for name, nb in built.items():
        committed = (ROOT / "notebooks" / name).read_text(encoding="utf-8")
        assert nbformat.writes(nb).rstrip("\n") == committed.rstrip("\n"), (
            f"{name} differs from notebooks/_build.py: run python notebooks/_build.py"
        )


def test_published_page_shows_the_current_sources_and_every_figure():
    for name, nb in BUILD.build().items():
        section = page_section(name)
        position = 0
        for cell in nb.cells:  # in order, verbatim
            if cell.cell_type == "code":
                found = section.find(f"```python\n{cell.source}\n```", position)
                assert found >= 0, f"docs/notebooks.md is stale for {name}: run python notebooks/_build.py --publish"
                position = found
    linked = set(re.findall(r"\]\(notebooks/([^)]+\.png)\)", PAGE))
    on_disk = {p.name for p in BUILD.FIGURES.glob("*.png")}
    assert linked == on_disk and len(on_disk) >= len(NOTEBOOKS)
    assert "run top to bottom at full size" in PAGE, "publish at full size (without --smoke)"


def _extra(name: str) -> set:
    """The distributions an extra of pyproject.toml installs, its ckpt_jax[...] extras resolved."""
    import tomllib

    extras = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["optional-dependencies"]
    found = set()
    for requirement in extras[name]:
        inner = re.fullmatch(r"ckpt_jax\[(\w+)\]", requirement)
        found |= _extra(inner[1]) if inner else {re.split(r"[<>=\[; ]", requirement, maxsplit=1)[0].lower()}
    return found


def test_notebooks_extra_installs_what_the_notebooks_need():
    """`pip install ".[notebooks]"` runs every notebook: something that executes them, and
    xarray where a notebook's results are labelled data (what_if's `compare`: it lacked it)."""
    installed = _extra("notebooks")
    assert "nbclient" in installed and "ipykernel" in installed
    labelled = re.compile(r"\b(compare|sensitivity|to_xarray|open_ensemble)\(")
    for name, nb in BUILD.build().items():
        code = "\n".join(cell.source for cell in nb.cells if cell.cell_type == "code")
        if labelled.search(code):
            assert "xarray" in installed, f"{name} returns xarray Datasets: the notebooks extra must install xarray"
