"""ckpt_jax: exact, GPU-vectorized ensembles of checkpointing fleets (checkpoint storms)."""

from ._simulate import STATUS_MAX_EVENTS as STATUS_MAX_EVENTS
from ._simulate import STATUS_NONFINITE as STATUS_NONFINITE
from ._simulate import STATUS_OK as STATUS_OK
from ._simulate import STATUS_QUEUE_OVERFLOW as STATUS_QUEUE_OVERFLOW
from ._simulate import STATUS_STALLED as STATUS_STALLED
from ._status import Status as Status
from ._validate import value_range as value_range
from ._observe import JobStats as JobStats
from ._observe import Observer as Observer
from ._observe import SaveAt as SaveAt
from ._observe import WriterStats as WriterStats
from ._simulate import Trace as Trace
from ._status import describe_status as describe_status
from ._params import jitter_work as jitter_work
from ._simulate import simulate as simulate
from . import design as design
from . import fleetfile as fleetfile
from . import loop as loop
from . import lyapunov as lyapunov
from . import theory as theory
from .analysis import binomial_baseline as binomial_baseline
from .analysis import mean_writing_fraction as mean_writing_fraction
from .analysis import smallest_gap as smallest_gap
from .analysis import cycles_interleaved as cycles_interleaved
from .analysis import tail_ratio as tail_ratio
from .analysis import writer_distribution as writer_distribution
from .coupling import coupling_function as coupling_function
from .coupling import stagger_lifetime as stagger_lifetime
from .ensemble import EnsembleMismatchError as EnsembleMismatchError
from .ensemble import EnsembleResult as EnsembleResult
from .ensemble import random_launches as random_launches
from .ensemble import run_ensemble as run_ensemble
from .analysis import observed_interval as observed_interval
from .analysis import writer_count as writer_count
from .maps import BRANCH_COLLISION_FREE as BRANCH_COLLISION_FREE
from .maps import BRANCH_MIXED as BRANCH_MIXED
from .maps import BRANCH_OVERLAPPING as BRANCH_OVERLAPPING
from .maps import STATUS_NOT_SMOOTH as STATUS_NOT_SMOOTH
from .maps import STATUS_ORDER_CHANGED as STATUS_ORDER_CHANGED
from .maps import STATUS_OUT_OF_DOMAIN as STATUS_OUT_OF_DOMAIN
from .maps import MapInfo as MapInfo
from .maps import Spectrum as Spectrum
from .maps import gap_return_map as gap_return_map
from .maps import section_map as section_map
from .maps import spectrum as spectrum
from .maps import work_done as work_done
from .model import POWER_POLICIES as POWER_POLICIES
from .model import STORAGE_POLICIES as STORAGE_POLICIES
from .model import THROUGHPUT_PRESETS as THROUGHPUT_PRESETS
from .model import Fleet as Fleet
from .model import State as State
from .model import check_state as check_state
from .model import initial_state as initial_state
from .model import random_state as random_state
from .model import cycle_positions as cycle_positions
from .model import state_from_positions as state_from_positions
from .model import throughput_table as throughput_table

__version__ = "0.1.0"

__all__ = [
    "Fleet",
    "State",
    "Trace",
    "SaveAt",
    "Observer",
    "WriterStats",
    "JobStats",
    "initial_state",
    "check_state",
    "random_state",
    "state_from_positions",
    "cycle_positions",
    "simulate",
    "jitter_work",
    "describe_status",
    "throughput_table",
    "THROUGHPUT_PRESETS",
    "POWER_POLICIES",
    "STORAGE_POLICIES",
    "section_map",
    "gap_return_map",
    "spectrum",
    "work_done",
    "MapInfo",
    "Spectrum",
    "BRANCH_OVERLAPPING",
    "BRANCH_COLLISION_FREE",
    "BRANCH_MIXED",
    "theory",
    "design",
    "fleetfile",
    "lyapunov",
    "loop",
    "smallest_gap",
    "cycles_interleaved",
    "writer_distribution",
    "mean_writing_fraction",
    "binomial_baseline",
    "tail_ratio",
    "writer_count",
    "coupling_function",
    "stagger_lifetime",
    "observed_interval",
    "run_ensemble",
    "random_launches",
    "EnsembleResult",
    "EnsembleMismatchError",
    "STATUS_OK",
    "STATUS_MAX_EVENTS",
    "STATUS_NONFINITE",
    "STATUS_QUEUE_OVERFLOW",
    "STATUS_STALLED",
    "STATUS_ORDER_CHANGED",
    "STATUS_OUT_OF_DOMAIN",
    "STATUS_NOT_SMOOTH",
    "Status",
    "value_range",
]
