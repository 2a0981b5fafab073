"""Compatibility names: `ckpt_jax.fast` held the FIFO and clock loops before they moved to
`ckpt_jax._loops` (`virtual`, `fifo`, `clock`). The path selection stays public here."""

from ._loops import FIFO_MIN_JOBS, PATHS, choose_paths, clock_eligible, fifo_applies, fifo_eligible
from ._loops.fifo import ring_ranks

__all__ = ["FIFO_MIN_JOBS", "PATHS", "choose_paths", "clock_eligible", "fifo_applies", "fifo_eligible", "ring_ranks"]
