"""Shared test setup: float64 is the verification dtype (STYLE.md), so enable x64 at import.

Hypothesis runs derandomized by default (the ``deterministic`` profile below): every run of the
default tier, on every clone and in CI, draws the same examples, so it is green or red for
the code alone. Per-test ``@settings(max_examples=...)`` inherit this (a settings object
takes its unset fields from the profile loaded when it is made, and this file loads the
profile before any test module is imported). Random exploration is a separate run, to do
before resolving an issue or releasing:

    CKPT_JAX_HYPOTHESIS=explore python -m pytest          # or --hypothesis-profile=explore

The ``explore`` profile draws fresh random examples on every run, CKPT_JAX_EXPLORE_FACTOR
(default 4) times each test's ``max_examples``; a failure prints the ``@reproduce_failure``
blob that replays it. Add ``-m slow`` (or ``-m ''``) to explore the heavy tier too.

Each test module's compiled programs are dropped when the module ends (`jax.clear_caches`):
XLA:CPU maps every compiled executable's code into the process, and the whole default tier
in one process compiles enough programs to exhaust the kernel's limit on memory mappings
(vm.max_map_count, 65530 here), which ends the run with a segmentation fault in the compiler.
Without this, two modules (test_simulate, test_methods) leave 8,758 mappings; with it, 598.
``CKPT_JAX_REPORT_MAPPINGS=1 pytest -s`` prints the count after each module.

Compiled programs are shared on disk (JAX's persistent compilation cache, in
``.pytest_cache/d/ckpt_jax_xla``): the two xdist workers do not share memory, and each module
drops its programs when it ends, so without it a program that two modules (or both workers)
need is compiled twice. An entry is keyed by the program's HLO, the compile options and the
jax/jaxlib versions, so a changed program is compiled afresh; writes and evictions take a
file lock (a size limit turns JAX's locking on), so concurrent workers are safe. Entries
persist between runs (a rerun reuses them); ``CKPT_JAX_XLA_CACHE=0`` turns the cache off, and
``pytest --cache-clear`` empties it.
"""

import gc
import logging
import os
import re
import subprocess
import sys

# XLA:CPU's classic fusion emitters (not its newer MLIR ones) and one codegen split (the tier
# runs a worker per core, so XLA's parallel split only adds work): the tier's programs compile
# in about two thirds of the time (compilation is most of the tier's time), and the compiled
# code gives the same numbers: tests/test_xla_flags.py compares representative runs (the
# general loop with every mechanism and observer, f(n), sizes with delay and asynchronous
# checkpoints, variants, FIFO, outages, a Jacobian by jacfwd) under these flags and under XLA's
# defaults bit for bit. LLVM levels 0 and 1 change numbers (level 1 turned a sized fleet with
# delay and asynchronous checkpoints of tests/test_sizes.py into a MAX_EVENTS run), so neither
# is used. Set here, before JAX starts its backend, so that the xdist workers and the tier's
# subprocesses (notebooks, sharding, the CLI's) take it. ``CKPT_JAX_TEST_XLA_FLAGS=0`` compiles
# everything with XLA's defaults, as users do (run the tier so before a release); a jaxlib that
# no longer knows a flag (XLA aborts on an unknown one) gets the defaults too (probed once, in
# the controller).
TEST_XLA_FLAGS = "--xla_cpu_use_fusion_emitters=false --xla_cpu_parallel_codegen_split_count=1"


def _add_test_xla_flags() -> None:
    flags = os.environ.get("XLA_FLAGS", "")
    if os.environ.get("CKPT_JAX_TEST_XLA_FLAGS", "1") == "0" or TEST_XLA_FLAGS in flags:
        return
    probe = subprocess.run(
        [sys.executable, "-c", "import jax; jax.numpy.zeros(1).block_until_ready()"],
        env=dict(os.environ, XLA_FLAGS=f"{flags} {TEST_XLA_FLAGS}".strip(), JAX_PLATFORMS="cpu"),
        capture_output=True,
        timeout=120,
    )
    if probe.returncode == 0:
        os.environ["XLA_FLAGS"] = f"{flags} {TEST_XLA_FLAGS}".strip()


