"""Fleet files: a fleet of job groups in TOML, for ``ckpt-jax design`` and ``simulate --fleet``.

A fleet file (docs/model.md claim 10; read with the standard library's `tomllib`) holds groups
of identical jobs and the fleet-wide storage, power and design settings::

    throughput = "saturating"      # a preset name (cj.THROUGHPUT_PRESETS) or [f(1), ..., f(N)]
    cap = 60.0                     # power cap in size units, or "none"
    power_policy = "maxmin"        # optional (cj.POWER_POLICIES)
    storage_policy = "fair"        # optional (cj.STORAGE_POLICIES)
    recover_from = "storage"       # optional, with snapshots: "storage" or "memory"
    idle_power = 0.0               # optional: draw of a job that does not compute, per size
    fail_while_down = false        # optional: failures also strike restarts and recovery reads
    restart_stagger = 0.5          # optional: the jobs one outage fails restart this far apart
    failure_shape = 0.7            # optional: Weibull failures of this shape, mean mtbf (default 1)
    failure_trace = "failures.csv" # optional: replay logged failures (columns time,group or time,job)

    [launch]                       # optional: how the fleet starts (assess, simulate, design)
    mode = "staggered"             # "random" (default), "together" or "staggered"
    stagger = 30.0                 # with "staggered": job k starts k x stagger later

    [design]                       # optional, every key optional
    bounds = [1.0, 200.0]          # range of every interval
    horizon = 1000.0
    draws = 16
    seed = 0
    offsets = false                # optional: design each job's launch offset too
    staggers = false               # optional: design restart_stagger (with [[outages]]) and
                                   # the [launch] stagger (mode "staggered") too
    max_written = 40.0             # optional budget: the fleet's written volume (over H; with
                                   # units a rate, "500 TB/day")
    max_power_steps = 100          # optional budget: power steps above the threshold (over H;
                                   # with units per day)
    budget_bound = "mean"          # optional: "mean" or "upper" (the upper end of the 95 % CI)

    [[groups]]
    name = "1-gpu"                 # optional, unique
    count = 8
    size = 1.0
    write = 0.5                    # write volume per checkpoint
    mtbf = 200.0
    restart = 1.0                  # optional, default 0 (the commands say which groups took it)
    compute = 14.0                 # optional: the interval simulate uses (default: Young's)
    bounds = [2.0, 60.0]           # optional: this group's design range (default: [design].bounds)
    min_interval = 5.0             # optional: a floor on this group's designed interval
    write_limit = 0.25             # optional: the job's own write rate cap b (default: none)
    snapshot = 0.05                # optional: two-level checkpoints, the blocking snapshot s
    recovery_read = 0.5            # optional: volume re-read after a restart (default 0)
    overhead = 0.2                 # optional: fixed time each checkpoint blocks before its write
    failure_shape = 0.7            # optional: this group's Weibull shape (default: the top level's)
    domain = "rack-a"              # optional: its failure domain (default "cluster")

    [[outages]]                    # optional: common-cause outages of one failure domain
    domain = "rack-a"              # optional, default "cluster"
    mtbf = 5000.0                  # mean time between its outages; or times = [120.0, 900.0]

``failure_shape`` and ``failure_trace`` are the failure laws of docs/model.md §1f: a job's time
to its next failure, from its last restart end, is Weibull with that shape and mean ``mtbf``
(1: the exponential law of §1c), or the failures of a log are replayed as listed (`_trace`,
read relative to the fleet file; ``mtbf`` still sets Young's intervals and the design's
bounds). ``[launch]`` is how every run of the file starts (docs/model.md §1f, launch modes).
``snapshot`` (docs/model.md §1d) is all or nothing: once one group has it, every group must,
and the fleet checkpoints in two levels (the write then drains in the background).
``overhead`` is the fixed checkpoint overhead o of docs/model.md §1g (the barrier, serialising
the state, metadata, the commit: ``"30 s"`` in a file with units): each checkpoint first blocks
its job for o, then writes; Young's interval becomes √(2(o + D)M).
``recovery_read`` and ``fail_while_down`` are the recovery of docs/model.md §1e: after its
restart a failed job re-reads that volume through the shared storage, and with
``fail_while_down`` a failure during the restart or the read starts the recovery over.
``domain``, ``[[outages]]`` and ``restart_stagger`` are the common causes of docs/model.md §1f:
an outage of a domain fails every job of it that is up, and the k-th of them (by job order in
the file) ends its restart k·``restart_stagger`` late. Every outage table has ``mtbf`` (drawn,
Poisson) or every one has ``times`` (replayed instants); one table per domain.

Every quantity may instead be a string with a unit (``"6.5 TB"``, ``"2 TB/s"``, ``"17 min"``,
``"700 W"``; `ckpt_jax._units`), with the operator's twins of some fields (``gpus``,
``checkpoint``, ``interval``, ``write_limit_per_node`` × ``nodes``), a fleet-wide
``failure_rate_per_gpu``, ``power_per_gpu`` and ``time_unit``, and a ``[storage]`` table in place
of ``throughput``; the fleet is then built in seconds and bytes (docs/guide/fleet-files.md).

Every bad value, missing key or unknown key raises `FleetFileError` (a `ValueError`) naming
the file, the field (``groups[2].mtbf``) and what is allowed.
"""

from __future__ import annotations

import copy
import csv
import dataclasses
import difflib
import math
import os
import re
import stat
import tomllib
from pathlib import Path
from typing import NamedTuple

import numpy as np
from numpy.typing import DTypeLike

from ._units import KINDS

__all__ = [
    "FleetFileError",
    "FleetFileWarning",
    "Group",
    "DesignSettings",
    "LaunchSettings",
    "LAUNCH_MODES",
    "FleetSpec",
    "load",
    "loads",
    "check_keys",
    "dumps",
    "DESIGN_DEFAULTS",
    "COUNT_MAX",
    "SEED_MAX",
    "Outage",
    "DEFAULT_DOMAIN",
    "override",
    "parse_override",
]

COUNT_MAX = 100_000  # jobs per group, and in the whole fleet
SEED_MAX = 2**64 - 1
DESIGN_DEFAULTS = {
    "horizon": 1000.0,
    "draws": 16,
    "pairs": 4,
    "steps": 100,
    "seed": 0,
    "launch": "random",
    "offsets": False,
    "staggers": False,
    "budget_bound": "mean",
}


DEFAULT_DOMAIN = "cluster"  # a group's failure domain where it names none (docs/model.md §1f)


class FleetFileError(ValueError):
    """A fleet file that cannot be used; the message names the file and the field."""


class FleetFileWarning(UserWarning):
    """A fleet file's key that changes nothing where it is (``restart_stagger`` without
    ``[[outages]]``, a group's ``domain`` no outage table names); the message names the file
    and the field."""


class Group(NamedTuple):
    """``count`` identical jobs: size w, write volume d, MTBF M, restart R, interval T
    (None: Young's, `FleetSpec.young`), design bounds (lo, hi) (None: the fleet's), write
    limit b (None: none), snapshot s (None: blocking checkpoints; docs/model.md §1d) and
    recovery read r (None: none; §1e), failure domain (None: `DEFAULT_DOMAIN`; §1f), Weibull
    shape, a floor on the designed interval (None: none; a budget, docs/model.md §1g) and fixed
    checkpoint overhead o (None: none; §1g)."""

    name: str
    count: int
    size: float
    write: float
    mtbf: float
    restart: float = 0.0
    compute: float | None = None
    bounds: tuple | None = None
    write_limit: float | None = None
    snapshot: float | None = None
    recovery_read: float | None = None
    domain: str | None = None
    failure_shape: float | None = None
    min_interval: float | None = None
    overhead: float | None = None


class Outage(NamedTuple):
    """``[[outages]]``: the common-cause outages of one failure domain (docs/model.md §1f),
    drawn with mean time ``mtbf`` or replayed at ``times`` (sorted)."""

    domain: str = DEFAULT_DOMAIN
    mtbf: float | None = None
    times: tuple | None = None


class LaunchSettings(NamedTuple):
    """``[launch]``: how the fleet starts (docs/model.md §1f): ``mode`` "random" (uniform over
    each job's solo cycle), "together" (every job at the start of its compute) or "staggered"
    (job k starts its first compute k·``stagger`` after job 0), `ckpt_jax.design.Launch`."""

    mode: str = "random"
    stagger: float = 0.0


class DesignSettings(NamedTuple):
    """``[design]``: bounds (None: a decade either side of the Young intervals), horizon H,
    draws S, antithetic pairs P, steps, seed, launch (the baselines', and the design's unless
    ``offsets``), offsets (design each job's launch offset too) and staggers (design the
    restart stagger with ``[[outages]]`` and the ``[launch]`` stagger of a staggered launch
    too: `cj.design.checkpoint_intervals` with ``stagger=True``), and the budgets
    (docs/model.md §1g, `cj.design.Budgets`): ``max_written`` (None: no limit; in a file with
    units a rate in B/s, counted per day; in a file of plain numbers the volume over H),
    ``max_power_steps`` (None: no limit; per day with units, else over H) and
    ``budget_bound`` ("mean" or "upper")."""

    bounds: tuple | None = None
    horizon: float = DESIGN_DEFAULTS["horizon"]
    draws: int = DESIGN_DEFAULTS["draws"]
    pairs: int = DESIGN_DEFAULTS["pairs"]
    steps: int = DESIGN_DEFAULTS["steps"]
    seed: int = DESIGN_DEFAULTS["seed"]
    launch: str = DESIGN_DEFAULTS["launch"]
    offsets: bool = DESIGN_DEFAULTS["offsets"]
    staggers: bool = DESIGN_DEFAULTS["staggers"]
    max_written: float | None = None
    max_power_steps: float | None = None
    budget_bound: str = DESIGN_DEFAULTS["budget_bound"]


