"""What the library shows a user: errors for missing keys, scalar fields, short reprs,
fleet indexing of a `Trace`, status descriptions of arrays; and what the CLI draws."""

import jax
import numpy as np
import pytest

import ckpt_jax as cj

FLEET = cj.Fleet(np.full((3, 4), 10.0), np.full((3, 4), 1.0))


@pytest.fixture(scope="module")
def trace():
    return cj.simulate(FLEET, cj.random_state(FLEET, jax.random.key(0)), 3)


# -- a key is required where a run draws random numbers -----------------------------------------
@pytest.mark.parametrize("kwargs", [dict(jitter=0.5), dict(jitter=[0.0, 0.0, 0.1])])
def test_jitter_without_a_key_is_refused(kwargs):
    with pytest.raises(ValueError, match=r"^key is needed.*jitter"):
        cj.simulate(FLEET, cj.initial_state(FLEET), 3, **kwargs)


def test_drawn_failures_without_a_key_are_refused_but_listed_ones_need_none():
    fleet = cj.Fleet([10.0, 10.0], 1.0, mtbf=50.0)
    with pytest.raises(ValueError, match=r"^key is needed.*mtbf"):
        cj.simulate(fleet, cj.initial_state(fleet), 3, until=20.0)
    listed = cj.simulate(fleet, cj.initial_state(fleet), 3, until=20.0, failure_times=[[5.0], [np.inf]])
    assert bool(listed.ok)


def test_no_randomness_needs_no_key(trace):
    again = cj.simulate(FLEET, cj.random_state(FLEET, jax.random.key(0)), 3, jitter=0.0)
    np.testing.assert_array_equal(again.fire_times, trace.fire_times)


def test_ensemble_with_jitter_needs_a_key():
    def chunk(start, stop):
        fleet = cj.Fleet(np.full((stop - start, 4), 10.0), np.full((stop - start, 4), 1.0))
        return fleet, cj.initial_state(fleet)

    with pytest.raises(ValueError, match=r"^key is needed.*jitter"):
        cj.ensemble.run_ensemble(chunk, 3, 3, chunk_size=3, jitter=0.1, progress=False)


# -- per-job fields accept scalars alike -----------------------------------------------------
def test_compute_or_write_may_be_a_scalar():
    by_write = cj.Fleet(compute=np.array([10.0, 12.0]), write=1.0)
    by_compute = cj.Fleet(compute=10.0, write=[1.0, 2.0], mtbf=30.0)
    np.testing.assert_array_equal(by_write.write, [1.0, 1.0])
    np.testing.assert_array_equal(by_compute.compute, [10.0, 10.0])
    with pytest.raises(ValueError, match="compute or write must have a trailing job axis"):
        cj.Fleet(10.0, 1.0)


# -- describe_status of an array ----------------------------------------------------------------
def test_describe_status_takes_an_array():
    assert cj.describe_status(np.zeros(5, np.int32)) == "ok"
    text = cj.describe_status(np.array([0, 1, 3, 0]))
    assert text.startswith("2 of 4 not ok: hit the event budget") and "(2 of 4)" in text and "(1 of 4)" in text
    assert cj.describe_status(np.int32(2)) == cj.describe_status(2)
    with pytest.raises(ValueError, match="status must be an integer"):
        cj.describe_status("1")


# -- short reprs --------------------------------------------------------------------------------
def test_reprs_are_short_and_name_the_shapes():
    fleet = cj.Fleet(np.linspace(5.0, 20.0, 32), np.full(32, 1.0), mtbf=100.0, size=np.arange(1, 33))
    text = repr(fleet)
    assert len(text) < 300 and "n_jobs=32" in text and "compute=[5..20]" in text and "mtbf=100" in text
    out = cj.simulate(fleet, cj.initial_state(fleet), 20, until=50.0, key=jax.random.key(1), save=cj.SaveAt(jobs=True))
    text = repr(out)
    assert len(text) < 300 and "(32, 20)" in text and "JobStats" in text


# -- a Trace indexes its fleets, as a Fleet does ---------------------------------------------------
def test_trace_index_picks_fleets(trace):
    one = trace[1]
    assert isinstance(one, cj.Trace) and one.fire_times.shape == (4, 3)
    np.testing.assert_array_equal(one.fire_times, np.asarray(trace.fire_times)[1])
    assert one.ok.shape == () and bool(one.ok) == bool(trace.ok[1])
    assert trace[1:].fire_times.shape == (2, 4, 3)
    assert trace[np.array([True, False, True])].time.shape == (2,)
    with pytest.raises(IndexError):
        trace[3]
    with pytest.raises(IndexError):
        one[0]
    # Not a tuple of fields: iterating goes over the fleets, as for a NumPy array.
    first, *rest = trace
    assert len(rest) == 2 and first.fire_times.shape == (4, 3)
    with pytest.raises(TypeError):
        iter(one)


