"""``ckpt-jax fit LOGDIR --out DIR``: a fleet file fitted to a cluster's logs (`ckpt_jax.fit`)."""

from __future__ import annotations

import math
import time
from pathlib import Path

from ._common import CliError, integer
from ._options import add_no_progress, add_out


def _window(text: str) -> float:
    """``--window``: a duration with its unit ("60 s", "2 min") or a number of seconds."""
    import argparse

    from .._units import UnitError, to_base

    try:
        value = float(text)
    except ValueError:
        try:
            value = to_base(text, "duration")
        except UnitError as err:
            raise argparse.ArgumentTypeError(str(err)) from None
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"must be a duration > 0, got {text!r}")
    return value


def add_fit(subparsers) -> None:
    parser = subparsers.add_parser(
        "fit",
        help="fit a fleet file to a cluster's checkpoint and failure logs",
        description=(
            "Read LOGDIR/jobs.csv, writes.csv and failures.csv, fit the storage (by replaying the "
            "observed write starts through the model's storage sharing), each group's failure law, "
            "the outages, intervals and sizes, and write DIR/fleet.toml (every value with its 95 %% "
            "interval and sample size), fit.json, report.md and its figures."
        ),
    )
    parser.add_argument("logs", type=Path, metavar="LOGDIR", help="the folder of jobs.csv, writes.csv, failures.csv")
    parser.add_argument(
        "--window",
        type=_window,
        default=60.0,
        metavar="DURATION",
        help="failures of several jobs within this long of the first are one outage (default: 60 s)",
    )
    parser.add_argument(
        "--fit-writes",
        type=integer(10),
        default=None,
        metavar="N",
        help="fit the storage on at most N writes (windows of the log; the rest validate the fit) (default: 3000)",
    )
    add_no_progress(parser)  # accepted as every command does; the fit draws no bar
    add_out(parser)
    parser.set_defaults(run=_fit, resumes=False, uses_jax=False)


def _fit(args) -> int:
    from .. import fit
    from .._logs import LogError

    if not args.logs.is_dir():
        raise CliError(f"{args.logs}: no such folder (it holds jobs.csv, writes.csv and failures.csv)")
    started = time.perf_counter()
    try:
        fitted = fit.from_logs(args.logs, window=args.window, fit_writes=args.fit_writes or fit.FIT_WRITES)
    except LogError as err:
        raise CliError(f"{args.logs}: {err}") from None
    written = fit.write(fitted, args.out)
    storage = fitted.storage
    print(
        f"ckpt-jax fit: {fitted.logs.n_jobs} jobs, {storage.n_writes:,} writes, {len(fitted.logs.failure_time):,} "
        f"failures, {len(fitted.clusters)} outage(s); {time.perf_counter() - started:.1f} s -> {args.out}"
    )
    for value, name in (
        (storage.peak, "peak"),
        (storage.degradation, "degradation"),
        (storage.per_node_limit, "per-node limit"),
    ):
        if not value.determined:
            print(f"ckpt-jax fit: {name} not determined: {value.why}")
    print(f"report: {Path(args.out) / 'report.md'}; fleet file: {written[0]}")
    return 0
