"""The aggregate write throughput f(n): presets and the table the engine indexes by n_w
(docs/model.md §1). Validated on the host, before any tracing."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import jax
import numpy as np

from ._policies import THROUGHPUT_PRESETS
from ._validate import real_array

__all__ = ["THROUGHPUT_PRESETS", "Throughput", "throughput_table"]

ArrayLike = np.ndarray | jax.Array | Sequence[float] | float
# None (f ≡ 1), a preset's name (THROUGHPUT_PRESETS), a function of n, or the table f(0..N).
Throughput = str | Callable[[int], float] | ArrayLike | None


def throughput_table(throughput: Throughput, n_jobs: int, batch_shape=()) -> np.ndarray:
    """Tabulates f(n) for n = 0..N as a float64 array of shape (*batch, N + 1).

    Args:
      throughput: None (f ≡ 1), a preset name from `THROUGHPUT_PRESETS`, a callable
        evaluated at n = 1..N, or an array of length N + 1 indexed by n (index 0 unused),
        optionally with leading batch axes.
      n_jobs: N, the number of job slots.

    Returns:
      The table with index 0 set to 1 (unused), validated positive and finite.
    """
    if throughput is None:
        table = np.ones(n_jobs + 1)
    elif isinstance(throughput, str):
        if throughput not in THROUGHPUT_PRESETS:
            raise ValueError(f"throughput preset must be one of {sorted(THROUGHPUT_PRESETS)}, got {throughput!r}")
        return throughput_table(THROUGHPUT_PRESETS[throughput], n_jobs, batch_shape)
    elif callable(throughput):
        values = []
        for n in range(1, n_jobs + 1):
            try:
                values.append(float(throughput(n)))
            except Exception as err:  # noqa: BLE001 - report any failure of the user's f
                raise ValueError(f"throughput(n) failed at n={n}: {err}") from None
        table = np.asarray([1.0] + values)
    else:
        table = real_array("throughput", throughput)
        if table.ndim < 1 or table.shape[-1] != n_jobs + 1:
            raise ValueError(
                f"throughput array must have length N + 1 = {n_jobs + 1} along its last axis "
                f"(index n = 0..N, index 0 unused), got shape {table.shape}"
            )
        table = table.copy()
        table[..., 0] = 1.0
    bad = ~(np.isfinite(table[..., 1:]) & (table[..., 1:] > 0))
    if bad.any():
        n = int(np.argwhere(bad)[0][-1]) + 1
        raise ValueError(
            f"throughput f(n) must be finite and > 0 for n = 1..{n_jobs}; f({n}) = {table[..., n].ravel()[0]!r}"
        )
    return table
