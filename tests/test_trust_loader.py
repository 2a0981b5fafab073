"""What a user reads when a fleet file, an assessment or its report goes wrong: errors name the
key the file gave (not the engine's array), combinations the engine cannot run are refused at
load, a share's interval stays in [0, 1], a timeline never loses a finished assessment, and the
report says where the storage peaks rather than a writer count that never occurs."""

import contextlib
import io
import json
import math

import jax
import numpy as np
import pytest

import ckpt_jax as cj
from ckpt_jax._estimate import mean_ci, share_ci
from ckpt_jax.cli import main
from ckpt_jax.fleetfile import FleetFileError, loads

UNITS = """
time_unit = "h"
{top}
[storage]
peak = "2 TB/s"
saturates_at = {saturates_at}
degradation = {degradation}

[[groups]]
name = "a"
count = 2
gpus = 8
checkpoint = "100 GB"
{group}
"""


def _units(top="", group='mtbf = "10 h"\ninterval = "30 min"', saturates_at=1, degradation=0.1) -> str:
    return UNITS.format(top=top, group=group, saturates_at=saturates_at, degradation=degradation)


def _refusal(text: str) -> str:
    with pytest.raises(FleetFileError) as caught:
        loads(text, "f.toml")
    return str(caught.value)


# -- errors name the file's own key ------------------------------------------------------------


@pytest.mark.parametrize(
    "text, key, not_named",
    [
        (_units(degradation=1e308), "storage.degradation", "throughput["),
        (_units(group='mtbf = "10 h"\ninterval = "1e-300 s"'), "groups[0].interval", "compute"),
        (_units(top='failure_rate_per_gpu = "1e-300 / s"', group='interval = "30 min"'), "failure_rate_per_gpu", ""),
        (
            _units(group='mtbf = "10 h"\nwrite_limit_per_node = "1e-300 B/s"\nnodes = 1'),
            "groups[0].write_limit_per_node",
            "groups[0].write_limit:",
        ),
        (
            'time_unit = "h"\n[storage]\ntable = ["1e-300 B/s"]\n'
            '[[groups]]\ncount = 2\ngpus = 8\ncheckpoint = "100 GB"\nmtbf = "10 h"\n',
            "storage.table[0]",
            "throughput[",
        ),
    ],
)
def test_an_engine_range_error_names_the_key_the_file_gave(text, key, not_named):
    message = _refusal(text)
    assert message.startswith(f"fleet file f.toml: {key}: "), message
    assert not_named == "" or not_named not in message, message
    # In a file with units the engine runs in s, B and B/s: there is no time unit to rescale.
    assert "rescale the time unit" not in message, message


def test_an_mtbf_from_the_failure_rate_names_the_rate_and_the_formula():
    message = _refusal(_units(top='failure_rate_per_gpu = "1e-300 / s"', group='interval = "30 min"'))
    assert "1 / (failure_rate_per_gpu × groups[0].gpus)" in message and message.endswith(" s"), message


def test_a_plain_file_still_names_its_fields_and_the_time_unit_hint():
    plain = 'throughput = "shared"\n[[groups]]\ncount = 1\nsize = 1\nwrite = 0.5\nmtbf = 1e300\n'
    message = _refusal(plain)
    assert message.startswith("fleet file f.toml: groups[0].mtbf: must lie in") and "rescale the time unit" in message


# -- combinations the engine cannot run are refused at load ------------------------------------

PLAIN = """
throughput = "shared"
storage_policy = "{policy}"
{top}
[[groups]]
count = 2
size = 1
write = 0.5
mtbf = 50.0
{group}
"""


@pytest.mark.parametrize(
    "policy, top, group, field",
    [
        ("cooperative", "", "snapshot = 0.1", "groups[0].snapshot"),
        ("fcfs_nonblocking", "", "recovery_read = 0.2", "groups[0].recovery_read"),
        ("cooperative", "fail_while_down = true", "", "fail_while_down"),
        ("fcfs_nonblocking", "async_fraction = 0.5", "", "async_fraction"),
        ("cooperative", "delay = 0.5", "", "delay"),
    ],
)
def test_a_queueing_policy_with_what_it_does_not_serve_is_refused_at_load(policy, top, group, field):
    message = _refusal(PLAIN.format(policy=policy, top=top, group=group))
    assert message.startswith(f"fleet file f.toml: storage_policy: {policy!r}"), message
    assert field in message and "array(" not in message, message


def test_a_queueing_policy_alone_still_loads():
    spec = loads(PLAIN.format(policy="cooperative", top="", group="recovery_read = 0"))
    assert spec.storage_policy == "cooperative"


# -- labelled results name groups -------------------------------------------------------------


TWO_GROUPS = 'throughput = "shared"\n' + "".join(
    f'[[groups]]\nname = "{name}"\ncount = 1\nsize = 1\nwrite = 0.5\nmtbf = 50.0\n' for name in ("a", "b")
)