@dataclasses.dataclass(frozen=True)
class FleetSpec:
    """A parsed fleet file.

    Attributes:
      path: where it was read from ("<string>" for `loads`).
      groups: tuple of `Group`, in file order.
      throughput: a preset name, or a tuple f(1..N) with N the total job count.
      cap: power cap (None: uncapped).
      power_policy, storage_policy: as `cj.Fleet`.
      delay, async_fraction: as `cj.Fleet` (default 0).
      recover_from, idle_power: as `cj.Fleet` (default "storage", 0).
      fail_while_down: as `cj.Fleet` (default False; docs/model.md §1e).
      design: `DesignSettings`.
      time_unit: in a file with units, the unit reports show time in (its ``time_unit``,
        default "h"); every time is in seconds, every volume in bytes and every bandwidth
        (throughput, write limits) in bytes/s. None: a file of plain numbers.
      power_per_gpu: one GPU's draw in watts (None: not given); size, cap and idle power
        count in its units.
      outages: tuple of `Outage` (``[[outages]]``; docs/model.md §1f), at most one per domain.
      restart_stagger: Δ >= 0, as `cj.Fleet` (default 0).
      source: the file's TOML data as read (None where the spec was built by hand), which
        `override` edits and parses again; ``dtype`` the dtype it was checked for.
      failure_trace: the failure log replayed (``failure_trace``, its absolute path), or None.
      failure_times: with a trace, per job (N tuples) its failure instants in increasing order
        (in seconds in a file with units), else None.
      launch: `LaunchSettings` (``[launch]``).
    """

    path: str
    groups: tuple
    throughput: str | tuple = "shared"
    cap: float | None = None
    power_policy: str = "maxmin"
    storage_policy: str = "fair"
    delay: float = 0.0
    async_fraction: float = 0.0
    recover_from: str = "storage"
    idle_power: float = 0.0
    fail_while_down: bool = False
    design: DesignSettings = DesignSettings()
    time_unit: str | None = None
    power_per_gpu: float | None = None
    outages: tuple = ()
    restart_stagger: float = 0.0
    source: dict | None = dataclasses.field(default=None, compare=False, repr=False)
    dtype: str = dataclasses.field(default="float64", compare=False, repr=False)
    failure_trace: str | None = None
    failure_times: tuple | None = None
    launch: LaunchSettings = LaunchSettings()
    # The folder the file's relative paths (failure_trace) are read from: the file's own, kept
    # by `override`, whose spec's ``path`` names the scenario rather than a file.
    folder: str | None = dataclasses.field(default=None, compare=False, repr=False)

    @property
    def n_jobs(self) -> int:
        return sum(group.count for group in self.groups)

    @property
    def labels(self) -> np.ndarray:
        """(N,) group index of every job (jobs listed group by group)."""
        return np.repeat(np.arange(len(self.groups)), [group.count for group in self.groups])

    @property
    def names(self) -> tuple:
        return tuple(group.name for group in self.groups)

    def restart_defaults(self) -> tuple:
        """The names of the groups whose table gives no ``restart``: each runs with the
        documented default, 0 (a failed job resumes at once), which the commands' outputs
        state (`ckpt_jax.cli._common.defaults_note`). Empty for a spec built by hand."""
        if self.source is None:
            return ()
        tables = self.source.get("groups", [])
        return tuple(group.name for group, table in zip(self.groups, tables) if "restart" not in table)

    def per_job(self, field: str) -> np.ndarray:
        """(N,) float64 values of a group field, repeated over each group's jobs."""
        return np.repeat(
            np.asarray([getattr(g, field) for g in self.groups], np.float64), [group.count for group in self.groups]
        )

    @property
    def domains(self) -> tuple:
        """The failure domains' names (docs/model.md §1f), in order of first appearance among
        the groups; a domain's index in the fleet is its place here."""
        names = [DEFAULT_DOMAIN if group.domain is None else group.domain for group in self.groups]
        return tuple(dict.fromkeys(names))

    def domain_index(self) -> np.ndarray:
        """(N,) each job's failure domain, as its index in `domains`."""
        names = self.domains
        index = [names.index(DEFAULT_DOMAIN if group.domain is None else group.domain) for group in self.groups]
        return np.repeat(np.asarray(index, np.int64), [group.count for group in self.groups])

    def outage_arguments(self) -> dict:
        """The `cj.Fleet` arguments of the failure domains, outages and restart stagger
        (docs/model.md §1f): ``domain``, ``restart_stagger`` and ``outage_mtbf`` (D,) (inf
        for a domain without outages) or ``outage_times`` (K, 2) rows."""
        names = self.domains
        arguments: dict = dict(domain=self.domain_index(), restart_stagger=self.restart_stagger)
        if not self.outages:
            return arguments
        if self.outages[0].mtbf is not None:
            mtbf = np.full(len(names), np.inf)
            for outage in self.outages:
                mtbf[names.index(outage.domain)] = outage.mtbf
            arguments["outage_mtbf"] = mtbf
        else:
            rows = sorted((t, names.index(outage.domain)) for outage in self.outages for t in outage.times or ())
            arguments["outage_times"] = np.asarray(rows, np.float64).reshape(-1, 2)
        return arguments

    def failure_mtbf(self) -> np.ndarray:
        """(N,) each job's mean time between failures of any cause: its own and its domain's
        outages (replayed ones at their mean rate up to the last), for event estimates."""
        rate = 1.0 / self.per_job("mtbf")
        names, index = self.domains, self.domain_index()
        for outage in self.outages:
            if outage.mtbf is not None:
                per_domain = 1.0 / outage.mtbf
            else:
                times = outage.times or ()
                per_domain = len(times) / max(max(times, default=1.0), 1e-300)
            rate = rate + np.where(index == names.index(outage.domain), per_domain, 0.0)
        return 1.0 / rate

    @property
    def has_snapshots(self) -> bool:
        """Whether the fleet checkpoints in two levels (every group has a ``snapshot``)."""
        return self.groups[0].snapshot is not None

    def write_limits(self) -> np.ndarray:
        """(N,) each job's write limit b (inf where none)."""
        return self._per_job_or("write_limit", math.inf)

    def snapshots(self) -> np.ndarray:
        """(N,) each job's snapshot duration s (0 without snapshots)."""
        return self._per_job_or("snapshot", 0.0)

    @property
    def has_overheads(self) -> bool:
        """Whether some group has a fixed checkpoint overhead o > 0 (docs/model.md §1g)."""
        return any((group.overhead or 0.0) > 0 for group in self.groups)

    def overheads(self) -> np.ndarray:
        """(N,) each job's fixed checkpoint overhead o (0 where none; docs/model.md §1g)."""
        return self._per_job_or("overhead", 0.0)

    def _per_job_or(self, field: str, default: float) -> np.ndarray:
        values = [default if getattr(g, field) is None else getattr(g, field) for g in self.groups]
        return np.repeat(np.asarray(values, np.float64), [group.count for group in self.groups])

    def solo_write_time(self) -> np.ndarray:
        """(N,) write time alone, D = d / min(b, f(1)) (`cj.theory.solo_write_time`)."""
        from .theory import solo_write_time

        return solo_write_time(self.per_job("write"), self.write_limits(), self._f1())

    def young(self) -> np.ndarray:
        """(N,) Young's interval per job: √(2·(o + D)·M) with D the write time alone and o the
        fixed overhead (docs/model.md §1g; 0 without); with snapshots max(√(2·(o + s)·M), D), as
        `cj.design` takes it (the overhead and the snapshot block, and a checkpoint due before
        the previous drain ended waits for it; `cj.theory.blocking_young`). M is the job's own
        mtbf, and with drawn ``[[outages]]`` its total 1 / (1/M_i + 1/M_o) with its domain's
        (`cj.design.baseline_mtbf`)."""
        from .theory import blocking_young

        drawn = bool(self.outages) and self.outages[0].mtbf is not None
        mtbf = self.failure_mtbf() if drawn else self.per_job("mtbf")
        write = self.solo_write_time()
        if self.has_snapshots:
            snapshot = self.snapshots()
            return blocking_young(write, mtbf, self.overheads() + snapshot if self.has_overheads else snapshot)
        return blocking_young(self.overheads() + write if self.has_overheads else write, mtbf)

    def period(self, intervals=None) -> np.ndarray:
        """(N,) each job's solo period at ``intervals`` (default `intervals`): T + D, or with
        snapshots s + max(T, D), plus the fixed overhead o where there is one (`cj.Fleet.period`)."""
        from .theory import solo_period

        compute = self.intervals() if intervals is None else np.asarray(intervals, np.float64)
        period = solo_period(compute, self.solo_write_time(), self.snapshots() if self.has_snapshots else None)
        return self.overheads() + period if self.has_overheads else period

    def intervals(self) -> np.ndarray:
        """(N,) compute intervals: each group's ``compute``, else Young's."""
        young = self.young()
        given = np.repeat(
            [math.nan if g.compute is None else g.compute for g in self.groups], [group.count for group in self.groups]
        )
        return np.where(np.isnan(given), young, given)

    def bounds(self) -> tuple:
        """The design bounds: ``[design].bounds``, else (min Young / 10, max Young · 10)."""
        if self.design.bounds is not None:
            return tuple(self.design.bounds)
        young = self.young()
        return float(young.min() / 10), float(young.max() * 10)

    def group_bounds(self) -> tuple:
        """Per group, its (lo, hi): the group's ``bounds``, else `bounds`."""
        fleet = self.bounds()
        return tuple(fleet if group.bounds is None else tuple(group.bounds) for group in self.groups)

    def job_bounds(self) -> tuple:
        """(lo, hi), each (N,) float64: every job's design bounds (`group_bounds`)."""
        per_group = np.asarray(self.group_bounds(), np.float64)  # (G, 2)
        counts = [group.count for group in self.groups]
        return np.repeat(per_group[:, 0], counts), np.repeat(per_group[:, 1], counts)

    def events(self, horizon: float | None = None) -> float:
        """About how many events one run of the fleet steps up to the horizon (default
        ``[design].horizon``) at `intervals` (`ckpt_jax.model.events_to`); each event
        costs O(N) on the general engine. Each outage instant counts as one event of its own
        (about H / M_o drawn per ``[[outages]]`` table, or its listed times up to H)."""
        from .model import events_to

        horizon = self.design.horizon if horizon is None else horizon
        period = self.period()
        jobs = events_to(horizon, period, self.failure_mtbf(), self.per_job("restart"), np.ones(self.n_jobs, bool))
        outages = sum(
            horizon / outage.mtbf if outage.mtbf is not None else sum(t <= horizon for t in outage.times)
            for outage in self.outages
        )
        return float(jobs + outages)

    def _f1(self) -> float:
        if isinstance(self.throughput, str):
            from ._throughput import THROUGHPUT_PRESETS

            return float(THROUGHPUT_PRESETS[self.throughput](1))
        return float(self.throughput[0])

    def fleet(self, intervals=None, *, failures: bool = True, dtype=None):
        """The `cj.Fleet` of the file (N jobs, group by group).

        Args:
          intervals: (*B, N) compute intervals (default `intervals`); a batch of fleets
            with leading axes *B.
          failures: with the file's MTBF, restart, outages and stagger (False: a fleet that
            never fails).
          dtype: as `cj.Fleet`.
        """
        from .model import Fleet

        compute = self.intervals() if intervals is None else np.asarray(intervals, np.float64)
        throughput = self.throughput
        if not isinstance(throughput, str):
            throughput = np.concatenate([[throughput[0]], np.asarray(throughput, np.float64)])
            throughput = np.broadcast_to(throughput, compute.shape[:-1] + throughput.shape)
        return Fleet(
            compute,
            np.broadcast_to(self.per_job("write"), compute.shape),
            cap=self.cap,
            throughput=throughput,
            delay=self.delay,
            async_fraction=self.async_fraction,
            size=self.per_job("size"),
            power_policy=self.power_policy,
            storage_policy=self.storage_policy,
            mtbf=self.per_job("mtbf") if failures else None,
            restart=self.per_job("restart") if failures else 0.0,
            failure_shape=self._per_job_or("failure_shape", 1.0) if failures and self.failure_times is None else None,
            failure_times=self.listed_failures(compute.shape[:-1]) if failures else None,
            write_limit=self.write_limits(),
            snapshot=self.snapshots() if self.has_snapshots else None,
            recover_from=self.recover_from,
            idle_power=self.idle_power,
            recovery_read=self._per_job_or("recovery_read", 0.0),
            fail_while_down=self.fail_while_down,
            overhead=self.overheads(),
            **(self.outage_arguments() if failures else {}),
            dtype=dtype,
        )

    def override(self, overrides: dict, *, name: str | None = None) -> FleetSpec:
        """This spec with ``overrides`` (file keys -> values) applied to the file's data and
        parsed again (`ckpt_jax.fleetfile.override`)."""
        return override(self, overrides, name=name)

    def launch_of(self, design: bool = False):
        """The launch of every run of the file, as `ckpt_jax.design.start_state` takes it: the
        ``[launch]`` table's (a `ckpt_jax.design.Launch`), or for ``design`` the ``[design]``
        launch where the file has no ``[launch]`` table."""
        from .design import Launch

        if design and self.launch == LaunchSettings():
            return self.design.launch
        return Launch(*self.launch)

    def listed_failures(self, batch_shape=()) -> np.ndarray | None:
        """(*B, N, K) the trace's failure instants per job, NaN padded (None without a trace)."""
        if self.failure_times is None:
            return None
        width = max(1, max(len(times) for times in self.failure_times))
        table = np.full((self.n_jobs, width), np.nan)
        for job, times in enumerate(self.failure_times):
            table[job, : len(times)] = times
        return np.broadcast_to(table, tuple(batch_shape) + table.shape)

    def to_dict(self) -> dict:
        """Plain data (for JSON), the file's fields with defaults filled in; the fields of
        write limits, snapshots, the power draw (docs/model.md §1d) and the recovery (§1e) only
        where set."""
        optional = {
            "write_limit": None,
            "snapshot": None,
            "recovery_read": None,
            "overhead": None,
            "fail_while_down": False,
            "recover_from": "storage",
            "idle_power": 0.0,
            "time_unit": None,
            "power_per_gpu": None,
            "domain": None,
            "outages": [],
            "restart_stagger": 0.0,
            "failure_shape": None,
            "min_interval": None,
            "failure_trace": None,
            "launch": LaunchSettings()._asdict(),
        }
        if self.has_snapshots:
            del optional["recover_from"]  # it matters with snapshots: always written
        keep = lambda table: {k: v for k, v in table.items() if k not in optional or v != optional[k]}  # noqa: E731
        return keep(
            {
                "path": self.path,
                "throughput": self.throughput if isinstance(self.throughput, str) else list(self.throughput),
                "cap": self.cap,
                "power_policy": self.power_policy,
                "storage_policy": self.storage_policy,
                "delay": self.delay,
                "async_fraction": self.async_fraction,
                "recover_from": self.recover_from,
                "idle_power": self.idle_power,
                "fail_while_down": self.fail_while_down,
                "time_unit": self.time_unit,
                "power_per_gpu": self.power_per_gpu,
                "restart_stagger": self.restart_stagger,
                "outages": [
                    {k: list(v) if isinstance(v, tuple) else v for k, v in outage._asdict().items() if v is not None}
                    for outage in self.outages
                ],
                "failure_trace": self.failure_trace,
                "launch": self.launch._asdict(),
                "design": {**self.design._asdict(), "bounds": list(self.bounds())},
                "groups": [
                    keep({**group._asdict(), "bounds": list(bounds)})
                    for group, bounds in zip(self.groups, self.group_bounds())
                ],
            }
        )


