"""What ``ckpt-jax fit`` writes: ``fleet.toml`` (every fitted value with its interval and
sample size in a comment), ``fit.json``, ``report.md`` and its figures (`ckpt_jax.fit`)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

__all__ = ["fleet_toml", "write_all"]

# Units the file and the report speak in.
_SIZE, _SIZE_UNIT = 1e9, "GB"
_BANDWIDTH, _BANDWIDTH_UNIT = 1e9, "GB/s"


def _seconds(unit: str) -> float:
    from ._units import duration_unit

    return duration_unit(unit)


def _num(value: float) -> str:
    return f"{value:.6g}"


def _interval(value, scale: float, unit: str) -> str:
    """``95 % CI [lo, hi] unit, n = ...`` of a `ckpt_jax.fit.Value`."""
    low = "-inf" if value.low is None else _num(value.low / scale)
    high = "inf" if value.high is None else _num(value.high / scale)
    unit = f" {unit}" if unit else ""
    return f"95 % CI [{low}, {high}]{unit}, n = {value.n:,}"


def _quantity(value: float, scale: float, unit: str) -> str:
    return f'"{_num(value / scale)} {unit}"'


def fleet_toml(fit) -> str:
    """The fitted fleet file's text (times in the logs' unit, sizes in GB, bandwidths in GB/s)."""
    logs, storage = fit.logs, fit.storage
    unit = logs.time_unit
    tick = _seconds(unit)
    lines = [
        f"# Fitted by `ckpt-jax fit` from {logs.folder or 'logs'}: {logs.n_jobs} jobs, "
        f"{storage.n_writes:,} writes, {len(logs.failure_time):,} failures, {len(fit.clusters)} outage(s).",
        "# Every fitted value carries its 95 % interval and the observations behind it; report.md says",
        "# how they were fitted and where the model does not fit the logs.",
        "",
        f'time_unit = "{unit}"',
    ]
    if fit.stagger.determined and fit.stagger.value > 0:
        lines.append(
            f"restart_stagger = {_quantity(fit.stagger.value, 1.0, 's')}  # {_interval(fit.stagger, 1.0, 's')} restarts"
        )
    lines += ["", "[storage]"]
    peak = storage.peak
    if peak.determined:
        lines.append(
            f"peak = {_quantity(peak.value, _BANDWIDTH, _BANDWIDTH_UNIT)}  # "
            f"{_interval(peak, _BANDWIDTH, _BANDWIDTH_UNIT)} writes held back by the storage"
        )
    else:
        lines.append(
            f"peak = {_quantity(peak.low, _BANDWIDTH, _BANDWIDTH_UNIT)}  # NOT DETERMINED, a lower bound: {peak.why}"
        )
    k = storage.saturates_at
    note = f"; NOT PINNED DOWN: {k.why}" if k.why else ""
    lines.append(f"saturates_at = {int(k.value)}  # {_interval(k, 1.0, '')} writes (profile over k){note}")
    degradation = storage.degradation
    if degradation.determined:
        lines.append(
            f"degradation = {_num(max(degradation.value, 0.0))}  # "
            f"{_interval(degradation, 1.0, '')} writes beyond saturates_at"
        )
    else:
        lines.append(f"# degradation: not determined ({degradation.why}); the file takes none")
    limit = storage.per_node_limit
    outage_domains = {d.name for d in fit.domains if d.mtbf.determined}
    clash = any(g.failure_shape.determined and (g.k1_p_value or 1) < 0.05 for g in fit.groups) and any(
        d.mtbf.determined for d in fit.domains
    )
    for group in fit.groups:
        lines += ["", "[[groups]]", f'name = "{group.name}"', f"count = {len(group.jobs)}"]
        lines.append(f"gpus = {group.gpus}")
        if limit.determined:
            lines.append(f"nodes = {group.nodes}")
        for note in group.notes:
            lines.append(f"# {note}")
        volume = group.checkpoint
        lines.append(
            f"checkpoint = {_quantity(volume.value, _SIZE, _SIZE_UNIT)}  # "
            f"{_interval(volume, _SIZE, _SIZE_UNIT)} writes"
        )
        if limit.determined:
            lines.append(
                f"write_limit_per_node = {_quantity(limit.value, _BANDWIDTH, _BANDWIDTH_UNIT)}  # "
                f"{_interval(limit, _BANDWIDTH, _BANDWIDTH_UNIT)} writes at their limit (one for every group)"
            )
        interval = group.interval
        if interval.determined:
            lines.append(
                f"interval = {_quantity(interval.value, tick, unit)}  # {_interval(interval, tick, unit)} intervals"
            )
        else:
            lines.append(f"# interval: not determined ({interval.why}); the file takes Young's")
        mtbf = group.mtbf
        if mtbf.determined:
            law = "Weibull mean" if mtbf is group.mtbf_weibull else "exponential"
            lines.append(f"mtbf = {_quantity(mtbf.value, tick, unit)}  # {law}: {_interval(mtbf, tick, unit)} failures")
        else:
            lines.append(f"mtbf = {_quantity(mtbf.low, tick, unit)}  # NOT DETERMINED, a 95 % lower bound: {mtbf.why}")
        shape = group.failure_shape
        if shape.determined:
            test = f"likelihood-ratio test of k = 1: p = {group.k1_p_value:.3g}"
            text = f"{_num(shape.value)}  # {_interval(shape, 1.0, '')} failures; {test}"
            if group.k1_p_value >= 0.05:
                lines.append(f"# failure_shape = {text} (not rejected: the file keeps k = 1)")
            elif clash:
                lines.append(
                    f"# failure_shape = {text}; the engine does not combine Weibull failures "
                    "with [[outages]] yet: k = 1"
                )
            else:
                lines.append(f"failure_shape = {text}")
        restart = group.restart
        if restart.determined:
            lines.append(
                f"restart = {_quantity(restart.value, tick, unit)}  # {_interval(restart, tick, unit)} restarts"
            )
        else:
            lines.append(f'restart = "0 s"  # not determined ({restart.why})')
        if group.domain in outage_domains:
            lines.append(f'domain = "{group.domain}"')
    for domain in fit.domains:
        if not domain.mtbf.determined:
            lines += ["", f"# domain {domain.name!r}: {domain.mtbf.why}; no [[outages]] table"]
            continue
        lines += [
            "",
            "[[outages]]",
            f'domain = "{domain.name}"',
            f"mtbf = {_quantity(domain.mtbf.value, tick, unit)}  # {_interval(domain.mtbf, tick, unit)} outages",
        ]
    return "\n".join(lines) + "\n"


def _figure_storage(fit, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    storage = fit.storage
    observed, predicted, writers = storage.observed, storage.predicted, storage.concurrency
    figure, (qq, against) = plt.subplots(1, 2, figsize=(11, 4.5))
    quantiles = np.linspace(0, 1, 201)
    qo, qp = np.quantile(observed, quantiles), np.quantile(predicted, quantiles)
    qq.plot(qo, qp, ".", ms=4)
    lo, hi = min(qo[0], qp[0]), max(qo[-1], qp[-1])
    qq.plot([lo, hi], [lo, hi], "k--", lw=1, label="equal")
    qq.set_xlabel("observed write duration (s), quantiles")
    qq.set_ylabel("replayed write duration (s), quantiles")
    qq.set_title("QQ: observed vs replayed durations")
    qq.legend()
    error = np.log(predicted / observed)
    against.scatter(writers, 100 * error, s=4, alpha=0.4)
    against.axhline(0, color="k", lw=1)
    against.set_xlabel("observed mean writers during the write")
    against.set_ylabel("100 × log(replayed / observed duration) (%)")
    against.set_title("replay error against concurrency")
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def _figure_failures(fit, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from scipy import stats

    groups = [g for g in fit.groups if len(g.gaps) >= 3]
    figure, axes = plt.subplots(1, max(len(groups), 1), figsize=(4.5 * max(len(groups), 1), 4.2), squeeze=False)
    tick = _seconds(fit.logs.time_unit)
    for ax, group in zip(axes[0], groups):
        gaps = np.sort(group.gaps) / tick
        levels = (np.arange(1, len(gaps) + 1) - 0.5) / len(gaps)
        shape = group.failure_shape.value
        mean = group.mtbf_weibull.value / tick
        law = stats.weibull_min(shape, scale=mean / math.gamma(1 + 1 / shape))
        ax.plot(law.ppf(levels), gaps, "o", ms=4, label=f"Weibull k = {shape:.2f}")
        exp_mean = group.mtbf_exponential.value / tick
        ax.plot(stats.expon(scale=exp_mean).ppf(levels), gaps, "x", ms=4, label="exponential")
        low, top = min(gaps.min(), law.ppf(levels[0])), max(gaps.max(), law.ppf(levels[-1]))
        ax.plot([low, top], [low, top], "k--", lw=1)
        ax.set_xscale("log")
        ax.set_yscale("log")  # a Weibull law of k < 1 spans decades
        ax.set_xlabel(f"fitted law's quantiles ({fit.logs.time_unit})")
        ax.set_ylabel(f"observed times to failure ({fit.logs.time_unit})")
        ax.set_title(f"{group.name}: {len(gaps)} failures, KS p = {group.ks_p_value:.2g}", fontsize=10)
        ax.legend(fontsize=8)
    if not groups:
        axes[0][0].text(0.5, 0.5, "fewer than 3 failures in every group", ha="center")
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def _figure_outages(fit, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    logs = fit.logs
    tick = _seconds(logs.time_unit)
    figure, ax = plt.subplots(figsize=(11, 0.35 * logs.n_jobs + 1.8))
    clustered = {row for cluster in fit.clusters for row in cluster}
    lone = np.asarray([row not in clustered for row in range(len(logs.failure_time))], bool)
    ax.plot(logs.failure_time[lone] / tick, logs.failure_job[lone], "o", ms=4, color="C0", label="a job's own failure")
    for k, cluster in enumerate(fit.clusters):
        times = logs.failure_time[cluster] / tick
        ax.plot(times, logs.failure_job[cluster], "s", ms=5, color="C3", label="outage" if k == 0 else None)
        ax.axvline(times.min(), color="C3", alpha=0.3, lw=1)
    ax.set_yticks(range(logs.n_jobs))
    ax.set_yticklabels(logs.jobs, fontsize=7)
    ax.set_xlabel(f"time ({logs.time_unit})")
    ax.set_title(f"failures: {len(fit.clusters)} outages (several jobs within {fit.window:g} s)")
    ax.legend(loc="upper right", fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def _value_text(value, scale: float = 1.0, unit: str = "") -> str:
    if not value.determined:
        bound = "" if value.low is None else f" (at least {_num(value.low / scale)} {unit})"
        return f"not determined: {value.why}{bound}"
    text = f"{_num(value.value / scale)} {unit} ({_interval(value, scale, unit)})".replace("  ", " ")
    return f"{text}; {value.why}" if value.why else text


def _report(fit, files: dict) -> str:
    logs, storage = fit.logs, fit.storage
    unit = logs.time_unit
    tick = _seconds(unit)
    validation = storage.validation
    lines = [
        "# Fit of the fleet model to the logs",
        "",
        f"Logs: `{logs.folder}`: {logs.n_jobs} jobs in {len(logs.groups)} groups, {storage.n_writes:,} writes, "
        f"{len(logs.failure_time):,} failures. Fitted file: `fleet.toml` (read as it is by `ckpt-jax assess`, "
        "`design` and `compare`); every number: `fit.json`.",
        "",
        "## Storage",
        "",
        f"Replay of the observed write starts through the model's storage sharing (max-min fair water-filling of "
        f"f(n) over the writers under their per-node limits, event to event), loss: {storage.loss}. "
        f"Fitted on {storage.n_fit:,} writes in {storage.windows} window(s) of the log; intervals from the Jacobian.",
        "",
        f"- peak: {_value_text(storage.peak, _BANDWIDTH, _BANDWIDTH_UNIT)}",
        f"- saturates_at: {_value_text(storage.saturates_at)}",
        f"- degradation: {_value_text(storage.degradation)}",
        f"- per-node write limit: {_value_text(storage.per_node_limit, _BANDWIDTH, _BANDWIDTH_UNIT)}",
        "",
        f"Every write replayed with these values: median |log error| {validation['median_abs_log_error']:.2g}"
        + (
            f" ({validation['median_abs_log_error_held_out']:.2g} on the {validation['held_out']:,} writes not fitted)"
            if validation["held_out"]
            else ""
        )
        + f"; {100 * validation['share_off_by_10pct']:.2f} % of the writes off by more than 10 %.",
        "",
        "| writers (mean, rounded) | writes | median log(replayed / observed) |",
        "|---|---|---|",
    ]
    misfit = []
    for n, row in validation["by_writers"].items():
        lines.append(f"| {n} | {row['writes']:,} | {row['median_log_error']:+.3g} |")
        if abs(row["median_log_error"]) > 0.05 and row["writes"] >= 5:
            misfit.append(
                f"writes with about {n} writers are replayed {100 * row['median_log_error']:+.1f} % off (median)"
            )
    if validation["share_off_by_10pct"] > 0.01:
        misfit.append(
            f"{100 * validation['share_off_by_10pct']:.1f} % of the writes are replayed more than 10 % off "
            "(writes beside abandoned ones or recovery reads, or a storage the model does not describe)"
        )
    lines += ["", f"![storage]({files['storage']})", ""]
    lines += ["## Failures", ""]
    lines += [
        "Times to a job's own failure from its last restart end, censored at outages and at the end of each job's "
        "window; maximum likelihood with `scipy.stats.CensoredData` (exponential and Weibull), likelihood-ratio test "
        "of k = 1. The KS p-value compares the uncensored times with the fitted Weibull law (approximate: it leaves "
        "the censored times out).",
        "",
        f"| group | jobs | failures | MTBF ({unit}) | k | p(k = 1) | KS p | restart ({unit}) | interval ({unit}) "
        "| checkpoint (GB) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]

    def cell(value, scale=1.0):
        if not value.determined:
            return "n/d"
        low = "" if value.low is None else _num(value.low / scale)
        high = "" if value.high is None else _num(value.high / scale)
        return f"{_num(value.value / scale)} [{low}, {high}]"

    for g in fit.groups:
        p = "" if g.k1_p_value is None else f"{g.k1_p_value:.2g}"
        ks = "" if g.ks_p_value is None else f"{g.ks_p_value:.2g}"
        lines.append(
            f"| {g.name} | {len(g.jobs)} | {len(g.gaps)} | {cell(g.mtbf, tick)} | {cell(g.failure_shape)} | {p} "
            f"| {ks} | "
            f"{cell(g.restart, tick)} | {cell(g.interval, tick)} | {cell(g.checkpoint, _SIZE)} |"
        )
        if g.ks_p_value is not None and g.ks_p_value < 0.05:
            misfit.append(
                f"the times to failure of {g.name!r} do not follow the fitted Weibull law (KS p = {g.ks_p_value:.2g})"
            )
        for note in g.notes:
            misfit.append(note)
    lines += ["", f"![failures]({files['failures']})", "", "## Common causes", ""]
    lines.append(
        f"{len(fit.clusters)} outage(s): failures of two or more jobs within {fit.window:g} s of the first"
        + (
            " of one domain (the logs' `domain` column)."
            if logs.domain is not None
            else "; domains: the jobs that fail together."
        )
    )
    lines.append("")
    for d in fit.domains:
        names = ", ".join(logs.jobs[j] for j in d.jobs[:8]) + (" ..." if len(d.jobs) > 8 else "")
        lines.append(
            f"- domain `{d.name}` ({len(d.jobs)} jobs: {names}): {d.outages} outages in {d.span / tick:.4g} {unit}; "
            f"MTBF {_value_text(d.mtbf, tick, unit)}"
        )
    lines.append(f"- restart stagger: {_value_text(fit.stagger, 1.0, 's')}")
    expected = _spurious_outages(fit)
    if expected >= 0.1:
        misfit.append(
            f"the jobs' own failures fall within {fit.window:g} s of each other by chance about {expected:.2g} times "
            f"in these logs (independent failures at the fitted rates): that many of the {len(fit.clusters)} outages "
            "may be coincidences (a shorter --window, or a domain column, tells them apart)"
        )
    single = [d for d in fit.domains if len(d.jobs) == 1]
    if single:
        misfit.append("a domain of one job: its outages look like its own failures and cannot be told apart")
    lines += ["", f"![outages]({files['outages']})", "", "## Where the model does not fit", ""]
    limits = [
        "The storage model is the fleet file's: fair sharing (no `weighted` or queueing policy), one per-node "
        "limit for every job, no recovery reads; writes abandoned by failures are not logged yet took bandwidth "
        "(the robust loss leaves the writes beside them out). A write's start is its firing (blocking checkpoints).",
        "Own failures of two jobs of one domain within the window are taken for an outage; an outage that finds one "
        "job up looks like that job's own failure.",
    ]
    for name in ("peak", "degradation", "per_node_limit"):
        value = getattr(storage, name)
        if not value.determined:
            misfit.append(f"{name}: not determined ({value.why})")
    lines += [f"- {m}" for m in misfit] or ["- nothing beyond the model's assumptions below."]
    lines += ["", *limits, ""]
    lines.append("Timing: " + ", ".join(f"{name} {seconds:.1f} s" for name, seconds in fit.seconds.items()) + ".")
    return "\n".join(lines) + "\n"


def _spurious_outages(fit) -> float:
    """Expected coincidences of independent own failures within the window, per domain: each
    pair of jobs (i, j) at rates λ_i, λ_j gives about 2·w·λ_i·λ_j·T of them."""
    rate = np.zeros(fit.logs.n_jobs)
    for group in fit.groups:
        if group.mtbf.determined:
            rate[list(group.jobs)] = 1.0 / group.mtbf.value
    span = float(np.max(fit.logs.last) - np.min(fit.logs.first))
    domains = {g.domain for g in fit.groups} if fit.logs.domain is not None else {None}
    total = 0.0
    for domain in domains:
        members = [j for g in fit.groups if fit.logs.domain is None or g.domain == domain for j in g.jobs]
        r = rate[members]
        total += float((r.sum() ** 2 - (r**2).sum()) / 2) * 2 * fit.window * span
    return total


def write_all(fit, out: Path) -> list:
    """fleet.toml (checked: `ckpt_jax.fleetfile.loads` reads it), fit.json, report.md and
    storage.png, failures.png, outages.png into ``out``."""
    from ._io import atomic_write_bytes
    from .fleetfile import loads

    out.mkdir(parents=True, exist_ok=True)
    text = fleet_toml(fit)
    loads(text, str(out / "fleet.toml"))  # the file must read as it is
    atomic_write_bytes(out / "fleet.toml", text.encode())
    atomic_write_bytes(out / "fit.json", (json.dumps(fit.to_dict(), indent=2, default=float) + "\n").encode())
    files = {"storage": "storage.png", "failures": "failures.png", "outages": "outages.png"}
    _figure_storage(fit, out / files["storage"])
    _figure_failures(fit, out / files["failures"])
    _figure_outages(fit, out / files["outages"])
    atomic_write_bytes(out / "report.md", _report(fit, files).encode())
    return [out / name for name in ("fleet.toml", "fit.json", "report.md", *files.values())]
