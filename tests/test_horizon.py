"""A horizon (`until=H`) on an event instant: every loop processes every switch at an instant
<= H, all those at H included, and applies the snapping rule at H (docs/model.md §1 "The
horizon").

Horizons are put *at* exact event instants of `reference.simulate_reference` (synchronous,
staggered and tied fleets, heterogeneous ones for the clock path), one ulp either side and
between instants; each loop (``method`` = "general", "fifo", "clock", "auto") is checked
against the reference and against the others. Every run is a batch of `N_HORIZONS` copies of one fleet of `N_JOBS`
jobs, one horizon each, recording the trace (K = `N_FIRES`) and every observer, so each loop
compiles once for the whole module.
"""

import numpy as np
import pytest
from reference import simulate_reference

import ckpt_jax as cj
from ckpt_jax.cli import main

N_JOBS, N_FIRES, N_INSTANTS = 8, 8, 3
N_HORIZONS = 4 * N_INSTANTS  # per instant t: t - 1 ulp, t, t + 1 ulp, and before the next instant
SAVE = cj.SaveAt(trace=True, writers=True, gaps=True, jobs=True)
RTOL = 1e-13
# The loops decide alike: these agree bit for bit. The observers' sums of times are
# accumulated in a different order on the fast paths (per switch, per kind) than in the
# general engine (per instant), so those agree to rounding, as in any run.
EXACT_FIELDS = (
    "fire_times",
    "end_times",
    "ok",
    "status",
    "n_events",
    "time",
    "gaps",
    "writers.window",
    "writers.excursions",
    "writers.max",
    "jobs.writes",
    "jobs.useful_work",
    "jobs.covered_waste",
)
# The uncovered work (and the steady-state waste from it) comes from each loop's own record of
# the work left in the phase at H: a clock difference on the fast paths.
SUMMED_FIELDS = (
    "writers.time",
    "jobs.write_time",
    "jobs.compute_time",
    "jobs.completed_write_time",
    "jobs.uncovered_work",
    "jobs.waste",
)


def _field(trace, name):
    value = trace
    for part in name.split("."):
        value = getattr(value, part)
    return np.asarray(value)


def _case(name):
    """(fleet of one, phase, remaining, fast methods) of each fleet the tests put horizons in."""
    compute, write = np.full(N_JOBS, 10.0), np.full(N_JOBS, 1.0)
    computing = np.zeros(N_JOBS, int)
    if name == "synchronous":  # all fire together, share f = 1 (write time 8 d)
        return cj.Fleet(compute, write), computing, compute, ("fifo", "clock")
    if name == "staggered":  # one job at a time, with f(n) = n: every instant exact
        return (
            cj.Fleet(compute, write, throughput="linear"),
            computing,
            0.5 + 1.25 * np.arange(N_JOBS),
            ("fifo", "clock"),
        )
    if name == "tied groups":  # groups of 3, 3 and 2 jobs, a cap and sqrt throughput
        remaining = compute * np.array([1.0] * 3 + [0.5] * 3 + [0.25] * 2)
        return cj.Fleet(compute, 1.5 * write, cap=3.0, throughput="sqrt"), computing, remaining, ("fifo", "clock")
    if name == "writing at start":  # initial writes end together, then ties of two kinds
        phase = np.array([1, 1, 0, 0, 0, 1, 0, 0])
        return cj.Fleet(compute, write), phase, np.where(phase == 1, 0.75, 5.0), ("fifo", "clock")
    if name == "heterogeneous":  # pairs of equal jobs: ties across different T_i, d_i
        compute = np.array([4.0, 4.0, 6.0, 6.0, 8.0, 8.0, 3.0, 3.0])
        write = np.array([0.5, 0.5, 1.0, 1.0, 0.25, 0.25, 2.0, 2.0])
        return cj.Fleet(compute, write, throughput="linear"), computing, compute, ("clock",)
    if name == "heterogeneous capped":
        compute = np.array([4.0, 4.0, 6.0, 6.0, 8.0, 8.0, 3.0, 3.0])
        write = np.array([0.5, 0.5, 1.0, 1.0, 0.25, 0.25, 2.0, 2.0])
        remaining = compute * np.array([1.0, 0.5] * 4)
        return cj.Fleet(compute, write, cap=5.0), computing, remaining, ("clock",)
    raise AssertionError(name)


