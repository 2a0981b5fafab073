"""Self-checks of the plain-Python reference integrator against hand-computed cases.

The reference is the oracle for the engine, so it is itself checked here against numbers
worked out by hand (comments give the derivation) and against docs/model.md claim 1.
"""

from fractions import Fraction as Q

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from reference import simulate_reference


def test_two_identical_jobs_overlap_exactly():
    # T = 3, d = 1, f = 1. Job 0 fires at 1/2 and writes alone at rate 1 until job 1 fires
    # at 1; both then drain at 1/2: job 0 (1/2 left) ends at 2, job 1 has 1/2 left and ends
    # alone at 5/2. Each job computes 3 and fires again: 5 and 11/2. Period 9/2, gap 1/2.
    fire_times, end_times = simulate_reference([3, 3], [1, 1], phase=[0, 0], remaining=[Q(1, 2), 1], n_fires=4)
    period = Q(9, 2)
    assert fire_times == [[Q(1, 2) + k * period for k in range(4)], [1 + k * period for k in range(4)]]
    assert end_times == [[2 + k * period for k in range(4)], [Q(5, 2) + k * period for k in range(4)]]
    assert all(isinstance(x, Q) for row in fire_times + end_times for x in row)


def test_two_writers_drain_at_half_speed():
    # Both fire at t = 1 together; volume 1 each at rate 1/2 ends at 3; compute 10 -> 13.
    fire_times, end_times = simulate_reference([10, 10], [1, 1], phase=[0, 0], remaining=[1, 1], n_fires=2)
    assert fire_times == [[1, 13], [1, 13]]
    assert end_times == [[3, 15], [3, 15]]
    # Four instants: simultaneous switches are one event, never one job at a time.
    assert simulate_reference([10, 10], [1, 1], phase=[0, 0], remaining=[1, 1], n_fires=2, return_event_times=True)[
        2
    ] == [1, 3, 13, 15]


def test_initial_write_end_is_not_recorded():
    # Both start writing with volume 1 (end at 2, not recorded), compute 2 -> fire at 4.
    fire_times, end_times = simulate_reference([2, 2], [1, 1], phase=[1, 1], remaining=[1, 1], n_fires=1)
    assert fire_times == [[4], [4]]
    assert end_times == [[6], [6]]


def test_cap_one_halves_two_computing_jobs():
    # C = 1 and two computing jobs: each computes at 1/2. Remaining 1 -> fire at 2; writes of 1
    # at 1/2 -> end at 4; compute 2 at 1/2 -> fire at 8, end at 10.
    fire_times, end_times = simulate_reference([2, 2], [1, 1], phase=[0, 0], remaining=[1, 1], n_fires=2, cap=1)
    assert fire_times == [[2, 8], [2, 8]]
    assert end_times == [[4, 10], [4, 10]]


def test_cap_binds_only_while_both_compute():
    # C = 1, f(n) = n (no storage contention), T = 5, d = 1. Both compute at 1/2: job 0
    # (remaining 1) fires at 2, job 1 has 1 left and computes alone at rate 1 -> fires at 3,
    # as job 0's write ends. Job 1 writes until 4 while job 0 computes alone (4 left at t = 4).
    # Then both at 1/2: job 0 fires at 12, job 1 has 1 left, alone at rate 1 -> fires at 13.
    fire_times, end_times = simulate_reference(
        [5, 5], [1, 1], phase=[0, 0], remaining=[1, 2], n_fires=2, cap=1, throughput=[0, 1, 2]
    )
    assert fire_times == [[2, 12], [3, 13]]
    assert end_times == [[3, 13], [4, 14]]


