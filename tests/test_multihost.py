"""Several processes (`jax.distributed`, CPU collectives over gloo on 127.0.0.1), each
simulating its slice of one ensemble, give the one-process result bit for bit.

The processes run ``docs/multihost_example.py``, the script ``docs/multihost.md``
describes, unchanged.
"""

import importlib.util
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import jax
import numpy as np
import pytest
from conftest import TEST_XLA_FLAGS

import ckpt_jax as cj

SCRIPT = Path(__file__).resolve().parents[1] / "docs" / "multihost_example.py"
N_PROCESSES = 2
TIMEOUT_S = 240  # for all processes together; the run takes a few seconds


def load_script():
    spec = importlib.util.spec_from_file_location("multihost_example", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # defines functions only; main() is not run
    return module


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def run_processes(tmp_path: Path, out: Path) -> list:
    """Starts the script once per process and waits for all; kills all on a timeout."""
    port = free_port()
    env = dict(os.environ, JAX_PLATFORMS="cpu", JAX_NUM_CPU_DEVICES="2")  # 2 devices per process
    env.pop("XLA_FLAGS", None)  # no host device count of the tier's: JAX_NUM_CPU_DEVICES sets it
    if TEST_XLA_FLAGS in os.environ.get("XLA_FLAGS", ""):  # the tier's compile flags
        env["XLA_FLAGS"] = TEST_XLA_FLAGS
    logs, processes = [], []
    try:
        for rank in range(N_PROCESSES):
            log = open(tmp_path / f"process-{rank}.log", "w+b")  # a file: a full pipe cannot block
            logs.append(log)
            argv = [sys.executable, str(SCRIPT), str(N_PROCESSES), str(rank), "--port", str(port)]
            if rank == 0:
                argv += ["--out", str(out)]
            processes.append(subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env))
        deadline = time.monotonic() + TIMEOUT_S
        for process in processes:
            try:
                process.wait(timeout=max(deadline - time.monotonic(), 1))
            except subprocess.TimeoutExpired:
                break
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
                process.wait()
        texts = []
        for log in logs:
            log.seek(0)
            texts.append(log.read().decode(errors="replace"))
            log.close()
    report = "\n".join(
        f"--- process {r} (exit {p.returncode}):\n{t[-3000:]}" for r, (p, t) in enumerate(zip(processes, texts))
    )
    if any(p.returncode != 0 for p in processes):
        pytest.fail(f"a process failed or ran over {TIMEOUT_S} s (killed):\n{report}")
    return texts


@pytest.mark.slow  # two JAX processes started and compiled (about 15 s)
def test_two_processes_give_the_one_process_result_bit_for_bit(tmp_path):
    example = load_script()
    out = tmp_path / "gathered.npz"
    texts = run_processes(tmp_path, out)
    assert f"{N_PROCESSES} processes, {2 * N_PROCESSES} devices: {example.TOTAL}/{example.TOTAL} fleets ok" in texts[0]

    # One process, one device (a CPU, as in the processes), the whole ensemble: the library
    # call itself.
    compute, write, position = example.global_ensemble()
    fleet = cj.Fleet(compute, write, cap=example.CAP)
    state = cj.state_from_positions(fleet, position)
    key = jax.random.key(example.SEED)
    with jax.default_device(jax.devices("cpu")[0]):
        one = example.results(
            cj.simulate(fleet, state, example.K, jitter=example.SIGMA, key=key, save=example.save_at())
        )
        # The comparison sees the keys: process 1's slice drawn without its offset differs.
        half = example.TOTAL // N_PROCESSES
        second = cj.Fleet(compute[half:], write[half:], cap=example.CAP)
        wrong = example.results(
            cj.simulate(
                second,
                cj.state_from_positions(second, position[half:]),
                example.K,
                jitter=example.SIGMA,
                key=key,
                save=example.save_at(),
            )
        )

    with np.load(out) as saved:
        gathered = dict(saved)
    assert sorted(gathered) == sorted(one) == sorted(example.COMPARED)
    for name, expected in one.items():
        got = gathered[name]
        assert got.dtype == expected.dtype and got.shape == expected.shape, name
        np.testing.assert_array_equal(got, expected, err_msg=name)
        assert got.tobytes() == expected.tobytes(), name  # bit for bit, NaN payloads too
    assert one["ok"].all()
    assert not np.array_equal(wrong["fire_times"], one["fire_times"][half:])
