"""How real fleets checkpoint (docs/model.md §1d) in the engine: write limits, two-level
checkpoints and the power draw — closed forms, the power observer against the trace, the
two-level cycle with s = 0 against α = 1, combinations with the other variants, and bad
input. The engine against the independent reference integrator is tests/test_realistic_oracle.py."""

import jax
import numpy as np
import pytest

import ckpt_jax as cj

POWER = cj.SaveAt(trace=True, jobs=True, power=True)


def _lone(**kw):
    fleet = cj.Fleet([kw.pop("compute", 10.0)], [kw.pop("write", 3.0)], **kw)
    return fleet, cj.initial_state(fleet)


@pytest.mark.parametrize("limit, f1", [(0.5, None), (4.0, None), (0.5, [0.0, 2.0]), (np.inf, [0.0, 0.25])])
def test_a_lone_job_writes_in_d_over_min_of_its_limit_and_f1(limit, f1):
    fleet, state = _lone(write_limit=limit, throughput=f1)
    trace = cj.simulate(fleet, state, n_fires=4)
    solo = 3.0 / min(limit, 1.0 if f1 is None else f1[1])
    np.testing.assert_allclose(trace.end_times - trace.fire_times, solo, rtol=1e-12)
    np.testing.assert_allclose(np.diff(trace.fire_times), 10.0 + solo, rtol=1e-12)
    np.testing.assert_allclose(fleet.period, 10.0 + solo, rtol=1e-12)


