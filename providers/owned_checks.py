"""The bounds of a machine you own (issue #50), one table for every reader and writer:
``advisor hardware add``, ``hardware.json`` as ``suggest`` and ``hardware list`` read it,
and the service's ``/v1/hardware`` and its database rows (``advisor.providers.owned``).

Each field has a type and a stated range; a value outside it is one line that names the
field (or the CLI's flag), the range and what the field means. The ranges:

- ``count``: GPUs in one machine, an integer from 1 to ``MAX_GPUS`` (16: the most of any
  single machine in the catalogs, ec2:p2.16xlarge and compute-engine:a2-megagpu-16g; a
  cluster is several machines). A billion H100s at the price and power of four was accepted.
- ``purchase_usd``: above 0, at most USD 1e9 (the CLI's bound on money), so the price per
  hour of use is positive: a machine that costs nothing made the report's "renting is
  cheaper by USD inf (nan%)".
- ``lifetime_h``: 1 hour to 50 years; ``utilisation``: 0.01 to 1 (a share below 1 % made the
  amortisation overflow); so the price per hour is finite.
- ``power_w``: above 0 W, at most 100 kW (16 boards of 1 kW and their host draw about 20 kW);
  ``usd_per_kwh``: 0 (power included) to 100.
- ``vcpus``: an integer from 1 to 4,096 (the catalogs' largest machine has 720);
  ``memory_gib``: 1 GiB to 64 TiB (the largest has 3,968 GiB). Both optional.

A hand-edited ``hardware.json`` is read within ``MAX_FILE_BYTES``, ``MAX_DEPTH`` levels of
nesting (measured on the text, so the JSON decoder never recurses deeply: 200,000 nested
brackets were a ``RecursionError``) and ``MAX_MACHINES`` machines.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

from advisor.errors import AdvisorError

MAX_GPUS = 16
MAX_MACHINES = 256
MAX_FILE_BYTES = 2**20  # a machine takes about 250 bytes
MAX_DEPTH = 8  # {"machines": [{...}]} nests 3 deep
HOURS_PER_YEAR = 8766.0
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$")
BOARD = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
_STRINGS = re.compile(r'"(?:[^"\\]|\\.)*"')
_NOT_BRACKETS = re.compile(r"[^\[\]{}]+")


@dataclass(frozen=True)
class Bound:
    """One numeric field's type and range, the CLI flag that sets it and what it means."""

    low: float
    high: float
    flag: str
    what: str
    integer: bool = False
    low_open: bool = False
    optional: bool = False
    fix: str = ""  # how to give it, where the range alone does not say (--lifetime: 3y)

    def rule(self) -> str:
        """The range in words: "an integer from 1 to 16", "a number above 0 and at most
        1,000,000,000"."""
        kind = "an integer" if self.integer else "a number"
        low = f"{self.low:,g}" if self.low < 1e6 else f"{self.low:g}"
        high = f"{self.high:,.0f}" if self.high >= 1 else f"{self.high:g}"
        if self.low_open:
            return f"{kind} above {low} and at most {high}"
        return f"{kind} from {low} to {high}"


BOUNDS: dict[str, Bound] = {
    "count": Bound(1, MAX_GPUS, "--gpus", "GPUs in one machine; a cluster is several machines",
                   integer=True),
    "purchase_usd": Bound(0, 1e9, "--purchase-usd", "what it cost, USD", low_open=True),
    "lifetime_h": Bound(1, 50 * HOURS_PER_YEAR, "--lifetime",
                        "how long it is used, in hours: 1 h to 50 years",
                        fix="give --lifetime from 1h to 50y, e.g. 3y or 36mo."),
    "power_w": Bound(0, 100_000, "--power-w", "its power draw, W; 100 kW at most",
                     low_open=True),
    "usd_per_kwh": Bound(0, 100, "--usd-per-kwh", "the electricity price, USD per kWh"),
    "utilisation": Bound(0.01, 1, "--utilisation", "the share of its lifetime it is busy"),
    "vcpus": Bound(1, 4096, "--vcpus", "its CPU cores", integer=True, optional=True),
    "memory_gib": Bound(1, 65536, "--memory-gib", "its RAM, GiB", optional=True),
}  # fmt: skip


class FieldError(AdvisorError):
    """A field of a machine you own out of its type or range: ``field`` (its name in the
    record), ``label`` (what the message calls it: a CLI flag) and ``rule`` (what it must
    be); a file's reader re-words it with the file's place."""

    def __init__(self, field: str, label: str, rule: str, fix: str) -> None:
        self.field, self.rule = field, rule
        super().__init__(f"{label} {rule}.", fix)


def shown(value: Any) -> str:
    """A value as an error shows it: short, on one line (a 400-digit count as its length)."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10**12:
        return f"a {len(str(abs(value)))}-digit integer"
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def check_value(field: str, value: Any, label: str) -> int | float | None:
    """``value`` of numeric ``field`` (``BOUNDS``) as its type, or a ``FieldError`` naming it
    as ``label``: the type first (a string "four", a bool, a float count), then finite and
    in range (big integers compared exactly, never converted to an infinite float)."""
    bound = BOUNDS[field]
    if value is None and bound.optional:
        return None
    rule = f"must be {bound.rule()} ({bound.what}), but got {shown(value)}"
    fix = bound.fix or f"give {bound.flag} as {bound.rule()}."
    number = isinstance(value, int | float) and not isinstance(value, bool)
    if not number or (bound.integer and not isinstance(value, int)):
        raise FieldError(field, label, rule, fix)
    if isinstance(value, float) and not math.isfinite(value):
        raise FieldError(field, label, rule, fix)
    low_ok = value > bound.low if bound.low_open else value >= bound.low
    if not (low_ok and value <= bound.high):
        raise FieldError(field, label, rule, fix)
    return int(value) if bound.integer else float(value)


def check_text(field: str, value: Any, pattern: re.Pattern[str], label: str, what: str) -> str:
    """A name or board: a string matching ``pattern``."""
    if not isinstance(value, str) or not pattern.match(value):
        raise FieldError(
            field,
            label,
            f"must be {what} (letters, digits, '.', '_' and '-'), but got {shown(value)}",
            "use letters, digits, '.', '_' and '-' (e.g. rig-4090).",
        )
    return value


def text_depth(text: str) -> int:
    """How deep JSON ``text`` nests brackets (strings left out), without decoding it."""
    brackets = _NOT_BRACKETS.sub("", _STRINGS.sub("", text))
    depth = deepest = 0
    for ch in brackets:
        depth += 1 if ch in "[{" else -1
        deepest = max(deepest, depth)
    return deepest
