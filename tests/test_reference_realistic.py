"""Self-checks of `reference.simulate_realistic_reference` (write limits, two-level
checkpoints, power draw; docs/model.md §1d) against hand-computed cases, closed forms, and the
older references where the mechanisms reduce to them.
"""

import random
from fractions import Fraction as Q

import pytest
from reference import (
    capped_shares,
    power_stats,
    simulate_failures_reference,
    simulate_realistic_reference,
    simulate_reference,
)

POLICIES = [(power, storage) for power in ("maxmin", "uniform") for storage in ("fair", "weighted", "fcfs")]


@pytest.mark.parametrize("storage", ["fair", "weighted", "fcfs"])
@pytest.mark.parametrize("limit, solo", [(Q(1, 2), 1), (Q(1, 2), 2), (3, 2), (None, 2)])
def test_a_lone_job_writes_at_its_limit(storage, limit, solo):
    # Blocking: cycle T + d / min(b, f(1)); T = 3, d = 2.
    write_time = Q(2) / (solo if limit is None else min(limit, solo))
    run = simulate_realistic_reference(
        [3], [2], 30, throughput=[0, solo], write_limit=[limit], storage_policy=storage, size=[2]
    )
    period = 3 + write_time
    fired = [3 + k * period for k in range(len(run["fire_times"][0]))]
    assert run["fire_times"][0] == fired and fired[-1] <= 30 < fired[-1] + period
    assert [e for e in run["end_times"][0] if e is not None] == [t + write_time for t in fired if t + write_time <= 30]


@pytest.mark.parametrize("compute, write, limit", [(3, 1, None), (1, 3, None), (2, 4, 2), (2, 4, Q(1, 3))])
@pytest.mark.parametrize("snap", [0, Q(1, 2)])
def test_a_lone_two_level_job_has_cycle_s_plus_max_of_t_and_d(compute, write, limit, snap):
    drain = Q(write) / (1 if limit is None else min(limit, 1))
    horizon = 40
    run = simulate_realistic_reference([compute], [write], horizon, snapshot=[snap], write_limit=[limit])
    period = snap + max(compute, drain)
    fired = run["fire_times"][0]
    assert fired == [compute + k * period for k in range(len(fired))] and fired[-1] + period > horizon
    ends = [t + snap + drain for t in fired]
    assert run["end_times"][0] == [e if e <= horizon else None for e in ends]
    # Time snapshotting, waiting on the drain, computing: every cycle has s, max(0, D - T), T.
    snapped = sum(min(snap, horizon - t) for t in fired)
    assert run["snapshot_time"][0] == snapped
    assert run["compute_time"][0] + run["snapshot_time"][0] + run["wait_time"][0] == horizon
    if drain <= compute:
        assert run["wait_time"][0] == 0
    else:
        assert run["wait_time"][0] > 0
    assert run["useful_work"][0] == run["persisted_work"][0] == compute * sum(e <= horizon for e in ends)


def _random_fleet(rng, n_jobs, grid):
    if grid:
        value = lambda low, high: Q(rng.randint(int(4 * low), int(4 * high)), 4)  # noqa: E731
    else:
        value = lambda low, high: Q(rng.uniform(low, high))  # noqa: E731
    compute = [value(1, 3) for _ in range(n_jobs)]
    write = [value(Q(1, 4), 2) for _ in range(n_jobs)]
    phase = [rng.randint(0, 1) for _ in range(n_jobs)]
    remaining = [(write[i] if phase[i] else compute[i]) * Q(rng.randint(1, 4), 4) for i in range(n_jobs)]
    return dict(
        compute=compute,
        write=write,
        phase=phase,
        remaining=remaining,
        size=[rng.choice([1, 2, 4]) for _ in range(n_jobs)],
        cap=rng.choice([None, value(1, n_jobs)]),
        throughput=[0] + [rng.choice([1, n, Q(1, 1 + n)]) for n in range(1, n_jobs + 1)],
    )


