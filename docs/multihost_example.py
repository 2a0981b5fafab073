"""One ensemble simulated by several processes (``docs/multihost.md``).

Every process runs this file unchanged::

    python docs/multihost_example.py NUM_PROCESSES PROCESS_ID [--host H] [--port P] [--out FILE]
    python docs/multihost_example.py [--out FILE]     # SLURM, Open MPI, Cloud TPU

Each process simulates its contiguous slice of one global ensemble (sharded over its own
local devices), then `process_allgather` collects the result arrays onto every process and
process 0 saves them to ``--out``. The result does not depend on the process count:
``tests/test_multihost.py`` runs two processes on 127.0.0.1 and compares them with a
one-process `ckpt_jax.simulate` of the whole ensemble, bit for bit.
"""

from __future__ import annotations

import argparse

import jax
import numpy as np

# The global ensemble: TOTAL fleets of N jobs, K firings each, compute jitter SIGMA drawn
# from key(SEED), under a power cap CAP. Small enough for a test; raise TOTAL for a real run.
TOTAL, N, K, SIGMA, SEED = 64, 8, 10, 0.05, 7
CAP = 0.9 * N  # power cap, in jobs at full speed
# What is compared across process counts: one dict of (TOTAL, ...) arrays, so further
# per-fleet outputs can join it.
TRACE_ARRAYS = ("fire_times", "end_times", "ok", "status", "n_events", "time")
# Observers accumulated inside the loop (no trace needed for them; here both are kept).
OBSERVED_ARRAYS = (
    "writers.time",
    "writers.window",
    "writers.excursions",
    "writers.max",
    "gaps",
    "jobs.write_time",
    "jobs.compute_time",
    "jobs.writes",
)
COMPARED = TRACE_ARRAYS + OBSERVED_ARRAYS


def global_ensemble(total: int = TOTAL, n_jobs: int = N):
    """Inputs of the whole ensemble, identical on every process (host NumPy, fixed seed)."""
    rng = np.random.default_rng(2024)
    compute = rng.uniform(8.0, 12.0, (total, n_jobs))
    write = rng.uniform(0.2, 0.4, (total, n_jobs))
    cycle = compute + write
    # Cycle positions in [0, T + d): the top end is the next cycle's 0.
    position = np.minimum(rng.uniform(0.0, 1.0, (total, n_jobs)) * cycle, np.nextafter(cycle, 0))
    return compute, write, position


def save_at():
    """What each process records: the trace and every observer."""
    import ckpt_jax as cj

    return cj.SaveAt(trace=True, writers=True, gaps=True, jobs=True)


def results(trace) -> dict:
    """The compared arrays of one slice's trace and observers, as host NumPy arrays."""

    def get(name):
        value = trace
        for part in name.split("."):
            value = getattr(value, part)
        return np.asarray(value)

    return {name: get(name) for name in COMPARED}


def _parse(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "num_processes", type=int, nargs="?", help="process count (omit both on SLURM, Open MPI or Cloud TPU)"
    )
    parser.add_argument("process_id", type=int, nargs="?", help="this process's id, 0 .. NUM_PROCESSES-1")
    parser.add_argument("--host", default="127.0.0.1", help="process 0's host (default: %(default)s)")
    parser.add_argument("--port", type=int, default=12355, help="coordinator port on --host (default: %(default)s)")
    parser.add_argument("--out", help="process 0 saves the gathered arrays here (.npz)")
    args = parser.parse_args(argv)
    if (args.num_processes is None) != (args.process_id is None):
        parser.error("give both NUM_PROCESSES and PROCESS_ID, or neither")
    return args


def main(argv=None) -> None:
    args = _parse(argv)
    # Cross-process collectives on CPU (the default in recent JAX; set for older versions).
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    if args.num_processes is None:
        jax.distributed.initialize()  # peers found from the environment (SLURM, ...)
    else:
        jax.distributed.initialize(
            f"{args.host}:{args.port}",
            num_processes=args.num_processes,
            process_id=args.process_id,
            initialization_timeout=120,
        )
    jax.config.update("jax_enable_x64", True)
    from jax.experimental import multihost_utils

    import ckpt_jax as cj

    rank, size = jax.process_index(), jax.process_count()
    assert TOTAL % size == 0, "equal slices keep process_allgather simple"

    # The global ensemble's inputs, identical on every process; this process's slice of it,
    # sharded over this process's devices. The jitter key is folded with each fleet's
    # *global* index (fleet_offset = lo), so a fleet's draws do not depend on its process.
    compute, write, position = global_ensemble()
    lo, hi = rank * TOTAL // size, (rank + 1) * TOTAL // size
    fleet = cj.Fleet(compute[lo:hi], write[lo:hi], cap=CAP)
    state = cj.state_from_positions(fleet, position[lo:hi])
    trace = cj.simulate(
        fleet,
        state,
        K,
        jitter=SIGMA,
        key=jax.random.key(SEED),
        fleet_offset=lo,
        devices="all",
        throw=True,
        save=save_at(),
    )
    mine = results(trace)

    # A collective: every process calls it, and every process gets the (TOTAL, ...) arrays.
    gathered = {name: np.asarray(multihost_utils.process_allgather(a, tiled=True)) for name, a in mine.items()}
    if rank == 0:
        period = np.nanmean(np.diff(gathered["fire_times"], axis=-1))
        print(
            f"{size} processes, {jax.device_count()} devices: {int(gathered['ok'].sum())}/{TOTAL} "
            f"fleets ok, mean period {period:.6f}"
        )
        if args.out:
            np.savez(args.out, **gathered)
    jax.distributed.shutdown()


if __name__ == "__main__":
    main()
