"""Durations as users write them and as the advice shows them: one parser, one formatter.

``parse_duration("1h30m")`` -> 5400.0; a number alone is seconds. ``format_duration(5400)`` ->
"1.50 h"; the unit follows the size (s below a minute, min below an hour, h above), the same in
every table, note and plot of the advice.
"""

from __future__ import annotations

import math
import re

MAX_DURATION_S = 366 * 86400.0  # a year: longer is a typo, not a plan
UNITS = {"s": 1, "sec": 1, "m": 60, "min": 60, "h": 3600, "hr": 3600, "d": 86400}
_PART = re.compile(r"(\d+(?:\.\d+)?)\s*(sec|min|hr|s|m|h|d)?", re.IGNORECASE)
_WHOLE = re.compile(r"^\s*(?:\d+(?:\.\d+)?\s*(?:sec|min|hr|s|m|h|d)?\s*)+$", re.IGNORECASE)


def parse_duration(text: str) -> float:
    """Seconds of a duration written ``2h``, ``90m``, ``1h30m``, ``3600s`` or ``3600``.

    Raises ValueError (with the accepted forms) for anything else, and for a total that is
    not longer than 0 or is longer than a year.
    """
    if not _WHOLE.match(text):
        raise ValueError(
            f"Cannot read the duration {text!r}: write it like 2h, 90m, 1h30m or 3600s."
        )
    parts = _PART.findall(text)
    if len(parts) > 1 and any(not unit for _, unit in parts):
        raise ValueError(f"Cannot read the duration {text!r}: give each part a unit, e.g. 1h30m.")
    seconds = sum(float(n) * UNITS[(unit or "s").lower()] for n, unit in parts)
    if not (math.isfinite(seconds) and 0 < seconds <= MAX_DURATION_S):
        raise ValueError(f"{text!r} must be longer than 0 and at most 366 days.")
    return seconds


def format_duration(seconds: float, *, tick: bool = False) -> str:
    """``seconds`` in the unit that suits its size: "42 s", "4.8 min", "2.25 h".

    ``tick`` gives the shortest exact form for an axis tick ("30 s", "5 min", "2 h").
    """
    if not math.isfinite(seconds):
        return "-"
    if seconds >= 3600:
        value, unit, digits = seconds / 3600, "h", 2
    elif seconds >= 60:
        value, unit, digits = seconds / 60, "min", 1
    else:
        value, unit, digits = seconds, "s", 0
    if tick:
        return f"{value:g} {unit}"
    return f"{value:.{digits}f} {unit}"


def format_span(low: float, high: float) -> str:
    """An interval in one unit, the unit of its high end: "4.8-5.2 min"."""
    for unit, size in (("h", 3600.0), ("min", 60.0), ("s", 1.0)):
        if high >= size or unit == "s":
            return f"{low / size:.3g}-{high / size:.3g} {unit}"
    raise AssertionError("unreachable")