def test_no_contention_means_solo_period():
    # f(n) = n and no cap: jobs never interact, period T_i + d_i.
    fire_times, end_times = simulate_reference(
        [3, Q(7, 3), 5], [1, Q(1, 2), 2], phase=[0, 1, 0], remaining=[1, Q(1, 4), 2], n_fires=3, throughput=[0, 1, 2, 3]
    )
    assert fire_times[0] == [1, 5, 9]
    assert fire_times[1] == [Q(1, 4) + Q(7, 3) + k * Q(17, 6) for k in range(3)]
    assert fire_times[2] == [2, 9, 16]
    assert end_times[2] == [4, 11, 18]


def test_async_background_write():
    # alpha = 1/2, f(n) = n, uncapped: the jobs do not interact. Job 0 (T = 2) fires at 1,
    # drains until 2 while computing 1/2 of its next T, then 3/2 at full speed -> fires at
    # 7/2: period T + d - alpha d = 5/2. Job 1 (T = 10) fires at 7, period 21/2.
    fire_times, end_times = simulate_reference(
        [2, 10], [1, 1], phase=[0, 0], remaining=[1, 7], n_fires=3, throughput=[0, 1, 2], async_fraction=Q(1, 2)
    )
    assert fire_times == [[1, Q(7, 2), 6], [7, Q(35, 2), 28]]
    assert end_times == [[2, Q(9, 2), 7], [8, Q(37, 2), 29]]


def test_async_waits_for_own_drain():
    # T = 1/2, d = 2, alpha = 1/2, f(n) = n. Job 0 fires at 1; its next compute (1/2 at rate
    # 1/2) ends at 2 while its write drains until 3: it waits, then fires at 3, and so on.
    # Job 1 starts writing 1 while computing its next 1/2 at rate 1/2: both end at t = 1
    # exactly, so it fires at 1 (drain end and compute end at one instant).
    fire_times, end_times = simulate_reference(
        [Q(1, 2), Q(1, 2)],
        [2, 2],
        phase=[0, 1],
        remaining=[1, 1],
        n_fires=3,
        throughput=[0, 1, 2],
        async_fraction=Q(1, 2),
    )
    assert fire_times == [[1, 3, 5], [1, 3, 5]]
    assert end_times == [[3, 5, 7], [3, 5, 7]]


def test_async_draining_job_counts_under_cap():
    # alpha = 1, C = 1, f(n) = n: a draining job keeps computing at full share, so two jobs
    # always share the cap: each computes at 1/2 whatever the phases. Job 0: remaining 1 ->
    # fires at 2 and computes its next 8 at 1/2 (also while draining) -> 18; job 1:
    # remaining 2 -> fires at 4, then 20.
    fire_times, end_times = simulate_reference(
        [8, 8], [1, 1], phase=[0, 0], remaining=[1, 2], n_fires=2, cap=1, throughput=[0, 1, 2], async_fraction=1
    )
    assert fire_times == [[2, 18], [4, 20]] and end_times == [[3, 19], [5, 21]]


def test_delayed_controller_by_hand():
    # C = 1, tau = 1, f(n) = n, T = (3, 6), d = 1, job 1 starts with 8 left. Applied count
    # (speed): [0,3) 2 (1/2), [3,4) 1 (1), [4,9) 2 (1/2), [9,10) 1 (1), [10,15) 2/0, ...
    # Job 0 fires at 2, 8, 14; job 1 (8 -> 7 -> 6.5 -> 5.5 -> 3.5 -> 3 -> 2 -> 0) at 14
    # together with job 0. Both drain (f(n) = n) until 15. Applied 0 on [15,16) (speed 1),
    # then 2: job 0 fires at 20, job 1 at 25 (5 left at 16, 3 at 20, 2.5 at 21, 1.5 at 22
    # after [21,22) at full speed, then 1/2 -> 25).
    fire_times, end_times = simulate_reference(
        [3, 6], [1, 1], phase=[0, 0], remaining=[1, 8], n_fires=2, cap=1, throughput=[0, 1, 2], delay=1
    )
    assert fire_times == [[2, 8], [14, 25]]
    assert end_times == [[3, 9], [15, 26]]


