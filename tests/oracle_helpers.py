"""What the oracle tests share: the engine against an exact plain-Python reference.

An oracle test draws small fleets as *specs*: dicts of Python values, per active job a list
(``compute``, ``write``, ``phase``, ``remaining``, ...), per fleet a value (``cap``,
``horizon``, ...), and ``slots``, the job slots the active jobs take in a fleet of a fixed
``n_slots`` (the others are inert padding, ``active=False``). Fixed shapes are what keep the
engine from compiling a program per example. The reference integrators (tests/reference.py,
tests/reference_queue.py) run the active jobs in exact rational arithmetic from the very same
float64 inputs, and the two results must agree to `RTOL` relative plus `ATOL_OF_HORIZON` of
the time scale.

A new mechanism's oracle test (see docs/development.md, "Oracle tests") is then: a strategy or
a seeded generator for specs with the mechanism's key, a few lines calling its reference, and

    out = run_engine(specs, fleet_of(specs, N_SLOTS, storage_policy=...), N_FIRES, until=True)
    for b, spec in enumerate(specs):
        assert_run_agrees(out, b, spec, exact_run_of(spec), STATS)

This module only packs and compares: the rules live in the references, which import nothing
from ckpt_jax (and nothing from here).
"""

import math
import os
from fractions import Fraction

import jax
import jax.numpy as jnp
import numpy as np
from hypothesis import HealthCheck, settings

import ckpt_jax as cj
from ckpt_jax.loop import flat_params, jitter_work

RTOL = 1e-9
ATOL_OF_HORIZON = 1e-12  # absolute tolerance, relative to the run's time scale (H)
# Exactly distinct instants closer than this (relative to the time) are below what float64
# resolves: the engine may switch them together, as docs/model.md §1 snaps simultaneous events.
RESOLUTION = 1e-12

# Per-job spec keys the engine's Fleet takes, and what an inert padding slot holds.
JOB_FIELDS = {
    "compute": 1.25,
    "write": 0.75,
    "size": 1.0,
    "restart": 0.5,
    "mtbf": 10.0,
    "write_limit": math.inf,
    "snapshot": 0.0,
    "recovery_read": 0.0,
    "domain": 0,
    "overhead": 0.0,
}
# Per-fleet spec keys the engine's Fleet takes (a batch gets one value per fleet).
FLEET_FIELDS = ("delay", "async_fraction", "idle_power", "restart_stagger")


def oracle_settings(examples):
    """Hypothesis settings of an oracle property: ``examples`` examples (CKPT_ORACLE_EXAMPLES
    overrides, for a thorough hunt), no deadline (the first example pays compilation)."""
    return settings(
        max_examples=int(os.environ.get("CKPT_ORACLE_EXAMPLES") or examples),
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )


# --- packing specs into padded arrays -----------------------------------------------------------


def padded(values, slots, filler, n_slots):
    """Scatters per-job ``values`` into ``n_slots`` slots at ``slots``, ``filler`` elsewhere."""
    out = [filler] * n_slots
    for value, slot in zip(values, slots):
        out[slot] = value
    return out


def per_job(specs, name, n_slots, filler=None):
    """(B, n_slots) array of the per-job field ``name`` of every spec, padded."""
    filler = JOB_FIELDS[name] if filler is None else filler
    return np.array([padded(spec[name], spec["slots"], filler, n_slots) for spec in specs])


def active(specs, n_slots):
    """(B, n_slots) mask of the active slots."""
    return np.array([padded([True] * len(spec["slots"]), spec["slots"], False, n_slots) for spec in specs])


def throughput_tables(specs, n_slots):
    """(B, n_slots + 1) f tables; a spec's ``throughput`` None is f = 1."""
    return np.array([spec["throughput"] or [1.0] * (n_slots + 1) for spec in specs])


