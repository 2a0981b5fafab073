"""A cluster's checkpoint and failure logs: three CSV files, read, checked and written.

The logs `ckpt_jax.fit` calibrates a fleet file from, and `ckpt-jax simulate --logs` writes:

* ``jobs.csv``: ``job,group,gpus,nodes,first [unit],last [unit]``, one row per job: its name,
  its group, its size and its observation window [first, last];
* ``writes.csv``: ``job,start [unit],end [unit],bytes [unit]``, one row per completed
  checkpoint write;
* ``failures.csv``: ``job,time [unit]`` and optionally ``restart_end [unit]``, ``domain``
  and ``cause``, one row per failure.

A time or a size carries its unit in the header, as a fleet file's ``failure_trace`` does
(``start [s]``, ``bytes [GB]``); units are read with pint (`ckpt_jax._units`). Every problem
is a `LogError` naming the file, the row (the header is row 1) and the column.
"""

from __future__ import annotations

import csv
import dataclasses
import math
import re
from pathlib import Path

import numpy as np

__all__ = ["LogError", "Logs", "read_logs", "write_logs", "LOG_FILES"]

LOG_FILES = ("jobs.csv", "writes.csv", "failures.csv")


class LogError(ValueError):
    """A log that cannot be used; the message names the file, the row and the column."""


@dataclasses.dataclass(frozen=True)
class Logs:
    """The three logs, every time in seconds and every size in bytes.

    Attributes:
      folder: where they were read from.
      time_unit: the unit of ``jobs.csv``'s ``first`` column (what reports speak in).
      jobs, groups: (J,) job names and the group names, in file order of first appearance.
      group: (J,) int each job's group (index into ``groups``).
      gpus, nodes: (J,) each job's size and node count.
      first, last: (J,) each job's observation window.
      write_job: (W,) int each write's job; ``write_start``, ``write_end``, ``write_bytes``:
        (W,) its start, end and volume. Sorted by start (ties by job).
      failure_job, failure_time: (F,) each failure's job and instant, sorted by time.
      restart_end: (F,) each failure's restart end (NaN where not logged), or None without
        the column.
      domain, cause: (F,) strings per failure, or None without the column.
      resolution: the clock's step of the logs in s (the last decimal place of the times of
        ``writes.csv`` and ``failures.csv``: ``12.345`` in seconds is 1 ms), 0 where the times
        carry all their digits.
    """

    folder: str
    time_unit: str
    jobs: tuple
    groups: tuple
    group: np.ndarray
    gpus: np.ndarray
    nodes: np.ndarray
    first: np.ndarray
    last: np.ndarray
    write_job: np.ndarray
    write_start: np.ndarray
    write_end: np.ndarray
    write_bytes: np.ndarray
    failure_job: np.ndarray
    failure_time: np.ndarray
    restart_end: np.ndarray | None = None
    domain: tuple | None = None
    cause: tuple | None = None
    resolution: float = 0.0

    @property
    def n_jobs(self) -> int:
        return len(self.jobs)


_HEADER = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]*)\s*(?:\[\s*([^\]]*?)\s*\])?\s*$")

# The columns of each file: name -> (kind of its unit or None for a plain column, required).
_COLUMNS = {
    "jobs.csv": {
        "job": (None, True),
        "group": (None, True),
        "gpus": (None, True),
        "nodes": (None, True),
        "first": ("duration", True),
        "last": ("duration", True),
    },
    "writes.csv": {
        "job": (None, True),
        "start": ("duration", True),
        "end": ("duration", True),
        "bytes": ("size", True),
    },
    "failures.csv": {
        "job": (None, True),
        "time": ("duration", True),
        "restart_end": ("duration", False),
        "domain": (None, False),
        "cause": (None, False),
    },
}

_EXAMPLE_UNIT = {"duration": "s", "size": "GB"}