# -- the design's figures ---------------------------------------------------------------------
def _spec(names):
    from types import SimpleNamespace

    return SimpleNamespace(
        groups=[SimpleNamespace(name=n) for n in names], names=list(names), has_snapshots=False, time_unit=None
    )


def _labels(axis):
    axis.figure.canvas.draw()
    lo, hi = axis.get_ylim()
    return [t.get_text() for t, v in zip(axis.get_yticklabels(), axis.get_yticks()) if lo <= v <= hi and t.get_text()]


def test_objective_figure_labels_the_interval_axis_and_stars_the_recommendation():
    from ckpt_jax.cli import _design_figures as figures

    steps = 8
    intervals = np.stack([np.linspace(14.1, 18.6, steps), np.linspace(14.1, 8.1, steps)], axis=1)  # within a decade
    summary = {
        "history": {
            "objective": np.linspace(0.68, 0.63, steps).tolist(),
            "stderr": [0.005] * steps,
            "intervals": intervals.tolist(),
        },
        "groups": [{"design": 17.0}, {"design": 9.9}],
        "recommended_from_last_steps": 4,
    }
    figure = figures.objective_figure(_spec(["1-gpu", "$\\nosuchmacro{$"]), summary)
    left, right = figure.axes[:2]
    assert len(_labels(right)) >= 4 and len(_labels(left)) >= 4
    stars = [line for line in right.get_lines() if line.get_marker() == "*" and len(line.get_xdata())]
    assert sorted(float(line.get_ydata()[0]) for line in stars) == [9.9, 17.0]
    assert "recommended" in [t.get_text() for t in right.get_legend().get_texts()]
    figures.close(figure)


def test_waste_figure_names_each_baseline_plainly():
    from ckpt_jax.cli import _design_figures as figures

    names = ["design", "young", "daly", "young_contended"]
    per_group = np.random.default_rng(0).uniform(0.1, 0.2, (4, 6, 2))
    figure = figures.waste_figure(_spec(["a", "b"]), per_group, names)
    labels = [t.get_text() for t in figure.axes[0].get_legend().get_texts()]
    assert labels == ["Young", "Daly", "contended Young", "design"]
    figures.close(figure)


def test_writers_figure_says_when_a_set_has_no_defined_draw():
    from ckpt_jax.cli import _design_figures as figures

    names = ["design", "young"]
    writers = np.array([[0.2, 0.5, 0.3], [np.nan] * 3])
    figure = figures.writers_figure(writers, names, {"design": 5, "young": 0})
    axis = figure.axes[0]
    heights = [p.get_height() for p in axis.patches]
    assert heights == [0.2, 0.5, 0.3]
    assert any("undefined" in t.get_text() for t in axis.texts)
    figures.close(figure)


def test_names_are_escaped_for_markdown_and_figures():
    from ckpt_jax.cli._design_figures import figure_text
    from ckpt_jax.cli.design import markdown_text

    assert markdown_text("a|b\n# c") == "a\\|b\\\\n\\# c"  # renders as a|b\n# c, on one line
    assert markdown_text("&lt;b&gt;") == "\\&lt;b\\&gt;"  # an entity would render as <b>
    assert figure_text("$\\x{$") == "\\$\\x{\\$"
    assert "\n" not in figure_text("a\nb")


def test_headline_names_the_groups_that_gain_and_pay():
    from ckpt_jax.cli.design import BASELINES, headline

    estimate = lambda mean, half=0.004: {"mean": mean, "low": mean - half, "high": mean + half}  # noqa: E731
    names = ["1-gpu", "2-gpu", "8-gpu"]
    summary = {
        "steps_taken": 60,
        "stopped_early": True,
        "settings": {"quick": False},
        "baselines": {name: {"saved": estimate(0.02)} for name in BASELINES},
        "per_group_saved": {name: [estimate(-0.036), estimate(0.001), estimate(0.04)] for name in BASELINES},
        "per_group": {
            "design": [estimate(0.124), estimate(0.2), estimate(0.5)],
            **{name: [estimate(0.088), estimate(0.2), estimate(0.54)] for name in BASELINES},
        },
    }
    lines = headline(summary, names)
    assert lines[0].startswith("Converged")
    assert lines[1] == (
        "Against Young: the design saves fleet waste (+0.0200 [+0.0160, +0.0240]); per group: "
        "8-gpu gain; 1-gpu (0.0880 -> 0.1240) pays; 2-gpu within the noise."
    )
    summary.update(stopped_early=False, settings={"quick": True})
    assert headline(summary, names)[0].startswith("NOT CONVERGED: 60 steps (the --quick budget)")


