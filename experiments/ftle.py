"""Claim 5 (second part): finite-time separation rate vs N and load (see ckpt_jax.experiments.ftle)."""

import argparse
import sys

from ckpt_jax.experiments import SIZES, ftle


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", required=True, help="directory for ftle.json and the figures")
    parser.add_argument("--size", choices=SIZES, default="quick", help="smoke (seconds), quick (CPU), full (GPU)")
    args = parser.parse_args(argv)
    result = ftle.run(args.out, size=args.size)
    for item in result["verdicts"]:
        print(f"claim {item['sub_claim']}: {item['verdict']} — {item['why']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
