"""`ckpt_jax.assess`: a lone job's goodput is the renewal formula, the time of every job adds
up (goodput plus the losses by cause), storage and power summaries, and bad arguments."""

import json
import math

import jax
import numpy as np
import pytest

import ckpt_jax as cj
from ckpt_jax.cli._assess_figures import assess_figures


def test_lone_job_goodput_is_the_renewal_formula():
    compute, write, mtbf, restart = 10.0, 1.0, 50.0, 2.0
    horizon = 2000 * (compute + write)
    fleet = cj.Fleet(np.array([compute]), np.array([write]), size=np.array([8.0]), mtbf=mtbf, restart=restart)
    result = cj.assess.assess(fleet, horizon=horizon, key=jax.random.key(0), n_draws=64)
    formula = 1 - float(cj.theory.renewal_waste(compute, write, mtbf, restart))
    goodput = result.goodput["fleet"]
    # The launch is random, so the first cycle is partial: a bias of at most one cycle over H.
    assert abs(goodput.mean - formula) < 4 * goodput.stderr + (compute + write) / horizon, (goodput, formula)
    assert goodput.low < goodput.mean < goodput.high
    # A lone job never waits, and its losses are those of the renewal cycle X: per cycle
    # 1/p − 1 failures (p = e^{−(T+d)/M}), each down for R, and, over the 1/p attempts, time
    # writing E[(min(Y, T + d) − T)⁺]/p = M(e^{d/M} − 1) (Y ~ Exp(M), abandoned writes included).
    losses = result.losses["fleet"]
    assert losses["backpressure"].mean == 0
    mean_cycle = float(cj.theory.renewal_cycle_time(compute, write, mtbf, restart))
    expected = dict(
        checkpoint=mtbf * math.expm1(write / mtbf) / mean_cycle,
        restart=restart * math.expm1((compute + write) / mtbf) / mean_cycle,
    )
    for cause, value in expected.items():
        estimate = losses[cause]
        assert abs(estimate.mean - value) < 4 * estimate.stderr + (compute + write) / horizon, (cause, estimate, value)
    assert list(result.groups) == ["8 GPUs/job, compute 10, write 1"]


@pytest.mark.parametrize("recover_from", ["storage", "memory"])
@pytest.mark.parametrize("drain", [2.0, 20.0])
def test_lone_two_level_job_goodput_is_its_renewal_formula(drain, recover_from):
    compute, snapshot, mtbf, restart = 10.0, 0.5, 100.0, 2.0
    period = snapshot + max(compute, drain)
    horizon = 1000 * period
    fleet = cj.Fleet(
        np.array([compute]), np.array([drain]), snapshot=snapshot, recover_from=recover_from, mtbf=mtbf, restart=restart
    )
    result = cj.assess.assess(fleet, horizon=horizon, key=jax.random.key(3), n_draws=32)
    formula = 1 - float(cj.theory.two_level_waste(compute, snapshot, drain, mtbf, restart, recover_from))
    goodput = result.goodput["fleet"]
    assert abs(goodput.mean - formula) < 4 * goodput.stderr + 2 * period / horizon, (goodput, formula)
    # The job blocks only for its snapshots, and waits on its drain only when it outlasts T.
    losses = result.losses["fleet"]
    assert losses["checkpoint"].mean > 0
    assert (losses["backpressure"].mean > 0.1) == (drain > compute)


def _contended(**kw):
    compute = np.array([10.0, 10.0, 14.0, 14.0, 14.0])
    write = np.array([1.0, 1.0, 2.0, 2.0, 2.0])
    size = np.array([8.0, 8.0, 16.0, 16.0, 16.0])
    return cj.Fleet(compute, write, size=size, mtbf=60.0, restart=3.0, **kw), compute + write


@pytest.mark.parametrize("cap, async_fraction", [(None, 0.0), (40.0, 0.0), (None, 0.5)])
def test_goodput_and_losses_add_up(cap, async_fraction):
    fleet, cycle = _contended(cap=cap, idle_power=0.1, async_fraction=async_fraction)
    horizon = 3000.0
    groups = {"small": [0, 1], "large": [2, 3, 4]}
    result = cj.assess.assess(fleet, horizon=horizon, key=jax.random.key(1), n_draws=16, groups=groups)
    for name in ("small", "large", "fleet"):
        total = result.goodput[name].mean + sum(result.losses[name][c].mean for c in cj.assess.CAUSES)
        assert total == pytest.approx(1, abs=1e-12)
        for cause in cj.assess.CAUSES:
            per_day = result.gpu_hours_lost_per_day[name][cause].mean
            assert per_day == pytest.approx(result.losses[name][cause].mean * result.gpus[name] * 24, rel=1e-12)
        # Sharing one storage, the jobs stall on their writes, and they fail.
        assert result.losses[name]["checkpoint"].mean > 0
        assert result.losses[name]["lost_work"].mean > 0
        assert result.losses[name]["restart"].mean > 0
    assert result.gpus == {"small": 16.0, "large": 48.0, "fleet": 64.0}
    # The fleet is the GPU-weighted mean of its groups (which partition it here).
    fleet_goodput = (16 * result.goodput["small"].mean + 48 * result.goodput["large"].mean) / 64
    assert result.goodput["fleet"].mean == pytest.approx(fleet_goodput, rel=1e-12)
    # The goodput is steady-state (docs/model.md §1c): the work in progress at H counts in it,
    # so the rest is the slowdown under the cap alone, 0 without one. It checks the accounting:
    # compute + write + down time = H, and compute work = useful + lost + uncovered work. The
    # power draw measures the same slowdown by another route (with α > 0 approximately).
    throttling = result.losses["fleet"]["throttling"]
    if async_fraction == 0:
        assert throttling.mean == pytest.approx(result.throttled.mean, abs=1e-9)
    if cap is None:
        assert throttling.mean == 0.0 and throttling.high == 0.0
        assert abs(result.throttled.mean) < 1e-12
    else:
        assert throttling.low > 0.01
        assert result.throttled.low > 0.01
        assert result.cap_time is not None and 0 < result.cap_time.mean < 1
    json.dumps(result.to_json())  # plain JSON types