def test_to_xarray_with_a_fleet_file_of_other_jobs_names_groups():
    pytest.importorskip("xarray")
    fleet = cj.Fleet(np.array([10.0, 12.0, 14.0]), np.array([1.0, 1.0, 1.0]), mtbf=50.0)
    out = cj.simulate(
        fleet, cj.random_state(fleet, jax.random.key(0)), None, until=50.0, key=jax.random.key(1),
        save=cj.SaveAt(trace=False, jobs=True),
    )  # fmt: skip
    assert out.jobs is not None
    with pytest.raises(ValueError, match=r"^groups: the fleet file <string> has 2 jobs, the results 3") as caught:
        out.jobs.to_xarray(fleet, groups=loads(TWO_GROUPS))
    assert "conflicting sizes" not in str(caught.value)


# -- the Python API names its own arguments ----------------------------------------------------

FLEET = cj.Fleet(np.array([10.0, 12.0]), np.array([1.0, 1.0]), mtbf=50.0)


@pytest.mark.parametrize("horizon", [1e300, 1e38])
def test_assess_names_horizon_not_until(horizon):
    with pytest.raises(ValueError, match=r"^horizon ") as caught:
        cj.assess.assess(FLEET, horizon=horizon, key=jax.random.key(0), n_draws=2)
    assert "until" not in str(caught.value)


def test_timeline_names_span_not_until():
    with pytest.raises(ValueError, match=r"^span ") as caught:
        cj.assess.timeline(FLEET, span=1e300, key=jax.random.key(0))
    assert "until" not in str(caught.value)


# -- a share's interval stays inside [0, 1] ----------------------------------------------------


@pytest.mark.parametrize(
    "samples",
    [[0.0004, 0.9012], [0.9, 0.99], [0.01, 0.3, 0.0], [0.5, 0.5], [0.0, 0.0], [1.0, 1.0], [-1e-13, 2e-13]],
)
def test_share_ci_stays_inside_zero_one_and_holds_the_mean(samples):
    estimate = share_ci(samples)
    assert estimate.mean == mean_ci(samples).mean
    assert estimate.low <= estimate.mean <= estimate.high
    assert min(0.0, estimate.mean) <= estimate.low and estimate.high <= max(1.0, estimate.mean)


def test_share_ci_is_the_normal_interval_on_the_logit_scale():
    samples = np.array([0.90, 0.91, 0.92, 0.93])
    normal = mean_ci(samples)
    spread = (normal.high - normal.mean) / (normal.mean * (1 - normal.mean))
    logit = math.log(normal.mean / (1 - normal.mean))
    low, high = (1 / (1 + math.exp(-(logit + sign * spread))) for sign in (-1, 1))
    assert share_ci(samples) == pytest.approx((normal.mean, low, high), rel=1e-12)
    assert math.isnan(share_ci([0.3]).low)  # one draw: no interval, as mean_ci


def test_assess_keeps_every_share_interval_inside_zero_one():
    # Two draws of a job that fails often: the normal interval of its losses leaves [0, 1].
    fleet = cj.Fleet(np.array([10.0]), np.array([1.0]), mtbf=30.0, restart=20.0)
    result = cj.assess.assess(fleet, horizon=100.0, key=jax.random.key(3), n_draws=2)
    shares = [result.goodput["fleet"], *result.losses["fleet"].values()]
    for estimate in shares:
        assert -1e-9 <= estimate.low <= estimate.mean <= estimate.high <= 1 + 1e-9, estimate
    gpus = result.gpus["fleet"]
    for cause, estimate in result.gpu_hours_lost_per_day["fleet"].items():
        assert estimate.low == pytest.approx(result.losses["fleet"][cause].low * gpus * 24, abs=1e-12)


# -- a timeline sized from its run, and a report that never loses the numbers ------------------


def test_a_timeline_with_more_intervals_than_estimated_is_sized_from_the_run():
    # Failures while down, far more often than the restart: more intervals than Fleet.events says.
    fleet = cj.Fleet(np.array([50.0, 50.0]), np.array([1.0, 1.0]), mtbf=1.0, restart=10.0, fail_while_down=True)
    estimate = 2 * int(fleet.events(100.0)) + 64
    line = cj.assess.timeline(fleet, span=100.0, key=jax.random.key(0))
    assert line.start.size > estimate
    assert np.all(np.diff(line.start) > 0) and line.start[-1] < 100.0 and np.all(line.writers >= 0)
    with pytest.raises(ValueError, match="capacity=10 is too small"):
        cj.assess.timeline(fleet, span=100.0, key=jax.random.key(0), capacity=10)


PLAIN_FILE = """
throughput = "shared"

[[groups]]
count = 2
size = 1
write = 0.5
mtbf = 20.0
compute = 4.0
"""


