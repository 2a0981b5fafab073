"""What storing an ensemble costs: today's ``chunk-*.npz`` files against a zarr group.

The arrays are those of `run_ensemble` chunks with ``SaveAt(trace=False, writers=True,
gaps=True, jobs=True)`` (the "lean" layout, the CLI's) and, as a second layout, with the
(B, N, K) trace too. Random numbers stand in for results (the stores do not care), so
no simulation runs. Per layout and store, in one process and interleaved (so the ratios
compare like with like on a shared machine):

  write     each chunk written as `run_ensemble` writes it: npz through `atomic_write`
            (temporary file, fsync, rename); zarr as one region of arrays chunked one
            `run_ensemble` chunk per zarr chunk (zarr's default codec, zstd; and none)
  read      every chunk back into memory (npz: `np.load` of every file, then concatenated,
            as a resume does; zarr: ``xarray.open_zarr(dir).load()`` and ``zarr`` itself)
  open+min  ``ds.gaps.min("cycle")`` from a closed store: `ckpt_jax.open_ensemble` on the
            npz store against ``xarray.open_zarr`` (what a notebook cell does)

and each store's bytes and files on disk. Best of ``--repeats``, the stores in turn (wall
and CPU seconds; compare the ratios of one run).

Usage: python benchmarks/ensemble_store.py [--fleets 20000] [--chunk-size 2000] [--jobs 32]
       [--fires 200] [--trace-fleets 4000] [--repeats 5] [--out results/....json]

zarr does not fsync what it writes (`atomic_write` does, for every npz chunk): its write
times leave out what durability would cost it.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np

from ckpt_jax._manifest import FORMAT
from ckpt_jax.labelled import _VARIABLES


def chunk_arrays(rng, size: int, n_jobs: int, n_fires: int, trace: bool) -> dict:
    """One chunk's arrays, in the shapes and dtypes `run_ensemble` stores."""
    arrays = {
        "n_events": rng.integers(0, 10**6, size).astype(np.int32),
        "time": rng.random(size),
        "writers_time": rng.random((size, n_jobs + 1)),
        "writers_window": rng.random((size, 2)),
        "writers_excursions": rng.integers(0, 500, (size, n_jobs + 1)).astype(np.int32),
        "writers_max": rng.integers(0, n_jobs, size).astype(np.int32),
        "gaps": rng.random((size, n_fires)),
        "jobs_write_time": rng.random((size, n_jobs)),
        "jobs_compute_time": rng.random((size, n_jobs)),
        "jobs_writes": rng.integers(0, n_fires, (size, n_jobs)).astype(np.int32),
        "ok": np.ones(size, bool),
        "status": np.zeros(size, np.int32),
    }
    if trace:
        arrays["fire_times"] = rng.random((size, n_jobs, n_fires))
        arrays["end_times"] = rng.random((size, n_jobs, n_fires))
    return arrays


def write_npz(out: Path, chunks: list) -> None:
    from ckpt_jax._io import atomic_write
    from ckpt_jax.ensemble import _chunk_name, _write_npz

    out.mkdir(parents=True)
    manifest = {"n_fleets": sum(len(c["ok"]) for c in chunks), "chunk_size": len(chunks[0]["ok"])}
    (out / "manifest.json").write_text(json.dumps({"format": FORMAT, **manifest, "fingerprint": "0" * 64}))
    for index, arrays in enumerate(chunks):
        tags = {"chunk_index": np.int64(index), "fingerprint": np.str_("0" * 64)}
        atomic_write(out / _chunk_name(index), lambda handle, a=arrays, t=tags: _write_npz(handle, {**a, **t}))


def read_npz(out: Path, n_chunks: int) -> dict:
    from ckpt_jax.ensemble import _chunk_name

    parts = []
    for index in range(n_chunks):
        with np.load(out / _chunk_name(index), allow_pickle=False) as npz:
            parts.append({name: npz[name] for name in npz.files if name not in ("chunk_index", "fingerprint")})
    return {name: np.concatenate([part[name] for part in parts]) for name in parts[0]}


def write_zarr(out: Path, chunks: list, compressed: bool) -> None:
    import zarr

    n_fleets = sum(len(chunk["ok"]) for chunk in chunks)
    size = len(chunks[0]["ok"])
    group = zarr.open_group(out, mode="w", zarr_format=3)
    group.attrs["manifest"] = {"format": "ckpt_jax.ensemble/1", "fingerprint": "0" * 64}
    extra = {} if compressed else {"compressors": None}
    targets = {}
    for name, value in chunks[0].items():
        dims = ["fleet", *_VARIABLES[name][0]]
        targets[name] = group.create_array(
            name,
            shape=(n_fleets,) + value.shape[1:],
            chunks=(size,) + value.shape[1:],
            dtype=value.dtype,
            dimension_names=dims,
            fill_value=0,
            **extra,
        )
    zarr.consolidate_metadata(out)  # what xarray.open_zarr looks for first
    start = 0
    for arrays in chunks:
        stop = start + len(arrays["ok"])
        for name, value in arrays.items():
            targets[name][start:stop] = value
        start = stop