@pytest.mark.parametrize(
    "compute, snapshot, limit", [(10.0, 1.0, None), (2.0, 1.0, None), (4.0, 0.5, 0.5), (5.0, 0.0, 1.0)]
)
def test_a_lone_two_level_job_cycles_in_s_plus_max_of_t_and_d(compute, snapshot, limit):
    fleet, state = _lone(compute=compute, snapshot=snapshot, write_limit=limit)
    trace = cj.simulate(fleet, state, n_fires=5, save=POWER)
    drain = 3.0 / (1.0 if limit is None else min(limit, 1.0))
    cycle = snapshot + max(compute, drain)
    np.testing.assert_allclose(np.diff(trace.fire_times), cycle, rtol=1e-12)
    # The drain starts when the snapshot ends: end = fire + s + D.
    np.testing.assert_allclose(trace.end_times - trace.fire_times, snapshot + drain, rtol=1e-12)
    np.testing.assert_allclose(fleet.period, cycle, rtol=1e-12)
    jobs = trace.jobs
    stop = float(trace.time[()])
    # Per job: compute + snapshot + waiting (+ nothing else: the drain overlaps compute) = stop time.
    np.testing.assert_allclose(jobs.compute_time + jobs.snapshot_time + jobs.wait_time, stop, rtol=1e-12)
    np.testing.assert_allclose(jobs.snapshot_time, 5 * snapshot, rtol=1e-12)
    # The run stops at the fifth drain's end: every drain longer than T makes the job wait.
    np.testing.assert_allclose(jobs.wait_time, 5 * max(drain - compute, 0.0), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(jobs.write_time, 5 * drain, rtol=1e-12)
    np.testing.assert_allclose(jobs.persisted_work, 5 * compute, rtol=1e-12)


def test_two_level_with_zero_snapshots_is_asynchronous_checkpointing_at_full_speed():
    rng = np.random.default_rng(4)
    compute, write = rng.uniform(1, 6, (3, 4)), rng.uniform(0.5, 3, (3, 4))
    kw = dict(cap=2.5, throughput="sqrt", size=rng.uniform(0.5, 2, (3, 4)))
    async_fleet = cj.Fleet(compute, write, async_fraction=1.0, **kw)
    two_level = cj.Fleet(compute, write, snapshot=0.0, **kw)
    state = cj.random_state(async_fleet, jax.random.key(0))
    a = cj.simulate(async_fleet, state, n_fires=8)
    b = cj.simulate(two_level, state, n_fires=8)
    np.testing.assert_array_equal(a.fire_times, b.fire_times)
    np.testing.assert_array_equal(a.end_times, b.end_times)
    np.testing.assert_array_equal(a.n_events, b.n_events)


def _draw_from_trace(fleet, trace, times):
    """P(t) at ``times`` from the fire and end times of blocking writes (computing outside
    [fire, end) and before the first firing, a write in progress at t = 0 aside), with the
    maxmin power policy of sizes ``w`` under the cap C: an independent recomputation."""
    fire, end = np.asarray(trace.fire_times), np.asarray(trace.end_times)
    end = np.where(np.isfinite(fire) & np.isnan(end), np.inf, end)  # a write still open at the stop
    size, cap, idle = np.asarray(fleet.size), float(fleet.cap), float(fleet.idle_power)
    draws = []
    for t in times:
        writing = np.array([np.any((fire[i] <= t) & (t < end[i])) for i in range(len(size))])
        computing = ~writing
        sizes = sorted(size[computing])
        level, left, rest = np.inf, cap, list(sizes)
        if sum(sizes) > cap:  # max-min water-filling: small jobs in full, the rest share
            while rest and rest[0] < left / len(rest):
                left -= rest.pop(0)
            level = left / len(rest)
        power = np.where(computing, np.minimum(size, level), idle * size)
        draws.append(power.sum())
    return np.array(draws)


def test_the_power_observer_equals_the_draw_computed_from_the_trace():
    rng = np.random.default_rng(7)
    fleet = cj.Fleet(
        rng.uniform(3, 8, 5), rng.uniform(0.5, 2, 5), cap=3.0, size=[1.0, 2.0, 1.5, 0.5, 1.0], idle_power=0.25
    )
    state = cj.initial_state(fleet, phase=0, remaining=rng.uniform(0.5, 3, 5))
    # To a horizon, with room in the trace for every firing before it.
    trace = cj.simulate(fleet, state, n_fires=60, until=80.0, save=POWER)
    stop = float(trace.time)
    assert np.all(np.isnan(np.asarray(trace.fire_times)[:, -1]))
    # Every switch instant, then P on each interval between them (midpoints).
    instants = np.unique(np.concatenate([[0.0], np.ravel(trace.fire_times), np.ravel(trace.end_times), [stop]]))
    instants = instants[np.isfinite(instants) & (instants <= stop)]
    mids = (instants[:-1] + instants[1:]) / 2
    draw = _draw_from_trace(fleet, trace, mids)
    widths = np.diff(instants)
    power = trace.power
    np.testing.assert_allclose(power.mean, np.sum(draw * widths) / stop, rtol=1e-12)
    np.testing.assert_allclose(power.max, draw.max(), rtol=1e-12)
    np.testing.assert_allclose(power.min, draw.min(), rtol=1e-12)
    steps = np.diff(draw)
    np.testing.assert_allclose(power.largest_drop, max(0.0, -steps.min()), rtol=1e-12)
    np.testing.assert_allclose(power.largest_rise, max(0.0, steps.max()), rtol=1e-12)
    threshold = 0.1 * 6.0
    assert int(power.n_steps) == int(np.sum(np.abs(steps) > threshold))
    assert int(power.n_changes) == int(np.sum(np.abs(steps) > 1e-12))
    edges = np.asarray(power.edges)
    hist = np.histogram(draw, bins=edges, weights=widths)[0]
    np.testing.assert_allclose(power.time, hist, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(np.sum(power.time), stop, rtol=1e-12)
    np.testing.assert_allclose(power.full_draw, 6.0)


def test_power_bins_and_threshold_can_be_given():
    fleet = cj.Fleet([4.0, 4.0, 4.0], [1.0, 1.0, 1.0], idle_power=0.5)
    state = cj.state_from_positions(fleet, [0.0, 1.0, 2.5])
    save = cj.SaveAt(trace=False, power=True, power_bins=(0.0, 1.5, 2.25, 3.0), power_threshold=0.4)
    power = cj.simulate(fleet, state, n_fires=6, save=save).power
    np.testing.assert_allclose(power.edges, [0.0, 1.5, 2.25, 3.0])
    # One job writes at a time or none: P is 3 or 2.5, so no time below 2.25; steps of 0.5.
    assert float(power.time[0]) == 0.0
    assert float(power.largest_drop) == pytest.approx(0.5)
    assert int(power.n_steps) == int(power.n_changes) > 0
    assert float(power.threshold) == 0.4
    counted = cj.simulate(fleet, state, n_fires=6, save=cj.SaveAt(trace=False, power=True, power_threshold=0.5)).power
    assert int(counted.n_steps) == 0  # a step must exceed the threshold


def test_a_synchronous_blocking_fleet_drops_its_whole_draw_at_once_and_two_level_only_for_the_snapshot():
    n = 6
    blocking = cj.Fleet(np.full(n, 10.0), np.full(n, 0.5), idle_power=0.1)
    two_level = cj.Fleet(np.full(n, 10.0), np.full(n, 0.5), snapshot=0.05, idle_power=0.1)
    for fleet in (blocking, two_level):
        power = cj.simulate(fleet, cj.initial_state(fleet), n_fires=4, save=cj.SaveAt(trace=False, power=True)).power
        # All six stop together: from 6 to 0.6, whether the pause is the write or the snapshot.
        assert float(power.largest_drop) == pytest.approx(n * 0.9)
        assert float(power.max) == pytest.approx(n)
    # ... but the two-level fleet is idle only for its snapshots: a higher mean draw.
    means = [
        float(cj.simulate(f, cj.initial_state(f), n_fires=4, save=cj.SaveAt(trace=False, power=True)).power.mean)
        for f in (blocking, two_level)
    ]
    assert means[1] > means[0]


def test_every_variant_combines_with_limits_snapshots_and_power():
    rng = np.random.default_rng(11)
    shape = (2, 4)
    active = np.array([[True, True, True, False], [True, True, True, True]])
    fleet = cj.Fleet(
        rng.uniform(2, 6, shape),
        rng.uniform(0.5, 2, shape),
        cap=2.0,
        delay=0.3,
        size=rng.uniform(0.5, 2, shape),
        storage_policy="weighted",
        active=active,
        write_limit=rng.uniform(0.2, 1.0, shape),
        snapshot=0.2,
        mtbf=30.0,
        restart=0.5,
        recover_from="memory",
        idle_power=0.3,
    )
    state = cj.random_state(fleet, jax.random.key(2))
    kw = dict(n_fires=5, until=60.0, jitter=0.2, key=jax.random.key(3), save=cj.SaveAt(jobs=True, power=True))
    whole = cj.simulate(fleet, state, **kw)
    assert bool(np.all(whole.ok))
    # A fleet alone gives the same as in the batch; the chunked (progress) run the same as one piece.
    alone = cj.simulate(fleet[1], cj.State(state.phase[1], state.remaining[1]), fleet_offset=1, **kw)
    chunked = cj.simulate(fleet, state, progress=True, **kw)
    for leaf_a, leaf_b, leaf_c in zip(
        jax.tree_util.tree_leaves(whole[1]), jax.tree_util.tree_leaves(alone), jax.tree_util.tree_leaves(chunked[1])
    ):
        np.testing.assert_array_equal(np.asarray(leaf_a), np.asarray(leaf_b))
        np.testing.assert_array_equal(np.asarray(leaf_a), np.asarray(leaf_c))
    jobs = whole.jobs
    # Padding slots stay out of everything; memory recovery keeps useful >= persisted work.
    assert np.all(np.isnan(np.asarray(whole.fire_times)[0, 3]))
    live = np.asarray(active)
    assert np.all(np.asarray(jobs.useful_work)[live] >= np.asarray(jobs.persisted_work)[live] - 1e-9)
    # Time adds up per job: compute + snapshot + waiting + down = horizon (the drain overlaps compute).
    total = jobs.compute_time + jobs.snapshot_time + jobs.wait_time + jobs.down_time
    np.testing.assert_allclose(np.asarray(total)[live], 60.0, rtol=1e-12)


def test_memory_recovery_saves_at_least_what_storage_recovery_saves():
    kw = dict(snapshot=0.5, mtbf=25.0, restart=1.0)
    compute, write = np.full((64, 1), 6.0), np.full((64, 1), 4.0)
    results = {}
    for rule in cj.RECOVERY_SOURCES:
        fleet = cj.Fleet(compute, write, recover_from=rule, **kw)
        out = cj.simulate(
            fleet,
            cj.initial_state(fleet),
            n_fires=None,
            until=400.0,
            key=jax.random.key(5),
            save=cj.SaveAt(trace=False, jobs=True),
        )
        results[rule] = out.jobs
    # The same failures (same key, same failure times until the first lost work differs) ...
    np.testing.assert_array_equal(results["memory"].failures[:, 0] >= 0, True)
    assert float(np.mean(results["memory"].useful_work)) > float(np.mean(results["storage"].useful_work))
    np.testing.assert_allclose(results["storage"].useful_work, results["storage"].persisted_work)


def test_fast_methods_refuse_the_new_fields_by_name():
    fleet = cj.Fleet(np.full(8, 5.0), np.full(8, 1.0), write_limit=0.5)
    state = cj.initial_state(fleet)
    for method in ("fifo", "clock"):
        with pytest.raises(ValueError, match="write_limit"):
            cj.simulate(fleet, state, 2, method=method)
    fleet = cj.Fleet(np.full(8, 5.0), np.full(8, 1.0), snapshot=0.1)
    with pytest.raises(ValueError, match="snapshot"):
        cj.simulate(fleet, cj.initial_state(fleet), 2, method="clock")
    plain = cj.Fleet(np.full(8, 5.0), np.full(8, 1.0))
    with pytest.raises(ValueError, match="power"):
        cj.simulate(plain, cj.initial_state(plain), 2, method="fifo", save=cj.SaveAt(power=True))
    # "auto" sends them to the general engine, exactly.
    out = cj.simulate(plain, cj.initial_state(plain), 2, save=cj.SaveAt(power=True))
    assert out.power is not None and bool(out.ok)


def test_without_the_new_fields_results_are_unchanged_bit_for_bit():
    rng = np.random.default_rng(3)
    compute, write = rng.uniform(2, 8, (3, 4)), rng.uniform(0.5, 2, (3, 4))
    base = cj.Fleet(compute, write, cap=2.0, mtbf=30.0, restart=1.0)
    explicit = cj.Fleet(
        compute, write, cap=2.0, mtbf=30.0, restart=1.0, write_limit=None, snapshot=None, idle_power=0.0
    )
    state = cj.random_state(base, jax.random.key(0))
    kw = dict(n_fires=5, until=50.0, key=jax.random.key(1), save=cj.SaveAt(jobs=True))
    a, b = cj.simulate(base, state, **kw), cj.simulate(explicit, state, **kw)
    for x, y in zip(jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b)):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))
    # Observing the power changes nothing else.
    c = cj.simulate(base, state, **dict(kw, save=cj.SaveAt(jobs=True, power=True)))
    np.testing.assert_array_equal(a.fire_times, c.fire_times)
    np.testing.assert_array_equal(a.jobs.useful_work, c.jobs.useful_work)


