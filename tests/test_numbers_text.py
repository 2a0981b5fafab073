"""Numbers as an operator reads them: significant digits kept, times in a unit that shows them
whole, goodput in percent (`ckpt_jax.cli._common`, and the commands' helpers that use it)."""

import pytest

from ckpt_jax.cli._common import duration_text, percent_ci_text, quantity_text, significant


@pytest.mark.parametrize(
    "value, text",
    [
        (1024.0, "1,024"),  # not "1020": an integer part keeps its digits
        (10123.0, "10,123"),
        (4.2734, "4.27"),
        (4.2034, "4.20"),  # a measured value keeps its third digit
        (11.0, "11"),  # a round one shows no trailing zeros
        (0.5, "0.5"),
        (0.03123, "0.0312"),
        (-1024.4, "-1,024"),
        (0.0, "0"),
    ],
)
def test_significant_keeps_the_digits_of_large_numbers(value, text):
    assert significant(value) == text


@pytest.mark.parametrize(
    "seconds, unit, text",
    [
        (660.0, "h", "11 min"),  # not "0.183 h (660 s)"
        (1800.0, "h", "30 min"),
        (5.0, "h", "5 s"),
        (3.25, "min", "3.25 s"),
        (1.63 * 3600, "h", "1.63 h"),
        (604800.0, "min", "10,080 min"),
        (12.5, None, "12.5"),
    ],
)
def test_duration_text_shows_a_short_time_in_a_smaller_unit(seconds, unit, text):
    assert duration_text(seconds, unit) == text


@pytest.mark.parametrize(
    "value, base, text",
    [(1.024e12, "B/s", "1,024 GB/s"), (2e12, "B/s", "2 TB/s"), (1.2e9, "B/s", "1.2 GB/s"), (6.5e12, "B", "6.5 TB")],
)
def test_quantity_text_keeps_the_digits_a_file_gave(value, base, text):
    assert quantity_text(value, base) == text


def test_the_commands_use_them():
    from ckpt_jax.assess import _quantity_text
    from ckpt_jax.cli import assess, design

    assert design.bandwidth_text(1.024e12) == "1,024 GB/s"  # it read "1020 GB/s"
    assert design.volume_text(2.3e12) == "2.3 TB"
    assert assess.duration_text(660.0, "h") == "11 min"
    assert assess._bandwidth(1.024e12, "h") == "1,024 GB/s"  # it read "1.02 TB/s"
    assert assess.power_text(9.83e6, "W") == "9.83 MW"
    # A what-if value is read back: all its digits, in the unit that needs the fewest.
    assert _quantity_text(660.0, "s", "h") == "11 min"  # it read "0.183333333333 h"
    assert _quantity_text(1080.0, "s", "min") == "18 min"  # a number from 1 up, not "0.3 h"
    assert _quantity_text(7.2 * 3600, "s", "h") == "7.2 h"  # the file's unit, not "0.3 day"
    assert _quantity_text(2.2e12, "B/s", "h") == "2.2 TB/s"
    # Goodput in percent, as assess prints it (design printed "0.8630 [0.8601, 0.8659]").
    assert percent_ci_text({"mean": 0.863, "low": 0.8601, "high": 0.8659}) == "86.30 % [86.01, 86.59]"