@pytest.mark.parametrize("power, storage", POLICIES)
@pytest.mark.parametrize("grid", [True, False])
def test_two_level_with_zero_snapshots_is_async_with_alpha_one(power, storage, grid):
    rng = random.Random(10 * POLICIES.index((power, storage)) + grid)
    for _ in range(4):
        fleet = _random_fleet(rng, rng.randint(2, 4), grid)
        n_jobs = len(fleet["compute"])
        horizon = Q(12)
        policies = dict(power_policy=power, storage_policy=storage)
        two_level = simulate_realistic_reference(horizon=horizon, snapshot=[0] * n_jobs, **fleet, **policies)
        fired, ended, instants = simulate_reference(
            fleet["compute"],
            fleet["write"],
            fleet["phase"],
            fleet["remaining"],
            n_fires=20,
            cap=fleet["cap"],
            throughput=fleet["throughput"],
            size=fleet["size"],
            async_fraction=1,
            return_event_times=True,
            **policies,
        )
        assert all(times[-1] > horizon for times in ended)
        assert two_level["fire_times"] == [[t for t in times if t <= horizon] for times in fired]
        assert [[e for e in times if e is not None] for times in two_level["end_times"]] == [
            [t for t in times if t <= horizon] for times in ended
        ]
        assert two_level["event_times"] == sorted({t for t in instants if t <= horizon} | {horizon})
        assert sum(two_level["snapshot_time"]) == 0


@pytest.mark.parametrize("power, storage", POLICIES)
@pytest.mark.parametrize("alpha", [0, Q(1, 2)])
def test_without_the_new_mechanisms_it_is_the_failure_reference(power, storage, alpha):
    # No write limits, no snapshots: blocking (or alpha-asynchronous) checkpoints with
    # failures, exactly as `simulate_failures_reference` integrates them.
    rng = random.Random(100 + 10 * POLICIES.index((power, storage)) + int(2 * alpha))
    for _ in range(4):
        fleet = _random_fleet(rng, rng.randint(2, 4), rng.random() < 0.5)
        n_jobs = len(fleet["compute"])
        horizon = Q(15)
        failures = [sorted({Q(rng.randint(0, 60), 4) for _ in range(rng.randint(0, 3))}) for _ in range(n_jobs)]
        restart = [Q(rng.randint(0, 4), 4) for _ in range(n_jobs)]
        args = dict(fleet, power_policy=power, storage_policy=storage, async_fraction=alpha, restart=restart)
        new = simulate_realistic_reference(horizon=horizon, failure_times=failures, **args)
        old = simulate_failures_reference(horizon=horizon, failure_times=failures, **args)
        for name in (
            "fire_times",
            "failure_times",
            "restart_times",
            "event_times",
            "failures",
            "useful_work",
            "lost_work",
            "uncovered_work",
            "compute_work",
            "compute_time",
            "write_time",
            "down_time",
            "completed_write_time",
        ):
            if name == "uncovered_work":  # the old one counts the write in flight as uncovered
                got = [a + b for a, b in zip(new["uncovered_work"], new["pending_work"])]
                assert got == old[name], name
            else:
                assert new[name] == old[name], name
        assert [[e for e in times if e is not None] for times in new["end_times"]] == old["end_times"]
        assert new["persisted_work"] == new["useful_work"]
        assert sum(new["snapshot_time"]) == 0


def test_capped_shares_by_hand():
    # f = 6 over caps (1, inf, 4): 1 takes its cap, the other two share 5 -> 2.5 each.
    assert capped_shares(Q(6), [Q(1), None, Q(4)], [1, 1, 1]) == [1, Q(5, 2), Q(5, 2)]
    # Every cap fits: the storage is partly unused.
    assert capped_shares(Q(6), [Q(1), Q(2)], [1, 1]) == [1, 2]
    # By sizes 1 and 3, f = 4: level 1 gives (1, 3), above the second's cap 2; it gets 2 and
    # the first takes the rest, 2.
    assert capped_shares(Q(4), [None, Q(2)], [1, 3]) == [2, 2]
    # A cap freed in a second round: f = 9, caps (1, 3, inf): level 3 -> 1 capped; 8 over
    # two -> 4 >= 3, so the second is capped too; the third takes 5.
    assert capped_shares(Q(9), [Q(1), Q(3), None], [1, 1, 1]) == [1, 3, 5]


