"""Run one experiment of `ckpt-jax reproduce` by name and print its verdicts.

    python experiments/run.py NAME --out DIR [--size smoke|quick|full]

The experiments themselves (what they simulate, their thresholds and figures) live in
`ckpt_jax/experiments/`, so the installed `ckpt-jax reproduce --only NAME` runs the very
same code; this script is the thin entry point for running one of them from a checkout.
`python experiments/run.py --help` lists the names.
"""

import argparse
import sys

from ckpt_jax.experiments import EXPERIMENTS, SIZES


def main(argv=None) -> int:
    by_name = {experiment.name: experiment for experiment in EXPERIMENTS}
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument(
        "name",
        choices=by_name,
        metavar="NAME",
        help="the experiment, one of:\n" + "\n".join(f"  {e.name}: {e.title}" for e in EXPERIMENTS),
    )
    parser.add_argument("--out", required=True, help="directory for NAME.json and its figures")
    parser.add_argument("--size", choices=SIZES, default="quick", help="smoke (seconds), quick (CPU), full (GPU)")
    args = parser.parse_args(argv)
    result = by_name[args.name].run(args.out, size=args.size)
    for item in result["verdicts"]:
        print(f"claim {item['sub_claim']}: {item['verdict']} — {item['why']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
