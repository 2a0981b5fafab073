"""``python -m ckpt_jax ...`` runs the command line (`ckpt_jax.cli.main`)."""

import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