def test_capped_shares_fill_the_storage_or_every_cap():
    rng = random.Random(3)
    for _ in range(300):
        n = rng.randint(1, 5)
        total = Q(rng.randint(1, 40), 4)
        caps = [rng.choice([None, Q(rng.randint(1, 20), 4)]) for _ in range(n)]
        weights = [Q(rng.choice([1, 2, 4])) for _ in range(n)]
        rates = capped_shares(total, caps, weights)
        assert all(r > 0 and (c is None or r <= c) for r, c in zip(rates, caps))
        assert sum(rates) == total or all(r == c for r, c in zip(rates, caps))
        # One level for every writer below its cap, and none above it: max-min fairness.
        below = {r / w for r, c, w in zip(rates, caps, weights) if c is None or r < c}
        assert len(below) <= 1
        if below:
            level = below.pop()
            assert all(c is None or r < c or c <= level * w for r, c, w in zip(rates, caps, weights))


def test_failures_of_a_two_level_job_by_hand():
    # T = 2, d = 1, s = 1/2, R = 1. Fire at 2, snapshot to 5/2, drain to 7/2 while cycle 1
    # computes; a failure at 3 abandons the drain and 1/2 of progress. Back at 4, fires at 6,
    # snapshot to 13/2, drain ends at 15/2.
    for rule, useful, lost in (("storage", 2, Q(5, 2)), ("memory", 4, Q(1, 2))):
        run = simulate_realistic_reference(
            [2], [1], 8, snapshot=[Q(1, 2)], failure_times=[[3]], restart=1, recover_from=rule
        )
        assert run["fire_times"] == [[2, 6]] and run["end_times"] == [[None, Q(15, 2)]]
        assert run["useful_work"] == [useful] and run["lost_work"] == [lost] and run["persisted_work"] == [2]
        assert run["down_time"] == [1] and run["snapshot_time"] == [1] and run["write_time"] == [Q(3, 2)]


def test_a_failure_redoes_the_first_lost_cycle():
    # Cycle k has work k + 1. Fire 1 at 1; snapshot 1 to 2; drain 3 to 5 while cycle 1 (work 2)
    # computes to 4 and waits. A failure at 9/2 (R = 0): storage loses cycles 0 and 1 and redoes
    # cycle 0 (work 1); memory keeps cycle 0 and redoes cycle 1 (work 2).
    for rule, refire in (("storage", Q(11, 2)), ("memory", Q(13, 2))):
        run = simulate_realistic_reference(
            [1], [3], 7, snapshot=[1], failure_times=[[Q(9, 2)]], recover_from=rule, compute_work=lambda i, k: k + 1
        )
        assert run["fire_times"] == [[1, refire]] and run["wait_time"] == [Q(1, 2)]


