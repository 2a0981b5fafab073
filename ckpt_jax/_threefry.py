"""JAX's unrolled lowering of the threefry hash on the CPU: programs that draw compile faster.

Every random draw (`jax.random`) runs the threefry hash: 20 rounds of 32-bit integer
additions, rotations and xors. On GPUs and TPUs JAX lowers the rounds unrolled; on a CPU it
lowers them as a loop of five steps, and on XLA:CPU that loop is what makes a program with
draws slow to compile. The general loop draws as it steps where fleets fail or jitter, so
its programs compile in about two thirds of the time with the rounds unrolled, and run a
little faster (docs/performance.md).

The hash is exact integer arithmetic, so both lowerings give the same bits:
tests/test_xla_flags.py compares keys, draws of every distribution ckpt_jax uses and runs
that draw (failures, jitter, outages) with this lowering against a fresh process with JAX's
own.

`unroll_on_cpu` changes JAX's lowering for the whole process, so the library never calls it
on import: the ``ckpt-jax`` program does (`ckpt_jax.cli.run`: its process is ckpt_jax's own),
and so does the test tier.
"""

from __future__ import annotations

import functools

__all__ = ["unroll_on_cpu"]


def unroll_on_cpu() -> bool:
    """Lowers the threefry hash with its rounds unrolled on the CPU too, for the rest of the
    process; returns False (and changes nothing) where this JAX has moved the private names
    it needs, True otherwise. Calling it again changes nothing more."""
    try:
        from jax._src.interpreters import mlir
        from jax._src.random import threefry2x32

        rounds = functools.partial(threefry2x32._threefry2x32_lowering, use_rolled_loops=False)
        rule = mlir.lower_fun(rounds, multiple_results=True)
        mlir.register_lowering(threefry2x32.threefry2x32_p, rule, platform="cpu")
    except (ImportError, AttributeError, TypeError):
        return False
    return True
