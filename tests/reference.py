"""A deliberately simple, exact, plain-Python reference integrator for the fleet model.

This is the oracle the JAX engine is tested against (docs/model.md section 4). It shares no code
with the engine and is written in a different style: one job at a time, explicit if/else,
``fractions.Fraction`` arithmetic so that simultaneous events are exactly simultaneous.
Speed does not matter here; being obviously right does.
"""

import math
from fractions import Fraction

# Aggregate write throughput shapes f(n) the oracle tests draw fleets from (None: f = 1).
THROUGHPUT_KINDS = {
    "shared": None,
    "linear": lambda n: float(n),
    "sqrt": lambda n: math.sqrt(n),
    "saturating": lambda n: float(min(n, 3)),
    "decreasing": lambda n: 1.0 / (1.0 + 0.3 * (n - 1)),
}


def _exact(x):
    """Converts a number to an exact Fraction (floats convert exactly, no rounding)."""
    return x if isinstance(x, Fraction) else Fraction(x)


def maxmin_level(sizes, cap):
    """Max-min fair water-filling (MODEL.md section 1b): the level L with
    sum(min(w, L) for w in sizes) == cap, or None when the sizes fit under the cap.

    Fill the smallest jobs first: while the smallest size is below an equal share of what is
    left, it gets its size in full and leaves; the rest share what is left equally."""
    if sum(sizes) <= cap:
        return None
    left, rest = cap, sorted(sizes)
    while rest[0] < left / len(rest):
        left -= rest.pop(0)
    return left / len(rest)


# The rate rules of `simulate_reference` and `simulate_failures_reference` (the second extends
# the first with failures). `simulate_realistic_reference` keeps its own, written apart, so
# that tests/test_reference_realistic.py checks it against these.


def power_signal(sizes, cap, power_policy, zero):
    """What the power controller acts on (MODEL.md section 1b): the level L of the computing
    jobs' ``sizes`` under ``cap`` (maxmin; None uncapped or where they fit) or their total
    size (uniform)."""
    if power_policy == "uniform":
        return sum(sizes, zero)
    return None if cap is None else maxmin_level(sizes, cap)


def speed_under(size, applied, cap, power_policy, one):
    """The speed of a computing job of ``size`` when the controller applies the signal
    ``applied`` (`power_signal`, possibly from tau earlier); ``cap`` None: uncapped."""
    if power_policy == "uniform":
        return one if cap is None or applied <= cap else cap / applied
    return one if applied is None or size <= applied else applied / size


def write_rates(writers, size, f, storage_policy, queue, one):
    """Per writer (job indices), its drain rate: "fair" f(n)/n, "weighted" f(n) w_i / sum of
    the writers' sizes, "fcfs" f(1) for the head of ``queue`` and 0 for the others (f None:
    f = 1)."""
    aggregate = one if f is None else f[len(writers)]
    writing_size = sum((size[i] for i in writers), one - one)
    rates = {}
    for i in writers:
        if storage_policy == "fair":
            rates[i] = aggregate / len(writers)
        elif storage_policy == "weighted":
            rates[i] = aggregate * size[i] / writing_size
        else:
            rates[i] = (one if f is None else f[1]) if i == queue[0] else one - one
    return rates


