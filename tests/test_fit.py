"""`ckpt-jax fit` / `ckpt_jax.fit`: a fleet file fitted to a cluster's logs, and the logs of a
simulated run (`simulate --logs`).

The round trip: a known fleet (storage with degradation, per-node write limits, Weibull
k = 0.7 failures, one outage domain, a restart stagger) is simulated by the engine with its failures drawn on the
host and replayed exactly, its logs are written as a cluster keeps them (to the millisecond)
and fitted back: every parameter must lie inside its 95 % interval (one seed here; 20 seeds,
slow-marked, with each parameter inside in >= 90 % of them). The replay of the storage is
checked against the engine by the round trip itself (the engine drew the write ends).
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import numpy as np
import pytest

from ckpt_jax import fit
from ckpt_jax._logs import LogError, read_logs, write_logs

TRUE_FLEET = """
time_unit = "h"
restart_stagger = "30 s"

[storage]
peak = "10 GB/s"
saturates_at = 2
degradation = 0.2

[[groups]]
name = "small"
count = 4
gpus = 32
nodes = 4
checkpoint = "100 GB"
write_limit_per_node = "1 GB/s"
interval = "10 min"
mtbf = "{mtbf}"
restart = "5 min"
domain = "rack"

[[groups]]
name = "big"
count = 2
gpus = 64
nodes = 8
checkpoint = "200 GB"
write_limit_per_node = "1 GB/s"
interval = "15 min"
mtbf = "{mtbf}"
restart = "10 min"

[[outages]]
domain = "rack"
mtbf = "{outage}"
"""

# The fleet's true values, in s, B and B/s.
TRUTH_STORAGE = {"peak": 10e9, "saturates_at": 2, "degradation": 0.2, "per_node_limit": 1e9}
TRUTH_GROUPS = {
    "small": {"interval": 600.0, "checkpoint": 100e9, "restart": 300.0, "failure_shape": 0.7},
    "big": {"interval": 900.0, "checkpoint": 200e9, "restart": 600.0, "failure_shape": 0.7},
}
SHAPE = 0.7


def true_spec(tmp_path: Path, mtbf: str, outage: str):
    """The round trip's fleet: the file read with k = 1 (a file cannot pair Weibull failures with
    outages: the engine does not), then k = 0.7, which only the host's draws use."""
    from ckpt_jax import fleetfile

    path = tmp_path / "true.toml"
    path.write_text(TRUE_FLEET.format(mtbf=mtbf, outage=outage))
    spec = fleetfile.load(path)
    return dataclasses.replace(spec, groups=tuple(g._replace(failure_shape=SHAPE) for g in spec.groups))


def simulated_logs(spec, horizon: float, seed: int, folder: Path):
    """The logs of one run of ``spec`` (`simulate --logs` in process)."""
    import jax

    from ckpt_jax import SaveAt, random_state, simulate

    drawn = fit.draw_failures(spec, horizon, seed)
    fleet = drawn.spec.fleet()
    cycles = int(horizon / float(np.min(spec.intervals()))) + 2
    trace = simulate(fleet, random_state(fleet, jax.random.key(seed)), cycles, until=horizon, save=SaveAt(trace=True))
    logs = fit.run_logs(spec, drawn, trace.fire_times, trace.end_times, horizon)
    write_logs(folder, logs)
    return drawn


def misses(fitted, spec) -> list:
    """The parameters whose 95 % interval misses the truth: ``(name, value, low, high, truth)``."""
    out = []

    def check(name, value, truth):
        if not value.inside(truth):
            out.append((name, value.value, value.low, value.high, truth))

    for name, truth in TRUTH_STORAGE.items():
        check(f"storage.{name}", getattr(fitted.storage, name), truth)
    mtbf = {group.name: group.mtbf for group in spec.groups}
    for group in fitted.groups:
        for name, truth in TRUTH_GROUPS[group.group].items():
            check(f"{group.name}.{name}", getattr(group, name), truth)
        check(f"{group.name}.mtbf", group.mtbf, mtbf[group.group])
    if spec.outages:
        check("restart_stagger", fitted.stagger, spec.restart_stagger)
    outage = {o.domain: o.mtbf for o in spec.outages}
    for domain in fitted.domains:
        if domain.name in outage:
            check(f"outages.{domain.name}", domain.mtbf, outage[domain.name])
    return out


