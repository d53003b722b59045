"""The one interval type: a value with its bounds, in seconds or USD.

Probe phases (``probes/result.py`` ``PhaseTimes``), prices (``providers/pricing.py``) and
start-up overheads (``providers/overheads.py``) all carry their uncertainty as an
:class:`Interval`; it sits in the ground layer so every layer above can use it. Its
``to_dict`` (``{"value", "low", "high"}``) is the form stored studies hold.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Interval:
    """A value with a lower and upper bound (``low <= value <= high``), in seconds or USD."""

    value: float
    low: float
    high: float

    def __post_init__(self) -> None:
        if not (self.low <= self.value <= self.high):
            raise ValueError(
                f"low <= value <= high must hold, but got low={self.low}, "
                f"value={self.value}, high={self.high}"
            )

    @classmethod
    def exact(cls, value: float) -> Interval:
        """``value`` with no uncertainty."""
        return cls(value, value, value)

    def scale(self, factor: float) -> Interval:
        """Each bound times ``factor`` (>= 0)."""
        return Interval(self.value * factor, self.low * factor, self.high * factor)

    def map(self, f: Callable[[float], float]) -> Interval:
        """``f`` applied to each bound; ``f`` must not decrease (a billing rule, a price)."""
        return Interval(f(self.value), f(self.low), f(self.high))

    def __add__(self, other: Interval) -> Interval:
        """Bounds add, low with low and high with high (fully correlated terms)."""
        return Interval(self.value + other.value, self.low + other.low, self.high + other.high)

    def to_dict(self) -> dict[str, float]:
        return {"value": self.value, "low": self.low, "high": self.high}

    @classmethod
    def from_dict(cls, data: dict[str, Any] | float | int) -> Interval:
        """The inverse of ``to_dict``; a bare number is an exact interval."""
        if isinstance(data, dict):
            return cls(float(data["value"]), float(data["low"]), float(data["high"]))
        return cls.exact(float(data))


ZERO = Interval(0.0, 0.0, 0.0)