def disk(out: Path) -> tuple:
    files = [p for p in out.rglob("*") if p.is_file()]
    return sum(p.stat().st_size for p in files), len(files)


def interleaved(cases: dict, repeats: int) -> dict:
    """``{name: (best wall s, best CPU s)}`` of each case, the cases run in turn ``repeats``
    times (so a busy spell of a shared machine hits every case alike). CPU time is that of
    every thread of the process (zarr reads and writes on a thread pool)."""
    best = {name: [np.inf, np.inf] for name in cases}
    for _ in range(repeats):
        for name, case in cases.items():
            wall, cpu = time.perf_counter(), time.process_time()
            case()
            best[name][0] = min(best[name][0], time.perf_counter() - wall)
            best[name][1] = min(best[name][1], time.process_time() - cpu)
    return best


def measure(layout: str, args, scratch: Path) -> dict:
    import xarray
    import zarr

    import ckpt_jax as cj

    rng = np.random.default_rng(0)
    n_chunks = args.fleets // args.chunk_size
    chunks = [chunk_arrays(rng, args.chunk_size, args.jobs, args.fires, layout == "trace") for _ in range(n_chunks)]
    path = {name: scratch / f"{layout}-{name}" for name in ("npz", "zarr", "zarr-uncompressed")}

    def fresh(name):
        shutil.rmtree(path[name], ignore_errors=True)
        return path[name]

    writes = interleaved(
        {
            "npz": lambda: write_npz(fresh("npz"), chunks),
            "zarr": lambda: write_zarr(fresh("zarr"), chunks, compressed=True),
            "zarr-uncompressed": lambda: write_zarr(fresh("zarr-uncompressed"), chunks, compressed=False),
        },
        args.repeats,
    )
    reads = interleaved(
        {
            "npz": lambda: read_npz(path["npz"], n_chunks),
            "zarr": lambda: xarray.open_zarr(path["zarr"]).load(),
            "zarr-uncompressed": lambda: xarray.open_zarr(path["zarr-uncompressed"]).load(),
            "zarr-only": lambda: {k: a[...] for k, a in zarr.open_group(path["zarr"], mode="r").arrays()},
        },
        args.repeats,
    )
    # What a notebook cell does: open the closed store, then the smallest gap of each fleet.
    cells = interleaved(
        {
            "npz": lambda: cj.open_ensemble(path["npz"]).gaps.min("cycle").values,
            "zarr": lambda: xarray.open_zarr(path["zarr"]).gaps.min("cycle").values,
        },
        args.repeats,
    )
    row: dict = {
        "layout": layout,
        "chunks": n_chunks,
        "bytes_in_memory": sum(v.nbytes for chunk in chunks for v in chunk.values()),
    }
    for name, where in path.items():
        row[f"{name}_bytes"], row[f"{name}_files"] = disk(where)
    for what, times in (("write", writes), ("read", reads), ("open_min", cells)):
        for name, (wall, cpu) in times.items():
            row[f"{name}_{what}_s"], row[f"{name}_{what}_cpu_s"] = wall, cpu
        for name in times:
            if name != "npz":
                row[f"{name}_over_npz_{what}"] = times[name][0] / times["npz"][0]
                row[f"{name}_over_npz_{what}_cpu"] = times[name][1] / times["npz"][1]
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fleets", type=int, default=20_000)
    parser.add_argument("--chunk-size", type=int, default=2_000)
    parser.add_argument("--jobs", type=int, default=32)
    parser.add_argument("--fires", type=int, default=200)
    parser.add_argument("--trace-fleets", type=int, default=4_000, help="fleets of the layout with the trace")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()

    import warnings

    import xarray
    import zarr

    warnings.filterwarnings("ignore", message="Consolidated metadata is currently not part")
    rows = []
    with tempfile.TemporaryDirectory(prefix="ckpt-store-bench-") as scratch:
        rows.append(measure("lean", args, Path(scratch)))
        trace_args = argparse.Namespace(**{**vars(args), "fleets": args.trace_fleets})
        rows.append(measure("trace", trace_args, Path(scratch)))
    for row in rows:
        print(json.dumps(row, indent=1))
    if args.out is not None:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
        record = {
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "commit": commit,
            "machine": f"{platform.machine()}, {os.cpu_count()} cores",
            "numpy": np.__version__,
            "zarr": zarr.__version__,
            "xarray": xarray.__version__,
            "arguments": {k: str(v) for k, v in vars(args).items()},
            "rows": rows,
        }
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(record, indent=1) + "\n")


if __name__ == "__main__":
    main()
