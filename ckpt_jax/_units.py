"""Quantities with units in fleet files ("6.5 TB", "2 TB/s", "17 min", "700 W"), read with pint.

Each kind of quantity has one base unit, the consistent units the engine runs in: bytes, bytes
per second, seconds, watts, and failures per second. pint is imported on the first string with
units, so files of plain numbers never touch it.
"""

from __future__ import annotations

import functools
import json
import math
import re
from typing import NamedTuple

__all__ = ["KINDS", "Kind", "UnitError", "to_base", "duration_unit"]


class Kind(NamedTuple):
    """A kind of quantity: its name, the base unit it converts to and an example."""

    name: str
    base: str
    example: str


# The order matters only for messages: a quantity is named by the first kind it matches.
KINDS = {
    "size": Kind("size", "B", "6.5 TB"),
    "bandwidth": Kind("bandwidth", "B/s", "2 TB/s"),
    "duration": Kind("duration", "s", "17 min"),
    "power": Kind("power", "W", "700 W"),
    "rate": Kind("rate", "1/s", "1 / (50000 h)"),
}


class UnitError(ValueError):
    """A string that is not a quantity of the expected kind; the message says what it is."""


@functools.cache
def _registry():
    """pint's default units with information as a dimension of its own: pint makes the bit
    dimensionless, and then "2 TB/s" would read as a rate and "6.5 TB" as a plain number."""
    from importlib.resources import files

    import pint

    text = files("pint").joinpath("default_en.txt").read_text(encoding="utf-8")
    constants = files("pint").joinpath("constants_en.txt").read_text(encoding="utf-8")
    if text.count("\nbit = []\n") != 1 or text.count("@import constants_en.txt") != 1:
        raise RuntimeError(f"pint {pint.__version__}: its default_en.txt no longer defines `bit = []`")
    text = text.replace("\nbit = []\n", "\nbit = [information]\n").replace("@import constants_en.txt", constants)
    registry = pint.UnitRegistry(None)  # pyright: ignore[reportArgumentType]  (None: empty, as pint documents)
    registry.load_definitions(text.splitlines())
    return registry


@functools.cache
def _dimensions() -> dict:
    registry = _registry()
    return {registry.Quantity(1, kind.base).dimensionality: kind for kind in KINDS.values()}


def _quote(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)


def to_base(text: str, kind: str) -> float:
    """The magnitude of ``text`` (a number and a unit) in ``kind``'s base unit.

    Raises:
      UnitError: ``text`` is not a quantity, has no unit, or is of another kind; the message
        says what it is and what was expected (``"6.5 TB/s" is a bandwidth; expected a size
        such as "6.5 TB"``).
    """
    expected = KINDS[kind]
    wanted = f'expected a {expected.name} such as "{expected.example}"'
    rule = f'must be a plain number or a {expected.name} with its unit, such as "{expected.example}"'
    if "," in text:  # pint would drop it as a thousands separator: "6,5 TB" is 65 TB there
        raise UnitError(f"{rule}; got {_quote(text)}: a comma is not read here, as a decimal point or otherwise")
    if "**" in text or "^" in text:  # pint evaluates powers exactly: "10**10**10 B" never ends
        raise UnitError(f'{rule}; got {_quote(text)}: powers are not read here (write "1e10 B")')
    if not _LEADING_NUMBER.match(text):  # pint reads a bare unit as one of it: "min" is 1 min
        raise UnitError(f"{rule}; got {_quote(text)}, which has no number")
    _check_grammar(text, rule)
    registry = _registry()
    try:
        quantity = registry.Quantity(text)
    except Exception as err:  # noqa: BLE001 - pint raises many kinds of parse errors
        raise UnitError(f"{rule}; got {_quote(text)} ({type(err).__name__}: {err})") from None
    if not isinstance(quantity, registry.Quantity) or quantity.dimensionless:
        raise UnitError(f"{rule}; got {_quote(text)}, which has no unit")
    found = _dimensions().get(quantity.dimensionality)
    if found is None:
        dimension = quantity.dimensionality
        raise UnitError(f"{_quote(text)} is a quantity of dimension {dimension}; {wanted}{_bit_hint(text)}")
    if found.name != kind:
        raise UnitError(f"{_quote(text)} is a {found.name}; {wanted}")
    units = str(quantity.units)
    fraction = [f"{prefix}{unit}" for prefix in _SUB_UNIT for unit in ("byte", "bit") if f"{prefix}{unit}" in units]
    if kind in ("size", "bandwidth") and fraction:  # "800 mB/s" is 0.8 bytes a second, surely MB/s
        raise UnitError(
            f'{_quote(text)} counts in {fraction[0]}s, a fraction of a byte; {wanted} (a capital B for bytes: "MB")'
        )
    try:
        magnitude = quantity.to(expected.base).magnitude
        value = math.nan if isinstance(magnitude, complex) else float(magnitude)
    except (OverflowError, ValueError, TypeError):  # an integer beyond float's range
        value = math.nan
    if not math.isfinite(value):
        raise UnitError(f"{_quote(text)} is not a finite real quantity; {wanted}")
    if kind == "size" and 0 < value < 1:
        raise UnitError(f"{_quote(text)} is less than one byte; {wanted}")
    return value