def simulate_reference(
    compute,
    write,
    phase,
    remaining,
    n_fires,
    cap=None,
    throughput=None,
    delay=0,
    async_fraction=0,
    compute_work=None,
    max_events=100000,
    exact=True,
    return_event_times=False,
    stop_at_fire_of=None,
    size=None,
    power_policy="maxmin",
    storage_policy="fair",
):
    """Integrates the fleet exactly, event by event, until every job has ``n_fires`` write ends.

    Args:
      compute, write: per-job solo work T_i and solo write volume d_i (length N).
      phase: per-job initial phase, 0 computing, 1 writing.
      remaining: per-job work (or volume) left in the initial phase.
      n_fires: K, the number of firings (and write ends) returned per job.
      cap: power cap C > 0, or None (or inf) for uncapped compute.
      throughput: None (f = 1) or a list of length N + 1, ``throughput[n] = f(n)``.
      delay: controller delay tau >= 0; the cap applies to n_c(t - tau).
      async_fraction: alpha in [0, 1], compute rate fraction while a write drains.
      compute_work: optional ``compute_work(i, k)`` giving the work of the compute phase that
        starts with job i's k-th firing (k = 0: the phase after an initial write); default T_i.
      max_events: bound on the number of event instants before RuntimeError.
      exact: convert every input to Fraction and compute exactly (default); otherwise compute
        in the inputs' own arithmetic.
      return_event_times: also return the list of event instants stepped (simultaneous
        switches and controller updates at one instant are one instant).
      stop_at_fire_of: a job index: stop at the first instant that job fires (``n_fires`` is
        then ignored) and return the state there instead, see `state_at_first_firing`.
      size: per-job sizes w_i > 0 (default all 1), MODEL.md section 1b.
      power_policy: "maxmin" (water-filling, speed min(w_i, L) / w_i) or "uniform"
        (min(1, C / sum of computing sizes)). The delayed controller applies the level L
        (or the computing size) from tau earlier; a change of the computing count or of
        that value is an update.
      storage_policy: "fair" (f(n)/n), "weighted" (f(n) w_i / sum of writing sizes) or
        "fcfs" (an explicit queue in firing order, ties by job index, writes in progress at
        t = 0 first by index; the head drains at f(1), the others drain nothing).

    Returns:
      ``(fire_times, end_times)``: two lists of N lists of K times each. ``fire_times[i][k]``
      is job i's (k+1)-th firing after t = 0, ``end_times[i][k]`` the end of the write it started.
      With ``return_event_times``, a third item: the times of all event instants.
    """
    num = _exact if exact else (lambda x: x)
    n_jobs = len(compute)
    T = [num(x) for x in compute]
    d = [num(x) for x in write]
    uncapped = cap is None or cap == float("inf")
    C = None if uncapped else num(cap)
    f = None if throughput is None else [None] + [num(x) for x in list(throughput)[1:]]
    tau = num(delay)
    alpha = num(async_fraction)
    zero = num(0)
    w = [num(1)] * n_jobs if size is None else [num(x) for x in size]
    assert power_policy in ("maxmin", "uniform") and storage_policy in ("fair", "weighted", "fcfs")

    def work(i, k):
        return T[i] if compute_work is None else num(compute_work(i, k))

    draining, waiting = [False] * n_jobs, [False] * n_jobs
    write_left, compute_left = [zero] * n_jobs, [zero] * n_jobs
    fire_count = [0] * n_jobs
    fire_times = [[] for _ in range(n_jobs)]
    end_times = [[] for _ in range(n_jobs)]
    for i in range(n_jobs):
        if phase[i] == 0:
            compute_left[i] = num(remaining[i])
        else:
            draining[i] = True
            write_left[i] = num(remaining[i])
            compute_left[i] = work(i, 0)

    def computing_jobs():
        return [i for i in range(n_jobs) if not waiting[i] and (not draining[i] or alpha > 0)]

    def count_computing():
        return len(computing_jobs())

    def signal_now():
        return power_signal([w[i] for i in computing_jobs()], C, power_policy, zero)

    queue = [i for i in range(n_jobs) if draining[i]]  # fcfs: writers in the order served
    fired_now = []

    def fire(i, now):
        fired_now.append(i)
        draining[i] = True
        waiting[i] = False
        write_left[i] = d[i]
        fire_count[i] += 1
        compute_left[i] = work(i, fire_count[i])
        fire_times[i].append(now)

    t = zero
    n_computing = count_computing()  # the current count n_c(t)
    signal = signal_now()  # the current level (or computing size)
    applied = signal  # the one the controller sees, from t - tau
    pending = []  # controller changes (effective time, value), in order

    event_times = []
    most_writing, most_computing = sum(draining), n_computing  # the largest counts seen
    while stop_at_fire_of is not None or not all(len(end_times[i]) >= n_fires for i in range(n_jobs)):
        if len(event_times) == max_events:
            raise RuntimeError(f"reference did not finish within max_events={max_events}")

        # Rates, constant until the next event.
        writers = [i for i in range(n_jobs) if draining[i]]
        drains = write_rates(writers, w, f, storage_policy, queue, num(1))
        write_rate, compute_rate = [drains.get(i, zero) for i in range(n_jobs)], [zero] * n_jobs
        for i in range(n_jobs):
            speed = speed_under(w[i], applied, C, power_policy, num(1))
            if waiting[i]:
                compute_rate[i] = zero
            elif draining[i]:
                compute_rate[i] = alpha * speed
            else:
                compute_rate[i] = speed

        # Time to the next event: a drain end, a compute end or a controller change.
        candidates = []
        for i in range(n_jobs):
            if write_rate[i] > 0:
                candidates.append(write_left[i] / write_rate[i])
            if compute_rate[i] > 0:
                candidates.append(compute_left[i] / compute_rate[i])
        if pending:
            candidates.append(pending[0][0] - t)
        if not candidates:
            raise RuntimeError("no job can make progress")
        dt = min(candidates)

        # Advance everything linearly; whatever ends exactly now is set to exactly zero.
        t_before, t = t, t + dt
        event_times.append(t)
        drain_ended, compute_ended = [], []
        for i in range(n_jobs):
            if write_rate[i] > 0:
                if write_left[i] / write_rate[i] == dt:
                    write_left[i] = zero
                    drain_ended.append(i)
                else:
                    write_left[i] = write_left[i] - write_rate[i] * dt
            if compute_rate[i] > 0:
                if compute_left[i] / compute_rate[i] == dt:
                    compute_left[i] = zero
                    compute_ended.append(i)
                else:
                    compute_left[i] = compute_left[i] - compute_rate[i] * dt
        while pending and pending[0][0] - t_before <= dt:
            applied = pending.pop(0)[1]

        # (1) drains that end.
        for i in drain_ended:
            draining[i] = False
            if i in queue:
                queue.remove(i)
            if fire_count[i] > 0:  # the end of an initial write is not recorded
                end_times[i].append(t)
        # (2) compute completions: fire, or wait if the own write is still draining.
        for i in compute_ended:
            if draining[i]:
                waiting[i] = True
            else:
                fire(i, t)
        # (3) jobs waiting on a drain that just ended fire at the same instant.
        for i in drain_ended:
            if waiting[i]:
                fire(i, t)
        queue.extend(sorted(fired_now))  # simultaneous firings queue by job index
        fired_now.clear()

        most_writing = max(most_writing, sum(draining))
        most_computing = max(most_computing, count_computing())
        if stop_at_fire_of is not None and fire_count[stop_at_fire_of] > 0:
            return dict(
                time=t,
                fire_times=fire_times,
                draining=draining,
                waiting=waiting,
                write_left=write_left,
                compute_left=compute_left,
                n_events=len(event_times),
                most_writing=most_writing,
                most_computing=most_computing,
            )

        new_count, new_signal = count_computing(), signal_now()
        if new_count != n_computing or new_signal != signal:
            n_computing, signal = new_count, new_signal
            if tau > 0:
                pending.append((t + tau, new_signal))
            else:
                applied = new_signal

    result = ([times[:n_fires] for times in fire_times], [times[:n_fires] for times in end_times])
    return result + (event_times,) if return_event_times else result


def state_at_first_firing(compute, write, phase, remaining, job=0, cap=None, throughput=None, max_events=100000):
    """Integrates the base model exactly until ``job`` first fires, and returns the state
    there, after every switch at that instant: a dict with ``time``, ``fire_times`` (per job,
    every firing in (0, time]), ``draining``, ``write_left``, ``compute_left`` (per job),
    ``n_events`` (event instants stepped) and ``most_writing`` / ``most_computing`` (the
    largest numbers of jobs writing / computing at once, from t = 0 to just after ``time``).
    Arguments as for `simulate_reference`."""
    return simulate_reference(
        compute, write, phase, remaining, 1, cap=cap, throughput=throughput, max_events=max_events, stop_at_fire_of=job
    )


