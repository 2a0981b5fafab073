"""``ckpt-jax reproduce``: every experiment and ``report.md`` (the main job)."""

from __future__ import annotations

import sys
from pathlib import Path

from ._common import add_devices, report_devices
from ._options import add_no_progress, add_out, add_quick


class _ExperimentNames:
    """The experiments' names as ``--only``'s choices, read when argparse first needs them (a
    ``--only`` given, or the help shown): the experiments import JAX, which takes seconds, and
    every other command's errors come first."""

    def _names(self) -> list:
        from ..experiments import EXPERIMENTS

        return [experiment.name for experiment in EXPERIMENTS]

    def __contains__(self, name) -> bool:
        return name in self._names()

    def __iter__(self):
        return iter(self._names())


def add_reproduce(subparsers) -> None:
    parser = subparsers.add_parser(
        "reproduce",
        help="run every experiment and write report.md (the main job)",
        description=(
            "Run the experiments behind the claims of docs/model.md and write DIR/report.md with, "
            "per claim, the numbers, figures and a verdict decided by thresholds in the code. "
            "An interrupted run resumes from the experiments already finished."
        ),
    )
    sizes = parser.add_mutually_exclusive_group()
    add_quick(
        sizes, "about 2-4 minutes on a 2-core CPU (the default size)", dest="size", action="store_const", const="quick"
    )
    sizes.add_argument("--full", dest="size", action="store_const", const="full", help="sized for one GPU")
    sizes.add_argument(
        "--smoke", dest="size", action="store_const", const="smoke", help="seconds per experiment (what the tests run)"
    )
    parser.set_defaults(size="quick")
    parser.add_argument(
        "--only",
        action="append",
        choices=_ExperimentNames(),
        metavar="NAME",
        help="run only this experiment (repeatable; default: all): %(choices)s",
    )
    parser.add_argument(
        "--restart",
        action="store_true",
        help="run every experiment again; results of another size, another ckpt_jax version or "
        "other parameters in DIR are discarded first "
        "(without --restart such a folder is refused)",
    )
    add_no_progress(parser)
    add_devices(parser, shards=False)
    add_out(parser)

    def run(args):
        from .. import reproduce

        # Experiments do not take a device count yet: each runs on the default device.
        report_devices(
            "reproduce", args.device_info, args.device_info.available, detail="the experiments use the first only"
        )
        # A folder of other results (`reproduce.ResultConflict`, a ValueError) is one error line.
        results = reproduce.reproduce(
            args.out, size=args.size, only=args.only, progress=not args.no_progress, resume=not args.restart
        )
        print(f"report: {Path(args.out) / 'report.md'}", file=sys.stderr)
        failed = [name for name, result in results.items() if not result.get("verdicts")]
        return 1 if failed else 0

    parser.set_defaults(run=run, x64=True, resumes=True)
