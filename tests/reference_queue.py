"""A plain-Python, exact reference for storage that serves one I/O at a time (docs/model.md
§1b "fcfs", §1e "fcfs_nonblocking" and "cooperative"), with failures and restarts (§1c).

Written from the rules, in its own style: one explicit queue of writers, a dict of waiting
requests, ``fractions.Fraction`` arithmetic so that simultaneous events are simultaneous.
It imports nothing from ckpt_jax.

The rules. Rates: the writer at the head of the queue drains at min(b_i, f(1)); every other
job in the queue is blocked (neither writes nor computes); a job that is up and not in the
queue computes at its speed under the cap (``maxmin`` water-filling by size, or ``uniform``
min(1, C / Σ w)). A job that is down (restart after a failure) counts nowhere.

* ``"fcfs"`` (blocking): a compute end is a firing: the job joins the back of the queue
  (simultaneous ones by job index) and its write covers all its work since its last
  covered point.
* ``"fcfs_nonblocking"`` / ``"cooperative"``: a compute end is a *request*; the job starts
  its next compute phase (T_i) and keeps computing. When the queue is empty, the storage
  grants one request: the job's firing. It stops computing, starts a fresh phase of T_i
  after its write, and the write covers all its work up to now. A request still waiting
  when the next one comes due is replaced (under FCFS the new one goes to the back; a due
  at the very instant of a grant does not take the old request's place away for that
  grant). FCFS grants the earliest request (ties by job index); cooperative the least
  Least-Waste score (`least_waste`, ties by job index).

Writes in progress at t = 0 form the initial queue in job-index order (blocking writes
already started), under every policy.

One instant, in this order: the head's write ends (its work becomes useful), compute ends,
restart ends, failures (a failure loses the job's uncovered work and the work of its write
if it is in the queue, leaves the queue, cancels its request, and puts it down for R_i; it
then computes T_i again), then the grant where the queue is empty.
"""

import math
from fractions import Fraction

__all__ = ["least_waste", "simulate_queue_reference"]

POLICIES = ("fcfs", "fcfs_nonblocking", "cooperative")


def _num(x):
    return x if isinstance(x, Fraction) else Fraction(x)


def least_waste(i, waiting, size, mtbf, restart, exposure, waited, blocked, service):
    """The expected waste that serving request ``i`` first (for ``service[i]``) costs the
    other waiting requests: an idle (``blocked``) job j loses size_j · (waited_j + v_i); a
    computing job j risks a failure with probability v_i / M_j costing size_j · (R_j +
    exposure_j + v_i / 2). ``mtbf[j]`` None: it never fails (no risk)."""
    v = service[i]
    total = 0
    for j in waiting:
        if j == i:
            continue
        if blocked[j]:
            total += size[j] * (waited[j] + v)
        elif mtbf[j] is not None:
            total += size[j] * v / mtbf[j] * (restart[j] + exposure[j] + v / 2)
    return total


def _speeds(up_computing, size, cap, power_policy):
    """Speed of each computing job under the cap (None: uncapped)."""
    if cap is None:
        return {i: 1 for i in up_computing}
    if power_policy == "uniform":
        total = sum(size[i] for i in up_computing)
        return {i: (1 if total <= cap else cap / total) for i in up_computing}
    # maxmin: give the smallest jobs their full size while they fit under an equal share.
    left, rest = cap, sorted(up_computing, key=lambda i: size[i])
    if sum(size[i] for i in rest) <= cap:
        return {i: 1 for i in up_computing}
    while rest and size[rest[0]] < left / len(rest):
        left -= size[rest.pop(0)]
    level = left / len(rest)
    return {i: (1 if size[i] <= level else level / size[i]) for i in up_computing}