def _header(name: str, header: list) -> dict:
    """``column -> (index, base units per logged unit or None, unit text)`` of a file's header."""
    from ._units import UnitError, to_base

    expected = _COLUMNS[name]
    found: dict = {}
    for index, cell in enumerate(header):
        match = _HEADER.match(cell)
        where = f"{name}, row 1, column {index + 1}"
        if match is None:
            raise LogError(f"{where}: {cell.strip()!r} is not a column name (name, or name [unit])")
        column, unit = match.group(1), match.group(2)
        if column not in expected:
            raise LogError(f"{where}: unknown column {column!r}; {name} has {', '.join(expected)}")
        if column in found:
            raise LogError(f"{where}: the column {column!r} is given twice")
        kind = expected[column][0]
        if kind is None and unit is not None:
            raise LogError(f"{where}: the column {column!r} is a plain value and takes no unit, got [{unit}]")
        if kind is not None:
            example = f"{column} [{_EXAMPLE_UNIT[kind]}]"
            if unit is None or not unit:
                raise LogError(f"{where}: the column {column!r} needs its unit in the header, as {example!r}")
            if any(c.isdigit() for c in unit):
                raise LogError(f"{where}: the unit of {column!r} holds a number, got [{unit}]; write {example!r}")
            try:
                scale = to_base(f"1 {unit}", kind)
            except UnitError as err:
                raise LogError(f"{where}: the unit of {column!r} is not a {kind} unit ({err})") from None
            found[column] = (index, scale, unit)
        else:
            found[column] = (index, None, None)
    missing = [column for column, (_, required) in expected.items() if required and column not in found]
    if missing:
        raise LogError(f"{name}, row 1: the header has no column {missing[0]!r} (needed: {_needed(name)})")
    return found


def _needed(name: str) -> str:
    return ",".join(
        column + (f" [{_EXAMPLE_UNIT[kind]}]" if kind else "")
        for column, (kind, required) in _COLUMNS[name].items()
        if required
    )


def _rows(folder: Path, name: str) -> tuple:
    """``(header cells, data rows, row numbers)`` of one file; blank lines are skipped."""
    path = folder / name
    if not path.is_file():
        raise LogError(f"{path}: no such file (the logs are {', '.join(LOG_FILES)})")
    try:
        with open(path, newline="", encoding="utf-8") as handle:
            rows = list(csv.reader(handle))
    except (csv.Error, UnicodeDecodeError) as err:
        raise LogError(f"{name}: not a CSV file of UTF-8 text ({err})") from None
    numbers = [i + 1 for i, row in enumerate(rows) if any(cell.strip() for cell in row)]
    rows = [row for row in rows if any(cell.strip() for cell in row)]
    if not rows:
        raise LogError(f"{name}: empty; it needs a header ({_needed(name)})")
    header = rows[0]
    width = len(header)
    for number, row in zip(numbers[1:], rows[1:]):
        if len(row) != width:
            raise LogError(f"{name}, row {number}: {len(row)} values for {width} columns")
    return header, rows[1:], np.asarray(numbers[1:], np.int64)


def _numbers(name: str, rows: list, numbers: np.ndarray, column: str, spec: tuple, rule: str) -> np.ndarray:
    """A column as float64 in base units (seconds, bytes); a cell that is no finite number is
    an error naming its row."""
    index, scale, _ = spec
    cells = [row[index].strip() for row in rows]
    try:
        values = np.asarray(cells, dtype=np.float64) if cells else np.zeros(0)
    except ValueError:
        values = np.asarray([_float(cell) for cell in cells], np.float64)
    bad = ~np.isfinite(values)
    if bad.any():
        raise LogError(f"{name}, row {numbers[np.argmax(bad)]}, column {column!r}: must be {rule} (a finite number)")
    return values * (1.0 if scale is None else scale)


def _resolution(rows: list, spec: tuple) -> float:
    """The step of a time column's clock in s: one unit of its last decimal place, the
    finest over its cells (0 for a cell in exponent notation or with 15 digits or more)."""
    index, scale, _ = spec
    places = 0
    for row in rows:
        cell = row[index].strip()
        if "e" in cell or "E" in cell:
            return 0.0
        dot = cell.find(".")
        if dot >= 0:
            places = max(places, len(cell) - dot - 1)
    return 0.0 if places >= 15 else 10.0**-places * scale


def _float(cell: str) -> float:
    try:
        return float(cell)
    except ValueError:
        return math.nan


def _fail_at(name: str, numbers: np.ndarray, mask: np.ndarray, column: str, message: str) -> None:
    if np.any(mask):
        raise LogError(f"{name}, row {numbers[np.argmax(mask)]}, column {column!r}: {message}")


def _job_index(name: str, rows: list, numbers: np.ndarray, spec: tuple, index: dict) -> np.ndarray:
    cells = [row[spec[0]].strip() for row in rows]
    jobs = np.asarray([index.get(cell, -1) for cell in cells], np.int64)
    _fail_at(name, numbers, jobs < 0, "job", "names no job of jobs.csv")
    return jobs


