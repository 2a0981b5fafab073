"""`ckpt-jax reproduce`: runs experiments, writes report.md, resumes from finished ones,
never mixes sizes."""

import json
import re

import pytest

import ckpt_jax
from ckpt_jax import cli
from ckpt_jax.experiments import (
    EXPERIMENTS,
    INCONCLUSIVE,
    NOT_REPRODUCED,
    REPRODUCED,
    finish,
    provenance,
    rules,
    verdict,
)
from ckpt_jax.reproduce import CLAIMS, ResultConflict, reproduce, write_report

BY_NAME = {experiment.name: experiment for experiment in EXPERIMENTS}


def test_reproduce_writes_report_and_resumes(tmp_path):
    messages = []
    results = reproduce(tmp_path, size="smoke", only=["pairwise_neutrality"], progress=False, log=messages.append)
    assert set(results) == {"pairwise_neutrality"}
    report = (tmp_path / "report.md").read_text()
    for claim in CLAIMS:
        assert f"## Claim {claim}:" in report
    assert "| 1 pairwise neutrality: **reproduced** | 1: two identical jobs" in report
    assert "| 2 reciprocal spectrum | - | not run | - | - |" in report
    assert "| 9 neutrality needs anonymity | - | not run | - | - |" in report
    assert "| 10 contention-aware intervals | - | not run | - | - |" in report
    written = json.loads((tmp_path / "pairwise_neutrality.json").read_text())
    assert written["size"] == "smoke" and written["verdicts"] and written["wall_seconds"] > 0
    assert re.search(r"\| `pairwise_neutrality` \| [0-9.]+ \|", report)  # the run-time table

    # Resume: a finished experiment of the same size is reused, not re-run.
    messages.clear()
    reproduce(tmp_path, size="smoke", only=["pairwise_neutrality"], progress=False, log=messages.append)
    assert any("already done" in m for m in messages)
    # A torn JSON is not a finished result.
    (tmp_path / "pairwise_neutrality.json").write_text('{"size": "smoke", "verd')
    messages.clear()
    reproduce(tmp_path, size="smoke", only=["pairwise_neutrality"], progress=False, log=messages.append)
    assert not any("already done" in m for m in messages)
    assert json.loads((tmp_path / "pairwise_neutrality.json").read_text())["verdicts"]
    assert not list(tmp_path.glob(".*.tmp"))  # atomic writes leave no temporary files


def _fake_quick_result(out, name="spectrum"):
    """A finished result of size quick, as a --quick run leaves it (JSON + its figure)."""
    (out / f"{name}_fig.png").write_bytes(b"\x89PNG\r\n\x1a\nquick")
    entry = verdict(2, REPRODUCED, "quick numbers", title="t", headline="h", figures=[f"{name}_fig.png"])
    return finish(out, BY_NAME[name], "quick", {}, [entry], [f"{name}_fig.png"])


def test_results_of_another_size_are_never_overwritten(tmp_path):
    _fake_quick_result(tmp_path)
    before = (tmp_path / "spectrum.json").read_bytes()
    with pytest.raises(ResultConflict, match="holds 'quick' results \\(spectrum.json\\).*another --out, or --restart"):
        reproduce(tmp_path, size="smoke", only=["pairwise_neutrality"], progress=False, log=lambda m: None)
    assert (tmp_path / "spectrum.json").read_bytes() == before
    assert not (tmp_path / "pairwise_neutrality.json").exists()


def test_cli_refuses_a_folder_of_another_size_in_one_line(tmp_path, capsys):
    _fake_quick_result(tmp_path)
    assert (
        cli.main(["reproduce", "--smoke", "--no-progress", "--only", "pairwise_neutrality", "--out", str(tmp_path)])
        == 2
    )
    error = capsys.readouterr().err.strip()
    assert len(error.splitlines()) == 1 and "'quick'" in error and "--restart" in error


def test_restart_discards_results_of_another_size(tmp_path):
    _fake_quick_result(tmp_path)
    messages = []
    results = reproduce(
        tmp_path, size="smoke", only=["pairwise_neutrality"], progress=False, resume=False, log=messages.append
    )
    assert set(results) == {"pairwise_neutrality"}
    assert not (tmp_path / "spectrum.json").exists() and not (tmp_path / "spectrum_fig.png").exists()
    assert any("discarding 1 results of another size" in m for m in messages)
    assert "| 2 reciprocal spectrum | - | not run |" in (tmp_path / "report.md").read_text()


