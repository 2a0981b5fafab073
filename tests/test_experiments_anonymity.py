"""The claim-9 experiment (anonymity) at smoke size, and its verdict rules on altered data."""

import copy

import pytest
from experiment_checks import check_experiment_result

from ckpt_jax.experiments import EXPERIMENTS, NOT_REPRODUCED, PARTIALLY, REPRODUCED, anonymity


@pytest.fixture(scope="module")
def smoke(tmp_path_factory):
    out = tmp_path_factory.mktemp("anonymity")
    return anonymity.run(out, size="smoke", progress=False), out


@pytest.mark.slow  # reads the experiment's smoke run (module fixture); `reproduce --quick` runs it too
def test_anonymity_smoke(smoke):
    result, out = smoke
    check_experiment_result(anonymity, result, out, one_verdict_per_claim=False)
    assert anonymity.EXPERIMENT in EXPERIMENTS
    by_sub = {v["sub_claim"]: v for v in result["verdicts"]}
    assert {k: v["verdict"] for k, v in by_sub.items()} == {"9a": REPRODUCED, "9b": REPRODUCED}
    assert by_sub["9a"]["figures"] == ["anonymity_9a.png", "anonymity_9a_locking.png"]
    assert by_sub["9b"]["figures"] == ["anonymity_9b.png"]
    measured = by_sub["9a"]["measured"]
    assert measured["worst_control"] < 1e-12 and measured["uniform_window_coupling"] < 1e-12
    assert min(measured["max_coupling"].values()) > 0.05
    numbers = result["numbers"]
    # Every detuned coupled pair has a stable locked lag; fcfs has an interval of fixed lags.
    for row in numbers["sizes"]["coupled"].values():
        if "detuned" in row:
            assert any(p["kind"] == "isolated" and p["stable"] for p in row["detuned"]["phase_fixed"])
    fcfs = numbers["fcfs"]["cases"]["fcfs, uncapped"]
    assert any(p["kind"] == "interval" for p in fcfs["phase_fixed"])
    assert by_sub["9b"]["measured"]["fair_det_error"] < 1e-9


def _rerun_verdict(decide, data):
    return decide(data)[0]


@pytest.mark.slow  # reads the experiment's smoke run (module fixture); `reproduce --quick` runs it too
def test_verdicts_change_with_the_data(smoke):
    # The same rules on altered measurements: a coupled control, a neutral policy, a fair
    # determinant off 1, a neutral fcfs pair.
    result, _ = smoke
    sizes = result["numbers"]["sizes"]
    fcfs = result["numbers"]["fcfs"]

    assert _rerun_verdict(anonymity.verdict_9a, sizes) == REPRODUCED
    assert _rerun_verdict(anonymity.verdict_9b, fcfs) == REPRODUCED
    broken = copy.deepcopy(sizes)
    next(iter(broken["controls"].values()))["phase"]["max_abs"] = 0.1
    assert _rerun_verdict(anonymity.verdict_9a, broken) == PARTIALLY
    neutral = copy.deepcopy(sizes)
    for row in neutral["coupled"].values():
        if row["policy"] == "uniform":
            row["phase"]["max_abs"] = 0.0
            row["work"]["max_abs"] = 0.0
    assert _rerun_verdict(anonymity.verdict_9a, neutral) == PARTIALLY
    off = copy.deepcopy(fcfs)
    for spectrum in off["spectra"].values():
        if spectrum["storage"] == "fair":
            spectrum["determinant"] = [0.5 * float(d) for d in spectrum["determinant"]]
    assert _rerun_verdict(anonymity.verdict_9b, off) == PARTIALLY
    quiet = copy.deepcopy(fcfs)
    for row in quiet["cases"].values():
        row["phase"]["max_abs"] = row["work"]["max_abs"] = 0.0
    assert _rerun_verdict(anonymity.verdict_9b, quiet) == PARTIALLY
    nothing = copy.deepcopy(quiet)  # and the fair control couples and its determinant is off 1
    nothing["cases"]["fair (control)"]["phase"]["max_abs"] = 0.1
    for spectrum in nothing["spectra"].values():
        if spectrum["storage"] == "fair":
            spectrum["determinant"] = [0.5 * float(d) for d in spectrum["determinant"]]
    assert _rerun_verdict(anonymity.verdict_9b, nothing) == NOT_REPRODUCED


@pytest.mark.slow  # reads the experiment's smoke run (module fixture); `reproduce --quick` runs it too
def test_report_has_a_row_per_sub_claim(smoke, tmp_path):
    from ckpt_jax.reproduce import write_report

    result, _ = smoke
    report = write_report(tmp_path, {"anonymity": result}, "smoke").read_text()
    rows = [line for line in report.splitlines() if line.startswith("| ") and line.endswith("| `anonymity` |")]
    assert len(rows) == 2
    assert "9 neutrality needs anonymity: **reproduced**" in rows[0] and "| 9a:" in rows[0] and "| 9b:" in rows[1]
    assert "### 9a:" in report and "### 9b:" in report and "anonymity_9a_locking.png" in report