def simulate_failures_reference(
    compute,
    write,
    horizon,
    failure_times,
    restart,
    phase=None,
    remaining=None,
    cap=None,
    throughput=None,
    exact=True,
    max_events=1000000,
    size=None,
    power_policy="maxmin",
    storage_policy="fair",
    delay=0,
    async_fraction=0,
    compute_work=None,
):
    """Integrates the fleet with failures and restarts (docs/model.md §1c) exactly, event by
    event, from t = 0 to the horizon H, with the failure times given explicitly.

    Rules: the rates of §1 and §1b among the jobs that are up (default: each writer drains at
    f(n_w)/n_w, each computing job works at min(1, C/n_c)); a job that is down counts in
    neither n_w nor n_c, nor in any size sum, and leaves the fcfs queue.
    A failure of job i at time t (i up at t) throws away the compute work it did since its
    last completed write, abandons a write in progress, and puts it down until t + R_i; it
    then computes its lost cycle again from the start. A listed failure time that falls while
    the job is down, t_f <= t < t_f + R_i, is ignored (failures during a restart are not
    modelled; drawn as a Poisson process in wall-clock time, such times are simply discarded).
    Everything due at one instant happens at that instant, in this order: drains that end (the
    write is complete: it saves the work it covers), compute ends (the job fires, or with
    alpha > 0 waits while its write still drains), jobs waiting on a drain that just ended
    fire, restarts that end, then failures (which therefore hit the state after the other
    switches). Instants up to and including H are processed. Work done before t = 0 counts
    nowhere: an initial write covers no work, and an initially computing job's first write
    covers only the work it did after t = 0.

    The variants of §1, as in `simulate_reference`:

    - *delayed controller* (tau > 0): the cap acts on the level (maxmin) or computing size
      (uniform) from tau earlier; a change of the computing count or of that value at t, a
      failure's or a restart's included, takes effect at t + tau.
    - *asynchronous checkpoints* (alpha > 0): a writing job computes its next cycle at alpha
      times its speed, waits if that cycle is done before the drain, and counts among the
      computing jobs except while it waits. A write covers the work done up to its firing,
      so a failure while a write drains loses the cycle that write covered and the progress
      made since its firing.
    - *per-cycle work* (``compute_work``, e.g. the engine's jitter draws): the compute phase
      after firing k has work ``compute_work(i, k)`` (k = 0: after an initial write). The
      redo after a failure has the lost cycle's work: ``compute_work(i, c)`` with c the
      job's firing count, less one if a write was in progress (it covered the phase before
      that firing), and c = 0 for the cycle under way at t = 0.

    Args:
      compute, write: per-job T_i and d_i (length N).
      horizon: H > 0.
      failure_times: per job, a strictly increasing list of failure times >= 0 (may be empty).
      restart: per-job R_i >= 0, or one number for every job.
      phase, remaining: initial phase (0 computing, 1 writing) and work left in it, as in
        `simulate_reference`; default: every job computing a fresh cycle (remaining T_i).
      cap, throughput, size, power_policy, storage_policy, delay, async_fraction,
        compute_work: as in `simulate_reference`.
      exact: compute in Fractions (default), else in the inputs' own arithmetic.
      max_events: bound on the number of event instants before RuntimeError.

    Returns:
      A dict of per-job lists: ``useful_work`` (work covered by a completed write),
      ``lost_work`` (work thrown away by failures), ``uncovered_work`` (work done since the
      last completed write, at H), ``compute_work`` (all work done), ``failures`` (failures
      that hit the job), ``compute_time`` (time among the computing jobs: up, and not
      writing, or with alpha > 0 not waiting), ``write_time``, ``down_time``,
      ``completed_write_time`` (firing to end, summed over the completed writes that a firing
      after t = 0 started: not an abandoned write, the one open at H or an initial one); the trace:
      ``fire_times``, ``end_times`` (completed writes that a firing after t = 0 started),
      ``failure_times`` (the failures that hit), ``restart_times`` (restart ends), and
      ``event_times``, the event instants stepped (the last is H).
    """
    num = _exact if exact else (lambda x: x)
    n_jobs = len(compute)
    T = [num(x) for x in compute]
    d = [num(x) for x in write]
    H = num(horizon)
    R = [num(x) for x in (restart if isinstance(restart, (list, tuple)) else [restart] * n_jobs)]
    uncapped = cap is None or cap == float("inf")
    C = None if uncapped else num(cap)
    f = None if throughput is None else [None] + [num(x) for x in list(throughput)[1:]]
    tau = num(delay)
    alpha = num(async_fraction)
    zero, one = num(0), num(1)
    w = [one] * n_jobs if size is None else [num(x) for x in size]
    assert power_policy in ("maxmin", "uniform") and storage_policy in ("fair", "weighted", "fcfs")
    failures_in = [[num(x) for x in job] for job in failure_times]
    for i, times in enumerate(failures_in):
        if any(x < 0 for x in times) or any(b <= a for a, b in zip(times, times[1:])):
            raise ValueError(f"failure_times[{i}] must be strictly increasing and >= 0")

    def work(i, k):
        return T[i] if compute_work is None else num(compute_work(i, k))

    # Per job: down until ``back``; a write draining (``write_left``); the compute cycle
    # (``compute_left``), done but waiting on the drain (``waiting``, alpha > 0 only).
    down, back = [False] * n_jobs, [zero] * n_jobs
    draining, waiting = [False] * n_jobs, [False] * n_jobs
    write_left, compute_left = [zero] * n_jobs, [zero] * n_jobs
    fire_count = [0] * n_jobs
    for i in range(n_jobs):
        left = T[i] if remaining is None else num(remaining[i])
        if phase is not None and phase[i] == 1:
            draining[i], write_left[i], compute_left[i] = True, left, work(i, 0)
        else:
            compute_left[i] = left
    in_write = [zero] * n_jobs  # work the write in progress saves when it completes
    since_firing = [zero] * n_jobs  # work done since the job's last firing (or t = 0)
    queue = [i for i in range(n_jobs) if draining[i]]  # fcfs: writers in the order served
    next_failure = [0] * n_jobs  # index of the job's next failure time to consider
    out = {
        name: [zero] * n_jobs
        for name in (
            "useful_work",
            "lost_work",
            "compute_work",
            "compute_time",
            "write_time",
            "down_time",
            "completed_write_time",
        )
    }
    out["failures"] = [0] * n_jobs
    for name in ("fire_times", "end_times", "failure_times", "restart_times"):
        out[name] = [[] for _ in range(n_jobs)]
    event_times = []

    def computing_jobs():
        return [i for i in range(n_jobs) if not down[i] and not waiting[i] and (not draining[i] or alpha > 0)]

    def signal_now():
        return power_signal([w[i] for i in computing_jobs()], C, power_policy, zero)

    fired_now = []

    def fire(i, now):
        fired_now.append(i)
        draining[i], waiting[i], write_left[i] = True, False, d[i]
        fire_count[i] += 1
        compute_left[i] = work(i, fire_count[i])
        in_write[i], since_firing[i] = since_firing[i], zero
        out["fire_times"][i].append(now)

    n_computing, signal = len(computing_jobs()), signal_now()
    applied = signal  # what the controller sees, from t - tau (the launch's, before t = 0)
    pending = []  # controller changes (effective time, value), in order

    t = zero
    while t < H:
        if len(event_times) == max_events:
            raise RuntimeError(f"reference did not finish within max_events={max_events}")
        writers = [i for i in range(n_jobs) if not down[i] and draining[i]]
        computing = computing_jobs()
        acted_on = applied if tau > 0 else signal_now()  # the stale value with tau > 0
        drains = write_rates(writers, w, f, storage_policy, queue, one)
        write_rate, compute_rate = [drains.get(i, zero) for i in range(n_jobs)], [zero] * n_jobs
        for i in computing:
            compute_rate[i] = (alpha if draining[i] else one) * speed_under(w[i], acted_on, C, power_policy, one)

        # Work events (drains, compute ends) are relative; restarts, failures, controller
        # changes and H are absolute.
        relative = [left / rate for left, rate in zip(write_left + compute_left, write_rate + compute_rate) if rate]
        absolute = [H] + [back[i] for i in range(n_jobs) if down[i]] + [p[0] for p in pending[:1]]
        absolute += [
            failures_in[i][next_failure[i]]
            for i in range(n_jobs)
            if not down[i] and next_failure[i] < len(failures_in[i])
        ]
        t_next = min(absolute)
        if relative and t + min(relative) <= t_next:
            dt = min(relative)
            t_next = t + dt
        else:
            dt = t_next - t

        # Advance every job linearly over [t, t_next).
        drain_ended, compute_ended = [], []
        for i in range(n_jobs):
            if down[i]:
                out["down_time"][i] += dt
                continue
            if draining[i]:
                out["write_time"][i] += dt
            if i in computing:
                out["compute_time"][i] += dt
            if write_rate[i]:
                if write_left[i] / write_rate[i] == dt:
                    write_left[i] = zero
                    drain_ended.append(i)
                else:
                    write_left[i] = write_left[i] - write_rate[i] * dt
            if compute_rate[i]:
                if compute_left[i] / compute_rate[i] == dt:
                    done, compute_left[i] = compute_left[i], zero
                    compute_ended.append(i)
                else:
                    done = compute_rate[i] * dt
                    compute_left[i] = compute_left[i] - done
                out["compute_work"][i] += done
                since_firing[i] += done
        t = t_next
        event_times.append(t)
        while pending and pending[0][0] <= t:
            applied = pending.pop(0)[1]

        # (1) drains that end: the write is complete and saves the work it covers.
        for i in drain_ended:
            draining[i] = False
            out["useful_work"][i] += in_write[i]
            in_write[i] = zero
            queue.remove(i)
            if fire_count[i] > 0:  # the end of an initial write is not recorded
                out["end_times"][i].append(t)
                out["completed_write_time"][i] += t - out["fire_times"][i][-1]
        # (2) compute ends: the job fires, or waits while its own write still drains;
        # (3) jobs waiting on a drain that just ended fire at the same instant.
        for i in compute_ended:
            if draining[i]:
                waiting[i] = True
            else:
                fire(i, t)
        for i in drain_ended:
            if waiting[i]:
                fire(i, t)
        queue.extend(sorted(fired_now))  # simultaneous firings queue by job index
        fired_now.clear()
        # (4) restarts that end, then (5) failures that are due (of jobs that are up).
        for i in range(n_jobs):
            if down[i] and back[i] == t:
                down[i] = False
                out["restart_times"][i].append(t)
        for i in range(n_jobs):
            times = failures_in[i]
            if down[i] or next_failure[i] >= len(times) or times[next_failure[i]] != t:
                continue
            out["failures"][i] += 1
            out["failure_times"][i].append(t)
            out["lost_work"][i] += in_write[i] + since_firing[i]
            in_write[i], since_firing[i] = zero, zero
            lost_cycle = max(fire_count[i] - (1 if draining[i] else 0), 0)
            if draining[i]:
                queue.remove(i)  # the write is abandoned
            draining[i], waiting[i], write_left[i] = False, False, zero
            compute_left[i] = work(i, lost_cycle)  # the lost cycle again, from its start
            back[i] = t + R[i]
            next_failure[i] += 1  # this one, then any time inside the down period
            while next_failure[i] < len(times) and times[next_failure[i]] < back[i]:
                next_failure[i] += 1
            if R[i] == 0:
                out["restart_times"][i].append(t)
            else:
                down[i] = True

        new_count, new_signal = len(computing_jobs()), signal_now()
        if new_count != n_computing or new_signal != signal:
            n_computing, signal = new_count, new_signal
            if tau > 0:
                pending.append((t + tau, new_signal))

    out["uncovered_work"] = [a + b for a, b in zip(in_write, since_firing)]
    out["event_times"] = event_times
    return out