def read_logs(folder) -> Logs:
    """Reads and checks ``jobs.csv``, ``writes.csv`` and ``failures.csv`` in ``folder``.

    Raises:
      LogError: a file missing, a column missing or unknown, a unit missing or of the wrong
        kind, an unknown job, a value out of range (end before start, bytes <= 0), writes of
        one job that overlap, a write or a failure outside its job's window [first, last].
    """
    folder = Path(folder)
    # jobs.csv
    header, rows, numbers = _rows(folder, "jobs.csv")
    columns = _header("jobs.csv", header)
    names = [row[columns["job"][0]].strip() for row in rows]
    index: dict = {}
    for number, job in zip(numbers, names):
        if not job:
            raise LogError(f"jobs.csv, row {number}, column 'job': empty; every job needs a name")
        if job in index:
            raise LogError(f"jobs.csv, row {number}, column 'job': the job {job!r} is listed twice")
        index[job] = len(index)
    if not index:
        raise LogError("jobs.csv: no jobs; it needs one row per job")
    group_names = [row[columns["group"][0]].strip() for row in rows]
    empty = np.asarray([not g for g in group_names])
    _fail_at("jobs.csv", numbers, empty, "group", "empty; every job needs a group")
    groups = tuple(dict.fromkeys(group_names))
    group = np.asarray([groups.index(g) for g in group_names], np.int64)
    counts = {}
    for column in ("gpus", "nodes"):
        values = _numbers("jobs.csv", rows, numbers, column, columns[column], "a whole number >= 1")
        _fail_at(
            "jobs.csv", numbers, (values < 1) | (values != np.round(values)), column, "must be a whole number >= 1"
        )
        counts[column] = values
    first = _numbers("jobs.csv", rows, numbers, "first", columns["first"], "a time")
    last = _numbers("jobs.csv", rows, numbers, "last", columns["last"], "a time")
    _fail_at("jobs.csv", numbers, last <= first, "last", "must be after first (the job's observation window)")
    time_unit = columns["first"][2]

    # writes.csv
    header, rows, numbers = _rows(folder, "writes.csv")
    columns = _header("writes.csv", header)
    write_job = _job_index("writes.csv", rows, numbers, columns["job"], index)
    start = _numbers("writes.csv", rows, numbers, "start", columns["start"], "a time")
    end = _numbers("writes.csv", rows, numbers, "end", columns["end"], "a time")
    volume = _numbers("writes.csv", rows, numbers, "bytes", columns["bytes"], "a size")
    _fail_at("writes.csv", numbers, volume <= 0, "bytes", "must be > 0 (the volume the write completed)")
    _fail_at("writes.csv", numbers, end <= start, "end", "must be after start")
    _fail_at("writes.csv", numbers, start < first[write_job], "start", "before its job's first (jobs.csv)")
    _fail_at("writes.csv", numbers, end > last[write_job], "end", "after its job's last (jobs.csv)")
    order = np.lexsort((start, write_job))  # by job, then start: overlaps are neighbours
    same = write_job[order][1:] == write_job[order][:-1]
    overlap = same & (start[order][1:] < end[order][:-1])
    if overlap.any():
        k = int(np.argmax(overlap))
        raise LogError(
            f"writes.csv, row {numbers[order][k + 1]}, column 'start': the job's write starts before its write "
            f"of row {numbers[order][k]} ends (a job writes one checkpoint at a time)"
        )
    order = np.lexsort((write_job, start))
    write_job, start, end, volume = write_job[order], start[order], end[order], volume[order]
    write_rows = numbers[order]
    resolution = max(_resolution(rows, columns["start"]), _resolution(rows, columns["end"]))

    # failures.csv
    header, rows, numbers = _rows(folder, "failures.csv")
    columns = _header("failures.csv", header)
    failure_job = _job_index("failures.csv", rows, numbers, columns["job"], index)
    time = _numbers("failures.csv", rows, numbers, "time", columns["time"], "a time")
    outside = (time < first[failure_job]) | (time > last[failure_job])
    _fail_at("failures.csv", numbers, outside, "time", "outside its job's window [first, last] (jobs.csv)")
    restart_end = None
    if "restart_end" in columns:
        i, scale, _ = columns["restart_end"]
        cells = [row[i].strip() for row in rows]
        restart_end = np.asarray([_float(cell) if cell else math.nan for cell in cells], np.float64) * scale
        given = np.asarray([bool(cell) for cell in cells], bool)
        _fail_at("failures.csv", numbers, given & ~np.isfinite(restart_end), "restart_end", "must be a time or empty")
        _fail_at("failures.csv", numbers, restart_end < time, "restart_end", "before the failure's time")
        resolution = max(resolution, _resolution(rows, columns["restart_end"]))
    resolution = max(resolution, _resolution(rows, columns["time"]))
    text = {
        name: tuple(row[columns[name][0]].strip() for row in rows) if name in columns else None
        for name in ("domain", "cause")
    }
    order = np.lexsort((failure_job, time))
    failure_job, time, numbers = failure_job[order], time[order], numbers[order]
    restart_end = None if restart_end is None else restart_end[order]
    domain, cause = (None if column is None else tuple(column[i] for i in order) for column in text.values())
    by_job = np.lexsort((time, failure_job))
    same = failure_job[by_job][1:] == failure_job[by_job][:-1]
    twice = same & (time[by_job][1:] == time[by_job][:-1])
    if twice.any():
        raise LogError(
            f"failures.csv, row {numbers[by_job][np.argmax(twice) + 1]}, column 'time': "
            "the job fails at that time twice"
        )
    if restart_end is not None:
        during = same & (time[by_job][1:] < restart_end[by_job][:-1])
        if during.any():
            k = int(np.argmax(during))
            raise LogError(
                f"failures.csv, row {numbers[by_job][k + 1]}, column 'time': the job fails during the restart "
                f"of its failure of row {numbers[by_job][k]}"
            )
    if domain is not None:
        seen: dict = {}
        for number, job, name in zip(numbers, failure_job, domain):
            if seen.setdefault(int(job), name) != name:
                raise LogError(
                    f"failures.csv, row {number}, column 'domain': job {names[job]!r} is in domain "
                    f"{seen[int(job)]!r} in an earlier row (a job has one failure domain)"
                )
    # A completed write spans no failure of its job (a failure abandons the write in progress).
    for job in np.unique(failure_job):
        mine = write_job == job
        times = time[failure_job == job]
        after = np.searchsorted(times, start[mine], side="right")  # the first failure after each start
        spans = (after < len(times)) & (times[np.minimum(after, len(times) - 1)] < end[mine])
        if spans.any():
            k = int(np.argmax(spans))
            failed = numbers[failure_job == job][after[k]]
            raise LogError(
                f"writes.csv, row {write_rows[mine][k]}, column 'end': the write spans its job's failure of "
                f"failures.csv row {failed}, which abandons a write in progress (only completed writes are logged)"
            )
    return Logs(
        folder=str(folder),
        time_unit=time_unit,
        jobs=tuple(names),
        groups=groups,
        group=group,
        gpus=counts["gpus"],
        nodes=counts["nodes"],
        first=first,
        last=last,
        write_job=write_job,
        write_start=start,
        write_end=end,
        write_bytes=volume,
        failure_job=failure_job,
        failure_time=time,
        restart_end=restart_end,
        domain=domain,
        cause=cause,
        resolution=resolution,
    )