# -- validation ------------------------------------------------------------------------


class _Reader:
    """Checks fields of one file, raising `FleetFileError` with the file and field named."""

    def __init__(self, path: str, folder: str | None = None, trace_anywhere: bool = False):
        self.path = path
        # Where relative paths (failure_trace) are read from: the file's folder (the working
        # directory for text without a file), or the one `override` keeps from the file.
        if folder is None:
            folder = str(Path(path).parent) if path != "<string>" else str(Path.cwd())
        self.folder = folder
        self.trace_anywhere = trace_anywhere  # failure_trace at any path: the user gave it, not a file
        self.unit_fields = []  # time, volume, bandwidth or rate fields given as strings with units
        self.plain_fields = []  # time, volume or bandwidth fields given as plain numbers other than 0
        # A field the file gives under another key (gpus for size, [storage] for throughput, ...):
        # the internal name -> (the file's key, how it becomes that field, or None for a twin).
        self.sources: dict[str, tuple[str, str | None]] = {}
        self.units = False  # a file with units: its fields run in s, B and B/s

    def source(self, field: str, key: str, how: str | None = None) -> None:
        """Records that ``field`` comes from the file's ``key`` (``how``: the formula)."""
        if key != field:
            self.sources[field] = (key, how)

    def fail(self, field: str, message: str):
        raise FleetFileError(f"fleet file {self.path}: {field}: {message}")

    def keys(self, table, field: str, allowed: tuple, required: tuple = ()):
        where = f"{field}." if field else ""
        if not isinstance(table, dict):
            self.fail(field, f"must be a table, got {_show(table)}")
        for key in table:
            if key not in allowed:
                near = difflib.get_close_matches(str(key), allowed, n=1)
                hint = f"did you mean {near[0]!r}? " if near else ""
                self.fail(f"{where}{key}", f"unknown key ({hint}allowed: {', '.join(allowed)})")
        for key in required:
            if key not in table:
                self.fail(f"{where}{key}", "missing (required)")

    def number(self, value, field: str, *, low: float = 0.0, strict: bool = True, high: float = math.inf) -> float:
        rule = f"a finite number {'>' if strict else '>='} {_num(low)}" + (
            f" and <= {_num(high)}" if high < math.inf else ""
        )
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            self.fail(field, f"must be {rule}, got {_show(value)}")
        value = float(value)
        if not math.isfinite(value) or value < low or (strict and value == low) or value > high:
            self.fail(field, f"must be {rule}, got {_show(value)}")
        return value

    def quantity(
        self, value, field: str, kind: str, *, low: float = 0.0, strict: bool = True, high: float = math.inf
    ) -> float:
        """A plain number (in the file's plain units) or a string with units of ``kind``
        (`ckpt_jax._units.KINDS`), converted to the kind's base unit (bytes, seconds, ...)."""
        if not isinstance(value, str):
            value = self.number(value, field, low=low, strict=strict, high=high)
            if value != 0 and kind != "power":
                self.plain_fields.append((field, kind))
            return value
        from ._units import UnitError, to_base

        try:
            converted = to_base(value, kind)
        except UnitError as err:
            self.fail(field, str(err))
        if kind != "power":  # power is its own unit system: watts next to abstract time are fine
            self.unit_fields.append(field)
        bad = converted < low or (strict and converted == low) or converted > high
        if bad:
            rule = f"{'>' if strict else '>='} {_num(low)}" + (f" and <= {_num(high)}" if high < math.inf else "")
            self.fail(field, f"must be {rule}, got {value!r} ({_num(converted)} {KINDS[kind].base})")
        return converted

    def integer(self, value, field: str, *, low: int, high: int) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            self.fail(field, f"must be an integer from {low} to {high}, got {_show(value)}")
        return value

    def bounds(self, value, field: str) -> tuple:
        rule = f"must be a pair [lo, hi] with 0 < lo < hi finite, got {_show(value)}"
        if not isinstance(value, list) or len(value) != 2:
            self.fail(field, rule)
        lo = self.quantity(value[0], f"{field}[0]", "duration")
        hi = self.quantity(value[1], f"{field}[1]", "duration")
        if not lo < hi:
            self.fail(field, rule)
        return lo, hi

    def engine_range(self, value, field: str, dtype) -> None:
        """The engine's own range check of a work, volume, rate or time (`check_range`),
        named by the key the file gave it under (`source`)."""
        from ._validate import check_range

        key, how = self.sources.get(field, (field, None))
        try:
            check_range(how or key, np.asarray(value, np.float64), dtype)
        except ValueError as err:
            message = str(err).removeprefix(f"{key} ")
            if self.units:  # the engine runs in s, B and B/s: no time unit to rescale
                unit = _BASE_UNITS.get(field.rsplit(".", 1)[-1].split("[")[0])
                message = message.replace("; rescale the time unit", "")
                if unit is not None:  # the value as the engine holds it
                    message = re.sub(r"; got (\S+)", lambda got: f"{got.group(0)} {unit}", message, count=1)
            self.fail(key, message)

    def boolean(self, value, field: str) -> bool:
        if not isinstance(value, bool):
            self.fail(field, f"must be true or false, got {_show(value)}")
        return value

    def choice(self, value, field: str, choices) -> str:
        if not isinstance(value, str) or value not in choices:
            self.fail(field, f"must be one of {', '.join(map(repr, choices))}, got {_show(value)}")
        return value


def _num(value: float) -> str:
    return str(int(value)) if float(value).is_integer() and abs(value) < 1e16 else repr(value)


def _show(value) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


_TOP = (
    "throughput",
    "cap",
    "power_policy",
    "storage_policy",
    "delay",
    "async_fraction",
    "recover_from",
    "idle_power",
    "fail_while_down",
    "design",
    "groups",
    "outages",
    "restart_stagger",
    # with units (docs/guide/fleet-files.md)
    "time_unit",
    "storage",
    "power_per_gpu",
    "failure_rate_per_gpu",
    # failure laws and launch modes (docs/model.md §1f)
    "failure_shape",
    "failure_trace",
    "launch",
)
_GROUP = (
    "name",
    "count",
    "size",
    "write",
    "mtbf",
    "restart",
    "compute",
    "bounds",
    "write_limit",
    "snapshot",
    "recovery_read",
    "domain",
    "failure_shape",
    "min_interval",
    "overhead",
    # with units: twins of size, write, compute and write_limit
    "gpus",
    "checkpoint",
    "interval",
    "write_limit_per_node",
    "nodes",
)
# The twin keys of a file with units, and the field each gives.
_TWINS = {"gpus": "size", "checkpoint": "write", "interval": "compute"}
# The unit every field runs in within a file with units (size and cap count GPUs).
_BASE_UNITS = {
    **dict.fromkeys(("mtbf", "restart", "compute", "snapshot", "bounds", "delay", "horizon", "times", "overhead"), "s"),
    "restart_stagger": "s",
    **dict.fromkeys(("write", "recovery_read"), "B"),
    **dict.fromkeys(("write_limit", "throughput"), "B/s"),
}
_DESIGN = (
    "bounds",
    "horizon",
    "draws",
    "pairs",
    "steps",
    "seed",
    "launch",
    "offsets",
    "staggers",
    "max_written",
    "max_power_steps",
    "budget_bound",
)
_STORAGE = ("peak", "saturates_at", "degradation", "table")
# The fields that only a file with units has: a file with any of them, or any time, volume,
# bandwidth or rate with a unit, takes plain numbers of time, volume and bandwidth for none but 0.
# Power stands apart (a plain cap counts in GPUs), so watts may join a file in abstract units.
_PHYSICAL = ("storage", "failure_rate_per_gpu", "checkpoint", "interval", "write_limit_per_node")
UNITS_HORIZON = 7 * 86400.0  # design.horizon of a file with units: a week, in seconds


def _twin(reader: _Reader, table, field: str, abstract: str, physical: str):
    """The key of the pair given (None: neither); both is an error."""
    if abstract in table and physical in table:
        reader.fail(f"{field}.{physical}", f"give {abstract} or {physical}, not both (they are the same field)")
    return abstract if abstract in table else physical if physical in table else None


