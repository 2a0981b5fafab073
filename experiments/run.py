"""Run one experiment of `ckpt-jax reproduce` by name and print its verdicts.

    python experiments/run.py NAME --out DIR [--size smoke|quick|full]

The experiments themselves (what they simulate, their thresholds and figures) live in
`ckpt_jax/experiments/`, so the installed `ckpt-jax reproduce --only NAME` runs the very
same code; this script is the thin entry point for running one of them from a checkout.
`python experiments/run.py --help` lists the names.
"""

import argparse
import importlib
import sys

from ckpt_jax.experiments import REGISTRY, SIZES


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("name", choices=REGISTRY, help="the experiment: " + ", ".join(REGISTRY))
    parser.add_argument("--out", required=True, help="directory for NAME.json and its figures")
    parser.add_argument("--size", choices=SIZES, default="quick", help="smoke (seconds), quick (CPU), full (GPU)")
    args = parser.parse_args(argv)
    experiment = importlib.import_module(f"ckpt_jax.experiments.{args.name}")
    result = experiment.run(args.out, size=args.size)
    for item in result["verdicts"]:
        print(f"claim {item['sub_claim']}: {item['verdict']} — {item['why']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