def write_logs(folder, logs: Logs, *, resolution: float = 1e-3) -> None:
    """Writes ``logs`` as the three CSV files in ``folder`` (created), times in seconds rounded
    to ``resolution`` seconds (a log's clock), sizes in bytes; each file atomically."""
    import io

    from ._io import atomic_write_bytes

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    digits = max(0, -int(math.floor(math.log10(resolution))))

    def stamp(value: float) -> str:
        return "" if not math.isfinite(value) else f"{round(value / resolution) * resolution:.{digits}f}"

    def jobs(handle):
        handle.write("job,group,gpus,nodes,first [s],last [s]\n")
        for i, name in enumerate(logs.jobs):
            handle.write(
                f"{name},{logs.groups[logs.group[i]]},{int(logs.gpus[i])},{int(logs.nodes[i])},"
                f"{stamp(logs.first[i])},{stamp(logs.last[i])}\n"
            )

    def writes(handle):
        handle.write("job,start [s],end [s],bytes [B]\n")
        names = logs.jobs
        lines = [
            f"{names[j]},{stamp(s)},{stamp(e)},{int(round(v))}\n"
            for j, s, e, v in zip(
                logs.write_job.tolist(), logs.write_start.tolist(), logs.write_end.tolist(), logs.write_bytes.tolist()
            )
        ]
        handle.write("".join(lines))

    def failures(handle):
        columns = ["job", "time [s]"]
        columns += ["restart_end [s]"] if logs.restart_end is not None else []
        columns += ["domain"] if logs.domain is not None else []
        columns += ["cause"] if logs.cause is not None else []
        handle.write(",".join(columns) + "\n")
        for i, job in enumerate(logs.failure_job.tolist()):
            cells = [logs.jobs[job], stamp(logs.failure_time[i])]
            cells += [stamp(logs.restart_end[i])] if logs.restart_end is not None else []
            cells += [logs.domain[i]] if logs.domain is not None else []
            cells += [logs.cause[i]] if logs.cause is not None else []
            handle.write(",".join(cells) + "\n")

    for name, writer in (("jobs.csv", jobs), ("writes.csv", writes), ("failures.csv", failures)):
        text = io.StringIO()
        writer(text)
        atomic_write_bytes(folder / name, text.getvalue().encode())