def _group(reader: _Reader, table, index: int, failure_rate: float | None, shape: float | None = None) -> Group:
    field = f"groups[{index}]"
    reader.keys(table, field, _GROUP, required=("count",))
    name = table.get("name", f"group {index}")
    if not isinstance(name, str) or not name.strip() or len(name) > 40:
        reader.fail(f"{field}.name", f"must be a non-empty string of at most 40 characters, got {_show(name)}")
    if not name.isprintable():  # `dumps` could not write it back (TOML strings hold no controls)
        reader.fail(
            f"{field}.name", f"must be printable text (no newline, tab or other control character), got {_show(name)}"
        )
    size_key = _twin(reader, table, field, "size", "gpus")
    write_key = _twin(reader, table, field, "write", "checkpoint")
    compute_key = _twin(reader, table, field, "compute", "interval")
    limit_key = _twin(reader, table, field, "write_limit", "write_limit_per_node")
    for key, rule in ((size_key, "size (or gpus)"), (write_key, "write (or checkpoint)")):
        if key is None:
            reader.fail(f"{field}.{rule.split()[0]}", f"missing (required: {rule})")
    size = reader.number(table[size_key], f"{field}.{size_key}")
    for key in (size_key, write_key, compute_key):
        if key in ("gpus", "checkpoint", "interval"):
            reader.source(f"{field}.{_TWINS[key]}", f"{field}.{key}")
    if "mtbf" in table:
        mtbf = reader.quantity(table["mtbf"], f"{field}.mtbf", "duration")
    elif failure_rate is None:
        reader.fail(f"{field}.mtbf", "missing (required, or a top-level failure_rate_per_gpu with gpus)")
    elif size_key != "gpus":
        reader.fail(f"{field}.gpus", "missing: failure_rate_per_gpu scales with each group's gpus (or give mtbf)")
    else:
        mtbf = 1.0 / failure_rate / size  # the group fails when any of its GPUs does
        how = f"{field}.mtbf = 1 / (failure_rate_per_gpu × {field}.gpus)"
        if not math.isfinite(mtbf):
            reader.fail("failure_rate_per_gpu", f"{how} = {mtbf!r} is not finite")
        reader.source(f"{field}.mtbf", "failure_rate_per_gpu", how)
    write_limit = None
    if "nodes" in table and limit_key != "write_limit_per_node":
        reader.fail(f"{field}.nodes", "only counts with write_limit_per_node")
    if limit_key == "write_limit":
        write_limit = reader.quantity(table["write_limit"], f"{field}.write_limit", "bandwidth")
    elif limit_key is not None:
        if "nodes" not in table:
            reader.fail(f"{field}.nodes", "missing: write_limit_per_node needs the job's node count")
        per_node = reader.quantity(table[limit_key], f"{field}.{limit_key}", "bandwidth")
        write_limit = per_node * reader.integer(table["nodes"], f"{field}.nodes", low=1, high=10**9)
        how = f"{field}.write_limit = write_limit_per_node × nodes"
        reader.source(f"{field}.write_limit", f"{field}.write_limit_per_node", how)
    snapshot = table.get("snapshot")
    recovery_read = table.get("recovery_read")
    overhead = table.get("overhead")
    domain = table.get("domain")
    if domain is not None:
        _domain_name(reader, domain, f"{field}.domain")
    return Group(
        name=name,
        count=reader.integer(table["count"], f"{field}.count", low=1, high=COUNT_MAX),
        size=size,
        write=reader.quantity(table[write_key], f"{field}.{write_key}", "size"),
        mtbf=mtbf,
        restart=reader.quantity(table.get("restart", 0.0), f"{field}.restart", "duration", strict=False),
        compute=None
        if compute_key is None
        else reader.quantity(table[compute_key], f"{field}.{compute_key}", "duration"),
        bounds=None if "bounds" not in table else reader.bounds(table["bounds"], f"{field}.bounds"),
        write_limit=write_limit,
        snapshot=None if snapshot is None else reader.quantity(snapshot, f"{field}.snapshot", "duration", strict=False),
        recovery_read=None
        if recovery_read is None
        else reader.quantity(recovery_read, f"{field}.recovery_read", "size", strict=False),
        domain=domain,
        failure_shape=shape
        if "failure_shape" not in table
        else reader.number(table["failure_shape"], f"{field}.failure_shape", low=0.1, strict=False, high=100.0),
        min_interval=None
        if "min_interval" not in table
        else reader.quantity(table["min_interval"], f"{field}.min_interval", "duration"),
        overhead=None if overhead is None else reader.quantity(overhead, f"{field}.overhead", "duration", strict=False),
    )


def _domain_name(reader: _Reader, value, field: str) -> str:
    """A failure domain's name: a non-empty printable string of at most 40 characters."""
    if not isinstance(value, str) or not value.strip() or len(value) > 40 or not value.isprintable():
        reader.fail(
            field,
            f'must be a failure domain\'s name, a non-empty printable string such as "rack-a", got {_show(value)}',
        )
    return value


_OUTAGE = ("domain", "mtbf", "times")


def _outages(reader: _Reader, tables, groups: tuple) -> tuple:
    """``[[outages]]`` (docs/model.md §1f): per table a domain some group names (default
    "cluster"), at most one table per domain, and ``mtbf`` or ``times``, the same kind in all."""
    if not isinstance(tables, list):
        reader.fail("outages", f"must be an array of tables ([[outages]]), got {_show(tables)}")
    names = {DEFAULT_DOMAIN if group.domain is None else group.domain for group in groups}
    outages, seen = [], {}
    for i, table in enumerate(tables):
        field = f"outages[{i}]"
        reader.keys(table, field, _OUTAGE)
        domain = _domain_name(reader, table.get("domain", DEFAULT_DOMAIN), f"{field}.domain")
        if domain not in names:
            reader.fail(
                f"{field}.domain",
                f"{domain!r} is no group's domain (the groups' domains: {', '.join(map(repr, sorted(names)))})",
            )
        if domain in seen:
            reader.fail(f"{field}.domain", f"{domain!r} already has outages[{seen[domain]}]: one table per domain")
        seen[domain] = i
        if ("mtbf" in table) == ("times" in table):
            reader.fail(f"{field}.mtbf", "give mtbf (drawn outages) or times (replayed instants), one of them")
        if i and ("mtbf" in table) != (outages[0].mtbf is not None):
            reader.fail(
                f"{field}.{'mtbf' if 'mtbf' in table else 'times'}",
                "outages[0] has "
                + ("mtbf" if outages[0].mtbf is not None else "times")
                + ": every outage table is drawn (mtbf) or every one replayed (times)",
            )
        if "mtbf" in table:
            outages.append(Outage(domain, mtbf=reader.quantity(table["mtbf"], f"{field}.mtbf", "duration")))
            continue
        times = table["times"]
        if not isinstance(times, list) or not times:
            reader.fail(f"{field}.times", f"must be a non-empty list of instants > 0, got {_show(times)}")
        values = tuple(reader.quantity(t, f"{field}.times[{j}]", "duration") for j, t in enumerate(times))
        if any(later <= earlier for earlier, later in zip(values, values[1:])):
            reader.fail(f"{field}.times", "must be strictly increasing")
        outages.append(Outage(domain, times=values))
    return tuple(outages)


def _storage(reader: _Reader, table, n_jobs: int) -> tuple:
    """``[storage]``: f(1..N) in bytes/s, from the saturating curve or a table."""
    reader.keys(table, "storage", _STORAGE)
    if "table" in table:
        for key in ("peak", "saturates_at", "degradation"):
            if key in table:
                reader.fail(f"storage.{key}", "give a table or the curve's peak (saturates_at, degradation), not both")
        values = table["table"]
        if not isinstance(values, list) or not 1 <= len(values) <= n_jobs:
            reader.fail(
                "storage.table",
                f"must be a list of 1 to N = {n_jobs} bandwidths f(1), f(2), ..., got {_show(values)}",
            )
        rates = [reader.quantity(v, f"storage.table[{i}]", "bandwidth") for i, v in enumerate(values)]
        for n in range(1, n_jobs + 1):
            entry = min(n, len(rates)) - 1
            reader.source(f"throughput[{n - 1}]", f"storage.table[{entry}]", f"f({n}) = storage.table[{entry}]")
        return tuple(rates + rates[-1:] * (n_jobs - len(rates)))  # the last one holds beyond the table
    if "peak" not in table:
        reader.fail("storage.peak", "missing (required: the aggregate bandwidth peak, or a table)")
    peak = reader.quantity(table["peak"], "storage.peak", "bandwidth")
    saturates_at = reader.integer(table.get("saturates_at", 1), "storage.saturates_at", low=1, high=COUNT_MAX)
    degradation = reader.number(table.get("degradation", 0.0), "storage.degradation", strict=False)
    for n in range(1, n_jobs + 1):  # each f(n), named by the key that drives it out of range
        if n > saturates_at and degradation > 0:
            how = f"f({n}) = storage.peak / (1 + storage.degradation × ({n} - storage.saturates_at))"
            reader.source(f"throughput[{n - 1}]", "storage.degradation", how)
        else:
            how = f"f({n}) = storage.peak" + ("" if n >= saturates_at else f" × {n} / storage.saturates_at")
            reader.source(f"throughput[{n - 1}]", "storage.peak", how)
    from ._policies import storage_curve

    return tuple(storage_curve(n, peak, saturates_at, degradation) for n in range(1, n_jobs + 1))


def _design(reader: _Reader, table) -> DesignSettings:
    reader.keys(table, "design", _DESIGN)
    bounds = None if "bounds" not in table else reader.bounds(table["bounds"], "design.bounds")
    from ._design_inputs import BUDGET_BOUNDS
    from .design import LAUNCHES

    get = lambda key: table.get(key, DESIGN_DEFAULTS[key])  # noqa: E731
    # The default is plain (abstract units); a file with units has its own (`UNITS_HORIZON`).
    horizon = DESIGN_DEFAULTS["horizon"]
    if "horizon" in table:
        horizon = reader.quantity(table["horizon"], "design.horizon", "duration")
    return DesignSettings(
        bounds=bounds,
        horizon=horizon,
        draws=reader.integer(get("draws"), "design.draws", low=2, high=100_000),
        pairs=reader.integer(get("pairs"), "design.pairs", low=1, high=1_000),
        steps=reader.integer(get("steps"), "design.steps", low=1, high=100_000),
        seed=reader.integer(get("seed"), "design.seed", low=0, high=SEED_MAX),
        launch=reader.choice(get("launch"), "design.launch", LAUNCHES),
        offsets=reader.boolean(get("offsets"), "design.offsets"),
        staggers=reader.boolean(get("staggers"), "design.staggers"),
        # A volume over H (plain numbers) or a rate ("500 TB/day", in B/s): budgets, §1g.
        max_written=None
        if "max_written" not in table
        else reader.quantity(table["max_written"], "design.max_written", "bandwidth"),
        max_power_steps=None
        if "max_power_steps" not in table
        else reader.number(table["max_power_steps"], "design.max_power_steps", strict=False),
        budget_bound=reader.choice(get("budget_bound"), "design.budget_bound", BUDGET_BOUNDS),
    )