def fleet_of(specs, n_slots, **static):
    """The batch of fleets ``specs``, each padded to ``n_slots`` slots, as one `Fleet`.

    Every key of `JOB_FIELDS` and `FLEET_FIELDS` the first spec holds (and does not set to
    None) is passed on, with ``cap`` and ``throughput``; ``static`` (policies, recovery rule,
    ...) as given. The specs of one batch must agree on which keys are None: the engine
    compiles a program per such combination, and a batch is one program."""
    first = specs[0]
    for key in (*JOB_FIELDS, *FLEET_FIELDS):
        assert all((spec.get(key) is None) == (first.get(key) is None) for spec in specs), key
    jobs = {key: per_job(specs, key, n_slots) for key in JOB_FIELDS if first.get(key) is not None}
    fleets = {key: np.array([spec[key] for spec in specs]) for key in FLEET_FIELDS if first.get(key) is not None}
    return cj.Fleet(
        **jobs,
        cap=[spec["cap"] for spec in specs],
        throughput=throughput_tables(specs, n_slots),
        active=active(specs, n_slots),
        **fleets,
        **static,
    )


def program_class(spec):
    """Which general-engine program a fleet runs on within a batch: (sized, limited).
    `simulate` runs the unit-size fleets of a batch apart from the sized ones, and those
    without a finite write limit apart from those with, each group as one program."""
    sized = any(w != 1 for w in spec.get("size") or [])
    limited = any(math.isfinite(b) for b in spec.get("write_limit") or [])
    return sized, limited


def even_groups(specs, *per_spec):
    """``specs`` with each `program_class` group topped up to ``len(specs)`` fleets by
    repeating its own fleets (a repeat is checked as its original is).

    A program compiles per group shape: a batch of B fleets that splits into groups of 1 and
    B - 1 compiles programs a batch that does not split never needs; topped up, every group
    has B fleets. ``per_spec``: lists parallel to ``specs`` (failure times), repeated alike.
    Returns the new specs, then each ``per_spec`` list."""
    groups = {}
    for k, spec in enumerate(specs):
        groups.setdefault(program_class(spec), []).append(k)
    order = []
    for members in groups.values():
        order += members + [members[r % len(members)] for r in range(len(specs) - len(members))]
    if len(groups) == 1:
        order = list(range(len(specs)))
    return ([specs[k] for k in order], *([values[k] for k in order] for values in per_spec))


def initial_state(specs, fleet, phase_filler=0, remaining_filler=0.5):
    """The batch's initial state from each spec's ``phase`` and ``remaining``."""
    n_slots = fleet.compute.shape[-1]
    return cj.initial_state(
        fleet,
        phase=per_job(specs, "phase", n_slots, phase_filler),
        remaining=per_job(specs, "remaining", n_slots, remaining_filler),
    )


def listed_failures(specs, lists, n_slots, n_listed):
    """(B, n_slots, n_listed) failure times of the batch, padded with +inf; ``lists[b][j]``
    is the list of active job j of fleet b."""
    times = np.full((len(specs), n_slots, n_listed), np.inf)
    for b, (spec, per_job_times) in enumerate(zip(specs, lists)):
        for job, slot in enumerate(spec["slots"]):
            assert len(per_job_times[job]) <= n_listed
            times[b, slot, : len(per_job_times[job])] = per_job_times[job]
    return times


def jitter_of(specs):
    """Per-fleet jitter sigma of the batch, or None where no fleet jitters."""
    sigma = np.array([spec.get("jitter", 0.0) for spec in specs])
    return sigma if np.any(sigma > 0) else None


def run_engine(specs, fleet, n_fires, lists=None, n_listed=None, until=True, save=None, seed=0, method="auto"):
    """One `simulate` call on the batch ``specs`` (as `fleet_of` packed it into ``fleet``).

    ``lists``: per fleet the failure times of its active jobs (None: no failure times);
    ``until``: run to each spec's ``horizon`` (False: to ``n_fires`` firings); jitter, where
    a spec asks for it, under ``jax.random.key(seed)`` (None: no key)."""
    n_slots = fleet.compute.shape[-1]
    return cj.simulate(
        fleet,
        initial_state(specs, fleet),
        n_fires=n_fires,
        until=np.array([spec["horizon"] for spec in specs]) if until else None,
        failure_times=None if lists is None else listed_failures(specs, lists, n_slots, n_listed),
        save=save,
        jitter=jitter_of(specs),
        key=None if seed is None else jax.random.key(seed),
        method=method,
    )