def test_round_trip_one_seed(tmp_path):
    # One day of 6 jobs: ~750 writes, ~50 failures, a few outages; the logs name the domains.
    spec = true_spec(tmp_path, mtbf="2 h", outage="6 h")
    simulated_logs(spec, 86400.0, 3, tmp_path / "logs")
    fitted = fit.from_logs(tmp_path / "logs", window=10.0)
    assert [g.name for g in fitted.groups] == ["small", "big"]
    assert [d.name for d in fitted.domains if d.mtbf.determined] == ["rack"]
    assert misses(fitted, spec) == []
    # Every parameter was determined by these logs (more than 2 writers at once, writes at
    # their limit and writes held back by the storage all occur).
    assert all(getattr(fitted.storage, name).determined for name in TRUTH_STORAGE)
    # The fitted file reads as it is.
    written = fit.write(fitted, tmp_path / "out")
    from ckpt_jax import fleetfile

    loaded = fleetfile.load(written[0])
    assert loaded.n_jobs == 6 and len(loaded.outages) == 1
    assert (tmp_path / "out" / "report.md").read_text().count("![") == 3


@pytest.mark.slow
def test_round_trip_twenty_seeds(tmp_path):
    spec = true_spec(tmp_path, mtbf="2 h", outage="6 h")
    missed: dict = {}
    for seed in range(20):
        folder = tmp_path / f"logs{seed}"
        simulated_logs(spec, 2 * 86400.0, seed, folder)
        for name, *_ in misses(fit.from_logs(folder, window=10.0), spec):
            missed[name] = missed.get(name, 0) + 1
    # Each parameter inside its 95 % interval in at least 18 of the 20 seeds.
    assert {name: count for name, count in missed.items() if count > 2} == {}


@pytest.mark.slow
def test_fitted_file_gives_the_true_goodput(tmp_path):
    """The fitted file, assessed, gives the true file's goodput within the CIs (a fleet the
    engine runs as a file: Weibull failures without outages), the fit's own interval on the
    MTBF included."""
    import jax

    from ckpt_jax import assess, fleetfile

    text = TRUE_FLEET.format(mtbf="2 h", outage="6 h").split("[[outages]]")[0].replace('restart_stagger = "30 s"', "")
    text = text.replace('mtbf = "2 h"', 'mtbf = "2 h"\nfailure_shape = 0.7').replace('domain = "rack"\n', "")
    path = tmp_path / "true.toml"
    path.write_text(text)
    spec = fleetfile.load(path)
    simulated_logs(spec, 4 * 86400.0, 0, tmp_path / "logs")
    # No outages: a window of 1 ms keeps independent failures from passing for one (at 60 s,
    # 6 jobs failing every 2 h coincide about 12 times in 4 days).
    fitted = fit.from_logs(tmp_path / "logs", window=1e-3)
    assert fitted.clusters == [] and fitted.groups[0].k1_p_value < 0.05  # the file carries the Weibull shape
    fitted_spec = fleetfile.load(fit.write(fitted, tmp_path / "out")[0])
    assert fitted_spec.groups[0].failure_shape is not None

    def goodput(spec, mtbf=None):
        if mtbf is not None:  # every group's MTBF at one end of its fitted interval
            groups = tuple(g._replace(mtbf=m) for g, m in zip(spec.groups, mtbf))
            spec = dataclasses.replace(spec, groups=groups)
        run = assess.assess(spec.fleet(), horizon=2 * 86400.0, key=jax.random.key(0), n_draws=16)
        return run.goodput["fleet"]

    # The fitted file's goodput carries the fit's uncertainty: the MTBF's interval (the value
    # that moves goodput most; the storage's and the intervals' are narrow) spans a band of
    # goodputs, each with its assess CI; the true file's goodput lies inside that band.
    truth, fitted_goodput = goodput(spec), goodput(fitted_spec)
    fewer = goodput(fitted_spec, [g.mtbf.low for g in fitted.groups])
    more = goodput(fitted_spec, [g.mtbf.high for g in fitted.groups])
    assert fewer.low <= truth.mean <= more.high, (truth, fewer, fitted_goodput, more)
    assert fewer.mean <= fitted_goodput.mean <= more.mean