def _parse(data: dict, path: str, reader: _Reader | None = None) -> FleetSpec:
    from .model import POWER_POLICIES, STORAGE_POLICIES

    reader = _Reader(path) if reader is None else reader
    reader.keys(data, "", _TOP, required=("groups",))
    failure_rate = data.get("failure_rate_per_gpu")
    if failure_rate is not None:
        failure_rate = reader.quantity(failure_rate, "failure_rate_per_gpu", "rate")
    power_per_gpu = data.get("power_per_gpu")
    if power_per_gpu is not None:
        power_per_gpu = reader.quantity(power_per_gpu, "power_per_gpu", "power")
    shape = None
    if "failure_shape" in data:
        shape = reader.number(data["failure_shape"], "failure_shape", low=0.1, strict=False, high=100.0)
    groups = _groups(reader, data["groups"], failure_rate, shape)
    n_jobs = sum(group.count for group in groups)
    throughput = _throughput(reader, data, n_jobs)
    cap, idle_power = _power(reader, data, power_per_gpu)
    delay = reader.quantity(data.get("delay", 0.0), "delay", "duration", strict=False)
    design = _design(reader, data.get("design", {}))
    outages = _outages(reader, data.get("outages", []), groups)
    restart_stagger = reader.quantity(data.get("restart_stagger", 0.0), "restart_stagger", "duration", strict=False)
    launch = _launch(reader, data.get("launch", {}))
    if "launch" in data and "launch" in data.get("design", {}):
        same = {"random": "random", "together": "synchronous"}.get(launch.mode)
        if same != design.launch:
            reader.fail(
                "design.launch",
                f"{design.launch!r} disagrees with the [launch] table's mode = {launch.mode!r}, which design "
                "follows too; drop design.launch",
            )
    if design.staggers and not outages and (launch.mode != "staggered" or design.offsets):
        reader.fail(
            "design.staggers",
            "has nothing to design: the restart stagger acts only with [[outages]], the launch stagger only "
            'with [launch] mode = "staggered" (and design.offsets = false); drop design.staggers or add one',
        )
    trace = None if "failure_trace" not in data else _trace(reader, data["failure_trace"], groups, data)
    time_unit = _units(reader, data)
    if time_unit is not None and "horizon" not in data.get("design", {}):
        design = design._replace(horizon=UNITS_HORIZON)
    spec = FleetSpec(
        path=path,
        groups=groups,
        throughput=throughput,
        cap=cap,
        power_policy=reader.choice(data.get("power_policy", "maxmin"), "power_policy", POWER_POLICIES),
        storage_policy=reader.choice(data.get("storage_policy", "fair"), "storage_policy", STORAGE_POLICIES),
        delay=delay,
        async_fraction=reader.number(data.get("async_fraction", 0.0), "async_fraction", strict=False, high=1.0),
        recover_from=_recover_from(reader, data, groups),
        idle_power=idle_power,
        fail_while_down=reader.boolean(data.get("fail_while_down", False), "fail_while_down"),
        design=design,
        time_unit=time_unit,
        power_per_gpu=power_per_gpu,
        outages=outages,
        restart_stagger=restart_stagger,
        failure_trace=None if trace is None else trace[0],
        failure_times=None if trace is None else trace[1],
        launch=launch,
    )
    _combinations(reader, spec)
    return spec


def _inert(reader: _Reader, spec: FleetSpec) -> None:
    """Warns (`FleetFileWarning`) of keys that act only with ``[[outages]]`` (docs/model.md
    §1f) where none strike them: a likely typo or a forgotten table, never a silent no-op."""
    import warnings

    struck = {outage.domain for outage in spec.outages}
    notes = []
    if spec.restart_stagger > 0 and not spec.outages:
        notes.append(("restart_stagger", "acts only with [[outages]] (the jobs one outage fails); this file has none"))
    for i, group in enumerate(spec.groups):
        if group.domain is not None and group.domain not in struck:
            tables = ", ".join(repr(name) for name in sorted(struck)) or "none"
            notes.append(
                (
                    f"groups[{i}].domain",
                    f"{group.domain!r} is no [[outages]] table's domain (theirs: {tables}): its jobs see no outages",
                )
            )
    for field, message in notes:
        warnings.warn(f"fleet file {reader.path}: {field}: {message}", FleetFileWarning, stacklevel=2)


_LAUNCH = ("mode", "stagger")
LAUNCH_MODES = ("random", "together", "staggered")


def _launch(reader: _Reader, table) -> LaunchSettings:
    """``[launch]``: the mode, and with "staggered" its stagger Δ > 0 (a duration)."""
    reader.keys(table, "launch", _LAUNCH)
    mode = reader.choice(table.get("mode", "random"), "launch.mode", LAUNCH_MODES)
    if mode == "staggered" and "stagger" not in table:
        reader.fail("launch.stagger", 'missing: mode = "staggered" starts job k at k × stagger (e.g. "30 s")')
    if mode != "staggered" and "stagger" in table:
        reader.fail("launch.stagger", f'only counts with mode = "staggered" (mode is {mode!r})')
    if mode != "staggered":
        return LaunchSettings(mode=mode)
    return LaunchSettings(mode=mode, stagger=reader.quantity(table["stagger"], "launch.stagger", "duration"))


_TIME_HEADER = re.compile(r"^time\s*(?:\[\s*([^\]]*?)\s*\])?$")
TRACE_MAX_BYTES = 256 * 2**20  # a failure log of millions of rows; a larger file is no log


def _trace_path(reader: _Reader, value: str) -> Path:
    """The trace's path: a regular file in the fleet file's folder or below (no absolute path,
    no "..", no link out of it) unless the user gave it (``reader.trace_anywhere``)."""
    base = Path(reader.folder)
    given = Path(value)
    if not reader.trace_anywhere and (given.is_absolute() or ".." in given.parts):
        reader.fail(
            "failure_trace",
            "a fleet file names a log in its own folder or below (no absolute path, no ..): copy the log "
            "next to the fleet file (a path of one's own is taken from the command line, compare --set "
            "failure_trace=PATH, or from load(..., trace_anywhere=True))",
        )
    path = base / given
    try:
        info = os.stat(path)
        resolved = path.resolve(strict=True)
    except OSError as err:
        reader.fail("failure_trace", f"cannot read {path} ({err.strerror or err})")
    if not reader.trace_anywhere and not resolved.is_relative_to(base.resolve()):
        reader.fail("failure_trace", f"{path} links out of the fleet file's folder: copy the log next to it")
    if not stat.S_ISREG(info.st_mode):  # a FIFO would block the read, a device never end it
        reader.fail("failure_trace", f"{path} is not a regular file (a CSV failure log)")
    if info.st_size > TRACE_MAX_BYTES:
        reader.fail("failure_trace", f"{path} has {info.st_size} bytes, over {TRACE_MAX_BYTES}: no failure log")
    return path


