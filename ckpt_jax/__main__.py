"""``python -m ckpt_jax ...`` runs the command line (`ckpt_jax.cli.run`, as ``ckpt-jax``).

Nothing here (nor in the imports of `ckpt_jax`) may start JAX's backend: ``main`` sets
the host device count (``--devices``) first, which only works before it starts.
"""

from .cli import run

if __name__ == "__main__":
    run()
