"""The storage's water-filling with write limits (docs/model.md §1d, `_rates.capped_fill`):
the unit-weight form (``"fair"``: a sorting network and an unrolled prefix sum) gives the
bits of the general form (lexsort, `jnp.cumsum`) with weights 1; the levels the general
loop carries (one pass in the slots' order by limit, or by size for the max-min power rule)
agree with them to 1e-12 relative."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ckpt_jax._rates import (
    NETWORK_MAX_SLOTS,
    Sharing,
    capped_fill,
    controller_load,
    fill_level,
    filled_rates,
    maxmin_level,
)


def _cases(n_fleets, n_jobs, dtype, seed):
    rng = np.random.default_rng([seed, n_jobs])
    members = rng.random((n_fleets, n_jobs)) < rng.uniform(0.1, 1.0, (n_fleets, 1))
    limit = np.where(
        rng.random((n_fleets, n_jobs)) < 0.5,
        rng.choice([0.125, 0.25, 0.5, 1.0], (n_fleets, n_jobs)),  # ties between members
        rng.uniform(0.01, 3.0, (n_fleets, n_jobs)),
    )
    limit[rng.random((n_fleets, n_jobs)) < 0.15] = np.inf  # no limit
    # Up to the members' total cap: many members at their caps, so the level's prefix sum
    # runs over several of them.
    finite = np.where(members & np.isfinite(limit), limit, 0).sum(axis=1)
    total = rng.uniform(0.3, 1.1, n_fleets) * finite + rng.uniform(0.0, 0.2, n_fleets)
    return jnp.asarray(total, dtype), jnp.asarray(limit, dtype), jnp.asarray(members)


@pytest.mark.parametrize("n_jobs", [1, 2, 5, 16, NETWORK_MAX_SLOTS + 3])
@pytest.mark.parametrize("dtype", [jnp.float64, jnp.float32])
def test_unit_weights_give_the_bits_of_the_general_form(n_jobs, dtype):
    total, limit, members = _cases(400, n_jobs, dtype, seed=0)
    unit = jax.jit(jax.vmap(lambda t, b, m: capped_fill(t, b, None, m)))(total, limit, members)
    general = jax.jit(jax.vmap(lambda t, b, m: capped_fill(t, b, jnp.ones_like(b), m)))(total, limit, members)
    np.testing.assert_array_equal(np.asarray(unit), np.asarray(general))
    assert np.asarray(unit).dtype == dtype


def test_unit_weights_by_hand():
    members = jnp.array([True, True, True, False])
    limit = jnp.array([0.1, 0.5, 2.0, 0.01])
    # 0.1 at its cap; the two others share 0.9 (0.45 each: under 0.5 and 2).
    rates = capped_fill(jnp.asarray(1.0), limit, None, members)
    np.testing.assert_allclose(np.asarray(rates), [0.1, 0.45, 0.45, 0.0])
    # 0.1 and 0.5 at their caps, the last gets what is left.
    rates = capped_fill(jnp.asarray(1.6), limit, None, members)
    np.testing.assert_allclose(np.asarray(rates), [0.1, 0.5, 1.0, 0.0])
    # Σ b <= total: everyone at the cap.
    rates = capped_fill(jnp.asarray(5.0), limit, None, members)
    np.testing.assert_allclose(np.asarray(rates), [0.1, 0.5, 2.0, 0.0])


@pytest.mark.parametrize("n_jobs", [1, 2, 5, 27])
def test_the_one_pass_level_in_limit_order_agrees_with_the_general_form(n_jobs):
    """The level the general loop carries (`fill_level`: one pass over the slots in their
    order by limit, up to `NETWORK_MAX_SLOTS` slots) sums the caps left to right and tests
    the fit without dividing: the rates agree with the general form to 1e-12 relative."""
    total, limit, members = _cases(400, n_jobs, jnp.float64, seed=1)
    order = jnp.asarray(np.argsort(np.asarray(limit), axis=-1, kind="stable").astype(np.int32))
    one_pass = jax.jit(jax.vmap(lambda t, b, m, o: filled_rates(b, m, fill_level(t, b, m, o))))(
        total, limit, members, order
    )
    general = jax.jit(jax.vmap(lambda t, b, m: capped_fill(t, b, jnp.ones_like(b), m)))(total, limit, members)
    np.testing.assert_allclose(np.asarray(one_pass), np.asarray(general), rtol=1e-12, atol=0)


@pytest.mark.parametrize("n_jobs", [1, 3, 27])
def test_the_one_pass_power_level_in_size_order_agrees_with_the_sort(n_jobs):
    """The max-min power level read in the slots' size order (`Params.size_order`, one
    pass: the general loop carries it) agrees with the sorted prefix sum of `maxmin_level`
    to 1e-12 relative, inf alike where the cap does not bind."""
    rng = np.random.default_rng([2, n_jobs])
    size = jnp.asarray(
        np.where(
            rng.random((400, n_jobs)) < 0.5,
            rng.choice([1.0, 2.0, 8.0], (400, n_jobs)),
            rng.uniform(0.1, 10.0, (400, n_jobs)),
        )
    )
    computing = jnp.asarray(rng.random((400, n_jobs)) < 0.7)
    cap = jnp.asarray(rng.uniform(0.2, 1.2, 400) * np.asarray(jnp.sum(jnp.where(computing, size, 0), axis=1)))
    order = jnp.asarray(np.argsort(np.asarray(size), axis=-1, kind="stable").astype(np.int32))
    maxmin = Sharing(power="maxmin")
    ordered = jax.jit(jax.vmap(lambda w, c, C, o: controller_load(maxmin, w, c, C, o)))(size, computing, cap, order)
    sorted_ = jax.jit(jax.vmap(maxmin_level))(size, computing, cap)
    np.testing.assert_array_equal(np.isinf(np.asarray(ordered)), np.isinf(np.asarray(sorted_)))
    finite = np.isfinite(np.asarray(sorted_))
    np.testing.assert_allclose(np.asarray(ordered)[finite], np.asarray(sorted_)[finite], rtol=1e-12, atol=0)
