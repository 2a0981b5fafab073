"""The general loop's compiled body stays lean (docs/performance.md): its loop state is
updated in place, not copied once per iteration (`driver.LOOP_COMPILER_OPTIONS`)."""

import re

import jax
import numpy as np

import ckpt_jax as cj
from ckpt_jax._loops import driver


def _while_body(text):
    """The instructions of the outermost while loop's body in an HLO module's text."""
    body = re.findall(r"body=%?([\w.\-]+)", text)[-1]
    return text.split("\n%" + body + " ")[1].split("\n}")[0].splitlines()


def test_the_loop_state_is_updated_in_place(monkeypatch):
    # Write limits, a binding max-min cap, failures and the jobs observer: the state of the
    # operator's path. XLA's default copy insertion copied 20 buffers per iteration here.
    fleet = cj.Fleet(
        np.array([[10.0, 7.0, 12.5]] * 3),
        np.array([[1.0, 2.0, 1.5]] * 3),
        size=[1.0, 2.0, 3.0],
        cap=4.0,
        power_policy="maxmin",
        write_limit=[0.6, 0.4, 0.5],
        mtbf=[40.0, 60.0, 30.0],
        restart=2.0,
    )
    texts = []
    jitted = driver.advance_jit

    def compiled(config, part, *args):
        executable = jitted.lower(config, part, *args).compile()
        texts.append(executable.as_text())
        return executable(part, *args)

    monkeypatch.setattr(driver, "advance_jit", compiled)
    save = cj.SaveAt(trace=False, jobs=True)
    cj.simulate(fleet, cj.initial_state(fleet), 20, until=100.0, key=jax.random.PRNGKey(3), method="general", save=save)
    assert len(texts) == 1, "the loop did not run"
    copies = sum(" copy(" in line for line in _while_body(texts[0]))
    assert copies <= 8, f"{copies} copies of the loop state per iteration"
