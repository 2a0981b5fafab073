"""Shared test setup: float64 is the verification dtype (STYLE.md), so enable x64 at import."""

import jax

jax.config.update("jax_enable_x64", True)