def test_console_names_sub_claims(tmp_path):
    messages = []
    reproduce(tmp_path, size="smoke", only=["boundary"], progress=False, log=messages.append)
    done = [m for m in messages if "boundary:" in m][-1]
    assert "claim 8a: not reproduced" in done and "claim 8b:" in done and "claim 8c:" in done


def _synthetic_results():
    """Results of two made-up experiments: claim 5 in three sub-claims, claim 7 in one."""
    five = [
        verdict(
            5,
            REPRODUCED,
            "gap ok",
            sub_claim="5 smallest gap",
            title="gap",
            headline="×0.98",
            figures=["a.png"],
            table=dict(columns=["N", "value"], rows=[["4", "0.1"]]),
        ),
        verdict(
            5,
            INCONCLUSIVE,
            "memory unclear",
            sub_claim="5 memory",
            title="memory",
            headline="0.03",
            figures=["b.png"],
            some_list=[1, 2, 3],
            some_number=0.000123456,
        ),
    ]
    seven = [
        verdict(
            7,
            NOT_REPRODUCED,
            "slope off",
            title="law",
            headline="slope 1.1",
            rule="CI inside 2 ± 0.2",
            thresholds={"SLOPE_MARGIN": 0.2},
        )
    ]
    return {
        "no_clustering": dict(
            name="no_clustering", size="smoke", verdicts=five, figures=["a.png", "b.png", "c.png"], wall_seconds=12.5
        ),
        "jitter": dict(name="jitter", size="smoke", verdicts=seven, figures=["d.png"], wall_seconds=3.0),
    }


def test_report_rows_per_sub_claim_combined_verdicts_and_no_raw_values(tmp_path):
    write_report(tmp_path, _synthetic_results(), "smoke")
    report = (tmp_path / "report.md").read_text()
    # One row per sub-claim, the claim's combined verdict on its first row.
    assert f"| 5 no clustering: **{rules.combine([REPRODUCED, INCONCLUSIVE])}** | 5 smallest gap: gap |" in report
    assert "|  | 5 memory: memory | **inconclusive** | 0.03 | `no_clustering` |" in report
    assert "| 7 jitter sets stagger lifetime: **not reproduced** | 7: law |" in report
    assert rules.COMBINATION_RULE in report and "*inconclusive*:" in report
    # Each figure exactly once, under the sub-claim that names it; unnamed ones under the first.
    for figure in ("a.png", "b.png", "c.png", "d.png"):
        assert report.count(f"]({figure})") == 1
    assert report.index("](a.png)") < report.index("](c.png)") < report.index("### 5 memory") < report.index("](b.png)")
    # Numbers in prose and tables, never raw Python or JSON.
    assert "some number | 1.23e-04" in report and "Also in `no_clustering.json`: some list." in report
    for token in ("['", "{'", "[1, 2", '{"', "...", "MODEL.md"):
        assert token not in report.replace("docs/model.md", ""), token
    assert "docs/model.md" in report
    assert "`SLOPE_MARGIN` = 0.2" in report and "*Rule.* CI inside 2 ± 0.2" in report
    assert re.search(r"\*\*total\*\* \| \*\*16 s \(0\.3 min\)\*\*", report)


def test_reproduce_cli_only_and_bad_names(tmp_path, capsys):
    assert (
        cli.main(["reproduce", "--smoke", "--no-progress", "--only", "pairwise_neutrality", "--out", str(tmp_path)])
        == 0
    )
    assert (tmp_path / "report.md").exists()
    assert cli.main(["reproduce", "--only", "nonsense", "--out", str(tmp_path)]) == 2
    with pytest.raises(ValueError, match="experiment must be one of"):
        reproduce(tmp_path, size="smoke", only=["nonsense"])
    with pytest.raises(ValueError, match="size must be one of"):
        reproduce(tmp_path, size="huge")


def test_every_experiment_is_its_modules_object_and_declares_claims():
    import importlib

    assert len(BY_NAME) == len(EXPERIMENTS)  # names are unique
    for experiment in EXPERIMENTS:
        module = importlib.import_module(f"ckpt_jax.experiments.{experiment.name}")
        assert module.EXPERIMENT is experiment and module.run is experiment.run
        assert experiment.claims and set(experiment.claims) <= set(CLAIMS)
        assert experiment.title and set(experiment.sizes) == {"smoke", "quick", "full"}


