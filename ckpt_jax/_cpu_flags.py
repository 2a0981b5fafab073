"""The ``ckpt-jax`` program's XLA flag on the CPU: reductions kept out of YNNPACK.

XLA:CPU hands some fusions, reductions among them, to the YNNPACK library, which runs them
on its own threads. The event loops reduce over the N jobs of every fleet several times per
event (the writer count, the next event's dt, the clock path's per-phase argmin): small
reductions whose thread hand-offs cost more than the work, most on a busy machine. With
``--xla_cpu_experimental_ynn_fusion_type=`` (no fusion kind handed to YNNPACK) XLA emits
them as its own loops (docs/performance.md: what it buys on the operator's path).

The flag must be in ``XLA_FLAGS`` before JAX starts its backend, and XLA aborts the process
on a flag it does not know, so `add_reduction_flag` adds it only where this jaxlib is known
to take it: a version it was checked with, else a probe (a fresh interpreter that starts the
CPU backend with the flag), whose answer is kept per jaxlib version in ckpt_jax's cache
directory. The ``ckpt-jax`` program calls it (`ckpt_jax.cli.run`: its process is
ckpt_jax's own), like the unrolled threefry hash (`ckpt_jax._threefry`); the library never
changes ``XLA_FLAGS`` on import. ``CKPT_JAX_CPU_FLAGS=0`` in the environment leaves
``XLA_FLAGS`` as it is; so does an ``XLA_FLAGS`` that already sets the flag.

Results do not depend on it: tests/test_cpu_flags.py runs the loops in a process with the
flag and in one without, bit for bit.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from importlib import metadata
from pathlib import Path

__all__ = ["REDUCTION_FLAG", "OFF_VARIABLE", "add_reduction_flag", "flag_accepted"]

REDUCTION_FLAG = "--xla_cpu_experimental_ynn_fusion_type="
OFF_VARIABLE = "CKPT_JAX_CPU_FLAGS"

# jaxlib versions that take REDUCTION_FLAG (checked; others are probed once).
_CHECKED_VERSIONS = frozenset({"0.10.2"})


def _jaxlib_version() -> str:
    try:
        return metadata.version("jaxlib")
    except metadata.PackageNotFoundError:
        return ""


def _cache_file() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "ckpt_jax" / "xla_flags.json"


def _probe(flag: str) -> bool:
    """Whether a fresh interpreter starts JAX's CPU backend with ``flag`` alone in XLA_FLAGS."""
    env = dict(os.environ, XLA_FLAGS=flag, JAX_PLATFORMS="cpu")
    try:
        done = subprocess.run(
            [sys.executable, "-c", "import jax; jax.numpy.zeros(1).block_until_ready()"],
            env=env,
            capture_output=True,
            timeout=120,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


def flag_accepted(flag: str = REDUCTION_FLAG, version: str | None = None) -> bool:
    """Whether this jaxlib (or ``version``'s, for the cache) takes ``flag`` in XLA_FLAGS:
    known for the versions checked, else probed once and remembered per version (a cache
    that cannot be read or written only costs a probe per call)."""
    version = _jaxlib_version() if version is None else version
    if not version:
        return False
    if flag == REDUCTION_FLAG and version in _CHECKED_VERSIONS:
        return True
    path, key = _cache_file(), f"{version} {flag}"
    try:
        known = json.loads(path.read_text())
    except (OSError, ValueError):
        known = {}
    if not isinstance(known, dict):
        known = {}
    if isinstance(known.get(key), bool):
        return known[key]
    accepted = _probe(flag)
    known[key] = accepted
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(known))
    except OSError:
        pass
    return accepted


def add_reduction_flag(environ=None, flag: str = REDUCTION_FLAG) -> bool:
    """Adds ``flag`` (default `REDUCTION_FLAG`) to ``environ["XLA_FLAGS"]`` (default
    ``os.environ``); returns whether it did. Nothing changes where ``CKPT_JAX_CPU_FLAGS=0``,
    where ``XLA_FLAGS`` already names the flag (the user's value wins), or where this jaxlib
    does not take it (`flag_accepted`). Call it before JAX starts its backend: afterwards
    the backend keeps the flags it started with."""
    environ = os.environ if environ is None else environ
    if environ.get(OFF_VARIABLE, "1") == "0":
        return False
    flags = environ.get("XLA_FLAGS", "")
    if flag.split("=")[0] in flags:
        return False
    if not flag_accepted(flag):
        return False
    environ["XLA_FLAGS"] = f"{flags} {flag}".strip()
    return True