def test_delay_zero_is_base_model():
    args = ([3, Q(5, 2), 4], [1, Q(3, 4), Q(1, 2)])
    kwargs = dict(
        phase=[0, 1, 0], remaining=[Q(1, 3), Q(1, 2), 2], n_fires=5, cap=Q(3, 2), throughput=[0, 1, Q(3, 2), Q(7, 4)]
    )
    assert simulate_reference(*args, **kwargs) == simulate_reference(*args, delay=0, **kwargs)
    # A tiny delay moves the answer only a little (continuity), but does move it.
    delayed = simulate_reference(*args, delay=Q(1, 10**6), **kwargs)
    base = simulate_reference(*args, **kwargs)
    assert delayed != base
    assert max(abs(a - b) for ra, rb in zip(delayed[0], base[0]) for a, b in zip(ra, rb)) < Q(1, 1000)


def test_compute_work_callable():
    # Job 0's k-th compute phase has work k + 1; f(n) = n so the jobs do not interact.
    # Fires at 1, then write 1 + compute 2 -> 4, write 1 + compute 3 -> 8.
    # Job 1 starts writing: its first compute (k = 0) has work 7 -> fires at 1 + 7 = 8.
    fire_times, end_times = simulate_reference(
        [1, 1],
        [1, 1],
        phase=[0, 1],
        remaining=[1, 1],
        n_fires=3,
        throughput=[0, 1, 2],
        compute_work=lambda i, k: k + 1 if i == 0 else 7,
    )
    assert fire_times == [[1, 4, 8], [8, 16, 24]]
    assert end_times == [[2, 5, 9], [9, 17, 25]]


def test_float_inputs_are_made_exact():
    fire_times, _ = simulate_reference([0.1, 0.1], [0.3, 0.3], [0, 0], [0.1, 0.2], n_fires=2)
    assert all(isinstance(x, Q) for row in fire_times for x in row)
    assert fire_times[0][0] == Q(0.1)
    inexact, _ = simulate_reference([0.1, 0.1], [0.3, 0.3], [0, 0], [0.1, 0.2], n_fires=2, exact=False)
    assert all(isinstance(x, float) for row in inexact for x in row)
    assert all(abs(a - float(b)) < 1e-12 for ra, rb in zip(inexact, fire_times) for a, b in zip(ra, rb))


def test_max_events_raises():
    with pytest.raises(RuntimeError):
        simulate_reference([1, 1], [1, 1], [0, 0], [1, 1], n_fires=50, max_events=10)


@settings(max_examples=30, deadline=None)
@given(
    delta=st.fractions(min_value=Q(1, 100), max_value=Q(399, 100), max_denominator=1000),
    compute=st.sampled_from([Q(4), Q(5, 2)]),
    write=st.sampled_from([Q(1), Q(3, 2)]),
    cap=st.sampled_from([None, Q(1), Q(3, 2), Q(1, 2)]),
    throughput=st.sampled_from([None, [0, 1, 2], [0, 1, Q(3, 2)], [0, 2, 1]]),
)
def test_pair_neutrality_claim_1(delta, compute, write, cap, throughput):
    """docs/model.md claim 1: two identical jobs with d < T keep their gap forever.

    Start at a section (job 0 fires at t = 0, i.e. starts writing d; job 1 has ``delta`` of
    work left, taken mod T + d). If the section coordinate is invariant, the state at each
    firing of job 0 repeats, so the time gaps between successive firings of the two jobs are
    all equal, whatever f and C.
    """
    delta = delta % (compute + write)
    if delta == 0:
        return
    phase1, remaining1 = (0, delta) if delta <= compute else (1, delta - compute)
    fire_times, _ = simulate_reference(
        [compute, compute],
        [write, write],
        phase=[1, phase1],
        remaining=[write, remaining1],
        n_fires=5,
        cap=cap,
        throughput=throughput,
    )
    # Job 0 fires again one period after t = 0; job 1 fires between its firings.
    period_0 = [b - a for a, b in zip(fire_times[0], fire_times[0][1:])]
    assert len(set(period_0)) == 1
    lag = [b - a for a, b in zip(fire_times[0], fire_times[1])]
    assert len(set(lag)) == 1


