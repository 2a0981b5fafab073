"""Host-side checks of failure domains, common-cause outages and the restart stagger
(docs/model.md §1f), for `ckpt_jax.Fleet`.

Everything here runs on concrete values before any tracing: a bad value is a `ValueError`
that names the argument and the allowed range.

Conventions. ``domain`` is (*B, N) ints in [0, D); the number of domains D is the last axis
of a per-domain ``outage_mtbf`` ((D,) or (*B, D)), else one more than the largest domain of
an active job. ``outage_times`` is one array of (time, domain) rows per fleet, shape (K, 2)
(the same rows for every fleet) or (*B, K, 2), times > 0; rows sorted by time within each fleet, padded
at the end with rows whose time is NaN or +inf (their domain is ignored).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ._validate import broadcast_to, check_range, real_array

__all__ = ["Outages", "check_outages"]


class Outages(NamedTuple):
    """The checked outage inputs of a batch of fleets, as NumPy arrays.

    Attributes:
      domain: (*B, N) int32 each job's failure domain, in [0, D).
      mtbf: (*B, D) float64 mean time between outages of each domain (inf: none drawn).
      times: (*B, K) float64 replayed outage instants, sorted, +inf padded (K may be 0).
      domains: (*B, K) int32 the domain of each replayed instant (0 in padding).
      stagger: (*B,) float64 the restart stagger Δ >= 0.
      drawn: outages are drawn from ``mtbf`` (some entry finite).
      listed: outages are replayed from ``times`` (some entry finite).
    """

    domain: np.ndarray
    mtbf: np.ndarray
    times: np.ndarray
    domains: np.ndarray
    stagger: np.ndarray
    drawn: bool
    listed: bool


def _ints(name: str, value) -> np.ndarray:
    """``value`` as an int64 array; `ValueError` naming ``name`` for non-integers."""
    arr = real_array(name, value)
    if not np.all(np.isfinite(arr)) or np.any(arr != np.round(arr)):
        raise ValueError(f"{name} must hold integers (domain indices), got {value!r}")
    return arr.astype(np.int64)


def _domains(domain, mtbf, job_shape, active) -> tuple[np.ndarray, int, np.ndarray | None]:
    """The (*B, N) domains, D and ``outage_mtbf`` as a float array (None where not given)."""
    dom = broadcast_to(
        "domain", np.zeros(job_shape, np.int64) if domain is None else _ints("domain", domain), job_shape, per_job=True
    )
    if np.any(dom < 0):
        raise ValueError(f"domain must hold integers >= 0 (domain indices), found {int(dom.min())}")
    mtbf_np = None if mtbf is None else real_array("outage_mtbf", mtbf)
    if mtbf_np is not None and mtbf_np.ndim >= 1:
        n_domains = mtbf_np.shape[-1]
    else:
        n_domains = int(np.max(np.where(active, dom, 0), initial=0)) + 1
    if n_domains < 1:
        raise ValueError("outage_mtbf must give at least one domain (its last axis is the domain axis)")
    if np.any(active & (dom >= n_domains)):
        raise ValueError(
            f"domain must lie in [0, {n_domains}) (the {n_domains} domains of outage_mtbf's last axis), "
            f"found {int(np.max(np.where(active, dom, 0)))}"
        )
    return np.where(active, dom, 0).astype(np.int32), n_domains, mtbf_np


def _mtbf(mtbf_np, n_domains: int, batch_shape, dtype) -> np.ndarray:
    """``outage_mtbf`` broadcast to (*B, D), checked > 0 (inf: no outages there)."""
    shape = batch_shape + (n_domains,)
    if mtbf_np is None:
        return np.full(shape, np.inf)
    try:
        arr = np.broadcast_to(mtbf_np, shape).astype(np.float64)
    except ValueError:
        raise ValueError(
            f"outage_mtbf must be a scalar, one per domain (D,) or (*B, D) = {shape}, got shape {mtbf_np.shape}"
        ) from None
    if np.any(np.isnan(arr) | (arr <= 0)):
        raise ValueError(f"outage_mtbf must be > 0 (inf: no outages in that domain), got {mtbf_np!r}")
    check_range("outage_mtbf", np.where(np.isfinite(arr), arr, 1.0), dtype)
    return arr


def _times(times, n_domains: int, batch_shape, dtype) -> tuple[np.ndarray, np.ndarray]:
    """``outage_times`` as (*B, K) times (+inf padded) and (*B, K) domains, checked."""
    rows = real_array("outage_times", times)
    if rows.ndim < 2 or rows.shape[-1] != 2:
        raise ValueError(
            f"outage_times must have shape (K, 2) or (*B, K, 2) = {batch_shape} + (K, 2): rows of (time, domain); "
            f"got shape {rows.shape}"
        )
    try:
        rows = np.broadcast_to(rows, batch_shape + rows.shape[-2:])
    except ValueError:
        raise ValueError(
            f"outage_times must have shape (K, 2) or (*B, K, 2) with *B = {batch_shape}, got shape {rows.shape}"
        ) from None
    time, dom = rows[..., 0], rows[..., 1]
    padding = np.isnan(time) | (time == np.inf)
    time = np.where(padding, np.inf, time)
    if np.any(~padding & ~(time > 0)):
        raise ValueError("outage_times must have times > 0 (pad with NaN or +inf), found one <= 0 or -inf")
    check_range("outage_times", np.where(padding, 1.0, time), dtype)
    with np.errstate(invalid="ignore"):  # inf - inf in the padding
        unsorted = np.any(np.diff(time, axis=-1) < 0)
    if unsorted:
        raise ValueError(
            "outage_times must be sorted by time within each fleet, padding (NaN or +inf times) at the end"
        )
    bad = ~padding & ~(np.isfinite(dom) & (dom == np.round(dom)) & (dom >= 0) & (dom < n_domains))
    if np.any(bad):
        raise ValueError(
            f"outage_times must name domains in [0, {n_domains}) (integers, the second column); "
            f"found {float(dom[bad].ravel()[0])!r}"
        )
    return time.astype(np.float64), np.where(padding, 0, dom).astype(np.int32)


def check_outages(domain, outage_mtbf, outage_times, restart_stagger, job_shape, active, dtype) -> Outages:
    """The outage inputs of `ckpt_jax.Fleet` checked and broadcast (docs/model.md §1f)."""
    batch_shape = tuple(job_shape[:-1])
    if outage_mtbf is not None and outage_times is not None:
        raise ValueError(
            "outage_mtbf and outage_times exclude each other: outages are drawn (outage_mtbf) or replayed "
            "(outage_times); give one"
        )
    active = np.broadcast_to(active, job_shape)
    dom, n_domains, mtbf_np = _domains(domain, outage_mtbf, job_shape, active)
    mtbf = _mtbf(mtbf_np, n_domains, batch_shape, dtype)
    if outage_times is None:
        times, domains = np.zeros(batch_shape + (0,)), np.zeros(batch_shape + (0,), np.int32)
    else:
        times, domains = _times(outage_times, n_domains, batch_shape, dtype)
    stagger = broadcast_to("restart_stagger", real_array("restart_stagger", restart_stagger), batch_shape).astype(
        np.float64
    )
    if np.any(~np.isfinite(stagger) | (stagger < 0)):
        raise ValueError(f"restart_stagger must be finite and >= 0, got {restart_stagger!r}")
    check_range("restart_stagger", np.where(stagger > 0, stagger, 1.0), dtype)
    return Outages(
        domain=np.ascontiguousarray(dom),
        mtbf=mtbf,
        times=times,
        domains=domains,
        stagger=stagger,
        drawn=bool(np.any(np.isfinite(mtbf))),
        listed=bool(np.any(np.isfinite(times))),
    )