def test_power_draw_and_its_steps():
    # Two jobs of sizes 1 and 3, T = 2, d = 1, f = 1, idle power 1/4, blocking. Both fire at 2
    # and write together at 1/2 each until 4: the draw falls from 4 to 1 in one instant, rises
    # back at 4, falls again at 6.
    run = simulate_realistic_reference([2, 2], [1, 1], 7, size=[1, 3], idle_power=Q(1, 4))
    assert run["power"] == [(0, 2, 4), (2, 4, 1), (4, 6, 4), (6, 7, 1)]
    stats = power_stats(run["power"], run["total_size"], bins=4)
    assert stats["mean"] == Q(4 * 4 + 1 * 3, 7) and stats["max"] == 4 and stats["min"] == 1
    assert stats["largest_drop"] == 3 and stats["largest_rise"] == 3
    assert stats["n_steps"] == 3 and stats["n_changes"] == 3 and stats["threshold"] == Q(2, 5)
    assert stats["edges"] == [0, 1, 2, 3, 4] and stats["time"] == [0, 3, 0, 4]
    # A cap of 2 under maxmin: speeds (1, 1/3), the draw is the cap; uniform: 1/2 each, also 2.
    for power in ("maxmin", "uniform"):
        capped = simulate_realistic_reference([2, 2], [1, 1], 1, size=[1, 3], cap=2, power_policy=power)
        assert capped["power"] == [(0, 1, 2)]
    # Steps across an instant where nothing changes the draw, and a zero-length step at t = 0.
    same = power_stats([(0, 1, Q(2)), (1, 2, Q(2)), (2, 3, Q(1))], Q(4), threshold=1)
    assert same["n_changes"] == 1 and same["n_steps"] == 0 and same["largest_drop"] == 1
    run = simulate_realistic_reference([2, 2], [1, 1], 3, failure_times=[[0], []], restart=1)
    assert run["event_times"][0] == 0 and run["power"][0] == (0, 1, 1)


# --- recovery reads and failures while down (docs/model.md §1e) -------------------------------


@pytest.mark.parametrize("power, storage", POLICIES)
def test_without_reads_or_down_failures_it_is_todays_reference(power, storage):
    # recovery_read = 0 (each job) is today's model whatever fail_while_down says where R = 0;
    # with R > 0, recovery_read = 0 and fail_while_down off are today's model too.
    rng = random.Random(500 + POLICIES.index((power, storage)))
    for _ in range(4):
        fleet = _random_fleet(rng, rng.randint(2, 4), rng.random() < 0.5)
        n_jobs = len(fleet["compute"])
        failures = [sorted({Q(rng.randint(0, 60), 4) for _ in range(rng.randint(0, 4))}) for _ in range(n_jobs)]
        restart = [Q(rng.randint(0, 4), 4) for _ in range(n_jobs)]
        limits = [rng.choice([None, Q(rng.randint(1, 8), 4)]) for _ in range(n_jobs)]
        args = dict(fleet, horizon=Q(15), failure_times=failures, power_policy=power, storage_policy=storage)
        args.update(write_limit=limits, idle_power=Q(1, 4))
        today = simulate_realistic_reference(restart=restart, **args)
        no_reads = simulate_realistic_reference(restart=restart, recovery_read=[0] * n_jobs, **args)
        assert no_reads == today
        instant = simulate_realistic_reference(restart=0, **args)
        assert simulate_realistic_reference(restart=0, recovery_read=0, fail_while_down=True, **args) == instant


def test_a_reader_shares_the_storage_with_a_writer_by_hand():
    # f = 1, T = (3, 2), d = 1, R = 1/2, r = (2, 0). Job 1 fires at 2 and writes. Job 0 fails
    # at 2 (loses 2) and reads from 5/2: two storage users at 1/2 each, so job 1's write (1/2
    # left) ends at 7/2; job 0 has read 1/2 by then and the other 3/2 alone by 5. It computes
    # to 8, fires and writes alone until 17/2, then with job 1 (fired at 17/2) to 19/2.
    run = simulate_realistic_reference(
        [3, 2], [1, 1], 14, failure_times=[[2], []], restart=Q(1, 2), recovery_read=[2, 0]
    )
    assert run["fire_times"] == [[8, Q(25, 2)], [2, Q(11, 2), Q(17, 2), 12]]
    assert run["end_times"] == [[Q(19, 2), 14], [Q(7, 2), Q(13, 2), 10, Q(27, 2)]]
    assert run["read_ends"] == [[5], []] and run["read_time"] == [Q(5, 2), 0]
    assert run["down_time"] == [3, 0] and run["write_time"][1] == 1 + Q(3, 2) + 1 + Q(3, 2) + Q(1, 2)
    assert run["lost_work"] == [2, 0] and run["useful_work"] == [6, 8]


