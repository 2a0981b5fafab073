"""README.md's examples (the second now in docs/guide/realistic.md), run as written: every number
their prose says they print is what they
print (to the digits the README gives), and the numbers it quotes from `assess`, `design` and
`compare --sensitivity` on examples/llm_cluster.toml are in those commands' outputs.

All are slow (the two Python examples take about 7 and 11 s of CPU, the commands 20 s to
several minutes): run them with ``pytest -m slow tests/test_readme.py`` after changing what
they print, and update README.md with what they report.
"""

import contextlib
import io
import json
import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
ROOT = README.parent
# The second example (blocking against two-level checkpoints) moved to the guide.
REALISTIC = ROOT / "docs" / "guide" / "realistic.md"


def _text(path: Path = README) -> str:
    return path.read_text(encoding="utf-8")


def _python_blocks(path: Path = README) -> list:
    return re.findall(r"```python\n(.*?)```", _text(path), re.S)


def _prose_after(block: str, path: Path = README) -> str:
    """The paragraph that follows a code block (what it says the block prints)."""
    after = _text(path).split(block, 1)[1].split("```", 1)[1]
    return after.strip().split("\n\n", 1)[0]


def _run(code: str) -> list:
    """The lines ``code`` prints, run in this process from the repository's root."""
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed), contextlib.chdir(ROOT):
        exec(compile(code, str(README), "exec"), {"__name__": "__readme__"})
    return printed.getvalue().splitlines()


def _agrees(shown: str, value: float) -> bool:
    """``value`` rounded to the decimals the README shows is the README's number."""
    decimals = len(shown.split(".")[1]) if "." in shown else 0
    return round(value, decimals) == float(shown)


def _imports(block: str) -> str:
    """The first example's set-up (x64, numpy, ckpt_jax), which the later examples assume."""
    return block.split("import ckpt_jax as cj", 1)[0] + "import ckpt_jax as cj\n"


@pytest.mark.slow
def test_readme_first_example_prints_what_the_readme_says():
    block = _python_blocks()[0]
    lines = _run(block)
    prose = _prose_after(block)
    said = re.search(
        r"It prints `(\w+)`, then about ([\d.]+) and ([\d.]+) \(h\).*?at once ([\d.]+) % of the", prose, re.S
    )
    assert said, prose
    assert lines[0] == said[1]
    first, last = (float(x) for x in lines[1].split())
    assert _agrees(said[2], first), (lines, said.groups())
    # After 200 cycles each launch's smallest gap depends on rounding (a relative change of
    # 1e-14 in the launch changes it by ~66 %: the gap map stretches some directions), so the
    # last median is a statistic of 1,000 launches: its standard error, read from the README
    # ("known to ±0.00016", a bootstrap of this run), bounds the agreement.
    se = float(re.search(r"known to ±([\d.]+)", prose)[1])
    assert abs(last - float(said[3])) <= 2 * se, (lines, said.groups())
    assert _agrees(said[4], 100 * float(lines[2])), (lines, said.groups())


@pytest.mark.slow
def test_readme_second_example_prints_what_the_readme_says():
    first, block = _python_blocks()[0], _python_blocks(REALISTIC)[-1]
    lines = _run(_imports(first) + block)
    prose = _prose_after(block, REALISTIC)
    assert lines == re.findall(r"`([\d.]+ [\d.]+)`", prose), (lines, prose)
    said = re.search(r"idle ([\d.]+) % of the\s+time, two-level checkpoints ([\d.]+) %", prose)
    assert said, prose
    idle = [float(line.split()[0]) for line in lines]
    assert _agrees(said[1], 100 * idle[0]) and _agrees(said[2], 100 * idle[1]), (lines, said.groups())
    drop = re.search(r"draw \(([\d.]+) %\)", prose)
    assert drop and all(_agrees(drop[1], 100 * float(line.split()[1])) for line in lines), (lines, prose)


def _numbers(text: str) -> set:
    """The numbers of a text as written ("76,985", "86.95", "-16"), signs and a minus sign read alike."""
    text = text.replace("−", "-").replace("+", "")
    return {token.rstrip(".,") for token in re.findall(r"-?\d[\d,]*(?:\.\d+)?", text)}


def _quoted(pattern: str) -> str:
    """The README's sentences that quote a command's numbers (``pattern``, across lines)."""
    found = re.search(pattern, _text(), re.S)
    assert found, pattern
    return found[0]


def _command_numbers(capsys, argv: list, out: Path) -> set:
    """The numbers a command printed and wrote into its report.md."""
    from ckpt_jax.cli import main

    with contextlib.chdir(ROOT):
        assert main([*argv, "--no-progress", "--out", str(out)]) == 0
    return _numbers(capsys.readouterr().out + (out / "report.md").read_text(encoding="utf-8"))


@pytest.mark.slow
def test_readme_assess_numbers_are_what_assess_reports(tmp_path, capsys):
    quoted = _quoted(r"`assess` simulates a week.*?405B job stops\.")
    got = _command_numbers(capsys, ["assess", "examples/llm_cluster.toml"], tmp_path / "assess")
    assert _numbers(quoted) <= got, sorted(_numbers(quoted) - got)


@pytest.mark.slow
def test_readme_design_numbers_are_what_design_reports(tmp_path, capsys):
    quoted = _quoted(r"`design` says:.*?set the interval\.")
    got = _command_numbers(capsys, ["design", "examples/llm_cluster.toml"], tmp_path / "design")
    summary = json.loads((tmp_path / "design" / "design.json").read_text())
    assert _numbers(quoted) <= got, sorted(_numbers(quoted) - got)
    assert summary["groups"]  # the run's own record, for a look at what moved


@pytest.mark.slow
def test_readme_sensitivity_numbers_are_what_compare_reports(tmp_path, capsys):
    quoted = _quoted(r"here MTBF first.*?\)\.")
    got = _command_numbers(capsys, ["compare", "examples/llm_cluster.toml", "--sensitivity"], tmp_path / "compare")
    assert _numbers(quoted) <= got, sorted(_numbers(quoted) - got)