def test_a_figure_that_fails_costs_that_figure_not_the_numbers(tmp_path, monkeypatch):
    from ckpt_jax.cli import _assess_figures

    def broken(*args, **kwargs):
        raise RuntimeError("no canvas")

    monkeypatch.setattr(_assess_figures, "writers_figure", broken)
    path = tmp_path / "fleet.toml"
    path.write_text(PLAIN_FILE)
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        argv = ["assess", str(path), "--horizon", "40", "--draws", "2", "--no-progress", "--devices", "1"]
        assert main([*argv, "--out", str(tmp_path / "out")]) == 0
    out = tmp_path / "out"
    summary = json.loads((out / "assess.json").read_text())
    assert "writers.png" not in summary["files"] and not (out / "writers.png").exists()
    assert (out / "losses.png").exists() and (out / "timeline.png").exists()
    report = (out / "report.md").read_text()
    assert "## Storage" in report and "`writers.png`" not in report and "`losses.png`" in report
    assert "warning: writers.png not drawn (RuntimeError: no canvas)" in printed.getvalue()


# -- the storage section says what holds -------------------------------------------------------


def _storage(writer_time, saturation, writers_max, saturated=(0.1, 0.05, 0.15)):
    return {
        "writer_time": list(writer_time),
        "independent_writer_time": list(writer_time),
        "writers_p50": 1.0,
        "writers_p99": 2.0,
        "writers_max": writers_max,
        "saturation_writers": saturation,
        "saturated_time": dict(zip(("mean", "low", "high"), saturated)),
    }


def _lines(text, storage):
    from ckpt_jax.cli.assess import _storage_lines

    spec = loads(text)
    return "\n".join(_storage_lines(spec, storage, spec.time_unit))


def test_storage_still_growing_at_the_last_job_is_never_called_saturated():
    # saturates_at = 1000 with 4 jobs: f(4) is 0.4 % of the peak.
    text = _units(saturates_at=1000, degradation=0).replace("count = 2", "count = 4")
    thoughput = np.asarray(loads(text).fleet().throughput, np.float64)
    assert cj.assess._saturation_writers(thoughput, np.full(4, np.inf)) == 5
    lines = _lines(text, _storage([0.4, 0.4, 0.15, 0.04, 0.01], 5, 4))
    assert "The storage never saturates: its aggregate bandwidth f(n) still grows at n = 4" in lines, lines
    assert "f(4) = 8 GB/s" in lines and "Saturated" not in lines, lines


def test_storage_that_peaks_with_one_writer_says_so_and_not_a_count_that_never_occurs():
    # As examples/llm_cluster.toml: f falls from one writer on, one job fills the storage alone,
    # and the count from which every set of writers is storage-bound is beyond any draw's.
    text = _units(group='mtbf = "10 h"\ninterval = "30 min"\nwrite_limit = "10 GB/s"') + (
        '\n[[groups]]\nname = "big"\ncount = 1\ngpus = 64\ncheckpoint = "1 TB"\nmtbf = "10 h"\n'
    )
    lines = _lines(text, _storage([0.9, 0.08, 0.02, 0.0], 3, 2))
    assert "peaks at 2 TB/s with 1 writer (it falls as more write)" in lines, lines
    # In English: it read "the fleet has 1 writer 8 % of the time, the most the storage can run at its peak".
    assert "with 1 writer (it falls as more write). That many write at once 8 % of the time, so the storage " in lines
    assert "bounds every set of writers only from 3 writers on, more than any draw had at once (max 2)" in lines
    assert "One job of big drains at the storage's peak alone" in lines, lines
    assert "% [" not in lines  # no interval for a count that never occurs


# -- the timeline's writer panel reads at any scale --------------------------------------------


def test_binned_writers_are_the_time_weighted_mean_and_the_largest_count():
    from ckpt_jax.cli._assess_figures import _binned_writers

    edges = np.array([0.0, 0.5, 1.0, 3.0, 4.0])
    writers = np.array([2.0, 0.0, 1.0, 3.0])
    grid, mean, largest = _binned_writers(edges, writers, 2)
    np.testing.assert_allclose(grid, [0.0, 2.0, 4.0])
    np.testing.assert_allclose(mean, [(1.0 + 1.0) / 2, (1.0 + 3.0) / 2])
    np.testing.assert_allclose(largest, [2.0, 3.0])


def test_a_dense_timeline_draws_its_writers_per_bin():
    from ckpt_jax.assess import Timeline
    from ckpt_jax.cli._assess_figures import timeline_figure
    from ckpt_jax.cli._design_figures import close

    n = 5000
    writers = np.arange(n) % 2  # a writer count that flips every interval: a solid block if drawn exactly
    line = Timeline(np.linspace(0, 24, n, endpoint=False), writers, np.ones(n), "gpu", 24.0, 1.0)
    figure = timeline_figure(line, saturation_writers=1)
    legend = figure.axes[1].get_legend()
    assert legend is not None
    labels = [text.get_text() for text in legend.get_texts()]
    assert any(label.startswith("mean over 5 min") for label in labels), labels
    assert any(label.startswith("most in 5 min") for label in labels), labels
    close(figure)
