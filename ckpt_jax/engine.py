"""Compatibility names: `ckpt_jax.engine` was the event engine's module before the loops
moved to `ckpt_jax._loops` and the front door to `ckpt_jax._simulate`. Use the names of
`ckpt_jax` itself (`cj.simulate`, `cj.Trace`, `cj.STATUS_*`) or `ckpt_jax.loop`."""

from ._params import flat_params, jitter_work
from ._snapping import SNAP_ULPS
from ._validate import check_method, default_max_events, time_bound, trace_bytes
from ._simulate import (
    STATUS_MAX_EVENTS,
    STATUS_NONFINITE,
    STATUS_OK,
    STATUS_QUEUE_OVERFLOW,
    STATUS_STALLED,
    Trace,
    simulate,
)
from ._status import describe_status

__all__ = [
    "Trace", "simulate", "describe_status", "jitter_work", "default_max_events", "flat_params", "time_bound",
    "trace_bytes", "SNAP_ULPS", "STATUS_OK", "STATUS_MAX_EVENTS", "STATUS_NONFINITE", "STATUS_QUEUE_OVERFLOW",
    "STATUS_STALLED",
    "check_method",
]