def test_a_reader_queues_under_fcfs_and_reads_at_its_limit():
    # fcfs: job 1 fires at 2 and drains alone to 3; job 0 (failed at 2, R = 1/2) queues for
    # its read at 5/2, behind job 1, and reads 2 from 3 to 5, then computes to 8.
    run = simulate_realistic_reference(
        [3, 2], [1, 1], 8, failure_times=[[2], []], restart=Q(1, 2), recovery_read=[2, 0], storage_policy="fcfs"
    )
    assert run["read_ends"] == [[5], []] and run["fire_times"][0] == [8] and run["end_times"][1][0] == 3
    # A lone job's read drains at min(b, f(1)) = 1/2: it fails at 2 (T = 3), is down to 3 and
    # reads 2 from 3 to 7, computes to 10 and writes 1 at 1/2 until 12.
    run = simulate_realistic_reference(
        [3], [1], 12, failure_times=[[2]], restart=1, recovery_read=2, write_limit=[Q(1, 2)]
    )
    assert run["read_ends"] == [[7]] and run["fire_times"] == [[10]] and run["end_times"] == [[12]]


def test_failures_while_down_restart_the_recovery_by_hand():
    # f = 1, T = 2, d = 1, R = 1, r = 1; failures listed at 1, 5/2 and 7/2.
    # fail_while_down: down 1 to 2, read from 2; 5/2 hits the read: down to 7/2, where the
    # read starts and 7/2 hits it at once: down to 9/2, read to 11/2, compute to 15/2.
    run = simulate_realistic_reference(
        [2], [1], 9, failure_times=[[1, Q(5, 2), Q(7, 2)]], restart=1, recovery_read=1, fail_while_down=True
    )
    assert run["failures"] == [3] and run["lost_work"] == [1]
    assert run["restart_times"] == [[2, Q(7, 2), Q(9, 2)]] and run["read_ends"] == [[Q(11, 2)]]
    assert run["down_time"] == [Q(9, 2)] and run["read_time"] == [Q(3, 2)]
    assert run["fire_times"] == [[Q(15, 2)]] and run["end_times"] == [[Q(17, 2)]]
    # Off: 5/2 falls in the read and is passed over; 7/2 hits the redo (1/2 done by then).
    run = simulate_realistic_reference([2], [1], 9, failure_times=[[1, Q(5, 2), Q(7, 2)]], restart=1, recovery_read=1)
    assert run["failures"] == [2] and run["lost_work"] == [Q(3, 2)] and run["failure_times"] == [[1, Q(7, 2)]]
    assert run["restart_times"] == [[2, Q(9, 2)]] and run["read_ends"] == [[3, Q(11, 2)]]
    assert run["down_time"] == [4] and run["read_time"] == [2]
    assert run["fire_times"] == [[Q(15, 2)]] and run["end_times"] == [[Q(17, 2)]]
    # A time equal to the read's end hits the job, which is up again (read ends come first).
    run = simulate_realistic_reference([2], [1], 9, failure_times=[[1, 3]], restart=1, recovery_read=1)
    assert run["failure_times"] == [[1, 3]] and run["lost_work"] == [1]


def test_recovery_conserves_time():
    # Every job's time is spent computing, writing (alpha = 0), snapshotting or recovering.
    rng = random.Random(77)
    for storage in ("fair", "weighted", "fcfs"):
        for down in (False, True):
            fleet = _random_fleet(rng, 3, True)
            failures = [sorted({Q(rng.randint(0, 60), 4) for _ in range(rng.randint(1, 5))}) for _ in range(3)]
            run = simulate_realistic_reference(
                horizon=Q(15),
                failure_times=failures,
                restart=[Q(rng.randint(0, 4), 4) for _ in range(3)],
                recovery_read=[Q(rng.randint(0, 6), 4) for _ in range(3)],
                fail_while_down=down,
                storage_policy=storage,
                **fleet,
            )
            for i in range(3):
                assert run["compute_time"][i] + run["write_time"][i] + run["down_time"][i] == 15
                assert run["read_time"][i] <= run["down_time"][i]
                assert run["failures"][i] == len(run["failure_times"][i])