def _batch(fleet, phase, remaining, horizons):
    """``fleet`` (of one) repeated once per horizon, with its initial state."""
    n = len(horizons)
    cap = np.asarray(fleet.cap, np.float64)
    batch = cj.Fleet(
        np.broadcast_to(np.asarray(fleet.compute), (n, N_JOBS)),
        np.broadcast_to(np.asarray(fleet.write), (n, N_JOBS)),
        cap=np.full(n, float(cap)) if np.isfinite(cap) else None,
        throughput=np.broadcast_to(np.asarray(fleet.throughput), (n, N_JOBS + 1)),
    )
    state = cj.initial_state(
        batch, phase=np.broadcast_to(phase, (n, N_JOBS)), remaining=np.broadcast_to(remaining, (n, N_JOBS))
    )
    return batch, state


def _run_all(fleet, phase, remaining, horizons, fast):
    batch, state = _batch(fleet, phase, remaining, horizons)
    return {
        method: cj.simulate(batch, state, N_FIRES, method=method, until=np.asarray(horizons), save=SAVE)
        for method in ("general",) + fast + ("auto",)
    }


def _reference(fleet, phase, remaining, n_fires):
    cap = float(np.asarray(fleet.cap))
    return simulate_reference(
        np.asarray(fleet.compute),
        np.asarray(fleet.write),
        phase,
        remaining,
        n_fires,
        cap=cap if np.isfinite(cap) else None,
        throughput=list(np.asarray(fleet.throughput)),
        return_event_times=True,
    )


def _tied_instants(fire, end, instants, before):
    """The `N_INSTANTS` instants before ``before`` where the most jobs switch (ties), in time
    order: the horizons to test."""
    switches = {}
    for times in list(fire) + list(end):
        for t in times:
            switches[t] = switches.get(t, 0) + 1
    candidates = [t for t in instants if t < before]
    return sorted(sorted(candidates, key=lambda t: (-switches.get(t, 0), t))[:N_INSTANTS])


def _assert_loops_agree(runs):
    general = runs["general"]
    for method, trace in runs.items():
        for name in EXACT_FIELDS:
            np.testing.assert_array_equal(_field(trace, name), _field(general, name), err_msg=f"{method}: {name}")
        for name in SUMMED_FIELDS:
            np.testing.assert_allclose(
                _field(trace, name), _field(general, name), rtol=RTOL, atol=0, err_msg=f"{method}: {name}"
            )


def _up_to(times, horizon):
    """One job's reference times up to ``horizon`` (exact), as a row of `N_FIRES` floats."""
    row = [float(t) for t in times if t <= horizon][:N_FIRES]
    return row + [np.nan] * (N_FIRES - len(row))


def _horizons(instant, next_instant):
    """The horizons next to an exact instant: one ulp before it, at it, one ulp after it
    (all within the snapping tolerance: the instant's switches happen at H), and halfway
    to the next instant (a time advance to H after them)."""
    at = float(instant)
    return [np.nextafter(at, 0), at, np.nextafter(at, np.inf), float((instant + next_instant) / 2)]