# --- The replay, the clusters, the domains: small cases by hand ----------------------------------


def test_replay_water_fills_under_the_limits():
    # f(1) = 5, f(2) = 10; limits 4 and 8: together each gets min(b, 6) -> 4 and 6; the second
    # (12 to drain) ends at 2, the first has 4 left and drains alone at min(4, 5) -> ends at 3.
    ends = fit.replay([0.0, 0.0], [12.0, 12.0], [4.0, 8.0], [5.0, 10.0])
    np.testing.assert_allclose(ends, [3.0, 2.0])
    # A write starting while another drains: [0, 2) alone at 4; then both at 4 and 6 (f(2) = 10).
    ends = fit.replay([0.0, 2.0], [12.0, 6.0], [4.0, 8.0], [5.0, 10.0])
    np.testing.assert_allclose(ends, [3.0, 3.0])


def replayed_logs(peak, k, degradation, per_node, nodes, volumes, writes, span, slowed, seed):
    """Write logs made by `fit.replay` itself with a known storage (to the millisecond): ``writes``
    starts uniform over ``span`` s by jobs of ``nodes`` nodes writing ``volumes`` bytes; a share
    ``slowed`` of the writes took 1.2 to 3 times as long (the writes beside abandoned ones)."""
    from ckpt_jax._logs import Logs
    from ckpt_jax._policies import storage_curve

    rng = np.random.default_rng(seed)
    n_jobs = len(nodes)
    job = rng.integers(0, n_jobs, writes)
    start = np.sort(rng.uniform(0.0, span, writes))
    volume = np.asarray(volumes, float)[job]
    node = np.asarray(nodes, float)
    curve = [storage_curve(n, peak, k, degradation) for n in range(1, writes + 1)]
    end = fit.replay(start, volume, per_node * node[job], curve)
    slow = rng.random(writes) < slowed
    end = start + (end - start) * np.where(slow, rng.uniform(1.2, 3.0, writes), 1.0)
    return Logs(
        folder="",
        time_unit="s",
        jobs=tuple(f"j{i}" for i in range(n_jobs)),
        groups=("g",),
        group=np.zeros(n_jobs, int),
        gpus=node * 8,
        nodes=node,
        first=np.zeros(n_jobs),
        last=np.full(n_jobs, 2 * span),
        write_job=job,
        write_start=np.round(start, 3),
        write_end=np.round(end, 3),
        write_bytes=volume,
        failure_job=np.zeros(0, int),
        failure_time=np.zeros(0),
        resolution=1e-3,
    )


def test_saturates_at_from_the_whole_profile_over_k():
    # 300 writes of 4-, 8- and 16-node jobs at 1 GB/s per node on peak 48 GB/s, k = 8,
    # degradation 0.02, 5 % of them slowed: the first pass's robust cost rises from k = 1 to
    # k = 2 and falls to its minimum at k = 8 (a scan that stops at the first rise reports k = 1).
    logs = replayed_logs(48e9, 8, 0.02, 1e9, [4, 8, 16] * 4, [50e9, 100e9, 200e9] * 4, 300, 1500.0, 0.05, 0)
    storage = fit.fit_storage(logs)
    assert storage.saturates_at.value == 8 and storage.saturates_at.inside(8)
    for name, truth in {"peak": 48e9, "degradation": 0.02, "per_node_limit": 1e9}.items():
        assert getattr(storage, name).value == pytest.approx(truth, rel=1e-3), name