def _trace_text(reader: _Reader, path: Path) -> str:
    """The trace's text, opened without blocking and checked again once open (it may have been
    replaced by a FIFO or a device since `_trace_path` looked)."""
    try:
        descriptor = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError as err:
        reader.fail("failure_trace", f"cannot read {path} ({err.strerror or err})")
    with os.fdopen(descriptor, "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            reader.fail("failure_trace", f"{path} is not a regular file (a CSV failure log)")
        try:
            data = handle.read(TRACE_MAX_BYTES + 1)
        except OSError as err:
            reader.fail("failure_trace", f"cannot read {path} ({err.strerror or err})")
    if len(data) > TRACE_MAX_BYTES:
        reader.fail("failure_trace", f"{path} has over {TRACE_MAX_BYTES} bytes: no failure log")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        reader.fail("failure_trace", f"{path} is not UTF-8 text")


def _trace(reader: _Reader, value, groups: tuple, data: dict) -> tuple:
    """``failure_trace``: ``(path as given, per job a tuple of failure instants)`` read from a
    CSV file (relative to the fleet file, in its folder or below: `_trace_path`) with a ``time``
    column, its unit in the header (``time [h]``) or the file's ``time_unit``, and a ``group``
    (a group's name) and/or ``job`` column (the job's index within its group with ``group``,
    else in the whole fleet, jobs listed group by group). Errors name the trace, the row and
    the column, and quote none of the file's content."""
    if not isinstance(value, str) or not value.strip():
        reader.fail("failure_trace", f"must be the path of a CSV file (time,group or time,job), got {_show(value)}")
    path = _trace_path(reader, value)
    try:
        rows = list(csv.reader(_trace_text(reader, path).splitlines()))
    except csv.Error as err:  # a NUL byte, a field over csv's limit
        reader.fail("failure_trace", f"{path} is not a CSV file ({err})")
    rows = [row for row in rows if any(cell.strip() for cell in row)]
    if not rows:
        reader.fail("failure_trace", f"{path} is empty: it needs a header (time,group or time,job) and rows")
    header = [cell.strip() for cell in rows[0]]
    where = lambda row, column: f"{path}, row {row}, column {column!r}"  # noqa: E731
    scale, time_column = _trace_time(reader, path, header, data)
    columns = {name: header.index(name) for name in ("group", "job") if name in header}
    unknown = [i for i, name in enumerate(header) if i != time_column and name not in columns]
    if unknown or not columns:
        reader.fail(
            "failure_trace",
            f"{path}: the columns must be time and group and/or job"
            + (f"; column {unknown[0] + 1} of the header is none of them" if unknown else ""),
        )
    for name in columns:
        if header.count(name) > 1:
            reader.fail("failure_trace", f"{path}: the header has the column {name!r} twice")
    names = {group.name: i for i, group in enumerate(groups)}
    starts = np.concatenate([[0], np.cumsum([group.count for group in groups])]).astype(int)
    per_job: list[set] = [set() for _ in range(int(starts[-1]))]
    for number, row in enumerate(rows[1:], start=2):
        if len(row) != len(header):
            reader.fail("failure_trace", f"{path}, row {number}: {len(row)} values for {len(header)} columns")
        given = row[time_column].strip()
        try:
            time = float(given) * scale if re.fullmatch(r"[0-9.eE+-]+", given) else math.nan
        except ValueError:
            time = math.nan
        if not (math.isfinite(time) and time >= 0):
            reader.fail("failure_trace", f"{where(number, 'time')}: must be a time >= 0 (a number)")
        first, count = 0, len(per_job)
        if "group" in columns:
            name = row[columns["group"]].strip()
            if name not in names:
                reader.fail("failure_trace", f"{where(number, 'group')}: names no group (groups: {', '.join(names)})")
            first, count = int(starts[names[name]]), groups[names[name]].count
        if "job" in columns:
            cell = row[columns["job"]].strip()
            job = int(cell) if re.fullmatch(r"[0-9]{1,18}", cell) else -1
            if not 0 <= job < count:
                reader.fail("failure_trace", f"{where(number, 'job')}: must be a job index from 0 to {count - 1}")
        elif count != 1:
            reader.fail(
                "failure_trace",
                f"{where(number, 'group')}: group {name!r} has {count} jobs; add a job column (the job's index "
                "within its group)",
            )
        else:
            job = 0
        if time in per_job[first + job]:
            reader.fail("failure_trace", f"{path}, row {number}: the job fails at that time twice")
        per_job[first + job].add(time)
    return str(path.resolve()), tuple(tuple(sorted(times)) for times in per_job)


def _trace_time(reader: _Reader, path: Path, header: list, data: dict) -> tuple:
    """``(seconds per unit or 1, index)`` of the trace's time column: ``time [unit]``, or
    ``time`` in the file's ``time_unit`` (plain numbers in a file without units)."""
    from ._units import UnitError, duration_unit

    found = [(i, _TIME_HEADER.match(name)) for i, name in enumerate(header)]
    found = [(i, match) for i, match in found if match is not None]
    if len(found) != 1:
        got = "none" if not found else f"{len(found)}, columns {', '.join(str(i + 1) for i, _ in found)}"
        reader.fail("failure_trace", f"{path}: the header needs one time column (time, or time [h]), got {got}")
    index, match = found[0]
    unit = match.group(1) or (data["time_unit"] if isinstance(data.get("time_unit"), str) else None)
    if unit is None:
        reader.plain_fields.append(("failure_trace", "duration"))
        return 1.0, index
    try:
        scale = duration_unit(unit)
    except UnitError:
        rule = "is not a unit of time such as s, min, h or day (a unit holds no number)"
        reader.fail("failure_trace", f"{path}, column {index + 1}: the time column's unit {rule}")
    reader.unit_fields.append("failure_trace")
    return scale, index


def _groups(reader: _Reader, groups, failure_rate: float | None, shape: float | None = None) -> tuple:
    """``[[groups]]``: each group (`_group`), names unique, snapshots in all or none."""
    if not isinstance(groups, list) or not groups:
        reader.fail("groups", f"must be a non-empty array of tables ([[groups]]), got {_show(groups)}")
    groups = tuple(_group(reader, table, i, failure_rate, shape) for i, table in enumerate(groups))
    seen = {}
    for i, group in enumerate(groups):
        if group.name in seen:
            reader.fail(f"groups[{i}].name", f"must be unique; {group.name!r} is also groups[{seen[group.name]}].name")
        seen[group.name] = i
    two_level = [group.snapshot is not None for group in groups]
    if any(two_level) and not all(two_level):
        i = two_level.index(False)
        reader.fail(
            f"groups[{i}].snapshot",
            f"missing: groups[{two_level.index(True)}] has a snapshot, so every group needs one "
            "(the fleet checkpoints in two levels; snapshot = 0 for a pure background drain)",
        )
    n_jobs = sum(group.count for group in groups)
    if n_jobs > COUNT_MAX:
        reader.fail("groups", f"at most {COUNT_MAX} jobs in all, got {n_jobs}")
    return groups


def _throughput(reader: _Reader, data: dict, n_jobs: int) -> str | tuple:
    """``throughput`` (a preset or f(1..N) in plain numbers) or ``[storage]`` (with units)."""
    from ._throughput import THROUGHPUT_PRESETS

    if ("throughput" in data) == ("storage" in data):
        reader.fail("throughput", "give throughput (plain numbers) or [storage] (with units), one of them")
    throughput = data.get("throughput")
    if throughput is None:
        return _storage(reader, data["storage"], n_jobs)
    reader.plain_fields.append(("throughput", "bandwidth"))
    if not isinstance(throughput, list):
        return reader.choice(throughput, "throughput", sorted(THROUGHPUT_PRESETS))
    if len(throughput) != n_jobs:
        reader.fail(
            "throughput",
            f"a list must give f(1), ..., f(N) for the N = {n_jobs} jobs, got {len(throughput)} values",
        )
    return tuple(reader.number(v, f"throughput[{i}]") for i, v in enumerate(throughput))


def _power(reader: _Reader, data: dict, power_per_gpu: float | None) -> tuple:
    """``cap`` (None: none) and ``idle_power``, in units of one GPU's draw."""
    cap = data.get("cap", "none")
    if isinstance(cap, str) and cap.strip().lower() in ("none", "inf"):
        cap = None
    elif isinstance(cap, str):
        cap = _per_gpu(reader, cap, "cap", power_per_gpu)
    else:
        cap = reader.number(cap, "cap")
    idle_power = data.get("idle_power", 0.0)
    if isinstance(idle_power, str):
        idle_power = _per_gpu(reader, idle_power, "idle_power", power_per_gpu, strict=False)
        if idle_power > 1:
            reader.fail("idle_power", f"must be at most power_per_gpu, got {data['idle_power']!r}")
    else:
        idle_power = reader.number(idle_power, "idle_power", strict=False, high=1.0)
    return cap, idle_power


def _units(reader: _Reader, data: dict) -> str | None:
    """The file's ``time_unit`` where it has units (then no plain time, volume or bandwidth
    but 0), else None. Called once every other field is read."""
    uses_units = (
        bool(reader.unit_fields)
        or any(key in data for key in _PHYSICAL + ("time_unit",))
        or any(key in table for table in data["groups"] for key in _PHYSICAL)
    )
    if not uses_units:
        return None
    if reader.plain_fields and reader.unit_fields == ["failure_trace"] and not set(data) & {*_PHYSICAL, "time_unit"}:
        reader.fail(
            "failure_trace",
            "its time column has a unit but the fleet file has plain numbers; drop the unit (time) or give "
            "the fleet file units (docs/guide/fleet-files.md)",
        )
    if reader.plain_fields:
        field, kind = reader.plain_fields[0]
        hint = "use [storage] with bandwidths" if field == "throughput" else f'such as "{KINDS[kind].example}"'
        reader.fail(field, f"a plain number in a file with units; give a {kind} with its unit, {hint}")
    return _time_unit(reader, data.get("time_unit", "h"))


def _recover_from(reader: _Reader, data: dict, groups: tuple) -> str:
    from .model import RECOVERY_SOURCES

    recover_from = reader.choice(data.get("recover_from", "storage"), "recover_from", RECOVERY_SOURCES)
    if recover_from != "storage" and groups[0].snapshot is None:
        reader.fail(
            "recover_from",
            f"{recover_from!r} needs snapshots (groups[].snapshot): without them a failure recovers from storage",
        )
    return recover_from


def _combinations(reader: _Reader, spec: FleetSpec) -> None:
    """Fields that each hold but cannot run together: refused here, naming the file and the
    fields, rather than by `cj.Fleet` once the run starts (`ckpt_jax.model.check_queue_policy`)."""
    from .model import QUEUE_POLICIES

    weibull = [i for i, group in enumerate(spec.groups) if group.failure_shape not in (None, 1.0)]
    if spec.outages and weibull:
        reader.fail(
            f"groups[{weibull[0]}].failure_shape",
            f"{spec.groups[weibull[0]].failure_shape!r} (Weibull failures) with [[outages]] is not supported yet "
            "(docs/model.md §1f): an outage's restart would restart the Weibull clock; use 1 or drop the outages",
        )
    if spec.has_snapshots and spec.async_fraction > 0:
        reader.fail(
            "async_fraction",
            f"must be 0 with snapshots (got {_show(spec.async_fraction)}): a two-level checkpoint computes at "
            "full speed while its drain runs (docs/model.md §1d)",
        )
    shaped = [i for i, group in enumerate(spec.groups) if group.failure_shape not in (None, 1.0)]
    if shaped and spec.failure_trace is not None:
        reader.fail(
            f"groups[{shaped[0]}].failure_shape",
            "must be 1 (or absent) with failure_trace: logged failures are replayed as listed and follow no law",
        )
    if spec.storage_policy not in QUEUE_POLICIES:
        return
    reading = [i for i, group in enumerate(spec.groups) if (group.recovery_read or 0.0) > 0]
    overheads = [i for i, group in enumerate(spec.groups) if (group.overhead or 0.0) > 0]
    conflicts = (
        ("groups[0].snapshot", spec.has_snapshots, "two-level checkpoints (snapshot)", "drop the snapshots"),
        ("async_fraction", spec.async_fraction > 0, "asynchronous writes (async_fraction > 0)", "set it to 0"),
        ("delay", spec.delay > 0, "a delayed controller (delay > 0)", "set it to 0"),
        (
            f"groups[{reading[0] if reading else 0}].recovery_read",
            bool(reading),
            "recovery reads (recovery_read > 0)",
            "drop it",
        ),
        ("fail_while_down", spec.fail_while_down, "failures while down (fail_while_down = true)", "set it to false"),
        ("outages[0]", bool(spec.outages), "common-cause outages ([[outages]])", "drop them"),
        (
            f"groups[{overheads[0] if overheads else 0}].overhead",
            bool(overheads),
            "a fixed checkpoint overhead (overhead > 0)",
            "drop it",
        ),
    )
    for field, present, what, fix in conflicts:
        if present:
            reader.fail(
                "storage_policy",
                f"{spec.storage_policy!r} (docs/model.md §1e) does not serve {what} yet, and {field} asks for "
                f"them; use storage_policy 'fcfs', 'fair' or 'weighted', or {fix}",
            )


def _per_gpu(reader: _Reader, value: str, field: str, power_per_gpu: float | None, strict: bool = True) -> float:
    """A power in units of one GPU's draw (the unit of a group's size, and of cap)."""
    power = reader.quantity(value, field, "power", strict=strict)
    if power_per_gpu is None:
        reader.fail(field, f"a power ({value!r}) needs power_per_gpu, the draw of one GPU (the unit of size)")
    return power / power_per_gpu


def _time_unit(reader: _Reader, value) -> str:
    from ._units import UnitError, duration_unit

    if not isinstance(value, str) or not value.isidentifier():
        reader.fail("time_unit", f'must be a unit of time such as "h", "min" or "day", got {_show(value)}')
    try:
        duration_unit(value)
    except UnitError:
        reader.fail("time_unit", f'must be a unit of time such as "h", "min" or "day", got {_show(value)}')
    return value


def _engine_checks(reader: _Reader, spec: FleetSpec, dtype) -> None:
    """Every value against the checks the engine will apply to it in ``dtype``
    (`ckpt_jax._validate.check_range`, `ckpt_jax._validate.check_horizon`, `cj.Fleet`'s
    solo period), so that each refusal names the file and the field; then the design's
    horizon against the event budget (`ckpt_jax._plan.check_events`) at the file's
    intervals. Plain NumPy: nothing is built on a device (the CLI reads the file first)."""
    from ._plan import check_events, least_failure_events
    from ._validate import check_horizon, check_range

    reader.units = spec.time_unit is not None
    for i, group in enumerate(spec.groups):
        for key in ("size", "write", "mtbf", "compute", "write_limit"):
            if getattr(group, key) is not None:
                reader.engine_range(getattr(group, key), f"groups[{i}].{key}", dtype)
        for key in ("restart", "snapshot", "recovery_read", "overhead"):  # 0 is allowed
            if (getattr(group, key) or 0.0) > 0:
                reader.engine_range(getattr(group, key), f"groups[{i}].{key}", dtype)
        for end, value in enumerate(group.bounds or ()):
            reader.engine_range(value, f"groups[{i}].bounds[{end}]", dtype)
    if not isinstance(spec.throughput, str):
        for i, value in enumerate(spec.throughput):
            reader.engine_range(value, f"throughput[{i}]", dtype)
    if spec.cap is not None:
        reader.engine_range(spec.cap, "cap", dtype)
        largest = max(spec.groups, key=lambda group: group.size)
        if spec.cap < largest.size:  # before: loaded, then assess failed far from the cause
            reader.fail(
                "cap",
                f"{spec.cap:g} (in GPUs at full power, or size units) is below the full draw of one "
                f"{largest.name!r} job ({largest.size:g}): that job could never compute at full speed, even "
                "alone; raise the cap or give none",
            )
    if spec.delay > 0:
        reader.engine_range(spec.delay, "delay", dtype)
    if spec.restart_stagger > 0:
        reader.engine_range(spec.restart_stagger, "restart_stagger", dtype)
    if spec.launch.mode == "staggered":
        _launch_stagger_range(reader, spec, dtype)
    for i, outage in enumerate(spec.outages):
        if outage.mtbf is not None:
            reader.engine_range(outage.mtbf, f"outages[{i}].mtbf", dtype)
        for j, time in enumerate(outage.times or ()):
            reader.engine_range(time, f"outages[{i}].times[{j}]", dtype)
    for end, value in enumerate(spec.design.bounds or ()):
        reader.engine_range(value, f"design.bounds[{end}]", dtype)
    with np.errstate(over="ignore", under="ignore"):
        young = spec.young()
    for i, group in enumerate(spec.groups):
        if group.compute is None:  # the interval simulate runs is Young's, from write, f(1) and mtbf
            try:
                check_range("Young's interval", young[spec.labels == i][0], dtype)
            except ValueError as err:
                twin = "interval" if reader.units else "compute"
                reader.fail(f"groups[{i}]", f"{err}; set groups[{i}].{twin}")
    try:
        check_horizon(spec.design.horizon, (), dtype, name="design.horizon")
    except ValueError as err:
        reader.fail("design.horizon", str(err).removeprefix("design.horizon "))
    with np.errstate(over="ignore"):
        period = spec.period()
    rule = "s + max(T, d / min(b, f(1)))" if spec.has_snapshots else "T + d / f(1)"
    rule = f"o + {rule}" if spec.has_overheads else rule
    for i in range(len(spec.groups)):  # as cj.Fleet checks it
        reader.engine_range(period[spec.labels == i][0], f"groups[{i}] (its solo period {rule})", dtype)
    # The design's runs: events to the horizon, at least those of the failures (every group fails).
    horizon, mtbf, restart = spec.design.horizon, spec.failure_mtbf(), spec.per_job("restart")
    least = least_failure_events(horizon, mtbf, restart, np.ones(spec.n_jobs, bool))
    try:
        check_events("design.horizon", horizon, least, spec.events(), spec.n_jobs, True)
    except ValueError as err:
        reader.fail("design.horizon", str(err).removeprefix("design.horizon = "))


# A launch stagger's head start (N − 1)·Δ in solo cycles of a job, at most: beyond, the launch
# position (the head start mod the cycle, `cj.design.staggered_positions`) keeps fewer than 10
# of float64's 16 digits.
HEAD_START_CYCLES = 1e6


def _launch_stagger_range(reader: _Reader, spec: FleetSpec, dtype) -> None:
    """``[launch] stagger``: in the engine's range, and the first job's head start (N − 1)·Δ at
    most `HEAD_START_CYCLES` solo cycles of the shortest one."""
    stagger = spec.launch.stagger
    reader.engine_range(stagger, "launch.stagger", dtype)
    with np.errstate(over="ignore"):
        cycle = float(np.min(spec.period()))
    head_start = (spec.n_jobs - 1) * stagger
    largest = HEAD_START_CYCLES * cycle / max(spec.n_jobs - 1, 1)
    if head_start > HEAD_START_CYCLES * cycle:
        unit = " s" if reader.units else ""
        reader.fail(
            "launch.stagger",
            f"{_num(stagger)}{unit} puts the first of the {spec.n_jobs} jobs {head_start:.3g}{unit} ahead of the "
            f"last, over {HEAD_START_CYCLES:.0e} solo cycles of the shortest ({cycle:.3g}{unit}): a stagger is the "
            f"time between two jobs' launches; give one of at most {largest:.3g}{unit}",
        )


def _keys_first(reader: _Reader, data: dict) -> None:
    """The names of every table's keys, checked first (`check_keys`): plain Python, so a
    misspelt key is reported before anything imports JAX. The values are `_parse`'s."""
    reader.keys(data, "", _TOP, required=("groups",))
    tables = [("storage", _STORAGE), ("design", _DESIGN), ("launch", _LAUNCH)]
    for name, allowed in tables:
        if isinstance(data.get(name), dict):
            reader.keys(data[name], name, allowed)
    for name, allowed in (("groups", _GROUP), ("outages", _OUTAGE)):
        for i, table in enumerate(data[name] if isinstance(data.get(name), list) else []):
            if isinstance(table, dict):
                reader.keys(table, f"{name}[{i}]", allowed)


def _read_toml(text: str, path: str) -> dict:
    try:
        return tomllib.loads(text.removeprefix("\ufeff"))  # a UTF-8 byte-order mark is no TOML
    except tomllib.TOMLDecodeError as err:
        raise FleetFileError(f"fleet file {path}: not valid TOML: {err}") from None
    except RecursionError:  # tomllib parses nested arrays and tables recursively
        raise FleetFileError(f"fleet file {path}: not a fleet file: arrays or tables nested too deeply") from None


def _read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except OSError as err:
        raise FleetFileError(f"fleet file {path}: cannot read it ({err.strerror or err})") from None
    except UnicodeDecodeError:
        raise FleetFileError(f"fleet file {path}: not UTF-8 text") from None


def check_keys(path) -> None:
    """Reads a fleet file and checks that it is TOML and names only keys a fleet file has,
    without importing JAX: the command line calls it first, so that a misspelt key is
    reported at once (`load` checks the rest).

    Raises:
      FleetFileError: as `load`, for the file's reading, its TOML and its keys' names.
    """
    path = Path(path)
    _keys_first(_Reader(str(path)), _read_toml(_read_text(path), str(path)))


def loads(
    text: str, path: str = "<string>", *, dtype: DTypeLike = np.float64, trace_anywhere: bool = False
) -> FleetSpec:
    """Parses fleet-file text (``path`` names it in messages, and its folder holds the
    ``failure_trace``; the working folder for ``"<string>"``); every value is checked against
    the engine's ranges in ``dtype`` (float64 or float32: the dtype it will run in).
    ``trace_anywhere``: read a ``failure_trace`` at any path (absolute, or out of the file's
    folder), for a path the user gave rather than one a file names (`load`)."""
    data = _read_toml(text, path)
    _keys_first(_Reader(path), data)  # before the dtype's check imports JAX
    from ._validate import check_dtype

    dtype = check_dtype(dtype)
    return _from_data(data, path, dtype, trace_anywhere=trace_anywhere)


def _from_data(
    data: dict, path: str, dtype, folder: str | None = None, trace_anywhere: bool = False, warn: bool = True
) -> FleetSpec:
    """A spec from TOML data: parsed (`_parse`), checked in ``dtype`` (`_engine_checks`), the
    data kept (`FleetSpec.source`) for `override`; ``folder``: where its relative paths are
    read from (None: ``path``'s folder)."""
    source = copy.deepcopy(data)
    reader = _Reader(path, folder, trace_anywhere)
    try:
        spec = _parse(data, path, reader)
    except RecursionError:  # a deeply nested value where a number belongs, shown in the message
        raise FleetFileError(f"fleet file {path}: not a fleet file: arrays nested too deeply") from None
    _engine_checks(reader, spec, dtype)
    if warn:  # a usable file: then what in it changes nothing
        _inert(reader, spec)
    return dataclasses.replace(spec, source=source, dtype=np.dtype(dtype).name, folder=reader.folder)


def load(path, *, dtype: DTypeLike = np.float64, trace_anywhere: bool = False) -> FleetSpec:
    """Reads and validates a fleet file (``dtype``: as `loads`). Its ``failure_trace`` is read
    only from a regular file in the fleet file's folder or below (no absolute path, no "..",
    no link out of it), unless ``trace_anywhere`` (a path the user gave, not the file).

    Raises:
      FleetFileError: the file cannot be read, is not TOML, or a field is bad (the message
        names the file, the field and its allowed range).
    """
    path = Path(path)
    return loads(_read_text(path), str(path), dtype=dtype, trace_anywhere=trace_anywhere)


# -- what-if overrides -----------------------------------------------------------------

# Keys that give the same field as another (and ``nodes``, which only counts with
# write_limit_per_node): setting one drops the others, as a file gives one of them.
_OVERRIDE_DROPS = {
    "size": ("gpus",),
    "gpus": ("size",),
    "write": ("checkpoint",),
    "checkpoint": ("write",),
    "compute": ("interval",),
    "interval": ("compute",),
    "write_limit": ("write_limit_per_node", "nodes"),
    "write_limit_per_node": ("write_limit",),
}
_GROUP_KEY = re.compile(r"^groups\[(?P<which>[^\]]*)\]\.(?P<field>[A-Za-z_]+)$")
OVERRIDE_SYNTAX = (
    'KEY is a key of the fleet file: a top-level key ("cap"), a table\'s ("storage.peak", '
    '"design.horizon"), a group\'s ("groups[2].restart", "groups[\\"8B fine-tune\\"].snapshot", '
    '"groups[*].interval" for every group), a group key alone ("restart": every group), or an '
    'outage table\'s ("outages[0].mtbf")'
)


def parse_override(text: str) -> tuple:
    """``KEY=VALUE`` (as ``ckpt-jax compare --set`` takes it) as ``(key, value)``: the value
    read as a TOML value (``4``, ``"4 TB/s"``, ``[1, 2]``, ``true``) where it is one, else as
    the text itself (``4 TB/s``, ``2 min``, ``none``)."""
    if not isinstance(text, str) or "=" not in text:
        raise FleetFileError(f"override {text!r}: must be KEY=VALUE ({OVERRIDE_SYNTAX})")
    key, _, raw = text.partition("=")
    key, raw = key.strip(), raw.strip()
    if not key or not raw:
        raise FleetFileError(f"override {text!r}: must be KEY=VALUE with both given ({OVERRIDE_SYNTAX})")
    try:
        value = tomllib.loads(f"value = {raw}")["value"]
    except tomllib.TOMLDecodeError:
        if raw[0] in "\"'[" or raw[-1] in "\"']":  # meant as TOML, and not TOML: not read as text
            raise FleetFileError(
                f"override {text!r}: the value {raw} is not a TOML value (a quote or a bracket left open?)"
            ) from None
        value = raw
    return key, value


def override(spec: FleetSpec, overrides: dict, *, name: str | None = None) -> FleetSpec:
    """``spec`` with ``overrides`` applied to its file's own data (`FleetSpec.source`) and
    parsed and checked again exactly as the file (`loads`), so a bad value raises the file's
    own `FleetFileError` naming the key.

    Args:
      spec: a spec read by `load` or `loads`.
      overrides: key -> value, each key as the file spells it (`OVERRIDE_SYNTAX`): ``cap``,
        ``storage.peak``, ``groups[2].restart``, ``groups["8B fine-tune"].snapshot``,
        ``groups[*].interval`` or ``restart`` (every group); each value as the file would
        hold it (``"4 TB/s"``, ``12.5``). A group key replaces its twin (``interval`` drops
        ``compute``, ``write_limit`` drops ``write_limit_per_node`` and ``nodes``).
      name: the scenario's name, shown in messages.

    Returns:
      The new `FleetSpec` (its ``path`` names the file and the scenario).
    """
    if not isinstance(spec, FleetSpec) or spec.source is None:
        raise ValueError("spec must be a FleetSpec read by ckpt_jax.fleetfile.load or loads (it keeps the file's data)")
    if not isinstance(overrides, dict):
        raise ValueError(f"overrides must be a dict of key -> value, got {type(overrides).__name__}")
    where = spec.path if name is None else f"{spec.path} (scenario {name!r})"
    data = copy.deepcopy(spec.source)
    targets = {}  # what each override sets -> the first override that set it
    for key, value in overrides.items():
        for target in _apply_override(data, key, value, where):
            for earlier, first in targets.items():
                if target == earlier or target.startswith(f"{earlier}:") or earlier.startswith(f"{target}:"):
                    _override_error(
                        where,
                        key,
                        f"sets {_target_text(target, earlier)}, which override {first} sets too (twins such as "
                        "interval and compute are one field; a group key alone or groups[*] sets every group's): "
                        "two values for one field, the later would win unseen; give it once",
                    )
            targets.setdefault(target, key)
    # The file's own trace was read once already; a trace the overrides name is the user's. A
    # relative path is read from the file's folder, whatever the scenario's label.
    anywhere = spec.failure_trace is not None or "failure_trace" in overrides
    return _from_data(data, where, np.dtype(spec.dtype), spec.folder, trace_anywhere=anywhere, warn=False)


# A group key and the field it sets (twins set one field; write_limit_per_node and nodes each
# set a part of the write limit, which write_limit sets whole).
_OVERRIDE_FIELDS = {
    "gpus": "size",
    "checkpoint": "write",
    "interval": "compute",
    "write_limit_per_node": "write_limit:per_node",
    "nodes": "write_limit:nodes",
}
# What a table key sets (its part of a field that the whole table, or another key, sets).
_TABLE_FIELDS = {
    "storage.table": "throughput",
    "storage.peak": "throughput:peak",
    "storage.saturates_at": "throughput:saturates_at",
    "storage.degradation": "throughput:degradation",
}


def _target_text(target: str, earlier: str) -> str:
    """A field `override` sets, as a message names it ("groups[0].compute")."""
    shorter = min(target, earlier, key=len)
    return shorter.partition(":")[0]


def _apply_override(data: dict, key, value, where: str) -> list:
    """Sets ``key`` (`override`) to ``value`` in the file's ``data``; returns what it set, one
    name per field (``groups[0].compute`` for ``groups[*].interval`` in a one-group file;
    ``X:part`` for a part of field X), for `override` to refuse two values of one field."""
    fail = lambda message: _override_error(where, key, message)  # noqa: E731
    if not isinstance(key, str) or not key:
        fail(f"not a key ({OVERRIDE_SYNTAX})")
    groups = data.get("groups")
    groups = groups if isinstance(groups, list) else []
    match = _GROUP_KEY.match(key)
    if match is not None or key in _GROUP and key not in _TOP:
        field = key if match is None else match["field"]
        chosen = range(len(groups)) if match is None else _chosen_groups(groups, match["which"].strip(), fail)
        if field not in _GROUP:
            near = difflib.get_close_matches(field, _GROUP, n=1)
            hint = f"did you mean {near[0]!r}? " if near else ""
            fail(f"unknown group key {field!r} ({hint}allowed: {', '.join(_GROUP)})")
        if field == "name":
            fail("a group's name cannot change in a scenario (the comparison is per group)")
        for index in chosen:
            table = groups[index]
            for twin in _OVERRIDE_DROPS.get(field, ()):
                table.pop(twin, None)
            table[field] = copy.deepcopy(value)
        return [f"groups[{index}].{_OVERRIDE_FIELDS.get(field, field)}" for index in chosen]
    outage = re.fullmatch(r"outages\[(\d+)\]\.(\w+)", key)
    if outage is not None:  # an [[outages]] table's key (docs/model.md §1f)
        _override_outage(data, int(outage[1]), outage[2], value, fail)
        part = "times" if outage[2] in ("mtbf", "times") else outage[2]  # mtbf replaces times: one field
        return [f"outages:{outage[1]}.{part}"]
    table_name, dot, field = key.partition(".")
    if key == "groups":
        fail("a scenario sets a group's keys (groups[i].KEY, groups[*].KEY), not the groups themselves")
    if not dot:
        if key not in _TOP:
            near = difflib.get_close_matches(key, _TOP + _GROUP, n=1)
            fail(f"unknown key ({f'did you mean {near[0]!r}? ' if near else ''}{OVERRIDE_SYNTAX})")
        data[key] = copy.deepcopy(value)
        return ["throughput" if key in ("storage", "throughput") else key]
    if table_name not in ("storage", "design", "launch") or "." in field or not field:
        fail(f"unknown key ({OVERRIDE_SYNTAX})")
    table = data.setdefault(table_name, {})
    if not isinstance(table, dict):
        fail(f"the file's {table_name} is not a table")
    if table_name == "storage" and field in ("peak", "saturates_at", "degradation"):
        table.pop("table", None)  # the curve replaces a table, and the reverse
    elif table_name == "storage" and field == "table":
        for curve in ("peak", "saturates_at", "degradation"):
            table.pop(curve, None)
    elif table_name == "launch" and field == "mode" and value != "staggered":
        table.pop("stagger", None)  # a stagger counts only with mode = "staggered"
    table[field] = copy.deepcopy(value)
    return [_TABLE_FIELDS.get(key, f"{table_name}:{field}")]


def _override_outage(data: dict, index: int, field: str, value, fail) -> None:
    """Sets ``outages[index].field`` in the file's ``data``: ``mtbf`` replaces ``times`` and the
    reverse (a table draws or replays)."""
    tables = data.get("outages")
    tables = tables if isinstance(tables, list) else []
    if not 0 <= index < len(tables) or not isinstance(tables[index], dict):
        fail(f"no outages[{index}]: the file has {len(tables)} [[outages]] tables")
    if field not in _OUTAGE:
        fail(f"unknown outages key {field!r} (allowed: {', '.join(_OUTAGE)})")
    table = tables[index]
    if field in ("mtbf", "times"):
        table.pop("times" if field == "mtbf" else "mtbf", None)
    table[field] = copy.deepcopy(value)


def _chosen_groups(groups: list, which: str, fail) -> range | list:
    """The indices of ``groups[which]``: ``*`` (every group), an index, or a name (quoted or not)."""
    if which == "*":
        return range(len(groups))
    if re.fullmatch(r"-?\d+", which):
        index = int(which)
        if not 0 <= index < len(groups):
            fail(f"no group {index}: the file has groups[0] to groups[{len(groups) - 1}]")
        return [index]
    if len(which) >= 2 and which[0] == which[-1] and which[0] in "\"'":
        which = which[1:-1]
    names = [table.get("name", f"group {i}") if isinstance(table, dict) else None for i, table in enumerate(groups)]
    if which not in names:
        near = difflib.get_close_matches(which, [n for n in names if isinstance(n, str)], n=1)
        hint = f"did you mean {near[0]!r}? " if near else ""
        fail(f"no group named {which!r} ({hint}groups: {', '.join(repr(n) for n in names)})")
    return [names.index(which)]


def _override_error(where: str, key, message: str):
    raise FleetFileError(f"fleet file {where}: override {key}: {message}")


# -- writing ---------------------------------------------------------------------------


def _toml(value) -> str:
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)
    return str(value)