_add_test_xla_flags()

import jax  # noqa: E402  (after the flags: JAX reads XLA_FLAGS when its backend starts)
import pytest  # noqa: E402
from hypothesis import settings  # noqa: E402

from ckpt_jax._threefry import unroll_on_cpu  # noqa: E402

jax.config.update("jax_enable_x64", True)


# The threefry hash's rounds unrolled on the CPU, as the ckpt-jax program lowers them
# (ckpt_jax/_threefry.py: same bits, programs that draw compile in about two thirds of the
# time). Off, like the XLA flags, with ``CKPT_JAX_TEST_XLA_FLAGS=0``; tests/test_xla_flags.py
# checks the bits.
UNROLLED_THREEFRY = os.environ.get("CKPT_JAX_TEST_XLA_FLAGS", "1") != "0" and unroll_on_cpu()

# The default tier: the same examples on every run (derandomize draws them from a seed fixed
# by each test), nothing read from or written to an example database, no per-example deadline
# (the first example of a test pays JIT compilation).
settings.register_profile("deterministic", derandomize=True, database=None, deadline=None, print_blob=True)
# Exploration: random examples on every run; max_examples is scaled per test below.
settings.register_profile("explore", derandomize=False, database=None, deadline=None, print_blob=True)
settings.load_profile(os.environ.get("CKPT_JAX_HYPOTHESIS", "deterministic"))


# The longest test modules of the default tier (summed test time, longest first). pytest-xdist's
# ``--dist loadfile --no-loadscope-reorder`` (pyproject.toml) hands out modules in collection
# order, so collecting these first keeps a long module from starting last while the other worker
# idles (longest-first scheduling). Without ``--no-loadscope-reorder`` xdist (>= 3.5) starts the
# modules with the most tests first instead, whatever their time.
LONGEST_FIRST = (  # by their wall time in a full run of the tier (CKPT_JAX_COMPILE_LOG, 2026-12-05)
    "test_notebooks",
    "test_design",
    "test_failures",
    "test_assess",
    "test_realistic_oracle",
    "test_realistic",
    "test_sharding",
    "test_cli_design",
    "test_observers",
    "test_coupling",
    "test_sizes",
    "test_failures_oracle",
    "test_cli",
    "test_methods",
    "test_experiments_ensembles",
    "test_queue_oracle",
    "test_lyapunov",
    "test_design_staggers",
    "test_ensemble",
    "test_experiments_intervals",
    "test_xla_flags",
    "test_experiments_anonymity",
    "test_experiments_common_causes",
    "test_recovery_oracle",
    "test_experiments_cooperative",
    "test_maps",
    "test_lint",
    "test_engine_oracle",
    "test_weibull_failures",
    "test_labelled",
    "test_theory_two_level",
    "test_multihost",
    "test_outages_oracle",
    "test_simulate",
    "test_theory_failures",
    "test_trust_loader",
    "test_compare",
    "test_cli_assess",
)


def pytest_configure(config):
    """Shares compiled programs between modules, workers and runs through a disk cache (see
    the module docstring); off with ``CKPT_JAX_XLA_CACHE=0`` or without pytest's cache."""
    cache = getattr(config, "cache", None)
    if cache is None or os.environ.get("CKPT_JAX_XLA_CACHE", "1") == "0":
        return
    jax.config.update("jax_compilation_cache_dir", str(cache.mkdir("ckpt_jax_xla")))
    # Only programs that compile in over half a second: a lookup alone is cheaper down to about
    # 0.05 s (a 0.28 s program loads in 0.064 s), but with a size limit JAX scans every entry of
    # the cache, under its lock, at each write, and thousands of small entries made the tier
    # slower (docs/performance.md, "Tried and not kept").
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.5)
    # A size limit: least recently used entries are evicted, under JAX's file lock.
    jax.config.update("jax_compilation_cache_max_size", 2 * 2**30)


