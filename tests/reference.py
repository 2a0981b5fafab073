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

    def power_signal():
        """What the power controller acts on: the level L (maxmin) or the computing size."""
        sizes = [w[i] for i in computing_jobs()]
        if power_policy == "uniform":
            return sum(sizes, zero)
        return None if uncapped else maxmin_level(sizes, C)

    def speed_of(i, applied):
        if power_policy == "uniform":
            if uncapped or applied <= C:
                return num(1)
            return C / applied
        if applied is None or w[i] <= applied:
            return num(1)
        return applied / w[i]

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
    signal = power_signal()  # the current level (or computing size)
    applied = signal  # the one the controller sees, from t - tau
    pending = []  # controller changes (effective time, value), in order

    event_times = []
    most_writing, most_computing = sum(draining), n_computing  # the largest counts seen
    while stop_at_fire_of is not None or not all(len(end_times[i]) >= n_fires for i in range(n_jobs)):
        if len(event_times) == max_events:
            raise RuntimeError(f"reference did not finish within max_events={max_events}")

        # Rates, constant until the next event.
        n_writing = sum(1 for i in range(n_jobs) if draining[i])
        writing_size = sum((w[i] for i in range(n_jobs) if draining[i]), zero)
        write_rate, compute_rate = [zero] * n_jobs, [zero] * n_jobs
        for i in range(n_jobs):
            speed = speed_of(i, applied)
            if draining[i]:
                aggregate = num(1) if f is None else f[n_writing]
                if storage_policy == "fair":
                    write_rate[i] = aggregate / n_writing
                elif storage_policy == "weighted":
                    write_rate[i] = aggregate * w[i] / writing_size
                elif i == queue[0]:
                    write_rate[i] = num(1) if f is None else f[1]
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

        new_count, new_signal = count_computing(), power_signal()
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

    def power_signal():
        """What the power controller acts on: the level L (maxmin) or the computing size."""
        sizes = [w[i] for i in computing_jobs()]
        if power_policy == "uniform":
            return sum(sizes, zero)
        return None if uncapped else maxmin_level(sizes, C)

    def speed_of(i, applied):
        if power_policy == "uniform":
            return one if uncapped or applied <= C else C / applied
        return one if applied is None or w[i] <= applied else applied / w[i]

    fired_now = []

    def fire(i, now):
        fired_now.append(i)
        draining[i], waiting[i], write_left[i] = True, False, d[i]
        fire_count[i] += 1
        compute_left[i] = work(i, fire_count[i])
        in_write[i], since_firing[i] = since_firing[i], zero
        out["fire_times"][i].append(now)

    n_computing, signal = len(computing_jobs()), power_signal()
    applied = signal  # what the controller sees, from t - tau (the launch's, before t = 0)
    pending = []  # controller changes (effective time, value), in order

    t = zero
    while t < H:
        if len(event_times) == max_events:
            raise RuntimeError(f"reference did not finish within max_events={max_events}")
        writers = [i for i in range(n_jobs) if not down[i] and draining[i]]
        computing = computing_jobs()
        aggregate = None if not writers else one if f is None else f[len(writers)]
        writing_size = sum((w[i] for i in writers), zero)
        acted_on = applied if tau > 0 else power_signal()  # the stale value with tau > 0
        write_rate, compute_rate = [zero] * n_jobs, [zero] * n_jobs
        for i in writers:
            if storage_policy == "fair":
                write_rate[i] = aggregate / len(writers)
            elif storage_policy == "weighted":
                write_rate[i] = aggregate * w[i] / writing_size
            elif i == queue[0]:
                write_rate[i] = one if f is None else f[1]
        for i in computing:
            compute_rate[i] = (alpha if draining[i] else one) * speed_of(i, acted_on)

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

        new_count, new_signal = len(computing_jobs()), power_signal()
        if new_count != n_computing or new_signal != signal:
            n_computing, signal = new_count, new_signal
            if tau > 0:
                pending.append((t + tau, new_signal))

    out["uncovered_work"] = [a + b for a, b in zip(in_write, since_firing)]
    out["event_times"] = event_times
    return out
