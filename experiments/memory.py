"""Claim 5 (last part): no memory of the launch beyond the firing order (see ckpt_jax.experiments.memory)."""

import argparse
import sys

from ckpt_jax.experiments import SIZES, memory


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", required=True, help="directory for memory.json and the figures")
    parser.add_argument("--size", choices=SIZES, default="quick", help="smoke (seconds), quick (CPU), full (GPU)")
    args = parser.parse_args(argv)
    result = memory.run(args.out, size=args.size)
    for item in result["verdicts"]:
        print(f"claim {item['sub_claim']}: {item['verdict']} — {item['why']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
