"""Atomic file writes: a file is either complete or absent, never half written.

What the command line, `ckpt_jax.ensemble` and the experiments write their results with: an
interrupted or failed write leaves the file as it was before, so a rerun can resume from
the files that are there.
"""

from ._io import atomic_write, atomic_write_bytes

__all__ = ["atomic_write", "atomic_write_bytes"]
