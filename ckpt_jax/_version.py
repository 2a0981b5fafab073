"""The package version, one home (`ckpt_jax.__version__`; pyproject.toml repeats it)."""

__version__ = "0.1.0"