# -- stored results: version, parameters, edited files ---------------------------------------------
def _fake_result(out, experiment, **edits):
    """A finished smoke result as ``finish`` writes it (no experiment run), with ``edits`` applied."""
    entry = verdict(2 if experiment == "spectrum" else 1, REPRODUCED, "numbers", title="t", headline="h")
    result = finish(out, BY_NAME[experiment], "smoke", {}, [entry], [])
    (out / f"{experiment}.json").write_text(json.dumps({**result, **edits}))
    return result


@pytest.mark.parametrize(
    "edits, what",
    [
        ({"version": "0.0.1"}, "results of another version \\(spectrum.json: ckpt_jax 0.0.1\\)"),
        ({"version": None}, "results of another version \\(spectrum.json: an unrecorded version\\)"),
        (
            {"parameters": {**provenance(BY_NAME["spectrum"], "smoke")["parameters"], "n_jobs": [2, 3]}},
            "results of other parameters \\(spectrum.json: n_jobs\\)",
        ),
    ],
)
def test_results_of_another_version_or_parameters_are_refused_in_one_line(tmp_path, capsys, edits, what):
    _fake_result(tmp_path, "spectrum", **edits)
    before = (tmp_path / "spectrum.json").read_bytes()
    with pytest.raises(ResultConflict, match=what + ".*another --out, or --restart to discard them"):
        reproduce(tmp_path, size="smoke", only=["spectrum"], progress=False, log=lambda m: None)
    assert cli.main(["reproduce", "--smoke", "--no-progress", "--only", "spectrum", "--out", str(tmp_path)]) == 2
    error = capsys.readouterr().err
    assert len(error.strip().splitlines()) == 1 and "Traceback" not in error and "spectrum.json" in error
    assert (tmp_path / "spectrum.json").read_bytes() == before


def test_restart_discards_results_of_another_version(tmp_path):
    _fake_result(tmp_path, "spectrum", version="0.0.1")
    messages = []
    reproduce(tmp_path, size="smoke", only=["pairwise_neutrality"], progress=False, resume=False, log=messages.append)
    assert not (tmp_path / "spectrum.json").exists()
    assert any("discarding 1 results of another size, version or parameters" in m for m in messages)
    written = json.loads((tmp_path / "pairwise_neutrality.json").read_text())
    assert written["version"] == ckpt_jax.__version__
    assert written["parameters"]["n_delta"] == 16  # the smoke entry of the experiment's size table
    assert written["parameters"]["write_ratios"] == pytest.approx([0.05, 0.275, 0.5, 0.725, 0.95], abs=1e-15)


@pytest.mark.parametrize(
    "edits",
    [
        {"verdicts": "reproduced"},
        {"verdicts": [{"claim": "two", "verdict": REPRODUCED}]},
        {"verdicts": [dict(verdict(2, REPRODUCED, "why"), verdict="great")]},
        {"verdicts": [dict(verdict(2, REPRODUCED, "why"), table={"columns": ["a"], "rows": [[1, 2]]})]},
        {"figures": [3]},
        {"numbers": []},
        {"size": ["smoke"]},
        {"name": "memory"},
    ],
)
def test_an_edited_result_is_one_line_and_left_out_never_a_traceback(tmp_path, edits):
    _fake_result(tmp_path, "pairwise_neutrality")  # reused: nothing runs
    _fake_result(tmp_path, "spectrum", **edits)
    messages = []
    results = reproduce(tmp_path, size="smoke", only=["pairwise_neutrality"], progress=False, log=messages.append)
    assert set(results) == {"pairwise_neutrality"}
    edited = [m for m in messages if "spectrum.json" in m]
    assert len(edited) == 1 and "is not a result: " in edited[0], messages
    assert edited[0].endswith("left out of the report (rerun with --only spectrum)")
    assert "| 2 reciprocal spectrum | - | not run |" in (tmp_path / "report.md").read_text()


def test_cli_runs_an_edited_result_again_in_one_line(tmp_path, capsys):
    _fake_result(tmp_path, "pairwise_neutrality", verdicts="reproduced")
    (tmp_path / "spectrum.json").write_text("[[[[" * 10_000)  # too deep for the JSON parser
    assert (
        cli.main(["reproduce", "--smoke", "--no-progress", "--only", "pairwise_neutrality", "--out", str(tmp_path)])
        == 0
    )
    printed = capsys.readouterr()
    assert "Traceback" not in printed.err
    assert "pairwise_neutrality.json is not a result: verdicts is str, not list; running it again" in printed.out
    assert "spectrum.json is unreadable (RecursionError); left out of the report" in printed.out
    assert json.loads((tmp_path / "pairwise_neutrality.json").read_text())["verdicts"][0]["verdict"] == REPRODUCED
