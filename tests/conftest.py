"""Tests verify in float64 (MODEL.md §4): x64 is enabled before any array is built."""

import jax

jax.config.update("jax_enable_x64", True)
