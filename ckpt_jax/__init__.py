"""ckpt_jax: exact, GPU-vectorized ensembles of checkpointing fleets (checkpoint storms).

The top level holds the core: fleets and their states, `simulate`, what it records and what
its status bits mean. Everything else is a submodule: `cj.maps` (return maps and their
spectra), `cj.analysis` (statistics of traces), `cj.coupling` (two-job coupling functions),
`cj.ensemble` (many fleets, one run), `cj.design` and `cj.theory` (checkpoint intervals),
`cj.lyapunov` (finite-time Lyapunov exponents), `cj.fleetfile` (fleets from files), `cj.assess`
(goodput and losses by cause of a fleet as configured), `cj.fit` (a fleet file fitted to a
cluster's logs) and `cj.loop` (the stepping primitive).
`open_ensemble` reads a saved ensemble as an `xarray.Dataset` (`cj.ensemble`, labelled by
`cj.labelled`; optional xarray).
"""

import importlib
import importlib.util
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the names as type checkers and editors see them; imported when first used
    from . import analysis as analysis
    from . import assess as assess
    from . import coupling as coupling
    from . import design as design
    from . import ensemble as ensemble
    from . import fit as fit
    from . import fleetfile as fleetfile
    from . import loop as loop
    from . import lyapunov as lyapunov
    from . import maps as maps
    from . import theory as theory
    from ._observe import JobStats as JobStats
    from ._observe import Observer as Observer
    from ._observe import PowerStats as PowerStats
    from ._observe import SaveAt as SaveAt
    from ._observe import WriterStats as WriterStats
    from ._simulate import Trace as Trace
    from ._simulate import simulate as simulate
    from ._status import Status as Status
    from ._status import describe_status as describe_status
    from ._version import __version__ as __version__
    from .ensemble import open_ensemble as open_ensemble
    from .model import POWER_POLICIES as POWER_POLICIES
    from .model import RECOVERY_SOURCES as RECOVERY_SOURCES
    from .model import STORAGE_POLICIES as STORAGE_POLICIES
    from .model import THROUGHPUT_PRESETS as THROUGHPUT_PRESETS
    from .model import Fleet as Fleet
    from .model import State as State
    from .model import check_state as check_state
    from .model import cycle_positions as cycle_positions
    from .model import initial_state as initial_state
    from .model import random_state as random_state
    from .model import solo_cycle_positions as solo_cycle_positions
    from .model import state_from_positions as state_from_positions
    from .model import throughput_table as throughput_table

# Nothing is imported until it is used (PEP 562): ``import ckpt_jax`` costs no JAX import, so
# the command line reads and checks a fleet file before it imports JAX (seconds on a busy
# machine), and `ckpt_jax.__main__` can still set the host device count first.
_SUBMODULES = frozenset(
    {"analysis", "assess", "coupling", "design", "ensemble", "fit", "fleetfile", "loop", "lyapunov", "maps", "theory"}
)
_NAMES = {
    "JobStats": "_observe",
    "Observer": "_observe",
    "PowerStats": "_observe",
    "SaveAt": "_observe",
    "WriterStats": "_observe",
    "Trace": "_simulate",
    "simulate": "_simulate",
    "Status": "_status",
    "describe_status": "_status",
    "__version__": "_version",
    "open_ensemble": "ensemble",
    "POWER_POLICIES": "model",
    "RECOVERY_SOURCES": "model",
    "STORAGE_POLICIES": "model",
    "THROUGHPUT_PRESETS": "model",
    "Fleet": "model",
    "State": "model",
    "check_state": "model",
    "cycle_positions": "model",
    "initial_state": "model",
    "random_state": "model",
    "solo_cycle_positions": "model",
    "state_from_positions": "model",
    "throughput_table": "model",
}


def __getattr__(name: str):
    if name in _SUBMODULES:
        module = importlib.import_module(f".{name}", __name__)
    elif name in _NAMES:
        module = getattr(importlib.import_module(f".{_NAMES[name]}", __name__), name)
    elif not name.startswith("__") and importlib.util.find_spec(f"{__name__}.{name}") is not None:
        module = importlib.import_module(f".{name}", __name__)  # any other module: cj.model, cj.labelled
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = module  # once: later lookups find it without this function
    return module


def __dir__() -> list:
    return sorted(set(globals()) | _SUBMODULES | set(_NAMES))


__all__ = [
    "Fleet",
    "State",
    "Trace",
    "SaveAt",
    "Observer",
    "WriterStats",
    "JobStats",
    "PowerStats",
    "Status",
    "simulate",
    "describe_status",
    "open_ensemble",
    "initial_state",
    "random_state",
    "check_state",
    "state_from_positions",
    "cycle_positions",
    "solo_cycle_positions",
    "throughput_table",
    "THROUGHPUT_PRESETS",
    "POWER_POLICIES",
    "STORAGE_POLICIES",
    "RECOVERY_SOURCES",
    "analysis",
    "assess",
    "coupling",
    "design",
    "ensemble",
    "fleetfile",
    "loop",
    "lyapunov",
    "maps",
    "theory",
]
