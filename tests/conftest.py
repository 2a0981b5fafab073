"""Shared test setup: float64 is the verification dtype (STYLE.md), so enable x64 at import.

Each test module's compiled programs are dropped when the module ends (`jax.clear_caches`):
XLA:CPU maps every compiled executable's code into the process, and the whole default tier
in one process compiles enough programs to exhaust the kernel's limit on memory mappings
(vm.max_map_count, 65530 here), which ends the run with a segmentation fault in the compiler.
Without this, two modules (test_engine, test_fast) leave 8,758 mappings; with it, 598.
``CKPT_JAX_REPORT_MAPPINGS=1 pytest -s`` prints the count after each module.
"""

import gc
import os

import jax
import pytest

jax.config.update("jax_enable_x64", True)


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