# --- job sizes and sharing policies (docs/model.md §1b) ----------------------------------------


def test_maxmin_level_by_hand():
    from reference import maxmin_level

    assert maxmin_level([1, 2, 4], 3) == 1  # 1 full, then 2 shared by the two others
    assert maxmin_level([1, 2, 4], 5) == 2  # 1 and 2 full, the largest gets 2
    assert maxmin_level([3, 3], 3) == Q(3, 2)  # equal sizes: C / n
    assert maxmin_level([1, 2, 4], 7) is None  # the cap does not bind


def test_fcfs_pair_drains_one_at_a_time():
    # Both fire at 1 together: job 0 (lower index) drains 1..2, job 1 waits, then 2..3.
    # They compute 10 again: job 0 fires at 12 and ends at 13, job 1 fires at 13, ends at 14.
    fire_times, end_times = simulate_reference(
        [10, 10], [1, 1], phase=[0, 0], remaining=[1, 1], n_fires=2, storage_policy="fcfs"
    )
    assert fire_times == [[1, 12], [1, 13]]
    assert end_times == [[2, 13], [3, 14]]


def test_weighted_storage_shares_by_size():
    # Both write 1 from t = 0 with sizes 1 and 3: rates 1/4 and 3/4. Job 1 ends at 4/3 with
    # job 0 at 2/3 left, alone at rate 1 -> ends at 2. Then each computes 1: fires 7/3 and 3.
    fire_times, _ = simulate_reference(
        [1, 1], [1, 1], phase=[1, 1], remaining=[1, 1], n_fires=1, size=[1, 3], storage_policy="weighted"
    )
    assert fire_times == [[3], [Q(7, 3)]]


_FLEETS = st.fixed_dictionaries(
    dict(
        compute=st.lists(st.integers(1, 8).map(lambda k: Q(k, 4)), min_size=3, max_size=3),
        write=st.lists(st.integers(1, 8).map(lambda k: Q(k, 4)), min_size=3, max_size=3),
        phase=st.lists(st.integers(0, 1), min_size=3, max_size=3),
        cap=st.integers(1, 8).map(lambda k: Q(k, 4)),
        delay=st.sampled_from([0, Q(1, 2)]),
        async_fraction=st.sampled_from([0, Q(1, 2)]),
    )
)


@settings(max_examples=20, deadline=None)
@given(
    fleet=_FLEETS,
    policy=st.sampled_from([("maxmin", "fair"), ("maxmin", "weighted"), ("uniform", "fair"), ("uniform", "weighted")]),
)
def test_unit_sizes_are_the_base_model_exactly(fleet, policy):
    remaining = [fleet["write"][i] if fleet["phase"][i] else fleet["compute"][i] for i in range(3)]
    kwargs = dict(fleet, remaining=remaining, n_fires=3, return_event_times=True)
    assert simulate_reference(**kwargs) == simulate_reference(
        **kwargs, size=[1, 1, 1], power_policy=policy[0], storage_policy=policy[1]
    )


@pytest.mark.parametrize("power", ["maxmin", "uniform"])
def test_unequal_sizes_under_a_binding_cap_move_the_lag_exactly(power):
    # Claim 9a in exact arithmetic: equal sizes keep a pair's lag constant, unequal ones do not.
    def lags(size):
        fire_times, _ = simulate_reference(
            [10, 10], [1, 1], phase=[0, 0], remaining=[10, 7], n_fires=6, cap=Q(3, 2), size=size, power_policy=power
        )
        return {b - a for a, b in zip(*fire_times)}

    assert len(lags([2, 2])) == 1
    assert len(lags([1, 2])) > 1