def test_an_outage_fails_its_domain_and_staggers_the_restarts_by_hand():
    # Three jobs of one domain, T = 4, d = 1, f = 1, R = 1, Δ = 1/2; an outage at t = 2 fails
    # all three (2 units of work lost each): back at 3, 3.5, 4. They fire at 7, 7.5, 8 and
    # share the storage: job 0 alone on [7, 7.5) (1/2 left), two writers on [7.5, 8) (1/4 and
    # 3/4 left), three from 8: job 0 ends at 8.75; then two: job 1 ends at 9.75, job 2 at 10.
    run = simulate_realistic_reference([4] * 3, [1] * 3, Q(21, 2), restart=1, outages=[(2, 0)], restart_stagger=Q(1, 2))
    assert run["failures"] == run["outage_failures"] == [1, 1, 1]
    assert run["lost_work"] == [2, 2, 2]
    assert run["restart_times"] == [[3], [Q(7, 2)], [4]]
    assert run["stagger_time"] == [0, Q(1, 2), 1]
    assert run["down_time"] == [1, Q(3, 2), 2]
    assert run["fire_times"] == [[7], [Q(15, 2)], [8]]
    assert run["end_times"] == [[Q(35, 4)], [Q(39, 4)], [10]]
    assert run["useful_work"] == [4, 4, 4]
    assert run["outage_lost_work"] == run["lost_work"] and run["outage_down_time"] == run["down_time"]


def test_an_outage_spares_other_domains_and_jobs_down_by_hand():
    # Jobs 0, 1 in domain 0, job 2 in domain 1; R = 2, Δ = 1. Job 1 fails on its own at t = 1
    # (down to 3, a lone failure: no stagger); the outage of domain 0 at t = 2 fails job 0 only
    # (job 1 is down), as rank 0: back at 4. Job 2 is not in the domain.
    run = simulate_realistic_reference(
        [10] * 3,
        [1] * 3,
        6,
        failure_times=[[], [1], []],
        restart=2,
        domain=[0, 0, 1],
        outages=[(2, 0)],
        restart_stagger=1,
    )
    assert run["failures"] == [1, 1, 0] and run["outage_failures"] == [1, 0, 0]
    assert run["restart_times"] == [[4], [3], []]
    assert run["stagger_time"] == [0, 0, 0]
    assert run["lost_work"] == [2, 1, 0]


def test_an_own_failure_at_an_outage_counts_once_and_stagger_is_cut_by_a_failure_while_down():
    # One domain, R = 1, Δ = 1. Job 0's own failure falls at the outage's instant t = 2: it
    # fails once, on its own (back at 3); jobs 1 and 2 are the outage's ranks 0 and 1 (back at
    # 3 and 4). With failures while down, job 2's own failure at 3.5 cuts its stagger [3, 4)
    # after 1/2 and starts its restart over: back at 4.5, down from 2 to 4.5.
    run = simulate_realistic_reference(
        [10] * 3,
        [1] * 3,
        6,
        failure_times=[[2], [], [Q(7, 2)]],
        restart=1,
        outages=[(2, 0)],
        restart_stagger=1,
        fail_while_down=True,
    )
    assert run["failures"] == [1, 1, 2] and run["outage_failures"] == [0, 1, 1]
    assert run["restart_times"] == [[3], [3], [Q(9, 2)]]
    assert run["stagger_time"] == [0, 0, Q(1, 2)]
    assert run["down_time"] == [1, 1, Q(5, 2)]
    assert run["lost_work"] == [2, 2, 2]
    # Job 2 is down 3/2 after the outage, then 1 after its own failure.
    assert run["outage_lost_work"] == [0, 2, 2] and run["outage_down_time"] == [0, 1, Q(3, 2)]
