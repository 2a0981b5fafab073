"""``python -m ckpt_jax ...`` runs the command line (`ckpt_jax.cli.main`).

Nothing here (nor in the imports of `ckpt_jax`) may start JAX's backend: ``main`` sets
the host device count (``--devices``) first, which only works before it starts.
"""

import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