# The kind of every time, volume and bandwidth field, written with its base unit in a file with units.
_FIELD_KINDS = {
    "delay": "duration",
    "horizon": "duration",
    "bounds": "duration",
    "write": "size",
    "mtbf": "duration",
    "restart": "duration",
    "compute": "duration",
    "write_limit": "bandwidth",
    "snapshot": "duration",
    "recovery_read": "size",
    "overhead": "duration",
    "restart_stagger": "duration",
    "times": "duration",
    "stagger": "duration",
    "min_interval": "duration",
    "max_written": "bandwidth",
}


def dumps(spec: FleetSpec) -> str:
    """TOML text that `loads` reads back as ``spec`` (defaults written out; the path aside;
    a ``failure_trace``, written as its absolute path, with ``trace_anywhere=True``).
    A spec read from a file with units is written with units: its times in s, volumes in B and
    bandwidths in B/s (the throughput as ``[storage].table``), the same numbers."""
    units = spec.time_unit is not None

    def value(key: str, value) -> str:
        if not units or key not in _FIELD_KINDS:
            return _toml(value)
        base = KINDS[_FIELD_KINDS[key]].base
        if isinstance(value, (list, tuple)):
            return "[" + ", ".join(f'"{float(v)!r} {base}"' for v in value) + "]"
        return f'"{float(value)!r} {base}"'

    lines = [] if units else [f"throughput = {_toml(spec.throughput)}"]
    lines += [
        f"cap = {_toml('none' if spec.cap is None else spec.cap)}",
        f"power_policy = {_toml(spec.power_policy)}",
        f"storage_policy = {_toml(spec.storage_policy)}",
        f"delay = {value('delay', spec.delay)}",
        f"async_fraction = {_toml(spec.async_fraction)}",
    ]
    # Written where they differ from the defaults (recover_from always with snapshots), so that
    # a file without them is written as before.
    if spec.has_snapshots or spec.recover_from != "storage":
        lines.append(f"recover_from = {_toml(spec.recover_from)}")
    if spec.idle_power != 0:
        lines.append(f"idle_power = {_toml(spec.idle_power)}")
    if spec.fail_while_down:
        lines.append("fail_while_down = true")
    if spec.restart_stagger != 0:
        lines.append(f"restart_stagger = {value('restart_stagger', spec.restart_stagger)}")
    if spec.failure_trace is not None:
        lines.append(f"failure_trace = {_toml(spec.failure_trace)}")
    if units:
        lines.append(f"time_unit = {_toml(spec.time_unit)}")
    if spec.power_per_gpu is not None:
        lines.append(f'power_per_gpu = "{spec.power_per_gpu!r} W"')
    if units:
        lines += ["", "[storage]", f"table = {value('write_limit', spec.throughput)}"]  # f(1..N) in B/s
    if spec.launch != LaunchSettings():
        lines += ["", "[launch]", f"mode = {_toml(spec.launch.mode)}"]
        if spec.launch.mode == "staggered":
            lines.append(f"stagger = {value('stagger', spec.launch.stagger)}")
    lines += ["", "[design]"]
    for key, item in spec.design._asdict().items():
        if key == "launch" and spec.launch != LaunchSettings():
            continue  # design follows [launch]
        if key == "budget_bound" and item == DESIGN_DEFAULTS["budget_bound"]:
            continue  # written where set, so that a file without budgets is written as before
        if item is not None:
            lines.append(f"{key} = {value(key, item)}")
    for group in spec.groups:
        lines += ["", "[[groups]]"]
        lines += [f"{key} = {value(key, item)}" for key, item in group._asdict().items() if item is not None]
    for outage in spec.outages:
        lines += ["", "[[outages]]"]
        lines += [f"{key} = {value(key, item)}" for key, item in outage._asdict().items() if item is not None]
    return "\n".join(lines) + "\n"