@pytest.mark.parametrize(
    "kw, match",
    [
        (dict(write_limit=-1.0), "write_limit"),
        (dict(write_limit=0.0), "write_limit"),
        (dict(write_limit=np.nan), "write_limit"),
        (dict(write_limit=[1.0, 2.0, 3.0]), "write_limit"),
        (dict(snapshot=-0.5), "snapshot"),
        (dict(snapshot=np.nan), "snapshot"),
        (dict(snapshot=np.inf), "snapshot"),
        (dict(snapshot=0.5, async_fraction=0.5), "async_fraction"),
        (dict(idle_power=1.5), "idle_power"),
        (dict(idle_power=-0.1), "idle_power"),
        (dict(idle_power=np.nan), "idle_power"),
        (dict(recover_from="disk"), "recover_from"),
        (dict(recover_from=None), "recover_from"),
    ],
)
def test_bad_fleet_input_is_a_value_error_naming_the_argument(kw, match):
    with pytest.raises(ValueError, match=match):
        cj.Fleet([1.0, 2.0], [0.5, 0.5], **kw)


@pytest.mark.parametrize(
    "kw, match",
    [
        (dict(power_bins=0), "power_bins"),
        (dict(power_bins=(1.0,)), "power_bins"),
        (dict(power_bins=(0.0, 2.0, 1.0)), "power_bins"),
        (dict(power_bins=(0.0, np.inf)), "power_bins"),
        (dict(power_bins="many"), "power_bins"),
        (dict(power_threshold=-1.0), "power_threshold"),
        (dict(power_threshold=np.nan), "power_threshold"),
        (dict(power_threshold="big"), "power_threshold"),
        (dict(power=1), "power"),
    ],
)
def test_bad_power_options_are_value_errors_naming_the_argument(kw, match):
    with pytest.raises(ValueError, match=match):
        cj.SaveAt(**kw)