# -- trace.png ------------------------------------------------------------------------------
def _windows(axis):
    from matplotlib.collections import PolyCollection

    (collection,) = [c for c in axis.collections if isinstance(c, PolyCollection)]
    return [path.vertices for path in collection.get_paths()]


def _shaded(axis):
    return sorted(
        (round(float(p.get_x()), 9), round(float(p.get_x() + p.get_width()), 9))
        for p in axis.patches
        if p.get_facecolor()[:3] == (0.9, 0.9, 0.9)
    )


def test_every_write_window_keeps_a_drawn_width():
    from ckpt_jax.plotting import MIN_WIDTH_FRACTION, plot_trace

    # Job 1's writes last 1e-6 of a 1000-long run: far below a pixel.
    fire = np.array([np.arange(0.0, 1000.0, 100.0), np.arange(50.0, 1000.0, 100.0)])
    end = np.array([fire[0] + 20.0, fire[1] + 1e-6])
    figure = plot_trace(fire, end)
    axis = figure.axes[0]
    widths = np.array([v[:, 0].max() - v[:, 0].min() for v in _windows(axis)])
    span = axis.get_xlim()[1] - axis.get_xlim()[0]
    assert span > 900 and widths.size == 20 and np.all(widths >= MIN_WIDTH_FRACTION * span * (1 - 1e-9))
    assert np.all(widths[:10] == 20.0)  # wide windows are drawn as they are


def test_a_long_writer_count_is_drawn_per_time_bin():
    from ckpt_jax.plotting import plot_trace

    rng = np.random.default_rng(1)
    fire = np.cumsum(rng.uniform(0.5, 1.5, (4, 400)), axis=1)
    end = fire + rng.uniform(0.05, 0.4, fire.shape)
    figure = plot_trace(fire, end)
    count_ax = figure.axes[1]
    drawn = sum(
        len(p.vertices)
        for artist in count_ax.patches + count_ax.lines
        for p in ([artist.get_path()] if hasattr(artist, "get_path") else [])
    )
    assert drawn < 2 * 3200  # not one vertex pair per change of n_w (3,200 changes)
    labels = [t.get_text() for t in count_ax.get_legend().get_texts()]
    assert any("averaged per bin" in label for label in labels)


def test_binned_writer_count_keeps_the_time_integral_and_the_peaks():
    from ckpt_jax.analysis import writer_count
    from ckpt_jax.plotting import _binned

    fire = np.array([[1.0, 4.0, 7.5], [1.5, 4.2, 9.0]])
    end = fire + np.array([[1.0, 0.5, 1.0], [0.25, 0.1, 0.5]])
    times, counts = writer_count(fire, end)
    edges, mean, top = _binned(times, counts, 10.0, 7)
    integral = np.sum(np.diff(np.append(times, 10.0)) * counts)  # n_w = counts[i] on [times[i], times[i + 1])
    assert np.isclose(np.sum(mean * np.diff(edges)), integral)
    assert top.max() == 2 and np.all(mean <= top + 1e-12)


def test_horizon_run_is_shaded_only_where_it_is_not_recorded():
    from ckpt_jax.plotting import plot_trace

    # A run to H = 150 with K = 20 columns: job 0 fires every 11, job 1 once (its MTBF
    # or its long compute); no job filled its columns, so every firing up to H is there.
    fire = np.full((2, 20), np.nan)
    fire[0, :13] = 11.0 * np.arange(13) + 5.0
    fire[1, 0] = 100.0
    end = fire + 1.0
    end[0, 5] = np.nan  # abandoned at a failure
    figure = plot_trace(
        fire,
        end,
        until=150.0,
        groups=([0, 1], ["a", "$\\nosuchmacro{$"]),
        failures=[1, 0],
        down_time=[0.5, 0.0],
        title="$\\x{$",
    )
    gantt = figure.axes[0]
    assert _shaded(gantt) == [(0.0, 100.0)]
    assert gantt.get_xlim() == (0.0, 150.0)
    assert [t.get_text() for t in gantt.get_yticklabels()] == ["a", "\\$\\nosuchmacro{\\$"]
    assert [t.get_text() for t in gantt.texts] == ["1 fail., down 0.5", "0 fail., down 0"]
    (ticks,) = [line for line in gantt.get_lines() if line.get_marker() == "|"]
    np.testing.assert_array_equal(ticks.get_xdata(), [60.0])
    import io

    figure.savefig(io.BytesIO(), format="png")  # the mathtext-hostile names draw