@jax.jit
def _draws(job_keys, compute, sigma, cycles):
    per_cycle = jax.vmap(jitter_work, in_axes=(None, None, None, 0))
    per_job = jax.vmap(per_cycle, in_axes=(0, 0, None, None))
    return jax.vmap(per_job, in_axes=(0, 0, 0, None))(job_keys, compute, sigma, cycles)


def with_jitter_draws(specs, fleet, seed, n_draws):
    """``specs`` with ``draws``: per active job of a jittering fleet, the engine's own work of
    its compute phases 0..n_draws - 1 under ``jax.random.key(seed)`` (docs/model.md §1), for
    the reference's ``compute_work``; None where the fleet does not jitter."""
    sigma = jitter_of(specs)
    if sigma is None:
        return [dict(spec, draws=None) for spec in specs]
    params = flat_params(fleet, sigma, jax.random.key(seed))
    draws = np.asarray(_draws(params.job_keys, params.compute, params.jitter, jnp.arange(n_draws)))
    return [
        dict(spec, draws=[[float(x) for x in draws[b, slot]] for slot in spec["slots"]] if spec["jitter"] else None)
        for b, spec in enumerate(specs)
    ]


def compute_work_of(spec):
    """The reference's ``compute_work`` for a spec with jitter draws (None without)."""
    draws = spec.get("draws")
    return None if draws is None else lambda job, cycle: draws[job][cycle]


# --- what float64 can be held to ---------------------------------------------------------------


def longer_horizon(horizon):
    """H a little more than relatively RESOLUTION later: a reference run to it sees any event
    just after H, which float64 cannot tell from H."""
    return Fraction(horizon) * (1 + Fraction(RESOLUTION))


def resolvable(event_times, horizon, listed=(), restarts=()):
    """Whether float64 tells apart every two distinct instants: ``event_times`` of an exact run
    to `longer_horizon` (its last, the longer horizon itself, left out), H, the listed failure
    times (per job lists) and, where given, ``restarts[j]`` after each of job j's listed times
    (float64 cannot decide whether a time an ulp before t_f + R_j falls in the down period)."""
    instants = set(event_times[:-1]) | {Fraction(horizon)}
    instants |= {Fraction(t) for job in listed for t in job}
    instants |= {Fraction(t) + Fraction(r) for job, r in zip(listed, restarts) for t in job}
    instants = sorted(instants)
    return all(b - a > RESOLUTION * max(b, 1) for a, b in zip(instants, instants[1:]))


def exact_instants(event_times):
    """The instants of an exact run that float64 holds exactly, as floats (a failure put an ulp
    off an instant would pre-empt or follow it in the exact run, and no float run can tell)."""
    return [float(t) for t in event_times if Fraction(float(t)) == t]


# --- comparing ---------------------------------------------------------------------------------


def end_columns(fire_times, end_times):
    """A reference's completed write ends in the engine's layout: one per firing, NaN where
    the write was abandoned or still in flight at H (a write ends after its firing and by
    the job's next one; with alpha > 0 a waiting job fires at its write's end)."""
    later, columns = list(end_times), []
    for k, fired in enumerate(fire_times):
        next_fire = fire_times[k + 1] if k + 1 < len(fire_times) else math.inf
        columns.append(later.pop(0) if later and fired < later[0] <= next_fire else math.nan)
    assert not later, "every completed write follows a firing"
    return columns


def assert_close(got, want, scale, what):
    """``got`` equals ``want`` to RTOL relative plus ATOL_OF_HORIZON * ``scale``, NaN where
    ``want`` is NaN; returns the largest relative error (where ``want`` != 0) and the largest
    absolute one over ``scale`` (where ``want`` == 0)."""
    got, want = np.asarray(got, dtype=float), np.asarray(want, dtype=float)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want), err_msg=what)
    got, want = got[~np.isnan(got)], want[~np.isnan(want)]
    error = np.abs(got - want)
    bound = RTOL * np.abs(want) + ATOL_OF_HORIZON * scale
    worst = int(np.argmax(error - bound)) if error.size else 0
    assert np.all(error <= bound), f"{what}: engine {got[worst]!r} != exact {want[worst]!r} ({got.tolist()})"
    zero = want == 0
    relative = float(np.max(error[~zero] / np.abs(want[~zero]), initial=0.0))
    return relative, float(np.max(error[zero], initial=0.0)) / scale