def test_ensembles_of_random_launches_take_the_new_fields_and_keep_the_power(tmp_path):
    make = cj.ensemble.random_launches(
        np.full(4, 5.0),
        np.full(4, 1.0),
        key=jax.random.key(0),
        write_limit=[0.5, np.inf, 1.0, 2.0],
        snapshot=0.1,
        idle_power=0.2,
    )
    assert make.config["write_limit"] == [0.5, None, 1.0, 2.0]  # JSON: None where no limit
    fleet, state = make(0, 3)
    assert fleet.has_snapshots and fleet.has_write_limits and np.all(np.asarray(state.phase) == 0)
    save = cj.SaveAt(trace=False, jobs=True, power=True)
    result = cj.ensemble.run_ensemble(make, 6, 4, chunk_size=3, out_dir=tmp_path, save=save, progress=False)
    direct = cj.simulate(*make(0, 6), 4, save=save)
    np.testing.assert_array_equal(result.power.largest_drop, direct.power.largest_drop)
    np.testing.assert_array_equal(result.jobs.persisted_work, direct.jobs.persisted_work)


def test_the_guide_example_runs_and_prints_what_the_guide_says(capsys):
    from pathlib import Path

    text = (Path(__file__).parent.parent / "docs" / "guide" / "realistic.md").read_text()
    code = text.split("```python\n", 1)[1].split("```", 1)[0]
    exec(compile(code, "realistic.md", "exec"), {})
    lines = capsys.readouterr().out.splitlines()
    snapshot, wait = map(float, lines[0].split())
    mean, drop = map(float, lines[1].split())
    assert (round(snapshot, 4), wait) == (0.0667, 0.0)
    assert (round(mean, 2), round(drop, 6)) == (63.94, 5.6)
