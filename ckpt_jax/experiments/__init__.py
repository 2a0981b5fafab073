"""Experiments: each turns library calls into the evidence for claims of docs/model.md §3.

An experiment is an `Experiment` object (name, title, claims, size table, ``run``), one
per module here (its ``EXPERIMENT``). `EXPERIMENTS` lists them in the order
``ckpt-jax reproduce`` runs them and its report shows them; ``ckpt-jax reproduce --only
NAME``, the top-level ``experiments/run.py`` and the tests all take them from there.

What every experiment is built from (verdicts, sizes, the float64 scope of a run, atomic
JSON and figure writes) is in `ckpt_jax.experiments.framework`, and the decision rules
shared by experiments in `ckpt_jax.experiments.rules`. Importing this package changes no
global state: each ``run`` turns on ``jax_enable_x64`` for itself only (`in_float64`).
"""

from __future__ import annotations

from . import (
    anonymity,
    asynchrony,
    boundary,
    bursts,
    common_causes,
    cooperative,
    ftle,
    intervals,
    invariants,
    jitter,
    memory,
    no_clustering,
    overhead,
    pairwise_neutrality,
    power_steps,
    spectrum,
)
from .framework import (
    INCONCLUSIVE,
    NOT_REPRODUCED,
    PARTIALLY,
    REPRODUCED,
    SIZES,
    VERDICTS,
    Experiment,
    check_size,
    finish,
    fmt,
    in_float64,
    provenance,
    to_jsonable,
    verdict,
    write_json,
)

__all__ = [
    "EXPERIMENTS",
    "Experiment",
    "SIZES",
    "VERDICTS",
    "REPRODUCED",
    "PARTIALLY",
    "INCONCLUSIVE",
    "NOT_REPRODUCED",
    "check_size",
    "finish",
    "fmt",
    "in_float64",
    "provenance",
    "to_jsonable",
    "verdict",
    "write_json",
]

# In the order `ckpt-jax reproduce` runs them.
EXPERIMENTS: tuple[Experiment, ...] = (
    spectrum.EXPERIMENT,
    pairwise_neutrality.EXPERIMENT,
    invariants.EXPERIMENT,
    no_clustering.EXPERIMENT,
    memory.EXPERIMENT,
    ftle.EXPERIMENT,
    bursts.EXPERIMENT,
    jitter.EXPERIMENT,
    boundary.EXPERIMENT,
    anonymity.EXPERIMENT,
    intervals.EXPERIMENT,
    asynchrony.EXPERIMENT,
    power_steps.EXPERIMENT,
    cooperative.EXPERIMENT,
    common_causes.EXPERIMENT,
    overhead.EXPERIMENT,
)
