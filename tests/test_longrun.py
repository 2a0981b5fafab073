"""Long runs say so: a run to a horizon shows its progress in simulated time, and a run
that cannot finish within the event budget is refused before it starts."""

import jax
import numpy as np
import pytest

import ckpt_jax as cj
from ckpt_jax import _progress

MADE = []  # the bars of the running test


class _Bar:
    """Records what a progress bar was asked to show."""

    def __init__(self, **kwargs):
        self.kwargs, self.n, self.updates = kwargs, 0, 0
        MADE.append(self)

    def update(self, step):
        self.n += step
        self.updates += 1

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


@pytest.fixture
def bars(monkeypatch):
    """Every run counts as long; bars are recorded, not drawn."""
    MADE.clear()
    monkeypatch.setattr(_progress, "LONG_RUN", 1, raising=False)
    monkeypatch.setattr(_progress, "progress_bar", _Bar)
    return MADE


def test_a_run_to_a_horizon_shows_progress_in_simulated_time(bars):
    # n_fires=None: nothing sizes a trace, the horizon alone says how long the run is.
    fleet = cj.Fleet(np.full(3, 10.0), np.full(3, 1.0), mtbf=np.full(3, 50.0))
    out = cj.simulate(
        fleet, cj.initial_state(fleet), None, until=400.0, key=jax.random.key(0), save=cj.SaveAt(trace=False, jobs=True)
    )
    assert bool(out.ok)
    assert len(bars) == 1, "a long run to a horizon shows a bar"
    bar = bars[0]
    assert bar.kwargs["unit"] == "% of H" and bar.kwargs["total"] == 100
    assert bar.updates > 5, "the bar moves while the run goes on, not only at its end"
    assert bar.n == pytest.approx(100)


def test_a_fast_path_run_to_a_horizon_shows_progress(bars, monkeypatch):
    from ckpt_jax import sharding

    monkeypatch.setattr(sharding, "CPU_MAX_BLOCK", {"fifo": 2, "clock": 2})
    monkeypatch.setattr(sharding, "CPU_MIN_BLOCK", 2)
    fleet = cj.Fleet(np.full((4, 2), 10.0), np.full((4, 2), 1.0))
    out = cj.simulate(
        fleet, cj.initial_state(fleet), None, until=50.0, method="clock", save=cj.SaveAt(trace=False, jobs=True)
    )
    assert np.all(out.ok)
    assert len(bars) == 1 and bars[0].n == 4  # fleets done, block by block


@pytest.mark.parametrize("mtbf", [None, 100.0], ids=["no failures", "failures"])
def test_a_horizon_beyond_the_event_budget_is_refused_before_it_starts(mtbf):
    fleet = cj.Fleet(np.full(4, 10.0), np.full(4, 1.0), mtbf=None if mtbf is None else np.full(4, mtbf))
    with pytest.raises(ValueError, match=r"until = 1e\+15 cannot finish within the event budget.*lower until"):
        cj.simulate(
            fleet,
            cj.initial_state(fleet),
            None,
            until=1e15,
            key=jax.random.key(0),
            save=cj.SaveAt(trace=False, jobs=True),
        )


def test_a_budget_the_caller_chose_still_stops_a_long_run():
    # An explicit max_events is a request: the run stops flagged, it is not refused.
    fleet = cj.Fleet(np.full(4, 10.0), np.full(4, 1.0))
    out = cj.simulate(
        fleet,
        cj.initial_state(fleet),
        None,
        until=1e15,
        max_events=50,
        save=cj.SaveAt(trace=False, jobs=True),
        method="general",
    )
    assert not bool(out.ok) and int(out.status) & cj.Status.MAX_EVENTS


def test_the_event_estimate_counts_cycles_and_failures():
    # Two jobs of solo period 10 + 2/1 and one of 5 + 1: 2 switches per cycle; a job of
    # MTBF 98 and restart 2 fails about H / 100 times, with a restart end each (the others
    # about never).
    fleet = cj.Fleet([10.0, 10.0, 5.0], [2.0, 2.0, 1.0], mtbf=[1e15, 98.0, 1e15], restart=[0.0, 2.0, 0.0])
    assert fleet.events(1200.0) == pytest.approx(2 * (100 + 100 + 200) + 2 * 12)


def test_a_design_horizon_beyond_the_event_budget_is_refused_naming_it():
    from ckpt_jax import design

    fleet = cj.Fleet([1.0, 1.0], [0.5, 1.0], mtbf=[10.0, 20.0], restart=0.2)
    with pytest.raises(ValueError, match=r"^horizon = 1e\+12 cannot finish within the event budget"):
        design.checkpoint_intervals(
            fleet, bounds=(0.5, 30.0), horizon=1e12, n_draws=2, key=jax.random.key(0), progress=False
        )