def test_saturates_at_not_pinned_down_widens_the_peak():
    # Peak 80 GB/s, k = 6, degradation 0.02, writes of 12 GB/s at most: no write is held back
    # below 7 writers, so k = 1 .. 6 (each with its own peak and degradation) fit alike.
    logs = replayed_logs(80e9, 6, 0.02, 1.5e9, [8] * 12, [100e9, 200e9, 400e9] * 4, 300, 1500.0, 0.0, 0)
    storage = fit.fit_storage(logs)
    k = storage.saturates_at
    assert (k.low, k.high) == (1, 6) and "fit the logs alike" in k.why
    assert storage.peak.inside(80e9) and storage.peak.inside(80e9 / 0.9)  # k = 6 and k = 1
    assert storage.degradation.inside(0.02) and storage.degradation.inside(0.02 / 0.9)


def _logs(tmp_path: Path, jobs: str, writes: str, failures: str) -> Path:
    folder = tmp_path / "logs"
    folder.mkdir(exist_ok=True)
    (folder / "jobs.csv").write_text(jobs)
    (folder / "writes.csv").write_text(writes)
    (folder / "failures.csv").write_text(failures)
    return folder


JOBS = "job,group,gpus,nodes,first [h],last [h]\na,g,8,1,0,10\nb,g,8,1,0,10\nc,g,8,1,0,10\n"
WRITES = "job,start [s],end [s],bytes [GB]\na,10,20,5\nb,15,30,5\na,100,110,5\n"
FAILURES = "job,time [h],restart_end [h]\na,1,1.1\nb,1.001,1.1\nc,5,5.1\n"


def test_logs_read_in_their_units(tmp_path):
    logs = read_logs(_logs(tmp_path, JOBS, WRITES, FAILURES))
    assert logs.time_unit == "h" and logs.last[0] == 36000.0
    assert logs.write_bytes[0] == 5e9 and logs.write_end[1] == 30.0
    np.testing.assert_allclose(logs.failure_time, [3600.0, 3603.6, 18000.0])
    assert logs.resolution == pytest.approx(360.0)  # the coarsest clock: restart_end's 0.1 h


@pytest.mark.parametrize(
    "file, text, message",
    [
        (
            "writes",
            "job,start [s],end [s],bytes [GB]\na,10,20,5\nz,15,30,5\n",
            "writes.csv, row 3, column 'job': names no job",
        ),
        (
            "writes",
            "job,start [s],end [s],bytes [GB]\na,10,20,5\nb,30,15,5\n",
            "writes.csv, row 3, column 'end': must be after",
        ),
        ("writes", "job,start [s],end [s],bytes [GB]\na,10,20,-5\n", "writes.csv, row 2, column 'bytes': must be > 0"),
        (
            "writes",
            "job,start [s],end [s],bytes [GB]\na,10,20,5\na,15,30,5\n",
            "writes.csv, row 3, column 'start': the job's write starts before its write of row 2 ends",
        ),
        ("failures", "job,time [h]\nc,11\n", "failures.csv, row 2, column 'time': outside its job's window"),
        (
            "writes",
            "job,start,end [s],bytes [GB]\na,10,20,5\n",
            "writes.csv, row 1, column 2: the column 'start' needs its unit",
        ),
        (
            "writes",
            "job,start [GB],end [s],bytes [GB]\na,10,20,5\n",
            "writes.csv, row 1, column 2: the unit of 'start' is not a duration",
        ),
        (
            "writes",
            "job,start [s],end [s],bytes [s]\na,10,20,5\n",
            "writes.csv, row 1, column 4: the unit of 'bytes' is not a size",
        ),
        ("jobs", "job,group,gpus,nodes,first [h]\na,g,8,1,0\n", "jobs.csv, row 1: the header has no column 'last'"),
        ("writes", "job,start [s],end [s],bytes [GB]\na,10,x,5\n", "writes.csv, row 2, column 'end': must be a time"),
        (
            "writes",
            "job,start [s],end [s],bytes [GB]\na,3500,3700,5\n",
            "writes.csv, row 2, column 'end': the write spans its job's failure of failures.csv row 2",
        ),
        ("failures", "job,time [h],restart_end [h]\na,1,0.5\n", "failures.csv, row 2, column 'restart_end': before"),
    ],
)
def test_bad_logs_are_named_by_file_row_and_column(tmp_path, file, text, message):
    files = {"jobs": JOBS, "writes": WRITES, "failures": FAILURES}
    files[file] = text
    with pytest.raises(LogError, match=None) as caught:
        read_logs(_logs(tmp_path, files["jobs"], files["writes"], files["failures"]))
    assert message in str(caught.value), str(caught.value)