def as_floats(values, n=None):
    """Exact values as floats (None as NaN), NaN-padded to length ``n``."""
    out = [math.nan if x is None else float(x) for x in values]
    return out + [math.nan] * ((n or len(out)) - len(out))


def assert_run_agrees(
    out, b, spec, exact, stats, completed_ends=False, count_steps=True, stop_at_horizon=True, what=""
):
    """Fleet ``b`` of the engine's run ``out`` (to each fleet's H, with the jobs observer)
    against ``exact``, the reference's run of ``spec``: failure counts, the stop time H,
    one step per exact instant, completed writes, fire and end times, and the `JobStats`
    fields ``stats``, all to `assert_close`; padding slots stay NaN and never fail. Returns
    the largest errors as `assert_close` does.

    ``exact["end_times"]``: per job one end per firing, None where the write was not
    completed; with ``completed_ends``, only the completed writes' ends (`end_columns`).
    ``count_steps``: compare the engine's steps with the exact instants (float fleets may
    merge instants closer than RESOLUTION, so some callers count on grid fleets only)."""
    slots, horizon = spec["slots"], spec["horizon"]
    what = f"fleet {b}{what}: {spec}"
    n_fires = np.asarray(out.fire_times).shape[-1]
    inactive = [s for s in range(np.asarray(out.fire_times).shape[-2]) if s not in slots]
    fire, end = np.asarray(out.fire_times)[b], np.asarray(out.end_times)[b]
    assert np.isnan(fire[inactive]).all() and np.isnan(end[inactive]).all(), f"padding slots must stay NaN; {what}"
    assert np.all(np.asarray(out.jobs.failures)[b, inactive] <= 0), f"padding slots must not fail; {what}"
    np.testing.assert_array_equal(np.asarray(out.jobs.failures)[b, slots], exact["failures"], err_msg=what)
    if stop_at_horizon:
        assert float(np.asarray(out.time)[b]) == horizon, f"stopped at {float(np.asarray(out.time)[b])!r}; {what}"
    if count_steps:
        steps, instants = int(np.asarray(out.n_events)[b]), len(exact["event_times"])
        assert steps == instants, f"{steps} steps, {instants} exact instants; {what}"
    completed = [sum(e is not None for e in ends) for ends in exact["end_times"]]
    np.testing.assert_array_equal(np.asarray(out.jobs.writes)[b, slots], completed, err_msg=what)
    errors = []
    for job, slot in enumerate(slots):
        fired, ended = exact["fire_times"][job], exact["end_times"][job]
        assert len(fired) < n_fires, f"job {job} fires more than the trace holds; {what}"
        if completed_ends:
            ended = end_columns(fired, ended)
        errors.append(assert_close(fire[slot], as_floats(fired, n_fires), horizon, f"fire times of job {job}, {what}"))
        errors.append(assert_close(end[slot], as_floats(ended, n_fires), horizon, f"end times of job {job}, {what}"))
    for name in stats:
        got = np.asarray(getattr(out.jobs, name))[b, slots]
        errors.append(assert_close(got, as_floats(exact[name]), horizon, f"{name}, {what}"))
    if "compute_work" in exact:  # the steady-state goodput's work (docs/model.md §1c)
        jobs = out.jobs
        got = np.asarray(jobs.useful_work)[b, slots] + np.asarray(jobs.uncovered_work)[b, slots]
        net = [done - lost for done, lost in zip(exact["compute_work"], exact["lost_work"])]
        errors.append(assert_close(got, as_floats(net), horizon, f"work done less work lost, {what}"))
    return max(e[0] for e in errors), max(e[1] for e in errors)
