"""Several events per iteration of the loop (`simulate(..., events_per_iteration=k)`): the
driver steps every running fleet k times per `while_loop` iteration, finished fleets
masked, so the results are the same bits for every k; bad values are refused."""

import jax
import numpy as np
import pytest

import ckpt_jax as cj
from ckpt_jax._loops.config import default_events_per_iteration

SAVE = cj.SaveAt(trace=True, jobs=True, writers=True)


def _run(k):
    # Three jobs of three sizes, write limits that bind, a binding cap and failures: the
    # general loop with its carried levels, the failure draws and three observers.
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
    state = cj.initial_state(fleet)
    key = jax.random.PRNGKey(3)
    # Horizons of different lengths: the fleets stop within an iteration's k steps.
    until = np.array([50.0, 83.0, 120.0])
    return cj.simulate(fleet, state, 20, until=until, key=key, method="general", save=SAVE, events_per_iteration=k)


def test_the_results_do_not_depend_on_the_events_per_iteration():
    one, three = _run(1), _run(3)
    assert np.all(np.asarray(one.ok))
    for a, b in zip(jax.tree_util.tree_leaves(one), jax.tree_util.tree_leaves(three)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


@pytest.mark.parametrize("bad", [0, -1, 1025, 2.0, True, "4"])
def test_bad_events_per_iteration_is_refused(bad):
    fleet = cj.Fleet(np.array([10.0, 7.0]), np.array([1.0, 2.0]))
    with pytest.raises(ValueError, match="events_per_iteration"):
        cj.simulate(fleet, cj.initial_state(fleet), 2, events_per_iteration=bad)


def test_default_by_backend():
    assert default_events_per_iteration("cpu") == 1
    assert default_events_per_iteration("gpu") == 4
