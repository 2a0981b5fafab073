"""Closed forms from the analysis (docs/model.md §3), to compare the simulator against.

These are the *other* oracle: tests compare autodiff through the engine with them, never
a closed form with itself.
"""

from __future__ import annotations

import math

import numpy as np

from .model import Throughput, throughput_table

__all__ = ["gap_eigenvalues", "n_expanding", "synchronous_period"]


def gap_eigenvalues(n_jobs: int, throughput: Throughput = None) -> np.ndarray:
    """Eigenvalues of the gap return map in the fully overlapping branch (claim 2, Thm 8).

    ``λ_j = (N − j) f(j) / (j f(N − j))`` for j = 1..N−1 (``(N − j)/j`` for f ≡ 1).

    Args:
      n_jobs: N >= 2.
      throughput: f as accepted by `Fleet` (None, preset name, callable, table).

    Returns:
      (N-1,) float64 array, λ_1 first (decreasing in j).
    """
    if isinstance(n_jobs, bool) or not isinstance(n_jobs, (int, np.integer)) or n_jobs < 2:
        raise ValueError(f"n_jobs must be an integer >= 2, got {n_jobs!r}")
    f = throughput_table(throughput, int(n_jobs))
    if f.ndim != 1:
        raise ValueError("throughput must describe one fleet (a table of length N + 1)")
    j = np.arange(1, n_jobs)
    return (n_jobs - j) * f[j] / (j * f[n_jobs - j])


def n_expanding(n_jobs: int) -> int:
    """Number of expanding directions of the synchronous state, ⌈N/2⌉ − 1 (claim 2)."""
    return math.ceil(n_jobs / 2) - 1


def synchronous_period(compute: float, write: float, n_jobs: int, cap=None, throughput: Throughput = None) -> float:
    """Cycle time of N identical jobs all in phase: N compute at min(1, C/N), N write at f(N)/N."""
    f = throughput_table(throughput, int(n_jobs))
    speed = 1.0 if cap is None else min(1.0, cap / n_jobs)
    return compute / speed + write * n_jobs / f[n_jobs]