def test_storage_and_power_summaries(tmp_path):
    compute, write = np.full(6, 10.0), np.full(6, 2.0)
    fleet = cj.Fleet(compute, write, throughput="saturating", mtbf=100.0, restart=1.0)
    result = cj.assess.assess(fleet, horizon=500.0, key=jax.random.key(2), n_draws=8, gpu_power=700.0)
    assert result.writer_time.shape == (7,)
    assert result.writer_time.sum() == pytest.approx(1)
    assert 0 <= result.writers_p50 <= result.writers_p99 <= result.writers_max <= 6
    assert result.saturation_writers == 4  # min(n, 4) stops growing at 4 writers
    assert result.saturated_time.mean == pytest.approx(result.writer_time[4:].sum(), abs=0.05)
    # Six GPUs at 700 W: the draw never exceeds 4.2 kW, and a job's write drops it by 700 W.
    assert result.power_unit == "W"
    assert result.power_max.high <= 4200 + 1e-9
    assert 0 < result.power_mean.mean < result.power_max.mean
    assert result.power_largest_drop.mean >= 700 - 1e-9
    # The largest step in any draw, beside the mean over the draws of each draw's largest.
    assert result.power_largest_drop_max >= result.power_largest_drop.mean - 1e-9
    assert result.power_largest_rise_max >= result.power_largest_rise.mean - 1e-9
    assert result.power_largest_drop_max <= 4200 + 1e-9
    power = result.to_json()["power"]
    assert power["largest_drop_max"] == result.power_largest_drop_max and "largest_rise_max" in power
    assert result.power_edges[-1] == pytest.approx(4200)
    assert result.power_time.sum() == pytest.approx(1)
    assert result.cap_time is None
    storage = result.to_json()["storage"]
    assert storage["saturation_writers"] == 4 and len(storage["writer_time"]) == 7
    # The mean writer count does not depend on how the phases correlate: independent phases
    # with each job's fraction of time writing have the same mean.
    counts = np.arange(7)
    assert result.independent_writer_time.sum() == pytest.approx(1)
    assert counts @ result.writer_time == pytest.approx(counts @ result.independent_writer_time, rel=0.02)
    timeline = cj.assess.timeline(fleet, span=100.0, key=jax.random.key(2))
    paths = assess_figures(result, tmp_path / "figures", timeline=timeline)
    assert [path.name for path in paths] == ["losses.png", "writers.png", "timeline.png"]
    assert all(path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for path in paths)


def test_timeline_is_the_run_interval_by_interval():
    fleet, _ = _contended(cap=40.0, idle_power=0.1)
    span, key = 200.0, jax.random.key(4)
    timeline = cj.assess.timeline(fleet, span=span, key=key, gpu_power=2.0)
    lengths = np.diff(np.append(timeline.start, span))
    assert timeline.start[0] == 0 and np.all(lengths > 0)
    # The same draw run directly: the draw's mean and max, and the time writing of every job
    # (each writer counts once per unit of time), from the recorded intervals.
    one = cj.Fleet(
        fleet.compute[None], fleet.write[None], size=fleet.size[None], mtbf=60.0, restart=3.0, cap=40.0, idle_power=0.1
    )
    keys = jax.random.split(key, 2)[:1]
    out = cj.simulate(
        one, cj.random_state(one, keys), None, until=span, key=keys, save=cj.SaveAt(trace=False, jobs=True, power=True)
    )
    assert (timeline.draw * lengths).sum() / span == pytest.approx(2 * float(out.power.mean[0]), rel=1e-12)
    assert timeline.draw.max() == pytest.approx(2 * float(out.power.max[0]), rel=1e-12)
    assert (timeline.writers * lengths).sum() == pytest.approx(float(out.jobs.write_time[0].sum()), rel=1e-12)
    with pytest.raises(ValueError, match="capacity"):
        cj.assess.timeline(fleet, span=span, key=key, capacity=3)