@pytest.mark.parametrize(
    "name", ["synchronous", "staggered", "tied groups", "writing at start", "heterogeneous", "heterogeneous capped"]
)
def test_every_loop_processes_every_instant_up_to_the_horizon(name):
    fleet, phase, remaining, fast = _case(name)
    fire, end, instants = _reference(fleet, phase, remaining, N_FIRES + 2)
    instants = sorted(set(instants))
    # Before any job's N_FIRES-th firing, so the trace holds every firing up to H.
    last = min(times[N_FIRES - 1] for times in fire)
    chosen = _tied_instants(fire, end, instants, last)
    horizons = [h for t in chosen for h in _horizons(t, instants[instants.index(t) + 1])]
    runs = _run_all(fleet, phase, remaining, horizons, fast)
    _assert_loops_agree(runs)

    trace = runs["general"]
    np.testing.assert_array_equal(np.asarray(trace.time), horizons)  # every fleet got to its H
    assert np.all(np.asarray(trace.ok))
    for b, horizon in enumerate(horizons):
        instant = chosen[b // 4]  # the reference's exact instant next to this horizon
        message = f"instant {float(instant)!r}, H = {horizon!r}"
        want_fire = np.array([_up_to(times, instant) for times in fire])
        want_end = np.array([_up_to(times, instant) for times in end])
        got_fire, got_end = np.asarray(trace.fire_times[b]), np.asarray(trace.end_times[b])
        np.testing.assert_allclose(got_fire, want_fire, rtol=RTOL, atol=0, equal_nan=True, err_msg=message)
        np.testing.assert_allclose(got_end, want_end, rtol=RTOL, atol=0, equal_nan=True, err_msg=message)
        # The instant's switches: at H when H is within the snapping tolerance of it.
        at_instant = np.concatenate([got_fire[want_fire == float(instant)], got_end[want_end == float(instant)]])
        assert at_instant.size >= 1
        near = b % 4 < 3
        if near:
            np.testing.assert_array_equal(at_instant, horizon, err_msg=message)
        # Event instants: the reference's up to the instant, and the advance to H after it.
        expected = sum(1 for t in instants if t <= instant) + (not near)
        assert int(trace.n_events[b]) == expected, message
        # Completed writes and waste: every reference write end up to the instant; a write
        # saves the work of the compute phase before it (an initial compute: `remaining`).
        writes = np.array([sum(1 for t in times if t <= instant) for times in end])
        np.testing.assert_array_equal(np.asarray(trace.jobs.writes[b]), writes, err_msg=message)
        first = np.where(phase == 0, remaining, np.asarray(fleet.compute))
        useful = np.where(writes > 0, first + (writes - 1) * np.asarray(fleet.compute), 0.0)
        covered = np.asarray(trace.jobs.covered_waste[b])
        np.testing.assert_allclose(covered, 1 - useful / horizon, rtol=RTOL, err_msg=message)


@pytest.mark.parametrize("method", ["general", "fifo", "clock", "auto"])
def test_the_issue_fleet_completes_every_write_up_to_the_horizon(method):
    # Identical jobs from a synchronous start (T = 10, d = 1, f = 1: a cycle of 18): at
    # H = 1008 = 56 cycles all eight writes end together. Every job has completed 56.
    fleet, phase, remaining, _ = _case("synchronous")
    cycles = np.array([1, 2, 3, 5, 8, 13, 21, 34, 55, 56, 57, 100])
    horizons = 18.0 * cycles
    batch, state = _batch(fleet, phase, remaining, horizons)
    trace = cj.simulate(batch, state, N_FIRES, method=method, until=horizons, save=SAVE)
    _, end, _ = _reference(fleet, phase, remaining, int(cycles.max()) + 1)
    writes = np.array([[sum(1 for t in times if t <= h) for times in end] for h in horizons])
    np.testing.assert_array_equal(writes[cycles == 56], 56)
    np.testing.assert_array_equal(np.asarray(trace.jobs.writes), writes)
    # Each completed write saves T = 10: waste 1 - 560/1008 = 4/9 at H = 1008.
    np.testing.assert_allclose(np.asarray(trace.jobs.covered_waste), 1 - 10.0 * writes / horizons[:, None], rtol=RTOL)


def test_a_horizon_one_ulp_from_a_firing_snaps_it_on_every_loop():
    # A fleet that fires at 10 and H = 10 -/+ 1 ulp: the firings are within the snapping
    # tolerance of H, so every loop records them at H, in one event instant.
    fleet, phase, remaining, fast = _case("synchronous")
    horizons = np.repeat([np.nextafter(10.0, 0), np.nextafter(10.0, 20)], N_HORIZONS // 2)
    runs = _run_all(fleet, phase, remaining, horizons, fast)
    _assert_loops_agree(runs)
    for method, trace in runs.items():
        first = np.asarray(trace.fire_times)[:, :, 0]
        np.testing.assert_array_equal(first, np.broadcast_to(horizons[:, None], first.shape), err_msg=method)
        np.testing.assert_array_equal(np.asarray(trace.n_events), 1, err_msg=method)


def test_cli_horizon_on_a_write_end_records_every_job(tmp_path):
    # 8 jobs start together: they fire at 10 and their shared writes all end at 18 = H.
    argv = ["simulate", "--jobs", "8", "--start", "sync", "--horizon", "18", "--cycles", "2", "--out", str(tmp_path)]
    assert main(argv) == 0
    npz = np.load(tmp_path / "trace.npz")
    fire, end = npz["fire_times"][0], npz["end_times"][0]
    np.testing.assert_array_equal(fire[:, 0], 10.0)
    np.testing.assert_array_equal(end[:, 0], 18.0)
    assert np.isnan(fire[:, 1]).all() and np.isnan(end[:, 1]).all()
    assert npz["ok"].all() and npz["time"][0] == 18.0