def pytest_collection_modifyitems(items):
    """Collects the `LONGEST_FIRST` modules first (the rest keep their order); under the
    ``explore`` profile, runs CKPT_JAX_EXPLORE_FACTOR times each test's examples."""
    rank = {name: k for k, name in enumerate(LONGEST_FIRST)}
    order = {id(item): k for k, item in enumerate(items)}
    items.sort(key=lambda item: (rank.get(item.module.__name__.rpartition(".")[2], len(rank)), order[id(item)]))
    if settings.get_current_profile_name() != "explore":
        return
    factor = int(os.environ.get("CKPT_JAX_EXPLORE_FACTOR", 4))
    scaled = set()
    for item in items:
        test = getattr(item, "obj", None)
        # Hypothesis keeps a test's settings on this attribute and reads it at call time.
        chosen = getattr(test, "_hypothesis_internal_use_settings", None)
        if chosen is None or id(test) in scaled:
            continue
        scaled.add(id(test))
        test._hypothesis_internal_use_settings = settings(
            chosen, max_examples=chosen.max_examples * factor, derandomize=False, database=None
        )


def _mappings() -> int:
    try:
        with open("/proc/self/maps") as fh:
            return sum(1 for _ in fh)
    except OSError:
        return -1


@pytest.fixture(autouse=True, scope="module")
def _release_compiled_programs():
    yield
    jax.clear_caches()
    gc.collect()
    if os.environ.get("CKPT_JAX_REPORT_MAPPINGS"):
        print(f"\n[memory mappings after the module: {_mappings()}]")


# Where the tier's time goes: ``CKPT_JAX_COMPILE_LOG=file.jsonl pytest`` appends one line per
# test with its wall time and the seconds JAX spent tracing, lowering and compiling in it
# (summed from jax.monitoring's duration events); each xdist worker appends its own lines.
_COMPILE_EVENTS = {
    "/jax/core/compile/jaxpr_trace_duration": "trace",
    "/jax/core/compile/jaxpr_to_mlir_module_duration": "lower",
    "/jax/core/compile/backend_compile_duration": "compile",
}
_compile_seconds: dict[str, float] = {}


def _count_compile_time(event: str, seconds: float, **_) -> None:
    name = _COMPILE_EVENTS.get(event)
    if name is not None:
        _compile_seconds[name] = _compile_seconds.get(name, 0.0) + seconds
        if name == "compile":
            _compile_seconds["programs"] = _compile_seconds.get("programs", 0) + 1


_program_seconds: dict[str, list] = {}


class _ProgramLog(logging.Handler):
    """Compile seconds per program name, from JAX's ``jax_log_compiles`` messages."""

    pattern = re.compile(r"Finished XLA compilation of (.+) in ([0-9.e+-]+) sec")

    def emit(self, record):
        match = self.pattern.match(record.getMessage())
        if match:
            entry = _program_seconds.setdefault(match[1], [0, 0.0])
            entry[0] += 1
            entry[1] += float(match[2])


if os.environ.get("CKPT_JAX_COMPILE_LOG"):
    jax.monitoring.register_event_duration_secs_listener(_count_compile_time)
    jax.config.update("jax_log_compiles", True)
    logging.getLogger("jax._src.dispatch").addHandler(_ProgramLog())

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(item, nextitem):
        import json
        import time

        _compile_seconds.clear()
        _program_seconds.clear()
        start = time.perf_counter()
        yield
        line = {"test": item.nodeid, "wall": time.perf_counter() - start, **_compile_seconds}
        line["by_program"] = _program_seconds
        with open(os.environ["CKPT_JAX_COMPILE_LOG"], "a") as fh:
            fh.write(json.dumps(line) + "\n")