def capped_shares(total, caps, weights):
    """Water-filling with caps (docs/model.md §1d): rates r_i = min(caps[i], L * weights[i])
    summing to ``total``, or every rate at its cap when the caps sum to no more than ``total``.

    ``caps[i]`` is None for no cap. The obvious way: at the level the uncapped writers would
    share, any writer whose cap is below its share gets its cap and leaves; repeat until none
    does, then the rest share what is left in proportion to their weights."""
    if all(b is not None for b in caps) and sum(caps) <= total:
        return list(caps)
    rates = [None] * len(caps)
    left, free = total, list(range(len(caps)))
    while True:
        level = left / sum(weights[i] for i in free)
        capped = [i for i in free if caps[i] is not None and caps[i] <= level * weights[i]]
        if not capped:
            for i in free:
                rates[i] = level * weights[i]
            return rates
        for i in capped:
            rates[i] = caps[i]
            left -= caps[i]
            free.remove(i)


def simulate_realistic_reference(
    compute,
    write,
    horizon,
    failure_times=None,
    restart=0,
    phase=None,
    remaining=None,
    cap=None,
    throughput=None,
    size=None,
    power_policy="maxmin",
    storage_policy="fair",
    write_limit=None,
    snapshot=None,
    recover_from="storage",
    async_fraction=0,
    idle_power=0,
    compute_work=None,
    recovery_read=None,
    fail_while_down=False,
    domain=None,
    outages=None,
    restart_stagger=0,
    overhead=None,
    exact=True,
    max_events=1000000,
):
    """Integrates a fleet with the mechanisms of docs/model.md §1d (write limits, two-level
    checkpoints, power draw), failures (§1c) and the recovery of §1e (recovery reads, failures
    while down) exactly, event by event, from t = 0 to H.

    Written apart from `simulate_failures_reference` (and from the engine), one job at a time.
    Per job, a state made of flags: ``down``; ``draining`` (a writer: a blocking write, or a
    two-level drain in the background); ``snapping`` (two-level: the blocking snapshot, s_i of
    wall clock); ``waiting`` (its compute is done, its own drain is still in flight); else it
    computes. Computing jobs are the up jobs not snapping, not waiting, and not in a blocking
    write (a two-level drain, or an asynchronous one with alpha > 0, leaves the job computing).

    Rates among the up jobs: writers share f(n_w) by water-filling with caps b_i (`fair`:
    min(b_i, L); `weighted`: min(b_i, L w_i)); under `fcfs` the head of the queue (in the order
    drains start, ties by job index, initial writes first by index) drains at min(b_head, f(1)).
    Compute speeds as in §1b among the computing jobs (no controller delay); a blocking writer
    with alpha > 0 computes at alpha times its speed.

    Two-level cycle (``snapshot`` given): a compute completion fires if no drain of the job is
    in flight and starts the snapshot, else the job waits and fires when its drain ends. The
    snapshot end starts the drain of d_i and the next compute cycle at once (with s_i = 0, at
    the firing instant). Blocking cycle: a firing starts the write of d_i (alpha = 0: the job
    stops computing until it ends).

    Order within one instant: drains that end, snapshots that end, compute completions (fire
    or wait), waiting jobs whose drain just ended fire, restarts that end, failures. Instants
    up to and including H are processed.

    Work: a compute phase's work is "uncovered" as it is done; a firing moves the uncovered
    work into the checkpoint (pending); the drain end persists it. Useful work counts at the
    drain end (``recover_from="storage"``, and every blocking fleet) or at the snapshot end
    (``"memory"``, two-level only). A failure (listed times; one while the job is down,
    t_f <= t < t_f + R_i, is ignored) loses the uncovered work and the pending checkpoint
    unless it is safe (memory rule: its snapshot ended), abandons a snapshot or drain in
    flight, puts the job down for R_i, then starts a fresh compute cycle with the work of the
    first lost cycle: ``compute_work(i, c)``, c the firing count less one if an unsafe
    checkpoint was in flight (not below 0).

    Recovery (§1e). A job with r_i > 0 becomes a reader when it comes back from a failure
    (at the restart's end, or at the failure itself where R_i = 0): it has r_i to read, is a
    storage user exactly as a writer is (it counts among the n users sharing f(n), with its cap
    b_i and its weight w_i; under `fcfs` it queues at the instant its read starts, ties by job
    index among everyone who queues at that instant), computes nothing, and on the read's end
    (step 1 of an instant, with the drains) goes on with the cycle the failure reset. Its read
    time counts in ``down_time`` (and ``read_time``). Without ``fail_while_down`` a job can only
    fail while up: listed times while it is down or reading are passed over (a time equal to
    the read's end hits, as one at the restart's end does). With ``fail_while_down`` every
    listed time hits, whatever the job does: a failure while down or reading loses nothing
    more (nothing was computed) and starts the recovery over: down for R_i, then the read.

    Outages (§1f), given as instants: at an outage (t, d), after the jobs' own failures of the
    instant, every job of domain d that is up (any job of d with ``fail_while_down``) and did
    not fail on its own at t fails as above; the k-th of them by job index (k = 0, 1, ...) is
    down for R_i + k·Δ (``restart_stagger``). Its own listed failure times inside that down
    period are passed over, as after its own failures. Several rows of one domain at one
    instant are one outage. ``stagger_time`` is the time a job spends down in the last k·Δ of
    such a restart; ``outage_lost_work`` and ``outage_down_time`` the work outages made it lose
    and its time down (restart and read) after them.

    Fixed overhead (§1g). A firing of a job with o_i > 0 does not start its snapshot or write:
    the job is first ``overheading`` for o_i of wall clock (neither computing nor a storage
    user); the overhead's end (step 2b of an instant, after the snapshots that end) does what
    the firing would have done. A failure during it loses the pending checkpoint, as one during
    a snapshot or an unsafe drain does, and abandons the overhead.

    Power: a computing job draws w_i times its compute rate; any other job (overhead, snapshot,
    waiting, blocking write, down, reading) draws ``idle_power`` * w_i.

    Args:
      compute, write: per-job T_i and d_i (length N).
      horizon: H > 0.
      failure_times: None, or per job a strictly increasing list of times >= 0.
      restart: per-job R_i >= 0, or one number for every job.
      phase, remaining: initial phase (0 computing, 1 writing: a blocking write, or a two-level
        drain while the job computes cycle 0) and what is left of it; default: computing T_i.
      cap, throughput, size, power_policy, storage_policy: as in `simulate_reference`.
      write_limit: None, or per job b_i (None or inf: no limit).
      snapshot: None (blocking checkpoints), or per job s_i >= 0 (two-level checkpoints).
      recover_from: "storage" or "memory".
      async_fraction: alpha of blocking fleets (0 with ``snapshot``).
      idle_power: the draw per unit size of a job that does not compute.
      compute_work: optional ``compute_work(i, k)``, the work of job i's compute phase that
        starts after its k-th firing (k = 0: the phase after an initial write); default T_i.
      recovery_read: None (no reads), one volume r >= 0 for every job, or per job r_i.
      fail_while_down: failures also hit a job that is down or reading (§1e).
      domain: None (one domain), or per job its failure domain (an int).
      outages: None, or a list of (time, domain) outage instants (any order).
      restart_stagger: Δ >= 0, the restart stagger of the jobs one outage fails.
      overhead: None (none), one o >= 0 for every job, or per job o_i (§1g).
      exact: compute in Fractions (default), else in the inputs' own arithmetic.
      max_events: bound on the number of event instants before RuntimeError.

    Returns:
      A dict. Per job (lists of length N): ``fire_times``; ``end_times``, one per firing, the
      end of the drain it started or None (abandoned by a failure, or still in flight at H);
      ``useful_work``, ``persisted_work``, ``lost_work``, ``uncovered_work`` (at H, not in a
      checkpoint), ``compute_work`` (all work done), ``failures``, ``down_time``,
      ``snapshot_time``, ``wait_time``, ``write_time`` (time as a writer), ``compute_time``,
      ``completed_write_time`` (drain start to end, over the completed checkpoints: from the
      firing, or with two-level checkpoints from the snapshot end),
      ``failure_times`` (those that hit, outages' included), ``restart_times``, ``read_time``
      and ``read_ends`` (the instants recovery reads ended), ``outage_failures`` (the failures
      outages caused, counted in ``failures`` too), ``stagger_time`` and ``overhead_time``
      (§1g). Per fleet: ``event_times`` (the instants stepped; the last is H), ``power``: the
      draw as a list of (t_start, t_end, P) over the steps of positive length, covering [0, H],
      and ``total_size`` (sum of w_i).
    """
    num = _exact if exact else (lambda x: x)
    n_jobs = len(compute)
    zero, one = num(0), num(1)
    T = [num(x) for x in compute]
    d = [num(x) for x in write]
    H = num(horizon)
    R = [num(x) for x in (restart if isinstance(restart, (list, tuple)) else [restart] * n_jobs)]
    uncapped = cap is None or cap == float("inf")
    C = None if uncapped else num(cap)
    f = None if throughput is None else [None] + [num(x) for x in list(throughput)[1:]]
    w = [one] * n_jobs if size is None else [num(x) for x in size]
    limits = [None] * n_jobs if write_limit is None else list(write_limit)
    b = [None if x is None or x == float("inf") else num(x) for x in limits]
    two_level = snapshot is not None
    s = [num(x) for x in snapshot] if two_level else [zero] * n_jobs
    alpha = num(async_fraction)
    idle = num(idle_power)
    reads = recovery_read if isinstance(recovery_read, (list, tuple)) else [recovery_read or 0] * n_jobs
    r = [num(x) for x in reads]
    overheads = overhead if isinstance(overhead, (list, tuple)) else [overhead or 0] * n_jobs
    o = [num(x) for x in overheads]
    assert power_policy in ("maxmin", "uniform") and storage_policy in ("fair", "weighted", "fcfs")
    assert recover_from in ("storage", "memory")
    assert not (two_level and alpha > 0), "snapshots and async_fraction exclude each other"
    memory = two_level and recover_from == "memory"
    listed = [[] for _ in range(n_jobs)] if failure_times is None else failure_times
    failures_in = [[num(x) for x in job] for job in listed]
    for i, times in enumerate(failures_in):
        if any(x < 0 for x in times) or any(later <= earlier for earlier, later in zip(times, times[1:])):
            raise ValueError(f"failure_times[{i}] must be strictly increasing and >= 0")

    dom = [0] * n_jobs if domain is None else [int(x) for x in domain]
    struck_at = {}  # instant -> the domains struck then, in order
    for time, where in outages or []:
        struck_at.setdefault(num(time), set()).add(int(where))
    outage_instants = sorted(struck_at)
    delta = num(restart_stagger)
    stagger_from = [zero] * n_jobs  # the stagger is the last k·Δ of a restart: [stagger_from, back)
    by_outage = [False] * n_jobs  # the job's last failure was an outage's

    def work(i, k):
        return T[i] if compute_work is None else num(compute_work(i, k))

    down, back = [False] * n_jobs, [zero] * n_jobs
    reading, read_left = [False] * n_jobs, [zero] * n_jobs
    draining, snapping, waiting = [False] * n_jobs, [False] * n_jobs, [False] * n_jobs
    overheading, overhead_left = [False] * n_jobs, [zero] * n_jobs
    write_left, snap_left, compute_left = [zero] * n_jobs, [zero] * n_jobs, [zero] * n_jobs
    fire_count = [0] * n_jobs
    uncovered = [zero] * n_jobs  # work done since the job's last firing (or t = 0)
    pending = [zero] * n_jobs  # work in the checkpoint being snapshotted or drained
    safe = [False] * n_jobs  # memory rule: the pending checkpoint's snapshot has ended
    initial_drain = [False] * n_jobs  # the drain in flight is the one at t = 0
    drain_start = [zero] * n_jobs
    for i in range(n_jobs):
        left = T[i] if remaining is None else num(remaining[i])
        if phase is not None and phase[i] == 1:
            draining[i], write_left[i], initial_drain[i] = True, left, True
            compute_left[i] = work(i, 0)
        else:
            compute_left[i] = left
    queue = [i for i in range(n_jobs) if draining[i]]  # fcfs: writers in the order served
    next_failure = [0] * n_jobs
    out = {
        name: [zero] * n_jobs
        for name in (
            "useful_work",
            "persisted_work",
            "lost_work",
            "compute_work",
            "down_time",
            "snapshot_time",
            "wait_time",
            "write_time",
            "compute_time",
            "completed_write_time",
            "read_time",
            "stagger_time",
            "outage_lost_work",
            "outage_down_time",
            "overhead_time",
        )
    }
    out["failures"] = [0] * n_jobs
    out["outage_failures"] = [0] * n_jobs
    for name in ("fire_times", "end_times", "failure_times", "restart_times", "read_ends"):
        out[name] = [[] for _ in range(n_jobs)]
    event_times, power = [], []

    def is_computing(i):
        if down[i] or reading[i] or snapping[i] or waiting[i] or overheading[i]:
            return False
        return not draining[i] or two_level or alpha > 0

    def speeds(computing):
        """Per computing job, its speed under the cap (MODEL.md §1b)."""
        sizes = [w[i] for i in computing]
        if power_policy == "uniform":
            total = sum(sizes, zero)
            speed = one if uncapped or total <= C else C / total
            return {i: speed for i in computing}
        level = None if uncapped else maxmin_level(sizes, C)
        return {i: one if level is None or w[i] <= level else level / w[i] for i in computing}

    started_now = []  # drains and reads that start at this instant (fcfs: they queue by job index)

    def come_back(i, now):
        """The job is up again after a failure: it reads its checkpoint first, if it has one."""
        out["restart_times"][i].append(now)
        if r[i] > 0:
            reading[i], read_left[i] = True, r[i]
            started_now.append(i)

    def start_drain(i, now):
        draining[i], write_left[i], initial_drain[i], drain_start[i] = True, d[i], False, now
        started_now.append(i)

    def end_snapshot(i, now):
        snapping[i] = False
        if memory:
            out["useful_work"][i] += pending[i]
            safe[i] = True
        start_drain(i, now)
        compute_left[i] = work(i, fire_count[i])

    def fire(i, now):
        fire_count[i] += 1
        out["fire_times"][i].append(now)
        out["end_times"][i].append(None)
        waiting[i] = False
        pending[i], uncovered[i], safe[i] = uncovered[i], zero, False
        if o[i] > 0:
            overheading[i], overhead_left[i] = True, o[i]
        else:
            release(i, now)

    def release(i, now):
        """The checkpoint fired (its overhead over) starts its snapshot or its write."""
        if two_level:
            snapping[i], snap_left[i] = True, s[i]
            if s[i] == 0:
                end_snapshot(i, now)
        else:
            start_drain(i, now)
            compute_left[i] = work(i, fire_count[i])

    t = zero
    while t < H:
        if len(event_times) == max_events:
            raise RuntimeError(f"reference did not finish within max_events={max_events}")

        # Rates, constant until the next event; readers use the storage as writers do.
        writers = [i for i in range(n_jobs) if not down[i] and (draining[i] or reading[i])]
        computing = [i for i in range(n_jobs) if is_computing(i)]
        write_rate, compute_rate = [zero] * n_jobs, [zero] * n_jobs
        if writers:
            if storage_policy == "fcfs":
                head = queue[0]
                solo = one if f is None else f[1]
                write_rate[head] = solo if b[head] is None else min(b[head], solo)
            else:
                aggregate = one if f is None else f[len(writers)]
                weights = [w[i] if storage_policy == "weighted" else one for i in writers]
                for i, rate in zip(writers, capped_shares(aggregate, [b[i] for i in writers], weights)):
                    write_rate[i] = rate
        speed = speeds(computing)
        for i in computing:
            compute_rate[i] = speed[i] * (alpha if draining[i] and not two_level else one)
        draw = zero
        for i in range(n_jobs):
            draw += w[i] * compute_rate[i] if i in computing else idle * w[i]

        # The next event: drain, snapshot and compute ends are relative; restarts, failures
        # and H are absolute.
        relative = []
        for i in range(n_jobs):
            if write_rate[i] > 0:
                relative.append((read_left[i] if reading[i] else write_left[i]) / write_rate[i])
            if compute_rate[i] > 0:
                relative.append(compute_left[i] / compute_rate[i])
            if snapping[i] and not down[i]:
                relative.append(snap_left[i])
            if overheading[i] and not down[i]:
                relative.append(overhead_left[i])
        absolute = [H] + [x for x in outage_instants if x > t][:1]
        for i in range(n_jobs):
            if down[i]:
                absolute.append(back[i])
            if (fail_while_down or not (down[i] or reading[i])) and next_failure[i] < len(failures_in[i]):
                absolute.append(failures_in[i][next_failure[i]])
        t_next = min(absolute)
        if relative and t + min(relative) <= t_next:
            dt = min(relative)
            t_next = t + dt
        else:
            dt = t_next - t

        # Advance every job linearly over [t, t_next).
        if dt > 0:
            power.append((t, t_next, draw))
        drain_ended, snap_ended, compute_ended, read_ended, overhead_ended = [], [], [], [], []
        for i in range(n_jobs):
            if (down[i] or reading[i]) and by_outage[i]:
                out["outage_down_time"][i] += dt
            if down[i]:
                out["down_time"][i] += dt
                out["stagger_time"][i] += max(zero, min(t_next, back[i]) - max(t, stagger_from[i]))
                continue
            if reading[i]:
                out["down_time"][i] += dt
                out["read_time"][i] += dt
                if write_rate[i] > 0 and read_left[i] / write_rate[i] == dt:
                    read_left[i] = zero
                    read_ended.append(i)
                else:
                    read_left[i] -= write_rate[i] * dt
                continue
            if draining[i]:
                out["write_time"][i] += dt
            if snapping[i]:
                out["snapshot_time"][i] += dt
                if snap_left[i] == dt:
                    snap_left[i] = zero
                    snap_ended.append(i)
                else:
                    snap_left[i] -= dt
            if overheading[i]:
                out["overhead_time"][i] += dt
                if overhead_left[i] == dt:
                    overhead_left[i] = zero
                    overhead_ended.append(i)
                else:
                    overhead_left[i] -= dt
            if waiting[i]:
                out["wait_time"][i] += dt
            if i in computing:
                out["compute_time"][i] += dt
            if write_rate[i] > 0:
                if write_left[i] / write_rate[i] == dt:
                    write_left[i] = zero
                    drain_ended.append(i)
                else:
                    write_left[i] -= write_rate[i] * dt
            if compute_rate[i] > 0:
                if compute_left[i] / compute_rate[i] == dt:
                    done, compute_left[i] = compute_left[i], zero
                    compute_ended.append(i)
                else:
                    done = compute_rate[i] * dt
                    compute_left[i] -= done
                out["compute_work"][i] += done
                uncovered[i] += done
        t = t_next
        event_times.append(t)

        # (1) reads that end: the job computes again; drains that end: the checkpoint is persisted.
        for i in read_ended:
            reading[i] = False
            queue.remove(i)
            out["read_ends"][i].append(t)
            # The failure clock, off while the job recovered, runs again: listed times passed over.
            while not fail_while_down and next_failure[i] < len(failures_in[i]) and failures_in[i][next_failure[i]] < t:
                next_failure[i] += 1
        for i in drain_ended:
            draining[i] = False
            queue.remove(i)
            out["persisted_work"][i] += pending[i]
            if not memory:
                out["useful_work"][i] += pending[i]
            pending[i], safe[i] = zero, False
            if not initial_drain[i]:  # the end of a drain at t = 0 is not recorded
                out["end_times"][i][-1] = t
                out["completed_write_time"][i] += t - drain_start[i]
            initial_drain[i] = False
        # (2) snapshots that end: the drain and the next compute cycle start.
        for i in snap_ended:
            end_snapshot(i, t)
        # (2b) overheads that end: the checkpoint starts its snapshot or its write.
        for i in overhead_ended:
            overheading[i] = False
            release(i, t)
        # (3) compute ends: fire, or wait while the job's own drain is in flight;
        # (4) jobs waiting on a drain that just ended fire at the same instant.
        for i in compute_ended:
            if draining[i]:
                waiting[i] = True
            else:
                fire(i, t)
        for i in drain_ended:
            if waiting[i]:
                fire(i, t)
        # (5) restarts that end, then (6) failures that are due (of jobs that are up, or of
        # every job with fail_while_down).
        for i in range(n_jobs):
            if down[i] and back[i] == t:
                down[i] = False
                come_back(i, t)
        failed_now = set()

        def fail(i, extra, outage, t=t, failed_now=failed_now):
            failed_now.add(i)
            by_outage[i] = outage
            times = failures_in[i]
            out["failures"][i] += 1
            out["failure_times"][i].append(t)
            unsafe = snapping[i] or overheading[i] or (draining[i] and not safe[i])
            out["lost_work"][i] += uncovered[i] + (pending[i] if unsafe else zero)
            if outage:
                out["outage_lost_work"][i] += uncovered[i] + (pending[i] if unsafe else zero)
            lost_cycle = max(fire_count[i] - (1 if unsafe else 0), 0)
            if draining[i] or reading[i]:  # the drain (its end time stays None) or read is abandoned
                if i in queue:
                    queue.remove(i)
                else:
                    started_now.remove(i)
            draining[i], snapping[i], waiting[i], initial_drain[i] = False, False, False, False
            overheading[i], overhead_left[i] = False, zero
            reading[i], read_left[i], down[i] = False, zero, False
            write_left[i], snap_left[i] = zero, zero
            uncovered[i], pending[i], safe[i] = zero, zero, False
            compute_left[i] = work(i, lost_cycle)
            back[i] = t + R[i] + extra
            stagger_from[i] = back[i] - extra
            # Passed over: its own time now (an own failure), then (the clock off while down)
            # any time inside the down period.
            while next_failure[i] < len(times) and times[next_failure[i]] <= t:
                next_failure[i] += 1
            while not fail_while_down and next_failure[i] < len(times) and times[next_failure[i]] < back[i]:
                next_failure[i] += 1
            if back[i] == t:
                come_back(i, t)
            else:
                down[i] = True

        for i in range(n_jobs):
            times = failures_in[i]
            if next_failure[i] >= len(times) or times[next_failure[i]] != t:
                continue
            if not fail_while_down and (down[i] or reading[i]):
                continue
            fail(i, zero, False)
        # (7) outages of this instant: each struck domain's jobs that are up, by job index.
        for where in sorted(struck_at.get(t, ())):
            rank = 0
            for i in range(n_jobs):
                if dom[i] != where or i in failed_now or (not fail_while_down and (down[i] or reading[i])):
                    continue
                fail(i, rank * delta, True)
                out["outage_failures"][i] += 1
                rank += 1
        # fcfs: who starts at this instant queues after everyone already queued, by job index.
        queue.extend(sorted(started_now))
        started_now.clear()

    out["uncovered_work"] = list(uncovered)
    out["pending_work"] = list(pending)
    out["reading"] = list(reading)
    out["event_times"] = event_times
    out["power"] = power
    out["total_size"] = sum(w, zero)
    return out


