"""What a user reads when a fleet file, an assessment or its report goes wrong: errors name the
key the file gave (not the engine's array), combinations the engine cannot run are refused at
load, a share's interval stays in [0, 1], a timeline never loses a finished assessment, and the
report says where the storage peaks rather than a writer count that never occurs."""

import math

import jax
import numpy as np
import pytest

import ckpt_jax as cj
from ckpt_jax._estimate import mean_ci, share_ci
from ckpt_jax.fleetfile import FleetFileError, loads

UNITS = """
time_unit = "h"
{top}
[storage]
peak = "2 TB/s"
saturates_at = {saturates_at}
degradation = {degradation}

[[groups]]
name = "a"
count = 2
gpus = 8
checkpoint = "100 GB"
{group}
"""


def _units(top="", group='mtbf = "10 h"\ninterval = "30 min"', saturates_at=1, degradation=0.1) -> str:
    return UNITS.format(top=top, group=group, saturates_at=saturates_at, degradation=degradation)


def _refusal(text: str) -> str:
    with pytest.raises(FleetFileError) as caught:
        loads(text, "f.toml")
    return str(caught.value)


# -- errors name the file's own key ------------------------------------------------------------


@pytest.mark.parametrize(
    "text, key, not_named",
    [
        (_units(degradation=1e308), "storage.degradation", "throughput["),
        (_units(group='mtbf = "10 h"\ninterval = "1e-300 s"'), "groups[0].interval", "compute"),
        (_units(top='failure_rate_per_gpu = "1e-300 / s"', group='interval = "30 min"'), "failure_rate_per_gpu", ""),
        (
            _units(group='mtbf = "10 h"\nwrite_limit_per_node = "1e-300 B/s"\nnodes = 1'),
            "groups[0].write_limit_per_node",
            "groups[0].write_limit:",
        ),
        (
            'time_unit = "h"\n[storage]\ntable = ["1e-300 B/s"]\n'
            '[[groups]]\ncount = 2\ngpus = 8\ncheckpoint = "100 GB"\nmtbf = "10 h"\n',
            "storage.table[0]",
            "throughput[",
        ),
    ],
)
def test_an_engine_range_error_names_the_key_the_file_gave(text, key, not_named):
    message = _refusal(text)
    assert message.startswith(f"fleet file f.toml: {key}: "), message
    assert not_named == "" or not_named not in message, message
    # In a file with units the engine runs in s, B and B/s: there is no time unit to rescale.
    assert "rescale the time unit" not in message, message


def test_an_mtbf_from_the_failure_rate_names_the_rate_and_the_formula():
    message = _refusal(_units(top='failure_rate_per_gpu = "1e-300 / s"', group='interval = "30 min"'))
    assert "1 / (failure_rate_per_gpu × groups[0].gpus)" in message and message.endswith(" s"), message


def test_a_plain_file_still_names_its_fields_and_the_time_unit_hint():
    plain = 'throughput = "shared"\n[[groups]]\ncount = 1\nsize = 1\nwrite = 0.5\nmtbf = 1e300\n'
    message = _refusal(plain)
    assert message.startswith("fleet file f.toml: groups[0].mtbf: must lie in") and "rescale the time unit" in message


# -- combinations the engine cannot run are refused at load ------------------------------------

PLAIN = """
throughput = "shared"
storage_policy = "{policy}"
{top}
[[groups]]
count = 2
size = 1
write = 0.5
mtbf = 50.0
{group}
"""


@pytest.mark.parametrize(
    "policy, top, group, field",
    [
        ("cooperative", "", "snapshot = 0.1", "groups[0].snapshot"),
        ("fcfs_nonblocking", "", "recovery_read = 0.2", "groups[0].recovery_read"),
        ("cooperative", "fail_while_down = true", "", "fail_while_down"),
        ("fcfs_nonblocking", "async_fraction = 0.5", "", "async_fraction"),
        ("cooperative", "delay = 0.5", "", "delay"),
    ],
)
def test_a_queueing_policy_with_what_it_does_not_serve_is_refused_at_load(policy, top, group, field):
    message = _refusal(PLAIN.format(policy=policy, top=top, group=group))
    assert message.startswith(f"fleet file f.toml: storage_policy: {policy!r}"), message
    assert field in message and "array(" not in message, message


def test_a_queueing_policy_alone_still_loads():
    spec = loads(PLAIN.format(policy="cooperative", top="", group="recovery_read = 0"))
    assert spec.storage_policy == "cooperative"


# -- labelled results name groups -------------------------------------------------------------


TWO_GROUPS = 'throughput = "shared"\n' + "".join(
    f'[[groups]]\nname = "{name}"\ncount = 1\nsize = 1\nwrite = 0.5\nmtbf = 50.0\n' for name in ("a", "b")
)


def test_to_xarray_with_a_fleet_file_of_other_jobs_names_groups():
    pytest.importorskip("xarray")
    fleet = cj.Fleet(np.array([10.0, 12.0, 14.0]), np.array([1.0, 1.0, 1.0]), mtbf=50.0)
    out = cj.simulate(
        fleet, cj.random_state(fleet, jax.random.key(0)), None, until=50.0, key=jax.random.key(1),
        save=cj.SaveAt(trace=False, jobs=True),
    )  # fmt: skip
    assert out.jobs is not None
    with pytest.raises(ValueError, match=r"^groups: the fleet file <string> has 2 jobs, the results 3") as caught:
        out.jobs.to_xarray(fleet, groups=loads(TWO_GROUPS))
    assert "conflicting sizes" not in str(caught.value)


# -- a share's interval stays inside [0, 1] ----------------------------------------------------


@pytest.mark.parametrize(
    "samples",
    [[0.0004, 0.9012], [0.9, 0.99], [0.01, 0.3, 0.0], [0.5, 0.5], [0.0, 0.0], [1.0, 1.0], [-1e-13, 2e-13]],
)
def test_share_ci_stays_inside_zero_one_and_holds_the_mean(samples):
    estimate = share_ci(samples)
    assert estimate.mean == mean_ci(samples).mean
    assert estimate.low <= estimate.mean <= estimate.high
    assert min(0.0, estimate.mean) <= estimate.low and estimate.high <= max(1.0, estimate.mean)


def test_share_ci_is_the_normal_interval_on_the_logit_scale():
    samples = np.array([0.90, 0.91, 0.92, 0.93])
    normal = mean_ci(samples)
    spread = (normal.high - normal.mean) / (normal.mean * (1 - normal.mean))
    logit = math.log(normal.mean / (1 - normal.mean))
    low, high = (1 / (1 + math.exp(-(logit + sign * spread))) for sign in (-1, 1))
    assert share_ci(samples) == pytest.approx((normal.mean, low, high), rel=1e-12)
    assert math.isnan(share_ci([0.3]).low)  # one draw: no interval, as mean_ci