def test_padding_slots_count_nowhere():
    compute, write = np.array([10.0, 12.0, 1.0]), np.array([1.0, 2.0, 1.0])
    padded = cj.Fleet(compute, write, mtbf=40.0, restart=1.0, active=np.array([True, True, False]))
    alone = cj.Fleet(compute[:2], write[:2], mtbf=40.0, restart=1.0)
    results = [cj.assess.assess(f, horizon=300.0, key=jax.random.key(5), n_draws=4) for f in (padded, alone)]
    assert results[0].groups == results[1].groups
    for name in results[1].goodput:
        assert results[0].goodput[name].mean == pytest.approx(results[1].goodput[name].mean, rel=1e-12)
    np.testing.assert_allclose(results[0].writer_time[:3], results[1].writer_time, rtol=1e-12)
    assert results[0].writer_time[3] == 0 and math.isfinite(results[0].throttled.mean)


@pytest.mark.parametrize(
    "throughput, limits, saturation",
    [
        ("shared", None, 1),  # f ≡ 1 from one writer on
        ("saturating", None, 4),  # min(n, 4) stops growing at 4
        ("saturating", [0.8] * 6, 5),  # 4 writers at 0.8 drain 3.2 < f(4) = 4; 5 fill it
        ("shared", [0.25] * 6, 4),  # four writers at 0.25 fill f ≡ 1
        ("shared", [0.1] * 6, 7),  # six writers at 0.1 never do
        ("shared", [0.6, 0.1, 0.1, 0.3, 0.1, 0.2], 6),  # the five smallest drain 0.8 < 1
    ],
)
def test_saturation_writers(throughput, limits, saturation):
    table = cj.throughput_table(throughput, 6)
    limits = np.full(6, np.inf) if limits is None else np.asarray(limits)
    assert cj.assess._saturation_writers(np.asarray(table, np.float64), limits) == saturation


FLEET = cj.Fleet(np.array([10.0, 12.0]), np.array([1.0, 1.0]), mtbf=50.0)


@pytest.mark.parametrize(
    "arguments, name",
    [
        (dict(horizon=0.0), "horizon"),
        (dict(horizon=math.nan), "horizon"),
        (dict(horizon="a week"), "horizon"),
        (dict(n_draws=1), "n_draws"),
        (dict(n_draws=2.5), "n_draws"),
        (dict(n_draws=True), "n_draws"),
        (dict(hours_per_time_unit=0.0), "hours_per_time_unit"),
        (dict(hours_per_time_unit=math.inf), "hours_per_time_unit"),
        (dict(gpu_power=-700.0), "gpu_power"),
        (dict(groups={}), "groups"),
        (dict(groups={"a": []}), "groups['a']"),
        (dict(groups={"a": [2]}), "groups['a']"),
        (dict(groups={"a": [0, 0]}), "groups['a']"),
        (dict(groups={"a": [0.5]}), "groups['a']"),
        (dict(groups={"fleet": [0]}), "groups"),
        (dict(fleet=cj.Fleet(np.ones((2, 2)), np.ones((2, 2)))), "fleet"),
        (dict(fleet="fleet.toml"), "fleet"),
    ],
)
def test_bad_arguments_raise_naming_them(arguments, name):
    call = dict(fleet=FLEET, horizon=100.0, key=jax.random.key(0), n_draws=4) | arguments
    with pytest.raises(ValueError, match=name.replace("[", r"\[")):
        cj.assess.assess(**call)


def test_a_random_launch_is_uniform_in_time_when_the_write_is_a_volume():
    # A fleet file with units: the write is a volume in bytes (1e11 B at 1e10 B/s: D = 10 s)
    # against a compute interval in seconds (T = 590 s). A job launches inside its write for
    # D / (D + T) of the time, about 1.7 %, not nearly always (d + T is almost all write).
    n_draws, n_jobs = 400, 4
    shape = (n_draws, n_jobs)
    fleet = cj.Fleet(np.full(shape, 590.0), np.full(shape, 1e11), throughput=np.full((n_draws, n_jobs + 1), 1e10))
    state = cj.random_state(fleet, jax.random.split(jax.random.key(5), n_draws))
    writing = np.asarray(state.phase) == 1
    assert 0.005 < writing.mean() < 0.04, writing.mean()
    # Those writing have a uniform share of the volume left; the others up to all of T.
    remaining = np.asarray(state.remaining)
    assert np.all(remaining[writing] <= 1e11) and np.all(remaining[~writing] <= 590.0)
    assert remaining[~writing].max() > 0.9 * 590.0


def test_a_fleet_without_failures_is_assessed_with_no_failure_losses():
    # mtbf=None is documented as allowed; before, an internal rebuild refused the infinite mtbf.
    fleet = cj.Fleet(np.full(3, 600.0), np.full(3, 10.0), cap=None)
    result = cj.assess.assess(fleet, horizon=6000.0, key=jax.random.key(0), n_draws=2, progress=False)
    for cause in ("lost_work", "restart"):
        assert result.losses["fleet"][cause].mean == 0.0
    assert 0.9 < result.goodput["fleet"].mean < 1.0