def simulate_queue_reference(
    compute,
    write,
    horizon,
    storage_policy,
    failure_times=None,
    restart=0,
    phase=None,
    remaining=None,
    cap=None,
    f1=1,
    size=None,
    power_policy="maxmin",
    write_limit=None,
    mtbf=None,
):
    """Runs the fleet from t = 0 to H (instants at H included).

    Args:
      compute, write: per-job T_i, d_i.
      horizon: H.
      storage_policy: "fcfs", "fcfs_nonblocking" or "cooperative".
      failure_times: per job a strictly increasing list of failure times (times that fall
        while the job is down are ignored), or None.
      restart: R_i (one number or per job).
      phase, remaining: initial phase (0 computing, 1 writing) and what is left of it.
      cap: the power cap C, or None; f1: the storage's f(1); size: w_i (default 1).
      write_limit: per-job b_i, or None (no limit).
      mtbf: per-job M_i for the cooperative score (None: no failure risk in the score).

    Returns a dict of per-job lists: fire_times, end_times (writes started by a firing after
    t = 0 that completed), useful_work, lost_work, failures, down_time, write_time (time in
    the queue), compute_time; and event_times (the instants stepped) and ``closest_tie``
    (the smallest relative gap between the best and another different cooperative score at
    a grant, inf if none: float arithmetic may order such near-ties otherwise).
    """
    assert storage_policy in POLICIES
    n = len(compute)
    T = [_num(x) for x in compute]
    d = [_num(x) for x in write]
    H = _num(horizon)
    R = [_num(x) for x in (restart if isinstance(restart, (list, tuple)) else [restart] * n)]
    w = [Fraction(1)] * n if size is None else [_num(x) for x in size]
    C = None if cap is None or cap == math.inf else _num(cap)
    b = [None] * n if write_limit is None else [None if x is None or x == math.inf else _num(x) for x in write_limit]
    rate = [_num(f1) if b[i] is None else min(b[i], _num(f1)) for i in range(n)]
    M = [None] * n if mtbf is None else [None if x is None or x == math.inf else _num(x) for x in mtbf]
    fails = [[_num(x) for x in job] for job in (failure_times or [[] for _ in range(n)])]
    zero = Fraction(0)

    queue = []  # writers in the order served: the head drains, the others are blocked
    write_left = [zero] * n
    compute_left = [zero] * n
    covered_by_write = [zero] * n  # work the job's write in the queue covers
    uncovered = [zero] * n  # work done and not in any write
    requests = {}  # job -> its place (request time)
    down, back = [False] * n, [zero] * n
    cursor = [0] * n
    started = [False] * n  # the write in the queue was started by a firing after t = 0
    for i in range(n):
        left = T[i] if remaining is None else _num(remaining[i])
        if phase is not None and phase[i] == 1:
            queue.append(i)
            write_left[i], compute_left[i] = left, T[i]
        else:
            compute_left[i] = left
    out = {k: [zero] * n for k in ("useful_work", "lost_work", "down_time", "write_time", "compute_time")}
    out["failures"] = [0] * n
    out["fire_times"] = [[] for _ in range(n)]
    out["end_times"] = [[] for _ in range(n)]
    out["event_times"] = []
    out["closest_tie"] = math.inf

    def fire(i, now):
        out["fire_times"][i].append(now)
        started[i] = True
        queue.append(i)
        covered_by_write[i], uncovered[i] = uncovered[i], zero
        write_left[i] = d[i]

    t = zero
    while t < H:
        computing = [i for i in range(n) if not down[i] and i not in queue]
        speed = _speeds(computing, w, C, power_policy)
        head = queue[0] if queue else None
        candidates = [H]
        if head is not None:
            candidates.append(t + write_left[head] / rate[head])
        candidates += [t + compute_left[i] / speed[i] for i in computing]
        candidates += [back[i] for i in range(n) if down[i]]
        candidates += [fails[i][cursor[i]] for i in range(n) if not down[i] and cursor[i] < len(fails[i])]
        t_next = min(candidates)
        dt = t_next - t
        for i in range(n):
            if down[i]:
                out["down_time"][i] += dt
            elif i in queue:
                out["write_time"][i] += dt
            else:
                out["compute_time"][i] += dt
                done = speed[i] * dt
                compute_left[i] -= done
                uncovered[i] += done
        if head is not None:
            write_left[head] -= rate[head] * dt
        t = t_next
        out["event_times"].append(t)

        # The head's write ends.
        if head is not None and write_left[head] == 0:
            queue.pop(0)
            out["useful_work"][head] += covered_by_write[head]
            covered_by_write[head] = zero
            if started[head]:
                out["end_times"][head].append(t)
            started[head] = False
        # Compute ends: a firing (fcfs) or a request (the others).
        redue = []
        for i in computing:
            if compute_left[i] != 0:
                continue
            compute_left[i] = T[i]
            if storage_policy == "fcfs":
                fire(i, t)
            elif i in requests:
                redue.append(i)
            else:
                requests[i] = t
        # Restarts that end, then failures.
        for i in range(n):
            if down[i] and back[i] == t:
                down[i] = False
        for i in range(n):
            if down[i] or cursor[i] >= len(fails[i]) or fails[i][cursor[i]] != t:
                continue
            out["failures"][i] += 1
            out["lost_work"][i] += uncovered[i] + (covered_by_write[i] if i in queue else zero)
            uncovered[i] = covered_by_write[i] = zero
            if i in queue:
                queue.remove(i)
                started[i] = False
            requests.pop(i, None)
            if i in redue:
                redue.remove(i)
            compute_left[i], write_left[i] = T[i], zero
            back[i] = t + R[i]
            cursor[i] += 1
            while cursor[i] < len(fails[i]) and fails[i][cursor[i]] < back[i]:
                cursor[i] += 1
            down[i] = R[i] > 0
        # The grant, where the storage is free.
        if not queue and requests:
            if storage_policy == "fcfs_nonblocking":
                chosen = min(requests, key=lambda j: (requests[j], j))
            else:
                waiting = sorted(requests)
                service = {j: d[j] / rate[j] for j in waiting}
                idle = {j: False for j in waiting}
                scores = {
                    i: least_waste(i, waiting, w, M, R, uncovered, {j: zero for j in waiting}, idle, service)
                    for i in waiting
                }
                best = min(scores.values())
                chosen = min(j for j in waiting if scores[j] == best)
                for score in scores.values():
                    if score != best:
                        out["closest_tie"] = min(out["closest_tie"], float((score - best) / max(abs(best), 1e-300)))
            del requests[chosen]
            if chosen in redue:
                redue.remove(chosen)
            compute_left[chosen] = T[chosen]
            fire(chosen, t)
        for i in redue:  # the dropped request's replacement queues now
            requests[i] = t
    return out