def power_steps(power):
    """The steps of a piecewise-constant draw ``[(t_start, t_end, P), ...]`` (intervals of
    positive length, in order): a list of (instant, P after - P before), one per boundary
    between consecutive intervals, zero steps included."""
    return [(after[0], after[2] - before[2]) for before, after in zip(power, power[1:])]


def power_stats(power, total_size, stop=None, bins=None, threshold=None):
    """The PowerStats fields (docs/model.md §1d) of one fleet's draw, in its own arithmetic.

    Args:
      power: ``[(t_start, t_end, P), ...]`` as `simulate_realistic_reference` returns it.
      total_size: W, the sum of the active jobs' sizes (the full draw).
      stop: the stop time (default: the end of the last interval).
      bins: None (50 equal bins over [0, W]), an int n (n equal bins over [0, W]) or a list
        of increasing edges.
      threshold: the step size ``n_steps`` counts beyond (default W / 10).

    Returns:
      A dict: ``edges``, ``time`` (per bin [e_k, e_k+1), the last one closed; a draw outside
      the edges is not binned), ``mean`` (the integral of P over the stop time), ``max``,
      ``min``, ``largest_drop``, ``largest_rise`` (>= 0), ``threshold``, ``n_steps`` (steps
      with |dP| > threshold) and ``n_changes`` (steps with dP != 0).
    """
    zero = total_size - total_size
    stop = power[-1][1] if stop is None else stop
    if bins is None or isinstance(bins, int):
        n_bins = 50 if bins is None else bins
        edges = [total_size * k / n_bins for k in range(n_bins + 1)]
    else:
        edges = list(bins)
    time = [zero] * (len(edges) - 1)
    for start, end, draw in power:
        for k in range(len(time)):
            last = k == len(time) - 1
            if edges[k] <= draw < edges[k + 1] or (last and draw == edges[k + 1]):
                time[k] += end - start
                break
    deltas = [delta for _, delta in power_steps(power)]
    threshold = total_size / 10 if threshold is None else threshold
    return dict(
        edges=edges,
        time=time,
        mean=sum(((end - start) * draw for start, end, draw in power), zero) / stop,
        max=max(draw for _, _, draw in power),
        min=min(draw for _, _, draw in power),
        largest_drop=max([zero] + [-delta for delta in deltas]),
        largest_rise=max([zero] + deltas),
        threshold=threshold,
        n_steps=sum(1 for delta in deltas if abs(delta) > threshold),
        n_changes=sum(1 for delta in deltas if delta != 0),
    )
