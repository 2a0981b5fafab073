"""Claims 1 and 8a: pairwise neutrality and heterogeneous-pair coupling (see ckpt_jax.experiments.pairwise_neutrality)."""

import argparse
import sys

from ckpt_jax.experiments import SIZES, pairwise_neutrality


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", required=True, help="directory for pairwise_neutrality.json and the figures")
    parser.add_argument("--size", choices=SIZES, default="quick", help="smoke (seconds), quick (CPU), full (GPU)")
    args = parser.parse_args(argv)
    result = pairwise_neutrality.run(args.out, size=args.size)
    for item in result["verdicts"]:
        print(f"claim {item['sub_claim']}: {item['verdict']} — {item['why']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