# A quantity starts with its number ("17 min", "-1e3 s", ".5 h"): pint would read "min" alone.
_LEADING_NUMBER = re.compile(r"\s*[+-]?([0-9]|\.[0-9])")

# The tokens of a quantity: ASCII numbers, unit names (letters, "_"), operators and brackets.
_NUMBER = r"(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?"
_TOKEN = re.compile(rf"\s*(?:(?P<number>{_NUMBER})|(?P<name>[^\W0-9]+)|(?P<operator>[-+*/])|(?P<bracket>[()]))")
_OPERATORS = "*/+-"


def _check_grammar(text: str, rule: str) -> None:
    """Refuses what pint would read in a way the writer hardly meant: a number next to another
    number, a unit or a bracket with no operator between (pint multiplies them: "6 5 TB" is
    30 TB, "8 h 2" is 16 h), and any character that is not an ASCII digit, a letter, ".", "_",
    an operator (+ - * /), a bracket or a space (pint reads superscript digits as powers and
    evaluates them exactly: "10¹⁰⁰⁰⁰⁰⁰⁰⁰⁰ B" never ends)."""
    odd = sorted({c for c in text if not (c.isalpha() or c in "0123456789._+-*/() \t")})
    if odd:
        shown = ", ".join(_quote(c) for c in odd)
        raise UnitError(
            f"{rule}; got {_quote(text)}: {shown} {'is' if len(odd) == 1 else 'are'} not read here "
            '(digits 0-9, units, + - * / and brackets; powers as "1e10 B")'
        )
    position, previous = 0, None  # the kind of the last token before any "("
    while position < len(text.rstrip()):
        token = _TOKEN.match(text, position)
        if token is None:  # a "." alone, say: pint's message names it
            return
        position = token.end()
        if token["number"] is not None:
            if previous not in (None, "operator"):
                raise UnitError(
                    f"{rule}; got {_quote(text)}: the number {token['number']} follows "
                    f"{'another number' if previous == 'number' else 'a unit or a bracket'} with no operator "
                    '(write one number and its unit; a product with its operator, such as "1 / (8 h * 1024)")'
                )
            previous = "number"
        elif token["name"] is not None:
            previous = "name"
        elif token["operator"] is not None:
            previous = "operator"
        elif token["bracket"] == ")":
            previous = "bracket"


def _bit_hint(text: str) -> str:
    """A hint where a lowercase b meant bits: pint reads "Gb" as a gilbert, "Tb" as a barn."""
    meant = re.sub(r"(?<![^\W0-9])([kMGTPE]?i?)b(?![^\W0-9])", r"\1bit", text)
    if meant == text:
        return ""
    return f' (a lowercase b is no bit here: for bits write "{meant}", for bytes a capital B)'


# Prefixes below one: a size in them is a fraction of a byte ("800 mB" is 0.8 bytes, surely MB).
_SUB_UNIT = ("deci", "centi", "milli", "micro", "nano", "pico", "femto", "atto", "zepto", "yocto")


def duration_unit(text: str) -> float:
    """Seconds in the unit ``text`` ("h", "min", "day"); `UnitError` if it is not a time unit,
    or holds a number (a unit is no quantity: "0 h" would make every time 0)."""
    if not isinstance(text, str) or not text.strip() or any(c.isdigit() for c in text):
        raise UnitError(f"{_quote(str(text))} is not a unit of time such as h, min or s (a unit holds no number)")
    return to_base(f"1 {text}", "duration")