def test_outages_and_domains_from_failures_together(tmp_path):
    # a and b fail 3.6 s apart (one outage); c alone. Without a domain column the domain is {a, b},
    # and c, in no outage, takes its group's; job d of another group stays in none.
    jobs = JOBS + "d,h,8,1,0,10\n"
    logs = read_logs(_logs(tmp_path, jobs, WRITES, FAILURES))
    clusters = fit.outage_clusters(logs, window=60.0)
    assert [[int(logs.failure_job[r]) for r in c] for c in clusters] == [[0, 1]]
    assert fit.job_domains(logs, clusters) == ("d1", "d1", "d1", None)
    assert fit.outage_clusters(logs, window=1.0) == []  # 3.6 s apart: two own failures


def test_a_weibull_law_is_told_from_the_exponential():
    rng = np.random.default_rng(1)
    gaps = 3600.0 * rng.weibull(0.7, 400)
    exponential, weibull, shape, p_value, _ = fit._failure_law(gaps, np.zeros(0))
    assert shape.inside(0.7) and p_value < 1e-6
    assert weibull.inside(3600.0 * math.gamma(1 + 1 / 0.7))
    gaps = 3600.0 * rng.exponential(1.0, 400)
    exponential, _, shape, p_value, _ = fit._failure_law(gaps, np.zeros(0))
    assert shape.inside(1.0) and p_value > 0.05 and exponential.inside(3600.0)


def test_cli_fit_writes_the_fleet_file(tmp_path):
    from ckpt_jax.cli import main

    rows = ["job,start [s],end [s],bytes [GB]"]
    # Two jobs of 1 node, limit 1 GB/s each, storage 1.5 GB/s: alone 10 s, together 2/3 each.
    for k in range(40):
        t = 100.0 * k
        rows += [f"a,{t},{t + 10}", f"b,{t + 50 + (k % 3)},{t + 60 + (k % 3)}"]
    writes = "\n".join(row + (",10" if i else "") for i, row in enumerate(rows)) + "\n"
    folder = _logs(tmp_path, JOBS, writes, "job,time [h]\n")
    status = main(["fit", str(folder), "--out", str(tmp_path / "out")])
    assert status == 0
    text = (tmp_path / "out" / "fleet.toml").read_text()
    assert "not determined" in text  # every write alone: the storage's sharing is never seen
    assert main(["fit", str(tmp_path / "nothing"), "--out", str(tmp_path / "out2")]) == 2


def test_simulate_logs_needs_a_fleet_file(tmp_path, capsys):
    from ckpt_jax.cli import main

    assert main(["simulate", "--logs", str(tmp_path / "logs"), "--out", str(tmp_path / "out")]) == 2
    assert "--logs needs --fleet" in capsys.readouterr().err


@pytest.mark.slow
def test_simulate_logs_from_the_command_line(tmp_path):
    """`ckpt-jax simulate --fleet F --logs DIR` writes logs that `ckpt-jax fit` reads back."""
    from ckpt_jax.cli import main

    (tmp_path / "fleet.toml").write_text(TRUE_FLEET.format(mtbf="2 h", outage="6 h"))
    argv = ["simulate", "--fleet", str(tmp_path / "fleet.toml"), "--horizon", "12 h", "--no-progress"]
    assert main([*argv, "--out", str(tmp_path / "sim"), "--logs", str(tmp_path / "logs")]) == 0
    logs = read_logs(tmp_path / "logs")
    assert logs.n_jobs == 6 and len(logs.write_start) > 100 and logs.restart_end is not None
    assert main(["fit", str(tmp_path / "logs"), "--out", str(tmp_path / "fit")]) == 0
    assert (tmp_path / "fit" / "fleet.toml").exists()
